//! The `liandan` command line: `train`, `eval`, `predict`, `plot`, `info`, `zoo`, `summary`,
//! `profile`, `find-batch-size`, `export`.
//!
//! Exit status: 0 on success, and when stdout is a pipe that closed (`liandan predict … | head`);
//! 2 for input the user can fix (an unknown model, dataset, optimizer or device, a bad option,
//! a missing or malformed file, a checkpoint for another model, an output directory we cannot
//! write or that another run holds, a stdout that cannot be written), always with a one-line
//! message that says what to do; 130 when Ctrl-C stopped training (after saving it); 1 when
//! training itself failed (a non-finite loss or gradient, with the failing op when
//! --detect-anomaly found it).

// Output goes through `output::say!`: `println!` panics when stdout fails.
#![deny(clippy::print_stdout, clippy::print_stderr)]
// The arguments' doc comments are clap's `--help` text, written for a terminal, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags, rustdoc::bare_urls)]

mod args;
mod batch_size;
mod common;
mod datasets;
mod export;
mod images;
mod inputs;
mod listing;
mod output;
mod own_data;
mod profile;
mod ranks;
mod resume;
mod run_dir;
mod settings;
mod train;
mod vae;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use args::{Cli, Command};
use output::note;

/// An error for the user: the message (one line) and the exit status. Status 0 is a quiet
/// stop with nothing to report (the reader of stdout went away).
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

    /// Stop now, successfully and without a word.
    pub fn quiet() -> Failure {
        Failure { code: 0, message: String::new() }
    }
}

/// Errors of the library: what comes from outside is the user's to fix (2); a stopped run is
/// 130; a run that failed on its own (a non-finite loss or gradient) is 1.
impl From<liandan_train::Error> for Failure {
    fn from(e: liandan_train::Error) -> Failure {
        use liandan_train::Error as E;
        match e {
            E::Stdout(e) => output::stdout_failed(e),
            E::Interrupted { epoch, step, saved: Some(path) } => {
                let dir = path.parent().unwrap_or(&path).display().to_string();
                let message = format!(
                    "interrupted at epoch {epoch}, step {step}; the training state is in {}: continue with `liandan train --out {dir} --resume`",
                    path.display()
                );
                Failure { code: 130, message }
            }
            e => {
                let code = match &e {
                    E::Interrupted { .. } => 130,
                    E::NonFinite { .. } | E::NonFiniteGrad { .. } | E::Anomaly { .. } => 1,
                    _ => 2,
                };
                Failure { code, message: e.to_string() }
            }
        }
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
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // A bad setting is the user's to fix, whatever the command.
    if let Err(f) = settings::check() {
        note!("liandan: {}", f.message);
        return ExitCode::from(f.code);
    }
    let (name, result) = match cli.command {
        Command::Info => ("info", listing::info()),
        Command::Zoo => ("zoo", listing::zoo()),
        Command::Summary(a) => ("summary", listing::summary(&a)),
        Command::Train(a) => {
            let given = args::given(matches.subcommand_matches("train"));
            ("train", train::train(&a, &given))
        }
        Command::Eval(a) => ("eval", train::eval(&a)),
        Command::Predict(a) => ("predict", inputs::predict(&a)),
        Command::Plot(a) => ("plot", train::plot(&a)),
        Command::Profile(a) => ("profile", profile::profile(&a)),
        Command::FindBatchSize(a) => ("find-batch-size", batch_size::find_batch_size(&a)),
        Command::Export(a) => ("export", export::export(&a)),
    };
    match result.and_then(|()| output::flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.code == 0 => ExitCode::SUCCESS,
        Err(f) => {
            // One line: the message's own line breaks and tabs would split it.
            note!("liandan {name}: {}", f.message.split_whitespace().collect::<Vec<_>>().join(" "));
            ExitCode::from(f.code)
        }
    }
}
