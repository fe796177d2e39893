//! Custom ops: ops outside the closed primitive set, open to any crate (the shape of
//! candle's `CustomOp`).
//!
//! A custom op has a name, a composite written in tensor ops (what runs where no kernel does,
//! and the oracle every kernel is tested against), optionally a kernel per backend, and a
//! backward written in tensor ops or in custom ops of its own. Its kernels live with the code
//! the op serves: the tensor crate's own ops (`lstm_cell`, `softmax`, `batch_norm`, ...) have
//! theirs in the backend crates, which know them by type; an op of another crate (an
//! optimizer's update in `liandan-train`) writes its kernels in that crate, for the backend
//! types it knows ([`CustomKernel::kernel`]). A backend without a kernel runs the composite,
//! and `LIANDAN_FUSION=0` makes every op run its composite ([`crate::fused`]).
//!
//! [`Tensor::custom`] runs an op and records its backward; an op whose caller records a rule
//! of its own asks for the kernel alone ([`crate::fused::run`]) and falls back to
//! [`CustomOp::composite`].

use crate::backend::CustomKernel;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// An op with a composite, optional kernels and a backward rule; see the module docs.
/// `docs/adding-an-op.md` has the checklist for adding one.
pub trait CustomOp: CustomKernel {
    /// The shape and dtype of each output for `inputs` (a kernel's buffers are wrapped so).
    /// The default: one output, shaped and typed like input 0 (an elementwise op's).
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(inputs[0].shape().to_vec(), inputs[0].dtype())]
    }

    /// The op from tensor ops, on its inputs as a kernel would get them: what runs where no
    /// kernel does, and every kernel's oracle. Called without the graph unless
    /// [`CustomOp::composite_has_grad`] says otherwise.
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// The gradient of each input (`None` where it needs none) from `grad`, the gradient of
    /// output 0, for [`Tensor::custom`]. `outputs` holds every output (the first detached);
    /// the later ones are not differentiated: they are what the backward reads beside the
    /// inputs (a normalization's statistics). Runs without the graph, in tensor ops or custom
    /// ops of its own. The default: the op has no backward.
    fn backward(&self, grad: &Tensor, inputs: &[Tensor], outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let _ = (grad, inputs, outputs);
        Err(Error::Autograd(format!("{} has no backward rule", self.name())))
    }

    /// Whether [`CustomOp::backward`] reads the values of input `i`: an input it does not read
    /// is kept by the graph without its buffer. The default: every input.
    fn reads_input(&self, i: usize) -> bool {
        let _ = i;
        true
    }

    /// Whether [`CustomOp::backward`] reads output 0, which the graph then keeps alive.
    fn reads_output(&self) -> bool {
        false
    }

    /// Whether the composite runs with the graph where no kernel does, so that its primitives'
    /// rules give the gradient there (GELU's and BCE's composites, whose own graphs are
    /// accurate), rather than [`CustomOp::backward`] (the default: one node over the
    /// composite's result, as for ops whose primitive chain loses accuracy or memory).
    fn composite_has_grad(&self) -> bool {
        false
    }
}

/// Implements [`CustomKernel`] for op types whose backend kernels live elsewhere (the tensor
/// crate's own ops, which the backends know by type): their name alone.
#[macro_export]
macro_rules! custom_kernel_name {
    ($($op:ty => $name:literal),* $(,)?) => {$(
        impl $crate::CustomKernel for $op {
            fn name(&self) -> &'static str {
                $name
            }
        }
    )*};
}
