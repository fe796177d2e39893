//! `cargo xtask bench-fusion`: each fused kernel's workload with fusion on and off, in one
//! process on one device, so a fused kernel's gain is measured against the composite it
//! replaces in the same run: the zoo `lstm` model's forward+backward (the LSTM cell), resnet18's
//! forward+backward in training (batch norm, forward and backward), and an
//! Adam and an SGD step over resnet18's 62 parameter tensors (the optimizer updates). Prints a
//! Markdown table; asserts nothing.

use liandan_nn::{zoo, ModuleExt};
use liandan_tensor::{no_fusion, DType, Device, Error, Result, Tensor};
use liandan_train::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};

/// One row: median ms of `step` with fusion on and with it off, after a first, unkept round
/// of each that warms both paths up (pipelines, allocator, optimizer state).
fn row(name: &str, what: &str, size: &str, device: &Device, reps: usize, mut step: impl FnMut() -> Result<()>) -> Result<()> {
    crate::time(device, 2, 1, &mut step)?;
    no_fusion(|| crate::time(device, 2, 1, &mut step))?;
    let a = crate::time(device, 2, reps, &mut step)?;
    let b = no_fusion(|| crate::time(device, 2, reps, &mut step))?;
    println!("| {name} | {what} | {size} | {:.3} | {:.3} | {:.2}x |", a * 1e3, b * 1e3, b / a);
    Ok(())
}

fn nn_err(e: impl std::fmt::Display) -> Error {
    Error::Device(e.to_string())
}

/// Every row, on `device`; `quick` shrinks the lstm batch to 16 and the repetitions to 3.
pub fn bench_fusion(device: &Device, quick: bool) -> Result<()> {
    let name = if device.is_cpu() { "cpu".to_string() } else { format!("wgpu {}", device.backend().name()) };
    let reps = if quick { 3 } else { 10 };
    println!("| device | workload | size | fused ms | unfused ms | speedup |");
    println!("|---|---|---|---|---|---|");

    let spec = zoo::spec("lstm").map_err(nn_err)?;
    let mut shape = spec.input_shape.to_vec();
    if quick {
        shape[0] = shape[0].min(16);
    }
    let model = zoo::build("lstm", device).map_err(nn_err)?;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
    let y = Tensor::from_vec((0..shape[0] as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[shape[0]], device)?;
    row(&name, "lstm forward+backward", &format!("batch {}", shape[0]), device, reps, || {
        model.zero_grad();
        model.loss(&x, Some(&y)).map_err(nn_err)?.backward()
    })?;

    // resnet18's forward+backward in training: its 20 batch norms are its fused ops.
    let net = zoo::build("resnet18", device).map_err(nn_err)?;
    let batch = if quick { 16 } else { zoo::spec("resnet18").map_err(nn_err)?.input_shape[0] };
    let x = Tensor::rand(&[batch, 3, 32, 32], -1.0, 1.0, 8, DType::F32, device)?;
    let y = Tensor::from_vec((0..batch as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[batch], device)?;
    row(&name, "resnet18 forward+backward (batch norm)", &format!("batch {batch}"), device, reps, || {
        net.zero_grad();
        net.loss(&x, Some(&y)).map_err(nn_err)?.backward()
    })?;

    // The optimizer rows: resnet18's parameters with seeded gradients, stepped in place.
    let resnet = zoo::build("resnet18", device).map_err(nn_err)?;
    let params = resnet.named_parameters();
    for (k, (_, p)) in params.iter().enumerate() {
        p.set_grad(Some(Tensor::rand(p.shape(), -1.0, 1.0, 100 + k as u64, DType::F32, device)?));
    }
    let size = format!("{} tensors", params.len());
    let optimizers: [(&str, Box<dyn Optimizer>); 3] = [
        ("Adam step (resnet18)", Box::new(Adam::new(params.clone(), AdamConfig::adam(1e-3)).map_err(nn_err)?)),
        ("AdamW amsgrad step (resnet18)", Box::new(Adam::new(params.clone(), AdamConfig { amsgrad: true, ..AdamConfig::adamw(1e-3) }).map_err(nn_err)?)),
        (
            "SGD momentum + weight decay step (resnet18)",
            Box::new(Sgd::new(params.clone(), SgdConfig { lr: 0.1, momentum: 0.9, weight_decay: 5e-4, ..SgdConfig::default() }).map_err(nn_err)?),
        ),
    ];
    for (what, mut opt) in optimizers {
        row(&name, what, &size, device, reps, || opt.step().map_err(nn_err))?;
    }
    Ok(())
}
