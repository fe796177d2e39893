//! The counter-based random numbers every backend draws, so a seed means the same tensor on
//! the CPU and on any GPU.
//!
//! Element `i` of a random tensor depends only on `(seed, i)`: a backend can fill in parallel,
//! in any order, with nothing but 32-bit integer arithmetic (WGSL has no 64-bit integers). The
//! mixer is Chris Wellons' `lowbias32`, applied to the seed halves and the counter in turn.
//! Uniform and Bernoulli draws are bit-identical across backends; normal draws pass through
//! `ln` and `cos`, which a GPU rounds within a few ulps of the CPU's.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::Distribution;

/// `lowbias32`: a 32-bit integer hash with low bias.
#[inline]
pub fn hash32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The raw 32-bit draw number `counter` of the stream `seed`.
#[inline]
pub fn draw(seed: u64, counter: u32) -> u32 {
    let key = hash32(seed as u32 ^ hash32((seed >> 32) as u32 ^ 0x9e37_79b9));
    hash32(counter ^ hash32(key.wrapping_add(counter.rotate_left(16)) ^ 0x85eb_ca6b))
}

/// A uniform float in `[0, 1)` with 24 random bits (exact in f32).
#[inline]
pub fn uniform01(seed: u64, counter: u32) -> f32 {
    (draw(seed, counter) >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Element `i` of a random tensor drawn from `dist`, computed in f32 as a GPU does.
#[inline]
pub fn sample(dist: Distribution, seed: u64, i: u32) -> f32 {
    match dist {
        Distribution::Uniform { low, high } => {
            let u = uniform01(seed, i);
            low as f32 + (high - low) as f32 * u
        }
        Distribution::Normal { mean, std } => {
            // Box-Muller on the draws 2i and 2i+1; u1 is in (0, 1] so the log is finite.
            let u1 = uniform01(seed, i.wrapping_mul(2)) + 1.0 / 16_777_216.0;
            let u2 = uniform01(seed, i.wrapping_mul(2).wrapping_add(1));
            let r = (-2.0 * u1.ln()).sqrt();
            mean as f32 + std as f32 * r * (std::f32::consts::TAU * u2).cos()
        }
        Distribution::Bernoulli { p } => (uniform01(seed, i) < p as f32) as u8 as f32,
    }
}

static GLOBAL_SEED: AtomicU64 = AtomicU64::new(0x5eed_1a2d_a11c_4e11);
static GLOBAL_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Seeds the global generator that ops without an explicit seed (dropout, initializers) use,
/// like `torch.manual_seed`.
pub fn manual_seed(seed: u64) {
    GLOBAL_SEED.store(seed, Ordering::SeqCst);
    GLOBAL_COUNTER.store(0, Ordering::SeqCst);
}

/// The next seed from the global generator (splitmix64 over a counter).
pub fn next_seed() -> u64 {
    let n = GLOBAL_COUNTER.fetch_add(1, Ordering::SeqCst);
    let mut z = GLOBAL_SEED.load(Ordering::SeqCst).wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_moments() {
        let n = 100_000u32;
        let xs: Vec<f64> = (0..n).map(|i| uniform01(7, i) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.01, "{var}");
        assert_ne!(draw(1, 0), draw(2, 0));
        assert_ne!(draw(1 << 32, 0), draw(0, 0));
    }

    #[test]
    fn normal_moments() {
        let n = 100_000u32;
        let d = Distribution::Normal { mean: 1.0, std: 2.0 };
        let xs: Vec<f64> = (0..n).map(|i| sample(d, 3, i) as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.03, "{mean}");
        assert!((var - 4.0).abs() < 0.1, "{var}");
    }
}
