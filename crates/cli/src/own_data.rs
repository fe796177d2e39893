//! `--data` for the user's own data: a folder of images in torchvision's `ImageFolder` layout,
//! or a CSV table with `--target`; the model sized to its classes, and `eval` and `predict` on
//! a checkpoint that names them.

use std::path::Path;
use std::sync::Arc;

use liandan_nn::checkpoint;
use liandan_nn::zoo::{self, ZooConfig, ZooSpec};
use liandan_train::data::{
    load_image, rng, CsvTable, DataInfo, DataLoader, Dataset, ImageFolder, ImageFolderConfig, ImageShape, InputInfo, Subset, TensorDataset,
};
use liandan_train::trainer::{predict as run_model, state};

use crate::args::{OwnDataArgs, PredictArgs};
use crate::common::{build_model, check_fits, classifies, load_weights, open_data, pick_device, probabilities, Part, ZooNet};
use crate::datasets::Pixels;
use crate::images::{self, Changes, Files, Shape};
use crate::output::{note, say};
use crate::Failure;

/// A training and a validation dataset, a line saying what they are, and for the user's own
/// data, its classes and preparation (kept in the checkpoints).
pub struct Opened {
    pub train: Arc<dyn Dataset>,
    pub val: Arc<dyn Dataset>,
    pub what: String,
    pub info: Option<DataInfo>,
}

/// Validation's share of an image folder without `val/`, or of a table, as the bundled set holds out.
const VAL_FRACTION: f64 = 0.2;

/// The data `data` names for training `spec`: an image folder, a CSV table (read as `own`
/// says), or a dataset [`open_data`] opens; at most `max` samples of each part, and `seed`
/// picks the validation hold-out.
pub fn open(data: &str, own: &OwnDataArgs, spec: &ZooSpec, max: Option<usize>, seed: u64) -> Result<Opened, Failure> {
    let (train, val, what, info): (Arc<dyn Dataset>, Arc<dyn Dataset>, String, DataInfo) = match kind(data, own)? {
        Kind::Builtin => {
            check_fits(spec, data)?;
            let (train, val, what) = open_data(data, max, Pixels::of(spec))?;
            return Ok(Opened { train, val, what, info: None });
        }
        Kind::Table(target) => {
            table_model(spec)?;
            let table = CsvTable::open(data, &target)?;
            let skipped = match table.skipped_columns() {
                [] => String::new(),
                s => format!("; not numeric, left out: {}", s.join(", ")),
            };
            let (train, val) = table.split(VAL_FRACTION, seed)?;
            let what = format!(
                "table {data}: {} features ({}), {} classes ({}){skipped}",
                train.features().len(),
                train.features().join(", "),
                train.classes().len(),
                train.classes().join(", ")
            );
            let info = train.info();
            (Arc::new(train), Arc::new(val), what, info)
        }
        Kind::Images => {
            let mut config = ImageFolderConfig::new(image_shape(spec)?);
            (config.seed, config.val_fraction, config.normalize) = (seed, VAL_FRACTION, normalization(own)?);
            let (train, val) = ImageFolder::split(data, &config)?;
            warn_unreadable(&train, Path::new(data));
            let s = train.shape();
            let what = format!(
                "image folder {data}: {} classes ({}), {}x{}x{}, mean {} std {}",
                train.classes().len(),
                train.classes().join(", "),
                s.channels,
                s.height,
                s.width,
                numbers(train.mean()),
                numbers(train.std())
            );
            let info = train.info();
            (Arc::new(train), Arc::new(val), what, info)
        }
    };
    Ok(Opened { train: cut(train, max, seed)?, val: cut(val, max, seed)?, what, info: Some(info) })
}

/// The part of `data` that `eval` scores a checkpoint trained on the user's own data on, read
/// as its `info` says (classes, normalization, columns), and a line saying what it is.
/// `train` and `val` are the parts training used (`train/` and `val/`, or the hold-out of the
/// run's `seed`); `test` is the folder's `test/`, else every image of it (new images), or
/// every row of a table.
pub fn open_for_eval(data: &str, part: Part, info: &DataInfo, seed: u64, max: Option<usize>) -> Result<(Arc<dyn Dataset>, String), Failure> {
    let path = Path::new(data);
    let (set, what): (Arc<dyn Dataset>, String) = match &info.input {
        InputInfo::Image { channels, height, width, mean, std } if path.is_dir() => {
            let mut config = ImageFolderConfig::new(ImageShape::new(*channels, *height, *width)?);
            (config.classes, config.normalize) = (Some(info.classes.clone()), Some((mean.clone(), std.clone())));
            (config.seed, config.val_fraction) = (seed, VAL_FRACTION);
            let folder = match part {
                Part::Train | Part::Val => {
                    let (train, val) = ImageFolder::split(path, &config)?;
                    if part == Part::Train {
                        train
                    } else {
                        val
                    }
                }
                Part::Test if path.join("test").is_dir() => ImageFolder::new(path.join("test"), &config)?,
                Part::Test => ImageFolder::new(path, &config)?,
            };
            warn_unreadable(&folder, path);
            (Arc::new(folder), format!("image folder {data}"))
        }
        InputInfo::Table { .. } if path.is_file() => {
            let table = CsvTable::open_like(path, info)?;
            let table = match part {
                Part::Test => table,
                // The run's split, standardized as the checkpoint was trained.
                Part::Train | Part::Val => {
                    let (train, val) = table.split(VAL_FRACTION, seed)?;
                    let part = if part == Part::Train { train } else { val };
                    part.standardized_with(Some(standardization(info)))?
                }
            };
            (Arc::new(table), format!("table {data}"))
        }
        InputInfo::Image { .. } => {
            return Err(Failure::usage(format!("the checkpoint was trained on an image folder; give such a folder with --data (not `{data}`)")))
        }
        InputInfo::Table { .. } => return Err(Failure::usage(format!("the checkpoint was trained on a table; give a CSV file with --data (not `{data}`)"))),
    };
    Ok((cut(set, max, 0)?, format!("{what} ({} classes)", info.classes.len())))
}

/// A table's mean and standard deviation as the checkpoint keeps them.
fn standardization(info: &DataInfo) -> (Vec<f32>, Vec<f32>) {
    match &info.input {
        InputInfo::Table { mean, std, .. } | InputInfo::Image { mean, std, .. } => (mean.clone(), std.clone()),
    }
}

enum Kind {
    Builtin,
    Images,
    Table(String),
}

/// What `data` names: a CSV file (which needs `--target`), an image folder (a directory
/// without MNIST's IDX files), or a built-in set or IDX directory.
fn kind(data: &str, own: &OwnDataArgs) -> Result<Kind, Failure> {
    let path = Path::new(data);
    let csv = data.to_ascii_lowercase().ends_with(".csv");
    match (&own.target, csv) {
        (Some(t), true) => return Ok(Kind::Table(t.clone())),
        (None, true) => return Err(Failure::usage(format!("--data {data}: a table needs --target COLUMN, the column of class labels"))),
        (Some(_), false) => return Err(Failure::usage(format!("--target is for CSV tables, and `{data}` is not a .csv file"))),
        (None, false) => {}
    }
    let images = path.is_dir() && !holds_idx(path);
    if images && !holds_folders(path) {
        return Err(Failure::usage(format!(
            "--data {data}: the directory holds neither MNIST-format files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...) \
             nor a folder of images per class (photos/cat/1.jpg, photos/dog/2.png)"
        )));
    }
    if own.mean.is_some() && !images {
        return Err(Failure::usage("--mean and --std are for image folders"));
    }
    Ok(if images { Kind::Images } else { Kind::Builtin })
}

/// Whether `dir` holds a folder (a class's, or `train/`).
fn holds_folders(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| entries.flatten().any(|e| e.path().is_dir()))
}

/// Whether `dir` holds MNIST-format files (`train-images-idx3-ubyte`, ...).
fn holds_idx(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| (n.starts_with("train-") || n.starts_with("t10k-")) && n.contains("idx")))
    })
}

/// The image shape classifier `spec` takes: its input, or 1x32x32 for the mlp's 1024 inputs.
fn image_shape(spec: &ZooSpec) -> Result<ImageShape, Failure> {
    if !classifies(spec) {
        return Err(Failure::usage(format!(
            "`{}` reconstructs MNIST-like images and has no classes; image folders train the classifiers (`liandan zoo`)",
            spec.name
        )));
    }
    ImageShape::for_input(&spec.input_shape[1..])
        .ok_or_else(|| Failure::usage(format!("`{}` does not take images; pick an image model (`liandan zoo`)", spec.name)))
}

fn table_model(spec: &ZooSpec) -> Result<(), Failure> {
    match spec.name {
        "mlp" => Ok(()),
        other => Err(Failure::usage(format!("tables train the mlp (--model mlp); `{other}` takes images"))),
    }
}

/// A per-channel mean and standard deviation.
type MeanStd = (Vec<f32>, Vec<f32>);

/// `--mean` and `--std`, parsed.
fn normalization(own: &OwnDataArgs) -> Result<Option<MeanStd>, Failure> {
    let parse = |flag: &str, text: &str| -> Result<Vec<f32>, Failure> {
        text.split(',')
            .map(|v| v.trim().parse::<f32>().ok().filter(|x| x.is_finite()))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| Failure::usage(format!("{flag} {text}: give numbers separated by commas, one per channel, e.g. 0.485,0.456,0.406")))
    };
    match (&own.mean, &own.std) {
        (Some(m), Some(s)) => Ok(Some((parse("--mean", m)?, parse("--std", s)?))),
        _ => Ok(None),
    }
}

/// `[0.4914, 0.4822]`: four decimals, as people write a normalization.
fn numbers(v: &[f32]) -> String {
    format!("[{}]", v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(", "))
}

/// The files that did not decode, one warning line each, paths shown under `root`.
fn warn_unreadable(folder: &ImageFolder, root: &Path) {
    let bad = folder.unreadable();
    if bad.is_empty() {
        return;
    }
    note!("warning: {} image(s) could not be decoded and are left out:", bad.len());
    for u in bad {
        note!("warning:   {}: {}", u.path.strip_prefix(root).unwrap_or(&u.path).display(), u.reason);
    }
}

/// At most `max` samples of `data`, chosen by `seed` (a folder lists its classes one after the
/// other, so its first samples would all be of one class).
fn cut(data: Arc<dyn Dataset>, max: Option<usize>, seed: u64) -> Result<Arc<dyn Dataset>, Failure> {
    match max {
        Some(n) if n < data.len() => {
            let mut keep = rng::permutation(data.len(), rng::derive(seed, 1))[..n].to_vec();
            keep.sort_unstable();
            Ok(Arc::new(Subset::new(data, keep)?))
        }
        _ => Ok(data),
    }
}

/// Model `spec` for samples of `sample_shape`, seeded by `seed`; with `info`, its head sized to
/// the classes (and the mlp's input to a table's features).
pub fn build(spec: &ZooSpec, sample_shape: &[usize], info: Option<&DataInfo>, device: &liandan_nn::Device, seed: u64) -> Result<ZooNet, Failure> {
    let Some(info) = info else { return build_model(spec, sample_shape, device, seed) };
    let in_features = match &info.input {
        InputInfo::Table { features, .. } => Some(features.len()),
        InputInfo::Image { .. } => None,
    };
    liandan_nn::manual_seed(seed);
    Ok(ZooNet::new(zoo::build_with(spec.name, &ZooConfig { classes: info.classes.len(), in_features }, device)?))
}

/// The classes and preparation a checkpoint keeps, if it was trained on the user's own data,
/// and the settings of its run.
pub fn checkpoint_info(path: &Path) -> Result<(Option<DataInfo>, std::collections::BTreeMap<String, String>), Failure> {
    if !path.is_file() {
        return Ok((None, Default::default())); // load_weights says what is wrong with the path
    }
    let (_, metadata) = checkpoint::load_with_metadata(path, &liandan_nn::Device::cpu())?;
    Ok((DataInfo::from_metadata(&metadata)?, state::settings(&metadata)))
}

/// `liandan predict` with a checkpoint trained on the user's own data: each image (a file, or
/// the PNG and JPEG files of a directory) or table row, with its most likely class by name.
pub fn predict(a: &PredictArgs, spec: &ZooSpec, info: &DataInfo) -> Result<(), Failure> {
    let (device, why) = pick_device(a.device.as_deref())?;
    // On stderr: stdout is the predictions, a line per input.
    note!("device: {device} ({why})");
    let (data, labels): (Arc<dyn Dataset>, Vec<String>) = match &info.input {
        InputInfo::Table { .. } => {
            let table = CsvTable::open_like(&a.input, info)?;
            let labels = (0..table.len()).map(|i| format!("line {}", table.line(i).unwrap_or(0))).collect();
            (Arc::new(table), labels)
        }
        InputInfo::Image { channels, height, width, mean, std } => read_images(&a.input, spec, ImageShape::new(*channels, *height, *width)?, mean, std)?,
    };
    let mut model = build(spec, &data.get(0)?.shape, Some(info), &device, 0)?;
    load_weights(&model, &a.checkpoint, &device)?;
    let probs = probabilities(spec, &run_model(&mut model, &DataLoader::new(data, 256, &device)?)?)?;
    let classes = probs.shape()[1];
    let probs = probs.to_vec_f64()?;
    for (i, label) in labels.iter().enumerate() {
        let row = &probs[i * classes..(i + 1) * classes];
        let (class, p) = row.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (c, &p)| if p > best.1 { (c, p) } else { best });
        let name = info.classes.get(class).map_or_else(|| format!("class {class}"), String::clone);
        say!("{label}: {name} {p:.2}")?;
    }
    Ok(())
}

/// The images `input` names ([`images::files`]), prepared as in training; in a directory,
/// files that do not decode are skipped and named in a note.
fn read_images(input: &Path, spec: &ZooSpec, shape: ImageShape, mean: &[f32], std: &[f32]) -> Result<(Arc<dyn Dataset>, Vec<String>), Failure> {
    let (files, single) = match images::files(input, "a PNG or JPEG image or a directory of them")? {
        Files::One(f) => (vec![f], true),
        Files::Dir(files) => (files, false),
    };
    let mut changes = Changes::default();
    let (mut values, mut labels) = (Vec::new(), Vec::new());
    let hw = shape.height * shape.width;
    for f in files {
        match load_image(&f, shape) {
            Ok(v) => {
                values.extend(v.chunks(hw).enumerate().flat_map(|(c, plane)| plane.iter().map(move |x| (x - mean[c]) / std[c])));
                labels.push(f.file_name().map_or_else(|| f.display().to_string(), |n| n.to_string_lossy().into_owned()));
            }
            Err(e) if single => return Err(e.into()),
            Err(e) => changes.skipped.push((f, undecoded(&e))),
        }
    }
    images::report(&changes, spec.name, Shape { channels: shape.channels, height: shape.height, width: shape.width });
    if labels.is_empty() {
        return Err(Failure::usage(format!("{}: no PNG or JPEG image could be read", input.display())));
    }
    let n = labels.len();
    Ok((Arc::new(TensorDataset::from_vecs(values, vec![0; n], &shape.dims())?), labels))
}

/// Why an image did not decode, without its path (the note names the file).
fn undecoded(e: &liandan_train::Error) -> String {
    match e {
        liandan_train::Error::Data { detail, .. } => detail.clone(),
        other => other.to_string(),
    }
}
