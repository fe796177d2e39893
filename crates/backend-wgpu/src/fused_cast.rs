//! Many casts in one dispatch (`liandan_tensor::ops::CastAll`): autocast's casts of a model's
//! parameters ahead of its forward, where one dispatch a parameter would cost more in launches
//! than in work. f32 to f16 only: the parameters are f32, and a bf16 cast writes packed words,
//! which the per-tensor casts do.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::params::words;
use crate::repr::Repr;

const CAST_ALL: &str = include_str!("shaders/fused_cast_all.wgsl");
/// Tensors one dispatch casts (the shader's binding pairs).
const WIDTH: usize = 8;
/// Elements a workgroup casts.
const PER_GROUP: usize = 1024;

/// The kernel casting f32 tensors to `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    to: DType,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        Wgsl::new(repr).params::<CastAllParams>().ty("x", DType::F32).ty("y", self.to).part(CAST_ALL).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        repr.computes(DType::F16).then_some(Key { to: DType::F16 }).into_iter().collect()
    }
}

crate::shader_params! {
    /// A multi-tensor cast's block (`shaders/fused_cast_all.wgsl`): `n` workgroups that work;
    /// per tensor its first workgroup and its element count.
    struct CastAllParams {
        n: u32,
        table: [u32; 2 * WIDTH],
    }
}

impl WgpuBackend {
    /// Casts `inputs` (contiguous f32, each from the start of its buffer) to `to` in a
    /// dispatch per eight, or `None`: another type either side, an input not so laid out or
    /// beyond one binding, or a device that binds too few buffers.
    pub(crate) fn fused_cast_all(&self, to: DType, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        if to != DType::F16 || !self.repr.computes(to) {
            return None;
        }
        let whole = |v: &Strided| v.dtype == DType::F32 && v.layout.is_contiguous() && v.layout.offset() == 0 && v.layout.numel() > 0;
        if inputs.is_empty() || !inputs.iter().all(whole) {
            return None;
        }
        let sizes: Vec<usize> = inputs.iter().map(|v| v.layout.numel()).collect();
        let gpu = match self.fused_gpu(to, &sizes, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        match self.max_bindings() {
            Ok(most) if most > 2 * WIDTH => {}
            Ok(_) => return None,
            Err(e) => return Some(Err(e)),
        }
        Some((|| {
            let kernel = gpu.kernel(Key { to })?;
            let outs = sizes.iter().map(|&n| self.output(to, n)).collect::<Result<Vec<_>>>()?;
            for (chunk, outs) in inputs.chunks(WIDTH).zip(outs.chunks(WIDTH)) {
                let mut block = CastAllParams { n: 0, table: [u32::MAX; 2 * WIDTH] };
                let mut groups = 0usize;
                for (entry, v) in block.table.chunks_mut(2).zip(chunk) {
                    let numel = v.layout.numel();
                    entry.copy_from_slice(&[groups as u32, numel as u32]);
                    groups += numel.div_ceil(PER_GROUP);
                }
                block.n = u32::try_from(groups).map_err(|_| liandan_tensor::Error::Device("cast_all: too many workgroups for one dispatch".into()))?;
                let mut buffers = Vec::with_capacity(2 * WIDTH);
                for k in 0..WIDTH {
                    let k = if k < chunk.len() { k } else { 0 };
                    buffers.extend([gpu_storage(&chunk[k]).buffer(), outs[k].buffer()]);
                }
                gpu.dispatch(&kernel, &words(&block), &buffers, grid(groups * crate::kernels::WG))?;
            }
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
