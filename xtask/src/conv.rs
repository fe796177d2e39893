//! `cargo xtask bench-conv`: resnet18's convolutions (CIFAR, batch 128 unless `--batch`), and
//! the ImageNet ResNet's 7x7 stride-2 stem, with the fused implicit-GEMM kernels on and off:
//! forward alone, forward with the input gradient alone (weight frozen), with the weight
//! gradient alone (input frozen), and with both, in one process on one device: median ms and
//! the peak device memory each step holds beyond what was live before it. Strided layers also
//! run their input gradient without the phase decomposition (`without_conv_phases`, the kernel
//! before it). Then the whole resnet18 forward+backward the same way, and under the previous
//! cut of the kernels into tiles (`ConvCut::Previous`); then each pass alone under both cuts,
//! and with `--sweep` under every tile and split (`cut.rs`). Prints Markdown tables; asserts
//! nothing.

mod cut;

use liandan_backend_wgpu::{with_conv_cut, without_conv_phases, ConvCut};
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

/// `(s, MiB)` of `step` fused, fused without phases (`phases`: strided layers whose input
/// gradient is in the step), and unfused.
type Times = ((f64, f64), Option<(f64, f64)>, (f64, f64));

fn variants(device: &Device, reps: usize, phases: bool, mut step: impl FnMut() -> Result<()>) -> Result<Times> {
    let fused = measure(device, reps, &mut step)?;
    let unphased = if phases { Some(without_conv_phases(|| measure(device, reps, &mut step))?) } else { None };
    let unfused = no_fusion(|| measure(device, reps, &mut step))?;
    Ok((fused, unphased, unfused))
}

fn print(name: &str, what: &str, r: Times) {
    let ((a, am), unphased, (b, bm)) = r;
    let (p, ps) = match unphased {
        Some((p, _)) => (format!("{:.3}", p * 1e3), format!("{:.2}x", p / a)),
        None => ("-".into(), "-".into()),
    };
    println!("| {name} | {what} | {:.3} | {p} | {:.3} | {:.2}x | {ps} | {am:.1} | {bm:.1} |", a * 1e3, b * 1e3, b / a);
}

/// Every layer and the whole model on `device`, at `batch` in `dtype`; `quick`: 3 repetitions;
/// `sweep`: the table of every tile and split too.
pub fn bench_conv(device: &Device, batch: usize, dtype: DType, quick: bool, sweep: bool) -> Result<()> {
    let reps = if quick { 3 } else { 10 };
    println!("conv on {device} ({dtype}, batch {batch}): ms are medians; MiB is the peak held beyond what was live before the step");
    println!("(\"no phases\": the strided input gradient as one product over every tap; \"vs phases\": its ms over the fused ms)");
    println!();
    println!("| layer | pass | fused ms | fused ms, no phases | unfused ms | speedup | vs phases | fused peak MiB | unfused peak MiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for l in &LAYERS {
        let x = Tensor::randn(&[batch, l.c, l.hw, l.hw], 1, DType::F32, device)?.to_dtype(dtype)?;
        let w = Tensor::randn(&[l.o, l.c, l.k, l.k], 2, DType::F32, device)?.mul_scalar(0.05)?.to_dtype(dtype)?;
        let (s, p) = ((l.stride, l.stride), (l.k / 2, l.k / 2));
        let name = format!("{} {}->{} {}x{} k{} s{} (x{})", l.name, l.c, l.o, l.hw, l.hw, l.k, l.stride, l.count);
        print(&name, "forward", variants(device, reps, false, || no_grad(|| x.conv2d(&w, None, s, p, (1, 1), 1).map(drop)))?);
        let strided = l.stride > 1;
        for (what, dx, dw) in [("forward + dx", true, false), ("forward + dw", false, true), ("forward+backward", true, true)] {
            x.set_requires_grad(dx)?;
            w.set_requires_grad(dw)?;
            let r = variants(device, reps, strided && dx, || {
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
    let r = variants(device, reps, true, &mut step)?;
    print("resnet18 (f32)", "forward+backward", r);
    let ((auto, _), _, _) = r;
    println!();
    println!("resnet18 (f32) forward+backward under each cut of the convolutions (ms; ratio to the default):");
    println!();
    println!("| cut | ms | / default |");
    println!("|---|---|---|");
    println!("| default (auto) | {:.3} | 1.00x |", auto * 1e3);
    for cut in [ConvCut::Previous, ConvCut::Fill(512), ConvCut::Fill(1024)] {
        let (s, _) = with_conv_cut(cut, || measure(device, reps, &mut step))?;
        println!("| {cut:?} | {:.3} | {:.2}x |", s * 1e3, s / auto);
    }
    cut::bench_cuts(device, batch, dtype, reps, sweep)
}
