//! `conv2d` and its two gradients, each the custom op of one fused kernel ([`Conv2d`],
//! [`Conv2dBackwardInput`], [`Conv2dBackwardWeight`]) where the device has it, and computed
//! from `im2col` / `col2im` and matmul otherwise. The composite is the oracle: the conformance
//! suite compares the two routes forward and backward.
//!
//! A bias is added as the forward stores its result where the device can ([`Conv2dBias`]), by
//! a broadcast add otherwise; so is a following ReLU ([`Conv2dBiasRelu`],
//! `Tensor::conv2d_relu`), by [`Tensor::relu`] otherwise.
//!
//! The backward rule is one `GradFn::Conv2d` either way, so a device that runs the fused
//! forward never holds a column buffer for backward: the input gradient is a transposed
//! convolution of `dy` and the weight gradient reads `x` again.
//!
//! Dimension letters: N batch, C channels, H and W height and width, O output channels,
//! G groups, K = C/G * kh * kw (a group's column rows), L = out_h * out_w.

use crate::autograd::GradFn;
use crate::backend::{ConvGeometry, CustomKernel, Strided};
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::fused;
use crate::tensor::Tensor;

/// `x` convolved with `weight` (no bias), shapes checked by the caller; records
/// `GradFn::Conv2d`.
pub(super) fn conv2d(x: &Tensor, weight: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
    let (x, weight) = (x.contiguous()?, weight.contiguous()?);
    let out = fused::run_or_composite(&Conv2d(geom), &[&x, &weight])?.remove(0);
    Ok(out.recorded(&[&x, &weight], || GradFn::Conv2d(geom)))
}

/// `x` convolved with `weight` plus `bias` (`[O]`, checked by the caller) on every output
/// channel, then ReLU where `relu`: one kernel where the device adds the bias (and applies
/// ReLU) as it stores the result ([`Conv2dBias`], [`Conv2dBiasRelu`]), else
/// [`conv2d`], a broadcast add and [`Tensor::relu`], the composite. Either way the bias's
/// gradient is `dy` summed over all but the channel.
///
/// A fused result with ReLU is recorded as the two ops' nodes over one buffer: the
/// convolution's (whose rule never reads its output, so the graph keeps no handle on that
/// buffer for it) and ReLU's, which reads it. So ReLU's backward frees it before the
/// convolution's runs, as in the composite (one node reading the output through the
/// convolution's backward held it 10% longer at mnist_cnn's peak on the H200).
pub(super) fn conv2d_bias(x: &Tensor, weight: &Tensor, bias: &Tensor, geom: ConvGeometry, relu: bool) -> Result<Tensor> {
    let (x, weight, bias) = (x.contiguous()?, weight.contiguous()?, bias.contiguous()?);
    let inputs = [&x, &weight, &bias];
    let kernel = match (bias.dtype() == x.dtype() && bias.device() == x.device(), relu) {
        (false, _) => None,
        (true, false) => fused::run(&Conv2dBias(geom), &inputs),
        (true, true) => fused::run(&Conv2dBiasRelu(geom), &inputs),
    };
    if let Some(r) = kernel {
        let y = r?.remove(0).recorded(&inputs, || GradFn::Conv2d(geom));
        return match relu {
            true => Ok(y.recorded(&[&y], || GradFn::Relu)),
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
    /// and the weight: one fused kernel where the device has one ([`Conv2dBackwardInput`]),
    /// else the transposed weights times `dy` folded back by `col2im`.
    pub(crate) fn conv2d_backward_input(dy: &Tensor, weight: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
        let dy = dy.contiguous()?;
        Ok(fused::run_or_composite(&Conv2dBackwardInput(geom), &[&dy, weight])?.remove(0))
    }

    /// The gradient of `conv2d` with respect to its weight, from `dy` and the input `x`,
    /// summed over the batch: one fused kernel where the device has one
    /// ([`Conv2dBackwardWeight`]), else `dy` times `im2col(x)` transposed.
    pub(crate) fn conv2d_backward_weight(dy: &Tensor, x: &Tensor, geom: ConvGeometry) -> Result<Tensor> {
        let dy = dy.contiguous()?;
        Ok(fused::run_or_composite(&Conv2dBackwardWeight(geom), &[&dy, x])?.remove(0))
    }

    /// [`Tensor::conv2d_backward_weight`] of f16 or bf16 `dy` and `x` summed into f32
    /// ([`Conv2dBackwardWeightWide`]) where the device's kernel takes the pass, else `None`
    /// (the caller takes the gradient in the operands' type).
    pub(crate) fn conv2d_backward_weight_wide(dy: &Tensor, x: &Tensor, geom: ConvGeometry) -> Option<Result<Tensor>> {
        let low = matches!(x.dtype(), DType::F16 | DType::BF16) && dy.dtype() == x.dtype() && dy.device() == x.device();
        if !low {
            return None;
        }
        let dy = match dy.contiguous() {
            Ok(dy) => dy,
            Err(e) => return Some(Err(e)),
        };
        Some(fused::run(&Conv2dBackwardWeightWide(geom), &[&dy, x])?.map(|mut outs| outs.remove(0)))
    }
}

/// A convolution's profile: its floating-point operations and its stride and padding.
macro_rules! conv_kernel {
    ($op:ident, $name:literal) => {
        impl CustomKernel for $op {
            fn name(&self) -> &'static str {
                $name
            }

            fn flops(&self, _inputs: &[Strided]) -> Option<u64> {
                Some(self.0.flops())
            }

            fn detail(&self) -> Option<String> {
                Some(format!("stride {:?} padding {:?}", self.0.stride, self.0.padding))
            }
        }
    };
}

/// A 2-D convolution ([`Tensor::conv2d`] without its bias), as PyTorch's cross-correlation:
///
/// ```text
/// y[n, o, oy, ox] = sum_{c, ky, kx} x[n, g C/G + c, oy s - p + ky d, ox s - p + kx d] w[o, c, ky, kx]
/// ```
///
/// with `g = o / (O/G)` and zeros outside the input (per axis: stride `s`, padding `p`,
/// dilation `d`). Inputs (contiguous): `x` `[N, C, H, W]`, `weight` `[O, C/G, kh, kw]`. Output:
/// `y` `[N, O, out_h, out_w]`. Its gradients are [`Conv2dBackwardInput`] and
/// [`Conv2dBackwardWeight`].
#[derive(Clone, Copy, Debug)]
pub struct Conv2d(pub ConvGeometry);

conv_kernel!(Conv2d, "conv2d");

impl CustomOp for Conv2d {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(self.0.output_shape().to_vec(), inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![forward_composite(inputs[0], inputs[1], self.0)?.contiguous()?])
    }
}

/// [`Conv2d`] with its bias added to every output channel (`y[n, o, ..] += bias[o]`) as the
/// result is stored, so the bias costs no pass of its own. Inputs (contiguous): `x`, `weight`,
/// `bias` `[O]`. Output: `y`. Its gradients are [`Conv2d`]'s and the sum of `dy` over
/// everything but the channel.
#[derive(Clone, Copy, Debug)]
pub struct Conv2dBias(pub ConvGeometry);

conv_kernel!(Conv2dBias, "conv2d_bias");

impl CustomOp for Conv2dBias {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        Conv2d(self.0).outputs(inputs)
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let y = forward_composite(inputs[0], inputs[1], self.0)?;
        Ok(vec![y.add(&inputs[2].reshape(&[1, self.0.o, 1, 1])?)?])
    }
}

/// [`Conv2dBias`] followed by ReLU (`y = max(conv + bias, 0)`, NaN to 0 as [`super::Relu`]),
/// applied as the result is stored ([`Tensor::conv2d_relu`]). Inputs (contiguous): `x`,
/// `weight`, `bias` `[O]`. Output: `y`. Its gradients are ReLU's read from `y`, then
/// [`Conv2dBias`]'s.
#[derive(Clone, Copy, Debug)]
pub struct Conv2dBiasRelu(pub ConvGeometry);

conv_kernel!(Conv2dBiasRelu, "conv2d_bias_relu");

impl CustomOp for Conv2dBiasRelu {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        Conv2d(self.0).outputs(inputs)
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let y = Conv2dBias(self.0).composite(inputs)?.remove(0);
        super::Relu.composite(&[&y])
    }
}

/// The gradient of [`Conv2d`] with respect to its input (a transposed convolution of `dy`).
/// Inputs (contiguous): `dy` `[N, O, out_h, out_w]`, `weight`. Output: `dx` `[N, C, H, W]`.
#[derive(Clone, Copy, Debug)]
pub struct Conv2dBackwardInput(pub ConvGeometry);

conv_kernel!(Conv2dBackwardInput, "conv2d_backward_input");

impl CustomOp for Conv2dBackwardInput {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(self.0.input_shape().to_vec(), inputs[1].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (dy, weight, geom) = (inputs[0], inputs[1], self.0);
        let w = geom.window();
        let (n, o, g, l) = (geom.n, geom.o, geom.groups, w.col_cols());
        let k = w.col_rows() / g;
        let wt = weight.reshape(&[g, o / g, k])?.transpose(1usize, 2usize)?; // [G, K, O/G]
        let dcols = wt.matmul(&dy.reshape(&[n, g, o / g, l])?)?; // [N, G, K, L]
        Ok(vec![dcols.reshape(&[n, g * k, l])?.col2im_window(w)?])
    }
}

/// The gradient of [`Conv2d`] with respect to its weight, summed over the batch: `dw[o, c, ky,
/// kx] = sum_{n, oy, ox} dy[n, o, oy, ox] x[n, g C/G + c, ..]`. Inputs (contiguous): `dy`, `x`.
/// Output: `dweight` `[O, C/G, kh, kw]`.
#[derive(Clone, Copy, Debug)]
pub struct Conv2dBackwardWeight(pub ConvGeometry);

conv_kernel!(Conv2dBackwardWeight, "conv2d_backward_weight");

impl CustomOp for Conv2dBackwardWeight {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(self.0.weight_shape().to_vec(), inputs[1].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (dy, x, geom) = (inputs[0], inputs[1], self.0);
        let w = geom.window();
        let (n, o, g, l) = (geom.n, geom.o, geom.groups, w.col_cols());
        let k = w.col_rows() / g;
        let cols = x.im2col_window(w)?.reshape(&[n, g, k, l])?;
        let dw = dy.reshape(&[n, g, o / g, l])?.matmul(&cols.transpose(2usize, 3usize)?)?; // [N, G, O/G, K]
        Ok(vec![dw.sum(&[0], false)?.reshape(&geom.weight_shape())?])
    }
}

/// [`Conv2dBackwardWeight`] of f16 or bf16 `dy` and `x` with its sums written in f32 rather
/// than rounded to the operands' type: backward asks for it where the weight is autocast's
/// copy of an f32 parameter, whose gradient would be cast to f32 at once. Inputs (contiguous):
/// `dy`, `x`. Output: `dweight` `[O, C/G, kh, kw]` f32. Composite: both widened to f32, then
/// [`Conv2dBackwardWeight`]'s (each term is exact in f32; only the order of the sums may
/// differ from a kernel's).
#[derive(Clone, Copy, Debug)]
pub struct Conv2dBackwardWeightWide(pub ConvGeometry);

conv_kernel!(Conv2dBackwardWeightWide, "conv2d_backward_weight_wide");

impl CustomOp for Conv2dBackwardWeightWide {
    fn outputs(&self, _inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(self.0.weight_shape().to_vec(), DType::F32)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (dy, x) = (inputs[0].to_dtype(DType::F32)?, inputs[1].to_dtype(DType::F32)?);
        Conv2dBackwardWeight(self.0).composite(&[&dy, &x])
    }
}
