//! `WgpuBackend`: the kernel trait on one wgpu adapter. Each method runs a WGSL kernel, or,
//! for what this device cannot run (f64 on Metal, f64 transcendentals, i64 arithmetic), the
//! kernel of the registry's CPU device (`liandan_tensor::fallback`) with a one-time warning and
//! an entry in the fallback report.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, ReduceOp, UnaryOp, Window2d};
use liandan_tensor::fallback::HostTensor;
use liandan_tensor::{Backend, CustomKernel, DType, DeviceKind, Error, Layout, MemoryStats, Result, Storage, Strided};

use crate::gpu::Gpu;
use crate::packed::{self, Outputs};
use crate::repr::Repr;
use crate::storage::WgpuStorage;

/// One wgpu adapter as a device's backend; [`WgpuBackend::of`] finds it behind a `Device`, to
/// read or set its [`crate::WgpuOptions`].
pub struct WgpuBackend {
    adapter: wgpu::Adapter,
    info: wgpu::AdapterInfo,
    gpu: OnceLock<std::result::Result<Arc<Gpu>, String>>,
    /// This device's options, which the opened device shares.
    pub(crate) shared: Arc<crate::options::Shared>,
    pub(crate) repr: Repr,
    fallbacks: Mutex<BTreeMap<String, u64>>,
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
    pub(crate) fn reopened(&self, options: crate::WgpuOptions) -> WgpuBackend {
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
    fn host_bytes(&self, storage: &WgpuStorage, bytes: &[u8]) -> Vec<u8> {
        match packed::is_packed(storage) {
            true => bytes.to_vec(),
            false => self.repr.gpu_to_host(bytes, storage.dtype),
        }
    }

    /// Host bytes in `dtype` on this device as the kernels hold them (bf16 in f32 words): what
    /// the CPU fallbacks' results come back as, in the middle of an op.
    fn upload_wide(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
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
        let spread = Layout::new(shape.to_vec(), strides, bias.layout.offset());
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

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    fn kind(&self) -> DeviceKind {
        match self.info.device_type {
            wgpu::DeviceType::DiscreteGpu => DeviceKind::DiscreteGpu,
            wgpu::DeviceType::Cpu => DeviceKind::SoftwareGpu,
            _ => DeviceKind::IntegratedGpu,
        }
    }

    // bf16 crosses this boundary packed (two to a word, `packed.rs`): each op below widens its
    // packed operands to the f32 words the kernels compute on (`staged`) and packs its bf16
    // results.

    fn from_host(&self, bytes: &[u8], dtype: DType) -> Result<Storage> {
        if dtype == DType::BF16 {
            // The host's little-endian bf16 bytes are the packed words.
            let out = self.packed_output(bytes.len() / 2)?;
            self.gpu()?.upload(out.buffer(), 0, bytes)?;
            return Ok(Arc::new(out));
        }
        self.upload_wide(bytes, dtype)
    }

    fn to_host(&self, src: Strided) -> Result<Vec<u8>> {
        let gpu = self.gpu()?;
        let numel = src.layout.numel();
        let size = gpu_storage(&src).elem_bytes as u64;
        let start = src.layout.offset() as u64 * size;
        let direct = src.layout.is_contiguous() && start.is_multiple_of(4);
        if !direct && gpu_storage(&src).buffer().size() > gpu.max_binding() {
            // The copy kernel cannot bind this buffer: gather the view on the host.
            return self.read_view(src);
        }
        let bytes = if direct {
            let s = gpu_storage(&src);
            let end = (start + numel as u64 * size).next_multiple_of(4).min(s.buffer().size());
            gpu.read_windows(s.buffer(), start, end)?
        } else {
            // (A copy is held as its source is: packed bf16 stays packed.)
            let copy = self.copy(src)?;
            let s = copy.as_any().downcast_ref::<WgpuStorage>().expect("own storage");
            gpu.read(s.buffer(), 0, (numel as u64 * size).max(4).next_multiple_of(4))?
        };
        Ok(self.host_bytes(gpu_storage(&src), &bytes[..numel * size as usize]))
    }

    fn full(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        match dtype {
            DType::BF16 => self.packed_fill(numel, value),
            _ => self.fill(numel, value, dtype),
        }
    }

    fn random(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        self.random_fill(dist, numel, seed, dtype)?.packed(self)
    }

    fn copy(&self, src: Strided) -> Result<Storage> {
        if !packed::packed_view(&src) {
            return self.copy_view(src);
        }
        match self.copy_packed(src)? {
            Some(out) => Ok(out),
            None => Ok(Arc::new(self.pack(Strided { storage: &self.widen(src)?, layout: &crate::kernels::dense(src.layout.shape()), dtype: src.dtype })?)),
        }
    }

    fn cast(&self, src: Strided, to: DType) -> Result<Storage> {
        match (packed::packed_view(&src), to) {
            // bf16 to f32 is the widening.
            (true, DType::F32) => Ok(Arc::new(WgpuStorage { dtype: DType::F32, ..self.widen(src)? })),
            (false, DType::BF16) if src.dtype.is_float() && self.repr.computes(src.dtype) => Ok(Arc::new(self.pack(src)?)),
            _ => self.staged(&[src], |v| self.cast_view(v[0], to)),
        }
    }

    fn unary(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        if packed::packed_view(&x) {
            if let Some(out) = self.unary_packed(op, x)? {
                return Ok(out);
            }
        }
        self.staged(&[x], |v| self.unary_op(op, v[0]))
    }

    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        if packed::packed_view(&lhs) && packed::packed_view(&rhs) {
            if let Some(out) = self.binary_packed(op, lhs, rhs)? {
                return Ok(out);
            }
        }
        self.staged(&[lhs, rhs], |v| self.binary_op(op, v[0], v[1]))
    }

    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        if packed::packed_view(&lhs) && packed::packed_view(&rhs) {
            if let Some(out) = self.compare_packed(op, lhs, rhs)? {
                return Ok(out);
            }
        }
        self.staged(&[lhs, rhs], |v| self.compare_op(op, v[0], v[1]))
    }

    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        if packed::packed_view(&on_true) && packed::packed_view(&on_false) {
            if let Some(out) = self.select_packed(cond, on_true, on_false)? {
                return Ok(out);
            }
        }
        self.staged(&[cond, on_true, on_false], |v| self.select_op(v[0], v[1], v[2]))
    }

    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        // Packed bf16 is read as it is.
        self.staged_unless(packed::packed_view(&x), &[x], |v| {
            let x = v[0];
            let out = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) || (op == ReduceOp::Sum && !x.dtype.is_float()) { DType::I64 } else { x.dtype };
            let s = x.layout.shape();
            if let Some(why) = self.oversized(&[x], s[0] * s[2], out) {
                return self.fallback1(format!("reduce {op:?} ({})", x.dtype), why, &[x], out, |cpu, v| cpu.reduce(op, v[0]));
            }
            self.reduce_op(op, x)
        })
    }

    fn matmul(&self, lhs: Strided, rhs: Strided) -> Result<Storage> {
        // Packed bf16 operands (both) are read as they are; one alone is widened.
        let both = packed::packed_view(&lhs) && packed::packed_view(&rhs);
        self.staged_unless(both, &[lhs, rhs], |v| {
            let (lhs, rhs) = (v[0], v[1]);
            let (l, r) = (lhs.layout.shape(), rhs.layout.shape());
            if let Some(why) = self.oversized(&[lhs, rhs], l[0] * l[1] * r[2], lhs.dtype) {
                return self.fallback1(format!("matmul ({})", lhs.dtype), why, &[lhs, rhs], lhs.dtype, |cpu, v| cpu.matmul(v[0], v[1]));
            }
            self.matmul_op(lhs, rhs)
        })
    }

    fn im2col(&self, x: Strided, window: Window2d, pad_value: f64) -> Result<Storage> {
        self.staged(&[x], |v| {
            let x = v[0];
            if let Some(why) = self.oversized(&[x], window.n * window.col_rows() * window.col_cols(), x.dtype) {
                return self.fallback1(format!("im2col ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.im2col(v[0], window, pad_value));
            }
            self.im2col_op(x, window, pad_value)
        })
    }

    fn col2im(&self, cols: Strided, window: Window2d) -> Result<Storage> {
        self.staged(&[cols], |v| {
            let cols = v[0];
            if let Some(why) = self.oversized(&[cols], window.n * window.c * window.h * window.w, cols.dtype) {
                return self.fallback1(format!("col2im ({})", cols.dtype), why, &[cols], cols.dtype, |cpu, v| cpu.col2im(v[0], window));
            }
            self.col2im_op(cols, window)
        })
    }

    fn max_pool2d(&self, x: Strided, window: Window2d) -> Result<(Storage, Storage)> {
        self.staged(&[x], |v| {
            let x = v[0];
            if let Some(why) = self.oversized(&[x], window.n * window.c * window.col_cols(), DType::I64) {
                let mut r = self.fallback(format!("max_pool2d ({})", x.dtype), why, &[x], &[x.dtype, DType::I64], |cpu, v| {
                    let (a, b) = cpu.max_pool2d(v[0], window)?;
                    Ok(vec![a, b])
                })?;
                let idx = r.pop().expect("two outputs");
                return Ok((r.pop().expect("two outputs"), idx));
            }
            self.max_pool2d_op(x, window)
        })
    }

    fn avg_pool2d(&self, x: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.staged(&[x], |v| {
            let x = v[0];
            if let Some(why) = self.oversized(&[x], window.n * window.c * window.col_cols(), x.dtype) {
                return self.fallback1(format!("avg_pool2d ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.avg_pool2d(v[0], window, count_include_pad));
            }
            self.avg_pool2d_op(x, window, count_include_pad)
        })
    }

    fn avg_pool2d_backward(&self, dy: Strided, window: Window2d, count_include_pad: bool) -> Result<Storage> {
        self.staged(&[dy], |v| {
            let dy = v[0];
            if let Some(why) = self.oversized(&[dy], window.n * window.c * window.h * window.w, dy.dtype) {
                return self.fallback1(format!("avg_pool2d_backward ({})", dy.dtype), why, &[dy], dy.dtype, |cpu, v| {
                    cpu.avg_pool2d_backward(v[0], window, count_include_pad)
                });
            }
            self.avg_pool2d_backward_op(dy, window, count_include_pad)
        })
    }

    fn gather(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.staged(&[src, index], |v| {
            let (src, index) = (v[0], v[1]);
            if let Some(why) = self.oversized(&[src, index], index.layout.numel(), src.dtype) {
                return self.fallback1(format!("gather ({})", src.dtype), why, &[src, index], src.dtype, |cpu, v| cpu.gather(v[0], v[1], dim));
            }
            self.gather_op(src, index, dim)
        })
    }

    fn scatter_add(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        self.staged(&[dst, index, src], |v| {
            let (dst, index, src) = (v[0], v[1], v[2]);
            if let Some(why) = self.oversized(&[dst, index, src], dst.layout.numel(), dst.dtype) {
                return self
                    .fallback1(format!("scatter_add ({})", dst.dtype), why, &[dst, index, src], dst.dtype, |cpu, v| cpu.scatter_add(v[0], v[1], v[2], dim));
            }
            self.scatter_add_op(dst, index, src, dim)
        })
    }

    fn index_select(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        self.staged(&[src, index], |v| {
            let (src, index) = (v[0], v[1]);
            let out = src.layout.numel() / src.layout.shape()[dim].max(1) * index.layout.numel();
            if let Some(why) = self.oversized(&[src, index], out, src.dtype) {
                return self.fallback1(format!("index_select ({})", src.dtype), why, &[src, index], src.dtype, |cpu, v| cpu.index_select(v[0], v[1], dim));
            }
            self.index_select_op(src, index, dim)
        })
    }

    fn concat(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        self.staged(parts, |v| self.concat_views(v, dim))
    }

    /// The tensor crate's own custom ops it has kernels for (`fused.rs` dispatches them), then
    /// the kernel the op's crate wrote for this backend (`custom.rs` is what it builds on).
    fn custom(&self, op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        self.tensor_op_kernel(op, inputs).unwrap_or_else(|| op.kernel(self, inputs))
    }

    fn synchronize(&self) -> Result<()> {
        match self.gpu.get() {
            Some(Ok(gpu)) => gpu.synchronize(),
            _ => Ok(()),
        }
    }

    fn memory_stats(&self) -> Option<MemoryStats> {
        match self.gpu.get() {
            Some(Ok(gpu)) => Some(MemoryStats { staging: gpu.staging_bytes(), ..gpu.pool.stats() }),
            _ => Some(MemoryStats::default()),
        }
    }

    fn memory_breakdown(&self) -> Option<String> {
        match self.gpu.get() {
            Some(Ok(gpu)) => gpu.pool.breakdown(),
            _ => None,
        }
    }

    fn empty_cache(&self) {
        if let Some(Ok(gpu)) = self.gpu.get() {
            gpu.pool.empty();
        }
    }

    fn set_memory_budget(&self, bytes: Option<u64>) -> bool {
        match self.gpu() {
            Ok(gpu) => {
                gpu.pool.set_budget(bytes);
                true
            }
            Err(_) => false,
        }
    }

    fn reset_peak_memory(&self) {
        if let Some(Ok(gpu)) = self.gpu.get() {
            gpu.pool.reset_peak();
        }
    }

    fn fallback_report(&self) -> Vec<(String, u64)> {
        self.fallbacks.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    fn describe(&self) -> Vec<(String, String)> {
        let limits = match self.gpu.get() {
            Some(Ok(gpu)) => gpu.limits.clone(),
            _ => self.adapter.limits(),
        };
        let mut facts = crate::info::describe(&self.adapter, &limits, &self.shared.get());
        // wgpu reports no total video memory; what this process holds is known exactly.
        let m = self.memory_stats().unwrap_or_default();
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1 << 20) as f64);
        facts.push((
            "memory (this process)".into(),
            format!("{} in use, {} pooled, {} peak, {} upload staging", mib(m.in_use), mib(m.pooled), mib(m.peak), mib(m.staging)),
        ));
        facts
    }
}
