//! TensorBoard event files: the writer's bytes are those TensorBoard's own reader accepted, and
//! `fit` writes the scalars, histograms and checkpoint metadata it is asked for.
//!
//! `data/tensorboard/fixed.tfevents` was written by `write_fixed` below and read by
//! TensorBoard's `EventAccumulator` (`data/tensorboard/read_events.py`, which checks every
//! record's CRCs), whose listing is `data/tensorboard/read_by_tensorboard.txt`. The test writes
//! the same events again and wants the same bytes, so a writer that changes them fails here
//! until the fixture is regenerated and read by TensorBoard again:
//!
//! ```text
//! cargo test -p liandan-train --test tensorboard  # writes target/.../fixed.tfevents on failure
//! pip install tensorboard
//! python3 crates/train/tests/data/tensorboard/read_events.py crates/train/tests/data/tensorboard/fixed.tfevents \
//!     > crates/train/tests/data/tensorboard/read_by_tensorboard.txt
//! ```
#![cfg(feature = "tensorboard")]

use std::path::{Path, PathBuf};

use liandan_backend_cpu as _;
use liandan_train::data::{DataInfo, DataLoader, InputInfo, TensorDataset};
use liandan_train::nn::{checkpoint, manual_seed, zoo, DType, Device, ModuleExt, Reduction, Tensor};
use liandan_train::optim::{Sgd, SgdConfig};
use liandan_train::tensorboard::{histograms, read_events, record, scalars, tags, SummaryWriter};
use liandan_train::trainer::{state, Accuracy, FitConfig, ProgressStyle, TensorBoardConfig};
use liandan_train::Trainer;
use sha2::{Digest, Sha256};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tensorboard").join(name)
}

/// The events of the fixture, at a fixed wall time.
fn write_fixed(path: &Path) {
    let mut tb = SummaryWriter::create(path).unwrap().with_fixed_wall_time(1_700_000_000.25);
    tb.add_scalar("train/loss", 2.5, 1).unwrap();
    tb.add_scalar("train/loss", 1.25, 2).unwrap();
    tb.add_scalars(&[("train/acc", 0.5), ("train/lr", 0.1)], 2).unwrap();
    tb.add_scalar("val/acc", 0.75, 2).unwrap();
    tb.add_histogram("weights/fc.weight", &[-1.0, -0.5, 0.0, 0.5, 1.0, 1.0], 2).unwrap();
    tb.flush().unwrap();
}

/// [`write_fixed`] into `dir/name`: the path and the bytes written.
fn fixed_file(dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let path = dir.join(name);
    write_fixed(&path);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn the_writer_writes_the_bytes_tensorboards_reader_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, ours) = fixed_file(dir.path(), "fixed.tfevents");
    let listing = std::fs::read_to_string(fixture("read_by_tensorboard.txt")).unwrap_or_default();
    let sha: String = Sha256::digest(&ours).iter().map(|b| format!("{b:02x}")).collect();
    if std::fs::read(fixture("fixed.tfevents")).unwrap_or_default() != ours || !listing.contains(&format!("sha256 {sha}")) {
        let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixed.tfevents");
        std::fs::write(&kept, &ours).unwrap();
        panic!(
            "the writer's bytes differ from those TensorBoard read; if the change is meant, read {} with read_events.py (see this file's docs)",
            kept.display()
        );
    }

    // What TensorBoard read is what our reader reads.
    let events = read_events(&path).unwrap();
    let mut ours = vec![format!("sha256 {sha}")];
    for tag in tags(&events) {
        for (step, v) in scalars(&events, &tag) {
            ours.push(format!("scalar {tag} {step} {v}"));
        }
        for (step, h) in histograms(&events, &tag) {
            ours.push(format!("histogram {tag} {step} min {} max {} num {} sum {} sum_squares {}", h.min, h.max, h.num, h.sum, h.sum_squares));
            ours.push(format!("buckets {tag} {step} {}", h.bucket.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ")));
        }
    }
    let theirs: Vec<&str> = listing.lines().filter(|l| !l.starts_with("file_version")).collect();
    assert_eq!(ours, theirs);
    assert!(listing.contains("file_version brain.Event:2"), "{listing}");
}

#[test]
fn a_damaged_record_is_an_error_and_a_cut_one_ends_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = fixed_file(dir.path(), "events.out.tfevents.1");
    assert_eq!(record::read_records(&bytes).unwrap().len(), 6); // the file version, then 5 events
    let mut flipped = bytes.clone();
    flipped[20] ^= 1;
    assert!(record::read_records(&flipped).unwrap_err().contains("CRC"));
    assert_eq!(record::read_records(&bytes[..bytes.len() - 3]).unwrap().len(), 5);
    // An existing file is never overwritten.
    let err = SummaryWriter::create(&path).err().unwrap().to_string();
    assert!(err.contains("events.out.tfevents.1"), "{err}");
}

#[test]
fn fit_writes_scalars_histograms_and_the_data_info() {
    let dev = Device::cpu();
    let dir = tempfile::tempdir().unwrap();
    let x = Tensor::randn(&[24, 4], 5, DType::F32, &dev).unwrap();
    let y = Tensor::from_vec((0..24i64).map(|i| i % 3).collect::<Vec<_>>(), &[24], &dev).unwrap();
    let data = TensorDataset::new(&x, &y).unwrap();
    let train = DataLoader::new(data.clone(), 4, &dev).unwrap().shuffle(1);
    let val = DataLoader::new(data, 8, &dev).unwrap();
    manual_seed(3);
    let model = zoo::build_with("mlp", &zoo::ZooConfig { classes: 3, in_features: Some(4) }, &dev).unwrap();
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.05, ..SgdConfig::default() }).unwrap();
    let mut trainer = Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt).with_metric(Accuracy::new());
    let info = DataInfo {
        classes: vec!["a".into(), "b".into(), "c".into()],
        input: InputInfo::Table { target: "label".into(), features: (0..4).map(|i| format!("x{i}")).collect(), mean: vec![0.0; 4], std: vec![1.0; 4] },
    };
    let mut config = FitConfig::new(2);
    config.checkpoint_dir = Some(dir.path().to_path_buf());
    config.log_interval = 2;
    config.progress = ProgressStyle::Quiet;
    config.metadata = info.to_metadata();
    config.settings.insert("data".into(), "flowers.csv".into());
    config.tensorboard = Some(TensorBoardConfig { dir: dir.path().join("tb"), histograms: true });
    trainer.fit(&train, Some(&val), &config).unwrap();

    let files: Vec<PathBuf> = std::fs::read_dir(dir.path().join("tb")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    assert!(files[0].file_name().unwrap().to_str().unwrap().starts_with("events.out.tfevents."));
    let events = read_events(&files[0]).unwrap();
    let steps = |tag: &str| scalars(&events, tag).into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(steps("train/loss"), (1..=12).collect::<Vec<u64>>());
    for tag in ["train/acc", "train/lr", "train/samples_per_sec"] {
        assert_eq!(steps(tag), [2, 4, 6, 8, 10, 12], "{tag}");
    }
    assert!(scalars(&events, "train/lr").iter().all(|(_, lr)| (*lr - 0.05).abs() < 1e-7));
    assert!(scalars(&events, "train/samples_per_sec").iter().all(|(_, r)| *r > 0.0));
    assert_eq!(steps("val/loss"), [6, 12]);
    assert_eq!(steps("val/acc"), [6, 12]);
    let fc1: Vec<_> = histograms(&events, "weights/fc1.weight");
    assert_eq!(fc1.iter().map(|(s, h)| (*s, h.num)).collect::<Vec<_>>(), [(6, 2048.0), (12, 2048.0)]);
    assert_eq!(fc1[0].1.bucket.iter().sum::<f64>(), 2048.0);

    // TensorBoard's own reader, where it is installed, loads what fit wrote.
    if let Some(listing) = read_by_tensorboard(&files[0]) {
        for tag in ["train/loss 12 ", "train/acc 12 ", "train/lr 12 ", "val/loss 12 ", "val/acc 12 "] {
            assert!(listing.contains(&format!("scalar {tag}")), "{tag}: {listing}");
        }
        assert!(listing.contains("histogram weights/fc1.weight 12 "), "{listing}");
    }

    // Both checkpoints carry the class names and how inputs were prepared, beside the settings.
    for file in ["best.safetensors", "last.safetensors"] {
        let (_, metadata) = checkpoint::load_with_metadata(dir.path().join(file), &dev).unwrap();
        assert_eq!(DataInfo::from_metadata(&metadata).unwrap().as_ref(), Some(&info), "{file}");
        assert_eq!(metadata["liandan.classes"], r#"["a","b","c"]"#);
        assert_eq!(state::settings(&metadata)["data"], "flowers.csv", "{file}");
    }
}

/// `read_events.py`'s listing of `path`, when Python has the `tensorboard` package (the fixed
/// file's test above holds without it).
fn read_by_tensorboard(path: &Path) -> Option<String> {
    let has = std::process::Command::new("python3").args(["-c", "import tensorboard"]).output().is_ok_and(|o| o.status.success());
    if !has {
        eprintln!("python3 with tensorboard not found: the event file is not read by TensorBoard here");
        return None;
    }
    let o = std::process::Command::new("python3").arg(fixture("read_events.py")).arg(path).output().unwrap();
    assert!(o.status.success(), "TensorBoard's reader refused {}: {}", path.display(), String::from_utf8_lossy(&o.stderr));
    Some(String::from_utf8(o.stdout).unwrap())
}
