//! Routing as pure functions: which kernel, tile and split of K a product ([`matmul()`]) or a
//! convolution pass ([`conv()`]) runs, how a reduction is spread and split ([`reduce()`]), and
//! which kernel max pooling's gradient takes ([`max_pool_backward()`]), from values alone: the
//! shapes and loaders, the dtype, what the adapter can do ([`Caps`]), the device's options
//! and, where the autotune has measured one, its cut. They touch no GPU; the launchers
//! (`matmul/`, `conv.rs`, `reduce.rs`, `window.rs`) ask for a plan, then run what it says.
//! `tests/` pins the plan of every layer of the zoo on three adapters.
use liandan_tensor::DType;

mod conv;
mod conv_cut;
mod coop;
mod fold;
mod matmul;
mod phases;
mod reduce;
#[cfg(test)]
mod tests;
mod window;
mod winograd;

pub(crate) use conv::{conv, Composite, ConvCall, ConvPlan, Tiling};
pub(crate) use coop::{tensor_cores, TensorCores, Variant, LARGE};
pub(crate) use matmul::{coop_k_splits, cut_k, lstm_step, matmul, packs_y, MatmulPlan, Product, Tiled, COOP_MIN_FLOPS, HEADS_TILE, SMALL_BLOCKS, SMALL_DTYPES};
pub(crate) use phases::{input_phases, one_dispatch, Axis, Gemm, Phase, MAX_PHASES};
pub(crate) use reduce::{channel_chunks, columns, reduce, spread, Columns, ReducePlan, Spread, SPREADS};
pub(crate) use window::{max_pool_backward, PoolBackward};
pub(crate) use winograd::{products_cut, Frame, Tile, Winograd};

/// Invocations per workgroup of the 1-D kernels.
pub(crate) const WG: usize = 256;

/// Which product of a convolution a dispatch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Pass {
    Forward,
    Input,
    Weight,
}

/// How one operand's slices are staged: vec4s along K, vec4s along its other dimension (M of
/// the lhs, N of the rhs), or scalars through any strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Load {
    K,
    Outer,
    Strided,
}

/// The device's options the routing reads (`WgpuOptions::plan`): f32 convolutions on the
/// tensor cores (`conv_tf32`, and under it every size where `tf32_any_size`), and the testing
/// knobs that put f16 products of every size on the tensor cores, or force a convolution's
/// cut, its column buffer, Winograd or the images in a chunk of Winograd's weight gradient
/// (`testing::Knobs`), or keep sums down columns on the tree reduction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    pub(crate) conv_tf32: bool,
    pub(crate) tf32_any_size: bool,
    pub(crate) coop_any_size: bool,
    pub(crate) coop_cut: Option<((usize, usize), usize)>,
    pub(crate) conv_cut: Option<(usize, usize)>,
    pub(crate) conv_fold: Option<bool>,
    pub(crate) conv_winograd: Option<usize>,
    pub(crate) winograd_chunk: Option<usize>,
    pub(crate) tree_column_sums: bool,
}

/// What the routing reads of an adapter (`Gpu::caps`).
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
    /// Whether kernels compute in `dtype` here.
    pub(crate) fn computes(&self, dtype: DType) -> bool {
        dtype.is_float() && (dtype != DType::F64 || self.f64)
    }

    /// Bytes one element of `dtype` takes in a buffer (`repr.rs`).
    pub(crate) fn gpu_size(&self, dtype: DType) -> usize {
        crate::repr::Repr { f16: self.f16, f64: self.f64, immediates: false }.gpu_size(dtype)
    }

    /// Whether products in `dtype` run on the tensor cores.
    pub(crate) fn coop_in(&self, dtype: DType) -> Option<Variant> {
        self.coop.filter(|_| dtype == DType::F16)
    }
}
