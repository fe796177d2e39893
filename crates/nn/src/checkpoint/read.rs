//! Reading checkpoints: [`load`], which trusts nothing in the file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use half::{bf16, f16};
use liandan_tensor::{Bool8, DType, Device, Element, Tensor};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::Dtype;

use super::{StateDict, LEN_BYTES, MAX_HEADER};
use crate::error::{Error, Result};

/// Reads every tensor of the safetensors file at `path` onto `device`, in file order.
///
/// I8, I16, I32, U16 and U32 tensors are widened to I64 (exactly); dtypes liandan cannot hold
/// give [`Error::UnsupportedDType`]. A truncated, corrupt or foreign file gives
/// [`Error::Format`] saying what is wrong with it; nothing in a file can make this panic.
pub fn load(path: impl AsRef<Path>, device: &Device) -> Result<StateDict> {
    Ok(load_with_metadata(path, device)?.0)
}

/// Like [`load`], also returning the file's `__metadata__` map (empty when it has none).
///
/// The file is read, not memory-mapped: a mapped file that another program truncates kills
/// the process with SIGBUS, which a checkpoint must never be able to do. Tensors are read one
/// at a time, so the extra host memory is one tensor's bytes, not the whole file's.
pub fn load_with_metadata(path: impl AsRef<Path>, device: &Device) -> Result<(StateDict, HashMap<String, String>)> {
    let path = path.as_ref();
    let io = |action: &'static str| move |source: io::Error| Error::Io { path: path.to_path_buf(), action, source };
    let bad = |detail: String| Error::Format { path: path.to_path_buf(), detail };

    let file = File::open(path).map_err(io("open it for reading"))?;
    let stat = file.metadata().map_err(io("read its size"))?;
    if stat.is_dir() {
        return Err(bad("it is a directory; give the path of a `.safetensors` file inside it".into()));
    }
    let file_len = stat.len();
    let mut file = BufReader::with_capacity(1 << 20, file);

    if file_len < LEN_BYTES as u64 {
        return Err(bad(format!("it is {file_len} bytes long, too short to hold even the 8-byte header length; was it written completely?")));
    }
    let mut len_field = [0u8; LEN_BYTES];
    file.read_exact(&mut len_field).map_err(io("read the header length"))?;
    let header_len = u64::from_le_bytes(len_field);
    let after_len = file_len - LEN_BYTES as u64;
    if header_len > after_len {
        return Err(bad(format!(
            "its first 8 bytes give a header length of {header_len} bytes, but only {after_len} bytes follow them; \
             is it a safetensors file, and was it written completely?"
        )));
    }
    // Both fit in usize now: header_len <= the file's length, and MAX_HEADER bounds it again.
    if header_len > MAX_HEADER as u64 {
        return Err(bad(format!("its header is {header_len} bytes, over the safetensors limit of {MAX_HEADER} bytes")));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header).map_err(io("read the header"))?;
    let header = std::str::from_utf8(&header).map_err(|e| bad(format!("its header is not UTF-8 text ({e}); is it a safetensors file?")))?;
    // The safetensors library's own checks: JSON shape, dtype names, offsets that tile the data
    // section without gaps or overlaps, and byte counts that agree with shape and dtype.
    let meta: Metadata = serde_json::from_str(header).map_err(|e| {
        let which = bad_entry(header).map(|w| format!("; {w}")).unwrap_or_default();
        bad(format!("its header is not a valid safetensors header: {e}{which}"))
    })?;

    let data_len = meta.data_len() as u64;
    let after_header = after_len - header_len;
    if data_len > after_header {
        return Err(bad(format!(
            "it is truncated: the header describes {data_len} bytes of tensor data but only {after_header} follow it; \
             was it written completely?"
        )));
    }
    if data_len < after_header {
        return Err(bad(format!("{} bytes follow the last tensor's data, which the format does not allow; the file is corrupt", after_header - data_len)));
    }

    // Refuse an unsupported dtype before reading gigabytes of the tensors ahead of it.
    let names = meta.offset_keys();
    let mut infos = Vec::with_capacity(names.len());
    for name in names {
        let info = meta.info(&name).ok_or_else(|| bad(format!("the header lists `{name}` without its entry")))?;
        if loaded_dtype(info.dtype).is_none() {
            return Err(unsupported(path, &name, info.dtype));
        }
        // safetensors multiplies the dims left to right and stops caring at a 0, so an empty
        // tensor's later dims may still overflow every stride; refuse it by name here.
        liandan_tensor::layout::check_shape("load", &info.shape).map_err(|e| bad(format!("tensor `{name}`: {e}")))?;
        infos.push((name, info));
    }

    let mut tensors = Vec::with_capacity(infos.len());
    for (name, info) in infos {
        let (start, end) = info.data_offsets;
        let mut bytes = vec![0u8; end - start];
        file.read_exact(&mut bytes).map_err(io("read tensor data (was the file changed while it was read?)"))?;
        let t = decode(&bytes, info.dtype, &info.shape, device).ok_or_else(|| unsupported(path, &name, info.dtype))?;
        let t = t.map_err(|source| Error::TensorIn { context: format!("{}: tensor `{name}`", path.display()), source: Box::new(source) })?;
        tensors.push((name, t));
    }
    Ok((tensors, meta.metadata().clone().unwrap_or_default()))
}

/// Which entry of a header that safetensors refused is wrong, and how: its own errors
/// ("invalid shape, data type, or offset for tensor") do not say which tensor they mean.
fn bad_entry(header: &str) -> Option<String> {
    let entries: HashMap<String, serde_json::Value> = serde_json::from_str(header).ok()?;
    let mut infos: Vec<(String, TensorInfo)> =
        entries.into_iter().filter(|(name, _)| name != "__metadata__").filter_map(|(name, v)| Some((name, serde_json::from_value(v).ok()?))).collect();
    infos.sort_by_key(|(_, info)| info.data_offsets);
    infos.into_iter().find_map(|(name, info)| {
        let (start, end) = info.data_offsets;
        let shape = &info.shape;
        // Left to right in usize, as safetensors counts, so an overflow it met is found here.
        let bits = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).and_then(|n| n.checked_mul(info.dtype.bitsize()));
        match bits {
            None => Some(format!("tensor `{name}`: shape {shape:?} of {:?} holds more bytes than any file can", info.dtype)),
            Some(_) if end < start => Some(format!("tensor `{name}`: its data_offsets [{start}, {end}] end before they start")),
            Some(bits) if bits != 8 * (end - start) => Some(format!(
                "tensor `{name}`: shape {shape:?} of {:?} needs {} bytes, but its data_offsets [{start}, {end}] give {}",
                info.dtype,
                bits.div_ceil(8),
                end - start
            )),
            Some(_) => None,
        }
    })
}

fn unsupported(path: &Path, name: &str, dtype: Dtype) -> Error {
    Error::UnsupportedDType { path: path.to_path_buf(), name: name.to_string(), dtype: dtype.to_string() }
}

/// The liandan dtype a file dtype loads as, if any.
fn loaded_dtype(dtype: Dtype) -> Option<DType> {
    Some(match dtype {
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F64 => DType::F64,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        // Every value of these fits an i64 exactly.
        Dtype::I64 | Dtype::I32 | Dtype::I16 | Dtype::I8 | Dtype::U32 | Dtype::U16 => DType::I64,
        // U64 may not fit an i64; FP8/FP6/FP4 and complex have no liandan dtype.
        _ => return None,
    })
}

/// Little-endian `bytes` of file dtype `dtype` as a tensor on `device`; `None` for a dtype
/// [`loaded_dtype`] refuses. The header check has already tied `bytes.len()` to `shape`.
fn decode(bytes: &[u8], dtype: Dtype, shape: &[usize], device: &Device) -> Option<liandan_tensor::Result<Tensor>> {
    fn le<T: Element, const N: usize>(bytes: &[u8], shape: &[usize], device: &Device, from_le: impl Fn([u8; N]) -> T) -> liandan_tensor::Result<Tensor> {
        let values: Vec<T> = bytes
            .chunks_exact(N)
            .map(|c| {
                let mut a = [0u8; N];
                a.copy_from_slice(c);
                from_le(a)
            })
            .collect();
        Tensor::from_vec(values, shape, device)
    }
    Some(match dtype {
        Dtype::F32 => le(bytes, shape, device, f32::from_le_bytes),
        Dtype::F16 => le(bytes, shape, device, |b| f16::from_bits(u16::from_le_bytes(b))),
        Dtype::BF16 => le(bytes, shape, device, |b| bf16::from_bits(u16::from_le_bytes(b))),
        Dtype::F64 => le(bytes, shape, device, f64::from_le_bytes),
        Dtype::I64 => le(bytes, shape, device, i64::from_le_bytes),
        Dtype::I32 => le(bytes, shape, device, |b| i32::from_le_bytes(b) as i64),
        Dtype::U32 => le(bytes, shape, device, |b| u32::from_le_bytes(b) as i64),
        Dtype::I16 => le(bytes, shape, device, |b| i16::from_le_bytes(b) as i64),
        Dtype::U16 => le(bytes, shape, device, |b| u16::from_le_bytes(b) as i64),
        Dtype::I8 => le(bytes, shape, device, |b: [u8; 1]| b[0] as i8 as i64),
        Dtype::U8 => Tensor::from_slice(bytes, shape, device),
        // liandan's Bool holds 0 or 1; PyTorch reads any non-zero byte as true.
        Dtype::BOOL => le(bytes, shape, device, |b: [u8; 1]| Bool8((b[0] != 0) as u8)),
        _ => return None,
    })
}
