//! The batch step (cf. slurmstepd running a batch job): one stepd per batch job.
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

use super::spawn::{Flavour, SpawnError, TaskSetup, spawn_task};
use super::{
    Paths, env, gpu_usage, gpus, isolate, note_in_stderr, output_paths, task_script,
    under_work_dir, usage, wait_for_io_paths,
};
use crate::model::job::ExitStatus;
use crate::model::step::StepUsage;
use crate::proto::spool::{self, StepResult, TerminateRequest};
use crate::proto::{EndKind, LaunchBatch};
use anyhow::Context;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The result of a job that ended before (or instead of) its script running: no usage,
/// no time used.
pub(super) fn unstarted(kind: EndKind, status: ExitStatus, message: Option<String>) -> StepResult {
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
    // The batch script is a one-task step: task 0, its files given, no pty, no binding.
    let stdout = cs(&stdout_abs)?;
    let prep = TaskSetup {
        flavour: Flavour::Batch,
        rank: 0,
        pty: None,
        candidates: vec![cs(&script_path.to_string_lossy())?],
        argv,
        env,
        work_dir: cs(&job.spec.work_dir)?,
        stdin_file: Some(cs(&stdin_abs)?),
        stderr_file: Some(if paths.stderr == paths.stdout {
            stdout.clone()
        } else {
            cs(&stderr_abs)?
        }),
        stdout_file: Some(stdout),
        append: job.spec.open_append || job.restarts > 0,
        umask: job.spec.umask,
        user: match drop_to {
            Some((uid, gid)) => Some((cs(&job.user)?, uid, gid)),
            None => None,
        },
        cpus: None,
        join: Some(iso.task_join(0).context("no cgroup for task 0")?),
        argv0_name: script_path.to_string_lossy().into_owned(),
        node: node.clone(),
        preamble,
        keep_fd: None,
    };
    let pid = match spawn_task(&prep) {
        Ok(sp) => sp.pid as u32,
        Err(SpawnError { err: e, .. }) => {
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
    (iso, gpu_meter): (
        &isolate::step::StepIsolation,
        Option<&mut gpu_usage::GpuMeter>,
    ),
) -> (ExitStatus, StepUsage) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use std::os::fd::AsFd;
    let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok();
    let mut sup = Supervisor {
        dir,
        pid,
        paths,
        work_dir,
        node,
        iso,
        gpu_meter,
        page_kib: usage::page_kib(),
        last: StepUsage::default(),
        next_sample: std::time::Instant::now(),
    };
    loop {
        if let Some(status) = sup.on_child_exit() {
            return (status, sup.last);
        }
        let now = std::time::Instant::now();
        if now >= sup.next_sample {
            sup.on_sample(now);
        }
        let sig = match &sfd {
            Some(sfd) => {
                let wait = sup.next_sample.saturating_duration_since(now);
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
        if let Some(sig) = sig {
            sup.on_signal(sig);
        }
    }
}

/// The batch step while its script runs: what the event methods share. One method per
/// event, named as the numbered step's (`step::Supervisor`): the script's exit
/// ([`Supervisor::on_child_exit`]), the sampling tick ([`Supervisor::on_sample`]), a
/// signal from the agent ([`Supervisor::on_signal`]: suspend, terminate, KillWait's
/// end).
struct Supervisor<'a> {
    /// The job's spool directory: requests come in through it, usage goes out.
    dir: &'a Path,
    /// The batch shell (its process group has the same id).
    pid: Pid,
    paths: &'a Paths,
    work_dir: &'a Path,
    node: &'a str,
    iso: &'a isolate::step::StepIsolation,
    gpu_meter: Option<&'a mut gpu_usage::GpuMeter>,
    page_kib: u64,
    last: StepUsage,
    next_sample: std::time::Instant,
}

impl Supervisor<'_> {
    /// The shell's exit status once it has ended (or cannot be waited for).
    fn on_child_exit(&mut self) -> Option<ExitStatus> {
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Some(ExitStatus { code, signal: 0 }),
            Ok(WaitStatus::Signaled(_, sig, _)) => Some(ExitStatus {
                code: 0,
                signal: sig as i32,
            }),
            Ok(_) => None,
            Err(_) => Some(ExitStatus::default()),
        }
    }

    /// The sampling tick: the job's usage, into the spool's `usage` file.
    fn on_sample(&mut self, now: std::time::Instant) {
        self.last = sample_batch(self.pid, self.node, self.page_kib, &self.last, self.iso);
        if let Some(m) = self.gpu_meter.as_mut() {
            self.last.gpu = m.sample(self.node);
        }
        let _ = spool::write(self.dir, spool::USAGE, &self.last);
        self.next_sample = now + SAMPLE_EVERY;
    }

    /// A signal from the agent: SIGUSR2 says the spool's `suspend` file changed,
    /// SIGTERM that a terminate request is in the spool, SIGALRM is KillWait's end.
    fn on_signal(&mut self, sig: Signal) {
        match sig {
            Signal::SIGUSR2 => self.on_suspend(),
            Signal::SIGTERM => self.on_terminate(),
            Signal::SIGALRM => self.on_kill_timeout(),
            _ => {}
        }
    }

    /// `scontrol suspend`/`resume`, as the spool's `suspend` file says.
    fn on_suspend(&mut self) {
        if let Ok(Some(stop)) = spool::read::<bool>(self.dir, spool::SUSPEND) {
            set_suspended(self.iso, self.pid, stop);
        }
    }

    /// The spool's terminate request: its message into the job's stderr, SIGCONT and
    /// SIGTERM to the job, SIGKILL after its KillWait.
    fn on_terminate(&mut self) {
        // Frozen processes take no signal: a suspended job is thawed first.
        set_suspended(self.iso, self.pid, false);
        let req: TerminateRequest = spool::read(self.dir, spool::TERMINATE)
            .ok()
            .flatten()
            .unwrap_or(TerminateRequest {
                kill_wait: 30,
                message: None,
            });
        if let Some(m) = &req.message {
            note_in_stderr(self.work_dir, self.paths, self.node, m);
        }
        // Each process gets each signal once: through its cgroup when the job has one,
        // else through the batch shell's process group.
        if self.iso.signal(Signal::SIGCONT) == 0 {
            let group = Pid::from_raw(-self.pid.as_raw());
            let _ = kill(group, Signal::SIGCONT);
            let _ = kill(group, Signal::SIGTERM);
        } else {
            self.iso.signal(Signal::SIGTERM);
        }
        nix::unistd::alarm::set(req.kill_wait.max(1));
    }

    /// KillWait ran out: SIGKILL to the shell's process group and the job's cgroup.
    fn on_kill_timeout(&mut self) {
        let _ = kill(Pid::from_raw(-self.pid.as_raw()), Signal::SIGKILL);
        self.iso.signal(Signal::SIGKILL);
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
