//! The backward rule of every recorded op, each written once from tensor ops.
//!
//! `backward(g, inputs, out)` receives the gradient of the op's output, the op's inputs and its
//! output (detached), and returns one gradient per input (`None` where none is needed). Rules
//! run with grad mode off.
//!
//! The same value names the op and its attributes for observers ([`crate::observe`]): what a
//! tracer such as `liandan-nn`'s ONNX exporter reads to rebuild the forward pass. A few
//! variants (comparisons, arg-extrema, `detach`) are only ever seen there: their ops have no
//! gradient and record no node.

use std::sync::Arc;

use crate::backend::{BinaryOp, CmpOp, ConvGeometry, UnaryOp, Window2d};
use crate::custom::CustomOp;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::fused::LayerNormOptions;
use crate::tensor::{BackwardRule, Tensor};

/// An op as autograd records it: which op, with the attributes its backward rule needs (and
/// that an observer needs to redo it). Inputs are not part of it; an observer gets them beside
/// it ([`crate::observe::OpRecord`]), except the index and condition tensors held here.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum GradFn {
    /// The gradient passes through unchanged (`contiguous`).
    Identity,
    ToDevice {
        from: Device,
    },
    Cast {
        from: DType,
    },
    Reshape {
        from: Vec<usize>,
    },
    Permute {
        perm: Vec<usize>,
    },
    Narrow {
        dim: usize,
        start: usize,
        full: usize,
    },
    Expand {
        from: Vec<usize>,
    },
    Unary(UnaryOp),
    Binary(BinaryOp),
    Select {
        cond: Tensor,
    },
    Sum {
        from: Vec<usize>,
    },
    Extremum {
        dim: usize,
        max: bool,
    },
    Matmul,
    Im2col(Window2d),
    Col2im(Window2d),
    MaxPool2d {
        window: Window2d,
        indices: Tensor,
    },
    AvgPool2d {
        window: Window2d,
        count_include_pad: bool,
    },
    AvgPool2dBackward {
        window: Window2d,
        count_include_pad: bool,
    },
    Gather {
        dim: usize,
        index: Tensor,
    },
    ScatterAdd {
        dim: usize,
        index: Tensor,
    },
    IndexSelect {
        dim: usize,
        index: Tensor,
    },
    Cat {
        dim: usize,
        sizes: Vec<usize>,
    },
    /// ReLU's rule on its output: the gradient passes where `y > 0` (0 at the kink, as PyTorch).
    Relu,
    /// `relu(a + b)`'s: ReLU's, the same for both operands.
    AddRelu,
    Sigmoid,
    Tanh,
    Softmax {
        dim: usize,
    },
    LogSoftmax {
        dim: usize,
    },
    Softplus,
    /// The LSTM cell's rule (`Tensor::lstm_cell`, fused or composite): inputs `gates`, `c`,
    /// then the second gate term of `lstm_cell_sum`; output `[2, N, H]`.
    LstmCell,
    /// The fused training batch norm's rule: inputs `x`, then `weight` and `bias` where given;
    /// the batch statistics saved by the forward, `[C]`; whether a ReLU followed inside it.
    BatchNorm {
        mean: Tensor,
        invstd: Tensor,
        relu: bool,
    },
    /// The fused layer norm; inputs `x`, then the weight and the bias that were given.
    LayerNorm {
        options: LayerNormOptions,
        mean: Tensor,
        rstd: Tensor,
    },
    /// `conv2d`, fused or composite: inputs `x`, `weight`, and the bias `[O]` where the
    /// device added it in the same kernel (`ops::Conv2dBias`).
    Conv2d(ConvGeometry),
    /// A custom op's own rule ([`Tensor::custom`]), over its inputs; `aux` holds its outputs
    /// after the first (what its backward reads beside the inputs).
    Custom {
        op: Arc<dyn CustomOp>,
        aux: Vec<Tensor>,
    },
    /// An elementwise comparison of its two inputs, broadcasting; the result is bool. Seen by
    /// observers only.
    Compare(CmpOp),
    /// `argmax` (`max`) or `argmin` along `dim`, keeping it; the result is i64. Seen by
    /// observers only.
    ArgExtremum {
        dim: usize,
        max: bool,
    },
    /// `detach`: the same values, cut from the graph. Seen by observers only.
    Detach,
    /// A by-product of another op that nothing can redo on its own (max pooling's indices).
    /// Seen by observers only.
    Opaque(&'static str),
}

fn one(t: Tensor) -> Result<Vec<Option<Tensor>>> {
    Ok(vec![Some(t)])
}

impl GradFn {
    /// The op's name, for error messages and observers (`matmul`, `Add`, `conv2d`, a custom
    /// op's own name).
    pub fn name(&self) -> String {
        BackwardRule::name(self)
    }
}

impl BackwardRule for GradFn {
    fn name(&self) -> String {
        let name = match self {
            GradFn::Unary(op) => return format!("{op:?}"),
            GradFn::Binary(op) => return format!("{op:?}"),
            GradFn::Identity => "contiguous",
            GradFn::ToDevice { .. } => "to_device",
            GradFn::Cast { .. } => "to_dtype",
            GradFn::Reshape { .. } => "reshape",
            GradFn::Permute { .. } => "permute",
            GradFn::Narrow { .. } => "narrow",
            GradFn::Expand { .. } => "expand",
            GradFn::Select { .. } => "where",
            GradFn::Sum { .. } => "sum",
            GradFn::Extremum { .. } => "max/min",
            GradFn::Matmul => "matmul",
            GradFn::Im2col(_) => "im2col",
            GradFn::Col2im(_) => "col2im",
            GradFn::MaxPool2d { .. } => "max_pool2d",
            GradFn::AvgPool2d { .. } => "avg_pool2d",
            GradFn::AvgPool2dBackward { .. } => "avg_pool2d_backward",
            GradFn::Gather { .. } => "gather",
            GradFn::ScatterAdd { .. } => "scatter_add",
            GradFn::IndexSelect { .. } => "index_select",
            GradFn::Cat { .. } => "cat",
            GradFn::Relu => "relu",
            GradFn::AddRelu => "add_relu",
            GradFn::Sigmoid => "sigmoid",
            GradFn::Tanh => "tanh",
            GradFn::Softmax { .. } => "softmax",
            GradFn::LogSoftmax { .. } => "log_softmax",
            GradFn::Softplus => "softplus",
            GradFn::LstmCell => "lstm_cell",
            GradFn::Custom { op, .. } => op.name(),
            GradFn::BatchNorm { .. } => "batch_norm",
            GradFn::LayerNorm { .. } => "layer_norm",
            GradFn::Conv2d(_) => "conv2d",
            GradFn::Compare(op) => return format!("{op:?}").to_lowercase(),
            GradFn::ArgExtremum { max: true, .. } => "argmax",
            GradFn::ArgExtremum { max: false, .. } => "argmin",
            GradFn::Detach => "detach",
            GradFn::Opaque(name) => name,
        };
        name.to_string()
    }

    /// Whether the rule reads the values of input `i`, given which inputs require grad
    /// (`wants`). An input it does not read is kept in the graph without its storage (see
    /// `Node::new`), as PyTorch saves only what a backward formula uses: a ReLU's or an add's
    /// input is freed as soon as the forward no longer needs it.
    fn reads_input(&self, i: usize, wants: &[bool]) -> bool {
        let other = |j: usize| wants.get(j).copied().unwrap_or(false);
        match self {
            GradFn::Identity
            | GradFn::ToDevice { .. }
            | GradFn::Cast { .. }
            | GradFn::Reshape { .. }
            | GradFn::Permute { .. }
            | GradFn::Narrow { .. }
            | GradFn::Expand { .. }
            | GradFn::Select { .. }
            | GradFn::Sum { .. }
            | GradFn::Im2col(_)
            | GradFn::Col2im(_)
            | GradFn::MaxPool2d { .. }
            | GradFn::AvgPool2d { .. }
            | GradFn::AvgPool2dBackward { .. }
            | GradFn::Gather { .. }
            | GradFn::ScatterAdd { .. }
            | GradFn::IndexSelect { .. }
            | GradFn::Cat { .. }
            | GradFn::Relu
            | GradFn::AddRelu
            | GradFn::Sigmoid
            | GradFn::Tanh
            | GradFn::Softmax { .. }
            | GradFn::LogSoftmax { .. }
            | GradFn::Compare(_)
            | GradFn::ArgExtremum { .. }
            | GradFn::Detach
            | GradFn::Opaque(_) => false,
            GradFn::Unary(op) => matches!(op, UnaryOp::Abs | UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Erf),
            GradFn::Binary(op) => match op {
                BinaryOp::Add | BinaryOp::Sub => false,
                // Each operand's gradient is the other operand times `g`.
                BinaryOp::Mul => other(1 - i),
                // `g / b` and `-g y / b`: the divisor only.
                BinaryOp::Div => i == 1,
                BinaryOp::Pow | BinaryOp::Maximum | BinaryOp::Minimum => true,
            },
            GradFn::Matmul => other(1 - i),
            // x and the weight each for the other's gradient; the bias not at all.
            GradFn::Conv2d(_) => i < 2 && other(1 - i),
            GradFn::Extremum { .. } | GradFn::Softplus | GradFn::LstmCell => true,
            GradFn::Custom { op, .. } => op.reads_input(i),
            // `x` and the weight; the bias only by its shape, or to find where a ReLU cut.
            GradFn::BatchNorm { relu, .. } => i < 2 || *relu,
            GradFn::LayerNorm { .. } => i < 2,
        }
    }

    /// Whether the rule reads the op's own output, which must then stay alive while the graph does.
    fn reads_output(&self) -> bool {
        match self {
            GradFn::Unary(op) => matches!(op, UnaryOp::Exp | UnaryOp::Sqrt | UnaryOp::Recip),
            GradFn::Binary(op) => matches!(op, BinaryOp::Div | BinaryOp::Pow),
            GradFn::Relu | GradFn::AddRelu | GradFn::Sigmoid | GradFn::Tanh | GradFn::Softmax { .. } | GradFn::LogSoftmax { .. } | GradFn::LstmCell => true,
            GradFn::Custom { op, .. } => op.reads_output(),
            _ => false,
        }
    }

    fn backward(&self, g: &Tensor, inputs: &[Tensor], out: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let x = &inputs[0];
        match self {
            GradFn::Identity => one(g.clone()),
            GradFn::ToDevice { from } => one(g.to_device(from)?),
            GradFn::Cast { from } => one(g.to_dtype(*from)?),
            GradFn::Reshape { from } => one(g.reshape(from)?),
            GradFn::Permute { perm } => {
                let mut inv = vec![0; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inv[p] = i;
                }
                one(g.permute(&inv)?)
            }
            GradFn::Narrow { dim, start, full } => {
                let len = g.shape()[*dim];
                let mut parts = Vec::new();
                let pad = |n: usize| -> Result<Tensor> {
                    let mut s = g.shape().to_vec();
                    s[*dim] = n;
                    Tensor::zeros(&s, g.dtype(), g.device())
                };
                if *start > 0 {
                    parts.push(pad(*start)?);
                }
                parts.push(g.clone());
                if start + len < *full {
                    parts.push(pad(full - start - len)?);
                }
                let refs: Vec<&Tensor> = parts.iter().collect();
                one(Tensor::cat(&refs, *dim)?)
            }
            GradFn::Expand { from } => one(g.sum_to(from)?),
            GradFn::Unary(op) => one(unary_backward(*op, g, x, out)?),
            GradFn::Binary(op) => binary_backward(*op, g, x, &inputs[1], out),
            GradFn::Select { cond } => {
                let zero = g.scalar_like(0.0)?;
                let (a, b) = (&inputs[0], &inputs[1]);
                Ok(vec![Some(Tensor::where_cond(cond, g, &zero)?.sum_to(a.shape())?), Some(Tensor::where_cond(cond, &zero, g)?.sum_to(b.shape())?)])
            }
            GradFn::Sum { from } => one(g.expand(from)?),
            GradFn::Extremum { dim, max } => {
                let idx = if *max { x.argmax(*dim, true)? } else { x.argmin(*dim, true)? };
                one(x.zeros_like()?.scatter_add(*dim, &idx, g)?)
            }
            GradFn::Matmul => matmul_grads(g, &inputs[0], &inputs[1], true, wide_grad(&inputs[1]).is_some()),
            GradFn::Im2col(w) => one(g.col2im_window(*w)?),
            GradFn::Col2im(w) => one(g.im2col_window(*w)?),
            GradFn::MaxPool2d { window: w, indices } => one(Tensor::max_pool2d_backward(g, indices, *w)?),
            GradFn::AvgPool2d { window, count_include_pad } => one(g.avg_pool2d_backward_window(*window, *count_include_pad)?),
            GradFn::AvgPool2dBackward { window, count_include_pad } => one(g.avg_pool2d_window(*window, *count_include_pad)?),
            GradFn::Gather { dim, index } => one(x.zeros_like()?.scatter_add(*dim, index, g)?),
            GradFn::ScatterAdd { dim, index } => Ok(vec![Some(g.clone()), Some(g.gather(*dim, index)?)]),
            GradFn::IndexSelect { dim, index } => {
                let mut shape = vec![1; g.rank()];
                shape[*dim] = index.numel();
                let full = index.reshape(&shape)?.expand(g.shape())?.contiguous()?;
                one(x.zeros_like()?.scatter_add(*dim, &full, g)?)
            }
            GradFn::Cat { dim, sizes } => {
                let mut start = 0;
                let mut grads = Vec::with_capacity(sizes.len());
                for &s in sizes {
                    grads.push(Some(g.narrow(*dim, start, s)?));
                    start += s;
                }
                Ok(grads)
            }
            GradFn::Relu => one(Tensor::relu_backward(g, out)?),
            GradFn::AddRelu => {
                let g = Tensor::relu_backward(g, out)?;
                Ok(vec![Some(g.clone()), Some(g)])
            }
            GradFn::Sigmoid => one(g.mul(&out.mul(&out.neg()?.add_scalar(1.0)?)?)?),
            GradFn::Tanh => one(g.mul(&out.square()?.neg()?.add_scalar(1.0)?)?),
            GradFn::Softmax { dim } => one(Tensor::softmax_backward(g, out, *dim)?),
            GradFn::LogSoftmax { dim } => one(Tensor::log_softmax_backward(g, out, *dim)?),
            // d softplus(x) / dx = sigmoid(x), also at x = 0 (where the stable forward's
            // max(x, 0) and |x| have kinks whose one-sided rules would give 0).
            GradFn::Softplus => one(g.mul(&x.sigmoid()?)?),
            GradFn::LstmCell => Tensor::lstm_cell_backward(Some(&g.select(0usize, 0)?), Some(&g.select(0usize, 1)?), inputs, out),
            GradFn::BatchNorm { mean, invstd, relu } => {
                let affine = inputs.get(1).zip(inputs.get(2));
                let (dx, dweight, dbias) = Tensor::batch_norm_backward(g, x, mean, invstd, affine, *relu)?;
                Ok([Some(dx), dweight, dbias].into_iter().take(inputs.len()).collect())
            }
            GradFn::LayerNorm { options, mean, rstd } => Ok(layer_norm_grads(g, inputs, *options, (mean, rstd), None, None)?.0),
            GradFn::Conv2d(geom) => {
                let w = &inputs[1];
                let dx = if x.requires_grad() { Some(Tensor::conv2d_backward_input(g, w, *geom)?) } else { None };
                // Autocast's copy of an f32 weight takes its gradient in f32 where the kernel can sum it so.
                let wide = || wide_grad(w).and_then(|_| Tensor::conv2d_backward_weight_wide(g, x, *geom)).transpose();
                let dw = match w.requires_grad() {
                    true => Some(match wide()? {
                        Some(dw) => dw,
                        None => Tensor::conv2d_backward_weight(g, x, *geom)?,
                    }),
                    false => None,
                };
                let db = match inputs.get(2) {
                    // In f32 for autocast's copy of an f32 bias, as the weight's.
                    Some(b) if b.requires_grad() => Some(g.sum_channels(wide_grad(b).is_some())?),
                    Some(_) => None,
                    None => return Ok(vec![dx, dw]),
                };
                Ok(vec![dx, dw, db])
            }
            GradFn::Custom { op, aux } => {
                let outputs: Vec<Tensor> = std::iter::once(out.clone()).chain(aux.iter().cloned()).collect();
                op.backward(g, inputs, &outputs)
            }
            GradFn::Compare(_) | GradFn::ArgExtremum { .. } | GradFn::Detach | GradFn::Opaque(_) => {
                Err(crate::error::Error::Autograd(format!("{} has no gradient and records no node", self.name())))
            }
        }
    }
}

/// The gradients of `a @ b` from `g`; `b`'s only when `want_b` (the engine may gather it
/// over several products, `products.rs`).
pub(crate) fn matmul_grads(g: &Tensor, a: &Tensor, b: &Tensor, want_b: bool, wide_b: bool) -> Result<Vec<Option<Tensor>>> {
    // A transposed operand (`linear`'s `weight.t()`) gets its gradient as the transpose of a
    // row-major product, so the transpose's own rule hands the weight a row-major gradient:
    // no strided copy into `.grad`, and an LSTM's per-step weight gradients add as plain
    // buffers. An operand whose gradient may be kept in f32 ([`wide_grad`]: `a`'s read here,
    // `b`'s by the caller) gets it summed into f32 where the device can.
    let ga = match a.requires_grad() {
        false => None,
        true => match wide_grad(a).and_then(|_| product_a(g, a, b)) {
            Some(ga) => Some(ga?),
            None if transposed_matrix(a) && same_batch(a, b) => Some(b.matmul(&g.t()?)?.t()?),
            None => Some(g.matmul(&b.t()?)?.sum_to(a.shape())?),
        },
    };
    let gb = match want_b && b.requires_grad() {
        false => None,
        true => match wide_b.then(|| product_b(g, a, b)).flatten() {
            Some(gb) => Some(gb?),
            None if transposed_matrix(b) && same_batch(a, b) => Some(g.t()?.matmul(a)?.t()?),
            None => Some(a.t()?.matmul(g)?.sum_to(b.shape())?),
        },
    };
    Ok(vec![ga, gb])
}

fn unary_backward(op: UnaryOp, g: &Tensor, x: &Tensor, y: &Tensor) -> Result<Tensor> {
    match op {
        UnaryOp::Neg => g.neg(),
        UnaryOp::Abs => g.mul(&x.sign()?),
        // Piecewise constant: zero gradient almost everywhere, as PyTorch.
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => g.zeros_like(),
        UnaryOp::Exp => g.mul(y),
        UnaryOp::Log => g.div(x),
        UnaryOp::Sqrt => g.div(&y.mul_scalar(2.0)?),
        UnaryOp::Recip => g.mul(&y.square()?)?.neg(),
        UnaryOp::Sin => g.mul(&x.cos()?),
        UnaryOp::Cos => g.mul(&x.sin()?)?.neg(),
        UnaryOp::Erf => g.mul(&x.square()?.neg()?.exp()?.mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)?),
    }
}

fn binary_backward(op: BinaryOp, g: &Tensor, a: &Tensor, b: &Tensor, y: &Tensor) -> Result<Vec<Option<Tensor>>> {
    // Only the gradients wanted are computed: an operand `reads_input` let go may be read by
    // the other operand's gradient alone (`x * mask` keeps `mask`, not `x`).
    let (want_a, want_b) = (a.requires_grad(), b.requires_grad());
    let (ga, gb) = match op {
        BinaryOp::Add => (want_a.then(|| Ok(g.clone())), want_b.then(|| Ok(g.clone()))),
        BinaryOp::Sub => (want_a.then(|| Ok(g.clone())), want_b.then(|| g.neg())),
        BinaryOp::Mul => (want_a.then(|| g.mul(b)), want_b.then(|| g.mul(a))),
        BinaryOp::Div => (want_a.then(|| g.div(b)), want_b.then(|| g.mul(y)?.div(b)?.neg())),
        BinaryOp::Pow => {
            let ga = want_a.then(|| g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?));
            // d/db a^b = a^b log a; where a <= 0 the log is undefined and PyTorch's convention
            // (zero where the base is zero) keeps it finite.
            let gb = want_b.then(|| {
                let positive = a.gt_scalar(0.0)?;
                let safe_log = Tensor::where_cond(&positive, &a.log()?, &a.scalar_like(0.0)?)?;
                g.mul(y)?.mul(&safe_log)
            });
            (ga, gb)
        }
        BinaryOp::Maximum | BinaryOp::Minimum => {
            let a_wins = if op == BinaryOp::Maximum { a.ge(b)? } else { a.le(b)? };
            let zero = g.scalar_like(0.0)?;
            (want_a.then(|| Tensor::where_cond(&a_wins, g, &zero)), want_b.then(|| Tensor::where_cond(&a_wins, &zero, g)))
        }
    };
    let ga = ga.map(|t| sum_to_input(t?, a)).transpose()?;
    let gb = gb.map(|t| sum_to_input(t?, b)).transpose()?;
    Ok(vec![ga, gb])
}

/// `g` summed down to `input`'s shape (undoing a broadcast); in f32 where `input` may keep an
/// f32 gradient (autocast's copy of an f32 bias, [`wide_grad`]) and the device sums low rows into
/// f32 ([`crate::ops::SumRowsWide`]), so the cast back is nothing.
fn sum_to_input(g: Tensor, input: &Tensor) -> Result<Tensor> {
    let rows = input.rank() == 1 && g.rank() >= 2 && g.shape().last() == input.shape().last();
    if rows && wide_grad(input).is_some() {
        if let Some(sum) = g.sum_rows_wide() {
            return sum;
        }
    }
    g.sum_to(input.shape())
}

/// A linear layer's gradients at its bias add, `y = p + b` with `p = x w^T` (`Tensor::linear`,
/// or a product and an add written out) and `p` used by nothing else: `g` for `p`, and the
/// bias's and `w^T`'s in f32 from one kernel ([`Tensor::linear_grads`], which sums the bias's
/// rows from the slices of `g^T` it fetches for `g^T x`), where both are autocast's copies of
/// f32 parameters ([`wide_grad`]). `None` for any other add, or where the device has no such
/// kernel.
pub(crate) fn linear_grads(g: &Tensor, inputs: &[Tensor]) -> Option<Result<LinearShare>> {
    let [product, bias] = inputs else { return None };
    // The cheap test first: most adds of a step are not autocast's bias adds.
    if bias.rank() != 1 || wide_grad(bias).is_none() {
        return None;
    }
    let (rule, operands) = product.node()?.peek()?;
    let [x, weight_t] = operands.as_slice() else { return None };
    let matmul = matches!((&*rule as &dyn std::any::Any).downcast_ref::<GradFn>()?, GradFn::Matmul);
    let shaped = g.rank() == 2 && x.rank() == 2 && bias.rank() == 1 && g.shape() == product.shape() && bias.shape()[0] == g.shape()[1];
    let wanted = bias.requires_grad() && weight_t.requires_grad() && transposed_matrix(weight_t);
    let same = [x, bias, weight_t].iter().all(|t| t.dtype() == g.dtype());
    // Only autocast's gradients of f32 parameters, both kept in f32, have a kernel (the tensor
    // cores'); f32's product, summing the rows in its inner loop, was slower than the two apart.
    let wide = wide_grad(bias).is_some() && wide_grad(weight_t).is_some();
    if !(matmul && shaped && wanted && same && wide) {
        return None;
    }
    Some(
        Tensor::linear_grads(g, x, true)?
            .and_then(|(dw, db)| Ok(LinearShare { grads: vec![Some(g.clone()), Some(db)], weight_t: weight_t.clone(), dweight_t: dw.t()? })),
    )
}

/// What [`linear_grads`] gives: the add's own gradients (the product's, the bias's), and the
/// gradient of the product's right-hand operand.
pub(crate) struct LinearShare {
    pub grads: Vec<Option<Tensor>>,
    pub weight_t: Tensor,
    pub dweight_t: Tensor,
}

/// Whether `t`'s matrices (its last two axes) are stored column by column: the transpose of
/// row-major ones.
pub(crate) fn transposed_matrix(t: &Tensor) -> bool {
    let (shape, strides) = (t.shape(), t.layout().strides());
    let r = shape.len();
    r >= 2 && shape[r - 2] > 1 && shape[r - 1] > 1 && strides[r - 2] == 1 && strides[r - 1] == shape[r - 2]
}

/// Whether a product's operands have the same batch axes, so neither gradient is summed over
/// a broadcast.
fn same_batch(a: &Tensor, b: &Tensor) -> bool {
    let (sa, sb) = (a.shape(), b.shape());
    sa.len() == sb.len() && sa[..sa.len() - 2] == sb[..sb.len() - 2]
}

// Gradients of autocast's low-precision copies of f32 tensors, kept in f32.
//
// Under autocast a parameter (or an f32 activation) is used through its cast to f16 or bf16,
// and the cast's rule casts the gradient back to f32. Where the op that computes that gradient
// can write f32 itself (a product of low operands summed in f32, `ops::MatmulWide`; a bias's
// sum over rows, `ops::SumRowsWide`, or a convolution's over all but its channels,
// `ops::SumChannels`), the rules have it do so: the gradient reaches the cast
// already in f32, the cast's rule has nothing left to do, and a kernel per such tensor and step
// is saved (the sum is not rounded to the low type on the way either).

/// A layer norm's gradients (`GradFn::LayerNorm`'s rule): `dx`, or with `acc` (a gradient of
/// `x` gathered already) `acc + dx`, then the parameters'; and with `acc` and `low`, that sum
/// cast to `low` too (see [`low_residual`]).
pub(crate) fn layer_norm_grads(
    g: &Tensor,
    inputs: &[Tensor],
    options: LayerNormOptions,
    (mean, rstd): (&Tensor, &Tensor),
    acc: Option<&Tensor>,
    low: Option<DType>,
) -> Result<(Vec<Option<Tensor>>, Option<Tensor>)> {
    let (x, weight) = (&inputs[0], options.weight.then(|| &inputs[1]));
    let ((dx, dweight, dbias), dx_low) = Tensor::layer_norm_backward(g, x, mean, rstd, weight, options, acc.map(|acc| (acc, low)))?;
    // The kernel's `[D]` gradients, in the parameters' own (normalized axes') shape.
    let params = dweight.into_iter().chain(dbias).zip(&inputs[1..]).map(|(d, p)| d.reshape(p.shape()).map(Some));
    Ok((std::iter::once(Ok(Some(dx))).chain(params).collect::<Result<_>>()?, dx_low))
}

/// The low dtype `x`'s whole gradient will be cast to, where `x` is autocast's residual sum of
/// an f32 tensor and a low one (`ops::AddWide`, recorded as an add of the low operand's cast):
/// the add hands its gradient on to that cast, whose rule casts it back.
pub(crate) fn low_residual(x: &Tensor) -> Option<DType> {
    let (rule, inputs) = x.node()?.peek()?;
    if !matches!((&*rule as &dyn std::any::Any).downcast_ref::<GradFn>()?, GradFn::Binary(BinaryOp::Add)) {
        return None;
    }
    inputs.iter().find_map(|i| {
        let (rule, _) = i.node()?.peek()?;
        match (&*rule as &dyn std::any::Any).downcast_ref::<GradFn>()? {
            GradFn::Cast { from: DType::F16 } if i.dtype() == DType::F32 => Some(DType::F16),
            _ => None,
        }
    })
}

/// The wider dtype `t`'s gradient may be kept in: f32 where `t` is an f16 or bf16 cast of an f32
/// tensor that wants a gradient, or a transpose or reshape of one (a linear layer's
/// `weight.t()`, a folded input), whose rules only move the gradient; `None` otherwise.
pub(crate) fn wide_grad(t: &Tensor) -> Option<DType> {
    if !matches!(t.dtype(), DType::F16 | DType::BF16) {
        return None;
    }
    let node = t.node()?;
    let (rule, inputs) = node.peek()?;
    let source = inputs.first()?;
    match (&*rule as &dyn std::any::Any).downcast_ref::<GradFn>()? {
        GradFn::Cast { from: DType::F32 } if source.requires_grad() => Some(DType::F32),
        GradFn::Permute { .. } | GradFn::Reshape { .. } if source.dtype() == t.dtype() => wide_grad(source),
        _ => None,
    }
}

/// `a + b`, where one may be the other's wider type: the narrower is widened first.
pub(crate) fn add_wide(a: Tensor, b: Tensor) -> Result<Tensor> {
    match (a.dtype(), b.dtype()) {
        (x, y) if x == y => a.add(&b),
        (DType::F32, _) => a.add(&b.to_dtype(DType::F32)?),
        _ => a.to_dtype(b.dtype())?.add(&b),
    }
}

/// The gradient of `a` in `a @ b`, `g b^T`, summed into f32 from low matrices where the device
/// can ([`crate::ops::MatmulWide`]); row-major, or the transpose of a row-major product where `a`
/// is a transposed matrix, as the plain rule gives it. `None` for batched operands or where the
/// device has no kernel.
pub(crate) fn product_a(g: &Tensor, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
    wide_product(g, &b.t().ok()?, [g, a, b], transposed_matrix(a))
}

/// The gradient of `b` in `a @ b`, `a^T g`, as [`product_a`] gives `a`'s.
pub(crate) fn product_b(g: &Tensor, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
    wide_product(&a.t().ok()?, g, [g, a, b], transposed_matrix(b))
}

/// `l @ r` in f32, or with `transposed` the transpose of the row-major `r^T @ l^T`; `None` unless
/// every one of `matrices` is a matrix and the device has the kernel.
fn wide_product(l: &Tensor, r: &Tensor, matrices: [&Tensor; 3], transposed: bool) -> Option<Result<Tensor>> {
    if matrices.iter().any(|t| t.rank() != 2) {
        return None;
    }
    match transposed {
        true => Some(r.t().ok()?.matmul_wide(&l.t().ok()?)?.and_then(|p| p.t())),
        false => l.matmul_wide(r),
    }
}
