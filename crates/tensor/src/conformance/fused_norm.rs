//! Fused normalization kernels against their composites ([`check_fused`]): batch norm in
//! training, forward (output and running statistics) and backward, and against finite
//! differences in f64 with fusion on and off.

use super::custom::check_fused;
use super::grads::{check_grads, leaf, positive_leaf};
use super::{positive_values, values};
use crate::{autocast, no_fusion, DType, Device, Result, Tensor};

/// Shapes that cover `[N, C]` (BatchNorm1d), `[N, C, L]`, N = 1 with odd H and W, and a channel
/// long enough (4,608 values) that a GPU splits it between workgroups.
// The last two: a channel in six segments of an odd length (a device that holds bf16 two to a
// word rounds them up to whole words), the last one short; and in four segments of a length
// that a device reading four values at a time rounds up to a multiple of four.
const SHAPES: [&[usize]; 7] = [&[6, 4], &[3, 5, 7], &[1, 3, 5, 7], &[2, 4, 3, 3], &[8, 3, 24, 24], &[5, 2, 4098], &[3, 2, 4100]];

/// Training-mode `batch_norm` (and `batch_norm_relu`) fused against its composite on the same
/// device: the output, the updated running statistics (fresh each run, so both runs start
/// alike) and the gradients of `x`, `weight` and `bias`, with and without the affine parameters
/// and running statistics, in every float dtype the device computes (halves compute statistics
/// in f32).
pub fn batch_norm_matches_composite(d: &Device) {
    // (bf16 is left out: its composite rounds every intermediate to 8 bits, so the two differ by
    // more than a test can tell from a wrong kernel.)
    for (dtype, atol, rtol) in [(DType::F32, 1e-4, 1e-4), (DType::F64, 1e-10, 1e-10), (DType::F16, 3e-2, 3e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for (k, &shape) in SHAPES.iter().enumerate() {
            let c = shape[1];
            let t = |s: &[usize], seed: u64| Tensor::from_f64s(&values(s.iter().product(), seed), s, dtype, d).unwrap();
            let stats = move || -> Result<(Tensor, Tensor)> {
                Ok((Tensor::from_f64s(&values(c, 71), &[c], dtype, d)?, Tensor::from_f64s(&positive_values(c, 72, 0.5, 2.0), &[c], dtype, d)?))
            };
            let what = format!("batch_norm train {dtype} {shape:?}");
            let full = |x: &[Tensor]| -> Result<Vec<Tensor>> {
                let (rm, rv) = stats()?;
                let n = batch_count(d)?;
                let y = x[0].batch_norm_tracked(Some(&rm), Some(&rv), Some(&n), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5, false)?;
                assert_eq!(n.to_vec::<i64>()?, [42], "{what}: the batch count");
                Ok(vec![y, rm, rv])
            };
            check_fused(&what, &[t(shape, 73 + k as u64), t(&[c], 74), t(&[c], 75)], full, atol, rtol);
            let relu = |x: &[Tensor]| -> Result<Vec<Tensor>> {
                let (rm, rv) = stats()?;
                let n = batch_count(d)?;
                let y = x[0].batch_norm_tracked(Some(&rm), Some(&rv), Some(&n), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5, true)?;
                assert_eq!(n.to_vec::<i64>()?, [42], "{what}, relu: the batch count");
                Ok(vec![y, rm, rv])
            };
            let bare_relu = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].batch_norm_relu(None, None, None, None, true, 0.3, 1e-3)?]) };
            // (Not in f16: the composite's output, rounded at every step, lands on the other
            // side of the ReLU's cut from the kernel's f32 one for some values near zero, and
            // their gradients differ by the whole dy. The mixed test below covers f16.)
            if dtype != DType::F16 {
                check_fused(&format!("{what}, relu"), &[t(shape, 73 + k as u64), t(&[c], 74), t(&[c], 75)], relu, atol, rtol);
                check_fused(&format!("{what}, relu, no affine, no running stats"), &[t(shape, 76 + k as u64)], bare_relu, atol, rtol);
            }
            let bare = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].batch_norm(None, None, None, None, true, 0.3, 1e-3)?]) };
            check_fused(&format!("{what}, no affine, no running stats"), &[t(shape, 76 + k as u64)], bare, atol, rtol);
        }
    }
    // A strided input, and parameters at an offset into their buffers.
    let x = Tensor::from_f64s(&values(4 * 6 * 5, 77), &[4, 6, 5], DType::F32, d).unwrap().permute(&[0, 2, 1]).unwrap();
    let w = Tensor::from_f64s(&values(8, 78), &[8], DType::F32, d).unwrap().narrow(0usize, 2, 5).unwrap();
    let b = Tensor::from_f64s(&values(9, 79), &[9], DType::F32, d).unwrap().narrow(0usize, 4, 5).unwrap();
    let f = |x: &[Tensor]| -> Result<Vec<Tensor>> {
        let (rm, rv) = (Tensor::from_f64s(&values(5, 80), &[5], DType::F32, d)?, Tensor::from_f64s(&positive_values(5, 81, 0.5, 2.0), &[5], DType::F32, d)?);
        let y = x[0].batch_norm(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5)?;
        Ok(vec![y, rm, rv])
    };
    check_fused("batch_norm train strided x", &[x, w, b], f, 1e-4, 1e-4);
}

/// A fresh batch count (`num_batches_tracked`) of 41.
fn batch_count(d: &Device) -> Result<Tensor> {
    Tensor::from_slice(&[41i64], &[], d)
}

/// Batch norm in training under autocast, activations f16 or bf16 and parameters and running
/// statistics f32 (the mixed kernel where the device has it, as cuDNN's under `torch.autocast`)
/// against the composite, which computes in f32 and rounds the output back: the output keeps
/// `x`'s type, the running statistics and the parameters' gradients stay f32, `x`'s gradient
/// has `x`'s type; with and without the affine parameters and running statistics.
pub fn batch_norm_mixed_matches_composite(d: &Device) {
    for (low, tol) in [(DType::F16, 1e-2), (DType::BF16, 3e-2)] {
        for (k, &shape) in SHAPES.iter().enumerate() {
            let c = shape[1];
            let x = || Tensor::from_f64s(&values(shape.iter().product(), 110 + k as u64), shape, low, d).unwrap();
            let p = |seed: u64| Tensor::from_f64s(&values(c, seed), &[c], DType::F32, d).unwrap();
            let what = format!("batch_norm train {low} x, f32 parameters {shape:?}");
            let full = |x: &[Tensor]| -> Result<Vec<Tensor>> {
                let (rm, rv) =
                    (Tensor::from_f64s(&values(c, 71), &[c], DType::F32, d)?, Tensor::from_f64s(&positive_values(c, 72, 0.5, 2.0), &[c], DType::F32, d)?);
                let n = batch_count(d)?;
                let y = autocast(low, || x[0].batch_norm_tracked(Some(&rm), Some(&rv), Some(&n), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5, false))?;
                assert_eq!((y.dtype(), rm.dtype(), rv.dtype()), (low, DType::F32, DType::F32), "{what}: output and running statistics' types");
                assert_eq!(n.to_vec::<i64>()?, [42], "{what}: the batch count");
                Ok(vec![y, rm, rv])
            };
            check_fused(&what, &[x(), p(112), p(113)], full, tol, tol);
            let relu = |x: &[Tensor]| -> Result<Vec<Tensor>> {
                Ok(vec![autocast(low, || x[0].batch_norm_relu(None, None, Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5))?])
            };
            check_fused(&format!("{what}, relu"), &[x(), p(112), p(113)], relu, tol, tol);
            let bare = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![autocast(low, || x[0].batch_norm(None, None, None, None, true, 0.3, 1e-3))?]) };
            check_fused(&format!("{what}, no affine, no running stats"), &[x()], bare, tol, tol);
            // The gradients' types, fused and composite.
            for fused in [true, false] {
                let (x, w, b) = (x().requires_grad_(true).unwrap(), p(112).requires_grad_(true).unwrap(), p(113).requires_grad_(true).unwrap());
                let run = || autocast(low, || x.batch_norm(None, None, Some(&w), Some(&b), true, 0.1, 1e-5))?.to_dtype(DType::F32)?.sum_all()?.backward();
                if fused { run() } else { no_fusion(run) }.unwrap();
                let types = [&x, &w, &b].map(|t| t.grad().map(|g| g.dtype()));
                assert_eq!(types, [Some(low), Some(DType::F32), Some(DType::F32)], "{what}: the gradients' types (fusion {fused})");
            }
        }
    }
}

/// The fused rule against finite differences in f64, with fusion on and off, composed with
/// another op so the incoming gradient is not the seeded weights alone.
pub fn batch_norm_grads(d: &Device) {
    let run = |what: &str| {
        let (x, w, b) = (leaf(d, &[1, 3, 3, 5], 81), leaf(d, &[3], 82), leaf(d, &[3], 83));
        let (rm, rv) = (leaf(d, &[3], 84), positive_leaf(d, &[3], 85, 0.5, 2.0));
        let f = move |x: &[Tensor]| x[0].batch_norm(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5)?.sin();
        check_grads(&format!("batch_norm train {what}"), &[x.clone(), w.clone(), b.clone()], f, 1e-6, 1e-5);
        let (rm, rv) = (leaf(d, &[3], 84), positive_leaf(d, &[3], 85, 0.5, 2.0));
        let f = move |x: &[Tensor]| x[0].batch_norm_relu(Some(&rm), Some(&rv), Some(&x[1]), Some(&x[2]), true, 0.1, 1e-5)?.sin();
        check_grads(&format!("batch_norm_relu train {what}"), &[x, w, b], f, 1e-6, 1e-5);
        check_grads(
            &format!("batch_norm_relu train [N, C, L] {what}"),
            &[leaf(d, &[4, 3, 2], 87)],
            |x| x[0].batch_norm_relu(None, None, None, None, true, 0.1, 1e-5)?.sin(),
            1e-6,
            1e-5,
        );
        check_grads(
            &format!("batch_norm train [N, C] {what}"),
            &[leaf(d, &[5, 2], 86)],
            |x| x[0].batch_norm(None, None, None, None, true, 0.1, 1e-5)?.sin(),
            1e-6,
            1e-5,
        );
    };
    run("(fused where the device can)");
    no_fusion(|| run("(composite)"));
}

/// `layer_norm` fused against its composite on the same device: the output and the gradients
/// of `x`, `weight` and `bias`, with both parameters, one of them, or none, over the last axis
/// and the last two, in every float dtype the device computes; 585 and 2,600 rows, so that the
/// parameters' column sums come in more segments than a workgroup has invocations (and more
/// than four times as many); rows of at most 256 (held in registers) and of 300.
pub fn layer_norm_matches_composite(d: &Device) {
    for (dtype, atol, rtol) in [(DType::F32, 1e-4, 1e-4), (DType::F64, 1e-10, 1e-10), (DType::F16, 3e-2, 3e-2)] {
        if dtype == DType::F64 && !d.is_cpu() {
            continue;
        }
        for (k, (shape, dims)) in [
            (&[6usize, 4][..], 1),
            (&[3, 5, 7], 1),
            (&[2, 3, 5, 7], 2),
            (&[4, 1], 1),
            (&[2, 65, 192], 1),
            (&[9, 65, 12], 1),
            (&[40, 65, 12], 1),
            (&[3, 300], 1),
        ]
        .into_iter()
        .enumerate()
        {
            // Rows of one value in f16: the composite's own gradient is NaN there (its rsqrt
            // of eps overflows f16 on the way back), so there is nothing to compare with.
            if dtype == DType::F16 && shape == [4, 1] {
                continue;
            }
            let t = |s: &[usize], seed: u64| Tensor::from_f64s(&values(s.iter().product(), seed), s, dtype, d).unwrap();
            let norm = &shape[shape.len() - dims..];
            let what = format!("layer_norm {dtype} {shape:?} over {dims}");
            let full = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].layer_norm(dims, Some(&x[1]), Some(&x[2]), 1e-5)?]) };
            check_fused(&what, &[t(shape, 91 + k as u64), t(norm, 92), t(norm, 93)], full, atol, rtol);
            let weight = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].layer_norm(dims, Some(&x[1]), None, 1e-3)?]) };
            check_fused(&format!("{what}, weight only"), &[t(shape, 94 + k as u64), t(norm, 95)], weight, atol, rtol);
            let bias = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].layer_norm(dims, None, Some(&x[1]), 1e-5)?]) };
            check_fused(&format!("{what}, bias only"), &[t(shape, 96 + k as u64), t(norm, 97)], bias, atol, rtol);
            let bare = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].layer_norm(dims, None, None, 1e-5)?]) };
            check_fused(&format!("{what}, no affine"), &[t(shape, 98 + k as u64)], bare, atol, rtol);
        }
    }
    // A strided input, and parameters at an offset into their buffers.
    let x = Tensor::from_f64s(&values(4 * 6 * 5, 99), &[4, 6, 5], DType::F32, d).unwrap().permute(&[0, 2, 1]).unwrap();
    let w = Tensor::from_f64s(&values(8, 100), &[8], DType::F32, d).unwrap().narrow(0usize, 2, 6).unwrap();
    let b = Tensor::from_f64s(&values(9, 101), &[9], DType::F32, d).unwrap().narrow(0usize, 3, 6).unwrap();
    let f = |x: &[Tensor]| -> Result<Vec<Tensor>> { Ok(vec![x[0].layer_norm(1, Some(&x[1]), Some(&x[2]), 1e-5)?]) };
    check_fused("layer_norm strided x", &[x, w, b], f, 1e-4, 1e-4);
}

/// The fused layer norm's rule against finite differences in f64, with fusion on and off,
/// composed with another op so the incoming gradient is not the seeded weights alone.
pub fn layer_norm_grads(d: &Device) {
    let run = |what: &str| {
        let (x, w, b) = (leaf(d, &[3, 2, 5], 102), leaf(d, &[5], 103), leaf(d, &[5], 104));
        check_grads(&format!("layer_norm {what}"), &[x, w, b], |x| x[0].layer_norm(1, Some(&x[1]), Some(&x[2]), 1e-5)?.sin(), 1e-6, 1e-5);
        check_grads(
            &format!("layer_norm over 2 dims, no affine {what}"),
            &[leaf(d, &[2, 3, 4], 105)],
            |x| x[0].layer_norm(2, None, None, 1e-5)?.sin(),
            1e-6,
            1e-5,
        );
    };
    run("(fused where the device can)");
    no_fusion(|| run("(composite)"));
}
