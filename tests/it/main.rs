//! End-to-end tests: real controller, agent and stepd processes driven through the real
//! front-ends (see `harness`).

mod arrays;
mod depend;
mod env;
mod errors;
mod examples;
mod harness;
mod hetjob;
mod holds;
mod isolation;
mod limits;
mod limits_policy;
mod outputs;
mod personal;
mod preempt;
mod protocol;
mod recovery;
mod requeue;
mod robustness;
mod sacct;
mod sacctmgr;
mod sbatch;
mod scancel;
mod sched;
mod scontrol;
mod sinfo;
mod squeue;
mod ssh;
mod states;
mod steps;
mod suspend;
mod system_mode;
