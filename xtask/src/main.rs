//! Project chores. `cargo xtask bench [--quick] [--torch] [--models ..] [--device ..]
//! [--precision ..]` (`bench/`): the zoo's training step on every device, a real epoch through
//! the DataLoader and micro-benchmarks, PyTorch beside them with `--torch`; a Markdown table on
//! stdout, JSON and a PNG chart under `target/bench/` (`cargo xtask bench --help`). Benchmarks
//! are never tests: nothing here asserts a time. `cargo xtask bench-fusion [--device ..]
//! [--quick] [--torch [--python EXE]]` times the zoo `lstm` and Adam/SGD steps over resnet18
//! with fused kernels on and off, then what each zoo model's optimizer step adds to its
//! forward+backward and costs alone, beside PyTorch's with `--torch` (`fusion.rs`). `cargo xtask
//! bench-conv [--device ..] [--batch N] [--dtype f32|f16|bf16]
//! [--quick] [--sweep] [--cuts] [--only LAYER,..]` times resnet18's convolutions and the whole model with the fused
//! convolution kernels on and off, with peak memory, and each pass alone (under every tile and
//! split with `--sweep`, the tensor cores' in f16 and bf16; only the passes with `--cuts`, of
//! the layers named with `--only`)
//! (`conv.rs`). `cargo xtask bench-host [--device ..] [--ops N] [--reps
//! N] [--only TEXT] [--first-batch N]` times what recording an op costs the host, apart from
//! running it, and what a synchronize costs (`host.rs`). `cargo xtask docs [--check]` writes
//! `docs/SETTINGS.md` from the settings tables, or checks that it is current (`docs.rs`). `cargo xtask
//! fuzz [--cases N]` and `cargo xtask bench-loader` are the data chores of `data.rs`. `cargo
//! xtask kernel-stats [--ceiling] [TEXT ..]` prints the Vulkan driver's statistics of the wgpu
//! kernels (or with `--ceiling` the ceiling's) whose key contains every TEXT (registers, shared
//! and local memory on NVIDIA; `kernel_stats.rs`).
//! `cargo xtask ceiling [--quick] [--only TEXT,..]` times the GPU's arithmetic alone, the
//! matmuls' inner loops with the real kernel's parts added one at a time, and the `tall`
//! kernel with parts cut out, through wgpu (`ceiling.rs`). `cargo xtask cycles [CRATE_DIR ..]`
//! lists the import circles between each crate's files (`cycles.rs`). `cargo xtask shader [KEY]`
//! prints the assembled WGSL of one kernel variant, or every variant's key (`shader.rs`).

mod bench;
mod ceiling;
mod conv;
mod cycles;
mod data;
mod docs;
mod fusion;
mod host;
mod kernel_stats;
mod raw_latency;
mod settings;
mod shader;
mod vulkan;

use liandan_tensor::Device;

// Linking the backends registers their devices.
use liandan_backend_cpu as _;
use liandan_backend_wgpu as _;

#[global_allocator]
static ALLOCATOR: data::Tracking = data::Tracking;

use bench::micro::time;

/// Changes the wgpu backend's testing knobs on `device` (for the chores here, which run on one
/// thread); `false` for a device of another backend, which has none.
pub fn set_knobs(device: &Device, f: impl FnOnce(&mut liandan_backend_wgpu::testing::Knobs)) -> liandan_tensor::Result<bool> {
    let Some(backend) = liandan_backend_wgpu::WgpuBackend::of(device) else { return Ok(false) };
    let mut options = backend.options();
    f(&mut options.testing);
    backend.set_options(options)?;
    Ok(true)
}

fn devices(spec: Option<&str>) -> std::result::Result<Vec<Device>, String> {
    match spec {
        None | Some("all") => {
            let mut all = vec![Device::cpu()];
            all.extend(Device::gpus());
            Ok(all)
        }
        Some(s) => Device::parse(s).map(|d| vec![d]).map_err(|e| e.to_string()),
    }
}

const USAGE: &str = "usage: cargo xtask bench [--help] | bench-fusion [--device cpu|gpu|gpu:N|all] [--quick] [--torch [--python EXE]] | bench-conv [--device ..] [--batch N] [--dtype f32|f16|bf16] [--quick] [--sweep] [--cuts] [--only LAYER,..] | bench-host [--device gpu] [--ops N] [--reps N] [--only TEXT] [--first-batch N] | docs [--check] | kernel-stats [--ceiling] [TEXT ..] | shader [KEY] [--no-f16] [--no-f64] [--immediates] | ceiling [--quick] [--only TEXT,..] | cycles [CRATE_DIR ..] | fuzz [--cases N] | bench-loader";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The chores that parse their own flags would ignore a request for help and start work;
    // `bench` and its children answer it themselves.
    let own_help = matches!(args.first().map(String::as_str), Some("bench" | "bench-model" | "bench-epoch" | "bench-micro"));
    if !own_help && args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let spec = args.iter().position(|a| a == "--device").map(|i| args.get(i + 1).map(String::as_str).unwrap_or(""));
    let chore = match args.first().map(String::as_str) {
        Some("fuzz") => Some(data::fuzz_all(&args)),
        Some("bench-loader") => Some(data::bench_loader()),
        Some("bench") => Some(bench::run(&args)),
        Some("bench-conv") => Some(bench_conv(&args, spec, quick)),
        Some("bench-host") => Some(host::bench_host(&args)),
        Some("docs") => Some(docs::run(&args)),
        Some("kernel-stats") => Some(kernel_stats::run(&args)),
        Some("ceiling") => Some(ceiling::run(&args)),
        Some("cycles") => Some(cycles::run(&args)),
        Some(c @ ("bench-model" | "bench-epoch" | "bench-micro")) => Some(bench::child(c, &args)),
        Some("shader") => match shader::run(&args[1..]) {
            Ok(out) => {
                print!("{out}");
                return;
            }
            Err(e) => {
                eprintln!("xtask shader: {e}");
                std::process::exit(2);
            }
        },
        _ => None,
    };
    if let Some(result) = chore {
        if let Err(e) = result {
            eprintln!("xtask {}: {e}", args[0]);
            std::process::exit(1);
        }
        return;
    }
    if args.first().map(String::as_str) != Some("bench-fusion") {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let devices = devices(spec).unwrap_or_else(|e| {
        eprintln!("xtask bench-fusion: {e}");
        std::process::exit(2);
    });
    let python = args.iter().position(|a| a == "--python").and_then(|i| args.get(i + 1)).map(String::as_str).unwrap_or("python3");
    let python = args.iter().any(|a| a == "--torch").then_some(python);
    for d in devices {
        if let Err(e) = fusion::bench_fusion(&d, quick, python) {
            eprintln!("xtask bench-fusion on {d}: {e}");
            std::process::exit(1);
        }
    }
}

/// `cargo xtask bench-conv`: on the first GPU unless `--device` says otherwise.
fn bench_conv(args: &[String], spec: Option<&str>, quick: bool) -> Result<(), String> {
    let value = |flag: &str| args.iter().position(|a| a == flag).map(|i| args.get(i + 1).map(String::as_str).unwrap_or(""));
    let batch = match value("--batch") {
        None => 128,
        Some(v) => v.parse::<usize>().ok().filter(|&b| b > 0).ok_or_else(|| format!("--batch {v:?} is not a positive count"))?,
    };
    let dtype = match value("--dtype") {
        None | Some("f32") => liandan_tensor::DType::F32,
        Some("f16") => liandan_tensor::DType::F16,
        Some("bf16") => liandan_tensor::DType::BF16,
        Some(v) => return Err(format!("--dtype {v:?}: use f32, f16 or bf16")),
    };
    let devices = match spec {
        Some(_) => devices(spec)?,
        None => Device::gpus().into_iter().take(1).collect(),
    };
    if devices.is_empty() {
        return Err("no GPU found: pass --device cpu to time the CPU".into());
    }
    for d in devices {
        let flag = |f: &str| args.iter().any(|a| a == f);
        let only = value("--only").map(|v| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect()).unwrap_or_default();
        let parts = conv::Parts { quick, sweep: flag("--sweep"), cuts_only: flag("--cuts"), only };
        conv::bench_conv(&d, batch, dtype, parts).map_err(|e| format!("on {d}: {e}"))?;
    }
    Ok(())
}
