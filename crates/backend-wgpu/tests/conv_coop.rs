//! f16 convolution (forward, input gradient, weight gradient) against the CPU backend's f32
//! convolution of the same f16 values, within what rounding the result to f16 allows (and the
//! weight gradients that run as Winograd within its rounding besides). Where
//! the adapter runs f16 on cooperative matrices (`liandan info`: "f16 matmul: tensor
//! cores"), the three passes of most cases run on them; elsewhere, such as
//! lavapipe, this checks the ordinary f16 kernels and says so. Cases: outputs off the 128 x 128
//! tile, several images, padding, stride (the input gradient by phase), dilation, groups, a
//! long K over a small output (split into ranges), and the shapes that stay on the tiled
//! kernel. Skips without an adapter unless `LIANDAN_REQUIRE_GPU` is set. The tensor-core kernel
//! is the device's, except that products of at most 64 rows run on `short`'s 64-row tiles.
//!
//! Also f32 convolutions under `conv_tf32`, which on such adapters run on the same
//! kernels with each operand scaled into f16, against the CPU's f32 within what rounding each
//! operand to 11 significant bits allows.

use liandan_tensor::{DType, Device, Tensor};

mod common;
use common::{gpu, say_f16_path};

/// Seeded values rounded to f16: on the GPU in f16, and on the CPU widened to f32 (the oracle).
fn operand(d: &Device, shape: &[usize], seed: u64, scale: f64) -> (Tensor, Tensor) {
    let h = Tensor::randn(shape, seed, DType::F32, &Device::cpu()).unwrap().mul_scalar(scale).unwrap().to_dtype(DType::F16).unwrap();
    (h.to_device(d).unwrap(), h.to_dtype(DType::F32).unwrap())
}

/// One convolution: `[n, c, h, w]` input, `o` outputs, kernel `k`, stride, padding, dilation,
/// groups.
#[derive(Clone, Copy, Debug)]
struct Case {
    x: [usize; 4],
    o: usize,
    k: (usize, usize),
    s: (usize, usize),
    p: (usize, usize),
    dil: (usize, usize),
    groups: usize,
}

/// `got` (f16, on the GPU) against `want` (f32, on the CPU), for sums of `k` products each;
/// `winograd`: the CPU's result of the operands' magnitudes, where the pass runs as Winograd
/// F(4x4), whose f32 rounding reaches 32 epsilons times the terms summed times it
/// (`tests/conv_winograd.rs`).
fn close(what: &str, got: &Tensor, want: &Tensor, k: usize, winograd: Option<&Tensor>) {
    assert_eq!(got.dtype(), DType::F16, "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    // As tests/matmul_coop.rs: f32 sums in another order, then rounded to f16 once.
    let (rtol, atol) = (1.0 / 1024.0, 4.0 * f32::EPSILON as f64 * k as f64);
    let bound = winograd.map(|b| b.to_vec_f64().unwrap());
    for (i, (g, w)) in got.to_vec_f64().unwrap().iter().zip(&want.to_vec_f64().unwrap()).enumerate() {
        let atol = bound.as_ref().map_or(atol, |b| 32.0 * f32::EPSILON as f64 * (k + 36) as f64 * b[i]);
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

fn case(d: &Device, c: Case) {
    let [n, ch, h, _] = c.x;
    let seed = (ch * 31 + c.o * 7 + h) as u64;
    let (gx, cx) = operand(d, &c.x, seed, 1.0);
    let (gw, cw) = operand(d, &[c.o, ch / c.groups, c.k.0, c.k.1], seed + 1, 0.2);
    let what = format!("f16 conv2d {c:?}");
    let conv = |x: &Tensor, w: &Tensor| x.conv2d(w, None, c.s, c.p, c.dil, c.groups).unwrap();
    let want = conv(&cx, &cw);
    close(&format!("{what}: forward"), &conv(&gx, &gw), &want, ch / c.groups * c.k.0 * c.k.1, None);
    // The gradients of sum(y * g) are the passes' products of dy = g (exact in f16).
    let (gg, cg) = operand(d, want.shape(), seed + 2, 1.0);
    let grads = |x: &Tensor, w: &Tensor, g: &Tensor| {
        x.set_requires_grad(true).unwrap();
        w.set_requires_grad(true).unwrap();
        x.set_grad(None);
        w.set_grad(None);
        conv(x, w).mul(g).unwrap().sum_all().unwrap().backward().unwrap();
        (x.grad().unwrap(), w.grad().unwrap())
    };
    let (wdx, wdw) = grads(&cx, &cw, &cg);
    let (oh, ow) = (want.shape()[2], want.shape()[3]);
    let dx_k = c.o / c.groups * c.k.0 * c.k.1;
    let (dx, dw) = grads(&gx, &gw, &gg);
    close(&format!("{what}: input gradient"), &dx, &wdx, dx_k, None);
    // f16 weight gradients of 3x3 stride-1 layers of 64 channels and more run as Winograd
    // (`plan/winograd.rs`).
    let winograd = c.k == (3, 3) && c.s == (1, 1) && c.dil == (1, 1) && c.groups == 1 && ch >= 64 && c.o >= 64;
    let bound = winograd.then(|| grads(&cx.abs().unwrap().detach(), &cw.abs().unwrap().detach(), &cg.abs().unwrap()).1);
    close(&format!("{what}: weight gradient"), &dw, &wdw, n * oh * ow, bound.as_ref());
}

#[test]
fn f16_conv_matches_cpu_f32() {
    let Some(d) = gpu() else { return };
    say_f16_path(&d, "convolutions");
    let case_of = |x: [usize; 4], o: usize, k: usize, s: usize, p: usize, dil: usize, groups: usize| Case {
        x,
        o,
        k: (k, k),
        s: (s, s),
        p: (p, p),
        dil: (dil, dil),
        groups,
    };
    // On tensor cores, for kernels larger than 1x1: forward and input gradients whose gathered
    // channels per group (x's for the forward, dy's for the input gradient) are a multiple of
    // 32; weight gradients with at least 128 output channels per group. The others check the
    // tiled kernel beside them.
    let cases = [
        // A resnet layer's shape, small: N * L = 2 * 64 columns.
        case_of([2, 64, 8, 8], 64, 3, 1, 1, 1, 1),
        // Strided: the input gradient by phase (a 1x1 kernel's too, below); the second's
        // weight gradient (128 outputs, 4 x 4 pixels) on tensor cores too.
        case_of([2, 32, 9, 9], 64, 3, 2, 1, 1, 1),
        case_of([2, 32, 8, 8], 128, 3, 2, 1, 1, 1),
        // 7 x 7 output pixels: the weight gradient reads dy an element at a time, four k of a
        // row straddling two images.
        case_of([2, 32, 7, 7], 128, 3, 1, 1, 1, 1),
        // Dilated, unpadded; two groups of 32 input and 128 output channels.
        case_of([1, 32, 11, 10], 32, 3, 1, 0, 2, 1),
        case_of([2, 64, 6, 6], 256, 3, 1, 1, 1, 2),
        // Rows past one tile: 160 input channels (the input gradient's M), 130 outputs (the
        // forward's M; its input gradient, 130 channels of dy, runs on the tiled kernel).
        case_of([3, 160, 5, 7], 64, 3, 1, 1, 1, 1),
        case_of([4, 32, 12, 12], 130, 3, 1, 1, 1, 1),
        // A long K over a small output, split into ranges whose partial sums are added after:
        // the forward's (K = 9 x 512) and the input gradient's (K = 9 x 512 of dy's channels).
        case_of([1, 512, 4, 4], 32, 3, 1, 1, 1, 1),
        case_of([1, 32, 4, 4], 512, 3, 1, 1, 1, 1),
        // The tiled kernel: 3 channels (the stem), odd sizes; a 1x1 strided shortcut.
        case_of([3, 3, 7, 9], 5, 3, 1, 1, 1, 1),
        case_of([2, 48, 8, 8], 160, 1, 2, 0, 1, 1),
    ];
    for c in cases {
        case(&d, c);
    }
    // Nothing above went to the CPU.
    for (what, _) in d.fallback_report() {
        assert!(!what.contains("(f16)"), "{what} ran on the CPU");
    }
}

/// A convolution padded by 1 on each side, undilated.
fn padded(x: [usize; 4], o: usize, k: usize, s: usize, groups: usize) -> Case {
    Case { x, o, k: (k, k), s: (s, s), p: (1, 1), dil: (1, 1), groups }
}

/// The three passes of `c` over `x` and `w`, the gradients those of `sum(y * g)`: `[y, dx, dw]`.
fn passes(c: Case, x: &Tensor, w: &Tensor, g: &Tensor) -> [Tensor; 3] {
    let (x, w) = (x.detach(), w.detach());
    x.set_requires_grad(true).unwrap();
    w.set_requires_grad(true).unwrap();
    let y = x.conv2d(&w, None, c.s, c.p, c.dil, c.groups).unwrap();
    y.mul(g).unwrap().sum_all().unwrap().backward().unwrap();
    [y.detach(), x.grad().unwrap(), w.grad().unwrap()]
}

/// The three passes of `c` in f32 on `d` under `conv_tf32` against the CPU's exact
/// f32, with x scaled by `xs` and dy by `gs`: past f16's range (65504) and below its normal
/// one (6.1e-5) unless each operand is scaled first. Each product of two operands rounded to
/// 11 significant bits is within 2^-10 of the exact one (2^-9 here, should the device round
/// toward zero), so `|got - want| <= 2^-9 * sum |a| |b|` over the element's products, the
/// bound the CPU computes from the operands' magnitudes. Returns, per pass (forward, input
/// gradient, weight gradient), how many elements differ from the exact result by more than f32
/// sums would (zero where the pass ran in f32).
fn tf32_case(d: &Device, c: Case, xs: f64, gs: f64) -> [usize; 3] {
    tf32_case_with(d, c, xs, gs, &[])
}

/// [`tf32_case`] with x's elements at `specials` (flat indices) set to their values: where the
/// exact result is not finite the scaled one must be the same (NaN, or the same infinity).
fn tf32_case_with(d: &Device, c: Case, xs: f64, gs: f64, specials: &[(usize, f32)]) -> [usize; 3] {
    let cpu = Device::cpu();
    let [n, ch, h, _] = c.x;
    let seed = (ch * 13 + c.o * 5 + h) as u64;
    let randn = |shape: &[usize], seed: u64, scale: f64| Tensor::randn(shape, seed, DType::F32, &cpu).unwrap().mul_scalar(scale).unwrap();
    let mut x = randn(&c.x, seed, xs).to_vec::<f32>().unwrap();
    for &(i, v) in specials {
        x[i] = v;
    }
    let cx = Tensor::from_vec(x, &c.x, &cpu).unwrap();
    let cw = randn(&[c.o, ch / c.groups, c.k.0, c.k.1], seed + 1, 0.2);
    let conv = |x: &Tensor, w: &Tensor| x.conv2d(w, None, c.s, c.p, c.dil, c.groups).unwrap();
    let want = conv(&cx, &cw);
    let cg = randn(want.shape(), seed + 2, gs);
    let grads = |x: &Tensor, w: &Tensor, g: &Tensor| {
        let [y, dx, dw] = passes(c, x, w, g);
        (y, dx, dw)
    };
    let abs = |t: &Tensor| t.abs().unwrap();
    let want = grads(&cx, &cw, &cg);
    let bound = grads(&abs(&cx), &abs(&cw), &abs(&cg));
    let on = |t: &Tensor| t.to_device(d).unwrap();
    let got = grads(&on(&cx), &on(&cw), &on(&cg));
    let mut rounded = [0; 3];
    let what = format!("f32 conv2d on tensor cores {c:?} (x x {xs:e}, dy x {gs:e})");
    let k = [ch / c.groups * c.k.0 * c.k.1, c.o / c.groups * c.k.0 * c.k.1, n * want.0.shape()[2] * want.0.shape()[3]];
    for (i, (pass, (g, (w, b)))) in ["forward", "input gradient", "weight gradient"]
        .iter()
        .zip([(&got.0, (&want.0, &bound.0)), (&got.1, (&want.1, &bound.1)), (&got.2, (&want.2, &bound.2))])
        .enumerate()
    {
        assert_eq!(g.dtype(), DType::F32, "{what}: {pass}: dtype");
        assert_eq!(g.shape(), w.shape(), "{what}: {pass}: shape");
        let f32_sums = 4.0 * f32::EPSILON as f64 * k[i] as f64;
        let (g, w, b) = (g.to_vec_f64().unwrap(), w.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
        for (e, ((g, w), b)) in g.iter().zip(&w).zip(&b).enumerate() {
            if !w.is_finite() || !b.is_finite() {
                assert!(g.is_nan() && w.is_nan() || g == w, "{what}: {pass}: element {e}: got {g}, want {w}");
                continue;
            }
            assert!((g - w).abs() <= (1.0 / 512.0 + f32_sums) * b, "{what}: {pass}: element {e}: got {g}, want {w} (|a||b| summed: {b})");
            rounded[i] += usize::from((g - w).abs() > f32_sums * b);
        }
    }
    rounded
}

#[test]
fn f32_conv_with_tf32_matches_cpu() {
    // These cases are far smaller than the passes that go to the tensor cores by default; the
    // passes that stay off them here are the implicit GEMM's, exact f32: not Winograd's
    // (tests/conv_winograd.rs), which rounds otherwise.
    let Some(d) = common::gpu_with(|o| {
        o.conv_tf32 = true;
        o.testing.tf32_any_size = true;
        o.testing.conv_winograd = Some(0);
    }) else {
        return;
    };
    tf32_cases(&d);
}

fn tf32_cases(d: &Device) {
    let path = d.describe().into_iter().find(|(k, _)| k == "f16 matmul").map(|(_, v)| v).unwrap_or_default();
    let tensor_cores = path.starts_with("tensor cores");
    if tensor_cores {
        eprintln!("f32 convolutions under conv_tf32 run on cooperative matrices on {d}: checking that path ({path})");
    } else {
        eprintln!(
            "{d} has no cooperative-matrix f16 kernels ({path}): f32 convolutions stay exact under conv_tf32, the scaled tensor-core path is NOT tested here"
        );
    }
    // The cases of the f16 test above that run on tensor cores (a resnet layer, strided, groups,
    // rows past a tile, K split for the forward and for the input gradient), each with x past
    // f16's range and dy below its normal range, then within both; and the 3-channel stem,
    // which stays on the tiled kernel in f32.
    let cases = [
        padded([2, 64, 8, 8], 64, 3, 1, 1),
        padded([2, 32, 8, 8], 128, 3, 2, 1),
        padded([2, 32, 7, 7], 128, 3, 1, 1),
        padded([2, 64, 6, 6], 256, 3, 1, 2),
        padded([3, 160, 5, 7], 64, 3, 1, 1),
        padded([1, 512, 4, 4], 32, 3, 1, 1),
        padded([1, 32, 4, 4], 512, 3, 1, 1),
    ];
    let mut rounded = [0; 3];
    for c in cases {
        for (xs, gs) in [(3.0e5, 1.0e-7), (1.0, 1.0)] {
            for (total, n) in rounded.iter_mut().zip(tf32_case(d, c, xs, gs)) {
                *total += n;
            }
        }
    }
    assert_eq!(tf32_case(d, padded([3, 3, 7, 9], 5, 3, 1, 1), 3.0e5, 1.0e-7), [0; 3], "the stem's f32 convolution stays exact");
    // An infinity and a NaN in x beside values past f16's range: the outputs they reach are
    // not finite, the others as accurate as without them.
    let c = padded([2, 64, 8, 8], 64, 3, 1, 1);
    tf32_case_with(d, c, 3.0e5, 1.0e-7, &[(100, f32::INFINITY), (5000, f32::NAN)]);
    // Every pass has cases on the tensor cores (the weight gradients of 128 outputs or more).
    for (pass, n) in ["forward", "input gradient", "weight gradient"].iter().zip(rounded) {
        if tensor_cores {
            assert!(n > 0, "every f32 {pass} matched the CPU to f32 rounding: none ran on the tensor cores");
        } else {
            assert_eq!(n, 0, "f32 {pass}s without tensor cores are exact f32");
        }
    }
    for (what, _) in d.fallback_report() {
        assert!(!what.contains("conv"), "{what} ran on the CPU");
    }
}

/// bf16 convolutions, which where the adapter has f16 cooperative matrices run on them with
/// each operand scaled into f16 (exact for bf16's 8 significant bits), against the CPU's f32
/// of the same bf16 values: within one rounding of the result to bf16 and what f32 sums in
/// another order allow, x past f16's range and dy below its normal one, then within both.
#[test]
fn bf16_conv_matches_cpu_f32() {
    // Every size on the tensor cores where the adapter has them (else the tiled kernel's
    // packed loaders, checked the same way).
    let Some(d) = common::gpu_with(|o| o.testing.tf32_any_size = true) else { return };
    say_f16_path(&d, "bf16 convolutions (scaled into f16)");
    let cases = [
        padded([2, 64, 8, 8], 64, 3, 1, 1),
        padded([2, 32, 8, 8], 128, 3, 2, 1),
        padded([2, 64, 6, 6], 256, 3, 1, 2),
        padded([1, 512, 4, 4], 32, 3, 1, 1),
        padded([3, 3, 7, 9], 5, 3, 1, 1),
    ];
    for c in cases {
        for (xs, gs) in [(3.0e5, 1.0e-7), (1.0, 1.0)] {
            bf16_case(&d, c, xs, gs);
        }
    }
    // With a bias, and with a ReLU after it (added after the tensor cores' product): the
    // forward within one rounding to bf16 of y, and of y before its bias.
    let cpu = Device::cpu();
    let bf16s = |shape: &[usize], seed: u64, scale: f64| {
        Tensor::randn(shape, seed, DType::F32, &cpu).unwrap().mul_scalar(scale).unwrap().to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap()
    };
    let (x, w, b) = (bf16s(&[2, 64, 8, 8], 91, 1.0), bf16s(&[32, 64, 3, 3], 92, 0.2), bf16s(&[32], 93, 1.0));
    let on = |t: &Tensor| t.to_dtype(DType::BF16).unwrap().to_device(&d).unwrap();
    let abs = |t: &Tensor| t.abs().unwrap();
    let bound = abs(&x).conv2d(&abs(&w), Some(&abs(&b)), (1, 1), (1, 1), (1, 1), 1).unwrap().to_vec_f64().unwrap();
    for relu in [false, true] {
        let conv = |x: &Tensor, w: &Tensor, b: &Tensor| match relu {
            true => x.conv2d_relu(w, Some(b), (1, 1), (1, 1), (1, 1), 1).unwrap(),
            false => x.conv2d(w, Some(b), (1, 1), (1, 1), (1, 1), 1).unwrap(),
        };
        let want = conv(&x, &w, &b).to_vec_f64().unwrap();
        let got = conv(&on(&x), &on(&w), &on(&b));
        assert_eq!(got.dtype(), DType::BF16, "bf16 conv2d with a bias (relu {relu}): dtype");
        for (e, ((g, w), bd)) in got.to_vec_f64().unwrap().iter().zip(&want).zip(&bound).enumerate() {
            assert!(
                (g - w).abs() <= bd / 128.0 + 4.0 * f32::EPSILON as f64 * 576.0 * bd,
                "bf16 conv2d with a bias (relu {relu}): element {e}: got {g}, want {w}"
            );
        }
    }
    for (what, _) in d.fallback_report() {
        assert!(!what.contains("conv"), "{what} ran on the CPU");
    }
}

fn bf16_case(d: &Device, c: Case, xs: f64, gs: f64) {
    let cpu = Device::cpu();
    let [n, ch, h, _] = c.x;
    let seed = (ch * 17 + c.o * 3 + h) as u64;
    // Seeded values rounded to bf16, held in f32 for the CPU's exact sums.
    let randn = |shape: &[usize], seed: u64, scale: f64| {
        let t = Tensor::randn(shape, seed, DType::F32, &cpu).unwrap().mul_scalar(scale).unwrap();
        t.to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap()
    };
    let cx = randn(&c.x, seed, xs);
    let cw = randn(&[c.o, ch / c.groups, c.k.0, c.k.1], seed + 1, 0.2);
    let conv = |x: &Tensor, w: &Tensor| x.conv2d(w, None, c.s, c.p, c.dil, c.groups).unwrap();
    let cg = randn(conv(&cx, &cw).shape(), seed + 2, gs);
    let grads = |x: &Tensor, w: &Tensor, g: &Tensor| passes(c, x, w, g);
    let abs = |t: &Tensor| t.abs().unwrap();
    let want = grads(&cx, &cw, &cg);
    let bound = grads(&abs(&cx), &abs(&cw), &abs(&cg));
    let on = |t: &Tensor| t.to_dtype(DType::BF16).unwrap().to_device(d).unwrap();
    let got = grads(&on(&cx), &on(&cw), &on(&cg));
    let what = format!("bf16 conv2d {c:?} (x x {xs:e}, dy x {gs:e})");
    let (oh, ow) = (want[0].shape()[2], want[0].shape()[3]);
    let k = [ch / c.groups * c.k.0 * c.k.1, c.o / c.groups * c.k.0 * c.k.1, n * oh * ow];
    for (i, pass) in ["forward", "input gradient", "weight gradient"].iter().enumerate() {
        assert_eq!(got[i].dtype(), DType::BF16, "{what}: {pass}: dtype");
        assert_eq!(got[i].shape(), want[i].shape(), "{what}: {pass}: shape");
        let f32_sums = 4.0 * f32::EPSILON as f64 * k[i] as f64;
        let [g, w, b] = [&got[i], &want[i], &bound[i]].map(|t| t.to_vec_f64().unwrap());
        for (e, ((g, w), b)) in g.iter().zip(&w).zip(&b).enumerate() {
            assert!((g - w).abs() <= w.abs() / 256.0 + f32_sums * b, "{what}: {pass}: element {e}: got {g}, want {w} (|a||b| summed: {b})");
        }
    }
}
