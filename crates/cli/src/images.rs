//! `predict`'s inputs: images read from PNG, JPEG, `.npy` and IDX files and brought to the
//! model's input (its channels and size), counting what was changed so that it can be said.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use image::{ImageBuffer, ImageReader, Luma, Rgb};
use liandan_train::data::read_idx;

use crate::output::note;
use crate::Failure;

/// An image, channels first, pixel values in `0..=255` as f32.
pub struct Image {
    pub label: String,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub values: Vec<f32>,
    /// Whether the file had an alpha channel, which was dropped.
    pub had_alpha: bool,
}

/// The image a model takes: channels (1 or 3), height and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}", self.channels, self.height, self.width)
    }
}

/// What was done to bring images to the model's shape, and the files skipped, for the notes.
#[derive(Default)]
pub struct Changes {
    pub to_gray: usize,
    pub to_rgb: usize,
    pub alpha: usize,
    /// Each resized image's size before, as `HxW`.
    pub resized: Vec<String>,
    /// Each skipped file, with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Why a file gave no images: it is not an image file (skipped in a directory), or it is one
/// whose contents are wrong (always an error).
enum Unread {
    NotImages(String),
    Bad(Failure),
}

/// The images of `input` (a file, or the files of a directory in name order) as `want`
/// images. In a directory, files that hold no images are skipped and listed in the changes.
pub fn read_all(input: &Path, want: Shape) -> Result<(Vec<Image>, Changes), Failure> {
    let mut changes = Changes::default();
    let mut images = Vec::new();
    match files(input, "an image file (PNG, JPEG, .npy, IDX) or a directory of them")? {
        Files::One(file) => match read_file(&file, want) {
            Ok(found) => images = found,
            Err(Unread::NotImages(why)) => return Err(Failure::usage(format!("{}: {why}", file.display()))),
            Err(Unread::Bad(f)) => return Err(f),
        },
        Files::Dir(files) => {
            for f in files {
                match read_file(&f, want) {
                    Ok(found) => images.extend(found),
                    Err(Unread::NotImages(why)) => changes.skipped.push((f, why)),
                    Err(Unread::Bad(failure)) => return Err(failure),
                }
            }
        }
    }
    for img in &mut images {
        fit(img, want, &mut changes);
    }
    Ok((images, changes))
}

/// What `--input` names: one file, or the files of a directory (not its subdirectories).
pub enum Files {
    One(PathBuf),
    Dir(Vec<PathBuf>),
}

/// The file `input` names, or the files of the directory it names in name order; `wanted`
/// says what to give instead of a path that is neither.
pub fn files(input: &Path, wanted: &str) -> Result<Files, Failure> {
    if input.is_file() {
        return Ok(Files::One(input.to_path_buf()));
    }
    if !input.is_dir() {
        return Err(Failure::usage(format!("{}: no such file or directory; give {wanted}", input.display())));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(input)
        .map_err(|e| Failure::usage(format!("{}: cannot list the directory ({e})", input.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Ok(Files::Dir(files))
}

/// The images of one file, by its extension: PNG and JPEG, `.npy`, else IDX (raw or
/// gzipped), else any image format its bytes show.
fn read_file(path: &Path, want: Shape) -> Result<Vec<Image>, Unread> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    if [".png", ".jpg", ".jpeg"].iter().any(|e| lower.ends_with(e)) {
        return decode(path, name).map(|i| vec![i]).map_err(|e| Unread::NotImages(format!("not a readable image ({e})")));
    }
    let (dims, values) = if lower.ends_with(".npy") {
        let bytes = std::fs::read(path).map_err(|e| Unread::Bad(Failure::usage(format!("{}: cannot read ({e})", path.display()))))?;
        let (dims, values, float) = parse_npy(&bytes).map_err(Unread::NotImages)?;
        if float {
            check_unit_range(path, &values).map_err(Unread::Bad)?;
        }
        let scale = if float { 255.0 } else { 1.0 };
        (dims, values.into_iter().map(|v| v * scale).collect())
    } else {
        match read_idx(path) {
            Ok(idx) => (idx.dims, idx.data.into_iter().map(f32::from).collect()),
            Err(idx_error) => {
                // A file named as IDX files are gets the IDX reader's own words.
                let why = match idx_error {
                    liandan_train::Error::Data { detail, .. } if lower.contains("idx") || lower.contains("ubyte") => detail,
                    _ => "not a PNG, JPEG, .npy or IDX file".to_string(),
                };
                return decode(path, name).map(|i| vec![i]).map_err(|_| Unread::NotImages(why));
            }
        }
    };
    split_array(&name, &dims, values, want).map_err(Unread::NotImages)
}

/// A PNG or JPEG (whatever the bytes say) as 1 or 3 channels; an alpha channel is dropped.
fn decode(path: &Path, label: String) -> Result<Image, String> {
    let img = ImageReader::open(path).map_err(|e| e.to_string())?.with_guessed_format().map_err(|e| e.to_string())?.decode().map_err(|e| e.to_string())?;
    let (width, height) = (img.width() as usize, img.height() as usize);
    let alpha = img.color().has_alpha();
    let (channels, values) = if img.color().has_color() {
        let hwc = img.to_rgb8().into_raw();
        (3, (0..3).flat_map(|c| hwc.iter().skip(c).step_by(3).map(|&v| f32::from(v))).collect())
    } else {
        (1, img.to_luma8().into_raw().into_iter().map(f32::from).collect())
    };
    Ok(Image { label, channels, height, width, values, had_alpha: alpha })
}

/// Floats of a `.npy` must be what the help promises, `[0, 1]`; 0-255 floats would be taken
/// for values 255 times too bright.
fn check_unit_range(path: &Path, values: &[f32]) -> Result<(), Failure> {
    let (lo, hi) = values.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if values.iter().all(|v| (0.0..=1.0).contains(v)) {
        return Ok(());
    }
    let range = if values.iter().any(|v| v.is_nan()) { "NaN among them".to_string() } else { format!("from {lo} to {hi}") };
    Err(Failure::usage(format!(
        "{}: float values must lie in [0, 1], but these range {range}; divide 0-255 pixels by 255, or save them as uint8",
        path.display()
    )))
}

/// The images an array of `dims` holds, channels first: `[H, W]`, `[N, H, W]` (grayscale, or
/// one RGB image `[3, H, W]` for a model of RGB images), `[N, C, H, W]` with C 1 or 3.
fn split_array(name: &str, dims: &[usize], values: Vec<f32>, want: Shape) -> Result<Vec<Image>, String> {
    let (count, channels, height, width) = match *dims {
        [h, w] => (1, 1, h, w),
        [3, h, w] if want.channels == 3 => (1, 3, h, w),
        [n, h, w] => (n, 1, h, w),
        [n, c @ (1 | 3), h, w] => (n, c, h, w),
        _ => (0, 0, 0, 0),
    };
    if count == 0 || height == 0 || width == 0 {
        return Err(format!("holds an array of shape {dims:?}, not images ([H, W], [N, H, W], [C, H, W] or [N, C, H, W] with C 1 or 3)"));
    }
    let per = channels * height * width;
    let label = |i: usize| if count == 1 { name.to_string() } else { format!("{name}[{i}]") };
    Ok(values.chunks_exact(per).enumerate().map(|(i, v)| Image { label: label(i), channels, height, width, values: v.to_vec(), had_alpha: false }).collect())
}

/// Brings `img` to `want`'s channels and size, counting what it changed.
fn fit(img: &mut Image, want: Shape, changes: &mut Changes) {
    changes.alpha += usize::from(img.had_alpha);
    let plane = img.height * img.width;
    match (img.channels, want.channels) {
        (3, 1) => {
            // torchvision's rgb_to_grayscale weights (ITU-R 601).
            let (r, rest) = img.values.split_at(plane);
            let (g, b) = rest.split_at(plane);
            img.values = (0..plane).map(|i| 0.2989 * r[i] + 0.587 * g[i] + 0.114 * b[i]).collect();
            changes.to_gray += 1;
        }
        (1, 3) => {
            img.values = img.values.repeat(3);
            changes.to_rgb += 1;
        }
        _ => {}
    }
    img.channels = want.channels;
    if (img.height, img.width) != (want.height, want.width) {
        changes.resized.push(format!("{}x{}", img.height, img.width));
        img.values = resize(&img.values, want.channels, img.height, img.width, want);
        (img.height, img.width) = (want.height, want.width);
    }
}

/// Bilinear resizing (with antialiasing when shrinking, as torchvision's `Resize`) of a
/// channels-first image of 0..=255 values.
fn resize(values: &[f32], channels: usize, height: usize, width: usize, want: Shape) -> Vec<f32> {
    // The image crate clamps f32 pixels to [0, 1].
    let unit: Vec<f32> = values.iter().map(|v| v / 255.0).collect();
    let (w, h, to_w, to_h) = (width as u32, height as u32, want.width as u32, want.height as u32);
    let scaled: Vec<f32> = if channels == 1 {
        let buf: ImageBuffer<Luma<f32>, Vec<f32>> = ImageBuffer::from_raw(w, h, unit).expect("sized for the image");
        image::imageops::resize(&buf, to_w, to_h, FilterType::Triangle).into_raw()
    } else {
        let plane = height * width;
        let hwc: Vec<f32> = (0..plane).flat_map(|i| (0..3).map(move |c| c * plane + i)).map(|k| unit[k]).collect();
        let buf: ImageBuffer<Rgb<f32>, Vec<f32>> = ImageBuffer::from_raw(w, h, hwc).expect("sized for the image");
        let out = image::imageops::resize(&buf, to_w, to_h, FilterType::Triangle).into_raw();
        (0..3).flat_map(|c| out.iter().skip(c).step_by(3).copied().collect::<Vec<_>>()).collect()
    };
    scaled.into_iter().map(|v| v * 255.0).collect()
}

/// A `.npy` array (version 1-3, C order) of u8, f32 or f64 values: its shape, its values, and
/// whether they are floats.
fn parse_npy(bytes: &[u8]) -> Result<(Vec<usize>, Vec<f32>, bool), String> {
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
    let (values, float): (Vec<f32>, bool) = match descr {
        "|u1" | "<u1" if data.len() >= n => (data[..n].iter().map(|&b| f32::from(b)).collect(), false),
        "<f4" if data.len() / 4 >= n => (data[..n * 4].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(), true),
        "<f8" if data.len() / 8 >= n => (data[..n * 8].chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32).collect(), true),
        "|u1" | "<u1" | "<f4" | "<f8" => return bad("the data is shorter than its shape says"),
        other => return Err(format!("arrays of dtype `{other}` are not supported; save u8 pixels or float32/float64 values in [0, 1]")),
    };
    Ok((shape, values, float))
}

/// The notes on stderr for what was changed and skipped (nothing changes silently).
pub fn report(changes: &Changes, model: &str, want: Shape) {
    let plural = |n: usize, one: &str, many: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {many}") };
    let takes = format!("{model} takes {want} images");
    if changes.to_gray > 0 {
        note!("note: {} converted to grayscale (0.299 R + 0.587 G + 0.114 B): {takes}", plural(changes.to_gray, "RGB image", "RGB images"));
    }
    if changes.to_rgb > 0 {
        note!("note: {} repeated over 3 channels (RGB): {takes}", plural(changes.to_rgb, "grayscale image", "grayscale images"));
    }
    if changes.alpha > 0 {
        note!("note: the alpha channel of {} dropped", plural(changes.alpha, "image", "images"));
    }
    if !changes.resized.is_empty() {
        let mut sizes = changes.resized.clone();
        sizes.sort();
        sizes.dedup();
        note!(
            "note: {} resized to {}x{} (bilinear) from {}: {takes}",
            plural(changes.resized.len(), "image", "images"),
            want.height,
            want.width,
            sizes.join(", ")
        );
    }
    if !changes.skipped.is_empty() {
        const LISTED: usize = 5;
        let listed: Vec<String> = changes
            .skipped
            .iter()
            .take(LISTED)
            .map(|(p, why)| format!("{} ({why})", p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()))
            .collect();
        let more = changes.skipped.len().saturating_sub(LISTED);
        let more = if more > 0 { format!(", and {more} more") } else { String::new() };
        note!("note: skipped {} that hold no images: {}{more}", plural(changes.skipped.len(), "file", "files"), listed.join(", "));
    }
}
