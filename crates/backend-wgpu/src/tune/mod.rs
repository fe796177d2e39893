//! Autotune: how a product is cut into workgroups (the tile's edge, the ranges K is split into),
//! measured on this adapter and cached on disk, since a cut chosen on one GPU does not carry to
//! another.
//!
//! Off by default: products are then cut by the fixed rules of `plan/matmul.rs` and `plan/conv_cut.rs`
//! (tuned by hand on an H200). On (`WgpuOptions::autotune`, `LIANDAN_AUTOTUNE=1`, or
//! `liandan train --autotune`), the first product of each shape the rules would run on the
//! ordinary tiled kernels (f32, f16 off tensor cores, unpacked bf16) is timed in every cut
//! that fits it, and the fastest is kept (the rule's own unless another is at least
//! [`MARGIN`] faster), in memory and in a file per adapter under the cache directory
//! (`WgpuOptions::autotune_dir`), so later processes on the same adapter and build measure nothing.
//! Like PyTorch's `torch.backends.cudnn.benchmark`: the first steps are slower, and another
//! split of K changes the order of a product's f32 additions.
//!
//! The file is text, one shape a line (`key<TAB>tile splits microseconds`, then the rule's
//! tile, splits and microseconds) under a header that names the format, the crate's version
//! and the adapter; a file with another header, or lines it cannot read, is measured again
//! and rewritten. Writes are atomic (a temporary file, fsync, rename).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use liandan_tensor::Result;

use crate::gpu::Gpu;

pub(crate) mod table;

pub(crate) use table::Shape;
use table::{file_in, read, write, Choice, Cuts};

/// How much faster another cut must be than the rule's to replace it: a cut timed alone
/// (its operands and partial sums warm in the GPU's cache) gains less inside a training step,
/// and timing noise otherwise flips choices between processes.
pub(crate) const MARGIN: f64 = 0.10;
/// Each candidate is timed as the best of this many batches of runs, each batch long enough
/// ([`BATCH_MICROS`]) that the submit and the wait around it are a small part.
const TRIALS: usize = 3;
const BATCH_MICROS: f64 = 2000.0;
/// Runs in a timed batch at most (a tiny product would need thousands).
const MAX_RUNS: usize = 64;

impl Gpu {
    /// The cut `(tile, splits)` for `shape`: `rule`'s where the autotune is off; else the one
    /// measured on this adapter, remembered, from the cache or by timing `run` (which records
    /// the whole product, cut as given) on each of `candidates()` (the rule first) now. `run`
    /// writes the product's output, so the caller's last run (in the chosen cut) overwrites
    /// the candidates'.
    pub(crate) fn tuned_cut(
        &self,
        shape: Shape,
        rule: (usize, usize),
        candidates: impl FnOnce() -> Vec<(usize, usize)>,
        run: impl FnMut((usize, usize)) -> Result<()>,
    ) -> Result<(usize, usize)> {
        let options = self.options();
        if !options.autotune {
            return Ok(rule);
        }
        let dir = options.autotune_dir.as_deref().unwrap_or(Path::new(""));
        let lock = || self.tuning.lock().unwrap_or_else(|p| p.into_inner());
        let known = lock().dirs.get(dir).and_then(|c| c.chosen.get(&shape).copied());
        if let Some(cut) = known {
            return Ok(cut);
        }
        // The first call for this shape (in this directory): its line in the file, or a
        // measurement.
        let dir = dir.to_path_buf();
        let path = (!dir.as_os_str().is_empty()).then(|| file_in(&dir, &self.identity));
        let key = shape.to_string();
        let line = {
            let mut table = lock();
            let cuts = table
                .dirs
                .entry(dir.clone())
                .or_insert_with(|| Cuts { lines: path.as_deref().map(|p| read(p, &self.identity)).unwrap_or_default(), chosen: HashMap::new() });
            cuts.lines.get(&key).copied()
        };
        let candidates = candidates();
        let usable = line.filter(|c| candidates.contains(&(c.tile, c.splits)));
        let measured = if candidates.len() < 2 || usable.is_some() { None } else { Some(self.measure(&candidates, run)?) };
        let cut = measured.or(usable).map_or(rule, |c| (c.tile, c.splits));
        let mut table = lock();
        let cuts = table.dirs.get_mut(&dir).expect("entered above");
        cuts.chosen.insert(shape, cut);
        let Some(choice) = measured else { return Ok(cut) };
        cuts.lines.insert(key, choice);
        if let Some(Err(e)) = path.as_deref().map(|p| write(p, &self.identity, &cuts.lines)) {
            if !table.warned {
                table.warned = true;
                let path = path.as_deref().expect("saved to a file").display();
                eprintln!("liandan: could not save the autotune's results to {path}: {e}; they are kept for this process only");
            }
        }
        Ok(cut)
    }

    /// Times `run` in each of `candidates` (the rule first) and chooses: the fastest where it
    /// is at least [`MARGIN`] faster than the rule, else the rule.
    fn measure(&self, candidates: &[(usize, usize)], mut run: impl FnMut((usize, usize)) -> Result<()>) -> Result<Choice> {
        // Microseconds per run of `cut` over a batch of `runs`, the submit and the wait included.
        let mut time = |cut, runs: usize| -> Result<f64> {
            let start = Instant::now();
            for _ in 0..runs {
                run(cut)?;
            }
            self.synchronize()?;
            Ok(start.elapsed().as_secs_f64() * 1e6 / runs as f64)
        };
        self.synchronize()?;
        let mut timed = Vec::with_capacity(candidates.len());
        for &cut in candidates {
            // An untimed run builds the kernel and warms the caches; one timed run sizes the batches.
            time(cut, 1)?;
            let runs = (BATCH_MICROS / time(cut, 1)?.max(1.0)).ceil().clamp(1.0, MAX_RUNS as f64) as usize;
            let mut best = f64::INFINITY;
            for _ in 0..TRIALS {
                best = best.min(time(cut, runs)?);
            }
            timed.push((cut, best));
        }
        self.measured.fetch_add(1, Ordering::Relaxed);
        let (rule, rule_us) = timed[0];
        let fastest = timed.iter().copied().fold(timed[0], |best, t| if t.1 < best.1 { t } else { best });
        let ((tile, splits), micros) = if fastest.1 < rule_us * (1.0 - MARGIN) { fastest } else { (rule, rule_us) };
        Ok(Choice { tile, splits, micros, rule: Some((rule.0, rule.1, rule_us)) })
    }
}

/// Workgroups a split cut may reach at most: past this many a GPU is filled many times over
/// and more ranges of K only add partial sums.
pub(crate) const MAX_GROUPS: usize = 2048;
/// Bytes of partial sums a candidate may need at most (they stay in the allocator's cache).
pub(crate) const MAX_PARTIALS: usize = 64 << 20;

/// The longest range of K a candidate may leave one workgroup to add up in order, where the
/// rule's own ranges are shorter: a longer f32 sum rounds more (a weight gradient over
/// 24,576 positions in two ranges, not the rule's 96, moved 1e-4 from the composite's value).
pub(crate) const MAX_RANGE: usize = 2048;

/// The cuts worth timing for a product over a K of `k` that the rule cuts as `rule`: each tile
/// edge in `tiles_allowed`, K unsplit or split in 2, 4, ... ranges of at least 64 (at most 32
/// ranges, and only while `split_fits(tile, splits)` allows), each count as the kernels will
/// round it (whole 16-deep slices), none with ranges longer than the rule's or [`MAX_RANGE`].
/// Always holds `rule`, first.
pub(crate) fn candidates(rule: (usize, usize), tiles_allowed: &[usize], k: usize, split_fits: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    let range = |splits: usize| k.div_ceil(splits).next_multiple_of(16).max(16);
    let longest = range(rule.1).max(MAX_RANGE);
    let mut out = vec![rule];
    for &tile in tiles_allowed {
        for s in (0..6).map(|i| 1 << i) {
            if s > 1 && (k / s < 64 || !split_fits(tile, s)) {
                break;
            }
            let cut = (tile, k.div_ceil(range(s)).max(1));
            if range(s) <= longest && !out.contains(&cut) {
                out.push(cut);
            }
        }
    }
    out
}

/// Whether a split of K in `splits` ranges of a product of `groups(tile)` workgroups and
/// `total` outputs stays within [`MAX_GROUPS`], [`MAX_PARTIALS`] and the binding `limit`.
pub(crate) fn split_fits(tile: usize, splits: usize, groups: impl Fn(usize) -> usize, total: usize, limit: u64) -> bool {
    let bytes = splits.saturating_mul(total).saturating_mul(4);
    groups(tile).saturating_mul(splits) <= MAX_GROUPS && bytes <= MAX_PARTIALS && (bytes as u64) <= limit
}

#[cfg(test)]
mod tests {
    use super::{candidates, file_in, read, write, Choice};
    use std::collections::HashMap;

    #[test]
    fn candidates_hold_the_rule_and_splits_of_whole_slices() {
        let c = candidates((64, 3), &[64, 128], 1000, |_, _| true);
        assert_eq!(c[0], (64, 3));
        // 1000 deep: 2, 4, 8 ranges of at least 64 (15 fits in 16 ranges of 64? 1000 / 16 = 62 < 64: no).
        for cut in [(64, 1), (64, 2), (64, 4), (64, 8), (128, 1), (128, 2), (128, 4), (128, 8)] {
            assert!(c.contains(&cut), "{cut:?} missing from {c:?}");
        }
        assert_eq!(c.len(), 9, "{c:?}");
        // Ranges no longer than the rule's or MAX_RANGE: 24,576 deep, split in 12 or more.
        assert_eq!(candidates((64, 96), &[64], 24_576, |_, _| true), vec![(64, 96), (64, 16), (64, 32)]);
        assert_eq!(candidates((64, 1), &[64], 24_576, |_, _| true), vec![(64, 1), (64, 2), (64, 4), (64, 8), (64, 16), (64, 32)]);
        // No split where the partial sums do not fit; a short K is never split.
        assert_eq!(candidates((64, 1), &[64, 128], 100_000, |_, s| s < 2), vec![(64, 1), (128, 1)]);
        assert_eq!(candidates((64, 1), &[64, 128], 100_000, |t, s| t * s <= 128), vec![(64, 1), (64, 2), (128, 1)]);
        assert_eq!(candidates((64, 1), &[64], 100, |_, _| true), vec![(64, 1)]);
    }

    #[test]
    fn a_file_round_trips_and_a_foreign_or_damaged_one_reads_as_empty() {
        let dir = std::env::temp_dir().join(format!("liandan-tune-test-{}", std::process::id()));
        let (id, other) = ("GPU A (Vulkan) 10de:2335 driver 1", "GPU A (Vulkan) 10de:2335 driver 2");
        let path = file_in(&dir, id);
        assert_ne!(path, file_in(&dir, other), "two drivers keep two files");
        let mut cuts = HashMap::new();
        cuts.insert("conv Forward f32 x".to_string(), Choice { tile: 128, splits: 4, micros: 12.5, rule: Some((64, 8, 14.0)) });
        cuts.insert("matmul f32 y".to_string(), Choice { tile: 64, splits: 1, micros: 3.0, rule: None });
        write(&path, id, &cuts).unwrap();
        assert_eq!(read(&path, id), cuts);
        assert!(read(&path, other).is_empty(), "another adapter's file is not read");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("128 4", "128 x")).unwrap();
        assert!(read(&path, id).is_empty(), "a damaged line discards the file");
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read(&path, id).is_empty());
        assert!(read(&dir.join("missing.txt"), id).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
