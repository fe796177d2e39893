//! Every zoo model through `train`, `eval` and `predict` on data a user has (the bundled MNIST)
//! or can download (CIFAR-10, here a tiny stand-in in the cache), and `predict` on the images
//! a user has: PNG and JPEG of any size and color, `.npy` and IDX, and files that are none.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{npy_header, run, text};

/// The command on the CPU, with `cache` as the dataset cache and no reachable download server.
fn liandan(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_liandan"));
    c.env("LIANDAN_DATA", cache).env("LIANDAN_DATA_URL", "http://127.0.0.1:9/").env("LIANDAN_DEVICE", "cpu");
    c
}

fn fails(c: &mut Command) -> String {
    let o = c.output().expect("the liandan binary runs");
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{c:?}: {err}");
    // predict and eval name their device on stderr before they read inputs; the error is one line.
    let error: Vec<&str> = err.lines().filter(|l| !l.starts_with("device: ")).collect();
    assert!(!err.contains("panicked") && error.len() == 1, "{err}");
    err
}

/// A CIFAR-10 in `cache` as its binary batches: two images per training batch, four to test.
fn fake_cifar(cache: &Path) {
    let batch = |n: usize, seed: u32| -> Vec<u8> {
        (0..n).flat_map(|i| std::iter::once((i % 10) as u8).chain((0..3072u32).map(move |j| ((j ^ seed).wrapping_mul(2_654_435_761) >> 24) as u8))).collect()
    };
    let dir = cache.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 1..=5 {
        std::fs::write(dir.join(format!("data_batch_{i}.bin")), batch(2, i)).unwrap();
    }
    std::fs::write(dir.join("test_batch.bin"), batch(4, 9)).unwrap();
}

/// Pixel `(x, y)` of channel `c` of a test image: a smooth pattern.
fn pixel(x: u32, y: u32, c: u32) -> u8 {
    ((x * 7 + y * 3 + c * 50) % 256) as u8
}

fn gray_png(path: &Path, side: u32) {
    image::GrayImage::from_fn(side, side, |x, y| image::Luma([pixel(x, y, 0)])).save(path).unwrap();
}

fn rgb_image(width: u32, height: u32) -> image::RgbImage {
    image::RgbImage::from_fn(width, height, |x, y| image::Rgb([pixel(x, y, 0), pixel(x, y, 1), pixel(x, y, 2)]))
}

/// A `.npy` file of `shape` holding `values` as little-endian f32 (`float`) or u8.
fn npy(path: &Path, shape: &[usize], values: &[f32], float: bool) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut b = npy_header(if float { "<f4" } else { "|u1" }, &format!("({},)", dims.join(", ")));
    for &v in values {
        if float {
            b.extend_from_slice(&v.to_le_bytes());
        } else {
            b.push(v as u8);
        }
    }
    std::fs::write(path, b).unwrap();
}

/// An IDX file of `n` 28x28 images.
fn idx_images(path: &Path, n: usize) {
    let mut b = vec![0, 0, 8, 3];
    for d in [n as u32, 28, 28] {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend((0..n * 784).map(|i| ((i * 37) % 256) as u8));
    std::fs::write(path, b).unwrap();
}

/// Trains `model` for one tiny epoch into `cache/<out>` and returns its best checkpoint.
fn tiny_train(cache: &Path, model: &str, out: &str, extra: &[&str]) -> PathBuf {
    let dir = cache.join(out);
    let args = ["train", "--model", model, "--max-samples", "8", "--batch-size", "4", "--limit-batches", "1", "--epochs", "1", "--out"];
    run(liandan(cache).args(args).arg(&dir).args(extra));
    dir.join("best.safetensors")
}

fn predict(cache: &Path, model: &str, checkpoint: &Path, input: &Path) -> Command {
    let mut c = liandan(cache);
    c.args(["predict", "--model", model, "--checkpoint"]).arg(checkpoint).arg("--input").arg(input);
    c
}

/// `name: class C (p = P)` lines, one per image.
fn classes(out: &str) -> Vec<(String, usize)> {
    out.lines()
        .map(|l| {
            let (name, rest) = l.split_once(": class ").unwrap_or_else(|| panic!("not a prediction: {l}"));
            (name.to_string(), rest.split(' ').next().unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn every_zoo_model_trains_evaluates_and_predicts_on_its_own_data() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path();
    fake_cifar(cache);
    let (gray, rgb) = (cache.join("digit.png"), cache.join("photo.png"));
    gray_png(&gray, 28);
    rgb_image(32, 32).save(&rgb).unwrap();
    let cases = [
        ("mlp", &[][..], &gray),
        ("mlp", &["--data", "cifar10"][..], &rgb),
        ("mnist_cnn", &[][..], &gray),
        ("seed003_cnn", &[][..], &gray),
        ("resnet18", &[][..], &rgb),
        ("vit", &[][..], &rgb),
        ("lstm", &[][..], &gray),
        ("vae", &[][..], &gray),
    ];
    for (i, (model, data, image)) in cases.into_iter().enumerate() {
        let best = tiny_train(cache, model, &format!("run{i}"), data);
        let (out, _) = run(liandan(cache).args(["eval", "--model", model, "--max-samples", "4", "--checkpoint"]).arg(&best).args(data));
        assert!(out.contains(" loss "), "{model}: {out}");
        let mut c = predict(cache, model, &best, image);
        if model == "vae" {
            c.arg("--out").arg(cache.join("grid.png"));
        }
        let (out, err) = run(&mut c);
        // Each model's own kind of image: nothing converted or resized.
        assert!(!err.contains("note:"), "{model}: {err}");
        if model == "vae" {
            assert!(out.starts_with("digit.png: loss ") && cache.join("grid.png").is_file(), "{out}");
        } else {
            assert_eq!(classes(&out).len(), 1, "{model}: {out}");
        }
    }
}

#[test]
fn zoo_shows_the_training_defaults_of_each_model() {
    let (out, _) = run(Command::new(env!("CARGO_BIN_EXE_liandan")).arg("zoo"));
    let line = |name: &str| out.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("no {name}:\n{out}")).to_string();
    let header = out.lines().next().unwrap();
    for column in ["optimizer", "batch", "epochs", "data"] {
        assert!(header.contains(column), "{header}");
    }
    let words = |name: &str| line(name).split_whitespace().map(str::to_string).collect::<Vec<_>>().join(" ");
    assert!(words("mnist_cnn").contains("adadelta lr 1, scheduler step:0.7 64 3 bundled"), "{}", words("mnist_cnn"));
    assert!(words("resnet18").contains("sgd lr 0.1 momentum 0.9 weight decay 0.0005 128 3 cifar10"), "{}", words("resnet18"));
    assert!(words("vit").contains("adamw lr 0.001 weight decay 0.01 128 3 cifar10"), "{}", words("vit"));
    assert!(words("vae").contains("adam lr 0.001 128 10 bundled"), "{}", words("vae"));
    assert!(words("mlp").contains("sgd lr 0.01 1024 3 bundled"), "{}", words("mlp"));
}

#[test]
fn the_vae_trains_on_its_loss_resumes_exactly_and_draws_a_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path();
    let train = |out: &str, epochs: &str, extra: &[&str]| {
        run(liandan(cache)
            .args(["train", "--model", "vae", "--max-samples", "32", "--batch-size", "16", "--epochs", epochs, "--out", out])
            .args(extra)
            .current_dir(cache))
    };
    let (out, _) = train("straight", "2", &[]);
    assert!(out.contains("val_loss") && !out.contains("val_acc") && out.contains("best val_loss"), "{out}");
    let csv = std::fs::read_to_string(cache.join("straight/history.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("val_loss"), "{csv}");
    // One epoch, then a resume to two: the same weights as the straight run.
    train("resumed", "1", &[]);
    train("resumed", "2", &["--resume"]);
    let best = cache.join("straight/best.safetensors");
    assert!(std::fs::read(&best).unwrap() == std::fs::read(cache.join("resumed/best.safetensors")).unwrap(), "the resumed vae differs");

    let (out, _) = run(liandan(cache).args(["eval", "--model", "vae", "--max-samples", "64", "--checkpoint"]).arg(&best));
    assert!(out.contains("64 samples: loss ") && out.contains("(BCE + KL per image)"), "{out}");

    idx_images(&cache.join("three.idx"), 3);
    let (out, _) = run(predict(cache, "vae", &best, &cache.join("three.idx")).current_dir(cache));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (i, line) in lines[..3].iter().enumerate() {
        assert!(line.starts_with(&format!("three.idx[{i}]: loss ")) && line.contains("reconstruction") && line.contains("KL"), "{line}");
    }
    assert!(lines[3].starts_with("vae-predict.png: ") && lines[3].contains("16"), "{out}");
    // Eight tiles of 28 pixels and their gaps across; a row of inputs, one of their
    // reconstructions, a blank row and two rows of samples down.
    let grid = image::open(cache.join("vae-predict.png")).unwrap();
    assert_eq!((grid.width(), grid.height()), (8 * 30 + 2, 5 * 30 + 2));
    // An existing grid is left alone unless --out names it.
    let err = fails(predict(cache, "vae", &best, &cache.join("three.idx")).current_dir(cache));
    assert!(err.contains("vae-predict.png exists") && err.contains("--out"), "{err}");
    run(predict(cache, "vae", &best, &cache.join("three.idx")).current_dir(cache).args(["--out", "vae-predict.png"]));
}

#[test]
fn predict_converts_resizes_and_skips_with_a_note_for_each() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path();
    let best = tiny_train(cache, "mnist_cnn", "run", &[]);
    let inputs = cache.join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    rgb_image(28, 28).save(inputs.join("a-rgb.png")).unwrap();
    gray_png(&inputs.join("b-big.png"), 56);
    image::DynamicImage::ImageRgb8(rgb_image(40, 30)).save(inputs.join("c-photo.jpg")).unwrap();
    let unit: Vec<f32> = (0..784).map(|i| (i % 256) as f32 / 255.0).collect();
    npy(&inputs.join("d-unit.npy"), &[28, 28], &unit, true);
    std::fs::write(inputs.join("README.txt"), "these are digits I drew\n").unwrap();
    let (out, err) = run(&mut predict(cache, "mnist_cnn", &best, &inputs));
    let names: Vec<String> = classes(&out).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a-rgb.png", "b-big.png", "c-photo.jpg", "d-unit.npy"], "{out}");
    assert!(err.contains("2 RGB images converted to grayscale") && err.contains("mnist_cnn takes 1x28x28"), "{err}");
    assert!(err.contains("2 images resized to 28x28") && err.contains("30x40") && err.contains("56x56"), "{err}");
    assert!(err.contains("skipped 1 file") && err.contains("README.txt"), "{err}");

    // Given by itself, a file that is not an image is an error.
    let err = fails(&mut predict(cache, "mnist_cnn", &best, &inputs.join("README.txt")));
    assert!(err.contains("README.txt") && err.contains("not a PNG, JPEG, .npy or IDX file"), "{err}");
    // Floats must be in [0, 1]: 0-255 floats are refused, not taken for overexposed pixels.
    let bright: Vec<f32> = unit.iter().map(|v| v * 255.0).collect();
    npy(&inputs.join("e-bright.npy"), &[28, 28], &bright, true);
    let err = fails(&mut predict(cache, "mnist_cnn", &best, &inputs));
    assert!(err.contains("e-bright.npy") && err.contains("[0, 1]") && err.contains("to 255"), "{err}");
}

#[test]
fn predict_feeds_the_cifar_models_rgb_from_png_jpeg_and_npy() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path();
    fake_cifar(cache);
    let best = tiny_train(cache, "vit", "run", &[]);
    let inputs = cache.join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    rgb_image(32, 32).save(inputs.join("a.png")).unwrap();
    image::DynamicImage::ImageRgb8(rgb_image(32, 32)).save(inputs.join("b.jpeg")).unwrap();
    let chw: Vec<f32> = (0..3).flat_map(|c| (0..32).flat_map(move |y| (0..32).map(move |x| f32::from(pixel(x, y, c))))).collect();
    npy(&inputs.join("c.npy"), &[3, 32, 32], &chw.iter().map(|v| v / 255.0).collect::<Vec<_>>(), true);
    npy(&inputs.join("d.npy"), &[2, 3, 32, 32], &chw.repeat(2), false);
    let (out, err) = run(&mut predict(cache, "vit", &best, &inputs));
    let rows = classes(&out);
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a.png", "b.jpeg", "c.npy", "d.npy[0]", "d.npy[1]"], "{out}");
    assert!(!err.contains("note:"), "{err}");
    // The same pixels through PNG and the two .npy forms: the same class and probability.
    let lines: Vec<&str> = out.lines().collect();
    let tail = |l: &str| l.split_once(": ").unwrap().1.to_string();
    assert!(tail(lines[0]) == tail(lines[2]) && tail(lines[0]) == tail(lines[3]) && tail(lines[3]) == tail(lines[4]), "{out}");
    // A grayscale image is given three channels, with a note.
    gray_png(&cache.join("gray.png"), 32);
    let (out, err) = run(&mut predict(cache, "vit", &best, &cache.join("gray.png")));
    assert_eq!(classes(&out).len(), 1, "{out}");
    assert!(err.contains("1 grayscale image repeated over 3 channels") && err.contains("vit takes 3x32x32"), "{err}");
}
