//! `WgpuBackend`: the kernel trait on one wgpu adapter. Each method runs a WGSL kernel, or,
//! for what this device cannot run (f64 on Metal, f64 transcendentals, i64 arithmetic), the
//! kernel of the registry's CPU device (`liandan_tensor::fallback`) with a one-time warning and
//! an entry in the fallback report.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use liandan_tensor::backend::BinaryOp;
use liandan_tensor::fallback::HostTensor;
use liandan_tensor::{Backend, DType, Device, Error, Layout, Result, Storage, Strided};

use crate::gpu::Gpu;
use crate::options::WgpuOptions;
use crate::repr::Repr;
use crate::storage::WgpuStorage;

/// One wgpu adapter as a device's backend; [`WgpuBackend::of`] finds it behind a `Device`, to
/// read or set its [`crate::WgpuOptions`].
pub struct WgpuBackend {
    pub(crate) adapter: wgpu::Adapter,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) gpu: OnceLock<std::result::Result<Arc<Gpu>, String>>,
    /// This device's options, which the opened device shares.
    pub(crate) shared: Arc<crate::options::Shared>,
    pub(crate) repr: Repr,
    pub(crate) fallbacks: Mutex<BTreeMap<String, u64>>,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuBackend({})", self.name())
    }
}

/// Why an op runs on the CPU rather than on this device.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Why {
    /// This device has no kernel for the op, or for its dtype.
    Unsupported,
    /// The op's sizes or values are past what its kernel can express here.
    Limit(&'static str),
    /// A buffer of this many bytes is larger than one binding may cover.
    Oversized(u64),
}

/// The GPU buffer of a view handed to this backend.
pub(crate) fn gpu_storage<'a>(s: &Strided<'a>) -> &'a WgpuStorage {
    s.storage.as_any().downcast_ref::<WgpuStorage>().expect("liandan-backend-wgpu was handed another backend's storage")
}

impl WgpuBackend {
    /// The backend of `adapter`, with the environment's options (see `options.rs`).
    pub(crate) fn new(adapter: wgpu::Adapter) -> WgpuBackend {
        WgpuBackend::with_shared(adapter, crate::options::Shared::from_env())
    }

    fn with_shared(adapter: wgpu::Adapter, shared: crate::options::Shared) -> WgpuBackend {
        let info = adapter.get_info();
        let repr = Repr::new(adapter.features());
        WgpuBackend { adapter, info, gpu: OnceLock::new(), shared: Arc::new(shared), repr, fallbacks: Mutex::default() }
    }

    /// Another backend on this adapter, not yet opened, with `options`.
    pub(crate) fn reopened(&self, options: WgpuOptions) -> WgpuBackend {
        WgpuBackend::with_shared(self.adapter.clone(), crate::options::Shared::new(options, None))
    }

    /// The opened device, opened on first use; an error while a setting in the environment is
    /// bad (until options are set on the device).
    pub(crate) fn gpu(&self) -> Result<&Arc<Gpu>> {
        self.shared.check()?;
        self.gpu
            .get_or_init(|| Gpu::open(&self.adapter, self.shared.clone()).map(Arc::new).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Device(e.clone()))
    }

    /// Whether the device has been opened (by its first use).
    pub(crate) fn is_open(&self) -> bool {
        self.gpu.get().is_some()
    }

    /// Shapes the autotune has measured on this device (a shape found in its file is not
    /// measured).
    pub fn autotune_measured(&self) -> u64 {
        match self.gpu.get() {
            Some(Ok(gpu)) => gpu.measured.load(std::sync::atomic::Ordering::Relaxed),
            _ => 0,
        }
    }

    /// A fresh buffer for `numel` elements of `dtype`, or an error naming the bytes asked for
    /// when this device cannot hold them (never a panic or an abort).
    pub(crate) fn output(&self, dtype: DType, numel: usize) -> Result<WgpuStorage> {
        let gpu = self.gpu()?;
        let elem_bytes = self.repr.gpu_size(dtype);
        let Some(bytes) = (numel as u64).checked_mul(elem_bytes as u64).and_then(|b| b.checked_next_multiple_of(4)) else {
            return Err(gpu.err("alloc", format!("{numel} elements of {dtype} ({elem_bytes} bytes each) need more than 2^64 bytes")));
        };
        Ok(WgpuStorage { buf: gpu.alloc(bytes.max(4))?, elem_bytes, numel, dtype })
    }

    /// Records that `what` ran on the CPU and why, warning the first time.
    pub(crate) fn note_fallback(&self, what: &str, why: Why) {
        let key = match why {
            Why::Unsupported => what.to_string(),
            Why::Limit(limit) => format!("{what}: {limit}"),
            Why::Oversized(_) => format!("{what}: too large to bind"),
        };
        let mut f = self.fallbacks.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key).or_insert(0);
        if *n == 0 {
            let name = self.name();
            let reason = match why {
                Why::Unsupported => format!("{what} is not supported on {name}"),
                Why::Limit(limit) => format!("{what} cannot run on {name}: {limit}"),
                Why::Oversized(bytes) => {
                    let limit = self.gpu().map(|g| g.max_binding()).unwrap_or_default();
                    format!("{what} cannot run on {name}: a buffer of {bytes} bytes is past its {limit}-byte storage binding limit")
                }
            };
            eprintln!("liandan: {reason}; running it on the CPU (results stay correct, but slower)");
        }
        *n += 1;
    }

    /// The view `src` as contiguous host bytes in its dtype, read without any kernel: the
    /// buffer span it touches comes back in windows no larger than one binding, and the strides
    /// are applied here. What the fallbacks read through, so a view too large for the device's
    /// own copy kernel can never send the copy back to the fallback.
    pub(crate) fn read_view(&self, src: Strided) -> Result<Vec<u8>> {
        let gpu = self.gpu()?;
        let storage = gpu_storage(&src);
        let buffer = storage.buffer();
        let size = storage.elem_bytes;
        if src.layout.numel() == 0 {
            return Ok(Vec::new());
        }
        // Strides are never negative: the view touches elements `offset .. max_extent`.
        let (lo, hi) = (src.layout.offset(), src.layout.max_extent());
        let (start, end) = ((lo * size) as u64 / 4 * 4, ((hi * size) as u64).next_multiple_of(4).min(buffer.size()));
        let bytes = gpu.read_windows(buffer, start, end)?;
        let base = start as usize;
        let mut picked = Vec::with_capacity(src.layout.numel() * size);
        for i in src.layout.indices() {
            let b = i * size - base;
            picked.extend_from_slice(&bytes[b..b + size]);
        }
        Ok(self.host_bytes(storage, &picked))
    }

    /// A storage's element bytes (exactly its elements) as host bytes in its dtype.
    pub(crate) fn host_bytes(&self, storage: &WgpuStorage, bytes: &[u8]) -> Vec<u8> {
        match storage.is_packed() {
            true => bytes.to_vec(),
            false => self.repr.gpu_to_host(bytes, storage.dtype),
        }
    }

    /// Host bytes in `dtype` on this device as the kernels hold them (bf16 in f32 words): what
    /// the CPU fallbacks' results come back as, in the middle of an op.
    pub(crate) fn upload_wide(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        let numel = bytes.len() / dtype.size_in_bytes();
        let out = self.output(dtype, numel)?;
        self.gpu()?.upload(out.buffer(), 0, &self.repr.host_to_gpu(bytes, dtype))?;
        Ok(Arc::new(out))
    }

    /// Runs `f` on the CPU (the device registry's) over host copies of `inputs` and uploads
    /// its `outputs` results (dtypes given) back to this device.
    pub(crate) fn fallback(
        &self,
        what: String,
        why: Why,
        inputs: &[Strided],
        outputs: &[DType],
        f: impl FnOnce(&dyn Backend, &[Strided]) -> Result<Vec<Storage>>,
    ) -> Result<Vec<Storage>> {
        self.note_fallback(&what, why);
        let mut host = Vec::with_capacity(inputs.len());
        for s in inputs {
            host.push(HostTensor { bytes: self.read_view(*s)?, shape: s.layout.shape(), dtype: s.dtype });
        }
        let results = liandan_tensor::fallback::on_cpu(&what, host, outputs, f)?;
        results.iter().zip(outputs).map(|(bytes, &dtype)| self.upload_wide(bytes, dtype)).collect()
    }

    /// [`WgpuBackend::fallback`] for an op with one output.
    pub(crate) fn fallback1(
        &self,
        what: String,
        why: Why,
        inputs: &[Strided],
        out: DType,
        f: impl FnOnce(&dyn Backend, &[Strided]) -> Result<Storage>,
    ) -> Result<Storage> {
        Ok(self.fallback(what, why, inputs, &[out], |cpu, v| Ok(vec![f(cpu, v)?]))?.remove(0))
    }
}

impl WgpuBackend {
    /// `y` (dense over `shape`) plus `bias` read through `strides` over that shape: a
    /// product's or a convolution's bias where its kernel could not add it as it stored y
    /// (partial sums, the tensor cores, packed bf16).
    pub(crate) fn add_bias(&self, y: Storage, shape: &[usize], bias: &Strided, strides: Vec<usize>) -> Result<Storage> {
        let dtype = bias.dtype;
        let y = Strided { storage: &*y, layout: &Layout::contiguous(shape), dtype };
        let spread = Layout::new(shape, strides, bias.layout.offset());
        liandan_tensor::Backend::binary(self, BinaryOp::Add, y, Strided { storage: bias.storage, layout: &spread, dtype })
    }

    /// Why an op over `views` with an output of `out_elems` elements of `dtype` cannot run
    /// here, when one of those buffers is larger than one binding may cover: such ops (other
    /// than the chunked elementwise ones) run on the CPU.
    pub(crate) fn oversized(&self, views: &[Strided], out_elems: usize, dtype: DType) -> Option<Why> {
        let limit = self.gpu().ok()?.max_binding();
        let sizes = views.iter().map(|v| gpu_storage(v).buffer().size()).chain([self.repr.buffer_bytes(dtype, out_elems)]);
        sizes.filter(|&b| b > limit).max().map(Why::Oversized)
    }
}

impl WgpuBackend {
    /// The wgpu backend of `device`; `None` for another backend's device.
    pub fn of(device: &Device) -> Option<&WgpuBackend> {
        device.backend_as::<WgpuBackend>()
    }

    /// This device's options.
    pub fn options(&self) -> WgpuOptions {
        (*self.shared.get()).clone()
    }

    /// Replaces this device's options, for the ops recorded after the call. Those that apply
    /// when the device opens (`coop_matrix`, `memory_breakdown`, `shader_checks`) cannot change
    /// once it has run anything: that is an error (open another device with [`with_options`]).
    pub fn set_options(&self, options: WgpuOptions) -> Result<()> {
        if self.is_open() && options.differ_at_open(&self.shared.get()) {
            return Err(Error::Device(format!(
                "{}: coop_matrix, memory_breakdown and shader_checks apply when the device opens, and it is open; \
                 set them before its first use, or open another device with them (liandan_backend_wgpu::with_options)",
                liandan_tensor::Backend::name(self)
            )));
        }
        self.shared.set(options);
        Ok(())
    }
}

/// A new device on `device`'s adapter, opened with `options`: its own queue, memory and
/// kernels, beside `device` (which keeps its own options). An error for a device of another
/// backend.
pub fn with_options(device: &Device, options: WgpuOptions) -> Result<Device> {
    let backend = WgpuBackend::of(device).ok_or_else(|| Error::Device(format!("{device} is not a wgpu device")))?;
    Ok(Device::from_backend(Arc::new(backend.reopened(options))))
}
