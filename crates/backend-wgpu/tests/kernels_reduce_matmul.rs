//! The native reduce and matmul kernels against the CPU backend at sizes the conformance suite
//! does not reach: long lanes (split in two passes), many outputs (2-D grids), big and odd
//! matrices, transposed and batch-broadcast operands, every variant of the vec4 loaders. Skips
//! without an adapter unless `LIANDAN_REQUIRE_GPU` is set.

use liandan_backend_wgpu::testing::{dispatches_recorded, heads_products_recorded};
use liandan_tensor::{DType, Device, Tensor};

mod common;
use common::gpu;

/// Seeded values on the CPU, rounded to `dtype`, and the same tensor on `gpu`.
fn pair(gpu: &Device, shape: &[usize], seed: u64, dtype: DType) -> (Tensor, Tensor) {
    let c = Tensor::randn(shape, seed, DType::F32, &Device::cpu()).unwrap().to_dtype(dtype).unwrap();
    let g = c.to_device(gpu).unwrap();
    (g, c)
}

fn check(what: &str, got: &Tensor, want: &Tensor, atol: f64, rtol: f64) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_vec_f64().unwrap(), want.to_vec_f64().unwrap());
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// No matmul or reduce of these dtypes went to the CPU.
fn assert_native(d: &Device, dtypes: &[DType]) {
    for (what, _) in d.fallback_report() {
        let ours = what.starts_with("matmul") || what.starts_with("reduce");
        assert!(!(ours && dtypes.iter().any(|t| what.contains(&format!("({t})")))), "{what} ran on the CPU");
    }
}

/// A `[b, rows, cols]` operand on the GPU and the CPU (`pair`), stored transposed where `t`.
fn operand(d: &Device, [b, rows, cols]: [usize; 3], t: bool, seed: u64, dtype: DType) -> (Tensor, Tensor) {
    let shape = if t { [b, cols, rows] } else { [b, rows, cols] };
    let (g, c) = pair(d, &shape, seed, dtype);
    if t {
        (g.transpose(1, 2).unwrap(), c.transpose(1, 2).unwrap())
    } else {
        (g, c)
    }
}

/// `[b, m, k] x [b, k, n]` on both devices; `ta` / `tb` store the operand transposed.
fn matmul_case(d: &Device, [b, m, k, n]: [usize; 4], ta: bool, tb: bool, dtype: DType, tol: f64) {
    let (ga, ca) = operand(d, [b, m, k], ta, 1, dtype);
    let (gb, cb) = operand(d, [b, k, n], tb, 2, dtype);
    let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] {dtype} (transposed: {ta}, {tb})");
    check(&what, &ga.matmul(&gb).unwrap(), &ca.matmul(&cb).unwrap(), tol * (k as f64).sqrt(), tol);
}

/// `f()` after a synchronize, asserting that it moved `counter` (a count the backend keeps of
/// dispatches, or of products on one kernel) by `want`.
fn counted(d: &Device, counter: fn() -> u64, of: &str, what: &str, f: &dyn Fn() -> Tensor, want: u64) -> Tensor {
    d.synchronize().unwrap();
    let start = counter();
    let y = f();
    assert_eq!(counter() - start, want, "{what}: {of}");
    y
}

#[test]
fn matmul_matches_cpu() {
    let Some(d) = gpu() else { return };
    // Few tiles and a long K are split along K.
    for dims in [[1, 1, 1, 1], [1, 17, 33, 65], [1, 256, 256, 256], [2, 64, 36, 8], [3, 5, 4, 12], [1, 17, 3000, 65], [2, 64, 1024, 64]] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            matmul_case(&d, dims, ta, tb, DType::F32, 1e-5);
        }
    }
    // Enough output for 128 x 128 tiles, with ragged edges: every loader, vec4s along K or along
    // M / N (1000 x 1024), and strided scalars (1027 x 1021).
    for dims in [[3, 1000, 64, 1024], [3, 1027, 19, 1021]] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            matmul_case(&d, dims, ta, tb, DType::F32, 1e-5);
        }
    }
    for dtype in [DType::F16, DType::BF16, DType::F64] {
        let tol = if dtype == DType::F64 { 1e-12 } else { 1e-2 };
        matmul_case(&d, [1, 256, 256, 256], false, true, dtype, tol);
        matmul_case(&d, [2, 17, 33, 65], true, false, dtype, tol);
        matmul_case(&d, [1, 1, 2048, 64], false, true, dtype, tol);
    }
    // A narrowed rhs (row stride wider than the row) and a lhs batch broadcast with stride 0.
    let (ga, ca) = pair(&d, &[1, 40, 24], 3, DType::F32);
    let (gb, cb) = pair(&d, &[4, 24, 48], 4, DType::F32);
    let (gb, cb) = (gb.narrow(2, 4, 40).unwrap(), cb.narrow(2, 4, 40).unwrap());
    let (ga, ca) = (ga.expand(&[4, 40, 24]).unwrap(), ca.expand(&[4, 40, 24]).unwrap());
    check("matmul broadcast lhs x narrowed rhs", &ga.matmul(&gb).unwrap(), &ca.matmul(&cb).unwrap(), 1e-4, 1e-5);
    // A 2-D rhs against a batch, broadcast over it, stored transposed as a linear layer's weight.
    let (gw, cw) = pair(&d, &[48, 24], 5, DType::F32);
    let (gx, cx) = (gb.transpose(1, 2).unwrap(), cb.transpose(1, 2).unwrap());
    check("matmul batch x broadcast weight.t()", &gx.matmul(&gw.t().unwrap()).unwrap(), &cx.matmul(&cw.t().unwrap()).unwrap(), 1e-4, 1e-5);
    // K = 0: zeros.
    let (ga, ca) = pair(&d, &[3, 0], 6, DType::F32);
    let (gb, cb) = pair(&d, &[0, 5], 7, DType::F32);
    check("matmul K = 0", &ga.matmul(&gb).unwrap(), &ca.matmul(&cb).unwrap(), 0.0, 0.0);
    d.synchronize().unwrap();
    assert_native(&d, &[DType::F32, DType::F16, DType::BF16]);
}

/// An f32 product on 128 x 128 tiles reading both operands along K (a linear layer's `x W^T`)
/// with K of 384 or more runs on a `[K, N]` copy of its rhs: two dispatches, the copy and the
/// product, and the CPU's result; with a bias, and with the weight broadcast over a batch (copied
/// once), too. One with a shorter K, fewer tiles, N not a multiple of 4, or a rhs already
/// `[K, N]` runs as it is.
#[test]
fn linear_products_copy_their_weight_first() {
    let Some(d) = gpu() else { return };
    let dispatches = |what: &str, f: &dyn Fn() -> Tensor, want| counted(&d, dispatches_recorded, "dispatches", what, f, want);
    // 192 tiles of 128 x 128 (3 x 8 x 8; 1 x 17 x 13 ragged), then K short by 4, 176 tiles, b
    // already [K, N], and N not a multiple of 4 (whose copy could not be read in vec4s).
    let cases = [
        ([3, 1024, 384, 1024], true, 2),
        ([1, 2052, 388, 1540], true, 2),
        ([3, 1024, 380, 1024], true, 1),
        ([1, 1400, 384, 2048], true, 1),
        ([3, 1024, 384, 1024], false, 1),
        ([3, 1024, 384, 1022], true, 1),
    ];
    for ([b, m, k, n], tb, want) in cases {
        let (ga, ca) = operand(&d, [b, m, k], false, 1, DType::F32);
        let (gb, cb) = operand(&d, [b, k, n], tb, 2, DType::F32);
        let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] (rhs transposed: {tb})");
        let got = dispatches(&what, &|| ga.matmul(&gb).unwrap(), want);
        check(&what, &got, &ca.matmul(&cb).unwrap(), 1e-5 * (k as f64).sqrt(), 1e-5);
    }
    // A weight broadcast over the batch (stride 0), copied once and read so.
    let (ga, ca) = pair(&d, &[3, 1024, 384], 6, DType::F32);
    let (gw, cw) = pair(&d, &[1024, 384], 7, DType::F32);
    let (gb, cb) =
        (gw.t().unwrap().unsqueeze(0).unwrap().expand(&[3, 384, 1024]).unwrap(), cw.t().unwrap().unsqueeze(0).unwrap().expand(&[3, 384, 1024]).unwrap());
    let got = dispatches("batch x broadcast weight.t()", &|| ga.matmul(&gb).unwrap(), 2);
    check("batch x broadcast weight.t()", &got, &ca.matmul(&cb).unwrap(), 1e-5 * 384f64.sqrt(), 1e-5);
    let (gx, cx) = pair(&d, &[3072, 384], 3, DType::F32);
    let (gw, cw) = pair(&d, &[1024, 384], 4, DType::F32);
    let (gbias, cbias) = pair(&d, &[1024], 5, DType::F32);
    let got = dispatches("linear", &|| gx.linear(&gw, Some(&gbias)).unwrap(), 2);
    check("linear", &got, &cx.linear(&cw, Some(&cbias)).unwrap(), 1e-5 * 384f64.sqrt(), 1e-5);
    d.synchronize().unwrap();
    assert_native(&d, &[DType::F32]);
}

/// Small products whose K the tiled kernel would split over workgroups run as one dispatch
/// (`shaders/matmul/small.wgsl`: K split inside a workgroup): the LSTM's recurrent shapes, b
/// in vec4s along K (a linear layer's weight) and along N, ragged edges, a batch, a broadcast
/// batch, a narrowed operand, and a linear layer's bias added as the sums are stored; f16 too.
#[test]
fn small_products_run_in_one_dispatch() {
    let Some(d) = gpu() else { return };
    let one = |what: &str, f: &dyn Fn() -> Tensor| counted(&d, dispatches_recorded, "dispatches", what, f, 1);
    // [b, m, k, n], b stored transposed ([n, k], vec4s along K) or not ([k, n], along N).
    // The LSTM's two (16 x 16 and 8 x 16 blocks), ragged edges in both kinds of block.
    let cases = [
        ([1, 64, 256, 1024], true),
        ([1, 64, 1024, 256], false),
        ([1, 130, 260, 250], true),
        ([2, 100, 256, 200], false),
        ([1, 37, 516, 70], true),
        ([2, 50, 96, 36], false),
        ([3, 5, 4096, 12], true),
        ([1, 1, 300, 8], false),
    ];
    for (dims, tb) in cases {
        let [b, m, k, n] = dims;
        let (ga, ca) = pair(&d, &[b, m, k], 1, DType::F32);
        let shape = if tb { [b, n, k] } else { [b, k, n] };
        let (gb, cb) = pair(&d, &shape, 2, DType::F32);
        let (gb, cb) = if tb { (gb.transpose(1, 2).unwrap(), cb.transpose(1, 2).unwrap()) } else { (gb, cb) };
        let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] (b transposed: {tb})");
        let got = one(&what, &|| ga.matmul(&gb).unwrap());
        check(&what, &got, &ca.matmul(&cb).unwrap(), 1e-5 * (k as f64).sqrt(), 1e-5);
    }
    // f16 (summed in f32; on tensor cores, where the device has them, these would have gone
    // there), both loaders and both blocks.
    for dtype in [DType::F16] {
        for (dims, tb) in [([1, 64, 256, 1024], true), ([1, 64, 1024, 256], false), ([2, 37, 516, 70], true)] {
            let [b, m, k, n] = dims;
            let (ga, ca) = pair(&d, &[b, m, k], 8, dtype);
            let shape = if tb { [b, n, k] } else { [b, k, n] };
            let (gb, cb) = pair(&d, &shape, 9, dtype);
            let (gb, cb) = if tb { (gb.transpose(1, 2).unwrap(), cb.transpose(1, 2).unwrap()) } else { (gb, cb) };
            let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] {dtype} (b transposed: {tb})");
            let got = one(&what, &|| ga.matmul(&gb).unwrap());
            check(&what, &got, &ca.matmul(&cb).unwrap(), 1e-2 * (k as f64).sqrt(), 1e-2);
        }
    }
    // A 2-D weight broadcast over a batch, and a narrowed lhs (rows wider than K).
    let (ga, ca) = pair(&d, &[2, 40, 136], 3, DType::F32);
    let (ga, ca) = (ga.narrow(2, 4, 128).unwrap(), ca.narrow(2, 4, 128).unwrap());
    let (gw, cw) = pair(&d, &[24, 128], 4, DType::F32);
    let got = one("narrowed batch x broadcast weight.t()", &|| ga.matmul(&gw.t().unwrap()).unwrap());
    check("narrowed batch x broadcast weight.t()", &got, &ca.matmul(&cw.t().unwrap()).unwrap(), 1e-4, 1e-5);
    // A linear layer with its bias: the bias is added by the same dispatch.
    let (gx, cx) = pair(&d, &[64, 256], 5, DType::F32);
    let (gw, cw) = pair(&d, &[10, 256], 6, DType::F32);
    let (gbias, cbias) = pair(&d, &[10], 7, DType::F32);
    let got = one("linear 256 -> 10 with a bias", &|| gx.linear(&gw, Some(&gbias)).unwrap());
    check("linear 256 -> 10 with a bias", &got, &cx.linear(&cw, Some(&cbias)).unwrap(), 1e-4, 1e-5);
    d.synchronize().unwrap();
    assert_native(&d, &[DType::F32, DType::F16, DType::BF16]);
}

/// Batches of products each a little larger than a 64 x 64 tile (a ViT's attention heads of
/// 65 tokens, forward and backward) run one 80 x 80 tile a product
/// (`shaders/matmul/heads.wgsl`): every orientation of the operands, K within one slice, across
/// several and ragged, M and N up to 80, a broadcast operand; f16 and packed bf16 too. Products outside its
/// range (a small batch, a head of 81) stay on the tiled kernel.
#[test]
fn batched_small_heads_take_one_tile_each() {
    let Some(d) = gpu() else { return };
    let heads = |what: &str, f: &dyn Fn() -> Tensor, want: usize| counted(&d, heads_products_recorded, "products on the one-tile kernel", what, f, want as u64);
    let cases = [[96, 65, 64, 65], [96, 65, 65, 64], [80, 80, 7, 80], [88, 70, 129, 66], [80, 1, 33, 65], [80, 65, 0, 65]];
    for [b, m, k, n] in cases {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (ga, ca) = operand(&d, [b, m, k], ta, 1, DType::F32);
            let (gb, cb) = operand(&d, [b, k, n], tb, 2, DType::F32);
            let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}] (transposed: {ta}, {tb})");
            let got = heads(&what, &|| ga.matmul(&gb).unwrap(), 1);
            check(&what, &got, &ca.matmul(&cb).unwrap(), 1e-5 * (k.max(1) as f64).sqrt(), 1e-5);
        }
    }
    // A key matrix broadcast over the batch (stride 0), and f16 (summed in f32; products this
    // small stay off the tensor cores where the device has them, `plan::COOP_MIN_FLOPS`).
    let (ga, ca) = pair(&d, &[96, 65, 64], 3, DType::F32);
    let (gb, cb) = pair(&d, &[1, 64, 65], 4, DType::F32);
    let (gb, cb) = (gb.expand(&[96, 64, 65]).unwrap(), cb.expand(&[96, 64, 65]).unwrap());
    let got = heads("broadcast rhs", &|| ga.matmul(&gb).unwrap(), 1);
    check("broadcast rhs", &got, &ca.matmul(&cb).unwrap(), 1e-4, 1e-5);
    let (ga, ca) = pair(&d, &[80, 65, 64], 5, DType::F16);
    let (gb, cb) = pair(&d, &[80, 64, 65], 6, DType::F16);
    let got = heads("f16", &|| ga.matmul(&gb).unwrap(), 1);
    check("f16", &got, &ca.matmul(&cb).unwrap(), 1e-2 * 8.0, 1e-2);
    // Packed bf16 (as autocast holds it), widened as it is read; y unpacked. Both sides round
    // their sums of 64 products to bf16 (2^-9 relative each).
    for (ta, tb) in [(false, false), (true, true)] {
        let (ga, ca) = operand(&d, [80, 65, 64], ta, 9, DType::BF16);
        let (gb, cb) = operand(&d, [80, 64, 65], tb, 10, DType::BF16);
        let what = format!("bf16 (transposed: {ta}, {tb})");
        let got = heads(&what, &|| ga.matmul(&gb).unwrap(), 1);
        check(&what, &got, &ca.matmul(&cb).unwrap(), 0.05, 1e-2);
    }
    // Outside its range: too few products (79: the kernel takes batches of 80 or more), more
    // than 80 rows, or none past 64.
    for [b, m, k, n] in [[79, 65, 64, 65], [80, 81, 64, 65], [80, 64, 64, 64]] {
        let (ga, ca) = pair(&d, &[b, m, k], 7, DType::F32);
        let (gb, cb) = pair(&d, &[b, k, n], 8, DType::F32);
        let what = format!("matmul [{b}, {m}, {k}] x [{b}, {k}, {n}]");
        let got = heads(&what, &|| ga.matmul(&gb).unwrap(), 0);
        check(&what, &got, &ca.matmul(&cb).unwrap(), 1e-4, 1e-5);
    }
    d.synchronize().unwrap();
    assert_native(&d, &[DType::F32, DType::F16, DType::BF16]);
}

/// Every reduction of `x` over `dims` (sum) or `dim` (the rest) on both devices.
fn reduce_case(what: &str, g: &Tensor, c: &Tensor, dim: usize, sum_tol: f64) {
    let what = format!("{what} {:?} {} over {dim}", c.shape(), c.dtype());
    check(&format!("sum {what}"), &g.sum(&[dim], false).unwrap(), &c.sum(&[dim], false).unwrap(), sum_tol, sum_tol);
    check(&format!("max {what}"), &g.max(dim, false).unwrap(), &c.max(dim, false).unwrap(), 0.0, 0.0);
    check(&format!("min {what}"), &g.min(dim, true).unwrap(), &c.min(dim, true).unwrap(), 0.0, 0.0);
    check(&format!("argmax {what}"), &g.argmax(dim, false).unwrap(), &c.argmax(dim, false).unwrap(), 0.0, 0.0);
    check(&format!("argmin {what}"), &g.argmin(dim, false).unwrap(), &c.argmin(dim, false).unwrap(), 0.0, 0.0);
}

#[test]
fn reduce_matches_cpu() {
    let Some(d) = gpu() else { return };
    // Long lanes, along the last axis and down columns; past 2M elements they are split in two
    // passes.
    for shape in [&[100_000][..], &[(1 << 21) + 3], &[2, 1_100_000], &[1_100_000, 2], &[3, 400_000, 2]] {
        let (g, c) = pair(&d, shape, 10, DType::F32);
        for dim in 0..shape.len() {
            reduce_case("long", &g, &c, dim, 1e-4);
        }
    }
    // Many long columns: an invocation each, the lanes split in two passes.
    let (g, c) = pair(&d, &[1100, 9000], 15, DType::F32);
    reduce_case("columns", &g, &c, 0, 1e-4);
    // Many short lanes; more than 65,535 workgroups (a 2-D grid).
    let (g, c) = pair(&d, &[70_000, 3], 11, DType::F32);
    reduce_case("many", &g, &c, 1, 1e-5);
    reduce_case("many", &g, &c, 0, 1e-4);
    let (g, c) = pair(&d, &[2_100_000, 17], 12, DType::F16);
    reduce_case("2-D grid", &g, &c, 1, 1e-2);
    // Middle lengths for each spread of invocations.
    for shape in [[300, 100, 1], [3000, 300, 1], [7, 1000, 9], [64, 300, 300], [40, 100, 1000], [5, 17, 20_000]] {
        let (g, c) = pair(&d, &shape, 13, DType::F32);
        reduce_case("mid", &g, &c, 1, 1e-4);
    }
    // Sums down few columns on the column kernel: a bias gradient's rows cut into chunks, one
    // chunk, two workgroups across a row and several outer slices, a view from an offset.
    for (shape, dim) in [(&[2000usize, 192][..], 0), (&[50, 8], 0), (&[3, 700, 260], 1), (&[4, 130, 12], 1)] {
        let (g, c) = pair(&d, shape, 16, DType::F32);
        let what = format!("column sum {shape:?} over {dim}");
        check(&what, &g.sum(&[dim], false).unwrap(), &c.sum(&[dim], false).unwrap(), 1e-4, 1e-4);
    }
    let (g, c) = pair(&d, &[1100, 192], 17, DType::F32);
    let (g, c) = (g.narrow(0usize, 3, 1000).unwrap(), c.narrow(0usize, 3, 1000).unwrap());
    check("column sum from an offset", &g.sum(&[0], false).unwrap(), &c.sum(&[0], false).unwrap(), 1e-4, 1e-4);
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let (g, c) = pair(&d, &[33, 5000], 14, dtype);
        let tol = if dtype == DType::F64 { 1e-10 } else { 2e-2 };
        reduce_case("dtype", &g, &c, 1, tol);
        reduce_case("dtype", &g, &c, 0, tol);
    }
    d.synchronize().unwrap();
    assert_native(&d, &[DType::F32, DType::F16, DType::BF16]);
}

#[test]
fn reduce_ties_and_nan_keep_the_first() {
    let Some(d) = gpu() else { return };
    // Small integers: ties everywhere; NaNs placed in some lanes, twice in one.
    let n = 50_000;
    let mut v: Vec<f64> = (0..3 * n).map(|i| ((i * 7919) % 5) as f64 - 2.0).collect();
    for i in [n + 123, n + 40_000, 2 * n + 7, 2 * n + 9] {
        v[i] = f64::NAN;
    }
    let c = Tensor::from_f64s(&v, &[3, n], DType::F32, &Device::cpu()).unwrap();
    let g = c.to_device(&d).unwrap();
    reduce_case("ties", &g, &c, 1, 1e-5);
    let (gt, ct) = (g.t().unwrap().contiguous().unwrap(), c.t().unwrap().contiguous().unwrap());
    reduce_case("ties", &gt, &ct, 0, 1e-5);
    reduce_case("ties", &gt, &ct, 1, 1e-5);
}

/// A dense operand beside one broadcast over channels runs in vec4s
/// (`elementwise::Key::broadcast4`) where the count and the dense operand's offset are
/// multiples of four, on the strided kernels otherwise: against the CPU for a row bias, a
/// channel bias over planes of 16 and of 25, a column, a scalar, each on either side (sub and
/// div are not symmetric), the dense operand at offsets 4 and 3, and counts that are not
/// multiples of four.
#[test]
fn broadcast_elementwise_matches_cpu() {
    let Some(d) = gpu() else { return };
    // (dense shape, broadcast shape)
    let cases: [(&[usize], &[usize]); 7] = [
        (&[6, 8], &[8]),             // a linear layer's bias
        (&[2, 3, 4, 4], &[3, 1, 1]), // a channel's bias over 16 pixels
        (&[4, 3, 5, 5], &[3, 1, 1]), // over 25: four values a vec4
        (&[8, 6], &[8, 1]),          // along a column
        (&[12], &[]),                // a scalar
        (&[5, 3], &[3]),             // 15 elements: the strided kernel
        (&[2, 2, 3, 3], &[2, 1, 1]), // 36 elements, planes of 9
    ];
    for dtype in [DType::F32, DType::F16] {
        let inexact = if dtype == DType::F16 { 1e-3 } else { 1e-6 };
        for (i, (dense, bcast)) in cases.iter().enumerate() {
            let n: usize = dense.iter().product();
            for off in [0, 4, 3] {
                let (ga, ca) = pair(&d, &[off + n], 20 + i as u64, dtype);
                let shaped = |t: Tensor| t.narrow(0usize, off, n).unwrap().reshape(dense).unwrap();
                let (ga, ca) = (shaped(ga), shaped(ca));
                let (gb, cb) = pair(&d, bcast, 40 + i as u64, dtype);
                let what = |op: &str, side: &str| format!("{op} of {dense:?} and {bcast:?} ({side} broadcast) {dtype} at offset {off}");
                for (side, x, y, cx, cy) in [("rhs", &ga, &gb, &ca, &cb), ("lhs", &gb, &ga, &cb, &ca)] {
                    check(&what("add", side), &x.add(y).unwrap(), &cx.add(cy).unwrap(), 0.0, 0.0);
                    check(&what("sub", side), &x.sub(y).unwrap(), &cx.sub(cy).unwrap(), 0.0, 0.0);
                    check(&what("mul", side), &x.mul(y).unwrap(), &cx.mul(cy).unwrap(), 0.0, 0.0);
                    check(&what("div", side), &x.div(y).unwrap(), &cx.div(cy).unwrap(), inexact, inexact);
                    check(&what("maximum", side), &x.maximum(y).unwrap(), &cx.maximum(cy).unwrap(), 0.0, 0.0);
                }
            }
        }
    }
    assert_native(&d, &[DType::F32, DType::F16]);
}

/// Dense f32 and f16 operands run in vec4s (`elementwise::Key::dense4`) where the count and
/// every offset are multiples of four, on the strided kernels otherwise: both against the CPU
/// (which computes f16 in f32 and rounds, as the GPU does), for unaries, the binaries and a
/// cat, at offsets 0, 4 and 3 and lengths 4096, 8, 6 and 1; the casts between f32 and f16
/// (strided kernels) at the same offsets.
#[test]
fn dense_elementwise_matches_cpu() {
    let Some(d) = gpu() else { return };
    for dtype in [DType::F32, DType::F16] {
        // exp and div are correctly rounded on neither side's f32; in f16 that shows only
        // where the f32 results straddle an f16 rounding boundary.
        let inexact = if dtype == DType::F16 { 1e-3 } else { 1e-6 };
        for len in [4096, 8, 6, 1] {
            for off in [0, 4, 3] {
                let (ga, ca) = pair(&d, &[off + len + 5], 10, dtype);
                let (gb, cb) = pair(&d, &[len + 4], 11, dtype);
                let (ga, ca) = (ga.narrow(0usize, off, len).unwrap(), ca.narrow(0usize, off, len).unwrap());
                let (gb, cb) = (gb.narrow(0usize, 4, len).unwrap(), cb.narrow(0usize, 4, len).unwrap());
                let what = |op: &str| format!("{op} of {len} {dtype} at offset {off}");
                check(&what("exp"), &ga.exp().unwrap(), &ca.exp().unwrap(), inexact, inexact);
                check(&what("neg"), &ga.neg().unwrap(), &ca.neg().unwrap(), 0.0, 0.0);
                check(&what("add"), &ga.add(&gb).unwrap(), &ca.add(&cb).unwrap(), 0.0, 0.0);
                check(&what("sub"), &ga.sub(&gb).unwrap(), &ca.sub(&cb).unwrap(), 0.0, 0.0);
                check(&what("mul"), &ga.mul(&gb).unwrap(), &ca.mul(&cb).unwrap(), 0.0, 0.0);
                check(&what("div"), &ga.div(&gb).unwrap(), &ca.div(&cb).unwrap(), inexact, inexact);
                check(&what("maximum"), &ga.maximum(&gb).unwrap(), &ca.maximum(&cb).unwrap(), 0.0, 0.0);
                check(&what("cat"), &Tensor::cat(&[&gb, &ga], 0usize).unwrap(), &Tensor::cat(&[&cb, &ca], 0usize).unwrap(), 0.0, 0.0);
                let other = if dtype == DType::F16 { DType::F32 } else { DType::F16 };
                check(&what("cast"), &ga.to_dtype(other).unwrap(), &ca.to_dtype(other).unwrap(), 0.0, 0.0);
            }
        }
    }
    assert_native(&d, &[DType::F32, DType::F16]);
}

/// A classifier's log-softmax (most of its cross-entropy) is one dispatch forward and one
/// backward, where the composite takes some ten and four; its values are the CPU's.
#[test]
fn log_softmax_is_a_dispatch_each_way() {
    let Some(d) = gpu() else { return };
    let (g, c) = pair(&d, &[64, 10], 30, DType::F32);
    let g = g.requires_grad_(true).unwrap();
    let y = counted(&d, dispatches_recorded, "dispatches", "log_softmax forward", &|| g.log_softmax(-1isize).unwrap(), 1);
    let want = c.log_softmax(-1isize).unwrap().to_vec::<f32>().unwrap();
    for (a, b) in y.to_vec::<f32>().unwrap().iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} against the CPU's {b}");
    }
    let dy = Tensor::full(&[64, 10], 0.5, DType::F32, &d).unwrap();
    counted(
        &d,
        dispatches_recorded,
        "dispatches",
        "log_softmax backward",
        &|| {
            y.backward_with(&dy, false).unwrap();
            g.grad().unwrap()
        },
        1,
    );
}

/// Under f16 or bf16 autocast a linear layer's gradients of its f32 input, weight and bias are
/// one dispatch each: the products of the low operands, and the sum of the low rows, summed
/// into f32 with no cast after them (six dispatches with fusion off: the low products and sum,
/// then a cast each); their values are the CPU's within the low type's rounding.
#[test]
fn autocast_gradients_of_f32_tensors_are_summed_into_f32() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    for (low, tol) in [(DType::F16, 1e-2), (DType::BF16, 5e-2)] {
        let (x, xc) = pair(&d, &[64, 32], 40, DType::F32);
        let (w, wc) = pair(&d, &[48, 32], 41, DType::F32);
        let (b, bc) = pair(&d, &[48], 42, DType::F32);
        let [x, xc, w, wc, b, bc] = [x, xc, w, wc, b, bc].map(|t| t.requires_grad_(true).unwrap());
        let y = liandan_tensor::autocast(low, || x.linear(&w, Some(&b))).unwrap();
        let yc = liandan_tensor::autocast(low, || xc.linear(&wc, Some(&bc))).unwrap();
        let dy = |d: &Device| Tensor::from_f64s(&(0..64 * 48).map(|i| (i % 7) as f64 * 0.125 - 0.375).collect::<Vec<_>>(), &[64, 48], low, d).unwrap();
        let dy_gpu = dy(&d);
        counted(
            &d,
            dispatches_recorded,
            "dispatches",
            &format!("the input's, the weight's and the bias's gradients under {low}"),
            &|| {
                y.backward_with(&dy_gpu, false).unwrap();
                w.grad().unwrap()
            },
            3,
        );
        yc.backward_with(&dy(&cpu), false).unwrap();
        for (got, want) in [(&x, &xc), (&w, &wc), (&b, &bc)] {
            let got = got.grad().unwrap();
            assert_eq!(got.dtype(), DType::F32);
            for (a, b) in got.to_vec::<f32>().unwrap().iter().zip(want.grad().unwrap().to_vec::<f32>().unwrap()) {
                assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{low}: {a} against the CPU's {b}");
            }
        }
    }
}
