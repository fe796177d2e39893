//! What the user sees while `fit` or `evaluate` runs: a progress bar per epoch with the running
//! loss, metrics and samples per second (`indicatif`, on stderr), or a few plain lines per epoch
//! on stdout when stdout is not a terminal (logs, CI), and an epoch summary line either way.
//! Writes to stdout that fail (a closed pipe, a full disk) are errors, never panics.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle as BarStyle};

use super::config::ProgressStyle;
use crate::error::{Error, Result};

/// Plain-line mode prints this many progress lines per epoch at most.
const LINES_PER_EPOCH: usize = 4;

pub(crate) struct Progress {
    style: ProgressStyle,
    bar: Option<ProgressBar>,
    epoch_label: String,
    steps: usize,
    next_line: usize,
    started: Instant,
}

impl Progress {
    pub(crate) fn new(style: ProgressStyle) -> Progress {
        let style = match style {
            ProgressStyle::Auto if std::io::stdout().is_terminal() => ProgressStyle::Bar,
            ProgressStyle::Auto => ProgressStyle::Lines,
            other => other,
        };
        Progress { style, bar: None, epoch_label: String::new(), steps: 0, next_line: 0, started: Instant::now() }
    }

    /// A new epoch of `steps` steps, `done` of which already ran (a resumed epoch).
    pub(crate) fn start_epoch(&mut self, epoch: usize, epochs: usize, steps: usize, done: usize) {
        self.start(format!("epoch {epoch}/{epochs}"), steps, done);
    }

    /// An evaluation of `steps` batches.
    pub(crate) fn start_eval(&mut self, steps: usize) {
        self.start("eval".into(), steps, 0);
    }

    fn start(&mut self, label: String, steps: usize, done: usize) {
        self.epoch_label = label;
        self.steps = steps;
        self.next_line = done + steps.div_ceil(LINES_PER_EPOCH);
        self.started = Instant::now();
        if self.style == ProgressStyle::Bar {
            let bar = ProgressBar::with_draw_target(Some(steps as u64), ProgressDrawTarget::stderr());
            let template = "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]";
            bar.set_style(BarStyle::with_template(template).expect("the template is valid").progress_chars("=> "));
            bar.set_prefix(self.epoch_label.clone());
            bar.set_position(done as u64);
            self.bar = Some(bar);
        }
    }

    /// Called after each read-back: `step` steps of the epoch are done, `samples` samples were
    /// seen since this process started the epoch, `values` are the running loss and metrics.
    pub(crate) fn update(&mut self, step: usize, samples: usize, values: &[(String, f64)]) -> Result<()> {
        let rate = samples as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        let msg = [format_values(values), format!("{rate:.0} samples/s")].join(" ").trim_start().to_string();
        match self.style {
            ProgressStyle::Bar => {
                if let Some(bar) = &self.bar {
                    bar.set_position(step as u64);
                    bar.set_message(msg);
                }
            }
            ProgressStyle::Lines if step >= self.next_line && step < self.steps => {
                out(format_args!("{} step {step}/{}  {msg}", self.epoch_label, self.steps))?;
                self.next_line = step + self.steps.div_ceil(LINES_PER_EPOCH);
            }
            _ => {}
        }
        Ok(())
    }

    /// A line that must not be torn by the bar (it is printed above it).
    pub(crate) fn println(&self, line: &str) -> Result<()> {
        match (&self.bar, self.style) {
            (_, ProgressStyle::Quiet) => Ok(()),
            (Some(bar), _) => bar.suspend(|| out(format_args!("{line}"))),
            (None, _) => out(format_args!("{line}")),
        }
    }

    /// Ends the epoch's bar and prints the summary line.
    pub(crate) fn finish_epoch(&mut self, summary: &str) -> Result<()> {
        self.finish();
        match self.style {
            ProgressStyle::Quiet => Ok(()),
            _ => out(format_args!("{summary}")),
        }
    }

    /// Ends the bar, leaving nothing of it on the screen.
    pub(crate) fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Seconds since the epoch started in this process.
    pub(crate) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}

/// One line on stdout; a failed write (a closed pipe, a full disk) is an error.
fn out(line: std::fmt::Arguments) -> Result<()> {
    writeln!(std::io::stdout(), "{line}").map_err(Error::Stdout)
}

/// `loss 0.1234  acc 0.9712`: losses and accuracies with four decimals, the rest in short form.
pub(crate) fn format_values(values: &[(String, f64)]) -> String {
    values.iter().map(|(name, v)| format!("{name} {v:.4}")).collect::<Vec<_>>().join("  ")
}
