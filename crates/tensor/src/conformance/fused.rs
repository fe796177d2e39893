//! Fused kernels against their composites: every custom op of this crate (`crate::ops`) that a
//! backend may run as a kernel is run with fusion on and off on the same device, forward and
//! backward, and the results compared ([`check_fused`]); the composite itself is checked
//! against float64 reference code and finite differences. On a backend without the kernel
//! both runs take the composite and the check holds trivially; each backend's own tests say
//! which kernels it has ([`kernel_runs`]), so a kernel that stops being used is noticed.

pub use super::custom::check_fused;
use super::custom::{backend_runs, check_op, outputs_and_grads};
use super::grads::{check_grads, leaf, strided_leaf};
use super::{assert_close, from_values, strided_input, values};
use crate::ops::{
    AttentionBackward, AttentionBackwardJoined, BatchNormBackward, BatchNormTrain, Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBackwardWeightWide,
    Conv2dBias, Conv2dBiasRelu, LayerNorm, LayerNormBackward, MaxPool2dBackward,
};
use crate::{no_fusion, CustomKernel, CustomOp, DType, Device, Result, Tensor};

/// This crate's custom ops that take no parameters, each a kernel a backend may have.
pub fn unit_ops() -> Vec<Box<dyn CustomOp>> {
    use crate::ops::*;
    vec![
        Box::new(LstmCell),
        Box::new(LstmCellBackward),
        Box::new(GruCell),
        Box::new(GruCellBackward),
        Box::new(Relu),
        Box::new(ReluBackward),
        Box::new(AddRelu),
        Box::new(Gelu),
        Box::new(GeluBackward),
        Box::new(SoftmaxLastDim),
        Box::new(SoftmaxLastDimBackward),
        Box::new(LogSoftmaxLastDim),
        Box::new(LogSoftmaxLastDimBackward),
        Box::new(BceLoss),
        Box::new(BceLossBackward),
    ]
}

/// The normalizations' ops with every option set (affine or not, running statistics or not;
/// a weight and a bias or not; a ReLU after the batch norm or not; a batch count beside the
/// running statistics or not), forward and backward.
pub fn norm_ops() -> Vec<Box<dyn CustomOp>> {
    let mut ops: Vec<Box<dyn CustomOp>> = Vec::new();
    for (affine, running) in [(true, true), (true, false), (false, true), (false, false)] {
        let l = crate::LayerNormOptions { width: 5, eps: 1e-5, weight: affine, bias: running };
        ops.extend([Box::new(LayerNorm(l)) as Box<dyn CustomOp>, Box::new(LayerNormBackward(l))]);
        for relu in [false, true] {
            let o = crate::BatchNormOptions { eps: 1e-5, momentum: 0.1, affine, running, relu, count: false };
            ops.extend([Box::new(BatchNormTrain(o)) as Box<dyn CustomOp>, Box::new(BatchNormBackward(o))]);
            if running {
                ops.push(Box::new(BatchNormTrain(crate::BatchNormOptions { count: true, ..o })));
            }
        }
    }
    ops
}

/// The batch-norm ops of [`norm_ops`] that have an f32 operand beside low activations under
/// autocast (a forward with neither parameters nor running statistics has none to mix).
pub fn mixed_norm_ops() -> Vec<Box<dyn CustomOp>> {
    let mixes = |op: &dyn CustomOp| {
        let any: &dyn CustomKernel = op;
        any.downcast_ref::<BatchNormBackward>().is_some() || any.downcast_ref::<BatchNormTrain>().is_some_and(|b| b.0.affine || b.0.running)
    };
    norm_ops().into_iter().filter(|op| mixes(op.as_ref())).collect()
}

/// Whether `device`'s backend has its own kernel for `op`, one of this crate's custom ops
/// (called directly on small inputs in `dtype`; for the LSTM cell, with the gates in one term
/// and in two).
pub fn kernel_runs(device: &Device, op: &dyn CustomOp, dtype: DType) -> bool {
    let (n, h) = (3, 5);
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, device).unwrap();
    let any: &dyn CustomKernel = op;
    let inputs = match op.name() {
        "lstm_cell" => vec![t(&[n, 4 * h], 1), t(&[n, h], 2)],
        "lstm_cell_backward" => vec![t(&[n, 4 * h], 1), t(&[n, h], 2), t(&[2, n, h], 3), t(&[n, h], 4), t(&[n, h], 5)],
        // x_gates, h, W_hh, c: H = 8 (a kernel may read h and W_hh's rows in fours).
        "lstm_step" => vec![t(&[n, 32], 1), t(&[n, 8], 2), t(&[32, 8], 3), t(&[n, 8], 4)],
        // x_gates [L, N, 4H], W_hh, h0, c0; the backward's gradient [L + 1, N, H], act, cells,
        // c0, W_hh.
        "lstm_sequence" => vec![t(&[3, n, 4 * h], 1), t(&[4 * h, h], 2), t(&[n, h], 3), t(&[n, h], 4)],
        "lstm_sequence_backward" => vec![t(&[4, n, h], 1), t(&[3, n, 4 * h], 2), t(&[3, n, h], 3), t(&[n, h], 4), t(&[4 * h, h], 5)],
        "gru_cell" => vec![t(&[n, 3 * h], 1), t(&[n, 3 * h], 2), t(&[n, h], 3)],
        "gru_cell_backward" => vec![t(&[n, 3 * h], 1), t(&[n, 3 * h], 2), t(&[n, h], 3), t(&[n, h], 4)],
        "relu" | "gelu" | "softmax_last_dim" | "log_softmax_last_dim" => vec![t(&[n, h], 1)],
        "relu_backward" | "gelu_backward" | "add_relu" => vec![t(&[n, h], 1), t(&[n, h], 2)],
        "softmax_last_dim_backward" => vec![t(&[n, h], 1).softmax(-1isize).unwrap(), t(&[n, h], 2)],
        "log_softmax_last_dim_backward" => vec![t(&[n, h], 1).log_softmax(-1isize).unwrap(), t(&[n, h], 2)],
        // Log-probabilities [N, C] or the loss's gradient (a scalar), and the class targets.
        "nll_loss" => vec![t(&[n, h], 1).log_softmax(-1isize).unwrap(), class_targets(device, n, h)],
        "nll_loss_backward" => vec![t(&[], 1), class_targets(device, n, h)],
        // Probabilities, targets, the incoming gradient.
        "bce_loss" => vec![t(&[n, h], 1).sigmoid().unwrap(), t(&[n, h], 2).sigmoid().unwrap()],
        "bce_loss_backward" => vec![t(&[n, h], 1).sigmoid().unwrap(), t(&[n, h], 2).sigmoid().unwrap(), t(&[n, h], 3)],
        "batch_norm_train" | "batch_norm_backward" => batch_norm_operands(device, op, dtype, dtype),
        // x [N, D], then the [D] parameters given; the backward's statistics [N], rstd positive.
        "layer_norm" => {
            let l = any.downcast_ref::<LayerNorm>().expect("a layer norm").0;
            std::iter::once(t(&[n, l.width], 1)).chain((0..l.weight as u64 + l.bias as u64).map(|k| t(&[l.width], 2 + k))).collect()
        }
        "layer_norm_low" => {
            let l = any.downcast_ref::<crate::ops::LayerNormLow>().expect("a layer norm").options;
            std::iter::once(t(&[n, l.width], 1)).chain((0..l.weight as u64 + l.bias as u64).map(|k| t(&[l.width], 2 + k))).collect()
        }
        // a and the parameters f32, the addend of `dtype`.
        "add_layer_norm" => {
            let l = any.downcast_ref::<crate::ops::AddLayerNorm>().expect("an add and a layer norm").options;
            let wide = |shape: &[usize], seed| t(shape, seed).to_dtype(DType::F32).unwrap();
            let mut v = vec![wide(&[n, l.width], 1)];
            v.extend((0..l.weight as u64 + l.bias as u64).map(|k| wide(&[l.width], 2 + k)));
            v.push(t(&[n, l.width], 4));
            v
        }
        "layer_norm_backward" => {
            let l = any.downcast_ref::<LayerNormBackward>().expect("a layer norm").0;
            let mut v = vec![t(&[n, l.width], 1), t(&[n, l.width], 2), t(&[n], 3), t(&[n], 4).abs().unwrap()];
            v.extend(l.weight.then(|| t(&[l.width], 5)));
            v
        }
        "layer_norm_backward_into" => {
            let l = any.downcast_ref::<crate::ops::LayerNormBackwardInto>().expect("a layer norm").options;
            let mut v = vec![t(&[n, l.width], 1), t(&[n, l.width], 2), t(&[n], 3), t(&[n], 4).abs().unwrap()];
            v.extend(l.weight.then(|| t(&[l.width], 5)));
            v.push(t(&[n, l.width], 6));
            v
        }
        "conv2d" | "conv2d_bias" | "conv2d_bias_relu" | "conv2d_backward_input" | "conv2d_backward_weight" | "conv2d_backward_weight_wide" => {
            conv_operands(op, &t)
        }
        "matmul_bias" => vec![t(&[n, h], 1), t(&[4, h], 2), t(&[4], 3)],
        // x [N, H], the weight [4, H], the bias [4].
        "linear_gelu" => vec![t(&[n, h], 1), t(&[4, h], 2), t(&[4], 3)],
        // dy [N, 4], the weight [4, H], GELU's input [N, H].
        "matmul_gelu_backward" => vec![t(&[n, 4], 1), t(&[4, h], 2), t(&[n, h], 3)],
        "matmul_wide" => vec![t(&[n, h], 1), t(&[h, 4], 2)],
        // An f32 tensor and one of `dtype` (the low type).
        "add_wide" => vec![t(&[n, h], 1).to_dtype(DType::F32).unwrap(), t(&[n, h], 2)],
        "sum_rows_wide" => vec![t(&[n, h], 1)],
        // [N, C, L], L even (packed bf16 is read a word of one run at a time).
        "sum_channels" => vec![t(&[n, h, 4], 1)],
        // q, k, v [N, H, L or S, E or Ev]; the backward's do [N, L, H, Ev] and p [N, H, L, S].
        "attention" => vec![t(&[2, n, 7, 4], 1), t(&[2, n, h, 4], 2), t(&[2, n, h, 6], 3)],
        "attention_backward" => {
            let p = t(&[2, n, 7, h], 5).softmax(-1isize).unwrap();
            vec![t(&[2, n, 7, 4], 1), t(&[2, n, h, 4], 2), t(&[2, n, h, 6], 3), t(&[2, 7, n, 6], 4), p]
        }
        // Self-attention's: q, k, v of one shape.
        "attention_backward_joined" => {
            let p = t(&[2, n, 7, 7], 5).softmax(-1isize).unwrap();
            vec![t(&[2, n, 7, 4], 1), t(&[2, n, 7, 4], 2), t(&[2, n, 7, 4], 3), t(&[2, 7, n, 4], 4), p]
        }
        // dy, and the indices of a max pooling of that geometry.
        "max_pool2d_backward" => {
            let w = any.downcast_ref::<MaxPool2dBackward>().expect("a max pooling's gradient").0;
            let x = t(&[w.n, w.c, w.h, w.w], 1);
            let (_, indices) = x.with_strided(|v| device.backend().max_pool2d(v, w)).unwrap();
            let shape = [w.n, w.c, w.out_h(), w.out_w()];
            vec![t(&shape, 2), Tensor::from_parts(indices, crate::Layout::contiguous(&shape), DType::I64, device, None)]
        }
        other => panic!("kernel_runs: {other} is not one of the tensor crate's custom ops"),
    };
    // The LSTM cell's kernels also take the gates in two terms (`lstm_cell_sum`): both forms.
    let mut with_sum = inputs.clone();
    with_sum.push(t(&[n, 4 * h], 6));
    backend_runs(device, op, &inputs) && (!matches!(op.name(), "lstm_cell" | "lstm_cell_backward") || backend_runs(device, op, &with_sum))
}

/// `n` i64 class targets among `classes`, each class in turn.
fn class_targets(device: &Device, n: usize, classes: usize) -> Tensor {
    Tensor::from_vec((0..n).map(|i| ((i * 7 + 3) % classes) as i64).collect::<Vec<_>>(), &[n], device).unwrap()
}

/// The negative log-likelihood's kernels (summed and averaged, forward and backward) against
/// their composites, then a cross-entropy's loss and gradient with fusion on and off: rows
/// fewer and more than a workgroup's 64, one class, many.
pub fn nll_loss_matches_composite(d: &Device) {
    use crate::ops::{NllLoss, NllLossBackward, Reduction};
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    for (n, c) in [(3, 5), (1, 1), (130, 10), (64, 1000)] {
        let (logits, targets) = (t(&[n, c], 61), class_targets(d, n, c));
        for mean in [false, true] {
            check_op(d, &NllLoss { mean }, &[logits.log_softmax(-1isize).unwrap(), targets.clone()], 1e-5, 1e-5);
            check_op(d, &NllLossBackward { mean, classes: c }, &[t(&[], 62), targets.clone()], 0.0, 0.0);
            let reduction = if mean { Reduction::Mean } else { Reduction::Sum };
            let loss = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].cross_entropy(&targets, reduction)?]) };
            check_fused(&format!("cross_entropy {reduction:?} N {n} C {c}"), std::slice::from_ref(&logits), loss, 1e-5, 1e-5);
        }
    }
}

/// A convolution op's operands: `x` or `dy`, then the weight or `x`, then the bias.
fn conv_operands(op: &dyn CustomOp, t: &dyn Fn(&[usize], u64) -> Tensor) -> Vec<Tensor> {
    let any: &dyn CustomKernel = op;
    let g = [
        any.downcast_ref::<Conv2d>().map(|c| c.0),
        any.downcast_ref::<Conv2dBias>().map(|c| c.0),
        any.downcast_ref::<Conv2dBiasRelu>().map(|c| c.0),
        any.downcast_ref::<Conv2dBackwardInput>().map(|c| c.0),
        any.downcast_ref::<Conv2dBackwardWeight>().map(|c| c.0),
        any.downcast_ref::<Conv2dBackwardWeightWide>().map(|c| c.0),
    ]
    .into_iter()
    .flatten()
    .next()
    .expect("a convolution");
    match op.name() {
        "conv2d" => vec![t(&g.input_shape(), 1), t(&g.weight_shape(), 2)],
        "conv2d_backward_input" => vec![t(&g.output_shape(), 1), t(&g.weight_shape(), 2)],
        "conv2d_backward_weight" | "conv2d_backward_weight_wide" => vec![t(&g.output_shape(), 1), t(&g.input_shape(), 2)],
        _ => vec![t(&g.input_shape(), 1), t(&g.weight_shape(), 2), t(&[g.o], 3)],
    }
}

/// Whether `device`'s backend runs the batch-norm op `op` on activations of the low type `low`
/// with f32 parameters and statistics (autocast's mixed batch norm; see
/// [`crate::ops::BatchNormTrain`]), returning buffers of the right types' sizes. (A forward
/// with neither parameters nor running statistics has no f32 operand, so nothing to mix.)
pub fn kernel_runs_mixed(device: &Device, op: &dyn CustomOp, low: DType) -> bool {
    backend_runs(device, op, &batch_norm_operands(device, op, low, DType::F32))
}

/// A batch-norm op's operands on `device`: `x` `[3, 5, 2]` (and the backward's `dy`) of type
/// `x`, the `[C]` operands of type `p` (variances and invstd positive), any batch count.
fn batch_norm_operands(device: &Device, op: &dyn CustomOp, x: DType, p: DType) -> Vec<Tensor> {
    let (n, h) = (3, 5);
    let t = |shape: &[usize], seed, dtype| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, device).unwrap();
    let any: &dyn CustomKernel = op;
    if let Some(BatchNormTrain(b)) = any.downcast_ref::<BatchNormTrain>() {
        let params = 2 * b.affine as u64 + 2 * b.running as u64;
        let count = b.count.then(|| Tensor::from_slice(&[41i64], &[], device).unwrap());
        return std::iter::once(t(&[n, h, 2], 1, x)).chain((0..params).map(|k| t(&[h], 2 + k, p).abs().unwrap())).chain(count).collect();
    }
    let b = any.downcast_ref::<BatchNormBackward>().unwrap_or_else(|| panic!("{} is not a batch norm", op.name())).0;
    let mut v = vec![t(&[n, h, 2], 1, x), t(&[n, h, 2], 2, x), t(&[h], 3, p), t(&[h], 4, p).abs().unwrap()];
    v.extend(b.affine.then(|| t(&[h], 5, p)));
    v.extend((b.affine && b.relu).then(|| t(&[h], 6, p)));
    v
}

/// `LIANDAN_FUSION`'s thread-local twin: `no_fusion` turns fusion off and restores it, nested.
pub fn switch(_d: &Device) {
    let before = crate::fusion_enabled();
    no_fusion(|| {
        assert!(!crate::fusion_enabled(), "no_fusion turns fusion off");
        no_fusion(|| assert!(!crate::fusion_enabled()));
        assert!(!crate::fusion_enabled(), "an inner no_fusion restores the outer state");
    });
    assert_eq!(crate::fusion_enabled(), before, "no_fusion restores the state it found");
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `lstm_cell` (fused where the device can) against float64 reference code, in every float
/// dtype the device computes, on odd sizes and non-contiguous inputs, with gates large enough
/// to saturate the activations.
pub fn lstm_cell_forward(d: &Device) {
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 1e-2, 1e-2), (DType::BF16, 5e-2, 5e-2)] {
        for (n, h, strided) in [(1, 1, false), (3, 7, true), (5, 33, false)] {
            let mut gv = values(n * 4 * h, 31);
            // Saturating gates: where a naive exp would overflow.
            gv[0] = 60.0;
            gv[n * 4 * h - 1] = -95.0;
            let (gates, g) = from_values(d, &[n, 4 * h], &gv, dtype);
            let (c, cv) = from_values(d, &[n, h], &values(n * h, 32), dtype);
            let (gates, c) = if strided { (strided_input(d, &[n, 4 * h], &g, dtype), strided_input(d, &[n, h], &cv, dtype)) } else { (gates, c) };
            let what = format!("lstm_cell {dtype} N {n} H {h}{}", if strided { " strided" } else { "" });
            let (hn, cn) = Tensor::lstm_cell(&gates, &c).unwrap_or_else(|e| panic!("{what}: {e}"));
            let (mut want_h, mut want_c) = (Vec::new(), Vec::new());
            for r in 0..n {
                for j in 0..h {
                    let at = |k: usize| g[r * 4 * h + k * h + j];
                    let c_new = sigmoid(at(1)) * cv[r * h + j] + sigmoid(at(0)) * at(2).tanh();
                    want_c.push(c_new);
                    want_h.push(sigmoid(at(3)) * c_new.tanh());
                }
            }
            assert_close(&format!("{what}: h'"), &hn.to_vec_f64().unwrap(), &want_h, atol, rtol);
            assert_close(&format!("{what}: c'"), &cn.to_vec_f64().unwrap(), &want_c, atol, rtol);
            // The same gates as two terms the cell adds: g - b and b.
            let bv: Vec<f64> = values(n * 4 * h, 33).iter().map(|b| 3.0 * b).collect();
            let av: Vec<f64> = g.iter().zip(&bv).map(|(g, b)| g - b).collect();
            let (a, b) = (from_values(d, &[n, 4 * h], &av, dtype).0, from_values(d, &[n, 4 * h], &bv, dtype).0);
            let (a, b) = if strided { (strided_input(d, &[n, 4 * h], &av, dtype), b) } else { (a, b) };
            let (hs, cs) = Tensor::lstm_cell_sum(&a, &b, &c).unwrap_or_else(|e| panic!("{what}, gates in two terms: {e}"));
            // Halves round the terms and their sum: a looser bound there.
            let (satol, srtol) = if dtype.size_in_bytes() == 2 { (4.0 * atol, 4.0 * rtol) } else { (atol, rtol) };
            // Exactly (f32, f64) the result of adding the terms first.
            let (ha, ca) = Tensor::lstm_cell(&a.add(&b).unwrap(), &c).unwrap();
            let exact = if dtype.size_in_bytes() >= 4 { 0.0 } else { atol };
            for (name, got, want, added) in [("h'", &hs, &want_h, &ha), ("c'", &cs, &want_c, &ca)] {
                let got = got.to_vec_f64().unwrap();
                assert_close(&format!("{what}, gates in two terms: {name}"), &got, want, satol, srtol);
                assert_close(&format!("{what}: lstm_cell_sum against lstm_cell of the added terms, {name}"), &got, &added.to_vec_f64().unwrap(), exact, 0.0);
            }
        }
    }
}

/// The fused forward and backward against the composite's, on the same device.
pub fn lstm_cell_matches_composite(d: &Device) {
    let cell = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (h, c) = Tensor::lstm_cell(&x[0], &x[1])?;
        Ok(vec![h, c])
    };
    let cell_sum = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (h, c) = Tensor::lstm_cell_sum(&x[0], &x[1], &x[2])?;
        Ok(vec![h, c])
    };
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F16, 2e-2, 2e-2), (DType::BF16, 1e-1, 5e-2)] {
        // An even H too: bf16 there runs on packed words, two units an invocation.
        for (n, h) in [(1, 1), (3, 7), (16, 65), (5, 10)] {
            let gates = Tensor::from_f64s(&values(n * 4 * h, 41), &[n, 4 * h], dtype, d).unwrap();
            let c = Tensor::from_f64s(&values(n * h, 42), &[n, h], dtype, d).unwrap();
            check_fused(&format!("lstm_cell {dtype} N {n} H {h}"), &[gates, c.clone()], cell, atol, rtol);
            let (a, b) = (
                Tensor::from_f64s(&values(n * 4 * h, 43), &[n, 4 * h], dtype, d).unwrap(),
                Tensor::from_f64s(&values(n * 4 * h, 44), &[n, 4 * h], dtype, d).unwrap(),
            );
            check_fused(&format!("lstm_cell_sum {dtype} N {n} H {h}"), &[a, b, c], cell_sum, atol, rtol);
        }
    }
    // Two steps chained, only h' of the second used: the first step's c' gets its gradient
    // through the second step alone, and the second's dc' is zero.
    let two_steps = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (h1, c1) = Tensor::lstm_cell(&x[0], &x[2])?;
        let gates2 = x[1].add(&h1.matmul(&x[3])?)?;
        Ok(vec![Tensor::lstm_cell(&gates2, &c1)?.0])
    };
    let (n, h) = (4, 9);
    let inputs = [(&[n, 4 * h][..], 43), (&[n, 4 * h][..], 44), (&[n, h][..], 45), (&[h, 4 * h][..], 46)]
        .map(|(s, seed)| Tensor::from_f64s(&values(s.iter().product(), seed), s, DType::F32, d).unwrap());
    check_fused("two chained lstm_cell steps", &inputs, two_steps, 1e-5, 1e-5);
    // The same with the second step's product added by the cell, both steps' outputs stacked
    // and only the last read, as the LSTM layer runs them.
    let two_steps_sum = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (h1, c1) = Tensor::lstm_cell(&x[0], &x[2])?;
        let (h2, _) = Tensor::lstm_cell_sum(&x[1], &h1.matmul(&x[3])?, &c1)?;
        Ok(vec![Tensor::stack(&[&h1, &h2], 1usize)?.select(1usize, 1)?])
    };
    check_fused("two chained lstm_cell_sum steps", &inputs, two_steps_sum, 1e-5, 1e-5);
}

/// An LSTM direction as one kernel where the device has one ([`Tensor::lstm_sequence`]):
/// its kernel and its backward's against their composites, then the whole direction, outputs
/// and the gradients of the input gates, `W_hh`, `h0` and `c0`, against the steps run as ops
/// (fused kernels off), both ways in time, from zeros and from given states.
pub fn lstm_sequence_matches_composite(d: &Device) {
    use crate::ops::{LstmSequence, LstmSequenceBackward};
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    for (l, n, h, reverse, zero_state) in
        [(1, 1, 1, false, false), (2, 1, 3, true, true), (3, 2, 5, false, false), (4, 3, 7, true, false), (5, 4, 8, true, true), (6, 64, 16, false, true)]
    {
        let what = format!("lstm_sequence L {l} N {n} H {h} reverse {reverse} zero state {zero_state}");
        let (xg, w, c0) = (t(&[l, n, 4 * h], 51), t(&[4 * h, h], 52), t(&[n, h], 54));
        let h0 = if zero_state { Tensor::zeros(&[n, h], DType::F32, d).unwrap() } else { t(&[n, h], 53) };
        let op = LstmSequence { reverse, zero_state };
        check_op(d, &op, &[xg.clone(), w.clone(), h0.clone(), c0.clone()], 1e-5, 1e-5);
        let fwd = no_fusion(|| op.composite(&[&xg, &w, &h0, &c0])).unwrap();
        let back = LstmSequenceBackward { reverse, want_dh0: true };
        check_op(d, &back, &[t(&[l + 1, n, h], 55), fwd[1].clone(), fwd[2].clone(), c0.clone(), w.clone()], 1e-5, 1e-5);
        // The direction: the kernel where the device has one, else (and with fusion off) the
        // steps as ops.
        let direction = move |x: &[Tensor]| -> Result<Vec<Tensor>> {
            let (xg, w, c0) = (&x[0], &x[1], &x[2]);
            let h0 = if zero_state { Tensor::zeros(&[n, h], DType::F32, xg.device())? } else { x[3].clone() };
            if let Some(states) = Tensor::lstm_sequence(xg, w, &h0, c0, reverse, zero_state)? {
                return Ok(vec![states]);
            }
            let (w_t, mut state, mut c) = (w.t()?, h0, c0.clone());
            let mut hs = vec![None; l];
            for s in 0..l {
                let at = if reverse { l - 1 - s } else { s };
                let gx = xg.select(0usize, at)?;
                (state, c) = if s == 0 && zero_state { Tensor::lstm_cell(&gx, &c)? } else { Tensor::lstm_step(&gx, &state, &w_t, &c)? };
                hs[at] = Some(state.clone());
            }
            let mut all: Vec<&Tensor> = hs.iter().map(|t| t.as_ref().expect("every position ran")).collect();
            all.push(&c);
            Ok(vec![Tensor::stack(&all, 0usize)?])
        };
        let mut inputs = vec![xg, w, c0];
        if !zero_state {
            inputs.push(h0);
        }
        check_fused(&what, &inputs, direction, 1e-5, 1e-5);
    }
}

/// `lstm_step` (the recurrent product and the cell, one kernel where the device has one:
/// [`crate::ops::LstmStep`]) against the product and `lstm_cell_sum`, outputs and the gradients
/// of `x_gates`, `h`, `W_hh` and `c`: one step at sizes that fill no block and at the zoo
/// LSTM's, H not a multiple of 4 (the composite either way), f16 and bf16; then three steps
/// sharing one `W_hh^T` whose gradient the engine gathers into one product, as the LSTM layer
/// runs them.
pub fn lstm_step_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed, dtype| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
    let step = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (h, c) = Tensor::lstm_step(&x[0], &x[1], &x[2].t()?, &x[3])?;
        Ok(vec![h, c])
    };
    let cases =
        [(DType::F32, 3, 8), (DType::F32, 21, 36), (DType::F32, 64, 256), (DType::F32, 5, 7), (DType::F16, 6, 12), (DType::BF16, 6, 12), (DType::BF16, 21, 36)];
    for (dtype, n, h) in cases {
        let (atol, rtol) = match dtype {
            DType::F32 => (1e-5, 1e-5),
            DType::F16 => (2e-2, 2e-2),
            _ => (1e-1, 5e-2),
        };
        let inputs = [t(&[n, 4 * h], 47, dtype), t(&[n, h], 48, dtype), t(&[4 * h, h], 49, dtype).mul_scalar(0.5).unwrap(), t(&[n, h], 50, dtype)];
        check_fused(&format!("lstm_step {dtype} N {n} H {h}"), &inputs, step, atol, rtol);
    }
    let (n, h) = (4, 12);
    let three_steps = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let w_t = x[2].t()?;
        let (mut hs, mut c) = (x[1].clone(), x[3].clone());
        let mut outs = Vec::new();
        for k in 0..3 {
            let (h_new, c_new) = Tensor::lstm_step(&x[0].narrow(0usize, k * n, n)?, &hs, &w_t, &c)?;
            outs.push(h_new.clone());
            (hs, c) = (h_new, c_new);
        }
        Ok(vec![Tensor::stack(&outs.iter().collect::<Vec<_>>(), 0usize)?.sum_all()?.add(&c.sum_all()?)?])
    };
    let inputs = [t(&[3 * n, 4 * h], 51, DType::F32), t(&[n, h], 52, DType::F32), t(&[4 * h, h], 53, DType::F32), t(&[n, h], 54, DType::F32)];
    check_fused("three chained lstm_step steps", &inputs, three_steps, 1e-5, 1e-5);
}

/// The backward rule against finite differences in f64, with fusion on and off.
pub fn lstm_cell_grads(d: &Device) {
    let cell = |x: &[Tensor]| -> Result<Tensor> {
        let (h, c) = Tensor::lstm_cell(&x[0], &x[1])?;
        Tensor::stack(&[&h, &c.mul_scalar(0.7)?], 0usize)
    };
    fused_and_composite("lstm_cell", |what| {
        check_grads(what, &[leaf(d, &[3, 8], 51), leaf(d, &[3, 2], 52)], cell, 1e-7, 1e-6);
        check_grads(
            &format!("{what}, gates in two terms, c' only"),
            &[leaf(d, &[3, 8], 55), strided_leaf(d, &[3, 8], 56), leaf(d, &[3, 2], 57)],
            |x| Ok(Tensor::lstm_cell_sum(&x[0], &x[1], &x[2])?.1),
            1e-7,
            1e-6,
        );
        check_grads(
            &format!("{what}, strided, h' only"),
            &[strided_leaf(d, &[2, 12], 53), strided_leaf(d, &[2, 3], 54)],
            |x| Ok(Tensor::lstm_cell(&x[0], &x[1])?.0),
            1e-7,
            1e-6,
        );
    });
}

/// Runs `check(what)` with fusion on and with it off, `what` naming `op` and the way.
fn fused_and_composite(op: &str, check: impl Fn(&str)) {
    check(&format!("{op} (fused where the device can)"));
    no_fusion(|| check(&format!("{op} (composite)")));
}

/// Misshapen or mismatched operands are errors naming the op, never panics.
pub fn lstm_cell_errors(d: &Device) {
    let t = |shape: &[usize], dtype| Tensor::zeros(shape, dtype, d).unwrap();
    let cases = [
        (t(&[2, 8], DType::F32), t(&[2, 3], DType::F32), "4H != 4 * H"),
        (t(&[2, 8], DType::F32), t(&[3, 2], DType::F32), "N disagrees"),
        (t(&[8], DType::F32), t(&[2], DType::F32), "rank 1"),
        (t(&[2, 0], DType::F32), t(&[2, 0], DType::F32), "H = 0"),
        (t(&[2, 8], DType::F32), t(&[2, 2], DType::F64), "dtypes differ"),
        (t(&[2, 8], DType::I64), t(&[2, 2], DType::I64), "integer gates"),
    ];
    for (gates, c, why) in cases {
        let err = Tensor::lstm_cell(&gates, &c).err().unwrap_or_else(|| panic!("lstm_cell accepted operands where {why}"));
        assert!(err.to_string().contains("lstm_cell"), "{why}: the error must name the op: {err}");
        let good = Tensor::zeros(gates.shape(), gates.dtype(), d).unwrap();
        let err = Tensor::lstm_cell_sum(&good, &gates, &c).err().unwrap_or_else(|| panic!("lstm_cell_sum accepted operands where {why}"));
        assert!(err.to_string().contains("lstm_cell"), "{why}: the error must name the op: {err}");
    }
    // Two gate terms of different shapes.
    let err = Tensor::lstm_cell_sum(&t(&[2, 8], DType::F32), &t(&[2, 4], DType::F32), &t(&[2, 2], DType::F32)).err();
    assert!(err.is_some_and(|e| e.to_string().contains("lstm_cell")), "lstm_cell_sum accepted gate terms of different shapes");
}

/// `gru_cell` (fused where the device can) against float64 reference code, in every float
/// dtype the device computes, on odd sizes and a non-contiguous input, with gates large enough
/// to saturate the activations.
pub fn gru_cell_forward(d: &Device) {
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 1e-2, 1e-2), (DType::BF16, 5e-2, 5e-2)] {
        for (n, h, strided) in [(1, 1, false), (3, 7, true), (5, 33, false)] {
            let mut xv = values(n * 3 * h, 71);
            xv[0] = 60.0;
            xv[n * 3 * h - 1] = -95.0;
            let x = if strided { strided_input(d, &[n, 3 * h], &xv, dtype) } else { from_values(d, &[n, 3 * h], &xv, dtype).0 };
            let gh = from_values(d, &[n, 3 * h], &values(n * 3 * h, 72), dtype).0;
            let st = from_values(d, &[n, h], &values(n * h, 73), dtype).0;
            let what = format!("gru_cell {dtype} N {n} H {h}{}", if strided { " strided" } else { "" });
            // The reference from the values as the device holds them.
            let (xv, hv, sv) = (x.to_vec_f64().unwrap(), gh.to_vec_f64().unwrap(), st.to_vec_f64().unwrap());
            let got = Tensor::gru_cell(&x, &gh, &st).unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut want = Vec::new();
            for r in 0..n {
                for j in 0..h {
                    let at = |v: &[f64], k: usize| v[r * 3 * h + k * h + j];
                    let rg = sigmoid(at(&xv, 0) + at(&hv, 0));
                    let z = sigmoid(at(&xv, 1) + at(&hv, 1));
                    let nn = (at(&xv, 2) + rg * at(&hv, 2)).tanh();
                    want.push((1.0 - z) * nn + z * sv[r * h + j]);
                }
            }
            assert_close(&format!("{what}: h'"), &got.to_vec_f64().unwrap(), &want, atol, rtol);
        }
    }
}

/// The fused GRU cell, forward and backward, against the composite's on the same device; and
/// two chained steps, the second's `h_gates` a product of the first's `h'`.
pub fn gru_cell_matches_composite(d: &Device) {
    let cell = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![Tensor::gru_cell(&x[0], &x[1], &x[2])?]) };
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F16, 2e-2, 2e-2), (DType::BF16, 1e-1, 5e-2)] {
        for (n, h) in [(1, 1), (3, 7), (16, 65)] {
            let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
            check_fused(&format!("gru_cell {dtype} N {n} H {h}"), &[t(&[n, 3 * h], 81), t(&[n, 3 * h], 82), t(&[n, h], 83)], cell, atol, rtol);
        }
    }
    let two_steps = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let h1 = Tensor::gru_cell(&x[0], &x[1], &x[2])?;
        Ok(vec![Tensor::gru_cell(&x[0].mul_scalar(0.5)?, &h1.matmul(&x[3])?, &h1)?])
    };
    let (n, h) = (4, 9);
    let inputs = [(&[n, 3 * h][..], 84), (&[n, 3 * h][..], 85), (&[n, h][..], 86), (&[h, 3 * h][..], 87)]
        .map(|(s, seed)| Tensor::from_f64s(&values(s.iter().product(), seed), s, DType::F32, d).unwrap());
    check_fused("two chained gru_cell steps", &inputs, two_steps, 1e-5, 1e-5);
}

/// The GRU cell's backward rule against finite differences in f64, with fusion on and off.
pub fn gru_cell_grads(d: &Device) {
    fused_and_composite("gru_cell", |what| {
        check_grads(what, &[leaf(d, &[3, 6], 91), leaf(d, &[3, 6], 92), leaf(d, &[3, 2], 93)], |x| Tensor::gru_cell(&x[0], &x[1], &x[2]), 1e-7, 1e-6);
        check_grads(
            &format!("{what}, strided"),
            &[strided_leaf(d, &[2, 9], 94), leaf(d, &[2, 9], 95), strided_leaf(d, &[2, 3], 96)],
            |x| Tensor::gru_cell(&x[0], &x[1], &x[2])?.square(),
            1e-7,
            1e-6,
        );
    });
}

/// Misshapen or mismatched operands of `gru_cell` are errors naming the op, never panics.
pub fn gru_cell_errors(d: &Device) {
    let t = |shape: &[usize], dtype| Tensor::zeros(shape, dtype, d).unwrap();
    let f = DType::F32;
    let cases = [
        (t(&[2, 6], f), t(&[2, 6], f), t(&[2, 3], f), "3H != 3 * H"),
        (t(&[2, 6], f), t(&[2, 3], f), t(&[2, 2], f), "the gate terms differ"),
        (t(&[2, 6], f), t(&[2, 6], f), t(&[3, 2], f), "N disagrees"),
        (t(&[6], f), t(&[6], f), t(&[2], f), "rank 1"),
        (t(&[2, 0], f), t(&[2, 0], f), t(&[2, 0], f), "H = 0"),
        (t(&[2, 6], f), t(&[2, 6], f), t(&[2, 2], DType::F64), "dtypes differ"),
        (t(&[2, 6], DType::I64), t(&[2, 6], DType::I64), t(&[2, 2], DType::I64), "integer operands"),
    ];
    for (x, g, h, why) in cases {
        let err = Tensor::gru_cell(&x, &g, &h).err().unwrap_or_else(|| panic!("gru_cell accepted operands where {why}"));
        assert!(err.to_string().contains("gru_cell"), "{why}: the error must name the op: {err}");
    }
}

/// `relu` fused against its composite (outputs and gradients, bit for bit), in every float
/// dtype the device computes, on odd sizes and sizes of whole vec4s with zeros of both signs,
/// NaN and infinities among the values, rows of a larger tensor (an offset of whole vec4s and
/// one of not), and a strided input.
pub fn relu_matches_composite(d: &Device) {
    let relu = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].relu()?]) };
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for shape in [&[1usize][..], &[3, 7], &[2, 5, 67], &[4, 33]] {
            let mut v: Vec<f64> = values(shape.iter().product(), 64).iter().map(|x| 4.0 * x - 0.5).collect();
            for (i, special) in [0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY].into_iter().enumerate() {
                if let Some(x) = v.get_mut(1 + 3 * i) {
                    *x = special;
                }
            }
            let x = Tensor::from_f64s(&v, shape, dtype, d).unwrap();
            check_fused(&format!("relu {dtype} {shape:?}"), &[x], relu, 0.0, 0.0);
        }
    }
    for cols in [8, 7] {
        let v: Vec<f64> = values(5 * cols, 66).iter().map(|x| x - 0.5).collect();
        let rows = Tensor::from_f64s(&v, &[5, cols], DType::F32, d).unwrap().narrow(0, 1, 4).unwrap();
        check_fused(&format!("relu rows 1.. of [5, {cols}]"), &[rows], relu, 0.0, 0.0);
    }
    let (_, v) = from_values(d, &[4, 6], &values(24, 65), DType::F32);
    check_fused("relu strided", &[strided_input(d, &[4, 6], &v, DType::F32)], relu, 0.0, 0.0);
}

/// `add_relu` ([`crate::ops::AddRelu`] where the device has it) against its composite, exactly:
/// sums that are zero, negative zero, NaN and infinite among them, in every float dtype, over
/// counts that are and are not multiples of four (a device may read four at a time), operands
/// at an offset into their buffers, and operands of two shapes or dtypes (the two ops).
pub fn add_relu_matches_composite(d: &Device) {
    let add_relu = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].add_relu(&x[1])?]) };
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for shape in [&[1usize][..], &[3, 7], &[2, 5, 68], &[4, 33]] {
            let n: usize = shape.iter().product();
            let mut a: Vec<f64> = values(n, 67).iter().map(|x| 4.0 * x - 2.0).collect();
            let b: Vec<f64> = values(n, 68).iter().map(|x| 4.0 * x - 2.0).collect();
            // A sum of zero (a = -b), then NaN and the infinities.
            for (i, special) in [None, Some(f64::NAN), Some(f64::INFINITY), Some(f64::NEG_INFINITY)].into_iter().enumerate() {
                let at = 1 + 3 * i;
                if at < n {
                    a[at] = special.unwrap_or(-b[at]);
                }
            }
            let t = |v: &[f64]| Tensor::from_f64s(v, shape, dtype, d).unwrap();
            check_fused(&format!("add_relu {dtype} {shape:?}"), &[t(&a), t(&b)], add_relu, 0.0, 0.0);
        }
    }
    let v: Vec<f64> = values(6 * 8, 69).iter().map(|x| x - 0.5).collect();
    let rows = |first| Tensor::from_f64s(&v, &[6, 8], DType::F32, d).unwrap().narrow(0, first, 4).unwrap();
    check_fused("add_relu rows at offsets 1 and 2 of [6, 8]", &[rows(1), rows(2)], add_relu, 0.0, 0.0);
    let a = Tensor::from_f64s(&v, &[6, 8], DType::F32, d).unwrap();
    let b = Tensor::from_f64s(&v[..8], &[8], DType::F32, d).unwrap();
    let want = a.add(&b).unwrap().relu().unwrap().to_vec_f64().unwrap();
    assert_eq!(a.add_relu(&b).unwrap().to_vec_f64().unwrap(), want, "add_relu of a broadcast operand");
}

/// An f32 tensor plus an f16 one under autocast ([`crate::ops::AddWide`] where the device has
/// it) against the promoted composite (the f16 operand cast, then added), exactly, forward and
/// backward, either operand first: counts that are and are not multiples of four, NaN and the
/// infinities, operands at an offset into their buffers; and a broadcast operand, which keeps
/// the composite.
pub fn add_wide_matches_composite(d: &Device) {
    let sum = |x: &[Tensor]| -> Result<Vec<Tensor>> { crate::autocast(DType::F16, || Ok(vec![x[0].add(&x[1])?, x[1].add(&x[0])?])) };
    for shape in [&[1usize][..], &[3, 7], &[2, 5, 68], &[4, 33]] {
        let n: usize = shape.iter().product();
        let mut a: Vec<f64> = values(n, 70).iter().map(|x| 4.0 * x - 2.0).collect();
        let b: Vec<f64> = values(n, 71).iter().map(|x| 4.0 * x - 2.0).collect();
        for (i, special) in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY].into_iter().enumerate() {
            if 1 + 3 * i < n {
                a[1 + 3 * i] = special;
            }
        }
        let (wide, low) = (Tensor::from_f64s(&a, shape, DType::F32, d).unwrap(), Tensor::from_f64s(&b, shape, DType::F16, d).unwrap());
        check_fused(&format!("add_wide {shape:?}"), &[wide, low], sum, 0.0, 0.0);
    }
    // Rows 1.. and 2.. of [6, 6] (offsets not in fours) and of [6, 8] (in fours).
    for cols in [6, 8] {
        let v: Vec<f64> = values(6 * cols, 72).iter().map(|x| x - 0.5).collect();
        let rows = |first, dtype| Tensor::from_f64s(&v, &[6, cols], dtype, d).unwrap().narrow(0, first, 4).unwrap();
        check_fused(&format!("add_wide rows 1.. and 2.. of [6, {cols}]"), &[rows(1, DType::F32), rows(2, DType::F16)], sum, 0.0, 0.0);
    }
    let v: Vec<f64> = values(6 * 8, 72).iter().map(|x| x - 0.5).collect();
    let a = Tensor::from_f64s(&v, &[6, 8], DType::F32, d).unwrap();
    let b = Tensor::from_f64s(&v[..8], &[8], DType::F16, d).unwrap();
    let want = a.add(&b.to_dtype(DType::F32).unwrap()).unwrap().to_vec_f64().unwrap();
    let got = crate::autocast(DType::F16, || a.add(&b)).unwrap();
    assert_eq!((got.dtype(), got.to_vec_f64().unwrap()), (DType::F32, want), "add_wide of a broadcast operand");
}

/// A layer norm's gradient summed into a gradient of x gathered already
/// ([`crate::ops::LayerNormBackwardInto`] where the device has it) against its composite, the
/// backward then the add (and the cast of the sum to f16), exactly, with and without
/// parameters, rows short and long. Then through autograd: x's gradient in `x + layer_norm(x)
/// k`, where the residual's share arrives first, is that share plus the layer norm's backward,
/// bit for bit; and under autocast, with `x` itself a residual sum of an f32 and an f16 tensor,
/// every gradient is the one the ops make one by one (under an observer), bit for bit.
pub fn layer_norm_backward_into_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    let bits = |v: &Tensor| v.to_vec_f64().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for width in [5usize, 300] {
        for (weight, bias, low) in
            [(true, true, None), (false, false, None), (true, false, None), (true, true, Some(DType::F16)), (false, false, Some(DType::F16))]
        {
            let o = crate::LayerNormOptions { width, eps: 1e-5, weight, bias };
            let mut inputs = vec![t(&[7, width], 1), t(&[7, width], 2), t(&[7], 3), t(&[7], 4).abs().unwrap()];
            inputs.extend(weight.then(|| t(&[width], 5)));
            inputs.push(t(&[7, width], 6));
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let op = crate::ops::LayerNormBackwardInto { options: o, low };
            let got = crate::fused::run_or_composite(&op, &refs).unwrap();
            let want = op.composite(&refs).unwrap();
            assert_eq!(got.len(), want.len(), "layer_norm_backward_into {o:?}: outputs");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(bits(g), bits(w), "layer_norm_backward_into {o:?}: output {k}, fused against composite");
            }
        }
    }
    for width in [5usize, 300] {
        let o = crate::LayerNormOptions { width, eps: 1e-5, weight: true, bias: true };
        let (x, w, b, k, up) = (t(&[7, width], 11), t(&[width], 12), t(&[width], 13), t(&[7, width], 14), t(&[7, width], 15));
        x.set_requires_grad(true).unwrap();
        x.add(&x.layer_norm(1, Some(&w), Some(&b), 1e-5).unwrap().mul(&k).unwrap()).unwrap().mul(&up).unwrap().sum_all().unwrap().backward().unwrap();
        let stats = crate::fused::run_or_composite(&LayerNorm(o), &[&x.detach(), &w, &b]).unwrap();
        let dy = up.mul(&k).unwrap();
        let dx = crate::fused::run_or_composite(&LayerNormBackward(o), &[&x.detach(), &dy, &stats[1], &stats[2], &w]).unwrap();
        let want = up.add(&dx[0]).unwrap();
        assert_eq!(bits(&x.grad().unwrap()), bits(&want), "x + layer_norm(x) k, width {width}: x's gradient");
    }
    for width in [5usize, 300] {
        let (x, w, b, k, up) = (t(&[7, width], 21), t(&[width], 22), t(&[width], 23), t(&[7, width], 24), t(&[7, width], 25));
        let run = || {
            for p in [&x, &w, &b] {
                p.set_grad(None);
                p.set_requires_grad(true).unwrap();
            }
            crate::autocast(DType::F16, || {
                let x1 = x.add(&x.to_dtype(DType::F16)?.mul_scalar(0.5)?)?;
                x1.add(&x1.layer_norm(1, Some(&w), Some(&b), 1e-5)?.mul(&k)?)?.mul(&up)?.sum_all()?.backward()
            })
            .unwrap();
            [&x, &w, &b].map(|p| bits(&p.grad().unwrap()))
        };
        let fused = run();
        let one_by_one = crate::observe::observe_ops(|_| {}, run);
        assert!(fused == one_by_one, "autocast's residual sum into a layer norm, width {width}: the gradients differ from the ops' one by one");
    }
}

/// A layer norm with its output's f16 copy ([`crate::ops::LayerNormLow`] where the device has
/// it) against the composite, bit for bit. Then autocast's use of it: a layer norm whose output
/// a product casts writes that cast itself from its second region on, and the product takes it
/// (where the device has the kernel), with the outputs and gradients of the ops one by one; a
/// copy no cast takes stops the copies.
pub fn layer_norm_low_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    let bits = |v: &Tensor| v.to_vec_f64().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for width in [5usize, 300] {
        for (weight, bias) in [(true, true), (false, false), (true, false)] {
            let o = crate::LayerNormOptions { width, eps: 1e-5, weight, bias };
            let mut inputs = vec![t(&[7, width], 1).mul_scalar(3e4).unwrap()];
            inputs.extend(weight.then(|| t(&[width], 2)));
            inputs.extend(bias.then(|| t(&[width], 3)));
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let op = crate::ops::LayerNormLow { options: o, low: DType::F16 };
            let got = crate::fused::run_or_composite(&op, &refs).unwrap();
            let want = op.composite(&refs).unwrap();
            assert_eq!(got.len(), 4, "layer_norm_low {o:?}: outputs");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.dtype(), w.dtype(), "layer_norm_low {o:?}: output {k}'s type");
                assert_eq!(bits(g), bits(w), "layer_norm_low {o:?}: output {k}, fused against composite");
            }
        }
    }
    let runs = kernel_runs(
        d,
        &crate::ops::LayerNormLow { options: crate::LayerNormOptions { width: 5, eps: 1e-5, weight: true, bias: true }, low: DType::F16 },
        DType::F32,
    );
    for width in [5usize, 300] {
        let (x, w, b, lw, lb) = (t(&[6, width], 31), t(&[width], 32), t(&[width], 33), t(&[4, width], 34), t(&[4], 35));
        let params = [&x, &w, &b, &lw, &lb];
        // `cast`: the product reads the layer norm's output (cast), or only an f32 sum does.
        let step = |cast: bool| {
            for p in params {
                p.set_grad(None);
                p.set_requires_grad(true).unwrap();
            }
            let taken = crate::autocast::low_copies_taken();
            let loss = crate::autocast(DType::F16, || {
                let y = x.layer_norm(1, Some(&w), Some(&b), 1e-5)?;
                let out = if cast { y.linear(&lw, Some(&lb))?.to_dtype(DType::F32)?.sum_all()? } else { y.sum_all()? };
                out.backward()?;
                Ok::<_, crate::Error>(out)
            })
            .unwrap();
            let grads: Vec<_> = params.iter().map(|p| p.grad().map(|g| bits(&g))).collect();
            ((bits(&loss), grads), crate::autocast::low_copies_taken() - taken)
        };
        let (first, second, third) = (step(true), step(true), step(true));
        let one_by_one = crate::observe::observe_ops(|_| {}, || step(true)).0;
        assert_eq!(first.1, 0, "width {width}: the first region casts the layer norm's output itself");
        assert_eq!([second.1, third.1], [runs as u64; 2], "width {width}: the later regions take the layer norm's copy where the device writes one");
        for (k, s) in [first, second, third].into_iter().enumerate() {
            assert!(s.0 == one_by_one, "width {width}, region {k}: the loss or a gradient differs from the ops' one by one");
        }
        // A region whose product does not read it leaves its copy untaken, and then none is made.
        step(false);
        assert_eq!(step(true).1, 0, "width {width}: an untaken copy stops the copies");
        assert_eq!(step(true).1, runs as u64, "width {width}: a cast again brings them back");
    }
}

/// A residual add and the layer norm of its sum ([`crate::ops::AddLayerNorm`] where the device
/// has it) against the composite, the add then the layer norm, bit for bit: an f32 addend, an
/// f16 one and a bf16 one, with the output's f16 copy or without, with and without parameters,
/// rows short and long. Then through autograd: [`Tensor::add_layer_norm`] in an f32 block and
/// in f16 and bf16 autocast blocks (whose next product casts the norm's output), several
/// regions each, gives the losses and gradients of the ops one by one (under an observer), bit
/// for bit.
pub fn add_layer_norm_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    let bits = |v: &Tensor| v.to_vec_f64().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for width in [5usize, 300] {
        for (weight, bias) in [(true, true), (false, false), (true, false)] {
            for addend in [DType::F32, DType::F16, DType::BF16] {
                for low in [None, Some(DType::F16)] {
                    let o = crate::LayerNormOptions { width, eps: 1e-5, weight, bias };
                    let mut inputs = vec![t(&[7, width], 1).mul_scalar(300.0).unwrap()];
                    inputs.extend(weight.then(|| t(&[width], 2)));
                    inputs.extend(bias.then(|| t(&[width], 3)));
                    inputs.push(t(&[7, width], 4).mul_scalar(100.0).unwrap().to_dtype(addend).unwrap());
                    let refs: Vec<&Tensor> = inputs.iter().collect();
                    let op = crate::ops::AddLayerNorm { options: o, low };
                    let got = crate::fused::run_or_composite(&op, &refs).unwrap();
                    let want = op.composite(&refs).unwrap();
                    let what = format!("add_layer_norm {o:?}, addend {addend}, low {low:?}");
                    assert_eq!(got.len(), 4 + low.is_some() as usize, "{what}: outputs");
                    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!((g.dtype(), g.shape()), (w.dtype(), w.shape()), "{what}: output {k}'s type and shape");
                        assert_eq!(bits(g), bits(w), "{what}: output {k}, fused against composite");
                    }
                }
            }
        }
    }
    for width in [5usize, 300] {
        let (x, w, b, lw, lb, k) = (t(&[6, width], 41), t(&[width], 42), t(&[width], 43), t(&[width, width], 44), t(&[width], 45), t(&[6, width], 46));
        let params = [&x, &w, &b, &lw, &lb];
        // A pre-norm block: `s, h = x + f(x), norm(x + f(x))`, then a product of h and s again.
        let step = |low: Option<DType>| {
            for p in params {
                p.set_grad(None);
                p.set_requires_grad(true).unwrap();
            }
            let block = || {
                let branch = x.linear(&lw, Some(&lb))?.mul_scalar(0.5)?;
                let (s, h) = x.add_layer_norm(&branch, 1, Some(&w), Some(&b), 1e-5)?;
                let out = s.add(&h.linear(&lw, Some(&lb))?)?.to_dtype(DType::F32)?.mul(&k)?.sum_all()?;
                out.backward()?;
                Ok::<_, crate::Error>(out)
            };
            let loss = match low {
                Some(low) => crate::autocast(low, block),
                None => block(),
            }
            .unwrap();
            (bits(&loss), params.map(|p| bits(&p.grad().unwrap())))
        };
        for low in [None, Some(DType::F16), Some(DType::BF16)] {
            let regions = [step(low), step(low), step(low)];
            let one_by_one = crate::observe::observe_ops(|_| {}, || step(low));
            for (r, got) in regions.iter().enumerate() {
                assert!(
                    *got == one_by_one,
                    "add_layer_norm, width {width}, autocast {low:?}, region {r}: the loss or a gradient differs from the ops' one by one"
                );
            }
        }
    }
}

/// Many f32 tensors cast to f16 and to bf16 at once ([`crate::ops::CastAll`] where the device
/// has it) against the casts one by one, exactly: more tensors than one dispatch takes, odd and
/// even counts on either side of a workgroup's 1,024, values past the low type's range and below
/// its normals. Then
/// [`crate::cast_ahead`]: a second region over the same parameters finds them cast where the
/// kernel runs, and its outputs and gradients are those of a region that casts as it goes.
pub fn cast_all_matches_composite(d: &Device) {
    let sizes = [1usize, 3, 1024, 1025, 4103, 6, 2000, 2, 301, 9, 3000];
    for low in [DType::F16, DType::BF16] {
        let inputs: Vec<Tensor> = sizes
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let mut v: Vec<f64> = values(n, 90 + k as u64).iter().map(|x| 4.0 * x - 2.0).collect();
                for (i, special) in [70000.0, -1e-6, 3e-8, 65519.0, 3.4e38].into_iter().enumerate() {
                    if 2 * i + 1 < n {
                        v[2 * i + 1] = special;
                    }
                }
                Tensor::from_f64s(&v, &[n], DType::F32, d).unwrap()
            })
            .collect();
        let ran = crate::conformance::custom::check_op(d, &crate::ops::CastAll(low), &inputs, 0.0, 0.0);

        // Weights `[k + 2, 4]` and their biases, of odd lengths too.
        let params: Vec<Tensor> = (0..10)
            .flat_map(|k| {
                let w = Tensor::from_f64s(&values(4 * (k + 2), 95 + k as u64), &[k + 2, 4], DType::F32, d).unwrap();
                [w, Tensor::from_f64s(&values(k + 2, 195 + k as u64), &[k + 2], DType::F32, d).unwrap()]
            })
            .collect();
        let x = Tensor::from_f64s(&values(12, 99), &[3, 4], DType::F32, d).unwrap();
        let step = |ahead: bool| -> (Vec<f64>, Vec<Vec<f64>>) {
            for p in &params {
                p.set_requires_grad(true).unwrap();
                p.set_grad(None);
            }
            let loss = crate::autocast(low, || -> Result<Tensor> {
                if ahead {
                    crate::cast_ahead(&params)?;
                    let cached = params.iter().all(|p| crate::autocast::is_cached(p, low));
                    assert!(!ran || cached, "cast_ahead to {low}: every parameter cast where the device has the kernel");
                }
                let mut loss = Tensor::zeros(&[], DType::F32, d)?;
                for p in params.chunks(2) {
                    // Twice each: the second use finds the first's cast.
                    let y = x.linear(&p[0], Some(&p[1]))?.add(&x.linear(&p[0], Some(&p[1]))?)?;
                    loss = loss.add(&y.to_dtype(DType::F32)?.sum_all()?)?;
                }
                Ok(loss)
            })
            .unwrap();
            loss.backward().unwrap();
            let grads = params.iter().map(|p| p.grad().expect("a gradient").to_vec_f64().unwrap()).collect();
            (loss.to_vec_f64().unwrap(), grads)
        };
        let plain = step(false);
        assert_eq!(step(true), plain, "cast_ahead to {low}: the loss and the gradients of casting as it goes");
    }
}

/// Max pooling's gradient ([`crate::ops::MaxPool2dBackward`] where the device has it) against the
/// composite (dy scattered into zeros at the indices): windows that tile the input, that leave
/// its last rows and columns out (a device may take windows that tile apart), that overlap (several windows choosing one pixel: their dy
/// summed), with padding and with dilation; ties (the first tap wins) and every float type.
pub fn max_pool_backward_matches_composite(d: &Device) {
    type Geometry = ([usize; 4], (usize, usize), (usize, usize), (usize, usize), (usize, usize));
    let cases: [Geometry; 6] = [
        ([2, 3, 8, 8], (2, 2), (2, 2), (0, 0), (1, 1)),
        ([2, 3, 7, 9], (2, 2), (2, 2), (0, 0), (1, 1)),
        ([1, 2, 8, 7], (3, 2), (3, 2), (0, 0), (1, 1)),
        ([1, 2, 9, 9], (3, 3), (2, 2), (1, 1), (1, 1)),
        ([1, 2, 6, 7], (3, 2), (1, 1), (1, 1), (1, 1)),
        ([2, 1, 9, 8], (2, 2), (1, 2), (0, 0), (2, 2)),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let (atol, rtol) = if matches!(dtype, DType::F32 | DType::F64) { (1e-6, 1e-6) } else { (1e-2, 1e-2) };
        for (shape, k, s, p, dil) in cases {
            let n: usize = shape.iter().product();
            // Values on a coarse grid: many ties within a window.
            let v: Vec<f64> = values(n, 70).iter().map(|x| (x * 6.0).round()).collect();
            let x = Tensor::from_f64s(&v, &shape, dtype, d).unwrap();
            let pool = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].max_pool2d(k, s, p, dil)?]) };
            check_fused(&format!("max_pool2d backward {dtype} {shape:?} kernel {k:?} stride {s:?} padding {p:?} dilation {dil:?}"), &[x], pool, atol, rtol);
        }
    }
}

/// `conv2d_relu` with a bias ([`crate::ops::Conv2dBiasRelu`] where the device has it) against the
/// composite (im2col, matmul, the bias added, ReLU), outputs and the gradients of input, weight
/// and bias: inputs of both signs so that about half the outputs are cut to 0, stride 1 with
/// padding, stride 2, two groups, a long K (which a device may split, the bias and ReLU then
/// applied after), in f32; f16 and bf16 on the first case, and f16 on two groups of 32
/// channels (which a GPU may run on its tensor cores, the bias and ReLU applied as y is
/// stored). Without a bias it is `conv2d` and `relu`, checked too.
pub fn conv2d_relu_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed, dtype| {
        let v: Vec<f64> = values(shape.iter().product(), seed).iter().map(|x| x - 0.5).collect();
        Tensor::from_f64s(&v, shape, dtype, d).unwrap()
    };
    // (x, weight, stride, padding, groups)
    type Case<'a> = (&'a [usize], &'a [usize], usize, usize, usize);
    let cases: [Case; 5] = [
        (&[2, 3, 7, 7], &[8, 3, 3, 3], 1, 1, 1),
        (&[1, 8, 9, 9], &[16, 8, 3, 3], 2, 1, 1),
        (&[2, 4, 6, 6], &[6, 2, 3, 3], 1, 0, 2),
        (&[1, 256, 4, 4], &[4, 256, 3, 3], 1, 1, 1),
        (&[2, 64, 6, 6], &[80, 32, 3, 3], 1, 1, 2),
    ];
    let runs: [(DType, f64, f64, &[usize]); 3] = [(DType::F32, 1e-5, 1e-5, &[0, 1, 2, 3]), (DType::F16, 2e-2, 1e-2, &[0, 4]), (DType::BF16, 5e-2, 2e-2, &[0])];
    for (dtype, atol, rtol, which) in runs {
        for (i, &(xs, ws, s, p, g)) in cases.iter().enumerate().filter(|(i, _)| which.contains(i)) {
            let seed = 120 + 3 * i as u64;
            let inputs = [t(xs, seed, dtype), t(ws, seed + 1, dtype), t(&[ws[0]], seed + 2, dtype)];
            let f = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].conv2d_relu(&x[1], Some(&x[2]), (s, s), (p, p), (1, 1), g)?]) };
            check_fused(&format!("conv2d_relu {dtype} {xs:?} * {ws:?} stride {s} padding {p} groups {g}"), &inputs, f, atol, rtol);
        }
    }
    let no_bias = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].conv2d_relu(&x[1], None, (1, 1), (1, 1), (1, 1), 1)?]) };
    check_fused("conv2d_relu f32 without a bias", &[t(&[2, 3, 5, 5], 140, DType::F32), t(&[4, 3, 3, 3], 141, DType::F32)], no_bias, 1e-5, 1e-5);
}

/// ReLU's backward rule and `add_relu`'s (fused where the device can) against finite differences in f64, with
/// fusion on and off, composed with another op so the incoming gradient is not all ones.
pub fn relu_grads(d: &Device) {
    let f = |x: &[Tensor]| x[0].relu()?.mul(&x[0]);
    for shape in [&[3usize, 5][..], &[2, 6]] {
        check_grads("relu (fused where the device can)", &[leaf(d, shape, 66)], f, 1e-7, 1e-6);
        no_fusion(|| check_grads("relu (composite)", &[leaf(d, shape, 66)], f, 1e-7, 1e-6));
    }
    let f = |x: &[Tensor]| x[0].add_relu(&x[1])?.mul(&x[0]);
    let inputs = || [leaf(d, &[3, 5], 67), leaf(d, &[3, 5], 68)];
    check_grads("add_relu (fused where the device can)", &inputs(), f, 1e-7, 1e-6);
    no_fusion(|| check_grads("add_relu (composite)", &inputs(), f, 1e-7, 1e-6));
}

/// `linear` with its bias fused ([`crate::ops::MatmulBias`]) against the product and the add,
/// outputs and the gradients of input, weight and bias: rows and columns that fill no tile
/// (5 outputs, where columns past the last are read but not stored), several row tiles, a
/// small output over a long K (split, the bias added after), a folded 3-D input, a transposed
/// input (the composite either way), and one weight and bias in two products (whose weight
/// gradients the engine gathers), in f32; f16 and bf16 on the first, the split and the 3-D
/// case (whose 4 columns a packed product stores whole, its bias added in the kernel).
pub fn linear_bias_matches_composite(d: &Device) {
    let t = |shape: &[usize], seed, dtype| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
    let linear = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].linear(&x[1], Some(&x[2]))?]) };
    let cases: [(&[usize], usize); 4] = [(&[6, 8], 5), (&[70, 36], 12), (&[3, 1024], 16), (&[2, 5, 8], 4)];
    // f32 every case; the halves (whose products may run elsewhere: tensor cores, packed bf16)
    // all but the second, to keep the suite short on a software GPU.
    for (dtype, atol, rtol, count) in [(DType::F32, 1e-5, 1e-5, 4), (DType::F16, 2e-2, 1e-2, 4), (DType::BF16, 5e-2, 2e-2, 4)] {
        for (i, &(xs, n)) in cases.iter().enumerate().take(count).filter(|&(i, _)| dtype == DType::F32 || i != 1) {
            let k = xs[xs.len() - 1];
            let seed = 90 + 3 * i as u64;
            let inputs = [t(xs, seed, dtype), t(&[n, k], seed + 1, dtype), t(&[n], seed + 2, dtype)];
            check_fused(&format!("linear {dtype} {xs:?} x [{n}, {k}]^T + bias"), &inputs, linear, atol, rtol);
        }
    }
    let xt = strided_input(d, &[6, 8], &values(48, 80), DType::F32);
    check_fused("linear f32 transposed input", &[xt, t(&[5, 8], 81, DType::F32), t(&[5], 82, DType::F32)], linear, 1e-5, 1e-5);
    let twice = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].linear(&x[2], Some(&x[3]))?.add(&x[1].linear(&x[2], Some(&x[3]))?)?]) };
    let inputs = [t(&[4, 8], 83, DType::F32), t(&[4, 8], 84, DType::F32), t(&[12, 8], 85, DType::F32), t(&[12], 86, DType::F32)];
    check_fused("linear f32, one weight in two products", &inputs, twice, 1e-5, 1e-5);
}

/// A feed-forward block on GELU as one op ([`Tensor::gelu_mlp`], whose kernels, where a device
/// has them, write the hidden layer and its GELU from one product, [`crate::ops::LinearGelu`],
/// and take GELU's gradient as the product of `dy` and the second weight is stored,
/// [`crate::ops::MatmulGeluBackward`]) against `linear`, `gelu` and `linear`, and with fusion
/// on and off, the output and every input's gradient: rows and columns that fill no tile
/// (hidden layers of 7 and 9: a ragged last vec4), several tiles each way, a folded 3-D input,
/// no biases; then each kernel against its composite on a transposed operand.
pub fn gelu_mlp_matches_composite(d: &Device) {
    use crate::ops::{LinearGelu, MatmulGeluBackward};
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    let one = |bias: bool| {
        move |x: &[Tensor]| -> Result<Vec<Tensor>> {
            let (b1, b2) = if bias { (Some(&x[2]), Some(&x[4])) } else { (None, None) };
            let w2 = if bias { &x[3] } else { &x[2] };
            Ok(vec![x[0].gelu_mlp(&x[1], b1, w2, b2)?])
        }
    };
    let chain = |bias: bool| {
        move |x: &[Tensor]| -> Result<Vec<Tensor>> {
            let (b1, b2) = if bias { (Some(&x[2]), Some(&x[4])) } else { (None, None) };
            let w2 = if bias { &x[3] } else { &x[2] };
            Ok(vec![x[0].linear(&x[1], b1)?.gelu()?.linear(w2, b2)?])
        }
    };
    // (x, hidden, out, biases)
    let cases: [(&[usize], usize, usize, bool); 4] = [(&[6, 5], 7, 5, true), (&[130, 20], 68, 36, true), (&[2, 5, 8], 9, 4, true), (&[9, 12], 8, 3, false)];
    for (i, &(xs, hidden, out, bias)) in cases.iter().enumerate() {
        let k = xs[xs.len() - 1];
        let seed = 300 + 5 * i as u64;
        let mut inputs = vec![t(xs, seed), t(&[hidden, k], seed + 1)];
        inputs.extend(bias.then(|| t(&[hidden], seed + 2)));
        inputs.push(t(&[out, hidden], seed + 3));
        inputs.extend(bias.then(|| t(&[out], seed + 4)));
        let what = format!("gelu_mlp {xs:?} through {hidden} to {out}, biases {bias}");
        // Sums over 130 rows of terms near 4 that largely cancel: 1e-4.
        check_fused(&what, &inputs, one(bias), 1e-4, 1e-4);
        let (got, want) = (outputs_and_grads(&what, &inputs, one(bias)), outputs_and_grads(&what, &inputs, chain(bias)));
        for (k, (g, w)) in got.0.iter().chain(&got.1).zip(want.0.iter().chain(&want.1)).enumerate() {
            assert!(!w.is_empty(), "{what}: term {k} is empty");
            assert_close(&format!("{what}: term {k} (the output, then each input's gradient) against linear, gelu, linear"), g, w, 1e-4, 1e-4);
        }
    }
    let dy = strided_input(d, &[70, 20], &values(1400, 320), DType::F32);
    check_op(d, &MatmulGeluBackward, &[dy, t(&[20, 67], 321), t(&[70, 67], 322)], 1e-5, 1e-5);
    let x = strided_input(d, &[70, 20], &values(1400, 323), DType::F32);
    check_op(d, &LinearGelu, &[x, t(&[67, 20], 324), t(&[67], 325)], 1e-5, 1e-5);
}

/// A linear layer's weight and bias gradients in f32 from one kernel of f16 operands
/// ([`crate::ops::LinearGrads`], autocast's) against the product and the sum, where the device
/// has it: products large enough for tensor cores (one with ragged tiles), a small one, and
/// `g` and `x` stored transposed; then in backward under f16 autocast, with fusion on and off:
/// a linear layer, and a product and a bias add written out, the product read by the add alone
/// and by another op too (whose weight gradient must then count both).
pub fn linear_grads_matches_composite(d: &Device) {
    use crate::ops::LinearGrads;
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
    let h = |shape: &[usize], seed| t(shape, seed).to_dtype(DType::F16).unwrap();
    for (i, &(m, n, k)) in [(2048, 512, 256), (1024, 1540, 260), (520, 70, 20)].iter().enumerate() {
        let seed = 200 + 4 * i as u64;
        let (g, x) = (h(&[m, n], seed), h(&[m, k], seed + 1));
        let (gt, xt) = (h(&[n, m], seed + 2).t().unwrap(), h(&[k, m], seed + 3).t().unwrap());
        for (g, x) in [(&g, &x), (&gt, &xt)] {
            check_op(d, &LinearGrads { wide: true }, &[g.clone(), x.clone()], 1e-3, 1e-4);
        }
    }
    let low = |f: &dyn Fn() -> Result<Vec<Tensor>>| crate::autocast(DType::F16, f);
    let layer = |x: &[Tensor]| -> Result<Vec<Tensor>> { low(&|| Ok(vec![x[0].linear(&x[1], Some(&x[2]))?])) };
    let inputs = [t(&[2048, 256], 228), t(&[512, 256], 229), t(&[512], 230)];
    check_fused("linear under f16 autocast, [2048, 256] x [512, 256]^T", &inputs, layer, 2e-2, 1e-2);
    for shared in [false, true] {
        let written = |x: &[Tensor]| -> Result<Vec<Tensor>> {
            low(&|| {
                let p = x[0].linear(&x[1], None)?;
                let y = p.add(&x[2].to_dtype(DType::F16)?)?;
                Ok(vec![if shared { y.add(&p.mul_scalar(0.5)?)? } else { y }])
            })
        };
        let inputs = [t(&[2048, 256], 231), t(&[512, 256], 232), t(&[512], 233)];
        check_fused(&format!("a product and a bias add under f16 autocast, the product shared: {shared}"), &inputs, written, 2e-2, 1e-2);
    }
}

/// [`crate::ops::SumChannels`] against its composite, in each float type into its own type and
/// into f32: odd and even runs, one channel, a run of one, channels long enough to be summed
/// in chunks (packed bf16's too).
pub fn sum_channels_matches_composite(d: &Device) {
    use crate::ops::SumChannels;
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        // In a low type the composite rounds its partial sums (8,192 values a channel at most);
        // the same kernel's sums into f32 are held to f32's.
        let (atol, rtol) = match dtype {
            DType::F32 => (1e-4, 1e-5),
            _ => (0.5, 3e-2),
        };
        for (i, shape) in [&[2usize, 3, 5][..], &[3, 4, 2, 3], &[5, 1, 6], &[4, 6, 1], &[16, 24, 12, 12], &[8, 8, 32, 32]].into_iter().enumerate() {
            let x = Tensor::from_f64s(&values(shape.iter().product(), 190 + i as u64), shape, dtype, d).unwrap();
            for wide in [false, true] {
                let (atol, rtol) = if wide { (1e-4, 1e-5) } else { (atol, rtol) };
                check_op(d, &SumChannels { wide }, std::slice::from_ref(&x), atol, rtol);
            }
        }
    }
}

/// A product of low-precision matrices summed into f32 ([`crate::ops::MatmulWide`]) against
/// its composite (both widened, then the f32 product) where the device has the kernel:
/// row-major and transposed operands, ragged tiles, a K long enough to be split, a product
/// large enough for tensor cores where the device has them; and a sum
/// over rows into f32 ([`crate::ops::SumRowsWide`]): a matrix, a 3-D tensor, rows enough to be
/// cut into chunks, columns in fours as a bias gradient's. Then their use in backward under f16 autocast, where a linear layer's
/// weight and bias gradients are summed into f32 for the f32 parameters (the engine's
/// `widen.rs`), against the f16 product and sum cast back (fusion off): one layer, a folded
/// 3-D input, one weight in two products (gathered into one), and a weight without a bias;
/// bf16 alike (where the device sums it in bf16, both runs agree).
pub fn matmul_wide_matches_composite(d: &Device) {
    use crate::ops::{MatmulWide, SumRowsWide};
    let t = |shape: &[usize], seed, dtype| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
    for low in [DType::F16, DType::BF16] {
        // A device with the kernel takes every such product (whichever of its kernels it routes
        // it to), so none may fall back unnoticed. The last is large enough for tensor cores.
        let every = kernel_runs(d, &MatmulWide, low);
        for (i, &(m, k, n)) in [(6, 8, 5), (70, 36, 12), (16, 1024, 8), (260, 768, 192), (512, 1024, 640)].iter().enumerate() {
            let seed = 150 + 4 * i as u64;
            let (a, b) = (t(&[m, k], seed, low), t(&[k, n], seed + 1, low));
            let (at, bt) = (t(&[k, m], seed + 2, low).t().unwrap(), t(&[n, k], seed + 3, low).t().unwrap());
            for (x, y) in [(&a, &b), (&at, &bt), (&a, &bt)] {
                let ran = check_op(d, &MatmulWide, &[x.clone(), y.clone()], 1e-4, 1e-4);
                assert!(ran || !every, "matmul_wide {low} [{m}, {k}] x [{k}, {n}] fell back to its composite");
            }
        }
        for (i, shape) in [&[6usize, 5][..], &[3, 4, 7], &[4096, 12], &[700, 192], &[3, 300, 260]].into_iter().enumerate() {
            check_op(d, &SumRowsWide, &[t(shape, 160 + i as u64, low)], 1e-5, 1e-5);
        }
    }
    for (low, atol, rtol) in [(DType::F16, 2e-2, 1e-2), (DType::BF16, 5e-2, 2e-2)] {
        let layer = |x: &[Tensor]| -> Result<Vec<Tensor>> { crate::autocast(low, || Ok(vec![x[0].linear(&x[1], Some(&x[2]))?])) };
        for (i, (xs, n)) in [(&[6usize, 8][..], 5), (&[2, 5, 8], 12), (&[64, 40], 24)].into_iter().enumerate() {
            let k = xs[xs.len() - 1];
            let seed = 170 + 3 * i as u64;
            let inputs = [t(xs, seed, DType::F32), t(&[n, k], seed + 1, DType::F32), t(&[n], seed + 2, DType::F32)];
            check_fused(&format!("linear under {low} autocast, {xs:?} x [{n}, {k}]^T"), &inputs, layer, atol, rtol);
        }
        let twice = |x: &[Tensor]| -> Result<Vec<Tensor>> {
            crate::autocast(low, || Ok(vec![x[0].linear(&x[2], Some(&x[3]))?.add(&x[1].linear(&x[2], Some(&x[3]))?)?]))
        };
        let inputs = [t(&[4, 8], 180, DType::F32), t(&[4, 8], 181, DType::F32), t(&[12, 8], 182, DType::F32), t(&[12], 183, DType::F32)];
        check_fused(&format!("linear under {low} autocast, one weight in two products"), &inputs, twice, atol, rtol);
        let no_bias = |x: &[Tensor]| -> Result<Vec<Tensor>> { crate::autocast(low, || Ok(vec![x[0].linear(&x[1], None)?])) };
        check_fused(&format!("linear under {low} autocast, no bias"), &[t(&[7, 16], 184, DType::F32), t(&[9, 16], 185, DType::F32)], no_bias, atol, rtol);
    }
}

/// `gelu` fused against its composite (outputs and gradients), in every float dtype the
/// device computes, on odd sizes and a size in fours (four elements an invocation where the
/// device has that kernel), large magnitudes (where erf saturates) and a strided input.
pub fn gelu_matches_composite(d: &Device) {
    let gelu = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].gelu()?]) };
    for (dtype, atol, rtol) in [(DType::F32, 1e-6, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 2e-3, 2e-3), (DType::BF16, 2e-2, 2e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for shape in [&[1usize][..], &[3, 7], &[2, 5, 67], &[3, 68]] {
            let mut v: Vec<f64> = values(shape.iter().product(), 61).iter().map(|x| 4.0 * x).collect();
            v[0] = -9.0;
            let x = Tensor::from_f64s(&v, shape, dtype, d).unwrap();
            check_fused(&format!("gelu {dtype} {shape:?}"), &[x], gelu, atol, rtol);
        }
    }
    let (_, v) = from_values(d, &[4, 6], &values(24, 62), DType::F32);
    check_fused("gelu strided", &[strided_input(d, &[4, 6], &v, DType::F32)], gelu, 1e-6, 1e-5);
}

/// The fused GELU's backward rule against finite differences in f64, with fusion on and off,
/// composed with another op so the incoming gradient is not all ones.
pub fn gelu_grads(d: &Device) {
    let f = |x: &[Tensor]| x[0].gelu()?.mul(&x[0]);
    check_grads("gelu (fused where the device can)", &[leaf(d, &[3, 5], 63)], f, 1e-7, 1e-6);
    no_fusion(|| check_grads("gelu (composite)", &[leaf(d, &[3, 5], 63)], f, 1e-7, 1e-6));
}

/// `bce_loss` fused against its composite (the loss and the gradient of the probabilities),
/// in every float dtype the device computes: probabilities in (0, 1) and exactly 0 and 1 (where
/// the log is clamped at -100 and its slope is 0), targets in [0, 1], each reduction, a strided
/// input. The target takes no gradient (the fused path's condition).
pub fn bce_matches_composite(d: &Device) {
    use crate::Reduction;
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 2e-2, 2e-2), (DType::BF16, 5e-2, 5e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for (shape, reduction) in [(&[1usize][..], Reduction::Sum), (&[3, 7], Reduction::Mean), (&[2, 5, 67], Reduction::Sum), (&[4, 9], Reduction::None)] {
            let n = shape.iter().product();
            let mut p = super::positive_values(n, 71, 0.02, 0.98);
            let y = super::positive_values(n, 72, 0.0, 1.0);
            if n > 3 {
                (p[0], p[1], p[2]) = (0.0, 1.0, 1e-30);
            }
            let y = Tensor::from_f64s(&y, shape, dtype, d).unwrap();
            let bce = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].bce_loss(&y, reduction)?]) };
            let p = Tensor::from_f64s(&p, shape, dtype, d).unwrap();
            check_fused(&format!("bce_loss {dtype} {shape:?} {reduction:?}"), &[p], bce, atol, rtol);
        }
    }
    let (_, v) = from_values(d, &[4, 6], &super::positive_values(24, 73, 0.05, 0.95), DType::F32);
    let y = Tensor::from_f64s(&super::positive_values(24, 74, 0.0, 1.0), &[4, 6], DType::F32, d).unwrap();
    let bce = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].bce_loss(&y, crate::Reduction::Sum)?]) };
    check_fused("bce_loss strided", &[strided_input(d, &[4, 6], &v, DType::F32)], bce, 1e-5, 1e-5);
}

/// The fused binary cross-entropy's backward rule against finite differences in f64, with
/// fusion on and off, the probabilities inside (0, 1) and composed with another op so the
/// incoming gradient is not all ones.
pub fn bce_grads(d: &Device) {
    let y = Tensor::from_f64s(&super::positive_values(15, 76, 0.0, 1.0), &[3, 5], DType::F64, d).unwrap();
    let f = |x: &[Tensor]| x[0].bce_loss(&y, crate::Reduction::None)?.mul(&x[0]);
    let p = || super::grads::positive_leaf(d, &[3, 5], 75, 0.05, 0.95);
    check_grads("bce_loss (fused where the device can)", &[p()], f, 1e-7, 1e-6);
    no_fusion(|| check_grads("bce_loss (composite)", &[p()], f, 1e-7, 1e-6));
}

/// Fused attention without a mask, forward and backward, against the composite: heads as
/// `[N, L, E]` and `[N, H, L, E]`, odd lengths and widths, the heads of a packed projection
/// read as they lie (strided views of one tensor), f32, f16 and bf16, and keys too many for the
/// kernel (the composite both ways); and the joined gradient against the three stacked.
pub fn attention_matches_composite(d: &Device) {
    let sdpa = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].scaled_dot_product_attention(&x[1], &x[2], None, false, None)?]) };
    // The heads of x [N, L, 3 H hd] as [N, H, L, hd] views, as multi-head attention takes them.
    let packed = |h: usize, hd: usize| {
        move |x: &[Tensor]| -> Result<Vec<Tensor>> {
            let (n, l) = (x[0].shape()[0], x[0].shape()[1]);
            let mut parts = x[0].chunk(3, -1isize)?.into_iter().map(|t| t.reshape(&[n, l, h, hd])?.permute(&[0, 2, 1, 3]));
            let mut next = || parts.next().expect("three chunks");
            let (q, k, v) = (next()?, next()?, next()?);
            Ok(vec![q.scaled_dot_product_attention(&k, &v, None, false, Some(0.3))?])
        }
    };
    // f16 and bf16 against a composite that rounds its scores and probabilities to their type
    // (bf16's gradients there are the less accurate side: the wgpu backend's `bf16.rs`).
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-4), (DType::F16, 2e-2, 2e-2), (DType::BF16, 2.5e-1, 1e-1)] {
        // Heads up to a ViT's 65 tokens, and longer ones up to the 80 a GPU kernel's tile takes.
        let shapes: [[&[usize]; 3]; 6] = [
            [&[2, 3, 7, 4], &[2, 3, 5, 4], &[2, 3, 5, 6]],
            [&[2, 2, 65, 64], &[2, 2, 65, 64], &[2, 2, 65, 64]],
            [&[1, 2, 70, 16], &[1, 2, 80, 16], &[1, 2, 80, 8]],
            [&[3, 9, 8], &[3, 11, 8], &[3, 11, 8]],
            [&[1, 2, 33, 16], &[1, 2, 40, 16], &[1, 2, 40, 5]],
            [&[1, 2, 3, 4], &[1, 2, 200, 4], &[1, 2, 200, 4]],
        ];
        for (k, [qs, ks, vs]) in shapes.into_iter().enumerate() {
            let t = |shape: &[usize], seed| {
                let v: Vec<f64> = values(shape.iter().product(), seed).iter().map(|x| 2.0 * x).collect();
                Tensor::from_f64s(&v, shape, dtype, d).unwrap()
            };
            let inputs = [t(qs, 80 + 3 * k as u64), t(ks, 81 + 3 * k as u64), t(vs, 82 + 3 * k as u64)];
            check_fused(&format!("attention {dtype} {qs:?} {ks:?} {vs:?}"), &inputs, sdpa, atol, rtol);
        }
        let x = Tensor::from_f64s(&values(2 * 9 * 3 * 2 * 8, 90), &[2, 9, 3 * 2 * 8], dtype, d).unwrap();
        check_fused(&format!("attention {dtype}, the heads of a packed projection"), &[x], packed(2, 8), atol, rtol);
        // Self-attention's gradients side by side in one output (kernel or composite): the three
        // of the gradient op, stacked.
        let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
        let (q, k, v, g) = (t(&[2, 3, 9, 8], 91), t(&[2, 3, 9, 8], 92), t(&[2, 3, 9, 8], 93), t(&[2, 9, 3, 8], 94));
        let p = t(&[2, 3, 9, 9], 95).softmax(-1isize).unwrap();
        let args = [&q, &k, &v, &g, &p];
        let joined = crate::fused::run_or_composite(&AttentionBackwardJoined { scale: 0.3 }, &args).unwrap().remove(0);
        let apart = crate::fused::run_or_composite(&AttentionBackward { scale: 0.3 }, &args).unwrap();
        let stacked = Tensor::stack(&apart.iter().collect::<Vec<_>>(), 2).unwrap();
        assert_eq!(joined.shape(), stacked.shape(), "attention_backward_joined {dtype}: shape");
        let (a, b) = (joined.to_vec_f64().unwrap(), stacked.to_vec_f64().unwrap());
        assert_close(&format!("attention_backward_joined {dtype}"), &a, &b, atol, rtol);
    }
}

/// The fused softmax along the last axis, forward and backward, against the composite: odd
/// row lengths, a row of one, large logits (where an unshifted exp overflows), a strided input.
pub fn softmax_matches_composite(d: &Device) {
    let softmax = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].softmax(-1isize)?]) };
    for (dtype, atol, rtol) in [(DType::F32, 1e-6, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 2e-3, 2e-3), (DType::BF16, 2e-2, 2e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for shape in [&[1usize][..], &[3, 7], &[2, 5, 67], &[4, 1]] {
            let mut v: Vec<f64> = values(shape.iter().product(), 71).iter().map(|x| 4.0 * x).collect();
            v[0] = 90.0;
            let x = Tensor::from_f64s(&v, shape, dtype, d).unwrap();
            check_fused(&format!("softmax {dtype} {shape:?}"), &[x], softmax, atol, rtol);
        }
    }
    let (_, v) = from_values(d, &[4, 6], &values(24, 72), DType::F32);
    check_fused("softmax strided", &[strided_input(d, &[4, 6], &v, DType::F32)], softmax, 1e-6, 1e-5);
}

/// The fused log-softmax along the last axis, forward and backward, against the composite:
/// odd row lengths, rows longer than a workgroup, a row of one, large logits, rows whose
/// maximum is infinite or NaN, a strided input.
pub fn log_softmax_matches_composite(d: &Device) {
    let log_softmax = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].log_softmax(-1isize)?]) };
    for (dtype, atol, rtol) in [(DType::F32, 1e-5, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 2e-2, 2e-3), (DType::BF16, 2e-1, 2e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for shape in [&[1usize][..], &[3, 7], &[2, 5, 67], &[4, 1], &[3, 130]] {
            let mut v: Vec<f64> = values(shape.iter().product(), 74).iter().map(|x| 4.0 * x).collect();
            v[0] = 90.0;
            let x = Tensor::from_f64s(&v, shape, dtype, d).unwrap();
            check_fused(&format!("log_softmax {dtype} {shape:?}"), &[x], log_softmax, atol, rtol);
        }
    }
    // A row holding +inf, one holding -inf, one NaN: the composite's shift is 0 there.
    let v = [1.0, f64::INFINITY, 2.0, -1.0, f64::NEG_INFINITY, 3.0, 0.5, f64::NAN, -2.0];
    let x = Tensor::from_f64s(&v, &[3, 3], DType::F32, d).unwrap();
    check_fused("log_softmax with non-finite logits", &[x], log_softmax, 1e-5, 1e-5);
    let (_, v) = from_values(d, &[4, 6], &values(24, 75), DType::F32);
    check_fused("log_softmax strided", &[strided_input(d, &[4, 6], &v, DType::F32)], log_softmax, 1e-5, 1e-5);
}

/// The fused log-softmax's backward rule against finite differences in f64, with fusion on and
/// off, composed with another op so the incoming gradient is not all ones.
pub fn log_softmax_grads(d: &Device) {
    let f = |x: &[Tensor]| x[0].log_softmax(-1isize)?.mul(&x[0]);
    check_grads("log_softmax (fused where the device can)", &[leaf(d, &[3, 5], 76)], f, 1e-7, 1e-6);
    no_fusion(|| check_grads("log_softmax (composite)", &[leaf(d, &[3, 5], 76)], f, 1e-7, 1e-6));
}

/// The fused softmax's backward rule against finite differences in f64, with fusion on and off,
/// composed with another op so the incoming gradient is not all ones.
pub fn softmax_grads(d: &Device) {
    let f = |x: &[Tensor]| x[0].softmax(-1isize)?.mul(&x[0]);
    check_grads("softmax (fused where the device can)", &[leaf(d, &[3, 5], 73)], f, 1e-7, 1e-6);
    no_fusion(|| check_grads("softmax (composite)", &[leaf(d, &[3, 5], 73)], f, 1e-7, 1e-6));
}
