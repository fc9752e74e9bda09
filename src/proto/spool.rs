//! Files an agent and its stepd processes share in a job's spool directory
//! (`<spool_dir>/job_<id>/`). stepd is detached from the agent so that running jobs
//! survive agent and controller restarts; these files are how a restarted agent learns
//! what its predecessor's stepd processes did.
//!
//! Every file is written to a temporary name and renamed into place, so a reader sees
//! either nothing or the whole record.

use super::codec::{decode, encode};
use super::{EndKind, LaunchBatch, ProtoError};
use crate::model::ExitStatus;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The launch request (a [`LaunchBatch`]), written by the agent.
pub const LAUNCH: &str = "launch";
/// stepd's own pid, written by stepd at start.
pub const STEPD_PID: &str = "stepd.pid";
/// The batch shell's pid (also its process group), written by stepd after spawning it.
pub const JOB_PID: &str = "job.pid";
/// A [`TerminateRequest`], written by the agent before it sends SIGTERM to stepd.
pub const TERMINATE: &str = "terminate";
/// The [`StepResult`], written by stepd when the batch shell is gone.
pub const RESULT: &str = "result";
/// The suspend state the controller last asked for (a `bool`, true = suspended); stepd
/// reads it on SIGUSR2.
pub const SUSPEND: &str = "suspend";
/// The [`super::LaunchStep`] of a numbered step's directory (`step_<job>.<step>`).
pub const STEP_LAUNCH: &str = "launch_step";

/// Asks stepd to end the job: SIGCONT+SIGTERM to its processes, SIGKILL after
/// `kill_wait` seconds, and `message` appended to the job's stderr first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminateRequest {
    pub kill_wait: u32,
    pub message: Option<String>,
}

/// How the batch step ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    pub kind: EndKind,
    pub status: ExitStatus,
    /// Epoch seconds.
    pub time: i64,
    /// Peak RSS of the step's processes, KiB.
    pub max_rss_kib: u64,
    /// User + system CPU seconds of the step's processes.
    pub cpu_secs: f64,
    pub oom: bool,
    pub message: Option<String>,
}

/// A temporary name private to this process: the agent and stepd both record stepd's
/// pid, and two writers sharing one temporary file would make one rename fail.
fn tmp_name(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `value` to `dir/name` atomically.
pub fn write<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), ProtoError> {
    let tmp = tmp_name(dir, name);
    std::fs::write(&tmp, encode(value)?)?;
    std::fs::rename(&tmp, dir.join(name))?;
    Ok(())
}

/// Reads `dir/name`; `Ok(None)` when it does not exist.
pub fn read<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> Result<Option<T>, ProtoError> {
    match std::fs::read(dir.join(name)) {
        Ok(b) => decode(&b).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads a pid file (decimal text); `None` when absent or malformed.
pub fn read_pid(dir: &Path, name: &str) -> Option<i32> {
    std::fs::read_to_string(dir.join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Writes a pid file atomically.
pub fn write_pid(dir: &Path, name: &str, pid: u32) -> std::io::Result<()> {
    let tmp = tmp_name(dir, name);
    std::fs::write(&tmp, format!("{pid}\n"))?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Reads the launch record.
pub fn read_launch(dir: &Path) -> Result<Option<LaunchBatch>, ProtoError> {
    read(dir, LAUNCH)
}
