//! One opened GPU: device and queue, the allocator, the batched command recorder and the
//! pipeline cache.
//!
//! Dispatches are recorded into one command encoder and submitted in batches: when the host
//! needs data (`read`), on `synchronize`, or after `MAX_BATCH` dispatches. A training step
//! that reads nothing back never waits. Each dispatch's small parameter block ("meta") goes
//! into a slot of one arena buffer that is written once per batch, just before its submit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use liandan_tensor::{Error, Result};
use wgpu::util::DeviceExt;

use crate::pool::{Pool, PooledBuffer};

/// Dispatches per submitted batch (and arena slots).
const MAX_BATCH: usize = 512;
/// Bytes per meta slot: 64 u32s, and a multiple of every adapter's offset alignment we know.
const SLOT_BYTES: u64 = 256;
pub(crate) const META_WORDS: usize = (SLOT_BYTES / 4) as usize;

/// A compiled compute pipeline and its bind group layout.
pub(crate) struct Kernel {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    meta: Vec<u32>,
    dispatches: usize,
}

pub(crate) struct Gpu {
    pub(crate) name: String,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) limits: wgpu::Limits,
    pub(crate) pool: Arc<Pool>,
    arena: wgpu::Buffer,
    slot_bytes: u64,
    recorder: Mutex<Recorder>,
    kernels: Mutex<HashMap<String, Arc<Kernel>>>,
    /// The first uncaptured error or device loss, reported by the next call that waits.
    fault: Arc<Mutex<Option<String>>>,
}

/// One buffer binding of a dispatch: a whole pooled buffer.
pub(crate) type Binding<'a> = &'a wgpu::Buffer;

impl Gpu {
    pub(crate) fn open(adapter: &wgpu::Adapter) -> Result<Gpu> {
        let info = adapter.get_info();
        let name = format!("{} ({:?})", info.name, info.backend);
        let wanted = wgpu::Features::SHADER_F16 | wgpu::Features::SHADER_F64;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("liandan"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| Error::Device(format!("{name}: could not open the device: {e}")))?;
        let fault: Arc<Mutex<Option<String>>> = Arc::default();
        let f = fault.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            f.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| e.to_string());
        }));
        let f = fault.clone();
        device.set_device_lost_callback(move |reason, msg| {
            f.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| format!("device lost ({reason:?}): {msg}"));
        });
        let slot_bytes = SLOT_BYTES.max(limits.min_storage_buffer_offset_alignment as u64);
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("liandan meta arena"),
            size: slot_bytes * MAX_BATCH as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let pool = Pool::new(device.clone(), limits.max_buffer_size);
        Ok(Gpu {
            name,
            device,
            queue,
            limits,
            pool,
            arena,
            slot_bytes,
            recorder: Mutex::new(Recorder { encoder: None, meta: Vec::new(), dispatches: 0 }),
            kernels: Mutex::default(),
            fault,
        })
    }

    pub(crate) fn err(&self, op: &'static str, detail: impl Into<String>) -> Error {
        Error::Backend { backend: self.name.clone(), op, detail: detail.into() }
    }

    /// Fails with the first device fault seen, if any.
    pub(crate) fn check_fault(&self, op: &'static str) -> Result<()> {
        match self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(f) => Err(self.err(op, f)),
            None => Ok(()),
        }
    }

    pub(crate) fn alloc(&self, bytes: u64) -> Result<PooledBuffer> {
        self.pool.alloc(bytes, &self.name)
    }

    /// The pipeline for `key`, compiling `source()` the first time (with `constants` as WGSL
    /// `override` values).
    pub(crate) fn kernel(&self, key: &str, constants: &[(&str, f64)], source: impl FnOnce() -> String) -> Result<Arc<Kernel>> {
        if let Some(k) = self.kernels.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(k.clone());
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(key), source: wgpu::ShaderSource::Wgsl(source().into()) });
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants, zero_initialize_workgroup_memory: false },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(self.err("compile", format!("shader `{key}` failed to build: {e}")));
        }
        let layout = pipeline.get_bind_group_layout(0);
        let k = Arc::new(Kernel { pipeline, layout });
        self.kernels.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_string(), k.clone());
        Ok(k)
    }

    /// Records one dispatch of `kernel` over `groups` workgroups, binding `meta` at binding 0
    /// and `buffers` at bindings 1.. (whole buffers, read-write as the shader declares).
    pub(crate) fn dispatch(&self, kernel: &Kernel, meta: &[u32], buffers: &[Binding], groups: (u32, u32, u32)) -> Result<()> {
        assert!(meta.len() <= META_WORDS, "meta block of {} words exceeds a slot", meta.len());
        if groups.0 == 0 || groups.1 == 0 || groups.2 == 0 {
            return Ok(());
        }
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        let slot = rec.dispatches;
        let words_per_slot = (self.slot_bytes / 4) as usize;
        rec.meta.resize((slot + 1) * words_per_slot, 0);
        rec.meta[slot * words_per_slot..slot * words_per_slot + meta.len()].copy_from_slice(meta);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: &self.arena, offset: slot as u64 * self.slot_bytes, size: wgpu::BufferSize::new(SLOT_BYTES) }),
        }];
        for (i, b) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() });
        }
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &kernel.layout, entries: &entries });
        let encoder = rec.encoder.get_or_insert_with(|| self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("liandan batch") }));
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        }
        rec.dispatches += 1;
        if rec.dispatches >= MAX_BATCH {
            self.submit(&mut rec);
        }
        Ok(())
    }

    /// Records a copy of host bytes into `dst` at `offset`, ordered after the work already
    /// recorded (a `queue.write_buffer` would land before it, under a buffer still being read).
    pub(crate) fn upload(&self, dst: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut padded;
        let data = if bytes.len() % 4 == 0 { bytes } else {
            padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            &padded[..]
        };
        let staging = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: Some("liandan upload"), contents: data, usage: wgpu::BufferUsages::COPY_SRC });
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        let encoder = rec.encoder.get_or_insert_with(|| self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("liandan batch") }));
        encoder.copy_buffer_to_buffer(&staging, 0, dst, offset, data.len() as u64);
    }

    fn submit(&self, rec: &mut Recorder) {
        let Some(encoder) = rec.encoder.take() else { return };
        if !rec.meta.is_empty() {
            self.queue.write_buffer(&self.arena, 0, bytemuck::cast_slice(&rec.meta));
        }
        self.queue.submit([encoder.finish()]);
        rec.meta.clear();
        rec.dispatches = 0;
    }

    /// Submits everything recorded so far without waiting.
    pub(crate) fn flush(&self) {
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        self.submit(&mut rec);
    }

    /// Submits and waits for all work, then reports any device fault.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.flush();
        self.device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
            .map_err(|e| self.err("synchronize", e.to_string()))?;
        self.check_fault("synchronize")
    }

    /// Copies `len` bytes of `src` from `offset` (both multiples of 4) back to the host.
    pub(crate) fn read(&self, src: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("liandan read-back"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        {
            let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
            let encoder = rec.encoder.get_or_insert_with(|| self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("liandan batch") }));
            encoder.copy_buffer_to_buffer(src, offset, &staging, 0, len);
            self.submit(&mut rec);
        }
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
            .map_err(|e| self.err("read", e.to_string()))?;
        self.check_fault("read")?;
        match rx.recv() {
            Ok(Ok(())) => {}
            _ => return Err(self.err("read", "mapping the read-back buffer failed")),
        }
        let data = staging.slice(..).get_mapped_range().map_err(|e| self.err("read", e.to_string()))?.to_vec();
        staging.unmap();
        Ok(data)
    }
}
