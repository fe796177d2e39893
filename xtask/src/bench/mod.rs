//! `cargo xtask bench`: the zoo's training step on every device and precision, each model in a
//! fresh process (this binary spawned again as `xtask bench-model`), PyTorch beside it with
//! `--torch` (`xtask/bench_torch.py`, also one process per model, and per `torch.compile` mode
//! with `--torch-compile`), a real epoch through the
//! DataLoader and micro-benchmarks; a Markdown table on stdout, `bench.json` and `bench.png`
//! under `--out` (default `target/bench`).

pub mod args;
mod chart;
pub mod micro;
pub mod report;
pub mod step;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::process::Command;

use clap::Parser;
use liandan_nn::zoo;
use liandan_tensor::{Device, DeviceKind};
use serde::de::DeserializeOwned;

use args::{BenchArgs, ChildArgs};
use report::{Compiled, DeviceReport, EpochRow, Report, Row};
use step::StepTimes;

type Fallible<T> = Result<T, String>;

/// The child entry points: `bench-model`, `bench-epoch`, `bench-micro`. Each prints one JSON
/// line on stdout. `bench-micro --device D` runs the micro-benchmarks; with `--f16-matmul`,
/// `--f16-tiles`, `--heads`, `--short-k`, `--vit-f16`, `--vit-f16-cuts` or `--attention` only
/// the f16 squares, the f16 squares on each tensor-core layout, the attention products at 1 to
/// 384 heads, vit's MLP product at depths 64 to 3,072, vit's linear layers in f16, vit's f16
/// products under each tensor-core layout, or vit's fused attention in f32 and f16 (`micro.rs`).
pub fn child(command: &str, argv: &[String]) -> Fallible<()> {
    let json = match command {
        "bench-micro" => {
            let spec = argv.iter().position(|a| a == "--device").and_then(|i| argv.get(i + 1)).ok_or("bench-micro needs --device")?;
            let device = Device::parse(spec).map_err(|e| e.to_string())?;
            let quick = argv.iter().any(|a| a == "--quick");
            let micro = if argv.iter().any(|a| a == "--f16-matmul") {
                micro::matmul_f16(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--f16-tiles") {
                micro::matmul_f16_tiles(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--heads") {
                micro::heads(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--short-k") {
                micro::short_k(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--vit-f16-cuts") {
                micro::vit_f16_cuts(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--attention") {
                micro::attention(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else if argv.iter().any(|a| a == "--vit-f16") {
                micro::vit_f16(&device, quick).map(|rows| micro::Micro { peak_copy_gbs: 0.0, rows })
            } else {
                micro::run(&device, quick)
            };
            serde_json::to_string(&micro.map_err(|e| e.to_string())?)
        }
        _ => {
            let a = ChildArgs::try_parse_from(argv).map_err(|e| e.to_string())?;
            // On the CPU the steps run on the kernels' pool, as `Trainer::fit` runs them.
            let device = Device::parse(&a.device).map_err(|e| e.to_string())?;
            let json = liandan_backend_cpu::on_pool_for(&device, || -> Fallible<String> {
                let json = if command == "bench-epoch" { serde_json::to_string(&step::time_epoch(&a)?) } else { serde_json::to_string(&step::time_steps(&a)?) };
                json.map_err(|e| e.to_string())
            });
            Ok(json?)
        }
    };
    println!("{}", json.map_err(|e| e.to_string())?);
    Ok(())
}

/// Runs `program args`, and parses the last line of its stdout as JSON; a failure carries the
/// last line of its stderr.
fn spawn_json<T: DeserializeOwned>(program: &Path, args: &[String], threads: Option<u64>) -> Fallible<T> {
    spawn_json_env(program, args, threads, &[])
}

/// [`spawn_json`] with more environment variables set in the child.
fn spawn_json_env<T: DeserializeOwned>(program: &Path, args: &[String], threads: Option<u64>, env: &[(&str, &str)]) -> Fallible<T> {
    let mut command = Command::new(program);
    command.envs(env.iter().copied());
    if let Some(n) = threads {
        for var in ["RAYON_NUM_THREADS", "MATMUL_NUM_THREADS", "OMP_NUM_THREADS"] {
            command.env(var, n.to_string());
        }
    }
    let out = command.args(args).output().map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
        return Err(format!("exited with {}: {last}", out.status));
    }
    let line = stdout.lines().rev().find(|l| l.starts_with('{')).ok_or_else(|| format!("printed no result: {}", stdout.trim()))?;
    serde_json::from_str(line).map_err(|e| format!("printed an unreadable result ({e}): {line}"))
}

/// The f16 matmul rows of a GPU's micro-benchmarks beside the tensor-core ones `micro::run`
/// measured: the ordinary kernels (a child with `LIANDAN_COOP_MATRIX=0`) and, with `--torch`,
/// PyTorch's products on its device (`bench_torch.py --matmul`: the f16 squares, and the f32
/// squares and zoo products with TF32 off, timed as ours). A failure becomes a row that says so.
fn f16_matmul_rows(exe: &Path, micro_args: &[String], a: &BenchArgs, script: &Path, spec: &str) -> Vec<micro::MicroRow> {
    let failed = |bench: &str, e: String| {
        eprintln!("bench: {bench} failed: {e}");
        micro::MicroRow { bench: format!("{bench} (failed: {e})"), size: "-".into(), median_ms: 0.0, rate: 0.0, unit: "GFLOP/s".into() }
    };
    let mut args = micro_args.to_vec();
    args.push("--f16-matmul".into());
    let mut rows = match spawn_json_env::<micro::Micro>(exe, &args, a.threads, &[("LIANDAN_COOP_MATRIX", "0")]) {
        Ok(m) => m.rows,
        Err(e) => vec![failed("matmul f16 (LIANDAN_COOP_MATRIX=0)", e)],
    };
    if a.torch {
        let mut args = vec![script.display().to_string(), "--matmul".into(), "--device".into(), torch_device(spec)];
        if a.quick {
            args.push("--quick".into());
        }
        match spawn_json::<micro::Micro>(Path::new(&a.python), &args, a.threads) {
            Ok(m) => rows.extend(m.rows),
            Err(e) => rows.push(failed("matmul (PyTorch)", e)),
        }
    }
    rows
}

/// The devices to measure, as child processes name them (`cpu`, `gpu:N`), with their names.
fn devices(specs: &[String]) -> Fallible<Vec<(String, String)>> {
    let gpus = Device::gpus();
    let named = |i: usize, d: &Device| (format!("gpu:{i}"), d.backend().name());
    if specs.is_empty() || specs.iter().any(|s| s == "all") {
        let mut all = vec![("cpu".to_string(), "our CPU backend".to_string())];
        // A software adapter (lavapipe) is slower than our CPU backend: only when named.
        all.extend(gpus.iter().enumerate().filter(|(_, d)| d.kind() != DeviceKind::SoftwareGpu).map(|(i, d)| named(i, d)));
        return Ok(all);
    }
    specs
        .iter()
        .map(|s| {
            let d = Device::parse(s).map_err(|e| e.to_string())?;
            Ok(match gpus.iter().position(|g| g.same(&d)) {
                Some(i) => named(i, &d),
                None => ("cpu".to_string(), "our CPU backend".to_string()),
            })
        })
        .collect()
}

/// The PyTorch device standing for ours: the CPU, or the N-th CUDA device (MPS on a Mac).
fn torch_device(spec: &str) -> String {
    match spec.strip_prefix("gpu:") {
        Some(n) => format!("gpu:{n}"),
        None => "cpu".into(),
    }
}

/// The machine: its CPU model and core count (from /proc/cpuinfo where there is one).
fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|m| m.trim().to_string()));
    format!("{} ({cores} cores)", model.unwrap_or_else(|| std::env::consts::ARCH.to_string()))
}

/// Today's date and time in UTC, from the system clock.
fn now_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

pub fn run(argv: &[String]) -> Fallible<()> {
    let a = BenchArgs::try_parse_from(argv).unwrap_or_else(|e| e.exit());
    let models: Vec<String> = if a.models.is_empty() { zoo::SPECS.iter().map(|s| s.name.to_string()).collect() } else { a.models.clone() };
    for m in &models {
        zoo::spec(m).map_err(|e| format!("--models: {e}"))?;
    }
    for p in &a.precision {
        step::precision(p).map_err(|e| format!("--precision: {e}"))?;
    }
    for m in &a.torch_compile_models {
        zoo::spec(m).map_err(|e| format!("--torch-compile-models: {e}"))?;
    }
    let devices = devices(&a.device).map_err(|e| format!("--device: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program to spawn it again: {e}"))?;
    let plan = a.timing.plan(a.quick);
    let torch = if a.torch { torch_version(&a.python) } else { Err("run with --torch to measure it".into()) };
    // Where this was built, else the checkout the binary runs in (a machine without Rust).
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench_torch.py");
    let script = if built.is_file() { built } else { Path::new("xtask/bench_torch.py").to_path_buf() };

    let mut device_reports = Vec::new();
    for (spec, name) in &devices {
        let micro = (!a.no_micro).then(|| {
            eprintln!("bench: micro-benchmarks on {spec}");
            let mut args = vec!["bench-micro".to_string(), "--device".into(), spec.clone()];
            if a.quick {
                args.push("--quick".into());
            }
            let mut micro: Fallible<micro::Micro> = spawn_json(&exe, &args, a.threads);
            if let (Ok(m), true) = (&mut micro, spec != "cpu") {
                m.rows.extend(f16_matmul_rows(&exe, &args, &a, &script, spec));
            }
            micro
        });
        device_reports.push(DeviceReport { spec: spec.clone(), name: name.clone(), micro });
    }
    // Each row's children, run once a round: every row in one round before the next, so that a
    // row's processes are spread over the run as the others' are.
    struct Job {
        child: ChildArgs,
        epoch_samples: usize,
        ours: Vec<Fallible<StepTimes>>,
        torch: Vec<Fallible<StepTimes>>,
        compiled: Vec<(String, Vec<Fallible<StepTimes>>)>,
    }
    let mut jobs = Vec::new();
    for precision in &a.precision {
        for model in &models {
            let spec = zoo::spec(model).map_err(|e| e.to_string())?;
            let batch = a.batch_for(spec.input_shape[0]);
            let epoch_samples = if spec.input_shape.get(1) == Some(&3) { 50_000 } else { 60_000 };
            for (device, _) in &devices {
                let child = ChildArgs {
                    model: model.clone(),
                    device: device.clone(),
                    precision: precision.clone(),
                    autocast_min_ops: a.autocast_min_ops,
                    batch,
                    warmup: plan.warmup,
                    steps: plan.steps,
                    sync_every: plan.sync_every,
                    groups: plan.groups,
                    samples: 0,
                    attention_sides: None,
                    gelu_epilogues: false,
                };
                let compiled = match torch.is_ok() {
                    true => a.compile_modes(model).iter().map(|m| (m.clone(), vec![])).collect(),
                    false => vec![],
                };
                jobs.push(Job { child, epoch_samples, ours: vec![], torch: vec![], compiled });
            }
        }
    }
    for round in 1..=a.rounds {
        for job in &mut jobs {
            let ChildArgs { model, device, precision, batch, .. } = &job.child;
            let of = if a.rounds > 1 { format!(", round {round} of {}", a.rounds) } else { String::new() };
            eprintln!("bench: {model} on {device} ({precision}, batch {batch}{of})");
            let ours: Fallible<StepTimes> = spawn_json(&exe, &[vec!["bench-model".to_string()], job.child.to_args()].concat(), a.threads);
            if let Some(line) = ours.as_ref().ok().and_then(|t| t.host_phases.as_deref()) {
                eprintln!("bench: {line}");
            }
            job.ours.push(ours);
            if torch.is_err() {
                continue;
            }
            let mut args = vec![script.display().to_string(), "--json".into()];
            args.extend(ChildArgs { device: torch_device(device), ..job.child.clone() }.to_torch_args());
            job.torch.push(spawn_json(Path::new(&a.python), &args, a.threads));
            for (mode, times) in &mut job.compiled {
                eprintln!("bench: PyTorch {model} on {device} ({precision}) under torch.compile(mode={mode}){of}");
                let args = [args.clone(), vec!["--compile".into(), mode.clone()]].concat();
                times.push(spawn_json(Path::new(&a.python), &args, a.threads));
            }
        }
    }
    let rows = jobs
        .into_iter()
        .map(|job| Row {
            ours: across(job.ours),
            torch: torch.is_ok().then(|| across(job.torch)),
            compiled: job.compiled.into_iter().map(|(mode, times)| Compiled { mode, times: across(times) }).collect(),
            model: job.child.model,
            device: job.child.device,
            precision: job.child.precision,
            batch: job.child.batch,
            epoch_samples: job.epoch_samples,
        })
        .collect();
    let mut epochs = Vec::new();
    for (device, _) in &devices {
        let batch = a.batch.map_or(64, |b| b as usize);
        let child = ChildArgs {
            model: "mnist_cnn".into(),
            device: device.clone(),
            precision: "f32".into(),
            autocast_min_ops: a.autocast_min_ops,
            batch,
            warmup: plan.warmup,
            steps: 0,
            sync_every: 1,
            groups: 1,
            samples: a.epoch_samples(),
            attention_sides: None,
            gelu_epilogues: false,
        };
        eprintln!("bench: an epoch of mnist_cnn on {device} through the DataLoader ({} samples)", child.samples);
        let times = spawn_json(&exe, &[vec!["bench-epoch".to_string()], child.to_args()].concat(), a.threads);
        epochs.push(EpochRow { model: "mnist_cnn".into(), device: device.clone(), batch, full_epoch_samples: 60_000, times });
    }
    let command = format!("{}cargo xtask {}", switches(std::env::vars()), argv.join(" "));
    let report = Report { date: now_utc(), command, machine: machine(), plan, rounds: a.rounds, torch, devices: device_reports, rows, epochs };
    print!("{}", report.markdown());
    write_outputs(&report, &a.out)
}

/// One row's times from its rounds' processes ([`StepTimes::across`]); the first failure where
/// one failed.
fn across(runs: Vec<Fallible<StepTimes>>) -> Fallible<StepTimes> {
    let runs = runs.into_iter().collect::<Fallible<Vec<_>>>()?;
    StepTimes::across(&runs).ok_or_else(|| "not timed".to_string())
}

/// `bench.json` and `bench.png` in `dir`, each written whole then renamed into place.
pub fn write_outputs(report: &Report, dir: &Path) -> Fallible<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {} ({e}); pass --out with a writable directory", dir.display()))?;
    let json = serde_json::to_vec_pretty(report).map_err(|e| e.to_string())?;
    write_atomic(&dir.join("bench.json"), &json)?;
    write_atomic(&dir.join("bench.png"), &chart::png(report)?)?;
    eprintln!("bench: wrote {} and {}", dir.join("bench.json").display(), dir.join("bench.png").display());
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Fallible<()> {
    use std::io::Write;
    let fail = |e: std::io::Error| format!("cannot write {} ({e})", path.display());
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(fail)?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// PyTorch's version, or why it cannot be measured.
fn torch_version(python: &str) -> Fallible<String> {
    let out = Command::new(python)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .map_err(|e| format!("`{python}` does not run ({e}); pass --python"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!("`{python}` cannot import torch"))
    }
}

/// The `LIANDAN_*` settings of this run that change what is measured, as a command line's
/// prefix (`LIANDAN_CONV_TF32=1 `), sorted, so that the report's command reproduces the run;
/// `LIANDAN_REQUIRE_GPU` (whether a missing GPU fails) is left out.
fn switches(vars: impl Iterator<Item = (String, String)>) -> String {
    let mut set: Vec<String> = vars.filter(|(k, _)| k.starts_with("LIANDAN_") && k != "LIANDAN_REQUIRE_GPU").map(|(k, v)| format!("{k}={v} ")).collect();
    set.sort();
    set.concat()
}
