//! Many casts as one dispatch (`liandan_tensor::ops::CastEach`): autocast's casts of a
//! model's parameters, and of their gradients back, between f32 and f16 or packed bf16. Each cast is a few hundred to a few
//! million elements; as a kernel each, a step of a small model spent more time launching them
//! than running them. Up to [`SLOTS`] tensors a dispatch, each bound to its own pair of
//! bindings, a table in the parameter block mapping workgroups to tensors.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::packed::{packed_view, with_words};
use crate::params::words;
use crate::repr::Repr;

/// Tensors a dispatch: two bindings each beside the parameter block's, within the 29 storage
/// buffers a Metal shader may bind.
const SLOTS: usize = 12;

crate::shader_params! {
    /// The block of `shaders/cast_each.wgsl`: `count` slots in use, slot k's first workgroup
    /// `starts[k]` (and `starts[count]` past the last), its element count and input offset.
    struct CastEachParams {
        count: u32,
        starts: [u32; 13],
        numels: [u32; 12],
        offsets: [u32; 12],
    }
}

/// One cast-each variant: from one float type to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    from: DType,
    to: DType,
}

impl Key {
    fn of(repr: &Repr, from: DType, to: DType) -> Option<Key> {
        let key = Key { from, to };
        key.supported(repr).then_some(key)
    }

    /// f32 and f16 each way, and f32 to and from bf16 (packed two to a word, as it rests).
    fn supported(&self, repr: &Repr) -> bool {
        let ok = |d: DType| matches!(d, DType::F32 | DType::F16 | DType::BF16) && repr.computes(d);
        let bf16 = self.from == DType::BF16 || self.to == DType::BF16;
        ok(self.from) && ok(self.to) && self.from != self.to && (!bf16 || self.from == DType::F32 || self.to == DType::F32)
    }

    /// Results an invocation writes: a bf16 word holds two.
    fn per(&self) -> usize {
        if self.to == DType::BF16 {
            2
        } else {
            1
        }
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).params::<CastEachParams>();
        let w = match (self.from, self.to) {
            (DType::BF16, _) => with_words(w).part(include_str!("shaders/cast_each/widen.wgsl")),
            (from, DType::BF16) => with_words(w.ty("x", from)).part(include_str!("shaders/cast_each/pack.wgsl")),
            (from, to) => w.ty("x", from).ty("y", to).part(include_str!("shaders/cast_each/float.wgsl")),
        };
        w.part(include_str!("shaders/cast_each.wgsl")).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let types = [DType::F32, DType::F16, DType::BF16];
        types.into_iter().flat_map(|from| types.map(|to| Key { from, to })).filter(|k| k.supported(repr)).collect()
    }
}

impl WgpuBackend {
    /// `inputs` (one float type, each contiguous) cast to `to`, [`SLOTS`] a dispatch; `None`
    /// where the kernel does not take them (the casts run one by one).
    pub(crate) fn cast_each(&self, to: DType, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let from = inputs.first()?.dtype;
        let key = Key::of(&self.repr, from, to)?;
        // bf16 is read as it rests, packed; every other type one element a word (or an f16).
        if inputs.iter().any(|v| v.dtype != from || !v.layout.is_contiguous() || packed_view(v) != (from == DType::BF16)) {
            return None;
        }
        let numels: Vec<usize> = inputs.iter().map(|v| v.layout.numel()).collect();
        let gpu = match self.fused_gpu(to, &numels, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        if gpu.limits.max_storage_buffers_per_shader_stage < 2 * SLOTS as u32 + 1 {
            return None;
        }
        let mut blocks = Vec::new();
        for chunk in inputs.chunks(SLOTS) {
            let mut block = CastEachParams { count: chunk.len() as u32, ..Default::default() };
            let mut start = 0u32;
            for (k, v) in chunk.iter().enumerate() {
                block.starts[k] = start;
                block.numels[k] = v.layout.numel() as u32;
                block.offsets[k] = u32::try_from(v.layout.offset()).ok()?;
                start = start.checked_add(v.layout.numel().div_ceil(key.per() * WG) as u32)?;
            }
            block.starts[chunk.len()] = start;
            blocks.push((words(&block), start as usize));
        }
        Some((|| {
            let kernel = gpu.kernel(key)?;
            let output = |n| if to == DType::BF16 { self.packed_output(n) } else { self.output(to, n) };
            let outs = numels.iter().map(|&n| output(n)).collect::<Result<Vec<_>>>()?;
            for ((chunk, outs), (meta, groups)) in inputs.chunks(SLOTS).zip(outs.chunks(SLOTS)).zip(&blocks) {
                // Slots past the chunk bind its first tensor's buffers again; never read.
                let slot = |k: usize| if k < chunk.len() { k } else { 0 };
                let xs = (0..SLOTS).map(|k| gpu_storage(&chunk[slot(k)]).buffer());
                let ys = (0..SLOTS).map(|k| outs[slot(k)].buffer());
                let buffers: Vec<&wgpu::Buffer> = xs.chain(ys).collect();
                gpu.dispatch(&kernel, meta, &buffers, grid(groups * WG))?;
            }
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
