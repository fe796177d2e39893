//! `--data mnist` and `--data cifar10` through the binary, downloading from a tiny HTTP server on
//! 127.0.0.1 that the test starts (LIANDAN_DATA_URL points there; no internet), and `predict`.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{bundled, npy_header, run, serve, text};

fn liandan(cache: &Path, url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liandan"));
    // In the cache, so that a run without --out writes there and not into the source tree.
    c.env("LIANDAN_DATA", cache).env("LIANDAN_DATA_URL", url).env("LIANDAN_DEVICE", "cpu").current_dir(cache);
    c
}

#[test]
fn mnist_downloads_the_missing_files_into_the_cache_and_trains() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("mnist");
    std::fs::create_dir_all(&dir).unwrap();
    // The training files are already there (the test split standing in for them: the real ones
    // are 10 MB and not in the repository); the test split comes from the server, whose bytes
    // must match the published checksums.
    std::fs::write(dir.join("train-images-idx3-ubyte.gz"), bundled("t10k-images-idx3-ubyte.gz")).unwrap();
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), bundled("t10k-labels-idx1-ubyte.gz")).unwrap();
    let files = ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"].map(|n| (n.to_string(), bundled(n)));
    let (base, server) = serve(files.into_iter().collect(), 2);
    let out = cache.path().join("run");
    let (stdout, err) =
        run(liandan(cache.path(), &base).args(["train", "--data", "mnist", "--max-samples", "32", "--batch-size", "16", "--epochs", "1", "--out"]).arg(&out));
    assert_eq!(server.join().unwrap(), ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]);
    assert!(err.contains("downloading mnist's test split (2 files)") && err.contains(&dir.display().to_string()), "{err}");
    assert!(stdout.contains(&format!("mnist from {}", dir.display())), "{stdout}");
    assert_eq!(std::fs::read(dir.join("t10k-labels-idx1-ubyte.gz")).unwrap(), bundled("t10k-labels-idx1-ubyte.gz"));
    assert!(!dir.join("t10k-images-idx3-ubyte.gz.part").exists());
    // Everything is in the cache now: a second run must not ask the (stopped) server.
    let o = liandan(cache.path(), &base)
        .args(["eval", "--model", "mnist_cnn", "--data", "mnist", "--max-samples", "32", "--checkpoint"])
        .arg(out.join("best.safetensors"))
        .output()
        .unwrap();
    assert!(o.status.success() && !text(&o).1.contains("downloading"), "{:?}", text(&o));
}

#[test]
fn offline_or_a_corrupt_download_is_one_line_status_2_and_nothing_lands() {
    let cache = tempfile::tempdir().unwrap();
    // A port nobody listens on: bind one, then free it.
    let closed = format!("http://{}/", TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap());
    let o = liandan(cache.path(), &closed).args(["train", "--data", "fashion-mnist"]).output().unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("offline") && err.contains("bundled") && err.trim_end().lines().count() == 2, "{err}"); // the "downloading" line, then the error
    let files = HashMap::from([("cifar-10-binary.tar.gz".to_string(), b"not the archive".to_vec())]);
    let (base, server) = serve(files, 1);
    let o = liandan(cache.path(), &base).args(["train", "--data", "cifar10", "--model", "vit"]).output().unwrap();
    let (_, err) = text(&o);
    server.join().unwrap();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("SHA-256 mismatch (expected") && !err.contains("panicked"), "{err}");
    assert!(!cache.path().join("cifar-10-batches-bin").exists() && !cache.path().join("cifar-10-binary.tar.gz").exists());
}

/// A CIFAR-10 binary batch of `n` records with seeded pixels and labels.
fn cifar_batch(n: usize, seed: u32) -> Vec<u8> {
    (0..n).flat_map(|i| std::iter::once((i % 10) as u8).chain((0..3072u32).map(move |j| ((j ^ seed).wrapping_mul(2_654_435_761) >> 24) as u8))).collect()
}

#[test]
fn cifar10_from_the_cache_trains_a_cifar_model() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("cifar-10-batches-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 1..=5 {
        std::fs::write(dir.join(format!("data_batch_{i}.bin")), cifar_batch(2, i)).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), cifar_batch(4, 9)).unwrap();
    let out = cache.path().join("run");
    let (stdout, _) = run(liandan(cache.path(), "http://127.0.0.1:9/")
        .args(["train", "--data", "cifar10", "--model", "vit", "--batch-size", "5", "--epochs", "1", "--out"])
        .arg(&out));
    assert!(stdout.contains("CIFAR-10 from") && stdout.contains("10 training, 4 validation samples"), "{stdout}");
    assert!(out.join("best.safetensors").is_file());
    // A model for MNIST's shape is refused with a way out.
    let o = liandan(cache.path(), "http://127.0.0.1:9/").args(["train", "--data", "cifar10", "--out"]).arg(cache.path().join("mnist_cnn")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("takes samples of shape"), "{:?}", text(&o));
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

/// A `.npy` file holding image `k` of [`idx_images`] as `[28, 28]` u8.
fn npy_image(k: usize) -> Vec<u8> {
    let mut b = npy_header("|u1", "(28, 28)");
    b.extend_from_slice(&idx_images(k + 1)[16 + k * 784..]);
    b
}

#[test]
fn predict_prints_a_class_and_probability_per_image_whatever_the_format() {
    let tmp = tempfile::tempdir().unwrap();
    let run: PathBuf = tmp.path().join("run");
    let o = liandan(tmp.path(), "http://127.0.0.1:9/")
        .args(["train", "--max-samples", "32", "--batch-size", "16", "--epochs", "1", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    let inputs = tmp.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::write(inputs.join("a.idx"), idx_images(3)).unwrap();
    std::fs::write(inputs.join("b.npy"), npy_image(1)).unwrap();
    let predict = |input: &Path| {
        let o = liandan(tmp.path(), "http://127.0.0.1:9/")
            .args(["predict", "--model", "mnist_cnn", "--checkpoint"])
            .arg(run.join("best.safetensors"))
            .arg("--input")
            .arg(input)
            .output()
            .unwrap();
        assert!(o.status.success(), "{:?}", text(&o));
        // The device line as eval prints it, on stderr: stdout is the predictions.
        assert!(text(&o).1.contains("device: cpu (asked for with LIANDAN_DEVICE=cpu)"), "{:?}", text(&o));
        text(&o).0
    };
    let out = predict(&inputs);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let parse = |line: &str| -> (String, usize, f64) {
        let (name, rest) = line.split_once(": class ").unwrap_or_else(|| panic!("{line}"));
        let (class, p) = rest.split_once(" (p = ").unwrap();
        (name.to_string(), class.parse().unwrap(), p.trim_end_matches(')').parse().unwrap())
    };
    let rows: Vec<_> = lines.iter().map(|l| parse(l)).collect();
    assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["a.idx[0]", "a.idx[1]", "a.idx[2]", "b.npy"]);
    for (_, class, p) in &rows {
        assert!(*class < 10 && *p >= 0.1 && *p <= 1.0, "{out}"); // the top one of ten is at least 1/10
    }
    // The same pixels through .npy and through IDX give the same answer.
    assert_eq!((rows[1].1, rows[1].2), (rows[3].1, rows[3].2), "{out}");
    assert_eq!(predict(&inputs.join("b.npy")).trim(), lines[3]);
    // After one epoch the training state (last.safetensors) holds the same model as best.
    let o = liandan(tmp.path(), "http://127.0.0.1:9/")
        .args(["predict", "--model", "mnist_cnn", "--checkpoint"])
        .arg(run.join("last.safetensors"))
        .arg("--input")
        .arg(inputs.join("b.npy"))
        .output()
        .unwrap();
    assert_eq!(text(&o).0.trim(), lines[3]);
}
