//! Reverse-mode autograd above the backends.
//!
//! Every recorded op leaves a `Node` on its result: the backward rule (`GradFn`) and the
//! input tensors it needs. [`Tensor::backward`] walks the graph once in reverse topological
//! order, summing gradients per tensor; at leaves that require grad it adds them to `.grad()`,
//! so gradients accumulate across calls until cleared (gradient accumulation relies on this).
//! Each node's rule and inputs are dropped as soon as it has run, which frees the graph and its
//! saved tensors; a second backward through the same graph is an error unless the first kept
//! it (`backward_with(.., retain_graph: true)`).
//! A leaf's gradient is final for the pass as soon as every op that used it has run: the walk
//! reaches leaves as early as it can and runs their hooks there (`hooks.rs`).
//!
//! Two exceptions to "run each node's rule", both gathered per input and joined once at the
//! input's turn: the gradients of narrows (`narrow.rs` says why and how), and the right-hand
//! gradients of matrix products that share one operand, as an RNN's steps share `W_hh^T`
//! (`products.rs`). Narrow pieces that are all of a node's gradient go on unjoined where its
//! rule can take them so (a permutation, a cat or stack, the LSTM cell: `narrow::route`).
//! Under autocast, the gradient of an f16 or bf16 copy of an f32 tensor may arrive, and sum,
//! in f32, where a product or a bias's sum could write it so (`grad_fn::wide_grad`).

mod grad_fn;
mod hooks;
mod join;
mod narrow;
mod products;
mod record;

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

pub use crate::grad_mode::{is_grad_enabled, no_grad, NoGradGuard};
pub use grad_fn::GradFn;
pub use hooks::{GradHook, HookHandle};
pub(crate) use join::{Arrived, Pending};
#[cfg(feature = "conformance")]
pub(crate) use narrow::{with_padded_rule, Piece};
#[cfg(feature = "conformance")]
pub(crate) use products::defer;

use crate::backend::BinaryOp;
use crate::error::{Error, Result};
use crate::tensor::{Node, Tensor};

/// Tensors reachable from `root` through recorded nodes, each after all tensors that use it.
/// Of those whose users have all run, a leaf goes first, so that its gradient is final as early
/// as it can be (its hooks can send it off while backward computes the rest), then the most
/// recently created, which retraces the forward pass backwards as PyTorch's engine does.
/// Beside the order, how many ops of the graph use each tensor.
fn topo_order(root: &Tensor) -> Result<(Vec<Tensor>, HashMap<u64, usize>)> {
    // Each tensor's users in the graph, counted by an iterative walk: deep graphs (an RNN over
    // a long sequence) must not overflow the stack.
    let mut users: HashMap<u64, usize> = HashMap::new();
    let mut found: HashMap<u64, Tensor> = HashMap::from([(root.id(), root.clone())]);
    let mut stack = vec![root.clone()];
    while let Some(t) = stack.pop() {
        for i in graph_inputs(&t)? {
            *users.entry(i.id()).or_default() += 1;
            if let std::collections::hash_map::Entry::Vacant(slot) = found.entry(i.id()) {
                slot.insert(i.clone());
                stack.push(i);
            }
        }
    }
    let counts = users.clone();
    let mut ready = BinaryHeap::from([(root.is_leaf(), root.id())]);
    let mut order = Vec::with_capacity(found.len());
    while let Some((_, id)) = ready.pop() {
        let t = found.remove(&id).expect("a tensor becomes ready once");
        for i in graph_inputs(&t)? {
            let left = users.get_mut(&i.id()).expect("every input was counted");
            *left -= 1;
            if *left == 0 {
                ready.push((i.is_leaf(), i.id()));
            }
        }
        order.push(t);
    }
    Ok((order, counts))
}

/// The inputs of `t`'s recorded op that take a gradient (none for a leaf).
fn graph_inputs(t: &Tensor) -> Result<smallvec::SmallVec<[Tensor; 4]>> {
    let Some(node) = t.node() else { return Ok(smallvec::SmallVec::new()) };
    let inputs = node.inputs().ok_or_else(|| {
        Error::Autograd(
            "this graph was already freed by an earlier backward; recompute the forward pass, or pass retain_graph: true to the first backward".into(),
        )
    })?;
    Ok(inputs.into_iter().filter(Tensor::requires_grad).collect())
}

impl Tensor {
    /// Computes the gradient of this one-element tensor with respect to every leaf that
    /// requires grad, adding it to their `.grad()`, then frees the graph.
    pub fn backward(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(Error::Autograd(format!("backward() needs a one-element tensor, got shape {:?}; use backward_with to pass a gradient", self.shape())));
        }
        self.backward_with(&self.ones_like()?, false)
    }

    /// Backpropagates `grad` (shaped like `self`). With `retain_graph` the graph is kept for
    /// another backward.
    pub fn backward_with(&self, grad: &Tensor, retain_graph: bool) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Autograd(
                "this tensor does not require grad: no input was marked with set_requires_grad(true), or it was computed under no_grad".into(),
            ));
        }
        if grad.shape() != self.shape() {
            return Err(Error::shape("backward", self.shape(), grad.shape(), "output and gradient must have the same shape"));
        }
        let _guard = NoGradGuard::new();
        let _layer = crate::profile::layer("backward");
        // Each rule computes in the types its forward saw; an open autocast region around a
        // backward call must not recast them.
        let _autocast = crate::autocast::AutocastGuard::off();
        let (order, users) = topo_order(self)?;
        let mut pending = Pending::starting(self, grad.detach_unobserved());
        pending.users = users;
        for t in order {
            let Some(arrived) = pending.take(t.id()) else { continue };
            match t.node() {
                None => t.accumulate(arrived.join(&t, None, &mut pending.last_join)?)?,
                Some(node) => run_node(&t, node, arrived, retain_graph, &mut pending)?,
            }
        }
        Ok(())
    }

    /// Adds `g` to this leaf's `.grad()`, where it collects one, then runs its hooks.
    fn accumulate(&self, g: Tensor) -> Result<()> {
        if self.0.requires_grad.load(std::sync::atomic::Ordering::Relaxed) {
            let total = match self.grad() {
                Some(old) => old.add(&g)?,
                None => g.contiguous()?,
            };
            self.set_grad(Some(total));
            self.run_grad_hooks()?;
        }
        Ok(())
    }
}

/// Runs the rule of `t`'s node on what arrived for `t`, and hands each input its share: the
/// pieces unjoined where the rule takes them so (`narrow::route`), a narrow's gradient as a
/// piece of its input's, a product's right-hand gradient as a piece to compute with the others
/// (`products.rs`), and otherwise the rule's gradients.
fn run_node(t: &Tensor, node: &Arc<Node>, arrived: Arrived, retain_graph: bool, pending: &mut Pending) -> Result<()> {
    // Read before the node is taken, and only where products' pieces arrived (the one join that
    // asks): whether `t`'s gradient may stay in f32 (`grad_fn::wide_grad`).
    let wide = arrived.products.as_ref().and_then(|_| grad_fn::wide_grad(t));
    let (rule, inputs) = node.take(retain_graph).ok_or_else(|| Error::Autograd("this graph was already freed by an earlier backward".into()))?;
    let out = t.detach_unobserved();
    let in_backward = |f: &mut dyn FnMut() -> Result<Vec<Option<Tensor>>>| crate::observe::in_backward_of(|| rule.name(), t.id(), f);
    let grad_fn = (&*rule as &dyn std::any::Any).downcast_ref::<GradFn>();
    let gathering = narrow::gathering();
    let arrived = match (arrived.pieces_alone(), grad_fn) {
        (Ok(pieces), Some(f)) => match crate::observe::in_backward_of(|| rule.name(), t.id(), || narrow::route(f, &inputs, &out, pieces))? {
            Ok(parts) => {
                for (input, parts) in inputs.iter().zip(parts) {
                    parts.into_iter().try_for_each(|part| pending.add_part(&rule.name(), input, part))?;
                }
                return Ok(());
            }
            Err(pieces) => Arrived::from_pieces(pieces),
        },
        (Ok(pieces), None) => Arrived::from_pieces(pieces),
        (Err(arrived), _) => arrived,
    };
    let g = arrived.join(t, wide, &mut pending.last_join)?;
    let grads = match grad_fn {
        // A linear layer's bias add over a product that nothing else uses: the bias's and the
        // weight's gradients from one kernel where the device has it (`grad_fn::linear_grads`);
        // the product's own rule then gives its input's only.
        Some(GradFn::Binary(BinaryOp::Add)) if !crate::observe::active() && pending.used_once(&inputs[0]) => {
            in_backward(&mut || match grad_fn::linear_grads(&g, &inputs) {
                Some(share) => {
                    let share = share?;
                    pending.add("linear", &share.weight_t, share.dweight_t)?;
                    pending.rhs_given.insert(inputs[0].id());
                    Ok(share.grads)
                }
                None => rule.backward(&g, &inputs, &out),
            })?
        }
        Some(GradFn::Matmul) if pending.rhs_given.remove(&t.id()) => in_backward(&mut || grad_fn::matmul_grads(&g, &inputs[0], &inputs[1], false, false))?,
        Some(&GradFn::Narrow { dim, start, .. }) if gathering => return pending.add_piece(&inputs[0], narrow::Piece { dim, start, grad: g, from: t.id() }),
        Some(GradFn::Matmul) if gathering && products::gatherable(&inputs) => in_backward(&mut || {
            let (grads, piece) = products::defer(&g, &inputs, t.id())?;
            pending.add_product(&inputs[1], piece);
            Ok(grads)
        })?,
        // A residual stream's gradient, its other branch's share arrived first, summed in by
        // the layer norm's own backward kernel rather than by an add after it; where the
        // stream is autocast's residual add, its low copy too, for that add's cast.
        Some(GradFn::LayerNorm { options, mean, rstd }) if !crate::observe::active() && inputs[0].requires_grad() => in_backward(&mut || {
            let acc = pending.take_dense_like(&inputs[0]);
            let low = acc.as_ref().and_then(|_| grad_fn::low_residual(&inputs[0]));
            let (grads, dx_low) = grad_fn::layer_norm_grads(&g, &inputs, *options, (mean, rstd), acc.as_ref(), low)?;
            if let (Some(Some(dx)), Some(dx_low)) = (grads.first(), dx_low) {
                pending.keep_low_copy(dx, dx_low);
            }
            Ok(grads)
        })?,
        Some(&GradFn::Cast { from }) => match pending.take_low_copy(&g, from) {
            Some(low) => vec![Some(low)],
            None => in_backward(&mut || rule.backward(&g, &inputs, &out))?,
        },
        _ => in_backward(&mut || rule.backward(&g, &inputs, &out))?,
    };
    for (input, grad) in inputs.iter().zip(grads) {
        if let Some(grad) = grad {
            pending.add(&rule.name(), input, grad)?;
        }
    }
    Ok(())
}
