//! Gradient checks of views (reshape, permute, narrow, expand, squeeze, ...) and of the
//! indexing ops (gather, scatter_add, index_select, cat, stack, embedding).

use super::grads::{check_grads, index, leaf, strided_leaf};
use crate::{Device, Tensor};

pub fn reshape_flatten(d: &Device) {
    // A non-contiguous reshape copies first: Identity then Reshape.
    check_grads("reshape strided", &[strided_leaf(d, &[3, 7], 1)], |x| x[0].reshape(&[7, 3])?.sin(), 1e-7, 1e-6);
    check_grads("reshape to [1]", &[leaf(d, &[1, 1], 2)], |x| x[0].reshape(&[1])?.exp(), 1e-6, 1e-6);
    check_grads("flatten(1, 2)", &[leaf(d, &[2, 3, 5], 3)], |x| x[0].flatten(1usize, 2usize)?.mul(&x[0].reshape(&[2, 15])?), 1e-7, 1e-6);
    check_grads("flatten strided", &[strided_leaf(d, &[2, 3, 5], 4)], |x| x[0].flatten(0usize, -2isize)?.exp(), 1e-6, 1e-6);
}

pub fn permute_transpose(d: &Device) {
    // Multiplying by a fixed tensor makes the element order matter to the loss.
    let c = leaf(d, &[5, 2, 3], 5);
    check_grads("permute", &[leaf(d, &[2, 3, 5], 6)], move |x| x[0].permute(&[2, 0, 1])?.mul(&c), 1e-7, 1e-6);
    check_grads("transpose strided", &[strided_leaf(d, &[4, 5, 3], 7)], |x| x[0].transpose(0usize, -1isize)?.sin(), 1e-7, 1e-6);
    check_grads("t", &[leaf(d, &[7, 3], 8)], |x| x[0].t()?.cos(), 1e-7, 1e-6);
}

pub fn narrow_select(d: &Device) {
    check_grads("narrow middle", &[leaf(d, &[5, 7], 9)], |x| x[0].narrow(1usize, 2, 3)?.square(), 1e-7, 1e-6);
    check_grads("narrow strided", &[strided_leaf(d, &[5, 7], 10)], |x| x[0].narrow(0usize, 1, 3)?.sin(), 1e-7, 1e-6);
    check_grads("narrow prefix", &[leaf(d, &[33], 11)], |x| x[0].narrow(0usize, 0, 32)?.exp(), 1e-6, 1e-6);
    check_grads("select middle", &[leaf(d, &[4, 5, 3], 12)], |x| x[0].select(1usize, 2)?.square(), 1e-7, 1e-6);
    check_grads("select last", &[strided_leaf(d, &[4, 3], 13)], |x| x[0].select(-1isize, 2)?.sin(), 1e-7, 1e-6);
}

pub fn split_chunk(d: &Device) {
    check_grads("split middle piece", &[leaf(d, &[7, 4], 14)], |x| x[0].split(3, 0usize)?[1].square(), 1e-7, 1e-6);
    check_grads("split short last piece", &[leaf(d, &[7, 4], 15)], |x| x[0].split(3, 0usize)?[2].square(), 1e-7, 1e-6);
    check_grads("chunk", &[strided_leaf(d, &[7, 5], 16)], |x| x[0].chunk(3, 1usize)?[1].exp(), 1e-6, 1e-6);
}

pub fn expand(d: &Device) {
    check_grads("expand size-1 and new dims", &[leaf(d, &[3, 1], 17)], |x| x[0].expand(&[2, 3, 4])?.sin(), 1e-7, 1e-6);
    check_grads("expand [1] -> [33]", &[leaf(d, &[1], 18)], |x| x[0].expand(&[33])?.sin(), 1e-6, 1e-6);
    check_grads("expand strided", &[strided_leaf(d, &[3, 1, 7], 19)], |x| x[0].expand(&[2, 3, 5, 7])?.cos(), 1e-6, 1e-6);
}

pub fn squeeze_unsqueeze(d: &Device) {
    check_grads("squeeze/unsqueeze", &[leaf(d, &[3, 1, 5], 20)], |x| x[0].squeeze(1usize)?.unsqueeze(0usize)?.unsqueeze(-1isize)?.sin(), 1e-7, 1e-6);
    check_grads("unsqueeze strided", &[strided_leaf(d, &[7, 3], 21)], |x| x[0].unsqueeze(1usize)?.expand(&[7, 2, 3])?.square(), 1e-7, 1e-6);
}

pub fn contiguous(d: &Device) {
    check_grads("contiguous strided", &[strided_leaf(d, &[5, 7], 22)], |x| x[0].contiguous()?.square(), 1e-7, 1e-6);
    check_grads("contiguous of a permute", &[leaf(d, &[3, 7], 23)], |x| x[0].t()?.contiguous()?.sin(), 1e-7, 1e-6);
}

pub fn gather(d: &Device) {
    // Repeated indices: the gradient adds up at the repeated source element.
    let idx = index(d, &[0, 4, 4, 1, 1, 1, 3, 0, 2, 2, 4, 0], &[4, 3]);
    check_grads("gather dim 1", &[leaf(d, &[4, 5], 24)], move |x| x[0].gather(1usize, &idx), 1e-7, 1e-6);
    let idx = index(d, &[3, 0, 3, 1, 2, 0, 0, 0, 3, 3], &[2, 5]);
    check_grads("gather dim 0 strided", &[strided_leaf(d, &[4, 5], 25)], move |x| x[0].gather(0usize, &idx)?.square(), 1e-7, 1e-6);
}

pub fn scatter_add(d: &Device) {
    let idx = index(d, &[0, 4, 4, 1, 1, 1, 3, 0, 2, 2, 4, 0], &[4, 3]);
    let (dst, src) = (leaf(d, &[4, 5], 26), leaf(d, &[4, 3], 27));
    check_grads("scatter_add dim 1", &[dst, src], move |x| x[0].scatter_add(1usize, &idx, &x[1])?.square(), 1e-7, 1e-6);
    let idx = index(d, &[2, 0, 1, 2, 2, 2, 0, 0, 1, 0, 2, 1, 0, 0, 0, 0, 2, 1, 1, 2], &[5, 4]);
    let (dst, src) = (strided_leaf(d, &[3, 4], 28), strided_leaf(d, &[5, 4], 29));
    check_grads("scatter_add dim 0 strided", &[dst, src], move |x| x[0].scatter_add(0usize, &idx, &x[1])?.sin(), 1e-7, 1e-6);
}

pub fn index_select(d: &Device) {
    let idx = index(d, &[0, 3, 3, 1, 0, 4, 3], &[7]);
    check_grads("index_select dim 0", &[leaf(d, &[5, 3], 30)], move |x| x[0].index_select(0usize, &idx)?.square(), 1e-7, 1e-6);
    let idx = index(d, &[4, 4, 0, 2], &[4]);
    check_grads("index_select dim 1 strided", &[strided_leaf(d, &[3, 5], 31)], move |x| x[0].index_select(1usize, &idx)?.sin(), 1e-7, 1e-6);
}

pub fn cat(d: &Device) {
    let parts = [leaf(d, &[3, 2], 32), strided_leaf(d, &[3, 4], 33), leaf(d, &[3, 1], 34)];
    check_grads("cat dim 1", &parts, |x| Tensor::cat(&[&x[0], &x[1], &x[2]], 1usize)?.square(), 1e-7, 1e-6);
    let parts = [leaf(d, &[1, 3], 35), leaf(d, &[7, 3], 36), strided_leaf(d, &[2, 3], 37)];
    check_grads("cat dim 0", &parts, |x| Tensor::cat(&[&x[0], &x[1], &x[2]], 0usize)?.sin(), 1e-7, 1e-6);
}

pub fn stack(d: &Device) {
    let parts = [leaf(d, &[2, 3], 38), strided_leaf(d, &[2, 3], 39), leaf(d, &[2, 3], 40)];
    check_grads("stack dim 1", &parts, |x| Tensor::stack(&[&x[0], &x[1], &x[2]], 1usize)?.square(), 1e-7, 1e-6);
    check_grads("stack dim -1", &parts, |x| Tensor::stack(&[&x[0], &x[1], &x[2]], -1isize)?.sin(), 1e-7, 1e-6);
}

pub fn embedding(d: &Device) {
    // Repeated indices accumulate into the same row.
    let idx = index(d, &[3, 0, 6, 3, 1, 3], &[2, 3]);
    check_grads("embedding", &[leaf(d, &[7, 4], 17)], move |x| idx.embedding(&x[0]), 1e-7, 1e-6);
    let idx = index(d, &[2], &[]);
    check_grads("embedding scalar index, strided weight", &[strided_leaf(d, &[5, 3], 18)], move |x| idx.embedding(&x[0])?.square(), 1e-7, 1e-6);
}

/// A case of [`narrow_gathered`]: the outputs, each read through one or more narrows of `x`.
type NarrowCase = fn(&Tensor) -> crate::Result<Vec<Tensor>>;

/// The engine gathers the gradients of many narrows of one tensor and joins them once; each
/// narrow's own rule (zero padding, one full-size gradient per narrow, summed) is the oracle.
/// Covers an RNN's per-step selects, overlapping narrows, narrows on different dims, gaps,
/// dense uses beside narrow ones, nested narrows, a strided leaf and narrows of a stack and a
/// cat (whose pieces go to its inputs unjoined), each over two backward
/// calls that accumulate into `.grad`. In f32, the dtype models train in.
pub fn narrow_gathered(d: &Device) {
    use crate::DType;
    let cases: [(&str, &[usize], NarrowCase); 8] = [
        ("recurrent selects", &[6, 3, 8], |x| {
            let mut h = x.select(0usize, 0)?.tanh()?;
            let mut outs = Vec::new();
            for t in 1..x.shape()[0] {
                h = x.select(0usize, t)?.add(&h)?.tanh()?;
                outs.push(h.clone());
            }
            Ok(vec![Tensor::stack(&outs.iter().collect::<Vec<_>>(), 0usize)?])
        }),
        ("overlapping narrows", &[4, 9], |x| {
            Ok(vec![x.narrow(1usize, 0, 4)?, x.narrow(1usize, 2, 5)?.sin()?, x.narrow(1usize, 6, 1)?, x.narrow(1usize, 2, 5)?])
        }),
        ("narrows on two dims", &[5, 6], |x| {
            Ok(vec![x.narrow(0usize, 1, 2)?.exp()?, x.narrow(1usize, 3, 2)?, x.chunk(3, 1usize)?[0].clone(), x.select(0usize, 4)?])
        }),
        ("gaps at both ends", &[7, 3], |x| Ok(vec![x.narrow(0usize, 2, 1)?, x.narrow(0usize, 4, 2)?.square()?])),
        ("dense and narrow uses", &[4, 5], |x| Ok(vec![x.sin()?, x.select(0usize, 2)?, x.mul_scalar(3.0)?, x.narrow(1usize, 1, 3)?])),
        ("nested narrows of an intermediate", &[6, 4], |x| {
            let y = x.mul_scalar(2.0)?;
            let inner = y.narrow(0usize, 1, 4)?;
            Ok(vec![inner.narrow(0usize, 0, 2)?, inner.narrow(0usize, 2, 2)?.cos()?, y.select(0usize, 5)?, inner.split(1, 1usize)?[3].clone()])
        }),
        ("strided leaf", &[5, 7], |x| Ok(x.split(2, 0usize)?.into_iter().chain(x.split(3, 1usize)?).collect())),
        // Pieces of a stack or cat reach its inputs without being joined where each lies in
        // one input (an RNN's last step, read through a transpose); a piece across two inputs
        // is joined as before.
        ("narrows of a stack and a cat", &[4, 6], |x| {
            let steps = (0..4).map(|t| x.select(0usize, t)?.tanh()).collect::<crate::Result<Vec<_>>>()?;
            let steps: Vec<&Tensor> = steps.iter().collect();
            let (read, across) = (Tensor::stack(&steps, 0usize)?.transpose(0usize, 1usize)?, Tensor::stack(&steps, 0usize)?);
            let joined = Tensor::cat(&[&x.narrow(0usize, 0, 3)?.sin()?, &x.narrow(0usize, 3, 1)?.exp()?], 0usize)?;
            Ok(vec![
                read.select(1usize, 3)?,
                read.select(1usize, 0)?.square()?,
                read.select(1usize, 3)?,
                across.narrow(0usize, 1, 2)?,
                joined.narrow(0usize, 1, 1)?,
                joined.narrow(0usize, 3, 1)?.cos()?,
            ])
        }),
    ];
    for (i, (what, shape, f)) in cases.into_iter().enumerate() {
        // The ops that backward runs, so that the test also sees that gathering took place.
        let grad = |gather: bool| -> (Vec<f64>, usize) {
            let ops = std::rc::Rc::new(std::cell::Cell::new(0));
            let values = super::values(shape.iter().product(), 60 + i as u64);
            let x =
                if what == "strided leaf" { super::strided_input(d, shape, &values, DType::F32) } else { super::from_values(d, shape, &values, DType::F32).0 };
            x.set_requires_grad(true).expect("a leaf");
            for call in 0..2u64 {
                let outs = f(&x).unwrap_or_else(|e| panic!("{what}: forward failed: {e}"));
                let mut loss = Tensor::scalar(0.0, DType::F32, d).unwrap();
                for (k, o) in outs.iter().enumerate() {
                    let w = super::input(d, o.shape(), 100 * call + k as u64, DType::F32).0;
                    loss = loss.add(&o.mul(&w).and_then(|p| p.sum_all()).unwrap()).unwrap();
                }
                let counter = ops.clone();
                let run = || crate::observe::observe_ops(move |_| counter.set(counter.get() + 1), || loss.backward());
                let done = if gather { run() } else { crate::autograd::with_padded_rule(run) };
                done.unwrap_or_else(|e| panic!("{what}: backward failed: {e}"));
            }
            (x.grad().expect("a gradient").to_vec_f64().unwrap(), ops.get())
        };
        let ((gathered, gathered_ops), (padded, padded_ops)) = (grad(true), grad(false));
        super::assert_close(what, &gathered, &padded, 1e-6, 1e-6);
        // Overlapping pieces need layers (and broadcast views for their gaps): only the
        // recurrent case and the routed pieces are sure to run fewer ops.
        assert!(
            !(what == "recurrent selects" || what.starts_with("narrows of a stack")) || gathered_ops < padded_ops,
            "{what}: backward ran {gathered_ops} ops gathering narrows, {padded_ops} with the padded rule"
        );
    }
}

/// Narrows' gradients that lie side by side in one buffer as the parts of a contiguous tensor
/// of their input's shape (those a cat hands its inputs; self-attention's q, k and v gradients
/// from one kernel) join as a view of that buffer: backward runs no cat, and the gradient is
/// the padded rule's. Pieces out of order, or with a gap, still join by a cat.
pub fn narrow_pieces_side_by_side(d: &Device) {
    use crate::DType;
    type Parts = fn(&Tensor) -> crate::Result<Vec<Tensor>>;
    let cases: [(&str, Parts, usize); 3] = [
        ("in order", |x| x.chunk(3, 1usize), 0),
        ("out of order", |x| Ok(x.chunk(3, 1usize)?.into_iter().rev().collect()), 1),
        ("with a gap", |x| Ok(vec![x.narrow(1usize, 0, 2)?, x.narrow(1usize, 4, 2)?]), 1),
    ];
    for (what, parts, want_cats) in cases {
        let grad = |gather: bool| -> (Vec<f64>, usize) {
            let x = super::input(d, &[4, 6], 70, DType::F32).0;
            x.set_requires_grad(true).expect("a leaf");
            let parts = parts(&x).unwrap();
            let joined = Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1usize).unwrap();
            let w = super::input(d, joined.shape(), 71, DType::F32).0;
            let loss = joined.mul(&w).and_then(|p| p.sum_all()).unwrap();
            let cats = std::rc::Rc::new(std::cell::Cell::new(0));
            let counter = cats.clone();
            let run = || crate::observe::observe_ops(move |r| counter.set(counter.get() + usize::from(r.op == "cat")), || loss.backward());
            let done = if gather { run() } else { crate::autograd::with_padded_rule(run) };
            done.unwrap_or_else(|e| panic!("{what}: backward failed: {e}"));
            (x.grad().expect("a gradient").to_vec_f64().unwrap(), cats.get())
        };
        let ((gathered, cats), (padded, _)) = (grad(true), grad(false));
        super::assert_close(what, &gathered, &padded, 0.0, 0.0);
        assert_eq!(cats, want_cats, "{what}: cats in backward");
    }
}
