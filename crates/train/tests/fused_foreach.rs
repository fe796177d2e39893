//! The multi-tensor ("foreach") updates against the per-tensor updates they stand for
//! (`no_foreach`, each of which `fused_optim.rs` checks against its composite): where the
//! device has a multi-tensor kernel, every parameter and state tensor must come out bit for bit
//! as the per-tensor updates leave it. Over every update and option set, in every float dtype
//! but f64, on tensors of mixed sizes (one element, a few, exactly one 256-wide workgroup, more
//! than one) and more of them than one dispatch takes; with buffers of their own (which a
//! device may update in place) and with a shared one (which it must not). Also the loss
//! scaler's division against `mul_scalar`, its unscale-and-check and next scale against their
//! composites, and the CPU kernels on 1, 2 and 4 threads.

mod common;

use common::values;

use liandan_nn::{no_fusion, DType, Device, Tensor};
use liandan_train::amp::GradScaler;
use liandan_train::optim::{AdadeltaConfig, AdagradConfig, AdamConfig, Optim, Optimizer, RmsPropConfig, Rule, SgdConfig};
use liandan_train::testing::no_foreach;

/// Every tensor's bits (NaN as one pattern, so that equal NaNs compare equal).
/// The tests of this file one at a time: they share one GPU, whose allocation count one of
/// them reads across a step.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec_f64().unwrap().iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect()
}

/// Parameters and state after two steps of `config` over `count` parameters of mixed sizes,
/// as bits; with `alias`, the first parameter is shared (a detached alias of it is held
/// through the steps, and must keep the values it had).
fn run<R: Rule>(device: &Device, dtype: DType, config: &R, count: usize, alias: bool) -> Vec<Vec<u64>> {
    let shapes: [&[usize]; 7] = [&[1], &[3], &[256], &[7, 37], &[17], &[2, 3], &[600]];
    let params: Vec<(String, Tensor)> = (0..count)
        .map(|i| {
            let shape = shapes[i % shapes.len()];
            let v: Vec<f64> = values(shape.iter().product(), 100 * i as u64).iter().map(|x| x.abs() + 0.1).collect();
            (format!("p{i}"), Tensor::from_f64s(&v, shape, dtype, device).unwrap())
        })
        .collect();
    let held = alias.then(|| params[0].1.detach());
    let kept = held.as_ref().map(bits);
    let mut opt = Optim::new(params.clone(), config.clone()).unwrap();
    for step in 0..2 {
        for (i, (_, p)) in params.iter().enumerate() {
            p.set_grad(Some(Tensor::from_f64s(&values(p.numel(), 1000 + 10 * step + i as u64), p.shape(), dtype, device).unwrap()));
        }
        opt.step().unwrap();
    }
    if let (Some(held), Some(kept)) = (&held, &kept) {
        assert!(&bits(held) == kept, "an alias of a shared parameter changed: a shared buffer was written in place");
    }
    let mut out = Vec::new();
    for (name, p) in &params {
        out.push(bits(p));
        out.extend(opt.param_state(name).unwrap().tensors.iter().map(bits));
    }
    out
}

/// Each option set of each update that changes its kernel or its arithmetic, over 30
/// parameters (more than one call takes), with and without a shared buffer.
fn check<R: Rule + std::fmt::Debug>(device: &Device, config: R) {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for alias in [false, true] {
            let together = run(device, dtype, &config, 30, alias);
            let alone = no_foreach(|| run(device, dtype, &config, 30, alias));
            assert!(together == alone, "{config:?} {dtype} on {device} (alias {alias}): the multi-tensor update differs from the per-tensor ones");
        }
    }
}

#[test]
fn foreach_updates_match_the_per_tensor_ones() {
    let _serial = serial();
    for device in common::devices() {
        let adam = AdamConfig::adam(1e-2);
        check(&device, adam.clone());
        check(&device, AdamConfig { amsgrad: true, weight_decay: 0.1, ..adam.clone() });
        check(&device, AdamConfig { decoupled_weight_decay: true, weight_decay: 0.01, maximize: true, betas: (0.3, 0.999), ..adam });
        let sgd = SgdConfig { lr: 0.1, ..SgdConfig::default() };
        check(&device, sgd.clone());
        check(&device, SgdConfig { momentum: 0.9, weight_decay: 0.01, ..sgd.clone() });
        check(&device, SgdConfig { momentum: 0.9, dampening: 0.3, maximize: true, ..sgd.clone() });
        check(&device, SgdConfig { momentum: 0.8, nesterov: true, ..sgd });
        let rms = RmsPropConfig { eps: 1e-4, ..RmsPropConfig::default() };
        check(&device, rms.clone());
        check(&device, RmsPropConfig { momentum: 0.9, weight_decay: 0.01, ..rms.clone() });
        check(&device, RmsPropConfig { centered: true, maximize: true, ..rms.clone() });
        check(&device, RmsPropConfig { momentum: 0.5, centered: true, alpha: 0.3, ..rms });
        check(&device, AdagradConfig { lr: 0.1, lr_decay: 0.01, weight_decay: 0.01, eps: 1e-8, ..AdagradConfig::default() });
        check(&device, AdadeltaConfig { lr: 0.5, rho: 0.8, eps: 1e-5, weight_decay: 0.01, maximize: true });
    }
}

/// The loss scaler's division of the gradients (one multi-tensor update where the device has
/// it, a kernel a gradient otherwise) against its oracle, `mul_scalar` by the inverse scale,
/// bit for bit, in every float dtype but f64: a scale every dtype inverts exactly (2^16) and
/// one whose inverse each rounds (3).
#[test]
fn unscaling_matches_mul_scalar() {
    let _serial = serial();
    for device in common::devices() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            for scale in [65536.0, 3.0] {
                let params: Vec<Tensor> =
                    [&[600][..], &[7, 37], &[1]].iter().map(|s| Tensor::zeros(s, dtype, &device).unwrap().requires_grad_(true).unwrap()).collect();
                let grads: Vec<Tensor> =
                    params.iter().enumerate().map(|(k, p)| Tensor::from_f64s(&values(p.numel(), 7 + k as u64), p.shape(), dtype, &device).unwrap()).collect();
                for (p, g) in params.iter().zip(&grads) {
                    p.set_grad(Some(g.clone()));
                }
                let want: Vec<Vec<u64>> = grads.iter().map(|g| bits(&g.mul_scalar(1.0 / scale).unwrap())).collect();
                GradScaler::with_scale(scale).unscale_(&params).unwrap();
                let got: Vec<Vec<u64>> = params.iter().map(|p| bits(&p.grad().unwrap())).collect();
                assert!(got == want, "unscale by {scale} in {dtype} on {device} differs from mul_scalar");
            }
        }
    }
}

/// The loss scaler's unscale and check as one op (where the device has it) against its two
/// halves with fusion off: the gradients bit for bit and the flag's verdict, over 30 f32
/// gradients (more than one dispatch takes; some with whole blocks of 1,024 elements, some
/// only a partial one), all finite, one infinite, one NaN, and one that the multiply itself
/// overflows, each past an element that a block's first quarter holds.
#[test]
fn unscale_and_check_match_their_halves() {
    let _serial = serial();
    for device in common::devices() {
        for (case, scale) in [("finite", 1024.0), ("inf", 1024.0), ("nan", 1024.0), ("overflow", 0.25)] {
            let run = || {
                let shapes: [&[usize]; 5] = [&[600], &[7, 37], &[1], &[256], &[3, 1000]];
                let params: Vec<Tensor> = (0..30).map(|i| Tensor::zeros(shapes[i % 5], DType::F32, &device).unwrap().requires_grad_(true).unwrap()).collect();
                for (i, p) in params.iter().enumerate() {
                    let mut g = values(p.numel(), 40 + i as u64);
                    let at = g.len() * 3 / 5;
                    match (case, i) {
                        ("inf", 29) => g[at] = f64::NEG_INFINITY,
                        ("nan", 13) => g[at] = f64::NAN,
                        ("overflow", 20) => g[at] = 3e38,
                        _ => {}
                    }
                    p.set_grad(Some(Tensor::from_f64s(&g, p.shape(), DType::F32, &device).unwrap()));
                }
                let flag = GradScaler::with_scale(scale).unscale_(&params).unwrap().item_f64().unwrap();
                (params.iter().map(|p| bits(&p.grad().unwrap())).collect::<Vec<_>>(), flag)
            };
            let (grads, flag) = run();
            let (want_grads, want_flag) = no_fusion(run);
            assert!(grads == want_grads, "{case} on {device}: the unscaled gradients differ from the halves'");
            assert_eq!(flag != 0.0, case != "finite", "{case} on {device}: the check reads {flag}");
            assert_eq!(flag != 0.0, want_flag != 0.0, "{case} on {device}: the halves' check reads {want_flag}");
        }
    }
}

/// The state the loss scaler keeps on the device after a step's check (one kernel where the
/// device has it) against the composite's: the scale the next loss is multiplied by, and the
/// scale, growth tracker and skipped count the host reads back; a check of 0, -0, NaN and
/// infinity, on a step that grows the scale and one that does not.
#[test]
fn the_next_scale_matches_its_composite() {
    let _serial = serial();
    for device in common::devices() {
        for check in [0.0, -0.0, f64::NAN, f64::INFINITY] {
            for interval in [1, 100] {
                let run = || {
                    let p = Tensor::from_f64s(&[1.0, 2.0], &[2], DType::F32, &device).unwrap();
                    let mut opt = Optim::new(vec![("p".to_string(), p.clone())], SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
                    let mut scaler = GradScaler::with_scale(3.0);
                    scaler.growth_interval = interval;
                    p.set_grad(Some(Tensor::ones(&[2], DType::F32, &device).unwrap()));
                    let flag = Tensor::scalar(check, DType::F32, &device).unwrap();
                    scaler.step(&mut opt, &flag).unwrap();
                    let next = scaler.scale(&Tensor::scalar(1.0, DType::F32, &device).unwrap()).unwrap().item_f64().unwrap();
                    scaler.settle().unwrap();
                    (next, scaler.state())
                };
                let (got, want) = (run(), no_fusion(run));
                assert_eq!(got, want, "check {check}, growth interval {interval} on {device}");
                let (scale, tracker, skipped) = match (check != 0.0, interval) {
                    (true, _) => (1.5, 0, 1),
                    (false, 1) => (6.0, 0, 0),
                    (false, _) => (3.0, 1, 0),
                };
                assert_eq!(got.0, scale, "check {check}, growth interval {interval} on {device}");
                assert_eq!((got.1.scale, got.1.growth_tracker, got.1.skipped), (scale, tracker, skipped), "check {check}, interval {interval} on {device}");
            }
        }
    }
}

/// After a step the gradients are divided by the inverse scale the device keeps, which the host
/// never read: bit for bit as `mul_scalar` by the host's inverse of the scale, fused (f32) and
/// not, in every float dtype but f64, for a scale whose inverse rounds (3, grown to 6).
#[test]
fn unscaling_after_a_step_reads_the_devices_inverse() {
    let _serial = serial();
    for device in common::devices() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let run = || {
                let p = Tensor::zeros(&[600], dtype, &device).unwrap().requires_grad_(true).unwrap();
                let mut opt = Optim::new(vec![("p".to_string(), p.clone())], SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
                let mut scaler = GradScaler::with_scale(3.0);
                scaler.growth_interval = 1;
                p.set_grad(Some(Tensor::ones(&[600], dtype, &device).unwrap()));
                let flag = scaler.unscale_(std::slice::from_ref(&p)).unwrap();
                scaler.step(&mut opt, &flag).unwrap();
                // The gradient held by the parameter alone, as backward leaves it (a fused
                // unscale writes over it).
                let g = || Tensor::from_f64s(&values(600, 5), &[600], dtype, &device).unwrap();
                p.set_grad(Some(g()));
                let flag = scaler.unscale_(std::slice::from_ref(&p)).unwrap().item_f64().unwrap();
                (bits(&p.grad().unwrap()), flag, bits(&g().mul_scalar(1.0 / 6.0).unwrap()))
            };
            let (got, flag, want) = run();
            assert!(got == want, "{dtype} on {device}: the unscaled gradient differs from mul_scalar by 1/6");
            assert_eq!(flag, 0.0, "{dtype} on {device}");
            assert!(no_fusion(run).0 == want, "{dtype} on {device}: unfused, the unscaled gradient differs from mul_scalar by 1/6");
        }
    }
}

/// The CPU's update kernels run in pieces on the thread pool when large, and give the same
/// bits on 1, 2 and 4 threads: a parameter of 100,003 elements (a dozen pieces of the pool's
/// chunk, the last one short), two steps of every update (the first makes the state).
#[test]
fn cpu_updates_do_not_depend_on_the_threads() {
    let _serial = serial();
    let on = |threads: usize, step: &(dyn Fn() -> Vec<Vec<u64>> + Sync)| -> Vec<Vec<u64>> {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool").install(step)
    };
    fn two_steps<R: Rule>(config: R) -> Vec<Vec<u64>> {
        let d = Device::cpu();
        let p = Tensor::randn(&[100_003], 1, DType::F32, &d).unwrap();
        let mut opt = Optim::new(vec![("p".to_string(), p.clone())], config).unwrap();
        for seed in [2, 3] {
            p.set_grad(Some(Tensor::randn(&[100_003], seed, DType::F32, &d).unwrap()));
            opt.step().unwrap();
        }
        std::iter::once(bits(&p)).chain(opt.param_state("p").unwrap().tensors.iter().map(bits)).collect()
    }
    let adam = AdamConfig { weight_decay: 1e-2, ..AdamConfig::adamw(1e-2) };
    let steps: Vec<Box<dyn Fn() -> Vec<Vec<u64>> + Sync>> = vec![
        Box::new(move || two_steps(adam.clone())),
        Box::new(|| two_steps(AdamConfig { amsgrad: true, ..AdamConfig::adam(1e-2) })),
        Box::new(|| two_steps(SgdConfig { lr: 0.1, weight_decay: 5e-4, ..SgdConfig::default() })),
        Box::new(|| two_steps(SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 5e-4, ..SgdConfig::default() })),
        Box::new(|| two_steps(AdadeltaConfig::default())),
        Box::new(|| two_steps(AdagradConfig::default())),
        Box::new(|| two_steps(RmsPropConfig { momentum: 0.9, centered: true, ..RmsPropConfig::default() })),
    ];
    for (k, step) in steps.iter().enumerate() {
        let whole = on(1, step.as_ref());
        for threads in [2, 4] {
            assert!(on(threads, step.as_ref()) == whole, "update {k} on {threads} threads");
        }
    }
}

/// On the wgpu backend a step over parameters and state held alone writes over their buffers:
/// no buffer moves and nothing is allocated; a parameter shared with another tensor gets a
/// buffer of its own, and the other tensor keeps the old values.
#[test]
fn wgpu_steps_write_over_buffers_held_alone() {
    let _serial = serial();
    let Some(d) = common::gpu() else { return };
    let params: Vec<(String, Tensor)> = (0..5).map(|i| (format!("p{i}"), Tensor::randn(&[3 + 100 * i], i as u64, DType::F32, &d).unwrap())).collect();
    let mut opt = Optim::new(params.clone(), SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }).unwrap();
    let step = |opt: &mut Optim<SgdConfig>| {
        for (i, (_, p)) in params.iter().enumerate() {
            p.set_grad(Some(Tensor::randn(p.shape(), 50 + i as u64, DType::F32, &d).unwrap()));
        }
        opt.step().unwrap();
    };
    // The first step makes the momentum buffers; from the second on they are held alone.
    step(&mut opt);
    step(&mut opt);
    let buffers = |opt: &Optim<SgdConfig>| -> Vec<usize> {
        params
            .iter()
            .flat_map(|(name, p)| [p.storage(), opt.param_state(name).unwrap().tensors[0].storage()])
            .map(|s| std::sync::Arc::as_ptr(&s) as *const u8 as usize)
            .collect()
    };
    let before = buffers(&opt);
    for (i, (_, p)) in params.iter().enumerate() {
        p.set_grad(Some(Tensor::randn(p.shape(), 60 + i as u64, DType::F32, &d).unwrap()));
    }
    d.synchronize().unwrap();
    let allocations = d.memory_stats().unwrap().allocations;
    opt.step().unwrap();
    d.synchronize().unwrap();
    assert_eq!(buffers(&opt), before, "parameters and momentum buffers held alone moved to new buffers");
    assert_eq!(d.memory_stats().unwrap().allocations, allocations, "an in-place step allocated");
    let alias = params[0].1.detach();
    let old = alias.to_vec_f64().unwrap();
    step(&mut opt);
    assert_ne!(buffers(&opt)[0], before[0], "a shared parameter was updated in place");
    assert_eq!(alias.to_vec_f64().unwrap(), old, "the alias of a shared parameter changed");
    assert_ne!(params[0].1.to_vec_f64().unwrap(), old, "the shared parameter was not updated");
}
