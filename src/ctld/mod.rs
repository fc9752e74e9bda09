//! The controller (cf. slurmctld + slurmdbd): owns all cluster state, schedules, persists
//! to SQLite, serves front-ends on a Unix socket and drives node agents.
//!
//! Runtime shape (STYLE.md): a listener task, one task per front-end connection, one task
//! per agent link (remote nodes' links reconnect through SSH, see [`agents`]), the actor
//! (sole owner of [`state::Cluster`]) and the store thread. Messages reach the actor on
//! one channel; the actor applies reactor functions and carries out their
//! [`state::Effects`]. Scheduling runs after each burst of messages that asked for it,
//! and on a one-second tick (time limits, MinJobAge purge).
//!
//! Where things are:
//! - `daemon`: `sluice controller` options, background start, detaching, `--stop`,
//!   the state and spool directory locks.
//! - `main_loop`: [`run`]: loading state, starting the store, agent links and listener,
//!   the loop that feeds the actor and spaces scheduling passes.
//! - `serve`: connection tasks (requests, step streams, agent links) that turn frames
//!   into the actor's messages.
//! - `actor`: the actor: agent and step-stream messages, and the one place a request's
//!   reply is routed (`Actor::route`).
//! - [`handlers`]: one module per family of requests, each a function from the request
//!   and a [`handlers::Ctx`] to a [`handlers::Reply`] (now / after commit / later).
//! - [`state`] and its sub-states ([`steps::StepTable`], [`resv::Resvs`],
//!   [`acct::Accounting`]): the pure reactors, tested without I/O.
//! - [`store`]: SQLite, group commit, accounting queries.
//!
//! To add a request: a `proto::Request` (and `Response`) variant, a function in its
//! family's module under [`handlers`] returning a [`handlers::Reply`], and one arm in
//! [`handlers::dispatch`]; a test in `handlers/tests.rs` calls it on a bare cluster.

pub mod acct;
mod actor;
pub mod agents;
pub mod array;
pub mod conns;
mod daemon;
pub mod depend;
pub mod downtime;
pub mod gres_detect;
pub mod handlers;
pub mod het;
pub mod jobtable;
mod main_loop;
pub mod names;
mod relay;
pub mod resv;
mod serve;
pub mod state;
pub mod steps;
pub mod store;
#[cfg(test)]
mod testutil;

use actor::Msg;
pub use daemon::cli_main;
pub use main_loop::run;
use serve::{agent_link, serve_stream};
