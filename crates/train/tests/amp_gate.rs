//! The loss scaler's skip decided on the device (`GradScaler::step`) against the host's
//! decision (`unscale_and_update`, then `step` when it says so): over five steps, the first
//! and the fourth overflowing, every optimizer leaves the same parameters, the same saved
//! state (step counts, and no state for a first step that was skipped) and the same scale,
//! bit for bit. On a GPU the skip is not read back at the step: the step counts include a
//! skipped step until the optimizer reads its check (on the CPU, which has no kernel that
//! reads the flag, the host reads it at once).

mod common;

use common::values;

use liandan_nn::{DType, Device, Tensor};
use liandan_train::amp::GradScaler;
use liandan_train::optim::{AdadeltaConfig, AdagradConfig, AdamConfig, Optim, Optimizer, OptimizerState, RmsPropConfig, Rule, SgdConfig};

/// Every tensor's bits (NaN as one pattern).
fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64().unwrap().iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect()
}

/// A saved state as comparable values: the JSON, and each tensor's name and bits.
type Saved = (String, Vec<(String, Vec<u64>)>);

/// What a run leaves: parameters' bits, the state saved right after the skipped fourth step
/// and at the end, the scale, a step count (see [`run`]).
type Outcome = (Vec<Vec<u64>>, [Saved; 2], f64, Option<u64>);

fn saved(state: &OptimizerState) -> Saved {
    (state.hyper.to_string(), state.tensors.iter().map(|(n, t)| (n.clone(), bits(t))).collect())
}

/// Steps whose gradients hold an infinity.
const OVERFLOWS: [usize; 2] = [0, 3];

/// Parameters, saved optimizer state (right after the skipped fourth step, and at the end)
/// and scale after five steps of `config`, the skip decided on the device or by the host; and
/// the first parameter's step count right after the skipped fourth step.
fn run<R: Rule>(device: &Device, config: &R, on_device: bool) -> Outcome {
    let shapes: [&[usize]; 5] = [&[1], &[300], &[7, 37], &[17], &[600]];
    let params: Vec<(String, Tensor)> = (0..25)
        .map(|i| {
            let shape = shapes[i % shapes.len()];
            (format!("p{i}"), Tensor::from_f64s(&values(shape.iter().product(), 100 + i as u64), shape, DType::F32, device).unwrap())
        })
        .collect();
    let tensors: Vec<Tensor> = params.iter().map(|(_, p)| p.clone()).collect();
    let mut opt = Optim::new(params.clone(), config.clone()).unwrap();
    let mut scaler = GradScaler::with_scale(1024.0);
    let (mut counted, mut midway) = (None, None);
    for step in 0..5 {
        for (i, p) in tensors.iter().enumerate() {
            let mut g: Vec<f64> = values(p.numel(), 1000 + 10 * step as u64 + i as u64).iter().map(|v| v * 1024.0).collect();
            if OVERFLOWS.contains(&step) && i == 7 {
                g[3] = f64::INFINITY;
            }
            p.set_grad(Some(Tensor::from_f64s(&g, p.shape(), DType::F32, device).unwrap()));
        }
        if on_device {
            let flag = scaler.unscale_(&tensors).unwrap();
            scaler.step(&mut opt, &flag).unwrap();
            if step == 3 {
                counted = Some(opt.param_state("p0").unwrap().step);
            }
        } else if scaler.unscale_and_update(&tensors).unwrap() {
            opt.step().unwrap();
        }
        if step == 3 {
            midway = Some(saved(&opt.state_dict().unwrap()));
        }
    }
    let state = [midway.unwrap(), saved(&opt.state_dict().unwrap())];
    scaler.settle().unwrap();
    (tensors.iter().map(bits).collect(), state, scaler.get_scale(), counted)
}

fn check<R: Rule + std::fmt::Debug>(device: &Device, config: R) {
    let (host_params, host_state, host_scale, _) = run(device, &config, false);
    let (params, state, scale, counted) = run(device, &config, true);
    assert!(params == host_params, "{config:?} on {device}: the parameters differ from the host's decision");
    assert!(state == host_state, "{config:?} on {device}: a saved state differs from the host's decision");
    assert_eq!(scale, host_scale, "{config:?} on {device}: the scale");
    assert_eq!(scale, 256.0, "two overflows halve 1024 twice");
    // Steps 1 and 2 were taken; the host knows at once, the device's skip is read later.
    let want = if device.is_cpu() { 2 } else { 3 };
    assert_eq!(counted, Some(want), "{config:?} on {device}: the first parameter's count right after the skipped step");
}

#[test]
fn steps_skipped_on_the_device_match_the_hosts_decision() {
    for device in common::devices() {
        check(&device, AdamConfig::adam(1e-2));
        check(&device, AdamConfig { amsgrad: true, weight_decay: 0.1, ..AdamConfig::adamw(1e-2) });
        check(&device, SgdConfig { lr: 0.1, momentum: 0.9, nesterov: true, ..SgdConfig::default() });
        check(&device, SgdConfig { lr: 0.1, ..SgdConfig::default() });
        check(&device, RmsPropConfig { momentum: 0.9, centered: true, ..RmsPropConfig::default() });
        check(&device, AdagradConfig { lr: 0.1, lr_decay: 0.01, ..AdagradConfig::default() });
        check(&device, AdadeltaConfig { lr: 0.5, ..AdadeltaConfig::default() });
    }
}

/// The loss is scaled on the device by the scale the last step left, which `get_scale` reads
/// and `settle` brings to the host.
#[test]
fn the_next_loss_is_scaled_by_the_scale_the_skip_left() {
    for device in common::devices() {
        let p = Tensor::from_f64s(&[1.0, 2.0], &[2], DType::F32, &device).unwrap();
        let mut opt = Optim::new(vec![("p".to_string(), p.clone())], SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
        let mut scaler = GradScaler::with_scale(8.0);
        scaler.growth_interval = 2;
        let one = Tensor::scalar(1.0, DType::F32, &device).unwrap();
        // Good, good (the scale grows to 16), overflow (back to 8), good.
        for (step, (grad, want)) in [(1.0, 8.0), (1.0, 16.0), (f64::NAN, 8.0), (1.0, 8.0)].into_iter().enumerate() {
            p.set_grad(Some(Tensor::from_f64s(&[grad, 1.0], &[2], DType::F32, &device).unwrap()));
            let flag = scaler.unscale_(std::slice::from_ref(&p)).unwrap();
            scaler.step(&mut opt, &flag).unwrap();
            assert_eq!(scaler.scale(&one).unwrap().item_f64().unwrap(), want, "step {step} on {device}");
            // Asked for, the scale is the device's, as PyTorch's `get_scale` reads it.
            assert_eq!(scaler.get_scale(), want, "get_scale after step {step} on {device}");
        }
        scaler.settle().unwrap();
        assert_eq!((scaler.get_scale(), scaler.skipped_steps()), (8.0, 1), "on {device}");
    }
}

/// When the host learns of a step the device skipped: at once on the CPU; on a GPU two steps
/// on where the rule's arithmetic reads the step count (Adam: the step between is recorded
/// for both outcomes), and three steps on where it does not (SGD without momentum): nothing
/// waits for a check the device has just written. The saved state leaves the skipped step
/// out whenever it is taken.
#[test]
fn a_skipped_steps_count_is_taken_back_when_its_check_is_read() {
    fn counts<R: Rule>(device: &Device, config: R) -> Vec<u64> {
        let p = Tensor::from_f64s(&[1.0, 2.0], &[2], DType::F32, device).unwrap();
        let mut opt = Optim::new(vec![("p".to_string(), p.clone())], config).unwrap();
        let mut scaler = GradScaler::with_scale(8.0);
        let mut seen = Vec::new();
        for step in 0..6 {
            let g = if step == 1 { f64::INFINITY } else { 1.0 };
            p.set_grad(Some(Tensor::from_f64s(&[g, 1.0], &[2], DType::F32, device).unwrap()));
            let flag = scaler.unscale_(std::slice::from_ref(&p)).unwrap();
            scaler.step(&mut opt, &flag).unwrap();
            seen.push(opt.param_state("p").unwrap().step);
            let saved = opt.state_dict().unwrap().hyper["steps"]["p"].as_u64();
            assert_eq!(saved, Some(step.max(1) as u64), "{device}: the saved count after step {step}");
        }
        seen
    }
    for device in common::devices() {
        let (sgd, adam) = (counts(&device, SgdConfig { lr: 0.1, ..SgdConfig::default() }), counts(&device, AdamConfig::adam(1e-2)));
        if device.is_cpu() {
            assert_eq!((sgd, adam), (vec![1, 1, 2, 3, 4, 5], vec![1, 1, 2, 3, 4, 5]), "on {device}");
        } else {
            assert_eq!((sgd, adam), (vec![1, 2, 3, 4, 4, 5], vec![1, 2, 3, 3, 4, 5]), "on {device}");
        }
    }
}

/// A parameter that had no gradient in the step before, under a rule that reads the step
/// count: its count does not include that step, so the host reads that step's check before
/// the update rather than recording it both ways. Over six steps (the third overflowing,
/// `b` without a gradient in it, `c` without one in the fifth), Adam's parameters and scale
/// match the host's decision bit for bit.
#[test]
fn a_parameter_missing_from_the_last_step_matches_the_hosts_decision() {
    fn run(device: &Device, on_device: bool) -> (Vec<Vec<u64>>, f64) {
        let names = ["a", "b", "c"];
        let params: Vec<(String, Tensor)> =
            names.iter().enumerate().map(|(i, n)| (n.to_string(), Tensor::from_f64s(&values(40, 7 + i as u64), &[40], DType::F32, device).unwrap())).collect();
        let tensors: Vec<Tensor> = params.iter().map(|(_, p)| p.clone()).collect();
        let mut opt = Optim::new(params, AdamConfig::adam(1e-2)).unwrap();
        let mut scaler = GradScaler::with_scale(64.0);
        for step in 0..6u64 {
            let mut with_grads = Vec::new();
            for (i, p) in tensors.iter().enumerate() {
                let missing = (step == 2 && i == 1) || (step == 4 && i == 2);
                if missing {
                    p.set_grad(None);
                    continue;
                }
                let mut g: Vec<f64> = values(40, 100 + 10 * step + i as u64).iter().map(|v| v * 64.0).collect();
                if step == 2 && i == 0 {
                    g[5] = f64::NAN;
                }
                p.set_grad(Some(Tensor::from_f64s(&g, &[40], DType::F32, device).unwrap()));
                with_grads.push(p.clone());
            }
            if on_device {
                let flag = scaler.unscale_(&with_grads).unwrap();
                scaler.step(&mut opt, &flag).unwrap();
            } else if scaler.unscale_and_update(&with_grads).unwrap() {
                opt.step().unwrap();
            }
        }
        scaler.settle().unwrap();
        (tensors.iter().map(bits).collect(), scaler.get_scale())
    }
    for device in common::devices() {
        let (host, host_scale) = run(&device, false);
        let (params, scale) = run(&device, true);
        assert!(params == host, "on {device}: the parameters differ from the host's decision");
        assert_eq!((scale, host_scale), (32.0, 32.0), "on {device}: one overflow halves the scale");
    }
}
