//! Cooperative matrices (tensor cores) through wgpu's `EXPERIMENTAL_COOPERATIVE_MATRIX`: whether
//! this adapter's f16 matmul runs on them, decided once, here, when the device is opened. The
//! forward and input gradient of f16 convolutions (`conv.rs`) follow the same decision.
//!
//! The f16 matmul kernel (`shaders/matmul_coop.wgsl`) needs 16 x 16 x 16 f16 x f16 -> f32
//! configurations (what NVIDIA GPUs report through Vulkan; Metal's simdgroup matrices are 8 x 8,
//! so no Metal adapter has them), subgroups exactly 32 wide (its four subgroups of a workgroup
//! are told apart by invocation index), native f16 and room for its workgroup memory.
//! `LIANDAN_COOP_MATRIX=0` (`WgpuOptions::coop_matrix`) opens the device without the feature
//! and keeps every f16 matmul on the ordinary kernels, so a wrong result can be bisected to
//! this path. How the kernel is built (`plan::Variant`) is decided here too, per device.

use crate::plan::{tensor_cores, TensorCores, Variant};
use crate::repr::Repr;

/// Why f16 matmuls do or do not run on cooperative matrices here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// On tensor cores, built as this variant.
    InUse(Variant),
    SwitchedOff,
    Lacks(&'static str),
}

impl Status {
    /// What `liandan info` prints for it.
    pub(crate) fn describe(self) -> String {
        match self {
            Status::InUse(v) => {
                // Large products leave the default `Tall` for `Prefetch` (`Variant::for_product`).
                let large = if v == Variant::Tall { format!(" (prefetch where M, K and N are all {} or more)", crate::plan::LARGE) } else { String::new() };
                let from = crate::plan::COOP_MIN_FLOPS.trailing_zeros();
                format!("tensor cores from 2^{from} operations (cooperative matrices, variant {}{large}; LIANDAN_COOP_MATRIX=0 turns them off)", v.name())
            }
            Status::SwitchedOff => "ordinary kernels (LIANDAN_COOP_MATRIX=0)".into(),
            Status::Lacks(what) => format!("ordinary kernels (no tensor cores: {what})"),
        }
    }
}

/// Whether the adapter offers the configuration the kernel is written for.
fn has_f16_config(adapter: &wgpu::Adapter) -> bool {
    use wgpu::CooperativeScalarType::{F16, F32};
    adapter.cooperative_matrix_properties().iter().any(|p| (p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type) == (16, 16, 16, F16, F32))
}

/// Whether f16 matmuls on a device opened from `adapter` with `limits` use cooperative matrices
/// (the decision `Gpu::open` asks for the feature by); `on`: the options allow them.
pub(crate) fn status(adapter: &wgpu::Adapter, limits: &wgpu::Limits, on: bool) -> Status {
    let info = adapter.get_info();
    let matrices = adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
    let offers = TensorCores {
        matrices,
        f16_16x16: matrices && has_f16_config(adapter),
        shader_f16: Repr::new(adapter.features()).f16,
        subgroups: (info.subgroup_min_size, info.subgroup_max_size),
    };
    match tensor_cores(offers, limits) {
        Err(why) => Status::Lacks(why),
        Ok(_) if !on => Status::SwitchedOff,
        Ok(v) => Status::InUse(v),
    }
}

/// The adapter's cooperative-matrix configurations, `MxNxK ab->cr` each, for `liandan info`.
pub(crate) fn configurations(adapter: &wgpu::Adapter) -> String {
    if !adapter.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
        return "none".into();
    }
    let name = |t: wgpu::CooperativeScalarType| format!("{t:?}").to_lowercase();
    let all: Vec<String> = adapter
        .cooperative_matrix_properties()
        .iter()
        .map(|p| format!("{}x{}x{} {}->{}", p.m_size, p.n_size, p.k_size, name(p.ab_type), name(p.cr_type)))
        .collect();
    if all.is_empty() {
        "none".into()
    } else {
        all.join(", ")
    }
}
