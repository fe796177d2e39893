//! Conversions between a CPU [`Tensor`] and `ndarray` arrays, without copying where the layout
//! allows: what a program that embeds liandan beside its own `ndarray` code needs.
//!
//! | from | to | copies |
//! |---|---|---|
//! | `&Tensor` | [`ArrayViewD`], through [`to_array_view`] | never: every tensor layout (transposed, narrowed, broadcast) is an ndarray view |
//! | `Tensor` | [`ArrayD`], [`into_array`] | not when the tensor is the only holder of its buffer, starts at its first element and repeats none; otherwise it copies |
//! | `&Tensor` | [`ArrayD`], [`to_array`] | always |
//! | [`Array`] | `Tensor`, [`from_array`] | not when no stride is negative (any array in row-major or column-major order, transposed or sliced); reversed axes are copied |
//! | [`ArrayView`] | `Tensor`, [`from_array_view`] | always: a tensor shares its buffer, which a borrowed view cannot give it |
//!
//! The element type must be the tensor's dtype (`f32`, `f64`, `f16`, `bf16`, `i64`, `u8`); a
//! tensor of another dtype, or on another device, is an error naming it (`to_dtype`,
//! `to_device(&Device::cpu())` first). Tensors made from arrays track no gradients until
//! `requires_grad_(true)`.
//!
//! ```
//! use liandan_backend_cpu::ndarray::{array, Array2};
//! use liandan_backend_cpu::{from_array, into_array, to_array_view};
//!
//! let a: Array2<f32> = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
//! let t = from_array(a)?; // the array's buffer becomes the tensor's
//! let tt = t.t()?; // a transposed view of it
//! let held = to_array_view::<f32>(&tt)?; // ndarray reads the same buffer
//! assert_eq!(held.view().shape(), &[3, 2]);
//! assert_eq!(held.view()[[2, 0]], 3.0);
//! let doubled = into_array::<f32>(t.mul_scalar(2.0)?)?; // a fresh result: moved out, no copy
//! assert_eq!(doubled, array![[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]].into_dyn());
//! # Ok::<(), liandan_tensor::Error>(())
//! ```

use std::marker::PhantomData;

use liandan_tensor::{Device, Error, Layout, Result, Storage, Tensor};
use ndarray::{Array, Array1, ArrayD, ArrayView, ArrayViewD, Dimension, IxDyn, ShapeBuilder};

use crate::storage::{slice, CpuElement, CpuStorage};

/// A CPU tensor's buffer, held alive, to be read as an ndarray view ([`TensorView::view`]).
///
/// It holds the buffer itself, not the tensor: [`Tensor::assign`] on the tensor afterwards
/// swaps in new contents and leaves this view reading the old ones, as every view does.
pub struct TensorView<T> {
    storage: Storage,
    layout: Layout,
    element: PhantomData<T>,
}

impl<T: CpuElement> TensorView<T> {
    /// The tensor's elements, in its shape and strides, reading its buffer in place.
    pub fn view(&self) -> ArrayViewD<'_, T> {
        // Both checked when this was made (`buffer`), and a buffer never changes.
        let data = slice(T::array(storage_of(&self.storage).expect("checked in to_array_view")).expect("checked in to_array_view"));
        let strides: Vec<usize> = self.layout.strides().to_vec();
        let shape = IxDyn(self.layout.shape()).strides(IxDyn(&strides));
        ArrayView::from_shape(shape, data.get(self.layout.offset()..).unwrap_or(&[])).expect("a tensor's layout lies inside its buffer")
    }
}

/// The tensor's elements as an ndarray view, without copying (see [`TensorView`]).
pub fn to_array_view<T: CpuElement>(t: &Tensor) -> Result<TensorView<T>> {
    let storage = buffer::<T>("to_array_view", t)?;
    Ok(TensorView { storage, layout: t.layout().clone(), element: PhantomData })
}

/// A copy of the tensor's elements as an owned array.
pub fn to_array<T: CpuElement>(t: &Tensor) -> Result<ArrayD<T>> {
    Ok(to_array_view::<T>(t)?.view().to_owned())
}

/// The tensor as an owned array: its buffer moved out when nothing else holds it (no clone,
/// view or autograd node of this tensor is alive), it starts at the buffer's first element and
/// no element repeats (an `expand`ed tensor repeats); a copy otherwise.
pub fn into_array<T: CpuElement>(t: Tensor) -> Result<ArrayD<T>> {
    let storage = buffer::<T>("into_array", &t)?;
    let layout = t.layout().clone();
    drop(t);
    if layout.numel() == 0 || layout.offset() != 0 || !distinct(&layout) {
        return Ok(to_owned::<T>(&storage, &layout));
    }
    let elements = match crate::storage::try_unwrap(storage) {
        Ok(owned) => T::take(owned).expect("checked in buffer"),
        Err(shared) => return Ok(to_owned::<T>(&shared, &layout)),
    };
    let strides: Vec<usize> = layout.strides().to_vec();
    let shape = IxDyn(layout.shape()).strides(IxDyn(&strides));
    let data = elements.into_raw_vec_and_offset().0;
    Ok(ArrayD::from_shape_vec(shape, data).expect("a distinct layout from offset 0 indexes its own buffer"))
}

/// The array as a CPU tensor, its buffer moved in without copying when no stride is negative
/// (otherwise copied into row-major order first).
pub fn from_array<T: CpuElement, D: Dimension>(a: Array<T, D>) -> Result<Tensor> {
    let mut a = a.into_dyn();
    if a.strides().iter().any(|&s| s < 0) {
        a = a.as_standard_layout().into_owned();
    }
    let shape = a.shape().to_vec();
    // Non-negative, checked above; ndarray gives an empty array zero strides, which is fine.
    let strides: Vec<usize> = a.strides().iter().map(|&s| s as usize).collect();
    let (data, offset) = a.into_raw_vec_and_offset();
    let storage = T::wrap(Array1::from(data)).into_storage();
    Tensor::from_storage(storage, Layout::new(shape, strides, offset.unwrap_or(0)), T::DTYPE, &Device::cpu())
}

/// A copy of the view as a CPU tensor.
pub fn from_array_view<T: CpuElement, D: Dimension>(a: ArrayView<'_, T, D>) -> Result<Tensor> {
    from_array(a.to_owned())
}

fn storage_of(s: &Storage) -> Option<&CpuStorage> {
    s.as_any().downcast_ref::<CpuStorage>()
}

/// The tensor's buffer, checked to be this backend's and of element type `T`.
fn buffer<T: CpuElement>(op: &'static str, t: &Tensor) -> Result<Storage> {
    if t.dtype() != T::DTYPE {
        return Err(Error::DTypeMismatch { op, lhs: t.dtype(), rhs: T::DTYPE });
    }
    let storage = t.storage();
    match storage_of(&storage) {
        Some(s) if T::array(s).is_some() => Ok(storage),
        _ => Err(Error::DeviceMismatch { op, lhs: format!("{} (not liandan's CPU backend)", t.device()), rhs: "cpu".into() }),
    }
}

fn to_owned<T: CpuElement>(storage: &Storage, layout: &Layout) -> ArrayD<T> {
    TensorView::<T> { storage: storage.clone(), layout: layout.clone(), element: PhantomData }.view().to_owned()
}

/// Whether no two indices of `layout` reach the same element, so an owned array may have it:
/// taking the axes from the smallest stride up, each stride must step past everything the
/// smaller ones reach.
fn distinct(layout: &Layout) -> bool {
    let mut axes: Vec<(usize, usize)> = layout.shape().iter().zip(layout.strides()).filter(|(&d, _)| d > 1).map(|(&d, &s)| (s, d)).collect();
    axes.sort_unstable();
    let mut reach = 0usize;
    for (stride, size) in axes {
        if stride <= reach {
            return false;
        }
        reach += (size - 1) * stride;
    }
    true
}
