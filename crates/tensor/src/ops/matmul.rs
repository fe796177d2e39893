//! Matrix products with PyTorch's `matmul` semantics (1-D operands, broadcast batch dims),
//! and `linear`, the layer's product folded into one GEMM.

use crate::autocast::Product;
use crate::autograd::GradFn;
use crate::backend::{BinaryOp, CustomKernel, Strided};
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fused;
use crate::layout::{broadcast_dims, Layout};
use crate::ops::{check_float, check_same_device, check_same_dtype};
use crate::tensor::Tensor;

impl Tensor {
    /// Matrix product as `torch.matmul`: `[.., M, K] @ [.., K, N] -> [.., M, N]` with the batch
    /// dims broadcast; a 1-D lhs is a row vector and a 1-D rhs a column vector (removed after).
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        if let Some([Some(a), Some(b)]) = crate::autocast::lowered([Some(self), Some(rhs)], Product::Matmul, crate::autocast::matmul_ops(self, rhs))? {
            return a.matmul(&b);
        }
        check_same_dtype("matmul", self, rhs)?;
        check_same_device("matmul", self, rhs)?;
        check_float("matmul", self)?;
        if self.rank() == 0 || rhs.rank() == 0 {
            return Err(Error::shape("matmul", self.shape(), rhs.shape(), "must both have at least one dim"));
        }
        match (self.rank(), rhs.rank()) {
            (1, 1) => self.unsqueeze(0usize)?.matmul_nd(&rhs.unsqueeze(1usize)?)?.reshape(&[]),
            (1, _) => self.unsqueeze(0usize)?.matmul_nd(rhs)?.squeeze(-2isize),
            (_, 1) => self.matmul_nd(&rhs.unsqueeze(1usize)?)?.squeeze(-1isize),
            _ => self.matmul_nd(rhs),
        }
    }

    /// Both operands of rank >= 2.
    fn matmul_nd(&self, rhs: &Tensor) -> Result<Tensor> {
        let (ls, rs) = (self.shape(), rhs.shape());
        let (m, k) = (ls[ls.len() - 2], ls[ls.len() - 1]);
        let (k2, n) = (rs[rs.len() - 2], rs[rs.len() - 1]);
        if k != k2 {
            return Err(Error::shape("matmul", ls, rs, "disagree on the inner dimension"));
        }
        let batch = broadcast_dims("matmul", &ls[..ls.len() - 2], &rs[..rs.len() - 2])
            .map_err(|_| Error::shape("matmul", ls, rs, "have batch dims that cannot be broadcast"))?;
        let b: usize = batch.iter().product();
        // A 3-D view of the operand's own storage when the batch strides merge (always for <= 1
        // batch dim), else of a copy. The view is only a layout: the backend reads the operand.
        let as3 = |t: &Tensor, r: usize, c: usize| -> Result<(Tensor, Layout)> {
            let mut full = batch.clone();
            full.extend_from_slice(&[r, c]);
            if let Some(l) = t.layout().broadcast_to(&full)?.reshape(&[b, r, c]) {
                return Ok((t.clone(), l));
            }
            let copy = t.expand(&full)?.reshape(&[b, r, c])?;
            let l = copy.layout().clone();
            Ok((copy, l))
        };
        let dtype = self.dtype();
        let mut out_shape = batch.clone();
        out_shape.extend_from_slice(&[m, n]);
        crate::tensor::checked_numel("matmul", &out_shape, dtype)?;
        let ((l3, ll), (r3, rl)) = (as3(self, m, k)?, as3(rhs, k, n)?);
        let (lst, rst) = (l3.storage(), r3.storage());
        let storage = self.device().backend().matmul(Strided { storage: &*lst, layout: &ll, dtype }, Strided { storage: &*rst, layout: &rl, dtype })?;
        Ok(Tensor::from_op(storage, &out_shape, dtype, self.device(), &[self, rhs], || GradFn::Matmul))
    }

    /// `x @ weight^T + bias` (`torch.nn.functional.linear`). Leading dims are folded into one
    /// matrix so the product is a single GEMM.
    ///
    /// # Shapes
    /// - `self`: `[*, in]` (any number of leading dims, including none)
    /// - `weight`: `[out, in]`, `bias`: `[out]`
    /// - result: `[*, out]`
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        // x [*, in] against weight [out, in]: 2 * numel(x) * out operations.
        let ops = 2 * (self.numel() as u64).saturating_mul(weight.shape().first().copied().unwrap_or(0) as u64);
        if let Some([Some(x), Some(w), b]) = crate::autocast::lowered([Some(self), Some(weight), bias], Product::Matmul, ops)? {
            return x.linear(&w, b.as_ref());
        }
        const OP: &str = "linear";
        check_float(OP, self)?;
        check_same_dtype(OP, self, weight)?;
        check_same_device(OP, self, weight)?;
        let (xs, ws) = (self.shape(), weight.shape());
        if xs.is_empty() || ws.len() != 2 || xs[xs.len() - 1] != ws[1] {
            return Err(Error::shape(OP, xs, ws, "must be an [*, in] input and an [out, in] weight"));
        }
        let (fan_in, fan_out) = (ws[1], ws[0]);
        if let Some(b) = bias.filter(|b| b.shape() != [fan_out]) {
            return Err(Error::shape(OP, ws, b.shape(), format!("weight and bias disagree: the bias must be [out] = [{fan_out}]")));
        }
        let mut out_shape = xs.to_vec();
        *out_shape.last_mut().expect("rank >= 1") = fan_out;
        // The leading dims folded into one: [M, in] (a vector stays one).
        let x2 = if xs.len() <= 2 { self.clone() } else { self.reshape(&[self.numel() / fan_in.max(1), fan_in])? };
        let folded = xs.len() > 2;
        let unfold = |y: Tensor| if folded { y.reshape(&out_shape) } else { Ok(y) };
        if let Some(y) = bias.map(|b| fused_linear(&x2, weight, b)).transpose()?.flatten() {
            return unfold(y);
        }
        let out = unfold(x2.matmul(&weight.t()?)?)?;
        match bias {
            None => Ok(out),
            Some(b) => out.add(b),
        }
    }
}

/// `x weight^T + bias` for a matrix `x` as one kernel where the device has one
/// ([`MatmulBias`]: the bias added as the product is stored), else `None` (the
/// caller runs the product and the add). The graph records the product and the bias addition
/// as the composite does, two nodes over the one result (neither rule reads the product's
/// values), so the gradients, and the engine's gathering of a weight several products share,
/// are the composite's.
fn fused_linear(x: &Tensor, weight: &Tensor, bias: &Tensor) -> Result<Option<Tensor>> {
    let plain = x.rank() == 2 && [x, weight, bias].iter().all(|t| t.is_contiguous() && t.dtype() == x.dtype() && t.device() == x.device());
    let Some(r) = plain.then(|| fused::run(&MatmulBias, &[x, weight, bias])).flatten() else { return Ok(None) };
    let y = r?.remove(0);
    let product = y.recorded(&[x, &weight.t()?], || GradFn::Matmul);
    Ok(Some(y.recorded(&[&product, bias], || GradFn::Binary(BinaryOp::Add))))
}

/// A linear layer with its bias (`torch.addmm(bias, x, weight.t())`): `y = x weight^T + bias`,
/// the bias added to every row as the product is stored. Inputs (contiguous): `x` `[M, K]`,
/// `weight` `[N, K]`, `bias` `[N]`. Output: `y` `[M, N]`. Its gradients are the product's and
/// the bias addition's ([`Tensor::linear`] records both).
#[derive(Clone, Copy, Debug)]
pub struct MatmulBias;

impl CustomKernel for MatmulBias {
    fn name(&self) -> &'static str {
        "matmul_bias"
    }

    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        // x [M, K] times the weight [N, K] transposed.
        match (inputs.first()?.layout.shape(), inputs.get(1)?.layout.shape()) {
            (&[m, k], &[n, _]) => Some(2 * (m * k * n) as u64),
            _ => None,
        }
    }
}

impl CustomOp for MatmulBias {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(vec![inputs[0].shape()[0], inputs[1].shape()[0]], inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![inputs[0].matmul(&inputs[1].t()?)?.add(inputs[2])?])
    }
}

/// A linear layer's weight and bias gradients from one read of its output's gradient:
/// `g [M, N]` and the layer's input `x [M, K]` (any strides) give `g^T x` `[N, K]` and `g`
/// summed over its rows `[N]`, in their dtype, or in f32 where `wide` (autocast's f16 or bf16
/// copies of f32 parameters, as [`MatmulWide`] and `SumRowsWide` write them). A kernel can sum
/// the bias's rows from the slices of `g^T` it stages for the product, where the sum alone
/// reads `g` once more. Composite: the product, then the sum (both operands widened first
/// where `wide`).
#[derive(Clone, Copy, Debug)]
pub struct LinearGrads {
    pub wide: bool,
}

impl CustomKernel for LinearGrads {
    fn name(&self) -> &'static str {
        "linear_grads"
    }

    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        match (inputs.first()?.layout.shape(), inputs.get(1)?.layout.shape()) {
            (&[m, n], &[_, k]) => Some(2 * (m * k * n) as u64),
            _ => None,
        }
    }
}

impl CustomOp for LinearGrads {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (n, k) = (inputs[0].shape()[1], inputs[1].shape()[1]);
        let dtype = if self.wide { DType::F32 } else { inputs[0].dtype() };
        vec![(vec![n, k], dtype), (vec![n], dtype)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (g, x) = match self.wide {
            true => (inputs[0].to_dtype(DType::F32)?, inputs[1].to_dtype(DType::F32)?),
            false => (inputs[0].clone(), inputs[1].clone()),
        };
        Ok(vec![g.t()?.matmul(&x)?, g.sum(&[0], false)?])
    }
}

impl Tensor {
    /// `(g^T x, g summed over its rows)`, a linear layer's weight and bias gradients (in f32
    /// where `wide`), from one kernel ([`LinearGrads`]) where the device has it for these
    /// matrices, else `None` (the caller takes the product and the sum apart).
    pub(crate) fn linear_grads(g: &Tensor, x: &Tensor, wide: bool) -> Option<Result<(Tensor, Tensor)>> {
        let shaped = g.rank() == 2 && x.rank() == 2 && g.shape()[0] == x.shape()[0];
        if !shaped || g.dtype() != x.dtype() || g.device() != x.device() {
            return None;
        }
        Some(fused::run(&LinearGrads { wide }, &[g, x])?.map(|mut outs| {
            let db = outs.pop().expect("two outputs");
            (outs.pop().expect("two outputs"), db)
        }))
    }
}

/// The product of two f16 or bf16 matrices with its sums written in f32 rather than rounded to
/// the operands' type (cuBLAS's `gemmEx` with an f32 output): `a` `[M, K]`, `b` `[K, N]`, any
/// strides; output `[M, N]` f32. Backward asks for it where a product's gradient is of an
/// autocast copy of an f32 tensor, which would be cast to f32 at once. Composite: both
/// operands widened to f32, then their product (each term is exact in f32; only the order of
/// the sums may differ from a kernel's).
#[derive(Clone, Copy, Debug)]
pub struct MatmulWide;

impl CustomKernel for MatmulWide {
    fn name(&self) -> &'static str {
        "matmul_wide"
    }

    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        match (inputs.first()?.layout.shape(), inputs.get(1)?.layout.shape()) {
            (&[m, k], &[_, n]) => Some(2 * (m * k * n) as u64),
            _ => None,
        }
    }
}

impl CustomOp for MatmulWide {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(vec![inputs[0].shape()[0], inputs[1].shape()[1]], DType::F32)]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![inputs[0].to_dtype(DType::F32)?.matmul(&inputs[1].to_dtype(DType::F32)?)?])
    }
}

impl Tensor {
    /// `self @ b` in f32 from low-precision matrices ([`MatmulWide`]) where the device has the
    /// kernel, else `None` (the caller takes the product in the operands' type).
    pub(crate) fn matmul_wide(&self, b: &Tensor) -> Option<Result<Tensor>> {
        let low = matches!(self.dtype(), DType::F16 | DType::BF16) && self.dtype() == b.dtype();
        let shaped = self.rank() == 2 && b.rank() == 2 && self.shape()[1] == b.shape()[0] && self.device() == b.device();
        if !(low && shaped) {
            return None;
        }
        Some(fused::run(&MatmulWide, &[self, b])?.map(|mut outs| outs.remove(0)))
    }
}
