//! Recurrent layers: [`LSTM`] and [`GRU`] (`torch.nn.LSTM`, `torch.nn.GRU`), multi-layer and
//! optionally bidirectional, with PyTorch's parameter names, shapes, gate order and init.
//!
//! Dimension letters: L sequence length, N batch, H hidden size, D directions (2 when
//! bidirectional, else 1), G gates (4 for the LSTM, 3 for the GRU).
//!
//! Each layer and direction projects the whole input sequence with one matmul
//! (`[L*N, in] x W_ih^T`), so the time loop only does the `[N, H] x W_hh^T` product and the
//! elementwise gate arithmetic. Everything is built from differentiable tensor ops, so
//! backward needs no rule of its own. Where the device runs a whole LSTM direction as one
//! kernel (`Tensor::lstm_sequence`: the CPU, in f32, outside autocast) the time loop is that
//! kernel; elsewhere the LSTM's step is `Tensor::lstm_step` (its product and gate arithmetic,
//! one kernel where the device has one). The GRU's gate arithmetic is `Tensor::gru_cell` (one
//! fused kernel where the device has one).

use liandan_tensor::{autocast_dtype, Device, Tensor};

use super::{default_bound, uniform_param, with_fields};
use crate::error::Result;
use crate::impl_module;
use crate::module::{Forward, TensorField, TensorKind};

/// Configuration of a recurrent layer; [`LSTMConfig`] and [`GRUConfig`] name it for each
/// cell (`torch.nn.LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
/// dropout=0.0, bidirectional=False)`, and the same for `torch.nn.GRU`). `proj_size` is not
/// supported.
#[derive(Clone, Debug)]
pub struct RnnConfig<C> {
    /// Features of each input step.
    pub input_size: usize,
    /// H, the features of the hidden (and cell) state.
    pub hidden_size: usize,
    /// Stacked layers; layer k > 0 reads layer k - 1's output. Default 1.
    pub num_layers: usize,
    /// Whether the layers have `bias_ih` and `bias_hh`; default true.
    pub bias: bool,
    /// Input and output as `[N, L, *]` instead of `[L, N, *]` (the states stay
    /// `[D * num_layers, N, H]`); default false.
    pub batch_first: bool,
    /// Dropout probability on the outputs of every layer but the last, in training only;
    /// default 0.
    pub dropout: f64,
    /// Run a second pass from the end of the sequence and concatenate; default false.
    pub bidirectional: bool,
    cell: std::marker::PhantomData<C>,
}

/// The cell a [`RnnConfig`] configures: its op name and number of gates.
pub trait Cell {
    const OP: &'static str;
    const GATES: usize;
}

/// The LSTM cell (gates i, f, g, o).
#[derive(Clone, Copy, Debug)]
pub enum LstmCell {}

/// The GRU cell (gates r, z, n).
#[derive(Clone, Copy, Debug)]
pub enum GruCell {}

impl Cell for LstmCell {
    const OP: &'static str = "LSTM";
    const GATES: usize = 4;
}

impl Cell for GruCell {
    const OP: &'static str = "GRU";
    const GATES: usize = 3;
}

/// Configuration of an [`LSTM`].
pub type LSTMConfig = RnnConfig<LstmCell>;

/// Configuration of a [`GRU`].
pub type GRUConfig = RnnConfig<GruCell>;

with_fields!(LSTMConfig { with_num_layers: num_layers: usize, with_bias: bias: bool, with_batch_first: batch_first: bool, with_dropout: dropout: f64, with_bidirectional: bidirectional: bool });
with_fields!(GRUConfig { with_num_layers: num_layers: usize, with_bias: bias: bool, with_batch_first: batch_first: bool, with_dropout: dropout: f64, with_bidirectional: bidirectional: bool });

impl<C: Cell> RnnConfig<C> {
    /// One unidirectional layer with biases, sequence first, no dropout.
    pub fn new(input_size: usize, hidden_size: usize) -> Self {
        RnnConfig { input_size, hidden_size, num_layers: 1, bias: true, batch_first: false, dropout: 0.0, bidirectional: false, cell: std::marker::PhantomData }
    }
}

impl LSTMConfig {
    /// An LSTM on `device` in training mode, F32, every parameter uniform(±1/√H) as PyTorch.
    /// Errors when `hidden_size` or `num_layers` is 0 or `dropout` is outside [0, 1].
    pub fn init(&self, device: &Device) -> Result<LSTM> {
        Ok(LSTM { weights: self.init_weights(device)?, config: self.clone(), training: true })
    }
}

impl GRUConfig {
    /// A GRU on `device` in training mode, F32, every parameter uniform(±1/√H) as PyTorch.
    /// Errors when `hidden_size` or `num_layers` is 0 or `dropout` is outside [0, 1].
    pub fn init(&self, device: &Device) -> Result<GRU> {
        Ok(GRU { weights: self.init_weights(device)?, config: self.clone(), training: true })
    }
}

/// The tensors of one direction of one layer. PyTorch names them `weight_ih_l{k}`,
/// `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`, with `_reverse` appended for the
/// backward direction.
///
/// # Shapes
/// - `weight_ih`: `[G*H, in]` with `in` the input size for layer 0 and `D*H` above it
/// - `weight_hh`: `[G*H, H]`; `bias_ih`, `bias_hh`: `[G*H]`
///
/// The G blocks of rows are the gates in PyTorch's order: i, f, g, o for the LSTM; r, z, n
/// for the GRU.
#[derive(Clone, Debug)]
pub struct RnnWeights {
    pub weight_ih: Tensor,
    pub weight_hh: Tensor,
    pub bias_ih: Option<Tensor>,
    pub bias_hh: Option<Tensor>,
}

/// A multi-layer long short-term memory network (`torch.nn.LSTM`). At each step, with the
/// gates in PyTorch's order:
///
/// ```text
/// i, f, g, o = σ(W_ii x + b_ii + W_hi h + b_hi), σ(..f..), tanh(..g..), σ(..o..)
/// c' = f * c + i * g
/// h' = o * tanh(c')
/// ```
///
/// [`Forward::forward`] returns the output sequence only (so the layer fits in a
/// [`Sequential`](super::Sequential)); [`LSTM::forward_with_state`] also takes and returns the
/// states.
///
/// State-dict keys, for each layer k in order: `weight_ih_l{k}`, `weight_hh_l{k}`,
/// `bias_ih_l{k}`, `bias_hh_l{k}`, then the same with `_reverse` when bidirectional (biases
/// absent when `bias` is false). See [`RnnWeights`] for their shapes.
///
/// # Shapes
/// - input: `[L, N, input_size]`, `[N, L, input_size]` when `batch_first`, or unbatched
///   `[L, input_size]`
/// - `h_0`, `c_0`, `h_n`, `c_n`: `[D * num_layers, N, H]` (never batch first), or
///   `[D * num_layers, H]` for an unbatched input
/// - output: `[L, N, D * H]` (`[N, L, D * H]` when `batch_first`, `[L, D * H]` unbatched):
///   the last layer's h at every step, both directions concatenated
#[derive(Clone, Debug)]
pub struct LSTM {
    /// One entry per layer, each with one set per direction (forward, then reverse):
    /// `weights[k][d]`.
    pub weights: Vec<Vec<RnnWeights>>,
    pub config: LSTMConfig,
    pub training: bool,
}

impl_module!(LSTM { params: [weights], mode: training });

/// A multi-layer gated recurrent unit network (`torch.nn.GRU`). At each step, with the gates
/// in PyTorch's order:
///
/// ```text
/// r = σ(W_ir x + b_ir + W_hr h + b_hr)
/// z = σ(W_iz x + b_iz + W_hz h + b_hz)
/// n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
/// h' = (1 - z) * n + z * h
/// ```
///
/// [`Forward::forward`] returns the output sequence only; [`GRU::forward_with_state`] also
/// takes and returns the hidden state.
///
/// State-dict keys: as [`LSTM`]'s.
///
/// # Shapes
/// - input: `[L, N, input_size]`, `[N, L, input_size]` when `batch_first`, or unbatched
///   `[L, input_size]`
/// - `h_0`, `h_n`: `[D * num_layers, N, H]` (never batch first), or `[D * num_layers, H]`
///   for an unbatched input
/// - output: `[L, N, D * H]` (`[N, L, D * H]` when `batch_first`, `[L, D * H]` unbatched)
#[derive(Clone, Debug)]
pub struct GRU {
    /// One entry per layer, each with one set per direction (forward, then reverse):
    /// `weights[k][d]`.
    pub weights: Vec<Vec<RnnWeights>>,
    pub config: GRUConfig,
    pub training: bool,
}

impl_module!(GRU { params: [weights], mode: training });

impl LSTM {
    /// Runs the sequence from `state = (h_0, c_0)` (zeros when `None`) and returns
    /// `(output, (h_n, c_n))`; see the type's docs for the shapes.
    pub fn forward_with_state(&self, x: &Tensor, state: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        crate::summary::scope(self, || {
            let (out, h, c) = self.config.run(&self.weights, self.training, x, state.map(|s| s.0), state.map(|s| s.1))?;
            Ok((out, (h, c.expect("the LSTM keeps a cell state"))))
        })
    }
}

impl GRU {
    /// Runs the sequence from `h_0` (zeros when `None`) and returns `(output, h_n)`; see the
    /// type's docs for the shapes.
    pub fn forward_with_state(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        crate::summary::scope(self, || {
            let (out, h, _) = self.config.run(&self.weights, self.training, x, h0, None)?;
            Ok((out, h))
        })
    }
}

impl Forward for LSTM {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_state(x, None)?.0)
    }
}

impl Forward for GRU {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_state(x, None)?.0)
    }
}

/// PyTorch names an RNN's tensors by layer and direction rather than by field:
/// `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`, then the same for the
/// reverse direction with `_reverse` appended.
impl TensorField for Vec<Vec<RnnWeights>> {
    fn visit_field(&self, prefix: &str, _name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        for (k, layer) in self.iter().enumerate() {
            for (d, w) in layer.iter().enumerate() {
                let s = suffix(k, d);
                w.weight_ih.visit_field(prefix, &format!("weight_ih{s}"), kind, f);
                w.weight_hh.visit_field(prefix, &format!("weight_hh{s}"), kind, f);
                w.bias_ih.visit_field(prefix, &format!("bias_ih{s}"), kind, f);
                w.bias_hh.visit_field(prefix, &format!("bias_hh{s}"), kind, f);
            }
        }
    }

    fn visit_field_mut(&mut self, prefix: &str, _name: &str, kind: TensorKind, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind) -> Result<()>) -> Result<()> {
        for (k, layer) in self.iter_mut().enumerate() {
            for (d, w) in layer.iter_mut().enumerate() {
                let s = suffix(k, d);
                w.weight_ih.visit_field_mut(prefix, &format!("weight_ih{s}"), kind, f)?;
                w.weight_hh.visit_field_mut(prefix, &format!("weight_hh{s}"), kind, f)?;
                w.bias_ih.visit_field_mut(prefix, &format!("bias_ih{s}"), kind, f)?;
                w.bias_hh.visit_field_mut(prefix, &format!("bias_hh{s}"), kind, f)?;
            }
        }
        Ok(())
    }
}

/// `_l{k}` for layer `k`'s forward direction (`d` = 0), `_l{k}_reverse` for its reverse.
fn suffix(k: usize, d: usize) -> String {
    let reverse = if d == 1 { "_reverse" } else { "" };
    format!("_l{k}{reverse}")
}

/// What the LSTM and the GRU share: initialization and the forward pass.
impl<C: Cell> RnnConfig<C> {
    fn directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    fn bad_shape(&self, shape: &[usize], detail: String) -> crate::error::Error {
        liandan_tensor::Error::BadShape { op: C::OP, shape: shape.to_vec(), detail }.into()
    }

    fn init_weights(&self, device: &Device) -> Result<Vec<Vec<RnnWeights>>> {
        let (h, d) = (self.hidden_size, self.directions());
        let shape = [self.input_size, self.hidden_size, self.num_layers];
        if h == 0 || self.num_layers == 0 {
            return Err(self.bad_shape(&shape, "[input_size, hidden_size, num_layers]: hidden_size and num_layers must be positive".into()));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(self.bad_shape(&shape, format!("dropout {} is outside [0, 1]", self.dropout)));
        }
        let (gh, bound) = (C::GATES * h, default_bound(h));
        let mut weights = Vec::with_capacity(self.num_layers);
        for k in 0..self.num_layers {
            let input = if k == 0 { self.input_size } else { d * h };
            let mut layer = Vec::with_capacity(d);
            for _ in 0..d {
                let bias = || if self.bias { uniform_param(&[gh], bound, device).map(Some) } else { Ok(None) };
                // Drawn in state-dict order, as PyTorch's reset_parameters.
                let weight_ih = uniform_param(&[gh, input], bound, device)?;
                let weight_hh = uniform_param(&[gh, h], bound, device)?;
                let (bias_ih, bias_hh) = (bias()?, bias()?);
                layer.push(RnnWeights { weight_ih, weight_hh, bias_ih, bias_hh });
            }
            weights.push(layer);
        }
        Ok(weights)
    }

    /// Checks an initial state against `want` (the batched shape, `[D * num_layers, N, H]`) and
    /// returns it batched; `None` when absent (zeros, which the steps treat as such).
    fn initial_state(&self, state: Option<&Tensor>, name: &str, x: &Tensor, want: &[usize], batched: bool) -> Result<Option<Tensor>> {
        let Some(s) = state else {
            return Ok(None);
        };
        let expected: Vec<usize> = if batched { want.to_vec() } else { vec![want[0], want[2]] };
        if s.shape() != expected.as_slice() {
            let what = if batched { "[D * num_layers, N, hidden_size]" } else { "[D * num_layers, hidden_size]" };
            return Err(self.bad_shape(s.shape(), format!("{name} must have shape {expected:?} ({what}) for an input of shape {:?}", x.shape())));
        }
        Ok(Some(if batched { s.clone() } else { s.unsqueeze(1usize)? }))
    }

    /// The forward pass: `(output, h_n, c_n)`, `c_n` only for the LSTM (`c0` is ignored for the
    /// GRU).
    fn run(
        &self,
        weights: &[Vec<RnnWeights>],
        training: bool,
        x: &Tensor,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let (h, d) = (self.hidden_size, self.directions());
        if weights.len() != self.num_layers || weights.iter().any(|layer| layer.len() != d) {
            // Only reachable by editing the public fields by hand.
            let sets: Vec<usize> = weights.iter().map(Vec::len).collect();
            return Err(self.bad_shape(&sets, format!("holds these weight sets per layer; num_layers = {} layers of D = {d} sets are needed", self.num_layers)));
        }
        let batched = x.rank() == 3;
        let layout = if self.batch_first { "[N, L, input_size]" } else { "[L, N, input_size]" };
        if !(x.rank() == 2 || batched) || x.shape()[x.rank() - 1] != self.input_size {
            return Err(self.bad_shape(x.shape(), format!("expects an input {layout} or unbatched [L, input_size] with input_size = {}", self.input_size)));
        }
        // Work sequence first, [L, N, in], whatever the caller's layout.
        let xs = match (batched, self.batch_first) {
            (false, _) => x.unsqueeze(1usize)?,
            (true, false) => x.clone(),
            (true, true) => x.transpose(0usize, 1usize)?,
        };
        let (l, n) = (xs.shape()[0], xs.shape()[1]);
        if l == 0 {
            return Err(self.bad_shape(x.shape(), "the sequence is empty (L = 0)".into()));
        }
        let want = [d * self.num_layers, n, h];
        let h0 = self.initial_state(h0, "h_0", x, &want, batched)?;
        let c0 = self.initial_state(c0, "c_0", x, &want, batched)?;

        let (mut h_n, mut c_n) = (Vec::new(), Vec::new());
        let mut layer_in = xs;
        for (k, layer) in weights.iter().enumerate() {
            let mut outs = Vec::with_capacity(d);
            for (dir, w) in layer.iter().enumerate() {
                let i = k * d + dir;
                let state = |s: &Option<Tensor>| s.as_ref().map(|s| s.select(0usize, i)).transpose();
                let (out, h_last, c_last) = self.direction(w, &layer_in, state(&h0)?, state(&c0)?, dir == 1)?;
                outs.push(out);
                h_n.push(h_last);
                c_n.extend(c_last);
            }
            let out = if d == 1 { outs.pop().expect("one direction") } else { Tensor::cat(&[&outs[0], &outs[1]], 2usize)? };
            // As PyTorch: dropout on every layer's output but the last, in training only.
            layer_in = if k + 1 < self.num_layers { out.dropout(self.dropout, training, None)? } else { out };
        }

        let stack = |v: &[Tensor]| -> Result<Tensor> {
            let s = Tensor::stack(&v.iter().collect::<Vec<_>>(), 0usize)?;
            Ok(if batched { s } else { s.squeeze(1usize)? })
        };
        // Batch first: a transposed view of the steps (a model that reads only the last step,
        // as a classifier does, copies nothing; reshaping it copies once).
        let out = match (batched, self.batch_first) {
            (false, _) => layer_in.squeeze(1usize)?,
            (true, false) => layer_in,
            (true, true) => layer_in.transpose(0usize, 1usize)?,
        };
        let c_n = if c_n.is_empty() { None } else { Some(stack(&c_n)?) };
        Ok((out, stack(&h_n)?, c_n))
    }

    /// One direction of one layer over `x` `[L, N, in]` from `h` (and `c` for the LSTM), both
    /// `[N, H]` or `None` for zeros: the outputs of every step `[L, N, H]` in time order and
    /// the final states.
    fn direction(&self, w: &RnnWeights, x: &Tensor, h: Option<Tensor>, c: Option<Tensor>, reverse: bool) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let (l, n, gh) = (x.shape()[0], x.shape()[1], C::GATES * self.hidden_size);
        let lstm = C::GATES == 4;
        // The input projection of every step in one matmul. The LSTM's two biases are only
        // ever summed, so they are summed first and the projection adds them as one (one
        // bias gradient over every step's rows, not two); the GRU keeps b_hh in the step,
        // since b_hn sits inside r * (W_hn h + b_hn).
        let bias = match (&w.bias_ih, w.bias_hh.as_ref().filter(|_| lstm)) {
            (Some(b_ih), Some(b_hh)) => Some(b_ih.add(b_hh)?),
            (b_ih, b_hh) => b_ih.clone().or_else(|| b_hh.cloned()),
        };
        let xp = x.reshape(&[l * n, x.shape()[2]])?.linear(&w.weight_ih, bias.as_ref())?;
        // Under autocast the whole recurrence runs in the projection's low type, as PyTorch's
        // LSTM and GRU do there (cuDNN's kernels take every operand in f16): the recurrent
        // weight and bias are cast once here and the states start in that type, so no step
        // casts (what `torch.autocast`'s cast cache does for a weight used at every step).
        let (autocast, step_type) = (autocast_dtype().is_some(), xp.dtype());
        let in_step_type = |t: &Tensor| if autocast { t.to_dtype(step_type) } else { Ok(t.clone()) };
        // One transpose shared by every step, so backward gathers W_hh's gradient into one
        // product over all steps (`autograd/products.rs`) instead of one per step. Made before
        // the steps' view of the projection, so backward reaches it after that view's gradient,
        // the join of the gate gradients, which the product then reads rather than joining
        // them again.
        let w_hh_t = in_step_type(&w.weight_hh)?.t()?;
        let bias_hh = w.bias_hh.as_ref().filter(|_| !lstm).map(in_step_type).transpose()?;
        let xp = xp.reshape(&[l, n, gh])?;
        let zeros = || Tensor::zeros(&[n, self.hidden_size], step_type, x.device());
        if lstm && !autocast {
            // The whole recurrence as one kernel where the device has one.
            let state = |s: &Option<Tensor>| match s {
                Some(s) => s.contiguous(),
                None => zeros(),
            };
            if let Some(states) = Tensor::lstm_sequence(&xp, &w.weight_hh, &state(&h)?, &state(&c)?, reverse, h.is_none())? {
                let last = if reverse { 0 } else { l - 1 };
                return Ok((states.narrow(0usize, 0, l)?, states.select(0usize, last)?, Some(states.select(0usize, l)?)));
            }
        }
        let mut h = h.as_ref().map(in_step_type).transpose()?;
        let mut c = match (lstm, c) {
            (true, None) => Some(zeros()?),
            (_, c) => c.filter(|_| lstm).as_ref().map(in_step_type).transpose()?,
        };
        if !lstm && h.is_none() {
            // The GRU reads h itself, not only its product.
            h = Some(zeros()?);
        }

        let mut outs: Vec<Tensor> = Vec::with_capacity(l);
        let steps: Box<dyn Iterator<Item = usize>> = if reverse { Box::new((0..l).rev()) } else { Box::new(0..l) };
        for t in steps {
            let gx = xp.select(0usize, t)?;
            if let Some(c_prev) = &c {
                // The recurrent product and the gate arithmetic: one kernel where the device
                // has one, else the product and one op for the cell, which adds the two gate
                // terms itself. A zero h contributes nothing: the first step from no state
                // skips its product.
                let (h_new, c_new) = match &h {
                    Some(h) => Tensor::lstm_step(&gx, h, &w_hh_t, c_prev)?,
                    None => Tensor::lstm_cell(&gx, c_prev)?,
                };
                h = Some(h_new);
                c = Some(c_new);
            } else {
                let h_prev = h.as_ref().expect("the GRU starts from zeros");
                let mut gh = h_prev.matmul(&w_hh_t)?;
                if let Some(b) = &bias_hh {
                    gh = gh.add(b)?;
                }
                // The gate arithmetic is one op, a single kernel where the device has one.
                h = Some(Tensor::gru_cell(&gx, &gh, h_prev)?);
            }
            outs.push(h.clone().expect("set by the step"));
        }
        if reverse {
            // Step t's output belongs at position t of the sequence.
            outs.reverse();
        }
        let h = h.expect("L > 0, checked by run");
        // Stacked in time order, each step's [N, H] one run of the result's memory.
        Ok((Tensor::stack(&outs.iter().collect::<Vec<_>>(), 0usize)?, h, c))
    }
}
