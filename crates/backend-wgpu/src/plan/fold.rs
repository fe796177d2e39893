//! Which input gradients go through a column buffer: f32 convolutions whose implicit GEMM
//! would spend much of its work in the padding. `plan::conv` sends them to the columns and `fused_conv` declines them, so the tensor
//! layer's composite (`Tensor::conv2d_backward_input`) runs: the columns `[N, C kh kw, Ho Wo]`
//! as one batched product of the weights transposed (`[C kh kw, O]`, the same for every
//! image) and dy (`[O, Ho Wo]` an image) on the ordinary matmul, folded into dx by the col2im
//! kernel (`shaders/window_col2im.wgsl`: each input pixel sums the columns of the taps that
//! reach it).
//!
//! The implicit GEMM of the input gradient (`conv.rs`) is a correlation of dy, padded by the
//! kernel's reach, over every input pixel: for an unpadded convolution every tap of an input
//! pixel near the border that falls outside dy is a multiply-add by zero. seed003_cnn's 64 ->
//! 512 3x3 convolution over 13 x 13 images (11 x 11 outputs) spends 28% of its input
//! gradient's work so (169 pixels of 9 taps each against 121 outputs of 9 taps). The columns
//! cost a buffer of `N C kh kw Ho Wo` f32s for the pass (36 MB in seed003_cnn) and a write and
//! read of it; the product does exactly the multiply-adds that count. On the H200 that pass
//! took 527-530 us a call as the implicit GEMM and 463-490 this way; one product over dy copied
//! to `[O, N Ho Wo]` first took 497.
//!
//! Where it runs ([`wanted`]): f32 passes of one group and stride 1 where the input has at
//! least [`MIN_WASTE`] times the output's pixels and the columns stay under
//! [`MAX_COLUMNS`]. A cut forced on the implicit GEMM (`testing::Knobs::conv_cut`) keeps the
//! rule off, as it keeps Winograd's; `testing::Knobs::conv_fold` turns it off, or runs every
//! input gradient it can take (any stride, padding and dilation) through it, for tests.

use liandan_tensor::{ConvGeometry, DType};

use super::Options;

/// The least ratio of the input's pixels to the output's (as tenths) the rule takes: 1.3.
/// seed003_cnn's second convolution has 169 / 121 = 1.40, mnist_cnn's 676 / 576 = 1.17, a
/// padded 3x3 convolution of stride 1 exactly 1.
const MIN_WASTE: usize = 13;
/// The largest column buffer (bytes) the rule accepts.
const MAX_COLUMNS: usize = 256 << 20;

/// What runs through the columns: nothing, every input gradient it can take, or the rule's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    Off,
    All,
    Rule,
}

impl Setting {
    /// Every input gradient it can take (`Some(true)`), none (`Some(false)`), or the rule's.
    fn from_switch(on: Option<bool>) -> Setting {
        match on {
            Some(true) => Setting::All,
            Some(false) => Setting::Off,
            None => Setting::Rule,
        }
    }
}

/// Whether the input gradient of `g` runs through the columns: two contiguous operands (dy,
/// w: `operands`), a shape it computes, and the setting or the rule says so. The caller keeps
/// passes the tensor cores take off it.
pub(super) fn wanted(options: &Options, g: &ConvGeometry, dtype: DType, operands: bool) -> bool {
    // A cut forced on the implicit GEMM keeps the rule off.
    let setting = match (options.conv_fold, options.conv_cut) {
        (None, Some(_)) => Setting::Off,
        (on, _) => Setting::from_switch(on),
    };
    operands && takes(setting, g, dtype)
}

/// Whether `setting` runs the input gradient of `g` in `dtype` through the columns.
fn takes(setting: Setting, g: &ConvGeometry, dtype: DType) -> bool {
    let (kk, l) = (g.kernel.0 * g.kernel.1, g.out_h() * g.out_w());
    let columns = g.n.saturating_mul(g.c).saturating_mul(kk).saturating_mul(l);
    if dtype != DType::F32 || g.groups != 1 || l == 0 || g.n * g.h * g.w == 0 || columns.saturating_mul(4) > MAX_COLUMNS {
        return false;
    }
    match setting {
        Setting::Off => false,
        Setting::All => true,
        Setting::Rule => g.stride == (1, 1) && g.h * g.w * 10 >= l * MIN_WASTE,
    }
}

#[cfg(test)]
mod tests {
    use super::{takes, Setting};
    use liandan_tensor::{ConvGeometry, DType};

    fn geometry(h: usize, padding: usize, stride: usize, n: usize) -> ConvGeometry {
        ConvGeometry { n, c: 64, h, w: h, o: 512, kernel: (3, 3), stride: (stride, stride), padding: (padding, padding), dilation: (1, 1), groups: 1 }
    }

    /// The rule takes seed003_cnn's unpadded 13 x 13 convolution, not mnist_cnn's 26 x 26 one,
    /// a padded or strided one, nor columns past the cap; the settings override it.
    #[test]
    fn the_rule_takes_convolutions_mostly_padding() {
        let rule = |g: ConvGeometry| takes(Setting::Rule, &g, DType::F32);
        assert!(rule(geometry(13, 0, 1, 128)));
        assert!(!rule(geometry(26, 0, 1, 64)));
        assert!(!rule(geometry(13, 1, 1, 128)));
        assert!(!rule(geometry(13, 0, 2, 128)));
        // 64 * 9 * 121 f32s an image: 1,000 images pass 256 MiB.
        assert!(!rule(geometry(13, 0, 1, 1000)));
        assert!(takes(Setting::All, &geometry(13, 1, 2, 128), DType::F32));
        assert!(!takes(Setting::Off, &geometry(13, 0, 1, 128), DType::F32));
        assert!(!takes(Setting::All, &geometry(13, 0, 1, 128), DType::F16));
    }
}
