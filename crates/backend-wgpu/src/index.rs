//! Data-dependent addressing: gather, scatter-add and index-select.
//!
//! Index values come from user data, and a kernel cannot fail mid-dispatch: it skips an
//! out-of-range index (reading or writing nothing) and records it in the calling thread's
//! index-fault buffer, which its next read-back or `synchronize` turns into
//! `Error::IndexOutOfRange`, or into the error of the op that said what the indices were for
//! (`liandan_tensor::IndexUse`: a loss's class targets) under the tag the kernel records. So
//! indexing never makes the host wait (cross-entropy and max-pool backward index every step).

use std::sync::Arc;

use liandan_tensor::layout::contiguous_strides;
use liandan_tensor::{DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{grid, strided_meta, KernelKey, Wgsl};
use crate::launch::WIDE;
use crate::params::Meta;
use crate::repr::Repr;
use crate::storage::WgpuStorage;

const FAULT: &str = include_str!("shaders/index_fault.wgsl");
const TAKE: &str = include_str!("shaders/index_take.wgsl");
const SCATTER_ADD: &str = include_str!("shaders/index_scatter_add.wgsl");

// What a bad index found in a kernel is reported as, at the next read, when the op that asked
// for the kernel did not say what its indices were for.
const GATHER: &str = "gather (found on the GPU, reported at the next read)";
const INDEX_SELECT: &str = "index_select (found on the GPU, reported at the next read)";
const SCATTER_ADD_OP: &str = "scatter_add (found on the GPU, reported at the next read)";

/// One indexing kernel variant (see `kernels::KernelKey`): the gather/index-select kernel
/// moving elements of any dtype, or the scatter-add kernel adding into an f32 accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Take(DType),
    ScatterAdd(DType),
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let (dtype, kernel) = match *self {
            Key::Take(d) => (d, TAKE),
            Key::ScatterAdd(d) => (d, SCATTER_ADD),
        };
        Wgsl::new(repr).strided().ty("x", dtype).part(FAULT).part(kernel).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let scatter = DType::ALL.into_iter().filter(|&d| scatter_native(repr, d)).map(Key::ScatterAdd);
        DType::ALL.into_iter().map(Key::Take).chain(scatter).collect()
    }
}

/// Whether scatter-add runs here: the accumulator is f32 (the only width WGSL's atomics
/// reach), so f64 stays on the CPU; so do the integer dtypes.
fn scatter_native(repr: &Repr, dtype: DType) -> bool {
    repr.computes(dtype) && dtype != DType::F64
}

/// Whether `index` (i64, the rank of `of`) fits `of` on every axis but `dim`. Anything else
/// goes to the CPU backend, which reports the error.
fn fits(index: &Strided, of: &[usize], dim: usize) -> bool {
    let s = index.layout.shape();
    index.dtype == DType::I64 && dim < of.len() && s.len() == of.len() && s.iter().zip(of).enumerate().all(|(d, (i, o))| d == dim || i <= o)
}

/// `strides` with the one on `dim` taken out (set to zero) and returned.
fn split_stride(strides: &[usize], dim: usize) -> (Vec<usize>, usize) {
    let mut s = strides.to_vec();
    let step = std::mem::replace(&mut s[dim], 0);
    (s, step)
}

/// The index kernels' meta block: the strided walk of `layouts` over `shape`, then the
/// indexed axis' stride and size, and the tag a bad index is reported under
/// (`Gpu::index_tag`). `None` when some offset, up to `extent` (the indexed tensor's),
/// exceeds 32 bits.
fn index_meta(shape: &[usize], layouts: &[&Layout], step: usize, size: usize, extent: usize, tag: u32) -> Option<Meta> {
    u32::try_from(extent).ok()?;
    let mut m = strided_meta(shape, layouts)?;
    m.push(u32::try_from(step).ok()?);
    m.push(u32::try_from(size).ok()?);
    m.push(tag);
    (m.len() <= crate::gpu::META_WORDS).then_some(m)
}

/// A kernel's output, or why it cannot run here (appended to the fallback's description).
type Native = std::result::Result<Storage, Why>;

impl WgpuBackend {
    /// `out[e] = src[base(e) + idx[e] * step]` over `shape`, for gather and index-select
    /// (`what`, the name a bad index is reported under when no op named its use).
    #[allow(clippy::too_many_arguments)]
    fn take(
        &self,
        what: &'static str,
        src: Strided,
        index: Strided,
        shape: &[usize],
        idx_layout: &Layout,
        base: &Layout,
        step: usize,
        size: usize,
    ) -> Result<Native> {
        let gpu = self.gpu()?;
        let Some(meta) = index_meta(shape, &[idx_layout, base], step, size, src.layout.max_extent(), gpu.index_tag(what)) else { return Ok(Err(WIDE)) };
        let numel = shape.iter().product();
        let out = self.output(src.dtype, numel)?;
        let fault = gpu.index_fault_buffer();
        let buffers = [gpu_storage(&index).buffer(), gpu_storage(&src).buffer(), out.buffer(), &fault];
        let kernel = gpu.kernel(Key::Take(src.dtype))?;
        gpu.dispatch(&kernel, &meta, &buffers, grid(numel))?;
        Ok(Ok(Arc::new(out)))
    }

    pub(crate) fn gather_op(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        let (ls, li) = (src.layout, index.layout);
        let mut why = Why::Unsupported;
        if fits(&index, ls.shape(), dim) {
            let (strides, step) = split_stride(ls.strides(), dim);
            let base = Layout::new(li.shape(), strides, ls.offset());
            match self.take(GATHER, src, index, li.shape(), li, &base, step, ls.shape()[dim])? {
                Ok(out) => return Ok(out),
                Err(w) => why = w,
            }
        }
        self.fallback1(format!("gather ({})", src.dtype), why, &[src, index], src.dtype, |cpu, v| cpu.gather(v[0], v[1], dim))
    }

    pub(crate) fn index_select_op(&self, src: Strided, index: Strided, dim: usize) -> Result<Storage> {
        let (ls, li) = (src.layout, index.layout);
        let mut why = Why::Unsupported;
        if index.dtype == DType::I64 && li.rank() == 1 && dim < ls.rank() {
            // The gather walk, with the 1-D index broadcast over the result's shape.
            let mut shape = ls.shape().to_vec();
            shape[dim] = li.numel();
            let (strides, step) = split_stride(ls.strides(), dim);
            let base = Layout::new(shape.clone(), strides, ls.offset());
            let mut idx_strides = vec![0; shape.len()];
            idx_strides[dim] = li.strides()[0];
            let idx_layout = Layout::new(shape.clone(), idx_strides, li.offset());
            match self.take(INDEX_SELECT, src, index, &shape, &idx_layout, &base, step, ls.shape()[dim])? {
                Ok(out) => return Ok(out),
                Err(w) => why = w,
            }
        }
        self.fallback1(format!("index_select ({})", src.dtype), why, &[src, index], src.dtype, |cpu, v| cpu.index_select(v[0], v[1], dim))
    }

    pub(crate) fn scatter_add_op(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Storage> {
        let dtype = dst.dtype;
        let (ld, li) = (dst.layout, index.layout);
        let mut why = Why::Unsupported;
        if scatter_native(&self.repr, dtype) && src.dtype == dtype && li.shape() == src.layout.shape() && fits(&index, ld.shape(), dim) {
            match self.scatter_add_native(dst, index, src, dim)? {
                Ok(out) => return Ok(out),
                Err(w) => why = w,
            }
        }
        self.fallback1(format!("scatter_add ({dtype})"), why, &[dst, index, src], dtype, |cpu, v| cpu.scatter_add(v[0], v[1], v[2], dim))
    }

    /// Scatter-add into an f32 copy of `dst`, rounded to `dst`'s dtype at the end (so a bf16 or
    /// f16 sum is rounded once, not after every add as on the CPU).
    fn scatter_add_native(&self, dst: Strided, index: Strided, src: Strided, dim: usize) -> Result<Native> {
        let (ld, li) = (dst.layout, index.layout);
        let shape = ld.shape();
        let (strides, step) = split_stride(&contiguous_strides(shape), dim);
        let base = Layout::new(li.shape(), strides, 0);
        let gpu = self.gpu()?;
        let Some(meta) = index_meta(li.shape(), &[li, src.layout, &base], step, shape[dim], ld.numel(), gpu.index_tag(SCATTER_ADD_OP)) else {
            return Ok(Err(WIDE));
        };
        let acc = if dst.dtype == DType::F32 { self.copy_view(dst)? } else { self.cast_view(dst, DType::F32)? };
        let acc_buf = acc.as_any().downcast_ref::<WgpuStorage>().expect("own storage").buffer();
        let fault = gpu.index_fault_buffer();
        let buffers = [gpu_storage(&index).buffer(), gpu_storage(&src).buffer(), acc_buf, &fault];
        // kernel_trait.rs checked the operands; the f32 accumulator can be twice a native-f16 `dst`.
        // Each kernel binds whole buffers: one larger than a binding would need the launch
        // split, which these do not do yet.
        if acc_buf.size() > gpu.max_binding() {
            return Ok(Err(Why::Oversized(acc_buf.size())));
        }
        let kernel = gpu.kernel(Key::ScatterAdd(dst.dtype))?;
        gpu.dispatch(&kernel, &meta, &buffers, grid(li.numel()))?;
        let out = if dst.dtype == DType::F32 {
            acc
        } else {
            let dense = Layout::contiguous(shape);
            self.cast_view(Strided { storage: &*acc, layout: &dense, dtype: DType::F32 }, dst.dtype)?
        };
        Ok(Ok(out))
    }
}
