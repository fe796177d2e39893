//! Convolutions: `Conv1d`, `Conv2d` and `ConvTranspose2d` (`torch.nn.Conv*`).
//!
//! All three initialize as PyTorch's `_ConvNd.reset_parameters`: weight and bias
//! uniform(±1/√fan_in), where fan_in is `weight.shape[1] * kernel elements`, which is
//! `in_channels / groups * k` for a convolution and `out_channels / groups * k` for a
//! transposed one (PyTorch computes it from the weight's second axis in both cases).
//! `padding_mode` other than zeros and string paddings (`"same"`) are not supported.

use liandan_tensor::{Device, Tensor};

use super::{default_bound, uniform_param, with_fields};
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// Checks the channel counts divide into `groups`, as PyTorch's constructor does.
fn check_groups(layer: &'static str, in_channels: usize, out_channels: usize, groups: usize) -> Result<()> {
    if groups == 0 || !in_channels.is_multiple_of(groups) || !out_channels.is_multiple_of(groups) {
        return Err(liandan_tensor::Error::BadShape {
            op: layer,
            shape: vec![in_channels, out_channels],
            detail: format!("in_channels and out_channels must both be divisible by groups = {groups}"),
        }
        .into());
    }
    Ok(())
}

/// Configuration of a [`Conv1d`] (`torch.nn.Conv1d`).
#[derive(Clone, Debug)]
pub struct Conv1dConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: usize,
    /// Default 1.
    pub stride: usize,
    /// Zero padding on both sides; default 0.
    pub padding: usize,
    /// Default 1.
    pub dilation: usize,
    /// Default 1.
    pub groups: usize,
    /// Default true.
    pub bias: bool,
}

with_fields!(Conv1dConfig { with_stride: stride: usize, with_padding: padding: usize, with_dilation: dilation: usize, with_groups: groups: usize, with_bias: bias: bool });

impl Conv1dConfig {
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Self {
        Conv1dConfig { in_channels, out_channels, kernel_size, stride: 1, padding: 0, dilation: 1, groups: 1, bias: true }
    }

    /// A layer on `device`, F32, initialized as PyTorch.
    pub fn init(&self, device: &Device) -> Result<Conv1d> {
        check_groups("Conv1d", self.in_channels, self.out_channels, self.groups)?;
        let cin = self.in_channels / self.groups;
        let bound = default_bound(cin * self.kernel_size);
        let weight = uniform_param(&[self.out_channels, cin, self.kernel_size], bound, device)?;
        let bias = if self.bias { Some(uniform_param(&[self.out_channels], bound, device)?) } else { None };
        Ok(Conv1d { weight, bias, config: self.clone() })
    }
}

/// A 1-D convolution.
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[N, C_in, L_in]`
/// - `weight`: `[C_out, C_in / groups, K]`, `bias`: `[C_out]`
/// - output: `[N, C_out, L_out]`, `L_out = (L_in + 2 padding - dilation (K - 1) - 1) / stride + 1`
#[derive(Clone, Debug)]
pub struct Conv1d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub config: Conv1dConfig,
}

impl_module!(Conv1d { params: [weight, bias] });

impl Forward for Conv1d {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        Ok(x.conv1d(&self.weight, self.bias.as_ref(), c.stride, c.padding, c.dilation, c.groups)?)
    }
}

/// Configuration of a [`Conv2d`] (`torch.nn.Conv2d`). Pairs are `(height, width)`.
#[derive(Clone, Debug)]
pub struct Conv2dConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: (usize, usize),
    /// Default `(1, 1)`.
    pub stride: (usize, usize),
    /// Zero padding on each side; default `(0, 0)`.
    pub padding: (usize, usize),
    /// Default `(1, 1)`.
    pub dilation: (usize, usize),
    /// Default 1.
    pub groups: usize,
    /// Default true.
    pub bias: bool,
}

with_fields!(Conv2dConfig {
    with_kernel_size: kernel_size: (usize, usize),
    with_stride: stride: (usize, usize),
    with_padding: padding: (usize, usize),
    with_dilation: dilation: (usize, usize),
    with_groups: groups: usize,
    with_bias: bias: bool,
});

impl Conv2dConfig {
    /// A square `kernel_size` x `kernel_size` convolution (set `kernel_size` for others).
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Self {
        Conv2dConfig {
            in_channels,
            out_channels,
            kernel_size: (kernel_size, kernel_size),
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
            bias: true,
        }
    }

    /// A layer on `device`, F32, initialized as PyTorch.
    pub fn init(&self, device: &Device) -> Result<Conv2d> {
        check_groups("Conv2d", self.in_channels, self.out_channels, self.groups)?;
        let cin = self.in_channels / self.groups;
        let (kh, kw) = self.kernel_size;
        let bound = default_bound(cin * kh * kw);
        let weight = uniform_param(&[self.out_channels, cin, kh, kw], bound, device)?;
        let bias = if self.bias { Some(uniform_param(&[self.out_channels], bound, device)?) } else { None };
        Ok(Conv2d { weight, bias, config: self.clone() })
    }
}

/// A 2-D convolution.
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[N, C_in, H_in, W_in]`
/// - `weight`: `[C_out, C_in / groups, KH, KW]`, `bias`: `[C_out]`
/// - output: `[N, C_out, H_out, W_out]`,
///   `H_out = (H_in + 2 padding.0 - dilation.0 (KH - 1) - 1) / stride.0 + 1`, and so for `W_out`
#[derive(Clone, Debug)]
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub config: Conv2dConfig,
}

impl_module!(Conv2d { params: [weight, bias] });

impl Forward for Conv2d {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        Ok(x.conv2d(&self.weight, self.bias.as_ref(), c.stride, c.padding, c.dilation, c.groups)?)
    }

    /// One op where the device applies ReLU as the convolution stores its output
    /// ([`Tensor::conv2d_relu`]: with a bias, on the GPU and the CPU), the two otherwise.
    fn forward_relu(&self, x: &Tensor) -> Result<Tensor> {
        crate::summary::scope(self, || {
            let c = &self.config;
            Ok(x.conv2d_relu(&self.weight, self.bias.as_ref(), c.stride, c.padding, c.dilation, c.groups)?)
        })
    }
}

/// Configuration of a [`ConvTranspose2d`] (`torch.nn.ConvTranspose2d`). Pairs are
/// `(height, width)`.
#[derive(Clone, Debug)]
pub struct ConvTranspose2dConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel_size: (usize, usize),
    /// Default `(1, 1)`.
    pub stride: (usize, usize),
    /// Default `(0, 0)`.
    pub padding: (usize, usize),
    /// Extra size added to one side of the output; default `(0, 0)`.
    pub output_padding: (usize, usize),
    /// Default `(1, 1)`.
    pub dilation: (usize, usize),
    /// Default 1.
    pub groups: usize,
    /// Default true.
    pub bias: bool,
}

with_fields!(ConvTranspose2dConfig {
    with_kernel_size: kernel_size: (usize, usize),
    with_stride: stride: (usize, usize),
    with_padding: padding: (usize, usize),
    with_output_padding: output_padding: (usize, usize),
    with_dilation: dilation: (usize, usize),
    with_groups: groups: usize,
    with_bias: bias: bool,
});

impl ConvTranspose2dConfig {
    /// A square `kernel_size` x `kernel_size` transposed convolution.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: usize) -> Self {
        ConvTranspose2dConfig {
            in_channels,
            out_channels,
            kernel_size: (kernel_size, kernel_size),
            stride: (1, 1),
            padding: (0, 0),
            output_padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
            bias: true,
        }
    }

    /// A layer on `device`, F32, initialized as PyTorch (fan_in = `C_out / groups * KH * KW`).
    pub fn init(&self, device: &Device) -> Result<ConvTranspose2d> {
        check_groups("ConvTranspose2d", self.in_channels, self.out_channels, self.groups)?;
        let cout = self.out_channels / self.groups;
        let (kh, kw) = self.kernel_size;
        let bound = default_bound(cout * kh * kw);
        let weight = uniform_param(&[self.in_channels, cout, kh, kw], bound, device)?;
        let bias = if self.bias { Some(uniform_param(&[self.out_channels], bound, device)?) } else { None };
        Ok(ConvTranspose2d { weight, bias, config: self.clone() })
    }
}

/// A 2-D transposed convolution (the gradient of a convolution with respect to its input).
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[N, C_in, H_in, W_in]`
/// - `weight`: `[C_in, C_out / groups, KH, KW]`, `bias`: `[C_out]`
/// - output: `[N, C_out, H_out, W_out]`,
///   `H_out = (H_in - 1) stride.0 - 2 padding.0 + dilation.0 (KH - 1) + output_padding.0 + 1`
#[derive(Clone, Debug)]
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub config: ConvTranspose2dConfig,
}

impl_module!(ConvTranspose2d { params: [weight, bias] });

impl Forward for ConvTranspose2d {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let c = &self.config;
        Ok(x.conv_transpose2d(&self.weight, self.bias.as_ref(), c.stride, c.padding, c.output_padding, c.dilation, c.groups)?)
    }
}
