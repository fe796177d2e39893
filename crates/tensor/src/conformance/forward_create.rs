//! Forward conformance of creation ops: constants, `arange`, host round trips and seeded random.

use half::{bf16, f16};

use super::assert_close;
use super::forward::{check, expect_err};
use crate::rng::sample;
use crate::{Bool8, DType, Device, Distribution, Element, Tensor};

/// What `value` becomes in `dtype` (floats keep it: the values used are exact in every float).
fn stored(value: f64, dtype: DType) -> f64 {
    match dtype {
        DType::I64 => value.trunc(),
        DType::U8 => value.trunc().clamp(0.0, 255.0),
        DType::Bool => (value != 0.0) as u8 as f64,
        _ => value,
    }
}

pub fn creation(d: &Device) {
    for dtype in DType::ALL {
        for shape in [&[1usize][..], &[7], &[3, 1, 11], &[33, 33]] {
            let n: usize = shape.iter().product();
            let what = |op: &str| format!("{op} {dtype} {shape:?}");
            let z = Tensor::zeros(shape, dtype, d);
            assert_eq!(z.as_ref().map(|t| t.dtype()).ok(), Some(dtype), "{}", what("zeros dtype"));
            check(&what("zeros"), &z, shape, &vec![0.0; n], 0.0, 0.0);
            check(&what("ones"), &Tensor::ones(shape, dtype, d), shape, &vec![1.0; n], 0.0, 0.0);
            check(&what("full 2.5"), &Tensor::full(shape, 2.5, dtype, d), shape, &vec![stored(2.5, dtype); n], 0.0, 0.0);
            if dtype != DType::U8 {
                check(&what("full -3.25"), &Tensor::full(shape, -3.25, dtype, d), shape, &vec![stored(-3.25, dtype); n], 0.0, 0.0);
            }
        }
        let s = Tensor::scalar(6.5, dtype, d);
        check(&format!("scalar {dtype}"), &s, &[], &[stored(6.5, dtype)], 0.0, 0.0);
        assert_eq!(s.unwrap().numel(), 1);
        let t = Tensor::full(&[2, 3], 1.0, dtype, d).unwrap();
        check(&format!("zeros_like {dtype}"), &t.zeros_like(), &[2, 3], &[0.0; 6], 0.0, 0.0);
        check(&format!("ones_like {dtype}"), &t.ones_like(), &[2, 3], &[1.0; 6], 0.0, 0.0);
    }
    // A large constant, past any single-workgroup size.
    let big = Tensor::full(&[1031, 3], -0.75, DType::F32, d);
    check("full 3093", &big, &[1031, 3], &vec![-0.75; 3093], 0.0, 0.0);
}

pub fn arange(d: &Device) {
    let cases: [(f64, f64, f64, &[f64]); 6] = [
        (0.0, 5.0, 1.0, &[0.0, 1.0, 2.0, 3.0, 4.0]),
        (5.0, -2.0, -1.5, &[5.0, 3.5, 2.0, 0.5, -1.0]),
        (-1.0, 2.0, 0.75, &[-1.0, -0.25, 0.5, 1.25]),
        (0.5, 3.4, 0.7, &[0.5, 1.2, 1.9, 2.6, 3.3]),
        (3.0, 3.5, 2.0, &[3.0]),
        (2.0, 1.0, 1.0, &[]),
    ];
    for (start, end, step, want) in cases {
        for (dtype, atol) in [(DType::F64, 1e-12), (DType::F32, 1e-6)] {
            let got = Tensor::arange(start, end, step, dtype, d);
            check(&format!("arange({start}, {end}, {step}) {dtype}"), &got, &[want.len()], want, atol, 0.0);
        }
    }
    check("arange i64 step 2", &Tensor::arange(0.0, 7.0, 2.0, DType::I64, d), &[4], &[0.0, 2.0, 4.0, 6.0], 0.0, 0.0);
    check("arange i64 negative", &Tensor::arange(3.0, -3.0, -2.0, DType::I64, d), &[3], &[3.0, 1.0, -1.0], 0.0, 0.0);
    let long = Tensor::arange(-500.0, 700.0, 1.0, DType::F32, d);
    check("arange 1200", &long, &[1200], &(0..1200).map(|i| i as f64 - 500.0).collect::<Vec<_>>(), 0.0, 0.0);
    expect_err("arange step 0", Tensor::arange(0.0, 1.0, 0.0, DType::F32, d));
    expect_err("arange infinite end", Tensor::arange(0.0, f64::INFINITY, 1.0, DType::F32, d));
}

/// Round trip of `data` through a `T` tensor, and `to_vec` of a mismatched type failing.
fn round_trip<T: Element + PartialEq, U: Element>(d: &Device, data: &[T]) {
    let dtype = T::DTYPE;
    let t = Tensor::from_slice(data, &[data.len()], d).unwrap_or_else(|e| panic!("from_slice {dtype}: {e}"));
    assert_eq!(t.dtype(), dtype);
    assert_eq!(t.to_vec::<T>().unwrap(), data, "from_slice/to_vec {dtype}");
    let want: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    assert_close(&format!("from_slice/to_vec_f64 {dtype}"), &t.to_vec_f64().unwrap(), &want, 0.0, 0.0);
    expect_err(&format!("to_vec::<{}> of {dtype}", U::DTYPE), t.to_vec::<U>());
    // Reshaped (same storage) and 2-D.
    let n = data.len();
    let m = Tensor::from_vec(data.to_vec(), &[1, n], d).unwrap();
    assert_eq!(m.shape(), &[1, n]);
    assert_eq!(m.reshape(&[n]).unwrap().to_vec::<T>().unwrap(), data);
    if n > 1 {
        expect_err(&format!("from_slice {dtype} wrong length"), Tensor::from_slice(data, &[n + 1], d));
    }
}

pub fn from_slice(d: &Device) {
    let f: Vec<f64> = super::values(33, 5);
    round_trip::<f32, f64>(d, &f.iter().map(|&x| x as f32).collect::<Vec<_>>());
    round_trip::<f64, f32>(d, &f);
    round_trip::<f16, bf16>(d, &f.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>());
    round_trip::<bf16, f16>(d, &f.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>());
    round_trip::<i64, f64>(d, &[-7, 0, 3, i64::MAX, i64::MIN + 1, 42, -1]);
    round_trip::<u8, Bool8>(d, &[0, 1, 7, 128, 255]);
    round_trip::<Bool8, u8>(d, &[Bool8(1), Bool8(0), Bool8(1), Bool8(1), Bool8(0), Bool8(0), Bool8(1)]);
    round_trip::<f32, f64>(d, &[3.5]);
    let s = Tensor::from_slice(&[2.5f32], &[], d).unwrap();
    assert_eq!((s.rank(), s.item::<f32>().unwrap()), (0, 2.5));
    expect_err("item::<f64> of f32", s.item::<f64>());
}

/// The distributions the random ops draw from. The second uniform range is not a power of two
/// wide, so `low + span * u` rounds twice, and a GPU that fused it into an fma would differ.
fn dists() -> [(&'static str, Distribution); 4] {
    [
        ("rand", Distribution::Uniform { low: -1.5, high: 2.5 }),
        ("rand odd", Distribution::Uniform { low: -0.1234, high: 0.5678 }),
        ("randn", Distribution::Normal { mean: 0.0, std: 1.0 }),
        ("bernoulli", Distribution::Bernoulli { p: 0.3 }),
    ]
}

fn draw(d: &Device, name: &str, shape: &[usize], seed: u64, dtype: DType) -> Tensor {
    let t = match name {
        "rand" => Tensor::rand(shape, -1.5, 2.5, seed, dtype, d),
        "rand odd" => Tensor::rand(shape, -0.1234, 0.5678, seed, dtype, d),
        "randn" => Tensor::randn(shape, seed, dtype, d),
        _ => Tensor::bernoulli(shape, 0.3, seed, dtype, d),
    };
    t.unwrap_or_else(|e| panic!("{name} {shape:?}: {e}"))
}

pub fn random(d: &Device) {
    for (name, dist) in dists() {
        for (shape, seed) in [(&[1usize][..], 0u64), (&[7], 1), (&[7, 33], 2), (&[3, 1001], 0xdead_beef_0000_0001)] {
            let n: usize = shape.iter().product();
            let want: Vec<f64> = (0..n as u32).map(|i| sample(dist, seed, i) as f64).collect();
            let t = draw(d, name, shape, seed, DType::F32);
            assert_eq!(t.shape(), shape);
            // Uniform and bernoulli draws are integer arithmetic: bit-exact on every backend.
            // Normal draws go through ln and cos, which Vulkan only promises to 2^-21 absolute
            // error near 1 (amplified by the sqrt in Box-Muller for small samples).
            let (atol, rtol) = if name == "randn" { (1e-5, 1e-5) } else { (0.0, 0.0) };
            let got = t.to_vec_f64().unwrap();
            assert_close(&format!("{name} {shape:?} seed {seed} f32"), &got, &want, atol, rtol);
            let t64 = draw(d, name, shape, seed, DType::F64);
            assert_close(&format!("{name} {shape:?} seed {seed} f64"), &t64.to_vec_f64().unwrap(), &want, atol.max(1e-6), rtol.max(1e-6));
            let again = draw(d, name, shape, seed, DType::F32).to_vec_f64().unwrap();
            assert_eq!(again, got, "{name}: same seed, same tensor");
        }
        let a = draw(d, name, &[1000], 11, DType::F32).to_vec_f64().unwrap();
        let b = draw(d, name, &[1000], 12, DType::F32).to_vec_f64().unwrap();
        let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(differ > 300, "{name}: seeds 11 and 12 agree on {} of 1000 elements", 1000 - differ);
    }
    // Half-precision draws are the f32 sample rounded: exactly so for uniform draws; a normal
    // draw, whose f32 value may differ in the last bits on a GPU (see above), may round to the
    // neighbouring half-precision value, so it is allowed one ulp of the dtype.
    let halves = [
        ("rand", Distribution::Uniform { low: -1.5, high: 2.5 }),
        ("randn", Distribution::Normal { mean: 0.0, std: 1.0 }),
        ("bernoulli", Distribution::Bernoulli { p: 0.3 }),
    ];
    for (name, dist) in halves {
        let want: Vec<f64> = (0..231u32).map(|i| sample(dist, 9, i) as f64).collect();
        for (dtype, ulp) in [(DType::F16, 1.0 / 1024.0), (DType::BF16, 1.0 / 128.0)] {
            let t = Tensor::random(&[231], dist, 9, dtype, d).unwrap();
            let rtol = if name == "randn" { ulp } else { 0.0 };
            let atol = if name == "randn" { 1e-5 } else { 0.0 };
            assert_close(&format!("{name} {dtype}"), &t.to_vec_f64().unwrap(), &super::forward::rounded(&want, dtype), atol, rtol);
        }
    }
}

pub fn random_moments(d: &Device) {
    let n = 10_000;
    let moments = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64)
    };
    let (m, v) = moments(&draw(d, "rand", &[100, 100], 3, DType::F32).to_vec_f64().unwrap());
    assert!((m - 0.5).abs() < 0.05 && (v - 16.0 / 12.0).abs() < 0.06, "rand(-1.5, 2.5): mean {m}, var {v}");
    let u = draw(d, "rand", &[n], 3, DType::F32).to_vec_f64().unwrap();
    assert!(u.iter().all(|&x| (-1.5..2.5).contains(&x)), "rand outside [-1.5, 2.5)");
    let (m, v) = moments(&draw(d, "randn", &[n], 4, DType::F32).to_vec_f64().unwrap());
    assert!(m.abs() < 0.05 && (v - 1.0).abs() < 0.06, "randn: mean {m}, var {v}");
    let b = draw(d, "bernoulli", &[n], 5, DType::F32).to_vec_f64().unwrap();
    assert!(b.iter().all(|&x| x == 0.0 || x == 1.0), "bernoulli gives only 0 and 1");
    let (m, _) = moments(&b);
    assert!((m - 0.3).abs() < 0.02, "bernoulli(0.3): mean {m}");
}
