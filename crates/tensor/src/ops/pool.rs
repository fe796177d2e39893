//! Pooling over `[N, C, H, W]`: max and average windows (primitives) and the adaptive
//! pools (composites of those, or of per-bin reductions when the bins overlap).
//!
//! Dimension letters: N batch, C channels, H and W height and width.

use crate::autograd::GradFn;
use crate::backend::Window2d;
use crate::custom::CustomOp;
use crate::error::{Error, Result};
use crate::fused;
use crate::ops::check_float;
use crate::ops::conv::window;
use crate::tensor::Tensor;

/// Which reduction an adaptive pool applies within each bin.
#[derive(Clone, Copy)]
enum Pool {
    Avg,
    Max,
}

impl Tensor {
    /// 2-D max pooling; the gradient goes to the (first) maximal element of each window.
    pub fn max_pool2d(&self, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize), dilation: (usize, usize)) -> Result<Tensor> {
        check_float("max_pool2d", self)?;
        let w = window("max_pool2d", self.shape(), kernel, stride, padding, dilation)?;
        if padding.0 * 2 > kernel.0 || padding.1 * 2 > kernel.1 {
            return Err(Error::bad_shape("max_pool2d", self.shape(), format!("padding {padding:?} must be at most half the kernel {kernel:?}")));
        }
        let x = self.contiguous()?;
        let (values, indices) = x.with_strided(|s| self.device().backend().max_pool2d(s, w))?;
        let out_shape = [w.n, w.c, w.out_h(), w.out_w()];
        let indices = Tensor::untracked_op(indices, &out_shape, crate::DType::I64, self.device(), &[self], || GradFn::Opaque("max_pool2d indices"));
        Ok(Tensor::from_op(values, &out_shape, self.dtype(), self.device(), &[self], || GradFn::MaxPool2d { window: w, indices }))
    }

    /// The gradient of max pooling from `dy` and the forward's `indices`: one fused kernel
    /// where the device has one ([`MaxPool2dBackward`]), else `dy` scattered into zeros at the
    /// indices.
    pub(crate) fn max_pool2d_backward(dy: &Tensor, indices: &Tensor, w: Window2d) -> Result<Tensor> {
        let (dy, indices) = (dy.contiguous()?, indices.contiguous()?);
        Ok(fused::run_or_composite(&MaxPool2dBackward(w), &[&dy, &indices])?.remove(0))
    }

    /// 2-D average pooling; `count_include_pad` as PyTorch (which defaults to true).
    pub fn avg_pool2d(&self, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize), count_include_pad: bool) -> Result<Tensor> {
        check_float("avg_pool2d", self)?;
        let w = window("avg_pool2d", self.shape(), kernel, stride, padding, (1, 1))?;
        if padding.0 * 2 > kernel.0 || padding.1 * 2 > kernel.1 {
            return Err(Error::bad_shape("avg_pool2d", self.shape(), format!("padding {padding:?} must be at most half the kernel {kernel:?}")));
        }
        self.avg_pool2d_window(w, count_include_pad)
    }

    pub(crate) fn avg_pool2d_window(&self, w: Window2d, cip: bool) -> Result<Tensor> {
        let x = self.contiguous()?;
        let storage = x.with_strided(|s| self.device().backend().avg_pool2d(s, w, cip))?;
        Ok(Tensor::from_op(storage, &[w.n, w.c, w.out_h(), w.out_w()], self.dtype(), self.device(), &[self], || GradFn::AvgPool2d {
            window: w,
            count_include_pad: cip,
        }))
    }

    /// The adjoint of average pooling, as a differentiable op of its own (its gradient is
    /// average pooling again).
    pub(crate) fn avg_pool2d_backward_window(&self, w: Window2d, cip: bool) -> Result<Tensor> {
        let dy = self.contiguous()?;
        let storage = dy.with_strided(|s| self.device().backend().avg_pool2d_backward(s, w, cip))?;
        Ok(Tensor::from_op(storage, &[w.n, w.c, w.h, w.w], self.dtype(), self.device(), &[self], || GradFn::AvgPool2dBackward {
            window: w,
            count_include_pad: cip,
        }))
    }

    /// The gradient of [`Tensor::avg_pool2d`] for an input of `[N, C, H, W]` = `input_shape`,
    /// given `self` = the gradient of its output.
    pub fn avg_pool2d_backward(
        &self,
        input_shape: &[usize],
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        count_include_pad: bool,
    ) -> Result<Tensor> {
        let w = window("avg_pool2d_backward", input_shape, kernel, stride, padding, (1, 1))?;
        if self.shape() != [w.n, w.c, w.out_h(), w.out_w()] {
            return Err(Error::shape("avg_pool2d_backward", input_shape, self.shape(), "input shape and output gradient disagree"));
        }
        self.avg_pool2d_backward_window(w, count_include_pad)
    }

    /// Adaptive average pooling to `(oh, ow)` (`torch.nn.functional.adaptive_avg_pool2d`):
    /// output row `i` averages input rows `floor(i*H/oh) .. ceil((i+1)*H/oh)`, and so for columns.
    ///
    /// # Shapes
    /// - `self`: `[N, C, H, W]` or `[C, H, W]`
    /// - result: `[N, C, oh, ow]` or `[C, oh, ow]`
    pub fn adaptive_avg_pool2d(&self, output_size: (usize, usize)) -> Result<Tensor> {
        self.adaptive_pool2d("adaptive_avg_pool2d", output_size, Pool::Avg)
    }

    /// Adaptive max pooling to `(oh, ow)` (`torch.nn.functional.adaptive_max_pool2d`), with the
    /// bins of [`Tensor::adaptive_avg_pool2d`]; the gradient goes to each bin's (first) maximum.
    ///
    /// # Shapes
    /// - `self`: `[N, C, H, W]` or `[C, H, W]`
    /// - result: `[N, C, oh, ow]` or `[C, oh, ow]`
    pub fn adaptive_max_pool2d(&self, output_size: (usize, usize)) -> Result<Tensor> {
        self.adaptive_pool2d("adaptive_max_pool2d", output_size, Pool::Max)
    }

    fn adaptive_pool2d(&self, op: &'static str, (oh, ow): (usize, usize), pool: Pool) -> Result<Tensor> {
        check_float(op, self)?;
        let s = self.shape();
        let r = s.len();
        if !(r == 3 || r == 4) || s[r - 2] == 0 || s[r - 1] == 0 || oh == 0 || ow == 0 {
            return Err(Error::bad_shape(op, s, format!("expects a non-empty [N, C, H, W] or [C, H, W] input and a positive output size, got ({oh}, {ow})")));
        }
        if r == 3 {
            return self.unsqueeze(0usize)?.adaptive_pool2d(op, (oh, ow), pool)?.squeeze(0usize);
        }
        let (h, w) = (s[2], s[3]);
        if h % oh == 0 && w % ow == 0 {
            let k = (h / oh, w / ow);
            return self.window_pool(pool, k);
        }
        // Bins are products of row and column ranges, so both pools separate by axis.
        self.adaptive_axis(2, oh, pool)?.adaptive_axis(3, ow, pool)
    }

    /// Pools non-overlapping `k` windows (kernel = stride, no padding).
    fn window_pool(&self, pool: Pool, k: (usize, usize)) -> Result<Tensor> {
        match pool {
            Pool::Avg => self.avg_pool2d(k, k, (0, 0), true),
            Pool::Max => self.max_pool2d(k, k, (0, 0), (1, 1)),
        }
    }

    /// Adaptive pooling of axis `dim` (2 or 3) of `[N, C, H, W]` to `out` bins.
    fn adaptive_axis(&self, dim: usize, out: usize, pool: Pool) -> Result<Tensor> {
        let len = self.shape()[dim];
        if len == out {
            return Ok(self.clone());
        }
        if len.is_multiple_of(out) {
            let k = if dim == 2 { (len / out, 1) } else { (1, len / out) };
            return self.window_pool(pool, k);
        }
        let bins: Vec<Tensor> = (0..out)
            .map(|i| {
                let (start, end) = (i * len / out, ((i + 1) * len).div_ceil(out));
                let bin = self.narrow(dim, start, end - start)?;
                match pool {
                    Pool::Avg => bin.mean(&[dim], true),
                    Pool::Max => bin.max(dim, true),
                }
            })
            .collect::<Result<_>>()?;
        Tensor::cat(&bins.iter().collect::<Vec<_>>(), dim)
    }
}

/// The gradient of max pooling ([`Tensor::max_pool2d`]) from the indices its forward returned:
/// `dx[n, c, i] = sum of dy[n, c, y, x] over the windows (y, x) whose index is i` (the
/// composite scatters dy into zeros). Inputs (contiguous): `dy` `[N, C, out_h, out_w]`, the
/// indices (i64 offsets `h W + w` in each plane, -1 for a window wholly in the padding), shaped
/// like `dy`. Output: `dx` `[N, C, H, W]`, of `dy`'s type.
#[derive(Clone, Copy, Debug)]
pub struct MaxPool2dBackward(pub Window2d);

impl CustomOp for MaxPool2dBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, crate::DType)> {
        let w = self.0;
        vec![(vec![w.n, w.c, w.h, w.w], inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (dy, indices, w) = (inputs[0], inputs[1], self.0);
        let (planes, l) = (w.n * w.c, w.out_h() * w.out_w());
        let zeros = Tensor::zeros(&[planes, w.h * w.w], dy.dtype(), dy.device())?;
        let dx = zeros.scatter_add(1usize, &indices.reshape(&[planes, l])?, &dy.reshape(&[planes, l])?)?;
        Ok(vec![dx.reshape(&[w.n, w.c, w.h, w.w])?])
    }
}

crate::custom_kernel_name! {
    MaxPool2dBackward => "max_pool2d_backward",
}
