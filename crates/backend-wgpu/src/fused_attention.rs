//! Fused attention (`liandan_tensor::ops::Attention`, its gradient `AttentionBackward`): one
//! dispatch each way, a workgroup a head, where the composite takes a product, a scaling, a
//! softmax and a product each way besides copies of the heads in and out. Each product of a
//! head must fit one 80 x 80 tile, as the heads kernel of the products (`matmul/heads.wgsl`)
//! takes a ViT's: lengths and widths of at most [`MAX_SIDE`]; other heads run the composite.
//! The operands are read through their strides (the heads of a packed projection as they lie)
//! and the results are written in the layout the heads merge into. f32, f16 and bf16 (packed
//! operands widened first, the results packed after); f64 is left to the composite.

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::kernels::{grid, KernelKey, Wgsl, WG};
use crate::params::words;
use crate::repr::Repr;

const COMMON: &str = include_str!("shaders/attention/common.wgsl");
const FORWARD: &str = include_str!("shaders/attention/forward.wgsl");
const BACKWARD: &str = include_str!("shaders/attention/backward.wgsl");

/// The longest sequence and widest head a workgroup takes (the shaders' tile, `HT`).
pub(crate) const MAX_SIDE: usize = 80;

/// One fused attention kernel variant (see `kernels::KernelKey`): forward, or with `backward`
/// its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    backward: bool,
    dtype: DType,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let main = if self.backward { BACKWARD } else { FORWARD };
        Wgsl::new(repr).params::<AttentionParams>().ty("x", self.dtype).part(COMMON).part(main).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let keys = [false, true].into_iter().flat_map(|backward| [DType::F32, DType::F16, DType::BF16].map(|dtype| Key { backward, dtype }));
        keys.filter(|k| repr.computes(k.dtype)).collect()
    }
}

crate::shader_params! {
    /// A fused attention pass's block (`shaders/attention/common.wgsl`): `n` x `h` heads of
    /// `l` queries and `s` keys, widths `e` and `ev`; each strided operand as [offset, n, h,
    /// row] strides.
    struct AttentionParams {
        n: u32,
        h: u32,
        l: u32,
        s: u32,
        e: u32,
        ev: u32,
        scale: f32,
        q: [u32; 4],
        k: [u32; 4],
        v: [u32; 4],
        g: [u32; 4],
        pr: [u32; 4],
    }
}

/// A 4-D operand's [offset, n, h, row] strides, its `axes` naming which dims those are, or
/// `None` where its last dim is not dense or a number passes 32 bits.
fn strides(v: &Strided, axes: [usize; 3]) -> Option<[u32; 4]> {
    let (shape, st) = (v.layout.shape(), v.layout.strides());
    if shape.len() != 4 || (shape[3] > 1 && st[3] != 1) {
        return None;
    }
    let u = |x: usize| u32::try_from(x).ok();
    Some([u(v.layout.offset())?, u(st[axes[0]])?, u(st[axes[1]])?, u(st[axes[2]])?])
}

impl WgpuBackend {
    /// Runs fused attention forward (inputs q, k, v) or backward (q, k, v, do, p), or `None`
    /// (see the module docs).
    pub(crate) fn fused_attention(&self, scale: f64, backward: bool, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        if inputs.len() != if backward { 5 } else { 3 } {
            return None;
        }
        let dtype = inputs[0].dtype;
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) || !self.repr.computes(dtype) || inputs.iter().any(|v| v.dtype != dtype) {
            return None;
        }
        let (&[n, h, l, e], &[n2, h2, s, e2], &[n3, h3, s3, ev]) = (inputs[0].layout.shape(), inputs[1].layout.shape(), inputs[2].layout.shape()) else {
            return None;
        };
        if (n2, h2, e2) != (n, h, e) || (n3, h3, s3) != (n, h, s) || n * h == 0 {
            return None;
        }
        if [l, s, e, ev].iter().any(|&d| d > MAX_SIDE) {
            return None;
        }
        let u = |x: usize| u32::try_from(x).ok();
        let heads = [0, 1, 2];
        let mut block = AttentionParams {
            n: u(n)?,
            h: u(h)?,
            l: u(l)?,
            s: u(s)?,
            e: u(e)?,
            ev: u(ev)?,
            scale: scale as f32,
            q: strides(&inputs[0], heads)?,
            k: strides(&inputs[1], heads)?,
            v: strides(&inputs[2], heads)?,
            g: [0; 4],
            pr: [0; 4],
        };
        if backward {
            // do is [N, L, H, Ev], p [N, H, L, S].
            if inputs[3].layout.shape() != [n, l, h, ev] || inputs[4].layout.shape() != [n, h, l, s] {
                return None;
            }
            block.g = strides(&inputs[3], [0, 2, 1])?;
            block.pr = strides(&inputs[4], heads)?;
        }
        let outputs = match backward {
            false => vec![n * l * h * ev, n * h * l * s],
            true => vec![n * l * h * e, n * s * h * e, n * s * h * ev],
        };
        let gpu = match self.fused_gpu(dtype, &outputs, inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        // The backward binds eight buffers besides its parameters.
        if gpu.limits.max_storage_buffers_per_shader_stage < 9 {
            return None;
        }
        let groups = grid(n * h * WG);
        Some((|| {
            let kernel = gpu.kernel(Key { backward, dtype })?;
            let outs = outputs.iter().map(|&numel| self.output(dtype, numel)).collect::<Result<Vec<_>>>()?;
            let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().map(|v| gpu_storage(v).buffer()).collect();
            buffers.extend(outs.iter().map(|o| o.buffer()));
            gpu.dispatch(&kernel, &words(&block), &buffers, groups)?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
