//! The fused optimizer updates (`adam_step`, `sgd_step`, `rmsprop_step`, `adagrad_step`,
//! `adadelta_step`: the custom ops of `optim/fused`) against their composites (each config's
//! `update` with fusion off), on every device and float dtype, over every option, for several
//! steps: parameters and state must agree. On the wgpu backend the fused run's two parameters
//! go through the multi-tensor kernels, which `fused_foreach.rs` holds bit for bit to the
//! per-tensor ones. (Parity of the fused path with PyTorch itself is `optim_parity.rs`, which
//! runs fused.)

mod common;

use common::values;

use liandan_nn::{no_fusion, profile, DType, Device, Tensor};
use liandan_train::optim::{AdadeltaConfig, AdagradConfig, AdamConfig, Optim, Optimizer, RmsPropConfig, Rule, SgdConfig};

/// Parameters and state after `steps` steps of `config` from seeded values and gradients, as
/// f64 vectors (parameters first, then each state tensor in `state_names` order).
fn run<R: Rule>(device: &Device, dtype: DType, config: &R, steps: usize) -> Vec<Vec<f64>> {
    run_with(device, dtype, config, steps, false)
}

/// As [`run`]; with `joined`, every step's gradients are slices of one buffer (the second at an
/// offset).
fn run_with<R: Rule>(device: &Device, dtype: DType, config: &R, steps: usize, joined: bool) -> Vec<Vec<f64>> {
    // 7 x 37 = 259 elements: more than one 256-wide workgroup, not a multiple of it.
    let shapes: [&[usize]; 2] = [&[7, 37], &[5]];
    let params: Vec<(String, Tensor)> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| (format!("p{k}"), Tensor::from_f64s(&values(s.iter().product(), 1 + k as u64), s, dtype, device).unwrap()))
        .collect();
    let mut opt = Optim::new(params.clone(), config.clone()).unwrap();
    for step in 0..steps {
        // Gradients of magnitude 0.1 to 1: a smaller one makes second moments that are f16
        // subnormals, whose rounding Vulkan leaves to the driver (the H200 flushed them in one
        // kernel and not in another), so f16 results would differ for that reason alone.
        let grads: Vec<Vec<f64>> = params
            .iter()
            .enumerate()
            .map(|(k, (_, p))| values(p.numel(), 100 + 10 * step as u64 + k as u64).iter().map(|v| v.signum() * (0.1 + 0.9 * v.abs())).collect())
            .collect();
        if joined {
            let all = Tensor::from_f64s(&grads.concat(), &[grads.iter().map(Vec::len).sum::<usize>()], dtype, device).unwrap();
            let mut at = 0;
            for (_, p) in &params {
                p.set_grad(Some(all.narrow(0usize, at, p.numel()).unwrap().reshape(p.shape()).unwrap()));
                at += p.numel();
            }
        } else {
            for ((_, p), g) in params.iter().zip(&grads) {
                p.set_grad(Some(Tensor::from_f64s(g, p.shape(), dtype, device).unwrap()));
            }
        }
        opt.step().unwrap();
    }
    let mut out = Vec::new();
    for (name, p) in &params {
        out.push(p.to_vec_f64().unwrap());
        out.extend(opt.param_state(name).unwrap().tensors.iter().map(|t| t.to_vec_f64().unwrap()));
    }
    out
}

/// The fused run against the composite's within `atol + rtol * |want|`.
fn check<R: Rule + std::fmt::Debug>(device: &Device, config: R) {
    for (dtype, atol, rtol) in [(DType::F32, 1e-6, 1e-5), (DType::F64, 1e-12, 1e-12), (DType::F16, 5e-3, 5e-3), (DType::BF16, 3e-2, 3e-2)] {
        let fused = run(device, dtype, &config, 4);
        let plain = no_fusion(|| run(device, dtype, &config, 4));
        assert_eq!(fused.len(), plain.len(), "{config:?} {dtype} on {device}: the state differs in size");
        for (k, (got, want)) in fused.iter().zip(&plain).enumerate() {
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                // Both NaN counts as agreeing: in f16 an eps of 1e-8 rounds to 0, so a zero
                // second moment divides 0 by 0 in the composite as in the kernel.
                let same = (g - w).abs() <= atol + rtol * w.abs() || g == w || g.is_nan() && w.is_nan();
                assert!(same, "{config:?} {dtype} on {device}: tensor {k}[{i}] fused {g}, composite {w}");
            }
        }
    }
}

fn adam_configs() -> Vec<AdamConfig> {
    let base = AdamConfig::adam(1e-2);
    vec![
        base.clone(),
        AdamConfig { amsgrad: true, weight_decay: 0.1, ..base.clone() },
        AdamConfig { maximize: true, betas: (0.3, 0.9), ..base.clone() },
        AdamConfig::adamw(1e-2),
        AdamConfig { amsgrad: true, maximize: true, ..AdamConfig::adamw(1e-2) },
    ]
}

fn sgd_configs() -> Vec<SgdConfig> {
    let base = SgdConfig { lr: 0.1, ..SgdConfig::default() };
    vec![
        base.clone(),
        SgdConfig { weight_decay: 0.01, maximize: true, ..base.clone() },
        SgdConfig { momentum: 0.9, ..base.clone() },
        SgdConfig { momentum: 0.9, dampening: 0.3, weight_decay: 0.01, ..base.clone() },
        SgdConfig { momentum: 0.8, nesterov: true, maximize: true, ..base },
    ]
}

fn rmsprop_configs() -> Vec<RmsPropConfig> {
    // eps 1e-4 (a normal f16): the default 1e-8 rounds to 0 in f16 (on the H200 the composite
    // then gave NaN where the kernel did not). PyTorch parity with the default eps is tested in
    // f32 by `optim_parity`.
    let base = RmsPropConfig { eps: 1e-4, ..RmsPropConfig::default() };
    vec![
        base.clone(),
        RmsPropConfig { momentum: 0.9, weight_decay: 0.01, ..base.clone() },
        RmsPropConfig { centered: true, maximize: true, ..base.clone() },
        // alpha below 0.5 takes torch.lerp's other branch for the gradient average.
        RmsPropConfig { lr: 5e-3, alpha: 0.3, eps: 1e-6, momentum: 0.5, centered: true, weight_decay: 0.01, maximize: false },
    ]
}

fn adagrad_configs() -> Vec<AdagradConfig> {
    let base = AdagradConfig { lr: 0.1, ..AdagradConfig::default() };
    vec![
        base.clone(),
        AdagradConfig { lr_decay: 0.01, weight_decay: 0.01, initial_accumulator_value: 0.1, eps: 1e-8, ..base.clone() },
        AdagradConfig { maximize: true, ..base },
    ]
}

fn adadelta_configs() -> Vec<AdadeltaConfig> {
    let base = AdadeltaConfig::default();
    vec![base.clone(), AdadeltaConfig { lr: 0.5, rho: 0.8, eps: 1e-5, weight_decay: 0.01, maximize: true }]
}

#[test]
fn fused_updates_match_their_composites() {
    for device in common::devices() {
        for config in adam_configs() {
            check(&device, config);
        }
        for config in sgd_configs() {
            check(&device, config);
        }
    }
}

#[test]
fn fused_rmsprop_adagrad_adadelta_match_their_composites() {
    for device in common::devices() {
        for config in rmsprop_configs() {
            check(&device, config);
        }
        for config in adagrad_configs() {
            check(&device, config);
        }
        for config in adadelta_configs() {
            check(&device, config);
        }
    }
}

/// Gradients that are slices of one buffer update the parameters and state exactly as
/// gradients of their own do, fused and not, on every device (in f16 too, where the fused
/// kernels and the composites round differently, so both must take the same path).
#[test]
fn gradients_sliced_from_one_buffer_update_alike() {
    for device in common::devices() {
        for dtype in [DType::F32, DType::F16] {
            let check = |name: &str, own: Vec<Vec<f64>>, sliced: Vec<Vec<f64>>| assert_eq!(own, sliced, "{name} on {device} in {dtype:?}");
            for config in adam_configs() {
                check("adam", run_with(&device, dtype, &config, 3, false), run_with(&device, dtype, &config, 3, true));
                check("adam, unfused", no_fusion(|| run_with(&device, dtype, &config, 3, false)), no_fusion(|| run_with(&device, dtype, &config, 3, true)));
            }
            for config in sgd_configs() {
                check("sgd", run_with(&device, dtype, &config, 3, false), run_with(&device, dtype, &config, 3, true));
            }
            for config in rmsprop_configs().into_iter().take(2) {
                check("rmsprop", run_with(&device, dtype, &config, 3, false), run_with(&device, dtype, &config, 3, true));
            }
        }
    }
}

/// Every device here has the update kernels for the float dtypes it computes, so the test
/// above compares two different paths (the CPU's f64 included; the GPU leaves f64 to the
/// composite): a step of each option set that changes the kernel runs its op's kernel (seen by
/// the profiler, per tensor or over several at once) and moves the parameter.
#[test]
fn devices_have_the_update_kernels() {
    fn ran<R: Rule>(device: &Device, dtype: DType, config: R, op: &str) {
        let params: Vec<(String, Tensor)> =
            (0..2).map(|k| (format!("p{k}"), Tensor::from_f64s(&values(9, k + 1), &[9], dtype, device).unwrap().abs().unwrap())).collect();
        for (_, p) in &params {
            p.set_grad(Some(Tensor::from_f64s(&values(9, 7), &[9], dtype, device).unwrap()));
        }
        let before = params[0].1.to_vec_f64().unwrap();
        let mut opt = Optim::new(params.clone(), config).unwrap();
        profile::start().unwrap();
        let stepped = opt.step();
        let events = profile::stop().unwrap().events();
        stepped.unwrap();
        assert!(events.iter().any(|e| e.name.starts_with(&format!("fused {op}"))), "{op} {dtype} on {device}: no kernel ran: {events:?}");
        assert_ne!(params[0].1.to_vec_f64().unwrap(), before, "{op} {dtype} on {device}: the parameter did not change");
    }
    for device in common::devices() {
        let dtypes: &[DType] = if device.is_cpu() { &[DType::F32, DType::F64, DType::F16, DType::BF16] } else { &[DType::F32, DType::F16, DType::BF16] };
        for &dtype in dtypes {
            ran(&device, dtype, AdamConfig { amsgrad: true, ..AdamConfig::adam(1e-3) }, "adam_step");
            ran(&device, dtype, SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }, "sgd_step");
            for (momentum, centered) in [(0.0, false), (0.9, false), (0.0, true), (0.9, true)] {
                ran(&device, dtype, RmsPropConfig { momentum, centered, ..RmsPropConfig::default() }, "rmsprop_step");
            }
            ran(&device, dtype, AdagradConfig { lr: 0.1, ..AdagradConfig::default() }, "adagrad_step");
            ran(&device, dtype, AdadeltaConfig::default(), "adadelta_step");
        }
    }
}
