//! Every subcommand when its stdout fails: a pipe whose reader has gone ends it quietly
//! (status 0, no message), as Unix tools end; a full disk (`/dev/full`) is one line on stderr and
//! status 2. Never a panic.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn liandan() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liandan"));
    c.env("LIANDAN_DEVICE", "cpu");
    c
}

/// An IDX file of `n` 28x28 u8 images.
fn idx_images(n: usize) -> Vec<u8> {
    let mut b = vec![0, 0, 8, 3];
    for d in [n as u32, 28, 28] {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend((0..n * 784).map(|i| ((i * 37) % 256) as u8));
    b
}

/// One command line per subcommand, each of which prints to stdout; `tmp` holds what they read.
fn every_subcommand(tmp: &Path) -> Vec<Vec<String>> {
    let run = tmp.join("run");
    let o = liandan().args(["train", "--max-samples", "16", "--batch-size", "16", "--epochs", "1", "--out"]).arg(&run).stdout(Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(tmp.join("a.idx"), idx_images(2)).unwrap();
    let best = run.join("best.safetensors");
    let s = |p: &Path| p.display().to_string();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        args(&["zoo"]),
        args(&["info"]),
        args(&["summary", "mlp"]),
        args(&["train", "--max-samples", "16", "--epochs", "1", "--out", &s(&tmp.join("fresh"))]),
        args(&["eval", "--model", "mnist_cnn", "--checkpoint", &s(&best), "--max-samples", "16"]),
        args(&["predict", "--model", "mnist_cnn", "--checkpoint", &s(&best), "--input", &s(&tmp.join("a.idx"))]),
        args(&["plot", &s(&run.join("history.csv")), "--out", &s(&tmp.join("again.png"))]),
        args(&["profile", "--model", "mlp", "--steps", "1", "--warmup", "0", "--batch", "2"]),
        args(&["find-batch-size", "--model", "mlp", "--budget", "8", "--max", "2"]),
    ]
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_closed_pipe_ends_every_subcommand_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    for args in every_subcommand(tmp.path()) {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader); // the reader is gone before the first line: every write fails with EPIPE
        let o = liandan().args(&args).stdout(writer).stderr(Stdio::piped()).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked") && !err.contains("stdout") && !err.contains(&format!("liandan {}:", args[0])), "{args:?}: {err}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_one_line_and_status_2_for_every_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    for args in every_subcommand(tmp.path()) {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = liandan().args(&args).stdout(full).stderr(Stdio::piped()).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("liandan ")).collect();
        assert_eq!(ours.len(), 1, "{args:?}: {err}");
        assert!(ours[0].contains("cannot write to stdout") && ours[0].contains("No space left"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
