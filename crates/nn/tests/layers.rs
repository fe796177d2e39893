//! The module system and the layers: PyTorch's state-dict names and parameter counts, PyTorch's
//! default initialization, forward shapes, train/eval behaviour, device and dtype moves,
//! checkpoints and gradients.
//!
//! Parameter counts are worked out by hand from PyTorch's shapes (weight `out*in*k*k` plus bias
//! `out`); names are those `torch.nn.Sequential(...).state_dict().keys()` prints.

use liandan_nn::layers::*;
use liandan_nn::{manual_seed, DType, Device, Forward, Module, ModuleExt, Tensor, TensorKind};

type R = liandan_nn::Result<()>;

/// Every test draws from the one global generator (initializers, dropout masks), so they take
/// turns: otherwise a test running alongside could draw between `manual_seed` and the init it
/// is meant to make reproducible.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

fn dev() -> Device {
    Device::cpu()
}

/// Sequential(Conv2d(3, 8, 3), BatchNorm2d(8), ReLU, Flatten, Linear(8*6*6, 10)) for 8x8 input.
fn small_cnn() -> liandan_nn::Result<Sequential> {
    let d = dev();
    Ok(Sequential::new()
        .push(Conv2dConfig::new(3, 8, 3).init(&d)?)
        .push(BatchNorm2dConfig::new(8).init(&d)?)
        .push(ReLU)
        .push(Flatten::default())
        .push(LinearConfig::new(8 * 6 * 6, 10).init(&d)?))
}

fn input(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, seed, DType::F32, &dev()).unwrap()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

#[test]
fn names_and_count_match_pytorch() -> R {
    let _rng = serial();
    let m = small_cnn()?;
    let names: Vec<String> = m.state_dict().into_iter().map(|(n, _)| n).collect();
    let want = ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked", "4.weight", "4.bias"];
    assert_eq!(names, want);
    let params: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(params, ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"]);
    // conv 8*3*3*3 + 8, bn 8 + 8, linear 288*10 + 10.
    assert_eq!(m.num_parameters(), 224 + 16 + 2890);
    let mut kinds = Vec::new();
    m.visit("model", &mut |name, _, kind| kinds.push((name.to_string(), kind)));
    assert_eq!(kinds[0], ("model.0.weight".to_string(), TensorKind::Parameter));
    assert_eq!(kinds[4], ("model.1.running_mean".to_string(), TensorKind::Buffer));
    Ok(())
}

#[test]
fn zoo_parameter_counts() -> R {
    let _rng = serial();
    let d = dev();
    let mlp = Sequential::new()
        .push(LinearConfig::new(1024, 512).init(&d)?)
        .push(ReLU)
        .push(LinearConfig::new(512, 256).init(&d)?)
        .push(ReLU)
        .push(LinearConfig::new(256, 10).init(&d)?);
    assert_eq!(mlp.num_parameters(), 658_698);
    let cnn = Sequential::new()
        .push(Conv2dConfig::new(1, 32, 3).init(&d)?)
        .push(Conv2dConfig::new(32, 64, 3).init(&d)?)
        .push(LinearConfig::new(9216, 128).init(&d)?)
        .push(LinearConfig::new(128, 10).init(&d)?);
    assert_eq!(cnn.num_parameters(), 1_199_882);
    Ok(())
}

#[test]
fn linear_init_bounds() -> R {
    let _rng = serial();
    let l = LinearConfig::new(100, 7).init(&dev())?;
    assert_eq!(l.weight.shape(), &[7, 100]);
    let w = l.weight.to_vec_f64()?;
    assert!(w.iter().all(|x| x.abs() <= 0.1), "weights outside ±1/sqrt(100)");
    let mean = w.iter().sum::<f64>() / w.len() as f64;
    let std = (w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / w.len() as f64).sqrt();
    let want = 0.1 / 3f64.sqrt();
    assert!((std - want).abs() < 0.15 * want, "std {std}, want about {want}");
    assert!(l.bias.as_ref().unwrap().to_vec_f64()?.iter().all(|x| x.abs() <= 0.1));
    assert!(l.weight.requires_grad() && l.weight.is_leaf());

    // Conv: fan_in = in/groups * kh * kw = 2 * 3 * 3 = 18.
    let c = Conv2dConfig::new(4, 6, 3).with_groups(2).init(&dev())?;
    assert_eq!(c.weight.shape(), &[6, 2, 3, 3]);
    let bound = 1.0 / 18f64.sqrt();
    assert!(c.weight.to_vec_f64()?.iter().all(|x| x.abs() <= bound));
    assert!(c.weight.to_vec_f64()?.iter().any(|x| x.abs() > 0.8 * bound));
    Ok(())
}

#[test]
fn norm_init() -> R {
    let _rng = serial();
    let bn = BatchNorm2dConfig::new(5).init(&dev())?;
    assert_eq!(bn.weight.as_ref().unwrap().to_vec_f64()?, vec![1.0; 5]);
    assert_eq!(bn.bias.as_ref().unwrap().to_vec_f64()?, vec![0.0; 5]);
    assert_eq!(bn.running_mean.as_ref().unwrap().to_vec_f64()?, vec![0.0; 5]);
    assert_eq!(bn.running_var.as_ref().unwrap().to_vec_f64()?, vec![1.0; 5]);
    let n = bn.num_batches_tracked.as_ref().unwrap();
    assert_eq!((n.dtype(), n.shape(), n.item_f64()?), (DType::I64, &[][..], 0.0));
    assert!(!bn.running_mean.as_ref().unwrap().requires_grad());
    let ln = LayerNormConfig::new(&[4, 3]).init(&dev())?;
    assert_eq!(ln.weight.as_ref().unwrap().to_vec_f64()?, vec![1.0; 12]);
    assert_eq!(ln.bias.as_ref().unwrap().to_vec_f64()?, vec![0.0; 12]);
    let gn = GroupNormConfig::new(2, 6).init(&dev())?;
    assert_eq!(gn.state_dict().len(), 2);
    Ok(())
}

#[test]
fn manual_seed_makes_init_reproducible() -> R {
    let _rng = serial();
    let draw = || -> liandan_nn::Result<Vec<Vec<f64>>> {
        manual_seed(1234);
        let m = small_cnn()?;
        let e = EmbeddingConfig::new(5, 3).init(&dev())?;
        let mut v: Vec<Vec<f64>> = m.state_dict().iter().map(|(_, t)| t.to_vec_f64().unwrap()).collect();
        v.push(e.weight.to_vec_f64()?);
        Ok(v)
    };
    assert_eq!(draw()?, draw()?, "manual_seed twice gave different inits");
    manual_seed(1);
    let a = LinearConfig::new(3, 3).init(&dev())?.weight.to_vec_f64()?;
    manual_seed(2);
    let b = LinearConfig::new(3, 3).init(&dev())?.weight.to_vec_f64()?;
    assert_ne!(a, b);
    Ok(())
}

#[test]
fn forward_shapes() -> R {
    let _rng = serial();
    let d = dev();
    let img = input(&[2, 4, 8, 8], 1);
    let shape = |l: &dyn Forward, x: &Tensor| l.forward(x).unwrap().shape().to_vec();
    assert_eq!(shape(&LinearConfig::new(8, 5).init(&d)?, &img), [2, 4, 8, 5]);
    assert_eq!(shape(&LinearConfig::new(8, 5).with_bias(false).init(&d)?, &input(&[3, 8], 2)), [3, 5]);
    assert_eq!(shape(&Conv2dConfig::new(4, 6, 3).init(&d)?, &img), [2, 6, 6, 6]);
    let strided = Conv2dConfig::new(4, 6, 3).with_stride((2, 2)).with_padding((1, 1)).with_groups(2).with_bias(false).init(&d)?;
    assert_eq!(shape(&strided, &img), [2, 6, 4, 4]);
    assert_eq!(shape(&Conv2dConfig::new(4, 6, 3).with_dilation((2, 2)).init(&d)?, &img), [2, 6, 4, 4]);
    assert_eq!(shape(&Conv1dConfig::new(4, 6, 3).with_padding(1).init(&d)?, &input(&[2, 4, 10], 3)), [2, 6, 10]);
    // (8 - 1) * 2 - 2 * 1 + (3 - 1) + 1 + 1 = 16.
    let up = ConvTranspose2dConfig::new(4, 3, 3).with_stride((2, 2)).with_padding((1, 1)).with_output_padding((1, 1)).init(&d)?;
    assert_eq!(up.weight.shape(), &[4, 3, 3, 3]);
    assert_eq!(shape(&up, &img), [2, 3, 16, 16]);
    assert_eq!(shape(&MaxPool2d::new(2), &img), [2, 4, 4, 4]);
    assert_eq!(shape(&MaxPool2d::new(3).with_stride((1, 1)).with_padding((1, 1)), &img), [2, 4, 8, 8]);
    assert_eq!(shape(&AvgPool2d::new(2), &img), [2, 4, 4, 4]);
    assert_eq!(shape(&AdaptiveAvgPool2d::new((1, 1)), &img), [2, 4, 1, 1]);
    assert_eq!(shape(&AdaptiveMaxPool2d::new((3, 5)), &img), [2, 4, 3, 5]);
    assert_eq!(shape(&BatchNorm2dConfig::new(4).init(&d)?, &img), [2, 4, 8, 8]);
    assert_eq!(shape(&BatchNorm1dConfig::new(4).init(&d)?, &input(&[5, 4], 4)), [5, 4]);
    assert_eq!(shape(&BatchNorm1dConfig::new(4).init(&d)?, &input(&[5, 4, 7], 4)), [5, 4, 7]);
    assert!(BatchNorm2dConfig::new(4).init(&d)?.forward(&input(&[5, 4], 4)).is_err());
    assert_eq!(shape(&LayerNormConfig::new(&[8]).init(&d)?, &img), [2, 4, 8, 8]);
    assert!(LayerNormConfig::new(&[7]).init(&d)?.forward(&img).is_err());
    assert_eq!(shape(&GroupNormConfig::new(2, 4).init(&d)?, &img), [2, 4, 8, 8]);
    assert_eq!(shape(&Dropout::new(0.3), &img), [2, 4, 8, 8]);
    assert_eq!(shape(&Dropout2d::new(0.3), &img), [2, 4, 8, 8]);
    assert_eq!(shape(&Flatten::default(), &img), [2, 256]);
    assert_eq!(shape(&Flatten::new(0, 1), &img), [8, 8, 8]);
    let ids = Tensor::from_slice(&[0i64, 4, 2, 2, 1, 0], &[2, 3], &d)?;
    assert_eq!(shape(&EmbeddingConfig::new(5, 7).init(&d)?, &ids), [2, 3, 7]);
    let acts: [&dyn Forward; 8] = [&ReLU, &LeakyReLU::default(), &GELU, &SiLU, &Sigmoid, &Tanh, &Softmax::new(-1), &LogSoftmax::new(1)];
    for a in acts {
        assert_eq!(shape(a, &img), [2, 4, 8, 8]);
    }
    let sums = Softmax::new(-1).forward(&img)?.sum(&[3], false)?.to_vec_f64()?;
    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-5));
    let leaky = LeakyReLU::new(0.5).forward(&Tensor::from_slice(&[-2.0f32, 3.0], &[2], &d)?)?.to_vec_f64()?;
    assert_eq!(leaky, [-1.0, 3.0]);
    assert_eq!(shape(&small_cnn()?, &input(&[2, 3, 8, 8], 5)), [2, 10]);
    assert_eq!(shape(&Sequential::new(), &img), [2, 4, 8, 8]);
    Ok(())
}

#[test]
fn dropout_train_vs_eval() -> R {
    let _rng = serial();
    let x = Tensor::ones(&[1000], DType::F32, &dev())?;
    let mut drop = Dropout::new(0.5);
    let y = drop.forward(&x)?.to_vec_f64()?;
    let zeros = y.iter().filter(|v| **v == 0.0).count();
    assert!((350..650).contains(&zeros), "{zeros} zeros of 1000");
    assert!(y.iter().all(|v| *v == 0.0 || (*v - 2.0).abs() < 1e-6));
    drop.eval();
    assert_eq!(drop.forward(&x)?.to_vec_f64()?, vec![1.0; 1000]);

    let mut seq = Sequential::new().push(Dropout2d::new(0.5));
    let img = Tensor::ones(&[4, 50, 3, 3], DType::F32, &dev())?;
    let y = seq.forward(&img)?.to_vec_f64()?;
    for plane in y.chunks(9) {
        assert!(plane.iter().all(|v| *v == plane[0]), "Dropout2d must drop whole channels");
    }
    seq.eval();
    assert_eq!(seq.forward(&img)?.to_vec_f64()?, vec![1.0; img.numel()]);
    Ok(())
}

#[test]
fn batch_norm_train_vs_eval() -> R {
    let _rng = serial();
    let mut bn = BatchNorm2dConfig::new(3).init(&dev())?;
    let x = input(&[4, 3, 5, 5], 7).mul_scalar(2.0)?.add_scalar(1.5)?;
    let y = bn.forward(&x)?;
    // Training normalizes with batch statistics: each channel has mean 0, variance 1.
    let m = y.mean(&[0, 2, 3], false)?.to_vec_f64()?;
    assert!(m.iter().all(|v| v.abs() < 1e-4), "{m:?}");
    let rm = bn.running_mean.as_ref().unwrap().clone();
    let rv = bn.running_var.as_ref().unwrap().clone();
    let nbt = bn.num_batches_tracked.as_ref().unwrap().clone();
    // running_mean = 0.9 * 0 + 0.1 * batch mean; running_var = 0.9 * 1 + 0.1 * unbiased var.
    let batch_mean = x.mean(&[0, 2, 3], false)?;
    assert!(max_abs_diff(&rm, &batch_mean.mul_scalar(0.1)?) < 1e-5);
    let unbiased = x.var(&[0, 2, 3], false, true)?;
    assert!(max_abs_diff(&rv, &unbiased.mul_scalar(0.1)?.add_scalar(0.9)?) < 1e-4);
    assert_eq!(nbt.item_f64()?, 1.0);
    bn.forward(&x)?;
    assert_eq!(nbt.item_f64()?, 2.0);

    bn.eval();
    let (rm_before, rv_before) = (rm.to_vec_f64()?, rv.to_vec_f64()?);
    let y_eval = bn.forward(&x)?;
    assert_eq!(rm.to_vec_f64()?, rm_before, "eval must not touch running stats");
    assert_eq!(rv.to_vec_f64()?, rv_before);
    assert_eq!(nbt.item_f64()?, 2.0);
    // Eval uses the running statistics.
    let want = x.sub(&rm.reshape(&[1, 3, 1, 1])?)?.div(&rv.add_scalar(1e-5)?.sqrt()?.reshape(&[1, 3, 1, 1])?)?;
    assert!(max_abs_diff(&y_eval, &want) < 1e-4);
    assert!(max_abs_diff(&y_eval, &y) > 0.1);
    Ok(())
}

#[test]
fn batch_norm_forward_relu_is_forward_then_relu() -> R {
    let _rng = serial();
    let x = input(&[4, 3, 5, 5], 8).mul_scalar(2.0)?.add_scalar(0.5)?;
    for training in [true, false] {
        let run = |relu: bool| -> liandan_nn::Result<(Tensor, Vec<Tensor>, Tensor)> {
            let mut bn = BatchNorm2dConfig::new(3).init(&dev())?;
            bn.bias.as_ref().unwrap().assign(&Tensor::from_f64s(&[0.3, -0.2, 0.0], &[3], DType::F32, &dev())?)?;
            bn.set_training(training);
            let x = x.detach().requires_grad_(true)?;
            let y = if relu { bn.forward_relu(&x)? } else { bn.forward(&x)?.relu()? };
            y.mul(&x)?.sum_all()?.backward()?;
            let grads = [&x, bn.weight.as_ref().unwrap(), bn.bias.as_ref().unwrap()].map(|t| t.grad().unwrap());
            Ok((y, grads.to_vec(), bn.running_var.clone().unwrap()))
        };
        let ((y, grads, rv), (want, want_grads, want_rv)) = (run(true)?, run(false)?);
        assert!(max_abs_diff(&y, &want) < 1e-5, "training {training}: output");
        assert!(y.to_vec_f64()?.iter().all(|&v| v >= 0.0) && y.to_vec_f64()?.contains(&0.0), "training {training}: a ReLU's output");
        for (g, w) in grads.iter().zip(&want_grads) {
            assert!(max_abs_diff(g, w) < 1e-4, "training {training}: gradients");
        }
        assert!(max_abs_diff(&rv, &want_rv) < 1e-6, "training {training}: running statistics");
    }
    Ok(())
}

#[test]
fn to_device_and_dtype() -> R {
    let _rng = serial();
    let mut m = small_cnn()?;
    m.to_device(&Device::cpu())?;
    for (name, p) in m.named_parameters() {
        assert!(p.requires_grad() && p.is_leaf(), "{name}");
    }
    m.to_dtype(DType::F64)?;
    for (name, t) in m.state_dict() {
        let want = if name.ends_with("num_batches_tracked") { DType::I64 } else { DType::F64 };
        assert_eq!(t.dtype(), want, "{name}");
    }
    for (name, p) in m.named_parameters() {
        assert!(p.requires_grad() && p.is_leaf(), "{name}");
    }
    assert!(!m.state_dict()[4].1.requires_grad(), "buffers stay without grad");
    let y = m.forward(&input(&[2, 3, 8, 8], 9).to_dtype(DType::F64)?)?;
    assert_eq!(y.dtype(), DType::F64);
    assert!(m.to_dtype(DType::I64).is_err());
    Ok(())
}

#[test]
fn save_load_round_trip() -> R {
    let _rng = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut a = small_cnn()?;
    a.forward(&input(&[4, 3, 8, 8], 11))?; // move the running stats off their init
    a.eval();
    a.save(&path)?;
    let mut b = small_cnn()?;
    b.eval();
    let x = input(&[2, 3, 8, 8], 12);
    assert!(max_abs_diff(&a.forward(&x)?, &b.forward(&x)?) > 1e-3);
    let report = b.load(&path, true)?;
    assert!(report.is_complete());
    assert_eq!(report.loaded.len(), 9);
    assert_eq!(max_abs_diff(&a.forward(&x)?, &b.forward(&x)?), 0.0);
    assert_eq!(b.state_dict()[6].1.item_f64()?, 1.0);
    // A model of other shapes is refused, strictly.
    let mut c = Sequential::new().push(LinearConfig::new(2, 2).init(&dev())?);
    assert!(c.load(&path, true).is_err());
    Ok(())
}

#[test]
fn backward_reaches_every_parameter() -> R {
    let _rng = serial();
    let m = Sequential::new().push(small_cnn()?).push(GELU).push(LayerNormConfig::new(&[10]).init(&dev())?).push(LinearConfig::new(10, 3).init(&dev())?);
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "0.0.weight");
    assert_eq!(names.last().unwrap(), "3.bias");
    let loss = m.forward(&input(&[4, 3, 8, 8], 13))?.square()?.sum_all()?;
    loss.backward()?;
    for (name, p) in m.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
        assert_eq!(g.shape(), p.shape(), "{name}");
    }
    m.zero_grad();
    assert!(m.parameters().iter().all(|p| p.grad().is_none()));
    Ok(())
}

#[test]
fn vec_of_modules_is_a_module_list() -> R {
    let _rng = serial();
    let mut blocks = vec![BatchNorm1dConfig::new(2).init(&dev())?, BatchNorm1dConfig::new(2).init(&dev())?];
    let names: Vec<String> = blocks.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[5], "1.weight");
    blocks.eval();
    assert!(blocks.iter().all(|b| !b.training));
    let boxed: Box<dyn liandan_nn::Layer> = Box::new(LinearConfig::new(3, 2).init(&dev())?);
    assert_eq!(boxed.num_parameters(), 8);
    assert_eq!(boxed.forward(&input(&[1, 3], 14))?.shape(), &[1, 2]);
    Ok(())
}

#[test]
fn optional_tensors_drop_out_of_the_state_dict() -> R {
    let _rng = serial();
    let d = dev();
    let bn = BatchNorm2dConfig::new(3).with_affine(false).with_track_running_stats(false).init(&d)?;
    assert!(bn.state_dict().is_empty());
    // Without running stats, eval still normalizes with the batch's statistics, as PyTorch.
    let mut bn = bn;
    bn.eval();
    let y = bn.forward(&input(&[4, 3, 2, 2], 15).add_scalar(3.0)?)?;
    assert!(y.mean(&[0, 2, 3], false)?.to_vec_f64()?.iter().all(|m| m.abs() < 1e-4));
    let names = |m: &dyn Module| {
        let mut v = Vec::new();
        m.visit("", &mut |n, _, _| v.push(n.to_string()));
        v
    };
    assert_eq!(names(&BatchNorm1dConfig::new(3).with_affine(false).init(&d)?), ["running_mean", "running_var", "num_batches_tracked"]);
    assert_eq!(names(&LayerNormConfig::new(&[3]).with_bias(false).init(&d)?), ["weight"]);
    assert!(names(&GroupNormConfig::new(1, 3).with_affine(false).init(&d)?).is_empty());
    assert_eq!(names(&Conv1dConfig::new(2, 2, 1).with_bias(false).init(&d)?), ["weight"]);
    // ConvTranspose2d's fan_in is out_channels / groups * kh * kw = 2 * 2 * 2 = 8, as PyTorch.
    let up = ConvTranspose2dConfig::new(8, 2, 2).init(&d)?;
    let bound = 1.0 / 8f64.sqrt();
    let w = up.weight.to_vec_f64()?;
    assert!(w.iter().all(|x| x.abs() <= bound) && w.iter().any(|x| x.abs() > 0.5 * bound));
    assert!(Conv2dConfig::new(3, 4, 3).with_groups(2).init(&d).is_err());
    assert!(GroupNormConfig::new(4, 6).init(&d).is_err());
    Ok(())
}

#[test]
fn a_model_moves_to_every_device_and_trains_there() -> R {
    let _rng = serial();
    // Device::all() includes the GPU where wgpu finds one (lavapipe in CI).
    for d in Device::all() {
        let mut m = small_cnn()?;
        let x = input(&[2, 3, 8, 8], 5);
        let want = m.forward(&x)?.to_vec_f64()?;
        m.to_device(&d)?;
        for (name, t) in m.state_dict() {
            assert!(t.device() == &d, "{name} stayed on {}", t.device());
        }
        let y = m.forward(&x.to_device(&d)?)?;
        for (g, w) in y.to_vec_f64()?.iter().zip(&want) {
            assert!((g - w).abs() < 1e-4 * (1.0 + w.abs()), "on {d}: {g} vs {w}");
        }
        y.sum_all()?.backward()?;
        for (name, p) in m.named_parameters() {
            let g = p.grad().unwrap_or_else(|| panic!("{name} got no gradient on {d}"));
            assert!(g.device() == &d, "{name}'s gradient is on {}", g.device());
        }
    }
    Ok(())
}

#[test]
fn embedding_padding_row_starts_at_zero_and_gets_no_gradient() -> R {
    let _rng = serial();
    for d in Device::all() {
        let e = EmbeddingConfig::new(5, 3).with_padding_idx(Some(-1)).init(&d)?;
        assert_eq!(e.padding_idx, Some(4));
        let ids = Tensor::from_vec(vec![4i64, 1, 4, 2], &[2, 2], &d)?;
        let out = e.forward(&ids)?;
        let v = out.to_vec_f64()?;
        assert_eq!(&v[0..3], &[0.0; 3], "the padding row is zero at first");
        let w = e.weight.to_vec_f64()?;
        assert_eq!(&v[3..6], &w[3..6], "other rows are the table's");
        out.sum_all()?.backward()?;
        let g = e.weight.grad().expect("the table gets a gradient").to_vec_f64()?;
        assert_eq!(&g[12..15], &[0.0; 3], "no gradient reaches the padding row");
        assert_eq!(&g[3..6], &[1.0; 3]);
        assert_eq!(&g[0..3], &[0.0; 3], "row 0 was not looked up");
    }
    assert!(EmbeddingConfig::new(5, 3).with_padding_idx(Some(5)).init(&dev()).is_err());
    assert!(EmbeddingConfig::new(5, 3).with_padding_idx(Some(-6)).init(&dev()).is_err());
    Ok(())
}
