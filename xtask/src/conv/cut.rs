//! `cargo xtask bench-conv`'s cut tables: each layer's three passes timed alone (the fused
//! kernel asked of the backend directly, without autograd or the bias) under the rule's cut,
//! and with `--sweep` under every forced tile and split (`testing::Knobs::conv_cut`; in f16 and
//! bf16 the tensor cores' layouts and splits, `Knobs::coop_cut`), to choose from on a new GPU. Prints Markdown tables; asserts nothing.

use liandan_backend_wgpu::WgpuBackend;
use liandan_tensor::ops::{Conv2d, Conv2dBackwardInput, Conv2dBackwardWeight};
use liandan_tensor::{ConvGeometry, CustomKernel, DType, Device, Error, Result, Strided, Tensor};

use super::{Layer, LAYERS};

/// Passes run back to back per timed sample, so one synchronize does not dominate a small one.
const PER_SAMPLE: usize = 5;
/// The splits of K the sweep tries for each tile.
const SWEEP_SPLITS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// A layer's geometry at `batch`, as resnet18 pads it (k / 2).
fn geometry(l: &Layer, batch: usize) -> ConvGeometry {
    let (s, p) = ((l.stride, l.stride), (l.k / 2, l.k / 2));
    ConvGeometry { n: batch, c: l.c, h: l.hw, w: l.hw, o: l.o, kernel: (l.k, l.k), stride: s, padding: p, dilation: (1, 1), groups: 1 }
}

/// One pass and its operands: `(name, op, inputs)`.
type PassRun = (&'static str, Box<dyn CustomKernel>, [Tensor; 2]);

/// A layer's pass as the tables list it: `(layer, pass, op, inputs)`.
type Row = (String, &'static str, Box<dyn CustomKernel>, [Tensor; 2]);

fn passes(g: ConvGeometry, dtype: DType, device: &Device) -> Result<[PassRun; 3]> {
    let t = |shape: &[usize], seed| -> Result<Tensor> { Tensor::randn(shape, seed, DType::F32, device)?.mul_scalar(0.1)?.to_dtype(dtype) };
    let (x, w, dy) = (t(&g.input_shape(), 1)?, t(&g.weight_shape(), 2)?, t(&g.output_shape(), 3)?);
    Ok([
        ("forward", Box::new(Conv2d(g)), [x.clone(), w.clone()]),
        ("input grad", Box::new(Conv2dBackwardInput(g)), [dy.clone(), w]),
        ("weight grad", Box::new(Conv2dBackwardWeight(g)), [dy, x]),
    ])
}

/// Cuts every convolution on `device` as `cut` (`(tile, splits)`), or by the rule (`None`).
fn set_cut(device: &Device, cut: Option<(usize, usize)>) -> Result<()> {
    match WgpuBackend::of(device) {
        Some(backend) => {
            let mut options = backend.options();
            options.testing.conv_cut = cut;
            backend.set_options(options)
        }
        None => Err(Error::Device(format!("{device} has no cuts to force"))),
    }
}

/// Tiles of the tensor-core layouts (rows x columns) and the splits of K the coop sweep tries.
const COOP_TILES: [(usize, usize); 4] = [(64, 128), (128, 128), (128, 256), (256, 128)];
const COOP_SPLITS: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// The passes of `rows` on every tensor-core layout and split (`testing::Knobs::coop_cut`,
/// which keeps Winograd off), beside the rule's: the 3x3 layers from 64 channels, the passes
/// the tensor cores take. A layout's splits are tried from one up until one is slower than
/// the one before ("-" past it): a badly cut pass takes many times its best, and the whole
/// sweep would not fit a short lease of the GPU.
fn sweep_coop(device: &Device, rows: Vec<Row>, reps: usize) -> Result<()> {
    let cuts: Vec<((usize, usize), usize)> = COOP_TILES.iter().flat_map(|&t| COOP_SPLITS.iter().map(move |&s| (t, s))).collect();
    println!();
    println!("Sweep on the tensor cores: ms of each pass on R x C tiles with K split in S (RxC/S), and the rule's:");
    println!();
    let head: Vec<String> = cuts.iter().map(|((r, c), s)| format!("{r}x{c}/{s}")).collect();
    println!("| layer | pass | rule | {} | best |", head.join(" | "));
    println!("|---|---|---|{}---|", "---|".repeat(cuts.len()));
    // The tensor cores' passes: the 3x3 layers past the stem.
    for (name, what, op, inputs) in rows.into_iter().filter(|(name, ..)| name.contains(" k3 ") && !name.contains("stem")) {
        let rule = time_pass(device, &*op, &inputs, None, reps)?;
        let mut best = ("rule".to_string(), rule);
        let mut cells = Vec::with_capacity(cuts.len());
        // The last time on the same layout, and the layout whose splits stopped paying.
        let mut last: Option<((usize, usize), f64)> = None;
        let mut stopped: Option<(usize, usize)> = None;
        for (&cut, label) in cuts.iter().zip(&head) {
            if stopped == Some(cut.0) {
                cells.push("-".to_string());
                continue;
            }
            let prev = last.filter(|(tile, _)| *tile == cut.0).map(|(_, ms)| ms);
            crate::set_knobs(device, |k| k.coop_cut = Some(cut))?;
            let ms = time_pass(device, &*op, &inputs, None, reps);
            crate::set_knobs(device, |k| k.coop_cut = None)?;
            let ms = ms?;
            if ms < best.1 {
                best = (label.clone(), ms);
            }
            cells.push(format!("{ms:.3}"));
            if prev.is_some_and(|p| ms > p) {
                stopped = Some(cut.0);
            }
            last = Some((cut.0, ms));
        }
        println!("| {name} | {what} | {rule:.3} | {} | {} |", cells.join(" | "), best.0);
    }
    Ok(())
}

/// Median ms of one `op` on `inputs` under `cut` (the rule's where `None`).
fn time_pass(device: &Device, op: &dyn CustomKernel, inputs: &[Tensor], cut: Option<(usize, usize)>, reps: usize) -> Result<f64> {
    let storages: Vec<_> = inputs.iter().map(|t| t.storage()).collect();
    let views: Vec<Strided> = inputs.iter().zip(&storages).map(|(t, s)| Strided { storage: &**s, layout: t.layout(), dtype: t.dtype() }).collect();
    let mut run = || -> Result<()> {
        for _ in 0..PER_SAMPLE {
            match device.backend().custom(op, &views) {
                Some(r) => drop(r?),
                None => return Err(Error::Device(format!("{} has no fused kernel on {device}", op.name()))),
            }
        }
        Ok(())
    };
    if cut.is_some() {
        set_cut(device, cut)?;
    }
    let secs = crate::time(device, 2, reps, &mut run);
    if cut.is_some() {
        set_cut(device, None)?;
    }
    Ok(secs? * 1e3 / PER_SAMPLE as f64)
}

/// Every layer's passes under the rule's cut; with `sweep`, also under every tile and split of
/// `SWEEP_SPLITS`.
pub fn bench_cuts(device: &Device, batch: usize, dtype: DType, reps: usize, sweep: bool, only: &[String]) -> Result<()> {
    println!();
    println!("Each pass alone ({PER_SAMPLE} back to back per sample), cut by the rule:");
    println!();
    println!("| layer | pass | ms | GFLOP/s |");
    println!("|---|---|---|---|");
    let mut rows: Vec<Row> = Vec::new();
    for l in LAYERS.iter().filter(|l| only.is_empty() || only.iter().any(|o| l.name.starts_with(o.as_str()))) {
        let g = geometry(l, batch);
        let name = format!("{} {}->{} {}x{} k{} s{}", l.name, l.c, l.o, l.hw, l.hw, l.k, l.stride);
        for (what, op, inputs) in passes(g, dtype, device)? {
            // A pass the backend declines (its composite runs instead) has no cut to time.
            let ms = match time_pass(device, &*op, &inputs, None, reps) {
                Ok(ms) => ms,
                Err(e) => {
                    println!("| {name} | {what} | - | {e} |");
                    continue;
                }
            };
            println!("| {name} | {what} | {ms:.3} | {:.0} |", g.flops() as f64 / ms * 1e-6);
            rows.push((name.clone(), what, op, inputs));
        }
    }
    if !sweep {
        return Ok(());
    }
    if dtype != DType::F32 {
        return sweep_coop(device, rows, reps);
    }
    let variants: Vec<(usize, usize)> = [64, 128].iter().flat_map(|&t| SWEEP_SPLITS.iter().map(move |&s| (t, s))).collect();
    println!();
    println!("Sweep: ms of each pass with tiles of T x T and K split in S (TxS; a split is capped at one per 16-deep slice of K):");
    println!();
    let head: Vec<String> = variants.iter().map(|(t, s)| format!("{t}x{s}")).collect();
    println!("| layer | pass | {} | best |", head.join(" | "));
    println!("|---|---|{}---|", "---|".repeat(variants.len()));
    for (name, what, op, inputs) in rows {
        let mut ms = Vec::with_capacity(variants.len());
        for &(tile, splits) in &variants {
            ms.push(time_pass(device, &*op, &inputs, Some((tile, splits)), reps)?);
        }
        let best = (0..ms.len()).min_by(|&a, &b| ms[a].total_cmp(&ms[b])).unwrap_or(0);
        let cells: Vec<String> = ms.iter().map(|m| format!("{m:.3}")).collect();
        println!("| {name} | {what} | {} | {} |", cells.join(" | "), head[best]);
    }
    Ok(())
}
