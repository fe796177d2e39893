//! The f16 matmul on cooperative matrices (`shaders/matmul_coop.wgsl`): the same operands,
//! meta block, grid and split of K as the tiled kernel of `matmul.rs`, on 128 x 128 tiles.
//! `matmul.rs` picks it (see [`chosen`]) wherever `coop.rs` found the adapter able to run it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use liandan_tensor::DType;

use crate::gpu::{Gpu, Kernel};
use crate::kernels::{KernelKey, Wgsl};
use crate::matmul::Load;
use crate::repr::Repr;

const MATMUL_COOP: &str = include_str!("shaders/matmul_coop.wgsl");

/// The side of the kernel's square output tile.
pub(crate) const TILE: usize = 128;

/// One variant: how each operand's slices are read, and whether the kernel writes f32 partial
/// sums over a split of K (for `reduce` to add up) rather than f16 results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) a: Load,
    pub(crate) b: Load,
    pub(crate) partial: bool,
}

/// The one place that decides: f16 products run on cooperative matrices when the device was
/// opened for them (`coop::status`); every other dtype, and every device without them, keeps
/// the tiled kernel.
pub(crate) fn chosen(gpu: &Gpu, dtype: DType) -> bool {
    dtype == DType::F16 && gpu.coop_f16.load(Ordering::Relaxed)
}

/// The pipeline for `key`, or `None` (with a warning, once) when this device's driver will not
/// build it: the f16 products then go back to the tiled kernel for good, which computes the
/// same 128 x 128 tiles and splits, so the caller's grid stays right.
pub(crate) fn kernel(gpu: &Gpu, key: Key) -> Option<Arc<Kernel>> {
    match gpu.kernel(key) {
        Ok(k) => Some(k),
        Err(e) => {
            if gpu.coop_f16.swap(false, Ordering::Relaxed) {
                eprintln!("liandan: the tensor-core f16 matmul failed to build ({e}); f16 matmuls use the ordinary kernels from now on");
            }
            None
        }
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let load = |l: Load| match l {
            Load::K => 0,
            Load::Outer => 1,
            Load::Strided => 2,
        };
        // matmul's bindings: vec4 reads where the loader reads vec4s, results written as scalars.
        let read_a = if self.a == Load::Strided { include_str!("shaders/matmul/read_a.wgsl") } else { include_str!("shaders/matmul/read_a4.wgsl") };
        let read_b = if self.b == Load::Strided { include_str!("shaders/matmul/read_b.wgsl") } else { include_str!("shaders/matmul/read_b4.wgsl") };
        let out = if self.partial { include_str!("shaders/matmul/out_partial.wgsl") } else { include_str!("shaders/matmul/out_rounded.wgsl") };
        let w = Wgsl::new(repr).enable("wgpu_cooperative_matrix").ty("x", DType::F16).uint("A_LOAD", load(self.a)).uint("B_LOAD", load(self.b));
        w.part(read_a).part(read_b).part(out).part(include_str!("shaders/matmul/write.wgsl")).part(MATMUL_COOP).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        // The kernel computes on f16 values, so only a device holding f16 natively builds it.
        if !repr.f16 {
            return Vec::new();
        }
        let loads = [Load::K, Load::Outer, Load::Strided];
        let mut out = Vec::new();
        for a in loads {
            for b in loads {
                for partial in [false, true] {
                    out.push(Key { a, b, partial });
                }
            }
        }
        out
    }
}
