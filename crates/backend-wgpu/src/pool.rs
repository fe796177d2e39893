//! The caching allocator: freed buffers return to a pool by size class and are reused, so a
//! training loop that allocates the same shapes every step stops allocating after warm-up and
//! its memory stays flat (the `torch.mps` caching-allocator behaviour, with its statistics).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use liandan_tensor::{Error, MemoryStats, Result};

use crate::bind::BindGroups;

/// Rounds a request up to its size class: powers of two up to 4 KiB, then eighth steps between
/// powers of two up to 1 MiB (at most 12.5% waste), sixteenth steps above (at most 6.25%),
/// always a multiple of 256 bytes. The peak counts whole classes, and most of a training
/// step's memory is in large buffers, so those are cut finest; a loop of fixed shapes reuses
/// its classes all the same.
pub(crate) fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    if b <= 4096 {
        return b.next_power_of_two();
    }
    let top = 63 - b.leading_zeros() as u64; // 2^top <= b
    let step = 1u64 << (top - if top < 20 { 3 } else { 4 });
    // Saturating: a request near 2^64 is refused by the caller's size check, not an overflow.
    b.div_ceil(step).saturating_mul(step)
}

pub(crate) struct Pool {
    device: wgpu::Device,
    usage: wgpu::BufferUsages,
    max_buffer: u64,
    state: Mutex<PoolState>,
    /// Bind groups over these buffers, kept for reuse: they hold buffers alive, so they are
    /// dropped whenever the pool returns its buffers to the driver.
    pub(crate) bind_groups: BindGroups,
}

#[derive(Default)]
struct PoolState {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    stats: MemoryStats,
    /// Bytes live and pooled buffers may hold together (`Device::set_memory_budget`).
    budget: Option<u64>,
    /// Where each live buffer was made, under `LIANDAN_MEMORY_BREAKDOWN=1`.
    trace: Option<Trace>,
}

/// The live buffers by the op call that made them, and a copy of that table at the peak: what
/// `Device::memory_breakdown` prints.
#[derive(Default)]
struct Trace {
    next: u64,
    live: HashMap<u64, Made>,
    at_peak: Vec<Made>,
}

#[derive(Clone)]
struct Made {
    /// `layer path: op` while a profiling session runs (`liandan profile`), else a placeholder.
    at: String,
    class: u64,
    asked: u64,
}

/// A buffer on loan from the pool; it goes back when dropped.
pub(crate) struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    pool: Arc<Pool>,
    /// Its key in the pool's [`Trace`] (0: untraced).
    traced: u64,
}

impl PooledBuffer {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("pooled buffer used after release")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.pool.release(b, self.traced);
        }
    }
}

impl Pool {
    /// The pool of `device`; with `trace`, it records where each buffer was made.
    pub(crate) fn new(device: wgpu::Device, max_buffer: u64, trace: bool) -> Arc<Pool> {
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let trace = trace.then(Trace::default);
        let state = Mutex::new(PoolState { trace, ..PoolState::default() });
        Arc::new(Pool { device, usage, max_buffer, state, bind_groups: BindGroups::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of at least `bytes` bytes, reused from the pool when one of its class is free.
    pub(crate) fn alloc(self: &Arc<Self>, bytes: u64, device_name: &str) -> Result<PooledBuffer> {
        let class = size_class(bytes);
        if class > self.max_buffer {
            return Err(Error::Backend {
                backend: device_name.to_string(),
                op: "alloc",
                detail: format!("{bytes} bytes asked for, but this device's largest buffer is {} bytes (max_buffer_size)", self.max_buffer),
            });
        }
        let at = || liandan_tensor::profile::current_call().unwrap_or_else(|| "(outside a profiling session)".into());
        {
            let mut st = self.lock();
            // The lowest buffer of the class (each list is kept in descending order).
            if let Some(buffer) = st.free.get_mut(&class).and_then(Vec::pop) {
                st.stats.pooled -= class;
                let traced = Self::lend(&mut st, class, bytes, at);
                return Ok(PooledBuffer { buffer: Some(buffer), pool: self.clone(), traced });
            }
        }
        self.check_budget(class, device_name)?;
        let buffer = self.create(class, device_name)?;
        let mut st = self.lock();
        st.stats.allocations += 1;
        let traced = Self::lend(&mut st, class, bytes, at);
        Ok(PooledBuffer { buffer: Some(buffer), pool: self.clone(), traced })
    }

    /// Counts a buffer of `class` bytes (`asked` of them wanted) as in use, and traces it.
    fn lend(st: &mut PoolState, class: u64, asked: u64, at: impl FnOnce() -> String) -> u64 {
        st.stats.in_use += class;
        let new_peak = st.stats.in_use > st.stats.peak;
        st.stats.peak = st.stats.peak.max(st.stats.in_use);
        let Some(trace) = st.trace.as_mut() else { return 0 };
        trace.next += 1;
        trace.live.insert(trace.next, Made { at: at(), class, asked });
        if new_peak {
            trace.at_peak = trace.live.values().cloned().collect();
        }
        trace.next
    }

    /// A new buffer of `class` bytes must fit the budget, after the pool is emptied if need be.
    fn check_budget(&self, class: u64, device_name: &str) -> Result<()> {
        let Some(budget) = self.lock().budget else { return Ok(()) };
        let held = |st: &PoolState| st.stats.in_use + st.stats.pooled;
        if held(&self.lock()) + class > budget {
            self.empty();
        }
        let in_use = self.lock().stats.in_use;
        if in_use + class > budget {
            return Err(Error::OutOfMemory {
                op: "alloc",
                bytes: class as u128,
                detail: format!("{device_name}'s memory budget of {budget} bytes has {} left (Device::set_memory_budget)", budget.saturating_sub(in_use)),
            });
        }
        Ok(())
    }

    pub(crate) fn set_budget(&self, bytes: Option<u64>) {
        self.lock().budget = bytes;
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.peak = st.stats.in_use;
        if let Some(trace) = st.trace.as_mut() {
            trace.at_peak = trace.live.values().cloned().collect();
        }
    }

    /// The buffers live at the peak, grouped by where they were made (phase, then op call),
    /// biggest first; `None` unless `LIANDAN_MEMORY_BREAKDOWN=1`.
    pub(crate) fn breakdown(&self) -> Option<String> {
        let st = self.lock();
        let trace = st.trace.as_ref()?;
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let group = |key: &dyn Fn(&Made) -> String| {
            let mut by: HashMap<String, (u64, u64, u64)> = HashMap::new();
            for m in &trace.at_peak {
                let e = by.entry(key(m)).or_default();
                *e = (e.0 + 1, e.1 + m.class, e.2 + m.asked);
            }
            let mut rows: Vec<_> = by.into_iter().collect();
            rows.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
            rows
        };
        let (class, asked) = trace.at_peak.iter().fold((0, 0), |(c, a), m| (c + m.class, a + m.asked));
        let mut o = format!(
            "live at the peak: {} buffers, {:.1} MiB in size classes, {:.1} MiB asked for ({:.1} MiB rounding)\n",
            trace.at_peak.len(),
            mib(class),
            mib(asked),
            mib(class - asked)
        );
        // `backward` and `optimizer` are the layers autograd and `liandan profile` enter; every
        // other call made in the session is the forward's.
        let phase = |m: &Made| match m.at.split(['/', ':']).next().unwrap_or_default() {
            p @ ("backward" | "optimizer") => p.to_string(),
            _ if m.at.starts_with("(outside") => m.at.clone(),
            _ => "forward".to_string(),
        };
        for (title, rows, limit) in [("phase", group(&phase), usize::MAX), ("made by", group(&|m: &Made| m.at.clone()), 40)] {
            o.push_str(&format!("\n| {title} | buffers | MiB | MiB asked |\n|---|---|---|---|\n"));
            for (at, (n, c, a)) in rows.iter().take(limit) {
                o.push_str(&format!("| {at} | {n} | {:.1} | {:.1} |\n", mib(*c), mib(*a)));
            }
            if rows.len() > limit {
                let rest = rows[limit..].iter().fold((0, 0, 0), |s, (_, (n, c, a))| (s.0 + n, s.1 + c, s.2 + a));
                o.push_str(&format!("| {} more | {} | {:.1} | {:.1} |\n", rows.len() - limit, rest.0, mib(rest.1), mib(rest.2)));
            }
        }
        Some(o)
    }

    /// Creates a buffer, turning an out-of-memory into an error (after emptying the pool once),
    /// and any other error wgpu raises for it into an error too, rather than a device fault.
    fn create(&self, class: u64, device_name: &str) -> Result<wgpu::Buffer> {
        let fail = |detail: String| Error::Backend { backend: device_name.to_string(), op: "alloc", detail };
        for attempt in 0..2 {
            let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let invalid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let buffer =
                self.device.create_buffer(&wgpu::BufferDescriptor { label: Some("liandan"), size: class, usage: self.usage, mapped_at_creation: false });
            if let Some(e) = pollster::block_on(invalid.pop()) {
                return Err(fail(format!("could not create a buffer of {class} bytes: {e}")));
            }
            match pollster::block_on(oom.pop()) {
                None => return Ok(buffer),
                Some(_) if attempt == 0 => self.empty(),
                Some(e) => {
                    return Err(Error::OutOfMemory {
                        op: "alloc",
                        bytes: class as u128,
                        detail: format!("{device_name} is out of memory ({e}); use a smaller batch"),
                    })
                }
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    fn release(&self, buffer: wgpu::Buffer, traced: u64) {
        let class = buffer.size();
        let mut st = self.lock();
        if let Some(trace) = st.trace.as_mut() {
            trace.live.remove(&traced);
        }
        st.stats.in_use -= class;
        st.stats.pooled += class;
        // Kept in order, so that which buffer an allocation gets depends on which ones are free,
        // not on the order they were freed in (a graph's tensors drop in a hash map's order):
        // a step then gets the buffers of the step before, and finds its bind groups made.
        let free = st.free.entry(class).or_default();
        let at = free.partition_point(|b| *b > buffer);
        free.insert(at, buffer);
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    /// Returns every pooled buffer to the driver (`torch.mps.empty_cache`).
    pub(crate) fn empty(&self) {
        self.bind_groups.clear();
        let mut st = self.lock();
        st.free.clear();
        st.stats.pooled = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_an_eighth_past_4_kib() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(300), 512);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 4096 + 512);
        assert_eq!(size_class((1 << 20) + 1), (1 << 20) + (1 << 16));
        for bytes in [4097u64, 5000, 65_537, (1 << 20) - 1, 1 << 20, (1 << 27) + 12] {
            let c = size_class(bytes);
            let waste = if bytes >= 1 << 20 { 16 } else { 8 };
            assert!(c >= bytes && c.is_multiple_of(256) && (c - bytes) * waste <= bytes, "{bytes} -> {c}");
        }
    }
}
