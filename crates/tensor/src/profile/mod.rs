//! The profiler: per-op wall time and call counts, grouped by op and by layer, GPU time where the
//! device can time its kernels, and peak device memory (`torch.profiler` for liandan).
//!
//! ```
//! use liandan_tensor::{profile, Device, DType, Tensor};
//! # use liandan_backend_cpu as _;
//! let dev = Device::cpu();
//! profile::start()?;
//! let x = Tensor::ones(&[4, 3], DType::F32, &dev)?;
//! let y = {
//!     let _layer = profile::layer("Linear");
//!     x.matmul(&Tensor::ones(&[3, 2], DType::F32, &dev)?)?
//! };
//! let p = profile::stop()?;
//! assert_eq!(p.by_op().iter().find(|r| r.name == "matmul").unwrap().calls, 1);
//! println!("{p}"); // the tables; p.write_trace(path) writes a Chrome trace for Perfetto
//! # drop(y);
//! # Ok::<(), liandan_tensor::Error>(())
//! ```
//!
//! How it works: while a session runs, [`Device::backend`](crate::Device::backend) hands out a
//! recording wrapper of the backend (`backend.rs`), which times every kernel-trait call the
//! tensor layer makes (the outermost one: a GPU op that falls back to the CPU counts once) and
//! tags it with the thread's layer path ([`layer`], pushed by `liandan-nn`'s module scopes,
//! and `backward` during autograd). A backend that can time its kernels on the device asks
//! [`current_op`] when it records one and reports the time with [`record_gpu`]; reports are
//! collected by the synchronize [`stop`] does. When no session runs, the only cost is one
//! relaxed atomic load per kernel call.
//!
//! CPU wall time is the time the host spends in the call: on a GPU it is the cost of recording
//! the dispatch (kernels run asynchronously), except for calls that wait (reading a tensor
//! back, `synchronize`), which absorb the queued GPU work. GPU time is the kernels' own.

mod backend;
mod report;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::backend::{Backend, DeviceKind};
use crate::error::{Error, Result};

pub(crate) use backend::Profiled;
pub use report::{Row, TraceEvent};

static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether the running session records each call's input shapes ([`Options::record_shapes`]).
static SHAPES: AtomicBool = AtomicBool::new(false);
static SESSION: Mutex<Option<Session>> = Mutex::new(None);
/// Ids of recorded op calls, unique for the life of the process (so a late GPU report from an
/// earlier session cannot land on a call of this one).
static NEXT_OP: AtomicU64 = AtomicU64::new(1);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static LAYERS: RefCell<Vec<Cow<'static, str>>> = const { RefCell::new(Vec::new()) };
    /// The op call being recorded on this thread (0: none), and how deep calls are nested.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The name of the op call being recorded on this thread, for [`current_call`].
    static CURRENT_NAME: RefCell<Cow<'static, str>> = const { RefCell::new(Cow::Borrowed("")) };
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

/// One recorded call of a kernel-trait method.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    id: u64,
    name: Cow<'static, str>,
    layer: String,
    thread: u64,
    /// Nanoseconds from the session's start.
    start_ns: u64,
    cpu_ns: u64,
    gpu_ns: Option<u64>,
    /// The inputs' shapes and dtypes, and the call's floating-point operations where known,
    /// when the session records shapes.
    shapes: Option<String>,
    flops: Option<u64>,
}

/// What a call's recorder learns about its inputs when the session records shapes: their
/// shapes and dtypes (`[128, 64, 32, 32] f32, [64, 64, 3, 3] f32`) and, for products and
/// convolutions, the multiply-adds counted twice (as `torch.profiler`'s `with_flops`).
pub(crate) struct Inputs {
    pub shapes: String,
    pub flops: Option<u64>,
}

/// What a session records beyond each call's name, layer and times (the options of
/// `torch.profiler.profile`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Each call's input shapes and dtypes, and the floating-point operations of products and
    /// convolutions, for [`Profile::by_op_and_shapes`] (PyTorch's `record_shapes` and
    /// `with_flops`). Costs a little host time per call.
    pub record_shapes: bool,
}

struct Session {
    started: Instant,
    events: Vec<Event>,
    gpu: HashMap<u64, u64>,
    notes: BTreeSet<String>,
    /// Every backend that ran a call, with its memory counters at the session's start.
    backends: Vec<(Arc<dyn Backend>, Option<crate::backend::MemoryStats>)>,
    /// The most device memory in use seen after a call, per backend (same order).
    in_use_max: Vec<u64>,
}

fn session() -> MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a profiling session is running (a relaxed load: the check every kernel call pays).
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Starts a session: from now on every kernel call on every thread is recorded, until [`stop`].
pub fn start() -> Result<()> {
    start_with(Options::default())
}

/// [`start`] with `options` (e.g. recording input shapes).
pub fn start_with(options: Options) -> Result<()> {
    let mut s = session();
    if s.is_some() {
        return Err(Error::Profile("start: a profiling session is already running; call profile::stop first".into()));
    }
    *s = Some(Session {
        started: Instant::now(),
        events: Vec::new(),
        gpu: HashMap::new(),
        notes: BTreeSet::new(),
        backends: Vec::new(),
        in_use_max: Vec::new(),
    });
    SHAPES.store(options.record_shapes, Ordering::Relaxed);
    ACTIVE.store(true, Ordering::Relaxed);
    Ok(())
}

/// Ends the session: waits for every device that ran a call (so that GPU times arrive) and
/// returns what was recorded.
pub fn stop() -> Result<Profile> {
    if !ACTIVE.swap(false, Ordering::Relaxed) {
        return Err(Error::Profile("stop: no profiling session is running; call profile::start first".into()));
    }
    let backends: Vec<Arc<dyn Backend>> = session().as_ref().map(|s| s.backends.iter().map(|b| b.0.clone()).collect()).unwrap_or_default();
    let mut waited = Ok(());
    for b in &backends {
        waited = waited.and(b.synchronize());
    }
    let s = session().take().expect("a session runs while ACTIVE was set");
    waited?;
    Ok(Profile::from_session(s))
}

/// Marks the calls made on this thread until the guard drops as belonging to layer `name`,
/// nested in the layers already entered (`ResNet/BasicBlock/Conv2d`). `None` (and no cost
/// beyond the check) when no session runs.
pub fn layer(name: impl Into<Cow<'static, str>>) -> Option<LayerGuard> {
    if !active() {
        return None;
    }
    LAYERS.with(|l| l.borrow_mut().push(name.into()));
    Some(LayerGuard(()))
}

/// Leaves the layer [`layer`] entered.
#[must_use = "the layer ends when the guard drops"]
pub struct LayerGuard(());

impl Drop for LayerGuard {
    fn drop(&mut self) {
        LAYERS.with(|l| l.borrow_mut().pop());
    }
}

/// The op call being recorded on this thread, for a backend to tag the kernels it records
/// with; `None` when no session runs.
pub fn current_op() -> Option<u64> {
    let id = CURRENT.with(Cell::get);
    (id != 0).then_some(id)
}

/// The op call being recorded on this thread as `layer path: op` (`ResNet/layer1.0/conv1:
/// conv2d`), for a backend to say where a buffer was made; `None` when no session runs.
pub fn current_call() -> Option<String> {
    current_op()?;
    let layer = LAYERS.with(|l| l.borrow().join("/"));
    let layer = if layer.is_empty() { "(no layer)".to_string() } else { layer };
    Some(CURRENT_NAME.with(|n| format!("{layer}: {}", n.borrow())))
}

/// Adds `nanos` of device time to the op call `op` (from [`current_op`]); ignored when that
/// call's session is over.
pub fn record_gpu(op: u64, nanos: u64) {
    if let Some(s) = session().as_mut() {
        *s.gpu.entry(op).or_default() += nanos;
    }
}

/// A line for the report's notes (e.g. why GPU time is not measured); each once per session.
pub fn note(line: impl Into<String>) {
    if let Some(s) = session().as_mut() {
        s.notes.insert(line.into());
    }
}

/// Resets the thread's call state when a recorded call ends, also by unwinding.
struct Outermost;

impl Drop for Outermost {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(0));
        CURRENT.with(|c| c.set(0));
    }
}

/// Runs `call` as the op `name` on `backend`, recording it when it is the outermost call on
/// this thread and `keep` accepts its result; `inputs` describes its inputs when the session
/// records shapes.
pub(crate) fn record<T>(
    backend: &Arc<dyn Backend>,
    name: impl FnOnce() -> Cow<'static, str>,
    inputs: impl FnOnce() -> Inputs,
    call: impl FnOnce() -> T,
    keep: impl FnOnce(&T) -> bool,
) -> T {
    if DEPTH.with(Cell::get) > 0 || !active() {
        return call();
    }
    let id = NEXT_OP.fetch_add(1, Ordering::Relaxed);
    let name = name();
    CURRENT_NAME.with(|n| n.borrow_mut().clone_from(&name));
    let outermost = Outermost;
    DEPTH.with(|d| d.set(1));
    CURRENT.with(|c| c.set(id));
    let t0 = Instant::now();
    let out = call();
    let cpu_ns = t0.elapsed().as_nanos() as u64;
    drop(outermost);
    if !keep(&out) {
        return out;
    }
    let (shapes, flops) = SHAPES.load(Ordering::Relaxed).then(inputs).map_or((None, None), |i| (Some(i.shapes), i.flops));
    let layer = LAYERS.with(|l| l.borrow().join("/"));
    let thread = THREAD.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    });
    let mut guard = session();
    let Some(s) = guard.as_mut() else { return out };
    let start_ns = t0.saturating_duration_since(s.started).as_nanos() as u64;
    s.events.push(Event { id, name, layer, thread, start_ns, cpu_ns, gpu_ns: None, shapes, flops });
    let i = match s.backends.iter().position(|b| Arc::ptr_eq(&b.0, backend)) {
        Some(i) => i,
        None => {
            s.backends.push((backend.clone(), backend.memory_stats()));
            s.in_use_max.push(0);
            s.backends.len() - 1
        }
    };
    if let Some(m) = backend.memory_stats() {
        s.in_use_max[i] = s.in_use_max[i].max(m.in_use);
    }
    out
}

/// Peak device memory of one device during a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    pub device: String,
    /// Bytes: the most in use at any moment of the session where the device's allocator kept
    /// the peak within it, else the most seen after any call.
    pub peak: u64,
}

/// What a session recorded; `Display` prints the tables.
#[derive(Clone, Debug)]
pub struct Profile {
    pub(crate) events: Vec<Event>,
    /// Wall time of the whole session, nanoseconds.
    pub wall_ns: u64,
    /// Whether any call has a device time.
    pub gpu_measured: bool,
    pub memory: Vec<DeviceMemory>,
    /// Why something was not measured, and similar remarks.
    pub notes: Vec<String>,
}

impl Profile {
    fn from_session(mut s: Session) -> Profile {
        for e in &mut s.events {
            e.gpu_ns = s.gpu.get(&e.id).copied();
        }
        let gpu_measured = s.events.iter().any(|e| e.gpu_ns.is_some());
        let mut memory = Vec::new();
        for ((b, before), seen) in s.backends.iter().zip(&s.in_use_max) {
            let after = b.memory_stats();
            if b.kind() != DeviceKind::Cpu && !gpu_measured {
                s.notes.insert(format!("GPU time not measured on {}: it cannot time kernels (no timestamp queries)", b.name()));
            }
            if let (Some(before), Some(after)) = (before, after) {
                // The allocator's peak rose during the session, so its new value was reached in it.
                let peak = if after.peak > before.peak { after.peak } else { (*seen).max(before.in_use) };
                memory.push(DeviceMemory { device: b.name(), peak });
            }
        }
        Profile { events: s.events, wall_ns: s.started.elapsed().as_nanos() as u64, gpu_measured, memory, notes: s.notes.into_iter().collect() }
    }
}
