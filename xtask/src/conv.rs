//! `cargo xtask bench-conv`: resnet18's convolutions (CIFAR, batch 128 unless `--batch`), and
//! the ImageNet ResNet's 7x7 stride-2 stem, with the fused implicit-GEMM kernels on and off:
//! forward alone, forward with the input gradient alone (weight frozen), with the weight
//! gradient alone (input frozen), and with both, in one process on one device: median ms and
//! the peak device memory each step holds beyond what was live before it. Then the whole
//! resnet18 forward+backward the same way; then each pass alone, and with `--sweep` under every
//! tile and split (`cut.rs`); with `--cuts`, only the passes, and with `--only a,b` only the
//! passes of the layers whose names start so. Prints Markdown tables; asserts
//! nothing.

mod cut;

use liandan_nn::{zoo, ModuleExt};
use liandan_tensor::{no_fusion, no_grad, DType, Device, Error, Result, Tensor};

/// One layer shape: name, `C -> O` at `H x W`, kernel, stride, padding, how many in resnet18.
struct Layer {
    name: &'static str,
    c: usize,
    o: usize,
    hw: usize,
    k: usize,
    stride: usize,
    count: usize,
}

const LAYERS: [Layer; 11] = [
    Layer { name: "stem", c: 3, o: 64, hw: 32, k: 3, stride: 1, count: 1 },
    Layer { name: "ImageNet stem (not in the zoo)", c: 3, o: 64, hw: 224, k: 7, stride: 2, count: 0 },
    Layer { name: "layer1", c: 64, o: 64, hw: 32, k: 3, stride: 1, count: 4 },
    Layer { name: "layer2.0.conv1", c: 64, o: 128, hw: 32, k: 3, stride: 2, count: 1 },
    Layer { name: "layer2", c: 128, o: 128, hw: 16, k: 3, stride: 1, count: 3 },
    Layer { name: "layer3.0.conv1", c: 128, o: 256, hw: 16, k: 3, stride: 2, count: 1 },
    Layer { name: "layer3", c: 256, o: 256, hw: 8, k: 3, stride: 1, count: 3 },
    Layer { name: "layer4.0.conv1", c: 256, o: 512, hw: 8, k: 3, stride: 2, count: 1 },
    Layer { name: "layer4", c: 512, o: 512, hw: 4, k: 3, stride: 1, count: 3 },
    Layer { name: "shortcut 1x1 (layer2)", c: 64, o: 128, hw: 32, k: 1, stride: 2, count: 1 },
    Layer { name: "shortcut 1x1 (layer4)", c: 256, o: 512, hw: 8, k: 1, stride: 2, count: 1 },
];

/// Median seconds of `step` and the MiB it held at its peak beyond what was live before.
fn measure(device: &Device, reps: usize, step: &mut dyn FnMut() -> Result<()>) -> Result<(f64, f64)> {
    let secs = crate::time(device, 2, reps, &mut *step)?;
    let before = device.memory_stats().map(|m| m.in_use).unwrap_or(0);
    device.reset_peak_memory();
    step()?;
    device.synchronize()?;
    let peak = device.memory_stats().map(|m| m.peak.saturating_sub(before)).unwrap_or(0);
    Ok((secs, peak as f64 / (1 << 20) as f64))
}

/// `(s, MiB)` of `step` fused and unfused.
type Times = ((f64, f64), (f64, f64));

fn variants(device: &Device, reps: usize, mut step: impl FnMut() -> Result<()>) -> Result<Times> {
    let fused = measure(device, reps, &mut step)?;
    let unfused = no_fusion(|| measure(device, reps, &mut step))?;
    Ok((fused, unfused))
}

fn print(name: &str, what: &str, r: Times) {
    let ((a, am), (b, bm)) = r;
    println!("| {name} | {what} | {:.3} | {:.3} | {:.2}x | {am:.1} | {bm:.1} |", a * 1e3, b * 1e3, b / a);
}

/// What `bench-conv` times: `quick`, 3 repetitions (else 10); `sweep`, each pass under every
/// tile and split too; `cuts_only`, the passes alone (not the layers fused and unfused, nor the
/// model); `only`, the passes of the layers whose names start so (all where empty).
pub struct Parts {
    pub quick: bool,
    pub sweep: bool,
    pub cuts_only: bool,
    pub only: Vec<String>,
}

/// Every layer and the whole model on `device`, at `batch` in `dtype`, then each pass alone, as
/// `parts` says.
pub fn bench_conv(device: &Device, batch: usize, dtype: DType, parts: Parts) -> Result<()> {
    let Parts { quick, sweep, cuts_only, only } = parts;
    let reps = if quick { 3 } else { 10 };
    if cuts_only {
        return cut::bench_cuts(device, batch, dtype, reps, sweep, &only);
    }
    println!("conv on {device} ({dtype}, batch {batch}): ms are medians; MiB is the peak held beyond what was live before the step");
    println!();
    println!("| layer | pass | fused ms | unfused ms | speedup | fused peak MiB | unfused peak MiB |");
    println!("|---|---|---|---|---|---|---|");
    for l in &LAYERS {
        let x = Tensor::randn(&[batch, l.c, l.hw, l.hw], 1, DType::F32, device)?.to_dtype(dtype)?;
        let w = Tensor::randn(&[l.o, l.c, l.k, l.k], 2, DType::F32, device)?.mul_scalar(0.05)?.to_dtype(dtype)?;
        let (s, p) = ((l.stride, l.stride), (l.k / 2, l.k / 2));
        let name = format!("{} {}->{} {}x{} k{} s{} (x{})", l.name, l.c, l.o, l.hw, l.hw, l.k, l.stride, l.count);
        print(&name, "forward", variants(device, reps, || no_grad(|| x.conv2d(&w, None, s, p, (1, 1), 1).map(drop)))?);
        for (what, dx, dw) in [("forward + dx", true, false), ("forward + dw", false, true), ("forward+backward", true, true)] {
            x.set_requires_grad(dx)?;
            w.set_requires_grad(dw)?;
            let r = variants(device, reps, || {
                x.set_grad(None);
                w.set_grad(None);
                x.conv2d(&w, None, s, p, (1, 1), 1)?.sum_all()?.backward()
            })?;
            print(&name, what, r);
        }
    }
    let model = zoo::build("resnet18", device).map_err(|e| Error::Device(e.to_string()))?;
    let x = Tensor::randn(&[batch, 3, 32, 32], 3, DType::F32, device)?;
    let y = Tensor::from_vec((0..batch as i64).map(|i| i % 10).collect::<Vec<i64>>(), &[batch], device)?;
    let mut step = || {
        model.zero_grad();
        model.loss(&x, Some(&y)).map_err(|e| Error::Device(e.to_string()))?.backward()
    };
    print("resnet18 (f32)", "forward+backward", variants(device, reps, &mut step)?);
    cut::bench_cuts(device, batch, dtype, reps, sweep, &only)
}
