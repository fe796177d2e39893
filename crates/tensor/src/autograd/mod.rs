//! Reverse-mode autograd above the backends.
//!
//! Every recorded op leaves a `Node` on its result: the backward rule (`GradFn`) and the
//! input tensors it needs. [`Tensor::backward`] walks the graph once in reverse topological
//! order, summing gradients per tensor; at leaves that require grad it adds them to `.grad()`,
//! so gradients accumulate across calls until cleared (gradient accumulation relies on this).
//! Each node's rule and inputs are dropped as soon as it has run, which frees the graph and its
//! saved tensors; a second backward through the same graph is an error unless the first kept
//! it (`backward_with(.., retain_graph: true)`).
//!
//! Two exceptions to "run each node's rule", both gathered per input and joined once at the
//! input's turn: the gradients of narrows (`narrow.rs` says why and how), and the right-hand
//! gradients of matrix products that share one operand, as an RNN's steps share `W_hh^T`
//! (`products.rs`). Narrow pieces that are all of a node's gradient go on unjoined where its
//! rule can take them so (a permutation, a cat or stack, the LSTM cell: `narrow::route`).

mod grad_fn;
mod narrow;
mod products;

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

pub(crate) use grad_fn::GradFn;
#[cfg(feature = "conformance")]
pub(crate) use narrow::with_padded_rule;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// One recorded op in the graph.
pub(crate) struct Node {
    /// `None` once backward has freed it.
    state: Mutex<Option<(GradFn, Vec<Tensor>)>>,
}

impl Node {
    /// Records `grad_fn` over `inputs`, keeping of each input only what backward will use: an
    /// input whose values the rule never reads (and whose own rule does not read its output)
    /// is kept as a [`Tensor::released`] handle, so its buffer is freed as soon as the forward
    /// drops it, not when backward reaches it.
    pub(crate) fn new(grad_fn: GradFn, inputs: Vec<Tensor>) -> Node {
        let wants: Vec<bool> = inputs.iter().map(Tensor::requires_grad).collect();
        let inputs = inputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| match grad_fn.reads_input(i, &wants) || !t.can_release() {
                true => t,
                false => t.released(),
            })
            .collect();
        Node { state: Mutex::new(Some((grad_fn, inputs))) }
    }

    /// Whether this node's rule reads its op's output (false once backward has freed it).
    fn reads_output(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|(f, _)| f.reads_output())
    }

    fn inputs(&self) -> Option<Vec<Tensor>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(_, i)| i.clone())
    }
}

impl Drop for Node {
    /// Frees a chain of nodes iteratively: the default recursive drop (node -> its inputs ->
    /// their nodes -> ...) overflows the stack on a deep graph that is dropped without backward,
    /// such as a long RNN evaluated with grad on.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        let mut stack: Vec<Tensor> = state.map(|(_, inputs)| inputs).unwrap_or_default();
        while let Some(t) = stack.pop() {
            // Only a tensor this chain owns outright can be taken apart; a shared one stays alive.
            let Ok(inner) = std::sync::Arc::try_unwrap(t.0) else { continue };
            let Some(node) = inner.node else { continue };
            let Ok(mut node) = std::sync::Arc::try_unwrap(node) else { continue };
            if let Some((_, inputs)) = node.state.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
                stack.extend(inputs);
            }
        }
    }
}

impl Tensor {
    /// Whether the graph may keep this tensor without its storage: not a leaf that collects a
    /// gradient (its `.grad` is set on this very handle), not already released, and not the
    /// output of a rule that reads it.
    fn can_release(&self) -> bool {
        match self.node() {
            Some(node) => !node.reads_output() && !self.is_released(),
            None => !self.0.requires_grad.load(std::sync::atomic::Ordering::Relaxed) && !self.is_released(),
        }
    }
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True unless inside [`no_grad`] (per thread).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Turns graph recording off until dropped, like `torch.no_grad()`.
pub struct NoGradGuard {
    prev: bool,
}

impl NoGradGuard {
    pub fn new() -> NoGradGuard {
        NoGradGuard { prev: GRAD_ENABLED.with(|g| g.replace(false)) }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev));
    }
}

/// Runs `f` without recording the graph.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoGradGuard::new();
    f()
}

/// Tensors reachable from `root` through recorded nodes, each after all tensors that use it.
fn topo_order(root: &Tensor) -> Result<Vec<Tensor>> {
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    // Iterative post-order DFS: deep graphs (an RNN over a long sequence) must not overflow the stack.
    let mut stack: Vec<(Tensor, bool)> = vec![(root.clone(), false)];
    while let Some((t, expanded)) = stack.pop() {
        if expanded {
            order.push(t);
            continue;
        }
        if !seen.insert(t.id()) {
            continue;
        }
        stack.push((t.clone(), true));
        if let Some(node) = t.node() {
            let inputs = node.inputs().ok_or_else(|| {
                Error::Autograd(
                    "this graph was already freed by an earlier backward; recompute the forward pass, or pass retain_graph: true to the first backward".into(),
                )
            })?;
            for i in inputs.into_iter().filter(|i| i.requires_grad()) {
                if !seen.contains(&i.id()) {
                    stack.push((i, false));
                }
            }
        }
    }
    order.reverse();
    Ok(order)
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
        let order = topo_order(self)?;
        let mut grads: HashMap<u64, Tensor> = HashMap::new();
        let mut pieces: HashMap<u64, Vec<narrow::Piece>> = HashMap::new();
        let mut products: HashMap<u64, Vec<products::Piece>> = HashMap::new();
        grads.insert(self.id(), grad.detach());
        for t in order {
            let dense = grads.remove(&t.id());
            let joins = pieces.remove(&t.id());
            let prods = products.remove(&t.id());
            if dense.is_none() && joins.is_none() && prods.is_none() {
                continue;
            }
            let Some(node) = t.node() else {
                // A leaf: accumulate into .grad.
                let g = joined(&t, dense, joins, prods)?;
                if t.0.requires_grad.load(std::sync::atomic::Ordering::Relaxed) {
                    let total = match t.grad() {
                        Some(old) => old.add(&g)?,
                        None => g.contiguous()?,
                    };
                    t.set_grad(Some(total));
                }
                continue;
            };
            let (grad_fn, inputs) = {
                let mut state = node.state.lock().unwrap_or_else(|e| e.into_inner());
                let taken = if retain_graph { state.clone() } else { state.take() };
                taken.ok_or_else(|| Error::Autograd("this graph was already freed by an earlier backward".into()))?
            };
            // Pieces alone, at a rule that takes them as they are: no join (`narrow::route`).
            let joins = match joins {
                Some(p) if dense.is_none() && prods.is_none() => {
                    match crate::observe::in_backward_of(|| grad_fn.name(), t.id(), || narrow::route(&grad_fn, &inputs, &t.detach(), p))? {
                        Ok(parts) => {
                            for (input, part) in inputs.iter().zip(parts).flat_map(|(input, parts)| parts.into_iter().map(move |part| (input, part))) {
                                match part {
                                    narrow::Part::Dense(g) => deposit(&mut grads, grad_fn.name(), input, g)?,
                                    narrow::Part::Piece(p) => deposit_piece(&mut pieces, input, p)?,
                                }
                            }
                            continue;
                        }
                        Err(p) => Some(p),
                    }
                }
                other => other,
            };
            let g = joined(&t, dense, joins, prods)?;
            if let (GradFn::Narrow { dim, start, .. }, true) = (&grad_fn, narrow::gathering()) {
                deposit_piece(&mut pieces, &inputs[0], narrow::Piece { dim: *dim, start: *start, grad: g, from: t.id() })?;
                continue;
            }
            let input_grads = crate::observe::in_backward_of(
                || grad_fn.name(),
                t.id(),
                || match grad_fn {
                    GradFn::Matmul if narrow::gathering() && products::gatherable(&inputs) => {
                        let (grads, piece) = products::defer(&g, &inputs, t.id())?;
                        products.entry(inputs[1].id()).or_default().push(piece);
                        Ok(grads)
                    }
                    _ => grad_fn.backward(&g, &inputs, &t.detach()),
                },
            )?;
            for (input, ig) in inputs.iter().zip(input_grads) {
                if let Some(ig) = ig {
                    deposit(&mut grads, grad_fn.name(), input, ig)?;
                }
            }
        }
        Ok(())
    }
}

/// The whole gradient of `t` from what arrived for it: a dense sum, gathered narrow pieces and
/// gathered products (at least one of them).
fn joined(t: &Tensor, dense: Option<Tensor>, joins: Option<Vec<narrow::Piece>>, prods: Option<Vec<products::Piece>>) -> Result<Tensor> {
    // Each gathered join is attributed to its first piece, whose forward result names the layer.
    let g = match joins {
        Some(p) => plus(dense, crate::observe::in_backward_of(|| "narrow".into(), p[0].from, || narrow::assemble(t, p))?)?,
        None => dense,
    };
    let g = match prods {
        Some(p) => plus(g, crate::observe::in_backward_of(|| "matmul".into(), p[0].from, || products::assemble(t, p))?)?,
        None => g,
    };
    Ok(g.expect("joined is called with some gradient"))
}

/// Adds `ig`, the gradient the rule `rule` gave `input`, to the dense gradients gathered for it.
fn deposit(grads: &mut HashMap<u64, Tensor>, rule: impl std::fmt::Display, input: &Tensor, ig: Tensor) -> Result<()> {
    if !input.requires_grad() {
        return Ok(());
    }
    if ig.shape() != input.shape() {
        return Err(Error::Autograd(format!("internal: the {rule} rule gave a gradient of shape {:?} for an input of shape {:?}", ig.shape(), input.shape())));
    }
    let ig = if ig.dtype() != input.dtype() { ig.to_dtype(input.dtype())? } else { ig };
    let total = match grads.remove(&input.id()) {
        Some(old) => old.add(&ig)?,
        None => ig,
    };
    grads.insert(input.id(), total);
    Ok(())
}

/// Keeps `p`, a narrow piece of `input`'s gradient, to be joined at `input`'s turn.
fn deposit_piece(pieces: &mut HashMap<u64, Vec<narrow::Piece>>, input: &Tensor, p: narrow::Piece) -> Result<()> {
    if input.requires_grad() {
        let grad = if p.grad.dtype() != input.dtype() { p.grad.to_dtype(input.dtype())? } else { p.grad };
        pieces.entry(input.id()).or_default().push(narrow::Piece { grad, ..p });
    }
    Ok(())
}

/// `dense + joined`, or `joined` alone when no dense gradient arrived.
fn plus(dense: Option<Tensor>, joined: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match dense {
        Some(d) => d.add(&joined)?,
        None => joined,
    }))
}
