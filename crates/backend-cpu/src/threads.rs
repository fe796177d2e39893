//! Running a caller's whole loop on one of rayon's threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use liandan_tensor::{autocast_dtype, fusion_enabled, is_grad_enabled, AutocastGuard, Device, NoFusionGuard, NoGradGuard};
use rayon::Yield;

/// Runs `f` on a thread of rayon's global pool, under this thread's grad mode, autocast region
/// and fusion setting, and returns what it returns.
///
/// The CPU kernels split their work over that pool. Called from a thread outside it, a kernel
/// hands every piece to the pool and sleeps until the last is done, a wake-up or two per
/// kernel; called from a pool thread, it does a piece itself while the others join in. While
/// `f` runs, the pool's other threads stay awake for the next kernel's pieces (spinning for up
/// to 2 ms without work, then looking every 50 us), as OpenMP's threads do between parallel
/// regions. A training step of many small kernels gains most: `liandan_train::Trainer::fit`
/// runs its epochs this way on the CPU, and a loop of one's own can too.
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
    let done = AtomicBool::new(false);
    let mut out = None;
    // `scope` called from outside the pool runs its body on a pool thread and waits for it,
    // and for the threads kept awake, which `Done` releases however the body ends.
    rayon::scope(|s| {
        let (home, done) = (rayon::current_thread_index(), &done);
        for _ in 1..rayon::current_num_threads() {
            s.spawn(move |_| stay_awake(home, done));
        }
        let _done = Done(done);
        let _grad = (!grad).then(NoGradGuard::new);
        let _fusion = (!fusion).then(NoFusionGuard::new);
        // Always F16 or BF16, which `new` takes.
        let _autocast = low.and_then(|d| AutocastGuard::new(d).ok());
        out = Some(f());
    });
    out.expect("the scope ran its body")
}

/// [`on_pool`] where `device` is the CPU; on any other device `f` runs where it is called
/// (its kernels take no CPU threads, which would only spin).
pub fn on_pool_for<R: Send>(device: &Device, f: impl FnOnce() -> R + Send) -> R {
    if device.is_cpu() {
        on_pool(f)
    } else {
        f()
    }
}

/// How long a pool thread kept awake spins without work before it checks only every
/// [`NAP`]: the gaps between a step's kernels are microseconds; a wait for data, much longer.
const SPIN: Duration = Duration::from_millis(2);
const NAP: Duration = Duration::from_micros(50);

/// Sets the flag when dropped.
struct Done<'a>(&'a AtomicBool);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Keeps this pool thread taking the kernels' pieces the moment they are queued, until `done`
/// (as OpenMP's threads spin between parallel regions), rather than asleep until woken: a
/// wake-up costs some tens of microseconds, about a small kernel's whole time.
fn stay_awake(home: Option<usize>, done: &AtomicBool) {
    // The thread running the body may pick this job up itself while it waits inside a kernel;
    // spinning there would keep the body from ever returning.
    if rayon::current_thread_index() == home {
        return;
    }
    let mut idle_since = Instant::now();
    while !done.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(Yield::Executed) => idle_since = Instant::now(),
            _ if idle_since.elapsed() < SPIN => std::hint::spin_loop(),
            _ => std::thread::sleep(NAP),
        }
    }
}
