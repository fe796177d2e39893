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
        let (node, name) = match (record, observing) {
            (false, false) => (None, None),
            (true, false) => (Some(node(grad_fn())), None),
            (record, true) => {
                let rule = grad_fn();
                let name = rule.name();
                (record.then(|| node(rule)), Some(name))
            }
        };
        let out = Tensor::from_parts(storage, layout, dtype, device, node);
        if let Some(name) = name {
            crate::observe::notify(name, inputs, &out);
        }
        out
    }
}
