//! The thread that hands recorded batches to the driver. wgpu encodes a batch's commands and
//! tracks its resources in `CommandEncoder::finish`, then `Queue::submit` passes it on: on an
//! H100 about a third of a small model's step, and of vit's, whose host time is its step. On a
//! thread of their own they overlap with the recording of the next batch, as CUDA's launch
//! queue lets the host run ahead.
//!
//! Batches go in the order they were handed over, each with the parameter-block arena's
//! contents written just before it, as the recorder's own submit did. Anything that needs a
//! batch on the queue (mapping a buffer it copies into, waiting for the device) first waits
//! for it here ([`Submitter::reach`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};

/// One batch to hand to the driver.
pub(crate) struct Job {
    pub(crate) encoder: wgpu::CommandEncoder,
    /// The parameter blocks for the arena, written before the batch (empty with immediates).
    pub(crate) meta: Vec<u32>,
    /// Upload staging bytes the batch releases once the GPU has run it.
    pub(crate) uploads: u64,
}

/// Batches submitted to the queue so far, and the lock and condition a waiter sleeps on.
#[derive(Default)]
struct Count {
    done: AtomicU64,
    lock: Mutex<()>,
    ready: Condvar,
}

impl Count {
    /// Counts a batch on the queue and wakes the waiters.
    fn one_more(&self) {
        let _held = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.done.fetch_add(1, Ordering::Release);
        self.ready.notify_all();
    }
}

/// Nanoseconds the submit threads have spent in `finish`, and in the arena's write and
/// `submit`: what `xtask bench-model` reports beside the recording thread's phases.
static FINISH_NS: AtomicU64 = AtomicU64::new(0);
static SUBMIT_NS: AtomicU64 = AtomicU64::new(0);

/// See [`FINISH_NS`].
pub(crate) fn thread_ns() -> (u64, u64) {
    (FINISH_NS.load(Ordering::Relaxed), SUBMIT_NS.load(Ordering::Relaxed))
}

pub(crate) struct Submitter {
    jobs: Option<Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
    submitted: Arc<Count>,
}

/// How long [`Submitter::reach`] spins before it sleeps: a batch's `finish` and submit take
/// tens of microseconds, and a sleeping thread wakes tens of microseconds late.
const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

impl Submitter {
    /// Starts the thread; `staging` is the device's count of staging bytes not yet released.
    pub(crate) fn start(queue: wgpu::Queue, arena: wgpu::Buffer, staging: Arc<AtomicU64>) -> std::io::Result<Submitter> {
        let (jobs, received) = channel::<Job>();
        let submitted: Arc<Count> = Arc::default();
        let count = submitted.clone();
        let thread = std::thread::Builder::new().name("liandan-submit".into()).spawn(move || {
            for job in received {
                let start = std::time::Instant::now();
                let commands = job.encoder.finish();
                let finished = std::time::Instant::now();
                if !job.meta.is_empty() {
                    queue.write_buffer(&arena, 0, bytemuck::cast_slice(&job.meta));
                }
                queue.submit([commands]);
                FINISH_NS.fetch_add((finished - start).as_nanos() as u64, Ordering::Relaxed);
                SUBMIT_NS.fetch_add(finished.elapsed().as_nanos() as u64, Ordering::Relaxed);
                if job.uploads > 0 {
                    let (staging, bytes) = (staging.clone(), job.uploads);
                    queue.on_submitted_work_done(move || {
                        staging.fetch_sub(bytes, Ordering::Relaxed);
                    });
                }
                count.one_more();
            }
        })?;
        Ok(Submitter { jobs: Some(jobs), thread: Some(thread), submitted })
    }

    /// Hands `job` over: it is submitted after every batch handed over before it.
    pub(crate) fn hand(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The thread lives as long as the sender; a send fails only if it panicked, and
            // then the batch is lost with it, as a driver's crash would lose it.
            let _ = jobs.send(job);
        }
    }

    /// Counts a batch the recorder submitted itself, once every batch before it was.
    pub(crate) fn submitted_elsewhere(&self) {
        self.submitted.one_more();
    }

    /// Returns once `n` batches in all have been submitted to the queue.
    pub(crate) fn reach(&self, n: u64) {
        let count = &*self.submitted;
        let start = std::time::Instant::now();
        while count.done.load(Ordering::Acquire) < n && start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
        let mut held = count.lock.lock().unwrap_or_else(|p| p.into_inner());
        while count.done.load(Ordering::Acquire) < n {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return;
            }
            held = count.ready.wait_timeout(held, std::time::Duration::from_millis(10)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Drop for Submitter {
    /// Closes the channel, so the thread submits what it holds and ends.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
