//! What a CPU kernel written outside this crate needs: the kernel of a custom op
//! (`liandan_tensor::custom`) whose own crate writes it for this backend (an optimizer's update
//! in `liandan-train`), reaching the backend through `Backend::downcast_ref::<CpuBackend>()`.
//! Its inputs as slices, buffers for its outputs counted by this backend's allocator, and the
//! split into pieces that every elementwise kernel here runs on the thread pool.

use std::borrow::Cow;

use half::{bf16, f16};
use liandan_tensor::{Result, Storage, Strided};
use rayon::prelude::*;

use crate::scalar::Real;
use crate::storage::{bad_dtype, cpu, slice, CpuElement};
use crate::strided::{contiguous, materialize, parallel, CHUNK};

/// A float element type of CPU kernels (f32, f64, f16, bf16) and `Wide`, the type it computes
/// in: itself for f32 and f64, f32 for the halves, which round once, on store.
pub trait Float: CpuElement + Copy + Default + PartialOrd + Send + Sync + 'static {
    type Wide: num_traits::Float + Send + Sync + std::fmt::Debug + 'static;
    fn widen(self) -> Self::Wide;
    fn narrow(wide: Self::Wide) -> Self;
}

macro_rules! float {
    ($($t:ty => $wide:ty),*) => {$(
        impl Float for $t {
            type Wide = $wide;
            fn widen(self) -> Self::Wide {
                Real::widen(self)
            }
            fn narrow(wide: Self::Wide) -> Self {
                <$t as Real>::narrow(wide)
            }
        }
    )*};
}

float!(f32 => f32, f64 => f64, f16 => f32, bf16 => f32);

/// The inputs as row-major slices of `T`: borrowed where a view is contiguous (what kernels
/// are handed), copied otherwise. An error naming `op` where an input is not of `T`.
pub fn slices<'a, T: CpuElement + Copy + Default + Send + Sync + 'static>(op: &'static str, inputs: &[Strided<'a>]) -> Result<Vec<Cow<'a, [T]>>> {
    inputs
        .iter()
        .map(|s| {
            let v = T::array(cpu(s.storage)).map(slice).ok_or_else(|| bad_dtype(op, s.dtype, "every input must have the first input's dtype"))?;
            Ok(match contiguous(v, s.layout) {
                Some(xs) => Cow::Borrowed(xs),
                None => Cow::Owned(materialize(v, s.layout)?),
            })
        })
        .collect()
}

/// A buffer of `n` elements for an output (zeros), or an error naming `op` and the bytes when
/// the host cannot give them or the memory budget is spent.
pub fn alloc<T: Float>(op: &'static str, n: usize) -> Result<Vec<T>> {
    crate::storage::alloc(op, n, T::default())
}

/// [`alloc`] for an output the kernel writes whole before it reads any of it: a buffer the
/// backend kept for reuse comes with its old values, not zeros (a fill would only be
/// overwritten).
pub fn alloc_overwritten<T: Float>(op: &'static str, n: usize) -> Result<Vec<T>> {
    crate::storage::alloc_overwritten(op, n, T::default())
}

/// An output buffer as a storage of this backend.
pub fn storage<T: Float>(values: Vec<T>) -> Storage {
    T::wrap(values.into()).into_storage()
}

/// Runs `body(ins, outs)` once over whole operands, or, when they are large, over pieces of
/// `CHUNK` elements on the thread pool: every input and output `n` long or empty (an absent
/// operand, passed to every piece empty). For elementwise kernels, whose pieces are
/// independent, so the result does not depend on the threads.
pub fn in_pieces<T: Send + Sync>(ins: &[&[T]], outs: &mut [Vec<T>], body: impl Fn(&[&[T]], &mut [&mut [T]]) + Sync) {
    let n = ins[0].len();
    if !parallel(n) {
        let mut whole: Vec<&mut [T]> = outs.iter_mut().map(|o| &mut o[..]).collect();
        return body(ins, &mut whole);
    }
    let mut pieces: Vec<Vec<&mut [T]>> = (0..n.div_ceil(CHUNK)).map(|_| Vec::with_capacity(outs.len())).collect();
    for o in outs.iter_mut() {
        if o.is_empty() {
            pieces.iter_mut().for_each(|p| p.push(&mut []));
        } else {
            o.chunks_mut(CHUNK).zip(&mut pieces).for_each(|(c, p)| p.push(c));
        }
    }
    pieces.into_par_iter().enumerate().for_each(|(k, mut outs)| {
        let at = k * CHUNK..((k + 1) * CHUNK).min(n);
        let ins: Vec<&[T]> = ins.iter().map(|x| if x.is_empty() { *x } else { &x[at.clone()] }).collect();
        body(&ins, &mut outs);
    });
}
