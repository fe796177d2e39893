//! `liandan predict`: images from IDX files, `.npy` arrays or PNG files, through a trained
//! model, with the predicted class and its probability per image.

use std::path::{Path, PathBuf};

use liandan_train::data::{read_idx, DataLoader, TensorDataset, Transformed};
use liandan_train::trainer::predict as run_model;

use crate::args::PredictArgs;
use crate::common::{build_model, classifier, load_weights, pick_device, probabilities};
use crate::datasets::mnist_transforms;
use crate::Failure;

/// Images of one file: `(label, pixels in 0..=255 as f32)`, each `side * side` values.
type Images = Vec<(String, Vec<f32>)>;

pub fn predict(a: &PredictArgs) -> Result<(), Failure> {
    let spec = classifier(&a.model)?;
    let (device, _) = pick_device(a.device.as_deref())?;
    let files = input_files(&a.input)?;
    let mut images: Images = Vec::new();
    for f in &files {
        images.extend(read_images(f)?);
    }
    if images.is_empty() {
        return Err(Failure::usage(format!("{}: no images found", a.input.display())));
    }
    let (n, pixels) = (images.len(), images.iter().flat_map(|(_, p)| p.iter().copied()).collect::<Vec<f32>>());
    let data = TensorDataset::from_vecs(pixels, vec![0; n], &[1, 28, 28])?;
    let data = Transformed::new(std::sync::Arc::new(data), mnist_transforms())?;
    let mut model = build_model(spec, &[1, 28, 28], &device, 0)?;
    load_weights(&model, &a.checkpoint, &device)?;
    let loader = DataLoader::new(data, 256, &device)?;
    let probs = probabilities(spec, &run_model(&mut model, &loader)?)?;
    let classes = probs.shape()[1];
    let probs = probs.to_vec_f64()?;
    for (i, (label, _)) in images.iter().enumerate() {
        let row = &probs[i * classes..(i + 1) * classes];
        let (class, p) = row.iter().enumerate().fold((0, f64::NEG_INFINITY), |best, (c, &p)| if p > best.1 { (c, p) } else { best });
        println!("{label}: class {class} (p = {p:.4})");
    }
    Ok(())
}

/// The file, or the files of the directory in name order.
fn input_files(path: &Path) -> Result<Vec<PathBuf>, Failure> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        return Err(Failure::usage(format!("{}: no such file or directory; give an image file (IDX, .npy, PNG) or a directory of them", path.display())));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Failure::usage(format!("{}: cannot list the directory ({e})", path.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// The images of `path`, by its extension: `.png`, `.npy`, else IDX (raw or gzipped).
fn read_images(path: &Path) -> Result<Images, Failure> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let bad = |what: String| Failure::usage(format!("{}: {what}", path.display()));
    let lower = name.to_ascii_lowercase();
    let (dims, values): (Vec<usize>, Vec<f32>) = if lower.ends_with(".png") {
        let img = image::open(path).map_err(|e| bad(format!("not a readable PNG ({e})")))?.into_luma8();
        (vec![img.height() as usize, img.width() as usize], img.into_raw().into_iter().map(f32::from).collect())
    } else if lower.ends_with(".npy") {
        let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read ({e})")))?;
        parse_npy(&bytes).map_err(bad)?
    } else {
        let idx = read_idx(path)?;
        (idx.dims, idx.data.into_iter().map(f32::from).collect())
    };
    let count = match dims[..] {
        [28, 28] => 1,
        [n, 28, 28] | [n, 1, 28, 28] => n,
        _ => return Err(bad(format!("holds an array of shape {dims:?}; predict takes 28x28 grayscale images ([28, 28], [N, 28, 28] or [N, 1, 28, 28])"))),
    };
    let labels = |i: usize| if count == 1 { name.clone() } else { format!("{name}[{i}]") };
    Ok(values.chunks(28 * 28).enumerate().map(|(i, c)| (labels(i), c.to_vec())).collect())
}

/// A `.npy` array (version 1-3, C order) of u8 pixels (0..=255) or f32/f64 values in `[0, 1]`,
/// returned as pixels in 0..=255.
fn parse_npy(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>), String> {
    let bad = |what: &str| Err(format!("not a .npy array numpy.save writes: {what}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return bad("the magic string is missing");
    }
    let (len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        _ => return bad("unknown version"),
    };
    let Some(header) = bytes.get(start..start.saturating_add(len)).and_then(|h| std::str::from_utf8(h).ok()) else {
        return bad("the header is truncated");
    };
    let field = |key: &str| header.split(&format!("'{key}':")).nth(1).map(str::trim);
    let descr = field("descr").and_then(|d| d.split('\'').nth(1)).unwrap_or("");
    if field("fortran_order").is_some_and(|f| f.starts_with("True")) {
        return bad("Fortran order is not supported; save a C-order array");
    }
    let shape_text = field("shape").and_then(|s| s.strip_prefix('(')).and_then(|s| s.split(')').next()).unwrap_or("");
    let shape: Vec<usize> = match shape_text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::parse).collect() {
        Ok(s) => s,
        Err(_) => return bad("the shape does not parse"),
    };
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the shape is too large".to_string())?;
    let data = &bytes[start + len..];
    let values: Vec<f32> = match descr {
        "|u1" | "<u1" if data.len() >= n => data[..n].iter().map(|&b| f32::from(b)).collect(),
        "<f4" if data.len() >= n * 4 => data[..n * 4].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * 255.0).collect(),
        "<f8" if data.len() >= n * 8 => data[..n * 8].chunks_exact(8).map(|c| (f64::from_le_bytes(c.try_into().expect("8 bytes")) * 255.0) as f32).collect(),
        "|u1" | "<u1" | "<f4" | "<f8" => return bad("the data is shorter than its shape says"),
        other => return Err(format!("arrays of dtype `{other}` are not supported; save u8 pixels or float32/float64 values in [0, 1]")),
    };
    Ok((shape, values))
}
