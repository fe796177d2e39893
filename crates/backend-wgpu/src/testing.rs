//! Hooks for this workspace's tests and benchmarks: counters of what ran, and knobs that
//! force one kernel or cut where the rules would pick another, so that each can be checked and
//! timed. Not for programs: the rules pick the fastest kernels they know.

pub use crate::gpu::{dispatches_recorded, host_phases, HostPhases, UPLOAD_LIMIT};
pub use crate::matmul::heads_products_recorded;
pub use crate::options::{Knobs, RowSums};
