//! Autocast's minimum size ([`AutocastGuard::with_min_ops`]): products below it keep the
//! types they are given and cast nothing; products from it are lowered as always.

use std::cell::RefCell;
use std::rc::Rc;

use liandan_backend_cpu as _;
use liandan_tensor::observe::observe_ops;
use liandan_tensor::{autocast_dtype, autocast_min_ops, AutocastGuard, DType, Device, MinOps, Result, Tensor};

/// `f`'s result and the casts it ran, forward and backward.
fn with_casts<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let count = Rc::new(RefCell::new(0));
    let seen = count.clone();
    let r = observe_ops(
        move |op| {
            if op.op == "to_dtype" {
                *seen.borrow_mut() += 1;
            }
        },
        f,
    );
    let n = *count.borrow();
    (r, n)
}

fn param(shape: &[usize], seed: u64, dev: &Device) -> Tensor {
    Tensor::randn(shape, seed, DType::F32, dev).unwrap().requires_grad_(true).unwrap()
}

#[test]
fn products_below_the_minimum_stay_f32_and_cast_nothing() {
    let dev = Device::cpu();
    let x = Tensor::randn(&[4, 3, 6, 6], 1, DType::F32, &dev).unwrap();
    let (w, b) = (param(&[5, 3, 3, 3], 2, &dev), param(&[5], 3, &dev));
    let (fw, fb) = (param(&[7, 180], 4, &dev), param(&[7], 5, &dev));
    let step = || -> Result<(Tensor, Tensor)> {
        let y = x.conv2d(&w, Some(&b), (1, 1), (1, 1), (1, 1), 1)?.relu()?;
        let y = y.reshape(&[4, 180])?.linear(&fw, Some(&fb))?;
        let z = y.matmul(&fw)?;
        let loss = z.square()?.sum_all()?;
        Ok((y, loss))
    };
    let plain = step().unwrap();
    plain.1.backward().unwrap();
    let grads: Vec<Vec<f64>> = [&w, &b, &fw, &fb].iter().map(|p| p.grad().unwrap().to_vec_f64().unwrap()).collect();
    for p in [&w, &b, &fw, &fb] {
        p.set_grad(None);
    }

    // The largest product here is the convolution's: 2 * 4 * 36 * 135 = 38,880 operations.
    let ((y, loss), casts) = with_casts(|| {
        let out = {
            let _region = AutocastGuard::with_min_ops(DType::F16, 40_000).unwrap();
            assert_eq!(autocast_min_ops(), MinOps::all(40_000));
            step().unwrap()
        };
        out.1.backward().unwrap();
        out
    });
    assert_eq!(casts, 0, "nothing under the minimum is cast, forward or backward");
    assert_eq!(y.dtype(), DType::F32);
    assert_eq!(y.to_vec_f64().unwrap(), plain.0.to_vec_f64().unwrap(), "the same op in the same type");
    assert_eq!(loss.to_vec_f64().unwrap(), plain.1.to_vec_f64().unwrap());
    for (p, g) in [&w, &b, &fw, &fb].iter().zip(&grads) {
        assert_eq!(&p.grad().unwrap().to_vec_f64().unwrap(), g);
    }

    // From the minimum, the same products are lowered as `torch.autocast` lowers them.
    let (y, casts) = with_casts(|| {
        let _region = AutocastGuard::with_min_ops(DType::F16, 1_000).unwrap();
        step().unwrap().0
    });
    assert_eq!(y.dtype(), DType::F16);
    assert!(casts > 0);
}

#[test]
fn a_small_product_of_mixed_types_computes_in_the_wider() {
    let dev = Device::cpu();
    let x = Tensor::randn(&[8, 16], 1, DType::F32, &dev).unwrap().to_dtype(DType::F16).unwrap().requires_grad_(true).unwrap();
    let (w, b) = (param(&[4, 16], 2, &dev), param(&[4], 3, &dev));
    let (y, casts) = with_casts(|| {
        let _region = AutocastGuard::with_min_ops(DType::BF16, 1 << 20).unwrap();
        x.linear(&w, Some(&b)).unwrap()
    });
    assert_eq!((y.dtype(), casts), (DType::F32, 1), "the f16 input is widened; the weight and bias are not narrowed");
    let want = x.to_dtype(DType::F32).unwrap().linear(&w, Some(&b)).unwrap();
    assert_eq!(y.to_vec_f64().unwrap(), want.to_vec_f64().unwrap());
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().dtype(), DType::F16);
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
}

#[test]
fn the_recurrence_and_attention_stay_f32_below_the_minimum() {
    let dev = Device::cpu();
    let (gates, h, c) = (
        Tensor::randn(&[2, 12], 1, DType::F32, &dev).unwrap(),
        Tensor::randn(&[2, 3], 2, DType::F32, &dev).unwrap(),
        Tensor::randn(&[2, 3], 3, DType::F32, &dev).unwrap(),
    );
    let w_hh = param(&[12, 3], 4, &dev);
    let q = Tensor::randn(&[2, 5, 4], 5, DType::F32, &dev).unwrap();
    let run = || -> Result<Vec<Tensor>> {
        let (h1, c1) = Tensor::lstm_step(&gates, &h, &w_hh.t()?, &c)?;
        let a = q.scaled_dot_product_attention(&q, &q, None, false, None)?;
        Ok(vec![h1, c1, a])
    };
    let plain = run().unwrap();
    let (got, casts) = with_casts(|| {
        let _region = AutocastGuard::with_min_ops(DType::F16, 1 << 20).unwrap();
        run().unwrap()
    });
    assert_eq!(casts, 0);
    for (g, p) in got.iter().zip(&plain) {
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(g.to_vec_f64().unwrap(), p.to_vec_f64().unwrap());
    }
}

#[test]
fn regions_nest_and_restore_their_minimum() {
    let dev = Device::cpu();
    let (x, w) = (Tensor::ones(&[2, 2], DType::F32, &dev).unwrap(), Tensor::ones(&[2, 2], DType::F32, &dev).unwrap());
    {
        let _outer = AutocastGuard::with_min_ops(DType::F16, 1 << 20).unwrap();
        assert_eq!(x.matmul(&w).unwrap().dtype(), DType::F32);
        {
            // A plain region inside lowers every product, as `torch.autocast`.
            let _inner = AutocastGuard::new(DType::BF16).unwrap();
            assert_eq!(autocast_min_ops(), MinOps::all(0));
            assert_eq!(x.matmul(&w).unwrap().dtype(), DType::BF16);
        }
        assert_eq!((autocast_dtype(), autocast_min_ops()), (Some(DType::F16), MinOps::all(1 << 20)));
        assert_eq!(x.matmul(&w).unwrap().dtype(), DType::F32);
    }
    assert_eq!((autocast_dtype(), autocast_min_ops()), (None, MinOps::all(0)));
}

/// Separate minimums: each kind of product is lowered from its own.
#[test]
fn matmul_and_convolutions_have_their_own_minimum() {
    let dev = Device::cpu();
    let x = Tensor::randn(&[4, 3, 6, 6], 1, DType::F32, &dev).unwrap();
    let w = param(&[5, 3, 3, 3], 2, &dev);
    let fw = param(&[7, 180], 4, &dev);
    // The convolution: 38,880 operations; the linear layer: 2 * 4 * 180 * 7 = 10,080.
    let run = |min: MinOps| {
        let _region = AutocastGuard::with_minimums(DType::BF16, min).unwrap();
        let y = x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1).unwrap();
        let z = y.reshape(&[4, 180]).unwrap().linear(&fw, None).unwrap();
        (y.dtype(), z.dtype())
    };
    assert_eq!(run(MinOps { matmul: 20_000, conv: 1_000 }), (DType::BF16, DType::F32));
    assert_eq!(run(MinOps { matmul: 1_000, conv: 40_000 }), (DType::F32, DType::BF16));
    assert_eq!(run(MinOps::all(1_000)), (DType::BF16, DType::BF16));
}
