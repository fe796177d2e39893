//! The convolution kernels' keys: the tiled implicit GEMM ([`Key`]), its form on cooperative
//! matrices ([`CoopKey`]), each with the WGSL it assembles (see `conv.rs` for the kernels,
//! `plan/conv.rs` for which runs).

use liandan_tensor::DType;

use super::params::ConvParams;
use crate::kernels::{KernelKey, Wgsl};
use crate::matmul::coop::{AS_IS, MATMUL_COOP, OUT_SCALED, OUT_SCALED_PARTIAL, RAW_SCALED, ROWS_NONE as COOP_ROWS_NONE, SCALED, STORE_ROUNDED};
use crate::matmul::{read_a, read_b, write_y, LOAD_A, NO_BIAS, TILE};
use crate::packed::with_words;
use crate::plan::{packs_y, Load, Pass, Variant};
use crate::repr::Repr;

const CONV: &str = include_str!("../shaders/conv.wgsl");
const TAPS: &str = include_str!("../shaders/conv/taps.wgsl");
const GATHER: &str = include_str!("../shaders/conv/gather.wgsl");
const GATHER_COOP: &str = include_str!("../shaders/conv/gather_coop.wgsl");
const WEIGHT_DY_COOP: &str = include_str!("../shaders/conv/weight_dy_coop.wgsl");
const WEIGHT_X_COOP: &str = include_str!("../shaders/conv/weight_x_coop.wgsl");
const WEIGHT_DY: &str = include_str!("../shaders/conv/weight_dy.wgsl");
const WEIGHT_TAPS: &str = include_str!("../shaders/conv/weight_taps.wgsl");
const WEIGHT_X: &str = include_str!("../shaders/conv/weight_x.wgsl");
const BIAS: &str = include_str!("../shaders/conv/bias.wgsl");
const BIAS_PACKED: &str = include_str!("../shaders/conv/bias_packed.wgsl");
const BIAS_COOP: &str = include_str!("../shaders/conv/bias_coop.wgsl");
const PHASES: &str = include_str!("../shaders/conv/phases.wgsl");
const ONE_PHASE: &str = include_str!("../shaders/conv/one_phase.wgsl");

/// The parameter block of a kernel over one product, or over every phase at once (`phases`:
/// the launcher's block is `p0`, from which `conv/phases.wgsl` fills in each phase's `p`).
fn with_params(w: Wgsl<'_>, phases: bool) -> Wgsl<'_> {
    match phases {
        true => w.params_as::<ConvParams>("p0").part(PHASES),
        false => w.params::<ConvParams>().part(ONE_PHASE),
    }
}

/// One compiled convolution variant (see `kernels::KernelKey`): `h` = 1 gives 64 x 64 tiles,
/// 2 gives 128 x 128 (`plan/conv_cut.rs` chooses); `a4`: a read in aligned vec4s; `aligned`:
/// the gathered channels per group are a multiple of 16 (forward and input gradient); `out4`:
/// y written in vec4s; `partial`: unrounded partial sums over a split of K. Input gradient
/// only: `phase`, the output is one phase's pixels, a stride apart; `phases`: and the dispatch
/// runs every phase (`conv/phases.wgsl`). `packed`: a and
/// b are bf16 held two to a word (`packed.rs`), widened as they are read; y is packed too
/// where it is written whole in vec4s (`out4`, not `partial`). `bias`: the forward adds a
/// bias (packed where a and b are) to each output channel as it stores y (rounded results
/// only); `relu`: and ReLU after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) pass: Pass,
    pub(crate) dtype: DType,
    pub(crate) h: u32,
    pub(crate) a4: bool,
    pub(crate) aligned: bool,
    pub(crate) out4: bool,
    pub(crate) partial: bool,
    pub(crate) phase: bool,
    pub(crate) phases: bool,
    pub(crate) packed: bool,
    pub(crate) bias: bool,
    pub(crate) relu: bool,
}

impl KernelKey for Key {
    fn source(&self, repr: &Repr) -> String {
        let k = *self;
        let out = if k.partial { include_str!("../shaders/matmul/out_partial.wgsl") } else { include_str!("../shaders/matmul/out_rounded.wgsl") };
        let write = write_y(k.out4, packs_y(k.packed, k.out4, k.partial));
        // As matmul: 64 x 64 f32 tiles afford a vec4 of padding per row within 16 KiB.
        let pad = k.h == 1;
        let w = with_params(Wgsl::new(repr), k.phases)
            .ty("x", k.dtype)
            .uint("H", k.h)
            .uint("PAD", pad as u32)
            .flag("OUT4", k.out4)
            .flag("UNROLL", k.dtype == DType::F32);
        // Slices fetched with their tests everywhere: untested fetches inside the operands made
        // resnet18's f32 step 2% slower.
        let w = w.flag("FETCH_INSIDE", false);
        let w = w.flag("PHASE", k.phase).flag("RELU", k.relu);
        let w = if k.packed { with_words(w) } else { w };
        let w = w.part(read_a(k.a4, k.packed)).part(read_b(false, k.packed)).part(out).part(write).part(epilogue(k.bias, k.packed)).part(TILE);
        let w = match k.pass {
            Pass::Forward | Pass::Input => {
                let w = w.uint("A_LOAD", if k.a4 { 0 } else { 2 }).flag("ALIGNED", k.aligned).flag("TRANSPOSED", k.pass == Pass::Input);
                w.part(LOAD_A).part(TAPS).part(GATHER)
            }
            Pass::Weight => w.flag("A4", k.a4).part(WEIGHT_DY).part(WEIGHT_TAPS).part(WEIGHT_X),
        };
        w.part(CONV).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let mut all = Vec::new();
        for dtype in [DType::F32, DType::F16, DType::BF16].into_iter().filter(|&d| repr.computes(d)) {
            for pass in [Pass::Forward, Pass::Input, Pass::Weight] {
                let aligned: &[bool] = if pass == Pass::Weight { &[false] } else { &[false, true] };
                // A phase's pixels are not neighbours, so it writes scalars.
                let phases: &[bool] = if pass == Pass::Input { &[false, true] } else { &[false] };
                for h in [1, 2] {
                    for a4 in [false, true] {
                        for &aligned in aligned {
                            for &phase in phases {
                                for out4 in [false, true].into_iter().filter(|&o| !(o && phase)) {
                                    for partial in [false, true] {
                                        for packed in [false, true].into_iter().filter(|&p| !p || dtype == DType::BF16) {
                                            let biases: &[bool] = if pass == Pass::Forward && !partial { &[false, true] } else { &[false] };
                                            for &bias in biases {
                                                let relus: &[bool] = if bias { &[false, true] } else { &[false] };
                                                for &relu in relus {
                                                    let key = Key { pass, dtype, h, a4, aligned, out4, partial, phase, phases: false, packed, bias, relu };
                                                    all.push(key);
                                                    if phase && !packed {
                                                        all.push(Key { phases: true, ..key });
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        all
    }
}

/// One compiled convolution variant on cooperative matrices (f16 on tensor cores, where
/// `coop.rs` found the adapter able): a pass as the product of `matmul_coop.wgsl` on the tiles
/// of `variant`, with the loaders of the module docs. `a4`, `partial` and `phase` as
/// in [`Key`], and `phases`; y is written in scalars, through workgroup memory. `scaled`: f32 operands,
/// scaled and rounded to f16 as they are fetched, and f32 results (see the module docs);
/// `packed` (scaled only): the operands are packed bf16, widened as they are fetched (y is
/// written in f32 words and packed after). `bias` (a forward of f16 y, K not split): the bias
/// added to each output channel as y is stored (`conv/bias_coop.wgsl`); `relu`: and ReLU after.
/// `plan/conv.rs` says which passes run here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CoopKey {
    pub(crate) pass: Pass,
    pub(crate) variant: Variant,
    pub(crate) a4: bool,
    pub(crate) partial: bool,
    pub(crate) phase: bool,
    pub(crate) phases: bool,
    pub(crate) scaled: bool,
    pub(crate) packed: bool,
    pub(crate) bias: bool,
    pub(crate) relu: bool,
}

impl KernelKey for CoopKey {
    fn source(&self, repr: &Repr) -> String {
        let k = *self;
        let raw_a = if k.a4 { include_str!("../shaders/matmul_coop/raw_a4.wgsl") } else { include_str!("../shaders/matmul_coop/raw_a.wgsl") };
        // The weight gradient's dy loader stages K-major vec4s either way (DY4 or not); the
        // weights of the other passes are staged through the strided loader unless read in vec4s.
        let a = if k.a4 || k.pass == Pass::Weight { Load::K } else { Load::Strided };
        // Every sum goes out through workgroup memory (out_at is not row-major), rounded,
        // partial or scaled back.
        let raw_b = include_str!("../shaders/matmul_coop/raw_b.wgsl");
        let (out, raws) = match (k.scaled, k.partial) {
            (true, true) => (OUT_SCALED_PARTIAL, [RAW_SCALED, SCALED]),
            (true, false) => (OUT_SCALED, [RAW_SCALED, SCALED]),
            (false, true) => (include_str!("../shaders/matmul/out_partial.wgsl"), [raw_a, raw_b]),
            (false, false) => (include_str!("../shaders/matmul/out_rounded.wgsl"), [raw_a, raw_b]),
        };
        let (sgm, sgn) = k.variant.subgroups();
        let (a_vecs, b_vecs) = k.variant.staged_vecs(a, Load::Outer);
        let w = with_params(Wgsl::new(repr), k.phases).enable("wgpu_cooperative_matrix");
        // Scaled: f32 elements, f16 as they are fetched.
        let w = if k.scaled { w.enable("f16").ty("x", DType::F32) } else { w.ty("x", DType::F16) };
        let w = w
            .uint("A_LOAD", if a == Load::K { 0 } else { 2 })
            .uint("B_LOAD", 1)
            .flag("DY4", k.a4)
            .uint("SGM", sgm)
            .uint("SGN", sgn)
            .uint("FM", k.variant.fragment_rows())
            .flag("PAIRS", false)
            .flag("RELU", k.relu);
        let w = w.uint("A_VECS", a_vecs).uint("B_VECS", b_vecs);
        let w = w.flag("TRANSPOSED", k.pass == Pass::Input).flag("PHASE", k.phase);
        let w = if k.packed { with_words(w) } else { w };
        let w = w.part(read_a(k.a4, k.packed)).part(read_b(false, k.packed)).part(out).part(include_str!("../shaders/matmul/write.wgsl"));
        let w = w.part(raws[0]).part(raws[1]);
        let w = if k.scaled { w } else { w.part(STORE_ROUNDED) };
        let w = w.part(if k.bias { BIAS_COOP } else { AS_IS }).part(COOP_ROWS_NONE);
        let w = match k.pass {
            Pass::Forward | Pass::Input => w.part(include_str!("../shaders/matmul_coop/a_fetch.wgsl")).part(TAPS).part(GATHER_COOP),
            Pass::Weight => w.part(WEIGHT_DY_COOP).part(WEIGHT_TAPS).part(WEIGHT_X_COOP),
        };
        w.part(MATMUL_COOP).part(CONV).build()
    }

    fn all(repr: &Repr) -> Vec<CoopKey> {
        // As matmul_coop's: only a device holding f16 natively builds these.
        if !repr.f16 {
            return Vec::new();
        }
        let mut all = Vec::new();
        for pass in [Pass::Forward, Pass::Input, Pass::Weight] {
            let phases: &[bool] = if pass == Pass::Input { &[false, true] } else { &[false] };
            let a4s: &[bool] = &[false, true];
            for variant in [Variant::Prefetch, Variant::Short, Variant::Many, Variant::Tall] {
                for &a4 in a4s {
                    for partial in [false, true] {
                        for &phase in phases {
                            for (scaled, packed) in [(false, false), (true, false), (true, true)] {
                                let key = CoopKey { pass, variant, a4, partial, phase, phases: false, scaled, packed, bias: false, relu: false };
                                all.push(key);
                                if phase && !packed {
                                    all.push(CoopKey { phases: true, ..key });
                                }
                                if pass == Pass::Forward && !partial && !scaled {
                                    all.extend([false, true].map(|relu| CoopKey { bias: true, relu, ..key }));
                                }
                            }
                        }
                    }
                }
            }
        }
        all
    }
}

/// The epilogue: the forward's bias (packed or as stored), or none.
fn epilogue(bias: bool, packed: bool) -> &'static str {
    match (bias, packed) {
        (false, _) => NO_BIAS,
        (true, false) => BIAS,
        (true, true) => BIAS_PACKED,
    }
}
