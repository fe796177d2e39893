//! Autocast's cast cache: a parameter is cast to the low type once per region.

use std::cell::RefCell;
use std::rc::Rc;

use liandan_backend_cpu as _;
use liandan_tensor::observe::observe_ops;
use liandan_tensor::{autocast, no_grad, DType, Device, Result, Tensor};

fn weight(dev: &Device) -> Tensor {
    Tensor::randn(&[3, 4], 1, DType::F32, dev).unwrap().requires_grad_(true).unwrap()
}

fn input(seed: u64, dev: &Device) -> Tensor {
    Tensor::randn(&[5, 3], seed, DType::F32, dev).unwrap()
}

/// `f`'s result, and how many casts of `w` it ran (forward and backward).
fn casts_of<R>(w: &Tensor, f: impl FnOnce() -> R) -> (R, usize) {
    let count = Rc::new(RefCell::new(0));
    let seen = count.clone();
    let id = w.id();
    let r = observe_ops(
        move |op| {
            if op.op == "to_dtype" && op.inputs.first().is_some_and(|t| t.id() == id) {
                *seen.borrow_mut() += 1;
            }
        },
        f,
    );
    let n = *count.borrow();
    (r, n)
}

/// `x1 w + x2 w`, summed in f32: one weight used by two products.
fn twice(x1: &Tensor, x2: &Tensor, w: &Tensor) -> Result<Tensor> {
    x1.matmul(w)?.add(&x2.matmul(w)?)?.sum_all()
}

#[test]
fn a_weight_used_twice_in_a_region_is_cast_once() {
    let dev = Device::cpu();
    let (w, x1, x2) = (weight(&dev), input(2, &dev), input(3, &dev));
    let (loss, casts) = casts_of(&w, || autocast(DType::F16, || twice(&x1, &x2, &w)).unwrap());
    assert_eq!(casts, 1);
    loss.backward().unwrap();

    // The same graph built by hand: one cast, used twice, so both products' gradients are
    // summed in f16 before the one cast back (as PyTorch's cached cast sums them).
    let w2 = w.detach().requires_grad_(true).unwrap();
    let w16 = w2.to_dtype(DType::F16).unwrap();
    let (a, b) = (x1.to_dtype(DType::F16).unwrap(), x2.to_dtype(DType::F16).unwrap());
    let want = a.matmul(&w16).unwrap().add(&b.matmul(&w16).unwrap()).unwrap().to_dtype(DType::F32).unwrap().sum_all().unwrap();
    want.backward().unwrap();
    assert_eq!(loss.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), w2.grad().unwrap().to_vec::<f32>().unwrap());

    // And close to the f32 gradient (x1 + x2 summed over rows, for every column).
    let g32 = {
        let w3 = w.detach().requires_grad_(true).unwrap();
        twice(&x1, &x2, &w3).unwrap().backward().unwrap();
        w3.grad().unwrap().to_vec::<f32>().unwrap()
    };
    for (got, want) in w.grad().unwrap().to_vec::<f32>().unwrap().iter().zip(&g32) {
        assert!((got - want).abs() <= 1e-2 + 1e-2 * want.abs(), "{got} vs {want}");
    }
}

#[test]
fn the_cache_empties_when_the_outermost_region_closes() {
    let dev = Device::cpu();
    let (w, x) = (weight(&dev), input(2, &dev));
    let (_, casts) = casts_of(&w, || {
        for _ in 0..2 {
            autocast(DType::F16, || x.matmul(&w)).unwrap();
        }
    });
    assert_eq!(casts, 2, "each region casts afresh");

    // A region closing inside another keeps the outer one's casts.
    let (_, casts) = casts_of(&w, || {
        autocast(DType::F16, || {
            x.matmul(&w)?;
            autocast(DType::F32, || x.matmul(&w))?;
            x.matmul(&w)
        })
        .unwrap()
    });
    assert_eq!(casts, 1);
}

#[test]
fn nested_regions_of_two_types_keep_a_cast_for_each() {
    let dev = Device::cpu();
    let (w, x) = (weight(&dev), input(2, &dev));
    let (types, casts) = casts_of(&w, || {
        autocast(DType::F16, || {
            let a = x.matmul(&w)?;
            let b = autocast(DType::BF16, || x.matmul(&w))?;
            let c = x.matmul(&w)?;
            let d = autocast(DType::BF16, || x.matmul(&w))?;
            Ok::<_, liandan_tensor::Error>([a.dtype(), b.dtype(), c.dtype(), d.dtype()])
        })
        .unwrap()
    });
    assert_eq!(types, [DType::F16, DType::BF16, DType::F16, DType::BF16]);
    assert_eq!(casts, 2);
}

#[test]
fn a_weight_assigned_in_a_region_is_cast_again() {
    let dev = Device::cpu();
    let (w, x) = (weight(&dev), input(2, &dev));
    let (ys, casts) = casts_of(&w, || {
        autocast(DType::F16, || {
            let before = x.matmul(&w)?;
            no_grad(|| w.assign(&w.mul_scalar(2.0)?))?;
            let after = x.matmul(&w)?;
            Ok::<_, liandan_tensor::Error>((before, after))
        })
        .unwrap()
    });
    assert_eq!(casts, 2);
    let (before, after) = (ys.0.to_vec_f64().unwrap(), ys.1.to_vec_f64().unwrap());
    for (b, a) in before.iter().zip(&after) {
        // Doubling is exact in f16, so the product doubles exactly too.
        assert_eq!(*a, 2.0 * b);
    }
}

#[test]
fn backward_inside_a_region_leaves_the_next_forward_a_live_cast() {
    let dev = Device::cpu();
    let (w, x) = (weight(&dev), input(2, &dev));
    let (_, casts) = casts_of(&w, || {
        autocast(DType::F16, || {
            x.matmul(&w)?.sum_all()?.backward()?;
            x.matmul(&w)?.sum_all()?.backward()
        })
        .unwrap()
    });
    // Backward freed the first cast's node: the second forward casts again and reaches w.
    assert_eq!(casts, 2);
    let once = {
        let w2 = w.detach().requires_grad_(true).unwrap();
        autocast(DType::F16, || x.matmul(&w2)?.sum_all()?.backward()).unwrap();
        w2.grad().unwrap().to_vec::<f32>().unwrap()
    };
    let got = w.grad().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, once.iter().map(|g| 2.0 * g).collect::<Vec<_>>());
}

#[test]
fn a_cast_made_without_grad_is_not_reused_with_grad() {
    let dev = Device::cpu();
    let (w, x) = (weight(&dev), input(2, &dev));
    autocast(DType::F16, || {
        no_grad(|| x.matmul(&w))?;
        x.matmul(&w)?.sum_all()?.backward()
    })
    .unwrap();
    assert!(w.grad().is_some(), "the recorded forward reached the weight");
}
