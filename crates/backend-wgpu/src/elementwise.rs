//! Elementwise kernels: fill, random, copy, concat, cast, unary, binary, compare and select.
//! All take strided (and broadcast, stride-0) operands and write a dense output.

use std::sync::Arc;

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, UnaryOp};
use liandan_tensor::{DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{dense, source};
use crate::launch::{strided, Operand, Ran};
use crate::repr::Repr;
use crate::storage::WgpuStorage;

const UNARY: &str = include_str!("shaders/unary.wgsl");
const BINARY: &str = include_str!("shaders/binary.wgsl");
const COMPARE: &str = include_str!("shaders/compare.wgsl");
const BINARY_I64: &str = include_str!("shaders/binary_i64.wgsl");
const SELECT: &str = include_str!("shaders/select.wgsl");
const COPY: &str = include_str!("shaders/copy.wgsl");
const CAST: &str = include_str!("shaders/cast.wgsl");
const FILL: &str = include_str!("shaders/fill.wgsl");
const RANDOM: &str = include_str!("shaders/random.wgsl");

fn unary_expr(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-v",
        UnaryOp::Abs => "abs(v)",
        UnaryOp::Sign => "sign(v)",
        UnaryOp::Exp => "exp(v)",
        UnaryOp::Log => "log(v)",
        UnaryOp::Sqrt => "sqrt(v)",
        UnaryOp::Recip => "C_x(1) / v",
        UnaryOp::Sin => "sin(v)",
        UnaryOp::Cos => "cos(v)",
        UnaryOp::Erf => "erf_(v)",
        UnaryOp::Floor => "floor(v)",
        UnaryOp::Ceil => "ceil(v)",
        // WGSL's round() rounds half to even, as torch.round.
        UnaryOp::Round => "round(v)",
    }
}

/// GLSL.std.450 (and so Vulkan) defines exp, log, sin, cos, pow only up to 32 bits.
fn f64_capable(op: UnaryOp) -> bool {
    !matches!(op, UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Erf)
}

/// i64 addition and subtraction run here (as word pairs with a carry); other i64 arithmetic
/// goes to the CPU.
fn i64_native(op: BinaryOp, dtype: DType) -> bool {
    dtype == DType::I64 && matches!(op, BinaryOp::Add | BinaryOp::Sub)
}

fn binary_expr(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "a + b",
        BinaryOp::Sub => "a - b",
        BinaryOp::Mul => "a * b",
        BinaryOp::Div => "a / b",
        BinaryOp::Pow => "pow_(a, b)",
        BinaryOp::Maximum => "maximum_(a, b)",
        BinaryOp::Minimum => "minimum_(a, b)",
    }
}

/// The unary kernel for `op` over `dtype`.
pub(crate) fn unary_source(repr: &Repr, op: UnaryOp, dtype: DType) -> String {
    let mut template = UNARY.to_string();
    if dtype == DType::F64 {
        // The f32 erf helper would not type-check against f64; f64 erf runs on the CPU.
        let i = template.find("// Abramowitz").expect("erf helper");
        let j = template.find("@compute").expect("entry point");
        template.replace_range(i..j, "");
    }
    // Half to even from floor alone: lavapipe's f64 round() was seen rounding 1.5 to 1. The
    // fractional part `v - floor(v)` is exact, so no tie is misjudged (unlike floor(v + 0.5)).
    const ROUND_F64: &str = "select(select(floor(v), floor(v) + C_x(1), v - floor(v) > C_x(0.5)), \
        select(floor(v), floor(v) + C_x(1), floor(v) - C_x(2) * floor(floor(v) * C_x(0.5)) != C_x(0)), v - floor(v) == C_x(0.5))";
    let expr = if dtype == DType::F64 && op == UnaryOp::Round { ROUND_F64 } else { unary_expr(op) };
    source(repr, &template, &[("x", dtype)], &[("EXPR", expr)])
}

/// The binary kernel for `op` over `dtype`.
pub(crate) fn binary_source(repr: &Repr, op: BinaryOp, dtype: DType) -> String {
    if dtype == DType::I64 {
        let expr = if op == BinaryOp::Add { "add64(a, b)" } else { "sub64(a, b)" };
        return source(repr, BINARY_I64, &[("x", dtype)], &[("EXPR", expr)]);
    }
    let mut template = BINARY.to_string();
    if dtype == DType::F64 {
        let i = template.find("// PyTorch's pow").expect("pow helper");
        let j = template.find("// maximum/minimum").expect("max helper");
        template.replace_range(i..j, "");
    }
    source(repr, &template, &[("x", dtype)], &[("EXPR", binary_expr(op))])
}

/// The comparison kernel for `op` over `dtype`.
pub(crate) fn compare_source(repr: &Repr, op: CmpOp, dtype: DType) -> String {
    let (load, expr) = if dtype == DType::I64 {
        let e = match op {
            CmpOp::Eq => "all(a == b)",
            CmpOp::Ne => "any(a != b)",
            CmpOp::Lt => "lt64(a, b)",
            CmpOp::Le => "!lt64(b, a)",
            CmpOp::Gt => "lt64(b, a)",
            CmpOp::Ge => "!lt64(a, b)",
        };
        ("", e)
    } else {
        let e = match op {
            CmpOp::Eq => "a == b",
            // `!=` compiles to an ordered comparison (false for NaN); PyTorch's ne is true there.
            CmpOp::Ne => "!(a == b)",
            CmpOp::Lt => "a < b",
            CmpOp::Le => "a <= b",
            CmpOp::Gt => "a > b",
            CmpOp::Ge => "a >= b",
        };
        (if dtype.is_float() { "load_x" } else { "" }, e)
    };
    source(repr, COMPARE, &[("x", dtype)], &[("LOAD", load), ("EXPR", expr)])
}

/// The conversion kernel from `from` to `to` (neither an f64 the device cannot compute).
pub(crate) fn cast_source(repr: &Repr, from: DType, to: DType) -> String {
    let wide = if from == DType::F64 || to == DType::F64 { "f64" } else { "f32" };
    let to_f = match from {
        DType::I64 => "i64_to_float_(v)".to_string(),
        DType::U8 | DType::Bool => format!("{wide}(v)"),
        _ => format!("{wide}(load_x(v))"),
    };
    let convert = match to {
        DType::Bool => match from {
            DType::I64 => "select(0u, 1u, any(v != vec2<u32>(0u)))".to_string(),
            DType::U8 | DType::Bool => "select(0u, 1u, v != 0u)".to_string(),
            _ => format!("select(0u, 1u, {to_f} != {wide}(0))"),
        },
        DType::U8 => match from {
            DType::I64 => "v.x & 255u".to_string(),
            DType::U8 | DType::Bool => "v".to_string(),
            // Truncate toward zero, then wrap into a byte, as a C cast through int does.
            _ => format!("bitcast<u32>(i32(trunc({to_f}))) & 255u"),
        },
        DType::I64 => match from {
            DType::U8 | DType::Bool => "vec2<u32>(v, 0u)".to_string(),
            _ => format!("i64_from_float_(trunc({to_f}))"),
        },
        _ => format!("store_y(C_y({to_f}))"),
    };
    let helper = format!(
        "fn i64_to_float_(v: vec2<u32>) -> {wide} {{\n  // A value that fits 32 bits converts directly; splitting it would cancel in f32.\n  if (v.y == select(0u, 0xffffffffu, bitcast<i32>(v.x) < 0)) {{ return {wide}(bitcast<i32>(v.x)); }}\n  return {wide}(bitcast<i32>(v.y)) * {wide}(4294967296.0) + {wide}(v.x);\n}}\nfn i64_from_float_(t: {wide}) -> vec2<u32> {{\n  if (abs(t) < {wide}(2147483648.0)) {{\n    let v = i32(t);\n    return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0));\n  }}\n  // Beyond 32 bits the value is a whole number in any float, so the split is exact.\n  let hi = floor(t / {wide}(4294967296.0));\n  let lo = t - hi * {wide}(4294967296.0);\n  return vec2<u32>(u32(lo), bitcast<u32>(i32(hi)));\n}}\n"
    );
    source(repr, &format!("{helper}{CAST}"), &[("x", from), ("y", to)], &[("CONVERT", &convert)])
}

/// The three f32s whose sum is exactly `value` (72 bits cover f64's 53), or `None` when no
/// such split exists (finite values beyond f32's range or below its smallest subnormal).
/// Infinities and NaN travel in the first part alone.
fn f64_parts(value: f64) -> Option<[f32; 3]> {
    let a = value as f32;
    if !a.is_finite() {
        return (!value.is_finite()).then_some([a, 0.0, 0.0]);
    }
    let b = (value - a as f64) as f32;
    let c = (value - a as f64 - b as f64) as f32;
    (a as f64 + b as f64 + c as f64 == value).then_some([a, b, c])
}

/// The fill kernel for `dtype` and the meta words carrying `value`; `None` for an f64 value
/// the kernel cannot carry (the caller uploads it instead).
pub(crate) fn fill_source(repr: &Repr, dtype: DType, value: f64) -> Option<(String, [u32; 3])> {
    let (words, expr) = match dtype {
        DType::I64 => {
            let v = value as i64;
            ([v as u32, (v >> 32) as u32, 0], "vec2<u32>(params[1], params[2])")
        }
        DType::U8 => ([(value as i64 as u8) as u32, 0, 0], "params[1]"),
        DType::Bool => ([(value != 0.0) as u32, 0, 0], "params[1]"),
        DType::F64 if repr.f64 => {
            let [a, b, c] = f64_parts(value)?;
            ([a.to_bits(), b.to_bits(), c.to_bits()], "f64(bitcast<f32>(params[1])) + f64(bitcast<f32>(params[2])) + f64(bitcast<f32>(params[3]))")
        }
        DType::F64 => {
            let b = value.to_bits();
            ([b as u32, (b >> 32) as u32, 0], "vec2<u32>(params[1], params[2])")
        }
        _ => ([(value as f32).to_bits(), 0, 0], "store_x(bitcast<f32>(params[1]))"),
    };
    Some((source(repr, FILL, &[("x", dtype)], &[("VALUE", expr)]), words))
}

/// Every elementwise kernel this device could build, for validation tests.
pub(crate) fn sources(repr: &Repr) -> Vec<(String, String)> {
    use DType::*;
    let mut out = Vec::new();
    let floats: Vec<DType> = [F32, F16, BF16, F64].into_iter().filter(|&d| repr.computes(d)).collect();
    let unary = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Recip,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
    ];
    let binary = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum];
    let cmp = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
    for &d in &floats {
        for op in unary.into_iter().filter(|&op| d != F64 || f64_capable(op)) {
            out.push((format!("unary {op:?} {d}"), unary_source(repr, op, d)));
        }
        for op in binary.into_iter().filter(|&op| d != F64 || op != BinaryOp::Pow) {
            out.push((format!("binary {op:?} {d}"), binary_source(repr, op, d)));
        }
        out.push((format!("random {d}"), source(repr, RANDOM, &[("x", d)], &[])));
    }
    for op in [BinaryOp::Add, BinaryOp::Sub] {
        out.push((format!("binary {op:?} {I64}"), binary_source(repr, op, I64)));
    }
    let comparable: Vec<DType> = DType::ALL.into_iter().filter(|&d| repr.computes(d) || !d.is_float()).collect();
    for &d in &comparable {
        for op in cmp {
            out.push((format!("compare {op:?} {d}"), compare_source(repr, op, d)));
        }
    }
    let castable: Vec<DType> = DType::ALL.into_iter().filter(|&d| d != F64 || repr.f64).collect();
    for &from in &castable {
        for &to in castable.iter().filter(|&&t| t != from) {
            out.push((format!("cast {from} -> {to}"), cast_source(repr, from, to)));
        }
    }
    for d in DType::ALL {
        out.push((format!("fill {d}"), fill_source(repr, d, 1.5).expect("1.5 is exact").0));
        out.push((format!("copy {d}"), source(repr, COPY, &[("x", d)], &[])));
        out.push((format!("select {d}"), source(repr, SELECT, &[("x", d)], &[])));
    }
    out
}

impl WgpuBackend {
    fn operand<'a>(&self, s: &Strided<'a>) -> Operand<'a> {
        Operand { buffer: gpu_storage(s).buffer(), layout: Some(s.layout), elem: self.repr.gpu_size(s.dtype) as u64 }
    }

    fn dense_out<'a>(&self, out: &'a WgpuStorage) -> Operand<'a> {
        Operand { buffer: out.buffer(), layout: None, elem: self.repr.gpu_size(out.dtype) as u64 }
    }

    pub(crate) fn fill(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        let out = self.output(dtype, numel)?;
        let Some((src, [a, b, c])) = fill_source(&self.repr, dtype, value) else {
            // Not expressible in the kernel's parameters (an f64): upload it, no CPU computation.
            let gpu = self.gpu()?;
            let mut bytes = Vec::new();
            bytes.try_reserve_exact(numel * 8).map_err(|_| gpu.err("fill", format!("no host memory for the {} bytes to upload", numel * 8)))?;
            bytes.extend(std::iter::repeat_n(value.to_ne_bytes(), numel).flatten());
            gpu.upload(out.buffer(), 0, &self.repr.host_to_gpu(&bytes, dtype))?;
            return Ok(Arc::new(out));
        };
        let meta = |len: usize, _: usize, _: &[Layout]| Some(vec![len as u32, a, b, c]);
        if let Err(why) = self.launch(&format!("fill {dtype}"), || src, &[numel], &[self.dense_out(&out)], &meta)? {
            return self.fallback1(format!("fill ({dtype})"), why, &[], dtype, |cpu, _| cpu.full(numel, value, dtype));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn random_fill(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        // Allocated first, also for the CPU's draw: the size check names the bytes.
        let out = self.output(dtype, numel)?;
        if !self.repr.computes(dtype) {
            return self.fallback1(format!("random ({dtype})"), Why::Unsupported, &[], dtype, |cpu, _| cpu.random(dist, numel, seed, dtype));
        }
        let (kind, a, b) = match dist {
            Distribution::Uniform { low, high } => (0u32, low as f32, (high - low) as f32),
            Distribution::Normal { mean, std } => (1, mean as f32, std as f32),
            Distribution::Bernoulli { p } => (2, p as f32, 0.0),
        };
        let meta =
            |len: usize, first: usize, _: &[Layout]| Some(vec![len as u32, kind, seed as u32, (seed >> 32) as u32, a.to_bits(), b.to_bits(), first as u32]);
        let src = || source(&self.repr, RANDOM, &[("x", dtype)], &[]);
        if let Err(why) = self.launch(&format!("random {dtype}"), src, &[numel], &[self.dense_out(&out)], &meta)? {
            return self.fallback1(format!("random ({dtype})"), why, &[], dtype, |cpu, _| cpu.random(dist, numel, seed, dtype));
        }
        Ok(Arc::new(out))
    }

    /// Writes the view `src` into `dst` viewed through `dst_layout` (same shape).
    fn copy_into(&self, src: Strided, dst: &WgpuStorage, dst_layout: &Layout) -> Result<Ran> {
        let key = format!("copy {}", self.repr.storage_type(src.dtype));
        let out = Operand { buffer: dst.buffer(), layout: Some(dst_layout), elem: self.repr.gpu_size(dst.dtype) as u64 };
        self.launch(&key, || source(&self.repr, COPY, &[("x", src.dtype)], &[]), src.layout.shape(), &[self.operand(&src), out], &strided)
    }

    pub(crate) fn copy_view(&self, src: Strided) -> Result<Storage> {
        let out = self.output(src.dtype, src.layout.numel())?;
        if let Err(why) = self.copy_into(src, &out, &dense(src.layout.shape()))? {
            return self.fallback1(format!("copy ({})", src.dtype), why, &[src], src.dtype, |cpu, v| cpu.copy(v[0]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn concat_views(&self, parts: &[Strided], dim: usize) -> Result<Storage> {
        let first = parts[0];
        let mut shape = first.layout.shape().to_vec();
        shape[dim] = parts.iter().map(|p| p.layout.shape()[dim]).sum();
        let out = self.output(first.dtype, shape.iter().product())?;
        let full = dense(&shape);
        let mut start = 0;
        for p in parts {
            let len = p.layout.shape()[dim];
            let dst = full.narrow(dim, start, len)?;
            let ran = if p.layout.numel() > 0 { self.copy_into(*p, &out, &dst)? } else { Ok(()) };
            if let Err(why) = ran {
                return self.fallback1(format!("concat ({})", first.dtype), why, parts, first.dtype, |cpu, v| cpu.concat(v, dim));
            }
            start += len;
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn cast_view(&self, src: Strided, to: DType) -> Result<Storage> {
        let from = src.dtype;
        let exotic = |d: DType| d == DType::F64 && !self.repr.f64;
        let out = self.output(to, src.layout.numel())?;
        let key = format!("cast {from} -> {to}");
        let ran = if exotic(from) || exotic(to) {
            Err(Why::Unsupported)
        } else {
            self.launch(&key, || cast_source(&self.repr, from, to), src.layout.shape(), &[self.operand(&src), self.dense_out(&out)], &strided)?
        };
        if let Err(why) = ran {
            return self.fallback1(format!("cast ({from} -> {to})"), why, &[src], to, |cpu, v| cpu.cast(v[0], to));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn unary_op(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        let native = self.repr.computes(x.dtype) && (x.dtype != DType::F64 || f64_capable(op));
        let out = self.output(x.dtype, x.layout.numel())?;
        let key = format!("unary {op:?} {}", x.dtype);
        let ran = if native {
            self.launch(&key, || unary_source(&self.repr, op, x.dtype), x.layout.shape(), &[self.operand(&x), self.dense_out(&out)], &strided)?
        } else {
            Err(Why::Unsupported)
        };
        if let Err(why) = ran {
            return self.fallback1(format!("unary {op:?} ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.unary(op, v[0]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn binary_op(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        let native = (self.repr.computes(lhs.dtype) && !(lhs.dtype == DType::F64 && op == BinaryOp::Pow)) || i64_native(op, lhs.dtype);
        let out = self.output(lhs.dtype, lhs.layout.numel())?;
        let key = format!("binary {op:?} {}", lhs.dtype);
        let operands = [self.operand(&lhs), self.operand(&rhs), self.dense_out(&out)];
        let ran = if native {
            self.launch(&key, || binary_source(&self.repr, op, lhs.dtype), lhs.layout.shape(), &operands, &strided)?
        } else {
            Err(Why::Unsupported)
        };
        if let Err(why) = ran {
            return self.fallback1(format!("binary {op:?} ({})", lhs.dtype), why, &[lhs, rhs], lhs.dtype, |cpu, v| cpu.binary(op, v[0], v[1]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn compare_op(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        let dtype = lhs.dtype;
        let native = self.repr.computes(dtype) || !dtype.is_float();
        let out = self.output(DType::Bool, lhs.layout.numel())?;
        let key = format!("compare {op:?} {dtype}");
        let operands = [self.operand(&lhs), self.operand(&rhs), self.dense_out(&out)];
        let ran =
            if native { self.launch(&key, || compare_source(&self.repr, op, dtype), lhs.layout.shape(), &operands, &strided)? } else { Err(Why::Unsupported) };
        if let Err(why) = ran {
            return self.fallback1(format!("compare {op:?} ({dtype})"), why, &[lhs, rhs], DType::Bool, |cpu, v| cpu.compare(op, v[0], v[1]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn select_op(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        let dtype = on_true.dtype;
        let out = self.output(dtype, cond.layout.numel())?;
        let key = format!("select {}", self.repr.storage_type(dtype));
        let operands = [self.operand(&cond), self.operand(&on_true), self.operand(&on_false), self.dense_out(&out)];
        if let Err(why) = self.launch(&key, || source(&self.repr, SELECT, &[("x", dtype)], &[]), cond.layout.shape(), &operands, &strided)? {
            return self.fallback1(format!("select ({dtype})"), why, &[cond, on_true, on_false], dtype, |cpu, v| cpu.select(v[0], v[1], v[2]));
        }
        Ok(Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::f64_parts;

    #[test]
    fn f64_constants_split_exactly_into_three_f32s_or_not_at_all() {
        for v in [0.1, -1.0 / 3.0, 123_456_789.123_456_78, 1e-30, std::f64::consts::PI, 0.0] {
            let [a, b, c] = f64_parts(v).unwrap_or_else(|| panic!("{v} should split"));
            assert_eq!(a as f64 + b as f64 + c as f64, v);
        }
        assert!(f64_parts(1e300).is_none() && f64_parts(3e-310).is_none());
        assert_eq!(f64_parts(f64::NEG_INFINITY).unwrap()[0], f32::NEG_INFINITY);
        assert!(f64_parts(f64::NAN).unwrap()[0].is_nan());
    }
}
