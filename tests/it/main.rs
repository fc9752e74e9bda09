//! End-to-end tests: real controller, agent and stepd processes driven through the real
//! front-ends (see `harness`).

mod arrays;
mod depend;
mod harness;
mod hetjob;
mod holds;
mod isolation;
mod personal;
mod protocol;
mod requeue;
mod robustness;
mod ssh;
