//! Backward rules against central finite differences in float64: the harness, the test list,
//! and the autograd engine's own semantics (accumulation, no_grad, detach, freed graphs).
//!
//! The checks themselves live by op family in `grads_elementwise`, `grads_views`,
//! `grads_reduce`, `grads_window` and `grads_nn`.

use super::{assert_close, positive_values, strided_input, values};
use crate::{no_grad, DType, Device, Result, Tensor};

/// Checks the gradient of `sum(f(inputs) * w)` (seeded `w`) for every input against central
/// differences with step `1e-6`. `inputs` are f64 leaves (any layout); index tensors and other
/// constants are captured by `f`.
#[track_caller]
pub fn check_grads(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Tensor>, atol: f64, rtol: f64) {
    let device = inputs[0].device().clone();
    for x in inputs {
        assert_eq!(x.dtype(), DType::F64, "{what}: gradient checks run in f64");
        x.set_grad(None);
        x.set_requires_grad(true).expect("leaf");
    }
    let out = f(inputs).unwrap_or_else(|e| panic!("{what}: forward failed: {e}"));
    let w = Tensor::from_f64s(&values(out.numel(), 0xbeef), out.shape(), DType::F64, &device).unwrap();
    let loss = |o: &Tensor| -> Result<Tensor> { o.mul(&w)?.sum_all() };
    loss(&out).and_then(|l| l.backward()).unwrap_or_else(|e| panic!("{what}: backward failed: {e}"));

    let host: Vec<Vec<f64>> = inputs.iter().map(|x| x.to_vec_f64().unwrap()).collect();
    let eval = |k: usize, j: usize, delta: f64| -> f64 {
        no_grad(|| {
            let perturbed: Vec<Tensor> = inputs
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if i != k {
                        return x.detach();
                    }
                    let mut v = host[i].clone();
                    v[j] += delta;
                    Tensor::from_f64s(&v, x.shape(), DType::F64, &device).unwrap()
                })
                .collect();
            loss(&f(&perturbed).unwrap()).unwrap().item_f64().unwrap()
        })
    };
    const EPS: f64 = 1e-6;
    for (k, x) in inputs.iter().enumerate() {
        let analytic = x.grad().unwrap_or_else(|| panic!("{what}: input {k} received no gradient")).to_vec_f64().unwrap();
        let numeric: Vec<f64> = (0..x.numel()).map(|j| (eval(k, j, EPS) - eval(k, j, -EPS)) / (2.0 * EPS)).collect();
        assert_close(&format!("{what}: d/d(input {k})"), &analytic, &numeric, atol, rtol);
        x.set_requires_grad(false).unwrap();
        x.set_grad(None);
    }
}

/// An f64 leaf of `shape` with seeded non-zero values.
pub fn leaf(device: &Device, shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F64, device).unwrap()
}

/// An f64 leaf of `shape` with seeded values in `[lo, hi]`.
pub fn positive_leaf(device: &Device, shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    Tensor::from_f64s(&positive_values(shape.iter().product(), seed, lo, hi), shape, DType::F64, device).unwrap()
}

/// A non-contiguous f64 leaf (see [`strided_input`]): built without grad, so it is a leaf.
pub fn strided_leaf(device: &Device, shape: &[usize], seed: u64) -> Tensor {
    strided_input(device, shape, &values(shape.iter().product(), seed), DType::F64)
}

/// An i64 index tensor.
pub fn index(device: &Device, idx: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(idx, shape, device).unwrap()
}

/// Defines the gradient-check tests for `$device`: one `#[test] fn grad_*` per check.
#[macro_export]
macro_rules! conformance_grad_tests {
    ($device:expr) => {
        $crate::conformance_grad_tests!(@emit $device;
            // autograd engine
            grad_accumulates => grads::accumulates,
            grad_no_grad_records_nothing => grads::no_grad_records_nothing,
            grad_detach_cuts_graph => grads::detach_cuts_graph,
            grad_freed_graph_and_retain => grads::freed_graph_and_retain,
            grad_used_twice => grads::used_twice,
            grad_backward_errors => grads::backward_errors,
            grad_deep_chain => grads::deep_chain,
            grad_join_pieces => grads_join::pieces,
            grad_join_products => grads_join::products,
            grad_join_mixed => grads_join::mixed,
            // elementwise
            grad_neg_abs => grads_elementwise::neg_abs,
            grad_exp_log => grads_elementwise::exp_log,
            grad_sqrt_rsqrt => grads_elementwise::sqrt_rsqrt,
            grad_recip_square => grads_elementwise::recip_square,
            grad_sin_cos => grads_elementwise::sin_cos,
            grad_erf => grads_elementwise::erf,
            grad_piecewise_constant => grads_elementwise::piecewise_constant,
            grad_add_broadcast => grads_elementwise::add_broadcast,
            grad_sub_mul => grads_elementwise::sub_mul,
            grad_div => grads_elementwise::div,
            grad_pow => grads_elementwise::pow,
            grad_maximum_minimum => grads_elementwise::maximum_minimum,
            grad_scalar_ops => grads_elementwise::scalar_ops,
            grad_clamp => grads_elementwise::clamp,
            grad_where_cond => grads_elementwise::where_cond,
            grad_to_dtype => grads_elementwise::to_dtype,
            // views and indexing
            grad_reshape_flatten => grads_views::reshape_flatten,
            grad_permute_transpose => grads_views::permute_transpose,
            grad_narrow_select => grads_views::narrow_select,
            grad_narrow_gathered => grads_views::narrow_gathered,
            grad_split_chunk => grads_views::split_chunk,
            grad_expand => grads_views::expand,
            grad_squeeze_unsqueeze => grads_views::squeeze_unsqueeze,
            grad_contiguous => grads_views::contiguous,
            grad_gather => grads_views::gather,
            grad_scatter_add => grads_views::scatter_add,
            grad_index_select => grads_views::index_select,
            grad_cat => grads_views::cat,
            grad_stack => grads_views::stack,
            // reductions and matmul
            grad_sum => grads_reduce::sum,
            grad_mean => grads_reduce::mean,
            grad_var => grads_reduce::var,
            grad_max_min => grads_reduce::max_min,
            grad_max_min_all => grads_reduce::max_min_all,
            grad_matmul => grads_reduce::matmul,
            grad_matmul_vectors => grads_reduce::matmul_vectors,
            grad_matmul_batched => grads_reduce::matmul_batched,
            // windows
            grad_im2col => grads_window::im2col,
            grad_col2im => grads_window::col2im,
            grad_conv2d => grads_window::conv2d,
            grad_max_pool2d => grads_window::max_pool2d,
            grad_avg_pool2d => grads_window::avg_pool2d,
            grad_avg_pool2d_backward => grads_window::avg_pool2d_backward,
            // composites
            grad_relu_leaky_relu => grads_nn::relu_leaky_relu,
            grad_sigmoid_tanh => grads_nn::sigmoid_tanh,
            grad_gelu_silu_softplus => grads_nn::gelu_silu_softplus,
            grad_logsumexp => grads_nn::logsumexp,
            grad_softmax => grads_nn::softmax,
            grad_log_softmax => grads_nn::log_softmax,
            grad_layer_norm => grads_nn::layer_norm,
            grad_batch_norm_train => grads_nn::batch_norm_train,
            grad_batch_norm_eval => grads_nn::batch_norm_eval,
            grad_dropout => grads_nn::dropout,
            grad_cross_entropy_nll => grads_nn::cross_entropy_nll,
            grad_mse_bce => grads_nn::mse_bce,
            grad_conv1d => grads_window::conv1d,
            grad_conv_transpose2d => grads_window::conv_transpose2d,
            grad_adaptive_pools => grads_window::adaptive_pools,
            grad_group_norm => grads_nn::group_norm,
            grad_embedding => grads_views::embedding,
            grad_dropout2d => grads_nn::dropout2d,
            grad_linear => grads_reduce::linear,
            grad_attention => grads_nn::attention,
            grad_l1_bce_kl => grads_nn::l1_bce_kl,
            grad_cross_entropy_with => grads_nn::cross_entropy_with,
        );
    };
    (@emit $device:expr; $($test:ident => $module:ident :: $check:ident,)*) => {
        $(
            #[test]
            fn $test() {
                if let Some(d) = $crate::conformance::suite_device($device) {
                    $crate::conformance::$module::$check(&d)
                }
            }
        )*
    };
}

// ---- autograd engine semantics ------------------------------------------------------------

/// `sum(x * c)` has gradient `c`.
fn linear_loss(x: &Tensor, c: &Tensor) -> Tensor {
    x.mul(c).and_then(|y| y.sum_all()).expect("forward")
}

fn grad_of(x: &Tensor) -> Vec<f64> {
    x.grad().expect("a gradient").to_vec_f64().unwrap()
}

/// Gradients add up across backward calls until cleared with `set_grad(None)`.
pub fn accumulates(d: &Device) {
    let x = leaf(d, &[7], 1).requires_grad_(true).unwrap();
    let c = leaf(d, &[7], 2);
    let cv = c.to_vec_f64().unwrap();
    linear_loss(&x, &c).backward().unwrap();
    assert_close("first backward", &grad_of(&x), &cv, 0.0, 0.0);
    linear_loss(&x, &c).backward().unwrap();
    let twice: Vec<f64> = cv.iter().map(|v| 2.0 * v).collect();
    assert_close("second backward accumulates", &grad_of(&x), &twice, 1e-15, 1e-15);
    x.set_grad(None);
    assert!(x.grad().is_none(), "set_grad(None) clears");
    linear_loss(&x, &c).backward().unwrap();
    assert_close("after clearing", &grad_of(&x), &cv, 0.0, 0.0);
}

/// Nothing computed under `no_grad` is recorded; recording resumes after.
pub fn no_grad_records_nothing(d: &Device) {
    let x = leaf(d, &[7], 3).requires_grad_(true).unwrap();
    let y = no_grad(|| {
        assert!(!crate::is_grad_enabled());
        x.exp().and_then(|e| e.mul(&x))
    })
    .unwrap();
    assert!(!y.requires_grad() && y.is_leaf(), "no_grad result must not be recorded");
    assert!(crate::is_grad_enabled(), "grad mode restored after no_grad");
    assert!(y.sum_all().unwrap().backward().is_err(), "backward through an unrecorded result must error");
    assert!(x.mul_scalar(2.0).unwrap().requires_grad(), "recording resumes");
}

/// `detach()` cuts the graph: `sum(detach(x) * x)` has gradient `x`, not `2x`.
pub fn detach_cuts_graph(d: &Device) {
    let x = leaf(d, &[33], 4).requires_grad_(true).unwrap();
    let xd = x.detach();
    assert!(!xd.requires_grad() && xd.is_leaf());
    linear_loss(&x, &xd).backward().unwrap();
    assert_close("d/dx sum(detach(x) * x)", &grad_of(&x), &x.to_vec_f64().unwrap(), 0.0, 0.0);
}

/// A second backward through a freed graph is an error, not a panic; `retain_graph` allows it.
pub fn freed_graph_and_retain(d: &Device) {
    let x = leaf(d, &[7], 5).requires_grad_(true).unwrap();
    let xv = x.to_vec_f64().unwrap();
    let loss = x.square().and_then(|s| s.sum_all()).unwrap();
    loss.backward().unwrap();
    assert!(loss.backward().is_err(), "second backward through a freed graph must be an error");
    x.set_grad(None);

    let loss = x.square().and_then(|s| s.sum_all()).unwrap();
    let one = loss.ones_like().unwrap();
    loss.backward_with(&one, true).unwrap();
    loss.backward_with(&one, true).unwrap();
    let want: Vec<f64> = xv.iter().map(|v| 4.0 * v).collect();
    assert_close("two retained backwards of sum(x^2)", &grad_of(&x), &want, 1e-14, 1e-14);
}

/// A tensor used twice gets both contributions.
pub fn used_twice(d: &Device) {
    let x = leaf(d, &[7, 3], 6);
    check_grads("x * x", std::slice::from_ref(&x), |x| x[0].mul(&x[0]), 1e-7, 1e-6);
    check_grads("x + x * sin(x)", &[x], |x| x[0].add(&x[0].mul(&x[0].sin()?)?), 1e-7, 1e-6);
}

/// Backward on a non-scalar, on a tensor that needs no grad, or with a misshapen gradient errors.
pub fn backward_errors(d: &Device) {
    let x = leaf(d, &[7], 7).requires_grad_(true).unwrap();
    let y = x.mul_scalar(2.0).unwrap();
    assert!(y.backward().is_err(), "backward on a [7] tensor must error");
    assert!(y.backward_with(&leaf(d, &[6], 8), false).is_err(), "a gradient of the wrong shape must error");
    assert!(leaf(d, &[], 9).backward().is_err(), "backward on a tensor that requires no grad must error");
    assert!(y.set_requires_grad(false).is_err(), "only leaves can change requires_grad");
    assert!(x.grad().is_none(), "failed backwards leave no gradient");
}

/// 5000 successive ops backpropagate without overflowing the stack.
pub fn deep_chain(d: &Device) {
    let x = leaf(d, &[7], 10).requires_grad_(true).unwrap();
    let mut y = x.clone();
    for _ in 0..5000 {
        y = y.add_scalar(1e-3).unwrap();
    }
    linear_loss(&y, &y.ones_like().unwrap()).backward().unwrap();
    assert_close("d/dx of a 5000-op chain", &grad_of(&x), &[1.0; 7], 0.0, 0.0);
}
