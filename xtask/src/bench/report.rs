//! The results of one `cargo xtask bench` run, as JSON and as the Markdown tables it prints.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::args::Plan;
use super::micro::Micro;
use super::step::{EpochTimes, StepTimes};

fn one() -> u64 {
    1
}

/// Everything one run measured, and the conditions it ran under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub date: String,
    pub command: String,
    pub machine: String,
    pub plan: Plan,
    /// Processes each step was timed in (`bench --rounds`).
    #[serde(default = "one")]
    pub rounds: u64,
    /// PyTorch's version, or why it was not measured.
    pub torch: Result<String, String>,
    pub devices: Vec<DeviceReport>,
    pub rows: Vec<Row>,
    pub epochs: Vec<EpochRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// `cpu` or `gpu:N`.
    pub spec: String,
    pub name: String,
    pub micro: Option<Result<Micro, String>>,
}

/// One model on one device in one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub model: String,
    pub device: String,
    pub precision: String,
    pub batch: usize,
    /// MNIST's 60,000 or CIFAR-10's 50,000: the samples of one epoch of this model's data.
    pub epoch_samples: usize,
    pub ours: Result<StepTimes, String>,
    /// `None` without `--torch`.
    pub torch: Option<Result<StepTimes, String>>,
    /// PyTorch's step under `torch.compile`, one per `--torch-compile` mode.
    #[serde(default)]
    pub compiled: Vec<Compiled>,
}

/// PyTorch's step with its forward and loss under `torch.compile(mode)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiled {
    pub mode: String,
    /// Its first step's time is the compile's.
    pub times: Result<StepTimes, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRow {
    pub model: String,
    pub device: String,
    pub batch: usize,
    pub full_epoch_samples: usize,
    pub times: Result<EpochTimes, String>,
}

impl Row {
    /// Samples per second at the pipelined median: what a training loop that does not read
    /// back every step gets.
    pub fn samples_per_s(&self) -> Option<f64> {
        self.ours.as_ref().ok().map(|t| self.batch as f64 / (t.pipelined.median_ms / 1e3))
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.0}", b as f64 / (1 << 20) as f64))
}

fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn spread(s: &super::step::Stats) -> String {
    format!("{} ({}-{})", ms(s.median_ms), ms(s.min_ms), ms(s.max_ms))
}

impl Report {
    /// The row of `model` in `precision` on the CPU, to take speedups against.
    fn cpu_row(&self, model: &str, precision: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.model == model && r.precision == precision && r.device == "cpu")
    }

    /// The modes of `torch.compile` measured, in the order the rows first name them.
    fn compile_modes(&self) -> Vec<&str> {
        let mut modes: Vec<&str> = Vec::new();
        for c in self.rows.iter().flat_map(|r| &r.compiled) {
            if !modes.contains(&c.mode.as_str()) {
                modes.push(&c.mode);
            }
        }
        modes
    }

    /// Our step beside PyTorch's eager one and its compiled ones, each pipelined (synced), with
    /// each compile's seconds and our time over each: nothing when no mode was measured.
    fn compiled_table(&self, failures: &mut Vec<String>) -> String {
        let modes = self.compile_modes();
        if modes.is_empty() {
            return String::new();
        }
        let mut o = String::from("\n| model | device | precision | batch | ours ms | PyTorch eager ms | ours / eager |");
        for m in &modes {
            let _ = write!(o, " `{m}` ms | compile s | ours / `{m}` |");
        }
        let _ = writeln!(o, "\n|{}", "---|".repeat(7 + 3 * modes.len()));
        let both = |t: &StepTimes| format!("{} ({})", ms(t.pipelined.median_ms), ms(t.synced.median_ms));
        for r in self.rows.iter().filter(|r| !r.compiled.is_empty()) {
            let ours = r.ours.as_ref().ok();
            let over = |t: &StepTimes| ours.map_or("-".into(), |o| format!("{:.2}", o.pipelined.median_ms / t.pipelined.median_ms));
            let eager = match &r.torch {
                Some(Ok(t)) => format!("{} | {}", both(t), over(t)),
                _ => "- | -".into(),
            };
            let _ = write!(o, "| {} | {} | {} | {} | {} | {eager} |", r.model, r.device, r.precision, r.batch, ours.map_or("-".into(), both));
            for m in &modes {
                match r.compiled.iter().find(|c| c.mode == *m).map(|c| &c.times) {
                    Some(Ok(t)) => {
                        let compile = t.first_step_s.map_or("-".into(), |s| format!("{s:.1}"));
                        let _ = write!(o, " {} | {compile} | {} |", both(t), over(t));
                    }
                    Some(Err(e)) => {
                        failures.push(format!("PyTorch {} on {} ({}) under torch.compile(mode={m}): {e}", r.model, r.device, r.precision));
                        o.push_str(" failed | - | - |");
                    }
                    None => o.push_str(" - | - | - |"),
                }
            }
            o.push('\n');
        }
        o.push_str("\nPyTorch compiled: its forward and loss under `torch.compile(mode)` (the backward AOTAutograd derives from them; the optimizer's step eager), pipelined (synced) ms; compile s: its first step, synchronized.\n");
        o
    }

    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let torch = match &self.torch {
            Ok(v) => format!("PyTorch {v}"),
            Err(why) => format!("PyTorch not measured ({why})"),
        };
        let p = &self.plan;
        let times = match self.rounds {
            1 => "median (min-max)".to_string(),
            n => format!("the median of {n} processes' medians, the rounds interleaved (the least and the most of them)"),
        };
        let _ = writeln!(o, "{} on {}; {torch}", self.date, self.machine);
        let _ = writeln!(o, "`{}`", self.command);
        let _ = writeln!(
            o,
            "{} warm-up steps (and more until a second has passed since the first); synced: {} steps each followed by a synchronize; pipelined: {} group(s) of {} steps after one untimed group, one synchronize per group. Times are ms per training step, {times}.\n",
            p.warmup, p.steps, p.groups, p.sync_every
        );
        o.push_str("| model | device | precision | batch | synced ms | pipelined ms | samples/s | s/epoch | vs our CPU | peak MiB | PyTorch ms (pipelined) | ours / PyTorch | PyTorch synced ms | ours / PyTorch synced | PyTorch peak MiB |\n");
        o.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        let mut failures = Vec::new();
        for r in &self.rows {
            let (synced, pipelined, sps, epoch, speedup, peak) = match &r.ours {
                Ok(t) => {
                    let sps = r.samples_per_s().unwrap_or(f64::NAN);
                    let vs_cpu = match self.cpu_row(&r.model, &r.precision).and_then(|c| c.ours.as_ref().ok()) {
                        Some(c) => format!("{:.2}x", c.pipelined.median_ms / t.pipelined.median_ms),
                        None => "-".into(),
                    };
                    (spread(&t.synced), spread(&t.pipelined), format!("{sps:.0}"), format!("{:.1}", r.epoch_samples as f64 / sps), vs_cpu, mib(t.peak_bytes))
                }
                Err(e) => {
                    failures.push(format!("{} on {} ({}): {e}", r.model, r.device, r.precision));
                    ("failed".into(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into())
                }
            };
            // PyTorch's pipelined and synced times, each with our time over it, and its peak.
            let none = || ["not measured".to_string(), "-".into(), "-".into(), "-".into(), "-".into()];
            let [torch_ms, ratio, torch_synced, synced_ratio, torch_peak] = match (&r.torch, &r.ours) {
                (None, _) => none(),
                (Some(Err(e)), _) => {
                    failures.push(format!("PyTorch {} on {} ({}): {e}", r.model, r.device, r.precision));
                    none()
                }
                (Some(Ok(t)), ours) => {
                    let over = |a: Option<f64>, b: f64| a.map_or("-".into(), |a| format!("{:.2}", a / b));
                    let ours = ours.as_ref().ok();
                    [
                        spread(&t.pipelined),
                        over(ours.map(|o| o.pipelined.median_ms), t.pipelined.median_ms),
                        spread(&t.synced),
                        over(ours.map(|o| o.synced.median_ms), t.synced.median_ms),
                        mib(t.peak_bytes),
                    ]
                }
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {synced} | {pipelined} | {sps} | {epoch} | {speedup} | {peak} | {torch_ms} | {ratio} | {torch_synced} | {synced_ratio} | {torch_peak} |",
                r.model, r.device, r.precision, r.batch
            );
        }
        o.push_str("\ns/epoch: the epoch's samples (MNIST 60,000; CIFAR-10 50,000 for resnet18 and vit) at the pipelined rate. vs our CPU: our CPU's pipelined time over this one. ours / PyTorch: below 1 we are faster (pipelined against pipelined, synced against synced). Peak: device buffers on a GPU, the process's heap on the CPU; PyTorch's, `torch.cuda.max_memory_allocated` on CUDA (none on its CPU).\n");
        o.push_str(&self.compiled_table(&mut failures));
        if !self.epochs.is_empty() {
            o.push_str("\n| real epoch through the DataLoader | device | batch | samples timed | steps | s | samples/s | s per full epoch |\n|---|---|---|---|---|---|---|---|\n");
            for e in &self.epochs {
                match &e.times {
                    Ok(t) => {
                        let sps = t.samples as f64 / t.seconds;
                        let _ = writeln!(
                            o,
                            "| {} (synthetic, MNIST-sized) | {} | {} | {} | {} | {:.2} | {sps:.0} | {:.1} |",
                            e.model,
                            e.device,
                            e.batch,
                            t.samples,
                            t.steps,
                            t.seconds,
                            e.full_epoch_samples as f64 / sps
                        );
                    }
                    Err(err) => failures.push(format!("epoch of {} on {}: {err}", e.model, e.device)),
                }
            }
        }
        let micro: Vec<_> = self.devices.iter().filter_map(|d| d.micro.as_ref().map(|m| (d, m))).collect();
        if !micro.is_empty() {
            o.push_str("\n| device | micro-benchmark | size | median ms | rate | device's peak copy |\n|---|---|---|---|---|---|\n");
            for (d, m) in micro {
                match m {
                    Ok(m) => {
                        for r in &m.rows {
                            let _ = writeln!(
                                o,
                                "| {} | {} | {} | {} | {:.1} {} | {:.1} GB/s |",
                                d.spec,
                                r.bench,
                                r.size,
                                ms(r.median_ms),
                                r.rate,
                                r.unit,
                                m.peak_copy_gbs
                            );
                        }
                    }
                    Err(e) => failures.push(format!("micro-benchmarks on {}: {e}", d.spec)),
                }
            }
        }
        let _ = writeln!(o, "\nDevices: {}", self.devices.iter().map(|d| format!("{} = {}", d.spec, d.name)).collect::<Vec<_>>().join("; "));
        for f in failures {
            let _ = writeln!(o, "- {f}");
        }
        o
    }
}
