//! sluice: a Slurm-compatible workload manager in one binary.
//!
//! Layering (STYLE.md "Dependency direction"): `model` ← `config`, `jobspec` ← `proto` ←
//! `transport`; `sched` is pure and imports only `model` and `config`; the roles `ctld`,
//! `agent`, `stepd` meet only through `proto`; `cli` sits on top.

pub mod agent;
pub mod cli;
pub mod config;
pub mod ctld;
pub mod jobspec;
pub mod logsink;
pub mod model;
pub mod proto;
pub mod sched;
pub mod sim;
pub mod stepd;
pub mod transport;
