//! The MPI transport (feature `mpi`): rsmpi over the MPICH or Open MPI the system has.

use std::sync::Arc;

use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Root as _};
use mpi::Threading;

use super::{launched_by_mpi, Communicator, Distributed};
use crate::error::{Error, Result};

/// One MPI communicator of the job.
struct Mpi {
    comm: SimpleCommunicator,
    rank: usize,
    size: usize,
    /// MPI is finalized when the universe drops: after every communicator (declared last, so
    /// dropped after `comm`).
    _universe: Arc<Universe>,
}

// SAFETY: MPI runs at MPI_THREAD_MULTIPLE (`from_mpi_env` refuses less), so any thread may use
// a communicator; Open MPI's handles are pointers, which is all that keeps these types from
// being Send and Sync on their own. Collectives of one communicator are never run by two
// threads at once: the reducer's thread has a duplicate of its own.
unsafe impl Send for Mpi {}
unsafe impl Sync for Mpi {}

impl Mpi {
    fn new(comm: SimpleCommunicator, universe: Arc<Universe>) -> Mpi {
        let (rank, size) = (comm.rank() as usize, comm.size() as usize);
        Mpi { comm, rank, size, _universe: universe }
    }
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce_f32(&self, values: &mut [f32]) {
        let send = values.to_vec();
        self.comm.all_reduce_into(&send[..], values, SystemOperation::sum());
    }

    fn all_reduce_f64(&self, values: &mut [f64]) {
        let send = values.to_vec();
        self.comm.all_reduce_into(&send[..], values, SystemOperation::sum());
    }

    fn broadcast(&self, bytes: &mut [u8], root: usize) {
        self.comm.process_at_rank(root as i32).broadcast_into(bytes);
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let mut counts = vec![0i32; self.size];
        self.comm.all_gather_into(&(mine.len() as i32), &mut counts[..]);
        let displs: Vec<i32> = counts.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect();
        let mut all = vec![0u8; counts.iter().map(|&n| n as usize).sum()];
        self.comm.all_gather_varcount_into(mine, &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]));
        counts.iter().zip(&displs).map(|(&n, &at)| all[at as usize..(at + n) as usize].to_vec()).collect()
    }

    fn barrier(&self) {
        self.comm.barrier();
    }

    fn duplicate(&self) -> Box<dyn Communicator> {
        Box::new(Mpi::new(self.comm.duplicate(), self._universe.clone()))
    }

    fn abort(&self, code: i32) -> ! {
        self.comm.abort(code)
    }
}

impl Distributed {
    /// Joins the MPI job this process was started in (`mpirun -n N`, `mpiexec`, `srun`), or
    /// `Ok(None)` when no MPI launcher started it. The local rank comes from the ranks that
    /// share this host's memory (`MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`). MPI stays up
    /// until the last clone of the result is dropped.
    pub fn from_mpi_env() -> Result<Option<Distributed>> {
        if !launched_by_mpi() {
            return Ok(None);
        }
        let fail = |detail: &str| Err(Error::Distributed { detail: detail.into() });
        let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Multiple) else {
            return fail("MPI was initialized already; join the job once per process");
        };
        if threading != Threading::Multiple {
            return fail(&format!(
                "this MPI library offers threads at level {threading:?}, and the gradient reducer all-reduces on a thread of its own (MPI_THREAD_MULTIPLE); use an MPI built with thread support (MPICH and Open MPI packages are)"
            ));
        }
        let universe = Arc::new(universe);
        let world = universe.world();
        let host = world.split_shared(world.rank());
        let (local_rank, local_size) = (host.rank() as usize, host.size() as usize);
        Ok(Some(Distributed::new(Arc::new(Mpi::new(world, universe)), local_rank, local_size)))
    }
}
