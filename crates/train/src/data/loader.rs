//! The [`DataLoader`]: seeded shuffling, batching on worker threads, and uploads to the device
//! that run ahead of the training step.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use liandan_tensor::{Device, Tensor};

use super::{rng, Dataset, Sample};
use crate::error::{Error, Result};

/// A batch on the device: inputs `[B, ...]` in f32 and targets `[B]` in i64.
#[derive(Clone)]
pub struct Batch {
    pub input: Tensor,
    pub target: Tensor,
}

/// A batch on the host, before its upload.
#[derive(Clone, Debug, PartialEq)]
pub struct HostBatch {
    /// `[B, ...]` values, row-major.
    pub input: Vec<f32>,
    /// `[B, ...]`.
    pub shape: Vec<usize>,
    /// `[B]` targets.
    pub target: Vec<i64>,
}

impl HostBatch {
    /// Copies the batch to `device`.
    pub fn upload(self, device: &Device) -> Result<Batch> {
        let b = self.target.len();
        Ok(Batch { input: Tensor::from_vec(self.input, &self.shape, device)?, target: Tensor::from_vec(self.target, &[b], device)? })
    }
}

/// Stacks samples of one shape into a [`HostBatch`]; `indices` name them in the error when
/// their shapes differ.
pub fn collate(samples: Vec<Sample>, indices: &[usize]) -> Result<HostBatch> {
    let Some(first) = samples.first() else {
        return Err(Error::InvalidArgument { op: "collate", what: "an empty batch".into() });
    };
    let item_shape = first.shape.clone();
    let mut input = Vec::with_capacity(first.input.len() * samples.len());
    let mut target = Vec::with_capacity(samples.len());
    for (k, s) in samples.into_iter().enumerate() {
        if s.shape != item_shape || s.input.len() != item_shape.iter().product::<usize>() {
            return Err(Error::InvalidArgument {
                op: "collate",
                what: format!(
                    "sample {} has shape {:?} ({} values) but sample {} has {item_shape:?}; samples of a batch must share a shape",
                    indices[k],
                    s.shape,
                    s.input.len(),
                    indices[0]
                ),
            });
        }
        input.extend_from_slice(&s.input);
        target.push(s.target);
    }
    let mut shape = vec![target.len()];
    shape.extend_from_slice(&item_shape);
    Ok(HostBatch { input, shape, target })
}

/// Batches a [`Dataset`] onto a device (`torch.utils.data.DataLoader`).
///
/// Epoch `e`'s order is a permutation drawn from `(seed, e)` (or the dataset's order without
/// [`DataLoader::shuffle`]), and sample `i`'s random transforms draw from `(seed, e, i)`: a
/// batch's tensors depend on the seed, the epoch and the batch index only, never on the worker
/// count or the machine. With `workers > 0`, worker threads build batches in the background
/// and one more thread uploads them, `prefetch` batches ahead of the training loop.
#[derive(Clone)]
pub struct DataLoader {
    dataset: Arc<dyn Dataset>,
    device: Device,
    batch_size: usize,
    seed: Option<u64>,
    drop_last: bool,
    workers: usize,
    prefetch: usize,
    shard: Option<Shard>,
}

/// One rank's part of each epoch in data-parallel training: see [`DataLoader::shard`].
#[derive(Clone, Copy, Debug)]
struct Shard {
    rank: usize,
    world: usize,
    /// Every rank runs the same number of samples, the tail that does not divide evenly
    /// dropped (training); otherwise each sample belongs to exactly one rank (evaluation).
    even: bool,
}

impl Shard {
    /// Samples this rank takes of an epoch of `n`.
    fn len(&self, n: usize) -> usize {
        match self.even {
            true => n / self.world,
            false => n.saturating_sub(self.rank).div_ceil(self.world),
        }
    }
}

impl DataLoader {
    /// A loader of `batch_size` samples per batch onto `device`, in the dataset's order, keeping
    /// the last short batch, with two workers prefetching two batches.
    pub fn new(dataset: impl Dataset + 'static, batch_size: usize, device: &Device) -> Result<DataLoader> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument { op: "DataLoader::new", what: "batch_size must be at least 1".into() });
        }
        Ok(DataLoader { dataset: Arc::new(dataset), device: device.clone(), batch_size, seed: None, drop_last: false, workers: 2, prefetch: 2, shard: None })
    }

    /// Shuffles every epoch with a permutation drawn from `seed` and the epoch.
    pub fn shuffle(mut self, seed: u64) -> DataLoader {
        self.seed = Some(seed);
        self
    }

    /// Drops the last batch of an epoch when it is short.
    pub fn drop_last(mut self, on: bool) -> DataLoader {
        self.drop_last = on;
        self
    }

    /// Background threads building batches; 0 builds each batch on the caller's thread when it
    /// is asked for.
    pub fn workers(mut self, n: usize) -> DataLoader {
        self.workers = n;
        self
    }

    /// Batches each worker and the uploader may hold ready ahead of the training loop (at
    /// least 1).
    pub fn prefetch(mut self, n: usize) -> DataLoader {
        self.prefetch = n.max(1);
        self
    }

    /// Rank `rank`'s part of every epoch of a data-parallel job of `world` ranks, as PyTorch's
    /// `DistributedSampler` cuts it: each epoch's order is drawn as usual (the same seed gives
    /// every rank the same order), then rank `r` takes positions `r`, `r + world`, ... of it.
    /// Every rank gets `len / world` samples, the few left over dropped, so that all ranks run
    /// the same number of steps; their batch `k` together is batch `k` of the whole order at
    /// `world` times the batch size.
    pub fn shard(self, rank: usize, world: usize) -> Result<DataLoader> {
        self.sharded(rank, world, true)
    }

    /// As [`DataLoader::shard`], keeping every sample: ranks get one sample more or less, and
    /// the shards together are the whole epoch (evaluation, whose sums are added up across
    /// ranks).
    pub fn shard_all(self, rank: usize, world: usize) -> Result<DataLoader> {
        self.sharded(rank, world, false)
    }

    fn sharded(mut self, rank: usize, world: usize, even: bool) -> Result<DataLoader> {
        if world == 0 || rank >= world {
            return Err(Error::InvalidArgument {
                op: "DataLoader::shard",
                what: format!("rank {rank} of {world}: the rank must be below the number of ranks"),
            });
        }
        if self.shard.is_some() {
            return Err(Error::InvalidArgument { op: "DataLoader::shard", what: "this loader is already a shard; shard the whole loader once".into() });
        }
        self.shard = Some(Shard { rank, world, even });
        Ok(self)
    }

    /// Samples per epoch (this rank's, for a shard).
    pub fn samples(&self) -> usize {
        let n = self.dataset.len();
        self.shard.map_or(n, |s| s.len(n))
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        let n = self.samples();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Whether an epoch has no batches.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The dataset.
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// The device batches land on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The order in which epoch `epoch` visits the dataset's indices (this rank's part of it,
    /// for a shard).
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let order = match self.seed {
            Some(seed) => rng::permutation(self.dataset.len(), rng::derive(seed, epoch)),
            None => (0..self.dataset.len()).collect(),
        };
        match self.shard {
            Some(s) => order.into_iter().skip(s.rank).step_by(s.world).take(s.len(self.dataset.len())).collect(),
            None => order,
        }
    }

    /// Builds batch `batch` of an epoch whose order is `order`, on the host.
    fn host_batch(dataset: &dyn Dataset, order: &[usize], batch_size: usize, sample_seed: u64, batch: usize) -> Result<HostBatch> {
        let indices = &order[batch * batch_size..((batch + 1) * batch_size).min(order.len())];
        let samples = indices.iter().map(|&i| dataset.get_seeded(i, rng::derive(sample_seed, i as u64))).collect::<Result<Vec<_>>>()?;
        collate(samples, indices)
    }

    /// The batches of epoch `epoch`, from the first.
    pub fn iter(&self, epoch: u64) -> Result<Batches> {
        self.iter_from(epoch, 0)
    }

    /// The batches of epoch `epoch` from batch `start` on (for resuming a run exactly where it
    /// stopped); `start == len()` gives an empty iterator.
    pub fn iter_from(&self, epoch: u64, start: usize) -> Result<Batches> {
        let total = self.len();
        if start > total {
            return Err(Error::InvalidArgument { op: "DataLoader::iter_from", what: format!("start batch {start} is past the epoch's {total} batches") });
        }
        let order: Arc<[usize]> = self.order(epoch).into();
        // Transforms draw from their own stream, apart from the shuffle's.
        let sample_seed = rng::derive(rng::derive(self.seed.unwrap_or(0), epoch), u64::MAX);
        let job = Job { dataset: self.dataset.clone(), order, batch_size: self.batch_size, sample_seed };
        let run = if self.workers == 0 {
            Run::Inline(job)
        } else {
            Run::Background(Background::start(job, start, total, self.workers, self.prefetch, self.device.clone()))
        };
        Ok(Batches { run, next: start, total, device: self.device.clone() })
    }
}

/// What builds an epoch's batches: shared by the workers.
#[derive(Clone)]
struct Job {
    dataset: Arc<dyn Dataset>,
    order: Arc<[usize]>,
    batch_size: usize,
    sample_seed: u64,
}

impl Job {
    fn build(&self, batch: usize) -> Result<HostBatch> {
        DataLoader::host_batch(&*self.dataset, &self.order, self.batch_size, self.sample_seed, batch)
    }
}

enum Run {
    Inline(Job),
    Background(Background),
}

/// Worker threads and the uploader of one pass over an epoch.
struct Background {
    ready: Option<Receiver<Result<Batch>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    /// Worker `w` builds batches `start + w`, `start + w + workers`, ...; the uploader takes
    /// them round-robin, so batches arrive in order with no reordering buffer, and each
    /// channel's bound caps the memory held ahead.
    fn start(job: Job, start: usize, total: usize, workers: usize, prefetch: usize, device: Device) -> Background {
        let mut threads = Vec::with_capacity(workers + 1);
        let mut inboxes = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = sync_channel::<Result<HostBatch>>(prefetch);
            inboxes.push(rx);
            let job = job.clone();
            threads.push(std::thread::spawn(move || {
                for batch in (start + w..total).step_by(workers) {
                    let built = job.build(batch);
                    let failed = built.is_err();
                    // A closed channel means the consumer stopped early: nothing left to do.
                    if tx.send(built).is_err() || failed {
                        return;
                    }
                }
            }));
        }
        let (tx, ready) = sync_channel::<Result<Batch>>(prefetch);
        threads.push(std::thread::spawn(move || {
            for batch in start..total {
                let Ok(host) = inboxes[(batch - start) % workers].recv() else { return };
                let uploaded = host.and_then(|h| h.upload(&device));
                let failed = uploaded.is_err();
                if tx.send(uploaded).is_err() || failed {
                    return;
                }
            }
        }));
        Background { ready: Some(ready), threads }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Closing the consumer's end unblocks the uploader, whose exit closes the workers'.
        drop(self.ready.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The batches of one epoch, in order; see [`DataLoader::iter_from`]. After an error the
/// iterator ends.
pub struct Batches {
    run: Run,
    next: usize,
    total: usize,
    device: Device,
}

impl Batches {
    /// Batches still to come.
    pub fn remaining(&self) -> usize {
        self.total - self.next
    }

    /// Index (within the epoch) of the batch the next call to `next` returns.
    pub fn position(&self) -> usize {
        self.next
    }
}

impl Iterator for Batches {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if self.next >= self.total {
            return None;
        }
        let item = match &self.run {
            Run::Inline(job) => job.build(self.next).and_then(|h| h.upload(&self.device)),
            Run::Background(bg) => match bg.ready.as_ref().map(Receiver::recv) {
                Some(Ok(item)) => item,
                // The uploader ended without sending: a worker thread panicked.
                _ => Err(Error::State { op: "DataLoader", detail: format!("a loader thread died before batch {}; see the panic message above", self.next) }),
            },
        };
        self.next = if item.is_ok() { self.next + 1 } else { self.total };
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

impl ExactSizeIterator for Batches {}
