//! Fused kernels: the tensor crate's custom ops (`liandan_tensor::ops`) this backend runs in
//! one pass over memory instead of one pass per primitive (`liandan_tensor::custom` has the
//! contract; each is tested against its composite by the conformance suite). Halves compute in
//! f32 and round once, on store.

use std::any::{Any, TypeId};
use std::borrow::Cow;

use half::{bf16, f16};
use liandan_tensor::ops::{
    AddRelu, BatchNormBackward, BatchNormTrain, BceLoss, BceLossBackward, Gelu, GeluBackward, GruCell, GruCellBackward, LayerNorm, LayerNormBackward, LstmCell,
    LstmCellBackward, LstmSequence, LstmSequenceBackward, MatmulBias, MatmulWide, MaxPool2dBackward, Relu, ReluBackward, SoftmaxLastDim,
    SoftmaxLastDimBackward, SumRowsWide,
};
use liandan_tensor::{CustomKernel, DType, Result, Storage, Strided};
use num_traits::{Float, One, Zero};
use rayon::prelude::*;

use crate::fused_layer_norm::{layer_norm, layer_norm_backward};
use crate::fused_norm::{batch_norm_backward, batch_norm_train};
pub(crate) use crate::fused_rows::{rows, sum_by, sum_by2, Elem};
use crate::kernel::in_pieces;
pub(crate) use crate::kernel::slices;
use crate::storage::{alloc, alloc_overwritten, bad_dtype, CpuStorage, Real};
use crate::strided::{parallel, CHUNK};

/// Calls the generic kernel `$f::<T>` with `T` the float element type of the inputs.
macro_rules! per_float {
    ($v:expr, $op:expr, $f:ident $(, $arg:expr)?) => {
        match $v[0].dtype {
            DType::F32 => $f::<f32>($($arg,)? $v),
            DType::F64 => $f::<f64>($($arg,)? $v),
            DType::F16 => $f::<f16>($($arg,)? $v),
            DType::BF16 => $f::<bf16>($($arg,)? $v),
            other => Err(bad_dtype($op, other, "floating-point dtypes only")),
        }
    };
}

/// Calls the batch-norm kernel `$f::<T, P>`: `T` the activations' float type, `P` that of the
/// `[C]` operands (input `$params` on): `T` itself, or f32 beside a half (autocast's batch norm).
macro_rules! per_norm {
    ($v:expr, $params:expr, $f:ident, $op:expr, $name:expr) => {
        match ($v[0].dtype, $v.get($params).map_or($v[0].dtype, |p| p.dtype)) {
            (DType::F32, DType::F32) => $f::<f32, f32>($op, $v),
            (DType::F64, DType::F64) => $f::<f64, f64>($op, $v),
            (DType::F16, DType::F16) => $f::<f16, f16>($op, $v),
            (DType::BF16, DType::BF16) => $f::<bf16, bf16>($op, $v),
            (DType::F16, DType::F32) => $f::<f16, f32>($op, $v),
            (DType::BF16, DType::F32) => $f::<bf16, f32>($op, $v),
            (x, p) => Err(bad_dtype(
                $name,
                p,
                format!("[C] operands of {p} beside {x} activations: they take the activations' float type, or f32 beside f16 or bf16"),
            )),
        }
    };
}

/// A kernel of one of the tensor crate's unit ops (no parameters), by the op's type.
type Kernel = fn(&[Strided]) -> Result<Vec<CpuStorage>>;

/// The kernel for `op`, or `None` for the ops this backend leaves to their composites.
pub(crate) fn fused(op: &dyn CustomKernel, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
    if let Some(out) = crate::conv::fused(op, inputs) {
        return Some(store(out.map(|s| vec![s])));
    }
    if let Some(BatchNormTrain(o)) = op.downcast_ref() {
        return Some(store(per_norm!(inputs, 1, batch_norm_train, o, "batch_norm_train")));
    }
    if let Some(BatchNormBackward(o)) = op.downcast_ref() {
        return Some(store(per_norm!(inputs, 2, batch_norm_backward, o, "batch_norm_backward")));
    }
    if let Some(MaxPool2dBackward(w)) = op.downcast_ref() {
        return Some(store(crate::window::max_pool2d_backward(w, inputs).map(|s| vec![s])));
    }
    if let Some(o) = op.downcast_ref::<LstmSequence>() {
        return crate::fused_lstm::lstm_sequence(o, inputs).map(store);
    }
    if let Some(o) = op.downcast_ref::<LstmSequenceBackward>() {
        return crate::fused_lstm::lstm_sequence_backward(o, inputs).map(store);
    }
    if op.downcast_ref::<MatmulBias>().is_some() {
        return crate::matmul::matmul_bias(inputs).map(store);
    }
    if let Some(LayerNorm(o)) = op.downcast_ref() {
        return Some(store(per_float!(inputs, "layer_norm", layer_norm, o)));
    }
    if let Some(LayerNormBackward(o)) = op.downcast_ref() {
        return Some(store(per_float!(inputs, "layer_norm_backward", layer_norm_backward, o)));
    }
    let kernels: [(TypeId, Kernel); 15] = [
        (TypeId::of::<LstmCell>(), |v| per_float!(v, "lstm_cell", lstm_cell)),
        (TypeId::of::<LstmCellBackward>(), |v| per_float!(v, "lstm_cell_backward", lstm_cell_backward)),
        (TypeId::of::<GruCell>(), |v| per_float!(v, "gru_cell", gru_cell)),
        (TypeId::of::<GruCellBackward>(), |v| per_float!(v, "gru_cell_backward", gru_cell_backward)),
        (TypeId::of::<Relu>(), |v| per_float!(v, "relu", relu, "relu")),
        (TypeId::of::<ReluBackward>(), |v| per_float!(v, "relu_backward", relu, "relu_backward")),
        (TypeId::of::<AddRelu>(), |v| per_float!(v, "add_relu", add_relu)),
        (TypeId::of::<Gelu>(), |v| per_float!(v, "gelu", gelu)),
        (TypeId::of::<GeluBackward>(), |v| per_float!(v, "gelu_backward", gelu_backward)),
        (TypeId::of::<SoftmaxLastDim>(), |v| per_float!(v, "softmax_last_dim", softmax_last_dim)),
        (TypeId::of::<SoftmaxLastDimBackward>(), |v| per_float!(v, "softmax_last_dim_backward", softmax_last_dim_backward)),
        (TypeId::of::<BceLoss>(), |v| per_float!(v, "bce_loss", bce_loss)),
        (TypeId::of::<BceLossBackward>(), |v| per_float!(v, "bce_loss_backward", bce_loss_backward)),
        (TypeId::of::<MatmulWide>(), crate::matmul::matmul_wide),
        (TypeId::of::<SumRowsWide>(), crate::reduce::sum_rows_wide),
    ];
    let id = (op as &dyn Any).type_id();
    let (_, kernel) = kernels.iter().find(|(t, _)| *t == id)?;
    Some(store(kernel(inputs)))
}

fn store(outs: Result<Vec<CpuStorage>>) -> Result<Vec<Storage>> {
    outs.map(|outs| outs.into_iter().map(CpuStorage::into_storage).collect())
}

/// `xs` widened (a copy for f32 and f64, cheap beside the row kernels it feeds).
fn wide<T: Elem>(xs: &[T]) -> Vec<T::Acc> {
    xs.iter().map(|x| x.widen()).collect()
}

/// `wide` rounded into `out`.
fn narrow_into<T: Elem>(out: &mut [T], wide: &[T::Acc]) {
    out.iter_mut().zip(wide).for_each(|(o, &w)| *o = T::narrow(w));
}

/// `xs` as accumulator elements: borrowed in f32 and f64, a widened copy in the halves.
fn wide_row<T: Elem>(xs: &[T]) -> Cow<'_, [T::Acc]> {
    T::as_acc(xs).map_or_else(|| Cow::Owned(wide(xs)), Cow::Borrowed)
}

/// Runs `f` on `a` and `b` as accumulator rows to write: in place in f32 and f64, through
/// widened copies rounded back in the halves.
fn write_rows<T: Elem>(a: &mut [T], b: &mut [T], f: impl FnOnce(&mut [T::Acc], &mut [T::Acc])) {
    if T::as_acc(a).is_some() {
        let (a, b) = (T::as_acc_mut(a).expect("checked above"), T::as_acc_mut(b).expect("one type"));
        return f(a, b);
    }
    let (mut wa, mut wb) = (wide(a), wide(b));
    f(&mut wa, &mut wb);
    narrow_into(a, &wa);
    narrow_into(b, &wb);
}

/// The gates of row `r` widened: `gates`'s (borrowed in f32 and f64), plus `more`'s (the second
/// term of `lstm_cell_sum`) with the sum rounded to `T` as the add's kernel would round it.
fn gate_row<'a, T: Elem>(gates: &'a [T], more: Option<&[T]>, r: usize, width: usize) -> Cow<'a, [T::Acc]> {
    let row = wide_row(&gates[r * width..][..width]);
    let Some(more) = more else { return row };
    let more = &more[r * width..][..width];
    Cow::Owned(row.iter().zip(more).map(|(&a, b)| T::narrow(a + b.widen()).widen()).collect())
}

/// `LstmCell`: gates `[N, 4H]`, c `[N, H]` (and a second gate term) to `[2, N, H]`
/// (h', then c'), row by row on the row kernels of [`Real`] (vectorized in f32).
fn lstm_cell<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("lstm_cell", inputs)?;
    let (gates, c, more) = (&v[0], &v[1], v.get(2).map(|m| &m[..]));
    let (n, h) = (inputs[1].layout.shape()[0], inputs[1].layout.shape()[1]);
    let mut out = alloc_overwritten("lstm_cell", 2 * n * h, T::default())?;
    let (hs, cs) = out.split_at_mut(n * h);
    rows(hs, h, cs, h, |r, h_row, c_row| {
        let (gates, c) = (gate_row(gates, more, r, 4 * h), wide_row(&c[r * h..][..h]));
        write_rows(h_row, c_row, |h_new, c_new| T::Acc::lstm_cell_row(&gates, &c, h_new, c_new));
    });
    Ok(vec![T::wrap(out.into())])
}

/// `LstmCellBackward`: gates, c, out `[2, N, H]`, dh' and dc' `[N, H]` (and the
/// second gate term) to dgates `[N, 4H]` and dc `[N, H]`.
fn lstm_cell_backward<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("lstm_cell_backward", inputs)?;
    let (gates, c, out, dh, dc_new, more) = (&v[0], &v[1], &v[2], &v[3], &v[4], v.get(5).map(|m| &m[..]));
    let (n, h) = (inputs[1].layout.shape()[0], inputs[1].layout.shape()[1]);
    let mut dgates = alloc_overwritten("lstm_cell_backward", n * 4 * h, T::default())?;
    let mut dc = alloc_overwritten("lstm_cell_backward", n * h, T::default())?;
    rows(&mut dgates, 4 * h, &mut dc, h, |r, dg_row, dc_row| {
        let at = r * h..(r + 1) * h;
        let gates = gate_row(gates, more, r, 4 * h);
        let (c, c_new) = (wide_row(&c[at.clone()]), wide_row(&out[n * h..][at.clone()]));
        let (dh, dc_new) = (wide_row(&dh[at.clone()]), wide_row(&dc_new[at]));
        write_rows(dg_row, dc_row, |dg, dcw| T::Acc::lstm_cell_backward_row(&gates, &c, &c_new, &dh, &dc_new, dg, dcw));
    });
    Ok(vec![T::wrap(dgates.into()), T::wrap(dc.into())])
}

/// `GruCell`: x_gates and h_gates `[N, 3H]` and h `[N, H]` to h' `[N, H]`, row by
/// row on [`Real`]'s row kernels, in `T::Acc`.
fn gru_cell<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("gru_cell", inputs)?;
    let (gx, gh, h) = (&v[0], &v[1], &v[2]);
    let (n, width) = (inputs[2].layout.shape()[0], inputs[2].layout.shape()[1]);
    if width == 0 {
        return Ok(vec![T::wrap(Vec::new().into())]);
    }
    let mut out = alloc("gru_cell", n * width, T::default())?;
    let body = |(r, h_row): (usize, &mut [T])| {
        let mut h_new = wide(h_row);
        let row = |xs: &[T], w: usize| wide(&xs[r * w..][..w]);
        T::Acc::gru_cell_row(&row(gx, 3 * width), &row(gh, 3 * width), &row(h, width), &mut h_new);
        narrow_into(h_row, &h_new);
    };
    if parallel(out.len()) {
        out.par_chunks_mut(width).enumerate().for_each(body);
    } else {
        out.chunks_mut(width).enumerate().for_each(body);
    }
    Ok(vec![T::wrap(out.into())])
}

/// `GruCellBackward`: x_gates, h_gates, h and dh' to the gradients of x_gates, h_gates
/// and h.
fn gru_cell_backward<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("gru_cell_backward", inputs)?;
    let (gx, gh, h, dh_new) = (&v[0], &v[1], &v[2], &v[3]);
    let (n, width) = (inputs[2].layout.shape()[0], inputs[2].layout.shape()[1]);
    if width == 0 {
        return Ok(vec![T::wrap(Vec::new().into()), T::wrap(Vec::new().into()), T::wrap(Vec::new().into())]);
    }
    let (mut dgx, mut dgh, mut dh) = (
        alloc("gru_cell_backward", n * 3 * width, T::default())?,
        alloc("gru_cell_backward", n * 3 * width, T::default())?,
        alloc("gru_cell_backward", n * width, T::default())?,
    );
    // Row r of dgx, of dgh and of dh.
    type Rows<'a, U> = (usize, ((&'a mut [U], &'a mut [U]), &'a mut [U]));
    let body = |(r, ((x_row, y_row), dh_row)): Rows<'_, T>| {
        let row = |xs: &[T], w: usize| wide(&xs[r * w..][..w]);
        let (mut dx, mut dy, mut dhw) = (wide(x_row), wide(y_row), wide(dh_row));
        T::Acc::gru_cell_backward_row(&row(gx, 3 * width), &row(gh, 3 * width), &row(h, width), &row(dh_new, width), &mut dx, &mut dy, &mut dhw);
        narrow_into(x_row, &dx);
        narrow_into(y_row, &dy);
        narrow_into(dh_row, &dhw);
    };
    if parallel(7 * dh.len()) {
        dgx.par_chunks_mut(3 * width).zip(dgh.par_chunks_mut(3 * width)).zip(dh.par_chunks_mut(width)).enumerate().for_each(body);
    } else {
        dgx.chunks_mut(3 * width).zip(dgh.chunks_mut(3 * width)).zip(dh.chunks_mut(width)).enumerate().for_each(body);
    }
    Ok(vec![T::wrap(dgx.into()), T::wrap(dgh.into()), T::wrap(dh.into())])
}

/// Elements per block in [`wide_blocks`]: small enough that the widened copies stay in L1.
const BLOCK: usize = 512;

/// Runs `f(wide_ins, wide_out)` over blocks of `ins` (slices as long as `out`) widened to
/// `T::Acc`, then narrows the block into `out`; in parallel pieces when large. The widening is
/// a copy for f32 and f64, cheap beside the `exp`/`erf` the callers run.
pub(crate) fn wide_blocks<T: Elem, const K: usize>(ins: [&[T]; K], out: &mut [T], f: impl Fn([&[T::Acc]; K], &mut [T::Acc]) + Sync) {
    let piece = |start: usize, o: &mut [T]| {
        let zero = <T::Acc as num_traits::Zero>::zero();
        let mut wide = [[zero; BLOCK]; K];
        let mut res = [zero; BLOCK];
        for (b, o) in o.chunks_mut(BLOCK).enumerate() {
            let at = start + b * BLOCK;
            for (w, x) in wide.iter_mut().zip(ins) {
                w.iter_mut().zip(&x[at..at + o.len()]).for_each(|(w, x)| *w = x.widen());
            }
            f(std::array::from_fn(|k| &wide[k][..o.len()]), &mut res[..o.len()]);
            o.iter_mut().zip(&res).for_each(|(o, &r)| *o = T::narrow(r));
        }
    };
    if parallel(out.len()) {
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, o)| piece(c * CHUNK, o));
    } else {
        piece(0, out);
    }
}

/// `Relu` (`x > 0 ? x : 0`) and `ReluBackward` (`y > 0 ? dy : 0`): the last
/// input where the first is positive, else 0, in the element type (exact in every dtype).
fn relu<T: Elem>(op: &'static str, inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>(op, inputs)?;
    let (test, value) = (&v[0][..], &v[v.len() - 1][..]);
    let mut out = vec![alloc_overwritten(op, test.len(), T::default())?];
    let zero = T::default();
    in_pieces(&[test, value], &mut out, |ins, outs| {
        outs[0].iter_mut().zip(ins[0].iter().zip(ins[1])).for_each(|(o, (&t, &x))| *o = if t > zero { x } else { zero });
    });
    Ok(vec![T::wrap(out.remove(0).into())])
}

/// `AddRelu`: `relu(a + b)`, the sum rounded to `T` first, as the two ops round it.
fn add_relu<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("add_relu", inputs)?;
    let mut out = vec![alloc_overwritten("add_relu", v[0].len(), T::default())?];
    let zero = T::default();
    in_pieces(&[&v[0][..], &v[1][..]], &mut out, |ins, outs| {
        outs[0].iter_mut().zip(ins[0].iter().zip(ins[1])).for_each(|(o, (&a, &b))| {
            let s = a + b;
            *o = if s > zero { s } else { zero };
        });
    });
    Ok(vec![T::wrap(out.remove(0).into())])
}

/// `Gelu`: `x Phi(x)`.
fn gelu<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("gelu", inputs)?;
    let mut y = alloc_overwritten("gelu", v[0].len(), T::default())?;
    wide_blocks([&v[0]], &mut y, |[x], y| T::Acc::gelu_slice(x, y));
    Ok(vec![T::wrap(y.into())])
}

/// `GeluBackward`: `dy (Phi(x) + x phi(x))`.
fn gelu_backward<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("gelu_backward", inputs)?;
    let mut dx = alloc_overwritten("gelu_backward", v[0].len(), T::default())?;
    wide_blocks([&v[0], &v[1]], &mut dx, |[x, dy], dx| T::Acc::gelu_backward_slice(x, dy, dx));
    Ok(vec![T::wrap(dx.into())])
}

/// The binary cross-entropy's logs for a block of probabilities `p` (at most [`BLOCK`]):
/// `1 - p`, and the natural logs of `p` and of `1 - p` where those are positive (1's log, 0,
/// elsewhere, which the callers replace).
struct BceLogs<A> {
    q: [A; BLOCK],
    ln_p: [A; BLOCK],
    ln_q: [A; BLOCK],
}

impl<A: Real> BceLogs<A> {
    fn new(p: &[A]) -> BceLogs<A> {
        let ln_where_positive = |x: &[A], out: &mut [A]| {
            let mut safe = [A::one(); BLOCK];
            safe.iter_mut().zip(x).for_each(|(s, &x)| *s = if x > A::zero() { x } else { A::one() });
            A::ln_slice(&safe[..x.len()], out);
        };
        let n = p.len();
        let mut logs = BceLogs { q: [A::zero(); BLOCK], ln_p: [A::zero(); BLOCK], ln_q: [A::zero(); BLOCK] };
        logs.q.iter_mut().zip(p).for_each(|(q, &p)| *q = A::one() - p);
        ln_where_positive(p, &mut logs.ln_p[..n]);
        ln_where_positive(&logs.q[..n], &mut logs.ln_q[..n]);
        logs
    }
}

/// The floor of the clamped log, -100 (PyTorch's).
fn log_floor<A: Real>() -> A {
    <A as crate::scalar::Scalar>::from_f64(-100.0)
}

/// `BceLoss`: `-(y log_(p) + (1 - y) log_(1 - p))`, `log_` the log clamped at -100
/// (and -100 at and below 0), as the composite's `clamped_log`.
fn bce_loss<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("bce_loss", inputs)?;
    let mut out = alloc("bce_loss", v[0].len(), T::default())?;
    wide_blocks([&v[0], &v[1]], &mut out, |[p, y], l| {
        let (zero, one, floor) = (T::Acc::zero(), T::Acc::one(), log_floor::<T::Acc>());
        let BceLogs { q, ln_p, ln_q } = BceLogs::new(p);
        let clamp = |x: T::Acc, ln: T::Acc| if x > zero { ln.max(floor) } else { floor };
        for i in 0..p.len() {
            l[i] = -(y[i] * clamp(p[i], ln_p[i]) + (one - y[i]) * clamp(q[i], ln_q[i]));
        }
    });
    Ok(vec![T::wrap(out.into())])
}

/// `BceLossBackward`: `g ((1 - y) log_'(1 - p) - y log_'(p))`, `log_'(x)` being `1 / x`
/// where `x > 0` and `ln x >= -100` and 0 elsewhere (the composite's rule).
fn bce_loss_backward<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("bce_loss_backward", inputs)?;
    let mut out = alloc("bce_loss_backward", v[0].len(), T::default())?;
    wide_blocks([&v[0], &v[1], &v[2]], &mut out, |[p, y, g], d| {
        let (zero, one, floor) = (T::Acc::zero(), T::Acc::one(), log_floor::<T::Acc>());
        let BceLogs { q, ln_p, ln_q } = BceLogs::new(p);
        let slope = |x: T::Acc, ln: T::Acc| if x > zero && ln >= floor { one / x } else { zero };
        for i in 0..p.len() {
            d[i] = g[i] * ((one - y[i]) * slope(q[i], ln_q[i]) - y[i] * slope(p[i], ln_p[i]));
        }
    });
    Ok(vec![T::wrap(out.into())])
}

/// Runs `f(rows_in, rows_out, scratch)` over whole rows of `width` (the inputs' rows at the
/// same places), in parallel pieces when large; `scratch` is one row of the wide type, made
/// once per piece.
fn row_blocks<T: Elem>(ins: &[&[T]], out: &mut [T], width: usize, f: impl Fn(&[&[T]], &mut [T], &mut [T::Acc]) + Sync)
where
    T::Acc: Default + Clone + Send,
{
    if width == 0 || out.is_empty() {
        return;
    }
    let rows_per = (CHUNK / width).max(1);
    let piece = |p: usize, o: &mut [T]| {
        let span = p * rows_per * width..p * rows_per * width + o.len();
        let parts: Vec<&[T]> = ins.iter().map(|x| &x[span.clone()]).collect();
        f(&parts, o, &mut vec![T::Acc::default(); width]);
    };
    if parallel(out.len()) {
        out.par_chunks_mut(rows_per * width).enumerate().for_each(|(p, o)| piece(p, o));
    } else {
        out.chunks_mut(rows_per * width).enumerate().for_each(|(p, o)| piece(p, o));
    }
}

/// `SoftmaxLastDim`: a row's maximum (NaN wins, as the composite's `max`), its
/// shifted exponentials kept wide, their sum, then one scaled store.
fn softmax_last_dim<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("softmax_last_dim", inputs)?;
    let width = inputs[0].layout.shape().last().copied().unwrap_or(1);
    let mut y = alloc_overwritten("softmax", v[0].len(), T::default())?;
    row_blocks(&[&v[0]], &mut y, width, |ins, out, e| {
        for (x, y) in ins[0].chunks_exact(width).zip(out.chunks_exact_mut(width)) {
            let max = x.iter().map(|a| a.widen()).fold(x[0].widen(), |m, a| if a > m || a.is_nan() { a } else { m });
            e.iter_mut().zip(x).for_each(|(e, a)| *e = a.widen());
            T::Acc::exp_shifted_slice(e, max);
            let inv = sum_by(e, |&e| e).recip();
            y.iter_mut().zip(e.iter()).for_each(|(y, &e)| *y = T::narrow(e * inv));
        }
    });
    Ok(vec![T::wrap(y.into())])
}

/// `SoftmaxLastDimBackward`: `y (dy - sum(dy y))` row by row.
fn softmax_last_dim_backward<T: Elem>(inputs: &[Strided]) -> Result<Vec<CpuStorage>> {
    let v = slices::<T>("softmax_last_dim_backward", inputs)?;
    let width = inputs[0].layout.shape().last().copied().unwrap_or(1);
    let mut dx = alloc_overwritten("softmax_backward", v[0].len(), T::default())?;
    row_blocks(&[&v[0], &v[1]], &mut dx, width, |ins, out, _| {
        for ((y, dy), dx) in ins[0].chunks_exact(width).zip(ins[1].chunks_exact(width)).zip(out.chunks_exact_mut(width)) {
            let dot = sum_by2(y, dy, |y, g| y.widen() * g.widen());
            dx.iter_mut().zip(y.iter().zip(dy)).for_each(|(dx, (&y, &g))| *dx = T::narrow(y.widen() * (g.widen() - dot)));
        }
    });
    Ok(vec![T::wrap(dx.into())])
}
