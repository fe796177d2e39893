//! The wgpu backend as a device: tensors larger than one binding, errors that name the device and the bytes, the fallback report, and the
//! device-selection policy.

use liandan_backend_wgpu as _;
use liandan_tensor::{DType, Device, DeviceKind, Tensor};

mod common;
use common::gpu;

#[test]
fn tensors_larger_than_one_binding_work() {
    let Some(d) = gpu() else { return };
    // 40M f32 = 160 MiB, over lavapipe's 128 MiB binding limit and over 65,535 x 256 invocations.
    let n = 40_000_000;
    let x = Tensor::full(&[n], 1.5, DType::F32, &d).unwrap();
    let y = Tensor::arange(0.0, n as f64, 1.0, DType::F32, &d).unwrap();
    let z = x.mul_scalar(2.0).unwrap().add(&y).unwrap(); // 3 + i
    let head = z.narrow(0usize, 0, 3).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(head, vec![3.0, 4.0, 5.0]);
    let tail = z.narrow(0usize, n - 2, 2).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(tail, vec![(n - 2) as f32 + 3.0, (n - 1) as f32 + 3.0]);
    let total = x.sum_all().unwrap().item::<f32>().unwrap();
    assert!((total as f64 - 1.5 * n as f64).abs() < 1e-3 * 1.5 * n as f64, "{total}");
    let r = Tensor::rand(&[n], 0.0, 1.0, 7, DType::F32, &d).unwrap();
    let cpu = Tensor::rand(&[n], 0.0, 1.0, 7, DType::F32, &Device::cpu()).unwrap();
    let (a, b) = (r.narrow(0usize, n - 5, 5).unwrap().to_vec::<f32>().unwrap(), cpu.narrow(0usize, n - 5, 5).unwrap().to_vec::<f32>().unwrap());
    assert_eq!(a, b, "random values past the first chunk match the CPU's");
}

/// The elementwise kernels that read handle four elements an invocation (1,024 a workgroup):
/// every element of sizes around those boundaries, dense, broadcast and strided, matches the
/// CPU exactly.
#[test]
fn elementwise_kernels_cover_every_element_around_workgroup_boundaries() {
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    for n in [1usize, 5, 255, 256, 767, 768, 769, 1023, 1024, 1025, 2047, 3000, 4101] {
        let values = |seed: usize| -> Vec<f64> { (0..n).map(|i| ((i * 7919 + seed * 104_729) % 1000) as f64 / 100.0 - 5.0).collect() };
        let on = |dev: &Device| -> Vec<Vec<f64>> {
            let a = Tensor::from_f64s(&values(1), &[n], DType::F32, dev).unwrap();
            let b = Tensor::from_f64s(&values(2), &[n], DType::F32, dev).unwrap();
            let s = Tensor::from_f64s(&[0.25], &[1], DType::F32, dev).unwrap();
            let ints = a.mul_scalar(100.0).unwrap().to_dtype(DType::I64).unwrap();
            let gt = a.gt(&b).unwrap();
            // [n, 2] viewed transposed: a strided read of every element.
            let t = Tensor::stack(&[&a, &b], 1usize).unwrap().transpose(0usize, 1usize).unwrap();
            vec![
                a.add(&b).unwrap().to_vec_f64().unwrap(),
                a.mul(&s).unwrap().to_vec_f64().unwrap(),
                a.neg().unwrap().to_vec_f64().unwrap(),
                a.to_dtype(DType::F16).unwrap().to_vec_f64().unwrap(),
                ints.add(&ints).unwrap().to_vec_f64().unwrap(),
                gt.to_dtype(DType::F32).unwrap().to_vec_f64().unwrap(),
                Tensor::where_cond(&gt, &a, &b).unwrap().to_vec_f64().unwrap(),
                t.contiguous().unwrap().to_vec_f64().unwrap(),
            ]
        };
        let (got, want) = (on(&d), on(&cpu));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "n = {n}, result {k}");
        }
    }
}

#[test]
fn impossible_allocations_are_errors_naming_device_and_bytes() {
    let Some(d) = gpu() else { return };
    let err = Tensor::zeros(&[1 << 40], DType::F32, &d).unwrap_err().to_string();
    assert!(err.contains("bytes") && err.contains(&d.backend().name()), "{err}");
}

#[test]
fn unsupported_ops_fall_back_and_are_reported() {
    let Some(d) = gpu() else { return };
    // Vulkan has no f64 exp: it runs on the CPU, correctly, and is reported.
    let x = Tensor::from_slice(&[0.5f64, 1.0, 2.0], &[3], &d).unwrap();
    let y = x.exp().unwrap().to_vec::<f64>().unwrap();
    for (got, v) in y.iter().zip([0.5f64, 1.0, 2.0]) {
        assert!((got - v.exp()).abs() < 1e-14);
    }
    let report = d.fallback_report();
    assert!(report.iter().any(|(op, n)| op.contains("Exp") && op.contains("f64") && *n >= 1), "{report:?}");
}

#[test]
fn software_adapters_are_used_only_when_asked_for() {
    let Some(d) = gpu() else { return };
    if std::env::var("LIANDAN_DEVICE").is_err() && d.kind() == DeviceKind::SoftwareGpu && Device::gpus().len() == 1 {
        assert!(Device::best().unwrap().is_cpu(), "a software adapter must not be picked automatically");
    }
    assert_eq!(Device::parse("gpu:0").unwrap(), d);
    let facts = d.describe();
    for key in ["name", "api", "type", "features", "cooperative matrices", "f16 matmul", "f32 convolutions", "max storage binding", "memory (this process)"] {
        assert!(facts.iter().any(|(k, v)| k == key && !v.is_empty()), "describe() lacks {key}: {facts:?}");
    }
}

#[test]
fn a_bad_index_is_reported_at_the_next_read_without_stalling_the_op() {
    let Some(d) = gpu() else { return };
    let src = Tensor::arange(0.0, 12.0, 1.0, DType::F32, &d).unwrap().reshape(&[3, 4]).unwrap();
    let bad = Tensor::from_slice(&[0i64, 9, 1], &[3, 1], &d).unwrap();
    // The op itself returns at once (nothing waits on the GPU inside it) ...
    let picked = src.gather(1usize, &bad).unwrap();
    // ... and the first read-back reports the index and the axis size.
    let err = picked.to_vec::<f32>().unwrap_err().to_string();
    assert!(err.contains('9') && err.contains('4'), "{err}");
    // The fault is reported once; the device goes on working.
    let good = Tensor::from_slice(&[3i64, 0, 1], &[3, 1], &d).unwrap();
    assert_eq!(src.gather(1usize, &good).unwrap().to_vec::<f32>().unwrap(), vec![3.0, 4.0, 9.0]);
}

#[test]
fn f64_fills_keep_infinities_and_values_beyond_f32() {
    let Some(d) = gpu() else { return };
    for v in [f64::NEG_INFINITY, f64::INFINITY, 1e300, -3.0e-310, 0.1, 123_456_789.123_456_78] {
        let t = Tensor::full(&[3], v, DType::F64, &d).unwrap().to_vec::<f64>().unwrap();
        let tol = if v.is_finite() { v.abs() * 1e-14 } else { 0.0 };
        assert!(t.iter().all(|&x| x == v || (x - v).abs() <= tol), "fill {v}: {t:?}");
    }
    let nan = Tensor::full(&[2], f64::NAN, DType::F64, &d).unwrap().to_vec::<f64>().unwrap();
    assert!(nan.iter().all(|x| x.is_nan()));
}

/// The device's storage binding limit in bytes, as `describe()` reports it (whole MiB).
fn binding_limit(d: &Device) -> u64 {
    let facts = d.describe();
    let mib = facts.iter().find(|(k, _)| k == "max storage binding").and_then(|(_, v)| v.trim_end_matches(" MiB").parse::<u64>().ok());
    mib.expect("describe() reports the storage binding limit in MiB") << 20
}

#[test]
fn non_contiguous_views_of_a_buffer_past_the_binding_limit_work() {
    // A device of its own that binds at most 128 MiB (lavapipe's limit), on any GPU.
    let Some(d) = common::gpu_with(|o| o.testing.max_binding = Some(128 << 20)) else { return };
    let cpu = Device::cpu();
    // 128 MiB + 256 bytes of f32: just past lavapipe's limit.
    let (rows, cols) = (524_289, 64);
    let x = Tensor::rand(&[rows, cols], -1.0, 1.0, 11, DType::F32, &d).unwrap();
    let limit = binding_limit(&d);
    assert!((rows * cols * 4) as u64 > limit, "the device binds {limit} bytes at once");
    let xc = Tensor::rand(&[rows, cols], -1.0, 1.0, 11, DType::F32, &cpu).unwrap();
    let same = |what: &str, g: &Tensor, c: &Tensor| {
        assert_eq!(g.shape(), c.shape(), "{what}");
        assert!(g.to_vec::<f32>().unwrap() == c.to_vec::<f32>().unwrap(), "{what}: values differ from the CPU's");
    };
    // Transposed: read back, and made contiguous (a copy no kernel can bind).
    same("transpose", &x.t().unwrap(), &xc.t().unwrap());
    let tc = x.t().unwrap().contiguous().unwrap();
    same("transpose, contiguous", &tc, &xc.t().unwrap().contiguous().unwrap());
    drop(tc);
    // Narrowed along the inner axis, and small views far into the buffer.
    same("narrow", &x.narrow(1usize, 5, 50).unwrap(), &xc.narrow(1usize, 5, 50).unwrap());
    let tail = |t: &Tensor| t.narrow(0usize, rows - 3, 3).unwrap().t().unwrap();
    same("narrow, transpose", &tail(&x).contiguous().unwrap(), &tail(&xc));
    // Expanded (stride 0) from the last rows.
    let expand = |t: &Tensor| t.narrow(0usize, rows - 2, 2).unwrap().unsqueeze(0usize).unwrap().expand(&[3, 2, cols]).unwrap();
    same("expand", &expand(&x), &expand(&xc));
    same("expand, contiguous", &expand(&x).contiguous().unwrap(), &expand(&xc));
    // Fed to matmul and conv2d.
    let close = |what: &str, g: Tensor, c: Tensor| {
        let (g, c) = (g.to_vec::<f32>().unwrap(), c.to_vec::<f32>().unwrap());
        assert_eq!(g.len(), c.len(), "{what}");
        for (i, (a, b)) in g.iter().zip(&c).enumerate() {
            assert!((a - b).abs() <= 1e-4 + 1e-4 * b.abs(), "{what}: element {i}: {a} vs {b}");
        }
    };
    let lhs = |t: &Tensor| t.narrow(0usize, 1000, 96).unwrap().t().unwrap();
    let rhs = |t: &Tensor| t.narrow(0usize, rows - 96, 96).unwrap();
    close("matmul", lhs(&x).matmul(&rhs(&x)).unwrap(), lhs(&xc).matmul(&rhs(&xc)).unwrap());
    let image = |t: &Tensor| t.narrow(0usize, rows - 64, 64).unwrap().t().unwrap().unsqueeze(0usize).unwrap().unsqueeze(0usize).unwrap();
    let wc = Tensor::rand(&[4, 1, 3, 3], -1.0, 1.0, 12, DType::F32, &cpu).unwrap();
    let w = wc.to_device(&d).unwrap();
    let conv = |t: &Tensor, w: &Tensor| t.conv2d(w, None, (1, 1), (1, 1), (1, 1), 1).unwrap();
    close("conv2d", conv(&image(&x), &w), conv(&image(&xc), &wc));
    // The fallback says why it ran on the CPU.
    let report = d.fallback_report();
    assert!(report.iter().any(|(op, _)| op.starts_with("copy (f32)") && op.contains("too large to bind")), "{report:?}");
}

#[test]
fn allocations_past_the_largest_buffer_are_errors_naming_the_bytes() {
    use liandan_tensor::Distribution;
    let Some(d) = gpu() else { return };
    let b = d.backend();
    // Past max_buffer_size, and past 2^64 bytes: nothing is allocated, nothing panics.
    for (numel, dtype) in [(1usize << 40, DType::F32), (usize::MAX / 2, DType::F32), (usize::MAX, DType::F64), (usize::MAX, DType::U8)] {
        let err = b.full(numel, 1.0, dtype).unwrap_err().to_string();
        // Either the byte count, or (past 2^64 bytes) the element count, is named.
        let named = err.contains(&numel.to_string()) || numel.checked_mul(4).is_some_and(|n| err.contains(&n.to_string()));
        assert!(err.contains("bytes") && named && err.contains(&b.name()), "full({numel}, {dtype}): {err}");
        let err = b.random(Distribution::Uniform { low: 0.0, high: 1.0 }, numel, 0, dtype).unwrap_err().to_string();
        assert!(err.contains("bytes"), "random({numel}, {dtype}): {err}");
    }
    // An f64 fill the kernel cannot carry is uploaded: the size is checked before any host buffer.
    let err = b.full(1 << 40, 1e300, DType::F64).unwrap_err().to_string();
    assert!(err.contains(&(8u64 << 40).to_string()), "{err}");
    // The device goes on working.
    assert_eq!(Tensor::ones(&[2], DType::F32, &d).unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
}
