//! Hooks for this workspace's tests and benchmarks: counters of what ran, and knobs that
//! force one kernel or cut where the rules would pick another, so that each can be checked and
//! timed. Not for programs: the rules pick the fastest kernels they know.

pub use crate::gpu::{dispatches_recorded, host_phases, HostPhases, UPLOAD_LIMIT};
pub use crate::matmul::heads_products_recorded;

/// Knobs of [`crate::WgpuOptions`] for tests and benchmarks. The defaults are what programs run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// Dispatches in the first batch submitted after a wait, 1 to 512 (see `gpu.rs`; 512
    /// submits in full batches only). Applies when the device opens.
    pub first_batch: usize,
    /// Dispatches the ramp grows a batch to, 1 to 512 (never below `first_batch`). Applies when
    /// the device opens.
    pub ramp_top: usize,
    /// The meta blocks travel as immediate data where the device has room for one (else in
    /// the arena buffer). Applies when the device opens.
    pub immediates: bool,
    /// A storage binding limit (bytes, at least 65,536) below the adapter's, so the paths for
    /// buffers past it can be tried on any GPU. Applies when the device opens.
    pub max_binding: Option<u64>,
    /// Submits and waits are timed into [`host_phases`].
    pub host_phases: bool,
    /// Every convolution pass on the tiled kernels cut into `(tile, splits)`: tiles of 128
    /// (any other value means 64) and K in that many ranges (at least one, at most one per
    /// 16-deep slice; halved while the partial sums would not fit one binding). Winograd, the
    /// column buffer and the autotune then stay off, so what runs is the implicit GEMM so cut.
    pub conv_cut: Option<(usize, usize)>,
    /// f32 input gradients through the column buffer: every one it takes (`Some(true)`), none
    /// (`Some(false)`), or as its rule says.
    pub conv_fold: Option<bool>,
    /// Every f32 convolution Winograd takes on tiles of 2 x 2 or 4 x 4 outputs (`Some(2)`,
    /// `Some(4)`), none (`Some(0)`), or as its rule says.
    pub conv_winograd: Option<usize>,
    /// Bytes of the images a Winograd weight gradient takes at once (at least one image).
    pub winograd_chunk: Option<usize>,
    /// f32 passes of every size go on the tensor cores under `conv_tf32`, the small ones too.
    pub tf32_any_size: bool,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            first_batch: crate::gpu::FIRST_BATCH,
            ramp_top: crate::gpu::RAMP_TOP,
            immediates: true,
            max_binding: None,
            host_phases: false,
            conv_cut: None,
            conv_fold: None,
            conv_winograd: None,
            winograd_chunk: None,
            tf32_any_size: false,
        }
    }
}

impl Knobs {
    /// Whether `self` and `other` differ in what applies when the device opens.
    pub(crate) fn differ_at_open(&self, other: &Knobs) -> bool {
        (self.first_batch, self.ramp_top, self.immediates, self.max_binding) != (other.first_batch, other.ramp_top, other.immediates, other.max_binding)
    }
}
