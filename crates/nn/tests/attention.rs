//! `MultiheadAttention`, `TransformerEncoderLayer` and `TransformerEncoder` against PyTorch:
//! outputs, attention weights and every gradient on each device, from the fixtures that
//! `tests/data/make_attention_fixtures.py` writes (`attn_*.safetensors`; see its docstring for
//! what each file holds). Names and parameter counts are the literals that script (and
//! `sum(p.numel() for p in m.parameters())` on the configurations below) printed.

mod common;

use std::collections::HashMap;

use common::{devices, fixture, rel_err};
use liandan_nn::checkpoint::load_state_dict;
use liandan_nn::layers::*;
use liandan_nn::{manual_seed, summary, DType, Device, Forward, Module, ModuleExt, Tensor};

type R = liandan_nn::Result<()>;
type Fx = HashMap<String, Tensor>;

/// Initializers and dropout masks draw from one global generator: tests that use it take turns.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The largest `rel_err` allowed against PyTorch. Measured maxima over all fixtures (outputs,
/// weights, every gradient): 6.7e-7 on the CPU and 9.3e-7 on lavapipe (both in
/// `encoder_stack`'s first-layer `in_proj_weight` gradient); the bounds leave a factor of 15
/// on the CPU and 100 on GPUs, whose reduction orders differ more.
fn tol(d: &Device) -> f64 {
    if *d == Device::cpu() {
        1e-5
    } else {
        1e-4
    }
}

/// Loads the fixture's `model.*` tensors into `model`, strictly (every key, same shapes).
fn load(model: &impl Module, fx: &Fx) {
    let loaded = fx.iter().filter_map(|(k, t)| k.strip_prefix("model.").map(|k| (k.to_string(), t.clone()))).collect();
    let report = load_state_dict(&model.state_dict(), loaded, true).unwrap();
    assert!(report.is_complete(), "{report:?}");
}

/// A leaf copy of fixture tensor `name` that requires grad.
fn input(fx: &Fx, name: &str) -> Tensor {
    fx[name].detach().requires_grad_(true).unwrap()
}

/// Asserts `rel_err(got, fx[want]) <= tol` and returns the error, printing it for the report.
fn check(case: &str, d: &Device, got: &Tensor, fx: &Fx, want: &str) -> f64 {
    let err = rel_err(got, &fx[want], 1e-3);
    println!("{case} {d:?} {want}: rel_err {err:.2e}");
    assert!(err <= tol(d), "{case} on {d:?}: {want} rel_err {err:e} > {}", tol(d));
    err
}

/// Checks every parameter's gradient and the inputs' gradients; returns the largest error.
fn check_grads(case: &str, d: &Device, model: &impl Module, fx: &Fx, inputs: &[(&str, &Tensor)]) -> f64 {
    let mut worst: f64 = 0.0;
    for (name, p) in model.named_parameters() {
        worst = worst.max(check(case, d, &p.grad().expect("parameter has a gradient"), fx, &format!("grad.{name}")));
    }
    for (name, x) in inputs {
        worst = worst.max(check(case, d, &x.grad().expect("input has a gradient"), fx, &format!("grad_input.{name}")));
    }
    worst
}

/// `(out * probe).sum() (+ (weights * probe_w).sum())`, the fixtures' loss.
fn loss(out: &Tensor, weights: Option<&Tensor>, fx: &Fx) -> liandan_nn::Result<Tensor> {
    let mut l = out.mul(&fx["probe"])?.sum_all()?;
    if let Some(w) = weights {
        l = l.add(&w.mul(&fx["probe_w"])?.sum_all()?)?;
    }
    Ok(l)
}

#[test]
fn mha_seq_first_cross_attention_matches_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_mha_seq_first.safetensors", &d);
        let m = MultiheadAttentionConfig::new(8, 2).init(&d)?;
        load(&m, &fx);
        let (q, k, v) = (input(&fx, "query"), input(&fx, "key"), input(&fx, "value"));
        let (out, w) = m.forward_qkv(&q, &k, &v, None, None, true, true)?;
        let w = w.expect("need_weights returns weights");
        check("mha_seq_first", &d, &out, &fx, "out");
        check("mha_seq_first", &d, &w, &fx, "weights");
        let (_, wh) = m.forward_qkv(&q, &k, &v, None, None, true, false)?;
        check("mha_seq_first", &d, &wh.expect("weights"), &fx, "weights_per_head");
        // The scaled_dot_product_attention path gives the same output and no weights.
        let (out_sdpa, none) = m.forward_qkv(&q, &k, &v, None, None, false, true)?;
        assert!(none.is_none());
        check("mha_seq_first (sdpa)", &d, &out_sdpa, &fx, "out");
        loss(&out, Some(&w), &fx)?.backward()?;
        check_grads("mha_seq_first", &d, &m, &fx, &[("query", &q), ("key", &k), ("value", &v)]);
    }
    Ok(())
}

#[test]
fn mha_batch_first_bool_masks_match_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_mha_batch_first_masks.safetensors", &d);
        assert_eq!(fx["key_padding_mask"].dtype(), DType::Bool);
        let m = MultiheadAttentionConfig::new(8, 2).with_batch_first(true).init(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let (kpm, mask) = (Some(&fx["key_padding_mask"]), Some(&fx["attn_mask"]));
        let (out, w) = m.forward_qkv(&x, &x, &x, kpm, mask, true, true)?;
        let w = w.expect("weights");
        check("mha_batch_first_masks", &d, &out, &fx, "out");
        check("mha_batch_first_masks", &d, &w, &fx, "weights");
        let (out_sdpa, _) = m.forward_qkv(&x, &x, &x, kpm, mask, false, true)?;
        check("mha_batch_first_masks (sdpa)", &d, &out_sdpa, &fx, "out");
        loss(&out, Some(&w), &fx)?.backward()?;
        check_grads("mha_batch_first_masks", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

#[test]
fn mha_float_masks_per_head_weights_match_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_mha_float_mask.safetensors", &d);
        let m = MultiheadAttentionConfig::new(8, 2).init(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let (out, wh) = m.forward_qkv(&x, &x, &x, Some(&fx["key_padding_mask"]), Some(&fx["attn_mask"]), true, false)?;
        let wh = wh.expect("weights");
        assert_eq!(wh.shape(), [3, 2, 5, 5]);
        check("mha_float_mask", &d, &out, &fx, "out");
        check("mha_float_mask", &d, &wh, &fx, "weights_per_head");
        loss(&out, Some(&wh), &fx)?.backward()?;
        check_grads("mha_float_mask", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

#[test]
fn mha_unbatched_matches_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_mha_unbatched.safetensors", &d);
        // batch_first is ignored for unbatched inputs, as in PyTorch.
        let m = MultiheadAttentionConfig::new(8, 2).with_batch_first(true).init(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let (out, w) = m.forward_qkv(&x, &x, &x, None, Some(&fx["attn_mask"]), true, true)?;
        assert_eq!(out.shape(), [5, 8]);
        check("mha_unbatched", &d, &out, &fx, "out");
        check("mha_unbatched", &d, &w.expect("weights"), &fx, "weights");
        loss(&out, None, &fx)?.backward()?;
        check_grads("mha_unbatched", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

#[test]
fn encoder_layer_post_norm_relu_matches_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_layer_post_relu.safetensors", &d);
        let m = TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16).with_dropout(0.0).init(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let out = m.forward_with_masks(&x, None, Some(&fx["key_padding_mask"]))?;
        check("layer_post_relu", &d, &out, &fx, "out");
        loss(&out, None, &fx)?.backward()?;
        check_grads("layer_post_relu", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

#[test]
fn encoder_layer_pre_norm_gelu_matches_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_layer_pre_gelu.safetensors", &d);
        let cfg = TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16).with_dropout(0.0).with_activation(Activation::Gelu);
        let m = cfg.with_batch_first(true).with_norm_first(true).init(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let out = m.forward(&x)?;
        check("layer_pre_gelu", &d, &out, &fx, "out");
        loss(&out, None, &fx)?.backward()?;
        check_grads("layer_pre_gelu", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

fn vit_like_encoder(d: &Device) -> liandan_nn::Result<TransformerEncoder> {
    let layer = TransformerEncoderLayerConfig::new(8, 2)
        .with_dim_feedforward(16)
        .with_dropout(0.0)
        .with_activation(Activation::Gelu)
        .with_batch_first(true)
        .with_norm_first(true);
    TransformerEncoderConfig::new(layer, 2).with_norm(true).init(d)
}

#[test]
fn encoder_stack_with_causal_mask_matches_pytorch() -> R {
    let _rng = serial();
    for d in devices() {
        let fx = fixture("attn_encoder_stack.safetensors", &d);
        let m = vit_like_encoder(&d)?;
        load(&m, &fx);
        let x = input(&fx, "input");
        let out = m.forward_with_masks(&x, Some(&fx["attn_mask"]), None)?;
        check("encoder_stack", &d, &out, &fx, "out");
        loss(&out, None, &fx)?.backward()?;
        check_grads("encoder_stack", &d, &m, &fx, &[("input", &x)]);
    }
    Ok(())
}

fn names(m: &impl Module) -> Vec<String> {
    m.state_dict().into_iter().map(|(n, _)| n).collect()
}

const LAYER_KEYS: [&str; 12] = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
];

#[test]
fn names_and_counts_match_pytorch() -> R {
    let _rng = serial();
    let d = Device::cpu();
    let mha = MultiheadAttentionConfig::new(8, 2).init(&d)?;
    assert_eq!(names(&mha), ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
    assert_eq!(mha.num_parameters(), 288);
    let mha = MultiheadAttentionConfig::new(8, 2).with_bias(false).init(&d)?;
    assert_eq!(names(&mha), ["in_proj_weight", "out_proj.weight"]);
    assert_eq!(mha.num_parameters(), 256);

    let layer = TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16).init(&d)?;
    assert_eq!(names(&layer), LAYER_KEYS);
    assert_eq!(layer.num_parameters(), 600);
    assert_eq!(TransformerEncoderLayerConfig::new(8, 2).init(&d)?.num_parameters(), 35144);
    let no_bias = TransformerEncoderLayerConfig::new(8, 2).with_bias(false).init(&d)?;
    let want = ["self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight", "linear2.weight", "norm1.weight", "norm2.weight"];
    assert_eq!(names(&no_bias), want);
    assert_eq!(no_bias.num_parameters(), 33040);

    let enc = vit_like_encoder(&d)?;
    let mut want: Vec<String> = (0..2).flat_map(|i| LAYER_KEYS.iter().map(move |k| format!("layers.{i}.{k}"))).collect();
    want.extend(["norm.weight".to_string(), "norm.bias".to_string()]);
    assert_eq!(names(&enc), want);
    assert_eq!(enc.num_parameters(), 1216);
    let plain = TransformerEncoderConfig::new(TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16), 2).init(&d)?;
    assert_eq!(plain.num_parameters(), 1200);
    Ok(())
}

#[test]
fn init_follows_pytorch() -> R {
    let _rng = serial();
    manual_seed(0);
    let d = Device::cpu();
    let m = MultiheadAttentionConfig::new(64, 4).init(&d)?;
    let max_abs = |t: &Tensor| t.to_vec_f64().unwrap().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    // xavier_uniform_ on [3E, E]: bound sqrt(6 / (E + 3E)); Linear's default: 1 / sqrt(E).
    let (b_in, b_out) = ((6.0f64 / 256.0).sqrt(), 1.0 / 8.0);
    let (w_in, w_out) = (max_abs(&m.in_proj_weight), max_abs(&m.out_proj.weight));
    assert!(w_in <= b_in && w_in > 0.95 * b_in, "in_proj_weight max {w_in}, bound {b_in}");
    assert!(w_out <= b_out && w_out > 0.95 * b_out, "out_proj.weight max {w_out}, bound {b_out}");
    assert_eq!(max_abs(m.in_proj_bias.as_ref().unwrap()), 0.0);
    assert_eq!(max_abs(m.out_proj.bias.as_ref().unwrap()), 0.0);
    for (name, p) in m.named_parameters() {
        assert!(p.requires_grad(), "{name}");
    }
    // Each encoder layer draws its own weights (PyTorch's deep copies start equal).
    let enc = TransformerEncoderConfig::new(TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16), 2).init(&d)?;
    assert_ne!(enc.layers[0].linear1.weight.to_vec_f64()?, enc.layers[1].linear1.weight.to_vec_f64()?);
    Ok(())
}

#[test]
fn train_eval_and_dropout() -> R {
    let _rng = serial();
    manual_seed(1);
    let d = Device::cpu();
    let layer = TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16).with_dropout(0.5);
    let mut enc = TransformerEncoderConfig::new(layer, 2).with_norm(true).init(&d)?;
    let x = Tensor::randn(&[5, 3, 8], 7, DType::F32, &d)?;
    assert!(enc.layers.iter().all(|l| l.training && l.self_attn.training));
    let (a, b) = (enc.forward(&x)?.to_vec_f64()?, enc.forward(&x)?.to_vec_f64()?);
    assert_ne!(a, b, "training mode drops at random");
    enc.eval();
    assert!(enc.layers.iter().all(|l| !l.training && !l.self_attn.training));
    let (a, b) = (enc.forward(&x)?.to_vec_f64()?, enc.forward(&x)?.to_vec_f64()?);
    assert_eq!(a, b, "eval mode is deterministic");

    // Attention dropout alone, on the weights it returns: rows no longer sum to 1.
    let mut mha = MultiheadAttentionConfig::new(8, 2).with_dropout(0.5).init(&d)?;
    let (_, w) = mha.forward_qkv(&x, &x, &x, None, None, true, true)?;
    let sums = w.unwrap().sum(&[2], false)?.to_vec_f64()?;
    assert!(sums.iter().any(|s| (s - 1.0).abs() > 1e-3));
    mha.eval();
    let (_, w) = mha.forward_qkv(&x, &x, &x, None, None, true, true)?;
    assert!(w.unwrap().sum(&[2], false)?.to_vec_f64()?.iter().all(|s| (s - 1.0).abs() < 1e-5));
    Ok(())
}

#[test]
fn bad_configs_shapes_and_masks_are_errors() -> R {
    let _rng = serial();
    let d = Device::cpu();
    assert!(MultiheadAttentionConfig::new(10, 3).init(&d).is_err());
    assert!(MultiheadAttentionConfig::new(8, 0).init(&d).is_err());
    assert!(MultiheadAttentionConfig::new(8, 2).with_dropout(1.5).init(&d).is_err());
    assert!(TransformerEncoderLayerConfig::new(8, 3).init(&d).is_err());

    let m = MultiheadAttentionConfig::new(8, 2).init(&d)?;
    let t = |shape: &[usize]| Tensor::randn(shape, 3, DType::F32, &d).unwrap();
    let (x, kv) = (t(&[5, 3, 8]), t(&[4, 3, 8]));
    let qkv = |q: &Tensor, k: &Tensor, v: &Tensor| m.forward_qkv(q, k, v, None, None, true, true).map(|_| ());
    assert!(qkv(&x, &kv, &kv).is_ok());
    assert!(qkv(&t(&[5, 3, 6]), &kv, &kv).is_err(), "query width != embed_dim");
    assert!(qkv(&t(&[2, 5, 3, 8]), &kv, &kv).is_err(), "4-D query");
    assert!(qkv(&x, &t(&[4, 2, 8]), &t(&[4, 2, 8])).is_err(), "batch sizes differ");
    assert!(qkv(&x, &kv, &t(&[3, 3, 8])).is_err(), "key and value lengths differ");
    assert!(qkv(&x, &t(&[4, 8]), &t(&[4, 8])).is_err(), "batched query, unbatched key");
    assert!(m.forward(&t(&[5, 3, 7])).is_err());

    let with_masks = |kpm: Option<&Tensor>, mask: Option<&Tensor>| m.forward_qkv(&x, &kv, &kv, kpm, mask, false, true).map(|_| ());
    let bools = |shape: &[usize]| Tensor::zeros(shape, DType::Bool, &d).unwrap();
    assert!(with_masks(Some(&bools(&[3, 4])), Some(&bools(&[5, 4]))).is_ok());
    assert!(with_masks(Some(&t(&[3, 4])), Some(&t(&[6, 5, 4]))).is_ok(), "float masks, attn_mask [N*H, L, S]");
    assert!(with_masks(Some(&bools(&[3, 5])), None).is_err(), "key_padding_mask [N, L] instead of [N, S]");
    assert!(with_masks(Some(&bools(&[4])), None).is_err(), "unbatched key_padding_mask on a batch");
    assert!(with_masks(None, Some(&bools(&[4, 5]))).is_err(), "attn_mask [S, L]");
    assert!(with_masks(None, Some(&bools(&[2, 5, 4]))).is_err(), "attn_mask [H, L, S] on a batch of 3");
    assert!(with_masks(None, Some(&bools(&[1, 1, 5, 4]))).is_err(), "4-D attn_mask");
    let ints = Tensor::zeros(&[3, 4], DType::I64, &d)?;
    assert!(with_masks(Some(&ints), None).is_err(), "integer key_padding_mask");

    let layer = TransformerEncoderLayerConfig::new(8, 2).with_dim_feedforward(16).init(&d)?;
    assert!(layer.forward_with_masks(&x, Some(&bools(&[4, 4])), None).is_err());
    assert!(layer.forward(&t(&[5, 3, 4])).is_err());
    Ok(())
}

#[test]
fn summary_lists_the_blocks() -> R {
    let _rng = serial();
    let d = Device::cpu();
    // In a Sequential, as the model itself gets no row (torchsummary's rule).
    let model = Sequential::new().push(vit_like_encoder(&d)?);
    let s = summary::summary(&model, &[3, 5, 8], &d)?;
    assert_eq!(s.rows[0].layer, "TransformerEncoder-1");
    assert_eq!((s.rows[0].output_shape.as_slice(), s.rows[0].params), ([3, 5, 8].as_slice(), 1216));
    assert_eq!(s.rows[1].layer, "TransformerEncoderLayer-2");
    assert_eq!((s.rows[1].depth, s.rows[1].params), (1, 600));
    let attn: Vec<_> = s.rows.iter().filter(|r| r.layer.starts_with("MultiheadAttention-")).collect();
    assert_eq!(attn.len(), 2);
    assert!(attn.iter().all(|r| r.depth == 2 && r.output_shape == [3, 5, 8] && r.params == 288));
    assert_eq!(s.total_params, 1216);
    Ok(())
}

/// Gradients w.r.t. query, key and value against central differences in float64, through
/// both masks and the returned weights (the PyTorch fixtures check float32 only).
#[test]
fn input_gradients_match_finite_differences_in_f64() -> R {
    let _rng = serial();
    manual_seed(3);
    let d = Device::cpu();
    let mut m = MultiheadAttentionConfig::new(4, 2).init(&d)?;
    m.to_dtype(DType::F64)?;
    let randn = |shape: &[usize], seed| Tensor::randn(shape, seed, DType::F64, &d);
    let (q, k, v) = (randn(&[3, 2, 4], 1)?, randn(&[2, 2, 4], 2)?, randn(&[2, 2, 4], 3)?);
    let kpm = Tensor::from_f64s(&[0.0, 0.0, 0.0, 1.0], &[2, 2], DType::F64, &d)?.gt_scalar(0.5)?;
    let (mask, probe, probe_w) = (randn(&[3, 2], 4)?, randn(&[3, 2, 4], 5)?, randn(&[2, 3, 2], 6)?);
    let f = |q: &Tensor, k: &Tensor, v: &Tensor| -> liandan_nn::Result<Tensor> {
        let (out, w) = m.forward_qkv(q, k, v, Some(&kpm), Some(&mask), true, true)?;
        Ok(out.mul(&probe)?.sum_all()?.add(&w.expect("weights").mul(&probe_w)?.sum_all()?)?)
    };
    let leaves = [&q, &k, &v].map(|t| t.detach().requires_grad_(true).unwrap());
    f(&leaves[0], &leaves[1], &leaves[2])?.backward()?;
    let h = 1e-6;
    for (i, leaf) in leaves.iter().enumerate() {
        let base = leaf.to_vec_f64()?;
        let mut numeric = Vec::with_capacity(base.len());
        for j in 0..base.len() {
            let at = |delta: f64| -> liandan_nn::Result<f64> {
                let mut vals = base.clone();
                vals[j] += delta;
                let mut xs = [q.clone(), k.clone(), v.clone()];
                xs[i] = Tensor::from_f64s(&vals, leaf.shape(), DType::F64, &d)?;
                f(&xs[0], &xs[1], &xs[2])?.item_f64().map_err(Into::into)
            };
            numeric.push((at(h)? - at(-h)?) / (2.0 * h));
        }
        let want = Tensor::from_f64s(&numeric, leaf.shape(), DType::F64, &d)?;
        let err = rel_err(&leaf.grad().expect("gradient"), &want, 1e-3);
        println!("finite differences, input {i}: rel_err {err:.2e}");
        // Measured: 4e-10 to 3.3e-9 (central differences with h = 1e-6 are good to ~1e-10).
        assert!(err < 1e-7, "input {i}: rel_err {err:e} against finite differences");
    }
    Ok(())
}
