//! A run directory through `liandan train`: `--resume` continues the run as it was started
//! (model, data, batch size, optimizer, precision...) and refuses a flag that contradicts it;
//! a directory holding a run is not trained into afresh without `--overwrite`; one live run
//! at a time, a lock left by a dead one blocking nothing; a start that fails leaves no
//! directory behind.

use std::path::Path;
use std::process::{Command, Output};

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `liandan train --out DIR ARGS` on the CPU.
fn train(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).env("LIANDAN_DEVICE", "cpu").args(["train", "--out"]).arg(dir).args(args).output().unwrap()
}

#[test]
fn resume_continues_the_run_as_it_was_started_and_refuses_contradicting_flags() {
    let dir = tempfile::tempdir().unwrap();
    let o = train(dir.path(), &["--model", "lstm", "--max-samples", "32", "--batch-size", "16", "--epochs", "2", "--precision", "bf16"]);
    assert!(o.status.success(), "{:?}", text(&o));

    // No --model: the saved run's (a checkpoint of lstm would not fit mnist_cnn, the default).
    let o = train(dir.path(), &["--resume", "--epochs", "3"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("model: lstm") && out.contains("resuming") && out.contains("epoch 3 of 3"), "{out}");
    assert!(out.contains("batch size 16") && out.contains("precision: bf16") && out.contains("32 training"), "{out}");
    // lstm's Adam at 0.001 with no scheduler: the lr it goes on with is the one it stands at.
    assert!(out.contains("optimizer: adam lr 0.001 (where the run stands; it began at 0.001)"), "{out}");
    assert!(out.contains("epoch 3/3") && !out.contains("epoch 2/3"), "{out}");
    assert!(!out.contains("Total params"), "no layer table on a resume:\n{out}");

    for (flag, value, saved) in [
        ("--batch-size", "32", "16"),
        ("--lr", "0.01", "0.001"),
        ("--precision", "f32", "bf16"),
        ("--max-samples", "64", "32"),
        ("--model", "mnist_cnn", "lstm"),
        ("--optimizer", "sgd", "adam"),
    ] {
        let o = train(dir.path(), &["--resume", "--epochs", "4", flag, value]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(&format!("{flag} {value} contradicts")) && err.contains(&format!("{flag} {saved};")), "{flag}: {err}");
    }
    // Flags that agree are fine, and --epochs and --patience may change.
    let o = train(dir.path(), &["--resume", "--epochs", "4", "--patience", "5", "--batch-size", "16", "--model", "lstm"]);
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
fn a_resumed_learning_rate_is_printed_as_it_runs_and_rounded() {
    let dir = tempfile::tempdir().unwrap();
    // mnist_cnn: Adadelta at lr 1, StepLR 0.7 per epoch.
    let o = train(dir.path(), &["--max-samples", "16", "--batch-size", "16", "--epochs", "2"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = train(dir.path(), &["--resume", "--epochs", "3"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("optimizer: adadelta lr 0.49 (where the run stands; it began at 1), scheduler: step:0.7"), "{out}");
    assert!(out.contains("epoch 3/3") && out.contains("lr 0.49 "), "{out}");
    let csv = std::fs::read_to_string(dir.path().join("history.csv")).unwrap();
    let lrs: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap()).collect();
    assert_eq!(lrs, ["1", "0.7", "0.49"], "{csv}");
    let json = std::fs::read_to_string(dir.path().join("history.json")).unwrap();
    assert!(json.contains("0.49") && !json.contains("0.4899999"), "{json}");
}

#[test]
fn a_directory_holding_a_run_is_not_trained_into_afresh_without_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = ["--max-samples", "16", "--batch-size", "16", "--epochs", "1"];
    assert!(train(dir.path(), &tiny).status.success());
    let best = std::fs::read(dir.path().join("best.safetensors")).unwrap();
    let o = train(dir.path(), &tiny);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("already holds a run") && err.contains("--resume") && err.contains("--overwrite"), "{err}");
    assert_eq!(std::fs::read(dir.path().join("best.safetensors")).unwrap(), best, "the run is untouched");

    let o = train(dir.path(), &[&tiny[..], &["--overwrite", "--seed", "2"]].concat());
    assert!(o.status.success(), "{:?}", text(&o));
    assert_ne!(std::fs::read(dir.path().join("best.safetensors")).unwrap(), best, "replaced, as asked");
}

#[test]
fn a_live_run_holds_its_directory_and_a_dead_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = ["--max-samples", "16", "--batch-size", "16", "--epochs", "1"];
    // A lock file left by a process that is gone: its lock went with it.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    std::fs::write(dir.path().join(".liandan.lock"), format!("{dead}\n")).unwrap();
    let o = train(dir.path(), &tiny);
    assert!(o.status.success(), "{:?}", text(&o));

    // A live holder (this test, as another run would hold it).
    let lock = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join(".liandan.lock")).unwrap();
    lock.try_lock().unwrap();
    std::fs::write(dir.path().join(".liandan.lock"), format!("{}\n", std::process::id())).unwrap();
    for args in [&["--resume", "--epochs", "2"][..], &[&tiny[..], &["--overwrite"]].concat()] {
        let o = train(dir.path(), args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&format!("in use by another run (process {})", std::process::id())), "{args:?}: {err}");
    }
    drop(lock);
    let o = train(dir.path(), &["--resume", "--epochs", "2"]);
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
fn a_start_that_fails_leaves_no_empty_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs").join("vit");
    let o = train(&out, &["--model", "vit", "--data", "not-a-dataset"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(!dir.path().join("runs").exists(), "{:?}", text(&o));

    // A directory that was there before stays, with what it held.
    std::fs::create_dir(dir.path().join("mine")).unwrap();
    std::fs::write(dir.path().join("mine").join("notes.txt"), "mine").unwrap();
    let o = train(&dir.path().join("mine"), &["--data", "not-a-dataset"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(dir.path().join("mine").join("notes.txt").exists());
}
