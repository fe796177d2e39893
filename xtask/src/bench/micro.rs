//! Micro-benchmarks of one device (`xtask bench-micro`): the device's measured peak copy
//! bandwidth first, then matmul GFLOP/s at several square sizes (f32, and f16 on GPUs) and at the zoo's own shapes,
//! elementwise GB/s, a convolution and the time per dispatch, each row beside that peak.

use std::time::{Duration, Instant};

use liandan_tensor::{DType, Device, Result, Tensor};
use serde::{Deserialize, Serialize};

/// One micro-benchmark: median milliseconds of the timed repeats and the rate they give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MicroRow {
    pub bench: String,
    pub size: String,
    pub median_ms: f64,
    pub rate: f64,
    /// `GFLOP/s`, `GB/s` or `us/op`.
    pub unit: String,
}

/// A device's micro-benchmarks and its measured peak copy bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Micro {
    pub peak_copy_gbs: f64,
    pub rows: Vec<MicroRow>,
}

/// How long a GPU's warm-up goes on after the first run (which compiles the kernels): NVIDIA's
/// Vulkan driver runs a pipeline it has just compiled 3-5x slower for its first runs, as
/// `xtask bench`'s training steps found.
const GPU_WARM: Duration = Duration::from_secs(1);

/// Median seconds of `reps` runs of `f` after `warmup` runs (on a GPU, and more until
/// [`GPU_WARM`] has passed since the first), the device synchronized around each.
pub fn time(device: &Device, warmup: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut warm_since = None;
    for _ in 0..warmup {
        f()?;
        if warm_since.is_none() {
            // The first run compiles the kernels: the warm-up's time counts from its end.
            device.synchronize()?;
            warm_since = Some(Instant::now());
        }
    }
    device.synchronize()?;
    if let Some(since) = warm_since.filter(|_| !device.is_cpu()) {
        while since.elapsed() < GPU_WARM {
            f()?;
            device.synchronize()?;
        }
    }
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f()?;
        device.synchronize()?;
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

pub fn run(device: &Device, quick: bool) -> Result<Micro> {
    let reps = if quick { 3 } else { 10 };
    let mut rows = Vec::new();
    let mut row = |bench: &str, size: String, s: f64, rate: f64, unit: &str| {
        rows.push(MicroRow { bench: bench.into(), size, median_ms: s * 1e3, rate, unit: unit.into() })
    };
    // Peak copy: the best of a read-one-write-one kernel over sizes past any cache.
    let mut peak: f64 = 0.0;
    // The add below runs at the smaller size, so a cache-resident peak shows in both.
    for n in if quick { vec![1 << 20, 1 << 22] } else { vec![1 << 24, 1 << 26] } {
        let a = Tensor::randn(&[n], 1, DType::F32, device)?;
        let s = time(device, 2, reps, || a.mul_scalar(1.0).map(drop))?;
        let gbs = 2.0 * 4.0 * n as f64 / s / 1e9;
        peak = peak.max(gbs);
        row("copy (x * 1: read 1, write 1)", n.to_string(), s, gbs, "GB/s");
    }
    // A transpose materialized (`contiguous()` of `t()`): what a strided copy costs against the
    // plain one above, at a power-of-two width (every row of a tile in one cache set).
    let n = if quick { 1024 } else { 4096 };
    let a = Tensor::randn(&[n, n], 1, DType::F32, device)?.t()?;
    let s = time(device, 2, reps, || a.contiguous().map(drop))?;
    row("transposed copy (t().contiguous())", format!("{n}x{n}"), s, 2.0 * 4.0 * (n * n) as f64 / s / 1e9, "GB/s");
    let sizes: &[usize] = if quick { &[128, 256, 512] } else { &[256, 1024, 2048, 4096] };
    for &n in sizes {
        let a = Tensor::randn(&[n, n], 1, DType::F32, device)?;
        let b = Tensor::randn(&[n, n], 2, DType::F32, device)?;
        let s = time(device, 2, reps, || a.matmul(&b).map(drop))?;
        row("matmul f32", format!("{n}x{n}x{n}"), s, 2.0 * (n as f64).powi(3) / s / 1e9, "GFLOP/s");
    }
    if !device.is_cpu() {
        for r in matmul_f16(device, quick)? {
            row(&r.bench, r.size, r.median_ms / 1e3, r.rate, &r.unit);
        }
    }
    // The zoo's own products, at its reference batches: Linear layers multiply by the weight
    // read transposed (`x W^T`), their weight gradient reads the output gradient transposed,
    // LSTM's recurrent step is skinny, ViT's attention is a batch of small products. Timed 20
    // in a row between waits, as a step runs them (one synchronize costs more than most of
    // them), and as `xtask/bench_torch.py --matmul` times PyTorch's.
    const ROW: usize = 20;
    for (bench, [batch, m, k, n], layout) in ZOO_PRODUCTS {
        let (a, b) = layout.make(device, [batch, m, k, n])?;
        let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.matmul(&b).map(drop)))? / ROW as f64;
        let size = format!("{}[{m},{k}]x[{k},{n}]{}", if batch > 1 { format!("{batch}x") } else { String::new() }, layout.note());
        row(&format!("{bench}, {ROW} between waits"), size, s, 2.0 * (batch * m * k * n) as f64 / s / 1e9, "GFLOP/s");
    }
    let n = if quick { 1 << 20 } else { 1 << 24 };
    let a = Tensor::randn(&[n], 3, DType::F32, device)?;
    let b = Tensor::randn(&[n], 4, DType::F32, device)?;
    let s = time(device, 2, reps, || a.add(&b).map(drop))?;
    row("add f32 (read 2, write 1)", n.to_string(), s, 3.0 * 4.0 * n as f64 / s / 1e9, "GB/s");
    // The same kernels without a synchronize each (which costs a GPU tens of microseconds, a
    // third of a 16M add): 20 in a row, one wait. What a training step's elementwise ops see,
    // and what CUDA-event timings of PyTorch's kernels measure.
    let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.add(&b).map(drop)))? / ROW as f64;
    row("add f32 (read 2, write 1), 20 between waits", n.to_string(), s, 3.0 * 4.0 * n as f64 / s / 1e9, "GB/s");
    if !device.is_cpu() {
        // The same add on f16 operands (mixed precision's activations), 2 bytes an element.
        let (a, b) = (a.to_dtype(DType::F16)?, b.to_dtype(DType::F16)?);
        let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.add(&b).map(drop)))? / ROW as f64;
        row("add f16 (read 2, write 1), 20 between waits", n.to_string(), s, 3.0 * 2.0 * n as f64 / s / 1e9, "GB/s");
        // Autocast's casts: f32 to f16 (a weight or an input into a product) and back.
        let b32 = b.to_dtype(DType::F32)?;
        let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| b32.to_dtype(DType::F16).map(drop)))? / ROW as f64;
        row("cast f32 -> f16 (read 4, write 2 bytes), 20 between waits", n.to_string(), s, 6.0 * n as f64 / s / 1e9, "GB/s");
        let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.to_dtype(DType::F32).map(drop)))? / ROW as f64;
        row("cast f16 -> f32 (read 2, write 4 bytes), 20 between waits", n.to_string(), s, 6.0 * n as f64 / s / 1e9, "GB/s");
    }
    let big = if quick { 1 << 22 } else { 1 << 26 };
    let c = Tensor::randn(&[big], 5, DType::F32, device)?;
    let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| c.mul_scalar(1.0).map(drop)))? / ROW as f64;
    row("copy (x * 1), 20 between waits", big.to_string(), s, 2.0 * 4.0 * big as f64 / s / 1e9, "GB/s");
    // Reductions against that copy (the goal: 80% of its rate): the whole tensor to one
    // value, and along the rows of a matrix (a loss's or a norm's sums) and down its columns
    // (a bias gradient's), 20 between waits; bytes read only.
    let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| c.sum_all().map(drop)))? / ROW as f64;
    row("sum f32 (read 1), 20 between waits", big.to_string(), s, 4.0 * big as f64 / s / 1e9, "GB/s");
    let (rows_, cols) = if quick { (1 << 10, 1 << 12) } else { (1 << 12, 1 << 14) };
    let m = c.narrow(0usize, 0, rows_ * cols)?.reshape(&[rows_, cols])?;
    for (dim, what) in [(1usize, "sum f32 along rows (read 1), 20 between waits"), (0, "sum f32 down columns (read 1), 20 between waits")] {
        let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| m.sum(&[dim], false).map(drop)))? / ROW as f64;
        row(what, format!("{rows_}x{cols}"), s, 4.0 * (rows_ * cols) as f64 / s / 1e9, "GB/s");
    }

    // mnist_cnn's second convolution at batch 64 (16 in --quick): 32 to 64 channels, 3x3, 26x26 in.
    let batch = if quick { 16 } else { 64 };
    let x = Tensor::randn(&[batch, 32, 26, 26], 5, DType::F32, device)?;
    let w = Tensor::randn(&[64, 32, 3, 3], 6, DType::F32, device)?;
    let s = time(device, 2, reps, || x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1).map(drop))?;
    let flops = 2.0 * (batch * 64 * 24 * 24 * 32 * 9) as f64;
    row("conv2d f32 32->64 k3", format!("{batch}x32x26x26"), s, flops / s / 1e9, "GFLOP/s");

    // Per-dispatch overhead: a chain of dependent adds on one element, waited for once.
    let chain = 1000;
    let x = Tensor::zeros(&[1], DType::F32, device)?;
    let s = time(device, 2, reps, || {
        let mut y = x.clone();
        for _ in 0..chain {
            y = y.add_scalar(1.0)?;
        }
        Ok(())
    })?;
    row("dependent tiny adds", format!("{chain} ops"), s, s * 1e6 / chain as f64, "us/op");

    // What a loss read-back costs, and a wait with nothing to wait for (each timed run ends in
    // one more synchronize, as the PyTorch side's does): the gap between synced and pipelined
    // training steps.
    let s = time(device, 2, 10 * reps, || x.add_scalar(1.0)?.item_f64().map(drop))?;
    row("add + read back one value", "1".into(), s, s * 1e6, "us");
    let s = time(device, 2, 10 * reps, || device.synchronize())?;
    row("synchronize, nothing pending", "-".into(), s, s * 1e6, "us");
    Ok(Micro { peak_copy_gbs: peak, rows })
}

/// f16 square products (f16 in, f32 sums, f16 out), named after the path the device takes:
/// tensor cores (cooperative matrices, with the device's variant) where it has them, else the
/// ordinary kernels. `cargo xtask bench` also runs these rows alone in a child with `LIANDAN_COOP_MATRIX=0`, to put the
/// ordinary kernels beside the tensor cores in one run (`bench-micro --f16-matmul`).
pub fn matmul_f16(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    let reps = if quick { 3 } else { 10 };
    let path = device.describe().into_iter().find(|(k, _)| k == "f16 matmul").map(|(_, v)| v).unwrap_or_default();
    // Products under the tensor cores' threshold ("from 2^N operations") stay on the ordinary kernels.
    let from = path.split("from 2^").nth(1).and_then(|v| v.split(' ').next()?.parse::<i32>().ok());
    let path = if path.starts_with("tensor cores") {
        // "tensor cores from 2^N operations (cooperative matrices, variant NAME; ...)": the device's variant.
        match path.split("variant ").nth(1).and_then(|v| v.split(';').next()) {
            Some(v) => format!("tensor cores, {v}"),
            None => "tensor cores".into(),
        }
    } else if path.contains("LIANDAN_COOP_MATRIX=0") {
        "ordinary kernels, LIANDAN_COOP_MATRIX=0".into()
    } else {
        "ordinary kernels".into()
    };
    let mut rows = Vec::new();
    let (sizes, transposed) = if quick { (&[256, 512][..], 512) } else { (&[1024, 2048, 4096, 8192][..], 4096) };
    // The square products, then one with a transposed rhs (a Linear layer's `x W^T`).
    let cases = sizes.iter().map(|&n| (n, false)).chain([(transposed, true)]);
    for (n, rhs_t) in cases {
        let a = Tensor::randn(&[n, n], 1, DType::F32, device)?.to_dtype(DType::F16)?;
        let b = Tensor::randn(&[n, n], 2, DType::F32, device)?.to_dtype(DType::F16)?;
        let b = if rhs_t { b.transpose(0, 1)? } else { b };
        let s = time(device, 2, reps, || a.matmul(&b).map(drop))?;
        let rate = 2.0 * (n as f64).powi(3) / s / 1e9;
        let note = if rhs_t { " rhs^T" } else { "" };
        let path = if from.is_some_and(|e| 2.0 * (n as f64).powi(3) < 2f64.powi(e)) { "ordinary kernels, below the tensor cores' size" } else { &path };
        rows.push(MicroRow { bench: format!("matmul f16{note} ({path})"), size: format!("{n}x{n}x{n}"), median_ms: s * 1e3, rate, unit: "GFLOP/s".into() });
    }
    Ok(rows)
}

/// ViT's attention products (`[B, 65, 64] x [B, 65, 64]^T` and `[B, 65, 65] x [B, 65, 64]`)
/// at batches from 1 to 384 heads, 20 between waits (`bench-micro --heads`): where a batch of
/// small products is better one 80 x 80 tile a product (`shaders/matmul/heads.wgsl`) than on
/// the tiled kernel (the batches under 80 take the tiled kernel, the rest the one-tile kernel).
pub fn heads(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    let reps = if quick { 3 } else { 10 };
    const ROW: usize = 20;
    let mut rows = Vec::new();
    let batches: &[usize] = if quick { &[1, 16] } else { &[1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128, 384] };
    for &batch in batches {
        for (bench, [m, k, n], layout) in [("vit attention QK^T", [65, 64, 65], Operands::RhsT), ("vit attention AV", [65, 65, 64], Operands::Plain)] {
            let (a, b) = layout.make(device, [batch, m, k, n])?;
            let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.matmul(&b).map(drop)))? / ROW as f64;
            let size = format!("{batch}x[{m},{k}]x[{k},{n}]{}", layout.note());
            let rate = 2.0 * (batch * m * k * n) as f64 / s / 1e9;
            rows.push(MicroRow { bench: format!("matmul f32 {bench}, {ROW} between waits"), size, median_ms: s * 1e3, rate, unit: "GFLOP/s".into() });
        }
    }
    Ok(rows)
}

/// vit's MLP product (`[8320, K] x [768, K]^T`, and with the weight stored `[K, 768]`) at depths
/// K from 64 to 3,072, 20 between waits, then the 4096^3 f32 product in each orientation of its
/// operands (`bench-micro --short-k`): what a short K and a transposed operand cost the tiled
/// kernel, whose tiles each stage K / 16 slices between their first fetch and their stores.
pub fn short_k(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    let reps = if quick { 3 } else { 10 };
    const ROW: usize = 20;
    let (m, n) = if quick { (256, 128) } else { (8320, 768) };
    let mut rows = Vec::new();
    // Each depth with the weight read transposed (as the layer reads it) and, to compare, stored
    // [K, N].
    for k in [64, 192, 384, 768, 1536, 3072] {
        for layout in [Operands::RhsT, Operands::Plain] {
            let a = Tensor::randn(&[m, k], 7, DType::F32, device)?;
            let b = match layout {
                Operands::RhsT => Tensor::randn(&[n, k], 8, DType::F32, device)?.t()?,
                _ => Tensor::randn(&[k, n], 8, DType::F32, device)?,
            };
            let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| a.matmul(&b).map(drop)))? / ROW as f64;
            let rate = 2.0 * (m * k * n) as f64 / s / 1e9;
            let (bench, size) = (format!("matmul f32 vit mlp fc1 at other depths, {ROW} between waits"), format!("[{m},{k}]x[{k},{n}]{}", layout.note()));
            rows.push(MicroRow { bench, size, median_ms: s * 1e3, rate, unit: "GFLOP/s".into() });
        }
    }
    // The square f32 product in each orientation of its operands.
    let n = if quick { 256 } else { 4096 };
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let a = if ta { Tensor::randn(&[n, n], 1, DType::F32, device)?.t()? } else { Tensor::randn(&[n, n], 1, DType::F32, device)? };
        let b = if tb { Tensor::randn(&[n, n], 2, DType::F32, device)?.t()? } else { Tensor::randn(&[n, n], 2, DType::F32, device)? };
        let s = time(device, 2, reps, || a.matmul(&b).map(drop))?;
        let note = format!("{}{}", if ta { " lhs^T" } else { "" }, if tb { " rhs^T" } else { "" });
        let (size, rate) = (format!("{n}x{n}x{n}{note}"), 2.0 * (n as f64).powi(3) / s / 1e9);
        rows.push(MicroRow { bench: "matmul f32".into(), size, median_ms: s * 1e3, rate, unit: "GFLOP/s".into() });
    }
    Ok(rows)
}

/// vit's linear layers in f16 as its step runs them, over 128 x 65 tokens, 20 between waits
/// (`bench-micro --vit-f16`): each layer's forward `x W^T + b`, the same product without the
/// bias, and with the weight stored `[K, N]` (as the backward's `dy W` reads it): what the
/// weight's orientation and the bias cost the tensor cores' kernel at these short depths. Then
/// each layer's bias gradient, the rows of `dy` summed: f32, and f16 summed into f32, on the
/// column kernel and on the tree reduction (GB/s read).
pub fn vit_f16(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    let reps = if quick { 3 } else { 10 };
    const ROW: usize = 20;
    let m = if quick { 256 } else { 8320 };
    let mut rows = Vec::new();
    for (layer, k, n) in [("qkv", 192, 576), ("out", 192, 192), ("fc1", 192, 768), ("fc2", 768, 192)] {
        let low = |shape: &[usize], seed| Tensor::randn(shape, seed, DType::F32, device)?.to_dtype(DType::F16);
        let (x, w, bias, wt) = (low(&[m, k], 7)?, low(&[n, k], 8)?, low(&[n], 9)?, low(&[k, n], 10)?);
        let cases: [(&str, &dyn Fn() -> Result<Tensor>); 3] =
            [("x W^T + b", &|| x.linear(&w, Some(&bias))), ("x W^T", &|| x.matmul(&w.t()?)), ("x W, W stored [K, N]", &|| x.matmul(&wt))];
        for (what, f) in cases {
            let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| f().map(drop)))? / ROW as f64;
            let rate = 2.0 * (m * k * n) as f64 / s / 1e9;
            let bench = format!("matmul f16 vit {layer}: {what}, {ROW} between waits");
            rows.push(MicroRow { bench, size: format!("[{m},{k}]x[{k},{n}]"), median_ms: s * 1e3, rate, unit: "GFLOP/s".into() });
        }
    }
    for (layer, n) in [("qkv", 576), ("out", 192), ("fc1", 768), ("fc2", 192)] {
        let dy = Tensor::randn(&[m, n], 11, DType::F32, device)?;
        let low = dy.to_dtype(DType::F16)?;
        for (what, bytes) in [("f32", 4), ("f16 into f32", 2)] {
            let f = || -> Result<Tensor> {
                match bytes {
                    4 => dy.sum(&[0], false),
                    _ => liandan_tensor::fused::run_or_composite(&liandan_tensor::ops::SumRowsWide, &[&low]).map(|mut o| o.remove(0)),
                }
            };
            for tree in [false, true] {
                crate::set_knobs(device, |k| k.tree_column_sums = tree)?;
                let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| f().map(drop)))? / ROW as f64;
                let kernel = if tree { "tree" } else { "column kernel" };
                let bench = format!("bias gradient {what} vit {layer}, {kernel}, {ROW} between waits");
                rows.push(MicroRow { bench, size: format!("[{m},{n}]"), median_ms: s * 1e3, rate: (bytes * m * n) as f64 / s / 1e9, unit: "GB/s".into() });
            }
        }
    }
    crate::set_knobs(device, |k| k.tree_column_sums = false)?;
    Ok(rows)
}

/// vit's attention as its step runs it (`bench-micro --attention`): the fused forward and
/// backward over 128 x 3 heads of 65 tokens, 64 wide, 20 between waits, in f32 (its backward
/// on each spread of workgroups a head, `Knobs::attention_sides`) and f16; a row's rate counts
/// the products' operations (two forward, four backward).
pub fn attention(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    use liandan_tensor::{fused::run_or_composite, ops};
    let reps = if quick { 3 } else { 10 };
    const ROW: usize = 20;
    let mut rows = Vec::new();
    let n = if quick { 4 } else { 128 };
    let heads = [n, 3, 65, 64];
    let product = 2.0 * (n * 3 * 65 * 65 * 64) as f64;
    let scale = 0.125;
    for dtype in [DType::F32, DType::F16] {
        let t = |shape: &[usize], seed| Tensor::randn(shape, seed, DType::F32, device)?.to_dtype(dtype);
        let (q, k, v, g) = (t(&heads, 12)?, t(&heads, 13)?, t(&heads, 14)?, t(&[n, 65, 3, 64], 15)?);
        let p = t(&[n, 3, 65, 65], 16)?.softmax(-1isize)?;
        let mut row = |what: &str, flops: f64, f: &dyn Fn() -> Result<Vec<Tensor>>| -> Result<()> {
            let s = time(device, 1, reps, || (0..ROW).try_for_each(|_| f().map(drop)))? / ROW as f64;
            let bench = format!("attention {dtype} vit {what}, {ROW} between waits");
            rows.push(MicroRow { bench, size: format!("{heads:?}"), median_ms: s * 1e3, rate: flops / s / 1e9, unit: "GFLOP/s".into() });
            Ok(())
        };
        row("forward", 2.0 * product, &|| run_or_composite(&ops::Attention { scale }, &[&q, &k, &v]))?;
        let spreads: &[Option<u32>] = if dtype == DType::F32 { &[None, Some(1), Some(2), Some(3)] } else { &[None] };
        for &sides in spreads {
            crate::set_knobs(device, |k| k.attention_sides = sides)?;
            let what = match sides {
                None => "backward, the gradients joined".to_string(),
                Some(1) => "backward, the gradients joined, 1 workgroup a head".to_string(),
                Some(s) => format!("backward, the gradients joined, {s} workgroups a head"),
            };
            row(&what, 4.0 * product, &|| run_or_composite(&ops::AttentionBackwardJoined { scale }, &[&q, &k, &v, &g, &p]))?;
        }
        crate::set_knobs(device, |k| k.attention_sides = None)?;
    }
    Ok(rows)
}

/// vit's f16 products under each layout of the tensor cores' kernel and splits of K, beside
/// the rule's choice, 20 between waits (`bench-micro --vit-f16-cuts`): each linear layer's
/// forward `x W^T`, its input gradient `dy W` and its weight gradient `dy^T x`, where few
/// tiles of a short K leave much of the GPU idle. A row's rate is its GFLOP/s; a cut whose
/// result is not the rule's (beyond f16's rounding of its sums) fails the run.
pub fn vit_f16_cuts(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    const ROW: usize = 20;
    const TILES: [(usize, usize); 4] = [(64, 128), (128, 128), (128, 256), (256, 128)];
    let reps = if quick { 2 } else { 7 };
    let m = if quick { 256 } else { 8320 };
    let low = |shape: &[usize], seed| Tensor::randn(shape, seed, DType::F32, device)?.to_dtype(DType::F16);
    // (name, a, b, the splits to try): `None` in a cut is the rule's.
    let mut cases: Vec<(String, Tensor, Tensor, Vec<usize>)> = Vec::new();
    for (layer, k, n) in [("qkv", 192, 576), ("out", 192, 192), ("fc1", 192, 768), ("fc2", 768, 192)] {
        let (x, w, dy) = (low(&[m, k], 7)?, low(&[n, k], 8)?, low(&[m, n], 9)?);
        let short = |depth: usize| (1..=4).filter(|s| depth / s >= 64).collect::<Vec<_>>();
        cases.push((format!("{layer} x W^T"), x.clone(), w.t()?, short(k)));
        cases.push((format!("{layer} dy W"), dy.clone(), w.clone(), short(n)));
        cases.push((format!("{layer} dy^T x"), dy.t()?, x.clone(), if quick { vec![1, 2] } else { vec![8, 16, 24, 32, 48] }));
    }
    let cuts = |splits: &[usize]| std::iter::once(None).chain(TILES.iter().flat_map(|&t| splits.iter().map(move |&s| Some((t, s))))).collect::<Vec<_>>();
    let run = |a: &Tensor, b: &Tensor, cut| -> Result<Tensor> {
        crate::set_knobs(device, |k| k.coop_cut = cut)?;
        a.matmul(b)
    };
    // Every kernel compiled, then the GPU kept busy a while before the first timing (a new
    // pipeline runs slowly for its first calls; an idle GPU clocks down).
    let start = Instant::now();
    let mut first = true;
    while first || (!device.is_cpu() && start.elapsed() < GPU_WARM) {
        for (_, a, b, splits) in &cases {
            for cut in cuts(splits) {
                run(a, b, cut)?;
            }
        }
        device.synchronize()?;
        first = false;
    }
    let mut rows = Vec::new();
    for (name, a, b, splits) in &cases {
        let expected = run(a, b, None)?.to_dtype(DType::F32)?;
        for cut in cuts(splits) {
            same_as_rule(&run(a, b, cut)?, &expected, || format!("vit {name} on cut {cut:?}"))?;
            let mut samples = Vec::with_capacity(reps);
            for _ in 0..reps {
                let t = Instant::now();
                for _ in 0..ROW {
                    run(a, b, cut)?;
                }
                device.synchronize()?;
                samples.push(t.elapsed().as_secs_f64() / ROW as f64);
            }
            samples.sort_by(f64::total_cmp);
            let s = samples[samples.len() / 2];
            let (rows_, depth, cols) = (a.shape()[0], a.shape()[1], b.shape()[1]);
            let what = cut.map_or("the rule".to_string(), |((tm, tn), k)| format!("{tm}x{tn} /{k}"));
            rows.push(MicroRow {
                bench: format!("matmul f16 vit {name}: {what}, {ROW} between waits"),
                size: format!("[{rows_},{depth}]x[{depth},{cols}]"),
                median_ms: s * 1e3,
                rate: 2.0 * (rows_ * depth * cols) as f64 / s / 1e9,
                unit: "GFLOP/s".into(),
            });
        }
    }
    crate::set_knobs(device, |k| k.coop_cut = None)?;
    Ok(rows)
}

/// An error unless the f16 product `got` (on a cut of the tensor cores' kernel, named by
/// `what`) matches the rule's, `expected` (in f32), within f16's rounding of its sums.
fn same_as_rule(got: &Tensor, expected: &Tensor, what: impl FnOnce() -> String) -> Result<()> {
    let scale = expected.abs()?.max_all()?.to_vec::<f32>()?[0].max(1.0);
    let off = got.to_dtype(DType::F32)?.sub(expected)?.abs()?.max_all()?.to_vec::<f32>()?[0];
    if off.is_nan() || off > 4e-3 * scale {
        return Err(liandan_tensor::Error::Backend { backend: "wgpu".into(), op: "matmul", detail: format!("{}: off by {off} of {scale}", what()) });
    }
    Ok(())
}

/// Large f16 products on each layout of the tensor cores' kernel, beside the rule's choice
/// (`bench-micro --f16-tiles`): the squares of 4096 and 8192 and 4096 with a transposed rhs,
/// on 128 x 128 (`prefetch`), 128 x 256 (`many`) and 256 x 128 (`tall`) tiles, K whole. A
/// layout whose result is not the rule's (beyond f16's rounding of its sums) fails the run.
pub fn matmul_f16_tiles(device: &Device, quick: bool) -> Result<Vec<MicroRow>> {
    const TILES: [(usize, usize); 3] = [(128, 128), (128, 256), (256, 128)];
    let reps = if quick { 3 } else { 10 };
    let cases: &[(usize, bool)] = if quick { &[(512, false), (512, true)] } else { &[(4096, false), (8192, false), (4096, true)] };
    let mut rows = Vec::new();
    for &(n, rhs_t) in cases {
        let a = Tensor::randn(&[n, n], 1, DType::F32, device)?.to_dtype(DType::F16)?;
        let b = Tensor::randn(&[n, n], 2, DType::F32, device)?.to_dtype(DType::F16)?;
        let b = if rhs_t { b.transpose(0, 1)? } else { b };
        let run = |cut| -> Result<Tensor> {
            crate::set_knobs(device, |k| k.coop_cut = cut)?;
            a.matmul(&b)
        };
        let expected = run(None)?.to_dtype(DType::F32)?;
        for cut in std::iter::once(None).chain(TILES.iter().map(|&t| Some((t, 1)))) {
            same_as_rule(&run(cut)?, &expected, || format!("{n}^3 on cut {cut:?}"))?;
            let s = time(device, 2, reps, || run(cut).map(drop))?;
            let what = cut.map_or("the rule".to_string(), |((tm, tn), _)| format!("{tm}x{tn}"));
            let note = if rhs_t { " rhs^T" } else { "" };
            rows.push(MicroRow {
                bench: format!("matmul f16{note}: {what}"),
                size: format!("{n}x{n}x{n}"),
                median_ms: s * 1e3,
                rate: 2.0 * (n as f64).powi(3) / s / 1e9,
                unit: "GFLOP/s".into(),
            });
        }
    }
    crate::set_knobs(device, |k| k.coop_cut = None)?;
    Ok(rows)
}

/// How the operands of a product are stored.
#[derive(Clone, Copy)]
enum Operands {
    Plain,
    /// The left operand is a transposed view (a Linear layer's weight gradient, `dy^T x`).
    LhsT,
    /// The right operand is a transposed view (a Linear layer's forward, `x W^T`).
    RhsT,
}

impl Operands {
    fn note(self) -> &'static str {
        match self {
            Operands::Plain => "",
            Operands::LhsT => " lhs^T",
            Operands::RhsT => " rhs^T",
        }
    }

    /// Random `[batch, m, k]` and `[batch, k, n]` operands stored as `self` says (a transposed
    /// one as the transposed view of its `[batch, k, m]` or `[batch, n, k]`).
    fn make(self, device: &Device, [batch, m, k, n]: [usize; 4]) -> Result<(Tensor, Tensor)> {
        let a = match self {
            Operands::LhsT => Tensor::randn(&[batch, k, m], 7, DType::F32, device)?.transpose(1, 2)?,
            _ => Tensor::randn(&[batch, m, k], 7, DType::F32, device)?,
        };
        let b = match self {
            Operands::RhsT => Tensor::randn(&[batch, n, k], 8, DType::F32, device)?.transpose(1, 2)?,
            _ => Tensor::randn(&[batch, k, n], 8, DType::F32, device)?,
        };
        Ok((a, b))
    }
}

/// `(bench, [batch, M, K, N], operands)` of the zoo's products, at the zoo's batches
/// (`docs/MODEL_ZOO.md`): mlp's 1024-512 layer at 1024, vit's 3 heads of 128 images, its
/// encoder's MLP over 128 x 65 tokens and that layer's weight gradient (K the 8,320 tokens).
const ZOO_PRODUCTS: [(&str, [usize; 4], Operands); 10] = [
    ("matmul f32 mnist_cnn fc1", [1, 64, 9216, 128], Operands::RhsT),
    ("matmul f32 mnist_cnn fc1 dW", [1, 128, 64, 9216], Operands::LhsT),
    ("matmul f32 mlp fc1", [1, 1024, 1024, 512], Operands::RhsT),
    ("matmul f32 lstm step", [1, 64, 256, 1024], Operands::RhsT),
    ("matmul f32 lstm dW", [1, 1024, 64, 256], Operands::LhsT),
    ("matmul f32 vit attention QK^T", [384, 65, 64, 65], Operands::RhsT),
    ("matmul f32 vit attention AV", [384, 65, 65, 64], Operands::Plain),
    ("matmul f32 vit mlp fc1", [1, 8320, 192, 768], Operands::RhsT),
    ("matmul f32 vit mlp fc2", [1, 8320, 768, 192], Operands::RhsT),
    ("matmul f32 vit mlp fc1 dW", [1, 768, 8320, 192], Operands::LhsT),
];
