//! Recording one forward pass: every op the tensor crate reports ([`observe`]), with its
//! inputs, output and layer, as `torch.onnx`'s tracer records a model's ops.

use std::cell::RefCell;
use std::rc::Rc;

use liandan_tensor::autograd::GradFn;
use liandan_tensor::observe::observe_ops;
use liandan_tensor::{no_grad, Tensor};

use crate::error::Result;
use crate::summary::{current_layer, with_layer_path};

/// One reported op.
pub(super) struct Record {
    pub grad_fn: GradFn,
    pub inputs: Vec<Tensor>,
    pub output: Tensor,
    /// The layer path that was running (`BasicBlock-4 > Conv2d-5`), if any.
    pub layer: Option<String>,
}

impl Record {
    /// The tensors the op reads: its inputs, then those its attributes hold (a `where`'s
    /// condition, a gather's index).
    pub fn operands(&self) -> Vec<&Tensor> {
        let held = match &self.grad_fn {
            GradFn::Select { cond } => Some(cond),
            GradFn::Gather { index, .. } | GradFn::IndexSelect { index, .. } | GradFn::ScatterAdd { index, .. } => Some(index),
            _ => None,
        };
        self.inputs.iter().chain(held).collect()
    }
}

/// What one run of the forward pass did.
pub(super) struct Trace {
    pub inputs: Vec<Tensor>,
    pub records: Vec<Record>,
    pub outputs: Vec<Tensor>,
}

/// Runs `forward` on `inputs` without building a graph, recording every op it runs.
pub(super) fn run(inputs: &[Tensor], forward: &dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>) -> Result<Trace> {
    let records = Rc::new(RefCell::new(Vec::new()));
    let sink = records.clone();
    let outputs = no_grad(|| {
        observe_ops(
            move |r| {
                let inputs = r.inputs.iter().map(|t| (*t).clone()).collect();
                let record = Record { grad_fn: r.grad_fn.clone(), inputs, output: r.output.clone(), layer: current_layer() };
                sink.borrow_mut().push(record);
            },
            || with_layer_path(|| forward(inputs)),
        )
    })?;
    let records = Rc::try_unwrap(records).map(RefCell::into_inner).unwrap_or_else(|shared| std::mem::take(&mut *shared.borrow_mut()));
    Ok(Trace { inputs: inputs.to_vec(), records, outputs })
}
