//! The bucketed gradient all-reduce of data-parallel training (DDP's `Reducer`).
//!
//! Parameters are packed into buckets in reverse order of registration, the order backward
//! usually finishes them in; the first bucket is small (1 MB, as in PyTorch) so that
//! communication starts early. A post-accumulate-grad hook on every parameter counts what is
//! ready; when a bucket is complete, and every bucket before it has gone, its gradients are
//! joined on the device into one flat f32 tensor (zeros where one is missing: a copy per
//! gradient, recorded, nothing waits) and that goes to the reducer's thread, which reads it
//! back to the host in one copy and all-reduces it over MPI while the main thread records the
//! rest of backward. [`Reducer::finish`] sends what is left, waits, uploads each averaged
//! bucket once and gives every parameter a copy of its slice, made on the device. Buckets
//! always go in the same order on every rank, which is what keeps MPI's collectives matched.
//!
//! Each bucket also carries one count per parameter, how many ranks had a gradient for it
//! (appended on the host after the read): a parameter no rank used keeps no gradient (the
//! optimizer skips it), as in PyTorch.

use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use liandan_tensor::{DType, HookHandle, NoGradGuard, Tensor};

use super::{Communicator, Distributed};
use crate::error::{Error, Result};

/// PyTorch's first bucket: small, so the all-reduce starts as soon as the last layer is done.
const FIRST_BUCKET_BYTES: usize = 1 << 20;

/// What one bucket's all-reduce cost; totals over the steps since the last
/// [`Reducer::take_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReducerStats {
    /// Optimizer steps reduced.
    pub steps: u64,
    /// Buckets and gradient bytes per step.
    pub buckets: usize,
    pub bytes: usize,
    /// Seconds the reducer's thread spent reading buckets back to the host, one read each (on a
    /// GPU this includes waiting for backward to compute them).
    pub read_s: f64,
    /// Seconds in the MPI all-reduce itself.
    pub all_reduce_s: f64,
    /// Seconds the training step waited for the reducer after backward: the communication
    /// that did not overlap backward.
    pub waited_s: f64,
    /// Seconds spent uploading the averaged buckets and slicing them into gradients.
    pub upload_s: f64,
}

impl ReducerStats {
    /// The share of the reducer's work (read-back and all-reduce) that ran while backward was
    /// still computing, in `[0, 1]`.
    pub fn hidden(&self) -> f64 {
        let work = self.read_s + self.all_reduce_s;
        if work <= 0.0 {
            return 1.0;
        }
        ((work - self.waited_s) / work).clamp(0.0, 1.0)
    }
}

/// A bucket on its way to the reducer's thread.
struct Job {
    bucket: usize,
    /// The bucket's gradients joined on the device ([`join`]), or why they could not be.
    flat: Result<Tensor>,
    /// Elements of the bucket's parameters, all together.
    numel: usize,
    /// Whether each parameter of the bucket has a gradient on this rank.
    present: Vec<bool>,
}

/// A bucket back from it: every rank's gradients summed, then one presence count per parameter.
struct Done {
    bucket: usize,
    values: Result<Vec<f32>>,
    read: Duration,
    all_reduce: Duration,
}

/// What the hooks share with [`Reducer::finish`].
struct Step {
    params: Vec<Tensor>,
    bucket_of: Vec<usize>,
    buckets: Vec<Range<usize>>,
    /// Whether the current backward's gradients are reduced (false on steps that only
    /// accumulate: DDP's `no_sync`).
    syncing: bool,
    ready: Vec<bool>,
    waiting: Vec<usize>,
    /// The next bucket to send: buckets go in order.
    next: usize,
    jobs: Sender<Job>,
}

impl Step {
    /// Parameter `i`'s gradient is final: send every complete bucket that is next in line.
    fn ready(&mut self, i: usize) -> Result<()> {
        if !self.syncing || self.ready[i] {
            return Ok(());
        }
        self.ready[i] = true;
        self.waiting[self.bucket_of[i]] -= 1;
        while self.next < self.buckets.len() && self.waiting[self.next] == 0 {
            self.send(self.next)?;
        }
        Ok(())
    }

    fn send(&mut self, b: usize) -> Result<()> {
        let params = &self.params[self.buckets[b].clone()];
        let grads: Vec<Option<Tensor>> = params.iter().map(Tensor::grad).collect();
        let job =
            Job { bucket: b, flat: join(params, &grads), numel: params.iter().map(Tensor::numel).sum(), present: grads.iter().map(Option::is_some).collect() };
        self.next = b + 1;
        self.jobs.send(job).map_err(|_| gone())
    }

    /// Back to the start of a step.
    fn reset(&mut self) {
        self.ready.fill(false);
        for (b, r) in self.buckets.iter().enumerate() {
            self.waiting[b] = r.len();
        }
        self.next = 0;
    }
}

fn gone() -> Error {
    Error::Distributed { detail: "the gradient reducer's thread stopped (see the message above)".into() }
}

/// Averages gradients across ranks, bucket by bucket, while backward runs. See the module docs.
pub struct Reducer {
    step: Arc<Mutex<Step>>,
    world: usize,
    done: Receiver<Done>,
    stats: ReducerStats,
    per_step: (usize, usize),
    _hooks: Vec<HookHandle>,
    worker: Option<JoinHandle<()>>,
}

impl Reducer {
    /// A reducer of `params`' gradients over `dist`'s ranks, in buckets of
    /// [`Distributed::bucket_bytes`]. Collective: every rank builds one, with the same
    /// parameters (see [`Distributed::check_same`]).
    pub fn new(dist: &Distributed, params: &[Tensor]) -> Result<Reducer> {
        // Reverse order of registration: the last layer's gradients are ready first.
        let params: Vec<Tensor> = params.iter().rev().cloned().collect();
        let buckets = buckets(&params, dist.bucket_bytes());
        let mut bucket_of = vec![0; params.len()];
        for (b, r) in buckets.iter().enumerate() {
            bucket_of[r.clone()].fill(b);
        }
        let bytes = params.iter().map(|p| p.numel() * 4).sum();
        let (jobs, inbox) = channel::<Job>();
        let (results, done) = channel::<Done>();
        let comm = dist.communicator().duplicate();
        let worker = std::thread::Builder::new()
            .name("liandan-allreduce".into())
            .spawn(move || work(&*comm, inbox, results))
            .map_err(|e| Error::Distributed { detail: format!("cannot start the gradient reducer's thread ({e})") })?;
        let n = params.len();
        let step = Step {
            params: params.clone(),
            bucket_of,
            waiting: buckets.iter().map(|r| r.len()).collect(),
            buckets,
            syncing: false,
            ready: vec![false; n],
            next: 0,
            jobs,
        };
        let per_step = (step.buckets.len(), bytes);
        let step = Arc::new(Mutex::new(step));
        let hooks = params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let step = step.clone();
                p.register_post_accumulate_grad_hook(move |_| step.lock().unwrap_or_else(|e| e.into_inner()).ready(i).map_err(to_tensor_error))
            })
            .collect::<liandan_tensor::Result<Vec<_>>>()?;
        Ok(Reducer { step, world: dist.size(), done, stats: ReducerStats::default(), per_step, _hooks: hooks, worker: Some(worker) })
    }

    /// Whether the next backward's gradients are reduced as backward produces them: on for the
    /// last batch of an optimizer step, off for the batches that only accumulate (`no_sync`).
    pub fn set_sync(&self, on: bool) {
        self.lock().syncing = on;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Step> {
        self.step.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what backward has not sent, waits for every bucket, and leaves each parameter
    /// the mean of its gradient over all ranks. Collective: every rank calls it once per
    /// optimizer step.
    pub fn finish(&mut self) -> Result<()> {
        let start = Instant::now();
        let _no_grad = NoGradGuard::new();
        let (params, buckets) = {
            let mut step = self.lock();
            step.syncing = false;
            while step.next < step.buckets.len() {
                let b = step.next;
                step.send(b)?;
            }
            step.reset();
            (step.params.clone(), step.buckets.clone())
        };
        let mut results: Vec<Option<Done>> = (0..buckets.len()).map(|_| None).collect();
        for _ in 0..buckets.len() {
            let done = self.done.recv().map_err(|_| gone())?;
            self.stats.read_s += done.read.as_secs_f64();
            self.stats.all_reduce_s += done.all_reduce.as_secs_f64();
            let b = done.bucket;
            results[b] = Some(done);
        }
        let waited = start.elapsed();
        let scale = 1.0 / self.world as f32;
        for (range, done) in buckets.iter().zip(results) {
            let values = done.expect("every bucket came back").values?;
            let params = &params[range.clone()];
            let (sums, counts) = values.split_at(values.len() - params.len());
            if counts.iter().all(|&c| c == 0.0) {
                params.iter().for_each(|p| p.set_grad(None));
                continue;
            }
            let mean: Vec<f32> = sums.iter().map(|g| g * scale).collect();
            let flat = Tensor::from_vec(mean, &[sums.len()], params[0].device())?;
            let mut at = 0;
            for (p, &count) in params.iter().zip(counts) {
                let n = p.numel();
                let slice = flat.narrow(0, at, n)?;
                at += n;
                p.set_grad(if count == 0.0 { None } else { Some(own_gradient(&slice, p)?) });
            }
        }
        self.stats.steps += 1;
        (self.stats.buckets, self.stats.bytes) = self.per_step;
        self.stats.waited_s += waited.as_secs_f64();
        self.stats.upload_s += (start.elapsed() - waited).as_secs_f64();
        Ok(())
    }

    /// The costs since the last call, and a fresh count.
    pub fn take_stats(&mut self) -> ReducerStats {
        std::mem::take(&mut self.stats)
    }
}

impl Drop for Reducer {
    fn drop(&mut self) {
        // Closing the jobs' channel ends the thread.
        let (jobs, _) = channel();
        drop(std::mem::replace(&mut self.lock().jobs, jobs));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

fn to_tensor_error(e: Error) -> liandan_tensor::Error {
    liandan_tensor::Error::Autograd(e.to_string())
}

/// Consecutive runs of `params` of about `cap` bytes each (the first of at most 1 MB).
fn buckets(params: &[Tensor], cap: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, p) in params.iter().enumerate() {
        bytes += p.numel() * 4;
        let limit = if out.is_empty() { cap.min(FIRST_BUCKET_BYTES) } else { cap };
        if bytes >= limit || i + 1 == params.len() {
            out.push(start..i + 1);
            (start, bytes) = (i + 1, 0);
        }
    }
    out
}

/// A bucket's gradients as one flat f32 tensor on `params`' device, each flattened (cast where
/// it is not f32), zeros for those missing. Only recorded: the reducer's thread reads it.
fn join(params: &[Tensor], grads: &[Option<Tensor>]) -> Result<Tensor> {
    let _no_grad = NoGradGuard::new();
    let parts = params
        .iter()
        .zip(grads)
        .map(|(p, g)| match g {
            Some(g) => g.to_dtype(DType::F32)?.reshape(&[p.numel()]),
            None => Tensor::zeros(&[p.numel()], DType::F32, p.device()),
        })
        .collect::<liandan_tensor::Result<Vec<_>>>()?;
    Ok(Tensor::cat(&parts.iter().collect::<Vec<_>>(), 0)?)
}

/// Parameter `p`'s gradient from its slice of an uploaded bucket, in a buffer of its own: the
/// optimizers' and the loss scaler's multi-tensor kernels take only operands that start their
/// buffer. A cast makes a new buffer; an f32 slice is copied by a one-part `cat`, which on a
/// GPU is a buffer-to-buffer copy rather than a kernel launch.
fn own_gradient(slice: &Tensor, p: &Tensor) -> Result<Tensor> {
    let g = if p.dtype() == DType::F32 { Tensor::cat(&[slice], 0)? } else { slice.to_dtype(p.dtype())? };
    Ok(g.reshape(p.shape())?)
}

/// The reducer's thread: read each bucket back, all-reduce it, hand it back.
fn work(comm: &dyn Communicator, inbox: Receiver<Job>, results: Sender<Done>) {
    for Job { bucket, flat, numel, present } in inbox {
        let start = Instant::now();
        let values = flat.and_then(|t| read(&t, &present));
        let read = start.elapsed();
        // A bucket that failed to join or read still takes part (as zeros), so that no rank
        // waits for it; the error reaches the training step through `finish`.
        let (mut sums, failed) = match values {
            Ok(v) => (v, None),
            Err(e) => (vec![0.0; numel + present.len()], Some(e)),
        };
        comm.all_reduce_f32(&mut sums);
        let all_reduce = start.elapsed() - read;
        let values = failed.map_or(Ok(sums), Err);
        if results.send(Done { bucket, values, read, all_reduce }).is_err() {
            return;
        }
    }
}

/// A bucket's joined gradients on the host, in one read, then this rank's presence counts.
fn read(flat: &Tensor, present: &[bool]) -> Result<Vec<f32>> {
    let mut values = flat.to_vec::<f32>()?;
    values.extend(present.iter().map(|&p| f32::from(u8::from(p))));
    Ok(values)
}
