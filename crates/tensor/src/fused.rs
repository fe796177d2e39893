//! Fused kernels: the one place where a backend may run a composite as a single kernel.
//!
//! A fused op is an optional, faster route to a composite that already exists in `ops/`,
//! never the only definition. The composite asks its device first, through
//! [`Backend::fused`](crate::Backend::fused) with a [`FusedOp`] naming what to compute; a
//! backend without a kernel for it answers `None` (the default) and the composite runs its
//! primitives. So the composite is both the fallback and the oracle: the conformance suite
//! runs every fused op with fusion on and off on the same device and compares outputs and
//! gradients (`conformance::fused`).
//!
//! Backward: a fused forward records one backward rule, written once in this crate with
//! tensor ops like every other rule (`GradFn` in `autograd/grad_fn.rs`). Where that rule's own
//! arithmetic is worth a kernel, it is itself a fused op of the same kind
//! ([`FusedOp::LstmCellBackward`]), asked for and checked in the same way. A backend therefore
//! never writes autograd code: it may override the forward, the backward, both, or neither.
//!
//! `LIANDAN_FUSION=0` (read once, at the first fused op) turns every fused kernel off, so a
//! wrong result can be bisected to the fusion; [`no_fusion`] does the same for one thread.

use std::cell::Cell;
use std::sync::OnceLock;

use crate::backend::{Storage, Strided};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A composite a backend may run as one kernel. Each variant says what it computes, its
/// inputs (all contiguous, though possibly at an offset into their buffer, of one float dtype,
/// in the order listed) and its outputs (fresh contiguous buffers of that dtype, in order).
/// New variants are added as new composites gain kernels, so backends match with a `_ => None`
/// arm.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FusedOp {
    /// The pointwise part of an LSTM step ([`Tensor::lstm_cell`]), with the gates in
    /// PyTorch's order i, f, g, o:
    ///
    /// ```text
    /// i, f, g, o = σ(gates[:, 0:H]), σ(gates[:, H:2H]), tanh(gates[:, 2H:3H]), σ(gates[:, 3H:4H])
    /// c' = f * c + i * g
    /// h' = o * tanh(c')
    /// ```
    ///
    /// Inputs: `gates` `[N, 4H]` (pre-activation), `c` `[N, H]`. Output: one `[2, N, H]`
    /// buffer holding `h'` then `c'`.
    LstmCell,
    /// The gradient of [`FusedOp::LstmCell`]. Inputs: `gates` `[N, 4H]`, `c` `[N, H]`, the
    /// forward's output `[2, N, H]` (`h'`, `c'`) and its gradient `[2, N, H]` (`dh'`, `dc'`).
    /// Outputs: `dgates` `[N, 4H]` and `dc` `[N, H]`.
    LstmCellBackward,
}

impl FusedOp {
    /// The op's name, for errors and reports.
    pub fn name(&self) -> &'static str {
        match self {
            FusedOp::LstmCell => "lstm_cell",
            FusedOp::LstmCellBackward => "lstm_cell_backward",
        }
    }

    /// How many buffers the op returns.
    pub fn outputs(&self) -> usize {
        match self {
            FusedOp::LstmCell => 1,
            FusedOp::LstmCellBackward => 2,
        }
    }
}

thread_local! {
    static FUSION_ON: Cell<bool> = const { Cell::new(true) };
}

/// `LIANDAN_FUSION`, read once: `0`, `off` or `false` turn fusion off; unset, `1`, `on` or
/// `true` leave it on; anything else is reported on stderr and ignored.
fn env_allows_fusion() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("LIANDAN_FUSION") {
        Err(_) => true,
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "1" | "on" | "true" => true,
            "0" | "off" | "false" => false,
            _ => {
                eprintln!("liandan: ignoring LIANDAN_FUSION={v:?}: use 0 (fused kernels off) or 1 (on, the default)");
                true
            }
        },
    })
}

/// True when fused kernels may run on this thread: neither `LIANDAN_FUSION=0` nor inside
/// [`no_fusion`].
pub fn fusion_enabled() -> bool {
    env_allows_fusion() && FUSION_ON.with(|f| f.get())
}

/// Turns fused kernels off on this thread until dropped: every composite runs its primitives.
pub struct NoFusionGuard {
    prev: bool,
}

impl NoFusionGuard {
    pub fn new() -> NoFusionGuard {
        NoFusionGuard { prev: FUSION_ON.with(|f| f.replace(false)) }
    }
}

impl Default for NoFusionGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoFusionGuard {
    fn drop(&mut self) {
        FUSION_ON.with(|f| f.set(self.prev));
    }
}

/// Runs `f` with fused kernels off on this thread (its backward too, if run inside `f`).
pub fn no_fusion<R>(f: impl FnOnce() -> R) -> R {
    let _guard = NoFusionGuard::new();
    f()
}

/// Asks the inputs' device to run `op` on `inputs` (contiguous, one device and dtype, as the
/// caller has checked). `None` when fusion is off or the backend has no kernel for it; the
/// caller then runs the composite.
pub(crate) fn try_fused(op: &FusedOp, inputs: &[&Tensor]) -> Option<Result<Vec<Storage>>> {
    let first = inputs.first()?;
    if !fusion_enabled() {
        return None;
    }
    debug_assert!(inputs.iter().all(|t| t.is_contiguous() && t.device() == first.device() && t.dtype() == first.dtype()));
    let storages: Vec<Storage> = inputs.iter().map(|t| t.storage()).collect();
    let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(t, s)| Strided { storage: &**s, layout: t.layout(), dtype: t.dtype() }).collect();
    let result = first.device().backend().fused(op, &views)?;
    Some(result.and_then(|outs| {
        if outs.len() == op.outputs() {
            Ok(outs)
        } else {
            Err(Error::Backend {
                backend: first.device().backend().name(),
                op: op.name(),
                detail: format!("the fused kernel returned {} buffers; the op has {}", outs.len(), op.outputs()),
            })
        }
    }))
}
