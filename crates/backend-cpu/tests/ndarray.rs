//! The `ndarray` conversions: which ones share the tensor's buffer (compared by address), which
//! copy, and the errors for a wrong dtype or a buffer of another backend.

use std::sync::Arc;

use liandan_backend_cpu::ndarray::{array, s, Array, Array2, ArrayD, Axis, ShapeBuilder};
use liandan_backend_cpu::{from_array, from_array_view, into_array, to_array, to_array_view};
use liandan_tensor::{BackendStorage, DType, Device, Error, Layout, Tensor};

fn sample() -> Array2<f32> {
    Array::from_shape_fn((3, 4), |(i, j)| (i * 10 + j) as f32 - 7.5)
}

/// Where the tensor's first element lives.
fn address(t: &Tensor) -> *const f32 {
    to_array_view::<f32>(t).unwrap().view().as_ptr()
}

#[test]
fn contiguous_array_moves_in_and_views_share_it() {
    let a = sample();
    let (want, ptr) = (a.clone().into_dyn(), a.as_ptr());
    let t = from_array(a).unwrap();
    assert_eq!(t.shape(), &[3, 4]);
    assert_eq!(address(&t), ptr, "from_array copied a contiguous array");
    assert_eq!(to_array_view::<f32>(&t).unwrap().view(), want.view());
    assert_eq!(t.to_vec::<f32>().unwrap(), want.iter().copied().collect::<Vec<_>>());
}

#[test]
fn transposed_offset_and_broadcast_views_read_in_place() {
    let (a, moved) = (sample(), sample());
    let ptr = moved.as_ptr();
    let t = from_array(moved).unwrap();

    let tt = t.t().unwrap();
    let held = to_array_view::<f32>(&tt).unwrap();
    assert_eq!(held.view(), a.t().into_dyn());
    assert_eq!(held.view().as_ptr(), ptr);

    // Columns 1..3 of rows 1..3: starts 5 elements into the buffer.
    let cut = t.narrow(0, 1, 2).unwrap().narrow(1, 1, 2).unwrap();
    let held = to_array_view::<f32>(&cut).unwrap();
    assert_eq!(held.view(), a.slice(s![1..3, 1..3]).into_dyn());
    assert_eq!(held.view().as_ptr(), ptr.wrapping_add(5));

    let row = t.narrow(0, 2, 1).unwrap().expand(&[5, 4]).unwrap();
    let held = to_array_view::<f32>(&row).unwrap();
    assert_eq!(held.view().strides(), &[0, 1]);
    for r in held.view().axis_iter(Axis(0)) {
        assert_eq!(r, a.row(2).into_dyn());
    }
    assert_eq!(to_array::<f32>(&row).unwrap(), held.view().to_owned());
}

#[test]
fn into_array_moves_out_a_sole_buffer_and_copies_a_shared_one() {
    let fresh = from_array(sample()).unwrap().mul_scalar(2.0).unwrap();
    let ptr = address(&fresh);
    let out = into_array::<f32>(fresh).unwrap();
    assert_eq!(out.as_ptr(), ptr, "a tensor nothing else holds was copied");
    assert_eq!(out, (sample() * 2.0).into_dyn());

    // The transpose is the only holder once its source is dropped: moved out, strides kept.
    let t = from_array(sample()).unwrap().t().unwrap();
    let ptr = address(&t);
    let out = into_array::<f32>(t).unwrap();
    assert_eq!((out.as_ptr(), out.strides()), (ptr, &[1isize, 4][..]));
    assert_eq!(out, sample().t().into_dyn());

    let shared = from_array(sample()).unwrap();
    let keep = shared.clone();
    let out = into_array::<f32>(shared).unwrap();
    assert_ne!(out.as_ptr(), address(&keep));
    assert_eq!(out, sample().into_dyn());

    let cut = from_array(sample()).unwrap().narrow(1, 1, 2).unwrap();
    assert_eq!(into_array::<f32>(cut).unwrap(), sample().slice(s![.., 1..3]).into_dyn());
    let repeated = from_array(array![1i64, 2, 3]).unwrap().expand(&[2, 3]).unwrap();
    assert_eq!(into_array::<i64>(repeated).unwrap(), array![[1i64, 2, 3], [1, 2, 3]].into_dyn());
}

#[test]
fn column_major_sliced_and_reversed_arrays() {
    let f = Array::from_shape_vec((2, 3).f(), vec![1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap();
    let ptr = f.as_ptr();
    let t = from_array(f).unwrap();
    assert_eq!(t.layout().strides(), &[1, 2]);
    assert_eq!(to_array_view::<f64>(&t).unwrap().view().as_ptr(), ptr);
    assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let sliced = sample().slice_move(s![1.., ..;2]);
    let t = from_array(sliced.clone()).unwrap();
    assert_eq!(t.layout().offset(), 4);
    assert_eq!(t.to_vec::<f32>().unwrap(), sliced.iter().copied().collect::<Vec<_>>());

    let mut reversed = sample();
    reversed.invert_axis(Axis(1));
    let t = from_array(reversed.clone()).unwrap();
    assert!(t.is_contiguous());
    assert_eq!(t.to_vec::<f32>().unwrap(), reversed.iter().copied().collect::<Vec<_>>());

    let h = array![[half::f16::from_f32(1.5), half::f16::from_f32(-2.0)]];
    let t = from_array_view(h.view()).unwrap();
    assert_eq!(t.dtype(), DType::F16);
    assert_eq!(to_array::<half::f16>(&t).unwrap(), h.into_dyn());

    let empty = from_array(ArrayD::<f32>::zeros(vec![0, 3])).unwrap();
    assert_eq!(into_array::<f32>(empty).unwrap().shape(), &[0, 3]);
}

#[derive(Debug)]
struct Foreign;

impl BackendStorage for Foreign {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn size_in_bytes(&self) -> usize {
        64
    }
}

#[test]
fn wrong_dtype_or_another_backends_buffer_is_an_error() {
    let t = from_array(sample()).unwrap();
    assert!(matches!(to_array_view::<f64>(&t), Err(Error::DTypeMismatch { .. })));
    assert!(matches!(into_array::<i64>(t), Err(Error::DTypeMismatch { .. })));

    // A buffer some other backend made (a GPU's, say) is never read as a CPU one.
    let foreign = Tensor::from_storage(Arc::new(Foreign), Layout::contiguous(&[4, 4]), DType::F32, &Device::cpu()).unwrap();
    let err = to_array_view::<f32>(&foreign).err().expect("a foreign buffer was read");
    assert!(matches!(err, Error::DeviceMismatch { .. }), "{err}");
    assert!(err.to_string().contains("to_device"), "{err}");

    let past = Tensor::from_storage(Arc::new(Foreign), Layout::contiguous(&[5, 4]), DType::F32, &Device::cpu());
    assert!(matches!(past, Err(Error::BadShape { .. })));
}
