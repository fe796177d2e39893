//! The downloadable datasets of `--data`: MNIST, Fashion-MNIST and CIFAR-10, fetched into the
//! cache directory on first use (SHA-256 checked, resumable, atomic: `liandan_train::data::download`),
//! and how every dataset's pixels reach a model ([`Pixels`]).

use std::sync::Arc;

use liandan_nn::zoo::{Target, ZooSpec};
use liandan_train::data::download::{self, RemoteFile};
use liandan_train::data::{cifar10, Dataset, Mnist, Split, Transform, Transformed, MNIST_MEAN, MNIST_STD};

use crate::output::note;
use crate::Failure;

/// How pixels (0..=255) reach a model: scaled to `[0, 1]` and normalized with the data's
/// per-channel mean and standard deviation (the classifiers), or only scaled (the vae, whose
/// loss compares its output, pixel probabilities, with its input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pixels {
    Normalized,
    Unit,
}

impl Pixels {
    pub fn of(spec: &ZooSpec) -> Pixels {
        match spec.target {
            Target::Classes(_) => Pixels::Normalized,
            Target::Reconstruction => Pixels::Unit,
        }
    }

    /// The transforms for images of `channels` channels: MNIST's statistics for one channel,
    /// CIFAR-10's for three.
    pub fn transforms(self, channels: usize) -> Vec<Transform> {
        let mut t = vec![Transform::ToFloat { scale: 1.0 / 255.0 }];
        if self == Pixels::Normalized {
            t.push(match channels {
                3 => Transform::Normalize { mean: CIFAR_MEAN.to_vec(), std: CIFAR_STD.to_vec() },
                _ => Transform::Normalize { mean: vec![MNIST_MEAN], std: vec![MNIST_STD] },
            });
        }
        t
    }
}

/// A dataset, and a line saying what it is.
pub type Opened = (Arc<dyn Dataset>, String);

/// CIFAR-10's per-channel mean and standard deviation over its training split, as the
/// PyTorch CIFAR examples normalize with them.
const CIFAR_MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
const CIFAR_STD: [f32; 3] = [0.2470, 0.2435, 0.2616];

/// One split of MNIST or Fashion-MNIST (`name`) from `<cache>/<name>`, downloading that
/// split's files if they are not there yet; its pixels as `pixels` says.
pub fn mnist_like(name: &str, split: Split, pixels: Pixels) -> Result<Opened, Failure> {
    let (default_url, files): (&str, &[RemoteFile]) = match name {
        "mnist" => (download::MNIST_URL, &download::MNIST_FILES),
        _ => (download::FASHION_MNIST_URL, &download::FASHION_MNIST_FILES),
    };
    let (prefix, which) = match split {
        Split::Train => ("train-", "training"),
        Split::Test => ("t10k-", "test"),
    };
    let dir = download::cache_dir()?.join(name);
    // Files already there (gzipped or not) are used as they are: they may be the user's own
    // copies, which checking against our sums would refuse.
    let missing: Vec<RemoteFile> = files
        .iter()
        .copied()
        .filter(|f| f.name.starts_with(prefix) && !dir.join(f.name).is_file() && !dir.join(f.name.trim_end_matches(".gz")).is_file())
        .collect();
    if !missing.is_empty() {
        let base = download::base_url(default_url)?;
        note!("downloading {name}'s {which} split ({} files) from {base} into {} (set LIANDAN_DATA to change the directory)", missing.len(), dir.display());
        download::fetch_all(&base, &missing, &dir)?;
    }
    let set = Transformed::new(Arc::new(Mnist::load(&dir, split)?), pixels.transforms(1))?;
    Ok((Arc::new(set), format!("{name} from {}", dir.display())))
}

/// One split of CIFAR-10 from `<cache>/cifar-10-batches-bin`, downloaded and unpacked there on
/// first use (one archive holds both); the training split is augmented as the PyTorch CIFAR
/// examples do (random crop with padding 4, horizontal flip), its pixels as `pixels` says.
pub fn cifar(split: Split, pixels: Pixels) -> Result<Opened, Failure> {
    let root = download::cache_dir()?;
    let top = "cifar-10-batches-bin";
    if !root.join(top).is_dir() {
        let url = format!("{}{}", download::base_url(download::CIFAR10_URL)?, download::CIFAR10_FILE.name);
        note!("downloading CIFAR-10 (163 MB) from {url} into {} (set LIANDAN_DATA to change the directory)", root.display());
        download::fetch_and_unpack(&url, download::CIFAR10_FILE.sha256, &root, top)?;
    }
    let dir = root.join(top);
    let normalize = || pixels.transforms(3);
    let augment = [Transform::RandomCrop { height: 32, width: 32, padding: 4 }, Transform::RandomHorizontalFlip { p: 0.5 }];
    let set = match split {
        Split::Train => Transformed::new(Arc::new(cifar10(&dir, split)?), augment.into_iter().chain(normalize()).collect())?,
        Split::Test => Transformed::new(Arc::new(cifar10(&dir, split)?), normalize())?,
    };
    Ok((Arc::new(set), format!("CIFAR-10 from {}", dir.display())))
}
