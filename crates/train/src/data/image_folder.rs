//! [`ImageFolder`]: the user's own images in torchvision's `ImageFolder` layout, one folder
//! per class, decoded on the data loader's worker threads.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::image_io::{self, ChannelSums, ImageShape, Unreadable};
use super::info::{DataInfo, InputInfo};
use super::{out_of_range, rng, Dataset, Sample};
use crate::error::{Error, Result};

/// Options of [`ImageFolder::new`] and [`ImageFolder::split`].
#[derive(Clone, Debug, PartialEq)]
pub struct ImageFolderConfig {
    /// The shape images are brought to: the model's input.
    pub shape: ImageShape,
    /// Per-channel mean and standard deviation of the values in `[0, 1]`; `None` computes them
    /// over the training images.
    pub normalize: Option<(Vec<f32>, Vec<f32>)>,
    /// Of a folder without `val/`, the fraction of images [`ImageFolder::split`] holds out to
    /// validate on (at least one image, and at least one left to train on).
    pub val_fraction: f64,
    /// The seed of that hold-out.
    pub seed: u64,
    /// The class names, in output order, of a model trained before (from its checkpoint's
    /// [`DataInfo`]): folders are matched to them by name. `None` takes the folders' names,
    /// sorted, as torchvision does.
    pub classes: Option<Vec<String>>,
}

impl ImageFolderConfig {
    /// Images brought to `shape`, normalized with the training split's statistics, 20% held
    /// out with seed 0.
    pub fn new(shape: ImageShape) -> ImageFolderConfig {
        ImageFolderConfig { shape, normalize: None, val_fraction: 0.2, seed: 0, classes: None }
    }
}

/// A file of the folder and what the first pass learned of it.
#[derive(Clone)]
struct Item {
    path: PathBuf,
    class: i64,
    sums: ChannelSums,
}

/// Images in torchvision's `ImageFolder` layout (`root/cat/001.png`, `root/dog/xyz.jpg`): the
/// class names are the folder names, sorted, and a class's label is its place in that order.
/// PNG and JPEG files are read (by their content; by extension `.png`, `.jpg`, `.jpeg` to find
/// them), in subfolders too; other files are ignored.
///
/// Opening decodes every image once, on all cores, to find the ones that do not decode (they
/// are left out and listed by [`ImageFolder::unreadable`]) and to compute the per-channel mean
/// and standard deviation. After that, [`Dataset::get`] decodes its image on the caller's
/// thread, which for a [`DataLoader`](super::DataLoader) is one of its workers: samples are
/// `[C, H, W]`, brought to the shape asked for (see [`image_io::load_image`]) and normalized.
///
/// ```no_run
/// use liandan_train::data::{DataLoader, ImageFolder, ImageFolderConfig, ImageShape};
/// use liandan_train::nn::Device;
/// # fn main() -> liandan_train::Result<()> {
/// // my_photos/cat/*.jpg, my_photos/dog/*.png, ... (or my_photos/train/... and my_photos/val/...)
/// let config = ImageFolderConfig::new(ImageShape::new(3, 32, 32)?);
/// let (train, val) = ImageFolder::split("my_photos", &config)?;
/// for bad in train.unreadable() {
///     eprintln!("warning: {} left out: {}", bad.path.display(), bad.reason);
/// }
/// println!("classes {:?}, mean {:?}, std {:?}", train.classes(), train.mean(), train.std());
/// let info = train.info(); // for FitConfig::metadata: the class names and the normalization
/// let loader = DataLoader::new(train, 32, &Device::cpu())?.shuffle(1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ImageFolder {
    classes: Arc<[String]>,
    items: Arc<[Item]>,
    shape: ImageShape,
    mean: Vec<f32>,
    std: Vec<f32>,
    unreadable: Vec<Unreadable>,
}

impl ImageFolder {
    /// Every image under `dir` (one folder per class), normalized with `config.normalize` or
    /// with their own mean and standard deviation.
    pub fn new(dir: impl AsRef<Path>, config: &ImageFolderConfig) -> Result<ImageFolder> {
        let dir = dir.as_ref();
        let classes = match &config.classes {
            Some(c) => c.clone(),
            None => class_folders(dir)?,
        };
        let folder = ImageFolder::scan(dir, &classes, config.shape)?;
        folder.normalized_with(config.normalize.clone())
    }

    /// A training and a validation split of `root`: its `train/` and `val/` folders when it has
    /// a `train/` (each laid out by class; without `val/` the hold-out below applies to
    /// `train/`), else a seeded hold-out of `config.val_fraction` of its images. Both are
    /// normalized with `config.normalize` or the training split's mean and standard deviation.
    pub fn split(root: impl AsRef<Path>, config: &ImageFolderConfig) -> Result<(ImageFolder, ImageFolder)> {
        let root = root.as_ref();
        let (train_dir, val_dir) = match root.join("train") {
            t if t.is_dir() => (t, Some(root.join("val")).filter(|v| v.is_dir())),
            _ => (root.to_path_buf(), None),
        };
        let classes = match &config.classes {
            Some(c) => c.clone(),
            None => class_folders(&train_dir)?,
        };
        let train = ImageFolder::scan(&train_dir, &classes, config.shape)?;
        let (train, val) = match val_dir {
            Some(v) => (train, ImageFolder::scan(&v, &classes, config.shape)?),
            None => train.holdout(config.val_fraction, config.seed)?,
        };
        let normalize = match &config.normalize {
            Some(n) => n.clone(),
            None => train.own_mean_std(),
        };
        Ok((train.normalized_with(Some(normalize.clone()))?, val.normalized_with(Some(normalize))?))
    }

    /// The folders under `dir` named in `classes`, read and surveyed; no normalization yet.
    fn scan(dir: &Path, classes: &[String], shape: ImageShape) -> Result<ImageFolder> {
        let mut files = Vec::new();
        for name in class_folders(dir)? {
            let Some(class) = classes.iter().position(|c| *c == name) else {
                return Err(Error::Data {
                    path: dir.join(&name),
                    detail: format!("this class folder is not one of the model's classes ({}); rename or remove it", classes.join(", ")),
                });
            };
            let class_dir = dir.join(&name);
            let (mut images, others) = list_images(&class_dir)?;
            if images.is_empty() {
                let ignored = if others > 0 { format!(" ({others} other files, which are not read)") } else { String::new() };
                return Err(Error::Data {
                    path: class_dir,
                    detail: format!("this class folder holds no PNG or JPEG images{ignored}; add images or remove the folder"),
                });
            }
            images.sort();
            files.extend(images.into_iter().map(|p| (p, class as i64)));
        }
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        let mut items = Vec::with_capacity(files.len());
        let mut unreadable = Vec::new();
        for ((path, class), surveyed) in files.into_iter().zip(image_io::survey(&paths, shape)) {
            match surveyed {
                Ok(sums) => items.push(Item { path, class, sums }),
                Err(reason) => unreadable.push(Unreadable { path, reason }),
            }
        }
        if items.is_empty() {
            return Err(Error::Data { path: dir.to_path_buf(), detail: "none of its images could be decoded; see that they are PNG or JPEG files".into() });
        }
        let (mean, std) = (vec![0.0; shape.channels], vec![1.0; shape.channels]);
        Ok(ImageFolder { classes: classes.to_vec().into(), items: items.into(), shape, mean, std, unreadable })
    }

    /// Holds out `fraction` of the images, chosen by `seed`: `(the rest, the held out)`, each in
    /// folder order. The list of unreadable files stays with the first.
    pub fn holdout(self, fraction: f64, seed: u64) -> Result<(ImageFolder, ImageFolder)> {
        let n = self.items.len();
        if !(fraction > 0.0 && fraction < 1.0) || n < 2 {
            return Err(Error::InvalidArgument {
                op: "ImageFolder::holdout",
                what: format!("cannot hold out {fraction} of {n} images; give a fraction in (0, 1) and at least 2 images (or a val/ folder)"),
            });
        }
        let held = ((n as f64 * fraction).round() as usize).clamp(1, n - 1);
        let order = rng::permutation(n, seed);
        let mut is_held = vec![false; n];
        order[..held].iter().for_each(|&i| is_held[i] = true);
        let part = |want: bool, unreadable: Vec<Unreadable>| {
            let items: Vec<Item> = self.items.iter().zip(&is_held).filter(|(_, h)| **h == want).map(|(it, _)| it.clone()).collect();
            ImageFolder { classes: self.classes.clone(), items: items.into(), shape: self.shape, mean: self.mean.clone(), std: self.std.clone(), unreadable }
        };
        Ok((part(false, self.unreadable.clone()), part(true, Vec::new())))
    }

    /// The same images normalized with `mean` and `std` (one value per channel, or one for
    /// all); `None` uses their own per-channel mean and standard deviation.
    pub fn normalized_with(mut self, normalize: Option<(Vec<f32>, Vec<f32>)>) -> Result<ImageFolder> {
        let (mean, std) = normalize.unwrap_or_else(|| self.own_mean_std());
        let c = self.shape.channels;
        let widen = |v: Vec<f32>| if v.len() == 1 { vec![v[0]; c] } else { v };
        let (mean, std) = (widen(mean), widen(std));
        if mean.len() != c || std.len() != c || std.iter().any(|s| !(s.is_finite() && *s > 0.0)) || mean.iter().any(|m| !m.is_finite()) {
            return Err(Error::InvalidArgument {
                op: "ImageFolder",
                what: format!("normalize with mean {mean:?} and std {std:?}: give {c} finite means and {c} positive stds (one per channel) or one of each"),
            });
        }
        (self.mean, self.std) = (mean, std);
        Ok(self)
    }

    /// The per-channel mean and standard deviation of these images' values in `[0, 1]`.
    fn own_mean_std(&self) -> (Vec<f32>, Vec<f32>) {
        image_io::mean_std(&self.items.iter().map(|it| &it.sums).collect::<Vec<_>>(), self.shape)
    }

    /// The class names; label `i` is `classes()[i]`.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The files that did not decode when the folder was opened, left out of the dataset.
    pub fn unreadable(&self) -> &[Unreadable] {
        &self.unreadable
    }

    /// The shape every sample has.
    pub fn shape(&self) -> ImageShape {
        self.shape
    }

    /// The per-channel mean samples are normalized with.
    pub fn mean(&self) -> &[f32] {
        &self.mean
    }

    /// The per-channel standard deviation samples are normalized with.
    pub fn std(&self) -> &[f32] {
        &self.std
    }

    /// The file of sample `index`.
    pub fn path(&self, index: usize) -> Option<&Path> {
        self.items.get(index).map(|it| it.path.as_path())
    }

    /// The class names and how samples are prepared, for a checkpoint's metadata.
    pub fn info(&self) -> DataInfo {
        let s = self.shape;
        DataInfo {
            classes: self.classes.to_vec(),
            input: InputInfo::Image { channels: s.channels, height: s.height, width: s.width, mean: self.mean.clone(), std: self.std.clone() },
        }
    }
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let item = self.items.get(index).ok_or_else(|| out_of_range("ImageFolder::get", index, self.items.len()))?;
        let mut input = image_io::load_image(&item.path, self.shape)?;
        let hw = self.shape.height * self.shape.width;
        for (c, plane) in input.chunks_mut(hw).enumerate() {
            let (m, inv) = (self.mean[c], 1.0 / self.std[c]);
            plane.iter_mut().for_each(|v| *v = (*v - m) * inv);
        }
        Ok(Sample { input, shape: self.shape.dims(), target: item.class })
    }
}

/// The class folders of `dir`, sorted by name (hidden ones left out).
fn class_folders(dir: &Path) -> Result<Vec<String>> {
    let layout = "an image folder holds one folder of images per class (photos/cat/1.jpg, photos/dog/2.png), or train/ and val/ laid out that way";
    if !dir.is_dir() {
        return Err(Error::Data { path: dir.to_path_buf(), detail: format!("no such directory; {layout}") });
    }
    let mut names: Vec<String> = read_dir(dir)?
        .into_iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    if names.is_empty() {
        return Err(Error::Data { path: dir.to_path_buf(), detail: format!("no class folders found; {layout}") });
    }
    names.sort();
    Ok(names)
}

/// The PNG and JPEG files under `dir` (in subfolders too, hidden ones left out), and how many
/// other files there are. Linked folders inside are not followed: a link to a parent would
/// never end the walk.
fn list_images(dir: &Path) -> Result<(Vec<PathBuf>, usize)> {
    let (mut images, mut others) = (Vec::new(), 0);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for path in read_dir(&d)? {
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
                continue;
            }
            let linked = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            if path.is_dir() {
                if !linked {
                    pending.push(path);
                }
            } else if image_io::is_image_name(&path) {
                images.push(path);
            } else {
                others += 1;
            }
        }
    }
    Ok((images, others))
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| Error::Io { path: dir.to_path_buf(), action: "list the directory", source };
    fs::read_dir(dir).map_err(io)?.map(|e| e.map(|e| e.path()).map_err(io)).collect()
}
