//! GPU time per kernel for the profiler (`liandan_tensor::profile`), from timestamp queries.
//!
//! While a profiling session runs on an adapter with `TIMESTAMP_QUERY`, each dispatch gets a
//! compute pass of its own whose beginning and end write a timestamp (rather than sharing the
//! batch's pass, so profiling costs a little launch time). At submit the batch's timestamps are
//! resolved into a buffer that is mapped without waiting; the next read-back or `synchronize`
//! (which waits for the GPU anyway) reads them and reports each kernel's time to the op call
//! that recorded it. Without a session nothing here runs.

use std::sync::Mutex;

/// A batch's resolved timestamps on their way back, and the op call of each dispatch.
struct Pending {
    buffer: wgpu::Buffer,
    ops: Vec<u64>,
}

pub(crate) struct Timer {
    queries: wgpu::QuerySet,
    /// Nanoseconds per timestamp tick.
    period: f64,
    pending: Mutex<Vec<Pending>>,
}

impl Timer {
    /// A timer for `device` with room for `count` timestamps (two a dispatch of a batch), or
    /// `None` when it cannot write timestamps.
    pub(crate) fn new(device: &wgpu::Device, queue: &wgpu::Queue, count: u32) -> Option<Timer> {
        if !device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return None;
        }
        let queries = device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("liandan kernel timestamps"), ty: wgpu::QueryType::Timestamp, count });
        Some(Timer { queries, period: queue.get_timestamp_period() as f64, pending: Mutex::default() })
    }

    /// The op call a dispatch recorded now belongs to, when it should be timed.
    pub(crate) fn op() -> Option<u64> {
        liandan_tensor::profile::current_op()
    }

    /// The timestamp writes around the `i`-th timed dispatch of a batch.
    pub(crate) fn writes(&self, i: usize) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * i as u32),
            end_of_pass_write_index: Some(2 * i as u32 + 1),
        }
    }

    /// Records, at the end of a batch's encoder, the copy of its timestamps into a buffer the
    /// host can map; `ops` names each timed dispatch's op call. Returns what `submitted` takes.
    pub(crate) fn resolve(&self, device: &wgpu::Device, encoder: &mut wgpu::CommandEncoder, ops: Vec<u64>) -> Option<(wgpu::Buffer, Vec<u64>)> {
        if ops.is_empty() {
            return None;
        }
        let n = 2 * ops.len() as u32;
        let bytes = n as u64 * 8;
        let buffer = |usage| device.create_buffer(&wgpu::BufferDescriptor { label: Some("liandan timestamps"), size: bytes, usage, mapped_at_creation: false });
        let resolved = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let readable = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        encoder.resolve_query_set(&self.queries, 0..n, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &readable, 0, bytes);
        Some((readable, ops))
    }

    /// After the batch's submit: asks for the timestamps without waiting for them.
    pub(crate) fn submitted(&self, (buffer, ops): (wgpu::Buffer, Vec<u64>)) {
        buffer.slice(..).map_async(wgpu::MapMode::Read, |_| ());
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).push(Pending { buffer, ops });
    }

    /// After the host has waited for all submitted work: reports every batch's kernel times.
    pub(crate) fn collect(&self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        for p in pending {
            // A mapping that failed (a lost device) loses that batch's times, nothing else.
            let Ok(range) = p.buffer.slice(..).get_mapped_range() else { continue };
            let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&range);
            drop(range);
            p.buffer.unmap();
            for (op, t) in p.ops.iter().zip(ticks.chunks_exact(2)) {
                let nanos = (t[1].saturating_sub(t[0]) as f64 * self.period) as u64;
                liandan_tensor::profile::record_gpu(*op, nanos);
            }
        }
    }
}
