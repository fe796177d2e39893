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
