//! Saving and restoring optimizer and scheduler state: a resumed run is bit for bit the run
//! that never stopped, and state saved for other parameters is refused with a message that
//! names what does not fit.

use liandan_nn::{DType, Device, Tensor};
use liandan_train::optim::{Adadelta, AdadeltaConfig, Adagrad, AdagradConfig, Adam, AdamConfig, Optimizer, ParamGroup, RmsProp, RmsPropConfig, Sgd, SgdConfig};
use liandan_train::sched::{CosineAnnealingLR, LinearLR, LrScheduler, PlateauConfig, ReduceLROnPlateau, SequentialLR};
use liandan_train::Error;

type Make = fn(Vec<ParamGroup>) -> Box<dyn Optimizer>;

fn makers() -> Vec<(&'static str, Make)> {
    vec![
        ("SGD", |g| Box::new(Sgd::new(g, SgdConfig { momentum: 0.9, nesterov: true, ..SgdConfig::default() }).unwrap())),
        ("Adam", |g| Box::new(Adam::new(g, AdamConfig { amsgrad: true, ..AdamConfig::adamw(0.01) }).unwrap())),
        ("Adadelta", |g| Box::new(Adadelta::new(g, AdadeltaConfig::default()).unwrap())),
        ("RMSprop", |g| Box::new(RmsProp::new(g, RmsPropConfig { momentum: 0.5, centered: true, ..RmsPropConfig::default() }).unwrap())),
        ("Adagrad", |g| Box::new(Adagrad::new(g, AdagradConfig { lr_decay: 0.1, ..AdagradConfig::default() }).unwrap())),
    ]
}

/// Two groups over `w` [3, 4] and `b` [5], from the given values.
fn groups(values: &[Vec<f32>; 2]) -> (Vec<Tensor>, Vec<ParamGroup>) {
    let dev = Device::cpu();
    let w = Tensor::from_slice(&values[0], &[3, 4], &dev).unwrap().requires_grad_(true).unwrap();
    let b = Tensor::from_slice(&values[1], &[5], &dev).unwrap().requires_grad_(true).unwrap();
    let groups = vec![ParamGroup::new(vec![("w".into(), w.clone())], 0.1, 0.01), ParamGroup::new(vec![("b".into(), b.clone())], 0.05, 0.0)];
    (vec![w, b], groups)
}

fn initial() -> [Vec<f32>; 2] {
    let dev = Device::cpu();
    [Tensor::randn(&[3, 4], 1, DType::F32, &dev).unwrap().to_vec().unwrap(), Tensor::randn(&[5], 2, DType::F32, &dev).unwrap().to_vec().unwrap()]
}

/// A warm-up chained with a cosine decay: the most state a scheduler keeps.
fn scheduler(opt: &mut dyn Optimizer) -> Box<dyn LrScheduler> {
    let warmup = LinearLR::new(opt, 0.2, 1.0, 3).unwrap();
    let cosine = CosineAnnealingLR::new(opt, 5, 0.001).unwrap();
    Box::new(SequentialLR::new(opt, vec![Box::new(warmup), Box::new(cosine)], vec![3]).unwrap())
}

/// Steps `n` times from `from` on with gradients that depend on the step.
fn run(params: &[Tensor], opt: &mut dyn Optimizer, sched: &mut dyn LrScheduler, from: u64, n: u64) {
    for step in from..from + n {
        for (i, p) in params.iter().enumerate() {
            p.set_grad(Some(Tensor::randn(p.shape(), 100 + 2 * step + i as u64, DType::F32, p.device()).unwrap()));
        }
        opt.step().unwrap();
        sched.step(opt, None).unwrap();
    }
}

fn values(params: &[Tensor]) -> [Vec<f32>; 2] {
    [params[0].to_vec().unwrap(), params[1].to_vec().unwrap()]
}

#[test]
fn a_resumed_run_is_bit_for_bit_the_uninterrupted_one() {
    for (name, make) in makers() {
        let (params, g) = groups(&initial());
        let mut opt = make(g);
        let mut sched = scheduler(&mut *opt);
        run(&params, &mut *opt, &mut *sched, 0, 3);
        let (saved_opt, saved_sched, saved_params) = (opt.state_dict().unwrap(), sched.state_dict(), values(&params));
        run(&params, &mut *opt, &mut *sched, 3, 4);

        let (resumed, g) = groups(&saved_params);
        let mut opt2 = make(g);
        let mut sched2 = scheduler(&mut *opt2);
        opt2.load_state_dict(&saved_opt).unwrap();
        sched2.load_state_dict(&saved_sched).unwrap();
        run(&resumed, &mut *opt2, &mut *sched2, 3, 4);
        assert_eq!(values(&resumed), values(&params), "{name}: the resumed parameters differ");
        assert_eq!(sched2.last_lr(), sched.last_lr(), "{name}: the resumed learning rates differ");
        let lrs = |o: &dyn Optimizer| o.param_groups().iter().map(|g| g.lr).collect::<Vec<_>>();
        assert_eq!(lrs(&*opt2), lrs(&*opt), "{name}: the optimizer's learning rates differ");
    }
}

fn state_error(result: liandan_train::Result<()>) -> String {
    match result {
        Err(e @ Error::State { .. }) => e.to_string(),
        Err(e) => panic!("expected a state error, got {e}"),
        Ok(()) => panic!("expected a state error, got Ok"),
    }
}

#[test]
fn state_for_other_parameters_is_refused_by_name() {
    let (params, g) = groups(&initial());
    let mut opt = Adam::new(g, AdamConfig::adam(0.01)).unwrap();
    for p in &params {
        p.set_grad(Some(p.ones_like().unwrap()));
    }
    opt.step().unwrap();
    let saved = opt.state_dict().unwrap();
    let names: Vec<&str> = saved.tensors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["w.exp_avg", "w.exp_avg_sq", "b.exp_avg", "b.exp_avg_sq"]);

    // Another optimizer.
    let (_, g) = groups(&initial());
    let err = state_error(Sgd::new(g, SgdConfig::default()).unwrap().load_state_dict(&saved));
    assert!(err.contains("saved by an Adam optimizer, not SGD"), "{err}");
    let (_, g) = groups(&initial());
    let err = state_error(
        Adam::new(g, AdamConfig::adam(0.01)).unwrap().load_state_dict(&Sgd::new(groups(&initial()).1, SgdConfig::default()).unwrap().state_dict().unwrap()),
    );
    assert!(err.contains("saved by an SGD optimizer, not Adam"), "{err}");

    // A parameter renamed.
    let dev = Device::cpu();
    let renamed = vec![ParamGroup::new(vec![("conv.w".into(), params[0].clone())], 0.1, 0.0), ParamGroup::new(vec![("b".into(), params[1].clone())], 0.1, 0.0)];
    let err = state_error(Adam::new(renamed, AdamConfig::adam(0.01)).unwrap().load_state_dict(&saved));
    assert!(err.contains("missing: [conv.w]") && err.contains("unexpected: [w]"), "{err}");

    // A state tensor of the wrong shape, one missing, one extra.
    let mut bad = opt.state_dict().unwrap();
    bad.tensors[0].1 = Tensor::zeros(&[4, 3], DType::F32, &dev).unwrap();
    bad.tensors.remove(3);
    bad.tensors.push(("w.momentum_buffer".into(), Tensor::zeros(&[3, 4], DType::F32, &dev).unwrap()));
    let before = opt.state_dict().unwrap();
    let err = state_error(opt.load_state_dict(&bad));
    assert!(err.contains("`w.exp_avg` has shape [4, 3] but the parameter has [3, 4]"), "{err}");
    assert!(err.contains("`b.exp_avg_sq` is missing"), "{err}");
    assert!(err.contains("w.momentum_buffer"), "{err}");
    // A refused load leaves the optimizer as it was.
    let after = opt.state_dict().unwrap();
    assert_eq!(after.hyper, before.hyper);
    for ((n, a), (_, b)) in after.tensors.iter().zip(&before.tensors) {
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap(), "{n} changed");
    }

    // Another number of groups.
    let one = vec![ParamGroup::new(vec![("w".into(), params[0].clone()), ("b".into(), params[1].clone())], 0.1, 0.0)];
    let err = state_error(Adam::new(one, AdamConfig::adam(0.01)).unwrap().load_state_dict(&saved));
    assert!(err.contains("2 parameter group(s)") && err.contains("has 1"), "{err}");
}

#[test]
fn hyper_parameters_outside_their_domain_are_named() {
    let (_, g) = groups(&initial());
    let err = Adam::new(g, AdamConfig { betas: (1.0, 0.999), ..AdamConfig::adam(0.01) }).err().expect("betas 1.0 is refused").to_string();
    assert!(err.contains("betas.0 1"), "{err}");
    let (_, g) = groups(&initial());
    let err = Sgd::new(g, SgdConfig { nesterov: true, ..SgdConfig::default() }).err().expect("nesterov without momentum is refused").to_string();
    assert!(err.contains("nesterov"), "{err}");
    let (params, _) = groups(&initial());
    let twice = vec![ParamGroup::new(vec![("w".into(), params[0].clone())], 0.1, 0.0), ParamGroup::new(vec![("w".into(), params[0].clone())], 0.1, 0.0)];
    let err = Sgd::new(twice, SgdConfig::default()).err().expect("a parameter in two groups is refused").to_string();
    assert!(err.contains("`w` appears more than once"), "{err}");
    let (_, mut g) = groups(&initial());
    g[1].lr = -1.0;
    let err = Sgd::new(g, SgdConfig::default()).err().expect("a negative lr is refused").to_string();
    assert!(err.contains("group 1: lr -1"), "{err}");
}

#[test]
fn plateau_needs_its_metric_and_restores_its_counters() {
    let (_, g) = groups(&initial());
    let mut opt = Sgd::new(g, SgdConfig::default()).unwrap();
    let mut s = ReduceLROnPlateau::new(&mut opt, PlateauConfig { patience: 1, ..PlateauConfig::default() }).unwrap();
    assert!(s.step(&mut opt, None).unwrap_err().to_string().contains("metric"));
    for m in [1.0, 1.0] {
        s.step(&mut opt, Some(m)).unwrap();
    }
    let saved = s.state_dict();
    let (_, g) = groups(&initial());
    let mut opt2 = Sgd::new(g, SgdConfig::default()).unwrap();
    let mut s2 = ReduceLROnPlateau::new(&mut opt2, PlateauConfig { patience: 1, ..PlateauConfig::default() }).unwrap();
    s2.load_state_dict(&saved).unwrap();
    // One more bad epoch exceeds the patience in both: the saved run had one already.
    s.step(&mut opt, Some(1.0)).unwrap();
    s2.step(&mut opt2, Some(1.0)).unwrap();
    assert_eq!(s.last_lr(), s2.last_lr());
    assert!((s2.last_lr()[0] - 0.01).abs() < 1e-12, "{:?}", s2.last_lr());
    let err = s2.load_state_dict(&serde_json::json!({"scheduler": "StepLR"})).unwrap_err().to_string();
    assert!(err.contains("StepLR"), "{err}");
}
