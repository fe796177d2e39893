//! The GRU cell: the pointwise arithmetic of a GRU step as the custom op [`GruCell`], one
//! fused kernel where the device has one and from primitives otherwise, its gradient too
//! ([`GruCellBackward`]).

use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused;
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

impl Tensor {
    /// One GRU step (`torch.nn.GRUCell`'s arithmetic) from the input projection `x_gates`
    /// (`x W_ih^T + b_ih`), the recurrent one `h_gates` (`h W_hh^T + b_hh`), both with the gates
    /// in PyTorch's order r, z, n, and the state `h`: returns `h'`, where
    ///
    /// ```text
    /// r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r * h_n)
    /// h' = (1 - z) * n + z * h
    /// ```
    ///
    /// Runs as one fused kernel where the device has one ([`GruCell`]), its gradient too
    /// ([`GruCellBackward`]); the result is the same either way.
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
        Ok(Tensor::custom(GruCell, &inputs.iter().collect::<Vec<_>>())?.remove(0))
    }
}

/// The GRU's gates from primitives: `[r, z, n, h_n]`, `h_n` the recurrent term of n.
fn gru_gates(x_gates: &Tensor, h_gates: &Tensor) -> Result<[Tensor; 4]> {
    let (x3, h3) = (x_gates.chunk(3, 1usize)?, h_gates.chunk(3, 1usize)?);
    let r = x3[0].add(&h3[0])?.sigmoid()?;
    let z = x3[1].add(&h3[1])?.sigmoid()?;
    let n = x3[2].add(&r.mul(&h3[2])?)?.tanh()?;
    Ok([r, z, n, h3[2].clone()])
}

/// The pointwise part of a GRU step ([`Tensor::gru_cell`]), gates in PyTorch's order r, z, n:
///
/// ```text
/// r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r * h_n),  h' = n + z * (h - n)
/// ```
///
/// Inputs (contiguous): `x_gates` `[N, 3H]` (`x W_ih^T + b_ih`), `h_gates` `[N, 3H]` (`h W_hh^T +
/// b_hh`), `h` `[N, H]`. Output: `h'` `[N, H]`. Its backward is [`GruCellBackward`].
#[derive(Clone, Copy, Debug)]
pub struct GruCell;

impl CustomOp for GruCell {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(inputs[2].shape().to_vec(), inputs[2].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let [_, z, n, _] = gru_gates(inputs[0], inputs[1])?;
        // (1 - z) * n + z * h, written with one multiply fewer.
        Ok(vec![n.add(&z.mul(&inputs[2].sub(&n)?)?)?])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], _outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let dh_new = grad.contiguous()?;
        let grads = fused::run_or_composite(&GruCellBackward, &[&inputs[0], &inputs[1], &inputs[2], &dh_new])?;
        Ok(grads.into_iter().map(Some).collect())
    }
}

/// The gradient of [`GruCell`]. Inputs (contiguous): `x_gates`, `h_gates`, `h` and the gradient
/// of `h'` (`[N, H]`). Outputs: the gradients of `x_gates` `[N, 3H]`, `h_gates` `[N, 3H]` and `h`
/// `[N, H]` (the last only through `h' = ... + z * h`).
#[derive(Clone, Copy, Debug)]
pub struct GruCellBackward;

impl CustomOp for GruCellBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        inputs[..3].iter().map(|t| (t.shape().to_vec(), t.dtype())).collect()
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (gx, gh, h, dh_new) = (inputs[0], inputs[1], inputs[2], inputs[3]);
        let [r, z, n, h_n] = gru_gates(gx, gh)?;
        // h' = n + z (h - n).
        let dn = dh_new.mul(&z.neg()?.add_scalar(1.0)?)?;
        let dz = dh_new.mul(&h.sub(&n)?)?;
        let dn_pre = dn.mul(&n.square()?.neg()?.add_scalar(1.0)?)?;
        let dr_pre = dn_pre.mul(&h_n)?.mul(&r.mul(&r.neg()?.add_scalar(1.0)?)?)?;
        let dz_pre = dz.mul(&z.mul(&z.neg()?.add_scalar(1.0)?)?)?;
        let dgx = Tensor::cat(&[&dr_pre, &dz_pre, &dn_pre], 1usize)?;
        let dgh = Tensor::cat(&[&dr_pre, &dz_pre, &dn_pre.mul(&r)?], 1usize)?;
        Ok(vec![dgx, dgh, dh_new.mul(&z)?])
    }
}

crate::custom_kernel_name! {
    GruCell => "gru_cell",
    GruCellBackward => "gru_cell_backward",
}
