//! Parity with PyTorch for every zoo model, on the CPU and on the GPU (resnet18 and vit on a
//! software GPU only with `--ignored`).
//!
//! `tests/data/parity/make_parity.py` ran each model in PyTorch with fixed weights on a fixed
//! batch and stored the output, the loss and every parameter's gradient (see the script for the
//! file layout). The weights come from the portable generator both sides share, so here
//! `Tensor::rand` rebuilds them bit for bit (checked against the head and digest PyTorch
//! stored), loads them into our model through `load_state_dict`, runs the same pass and
//! compares.
//!
//! Tolerances, relative to the largest magnitude of the reference tensor (`rel_err`):
//! output and loss 1e-5; gradients 1e-4 (a backward pass sums in other orders than PyTorch's,
//! and the GPU's matmul splits K differently again); the sum of squares and the random
//! projection of each whole gradient agree to 1e-4 of the gradient's norm, which catches a wrong
//! element anywhere, also outside the stored sample.

mod common;

use std::collections::HashMap;

use common::{devices, fixture, rel_err};
use liandan_nn::checkpoint;
use liandan_nn::zoo::{self, Vae, VaeOutput, ZooConfig, ZooModel};
use liandan_nn::{DType, Device, DeviceKind, Forward, ModuleExt, Reduction, Tensor};

const OUTPUT_TOL: f64 = 1e-5;
const GRAD_TOL: f64 = 1e-4;
const EVAL: &[&str] = &["mnist_cnn", "seed003_cnn"];

type Ref = HashMap<String, Tensor>;

/// The three f64 numbers of `init.<key>`: seed, low, high.
fn init_of(r: &Ref, key: &str) -> Option<(u64, f64, f64)> {
    let v = r.get(&format!("init.{key}"))?.to_vec_f64().unwrap();
    Some((v[0] as u64, v[1], v[2]))
}

/// Fills `model` with the parity weights through `load_state_dict`, and checks they are the
/// bits PyTorch had.
fn load_parity_weights(model: &mut dyn ZooModel, r: &Ref, device: &Device) {
    let expected = model.state_dict();
    let mut generated = Vec::new();
    for (key, t) in &expected {
        let Some((seed, low, high)) = init_of(r, key) else { continue };
        let w = Tensor::rand(t.shape(), low, high, seed, DType::F32, device).unwrap();
        let head: Vec<f64> = w.to_vec_f64().unwrap().into_iter().take(64).collect();
        assert_eq!(head, r[&format!("head.{key}")].to_vec_f64().unwrap(), "{key}: the generated weights differ from PyTorch's");
        let digest = r[&format!("digest.{key}")].to_vec_f64().unwrap();
        let sum: f64 = w.to_vec_f64().unwrap().iter().sum();
        assert!((sum - digest[0]).abs() <= 1e-9 * digest[1].sqrt().max(1.0), "{key}: sum {sum} vs PyTorch's {}", digest[0]);
        generated.push((key.clone(), w));
    }
    let report = checkpoint::load_state_dict(&expected, generated, false).unwrap();
    assert!(report.unexpected.is_empty() && report.mismatched.is_empty(), "{report:?}");
    assert!(report.missing.iter().all(|k| k.ends_with("num_batches_tracked")), "not in the parity file: {:?}", report.missing);
}

/// The model's outputs (`output`, and for the VAE `mu` and `logvar`) and the loss.
fn run(name: &str, model: &dyn ZooModel, vae: Option<&Vae>, r: &Ref) -> (Vec<(&'static str, Tensor)>, Tensor) {
    let x = &r["input"];
    if let Some(vae) = vae {
        let out = vae.forward_with_noise(x, &r["noise"]).unwrap();
        let loss = Vae::loss_of(&out, x).unwrap();
        let VaeOutput { reconstruction, mu, logvar } = out;
        return (vec![("output", reconstruction), ("mu", mu), ("logvar", logvar)], loss);
    }
    let out = model.forward(x).unwrap();
    let y = &r["target"];
    let loss = if name == "mnist_cnn" { out.nll_loss(y, Reduction::Mean) } else { out.cross_entropy(y, Reduction::Mean) }.unwrap();
    (vec![("output", out)], loss)
}

/// Compares one model with PyTorch on `device`; returns the worst errors seen (output, grad).
fn check(name: &str, device: &Device) -> (f64, f64) {
    let r = fixture(&format!("parity/{name}.safetensors"), device);
    let mut vae = None;
    let mut model: Box<dyn ZooModel> = zoo::build(name, device).unwrap();
    if name == "vae" {
        vae = Some(Vae::new(device).unwrap());
    }
    let target: &mut dyn ZooModel = match vae.as_mut() {
        Some(v) => v,
        None => model.as_mut(),
    };
    load_parity_weights(target, &r, device);
    if EVAL.contains(&name) {
        target.eval();
    } else {
        target.train();
    }
    let model: &dyn ZooModel = match vae.as_ref() {
        Some(v) => v,
        None => model.as_ref(),
    };

    let (outputs, loss) = run(name, model, vae.as_ref(), &r);
    let mut worst_out: f64 = 0.0;
    for (key, got) in &outputs {
        let e = rel_err(got, &r[*key], 1e-6);
        assert!(e <= OUTPUT_TOL, "{name} on {device}: {key} differs from PyTorch's by {e:.2e} (relative)");
        worst_out = worst_out.max(e);
    }
    let (got, want) = (loss.item_f64().unwrap(), r["loss"].to_vec_f64().unwrap()[0]);
    assert!((got - want).abs() <= OUTPUT_TOL * want.abs().max(1.0), "{name} on {device}: loss {got} vs PyTorch's {want}");

    loss.backward().unwrap();
    let mut worst_grad: f64 = 0.0;
    for (pname, p) in model.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{name}: {pname} got no gradient"));
        let want = &r[&format!("grad.{pname}")];
        let all = g.to_vec_f64().unwrap();
        let e = if want.numel() == g.numel() {
            rel_err(&g, want, 1e-12)
        } else {
            let n = all.len();
            let sample: Vec<f32> = (0..want.numel()).map(|k| all[k * n / want.numel()] as f32).collect();
            rel_err(&Tensor::from_vec(sample, want.shape(), device).unwrap(), want, 1e-12)
        };
        assert!(e <= GRAD_TOL, "{name} on {device}: grad of {pname} differs by {e:.2e} (relative)");
        worst_grad = worst_grad.max(e);

        let stat = r[&format!("gradstat.{pname}")].to_vec_f64().unwrap();
        let proj = Tensor::rand(g.shape(), -1.0, 1.0, 99, DType::F32, &Device::cpu()).unwrap().to_vec_f64().unwrap();
        let sumsq: f64 = all.iter().map(|v| v * v).sum();
        let dot: f64 = all.iter().zip(&proj).map(|(a, b)| a * b).sum();
        let norm = stat[0].sqrt().max(1e-12);
        assert!((sumsq.sqrt() - norm).abs() <= GRAD_TOL * norm, "{name} on {device}: |grad {pname}| = {} vs PyTorch's {norm}", sumsq.sqrt());
        assert!((dot - stat[1]).abs() <= GRAD_TOL * norm, "{name} on {device}: projection of grad {pname} is {dot} vs PyTorch's {}", stat[1]);
    }

    // Buffers after the pass: BatchNorm's running statistics in training mode.
    for (key, b) in model.state_dict() {
        if let Some(want) = r.get(&format!("after.{key}")) {
            let e = if b.dtype() == DType::I64 { (b.to_vec_f64().unwrap()[0] - want.to_vec_f64().unwrap()[0]).abs() } else { rel_err(&b, want, 1e-12) };
            assert!(e <= OUTPUT_TOL, "{name} on {device}: buffer {key} after the pass differs by {e:.2e}");
        }
    }

    // The zoo's own training loss is the one compared above (the VAE's draws fresh noise).
    if vae.is_none() {
        let own = model.loss(&r["input"], Some(&r["target"])).unwrap().item_f64().unwrap();
        assert!((own - want).abs() <= OUTPUT_TOL * want.abs().max(1.0), "{name}: ZooModel::loss gives {own}, PyTorch {want}");
    }
    (worst_out, worst_grad)
}

/// Which devices a parity test runs on: the software GPU (lavapipe) takes a minute for each
/// of the two large models, so there those run only when asked for (`--ignored`).
#[derive(Clone, Copy)]
enum On {
    Every,
    AllButSoftware,
    Software,
}

fn check_on(name: &str, on: On) {
    let software = |d: &Device| d.kind() == DeviceKind::SoftwareGpu;
    let chosen = devices().into_iter().filter(|d| match on {
        On::Every => true,
        On::AllButSoftware => !software(d),
        On::Software => software(d),
    });
    for d in chosen {
        let (o, g) = check(name, &d);
        eprintln!("{name} on {d}: output rel err {o:.2e}, worst grad rel err {g:.2e}");
        // Every op of every zoo model's training pass runs on the GPU itself.
        assert_eq!(d.fallback_report(), vec![], "{name} on {d}: ops fell back to the CPU");
    }
}

macro_rules! parity_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_on($name, On::Every);
            }
        )*
    };
}

macro_rules! large_parity_tests {
    ($($test:ident, $on_software:ident => $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_on($name, On::AllButSoftware);
            }

            #[test]
            #[ignore = "a minute on a software GPU"]
            fn $on_software() {
                check_on($name, On::Software);
            }
        )*
    };
}

parity_tests! {
    mlp_matches_pytorch => "mlp",
    mnist_cnn_matches_pytorch => "mnist_cnn",
    seed003_cnn_matches_pytorch => "seed003_cnn",
    lstm_matches_pytorch => "lstm",
    vae_matches_pytorch => "vae",
}

large_parity_tests! {
    resnet18_matches_pytorch, resnet18_matches_pytorch_on_a_software_gpu => "resnet18",
    vit_matches_pytorch, vit_matches_pytorch_on_a_software_gpu => "vit",
}

#[test]
fn zoo_parameter_counts_equal_the_table() {
    // docs/MODEL_ZOO.md's column, written out here so that a change to the specs can't hide one here.
    let table = [
        ("mlp", 658_698),
        ("mnist_cnn", 1_199_882),
        ("seed003_cnn", 831_626),
        ("resnet18", 11_173_962),
        ("vit", 2_693_578),
        ("lstm", 295_434),
        ("vae", 652_824),
    ];
    assert_eq!(zoo::names(), table.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    for (name, params) in table {
        let model = zoo::build(name, &Device::cpu()).unwrap();
        assert_eq!(model.num_parameters(), params, "{name}");
        assert_eq!(model.spec().params, params, "{name}");
    }
    let err = zoo::build("resnet50", &Device::cpu()).err().expect("an unknown name is an error").to_string();
    assert!(err.contains("resnet50") && err.contains("mnist_cnn"), "{err}");
}

/// `build_with` sizes every classifier's head to the classes asked for (and the mlp's input to
/// the features), keeps the reference's keys, and refuses sizes a model cannot take.
#[test]
fn zoo_build_with_sizes_every_classifier() {
    let dev = Device::cpu();
    for spec in zoo::SPECS.iter().filter(|s| s.target != zoo::Target::Reconstruction) {
        let (config, input): (ZooConfig, Vec<usize>) = match spec.name {
            "mlp" => (ZooConfig { classes: 3, in_features: Some(5) }, vec![2, 5]),
            _ => (ZooConfig::classes(3), [2].iter().chain(&spec.input_shape[1..]).copied().collect()),
        };
        let model = zoo::build_with(spec.name, &config, &dev).unwrap();
        let out = model.forward(&Tensor::randn(&input, 1, DType::F32, &dev).unwrap()).unwrap();
        assert_eq!(out.shape(), &[2, 3], "{}", spec.name);
        let reference: Vec<String> = zoo::build(spec.name, &dev).unwrap().state_dict().into_iter().map(|(k, _)| k).collect();
        assert_eq!(model.state_dict().into_iter().map(|(k, _)| k).collect::<Vec<_>>(), reference, "{}", spec.name);
    }
    let err = |name: &str, config: ZooConfig| zoo::build_with(name, &config, &dev).err().expect("refused").to_string();
    assert!(err("vae", ZooConfig::classes(3)).contains("reconstructs"));
    assert!(err("mnist_cnn", ZooConfig::classes(0)).contains("at least one class"));
    assert!(err("resnet18", ZooConfig { classes: 3, in_features: Some(4) }).contains("takes no input width"));
}

/// The state-dict keys of every zoo model are PyTorch's, in PyTorch's order.
#[test]
fn zoo_state_dict_keys_are_pytorchs() {
    for name in zoo::names() {
        let r = fixture(&format!("parity/{name}.safetensors"), &Device::cpu());
        let model = zoo::build(name, &Device::cpu()).unwrap();
        for (key, t) in model.state_dict() {
            if key.ends_with("num_batches_tracked") {
                assert_eq!(t.dtype(), DType::I64);
                continue;
            }
            assert!(r.contains_key(&format!("init.{key}")), "{name}: PyTorch's model has no `{key}`");
        }
        let ours = model.state_dict().len();
        let theirs =
            r.keys().filter(|k| k.starts_with("init.")).count() + model.state_dict().iter().filter(|(k, _)| k.ends_with("num_batches_tracked")).count();
        assert_eq!(ours, theirs, "{name}: PyTorch's state dict has keys ours lacks");
    }
}

/// A checkpoint PyTorch wrote (`safetensors.torch.save_file(model.state_dict(), path)`) loads
/// strictly, holds the parity weights bit for bit and gives PyTorch's output; the checkpoint we
/// write from it holds the same keys, dtypes, shapes and bytes, so PyTorch loads it strictly.
#[test]
fn pytorch_checkpoint_round_trip() {
    let dev = Device::cpu();
    let r = fixture("parity/lstm.safetensors", &dev);
    let torch_file = common::data_path("parity/lstm.weights.safetensors");
    let mut model = zoo::build("lstm", &dev).unwrap();
    let report = model.load(&torch_file, true).unwrap();
    assert!(report.is_complete());
    for (key, t) in model.state_dict() {
        let (seed, low, high) = init_of(&r, &key).unwrap();
        let w = Tensor::rand(t.shape(), low, high, seed, DType::F32, &dev).unwrap();
        assert_eq!(t.to_vec_f64().unwrap(), w.to_vec_f64().unwrap(), "{key} as PyTorch saved it");
    }
    model.train();
    let out = model.forward(&r["input"]).unwrap();
    assert!(rel_err(&out, &r["output"], 1e-6) <= OUTPUT_TOL);

    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("lstm.safetensors");
    model.save(&ours).unwrap();
    let theirs = checkpoint::load(&torch_file, &dev).unwrap();
    let mine = checkpoint::load(&ours, &dev).unwrap();
    assert_eq!(theirs.iter().map(|(k, _)| k).collect::<Vec<_>>(), mine.iter().map(|(k, _)| k).collect::<Vec<_>>());
    for ((k, a), (_, b)) in theirs.iter().zip(&mine) {
        assert_eq!((a.shape(), a.dtype()), (b.shape(), b.dtype()), "{k}");
        assert_eq!(a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap(), "{k}");
    }
}

/// With `LIANDAN_PARITY_OUT=dir`, writes every zoo model with the parity weights as
/// `<name>.liandan.safetensors` for `make_parity.py --check-liandan dir`, which loads them in
/// PyTorch strictly and checks its output. Every run saves and reloads them here.
#[test]
fn our_checkpoints_reload_with_the_same_outputs() {
    let dev = Device::cpu();
    let tmp = tempfile::tempdir().unwrap();
    let out = liandan_nn::settings::PARITY_OUT.path_in(&liandan_nn::settings::env).unwrap_or_else(|e| panic!("{e}"));
    let dir = out.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    for name in zoo::names() {
        if name == "resnet18" && out.is_none() {
            continue; // 45 MB to write and read; the others exercise the same code
        }
        let r = fixture(&format!("parity/{name}.safetensors"), &dev);
        let mut model = zoo::build(name, &dev).unwrap();
        load_parity_weights(model.as_mut(), &r, &dev);
        let path = dir.join(format!("{name}.liandan.safetensors"));
        model.save(&path).unwrap();
        let mut again = zoo::build(name, &dev).unwrap();
        assert!(again.load(&path, true).unwrap().is_complete());
        model.eval();
        again.eval();
        if name != "vae" {
            let (a, b) = (model.forward(&r["input"]).unwrap(), again.forward(&r["input"]).unwrap());
            assert_eq!(a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap(), "{name}");
        }
        for ((k, a), (_, b)) in model.state_dict().iter().zip(again.state_dict()) {
            assert_eq!(a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap(), "{name}: {k}");
        }
    }
}
