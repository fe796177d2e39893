//! The tensor-core kernels' layouts ([`Variant`]): which one a device, a product or a
//! convolution pass runs, and the tiles, workgroups and workgroup memory each takes.

use super::Load;

/// How the kernel's workgroup is laid out: chosen per device when it is opened
/// ([`Variant::for_limits`]), per product ([`Variant::for_product`]) and per convolution pass
/// (`conv.rs`). Each subgroup of 32 computes 64 x 64 of the tile as 4 x 4 cooperative 16 x 16
/// sums in `Prefetch`, 32 x 64 (2 x 4) in the others: half the accumulators, which lets the
/// driver fit 512 invocations in 128 registers each, so 16 subgroups share a multiprocessor
/// where `Prefetch` leaves 8 (`cargo xtask kernel-stats` shows the registers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Variant {
    /// 128 x 128 tiles, 4 subgroups: the next slice fetched into registers while this one is
    /// multiplied; slices staged in the operands' orientation.
    Prefetch,
    /// 64 x 128 tiles, 4 subgroups: for convolution passes of at most 64 rows, which leave half
    /// of a 128-row tile empty.
    Short,
    /// 16 subgroups, 4 x 4 on 128 x 256 tiles: a workgroup of 512 invocations.
    Many,
    /// As `Many`, 8 x 2 on 256 x 128 tiles.
    Tall,
}

impl Variant {
    /// The variants a matrix product runs on ([`Variant::for_limits`], [`Variant::for_product`]);
    /// the convolutions take `Short` and `Many` too.
    pub(crate) const MATMUL: [Variant; 2] = [Variant::Prefetch, Variant::Tall];

    /// Its name, as `liandan info` prints it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Prefetch => "prefetch",
            Variant::Short => "short",
            Variant::Many => "many",
            Variant::Tall => "tall",
        }
    }

    /// The variant a device with `limits` runs: `Tall` (on the H200 the zoo's f16 steps ran
    /// faster on 16 subgroups than on `Prefetch`'s 8), else `Prefetch` where the device's
    /// workgroups are too small for it; `Err` says why neither fits.
    pub(crate) fn for_limits(limits: &wgpu::Limits) -> Result<Variant, &'static str> {
        let fits =
            |v: Variant| limits.max_compute_workgroup_storage_size >= v.workgroup_bytes() && limits.max_compute_invocations_per_workgroup >= v.invocations();
        [Variant::Tall, Variant::Prefetch]
            .into_iter()
            .find(|&v| fits(v))
            .ok_or("too little workgroup memory, or too small workgroups, for the tensor-core kernels")
    }

    /// The variant a product of `[m, k] x [k, n]` runs: the device's (`chosen`), but where that
    /// is `Tall` and the product is large in every dimension ([`LARGE`] or more), `Prefetch`'s
    /// 128 x 128 tiles of four 64 x 64 subgroups, which ran such products faster on the H200
    /// (the zoo's products, none that large, run faster on `Tall`). Every device that fits
    /// `Tall` fits `Prefetch`.
    pub(crate) fn for_product(chosen: Variant, [m, k, n]: [usize; 3]) -> Variant {
        match chosen {
            Variant::Tall if m.min(k).min(n) >= LARGE => Variant::Prefetch,
            v => v,
        }
    }

    /// The variant whose output tile is `tile` (rows x columns), if one is.
    pub(crate) fn for_tile(tile: (usize, usize)) -> Option<Variant> {
        [Variant::Prefetch, Variant::Short, Variant::Many, Variant::Tall].into_iter().find(|v| v.tile() == tile)
    }

    /// How many of the usual 128-invocation workgroups one of its workgroups stands for when
    /// K is split to fill the GPU (`plan::coop_k_splits` counts tiles as if two ran on a compute
    /// unit at once; a workgroup of 512 has a unit to itself).
    pub(crate) fn weight(self) -> usize {
        (self.invocations() as usize / 256).max(1)
    }

    /// Subgroups per workgroup along M and along N.
    pub(crate) fn subgroups(self) -> (u32, u32) {
        match self {
            Variant::Many => (4, 4),
            Variant::Tall => (8, 2),
            Variant::Prefetch | Variant::Short => (2, 2),
        }
    }

    /// Rows of 16 x 16 sums per subgroup (each has 4 columns of them).
    pub(crate) fn fragment_rows(self) -> u32 {
        if self != Variant::Prefetch {
            2
        } else {
            4
        }
    }

    /// The output tile, rows x columns.
    pub(crate) fn tile(self) -> (usize, usize) {
        let (sm, sn) = self.subgroups();
        ((16 * self.fragment_rows() * sm) as usize, 64 * sn as usize)
    }

    pub(crate) fn invocations(self) -> u32 {
        let (sm, sn) = self.subgroups();
        32 * sm * sn
    }

    /// vec4s of f16 the staged slices of a and b take in `matmul_coop.wgsl` (32 deep, rows
    /// padded by 8 f16: as K-long rows for a K-major operand, else as M- or N-long rows).
    pub(crate) fn staged_vecs(self, a: Load, b: Load) -> (u32, u32) {
        let (bm, bn) = self.tile();
        let (bm, bn) = (bm as u32, bn as u32);
        let (krow, mrow, nrow) = ((32 + 8) / 4, (bm + 8) / 4, (bn + 8) / 4);
        let a_vecs = if a == Load::Outer { 32 * mrow } else { bm * krow };
        let b_vecs = if b == Load::K { bn * krow } else { 32 * nrow };
        (a_vecs, b_vecs)
    }

    /// Bytes of workgroup memory its kernels declare, the most over the loaders.
    pub(crate) fn workgroup_bytes(self) -> u32 {
        let scratch = self.invocations() / 32 * 256 * 4;
        let loads = [Load::K, Load::Outer, Load::Strided];
        let most = loads.iter().flat_map(|&a| loads.map(|b| self.staged_vecs(a, b))).map(|(x, y)| x + y).max().unwrap_or(0);
        most * 8 + scratch
    }
}

impl Variant {
    /// The variant a convolution pass of `m` rows runs (`chosen`: the device's): `Short`
    /// (64-row tiles) where m <= 64, else the device's, but where that is `Tall`, `Many`'s
    /// 128-row tiles for m <= 128 rather than half-empty 256-row ones.
    pub(crate) fn for_pass(chosen: Variant, m: usize) -> Variant {
        match chosen {
            _ if m <= 64 => Variant::Short,
            Variant::Tall if m <= 128 => Variant::Many,
            v => v,
        }
    }
}

/// What an adapter offers the tensor-core kernels, as `coop.rs` reads it when a device opens:
/// cooperative matrices at all, a 16 x 16 x 16 f16 x f16 -> f32 configuration among them
/// (NVIDIA's through Vulkan; Metal's simdgroup matrices are 8 x 8), native f16, and its
/// subgroups' least and greatest width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TensorCores {
    pub(crate) matrices: bool,
    pub(crate) f16_16x16: bool,
    pub(crate) shader_f16: bool,
    pub(crate) subgroups: (u32, u32),
}

/// The layout f16 products run on where an adapter offers `offers` within `limits`, or why
/// they cannot run on its tensor cores: the kernels tell their four subgroups apart by
/// invocation index, so subgroups must be exactly 32 wide.
pub(crate) fn tensor_cores(offers: TensorCores, limits: &wgpu::Limits) -> Result<Variant, &'static str> {
    if !offers.matrices {
        Err("the adapter has no cooperative matrices")
    } else if !offers.f16_16x16 {
        Err("no 16x16x16 f16 x f16 -> f32 configuration")
    } else if !offers.shader_f16 {
        Err("no shader-f16")
    } else if offers.subgroups != (32, 32) {
        Err("subgroups are not always 32 wide")
    } else {
        Variant::for_limits(limits)
    }
}

/// The least M, K and N of a product that [`Variant::for_product`] runs on `Prefetch`'s tiles
/// rather than `Tall`'s.
pub(crate) const LARGE: usize = 2048;

#[cfg(test)]
mod tests {
    use super::Variant;

    #[test]
    fn the_default_variant_is_the_largest_the_limits_fit() {
        // WebGPU's defaults: 256 invocations and 16 KiB, too little for any variant.
        let mut limits = wgpu::Limits::default();
        assert!(Variant::for_limits(&limits).is_err());
        limits.max_compute_workgroup_storage_size = 32 << 10;
        assert_eq!(Variant::for_limits(&limits), Ok(Variant::Prefetch));
        limits.max_compute_invocations_per_workgroup = 1024;
        assert_eq!(Variant::for_limits(&limits), Ok(Variant::Prefetch), "Tall needs more than 32 KiB");
        limits.max_compute_workgroup_storage_size = 48 << 10;
        assert_eq!(Variant::for_limits(&limits), Ok(Variant::Tall));
        assert_eq!((Variant::Tall.weight(), Variant::Prefetch.weight()), (2, 1));
    }

    #[test]
    fn convolutions_pick_tiles_their_rows_fill() {
        let picks = |chosen| [32, 64, 65, 128, 129, 512].map(|m| Variant::for_pass(chosen, m));
        use Variant::{Many, Prefetch, Short, Tall};
        assert_eq!(picks(Tall), [Short, Short, Many, Many, Tall, Tall]);
        assert_eq!(picks(Prefetch), [Short, Short, Prefetch, Prefetch, Prefetch, Prefetch]);
    }

    #[test]
    fn large_products_take_prefetch_tiles_where_tall_is_the_default() {
        let large = super::LARGE;
        assert_eq!(Variant::for_product(Variant::Tall, [large; 3]), Variant::Prefetch);
        assert_eq!(Variant::for_product(Variant::Tall, [4 * large, large, 2 * large]), Variant::Prefetch);
        // One dimension short of it keeps the default (vit's MLP: [8320, 192] x [192, 768]).
        assert_eq!(Variant::for_product(Variant::Tall, [8320, 192, 768]), Variant::Tall);
        assert_eq!(Variant::for_product(Variant::Tall, [large, large, large - 1]), Variant::Tall);
        assert_eq!(Variant::for_product(Variant::Tall, [large - 1, large, large]), Variant::Tall);
        // Another device default stays as it is.
        assert_eq!(Variant::for_product(Variant::Prefetch, [large; 3]), Variant::Prefetch);
    }
}
