//! End-to-end tests: real controller, agent and stepd processes driven through the real
//! front-ends (see `harness`).

mod env;
mod harness;
mod outputs;
mod personal;
mod protocol;
mod sbatch;
mod states;
