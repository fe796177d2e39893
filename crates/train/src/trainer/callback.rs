//! Hooks into [`Trainer::fit`](super::Trainer::fit) (PyTorch Lightning's callbacks, reduced to
//! the few that a training loop of this shape has).

use super::history::History;
use crate::error::Result;

/// Called by `fit` at fixed points; every hook does nothing unless overridden. A hook that
/// returns an error stops training with that error.
pub trait Callback: Send {
    /// Before the first step of `epoch` (1-based; also when a resumed run re-enters an epoch).
    fn on_epoch_start(&mut self, epoch: usize) -> Result<()> {
        let _ = epoch;
        Ok(())
    }

    /// The per-step training losses, read back at each log interval: `losses[i]` is the loss
    /// of optimizer step `first_step + i` (counted from 0 over the whole run).
    fn on_losses(&mut self, epoch: usize, first_step: u64, losses: &[f64]) -> Result<()> {
        let _ = (epoch, first_step, losses);
        Ok(())
    }

    /// After `epoch` (1-based) with its history row (training and validation values).
    fn on_epoch_end(&mut self, epoch: usize, row: &[(String, f64)]) -> Result<()> {
        let _ = (epoch, row);
        Ok(())
    }

    /// When `fit` returns normally (all epochs run, or stopped early).
    fn on_fit_end(&mut self, history: &History) -> Result<()> {
        let _ = history;
        Ok(())
    }
}
