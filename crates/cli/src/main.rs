//! The `liandan` command line: `train`, `eval`, `predict`, `plot`, `info`, `zoo`, `summary`,
//! `profile`, `find-batch-size`, `export`.
//!
//! Exit status: 0 on success; 2 for input the user can fix (an unknown model, dataset,
//! optimizer or device, a bad option, a missing or malformed file, a checkpoint for another
//! model, an output directory we cannot write), always with a one-line message that says what
//! to do; 130 when Ctrl-C stopped training (after saving it); 1 when training itself failed
//! (a non-finite loss or gradient, with the failing op when --detect-anomaly found it).

mod args;
mod batch_size;
mod common;
mod datasets;
mod export;
mod images;
mod inputs;
mod listing;
mod profile;
mod train;
mod vae;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// An error for the user: the message (one line) and the exit status.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Input the user can fix: exit status 2.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure { code: 2, message: message.into() }
    }
}

/// Errors of the library: what comes from outside is the user's to fix (2); a stopped run is
/// 130; a run that failed on its own (a non-finite loss or gradient) is 1.
impl From<liandan_train::Error> for Failure {
    fn from(e: liandan_train::Error) -> Failure {
        use liandan_train::Error as E;
        let code = match &e {
            E::Interrupted { .. } => 130,
            E::NonFinite { .. } | E::NonFiniteGrad { .. } | E::Anomaly { .. } => 1,
            _ => 2,
        };
        Failure { code, message: e.to_string() }
    }
}

impl From<liandan_nn::Error> for Failure {
    fn from(e: liandan_nn::Error) -> Failure {
        Failure::usage(e.to_string())
    }
}

impl From<liandan_nn::TensorError> for Failure {
    fn from(e: liandan_nn::TensorError) -> Failure {
        Failure::usage(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Info => ("info", listing::info()),
        Command::Zoo => ("zoo", {
            listing::zoo();
            Ok(())
        }),
        Command::Summary(a) => ("summary", listing::summary(&a)),
        Command::Train(a) => ("train", with_gpu_switches(a.autotune, a.conv_tf32, || train::train(&a))),
        Command::Eval(a) => ("eval", train::eval(&a)),
        Command::Predict(a) => ("predict", inputs::predict(&a)),
        Command::Plot(a) => ("plot", train::plot(&a)),
        Command::Profile(a) => ("profile", with_gpu_switches(a.autotune, a.conv_tf32, || profile::profile(&a))),
        Command::FindBatchSize(a) => ("find-batch-size", batch_size::find_batch_size(&a)),
        Command::Export(a) => ("export", export::export(&a)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // One line: the message's own line breaks would split it.
            eprintln!("liandan {name}: {}", f.message.replace('\n', " "));
            ExitCode::from(f.code)
        }
    }
}

/// `run` with `--autotune` and `--conv-tf32` as they say, and the autotune's report after a
/// run that succeeded.
fn with_gpu_switches(autotune: bool, conv_tf32: bool, run: impl FnOnce() -> Result<(), Failure>) -> Result<(), Failure> {
    gpu_switches(autotune, conv_tf32);
    let done = run();
    autotune_report(autotune && done.is_ok());
    done
}

/// `--autotune` and `--conv-tf32`: the wgpu backend's autotune, and its f32 convolutions on the
/// tensor cores, on for this process (off leaves `LIANDAN_AUTOTUNE` and `LIANDAN_CONV_TF32` to
/// decide). A CPU-only build has neither.
fn gpu_switches(autotune: bool, conv_tf32: bool) {
    #[cfg(feature = "wgpu")]
    {
        if autotune {
            liandan_backend_wgpu::set_autotune(true);
        }
        if conv_tf32 {
            liandan_backend_wgpu::set_conv_tf32(true);
        }
    }
    #[cfg(not(feature = "wgpu"))]
    let _ = (autotune, conv_tf32);
}

/// After a run with `--autotune`: how many shapes it measured, and where the cuts are kept.
fn autotune_report(on: bool) {
    #[cfg(feature = "wgpu")]
    if on {
        let measured = liandan_backend_wgpu::autotune_measured();
        match liandan_backend_wgpu::autotune_cache_dir() {
            Some(dir) => println!("autotune: {measured} shape(s) measured this run; the cuts are kept in {}", dir.display()),
            None => println!("autotune: {measured} shape(s) measured this run; no cache directory (set LIANDAN_CACHE_DIR to keep them)"),
        }
    }
    #[cfg(not(feature = "wgpu"))]
    let _ = on;
}
