//! More convolutions and pools, all composites: `conv1d` (conv2d with H = 1),
//! `conv_transpose2d` (a matmul and `col2im`, the adjoint of conv2d) and the adaptive pools.
//!
//! Dimension letters: N batch, C channels, H and W height and width, L length, O output
//! channels, G groups.

use crate::backend::Window2d;
use crate::error::{Error, Result};
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

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

/// Which reduction an adaptive pool applies within each bin.
#[derive(Clone, Copy)]
enum Pool {
    Avg,
    Max,
}

impl Tensor {
    /// 1-D convolution (cross-correlation, as `torch.nn.functional.conv1d`), run as a conv2d
    /// over a height of 1.
    ///
    /// # Shapes
    /// - `self`: `[N, C, L]`
    /// - `weight`: `[O, C/groups, k]`, `bias`: `[O]`
    /// - result: `[N, O, L_out]`, `L_out = (L + 2*padding - dilation*(k-1) - 1) / stride + 1`
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, stride: usize, padding: usize, dilation: usize, groups: usize) -> Result<Tensor> {
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias])? {
            return x.conv1d(&w, b.as_ref(), stride, padding, dilation, groups);
        }
        check_float("conv1d", self)?;
        check_same_dtype("conv1d", self, weight)?;
        check_same_device("conv1d", self, weight)?;
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.len() != 3 || ws.len() != 3 {
            return Err(Error::shape("conv1d", xs, ws, "must be a 3-D [N, C, L] input and a 3-D [O, C/groups, k] weight"));
        }
        if groups == 0 || xs[1] % groups != 0 || ws[0] % groups != 0 || xs[1] / groups != ws[1] {
            return Err(Error::shape(
                "conv1d",
                xs,
                ws,
                format!("disagree on channels: input has {} channels, weight expects {} per group x {groups} groups", xs[1], ws[1]),
            ));
        }
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
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias])? {
            return x.conv_transpose2d(&w, b.as_ref(), stride, padding, output_padding, dilation, groups);
        }
        const OP: &str = "conv_transpose2d";
        check_float(OP, self)?;
        check_same_dtype(OP, self, weight)?;
        check_same_device(OP, self, weight)?;
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.len() != 4 || ws.len() != 4 {
            return Err(Error::shape(OP, xs, ws, "must be a 4-D [N, C_in, H, W] input and a 4-D [C_in, C_out/groups, kh, kw] weight"));
        }
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
