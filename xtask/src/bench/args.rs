//! The options of `cargo xtask bench`, and those the per-model child processes it spawns take.

use std::path::PathBuf;

use clap::{Args, Parser};

/// `cargo xtask bench`: the zoo's training step on every device, micro-benchmarks, a real
/// epoch through the DataLoader, and (with `--torch`) PyTorch beside it.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(name = "cargo xtask bench", about)]
pub struct BenchArgs {
    /// Models to time, comma separated (default: the whole zoo of docs/MODEL_ZOO.md).
    #[arg(long, value_delimiter = ',', value_name = "NAME,..")]
    pub models: Vec<String>,
    /// Devices, comma separated: cpu, gpu:N, gpu (the first), all (default: the CPU and every
    /// hardware GPU; a software adapter such as lavapipe only when named).
    #[arg(long, value_delimiter = ',', value_name = "DEVICE,..")]
    pub device: Vec<String>,
    /// Precisions, comma separated: f32, f16 (mixed, with the dynamic loss scaler), bf16
    /// (mixed); each model is timed in each, PyTorch with `torch.autocast` (and `GradScaler` in f16).
    #[arg(long, visible_alias = "precisions", value_delimiter = ',', value_name = "P,..", default_value = "f32")]
    pub precision: Vec<String>,
    /// Under f16 and bf16, our products of fewer operations stay in f32 (default: `liandan
    /// train`'s, each precision's own; 0: every one in the low type, as `torch.autocast`).
    #[arg(long, value_name = "OPS")]
    pub autocast_min_ops: Option<u64>,
    #[command(flatten)]
    pub timing: Timing,
    /// Batch size for every model (default: each model's reference batch; --quick: at most 16).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,
    /// Small sizes and few steps: finishes in under two minutes on a 2-core machine.
    #[arg(long)]
    pub quick: bool,
    /// Also time PyTorch (xtask/bench_torch.py, one fresh Python per model) with the same
    /// batch, optimizer and precision.
    #[arg(long)]
    pub torch: bool,
    /// With --torch, also time PyTorch's step under `torch.compile` in these modes, comma
    /// separated: its forward and loss compiled, a fresh Python per model and mode, each compile's time
    /// reported beside the step's. A compile takes from seconds to a minute or more (resnet18,
    /// vit): --torch-compile-models keeps it to some models.
    #[arg(long, value_delimiter = ',', value_name = "MODE,..", requires = "torch", value_parser = clap::builder::PossibleValuesParser::new(COMPILE_MODES))]
    pub torch_compile: Vec<String>,
    /// The models timed under --torch-compile, comma separated (default: every model timed).
    #[arg(long, value_delimiter = ',', value_name = "NAME,..", requires = "torch_compile")]
    pub torch_compile_models: Vec<String>,
    /// The Python that has torch (default: python3).
    #[arg(long, default_value = "python3", value_name = "EXE")]
    pub python: String,
    /// Threads for both sides' CPU work (RAYON_NUM_THREADS, MATMUL_NUM_THREADS and
    /// OMP_NUM_THREADS of every child); default: the libraries' own choice. On a busy machine
    /// PyTorch's OpenMP threads spin on a core another process holds: 1 keeps both sides honest.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Skip the micro-benchmarks.
    #[arg(long)]
    pub no_micro: bool,
    /// Samples of the timed mnist_cnn epoch through the DataLoader (default 60,000; --quick: 1,280).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(64..))]
    pub epoch_samples: Option<u64>,
    /// Where bench.json and bench.png go.
    #[arg(long, default_value = "target/bench", value_name = "DIR")]
    pub out: PathBuf,
    /// Times each step in this many processes (ours and PyTorch's), the rounds interleaved:
    /// every model and precision once, then again. The small models' steps move between
    /// processes, so comparing precisions or builds wants several; a row then gives the median
    /// of the processes' medians and, in brackets, the least and the most of them.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
}

/// How a training step is timed.
#[derive(Args, Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Untimed steps first (default 5; --quick 1), and as many more as make up a second after
    /// the first (`step::WARMUP_SECS`: an idle GPU clocks up only after a while under load, and
    /// a driver may run kernels it has just compiled slower at first).
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,
    /// Timed steps, each synchronized (default 20; --quick 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: Option<u64>,
    /// Steps between synchronizations in the pipelined timing (default 10; --quick 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sync_every: Option<u64>,
    /// Groups of --sync-every steps in the pipelined timing (default 3; --quick 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub groups: Option<u64>,
}

/// The timing with the defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub warmup: u64,
    pub steps: u64,
    pub sync_every: u64,
    pub groups: u64,
}

impl Timing {
    pub fn plan(&self, quick: bool) -> Plan {
        let pick = |v: Option<u64>, full, fast| v.unwrap_or(if quick { fast } else { full });
        Plan { warmup: pick(self.warmup, 5, 1), steps: pick(self.steps, 20, 3), sync_every: pick(self.sync_every, 10, 3), groups: pick(self.groups, 3, 1) }
    }
}

/// The modes `torch.compile` takes.
pub const COMPILE_MODES: &[&str] = &["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"];

impl BenchArgs {
    /// The `torch.compile` modes to time `model` in.
    pub fn compile_modes(&self, model: &str) -> &[String] {
        match self.torch_compile_models.is_empty() || self.torch_compile_models.iter().any(|m| m == model) {
            true => &self.torch_compile,
            false => &[],
        }
    }

    /// The batch of a model whose reference batch is `reference`.
    pub fn batch_for(&self, reference: usize) -> usize {
        match self.batch {
            Some(b) => b as usize,
            None if self.quick => reference.min(16),
            None => reference,
        }
    }

    pub fn epoch_samples(&self) -> usize {
        self.epoch_samples.map_or(if self.quick { 1280 } else { 60_000 }, |n| n as usize)
    }
}

/// What one child process times: `xtask bench-model` (a training step) or `xtask bench-epoch`.
#[derive(Parser, Debug, Clone, PartialEq)]
pub struct ChildArgs {
    #[arg(long)]
    pub model: String,
    #[arg(long)]
    pub device: String,
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Ours only (see [`BenchArgs::autocast_min_ops`]).
    #[arg(long)]
    pub autocast_min_ops: Option<u64>,
    #[arg(long)]
    pub batch: usize,
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    #[arg(long, default_value_t = 20)]
    pub steps: u64,
    #[arg(long, default_value_t = 10)]
    pub sync_every: u64,
    #[arg(long, default_value_t = 3)]
    pub groups: u64,
    /// For bench-epoch: the samples of the epoch.
    #[arg(long, default_value_t = 60_000)]
    pub samples: usize,
    /// Ours only, on the GPU: the fused attention's backward on this many workgroups a head
    /// (`testing::Knobs::attention_sides`), so that one build times each spread.
    #[arg(long)]
    pub attention_sides: Option<u32>,
    /// Ours only, on the GPU: GELU and its gradient in the feed-forward block's f32 products
    /// (`testing::Knobs::gelu_epilogues`).
    #[arg(long)]
    pub gelu_epilogues: bool,
}

impl ChildArgs {
    /// The command line that reproduces `self` in a child.
    pub fn to_args(&self) -> Vec<String> {
        let mut v = self.to_torch_args();
        if let Some(n) = self.autocast_min_ops {
            v.extend(["--autocast-min-ops".to_string(), n.to_string()]);
        }
        if let Some(n) = self.attention_sides {
            v.extend(["--attention-sides".to_string(), n.to_string()]);
        }
        if self.gelu_epilogues {
            v.push("--gelu-epilogues".to_string());
        }
        v
    }

    /// [`ChildArgs::to_args`] without the flags only our side has, for `bench_torch.py`.
    pub fn to_torch_args(&self) -> Vec<String> {
        let mut v = vec![];
        for (k, val) in [
            ("--model", self.model.clone()),
            ("--device", self.device.clone()),
            ("--precision", self.precision.clone()),
            ("--batch", self.batch.to_string()),
            ("--warmup", self.warmup.to_string()),
            ("--steps", self.steps.to_string()),
            ("--sync-every", self.sync_every.to_string()),
            ("--groups", self.groups.to_string()),
            ("--samples", self.samples.to_string()),
        ] {
            v.push(k.to_string());
            v.push(val);
        }
        v
    }

    pub fn plan(&self) -> Plan {
        Plan { warmup: self.warmup, steps: self.steps, sync_every: self.sync_every, groups: self.groups }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_on_commas_and_defaults_fill_in() {
        let a = BenchArgs::try_parse_from(["bench", "--models", "mlp,vit", "--device", "cpu,gpu:0", "--quick", "--torch"]).unwrap();
        assert_eq!(a.models, ["mlp", "vit"]);
        assert_eq!(a.device, ["cpu", "gpu:0"]);
        assert_eq!(a.precision, ["f32"]);
        assert!(a.quick && a.torch);
        assert_eq!(a.timing.plan(a.quick), Plan { warmup: 1, steps: 3, sync_every: 3, groups: 1 });
        assert_eq!((a.batch_for(1024), a.batch_for(8)), (16, 8));
        assert_eq!(a.epoch_samples(), 1280);
        let full = BenchArgs::try_parse_from(["bench", "--steps", "7", "--batch", "32", "--out", "/tmp/x"]).unwrap();
        assert_eq!(full.timing.plan(false), Plan { warmup: 5, steps: 7, sync_every: 10, groups: 3 });
        assert_eq!(full.batch_for(128), 32);
        assert_eq!(full.out, PathBuf::from("/tmp/x"));
        let mixed = BenchArgs::try_parse_from(["bench", "--precisions", "f32,f16,bf16"]).unwrap();
        assert_eq!(mixed.precision, ["f32", "f16", "bf16"]);
        assert_eq!((mixed.rounds, BenchArgs::try_parse_from(["bench", "--rounds", "3"]).unwrap().rounds), (1, 3));
        assert!(BenchArgs::try_parse_from(["bench", "--rounds", "0"]).is_err());
    }

    #[test]
    fn compile_modes_apply_to_the_models_named() {
        let a = BenchArgs::try_parse_from(["bench", "--torch", "--torch-compile", "default,reduce-overhead", "--torch-compile-models", "vit"]).unwrap();
        assert_eq!(a.compile_modes("vit"), ["default", "reduce-overhead"]);
        assert!(a.compile_modes("mlp").is_empty());
        let all = BenchArgs::try_parse_from(["bench", "--torch", "--torch-compile", "reduce-overhead"]).unwrap();
        assert_eq!(all.compile_modes("mlp"), ["reduce-overhead"]);
        assert!(BenchArgs::try_parse_from(["bench"]).unwrap().compile_modes("mlp").is_empty());
        // Compiled PyTorch is PyTorch: without --torch there is none to compile.
        assert!(BenchArgs::try_parse_from(["bench", "--torch-compile", "default"]).is_err());
        assert!(BenchArgs::try_parse_from(["bench", "--torch", "--torch-compile", "fastest"]).is_err());
    }

    #[test]
    fn bad_numbers_are_refused() {
        for bad in [&["bench", "--steps", "0"][..], &["bench", "--batch", "-1"], &["bench", "--epoch-samples", "10"], &["bench", "--frob"]] {
            assert!(BenchArgs::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_child_command_line_parses_back_to_itself() {
        let c = ChildArgs {
            model: "lstm".into(),
            device: "gpu:1".into(),
            precision: "f32".into(),
            autocast_min_ops: Some(0),
            batch: 64,
            warmup: 2,
            steps: 9,
            sync_every: 4,
            groups: 2,
            samples: 640,
            attention_sides: Some(2),
            gelu_epilogues: true,
        };
        let back = ChildArgs::try_parse_from(std::iter::once("bench-model".to_string()).chain(c.to_args())).unwrap();
        assert_eq!(back, c);
    }
}
