//! Training on the user's own data through the binary, on the CPU: an image folder (PNG and
//! JPEG of several sizes, one file corrupt) with mnist_cnn and resnet18, a CSV table with the
//! mlp; `predict` naming the classes; TensorBoard event files with the expected scalars.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::{ImageFormat, Rgb, RgbImage};
use liandan_nn::checkpoint;
use liandan_train::data::DataInfo;
use liandan_train::tensorboard::{histograms, read_events, tags};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).env("LIANDAN_DEVICE", "cpu").args(args).output().expect("the liandan binary runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn ok(args: &[&str]) -> String {
    let o = liandan(args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{args:?} failed:\n{out}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    out
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

const CLASSES: [&str; 3] = ["cat", "dog", "fish"];

/// Three classes of small synthetic pictures under `root`: a bright disc on a dark ground for
/// `cat`, a cross for `dog`, stripes for `fish`, drawn at `n` sizes, as PNG and JPEG in turn.
fn photos(root: &Path, n: u32) {
    for (k, class) in CLASSES.iter().enumerate() {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for i in 0..n {
            let (w, h) = (14 + 3 * i, 12 + 2 * i);
            let img = RgbImage::from_fn(w, h, |x, y| {
                let (dx, dy) = (x as i32 - w as i32 / 2, y as i32 - h as i32 / 2);
                let on = match k {
                    0 => dx * dx + dy * dy < 16,
                    1 => dx.abs() < 2 || dy.abs() < 2,
                    _ => x % 4 < 2,
                };
                if on {
                    Rgb([230, 200 - 40 * k as u8, 60 * k as u8])
                } else {
                    Rgb([20, 30, 40])
                }
            });
            let (name, format) = if i % 2 == 0 { (format!("{i}.png"), ImageFormat::Png) } else { (format!("{i}.jpg"), ImageFormat::Jpeg) };
            img.save_with_format(root.join(class).join(name), format).unwrap();
        }
    }
    std::fs::write(root.join("dog/corrupt.jpg"), b"\xff\xd8\xff not really a JPEG").unwrap();
}

/// The one event file `train --tensorboard` wrote into `dir`.
fn event_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("events.out.tfevents."))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// `predict`'s lines name one of the classes and its probability: `a.png: cat 0.93`.
fn names_classes(out: &str, lines: usize) {
    assert_eq!(out.lines().count(), lines, "{out}");
    for line in out.lines() {
        let (_, answer) = line.rsplit_once(": ").unwrap_or_else(|| panic!("{line}"));
        let (class, p) = answer.split_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(CLASSES.contains(&class), "{line}");
        assert!(p.len() == 4 && p.parse::<f64>().is_ok_and(|p| (0.0..=1.0).contains(&p)), "{line}");
    }
}

#[test]
fn mnist_cnn_trains_on_an_image_folder_and_predict_names_the_classes() {
    let dir = tempfile::tempdir().unwrap();
    let (data, out) = (dir.path().join("my_photos"), dir.path().join("run"));
    photos(&data, 5);
    let o = liandan(&[
        "train",
        "--data",
        path(&data),
        "--model",
        "mnist_cnn",
        "--epochs",
        "1",
        "--batch-size",
        "4",
        "--tensorboard",
        "--summary",
        "--out",
        path(&out),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 classes (cat, dog, fish), 1x28x28"), "{stdout}");
    assert!(stdout.contains("12 training, 3 validation samples"), "{stdout}");
    assert!(stdout.contains("Linear-") && stdout.contains("[1, 3]"), "the head has three outputs:\n{stdout}");
    assert!(stderr.contains("warning: 1 image(s) could not be decoded") && stderr.contains("dog/corrupt.jpg"), "{stderr}");

    let (_, metadata) = checkpoint::load_with_metadata(out.join("best.safetensors"), &liandan_nn::Device::cpu()).unwrap();
    assert_eq!(metadata["liandan.classes"], r#"["cat","dog","fish"]"#);
    assert_eq!(DataInfo::from_metadata(&metadata).unwrap().unwrap().classes, CLASSES);

    let events = read_events(event_file(&out)).unwrap();
    let found = tags(&events);
    for tag in ["train/loss", "train/acc", "train/lr", "train/samples_per_sec", "val/loss", "val/acc"] {
        assert!(found.iter().any(|t| t == tag), "{tag} missing from {found:?}");
    }

    let best = out.join("best.safetensors");
    names_classes(&ok(&["predict", "--model", "mnist_cnn", "--checkpoint", path(&best), "--input", path(&data.join("cat"))]), 5);
    let o = liandan(&["predict", "--model", "mnist_cnn", "--checkpoint", path(&best), "--input", path(&data.join("dog"))]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success() && stderr.contains("corrupt.jpg"), "{stderr}");
    names_classes(&stdout, 5);
    // By default the images held out from training; `--split test` a folder of new images, whole.
    let eval = ok(&["eval", "--model", "mnist_cnn", "--checkpoint", path(&best)]);
    assert!(eval.contains("val split, 3 samples") && eval.contains("accuracy"), "{eval}");
    let eval = ok(&["eval", "--model", "mnist_cnn", "--checkpoint", path(&best), "--data", path(&data.join("../my_photos")), "--split", "test"]);
    assert!(eval.contains("test split, 15 samples") && eval.contains("accuracy"), "{eval}");
}

#[test]
fn resnet18_trains_on_train_and_val_folders_with_weight_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let (data, out) = (dir.path().join("photos"), dir.path().join("run"));
    photos(&data.join("train"), 2);
    photos(&data.join("val"), 1);
    let stdout = ok(&[
        "train",
        "--data",
        path(&data),
        "--model",
        "resnet18",
        "--epochs",
        "1",
        "--batch-size",
        "2",
        "--limit-batches",
        "2",
        "--tensorboard",
        "--histograms",
        "--out",
        path(&out),
    ]);
    assert!(stdout.contains("3 classes (cat, dog, fish), 3x32x32") && stdout.contains("6 training, 3 validation samples"), "{stdout}");
    let events = read_events(event_file(&out)).unwrap();
    let fc = histograms(&events, "weights/fc.weight");
    assert_eq!(fc.len(), 1);
    assert_eq!(fc[0].1.num, 512.0 * 3.0, "the head is sized to the three classes");
    let photo = data.join("val/fish/0.png");
    names_classes(&ok(&["predict", "--model", "resnet18", "--checkpoint", path(&out.join("best.safetensors")), "--input", path(&photo)]), 1);
}

#[test]
fn the_mlp_trains_on_a_csv_table_and_predicts_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (table, out) = (dir.path().join("flowers.csv"), dir.path().join("run"));
    let mut csv = String::from("id,petal,sepal,width,species\n");
    for i in 0..30 {
        let class = ["iris", "rose", "tulip"][i % 3];
        let k = (i % 3) as f64;
        csv.push_str(&format!(
            "p{i},{},{},{},{class}\n",
            1.0 + k * 2.0 + (i as f64 * 0.37) % 0.5,
            5.0 - k + (i as f64 * 0.11) % 0.3,
            0.2 * k + 0.01 * i as f64
        ));
    }
    std::fs::write(&table, csv).unwrap();
    let stdout = ok(&[
        "train",
        "--summary",
        "--data",
        path(&table),
        "--target",
        "species",
        "--model",
        "mlp",
        "--epochs",
        "3",
        "--batch-size",
        "8",
        "--lr",
        "0.1",
        "--out",
        path(&out),
    ]);
    assert!(stdout.contains("3 features (petal, sepal, width), 3 classes (iris, rose, tulip); not numeric, left out: id"), "{stdout}");
    assert!(stdout.contains("24 training, 6 validation samples") && stdout.contains("[1, 3]"), "{stdout}");
    // A resume reads the table as the run did: --data and --target come from the checkpoint.
    let resumed = ok(&["train", "--out", path(&out), "--resume", "--epochs", "4"]);
    assert!(resumed.contains("resuming") && resumed.contains("epoch 4/4"), "{resumed}");
    let predicted = ok(&["predict", "--model", "mlp", "--checkpoint", path(&out.join("best.safetensors")), "--input", path(&table)]);
    assert_eq!(predicted.lines().count(), 30, "{predicted}");
    assert!(predicted.lines().next().unwrap().starts_with("line 2: "), "{predicted}");
    for line in predicted.lines() {
        let class = line.split(": ").nth(1).unwrap().split(' ').next().unwrap();
        assert!(["iris", "rose", "tulip"].contains(&class), "{line}");
    }
    let eval = ok(&["eval", "--model", "mlp", "--checkpoint", path(&out.join("best.safetensors")), "--data", path(&table)]);
    assert!(eval.contains("val split, 6 samples"), "{eval}");
    let eval = ok(&["eval", "--model", "mlp", "--checkpoint", path(&out.join("best.safetensors")), "--data", path(&table), "--split", "test"]);
    assert!(eval.contains("test split, 30 samples"), "{eval}");
}

#[test]
fn mistakes_in_the_users_data_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad_row = dir.path().join("bad.csv");
    std::fs::write(&bad_row, "x,y,label\n1,2,a\n3,oops,b\n").unwrap();
    let empty_class = dir.path().join("photos");
    photos(&empty_class, 2);
    std::fs::create_dir_all(empty_class.join("emu")).unwrap();
    let out = dir.path().join("run");
    for (args, needle) in [
        (vec!["--data", path(&bad_row), "--target", "label", "--model", "mlp"], "line 3: column `y` holds `oops`"),
        (vec!["--data", path(&bad_row), "--model", "mlp"], "needs --target"),
        (vec!["--data", path(&bad_row), "--target", "label", "--model", "resnet18"], "tables train the mlp"),
        (vec!["--data", path(&bad_row), "--target", "z", "--model", "mlp"], "no column `z`"),
        (vec!["--data", path(&empty_class), "--model", "mnist_cnn"], "emu: this class folder holds no PNG or JPEG images"),
    ] {
        let mut all = vec!["train", "--epochs", "1", "--out", path(&out)];
        all.extend(args.iter().copied());
        let o = liandan(&all);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{all:?}: {err}");
    }
}
