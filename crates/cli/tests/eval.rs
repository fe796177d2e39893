//! `liandan eval` reads (and downloads) only the split it evaluates (`--split`), shows its
//! progress, and warns when a model trained on the bundled set (MNIST's test images) is scored
//! on MNIST's test split.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{bundled, run, serve, text};

fn liandan(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liandan"));
    c.env("LIANDAN_DEVICE", "cpu").env("LIANDAN_DATA", cache).env("LIANDAN_DATA_URL", "http://127.0.0.1:9/");
    c
}

/// A checkpoint of mnist_cnn trained briefly on the bundled set.
fn trained(tmp: &Path) -> PathBuf {
    let run = tmp.join("run");
    let o = liandan(tmp).args(["train", "--max-samples", "16", "--batch-size", "16", "--epochs", "1", "--out"]).arg(&run).output().unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    run.join("best.safetensors")
}

fn eval(tmp: &Path, checkpoint: &Path, args: &[&str]) -> Output {
    liandan(tmp).args(["eval", "--model", "mnist_cnn", "--checkpoint"]).arg(checkpoint).args(args).output().unwrap()
}

#[test]
fn eval_reads_only_the_split_it_evaluates_and_warns_of_the_bundled_sets_overlap() {
    let tmp = tempfile::tempdir().unwrap();
    let best = trained(tmp.path());
    // A directory with MNIST's test split only.
    let dir = tmp.path().join("t10k");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"] {
        std::fs::write(dir.join(f), bundled(f)).unwrap();
    }
    let d = dir.to_str().unwrap();
    let o = eval(tmp.path(), &best, &["--data", d, "--max-samples", "64", "--batch-size", "16"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("test split, 64 samples: loss"), "{out}");
    // Trained on the bundled set, which is these very images.
    assert!(err.contains("warning:") && err.contains("8,000 of the 10,000") && err.contains("--data bundled --split val"), "{err}");
    // Four batches: progress lines while it runs (stdout is not a terminal here).
    assert!(out.contains("eval step 1/4") && !out.contains("eval step 4/4"), "{out}");

    let o = eval(tmp.path(), &best, &["--data", d, "--split", "train"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("train-images-idx3-ubyte"), "{err}");

    // The bundled set: its held-out 2,000 by default, no warning; it has no test split.
    let o = eval(tmp.path(), &best, &["--max-samples", "32"]);
    let (out, err) = text(&o);
    assert!(o.status.success() && out.contains("val split, 32 samples") && !err.contains("warning"), "{out}{err}");
    let o = eval(tmp.path(), &best, &["--split", "test"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no test split") && err.contains("--split val"), "{err}");
}

#[test]
fn eval_on_mnist_downloads_only_the_test_split() {
    let tmp = tempfile::tempdir().unwrap();
    let best = trained(tmp.path());
    let files = ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"].map(|n| (n.to_string(), bundled(n)));
    let (base, server) = serve(files.into_iter().collect(), 2);
    let (out, err) = run(liandan(tmp.path())
        .env("LIANDAN_DATA_URL", &base)
        .args(["eval", "--model", "mnist_cnn", "--data", "mnist", "--max-samples", "16", "--checkpoint"])
        .arg(&best));
    assert_eq!(server.join().unwrap(), ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]);
    assert!(err.contains("downloading mnist's test split (2 files)") && err.contains("warning:"), "{err}");
    assert!(out.contains("test split, 16 samples"), "{out}");
    assert!(!tmp.path().join("mnist/train-images-idx3-ubyte.gz").exists());
}
