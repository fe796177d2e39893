//! `mpiexec -n 2 liandan ...`, as a user runs data-parallel training (feature `mpi`; MPI's
//! launcher must be on PATH): two ranks at batch B end where one process at batch 2B does, on
//! the CPU and on the GPU; a killed rank ends the job; a job killed mid-run resumes exactly;
//! `info` shows each rank; ranks that disagree are told so.

#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use liandan_backend_cpu as _;
use liandan_nn::{checkpoint, Device};

/// One job at a time: each runs two processes, and the test machine may have two cores.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// How long a job may take before the test calls it hung: far more than any of them needs.
const HANG: Duration = Duration::from_secs(300);

const BIN: &str = env!("CARGO_BIN_EXE_liandan");

/// `mpiexec -n N liandan ARGS`, every rank on the CPU unless the args say otherwise, tagged so
/// that the test can find the ranks' processes.
fn mpiexec(n: usize, args: &[&str], tag: &str) -> Command {
    let mut c = Command::new("mpiexec");
    c.args(["-n", &n.to_string(), BIN]).args(args).env("LIANDAN_DEVICE", "cpu").env("DISTRIBUTED_TEST_JOB", tag);
    c
}

/// Runs `c` to the end, failing the test if it hangs.
fn finish(c: &mut Command) -> Output {
    let child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("mpiexec runs (install MPICH: apt-get install mpich)");
    wait(child)
}

fn wait(mut child: Child) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > HANG {
            let _ = child.kill();
            panic!("the MPI job hung: still running after {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The model's tensors of a training state, by name.
fn weights(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let mut t: Vec<(String, Vec<f32>)> = checkpoint::load(dir.join("last.safetensors"), &Device::cpu())
        .unwrap()
        .into_iter()
        .filter(|(n, _)| n.starts_with("model."))
        .map(|(n, t)| (n, t.to_vec::<f32>().unwrap()))
        .collect();
    t.sort_by(|a, b| a.0.cmp(&b.0));
    t
}

/// Ten SGD steps of the LSTM (no dropout, no BatchNorm) on `device`, at batch `batch`.
fn ten_sgd_steps(out: &Path, batch: usize, device: &str) -> Vec<String> {
    let args = ["train", "--model", "lstm", "--optimizer", "sgd", "--lr", "0.1", "--epochs", "1", "--limit-batches", "10", "--max-samples", "400"];
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend(["--batch-size".into(), batch.to_string(), "--device".into(), device.into(), "--out".into(), out.display().to_string()]);
    all
}

/// Trains alone at batch 16 and as two ranks at batch 8 on `device`, and compares.
fn two_ranks_match_one_at_twice_the_batch(device: &str) {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let (alone, ranks) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = Command::new(BIN).args(ten_sgd_steps(alone.path(), 16, device)).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let args = ten_sgd_steps(ranks.path(), 8, device);
    let o = finish(&mut mpiexec(2, &args.iter().map(String::as_str).collect::<Vec<_>>(), "match"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("data parallel over 2 MPI ranks") && out.contains("2 ranks step as one batch of 16"), "{out}");
    assert_eq!(out.matches("epoch 1/1").count(), 1, "rank 0 alone prints progress:\n{out}");
    assert!(out.contains("all-reduce over 2 ranks"), "{out}");
    let (a, b) = (weights(alone.path()), weights(ranks.path()));
    assert_eq!(a.len(), b.len());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        let worst = x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-5, "{name}: 2 ranks at batch 8 differ from 1 at batch 16 by {worst} after 10 SGD steps ({device})");
    }
}

#[test]
fn two_cpu_ranks_train_as_one_rank_at_twice_the_batch() {
    two_ranks_match_one_at_twice_the_batch("cpu");
}

#[test]
fn two_gpu_ranks_train_as_one_rank_at_twice_the_batch() {
    let required = std::env::var("LIANDAN_REQUIRE_GPU").is_ok_and(|v| v != "0");
    if Device::gpus().is_empty() && !required {
        eprintln!("skipping: wgpu found no adapter (install mesa-vulkan-drivers for lavapipe)");
        return;
    }
    two_ranks_match_one_at_twice_the_batch("gpu");
}

/// A short mnist_cnn run on 128 bundled images at batch 16, as two ranks.
fn mnist(out: &Path, epochs: &str) -> Vec<String> {
    ["train", "--max-samples", "128", "--batch-size", "16", "--epochs", epochs, "--out", out.to_str().unwrap()].iter().map(|s| s.to_string()).collect()
}

/// The process ids of rank `rank` of the job tagged `tag`, found by their environment.
#[cfg(target_os = "linux")]
fn rank_pid(tag: &str, rank: usize) -> Option<u32> {
    let want = [format!("DISTRIBUTED_TEST_JOB={tag}"), format!("PMI_RANK={rank}")];
    std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|pid| {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        cmd.starts_with(BIN.as_bytes()) && want.iter().all(|w| vars.contains(&w.as_bytes()))
    })
}

/// Starts a job of `args`, waits until it has saved its first training state, SIGKILLs `rank`,
/// and returns what the job said. The rank's process is found before the save, so that the
/// kill lands while the job is still training.
#[cfg(target_os = "linux")]
fn kill_rank_after_first_save(args: &[String], out: &Path, tag: &str, rank: usize) -> Output {
    let mut child = mpiexec(2, &args.iter().map(String::as_str).collect::<Vec<_>>(), tag).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    let mut pid = None;
    while pid.is_none() || !out.join("last.safetensors").exists() {
        assert!(child.try_wait().unwrap().is_none(), "the job ended before its rank could be killed:\n{}", text(&wait(child)));
        assert!(start.elapsed() < HANG, "no training state after {HANG:?}");
        pid = pid.or_else(|| rank_pid(tag, rank));
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = pid.expect("found above");
    assert!(Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    wait(child)
}

#[cfg(target_os = "linux")]
#[test]
fn a_killed_rank_ends_the_job_with_an_error() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let o = kill_rank_after_first_save(&mnist(dir.path(), "100"), dir.path(), "killed", 1);
    assert!(!o.status.success(), "{}", text(&o));
}

#[cfg(target_os = "linux")]
#[test]
fn a_job_killed_mid_run_resumes_to_the_uninterrupted_weights() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let (straight, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = finish(&mut mpiexec(2, &mnist(straight.path(), "4").iter().map(String::as_str).collect::<Vec<_>>(), "straight"));
    assert!(o.status.success(), "{}", text(&o));
    let o = kill_rank_after_first_save(&mnist(dir.path(), "4"), dir.path(), "resumed", 0);
    assert!(!o.status.success(), "{}", text(&o));
    let mut resume = mnist(dir.path(), "4");
    resume.push("--resume".into());
    let o = finish(&mut mpiexec(2, &resume.iter().map(String::as_str).collect::<Vec<_>>(), "resumed"));
    assert!(o.status.success(), "{}", text(&o));
    assert!(weights(straight.path()) == weights(dir.path()), "the resumed job's weights differ from the uninterrupted job's");
    let best = |d: &Path| std::fs::read(d.join("best.safetensors")).unwrap();
    assert!(best(straight.path()) == best(dir.path()));

    // The state records its two ranks: one process may not continue it.
    let o = Command::new(BIN).args(&resume).env("LIANDAN_DEVICE", "cpu").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("trained by 2 rank(s) and this run has 1"), "{}", text(&o));
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_every_rank_after_saving() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let child = mpiexec(2, &mnist(dir.path(), "100").iter().map(String::as_str).collect::<Vec<_>>(), "ctrl-c")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (last, start) = (dir.path().join("last.safetensors"), Instant::now());
    while !last.exists() {
        assert!(start.elapsed() < HANG, "no training state after {HANG:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // mpiexec passes Ctrl-C on to every rank.
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = wait(child);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("interrupted at epoch") && err.contains("resume"), "{}", text(&o));
}

#[test]
fn info_shows_every_rank_and_its_device() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let o = finish(&mut mpiexec(2, &["info"], "info"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("MPI job of 2 ranks"), "{out}");
    assert!(out.contains("rank 0 of 2 (local rank 0 of 2): cpu") && out.contains("rank 1 of 2 (local rank 1 of 2): cpu"), "{out}");
}

#[test]
fn ranks_that_run_different_models_are_told_which_tensor_differs() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let common = ["--max-samples", "32", "--batch-size", "8", "--epochs", "1", "--out", out];
    // One launcher, two programs (MPMD): each rank its own command line.
    let o = finish(
        Command::new("mpiexec")
            .env("LIANDAN_DEVICE", "cpu")
            .args(["-n", "1", BIN, "train", "--model", "mnist_cnn"])
            .args(common)
            .args([":", "-n", "1", BIN, "train", "--model", "lstm"])
            .args(common),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(err.contains("the ranks run different models or settings") && err.contains("on rank 0 but"), "{}", text(&o));
}

#[test]
fn gpus_flag_starts_the_ranks_itself() {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(BIN);
    c.args(["train", "--gpus", "2", "--max-samples", "32", "--batch-size", "8", "--epochs", "1", "--out", dir.path().to_str().unwrap()])
        .env("LIANDAN_DEVICE", "cpu");
    let o = finish(&mut c);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("data parallel over 2 MPI ranks") && dir.path().join("last.safetensors").is_file(), "{out}");
}
