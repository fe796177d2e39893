//! The loader's seeded randomness: shuffles and augmentation draws that depend only on
//! `(seed, epoch, index)`, so every machine and every worker count gives the same batches.
//!
//! Built on the tensor crate's counter-based mixer (`liandan_tensor::rng::draw`): no state is
//! carried from one draw to the next, so a worker can compute any sample's draws on its own.

use liandan_tensor::rng::draw;

/// Combines two 64-bit values into a new seed (splitmix64's finalizer over their mix), so
/// `derive(seed, epoch)` and `derive(seed, epoch + 1)` are unrelated streams.
pub fn derive(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Draw number `counter` of stream `seed` as 64 bits (two 32-bit draws).
fn draw64(seed: u64, counter: u32) -> u64 {
    (u64::from(draw(seed, counter.wrapping_mul(2))) << 32) | u64::from(draw(seed, counter.wrapping_mul(2).wrapping_add(1)))
}

/// A uniform integer in `0..n` (`n > 0`) from draw `counter` of stream `seed`. Lemire's
/// multiply-shift: the bias is at most `n / 2^64`, far below anything a dataset can notice.
pub fn below(seed: u64, counter: u32, n: u64) -> u64 {
    ((u128::from(draw64(seed, counter)) * u128::from(n)) >> 64) as u64
}

/// A uniform float in `[0, 1)` from draw `counter` of stream `seed`.
pub fn unit(seed: u64, counter: u32) -> f32 {
    liandan_tensor::rng::uniform01(seed, counter)
}

/// A uniformly random permutation of `0..n` (Fisher-Yates driven by stream `seed`).
pub fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        // The counter wraps past 2^32 swaps; streams stay well mixed since `i` changes too.
        let j = below(seed, i as u32 ^ (i >> 32) as u32, i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_fixed_permutation() {
        let p = permutation(1000, 7);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_eq!(p, permutation(1000, 7));
        assert_ne!(p, permutation(1000, 8));
        // Pinned so that a change to the mixer, which would change every user's batches, shows.
        assert_eq!(&permutation(10, 0), &PINNED);
    }

    const PINNED: [usize; 10] = [0, 6, 4, 3, 9, 5, 7, 1, 8, 2];

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut seen = [0usize; 7];
        for c in 0..7000 {
            let v = below(3, c, 7) as usize;
            seen[v] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800 && n < 1200), "{seen:?}");
    }
}
