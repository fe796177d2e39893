//! The `liandan` command, run as a user runs it.

use std::process::{Command, Output};

mod common;
use common::{assert_usage_error, text};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).output().expect("the liandan binary runs")
}

#[test]
fn zoo_lists_the_seven_models_with_their_parameter_counts() {
    let o = liandan(&["zoo"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    for (name, params) in [
        ("mlp", "658698"),
        ("mnist_cnn", "1199882"),
        ("seed003_cnn", "831626"),
        ("resnet18", "11173962"),
        ("vit", "2693578"),
        ("lstm", "295434"),
        ("vae", "652824"),
    ] {
        let line = out.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing:\n{out}"));
        assert!(line.contains(params), "{line}");
    }
}

#[test]
fn summary_prints_the_layers_of_a_zoo_model() {
    let o = liandan(&["summary", "lstm", "--batch", "4"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("LSTM-1") && out.contains("[4, 28, 256]"), "{out}");
    assert!(out.contains("Linear-2") && out.contains("[4, 10]"), "{out}");
    assert!(out.contains("Total params: 295,434"), "{out}");
}

#[test]
fn bad_arguments_are_explained_not_panicked_on() {
    for (args, needle) in [
        (&["summary"][..], "<MODEL>"),
        (&["summary", "alexnet"][..], "no model named `alexnet`"),
        (&["summary", "vit", "--batch", "zero"][..], "positive whole number"),
        (&["summary", "vit", "--batch"][..], "a value is required for '--batch"),
        (&["summary", "vit", "--frobnicate"][..], "unexpected argument"),
        (&["frobnicate"][..], "unrecognized subcommand"),
    ] {
        assert_usage_error(args, &liandan(args), needle);
    }
}

/// A tiny training run on the CPU: 64 bundled images in batches of 16.
fn tiny_train(out: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liandan"));
    c.env("LIANDAN_DEVICE", "cpu").args(["train", "--max-samples", "64", "--batch-size", "16", "--out"]).arg(out).args(extra);
    c
}

/// Mesa's Vulkan layers print `error: XDG_RUNTIME_DIR is invalid or not set` where an instance
/// enables the window systems' extensions and the variable is unset (the backend's does not).
#[test]
fn info_prints_no_driver_noise_on_stderr() {
    let o = Command::new(env!("CARGO_BIN_EXE_liandan")).arg("info").env_remove("XDG_RUNTIME_DIR").output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("best:"), "{out}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
}

#[test]
fn train_writes_its_files_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    // `--conv-tf32` (f32 convolutions on GPU tensor cores) is accepted and changes nothing here.
    let o = tiny_train(dir.path(), &["--epochs", "1", "--conv-tf32"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("device: cpu") && out.contains("mnist_cnn (1,199,882 parameters)") && out.contains("epoch 1/1"), "{out}");
    assert!(!out.contains("Total params"), "the layer table is for --summary:\n{out}");
    for f in ["best.safetensors", "last.safetensors", "history.csv", "history.json", "history.png"] {
        assert!(out.contains(&dir.path().join(f).display().to_string()), "{f} not named:\n{out}");
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    let best = dir.path().join("best.safetensors");
    let o = liandan(&["eval", "--model", "mnist_cnn", "--checkpoint", best.to_str().unwrap(), "--max-samples", "32", "--device", "cpu"]);
    assert!(o.status.success() && text(&o).0.contains("accuracy"), "{:?}", text(&o));
    let o = liandan(&["plot", dir.path().join("history.csv").to_str().unwrap(), "--out", dir.path().join("again.png").to_str().unwrap()]);
    assert!(o.status.success() && dir.path().join("again.png").is_file(), "{:?}", text(&o));
}

#[test]
fn a_run_killed_mid_training_resumes_to_the_uninterrupted_weights() {
    let straight = tempfile::tempdir().unwrap();
    assert!(tiny_train(straight.path(), &["--epochs", "3"]).output().unwrap().status.success());
    let dir = tempfile::tempdir().unwrap();
    let mut child = tiny_train(dir.path(), &["--epochs", "3"]).stdout(std::process::Stdio::null()).spawn().unwrap();
    let last = dir.path().join("last.safetensors");
    while !last.exists() && child.try_wait().unwrap().is_none() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to save anything more
    child.wait().unwrap();
    let o = tiny_train(dir.path(), &["--epochs", "3", "--resume"]).output().unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let a = std::fs::read(straight.path().join("best.safetensors")).unwrap();
    let b = std::fs::read(dir.path().join("best.safetensors")).unwrap();
    assert!(a == b, "the resumed run's best weights differ from the uninterrupted run's");
}

#[cfg(unix)]
#[test]
fn ctrl_c_saves_the_state_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let child = tiny_train(dir.path(), &["--epochs", "50"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    // Wait for the first epoch's checkpoint so that the handler is installed, then interrupt.
    let last = dir.path().join("last.safetensors");
    while !last.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = std::fs::metadata(&last).unwrap().modified().unwrap();
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted at epoch") && err.contains(&format!("--out {} --resume", dir.path().display())), "{err}");
    assert!(std::fs::metadata(&last).unwrap().modified().unwrap() >= before);
}

#[test]
fn bad_training_input_is_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = dir.path().to_str().unwrap();
    let blocked = file.join("sub");
    for (args, needle) in [
        (vec!["train", "--model", "alexnet"], "no model named `alexnet`"),
        (vec!["train", "--data", "imagenet", "--out", out], "unknown dataset `imagenet`"),
        (vec!["train", "--data", out, "--out", out], "neither MNIST-format files (train-images-idx3-ubyte"),
        (vec!["train", "--optimizer", "lbfgs", "--lr", "0.1", "--out", out], "unknown optimizer `lbfgs`"),
        (vec!["train", "--device", "tpu", "--out", out], "not a device"),
        (vec!["train", "--batch-size", "0"], "positive whole number"),
        (vec!["train", "--batch-size", "-3"], "positive whole number"),
        (vec!["train", "--out", blocked.to_str().unwrap()], "cannot write to"),
        (vec!["eval", "--model", "lstm", "--checkpoint", file.to_str().unwrap()], "a-file"),
        (vec!["train", "--model", "vae", "--data", "cifar10", "--out", out], "takes samples of shape [784]"),
    ] {
        assert_usage_error(&args, &liandan(&args), needle);
    }
}

#[test]
fn a_checkpoint_of_another_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(tiny_train(dir.path(), &["--epochs", "1"]).output().unwrap().status.success());
    let best = dir.path().join("best.safetensors");
    let o = liandan(&["eval", "--model", "seed003_cnn", "--checkpoint", best.to_str().unwrap(), "--device", "cpu"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("another model") && err.lines().count() == 1, "{err}");
    // It names the model it was trained as, in words for the command line: no tabs, no advice
    // meant for the library (`strict = false`).
    assert!(err.contains("(it was trained as `mnist_cnn`)") && !err.contains('\t') && !err.contains("strict"), "{err}");
}

#[test]
fn messages_read_as_people_write_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for (args, needle, not) in [
        (&["train", "--device", "gpu:7", "--out", out][..], "--device: `gpu:7` asks for GPU 7", "gpu:7: device:"),
        (&["train", "--scheduler", "exponential", "--out", out][..], "e.g. exponential:0.9", "step:"),
        (&["train", "--scheduler", "step:2", "--out", out][..], "e.g. step:0.7", "exponential"),
    ] {
        let o = liandan(args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle) && !err.contains(not), "{args:?}: {err}");
    }
    let (info, _) = text(&Command::new(env!("CARGO_BIN_EXE_liandan")).arg("info").env("LIANDAN_DEVICE", "cpu").output().unwrap());
    assert!(info.contains("best: cpu") && !info.contains("check:"), "{info}");
    let (help, _) = text(&liandan(&["summary", "--help"]));
    assert!(help.contains("liandan summary [OPTIONS] <MODEL>"), "{help}");
    let (help, _) = text(&liandan(&["train", "--help"]));
    assert!(help.contains("MNIST's 10,000 test images") && help.contains("2,000 held out"), "{help}");
    let o = liandan(&["profile", "--model", "mlp", "--device", "cpu", "--batch", "2", "--steps", "1", "--warmup", "1"]);
    let (_, err) = text(&o);
    assert!(o.status.success() && err.contains("1 warm-up step and 1 measured step"), "{err}");
    let o = tiny_train(dir.path(), &["--epochs", "1", "--summary", "--limit-batches", "1"]).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success() && out.contains("Total params: 1,199,882"), "{out}{err}");
}

#[test]
fn plotting_a_history_with_nothing_finite_is_an_error_not_a_blank_picture() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("history.csv");
    std::fs::write(&csv, "epoch,lr,loss,val_loss,time_s\n1,1,NaN,NaN,2.5\n2,0.7,NaN,NaN,2.4\n").unwrap();
    let png = dir.path().join("history.png");
    let o = liandan(&["plot", csv.to_str().unwrap(), "--out", png.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing to draw") && err.contains("loss"), "{err}");
    assert!(!png.exists());
}

/// `train --autotune` on the GPU times the cuts of its products once and leaves them in a file
/// per adapter under `LIANDAN_CACHE_DIR`. Skips without a GPU unless `LIANDAN_REQUIRE_GPU` is set.
#[test]
#[ignore = "slow on a software GPU, where each candidate cut is timed; cargo test -- --ignored"]
fn train_with_autotune_keeps_the_measured_cuts_in_the_cache() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One batch of two images on the GPU, the cuts kept under `cache`; the second run replaces the first.
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_liandan"))
            .env("LIANDAN_CACHE_DIR", cache.path())
            .args([
                "train",
                "--autotune",
                "--device",
                "gpu",
                "--max-samples",
                "8",
                "--batch-size",
                "2",
                "--limit-batches",
                "1",
                "--epochs",
                "1",
                "--overwrite",
                "--out",
            ])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let o = run();
    let (out, err) = text(&o);
    if !o.status.success() && err.contains("0 GPU(s) were found") && !liandan_tensor::settings::require_gpu().unwrap_or_else(|e| panic!("{e}")) {
        eprintln!("skipping: no GPU here ({err})");
        return;
    }
    assert!(o.status.success(), "{err}");
    assert!(out.contains("epoch 1/1"), "{out}");
    let report = out.lines().find(|l| l.starts_with("autotune: ")).unwrap_or_else(|| panic!("no autotune line:\n{out}"));
    let measured: usize = report["autotune: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(measured > 0 && report.contains(&cache.path().join("autotune").display().to_string()), "{report}");
    let files: Vec<_> = std::fs::read_dir(cache.path().join("autotune")).expect("the autotune's directory").map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let cuts = std::fs::read_to_string(&files[0]).unwrap();
    for what in ["conv Forward f32", "conv Weight f32", "matmul f32"] {
        assert!(cuts.lines().any(|l| l.starts_with(what)), "no {what} line:\n{cuts}");
    }
    assert_eq!(cuts.lines().count() - 1, measured, "one line per shape measured:\n{cuts}");

    // Again: every cut read from the file, none measured.
    let o = run();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("autotune: 0 shape(s) measured"), "{out}");
}

/// Without MPI built in, `--gpus` says what it needs rather than training alone.
#[cfg(not(feature = "mpi"))]
#[test]
fn gpus_without_mpi_says_how_to_get_it() {
    let o = liandan(&["train", "--gpus", "2"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--features mpi"), "{err}");
}
