//! Shader assembly and dispatch helpers shared by the kernel families. (The families use this
//! module; it names none of them: their sources are collected at the crate root.)

use liandan_tensor::{DType, Layout};

use crate::gpu::META_WORDS;
use crate::params::{words, Meta, ShaderParams};
use crate::repr::Repr;

const COMMON: &str = include_str!("shaders/common.wgsl");
const IDS: &str = include_str!("shaders/ids.wgsl");

/// Most workgroups per grid dimension of the 1-D kernels.
const MAX_GROUPS: usize = 65_535;
pub(crate) use crate::plan::WG;

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
/// 4. the parameter block's declaration: the struct `Params` generated from the key's
///    `shader_params!` block ([`Wgsl::params`], `params.rs`: the kernel reads `p.numel`),
///    as immediate data or a storage buffer at binding 0; and `ids.wgsl`;
/// 5. its parts: `.wgsl` files under `src/shaders`, concatenated in order (helpers first, the
///    file with the entry point last). A part that varies by op (an op's body, a binding set)
///    is a file of its own, picked by the key; a choice among functions of one file is a
///    `const` that a `switch` or `if` in the file reads (the compiler folds it away).
pub(crate) struct Wgsl<'r> {
    repr: &'r Repr,
    extensions: Vec<&'static str>,
    types: Vec<(&'static str, DType)>,
    decls: String,
    /// The named parameter struct's declaration (`params.rs`), where the kernel has one, and
    /// the name the kernel reads it by.
    params: Option<(String, &'static str)>,
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

    /// The kernel reads its parameters as `p`, the block `P` ([`ShaderParams`]).
    pub(crate) fn params<P: ShaderParams>(self) -> Self {
        self.params_as::<P>("p")
    }

    /// The block `P` bound as `name`: for a kernel whose `p` is a private variable that it
    /// fills from the block (`conv/phases.wgsl`).
    pub(crate) fn params_as<P: ShaderParams>(mut self, name: &'static str) -> Self {
        self.params = Some((P::wgsl_struct(), name));
        self
    }

    /// The strided parameter block ([`StridedParams`]) and `common.wgsl`'s indexing over it.
    pub(crate) fn strided(self) -> Self {
        self.params::<StridedParams>().part(COMMON)
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
        if let Some((block, name)) = &self.params {
            s += block;
            s += &self.repr.named_params(name);
        }
        s += IDS;
        for part in self.parts {
            s += "\n";
            s += part;
        }
        s
    }
}

crate::shader_params! {
    /// The parameter block of a strided kernel (`shaders/common.wgsl`): the element count, the
    /// rank R, then in `dims` the shape (R words) and per operand k its R strides and its
    /// offset, from `R + k * (R + 1)`; a kernel's own words follow the last operand's.
    pub(crate) struct StridedParams {
        pub numel: u32,
        pub rank: u32,
        pub dims: [u32; META_WORDS - 2],
    }
}

/// The meta block of a strided elementwise kernel ([`StridedParams`]), as many words as it
/// uses. `None` when a value exceeds 32 bits or the block would not fit a slot; the caller
/// then runs the op on the CPU.
pub(crate) fn strided_meta(shape: &[usize], layouts: &[&Layout]) -> Option<Meta> {
    let numel: usize = shape.iter().product();
    let mut dims = Meta::new();
    for &d in shape {
        dims.push(u32::try_from(d).ok()?);
    }
    for l in layouts {
        debug_assert_eq!(l.shape(), shape);
        for &s in l.strides() {
            dims.push(u32::try_from(s).ok()?);
        }
        dims.push(u32::try_from(l.offset()).ok()?);
        u32::try_from(l.max_extent()).ok()?;
    }
    let mut p = StridedParams { numel: u32::try_from(numel).ok()?, rank: shape.len() as u32, ..Default::default() };
    p.dims.get_mut(..dims.len())?.copy_from_slice(&dims);
    let mut words = words(&p);
    words.truncate(2 + dims.len());
    Some(words)
}

/// A strided meta block ([`strided_meta`]) read back by name.
pub(crate) struct StridedView<'m>(pub &'m [u32]);

impl StridedView<'_> {
    pub(crate) fn numel(&self) -> u32 {
        self.0[0]
    }

    pub(crate) fn rank(&self) -> usize {
        self.0.get(1).map_or(0, |&r| r as usize)
    }

    pub(crate) fn shape(&self) -> &[u32] {
        &self.0[2..2 + self.rank()]
    }

    /// Where operand `k`'s words start.
    fn base(&self, k: usize) -> usize {
        2 + self.rank() + k * (self.rank() + 1)
    }

    /// Operand `k`'s strides.
    pub(crate) fn strides(&self, k: usize) -> Option<&[u32]> {
        self.0.get(self.base(k)..self.base(k) + self.rank())
    }

    /// Operand `k`'s offset.
    pub(crate) fn offset(&self, k: usize) -> Option<u32> {
        self.0.get(self.base(k) + self.rank()).copied()
    }
}

/// A contiguous layout of `shape`, as every kernel output has.
pub(crate) fn dense(shape: &[usize]) -> Layout {
    Layout::contiguous(shape)
}

#[cfg(test)]
mod tests {
    use super::{grid, strided_meta, StridedView, MAX_GROUPS, WG};
    use liandan_tensor::Layout;

    #[test]
    fn a_strided_block_holds_the_shape_then_each_operand() {
        let t = Layout::contiguous(&[3, 2]).permute(&[1, 0]).unwrap();
        let words = strided_meta(&[2, 3], &[&Layout::contiguous(&[2, 3]), &t]).unwrap();
        assert_eq!(words[..], [6, 2, 2, 3, 3, 1, 0, 1, 2, 0]);
        let view = StridedView(&words);
        assert_eq!((view.numel(), view.rank(), view.shape()), (6, 2, &[2, 3][..]));
        assert_eq!((view.strides(1), view.offset(1), view.strides(2)), (Some(&[1, 2][..]), Some(0), None));
    }

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
