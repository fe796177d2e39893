//! `on_pool` runs its closure on a thread of rayon's global pool (two threads here), under the
//! caller's grad mode, autocast region and fusion setting, and its kernels give the results
//! they give on the calling thread; a panic inside reaches the caller.

use liandan_backend_cpu::on_pool;
use liandan_tensor::{autocast, autocast_dtype, fusion_enabled, is_grad_enabled, no_fusion, no_grad, DType, Device, Tensor};

fn two_threads() {
    // Each test file is its own process, so the global pool is this file's to size; a second
    // call (another test of this file) finds it built already.
    let _ = rayon::ThreadPoolBuilder::new().num_threads(2).build_global();
    assert_eq!(rayon::current_num_threads(), 2);
}

#[test]
fn the_closure_runs_on_a_pool_thread_and_nests_in_place() {
    two_threads();
    assert_eq!(rayon::current_thread_index(), None);
    let (outer, inner) = on_pool(|| (rayon::current_thread_index(), on_pool(rayon::current_thread_index)));
    assert!(outer.is_some(), "on_pool ran its closure outside the pool");
    assert_eq!(inner, outer, "a nested on_pool moved to another thread");
}

#[test]
fn the_callers_grad_mode_autocast_and_fusion_hold_inside() {
    two_threads();
    assert_eq!(on_pool(|| (is_grad_enabled(), autocast_dtype(), fusion_enabled())), (true, None, true));
    assert!(!no_grad(|| on_pool(is_grad_enabled)));
    assert!(!no_fusion(|| on_pool(fusion_enabled)));
    let low = autocast(DType::BF16, || Ok::<_, liandan_tensor::Error>(on_pool(autocast_dtype))).unwrap();
    assert_eq!(low, Some(DType::BF16));
    // And the calling thread's own settings are as they were.
    assert_eq!((is_grad_enabled(), autocast_dtype(), fusion_enabled()), (true, None, true));
}

#[test]
fn a_training_steps_gradients_match_the_calling_threads() {
    two_threads();
    let d = Device::cpu();
    let x = Tensor::randn(&[64, 256], 1, DType::F32, &d).unwrap();
    let w = Tensor::randn(&[512, 256], 2, DType::F32, &d).unwrap();
    let step = || {
        let w = w.detach().requires_grad_(true).unwrap();
        let loss = x.matmul(&w.t().unwrap()).unwrap().relu().unwrap().softmax(1usize).unwrap().sum_all().unwrap();
        loss.backward().unwrap();
        w.grad().unwrap().to_vec_f64().unwrap()
    };
    let here = step();
    assert_eq!(on_pool(step), here);
}

#[test]
fn a_panic_in_the_closure_reaches_the_caller_and_releases_the_pool() {
    two_threads();
    let caught = std::panic::catch_unwind(|| on_pool(|| panic!("the body failed")));
    assert!(caught.is_err());
    // The threads kept awake for the body let go of it: the pool runs the next one.
    assert_eq!(on_pool(|| 1 + 1), 2);
}
