//! Launching 1-D elementwise kernels, in chunks when a buffer is larger than one binding may
//! cover (128 MiB on lavapipe and some Metal devices): each chunk binds an aligned window of
//! every buffer and sees a 1-D problem of its own.

use liandan_tensor::{Layout, Result};

use crate::backend::WgpuBackend;
use crate::gpu::Window;
use crate::kernels::{grid, strided_meta};

/// One buffer a kernel binds, in binding order.
pub(crate) struct Operand<'a> {
    pub buffer: &'a wgpu::Buffer,
    /// How the kernel reads or writes it; `None` for a dense output written at index `i`.
    pub layout: Option<&'a Layout>,
    /// Bytes per element as stored on the GPU.
    pub elem: u64,
}

/// Builds a chunk's meta block from its element count, its first global element and the 1-D
/// layouts of the operands that have one.
pub(crate) type MetaFn<'a> = &'a dyn Fn(usize, usize, &[Layout]) -> Option<Vec<u32>>;

/// The usual meta block: strided indexing over the operands' (common) shape.
pub(crate) fn strided(len: usize, _first: usize, layouts: &[Layout]) -> Option<Vec<u32>> {
    let refs: Vec<&Layout> = layouts.iter().collect();
    let shape = layouts.first().map_or_else(|| vec![len], |l| l.shape().to_vec());
    strided_meta(&shape, &refs)
}

impl WgpuBackend {
    /// Dispatches the kernel `key` over the `numel` elements of `shape`. Returns `false` when
    /// the work cannot be expressed on this device (beyond 32-bit indexing, or a buffer too
    /// large to bind whose view cannot be chunked); the caller then falls back to the CPU.
    pub(crate) fn launch(&self, key: &str, src: impl FnOnce() -> String, shape: &[usize], operands: &[Operand], meta: MetaFn) -> Result<bool> {
        let gpu = self.gpu()?;
        let numel: usize = shape.iter().product();
        let limit = gpu.max_binding();
        if operands.iter().all(|o| o.buffer.size() <= limit) {
            let layouts: Vec<Layout> = operands.iter().filter_map(|o| o.layout.cloned()).collect();
            let Some(m) = meta(numel, 0, &layouts) else { return Ok(false) };
            let kernel = gpu.kernel(key, &[], src)?;
            let buffers: Vec<&wgpu::Buffer> = operands.iter().map(|o| o.buffer).collect();
            gpu.dispatch(&kernel, &m, &buffers, grid(numel))?;
            return Ok(true);
        }
        // Chunked: every operand must be dense over `shape`, or a broadcast scalar.
        let chunkable = operands.iter().all(|o| match o.layout {
            None => true,
            Some(l) => l.strides().iter().all(|&s| s == 0) && o.buffer.size() <= limit || l.is_contiguous() && l.numel() == numel,
        });
        if !chunkable {
            return Ok(false);
        }
        let align = gpu.offset_alignment().max(4);
        let max_elem = operands.iter().map(|o| o.elem).max().unwrap_or(4);
        let chunk = (((limit - 2 * align) / max_elem) as usize / 1024 * 1024).max(1024);
        let kernel = gpu.kernel(key, &[], src)?;
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
            let Some(m) = meta(len, i0, &layouts) else { return Ok(false) };
            gpu.dispatch_windows(&kernel, &m, &windows, grid(len))?;
            i0 += len;
        }
        Ok(true)
    }
}
