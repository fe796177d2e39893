//! Runs liandan's backend conformance suite, unchanged, on a wgpu adapter: lavapipe in CI, a
//! real GPU where there is one. With no adapter the tests skip, saying why, unless
//! `LIANDAN_REQUIRE_GPU` is set (as `.ci/run` does), in which case they fail.

use liandan_backend_wgpu as _;

mod common;
use common::gpu;

liandan_tensor::conformance_suite!(gpu());

/// The fused ops this backend runs as its own kernels (the suite's `fused_*` tests compare
/// them with their composites; this makes sure they are not silently skipped). f64 takes the
/// composite: Vulkan has no f64 `exp`.
#[test]
fn fused_kernels_run_here() {
    use liandan_tensor::conformance::fused::{kernel_runs, kernel_runs_mixed, mixed_norm_ops, norm_ops, unit_ops};
    use liandan_tensor::ops::{
        AddLayerNorm, AddWide, Attention, AttentionBackward, AttentionBackwardJoined, LayerNormBackwardInto, LayerNormLow, LstmStep, MatmulWide,
        MaxPool2dBackward, NllLoss, NllLossBackward, SumChannels, SumRowsWide,
    };
    use liandan_tensor::DType;
    let Some(d) = gpu() else { return };
    for op in unit_ops().into_iter().chain(norm_ops()) {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, &*op, dtype), "{} in {dtype}", op.name());
        }
        assert!(!kernel_runs(&d, &*op, DType::F64), "{} in f64 is left to the composite", op.name());
    }
    // Autocast's batch norm: low activations, f32 parameters and statistics.
    for op in mixed_norm_ops() {
        for low in [DType::F16, DType::BF16] {
            assert!(kernel_runs_mixed(&d, &*op, low), "{} over {low} and f32", op.name());
        }
    }
    // Max pooling's gradient from its indices, in every float type (f64 too).
    let pool = liandan_tensor::backend::Window2d { n: 2, c: 3, h: 7, w: 9, kernel: (3, 3), stride: (2, 2), padding: (1, 1), dilation: (1, 1) };
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        assert!(kernel_runs(&d, &MaxPool2dBackward(pool), dtype), "max_pool2d_backward in {dtype}");
    }
    // The LSTM step with its recurrent product (where the product is small: these are).
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        assert!(kernel_runs(&d, &LstmStep, dtype), "lstm_step in {dtype}");
    }
    assert!(!kernel_runs(&d, &LstmStep, DType::F64), "lstm_step in f64 is left to the composite");
    // The negative log-likelihood after a log-softmax, each way, in f32 (autocast leaves a loss
    // in f32); the other dtypes keep the composite.
    let nll: [&dyn liandan_tensor::CustomOp; 4] =
        [&NllLoss { mean: true }, &NllLoss { mean: false }, &NllLossBackward { mean: true, classes: 5 }, &NllLossBackward { mean: false, classes: 5 }];
    for op in nll {
        assert!(kernel_runs(&d, op, DType::F32), "{} in f32", op.name());
        assert!(!kernel_runs(&d, op, DType::F16), "{} in f16 is left to the composite", op.name());
    }
    // Attention each way in f32, f16 and bf16, its gradient joined too; f64 keeps the composite.
    let attention: [&dyn liandan_tensor::CustomOp; 3] = [&Attention { scale: 0.5 }, &AttentionBackward { scale: 0.5 }, &AttentionBackwardJoined { scale: 0.5 }];
    for op in attention {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, op, dtype), "{} in {dtype}", op.name());
        }
        assert!(!kernel_runs(&d, op, DType::F64), "{} in f64 is left to the composite", op.name());
    }
    // A layer norm's gradient summed into a gathered one, in f32 (autocast's residual streams).
    for low in [None, Some(DType::F16)] {
        let into = LayerNormBackwardInto { options: liandan_tensor::LayerNormOptions { width: 5, eps: 1e-5, weight: true, bias: true }, low };
        assert!(kernel_runs(&d, &into, DType::F32), "layer_norm_backward_into in f32, low copy {low:?}");
        assert!(!kernel_runs(&d, &into, DType::F16), "layer_norm_backward_into in f16 is left to the composite");
    }
    // A layer norm's output with its f16 copy, from f32 only.
    let low = LayerNormLow { options: liandan_tensor::LayerNormOptions { width: 5, eps: 1e-5, weight: true, bias: true }, low: DType::F16 };
    assert!(kernel_runs(&d, &low, DType::F32), "layer_norm_low from f32");
    assert!(!kernel_runs(&d, &low, DType::F16), "layer_norm_low from f16 is left to the composite");
    // A residual add and the layer norm of its sum, to f32 x: an f32, f16 or packed bf16 addend,
    // with the output's f16 copy or not.
    for low in [None, Some(DType::F16)] {
        for options in [
            liandan_tensor::LayerNormOptions { width: 5, eps: 1e-5, weight: true, bias: true },
            liandan_tensor::LayerNormOptions { width: 5, eps: 1e-5, weight: false, bias: false },
        ] {
            let op = AddLayerNorm { options, low };
            for addend in [DType::F32, DType::F16, DType::BF16] {
                assert!(kernel_runs(&d, &op, addend), "add_layer_norm, addend {addend}, {options:?}, low copy {low:?}");
            }
        }
    }
    // Low products and row sums summed into f32.
    let wide: [&dyn liandan_tensor::CustomOp; 2] = [&MatmulWide, &SumRowsWide];
    for op in wide {
        for dtype in [DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, op, dtype), "{} in {dtype}", op.name());
        }
    }
    // A convolution's bias gradient, in each float type and into f32.
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for wide in [false, true] {
            assert!(kernel_runs(&d, &SumChannels { wide }, dtype), "sum_channels in {dtype}, wide {wide}");
        }
    }
    // Autocast's residual sum of an f32 and an f16 tensor, written in f32.
    assert!(kernel_runs(&d, &AddWide, DType::F16), "add_wide");
}

/// The convolution passes run as implicit-GEMM kernels here in every float dtype but f64, and
/// the weight gradient of f16 and bf16 operands summed into f32 in both.
#[test]
fn fused_conv_kernels_run_here() {
    use liandan_tensor::{conformance::fused::kernel_runs, conformance::fused_conv, ops::Conv2dBackwardWeightWide, ConvGeometry, DType};
    let Some(d) = gpu() else { return };
    for op in fused_conv::ops() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            assert!(kernel_runs(&d, &*op, dtype), "{} in {dtype}", op.name());
        }
        assert!(!kernel_runs(&d, &*op, DType::F64), "{} in f64 is left to the composite", op.name());
    }
    let g = ConvGeometry { n: 2, c: 6, h: 7, w: 7, o: 4, kernel: (3, 3), stride: (1, 1), padding: (1, 1), dilation: (1, 1), groups: 2 };
    for dtype in [DType::F16, DType::BF16] {
        assert!(kernel_runs(&d, &Conv2dBackwardWeightWide(g), dtype), "conv2d_backward_weight_wide in {dtype}");
    }
}

/// The convolution under every tile and with K forced into splits (cuts the default picks only
/// for big layers: 128 x 128 tiles of the weight gradient, split forwards and input gradients)
/// against the composite, forward and backward, on shapes that leave every tile ragged: strided
/// (by phase), grouped, channels that fill whole 16-row slices, and positions per image that
/// are and are not a multiple of 4 (the weight gradient's vec4 and scalar loaders of dy). Each
/// also with a bias and ReLU (`conv2d_relu`), in the kernel unsplit, after the sums split.
#[test]
fn fused_conv_every_cut_matches_composite() {
    use liandan_tensor::conformance::{fused::check_fused, values};
    use liandan_tensor::{DType, Tensor};
    // (tile, splits): a device of its own under each.
    let cuts = [(128, 1), (128, 3), (64, 2)];
    let Some(devices) = cuts.iter().map(|&cut| common::gpu_with(|o| o.testing.conv_cut = Some(cut))).collect::<Option<Vec<_>>>() else { return };
    // (N, C, H, W, O, kernel, stride, padding, groups)
    let cases = [(2, 5, 9, 7, 6, 3, 2, 1, 1), (2, 32, 6, 6, 16, 3, 1, 1, 1), (1, 4, 7, 7, 40, 3, 2, 1, 1), (2, 6, 7, 7, 4, 3, 1, 1, 2)];
    for (i, &(n, c, h, w, o, k, s, p, g)) in cases.iter().enumerate() {
        // f16 (accumulated in f32 either way) on one case: the kernels' loaders are the same.
        let f16 = [(DType::F16, (6e-2, 2e-2))];
        for &(dtype, tol) in [(DType::F32, (1e-4, 1e-4))].iter().chain(if i == 1 { &f16[..] } else { &[] }) {
            let seed = 40 + 3 * i as u64;
            let conv = |x: &[Tensor]| Ok(vec![x[0].conv2d(&x[1], None, (s, s), (p, p), (1, 1), g)?]);
            let conv_relu = |x: &[Tensor]| Ok(vec![x[0].conv2d_relu(&x[1], Some(&x[2]), (s, s), (p, p), (1, 1), g)?]);
            for (cut, d) in cuts.iter().zip(&devices) {
                let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
                let inputs = [t(&[n, c, h, w], seed), t(&[o, c / g, k, k], seed + 1).mul_scalar(0.5).unwrap()];
                // With a bias and ReLU (in the kernel, or after a split's sums), inputs of both signs.
                let signed = [inputs[0].add_scalar(-0.5).unwrap(), inputs[1].clone(), t(&[o], seed + 2).add_scalar(-0.5).unwrap()];
                let what = format!("conv2d {dtype} case {i} cut as {cut:?}");
                check_fused(&what, &inputs, conv, tol.0, tol.1);
                check_fused(&format!("{what}, bias and ReLU"), &signed, conv_relu, tol.0, tol.1);
            }
        }
    }
}

/// A linear layer's product and bias run as one kernel here in f32 and f16; bf16, held two to
/// a word, is left to the composite (the packed product and add).
#[test]
fn fused_linear_bias_runs_here() {
    use liandan_tensor::{conformance::fused::kernel_runs, ops::MatmulBias, DType};
    let Some(d) = gpu() else { return };
    for dtype in [DType::F32, DType::F16] {
        assert!(kernel_runs(&d, &MatmulBias, dtype), "matmul_bias in {dtype}");
    }
}

/// With `Knobs::gelu_epilogues`, GELU and its gradient run in the f32 products' epilogues
/// here, and the feed-forward block matches its composite; f16 is left to the composites (the
/// products on the tensor cores, then GELU or its gradient), as is everything without the knob.
#[test]
fn gelu_epilogues_run_here() {
    use liandan_tensor::conformance::fused::{gelu_mlp_matches_composite, kernel_runs};
    use liandan_tensor::ops::{LinearGelu, MatmulGeluBackward};
    use liandan_tensor::{CustomOp, DType};
    let (Some(plain), Some(d)) = (gpu(), common::gpu_with(|o| o.testing.gelu_epilogues = true)) else { return };
    for op in [&LinearGelu as &dyn CustomOp, &MatmulGeluBackward] {
        assert!(kernel_runs(&d, op, DType::F32), "{} in f32", op.name());
        assert!(!kernel_runs(&d, op, DType::F16), "{} in f16", op.name());
        assert!(!kernel_runs(&plain, op, DType::F32), "{} without the knob", op.name());
    }
    gelu_mlp_matches_composite(&d);
}

/// Layer norm's row kernels summing a row each way besides the default (a subgroup a row where
/// the subgroups have one size): a workgroup a row by its subgroups, and by a tree, each
/// against the composite, forward and gradients.
#[test]
fn layer_norm_every_row_sum_matches_composite() {
    use liandan_backend_wgpu::testing::RowSums;
    use liandan_tensor::conformance::fused_norm::{layer_norm_grads, layer_norm_matches_composite};
    for sums in [RowSums::Subgroups, RowSums::Tree] {
        let Some(d) = common::gpu_with(|o| o.testing.row_sums = sums) else { return };
        layer_norm_matches_composite(&d);
        layer_norm_grads(&d);
    }
}

/// The fused attention's backward on one and two workgroups a head besides the default three
/// (the query, key and value sides apart), each against the composite.
#[test]
fn attention_every_spread_matches_composite() {
    use liandan_tensor::conformance::fused::attention_matches_composite;
    for sides in [1, 2] {
        let Some(d) = common::gpu_with(|o| o.testing.attention_sides = Some(sides)) else { return };
        attention_matches_composite(&d);
    }
}
