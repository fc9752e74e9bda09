//! The controller (cf. slurmctld + slurmdbd): owns all cluster state, schedules, persists
//! to SQLite, serves front-ends on a Unix socket and drives node agents.
//!
//! Runtime shape (STYLE.md): a listener task, one task per front-end connection, one task
//! per agent link (remote nodes' links reconnect through SSH, see [`agents`]), the actor (sole owner of [`state::Cluster`]) and the store thread.
//! Messages reach the actor on one channel; the actor applies reactor functions and
//! carries out their [`state::Effects`]. Scheduling runs after each burst of messages
//! that asked for it, and on a one-second tick (time limits, MinJobAge purge).

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
