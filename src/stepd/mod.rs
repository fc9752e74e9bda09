//! The step supervisor (cf. slurmstepd): one process per batch job, detached from the
//! agent (its own session), so the job keeps running if the agent or controller dies.
//!
//! It runs the batch script as the job's user (supplementary groups, gid, uid set before
//! exec; output files opened as that user), in its own process group, and waits for it
//! with signals blocked and taken synchronously (`sigwait`): SIGCHLD means the script
//! ended, SIGTERM from the agent means "terminate" (message into the job's stderr,
//! SIGCONT+SIGTERM to the group, SIGKILL after KillWait on SIGALRM). The outcome goes to
//! the spool directory's `result` file (`proto::spool`).
//!
//! Isolation (`isolate`): the batch shell joins its task cgroup between fork and exec;
//! terminate signals go to every process in the job's cgroup; when the shell is gone,
//! everything left in the job's cgroup is killed and an OOM kill is reported the way
//! slurmstepd does.

pub mod container;
pub mod cpubind;
pub mod env;
pub mod gpu_usage;
pub mod gpus;
pub mod isolate;
pub mod nccl;
pub mod pmi;
pub mod step;
pub mod stream;
mod task_script;
pub mod usage;

use crate::model::job::ExitStatus;
use crate::model::step::StepUsage;
use crate::proto::spool::{self, StepResult, TerminateRequest};
use crate::proto::{EndKind, LaunchBatch};
use anyhow::Context;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::{CString, OsString};
use std::os::unix::fs::PermissionsExt;
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
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepd: {e:#}");
            let r = unstarted(
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

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Paths and identity prepared before fork, so the child does as little as possible.
struct Prepared {
    script: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    work_dir: CString,
    stdin: CString,
    stdout: CString,
    /// `None` when stderr goes to the stdout file.
    stderr: Option<CString>,
    append: bool,
    umask: u32,
    /// `Some` when privileges must be dropped (running as root for another user).
    user: Option<(CString, u32, u32)>,
    /// Entering the task's cgroup (before privileges are dropped).
    join: std::sync::Arc<isolate::TaskJoin>,
    /// This node's name, for slurmstepd's lines in the job's stderr.
    node: String,
    /// What TaskProlog's `print` lines write to the task's stdout before it execs.
    preamble: Vec<u8>,
}

/// The result of a job that ended before (or instead of) its script running: no usage,
/// no time used.
fn unstarted(kind: EndKind, status: ExitStatus, message: Option<String>) -> StepResult {
    StepResult {
        kind,
        status,
        time: now(),
        max_rss_kib: 0,
        cpu_secs: 0.0,
        oom: false,
        message,
        usage: None,
    }
}

/// Supervises one job; see the module docs.
pub fn run(dir: &Path) -> anyhow::Result<()> {
    // One stepd per launch record: an agent restarted while a launch was under way
    // starts one for a record whose stepd it cannot find, which then finds the lock
    // taken if the first one was only slow to start.
    let Some(_supervising) = claim(dir)? else {
        return Ok(());
    };
    let lb: LaunchBatch = spool::read_launch(dir)?.context("no launch record")?;
    let _ = nix::unistd::setsid();
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGALRM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGUSR2,
    ] {
        mask.add(s);
    }
    // Blocked before the pid is published: from then on the agent's SIGTERM means
    // "terminate", never "die before the job starts".
    mask.thread_block().context("cannot block signals")?;
    spool::write_pid(dir, spool::STEPD_PID, std::process::id())?;
    // A terminate request that came before our pid was known was not signalled to us:
    // the job was cancelled (or timed out) before it started, so it never starts.
    if dir.join(spool::TERMINATE).exists() {
        let r = unstarted(
            EndKind::Exited,
            ExitStatus {
                code: 0,
                signal: Signal::SIGTERM as i32,
            },
            None,
        );
        spool::write(dir, spool::RESULT, &r)?;
        return Ok(());
    }

    let job = &lb.job;
    let node = job
        .alloc
        .as_ref()
        .and_then(|a| a.nodes.first().cloned())
        .unwrap_or_default();
    let script_path = dir.join("script");
    std::fs::write(&script_path, job.spec.script.as_bytes())?;
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o700))?;
    let me = nix::unistd::geteuid().as_raw();
    let drop_to = if me == 0 && job.uid != 0 {
        Some((job.uid, job.gid))
    } else {
        None
    };
    // slurmd refuses to launch for a user this node does not know (Slurm's
    // ESLURMD_UID_NOT_FOUND): the job fails at launch instead of running as a bare uid.
    if let Some((uid, _)) = drop_to
        && nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .is_none()
    {
        let why = format!("Launch failed for uid {uid}: {}", UID_NOT_FOUND);
        note_in_stderr(
            job.spec.work_dir.as_ref(),
            &output_paths(job, &node),
            &node,
            &why,
        );
        return write_launch_failed(dir, format!("job {} on {node}: {why}", job.id));
    }
    if let Some((uid, gid)) = drop_to {
        nix::unistd::chown(
            &script_path,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )?;
        // The user must be able to reach the script inside the spool directory.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))?;
    }
    let start = job.start_time.unwrap_or_else(now);
    let mut env = if lb.het.is_empty() {
        env::batch_env(job, &lb.cluster, &node, start)
    } else {
        env::het_batch_env(job, &lb.het, &lb.cluster, &node, start)
    };
    let paths = output_paths(job, &node);
    let cs = |s: &str| CString::new(s).context("NUL byte in a path or argument");
    let mut argv = vec![cs(&script_path.to_string_lossy())?];
    for a in &job.spec.argv {
        argv.push(cs(a)?);
    }
    let iso = match isolate::step::StepIsolation::batch(&lb, &isolate_lock(dir)) {
        Ok(i) => i,
        Err(e) => {
            let msg = format!("job {} could not start on {node}: task/cgroup: {e}", job.id);
            return write_launch_failed(dir, msg);
        }
    };
    for d in iso.degraded() {
        eprintln!(
            "stepd: job {}: degraded isolation ({}): {d}",
            job.id,
            iso.backend()
        );
    }
    let (deny, notes) = gpus::deny_list(
        &lb.node_gres,
        job.alloc
            .as_ref()
            .and_then(|a| a.gres.first())
            .map_or(&[], Vec::as_slice),
    );
    if lb.cgroup.constrain_devices {
        for n in notes {
            eprintln!("stepd: job {}: device not constrained: {n}", job.id);
        }
    }
    if gpus::devices_hidden(lb.cgroup.constrain_devices, &deny, &iso.degraded()) {
        gpus::local_ordinals(&mut env);
    }
    gpus::use_unique_ids(&mut env, &lb.node_gres);
    let run_as: task_script::RunAs = match drop_to {
        Some((uid, gid)) => Some((cs(&job.user)?, uid, gid)),
        None => None,
    };
    let timeout = lb.scripts.prolog_epilog_timeout;
    let mut preamble = Vec::new();
    if let Some(tp) = &lb.scripts.task_prolog {
        match task_script::run(tp, &env, &run_as, &job.spec.work_dir, timeout) {
            Ok(out) => preamble = task_script::apply(&task_script::parse(&out), &mut env),
            Err((code, why)) => {
                // slurmstepd's task exits with the prolog's status instead of running.
                let line = format!("slurmstepd: error: TaskProlog failed {why}");
                eprintln!("stepd: job {}: {line}", job.id);
                note_in_stderr(job.spec.work_dir.as_ref(), &paths, &node, &line);
                let _ = iso.finish();
                let r = unstarted(EndKind::Exited, ExitStatus { code, signal: 0 }, None);
                spool::write(dir, spool::RESULT, &r)?;
                return Ok(());
            }
        }
    }
    let task_env = env.clone();
    let env: Vec<CString> = env
        .iter()
        .filter(|(k, _)| !k.contains('=') && !k.contains('\0'))
        .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
        .collect();
    let (stdin_abs, stdout_abs, stderr_abs) = (
        under_work_dir(&job.spec.work_dir, &paths.stdin),
        under_work_dir(&job.spec.work_dir, &paths.stdout),
        under_work_dir(&job.spec.work_dir, &paths.stderr),
    );
    wait_for_io_paths(
        &[&stdout_abs, &stderr_abs],
        Some(&stdin_abs),
        lb.scripts.launch_io_wait(),
    );
    let prep = Prepared {
        script: cs(&script_path.to_string_lossy())?,
        argv,
        env,
        work_dir: cs(&job.spec.work_dir)?,
        stdin: cs(&stdin_abs)?,
        stdout: cs(&stdout_abs)?,
        stderr: if paths.stderr == paths.stdout {
            None
        } else {
            Some(cs(&stderr_abs)?)
        },
        append: job.spec.open_append || job.restarts > 0,
        umask: job.spec.umask,
        user: match drop_to {
            Some((uid, gid)) => Some((cs(&job.user)?, uid, gid)),
            None => None,
        },
        join: iso.task_join(0).context("no cgroup for task 0")?,
        node: node.clone(),
        preamble,
    };
    let child = match spawn_job(&prep) {
        Ok(c) => c,
        Err(e) => {
            let r = unstarted(
                EndKind::LaunchFailed,
                ExitStatus::default(),
                Some(format!(
                    "job {} could not start on {node}: {e} (working directory {}, output {})",
                    job.id, job.spec.work_dir, paths.stdout
                )),
            );
            spool::write(dir, spool::RESULT, &r)?;
            return Ok(());
        }
    };
    let pid = child.id();
    spool::write_pid(dir, spool::JOB_PID, pid)?;
    // A suspend asked for before the shell existed applies now.
    if spool::read::<bool>(dir, spool::SUSPEND).ok().flatten() == Some(true) {
        set_suspended(&iso, Pid::from_raw(pid as i32), true);
    }
    // The shell's GPUs on this node, measured as its one task's.
    let shell_gpus: Vec<u32> = job
        .alloc
        .as_ref()
        .and_then(|a| a.gres.first())
        .map(|g| {
            g.iter()
                .filter(|d| d.name == "gpu")
                .map(|d| d.index)
                .collect()
        })
        .unwrap_or_default();
    let mut gpu_meter = if shell_gpus.is_empty() {
        None
    } else {
        gpu_usage::sampler()
            .and_then(|s| gpu_usage::GpuMeter::new(vec![(0, shell_gpus)], &lb.node_gres, s))
    };
    let (status, sampled) = supervise(
        dir,
        Pid::from_raw(pid as i32),
        &paths,
        job.spec.work_dir.as_ref(),
        &node,
        &mask,
        (&iso, gpu_meter.as_mut()),
    );
    // Nothing of the job may outlive it.
    let _ = kill(Pid::from_raw(-(pid as i32)), Signal::SIGKILL);
    let fin = iso.finish();
    for e in &fin.errors {
        eprintln!("stepd: job {}: {e}", job.id);
    }
    if let Some(line) = &fin.oom_message {
        note_in_stderr(job.spec.work_dir.as_ref(), &paths, &node, line);
    }
    if let Some(te) = &lb.scripts.task_epilog
        && let Err((_, why)) = task_script::run(te, &task_env, &run_as, &job.spec.work_dir, timeout)
    {
        eprintln!("stepd: job {}: TaskEpilog failed {why}", job.id);
    }
    let mut usage = sampled;
    usage.pids.clear();
    usage::add_children_rusage(&mut usage, &node);
    // The cgroup also counts processes that escaped the shell's process tree.
    usage::add_cgroup_usage(&mut usage, &node, &fin.usage);
    usage.ntasks = 1;
    usage.fill_empty_nodes(&node);
    let r = StepResult {
        kind: EndKind::Exited,
        status,
        time: now(),
        max_rss_kib: usage.max_rss_kib,
        cpu_secs: usage.sum_cpu_secs,
        oom: fin.oom_kills > 0,
        message: None,
        usage: Some(usage),
    };
    spool::write(dir, spool::RESULT, &r)?;
    Ok(())
}

/// Slurm's text for ESLURMD_UID_NOT_FOUND.
const UID_NOT_FOUND: &str = "User not found on host";

/// The lock file stepds of one agent share while choosing CPUs (`isolate::step`).
/// Takes the job's [`spool::STEPD_LOCK`]: `Some` (held while the file lives) when this
/// stepd is the job's only one, `None` when another holds it.
///
/// Errors: the lock file cannot be opened or locked for another reason.
fn claim(dir: &Path) -> anyhow::Result<Option<std::fs::File>> {
    let path = dir.join(spool::STEPD_LOCK);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

fn isolate_lock(job_dir: &Path) -> PathBuf {
    job_dir.parent().unwrap_or(job_dir).join(".isolate.lock")
}

/// Records that the job could not start.
fn write_launch_failed(dir: &Path, message: String) -> anyhow::Result<()> {
    let r = StepResult {
        kind: EndKind::LaunchFailed,
        status: ExitStatus::default(),
        time: now(),
        max_rss_kib: 0,
        cpu_secs: 0.0,
        oom: false,
        message: Some(message),
        usage: None,
    };
    spool::write(dir, spool::RESULT, &r)?;
    Ok(())
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

/// Starts the batch script. The closure runs in the forked child before exec; it drops
/// privileges, enters the working directory, opens the output files as the user, and
/// execs the script with SLURM_TASK_PID set to its own pid.
#[allow(unsafe_code)]
fn spawn_job(p: &Prepared) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("/bin/false");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    let p2 = Prepared {
        script: p.script.clone(),
        argv: p.argv.clone(),
        env: p.env.clone(),
        work_dir: p.work_dir.clone(),
        stdin: p.stdin.clone(),
        stdout: p.stdout.clone(),
        stderr: p.stderr.clone(),
        append: p.append,
        umask: p.umask,
        user: p.user.clone(),
        join: p.join.clone(),
        node: p.node.clone(),
        preamble: p.preamble.clone(),
    };
    // SAFETY: stepd is single-threaded (no runtime, no helper threads), so after fork the
    // child holds no locks another thread could own; the closure only makes system calls
    // and small allocations before exec, and returns errors instead of panicking.
    unsafe {
        cmd.pre_exec(move || child_setup(&p2));
    }
    cmd.spawn()
}

#[allow(unsafe_code)]
fn child_setup(p: &Prepared) -> std::io::Result<()> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    let io = |e: nix::Error| std::io::Error::from_raw_os_error(e as i32);
    let _ = SigSet::all().thread_unblock();
    p.join.enter()?;
    if let Some((name, uid, gid)) = &p.user {
        let gid = nix::unistd::Gid::from_raw(*gid);
        nix::unistd::initgroups(name, gid).map_err(io)?;
        nix::unistd::setgid(gid).map_err(io)?;
        nix::unistd::setuid(nix::unistd::Uid::from_raw(*uid)).map_err(io)?;
    }
    nix::sys::stat::umask(Mode::from_bits_truncate(p.umask as nix::libc::mode_t));
    // Slurm's slurmstepd (`_fork_all_tasks`) falls back to /tmp when the working
    // directory cannot be entered, and says so in the job's stderr. Relative output
    // paths were made absolute against the working directory beforehand (Slurm's
    // `fname_create`), so they do not follow the fallback.
    let chdir_err = match nix::unistd::chdir(p.work_dir.as_c_str()) {
        Ok(()) => None,
        Err(e) => {
            nix::unistd::chdir(c"/tmp").map_err(io)?;
            Some(e)
        }
    };
    // Always O_APPEND: stepd appends its own lines (time limit, cancel, OOM) to these
    // files while the job may still write, and neither may overwrite the other.
    let mode = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_APPEND
        | if p.append {
            OFlag::empty()
        } else {
            OFlag::O_TRUNC
        };
    let perm = Mode::from_bits_truncate(0o666);
    // A file that cannot be opened fails the launch (JobLaunchFailure, 0:53), with
    // slurmstepd's line in the job's error file when that one can be opened.
    let out = match open(p.stdout.as_c_str(), mode, perm) {
        Ok(fd) => fd,
        Err(e) => {
            if let Some(path) = &p.stderr
                && let Ok(fd) = open(path.as_c_str(), mode, perm)
                && nix::unistd::dup2(fd, 2).is_ok()
            {
                let line = setup_failure_line(&p.node, "stdout", &p.stdout.to_string_lossy(), e);
                let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
            }
            return Err(io(e));
        }
    };
    let err = match &p.stderr {
        Some(e) => open(e.as_c_str(), mode, perm).map_err(io)?,
        None => nix::unistd::dup(std::os::fd::AsRawFd::as_raw_fd(&out)).map_err(io)?,
    };
    let inp = match open(p.stdin.as_c_str(), OFlag::O_RDONLY, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            if nix::unistd::dup2(err, 2).is_ok() {
                let line = setup_failure_line(&p.node, "stdin", &p.stdin.to_string_lossy(), e);
                let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
            }
            return Err(io(e));
        }
    };
    use std::os::fd::AsRawFd;
    nix::unistd::dup2(inp.as_raw_fd(), 0).map_err(io)?;
    nix::unistd::dup2(out.as_raw_fd(), 1).map_err(io)?;
    nix::unistd::dup2(err.as_raw_fd(), 2).map_err(io)?;
    if let Some(e) = chdir_err {
        let line = chdir_fallback_line(&p.node, &p.work_dir.to_string_lossy(), e);
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    }
    // TaskProlog's `print` lines come first in the task's output.
    if !p.preamble.is_empty() {
        let _ = nix::unistd::write(std::io::stdout(), &p.preamble);
    }
    let mut env = p.env.clone();
    if let Ok(c) = CString::new(format!("SLURM_TASK_PID={}", std::process::id())) {
        env.push(c);
    }
    // As slurmstepd's `_exec_task`: a failed exec is said in the job's stderr and the
    // task exits with the errno (the job ends FAILED, NonZeroExitCode, ExitCode N:0).
    let e = match nix::unistd::execve(p.script.as_c_str(), &p.argv, &env) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let script = p.script.to_string_lossy();
    let line = exec_failure_line(&p.node, &script, Path::new(&*script), e);
    let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    // SAFETY: `_exit` ends this forked child at once, without running the parent's
    // atexit handlers or flushing stdio buffers it shares with the parent.
    unsafe { nix::libc::_exit(e as i32) }
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

/// How often the batch step's processes are sampled for `sstat` and accounting
/// (Slurm's JobAcctGatherFrequency; its default is 30 s, shorter here so that short
/// jobs get averages too).
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits for the batch shell, serving terminate requests and sampling the job's usage
/// every [`SAMPLE_EVERY`] (written to the spool's `usage` file); returns the shell's
/// exit status and the last sample (peaks kept over the job's life).
fn supervise(
    dir: &Path,
    pid: Pid,
    paths: &Paths,
    work_dir: &Path,
    node: &str,
    mask: &SigSet,
    (iso, mut gpu_meter): (
        &isolate::step::StepIsolation,
        Option<&mut gpu_usage::GpuMeter>,
    ),
) -> (ExitStatus, StepUsage) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use std::os::fd::AsFd;
    let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok();
    let page_kib = usage::page_kib();
    let mut last = StepUsage::default();
    let mut next_sample = std::time::Instant::now();
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return (ExitStatus { code, signal: 0 }, last),
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                let st = ExitStatus {
                    code: 0,
                    signal: sig as i32,
                };
                return (st, last);
            }
            Ok(_) => {}
            Err(_) => return (ExitStatus::default(), last),
        }
        let now = std::time::Instant::now();
        if now >= next_sample {
            last = sample_batch(pid, node, page_kib, &last, iso);
            if let Some(m) = gpu_meter.as_mut() {
                last.gpu = m.sample(node);
            }
            let _ = spool::write(dir, spool::USAGE, &last);
            next_sample = now + SAMPLE_EVERY;
        }
        let sig = match &sfd {
            Some(sfd) => {
                let wait = next_sample.saturating_duration_since(now);
                let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, timeout);
                match sfd.read_signal() {
                    Ok(Some(si)) => Signal::try_from(si.ssi_signo as i32).ok(),
                    _ => None,
                }
            }
            // No signalfd: wait for signals only (no live samples).
            None => mask.wait().ok(),
        };
        match sig {
            Some(Signal::SIGUSR2) => {
                if let Ok(Some(stop)) = spool::read::<bool>(dir, spool::SUSPEND) {
                    set_suspended(iso, pid, stop);
                }
            }
            Some(Signal::SIGTERM) => {
                // Frozen processes take no signal: a suspended job is thawed first.
                set_suspended(iso, pid, false);
                let req: TerminateRequest = spool::read(dir, spool::TERMINATE)
                    .ok()
                    .flatten()
                    .unwrap_or(TerminateRequest {
                        kill_wait: 30,
                        message: None,
                    });
                if let Some(m) = &req.message {
                    note_in_stderr(work_dir, paths, node, m);
                }
                // Each process gets each signal once: through its cgroup when the job
                // has one, else through the batch shell's process group.
                if iso.signal(Signal::SIGCONT) == 0 {
                    let group = Pid::from_raw(-pid.as_raw());
                    let _ = kill(group, Signal::SIGCONT);
                    let _ = kill(group, Signal::SIGTERM);
                } else {
                    iso.signal(Signal::SIGTERM);
                }
                nix::unistd::alarm::set(req.kill_wait.max(1));
            }
            Some(Signal::SIGALRM) => {
                let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
                iso.signal(Signal::SIGKILL);
            }
            _ => {}
        }
    }
}

/// Stops (`stop`) or continues the whole job for `scontrol suspend`/`resume`: through
/// the job's cgroup freezer when there is one, else (or when freezing fails) with
/// SIGSTOP/SIGCONT to the batch shell's process group. Resuming sends SIGCONT as well,
/// so that a job stopped either way continues.
fn set_suspended(iso: &isolate::step::StepIsolation, pid: Pid, stop: bool) {
    let r = if stop { iso.suspend() } else { iso.resume() };
    if let Err(e) = &r {
        eprintln!(
            "stepd: {} through {} failed: {e}",
            if stop { "suspend" } else { "resume" },
            iso.backend()
        );
    }
    if r.is_err() || !stop {
        let sig = if stop {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        let _ = kill(Pid::from_raw(-pid.as_raw()), sig);
    }
}

/// One sample of the batch step: the shell's process group (among the job cgroup's
/// processes when there is one, else from all of /proc), raised to the job cgroup's
/// counters, with the peaks of `last` kept.
fn sample_batch(
    pid: Pid,
    node: &str,
    page_kib: u64,
    last: &StepUsage,
    iso: &isolate::step::StepIsolation,
) -> StepUsage {
    let among = iso.member_pids();
    let (samples, pids) =
        usage::sample_groups_among(&[(0, pid.as_raw())], page_kib, among.as_deref());
    let mut u = StepUsage::from_tasks(node, &samples);
    u.pids = pids;
    u.keep_peaks(last);
    usage::add_cgroup_usage(&mut u, node, &iso.usage());
    u
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
