//! Convolutions: `im2col`/`col2im` (primitives), `conv2d`, `conv1d` (conv2d with H = 1) and
//! `conv_transpose2d` (a matmul and `col2im`, the adjoint of conv2d).
//!
//! `conv2d` is a composite: `im2col` unfolds the input windows into a matrix and a batched
//! matmul applies the weights; a backend may run it, and each of its two gradients, as one
//! fused implicit-GEMM kernel instead, with no column buffer (`conv_fused.rs`).
//!
//! Dimension letters: N batch, C channels, H and W height and width, L length, O output
//! channels, G groups.

use crate::autocast::Product;
use crate::autograd::GradFn;
use crate::backend::ConvGeometry;
use crate::backend::Window2d;
use crate::error::{Error, Result};
use crate::ops::conv_fused;
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

fn pair_ok(op: &'static str, shape: &[usize], name: &str, p: (usize, usize)) -> Result<()> {
    if p.0 == 0 || p.1 == 0 {
        return Err(Error::bad_shape(op, shape, format!("{name} must be positive, got {p:?}")));
    }
    Ok(())
}

/// About the operations of a convolution of `x` `[N, C, *spatial]` by `weight` (two per
/// multiply-add, each output position taking the whole weight), for autocast's minimum
/// size; the output's extent is taken as the input's over the stride.
fn conv_ops(x: &Tensor, weight: &Tensor, stride: &[usize]) -> u64 {
    let xs = x.shape();
    let spatial = xs.iter().skip(2).zip(stride.iter().chain(std::iter::repeat(&1)));
    let positions: u64 = spatial.map(|(&e, &s)| e.div_ceil(s.max(1)) as u64).product();
    2 * (xs.first().copied().unwrap_or(0) as u64).saturating_mul(positions).saturating_mul(weight.numel() as u64)
}

/// Checks a window over the `[N, C, H, W]` tensor `x` and returns its geometry.
pub(super) fn window(
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

/// The checks every convolution makes first: a float input, a weight of its dtype and device,
/// both of rank `rank` (`layout` says which dimensions, for the error).
fn check_operands(op: &'static str, x: &Tensor, weight: &Tensor, rank: usize, layout: &str) -> Result<()> {
    check_float(op, x)?;
    check_same_dtype(op, x, weight)?;
    check_same_device(op, x, weight)?;
    if x.rank() != rank || weight.rank() != rank {
        return Err(Error::shape(op, x.shape(), weight.shape(), format!("must be {layout}")));
    }
    Ok(())
}

/// conv2d's and conv1d's channel check: `[N, C, ..]` and `[O, C/groups, ..]` with C and O
/// both split into `groups`.
fn check_groups(op: &'static str, xs: &[usize], ws: &[usize], groups: usize) -> Result<()> {
    if groups == 0 || !xs[1].is_multiple_of(groups) || !ws[0].is_multiple_of(groups) || xs[1] / groups != ws[1] {
        return Err(Error::shape(
            op,
            xs,
            ws,
            format!("disagree on channels: input has {} channels, weight expects {} per group x {groups} groups", xs[1], ws[1]),
        ));
    }
    Ok(())
}

/// Adds an `[O]` bias along axis 1 of `out`, or says which shapes disagree.
fn add_channel_bias(op: &'static str, out: Tensor, weight: &Tensor, bias: Option<&Tensor>, o: usize) -> Result<Tensor> {
    let Some(b) = bias else { return Ok(out) };
    if b.shape() != [o] {
        return Err(Error::shape(op, weight.shape(), b.shape(), format!("weight and bias disagree: the bias must be [O] = [{o}]")));
    }
    let mut shape = vec![1; out.rank()];
    shape[1] = o;
    out.add(&b.reshape(&shape)?)
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
        self.conv2d_then(weight, bias, stride, padding, dilation, groups, false)
    }

    /// `conv2d(..).relu()` as one op where the device can (a convolution with a bias whose
    /// kernel applies ReLU as it stores the result, [`crate::ops::Conv2dBiasRelu`]: no
    /// pass of its own over the output), else the two. The same values and gradients either
    /// way (ReLU's gradient at 0 is 0).
    pub fn conv2d_relu(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Result<Tensor> {
        self.conv2d_then(weight, bias, stride, padding, dilation, groups, true)
    }

    /// [`Tensor::conv2d`], then ReLU where `relu`.
    #[allow(clippy::too_many_arguments)]
    fn conv2d_then(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
        relu: bool,
    ) -> Result<Tensor> {
        let ops = conv_ops(self, weight, &[stride.0, stride.1]);
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias], Product::Conv, ops)? {
            return x.conv2d_then(&w, b.as_ref(), stride, padding, dilation, groups, relu);
        }
        check_operands("conv2d", self, weight, 4, "a 4-D [N, C, H, W] input and a 4-D [O, C/groups, kh, kw] weight")?;
        let (xs, ws) = (self.shape(), weight.shape());
        check_groups("conv2d", xs, ws, groups)?;
        let win = window("conv2d", self.shape(), (ws[2], ws[3]), stride, padding, dilation)?;
        let geom = ConvGeometry { n: xs[0], c: xs[1], h: xs[2], w: xs[3], o: ws[0], kernel: win.kernel, stride, padding, dilation, groups };
        if let Some(b) = bias {
            if b.shape() != [geom.o] {
                return Err(Error::shape("conv2d", ws, b.shape(), "weight and bias disagree: the bias must be [O]"));
            }
        }
        match (bias, relu) {
            (None, false) => conv_fused::conv2d(self, weight, geom),
            (None, true) => conv_fused::conv2d(self, weight, geom)?.relu(),
            (Some(b), relu) => conv_fused::conv2d_bias(self, weight, b, geom, relu),
        }
    }

    /// 1-D convolution (cross-correlation, as `torch.nn.functional.conv1d`), run as a conv2d
    /// over a height of 1.
    ///
    /// # Shapes
    /// - `self`: `[N, C, L]`
    /// - `weight`: `[O, C/groups, k]`, `bias`: `[O]`
    /// - result: `[N, O, L_out]`, `L_out = (L + 2*padding - dilation*(k-1) - 1) / stride + 1`
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, stride: usize, padding: usize, dilation: usize, groups: usize) -> Result<Tensor> {
        let ops = conv_ops(self, weight, &[stride]);
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias], Product::Conv, ops)? {
            return x.conv1d(&w, b.as_ref(), stride, padding, dilation, groups);
        }
        check_operands("conv1d", self, weight, 3, "a 3-D [N, C, L] input and a 3-D [O, C/groups, k] weight")?;
        let (xs, ws) = (self.shape(), weight.shape());
        check_groups("conv1d", xs, ws, groups)?;
        if stride == 0 || dilation == 0 || ws[2] == 0 || xs[2] + 2 * padding < dilation * (ws[2].max(1) - 1) + 1 {
            return Err(Error::shape(
                "conv1d",
                xs,
                ws,
                format!("kernel {} (dilation {dilation}, stride {stride}) does not fit the input padded by {padding}", ws[2]),
            ));
        }
        let x4 = self.unsqueeze(2usize)?;
        let w4 = weight.unsqueeze(2usize)?;
        let out = x4.conv2d(&w4, None, (1, stride), (0, padding), (1, dilation), groups)?.squeeze(2usize)?;
        add_channel_bias("conv1d", out, weight, bias, ws[0])
    }

    /// Transposed 2-D convolution (`torch.nn.functional.conv_transpose2d`): the adjoint of
    /// [`Tensor::conv2d`] with the same weight. Each input pixel scatters `weight` into the
    /// output; computed as one matmul into columns and a `col2im` fold that sums the overlaps.
    ///
    /// # Shapes
    /// - `self`: `[N, C_in, H, W]`
    /// - `weight`: `[C_in, C_out/groups, kh, kw]` (PyTorch's layout), `bias`: `[C_out]`
    /// - result: `[N, C_out, H_out, W_out]` with
    ///   `H_out = (H-1)*stride - 2*padding + dilation*(kh-1) + output_padding + 1` (and so W)
    ///
    /// `output_padding` must be smaller than the stride or the dilation on its axis, as PyTorch.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        output_padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Result<Tensor> {
        // Each input pixel scatters its slice of the weight: as a stride-1 convolution's count.
        let ops = conv_ops(self, weight, &[1, 1]);
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias], Product::Conv, ops)? {
            return x.conv_transpose2d(&w, b.as_ref(), stride, padding, output_padding, dilation, groups);
        }
        const OP: &str = "conv_transpose2d";
        check_operands(OP, self, weight, 4, "a 4-D [N, C_in, H, W] input and a 4-D [C_in, C_out/groups, kh, kw] weight")?;
        let (xs, ws) = (self.shape(), weight.shape());
        if groups == 0 || xs[1] % groups != 0 || ws[0] != xs[1] {
            return Err(Error::shape(
                OP,
                xs,
                ws,
                format!("disagree on channels: input has {} channels, weight has {} input channels ({groups} groups)", xs[1], ws[0]),
            ));
        }
        let (n, c_in, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let (cout_g, kernel) = (ws[1], (ws[2], ws[3]));
        let c_out = cout_g * groups;
        let ok = |s: usize, d: usize, k: usize, op: usize| s > 0 && d > 0 && k > 0 && (op < s || op < d);
        if !ok(stride.0, dilation.0, kernel.0, output_padding.0) || !ok(stride.1, dilation.1, kernel.1, output_padding.1) {
            return Err(Error::shape(
                OP,
                xs,
                ws,
                format!(
                    "stride {stride:?}, dilation {dilation:?} and kernel must be positive, output_padding {output_padding:?} smaller than stride or dilation"
                ),
            ));
        }
        let out_len = |len: usize, s: usize, p: usize, d: usize, k: usize, op: usize| {
            ((len as isize - 1) * s as isize - 2 * p as isize + (d * (k - 1) + op + 1) as isize).max(0) as usize
        };
        let (oh, ow) =
            (out_len(h, stride.0, padding.0, dilation.0, kernel.0, output_padding.0), out_len(w, stride.1, padding.1, dilation.1, kernel.1, output_padding.1));
        if h == 0 || w == 0 || oh == 0 || ow == 0 {
            return Err(Error::shape(OP, xs, ws, format!("give an empty output [{oh}, {ow}] with stride {stride:?}, padding {padding:?}")));
        }
        // cols[n, (co, i, j), y*W + x] = sum_ci weight[ci, co, i, j] x[n, ci, y, x], per group.
        let (cin_g, ck, l) = (c_in / groups, cout_g * kernel.0 * kernel.1, h * w);
        let wt = weight.reshape(&[groups, cin_g, ck])?.transpose(1usize, 2usize)?; // [G, ck, cin_g]
        let cols = wt.matmul(&self.reshape(&[n, groups, cin_g, l])?)?.reshape(&[n, groups * ck, h, w])?;
        // The conv2d window over the output may hold more positions than the input has pixels
        // (when output_padding >= stride): those positions have no source and get zero columns.
        let win = Window2d { n, c: c_out, h: oh, w: ow, kernel, stride, padding, dilation };
        let (wh, ww) = (win.out_h(), win.out_w());
        let mut cols = cols;
        if wh > h {
            let z = Tensor::zeros(&[n, groups * ck, wh - h, w], self.dtype(), self.device())?;
            cols = Tensor::cat(&[&cols, &z], 2usize)?;
        }
        if ww > w {
            let z = Tensor::zeros(&[n, groups * ck, wh, ww - w], self.dtype(), self.device())?;
            cols = Tensor::cat(&[&cols, &z], 3usize)?;
        }
        let out = cols.reshape(&[n, groups * ck, wh * ww])?.col2im_window(win)?;
        add_channel_bias(OP, out, weight, bias, c_out)
    }
}
