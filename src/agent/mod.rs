//! The node agent (cf. slurmd): registers the node's resources with the controller,
//! launches a detached `sluice stepd` per job, relays signals to it, and reports how each
//! job ended. It speaks the protocol over any byte stream: an in-process pipe for the
//! controller's own node, stdin/stdout under SSH for remote ones ([`stdio`]).
//!
//! Jobs outlive the agent: each stepd records its state in the job's spool directory
//! (`proto::spool`), and a restarted agent re-adopts them from there. Steps do too:
//! their stepd keeps its events until the controller has them, and the next agent
//! re-attaches it through its socket when the controller says so ([`steps`]).

pub mod discover;
pub mod gpu;
pub mod gpu_watch;
mod relay;
mod scripts;
pub mod stdio;
mod steps;

use crate::config::NodeConf;
use crate::proto::spool::{self, StepResult, TerminateRequest};
use crate::proto::{EndKind, Framed, FromAgent, LaunchBatch, Role, ToAgent};
use anyhow::Context;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

/// What an agent needs to know.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The node this agent serves, with any declared resources.
    pub node: NodeConf,
    /// Where job spool directories live.
    pub spool_dir: PathBuf,
    /// The sluice binary, run as `sluice stepd <dir>` for each job.
    pub exe: PathBuf,
    /// Time between heartbeats (the controller sets it to a third of its SlurmdTimeout,
    /// at most 10 s).
    pub heartbeat: Duration,
    /// Where to listen for front-ends inside jobs on this node (`SLUICE_SOCKET` in their
    /// environment), relaying them to the controller over the link; `None` when they
    /// reach the controller's socket directly (the controller's own node).
    pub relay: Option<PathBuf>,
}

fn job_dir(spool: &Path, id: u32) -> PathBuf {
    spool.join(format!("job_{id}"))
}

/// Runs the agent over `link` until the link closes.
///
/// Errors: the handshake fails, or the spool directory cannot be created.
pub async fn run<S>(mut link: Framed<S>, cfg: AgentConfig) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    std::fs::create_dir_all(&cfg.spool_dir)
        .with_context(|| format!("cannot create spool directory {}", cfg.spool_dir.display()))?;
    {
        // Traversable, not listable: jobs reach their own files; nobody lists others'.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg.spool_dir, std::fs::Permissions::from_mode(0o711))
            .with_context(|| format!("cannot set the mode of {}", cfg.spool_dir.display()))?;
    }
    link.handshake(Role::Agent, &[Role::Controller]).await?;
    let res = discover::resources();
    let (gpus, notes) = gpu::detect();
    for n in notes {
        tracing::warn!("GPU discovery: {n}");
    }
    let known = known_jobs(&cfg.spool_dir);
    link.send(&FromAgent::Register {
        node: cfg.node.name.clone(),
        cpus: res.cpus,
        sockets: res.sockets,
        cores_per_socket: res.cores_per_socket,
        threads_per_core: res.threads_per_core,
        real_memory: res.memory_mb,
        boot_time: res.boot_time,
        os: res.os.clone(),
        arch: res.arch.clone(),
        running: known.clone(),
        gres: gpus.clone(),
        steps: steps::running(&cfg.spool_dir),
        reports_epilog: true,
    })
    .await?;
    let (etx, mut erx) = mpsc::unbounded_channel::<FromAgent>();
    for id in known {
        let dir = job_dir(&cfg.spool_dir, id);
        if never_started(&dir) {
            // The agent that wrote this launch record went away before its stepd was
            // started (a controller killed mid-launch): the job never ran; start it.
            tracing::warn!(
                job_id = id,
                "starting the stepd of a launch its agent left unstarted"
            );
            if let Err(e) = restart_stepd(&dir, &cfg) {
                tracing::error!(job_id = id, "{e:#}");
            }
        }
        tokio::spawn(watch_adopted(dir, id, etx.clone()));
    }
    let _ = etx.send(heartbeat());
    // GPUs in use outside sluice: the declared devices, else the detected ones.
    let cg_root = gpu_watch::CgroupRoot::default();
    let watched: Vec<_> = match cfg.node.gres_devices() {
        Ok(d) if !d.is_empty() => d,
        _ => gpus,
    }
    .into_iter()
    .filter(|d| d.name == "gpu")
    .collect();
    if !watched.is_empty()
        && let Some(probe) = crate::gpuprobe::probe()
    {
        gpu_watch::spawn(
            probe,
            watched,
            cfg.spool_dir.clone(),
            cg_root.clone(),
            etx.clone(),
        );
    }
    let mut beat = tokio::time::interval(cfg.heartbeat.max(Duration::from_millis(100)));
    beat.tick().await;
    let mut steps = steps::Steps::default();
    let mut relay = match &cfg.relay {
        Some(path) => Some(relay::Relay::bind(path)?),
        None => None,
    };
    let mut node_scripts = Scripts::new(&cfg.spool_dir);
    loop {
        tokio::select! {
            m = link.recv::<ToAgent>() => {
                let msg = match m {
                    Ok(m) => m,
                    Err(crate::proto::ProtoError::Closed) => return Ok(()),
                    Err(e) => return Err(e.into()),
                };
                if let ToAgent::Configure { cgroup, .. } = &msg
                    && let Ok(mut r) = cg_root.lock()
                {
                    *r = Some(cgroup.root.clone());
                }
                let msg = match relay.as_mut() {
                    Some(r) => match r.intercept(msg) {
                        Some(m) => m,
                        None => continue,
                    },
                    None => msg,
                };
                node_scripts.dispatch(msg, &cfg, &etx, &mut steps);
            }
            Some((job_id, r)) = node_scripts.done.1.recv() => {
                node_scripts.prolog_done(job_id, r, &cfg, &etx, &mut steps);
            }
            Some(conn) = relay::accept(relay.as_ref()) => {
                if let Some(r) = relay.as_mut() {
                    r.serve(conn, &etx);
                }
            }
            Some(ev) = erx.recv() => link.send(&ev).await?,
            _ = beat.tick() => {
                link.send(&heartbeat()).await?;
                for m in batch_usage(&cfg.spool_dir) {
                    link.send(&m).await?;
                }
            }
        }
    }
}

/// The agent's node scripts: settings from the controller, the prolog table, the
/// health-check task, and the channel prolog runs report on.
struct Scripts {
    conf: crate::config::scripts::NodeScripts,
    prologs: scripts::Prologs,
    health: Option<tokio::task::JoinHandle<()>>,
    done: (
        mpsc::UnboundedSender<PrologResult>,
        mpsc::UnboundedReceiver<PrologResult>,
    ),
}

/// A finished prolog run: the job, and how it went.
type PrologResult = (u32, Result<(), scripts::ScriptFailure>);

impl Drop for Scripts {
    fn drop(&mut self) {
        if let Some(h) = self.health.take() {
            h.abort();
        }
    }
}

impl Scripts {
    /// The node scripts of an agent whose spool is `spool` (it holds the prologs an
    /// earlier agent ran for jobs still here).
    fn new(spool: &Path) -> Scripts {
        Scripts {
            conf: Default::default(),
            prologs: scripts::Prologs::load(spool),
            health: None,
            done: mpsc::unbounded_channel(),
        }
    }

    /// Handles a message from the controller, running prologs and epilogs around the
    /// launches (see `scripts`).
    fn dispatch(
        &mut self,
        msg: ToAgent,
        cfg: &AgentConfig,
        etx: &mpsc::UnboundedSender<FromAgent>,
        steps: &mut steps::Steps,
    ) {
        let node = cfg.node.name.clone();
        match &msg {
            ToAgent::Configure { scripts: s, .. } => {
                self.conf = s.clone();
                if let Some(h) = self.health.take() {
                    h.abort();
                }
                if s.health_check_program.is_some() {
                    let tx = etx.clone();
                    let fut = scripts::health_loop(
                        s.clone(),
                        cfg.spool_dir.clone(),
                        node.clone(),
                        move |reason| {
                            let _ = tx.send(FromAgent::HealthCheckFailed { reason });
                        },
                    );
                    self.health = Some(tokio::spawn(fut));
                }
            }
            ToAgent::Epilog { job, cluster } => {
                self.prologs.forget(job.id);
                // Every epilog message is answered with EpilogComplete (at once when
                // there is no epilog), which ends the job's COMPLETING here.
                let (job_id, timeout, tx) = (job.id, self.conf.prolog_epilog_timeout, etx.clone());
                let Some(path) = self.conf.epilog.clone() else {
                    let _ = tx.send(FromAgent::EpilogComplete { job_id });
                    return;
                };
                let env = scripts::script_env(job, cluster, &node, "epilog_slurmd");
                tokio::spawn(async move {
                    if let Err(f) = scripts::run_script(&path, &env, timeout).await {
                        let message = f.to_string();
                        let _ = tx.send(FromAgent::EpilogFailed { job_id, message });
                    }
                    let _ = tx.send(FromAgent::EpilogComplete { job_id });
                });
                return;
            }
            ToAgent::Terminate { job_id, .. } => {
                for m in self.prologs.cancel_waiting(*job_id) {
                    refuse(m, "the job ended before its prolog finished", cfg, etx);
                }
            }
            _ => {}
        }
        match self.prologs.gate(msg, self.conf.prolog.is_some(), &node) {
            scripts::Gate::Pass(m) => handle(m, cfg, etx, steps),
            scripts::Gate::Wait(Some((job_id, env))) => {
                let Some(path) = self.conf.prolog.clone() else {
                    return;
                };
                let (timeout, tx) = (self.conf.prolog_epilog_timeout, self.done.0.clone());
                tokio::spawn(async move {
                    let r = scripts::run_script(&path, &env, timeout).await;
                    let _ = tx.send((job_id, r));
                });
            }
            scripts::Gate::Wait(None) => {}
            scripts::Gate::Refuse(m) => refuse(m, "the job's prolog failed on this node", cfg, etx),
        }
    }

    /// A job's prolog finished: its waiting launches go ahead, or are refused after the
    /// controller has heard of the failure.
    fn prolog_done(
        &mut self,
        job_id: u32,
        r: Result<(), scripts::ScriptFailure>,
        cfg: &AgentConfig,
        etx: &mpsc::UnboundedSender<FromAgent>,
        steps: &mut steps::Steps,
    ) {
        if let Err(f) = &r {
            tracing::error!(job_id, "prolog failed: {f}");
            let message = f.to_string();
            let _ = etx.send(FromAgent::PrologFailed { job_id, message });
        }
        for m in self.prologs.finished(job_id, r.is_ok()) {
            if r.is_ok() {
                handle(m, cfg, etx, steps);
            } else {
                refuse(m, "the job's prolog failed on this node", cfg, etx);
            }
        }
    }
}

/// Answers a launch that will not happen here (`why` says why).
fn refuse(msg: ToAgent, why: &str, cfg: &AgentConfig, etx: &mpsc::UnboundedSender<FromAgent>) {
    match msg {
        ToAgent::Launch(lb) => {
            let _ = etx.send(ended_failed(
                lb.job.id,
                format!("{why} ({})", cfg.node.name),
            ));
        }
        ToAgent::LaunchStep(ls) => steps::refuse(&ls, &cfg.node.name, why, etx),
        _ => {}
    }
}

fn heartbeat() -> FromAgent {
    let (load, free_mem) = discover::load_and_free_mem();
    FromAgent::Heartbeat { load, free_mem }
}

/// Which isolation backend this node's stepds will find with `cgroup` settings, and
/// why it is degraded when it is the process-group fallback (probing creates the
/// agent's user's cgroup directory under sluice's root, as a stepd would).
fn isolation_report(cgroup: &crate::config::CgroupConf) -> FromAgent {
    use crate::stepd::isolate::{Backend, Scope, detect};
    let uid = nix::unistd::geteuid().as_raw();
    let m = detect(cgroup, Scope::batch(&cgroup.root, uid, 0));
    let degraded = (m.backend() == Backend::None)
        .then(|| m.degraded().into_iter().next())
        .flatten();
    FromAgent::Isolation {
        backend: m.backend().to_string(),
        degraded,
    }
}

/// The latest usage sample of each batch step still running here (its stepd has
/// written `usage` but no `result` yet).
fn batch_usage(spool: &Path) -> Vec<FromAgent> {
    known_jobs(spool)
        .into_iter()
        .filter_map(|job_id| {
            let dir = job_dir(spool, job_id);
            if dir.join(spool::RESULT).exists() {
                return None;
            }
            let usage = spool::read(&dir, spool::USAGE).ok().flatten()?;
            Some(FromAgent::BatchUsage { job_id, usage })
        })
        .collect()
}

/// Job ids with a spool directory (running, or finished and not yet forgotten).
fn known_jobs(spool: &Path) -> Vec<u32> {
    let mut ids: Vec<u32> = std::fs::read_dir(spool)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("job_")?.parse().ok())
        .filter(|id| job_dir(spool, *id).join(spool::LAUNCH).exists())
        .collect();
    ids.sort_unstable();
    ids
}

fn handle(
    msg: ToAgent,
    cfg: &AgentConfig,
    etx: &mpsc::UnboundedSender<FromAgent>,
    steps: &mut steps::Steps,
) {
    match msg {
        ToAgent::Configure { cgroup, .. } => {
            let _ = etx.send(isolation_report(&cgroup));
        }
        ToAgent::LaunchStep(mut ls) => {
            if let Some(path) = &cfg.relay {
                let env = &mut ls.spec.environment;
                env.insert(relay::SOCKET_VAR.into(), path.display().to_string());
            }
            steps.launch(*ls, cfg, etx)
        }
        // Without a relay socket there are no relayed connections to serve.
        ToAgent::Relay { .. } | ToAgent::RelayClose { .. } => {}
        // Handled by `Scripts::dispatch` before they come here.
        ToAgent::Prolog { .. } | ToAgent::Epilog { .. } => {}
        ToAgent::StepInput {
            job_id,
            step_id,
            input,
        } => steps.input(job_id, step_id, input),
        ToAgent::AdoptStep {
            job_id,
            step_id,
            from,
        } => steps.adopt(job_id, step_id, from, cfg, etx),
        ToAgent::EndStep {
            job_id,
            step_id,
            kill_wait,
        } => steps.end_step(job_id, step_id, kill_wait, cfg),
        ToAgent::Launch(mut lb) => {
            if let Some(path) = &cfg.relay {
                let env = &mut lb.job.spec.environment;
                env.insert(relay::SOCKET_VAR.into(), path.display().to_string());
            }
            let id = lb.job.id;
            if let Err(e) = launch(lb, cfg, etx.clone()) {
                tracing::error!(job_id = id, "launch failed: {e:#}");
                let _ = etx.send(ended_failed(id, format!("launch failed on node: {e:#}")));
            }
        }
        ToAgent::Signal {
            job_id,
            signal,
            batch_only,
        } => {
            if !batch_only {
                steps.signal_job(job_id, signal);
            }
            signal_job(job_dir(&cfg.spool_dir, job_id), signal, batch_only);
        }
        ToAgent::Terminate {
            job_id,
            kill_wait,
            reason,
        } => {
            steps.terminate_job(job_id, kill_wait);
            let dir = job_dir(&cfg.spool_dir, job_id);
            if !dir.exists() {
                return;
            }
            let req = TerminateRequest {
                kill_wait,
                message: reason,
            };
            if let Err(e) = spool::write(&dir, spool::TERMINATE, &req) {
                tracing::warn!(job_id, "cannot write terminate request: {e}");
            }
            // A stepd that already wrote its result is gone (its pid may be reused).
            if !dir.join(spool::RESULT).exists()
                && let Some(pid) = spool::read_pid(&dir, spool::STEPD_PID)
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        ToAgent::Suspend { job_id, suspend } => {
            steps.suspend_job(job_id, suspend);
            let dir = job_dir(&cfg.spool_dir, job_id);
            if !dir.join(spool::LAUNCH).exists() || dir.join(spool::RESULT).exists() {
                return;
            }
            if let Err(e) = spool::write(&dir, spool::SUSPEND, &suspend) {
                tracing::warn!(job_id, "cannot write suspend request: {e}");
                return;
            }
            if let Some(pid) = spool::read_pid(&dir, spool::STEPD_PID) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGUSR2);
            }
        }
        ToAgent::Reboot { program } => run_reboot_program(&program, &cfg.node.name),
        ToAgent::Forget { job_id } => {
            let dir = job_dir(&cfg.spool_dir, job_id);
            let stepd_alive = spool::read_pid(&dir, spool::STEPD_PID)
                .is_some_and(|pid| kill(Pid::from_raw(pid), None).is_ok());
            if dir.join(spool::RESULT).exists() || !stepd_alive {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

/// Starts RebootProgram through `sh -c` with the node's name in `SLURMD_NODENAME`, as
/// slurmd runs it for `scontrol reboot`; it is not waited for (a real reboot ends this
/// agent with it). A program that cannot start is logged; the controller's
/// ResumeTimeout then sets the node DOWN.
fn run_reboot_program(program: &str, node: &str) {
    tracing::info!(node, program, "running RebootProgram");
    let spawned = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(program)
        .env("SLURMD_NODENAME", node)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background so that it leaves no zombie.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => tracing::error!(node, program, "cannot run RebootProgram: {e}"),
    }
}

/// Sends `signal` to a job's batch shell (`batch_only`) or its whole process group.
///
/// stepd records the shell's pid just after starting it; a signal sent in that instant
/// (the job may already have printed output) waits for the record briefly instead of
/// being lost. Must run inside a tokio runtime.
fn signal_job(dir: PathBuf, signal: i32, batch_only: bool) {
    let Ok(sig) = Signal::try_from(signal) else {
        return;
    };
    // The batch shell leads its own process group.
    let send = move |pid: i32| {
        let target = if batch_only { pid } else { -pid };
        let _ = kill(Pid::from_raw(target), sig);
    };
    match spool::read_pid(&dir, spool::JOB_PID) {
        Some(pid) => send(pid),
        None if dir.join(spool::LAUNCH).exists() => {
            tokio::spawn(async move {
                for _ in 0..100 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if let Some(pid) = spool::read_pid(&dir, spool::JOB_PID) {
                        send(pid);
                        return;
                    }
                    if dir.join(spool::RESULT).exists() {
                        return;
                    }
                }
            });
        }
        None => {}
    }
}

fn ended_failed(job_id: u32, message: String) -> FromAgent {
    FromAgent::Ended {
        job_id,
        kind: EndKind::LaunchFailed,
        status: Default::default(),
        time: chrono::Utc::now().timestamp(),
        max_rss_kib: 0,
        cpu_secs: 0.0,
        oom: false,
        message: Some(message),
        usage: None,
    }
}

fn result_msg(job_id: u32, r: StepResult) -> FromAgent {
    FromAgent::Ended {
        job_id,
        kind: r.kind,
        status: r.status,
        time: r.time,
        max_rss_kib: r.max_rss_kib,
        cpu_secs: r.cpu_secs,
        oom: r.oom,
        message: r.message,
        usage: r.usage,
    }
}

/// Writes the launch record and starts a detached stepd for the job.
fn launch(
    lb: LaunchBatch,
    cfg: &AgentConfig,
    etx: mpsc::UnboundedSender<FromAgent>,
) -> anyhow::Result<()> {
    let id = lb.job.id;
    let dir = job_dir(&cfg.spool_dir, id);
    if dir.exists() {
        // A requeued job reuses its id: start from a clean directory.
        std::fs::remove_dir_all(&dir).ok();
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    spool::write(&dir, spool::LAUNCH, &lb)?;
    crate::failpoint::hit("launch-unstarted");
    let log = std::fs::File::create(dir.join("stepd.log"))?;
    let mut child = tokio::process::Command::new(&cfg.exe)
        .arg("stepd")
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run {} stepd", cfg.exe.display()))?;
    // Recorded here too (stepd writes the same pid when it starts), so that an agent
    // restarted right after this launch finds the stepd to adopt.
    if let Some(pid) = child.id() {
        let _ = spool::write_pid(&dir, spool::STEPD_PID, pid);
    }
    tokio::spawn(async move {
        let _ = child.wait().await;
        let _ = etx.send(collect(&dir, id));
    });
    Ok(())
}

/// Whether the job of spool directory `dir` has a launch record but no stepd ever ran
/// for it (no pid recorded, no result).
fn never_started(dir: &Path) -> bool {
    dir.join(spool::LAUNCH).exists()
        && !dir.join(spool::RESULT).exists()
        && !dir.join(spool::STEPD_PID).exists()
}

/// Starts a stepd for a launch record found unstarted at adoption. The record's time is
/// renewed first, so that [`watch_adopted`] waits for the new stepd to record its pid;
/// the stepd takes the job's lock, so a first one that was merely slow keeps the job.
///
/// Errors: the stepd cannot be started.
fn restart_stepd(dir: &Path, cfg: &AgentConfig) -> anyhow::Result<()> {
    if let Ok(f) = std::fs::File::options()
        .append(true)
        .open(dir.join(spool::LAUNCH))
    {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stepd.log"))?;
    let mut child = tokio::process::Command::new(&cfg.exe)
        .arg("stepd")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run {} stepd", cfg.exe.display()))?;
    // Reaped here; its end is seen by `watch_adopted` through the spool.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

/// The Ended message for a job whose stepd has exited.
fn collect(dir: &Path, id: u32) -> FromAgent {
    match spool::read::<StepResult>(dir, spool::RESULT) {
        Ok(Some(r)) => result_msg(id, r),
        Ok(None) => {
            let log = std::fs::read_to_string(dir.join("stepd.log")).unwrap_or_default();
            match spool::read_pid(dir, spool::JOB_PID) {
                // The job had started: nobody supervises it any more, so end it rather
                // than leave untracked processes holding resources the controller frees.
                Some(pid) => {
                    let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
                    let time = chrono::Utc::now().timestamp();
                    let launch = spool::read_launch(dir).ok().flatten();
                    let node = launch
                        .as_ref()
                        .and_then(|lb| lb.job.alloc.as_ref())
                        .and_then(|a| a.nodes.first().cloned())
                        .unwrap_or_default();
                    if let Some(lb) = &launch {
                        crate::stepd::note_stepd_lost(
                            lb,
                            &format!(
                                "*** JOB {id} ON {node} FAILED AT {} DUE TO THE DEATH OF ITS STEPD ***",
                                crate::common::timefmt::fmt_ts(time)
                            ),
                        );
                    }
                    tracing::error!(
                        job_id = id,
                        node,
                        "stepd of job {id} died; the job's processes were killed"
                    );
                    FromAgent::Ended {
                        job_id: id,
                        kind: EndKind::StepdLost,
                        status: crate::model::ExitStatus { code: 0, signal: 9 },
                        time,
                        max_rss_kib: 0,
                        cpu_secs: 0.0,
                        oom: false,
                        message: Some(format!(
                            "stepd of job {id} on {node} died; its processes were killed. {}",
                            log.trim()
                        )),
                        usage: spool::read(dir, spool::USAGE).ok().flatten(),
                    }
                }
                None => ended_failed(id, format!("stepd exited without a result: {}", log.trim())),
            }
        }
        Err(e) => ended_failed(id, format!("unreadable step result: {e}")),
    }
}

/// Whether the job's launch record is less than 30 s old (its stepd may be starting).
fn recently_launched(dir: &Path) -> bool {
    std::fs::metadata(dir.join(spool::LAUNCH))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(30))
}

/// Watches a job whose stepd was started by an earlier agent: reports its result once it
/// appears, or a failure if stepd died without one.
async fn watch_adopted(dir: PathBuf, id: u32, etx: mpsc::UnboundedSender<FromAgent>) {
    loop {
        if dir.join(spool::RESULT).exists() {
            let _ = etx.send(collect(&dir, id));
            return;
        }
        let alive = match spool::read_pid(&dir, spool::STEPD_PID) {
            Some(pid) => kill(Pid::from_raw(pid), None).is_ok(),
            // Launched but no pid recorded yet: a stepd may still be starting.
            None => recently_launched(&dir),
        };
        if !alive {
            // Re-check: stepd may have written its result just before exiting.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = etx.send(collect(&dir, id));
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_waits_briefly_for_the_shell_pid() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let spool = tempfile::tempdir().unwrap();
        let dir = job_dir(spool.path(), 7);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(spool::LAUNCH), b"launch").unwrap();
        let mut shell = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        // The signal arrives before stepd has recorded the pid...
        signal_job(dir.clone(), Signal::SIGTERM as i32, false);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // ...which comes a moment later.
        spool::write_pid(&dir, spool::JOB_PID, shell.id()).unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(st) = shell.try_wait().unwrap() {
                break st;
            }
            assert!(std::time::Instant::now() < end, "the signal was lost");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    }
}
