//! `conv2d` and its two gradients, each asked of the device as one fused kernel
//! ([`FusedOp::Conv2d`], [`FusedOp::Conv2dBackwardInput`], [`FusedOp::Conv2dBackwardWeight`])
//! and computed from `im2col` / `col2im` and matmul otherwise. The composite is the oracle:
//! the conformance suite compares the two routes forward and backward.
//!
//! A bias is added as the forward stores its result where the device can
//! ([`FusedOp::Conv2dBias`]), by a broadcast add otherwise; so is a following ReLU
//! ([`FusedOp::Conv2dBiasRelu`], `Tensor::conv2d_relu`), by [`Tensor::relu`] otherwise.
//!
//! The backward rule is one `GradFn::Conv2d` either way, so a device that runs the fused
//! forward never holds a column buffer for backward: the input gradient is a transposed
//! convolution of `dy` and the weight gradient reads `x` again.
//!
//! Dimension letters: N batch, C channels, H and W height and width, O output channels,
//! G groups, K = C/G * kh * kw (a group's column rows), L = out_h * out_w.

use crate::autograd::{self, GradFn};
use crate::error::Result;
use crate::fused::{try_fused, ConvGeometry, FusedOp};
use crate::layout::Layout;
use crate::tensor::Tensor;

/// `x` convolved with `weight` (no bias), shapes checked by the caller; records
/// `GradFn::Conv2d`.
pub(super) fn conv2d(x: &Tensor, weight: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
    let (x, weight) = (x.contiguous()?, weight.contiguous()?);
    let out = match try_fused(&FusedOp::Conv2d(geom), &[&x, &weight]) {
        Some(r) => r?.remove(0),
        None => autograd::no_grad(|| forward_composite(&x, &weight, geom)?.contiguous())?.storage(),
    };
    Ok(Tensor::from_op(out, &geom.output_shape(), x.dtype(), x.device(), &[&x, &weight], || GradFn::Conv2d(geom)))
}

/// `x` convolved with `weight` plus `bias` (`[O]`, checked by the caller) on every output
/// channel, then ReLU where `relu`: one kernel where the device adds the bias (and applies
/// ReLU) as it stores the result ([`FusedOp::Conv2dBias`], [`FusedOp::Conv2dBiasRelu`]), else
/// [`conv2d`], a broadcast add and [`Tensor::relu`], the composite. Either way the bias's
/// gradient is `dy` summed over all but the channel.
///
/// A fused result with ReLU is recorded as the two ops' nodes over one buffer: the
/// convolution's (whose rule never reads its output, so the graph keeps no handle on that
/// buffer for it) and ReLU's, which reads it. So ReLU's backward frees it before the
/// convolution's runs, as in the composite (one node reading the output through the
/// convolution's backward held it 10% longer at mnist_cnn's peak on the H200, run 152).
pub(super) fn conv2d_bias(x: &Tensor, weight: &Tensor, bias: &Tensor, geom: ConvGeometry, relu: bool) -> Result<Tensor> {
    let (x, weight, bias) = (x.contiguous()?, weight.contiguous()?, bias.contiguous()?);
    let op = if relu { FusedOp::Conv2dBiasRelu(geom) } else { FusedOp::Conv2dBias(geom) };
    let fused = match bias.dtype() == x.dtype() && bias.device() == x.device() {
        true => try_fused(&op, &[&x, &weight, &bias]),
        false => None,
    };
    if let Some(r) = fused {
        let out = r?.remove(0);
        let y = Tensor::from_op(out, &geom.output_shape(), x.dtype(), x.device(), &[&x, &weight, &bias], || GradFn::Conv2d(geom));
        return match relu {
            true => Ok(Tensor::view_op(y.storage(), y.layout().clone(), y.dtype(), y.device(), &[&y], || GradFn::Relu)),
            false => Ok(y),
        };
    }
    let y = conv2d(&x, &weight, geom)?.add(&bias.reshape(&[1, geom.o, 1, 1])?)?;
    if relu {
        y.relu()
    } else {
        Ok(y)
    }
}

/// A fresh contiguous tensor of `shape` on `like`'s device, outside the graph.
fn fresh(storage: crate::backend::Storage, shape: &[usize], like: &Tensor) -> Tensor {
    Tensor::from_parts(storage, Layout::contiguous(shape), like.dtype(), like.device(), None)
}

/// im2col + matmul: `[N, O, out_h, out_w]`.
fn forward_composite(x: &Tensor, weight: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
    let w = geom.window();
    let (n, o, g, l) = (geom.n, geom.o, geom.groups, w.col_cols());
    let k = w.col_rows() / g;
    let cols = x.im2col_window(w)?.reshape(&[n, g, k, l])?;
    let out = weight.reshape(&[g, o / g, k])?.matmul(&cols)?;
    out.reshape(&[n, o, w.out_h(), w.out_w()])
}

impl Tensor {
    /// The gradient of `conv2d` with respect to its input, from `dy` (`[N, O, out_h, out_w]`)
    /// and the weight: one fused kernel where the device has one, else the transposed
    /// weights times `dy` folded back by `col2im`.
    pub(crate) fn conv2d_backward_input(dy: &Tensor, weight: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
        let dy = dy.contiguous()?;
        if let Some(r) = try_fused(&FusedOp::Conv2dBackwardInput(geom), &[&dy, weight]) {
            return Ok(fresh(r?.remove(0), &geom.input_shape(), weight));
        }
        let w = geom.window();
        let (n, o, g, l) = (geom.n, geom.o, geom.groups, w.col_cols());
        let k = w.col_rows() / g;
        let wt = weight.reshape(&[g, o / g, k])?.transpose(1usize, 2usize)?; // [G, K, O/G]
        let dcols = wt.matmul(&dy.reshape(&[n, g, o / g, l])?)?; // [N, G, K, L]
        dcols.reshape(&[n, g * k, l])?.col2im_window(w)
    }

    /// The gradient of `conv2d` with respect to its weight, from `dy` and the input `x`,
    /// summed over the batch: one fused kernel where the device has one, else `dy` times
    /// `im2col(x)` transposed.
    pub(crate) fn conv2d_backward_weight(dy: &Tensor, x: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
        let dy = dy.contiguous()?;
        if let Some(r) = try_fused(&FusedOp::Conv2dBackwardWeight(geom), &[&dy, x]) {
            return Ok(fresh(r?.remove(0), &geom.weight_shape(), x));
        }
        let w = geom.window();
        let (n, o, g, l) = (geom.n, geom.o, geom.groups, w.col_cols());
        let k = w.col_rows() / g;
        let cols = x.im2col_window(w)?.reshape(&[n, g, k, l])?;
        let dw = dy.reshape(&[n, g, o / g, l])?.matmul(&cols.transpose(2usize, 3usize)?)?; // [N, G, O/G, K]
        dw.sum(&[0], false)?.reshape(&geom.weight_shape())
    }
}
