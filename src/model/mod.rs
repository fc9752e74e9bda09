//! The Slurm vocabulary as plain data: jobs, steps, nodes, partitions, their states
//! and reasons, and the textual forms Slurm prints for them.
//!
//! Pure: no I/O, no clock. Everything here is serde-serialisable because it travels on
//! the wire (`proto`) and into the store (`ctld::store`).

pub mod acct_ops;
pub mod array;
pub mod assoc;
pub mod billing;
pub mod constraint;
pub mod container;
pub mod depend;
pub mod gpu_bind;
pub mod gres;
pub mod hostlist;
pub mod job;
pub mod limit;
pub mod mpi;
pub mod node;
pub mod partition;
pub mod preempt;
pub mod priority;
pub mod reservation;
pub mod step;
pub mod time;
pub mod topology;

pub use job::{
    Env, ExitStatus, HoldKind, Job, JobSpec, JobState, MemReq, Reason, SignalSpec, StepRecord,
    Suspension, TimeLimit,
};
pub use node::{Node, NodeState};
pub use partition::{OverSubscribe, Partition, PartitionState};
