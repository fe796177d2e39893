//! A kernel's working buffers count in the CPU's `memory_stats` while they live (the peak) and
//! are held to its budget. Alone in this binary: the CPU's memory accounts are process-wide.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Error, Tensor};

#[test]
fn working_buffers_count_toward_the_peak_and_the_budget() {
    let dev = Device::cpu();
    let stats = || dev.memory_stats().unwrap();
    // A 3x3 convolution: each block of images is gathered into columns of 16 * 9 taps by
    // 32 * 32 positions (576 KiB of f32 an image) before its product.
    let x = Tensor::randn(&[8, 16, 32, 32], 1, DType::F32, &dev).unwrap();
    let w = Tensor::randn(&[32, 16, 3, 3], 2, DType::F32, &dev).unwrap();
    let columns = 16 * 9 * 32 * 32 * 4;
    let base = stats().in_use;
    dev.reset_peak_memory();
    let y = x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1).unwrap();
    let out = y.shape().iter().product::<usize>() as u64 * 4;
    let s = stats();
    assert_eq!(s.in_use, base + out, "the columns were given back");
    assert!(s.peak >= base + out + columns, "peak {} under the output's {out} and one image's columns {columns} over {base}", s.peak);

    // An f16 product runs on f32 copies of its operands.
    let a = Tensor::randn(&[256, 512], 4, DType::F32, &dev).unwrap().to_dtype(DType::F16).unwrap();
    let b = Tensor::randn(&[512, 128], 5, DType::F32, &dev).unwrap().to_dtype(DType::F16).unwrap();
    let base = stats().in_use;
    dev.reset_peak_memory();
    let c = a.matmul(&b).unwrap();
    let widened = (256 * 512 + 512 * 128 + 256 * 128) * 4;
    assert_eq!(stats().in_use, base + 256 * 128 * 2, "the f32 copies were given back");
    assert!(stats().peak >= base + widened, "peak {} under the f32 copies' {widened} over {base}", stats().peak);
    drop(c);

    // A budget the output fits in but not the columns: an error naming the bytes, not an abort.
    let base = stats().in_use;
    assert!(dev.set_memory_budget(Some(base + out + (64 << 10))));
    let r = x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1);
    dev.set_memory_budget(None);
    match r {
        Err(Error::OutOfMemory { op, .. }) => assert!(op.contains("conv"), "{op}"),
        other => panic!("the columns fit a budget they exceed: {:?}", other.map(|t| t.shape().to_vec())),
    }
    assert_eq!(stats().in_use, base, "the failed convolution gave back what it took");
}
