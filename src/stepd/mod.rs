//! The step supervisor (cf. slurmstepd): `sluice stepd <spool-dir>`, one process per
//! batch job and per numbered step on a node, detached from the agent (its own session)
//! so that the job keeps running if the agent or controller dies.
//!
//! - `batch`: the batch step, the job's script (outcome in the spool's `result` file);
//! - `step`: a numbered (`srun`) step's tasks, their I/O streamed to the agent;
//! - `spawn`: one task's plan (what its child needs, built before fork) and its start;
//! - this file: the entry point, and what both write into a job's files (slurmstepd's
//!   error lines, output paths).
//!
//! Around them: `env` (the job's environment), `isolate` (cgroups), `cpubind`, `gpus`,
//! `nccl`, `usage` and `gpu_usage` (sampling), `task_script` (TaskProlog/TaskEpilog),
//! `stream` (the numbered step's event log and agent link).

mod batch;
pub mod container;
pub mod cpubind;
pub mod env;
pub mod gpu_usage;
pub mod gpus;
pub mod isolate;
pub mod nccl;
pub mod pmi;
mod spawn;
pub mod step;
pub mod stream;
mod task_script;
pub mod usage;

use crate::model::job::ExitStatus;
use crate::proto::spool;
use crate::proto::{EndKind, LaunchBatch};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `sluice stepd <spool-dir>`: supervises the job described by `<spool-dir>/launch`.
pub fn cli_main(args: Vec<OsString>) -> ExitCode {
    const USAGE: &str = "Usage: sluice stepd <job-spool-dir>\n\
        The step supervisor (slurmstepd's twin): the node agent starts one per job and step;\n\
        it is not run by hand.";
    let Some(dir) = args.get(1).map(PathBuf::from) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if matches!(args[1].to_str(), Some("--help" | "-h" | "--usage")) {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if dir.join(step::STEP_LAUNCH).exists() {
        return match step::run(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("stepd: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    match batch::run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepd: {e:#}");
            let r = batch::unstarted(
                EndKind::LaunchFailed,
                ExitStatus::default(),
                Some(format!("{e:#}")),
            );
            if !dir.join(spool::RESULT).exists() {
                let _ = spool::write(&dir, spool::RESULT, &r);
            }
            ExitCode::from(1)
        }
    }
}

/// Expanded stdin/stdout/stderr paths (relative ones are relative to the work dir).
struct Paths {
    stdin: String,
    stdout: String,
    stderr: String,
    /// The job's uid: stepd (root in system mode) writes its notes only into a stderr
    /// file this user owns.
    owner: u32,
}

fn output_paths(job: &crate::model::Job, node: &str) -> Paths {
    let out_pat = job.spec.stdout.clone().unwrap_or_else(|| {
        crate::jobspec::pattern::default_stdout(job.array_task_id.is_some()).to_string()
    });
    let stdout = expand(&out_pat, job, node);
    let stderr = match &job.spec.stderr {
        Some(p) => expand(p, job, node),
        None => stdout.clone(),
    };
    let stdin = match &job.spec.stdin {
        Some(p) => expand(p, job, node),
        None => "/dev/null".into(),
    };
    Paths {
        stdin,
        stdout,
        stderr,
        owner: job.uid,
    }
}

/// Expands an output-file pattern for the batch step of `job` on `node`.
pub fn expand(pattern: &str, job: &crate::model::Job, node: &str) -> String {
    use crate::jobspec::pattern::{PatternCtx, expand_pattern};
    expand_pattern(
        pattern,
        &PatternCtx::batch(
            job.id,
            job.array_task_id.map(|t| (job.array_job_id, t)),
            &job.spec.name,
            &job.user,
            node,
        ),
    )
}

/// The line slurmstepd on `node` writes to a task's stderr when exec of the program
/// named `shown` (the file `file`) fails with `e` (Slurm's `_exec_task`), newline
/// included: `execve(): bad interpreter(<the rest of the #! line>): <error>` when the
/// file exists and starts with `#!` but exec says it does not exist (its interpreter is
/// missing), else `execve(): <shown>: <error>`.
pub fn exec_failure_line(node: &str, shown: &str, file: &Path, e: nix::Error) -> String {
    if e == nix::Error::ENOENT
        && let Some(interp) = shebang(file)
    {
        return format!(
            "slurmstepd-{node}: error: execve(): bad interpreter({interp}): {}\n",
            e.desc()
        );
    }
    format!(
        "slurmstepd-{node}: error: execve(): {shown}: {}\n",
        e.desc()
    )
}

/// The text after `#!` on the first line of file `path` (its first 256 bytes), if it
/// starts so.
fn shebang(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut buf).ok()?;
    let head = buf[..n].strip_prefix(b"#!")?;
    let line = head.split(|&b| b == b'\n').next().unwrap_or(head);
    Some(String::from_utf8_lossy(line).into_owned())
}

/// The line slurmstepd on `node` writes when the task's `what` file (`stdin`,
/// `stdout`) at `path` cannot be opened (its io setup, cf. `io_init_tasks_stdio`),
/// newline included.
pub(crate) fn setup_failure_line(node: &str, what: &str, path: &str, e: nix::Error) -> String {
    format!(
        "slurmstepd-{node}: error: Could not open {what} file {path}: {}\n",
        e.desc()
    )
}

/// The line slurmstepd on `node` writes to a job's stderr when it cannot enter the
/// working directory `dir` (failing with `e`) and runs the job in /tmp instead (Slurm's
/// `_fork_all_tasks` in src/slurmd/slurmstepd/mgr.c), newline included.
pub fn chdir_fallback_line(node: &str, dir: &str, e: nix::Error) -> String {
    format!(
        "slurmstepd-{node}: error: couldn't chdir to `{dir}': {}: going to /tmp instead\n",
        e.desc()
    )
}

/// Waits, at most `limit`, until the directory of every file in `outputs` exists and
/// `input` (when given) exists, polling every 20 ms; returns at once when they already
/// do, so a launch whose directories exist stays fast. Paths are absolute (see
/// [`under_work_dir`]). After `limit` it returns anyway and the open that follows fails
/// with slurmstepd's `Could not open … file` line. This is sluice's tolerance for tools
/// (submitit) that create the `%j/` output folder only after sbatch or srun returns,
/// a race Slurm's slower launch lets them win; config `launch_io_wait`.
pub(crate) fn wait_for_io_paths(outputs: &[&str], input: Option<&str>, limit: std::time::Duration) {
    let missing = || {
        outputs.iter().any(|f| {
            Path::new(f)
                .parent()
                .is_some_and(|d| !d.as_os_str().is_empty() && !d.exists())
        }) || input.is_some_and(|f| !Path::new(f).exists())
    };
    let deadline = std::time::Instant::now() + limit;
    while missing() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `path` made absolute against the working directory `work_dir`, as Slurm's
/// `fname_create` does for output, error and input file names.
pub(crate) fn under_work_dir(work_dir: &str, path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        Path::new(work_dir)
            .join(path)
            .to_string_lossy()
            .into_owned()
    }
}

/// Says in a batch job's stderr file (as [`note_in_stderr`] does, with its checks) that
/// its stepd died: the agent calls it for a stepd that exited without a result, with
/// the launch record stepd left in the job's spool directory.
pub fn note_stepd_lost(lb: &LaunchBatch, msg: &str) {
    let job = &lb.job;
    let node = job
        .alloc
        .as_ref()
        .and_then(|a| a.nodes.first().cloned())
        .unwrap_or_default();
    let paths = output_paths(job, &node);
    note_in_stderr(job.spec.work_dir.as_ref(), &paths, &node, msg);
}

/// Appends `slurmstepd-<node>: error: <msg>` to the job's stderr file, as slurmstepd
/// does for time limits and cancellations. Best effort.
///
/// stepd may run as root while the file is the user's: it writes only into a regular
/// file the job's user owns, reached without following a final symlink and without
/// blocking, so a user cannot point it at a root-owned file (or a FIFO) by swapping
/// their output file during the job.
fn note_in_stderr(work_dir: &Path, paths: &Paths, node: &str, msg: &str) {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let path = work_dir.join(&paths.stderr);
    let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    else {
        return;
    };
    match f.metadata() {
        Ok(m) if m.is_file() && m.uid() == paths.owner => {
            let _ = writeln!(f, "slurmstepd-{node}: error: {msg}");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(stderr: &str, owner: u32) -> Paths {
        Paths {
            stdin: "/dev/null".into(),
            stdout: stderr.into(),
            stderr: stderr.into(),
            owner,
        }
    }

    #[test]
    fn notes_go_only_into_the_users_own_regular_file() {
        let d = tempfile::tempdir().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        std::fs::write(d.path().join("out"), "job output\n").unwrap();
        note_in_stderr(d.path(), &paths("out", me), "n1", "*** JOB 5 ***");
        assert_eq!(
            std::fs::read_to_string(d.path().join("out")).unwrap(),
            "job output\nslurmstepd-n1: error: *** JOB 5 ***\n"
        );
        // Someone else's file (as the owner check sees it): untouched.
        note_in_stderr(d.path(), &paths("out", me + 1), "n1", "x");
        assert!(
            !std::fs::read_to_string(d.path().join("out"))
                .unwrap()
                .contains("x\n")
        );
        // A symlink swapped in for the output file: not followed.
        std::fs::write(d.path().join("victim"), "precious\n").unwrap();
        std::os::unix::fs::symlink(d.path().join("victim"), d.path().join("link")).unwrap();
        note_in_stderr(d.path(), &paths("link", me), "n1", "x");
        assert_eq!(
            std::fs::read_to_string(d.path().join("victim")).unwrap(),
            "precious\n"
        );
        // A FIFO without reader: no write, and no hang.
        nix::unistd::mkfifo(&d.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        note_in_stderr(d.path(), &paths("fifo", me), "n1", "x");
        // A missing file is not created.
        note_in_stderr(d.path(), &paths("missing", me), "n1", "x");
        assert!(!d.path().join("missing").exists());
    }
}
