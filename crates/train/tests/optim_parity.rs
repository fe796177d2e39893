//! Parity with PyTorch: every optimizer option and every scheduler against what
//! `data/make_optim_parity.py` recorded from `torch.optim` (parameters after each step within
//! 1e-6 of their largest magnitude, on the CPU and the GPU; learning rates, and the momentum
//! that OneCycleLR cycles, exactly). The optimizers run fused where the device has kernels,
//! and the GPU cases run again with fusion off, so both paths are held to PyTorch.

mod common;

use liandan_nn::{no_fusion, DType, Device, Tensor};
use liandan_train::optim::{
    clip_grad_norm_, clip_grad_value_, AdadeltaConfig, AdagradConfig, AdamConfig, AdamWConfig, Optim, Optimizer, ParamGroup, RmsPropConfig, Rule, SgdConfig,
};
use liandan_train::sched::{
    Anneal, Chainable, CosineAnnealingLR, ExponentialLR, LinearLR, LrScheduler, MultiStepLR, OneCycle, OneCycleLR, PlateauConfig, PlateauMode,
    ReduceLROnPlateau, SequentialLR, StepLR, ThresholdMode,
};
use serde_json::Value;

fn data() -> Value {
    serde_json::from_str(include_str!("data/optim_parity.json")).expect("optim_parity.json parses")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("a list").iter().map(|x| x.as_f64().expect("a number")).collect()
}

/// The config `R::default_config` with the case's torch keyword arguments laid over it.
fn config<R: Rule>(defaults: R, options: &Value) -> R {
    let mut merged = serde_json::to_value(defaults).expect("configs serialize");
    for (k, v) in options.as_object().expect("options are an object") {
        assert!(merged.get(k).is_some(), "the config has no option `{k}`");
        merged[k] = v.clone();
    }
    serde_json::from_value(merged).expect("the options read as the config")
}

/// The script's two groups: `w` at the case's lr and weight decay, `b` at half the lr, no decay.
fn build<R: Rule>(config: R, params: &[(String, Tensor)]) -> Box<dyn Optimizer> {
    let (lr, wd) = (config.lr(), config.weight_decay());
    let groups = vec![ParamGroup::new(vec![params[0].clone()], lr, wd), ParamGroup::new(vec![params[1].clone()], lr * 0.5, 0.0)];
    Box::new(Optim::new(groups, config).expect("a valid optimizer"))
}

fn optimizer(name: &str, options: &Value, params: &[(String, Tensor)]) -> Box<dyn Optimizer> {
    match name {
        "SGD" => build(config(SgdConfig::default(), options), params),
        "Adam" => build(config(AdamConfig::adam(1e-3), options), params),
        "AdamW" => build(config(AdamWConfig::default(), options), params),
        "Adadelta" => build(config(AdadeltaConfig::default(), options), params),
        "RMSprop" => build(config(RmsPropConfig::default(), options), params),
        "Adagrad" => build(config(AdagradConfig::default(), options), params),
        other => panic!("no optimizer {other}"),
    }
}

fn check_optimizers(device: &Device) {
    let d = data();
    let names = ["w", "b"];
    let tensor = |values: &Value, name: &str| {
        let shape: Vec<usize> = d["shapes"][name].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        Tensor::from_f64s(&floats(values), &shape, DType::F32, device).unwrap()
    };
    for case in d["optimizers"].as_array().unwrap() {
        let (name, options) = (case["optimizer"].as_str().unwrap(), &case["options"]);
        let params: Vec<(String, Tensor)> = names.iter().map(|n| (n.to_string(), tensor(&d["initial"][n], n).requires_grad_(true).unwrap())).collect();
        let mut opt = optimizer(name, options, &params);
        // Cases stepped with OneCycleLR (its default cycle_momentum reaches the update).
        let mut sched = case.get("one_cycle").map(|a| OneCycleLR::new(&mut *opt, OneCycle::new(a["max_lr"].as_f64().unwrap(), u(&a["total_steps"]))).unwrap());
        for (step, (grads, want)) in d["grads"].as_array().unwrap().iter().zip(case["steps"].as_array().unwrap()).enumerate() {
            for (n, p) in &params {
                p.set_grad(Some(tensor(&grads[n], n)));
            }
            opt.step().unwrap();
            if let Some(s) = &mut sched {
                s.step(&mut *opt, None).unwrap();
            }
            for (n, p) in &params {
                assert_close(&p.to_vec_f64().unwrap(), &floats(&want[n]), &format!("{name} {options} on {device}: `{n}` after step {}", step + 1));
            }
        }
    }
}

/// Within 1e-6 of `want`'s largest magnitude.
fn assert_close(got: &[f64], want: &[f64], what: &str) {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    assert!(got.len() == want.len() && worst <= 1e-6 * scale, "{what} is off by {worst:e} (largest magnitude {scale}): got {got:?}, want {want:?}");
}

fn check_clipping(device: &Device) {
    let d = data();
    let clip = &d["clipping"];
    let params = || -> Vec<Tensor> {
        ["w", "b"]
            .iter()
            .map(|n| {
                let shape: Vec<usize> = d["shapes"][n].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
                let p = Tensor::from_f64s(&floats(&d["initial"][n]), &shape, DType::F32, device).unwrap().requires_grad_(true).unwrap();
                p.set_grad(Some(Tensor::from_f64s(&floats(&d["grads"][0][n]), &shape, DType::F32, device).unwrap()));
                p
            })
            .collect()
    };
    for case in clip["norm"].as_array().unwrap() {
        let norm_type = case["norm_type"].as_f64().unwrap_or(f64::INFINITY);
        let ps = params();
        let total = clip_grad_norm_(&ps, case["max_norm"].as_f64().unwrap(), norm_type).unwrap();
        assert_close(&[total.item_f64().unwrap()], &[case["total"].as_f64().unwrap()], &format!("clip_grad_norm_ {case} on {device}: the norm"));
        for (p, n) in ps.iter().zip(["w", "b"]) {
            assert_close(&p.grad().unwrap().to_vec_f64().unwrap(), &floats(&case["grads"][n]), &format!("clip_grad_norm_ {norm_type} on {device}: `{n}`"));
        }
    }
    let ps = params();
    clip_grad_value_(&ps, clip["value"]["clip_value"].as_f64().unwrap()).unwrap();
    for (p, n) in ps.iter().zip(["w", "b"]) {
        assert_close(&p.grad().unwrap().to_vec_f64().unwrap(), &floats(&clip["value"]["grads"][n]), &format!("clip_grad_value_ on {device}: `{n}`"));
    }
}

#[test]
fn clipping_matches_pytorch() {
    for device in common::devices() {
        check_clipping(&device);
    }
}

#[test]
fn optimizers_match_pytorch_on_the_cpu() {
    check_optimizers(&Device::cpu());
}

#[test]
fn optimizers_match_pytorch_on_the_gpu() {
    if let Some(gpu) = common::gpu() {
        check_optimizers(&gpu);
    }
}

/// The composites (`LIANDAN_FUSION=0`'s path) against PyTorch too, on every device.
#[test]
fn unfused_optimizers_match_pytorch() {
    for device in common::devices() {
        no_fusion(|| check_optimizers(&device));
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().expect("a whole number")
}

/// A scheduler that `SequentialLR` can chain, from the script's name and arguments.
fn chainable(name: &str, a: &Value, opt: &mut dyn Optimizer) -> Box<dyn Chainable> {
    match name {
        "StepLR" => Box::new(StepLR::new(opt, u(&a["step_size"]), a["gamma"].as_f64().unwrap()).unwrap()),
        "MultiStepLR" => Box::new(MultiStepLR::new(opt, a["milestones"].as_array().unwrap().iter().map(u).collect(), a["gamma"].as_f64().unwrap()).unwrap()),
        "ExponentialLR" => Box::new(ExponentialLR::new(opt, a["gamma"].as_f64().unwrap()).unwrap()),
        "CosineAnnealingLR" => Box::new(CosineAnnealingLR::new(opt, u(&a["T_max"]), a["eta_min"].as_f64().unwrap()).unwrap()),
        "LinearLR" => Box::new(LinearLR::new(opt, a["start_factor"].as_f64().unwrap(), a["end_factor"].as_f64().unwrap(), u(&a["total_iters"])).unwrap()),
        "OneCycleLR" => {
            let mut s = OneCycle::new(0.0, u(&a["total_steps"]));
            s.max_lr = floats(&a["max_lr"]);
            s.anneal_strategy = if a["anneal_strategy"] == "cos" { Anneal::Cos } else { Anneal::Linear };
            s.three_phase = a["three_phase"].as_bool().unwrap();
            if let Some(p) = a.get("pct_start") {
                s.pct_start = p.as_f64().unwrap();
            }
            s.cycle_momentum = a["cycle_momentum"].as_bool().unwrap();
            if let Some(m) = a.get("base_momentum") {
                s.base_momentum = floats(m);
            }
            if let Some(m) = a.get("max_momentum") {
                s.max_momentum = floats(m);
            }
            Box::new(OneCycleLR::new(opt, s).unwrap())
        }
        other => panic!("no chainable scheduler {other}"),
    }
}

fn scheduler(name: &str, a: &Value, opt: &mut dyn Optimizer) -> Box<dyn LrScheduler> {
    match name {
        "ReduceLROnPlateau" => {
            let config = PlateauConfig {
                mode: if a["mode"] == "min" { PlateauMode::Min } else { PlateauMode::Max },
                factor: a["factor"].as_f64().unwrap(),
                patience: u(&a["patience"]),
                threshold: a["threshold"].as_f64().unwrap(),
                threshold_mode: if a["threshold_mode"] == "rel" { ThresholdMode::Rel } else { ThresholdMode::Abs },
                cooldown: u(&a["cooldown"]),
                min_lr: floats(&a["min_lr"]),
                ..PlateauConfig::default()
            };
            Box::new(ReduceLROnPlateau::new(opt, config).unwrap())
        }
        "SequentialLR" => {
            let children = a["schedulers"].as_array().unwrap().iter().map(|c| chainable(c[0].as_str().unwrap(), &c[1], opt)).collect();
            Box::new(SequentialLR::new(opt, children, a["milestones"].as_array().unwrap().iter().map(u).collect()).unwrap())
        }
        _ => {
            // A chainable one used alone: the Box<dyn Chainable> is an LrScheduler too.
            struct Alone(Box<dyn Chainable>);
            impl LrScheduler for Alone {
                fn step(&mut self, o: &mut dyn Optimizer, m: Option<f64>) -> liandan_train::Result<()> {
                    self.0.step(o, m)
                }
                fn last_lr(&self) -> Vec<f64> {
                    self.0.last_lr()
                }
                fn state_dict(&self) -> Value {
                    self.0.state_dict()
                }
                fn load_state_dict(&mut self, s: &Value) -> liandan_train::Result<()> {
                    self.0.load_state_dict(s)
                }
            }
            Box::new(Alone(chainable(name, a, opt)))
        }
    }
}

/// The script's optimizer for schedulers: SGD with momentum (or Adam where the case says so)
/// with groups at lr 0.1 and 0.05.
fn sched_optimizer(name: Option<&str>) -> Box<dyn Optimizer> {
    let dev = Device::cpu();
    let p = |n: &str| (n.to_string(), Tensor::zeros(&[1], DType::F32, &dev).unwrap());
    let groups = vec![ParamGroup::new(vec![p("p")], 0.1, 0.0), ParamGroup::new(vec![p("q")], 0.05, 0.0)];
    match name {
        Some("Adam") => Box::new(Optim::new(groups, AdamConfig::adam(0.1)).unwrap()),
        _ => Box::new(Optim::new(groups, SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }).unwrap()),
    }
}

/// Every group's momentum (SGD's `momentum`, Adam's `betas.0`).
fn momenta(opt: &dyn Optimizer) -> Vec<f64> {
    (0..opt.param_groups().len()).map(|g| opt.momentum(g).expect("the optimizer has momentum")).collect()
}

#[test]
fn schedulers_match_pytorch_exactly() {
    let d = data();
    let metrics = floats(&d["metrics"]);
    for case in d["schedulers"].as_array().unwrap() {
        let (name, args) = (case["scheduler"].as_str().unwrap(), &case["args"]);
        let want: Vec<Vec<f64>> = case["lrs"].as_array().unwrap().iter().map(floats).collect();
        let mut opt = sched_optimizer(args.get("optimizer").and_then(Value::as_str));
        let mut s = scheduler(name, args, &mut *opt);
        let mut got = vec![s.last_lr()];
        let mut got_momenta = vec![momenta(&*opt)];
        for m in metrics.iter().take(want.len() - 1) {
            s.step(&mut *opt, Some(*m)).unwrap();
            got.push(s.last_lr());
            got_momenta.push(momenta(&*opt));
            let on_optimizer: Vec<f64> = opt.param_groups().iter().map(|g| g.lr).collect();
            assert_eq!(&on_optimizer, got.last().unwrap(), "{name} {args}: the optimizer's lrs are not last_lr()");
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // Exact: the same f64 operations in the same order give the same bits.
            assert_eq!(g, w, "{name} {args}: lrs after step {i} differ");
        }
        if let Some(want) = case.get("momentums") {
            let want: Vec<Vec<f64>> = want.as_array().unwrap().iter().map(floats).collect();
            assert_eq!(want.len(), got_momenta.len());
            for (i, (g, w)) in got_momenta.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "{name} {args}: momentum after step {i} differs");
            }
        }
    }
}
