//! Starting one task of a step (cf. slurmstepd's `_fork_all_tasks` and `exec_task`):
//! [`TaskSetup`] is the task's plan, everything its child needs, built before fork from
//! the launch request; [`spawn_task`] forks, sets the child up (cgroup, pty, CPU
//! affinity, identity, working directory, files) and execs it.

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

/// Everything one task's child needs, prepared before fork.
pub(super) struct TaskSetup {
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
        })
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

pub(super) fn spawn_task(
    s: &TaskSetup,
    ls: &LaunchStep,
    rank: u32,
    pty: bool,
) -> Result<Spawned, SpawnError> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let io = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
    let pipe = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io);
    let mut outs = Vec::new();
    let mut stdin = None;
    let mut master = None;
    let mut cmd = std::process::Command::new("/bin/false");
    let mut tty_path: Option<CString> = None;
    if pty {
        let ws = ls.spec.winsize.map(|(r, c)| nix::pty::Winsize {
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
        if ls.spec.stdin.reaches(rank) {
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
        s: CloneSetup::from(s),
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

/// An owned copy of a [`TaskSetup`] for the pre-exec closure.
#[derive(Clone)]
struct CloneSetup {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    env: Vec<CString>,
    work_dir: CString,
    stdout_file: Option<CString>,
    stderr_file: Option<CString>,
    stdin_file: Option<CString>,
    append: bool,
    umask: u32,
    user: Option<(CString, u32, u32)>,
    cpus: Option<Vec<usize>>,
    join: Option<std::sync::Arc<crate::stepd::isolate::TaskJoin>>,
    node: String,
    preamble: Vec<u8>,
}

impl From<&TaskSetup> for CloneSetup {
    fn from(s: &TaskSetup) -> CloneSetup {
        CloneSetup {
            candidates: s.candidates.clone(),
            argv: s.argv.clone(),
            env: s.env.clone(),
            work_dir: s.work_dir.clone(),
            stdout_file: s.stdout_file.clone(),
            stderr_file: s.stderr_file.clone(),
            stdin_file: s.stdin_file.clone(),
            append: s.append,
            umask: s.umask,
            user: s.user.clone(),
            cpus: s.cpus.clone(),
            join: s.join.clone(),
            node: s.node.clone(),
            preamble: s.preamble.clone(),
        }
    }
}

struct Child {
    s: CloneSetup,
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
    let chdir_failed = nix::unistd::chdir(s.work_dir.as_c_str()).err();
    if chdir_failed.is_some() {
        let _ = nix::unistd::chdir(c"/tmp");
    }
    let mode = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | if s.append {
            OFlag::O_APPEND
        } else {
            OFlag::O_TRUNC
        };
    let perm = Mode::from_bits_truncate(0o666);
    // As slurmstepd's io setup: a file that cannot be opened is said as such.
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
    if let Some(e) = chdir_failed {
        let line = crate::stepd::chdir_fallback_line(&s.node, &s.work_dir.to_string_lossy(), e);
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    }
    if !s.preamble.is_empty() {
        let _ = nix::unistd::write(std::io::stdout(), &s.preamble);
    }
    let mut env = s.env.clone();
    if let Ok(v) = CString::new(format!("SLURM_TASK_PID={}", std::process::id())) {
        env.push(v);
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
