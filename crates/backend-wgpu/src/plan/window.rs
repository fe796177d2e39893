//! How max pooling's gradient runs ([`max_pool_backward()`]): windows that tile the input
//! (stride = kernel, no padding or dilation) find each pixel's one window by division; others
//! loop over every window that could cover a pixel. On the H200 seed003_cnn's 2 x 2 pool over
//! `[128, 512, 11, 11]` took 47 us a call by division and 65 as the loop, the composite's
//! scatter-add 57 after a zero fill.

use liandan_tensor::backend::Window2d;

/// Which kernel computes max pooling's gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolBackward {
    /// Each pixel's one window, found by division.
    Tiles,
    /// Each pixel looks through every window that could cover it.
    Windows,
}

/// The kernel of max pooling's gradient over windows `w`.
pub(crate) fn max_pool_backward(w: &Window2d) -> PoolBackward {
    match w.stride == w.kernel && w.padding == (0, 0) && w.dilation == (1, 1) {
        true => PoolBackward::Tiles,
        false => PoolBackward::Windows,
    }
}

#[cfg(test)]
mod tests {
    use super::{max_pool_backward, PoolBackward, Window2d};

    fn window(hw: usize, k: usize, s: usize, p: usize) -> Window2d {
        Window2d { n: 128, c: 64, h: hw, w: hw, kernel: (k, k), stride: (s, s), padding: (p, p), dilation: (1, 1) }
    }

    /// The zoo's pools (mnist_cnn's and seed003_cnn's 2 x 2 of stride 2) tile their input;
    /// a pool of stride 1, or padded, loops.
    #[test]
    fn the_zoo_pools_tile_their_input() {
        assert_eq!(max_pool_backward(&window(24, 2, 2, 0)), PoolBackward::Tiles, "mnist_cnn");
        assert_eq!(max_pool_backward(&window(11, 2, 2, 0)), PoolBackward::Tiles, "seed003_cnn");
        assert_eq!(max_pool_backward(&window(32, 3, 2, 1)), PoolBackward::Windows);
        assert_eq!(max_pool_backward(&window(32, 2, 1, 0)), PoolBackward::Windows);
    }
}
