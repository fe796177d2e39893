//! A whole LSTM direction as one op ([`LstmSequence`]), for devices that run the recurrence in
//! one kernel: every step's product, cell and state in one call, each step's activated gates
//! kept for backward, and backward as one kernel too ([`LstmSequenceBackward`]) followed by
//! one product for the recurrent weight's gradient (as cuDNN's and oneDNN's RNN layers do).
//! Devices without the kernels run the steps as ops ([`Tensor::lstm_step`]).

use std::sync::Arc;

use crate::autograd::GradFn;
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::fused;
use crate::tensor::Tensor;

impl Tensor {
    /// One LSTM direction over a sequence as one kernel, where the device has one; `None`
    /// otherwise (the caller runs the steps). `x_gates` `[L, N, 4H]` is the input projection
    /// of every step with both biases (`x W_ih^T + b_ih + b_hh`), `w_hh` the recurrent weight
    /// `[4H, H]` as stored, `h0` and `c0` the states `[N, H]`; `zero_state` says `h0` is
    /// zeros (its product is skipped). Steps run from position 0, or from L - 1 when `reverse`.
    ///
    /// Returns `states` `[L + 1, N, H]`: the output of the step at each position, then the
    /// last step's cell state. Gradients reach `x_gates`, `w_hh`, `h0` and `c0`.
    pub fn lstm_sequence(x_gates: &Tensor, w_hh: &Tensor, h0: &Tensor, c0: &Tensor, reverse: bool, zero_state: bool) -> Result<Option<Tensor>> {
        let (n, units) = match (x_gates.shape(), h0.shape()) {
            (&[l, n, g], &[n2, units]) if n == n2 && g == 4 * units && l > 0 => (n, units),
            _ => return Ok(None),
        };
        let shaped = w_hh.shape() == [4 * units, units] && c0.shape() == [n, units];
        let operands = [x_gates, w_hh, h0, c0];
        let plain = operands.iter().all(|t| t.dtype() == x_gates.dtype() && t.device() == x_gates.device() && t.is_contiguous());
        // A tracer (export, anomaly detection) sees the steps as ops.
        if !shaped || !plain || units == 0 || crate::observe::active() {
            return Ok(None);
        }
        let op = LstmSequence { reverse, zero_state };
        let Some(outs) = fused::run(&op, &operands) else { return Ok(None) };
        let mut outs = outs?.into_iter();
        let states = outs.next().expect("three outputs, counted by fused::run");
        let aux: Vec<Tensor> = outs.collect();
        Ok(Some(states.recorded(&operands, move || GradFn::Custom { op: Arc::new(op), aux })))
    }
}

/// The position of the `s`-th step of `l`.
fn position(s: usize, l: usize, reverse: bool) -> usize {
    if reverse {
        l - 1 - s
    } else {
        s
    }
}

/// An LSTM direction over a whole sequence ([`Tensor::lstm_sequence`]), gates in PyTorch's
/// order i, f, g, o. Inputs (contiguous): `x_gates` `[L, N, 4H]`, `w_hh` `[4H, H]`, `h0`,
/// `c0` `[N, H]`. Outputs: `states` `[L + 1, N, H]` (each position's `h`, then the last
/// step's `c`); `act` `[L, N, 4H]`, each step's gates after their activations (σ, σ, tanh,
/// σ); `cells` `[L, N, H]`, each position's `c`. Its gradient is [`LstmSequenceBackward`]
/// and one product for `w_hh`.
#[derive(Clone, Copy, Debug)]
pub struct LstmSequence {
    /// Steps from position L - 1 down to 0.
    pub reverse: bool,
    /// `h0` is zeros: its product is skipped, forward and in `w_hh`'s gradient.
    pub zero_state: bool,
}

impl CustomOp for LstmSequence {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (xg, c0) = (inputs[0], inputs[3]);
        let [l, n, g] = [xg.shape()[0], xg.shape()[1], xg.shape()[2]];
        let h = c0.shape()[1];
        vec![(vec![l + 1, n, h], xg.dtype()), (vec![l, n, g], xg.dtype()), (vec![l, n, h], xg.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (xg, w_hh, h0, c0) = (inputs[0], inputs[1], inputs[2], inputs[3]);
        let l = xg.shape()[0];
        let w_t = w_hh.t()?;
        let (mut h, mut c) = (h0.clone(), c0.clone());
        let (mut hs, mut acts, mut cs) = (vec![None; l], vec![None; l], vec![None; l]);
        for s in 0..l {
            let t = position(s, l, self.reverse);
            let gates = xg.select(0usize, t)?;
            let gates = if s == 0 && self.zero_state { gates } else { gates.add(&h.matmul(&w_t)?)? };
            let a = gates.chunk(4, 1usize)?;
            let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
            c = f.mul(&c)?.add(&i.mul(&g)?)?;
            h = o.mul(&c.tanh()?)?;
            acts[t] = Some(Tensor::cat(&[&i, &f, &g, &o], 1usize)?);
            hs[t] = Some(h.clone());
            cs[t] = Some(c.clone());
        }
        let stack = |v: &[Option<Tensor>]| Tensor::stack(&v.iter().map(|t| t.as_ref().expect("every position ran")).collect::<Vec<_>>(), 0usize);
        hs.push(Some(c));
        Ok(vec![stack(&hs)?, stack(&acts)?, stack(&cs)?])
    }

    /// The states: `w_hh`'s gradient reads each step's output.
    fn reads_output(&self) -> bool {
        true
    }

    /// `x_gates` is read by the forward only.
    fn reads_input(&self, i: usize) -> bool {
        i != 0
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (w_hh, h0, c0) = (&inputs[1], &inputs[2], &inputs[3]);
        let (states, act, cells) = (&outputs[0], &outputs[1], &outputs[2]);
        let (l, n, g) = (act.shape()[0], act.shape()[1], act.shape()[2]);
        let back = LstmSequenceBackward { reverse: self.reverse, want_dh0: h0.requires_grad() };
        let grad = grad.contiguous()?;
        let mut r = fused::run_or_composite(&back, &[&grad, act, cells, c0, w_hh])?.into_iter();
        let (dg, dc0, dh0) = (r.next().expect("three outputs"), r.next().expect("three outputs"), r.next().expect("three outputs"));
        // W_hh's gradient: every step's gate gradient against the output before it, as one
        // product (the first step's term is zero from a zero state).
        let rows = |t: &Tensor, from: usize, len: usize, width: usize| t.narrow(0usize, from, len)?.reshape(&[len * n, width]);
        let h = h0.shape()[1];
        let (dg_rest, h_before) =
            if self.reverse { (rows(&dg, 0, l - 1, g)?, rows(states, 1, l - 1, h)?) } else { (rows(&dg, 1, l - 1, g)?, rows(states, 0, l - 1, h)?) };
        let mut dw = dg_rest.t()?.matmul(&h_before)?;
        if !self.zero_state {
            let first = position(0, l, self.reverse);
            dw = dw.add(&dg.select(0usize, first)?.t()?.matmul(h0)?)?;
        }
        Ok(vec![Some(dg), Some(dw), h0.requires_grad().then_some(dh0), c0.requires_grad().then_some(dc0)])
    }
}

/// The gradient of [`LstmSequence`] but for `w_hh`'s. Inputs (contiguous): the gradient of
/// `states` `[L + 1, N, H]`, the forward's `act` and `cells`, `c0` `[N, H]` and `w_hh`
/// `[4H, H]`. Outputs: the gate gradients `[L, N, 4H]` (of the pre-activation gates, so of
/// `x_gates`), `dc0` and `dh0` `[N, H]` (`dh0` zeros unless `want_dh0`).
#[derive(Clone, Copy, Debug)]
pub struct LstmSequenceBackward {
    /// As the forward's.
    pub reverse: bool,
    /// Whether `h0`'s gradient is wanted (one more product).
    pub want_dh0: bool,
}

impl CustomOp for LstmSequenceBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (act, c0) = (inputs[1], inputs[3]);
        vec![(act.shape().to_vec(), act.dtype()), (c0.shape().to_vec(), c0.dtype()), (c0.shape().to_vec(), c0.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (grad, act, cells, c0, w_hh) = (inputs[0], inputs[1], inputs[2], inputs[3], inputs[4]);
        let l = act.shape()[0];
        let mut dc = grad.select(0usize, l)?;
        let mut dh_next: Option<Tensor> = None;
        let mut dgs = vec![None; l];
        // 1 - y^2 and y (1 - y): the derivatives of tanh and the sigmoid from their outputs.
        let dtanh = |y: &Tensor| y.square()?.neg()?.add_scalar(1.0);
        let dsigmoid = |y: &Tensor| y.mul(&y.neg()?.add_scalar(1.0)?);
        for s in (0..l).rev() {
            let t = position(s, l, self.reverse);
            let dh = match &dh_next {
                Some(d) => grad.select(0usize, t)?.add(d)?,
                None => grad.select(0usize, t)?,
            };
            let a = act.select(0usize, t)?.chunk(4, 1usize)?;
            let (i, f, g, o) = (&a[0], &a[1], &a[2], &a[3]);
            let c_prev = if s == 0 { c0.clone() } else { cells.select(0usize, position(s - 1, l, self.reverse))? };
            let tanh_c = cells.select(0usize, t)?.tanh()?;
            // c' reaches the loss directly and through h' = o * tanh(c').
            let dc_total = dc.add(&dh.mul(o)?.mul(&dtanh(&tanh_c)?)?)?;
            let di = dc_total.mul(g)?.mul(&dsigmoid(i)?)?;
            let df = dc_total.mul(&c_prev)?.mul(&dsigmoid(f)?)?;
            let dg = dc_total.mul(i)?.mul(&dtanh(g)?)?;
            let d_o = dh.mul(&tanh_c)?.mul(&dsigmoid(o)?)?;
            let dgates = Tensor::cat(&[&di, &df, &dg, &d_o], 1usize)?;
            dc = dc_total.mul(f)?;
            dh_next = Some(dgates.matmul(w_hh)?);
            dgs[t] = Some(dgates);
        }
        let dg = Tensor::stack(&dgs.iter().map(|t| t.as_ref().expect("every position ran")).collect::<Vec<_>>(), 0usize)?;
        let dh0 = match dh_next {
            Some(d) if self.want_dh0 => d,
            _ => Tensor::zeros(c0.shape(), c0.dtype(), c0.device())?,
        };
        Ok(vec![dg, dc, dh0])
    }
}

crate::custom_kernel_name! {
    LstmSequence => "lstm_sequence",
    LstmSequenceBackward => "lstm_sequence_backward",
}
