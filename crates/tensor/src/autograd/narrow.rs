//! Gradients of narrows (and so of `select`, `split`, `chunk`), gathered per input and
//! assembled once.
//!
//! The rule of one narrow on its own pads its gradient with zeros to the input's shape, so a
//! tensor read through T narrows (an RNN's projected inputs, one step at a time) would get T
//! full-size gradients and T - 1 full-size additions: O(T * size) traffic and some 4 T kernels.
//! Instead the engine keeps each narrow's gradient as a [`Piece`] and, at the input's turn,
//! joins disjoint pieces along one dim with a single `cat` whose gaps are a broadcast zero:
//! O(size), one kernel. Overlapping pieces, or pieces on different dims, go into separate
//! layers that are summed, which is the padded rule's arithmetic again.
//!
//! The values are the padded rule's: in a layer every element receives at most one piece's
//! value, and adding the zeros of the padded rule changes no value. Only where a tensor also
//! has other (dense) gradients may the order of the float additions differ.

use std::cell::Cell;
use std::sync::Arc;

use super::GradFn;
use crate::error::Result;
use crate::layout::Layout;
use crate::tensor::Tensor;

thread_local! {
    static GATHER: Cell<bool> = const { Cell::new(true) };
}

/// Whether the engine gathers narrow gradients (the default) or runs each narrow's own padded
/// rule, the oracle that the conformance suite compares with.
pub(crate) fn gathering() -> bool {
    GATHER.with(|g| g.get())
}

/// Runs `f` with every narrow's own padded rule on this thread (see [`gathering`]).
#[cfg(feature = "conformance")]
pub(crate) fn with_padded_rule<R>(f: impl FnOnce() -> R) -> R {
    let prev = GATHER.with(|g| g.replace(false));
    let out = f();
    GATHER.with(|g| g.set(prev));
    out
}

/// The gradient of one narrow's output, to be placed at `start..start + len` of `dim`.
pub(crate) struct Piece {
    pub dim: usize,
    pub start: usize,
    pub grad: Tensor,
    /// The id of the narrow's result.
    pub from: u64,
}

impl Piece {
    fn end(&self) -> usize {
        self.start + self.grad.shape()[self.dim]
    }
}

/// The last join of pieces along dim 0: the joined gradient and, for each piece, its gradient
/// and the element of the joined one where it begins. An RNN's gate gradients are joined twice,
/// for the input projection and for `W_hh` (`products.rs`); the second reads rows of the first
/// rather than copying them again.
pub(crate) struct Joined {
    whole: Tensor,
    parts: Vec<(Tensor, usize)>,
}

impl Joined {
    /// `tensors`, `[rows, cols]` matrices, as one `[sum of rows, cols]` view of the joined
    /// gradient, with the order they lie in it: where each is a whole piece of the join and
    /// together they are one run of its elements. `None` otherwise.
    pub(crate) fn rows_of(&self, tensors: &[&Tensor]) -> Option<(Tensor, Vec<usize>)> {
        let cols = *tensors.first()?.shape().get(1)?;
        let same = |t: &Tensor, p: &Tensor| {
            std::sync::Arc::ptr_eq(&t.storage(), &p.storage())
                && t.layout().offset() == p.layout().offset()
                && t.numel() == p.numel()
                && t.dtype() == p.dtype()
                && t.is_contiguous()
                && p.is_contiguous()
        };
        let mut at = Vec::with_capacity(tensors.len());
        for (i, t) in tensors.iter().enumerate() {
            if t.rank() != 2 || t.shape()[1] != cols {
                return None;
            }
            let &(_, start) = self.parts.iter().find(|(p, _)| same(t, p))?;
            at.push((start, i));
        }
        at.sort_unstable();
        let first = at[0].0;
        let mut end = first;
        for &(start, i) in &at {
            if start != end {
                return None;
            }
            end += tensors[i].numel();
        }
        let view = self.whole.reshape(&[self.whole.numel()]).ok()?.narrow(0usize, first, end - first).ok()?;
        let view = view.reshape(&[(end - first) / cols, cols]).ok()?;
        Some((view, at.into_iter().map(|(_, i)| i).collect()))
    }
}

/// The sum of `pieces` (in the order they arrived) as one gradient of `input`'s shape. A join
/// of one layer along dim 0 is kept in `last` (see [`Joined`]).
pub(crate) fn assemble(input: &Tensor, pieces: Vec<Piece>, last: &mut Option<Joined>) -> Result<Tensor> {
    // Each layer: pieces along one dim, pairwise disjoint.
    let mut layers: Vec<Vec<Piece>> = Vec::new();
    for p in pieces {
        let fits = |layer: &Vec<Piece>| layer[0].dim == p.dim && layer.iter().all(|q| q.end() <= p.start || p.end() <= q.start);
        match layers.iter_mut().find(|l| fits(l)) {
            Some(layer) => layer.push(p),
            None => layers.push(vec![p]),
        }
    }
    let row: usize = input.shape().iter().skip(1).product();
    let kept = match layers.as_slice() {
        [layer] if layer[0].dim == 0 && layer.len() > 1 => Some(layer.iter().map(|p| (p.grad.clone(), p.start * row)).collect::<Vec<_>>()),
        _ => None,
    };
    // Made only where a layer has a gap: an LSTM step's `h'` and `c'` pieces cover their
    // `[2, N, H]` input whole, and a fill kernel per step would be wasted there.
    let mut zero: Option<Tensor> = None;
    let mut total: Option<Tensor> = None;
    for layer in layers {
        let joined = join(input, layer, &mut zero)?;
        total = Some(match total {
            Some(t) => t.add(&joined)?,
            None => joined,
        });
    }
    let total = total.expect("assemble is called with at least one piece");
    if let Some(parts) = kept.filter(|_| total.is_contiguous()) {
        *last = Some(Joined { whole: total.clone(), parts });
    }
    Ok(total)
}

/// Disjoint pieces along one dim joined into `input`'s shape, the gaps filled from a scalar
/// zero (made at the first gap and kept in `zero` for the next layers).
fn join(input: &Tensor, mut layer: Vec<Piece>, zero: &mut Option<Tensor>) -> Result<Tensor> {
    let shape = input.shape();
    let dim = layer[0].dim;
    layer.sort_by_key(|p| p.start);
    if layer.len() == 1 && layer[0].grad.shape() == shape {
        return Ok(layer.pop().expect("one piece").grad);
    }
    if let Some(whole) = side_by_side(shape, dim, &layer) {
        return Ok(whole);
    }
    let mut gap = |len: usize| {
        let mut s = shape.to_vec();
        s[dim] = len;
        if zero.is_none() {
            *zero = Some(Tensor::zeros(&[], input.dtype(), input.device())?);
        }
        zero.as_ref().expect("made above").expand(&s)
    };
    let mut parts = Vec::with_capacity(2 * layer.len() + 1);
    let mut at = 0;
    for p in layer {
        if p.start > at {
            parts.push(gap(p.start - at)?);
        }
        at = p.end();
        parts.push(p.grad);
    }
    if at < shape[dim] {
        parts.push(gap(shape[dim] - at)?);
    }
    Tensor::cat(&parts.iter().collect::<Vec<_>>(), dim)
}

/// The sorted `layer` as one view of the storage its pieces share, where they cover `shape`
/// along `dim` and lie in that storage as the parts of one contiguous tensor (self-attention's
/// q, k and v gradients, written by one kernel in the layout of their packed projection): the
/// join without a copy. `None` otherwise.
fn side_by_side(shape: &[usize], dim: usize, layer: &[Piece]) -> Option<Tensor> {
    let first = &layer.first()?.grad;
    let storage = first.storage();
    let strides = crate::layout::contiguous_strides(shape);
    let base = first.layout().offset().checked_sub(layer[0].start * strides[dim])?;
    let whole = Layout::new(shape, strides, base);
    let mut at = 0;
    for p in layer {
        let len = p.grad.shape()[dim];
        let fits = p.start == at && whole.narrow(dim, at, len).is_ok_and(|l| l == *p.grad.layout());
        if !fits || !Arc::ptr_eq(&p.grad.storage(), &storage) || p.grad.dtype() != first.dtype() || p.grad.requires_grad() {
            return None;
        }
        at += len;
    }
    (at == shape[dim]).then(|| Tensor::from_parts(storage, whole, first.dtype(), first.device(), None))
}

/// One share of a gradient routed to an input: whole, or a piece of it still to be joined.
pub(crate) enum Part {
    Dense(Tensor),
    Piece(Piece),
}

/// The gradients of `inputs` from `pieces`, the whole gradient of the output `out` of a node
/// whose rule can take them without their join: a permutation (a transpose) hands each piece
/// on, permuted; a narrow along the pieces' dim hands each on as a piece of its input, so
/// pieces of pieces are joined once, at the tensor they lie in; a `cat` (so a `stack`) hands each piece to the input it lies in, and gives
/// nothing to the inputs no piece reaches, where the join would have made zeros for them to
/// add (an RNN's outputs, of which a model reads the last step); the LSTM cell's rule takes
/// `dh'` and `dc'` apart, where the join would have copied them into one `[2, N, H]` buffer
/// for each step. `Err(pieces)`, unchanged, when the rule cannot (pieces along another dim, or
/// across two inputs): the caller joins them then.
pub(crate) fn route(grad_fn: &GradFn, inputs: &[Tensor], out: &Tensor, pieces: Vec<Piece>) -> Result<std::result::Result<Vec<Vec<Part>>, Vec<Piece>>> {
    match grad_fn {
        GradFn::Cat { dim, sizes } => {
            let starts: Vec<usize> = sizes.iter().scan(0, |at, &s| Some(std::mem::replace(at, *at + s))).collect();
            let owner = |p: &Piece| (0..sizes.len()).find(|&i| p.dim == *dim && starts[i] <= p.start && p.end() <= starts[i] + sizes[i]);
            let Some(owners) = pieces.iter().map(owner).collect::<Option<Vec<usize>>>() else {
                return Ok(Err(pieces));
            };
            let mut parts: Vec<Vec<Part>> = (0..inputs.len()).map(|_| Vec::new()).collect();
            for (p, i) in pieces.into_iter().zip(owners) {
                parts[i].push(if p.grad.shape()[*dim] == sizes[i] { Part::Dense(p.grad) } else { Part::Piece(Piece { start: p.start - starts[i], ..p }) });
            }
            Ok(Ok(parts))
        }
        GradFn::Narrow { dim, start, .. } => {
            // A piece of a narrow's output along its dim is a piece of its input, further on.
            if !pieces.iter().all(|p| p.dim == *dim) {
                return Ok(Err(pieces));
            }
            Ok(Ok(vec![pieces.into_iter().map(|p| Part::Piece(Piece { start: p.start + start, ..p })).collect()]))
        }
        GradFn::Permute { perm } => {
            // Dim d of the output is dim perm[d] of the input: each piece moves there whole.
            let mut inv = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inv[p] = i;
            }
            let parts = pieces.into_iter().map(|p| Ok(Part::Piece(Piece { dim: perm[p.dim], grad: p.grad.permute(&inv)?, ..p }))).collect::<Result<_>>()?;
            Ok(Ok(vec![parts]))
        }
        GradFn::LstmCell => {
            // `h'` and `c'` are `select`s of the `[2, N, H]` output: pieces of one row each.
            if !pieces.iter().all(|p| p.dim == 0 && p.grad.shape()[0] == 1) {
                return Ok(Err(pieces));
            }
            let row = |k: usize| -> Result<Option<Tensor>> {
                let mut total: Option<Tensor> = None;
                for p in pieces.iter().filter(|p| p.start == k) {
                    let g = p.grad.squeeze(0usize)?;
                    total = Some(match total {
                        Some(t) => t.add(&g)?,
                        None => g,
                    });
                }
                Ok(total)
            };
            let grads = Tensor::lstm_cell_backward(row(0)?.as_ref(), row(1)?.as_ref(), inputs, out)?;
            Ok(Ok(grads.into_iter().map(|g| g.map(Part::Dense).into_iter().collect()).collect()))
        }
        _ => Ok(Err(pieces)),
    }
}
