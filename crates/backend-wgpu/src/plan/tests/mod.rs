//! The plan of every matrix product and convolution pass of the zoo (`crates/nn/src/zoo`, at
//! its reference batch sizes, f32 and f16, the convolutions bf16 too), on three adapters: each
//! row names a layer, its shapes, and the route it takes on each. A change of route shows here
//! as a changed row.

use liandan_tensor::ConvGeometry;

use super::{tensor_cores, Caps, Options, TensorCores, Variant};
use crate::WgpuOptions;

mod conv;
mod matmul;

/// The adapters of the tables' columns.
const PROFILES: [&str; 3] = ["h200", "lavapipe", "metal"];

/// The capabilities of a device opened on an adapter that offers `offers`, `f64` and `limits`,
/// its tensor cores allowed (as `coop.rs` and `Gpu::open` decide).
fn opened(offers: TensorCores, f64: bool, limits: wgpu::Limits) -> Caps {
    let coop = tensor_cores(offers, &limits).ok();
    Caps { coop, f16: offers.shader_f16, f64, max_binding: limits.max_storage_buffer_binding_size }
}

/// An H200 through Vulkan: 16 x 16 x 16 f16 cooperative matrices, subgroups of 32, the
/// workgroups Vulkan reports there (48 KiB of workgroup memory, 1,024 invocations), and
/// bindings up to 2 GiB (wgpu's cap under Vulkan).
fn h200() -> Caps {
    let offers = TensorCores { matrices: true, f16_16x16: true, shader_f16: true, subgroups: (32, 32) };
    let limits = wgpu::Limits {
        max_compute_workgroup_storage_size: 48 << 10,
        max_compute_invocations_per_workgroup: 1024,
        max_storage_buffer_binding_size: (1 << 31) - 1,
        ..wgpu::Limits::default()
    };
    opened(offers, true, limits)
}

/// Lavapipe (Mesa's software Vulkan, 256-bit vectors): no cooperative matrices, subgroups of
/// 8, f16 and f64, bindings of 128 MiB.
fn lavapipe() -> Caps {
    let offers = TensorCores { matrices: false, f16_16x16: false, shader_f16: true, subgroups: (8, 8) };
    let limits = wgpu::Limits { max_compute_workgroup_storage_size: 32 << 10, max_storage_buffer_binding_size: 128 << 20, ..wgpu::Limits::default() };
    opened(offers, true, limits)
}

/// An Apple GPU through Metal: cooperative (simdgroup) matrices of 8 x 8 only, subgroups of
/// 32, f16 but no f64, 32 KiB of workgroup memory, bindings as large as a buffer (4 GiB here).
fn metal() -> Caps {
    let offers = TensorCores { matrices: true, f16_16x16: false, shader_f16: true, subgroups: (32, 32) };
    let limits = wgpu::Limits { max_compute_workgroup_storage_size: 32 << 10, max_storage_buffer_binding_size: 1 << 32, ..wgpu::Limits::default() };
    opened(offers, false, limits)
}

fn profiles() -> [Caps; 3] {
    [h200(), lavapipe(), metal()]
}

/// The options a program runs with by default (no autotune, exact f32 convolutions).
fn defaults() -> Options {
    WgpuOptions::default().plan()
}

/// A square convolution of one group and no dilation: `n` images of `c` channels, `hw` x `hw`,
/// into `o` channels by a `k` x `k` kernel of stride `s` and padding `p`.
const fn geom(n: usize, c: usize, hw: usize, o: usize, k: usize, s: usize, p: usize) -> ConvGeometry {
    ConvGeometry { n, c, h: hw, w: hw, o, kernel: (k, k), stride: (s, s), padding: (p, p), dilation: (1, 1), groups: 1 }
}

#[test]
fn only_the_h200_runs_f16_on_tensor_cores() {
    assert_eq!(profiles().map(|c| c.coop), [Some(Variant::Tall), None, None]);
    assert!(!metal().computes(liandan_tensor::DType::F64), "f64 goes to the CPU on Metal");
}

/// The rows whose route differs from the table, each as `name on profile: got, want`.
fn mismatches<'a>(rows: impl Iterator<Item = (String, [&'a str; 3], [String; 3])>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, want, got) in rows {
        for ((profile, want), got) in PROFILES.iter().zip(want).zip(got) {
            if want != got {
                out.push(format!("{name} on {profile}: got {got:?}, want {want:?}"));
            }
        }
    }
    out
}
