//! Elementwise kernels: fill, random, copy, concat, cast, unary, binary, compare and select.
//! All take strided (and broadcast, stride-0) operands and write a dense output.

use std::sync::Arc;

use liandan_tensor::backend::{BinaryOp, CmpOp, Distribution, UnaryOp};
use liandan_tensor::{DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend, Why};
use crate::kernels::{dense, KernelKey, StridedView, Wgsl};
use crate::launch::{strided, MetaFn, Operand, Ran};
use crate::packed::{packed_operand, packed_out, with_words, ENTRY2};
use crate::params::{words, Meta};
use crate::repr::Repr;
use crate::storage::WgpuStorage;

const UNARY: &str = include_str!("shaders/unary.wgsl");
const BINARY: &str = include_str!("shaders/binary.wgsl");
const BINARY_I64: &str = include_str!("shaders/binary_i64.wgsl");
const COMPARE: &str = include_str!("shaders/compare.wgsl");
const SELECT: &str = include_str!("shaders/select.wgsl");
const COPY: &str = include_str!("shaders/copy.wgsl");
const CAST: &str = include_str!("shaders/cast.wgsl");
const FILL: &str = include_str!("shaders/fill.wgsl");
const RANDOM: &str = include_str!("shaders/random.wgsl");
const RANDOM_DRAW: &str = include_str!("shaders/random_draw.wgsl");
/// The entry point of the kernels that read ([`Key::per_invocation`] 4).
const ENTRY4: &str = include_str!("shaders/elementwise4.wgsl");

crate::shader_params! {
    /// A fill's block (`shaders/fill.wgsl`): the value's words, as [`fill_words`] writes them.
    pub(crate) struct FillParams {
        pub numel: u32,
        pub value: [u32; 3],
    }
}

crate::shader_params! {
    /// A random draw's block (`shaders/random.wgsl`): `kind` 0 uniform, 1 normal, 2 bernoulli;
    /// `(a, b)` = `(low, high - low)`, `(mean, std)` or `(p, 0)`; element i of a launch is
    /// element `first + i` of the tensor.
    struct RandomParams {
        numel: u32,
        kind: u32,
        seed_lo: u32,
        seed_hi: u32,
        a: f32,
        b: f32,
        first: u32,
    }
}

crate::shader_params! {
    /// The block of a [`Key::Dense4`] unary, binary or copy: the strided block of one
    /// dimension and two operands ([`crate::kernels::StridedParams`]) by name, `a` and `b`
    /// the operands with a layout in binding order.
    struct Dense4Params {
        numel: u32,
        rank: u32,
        len: u32,
        a_stride: u32,
        a_offset: u32,
        b_stride: u32,
        b_offset: u32,
    }
}

crate::shader_params! {
    /// The block of a [`Dense::Broadcast`] binary (`shaders/dense4/broadcast.wgsl`): element
    /// i reads the broadcast operand at `bcast_offset + (i / inner) % channels`.
    struct BroadcastParams {
        numel: u32,
        dense_offset: u32,
        bcast_offset: u32,
        inner: u32,
        channels: u32,
    }
}

/// One elementwise kernel variant (see `kernels::KernelKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Unary(UnaryOp, DType),
    Binary(BinaryOp, DType),
    Compare(CmpOp, DType),
    Cast {
        from: DType,
        to: DType,
    },
    Fill(DType),
    Random(DType),
    Copy(DType),
    Select(DType),
    /// [`Key::Unary`] and [`Key::Binary`] on packed bf16 (`packed.rs`), two elements an
    /// invocation, written a word at a time.
    UnaryPacked(UnaryOp),
    BinaryPacked(BinaryOp),
    /// [`Key::Copy`] of packed bf16.
    CopyPacked,
    /// [`Key::Compare`] of packed bf16 views (into bool words, four an invocation).
    ComparePacked(CmpOp),
    /// [`Key::Select`] between packed bf16 views, into packed bf16.
    SelectPacked,
    /// [`Key::Random`] into packed bf16.
    RandomPacked,
    /// An f32 or f16 [`Key::Unary`], [`Key::Binary`] or [`Key::Copy`] whose operands are all
    /// dense from a multiple of four elements on, over a multiple of four elements: every
    /// access a vec4 ([`Key::dense4`] picks it); or a binary with one such operand and one
    /// broadcast over channels ([`Dense::Broadcast`], [`Key::broadcast4`]).
    Dense4(Dense, DType),
    /// An f32 or f16 [`Key::Copy`] between strided views whose innermost dimension is dense
    /// in runs of four (attention's heads split and merged): a vec4 an invocation, indexed
    /// through the strided block in units of four ([`Key::runs4`] picks it).
    CopyRuns(DType),
}

/// The ops [`Key::Dense4`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Dense {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Copy,
    /// A binary whose other operand (the rhs where `rhs`) holds one value per channel
    /// (`shaders/dense4/broadcast.wgsl`): a bias, a per-channel scale, a scalar.
    Broadcast {
        op: BinaryOp,
        rhs: bool,
    },
}

const UNARY_OPS: [UnaryOp; 13] = [
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
const BINARY_OPS: [BinaryOp; 7] = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum];
const CMP_OPS: [CmpOp; 6] = [CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];

/// The file defining `op_(v: C_x) -> C_x` for `op` over `dtype`.
fn unary_body(op: UnaryOp, dtype: DType) -> &'static str {
    match op {
        UnaryOp::Neg => include_str!("shaders/unary/neg.wgsl"),
        UnaryOp::Abs => include_str!("shaders/unary/abs.wgsl"),
        UnaryOp::Sign => include_str!("shaders/unary/sign.wgsl"),
        UnaryOp::Exp => include_str!("shaders/unary/exp.wgsl"),
        UnaryOp::Log => include_str!("shaders/unary/log.wgsl"),
        UnaryOp::Sqrt => include_str!("shaders/unary/sqrt.wgsl"),
        UnaryOp::Recip => include_str!("shaders/unary/recip.wgsl"),
        UnaryOp::Sin => include_str!("shaders/unary/sin.wgsl"),
        UnaryOp::Cos => include_str!("shaders/unary/cos.wgsl"),
        UnaryOp::Erf => include_str!("shaders/unary/erf.wgsl"),
        UnaryOp::Floor => include_str!("shaders/unary/floor.wgsl"),
        UnaryOp::Ceil => include_str!("shaders/unary/ceil.wgsl"),
        UnaryOp::Round if dtype == DType::F64 => include_str!("shaders/unary/round_f64.wgsl"),
        UnaryOp::Round => include_str!("shaders/unary/round.wgsl"),
    }
}

/// The file defining `op_(a, b)` for `op` over `dtype`.
fn binary_body(op: BinaryOp, dtype: DType) -> &'static str {
    match (op, dtype) {
        (BinaryOp::Add, DType::I64) => include_str!("shaders/binary/add_i64.wgsl"),
        (BinaryOp::Sub, DType::I64) => include_str!("shaders/binary/sub_i64.wgsl"),
        (BinaryOp::Add, _) => include_str!("shaders/binary/add.wgsl"),
        (BinaryOp::Sub, _) => include_str!("shaders/binary/sub.wgsl"),
        (BinaryOp::Mul, _) => include_str!("shaders/binary/mul.wgsl"),
        (BinaryOp::Div, _) => include_str!("shaders/binary/div.wgsl"),
        (BinaryOp::Pow, _) => include_str!("shaders/binary/pow.wgsl"),
        (BinaryOp::Maximum, _) => include_str!("shaders/binary/maximum.wgsl"),
        (BinaryOp::Minimum, _) => include_str!("shaders/binary/minimum.wgsl"),
    }
}

/// The `OP` constant `shaders/compare/*.wgsl` switch on.
fn cmp_code(op: CmpOp) -> u32 {
    match op {
        CmpOp::Eq => 0,
        CmpOp::Ne => 1,
        CmpOp::Lt => 2,
        CmpOp::Le => 3,
        CmpOp::Gt => 4,
        CmpOp::Ge => 5,
    }
}

/// The cast parts reading a `from` (`wide_`, `low_word_`) and writing a `to` (`convert_`).
fn cast_parts(from: DType, to: DType) -> [&'static str; 2] {
    let read = match from {
        DType::I64 => include_str!("shaders/cast/from_i64.wgsl"),
        DType::U8 | DType::Bool => include_str!("shaders/cast/from_word.wgsl"),
        _ => include_str!("shaders/cast/from_float.wgsl"),
    };
    let write = match to {
        DType::Bool => include_str!("shaders/cast/to_bool.wgsl"),
        DType::U8 => include_str!("shaders/cast/to_u8.wgsl"),
        DType::I64 => include_str!("shaders/cast/to_i64.wgsl"),
        _ => include_str!("shaders/cast/to_float.wgsl"),
    };
    [read, write]
}

/// The file defining `value_() -> S_x` for a fill of `dtype`, reading the words of `fill_words`.
fn fill_part(repr: &Repr, dtype: DType) -> &'static str {
    match dtype {
        DType::I64 => include_str!("shaders/fill/words.wgsl"),
        DType::F64 if repr.f64 => include_str!("shaders/fill/f64.wgsl"),
        DType::F64 => include_str!("shaders/fill/words.wgsl"),
        DType::U8 | DType::Bool => include_str!("shaders/fill/word.wgsl"),
        _ => include_str!("shaders/fill/float.wgsl"),
    }
}

impl Key {
    /// The vec4 variant ([`Key::Dense4`]) of this launch, where it has one: an f32 or f16
    /// unary, binary or copy whose strided meta block (`launch::strided`) has one dimension, a
    /// multiple of four long, and every operand with a layout (`operands` of them, the op's
    /// inputs and a copy's destination) at stride 1 from an offset that is a multiple of four.
    pub(crate) fn dense4(self, meta: &[u32], operands: usize) -> Option<Key> {
        let (dense, want, dtype) = match self {
            Key::Unary(op, d @ (DType::F32 | DType::F16)) => (Dense::Unary(op), 1, d),
            Key::Binary(op, d @ (DType::F32 | DType::F16)) => (Dense::Binary(op), 2, d),
            Key::Copy(d @ (DType::F32 | DType::F16)) => (Dense::Copy, 2, d),
            _ => return None,
        };
        let m = StridedView(meta);
        let shaped = operands == want && meta.len() == 3 + 2 * operands && m.rank() == 1 && m.shape() == [m.numel()] && m.numel().is_multiple_of(4);
        let dense_from_fours = shaped && (0..operands).all(|k| m.strides(k) == Some(&[1]) && m.offset(k).is_some_and(|o| o.is_multiple_of(4)));
        (dense_from_fours).then_some(Key::Dense4(dense, dtype))
    }

    /// The vec4 variant ([`Key::CopyRuns`]) of an f32 or f16 copy whose strided meta block
    /// (`launch::strided`, two operands) has its innermost dimension a multiple of four long
    /// at stride 1 in both views, every other stride and both offsets multiples of four: with
    /// the block counted in fours.
    pub(crate) fn runs4(self, meta: &[u32], operands: usize) -> Option<(Key, Meta)> {
        let Key::Copy(dtype @ (DType::F32 | DType::F16)) = self else { return None };
        let m = StridedView(meta);
        let rank = m.rank();
        if operands != 2 || rank == 0 || meta.len() != 2 + rank + 2 * (rank + 1) || !m.shape()[rank - 1].is_multiple_of(4) {
            return None;
        }
        let fours = |k: usize| {
            let s = m.strides(k).unwrap_or_default();
            s[rank - 1] == 1 && s[..rank - 1].iter().all(|s| s.is_multiple_of(4)) && m.offset(k).is_some_and(|o| o.is_multiple_of(4))
        };
        if !(fours(0) && fours(1)) {
            return None;
        }
        let mut quartered = Meta::from_slice(meta);
        quartered[0] /= 4;
        quartered[1 + rank] /= 4;
        for k in 0..2 {
            let base = 2 + rank + k * (rank + 1);
            for w in &mut quartered[base..base + rank - 1] {
                *w /= 4;
            }
            quartered[base + rank] /= 4;
        }
        Some((Key::CopyRuns(dtype), quartered))
    }

    /// The channel-broadcast variant ([`Dense::Broadcast`]) of an f32 or f16 binary whose
    /// strided meta block (`launch::strided`, merged to at most three dimensions) has one
    /// operand dense from a multiple of four and the other at stride 1 along one dimension
    /// (its channels) and 0 along the rest, or 0 along all (a scalar), over a multiple of four
    /// elements: with its meta block (`shaders/dense4/broadcast.wgsl`). A channel-broadcast add
    /// on the strided kernel took 4-5x the time a copy of its bytes takes on the H200.
    pub(crate) fn broadcast4(self, meta: &[u32], operands: usize) -> Option<(Key, Meta)> {
        let Key::Binary(op, dtype @ (DType::F32 | DType::F16)) = self else { return None };
        let m = StridedView(meta);
        let rank = m.rank();
        let n = m.numel();
        if operands != 2 || !(1..=3).contains(&rank) || meta.len() != 2 + rank + 2 * (rank + 1) || !n.is_multiple_of(4) {
            return None;
        }
        let shape = m.shape();
        let strides = |k: usize| m.strides(k).unwrap_or_default();
        let offset = |k: usize| m.offset(k).unwrap_or_default();
        let dense = |k: usize| (0..rank).all(|d| strides(k)[d] == shape[d + 1..].iter().product::<u32>());
        let (d, b) = match (dense(0), dense(1)) {
            (true, false) => (0, 1),
            (false, true) => (1, 0),
            _ => return None,
        };
        // (I, C): the broadcast operand's element for i is at (i / I) % C.
        let s = strides(b);
        let mut axes = (0..rank).filter(|&a| s[a] != 0);
        let (inner, channels) = match (axes.next(), axes.next()) {
            (None, _) => (4, 1),
            (Some(a), None) if s[a] == 1 => (shape[a + 1..].iter().product(), shape[a]),
            _ => return None,
        };
        if !offset(d).is_multiple_of(4) {
            return None;
        }
        let block = BroadcastParams { numel: n, dense_offset: offset(d), bcast_offset: offset(b), inner, channels };
        Some((Key::Dense4(Dense::Broadcast { op, rhs: b == 1 }, dtype), words(&block)))
    }

    /// Elements one invocation handles: 4 for the kernels that read (1,024 a workgroup, each
    /// invocation's four 256 apart, so that every access of a warp stays coalesced), which
    /// keeps four loads of each operand in flight where one left an H200's memory idle (a
    /// 4-byte copy moved 1.5 TB/s of its 4.8); 1 for the fills and random draws, which only
    /// write.
    pub(crate) fn per_invocation(&self) -> usize {
        match self {
            Key::Fill(_) | Key::Random(_) => 1,
            Key::UnaryPacked(_) | Key::BinaryPacked(_) | Key::CopyPacked | Key::SelectPacked | Key::RandomPacked => 2,
            _ => 4,
        }
    }

    /// Whether this device runs the variant (else the op goes to the CPU).
    pub(crate) fn supported(&self, repr: &Repr) -> bool {
        let f64_ok = |d: DType| d != DType::F64 || repr.f64;
        match *self {
            // GLSL.std.450 (and so Vulkan) defines exp, log, sin, cos, pow only up to 32 bits.
            Key::Unary(op, d) => {
                repr.computes(d) && (d != DType::F64 || !matches!(op, UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Erf))
            }
            // i64 addition and subtraction run here (as word pairs with a carry); other i64
            // arithmetic goes to the CPU.
            Key::Binary(op, d) => {
                (repr.computes(d) && !(d == DType::F64 && op == BinaryOp::Pow)) || (d == DType::I64 && matches!(op, BinaryOp::Add | BinaryOp::Sub))
            }
            Key::Compare(_, d) => repr.computes(d) || !d.is_float(),
            Key::Cast { from, to } => f64_ok(from) && f64_ok(to),
            Key::Random(d) => repr.computes(d),
            Key::RandomPacked => repr.computes(DType::BF16),
            Key::Fill(_) | Key::Copy(_) | Key::Select(_) | Key::CopyPacked | Key::ComparePacked(_) | Key::SelectPacked => true,
            Key::UnaryPacked(op) => Key::Unary(op, DType::BF16).supported(repr),
            Key::BinaryPacked(op) => Key::Binary(op, DType::BF16).supported(repr),
            Key::Dense4(Dense::Unary(op), d) => Key::Unary(op, d).supported(repr),
            Key::Dense4(Dense::Binary(op) | Dense::Broadcast { op, .. }, d) => Key::Binary(op, d).supported(repr),
            Key::Dense4(Dense::Copy, _) | Key::CopyRuns(_) => true,
        }
    }
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let w = match *self {
            Key::Fill(_) => Wgsl::new(repr).params::<FillParams>(),
            Key::Random(_) | Key::RandomPacked => Wgsl::new(repr).params::<RandomParams>(),
            Key::Dense4(Dense::Broadcast { .. }, _) => Wgsl::new(repr).params::<BroadcastParams>(),
            Key::Dense4(..) => Wgsl::new(repr).params::<Dense4Params>(),
            _ => Wgsl::new(repr).strided(),
        };
        let w = match *self {
            Key::Unary(op, d) => w.ty("x", d).part(unary_body(op, d)).part(UNARY),
            Key::Binary(op, d) => w.ty("x", d).part(binary_body(op, d)).part(if d == DType::I64 { BINARY_I64 } else { BINARY }),
            Key::Compare(op, d) => {
                let table = match d {
                    DType::I64 => include_str!("shaders/compare/i64.wgsl"),
                    DType::U8 | DType::Bool => include_str!("shaders/compare/word.wgsl"),
                    _ => include_str!("shaders/compare/float.wgsl"),
                };
                w.ty("x", d).uint("OP", cmp_code(op)).part(table).part(COMPARE)
            }
            Key::Cast { from, to } => {
                let wide = if from == DType::F64 || to == DType::F64 { "f64" } else { "f32" };
                let [read, write] = cast_parts(from, to);
                w.ty("x", from).ty("y", to).alias("W", wide).part(include_str!("shaders/cast/helpers.wgsl")).part(read).part(write).part(CAST)
            }
            Key::Fill(d) => w.ty("x", d).part(fill_part(repr, d)).part(FILL),
            Key::Random(d) => w.ty("x", d).part(RANDOM_DRAW).part(RANDOM),
            Key::RandomPacked => with_words(w.ty("x", DType::BF16)).part(RANDOM_DRAW).part(include_str!("shaders/packed/random.wgsl")),
            Key::Copy(d) => w.ty("x", d).part(COPY),
            Key::CopyRuns(d) => return w.ty("x", d).part(include_str!("shaders/copy_runs.wgsl")).build(),
            Key::Select(d) => w.ty("x", d).part(SELECT),
            Key::UnaryPacked(op) => with_words(w.ty("x", DType::BF16)).part(unary_body(op, DType::BF16)).part(include_str!("shaders/packed/unary.wgsl")),
            Key::BinaryPacked(op) => with_words(w.ty("x", DType::BF16)).part(binary_body(op, DType::BF16)).part(include_str!("shaders/packed/binary.wgsl")),
            Key::ComparePacked(op) => with_words(w.ty("x", DType::BF16).uint("OP", cmp_code(op)))
                .part(include_str!("shaders/compare/float.wgsl"))
                .part(include_str!("shaders/packed/compare.wgsl")),
            Key::SelectPacked => with_words(w.ty("x", DType::BF16)).part(include_str!("shaders/packed/select.wgsl")),
            Key::CopyPacked => {
                with_words(w.ty("x", DType::BF16)).part(include_str!("shaders/packed/identity.wgsl")).part(include_str!("shaders/packed/unary.wgsl"))
            }
            Key::Dense4(dense, d) => {
                let w = w.ty("x", d);
                let w = match dense {
                    Dense::Unary(op) => w.part(unary_body(op, d)).part(include_str!("shaders/dense4/unary.wgsl")),
                    Dense::Binary(op) => w.part(binary_body(op, d)).part(include_str!("shaders/dense4/binary.wgsl")),
                    Dense::Copy => w.part(include_str!("shaders/dense4/copy.wgsl")),
                    Dense::Broadcast { op, rhs } => {
                        let side = if rhs { include_str!("shaders/dense4/broadcast_rhs.wgsl") } else { include_str!("shaders/dense4/broadcast_lhs.wgsl") };
                        w.part(binary_body(op, d)).part(side).part(include_str!("shaders/dense4/broadcast.wgsl"))
                    }
                };
                return w.part(include_str!("shaders/dense4/entry.wgsl")).build();
            }
        };
        match self.per_invocation() {
            4 => w.part(ENTRY4),
            2 => w.part(ENTRY2),
            _ => w,
        }
        .build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut out = Vec::new();
        for d in DType::ALL {
            out.extend(UNARY_OPS.map(|op| Key::Unary(op, d)));
            out.extend(BINARY_OPS.map(|op| Key::Binary(op, d)));
            out.extend(CMP_OPS.map(|op| Key::Compare(op, d)));
            out.extend(DType::ALL.map(|to| Key::Cast { from: d, to }));
            out.extend([Key::Fill(d), Key::Random(d), Key::Copy(d), Key::Select(d)]);
        }
        out.extend(UNARY_OPS.map(Key::UnaryPacked));
        out.extend(BINARY_OPS.map(Key::BinaryPacked));
        out.extend(CMP_OPS.map(Key::ComparePacked));
        out.extend([Key::CopyPacked, Key::SelectPacked, Key::RandomPacked]);
        for d in [DType::F32, DType::F16] {
            out.extend(UNARY_OPS.map(|op| Key::Dense4(Dense::Unary(op), d)));
            out.extend(BINARY_OPS.map(|op| Key::Dense4(Dense::Binary(op), d)));
            out.extend([Key::Dense4(Dense::Copy, d), Key::CopyRuns(d)]);
            for rhs in [true, false] {
                out.extend(BINARY_OPS.map(|op| Key::Dense4(Dense::Broadcast { op, rhs }, d)));
            }
        }
        out.retain(|k| k.supported(repr));
        out
    }
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

/// The meta words carrying a fill `value` of `dtype` (read by `fill_part`'s file); `None` for
/// an f64 value the kernel cannot carry (the caller uploads it instead).
fn fill_words(repr: &Repr, dtype: DType, value: f64) -> Option<[u32; 3]> {
    Some(match dtype {
        DType::I64 => {
            let v = value as i64;
            [v as u32, (v >> 32) as u32, 0]
        }
        DType::U8 => [(value as i64 as u8) as u32, 0, 0],
        DType::Bool => [(value != 0.0) as u32, 0, 0],
        DType::F64 if repr.f64 => f64_parts(value)?.map(f32::to_bits),
        DType::F64 => {
            let b = value.to_bits();
            [b as u32, (b >> 32) as u32, 0]
        }
        _ => [(value as f32).to_bits(), 0, 0],
    })
}

impl WgpuBackend {
    /// [`WgpuBackend::launch_kernel`] of the elementwise kernel `key`.
    pub(crate) fn launch(&self, key: Key, shape: &[usize], operands: &[Operand], meta: MetaFn) -> Result<Ran> {
        self.launch_kernel(key.into(), key.per_invocation(), shape, operands, meta)
    }

    /// A bf16 fill, packed: each word holds the rounded value twice.
    pub(crate) fn packed_fill(&self, numel: usize, value: f64) -> Result<Storage> {
        let out = self.packed_output(numel)?;
        let bits = liandan_tensor::dtype::bf16_from_f64(value).to_bits() as u32;
        let word = bits | bits << 16;
        let count = numel.div_ceil(2);
        let meta = |len: usize, _: usize, _: &[Layout]| Some(words(&FillParams { numel: len as u32, value: [word, 0, 0] }));
        let fill = Key::Fill(DType::U8);
        // A u8 fill writes its word as it is.
        let operand = [Operand { buffer: out.buffer(), layout: None, elem: 4 }];
        if self.launch(fill, &[count], &operand, &meta)?.is_err() {
            let host = vec![half::bf16::from_bits(bits as u16); numel];
            self.gpu()?.upload(out.buffer(), 0, bytemuck::cast_slice(&host))?;
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn operand<'a>(&self, s: &Strided<'a>) -> Operand<'a> {
        Operand { buffer: gpu_storage(s).buffer(), layout: Some(s.layout), elem: self.repr.gpu_size(s.dtype) as u64 }
    }

    fn dense_out<'a>(&self, out: &'a WgpuStorage) -> Operand<'a> {
        Operand { buffer: out.buffer(), layout: None, elem: self.repr.gpu_size(out.dtype) as u64 }
    }

    /// Launches `key` over `shape` with the usual strided meta block, or says why this device
    /// cannot run it.
    fn launch_strided(&self, key: Key, shape: &[usize], operands: &[Operand]) -> Result<Ran> {
        if !key.supported(&self.repr) {
            return Ok(Err(Why::Unsupported));
        }
        self.launch(key, shape, operands, &strided)
    }

    pub(crate) fn fill(&self, numel: usize, value: f64, dtype: DType) -> Result<Storage> {
        let out = self.output(dtype, numel)?;
        let Some([a, b, c]) = fill_words(&self.repr, dtype, value) else {
            // Not expressible in the kernel's parameters (an f64): upload it, no CPU computation.
            let gpu = self.gpu()?;
            let mut bytes = Vec::new();
            bytes.try_reserve_exact(numel * 8).map_err(|_| gpu.err("fill", format!("no host memory for the {} bytes to upload", numel * 8)))?;
            bytes.extend(std::iter::repeat_n(value.to_ne_bytes(), numel).flatten());
            gpu.upload(out.buffer(), 0, &self.repr.host_to_gpu(&bytes, dtype))?;
            return Ok(Arc::new(out));
        };
        let meta = |len: usize, _: usize, _: &[Layout]| Some(words(&FillParams { numel: len as u32, value: [a, b, c] }));
        if let Err(why) = self.launch(Key::Fill(dtype), &[numel], &[self.dense_out(&out)], &meta)? {
            return self.fallback1(format!("fill ({dtype})"), why, &[], dtype, |cpu, _| cpu.full(numel, value, dtype));
        }
        Ok(Arc::new(out))
    }

    /// A seeded draw of `numel` values of `dtype`; bf16 comes packed, two values a word, from
    /// one kernel.
    pub(crate) fn random_fill(&self, dist: Distribution, numel: usize, seed: u64, dtype: DType) -> Result<Storage> {
        let (kind, a, b) = match dist {
            Distribution::Uniform { low, high } => (0u32, low as f32, (high - low) as f32),
            Distribution::Normal { mean, std } => (1, mean as f32, std as f32),
            Distribution::Bernoulli { p } => (2, p as f32, 0.0),
        };
        let meta = |len: usize, first: usize, _: &[Layout]| {
            Some(words(&RandomParams { numel: len as u32, kind, seed_lo: seed as u32, seed_hi: (seed >> 32) as u32, a, b, first: first as u32 }))
        };
        if dtype == DType::BF16 && Key::RandomPacked.supported(&self.repr) {
            let out = self.packed_output(numel)?;
            if self.launch(Key::RandomPacked, &[numel], &[packed_out(&out)], &meta)?.is_ok() {
                return Ok(Arc::new(out));
            }
        }
        // Allocated first, also for the CPU's draw: the size check names the bytes.
        let out = self.output(dtype, numel)?;
        let key = Key::Random(dtype);
        if !key.supported(&self.repr) {
            return self.fallback1(format!("random ({dtype})"), Why::Unsupported, &[], dtype, |cpu, _| cpu.random(dist, numel, seed, dtype));
        }
        if let Err(why) = self.launch(key, &[numel], &[self.dense_out(&out)], &meta)? {
            return self.fallback1(format!("random ({dtype})"), why, &[], dtype, |cpu, _| cpu.random(dist, numel, seed, dtype));
        }
        Ok(Arc::new(out))
    }

    /// Writes the view `src` into `dst` viewed through `dst_layout` (same shape).
    pub(crate) fn copy_into(&self, src: Strided, dst: &WgpuStorage, dst_layout: &Layout) -> Result<Ran> {
        let out = Operand { buffer: dst.buffer(), layout: Some(dst_layout), elem: self.repr.gpu_size(dst.dtype) as u64 };
        self.launch_strided(Key::Copy(src.dtype), src.layout.shape(), &[self.operand(&src), out])
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
        // Where nothing comes before `dim`, a contiguous part is one run of the output's bytes:
        // a buffer copy, which costs the host far less than a kernel launch (an RNN's stacked
        // steps and their gradients are joined this way).
        let runs = shape[..dim].iter().product::<usize>() == 1;
        let (elem, inner) = (self.repr.gpu_size(first.dtype) as u64, shape[dim + 1..].iter().product::<usize>() as u64);
        let mut start = 0;
        for p in parts {
            let len = p.layout.shape()[dim];
            let (from, to, bytes) = (p.layout.offset() as u64 * elem, start as u64 * inner * elem, len as u64 * inner * elem);
            let run = runs && p.layout.is_contiguous() && [from, to, bytes].iter().all(|b| b.is_multiple_of(4));
            if p.layout.numel() > 0 && run {
                self.gpu()?.copy_buffer(gpu_storage(p).buffer(), from, out.buffer(), to, bytes);
            } else if p.layout.numel() > 0 {
                if let Err(why) = self.copy_into(*p, &out, &full.narrow(dim, start, len)?)? {
                    return self.fallback1(format!("concat ({})", first.dtype), why, parts, first.dtype, |cpu, v| cpu.concat(v, dim));
                }
            }
            start += len;
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn cast_view(&self, src: Strided, to: DType) -> Result<Storage> {
        let from = src.dtype;
        let out = self.output(to, src.layout.numel())?;
        if let Err(why) = self.launch_strided(Key::Cast { from, to }, src.layout.shape(), &[self.operand(&src), self.dense_out(&out)])? {
            return self.fallback1(format!("cast ({from} -> {to})"), why, &[src], to, |cpu, v| cpu.cast(v[0], to));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn unary_op(&self, op: UnaryOp, x: Strided) -> Result<Storage> {
        let out = self.output(x.dtype, x.layout.numel())?;
        if let Err(why) = self.launch_strided(Key::Unary(op, x.dtype), x.layout.shape(), &[self.operand(&x), self.dense_out(&out)])? {
            return self.fallback1(format!("unary {op:?} ({})", x.dtype), why, &[x], x.dtype, |cpu, v| cpu.unary(op, v[0]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn binary_op(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        let out = self.output(lhs.dtype, lhs.layout.numel())?;
        let operands = [self.operand(&lhs), self.operand(&rhs), self.dense_out(&out)];
        if let Err(why) = self.launch_strided(Key::Binary(op, lhs.dtype), lhs.layout.shape(), &operands)? {
            return self.fallback1(format!("binary {op:?} ({})", lhs.dtype), why, &[lhs, rhs], lhs.dtype, |cpu, v| cpu.binary(op, v[0], v[1]));
        }
        Ok(Arc::new(out))
    }

    /// [`WgpuBackend::unary_op`] on a packed bf16 view, into a packed result; `None` where
    /// the launch cannot run here (the caller widens instead).
    pub(crate) fn unary_packed(&self, op: UnaryOp, x: Strided) -> Result<Option<Storage>> {
        let out = self.packed_output(x.layout.numel())?;
        let operands = [packed_operand(&x), packed_out(&out)];
        Ok(self.launch_strided(Key::UnaryPacked(op), x.layout.shape(), &operands)?.ok().map(|()| Arc::new(out) as Storage))
    }

    /// [`WgpuBackend::copy_view`] of a packed bf16 view, packed; `None` as
    /// [`WgpuBackend::unary_packed`].
    pub(crate) fn copy_packed(&self, x: Strided) -> Result<Option<Storage>> {
        let out = self.packed_output(x.layout.numel())?;
        let operands = [packed_operand(&x), packed_out(&out)];
        Ok(self.launch_strided(Key::CopyPacked, x.layout.shape(), &operands)?.ok().map(|()| Arc::new(out) as Storage))
    }

    /// [`WgpuBackend::compare_op`] on packed bf16 views; `None` as
    /// [`WgpuBackend::unary_packed`].
    pub(crate) fn compare_packed(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Option<Storage>> {
        let out = self.output(DType::Bool, lhs.layout.numel())?;
        let operands = [packed_operand(&lhs), packed_operand(&rhs), self.dense_out(&out)];
        Ok(self.launch_strided(Key::ComparePacked(op), lhs.layout.shape(), &operands)?.ok().map(|()| Arc::new(out) as Storage))
    }

    /// [`WgpuBackend::select_op`] between packed bf16 views, packed; `None` as
    /// [`WgpuBackend::unary_packed`].
    pub(crate) fn select_packed(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Option<Storage>> {
        let out = self.packed_output(cond.layout.numel())?;
        let operands = [self.operand(&cond), packed_operand(&on_true), packed_operand(&on_false), packed_out(&out)];
        Ok(self.launch_strided(Key::SelectPacked, cond.layout.shape(), &operands)?.ok().map(|()| Arc::new(out) as Storage))
    }

    /// [`WgpuBackend::binary_op`] on packed bf16 views, into a packed result; `None` as
    /// [`WgpuBackend::unary_packed`].
    pub(crate) fn binary_packed(&self, op: BinaryOp, lhs: Strided, rhs: Strided) -> Result<Option<Storage>> {
        let out = self.packed_output(lhs.layout.numel())?;
        let operands = [packed_operand(&lhs), packed_operand(&rhs), packed_out(&out)];
        Ok(self.launch_strided(Key::BinaryPacked(op), lhs.layout.shape(), &operands)?.ok().map(|()| Arc::new(out) as Storage))
    }

    pub(crate) fn compare_op(&self, op: CmpOp, lhs: Strided, rhs: Strided) -> Result<Storage> {
        let dtype = lhs.dtype;
        let out = self.output(DType::Bool, lhs.layout.numel())?;
        let operands = [self.operand(&lhs), self.operand(&rhs), self.dense_out(&out)];
        if let Err(why) = self.launch_strided(Key::Compare(op, dtype), lhs.layout.shape(), &operands)? {
            return self.fallback1(format!("compare {op:?} ({dtype})"), why, &[lhs, rhs], DType::Bool, |cpu, v| cpu.compare(op, v[0], v[1]));
        }
        Ok(Arc::new(out))
    }

    pub(crate) fn select_op(&self, cond: Strided, on_true: Strided, on_false: Strided) -> Result<Storage> {
        let dtype = on_true.dtype;
        let out = self.output(dtype, cond.layout.numel())?;
        let operands = [self.operand(&cond), self.operand(&on_true), self.operand(&on_false), self.dense_out(&out)];
        if let Err(why) = self.launch_strided(Key::Select(dtype), cond.layout.shape(), &operands)? {
            return self.fallback1(format!("select ({dtype})"), why, &[cond, on_true, on_false], dtype, |cpu, v| cpu.select(v[0], v[1], v[2]));
        }
        Ok(Arc::new(out))
    }
}

#[cfg(test)]
mod tests {
    use super::{f64_parts, Key};
    use crate::launch::strided;
    use liandan_tensor::{DType, Layout};

    #[test]
    fn copies_dense_in_fours_along_their_inner_axis_take_vec4s() {
        // One chunk of an [N=2, L=5, 3E=48] projection split into H=2 heads of 8: [2, 2, 5, 8].
        let heads = |offset: usize, hd: usize| Layout::new(vec![2, 2, 5, hd], vec![5 * 48, hd, 48, 1], offset);
        let meta = |src: Layout| strided(src.numel(), 0, &[src.clone(), Layout::contiguous(src.shape())]).unwrap();
        let (key, m) = Key::Copy(DType::F16).runs4(&meta(heads(16, 8)), 2).expect("runs of four");
        assert_eq!(key, Key::CopyRuns(DType::F16));
        // Counted in fours: 40 vec4s over [2, 2, 5, 2], the source's strides 60, 2, 12, 1 from 4.
        assert_eq!(m, meta(Layout::new(vec![2, 2, 5, 2], vec![60, 2, 12, 1], 4)));
        assert!(Key::Copy(DType::F32).runs4(&meta(heads(0, 8)), 2).is_some());
        assert!(Key::Copy(DType::F32).runs4(&meta(heads(2, 8)), 2).is_none(), "an offset off the fours");
        assert!(Key::Copy(DType::F32).runs4(&meta(heads(0, 6)), 2).is_none(), "rows of six");
        assert!(Key::Copy(DType::BF16).runs4(&meta(heads(0, 8)), 2).is_none(), "bf16 is packed");
        let transposed = Layout::contiguous(&[8, 8]).permute(&[1, 0]).unwrap();
        assert!(Key::Copy(DType::F32).runs4(&meta(transposed), 2).is_none(), "a transposed read");
    }

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
