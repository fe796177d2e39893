//! Gradients of a right-hand operand shared by several matrix products, gathered and computed
//! as one product.
//!
//! An RNN multiplies every step's state by the same `W_hh^T`. Run one rule per product and
//! that weight gets T gradients `a_t^T g_t` and T - 1 additions: 2 T - 1 kernels, each too
//! small to fill a GPU. But `sum_t a_t^T g_t` is `A^T G` with `A` and `G` the `a_t` and
//! `g_t` stacked by rows, so the engine keeps each product's `(a, g)` as a [`Piece`] and, at
//! the shared operand's turn, joins them with two `cat`s and runs one product (as cuDNN and
//! PyTorch's fused RNNs compute `dW_hh`). A product's left-hand gradient is computed at once,
//! as the plain rule does, since the next product back needs it. The `g_t` of an RNN are also
//! its gate gradients, which the narrow gathering has already joined for the input projection
//! when that turn comes first (the RNN makes `W_hh^T` before its steps' view of the projection
//! for this): `G` is then rows of that join, with no second copy.
//!
//! Only the order of the float additions changes (the product's own reduction instead of a
//! chain of adds); `narrow::gathering` switches this off along with the narrow gathering, so
//! the conformance suite compares both with the plain rules.

use crate::error::Result;
use crate::tensor::Tensor;

use super::grad_fn::matmul_grads;
use super::narrow;
use crate::dtype::DType;

/// One product `a @ b` whose `b` gradient waits for `b`'s turn.
pub(crate) struct Piece {
    a: Tensor,
    g: Tensor,
    /// The id of the product's result.
    pub from: u64,
}

/// Whether `b`'s gradient in `a @ b` may be gathered: both plain matrices, `b` wanting a
/// gradient.
pub(crate) fn gatherable(inputs: &[Tensor]) -> bool {
    let (a, b) = (&inputs[0], &inputs[1]);
    a.rank() == 2 && b.rank() == 2 && b.requires_grad()
}

/// The product's gradients now (`a`'s only), and the piece that gives `b`'s later.
pub(crate) fn defer(g: &Tensor, inputs: &[Tensor], from: u64) -> Result<(Vec<Option<Tensor>>, Piece)> {
    let grads = matmul_grads(g, &inputs[0], &inputs[1], false, false)?;
    Ok((grads, Piece { a: inputs[0].detach_unobserved(), g: g.clone(), from }))
}

/// The sum of every piece's `a^T g`, the gradient of `b`, as one product. Where the `g`s are
/// one run of rows of `last`, the last join of narrow pieces (an RNN's gate gradients, joined
/// for its input projection), they are read there rather than joined again.
pub(crate) fn assemble(b: &Tensor, wide: Option<DType>, pieces: Vec<Piece>, last: Option<&narrow::Joined>) -> Result<Tensor> {
    let (a, g) = match pieces.as_slice() {
        [one] => (one.a.clone(), one.g.clone()),
        _ => {
            let g: Vec<&Tensor> = pieces.iter().map(|p| &p.g).collect();
            let (g, order) = match last.and_then(|j| j.rows_of(&g)) {
                Some(found) => found,
                None => (Tensor::cat(&g, 0usize)?, (0..pieces.len()).collect()),
            };
            let a: Vec<&Tensor> = order.iter().map(|&i| &pieces[i].a).collect();
            (Tensor::cat(&a, 0usize)?, g)
        }
    };
    // `b` as the plain rule sees it, so a transposed weight still gets a row-major gradient;
    // in f32 where `b` may keep its gradient so (read before its node was taken).
    let grads = matmul_grads(&g, &a, b, true, wide.is_some())?;
    Ok(grads.into_iter().nth(1).flatten().expect("b requires grad, checked by gatherable"))
}
