//! Checkpoints: safetensors files whose names and layouts are PyTorch's.
//!
//! A file written by [`save`] loads in PyTorch with
//! `model.load_state_dict(safetensors.torch.load_file(path))`, and a file written by
//! `safetensors.torch.save_file(model.state_dict(), path)` loads here with [`load`] followed by
//! [`load_state_dict`]. Tensors are stored row-major and little-endian, under the names given
//! (PyTorch's state-dict keys, `layers.0.c1.weight`), in the order the safetensors library
//! itself writes them, so that the same tensors give the same bytes as PyTorch's writer.
//!
//! Dtypes: F32, F16, BF16, F64, I64, U8 and BOOL map one to one. Files from elsewhere may hold
//! I8, I16, I32, U16 or U32, which liandan has no dtype for; [`load`] widens them to I64, which
//! holds every such value exactly. Anything else (the FP8, FP6 and FP4 kinds, C64, U64) is
//! refused with [`Error::UnsupportedDType`](crate::error::Error::UnsupportedDType), naming the
//! tensor.
//!
//! [`save`] is atomic: it writes a temporary file next to the target, fsyncs it, renames it
//! over the target and fsyncs the directory, so a crash leaves the old file or the new one,
//! never half of one.
//!
//! ```no_run
//! use liandan_nn::checkpoint::{load, load_state_dict, save};
//! use liandan_nn::{DType, Device, Tensor};
//! # fn main() -> liandan_nn::Result<()> {
//! let dev = Device::cpu();
//! let w = Tensor::randn(&[2, 3], 0, DType::F32, &dev)?;
//! save("model.safetensors", &[("fc.weight".to_string(), w.clone())], None)?;
//! let report = load_state_dict(&[("fc.weight".to_string(), w)], load("model.safetensors", &dev)?, true)?;
//! assert!(report.is_complete());
//! # Ok(())
//! # }
//! ```

mod read;
mod state_dict;
mod write;
#[cfg(feature = "onnx")]
pub(crate) use write::host_bytes;

pub use crate::error::SizeMismatch;
pub use read::{load, load_with_metadata};
pub use state_dict::{load_state_dict, LoadReport};
pub use write::save;
#[cfg(feature = "onnx")]
pub(crate) use write::write_atomic;

/// Named tensors in a checkpoint's order: PyTorch's state-dict keys and their tensors.
pub type StateDict = Vec<(String, liandan_tensor::Tensor)>;

use liandan_tensor::DType;
use safetensors::Dtype;

/// The safetensors dtype a liandan dtype is written as.
fn file_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F64 => Dtype::F64,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    }
}

/// The safetensors header length field is this many bytes (a little-endian u64).
const LEN_BYTES: usize = 8;

/// The largest header the safetensors library accepts; we refuse to write one it would not
/// read, and refuse to read one before allocating for it.
const MAX_HEADER: usize = 100_000_000;
