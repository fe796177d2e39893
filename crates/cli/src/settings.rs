//! The settings of every crate this binary links (`docs/SETTINGS.md`): checked once at the start,
//! so that a bad value is a one-line error (exit status 2) whatever the command; listed by
//! `liandan info` where they differ from their defaults; and `--autotune` and `--conv-tf32` set
//! on the device a command runs on.

use liandan_nn::Device;
use liandan_tensor::settings::{env, Setting};

use crate::output::say;
use crate::Failure;

/// Every table of settings, the linked crates' (the wgpu backend's only where it is built in).
pub fn tables() -> Vec<&'static [Setting]> {
    let mut all = vec![liandan_tensor::settings::SETTINGS, liandan_backend_cpu::settings::SETTINGS];
    #[cfg(feature = "wgpu")]
    all.push(liandan_backend_wgpu::SETTINGS);
    all.push(liandan_train::settings::SETTINGS);
    all
}

/// Every setting's value in the environment, checked: the first bad one is the error.
pub fn check() -> Result<(), Failure> {
    for s in tables().into_iter().flatten() {
        s.value_in(&env).map_err(|e| Failure::usage(e.to_string()))?;
    }
    Ok(())
}

/// `NAME=value` of each setting the environment sets to other than its default.
pub fn changed() -> Vec<String> {
    let changed = tables().into_iter().flatten().filter_map(|s| s.changed_in(&env).ok().flatten().map(|v| format!("{}={v}", s.name)));
    changed.collect()
}

/// `--autotune` and `--conv-tf32`, when given, turn the wgpu backend's autotune and its f32
/// convolutions on the tensor cores on for `device` (where they are off, the environment's
/// settings decide). A CPU device, and a build without the wgpu backend, have neither.
pub fn gpu_switches(device: &Device, autotune: bool, conv_tf32: bool) -> Result<(), Failure> {
    #[cfg(feature = "wgpu")]
    if let Some(backend) = liandan_backend_wgpu::WgpuBackend::of(device) {
        let mut options = backend.options();
        options.autotune |= autotune;
        options.conv_tf32 |= conv_tf32;
        backend.set_options(options).map_err(|e| Failure::usage(e.to_string()))?;
    }
    #[cfg(not(feature = "wgpu"))]
    let _ = (device, autotune, conv_tf32);
    Ok(())
}

/// After a run with `--autotune` on `device`: how many shapes it measured, and where the cuts
/// are kept.
pub fn autotune_report(device: &Device) -> Result<(), Failure> {
    #[cfg(feature = "wgpu")]
    if let Some(backend) = liandan_backend_wgpu::WgpuBackend::of(device) {
        let options = backend.options();
        let measured = backend.autotune_measured();
        match options.autotune_dir {
            Some(dir) => say!("autotune: {measured} shape(s) measured this run; the cuts are kept in {}", dir.display())?,
            None => say!("autotune: {measured} shape(s) measured this run; no cache directory (set LIANDAN_CACHE_DIR to keep them)")?,
        }
    }
    #[cfg(not(feature = "wgpu"))]
    let _ = device;
    Ok(())
}
