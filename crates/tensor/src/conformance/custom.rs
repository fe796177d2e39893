//! Custom ops against their composites ([`crate::custom`]): the checks every fused kernel
//! passes, wherever its op is defined, and a custom op of the suite's own that exercises the
//! open path (an op whose kernel its own crate wrote, run through [`Tensor::custom`] with its
//! backward) on every backend.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::grads::{check_grads, leaf};
use super::{assert_close, values};
use crate::backend::{BinaryOp, CustomKernel, Storage, Strided};
use crate::{no_fusion, Backend, CustomOp, DType, Device, Result, Tensor};

/// Runs `f` on `inputs` (float leaves) with fusion on and with it off, and compares each
/// output and the gradient of every input for the loss `sum_k sum(out_k * w_k)` (seeded `w`).
/// The outputs of `f` on `inputs` (float leaves) and the gradient of every input for the loss
/// `sum_k sum(out_k * w_k)` (seeded `w`), as f64s.
#[track_caller]
pub fn outputs_and_grads(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    for x in inputs {
        x.set_grad(None);
        x.set_requires_grad(true).expect("conformance: inputs must be float leaves");
    }
    let outs = f(inputs).unwrap_or_else(|e| panic!("{what}: forward failed: {e}"));
    let mut loss: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        let w = Tensor::from_f64s(&values(o.numel(), 0xfeed + k as u64), o.shape(), o.dtype(), o.device()).unwrap();
        let term = o.mul(&w).and_then(|t| t.to_dtype(DType::F64)).and_then(|t| t.sum_all()).unwrap();
        loss = Some(match loss {
            Some(l) => l.add(&term).unwrap(),
            None => term,
        });
    }
    loss.expect("at least one output").backward().unwrap_or_else(|e| panic!("{what}: backward failed: {e}"));
    let values = outs.iter().map(|o| o.to_vec_f64().unwrap()).collect();
    let grads = inputs.iter().map(|x| x.grad().map(|g| g.to_vec_f64().unwrap()).unwrap_or_default()).collect();
    for x in inputs {
        x.set_requires_grad(false).unwrap();
        x.set_grad(None);
    }
    (values, grads)
}

/// Runs `f` on `inputs` (float leaves) with fusion on and with it off, and compares each
/// output and the gradient of every input for the loss `sum_k sum(out_k * w_k)` (seeded `w`).
#[track_caller]
pub fn check_fused(what: &str, inputs: &[Tensor], f: impl Fn(&[Tensor]) -> Result<Vec<Tensor>>, atol: f64, rtol: f64) {
    let run = || outputs_and_grads(what, inputs, &f);
    let (fused_out, fused_grads) = run();
    let (plain_out, plain_grads) = no_fusion(run);
    for (k, (got, want)) in fused_out.iter().zip(&plain_out).enumerate() {
        assert_close(&format!("{what}: output {k}, fused against composite"), got, want, atol, rtol);
    }
    for (k, (got, want)) in fused_grads.iter().zip(&plain_grads).enumerate() {
        assert!(!want.is_empty(), "{what}: input {k} received no gradient");
        assert_close(&format!("{what}: d/d(input {k}), fused against composite"), got, want, atol, rtol);
    }
}

/// `device`'s kernel for `op` on `inputs`, called directly (as [`crate::fused::kernel`] would,
/// fusion or not): `None` where it has none; an error, or buffers that are not
/// [`CustomOp::outputs`]'s in number and size, fail the test.
pub fn call_backend(device: &Device, op: &dyn CustomOp, inputs: &[Tensor]) -> Option<Vec<Storage>> {
    let storages: Vec<Storage> = inputs.iter().map(|x| x.storage()).collect();
    let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(x, s)| Strided { storage: &**s, layout: x.layout(), dtype: x.dtype() }).collect();
    let outs = device.backend().custom(op, &views)?.unwrap_or_else(|e| panic!("{}: the kernel failed: {e}", op.name()));
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let specs = op.outputs(&refs);
    assert_eq!(outs.len(), specs.len(), "{}: the kernel returned {} buffers for {} outputs", op.name(), outs.len(), specs.len());
    for (k, (out, (shape, dtype))) in outs.iter().zip(&specs).enumerate() {
        let bytes = shape.iter().product::<usize>() * dtype.size_in_bytes();
        assert_eq!(out.size_in_bytes(), bytes, "{}: output {k} is not {shape:?} {dtype}", op.name());
    }
    Some(outs)
}

/// Whether `device`'s backend has a kernel for `op` on `inputs` (see [`call_backend`]).
pub fn backend_runs(device: &Device, op: &dyn CustomOp, inputs: &[Tensor]) -> bool {
    call_backend(device, op, inputs).is_some()
}

/// `device`'s kernel for `op` against `op`'s composite on `inputs`, output by output, within
/// `atol + rtol * |want|`: the one check a new custom op's kernel needs (its backward, where it
/// has one, is [`check_fused`]'s through [`Tensor::custom`]). `false` where the device has no
/// kernel for it (nothing to compare).
#[track_caller]
pub fn check_op(device: &Device, op: &dyn CustomOp, inputs: &[Tensor], atol: f64, rtol: f64) -> bool {
    let Some(outs) = call_backend(device, op, inputs) else { return false };
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let want = crate::no_grad(|| op.composite(&refs)).unwrap_or_else(|e| panic!("{}: the composite failed: {e}", op.name()));
    for (k, ((out, (shape, dtype)), want)) in outs.into_iter().zip(op.outputs(&refs)).zip(want).enumerate() {
        let got = Tensor::from_storage(out, crate::Layout::contiguous(&shape), dtype, device).unwrap();
        let what = format!("{} on {device}: output {k}, kernel against composite", op.name());
        assert_close(&what, &got.to_vec_f64().unwrap(), &want.to_vec_f64().unwrap(), atol, rtol);
    }
    true
}

/// Calls of [`SquarePlus`]'s kernel, so the test can tell that it ran.
static SQUARE_PLUS_CALLS: AtomicUsize = AtomicUsize::new(0);

/// `y = x * x + x`: a custom op of the suite's own, whose kernel the suite writes for every
/// backend from the backend's primitives (two of them where the composite's graph has two
/// nodes; a real kernel would be one pass). Its backward is `dy (2 x + 1)`.
#[derive(Clone, Copy, Debug)]
struct SquarePlus;

impl CustomKernel for SquarePlus {
    fn name(&self) -> &'static str {
        "square_plus"
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let x = *inputs.first()?;
        SQUARE_PLUS_CALLS.fetch_add(1, Ordering::Relaxed);
        Some((|| {
            let square = backend.binary(BinaryOp::Mul, x, x)?;
            let square = Strided { storage: &*square, layout: &crate::Layout::contiguous(x.layout.shape()), dtype: x.dtype };
            Ok(vec![backend.binary(BinaryOp::Add, square, x)?])
        })())
    }
}

impl CustomOp for SquarePlus {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        vec![(inputs[0].shape().to_vec(), inputs[0].dtype())]
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0];
        Ok(vec![x.mul(x)?.add(x)?])
    }

    fn backward(&self, grad: &Tensor, inputs: &[Tensor], _outputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grad.mul(&inputs[0].mul_scalar(2.0)?.add_scalar(1.0)?)?)])
    }
}

/// The open path on `d`: an op from outside the backend runs the kernel its own crate wrote
/// (the backend hands it over, [`crate::Backend::custom`]), matches its composite, records its
/// backward (checked against finite differences, and against the composite's with fusion on
/// and off), and `no_fusion` keeps its kernel from running.
pub fn custom_op(d: &Device) {
    let x = Tensor::from_f64s(&values(15, 81), &[3, 5], DType::F32, d).unwrap();
    let before = SQUARE_PLUS_CALLS.load(Ordering::Relaxed);
    assert!(check_op(d, &SquarePlus, std::slice::from_ref(&x), 1e-6, 1e-6), "{d} did not hand square_plus to the kernel its crate wrote");
    let y = Tensor::custom(SquarePlus, &[&x]).unwrap().remove(0);
    assert!(SQUARE_PLUS_CALLS.load(Ordering::Relaxed) >= before + 2, "Tensor::custom did not run the kernel");
    assert_close("square_plus through Tensor::custom", &y.to_vec_f64().unwrap(), &SquarePlus.composite(&[&x]).unwrap()[0].to_vec_f64().unwrap(), 1e-6, 1e-6);
    let calls = SQUARE_PLUS_CALLS.load(Ordering::Relaxed);
    no_fusion(|| Tensor::custom(SquarePlus, &[&x]).unwrap());
    assert_eq!(SQUARE_PLUS_CALLS.load(Ordering::Relaxed), calls, "no_fusion ran the kernel");
    let f = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![Tensor::custom(SquarePlus, &[&x[0]])?.remove(0).mul(&x[0])?]) };
    check_fused("square_plus", &[x], f, 1e-6, 1e-6);
    let g = |x: &[Tensor]| Tensor::custom(SquarePlus, &[&x[0]])?.remove(0).mul(&x[0]);
    check_grads("square_plus", &[leaf(d, &[3, 5], 82)], g, 1e-7, 1e-6);
}
