//! The module machinery: parameters keep their identity when a model moves to another device
//! or dtype, as PyTorch's `model.to(..)` keeps its Parameter objects; `impl_module!` names
//! every kind of field as PyTorch's state dict does.

mod common;

use liandan_nn::layers::{BatchNorm1d, BatchNorm1dConfig, BatchNorm2dConfig, Conv2dConfig, Flatten, Linear, LinearConfig, Sequential};
use liandan_nn::{DType, Device, Forward, Module, ModuleExt, Reduction, Tensor, TensorKind};

type R = liandan_nn::error::Result<()>;

/// Conv, batch norm (with buffers) and a linear head for `[2, 3, 6, 6]` input.
fn model(d: &Device) -> liandan_nn::error::Result<Sequential> {
    Ok(Sequential::new()
        .push(Conv2dConfig::new(3, 4, 3).init(d)?)
        .push(BatchNorm2dConfig::new(4).init(d)?)
        .push(Flatten::default())
        .push(LinearConfig::new(4 * 4 * 4, 5).init(d)?))
}

/// Runs one forward and backward of `m` on `device` in `dtype`.
fn backward(m: &Sequential, device: &Device, dtype: DType) -> R {
    let x = Tensor::randn(&[2, 3, 6, 6], 7, dtype, device)?;
    let y = Tensor::from_vec(vec![1i64, 3], &[2], device)?;
    m.forward(&x)?.cross_entropy(&y, Reduction::Mean)?.backward()?;
    Ok(())
}

/// Handles taken before a move are the moved tensors: same ids, the new device and dtype, and
/// they receive the gradients of a backward run after the move.
fn check_handles(before: &[(String, Tensor)], m: &Sequential, device: &Device, dtype: DType) {
    let after = m.named_parameters();
    assert_eq!(before.len(), after.len());
    for ((name, old), (_, new)) in before.iter().zip(&after) {
        assert_eq!(old.id(), new.id(), "{name}: the model holds a different tensor after the move");
        assert_eq!((old.device(), old.dtype()), (device, dtype), "{name}");
        assert!(old.requires_grad() && old.is_leaf(), "{name}");
        let g = old.grad().unwrap_or_else(|| panic!("{name}: a handle taken before the move got no gradient"));
        assert_eq!((g.device(), g.dtype(), g.shape()), (device, dtype, old.shape()), "{name}: gradient");
    }
}

#[test]
fn handles_taken_before_to_dtype_see_the_gradients() -> R {
    let cpu = Device::cpu();
    let mut m = model(&cpu)?;
    let before = m.named_parameters();
    let buffers_before: Vec<u64> = m.state_dict().iter().map(|(_, t)| t.id()).collect();
    m.to_dtype(DType::F64)?;
    backward(&m, &cpu, DType::F64)?;
    check_handles(&before, &m, &cpu, DType::F64);
    let buffers_after: Vec<u64> = m.state_dict().iter().map(|(_, t)| t.id()).collect();
    assert_eq!(buffers_before, buffers_after, "buffers keep their identity too");
    Ok(())
}

#[test]
fn handles_taken_before_to_device_see_the_gradients() -> R {
    let Some(gpu) = common::gpu() else { return Ok(()) };
    let mut m = model(&Device::cpu())?;
    let before = m.named_parameters();
    m.to_device(&gpu)?;
    backward(&m, &gpu, DType::F32)?;
    check_handles(&before, &m, &gpu, DType::F32);
    // And back, with the gradients moving along.
    m.to_device(&Device::cpu())?;
    for (name, p) in &before {
        assert_eq!(p.grad().map(|g| g.device().is_cpu()), Some(true), "{name}: the gradient moves with its parameter");
    }
    Ok(())
}

#[test]
fn in_place_moves_keep_values_and_views_their_layout() -> R {
    let cpu = Device::cpu();
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let t = Tensor::from_vec(values.clone(), &[3, 4], &cpu)?.requires_grad_(true)?;
    t.cast_(DType::F64)?;
    assert_eq!(t.to_vec::<f64>()?, values.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert!(t.cast_(DType::I64).is_err(), "a tensor that requires grad stays floating-point");
    // A transposed view owns its storage's whole run, so its strides still hold after a move.
    let base = Tensor::from_vec(values.clone(), &[3, 4], &cpu)?;
    let view = base.t()?.detach();
    let want = view.to_vec::<f32>()?;
    view.cast_(DType::F64)?;
    assert_eq!(view.to_vec_f64()?, want.iter().map(|&v| v as f64).collect::<Vec<_>>());
    if let Some(gpu) = common::gpu() {
        view.move_to_(&gpu)?;
        assert_eq!(view.device(), &gpu);
        assert_eq!(view.to_vec_f64()?, want.iter().map(|&v| v as f64).collect::<Vec<_>>());
    }
    // A result of a recorded op cannot move in place: its graph points at the old tensors.
    let y = t.mul_scalar(2.0)?;
    let e = y.cast_(DType::F32).unwrap_err().to_string();
    assert!(e.contains("cast_") && e.contains("leaf"), "{e}");
    Ok(())
}

/// Every section `impl_module!` takes, on a generic type: optional parameters, buffers, a list
/// and an optional child, the mode flag.
struct Stack<const N: usize> {
    scale: Tensor,
    shift: Option<Tensor>,
    steps: Tensor,
    blocks: Vec<Linear>,
    norm: Option<BatchNorm1d>,
    last: Option<Linear>,
    training: bool,
}

liandan_nn::impl_module!(impl[const N: usize] Stack<N> { params: [scale, shift], buffers: [steps], modules: [blocks, norm, last], mode: training });

#[test]
fn impl_module_names_every_kind_of_field_as_pytorch() -> R {
    let d = Device::cpu();
    let mut m = Stack::<2> {
        scale: Tensor::ones(&[2], DType::F32, &d)?.requires_grad_(true)?,
        shift: None,
        steps: Tensor::zeros(&[], DType::I64, &d)?,
        blocks: vec![LinearConfig::new(2, 2).init(&d)?, LinearConfig::new(2, 2).with_bias(false).init(&d)?],
        norm: Some(BatchNorm1dConfig::new(2).init(&d)?),
        last: None,
        training: true,
    };
    let mut names = Vec::new();
    m.visit("net", &mut |name, _, kind| names.push((name.to_string(), kind)));
    let (p, b) = (TensorKind::Parameter, TensorKind::Buffer);
    let want = [
        ("net.scale", p),
        ("net.steps", b),
        ("net.blocks.0.weight", p),
        ("net.blocks.0.bias", p),
        ("net.blocks.1.weight", p),
        ("net.norm.weight", p),
        ("net.norm.bias", p),
        ("net.norm.running_mean", b),
        ("net.norm.running_var", b),
        ("net.norm.num_batches_tracked", b),
    ];
    assert_eq!(names, want.map(|(n, k)| (n.to_string(), k)));
    m.eval();
    assert!(!m.training && !m.norm.as_ref().unwrap().training);
    m.train();
    assert!(m.training && m.norm.as_ref().unwrap().training);
    // visit_mut reaches the same tensors in the same order.
    let mut seen = Vec::new();
    m.visit_mut("net", &mut |name, _, _| {
        seen.push(name.to_string());
        Ok(())
    })?;
    assert_eq!(seen, want.map(|(n, _)| n.to_string()));
    Ok(())
}
