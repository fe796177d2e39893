//! The GPU buffer behind a tensor.

use std::any::Any;

use liandan_tensor::{BackendStorage, DType};

use crate::pool::PooledBuffer;

/// Bytes per element of packed bf16 (`packed.rs`): two elements to a 32-bit word.
pub(crate) const PACKED: usize = 2;

/// A pooled buffer holding `numel` elements of `dtype` in their GPU representation.
pub struct WgpuStorage {
    pub(crate) buf: PooledBuffer,
    /// Bytes per element as stored here (see `repr`).
    pub(crate) elem_bytes: usize,
    pub(crate) numel: usize,
    pub(crate) dtype: DType,
}

impl std::fmt::Debug for WgpuStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuStorage({} x {})", self.numel, self.dtype)
    }
}

impl BackendStorage for WgpuStorage {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn size_in_bytes(&self) -> usize {
        self.numel * self.elem_bytes
    }
}

impl WgpuStorage {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        self.buf.buffer()
    }

    /// Its elements are packed bf16.
    pub(crate) fn is_packed(&self) -> bool {
        self.dtype == DType::BF16 && self.elem_bytes == PACKED
    }
}
