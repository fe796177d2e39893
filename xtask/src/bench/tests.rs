//! The bench's formatting from a fixed result set: the Markdown table's derived columns, the
//! JSON round trip, the chart file; and the step statistics. No timing is asserted.

use super::args::Plan;
use super::micro::{Micro, MicroRow};
use super::report::{Compiled, DeviceReport, EpochRow, Report, Row};
use super::step::{EpochTimes, Stats, StepTimes};

fn times(median_ms: f64) -> StepTimes {
    let s = Stats { median_ms, min_ms: median_ms * 0.9, max_ms: median_ms * 1.5 };
    StepTimes { synced: Stats { median_ms: median_ms * 1.2, ..s }, pipelined: s, peak_bytes: Some(64 << 20), first_step_s: None, host_phases: None }
}

fn row(model: &str, device: &str, ms: f64, torch: Option<Result<StepTimes, String>>) -> Row {
    Row { model: model.into(), device: device.into(), precision: "f32".into(), batch: 64, epoch_samples: 60_000, ours: Ok(times(ms)), torch, compiled: vec![] }
}

fn fixed() -> Report {
    let micro = Micro {
        peak_copy_gbs: 20.0,
        rows: vec![MicroRow { bench: "matmul f32".into(), size: "256x256x256".into(), median_ms: 1.0, rate: 33.5, unit: "GFLOP/s".into() }],
    };
    Report {
        date: "2026-11-23 06:00 UTC".into(),
        command: "cargo xtask bench --quick".into(),
        machine: "test CPU (2 cores)".into(),
        plan: Plan { warmup: 1, steps: 3, sync_every: 3, groups: 1 },
        rounds: 1,
        torch: Ok("2.15.0".into()),
        devices: vec![
            DeviceReport { spec: "cpu".into(), name: "our CPU backend".into(), micro: Some(Ok(micro)) },
            DeviceReport { spec: "gpu:0".into(), name: "Test GPU".into(), micro: Some(Err("no adapter".into())) },
        ],
        rows: vec![
            row("mnist_cnn", "cpu", 100.0, Some(Ok(StepTimes { peak_bytes: Some(96 << 20), ..times(50.0) }))),
            row("mnist_cnn", "gpu:0", 4.0, Some(Err("this PyTorch has no GPU 0".into()))),
            Row { ours: Err("out of memory".into()), ..row("vit", "cpu", 1.0, None) },
        ],
        epochs: vec![EpochRow {
            model: "mnist_cnn".into(),
            device: "cpu".into(),
            batch: 64,
            full_epoch_samples: 60_000,
            times: Ok(EpochTimes { samples: 6400, steps: 100, seconds: 8.0 }),
        }],
    }
}

fn line<'a>(md: &'a str, start: &str) -> &'a str {
    md.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no line starting {start:?} in\n{md}"))
}

#[test]
fn the_table_derives_rates_epochs_speedups_and_ratios() {
    let md = fixed().markdown();
    // batch 64 at 100 ms: 640 samples/s, 60,000 samples in 93.75 s; PyTorch 50 ms: ratio 2.00;
    // synced 120 ms against PyTorch's 60: 2.00; peak memory 64 MiB ours, 96 PyTorch's.
    let cpu = line(&md, "| mnist_cnn | cpu |");
    assert_eq!(
        cpu,
        "| mnist_cnn | cpu | f32 | 64 | 120 (90.0-150) | 100 (90.0-150) | 640 | 93.8 | 1.00x | 64 | 50.0 (45.0-75.0) | 2.00 | 60.0 (45.0-75.0) | 2.00 | 96 |"
    );
    let gpu = line(&md, "| mnist_cnn | gpu:0 |");
    assert!(gpu.contains("| 16000 | 3.8 | 25.00x |") && gpu.ends_with("| not measured | - | - | - | - |"), "{gpu}");
    assert!(line(&md, "| vit | cpu |").contains("| failed |"));
    assert!(md.contains("- vit on cpu (f32): out of memory") && md.contains("- PyTorch mnist_cnn on gpu:0 (f32): this PyTorch has no GPU 0"), "{md}");
    assert!(md.contains("- micro-benchmarks on gpu:0: no adapter"), "{md}");
    // 6,400 samples in 8 s: 800 samples/s, a 60,000-sample epoch in 75 s.
    assert!(line(&md, "| mnist_cnn (synthetic").ends_with("| 64 | 6400 | 100 | 8.00 | 800 | 75.0 |"), "{md}");
    assert_eq!(line(&md, "| cpu | matmul"), "| cpu | matmul f32 | 256x256x256 | 1.00 | 33.5 GFLOP/s | 20.0 GB/s |");
    assert!(md.contains("PyTorch 2.15.0") && md.contains("`cargo xtask bench --quick`"));
}

#[test]
fn without_torch_the_table_says_not_measured() {
    let mut r = fixed();
    r.torch = Err("run with --torch to measure it".into());
    for row in &mut r.rows {
        row.torch = None;
    }
    let md = r.markdown();
    assert!(md.contains("PyTorch not measured (run with --torch to measure it)"));
    assert!(line(&md, "| mnist_cnn | cpu |").ends_with("| not measured | - | - | - | - |"));
}

/// Rows with PyTorch's step under two modes of `torch.compile`: mnist_cnn on the CPU with both
/// (its default one 40 ms, compiled in 12.5 s; reduce-overhead unavailable), the vit with
/// reduce-overhead only.
fn compiled() -> Report {
    let mut r = fixed();
    let compiled = |mode: &str, ms: f64, compile_s: f64| Compiled { mode: mode.into(), times: Ok(StepTimes { first_step_s: Some(compile_s), ..times(ms) }) };
    r.rows[0].compiled = vec![
        compiled("default", 40.0, 12.5),
        Compiled { mode: "reduce-overhead".into(), times: Err("exited with exit status: 3: torch.compile is unavailable".into()) },
    ];
    r.rows[2] = Row { torch: Some(Ok(times(20.0))), compiled: vec![compiled("reduce-overhead", 8.0, 61.0)], ..row("vit", "gpu:0", 10.0, None) };
    r
}

#[test]
fn compiled_pytorch_sits_beside_eager_with_its_compile_time() {
    let md = compiled().markdown();
    assert!(md.contains("| model | device | precision | batch | ours ms | PyTorch eager ms | ours / eager | `default` ms | compile s | ours / `default` | `reduce-overhead` ms | compile s | ours / `reduce-overhead` |"), "{md}");
    // Ours 100 (synced 120) against eager 50 (60): 2.00; against the default compile's 40 (48),
    // compiled in 12.5 s: 2.50; reduce-overhead failed, and the failure is listed.
    let cpu = md.lines().filter(|l| l.starts_with("| mnist_cnn | cpu |")).nth(1).unwrap_or_else(|| panic!("no compiled row in\n{md}"));
    assert_eq!(cpu, "| mnist_cnn | cpu | f32 | 64 | 100 (120) | 50.0 (60.0) | 2.00 | 40.0 (48.0) | 12.5 | 2.50 | failed | - | - |");
    assert!(
        md.contains("- PyTorch mnist_cnn on cpu (f32) under torch.compile(mode=reduce-overhead): exited with exit status: 3: torch.compile is unavailable"),
        "{md}"
    );
    // The vit was compiled in one mode only: 10 ms against reduce-overhead's 8 (61.0 s): 1.25.
    assert!(md.lines().any(|l| l == "| vit | gpu:0 | f32 | 64 | 10.0 (12.0) | 20.0 (24.0) | 0.50 | - | - | - | 8.00 (9.60) | 61.0 | 1.25 |"), "{md}");
    // A model not compiled has no row there; without compiled results there is no such table.
    assert_eq!(md.lines().filter(|l| l.starts_with("| mnist_cnn | gpu:0 |")).count(), 1);
    assert!(!fixed().markdown().contains("compile s"));
    let back: Report = serde_json::from_str(&serde_json::to_string(&compiled()).unwrap()).unwrap();
    assert_eq!(back, compiled());
}

#[test]
fn json_round_trips_and_the_chart_is_a_png() {
    let dir = tempfile::tempdir().unwrap();
    let report = fixed();
    super::write_outputs(&report, dir.path()).unwrap();
    let back: Report = serde_json::from_slice(&std::fs::read(dir.path().join("bench.json")).unwrap()).unwrap();
    assert_eq!(back, report);
    let png = std::fs::read(dir.path().join("bench.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let img = image::load_from_memory(&png).unwrap().into_rgb8();
    assert_eq!(img.dimensions(), (1100, 560));
    // Something besides the white background and black axes was drawn (the bars).
    assert!(img.pixels().any(|p| p.0[0] != p.0[1] || p.0[1] != p.0[2]));
    assert!(!dir.path().join("bench.tmp").exists());
}

#[test]
fn stats_are_median_min_and_max_in_milliseconds() {
    let s = Stats::of(vec![0.003, 0.001, 0.002, 0.010]).unwrap();
    assert!((s.median_ms - 2.5).abs() < 1e-9 && (s.min_ms, s.max_ms) == (1.0, 10.0), "{s:?}");
    let s = Stats::of(vec![0.003, 0.001, 0.002]).unwrap();
    assert!((s.median_ms - 2.0).abs() < 1e-9, "{s:?}");
    assert!(Stats::of(vec![]).is_none());
    for p in ["f32", "f16", "bf16"] {
        assert_eq!(super::step::precision(p).unwrap().to_string(), p);
    }
    let Err(e) = super::step::precision("f8") else { panic!("f8 accepted") };
    assert!(e.contains("f8") && e.contains("f32"), "{e}");
}

/// `bench --rounds`: a row of several processes gives the median of their medians between the
/// least and the most; one process is its own row; the header says which.
#[test]
fn rounds_give_the_median_of_the_processes_medians() {
    let runs = [times(2.0), times(1.0), times(5.0)];
    let t = StepTimes::across(&runs).unwrap();
    assert_eq!((t.pipelined.median_ms, t.pipelined.min_ms, t.pipelined.max_ms), (2.0, 1.0, 5.0));
    assert!((t.synced.median_ms - 2.4).abs() < 1e-9 && (t.synced.max_ms - 6.0).abs() < 1e-9, "{t:?}");
    assert_eq!(StepTimes::across(&runs[..1]), Some(runs[0].clone()));
    assert_eq!(StepTimes::across(&[]), None);
    let mut r = fixed();
    assert!(r.markdown().contains("median (min-max)"));
    r.rounds = 3;
    assert!(r.markdown().contains("the median of 3 processes' medians"));
}

#[test]
fn dates_are_civil_utc() {
    let d = super::now_utc();
    assert!(d.len() == 20 && d.ends_with(" UTC") && d.starts_with("20"), "{d}");
}

#[test]
fn the_command_carries_the_settings_that_change_the_measurement() {
    let vars = [("PATH", "/bin"), ("LIANDAN_REQUIRE_GPU", "1"), ("LIANDAN_CONV_TF32", "1"), ("LIANDAN_AUTOTUNE", "1")];
    let got = super::switches(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    assert_eq!(got, "LIANDAN_AUTOTUNE=1 LIANDAN_CONV_TF32=1 ");
    assert_eq!(super::switches(std::iter::empty()), "");
}

#[test]
fn host_phases_split_a_step_and_the_rest_is_the_recording() {
    use liandan_backend_wgpu::testing::HostPhases;
    let before = HostPhases {
        submits: 10,
        meta_ns: 1_000,
        finish_ns: 2_000,
        submit_ns: 3_000,
        waits: 1,
        polls: 5,
        wait_ns: 4_000,
        reach_ns: 0,
        handed_finish_ns: 7_000,
        handed_submit_ns: 0,
        bind_groups_made: 40,
        dispatches: 100,
    };
    // Two steps of 1 ms: 30 + 20 + 40 + 60 + 200 us of parts a step, so 650 us recording.
    let after = HostPhases {
        submits: 16,
        meta_ns: 41_000,
        finish_ns: 82_000,
        submit_ns: 123_000,
        waits: 3,
        polls: 105,
        wait_ns: 404_000,
        reach_ns: 60_000,
        handed_finish_ns: 1_007_000,
        handed_submit_ns: 500_000,
        bind_groups_made: 41,
        dispatches: 900,
    };
    let line = super::step::phase_line(&before, &after, 2, 0.002);
    assert_eq!(
        line,
        "us a step: 1000.0 = recording 650.0 + waiting for the submit thread 30.0 + parameter writes 20.0 + finish 40.0 + submit 60.0 + waiting 200.0; the submit thread: finish 500.0, submit 250.0; a step: 400.0 dispatches, 3.00 submits, 1.00 waits, 50.0 polls, 0.5 bind groups made"
    );
}

/// The bench times the optimizer steps users run: on the wgpu backend, the fused multi-tensor
/// kernels of liandan-train's `wgpu` feature (one dispatch for the vae's ten parameters), not
/// the composite of elementwise ops a build without it would time.
#[test]
fn optimizer_steps_run_fused_on_the_gpu() {
    use liandan_nn::ModuleExt;
    let Some(d) = liandan_tensor::testing::gpu().unwrap_or_else(|e| panic!("{e}")) else { return };
    let model = liandan_nn::zoo::build("vae", &d).unwrap();
    let model: &dyn liandan_nn::zoo::ZooModel = &*model;
    let mut opt = super::step::zoo_optimizer(model).unwrap();
    let params = model.named_parameters();
    let mut step = || {
        for (_, p) in &params {
            p.set_grad(Some(p.ones_like().unwrap()));
        }
        d.synchronize().unwrap();
        let before = liandan_backend_wgpu::testing::dispatches_recorded();
        opt.step().unwrap();
        liandan_backend_wgpu::testing::dispatches_recorded() - before
    };
    step();
    let dispatches = step();
    assert!(dispatches < params.len() as u64, "an Adam step over {} parameters took {dispatches} dispatches", params.len());
}
