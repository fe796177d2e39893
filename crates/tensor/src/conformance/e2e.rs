//! End to end: a small MLP trained with the raw tensor API and plain SGD on a synthetic
//! two-class problem must reach near-zero loss. If autograd, the kernels and the parameter
//! updates disagree anywhere, this is where it shows.

use crate::{DType, Device, Reduction, Tensor};

/// Points on either side of a curved boundary (`y = 1` where `x1 > sin(2 x0)`): not linearly
/// separable, so the hidden layers must work, yet it trains in a few hundred steps.
fn dataset(d: &Device, n: usize) -> (Tensor, Tensor) {
    let mut xs = Vec::with_capacity(n * 2);
    let mut ys = Vec::with_capacity(n);
    for i in 0..n as u32 {
        let x0 = 4.0 * crate::rng::uniform01(11, i) as f64 - 2.0;
        let x1 = 4.0 * crate::rng::uniform01(12, i) as f64 - 2.0;
        let boundary = (2.0 * x0).sin();
        // Keep a margin around the boundary so the classes are separable.
        let gap = x1 - boundary;
        let x1 = if gap.abs() < 0.2 { boundary + 0.2f64.copysign(gap) } else { x1 };
        xs.extend_from_slice(&[x0, x1]);
        ys.push((x1 > boundary) as i64);
    }
    (Tensor::from_f64s(&xs, &[n, 2], DType::F32, d).unwrap(), Tensor::from_vec(ys, &[n], d).unwrap())
}

/// A parameter initialized like PyTorch's `nn.Linear` (uniform in `±1/sqrt(fan_in)`).
fn param(d: &Device, shape: &[usize], fan_in: usize, seed: u64) -> Tensor {
    let bound = 1.0 / (fan_in as f64).sqrt();
    Tensor::rand(shape, -bound, bound, seed, DType::F32, d).unwrap().requires_grad_(true).unwrap()
}

pub fn train_mlp(d: &Device) {
    let (x, y) = dataset(d, 256);
    let (h1, h2) = (32, 32);
    let params =
        [param(d, &[2, h1], 2, 1), param(d, &[h1], 2, 2), param(d, &[h1, h2], h1, 3), param(d, &[h2], h1, 4), param(d, &[h2, 2], h2, 5), param(d, &[2], h2, 6)];
    let forward = |p: &[Tensor]| -> crate::Result<Tensor> {
        let a = x.matmul(&p[0])?.add(&p[1])?.tanh()?;
        let b = a.matmul(&p[2])?.add(&p[3])?.relu()?;
        b.matmul(&p[4])?.add(&p[5])
    };
    let lr = 0.5;
    let loss_now = || crate::no_grad(|| forward(&params)?.cross_entropy(&y, Reduction::Mean)?.item_f64()).unwrap();
    // The loss is read only before and after: a read each step would wait on the device each step.
    let first = loss_now();
    for _ in 0..600 {
        let loss = forward(&params).and_then(|o| o.cross_entropy(&y, Reduction::Mean)).expect("forward");
        loss.backward().expect("backward");
        crate::no_grad(|| {
            for p in &params {
                let g = p.grad().expect("every parameter gets a gradient");
                p.assign(&p.sub(&g.mul_scalar(lr)?)?)?;
                p.set_grad(None);
            }
            crate::Result::Ok(())
        })
        .expect("sgd step");
    }
    let last = loss_now();
    let accuracy = crate::no_grad(|| {
        let pred = forward(&params)?.argmax(1usize, false)?;
        pred.eq(&y)?.to_dtype(DType::F32)?.mean_all()?.item_f64()
    })
    .unwrap();
    assert!(first > 0.5, "the untrained loss should be near ln 2, got {first}");
    assert!(last < 0.05, "training did not converge: loss {first} -> {last}");
    assert!(accuracy > 0.99, "training accuracy {accuracy}");
}
