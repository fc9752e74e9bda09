//! Starting one task (cf. slurmstepd's `_fork_all_tasks` and `exec_task`), for both
//! supervisors: [`TaskSetup`] is the task's plan, everything its child needs, built
//! before fork from the launch request (`TaskSetup::new` for a numbered step's task,
//! `batch::run` for the batch script, a one-task step); [`spawn_task`] forks, sets the
//! child up (cgroup, pty, CPU affinity, identity, working directory, files) and execs
//! it. Where slurmstepd's batch and task paths differ, [`Flavour`] says which is taken.

use crate::model::step::StdinMode;
use crate::proto::LaunchStep;
use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::SigSet;
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};

/// An fd the tasks write to and stepd reads.
pub(super) struct OutFd {
    pub(super) fd: OwnedFd,
    pub(super) rank: u32,
    pub(super) stderr: bool,
    /// A pty master: EIO means the slave side is closed.
    pub(super) pty: bool,
}

/// An fd stepd writes a task's stdin to.
pub(super) struct InFd {
    pub(super) fd: OwnedFd,
    pub(super) buf: VecDeque<u8>,
    pub(super) eof: bool,
    pub(super) pty: bool,
}

/// Where the batch script's start differs from a numbered step's task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flavour {
    /// A numbered step's task: stdin, stdout, stderr opened in that order when given as
    /// files (else pipes or a pty to stepd); a file that cannot be opened is said to
    /// stepd through the report pipe; exec tries each candidate, and its failure comes
    /// back to stepd as the spawn's error.
    Task,
    /// The batch script: stdout, stderr, stdin are files, opened in that order and
    /// always O_APPEND (stepd appends its own lines to them while the job writes); one
    /// that cannot be opened is said in the job's stderr file when that one opens; the
    /// /tmp fallback of the working directory must work; a failed exec is said in the
    /// job's stderr and the script exits with the errno (the launch itself succeeded).
    Batch,
}

/// The pty of `--pty` (task 0 of the step).
#[derive(Debug, Clone, Copy)]
pub(super) struct PtyPlan {
    /// Rows and columns of the user's terminal.
    pub(super) winsize: Option<(u16, u16)>,
    /// Whether the task's stdin comes from srun (through the pty master).
    pub(super) stdin: bool,
}

/// Everything one task's child needs, prepared before fork.
#[derive(Clone)]
pub(super) struct TaskSetup {
    pub(super) flavour: Flavour,
    /// The task's global rank (its output is tagged with it).
    pub(super) rank: u32,
    /// `Some` for the task that gets `--pty`'s terminal.
    pub(super) pty: Option<PtyPlan>,
    /// Candidate paths to exec, in PATH order.
    pub(super) candidates: Vec<CString>,
    pub(super) argv: Vec<CString>,
    pub(super) env: Vec<CString>,
    pub(super) work_dir: CString,
    /// Files for stdout/stderr/stdin when patterns were given (opened in the child, as
    /// the user).
    pub(super) stdout_file: Option<CString>,
    pub(super) stderr_file: Option<CString>,
    pub(super) stdin_file: Option<CString>,
    pub(super) append: bool,
    pub(super) umask: u32,
    pub(super) user: Option<(CString, u32, u32)>,
    pub(super) cpus: Option<Vec<usize>>,
    /// The task's cgroup join (set by the caller when the step is isolated).
    pub(super) join: Option<std::sync::Arc<crate::stepd::isolate::TaskJoin>>,
    /// Base name of the executable, for error messages.
    pub(super) argv0_name: String,
    /// This node's name, for slurmstepd's lines in the task's stderr.
    pub(super) node: String,
    /// TaskProlog's `print` output, written to the task's stdout before it execs.
    pub(super) preamble: Vec<u8>,
    /// An fd the task inherits (its PMI socket, `PMI_FD`): close-on-exec in stepd,
    /// cleared in the child.
    pub(super) keep_fd: Option<std::os::fd::RawFd>,
}

impl TaskSetup {
    pub(super) fn new(
        ls: &LaunchStep,
        rank: u32,
        node: &str,
        env: Vec<(String, String)>,
        user: Option<(CString, u32, u32)>,
        cpus: Option<Vec<usize>>,
    ) -> anyhow::Result<TaskSetup> {
        let cs = |s: &str| CString::new(s).context("NUL byte in an argument or path");
        let argv_s = ls.spec.argv_of(rank);
        let argv0 = argv_s.first().cloned().unwrap_or_default();
        let path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let candidates = if argv0.contains('/') {
            vec![cs(&argv0)?]
        } else {
            path_var
                .split(':')
                .map(|d| if d.is_empty() { "." } else { d })
                .filter_map(|d| CString::new(format!("{d}/{argv0}")).ok())
                .collect()
        };
        let mut argv = Vec::new();
        for a in argv_s {
            argv.push(cs(a)?);
        }
        let envc: Vec<CString> = env
            .iter()
            .filter(|(k, _)| !k.is_empty() && !k.contains('='))
            .filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok())
            .collect();
        let ctx_expand = |p: &str| {
            use crate::jobspec::pattern::{PatternCtx, StepKind, expand_pattern};
            let node_id = ls.node_id();
            expand_pattern(
                p,
                &PatternCtx {
                    job_id: ls.job.id,
                    // A step of an array task expands %A/%a from the task's array
                    // (SLURM_ARRAY_JOB_ID/SLURM_ARRAY_TASK_ID), as slurmstepd does.
                    array: ls.job.array_task_id.map(|t| (ls.job.array_job_id, t)),
                    job_name: &ls.job.spec.name,
                    user: &ls.job.user,
                    node,
                    node_id,
                    task_id: rank,
                    step: StepKind::Id(ls.step_id),
                },
            )
        };
        let file_of = |p: &Option<String>| -> anyhow::Result<Option<CString>> {
            match p.as_deref() {
                None => Ok(None),
                Some("none") => Ok(Some(cs("/dev/null")?)),
                Some(p) => Ok(Some(cs(&crate::stepd::under_work_dir(
                    &ls.spec.work_dir,
                    &ctx_expand(p),
                ))?)),
            }
        };
        let stdout_file = file_of(&ls.spec.stdout)?;
        let stderr_file = match &ls.spec.stderr {
            Some(_) => file_of(&ls.spec.stderr)?,
            None => stdout_file.clone(),
        };
        let stdin_file = match &ls.spec.stdin {
            StdinMode::File(p) => Some(cs(&crate::stepd::under_work_dir(
                &ls.spec.work_dir,
                &ctx_expand(p),
            ))?),
            StdinMode::None => Some(cs("/dev/null")?),
            m if !m.reaches(rank) => Some(cs("/dev/null")?),
            _ => None,
        };
        Ok(TaskSetup {
            flavour: Flavour::Task,
            rank,
            pty: (ls.spec.pty && rank == 0).then_some(PtyPlan {
                winsize: ls.spec.winsize,
                stdin: ls.spec.stdin.reaches(rank),
            }),
            candidates,
            argv,
            env: envc,
            work_dir: cs(&ls.spec.work_dir)?,
            stdout_file,
            stderr_file,
            stdin_file,
            append: ls.spec.open_append,
            umask: ls.spec.umask,
            user,
            cpus,
            join: None,
            argv0_name: argv0,
            node: node.to_string(),
            preamble: Vec::new(),
            keep_fd: None,
        })
    }

    /// Runs `argv` instead of the step's command (a container runtime's command line),
    /// found on `env`'s PATH. Errors: a NUL byte in an argument.
    pub(super) fn set_argv(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> anyhow::Result<()> {
        let cs = |s: &str| CString::new(s).context("NUL byte in an argument");
        let argv0 = argv.first().cloned().unwrap_or_default();
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("/usr/local/bin:/usr/bin:/bin");
        self.candidates = if argv0.contains('/') {
            vec![cs(&argv0)?]
        } else {
            path.split(':')
                .map(|d| if d.is_empty() { "." } else { d })
                .filter_map(|d| CString::new(format!("{d}/{argv0}")).ok())
                .collect()
        };
        self.argv = argv.iter().map(|a| cs(a)).collect::<anyhow::Result<_>>()?;
        self.argv0_name = argv0;
        Ok(())
    }
}

/// Why a task did not start: the error, and slurmstepd's line when it was the task's
/// stdin/stdout/stderr file that could not be opened (not the exec).
pub(super) struct SpawnError {
    pub(super) err: std::io::Error,
    pub(super) setup_line: Option<String>,
}

impl From<std::io::Error> for SpawnError {
    fn from(err: std::io::Error) -> SpawnError {
        SpawnError {
            err,
            setup_line: None,
        }
    }
}

/// What spawning a task gives stepd.
pub(super) struct Spawned {
    pub(super) pid: i32,
    pub(super) outs: Vec<OutFd>,
    pub(super) stdin: Option<InFd>,
    pub(super) master: Option<OwnedFd>,
}

/// Starts the task planned in `s`: its child runs in a process group of its own (a
/// session of its own with a pty), with stdio from the plan's files, else pipes (or the
/// pty) whose stepd ends come back in [`Spawned`].
///
/// Errors: a pipe or pty cannot be made, or the child failed before exec (cgroup,
/// identity, a file: then `setup_line` is slurmstepd's line for it) or, for a
/// [`Flavour::Task`], at exec.
pub(super) fn spawn_task(s: &TaskSetup) -> Result<Spawned, SpawnError> {
    let rank = s.rank;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let io = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io);
    let mut outs = Vec::new();
    let mut stdin = None;
    let mut master = None;
    let mut cmd = std::process::Command::new("/bin/false");
    let mut tty_path: Option<CString> = None;
    if let Some(pty) = s.pty {
        let ws = pty.winsize.map(|(r, c)| nix::pty::Winsize {
            ws_row: r,
            ws_col: c,
            ws_xpixel: 0,
            ws_ypixel: 0,
        });
        let p = nix::pty::openpty(ws.as_ref(), None).map_err(io)?;
        let path = nix::unistd::ttyname(&p.slave).map_err(io)?;
        tty_path = Some(
            CString::new(path.as_os_str().as_encoded_bytes())
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?,
        );
        nix::fcntl::fcntl(
            p.master.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(io)?;
        let m2 = p.master.try_clone()?;
        outs.push(OutFd {
            fd: p.master,
            rank,
            stderr: false,
            pty: true,
        });
        if pty.stdin {
            set_nonblock(&m2);
            stdin = Some(InFd {
                fd: m2.try_clone()?,
                buf: VecDeque::new(),
                eof: false,
                pty: true,
            });
        }
        master = Some(m2);
        // The child reopens the slave by name after setsid, which makes it the
        // controlling terminal; these are only placeholders.
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        drop(p.slave);
    } else {
        if s.stdout_file.is_none() {
            let (r, w) = pipe()?;
            outs.push(OutFd {
                fd: r,
                rank,
                stderr: false,
                pty: false,
            });
            cmd.stdout(Stdio::from(w));
        } else {
            cmd.stdout(Stdio::null());
        }
        if s.stderr_file.is_none() {
            let (r, w) = pipe()?;
            outs.push(OutFd {
                fd: r,
                rank,
                stderr: true,
                pty: false,
            });
            cmd.stderr(Stdio::from(w));
        } else {
            cmd.stderr(Stdio::null());
        }
        if s.stdin_file.is_none() {
            let (r, w) = pipe()?;
            set_nonblock(&w);
            stdin = Some(InFd {
                fd: w,
                buf: VecDeque::new(),
                eof: false,
                pty: false,
            });
            cmd.stdin(Stdio::from(r));
        } else {
            cmd.stdin(Stdio::null());
        }
        cmd.process_group(0);
    }
    // The child says here which file it could not open; closed on exec.
    let (report_r, report_w) = pipe()?;
    let child = Child {
        s: s.clone(),
        tty: tty_path,
        report: report_w.as_raw_fd(),
    };
    let spawned = spawn_with(cmd, child);
    drop(report_w);
    match spawned {
        Ok(pid) => Ok(Spawned {
            pid,
            outs,
            stdin,
            master,
        }),
        Err(err) => {
            // Every writer is closed now (the child has exited), so this read ends.
            let mut line = String::new();
            let _ = std::io::Read::read_to_string(&mut std::fs::File::from(report_r), &mut line);
            Err(SpawnError {
                err,
                setup_line: Some(line).filter(|l| !l.is_empty()),
            })
        }
    }
}

fn set_nonblock(fd: &OwnedFd) {
    use nix::fcntl::{FcntlArg, fcntl};
    if let Ok(fl) = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL) {
        let _ = fcntl(
            fd.as_raw_fd(),
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(fl) | OFlag::O_NONBLOCK),
        );
    }
}

struct Child {
    s: TaskSetup,
    /// The pty slave to open as the controlling terminal (`--pty`).
    tty: Option<CString>,
    /// Where the child writes slurmstepd's `Could not open … file` line when one of the
    /// task's files cannot be opened (a close-on-exec pipe to stepd).
    report: std::os::fd::RawFd,
}

/// Forks and execs the task; the closure runs in the child between fork and exec.
#[allow(unsafe_code)]
fn spawn_with(mut cmd: std::process::Command, c: Child) -> std::io::Result<i32> {
    use std::os::unix::process::CommandExt;
    // SAFETY: stepd is single-threaded (no runtime, no helper threads), so the forked
    // child holds no lock another thread owns; the closure makes system calls and small
    // allocations only, and reports failure as an error instead of panicking.
    unsafe {
        cmd.pre_exec(move || child_setup(&c));
    }
    let child = cmd.spawn()?;
    Ok(child.id() as i32)
}

/// The child's side, between fork and exec: signals unblocked, the task's cgroup
/// joined (before privileges are dropped), the pty made its controlling terminal, CPU
/// affinity, supplementary groups, gid and uid, umask, the working directory (or /tmp,
/// said in its stderr, as slurmstepd's `_fork_all_tasks` does), its files, TaskProlog's
/// `print` lines, then exec with SLURM_TASK_PID set to its own pid.
#[allow(unsafe_code)]
fn child_setup(c: &Child) -> std::io::Result<()> {
    use nix::fcntl::open;
    use nix::sys::stat::Mode;
    let io = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let s = &c.s;
    let _ = SigSet::all().thread_unblock();
    if let Some(j) = &s.join {
        j.enter()?;
    }
    if let Some(tty) = &c.tty {
        nix::unistd::setsid().map_err(io)?;
        let fd = open(tty.as_c_str(), OFlag::O_RDWR, Mode::empty()).map_err(io)?;
        for target in 0..3 {
            nix::unistd::dup2(fd.as_raw_fd(), target).map_err(io)?;
        }
    }
    if let Some(cpus) = &s.cpus {
        let mut set = nix::sched::CpuSet::new();
        for &cpu in cpus {
            let _ = set.set(cpu);
        }
        let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), &set);
    }
    if let Some((name, uid, gid)) = &s.user {
        let gid = nix::unistd::Gid::from_raw(*gid);
        nix::unistd::initgroups(name, gid).map_err(io)?;
        nix::unistd::setgid(gid).map_err(io)?;
        nix::unistd::setuid(nix::unistd::Uid::from_raw(*uid)).map_err(io)?;
    }
    nix::sys::stat::umask(Mode::from_bits_truncate(s.umask as nix::libc::mode_t));
    // Relative file names were made absolute against the working directory beforehand
    // (Slurm's `fname_create`), so they do not follow the fallback.
    let chdir_failed = nix::unistd::chdir(s.work_dir.as_c_str()).err();
    if chdir_failed.is_some() {
        let tmp = nix::unistd::chdir(c"/tmp");
        if s.flavour == Flavour::Batch {
            tmp.map_err(io)?;
        }
    }
    match s.flavour {
        Flavour::Task => open_task_files(c)?,
        Flavour::Batch => open_batch_files(s)?,
    }
    if let Some(e) = chdir_failed {
        let line = crate::stepd::chdir_fallback_line(&s.node, &s.work_dir.to_string_lossy(), e);
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    }
    // TaskProlog's `print` lines come first in the task's output.
    if !s.preamble.is_empty() {
        let _ = nix::unistd::write(std::io::stdout(), &s.preamble);
    }
    if let Some(fd) = s.keep_fd {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .map_err(io)?;
    }
    let mut env = s.env.clone();
    if let Ok(v) = CString::new(format!("SLURM_TASK_PID={}", std::process::id())) {
        env.push(v);
    }
    if s.flavour == Flavour::Batch {
        exec_batch(s, &env);
    }
    let mut last = Errno::ENOENT;
    for cand in &s.candidates {
        match nix::unistd::execve(cand.as_c_str(), &s.argv, &env) {
            Err(e @ (Errno::ENOENT | Errno::ENOTDIR)) => {
                last = if last == Errno::EACCES { last } else { e }
            }
            Err(Errno::EACCES) => last = Errno::EACCES,
            Err(e) => return Err(io(e)),
            Ok(_) => {}
        }
    }
    Err(io(last))
}

/// A numbered step's task files (those given; the others are stepd's pipes): stdin,
/// stdout, stderr, in that order. One that cannot be opened is said through the report
/// pipe, as slurmstepd's io setup says it.
#[allow(unsafe_code)]
fn open_task_files(c: &Child) -> std::io::Result<()> {
    use nix::fcntl::open;
    use nix::sys::stat::Mode;
    let io = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let s = &c.s;
    let mode = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | if s.append {
            OFlag::O_APPEND
        } else {
            OFlag::O_TRUNC
        };
    let perm = Mode::from_bits_truncate(0o666);
    let open_or_say = |p: &CString, what: &str, flags: OFlag, perm: Mode| {
        open(p.as_c_str(), flags, perm).map_err(|e| {
            let line = crate::stepd::setup_failure_line(&s.node, what, &p.to_string_lossy(), e);
            // SAFETY: `report` is the write end of stepd's pipe, open in this child.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(c.report) };
            let _ = nix::unistd::write(fd, line.as_bytes());
            io(e)
        })
    };
    if let Some(p) = &s.stdin_file {
        let fd = open_or_say(p, "stdin", OFlag::O_RDONLY, Mode::empty())?;
        nix::unistd::dup2(fd.as_raw_fd(), 0).map_err(io)?;
    }
    if let Some(p) = &s.stdout_file {
        let fd = open_or_say(p, "stdout", mode, perm)?;
        nix::unistd::dup2(fd.as_raw_fd(), 1).map_err(io)?;
        if s.stderr_file.as_ref() == Some(p) {
            nix::unistd::dup2(fd.as_raw_fd(), 2).map_err(io)?;
        }
    }
    if let Some(p) = &s.stderr_file
        && s.stdout_file.as_ref() != Some(p)
    {
        let fd = open_or_say(p, "stderr", mode, perm)?;
        nix::unistd::dup2(fd.as_raw_fd(), 2).map_err(io)?;
    }
    Ok(())
}

/// The batch script's files: stdout, stderr (the stdout file again when they are the
/// same), stdin. A file that cannot be opened fails the launch (JobLaunchFailure, 0:53),
/// with slurmstepd's line in the job's error file when that one can be opened.
fn open_batch_files(s: &TaskSetup) -> std::io::Result<()> {
    use nix::fcntl::open;
    use nix::sys::stat::Mode;
    use std::os::fd::AsRawFd;
    let io = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let missing = || std::io::Error::from_raw_os_error(libc::EINVAL);
    let stdout = s.stdout_file.as_ref().ok_or_else(missing)?;
    let stdin = s.stdin_file.as_ref().ok_or_else(missing)?;
    let stderr = s.stderr_file.as_ref().filter(|e| *e != stdout);
    // Always O_APPEND: stepd appends its own lines (time limit, cancel, OOM) to these
    // files while the job may still write, and neither may overwrite the other.
    let mode = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_APPEND
        | if s.append {
            OFlag::empty()
        } else {
            OFlag::O_TRUNC
        };
    let perm = Mode::from_bits_truncate(0o666);
    let say = |what: &str, path: &CString, e: Errno| {
        let line = crate::stepd::setup_failure_line(&s.node, what, &path.to_string_lossy(), e);
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    };
    let out = match open(stdout.as_c_str(), mode, perm) {
        Ok(fd) => fd,
        Err(e) => {
            if let Some(path) = stderr
                && let Ok(fd) = open(path.as_c_str(), mode, perm)
                && nix::unistd::dup2(fd, 2).is_ok()
            {
                say("stdout", stdout, e);
            }
            return Err(io(e));
        }
    };
    let err = match stderr {
        Some(e) => open(e.as_c_str(), mode, perm).map_err(io)?,
        None => nix::unistd::dup(out.as_raw_fd()).map_err(io)?,
    };
    let inp = match open(stdin.as_c_str(), OFlag::O_RDONLY, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            if nix::unistd::dup2(err.as_raw_fd(), 2).is_ok() {
                say("stdin", stdin, e);
            }
            return Err(io(e));
        }
    };
    nix::unistd::dup2(inp.as_raw_fd(), 0).map_err(io)?;
    nix::unistd::dup2(out.as_raw_fd(), 1).map_err(io)?;
    nix::unistd::dup2(err.as_raw_fd(), 2).map_err(io)?;
    Ok(())
}

/// Execs the batch script; as slurmstepd's `_exec_task`, a failed exec is said in the
/// job's stderr and the script exits with the errno (the job ends FAILED,
/// NonZeroExitCode, ExitCode N:0).
#[allow(unsafe_code)]
fn exec_batch(s: &TaskSetup, env: &[CString]) -> ! {
    let e = match s.candidates.first() {
        Some(script) => match nix::unistd::execve(script.as_c_str(), &s.argv, env) {
            Ok(never) => match never {},
            Err(e) => e,
        },
        None => Errno::ENOENT,
    };
    let script = s
        .candidates
        .first()
        .map(|c| c.to_string_lossy())
        .unwrap_or_default();
    let line = crate::stepd::exec_failure_line(&s.node, &script, std::path::Path::new(&*script), e);
    let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    // SAFETY: `_exit` ends this forked child at once, without running the parent's
    // atexit handlers or flushing stdio buffers it shares with the parent.
    unsafe { nix::libc::_exit(e as i32) }
}
