//! The optimizers' CPU kernels write every element of their outputs, so they take buffers the
//! CPU kept for reuse with their old values, unfilled: with the pool stocked with NaN buffers
//! of the parameters' size, three steps of each optimizer leave the parameters and state they
//! leave from an empty pool, bit for bit. Alone in this binary: the pool is process-wide.

mod common;

use common::values;

use liandan_nn::{DType, Device, Tensor};
use liandan_train::optim::{AdadeltaConfig, AdagradConfig, AdamConfig, Optim, Optimizer, RmsPropConfig, Rule, SgdConfig};

/// 288 KiB of f32: buffers this large are kept.
const SHAPE: [usize; 2] = [240, 300];

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64().unwrap().iter().map(|x| x.to_bits()).collect()
}

/// The parameter and every state tensor's bits after three steps of `config`.
fn steps<R: Rule>(dev: &Device, config: &R) -> Vec<Vec<u64>> {
    let n = SHAPE.iter().product();
    let p = Tensor::from_f64s(&values(n, 1), &SHAPE, DType::F32, dev).unwrap();
    let mut opt = Optim::new(vec![("p".to_string(), p.clone())], config.clone()).unwrap();
    for step in 0..3 {
        p.set_grad(Some(Tensor::from_f64s(&values(n, 10 + step), &SHAPE, DType::F32, dev).unwrap()));
        opt.step().unwrap();
    }
    let state = opt.state_dict().unwrap();
    std::iter::once(bits(&p)).chain(state.tensors.iter().map(|(_, t)| bits(t))).collect()
}

fn check<R: Rule + std::fmt::Debug>(dev: &Device, config: R) {
    dev.empty_cache();
    let want = steps(dev, &config);
    let poisoned: Vec<Tensor> = (0..12).map(|_| Tensor::full(&SHAPE, f64::NAN, DType::F32, dev).unwrap()).collect();
    drop(poisoned);
    assert!(steps(dev, &config) == want, "{config:?}: a kept buffer's old values leaked into a step");
}

#[test]
fn optimizer_steps_ignore_what_a_kept_buffer_held() {
    let dev = Device::cpu();
    check(&dev, AdamConfig { amsgrad: true, ..AdamConfig::adamw(1e-2) });
    check(&dev, SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 1e-3, ..SgdConfig::default() });
    check(&dev, SgdConfig { lr: 0.1, ..SgdConfig::default() });
    check(&dev, RmsPropConfig { momentum: 0.9, centered: true, ..RmsPropConfig::default() });
    check(&dev, AdagradConfig { lr: 0.1, ..AdagradConfig::default() });
    check(&dev, AdadeltaConfig { lr: 0.5, ..AdadeltaConfig::default() });
}
