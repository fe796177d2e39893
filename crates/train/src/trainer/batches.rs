//! Batches for the training loop: a seeded order per epoch that can start at any batch (exact
//! resume), collated on a background thread one batch ahead of the step that uses it.

use std::ops::{ControlFlow, Range};
use std::sync::mpsc;

use liandan_tensor::{rng, Device, Tensor};

use crate::data::Dataset;
use crate::error::{Error, Result};

/// One batch on the device: inputs `[B, ...]` (f32) and class targets `[B]` (i64).
pub(crate) struct Batch {
    pub x: Tensor,
    pub y: Tensor,
}

/// A batch collated on the host.
struct HostBatch {
    input: Vec<f32>,
    shape: Vec<usize>,
    target: Vec<i64>,
}

/// The order in which epoch `epoch` visits the `n` samples: `0..n`, or a Fisher-Yates shuffle
/// drawn from liandan's counter-based generator, so a seed gives the same order on every
/// machine and the order of any epoch can be recomputed without replaying the ones before.
pub(crate) fn epoch_order(n: usize, shuffle: bool, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        let stream = seed ^ (epoch as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for i in (1..n).rev() {
            // Two 32-bit draws make a 64-bit one, so the modulo bias is negligible for any n.
            let r = ((rng::draw(stream, 2 * i as u32) as u64) << 32) | rng::draw(stream, 2 * i as u32 + 1) as u64;
            order.swap(i, (r % (i as u64 + 1)) as usize);
        }
    }
    order
}

/// Batches in an epoch of `n` samples (the last one may be short).
pub(crate) fn num_batches(n: usize, batch_size: usize) -> usize {
    n.div_ceil(batch_size)
}

/// Collates the samples `indices` of `data`; every sample must have the first one's shape.
fn collate(data: &dyn Dataset, indices: &[usize]) -> Result<HostBatch> {
    let mut batch = HostBatch { input: Vec::new(), shape: Vec::new(), target: Vec::with_capacity(indices.len()) };
    for &i in indices {
        let s = data.get(i)?;
        if batch.target.is_empty() {
            batch.shape = s.shape.clone();
            batch.input.reserve(indices.len() * s.input.len());
        } else if s.shape != batch.shape {
            return Err(Error::InvalidArgument { op: "batch", what: format!("sample {i} has shape {:?} where the batch's first sample has {:?}; samples of one batch must share a shape", s.shape, batch.shape) });
        }
        let want: usize = s.shape.iter().product();
        if s.input.len() != want {
            return Err(Error::InvalidArgument { op: "batch", what: format!("sample {i} has {} values for its shape {:?} ({want})", s.input.len(), s.shape) });
        }
        batch.input.extend_from_slice(&s.input);
        batch.target.push(s.target);
    }
    batch.shape.insert(0, indices.len());
    Ok(batch)
}

/// Calls `body(batch_index, batch)` for the batches `range` of `order`, in order, while the
/// next batch is collated on another thread. Stops early when `body` breaks or fails.
pub(crate) fn for_each_batch(
    data: &dyn Dataset,
    order: &[usize],
    batch_size: usize,
    range: Range<usize>,
    device: &Device,
    mut body: impl FnMut(usize, Batch) -> Result<ControlFlow<()>>,
) -> Result<()> {
    std::thread::scope(|scope| {
        // Two batches in flight: one being uploaded and used, one being collated.
        let (tx, rx) = mpsc::sync_channel::<Result<HostBatch>>(1);
        let chunks = range.clone().map(|b| &order[b * batch_size..((b + 1) * batch_size).min(order.len())]);
        scope.spawn(move || {
            for indices in chunks {
                // A send fails only when the loop below has stopped; then so do we.
                if tx.send(collate(data, indices)).is_err() {
                    return;
                }
            }
        });
        for b in range {
            let host = rx.recv().expect("the collating thread sends one batch per index")?;
            let batch = Batch { x: Tensor::from_vec(host.input, &host.shape, device)?, y: Tensor::from_vec(host.target, &[host.shape[0]], device)? };
            if body(b, batch)?.is_break() {
                break;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_order_is_a_permutation_that_depends_on_seed_and_epoch() {
        let a = epoch_order(100, true, 7, 0);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_eq!(a, epoch_order(100, true, 7, 0));
        assert_ne!(a, epoch_order(100, true, 7, 1));
        assert_ne!(a, epoch_order(100, true, 8, 0));
        assert_eq!(epoch_order(5, false, 7, 3), vec![0, 1, 2, 3, 4]);
    }
}
