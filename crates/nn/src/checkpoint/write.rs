//! Writing checkpoints: [`save`], atomically.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use half::{bf16, f16};
use liandan_tensor::{Bool8, DType, Tensor};
use safetensors::tensor::{Metadata, TensorInfo};

use super::{file_dtype, LEN_BYTES, MAX_HEADER};
use crate::error::{Error, Result};

/// Writes `tensors` to `path` as a safetensors file, with the optional string `metadata`
/// (PyTorch's `save_file(..., metadata=...)`, stored under `__metadata__`).
///
/// Tensors may live on any device and be any view (transposed, narrowed, broadcast): each is
/// read back to the host in row-major order, one at a time, as it is written. Names are kept
/// exactly as given and must be unique.
///
/// The write is atomic: the bytes go to a temporary file in the target's directory, which is
/// fsynced and then renamed over `path`; the directory is fsynced last (on unix). On any error
/// `path` is left as it was and the temporary file is removed. If only that last directory
/// sync fails, the new file is in place but might not survive a power cut; the error says so.
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)], metadata: Option<HashMap<String, String>>) -> Result<()> {
    let path = path.as_ref();
    let invalid = |detail: String| Error::InvalidSave { path: path.to_path_buf(), detail };

    let mut seen = HashSet::new();
    for (name, _) in tensors {
        if name == "__metadata__" {
            return Err(invalid("`__metadata__` is reserved by the safetensors format for the metadata map; rename the tensor".into()));
        }
        if !seen.insert(name.as_str()) {
            return Err(invalid(format!("the name `{name}` is given to two tensors; each tensor needs its own name")));
        }
    }
    if path.is_dir() {
        return Err(invalid("the path is a directory; give a file name such as `model.safetensors`".into()));
    }

    // The order the safetensors library writes: largest element size first, then by name. Every
    // tensor then starts at a multiple of its element size, and the same tensors give the same
    // bytes as `safetensors.torch.save_file`.
    let mut order: Vec<&(String, Tensor)> = tensors.iter().collect();
    order.sort_by(|(a, ta), (b, tb)| file_dtype(tb.dtype()).cmp(&file_dtype(ta.dtype())).then(a.cmp(b)));

    let mut infos = Vec::with_capacity(order.len());
    let mut offset = 0usize;
    for (name, t) in &order {
        let end = t
            .numel()
            .checked_mul(t.dtype().size_in_bytes())
            .and_then(|n| offset.checked_add(n))
            .ok_or_else(|| invalid(format!("tensor `{name}` takes the total size past what this machine can address")))?;
        infos.push((name.clone(), TensorInfo { dtype: file_dtype(t.dtype()), shape: t.shape().to_vec(), data_offsets: (offset, end) }));
        offset = end;
    }
    let header = Metadata::new(metadata, infos).map_err(|e| invalid(format!("the header does not validate: {e}")))?;
    let mut header = serde_json::to_vec(&header).map_err(|e| invalid(format!("the header cannot be written as JSON: {e}")))?;
    // Spaces up to a multiple of 8, as the safetensors library pads, so the data section is
    // 8-byte aligned in the file (and in a memory map of it).
    header.resize(header.len().next_multiple_of(LEN_BYTES), b' ');
    if header.len() > MAX_HEADER {
        return Err(invalid(format!(
            "the header would be {} bytes, over the safetensors limit of {MAX_HEADER}; use fewer or shorter names, or less metadata",
            header.len()
        )));
    }

    let io = |action: &'static str| move |source: io::Error| Error::Io { path: path.to_path_buf(), action, source };
    let (mut temp, file) = TempFile::create(path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(&(header.len() as u64).to_le_bytes()).map_err(io("write"))?;
    out.write_all(&header).map_err(io("write"))?;
    for (name, t) in &order {
        let bytes = host_bytes(t).map_err(|source| Error::TensorIn { context: format!("{}: tensor `{name}`", path.display()), source: Box::new(source) })?;
        let want = t.numel() * t.dtype().size_in_bytes();
        if bytes.len() != want {
            // A backend handing back the wrong number of bytes would corrupt the file silently.
            return Err(invalid(format!("tensor `{name}` read back {} bytes from its device where {want} were expected", bytes.len())));
        }
        out.write_all(&bytes).map_err(io("write"))?;
    }
    let file = out.into_inner().map_err(|e| io("write")(e.into_error()))?;
    file.sync_all().map_err(io("sync the temporary file to disk"))?;
    drop(file); // closed before the rename, which some platforms require
    fs::rename(&temp.path, path).map_err(io("rename the temporary file over it"))?;
    temp.keep = true;
    sync_dir(temp.dir()).map_err(io("sync its directory after the rename (the new file is in place but may not survive a power cut)"))
}

/// Writes `bytes` to `path` as [`save`] writes a checkpoint: a temporary file next to it,
/// fsynced, renamed over `path`, the directory fsynced; on any error `path` is left as it was.
#[cfg_attr(not(feature = "onnx"), allow(dead_code))]
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.is_dir() {
        return Err(Error::InvalidSave { path: path.to_path_buf(), detail: "the path is a directory; give a file name".into() });
    }
    let io = |action: &'static str| move |source: io::Error| Error::Io { path: path.to_path_buf(), action, source };
    let (mut temp, mut file) = TempFile::create(path)?;
    file.write_all(bytes).map_err(io("write"))?;
    file.sync_all().map_err(io("sync the temporary file to disk"))?;
    drop(file);
    fs::rename(&temp.path, path).map_err(io("rename the temporary file over it"))?;
    temp.keep = true;
    sync_dir(temp.dir()).map_err(io("sync its directory after the rename (the new file is in place but may not survive a power cut)"))
}

/// The elements of `t` as little-endian bytes in row-major order.
pub(crate) fn host_bytes(t: &Tensor) -> liandan_tensor::Result<Vec<u8>> {
    fn le<T, const N: usize>(values: Vec<T>, to_le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * N);
        for v in values {
            out.extend_from_slice(&to_le(v));
        }
        out
    }
    Ok(match t.dtype() {
        DType::F32 => le(t.to_vec::<f32>()?, f32::to_le_bytes),
        DType::F16 => le(t.to_vec::<f16>()?, |x| x.to_bits().to_le_bytes()),
        DType::BF16 => le(t.to_vec::<bf16>()?, |x| x.to_bits().to_le_bytes()),
        DType::F64 => le(t.to_vec::<f64>()?, f64::to_le_bytes),
        DType::I64 => le(t.to_vec::<i64>()?, i64::to_le_bytes),
        DType::U8 => t.to_vec::<u8>()?,
        // PyTorch reads any non-zero byte as true but writes 1; so do we.
        DType::Bool => t.to_vec::<Bool8>()?.into_iter().map(|b| (b.0 != 0) as u8).collect(),
    })
}

/// A temporary file next to the target, removed on drop unless `keep` is set.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl TempFile {
    fn create(target: &Path) -> Result<(TempFile, File)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        target.file_name().ok_or_else(|| Error::InvalidSave {
            path: target.to_path_buf(),
            detail: "the path does not end in a file name; give one such as `model.safetensors`".into(),
        })?;
        // Hidden, unique per process and call (so concurrent saves never share one), and short:
        // a name built from the target's would pass the 255-byte limit for a legal long name.
        let path = parent_dir(target).join(format!(".tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
        let file = OpenOptions::new().write(true).create_new(true).open(&path).map_err(|source| Error::Io {
            path: target.to_path_buf(),
            action: "create a temporary file in its directory (does the directory exist, and may we write there?)",
            source,
        })?;
        Ok((TempFile { path, keep: false }, file))
    }

    fn dir(&self) -> &Path {
        parent_dir(&self.path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Makes a rename in `dir` durable. Only unix can fsync a directory; file systems that cannot
/// (some network ones) say "invalid input", which is not a failure of ours.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e) if matches!(e.kind(), io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported) => {}
        other => return other,
    }
    let _ = dir;
    Ok(())
}
