//! The plan of every matrix product and convolution pass of the zoo (`crates/nn/src/zoo`, at
//! its reference batch sizes, f32 and f16), on three adapters: each row names a layer, its
//! shapes, and the route it takes on each. A change of route shows here as a changed row.

use liandan_tensor::ConvGeometry;

use super::{Caps, Variant};
use crate::WgpuOptions;

mod conv;
mod matmul;

/// The adapters of the tables' columns.
const PROFILES: [&str; 3] = ["h200", "lavapipe", "metal"];

/// An H200 through Vulkan: 16 x 16 x 16 f16 cooperative matrices, subgroups of 32, and the
/// workgroups Vulkan reports there (48 KiB of workgroup memory, 1,024 invocations: room for
/// `Tall`); bindings up to 2 GiB (wgpu's cap under Vulkan).
fn h200() -> Caps {
    let limits = wgpu::Limits { max_compute_workgroup_storage_size: 48 << 10, max_compute_invocations_per_workgroup: 1024, ..wgpu::Limits::default() };
    Caps { coop: Variant::for_limits(&limits).ok(), f16: true, f64: true, max_binding: (1 << 31) - 1 }
}

/// Lavapipe (Mesa's software Vulkan): no cooperative matrices, f16 and f64, bindings of 128 MiB.
fn lavapipe() -> Caps {
    Caps { coop: None, f16: true, f64: true, max_binding: 128 << 20 }
}

/// An Apple GPU through Metal: no 16 x 16 cooperative matrices (its simdgroup matrices are
/// 8 x 8), f16 but no f64, bindings as large as a buffer (4 GiB here).
fn metal() -> Caps {
    Caps { coop: None, f16: true, f64: false, max_binding: 1 << 32 }
}

fn profiles() -> [Caps; 3] {
    [h200(), lavapipe(), metal()]
}

/// The options a program runs with by default (no autotune, exact f32 convolutions).
fn defaults() -> WgpuOptions {
    WgpuOptions { autotune_dir: None, ..WgpuOptions::default() }
}

/// A square convolution of one group and no dilation: `n` images of `c` channels, `hw` x `hw`,
/// into `o` channels by a `k` x `k` kernel of stride `s` and padding `p`.
const fn geom(n: usize, c: usize, hw: usize, o: usize, k: usize, s: usize, p: usize) -> ConvGeometry {
    ConvGeometry { n, c, h: hw, w: hw, o, kernel: (k, k), stride: (s, s), padding: (p, p), dilation: (1, 1), groups: 1 }
}

#[test]
fn the_h200_profile_runs_f16_on_tall_tiles() {
    assert_eq!(h200().coop, Some(Variant::Tall));
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
