//! f16 matmul against the CPU backend's f32 product of the same f16 values, within what rounding
//! the result to f16 allows: as routed (small products on the ordinary kernels), and then, where
//! the adapter has cooperative matrices (tensor cores; `liandan info` says so under "f16
//! matmul"), every product on them; on the ordinary kernels alone elsewhere, such as lavapipe,
//! where this checks that path alone and says so. Shapes off the 128 x 128 tile and
//! the 32-deep slice, batched and broadcast, transposed operands (each of the kernel's vec4 and
//! strided loaders), and splits of K. Skips without an adapter unless `LIANDAN_REQUIRE_GPU` is set.
//! The tensor-core kernel is the device's variant, and `prefetch` for products large in every
//! dimension.

use liandan_backend_wgpu as _;
use liandan_tensor::{DType, Device, Tensor};

mod common;
use common::{gpu, say_f16_path};

/// Seeded values rounded to f16: on the GPU in f16, and on the CPU widened to f32 (the oracle).
fn operand(d: &Device, shape: &[usize], seed: u64) -> (Tensor, Tensor) {
    let h = Tensor::randn(shape, seed, DType::F32, &Device::cpu()).unwrap().to_dtype(DType::F16).unwrap();
    (h.to_device(d).unwrap(), h.to_dtype(DType::F32).unwrap())
}

/// `[b, m, k] x [b, k, n]`; `ta` / `tb` store an operand transposed, `broadcast` takes one lhs
/// matrix for the whole batch.
fn case(d: &Device, [b, m, k, n]: [usize; 4], ta: bool, tb: bool, broadcast: bool) {
    let (lb, seed) = (if broadcast { 1 } else { b }, (m * 31 + k * 7 + n) as u64);
    let (ga, ca) = if ta {
        let (g, c) = operand(d, &[lb, k, m], seed);
        (g.transpose(1, 2).unwrap(), c.transpose(1, 2).unwrap())
    } else {
        operand(d, &[lb, m, k], seed)
    };
    let (ga, ca) = if broadcast { (ga.expand(&[b, m, k]).unwrap(), ca.expand(&[b, m, k]).unwrap()) } else { (ga, ca) };
    let (gb, cb) = if tb {
        let (g, c) = operand(d, &[b, n, k], seed + 1);
        (g.transpose(1, 2).unwrap(), c.transpose(1, 2).unwrap())
    } else {
        operand(d, &[b, k, n], seed + 1)
    };
    let what = format!("f16 matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] (transposed: {ta}, {tb}; broadcast lhs: {broadcast})");
    let got = ga.matmul(&gb).unwrap();
    assert_eq!(got.dtype(), DType::F16, "{what}: dtype");
    assert_eq!(got.shape(), &[b, m, n], "{what}: shape");
    let want = ca.matmul(&cb).unwrap().to_vec_f64().unwrap();
    // The products are exact in f32 and summed in f32 on both sides (in another order: a few
    // f32 ulps of sums that grow like k); the GPU's result is then rounded to f16 (half an ulp,
    // 2^-11 relative). A wrong tile, slice or edge is off by about one.
    let (rtol, atol) = (1.0 / 1024.0, 4.0 * f32::EPSILON as f64 * k as f64);
    for (i, (g, w)) in got.to_vec_f64().unwrap().iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

/// Every shape below, each operand transposed or not.
fn shapes(d: &Device) {
    // Exact tiles; off the tile and the slice in M, N and K; a batch; K long enough to split
    // (few tiles) and short; one row; multiples of 4 (vec4 loaders) and odd sizes (scalar ones);
    // whole tiles, alone and split over K (partial sums stored straight from the tensor cores).
    let shapes = [
        [1, 128, 64, 128],
        [1, 17, 33, 65],
        [3, 130, 70, 129],
        [2, 64, 36, 8],
        [1, 1, 300, 5],
        [1, 200, 1500, 260],
        [4, 16, 16, 16],
        [2, 256, 96, 256],
        [1, 128, 1024, 256],
    ];
    for dims in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            case(d, dims, ta, tb, false);
        }
    }
    case(d, [3, 40, 52, 36], false, true, true);
    case(d, [3, 33, 17, 9], true, false, true);
}

#[test]
fn f16_matmul_matches_cpu_f32() {
    let Some(d) = gpu() else { return };
    let path = say_f16_path(&d, "products");
    // As routed: products this small run on the ordinary kernels even where the adapter has
    // tensor cores.
    shapes(&d);
    let mut devices = vec![d];
    if path.starts_with("tensor cores") {
        // Every product on the tensor cores, the small ones too.
        let coop = common::gpu_with(|o| o.testing.coop_any_size = true).expect("the device above");
        shapes(&coop);
        // Large in every dimension: on `Prefetch`'s tiles where `Tall` is the device's default
        // (`Variant::for_product`). Only where the tensor cores run it (a software adapter's
        // ordinary kernels would take most of CI's minute on it).
        case(&coop, [1, 2048, 2048, 2048], false, false, false);
        case(&coop, [1, 2048, 2048, 2048], false, true, false);
        devices.push(coop);
    }
    // Nothing above went to the CPU.
    for d in &devices {
        for (what, _) in d.fallback_report() {
            assert!(!(what.starts_with("matmul") && what.contains("(f16)")), "{what} ran on the CPU");
        }
    }
}

/// A linear layer's `x W^T + bias` in f16 (every product on the tensor cores where the adapter
/// has them) and in f32, against the CPU's f32 of the same values: the bias added as y is stored
/// where K is whole (on the tensor cores, N even), as the splits of a split K are summed, and
/// after the product where N is odd on the tensor cores.
#[test]
fn linear_bias_matches_cpu_f32() {
    use liandan_tensor::ops::MatmulBias;
    let Some(d) = common::gpu_with(|o| o.testing.coop_any_size = true) else { return };
    say_f16_path(&d, "f16 linear layers");
    for dtype in [DType::F16, DType::F32] {
        for [m, k, n] in [[256, 64, 128], [130, 70, 66], [128, 2048, 256], [70, 48, 9], [64, 9216, 128]] {
            let seed = (m + k + n) as u64;
            let value = |shape: &[usize], seed| match dtype {
                DType::F16 => operand(&d, shape, seed),
                _ => {
                    let c = Tensor::randn(shape, seed, DType::F32, &Device::cpu()).unwrap();
                    (c.to_device(&d).unwrap(), c)
                }
            };
            let ((gx, cx), (gw, cw), (gb, cb)) = (value(&[m, k], seed), value(&[n, k], seed + 1), value(&[n], seed + 2));
            let what = format!("{dtype} linear [{m}, {k}] x [{n}, {k}]^T + bias");
            let got = liandan_tensor::fused::run(&MatmulBias, &[&gx, &gw, &gb]).expect("a kernel").unwrap().remove(0);
            assert_eq!((got.dtype(), got.shape()), (dtype, &[m, n][..]), "{what}");
            let product = cx.matmul(&cw.t().unwrap()).unwrap();
            let want = product.add(&cb).unwrap().to_vec_f64().unwrap();
            // As `case`, relative to |x W^T| + |bias|: where the bias is added after, the product
            // is rounded before it. f32 sums in another order: a few ulps.
            let bound = product.abs().unwrap().add(&cb.abs().unwrap()).unwrap().to_vec_f64().unwrap();
            let rtol = if dtype == DType::F16 { 1.0 / 1024.0 } else { 4.0 * f32::EPSILON as f64 };
            let atol = 4.0 * f32::EPSILON as f64 * k as f64;
            for (i, ((g, w), b)) in got.to_vec_f64().unwrap().iter().zip(&want).zip(&bound).enumerate() {
                assert!((g - w).abs() <= atol + rtol * b, "{what}: element {i}: got {g}, want {w}");
            }
        }
    }
    // A bias read through a stride (every other value of a longer one): the kernels read a bias
    // a value a column, so this takes the composite, with the same values.
    let (m, k, n) = (64, 32, 24);
    let (gx, cx) = operand(&d, &[m, k], 5);
    let (gw, cw) = operand(&d, &[n, k], 6);
    let (gb, cb) = operand(&d, &[n, 2], 7);
    let (gb, cb) = (gb.select(1, 0).unwrap(), cb.select(1, 0).unwrap());
    let got = liandan_tensor::fused::run_or_composite(&MatmulBias, &[&gx, &gw, &gb]).unwrap().remove(0).to_vec_f64().unwrap();
    let want = cx.matmul(&cw.t().unwrap()).unwrap().add(&cb).unwrap().to_vec_f64().unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-3 + w.abs() / 256.0, "f16 linear with a strided bias: element {i}: got {g}, want {w}");
    }
    for (what, _) in d.fallback_report() {
        assert!(!(what.starts_with("matmul") && what.contains("(f16)")), "{what} ran on the CPU");
    }
}

/// Seeded values times `scale`, rounded to bf16: on the GPU packed, and on the CPU widened to
/// f32 (the oracle), with their magnitudes (for the bound on sums in another order).
fn bf16_operand(d: &Device, shape: &[usize], seed: u64, scale: f64) -> (Tensor, Tensor) {
    let h = Tensor::randn(shape, seed, DType::F32, &Device::cpu()).unwrap().mul_scalar(scale).unwrap().to_dtype(DType::BF16).unwrap();
    (h.to_device(d).unwrap(), h.to_dtype(DType::F32).unwrap())
}

/// `got` (bf16) against the CPU's f32 `want`: the products of bf16 values are exact in f32 and
/// summed in f32 on both sides (in another order: a few f32 ulps of sums that grow like k, of
/// `bound` = the sum of |a||b|), and the GPU's result is rounded to bf16 (2^-9 relative).
fn within_bf16(what: &str, got: &Tensor, want: &Tensor, bound: &Tensor, k: usize) {
    assert_eq!(got.dtype(), DType::BF16, "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let tol = 1.0 / 256.0 + 4.0 * f32::EPSILON as f64 * k as f64;
    let (g, w, b) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap(), bound.to_vec_f64().unwrap());
    for (i, ((g, w), b)) in g.iter().zip(&w).zip(&b).enumerate() {
        assert!((g - w).abs() <= tol * b, "{what}: element {i}: got {g}, want {w} (|a||b| summed: {b})");
    }
}

/// Packed bf16 products, which where the adapter has f16 cooperative matrices run on them with
/// each operand scaled by a power of two into f16's range (a bf16 value's 8 significant bits
/// fit f16's 11), against the CPU's f32 product of the same bf16 values: a past f16's range and
/// b below its normal one, then both near 1; every loader, splits of K (summed into packed
/// bf16), and a linear layer's bias added as y is stored. Elsewhere the tiled kernel's packed
/// loaders, checked the same way.
#[test]
fn bf16_matmul_matches_cpu_f32() {
    use liandan_tensor::ops::MatmulBias;
    // Every size on the tensor cores where the adapter has them.
    let Some(d) = common::gpu_with(|o| o.testing.coop_any_size = true) else { return };
    say_f16_path(&d, "bf16 products (scaled into f16)");
    let shapes = [[1, 128, 64, 128], [1, 17, 33, 65], [3, 130, 70, 132], [1, 1, 300, 8], [1, 200, 1500, 260], [2, 256, 96, 256], [1, 128, 1024, 256]];
    for [b, m, k, n] in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            for (sa, sb) in [(3.0e5, 1.0e-7), (1.0, 1.0)] {
                let seed = (m * 31 + k * 7 + n) as u64;
                let (ga, ca) = match ta {
                    true => bf16_operand(&d, &[b, k, m], seed, sa),
                    false => bf16_operand(&d, &[b, m, k], seed, sa),
                };
                let (gb, cb) = match tb {
                    true => bf16_operand(&d, &[b, n, k], seed + 1, sb),
                    false => bf16_operand(&d, &[b, k, n], seed + 1, sb),
                };
                let t = |x: Tensor, yes: bool| if yes { x.transpose(1, 2).unwrap() } else { x };
                let (ga, ca, gb, cb) = (t(ga, ta), t(ca, ta), t(gb, tb), t(cb, tb));
                let what = format!("bf16 matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] (transposed: {ta}, {tb}; scales {sa:e}, {sb:e})");
                let bound = ca.abs().unwrap().matmul(&cb.abs().unwrap()).unwrap();
                within_bf16(&what, &ga.matmul(&gb).unwrap(), &ca.matmul(&cb).unwrap(), &bound, k);
            }
        }
    }
    // A linear layer's x W^T + bias: y packed in one product (K whole), through the packed sum
    // (K split), and not packed (N odd).
    for [m, k, n] in [[256, 64, 128], [128, 2048, 256], [70, 48, 9]] {
        let seed = (m + k + n) as u64;
        let ((gx, cx), (gw, cw), (gb, cb)) =
            (bf16_operand(&d, &[m, k], seed, 3.0e5), bf16_operand(&d, &[n, k], seed + 1, 1.0e-7), bf16_operand(&d, &[n], seed + 2, 0.1));
        let got = liandan_tensor::fused::run(&MatmulBias, &[&gx, &gw, &gb]).expect("a kernel").unwrap().remove(0);
        let want = liandan_tensor::fused::run_or_composite(&MatmulBias, &[&cx, &cw, &cb]).unwrap().remove(0);
        let bound = cx.abs().unwrap().matmul(&cw.abs().unwrap().t().unwrap()).unwrap().add(&cb.abs().unwrap()).unwrap();
        within_bf16(&format!("bf16 linear [{m}, {k}] x [{n}, {k}]^T + bias"), &got, &want, &bound, k);
    }
    for (what, _) in d.fallback_report() {
        assert!(!(what.starts_with("matmul") && what.contains("(bf16)")), "{what} ran on the CPU");
    }
}
