//! How a convolution pass is cut into workgroups: the tile's edge (64 or 128) and the number of
//! ranges K is split into. The rule ([`cut`]): the weight gradient in 64 x 64 tiles; the other
//! passes in 128 x 128 where that gives 192 tiles unsplit; K split only under 256 tiles, towards
//! 512 workgroups (a weight gradient's, whose K is long, towards 1,024). A rule that took
//! 128 x 128 tiles more often and split K to fill the GPU ran resnet18's step slower on the
//! H200. The autotune (`tune/`) may replace the rule's cut with a measured one; tests force
//! one (`testing::Knobs::conv_cut`).

use super::Pass;

/// The shortest range of K a split leaves to one workgroup.
const MIN_SPLIT_K: usize = 256;
/// The workgroups the rule splits K towards where a pass has under 256 tiles, and a weight
/// gradient's (whose K, the batch's output pixels, is long): on the H200 1,024 ran
/// seed003_cnn's and resnet18's strided weight gradients 7-9% faster than 512.
const AIM: usize = 512;
const WEIGHT_AIM: usize = 1024;

/// `(tile, splits)` for `groups` products of `m x k` by `k x n` whose output holds `total`
/// elements: the rule's, or `forced` (`(tile, splits)`: 128 or else 64, at least one range and at
/// most one per 16-deep slice); the partial sums of a split (`splits * total` f32s) stay within
/// `limit` bytes.
#[allow(clippy::too_many_arguments)]
pub(super) fn cut(pass: Pass, m: usize, n: usize, k: usize, groups: usize, total: usize, limit: usize, forced: Option<(usize, usize)>) -> (usize, usize) {
    let grid = |t: usize| (m.div_ceil(t) * n.div_ceil(t) * groups).max(1);
    let (tile, splits) = match forced {
        Some((tile, splits)) => (if tile == 128 { 128 } else { 64 }, splits.clamp(1, k.div_ceil(16).max(1))),
        None => {
            let tile = if pass != Pass::Weight && m > 64 && grid(128) >= 192 { 128 } else { 64 };
            let aim = if pass == Pass::Weight { WEIGHT_AIM } else { AIM };
            (tile, if grid(tile) < 256 { aim.div_ceil(grid(tile)).min(k / MIN_SPLIT_K).max(1) } else { 1 })
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
    use super::{cut, Pass};

    /// resnet18's layer4 weight gradient (512 x 4608 by K = 2048): 64 x 64 tiles unsplit;
    /// seed003_cnn's 64 -> 512 weight gradient (72 tiles) splits towards 1,024 workgroups, a
    /// forward of as few tiles towards 512.
    #[test]
    fn the_rule_splits_few_tiles_towards_its_aim() {
        let limit = 1 << 30;
        assert_eq!(cut(Pass::Weight, 512, 4608, 2048, 1, 512 * 4608, limit, None), (64, 1));
        assert_eq!(cut(Pass::Weight, 512, 576, 15_488, 1, 512 * 576, limit, None), (64, 15));
        assert_eq!(cut(Pass::Forward, 512, 576, 15_488, 1, 512 * 576, limit, None), (64, 8));
    }

    /// A forced split never passes one range per slice, nor the binding.
    #[test]
    fn a_forced_cut_keeps_to_the_slices_and_the_binding() {
        let limit = 1 << 30;
        assert_eq!(cut(Pass::Forward, 8, 8, 40, 1, 64, limit, Some((128, 99))), (128, 3));
        assert_eq!(cut(Pass::Forward, 8, 8, 4096, 1, 64, 64 * 4 * 3, Some((64, 8))), (64, 2));
    }
}
