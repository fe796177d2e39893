//! What the updates' CPU kernels share (each rule's own kernel is in its file): the dispatch
//! on the element type, the loss scaler's [`super::Scale`], and the arithmetic the rules
//! repeat, in the composite's order of operations. Halves compute in f32 and round on store
//! (state read back through the same rounding, so what the next step reads is what was
//! stored); kernels run on `liandan_backend_cpu::kernel`'s slices and pieces.

use liandan_backend_cpu::kernel::{alloc_overwritten, in_pieces, slices, storage, Float};
use liandan_tensor::{DType, Error, Result, Storage, Strided};
use num_traits::NumCast;

/// `kernel(dtype)` for the float dtype of `inputs`, or an error naming `op` for another.
pub(super) fn per_float(op: &'static str, inputs: &[Strided], kernel: impl FnOnce(DType) -> Result<Vec<Storage>>) -> Option<Result<Vec<Storage>>> {
    let dtype = inputs.first()?.dtype;
    Some(match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => kernel(dtype),
        other => Err(Error::BadDType { op, got: other, detail: "floating-point dtypes only".into() }),
    })
}

/// `x` as the computing type (hyper-parameters arrive in f64).
pub(crate) fn acc<A: num_traits::Float>(x: f64) -> A {
    <A as NumCast>::from(x).expect("a float converts to every float type")
}

/// A hyper-parameter as the composite multiplies by it: a scalar of the dtype (so in f16 an
/// eps of 1e-8 is 0 there, and here).
pub(crate) fn scalar<T: Float>(x: f64) -> T::Wide {
    T::narrow(acc::<T::Wide>(x)).widen()
}

/// The gradient every step but Adam's starts from: negated when maximizing, plus the L2 term.
pub(crate) fn l2_grad<T: Float>(param: T::Wide, grad: T, maximize: bool, weight_decay: f64, wd: T::Wide) -> T::Wide {
    let g = if maximize { -grad.widen() } else { grad.widen() };
    if weight_decay != 0.0 {
        T::narrow(g + T::narrow(param * wd).widen()).widen()
    } else {
        g
    }
}

/// `avg beta + a (value) b`, rounded after every operation as the composite's `decay_addcmul`.
pub(crate) fn decay_addcmul<T: Float>(avg: T::Wide, beta: T::Wide, a: T::Wide, b: T::Wide, value: T::Wide) -> T::Wide {
    let round = |x: T::Wide| T::narrow(x).widen();
    round(round(avg * beta) + round(round(a * value) * b))
}

/// An update's inputs and its fresh outputs.
pub(crate) type Buffers<'a, T> = (Vec<&'a [T]>, Vec<Vec<T>>);

/// `count` fresh outputs of `n` elements and the inputs cut to `n`: the loops over them then
/// have no capacity or bounds checks, so they vectorize.
pub(crate) fn buffers<'a, T: Float>(inputs: &'a [std::borrow::Cow<'a, [T]>], count: usize, n: usize) -> Result<Buffers<'a, T>> {
    // Every rule's kernel writes each output element once, reading none first.
    let outs = (0..count).map(|_| alloc_overwritten("optimizer step", n)).collect::<Result<_>>()?;
    Ok((inputs.iter().map(|x| &x[..n]).collect(), outs))
}

/// The outputs as storages.
pub(crate) fn stored<T: Float>(outs: Vec<Vec<T>>) -> Vec<Storage> {
    outs.into_iter().map(storage).collect()
}

/// The loss scaler's [`super::Scale`]: x to x * factor, the factor rounded to the dtype first
/// (as `Tensor::mul_scalar`'s scalar operand is), the product in the computing type and
/// rounded once.
pub(super) fn scale<T: Float>(factor: f64, inputs: &[Strided]) -> Result<Vec<Storage>> {
    let v = slices::<T>("scale", inputs)?;
    let n = v[0].len();
    let f = scalar::<T>(factor);
    let mut out = vec![alloc_overwritten("scale", n)?];
    in_pieces(&[&v[0][..n]], &mut out, move |ins, outs| {
        outs[0].iter_mut().zip(ins[0].iter()).for_each(|(out, &x)| *out = T::narrow(x.widen() * f));
    });
    Ok(stored(out))
}
