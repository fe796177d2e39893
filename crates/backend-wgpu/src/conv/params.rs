//! The parameter blocks of the convolution kernels.

use crate::matmul::ProductParams;
use crate::plan::MAX_PHASES;

crate::shader_params! {
    /// One product of `shaders/conv.wgsl` (tiled or on cooperative matrices): the product's
    /// fields as matmul's (the parts the two share read them), then the convolution's geometry
    /// and layout.
    pub(crate) struct ConvParams {
        /// `batch`: G, the products, one a group.
        pub product: ProductParams,
        /// N.
        pub images: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
        pub o: u32,
        /// The taps (a phase's in the input gradient).
        pub kh: u32,
        pub kw: u32,
        pub stride_h: u32,
        pub stride_w: u32,
        /// Signed (as bits) in the input gradient: a phase's tap shift.
        pub pad_h: u32,
        pub pad_w: u32,
        pub dil_h: u32,
        pub dil_w: u32,
        pub out_h: u32,
        pub out_w: u32,
        pub groups: u32,
        /// The b and a operands' offsets.
        pub b_base: u32,
        pub a_base: u32,
        /// P and RS: output element (m, n) of a group is at m * P + (n / P) * RS + n % P.
        pub out_p: u32,
        pub out_rs: u32,
        /// Per group strides of a, b and y.
        pub a_group_stride: u32,
        pub b_group_stride: u32,
        pub y_group_stride: u32,
        /// The output's size (a split's stride in the partial sums).
        pub total: u32,
        /// The gathered operand g (conv/taps.wgsl): its channels per group, channel and image strides, height and width.
        pub g_channels: u32,
        pub g_channel_stride: u32,
        pub g_image_stride: u32,
        pub g_h: u32,
        pub g_w: u32,
        /// The column grid's width and size.
        pub cols_w: u32,
        pub cols: u32,
        /// L = out_h * out_w, and the strides of dy and x (weight gradient).
        pub l: u32,
        pub dy_image_stride: u32,
        pub x_image_stride: u32,
        pub x_channel_stride: u32,
        pub taps: u32,
        /// PHASE: the steps in y between a phase's rows and columns, and its first pixel.
        pub phase_row_step: u32,
        pub phase_col_step: u32,
        pub phase_first: u32,
        pub bias_offset: u32,
        /// Every phase in one dispatch (`conv/phases.wgsl`): per phase of each axis, its taps
        /// (low 16 bits) and its tap shift (high 16, signed).
        pub phase_y: [u32; MAX_PHASES],
        pub phase_x: [u32; MAX_PHASES],
    }
}

crate::shader_params! {
    /// A Winograd stage over patches (`shaders/conv/winograd/*/input.wgsl`, `dy.wgsl`):
    /// `channels` x `patches` invocations over tiles (`tiles` an image, `tiles_w` a row) of an
    /// `h` x `w` image at `offset`, with `pad` rows and columns of zeros around it.
    pub(crate) struct WinogradPatch {
        pub invocations: u32,
        pub patches: u32,
        pub tiles: u32,
        pub tiles_w: u32,
        pub h: u32,
        pub w: u32,
        pub offset: u32,
        pub channels: u32,
        pub pad: u32,
    }
}

crate::shader_params! {
    /// The Winograd output transform (`shaders/conv/winograd/*/output.wgsl`): as
    /// [`WinogradPatch`], into `channels` of an `h` x `w` y.
    pub(crate) struct WinogradOutput {
        pub invocations: u32,
        pub patches: u32,
        pub tiles: u32,
        pub tiles_w: u32,
        pub h: u32,
        pub w: u32,
        pub channels: u32,
    }
}

crate::shader_params! {
    /// The Winograd filter transform (`shaders/conv/winograd/taps.wgsl`): `m` x `k` kernels
    /// of w at `offset`.
    pub(crate) struct WinogradKernel {
        pub invocations: u32,
        pub m: u32,
        pub k: u32,
        pub offset: u32,
    }
}

crate::shader_params! {
    /// The Winograd weight gradient's last stage: its invocations only.
    pub(crate) struct WinogradInvocations {
        pub invocations: u32,
    }
}
