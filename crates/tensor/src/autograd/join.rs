//! What arrives for each tensor during backward, and its joining into that tensor's gradient.
//!
//! Three kinds arrive: dense gradients, summed as they come; the gradients of narrows (and so
//! of `select`, `split`, `chunk`), kept as pieces and joined once (`narrow.rs` says why and
//! how); and the right-hand gradients of matrix products that share one operand, as an RNN's
//! steps share `W_hh^T`, kept as pieces and computed as one product (`products.rs`). At a
//! tensor's turn the engine takes what arrived for it ([`Pending::take`]) and either hands the
//! pieces on unjoined, where its rule can take them so (`narrow::route`), or joins everything
//! into one gradient ([`Arrived::join`]).

use std::collections::{HashMap, HashSet};

use super::grad_fn::{add_wide, wide_grad};
use super::{narrow, products};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The gradients that arrived for tensors whose turn has not come, by tensor id.
#[derive(Default)]
pub(crate) struct Pending {
    dense: HashMap<u64, Tensor>,
    pieces: HashMap<u64, Vec<narrow::Piece>>,
    products: HashMap<u64, Vec<products::Piece>>,
    /// The last join of narrow pieces by rows, which a product's join may read rows of.
    pub(crate) last_join: Option<narrow::Joined>,
    /// Gradients' low copies made beside them, by the gradient's id, for a cast's rule to take
    /// ([`Pending::take_low_copy`]).
    low_copies: HashMap<u64, Tensor>,
    /// How many ops of the graph use each tensor (`topo_order`'s count).
    pub(crate) users: HashMap<u64, usize>,
    /// Products whose right-hand gradient a linear layer's bias add gave already, with the
    /// bias's (`grad_fn::linear_grads`): their own rule gives the left-hand one only.
    pub(crate) rhs_given: HashSet<u64>,
}

/// What arrived for one tensor: at least one of the three.
pub(crate) struct Arrived {
    pub(crate) dense: Option<Tensor>,
    pub(crate) pieces: Option<Vec<narrow::Piece>>,
    pub(crate) products: Option<Vec<products::Piece>>,
}

impl Pending {
    /// Nothing arrived but `grad`, the gradient of `root`, where backward starts.
    pub(crate) fn starting(root: &Tensor, grad: Tensor) -> Pending {
        let mut pending = Pending::default();
        pending.dense.insert(root.id(), grad);
        pending
    }

    /// Whether `t` is used by one op of the graph alone.
    pub(crate) fn used_once(&self, t: &Tensor) -> bool {
        self.users.get(&t.id()) == Some(&1)
    }

    /// Takes everything that arrived for the tensor `id`; `None` where nothing did.
    pub(crate) fn take(&mut self, id: u64) -> Option<Arrived> {
        let arrived = Arrived { dense: self.dense.remove(&id), pieces: self.pieces.remove(&id), products: self.products.remove(&id) };
        (arrived.dense.is_some() || arrived.pieces.is_some() || arrived.products.is_some()).then_some(arrived)
    }

    /// Adds `grad`, the gradient the rule `rule` gave `input`, to the dense gradient gathered
    /// for it (in `input`'s dtype); nothing where `input` wants none. An error names the rule
    /// where the gradient's shape is not the input's.
    pub(crate) fn add(&mut self, rule: &str, input: &Tensor, grad: Tensor) -> Result<()> {
        if !input.requires_grad() {
            return Ok(());
        }
        if grad.shape() != input.shape() {
            return Err(Error::Autograd(format!(
                "internal: the {rule} rule gave a gradient of shape {:?} for an input of shape {:?}",
                grad.shape(),
                input.shape()
            )));
        }
        // A gradient of autocast's copy of an f32 tensor may come in f32 ([`wide_grad`]).
        let kept = grad.dtype() == input.dtype() || Some(grad.dtype()) == wide_grad(input);
        let grad = if kept { grad } else { grad.to_dtype(input.dtype())? };
        let total = match self.dense.remove(&input.id()) {
            Some(old) => add_wide(old, grad)?,
            None => grad,
        };
        self.dense.insert(input.id(), total);
        Ok(())
    }

    /// The dense gradient gathered for `input` so far, taken out, where it is in `input`'s
    /// dtype and shape: what a rule may sum its own share into ([`super::grad_fn::layer_norm_grads`]).
    pub(crate) fn take_dense_like(&mut self, input: &Tensor) -> Option<Tensor> {
        let same = self.dense.get(&input.id()).is_some_and(|g| g.dtype() == input.dtype() && g.shape() == input.shape());
        if same {
            self.dense.remove(&input.id())
        } else {
            None
        }
    }

    /// Keeps `low`, `grad` cast to a low dtype, made beside it by the kernel that wrote it.
    pub(crate) fn keep_low_copy(&mut self, grad: &Tensor, low: Tensor) {
        self.low_copies.insert(grad.id(), low);
    }

    /// The copy of `grad` in `dtype` kept beside it ([`Pending::keep_low_copy`]), taken out:
    /// what casting `grad` would make, bit for bit. `None` where none was kept for this very
    /// tensor (a sum made after it is another).
    pub(crate) fn take_low_copy(&mut self, grad: &Tensor, dtype: crate::DType) -> Option<Tensor> {
        match self.low_copies.remove(&grad.id()) {
            Some(low) if low.dtype() == dtype && low.shape() == grad.shape() => Some(low),
            _ => None,
        }
    }

    /// Keeps `piece`, a narrow piece of `input`'s gradient (in `input`'s dtype), to be joined at
    /// `input`'s turn.
    pub(crate) fn add_piece(&mut self, input: &Tensor, piece: narrow::Piece) -> Result<()> {
        if input.requires_grad() {
            let grad = if piece.grad.dtype() != input.dtype() { piece.grad.to_dtype(input.dtype())? } else { piece.grad };
            self.pieces.entry(input.id()).or_default().push(narrow::Piece { grad, ..piece });
        }
        Ok(())
    }

    /// Adds a share of `input`'s gradient that a rule routed to it (`narrow::route`): whole, or
    /// a piece still to be joined.
    pub(crate) fn add_part(&mut self, rule: &str, input: &Tensor, part: narrow::Part) -> Result<()> {
        match part {
            narrow::Part::Dense(g) => self.add(rule, input, g),
            narrow::Part::Piece(p) => self.add_piece(input, p),
        }
    }

    /// Keeps `piece`, one product's share of the gradient of its right-hand operand `b`, to be
    /// computed with the others at `b`'s turn.
    pub(crate) fn add_product(&mut self, b: &Tensor, piece: products::Piece) {
        self.products.entry(b.id()).or_default().push(piece);
    }
}

impl Arrived {
    /// The pieces, where nothing else arrived (what a rule may take unjoined); else `self`.
    pub(crate) fn pieces_alone(self) -> std::result::Result<Vec<narrow::Piece>, Arrived> {
        match self {
            Arrived { dense: None, pieces: Some(pieces), products: None } => Ok(pieces),
            other => Err(other),
        }
    }

    /// Pieces that a rule did not take, as what arrived.
    pub(crate) fn from_pieces(pieces: Vec<narrow::Piece>) -> Arrived {
        Arrived { dense: None, pieces: Some(pieces), products: None }
    }

    /// The whole gradient of `t`: the dense sum, plus the pieces joined ([`narrow::assemble`]),
    /// plus the products' share computed as one product ([`products::assemble`]). Each join is
    /// attributed, for an observer, to its first piece, whose forward result names the layer.
    /// `last` is the last join of narrow pieces by rows (`narrow::Joined`): read by the
    /// products' join, replaced by the pieces' join. `wide`: the type `t`'s gradient may be
    /// kept in besides its own ([`wide_grad`], read before `t`'s node was taken).
    pub(crate) fn join(self, t: &Tensor, wide: Option<crate::DType>, last: &mut Option<narrow::Joined>) -> Result<Tensor> {
        let mut g = self.dense;
        if let Some(pieces) = self.pieces {
            let from = pieces[0].from;
            g = Some(plus(g, crate::observe::in_backward_of(|| "narrow".into(), from, || narrow::assemble(t, pieces, last))?)?);
        }
        if let Some(pieces) = self.products {
            let from = pieces[0].from;
            g = Some(plus(g, crate::observe::in_backward_of(|| "matmul".into(), from, || products::assemble(t, wide, pieces, last.as_ref()))?)?);
        }
        g.ok_or_else(|| Error::Autograd("internal: a tensor's gradient was joined from nothing".into()))
    }
}

/// `dense + joined` (one may be in the other's wider type), or `joined` alone when no dense
/// gradient arrived.
fn plus(dense: Option<Tensor>, joined: Tensor) -> Result<Tensor> {
    match dense {
        Some(d) => add_wide(d, joined),
        None => Ok(joined),
    }
}
