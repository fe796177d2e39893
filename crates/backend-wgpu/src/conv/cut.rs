//! How a convolution pass is cut into workgroups: the tile's edge (64 or 128) and the number of
//! ranges K is split into. [`ConvCut::Previous`] (the default) is the cut of H200 run 8;
//! [`ConvCut::Auto`] chooses 128 x 128 tiles more often and splits K to fill the GPU;
//! [`ConvCut::Fill`] is Auto's rule aiming at another number of workgroups
//! (`LIANDAN_CONV_CUT=auto`, `=512`, or [`with_conv_cut`]); [`ConvCut::Fixed`] forces one, for
//! sweeps (`cargo xtask bench-conv --sweep`) and for tests of every tile and split.
//!
//! Why Auto is not the default: in resnet18 (CIFAR, batch 128) the weight gradient of layers
//! 2-4 is a product of a few hundred 64 x 64 tiles over a long K (layer4: 512 x 4608 by K =
//! 2048, 576 tiles, no split), and the forward and input gradient of layers 3-4 likewise
//! (layer4: 256 tiles, K = 4608), so Auto takes 128 x 128 tiles (8 x 8 per invocation, fewer
//! workgroup-memory reads per multiply-add) wherever splitting K still gives the grid `FILL`
//! workgroups. On the H200 that made resnet18's forward+backward slower, 29.4 ms against 26.9
//! with the previous cut (`cargo xtask bench-conv`, run 10 in docs/PERFORMANCE.md), and the
//! training step 27.0 against 25.0 ms.

use std::cell::Cell;
use std::sync::OnceLock;

use super::Pass;

/// How the convolution kernels cut a product into workgroups (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvCut {
    /// [`ConvCut::Fill`] with 256 workgroups (two per compute unit of a GPU with 128).
    Auto,
    /// 128 x 128 tiles where both sides of the output exceed 64 and the grid, with K split
    /// into ranges of at least 256, reaches this many workgroups; else 64 x 64 tiles with K
    /// split until the grid reaches twice as many. More workgroups shorten the last wave of a
    /// GPU's compute units at the cost of more partial sums.
    Fill(usize),
    /// The default, the cut of H200 run 8: the weight gradient in 64 x 64 tiles; the other
    /// passes in 128 x 128 where that gives 192 tiles unsplit; K split only under 256 tiles,
    /// towards 512 workgroups (a weight gradient's towards 1,024 since run 179).
    Previous,
    /// Tiles of `tile` x `tile` (128; any other value means 64) and K cut into `splits`
    /// ranges (at least one, at most one per 16-deep slice; halved while the partial sums
    /// would not fit one binding).
    Fixed { tile: usize, splits: usize },
}

thread_local! {
    static CUT: Cell<Option<ConvCut>> = const { Cell::new(None) };
}

/// `LIANDAN_CONV_CUT`, read once: `auto` gives [`ConvCut::Auto`], a count N of workgroups
/// `ConvCut::Fill(N)`, anything else [`ConvCut::Previous`]; `None` when it is unset or empty.
fn env_cut() -> Option<ConvCut> {
    static CUT: OnceLock<Option<ConvCut>> = OnceLock::new();
    *CUT.get_or_init(|| match std::env::var("LIANDAN_CONV_CUT").map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        Ok("") | Err(_) => None,
        Ok("auto") => Some(ConvCut::Auto),
        Ok(v) => Some(v.parse().map_or(ConvCut::Previous, ConvCut::Fill)),
    })
}

/// Runs `f` with the convolution kernels of this thread cut as `cut` says: for benchmarks and
/// tests. Results agree whatever the cut, up to the order of f32 additions.
pub fn with_conv_cut<R>(cut: ConvCut, f: impl FnOnce() -> R) -> R {
    super::with_flag(&CUT, Some(cut), f)
}

/// Whether a cut was asked for (`with_conv_cut` on this thread, or `LIANDAN_CONV_CUT`): the
/// autotune (`tune.rs`) then leaves the cut as asked, and the Winograd rule (`winograd.rs`)
/// leaves the pass to the implicit GEMM it cuts.
pub(super) fn forced() -> bool {
    CUT.with(|c| c.get()).or_else(env_cut).is_some()
}

/// Workgroups that keep a big GPU busy (`ConvCut::Auto`): two 128 x 128 tiles per compute
/// unit on one with 128 of them (the H200 has 132).
const FILL: usize = 256;
/// The shortest range of K a split leaves to one workgroup.
const MIN_SPLIT_K: usize = 256;
/// The workgroups [`ConvCut::Previous`] splits K towards where a pass has under 256 tiles, and
/// a weight gradient's (whose K, the batch's output pixels, is long). On the H200
/// (docs/PERFORMANCE.md, runs 178-179) 1,024 took seed003_cnn's 64 -> 512 weight gradient
/// (512 x 576 by K = 15,488: 15 ranges instead of 8) from 414 to 385 us a call and resnet18's
/// strided 3x3 ones from 244-248 to 224-227, the rest of resnet18's and mnist_cnn's within 3%.
const AIM: usize = 512;
const WEIGHT_AIM: usize = 1024;

/// `(tile, splits)` for `groups` products of `m x k` by `k x n` whose output holds `total`
/// elements; the partial sums of a split (`splits * total` f32s) stay within `limit` bytes.
pub(super) fn cut(pass: Pass, m: usize, n: usize, k: usize, groups: usize, total: usize, limit: usize) -> (usize, usize) {
    let grid = |t: usize| (m.div_ceil(t) * n.div_ceil(t) * groups).max(1);
    // Splits that bring `tiles` workgroups up to `want`, each range at least MIN_SPLIT_K deep.
    let fill = |tiles: usize, want: usize| if tiles < want { want.div_ceil(tiles).min(k / MIN_SPLIT_K).max(1) } else { 1 };
    let cut = CUT.with(|c| c.get()).or_else(env_cut).unwrap_or(ConvCut::Previous);
    let (tile, splits) = match cut {
        ConvCut::Fixed { tile, splits } => (if tile == 128 { 128 } else { 64 }, splits.clamp(1, k.div_ceil(16).max(1))),
        ConvCut::Previous => {
            let tile = if pass != Pass::Weight && m > 64 && grid(128) >= 192 { 128 } else { 64 };
            let aim = if pass == Pass::Weight { WEIGHT_AIM } else { AIM };
            (tile, if grid(tile) < 256 { aim.div_ceil(grid(tile)).min(k / MIN_SPLIT_K).max(1) } else { 1 })
        }
        ConvCut::Auto | ConvCut::Fill(_) => {
            let want = match cut {
                ConvCut::Fill(w) => w.max(1),
                _ => FILL,
            };
            let big = fill(grid(128), want);
            if m > 64 && n > 64 && grid(128) * big >= want {
                (128, big)
            } else {
                (64, fill(grid(64), 2 * want))
            }
        }
    };
    let mut splits = splits;
    while splits > 1 && splits * total * 4 > limit {
        splits /= 2;
    }
    // Every range a whole number of 16-deep slices (the aligned loaders need it).
    let ks = k.div_ceil(splits).next_multiple_of(16).max(16);
    (tile, k.div_ceil(ks).max(1))
}

#[cfg(test)]
mod tests {
    use super::{cut, with_conv_cut, ConvCut, Pass};

    /// resnet18's layer4 weight gradient (512 x 4608 by K = 2048): 64 x 64 tiles unsplit before,
    /// 128 x 128 tiles split in two now; its stem's (64 x 27 by K = 131,072) stays 64 x 64,
    /// split to fill the grid either way.
    #[test]
    fn the_weight_gradient_takes_big_split_tiles() {
        let limit = 1 << 30;
        assert_eq!(with_conv_cut(ConvCut::Previous, || cut(Pass::Weight, 512, 4608, 2048, 1, 512 * 4608, limit)), (64, 1));
        assert_eq!(with_conv_cut(ConvCut::Auto, || cut(Pass::Weight, 512, 4608, 2048, 1, 512 * 4608, limit)), (128, 2));
        assert_eq!(with_conv_cut(ConvCut::Auto, || cut(Pass::Weight, 64, 27, 131_072, 1, 64 * 27, limit)), (64, 512));
        assert_eq!(with_conv_cut(ConvCut::Fill(1024), || cut(Pass::Weight, 512, 4608, 2048, 1, 512 * 4608, limit)), (128, 8));
        // seed003_cnn's 64 -> 512 weight gradient (72 tiles) splits towards 1,024 workgroups, a
        // forward of as few tiles towards 512.
        assert_eq!(with_conv_cut(ConvCut::Previous, || cut(Pass::Weight, 512, 576, 15_488, 1, 512 * 576, limit)), (64, 15));
        assert_eq!(with_conv_cut(ConvCut::Previous, || cut(Pass::Forward, 512, 576, 15_488, 1, 512 * 576, limit)), (64, 8));
        // A forced split never passes one range per slice, nor the binding.
        assert_eq!(with_conv_cut(ConvCut::Fixed { tile: 128, splits: 99 }, || cut(Pass::Forward, 8, 8, 40, 1, 64, limit)), (128, 3));
        assert_eq!(with_conv_cut(ConvCut::Fixed { tile: 64, splits: 8 }, || cut(Pass::Forward, 8, 8, 4096, 1, 64, 64 * 4 * 3)), (64, 2));
    }
}
