//! bf16 held two elements to a 32-bit word: what goes in comes out bit for bit, views at any
//! offset and stride read the right halves, and rounding into bf16 is the CPU's (to nearest
//! even, NaN kept a NaN, overflow to infinity).

use half::bf16;
use liandan_backend_wgpu::testing::dispatches_recorded;
use liandan_tensor::{DType, Device, Tensor};

mod common;
use common::gpu;

/// Values whose halves, signs and classes a packing mistake would show.
fn tricky() -> Vec<bf16> {
    let mut v: Vec<bf16> =
        [0.0f32, -0.0, 1.0, -2.5, 3.0e38, -3.0e38, 1.0e-40, -1.0e-40, f32::INFINITY, f32::NEG_INFINITY, 65504.0, 0.1].into_iter().map(bf16::from_f32).collect();
    v.push(bf16::NAN);
    v.extend((0..40).map(|i| bf16::from_f32(i as f32 * 0.37 - 7.0)));
    v
}

/// A named view of a tensor, and of a pair of them.
type View = (&'static str, fn(&Tensor) -> Tensor);
type Pair = (&'static str, fn(&Tensor, &Tensor) -> (Tensor, Tensor));

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn uploads_come_back_bit_for_bit_at_any_length() {
    let Some(d) = gpu() else { return };
    let all = tricky();
    for len in [1, 2, 3, 7, 8, all.len()] {
        let t = Tensor::from_slice(&all[..len], &[len], &d).unwrap();
        assert_eq!(bits(&t.to_vec::<bf16>().unwrap()), bits(&all[..len]), "length {len}");
        // Through a kernel: a copy, and a widening to f32.
        let copied = t.narrow(0, 0, len).unwrap().contiguous().unwrap();
        assert_eq!(bits(&copied.to_vec::<bf16>().unwrap()), bits(&all[..len]));
        let wide: Vec<f32> = t.to_dtype(DType::F32).unwrap().to_vec().unwrap();
        let want: Vec<f32> = all[..len].iter().map(|x| x.to_f32()).collect();
        assert_eq!(wide.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
}

#[test]
fn views_read_the_right_halves() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values: Vec<bf16> = (0..7 * 9).map(|i| bf16::from_f32(i as f32 - 20.5)).collect();
    let g = Tensor::from_slice(&values, &[7, 9], &d).unwrap();
    let c = Tensor::from_slice(&values, &[7, 9], &cpu).unwrap();
    // Each value 0.5 above or below its neighbour in `values`, by parity: a comparison that
    // read the other half of a word would disagree.
    let others: Vec<bf16> = values.iter().enumerate().map(|(i, v)| bf16::from_f32(v.to_f32() + if i % 2 == 0 { 0.5 } else { -0.5 })).collect();
    let (g2, c2) = (Tensor::from_slice(&others, &[7, 9], &d).unwrap(), Tensor::from_slice(&others, &[7, 9], &cpu).unwrap());
    let views: [View; 5] = [
        ("odd offset", |t| t.narrow(1, 3, 5).unwrap()),
        ("odd row", |t| t.narrow(0, 1, 3).unwrap()),
        ("transposed", |t| t.t().unwrap()),
        ("broadcast", |t| t.narrow(0, 2, 1).unwrap().expand(&[4, 9]).unwrap()),
        ("transposed, narrowed", |t| t.t().unwrap().narrow(1, 1, 5).unwrap()),
    ];
    for (name, view) in views {
        let (got, want) = (view(&g), view(&c));
        assert_eq!(bits(&got.to_vec::<bf16>().unwrap()), bits(&want.to_vec::<bf16>().unwrap()), "{name}: read back");
        // Through kernels: with a scalar, and with the same view of another tensor.
        let (got, want) = (got.mul_scalar(3.0).unwrap(), want.mul_scalar(3.0).unwrap());
        assert_eq!(bits(&got.to_vec::<bf16>().unwrap()), bits(&want.to_vec::<bf16>().unwrap()), "{name}: through a kernel");
        let got = got.sub(&view(&g2)).unwrap().exp().unwrap().to_vec::<bf16>().unwrap();
        let want = want.sub(&view(&c2)).unwrap().exp().unwrap().to_vec::<bf16>().unwrap();
        let close = got.iter().zip(&want).all(|(a, b)| a == b || (a.to_f32() - b.to_f32()).abs() <= b.to_f32().abs() / 128.0);
        assert!(close, "{name}: two views: {got:?} against {want:?}");
        // A comparison of two views, and a choice between them (ReLU's pieces).
        let (ga, gb, ca, cb) = (view(&g), view(&g2), view(&c), view(&c2));
        let (gm, cm) = (ga.gt(&gb).unwrap(), ca.gt(&cb).unwrap());
        assert_eq!(gm.to_vec::<liandan_tensor::Bool8>().unwrap(), cm.to_vec::<liandan_tensor::Bool8>().unwrap(), "{name}: gt");
        let got = Tensor::where_cond(&gm, &gb, &ga).unwrap().to_vec::<bf16>().unwrap();
        let want = Tensor::where_cond(&cm, &cb, &ca).unwrap().to_vec::<bf16>().unwrap();
        assert_eq!(bits(&got), bits(&want), "{name}: where");
        let relu = |t: &Tensor| t.relu().unwrap().to_vec::<bf16>().unwrap();
        assert_eq!(bits(&relu(&ga)), bits(&relu(&ca)), "{name}: relu");
    }
}

#[test]
fn casts_into_bf16_round_as_the_cpu_does() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    // Ties at bf16 precision both ways, values just past them, overflow, subnormals, NaN.
    let mut values: Vec<f32> =
        vec![1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, 1.0 + 1.0 / 256.0 + 1e-7, -(1.0 + 3.0 / 256.0), 3.4e38, -3.4e38, 1e-39, 1e-45, f32::NAN];
    // A NaN whose payload sits below bf16's bits (truncating would make it an infinity).
    values.push(f32::from_bits(0x7f80_0001));
    values.extend((0..101).map(|i| (i as f32 - 50.0) * 0.0123));
    let n = values.len();
    let twice: Vec<f32> = values.iter().chain(&values).copied().collect();
    for from in [DType::F32, DType::F16] {
        let g = Tensor::from_slice(&twice, &[2, n], &d).unwrap().to_dtype(from).unwrap();
        let c = Tensor::from_slice(&twice, &[2, n], &cpu).unwrap().to_dtype(from).unwrap();
        // Dense, and strided (a column of the transpose: every element n apart).
        let views: [View; 2] = [("dense", |t| t.narrow(0, 1, 1).unwrap()), ("strided", |t| t.t().unwrap().narrow(1, 0, 1).unwrap())];
        for (name, view) in views {
            let got = view(&g).to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
            let want = view(&c).to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan(), "{from} {name} element {i} ({}): {a} against the CPU's {b}", values[i]);
            }
        }
    }
    let g = Tensor::from_slice(&values, &[n], &d).unwrap().narrow(0, 1, n - 1).unwrap().to_dtype(DType::BF16).unwrap();
    let c = Tensor::from_slice(&values, &[n], &cpu).unwrap().narrow(0, 1, n - 1).unwrap().to_dtype(DType::BF16).unwrap();
    let (got, want) = (g.to_vec::<bf16>().unwrap(), c.to_vec::<bf16>().unwrap());
    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan()), "odd offset: {got:?} against {want:?}");
}

/// Matrix products read packed operands themselves (in runs of four where aligned, one by one
/// through any strides): the CPU's bf16 product within bf16 rounding, for dense, transposed,
/// odd-offset and broadcast operands.
#[test]
fn products_read_packed_operands() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values = |n: usize, seed: usize| -> Vec<bf16> { (0..n).map(|i| bf16::from_f32((((i * 7 + seed * 13) % 23) as f32 - 11.0) / 8.0)).collect() };
    let (a, b) = (values(9 * 16, 1), values(17 * 16, 2));
    let pairs: [Pair; 4] = [
        ("dense", |a, b| (a.narrow(0, 0, 8).unwrap(), b.narrow(0, 0, 16).unwrap())),
        ("transposed rhs", |a, b| (a.narrow(0, 0, 8).unwrap(), b.t().unwrap())),
        ("odd offset", |a, b| (a.narrow(1, 1, 15).unwrap(), b.narrow(0, 1, 15).unwrap())),
        ("broadcast batch", |a, b| {
            (
                a.narrow(0, 0, 8).unwrap().unsqueeze(0).unwrap().expand(&[3, 8, 16]).unwrap(),
                b.narrow(0, 0, 16).unwrap().unsqueeze(0).unwrap().expand(&[3, 16, 16]).unwrap(),
            )
        }),
    ];
    let tg = (Tensor::from_slice(&a, &[9, 16], &d).unwrap(), Tensor::from_slice(&b, &[17, 16], &d).unwrap());
    let tc = (Tensor::from_slice(&a, &[9, 16], &cpu).unwrap(), Tensor::from_slice(&b, &[17, 16], &cpu).unwrap());
    for (name, pick) in pairs {
        let (ga, gb) = pick(&tg.0, &tg.1);
        let (ca, cb) = pick(&tc.0, &tc.1);
        let got = ga.matmul(&gb).unwrap().to_vec_f64().unwrap();
        let want = ca.matmul(&cb).unwrap().to_vec_f64().unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= w.abs() / 128.0 + 1e-6, "{name} element {i}: {g} against the CPU's {w}");
        }
    }
}

/// Reductions read packed views themselves: sums, maxima and their indices along either axis
/// of odd-offset and transposed views, against the CPU.
#[test]
fn reductions_read_packed_views() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values: Vec<bf16> = (0..9 * 33).map(|i| bf16::from_f32(((i * 17 % 29) as f32 - 14.0) / 4.0)).collect();
    let g = Tensor::from_slice(&values, &[9, 33], &d).unwrap();
    let c = Tensor::from_slice(&values, &[9, 33], &cpu).unwrap();
    let views: [View; 3] = [("odd offset", |t| t.narrow(1, 1, 31).unwrap()), ("transposed", |t| t.t().unwrap()), ("odd row", |t| t.narrow(0, 3, 5).unwrap())];
    for (name, view) in views {
        for dim in [0usize, 1] {
            let (gv, cv) = (view(&g), view(&c));
            let got = gv.sum(&[dim], false).unwrap().to_vec_f64().unwrap();
            let want = cv.sum(&[dim], false).unwrap().to_vec_f64().unwrap();
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).abs() <= b.abs() / 128.0 + 1e-3, "{name} sum over {dim}, element {i}: {a} against the CPU's {b}");
            }
            assert_eq!(gv.max(dim, false).unwrap().to_vec_f64().unwrap(), cv.max(dim, false).unwrap().to_vec_f64().unwrap(), "{name} max over {dim}");
            assert_eq!(
                gv.argmax(dim, false).unwrap().to_vec::<i64>().unwrap(),
                cv.argmax(dim, false).unwrap().to_vec::<i64>().unwrap(),
                "{name} argmax over {dim}"
            );
        }
    }
}

/// The LSTM's kernels read packed operands as stored and write packed results: a step (its
/// product and cell), a cell of two gate terms and that cell's backward are one dispatch each,
/// nothing widened or packed around them, and give the CPU's bf16 values within bf16 rounding
/// (N and H past the step kernel's 8 x 8 blocks, so its edge pairs are stored too).
#[test]
fn lstm_kernels_read_and_write_packed_words() {
    use liandan_tensor::ops::{LstmCell, LstmCellBackward, LstmStep};
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let (n, h) = (10, 12);
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 7 + seed * 13) % 29) as f32 - 14.0) / 16.0)).collect() };
    let shapes: [&[usize]; 7] = [&[n, 4 * h], &[n, h], &[4 * h, h], &[n, h], &[2, n, h], &[n, h], &[n, h]];
    let on =
        |dev: &Device| -> Vec<Tensor> { shapes.iter().enumerate().map(|(k, s)| Tensor::from_slice(&values(s.iter().product(), k), s, dev).unwrap()).collect() };
    let (g, c) = (on(&d), on(&cpu));
    let cases: [(&str, &dyn liandan_tensor::CustomOp, [usize; 6], usize); 3] = [
        ("lstm_step", &LstmStep, [0, 1, 2, 3, 9, 9], 4),
        ("lstm_cell of two gate terms", &LstmCell, [0, 3, 0, 9, 9, 9], 3),
        ("lstm_cell_backward", &LstmCellBackward, [0, 3, 4, 5, 6, 0], 6),
    ];
    for (what, op, picks, count) in cases {
        let (gi, ci): (Vec<&Tensor>, Vec<&Tensor>) = picks[..count].iter().map(|&k| (&g[k], &c[k])).unzip();
        kernel_like_cpu(&d, what, op, [&gi, &ci], 1, 1.0 / 64.0);
    }
}

/// `op`'s kernel on the packed `inputs[0]` runs as `kernels` dispatches and gives its composite's
/// values on the CPU's `inputs[1]` within a bf16 rounding plus `atol`, output types alike.
fn kernel_like_cpu(d: &Device, what: &str, op: &dyn liandan_tensor::CustomOp, inputs: [&[&Tensor]; 2], kernels: u64, atol: f64) {
    d.synchronize().unwrap();
    let start = dispatches_recorded();
    let got = liandan_tensor::fused::run(op, inputs[0]).unwrap_or_else(|| panic!("{what}: no kernel")).unwrap();
    assert_eq!(dispatches_recorded() - start, kernels, "{what}: dispatches");
    let want = liandan_tensor::fused::run_or_composite(op, inputs[1]).unwrap();
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{what}: output {k}");
        for (i, (x, y)) in a.to_vec_f64().unwrap().iter().zip(&b.to_vec_f64().unwrap()).enumerate() {
            assert!((x - y).abs() <= y.abs() / 64.0 + atol, "{what}: output {k}, element {i}: {x} against the CPU's {y}");
        }
    }
}

/// Joining packed tensors copies their words where each part is a whole-word run of the result
/// (no kernel: an RNN's stacked steps and gradients), or, along a later dimension, runs of
/// whole words a row (a kernel a part: attention's q, k and v gradients); odd runs go through
/// the widened kernels. Either way bit for bit the CPU's.
#[test]
fn concat_copies_packed_words() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values = tricky();
    let on = |dev: &Device, shape: &[usize], skip: usize| Tensor::from_slice(&values[skip..skip + shape.iter().product::<usize>()], shape, dev).unwrap();
    // (shapes of the parts, dim, kernels expected: exactly, or at least where widened)
    let cases: [(&[&[usize]], usize, u64, bool); 6] = [
        (&[&[2, 4], &[3, 4], &[1, 4]], 0, 0, true),
        (&[&[3, 2, 4], &[3, 2, 6], &[3, 2, 2]], 2, 3, true),
        (&[&[2, 1, 4], &[2, 3, 4]], 1, 2, true),
        (&[&[1, 3], &[2, 3]], 0, 3, false),
        (&[&[2, 2], &[2, 3]], 1, 3, false),
        (&[&[3, 3], &[3, 1]], 1, 3, false),
    ];
    for (shapes, dim, kernels, exact) in cases {
        let gp: Vec<Tensor> = shapes.iter().enumerate().map(|(k, s)| on(&d, s, k)).collect();
        let cp: Vec<Tensor> = shapes.iter().enumerate().map(|(k, s)| on(&cpu, s, k)).collect();
        d.synchronize().unwrap();
        let start = dispatches_recorded();
        let got = Tensor::cat(&gp.iter().collect::<Vec<_>>(), dim).unwrap();
        let ran = dispatches_recorded() - start;
        let want = Tensor::cat(&cp.iter().collect::<Vec<_>>(), dim).unwrap();
        let what = format!("concat of {shapes:?} along {dim}");
        assert_eq!(bits(&got.to_vec::<bf16>().unwrap()), bits(&want.to_vec::<bf16>().unwrap()), "{what}");
        if exact {
            assert_eq!(ran, kernels, "{what}: kernels");
        } else {
            assert!(ran >= kernels, "{what}: {ran} kernels, widened and packed");
        }
    }
}

/// ReLU, batch norm (packed activations beside f32 parameters, as under autocast; with running
/// statistics and a batch count too) and their gradients read and write packed words: a
/// dispatch for ReLU's each, two for batch norm's each, nothing widened or packed around them;
/// the CPU's values within bf16 rounding.
#[test]
fn relu_and_batch_norm_read_and_write_packed_words() {
    use liandan_tensor::ops::{BatchNormBackward, BatchNormTrain, Relu, ReluBackward};
    use liandan_tensor::BatchNormOptions;
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    // L = 6 x 10 (even), five channels.
    let (n, c, l) = (3, 5, 60);
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 7 + seed * 13) % 31) as f32 - 15.0) / 8.0)).collect() };
    let f32s = |len: usize, seed: usize| -> Vec<f32> { values(len, seed).iter().map(|v| v.to_f32() * 0.5 + 1.0).collect() };
    let on = |dev: &Device| -> Vec<Tensor> {
        let act = |seed| Tensor::from_slice(&values(n * c * l, seed), &[n, c, 6, 10], dev).unwrap();
        let param = |seed| Tensor::from_slice(&f32s(c, seed), &[c], dev).unwrap();
        // A count whose low word is about to carry.
        vec![act(1), act(2), param(3), param(4), param(5), Tensor::from_slice(&[u32::MAX as i64 + (7 << 32)], &[], dev).unwrap()]
    };
    let (g, h) = (on(&d), on(&cpu));
    let opts = BatchNormOptions { eps: 1e-5, momentum: 0.1, affine: true, running: false, relu: false, count: false };
    let counted = BatchNormOptions { running: true, count: true, ..opts };
    // (what, op, inputs picked, dispatches); the backward's mean and invstd are two of the
    // parameters (invstd positive).
    let cases: [(&str, &dyn liandan_tensor::CustomOp, &[usize], u64); 5] = [
        ("relu", &Relu, &[0], 1),
        ("relu_backward", &ReluBackward, &[0, 1], 1),
        ("batch_norm", &BatchNormTrain(opts), &[0, 2, 3], 2),
        ("batch_norm, running statistics and a count", &BatchNormTrain(counted), &[0, 2, 3, 4, 3, 5], 2),
        ("batch_norm_backward", &BatchNormBackward(opts), &[0, 1, 4, 3, 2], 2),
    ];
    for (what, op, picks, kernels) in cases {
        let (gi, ci): (Vec<&Tensor>, Vec<&Tensor>) = picks.iter().map(|&k| (&g[k], &h[k])).unzip();
        kernel_like_cpu(&d, what, op, [&gi, &ci], kernels, 1.0 / 32.0);
    }
    // The count exactly (the comparison above is relative), its carry into the high word.
    let outs = liandan_tensor::fused::run(&BatchNormTrain(counted), &[&g[0], &g[2], &g[3], &g[4], &g[3], &g[5]]).expect("a kernel").unwrap();
    assert_eq!(outs[5].to_vec::<i64>().unwrap(), [8i64 << 32], "the batch count");
}

/// A linear layer's product with its bias on packed bf16 is one dispatch, the bias (packed too)
/// added as the tile stores y: the CPU's values within bf16 rounding.
#[test]
fn linear_bias_adds_a_packed_bias_in_its_kernel() {
    use liandan_tensor::ops::MatmulBias;
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 5 + seed * 11) % 23) as f32 - 11.0) / 8.0)).collect() };
    let shapes: [&[usize]; 3] = [&[6, 16], &[8, 16], &[8]];
    let on =
        |dev: &Device| -> Vec<Tensor> { shapes.iter().enumerate().map(|(k, s)| Tensor::from_slice(&values(s.iter().product(), k), s, dev).unwrap()).collect() };
    let (g, c) = (on(&d), on(&cpu));
    kernel_like_cpu(&d, "linear with its bias", &MatmulBias, [&g.iter().collect::<Vec<_>>(), &c.iter().collect::<Vec<_>>()], 1, 1.0 / 32.0);
}

/// Small products whose K the tiled kernel would split run on the one-dispatch kernel, which
/// reads packed operands (and a packed bias) as stored; y is packed after: two dispatches, the
/// CPU's values within bf16 rounding. b is read along K (a classifier head's weight) and along N.
#[test]
fn small_products_read_packed_operands() {
    use liandan_tensor::ops::MatmulBias;
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 5 + seed * 11) % 23) as f32 - 11.0) / 64.0)).collect() };
    let on = |dev: &Device, shapes: &[&[usize]]| -> Vec<Tensor> {
        shapes.iter().enumerate().map(|(k, s)| Tensor::from_slice(&values(s.iter().product(), k), s, dev).unwrap()).collect()
    };
    let shapes: [&[usize]; 3] = [&[128, 1024], &[10, 1024], &[10]];
    let (g, c) = (on(&d, &shapes), on(&cpu, &shapes));
    kernel_like_cpu(&d, "a classifier head with its bias", &MatmulBias, [&g.iter().collect::<Vec<_>>(), &c.iter().collect::<Vec<_>>()], 2, 1.0 / 32.0);
    let shapes: [&[usize]; 2] = [&[64, 1024], &[1024, 12]];
    let (g, c) = (on(&d, &shapes), on(&cpu, &shapes));
    d.synchronize().unwrap();
    let start = dispatches_recorded();
    let got = g[0].matmul(&g[1]).unwrap();
    assert_eq!(dispatches_recorded() - start, 2, "a small product, b along N: dispatches");
    let want = c[0].matmul(&c[1]).unwrap().to_vec_f64().unwrap();
    for (i, (x, y)) in got.to_vec_f64().unwrap().iter().zip(&want).enumerate() {
        assert!((x - y).abs() <= y.abs() / 64.0 + 1.0 / 32.0, "a small product, b along N, element {i}: {x} against the CPU's {y}");
    }
}

/// A convolution off the tensor cores adds its packed bias (and applies ReLU) as its tile
/// stores y: one dispatch, the CPU's values within bf16 rounding (mnist_cnn's first layer).
#[test]
fn convolution_adds_a_packed_bias_in_its_kernel() {
    use liandan_tensor::ops::{Conv2dBias, Conv2dBiasRelu};
    use liandan_tensor::ConvGeometry;
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 5 + seed * 11) % 23) as f32 - 11.0) / 16.0)).collect() };
    let shapes: [&[usize]; 3] = [&[4, 1, 28, 28], &[32, 1, 3, 3], &[32]];
    let on =
        |dev: &Device| -> Vec<Tensor> { shapes.iter().enumerate().map(|(k, s)| Tensor::from_slice(&values(s.iter().product(), k), s, dev).unwrap()).collect() };
    let (g, c) = (on(&d), on(&cpu));
    let geom = ConvGeometry { n: 4, c: 1, h: 28, w: 28, o: 32, kernel: (3, 3), stride: (1, 1), padding: (0, 0), dilation: (1, 1), groups: 1 };
    let (gi, ci): (Vec<&Tensor>, Vec<&Tensor>) = (g.iter().collect(), c.iter().collect());
    kernel_like_cpu(&d, "a convolution with its bias", &Conv2dBias(geom), [&gi, &ci], 1, 1.0 / 32.0);
    kernel_like_cpu(&d, "a convolution with its bias and ReLU", &Conv2dBiasRelu(geom), [&gi, &ci], 1, 1.0 / 32.0);
}

/// Max pooling and its gradient read and write packed words, a dispatch each: windows that
/// tile the input (a pixel in one window at most) and overlapping ones (a pixel's gradient
/// summed over windows in f32 and rounded once), odd counts of outputs and pixels; bit for
/// bit the CPU's f32 of the same values, rounded to bf16.
#[test]
fn max_pooling_reads_and_writes_packed_words() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let shape = [3, 5, 7, 9];
    let numel: usize = shape.iter().product();
    // Few distinct values, so windows hold ties.
    let x: Vec<bf16> = (0..numel).map(|i| bf16::from_f32((((i * 7) % 13) as f32 - 6.0) / 4.0)).collect();
    let dy = |n: usize| -> Vec<bf16> { (0..n).map(|i| bf16::from_f32(((i % 11) as f32 - 5.0) / 8.0 + 1.0 / 256.0)).collect() };
    // (kernel, stride, padding)
    let windows = [((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)), ((3, 2), (1, 1), (0, 1))];
    for (k, s, p) in windows {
        let what = format!("max pooling {k:?} stride {s:?} padding {p:?}");
        let run = |dev: &Device, dtype: DType| {
            let x = Tensor::from_slice(&x, &shape, dev).unwrap().to_dtype(dtype).unwrap().requires_grad_(true).unwrap();
            dev.synchronize().unwrap();
            let start = dispatches_recorded();
            let y = x.max_pool2d(k, s, p, (1, 1)).unwrap();
            let forward = dispatches_recorded() - start;
            let dy = Tensor::from_slice(&dy(y.numel()), y.shape(), dev).unwrap().to_dtype(dtype).unwrap();
            dev.synchronize().unwrap();
            let start = dispatches_recorded();
            y.backward_with(&dy, false).unwrap();
            let backward = dispatches_recorded() - start;
            let as_bf16 = |t: &Tensor| bits(&t.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap());
            (as_bf16(&y), as_bf16(&x.grad().unwrap()), (forward, backward))
        };
        let (got, want) = (run(&d, DType::BF16), run(&cpu, DType::F32));
        assert_eq!(got.2, (1, 1), "{what}: dispatches forward and backward");
        assert_eq!(got.0, want.0, "{what}: values");
        assert_eq!(got.1, want.1, "{what}: gradient");
    }
}

/// bf16 attention runs the fused kernel on widened operands: its gradients, against attention
/// in f32 over the same (bf16) values, are nearer than the composite's, which rounds the scores
/// and the probabilities to bf16 and loses the score gradient's difference `dp - sum(p dp)`.
#[test]
fn attention_gradients_are_nearer_f32_than_the_composites() {
    let Some(d) = gpu() else { return };
    let shape = [2usize, 2, 65, 64];
    let n: usize = shape.iter().product();
    let vals = |seed: u64| -> Vec<f64> { (0..n as u64).map(|i| ((i * 2_654_435_761 + seed * 97) % 1000) as f64 / 250.0 - 2.0).collect() };
    let grads = |dtype: DType| -> Vec<Vec<f64>> {
        let t = |s| Tensor::from_f64s(&vals(s), &shape, DType::BF16, &d).unwrap().to_dtype(dtype).unwrap().requires_grad_(true).unwrap();
        let (q, k, v) = (t(1), t(2), t(3));
        let o = q.scaled_dot_product_attention(&k, &v, None, false, None).unwrap();
        let w = Tensor::from_f64s(&vals(9), &shape, dtype, &d).unwrap();
        o.mul(&w).unwrap().to_dtype(DType::F64).unwrap().sum_all().unwrap().backward().unwrap();
        [q, k, v].iter().map(|x| x.grad().unwrap().to_vec_f64().unwrap()).collect()
    };
    let truth = liandan_tensor::no_fusion(|| grads(DType::F32));
    let fused = grads(DType::BF16);
    let composite = liandan_tensor::no_fusion(|| grads(DType::BF16));
    for (k, name) in ["q", "k", "v"].into_iter().enumerate() {
        let err = |g: &[Vec<f64>]| g[k].iter().zip(&truth[k]).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        let (f, c) = (err(&fused), err(&composite));
        assert!(f < 0.025 && f < c, "d{name}: fused bf16 off f32 by {f}, the composite by {c}");
    }
}

/// Attention on packed heads of even width reads the words as stored and writes its results a
/// word at a time: the forward is its kernel and the packing of its probabilities, the backward
/// its kernel alone (joined too, where q, k and v are of one shape). Each result is the f32
/// kernel's on the same values rounded to bf16, bit for bit (both sum in f32), for dense heads,
/// heads at an odd element offset, and heads of odd lengths.
#[test]
fn attention_reads_and_writes_packed_words() {
    use liandan_tensor::ops::{Attention, AttentionBackward, AttentionBackwardJoined};
    use liandan_tensor::CustomOp;
    let Some(d) = gpu() else { return };
    let values = |len: usize, seed: usize| -> Vec<bf16> { (0..len).map(|i| bf16::from_f32((((i * 7 + seed * 13) % 37) as f32 - 18.0) / 9.0)).collect() };
    let packed = |shape: &[usize], seed| Tensor::from_slice(&values(shape.iter().product(), seed), shape, &d).unwrap();
    // A [.., width + 2] tensor narrowed to `width` from element 1: rows at odd offsets.
    let offset = |shape: [usize; 4], seed| {
        let wide = [shape[0], shape[1], shape[2], shape[3] + 2];
        packed(&wide, seed).narrow(3, 1, shape[3]).unwrap()
    };
    let cases: [(&str, [Tensor; 3]); 3] = [
        ("dense [2, 3, 65, 64] heads", [packed(&[2, 3, 65, 64], 1), packed(&[2, 3, 65, 64], 2), packed(&[2, 3, 65, 64], 3)]),
        ("heads at an odd offset", [offset([1, 2, 9, 16], 4), offset([1, 2, 12, 16], 5), offset([1, 2, 12, 8], 6)]),
        ("odd lengths", [packed(&[2, 1, 7, 4], 7), packed(&[2, 1, 5, 4], 8), packed(&[2, 1, 5, 6], 9)]),
    ];
    let wide = |ts: &[&Tensor]| -> Vec<Tensor> { ts.iter().map(|t| t.to_dtype(DType::F32).unwrap()).collect() };
    // `op` on packed `inputs` in `kernels` dispatches, against the f32 kernel's results rounded.
    let check = |what: &str, op: &dyn CustomOp, inputs: &[&Tensor], kernels: u64| -> Vec<Tensor> {
        d.synchronize().unwrap();
        let start = dispatches_recorded();
        let got = liandan_tensor::fused::run(op, inputs).unwrap_or_else(|| panic!("{what}: no kernel")).unwrap();
        assert_eq!(dispatches_recorded() - start, kernels, "{what}: dispatches");
        let f32s = wide(inputs);
        let want = liandan_tensor::fused::run(op, &f32s.iter().collect::<Vec<_>>()).expect("the f32 kernel").unwrap();
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            let b = b.to_dtype(DType::BF16).unwrap();
            assert_eq!(a.shape(), b.shape(), "{what}: output {k}");
            assert_eq!(bits(&a.to_vec::<bf16>().unwrap()), bits(&b.to_vec::<bf16>().unwrap()), "{what}: output {k}");
        }
        got
    };
    for (what, [q, k, v]) in &cases {
        let out = check(&format!("attention, {what}"), &Attention { scale: 0.3 }, &[q, k, v], 2);
        let (n, h, l, ev) = (q.shape()[0], q.shape()[1], q.shape()[2], v.shape()[3]);
        let g = packed(&[n, l, h, ev], 10);
        check(&format!("attention_backward, {what}"), &AttentionBackward { scale: 0.3 }, &[q, k, v, &g, &out[1]], 1);
        if q.shape() == v.shape() {
            check(&format!("attention_backward_joined, {what}"), &AttentionBackwardJoined { scale: 0.3 }, &[q, k, v, &g, &out[1]], 1);
        }
    }
}

/// Autocast's casts of many f32 parameters into bf16 run in one dispatch whatever their
/// lengths (an odd one's last word half empty), bit for bit the casts one by one.
#[test]
fn many_casts_into_bf16_take_one_dispatch_at_odd_lengths() {
    use liandan_tensor::ops::CastAll;
    let Some(d) = gpu() else { return };
    let lengths = [1usize, 3, 7, 1025, 2049, 4];
    let wide: Vec<f32> = tricky().iter().map(|x| x.to_f32()).collect();
    let inputs: Vec<Tensor> = lengths
        .iter()
        .map(|&n| Tensor::from_slice(&(0..n).map(|i| wide[i % wide.len()] * (1.0 + i as f32 / 4096.0)).collect::<Vec<f32>>(), &[n], &d).unwrap())
        .collect();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    d.synchronize().unwrap();
    let start = dispatches_recorded();
    let got = liandan_tensor::fused::run(&CastAll(DType::BF16), &refs).expect("cast_all: no kernel").unwrap();
    assert_eq!(dispatches_recorded() - start, 1, "cast_all of {} tensors: dispatches", lengths.len());
    for ((t, cast), n) in inputs.iter().zip(&got).zip(lengths) {
        let want = t.to_dtype(DType::BF16).unwrap();
        assert_eq!(bits(&cast.to_vec::<bf16>().unwrap()), bits(&want.to_vec::<bf16>().unwrap()), "length {n}");
    }
}
