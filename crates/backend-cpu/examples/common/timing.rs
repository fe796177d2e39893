//! The timer the gemm examples share.

use std::time::Instant;

/// Microseconds per call of `f`: three calls to warm up, then as many as fit in `budget_s`
/// seconds.
pub fn time(budget_s: f64, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let (start, mut calls) = (Instant::now(), 0u32);
    while start.elapsed().as_secs_f64() < budget_s {
        f();
        calls += 1;
    }
    start.elapsed().as_secs_f64() / calls as f64 * 1e6
}
