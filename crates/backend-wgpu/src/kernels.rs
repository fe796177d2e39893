//! Shader assembly and dispatch helpers shared by the kernel families. (The families use this
//! module; it names none of them: their sources are collected at the crate root.)

use liandan_tensor::{DType, Layout};

use crate::gpu::META_WORDS;
use crate::repr::Repr;

pub(crate) const COMMON: &str = include_str!("shaders/common.wgsl");

/// Most workgroups per grid dimension, and invocations per workgroup, of the 1-D kernels.
const MAX_GROUPS: usize = 65_535;
pub(crate) const WG: usize = 256;

/// A 2-D grid of 256-wide workgroups covering `n` invocations: as few rows as the
/// 65,535-per-dimension limit allows, and rows as even as possible, so at most `rows - 1`
/// workgroups find nothing to do.
pub(crate) fn grid(n: usize) -> (u32, u32, u32) {
    let groups = n.div_ceil(WG).max(1);
    let rows = groups.div_ceil(MAX_GROUPS);
    (groups.div_ceil(rows) as u32, rows as u32, 1)
}

/// Builds a shader: `enable`s, a prelude per `(name, dtype)`, the common block, then the
/// template with each `{{KEY}}` replaced.
pub(crate) fn source(repr: &Repr, template: &str, types: &[(&str, DType)], subs: &[(&str, &str)]) -> String {
    let dtypes: Vec<DType> = types.iter().map(|t| t.1).collect();
    let mut s = repr.enables(&dtypes);
    for (name, dtype) in types {
        s += &repr.prelude(name, *dtype);
    }
    s += COMMON;
    let mut body = template.to_string();
    for (k, v) in subs {
        body = body.replace(&format!("{{{{{k}}}}}"), v);
    }
    s + &body
}

/// The meta block of a strided elementwise kernel: count, rank, shape, then strides and offset
/// per operand. `None` when a value exceeds 32 bits or the block would not fit a slot; the
/// caller then runs the op on the CPU.
pub(crate) fn strided_meta(shape: &[usize], layouts: &[&Layout]) -> Option<Vec<u32>> {
    let rank = shape.len();
    let numel: usize = shape.iter().product();
    let mut m = Vec::with_capacity(2 + rank + layouts.len() * (rank + 1));
    m.push(u32::try_from(numel).ok()?);
    m.push(rank as u32);
    for &d in shape {
        m.push(u32::try_from(d).ok()?);
    }
    for l in layouts {
        debug_assert_eq!(l.shape(), shape);
        for &s in l.strides() {
            m.push(u32::try_from(s).ok()?);
        }
        m.push(u32::try_from(l.offset()).ok()?);
        u32::try_from(l.max_extent()).ok()?;
    }
    (m.len() <= META_WORDS).then_some(m)
}

/// A contiguous layout of `shape`, as every kernel output has.
pub(crate) fn dense(shape: &[usize]) -> Layout {
    Layout::contiguous(shape)
}

#[cfg(test)]
mod tests {
    use super::{grid, MAX_GROUPS, WG};

    #[test]
    fn grids_cover_the_work_with_little_waste() {
        for n in [1usize, 255, 256, 257, 65_535 * 256, 65_536 * 256, 40_000_000, 1 << 31] {
            let (x, y, _) = grid(n);
            let groups = n.div_ceil(WG);
            assert!(x as usize <= MAX_GROUPS && y as usize <= MAX_GROUPS, "{n}: {x}x{y}");
            assert!((x * y) as usize >= groups && (x * y) as usize - groups < y as usize, "{n}: {x}x{y} for {groups}");
        }
    }
}
