//! Convolution and pooling over `[N, C, H, W]`.
//!
//! `conv2d` is a composite: `im2col` unfolds the input windows into a matrix and a batched
//! matmul applies the weights, so its gradients come from the rules of `im2col` (whose adjoint
//! is `col2im`) and matmul. A backend may later replace it with a fused implicit-GEMM kernel.

use crate::autograd::GradFn;
use crate::backend::Window2d;
use crate::error::{Error, Result};
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

fn pair_ok(op: &'static str, shape: &[usize], name: &str, p: (usize, usize)) -> Result<()> {
    if p.0 == 0 || p.1 == 0 {
        return Err(Error::bad_shape(op, shape, format!("{name} must be positive, got {p:?}")));
    }
    Ok(())
}

/// Checks a window over the `[N, C, H, W]` tensor `x` and returns its geometry.
fn window(
    op: &'static str,
    s: &[usize],
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
) -> Result<Window2d> {
    if s.len() != 4 {
        return Err(Error::bad_shape(op, s, "expects a 4-D [N, C, H, W] input"));
    }
    pair_ok(op, s, "kernel size", kernel)?;
    pair_ok(op, s, "stride", stride)?;
    pair_ok(op, s, "dilation", dilation)?;
    let w = Window2d { n: s[0], c: s[1], h: s[2], w: s[3], kernel, stride, padding, dilation };
    let span = |k: usize, d: usize| d * (k - 1) + 1;
    if s[2] + 2 * padding.0 < span(kernel.0, dilation.0) || s[3] + 2 * padding.1 < span(kernel.1, dilation.1) {
        return Err(Error::bad_shape(op, s, format!("kernel {kernel:?} (dilation {dilation:?}) is larger than the padded input")));
    }
    Ok(w)
}

impl Tensor {
    /// Unfolds sliding windows: `[N, C, H, W] -> [N, C*kh*kw, out_h*out_w]` (`torch.nn.functional.unfold`).
    pub fn im2col(&self, kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize), dilation: (usize, usize)) -> Result<Tensor> {
        let w = window("im2col", self.shape(), kernel, stride, padding, dilation)?;
        self.im2col_window(w)
    }

    pub(crate) fn im2col_window(&self, w: Window2d) -> Result<Tensor> {
        let x = self.contiguous()?;
        let storage = x.with_strided(|s| self.device().backend().im2col(s, w, 0.0))?;
        Ok(Tensor::from_op(storage, &[w.n, w.col_rows(), w.col_cols()], self.dtype(), self.device(), &[self], || GradFn::Im2col(w)))
    }

    /// Folds `[N, C*kh*kw, L]` columns into `[N, C, H, W]` with `(H, W) = output_size`, summing
    /// overlaps (`torch.nn.functional.fold`); the adjoint of [`Tensor::im2col`].
    pub fn col2im(
        &self,
        output_size: (usize, usize),
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
    ) -> Result<Tensor> {
        let s = self.shape();
        if s.len() != 3 || kernel.0 * kernel.1 == 0 || !s[1].is_multiple_of(kernel.0 * kernel.1) {
            return Err(Error::bad_shape("col2im", s, format!("expects [N, C*kh*kw, L] columns for kernel {kernel:?}")));
        }
        let c = s[1] / (kernel.0 * kernel.1);
        let w = window("col2im", &[s[0], c, output_size.0, output_size.1], kernel, stride, padding, dilation)?;
        if w.col_cols() != s[2] {
            return Err(Error::bad_shape("col2im", s, format!("has {} columns, but output size {output_size:?} gives {} windows", s[2], w.col_cols())));
        }
        self.col2im_window(w)
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

    /// Folds `[N, C*kh*kw, L]` columns back into `[N, C, H, W]`, summing overlaps
    /// (`torch.nn.functional.fold`); the adjoint of [`Tensor::im2col`].
    pub(crate) fn col2im_window(&self, w: Window2d) -> Result<Tensor> {
        let cols = self.contiguous()?;
        let storage = cols.with_strided(|s| self.device().backend().col2im(s, w))?;
        Ok(Tensor::from_op(storage, &[w.n, w.c, w.h, w.w], self.dtype(), self.device(), &[self], || GradFn::Col2im(w)))
    }

    /// 2-D convolution (cross-correlation, as PyTorch) of `[N, C, H, W]` with a
    /// `[O, C/groups, kh, kw]` weight and an optional `[O]` bias.
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Result<Tensor> {
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias])? {
            return x.conv2d(&w, b.as_ref(), stride, padding, dilation, groups);
        }
        check_float("conv2d", self)?;
        check_same_dtype("conv2d", self, weight)?;
        check_same_device("conv2d", self, weight)?;
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.len() != 4 || ws.len() != 4 {
            return Err(Error::shape("conv2d", xs, ws, "must be a 4-D [N, C, H, W] input and a 4-D [O, C/groups, kh, kw] weight"));
        }
        if groups == 0 || xs[1] % groups != 0 || ws[0] % groups != 0 || xs[1] / groups != ws[1] {
            return Err(Error::shape(
                "conv2d",
                xs,
                ws,
                format!("disagree on channels: input has {} channels, weight expects {} per group x {groups} groups", xs[1], ws[1]),
            ));
        }
        let w = window("conv2d", self.shape(), (ws[2], ws[3]), stride, padding, dilation)?;
        let (n, o, l) = (xs[0], ws[0], w.col_cols());
        let cols = self.im2col_window(w)?; // [N, C*kh*kw, L]
        let out = if groups == 1 {
            weight.reshape(&[o, w.col_rows()])?.matmul(&cols)? // [N, O, L]
        } else {
            let ck = w.col_rows() / groups;
            let cols = cols.reshape(&[n, groups, ck, l])?;
            weight.reshape(&[groups, o / groups, ck])?.matmul(&cols)?.reshape(&[n, o, l])?
        };
        let out = out.reshape(&[n, o, w.out_h(), w.out_w()])?;
        match bias {
            None => Ok(out),
            Some(b) => {
                if b.shape() != [o] {
                    return Err(Error::shape("conv2d", ws, b.shape(), "weight and bias disagree: the bias must be [O]"));
                }
                out.add(&b.reshape(&[1, o, 1, 1])?)
            }
        }
    }

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
        let indices = Tensor::from_op(indices, &out_shape, crate::DType::I64, self.device(), &[], || GradFn::Identity);
        Ok(Tensor::from_op(values, &out_shape, self.dtype(), self.device(), &[self], || GradFn::MaxPool2d { window: w, indices }))
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
}
