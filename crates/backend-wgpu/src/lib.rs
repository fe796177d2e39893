//! `liandan-backend-wgpu`: the kernel trait as WGSL compute shaders run by `wgpu`, so one
//! model trains on Metal, Vulkan and DX12 alike.
//!
//! Linking this crate (and naming it once: `use liandan_backend_wgpu as _;`) registers every
//! adapter wgpu finds with `liandan_tensor::Device`; `Device::best()` then prefers a discrete
//! GPU, then an integrated one. Software adapters (lavapipe) are listed but used only when asked
//! for (`LIANDAN_DEVICE=gpu`).
//!
//! ```
//! use liandan_backend_wgpu::{WgpuBackend, WgpuOptions};
//! use liandan_tensor::{DType, Device, Tensor};
//! # use liandan_backend_cpu as _;
//! if let Some(gpu) = Device::gpus().into_iter().next() {
//!     // Options are the environment's (docs/SETTINGS.md) until a program sets others.
//!     let backend = WgpuBackend::of(&gpu).expect("a wgpu device");
//!     backend.set_options(WgpuOptions { conv_tf32: true, ..backend.options() })?;
//!     let x = Tensor::ones(&[2, 3], DType::F32, &gpu)?;
//!     assert_eq!(x.matmul(&x.t()?)?.to_vec_f64()?, [3.0; 4]);
//! }
//! # Ok::<(), liandan_tensor::Error>(())
//! ```
//!
//! Design: dispatches are batched into command encoders, submitted in batches that start small
//! after each wait and double (`gpu.rs`); bind groups are cached per buffer set (`bind.rs`);
//! buffers come from a caching allocator ([`liandan_tensor::Device::memory_stats`]); pipelines
//! are compiled once per shader variant; ops a device cannot run go to the device registry's CPU
//! backend (link one, e.g. `liandan-backend-cpu`) with a one-time warning
//! ([`liandan_tensor::Device::fallback_report`]).
//!
//! A custom op's kernel written in another crate builds, caches and dispatches its WGSL through
//! [`WgpuBackend::pipeline`] and [`WgpuBackend::dispatch`], its parameters a block declared with
//! [`shader_params!`] (`custom.rs`, `params.rs`).

mod backend;
mod bind;
mod conv;
mod coop;
mod custom;
mod elementwise;
mod fused;
mod fused_attention;
mod fused_cast;
mod fused_layer_norm;
mod fused_log_softmax;
mod fused_norm;
mod fused_pointwise;
mod gpu;
mod index;
mod info;
mod kernel_trait;
mod kernels;
mod launch;
mod lstm_step;
mod matmul;
mod options;
mod packed;
pub mod params;
mod plan;
mod pool;
mod reduce;
mod repr;
mod storage;
mod submit;
#[doc(hidden)]
pub mod testing;
mod timing;
mod tune;
mod window;

use std::sync::Arc;

pub use backend::{with_options, WgpuBackend};
pub use custom::{grid, Pipeline, Shader, WORKGROUP};
pub use info::{adapters, AdapterSummary};
pub use options::{WgpuOptions, SETTINGS};
pub use params::ShaderParams;
pub use storage::WgpuStorage;

/// The shader sources, for validation tests (naga, MSL translation).
pub mod shaders {
    use crate::custom::Shader;
    use crate::kernels::Wgsl;
    use crate::repr::Repr;

    /// Every kernel variant a device holding f16 / f64 natively (as `f16`, `f64` say) can
    /// build, from the typed keys that also key the pipeline cache: `(variant, WGSL source)`;
    /// with `immediates`, as a device that takes the meta block as immediate data builds them
    /// (`var<immediate>`), else with the meta block in a storage buffer at binding 0.
    /// (Metal: f16 yes, f64 no, immediates yes.)
    pub fn all_sources(f16: bool, f64: bool, immediates: bool) -> Vec<(String, String)> {
        let repr = Repr { f16, f64, immediates };
        crate::Key::all(&repr).into_iter().map(|k| (format!("{k:?}"), k.source(&repr))).collect()
    }

    /// The WGSL a custom kernel's `source` writes (`WgpuBackend::pipeline`) for a device as
    /// [`all_sources`] describes one: how a crate with custom kernels lists every variant for
    /// its tests, without a device.
    pub fn custom_source(f16: bool, f64: bool, immediates: bool, source: impl FnOnce(Shader) -> String) -> String {
        let repr = Repr { f16, f64, immediates };
        source(Shader(Wgsl::new(&repr)))
    }

    /// Validates `src` with naga (with the capabilities its `enable`s and its parameter block
    /// ask for) and translates it to SPIR-V, as wgpu's Vulkan backend takes it, and with `msl`
    /// to Metal Shading Language: the checks this crate's tests run on its own kernels, for a
    /// crate's tests of its custom kernels. An error names `name` and what failed.
    #[cfg(feature = "shader-check")]
    pub fn check(name: &str, src: &str, msl: bool) -> Result<(), String> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(src).map_err(|e| format!("{name}: WGSL parse error:\n{}", e.emit_to_string(src)))?;
        let caps = Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64 | Capabilities::IMMEDIATES | Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        let info = Validator::new(ValidationFlags::all(), caps).validate(&module).map_err(|e| format!("{name}: naga validation failed: {e:?}"))?;
        let options = naga::back::spv::Options { lang_version: (1, 6), ..Default::default() };
        naga::back::spv::write_vec(&module, &info, &options, None).map_err(|e| format!("{name}: SPIR-V translation failed: {e:?}"))?;
        if msl {
            let options = naga::back::msl::Options { lang_version: (2, 4), ..Default::default() };
            let (out, _) = naga::back::msl::write_string(&module, &info, &options, &naga::back::msl::PipelineOptions::default())
                .map_err(|e| format!("{name}: MSL translation failed: {e:?}"))?;
            if !out.contains("kernel void") {
                return Err(format!("{name}: no compute entry point in the MSL output"));
            }
        }
        Ok(())
    }
}

/// Declares the crate's kernel key: one variant per kernel family, wrapping that family's own
/// key type (which implements `kernels::KernelKey`). A family added here is built, cached and
/// validated like every other; a kernel cannot be compiled without a key, so none escapes the
/// shader tests.
macro_rules! kernel_families {
    ($($family:ident($key:ty)),* $(,)?) => {
        /// Any kernel variant this backend builds (see `kernels::KernelKey`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Key {
            $($family($key)),*
        }

        impl Key {
            pub(crate) fn source(&self, repr: &repr::Repr) -> String {
                match self {
                    $(Key::$family(k) => kernels::KernelKey::source(k, repr)),*
                }
            }

            pub(crate) fn all(repr: &repr::Repr) -> Vec<Key> {
                let mut all = Vec::new();
                $(all.extend(<$key as kernels::KernelKey>::all(repr).into_iter().map(Key::$family));)*
                all
            }
        }

        $(impl From<$key> for Key {
            fn from(k: $key) -> Key {
                Key::$family(k)
            }
        })*
    };
}

impl Key {
    /// Whether the shader keeps naga's run-time checks. The matrix products and convolutions go
    /// without them: their indices are bounded by explicit comparisons with the sizes in their
    /// params and by constant tile sizes, and the clamps naga adds to every access cost an H200
    /// 14% of a resnet18 training step and 60% of the tensor-core f16 matmul's time at 4096^3.
    /// Kernels that index by data (gathers, scatters) keep them.
    pub(crate) fn checked(&self) -> bool {
        !matches!(
            self,
            Key::Matmul(_)
                | Key::MatmulSmall(_)
                | Key::MatmulHeads(_)
                | Key::LstmStep(_)
                | Key::MatmulCoop(_)
                | Key::Conv(_)
                | Key::ConvCoop(_)
                | Key::FusedAttention(_)
        )
    }
}

kernel_families! {
    Elementwise(elementwise::Key),
    Reduce(reduce::Key),
    ReduceColumns(reduce::ColumnsKey),
    ReduceChannels(reduce::ChannelsKey),
    Matmul(matmul::Key),
    MatmulSmall(matmul::SmallKey),
    MatmulHeads(matmul::HeadsKey),
    MatmulSumPacked(matmul::SumPackedKey),
    MatmulSumBias(matmul::SumBiasKey),
    MatmulCoop(matmul::coop::Key),
    CoopAmax(matmul::coop::AmaxKey),
    Window(window::Key),
    Index(index::Key),
    Fused(fused::Key),
    LstmStep(lstm_step::Key),
    FusedPointwise(fused_pointwise::Key),
    FusedNorm(fused_norm::Key),
    FusedLayerNorm(fused_layer_norm::Key),
    FusedLogSoftmax(fused_log_softmax::Key),
    FusedNll(fused_log_softmax::NllKey),
    FusedAttention(fused_attention::Key),
    FusedCast(fused_cast::Key),
    Conv(conv::Key),
    ConvCoop(conv::CoopKey),
    ConvWinograd(conv::WinogradKey),
    Packed(packed::Key),
}

fn devices() -> Vec<Arc<dyn liandan_tensor::Backend>> {
    info::enumerate().into_iter().map(|a| Arc::new(WgpuBackend::new(a)) as Arc<dyn liandan_tensor::Backend>).collect()
}

liandan_tensor::inventory::submit! {
    liandan_tensor::BackendProvider { name: "wgpu", devices }
}
