//! Seeded random images and labels, for benchmarks and tests that need data of a given shape.

use super::{out_of_range, rng, Dataset, Sample};
use crate::error::{Error, Result};

/// `len` samples of `shape` with values uniform in `[0, 1)` and labels uniform in
/// `0..classes`, each computed from `(seed, index)` on demand: no memory held, the same data
/// on every machine.
#[derive(Clone, Debug)]
pub struct Synthetic {
    len: usize,
    shape: Vec<usize>,
    classes: usize,
    seed: u64,
}

impl Synthetic {
    /// Errors when `classes` is 0.
    pub fn new(len: usize, shape: &[usize], classes: usize, seed: u64) -> Result<Synthetic> {
        if classes == 0 {
            return Err(Error::InvalidArgument { op: "Synthetic::new", what: "classes must be at least 1".into() });
        }
        Ok(Synthetic { len, shape: shape.to_vec(), classes, seed })
    }
}

impl Dataset for Synthetic {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&self, index: usize) -> Result<Sample> {
        if index >= self.len {
            return Err(out_of_range("Synthetic::get", index, self.len));
        }
        let stream = rng::derive(self.seed, index as u64);
        // The label takes draws 0 and 1 of the stream (a 64-bit draw), the values the rest.
        let n: usize = self.shape.iter().product();
        let input = (0..n as u32).map(|i| rng::unit(stream, i + 2)).collect();
        let target = rng::below(stream, 0, self.classes as u64) as i64;
        Ok(Sample { input, shape: self.shape.clone(), target })
    }
}
