//! Shader assembly and dispatch helpers shared by the kernel families. (The families use this
//! module; it names none of them: their sources are collected at the crate root.)

use liandan_tensor::{DType, Layout};

use crate::gpu::META_WORDS;
use crate::params::ShaderParams;
use crate::repr::Repr;

pub(crate) const COMMON: &str = include_str!("shaders/common.wgsl");
const IDS: &str = include_str!("shaders/ids.wgsl");

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

/// A kernel variant's typed key: one value per compiled pipeline. It builds its WGSL, keys the
/// pipeline cache (hashing a few small fields, no string per dispatch), and lists every variant
/// a device could build, which the naga validation and MSL translation tests walk.
pub(crate) trait KernelKey: Copy + Eq + std::hash::Hash + std::fmt::Debug {
    /// The WGSL of this variant on a device holding dtypes as `repr` says.
    fn source(&self, repr: &Repr) -> String;
    /// Every variant a device holding dtypes as `repr` says can build (debug builds check that
    /// each pipeline compiled at run time is among them).
    fn all(repr: &Repr) -> Vec<Self>;
}

/// A shader source, put together the one way every kernel is:
///
/// 1. `enable` directives for the dtypes it touches, and the extensions its key asks for;
/// 2. per operand type name `x`, `y`, ... the prelude of `repr.rs` (`S_x`, the storage type;
///    `C_x`, the compute type; `load_x` / `store_x`);
/// 3. the `const` declarations and type aliases its key chooses (`const H: u32 = 2u;`,
///    `alias W = f64;`): numbers, flags and type names are the only things Rust writes;
/// 4. the meta block's declaration: a named parameter struct where the key has one
///    ([`Wgsl::params`], `params.rs`: the kernel reads `p.numel`), else the word array
///    `params` (`Repr::params`) and `common.wgsl` (strided indexing over it); and `ids.wgsl`;
/// 5. its parts: `.wgsl` files under `src/shaders`, concatenated in order (helpers first, the
///    file with the entry point last). A part that varies by op (an op's body, a binding set)
///    is a file of its own, picked by the key; a choice among functions of one file is a
///    `const` that a `switch` or `if` in the file reads (the compiler folds it away).
pub(crate) struct Wgsl<'r> {
    repr: &'r Repr,
    extensions: Vec<&'static str>,
    types: Vec<(&'static str, DType)>,
    decls: String,
    /// The named parameter struct's declaration (`params.rs`), where the kernel has one.
    params: Option<String>,
    parts: Vec<&'static str>,
}

impl<'r> Wgsl<'r> {
    pub(crate) fn new(repr: &'r Repr) -> Self {
        Wgsl { repr, extensions: Vec::new(), types: Vec::new(), decls: String::new(), params: None, parts: Vec::new() }
    }

    /// `enable name;` beside the dtypes' (an extension the kernel's key chooses, such as
    /// `wgpu_cooperative_matrix`).
    pub(crate) fn enable(mut self, name: &'static str) -> Self {
        self.extensions.push(name);
        self
    }

    /// Elements named `name` are of `dtype` (the prelude of step 2).
    pub(crate) fn ty(mut self, name: &'static str, dtype: DType) -> Self {
        self.types.push((name, dtype));
        self
    }

    /// `const name: u32 = value;`
    pub(crate) fn uint(mut self, name: &str, value: u32) -> Self {
        self.decls += &format!("const {name}: u32 = {value}u;\n");
        self
    }

    /// `const name: bool = value;`
    pub(crate) fn flag(mut self, name: &str, value: bool) -> Self {
        self.decls += &format!("const {name}: bool = {value};\n");
        self
    }

    /// `alias name = wgsl_type;`
    pub(crate) fn alias(mut self, name: &str, wgsl_type: &str) -> Self {
        self.decls += &format!("alias {name} = {wgsl_type};\n");
        self
    }

    /// The kernel reads its parameters as `p`, the block `P` ([`ShaderParams`]), instead of
    /// the word array `params` (and `common.wgsl`'s indexing over it).
    pub(crate) fn params<P: ShaderParams>(mut self) -> Self {
        self.params = Some(P::wgsl_struct());
        self
    }

    /// Appends a `.wgsl` file.
    pub(crate) fn part(mut self, wgsl: &'static str) -> Self {
        self.parts.push(wgsl);
        self
    }

    pub(crate) fn build(self) -> String {
        let dtypes: Vec<DType> = self.types.iter().map(|t| t.1).collect();
        let mut s = self.repr.enables(&dtypes);
        for name in &self.extensions {
            s += &format!("enable {name};\n");
        }
        for (name, dtype) in &self.types {
            s += &self.repr.prelude(name, *dtype);
        }
        s += &self.decls;
        match &self.params {
            Some(block) => {
                s += block;
                s += self.repr.named_params();
            }
            None => {
                s += self.repr.params();
                s += COMMON;
            }
        }
        s += IDS;
        for part in self.parts {
            s += "\n";
            s += part;
        }
        s
    }
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
