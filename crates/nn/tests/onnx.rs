//! ONNX export checked against ONNX Runtime.
//!
//! Every zoo model, a model of our own (in f32, at opset 20, and with f16 weights) and one
//! fixed-batch export are exported from seeded weights. `data/onnx/check_onnx.py` exported the
//! same models (through `write_models_for_onnx_runtime` below), checked each with
//! `onnx.checker`, ran it in ONNX Runtime on fixed inputs at batch 1 and 7, and recorded the
//! outputs with the SHA-256 of the graph it ran in `data/onnx/ort_outputs.safetensors`. Here
//! each model is exported again, its bytes must be that graph's, and liandan's own outputs on
//! the same inputs must equal ONNX Runtime's. A wrong export fails either way: a changed graph
//! fails the hash until the script has run it in ONNX Runtime, and a graph that computes
//! something else fails the comparison.

mod common;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};

use liandan_nn::export::{self, OnnxOptions};
use liandan_nn::layers::{BatchNorm2d, BatchNorm2dConfig, Conv2d, Conv2dConfig, GRUConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, GRU};
use liandan_nn::{checkpoint, impl_module, manual_seed, zoo, DType, Device, Forward, Module, ModuleExt, Result, Tensor};
use sha2::{Digest, Sha256};

/// A model of our own that reaches the ops the zoo does not: grouped convolution, average
/// pooling, a GRU, attention by hand, mean and max reductions, comparisons and `where`,
/// softplus, clamping, a parameter broadcast into the batch.
struct Custom {
    token: Tensor,
    conv: Conv2d,
    bn: BatchNorm2d,
    conv2: Conv2d,
    norm: LayerNorm,
    gru: GRU,
    fc: Linear,
}

impl_module!(Custom { params: [token], modules: [conv, bn, conv2, norm, gru, fc] });

impl Custom {
    fn new(dev: &Device) -> Result<Custom> {
        Ok(Custom {
            token: Tensor::randn(&[1, 1, 8], 7, DType::F32, dev)?.requires_grad_(true)?,
            conv: Conv2dConfig::new(3, 8, 3).with_padding((1, 1)).init(dev)?,
            bn: BatchNorm2dConfig::new(8).init(dev)?,
            conv2: Conv2dConfig::new(8, 8, 3).with_padding((1, 1)).with_groups(2).with_bias(false).init(dev)?,
            norm: LayerNormConfig::new(&[8]).init(dev)?,
            gru: GRUConfig::new(8, 6).with_batch_first(true).init(dev)?,
            fc: LinearConfig::new(22, 4).init(dev)?,
        })
    }
}

impl Forward for Custom {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let n = x.shape()[0];
        let h = self.bn.forward(&self.conv.forward(x)?)?.gelu()?;
        let h = self.conv2.forward(&h)?.avg_pool2d((2, 2), (2, 2), (0, 0), true)?.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))?;
        // [N, 8, 2, 2] -> four tokens of 8, and a learned one in front.
        let t = h.flatten(2, -1)?.transpose(1, 2)?;
        let t = self.norm.forward(&Tensor::cat(&[&self.token.expand(&[n, 1, 8])?, &t], 1)?)?;
        let attn = t.matmul(&t.transpose(1, 2)?)?.mul_scalar(8f64.sqrt().recip())?.softmax(-1)?.matmul(&t)?;
        let (seq, _) = self.gru.forward_with_state(&attn, None)?;
        let last = seq.select(1, 4)?;
        let pooled = attn.mean(&[1], false)?;
        let peak = attn.max(1, false)?;
        let z = Tensor::cat(&[&pooled, &peak, &last], 1)?.leaky_relu(0.1)?;
        let z = z.softplus()?.sub(&z.clamp(-0.5, 0.5)?.sqrt_abs()?)?;
        Ok(self.fc.forward(&z)?.log_softmax(1)?)
    }
}

/// `sqrt(|x|)`, through `abs` and `sqrt`.
trait SqrtAbs {
    fn sqrt_abs(&self) -> liandan_nn::TensorResult<Tensor>;
}

impl SqrtAbs for Tensor {
    fn sqrt_abs(&self) -> liandan_nn::TensorResult<Tensor> {
        self.abs()?.sqrt()
    }
}

/// Held by every test here for its whole run: the models are built from the global seed,
/// which tests running in parallel would otherwise draw from in turn.
fn seeded() -> MutexGuard<'static, ()> {
    static SEEDED: Mutex<()> = Mutex::new(());
    SEEDED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A model's forward pass over its inputs.
type ForwardFn = Box<dyn Fn(&[Tensor]) -> Result<Vec<Tensor>>>;

/// One model to export and check.
struct Case {
    name: &'static str,
    model: Rc<dyn Module>,
    forward: ForwardFn,
    /// Each input's name, per-sample shape and whether it is uniform in [0, 1) (else normal).
    inputs: Vec<(&'static str, Vec<usize>, bool)>,
    dtype: DType,
    options: OnnxOptions,
    /// The batch sizes ONNX Runtime ran: 1 and 7, or the fixed batch.
    batches: Vec<usize>,
    /// `|liandan - ort| <= tol + tol * |ort|`.
    tol: f64,
}

fn case<M: Module + 'static>(name: &'static str, mut model: M, forward: impl Fn(&M, &[Tensor]) -> Result<Vec<Tensor>> + 'static) -> Case {
    perturb(&model);
    model.eval();
    let model = Rc::new(model);
    let m = model.clone();
    Case {
        name,
        model,
        forward: Box::new(move |x| forward(&m, x)),
        inputs: Vec::new(),
        dtype: DType::F32,
        options: OnnxOptions::default(),
        batches: vec![1, 7],
        tol: 1e-5,
    }
}

/// Gives what a fresh model holds as one number everywhere (batch norm's and layer norm's
/// weights, biases and statistics, the ViT's class token and positions) seeded values of its
/// own, so that the graph's use of each tensor shows in the outputs.
fn perturb(model: &dyn Module) {
    for (i, (name, t)) in model.state_dict().into_iter().enumerate() {
        if !t.dtype().is_float() {
            continue;
        }
        let values = t.to_vec_f64().unwrap();
        let fresh = |low, high| Tensor::rand(t.shape(), low, high, 100 + i as u64, t.dtype(), t.device()).unwrap();
        if name.ends_with("running_var") {
            t.assign(&fresh(0.5, 1.5)).unwrap();
        } else if values.iter().all(|&v| v == values[0]) {
            t.assign(&t.add(&fresh(-0.3, 0.3)).unwrap()).unwrap();
        }
    }
}

fn one(m: &dyn Forward, x: &[Tensor]) -> Result<Vec<Tensor>> {
    Ok(vec![m.forward(&x[0])?])
}

fn zoo_case(name: &'static str) -> Case {
    let dev = Device::cpu();
    manual_seed(5);
    let spec = zoo::spec(name).unwrap();
    let mut c = case(name, zoo::build(name, &dev).unwrap(), |m, x| one(m, x));
    c.inputs = vec![("input", spec.input_shape[1..].to_vec(), false)];
    c
}

fn cases() -> Vec<Case> {
    let dev = Device::cpu();
    let mut all: Vec<Case> = ["mlp", "mnist_cnn", "seed003_cnn", "resnet18", "vit", "lstm"].into_iter().map(zoo_case).collect();

    manual_seed(5);
    let mut vae = case("vae", zoo::Vae::new(&dev).unwrap(), |m, x| {
        let out = m.forward_with_noise(&x[0], &x[1])?;
        Ok(vec![out.reconstruction, out.mu, out.logvar])
    });
    vae.inputs = vec![("input", vec![784], true), ("noise", vec![20], false)];
    vae.options = OnnxOptions::default().with_input_names(&["input", "noise"]).with_output_names(&["reconstruction", "mu", "logvar"]);
    all.push(vae);

    let mut fixed = zoo_case("mnist_cnn");
    fixed.name = "mnist_cnn.batch7";
    fixed.options = OnnxOptions::default().with_dynamic_batch(false);
    fixed.batches = vec![7];
    all.push(fixed);

    let custom = |name, opset| {
        manual_seed(9);
        let mut c = case(name, Custom::new(&Device::cpu()).unwrap(), |m, x| one(m, x));
        c.inputs = vec![("input", vec![3, 8, 8], false)];
        c.options = OnnxOptions::default().with_opset(opset);
        c
    };
    all.push(custom("custom", 17));
    all.push(custom("custom.opset20", 20));

    manual_seed(9);
    let mut half = Custom::new(&dev).unwrap();
    half.to_dtype(DType::F16).unwrap();
    let mut f16 = case("custom.f16", half, |m, x| one(m, x));
    f16.inputs = vec![("input", vec![3, 8, 8], false)];
    f16.dtype = DType::F16;
    // Both sides round every op to f16 (11 significant bits), each in its own order.
    f16.tol = 2e-2;
    all.push(f16);
    all
}

/// The case's inputs at batch `n`: the first `n` of seven fixed samples each.
fn inputs(c: &Case, n: usize) -> Vec<Tensor> {
    let dev = Device::cpu();
    c.inputs
        .iter()
        .enumerate()
        .map(|(i, (_, sample, uniform))| {
            let shape: Vec<usize> = [7].iter().chain(sample).copied().collect();
            let seed = 1000 + i as u64;
            let x = if *uniform { Tensor::rand(&shape, 0.0, 1.0, seed, DType::F32, &dev) } else { Tensor::randn(&shape, seed, DType::F32, &dev) };
            x.unwrap().to_dtype(c.dtype).unwrap().narrow(0, 0, n).unwrap().contiguous().unwrap()
        })
        .collect()
}

/// The case's model exported as the fixtures expect: from two samples for a dynamic batch,
/// from the fixed batch otherwise.
fn export(c: &Case) -> export::OnnxModel {
    let n = if c.options.dynamic_batch { 2 } else { c.batches[0] };
    export::to_onnx(&*c.model, &inputs(c, n), &c.forward, &c.options).unwrap_or_else(|e| panic!("{}: {e}", c.name))
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `|got - want| <= tol + tol * |want|` everywhere (NaN never passes).
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + tol * w.abs(), "{what}: element {i}: liandan {g}, ONNX Runtime {w} (tolerance {tol} + {tol} |ONNX Runtime|)");
    }
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    eprintln!("{what}: largest difference {worst:.2e}");
}

#[test]
fn exports_match_onnx_runtime() {
    let _seeded = seeded();
    let (recorded, meta) = checkpoint::load_with_metadata(common::data_path("onnx/ort_outputs.safetensors"), &Device::cpu()).unwrap();
    let recorded: HashMap<String, Tensor> = recorded.into_iter().collect();
    for c in cases() {
        let onnx = export(&c);
        let want = meta.get(c.name).unwrap_or_else(|| panic!("{}: no fixture; run tests/data/onnx/check_onnx.py", c.name));
        assert_eq!(
            &hex(&onnx.bytes),
            want,
            "{}: the exported graph is not the one ONNX Runtime ran; run tests/data/onnx/check_onnx.py to check it there and record its outputs",
            c.name
        );
        for &n in &c.batches {
            let got = (c.forward)(&inputs(&c, n)).unwrap();
            for (name, out) in onnx.outputs.iter().zip(got) {
                let key = format!("{}/{name}/b{n}", c.name);
                let ort = recorded.get(&key).unwrap_or_else(|| panic!("{key}: not in the fixtures"));
                assert_eq!(out.shape(), ort.shape(), "{key}");
                assert_close(&out.to_vec_f64().unwrap(), &ort.to_vec_f64().unwrap(), c.tol, &key);
            }
        }
    }
}

/// Writes each case's model, inputs and liandan's outputs into `$LIANDAN_ONNX_DIR`, for
/// `check_onnx.py` (which runs this) to check in ONNX Runtime.
#[test]
#[ignore = "run by tests/data/onnx/check_onnx.py"]
fn write_models_for_onnx_runtime() {
    let _seeded = seeded();
    let dir = liandan_nn::settings::ONNX_DIR.path_in(&liandan_nn::settings::env).unwrap_or_else(|e| panic!("{e}"));
    let dir = dir.expect("LIANDAN_ONNX_DIR names the directory to write into");
    for c in cases() {
        let onnx = export(&c);
        onnx.save(dir.join(format!("{}.onnx", c.name))).unwrap();
        let full = inputs(&c, 7);
        let named: Vec<(String, Tensor)> = c.inputs.iter().zip(&full).map(|((n, _, _), t)| (n.to_string(), t.clone())).collect();
        let batches = c.batches.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(",");
        let meta = HashMap::from([("batches".to_string(), batches), ("tolerance".to_string(), c.tol.to_string())]);
        checkpoint::save(dir.join(format!("{}.inputs.safetensors", c.name)), &named, Some(meta)).unwrap();
        let mut outs = Vec::new();
        for &n in &c.batches {
            for (name, t) in onnx.outputs.iter().zip((c.forward)(&inputs(&c, n)).unwrap()) {
                outs.push((format!("{}/{name}/b{n}", c.name), t));
            }
        }
        checkpoint::save(dir.join(format!("{}.liandan.safetensors", c.name)), &outs, None).unwrap();
    }
}

/// A layer whose op has no ONNX operator.
struct Unfold;

impl_module!(Unfold {});

impl Forward for Unfold {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.im2col((2, 2), (2, 2), (0, 0), (1, 1))?)
    }
}

struct Unfolding {
    conv: Conv2d,
    unfold: Unfold,
}

impl_module!(Unfolding { conv, unfold });

impl Forward for Unfolding {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.unfold.forward(&self.conv.forward(x)?)
    }
}

fn export_error(model: &impl Forward, shape: &[usize]) -> String {
    let x = Tensor::randn(shape, 0, DType::F32, &Device::cpu()).unwrap();
    let path = std::env::temp_dir().join(format!("liandan-onnx-error-{}.onnx", std::process::id()));
    let err = export::onnx(model, &[x], &path, &OnnxOptions::default()).map(|_| ()).expect_err("the export fails");
    assert!(!path.exists(), "a failed export wrote {}", path.display());
    err.to_string()
}

#[test]
fn an_op_without_an_onnx_operator_is_an_error_naming_it_and_its_layer() {
    let _seeded = seeded();
    let dev = Device::cpu();
    let mut model = Unfolding { conv: Conv2dConfig::new(1, 2, 3).init(&dev).unwrap(), unfold: Unfold };
    model.eval();
    let err = export_error(&model, &[2, 1, 8, 8]);
    assert!(err.contains("`im2col` in layer Unfold-2 has no ONNX mapping"), "{err}");
}

#[test]
fn training_mode_is_an_error_that_says_what_to_do() {
    let _seeded = seeded();
    let dev = Device::cpu();
    // Dropout draws a new mask each run.
    let mnist = zoo::build("mnist_cnn", &dev).unwrap();
    let err = export_error(&mnist, &[2, 1, 28, 28]);
    assert!(err.contains("random numbers") && err.contains("model.eval()"), "{err}");
    // Batch norm in training normalizes with the batch's own statistics.
    let block = zoo::BasicBlock::new(2, 2, 1, &dev).unwrap();
    let err = export_error(&block, &[2, 2, 4, 4]);
    assert!(err.contains("`batch_norm` in layer BatchNorm-2") && err.contains("model.eval()"), "{err}");
}

#[test]
fn parameters_keep_their_state_dict_keys_and_the_batch_is_named() {
    let _seeded = seeded();
    let c = zoo_case("mnist_cnn");
    let onnx = export(&c);
    assert_eq!(onnx.op_counts, [("Conv", 2), ("Gemm", 2), ("LogSoftmax", 1), ("MaxPool", 1), ("Relu", 3), ("Reshape", 1)].map(|(o, n)| (o.to_string(), n)));
    let path = std::env::temp_dir().join(format!("liandan-onnx-keys-{}.onnx", std::process::id()));
    onnx.save(&path).unwrap();
    let graph = export::read(&path).unwrap().graph.unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut names: Vec<&str> = graph.initializer.iter().filter_map(|t| t.name.as_deref()).filter(|n| !n.starts_with('/')).collect();
    names.sort();
    let mut keys: Vec<String> = c.model.state_dict().into_iter().map(|(k, _)| k).collect();
    keys.sort();
    assert_eq!(names, keys);
    let dims = |v: &export::proto::ValueInfoProto| -> Vec<String> {
        let Some(export::proto::type_proto::Value::TensorType(t)) = &v.r#type.as_ref().unwrap().value else { panic!("a tensor") };
        t.shape.as_ref().unwrap().dim.iter().map(|d| format!("{:?}", d.value.as_ref().unwrap())).collect()
    };
    assert_eq!(dims(&graph.input[0]), ["DimParam(\"batch\")", "DimValue(1)", "DimValue(28)", "DimValue(28)"]);
    assert_eq!(dims(&graph.output[0]), ["DimParam(\"batch\")", "DimValue(10)"]);
}
