//! The f16 matmul on cooperative matrices (`shaders/matmul_coop.wgsl`): the same operands, meta
//! block, grid and split of K as the tiled kernel of `matmul.rs`, on the tiles of a [`Variant`].
//! `plan/matmul.rs` picks it wherever `coop.rs` found the adapter able to run it; the tiles of
//! each variant are `plan/coop.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use liandan_tensor::DType;

use crate::gpu::{Gpu, Kernel};
use crate::kernels::{KernelKey, Wgsl};
use crate::plan::{Load, Variant};
use crate::repr::Repr;

pub(crate) const MATMUL_COOP: &str = include_str!("../shaders/matmul_coop.wgsl");
use super::ENTRY;

/// One kernel: the variant, how each operand's slices are read, and whether the kernel writes
/// f32 partial sums over a split of K (for `reduce` to add up) rather than f16 results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) variant: Variant,
    pub(crate) a: Load,
    pub(crate) b: Load,
    pub(crate) partial: bool,
}

/// The pipeline for `key` (this matmul's, or a convolution's on cooperative matrices), or
/// `None` (with a warning, once) when this device's driver will not build it: f16 matmuls and
/// convolutions then go back to the ordinary kernels for good (the caller starts over, as the
/// tiles may differ).
pub(crate) fn kernel(gpu: &Gpu, key: impl Into<crate::Key>) -> Option<Arc<Kernel>> {
    match gpu.kernel(key) {
        Ok(k) => Some(k),
        Err(e) => {
            if gpu.coop_f16.swap(false, Ordering::Relaxed) {
                eprintln!("liandan: a tensor-core f16 kernel failed to build ({e}); f16 matmuls and convolutions use the ordinary kernels from now on");
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
        let (read_a, read_b) = (super::read_a(self.a != Load::Strided, false), super::read_b(self.b != Load::Strided, false));
        let out = if self.partial { include_str!("../shaders/matmul/out_partial.wgsl") } else { include_str!("../shaders/matmul/out_rounded.wgsl") };
        let w = Wgsl::new(repr)
            .params::<super::MatmulParams>()
            .enable("wgpu_cooperative_matrix")
            .ty("x", DType::F16)
            .uint("A_LOAD", load(self.a))
            .uint("B_LOAD", load(self.b));
        let w = w.part(read_a).part(read_b).part(out).part(include_str!("../shaders/matmul/write.wgsl"));
        // The f16 values as stored, without the f32 round trip of matmul's fetch_* helpers.
        let raw_a =
            if self.a == Load::Strided { include_str!("../shaders/matmul_coop/raw_a.wgsl") } else { include_str!("../shaders/matmul_coop/raw_a4.wgsl") };
        let raw_b =
            if self.b == Load::Strided { include_str!("../shaders/matmul_coop/raw_b.wgsl") } else { include_str!("../shaders/matmul_coop/raw_b4.wgsl") };
        let store =
            if self.partial { include_str!("../shaders/matmul_coop/store_partial.wgsl") } else { include_str!("../shaders/matmul_coop/store_rounded.wgsl") };
        let (sgm, sgn) = self.variant.subgroups();
        let (a_vecs, b_vecs) = self.variant.staged_vecs(self.a, self.b);
        let w = w
            .uint("SGM", sgm)
            .uint("SGN", sgn)
            .uint("FM", self.variant.fragment_rows())
            // One tile a workgroup without the loops where the grid covers every tile: faster for
            // `Prefetch`'s large products on the H200; the zoo's products (on `Tall`) did not move.
            .flag("FLAT", self.variant == Variant::Prefetch)
            .uint("A_VECS", a_vecs)
            .uint("B_VECS", b_vecs);
        w.part(raw_a)
            .part(raw_b)
            .part(store)
            .part(include_str!("../shaders/matmul_coop/a_fetch.wgsl"))
            .part(include_str!("../shaders/matmul_coop/b_fetch.wgsl"))
            .part(MATMUL_COOP)
            .part(ENTRY)
            .build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        // The kernel computes on f16 values, so only a device holding f16 natively builds it.
        if !repr.f16 {
            return Vec::new();
        }
        let loads = [Load::K, Load::Outer, Load::Strided];
        let mut out = Vec::new();
        for variant in Variant::MATMUL {
            for a in loads {
                for b in loads {
                    for partial in [false, true] {
                        out.push(Key { variant, a, b, partial });
                    }
                }
            }
        }
        out
    }
}
