//! The bucketed gradient all-reduce of data-parallel training (DDP's `Reducer`).
//!
//! Parameters are packed into buckets in reverse order of registration, the order backward
//! usually finishes them in; the first bucket is small (1 MB, as in PyTorch) so that
//! communication starts early. A post-accumulate-grad hook on every parameter counts what is
//! ready; when a bucket is complete, and every bucket before it has gone, its gradients go to
//! the reducer's thread, which reads them back to the host and all-reduces them over MPI while
//! the main thread records the rest of backward. [`Reducer::finish`] sends what is left, waits,
//! and uploads each averaged gradient once. Buckets always go in the same order on every rank,
//! which is what keeps MPI's collectives matched.
//!
//! Each bucket also carries one count per parameter, how many ranks had a gradient for it: a
//! parameter no rank used keeps no gradient (the optimizer skips it), as in PyTorch.

use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use liandan_tensor::{DType, HookHandle, Tensor};

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
    /// Seconds the reducer's thread spent reading gradients back to the host (on a GPU this
    /// includes waiting for backward to compute them).
    pub read_s: f64,
    /// Seconds in the MPI all-reduce itself.
    pub all_reduce_s: f64,
    /// Seconds the training step waited for the reducer after backward: the communication
    /// that did not overlap backward.
    pub waited_s: f64,
    /// Seconds spent uploading the averaged gradients.
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
    grads: Vec<Option<Tensor>>,
    numels: Vec<usize>,
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
        let job = Job { bucket: b, grads: params.iter().map(Tensor::grad).collect(), numels: params.iter().map(Tensor::numel).collect() };
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
            let (grads, counts) = values.split_at(values.len() - params.len());
            let mut at = 0;
            for (p, &count) in params.iter().zip(counts) {
                let n = p.numel();
                let mean: Vec<f32> = grads[at..at + n].iter().map(|g| g * scale).collect();
                at += n;
                if count == 0.0 {
                    p.set_grad(None);
                    continue;
                }
                let g = Tensor::from_vec(mean, p.shape(), p.device())?;
                p.set_grad(Some(if p.dtype() == DType::F32 { g } else { g.to_dtype(p.dtype())? }));
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

/// The reducer's thread: read each bucket back, all-reduce it, hand it back.
fn work(comm: &dyn Communicator, inbox: Receiver<Job>, results: Sender<Done>) {
    for job in inbox {
        let start = Instant::now();
        let values = read(&job);
        let read = start.elapsed();
        // A bucket that failed to read still takes part (as zeros), so that no rank waits for
        // it; the error reaches the training step through `finish`.
        let mut flat = match &values {
            Ok(v) => v.clone(),
            Err(_) => vec![0.0; job.numels.iter().sum::<usize>() + job.numels.len()],
        };
        comm.all_reduce_f32(&mut flat);
        let all_reduce = start.elapsed() - read;
        let values = values.map(|_| flat);
        if results.send(Done { bucket: job.bucket, values, read, all_reduce }).is_err() {
            return;
        }
    }
}

/// A bucket's gradients on the host, zeros for those missing, then the presence counts.
fn read(job: &Job) -> Result<Vec<f32>> {
    let mut flat = Vec::with_capacity(job.numels.iter().sum::<usize>() + job.numels.len());
    for (g, &n) in job.grads.iter().zip(&job.numels) {
        match g {
            Some(g) if g.dtype() == DType::F32 => flat.extend(g.to_vec::<f32>()?),
            Some(g) => flat.extend(g.to_vec_f64()?.into_iter().map(|v| v as f32)),
            None => flat.resize(flat.len() + n, 0.0),
        }
    }
    flat.extend(job.grads.iter().map(|g| f32::from(u8::from(g.is_some()))));
    Ok(flat)
}
