//! The one error type of `liandan-train`.
//!
//! Policy: `Result` everywhere. Everything that comes from outside the program (data files,
//! downloads, checkpoints, optimizer state, arguments) is checked and answered with an
//! [`Error`] that names what is wrong and what to do; nothing from outside can panic. Panics
//! are kept for broken internal invariants only. Errors of the crates below are wrapped, not
//! re-worded.

/// Errors raised by optimizers, schedulers, data loading and the training loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A hyper-parameter or option outside its domain (`lr` negative, `betas` outside
    /// `[0, 1)`, a batch size of 0, ...). `what` names it and says what is allowed.
    #[error("{op}: {what}")]
    InvalidArgument { op: &'static str, what: String },

    /// Saved state (optimizer, scheduler, training checkpoint) that does not fit what it is
    /// loaded into; `detail` names the offending entries.
    #[error("{op}: {detail}")]
    State { op: &'static str, detail: String },

    /// A file of the training loop (checkpoint directory, history, plot) could not be read or
    /// written.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io { path: std::path::PathBuf, action: &'static str, source: std::io::Error },

    /// The training loss stopped being a finite number; `epoch` and `step` (both counted from
    /// 1, `step` within the epoch) name the first batch where it happened.
    #[error("training stopped: the loss is {value} at epoch {epoch}, step {step}; lower the learning rate, or clip gradients")]
    NonFinite { epoch: usize, step: usize, value: f64 },

    /// A gradient stopped being finite while the loss was finite; `epoch` and `step` name the
    /// batch (the last of its optimizer step, when gradients are accumulated).
    #[error("training stopped: a gradient is not finite at epoch {epoch}, step {step} (the loss is finite); lower the learning rate, clip gradients, or train with detect_anomaly (--detect-anomaly) to find the op")]
    NonFiniteGrad { epoch: usize, step: usize },

    /// What anomaly detection found on a step that went non-finite: the first op that did,
    /// or that diverged from the CPU, with its layer and input shapes.
    #[error("training stopped at epoch {epoch}, step {step}: {report}")]
    Anomaly { epoch: usize, step: usize, report: String },

    /// Training was interrupted (Ctrl-C) after finishing a step; `saved` is where the training
    /// state went, when there is a checkpoint directory.
    #[error("interrupted at epoch {epoch}, step {step}{}", match saved { Some(p) => format!("; the training state is in {}, continue with resume", p.display()), None => "; nothing was saved (no checkpoint directory)".to_string() })]
    Interrupted { epoch: usize, step: usize, saved: Option<std::path::PathBuf> },

    /// Standard output refused the progress or summary lines (a closed pipe, a full disk).
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),

    /// A data file or directory that cannot be used (missing, truncated, of the wrong format,
    /// disagreeing with its companion file); `detail` says what is wrong and what to do.
    #[error("{}: {detail}", path.display())]
    Data { path: std::path::PathBuf, detail: String },

    /// A download that failed or whose bytes do not match their checksum; `detail` says what
    /// to do (retry, or fetch the file by hand into the cache directory when offline).
    #[error("download of {url}: {detail}")]
    Download { url: String, detail: String },

    /// The ranks of a data-parallel job cannot train together (they run different models or
    /// settings, MPI cannot start); `detail` names the difference and what to do.
    #[error("distributed training: {detail}")]
    Distributed { detail: String },

    /// A module or checkpoint operation failed.
    #[error(transparent)]
    Nn(liandan_nn::Error),

    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] liandan_tensor::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// liandan-nn's errors, wrapped; one of this crate's that went through liandan-nn's
/// [`Other`](liandan_nn::Error::Other) comes back as it was.
impl From<liandan_nn::Error> for Error {
    fn from(e: liandan_nn::Error) -> Error {
        match e {
            liandan_nn::Error::Other(inner) => match inner.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(inner) => Error::Nn(liandan_nn::Error::Other(inner)),
            },
            e => Error::Nn(e),
        }
    }
}

/// So that `?` works both ways: a program whose functions return `liandan_nn::Result` may
/// call the optimizers, the data loader and the trainer. liandan-nn cannot name this crate
/// (it sits below), so the conversion lives here; liandan-nn's own errors come back unwrapped.
impl From<Error> for liandan_nn::Error {
    fn from(e: Error) -> liandan_nn::Error {
        match e {
            Error::Nn(e) => e,
            Error::Tensor(e) => liandan_nn::Error::Tensor(e),
            other => liandan_nn::Error::Other(Box::new(other)),
        }
    }
}
