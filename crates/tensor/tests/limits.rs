//! Shapes and sizes past what memory or `usize` can hold are errors wherever they enter the
//! crate, never an overflow panic, a wrapped stride or an allocator abort.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Error, Tensor};

const BIG: usize = 1 << 32;

/// Shapes whose element count or strides pass `isize::MAX`; some hold no element at all.
fn overflowing() -> Vec<Vec<usize>> {
    vec![vec![0, BIG, BIG], vec![BIG, BIG, 0], vec![usize::MAX, 2], vec![2, usize::MAX / 2 + 1], vec![1 << 63, 1], vec![3, 0, 1 << 62]]
}

fn too_large(r: liandan_tensor::Result<Tensor>, what: &str) {
    match r {
        Err(Error::BadShape { detail, .. }) => assert!(detail.contains("too large"), "{what}: {detail}"),
        Err(e) => panic!("{what}: unexpected error {e}"),
        Ok(t) => panic!("{what}: accepted as {:?}", t.shape()),
    }
}

#[test]
fn creation_refuses_shapes_that_overflow() {
    let dev = Device::cpu();
    for shape in overflowing() {
        too_large(Tensor::from_vec(Vec::<f32>::new(), &shape, &dev), &format!("from_vec {shape:?}"));
        too_large(Tensor::from_slice::<i64>(&[], &shape, &dev), &format!("from_slice {shape:?}"));
        too_large(Tensor::from_f64s(&[], &shape, DType::F64, &dev), &format!("from_f64s {shape:?}"));
        too_large(Tensor::full(&shape, 1.0, DType::F32, &dev), &format!("full {shape:?}"));
        too_large(Tensor::randn(&shape, 0, DType::F32, &dev), &format!("randn {shape:?}"));
    }
    // Empty shapes whose strides fit are fine.
    assert_eq!(Tensor::from_vec(Vec::<f32>::new(), &[0, BIG, 1 << 20], &dev).unwrap().numel(), 0);
}

#[test]
fn views_refuse_shapes_that_overflow() {
    let dev = Device::cpu();
    let empty = Tensor::zeros(&[0, 4], DType::F32, &dev).unwrap();
    too_large(empty.reshape(&[0, BIG, BIG]), "reshape");
    let one = Tensor::ones(&[1, 1], DType::F32, &dev).unwrap();
    too_large(one.expand(&[BIG, BIG]), "expand");
    let (a, b) = (Tensor::zeros(&[BIG, 1, 0], DType::F32, &dev).unwrap(), Tensor::zeros(&[1, BIG, 0], DType::F32, &dev).unwrap());
    too_large(a.add(&b), "broadcast");
    let e = one.narrow(0, usize::MAX, 2).unwrap_err().to_string();
    assert!(e.contains("exceeds dim 0"), "{e}");
}

#[test]
fn sizes_past_the_address_space_name_the_bytes() {
    let dev = Device::cpu();
    // 2^61 f64 elements fit `isize::MAX` as a count but not as bytes.
    match Tensor::zeros(&[1 << 61], DType::F64, &dev) {
        Err(Error::OutOfMemory { bytes, .. }) => assert_eq!(bytes, 1u128 << 64),
        other => panic!("{:?}", other.map(|t| t.numel())),
    }
    // 2^44 f32 elements (64 TiB) reach the backend, which refuses them with an error.
    let e = Tensor::ones(&[1 << 22, 1 << 22], DType::F32, &dev).unwrap_err().to_string();
    assert!(e.contains("70368744177664 bytes"), "{e}");
    let e = Tensor::arange(0.0, 1e30, 1.0, DType::F32, &dev).unwrap_err().to_string();
    assert!(e.contains("arange"), "{e}");
    let (a, b) = (Tensor::zeros(&[BIG, 0], DType::F32, &dev).unwrap(), Tensor::zeros(&[0, BIG], DType::F32, &dev).unwrap());
    assert!(matches!(a.matmul(&b), Err(Error::BadShape { .. })));
}
