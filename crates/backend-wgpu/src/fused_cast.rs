//! Many casts in one dispatch (`liandan_tensor::ops::CastAll`): autocast's casts of a model's
//! parameters ahead of its forward, where one dispatch a parameter would cost more in launches
//! than in work. From f32 (the parameters' type) to f16, or to bf16 packed two to a word as
//! the per-tensor cast writes it (each word one tensor's, an odd tensor's last one half zero).

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::packed::with_words;
use crate::params::words;
use crate::repr::Repr;

const CAST_ALL: &str = include_str!("shaders/fused_cast_all.wgsl");
const TO_FLOAT: &str = include_str!("shaders/cast_all/to_float.wgsl");
const TO_PACKED: &str = include_str!("shaders/cast_all/to_packed.wgsl");
/// Tensors one dispatch casts (the shader's binding pairs).
const WIDTH: usize = 8;
/// Units of the output (elements, or packed words) a workgroup writes.
const PER_GROUP: usize = 1024;

/// The kernel casting f32 tensors to `to`: f16, or bf16 packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    to: DType,
}

impl Key {
    fn packed(self) -> bool {
        self.to == DType::BF16
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<CastAllParams>().ty("x", DType::F32).ty("y", self.to);
        let w = if self.packed() { with_words(w).alias("A_y", "u32").part(TO_PACKED) } else { w.alias("A_y", "S_y").part(TO_FLOAT) };
        w.uint("SPAN", if self.packed() { 2 } else { 1 }).part(CAST_ALL).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        [DType::F16, DType::BF16].into_iter().filter(|&to| repr.computes(to)).map(|to| Key { to }).collect()
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
        if !matches!(to, DType::F16 | DType::BF16) || !self.repr.computes(to) {
            return None;
        }
        let key = Key { to };
        let span = if key.packed() { 2 } else { 1 };
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
            let kernel = gpu.kernel(key)?;
            let outs = sizes.iter().map(|&n| if key.packed() { self.packed_output(n) } else { self.output(to, n) }).collect::<Result<Vec<_>>>()?;
            for (chunk, outs) in inputs.chunks(WIDTH).zip(outs.chunks(WIDTH)) {
                let mut block = CastAllParams { n: 0, table: [u32::MAX; 2 * WIDTH] };
                let mut groups = 0usize;
                for (entry, v) in block.table.chunks_mut(2).zip(chunk) {
                    let n = v.layout.numel();
                    entry.copy_from_slice(&[groups as u32, n as u32]);
                    groups += n.div_ceil(span).div_ceil(PER_GROUP);
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
