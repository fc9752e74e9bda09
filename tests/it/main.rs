//! End-to-end tests: real controller, agent and stepd processes driven through the real
//! front-ends (see `harness`).

mod harness;
mod isolation;
mod personal;
mod protocol;
mod robustness;
mod ssh;
mod steps;
