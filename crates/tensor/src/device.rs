//! Runtime devices: which backend a tensor lives on, and how the best one is picked.
//!
//! Backends register a [`BackendProvider`] with `inventory::submit!`; linking a backend crate
//! (and naming it once, e.g. `use liandan_backend_cpu as _;`) is all it takes to make its
//! devices visible to [`Device::cpu`], [`Device::best`] and [`Device::all`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::backend::{Backend, DeviceKind, Storage};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// A constant's place in [`CONSTANTS`]: its device ([`Device::id`]), dtype and value's bits.
type ConstantKey = (usize, DType, u64);

/// The constants of the `*_scalar` ops, per device, dtype and value ([`Device::constant`]).
static CONSTANTS: Mutex<Option<HashMap<ConstantKey, Storage>>> = Mutex::new(None);

/// Constants kept at most; past this many the cache starts over.
const MAX_CONSTANTS: usize = 4096;

/// A compute device: a handle to one backend instance. Cheap to clone.
#[derive(Clone)]
pub struct Device {
    backend: Arc<dyn Backend>,
    /// The same backend, recording every call while a profiling session runs.
    profiled: Arc<crate::profile::Profiled>,
}

/// How a backend crate makes its devices known. See the module docs.
pub struct BackendProvider {
    /// Short name, e.g. `cpu` or `wgpu`.
    pub name: &'static str,
    /// Lists the devices this backend can open. Called once; the result is cached.
    pub devices: fn() -> Vec<Arc<dyn Backend>>,
}

inventory::collect!(BackendProvider);

fn registry() -> &'static [Device] {
    static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let mut all = Vec::new();
        for p in inventory::iter::<BackendProvider> {
            for backend in (p.devices)() {
                all.push(Device::from_backend(backend));
            }
        }
        all
    })
}

impl Device {
    /// Wraps a backend instance that is not in the registry (tests, third-party backends).
    pub fn from_backend(backend: Arc<dyn Backend>) -> Device {
        let profiled = Arc::new(crate::profile::Profiled::new(backend.clone()));
        Device { backend, profiled }
    }

    /// The CPU device.
    ///
    /// # Panics
    /// If no CPU backend is linked into the program: depend on `liandan-backend-cpu` and name
    /// it once (`use liandan_backend_cpu as _;`). This is a build mistake, not a runtime one.
    pub fn cpu() -> Device {
        registry()
            .iter()
            .find(|d| d.kind() == DeviceKind::Cpu)
            .cloned()
            .expect("Device::cpu(): no CPU backend is linked; add liandan-backend-cpu to your dependencies and write `use liandan_backend_cpu as _;`")
    }

    /// Every device of every linked backend.
    pub fn all() -> Vec<Device> {
        registry().to_vec()
    }

    /// GPUs in the order `gpu:N` counts them.
    pub fn gpus() -> Vec<Device> {
        registry().iter().filter(|d| d.kind() != DeviceKind::Cpu).cloned().collect()
    }

    /// The device `LIANDAN_DEVICE` names (`cpu`, `gpu`, `gpu:N`), `None` when it is unset or
    /// empty. A value that names no device here is an error naming the variable and the devices
    /// that exist: an explicit request is never silently replaced by another device.
    pub fn from_env() -> Result<Option<Device>> {
        crate::settings::options()?;
        let found = || {
            let all: Vec<String> = std::iter::once("cpu".to_string()).chain((0..Device::gpus().len()).map(|n| format!("gpu:{n}"))).collect();
            format!("Devices here: {}; set LIANDAN_DEVICE to one of them, or unset it", all.join(", "))
        };
        let spec = match crate::settings::DEVICE.text_in(&crate::settings::env) {
            Ok(None) => return Ok(None),
            Ok(Some(spec)) => spec,
            Err(e) => return Err(Error::Device(format!("{e}. {}", found()))),
        };
        Device::parse(&spec).map(Some).map_err(|e| Error::Device(format!("LIANDAN_DEVICE={spec:?}: {e}. {}", found())))
    }

    /// The best device available: the one `LIANDAN_DEVICE` names if it is set (see
    /// [`Device::from_env`]; naming a device that does not exist is an error), else a discrete
    /// GPU, then an integrated one, then the CPU. A software GPU is used only when asked for by
    /// name.
    pub fn best() -> Result<Device> {
        if let Some(d) = Device::from_env()? {
            return Ok(d);
        }
        let mut candidates: Vec<Device> = registry().iter().filter(|d| d.kind() != DeviceKind::SoftwareGpu).cloned().collect();
        candidates.sort_by_key(|d| std::cmp::Reverse(d.kind()));
        Ok(candidates.into_iter().next().unwrap_or_else(Device::cpu))
    }

    /// Parses `cpu`, `gpu` (the first GPU) or `gpu:N`.
    pub fn parse(spec: &str) -> Result<Device> {
        let spec = spec.trim().to_ascii_lowercase();
        let gpus = Device::gpus();
        let pick = |n: usize| {
            gpus.get(n)
                .cloned()
                .ok_or_else(|| Error::Device(format!("`{spec}` asks for GPU {n}, but {} GPU(s) were found; run `liandan info` to list them", gpus.len())))
        };
        match spec.as_str() {
            "cpu" => Ok(Device::cpu()),
            "gpu" => pick(0),
            s => match s.strip_prefix("gpu:").map(str::parse::<usize>) {
                Some(Ok(n)) => pick(n),
                _ => Err(Error::Device(format!("`{spec}` is not a device; use cpu, gpu or gpu:N"))),
            },
        }
    }

    /// The device's backend: the tensor layer's one way to its kernels (while a profiling
    /// session runs, a wrapper that records each call: see [`crate::profile`]).
    pub fn backend(&self) -> &dyn Backend {
        if crate::profile::active() {
            &*self.profiled
        } else {
            &*self.backend
        }
    }

    pub fn kind(&self) -> DeviceKind {
        self.backend.kind()
    }

    pub fn is_cpu(&self) -> bool {
        self.kind() == DeviceKind::Cpu
    }

    /// Waits until all work queued on this device has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.backend().synchronize()
    }

    /// The caching allocator's statistics, where the backend has one.
    pub fn memory_stats(&self) -> Option<crate::backend::MemoryStats> {
        self.backend.memory_stats()
    }

    /// Releases cached, unused device memory (`torch.mps.empty_cache`), and the constants the
    /// `*_scalar` ops keep on this device.
    pub fn empty_cache(&self) {
        if let Some(cache) = CONSTANTS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            cache.retain(|k, _| k.0 != self.id());
        }
        self.backend.empty_cache()
    }

    /// The one-element buffer of `value` in `dtype` on this device, made by `make` the first
    /// time and kept until [`Device::empty_cache`]: the `*_scalar` ops' operands, which on a
    /// GPU would each cost a dispatch to make.
    pub(crate) fn constant(&self, dtype: DType, value: f64, make: impl FnOnce() -> Result<Storage>) -> Result<Storage> {
        let key = (self.id(), dtype, value.to_bits());
        if let Some(s) = CONSTANTS.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|c| c.get(&key)) {
            return Ok(s.clone());
        }
        let storage = make()?;
        let mut cache = CONSTANTS.lock().unwrap_or_else(|e| e.into_inner());
        let cache = cache.get_or_insert_with(HashMap::new);
        if cache.len() >= MAX_CONSTANTS {
            cache.clear();
        }
        cache.insert(key, storage.clone());
        Ok(storage)
    }

    /// Caps the bytes of live tensors on this device (see [`Backend::set_memory_budget`]);
    /// `false` where the backend keeps no accounts.
    pub fn set_memory_budget(&self, bytes: Option<u64>) -> bool {
        self.backend.set_memory_budget(bytes)
    }

    /// Starts the peak of [`Device::memory_stats`] over from what is in use now.
    pub fn reset_peak_memory(&self) {
        self.backend.reset_peak_memory()
    }

    /// What was live at the peak of [`Device::memory_stats`], by where each buffer was made
    /// (see [`Backend::memory_breakdown`]).
    pub fn memory_breakdown(&self) -> Option<String> {
        self.backend.memory_breakdown()
    }

    /// Ops that ran on the CPU because this device cannot run them, with counts.
    pub fn fallback_report(&self) -> Vec<(String, u64)> {
        self.backend.fallback_report()
    }

    /// The device's backend as its own type `B`, `None` where it is another backend's: how a
    /// backend crate reaches its options (`liandan_backend_wgpu::WgpuBackend::of`).
    pub fn backend_as<B: Backend>(&self) -> Option<&B> {
        let any: &dyn std::any::Any = &*self.backend;
        any.downcast_ref::<B>()
    }

    /// Facts about the device (name, API, type, features, limits, memory).
    pub fn describe(&self) -> Vec<(String, String)> {
        self.backend.describe()
    }

    /// A number naming this device's backend instance for as long as it lives (the same while
    /// profiling, when [`Device::backend`] hands out a wrapper).
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.backend) as *const () as usize
    }

    /// This device as a `&'static` handle, which tensors hold (see `tensor::State`). Registry
    /// devices are static already; a device made by [`Device::from_backend`] is leaked once, the
    /// first time a tensor is put on it (a program makes few of those, tests mostly).
    pub(crate) fn interned(&self) -> &'static Device {
        if let Some(d) = registry().iter().find(|d| d.same(self)) {
            return d;
        }
        static OTHERS: Mutex<Vec<&'static Device>> = Mutex::new(Vec::new());
        let mut others = OTHERS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = others.iter().find(|d| d.same(self)) {
            return d;
        }
        let d: &'static Device = Box::leak(Box::new(self.clone()));
        others.push(d);
        d
    }

    pub fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.backend, &other.backend)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind() {
            DeviceKind::Cpu => write!(f, "cpu"),
            _ => {
                let n = Device::gpus().iter().position(|d| d.same(self));
                match n {
                    Some(n) => write!(f, "gpu:{n} ({})", self.backend.name()),
                    None => write!(f, "gpu ({})", self.backend.name()),
                }
            }
        }
    }
}
