//! The kernel trait on [`WgpuBackend`]: each method sends its views to their kernels (the
//! launchers in this crate's other files), to a kernel that reads packed bf16 as it is
//! stored, or through [`staged`](WgpuBackend::staged), which widens packed operands and
//! packs bf16 results (`packed.rs`); what cannot run here goes to the CPU fallback.

use std::sync::Arc;

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, HostRead, Ready, ReduceOp, UnaryOp, Window2d};
use liandan_tensor::{Backend, CustomKernel, DType, DeviceKind, MemoryStats, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::packed::{self, Outputs, PackedKernel};
use crate::storage::WgpuStorage;

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

    // bf16 crosses this boundary packed (two to a word, `packed.rs`). Each op below says which
    // of the packing layer's three ways it takes: its kernels read packed operands as stored
    // (`as_stored`), a kernel of `shaders/packed/` runs (`packed_kernel_or_staged`), or packed
    // operands are widened to the f32 words the kernels compute on (`staged`); bf16 results
    // are packed on the way out. Copies and casts change the representation itself.

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

    fn to_host_later(&self, src: Strided) -> Result<Box<dyn HostRead>> {
        self.host_later(src, true)
    }

    fn to_host_later_in_batch(&self, src: Strided) -> Result<Box<dyn HostRead>> {
        self.host_later(src, false)
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
        self.packed_kernel_or_staged(PackedKernel::Unary(op), &[x], |v| self.unary_op(op, v[0]))
    }

    fn binary(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.packed_kernel_or_staged(PackedKernel::Binary(op), &[lhs, rhs], |v| self.binary_op(op, v[0], v[1]))
    }

    fn compare(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        self.packed_kernel_or_staged(PackedKernel::Compare(op), &[lhs, rhs], |v| self.compare_op(op, v[0], v[1]))
    }

    fn select(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        self.packed_kernel_or_staged(PackedKernel::Select, &[cond, on_true, on_false], |v| self.select_op(v[0], v[1], v[2]))
    }

    fn reduce(&self, op: ReduceOp, x: Strided) -> Result<Storage> {
        self.as_stored(&[x], |v| {
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
        self.as_stored(&[lhs, rhs], |v| {
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
        let op = |v: &[Strided]| {
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
        };
        // Its kernel reads packed bf16 as stored; a view that is not contiguous is widened.
        match x.layout.is_contiguous() {
            true => self.as_stored(&[x], op),
            false => self.staged(&[x], op),
        }
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
        if packed::all_packed(parts) {
            if let Some(out) = self.concat_packed(parts, dim)? {
                return Ok(out);
            }
        }
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

impl WgpuBackend {
    /// A read-back of `src` to be taken later; `ends_batch`: the copy ends its batch of work
    /// (see [`crate::gpu::Gpu::read_later`]).
    fn host_later(&self, src: Strided, ends_batch: bool) -> Result<Box<dyn HostRead>> {
        let storage = gpu_storage(&src);
        let start = src.layout.offset() as u64 * storage.elem_bytes as u64;
        // Words whose host bytes are the device's (f32, i32, ...); the rest read at once.
        let same_bytes = !storage.is_packed() && self.repr.gpu_to_host(&[0; 4], src.dtype).len() == 4 && storage.elem_bytes == 4;
        if !(src.layout.is_contiguous() && same_bytes && start.is_multiple_of(4)) {
            return Ok(Box::new(Ready(self.to_host(src)?)));
        }
        let len = src.layout.numel() as u64 * 4;
        Ok(Box::new(Later(self.gpu()?.read_later(storage.buffer(), start, len, ends_batch))))
    }
}

/// A read-back recorded to be taken later.
struct Later(crate::gpu::LaterBytes);

impl HostRead for Later {
    fn wait(self: Box<Self>) -> Result<Vec<u8>> {
        self.0.wait()
    }
}
