//! CIFAR-10 from its binary batches (`data_batch_1.bin` ... `data_batch_5.bin`, `test_batch.bin`).

use std::io::Read;
use std::path::Path;

use super::{ImageDataset, Split};
use crate::error::{Error, Result};

/// One record: a label byte, then 3 x 32 x 32 pixels (red plane, green, blue).
const RECORD: usize = 1 + 3 * 32 * 32;

fn data_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Data { path: path.to_path_buf(), detail: detail.into() }
}

/// Parses one CIFAR-10 binary batch into `(pixels, labels)`; `path` names it in errors.
pub fn parse_cifar(bytes: &[u8], path: &Path) -> Result<(Vec<u8>, Vec<i64>)> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD) {
        return Err(data_error(
            path,
            format!("it is {} bytes long, not a whole number of {RECORD}-byte CIFAR-10 records; it is truncated or not a CIFAR-10 binary batch", bytes.len()),
        ));
    }
    let n = bytes.len() / RECORD;
    let mut pixels = Vec::with_capacity(n * (RECORD - 1));
    let mut labels = Vec::with_capacity(n);
    for (i, record) in bytes.chunks_exact(RECORD).enumerate() {
        if record[0] > 9 {
            return Err(data_error(path, format!("record {i} has label {}; CIFAR-10 labels are 0..=9, so the file is corrupt or not CIFAR-10", record[0])));
        }
        labels.push(i64::from(record[0]));
        pixels.extend_from_slice(&record[1..]);
    }
    Ok((pixels, labels))
}

/// Loads CIFAR-10's `split` from `dir` (the `cifar-10-batches-bin` directory): samples are
/// `[3, 32, 32]` raw pixel values 0..=255.
pub fn cifar10(dir: &Path, split: Split) -> Result<ImageDataset> {
    if !dir.is_dir() {
        return Err(data_error(
            dir,
            "no such directory; download CIFAR-10 with `liandan_train::data::download` or point at its `cifar-10-batches-bin` directory",
        ));
    }
    let names: Vec<String> = match split {
        Split::Train => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
        Split::Test => vec!["test_batch.bin".into()],
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for name in names {
        let path = dir.join(&name);
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| data_error(&path, format!("cannot read it ({e}); is CIFAR-10 fully downloaded into {}?", dir.display())))?;
        let (p, l) = parse_cifar(&bytes, &path)?;
        pixels.extend_from_slice(&p);
        labels.extend_from_slice(&l);
    }
    ImageDataset::new(pixels, labels, &[3, 32, 32])
}
