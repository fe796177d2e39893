//! Routing as pure functions: which kernel, tile and split of K a product ([`matmul()`]) or a
//! convolution pass ([`conv()`]) runs, from values alone: the shapes and loaders, the dtype,
//! what the adapter can do ([`Caps`]), the device's options and, where the autotune has
//! measured one, its cut. They touch no GPU; the launchers (`matmul.rs`, `conv.rs`) ask for a
//! plan, then run what it says. `tests/` pins the plan of every layer of the zoo on three
//! adapters.

use std::sync::atomic::Ordering;

use liandan_tensor::DType;

use crate::gpu::Gpu;
use crate::repr::Repr;

mod conv;
mod conv_cut;
mod coop;
mod fold;
mod matmul;
mod phases;
#[cfg(test)]
mod tests;
mod winograd;

pub(crate) use conv::{conv, ConvCall, ConvPlan, Pass, Tiling};
pub(crate) use coop::{Variant, LARGE};
pub(crate) use matmul::{cut_k, k_splits, lstm_step, matmul, packs_y, Load, MatmulPlan, Product, Tiled, HEADS_TILE, SMALL_BLOCKS, SMALL_DTYPES};
pub(crate) use phases::{input_phases, Gemm, Phase};
pub(crate) use winograd::{products_cut, Frame, Tile};

/// What the routing reads of an adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caps {
    /// The tensor-core layout f16 products run on where the device was opened for them
    /// (`coop.rs`: 16 x 16 x 16 f16 cooperative matrices, subgroups of 32, room for the
    /// workgroup); `None`: every product on the ordinary kernels.
    pub(crate) coop: Option<Variant>,
    /// The shader holds f16 / f64 natively (f64 without it runs on the CPU).
    pub(crate) f16: bool,
    pub(crate) f64: bool,
    /// The largest storage binding, in bytes.
    pub(crate) max_binding: u64,
}

impl Caps {
    /// `gpu`'s, as it runs now (its tensor cores leave for good where a kernel fails to build).
    pub(crate) fn of(gpu: &Gpu, repr: &Repr) -> Caps {
        let coop = gpu.coop_f16.load(Ordering::Relaxed).then_some(gpu.coop_variant);
        Caps { coop, f16: repr.f16, f64: repr.f64, max_binding: gpu.max_binding() }
    }

    /// Whether kernels compute in `dtype` here.
    pub(crate) fn computes(&self, dtype: DType) -> bool {
        dtype.is_float() && (dtype != DType::F64 || self.f64)
    }

    /// Whether products in `dtype` run on the tensor cores.
    pub(crate) fn coop_in(&self, dtype: DType) -> Option<Variant> {
        self.coop.filter(|_| dtype == DType::F16)
    }
}
