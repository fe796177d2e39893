//! Elementwise ops: unary functions, broadcasting binary ops, comparisons, select and cast.

use crate::autograd::GradFn;
use crate::backend::{BinaryOp, CmpOp, Strided, UnaryOp};
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{broadcast_dims, broadcast_shapes, Dims, Layout};
use crate::ops::{check_same_device, check_same_dtype};
use crate::tensor::Tensor;

fn binary_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Pow => "pow",
        BinaryOp::Maximum => "maximum",
        BinaryOp::Minimum => "minimum",
    }
}

/// Broadcast layouts of two tensors, or an error naming both shapes.
fn broadcast2(op: &'static str, a: &Tensor, b: &Tensor) -> Result<(Dims, Layout, Layout)> {
    check_same_device(op, a, b)?;
    let shape = broadcast_dims(op, a.shape(), b.shape())?;
    let (la, lb) = (a.layout().broadcast_to(&shape)?, b.layout().broadcast_to(&shape)?);
    Ok((shape, la, lb))
}

impl Tensor {
    pub(crate) fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        let int_ok = matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign) && self.dtype() == DType::I64;
        if !self.dtype().is_float() && !int_ok {
            return Err(Error::dtype("unary", self.dtype(), format!("{op:?} needs a floating-point tensor")));
        }
        let storage = self.with_strided(|x| self.device().backend().unary(op, x))?;
        Ok(Tensor::from_op(storage, self.shape(), self.dtype(), self.device(), &[self], || GradFn::Unary(op)))
    }

    pub fn neg(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Neg)
    }
    pub fn abs(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Abs)
    }
    /// -1, 0 or 1; its gradient is zero.
    pub fn sign(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sign)
    }
    pub fn exp(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Exp)
    }
    pub fn log(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Log)
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sqrt)
    }
    pub fn recip(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Recip)
    }
    pub fn sin(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Sin)
    }
    pub fn cos(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Cos)
    }
    pub fn erf(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Erf)
    }
    pub fn floor(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Floor)
    }
    pub fn ceil(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Ceil)
    }
    pub fn round(&self) -> Result<Tensor> {
        self.unary(UnaryOp::Round)
    }
    /// `1 / sqrt(x)`.
    pub fn rsqrt(&self) -> Result<Tensor> {
        self.sqrt()?.recip()
    }
    pub fn square(&self) -> Result<Tensor> {
        self.mul(self)
    }

    pub(crate) fn binary(&self, rhs: &Tensor, op: BinaryOp) -> Result<Tensor> {
        if op == BinaryOp::Add {
            if let Some(y) = add_wide(self, rhs)? {
                return Ok(y);
            }
        }
        if let Some(p) = crate::autocast::promoted(&[self, rhs])? {
            return p[0].binary(&p[1], op);
        }
        let name = binary_name(op);
        check_same_dtype(name, self, rhs)?;
        if self.dtype() == DType::Bool && !matches!(op, BinaryOp::Maximum | BinaryOp::Minimum) {
            return Err(Error::dtype(name, DType::Bool, "bool tensors support only maximum (or) and minimum (and)"));
        }
        if op == BinaryOp::Pow && !self.dtype().is_float() {
            return Err(Error::dtype(name, self.dtype(), "pow needs floating-point tensors"));
        }
        let (shape, ll, rl) = broadcast2(name, self, rhs)?;
        let (ls, rs) = (self.storage(), rhs.storage());
        let dtype = self.dtype();
        let storage = self.device().backend().binary(op, Strided { storage: &*ls, layout: &ll, dtype }, Strided { storage: &*rs, layout: &rl, dtype })?;
        Ok(Tensor::from_op(storage, &shape, dtype, self.device(), &[self, rhs], || GradFn::Binary(op)))
    }

    /// `self + rhs`, broadcasting.
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Add)
    }
    pub fn sub(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Sub)
    }
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Mul)
    }
    pub fn div(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Div)
    }
    pub fn pow(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Pow)
    }
    /// Elementwise maximum; on ties the gradient goes to `self`.
    pub fn maximum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Maximum)
    }
    /// Elementwise minimum; on ties the gradient goes to `self`.
    pub fn minimum(&self, rhs: &Tensor) -> Result<Tensor> {
        self.binary(rhs, BinaryOp::Minimum)
    }

    /// A scalar of this tensor's dtype and device, for the `*_scalar` ops. Constants are
    /// cached per device ([`crate::Device::constant`]): on a GPU each new one would cost a
    /// dispatch, and they are only ever read (ops never write into existing storage, and these
    /// never reach `assign`).
    pub(crate) fn scalar_like(&self, value: f64) -> Result<Tensor> {
        let (dtype, device) = (self.dtype(), self.device());
        let storage = device.constant(dtype, value, || device.backend().full(1, value, dtype))?;
        Ok(Tensor::from_parts(storage, Layout::contiguous(&[]), dtype, device, None))
    }

    pub fn add_scalar(&self, v: f64) -> Result<Tensor> {
        self.add(&self.scalar_like(v)?)
    }
    pub fn sub_scalar(&self, v: f64) -> Result<Tensor> {
        self.sub(&self.scalar_like(v)?)
    }
    pub fn mul_scalar(&self, v: f64) -> Result<Tensor> {
        self.mul(&self.scalar_like(v)?)
    }
    pub fn div_scalar(&self, v: f64) -> Result<Tensor> {
        self.div(&self.scalar_like(v)?)
    }
    pub fn pow_scalar(&self, v: f64) -> Result<Tensor> {
        self.pow(&self.scalar_like(v)?)
    }
    pub fn maximum_scalar(&self, v: f64) -> Result<Tensor> {
        self.maximum(&self.scalar_like(v)?)
    }
    pub fn minimum_scalar(&self, v: f64) -> Result<Tensor> {
        self.minimum(&self.scalar_like(v)?)
    }
    /// Limits every element to `[min, max]`.
    pub fn clamp(&self, min: f64, max: f64) -> Result<Tensor> {
        self.maximum_scalar(min)?.minimum_scalar(max)
    }

    fn compare(&self, rhs: &Tensor, op: CmpOp) -> Result<Tensor> {
        check_same_dtype("compare", self, rhs)?;
        let (shape, ll, rl) = broadcast2("compare", self, rhs)?;
        let (ls, rs) = (self.storage(), rhs.storage());
        let dtype = self.dtype();
        let storage = self.device().backend().compare(op, Strided { storage: &*ls, layout: &ll, dtype }, Strided { storage: &*rs, layout: &rl, dtype })?;
        // Comparisons have no gradient: the result is not recorded.
        Ok(Tensor::untracked_op(storage, &shape, DType::Bool, self.device(), &[self, rhs], || GradFn::Compare(op)))
    }

    pub fn eq(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Eq)
    }
    pub fn ne(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Ne)
    }
    pub fn lt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Lt)
    }
    pub fn le(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Le)
    }
    pub fn gt(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Gt)
    }
    pub fn ge(&self, rhs: &Tensor) -> Result<Tensor> {
        self.compare(rhs, CmpOp::Ge)
    }
    pub fn gt_scalar(&self, v: f64) -> Result<Tensor> {
        self.gt(&self.scalar_like(v)?)
    }
    pub fn lt_scalar(&self, v: f64) -> Result<Tensor> {
        self.lt(&self.scalar_like(v)?)
    }
    pub fn eq_scalar(&self, v: f64) -> Result<Tensor> {
        self.eq(&self.scalar_like(v)?)
    }

    /// `cond ? on_true : on_false`, broadcasting all three (`torch.where`).
    pub fn where_cond(cond: &Tensor, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        if cond.dtype() != DType::Bool {
            return Err(Error::dtype("where", cond.dtype(), "the condition must be bool"));
        }
        if let Some(p) = crate::autocast::promoted(&[on_true, on_false])? {
            return Tensor::where_cond(cond, &p[0], &p[1]);
        }
        check_same_dtype("where", on_true, on_false)?;
        check_same_device("where", cond, on_true)?;
        check_same_device("where", on_true, on_false)?;
        let shape = broadcast_shapes("where", on_true.shape(), on_false.shape())?;
        let shape = broadcast_shapes("where", cond.shape(), &shape)?;
        let (cl, tl, fl) = (cond.layout().broadcast_to(&shape)?, on_true.layout().broadcast_to(&shape)?, on_false.layout().broadcast_to(&shape)?);
        let (cs, ts, fs) = (cond.storage(), on_true.storage(), on_false.storage());
        let dtype = on_true.dtype();
        let storage = on_true.device().backend().select(
            Strided { storage: &*cs, layout: &cl, dtype: DType::Bool },
            Strided { storage: &*ts, layout: &tl, dtype },
            Strided { storage: &*fs, layout: &fl, dtype },
        )?;
        let cond = cond.detach();
        Ok(Tensor::from_op(storage, &shape, dtype, on_true.device(), &[on_true, on_false], || GradFn::Select { cond }))
    }

    /// This tensor converted to `dtype`; gradients flow back through float casts.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let storage = self.with_strided(|x| self.device().backend().cast(x, dtype))?;
        let from = self.dtype();
        if !dtype.is_float() {
            return Ok(Tensor::untracked_op(storage, self.shape(), dtype, self.device(), &[self], || GradFn::Cast { from }));
        }
        Ok(Tensor::from_op(storage, self.shape(), dtype, self.device(), &[self], || GradFn::Cast { from }))
    }
}

/// The sum of an f32 and an f16 tensor of one shape under autocast (a residual stream and a
/// layer's output), as one [`AddWide`] kernel where the device has one: recorded as the
/// promoted composite, a cast node and an add node over the one result (neither rule reads
/// values), so the gradients are the composite's. `None`: the caller promotes and adds.
fn add_wide(lhs: &Tensor, rhs: &Tensor) -> Result<Option<Tensor>> {
    // An observer (anomaly detection's trace beside the CPU's, export) wants the composite's ops.
    if crate::autocast::autocast_dtype().is_none() || crate::observe::active() {
        return Ok(None);
    }
    let (wide, low, low_first) = match (lhs.dtype(), rhs.dtype()) {
        (DType::F32, DType::F16) => (lhs, rhs, false),
        (DType::F16, DType::F32) => (rhs, lhs, true),
        _ => return Ok(None),
    };
    if wide.shape() != low.shape() || !wide.is_contiguous() || !low.is_contiguous() || wide.device() != low.device() {
        return Ok(None);
    }
    let Some(r) = crate::fused::run(&AddWide, &[wide, low]) else { return Ok(None) };
    let y = r?.remove(0);
    let cast = y.recorded(&[low], || GradFn::Cast { from: DType::F16 });
    let (a, b) = if low_first { (&cast, wide) } else { (wide, &cast) };
    Ok(Some(y.recorded(&[a, b], || GradFn::Binary(BinaryOp::Add))))
}

/// `y = a + b` of an f32 `a` and an f16 `b` (one shape, contiguous), written in f32: the sum
/// autocast's promotion computes (`a + b.to_dtype(F32)`, one rounding) without the cast's
/// kernel and its f32 copy. Inputs: `a` f32, `b` f16. Output: `y` f32, shaped like `a`.
/// [`Tensor::add`] records its gradients as the composite's.
#[derive(Clone, Copy, Debug)]
pub struct AddWide;

impl CustomOp for AddWide {
    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![inputs[0].add(&inputs[1].to_dtype(DType::F32)?)?])
    }
}

crate::custom_kernel_name! {
    AddWide => "add_wide",
}
