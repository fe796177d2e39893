//! Running a kernel on the CPU for a device that cannot: one generic host fallback through the
//! device registry, so a GPU backend depends on no particular CPU backend.

use crate::backend::{Backend, Storage, Strided};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;

/// One input of a fallback, already on the host: contiguous native-endian bytes of `shape`.
pub struct HostTensor<'a> {
    pub bytes: Vec<u8>,
    pub shape: &'a [usize],
    pub dtype: DType,
}

/// Runs `f` with the registry's CPU backend over `inputs`, and returns its results as host
/// bytes, one per entry of `outputs` (their dtypes). `what` names the op for the error raised
/// when no CPU backend is linked into the program.
pub fn on_cpu(
    what: &str,
    inputs: Vec<HostTensor>,
    outputs: &[DType],
    f: impl FnOnce(&dyn Backend, &[Strided]) -> Result<Vec<Storage>>,
) -> Result<Vec<Vec<u8>>> {
    // Not `Device::cpu()`, which panics: a missing CPU backend here is reported, not fatal.
    let Some(cpu) = Device::all().into_iter().find(Device::is_cpu) else {
        return Err(Error::Device(format!(
            "{what} must run on the CPU, but no CPU backend is linked: add liandan-backend-cpu to your dependencies and write `use liandan_backend_cpu as _;`"
        )));
    };
    let backend = cpu.backend();
    let mut held = Vec::with_capacity(inputs.len());
    for input in inputs {
        held.push((backend.from_host(&input.bytes, input.dtype)?, Layout::contiguous(input.shape), input.dtype));
    }
    let views: Vec<Strided> = held.iter().map(|(storage, layout, dtype)| Strided { storage: &**storage, layout, dtype: *dtype }).collect();
    let results = f(backend, &views)?;
    results
        .iter()
        .zip(outputs)
        .map(|(r, &dtype)| {
            let numel = r.size_in_bytes() / dtype.size_in_bytes();
            backend.to_host(Strided { storage: &**r, layout: &Layout::contiguous(&[numel]), dtype })
        })
        .collect()
}
