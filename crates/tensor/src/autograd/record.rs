//! Recording ops in the graph: every op's result is made here, with a node holding its rule
//! when an input requires grad (and grad mode is on), and announced to an observer.

use std::sync::Arc;

use super::GradFn;
use crate::backend::Storage;
use crate::device::Device;
use crate::dtype::DType;
use crate::grad_mode::is_grad_enabled;
use crate::layout::Layout;
use crate::tensor::{BackwardRule, Node, Tensor};

impl Tensor {
    /// A result of an op: contiguous storage of `shape`, recorded in the graph when any input
    /// requires grad and grad mode is on. `grad_fn` is only called when recording.
    pub(crate) fn from_op(storage: Storage, shape: &[usize], dtype: DType, device: &Device, inputs: &[&Tensor], grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        Tensor::view_op(storage, Layout::contiguous(shape), dtype, device, inputs, grad_fn)
    }

    /// Like [`Tensor::from_op`] with an arbitrary layout (views).
    pub(crate) fn view_op(storage: Storage, layout: Layout, dtype: DType, device: &Device, inputs: &[&Tensor], grad_fn: impl FnOnce() -> GradFn) -> Tensor {
        let record = is_grad_enabled() && inputs.iter().any(|t| t.requires_grad());
        let observing = crate::observe::active();
        let node = |rule: GradFn| Arc::new(Node::new(Arc::new(rule) as Arc<dyn BackwardRule>, inputs.iter().map(|t| (*t).clone()).collect()));
        let (node, rule) = match (record, observing) {
            (false, false) => (None, None),
            (true, false) => (Some(node(grad_fn())), None),
            (record, true) => {
                let rule = grad_fn();
                (record.then(|| node(rule.clone())), Some(rule))
            }
        };
        let out = Tensor::from_parts(storage, layout, dtype, device, node);
        if let Some(rule) = rule {
            crate::observe::notify(&rule, inputs, &out);
        }
        out
    }

    /// A result of an op that has no gradient (a comparison, an arg-extremum, a cast to an
    /// integer type): contiguous storage of `shape`, never recorded in the graph, but reported
    /// to an observer over its `inputs` as `what`.
    pub(crate) fn untracked_op(storage: Storage, shape: &[usize], dtype: DType, device: &Device, inputs: &[&Tensor], what: impl FnOnce() -> GradFn) -> Tensor {
        let out = Tensor::from_parts(storage, Layout::contiguous(shape), dtype, device, None);
        if crate::observe::active() {
            crate::observe::notify(&what(), inputs, &out);
        }
        out
    }

    /// A tensor sharing this one's storage, cut from the graph.
    pub fn detach(&self) -> Tensor {
        let out = self.detach_unobserved();
        // To a tracer the same values: without this the result would look like a constant.
        if crate::observe::active() {
            crate::observe::notify(&GradFn::Detach, &[self], &out);
        }
        out
    }
}
