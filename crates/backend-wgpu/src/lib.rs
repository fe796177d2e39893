//! `liandan-backend-wgpu`: the kernel trait as WGSL compute shaders run by `wgpu`, so one
//! model trains on Metal, Vulkan and DX12 alike.
//!
//! Linking this crate (and naming it once: `use liandan_backend_wgpu as _;`) registers every
//! adapter wgpu finds with `liandan_tensor::Device`; `Device::best()` then prefers a discrete
//! GPU, then an integrated one. Software adapters (lavapipe) are listed but used only when asked
//! for (`LIANDAN_DEVICE=gpu`).
//!
//! Design: dispatches are batched into one command encoder and submitted when the host needs
//! data; buffers come from a caching allocator ([`liandan_tensor::Device::memory_stats`]);
//! pipelines are compiled once per shader variant; ops a device cannot run go to the device
//! registry's CPU backend (link one, e.g. `liandan-backend-cpu`) with a one-time warning
//! ([`liandan_tensor::Device::fallback_report`]).

mod backend;
mod elementwise;
mod fused;
mod fused_optim;
mod fused_pointwise;
mod gpu;
mod index;
mod info;
mod kernels;
mod launch;
mod matmul;
mod pool;
mod reduce;
mod repr;
mod storage;
mod window;

use std::sync::Arc;

pub use backend::WgpuBackend;
pub use gpu::UPLOAD_LIMIT;
pub use info::{adapters, AdapterSummary};
pub use storage::WgpuStorage;

/// The shader sources, for validation tests (naga, MSL translation).
pub mod shaders {
    use crate::repr::Repr;

    /// Every shader template with a representative instantiation per dtype and op, for the
    /// naga validation and MSL translation test: `(name, WGSL source)`. `f16`/`f64` say which
    /// native types to assume (Metal: f16 yes, f64 no).
    pub fn all_sources(f16: bool, f64: bool) -> Vec<(String, String)> {
        let repr = Repr { f16, f64 };
        let mut all = crate::elementwise::sources(&repr);
        all.extend(crate::reduce::sources(&repr));
        all.extend(crate::matmul::sources(&repr));
        all.extend(crate::window::sources(&repr));
        all.extend(crate::index::sources(&repr));
        all.extend(crate::fused::sources(&repr));
        all.extend(crate::fused_optim::sources(&repr));
        all.extend(crate::fused_pointwise::sources(&repr));
        all
    }
}

fn devices() -> Vec<Arc<dyn liandan_tensor::Backend>> {
    info::enumerate().into_iter().map(|a| Arc::new(WgpuBackend::new(a)) as Arc<dyn liandan_tensor::Backend>).collect()
}

liandan_tensor::inventory::submit! {
    liandan_tensor::BackendProvider { name: "wgpu", devices }
}
