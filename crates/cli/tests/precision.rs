//! `liandan train --precision/--accumulate/--clip-grad-norm/--detect-anomaly` and `liandan
//! find-batch-size`, run as a user runs them, on the CPU and kept small.

use std::process::{Command, Output};

use liandan_nn::{checkpoint, Device};

mod common;
use common::{assert_usage_error, text};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).env("LIANDAN_DEVICE", "cpu").args(args).output().expect("the liandan binary runs")
}

/// Four batches of 16 bundled images, one epoch, on the CPU.
fn tiny_train(out: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--max-samples", "64", "--batch-size", "16", "--epochs", "1", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    liandan(&args)
}

/// The scaler's state in the run's `last.safetensors`.
fn saved_scaler(dir: &std::path::Path) -> serde_json::Value {
    let (_, meta) = checkpoint::load_with_metadata(dir.join("last.safetensors"), &Device::cpu()).unwrap();
    let state: serde_json::Value = serde_json::from_str(&meta["liandan.train_state"]).unwrap();
    state["scaler"].clone()
}

#[test]
fn train_runs_in_f16_and_bf16_and_says_what_they_cost_here() {
    for (precision, scaler) in [("f16", true), ("bf16", false)] {
        let dir = tempfile::tempdir().unwrap();
        let o = tiny_train(dir.path(), &["--precision", precision, "--accumulate", "2", "--clip-grad-norm", "5"]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{precision}: {err}");
        let products = match precision {
            "f16" => "matmul and linear layers from 2^28 operations and convolutions from 2^24",
            _ => "matmul and linear layers from 2^30.6 operations and convolutions from 2^24",
        };
        assert!(out.contains(&format!("precision: {precision} mixed precision: {products} in {precision}")), "{out}");
        assert!(out.contains(&format!("the CPU stores {precision} in 2 bytes")), "{out}");
        assert!(out.contains("batch size 16, 2 batches per optimizer step (as one batch of 32)"), "{out}");
        assert_eq!(out.contains("loss scaled dynamically"), scaler, "{out}");
        assert!(out.contains("epoch 1/1"), "{out}");
        let saved = saved_scaler(dir.path());
        match scaler {
            // 2 optimizer steps (4 batches, 2 per step): each skipped one halved the scale and
            // restarted the count of good steps (here mnist_cnn's second step overflows at 2^16).
            true => {
                let (good, skipped) = (saved["growth_tracker"].as_u64().unwrap(), saved["skipped"].as_u64().unwrap());
                assert!(good + skipped <= 2 && skipped <= 2, "{saved}");
                assert_eq!(saved["scale"].as_f64().unwrap(), 65536.0 / (1u64 << skipped) as f64, "{saved}");
            }
            false => assert!(saved.is_null(), "{saved}"),
        }
    }
}

#[test]
fn detect_anomaly_names_the_op_where_training_blows_up() {
    let dir = tempfile::tempdir().unwrap();
    // A learning rate of 1e30 sends the weights to ~1e30 at the first step; the second
    // step's forward pass overflows.
    let o = tiny_train(dir.path(), &["--optimizer", "sgd", "--lr", "1e30", "--detect-anomaly"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("training stopped at epoch 1, step 2") && err.contains("op `"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_precision_options_are_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["train", "--precision", "f8", "--out", out], "`f8` is not a precision; use f32, f16 or bf16"),
        (vec!["train", "--accumulate", "0", "--out", out], "positive whole number"),
        (vec!["train", "--clip-grad-norm", "-1", "--out", out], "--clip-grad-norm -1: give a positive norm"),
        (vec!["find-batch-size", "--model", "mlp"], "on the CPU, give --budget MiB"),
        (vec!["find-batch-size", "--model", "mlp", "--budget", "0"], "--budget 0: give a positive number of MiB"),
        (vec!["find-batch-size", "--model", "alexnet", "--budget", "8"], "no model named `alexnet`"),
        (vec!["find-batch-size", "--model", "mlp", "--budget", "8", "--precision", "half-ish"], "not a precision"),
        // The mlp's weights alone take 2.5 MiB.
        (vec!["find-batch-size", "--model", "mlp", "--budget", "2"], "not even a batch of 1 fits on cpu; raise --budget"),
    ] {
        assert_usage_error(&args, &liandan(&args), needle);
    }
}

#[test]
fn find_batch_size_reports_the_largest_batch_within_the_budget() {
    let o = liandan(&["find-batch-size", "--model", "mlp", "--budget", "12", "--precision", "bf16"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("precision: bf16 mixed precision") && out.contains("fits in 12.0 MiB (--budget)"), "{out}");
    let last = out.lines().last().unwrap();
    // `largest batch: N, peak memory X MiB`
    let batch: usize = last.strip_prefix("largest batch: ").and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{out}"));
    let peak: f64 = last.split("peak memory ").nth(1).and_then(|r| r.strip_suffix(" MiB")).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{out}"));
    assert!(peak > 2.5 && peak <= 12.0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("batch ") && l.contains(&format!(" {batch}: fits, peak "))), "{out}");
    let next = format!(" {}: does not fit, peak before failing ", batch + 1);
    assert!(out.lines().any(|l| l.starts_with("batch ") && l.contains(&next)), "{out}");
}
