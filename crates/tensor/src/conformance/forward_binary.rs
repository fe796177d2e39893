//! Forward conformance of the broadcasting binary ops, their scalar forms, integer and bool
//! arithmetic, and the errors for mismatched dtypes and shapes.

use super::forward::{check, expect_err, ref_zip};
use super::{from_values, positive_values, strided_input, values};
use crate::{Bool8, DType, Device, Result, Tensor};

/// One binary op: its name, the tensor method, the f64 reference and whether the lhs must be
/// positive (pow bases).
type Case = (&'static str, fn(&Tensor, &Tensor) -> Result<Tensor>, fn(f64, f64) -> f64, bool);

fn cases() -> [Case; 7] {
    [
        ("add", |a, b| a.add(b), |x, y| x + y, false),
        ("sub", |a, b| a.sub(b), |x, y| x - y, false),
        ("mul", |a, b| a.mul(b), |x, y| x * y, false),
        ("div", |a, b| a.div(b), |x, y| x / y, false),
        ("pow", |a, b| a.pow(b), f64::powf, true),
        ("maximum", |a, b| a.maximum(b), f64::max, false),
        ("minimum", |a, b| a.minimum(b), f64::min, false),
    ]
}

/// Shape pairs: equal, both-sided broadcast, rank-extending, a 0-d scalar, a 1000+ row.
const SHAPES: [(&[usize], &[usize]); 7] =
    [(&[7, 33], &[7, 33]), (&[7, 1], &[1, 33]), (&[33], &[7, 33]), (&[2, 3, 1, 5], &[3, 4, 1]), (&[1], &[1]), (&[7, 33], &[]), (&[3, 1001], &[1001])];

/// Every case on every shape pair in `dtype`: contiguous, strided and transposed operands.
fn run_cases(d: &Device, dtype: DType, atol: f64, rtol: f64) {
    for (name, op, reference, positive) in cases() {
        for (k, &(ash, bsh)) in SHAPES.iter().enumerate() {
            let (na, nb) = (ash.iter().product(), bsh.iter().product::<usize>());
            let av = if positive { positive_values(na, 40 + k as u64, 0.05, 4.0) } else { values(na, 40 + k as u64) };
            let (a, av) = from_values(d, ash, &av, dtype);
            let (b, bv) = from_values(d, bsh, &values(nb, 50 + k as u64), dtype);
            let (want, shape) = ref_zip(&av, ash, &bv, bsh, reference);
            let what = format!("{name} {dtype} {ash:?} {bsh:?}");
            check(&what, &op(&a, &b), &shape, &want, atol, rtol);
            if !bsh.is_empty() {
                let (sa, sb) = (strided_input(d, ash, &av, dtype), strided_input(d, bsh, &bv, dtype));
                check(&format!("{what} strided lhs"), &op(&sa, &b), &shape, &want, atol, rtol);
                check(&format!("{what} both strided"), &op(&sa, &sb), &shape, &want, atol, rtol);
            }
            // The same rhs held transposed in memory.
            if bsh.len() == 2 {
                let bt: Vec<f64> = (0..nb).map(|f| bv[(f % bsh[0]) * bsh[1] + f / bsh[0]]).collect();
                let (bt, _) = from_values(d, &[bsh[1], bsh[0]], &bt, dtype);
                check(&format!("{what} transposed rhs"), &op(&a, &bt.t().unwrap()), &shape, &want, atol, rtol);
            }
        }
    }
}

pub fn binary(d: &Device) {
    run_cases(d, DType::F32, 1e-6, 1e-5);
}

pub fn binary_dtypes(d: &Device) {
    run_cases(d, DType::F64, 1e-12, 1e-10);
    run_cases(d, DType::F16, 1e-3, 1e-2);
    run_cases(d, DType::BF16, 1e-2, 3e-2);
}

/// A scalar operand as an f32 tensor holds it.
fn f32c(x: f64) -> f64 {
    x as f32 as f64
}

pub fn binary_scalar(d: &Device) {
    for shape in [&[1usize][..], &[7, 33], &[1001]] {
        let n: usize = shape.iter().product();
        let (t, v) = from_values(d, shape, &values(n, 60), DType::F32);
        let s = if shape.len() > 1 { strided_input(d, shape, &v, DType::F32) } else { t.clone() };
        let map = |f: &dyn Fn(f64) -> f64| v.iter().map(|&x| f(x)).collect::<Vec<f64>>();
        let what = |op: &str| format!("{op} {shape:?}");
        for x in [&t, &s] {
            check(&what("add_scalar"), &x.add_scalar(1.5), shape, &map(&|x| x + 1.5), 1e-6, 1e-6);
            check(&what("sub_scalar"), &x.sub_scalar(-0.25), shape, &map(&|x| x + 0.25), 1e-6, 1e-6);
            check(&what("mul_scalar"), &x.mul_scalar(-2.25), shape, &map(&|x| x * -2.25), 1e-6, 1e-6);
            check(&what("div_scalar"), &x.div_scalar(0.75), shape, &map(&|x| x / 0.75), 1e-6, 1e-6);
            check(&what("pow_scalar 2"), &x.pow_scalar(2.0), shape, &map(&|x| x * x), 1e-6, 1e-5);
            check(&what("maximum_scalar"), &x.maximum_scalar(0.3), shape, &map(&|x| x.max(f32c(0.3))), 0.0, 0.0);
            check(&what("minimum_scalar"), &x.minimum_scalar(-0.2), shape, &map(&|x| x.min(f32c(-0.2))), 0.0, 0.0);
            check(&what("clamp"), &x.clamp(-0.5, 0.7), shape, &map(&|x| x.clamp(-0.5, f32c(0.7))), 0.0, 0.0);
            check(&what("abs then pow_scalar 0.5"), &x.abs().and_then(|a| a.pow_scalar(0.5)), shape, &map(&|x| x.abs().sqrt()), 1e-6, 1e-5);
        }
    }
}

pub fn binary_int_bool(d: &Device) {
    let a = [-7i64, 7, -7, 7, -8, 0, 9, -1, 5];
    let b = [2i64, -2, -2, 2, 2, 3, 4, 5, -1];
    let (ta, tb) = (Tensor::from_slice(&a, &[9], d).unwrap(), Tensor::from_slice(&b, &[9], d).unwrap());
    let int = |f: fn(i64, i64) -> i64| a.iter().zip(&b).map(|(&x, &y)| f(x, y) as f64).collect::<Vec<_>>();
    // Division rounds toward negative infinity, as torch.div(rounding_mode="floor").
    check("div i64 floors", &ta.div(&tb), &[9], &[-4.0, -4.0, 3.0, 3.0, -4.0, 0.0, 2.0, -1.0, -5.0], 0.0, 0.0);
    check("add i64", &ta.add(&tb), &[9], &int(|x, y| x + y), 0.0, 0.0);
    check("sub i64", &ta.sub(&tb), &[9], &int(|x, y| x - y), 0.0, 0.0);
    check("mul i64", &ta.mul(&tb), &[9], &int(|x, y| x * y), 0.0, 0.0);
    check("maximum i64", &ta.maximum(&tb), &[9], &int(i64::max), 0.0, 0.0);
    check("minimum i64", &ta.minimum(&tb), &[9], &int(i64::min), 0.0, 0.0);
    assert_eq!(ta.add(&tb).unwrap().dtype(), DType::I64);
    // Exact beyond 2^53 (no detour through f64).
    let big = Tensor::from_slice(&[(1i64 << 60) + 1], &[1], d).unwrap();
    let sum = big.add(&Tensor::from_slice(&[2i64], &[1], d).unwrap()).unwrap();
    assert_eq!(sum.to_vec::<i64>().unwrap(), [(1i64 << 60) + 3], "add i64 beyond 2^53");
    // Carries and borrows across 32 bits (a GPU may hold i64 as two 32-bit words).
    let words = Tensor::from_slice(&[(1i64 << 32) - 1, 1i64 << 32, -(1i64 << 32)], &[3], d).unwrap();
    let one = Tensor::from_slice(&[1i64], &[1], d).unwrap();
    assert_eq!(words.add(&one).unwrap().to_vec::<i64>().unwrap(), [1i64 << 32, (1i64 << 32) + 1, -(1i64 << 32) + 1], "add i64 carries");
    assert_eq!(words.sub(&one).unwrap().to_vec::<i64>().unwrap(), [(1i64 << 32) - 2, (1i64 << 32) - 1, -(1i64 << 32) - 1], "sub i64 borrows");
    // Broadcast [3, 1] against [4], with a strided lhs.
    let (lv, rv) = ([-9.0, 4.0, 13.0], [3.0, -3.0, 5.0, 1.0]);
    let l = strided_input(d, &[3, 1], &lv, DType::I64);
    let r = Tensor::from_slice(&[3i64, -3, 5, 1], &[4], d).unwrap();
    let (want, shape) = ref_zip(&lv, &[3, 1], &rv, &[4], |x, y| (x / y).floor());
    check("div i64 broadcast", &l.div(&r), &shape, &want, 0.0, 0.0);
    let (want, shape) = ref_zip(&lv, &[3, 1], &rv, &[4], |x, y| x * y);
    check("mul i64 broadcast", &l.mul(&r), &shape, &want, 0.0, 0.0);
    let (want, shape) = ref_zip(&lv, &[3, 1], &rv, &[4], |x, y| x + y);
    check("add i64 broadcast", &l.add(&r), &shape, &want, 0.0, 0.0);
    let (want, shape) = ref_zip(&lv, &[3, 1], &rv, &[4], |x, y| x - y);
    check("sub i64 broadcast", &l.sub(&r), &shape, &want, 0.0, 0.0);
    expect_err("div i64 by zero", ta.div(&Tensor::zeros(&[9], DType::I64, d).unwrap()));
    expect_err("pow of i64", ta.pow(&tb));
    // Bool: maximum is or, minimum is and (broadcast [4, 1] against [3]).
    let bl: Vec<Bool8> = [1, 0, 1, 0].iter().map(|&x| Bool8(x)).collect();
    let br: Vec<Bool8> = [1, 1, 0].iter().map(|&x| Bool8(x)).collect();
    let (tl, tr) = (Tensor::from_slice(&bl, &[4, 1], d).unwrap(), Tensor::from_slice(&br, &[3], d).unwrap());
    let (lf, rf) = ([1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0]);
    let or = tl.maximum(&tr);
    assert_eq!(or.as_ref().unwrap().dtype(), DType::Bool);
    check("maximum bool = or", &or, &[4, 3], &ref_zip(&lf, &[4, 1], &rf, &[3], f64::max).0, 0.0, 0.0);
    check("minimum bool = and", &tl.minimum(&tr), &[4, 3], &ref_zip(&lf, &[4, 1], &rf, &[3], f64::min).0, 0.0, 0.0);
    expect_err("add of bools", tl.add(&tr));
}

pub fn shape_errors(d: &Device) {
    let t = |shape: &[usize], dtype: DType| Tensor::ones(shape, dtype, d).unwrap();
    // The message names the op's operands' shapes, both of them.
    let names_both = |what: &str, msg: String, a: &str, b: &str| {
        assert!(msg.contains(a) && msg.contains(b), "{what}: the message should name {a} and {b}: {msg}");
    };
    let (a32, b4) = (t(&[3, 2], DType::F32), t(&[4], DType::F32));
    names_both("add [3, 2] + [4]", expect_err("add", a32.add(&b4)), "[3, 2]", "[4]");
    names_both("mul [3, 2] * [4]", expect_err("mul", a32.mul(&b4)), "[3, 2]", "[4]");
    names_both("maximum [4] [3, 2]", expect_err("maximum", b4.maximum(&a32)), "[3, 2]", "[4]");
    names_both("lt [3, 2] < [4]", expect_err("lt", a32.lt(&b4)), "[3, 2]", "[4]");
    let m = expect_err("matmul", a32.matmul(&t(&[4, 5], DType::F32)));
    names_both("matmul [3, 2] x [4, 5]", m, "[3, 2]", "[4, 5]");
    let m = expect_err("batched matmul", t(&[2, 3, 4], DType::F32).matmul(&t(&[5, 4, 2], DType::F32)));
    names_both("matmul [2, 3, 4] x [5, 4, 2]", m, "[2, 3, 4]", "[5, 4, 2]");
    let m = expect_err("matmul vectors", t(&[3], DType::F32).matmul(&t(&[4], DType::F32)));
    names_both("matmul [3] x [4]", m, "3", "4");
    let c = expect_err("conv2d", t(&[1, 3, 5, 5], DType::F32).conv2d(&t(&[2, 4, 3, 3], DType::F32), None, (1, 1), (0, 0), (1, 1), 1));
    names_both("conv2d [1, 3, 5, 5] with [2, 4, 3, 3]", c, "[1, 3, 5, 5]", "[2, 4, 3, 3]");
    let c = expect_err("conv2d groups", t(&[1, 4, 5, 5], DType::F32).conv2d(&t(&[3, 2, 3, 3], DType::F32), None, (1, 1), (0, 0), (1, 1), 2));
    names_both("conv2d groups 2, O = 3", c, "[1, 4, 5, 5]", "[3, 2, 3, 3]");
    // Dtype mismatches are errors, never silent casts.
    let a64 = t(&[3, 2], DType::F64);
    for (what, r) in [
        ("add f32 + f64", a32.add(&a64)),
        ("sub f64 - f32", a64.sub(&a32)),
        ("div f32 / i64", a32.div(&t(&[3, 2], DType::I64))),
        ("matmul f32 x f64", a32.matmul(&t(&[2, 3], DType::F64))),
        ("eq f32 == f64", a32.eq(&a64)),
        ("conv2d f32 with f64", t(&[1, 1, 3, 3], DType::F32).conv2d(&t(&[1, 1, 2, 2], DType::F64), None, (1, 1), (0, 0), (1, 1), 1)),
        ("matmul of i64", t(&[2, 2], DType::I64).matmul(&t(&[2, 2], DType::I64))),
    ] {
        let msg = expect_err(what, r);
        assert!(!msg.is_empty(), "{what}");
    }
}
