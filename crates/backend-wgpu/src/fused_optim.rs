//! Fused optimizer updates ([`FusedOp::AdamStep`], [`FusedOp::SgdStep`],
//! [`FusedOp::RmsPropStep`], [`FusedOp::AdagradStep`], [`FusedOp::AdadeltaStep`], and the loss
//! scaler's [`FusedOp::Scale`], which has no gradient operand): one dispatch
//! per parameter tensor, reading the parameter, its gradient and its state once and writing
//! their new values to fresh buffers (the update contract of `liandan_tensor::fused`). One
//! pipeline per dtype and option set (amsgrad, momentum, centered); everything that varies per
//! step (lr, bias corrections) rides in the dispatch's parameter block.
//!
//! The same kernels over many tensors per dispatch are `fused_foreach.rs`'s.

use std::sync::Arc;

use liandan_tensor::{AdadeltaStep, AdagradStep, AdamStep, DType, FusedOp, Result, RmsPropStep, SgdStep, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::fused_foreach;
use crate::kernels::{grid, KernelKey, Wgsl};
use crate::repr::Repr;

const HELPERS: &str = include_str!("shaders/fused_optim.wgsl");
const GRADIENT: &str = include_str!("shaders/fused_optim_gradient.wgsl");
const ADAM: &str = include_str!("shaders/fused_adam_step.wgsl");
const ADAM_AMSGRAD: &str = include_str!("shaders/fused_adam_amsgrad.wgsl");
const ADAM_PLAIN: &str = include_str!("shaders/fused_adam_plain.wgsl");
const SGD: &str = include_str!("shaders/fused_sgd_step.wgsl");
const SGD_MOMENTUM: &str = include_str!("shaders/fused_sgd_momentum.wgsl");
const SGD_PLAIN: &str = include_str!("shaders/fused_sgd_plain.wgsl");
const RMSPROP: &str = include_str!("shaders/fused_rmsprop_step.wgsl");
const RMSPROP_MOMENTUM: &str = include_str!("shaders/fused_rmsprop_momentum.wgsl");
const RMSPROP_PLAIN: &str = include_str!("shaders/fused_rmsprop_plain.wgsl");
const RMSPROP_CENTERED: &str = include_str!("shaders/fused_rmsprop_centered.wgsl");
const RMSPROP_UNCENTERED: &str = include_str!("shaders/fused_rmsprop_uncentered.wgsl");
const ADAGRAD: &str = include_str!("shaders/fused_adagrad_step.wgsl");
const ADADELTA: &str = include_str!("shaders/fused_adadelta_step.wgsl");
const SCALE: &str = include_str!("shaders/fused_scale.wgsl");
const ONE: &str = include_str!("shaders/fused_optim_one.wgsl");

/// Which optimizer's update a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Rule {
    Adam,
    Sgd,
    RmsProp,
    Adagrad,
    Adadelta,
    Scale,
}

impl Rule {
    /// The inputs every step of the rule has (the parameter, its gradient, the state that is
    /// always kept); each has an output but the gradient ([`Rule::fixed_outputs`]).
    pub(crate) fn fixed(self) -> usize {
        match self {
            Rule::Scale => 1,
            Rule::Sgd => 2,
            Rule::RmsProp | Rule::Adagrad => 3,
            Rule::Adam | Rule::Adadelta => 4,
        }
    }

    /// The outputs of the fixed inputs: all but the gradient's (`Scale` has none).
    pub(crate) fn fixed_outputs(self) -> usize {
        match self {
            Rule::Scale => 1,
            _ => self.fixed() - 1,
        }
    }

    /// The input slots the kernel reads offsets for, the optional ones included.
    pub(crate) fn slots(self) -> usize {
        match self {
            Rule::Scale => 1,
            Rule::Sgd => 3,
            Rule::Adagrad => 3,
            Rule::Adadelta => 4,
            Rule::Adam | Rule::RmsProp => 5,
        }
    }
}

/// One fused update kernel variant (see `kernels::KernelKey`): the rule, with or without its
/// optional state (`stateful`: amsgrad for Adam, momentum for SGD and RMSprop; `centered`:
/// RMSprop's gradient average), over `dtype`, for one tensor (`width` 0) or for up to
/// `width` tensors a dispatch (`fused_foreach.rs`), writing fresh buffers or (`in_place`,
/// multi-tensor only) over the inputs it updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) rule: Rule,
    pub(crate) stateful: bool,
    pub(crate) centered: bool,
    pub(crate) dtype: DType,
    pub(crate) width: u8,
    pub(crate) in_place: bool,
}

impl Key {
    /// The buffers one tensor's update binds: each input, and an output for each but the
    /// gradient (in place: each input only).
    pub(crate) fn bindings(&self) -> usize {
        let optional = self.stateful as usize + self.centered as usize;
        let inputs = self.rule.fixed() + optional;
        if self.in_place {
            inputs
        } else {
            inputs + self.rule.fixed_outputs() + optional
        }
    }
}

impl KernelKey for Key {
    /// The helpers, the step, and the parts that the option set picks.
    fn source(&self, repr: &Repr) -> String {
        let w = Wgsl::new(repr).ty("x", self.dtype);
        let pick = |on: bool, yes: &'static str, no: &'static str| if on { yes } else { no };
        let parts: &[&'static str] = match self.rule {
            Rule::Adam => &[GRADIENT, ADAM, pick(self.stateful, ADAM_AMSGRAD, ADAM_PLAIN)],
            Rule::Sgd => &[GRADIENT, SGD, pick(self.stateful, SGD_MOMENTUM, SGD_PLAIN)],
            Rule::RmsProp => {
                &[GRADIENT, RMSPROP, pick(self.stateful, RMSPROP_MOMENTUM, RMSPROP_PLAIN), pick(self.centered, RMSPROP_CENTERED, RMSPROP_UNCENTERED)]
            }
            Rule::Adagrad => &[GRADIENT, ADAGRAD],
            Rule::Adadelta => &[GRADIENT, ADADELTA],
            // No gradient operand: the tensor it scales is its only one.
            Rule::Scale => &[SCALE],
        };
        // The gradient average's bindings come after the momentum buffer's, when it has them.
        let w = if self.centered { w.uint("GRAD_AVG", if self.stateful { 8 } else { 6 }) } else { w };
        if self.width > 0 {
            let body = [&[HELPERS], parts].concat().join("\n");
            let body = if self.in_place { fused_foreach::in_place(&body) } else { body };
            return fused_foreach::source(w, &body, self.width as usize, self.bindings());
        }
        parts.iter().fold(w.part(HELPERS), |w, p| w.part(p)).part(ONE).build()
    }

    fn all(repr: &Repr) -> Vec<Key> {
        let (f, t) = (false, true);
        let options = [
            (Rule::Adam, f, f),
            (Rule::Adam, t, f),
            (Rule::Sgd, f, f),
            (Rule::Sgd, t, f),
            (Rule::RmsProp, f, f),
            (Rule::RmsProp, t, f),
            (Rule::RmsProp, f, t),
            (Rule::RmsProp, t, t),
            (Rule::Adagrad, f, f),
            (Rule::Adadelta, f, f),
            (Rule::Scale, f, f),
        ];
        let keys = options
            .into_iter()
            .flat_map(|(rule, stateful, centered)| DType::ALL.map(|dtype| Key { rule, stateful, centered, dtype, width: 0, in_place: false }));
        let keys: Vec<Key> = keys.filter(|k| repr.computes(k.dtype) && k.dtype != DType::F64).collect();
        let wide = [false, true].into_iter().flat_map(|in_place| {
            keys.iter().flat_map(move |k| {
                let k = Key { in_place, ..*k };
                fused_foreach::widths(k.bindings()).into_iter().map(move |w| Key { width: w as u8, ..k })
            })
        });
        keys.iter().copied().chain(wide).collect()
    }
}

/// f32 bits of a hyper-parameter, for the parameter block.
fn bits(x: f64) -> u32 {
    (x as f32).to_bits()
}

/// Flag words from `(bit, on)` pairs.
fn flags(pairs: &[(u32, bool)]) -> u32 {
    pairs.iter().filter(|p| p.1).map(|p| p.0).sum()
}

/// What a step's parameter block and bindings need: the rule, its flag word, its
/// hyper-parameter words, and which optional state it has (`stateful`, `centered`).
pub(crate) struct Meta {
    pub(crate) rule: Rule,
    pub(crate) flags: u32,
    pub(crate) hyper: Vec<u32>,
    pub(crate) stateful: bool,
    pub(crate) centered: bool,
}

/// `(flags, hyper-parameter words, stateful)` of an Adam step; see `fused_adam_step.wgsl`.
fn adam_meta(a: &AdamStep) -> (u32, Vec<u32>, bool) {
    let (step_size, bias_correction2_sqrt) = a.corrections();
    let f = flags(&[(1, a.maximize), (2, a.weight_decay != 0.0), (4, a.decoupled_weight_decay), (8, (1.0 - a.beta1).abs() < 0.5)]);
    let w = 1.0 - a.beta1;
    let hyper = [a.weight_decay, 1.0 - a.lr * a.weight_decay, w, 1.0 - w, a.beta2, 1.0 - a.beta2, bias_correction2_sqrt, a.eps, -step_size];
    (f, hyper.map(bits).to_vec(), a.amsgrad)
}

/// `(flags, hyper-parameter words, stateful)` of an SGD step; see `fused_sgd_step.wgsl`.
fn sgd_meta(s: &SgdStep) -> (u32, Vec<u32>, bool) {
    let f = flags(&[(1, s.maximize), (2, s.weight_decay != 0.0), (4, s.first), (8, s.nesterov), (16, s.dampening != 0.0)]);
    (f, [s.weight_decay, s.momentum, 1.0 - s.dampening, s.lr].map(bits).to_vec(), s.momentum != 0.0)
}

/// An RMSprop step's meta; see `fused_rmsprop_step.wgsl`.
fn rmsprop_meta(r: &RmsPropStep) -> Meta {
    let flags = flags(&[(1, r.maximize), (2, r.weight_decay != 0.0), (4, (1.0 - r.alpha).abs() < 0.5)]);
    let hyper = [r.weight_decay, r.alpha, 1.0 - r.alpha, 1.0 - (1.0 - r.alpha), r.eps, r.momentum, -r.lr].map(bits).to_vec();
    Meta { rule: Rule::RmsProp, flags, hyper, stateful: r.momentum > 0.0, centered: r.centered }
}

/// An Adagrad step's meta; see `fused_adagrad_step.wgsl`.
fn adagrad_meta(a: &AdagradStep) -> Meta {
    let flags = flags(&[(1, a.maximize), (2, a.weight_decay != 0.0)]);
    Meta { rule: Rule::Adagrad, flags, hyper: [a.weight_decay, a.eps, -a.clr()].map(bits).to_vec(), stateful: false, centered: false }
}

/// An Adadelta step's meta; see `fused_adadelta_step.wgsl`.
fn adadelta_meta(a: &AdadeltaStep) -> Meta {
    let flags = flags(&[(1, a.maximize), (2, a.weight_decay != 0.0)]);
    let hyper = [a.weight_decay, a.rho, 1.0 - a.rho, a.eps, -a.lr].map(bits).to_vec();
    Meta { rule: Rule::Adadelta, flags, hyper, stateful: false, centered: false }
}

/// The meta of an update op, or `None` for the ops that are not updates.
pub(crate) fn meta(op: &FusedOp) -> Option<Meta> {
    let plain = |rule, (flags, hyper, stateful)| Meta { rule, flags, hyper, stateful, centered: false };
    Some(match op {
        FusedOp::AdamStep(a) => plain(Rule::Adam, adam_meta(a)),
        FusedOp::SgdStep(s) => plain(Rule::Sgd, sgd_meta(s)),
        FusedOp::RmsPropStep(r) => rmsprop_meta(r),
        FusedOp::AdagradStep(a) => adagrad_meta(a),
        FusedOp::AdadeltaStep(a) => adadelta_meta(a),
        FusedOp::Scale(factor) => Meta { rule: Rule::Scale, flags: 0, hyper: vec![bits(*factor)], stateful: false, centered: false },
        _ => return None,
    })
}

impl WgpuBackend {
    /// Runs an update op as one dispatch, or `None` where this backend leaves it to the
    /// composite (f64, which the composite runs at full precision; buffers beyond one binding).
    pub(crate) fn fused_update(&self, op: &FusedOp, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let Meta { rule, flags: flag_word, hyper, stateful, centered } = meta(op)?;
        let first = inputs.first()?;
        let (dtype, numel) = (first.dtype, first.layout.numel());
        let fixed = rule.fixed();
        if !self.repr.computes(dtype) || dtype == DType::F64 || inputs.len() != fixed + stateful as usize + centered as usize {
            return None;
        }
        let gpu = match self.fused_gpu(dtype, &[numel], inputs)? {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        // Offsets of every input slot the kernel names, in slot order (an absent optional
        // one reads as 0): the fixed inputs, then the optional state in the order it comes.
        let mut meta = vec![numel as u32, flag_word];
        let mut optional = inputs[fixed..].iter();
        let present = [stateful, centered];
        for k in 0..rule.slots() {
            let input = if k < fixed {
                inputs.get(k)
            } else if present[k - fixed] {
                optional.next()
            } else {
                None
            };
            meta.push(input.map_or(Some(0), |v| u32::try_from(v.layout.offset()).ok())?);
        }
        meta.extend(hyper);
        Some((|| {
            let kernel = gpu.kernel(Key { rule, stateful, centered, dtype, width: 0, in_place: false })?;
            let outs = (0..op.outputs()).map(|_| self.output(dtype, numel)).collect::<Result<Vec<_>>>()?;
            // Bindings: the fixed inputs, their outputs (all but the gradient's), then each
            // optional state's input and output (so an option's WGSL part adds its two last).
            let mut buffers: Vec<&wgpu::Buffer> = inputs[..fixed].iter().map(|v| gpu_storage(v).buffer()).collect();
            let kept = rule.fixed_outputs();
            buffers.extend(outs[..kept].iter().map(|o| o.buffer()));
            for (input, out) in inputs[fixed..].iter().zip(&outs[kept..]) {
                buffers.push(gpu_storage(input).buffer());
                buffers.push(out.buffer());
            }
            gpu.dispatch(&kernel, &meta, &buffers, grid(numel))?;
            Ok(outs.into_iter().map(|o| Arc::new(o) as Storage).collect())
        })())
    }
}
