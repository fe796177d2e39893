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
        product_flops(inputs, 0)
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
        product_flops(inputs, 1)
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
        product_flops(inputs, 1)
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

impl Tensor {
    /// `self.linear(w1, b1)?.gelu()?.linear(w2, b2)`, with the same values and gradients: a
    /// transformer's feed-forward block on GELU. While a graph is recorded and no autocast region
    /// casts its products, it is one node ([`GeluMlp`]) whose kernels, where the device has them,
    /// write the hidden layer and its GELU from one product ([`LinearGelu`]) and take GELU's
    /// gradient as the product `dy w2` is stored ([`MatmulGeluBackward`]): two passes over the
    /// hidden layer fewer.
    ///
    /// # Shapes
    /// - `self`: `[*, in]`, `w1`: `[hidden, in]`, `b1`: `[hidden]`, `w2`: `[out, hidden]`,
    ///   `b2`: `[out]`; result `[*, out]`
    pub fn gelu_mlp(&self, w1: &Tensor, b1: Option<&Tensor>, w2: &Tensor, b2: Option<&Tensor>) -> Result<Tensor> {
        let given: Vec<&Tensor> = [Some(self), Some(w1), b1, Some(w2), b2].into_iter().flatten().collect();
        let (xs, s1, s2) = (self.shape(), w1.shape(), w2.shape());
        let recording = crate::grad_mode::is_grad_enabled() && given.iter().any(|t| t.requires_grad());
        let shaped = !xs.is_empty()
            && s1.len() == 2
            && s2.len() == 2
            && xs[xs.len() - 1] == s1[1]
            && s2[1] == s1[0]
            && b1.is_none_or(|b| b.shape() == [s1[0]])
            && b2.is_none_or(|b| b.shape() == [s2[0]]);
        let plain = given[1..].iter().all(|t| t.dtype() == self.dtype() && t.device() == self.device() && t.is_contiguous());
        let ops = 2 * (self.numel() as u64).saturating_mul(s1.first().copied().unwrap_or(0) as u64);
        if !(recording && shaped && plain && self.dtype().is_float()) || crate::autocast::casts(&given, ops) {
            return self.linear(w1, b1)?.gelu()?.linear(w2, b2);
        }
        let x = self.contiguous()?.reshape(&[self.numel() / s1[1].max(1), s1[1]])?;
        let inputs: Vec<&Tensor> = [Some(&x), Some(w1), b1, Some(w2), b2].into_iter().flatten().collect();
        let y = Tensor::custom(GeluMlp { bias1: b1.is_some(), bias2: b2.is_some() }, &inputs)?.remove(0);
        let mut out_shape = xs.to_vec();
        *out_shape.last_mut().expect("rank >= 1") = s2[0];
        y.reshape(&out_shape)
    }
}

/// A transformer's feed-forward block on GELU, `y = gelu(x w1^T + b1) w2^T + b2`
/// ([`Tensor::gelu_mlp`]). Inputs (contiguous): `x` `[M, K]`, `w1` `[H, K]`, `b1` `[H]` where
/// `bias1`, `w2` `[N, H]`, `b2` `[N]` where `bias2`. Outputs: `y` `[M, N]`, then the hidden
/// layer `h` and `gelu(h)`, which the backward reads. Composite: [`LinearGelu`] (or the
/// product, the bias and GELU), then the second layer; its backward takes `h`'s gradient from
/// [`MatmulGeluBackward`] and the rest as two linear layers do.
#[derive(Clone, Copy, Debug)]
pub struct GeluMlp {
    pub bias1: bool,
    pub bias2: bool,
}

impl GeluMlp {
    /// `(x, w1, b1, w2, b2)` of the inputs as given.
    fn parts<'t, T>(&self, inputs: &'t [T]) -> (&'t T, &'t T, Option<&'t T>, &'t T, Option<&'t T>) {
        let b1 = self.bias1.then(|| &inputs[2]);
        let at = 2 + self.bias1 as usize;
        (&inputs[0], &inputs[1], b1, &inputs[at], self.bias2.then(|| &inputs[at + 1]))
    }
}

impl CustomKernel for GeluMlp {
    fn name(&self) -> &'static str {
        "gelu_mlp"
    }
}

impl CustomOp for GeluMlp {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let (x, w1, _, w2, _) = self.parts(inputs);
        let hidden = vec![x.shape()[0], w1.shape()[0]];
        vec![(vec![x.shape()[0], w2.shape()[0]], x.dtype()), (hidden.clone(), x.dtype()), (hidden, x.dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (x, w1, b1, w2, b2) = self.parts(inputs);
        let (h, g) = match b1 {
            Some(b1) => {
                let mut hg = fused::run_or_composite(&LinearGelu, &[x, w1, b1])?;
                let g = hg.pop().expect("two outputs");
                (hg.pop().expect("two outputs"), g)
            }
            None => {
                let h = x.linear(w1, None)?;
                let g = h.gelu()?;
                (h, g)
            }
        };
        Ok(vec![g.linear(w2, b2.copied())?, h, g])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let dy = grad.contiguous()?;
        let (x, w1, _, w2, _) = self.parts(inputs);
        let (h, g) = (&outputs[1], &outputs[2]);
        let dh = fused::run_or_composite(&MatmulGeluBackward, &[&dy, w2, h])?.remove(0);
        let (dw2, db2) = weight_and_bias_grads(&dy, g)?;
        let dx = dh.matmul(w1)?;
        let (dw1, db1) = weight_and_bias_grads(&dh, x)?;
        let mut grads = vec![Some(dx), Some(dw1)];
        grads.extend(self.bias1.then_some(Some(db1)));
        grads.push(Some(dw2));
        grads.extend(self.bias2.then_some(Some(db2)));
        Ok(grads)
    }

    fn reads_input(&self, i: usize) -> bool {
        // x and the two weights; not the biases.
        let (b1, b2) = (self.bias1.then_some(2), self.bias2.then_some(3 + self.bias1 as usize));
        Some(i) != b1 && Some(i) != b2
    }
}

/// A linear layer's weight and bias gradients from its output's gradient `g` `[M, N]` and its
/// input `x` `[M, K]`: `g^T x` and `g` summed over its rows, from one kernel where the device
/// has it ([`LinearGrads`]).
fn weight_and_bias_grads(g: &Tensor, x: &Tensor) -> Result<(Tensor, Tensor)> {
    match Tensor::linear_grads(g, x, false) {
        Some(grads) => grads,
        None => Ok((g.t()?.matmul(x)?, g.sum(&[0], false)?)),
    }
}

/// A linear layer and GELU after it, `h = x weight^T + bias` and `gelu(h)`, from one product
/// where the device has the kernel (GELU applied as the sums are stored). Inputs (contiguous):
/// `x` `[M, K]`, `weight` `[N, K]`, `bias` `[N]`. Outputs: `h` and `gelu(h)`, `[M, N]` each.
/// No backward of its own: [`GeluMlp`] has it.
#[derive(Clone, Copy, Debug)]
pub struct LinearGelu;

impl CustomKernel for LinearGelu {
    fn name(&self) -> &'static str {
        "linear_gelu"
    }

    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        product_flops(inputs, 0)
    }
}

impl CustomOp for LinearGelu {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        let shape = vec![inputs[0].shape()[0], inputs[1].shape()[0]];
        vec![(shape.clone(), inputs[0].dtype()), (shape, inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let h = inputs[0].linear(inputs[1], Some(inputs[2]))?;
        let g = h.gelu()?;
        Ok(vec![h, g])
    }
}

/// The gradient of the hidden layer `h` in [`GeluMlp`]: `(dy weight) * gelu'(h)`, GELU's
/// gradient taken as the product is stored. Inputs (contiguous): `dy` `[M, N]`, `weight` `[N, K]`, `h` `[M, K]`.
/// Output: `dh` `[M, K]`. Composite: the product, then [`crate::ops::GeluBackward`].
#[derive(Clone, Copy, Debug)]
pub struct MatmulGeluBackward;

impl CustomKernel for MatmulGeluBackward {
    fn name(&self) -> &'static str {
        "matmul_gelu_backward"
    }

    fn flops(&self, inputs: &[Strided]) -> Option<u64> {
        product_flops(inputs, 1)
    }
}

impl CustomOp for MatmulGeluBackward {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(inputs[2].shape().to_vec(), inputs[2].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (dy, w, h) = (inputs[0], inputs[1], inputs[2]);
        fused::run_or_composite(&crate::ops::GeluBackward, &[h, &dy.matmul(w)?])
    }
}

/// Operations of a product of the 2-D operands `inputs[0]` and `inputs[1]` (two per
/// multiply-add): every element of the first against the second's dimension `b_dim`, the one
/// it does not share (the weight `[N, K]` of a linear layer: 0).
fn product_flops(inputs: &[Strided], b_dim: usize) -> Option<u64> {
    match (inputs.first()?.layout.shape(), inputs.get(1)?.layout.shape()) {
        (&[r, c], b @ &[_, _]) => Some(2 * (r * c * b[b_dim]) as u64),
        _ => None,
    }
}
