//! `ops::LstmStep`: an LSTM step's recurrent product and its cell as one dispatch
//! (`shaders/lstm_step.wgsl`), for the small steps whose time is latency (the zoo LSTM's `[64,
//! 256] x [256, 1024]` and its cell, two dependent dispatches a step otherwise). f32, f16 and
//! bf16 (summed in f32; packed bf16 read and written as stored, so a step widens and packs
//! nothing), where the product is one the small-product kernel would take
//! (`plan::lstm_step`) and h and W_hh can be read in vec4s; anything else is
//! answered `None` and the composite runs (the product, then `ops::LstmCell` with the two
//! gate terms).

use std::sync::Arc;

use liandan_tensor::{DType, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::fused::RNN;
use crate::kernels::{KernelKey, Wgsl};
use crate::matmul::SMALL_SUMS;
use crate::packed::{all_packed, with_words};
use crate::params::words;
use crate::plan;
use crate::repr::Repr;

const LSTM_STEP: &str = include_str!("shaders/lstm_step.wgsl");
const STORED: &str = include_str!("shaders/lstm_step_io.wgsl");
const PACKED: &str = include_str!("shaders/packed/lstm_step_io.wgsl");
/// Rows and units of the block a workgroup computes (`BM`, `BU` in the shader).
const BLOCK: (usize, usize) = (8, 8);

crate::shader_params! {
    /// The block of `shaders/lstm_step.wgsl`: x_gates `[n, 4h]`, h `[n, h]`, W_hh and c, each
    /// at its element offset.
    struct LstmStepParams {
        n: u32,
        h: u32,
        xg_offset: u32,
        h_offset: u32,
        w_offset: u32,
        c_offset: u32,
    }
}

/// The kernel of one dtype, as stored or (bf16) packed two to a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    dtype: DType,
    packed: bool,
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let wgsl = Wgsl::new(repr).params::<LstmStepParams>().ty("x", self.dtype).flag("PACKED", self.packed);
        let (wgsl, io) = if self.packed { (with_words(wgsl), PACKED) } else { (wgsl, STORED) };
        wgsl.part(RNN).part(SMALL_SUMS).part(io).part(LSTM_STEP).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let stored = DTYPES.into_iter().filter(|&dtype| repr.computes(dtype)).map(|dtype| Key { dtype, packed: false });
        stored.chain([Key { dtype: DType::BF16, packed: true }]).collect()
    }
}

impl WgpuBackend {
    /// Runs `ops::LstmStep` on `x_gates, h, w_hh, c` (see the module docs), or `None`.
    pub(crate) fn fused_lstm_step(&self, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let [xg, h, w, c] = inputs else { return None };
        let &[n, units] = h.layout.shape() else { return None };
        let vec4 = |v: &Strided| v.layout.offset().is_multiple_of(4);
        let dtype = h.dtype;
        let fits = inputs.iter().all(|v| v.dtype == dtype && v.layout.is_contiguous()) && DTYPES.contains(&dtype) && self.repr.computes(dtype);
        // Packed operands (all of them: `fused.rs` widens a mixture) are read as stored.
        let packed = all_packed(inputs);
        if !fits || !plan::lstm_step(n, units, vec4(h) && vec4(w)) {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &[n * 4 * units, 2 * n * units], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let u = |v: usize| u32::try_from(v).ok();
        let block = LstmStepParams {
            n: u(n)?,
            h: u(units)?,
            xg_offset: u(xg.layout.offset())?,
            h_offset: u(h.layout.offset())?,
            w_offset: u(w.layout.offset())?,
            c_offset: u(c.layout.offset())?,
        };
        let meta = words(&block);
        Some((|| {
            let kernel = gpu.kernel(Key { dtype, packed })?;
            let output = |numel| if packed { self.packed_output(numel) } else { self.output(dtype, numel) };
            let (h_gates, out) = (output(n * 4 * units)?, output(2 * n * units)?);
            let buffers = [xg, h, w, c].map(|v| gpu_storage(v).buffer());
            let groups = |count: usize| count.clamp(1, 65_535) as u32;
            let grid = (groups(units.div_ceil(BLOCK.1)), groups(n.div_ceil(BLOCK.0)), 1);
            gpu.dispatch(&kernel, &meta, &[buffers[0], buffers[1], buffers[2], buffers[3], h_gates.buffer(), out.buffer()], grid)?;
            Ok(vec![Arc::new(h_gates) as Storage, Arc::new(out) as Storage])
        })())
    }
}
