//! Hooks that run when a leaf's gradient is final in a backward pass (PyTorch's
//! `register_post_accumulate_grad_hook`): what a data-parallel reducer needs to send each
//! gradient off while backward is still computing the others.
//!
//! A leaf holds its hooks weakly and the caller holds the [`HookHandle`]: dropping the handle
//! removes the hook, so a hook can never outlive whoever registered it.

use std::sync::{Arc, Weak};

use crate::error::{Error, Result};
pub use crate::tensor::GradHook;
use crate::tensor::Tensor;

/// Keeps a hook registered; dropping it removes the hook.
#[must_use = "the hook is removed as soon as its handle is dropped"]
pub struct HookHandle {
    _hook: Arc<GradHook>,
}

impl Tensor {
    /// Calls `hook` with this leaf each time a backward pass has added this pass's gradient to
    /// its `.grad()`: after that, the pass adds nothing more to it. Hooks of one leaf run in
    /// the order they were registered. Only a leaf that requires grad has a gradient to hook.
    pub fn register_post_accumulate_grad_hook(&self, hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static) -> Result<HookHandle> {
        if !self.is_leaf() || !self.requires_grad() {
            return Err(Error::Autograd(
                "register_post_accumulate_grad_hook: only a leaf that requires grad (a parameter) accumulates a gradient to hook".into(),
            ));
        }
        let hook: Arc<GradHook> = Arc::new(hook);
        self.0.hooks.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(&hook));
        Ok(HookHandle { _hook: hook })
    }

    /// Runs this leaf's live hooks, forgetting those whose handles were dropped.
    pub(crate) fn run_grad_hooks(&self) -> Result<()> {
        let live: Vec<Arc<GradHook>> = {
            let mut hooks = self.0.hooks.lock().unwrap_or_else(|e| e.into_inner());
            hooks.retain(|h| h.strong_count() > 0);
            hooks.iter().filter_map(Weak::upgrade).collect()
        };
        // Called outside the lock: a hook may read this tensor, or register another hook.
        live.iter().try_for_each(|hook| hook(self))
    }
}
