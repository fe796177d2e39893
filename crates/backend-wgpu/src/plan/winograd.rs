//! Which convolutions run as Winograd (`conv/winograd.rs` has the algorithm and its rounding),
//! on which tile, and how its batched products are cut.
//!
//! Exact f32 (the default) and bf16 take F(2x2) for the forward and input gradient of layers of at
//! least [`MIN_CHANNELS_F2`] input and output channels, and F(4x4) for weight gradients from
//! [`MIN_CHANNELS_F4`] (of unpadded convolutions, only the weight gradient: seed003_cnn's 64 -> 512
//! one); f16 only those weight gradients (its other passes go to the tensor cores or the implicit
//! GEMM, which read f16 at half the bytes); under `conv_tf32` every pass the tensor cores do not
//! take runs as F(4x4) from [`MIN_CHANNELS_F4`] (on the H200 resnet18's 64-channel layers ran
//! slower as F(2x2) than the implicit GEMM, faster as F(4x4); its 3-channel stem slower either
//! way). Intermediates stay under [`MAX_INTERMEDIATE`]. A cut forced on the implicit GEMM
//! (`testing::Knobs::conv_cut`) keeps the rule off, so what is tested under it is the implicit GEMM
//! so cut; `testing::Knobs::conv_winograd` turns it off, or runs every convolution it can take with
//! one tile, for tests.

use liandan_tensor::{ConvGeometry, DType};

use super::{Options, Pass};

/// The rules' least channel counts on both sides of the product (see the module docs).
pub(crate) const MIN_CHANNELS_F2: usize = 128;
pub(crate) const MIN_CHANNELS_F4: usize = 64;
/// The largest intermediate (bytes) the rules accept: past it the implicit GEMM, which needs
/// none, runs (56 x 56 images of 256 channels at batch 128 would need 925 MB for each of two
/// as F(4x4)).
const MAX_INTERMEDIATE: usize = 256 << 20;

/// The most bytes a weight gradient's transformed dy and patches take at once where its
/// products are not split (`conv/winograd.rs`): its images go in chunks within it, each chunk's
/// products summed into the first's. On the H200 seed003_cnn's 96 MB in two chunks took its
/// peak 163 -> 123 MiB with its step as fast; chunks of 32 and 16 MiB took it to 109 and 100
/// MiB, the pass 1.4x and 1.9x as slow.
const CHUNK_BYTES: usize = 48 << 20;

/// How a pass runs as Winograd: its tile, and the images a chunk of its weight gradient
/// takes (the whole batch for the other passes, and where the weight gradient is not cut).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Winograd {
    pub(crate) tile: Tile,
    pub(crate) images: usize,
    /// The chunks those images make of the batch.
    pub(crate) chunks: usize,
}

impl Winograd {
    pub(crate) fn new(pass: Pass, g: &ConvGeometry, tile: Tile, limit: u64, chunk_bytes: Option<usize>) -> Winograd {
        let images = chunk_images(pass, g, tile, limit, chunk_bytes);
        Winograd { tile, images, chunks: g.n.div_ceil(images) }
    }
}

/// The images in a chunk of the weight gradient of `g` as `tile` (`chunk_bytes`, a testing
/// knob, else [`CHUNK_BYTES`], their transformed dy and patches at most); the whole batch for
/// the other passes, and where the whole batch's products would split their K (enough output
/// tiles to fill the GPU): there each chunk adds one product and one add, where a split
/// product's chunks would each be cut and reduced (resnet18's 64- and 128-channel weight
/// gradients: its step 3% slower in 4 and 2 chunks, its peak the same).
fn chunk_images(pass: Pass, g: &ConvGeometry, tile: Tile, limit: u64, chunk_bytes: Option<usize>) -> usize {
    let Frame { m, k, tiles, .. } = Frame::new(pass, g, tile);
    if pass != Pass::Weight || (tile == Tile::F4 && products_cut(m, g.n * tiles, k, limit as usize).1 > 1) {
        return g.n;
    }
    let per_image = (tile.products() * tiles * (m + k) * 4).max(4) as u64;
    (chunk_bytes.unwrap_or(CHUNK_BYTES) as u64 / per_image).clamp(1, g.n.max(1) as u64) as usize
}

/// The tile: F(2x2, 3x3) or F(4x4, 3x3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Tile {
    F2,
    F4,
}

impl Tile {
    /// Outputs a tile along each axis.
    pub(crate) fn outputs(self) -> usize {
        match self {
            Tile::F2 => 2,
            Tile::F4 => 4,
        }
    }

    /// The products: one per point of a patch.
    pub(crate) fn products(self) -> usize {
        (self.outputs() + 2).pow(2)
    }
}

/// What runs as Winograd: nothing, every convolution it can take (with this tile, or the
/// rule's), or what the rule takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Off,
    All(Option<Tile>),
    Rule,
}

impl Setting {
    /// The setting of `options`: the testing knob, else the rule (off where a cut is forced on
    /// the implicit GEMM).
    fn of(options: &Options) -> Setting {
        match (options.conv_winograd, options.conv_cut) {
            (Some(2), _) => Setting::All(Some(Tile::F2)),
            (Some(4), _) => Setting::All(Some(Tile::F4)),
            (Some(_), _) | (None, Some(_)) => Setting::Off,
            (None, None) => Setting::Rule,
        }
    }
}

/// The rule's tile and least channel count for `pass`: F(4x4) where TF32's rounding was asked
/// for, and for weight gradients, else F(2x2) (see the module docs).
fn rule(pass: Pass, conv_tf32: bool) -> (Tile, usize) {
    if conv_tf32 || pass == Pass::Weight {
        (Tile::F4, MIN_CHANNELS_F4)
    } else {
        (Tile::F2, MIN_CHANNELS_F2)
    }
}

/// The tile a pass of `g` runs as Winograd with, or `None`: f32, bf16 (widened to f32 words
/// and the result rounded, as f32 computes it) or f16 (read and written as stored, the
/// transforms and products in f32; by the rule only its weight gradients, which on the H200
/// ran 1.9x as long on the implicit GEMM as f32's F(4x4)), two contiguous operands (no bias:
/// `operands`), a shape it computes, intermediates within 32-bit indexing and one binding of
/// `limit` bytes, and the setting or the rule says so. The caller keeps passes the tensor
/// cores take off it, but for f16 weight gradients whose images go in one chunk.
pub(super) fn wanted(options: &Options, pass: Pass, g: &ConvGeometry, dtype: DType, operands: bool, limit: u64) -> Option<Tile> {
    let setting = Setting::of(options);
    let f16_by_rule = dtype == DType::F16 && setting == Setting::Rule;
    if !matches!(dtype, DType::F32 | DType::BF16 | DType::F16) || !operands || (f16_by_rule && pass != Pass::Weight) {
        return None;
    }
    takes(setting, pass, g, options.conv_tf32).filter(|&tile| fits(pass, g, tile, limit))
}

/// Whether the intermediates of `pass` of `g` as `tile` stay within 32-bit indexing and one
/// binding of `limit` bytes.
fn fits(pass: Pass, g: &ConvGeometry, tile: Tile, limit: u64) -> bool {
    let Frame { m, k, oh, ow, tiles, .. } = Frame::new(pass, g, tile);
    let (nt, p) = (tile.products(), g.n * tiles);
    let fits = |numel: usize| u32::try_from(numel).is_ok() && (numel as u64).saturating_mul(4).max(4) <= limit;
    [nt * m * k, nt * k * p, nt * m * p, g.n * m * oh * ow, 9 * m * k].into_iter().all(fits)
}

/// [`wanted`]'s choice for a pass of `g` under `setting`, its operands aside.
fn takes(setting: Setting, pass: Pass, g: &ConvGeometry, conv_tf32: bool) -> Option<Tile> {
    // Padding of 0 or 1 on both sides (2 - padding for the input gradient's patches of dy).
    let padded = g.padding.0 == g.padding.1 && g.padding.0 <= 1 && g.h.min(g.w) + 2 * g.padding.0 >= 3;
    let shape = g.kernel == (3, 3) && g.stride == (1, 1) && padded && g.dilation == (1, 1) && g.groups == 1;
    if !shape || g.n * g.h * g.w == 0 {
        return None;
    }
    match setting {
        Setting::Off => None,
        Setting::All(tile) => Some(tile.unwrap_or(rule(pass, conv_tf32).0)),
        // Unpadded convolutions by the rule only for the weight gradient (seed003_cnn's second
        // convolution); their forward and input gradient were not timed as Winograd.
        Setting::Rule if g.padding.0 == 0 && pass != Pass::Weight => None,
        Setting::Rule => {
            let (tile, min) = rule(pass, conv_tf32);
            let r = tile.outputs();
            let (oh, ow) = if pass == Pass::Input { (g.h, g.w) } else { (g.out_h(), g.out_w()) };
            let tiles = g.n * oh.div_ceil(r) * ow.div_ceil(r);
            let small = tile.products() * 4 * tiles * g.c.max(g.o) <= MAX_INTERMEDIATE;
            (g.c >= min && g.o >= min && small).then_some(tile)
        }
    }
}

/// How F(4x4)'s 36 products `[m, k] x [k, n]` are cut (`(tile, splits)`): 64 x 64 tiles, and K
/// split where those are fewer than 256, to some 1,152 workgroups in ranges of at least 256 (the
/// partial sums within `limit` bytes). On the H200 the autotune chose exactly these for every
/// product of resnet18's layers, where the matmul's own rule took 128 x 128 tiles for some and
/// split fewer (resnet18's step 8% faster).
pub(crate) fn products_cut(m: usize, k: usize, n: usize, limit: usize) -> (usize, usize) {
    let products = Tile::F4.products();
    let tiles = products * m.div_ceil(64) * n.div_ceil(64);
    let mut splits = if tiles < 256 { 1152usize.div_ceil(tiles).min(k / 256).max(1) } else { 1 };
    while splits > 1 && splits * products * m * n * 4 > limit {
        splits /= 2;
    }
    (64, splits)
}

/// The sizes a pass of a convolution works in: the patches are read from x (for the input
/// gradient from dy, padded by 2 - padding: a stride-1 input gradient is the forward
/// convolution of dy with the turned kernels), and the tiles cover the pass's output (y, whose
/// dy the weight gradient reads, or dx).
pub(crate) struct Frame {
    /// The products' rows and columns (the weight gradient's), or rows and depth.
    pub(crate) m: usize,
    pub(crate) k: usize,
    /// The patches' source: its height, width and the zeros around it.
    pub(crate) ih: usize,
    pub(crate) iw: usize,
    pub(crate) pad: usize,
    /// The output the tiles cover, its tiles a row and an image.
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) tw: usize,
    pub(crate) tiles: usize,
}

impl Frame {
    pub(crate) fn new(pass: Pass, g: &ConvGeometry, tile: Tile) -> Frame {
        let r = tile.outputs();
        let (m, k, ih, iw, pad, oh, ow) = match pass {
            Pass::Forward | Pass::Weight => (g.o, g.c, g.h, g.w, g.padding.0, g.out_h(), g.out_w()),
            Pass::Input => (g.c, g.o, g.out_h(), g.out_w(), 2 - g.padding.0, g.h, g.w),
        };
        Frame { m, k, ih, iw, pad, oh, ow, tw: ow.div_ceil(r), tiles: oh.div_ceil(r) * ow.div_ceil(r) }
    }
}

#[cfg(test)]
mod tests {
    use super::{chunk_images, takes, Pass, Setting, Tile};
    use liandan_tensor::ConvGeometry;

    fn geometry(c: usize, o: usize, h: usize, padding: usize) -> ConvGeometry {
        ConvGeometry { n: 128, c, h, w: h, o, kernel: (3, 3), stride: (1, 1), padding: (padding, padding), dilation: (1, 1), groups: 1 }
    }

    /// The rule takes an unpadded convolution's weight gradient (seed003_cnn's 64 -> 512 one
    /// over 13 x 13 images), not its forward or input gradient; padded ones as before; the
    /// settings take any padding of 0 or 1 where the image has an output.
    #[test]
    fn the_rule_takes_unpadded_convolutions_for_their_weight_gradient_alone() {
        let rule = |pass: Pass, g: ConvGeometry| takes(Setting::Rule, pass, &g, false);
        assert_eq!(rule(Pass::Weight, geometry(64, 512, 13, 0)), Some(Tile::F4));
        assert_eq!(rule(Pass::Forward, geometry(64, 512, 13, 0)), None);
        assert_eq!(rule(Pass::Forward, geometry(256, 256, 13, 0)), None);
        assert_eq!(rule(Pass::Input, geometry(256, 256, 13, 0)), None);
        // mnist_cnn's 32 -> 64: too few channels.
        assert_eq!(rule(Pass::Weight, geometry(32, 64, 26, 0)), None);
        assert_eq!(rule(Pass::Forward, geometry(128, 128, 16, 1)), Some(Tile::F2));
        assert_eq!(rule(Pass::Input, geometry(128, 128, 16, 1)), Some(Tile::F2));
        assert_eq!(rule(Pass::Weight, geometry(64, 64, 32, 1)), Some(Tile::F4));
        let all = |pass: Pass, g: ConvGeometry| takes(Setting::All(Some(Tile::F2)), pass, &g, false);
        assert_eq!(all(Pass::Forward, geometry(8, 8, 3, 0)), Some(Tile::F2));
        assert_eq!(all(Pass::Input, geometry(8, 8, 3, 0)), Some(Tile::F2));
        assert_eq!(all(Pass::Forward, geometry(8, 8, 2, 0)), None, "no output");
        assert_eq!(all(Pass::Forward, geometry(8, 8, 8, 2)), None, "padding 2");
    }

    /// A weight gradient goes in chunks where its products are not split: seed003_cnn's 64 ->
    /// 512 one (96 MB of intermediates at batch 128) in two, resnet18's 64-channel one (split)
    /// whole, as are forwards; a knob of one image's bytes gives one image a chunk.
    #[test]
    fn weight_gradients_go_in_chunks_where_their_products_are_not_split() {
        let limit = (1 << 31) - 1;
        let seed003 = geometry(64, 512, 13, 0);
        assert_eq!(chunk_images(Pass::Weight, &seed003, Tile::F4, limit, None), 67);
        assert_eq!(chunk_images(Pass::Forward, &seed003, Tile::F4, limit, None), 128);
        assert_eq!(chunk_images(Pass::Weight, &geometry(64, 64, 32, 1), Tile::F4, limit, None), 128);
        assert_eq!(chunk_images(Pass::Weight, &seed003, Tile::F4, limit, Some(1)), 1);
    }
}
