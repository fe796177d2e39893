//! Autograd engine behaviour that the conformance suite cannot host.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, Tensor};

#[test]
fn a_deep_graph_drops_without_overflowing_the_stack() {
    let x = Tensor::ones(&[7], DType::F32, &Device::cpu()).unwrap().requires_grad_(true).unwrap();
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = y.add_scalar(1e-3).unwrap();
    }
    drop(y); // never backpropagated: the graph is freed by dropping it
    assert!(x.grad().is_none());
}

/// A two-layer net `relu(x w1^T) w2^T` summed, and its two weights.
fn two_layers(dev: &Device) -> (Tensor, Tensor, Tensor) {
    let x = Tensor::from_f64s(&[0.5, -1.0, 2.0, 0.25], &[2, 2], DType::F32, dev).unwrap();
    let w1 = Tensor::from_f64s(&[0.1, 0.2, -0.3, 0.4, -0.5, 0.6, 0.7, 0.8], &[4, 2], DType::F32, dev).unwrap().requires_grad_(true).unwrap();
    let w2 = Tensor::from_f64s(&[1.0, -2.0, 3.0, -4.0], &[1, 4], DType::F32, dev).unwrap().requires_grad_(true).unwrap();
    (x, w1, w2)
}

fn loss(x: &Tensor, w1: &Tensor, w2: &Tensor) -> Tensor {
    x.linear(w1, None).unwrap().relu().unwrap().linear(w2, None).unwrap().sum_all().unwrap()
}

#[test]
fn post_accumulate_grad_hooks_see_each_final_gradient_last_layer_first() {
    use std::sync::{Arc, Mutex};
    let dev = Device::cpu();
    let (x, w1, w2) = two_layers(&dev);
    // What each hook saw: which weight, its gradient then, and whether the other had one yet.
    type Seen = Vec<(&'static str, Vec<f32>, bool)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let hook = |name: &'static str, other: Tensor| {
        let seen = seen.clone();
        move |t: &Tensor| {
            seen.lock().unwrap().push((name, t.grad().unwrap().to_vec::<f32>()?, other.grad().is_some()));
            Ok(())
        }
    };
    let _h1 = w1.register_post_accumulate_grad_hook(hook("w1", w2.clone())).unwrap();
    let _h2 = w2.register_post_accumulate_grad_hook(hook("w2", w1.clone())).unwrap();
    loss(&x, &w1, &w2).backward().unwrap();
    {
        let seen = seen.lock().unwrap();
        let names: Vec<&str> = seen.iter().map(|s| s.0).collect();
        assert_eq!(names, ["w2", "w1"], "the last layer's weight is final first");
        assert!(!seen[0].2, "w2's hook ran before w1's gradient existed: a reducer can overlap it with the rest of backward");
        assert_eq!(seen[0].1, w2.grad().unwrap().to_vec::<f32>().unwrap());
        assert_eq!(seen[1].1, w1.grad().unwrap().to_vec::<f32>().unwrap());
    }
    // A second backward accumulates: the hook sees the sum, twice the first gradient.
    let first = w1.grad().unwrap().to_vec::<f32>().unwrap();
    loss(&x, &w1, &w2).backward().unwrap();
    let twice: Vec<f32> = first.iter().map(|g| 2.0 * g).collect();
    assert_eq!(seen.lock().unwrap()[3].1, twice);
}

#[test]
fn a_dropped_handle_removes_its_hook_and_a_failing_hook_stops_backward() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dev = Device::cpu();
    let (x, w1, w2) = two_layers(&dev);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handle = w1
        .register_post_accumulate_grad_hook(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    loss(&x, &w1, &w2).backward().unwrap();
    drop(handle);
    loss(&x, &w1, &w2).backward().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let _failing = w2.register_post_accumulate_grad_hook(|_| Err(liandan_tensor::Error::Autograd("the reducer is gone".into()))).unwrap();
    let err = loss(&x, &w1, &w2).backward().unwrap_err().to_string();
    assert!(err.contains("the reducer is gone"), "{err}");

    let computed = w1.mul_scalar(2.0).unwrap();
    let err = computed.register_post_accumulate_grad_hook(|_| Ok(())).err().expect("a computed tensor has no gradient of its own").to_string();
    assert!(err.contains("only a leaf"), "{err}");
}
