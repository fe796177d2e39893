//! Launching 1-D elementwise kernels, in chunks when a buffer is larger than one binding may
//! cover (128 MiB on lavapipe and some Metal devices): each chunk binds an aligned window of
//! every buffer and sees a 1-D problem of its own.

use liandan_tensor::{Layout, Result};
use smallvec::SmallVec;

use crate::backend::{WgpuBackend, Why};
use crate::bind::{PerOperand, Window};
use crate::kernels::{grid, strided_meta, StridedView, WG};
use crate::params::Meta;

/// A launch's axes, inline: the launch path runs for every op.
type Axes = SmallVec<[usize; 6]>;

/// One buffer a kernel binds, in binding order.
pub(crate) struct Operand<'a> {
    pub buffer: &'a wgpu::Buffer,
    /// How the kernel reads or writes it; `None` for a dense output written at index `i`.
    pub layout: Option<&'a Layout>,
    /// Bytes per element as stored on the GPU.
    pub elem: u64,
}

/// Whether a launch ran, or why it cannot run on this device.
pub(crate) type Ran = std::result::Result<(), Why>;

/// The meta block of a launch cannot carry the op's sizes.
pub(crate) const WIDE: Why = Why::Limit("beyond 32-bit indexing");

/// Builds a chunk's meta block from its element count, its first global element and the 1-D
/// layouts of the operands that have one.
pub(crate) type MetaFn<'a> = &'a dyn Fn(usize, usize, &[Layout]) -> Option<Meta>;

/// The usual meta block: strided indexing over the operands' (common) shape, with adjacent
/// dimensions merged wherever every operand allows (a dense or broadcast-scalar operand set
/// becomes one dimension, which the kernels index without integer division).
pub(crate) fn strided(len: usize, _first: usize, layouts: &[Layout]) -> Option<Meta> {
    let Some(first) = layouts.first() else { return strided_meta(&[len], &[]) };
    let (shape, merged) = coalesce(first.shape(), layouts);
    let refs: PerOperand<&Layout> = merged.iter().collect();
    strided_meta(&shape, &refs)
}

/// Drops size-1 dimensions and merges dimension `d` into `d + 1` when, for every layout,
/// `stride[d] == stride[d + 1] * size[d + 1]`: the same elements, in the same order, fewer axes.
pub(crate) fn coalesce(shape: &[usize], layouts: &[Layout]) -> (Axes, PerOperand<Layout>) {
    let keep: Axes = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let mut dims: Axes = keep.iter().map(|&d| shape[d]).collect();
    let mut strides: PerOperand<Axes> = layouts.iter().map(|l| keep.iter().map(|&d| l.strides()[d]).collect()).collect();
    let mut d = dims.len();
    while d > 1 {
        d -= 1;
        let mergeable = strides.iter().all(|s| s[d - 1] == s[d] * dims[d]);
        if mergeable {
            dims[d - 1] *= dims[d];
            dims.remove(d);
            for s in &mut strides {
                s.remove(d - 1);
            }
        }
    }
    if dims.is_empty() {
        dims.push(1);
        for s in &mut strides {
            s.push(0);
        }
    }
    let merged = layouts.iter().zip(strides).map(|(l, s)| Layout::new(&dims, s, l.offset())).collect();
    (dims, merged)
}

/// Whether a [`strided`] meta block has an operand whose innermost dimension is neither dense
/// nor broadcast (a transposed read): four elements an invocation made a 4096^2 transposed
/// copy 16% slower on an H200, so such launches get one.
fn strided_inner(meta: &[u32], operands: usize) -> bool {
    let m = StridedView(meta);
    if m.rank() == 0 {
        return false;
    }
    (0..operands).any(|k| m.strides(k).and_then(|s| s.last()).is_some_and(|&s| s > 1))
}

impl WgpuBackend {
    /// Dispatches the kernel `key` (whose invocations handle `per` elements each) over the
    /// `numel` elements of `shape`, or says why the work cannot be expressed on this device
    /// (beyond 32-bit indexing, or a buffer too large to bind whose view cannot be chunked); the
    /// caller then falls back to the CPU.
    pub(crate) fn launch_kernel(&self, key: crate::Key, per: usize, shape: &[usize], operands: &[Operand], meta: MetaFn) -> Result<Ran> {
        let gpu = self.gpu()?;
        let numel: usize = shape.iter().product();
        let limit = gpu.max_binding();
        // (Beyond a binding the chunks are far below 2^32 elements.)
        if operands.iter().all(|o| o.buffer.size() <= limit) {
            // The kernels' element indices (up to numel + 1,023) must not wrap around u32.
            if numel > u32::MAX as usize - 4 * WG {
                return Ok(Err(WIDE));
            }
            let layouts: PerOperand<Layout> = operands.iter().filter_map(|o| o.layout.cloned()).collect();
            let Some(m) = meta(numel, 0, &layouts) else { return Ok(Err(WIDE)) };
            let per = if per > 1 && strided_inner(&m, layouts.len()) { 1 } else { per };
            // Dense f32 and f16 operands read and written in vec4s (an invocation per four
            // elements, as `per`), beside one broadcast over channels where a binary has one,
            // and copies whose views are dense in runs of four.
            let (key, m) = match key {
                crate::Key::Elementwise(k) => match k.dense4(&m, layouts.len()) {
                    Some(d) => (d.into(), m),
                    None => match k.broadcast4(&m, layouts.len()).or_else(|| k.runs4(&m, layouts.len())) {
                        Some((v, vm)) => (v.into(), vm),
                        None => (key, m),
                    },
                },
                _ => (key, m),
            };
            let kernel = gpu.kernel(key)?;
            let buffers: PerOperand<&wgpu::Buffer> = operands.iter().map(|o| o.buffer).collect();
            gpu.dispatch(&kernel, &m, &buffers, grid(numel.div_ceil(per)))?;
            return Ok(Ok(()));
        }
        // Chunked: every operand must be dense over `shape`, or a broadcast scalar.
        let chunkable = operands.iter().all(|o| match o.layout {
            None => true,
            Some(l) => l.strides().iter().all(|&s| s == 0) && o.buffer.size() <= limit || l.is_contiguous() && l.numel() == numel,
        });
        if !chunkable {
            let largest = operands.iter().map(|o| o.buffer.size()).max().unwrap_or(0);
            return Ok(Err(Why::Oversized(largest)));
        }
        let align = gpu.offset_alignment().max(4);
        let max_elem = operands.iter().map(|o| o.elem).max().unwrap_or(4);
        let chunk = (((limit - 2 * align) / max_elem) as usize / 1024 * 1024).max(1024);
        let kernel = gpu.kernel(key)?;
        let mut i0 = 0;
        while i0 < numel {
            let len = chunk.min(numel - i0);
            let mut windows: Vec<Window> = Vec::with_capacity(operands.len());
            let mut layouts = Vec::new();
            for o in operands {
                match o.layout {
                    Some(l) if l.strides().iter().all(|&s| s == 0) => {
                        windows.push((o.buffer, 0, o.buffer.size()));
                        layouts.push(Layout::new(vec![len], vec![0], l.offset()));
                    }
                    layout => {
                        let first = layout.map_or(0, |l| l.offset()) + i0;
                        let start = first as u64 * o.elem / align * align;
                        let skip = first - (start / o.elem) as usize;
                        let size = (((skip + len) as u64) * o.elem).next_multiple_of(4).min(o.buffer.size() - start);
                        windows.push((o.buffer, start, size));
                        if layout.is_some() {
                            layouts.push(Layout::new(vec![len], vec![1], skip));
                        }
                    }
                }
            }
            let Some(m) = meta(len, i0, &layouts) else { return Ok(Err(WIDE)) };
            gpu.dispatch_windows(&kernel, &m, &windows, grid(len.div_ceil(per)))?;
            i0 += len;
        }
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::coalesce;
    use liandan_tensor::Layout;

    #[test]
    fn dense_and_scalar_operands_merge_to_one_dimension() {
        let dense = Layout::contiguous(&[4, 5, 6]);
        let scalar = Layout::new(vec![4, 5, 6], vec![0, 0, 0], 3);
        let (shape, l) = coalesce(&[4, 5, 6], &[dense, scalar]);
        assert_eq!(shape[..], [120]);
        assert_eq!((l[0].strides(), l[1].strides(), l[1].offset()), (&[1usize][..], &[0usize][..], 3));
    }

    #[test]
    fn only_reads_across_the_inner_dimension_get_an_invocation_per_element() {
        use super::{strided, strided_inner};
        let dense = Layout::contiguous(&[8, 3]);
        let bias = Layout::new(vec![8, 3], vec![0, 1], 0);
        let transposed = Layout::contiguous(&[3, 8]).permute(&[1, 0]).unwrap();
        let meta = |layouts: &[Layout]| strided(24, 0, layouts).unwrap();
        assert!(!strided_inner(&meta(&[dense.clone(), dense.clone()]), 2));
        assert!(!strided_inner(&meta(&[dense.clone(), bias]), 2));
        assert!(strided_inner(&meta(&[transposed, dense]), 2));
    }

    #[test]
    fn broadcast_and_transposed_operands_keep_what_they_need() {
        // A bias broadcast over rows cannot merge with the rows.
        let x = Layout::contiguous(&[8, 3]);
        let bias = Layout::new(vec![8, 3], vec![0, 1], 0);
        assert_eq!(coalesce(&[8, 3], &[x.clone(), bias]).0[..], [8, 3]);
        // A transposed view keeps both axes; size-1 axes disappear.
        let t = Layout::contiguous(&[3, 1, 8]).permute(&[2, 1, 0]).unwrap();
        let (shape, l) = coalesce(&[8, 1, 3], &[Layout::contiguous(&[8, 1, 3]), t]);
        assert_eq!(shape[..], [8, 3]);
        assert_eq!(l[1].strides(), &[1, 8]);
    }
}
