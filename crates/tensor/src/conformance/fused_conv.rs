//! The fused convolution ([`Conv2d`], with its bias [`Conv2dBias`], and its
//! two gradients) against the composite
//! (`im2col` + matmul, `col2im`), forward and backward, over the geometries a network meets:
//! 1x1, 3x3 padded, strided, dilated, grouped, depthwise, odd sizes, a batch of one, channels
//! that fill the 16-row slices and channels that do not, and shapes that split K; strided ones
//! whose input gradient splits into phases that reach dy above its first row, phases no tap
//! reaches and phases with no pixels, and a layer with tiles enough for Winograd. On a backend
//! without the override both runs take the composite and the check holds trivially
//! ([`super::fused::kernel_runs`] says which backends have it).

use super::custom::{check_fused, check_op};
use super::fused::kernel_runs;
use super::values;
use crate::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight, Conv2dBackwardWeightWide, Conv2dBias, Conv2dBiasRelu};
use crate::{ConvGeometry, CustomOp, DType, Device, Result, Tensor};

/// `(N, C, H, W, O, kernel, stride, padding, dilation, groups)`.
type Case = (usize, usize, usize, usize, usize, (usize, usize), (usize, usize), (usize, usize), (usize, usize), usize);

/// The geometries, each run in f32 (and some in f16).
const CASES: [Case; 15] = [
    (2, 5, 6, 7, 3, (1, 1), (1, 1), (0, 0), (1, 1), 1),   // 1x1, odd channels
    (2, 3, 9, 8, 6, (3, 3), (1, 1), (1, 1), (1, 1), 1),   // 3x3 padded (a stem)
    (2, 4, 9, 7, 5, (3, 3), (2, 2), (1, 1), (1, 1), 1),   // stride 2, odd sizes
    (1, 3, 11, 10, 4, (3, 3), (1, 1), (2, 2), (2, 2), 1), // dilation 2, batch 1
    (2, 6, 7, 7, 4, (3, 3), (1, 1), (1, 1), (1, 1), 2),   // groups 2
    (2, 6, 8, 9, 6, (3, 3), (2, 1), (1, 0), (1, 1), 6),   // depthwise, uneven stride
    (2, 4, 10, 9, 3, (2, 3), (1, 2), (0, 1), (2, 1), 1),  // uneven kernel and dilation
    (2, 32, 6, 6, 16, (3, 3), (1, 1), (1, 1), (1, 1), 1), // 32 channels: whole slices share a tap
    (3, 16, 9, 9, 32, (1, 1), (2, 2), (0, 0), (1, 1), 1), // a strided 1x1 shortcut
    (1, 64, 4, 4, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1),  // few tiles, K = 576: split K
    (2, 4, 16, 16, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1), // weight gradient over K = 512: split
    (2, 3, 13, 11, 8, (7, 7), (2, 2), (3, 3), (1, 1), 1), // a 7x7 stride-2 stem, odd sizes
    (2, 5, 10, 11, 6, (3, 3), (3, 2), (0, 1), (2, 2), 1), // stride 3 dilation 2 (a shift of -1), stride 2 dilation 2 (a phase without taps)
    (2, 4, 2, 5, 3, (1, 1), (3, 3), (0, 0), (1, 1), 1),   // stride past the input: phases without pixels
    (1, 4, 7, 7, 128, (3, 3), (2, 2), (1, 1), (1, 1), 1), // strided, whole slices per tap, phases of unequal K split
];

/// The cases whose input gradient runs by phase where a backend decomposes it.
const STRIDED: [usize; 8] = [2, 5, 6, 8, 11, 12, 13, 14];

fn geometry(c: &Case) -> ConvGeometry {
    let &(n, ch, h, w, o, kernel, stride, padding, dilation, groups) = c;
    ConvGeometry { n, c: ch, h, w, o, kernel, stride, padding, dilation, groups }
}

/// Runs `conv2d` (with a bias on every other case) fused and composite, comparing the output
/// and the gradients of input, weight and bias.
fn check_case(d: &Device, case: &Case, dtype: DType, seed: u64, atol: f64, rtol: f64) {
    let g = geometry(case);
    let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, dtype, d).unwrap();
    let mut inputs = vec![t(&g.input_shape(), seed), t(&g.weight_shape(), seed + 1).mul_scalar(0.5).unwrap()];
    let bias = seed.is_multiple_of(2);
    if bias {
        inputs.push(t(&[g.o], seed + 2));
    }
    let conv = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].conv2d(&x[1], x.get(2), g.stride, g.padding, g.dilation, g.groups)?]) };
    check_fused(&format!("conv2d {dtype} {g:?} bias={bias}"), &inputs, conv, atol, rtol);
}

/// Every case in f32, five in f16 (padded, grouped, whole slices, split K, the strided stem; f16 rounds each
/// composite step, the fused kernel only its result: the tolerance is f16's), whole slices with
/// a bias in f16, strided whole slices in f16, split K with a bias, and a non-contiguous input.
pub fn conv2d_matches_composite(d: &Device) {
    for (i, case) in CASES.iter().enumerate() {
        check_case(d, case, DType::F32, 100 + 3 * i as u64, 1e-4, 1e-4);
    }
    for i in [1, 4, 7, 9, 11] {
        check_case(d, &CASES[i], DType::F16, 100 + 3 * i as u64, 6e-2, 2e-2);
    }
    // Whole slices with a bias (an even seed) in f16: a tensor-core kernel adds it as it stores y.
    check_case(d, &CASES[7], DType::F16, 122, 6e-2, 2e-2);
    // Strided with whole slices per tap in f16: every phase in one tensor-core kernel.
    check_case(d, &CASES[14], DType::F16, 143, 6e-2, 2e-2);
    // K split with a bias (an even seed): a kernel that stores partial sums cannot add it.
    check_case(d, &CASES[9], DType::F32, 400, 1e-4, 1e-4);
    // A padded 3x3 layer of 64 channels, odd sizes: Winograd's, where a backend has it. Its
    // weight gradient sums 510 products an element, which a backend's kernel and the composite
    // may group differently (2.5e-4 apart seen), hence the absolute tolerance.
    let layer: Case = (2, 64, 17, 15, 72, (3, 3), (1, 1), (1, 1), (1, 1), 1);
    check_case(d, &layer, DType::F32, 160, 1e-3, 1e-4);
    let g = geometry(&CASES[2]);
    let [n, c, h, w] = g.input_shape();
    let base = Tensor::from_f64s(&values(n * c * h * w, 7), &[n, h, w, c], DType::F32, d).unwrap();
    let x = base.permute(&[0, 3, 1, 2]).unwrap();
    let wt = Tensor::from_f64s(&values(g.weight_shape().iter().product(), 8), &g.weight_shape(), DType::F32, d).unwrap();
    let conv = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].conv2d(&x[1], None, g.stride, g.padding, g.dilation, g.groups)?]) };
    check_fused("conv2d f32 channels-last input", &[x, wt], conv, 1e-4, 1e-4);
}

/// The strided cases in f32 alone: for a backend's tests to run them again with its
/// decomposition of the input gradient turned off.
pub fn conv2d_strided_matches_composite(d: &Device) {
    for i in STRIDED {
        assert_ne!(CASES[i].6, (1, 1), "case {i} is strided");
        check_case(d, &CASES[i], DType::F32, 300 + 3 * i as u64, 1e-4, 1e-4);
    }
}

/// A wide layer (more than 64 output and input channels over many positions), where a big
/// GPU's kernels take 128 x 128 tiles: the forward with whole slices per tap (80 channels), the
/// input gradient without (72). The weight gradient sums 24,576 products an element, which the
/// fused kernel and the composite's batched product may split into different ranges: their f32
/// sums then differ by a few 1e-4 (2e-4 seen), hence the absolute tolerance.
pub fn conv2d_wide_matches_composite(d: &Device) {
    let case: Case = (6, 80, 64, 64, 72, (1, 1), (1, 1), (0, 0), (1, 1), 1);
    check_case(d, &case, DType::F32, 200, 1e-3, 1e-4);
}

/// A weight gradient of f16 and bf16 operands summed into f32 ([`Conv2dBackwardWeightWide`])
/// against its composite (both widened, then the f32 gradient) where the device has the kernel:
/// a 3x3 layer of 64 channels (Winograd's, where a backend has it), a K split, a strided 1x1
/// shortcut, a stem whose K is not split. Then its use in backward under autocast, where a
/// convolution's f32 weight takes its gradient so, against the low gradient cast back (fusion
/// off).
pub fn conv2d_weight_wide_matches_composite(d: &Device) {
    let layer: Case = (2, 64, 8, 8, 64, (3, 3), (1, 1), (1, 1), (1, 1), 1);
    for low in [DType::F16, DType::BF16] {
        let t = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, low, d).unwrap();
        // A device with the kernel takes every such pass, so none may fall back unnoticed.
        let every = kernel_runs(d, &Conv2dBackwardWeightWide(geometry(&layer)), low);
        for (i, case) in [&layer, &CASES[10], &CASES[8], &CASES[1]].into_iter().enumerate() {
            let g = geometry(case);
            let seed = 500 + 2 * i as u64;
            let ran = check_op(d, &Conv2dBackwardWeightWide(g), &[t(&g.output_shape(), seed), t(&g.input_shape(), seed + 1)], 2e-3, 1e-3);
            assert!(ran || !every, "conv2d_backward_weight_wide {low} {g:?} fell back to its composite");
        }
        let g = geometry(&CASES[1]);
        let f32s = |shape: &[usize], seed| Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap();
        let conv = |x: &[Tensor]| -> Result<Vec<Tensor>> {
            crate::autocast(low, || Ok(vec![x[0].conv2d(&x[1], Some(&x[2]), g.stride, g.padding, g.dilation, g.groups)?]))
        };
        let inputs = [f32s(&g.input_shape(), 520), f32s(&g.weight_shape(), 521), f32s(&[g.o], 522)];
        let (atol, rtol) = if low == DType::F16 { (6e-2, 2e-2) } else { (2e-1, 5e-2) };
        check_fused(&format!("conv2d under {low} autocast, {g:?}"), &inputs, conv, atol, rtol);
    }
}

/// The fused ops a backend's tests assert it runs: each pass on a small geometry, the forward
/// with and without its bias, and with its bias and ReLU.
pub fn ops() -> Vec<Box<dyn CustomOp>> {
    let g = geometry(&CASES[4]);
    vec![Box::new(Conv2d(g)), Box::new(Conv2dBias(g)), Box::new(Conv2dBiasRelu(g)), Box::new(Conv2dBackwardInput(g)), Box::new(Conv2dBackwardWeight(g))]
}
