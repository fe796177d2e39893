//! Recurrent cells: the pointwise arithmetic of an LSTM step as one op, run as one fused
//! kernel where the device has one ([`crate::fused`]) and from primitives otherwise.
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
        check_float("lstm_cell", gates)?;
        if let Some(p) = crate::autocast::promoted(&[gates, c])? {
            return Tensor::lstm_cell(&p[0], &p[1]);
        }
        check_same_dtype("lstm_cell", gates, c)?;
        check_same_device("lstm_cell", gates, c)?;
        let (gs, cs) = (gates.shape(), c.shape());
        if gs.len() != 2 || cs.len() != 2 || gs[0] != cs[0] || gs[1] != 4 * cs[1] || cs[1] == 0 {
            return Err(Error::shape("lstm_cell", gs, cs, "must be gates [N, 4H] and cell state [N, H] with H > 0"));
        }
        let (gates, c) = (gates.contiguous()?, c.contiguous()?);
        let shape = [2, cs[0], cs[1]];
        let out = match try_fused(&FusedOp::LstmCell, &[&gates, &c]) {
            Some(r) => r?.remove(0),
            None => autograd::no_grad(|| lstm_cell_composite(&gates, &c))?.storage(),
        };
        let out = Tensor::from_op(out, &shape, c.dtype(), c.device(), &[&gates, &c], || GradFn::LstmCell);
        Ok((out.select(0usize, 0)?, out.select(0usize, 1)?))
    }

    /// The backward rule of [`Tensor::lstm_cell`]: from `dout` (`[2, N, H]`, the gradients of
    /// `h'` and `c'`), the forward's inputs and its output `out` (`[2, N, H]`), the gradients
    /// of `gates` and `c`.
    pub(crate) fn lstm_cell_backward(dout: &Tensor, gates: &Tensor, c: &Tensor, out: &Tensor) -> Result<(Tensor, Tensor)> {
        let dout = dout.contiguous()?;
        if let Some(r) = try_fused(&FusedOp::LstmCellBackward, &[gates, c, out, &dout]) {
            let mut r = r?;
            let fresh = |storage, shape: &[usize]| Tensor::from_parts(storage, Layout::contiguous(shape), c.dtype(), c.device(), None);
            let dc = fresh(r.pop().expect("two outputs, counted by try_fused"), c.shape());
            return Ok((fresh(r.pop().expect("two outputs"), gates.shape()), dc));
        }
        let a = gates.chunk(4, 1usize)?;
        let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
        let (dh, dc_new) = (dout.select(0usize, 0)?, dout.select(0usize, 1)?);
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
        Ok((Tensor::cat(&[&di, &df, &dg, &d_o], 1usize)?, dc_total.mul(&f)?))
    }
}

/// [`Tensor::lstm_cell`] from primitives: `[2, N, H]` holding `h'` then `c'`. The oracle of
/// [`FusedOp::LstmCell`].
fn lstm_cell_composite(gates: &Tensor, c: &Tensor) -> Result<Tensor> {
    let a = gates.chunk(4, 1usize)?;
    let (i, f, g, o) = (a[0].sigmoid()?, a[1].sigmoid()?, a[2].tanh()?, a[3].sigmoid()?);
    let c_new = f.mul(c)?.add(&i.mul(&g)?)?;
    let h_new = o.mul(&c_new.tanh()?)?;
    Tensor::stack(&[&h_new, &c_new], 0usize)
}
