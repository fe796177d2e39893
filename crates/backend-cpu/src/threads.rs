//! Running a caller's whole loop on one of rayon's threads.

use liandan_tensor::{autocast_dtype, fusion_enabled, is_grad_enabled, AutocastGuard, NoFusionGuard, NoGradGuard};

/// Runs `f` on a thread of rayon's global pool, under this thread's grad mode, autocast region
/// and fusion setting, and returns what it returns.
///
/// The CPU kernels split their work over that pool. Called from a thread outside it, a kernel
/// hands every piece to the pool and sleeps until the last is done, a wake-up or two per
/// kernel; called from a pool thread, it does a piece itself while the others join in. A
/// training step of many small kernels gains most: `liandan_train::Trainer::fit` runs its
/// epochs this way on the CPU, and a loop of one's own can too.
///
/// `f` runs where it is called when that is a pool thread already, or when the pool has a
/// single thread (blocked in `f`, it would leave none for other threads' kernels).
///
/// ```
/// use liandan_tensor::{DType, Device, Tensor};
/// let x = Tensor::ones(&[64, 64], DType::F32, &Device::cpu())?;
/// let y = liandan_backend_cpu::on_pool(|| x.matmul(&x))?;
/// assert_eq!(y.to_vec_f64()?[0], 64.0);
/// # Ok::<(), liandan_tensor::Error>(())
/// ```
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() || rayon::current_num_threads() < 2 {
        return f();
    }
    let (grad, low, fusion) = (is_grad_enabled(), autocast_dtype(), fusion_enabled());
    let mut out = None;
    // `scope` called from outside the pool runs its body on a pool thread and waits for it.
    rayon::scope(|_| {
        let _grad = (!grad).then(NoGradGuard::new);
        let _fusion = (!fusion).then(NoFusionGuard::new);
        // Always F16 or BF16, which `new` takes.
        let _autocast = low.and_then(|d| AutocastGuard::new(d).ok());
        out = Some(f());
    });
    out.expect("the scope ran its body")
}
