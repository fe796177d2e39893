//! The CPU keeps freed large buffers and hands them out again for the same size: a training
//! loop stops taking fresh pages from the system after its first step. What it keeps is bounded
//! and `empty_cache` frees it. Alone in this binary: the CPU's memory accounts are process-wide.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Tensor};

const N: usize = 256 * 256; // 256 KiB of f32: kept
const BYTES: u64 = N as u64 * 4;

#[test]
fn freed_large_buffers_are_reused_and_the_pool_stays_bounded() {
    let dev = Device::cpu();
    let stats = || dev.memory_stats().unwrap();

    // A large tensor's buffer goes to the pool when it drops; a small one's does not.
    let x = Tensor::randn(&[N], 1, DType::F32, &dev).unwrap();
    let small = Tensor::randn(&[1000], 2, DType::F32, &dev).unwrap();
    let before = stats();
    drop(x);
    drop(small);
    let after = stats();
    assert_eq!(after.pooled, before.pooled + BYTES, "the large buffer is kept");
    assert_eq!(after.in_use, before.in_use - BYTES - 4000);

    // The same size again takes it (no new buffer), filled with the new values, not the old.
    let y = Tensor::zeros(&[256, 256], DType::F32, &dev).unwrap();
    let reused = stats();
    assert_eq!(reused.allocations, after.allocations, "the kept buffer served the new tensor");
    assert_eq!(reused.pooled, after.pooled - BYTES);
    assert!(y.to_vec_f64().unwrap().iter().all(|&v| v == 0.0), "zeros read old values");
    // Another element type of the same bytes is not served from it.
    drop(y);
    let made = stats().allocations;
    let z = Tensor::zeros(&[N / 2], DType::F64, &dev).unwrap();
    assert_eq!(stats().allocations, made + 1);
    drop(z);

    // A result written by a kernel into a kept buffer is that kernel's: a sum of ones.
    let ones = Tensor::ones(&[256, 256], DType::F32, &dev).unwrap();
    let doubled = ones.add(&ones).unwrap();
    assert!(doubled.to_vec_f64().unwrap().iter().all(|&v| v == 2.0));
    drop((ones, doubled));

    // Many sizes, none reused: the pool frees what would take in-use and pooled bytes past
    // twice the most ever in use (the peak, never reset in this binary).
    for k in 1..40 {
        let t = Tensor::zeros(&[N + 1024 * k], DType::F32, &dev).unwrap();
        drop(t);
        let s = stats();
        assert!(s.in_use + s.pooled <= 2 * s.peak + BYTES, "{k}: {} in use and {} pooled against a peak of {}", s.in_use, s.pooled, s.peak);
    }
    assert!(stats().pooled > 0);

    // A budget counts only what is in use, and a new buffer that the pool's bytes would take
    // past it makes the pool give them back.
    let s = stats();
    assert!(dev.set_memory_budget(Some(s.in_use + BYTES * 3)));
    let t = Tensor::zeros(&[N + 7], DType::F32, &dev).unwrap();
    let b = stats();
    dev.set_memory_budget(None);
    assert!(b.in_use + b.pooled <= s.in_use + BYTES * 3, "{} in use and {} pooled past the budget", b.in_use, b.pooled);
    drop(t);

    // `empty_cache` frees everything kept.
    dev.empty_cache();
    assert_eq!(stats().pooled, 0);
}
