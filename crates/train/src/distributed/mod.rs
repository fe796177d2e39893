//! Data-parallel training over several processes, as PyTorch's `DistributedDataParallel` does
//! it: every process (a *rank*) holds a replica of the model and trains on its own shard of
//! each epoch, and the gradients are averaged across ranks before every optimizer step, so that
//! N ranks at batch B train as one process at batch N·B would.
//!
//! - [`Distributed`]: this process's place in the job (rank, world size, rank on its host),
//!   the device that the local rank picks, and the collectives the training loop needs:
//!   broadcasting the model from rank 0, all-reducing values, a barrier, and a check that every
//!   rank runs the same model and settings ([`Distributed::check_same`]), which fails with the
//!   first difference rather than hanging in a collective that the ranks disagree on.
//! - [`Reducer`]: the bucketed gradient all-reduce. Each parameter's gradient is handed off by
//!   an autograd hook as soon as backward has finished it; gradients are packed into buckets of
//!   about 25 MB, each joined on the device, read back to the host in one copy and all-reduced
//!   on a thread of their own while backward computes the rest, then uploaded once.
//! - [`Communicator`]: the transport. MPI (feature `mpi`: `Distributed::from_mpi_env`) is the
//!   one liandan ships; the trait lets another transport, or a test, stand in.
//!
//! [`Trainer::with_distributed`](crate::Trainer::with_distributed) does the rest: it shards
//! the data, keeps BatchNorm's statistics per rank (rank 0's are the ones evaluated and saved,
//! as DDP's `broadcast_buffers` makes them), skips the all-reduce on steps that only accumulate
//! gradients (DDP's `no_sync`), averages losses and metrics across ranks, and leaves printing
//! and checkpoints to rank 0.
//!
//! Errors: a collective cannot fail halfway in a way a rank could recover from (MPI ends the
//! whole job on a communication error). When one rank fails on its own (a full disk, bad data),
//! the others would wait for it forever: call [`Distributed::abort`], which ends every rank.

#[cfg(feature = "mpi")]
mod mpi;
mod reducer;

use std::sync::Arc;

use liandan_nn::{DeviceKind, Module, TensorKind};
use liandan_tensor::{Device, Tensor};

use crate::error::{Error, Result};

pub use reducer::{Reducer, ReducerStats};

/// How PyTorch's DDP sizes its gradient buckets: 25 MB.
pub const BUCKET_BYTES: usize = 25 << 20;

/// The collectives data-parallel training needs, over the ranks of one job. Every rank calls
/// each collective in the same order; they block until all ranks have joined.
pub trait Communicator: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Replaces `values` by their element-wise sum over all ranks.
    fn all_reduce_f32(&self, values: &mut [f32]);
    /// Replaces `values` by their element-wise sum over all ranks.
    fn all_reduce_f64(&self, values: &mut [f64]);
    /// Replaces `bytes` by rank `root`'s (the same length on every rank).
    fn broadcast(&self, bytes: &mut [u8], root: usize);
    /// Every rank's `mine`, in rank order (lengths may differ).
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>>;
    /// Returns once every rank has called it.
    fn barrier(&self);
    /// A communicator over the same ranks whose collectives never mix with this one's (the
    /// reducer's thread uses one). Collective: every rank calls it.
    fn duplicate(&self) -> Box<dyn Communicator>;
    /// Ends every rank of the job with exit status `code`.
    fn abort(&self, code: i32) -> !;
}

/// How a tensor is combined across ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// The sum divided by the number of ranks.
    Mean,
}

/// This process's place in a data-parallel job, and the collectives over its ranks. Cheap to
/// clone: clones share the communicator.
#[derive(Clone)]
pub struct Distributed {
    comm: Arc<dyn Communicator>,
    local_rank: usize,
    local_size: usize,
    bucket_bytes: usize,
}

impl std::fmt::Debug for Distributed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Distributed {{ rank: {} of {}, local rank: {} of {} }}", self.rank(), self.size(), self.local_rank, self.local_size)
    }
}

impl Distributed {
    /// A job over `comm`, where this process is rank `local_rank` of the `local_size` ranks on
    /// its host.
    pub fn new(comm: Arc<dyn Communicator>, local_rank: usize, local_size: usize) -> Distributed {
        Distributed { comm, local_rank, local_size, bucket_bytes: BUCKET_BYTES }
    }

    /// Sets the size of the reducer's gradient buckets (at least one gradient goes in each).
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Distributed {
        self.bucket_bytes = bytes.max(1);
        self
    }

    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks (`WORLD_SIZE`).
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// This rank's index among the ranks on its host (`LOCAL_RANK`).
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The number of ranks on this host.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// Whether this is rank 0, the one that prints and saves.
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// The gradient bucket size of the reducer.
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_bytes
    }

    pub fn communicator(&self) -> &Arc<dyn Communicator> {
        &self.comm
    }

    /// The device this rank trains on, given the one the process would use alone: on a GPU,
    /// the host's GPU number `local_rank` of that kind (`gpu:{local_rank}` on a host of
    /// identical GPUs) when there are that many, else `process_device` itself (two ranks can
    /// share a GPU). The CPU stays the CPU.
    pub fn device_for(&self, process_device: &Device) -> Device {
        let kind = process_device.kind();
        if kind == DeviceKind::Cpu {
            return process_device.clone();
        }
        Device::gpus().into_iter().filter(|d| d.kind() == kind).nth(self.local_rank).unwrap_or_else(|| process_device.clone())
    }

    /// Replaces `values` by their sum, or mean, over all ranks.
    pub fn all_reduce_f64(&self, values: &mut [f64], op: ReduceOp) {
        self.comm.all_reduce_f64(values);
        if op == ReduceOp::Mean {
            let n = self.size() as f64;
            values.iter_mut().for_each(|v| *v /= n);
        }
    }

    /// `t` summed, or averaged, over all ranks: a new tensor like `t`, on its device (through
    /// the host).
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<Tensor> {
        let mut values = t.to_vec_f64()?;
        self.all_reduce_f64(&mut values, op);
        Ok(Tensor::from_f64s(&values, t.shape(), t.dtype(), t.device())?)
    }

    /// Whether `flag` is set on any rank.
    pub fn any(&self, flag: bool) -> bool {
        let mut v = [f64::from(u8::from(flag))];
        self.comm.all_reduce_f64(&mut v);
        v[0] > 0.0
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) {
        self.comm.barrier();
    }

    /// Every rank's bytes, in rank order.
    pub fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        self.comm.all_gather(mine)
    }

    /// Ends every rank of the job with exit status `code` (MPI_Abort): what a rank that failed
    /// on its own does, so that the others do not wait for it forever.
    pub fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }

    /// Gives every rank rank 0's values of `module`'s tensors: its parameters and buffers
    /// (`kinds` both), or its buffers alone (BatchNorm's statistics before an evaluation).
    pub fn broadcast_module(&self, module: &dyn Module, kinds: &[TensorKind]) -> Result<()> {
        let mut tensors = Vec::new();
        module.visit("", &mut |_, t, kind| {
            if kinds.contains(&kind) {
                tensors.push(t.clone());
            }
        });
        self.broadcast_tensors(&tensors)
    }

    /// Gives every rank rank 0's values of `tensors` (each rank's list alike), in one
    /// collective. Values travel as f64, which holds every f32, f16, bf16 and count exactly.
    pub fn broadcast_tensors(&self, tensors: &[Tensor]) -> Result<()> {
        let total = tensors.iter().map(Tensor::numel).sum();
        let mut values = Vec::with_capacity(total);
        if self.is_root() {
            for t in tensors {
                values.extend(t.to_vec_f64()?);
            }
        } else {
            values.resize(total, 0.0);
        }
        self.comm.broadcast(bytemuck::cast_slice_mut(&mut values[..]), 0);
        if !self.is_root() {
            let mut at = 0;
            for t in tensors {
                let n = t.numel();
                t.assign(&Tensor::from_f64s(&values[at..at + n], t.shape(), t.dtype(), t.device())?)?;
                at += n;
            }
        }
        Ok(())
    }

    /// Checks that every rank describes `what` (a model, a run's settings) by the same
    /// `(name, value)` entries, in one collective. Ranks that disagree all get the same error,
    /// naming the first entry where a rank differs from rank 0, so that none of them goes on
    /// to a collective the others never join.
    pub fn check_same(&self, what: &str, entries: &[(String, String)]) -> Result<()> {
        let mine = serde_json::to_vec(entries).expect("strings serialize");
        let all: Vec<Vec<(String, String)>> = self
            .comm
            .all_gather(&mine)
            .iter()
            .enumerate()
            .map(|(r, bytes)| serde_json::from_slice(bytes).map_err(|e| disagree(format!("rank {r} sent a description of {what} that does not parse ({e})"))))
            .collect::<Result<_>>()?;
        let root = &all[0];
        for (r, theirs) in all.iter().enumerate().skip(1) {
            if let Some(detail) = first_difference(root, theirs, r) {
                return Err(disagree(format!("the ranks run different {what}: {detail}; start every rank with the same command and files")));
            }
        }
        Ok(())
    }
}

fn disagree(detail: String) -> Error {
    Error::Distributed { detail }
}

/// Where rank `r`'s entries first differ from rank 0's, in words.
fn first_difference(root: &[(String, String)], theirs: &[(String, String)], r: usize) -> Option<String> {
    for (i, (a, b)) in root.iter().zip(theirs).enumerate() {
        if a != b {
            return Some(match a.0 == b.0 {
                true => format!("{} is {} on rank 0 but {} on rank {r}", a.0, a.1, b.1),
                false => format!("entry {} is {} {} on rank 0 but {} {} on rank {r}", i + 1, a.0, a.1, b.0, b.1),
            });
        }
    }
    let (n0, n) = (root.len(), theirs.len());
    match n0.cmp(&n) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!("rank 0 has {n0} entries and rank {r} {n}; the first that rank {r} lacks is {} {}", root[n].0, root[n].1)),
        std::cmp::Ordering::Less => Some(format!("rank 0 has {n0} entries and rank {r} {n}; the first that rank 0 lacks is {} {}", theirs[n0].0, theirs[n0].1)),
    }
}

/// A model's tensors as [`Distributed::check_same`] entries: name, shape and dtype.
pub fn describe_module(module: &dyn Module) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    module.visit("", &mut |name, t, kind| {
        let kind = match kind {
            TensorKind::Parameter => "parameter",
            TensorKind::Buffer => "buffer",
        };
        entries.push((format!("{kind} `{name}`"), format!("{:?} {}", t.shape(), t.dtype())));
    });
    entries
}

/// Whether this process was started by an MPI launcher (`mpirun`, `mpiexec`, `srun` with PMI),
/// from the variables launchers set: MPICH's and Intel MPI's `PMI_RANK`, PMIx's `PMIX_RANK`,
/// Open MPI's `OMPI_COMM_WORLD_SIZE`, MVAPICH's `MV2_COMM_WORLD_SIZE`.
pub fn launched_by_mpi() -> bool {
    ["PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"].iter().any(|v| std::env::var_os(v).is_some())
}
