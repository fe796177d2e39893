//! Recurrent cells: the pointwise arithmetic of an LSTM or GRU step as one op, run as one
//! fused kernel where the device has one ([`crate::fused`]) and from primitives otherwise.
//!
//! The matmuls of a step stay outside (they are already one kernel each); what this op covers
//! is the four activations and the state update, some thirty kernels a step when composed.

use crate::autograd::{self, GradFn};
use crate::error::{Error, Result};
use crate::fused::{try_fused, FusedOp};
use crate::layout::Layout;
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
    /// Runs as one fused kernel where the device has one ([`FusedOp::LstmCell`]), its
    /// gradient too ([`FusedOp::LstmCellBackward`]); the result is the same either way.
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
    /// ([`FusedOp::LstmStep`]) the product and the cell run as one; the graph records the
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
        let (gates, c) = (&inputs[0], &inputs[1]);
        let zeros = || Tensor::zeros(c.shape(), c.dtype(), c.device());
        let dh = match dh {
            Some(d) => d.contiguous()?,
            None => zeros()?,
        };
        let dc_new = match dc_new {
            Some(d) => d.contiguous()?,
            None => zeros()?,
        };
        let mut fused_inputs = vec![gates, c, out, &dh, &dc_new];
        fused_inputs.extend(inputs.get(2));
        let (dgates, dc) = match try_fused(&FusedOp::LstmCellBackward, &fused_inputs) {
            Some(r) => {
                let mut r = r?;
                let fresh = |storage, shape: &[usize]| Tensor::from_parts(storage, Layout::contiguous(shape), c.dtype(), c.device(), None);
                let dc = fresh(r.pop().expect("two outputs, counted by try_fused"), c.shape());
                (fresh(r.pop().expect("two outputs"), gates.shape()), dc)
            }
            None => {
                let gates = match inputs.get(2) {
                    Some(more) => gates.add(more)?,
                    None => gates.clone(),
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
                (Tensor::cat(&[&di, &df, &dg, &d_o], 1usize)?, dc_total.mul(&f)?)
            }
        };
        // A second gate term is summed with the first, so it shares their gradient.
        let second = inputs.get(2).map(|_| Some(dgates.clone()));
        Ok([Some(dgates), Some(dc)].into_iter().chain(second).collect())
    }

    /// One GRU step (`torch.nn.GRUCell`'s arithmetic) from the input projection `x_gates`
    /// (`x W_ih^T + b_ih`), the recurrent one `h_gates` (`h W_hh^T + b_hh`), both with the gates
    /// in PyTorch's order r, z, n, and the state `h`: returns `h'`, where
    ///
    /// ```text
    /// r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r * h_n)
    /// h' = (1 - z) * n + z * h
    /// ```
    ///
    /// Runs as one fused kernel where the device has one ([`FusedOp::GruCell`]), its gradient
    /// too ([`FusedOp::GruCellBackward`]); the result is the same either way.
    ///
    /// # Shapes
    /// - `x_gates`, `h_gates`: `[N, 3H]`; `h`: `[N, H]`
    /// - `h'`: `[N, H]`
    pub fn gru_cell(x_gates: &Tensor, h_gates: &Tensor, h: &Tensor) -> Result<Tensor> {
        for t in [x_gates, h_gates, h] {
            check_float("gru_cell", t)?;
        }
        if let Some(p) = crate::autocast::promoted(&[x_gates, h_gates, h])? {
            return Tensor::gru_cell(&p[0], &p[1], &p[2]);
        }
        let hs = h.shape();
        for g in [x_gates, h_gates] {
            check_same_dtype("gru_cell", g, h)?;
            check_same_device("gru_cell", g, h)?;
            let gs = g.shape();
            if gs.len() != 2 || hs.len() != 2 || gs[0] != hs[0] || gs[1] != 3 * hs[1] || hs[1] == 0 {
                return Err(Error::shape("gru_cell", gs, hs, "must be gates [N, 3H] and hidden state [N, H] with H > 0"));
            }
        }
        let inputs = [x_gates.contiguous()?, h_gates.contiguous()?, h.contiguous()?];
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let out = match try_fused(&FusedOp::GruCell, &refs) {
            Some(r) => r?.remove(0),
            None => autograd::no_grad(|| gru_cell_composite(&inputs))?.storage(),
        };
        Ok(Tensor::from_op(out, hs, h.dtype(), h.device(), &refs, || GradFn::GruCell))
    }

    /// The backward rule of [`Tensor::gru_cell`]: from the gradient `dh'` of its output and its
    /// inputs (`x_gates`, `h_gates`, `h`), the gradient of each input.
    pub(crate) fn gru_cell_backward(dh_new: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let dh_new = dh_new.contiguous()?;
        let (gx, gh, h) = (&inputs[0], &inputs[1], &inputs[2]);
        if let Some(r) = try_fused(&FusedOp::GruCellBackward, &[gx, gh, h, &dh_new]) {
            let fresh = |storage, shape: &[usize]| Tensor::from_parts(storage, Layout::contiguous(shape), h.dtype(), h.device(), None);
            let mut r = r?.into_iter();
            let mut next = |shape: &[usize]| r.next().map(|s| fresh(s, shape)).expect("three outputs, counted by try_fused");
            let (dgx, dgh, dh) = (next(gx.shape()), next(gh.shape()), next(h.shape()));
            return Ok(vec![Some(dgx), Some(dgh), Some(dh)]);
        }
        let [r, z, n, h_n] = gru_gates(gx, gh)?;
        // h' = n + z (h - n).
        let dn = dh_new.mul(&z.neg()?.add_scalar(1.0)?)?;
        let dz = dh_new.mul(&h.sub(&n)?)?;
        let dn_pre = dn.mul(&n.square()?.neg()?.add_scalar(1.0)?)?;
        let dr_pre = dn_pre.mul(&h_n)?.mul(&r.mul(&r.neg()?.add_scalar(1.0)?)?)?;
        let dz_pre = dz.mul(&z.mul(&z.neg()?.add_scalar(1.0)?)?)?;
        let dgx = Tensor::cat(&[&dr_pre, &dz_pre, &dn_pre], 1usize)?;
        let dgh = Tensor::cat(&[&dr_pre, &dz_pre, &dn_pre.mul(&r)?], 1usize)?;
        Ok(vec![Some(dgx), Some(dgh), Some(dh_new.mul(&z)?)])
    }
}

/// [`Tensor::lstm_step`] as one kernel where the device has one ([`FusedOp::LstmStep`]), else
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
    // Under autocast only operands already of its type (the LSTM layer's recurrence there),
    // for which the composite casts nothing either.
    let cast_free = crate::autocast::autocast_dtype().is_none_or(|low| low == h.dtype());
    if !shaped || !plain || !cast_free {
        return Ok(None);
    }
    let w_hh = w_hh_t.t()?;
    let inputs = [x_gates.contiguous()?, h.contiguous()?, w_hh, c.contiguous()?];
    if !inputs[2].is_contiguous() {
        return Ok(None);
    }
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let Some(r) = try_fused(&FusedOp::LstmStep, &refs) else { return Ok(None) };
    let mut r = r?.into_iter();
    let (h_gates, out) = (r.next().expect("two outputs, counted by try_fused"), r.next().expect("two outputs"));
    let (dtype, device) = (h.dtype(), h.device());
    let product = Tensor::from_op(h_gates, &[n, 4 * units], dtype, device, &[&inputs[1], w_hh_t], || GradFn::Matmul);
    let out = Tensor::from_op(out, &[2, n, units], dtype, device, &[&inputs[0], &inputs[3], &product], || GradFn::LstmCell);
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
    let shape = [2, cs[0], cs[1]];
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let out = match try_fused(&FusedOp::LstmCell, &refs) {
        Some(r) => r?.remove(0),
        None => autograd::no_grad(|| lstm_cell_composite(&inputs))?.storage(),
    };
    let out = Tensor::from_op(out, &shape, c.dtype(), c.device(), &refs, || GradFn::LstmCell);
    Ok((out.select(0usize, 0)?, out.select(0usize, 1)?))
}

/// [`Tensor::lstm_cell`] from primitives on the kernel's inputs (`gates`, `c`, then the
/// second gate term where there is one): `[2, N, H]` holding `h'` then `c'`. The oracle of
/// [`FusedOp::LstmCell`].
fn lstm_cell_composite(inputs: &[Tensor]) -> Result<Tensor> {
    let c = &inputs[1];
    let gates = match inputs.get(2) {
        Some(more) => inputs[0].add(more)?,
        None => inputs[0].clone(),
    };
    let a = gates.chunk(4, 1usize)?;
    let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
    let c_new = f.mul(c)?.add(&i.mul(&g)?)?;
    let h_new = o.mul(&c_new.tanh()?)?;
    Tensor::stack(&[&h_new, &c_new], 0usize)
}

/// [`Tensor::gru_cell`] from primitives on its inputs (`x_gates`, `h_gates`, `h`). The oracle of
/// [`FusedOp::GruCell`].
fn gru_cell_composite(inputs: &[Tensor]) -> Result<Tensor> {
    let [_, z, n, _] = gru_gates(&inputs[0], &inputs[1])?;
    // (1 - z) * n + z * h, written with one multiply fewer.
    n.add(&z.mul(&inputs[2].sub(&n)?)?)
}

/// The GRU's gates from primitives: `[r, z, n, h_n]`, `h_n` the recurrent term of n.
fn gru_gates(x_gates: &Tensor, h_gates: &Tensor) -> Result<[Tensor; 4]> {
    let (x3, h3) = (x_gates.chunk(3, 1usize)?, h_gates.chunk(3, 1usize)?);
    let r = x3[0].add(&h3[0])?.sigmoid()?;
    let z = x3[1].add(&h3[1])?.sigmoid()?;
    let n = x3[2].add(&r.mul(&h3[2])?)?.tanh()?;
    Ok([r, z, n, h3[2].clone()])
}
