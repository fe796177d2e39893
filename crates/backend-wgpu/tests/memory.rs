//! Memory stays flat over many identical training steps: after warm-up the caching
//! allocator serves every request from its pool; upload staging is counted and bounded. (A
//! test binary of its own, its tests one at a time, so no other test allocates meanwhile.)

use std::sync::Mutex;

use liandan_backend_wgpu::testing::UPLOAD_LIMIT;
use liandan_tensor::{no_grad, DType, Device, Reduction, Tensor};

/// Held by each test: they read the device's counters, which the other would move.
static ALONE: Mutex<()> = Mutex::new(());

mod common;
use common::gpu;

/// One SGD step of a small conv net: every kernel family allocates and frees on the way.
fn train_step(d: &Device, params: &[Tensor], x: &Tensor, y: &Tensor) {
    let h = x.conv2d(&params[0], Some(&params[1]), (1, 1), (1, 1), (1, 1), 1).unwrap().relu().unwrap();
    let h = h.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1)).unwrap().flatten(1usize, -1isize).unwrap();
    let logits = h.matmul(&params[2]).unwrap();
    let loss = logits.cross_entropy(y, Reduction::Mean).unwrap();
    loss.backward().unwrap();
    no_grad(|| {
        for p in params {
            let g = p.grad().unwrap();
            p.assign(&p.sub(&g.mul_scalar(0.01)?)?)?;
            p.set_grad(None);
        }
        liandan_tensor::Result::Ok(())
    })
    .unwrap();
    d.synchronize().unwrap();
}

#[test]
fn memory_stays_flat_over_training_steps() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let x = Tensor::randn(&[8, 3, 16, 16], 1, DType::F32, &d).unwrap();
    let y = Tensor::from_vec((0..8).map(|i| i % 10).collect::<Vec<i64>>(), &[8], &d).unwrap();
    let params = [
        Tensor::randn(&[4, 3, 3, 3], 2, DType::F32, &d).unwrap().mul_scalar(0.1).unwrap(),
        Tensor::zeros(&[4], DType::F32, &d).unwrap(),
        Tensor::randn(&[4 * 8 * 8, 10], 3, DType::F32, &d).unwrap().mul_scalar(0.05).unwrap(),
    ];
    for p in &params {
        p.set_requires_grad(true).unwrap();
    }
    for _ in 0..5 {
        train_step(&d, &params, &x, &y);
    }
    let warm = d.memory_stats().expect("the wgpu backend reports memory");
    for _ in 0..200 {
        train_step(&d, &params, &x, &y);
    }
    let after = d.memory_stats().unwrap();
    assert_eq!(after.allocations, warm.allocations, "buffers were created after warm-up: {warm:?} -> {after:?}");
    assert_eq!(after.in_use, warm.in_use, "memory in use grew: {warm:?} -> {after:?}");
    assert!(after.peak >= after.in_use && after.pooled > 0, "{after:?}");
    // Every kernel of an f32 training step ran on the GPU: nothing fell back to the CPU.
    assert_eq!(d.fallback_report(), vec![], "an f32 training step used the CPU fallback");
    d.empty_cache();
    assert_eq!(d.memory_stats().unwrap().pooled, 0);
}

#[test]
fn upload_staging_is_counted_and_bounded() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    d.synchronize().unwrap();
    // 1,000 uploads of 2 MiB with no read-back or synchronize: 2 GB through staging buffers.
    let data: Vec<f32> = (0..1 << 19).map(|i| i as f32).collect();
    let upload = (data.len() * 4) as u64;
    let mut most = 0;
    for _ in 0..1000 {
        let t = Tensor::from_slice(&data, &[data.len()], &d).unwrap();
        let staging = d.memory_stats().unwrap().staging;
        assert!(staging <= UPLOAD_LIMIT + upload, "{staging} bytes of upload staging, past the {UPLOAD_LIMIT}-byte bound");
        most = most.max(staging);
        drop(t);
    }
    assert!(most >= upload, "uploads were not counted: at most {most} bytes of staging");
    let last = Tensor::from_slice(&data, &[data.len()], &d).unwrap();
    assert_eq!(last.to_vec::<f32>().unwrap(), data, "the last upload arrived intact");
    assert_eq!(d.memory_stats().unwrap().staging, 0, "a read-back waits for every upload, releasing its staging");
}

/// The most bytes a convolution's forward and backward hold at once, beyond what was live
/// before it, with fused kernels on or off.
fn conv_step_peak(d: &Device, fused: bool) -> u64 {
    let x = Tensor::randn(&[8, 16, 32, 32], 4, DType::F32, d).unwrap();
    let w = Tensor::randn(&[16, 16, 3, 3], 5, DType::F32, d).unwrap().mul_scalar(0.1).unwrap();
    x.set_requires_grad(true).unwrap();
    w.set_requires_grad(true).unwrap();
    let step = || {
        let y = x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1)?;
        y.square()?.sum_all()?.backward()?;
        d.synchronize()
    };
    // A first step warms the pipelines and the pool; the second is measured.
    let run = |step: &dyn Fn() -> liandan_tensor::Result<()>| {
        step().unwrap();
        x.set_grad(None);
        w.set_grad(None);
        d.synchronize().unwrap();
        let before = d.memory_stats().unwrap().in_use;
        d.reset_peak_memory();
        step().unwrap();
        d.memory_stats().unwrap().peak - before
    };
    if fused {
        run(&step)
    } else {
        liandan_tensor::no_fusion(|| run(&step))
    }
}

/// Convolution without column buffers: the fused forward and backward hold far less than the
/// composite, whose im2col columns (9x the input here) dominate.
#[test]
fn fused_convolution_holds_no_column_buffer() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let fused = conv_step_peak(&d, true);
    let composite = conv_step_peak(&d, false);
    eprintln!("conv step peak: fused {fused} bytes, composite {composite} bytes");
    assert!(fused * 2 < composite, "a fused conv step peaked at {fused} bytes, the composite at {composite}: expected under half");
}

/// The graph keeps of each input only what its backward rule reads: after a forward whose
/// intermediates the caller dropped, a ReLU keeps its output, not its input or a mask, and a product by a
/// constant keeps the constant, not the other operand; the gradient is still exact. (A bool
/// is stored in 32 bits on this backend, so a mask would be as large as one f32 intermediate.)
#[test]
fn graph_keeps_only_what_backward_reads() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let (rows, cols) = (256, 1024);
    let bytes = (rows * cols * 4) as u64;
    let x = Tensor::randn(&[rows, cols], 6, DType::F32, &d).unwrap().requires_grad_(true).unwrap();
    let c = Tensor::randn(&[rows, cols], 7, DType::F32, &d).unwrap();
    let forward = || -> liandan_tensor::Result<Tensor> {
        // sin: reads its input (the leaf x); mul by c: keeps c only; relu: keeps its output; add: nothing.
        let r = x.sin()?.mul(&c)?.relu()?;
        r.add(&r)?.sum_all()
    };
    // A first pass warms the pipelines and the scalar constants.
    forward().unwrap().backward().unwrap();
    x.set_grad(None);
    d.synchronize().unwrap();
    let before = d.memory_stats().unwrap().in_use;
    let loss = forward().unwrap();
    d.synchronize().unwrap();
    let held = d.memory_stats().unwrap().in_use - before;
    // sin(x), sin(x) * c, the relu and the sum of two: four f32 tensors and the mask held
    // before; now the relu's output alone.
    assert!(held < bytes + bytes / 2, "the graph holds {held} bytes after the forward; its intermediates are {bytes} bytes each");
    loss.backward().unwrap();
    let (xs, cs, g) = (x.to_vec_f64().unwrap(), c.to_vec_f64().unwrap(), x.grad().unwrap().to_vec_f64().unwrap());
    for i in 0..xs.len() {
        let h = xs[i].sin() * cs[i];
        // Where f32 and f64 may disagree on the ReLU's side, either answer is right.
        if h.abs() < 1e-4 {
            continue;
        }
        let want = if h > 0.0 { 2.0 * cs[i] * xs[i].cos() } else { 0.0 };
        assert!((g[i] - want).abs() <= 1e-4 + 1e-4 * want.abs(), "grad[{i}] = {}, want {want}", g[i]);
    }
}

/// A ReLU whose output the caller keeps costs the graph nothing more: its rule reads that
/// output, so no mask (32 bits an element here) waits for backward.
#[test]
fn relu_keeps_no_mask() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let n = 256 * 1024;
    let x = Tensor::randn(&[n], 8, DType::F32, &d).unwrap().requires_grad_(true).unwrap();
    let forward = || -> liandan_tensor::Result<(Tensor, Tensor)> {
        let r = x.relu()?;
        let loss = r.sum_all()?;
        Ok((r, loss))
    };
    let (_, loss) = forward().unwrap();
    loss.backward().unwrap();
    x.set_grad(None);
    d.synchronize().unwrap();
    let before = d.memory_stats().unwrap().in_use;
    let (r, loss) = forward().unwrap();
    d.synchronize().unwrap();
    let held = d.memory_stats().unwrap().in_use - before;
    let bytes = (n * 4) as u64;
    assert!(held < bytes + bytes / 2, "relu and its graph hold {held} bytes; the output alone is {bytes}");
    loss.backward().unwrap();
    let (xs, g) = (x.to_vec_f64().unwrap(), x.grad().unwrap().to_vec_f64().unwrap());
    assert!(xs.iter().zip(&g).all(|(&x, &g)| g == if x > 0.0 { 1.0 } else { 0.0 }), "relu's gradient is 1 where x > 0, else 0");
    drop(r);
}

/// bf16 is held two elements to a word: half of f32's memory, for tensors and for op results;
/// the f32 words an op computes bf16 on are released when it returns.
#[test]
fn bf16_takes_two_bytes_an_element() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let cpu = Device::cpu();
    let n = 1 << 20;
    d.synchronize().unwrap();
    let in_use = || d.memory_stats().unwrap().in_use;
    let base = in_use();
    let a = Tensor::randn(&[n], 1, DType::F32, &d).unwrap();
    let f32_bytes = in_use() - base;
    let b = a.to_dtype(DType::BF16).unwrap();
    let bf16_bytes = in_use() - base - f32_bytes;
    assert_eq!(2 * bf16_bytes, f32_bytes, "a bf16 tensor of {n} elements holds {bf16_bytes} bytes");
    let c = b.add(&b).unwrap().mul(&b).unwrap().exp().unwrap();
    assert_eq!(in_use() - base, f32_bytes + 2 * bf16_bytes, "only b and c stay");
    // The CPU's bf16 arithmetic, within one bf16 rounding (the two exps differ in f32's last bits).
    let on_cpu = a.to_device(&cpu).unwrap().to_dtype(DType::BF16).unwrap();
    let want = on_cpu.add(&on_cpu).unwrap().mul(&on_cpu).unwrap().exp().unwrap().to_vec_f64().unwrap();
    let worst = c.to_vec_f64().unwrap().iter().zip(&want).map(|(g, w)| (g - w).abs() / w.abs().max(1e-30)).fold(0.0, f64::max);
    assert!(worst <= 1.0 / 128.0, "relative error {worst} against the CPU");
}

/// A large `x W^T` with its weight broadcast over a batch runs on one `[K, N]` copy of the
/// weight, not one a batch entry: a product of 3 x 1024 x 1024 outputs over K = 384 holds its
/// output and one 1.5 MiB copy beyond what was live, not three.
#[test]
fn a_broadcast_weight_is_copied_once() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let x = Tensor::randn(&[3, 1024, 384], 1, DType::F32, &d).unwrap();
    let w = Tensor::randn(&[1024, 384], 2, DType::F32, &d).unwrap();
    let wt = w.t().unwrap().unsqueeze(0).unwrap().expand(&[3, 384, 1024]).unwrap();
    // The first product warms the pipelines; the second is measured.
    drop(x.matmul(&wt).unwrap());
    d.synchronize().unwrap();
    let before = d.memory_stats().unwrap().in_use;
    d.reset_peak_memory();
    let y = x.matmul(&wt).unwrap();
    d.synchronize().unwrap();
    let held = d.memory_stats().unwrap().peak - before;
    let (out, copy) = (3 * 1024 * 1024 * 4, 384 * 1024 * 4);
    assert!(held <= out + copy, "held {held} bytes beyond what was live: want the output ({out}) and one copy ({copy})");
    drop(y);
}

/// Which pooled buffer an allocation gets depends on which ones are free, not on the order they
/// were freed in: a graph's tensors drop in a hash map's order, and a step that got other
/// buffers than the step before would make its bind groups again.
#[test]
fn a_step_finds_its_bind_groups_whatever_order_its_buffers_were_freed_in() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = gpu() else { return };
    let x = Tensor::full(&[1000], 1.0, DType::F32, &d).unwrap();
    // Six live results of one size class, then freed in the order given, then six again.
    let round = |order: [usize; 6]| {
        let made = liandan_backend_wgpu::testing::host_phases().bind_groups_made;
        let mut ys: Vec<Option<Tensor>> = (0..6).map(|i| Some(x.add_scalar(i as f64).unwrap())).collect();
        d.synchronize().unwrap();
        for i in order {
            ys[i] = None;
        }
        liandan_backend_wgpu::testing::host_phases().bind_groups_made - made
    };
    round([0, 1, 2, 3, 4, 5]);
    round([0, 1, 2, 3, 4, 5]);
    for order in [[5, 4, 3, 2, 1, 0], [2, 5, 0, 3, 1, 4], [1, 0, 3, 2, 5, 4]] {
        assert_eq!(round(order), 0, "bind groups made again after the buffers were freed in the order {order:?}");
    }
}
