//! The LSTM cell: the pointwise arithmetic of an LSTM step as one op, the custom op
//! [`LstmCell`], run as one fused kernel where the device has one ([`crate::fused`]) and from
//! primitives otherwise; and [`LstmStep`], a step with its recurrent product, for devices
//! that run the two as one kernel. (The GRU cell is `gru.rs`.)
//!
//! The matmuls of a step stay outside (they are already one kernel each); what the cell covers
//! is the four activations and the state update, some thirty kernels a step when composed.

use crate::autograd::GradFn;
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused;
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

impl Tensor {
    /// One LSTM step from its pre-activation gates (`x W_ih^T + b_ih + h W_hh^T + b_hh`, gates
    /// in PyTorch's order i, f, g, o) and the cell state `c`: returns `(h', c')`, where
    ///
    /// ```text
    /// i, f, g, o = σ(gates_i), σ(gates_f), tanh(gates_g), σ(gates_o)
    /// c' = f * c + i * g
    /// h' = o * tanh(c')
    /// ```
    ///
    /// Runs as one fused kernel where the device has one ([`LstmCell`]), its gradient too
    /// ([`LstmCellBackward`]); the result is the same either way.
    ///
    /// # Shapes
    /// - `gates`: `[N, 4H]`; `c`: `[N, H]`
    /// - `h'`, `c'`: `[N, H]`
    pub fn lstm_cell(gates: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
        lstm_cell_of(&[gates], c)
    }

    /// [`Tensor::lstm_cell`] of the gates `x_gates + h_gates`, added inside the cell's kernel:
    /// an LSTM step's input projection and its recurrent product `h W_hh^T` stay two tensors,
    /// with no kernel (and no buffer) for their sum, and both receive the gates' gradient.
    /// The result is `lstm_cell(&x_gates.add(h_gates)?, c)`'s, the sum rounded to the dtype as
    /// that add would round it.
    ///
    /// # Shapes
    /// - `x_gates`, `h_gates`: `[N, 4H]`; `c`: `[N, H]`
    /// - `h'`, `c'`: `[N, H]`
    pub fn lstm_cell_sum(x_gates: &Tensor, h_gates: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
        lstm_cell_of(&[x_gates, h_gates], c)
    }

    /// [`Tensor::lstm_cell_sum`] of `x_gates` and the recurrent product `h w_hh_t`: one LSTM
    /// step from the previous output `h`, with `w_hh_t` the recurrent weight transposed
    /// (`W_hh^T`, `[H, 4H]`). Where the device has a kernel for the whole step
    /// ([`LstmStep`]) the product and the cell run as one; the graph records the
    /// product and the cell as the composite does (two nodes over the kernel's two outputs), so
    /// the gradients, and the engine's gathering of `W_hh`'s gradient over every step that
    /// shares `w_hh_t`, are the composite's.
    ///
    /// # Shapes
    /// - `x_gates`: `[N, 4H]`; `h`, `c`: `[N, H]`; `w_hh_t`: `[H, 4H]`
    /// - `h'`, `c'`: `[N, H]`
    pub fn lstm_step(x_gates: &Tensor, h: &Tensor, w_hh_t: &Tensor, c: &Tensor) -> Result<(Tensor, Tensor)> {
        if let Some(step) = lstm_step_fused(x_gates, h, w_hh_t, c)? {
            return Ok(step);
        }
        Tensor::lstm_cell_sum(x_gates, &h.matmul(w_hh_t)?, c)
    }

    /// The backward rule of [`Tensor::lstm_cell`]: from the gradients of `h'` and `c'` (`[N,
    /// H]`, `None` for one that reached no gradient), the forward's inputs (`gates`, `c`, then
    /// the second gate term of [`Tensor::lstm_cell_sum`]) and its output `out` (`[2, N, H]`),
    /// the gradient of each input.
    pub(crate) fn lstm_cell_backward(dh: Option<&Tensor>, dc_new: Option<&Tensor>, inputs: &[Tensor], out: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let c = &inputs[1];
        let zeros = || Tensor::zeros(c.shape(), c.dtype(), c.device());
        let dh = match dh {
            Some(d) => d.contiguous()?,
            None => zeros()?,
        };
        let dc_new = match dc_new {
            Some(d) => d.contiguous()?,
            None => zeros()?,
        };
        let mut cell_inputs = vec![&inputs[0], &inputs[1], out, &dh, &dc_new];
        cell_inputs.extend(inputs.get(2));
        let mut grads = fused::run_or_composite(&LstmCellBackward, &cell_inputs)?.into_iter();
        let (dgates, dc) = (grads.next().expect("two outputs"), grads.next().expect("two outputs"));
        // A second gate term is summed with the first, so it shares their gradient.
        let second = inputs.get(2).map(|_| Some(dgates.clone()));
        Ok([Some(dgates), Some(dc)].into_iter().chain(second).collect())
    }
}

/// [`Tensor::lstm_step`] as one kernel where the device has one ([`LstmStep`]), else
/// `None` (the caller runs the product and the cell): plain operands only (one float dtype and
/// device, nothing autocast would cast, `w_hh_t` a transposed view of a contiguous weight, the
/// shapes right; anything else goes to the composite, which checks and reports it).
fn lstm_step_fused(x_gates: &Tensor, h: &Tensor, w_hh_t: &Tensor, c: &Tensor) -> Result<Option<(Tensor, Tensor)>> {
    let operands = [x_gates, h, w_hh_t, c];
    let (n, units) = match h.shape() {
        &[n, units] => (n, units),
        _ => return Ok(None),
    };
    let shaped = x_gates.shape() == [n, 4 * units] && w_hh_t.shape() == [units, 4 * units] && c.shape() == [n, units] && units > 0;
    let plain = operands.iter().all(|t| t.dtype() == h.dtype() && t.device() == h.device() && t.dtype().is_float());
    // Under autocast only operands its product would not cast (the LSTM layer's recurrence
    // there), for which the composite casts nothing either.
    let cast_free = !crate::autocast::casts(&[h, w_hh_t], crate::autocast::matmul_ops(h, w_hh_t));
    if !shaped || !plain || !cast_free {
        return Ok(None);
    }
    let w_hh = w_hh_t.t()?;
    let inputs = [x_gates.contiguous()?, h.contiguous()?, w_hh, c.contiguous()?];
    if !inputs[2].is_contiguous() {
        return Ok(None);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let Some(r) = fused::run(&LstmStep, &refs) else { return Ok(None) };
    let mut r = r?.into_iter();
    let (h_gates, out) = (r.next().expect("two outputs, counted by fused::run"), r.next().expect("two outputs"));
    let product = h_gates.recorded(&[&inputs[1], w_hh_t], || GradFn::Matmul);
    let out = out.recorded(&[&inputs[0], &inputs[3], &product], || GradFn::LstmCell);
    Ok(Some((out.select(0usize, 0)?, out.select(0usize, 1)?)))
}

/// [`Tensor::lstm_cell`] of the sum of `gates` (one or two terms).
fn lstm_cell_of(gates: &[&Tensor], c: &Tensor) -> Result<(Tensor, Tensor)> {
    for g in gates {
        check_float("lstm_cell", g)?;
    }
    let operands: Vec<&Tensor> = gates.iter().copied().chain([c]).collect();
    if let Some(p) = crate::autocast::promoted(&operands)? {
        let (c, gates) = p.split_last().expect("gates and c");
        return lstm_cell_of(&gates.iter().collect::<Vec<_>>(), c);
    }
    let cs = c.shape();
    for g in gates {
        check_same_dtype("lstm_cell", g, c)?;
        check_same_device("lstm_cell", g, c)?;
        let gs = g.shape();
        if gs.len() != 2 || cs.len() != 2 || gs[0] != cs[0] || gs[1] != 4 * cs[1] || cs[1] == 0 {
            return Err(Error::shape("lstm_cell", gs, cs, "must be gates [N, 4H] and cell state [N, H] with H > 0"));
        }
    }
    // The kernel's order: the first gate term, c, then the second term.
    let mut inputs = vec![gates[0].contiguous()?, c.contiguous()?];
    if let Some(more) = gates.get(1) {
        inputs.push(more.contiguous()?);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = fused::run_or_composite(&LstmCell, &refs)?.remove(0).recorded(&refs, || GradFn::LstmCell);
    Ok((out.select(0usize, 0)?, out.select(0usize, 1)?))
}

/// The pointwise part of an LSTM step ([`Tensor::lstm_cell`]), with the gates in PyTorch's
/// order i, f, g, o:
///
/// ```text
/// i, f, g, o = σ(gates[:, 0:H]), σ(gates[:, H:2H]), tanh(gates[:, 2H:3H]), σ(gates[:, 3H:4H])
/// c' = f * c + i * g
/// h' = o * tanh(c')
/// ```
///
/// Inputs (contiguous): `gates` `[N, 4H]` (pre-activation), `c` `[N, H]`, and for
/// [`Tensor::lstm_cell_sum`] a third, a second `[N, 4H]` term of the gates: the kernel reads
/// `gates + term`, rounded to the dtype as the add's kernel would round it. Output: one `[2, N,
/// H]` buffer holding `h'` then `c'`. Its gradient is [`LstmCellBackward`].
#[derive(Clone, Copy, Debug)]
pub struct LstmCell;

impl CustomOp for LstmCell {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let c = inputs[1];
        vec![([&[2][..], c.shape()].concat(), c.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let c = inputs[1];
        let gates = match inputs.get(2) {
            Some(more) => inputs[0].add(more)?,
            None => inputs[0].clone(),
        };
        let a = gates.chunk(4, 1usize)?;
        let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
        let c_new = f.mul(c)?.add(&i.mul(&g)?)?;
        let h_new = o.mul(&c_new.tanh()?)?;
        Ok(vec![Tensor::stack(&[&h_new, &c_new], 0usize)?])
    }
}

/// The gradient of [`LstmCell`]. Inputs (contiguous): `gates` `[N, 4H]`, `c` `[N, H]`, the
/// forward's output `[2, N, H]` (`h'`, `c'`), the gradients `dh'` and `dc'` (`[N, H]` each),
/// then the forward's second gate term where it had one. Outputs: `dgates` `[N, 4H]` (the
/// gradient of either gate term) and `dc` `[N, H]`.
#[derive(Clone, Copy, Debug)]
pub struct LstmCellBackward;

impl CustomOp for LstmCellBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (gates, c) = (inputs[0], inputs[1]);
        vec![(gates.shape().to_vec(), gates.dtype()), (c.shape().to_vec(), c.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (c, out, dh, dc_new) = (inputs[1], inputs[2], inputs[3], inputs[4]);
        let gates = match inputs.get(5) {
            Some(more) => inputs[0].add(more)?,
            None => inputs[0].clone(),
        };
        let a = gates.chunk(4, 1usize)?;
        let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
        let tanh_c = out.select(0usize, 1)?.tanh()?;
        // 1 - y^2 and y (1 - y): the derivatives of tanh and the sigmoid from their outputs.
        let dtanh = |y: &Tensor| y.square()?.neg()?.add_scalar(1.0);
        let dsigmoid = |y: &Tensor| y.mul(&y.neg()?.add_scalar(1.0)?);
        // c' reaches the loss directly and through h' = o * tanh(c').
        let dc_total = dc_new.add(&dh.mul(&o)?.mul(&dtanh(&tanh_c)?)?)?;
        let di = dc_total.mul(&g)?.mul(&dsigmoid(&i)?)?;
        let df = dc_total.mul(c)?.mul(&dsigmoid(&f)?)?;
        let dg = dc_total.mul(&i)?.mul(&dtanh(&g)?)?;
        let d_o = dh.mul(&tanh_c)?.mul(&dsigmoid(&o)?)?;
        Ok(vec![Tensor::cat(&[&di, &df, &dg, &d_o], 1usize)?, dc_total.mul(&f)?])
    }
}

/// An LSTM step with its recurrent product ([`Tensor::lstm_step`]): `h_gates = h W_hh^T`, then
/// [`LstmCell`] of the gates `x_gates + h_gates`. Inputs (contiguous): `x_gates` `[N, 4H]`, `h`
/// `[N, H]`, `w_hh` `[4H, H]` (the weight as stored, not transposed), `c` `[N, H]`. Outputs:
/// `h_gates` `[N, 4H]`, then one `[2, N, H]` buffer holding `h'` then `c'`. Its gradients are
/// the product's and the cell's ([`Tensor::lstm_step`] records both, as the composite does).
#[derive(Clone, Copy, Debug)]
pub struct LstmStep;

impl CustomOp for LstmStep {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (x_gates, c) = (inputs[0], inputs[3]);
        vec![(x_gates.shape().to_vec(), x_gates.dtype()), ([&[2][..], c.shape()].concat(), c.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x_gates, h, w_hh, c) = (inputs[0], inputs[1], inputs[2], inputs[3]);
        let h_gates = h.matmul(&w_hh.t()?)?;
        let out = LstmCell.composite(&[x_gates, c, &h_gates])?.remove(0);
        Ok(vec![h_gates, out])
    }
}

crate::custom_kernel_name! {
    LstmCell => "lstm_cell",
    LstmCellBackward => "lstm_cell_backward",
    LstmStep => "lstm_step",
}
