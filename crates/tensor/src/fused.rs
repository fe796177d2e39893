//! Fused kernels: the one place where a backend may run a composite as a single kernel.
//!
//! A fused op is an optional, faster route to a composite that already exists in `ops/`,
//! never the only definition. The composite asks its device first, through
//! [`Backend::fused`](crate::Backend::fused) with a [`FusedOp`] naming what to compute; a
//! backend without a kernel for it answers `None` (the default) and the composite runs its
//! primitives. So the composite is both the fallback and the oracle: the conformance suite
//! runs every fused op with fusion on and off on the same device and compares outputs and
//! gradients (`conformance::fused`).
//!
//! Backward: a fused forward records one backward rule, written once in this crate with
//! tensor ops like every other rule (`GradFn` in `autograd/grad_fn.rs`). Where that rule's own
//! arithmetic is worth a kernel, it is itself a fused op of the same kind
//! ([`FusedOp::LstmCellBackward`]), asked for and checked in the same way. A backend therefore
//! never writes autograd code: it may override the forward, the backward, both, or neither.
//!
//! Update ops ([`FusedOp::AdamStep`], [`FusedOp::SgdStep`], [`FusedOp::RmsPropStep`],
//! [`FusedOp::AdagradStep`], [`FusedOp::AdadeltaStep`], and the loss scaler's
//! [`FusedOp::Scale`]): an optimizer's per-parameter step, which changes its operands rather
//! than making new values. Their kernels keep the
//! contract above (outputs are fresh buffers, holding the new contents of the inputs that
//! [`FusedOp::updates`] names), and [`update`] swaps each into its tensor's storage, as
//! [`Tensor::assign`] does. The old buffers go back to the allocator as soon as the swap
//! drops them, so a step over many parameters holds one parameter's worth of extra state at
//! a time (up to [`FOREACH_LISTS`] parameters' worth with [`update_foreach`]) and memory stays
//! flat; a kernel never writes into a buffer that a view taken
//! earlier, or a tensor saved for backward, still reads. Hyper-parameters that change per
//! step (the lr a scheduler sets, the bias corrections of the host-side step count) travel
//! in the op's value, which a GPU backend passes in its per-dispatch parameter block: no
//! read-back and no new pipeline per value.
//!
//! Many updates at once ([`update_foreach`], [`Backend::fused_foreach`](crate::Backend::fused_foreach)):
//! an optimizer step runs one update op per parameter tensor, and on a GPU each is a dispatch
//! whose launch costs more than its work for all but the largest tensors. A backend may run
//! the whole list of a parameter group's updates in a few dispatches instead (PyTorch's
//! "foreach" optimizers); the per-tensor updates stay its default and its oracle, and its
//! results are the per-tensor kernels' bit for bit (`conformance::fused_foreach`).
//!
//! `LIANDAN_FUSION=0` (read once, at the first fused op) turns every fused kernel off, so a
//! wrong result can be bisected to the fusion; [`no_fusion`] does the same for one thread.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use crate::backend::{Storage, Strided, Window2d};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A composite a backend may run as one kernel. Each variant says what it computes, its
/// inputs (all contiguous, though possibly at an offset into their buffer, of one float dtype,
/// in the order listed) and its outputs (fresh contiguous buffers of that dtype, in order).
/// The one exception is batch normalization under autocast (see [`FusedOp::BatchNormTrain`]):
/// activations of a low type with f32 parameters and statistics ([`FusedOp::mixes_dtypes`]).
/// New variants are added as new composites gain kernels, so backends match with a `_ => None`
/// arm.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FusedOp {
    /// The pointwise part of an LSTM step ([`Tensor::lstm_cell`]), with the gates in
    /// PyTorch's order i, f, g, o:
    ///
    /// ```text
    /// i, f, g, o = σ(gates[:, 0:H]), σ(gates[:, H:2H]), tanh(gates[:, 2H:3H]), σ(gates[:, 3H:4H])
    /// c' = f * c + i * g
    /// h' = o * tanh(c')
    /// ```
    ///
    /// Inputs: `gates` `[N, 4H]` (pre-activation), `c` `[N, H]`, and for
    /// [`Tensor::lstm_cell_sum`] a third, a second `[N, 4H]` term of the gates: the kernel
    /// reads `gates + term`, rounded to the dtype as the add's kernel would round it. Output:
    /// one `[2, N, H]` buffer holding `h'` then `c'`.
    LstmCell,
    /// The gradient of [`FusedOp::LstmCell`]. Inputs: `gates` `[N, 4H]`, `c` `[N, H]`, the
    /// forward's output `[2, N, H]` (`h'`, `c'`), the gradients `dh'` and `dc'` (`[N, H]`
    /// each), then the forward's second gate term where it had one. Outputs: `dgates` `[N,
    /// 4H]` (the gradient of either gate term) and `dc` `[N, H]`.
    LstmCellBackward,
    /// An LSTM step with its recurrent product ([`Tensor::lstm_step`]): `h_gates = h
    /// W_hh^T`, then [`FusedOp::LstmCell`] of the gates `x_gates + h_gates`. Inputs: `x_gates`
    /// `[N, 4H]`, `h` `[N, H]`, `w_hh` `[4H, H]` (the weight as stored, not transposed), `c`
    /// `[N, H]`. Outputs: `h_gates` `[N, 4H]`, then one `[2, N, H]` buffer holding `h'` then
    /// `c'`. Its gradients are the product's and the cell's ([`Tensor::lstm_step`] records
    /// both, as the composite does).
    LstmStep,
    /// The pointwise part of a GRU step ([`Tensor::gru_cell`]), gates in PyTorch's order r, z,
    /// n:
    ///
    /// ```text
    /// r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r * h_n),  h' = n + z * (h - n)
    /// ```
    ///
    /// Inputs: `x_gates` `[N, 3H]` (`x W_ih^T + b_ih`), `h_gates` `[N, 3H]` (`h W_hh^T + b_hh`),
    /// `h` `[N, H]`. Output: `h'` `[N, H]`.
    GruCell,
    /// The gradient of [`FusedOp::GruCell`]. Inputs: `x_gates`, `h_gates`, `h` and the gradient
    /// of `h'` (`[N, H]`). Outputs: the gradients of `x_gates` `[N, 3H]`, `h_gates` `[N, 3H]`
    /// and `h` `[N, H]` (the last only through `h' = ... + z * h`).
    GruCellBackward,
    /// ReLU ([`Tensor::relu`]), `y = x > 0 ? x : 0` elementwise (so NaN gives 0, as the
    /// composite's select does). Input: `x`. Output: `y`, shaped like `x`.
    Relu,
    /// The gradient of [`FusedOp::Relu`] read from its output: `dx = y > 0 ? dy : 0`. Inputs:
    /// `y`, `dy` (one shape). Output: `dx`.
    ReluBackward,
    /// Exact GELU ([`Tensor::gelu`]), `y = 0.5 x (1 + erf(x / sqrt 2))`, elementwise. Input:
    /// `x`. Output: `y`, shaped like `x`.
    Gelu,
    /// The gradient of [`FusedOp::Gelu`], `dx = dy (Phi(x) + x phi(x))` with `Phi` the normal
    /// CDF and `phi` its density. Inputs: `x`, `dy` (one shape). Output: `dx`.
    GeluBackward,
    /// Softmax along the last axis ([`Tensor::softmax`] with `dim` the last), each row shifted
    /// by its maximum: `y = exp(x - max(x)) / sum(exp(x - max(x)))`. Input: `x`. Output: `y`,
    /// shaped like `x`.
    SoftmaxLastDim,
    /// The gradient of [`FusedOp::SoftmaxLastDim`], `dx = y (dy - sum(dy y))` with the sum
    /// along the last axis. Inputs: `y`, `dy` (one shape). Output: `dx`.
    SoftmaxLastDimBackward,
    /// Binary cross-entropy of probabilities, elementwise ([`Tensor::bce_loss`] before its
    /// reduction): `l = -(y log_(p) + (1 - y) log_(1 - p))` where `log_(x)` is `max(ln x, -100)`
    /// for `x > 0` and -100 otherwise. Inputs: `p`, `y` (one shape). Output: `l`.
    BceLoss,
    /// The gradient of [`FusedOp::BceLoss`] with respect to `p`: `dp = g (-(y log_'(p)) +
    /// (1 - y) log_'(1 - p))`, `log_'(x)` being `1 / x` where `x > 0` and `ln x >= -100`, else 0
    /// (as the composite's `maximum` gives ties to its first operand). Inputs: `p`, `y`, `g` (one
    /// shape). Output: `dp`.
    BceLossBackward,
    /// One `torch.optim.Adam` / `AdamW` step of one parameter tensor (an update op: see the
    /// module docs). Inputs: `param`, `grad`, `exp_avg`, `exp_avg_sq`, then `max_exp_avg_sq`
    /// with `amsgrad`, all of one shape. Outputs: the new `param`, `exp_avg`, `exp_avg_sq`
    /// (and `max_exp_avg_sq`), computed in the order of the composite (`liandan-train`'s
    /// `AdamConfig::update`, its oracle):
    ///
    /// ```text
    /// g = maximize ? -grad : grad
    /// p = decoupled ? param * (1 - lr wd) : param;  g = decoupled ? g : g + param wd
    /// exp_avg' = lerp(exp_avg, g, 1 - beta1);  exp_avg_sq' = exp_avg_sq beta2 + g (1 - beta2) g
    /// second = amsgrad ? max(max_exp_avg_sq, exp_avg_sq') : exp_avg_sq'
    /// param' = p + exp_avg' / (sqrt(second) / sqrt(1 - beta2^step) + eps) * -(lr / (1 - beta1^step))
    /// ```
    AdamStep(AdamStep),
    /// One `torch.optim.SGD` step of one parameter tensor (an update op). Inputs: `param`,
    /// `grad`, then `momentum_buffer` when `momentum != 0` (on the `first` step its contents
    /// are not read: the buffer starts at the gradient, as in PyTorch). Outputs: the new
    /// `param`, then the new `momentum_buffer`. The composite is `SgdConfig::update`:
    ///
    /// ```text
    /// g = (maximize ? -grad : grad) + param wd
    /// buf' = first ? g : buf momentum + g (1 - dampening)
    /// param' = param - (nesterov ? g + buf' momentum : buf') lr      (momentum != 0)
    /// param' = param - g lr                                          (momentum == 0)
    /// ```
    SgdStep(SgdStep),
    /// One `torch.optim.RMSprop` step of one parameter tensor (an update op). Inputs: `param`,
    /// `grad`, `square_avg`, then `momentum_buffer` when `momentum > 0`, then `grad_avg` when
    /// `centered`. Outputs: the new `param`, `square_avg` (and `momentum_buffer`, `grad_avg`).
    /// The composite is `RmsPropConfig::update`:
    ///
    /// ```text
    /// g = (maximize ? -grad : grad) + param wd
    /// square_avg' = square_avg alpha + g (1 - alpha) g
    /// grad_avg' = lerp(grad_avg, g, 1 - alpha)                           (centered)
    /// avg = sqrt(centered ? square_avg' - grad_avg'^2 : square_avg') + eps
    /// buf' = buf momentum + g / avg;  param' = param - buf' lr          (momentum > 0)
    /// param' = param - g / avg lr                                        (momentum == 0)
    /// ```
    RmsPropStep(RmsPropStep),
    /// One `torch.optim.Adagrad` step of one parameter tensor (an update op). Inputs: `param`,
    /// `grad`, `sum`. Outputs: the new `param` and `sum`. The composite is
    /// `AdagradConfig::update`:
    ///
    /// ```text
    /// g = (maximize ? -grad : grad) + param wd
    /// sum' = sum + g g
    /// param' = param - g / (sqrt(sum') + eps) lr / (1 + (step - 1) lr_decay)
    /// ```
    AdagradStep(AdagradStep),
    /// One `torch.optim.Adadelta` step of one parameter tensor (an update op). Inputs: `param`,
    /// `grad`, `square_avg`, `acc_delta`. Outputs: the new `param`, `square_avg`, `acc_delta`.
    /// The composite is `AdadeltaConfig::update`:
    ///
    /// ```text
    /// g = (maximize ? -grad : grad) + param wd
    /// square_avg' = square_avg rho + g (1 - rho) g
    /// delta = sqrt(acc_delta + eps) / sqrt(square_avg' + eps) g
    /// acc_delta' = acc_delta rho + delta (1 - rho) delta
    /// param' = param - delta lr
    /// ```
    AdadeltaStep(AdadeltaStep),
    /// `x * factor` written over `x` (an update op): the loss scaler's division of every
    /// gradient by the scale, which [`update_foreach`] runs over all of them in a few launches
    /// where a multiply each was one launch each (PyTorch's `_foreach_mul_`). Input: `x`.
    /// Output: its new values, computed as [`Tensor::mul_scalar`] computes them (the factor
    /// rounded to `x`'s dtype, the product in f32, rounded to the dtype), its oracle.
    Scale(f64),
    /// Batch normalization in training ([`Tensor::batch_norm`] with `training`) of `x` viewed
    /// as `[N, C, L]` (`L` the product of the axes after 1, or 1 for `[N, C]`), with `M = N L`:
    ///
    /// ```text
    /// mean = sum(x[:, c, :]) / M;  var = sum((x[:, c, :] - mean)^2) / M;  invstd = 1 / sqrt(var + eps)
    /// y = (x - mean) invstd weight + bias
    /// running_mean' = (1 - momentum) running_mean + momentum mean
    /// running_var'  = (1 - momentum) running_var + momentum var M / (M - 1)
    /// ```
    ///
    /// Statistics are accumulated in f32 or wider, whatever the dtype. Inputs: `x` `[N, C, ...]` with
    /// `M > 1`, then `weight`, `bias` `[C]` (when `affine`), then `running_mean`,
    /// `running_var` `[C]` (when `running`). Outputs: `y` shaped like `x`, `mean` and
    /// `invstd` `[C]` (what the backward needs), then the new `running_mean`, `running_var`
    /// (when `running`; the composite assigns them).
    ///
    /// Mixed types: under autocast `x` may be f16 or bf16 with every `[C]` operand f32 (as
    /// cuDNN's batch norm under `torch.autocast`); then `y` has `x`'s type and `mean`,
    /// `invstd` and the running statistics are f32. A backend without that variant declines
    /// it (the composite then computes in f32 and rounds `y` to `x`'s type).
    BatchNormTrain(BatchNormOptions),
    /// The gradient of [`FusedOp::BatchNormTrain`] from its saved statistics, with
    /// `xhat = (x - mean) invstd`:
    ///
    /// ```text
    /// dbias = sum(dy);  dweight = sum(dy xhat)
    /// dx = weight invstd (dy - dbias / M - xhat dweight / M)
    /// ```
    ///
    /// per channel. Inputs: `x`, `dy` (one shape), `mean`, `invstd` `[C]`, then `weight`
    /// `[C]` (when `affine`, else `weight = 1`). Outputs: `dx`, then `dweight`, `dbias` `[C]`
    /// (when `affine`). `eps` and `momentum` are not read. Mixed types as the forward's:
    /// `x`, `dy` and `dx` of a low type, the `[C]` operands and outputs f32.
    BatchNormBackward(BatchNormOptions),
    /// Layer normalization ([`Tensor::layer_norm`]) of `x` viewed as `[R, D]`, `D = width` the
    /// product of the normalized axes, row by row:
    ///
    /// ```text
    /// mean = sum(x[r, :]) / D;  var = sum((x[r, :] - mean)^2) / D;  rstd = 1 / sqrt(var + eps)
    /// y = (x - mean) rstd weight + bias
    /// ```
    ///
    /// Statistics are accumulated in f32 or wider. Inputs: `x`, then `weight` (when `weight`),
    /// then `bias` (when `bias`), each `D` elements. Outputs: `y` shaped like `x`, then `mean`
    /// and `rstd` `[R]` (what the backward needs).
    LayerNorm(LayerNormOptions),
    /// The gradient of [`FusedOp::LayerNorm`] from its saved statistics, with
    /// `xhat = (x - mean) rstd` and `g = dy weight` (`g = dy` without a weight):
    ///
    /// ```text
    /// dx = rstd (g - sum(g) / D - xhat sum(g xhat) / D)      (sums along the row)
    /// dweight = sum over rows of dy xhat;  dbias = sum over rows of dy
    /// ```
    ///
    /// Inputs: `x`, `dy` (one shape), `mean`, `rstd` `[R]`, then `weight` (when `weight`).
    /// Outputs: `dx`, then `dweight` (when `weight`), then `dbias` (when `bias`), each `D`
    /// elements. `eps` is not read.
    LayerNormBackward(LayerNormOptions),
    /// A 2-D convolution ([`Tensor::conv2d`] without its bias), as PyTorch's cross-correlation:
    ///
    /// ```text
    /// y[n, o, oy, ox] = sum_{c, ky, kx} x[n, g C/G + c, oy s - p + ky d, ox s - p + kx d] w[o, c, ky, kx]
    /// ```
    ///
    /// with `g = o / (O/G)` and zeros outside the input (per axis: stride `s`, padding `p`,
    /// dilation `d`). Inputs: `x` `[N, C, H, W]`, `weight` `[O, C/G, kh, kw]`. Output: `y`
    /// `[N, O, out_h, out_w]`.
    Conv2d(ConvGeometry),
    /// A linear layer with its bias (`torch.addmm(bias, x, weight.t())`): `y = x weight^T +
    /// bias`, the bias added to every row as the product is stored. Inputs: `x` `[M, K]`,
    /// `weight` `[N, K]`, `bias` `[N]`. Output: `y` `[M, N]`. Its gradients are the product's
    /// and the bias addition's ([`Tensor::linear`] records both).
    MatmulBias,
    /// [`FusedOp::Conv2d`] with its bias added to every output channel (`y[n, o, ..] +=
    /// bias[o]`) as the result is stored, so the bias costs no pass of its own. Inputs: `x`,
    /// `weight`, `bias` `[O]`. Output: `y`. Its gradients are [`FusedOp::Conv2d`]'s and the sum
    /// of `dy` over everything but the channel.
    Conv2dBias(ConvGeometry),
    /// [`FusedOp::Conv2dBias`] followed by ReLU (`y = max(conv + bias, 0)`, NaN to 0 as
    /// [`FusedOp::Relu`]), applied as the result is stored ([`Tensor::conv2d_relu`]). Inputs:
    /// `x`, `weight`, `bias` `[O]`. Output: `y`. Its gradients are ReLU's read from `y`, then
    /// [`FusedOp::Conv2dBias`]'s.
    Conv2dBiasRelu(ConvGeometry),
    /// The gradient of [`FusedOp::Conv2d`] with respect to its input (a transposed
    /// convolution of `dy`). Inputs: `dy` `[N, O, out_h, out_w]`, `weight`. Output: `dx`
    /// `[N, C, H, W]`.
    Conv2dBackwardInput(ConvGeometry),
    /// The gradient of [`FusedOp::Conv2d`] with respect to its weight, summed over the batch:
    /// `dw[o, c, ky, kx] = sum_{n, oy, ox} dy[n, o, oy, ox] x[n, g C/G + c, ..]`. Inputs: `dy`,
    /// `x`. Output: `dweight` `[O, C/G, kh, kw]`.
    Conv2dBackwardWeight(ConvGeometry),
    /// The gradient of max pooling ([`Tensor::max_pool2d`]) from the indices its forward
    /// returned: `dx[n, c, i] = sum of dy[n, c, y, x] over the windows (y, x) whose index is
    /// i` (the composite scatters dy into zeros). Inputs: `dy` `[N, C, out_h, out_w]`, the
    /// indices (i64 offsets `h W + w` in each plane, -1 for a window wholly in the padding),
    /// shaped like `dy`. Output: `dx` `[N, C, H, W]`, of `dy`'s type.
    MaxPool2dBackward(Window2d),
}

/// The options of a fused batch normalization ([`FusedOp::BatchNormTrain`],
/// [`FusedOp::BatchNormBackward`]), as `torch.nn.functional.batch_norm` names them; `affine`:
/// `weight` and `bias` are given; `running`: `running_mean` and `running_var` are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchNormOptions {
    pub eps: f64,
    pub momentum: f64,
    pub affine: bool,
    pub running: bool,
}

/// What one [`FusedOp::LayerNorm`] (and [`FusedOp::LayerNormBackward`]) normalizes: rows of
/// `width` elements, `eps` as `torch.nn.functional.layer_norm` names it, and which of `weight`
/// and `bias` are given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerNormOptions {
    pub width: usize,
    pub eps: f64,
    pub weight: bool,
    pub bias: bool,
}

/// The shape of one 2-D convolution and its gradients ([`FusedOp::Conv2d`]): input
/// `[N, C, H, W]`, weight `[O, C/groups, kh, kw]`, output `[N, O, out_h, out_w]`; kernel,
/// stride, padding and dilation as (height, width) pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeometry {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
    pub groups: usize,
}

impl ConvGeometry {
    /// The window over the input (`im2col`'s geometry).
    pub fn window(&self) -> Window2d {
        Window2d { n: self.n, c: self.c, h: self.h, w: self.w, kernel: self.kernel, stride: self.stride, padding: self.padding, dilation: self.dilation }
    }

    pub fn out_h(&self) -> usize {
        self.window().out_h()
    }

    pub fn out_w(&self) -> usize {
        self.window().out_w()
    }

    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }

    pub fn weight_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.groups, self.kernel.0, self.kernel.1]
    }

    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.o, self.out_h(), self.out_w()]
    }

    /// Floating-point operations of one pass: its multiply-adds counted twice (each gradient
    /// does as many as the forward), as `torch.profiler`'s `with_flops` counts them.
    pub fn flops(&self) -> u64 {
        let [o, cg, kh, kw] = self.weight_shape();
        2 * (self.n * self.out_h() * self.out_w() * o * cg * kh * kw) as u64
    }
}

/// The hyper-parameters of one [`FusedOp::AdamStep`], as `torch.optim.Adam` names them;
/// `step` counts this step (1 for the first).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub step: u64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// AdamW's decay (the parameter shrunk) rather than Adam's (an L2 term in the gradient).
    pub decoupled_weight_decay: bool,
}

impl AdamStep {
    /// `(lr / (1 - beta1^step), sqrt(1 - beta2^step))`: the step size and the second moment's
    /// bias correction, in f64 on the host as PyTorch's default (non-capturable) path has them.
    pub fn corrections(&self) -> (f64, f64) {
        let step = self.step as f64;
        (self.lr / (1.0 - self.beta1.powf(step)), (1.0 - self.beta2.powf(step)).powf(0.5))
    }
}

/// The hyper-parameters of one [`FusedOp::SgdStep`], as `torch.optim.SGD` names them; `first`
/// marks the step that starts the momentum buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdStep {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: bool,
    pub maximize: bool,
    pub first: bool,
}

/// The hyper-parameters of one [`FusedOp::RmsPropStep`], as `torch.optim.RMSprop` names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsPropStep {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
    pub maximize: bool,
}

/// The hyper-parameters of one [`FusedOp::AdagradStep`], as `torch.optim.Adagrad` names them;
/// `step` counts this step (1 for the first).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdagradStep {
    pub lr: f64,
    pub lr_decay: f64,
    pub weight_decay: f64,
    pub eps: f64,
    pub step: u64,
    pub maximize: bool,
}

impl AdagradStep {
    /// The decayed learning rate `lr / (1 + (step - 1) lr_decay)`, in f64 on the host as
    /// PyTorch computes it.
    pub fn clr(&self) -> f64 {
        self.lr / (1.0 + (self.step as f64 - 1.0) * self.lr_decay)
    }
}

/// The hyper-parameters of one [`FusedOp::AdadeltaStep`], as `torch.optim.Adadelta` names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdadeltaStep {
    pub lr: f64,
    pub rho: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub maximize: bool,
}

impl FusedOp {
    /// The op's name, for errors and reports.
    pub fn name(&self) -> &'static str {
        match self {
            FusedOp::LstmCell => "lstm_cell",
            FusedOp::LstmCellBackward => "lstm_cell_backward",
            FusedOp::LstmStep => "lstm_step",
            FusedOp::GruCell => "gru_cell",
            FusedOp::GruCellBackward => "gru_cell_backward",
            FusedOp::Relu => "relu",
            FusedOp::ReluBackward => "relu_backward",
            FusedOp::Gelu => "gelu",
            FusedOp::GeluBackward => "gelu_backward",
            FusedOp::SoftmaxLastDim => "softmax_last_dim",
            FusedOp::SoftmaxLastDimBackward => "softmax_last_dim_backward",
            FusedOp::BceLoss => "bce_loss",
            FusedOp::BceLossBackward => "bce_loss_backward",
            FusedOp::AdamStep(_) => "adam_step",
            FusedOp::SgdStep(_) => "sgd_step",
            FusedOp::RmsPropStep(_) => "rmsprop_step",
            FusedOp::AdagradStep(_) => "adagrad_step",
            FusedOp::AdadeltaStep(_) => "adadelta_step",
            FusedOp::Scale(_) => "scale",
            FusedOp::BatchNormTrain(_) => "batch_norm_train",
            FusedOp::BatchNormBackward(_) => "batch_norm_backward",
            FusedOp::LayerNorm(_) => "layer_norm",
            FusedOp::LayerNormBackward(_) => "layer_norm_backward",
            FusedOp::Conv2d(_) => "conv2d",
            FusedOp::Conv2dBias(_) => "conv2d_bias",
            FusedOp::Conv2dBiasRelu(_) => "conv2d_bias_relu",
            FusedOp::MatmulBias => "matmul_bias",
            FusedOp::Conv2dBackwardInput(_) => "conv2d_backward_input",
            FusedOp::Conv2dBackwardWeight(_) => "conv2d_backward_weight",
            FusedOp::MaxPool2dBackward(_) => "max_pool2d_backward",
        }
    }

    /// For an update op, the inputs whose new contents its outputs are, in output order;
    /// empty for the others.
    pub fn updates(&self) -> Vec<usize> {
        match self {
            FusedOp::AdamStep(a) if a.amsgrad => vec![0, 2, 3, 4],
            FusedOp::AdamStep(_) => vec![0, 2, 3],
            FusedOp::SgdStep(s) if s.momentum != 0.0 => vec![0, 2],
            FusedOp::SgdStep(_) => vec![0],
            // The parameter, then every state tensor (inputs 2 on).
            FusedOp::RmsPropStep(r) => [0, 2].into_iter().chain(3..3 + (r.momentum > 0.0) as usize + r.centered as usize).collect(),
            FusedOp::AdagradStep(_) => vec![0, 2],
            FusedOp::AdadeltaStep(_) => vec![0, 2, 3],
            FusedOp::Scale(_) => vec![0],
            _ => Vec::new(),
        }
    }

    /// How many buffers the op returns.
    pub fn outputs(&self) -> usize {
        match self {
            FusedOp::LstmCell | FusedOp::GruCell | FusedOp::Gelu | FusedOp::GeluBackward | FusedOp::SoftmaxLastDim | FusedOp::SoftmaxLastDimBackward => 1,
            FusedOp::BceLoss | FusedOp::BceLossBackward | FusedOp::Relu | FusedOp::ReluBackward => 1,
            FusedOp::GruCellBackward => 3,
            FusedOp::Conv2d(_) | FusedOp::Conv2dBias(_) | FusedOp::Conv2dBiasRelu(_) | FusedOp::Conv2dBackwardInput(_) | FusedOp::Conv2dBackwardWeight(_) => 1,
            FusedOp::MatmulBias | FusedOp::MaxPool2dBackward(_) => 1,
            FusedOp::LstmCellBackward | FusedOp::LstmStep => 2,
            FusedOp::AdamStep(_) | FusedOp::SgdStep(_) | FusedOp::RmsPropStep(_) | FusedOp::AdagradStep(_) | FusedOp::AdadeltaStep(_) | FusedOp::Scale(_) => {
                self.updates().len()
            }
            FusedOp::BatchNormTrain(b) => 3 + 2 * b.running as usize,
            FusedOp::BatchNormBackward(b) => 1 + 2 * b.affine as usize,
            FusedOp::LayerNorm(_) => 3,
            FusedOp::LayerNormBackward(l) => 1 + l.weight as usize + l.bias as usize,
        }
    }

    /// Whether the op's inputs may mix dtypes (batch norm's low activations with f32
    /// parameters and statistics, under autocast); every other op takes one dtype.
    pub fn mixes_dtypes(&self) -> bool {
        matches!(self, FusedOp::BatchNormTrain(_) | FusedOp::BatchNormBackward(_) | FusedOp::MaxPool2dBackward(_))
    }
}

thread_local! {
    static FUSION_ON: Cell<bool> = const { Cell::new(true) };
    static FOREACH_ON: Cell<bool> = const { Cell::new(true) };
}

/// `LIANDAN_FUSION`, read once: `0`, `off` or `false` turn fusion off; unset, `1`, `on` or
/// `true` leave it on; anything else is reported on stderr and ignored.
fn env_allows_fusion() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("LIANDAN_FUSION") {
        Err(_) => true,
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "1" | "on" | "true" => true,
            "0" | "off" | "false" => false,
            _ => {
                eprintln!("liandan: ignoring LIANDAN_FUSION={v:?}: use 0 (fused kernels off) or 1 (on, the default)");
                true
            }
        },
    })
}

/// True when fused kernels may run on this thread: neither `LIANDAN_FUSION=0` nor inside
/// [`no_fusion`].
pub fn fusion_enabled() -> bool {
    env_allows_fusion() && FUSION_ON.with(|f| f.get())
}

/// Turns fused kernels off on this thread until dropped: every composite runs its primitives.
pub struct NoFusionGuard {
    prev: bool,
}

impl NoFusionGuard {
    pub fn new() -> NoFusionGuard {
        NoFusionGuard { prev: FUSION_ON.with(|f| f.replace(false)) }
    }
}

impl Default for NoFusionGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoFusionGuard {
    fn drop(&mut self) {
        FUSION_ON.with(|f| f.set(self.prev));
    }
}

/// Runs `f` with fused kernels off on this thread (its backward too, if run inside `f`).
pub fn no_fusion<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoFusionGuard::new();
    f()
}

/// Runs `f` with the multi-tensor updates ([`update_foreach`]) off on this thread: each update
/// runs on its own, as a per-tensor fused kernel where there is one. For comparing the two
/// (`cargo xtask bench-fusion`, `bench-host`); `LIANDAN_FUSION=0` turns both off.
pub fn no_foreach<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            FOREACH_ON.with(|on| on.set(self.0));
        }
    }
    let _restore = Restore(FOREACH_ON.with(|on| on.replace(false)));
    f()
}

/// Asks the inputs' device to run `op` on `inputs` (contiguous, one device and dtype, as the
/// caller has checked). `None` when fusion is off or the backend has no kernel for it; the
/// caller then runs the composite.
pub(crate) fn try_fused(op: &FusedOp, inputs: &[&Tensor]) -> Option<Result<Vec<Storage>>> {
    let first = inputs.first()?;
    if !fusion_enabled() {
        return None;
    }
    debug_assert!(inputs.iter().all(|t| t.is_contiguous() && t.device() == first.device() && (t.dtype() == first.dtype() || op.mixes_dtypes())));
    let storages: Vec<Storage> = inputs.iter().map(|t| t.storage()).collect();
    let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(t, s)| Strided { storage: &**s, layout: t.layout(), dtype: t.dtype() }).collect();
    let result = first.device().backend().fused(op, &views)?;
    Some(result.and_then(|outs| {
        if outs.len() == op.outputs() {
            Ok(outs)
        } else {
            Err(Error::Backend {
                backend: first.device().backend().name(),
                op: op.name(),
                detail: format!("the fused kernel returned {} buffers; the op has {}", outs.len(), op.outputs()),
            })
        }
    }))
}

/// Runs the update op `op` (see the module docs) on `inputs` where their device has a kernel
/// for it, and swaps its outputs into the inputs it updates. `None` when fusion is off, the
/// backend has no kernel, or an operand is not what the kernel takes (every input contiguous,
/// of one shape, dtype and device; every updated one owning its storage from offset 0): the
/// caller then runs its composite.
pub fn update(op: &FusedOp, inputs: &[&Tensor]) -> Option<Result<()>> {
    let first = inputs.first()?;
    let targets = op.updates();
    let fits = |t: &&Tensor| t.is_contiguous() && t.shape() == first.shape() && t.dtype() == first.dtype() && t.device() == first.device();
    if targets.is_empty() || !inputs.iter().all(fits) || targets.iter().any(|&k| inputs.get(k).is_none_or(|t| t.layout().offset() != 0)) {
        return None;
    }
    Some(try_fused(op, inputs)?.map(|outs| {
        for (k, storage) in targets.into_iter().zip(outs) {
            inputs[k].replace_storage(storage);
        }
    }))
}

/// Update lists a backend is handed at once by [`update_foreach`]: its outputs are swapped in
/// before the next lists go, so a step holds at most this many tensors' new buffers beside the
/// old ones (the per-tensor updates hold one's).
pub const FOREACH_LISTS: usize = 24;

/// [`update`] of one op over many operand lists at once (`lists[i]` the inputs of one update),
/// where the device has a multi-tensor kernel for it ([`crate::Backend::fused_foreach`]),
/// [`FOREACH_LISTS`] lists a call: in place ([`crate::Backend::fused_foreach_in_place`])
/// where the buffers a call updates belong to their tensors alone, so that a training loop's
/// steps bind the same buffers every time and allocate none; into fresh buffers swapped in
/// where another tensor (a view, a detached alias, a graph not yet run backward) shares one,
/// which then keeps the old values. Returns, per list, whether it was updated: not when fusion
/// is off (or inside [`no_foreach`]), the backend has no such kernel, or the list is not what
/// [`update`] takes or lies on another device or dtype than the first list. A list not updated
/// is unchanged, and the caller runs its update ([`update`] or the composite).
pub fn update_foreach(op: &FusedOp, lists: &[Vec<&Tensor>]) -> Result<Vec<bool>> {
    let mut done = vec![false; lists.len()];
    let targets = op.updates();
    let Some(first) = lists.first().and_then(|l| l.first()) else { return Ok(done) };
    if targets.is_empty() || !fusion_enabled() || !FOREACH_ON.with(Cell::get) {
        return Ok(done);
    }
    let fits = |list: &Vec<&Tensor>| {
        let head = list.first().is_some_and(|t| t.device() == first.device() && t.dtype() == first.dtype());
        let same = list.iter().all(|t| t.is_contiguous() && t.shape() == list[0].shape() && t.dtype() == list[0].dtype() && t.device() == list[0].device());
        head && same && targets.iter().all(|&k| list.get(k).is_some_and(|t| t.layout().offset() == 0))
    };
    let eligible: Vec<usize> = (0..lists.len()).filter(|&i| fits(&lists[i])).collect();
    let backend = first.device().backend();
    for slice in eligible.chunks(FOREACH_LISTS) {
        let storages: Vec<Vec<Storage>> = slice.iter().map(|&i| lists[i].iter().map(|t| t.storage()).collect()).collect();
        let views: Vec<Vec<Strided>> = slice
            .iter()
            .zip(&storages)
            .map(|(&i, s)| lists[i].iter().zip(s).map(|(t, s)| Strided { storage: &**s, layout: t.layout(), dtype: t.dtype() }).collect())
            .collect();
        // In place where every buffer the chunk updates is held by its tensor alone (and by
        // `storages`): no other tensor can see the write. Otherwise into fresh buffers.
        let alone = storages.iter().all(|s| targets.iter().all(|&k| Arc::strong_count(&s[k]) == 2));
        if alone {
            if let Some(result) = backend.fused_foreach_in_place(op, &views) {
                result?;
                slice.iter().for_each(|&i| done[i] = true);
                continue;
            }
        }
        let Some(outs) = backend.fused_foreach(op, &views) else { continue };
        let outs = outs?;
        if outs.len() != slice.len() || outs.iter().any(|o| o.len() != op.outputs()) {
            return Err(Error::Backend {
                backend: backend.name(),
                op: op.name(),
                detail: format!("the multi-tensor kernel returned {} output lists for {} updates, or lists of the wrong length", outs.len(), slice.len()),
            });
        }
        // The old buffers go back to the allocator here, before the next lists' outputs are made.
        drop(views);
        drop(storages);
        for (&i, outs) in slice.iter().zip(outs) {
            for (&k, storage) in targets.iter().zip(outs) {
                lists[i][k].replace_storage(storage);
            }
            done[i] = true;
        }
    }
    Ok(done)
}
