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
/// Locked (`flock`, exclusive) by the stepd supervising the job, for its lifetime: a
/// second stepd started for the same launch record finds it taken and leaves.
pub const STEPD_LOCK: &str = "stepd.lock";
/// A [`TerminateRequest`], written by the agent before it sends SIGTERM to stepd.
pub const TERMINATE: &str = "terminate";
/// The [`StepResult`], written by stepd when the batch shell is gone.
pub const RESULT: &str = "result";
/// The suspend state the controller last asked for (a `bool`, true = suspended); stepd
/// reads it on SIGUSR2.
pub const SUSPEND: &str = "suspend";
/// The batch step's latest usage sample (a [`crate::model::step::StepUsage`]),
/// rewritten by stepd every few seconds while the job runs; the agent forwards it
/// with its heartbeats (for `sstat` on `JOB.batch`).
pub const USAGE: &str = "usage";
/// The [`super::LaunchStep`] of a numbered step's directory (`step_<job>.<step>`).
pub const STEP_LAUNCH: &str = "launch_step";
/// The socket a new agent connects to, in a numbered step's spool directory, to
/// re-attach to its stepd (`stepd::stream`).
pub const STEPD_SOCKET: &str = "stepd.sock";

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
    /// The batch step's final usage (peaks, averages, CPU split); `None` when it never
    /// ran.
    #[serde(default)]
    pub usage: Option<crate::model::step::StepUsage>,
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

/// Reads a pid file (decimal text) for signalling: `None` when absent, malformed, not
/// above 1 (`kill` of 0, -1 or 1 would reach this process group, every process or
/// init), or no longer the recorded process: a process of that pid exists but started
/// at another time than [`write_pid`] recorded (the pid was reused). A recorded process
/// that is gone still gives its pid: its process group may live on (and a pid in use
/// as a process group id is never reused), and a signal to a pid nobody has fails
/// harmlessly.
pub fn read_pid(dir: &Path, name: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(dir.join(name))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    if pid <= 1 {
        return None;
    }
    let recorded = std::fs::read_to_string(dir.join(start_name(name)))
        .ok()
        .and_then(|t| {
            let (p, start) = t.trim().split_once(' ')?;
            (p.parse::<i32>().ok()? == pid).then_some(start.parse::<u64>().ok()?)
        });
    match (recorded, proc_start_time(pid)) {
        (Some(then), Some(now)) if then != now => None,
        _ => Some(pid),
    }
}

/// Writes a pid file atomically, and before it the process's start time
/// (`<name>.start`: `PID TICKS`), by which [`read_pid`] tells the process from a later
/// one that got its pid.
pub fn write_pid(dir: &Path, name: &str, pid: u32) -> std::io::Result<()> {
    if let Some(start) = i32::try_from(pid).ok().and_then(proc_start_time) {
        let start_file = start_name(name);
        let tmp = tmp_name(dir, &start_file);
        std::fs::write(&tmp, format!("{pid} {start}\n"))?;
        std::fs::rename(&tmp, dir.join(start_file))?;
    }
    let tmp = tmp_name(dir, name);
    std::fs::write(&tmp, format!("{pid}\n"))?;
    std::fs::rename(&tmp, dir.join(name))
}

/// The file holding the start time of the process in pid file `name`.
fn start_name(name: &str) -> String {
    format!("{name}.start")
}

/// When process `pid` started, in clock ticks after boot (field 22 of
/// `/proc/<pid>/stat`, proc(5)); `None` when there is no such process.
pub fn proc_start_time(pid: i32) -> Option<u64> {
    start_time_of_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Field 22 of a `/proc/<pid>/stat` line.
fn start_time_of_stat(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces or ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Reads the launch record.
pub fn read_launch(dir: &Path) -> Result<Option<LaunchBatch>, ProtoError> {
    read(dir, LAUNCH)
}

#[cfg(test)]
mod pid_tests {
    use super::*;

    #[test]
    fn a_pid_file_names_its_process_and_no_later_one() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        write_pid(d.path(), JOB_PID, me).unwrap();
        assert_eq!(read_pid(d.path(), JOB_PID), Some(me as i32));
        let start = proc_start_time(me as i32).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("job.pid.start")).unwrap(),
            format!("{me} {start}\n")
        );
        // The same pid, another start time: a later process that got the pid.
        std::fs::write(
            d.path().join("job.pid.start"),
            format!("{me} {}\n", start + 1),
        )
        .unwrap();
        assert_eq!(read_pid(d.path(), JOB_PID), None);
        // A start record of another pid says nothing about this one.
        std::fs::write(d.path().join("job.pid.start"), "12345678 1\n").unwrap();
        assert_eq!(read_pid(d.path(), JOB_PID), Some(me as i32));
    }

    #[test]
    fn a_gone_process_keeps_its_pid_for_its_group_and_nonsense_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        write_pid(d.path(), STEPD_PID, pid).unwrap();
        child.wait().unwrap();
        assert_eq!(proc_start_time(pid as i32), None);
        assert_eq!(read_pid(d.path(), STEPD_PID), Some(pid as i32));
        for bad in ["0", "1", "-1", "-42", "x", ""] {
            std::fs::write(d.path().join(JOB_PID), bad).unwrap();
            assert_eq!(read_pid(d.path(), JOB_PID), None, "{bad:?}");
        }
        assert_eq!(read_pid(d.path(), "absent.pid"), None);
    }

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_spaces_and_parens() {
        let line = "4242 (a b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 200 18446744073709551615\n";
        assert_eq!(start_time_of_stat(line), Some(987_654));
        assert_eq!(start_time_of_stat("4242 (x) S 1 2"), None);
        // A real line: a child started no earlier than this process.
        let me = proc_start_time(std::process::id() as i32).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let theirs = proc_start_time(child.id() as i32).unwrap();
        assert!(theirs >= me);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
