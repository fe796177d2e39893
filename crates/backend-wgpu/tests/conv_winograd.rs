//! f32 3x3 convolutions (and bf16 widened to f32, f16 as stored) of stride 1 and padding 1 or
//! 0 as Winograd (`conv/winograd.rs`), F(2x2, 3x3) and F(4x4, 3x3): the forward, the input gradient and the
//! weight gradient against the CPU's direct f32 convolution, within 4 (F(2x2)) or 32 (F(4x4), whose
//! coefficients reach 8 and 1/24) f32 epsilons times the terms summed times the sum of |x||w| of
//! each output (on lavapipe the worst cases used 0.14 and 1.2 of them), and unlike the implicit
//! GEMM of the same pass in the last bits somewhere (so the Winograd kernels ran). Cases: heights
//! and widths off the tiles (a last tile row or column partly outside), one pixel, channel counts
//! off 4, several images, x and w at an offset in their buffers, products whose K is split. Skips
//! without an adapter unless `LIANDAN_REQUIRE_GPU` is set.

use liandan_tensor::{DType, Device, Tensor};

mod common;

/// A device of its own that runs every convolution Winograd can take on tiles of `tile` x
/// `tile` outputs (0: none), its weight gradients' images in chunks of `chunk` bytes.
fn winograd(tile: usize, chunk: Option<usize>) -> Option<Device> {
    common::gpu_with(|o| {
        o.testing.conv_winograd = Some(tile);
        o.testing.winograd_chunk = chunk;
    })
}

/// `(y, dx, dw)` of `sum(conv(x, w) * g)`, padded by `pad`.
fn passes(x: &Tensor, w: &Tensor, g: &Tensor, pad: usize) -> [Tensor; 3] {
    let (x, w) = (x.detach(), w.detach());
    x.set_requires_grad(true).unwrap();
    w.set_requires_grad(true).unwrap();
    let y = x.conv2d(&w, None, (1, 1), (pad, pad), (1, 1), 1).unwrap();
    y.mul(g).unwrap().sum_all().unwrap().backward().unwrap();
    [y.detach(), x.grad().unwrap(), w.grad().unwrap()]
}

/// Checks one case on `d` (a device that runs it as Winograd on tiles of `tile`) against the
/// CPU; returns, per pass (forward, input gradient, weight gradient), whether its result
/// differs anywhere from the implicit GEMM's (on `direct`).
fn case([d, direct]: [&Device; 2], x_shape: [usize; 4], o: usize, tile: usize, pad: usize) -> [bool; 3] {
    let cpu = Device::cpu();
    let [n, c, h, w] = x_shape;
    let (ho, wo) = (h + 2 * pad - 2, w + 2 * pad - 2);
    let seed = (c * 17 + o * 3 + h * 5 + w) as u64;
    // x and w live one image (one kernel) into larger tensors: views at an offset.
    let xb = Tensor::randn(&[n + 1, c, h, w], seed, DType::F32, &cpu).unwrap();
    let wb = Tensor::randn(&[o + 1, c, 3, 3], seed + 1, DType::F32, &cpu).unwrap().mul_scalar(0.2).unwrap();
    let g = Tensor::randn(&[n, o, ho, wo], seed + 2, DType::F32, &cpu).unwrap();
    let (cx, cw) = (xb.narrow(0, 1, n).unwrap(), wb.narrow(0, 1, o).unwrap());
    let want = passes(&cx, &cw, &g, pad);
    let abs = |t: &Tensor| t.abs().unwrap();
    let bound = passes(&abs(&cx.contiguous().unwrap()), &abs(&cw.contiguous().unwrap()), &abs(&g), pad);
    let on = |d: &Device| {
        let on = |t: &Tensor| t.to_device(d).unwrap();
        passes(&on(&xb).narrow(0, 1, n).unwrap(), &on(&wb).narrow(0, 1, o).unwrap(), &on(&g), pad)
    };
    let (got, direct) = (on(d), on(direct));
    let what = format!("winograd F({tile}x{tile}, 3x3) conv2d x {x_shape:?}, {o} outputs, padding {pad}");
    // Terms summed: the forward's c * 9, the input gradient's o * 9, the weight gradient's
    // n * h * w, plus the transforms' 36.
    let k = [c * 9 + 36, o * 9 + 36, n * ho * wo + 36];
    let mut differs = [false; 3];
    for (i, pass) in ["forward", "input gradient", "weight gradient"].iter().enumerate() {
        let (got, want, bound, direct) = (&got[i], &want[i], &bound[i], &direct[i]);
        assert_eq!(got.shape(), want.shape(), "{what}: {pass}: shape");
        let tol = if tile == 2 { 4.0 } else { 32.0 } * f32::EPSILON as f64 * k[i] as f64;
        let (got, want, bound, direct) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap(), bound.to_vec_f64().unwrap(), direct.to_vec_f64().unwrap());
        for (e, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
            assert!((g - w).abs() <= tol * b, "{what}: {pass}: element {e}: got {g}, want {w} (|x||w| summed: {b})");
        }
        differs[i] = got != direct;
    }
    differs
}

#[test]
fn winograd_conv_matches_cpu() {
    let Some(direct) = winograd(0, None) else { return };
    let cases = [
        // Sizes off the tile: the last tile row and column partly outside the image.
        ([2, 5, 7, 9], 3, 1),
        ([1, 3, 1, 1], 2, 1),
        ([3, 16, 8, 8], 8, 1),
        ([2, 9, 5, 4], 20, 1),
        ([1, 32, 6, 3], 33, 1),
        // 512 tiles of F(4x4): its weight gradient's products split their K (the tiles) in two.
        ([8, 4, 32, 32], 4, 1),
        // Unpadded: the outputs 2 smaller than x (the input gradient's patches of dy padded by
        // 2), off the tiles, one output pixel, seed003_cnn's 13 x 13 -> 11 x 11, a split K.
        ([2, 5, 7, 9], 3, 0),
        ([1, 3, 3, 3], 2, 0),
        ([2, 6, 4, 5], 7, 0),
        ([2, 8, 13, 13], 12, 0),
        ([8, 4, 34, 34], 4, 0),
    ];
    for tile in [2, 4] {
        let d = winograd(tile, None).expect("the GPU found above");
        // Per padding (1, then 0) and pass: whether any case's result differs from the implicit GEMM's.
        let mut differs = [[false; 3]; 2];
        for (x, o, pad) in cases {
            for (any, this) in differs[1 - pad].iter_mut().zip(case([&d, &direct], x, o, tile, pad)) {
                *any |= this;
            }
        }
        let why = "the results equal the implicit GEMM's bit for bit in every case (forward, input gradient, weight gradient): did Winograd run?";
        assert_eq!(differs, [[true; 3]; 2], "F({tile}x{tile}, 3x3), padding 1 and 0: {why}");
        for (what, _) in d.fallback_report() {
            assert!(!what.contains("conv"), "{what} ran on the CPU");
        }
    }
}

/// The weight gradient with its images in chunks (here one image a chunk; by default
/// seed003_cnn's batch of 128 goes in two), each chunk's products summed: as the CPU's, padded
/// and not, in both tile sizes.
#[test]
fn winograd_weight_gradient_in_chunks_matches_cpu() {
    let Some(direct) = winograd(0, None) else { return };
    for tile in [2, 4] {
        let d = winograd(tile, Some(1)).expect("the GPU found above");
        for (x, o, pad) in [([3, 5, 7, 9], 3, 1), ([4, 8, 13, 13], 12, 0)] {
            case([&d, &direct], x, o, tile, pad);
        }
    }
}

/// An infinity and a NaN in x, an infinity in dy: every output whose direct result is not
/// finite is not finite as Winograd either (a non-finite value in a patch reaches every output of its tile, and an
/// infinity may come out as NaN), so a loss scaler's check still sees it.
#[test]
fn winograd_keeps_non_finite_results_non_finite() {
    let cpu = Device::cpu();
    let shape = [2, 8, 9, 9];
    let mut x = Tensor::randn(&shape, 7, DType::F32, &cpu).unwrap().to_vec::<f32>().unwrap();
    x[40] = f32::INFINITY;
    x[900] = f32::NAN;
    let x = Tensor::from_vec(x, &shape, &cpu).unwrap();
    let w = Tensor::randn(&[6, 8, 3, 3], 8, DType::F32, &cpu).unwrap();
    let mut g = Tensor::randn(&[2, 6, 9, 9], 9, DType::F32, &cpu).unwrap().to_vec::<f32>().unwrap();
    g[500] = f32::NEG_INFINITY;
    let g = Tensor::from_vec(g, &[2, 6, 9, 9], &cpu).unwrap();
    let want = passes(&x, &w, &g, 1);
    for tile in [2, 4] {
        let Some(d) = winograd(tile, None) else { return };
        let on = |t: &Tensor| t.to_device(&d).unwrap();
        let got = passes(&on(&x), &on(&w), &on(&g), 1);
        for (i, pass) in ["forward", "input gradient", "weight gradient"].iter().enumerate() {
            let (got, want) = (got[i].to_vec_f64().unwrap(), want[i].to_vec_f64().unwrap());
            assert!(want.iter().any(|w| !w.is_finite()), "{pass}: the case reaches no output");
            for (e, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(w.is_finite() || !g.is_finite(), "F({tile}x{tile}): {pass}: element {e}: got {g}, want {w}");
            }
        }
    }
}

/// bf16 passes run as Winograd on their operands widened to f32 words and their results
/// rounded to bf16 as they are packed; f16 passes read their operands and write their results
/// as stored, the transforms and products in f32. Each against the CPU's f32 passes of the same
/// values within one rounding to its type (each pass's result is rounded once) plus the f32
/// bound of `case`, padded and not.
#[test]
fn winograd_runs_bf16_and_f16() {
    let cpu = Device::cpu();
    let (shape, o) = ([2, 8, 9, 9], 6);
    let f32s = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    // The type, and one unit in the last place of its 8 or 11 significant bits, relative.
    for (dtype, ulp) in [(DType::BF16, 1.0 / 128.0), (DType::F16, 1.0 / 1024.0)] {
        let low = |t: Tensor| t.to_dtype(dtype).unwrap();
        let x = low(Tensor::randn(&shape, 21, DType::F32, &cpu).unwrap());
        let w = low(Tensor::randn(&[o, 8, 3, 3], 22, DType::F32, &cpu).unwrap().mul_scalar(0.2).unwrap());
        for pad in [1, 0] {
            let (ho, wo) = (9 + 2 * pad - 2, 9 + 2 * pad - 2);
            let g = low(Tensor::randn(&[2, o, ho, wo], 23, DType::F32, &cpu).unwrap());
            let want = passes(&f32s(&x), &f32s(&w), &f32s(&g), pad);
            let abs = |t: &Tensor| f32s(t).abs().unwrap();
            let bound = passes(&abs(&x), &abs(&w), &abs(&g), pad);
            let k = [8 * 9 + 36, o * 9 + 36, 2 * ho * wo + 36];
            for tile in [2, 4] {
                let Some(d) = winograd(tile, None) else { return };
                let on = |t: &Tensor| t.to_device(&d).unwrap();
                let got = passes(&on(&x), &on(&w), &on(&g), pad);
                let what = format!("F({tile}x{tile}) {dtype}, padding {pad}");
                for (i, pass) in ["forward", "input gradient", "weight gradient"].iter().enumerate() {
                    assert_eq!(got[i].dtype(), dtype, "{what} {pass}: dtype");
                    let tol = if tile == 2 { 4.0 } else { 32.0 } * f32::EPSILON as f64 * k[i] as f64;
                    let (got, want, bound) = (got[i].to_vec_f64().unwrap(), want[i].to_vec_f64().unwrap(), bound[i].to_vec_f64().unwrap());
                    for (e, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
                        assert!((g - w).abs() <= w.abs() * ulp + tol * b, "{what}: {pass}: element {e}: got {g}, want {w}");
                    }
                }
                let report = d.fallback_report();
                assert!(report.iter().all(|(what, _)| !what.contains("conv")), "{what}: a pass ran on the CPU: {report:?}");
            }
        }
    }
}

/// Packed bf16 operands are read as stored (no widened copies): x, w and dy as views at odd
/// element offsets (the first value in a word's high half) and planes of odd sizes, each pass's
/// result rounded to bf16, and the weight gradient under autocast (a bf16 copy of an f32 weight)
/// summed into f32. Against the CPU's f32 passes of the same values, within one rounding to
/// bf16 (the bf16 results only) plus the f32 bound of `case`.
#[test]
fn winograd_reads_packed_bf16() {
    let cpu = Device::cpu();
    let (n, c, o, hw) = (2, 7, 5, 9);
    // A bf16 tensor of `shape` on `d`: a view one element into its buffer.
    let at_odd = |shape: &[usize], seed: u64, d: &Device| {
        let len: usize = shape.iter().product();
        let flat = Tensor::randn(&[len + 1], seed, DType::F32, &cpu).unwrap().to_dtype(DType::BF16).unwrap().to_device(d).unwrap();
        flat.narrow(0, 1, len).unwrap().reshape(shape).unwrap()
    };
    let f32s = |t: &Tensor| t.to_device(&cpu).unwrap().to_dtype(DType::F32).unwrap();
    for tile in [2, 4] {
        let Some(d) = winograd(tile, None) else { return };
        for pad in [1, 0] {
            let ho = hw + 2 * pad - 2;
            let (x, w, g) = (at_odd(&[n, c, hw, hw], 31, &d), at_odd(&[o, c, 3, 3], 33, &d), at_odd(&[n, o, ho, ho], 32, &d));
            let want = passes(&f32s(&x), &f32s(&w), &f32s(&g), pad).map(|t| t.to_vec_f64().unwrap());
            let abs = |t: &Tensor| f32s(t).abs().unwrap();
            let bound = passes(&abs(&x), &abs(&w), &abs(&g), pad).map(|t| t.to_vec_f64().unwrap());
            // Terms summed, as in `case`.
            let k = [c * 9 + 36, o * 9 + 36, n * ho * ho + 36];
            let tol = |i: usize| if tile == 2 { 4.0 } else { 32.0 } * f32::EPSILON as f64 * k[i] as f64;
            // bf16 throughout, then autocast's bf16 copy of an f32 weight.
            let plain = passes(&x, &w, &g, pad);
            let w32 = f32s(&w).to_device(&d).unwrap().requires_grad_(true).unwrap();
            let y = liandan_tensor::autocast(DType::BF16, || x.conv2d(&w32, None, (1, 1), (pad, pad), (1, 1), 1)).unwrap();
            y.to_dtype(DType::F32).unwrap().mul(&g.to_dtype(DType::F32).unwrap()).unwrap().sum_all().unwrap().backward().unwrap();
            let wide = w32.grad().unwrap();
            let what = format!("F({tile}x{tile}) bf16, padding {pad}");
            assert_eq!(wide.dtype(), DType::F32, "{what}: the weight gradient's type under autocast");
            let [y, dx, dw] = plain;
            let checks = [
                (y, 0, 1.0 / 128.0, "forward"),
                (dx, 1, 1.0 / 128.0, "input gradient"),
                (dw, 2, 1.0 / 128.0, "weight gradient"),
                (wide, 2, 0.0, "weight gradient into f32 under autocast"),
            ];
            for (got, i, ulp, pass) in checks {
                assert_eq!(got.dtype() == DType::BF16, ulp > 0.0, "{what}: {pass}: dtype");
                let got = got.to_vec_f64().unwrap();
                for (e, ((g, w), b)) in got.iter().zip(&want[i]).zip(&bound[i]).enumerate() {
                    assert!((g - w).abs() <= w.abs() * ulp + tol(i) * b, "{what}: {pass}: element {e}: got {g}, want {w}");
                }
            }
            let report = d.fallback_report();
            assert!(report.iter().all(|(what, _)| !what.contains("conv")), "{what}: a pass ran on the CPU: {report:?}");
        }
    }
}
