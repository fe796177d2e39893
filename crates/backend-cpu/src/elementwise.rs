//! Elementwise kernels: unary and binary math, comparisons, select and dtype casts.

use std::sync::atomic::{AtomicBool, Ordering};

use liandan_tensor::backend::{BinaryOp, CmpOp, UnaryOp};
use liandan_tensor::{DType, Layout, Result};
use num_traits::Float;

use crate::fused::{wide_blocks, Elem};
use crate::storage::{alloc, backend_error, bad_dtype, dtype_mismatch, slice, CpuStorage, Real, Scalar};
use crate::strided::{contiguous, map1, map2, map3};

pub(crate) fn unary(op: UnaryOp, x: &CpuStorage, l: &Layout) -> Result<CpuStorage> {
    use CpuStorage as S;
    Ok(match x {
        S::F32(v) => S::F32(unary_real(op, slice(v), l)?.into()),
        S::F16(v) => S::F16(unary_real(op, slice(v), l)?.into()),
        S::BF16(v) => S::BF16(unary_real(op, slice(v), l)?.into()),
        S::F64(v) => S::F64(unary_real(op, slice(v), l)?.into()),
        S::I64(v) => {
            let v = slice(v);
            S::I64(
                match op {
                    UnaryOp::Neg => map1(v, l, i64::wrapping_neg),
                    UnaryOp::Abs => map1(v, l, i64::wrapping_abs),
                    UnaryOp::Sign => map1(v, l, i64::signum),
                    _ => return Err(bad_dtype(name_of(op), DType::I64, "integers accept only neg, abs and sign")),
                }?
                .into(),
            )
        }
        // Unsigned, as PyTorch's uint8: negation wraps, abs is the identity.
        S::U8(v) => {
            let v = slice(v);
            S::U8(
                match op {
                    UnaryOp::Neg => map1(v, l, u8::wrapping_neg),
                    UnaryOp::Abs => map1(v, l, |x| x),
                    UnaryOp::Sign => map1(v, l, |x| x.min(1)),
                    _ => return Err(bad_dtype(name_of(op), DType::U8, "integers accept only neg, abs and sign")),
                }?
                .into(),
            )
        }
        S::Bool(_) => return Err(bad_dtype(name_of(op), DType::Bool, "bool tensors take no arithmetic; cast first")),
    })
}

fn name_of(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "neg",
        UnaryOp::Abs => "abs",
        UnaryOp::Sign => "sign",
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Sqrt => "sqrt",
        UnaryOp::Recip => "recip",
        UnaryOp::Sin => "sin",
        UnaryOp::Cos => "cos",
        UnaryOp::Erf => "erf",
        UnaryOp::Floor => "floor",
        UnaryOp::Ceil => "ceil",
        UnaryOp::Round => "round",
    }
}

/// One closure per op, chosen outside the loop so the loop body inlines.
fn unary_real<T: Elem>(op: UnaryOp, v: &[T], l: &Layout) -> Result<Vec<T>> {
    match op {
        UnaryOp::Neg => map1(v, l, |x: T| -x),
        UnaryOp::Abs => map1(v, l, T::abs),
        // Not `signum`, which gives 1 for +0: sign(0) is 0, and NaN stays NaN.
        UnaryOp::Sign => map1(v, l, |x: T| {
            if x > T::zero() {
                T::one()
            } else if x < T::zero() {
                -T::one()
            } else {
                x
            }
        }),
        UnaryOp::Exp => map1(v, l, T::exp),
        // Dense data through the slice kernel: libm's `logf` per element cost a call each
        // (3 ns), the f32 one vectorizes.
        UnaryOp::Log => match contiguous(v, l) {
            Some(xs) => {
                let mut out = alloc("log", xs.len(), T::zero())?;
                wide_blocks([xs], &mut out, |[x], y| T::Acc::ln_slice(x, y));
                Ok(out)
            }
            None => map1(v, l, T::ln),
        },
        UnaryOp::Sqrt => map1(v, l, T::sqrt),
        UnaryOp::Recip => map1(v, l, T::recip),
        UnaryOp::Sin => map1(v, l, T::sin),
        UnaryOp::Cos => map1(v, l, T::cos),
        UnaryOp::Erf => map1(v, l, Real::erf),
        UnaryOp::Floor => map1(v, l, T::floor),
        UnaryOp::Ceil => map1(v, l, T::ceil),
        UnaryOp::Round => map1(v, l, Real::round_even),
    }
}

pub(crate) fn binary(op: BinaryOp, a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    use CpuStorage as S;
    let zero_div = AtomicBool::new(false);
    let out = match (a, b) {
        (S::F32(x), S::F32(y)) => S::F32(binary_real(op, slice(x), la, slice(y), lb)?.into()),
        (S::F16(x), S::F16(y)) => S::F16(binary_real(op, slice(x), la, slice(y), lb)?.into()),
        (S::BF16(x), S::BF16(y)) => S::BF16(binary_real(op, slice(x), la, slice(y), lb)?.into()),
        (S::F64(x), S::F64(y)) => S::F64(binary_real(op, slice(x), la, slice(y), lb)?.into()),
        (S::I64(x), S::I64(y)) => {
            let (x, y) = (slice(x), slice(y));
            S::I64(
                match op {
                    BinaryOp::Add => map2(x, la, y, lb, i64::wrapping_add),
                    BinaryOp::Sub => map2(x, la, y, lb, i64::wrapping_sub),
                    BinaryOp::Mul => map2(x, la, y, lb, i64::wrapping_mul),
                    BinaryOp::Div => map2(x, la, y, lb, |p, q| floor_div(p, q, &zero_div)),
                    BinaryOp::Maximum => map2(x, la, y, lb, i64::max),
                    BinaryOp::Minimum => map2(x, la, y, lb, i64::min),
                    BinaryOp::Pow => return Err(bad_dtype("pow", DType::I64, "pow takes floats; cast first")),
                }?
                .into(),
            )
        }
        (S::U8(x), S::U8(y)) => {
            let (x, y) = (slice(x), slice(y));
            S::U8(
                match op {
                    BinaryOp::Add => map2(x, la, y, lb, u8::wrapping_add),
                    BinaryOp::Sub => map2(x, la, y, lb, u8::wrapping_sub),
                    BinaryOp::Mul => map2(x, la, y, lb, u8::wrapping_mul),
                    BinaryOp::Div => map2(x, la, y, lb, |p, q| {
                        p.checked_div(q).unwrap_or_else(|| {
                            zero_div.store(true, Ordering::Relaxed);
                            0
                        })
                    }),
                    BinaryOp::Maximum => map2(x, la, y, lb, u8::max),
                    BinaryOp::Minimum => map2(x, la, y, lb, u8::min),
                    BinaryOp::Pow => return Err(bad_dtype("pow", DType::U8, "pow takes floats; cast first")),
                }?
                .into(),
            )
        }
        // On bools, maximum is `or` and minimum is `and`; nothing else has a meaning.
        (S::Bool(x), S::Bool(y)) => {
            let (x, y) = (slice(x), slice(y));
            S::Bool(
                match op {
                    BinaryOp::Maximum => map2(x, la, y, lb, |p, q| (p | q != 0) as u8),
                    BinaryOp::Minimum => map2(x, la, y, lb, |p, q| (p != 0 && q != 0) as u8),
                    _ => return Err(bad_dtype("binary", DType::Bool, format!("{op:?} is not defined on bools; cast first"))),
                }?
                .into(),
            )
        }
        _ => return Err(dtype_mismatch("binary", a, b)),
    };
    if zero_div.load(Ordering::Relaxed) {
        return Err(backend_error("div", "integer division by zero"));
    }
    Ok(out)
}

/// Division rounding toward negative infinity, as `torch.div(rounding_mode="floor")`.
fn floor_div(p: i64, q: i64, zero_div: &AtomicBool) -> i64 {
    if q == 0 {
        zero_div.store(true, Ordering::Relaxed);
        return 0;
    }
    let d = p.wrapping_div(q);
    if p.wrapping_rem(q) != 0 && ((p < 0) != (q < 0)) {
        d - 1
    } else {
        d
    }
}

fn binary_real<T: Real>(op: BinaryOp, x: &[T], la: &Layout, y: &[T], lb: &Layout) -> Result<Vec<T>> {
    match op {
        BinaryOp::Add => map2(x, la, y, lb, |p: T, q| p + q),
        BinaryOp::Sub => map2(x, la, y, lb, |p: T, q| p - q),
        BinaryOp::Mul => map2(x, la, y, lb, |p: T, q| p * q),
        BinaryOp::Div => map2(x, la, y, lb, |p: T, q| p / q),
        BinaryOp::Pow => map2(x, la, y, lb, T::powf),
        // NaN propagates, as `torch.maximum` (`f32::max` would drop it).
        BinaryOp::Maximum => map2(x, la, y, lb, |p: T, q| if Float::is_nan(p) || p >= q { p } else { q }),
        BinaryOp::Minimum => map2(x, la, y, lb, |p: T, q| if Float::is_nan(p) || p <= q { p } else { q }),
    }
}

pub(crate) fn compare(op: CmpOp, a: &CpuStorage, la: &Layout, b: &CpuStorage, lb: &Layout) -> Result<CpuStorage> {
    fn cmp<T: Scalar>(op: CmpOp, x: &[T], la: &Layout, y: &[T], lb: &Layout) -> Result<Vec<u8>> {
        match op {
            CmpOp::Eq => map2(x, la, y, lb, |p, q| (p == q) as u8),
            CmpOp::Ne => map2(x, la, y, lb, |p, q| (p != q) as u8),
            CmpOp::Lt => map2(x, la, y, lb, |p, q| (p < q) as u8),
            CmpOp::Le => map2(x, la, y, lb, |p, q| (p <= q) as u8),
            CmpOp::Gt => map2(x, la, y, lb, |p, q| (p > q) as u8),
            CmpOp::Ge => map2(x, la, y, lb, |p, q| (p >= q) as u8),
        }
    }
    use CpuStorage as S;
    let out = match (a, b) {
        (S::F32(x), S::F32(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        (S::F16(x), S::F16(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        (S::BF16(x), S::BF16(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        (S::F64(x), S::F64(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        (S::I64(x), S::I64(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        (S::U8(x), S::U8(y)) | (S::Bool(x), S::Bool(y)) => cmp(op, slice(x), la, slice(y), lb)?,
        _ => return Err(dtype_mismatch("compare", a, b)),
    };
    Ok(S::Bool(out.into()))
}

pub(crate) fn select(cond: &CpuStorage, lc: &Layout, t: &CpuStorage, lt: &Layout, f: &CpuStorage, lf: &Layout) -> Result<CpuStorage> {
    let CpuStorage::Bool(c) = cond else {
        return Err(bad_dtype("select", cond.dtype(), "the condition must be bool"));
    };
    let c = slice(c);
    fn pick<T: Scalar>(c: &[u8], lc: &Layout, x: &[T], lt: &Layout, y: &[T], lf: &Layout) -> Result<Vec<T>> {
        map3(c, lc, x, lt, y, lf, |c, p, q| if c != 0 { p } else { q })
    }
    use CpuStorage as S;
    Ok(match (t, f) {
        (S::F32(x), S::F32(y)) => S::F32(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::F16(x), S::F16(y)) => S::F16(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::BF16(x), S::BF16(y)) => S::BF16(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::F64(x), S::F64(y)) => S::F64(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::I64(x), S::I64(y)) => S::I64(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::U8(x), S::U8(y)) => S::U8(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        (S::Bool(x), S::Bool(y)) => S::Bool(pick(c, lc, slice(x), lt, slice(y), lf)?.into()),
        _ => return Err(dtype_mismatch("select", t, f)),
    })
}

/// Converts element type: float to integer truncates toward zero, anything to bool is `!= 0`,
/// bool to a number is 0 or 1.
pub(crate) fn cast(x: &CpuStorage, l: &Layout, to: DType) -> Result<CpuStorage> {
    fn from<T: Scalar>(v: &[T], l: &Layout, to: DType) -> Result<CpuStorage> {
        fn conv<T: Scalar, U: Scalar>(v: &[T], l: &Layout) -> Result<Vec<U>> {
            if T::FLOAT {
                map1(v, l, |x| U::from_f64(x.to_f64()))
            } else {
                map1(v, l, |x| U::from_i64(x.to_i64()))
            }
        }
        Ok(match to {
            DType::F32 => CpuStorage::F32(conv(v, l)?.into()),
            DType::F16 => CpuStorage::F16(conv(v, l)?.into()),
            DType::BF16 => CpuStorage::BF16(conv(v, l)?.into()),
            DType::F64 => CpuStorage::F64(conv(v, l)?.into()),
            DType::I64 => CpuStorage::I64(conv(v, l)?.into()),
            DType::U8 => CpuStorage::U8(conv(v, l)?.into()),
            // `to_f64` is exact enough for this: no nonzero integer maps to 0.0, and NaN is true.
            DType::Bool => CpuStorage::Bool(map1(v, l, |x| (x.to_f64() != 0.0) as u8)?.into()),
        })
    }
    Ok(match x {
        CpuStorage::F32(v) => from(slice(v), l, to)?,
        CpuStorage::F16(v) => from(slice(v), l, to)?,
        CpuStorage::BF16(v) => from(slice(v), l, to)?,
        CpuStorage::F64(v) => from(slice(v), l, to)?,
        CpuStorage::I64(v) => from(slice(v), l, to)?,
        CpuStorage::U8(v) => from(slice(v), l, to)?,
        CpuStorage::Bool(v) => from(&map1(slice(v), l, |b| (b != 0) as u8)?, &Layout::contiguous(&[l.numel()]), to)?,
    })
}
