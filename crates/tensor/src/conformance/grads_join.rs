//! The joining of the gradients that arrive for one tensor during backward
//! (`autograd/join.rs`) against the sums it stands for: narrow pieces laid into zeros and
//! added, products' shares of a shared operand's gradient computed one by one and added, and
//! dense gradients summed, in the input's dtype, with errors that name the rule.

use super::{assert_close, values};
use crate::autograd::{defer, Arrived, Pending, Piece};
use crate::{DType, Device, Tensor};

fn t(d: &Device, shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_f64s(&values(shape.iter().product(), seed), shape, DType::F32, d).unwrap()
}

/// A leaf of `shape` that requires grad (what the engine gathers gradients for).
fn leaf(d: &Device, shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, d).unwrap().requires_grad_(true).unwrap()
}

/// `grad` laid into zeros of `shape` at `start` along `dim`, as host values (the padded rule).
fn padded(shape: &[usize], dim: usize, start: usize, grad: &Tensor) -> Vec<f64> {
    let (g, gs) = (grad.to_vec_f64().unwrap(), grad.shape().to_vec());
    let mut out = vec![0.0; shape.iter().product()];
    for (i, v) in g.iter().enumerate() {
        // Row-major index of element i of `grad`, moved by `start` along `dim`.
        let (mut rest, mut at, mut stride) = (i, 0, 1);
        for k in (0..gs.len()).rev() {
            let coord = rest % gs[k] + if k == dim { start } else { 0 };
            rest /= gs[k];
            at += coord * stride;
            stride *= shape[k];
        }
        out[at] += v;
    }
    out
}

/// Disjoint, overlapping and crossing pieces (along both dims, with gaps at either end) join
/// into the sum of their padded selves; a lone piece as large as the tensor is handed over as
/// it is, with no op.
pub fn pieces(d: &Device) {
    let x = leaf(d, &[6, 4]);
    let cuts = [(0, 0, 2), (0, 3, 1), (0, 1, 3), (1, 1, 2), (0, 5, 1)];
    let mut pending = Pending::default();
    let mut want = vec![0.0; 24];
    for (k, &(dim, start, len)) in cuts.iter().enumerate() {
        let mut shape = vec![6, 4];
        shape[dim] = len;
        let grad = t(d, &shape, 10 + k as u64);
        want.iter_mut().zip(padded(&[6, 4], dim, start, &grad)).for_each(|(w, p)| *w += p);
        pending.add_piece(&x, Piece { dim, start, grad, from: k as u64 }).unwrap();
    }
    let got = pending.take(x.id()).expect("pieces arrived").join(&x, None, &mut None).unwrap();
    assert_close("joined pieces", &got.to_vec_f64().unwrap(), &want, 1e-6, 1e-6);
    assert!(pending.take(x.id()).is_none(), "taking empties what arrived");

    let whole = t(d, &[6, 4], 20);
    let mut pending = Pending::default();
    pending.add_piece(&x, Piece { dim: 0, start: 0, grad: whole.clone(), from: 0 }).unwrap();
    let joined = pending.take(x.id()).unwrap().join(&x, None, &mut None).unwrap();
    assert!(std::sync::Arc::ptr_eq(&joined.storage(), &whole.storage()), "a piece that is the whole gradient is not copied");
}

/// The shares of products `a_t @ b` join into `sum_t a_t^T g_t`, one product: for `b` a
/// row-major matrix, and for `b` the transpose of one (a linear layer's weight), whose
/// gradient comes back row-major for the weight.
pub fn products(d: &Device) {
    for transposed in [false, true] {
        let b = if transposed { leaf(d, &[5, 3]).t().unwrap() } else { leaf(d, &[3, 5]) };
        let mut pending = Pending::default();
        let mut want = vec![0.0; 15];
        for k in 0..3u64 {
            let (a, g) = (t(d, &[2, 3], 30 + k), t(d, &[2, 5], 40 + k));
            let (a_v, g_v) = (a.to_vec_f64().unwrap(), g.to_vec_f64().unwrap());
            for (i, j, r) in (0..3).flat_map(|i| (0..5).flat_map(move |j| (0..2).map(move |r| (i, j, r)))) {
                want[i * 5 + j] += a_v[r * 3 + i] * g_v[r * 5 + j];
            }
            let (grads, piece) = defer(&g, &[a, b.clone()], k).unwrap();
            assert!(grads[1].is_none(), "the right-hand gradient waits for its turn");
            pending.add_product(&b, piece);
        }
        let got = pending.take(b.id()).unwrap().join(&b, None, &mut None).unwrap();
        assert_close(&format!("joined products (b transposed: {transposed})"), &got.to_vec_f64().unwrap(), &want, 1e-5, 1e-5);
        assert_eq!(got.shape(), &[3, 5]);
        if transposed {
            assert!(got.t().unwrap().is_contiguous(), "a transposed weight's gradient is row-major for the weight");
        }
    }
}

/// Dense gradients, pieces and products that arrive for one tensor join into their sum; a
/// gradient of another dtype is cast to the input's; one for an input that wants none is
/// dropped; one of the wrong shape is an error naming the rule.
pub fn mixed(d: &Device) {
    let b = leaf(d, &[3, 5]);
    let mut pending = Pending::default();
    let (dense, other) = (t(d, &[3, 5], 50), t(d, &[3, 5], 51).to_dtype(DType::F64).unwrap());
    pending.add("mul", &b, dense.clone()).unwrap();
    pending.add("mul", &b, other.clone()).unwrap();
    let piece = t(d, &[1, 5], 52);
    pending.add_piece(&b, Piece { dim: 0, start: 2, grad: piece.clone(), from: 0 }).unwrap();
    let (a, g) = (t(d, &[2, 3], 53), t(d, &[2, 5], 54));
    let (_, share) = defer(&g, &[a.clone(), b.clone()], 1).unwrap();
    pending.add_product(&b, share);
    let arrived: Arrived = pending.take(b.id()).unwrap();
    assert!(arrived.pieces_alone().is_err(), "pieces beside other gradients are joined");
    let mut pending = Pending::default();
    pending.add("mul", &b, dense.clone()).unwrap();
    pending.add("mul", &b, other.clone()).unwrap();
    pending.add_piece(&b, Piece { dim: 0, start: 2, grad: piece.clone(), from: 0 }).unwrap();
    let (_, share) = defer(&g, &[a.clone(), b.clone()], 1).unwrap();
    pending.add_product(&b, share);
    let got = pending.take(b.id()).unwrap().join(&b, None, &mut None).unwrap();
    assert_eq!(got.dtype(), DType::F32, "a gradient takes its input's dtype");
    let product = a.t().unwrap().matmul(&g).unwrap().to_vec_f64().unwrap();
    let (dv, ov, pv) = (dense.to_vec_f64().unwrap(), other.to_dtype(DType::F32).unwrap().to_vec_f64().unwrap(), padded(&[3, 5], 0, 2, &piece));
    let want: Vec<f64> = (0..15).map(|i| dv[i] + ov[i] + pv[i] + product[i]).collect();
    assert_close("dense, pieces and products joined", &got.to_vec_f64().unwrap(), &want, 1e-5, 1e-5);

    let plain = t(d, &[3, 5], 55);
    pending.add("mul", &plain, dense.clone()).unwrap();
    assert!(pending.take(plain.id()).is_none(), "a gradient for a tensor that wants none is dropped");
    let err = pending.add("mul", &b, t(d, &[5, 3], 56)).unwrap_err().to_string();
    assert!(err.contains("mul") && err.contains("[5, 3]"), "{err}");
}

/// An RNN's gate gradients arrive twice: as narrow pieces of its projected inputs and as the
/// `g` of its recurrent products' shares. Once the pieces are joined by rows, the products'
/// join reads those rows (a view of the joined gradient, in the order they lie there) and the
/// sum is still `sum_t a_t^T g_t`; tensors that are not one run of its rows are joined anew.
pub fn products_read_a_join(d: &Device) {
    let (x, b) = (leaf(d, &[3, 2, 5]), leaf(d, &[4, 5]));
    let g: Vec<Tensor> = (0..3).map(|k| t(d, &[2, 5], 60 + k)).collect();
    let mut pending = Pending::default();
    for (k, g) in g.iter().enumerate() {
        pending.add_piece(&x, Piece { dim: 0, start: k, grad: g.reshape(&[1, 2, 5]).unwrap(), from: k as u64 }).unwrap();
    }
    let mut last = None;
    let joined = pending.take(x.id()).unwrap().join(&x, None, &mut last).unwrap();
    let rows = last.as_ref().expect("a join by rows is kept");

    let (view, order) = rows.rows_of(&[&g[2], &g[1]]).expect("the last two pieces are one run of rows");
    assert!(std::sync::Arc::ptr_eq(&view.storage(), &joined.storage()), "the rows are read, not copied");
    assert_eq!((view.shape(), order.as_slice()), (&[4, 5][..], &[1, 0][..]));
    let copy = g[1].mul_scalar(1.0).unwrap();
    assert!(rows.rows_of(&[&g[0], &g[2]]).is_none(), "rows with a gap between them are joined anew");
    assert!(rows.rows_of(&[&copy, &g[2]]).is_none(), "equal values elsewhere are not the join's rows");

    let mut want = vec![0.0; 20];
    for (k, g) in g.iter().enumerate().skip(1).rev() {
        let a = t(d, &[2, 4], 70 + k as u64);
        let (a_v, g_v) = (a.to_vec_f64().unwrap(), g.to_vec_f64().unwrap());
        for (i, j, r) in (0..4).flat_map(|i| (0..5).flat_map(move |j| (0..2).map(move |r| (i, j, r)))) {
            want[i * 5 + j] += a_v[r * 4 + i] * g_v[r * 5 + j];
        }
        let (_, piece) = defer(g, &[a, b.clone()], k as u64).unwrap();
        pending.add_product(&b, piece);
    }
    let got = pending.take(b.id()).unwrap().join(&b, None, &mut last).unwrap();
    assert_close("products over rows of a join", &got.to_vec_f64().unwrap(), &want, 1e-5, 1e-5);
}
