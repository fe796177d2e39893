//! Memory-mapped `.npy` arrays (as `numpy.save` writes them, format versions 1 to 3) and the
//! [`NpyDataset`] of a features array and a labels array, read row by row, never whole.

use std::fs::File;
use std::path::{Path, PathBuf};

use half::f16;
use memmap2::Mmap;

use super::{out_of_range, Dataset, Sample};
use crate::error::{Error, Result};

/// Element types an `.npy` array may hold here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyDType {
    F32,
    F16,
    U8,
    I64,
}

impl NpyDType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            NpyDType::F32 => 4,
            NpyDType::F16 => 2,
            NpyDType::U8 => 1,
            NpyDType::I64 => 8,
        }
    }
}

/// An `.npy` file's header: what its data section holds and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub dtype: NpyDType,
    pub shape: Vec<usize>,
    /// Byte offset of the data in the file.
    pub offset: usize,
}

fn data_error(path: &Path, detail: impl Into<String>) -> Error {
    Error::Data { path: path.to_path_buf(), detail: detail.into() }
}

/// Parses the header of the `.npy` file `bytes` and checks that its data section is exactly as
/// long as the header says; `path` names the file in errors.
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<NpyArray> {
    let bad = |detail: String| data_error(path, detail);
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not an .npy file: it does not start with the magic `\\x93NUMPY`; write it with numpy.save".into()));
    }
    let (header_len, start): (usize, usize) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(bad(format!("unsupported .npy format version {v}.{} (or a truncated header); versions 1 to 3 are read", bytes[7]))),
    };
    let header = start
        .checked_add(header_len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| bad(format!("truncated: its header claims {header_len} bytes but the file is {} bytes long", bytes.len())))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("its header is not text; the file is corrupt".into()))?;
    let descr = value_of(header, "descr").ok_or_else(|| bad(format!("its header has no 'descr' entry: {header:?}")))?;
    let dtype = match descr.trim_matches(|c| c == '\'' || c == '"') {
        "<f4" => NpyDType::F32,
        "<f2" => NpyDType::F16,
        "|u1" | "<u1" => NpyDType::U8,
        "<i8" => NpyDType::I64,
        other => return Err(bad(format!("unsupported dtype {other:?}; save the array as float32, float16, uint8 or int64 (little-endian)"))),
    };
    match value_of(header, "fortran_order") {
        Some("False") => {}
        Some("True") => return Err(bad("it is in Fortran (column-major) order; save np.ascontiguousarray(x) instead".into())),
        other => return Err(bad(format!("its header's 'fortran_order' is {other:?}, not True or False"))),
    }
    let shape_text = value_of(header, "shape").ok_or_else(|| bad(format!("its header has no 'shape' entry: {header:?}")))?;
    let shape = shape_text
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad(format!("its shape {shape_text} is not a tuple of sizes"))))
        .collect::<Result<Vec<usize>>>()?;
    let offset = start + header_len;
    let want =
        shape.iter().try_fold(dtype.size(), |acc, &d| acc.checked_mul(d)).ok_or_else(|| bad(format!("its shape {shape:?} overflows the address space")))?;
    let have = bytes.len() - offset;
    if want != have {
        return Err(bad(format!("its header says {shape:?} of {dtype:?} ({want} bytes) but {have} bytes of data follow; the file is truncated or corrupt")));
    }
    Ok(NpyArray { dtype, shape, offset })
}

/// The text of `key`'s value in a header dict such as `{'descr': '<f4', 'shape': (3, 4), }`.
fn value_of<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    // A tuple runs to its closing parenthesis; anything else to the next comma or brace.
    let end = if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}'])? };
    Some(rest[..end].trim())
}

/// A mapped `.npy` file.
struct Mapped {
    path: PathBuf,
    map: Mmap,
    array: NpyArray,
}

impl Mapped {
    fn open(path: PathBuf) -> Result<Mapped> {
        let file =
            File::open(&path).map_err(|e| data_error(&path, format!("cannot open it ({e}); an .npy dataset directory holds features.npy and labels.npy")))?;
        // SAFETY: the map is read-only and we never hand out references that outlive it. Another
        // program truncating the file while it is mapped would fault the process (SIGBUS): the
        // price of reading data larger than memory without copying it.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| data_error(&path, format!("cannot map it into memory ({e})")))?;
        let array = parse_npy(&map, &path)?;
        Ok(Mapped { path, map, array })
    }

    /// The bytes of elements `[start, start + n)`, in chunks of one element; the caller
    /// stays within the shape, which `parse_npy` checked against the file's length.
    fn elements(&self, start: usize, n: usize) -> std::slice::ChunksExact<'_, u8> {
        let size = self.array.dtype.size();
        self.map[self.array.offset + start * size..self.array.offset + (start + n) * size].chunks_exact(size)
    }
}

fn f32_of(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}
fn f16_of(b: &[u8]) -> f32 {
    f16::from_le_bytes([b[0], b[1]]).to_f32()
}
fn u8_of(b: &[u8]) -> f32 {
    f32::from(b[0])
}
fn i64_of(b: &[u8]) -> i64 {
    i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// A dataset of two memory-mapped arrays in a directory: `features.npy` (`[N, ...]`, f32, f16,
/// u8 or i64) and `labels.npy` (`[N]`, i64 or u8). Only the rows a batch asks for are read
/// (the operating system pages them in and out), so the data may be larger than memory.
pub struct NpyDataset {
    features: Mapped,
    labels: Mapped,
}

impl NpyDataset {
    /// Opens `dir/features.npy` and `dir/labels.npy` and checks that they agree.
    pub fn open(dir: &Path) -> Result<NpyDataset> {
        if !dir.is_dir() {
            return Err(data_error(dir, "no such directory; an .npy dataset is a directory holding features.npy and labels.npy"));
        }
        let features = Mapped::open(dir.join("features.npy"))?;
        let labels = Mapped::open(dir.join("labels.npy"))?;
        if !matches!(labels.array.dtype, NpyDType::I64 | NpyDType::U8) {
            return Err(data_error(&labels.path, format!("labels are {:?}; save them as int64 or uint8 class indices", labels.array.dtype)));
        }
        let n = features.array.shape.first().copied();
        if n.is_none() || labels.array.shape != [n.unwrap_or(0)] {
            return Err(data_error(
                &labels.path,
                format!(
                    "has shape {:?} but {} has shape {:?}; labels must be [N] for features [N, ...]",
                    labels.array.shape,
                    features.path.display(),
                    features.array.shape
                ),
            ));
        }
        Ok(NpyDataset { features, labels })
    }
}

impl Dataset for NpyDataset {
    fn len(&self) -> usize {
        self.labels.array.shape[0]
    }

    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len() {
            return Err(out_of_range("NpyDataset::get", index, self.len()));
        }
        let shape = self.features.array.shape[1..].to_vec();
        let per: usize = shape.iter().product();
        let values = self.features.elements(index * per, per);
        let input = match self.features.array.dtype {
            NpyDType::F32 => values.map(f32_of).collect(),
            NpyDType::F16 => values.map(f16_of).collect(),
            NpyDType::U8 => values.map(u8_of).collect(),
            NpyDType::I64 => values.map(|b| i64_of(b) as f32).collect(),
        };
        let label = self.labels.elements(index, 1).next().unwrap_or(&[0]);
        // `open` admitted only u8 and i64 labels.
        let target = if self.labels.array.dtype == NpyDType::U8 { i64::from(label[0]) } else { i64_of(label) };
        Ok(Sample { input, shape, target })
    }
}
