//! `cargo xtask bench-fusion`: the zoo `lstm` model's forward+backward with fused kernels on
//! and off, in one process on one device, so a fused kernel's gain is measured against the
//! composite it replaces in the same run. Prints a Markdown table; asserts nothing.

use liandan_nn::{zoo, ModuleExt};
use liandan_tensor::{no_fusion, DType, Device, Error, Result, Tensor};

/// Median ms of the `lstm` forward+backward at its reference batch (16 with `quick`), with
/// fusion on and with it off.
pub fn bench_fusion(device: &Device, quick: bool) -> Result<()> {
    let name = if device.is_cpu() { "cpu".to_string() } else { format!("wgpu {}", device.backend().name()) };
    let spec = zoo::spec("lstm").map_err(|e| Error::Device(e.to_string()))?;
    let mut shape = spec.input_shape.to_vec();
    if quick {
        shape[0] = shape[0].min(16);
    }
    let model = zoo::build("lstm", device).map_err(|e| Error::Device(e.to_string()))?;
    let x = Tensor::rand(&shape, 0.0, 1.0, 7, DType::F32, device)?;
    let y = Tensor::from_vec((0..shape[0] as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[shape[0]], device)?;
    let step = || -> Result<()> {
        model.zero_grad();
        model.loss(&x, Some(&y)).map_err(|e| Error::Device(e.to_string()))?.backward()
    };
    let reps = if quick { 3 } else { 10 };
    // A first, unkept round warms both paths up (pipelines, allocator).
    crate::time(device, 2, 1, step)?;
    no_fusion(|| crate::time(device, 2, 1, step))?;
    let a = crate::time(device, 2, reps, step)?;
    let b = no_fusion(|| crate::time(device, 2, reps, step))?;
    println!("| device | model | batch | fused ms | unfused ms | speedup |");
    println!("|---|---|---|---|---|---|");
    println!("| {name} | lstm forward+backward | {} | {:.3} | {:.3} | {:.2}x |", shape[0], a * 1e3, b * 1e3, b / a);
    Ok(())
}
