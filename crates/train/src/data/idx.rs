//! IDX files (MNIST, Fashion-MNIST), gzipped or raw, and the [`Mnist`] dataset built from them.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use super::ImageDataset;
use crate::error::{Error, Result};

/// Deflate expands at most 1032:1, so a gzipped file of `n` bytes cannot justify more than
/// this many times `n` bytes of contents; a header claiming more is a lie we need not allocate.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// An IDX array of u8 values (the only element type MNIST and Fashion-MNIST use).
#[derive(Clone, Debug, PartialEq)]
pub struct IdxArray {
    /// The dimensions, outermost first (`[10000, 28, 28]` for MNIST's test images).
    pub dims: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u8>,
}

fn data_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Data { path: path.to_path_buf(), detail: detail.into() }
}

/// Parses an IDX file's bytes, gzipped (detected by the gzip magic) or raw. `path` only names
/// the file in errors.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    let len = bytes.len() as u64;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        read_idx_from(GzDecoder::new(bytes), len.saturating_mul(MAX_DEFLATE_RATIO), path)
    } else {
        read_idx_from(bytes, len, path)
    }
}

/// Reads the IDX file at `path`, gzipped or raw, streaming: memory is the array's size.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let file = File::open(path).map_err(|e| data_error(path, format!("cannot open it ({e}); is the dataset downloaded into this directory?")))?;
    let len = file.metadata().map_err(|e| data_error(path, format!("cannot read its size ({e})")))?.len();
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut magic = [0u8; 2];
    reader.read_exact(&mut magic).map_err(|_| data_error(path, format!("it is {len} bytes long, too short for an IDX file; was it downloaded completely?")))?;
    // Put the two bytes back in front of the stream.
    let stream = magic.as_slice().chain(reader);
    if magic == [0x1f, 0x8b] {
        read_idx_from(GzDecoder::new(stream), len.saturating_mul(MAX_DEFLATE_RATIO), path)
    } else {
        read_idx_from(stream, len, path)
    }
}

/// Reads the header and the data from `reader`, which holds at most `bound` bytes.
fn read_idx_from(mut reader: impl Read, bound: u64, path: &Path) -> Result<IdxArray> {
    let short = |what: &str, e: std::io::Error| data_error(path, format!("cannot read its {what} ({e}); the file is truncated or not an IDX file"));
    let mut magic = [0u8; 4];
    reader.read_exact(&mut magic).map_err(|e| short("4-byte magic number", e))?;
    if magic[0] != 0 || magic[1] != 0 {
        return Err(data_error(path, format!("wrong magic number {:02x?}: an IDX file starts with two zero bytes; is it an MNIST file?", magic)));
    }
    if magic[2] != 0x08 {
        return Err(data_error(path, format!("its element type is 0x{:02x}; only unsigned bytes (0x08), as MNIST uses, are supported", magic[2])));
    }
    let rank = usize::from(magic[3]);
    if rank == 0 {
        return Err(data_error(path, "its header declares zero dimensions"));
    }
    let mut dims = Vec::with_capacity(rank);
    let mut count: u64 = 1;
    for d in 0..rank {
        let mut b = [0u8; 4];
        reader.read_exact(&mut b).map_err(|e| short("dimensions", e))?;
        let n = u32::from_be_bytes(b);
        dims.push(n as usize);
        count = count.checked_mul(u64::from(n)).filter(|&c| c <= bound).ok_or_else(|| {
            data_error(path, format!("its header claims dimension {d} of {n}, more data than a file of this size can hold; the header is corrupt"))
        })?;
    }
    let count = count as usize; // <= bound, which came from a length in memory or on disk.
    let mut data = Vec::with_capacity(count);
    reader
        .take(count as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| data_error(path, format!("cannot read its data ({e}); the file is corrupt or truncated")))?;
    if data.len() < count {
        return Err(data_error(path, format!("it is truncated: its header {dims:?} needs {count} values but only {} follow; download it again", data.len())));
    }
    if data.len() > count {
        return Err(data_error(path, format!("more data follows the {count} values its header {dims:?} describes; the file is corrupt")));
    }
    Ok(IdxArray { dims, data })
}

/// Which half of a dataset to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The training split (60,000 images for MNIST).
    Train,
    /// The test split (10,000 images for MNIST).
    Test,
}

/// MNIST and Fashion-MNIST (same file names and format) from a directory of IDX files.
pub struct Mnist;

impl Mnist {
    /// Loads `split` from `dir`, which holds `train-images-idx3-ubyte` and
    /// `train-labels-idx1-ubyte` (or `t10k-...` for the test split), each gzipped (`.gz`) or
    /// raw. Samples are `[1, 28, 28]` raw pixel values 0..=255.
    pub fn load(dir: &Path, split: Split) -> Result<ImageDataset> {
        if !dir.is_dir() {
            return Err(data_error(
                dir,
                "no such directory; download the dataset with `liandan_train::data::download` or point at the directory holding its IDX files",
            ));
        }
        let prefix = if split == Split::Train { "train" } else { "t10k" };
        let images_path = find(dir, &format!("{prefix}-images-idx3-ubyte"))?;
        let labels_path = find(dir, &format!("{prefix}-labels-idx1-ubyte"))?;
        Mnist::from_arrays(read_idx(&images_path)?, &images_path, read_idx(&labels_path)?, &labels_path)
    }

    /// A dataset from parsed image (`[N, H, W]`) and label (`[N]`) arrays; the paths name the
    /// files in errors.
    pub fn from_arrays(images: IdxArray, images_path: &Path, labels: IdxArray, labels_path: &Path) -> Result<ImageDataset> {
        let [n, h, w] = images.dims[..] else {
            return Err(data_error(images_path, format!("holds an array of shape {:?}; MNIST images are [N, 28, 28]", images.dims)));
        };
        if labels.dims != [n] {
            return Err(data_error(
                labels_path,
                format!("holds labels of shape {:?} but {} holds {n} images; are the two files from the same split?", labels.dims, images_path.display()),
            ));
        }
        let labels = labels.data.iter().map(|&l| i64::from(l)).collect();
        ImageDataset::new(images.data, labels, &[1, h, w]).map_err(|e| data_error(images_path, e.to_string()))
    }
}

/// `dir/name.gz` or `dir/name`, whichever exists.
fn find(dir: &Path, name: &str) -> Result<PathBuf> {
    let gz = dir.join(format!("{name}.gz"));
    let raw = dir.join(name);
    [gz.clone(), raw].into_iter().find(|p| p.is_file()).ok_or_else(|| data_error(&gz, format!("missing: neither {name}.gz nor {name} is in {}", dir.display())))
}
