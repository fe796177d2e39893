//! Reading one image file for [`super::ImageFolder`]: decoding (PNG, JPEG), resizing and
//! center-cropping to a model's input, grayscale or RGB, and the first pass over a folder that
//! finds the files that do not decode and sums each channel for the mean and std.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use image::imageops::{self, FilterType};
use image::{ImageBuffer, ImageReader, Pixel};

use crate::error::{Error, Result};

/// The shape images are brought to: a model's input, `[C, H, W]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageShape {
    /// 1 (grayscale) or 3 (RGB).
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl ImageShape {
    /// `channels` x `height` x `width`; an error unless `channels` is 1 or 3 and the size is
    /// positive.
    pub fn new(channels: usize, height: usize, width: usize) -> Result<ImageShape> {
        if !matches!(channels, 1 | 3) || height == 0 || width == 0 || height > u32::MAX as usize || width > u32::MAX as usize {
            return Err(Error::InvalidArgument {
                op: "ImageShape::new",
                what: format!("{channels} channels of {height}x{width}: images have 1 (grayscale) or 3 (RGB) channels and a positive size"),
            });
        }
        Ok(ImageShape { channels, height, width })
    }

    /// The image shape of a model's per-sample input: `[C, H, W]`; `[H, W]` (one channel, as
    /// the LSTM reads an image row by row); or `[D]` with `D` a square (one channel of
    /// `sqrt(D)` x `sqrt(D)`, flattened for the mlp). `None` for anything else.
    pub fn for_input(sample: &[usize]) -> Option<ImageShape> {
        match *sample {
            [c, h, w] => ImageShape::new(c, h, w).ok(),
            [h, w] => ImageShape::new(1, h, w).ok(),
            [d] => {
                let side = (d as f64).sqrt().round() as usize;
                (side * side == d).then(|| ImageShape::new(1, side, side).ok()).flatten()
            }
            _ => None,
        }
    }

    /// `[C, H, W]`.
    pub fn dims(&self) -> Vec<usize> {
        vec![self.channels, self.height, self.width]
    }

    /// Values per image.
    pub fn len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// Never true: a shape has at least one value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The image at `path` as `[C, H, W]` values in `[0, 1]`, brought to `shape` as torchvision's
/// `Resize(min(H, W))` and `CenterCrop((H, W))` do (scaled with a triangle filter until it
/// covers the target, then cut in the middle), in grayscale or RGB (alpha dropped). The
/// format is read from the file's first bytes, not its name.
pub fn load_image(path: &Path, shape: ImageShape) -> Result<Vec<f32>> {
    decode(path, shape).map_err(|reason| Error::Data { path: path.to_path_buf(), detail: format!("cannot read the image: {reason}") })
}

/// [`load_image`] with the reason as text (kept for the warning about unreadable files).
pub(crate) fn decode(path: &Path, shape: ImageShape) -> std::result::Result<Vec<f32>, String> {
    let img = ImageReader::open(path).map_err(|e| e.to_string())?.with_guessed_format().map_err(|e| e.to_string())?.decode().map_err(|e| e.to_string())?;
    if img.width() == 0 || img.height() == 0 {
        return Err("the image is empty (0 pixels wide or high)".into());
    }
    let pixels = match shape.channels {
        1 => fit(img.to_luma8(), shape),
        _ => fit(img.to_rgb8(), shape),
    };
    // HWC bytes to CHW values in [0, 1], as `ToTensor`.
    let (c, hw) = (shape.channels, shape.height * shape.width);
    let mut out = vec![0.0f32; c * hw];
    for (i, px) in pixels.chunks_exact(c).enumerate() {
        for (k, &v) in px.iter().enumerate() {
            out[k * hw + i] = f32::from(v) / 255.0;
        }
    }
    Ok(out)
}

/// Scales `img` to cover `shape`, then cuts out its middle; returns the pixels row-major.
fn fit<P: Pixel<Subpixel = u8> + 'static>(img: ImageBuffer<P, Vec<u8>>, shape: ImageShape) -> Vec<u8> {
    let (w, h) = img.dimensions();
    let (tw, th) = (shape.width as u32, shape.height as u32);
    let scale = f64::max(f64::from(tw) / f64::from(w), f64::from(th) / f64::from(h));
    let rw = ((f64::from(w) * scale).round() as u32).max(tw);
    let rh = ((f64::from(h) * scale).round() as u32).max(th);
    let resized = if (rw, rh) == (w, h) { img } else { imageops::resize(&img, rw, rh, FilterType::Triangle) };
    if (rw, rh) == (tw, th) {
        return resized.into_raw();
    }
    imageops::crop_imm(&resized, (rw - tw) / 2, (rh - th) / 2, tw, th).to_image().into_raw()
}

/// An image file that could not be decoded, and why: left out of its [`super::ImageFolder`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
}

/// Per-channel sums of an image's values and of their squares (at the model's shape).
pub(crate) type ChannelSums = Vec<(f64, f64)>;

/// Decodes every file once on all cores: for each file in order, its channel sums, or why it
/// does not decode.
pub(crate) fn survey(files: &[PathBuf], shape: ImageShape) -> Vec<std::result::Result<ChannelSums, String>> {
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let results: Vec<(usize, std::result::Result<ChannelSums, String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    // Files are handed out one at a time: photos differ in size by orders of
                    // magnitude, so fixed chunks would leave cores idle.
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else { return done };
                        done.push((i, decode(path, shape).map(|v| sums(&v, shape))));
                    }
                })
            })
            .collect();
        // A worker that panicked (a decoder bug) loses its files: they are reported unreadable below.
        workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
    });
    let mut out: Vec<std::result::Result<ChannelSums, String>> = (0..files.len()).map(|_| Err("the decoder failed on it".to_string())).collect();
    for (i, r) in results {
        out[i] = r;
    }
    out
}

/// Per-channel sums of `values` (`[C, H, W]`).
fn sums(values: &[f32], shape: ImageShape) -> ChannelSums {
    values
        .chunks(shape.height * shape.width)
        .map(|plane| plane.iter().fold((0.0, 0.0), |(s, q), &v| (s + f64::from(v), q + f64::from(v) * f64::from(v))))
        .collect()
}

/// The per-channel mean and (population) standard deviation of the images whose sums are
/// given; a channel that never varies gets std 1, so that normalizing leaves it finite.
pub(crate) fn mean_std(sums: &[&ChannelSums], shape: ImageShape) -> (Vec<f32>, Vec<f32>) {
    let n = (sums.len() * shape.height * shape.width).max(1) as f64;
    (0..shape.channels)
        .map(|c| {
            let (s, q) = sums.iter().fold((0.0, 0.0), |(s, q), x| (s + x[c].0, q + x[c].1));
            let mean = s / n;
            let std = (q / n - mean * mean).max(0.0).sqrt();
            (mean as f32, if std > 1e-6 { std as f32 } else { 1.0 })
        })
        .unzip()
}

/// Whether `path` names a PNG or JPEG file, by its extension (any case).
pub(crate) fn is_image_name(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}
