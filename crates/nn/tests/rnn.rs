//! `LSTM` and `GRU` against PyTorch: outputs, final states and every gradient of a fixed loss
//! on the fixtures written by `tests/data/make_rnn_fixtures.py` (torch 2.15.0; the script's
//! docstring lists the cases and keys), on every device; plus PyTorch's state-dict names and
//! parameter counts, dropout between layers, and errors for bad configs and shapes.

mod common;

use std::collections::HashMap;

use common::{data_path, devices, fixture, rel_err};
use liandan_nn::layers::{GRUConfig, LSTMConfig, Sequential, GRU, LSTM};
use liandan_nn::{checkpoint, summary, DType, Device, Forward, Module, ModuleExt, Tensor};

type R = liandan_nn::Result<()>;

/// Tolerances on `rel_err` (max abs error over the reference's max abs value, floor 1e-3).
/// Measured maxima over all fixtures, outputs, states and gradients: CPU 4.3e-7 (LSTM) and
/// 3.0e-7 (GRU), lavapipe 6.5e-7 and 4.1e-7: float32 rounding in another summation order. The
/// bounds leave a margin of 20x on the CPU and 150x on GPUs, whose drivers may fuse
/// multiply-adds or use faster transcendentals.
const TOL_CPU: f64 = 1e-5;
const TOL_GPU: f64 = 1e-4;

/// The case's layout, as the fixture script's `CASES` table (and the file's metadata) has it.
struct Case {
    name: &'static str,
    num_layers: usize,
    batch_first: bool,
    bidirectional: bool,
    with_state: bool,
}

const CASES: [Case; 4] = [
    Case { name: "batch_first", num_layers: 2, batch_first: true, bidirectional: false, with_state: true },
    Case { name: "seq_first", num_layers: 1, batch_first: false, bidirectional: false, with_state: false },
    Case { name: "bidir", num_layers: 2, batch_first: false, bidirectional: true, with_state: true },
    Case { name: "unbatched", num_layers: 2, batch_first: false, bidirectional: false, with_state: true },
];

/// Compares and records the largest error seen, so a failing run says which tensor (after
/// `tag`: device, kind and case) and by how much.
struct Checker {
    tol: f64,
    worst: f64,
    what: String,
    tag: String,
}

impl Checker {
    fn new(dev: &Device) -> Self {
        Checker { tol: if dev.is_cpu() { TOL_CPU } else { TOL_GPU }, worst: 0.0, what: String::new(), tag: String::new() }
    }

    fn check(&mut self, what: &str, got: &Tensor, want: &Tensor) {
        let what = &format!("{} {what}", self.tag);
        assert_eq!(got.shape(), want.shape(), "{what}: shapes differ");
        let e = rel_err(got, want, 1e-3);
        assert!(e <= self.tol, "{what}: rel err {e:.3e} > {:.0e}", self.tol);
        if e >= self.worst {
            (self.worst, self.what) = (e, what.to_string());
        }
    }
}

/// A fresh leaf requiring grad, with the fixture tensor's values.
fn leaf(t: &Tensor) -> Tensor {
    t.detach().requires_grad_(true).unwrap()
}

/// Loads the fixture's `<prefix>.*` tensors into `m` (strictly: every name must match).
fn load_weights(m: &impl Module, f: &HashMap<String, Tensor>, prefix: &str) -> R {
    let tensors: Vec<(String, Tensor)> = f.iter().filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_string(), v.clone()))).collect();
    let report = checkpoint::load_state_dict(&m.state_dict(), tensors, true)?;
    assert!(report.is_complete());
    Ok(())
}

/// The case's layout must be the one the file was written with.
fn check_metadata(file: &str, case: &Case) {
    let (_, meta) = checkpoint::load_with_metadata(data_path(file), &Device::cpu()).unwrap();
    let py = |b: bool| if b { "True" } else { "False" };
    assert_eq!(meta["num_layers"], case.num_layers.to_string(), "{file}");
    assert_eq!(meta["batch_first"], py(case.batch_first), "{file}");
    assert_eq!(meta["bidirectional"], py(case.bidirectional), "{file}");
    assert_eq!(meta["batched"], py(case.name != "unbatched"), "{file}");
    assert_eq!(meta["with_state"], py(case.with_state), "{file}");
}

/// Checks the gradient of every parameter of `m` (`grad.<kind>.<name>` in `f`) and of the input `x`.
fn check_grads(ck: &mut Checker, m: &impl Module, kind: &str, x: &Tensor, f: &HashMap<String, Tensor>) {
    for (name, p) in m.named_parameters() {
        ck.check(&format!("grad {name}"), &p.grad().expect("every parameter gets a gradient"), &f[&format!("grad.{kind}.{name}")]);
    }
    ck.check("grad input", &x.grad().unwrap(), &f["grad.input"]);
}

/// For every case on every device: the case's fixture `rnn_<kind>_<case>.safetensors` loaded
/// there, the module `build` makes with the fixture's weights, and `check_case` given it and a
/// leaf of the fixture's input; then prints the largest error.
fn each_case<M: Module>(
    kind: &str,
    build: impl Fn(&Case, &Device) -> liandan_nn::Result<M>,
    mut check_case: impl FnMut(&M, &Tensor, &Case, &HashMap<String, Tensor>, &mut Checker) -> R,
) -> R {
    for dev in devices() {
        let mut ck = Checker::new(&dev);
        for case in &CASES {
            let file = format!("rnn_{kind}_{}.safetensors", case.name);
            check_metadata(&file, case);
            let f = fixture(&file, &dev);
            ck.tag = format!("{dev} {kind} {}", case.name);
            let m = build(case, &dev)?;
            load_weights(&m, &f, &format!("{kind}."))?;
            check_case(&m, &leaf(&f["input"]), case, &f, &mut ck)?;
        }
        eprintln!("{dev}: {} max rel err {:.2e} ({}); CPU fallbacks so far: {:?}", kind.to_uppercase(), ck.worst, ck.what, dev.fallback_report());
    }
    Ok(())
}

/// `(a * w).sum()`, a term of the fixtures' loss.
fn dot(a: &Tensor, w: &Tensor) -> Tensor {
    a.mul(w).unwrap().sum_all().unwrap()
}

#[test]
fn lstm_matches_pytorch() -> R {
    let build = |case: &Case, dev: &Device| -> liandan_nn::Result<LSTM> {
        LSTMConfig::new(5, 7).with_num_layers(case.num_layers).with_batch_first(case.batch_first).with_bidirectional(case.bidirectional).init(dev)
    };
    each_case("lstm", build, |m, x, case, f, ck| {
        let state = case.with_state.then(|| (leaf(&f["h0"]), leaf(&f["c0"])));
        let (out, (h_n, c_n)) = m.forward_with_state(x, state.as_ref().map(|(h, c)| (h, c)))?;
        ck.check("output", &out, &f["output"]);
        ck.check("h_n", &h_n, &f["h_n"]);
        ck.check("c_n", &c_n, &f["c_n"]);

        let loss = dot(&out, &f["w_out"]).add(&dot(&h_n, &f["w_h"]))?.add(&dot(&c_n, &f["w_c"]))?;
        loss.backward()?;
        check_grads(ck, m, "lstm", x, f);
        if let Some((h0, c0)) = &state {
            ck.check("grad h0", &h0.grad().unwrap(), &f["grad.h0"]);
            ck.check("grad c0", &c0.grad().unwrap(), &f["grad.c0"]);
        }
        Ok(())
    })
}

#[test]
fn gru_matches_pytorch() -> R {
    let build = |case: &Case, dev: &Device| -> liandan_nn::Result<GRU> {
        GRUConfig::new(5, 7).with_num_layers(case.num_layers).with_batch_first(case.batch_first).with_bidirectional(case.bidirectional).init(dev)
    };
    each_case("gru", build, |m, x, case, f, ck| {
        let h0 = case.with_state.then(|| leaf(&f["h0"]));
        let (out, h_n) = m.forward_with_state(x, h0.as_ref())?;
        ck.check("output", &out, &f["output"]);
        ck.check("h_n", &h_n, &f["h_n"]);

        dot(&out, &f["w_out"]).add(&dot(&h_n, &f["w_h"]))?.backward()?;
        check_grads(ck, m, "gru", x, f);
        if let Some(h0) = &h0 {
            ck.check("grad h0", &h0.grad().unwrap(), &f["grad.h0"]);
        }
        Ok(())
    })
}

fn names(m: &impl Module) -> Vec<String> {
    m.state_dict().into_iter().map(|(n, _)| n).collect()
}

/// `list(torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True).state_dict().keys())`, the same
/// for the GRU; the counts are `sum(p.numel() for p in m.parameters())` (printed by the fixture
/// script).
#[test]
fn names_and_counts_match_pytorch() -> R {
    let dev = Device::cpu();
    let bidir = [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_ih_l0_reverse",
        "weight_hh_l0_reverse",
        "bias_ih_l0_reverse",
        "bias_hh_l0_reverse",
        "weight_ih_l1",
        "weight_hh_l1",
        "bias_ih_l1",
        "bias_hh_l1",
        "weight_ih_l1_reverse",
        "weight_hh_l1_reverse",
        "bias_ih_l1_reverse",
        "bias_hh_l1_reverse",
    ];
    let no_bias = ["weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"];

    let lstm = LSTMConfig::new(5, 7).with_num_layers(2).with_bidirectional(true).init(&dev)?;
    assert_eq!(names(&lstm), bidir);
    assert_eq!(lstm.num_parameters(), 2072);
    let sd: HashMap<String, Tensor> = lstm.state_dict().into_iter().collect();
    assert_eq!(sd["weight_ih_l0"].shape(), [28, 5]);
    assert_eq!(sd["weight_ih_l1_reverse"].shape(), [28, 14]);
    assert_eq!(sd["weight_hh_l1"].shape(), [28, 7]);
    assert_eq!(sd["bias_hh_l0_reverse"].shape(), [28]);
    let lstm = LSTMConfig::new(5, 7).with_num_layers(2).with_bias(false).init(&dev)?;
    assert_eq!(names(&lstm), no_bias);
    assert_eq!(lstm.num_parameters(), 728);

    let gru = GRUConfig::new(5, 7).with_num_layers(2).with_bidirectional(true).init(&dev)?;
    assert_eq!(names(&gru), bidir);
    assert_eq!(gru.num_parameters(), 1554);
    let sd: HashMap<String, Tensor> = gru.state_dict().into_iter().collect();
    assert_eq!(sd["weight_ih_l1"].shape(), [21, 14]);
    let gru = GRUConfig::new(5, 7).with_num_layers(2).with_bias(false).init(&dev)?;
    assert_eq!(names(&gru), no_bias);
    assert_eq!(gru.num_parameters(), 546);

    // A prefix passes through as for any child module.
    let mut prefixed = Vec::new();
    gru.visit("rnn", &mut |n, _, _| prefixed.push(n.to_string()));
    assert_eq!(prefixed[0], "rnn.weight_ih_l0");
    Ok(())
}

#[test]
fn init_is_uniform_within_one_over_sqrt_hidden() -> R {
    let m = LSTMConfig::new(5, 16).with_num_layers(2).init(&Device::cpu())?;
    let bound = 1.0 / 16f64.sqrt();
    for (name, p) in m.named_parameters() {
        assert!(p.requires_grad() && p.is_leaf() && p.dtype() == DType::F32, "{name}");
        let v = p.to_vec_f64()?;
        assert!(v.iter().all(|x| x.abs() <= bound), "{name} leaves ±{bound}");
        // Not a constant: the spread of a uniform draw of this size reaches past half the bound.
        assert!(v.iter().any(|x| x.abs() > bound / 2.0), "{name}");
    }
    Ok(())
}

#[test]
fn dropout_between_layers_in_training_only() -> R {
    let dev = Device::cpu();
    let x = Tensor::randn(&[6, 2, 5], 1, DType::F32, &dev)?;
    let same = |a: &Tensor, b: &Tensor| a.to_vec_f64().unwrap() == b.to_vec_f64().unwrap();

    let mut lstm = LSTMConfig::new(5, 8).with_num_layers(2).with_dropout(0.5).init(&dev)?;
    let mut gru = GRUConfig::new(5, 8).with_num_layers(2).with_dropout(0.5).init(&dev)?;
    let layers: [&mut dyn DropoutCheck; 2] = [&mut lstm, &mut gru];
    for m in layers {
        m.set_mode(false);
        let (e1, e2) = (m.run(&x)?, m.run(&x)?);
        assert!(same(&e1, &e2), "eval is deterministic");
        m.set_mode(true);
        let (t1, t2) = (m.run(&x)?, m.run(&x)?);
        assert!(!same(&t1, &e1) && !same(&t1, &t2), "training drops between the layers");
    }

    // One layer: dropout applies between layers only, so training changes nothing.
    let mut one = LSTMConfig::new(5, 8).with_dropout(0.5).init(&dev)?;
    let t = one.forward(&x)?;
    one.eval();
    assert!(same(&t, &one.forward(&x)?));
    Ok(())
}

/// Lets the dropout test loop over both layer types.
trait DropoutCheck {
    fn set_mode(&mut self, training: bool);
    fn run(&self, x: &Tensor) -> liandan_nn::Result<Tensor>;
}

impl<M: Module + Forward> DropoutCheck for M {
    fn set_mode(&mut self, training: bool) {
        self.set_training(training);
    }
    fn run(&self, x: &Tensor) -> liandan_nn::Result<Tensor> {
        self.forward(x)
    }
}

#[test]
fn bad_configs_are_errors() {
    let dev = Device::cpu();
    for (cfg, needle) in [
        (LSTMConfig::new(5, 0), "hidden_size"),
        (LSTMConfig::new(5, 7).with_num_layers(0), "num_layers"),
        (LSTMConfig::new(5, 7).with_dropout(1.5), "dropout 1.5"),
        (LSTMConfig::new(5, 7).with_dropout(f64::NAN), "dropout NaN"),
    ] {
        let e = cfg.init(&dev).unwrap_err().to_string();
        assert!(e.contains("LSTM") && e.contains(needle), "{e}");
    }
    let e = GRUConfig::new(5, 7).with_dropout(-0.1).init(&dev).unwrap_err().to_string();
    assert!(e.contains("GRU") && e.contains("dropout"), "{e}");
}

#[test]
fn bad_shapes_are_errors() -> R {
    let dev = Device::cpu();
    let z = |s: &[usize]| Tensor::zeros(s, DType::F32, &dev).unwrap();
    let err = |r: liandan_nn::Result<Tensor>| r.unwrap_err().to_string();
    let lstm = LSTMConfig::new(5, 7).with_num_layers(2).init(&dev)?;
    let gru = GRUConfig::new(5, 7).with_batch_first(true).init(&dev)?;

    // Input rank and feature size.
    let e = err(lstm.forward(&z(&[5])));
    assert!(e.contains("LSTM") && e.contains("[5]") && e.contains("[L, N, input_size]"), "{e}");
    let e = err(lstm.forward(&z(&[4, 3, 2, 5])));
    assert!(e.contains("[4, 3, 2, 5]"), "{e}");
    let e = err(lstm.forward(&z(&[4, 3, 6])));
    assert!(e.contains("[4, 3, 6]") && e.contains("input_size = 5"), "{e}");
    let e = err(gru.forward(&z(&[3, 4, 6])));
    assert!(e.contains("GRU") && e.contains("[N, L, input_size]"), "{e}");
    let e = err(lstm.forward(&z(&[0, 3, 5])));
    assert!(e.contains("empty"), "{e}");

    // States: batched and unbatched, h and c.
    let (h, c) = (z(&[2, 3, 7]), z(&[2, 3, 7]));
    assert!(lstm.forward_with_state(&z(&[4, 3, 5]), Some((&h, &c))).is_ok());
    let bad = z(&[1, 3, 7]);
    let e = lstm.forward_with_state(&z(&[4, 3, 5]), Some((&bad, &c))).unwrap_err().to_string();
    assert!(e.contains("h_0") && e.contains("[1, 3, 7]") && e.contains("[2, 3, 7]"), "{e}");
    let e = lstm.forward_with_state(&z(&[4, 3, 5]), Some((&h, &z(&[2, 4, 7])))).unwrap_err().to_string();
    assert!(e.contains("c_0") && e.contains("[2, 4, 7]"), "{e}");
    let e = lstm.forward_with_state(&z(&[4, 5]), Some((&h, &c))).unwrap_err().to_string();
    assert!(e.contains("[2, 7]") && e.contains("[D * num_layers, hidden_size]"), "{e}");
    let e = gru.forward_with_state(&z(&[3, 4, 5]), Some(&z(&[1, 3, 8]))).unwrap_err().to_string();
    assert!(e.contains("h_0") && e.contains("[1, 3, 8]") && e.contains("[1, 3, 7]"), "{e}");
    Ok(())
}

#[test]
fn shapes_sequential_and_summary() -> R {
    let dev = Device::cpu();
    let x = Tensor::randn(&[3, 4, 5], 2, DType::F32, &dev)?;
    let m = LSTMConfig::new(5, 7).with_num_layers(3).with_batch_first(true).with_bidirectional(true).init(&dev)?;
    let (out, (h, c)) = m.forward_with_state(&x, None)?;
    // Batch first: N = 3, L = 4; the states are [D * num_layers, N, H] all the same.
    assert_eq!((out.shape(), h.shape(), c.shape()), (&[3, 4, 14][..], &[6, 3, 7][..], &[6, 3, 7][..]));
    // Batch first: sample 1 alone gives sample 1's rows.
    let (one, _) = m.forward_with_state(&x.narrow(0usize, 1, 1)?, None)?;
    assert!(rel_err(&one, &out.narrow(0usize, 1, 1)?, 1e-3) < 1e-6);

    let g = GRUConfig::new(5, 7).with_bidirectional(true).init(&dev)?;
    let (out, h) = g.forward_with_state(&x.select(1usize, 0)?, None)?;
    assert_eq!((out.shape(), h.shape()), (&[3, 14][..], &[2, 7][..]));

    let n = g.num_parameters();
    let seq = Sequential::new().push(g);
    assert_eq!(seq.forward(&x)?.shape(), [3, 4, 14]);
    let s = summary::summary(&seq, &[3, 4, 5], &dev)?;
    let row = s.rows.iter().find(|r| r.layer.starts_with("GRU-")).expect("the GRU has a summary row");
    assert_eq!((row.output_shape.as_slice(), row.params), (&[3, 4, 14][..], n));
    Ok(())
}

/// Central differences in float64 (`eps` = 1e-6) against backward, for every 3rd element of
/// every parameter, the input and the initial states. The tolerance 1e-6 absolute plus 1e-5
/// relative is some 100x the truncation and rounding error of the differences.
fn check_finite_differences(what: &str, leaves: &[(String, Tensor)], loss: impl Fn() -> liandan_nn::Result<Tensor>) -> R {
    loss()?.backward()?;
    let eps = 1e-6;
    let at = |t: &Tensor, vals: &[f64]| t.assign(&Tensor::from_f64s(vals, t.shape(), DType::F64, t.device())?);
    let value = || -> liandan_nn::Result<f64> { Ok(liandan_nn::no_grad(&loss)?.item_f64()?) };
    for (name, t) in leaves {
        let grad = t.grad().unwrap_or_else(|| panic!("{what} {name}: no gradient")).to_vec_f64()?;
        let mut vals = t.to_vec_f64()?;
        for i in (0..vals.len()).step_by(3) {
            let v = vals[i];
            vals[i] = v + eps;
            at(t, &vals)?;
            let up = value()?;
            vals[i] = v - eps;
            at(t, &vals)?;
            let down = value()?;
            vals[i] = v;
            at(t, &vals)?;
            let fd = (up - down) / (2.0 * eps);
            assert!((grad[i] - fd).abs() <= 1e-6 + 1e-5 * fd.abs(), "{what} {name}[{i}]: backward {} vs finite difference {fd}", grad[i]);
        }
    }
    Ok(())
}

#[test]
fn gradients_match_finite_differences_f64() -> R {
    let dev = Device::cpu();
    let r = |s: &[usize], seed| Tensor::randn(s, seed, DType::F64, &dev).unwrap();
    let (x, h0, c0) = (leaf(&r(&[3, 2, 3], 1)), leaf(&r(&[4, 2, 4], 2)), leaf(&r(&[4, 2, 4], 3)));
    let (w_out, w_h, w_c) = (r(&[3, 2, 8], 4), r(&[4, 2, 4], 5), r(&[4, 2, 4], 6));
    let inputs = [("input".to_string(), x.clone()), ("h0".to_string(), h0.clone())];

    let mut lstm = LSTMConfig::new(3, 4).with_num_layers(2).with_bidirectional(true).init(&dev)?;
    lstm.to_dtype(DType::F64)?;
    let mut leaves = lstm.named_parameters();
    leaves.extend(inputs.iter().cloned());
    leaves.push(("c0".to_string(), c0.clone()));
    check_finite_differences("lstm", &leaves, || {
        let (out, (h, c)) = lstm.forward_with_state(&x, Some((&h0, &c0)))?;
        Ok(dot(&out, &w_out).add(&dot(&h, &w_h))?.add(&dot(&c, &w_c))?)
    })?;

    for t in &leaves {
        t.1.set_grad(None);
    }
    let mut gru = GRUConfig::new(3, 4).with_num_layers(2).with_bidirectional(true).init(&dev)?;
    gru.to_dtype(DType::F64)?;
    let mut leaves = gru.named_parameters();
    leaves.extend(inputs.iter().cloned());
    check_finite_differences("gru", &leaves, || {
        let (out, h) = gru.forward_with_state(&x, Some(&h0))?;
        Ok(dot(&out, &w_out).add(&dot(&h, &w_h))?)
    })
}

/// One profiling session at a time (a session is the process's): the tests that count calls.
static PROFILE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Under autocast the recurrence runs in the low type, as PyTorch's LSTM and GRU do there:
/// the recurrent weight and bias are cast once per forward, not at every time step, so the
/// casts do not grow with the sequence; the output and final states are f16; and the
/// gradients still reach the f32 weights.
#[test]
fn recurrence_under_autocast_casts_once_per_forward() -> R {
    let _one_session = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = Device::cpu();
    let lstm = LSTMConfig::new(5, 8).with_num_layers(2).init(&dev)?;
    let gru = GRUConfig::new(5, 8).init(&dev)?;
    let casts = |len: usize, lstm_too: bool| -> liandan_nn::Result<u64> {
        let x = Tensor::randn(&[len, 2, 5], 3, DType::F32, &dev)?;
        liandan_nn::profile::start()?;
        let outs = liandan_nn::autocast(DType::F16, || -> liandan_nn::Result<Vec<Tensor>> {
            Ok(if lstm_too {
                let (y, (h, c)) = lstm.forward_with_state(&x, None)?;
                vec![y, h, c]
            } else {
                vec![gru.forward(&x)?]
            })
        });
        let p = liandan_nn::profile::stop()?;
        for t in outs? {
            assert_eq!(t.dtype(), DType::F16, "outputs and states in the low type");
        }
        Ok(p.by_op().iter().filter(|r| r.name == "cast").map(|r| r.calls).sum())
    };
    for lstm_too in [true, false] {
        let (short, long) = (casts(2, lstm_too)?, casts(7, lstm_too)?);
        assert!(short > 0, "the weights are cast");
        assert_eq!(short, long, "casts with 2 and 7 steps (lstm: {lstm_too})");
    }
    let x = Tensor::randn(&[4, 2, 5], 4, DType::F32, &dev)?;
    let loss = liandan_nn::autocast(DType::F16, || -> liandan_nn::Result<Tensor> { Ok(lstm.forward(&x)?.to_dtype(DType::F32)?.sum_all()?) })?;
    loss.backward()?;
    for (name, p) in lstm.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
        assert_eq!(g.dtype(), DType::F32, "{name}");
        assert!(g.to_vec_f64()?.iter().all(|v| v.is_finite()), "{name}");
    }
    Ok(())
}

/// Backward joins the LSTM's gate gradients once. Step by step (the GPU): for the input
/// projection, whose join the recurrent weight's gathered product then reads; two joins in
/// all, that one and the states the product multiplies them by. As one kernel (the CPU's
/// sequence kernel writes the gate gradients where the join would): only the join of the
/// output's gradient.
#[test]
fn backward_joins_the_gate_gradients_once() -> R {
    let _one_session = PROFILE.lock().unwrap_or_else(|e| e.into_inner());
    for dev in devices() {
        let lstm = LSTMConfig::new(5, 8).init(&dev)?;
        let x = Tensor::randn(&[6, 2, 5], 5, DType::F32, &dev)?;
        let loss = lstm.forward(&x)?.sum_all()?;
        liandan_nn::profile::start()?;
        {
            // The session records every thread's calls: this one's are under this layer.
            let _here = liandan_nn::profile::layer("gate joins");
            loss.backward()?;
        }
        let p = liandan_nn::profile::stop()?;
        // Only this thread's calls: the other tests run theirs beside it.
        let events = p.events();
        let here: Vec<_> = events.iter().filter(|e| e.layer.starts_with("gate joins")).collect();
        let joins = here.iter().filter(|e| e.name == "concat").count();
        let sequence = here.iter().any(|e| e.name.contains("lstm_sequence_backward"));
        assert_eq!(sequence, dev.is_cpu(), "{dev}: the sequence kernel ran");
        assert_eq!(joins, if sequence { 1 } else { 2 }, "{dev}: joins in the LSTM's backward");
    }
    Ok(())
}
