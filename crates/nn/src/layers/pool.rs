//! Pooling layers: `MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`, `AdaptiveMaxPool2d`
//! (`torch.nn.*Pool2d`). Pairs are `(height, width)`; `ceil_mode` is not supported (PyTorch's
//! default, floor, is what these compute).

use liandan_tensor::Tensor;

use super::{one_option_layer, with_fields};
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// Max over `kernel_size` windows (`torch.nn.MaxPool2d(kernel_size, stride=None, padding=0,
/// dilation=1)`; `stride` defaults to the kernel size).
///
/// # Shapes
/// - input: `[N, C, H_in, W_in]`
/// - output: `[N, C, H_out, W_out]`,
///   `H_out = (H_in + 2 padding.0 - dilation.0 (KH - 1) - 1) / stride.0 + 1`
#[derive(Clone, Copy, Debug)]
pub struct MaxPool2d {
    pub kernel_size: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl_module!(MaxPool2d {});

impl MaxPool2d {
    /// A square `kernel_size` window, stride = kernel size.
    pub fn new(kernel_size: usize) -> Self {
        MaxPool2d { kernel_size: (kernel_size, kernel_size), stride: (kernel_size, kernel_size), padding: (0, 0), dilation: (1, 1) }
    }
}

with_fields!(MaxPool2d {
    with_kernel_size: kernel_size: (usize, usize),
    with_stride: stride: (usize, usize),
    with_padding: padding: (usize, usize),
    with_dilation: dilation: (usize, usize),
});

impl Forward for MaxPool2d {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.max_pool2d(self.kernel_size, self.stride, self.padding, self.dilation)?)
    }
}

/// Mean over `kernel_size` windows (`torch.nn.AvgPool2d(kernel_size, stride=None, padding=0,
/// count_include_pad=True)`; `stride` defaults to the kernel size).
///
/// # Shapes
/// - input: `[N, C, H_in, W_in]`
/// - output: `[N, C, H_out, W_out]`, `H_out = (H_in + 2 padding.0 - KH) / stride.0 + 1`
#[derive(Clone, Copy, Debug)]
pub struct AvgPool2d {
    pub kernel_size: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    /// Whether padded zeros count in the mean's divisor; default true.
    pub count_include_pad: bool,
}

impl_module!(AvgPool2d {});

impl AvgPool2d {
    /// A square `kernel_size` window, stride = kernel size.
    pub fn new(kernel_size: usize) -> Self {
        AvgPool2d { kernel_size: (kernel_size, kernel_size), stride: (kernel_size, kernel_size), padding: (0, 0), count_include_pad: true }
    }
}

with_fields!(AvgPool2d {
    with_kernel_size: kernel_size: (usize, usize),
    with_stride: stride: (usize, usize),
    with_padding: padding: (usize, usize),
    with_count_include_pad: count_include_pad: bool,
});

impl Forward for AvgPool2d {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.avg_pool2d(self.kernel_size, self.stride, self.padding, self.count_include_pad)?)
    }
}

one_option_layer!(
    /// Average pooling to a fixed output size (`torch.nn.AdaptiveAvgPool2d(output_size)`).
    ///
    /// # Shapes
    /// - input: `[N, C, H, W]` or `[C, H, W]`
    /// - output: `[N, C, OH, OW]` or `[C, OH, OW]`
    AdaptiveAvgPool2d { output_size: (usize, usize) } => adaptive_avg_pool2d
);

one_option_layer!(
    /// Max pooling to a fixed output size (`torch.nn.AdaptiveMaxPool2d(output_size)`).
    ///
    /// # Shapes
    /// - input: `[N, C, H, W]` or `[C, H, W]`
    /// - output: `[N, C, OH, OW]` or `[C, OH, OW]`
    AdaptiveMaxPool2d { output_size: (usize, usize) } => adaptive_max_pool2d
);
