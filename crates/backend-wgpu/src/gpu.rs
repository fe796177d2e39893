//! One opened GPU: device and queue, the allocator, the batched command recorder and the
//! pipeline cache.
//!
//! Dispatches are recorded into one command encoder and submitted in batches: when the host needs
//! data (`read`), on `synchronize`, or when the batch reaches its size. A batch is handed to the
//! submit thread (`submit.rs`), which finishes and submits it while the host records the next; what
//! maps a buffer or waits for the device first waits for it to be on the queue. A training step
//! that reads nothing back never waits. After a wait the GPU is idle, so the first batch is small
//! (`FIRST_BATCH` dispatches) and each next one twice the last, up to `RAMP_TOP`: the GPU starts on
//! a step while the host is still recording it (as CUDA's launches do), so a synchronized step does
//! not pay for recording and running one after the other, and in a pipelined run the GPU is never
//! more than a few dozen dispatches behind the host, so little is left to run when the host waits.
//! Each dispatch's small parameter block ("meta", at most 64 words) travels as immediate data (push
//! constants) recorded with the dispatch, where the device takes 256 bytes of it; elsewhere it goes
//! into a slot of one arena buffer that is written once per batch, just before its submit. The
//! arena's write is a copy the GPU runs before the batch, which made a synchronize after a small op
//! 10 us (a quarter) dearer on an H200 (`xtask ceiling --only latency`).
//!
//! Uploads go through staging buffers that the driver frees only once the copy out of them has
//! run. They are counted (`MemoryStats::staging`) and bounded: past `UPLOAD_BATCH` pending bytes
//! the batch is submitted, and past `UPLOAD_LIMIT` bytes not yet released the host waits for
//! the GPU, so loading a checkpoint in a loop cannot grow memory without end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use liandan_tensor::{Error, IndexUse, Result};
use wgpu::util::DeviceExt;

use crate::bind::{self, Window};
use crate::coop;
use crate::options::Shared;
use crate::pool::{Pool, PooledBuffer};
use crate::repr::Repr;
use crate::submit::{Job, Submitter};
use crate::timing::Timer;
use crate::{Key, WgpuOptions};

/// Dispatches per submitted batch at most (and arena slots).
pub(crate) const MAX_BATCH: usize = 512;
/// Bytes per meta slot: 64 u32s, and a multiple of every adapter's offset alignment we know.
const SLOT_BYTES: u64 = crate::params::PARAMS_BYTES as u64;
pub(crate) const META_WORDS: usize = (SLOT_BYTES / 4) as usize;
/// Upload bytes recorded before the batch is submitted, so their staging can be released.
const UPLOAD_BATCH: u64 = 64 << 20;
/// Upload staging bytes not yet released past which an upload waits for the GPU.
pub const UPLOAD_LIMIT: u64 = 256 << 20;

/// A compiled compute pipeline and its bind group layout (`bind.rs`).
pub(crate) struct Kernel {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    /// The open compute pass: consecutive dispatches share one (wgpu orders them), which costs
    /// far less per dispatch than a pass each. Ended before any copy on the encoder.
    pass: Option<wgpu::ComputePass<'static>>,
    meta: Vec<u32>,
    dispatches: usize,
    /// Bytes uploaded into the open encoder.
    uploads: u64,
    /// The op call of each dispatch timed in the open encoder (see `timing.rs`).
    timed: Vec<u64>,
    /// Dispatches at which the open batch is submitted: `first_batch` after a wait, doubling
    /// with each batch submitted for its size.
    batch: usize,
    /// Batches submitted so far.
    submitted: u64,
    /// A later read-back's copy was recorded: the batch ends before the next dispatch, so that
    /// waiting for the copy does not wait for work recorded after it.
    cut: bool,
    /// A later read-back's copy rides in the open batch: the batch ends at this many
    /// dispatches, if it has not by then.
    close_at: Option<usize>,
}

impl Recorder {
    /// The encoder, with any open pass ended so that copies can be recorded.
    fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        self.encoder.get_or_insert_with(|| device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("liandan batch") }))
    }

    /// The open compute pass, beginning one if needed.
    fn pass(&mut self, device: &wgpu::Device) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let encoder = self.encoder(device);
            let pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None }).forget_lifetime();
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("just opened")
    }
}

/// The key of a custom kernel's pipeline: the op's name and the variant its source depends on
/// (the op's options and dtypes, packed into a number by the op's crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CustomKey {
    pub(crate) name: &'static str,
    pub(crate) variant: u64,
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
    /// The size of the first batch after a wait (see the module docs).
    first_batch: usize,
    /// The most dispatches the ramp grows a batch to, at least `first_batch` ([`ramp_top`]).
    ramp_top: usize,
    /// Bytes in upload staging buffers not yet released: recorded, or submitted and not yet
    /// finished (each submission subtracts its own when the GPU is done with it).
    staging: Arc<AtomicU64>,
    /// How this device holds each dtype, which the kernels' sources follow.
    pub(crate) repr: Repr,
    /// Kernels may use subgroup operations (`Features::SUBGROUP`): the layer norm's row sums.
    pub(crate) subgroups: bool,
    /// The subgroups' one size, where they have one (a layer norm's row a subgroup; attention's
    /// rows reduced by shuffles where it is 16 or more).
    pub(crate) subgroup_size: Option<u32>,
    kernels: Mutex<HashMap<Key, Arc<Kernel>>>,
    /// The compiled kernels of custom ops (`custom.rs`).
    custom_kernels: Mutex<HashMap<CustomKey, Arc<Kernel>>>,
    /// The first uncaptured error or device loss, reported by the next call that waits.
    fault: Arc<Mutex<Option<String>>>,
    /// Per calling thread, so each thread hears of its own ops' faults: where its index
    /// kernels report an out-of-range index, and its reusable read-back buffer.
    index_faults: Mutex<HashMap<std::thread::ThreadId, ThreadSlot>>,
    /// What a fault's tag names: the primitive and the tensor-level op's use of its indices
    /// (`cross_entropy`'s class targets), so the report names what the user called.
    index_tags: Mutex<Vec<IndexTag>>,
    /// Kernel timing for the profiler, where the adapter has timestamp queries.
    timer: Option<Timer>,
    /// f16 matmuls run on cooperative matrices (`coop.rs`; the device was opened with them);
    /// cleared if their kernel fails to build here (`matmul/coop.rs`).
    pub(crate) coop_f16: AtomicBool,
    /// How the tensor-core kernels are built here (`coop::status`; meaningless without them).
    pub(crate) coop_variant: crate::plan::Variant,
    /// The adapter, its IDs and its driver, in one line: what the autotune's file is for.
    pub(crate) identity: String,
    /// The autotune's measured cuts on this adapter (`tune/`).
    pub(crate) tuning: Mutex<crate::tune::table::Table>,
    /// Shapes the autotune has measured on this device.
    pub(crate) measured: AtomicU64,
    /// The device's options (`options.rs`), shared with its backend.
    shared: Arc<Shared>,
    /// Free buffers of [`LATER_BYTES`] for small later reads, returned when a read is dropped.
    later: Mutex<Vec<wgpu::Buffer>>,
    /// The thread that finishes and submits batches (`submit.rs`); `None` where it could not
    /// start, and the recorder submits them itself.
    submitter: Option<Submitter>,
}

thread_local! {
    /// Dispatches this thread has recorded, for tests that count what an op costs.
    static DISPATCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Where this thread's submits and waits spent their time ([`host_phases`]).
    static PHASES: std::cell::Cell<HostPhases> = const { std::cell::Cell::new(HostPhases::ZERO) };
}

/// Dispatches the calling thread has recorded on any wgpu device so far: a test's count of
/// what an op costs.
pub fn dispatches_recorded() -> u64 {
    DISPATCHES.with(|d| d.get())
}

/// The host time the calling thread has spent so far in the parts of a submit and a wait, in
/// nanoseconds, summed over the wgpu devices whose options time them
/// (`testing::Knobs::host_phases`): `xtask bench-host` takes differences to say where a
/// synchronize's time goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPhases {
    /// Submits (a batch handed to the driver).
    pub submits: u64,
    /// Writing the batch's parameter blocks into the arena (`Queue::write_buffer`).
    pub meta_ns: u64,
    /// Ending the compute pass and the command encoder (`CommandEncoder::finish`).
    pub finish_ns: u64,
    /// `Queue::submit`: wgpu's tracking and the driver's submit.
    pub submit_ns: u64,
    /// Waits for the device to go idle (a synchronize's, a read-back's).
    pub waits: u64,
    /// Polls made while waiting (each one `Device::poll` without blocking).
    pub polls: u64,
    /// Time from a wait's start to the device found idle.
    pub wait_ns: u64,
    /// Time this thread waited for the submit thread to put its batches on the queue (before
    /// a wait, a read-back, a timed batch).
    pub reach_ns: u64,
    /// The submit threads' time in `CommandEncoder::finish`, every device's together: the same
    /// for every thread that asks, and kept whatever the options.
    pub handed_finish_ns: u64,
    /// The submit threads' time in the arena's write and `Queue::submit`, as `handed_finish_ns`.
    pub handed_submit_ns: u64,
    /// Bind groups this thread's dispatches made (not found in the cache), whatever the options.
    pub bind_groups_made: u64,
    /// Dispatches this thread recorded ([`dispatches_recorded`]), whatever the options.
    pub dispatches: u64,
}

impl HostPhases {
    const ZERO: HostPhases = HostPhases {
        submits: 0,
        meta_ns: 0,
        finish_ns: 0,
        submit_ns: 0,
        waits: 0,
        polls: 0,
        wait_ns: 0,
        reach_ns: 0,
        handed_finish_ns: 0,
        handed_submit_ns: 0,
        bind_groups_made: 0,
        dispatches: 0,
    };
}

/// See [`HostPhases`]; the times are zero unless a device's options time them.
pub fn host_phases() -> HostPhases {
    let (handed_finish_ns, handed_submit_ns) = crate::submit::thread_ns();
    HostPhases { handed_finish_ns, handed_submit_ns, bind_groups_made: crate::bind::made(), dispatches: dispatches_recorded(), ..PHASES.with(|p| p.get()) }
}

/// Adds to the calling thread's [`HostPhases`].
fn note_phases(f: impl FnOnce(&mut HostPhases)) {
    PHASES.with(|p| {
        let mut v = p.get();
        f(&mut v);
        p.set(v);
    });
}

/// Nanoseconds since `t`.
fn ns_since(t: std::time::Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

/// Bytes of the index-fault buffer.
pub(crate) const INDEX_FAULT_BYTES: u64 = 20;

/// The primitive an index kernel ran for, and what its indices meant to the op that asked.
type IndexTag = (&'static str, Option<IndexUse>);

/// Tags past this many share the last one's number, naming the primitive alone (a program
/// would need this many distinct losses and class counts to get there).
const MAX_INDEX_TAGS: usize = 1024;

/// Bytes of a thread's reusable read-back buffer: a read this small (a loss, a metric, the
/// index-fault words) maps it instead of creating a mappable buffer, which costs a driver
/// allocation each time.
const READBACK_BYTES: u64 = 64 << 10;
/// The size of a small later read's buffer, kept for the next one: a loss scaler's check is
/// read this way every step, and making a mappable buffer each time costs host time.
const LATER_BYTES: u64 = 256;
/// Free small later-read buffers kept at most.
const LATER_KEPT: usize = 8;
/// Dispatches after a later read-back's copy by which its batch ends ([`Gpu::read_later`]).
const LATER_CLOSE: usize = 16;

/// How long a wait polls the device before it sleeps on the fence ([`Gpu::idle`]): a small
/// model's whole step (an mlp's is under a millisecond on an H200), and at most this much of
/// one core's time per synchronize.
const SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// One calling thread's index-fault words, read back with every host read and at
/// `synchronize` (so indexing never waits), but only when an index kernel was recorded since
/// they were last read: a synchronize after none is a submit and a wait.
struct ThreadSlot {
    /// [flag, low word, high word, axis size, tag] of the first out-of-range index.
    faults: wgpu::Buffer,
    /// An index kernel was recorded since the words were last read.
    pending: bool,
    /// Mapped by this thread's small reads, one at a time.
    readback: wgpu::Buffer,
}

/// A copy back to the host recorded by [`Gpu::read_later`].
pub(crate) struct LaterBytes {
    gpu: Arc<Gpu>,
    staging: wgpu::Buffer,
    len: u64,
    /// Batches submitted before the one holding the copy.
    before: u64,
}

impl LaterBytes {
    /// Submits what is recorded if the copy is still among it, then polls until the copy's
    /// submission is done: the device's blocking wait would wait for everything submitted.
    pub(crate) fn wait(self) -> Result<Vec<u8>> {
        let gpu = &self.gpu;
        {
            let mut rec = gpu.recorder.lock().unwrap_or_else(|p| p.into_inner());
            if rec.submitted <= self.before {
                gpu.submit(&mut rec);
            }
        }
        // The copy's batch on the queue, before its buffer is mapped.
        gpu.reach(self.before + 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let _unmap = Unmap(&self.staging);
        self.staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        let start = std::time::Instant::now();
        let mapped = loop {
            gpu.device.poll(wgpu::PollType::Poll).map_err(|e| gpu.err("read", e.to_string()))?;
            match rx.try_recv() {
                Ok(r) => break r.is_ok(),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break false,
                Err(std::sync::mpsc::TryRecvError::Empty) if start.elapsed() < SPIN => std::hint::spin_loop(),
                Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::sleep(std::time::Duration::from_micros(20)),
            }
        };
        gpu.check_fault("read")?;
        if !mapped {
            return Err(gpu.err("read", "mapping the read-back buffer failed"));
        }
        let data = self.staging.slice(..).get_mapped_range().map_err(|e| gpu.err("read", e.to_string()))?;
        Ok(data[..self.len as usize].to_vec())
    }
}

impl Drop for LaterBytes {
    /// A small buffer goes back for the next later read (unmapped by then: [`LaterBytes::wait`]
    /// unmaps it before it returns; a copy into it that was never waited for is ordered before
    /// the next one on the queue).
    fn drop(&mut self) {
        if self.staging.size() == LATER_BYTES {
            let mut kept = self.gpu.later.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() < LATER_KEPT {
                kept.push(self.staging.clone());
            }
        }
    }
}

/// Unmaps a read-back buffer when dropped, so that one reused after an error is not left
/// mapped (or with its mapping pending).
struct Unmap<'a>(&'a wgpu::Buffer);

impl Drop for Unmap<'_> {
    fn drop(&mut self) {
        self.0.unmap();
    }
}

/// One buffer binding of a dispatch: a whole pooled buffer.
pub(crate) type Binding<'a> = &'a wgpu::Buffer;

/// `value` where it is from 1 to `MAX_BATCH`, else an error naming the option.
fn dispatch_count(name: &str, value: usize) -> Result<usize> {
    match value {
        1..=MAX_BATCH => Ok(value),
        _ => Err(Error::Device(format!("testing knob {name} = {value} is not a dispatch count from 1 to {MAX_BATCH}"))),
    }
}

impl Gpu {
    /// Opens `adapter` as its options say.
    pub(crate) fn open(adapter: &wgpu::Adapter, shared: Arc<Shared>) -> Result<Gpu> {
        let options = shared.get();
        let knobs = &options.testing;
        let info = adapter.get_info();
        let name = format!("{} ({:?})", info.name, info.backend);
        let identity = format!("{name} {:04x}:{:04x} {} {}", info.vendor, info.device, info.driver, info.driver_info);
        let identity: String = identity.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let mut limits = adapter.limits();
        if let Some(cap) = knobs.max_binding {
            if cap < 1 << 16 {
                return Err(Error::Device(format!("testing knob max_binding = {cap} is under 65536 bytes")));
            }
            limits.max_storage_buffer_binding_size = limits.max_storage_buffer_binding_size.min(cap / 256 * 256);
        }
        // Cooperative matrices only where the f16 matmul will use them (`coop.rs`): otherwise the
        // device opens exactly as it would without them.
        let coop = match coop::status(adapter, &limits, options.coop_matrix) {
            coop::Status::InUse(v) => Some(v),
            _ => None,
        };
        let coop_f16 = coop.is_some();
        let first_batch = dispatch_count("first_batch", knobs.first_batch)?;
        let ramp_top = dispatch_count("ramp_top", knobs.ramp_top)?.max(first_batch);
        let mut wanted = wgpu::Features::SHADER_F16 | wgpu::Features::SHADER_F64 | wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP;
        if coop_f16 {
            wanted |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        // Meta blocks as immediate data only where a whole slot fits (lavapipe offers 128 bytes).
        if knobs.immediates && limits.max_immediate_size as u64 >= SLOT_BYTES {
            wanted |= wgpu::Features::IMMEDIATES;
        }
        let features = adapter.features() & wanted;
        if !features.contains(wgpu::Features::IMMEDIATES) {
            limits.max_immediate_size = 0;
        }
        let experimental_features = if coop_f16 {
            // SAFETY: wgpu asks us to accept that its experimental features may hold bugs. The
            // one we enable is used by one kernel family (`matmul/coop.rs`), which
            // `LIANDAN_COOP_MATRIX=0` switches off together with this request.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let desc = wgpu::DeviceDescriptor {
            label: Some("liandan"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features,
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) =
            pollster::block_on(adapter.request_device(&desc)).map_err(|e| Error::Device(format!("{name}: could not open the device: {e}")))?;
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
        let repr = Repr::new(features);
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("liandan meta arena"),
            // With immediates no kernel reads it; `synchronize` still names it as a source.
            size: if repr.immediates { slot_bytes } else { slot_bytes * MAX_BATCH as u64 },
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let pool = Pool::new(device.clone(), limits.max_buffer_size, options.memory_breakdown);
        let timer = Timer::new(&device, &queue, 2 * MAX_BATCH as u32);
        let staging: Arc<AtomicU64> = Arc::default();
        let submitter = Submitter::start(queue.clone(), arena.clone(), staging.clone()).ok();
        Ok(Gpu {
            name,
            device,
            queue,
            limits,
            pool,
            arena,
            slot_bytes,
            recorder: Mutex::new(Recorder {
                encoder: None,
                pass: None,
                meta: Vec::new(),
                dispatches: 0,
                uploads: 0,
                timed: Vec::new(),
                batch: first_batch,
                submitted: 0,
                cut: false,
                close_at: None,
            }),
            first_batch,
            ramp_top,
            staging,
            repr,
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            subgroup_size: (features.contains(wgpu::Features::SUBGROUP) && info.subgroup_min_size == info.subgroup_max_size).then_some(info.subgroup_min_size),
            kernels: Mutex::default(),
            custom_kernels: Mutex::default(),
            fault,
            index_faults: Mutex::default(),
            index_tags: Mutex::default(),
            timer,
            coop_f16: AtomicBool::new(coop_f16),
            coop_variant: coop.unwrap_or(crate::plan::Variant::Prefetch),
            identity,
            tuning: Mutex::default(),
            measured: AtomicU64::new(0),
            shared,
            later: Mutex::default(),
            submitter,
        })
    }

    /// What the routing reads of this device (`plan::Caps`), as it runs now: its tensor cores
    /// leave for good where one of their kernels fails to build.
    pub(crate) fn caps(&self) -> crate::plan::Caps {
        let coop = self.coop_f16.load(Ordering::Relaxed).then_some(self.coop_variant);
        crate::plan::Caps { coop, f16: self.repr.f16, f64: self.repr.f64, max_binding: self.max_binding() }
    }

    /// This device's options (see `options.rs`).
    pub(crate) fn options(&self) -> Arc<WgpuOptions> {
        self.shared.get()
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

    /// The pipeline for `key`, compiling its source the first time.
    pub(crate) fn kernel(&self, key: impl Into<Key>) -> Result<Arc<Kernel>> {
        let key = key.into();
        if let Some(k) = self.kernels.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(k.clone());
        }
        // What runs must be what the shader tests validate (tests/shaders.rs walks `Key::all`).
        debug_assert!(Key::all(&self.repr).contains(&key), "{key:?} is built at run time but missing from Key::all, so it is never validated");
        let k = self.compile(&format!("{key:?}"), key.source(&self.repr), key.checked())?;
        self.kernels.lock().unwrap_or_else(|p| p.into_inner()).insert(key, k.clone());
        Ok(k)
    }

    /// The pipeline of a custom op's kernel (`custom.rs`), compiling the source `source` gives
    /// the first time. (Its crate validates its sources; it keeps naga's run-time checks.)
    pub(crate) fn custom_kernel(&self, key: CustomKey, source: impl FnOnce() -> String) -> Result<Arc<Kernel>> {
        if let Some(k) = self.custom_kernels.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(k.clone());
        }
        let k = self.compile(&format!("{} {:#x}", key.name, key.variant), source(), true)?;
        self.custom_kernels.lock().unwrap_or_else(|p| p.into_inner()).insert(key, k.clone());
        Ok(k)
    }

    /// Compiles `wgsl` into a pipeline labelled `label`, with naga's run-time checks where
    /// `checked` (and `LIANDAN_SHADER_CHECKS` does not say otherwise).
    fn compile(&self, label: &str, wgsl: String, checked: bool) -> Result<Arc<Kernel>> {
        let entries = bind::layout_entries(&wgsl).map_err(|e| self.err("compile", format!("shader `{label}` failed to build: {e}")))?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let layout = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries });
        let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(label),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: if self.repr.immediates { SLOT_BYTES as u32 } else { 0 },
        });
        let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(wgsl.into()) };
        let module = if self.options().shader_checks.unwrap_or(checked) {
            self.device.create_shader_module(desc)
        } else {
            // SAFETY: without naga's run-time checks an out-of-bounds index is undefined behaviour
            // instead of a clamped one. The kernels built this way (`Key::checked`) bound every
            // index by the sizes in their params or by constant tile sizes, never by data, and
            // run the conformance suite in this mode; wgpu's robust buffer access still keeps
            // storage accesses inside their buffers on Vulkan.
            unsafe { self.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
        };
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &[], zero_initialize_workgroup_memory: false },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(self.err("compile", format!("shader `{label}` failed to build: {e}")));
        }
        Ok(Arc::new(Kernel { pipeline, layout }))
    }

    /// Records one dispatch of `kernel` over `groups` workgroups, binding `meta` at binding 0
    /// and `buffers` at bindings 1.. (whole buffers, read-write as the shader declares).
    pub(crate) fn dispatch(&self, kernel: &Kernel, meta: &[u32], buffers: &[Binding], groups: (u32, u32, u32)) -> Result<()> {
        let windows: crate::bind::PerOperand<Window> = buffers.iter().map(|b| (*b, 0, b.size())).collect();
        self.dispatch_windows(kernel, meta, &windows, groups)
    }

    /// The largest buffer window one binding may cover on this device.
    pub(crate) fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size
    }

    /// The alignment of binding offsets on this device.
    pub(crate) fn offset_alignment(&self) -> u64 {
        self.limits.min_storage_buffer_offset_alignment as u64
    }

    /// [`Gpu::dispatch`] with explicit windows of each buffer.
    pub(crate) fn dispatch_windows(&self, kernel: &Kernel, meta: &[u32], buffers: &[Window], groups: (u32, u32, u32)) -> Result<()> {
        if let Some((b, _, size)) = buffers.iter().find(|w| w.2 > self.max_binding()) {
            return Err(self.err(
                "dispatch",
                format!("a binding of {size} bytes (of a {}-byte buffer) exceeds this device's {}-byte limit", b.size(), self.max_binding()),
            ));
        }
        assert!(meta.len() <= META_WORDS, "meta block of {} words exceeds a slot", meta.len());
        if groups.0 == 0 || groups.1 == 0 || groups.2 == 0 {
            return Ok(());
        }
        DISPATCHES.with(|d| d.set(d.get() + 1));
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        if rec.cut {
            self.submit(&mut rec);
        }
        let (bind_group, meta_offset) = if self.repr.immediates {
            (self.pool.bind_groups.get(&self.device, &kernel.layout, None, buffers), None)
        } else {
            let slot = rec.dispatches;
            let words_per_slot = (self.slot_bytes / 4) as usize;
            rec.meta.resize((slot + 1) * words_per_slot, 0);
            rec.meta[slot * words_per_slot..slot * words_per_slot + meta.len()].copy_from_slice(meta);
            let group = self.pool.bind_groups.get(&self.device, &kernel.layout, Some((&self.arena, SLOT_BYTES)), buffers);
            (group, Some([(slot as u64 * self.slot_bytes) as u32]))
        };
        let record = |pass: &mut wgpu::ComputePass<'_>| {
            pass.set_pipeline(&kernel.pipeline);
            match &meta_offset {
                Some(offset) => pass.set_bind_group(0, &bind_group, offset),
                None => {
                    pass.set_bind_group(0, &bind_group, &[]);
                    // The whole block, zeros past `meta` as in a fresh arena slot: what a kernel
                    // reads there must not be the previous dispatch's.
                    let mut block = [0u32; META_WORDS];
                    block[..meta.len()].copy_from_slice(meta);
                    pass.set_immediates(0, bytemuck::cast_slice(&block));
                }
            }
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        };
        match (&self.timer, Timer::op()) {
            (Some(timer), Some(op)) => {
                let i = rec.timed.len();
                let writes = Some(timer.writes(i));
                record(&mut rec.encoder(&self.device).begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: writes }));
                rec.timed.push(op);
            }
            _ => record(rec.pass(&self.device)),
        }
        rec.dispatches += 1;
        let full = rec.dispatches >= rec.batch;
        if full || rec.close_at.is_some_and(|at| rec.dispatches >= at) {
            self.submit(&mut rec);
            if full {
                rec.batch = (rec.batch * 2).min(self.ramp_top);
            }
        }
        Ok(())
    }

    /// Records a copy of `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`,
    /// ordered after the work already recorded. Offsets and size must be multiples of 4.
    /// Cheaper on the host than a copy kernel: no bind group and no meta block.
    pub(crate) fn copy_buffer(&self, src: &wgpu::Buffer, src_offset: u64, dst: &wgpu::Buffer, dst_offset: u64, size: u64) {
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        rec.encoder(&self.device).copy_buffer_to_buffer(src, src_offset, dst, dst_offset, size);
    }

    /// Records zeros into `size` bytes of `dst` from `offset`, ordered after the work already
    /// recorded. Offset and size must be multiples of 4.
    pub(crate) fn clear_buffer(&self, dst: &wgpu::Buffer, offset: u64, size: u64) {
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        rec.encoder(&self.device).clear_buffer(dst, offset, Some(size));
    }

    /// Records a copy of host bytes into `dst` at `offset`, ordered after the work already
    /// recorded (a `queue.write_buffer` would land before it, under a buffer still being read).
    /// Bounded by `UPLOAD_LIMIT` (see the module docs).
    pub(crate) fn upload(&self, dst: &wgpu::Buffer, offset: u64, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut padded;
        let data = if bytes.len().is_multiple_of(4) {
            bytes
        } else {
            padded = bytes.to_vec();
            padded.resize(bytes.len().next_multiple_of(4), 0);
            &padded[..]
        };
        let staging = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("liandan upload"),
            contents: data,
            usage: wgpu::BufferUsages::COPY_SRC,
        });
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        rec.encoder(&self.device).copy_buffer_to_buffer(&staging, 0, dst, offset, data.len() as u64);
        rec.uploads += staging.size();
        let staged = self.staging.fetch_add(staging.size(), Ordering::Relaxed) + staging.size();
        if rec.uploads >= UPLOAD_BATCH || staged > UPLOAD_LIMIT {
            self.submit(&mut rec);
        }
        drop(rec);
        if staged > UPLOAD_LIMIT {
            // Everything is submitted: once the GPU is done, the driver frees every staging buffer.
            self.idle("upload")?;
        }
        Ok(())
    }

    /// Bytes in upload staging buffers not yet released.
    pub(crate) fn staging_bytes(&self) -> u64 {
        self.staging.load(Ordering::Relaxed)
    }

    fn submit(&self, rec: &mut Recorder) {
        let timed = self.options().testing.host_phases;
        let clock = || timed.then(std::time::Instant::now);
        let start = clock();
        rec.pass = None;
        rec.cut = false;
        rec.close_at = None;
        let Some(mut encoder) = rec.encoder.take() else { return };
        rec.submitted += 1;
        if let (Some(submitter), true) = (&self.submitter, rec.timed.is_empty()) {
            submitter.hand(Job { encoder, meta: std::mem::take(&mut rec.meta), uploads: std::mem::take(&mut rec.uploads) });
            rec.dispatches = 0;
            if let Some(start) = start {
                note_phases(|p| {
                    p.submits += 1;
                    p.submit_ns += ns_since(start);
                });
            }
            return;
        }
        // A batch with timed dispatches is submitted here (its timestamps are read after it),
        // behind every batch handed over before it.
        self.reach(rec.submitted - 1);
        if !rec.meta.is_empty() {
            self.queue.write_buffer(&self.arena, 0, bytemuck::cast_slice(&rec.meta));
        }
        let meta = clock();
        let times = self.timer.as_ref().and_then(|t| t.resolve(&self.device, &mut encoder, std::mem::take(&mut rec.timed)));
        let commands = encoder.finish();
        let finish = clock();
        self.queue.submit([commands]);
        if let Some(submitter) = &self.submitter {
            submitter.submitted_elsewhere();
        }
        if let (Some(start), Some(meta), Some(finish)) = (start, meta, finish) {
            note_phases(|p| {
                p.submits += 1;
                p.meta_ns += (meta - start).as_nanos() as u64;
                p.finish_ns += (finish - meta).as_nanos() as u64;
                p.submit_ns += ns_since(finish);
            });
        }
        if let (Some(timer), Some(times)) = (&self.timer, times) {
            timer.submitted(times);
        }
        if rec.uploads > 0 {
            let (staging, bytes) = (self.staging.clone(), std::mem::take(&mut rec.uploads));
            self.queue.on_submitted_work_done(move || {
                staging.fetch_sub(bytes, Ordering::Relaxed);
            });
        }
        rec.meta.clear();
        rec.dispatches = 0;
    }

    /// Returns once `n` batches in all are on the queue (handed over batches are submitted by
    /// the submit thread).
    fn reach(&self, n: u64) {
        if let Some(submitter) = &self.submitter {
            let start = self.options().testing.host_phases.then(std::time::Instant::now);
            submitter.reach(n);
            if let Some(start) = start {
                note_phases(|p| p.reach_ns += ns_since(start));
            }
        }
    }

    /// Returns once every batch handed over is on the queue.
    fn reach_all(&self) {
        let n = self.recorder.lock().unwrap_or_else(|p| p.into_inner()).submitted;
        self.reach(n);
    }

    /// Submits everything recorded so far without waiting.
    pub(crate) fn flush(&self) {
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        self.submit(&mut rec);
    }

    /// The calling thread's slot, created on first use: its index-fault words (zeroed) and its
    /// read-back buffer.
    fn with_slot<R>(&self, f: impl FnOnce(&mut ThreadSlot) -> R) -> R {
        let mut slots = self.index_faults.lock().unwrap_or_else(|p| p.into_inner());
        let slot = slots.entry(std::thread::current().id()).or_insert_with(|| {
            let buffer = |label, size, usage| self.device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size, usage, mapped_at_creation: false });
            ThreadSlot {
                faults: buffer(
                    "liandan index faults",
                    INDEX_FAULT_BYTES,
                    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                ),
                pending: false,
                readback: buffer("liandan read-back", READBACK_BYTES, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            }
        });
        f(slot)
    }

    /// The calling thread's buffer for index kernels to report out-of-range indices in, for a
    /// kernel about to be recorded (so the next read-back or `synchronize` reads it).
    pub(crate) fn index_fault_buffer(&self) -> wgpu::Buffer {
        self.with_slot(|slot| {
            slot.pending = true;
            slot.faults.clone()
        })
    }

    /// The tag an index kernel run now for `primitive` records with a bad index: it names
    /// the tensor-level op the indices are for, where the op said (`liandan_tensor::IndexUse`).
    pub(crate) fn index_tag(&self, primitive: &'static str) -> u32 {
        let tag = (primitive, liandan_tensor::current_index_use());
        let mut tags = self.index_tags.lock().unwrap_or_else(|p| p.into_inner());
        let at = match tags.iter().position(|t| *t == tag) {
            Some(at) => at,
            None if tags.len() < MAX_INDEX_TAGS => {
                tags.push(tag);
                tags.len() - 1
            }
            None => MAX_INDEX_TAGS,
        };
        at as u32
    }

    /// The error for a bad `index` into an axis of `size` recorded under `tag`.
    fn index_error(&self, tag: u32, index: i64, size: usize) -> Error {
        let tags = self.index_tags.lock().unwrap_or_else(|p| p.into_inner());
        match tags.get(tag as usize) {
            Some(&(_, Some(what))) => what.error(index, size),
            Some(&(primitive, None)) => Error::IndexOutOfRange { op: primitive, index, size },
            None => Error::IndexOutOfRange { op: "gather, index_select or scatter_add (found on the GPU, reported at the next read)", index, size },
        }
    }

    /// Submits and waits for all work, then reports any device fault or bad index.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.read(&self.arena, 0, 0).map(drop)
    }

    /// Waits for everything submitted, then reports the first device fault, if any.
    fn wait(&self, op: &'static str) -> Result<()> {
        self.idle(op)?;
        // The GPU is idle: feed it small batches again.
        self.recorder.lock().unwrap_or_else(|p| p.into_inner()).batch = self.first_batch;
        self.check_fault(op)?;
        if let Some(timer) = &self.timer {
            timer.collect();
        }
        Ok(())
    }

    /// Returns once everything submitted has finished (and its callbacks, such as a read-back
    /// buffer's mapping, have run). It polls first, for up to [`SPIN`], and only then sleeps
    /// on the device's fence: a blocking wait wakes the thread tens of microseconds after the
    /// GPU finishes, which was most of what a synchronize after a short step cost (CUDA's
    /// synchronize spins too).
    fn idle(&self, op: &'static str) -> Result<()> {
        self.reach_all();
        let start = std::time::Instant::now();
        let mut polls = 0;
        let timed = self.options().testing.host_phases;
        let done = |polls| {
            if timed {
                note_phases(|p| {
                    p.waits += 1;
                    p.polls += polls;
                    p.wait_ns += ns_since(start);
                })
            }
        };
        loop {
            let status = self.device.poll(wgpu::PollType::Poll).map_err(|e| self.err(op, e.to_string()))?;
            polls += 1;
            if status.is_queue_empty() {
                done(polls);
                return Ok(());
            }
            if start.elapsed() >= SPIN {
                break;
            }
            std::hint::spin_loop();
        }
        let waited = self.device.poll(wgpu::PollType::Wait { submission_index: None, timeout: None }).map_err(|e| self.err(op, e.to_string())).map(drop);
        done(polls);
        waited
    }

    /// [`Gpu::read`] of bytes `start..end` of `src` (multiples of 4), in windows no larger than
    /// one binding, so that no read-back buffer grows past what the device allows.
    pub(crate) fn read_windows(&self, src: &wgpu::Buffer, start: u64, end: u64) -> Result<Vec<u8>> {
        // Room for the index-fault words that ride along in each read-back buffer.
        let window = (self.max_binding().min(self.limits.max_buffer_size - 256) / 4 * 4).max(4);
        let mut bytes = Vec::new();
        bytes.try_reserve_exact((end - start) as usize).map_err(|_| self.err("read", format!("no host memory for the {} bytes read back", end - start)))?;
        let mut at = start;
        while at < end {
            let len = window.min(end - at);
            bytes.extend(self.read(src, at, len)?);
            at += len;
        }
        if start == end {
            // Still wait for the work, and hear of its faults, as any read-back does.
            self.read(src, start, 0)?;
        }
        Ok(bytes)
    }

    /// Records a copy of `len` bytes of `src` from `offset` (multiples of 4) into a buffer of
    /// its own, to be mapped by [`LaterBytes::wait`]. With `ends_batch` the batch ends with the
    /// copy (before the next dispatch), so that wait is for the work before it, not for what is
    /// recorded after; otherwise the copy rides in the batch, which ends as it would have or
    /// [`LATER_CLOSE`] dispatches on, whichever comes first: a batch still open when the read is
    /// taken is submitted then and waited for whole, and the GPU idles until the host records
    /// more.
    pub(crate) fn read_later(self: &Arc<Self>, src: &wgpu::Buffer, offset: u64, len: u64, ends_batch: bool) -> LaterBytes {
        let kept = if len <= LATER_BYTES { self.later.lock().unwrap_or_else(|p| p.into_inner()).pop() } else { None };
        let staging = kept.unwrap_or_else(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("liandan later read-back"),
                size: if len <= LATER_BYTES { LATER_BYTES } else { len },
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
        if len > 0 {
            rec.encoder(&self.device).copy_buffer_to_buffer(src, offset, &staging, 0, len);
            rec.cut |= ends_batch;
            if !ends_batch {
                let at = rec.dispatches + LATER_CLOSE;
                rec.close_at.get_or_insert(at);
            }
        }
        LaterBytes { gpu: self.clone(), staging, len, before: rec.submitted }
    }

    /// Copies `len` bytes of `src` from `offset` (both multiples of 4) back to the host, after
    /// all recorded work, and fails if any of that work met a device fault or a bad index.
    pub(crate) fn read(&self, src: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>> {
        // The index-fault words, when an index kernel ran since they were last read, ride
        // along at the end of the same read-back.
        let at = len.next_multiple_of(4);
        let (index_fault, readback) = self.with_slot(|slot| (std::mem::take(&mut slot.pending).then(|| slot.faults.clone()), slot.readback.clone()));
        let size = at + if index_fault.is_some() { INDEX_FAULT_BYTES } else { 0 };
        if size == 0 {
            self.flush();
            return self.wait("synchronize").map(|()| Vec::new());
        }
        let staging = if size <= READBACK_BYTES {
            readback
        } else {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("liandan read-back"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let batches = {
            let mut rec = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
            let encoder = rec.encoder(&self.device);
            if len > 0 {
                encoder.copy_buffer_to_buffer(src, offset, &staging, 0, len);
            }
            if let Some(index_fault) = &index_fault {
                encoder.copy_buffer_to_buffer(index_fault, 0, &staging, at, INDEX_FAULT_BYTES);
            }
            self.submit(&mut rec);
            rec.submitted
        };
        self.reach(batches);
        let (tx, rx) = std::sync::mpsc::channel();
        let _unmap = Unmap(&staging);
        staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait("read")?;
        match rx.recv() {
            Ok(Ok(())) => {}
            _ => return Err(self.err("read", "mapping the read-back buffer failed")),
        }
        let mut data = staging.slice(..size).get_mapped_range().map_err(|e| self.err("read", e.to_string()))?.to_vec();
        let Some(index_fault) = index_fault else {
            data.truncate(len as usize);
            return Ok(data);
        };
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&data[at as usize..]);
        if words[0] != 0 {
            // Report the first bad index once, and clear the flag for what follows.
            self.upload(&index_fault, 0, &[0; INDEX_FAULT_BYTES as usize])?;
            self.flush();
            let index = ((words[2] as u64) << 32 | words[1] as u64) as i64;
            return Err(self.index_error(words[4], index, words[3] as usize));
        }
        data.truncate(len as usize);
        Ok(data)
    }
}
