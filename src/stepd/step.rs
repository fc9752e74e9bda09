//! stepd for a numbered step (cf. slurmstepd's mgr.c, io.c, pdebug-free parts of
//! task.c): runs this node's tasks of an `srun` step and streams their I/O to the agent.
//!
//! The agent starts `sluice stepd <dir>` with fd 0 connected to a Unix socket; both ends
//! speak framed [`StepdInput`]/[`StepdEvent`] messages. stepd is single-threaded: one
//! `poll(2)` loop over the agent socket, a signalfd (SIGCHLD, SIGTERM, SIGALRM, …), the
//! tasks' stdout/stderr pipes (or the pty master of `--pty`), and the stdin pipes it
//! feeds. Each task runs in its own process group (a session of its own with `--pty`),
//! so a signal reaches the whole task.
//!
//! Invariants: [`StepdEvent::Done`] is sent once, after every task was reaped and its
//! output drained (or the drain grace ran out), and after every `TaskExit`. If the
//! agent goes away (an SSH drop, an agent restart) the tasks go on: events are numbered
//! and kept in the step's spool until the controller acknowledges them, and the next
//! agent re-attaches through the step's socket and has them replayed ([`super::stream`]).
//! After `Done`, stepd waits (bounded) until the controller has it.

use super::env;
use super::gpus;
use super::usage;
use crate::model::job::{ExitStatus, GresAlloc};
use crate::model::step::{CpuBindKind, StdinMode, StepUsage};
use crate::proto::spool;
use crate::proto::{LaunchStep, StepdEvent, StepdInput};
use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::proto::spool::STEP_LAUNCH;

/// How often usage is sampled and reported.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Most stdin bytes held for one task that does not read them.
const STDIN_CAP: usize = 64 << 20;
/// How long output is still read after the last task ended (a background process may
/// hold a pipe open; it is killed, but its output may lag).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// One task of this node.
struct Task {
    rank: u32,
    pid: Option<i32>,
    status: Option<ExitStatus>,
}

/// An fd the tasks write to and stepd reads.
struct OutFd {
    fd: OwnedFd,
    rank: u32,
    stderr: bool,
    /// A pty master: EIO means the slave side is closed.
    pty: bool,
}

/// An fd stepd writes a task's stdin to.
struct InFd {
    fd: OwnedFd,
    buf: VecDeque<u8>,
    eof: bool,
    pty: bool,
}

/// Runs the step described by `dir/launch_step`; see the module docs.
pub fn run(dir: &Path) -> anyhow::Result<()> {
    let ls: LaunchStep = spool::read(dir, STEP_LAUNCH)?.context("no step launch record")?;
    let _ = nix::unistd::setsid();
    spool::write_pid(dir, spool::STEPD_PID, std::process::id())?;
    let link_fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("no agent link on stdin")?;
    // Nothing else of ours should read the link.
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2(null.as_raw_fd(), 0);
    }
    let mut link = super::stream::Stream::new(dir, link_fd);
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGALRM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGPIPE,
    ] {
        mask.add(s);
    }
    mask.thread_block().context("cannot block signals")?;
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("cannot create signalfd")?;

    let node_index = ls.node_index as usize;
    let node = ls.layout.nodes.get(node_index).cloned().unwrap_or_default();
    let ranks: Vec<u32> = ls.layout.tasks.get(node_index).cloned().unwrap_or_default();
    let me = nix::unistd::geteuid().as_raw();
    let user = if me == 0 && ls.job.uid != 0 {
        Some((
            CString::new(ls.job.user.clone()).context("NUL in user name")?,
            ls.job.uid,
            ls.job.gid,
        ))
    } else {
        None
    };
    let base_env = env::step_env(&ls, &node);
    // Device files of GPUs the job, and the step, do not hold on this node.
    let job_devs = ls.job.alloc.as_ref().and_then(|a| {
        let i = a.nodes.iter().position(|n| *n == node)?;
        a.gres.get(i).cloned()
    });
    let step_devs: Vec<GresAlloc> = ls.layout.gres.get(node_index).cloned().unwrap_or_default();
    let (job_deny, _) = gpus::deny_list(&ls.node_gres, &job_devs.unwrap_or_default());
    let (step_deny, notes) = gpus::deny_list(&ls.node_gres, &step_devs);
    if ls.cgroup.constrain_devices {
        for n in notes {
            eprintln!(
                "stepd: step {}.{}: device not constrained: {n}",
                ls.job.id, ls.step_id
            );
        }
    }
    // The step's cgroups (`isolate`): tasks join theirs between fork and exec, and
    // whatever is left of the step when its tasks are gone is killed with it.
    let iso = {
        use super::isolate::{
            Scope, detect, step::StepIsolation, step::StepRequest, step::node_ram,
        };
        let conf = &ls.cgroup;
        // Slurm's `step_<S>`; a step on several nodes adds the node's index, so that
        // nodes sharing one machine (test clusters: several agents on one host) never
        // share, and kill, each other's step cgroup.
        let step = if ls.layout.nodes.len() > 1 {
            format!("{}.{}", ls.step_id, ls.node_index)
        } else {
            ls.step_id.to_string()
        };
        let scope = Scope {
            root: conf.root.clone(),
            uid: ls.job.uid,
            job: ls.job.id,
            step,
        };
        let req = StepRequest {
            cpus: ls.layout.cpus.get(node_index).copied().unwrap_or(0),
            mem_mib: ls.job.alloc.as_ref().map_or(0, |a| a.mem_per_node),
            node_ram: node_ram(),
            deny: step_deny.clone(),
            deny_job: Some(job_deny),
            tasks: ranks.len() as u32,
        };
        let lock = dir.parent().unwrap_or(dir).join(".isolate.lock");
        match StepIsolation::setup(detect(conf, scope.clone()), conf, scope, &req, &lock) {
            Ok(i) => {
                for d in i.degraded() {
                    eprintln!(
                        "stepd: step {}.{}: degraded isolation ({}): {d}",
                        ls.job.id,
                        ls.step_id,
                        i.backend()
                    );
                }
                Some(i)
            }
            Err(e) => {
                let first = ranks.first().copied().unwrap_or(0);
                link.send(&StepdEvent::Output {
                    task: first,
                    stderr: true,
                    data: format!("slurmstepd-{node}: error: cannot isolate the step: {e}\n")
                        .into_bytes(),
                });
                for &r in &ranks {
                    link.send(&StepdEvent::TaskExit {
                        task: r,
                        status: ExitStatus { code: 1, signal: 0 },
                    });
                }
                let done = link.send(&StepdEvent::Done {
                    usage: StepUsage::default(),
                });
                linger(&mut link, &sfd, done, linger_for(&ls));
                return Ok(());
            }
        }
    };
    let online: Vec<usize> = match iso.as_ref().and_then(|i| i.cpus()) {
        Some(c) if !c.is_empty() => c.ids().map(|x| x as usize).collect(),
        _ => online_cpus(),
    };
    // The step's own CPUs here: the job's CPU ids the controller gave it.
    let step_ids = ls
        .layout
        .cpu_ids
        .get(ls.node_index as usize)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let confined = iso
        .as_ref()
        .and_then(|i| i.cpus())
        .is_some_and(|c| !c.is_empty());
    let job_ids: &[u32] = ls
        .job
        .alloc
        .as_ref()
        .and_then(|a| {
            let k = a.nodes.iter().position(|n| *n == node)?;
            a.cpu_ids.get(k).map(Vec::as_slice)
        })
        .unwrap_or(&[]);
    let base = super::cpubind::step_cpus(step_ids, job_ids, &online, confined);
    // A map/mask naming a CPU the step does not have fails the launch here, as in
    // Slurm, rather than leaving tasks unbound.
    let node_cpus = online_cpus().iter().max().map_or(0, |m| m + 1);
    if let Err(e) = super::cpubind::validate(&ls.spec.cpu_bind, &base, node_cpus) {
        eprintln!(
            "stepd: step {}.{}: --cpu-bind names CPU {}, not the step's ({:?})",
            ls.job.id, ls.step_id, e.cpu, base
        );
        link.send(&StepdEvent::LaunchFailed {
            reason: super::cpubind::CPU_BIND_ERROR.into(),
            detail: Some(e.detail),
        });
        let fin = iso.map(|i| i.finish());
        for e in fin.iter().flat_map(|f| &f.errors) {
            eprintln!("stepd: step {}.{}: {e}", ls.job.id, ls.step_id);
        }
        let done = link.send(&StepdEvent::Done {
            usage: StepUsage::default(),
        });
        linger(&mut link, &sfd, done, linger_for(&ls));
        return Ok(());
    }
    // One thread of each core (--hint=nomultithread, --threads-per-core): the step's
    // CPUs shrink to those threads and, unless --cpu-bind was given, tasks are bound
    // to threads, as Slurm's task/affinity does.
    let per_core = ls.spec.threads_per_core.or(ls.job.spec.threads_per_core);
    let mut cpu_bind = ls.spec.cpu_bind.clone();
    if per_core.is_some() && !ls.spec.cpu_bind_set && cpu_bind.kind == CpuBindKind::None {
        cpu_bind.kind = CpuBindKind::Threads;
    }
    let topo = if per_core.is_some()
        || matches!(
            cpu_bind.kind,
            CpuBindKind::Cores | CpuBindKind::Sockets | CpuBindKind::Ldoms
        ) {
        super::cpubind::Topology::read(Path::new("/sys"), &base)
    } else {
        super::cpubind::Topology::default()
    };
    let base = match per_core {
        Some(u) => super::cpubind::threads_per_core(&base, &topo, u as usize),
        None => base,
    };

    let mut tasks: Vec<Task> = Vec::new();
    let mut outs: Vec<OutFd> = Vec::new();
    let mut ins: Vec<InFd> = Vec::new();
    let mut pty_master: Option<OwnedFd> = None;
    let mut pids = Vec::new();
    let hidden = gpus::devices_hidden(
        ls.cgroup.constrain_devices,
        &step_deny,
        &iso.as_ref().map(|i| i.degraded()).unwrap_or_default(),
    );
    let mut step_gpus = gpus::StepGpus::new(
        &step_devs,
        &ls.node_gres,
        ls.spec.gpus.effective_bind(),
        hidden,
    );
    let mut taken: Vec<usize> = Vec::new();
    // NCCL's view of the node, read once per step: interfaces, and the first node's
    // address (MASTER_ADDR's) to pick NCCL_SOCKET_IFNAME by.
    let first_node = ls.layout.nodes.first().cloned().unwrap_or_default();
    let (ifaces, first_addr) = if step_gpus.devs.is_empty() {
        (Vec::new(), None)
    } else {
        use std::net::ToSocketAddrs;
        let addr = (first_node.as_str(), 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| {
                a.find_map(|x| match x.ip() {
                    std::net::IpAddr::V4(v) => Some(v),
                    std::net::IpAddr::V6(_) => None,
                })
            });
        (super::nccl::local_ifaces(), addr)
    };
    // Each task's GPUs, for GPU usage sampling.
    let mut task_gpus: Vec<(u32, Vec<u32>)> = Vec::new();
    let timeout = ls.scripts.prolog_epilog_timeout;
    let mut task_envs: Vec<Vec<(String, String)>> = Vec::new();
    // --mpi=pmi2: the node's PMI server (`pmi`), one socket pair per task.
    let mut pmi =
        (ls.spec.mpi == crate::model::mpi::MpiType::Pmi2).then(|| super::pmi::Server::new(&ls));
    for (local, &rank) in ranks.iter().enumerate() {
        let mut env = env::task_env(&base_env, rank, local as u32, ls.node_id());
        let cpus = super::cpubind::task_cpus(
            &cpu_bind,
            &base,
            local as u32,
            ls.spec.cpus_per_task.unwrap_or(1).max(1) as usize,
            &topo,
        );
        let cpus = match step_gpus.bind_task(local as u32, cpus.clone(), &online, &taken) {
            Ok(mut t) => {
                task_gpus.push((rank, t.globals.clone()));
                if !t.globals.is_empty() {
                    let buses: Vec<String> = t
                        .globals
                        .iter()
                        .filter_map(|g| {
                            ls.node_gres
                                .iter()
                                .find(|d| d.name == "gpu" && d.index == *g)
                                .and_then(|d| d.pci_bus.clone())
                        })
                        .collect();
                    let hcas = super::nccl::hcas_near(&super::nccl::sys_root(), &buses);
                    let inp = super::nccl::NcclInput {
                        job: ls.job.id,
                        step: ls.step_id,
                        rank,
                        first_node: &first_node,
                        first_addr,
                        ifaces: &ifaces,
                        hcas: &hcas,
                    };
                    let extra = super::nccl::nccl_env(&inp, &env);
                    t.env.extend(extra);
                }
                for (k, v) in t.env {
                    match env.iter_mut().find(|(n, _)| *n == k) {
                        Some(e) => e.1 = v,
                        None => env.push((k, v)),
                    }
                }
                if !t.globals.is_empty() {
                    gpus::use_unique_ids(&mut env, &ls.node_gres);
                }
                if let Some(v) = t.verbose {
                    link.send(&StepdEvent::Output {
                        task: rank,
                        stderr: true,
                        data: format!("{v}\n").into_bytes(),
                    });
                }
                t.cpus
            }
            Err(e) => {
                link.send(&StepdEvent::Output {
                    task: rank,
                    stderr: true,
                    data: format!("slurmstepd-{node}: error: gpu-bind: {e}\n").into_bytes(),
                });
                cpus
            }
        };
        if let Some(c) = &cpus {
            taken.extend(c.iter().copied());
        }
        if let Some(c) = &cpus {
            env.extend(env::cpu_bind_env(&cpu_bind, c));
        }
        let mut preamble = Vec::new();
        let mut prolog_failed = None;
        if let Some(tp) = &ls.scripts.task_prolog {
            match super::task_script::run(tp, &env, &user, &ls.spec.work_dir, timeout) {
                Ok(out) => {
                    preamble = super::task_script::apply(&super::task_script::parse(&out), &mut env)
                }
                Err(e) => prolog_failed = Some(e),
            }
        }
        let pmi_end = match pmi.as_mut().map(|p| p.add_task(rank)) {
            Some(Ok(end)) => {
                env.extend(end.env.iter().cloned());
                Some(end.fd)
            }
            Some(Err(e)) => {
                eprintln!("stepd: step {}.{}: PMI socket: {e}", ls.job.id, ls.step_id);
                None
            }
            None => None,
        };
        task_envs.push(env.clone());
        let mut setup = TaskSetup::new(&ls, rank, &node, env, user.clone(), cpus.clone())?;
        setup.keep_fd = pmi_end.as_ref().map(|f| f.as_raw_fd());
        if let Some(c) = &ls.spec.container {
            let argv =
                super::container::task_argv(c, &ls, ls.spec.argv_of(rank), &task_envs[local]);
            setup.set_argv(&argv, &task_envs[local])?;
        }
        setup.preamble = preamble;
        setup.join = iso.as_ref().and_then(|i| i.task_join(local as u32));
        let pty = ls.spec.pty && rank == 0;
        let mut t = Task {
            rank,
            pid: None,
            status: None,
        };
        if let Some((code, why)) = prolog_failed {
            // slurmstepd's task exits with the prolog's status instead of running.
            link.send(&StepdEvent::Output {
                task: rank,
                stderr: true,
                data: format!("slurmstepd-{node}: error: TaskProlog failed {why}\n").into_bytes(),
            });
            t.status = Some(ExitStatus { code, signal: 0 });
            tasks.push(t);
            continue;
        }
        let abs = |f: &Option<CString>| f.as_ref().map(|c| c.to_string_lossy().into_owned());
        let outs_abs: Vec<String> = [abs(&setup.stdout_file), abs(&setup.stderr_file)]
            .into_iter()
            .flatten()
            .collect();
        let outs_ref: Vec<&str> = outs_abs.iter().map(String::as_str).collect();
        super::wait_for_io_paths(
            &outs_ref,
            abs(&setup.stdin_file).as_deref(),
            ls.scripts.launch_io_wait(),
        );
        let spawned = spawn_task(&setup, &ls, rank, pty);
        drop(pmi_end);
        if spawned.is_err()
            && let Some(p) = pmi.as_mut()
        {
            p.task_failed(rank);
        }
        match spawned {
            Ok(sp) => {
                t.pid = Some(sp.pid);
                pids.push((rank, sp.pid as u32));
                if ls.spec.cpu_bind.verbose {
                    // Unbound tasks report what they may use (the job's CPUs).
                    let shown = cpus.clone().unwrap_or_else(|| online.clone());
                    let mut b = cpu_bind.clone();
                    if cpus.is_none() {
                        b.kind = CpuBindKind::None;
                    }
                    link.send(&StepdEvent::Output {
                        task: rank,
                        stderr: true,
                        data: super::cpubind::verbose_line(
                            &b,
                            &node,
                            rank,
                            local as u32,
                            sp.pid,
                            &shown,
                        )
                        .into_bytes(),
                    });
                }
                outs.extend(sp.outs);
                if let Some(i) = sp.stdin {
                    ins.push(i);
                }
                if sp.master.is_some() {
                    pty_master = sp.master;
                }
            }
            Err(SpawnError {
                err,
                setup_line: Some(line),
            }) => {
                link.send(&StepdEvent::Output {
                    task: rank,
                    stderr: true,
                    data: line.into_bytes(),
                });
                t.status = Some(ExitStatus {
                    code: err.raw_os_error().unwrap_or(1) & 0xff,
                    signal: 0,
                });
            }
            Err(SpawnError { err: e, .. }) => {
                let errno = e.raw_os_error().unwrap_or(1);
                // The file exec was given: under the working directory, or on PATH.
                let name = &setup.argv0_name;
                let file = if name.contains('/') {
                    Path::new(&ls.spec.work_dir).join(name)
                } else {
                    setup
                        .candidates
                        .iter()
                        .map(|c| PathBuf::from(c.to_string_lossy().into_owned()))
                        .find(|p| p.exists())
                        .unwrap_or_default()
                };
                let msg = super::exec_failure_line(&node, name, &file, Errno::from_raw(errno));
                link.send(&StepdEvent::Output {
                    task: rank,
                    stderr: true,
                    data: msg.into_bytes(),
                });
                t.status = Some(ExitStatus {
                    code: errno & 0xff,
                    signal: 0,
                });
            }
        }
        tasks.push(t);
    }
    link.send(&StepdEvent::Started { pids });
    for t in &tasks {
        if let Some(st) = t.status {
            link.send(&StepdEvent::TaskExit {
                task: t.rank,
                status: st,
            });
        }
    }

    let page_kib = usage::page_kib();
    let mut gpu_meter = if task_gpus.iter().any(|(_, g)| !g.is_empty()) {
        super::gpu_usage::sampler()
            .and_then(|s| super::gpu_usage::GpuMeter::new(task_gpus, &ls.node_gres, s))
    } else {
        None
    };
    let mut last_usage = StepUsage::default();
    let mut next_sample = Instant::now();
    let mut drain_until: Option<Instant> = None;
    let mut terminating = false;
    let mut abandoned = false;
    let mut iso = iso;
    let mut finished = None;
    loop {
        let all_done = tasks.iter().all(|t| t.status.is_some());
        if all_done && drain_until.is_none() {
            // Whatever a task left behind goes with it: its process group, and
            // everything in the step's cgroup.
            for t in &tasks {
                if let Some(pid) = t.pid {
                    let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
                }
            }
            if let Some(i) = iso.take() {
                finished = Some(i.finish());
            }
            drain_until = Some(Instant::now() + DRAIN_GRACE);
        }
        if let Some(d) = drain_until
            && (outs.is_empty() || Instant::now() >= d)
        {
            break;
        }
        let now = Instant::now();
        if now >= next_sample && !all_done {
            let mut u = sample(&tasks, &node, page_kib, &last_usage);
            if let Some(m) = gpu_meter.as_mut() {
                u.gpu = m.sample(&node);
            }
            link.send(&StepdEvent::Usage(u.clone()));
            last_usage = u;
            next_sample = now + SAMPLE_EVERY;
        }
        let wait = next_sample
            .saturating_duration_since(now)
            .min(drain_until.map_or(SAMPLE_EVERY, |d| d.saturating_duration_since(now)))
            .max(Duration::from_millis(1));
        let mut fds: Vec<PollFd> = Vec::with_capacity(outs.len() + ins.len() + 3);
        fds.push(PollFd::new(sfd.as_fd(), PollFlags::POLLIN));
        let (listen_fd, conn_fd) = link.fds();
        let listen_slot = listen_fd.map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
            fds.len() - 1
        });
        let link_slot = conn_fd.map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
            fds.len() - 1
        });
        // A full event log (no controller has taken the output for a long while): the
        // tasks' output waits in their pipes.
        let out_ev = if link.full() {
            PollFlags::empty()
        } else {
            PollFlags::POLLIN
        };
        let out_base = fds.len();
        for o in &outs {
            fds.push(PollFd::new(o.fd.as_fd(), out_ev));
        }
        let in_base = fds.len();
        for i in &ins {
            let ev = if i.buf.is_empty() {
                PollFlags::empty()
            } else {
                PollFlags::POLLOUT
            };
            fds.push(PollFd::new(i.fd.as_fd(), ev));
        }
        let pmi_base = fds.len();
        if let Some(p) = &pmi {
            fds.extend(p.poll_fds().into_iter().map(|(fd, ev)| PollFd::new(fd, ev)));
        }
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e).context("poll"),
        }
        let ready = |i: usize| fds[i].revents().is_some_and(|r| !r.is_empty());
        let sig_ready = ready(0);
        let link_ready = link_slot.is_some_and(ready);
        let listen_ready = listen_slot.is_some_and(ready);
        let out_ready: Vec<bool> = (0..outs.len()).map(|i| ready(out_base + i)).collect();
        let in_ready: Vec<bool> = (0..ins.len()).map(|i| ready(in_base + i)).collect();
        let pmi_ready: Vec<bool> = (pmi_base..fds.len()).map(ready).collect();
        drop(fds);
        if let Some(p) = pmi.as_mut() {
            for ev in p.service(&pmi_ready) {
                link.send(&ev);
            }
        }

        // Task output first, so that it precedes the exit it led to.
        let mut closed = Vec::new();
        for (i, o) in outs.iter().enumerate() {
            if !out_ready[i] {
                continue;
            }
            let mut buf = [0u8; 65536];
            match nix::unistd::read(o.fd.as_raw_fd(), &mut buf) {
                Ok(0) => closed.push(i),
                Ok(n) => {
                    link.send(&StepdEvent::Output {
                        task: o.rank,
                        stderr: o.stderr,
                        data: buf[..n].to_vec(),
                    });
                }
                Err(Errno::EINTR) | Err(Errno::EAGAIN) => {}
                Err(Errno::EIO) if o.pty => closed.push(i),
                Err(_) => closed.push(i),
            }
        }
        for i in closed.into_iter().rev() {
            outs.remove(i);
        }
        let mut done_in = Vec::new();
        for (i, inp) in ins.iter_mut().enumerate() {
            if in_ready[i] {
                let (a, b) = inp.buf.as_slices();
                let chunk = if a.is_empty() { b } else { a };
                match nix::unistd::write(inp.fd.as_fd(), chunk) {
                    Ok(n) => {
                        inp.buf.drain(..n);
                    }
                    Err(Errno::EAGAIN) | Err(Errno::EINTR) => {}
                    Err(_) => {
                        inp.buf.clear();
                        inp.eof = true;
                    }
                }
            }
            if inp.eof && inp.buf.is_empty() && !inp.pty {
                done_in.push(i);
            }
        }
        for i in done_in.into_iter().rev() {
            ins.remove(i);
        }
        if listen_ready {
            link.accept();
        }
        if link_ready || listen_ready {
            for m in link.read() {
                match m {
                    StepdInput::Stdin { data } => {
                        // A task that never reads its stdin must not make stepd hold
                        // an endless input: beyond the cap, input is dropped.
                        for i in ins.iter_mut().filter(|i| !i.eof) {
                            if i.buf.len() + data.len() <= STDIN_CAP {
                                i.buf.extend(data.iter().copied());
                            }
                        }
                    }
                    StepdInput::StdinEof => {
                        for i in ins.iter_mut() {
                            i.eof = true;
                        }
                    }
                    StepdInput::Signal(sig) => signal_tasks(&tasks, sig),
                    StepdInput::WinSize { rows, cols } => {
                        if let Some(m) = &pty_master {
                            set_winsize(m, rows, cols);
                        }
                    }
                    StepdInput::Suspend(stop) => {
                        if !terminating {
                            set_suspended(iso.as_ref(), &tasks, stop);
                        }
                    }
                    // Served by the link itself.
                    StepdInput::Resume { .. } | StepdInput::Ack(_) => {}
                    StepdInput::PmiFenceDone { seq, kvs } => {
                        if let Some(p) = pmi.as_mut() {
                            p.fence_done(seq, kvs);
                        }
                    }
                    StepdInput::Abandon { kill_wait } => {
                        abandoned = true;
                        if !terminating {
                            terminating = true;
                            set_suspended(iso.as_ref(), &tasks, false);
                            terminate(&tasks, kill_wait);
                            if let Some(i) = &iso {
                                i.signal(Signal::SIGCONT);
                                i.signal(Signal::SIGTERM);
                            }
                        }
                    }
                    StepdInput::Terminate { kill_wait, message } => {
                        if !terminating {
                            terminating = true;
                            // Frozen tasks take no signal: a suspended step is thawed.
                            set_suspended(iso.as_ref(), &tasks, false);
                            if let (Some(m), Some(t)) = (message, tasks.first()) {
                                link.send(&StepdEvent::Output {
                                    task: t.rank,
                                    stderr: true,
                                    data: format!("slurmstepd-{node}: error: {m}\n").into_bytes(),
                                });
                            }
                            terminate(&tasks, kill_wait);
                            if let Some(i) = &iso {
                                i.signal(Signal::SIGCONT);
                                i.signal(Signal::SIGTERM);
                            }
                        }
                    }
                }
            }
        }
        if sig_ready {
            while let Ok(Some(si)) = sfd.read_signal() {
                match Signal::try_from(si.ssi_signo as i32) {
                    Ok(Signal::SIGCHLD) => {}
                    Ok(Signal::SIGALRM) => {
                        signal_tasks(&tasks, Signal::SIGKILL as i32);
                        if let Some(i) = &iso {
                            i.signal(Signal::SIGKILL);
                        }
                    }
                    Ok(Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP) if !terminating => {
                        terminating = true;
                        set_suspended(iso.as_ref(), &tasks, false);
                        terminate(&tasks, ls.kill_wait);
                    }
                    _ => {}
                }
            }
            reap(&mut tasks, &mut link);
        }
    }
    // Reap anything left (double forks inside the task groups were killed above).
    reap(&mut tasks, &mut link);
    if let Some(te) = &ls.scripts.task_epilog {
        for env in &task_envs {
            if let Err((_, why)) =
                super::task_script::run(te, env, &user, &ls.spec.work_dir, timeout)
            {
                eprintln!(
                    "stepd: step {}.{}: TaskEpilog failed {why}",
                    ls.job.id, ls.step_id
                );
            }
        }
    }
    let mut fin = last_usage;
    fin.pids.clear();
    usage::add_children_rusage(&mut fin, &node);
    if let Some(f) = iso.take().map(|i| i.finish()).or(finished) {
        for e in &f.errors {
            eprintln!("stepd: step {}.{}: {e}", ls.job.id, ls.step_id);
        }
        if f.oom_kills > 0
            && let Some(t) = tasks.first()
        {
            let m = super::isolate::step::oom_message(
                &super::isolate::Scope {
                    root: String::new(),
                    uid: ls.job.uid,
                    job: ls.job.id,
                    step: ls.step_id.to_string(),
                },
                f.oom_kills,
            );
            link.send(&StepdEvent::Output {
                task: t.rank,
                stderr: true,
                data: format!("slurmstepd-{node}: error: {m}\n").into_bytes(),
            });
        }
        usage::add_cgroup_usage(&mut fin, &node, &f.usage);
    }
    fin.ntasks = tasks.len() as u32;
    fin.fill_empty_nodes(&node);
    let done = link.send(&StepdEvent::Done { usage: fin });
    if !abandoned {
        linger(&mut link, &sfd, done, linger_for(&ls));
    }
    Ok(())
}

/// How long a finished step waits for the controller to take its last events.
fn linger_for(ls: &LaunchStep) -> Duration {
    match ls.linger_secs {
        0 => Duration::from_secs(600),
        s => Duration::from_secs(u64::from(s)),
    }
}

/// After the step's end: serves agents (an SSH drop or agent restart may have cost
/// the last events) until the controller has event `done`, an agent says to abandon
/// the step, SIGTERM comes, or `limit` passes.
fn linger(link: &mut super::stream::Stream, sfd: &SignalFd, done: u64, limit: Duration) {
    let until = Instant::now() + limit;
    while !link.acked(done) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        let wait = (until - now).min(Duration::from_secs(1));
        let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
        let (l, c) = link.fds();
        let has_l = l.is_some();
        fds.extend(l.map(|fd| PollFd::new(fd, PollFlags::POLLIN)));
        fds.extend(c.map(|fd| PollFd::new(fd, PollFlags::POLLIN)));
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut fds, timeout);
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let (sig, listen) = (ready(0), has_l && ready(1));
        drop(fds);
        if sig {
            while let Ok(Some(si)) = sfd.read_signal() {
                if matches!(
                    Signal::try_from(si.ssi_signo as i32),
                    Ok(Signal::SIGTERM | Signal::SIGINT | Signal::SIGHUP)
                ) {
                    return;
                }
            }
        }
        if listen {
            link.accept();
        }
        for m in link.read() {
            if matches!(m, StepdInput::Abandon { .. }) {
                return;
            }
        }
    }
}

fn sample(tasks: &[Task], node: &str, page_kib: u64, last: &StepUsage) -> StepUsage {
    let groups: Vec<(u32, i32)> = tasks
        .iter()
        .filter(|t| t.status.is_none())
        .filter_map(|t| Some((t.rank, t.pid?)))
        .collect();
    let (samples, pids) = usage::sample_groups(&groups, page_kib);
    let mut u = StepUsage::from_tasks(node, &samples);
    u.pids = pids;
    u.keep_peaks(last);
    u
}

fn signal_tasks(tasks: &[Task], sig: i32) {
    let Ok(sig) = Signal::try_from(sig) else {
        return;
    };
    for t in tasks.iter().filter(|t| t.status.is_none()) {
        if let Some(pid) = t.pid {
            let _ = kill(Pid::from_raw(-pid), sig);
        }
    }
}

/// Stops (`stop`) or continues the step's tasks for `scontrol suspend`/`resume`:
/// through the cgroup freezer when the step has one, else (or when freezing fails)
/// SIGSTOP/SIGCONT to each task's process group.
fn set_suspended(iso: Option<&super::isolate::step::StepIsolation>, tasks: &[Task], stop: bool) {
    let frozen = iso.is_some_and(|i| {
        let r = if stop { i.suspend() } else { i.resume() };
        if let Err(e) = &r {
            eprintln!(
                "stepd: {} failed: {e}",
                if stop { "suspend" } else { "resume" }
            );
        }
        r.is_ok()
    });
    // Without a freezer, signals; on resume both, so that a step stopped either way
    // continues.
    if !frozen || !stop {
        let sig = if stop {
            Signal::SIGSTOP
        } else {
            Signal::SIGCONT
        };
        signal_tasks(tasks, sig as i32);
    }
}

fn terminate(tasks: &[Task], kill_wait: u32) {
    signal_tasks(tasks, Signal::SIGCONT as i32);
    signal_tasks(tasks, Signal::SIGTERM as i32);
    nix::unistd::alarm::set(kill_wait.max(1));
}

fn reap(tasks: &mut [Task], link: &mut super::stream::Stream) {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                exited(tasks, link, pid, ExitStatus { code, signal: 0 })
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) => exited(
                tasks,
                link,
                pid,
                ExitStatus {
                    code: 0,
                    signal: sig as i32,
                },
            ),
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn exited(tasks: &mut [Task], link: &mut super::stream::Stream, pid: Pid, status: ExitStatus) {
    if let Some(t) = tasks
        .iter_mut()
        .find(|t| t.pid == Some(pid.as_raw()) && t.status.is_none())
    {
        t.status = Some(status);
        link.send(&StepdEvent::TaskExit {
            task: t.rank,
            status,
        });
    }
}

#[allow(unsafe_code)]
fn set_winsize(master: &OwnedFd, rows: u16, cols: u16) {
    let ws = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which points to a live,
    // initialised value for the duration of the call; the fd is an open pty master.
    unsafe {
        libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws);
    }
}

/// The CPUs this machine has online.
fn online_cpus() -> Vec<usize> {
    let n = nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .unwrap_or(1)
        .max(1) as usize;
    (0..n).collect()
}

/// Everything one task's child needs, prepared before fork.
struct TaskSetup {
    /// Candidate paths to exec, in PATH order.
    candidates: Vec<CString>,
    argv: Vec<CString>,
    env: Vec<CString>,
    work_dir: CString,
    /// Files for stdout/stderr/stdin when patterns were given (opened in the child, as
    /// the user).
    stdout_file: Option<CString>,
    stderr_file: Option<CString>,
    stdin_file: Option<CString>,
    append: bool,
    umask: u32,
    user: Option<(CString, u32, u32)>,
    cpus: Option<Vec<usize>>,
    /// The task's cgroup join (set by the caller when the step is isolated).
    join: Option<std::sync::Arc<super::isolate::TaskJoin>>,
    /// Base name of the executable, for error messages.
    argv0_name: String,
    /// This node's name, for slurmstepd's lines in the task's stderr.
    node: String,
    /// TaskProlog's `print` output, written to the task's stdout before it execs.
    preamble: Vec<u8>,
    /// An fd the task inherits (its PMI socket, `PMI_FD`): close-on-exec in stepd,
    /// cleared in the child.
    keep_fd: Option<std::os::fd::RawFd>,
}

impl TaskSetup {
    fn new(
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
                Some(p) => Ok(Some(cs(&super::under_work_dir(
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
            StdinMode::File(p) => Some(cs(&super::under_work_dir(
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
            keep_fd: None,
        })
    }
}

impl TaskSetup {
    /// Runs `argv` instead of the step's command (a container runtime's command line),
    /// found on `env`'s PATH. Errors: a NUL byte in an argument.
    fn set_argv(&mut self, argv: &[String], env: &[(String, String)]) -> anyhow::Result<()> {
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
struct SpawnError {
    err: std::io::Error,
    setup_line: Option<String>,
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
struct Spawned {
    pid: i32,
    outs: Vec<OutFd>,
    stdin: Option<InFd>,
    master: Option<OwnedFd>,
}

fn spawn_task(s: &TaskSetup, ls: &LaunchStep, rank: u32, pty: bool) -> Result<Spawned, SpawnError> {
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
    join: Option<std::sync::Arc<super::isolate::TaskJoin>>,
    node: String,
    preamble: Vec<u8>,
    keep_fd: Option<std::os::fd::RawFd>,
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
            keep_fd: s.keep_fd,
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
            let line = super::setup_failure_line(&s.node, what, &p.to_string_lossy(), e);
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
        let line = super::chdir_fallback_line(&s.node, &s.work_dir.to_string_lossy(), e);
        let _ = nix::unistd::write(std::io::stderr(), line.as_bytes());
    }
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
