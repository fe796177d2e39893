//! A per-thread observer that sees every op's result as it is made: how anomaly detection
//! re-runs a step op by op, and how `liandan-nn` traces a forward pass to export it. Off by
//! default; then an op pays one thread-local read.
//!
//! Ops that make a result from a kernel report it (views, comparisons and `detach` too);
//! creation ops (`zeros`, `randn`, `from_slice`) do not, as they compute nothing that could go
//! wrong: to a tracer, a tensor no op reported is a constant or a leaf. A composite op reports
//! the primitives it runs, then itself over its own inputs (`sigmoid` after its `exp` and
//! `recip`), so a tracer that follows results back from the outputs meets the composite
//! alone. While the observer runs, ops it calls itself (a read-back, a copy) are not reported.

use std::cell::{Cell, RefCell};

use crate::autograd::GradFn;
use crate::tensor::Tensor;

/// One op as the observer sees it.
pub struct OpRecord<'a> {
    /// The op, as its backward rule names it (`Matmul`, `Add`, `im2col`, `cast`, ...).
    pub op: String,
    /// The op with its attributes (axes, geometry, index tensors), as autograd records it.
    pub grad_fn: &'a GradFn,
    pub inputs: &'a [&'a Tensor],
    pub output: &'a Tensor,
    /// Inside [`Tensor::backward`]: the rule being run and the id of the forward result it
    /// differentiates (to find the layer that made it); `None` in the forward pass.
    pub backward_of: Option<(String, u64)>,
}

type Observer = Box<dyn FnMut(&OpRecord)>;

thread_local! {
    static OBSERVER: RefCell<Option<Observer>> = const { RefCell::new(None) };
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    static BACKWARD_OF: RefCell<Option<(String, u64)>> = const { RefCell::new(None) };
}

/// Runs `f` with `observer` called after every op on this thread.
pub fn observe_ops<R>(observer: impl FnMut(&OpRecord) + 'static, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Observer>, bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            OBSERVER.with(|o| *o.borrow_mut() = self.0.take());
            ACTIVE.with(|a| a.set(self.1));
        }
    }
    let prev = OBSERVER.with(|o| o.borrow_mut().replace(Box::new(observer)));
    let _reset = Reset(prev, ACTIVE.with(|a| a.replace(true)));
    f()
}

/// Whether an observer is installed on this thread (and not already running). Ops that stand
/// for several (fused kernels) run as those ops while one is.
pub fn active() -> bool {
    ACTIVE.with(|a| a.get())
}

pub(crate) fn notify(grad_fn: &GradFn, inputs: &[&Tensor], output: &Tensor) {
    // Taken out while it runs, so that the ops it calls are not reported back to it.
    let Some(mut observer) = OBSERVER.with(|o| o.borrow_mut().take()) else { return };
    ACTIVE.with(|a| a.set(false));
    let backward_of = BACKWARD_OF.with(|b| b.borrow().clone());
    observer(&OpRecord { op: grad_fn.name(), grad_fn, inputs, output, backward_of });
    ACTIVE.with(|a| a.set(true));
    OBSERVER.with(|o| *o.borrow_mut() = Some(observer));
}

/// Marks the ops of one backward rule, for [`OpRecord::backward_of`].
pub(crate) fn in_backward_of<R>(rule: impl FnOnce() -> String, forward_output: u64, f: impl FnOnce() -> R) -> R {
    if !active() {
        return f();
    }
    let prev = BACKWARD_OF.with(|b| b.replace(Some((rule(), forward_output))));
    let out = f();
    BACKWARD_OF.with(|b| *b.borrow_mut() = prev);
    out
}
