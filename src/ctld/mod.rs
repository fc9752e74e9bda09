//! The controller (cf. slurmctld + slurmdbd): owns all cluster state, schedules, persists
//! to SQLite, serves front-ends on a Unix socket and drives node agents.
//!
//! Runtime shape (STYLE.md): a listener task, one task per front-end connection, one task
//! per agent link (remote nodes' links reconnect through SSH, see [`agents`]), the actor (sole owner of [`state::Cluster`]) and the store thread.
//! Messages reach the actor on one channel; the actor applies reactor functions and
//! carries out their [`state::Effects`]. Scheduling runs after each burst of messages
//! that asked for it, and on a one-second tick (time limits, MinJobAge purge).

pub mod acct;
pub mod agents;
pub mod array;
pub mod conns;
pub mod depend;
pub mod downtime;
pub mod gres_detect;
pub mod het;
pub mod names;
mod relay;
pub mod resv;
pub mod state;
pub mod steps;
pub mod store;
#[cfg(test)]
mod testutil;

use crate::config::{Config, Mode};
use crate::model::Job;
use crate::model::step::StepSpec;
use crate::proto::{
    Framed, FromAgent, Request, Response, Role, SlurmError, StepEvent, StepInput, ToAgent,
};
use crate::transport::{self, PeerCred};
use anyhow::Context;
use state::{Caller, Cluster, Effects};
use std::collections::HashMap;
use std::ffi::OsString;
use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use store::StoreOp;
use tokio::sync::{mpsc, oneshot};

/// Messages to the actor.
enum Msg {
    Client {
        cred: PeerCred,
        /// The caller's user name as the OS gave it for this request (`None`: the uid
        /// has no name), looked up at the edge ([`caller_name`]).
        user: Option<String>,
        req: Request,
        reply: oneshot::Sender<Response>,
    },
    AgentUp {
        node: String,
        reg: FromAgent,
        tx: mpsc::UnboundedSender<ToAgent>,
    },
    Agent {
        node: String,
        msg: FromAgent,
    },
    AgentDown {
        node: String,
    },
    /// A connection asked for a step and became its stream; `relayed` when it came
    /// through a node agent (see [`ClientLog`]).
    StepLaunch {
        cred: PeerCred,
        job_id: u32,
        /// The step's parts (one unless it spans a heterogeneous job's components).
        specs: Vec<StepSpec>,
        token: u64,
        tx: mpsc::UnboundedSender<StepEvent>,
        relayed: bool,
    },
    /// A connection takes back the broken relayed stream of a step; `reply` gets the
    /// stream's token (`None`: there is none to take).
    StepAttach {
        cred: PeerCred,
        job_id: u32,
        step_id: u32,
        received: u64,
        tx: mpsc::UnboundedSender<StepEvent>,
        reply: oneshot::Sender<Option<u64>>,
    },
    StepInput {
        token: u64,
        input: StepInput,
    },
    StepClosed {
        token: u64,
    },
    /// A connection that owned allocation-only jobs closed without releasing them.
    OwnerGone {
        cred: PeerCred,
        jobs: Vec<u32>,
    },
    /// A remote node's link could not be brought up; `reason` says why.
    LinkFailed {
        node: String,
        reason: String,
    },
}

/// Most bytes of step events kept for one relayed srun that has not confirmed them.
const CLIENT_LOG_CAP: usize = 8 << 20;
/// How long a broken relayed step stream waits for its srun to come back before the
/// step is ended as if srun had gone (seconds).
const CLIENT_GRACE: i64 = 120;

/// The events sent on a relayed step stream (an srun on a remote node, whose
/// connection runs through that node's agent and its SSH link) that its srun has not
/// confirmed (`StepInput::Received`). When the relay breaks, the step is not ended:
/// for [`CLIENT_GRACE`] seconds srun may reconnect (`Request::StepAttach`) and get
/// the events it missed, in order, once.
#[derive(Debug)]
struct ClientLog {
    uid: u32,
    /// From the stream's `Launched` event.
    step: Option<(u32, u32)>,
    /// Events numbered `start`, `start + 1`, … (counting from the stream's first).
    events: std::collections::VecDeque<StepEvent>,
    start: u64,
    bytes: usize,
    /// The stream ended (`Done` or `Error` was sent).
    ended: bool,
    /// When the connection closed (the relay broke, or srun went away).
    away_since: Option<i64>,
}

impl ClientLog {
    fn event_bytes(ev: &StepEvent) -> usize {
        match ev {
            StepEvent::Output { data, .. } => data.len() + 16,
            _ => 64,
        }
    }

    fn record(&mut self, ev: &StepEvent) {
        if let StepEvent::Launched {
            job_id, step_id, ..
        } = ev
        {
            self.step = Some((*job_id, *step_id));
        }
        self.ended |= matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
        self.bytes += Self::event_bytes(ev);
        self.events.push_back(ev.clone());
        while self.bytes > CLIENT_LOG_CAP && self.events.len() > 1 {
            self.confirm(self.start + 1);
        }
    }

    /// srun has the first `n` events.
    fn confirm(&mut self, n: u64) {
        while self.start < n {
            let Some(ev) = self.events.pop_front() else {
                break;
            };
            self.bytes -= Self::event_bytes(&ev);
            self.start += 1;
        }
    }
}

/// Tokens naming step streams (one per StepLaunch connection).
static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// `sluice controller [--foreground] [--stop] [--detached]`.
///
/// Without `--foreground` the controller starts in the background and this returns once
/// it answers. `--stop` asks a running controller to shut down and waits for it.
pub fn cli_main(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut foreground = false;
    let mut stop = false;
    let mut detached = false;
    for a in &args {
        match a.as_str() {
            "--foreground" | "-D" => foreground = true,
            "--stop" => stop = true,
            "--detached" => detached = true,
            "-h" | "--help" => {
                println!(
                    "usage: sluice controller [--foreground] [--stop]\n\n\
                     Starts the controller (in the background unless --foreground), or stops it.\n\
                     Configuration: $SLUICE_CONF, else /etc/sluice/sluice.toml, else personal mode."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("sluice controller: unknown option '{other}'");
                return ExitCode::from(2);
            }
        }
    }
    let cfg = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
    };
    if stop {
        return stop_controller(&cfg);
    }
    if !foreground && !detached {
        return start_background(&cfg);
    }
    if detached {
        // Leave the caller's session so that its terminal and signals are not ours.
        let _ = nix::unistd::setsid();
        // Nor its working directory, which would stay busy (unmountable) for as long
        // as the controller runs; every path it uses is absolute by now.
        let _ = std::env::set_current_dir("/");
        close_inherited_fds();
    }
    // Job scripts, environments and the database are private to the controller.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    init_tracing();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice controller: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let res = rt.block_on(async {
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("signal handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        };
        // The actor runs as a task on a worker, not on this thread: a request's task
        // wakes it on the same worker (tokio's LIFO slot) instead of across threads.
        match tokio::spawn(run(cfg, shutdown)).await {
            Ok(r) => r,
            Err(e) => Err(anyhow::anyhow!("controller task failed: {e}")),
        }
    });
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice controller: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Closes every descriptor above stderr that the detached controller inherited from
/// whoever started it (a shell's `7>&1` pipe would otherwise stay open, and its reader
/// wait, for as long as the controller runs), as Slurm's daemons do when they detach.
fn close_inherited_fds() {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    // The listing's own descriptor is closed by now; closing it again fails harmlessly.
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    crate::logsink::init_reloadable(filter, std::io::IsTerminal::is_terminal(&std::io::stderr()));
}

fn start_background(cfg: &Config) -> ExitCode {
    match crate::cli::client::Client::start_controller(cfg) {
        Ok(_) => {
            eprintln!(
                "sluice controller: running (socket {})",
                cfg.socket.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The hint names the cause; "Unable to contact slurm controller" before it
            // would only mislead.
            match e.hint() {
                Some(h) => eprintln!("{h}"),
                None => eprintln!("sluice controller: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

/// Stops a controller whose socket does not answer, from the pid it recorded, if that
/// process is still a sluice controller holding the state directory.
///
/// The pid file is believed only while the state directory's lock is held: a stale
/// file (the controller is gone, its pid reused, perhaps by another user's or another
/// state directory's controller) never leads to a signal.
fn stop_by_pid(cfg: &Config) -> ExitCode {
    let lock_held =
        std::fs::File::open(cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK))
            .is_ok_and(|f| {
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
            });
    let pid = std::fs::read_to_string(cfg.state_dir.join(PID_FILE))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let alive_controller = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("sluice") && c.contains("controller")
            })
            .unwrap_or(false)
    };
    match pid {
        Some(pid) if lock_held && alive_controller(pid) => {
            eprintln!(
                "sluice controller: no answer on {}; stopping pid {pid} by signal",
                cfg.socket.display()
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            for _ in 0..200 {
                if !alive_controller(pid) {
                    return ExitCode::SUCCESS;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            eprintln!("sluice controller: pid {pid} still running after 5 s");
            ExitCode::from(1)
        }
        _ => {
            eprintln!(
                "sluice controller: not running (no answer on {})",
                cfg.socket.display()
            );
            ExitCode::SUCCESS
        }
    }
}

fn stop_controller(cfg: &Config) -> ExitCode {
    let sock = std::os::unix::net::UnixStream::connect(&cfg.socket);
    if sock.is_err() {
        return stop_by_pid(cfg);
    }
    let mut c = match crate::cli::client::Client::connect_with(cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
    };
    match c.request(&Request::Shutdown) {
        Ok(Response::Ok) => {}
        Ok(Response::Error(e)) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
        Ok(_) | Err(_) => {}
    }
    // Wait until the controller has exited, i.e. released its lock on the state
    // directory (the socket goes away earlier, while the store still commits), so that
    // a controller started right after this returns does not find the lock taken.
    let lock = cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK);
    for _ in 0..400 {
        let released = match std::fs::File::open(&lock) {
            Ok(f) => {
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
            }
            Err(_) => true,
        };
        if released {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    eprintln!("sluice controller: still running after 10 s");
    ExitCode::from(1)
}

/// Holds an exclusive lock on the state directory for the controller's lifetime, so two
/// controllers never share one database.
fn lock_state_dir(cfg: &Config) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("cannot create state directory {}", cfg.state_dir.display()))?;
    lock_file(
        &cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK),
        |e| {
            format!(
                "{} {} ({e})",
                crate::cli::client::LOCK_HELD,
                cfg.state_dir.display()
            )
        },
    )
}

/// Takes an exclusive, non-blocking `flock` on `path` (created if missing), held until
/// the returned guard drops. Errors: the file cannot be opened, or the lock is held
/// (then the message is `held(errno)`).
fn lock_file(
    path: &std::path::Path,
    held: impl FnOnce(nix::errno::Errno) -> String,
) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| anyhow::anyhow!(held(e)))
}

/// Holds an exclusive lock on the spool directory for the controller's lifetime: its
/// local agent re-adopts (or ends) every job found there, so a second controller
/// configured with the same `spool_dir` and another `state_dir` would end the first
/// one's running jobs. Errors: the lock is held (another controller's spool).
fn lock_spool_dir(cfg: &Config) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    lock_file(&cfg.spool_dir.join("spool.lock"), |e| {
        format!(
            "the spool directory {} is in use by another controller ({e}); give each \
             controller its own spool_dir",
            cfg.spool_dir.display()
        )
    })
}

/// Sets the state and spool directories' modes and records the controller's pid.
/// The state directory is private (0700) in personal mode; in system mode it and the
/// spool are traversable but not listable (0711) so that jobs can reach their own files,
/// while every file in them is created private (umask 077).
fn prepare_dirs(cfg: &Config) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let shared = cfg.mode == Mode::System;
    let mode = if shared { 0o711 } else { 0o700 };
    std::fs::set_permissions(&cfg.state_dir, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", cfg.state_dir.display()))?;
    std::fs::create_dir_all(&cfg.spool_dir)
        .with_context(|| format!("cannot create {}", cfg.spool_dir.display()))?;
    std::fs::set_permissions(&cfg.spool_dir, std::fs::Permissions::from_mode(0o711))
        .with_context(|| format!("cannot set the mode of {}", cfg.spool_dir.display()))?;
    std::fs::write(
        cfg.state_dir.join(PID_FILE),
        format!("{}\n", std::process::id()),
    )
    .context("cannot write the controller's pid file")?;
    Ok(())
}

/// Seconds between fair-share usage accounting ticks (Slurm's PriorityCalcPeriod,
/// whose default is 5 minutes; shorter here so that `sshare` follows running jobs).
const PRIORITY_CALC_PERIOD: i64 = 60;

/// The controller's pid, in the state directory (used by `--stop` when the socket is gone).
const PID_FILE: &str = "controller.pid";

/// Runs the controller until `shutdown` resolves or a client asks it to stop.
///
/// Errors: the state directory is locked by another controller, the database is foreign
/// or corrupt, the socket cannot be bound.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let _lock = lock_state_dir(&cfg)?;
    prepare_dirs(&cfg)?;
    let _spool_lock = lock_spool_dir(&cfg)?;
    let db_path = cfg.state_dir.join("sluice.db");
    let mut store = store::Store::open(&db_path)?;
    let now = crate::common::timefmt::now();
    let (jobs, next_id) = store.load(now, i64::from(cfg.min_job_age))?;
    let owner = nix::unistd::geteuid().as_raw();
    let mut cluster = Cluster::new(&cfg, owner);
    cluster.restore(jobs, next_id);
    cluster.assoc = store.load_assoc()?;
    let (notes, merged) = cluster.merge_config_accounts();
    for n in notes {
        tracing::warn!("{n}");
    }
    if merged {
        store.put_assoc(&cluster.assoc)?;
    }
    cluster.resv.restore(store.load_resvs()?);
    cluster.restore_usage(store.load_fs_usage()?, now);
    // Usage a controller from before the single ledger kept apart joins the ledger.
    if let Some((old, at)) = store.load_legacy_usage()? {
        cluster.fold_legacy_usage(&old, at);
        store.put_fs_usage(&cluster.ledger)?;
        store.drop_legacy_usage()?;
    }
    tracing::info!(
        jobs = cluster.jobs.len(),
        next_id = cluster.next_id,
        db = %db_path.display(),
        "controller starting"
    );

    let (store_tx, store_rx) = mpsc::unbounded_channel::<Vec<StoreOp>>();
    let store_thread = std::thread::Builder::new()
        .name("store".into())
        .spawn(move || store::run(store, store_rx))
        .context("cannot start store thread")?;

    let (tx, rx) = mpsc::channel::<Msg>(4096);
    let limits = Arc::new(conns::ConnLimits::standard(connection_cap(), owner));
    let exe = std::env::current_exe().context("cannot find own executable")?;
    let heartbeat = agents::heartbeat_secs(cfg.slurmd_timeout);
    // The local node's agent runs in-process over an in-memory pipe speaking the same
    // protocol as a remote one.
    if let Some(local) = cfg.local_node() {
        let host = crate::config::short_hostname();
        if local.name != host {
            tracing::warn!(
                node = %local.name,
                host = %host,
                "no node is named after this host; running the local agent as the first local node"
            );
        }
        let (ctld_end, agent_end) = tokio::io::duplex(1 << 20);
        let agent_cfg = crate::agent::AgentConfig {
            node: local.clone(),
            spool_dir: cfg.spool_dir.clone(),
            exe: exe.clone(),
            heartbeat: Duration::from_secs(heartbeat.into()),
            // Jobs here reach the controller's own socket.
            relay: None,
        };
        tokio::spawn(async move {
            if let Err(e) = crate::agent::run(Framed::new(agent_end), agent_cfg).await {
                tracing::error!("local agent stopped: {e:#}");
            }
        });
        let ltx = tx.clone();
        let llimits = limits.clone();
        tokio::spawn(async move {
            if let Err(e) = agent_link(Framed::new(ctld_end), ltx, None, llimits).await {
                tracing::error!("local agent link: {e:#}");
            }
        });
    }
    // Each remote node's agent is started and kept linked through SSH.
    let mut remote = std::collections::HashSet::new();
    for n in cfg.nodes.iter().filter(|n| n.is_remote()) {
        let spec = crate::transport::ssh::LinkSpec::from_conf(n, heartbeat, exe.clone())
            .map_err(anyhow::Error::msg)?;
        if let Some(node) = cluster.nodes.iter_mut().find(|x| x.name == n.name) {
            node.addr = spec.addr.host.clone();
        }
        remote.insert(n.name.clone());
        tokio::spawn(agents::remote_link(
            spec,
            tx.clone(),
            Duration::from_secs(cfg.reconnect_max.into()),
            limits.clone(),
        ));
    }

    let listener = transport::bind_unix(&cfg.socket, cfg.mode == Mode::System)
        .with_context(|| format!("cannot listen on {}", cfg.socket.display()))?;
    if cfg.mode == Mode::Personal {
        // Commands from another environment (no XDG_RUNTIME_DIR) find it from here.
        crate::config::personal::record_socket(&cfg.state_dir, &cfg.socket)
            .context("cannot record the controller's socket in its state directory")?;
    }
    let (stop_tx, mut stop_rx) = mpsc::channel::<()>(1);
    spawn_accept(listener, tx.clone(), limits.clone());
    // Kept to re-create the socket if something deletes it (a tmp cleaner, a logout).
    let rebind_tx = tx.clone();
    let rebind_limits = limits.clone();
    drop(tx);

    let declared: HashMap<String, crate::config::NodeConf> = cfg
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.clone()))
        .collect();
    let health = agents::Health::new(&cluster.nodes, cfg.slurmd_timeout, owner, now);
    let mut actor = Actor {
        cluster,
        store: store::Outbox::new(store_tx),
        agents: HashMap::new(),
        declared,
        stop: stop_tx,
        streams: HashMap::new(),
        alloc_replies: Vec::new(),
        waiters: Vec::new(),
        deferred: Vec::new(),
        health,
        remote,
        downlog: Default::default(),
        client_logs: HashMap::new(),
        submissions: HashMap::new(),
    };
    actor.remember_submissions();
    let mut rx = rx;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    // Event-triggered passes are spaced by ten times the last pass's cost (at most a
    // second; none below 5 ms): a long queue under a stream of submissions is scheduled every so often
    // instead of once per submission (Slurm's batch_sched_delay serves the same end);
    // a short queue is scheduled at once.
    let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
    let mut sched_due: Option<tokio::time::Instant> = None;
    let mut last_cost = Duration::ZERO;
    let mut last_end = tokio::time::Instant::now();
    loop {
        let mut fx = Effects::default();
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep_until(sched_due.unwrap_or(far)), if sched_due.is_some() => {}
            _ = stop_rx.recv() => break,
            _ = tick.tick() => {
                if !cfg.socket.exists() {
                    match transport::bind_unix(&cfg.socket, cfg.mode == Mode::System) {
                        Ok(l) => {
                            tracing::warn!(socket = %cfg.socket.display(), "socket was removed; listening again");
                            spawn_accept(l, rebind_tx.clone(), rebind_limits.clone());
                        }
                        Err(e) => tracing::error!(socket = %cfg.socket.display(), "socket was removed and cannot be re-created: {e}"),
                    }
                }
                let now = crate::common::timefmt::now();
                actor.check_health(now, &mut fx);
                actor.expire_client_logs(now, &mut fx);
                actor.cluster.tick(now, &mut fx);
                actor.cluster.resv_tick(now, &mut fx);
                actor.downlog.observe(&actor.cluster.nodes, now);
                for (node, start, end) in actor.downlog.take_closed() {
                    actor.store.send(StoreOp::NodeDown(node, start, end));
                }
                if now - actor.cluster.ledger.accrued_at >= PRIORITY_CALC_PERIOD {
                    actor.cluster.accrue_usage(now, &mut fx);
                }
            }
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                actor.handle(msg, &mut fx);
                // Coalesce a burst of messages into one scheduling pass.
                while let Ok(msg) = rx.try_recv() {
                    actor.handle(msg, &mut fx);
                    if fx.persist.len() > 512 {
                        break;
                    }
                }
            }
        }
        // What this burst's requests wrote (and the replies waiting on it) goes to the
        // store now, so that its commit overlaps the scheduling pass below.
        actor.store.flush();
        if fx.schedule {
            fx.schedule = false;
            // Cheap passes (a short queue) run at once, so a submission's reply is
            // followed by its job's first evaluation.
            let gap = if last_cost < Duration::from_millis(5) {
                Duration::ZERO
            } else {
                (last_cost * 10).min(Duration::from_secs(1))
            };
            let at = last_end + gap;
            sched_due = Some(sched_due.map_or(at, |d| d.min(at)));
        }
        if sched_due.is_some_and(|d| tokio::time::Instant::now() >= d) {
            sched_due = None;
            // Replies sent above woke their connections' tasks into this worker's
            // next-task slot, which no other worker takes: they go out before the pass.
            tokio::task::yield_now().await;
            let t0 = tokio::time::Instant::now();
            actor
                .cluster
                .schedule(crate::common::timefmt::now(), &mut fx);
            last_end = tokio::time::Instant::now();
            last_cost = last_end - t0;
        }
        actor.resolve_waiters();
        actor.apply(fx);
        if actor.store.is_closed() {
            tracing::error!("the state database is gone; stopping");
            break;
        }
    }
    tracing::info!("controller stopping");
    let _ = std::fs::remove_file(&cfg.socket);
    drop(actor);
    match tokio::task::spawn_blocking(move || store_thread.join()).await {
        Ok(Ok(Err(e))) => return Err(e.into()),
        Ok(Err(_)) => anyhow::bail!("store thread panicked"),
        _ => {}
    }
    Ok(())
}

/// One page of a paged `Request::Jobs` (`filter.page > 0`): the first `filter.page`
/// matching jobs with ids above `filter.after`, in id order, as the query sees them
/// (`Job::for_query`), and whether more may follow.
fn jobs_page(
    jobs: &std::collections::BTreeMap<u32, Box<Job>>,
    filter: &crate::proto::JobFilter,
    now: i64,
) -> Response {
    let page = filter.page as usize;
    let mut out: Vec<Job> = match filter.after.checked_add(1) {
        Some(from) => jobs
            .range(from..)
            .map(|(_, j)| j)
            .filter(|j| filter.matches(j))
            .take(page + 1)
            .map(|j| j.for_query())
            .collect(),
        None => Vec::new(),
    };
    let more = out.len() > page;
    out.truncate(page);
    Response::JobsPage {
        jobs: out,
        now,
        more,
    }
}

struct Actor {
    cluster: Cluster,
    /// Store ops of this iteration, sent to the store thread in one batch.
    store: store::Outbox,
    agents: HashMap<String, mpsc::UnboundedSender<ToAgent>>,
    declared: HashMap<String, crate::config::NodeConf>,
    stop: mpsc::Sender<()>,
    /// srun step streams by token.
    streams: HashMap<u64, mpsc::UnboundedSender<StepEvent>>,
    /// Allocate requests answered after this iteration's scheduling pass.
    alloc_replies: Vec<(u32, oneshot::Sender<Response>)>,
    /// WaitJob requests: job, wait for start (else end), reply.
    waiters: Vec<(u32, bool, oneshot::Sender<Response>)>,
    /// Replies released after this iteration's records are committed.
    deferred: Vec<(oneshot::Sender<Response>, Response)>,
    /// Node liveness (SlurmdTimeout, link failures, return to service).
    health: agents::Health,
    /// Nodes reached over SSH.
    remote: std::collections::HashSet<String>,
    /// Node down intervals for sreport.
    downlog: downtime::DownLog,
    /// Relayed step streams by token.
    client_logs: HashMap<u64, ClientLog>,
    /// The job each (uid, `JobSpec::submit_token`) submission made, so that a
    /// submission sbatch retries after losing the answer is answered with the same job
    /// (rebuilt from the job records at start; pruned as jobs are purged).
    submissions: HashMap<(u32, u64), u32>,
}

/// The id a submission of `j` was answered with: its array's or heterogeneous
/// job's id for a task or component, else its own.
fn submitted_id(j: &Job) -> u32 {
    if j.array_job_id != 0 {
        j.array_job_id
    } else {
        j.het.map_or(j.id, |h| h.job_id)
    }
}

impl Actor {
    /// Fills [`Actor::submissions`] from the jobs the controller holds.
    fn remember_submissions(&mut self) {
        self.submissions = self
            .cluster
            .jobs
            .values()
            .filter(|j| j.spec.submit_token != 0)
            .map(|j| ((j.uid, j.spec.submit_token), submitted_id(j)))
            .collect();
    }

    /// Notes the job a submission made; forgets those of purged jobs now and then, so
    /// the map stays within twice the job count.
    fn note_submission(&mut self, uid: u32, token: u64, id: u32) {
        if token == 0 {
            return;
        }
        self.submissions.insert((uid, token), id);
        if self.submissions.len() > 2 * self.cluster.jobs.len() + 1024 {
            let jobs = &self.cluster.jobs;
            self.submissions.retain(|_, id| jobs.contains_key(id));
        }
    }

    /// The job an earlier copy of this submission already made, if it is still known.
    fn resubmitted(&self, uid: u32, token: u64) -> Option<u32> {
        if token == 0 {
            return None;
        }
        let id = *self.submissions.get(&(uid, token))?;
        self.cluster.jobs.contains_key(&id).then_some(id)
    }

    /// `scontrol reconfigure`: reads the config file again and applies it
    /// ([`Cluster::reconfigure`]); the node declarations agents register against
    /// take the new features, weight and tmp_disk.
    ///
    /// Errors: personal mode (no file), a file that does not load, or a change that
    /// needs a restart; nothing changes then.
    fn reconfigure(&mut self) -> Result<(), String> {
        let Some(path) = self.cluster.config_source.clone() else {
            return Err("personal mode has no config file to read".into());
        };
        let cfg = Config::from_file(&path).map_err(|e| e.to_string())?;
        for n in &cfg.nodes {
            if let Some(d) = self.declared.get(&n.name) {
                state::node_identity_unchanged(d, n)?;
            }
        }
        self.cluster.reconfigure(&cfg)?;
        for n in &cfg.nodes {
            if let Some(d) = self.declared.get_mut(&n.name) {
                d.features.clone_from(&n.features);
                d.weight = n.weight;
                d.tmp_disk = n.tmp_disk;
            }
        }
        Ok(())
    }

    fn handle(&mut self, msg: Msg, fx: &mut Effects) {
        let now = crate::common::timefmt::now();
        match msg {
            Msg::Client {
                cred,
                user,
                req,
                reply,
            } => self.on_request(cred, user, req, reply, now, fx),
            Msg::AgentUp { node, reg, tx } => {
                tracing::info!(node, "agent registered");
                self.agents.insert(node.clone(), tx);
                let steps = match &reg {
                    FromAgent::Register { steps, .. } => steps.clone(),
                    _ => Vec::new(),
                };
                let declared = self
                    .declared
                    .get(&node)
                    .cloned()
                    .unwrap_or_else(|| crate::config::NodeConf::named(&node));
                self.cluster.agent_registered(reg, &declared, now, fx);
                self.cluster.steps_registered(&node, &steps, now, fx);
                self.health.registered(&mut self.cluster.nodes, &node, now);
                fx.to_agent.push((
                    node.clone(),
                    ToAgent::Configure {
                        cgroup: self.cluster.cgroup.clone(),
                        scripts: self.cluster.scripts.clone(),
                    },
                ));
            }
            Msg::Agent { node, msg } => {
                if self.agents.contains_key(&node)
                    && self.health.heard(&mut self.cluster.nodes, &node, now)
                {
                    tracing::info!(node, "node responds again");
                    fx.schedule = true;
                }
                self.cluster.from_agent(&node, msg, now, fx)
            }
            Msg::AgentDown { node } => {
                tracing::warn!(node, "agent link lost");
                self.agents.remove(&node);
                self.cluster.agent_lost(&node);
                self.cluster.steps_detached_on(&node);
            }
            Msg::StepLaunch {
                cred,
                job_id,
                specs,
                token,
                tx,
                relayed,
            } => {
                self.streams.insert(token, tx);
                if relayed {
                    self.client_logs.insert(
                        token,
                        ClientLog {
                            uid: cred.uid,
                            step: None,
                            events: Default::default(),
                            start: 0,
                            bytes: 0,
                            ended: false,
                            away_since: None,
                        },
                    );
                }
                let c = Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                };
                if specs.first().is_some_and(|s| s.no_alloc) {
                    // `srun -Z`: one part, run outside any job.
                    let names = user_group_names(cred.uid, cred.gid);
                    let spec = specs.into_iter().next().expect("one part at least");
                    self.cluster
                        .step_launch_no_alloc(spec, c, names, token, now, fx);
                } else {
                    self.cluster.step_launch(job_id, specs, c, token, now, fx);
                }
            }
            Msg::StepAttach {
                cred,
                job_id,
                step_id,
                received,
                tx,
                reply,
            } => {
                let operator = self.cluster.is_operator(Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                });
                let found = self.client_logs.iter_mut().find(|(_, l)| {
                    l.step == Some((job_id, step_id))
                        && l.away_since.is_some()
                        && (l.uid == cred.uid || operator)
                });
                let Some((&token, log)) = found else {
                    let _ = reply.send(None);
                    return;
                };
                tracing::info!(
                    job_id,
                    step_id,
                    received,
                    "srun re-attached its step stream"
                );
                log.away_since = None;
                log.confirm(received);
                let _ = tx.send(StepEvent::Reattached);
                for ev in &log.events {
                    let _ = tx.send(ev.clone());
                }
                if !log.ended {
                    self.streams.insert(token, tx);
                }
                let _ = reply.send(Some(token));
            }
            Msg::StepInput {
                token,
                input: StepInput::Received(n),
            } => {
                if let Some(l) = self.client_logs.get_mut(&token) {
                    l.confirm(n);
                }
            }
            Msg::StepInput { token, input } => self.cluster.step_input(token, input, now, fx),
            Msg::StepClosed { token } => {
                self.streams.remove(&token);
                if let Some(l) = self.client_logs.get_mut(&token) {
                    // Held for a re-attach (a relay that broke), or for a while after
                    // the end in case the last events were lost with the relay.
                    l.away_since.get_or_insert(now);
                    return;
                }
                self.cluster.step_stream_closed(token, now, fx);
            }
            Msg::OwnerGone { cred, jobs } => {
                let c = Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                };
                self.cluster.owner_gone(&jobs, c, now, fx);
            }
            Msg::LinkFailed { node, reason } => {
                self.agents.remove(&node);
                self.health
                    .link_failed(&mut self.cluster.nodes, &node, &reason, now);
            }
        }
    }

    /// Answers Allocate requests (after the scheduling pass that may have started
    /// their jobs) and WaitJob requests whose condition now holds.
    fn resolve_waiters(&mut self) {
        for (id, reply) in std::mem::take(&mut self.alloc_replies) {
            let resp = match self.cluster.jobs.get(&id) {
                Some(j) => Response::Allocation(Box::new(Job::clone(j))),
                None => Response::Error(SlurmError::InvalidJobId),
            };
            self.deferred.push((reply, resp));
        }
        let jobs = &self.cluster.jobs;
        let mut keep = Vec::new();
        for (id, started, reply) in std::mem::take(&mut self.waiters) {
            if reply.is_closed() {
                continue;
            }
            match jobs.get(&id) {
                None => self
                    .deferred
                    .push((reply, Response::Error(SlurmError::InvalidJobId))),
                Some(j)
                    if (started && j.state != crate::model::JobState::Pending)
                        || (!started && !j.is_active()) =>
                {
                    self.deferred
                        .push((reply, Response::Allocation(Box::new(Job::clone(j)))))
                }
                Some(_) => keep.push((id, started, reply)),
            }
        }
        self.waiters = keep;
    }

    fn on_request(
        &mut self,
        cred: PeerCred,
        user: Option<String>,
        req: Request,
        reply: oneshot::Sender<Response>,
        now: i64,
        fx: &mut Effects,
    ) {
        let c = Caller {
            uid: cred.uid,
            gid: cred.gid,
        };
        // Coordinators and accounting admins are known by name: the caller's, as the
        // OS names the uid for this very request (a renamed or removed user is seen
        // at once; nothing is kept from an earlier request).
        self.cluster.groups.note_name(c.uid, user.clone());
        // A retry of a submission whose answer was lost: the same job again.
        if let Request::Submit {
            spec,
            test_only: false,
            ..
        } = &req
            && let Some(id) = self.resubmitted(c.uid, spec.submit_token)
        {
            tracing::info!(
                job_id = id,
                uid = c.uid,
                "submission retried; answered with the job it made"
            );
            self.store
                .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
            return;
        }
        let resp = match req {
            Request::Ping => Response::Ok,
            Request::Submit {
                spec,
                test_only,
                het,
            } if !het.is_empty() => {
                let mut jobs = Vec::new();
                let mut err = None;
                let token = spec.submit_token;
                refresh_groups(&mut self.cluster, c);
                for s in std::iter::once(*spec).chain(het) {
                    match self.cluster.resolve(s, c, now, &user_group_names) {
                        Ok(j) => jobs.push(j),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                match err {
                    Some(e) => Response::Error(e),
                    None if test_only => {
                        Response::TestOnly(self.cluster.test_only(jobs.swap_remove(0), now))
                    }
                    None => match self.cluster.submit_het(jobs, fx) {
                        Err(e) => Response::Error(e),
                        Ok(id) => {
                            self.note_submission(c.uid, token, id);
                            self.apply_persist(fx);
                            self.store
                                .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
                            return;
                        }
                    },
                }
            }
            Request::Submit {
                spec, test_only, ..
            } => {
                refresh_groups(&mut self.cluster, c);
                match self.cluster.resolve(*spec, c, now, &user_group_names) {
                    Err(e) => Response::Error(e),
                    Ok(job) if test_only => Response::TestOnly(self.cluster.test_only(job, now)),
                    Ok(job) if job.spec.immediate && !self.cluster.can_start_now(&job, now) => {
                        Response::Error(SlurmError::CannotStartImmediately)
                    }
                    Ok(job) => {
                        let token = job.spec.submit_token;
                        let id = self.cluster.submit(job, fx);
                        self.note_submission(c.uid, token, id);
                        // The reply waits for the commit of this job's record.
                        self.apply_persist(fx);
                        self.store
                            .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
                        return;
                    }
                }
            }
            Request::Jobs(filter) if filter.page > 0 => jobs_page(&self.cluster.jobs, &filter, now),
            Request::Jobs(filter) => Response::Jobs {
                jobs: self
                    .cluster
                    .jobs
                    .values()
                    .filter(|j| filter.matches(j))
                    .map(|j| j.for_query())
                    .collect(),
                now,
            },
            Request::Nodes => Response::Nodes {
                nodes: self.cluster.nodes_for_query(now),
                partitions: self.cluster.partitions_shown(),
                now,
            },
            Request::Cancel {
                filter,
                signal,
                batch_only,
                full,
            } => {
                let scope = state::SignalScope::of(batch_only, full);
                Response::Results(self.cluster.cancel(&filter, signal, scope, c, now, fx))
            }
            Request::Hold {
                ids,
                user_hold,
                array_tasks,
            } => Response::Results(self.cluster.hold(&ids, &array_tasks, user_hold, c, fx)),
            Request::Release { ids, array_tasks } => {
                Response::Results(self.cluster.release(&ids, &array_tasks, c, now, fx))
            }
            Request::Requeue {
                ids,
                hold,
                array_tasks,
            } => Response::Results(self.cluster.requeue(&ids, &array_tasks, hold, c, now, fx)),
            Request::Suspend {
                ids,
                array_tasks,
                resume,
            } => Response::Results(self.cluster.suspend(&ids, &array_tasks, resume, c, now, fx)),
            Request::UpdateJob { id, updates, tasks } => {
                match self
                    .cluster
                    .update_job_at(id, tasks.as_ref(), &updates, c, now, fx)
                {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::UpdateNode { names, update } => {
                match self.cluster.update_node(&names, &update, c, now, fx) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::Acct(q) => {
                // Answered by the store after the writes queued so far.
                self.apply_persist(fx);
                self.store.send(StoreOp::Query(q, reply, now));
                return;
            }
            Request::Config => Response::Config(self.config_pairs()),
            Request::Topology => {
                Response::Topology(Box::new(self.cluster.sched_cfg.topology.clone()))
            }
            Request::Priority { ids, users } => {
                let (rows, weights) = self.cluster.priority_rows(&ids, &users, now);
                Response::Priority { rows, weights }
            }
            Request::Stats => Response::Stats(Box::new(self.cluster.stats_at(now))),
            Request::Shares => Response::Shares {
                rows: self.cluster.share_rows(now),
                cluster: self.cluster.cluster_name.clone(),
            },
            Request::Allocate { spec, het, .. } => {
                refresh_groups(&mut self.cluster, c);
                let mut jobs = Vec::new();
                let mut err = None;
                for mut s in std::iter::once(*spec).chain(het) {
                    s.alloc_only = true;
                    match self.cluster.resolve(s, c, now, &user_group_names) {
                        Ok(j) => jobs.push(j),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                // A heterogeneous allocation is scheduled as sbatch's het jobs are.
                let id = match err {
                    Some(e) => Err(e),
                    None if jobs.len() == 1 => Ok(self.cluster.submit(jobs.swap_remove(0), fx)),
                    None => self.cluster.submit_het(jobs, fx),
                };
                match id {
                    Err(e) => Response::Error(e),
                    Ok(id) => {
                        self.alloc_replies.push((id, reply));
                        return;
                    }
                }
            }
            Request::WaitJob { job_id, started } => {
                if !self.cluster.jobs.contains_key(&job_id) {
                    Response::Error(SlurmError::InvalidJobId)
                } else {
                    self.waiters.push((job_id, started, reply));
                    return;
                }
            }
            Request::ReleaseAllocation { job_id, exit } => {
                match self.cluster.release_allocation(job_id, exit, c, now, fx) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::StepLaunch { .. } | Request::StepAttach { .. } => {
                Response::Error(SlurmError::Other("step launch out of place".into()))
            }
            Request::CancelSteps {
                steps,
                signal,
                het_steps,
            } => {
                let mut out = self.cluster.cancel_steps(&steps, signal, c, now, fx);
                out.extend(
                    self.cluster
                        .cancel_het_steps(&het_steps, signal, c, now, fx),
                );
                Response::Results(out)
            }
            Request::AcctTree => Response::AcctTree {
                tree: Box::new(self.cluster.assoc.clone()),
                cluster: self.cluster.cluster_name.clone(),
                enforce: self.cluster.enforce(),
            },
            Request::AcctChange { op, commit } => {
                let user = user.unwrap_or_else(|| c.uid.to_string());
                match self.cluster.acct_change(&op, commit, c, &user) {
                    Err(e) => Response::Error(e),
                    Ok(out) if commit && out.changed => {
                        // Pending jobs are re-evaluated against the new limits; the
                        // reply waits for the tree's commit.
                        fx.schedule = true;
                        self.apply_persist(fx);
                        let tree = Box::new(self.cluster.assoc.clone());
                        self.store.send(StoreOp::PutAssoc(tree));
                        self.store
                            .send(StoreOp::Reply(reply, Response::AcctChanged(out)));
                        return;
                    }
                    Ok(out) => Response::AcctChanged(out),
                }
            }
            Request::CreateResv(spec) => match self.cluster.create_resv(&spec, c, now, fx) {
                Ok(name) => Response::ResvCreated { name },
                Err(e) => Response::Error(e),
            },
            Request::UpdateResv(spec) => match self.cluster.update_resv(&spec, c, now, fx) {
                Ok(()) => Response::Ok,
                Err(e) => Response::Error(e),
            },
            Request::DeleteResv { name } => match self.cluster.delete_resv(&name, c, now, fx) {
                Ok(()) => Response::Ok,
                Err(e) => Response::Error(e),
            },
            Request::Reservations => Response::Reservations {
                resvs: self.cluster.resv.list.clone(),
                now,
            },
            Request::Usage { start, end } => {
                // The store adds job records and past reservation windows after the
                // writes queued so far.
                self.apply_persist(fx);
                self.persist_resvs();
                let rep = crate::proto::UsageReport {
                    cluster: self.cluster.cluster_name.clone(),
                    nodes: self
                        .cluster
                        .nodes
                        .iter()
                        .map(|n| (n.name.clone(), n.cpus))
                        .collect(),
                    resvs: self.cluster.resv.list.clone(),
                    down: self.downlog.pending(now),
                    now,
                    ..Default::default()
                };
                self.store
                    .send(StoreOp::Usage(start, end, Box::new(rep), reply));
                return;
            }
            Request::Reconfigure => {
                if self.cluster.is_operator(c) {
                    match self.reconfigure() {
                        Ok(()) => {
                            // Agents run Prolog/Epilog/HealthCheckProgram from what they
                            // were last sent: send every connected one the new scripts.
                            for node in self.agents.keys() {
                                fx.to_agent.push((
                                    node.clone(),
                                    ToAgent::Configure {
                                        cgroup: self.cluster.cgroup.clone(),
                                        scripts: self.cluster.scripts.clone(),
                                    },
                                ));
                            }
                            fx.schedule = true;
                            Response::Ok
                        }
                        Err(e) => {
                            tracing::warn!("reconfigure refused: {e}");
                            Response::Error(SlurmError::Other(e))
                        }
                    }
                } else {
                    Response::Error(SlurmError::AccessDenied)
                }
            }
            Request::BatchScript { job_id } => match self.cluster.jobs.get(&job_id) {
                None => Response::Error(SlurmError::InvalidJobId),
                Some(j) if j.uid != c.uid && !self.cluster.is_operator(c) => {
                    Response::Error(SlurmError::AccessDenied)
                }
                Some(j) if j.spec.alloc_only => Response::Error(SlurmError::NotBatch),
                Some(j) => Response::BatchScript(j.spec.script.clone()),
            },
            Request::SetDebug { level } => {
                if !self.cluster.is_operator(c) {
                    Response::Error(SlurmError::AccessDenied)
                } else {
                    match crate::logsink::set_level(&level) {
                        Ok(()) => Response::Ok,
                        Err(e) => Response::Error(SlurmError::Other(e)),
                    }
                }
            }
            Request::Shutdown => {
                if self.cluster.is_operator(c) {
                    let _ = self.stop.try_send(());
                    Response::Ok
                } else {
                    Response::Error(SlurmError::AccessDenied)
                }
            }
        };
        // Replies to requests that changed state also wait for their records' commit.
        if self.persist_resvs() {
            self.apply_persist(fx);
            self.store.send(StoreOp::Reply(reply, resp));
        } else if fx.persist.is_empty() {
            let _ = reply.send(resp);
        } else {
            self.apply_persist(fx);
            self.store.send(StoreOp::Reply(reply, resp));
        }
    }

    fn config_pairs(&self) -> Vec<(String, String)> {
        let c = &self.cluster;
        let mut v = c.config_entries.clone();
        v.push(("KillWait".into(), format!("{} sec", c.kill_wait)));
        v.push(("MinJobAge".into(), format!("{} sec", c.min_job_age)));
        v.push(("SLURM_VERSION".into(), c.slurm_version.clone()));
        v.push(("AccountingStorageEnforce".into(), c.enforce().as_text()));
        v.sort();
        v
    }

    /// Marks nodes silent past SlurmdTimeout DOWN, and drops remote ones' links so that
    /// they reconnect.
    ///
    /// Their jobs end NODE_FAIL or are requeued (`Cluster::nodes_failed`), as Slurm does
    /// with the jobs of a node that misses SlurmdTimeout.
    fn check_health(&mut self, now: i64, fx: &mut Effects) {
        let silent = self.health.check(&mut self.cluster.nodes, now);
        for node in &silent {
            tracing::warn!(node, "node not responding; set DOWN");
            if self.remote.contains(node) {
                self.agents.remove(node);
            }
        }
        if !silent.is_empty() {
            self.cluster.steps_node_failed(&silent, now, fx);
            self.cluster.nodes_failed(&silent, now, fx);
        }
    }

    /// Relayed step streams whose srun stayed away past [`CLIENT_GRACE`]: forgotten,
    /// and a step still running ends as if its srun had gone.
    fn expire_client_logs(&mut self, now: i64, fx: &mut Effects) {
        let expired: Vec<(u64, bool)> = self
            .client_logs
            .iter()
            .filter(|(_, l)| l.away_since.is_some_and(|t| now - t >= CLIENT_GRACE))
            .map(|(t, l)| (*t, l.ended))
            .collect();
        for (token, ended) in expired {
            self.client_logs.remove(&token);
            if !ended {
                tracing::warn!(
                    token,
                    "srun of a relayed step did not come back; ending the step"
                );
                self.cluster.step_stream_closed(token, now, fx);
            }
        }
    }

    fn apply_persist(&mut self, fx: &mut Effects) {
        for j in fx.persist.drain(..) {
            self.store.send(StoreOp::Put(Box::new(j)));
        }
        if let Some(l) = fx.usage.take() {
            self.store.send(StoreOp::PutFsUsage(l));
        }
    }

    /// Sends changed reservations and used windows to the store; whether there were any.
    fn persist_resvs(&mut self) -> bool {
        let mut any = false;
        if let Some(list) = self.cluster.resv.take_dirty() {
            self.store.send(StoreOp::Resvs(list));
            any = true;
        }
        for r in self.cluster.resv.take_history() {
            self.store.send(StoreOp::ResvHistory(r));
            any = true;
        }
        any
    }

    fn apply(&mut self, mut fx: Effects) {
        self.apply_persist(&mut fx);
        self.persist_resvs();
        for (reply, resp) in self.deferred.drain(..) {
            self.store.send(StoreOp::Reply(reply, resp));
        }
        // Agents hear of this iteration's launches and signals only after its records
        // (and everything before them) are committed: see `StoreOp::Forward`.
        let mut forward = Vec::with_capacity(fx.to_agent.len());
        for (node, msg) in fx.to_agent.drain(..) {
            match self.agents.get(&node) {
                Some(tx) => forward.push((tx.clone(), msg)),
                None => tracing::warn!(node, ?msg, "no agent link for node; message dropped"),
            }
        }
        if !forward.is_empty() {
            self.store.send(StoreOp::Forward(forward));
        }
        self.store.flush();
        for (token, ev) in fx.to_client.drain(..) {
            let last = matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
            if let Some(l) = self.client_logs.get_mut(&token) {
                l.record(&ev);
            }
            if let Some(tx) = self.streams.get(&token) {
                let _ = tx.send(ev);
            }
            if last {
                self.streams.remove(&token);
            }
        }
        if cfg!(debug_assertions)
            && let Err(e) = self.cluster.sanity_check()
        {
            tracing::error!("state invariant broken: {e}");
        }
    }
}

/// Serves front-end connections from `listener` until the process ends, within
/// `limits`: a connection past them is told why, and the log names its user.
fn spawn_accept(
    listener: tokio::net::UnixListener,
    tx: mpsc::Sender<Msg>,
    limits: Arc<conns::ConnLimits>,
) {
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let tx = tx.clone();
                    let limits = limits.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_client(stream, tx, limits).await {
                            tracing::debug!("client connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
}

/// How many front-end connections the controller serves at once: its file descriptor
/// limit, raised to the hard limit (at most 65,536), less a reserve for its database,
/// agents and logs.
fn connection_cap() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const RESERVE: u64 = 128;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024 - RESERVE as usize;
    };
    let want = hard.min(65_536).max(soft);
    let soft = if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        want
    } else {
        soft
    };
    soft.saturating_sub(RESERVE).max(16) as usize
}

/// Looks up, for partitions' AllowGroups, the gid of each group name they list and
/// the caller's groups (`getgrouplist`), into `cluster.groups`: the I/O half of the
/// check `state::GroupView::admits` makes. Nothing is looked up when no partition
/// has AllowGroups.
fn refresh_groups(cluster: &mut Cluster, c: Caller) {
    use nix::unistd::{Gid, Group, Uid, User};
    let names: Vec<String> = cluster
        .partitions
        .iter()
        .filter_map(|p| p.allow_groups.as_ref())
        .flatten()
        .cloned()
        .collect();
    if names.is_empty() {
        return;
    }
    for n in names {
        match Group::from_name(&n) {
            Ok(Some(g)) => {
                cluster.groups.gid_of.insert(n, g.gid.as_raw());
            }
            _ => {
                cluster.groups.gid_of.remove(&n);
            }
        }
    }
    let mut gids = vec![c.gid];
    if let Ok(Some(u)) = User::from_uid(Uid::from_raw(c.uid))
        && let Ok(name) = std::ffi::CString::new(u.name)
        && let Ok(list) = nix::unistd::getgrouplist(&name, Gid::from_raw(c.gid))
    {
        gids.extend(list.into_iter().map(|g| g.as_raw()));
    }
    cluster.groups.member_gids.insert(c.uid, gids);
}

/// The user name of `uid` as the OS (NSS) gives it now; `None` when it has none.
/// Looked up for every request, so that permission checks by name (coordinators,
/// AdminLevel) follow a user who is renamed or removed; a cached answer ([`names`]) is
/// used at once, and a lookup that may block runs off the runtime's workers.
async fn caller_name(uid: u32) -> Option<String> {
    if let Some(hit) = names::cached_user_name(uid) {
        return hit;
    }
    tokio::task::spawn_blocking(move || names::user_name(uid))
        .await
        .ok()
        .flatten()
}

/// Looks up user and group names for a uid/gid (numbers when unknown).
fn user_group_names(uid: u32, gid: u32) -> (String, String) {
    let user = names::user_name(uid).unwrap_or_else(|| uid.to_string());
    let group = names::group_name(gid).unwrap_or_else(|| gid.to_string());
    (user, group)
}

async fn serve_client(
    stream: tokio::net::UnixStream,
    tx: mpsc::Sender<Msg>,
    limits: Arc<conns::ConnLimits>,
) -> anyhow::Result<()> {
    let cred = transport::peer_cred(&stream)?;
    serve_stream(stream, cred, tx, false, &limits).await
}

/// Serves one front-end connection whose peer is `cred`: the controller's own socket, or
/// a connection relayed by a node's agent ([`relay`], `relayed`).
async fn serve_stream<S>(
    stream: S,
    cred: PeerCred,
    tx: mpsc::Sender<Msg>,
    relayed: bool,
    limits: &Arc<conns::ConnLimits>,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut framed = Framed::with_limits(stream, limits.frame_limits(cred.uid));
    let _guard = match limits.admit(cred.uid) {
        Ok(g) => g,
        Err(why) => {
            tracing::warn!(uid = cred.uid, pid = ?cred.pid, relayed, "connection refused: {why}");
            // Tell the front-end, within a bound: its hello, then its first request.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                framed.handshake(Role::Controller, &[Role::Client]).await?;
                let _ = framed.recv::<Request>().await?;
                framed
                    .send(&Response::Error(SlurmError::Other(format!(
                        "controller refused the connection: {why}"
                    ))))
                    .await
            })
            .await;
            return Ok(());
        }
    };
    framed.handshake(Role::Controller, &[Role::Client]).await?;
    // Allocation-only jobs this connection owns (cancelled if it closes first).
    let mut owned: Vec<u32> = Vec::new();
    let res = serve_requests(&mut framed, cred, &tx, &mut owned, relayed).await;
    if !owned.is_empty() {
        let _ = tx.send(Msg::OwnerGone { cred, jobs: owned }).await;
    }
    res
}

async fn serve_requests<S>(
    framed: &mut Framed<S>,
    cred: PeerCred,
    tx: &mpsc::Sender<Msg>,
    owned: &mut Vec<u32>,
    relayed: bool,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let req: Request = match framed.recv().await {
            Ok(r) => r,
            Err(crate::proto::ProtoError::Closed) => return Ok(()),
            Err(e) => {
                if matches!(
                    e,
                    crate::proto::ProtoError::SlowPeer(_) | crate::proto::ProtoError::Io(_)
                ) {
                    tracing::warn!(uid = cred.uid, pid = ?cred.pid, "client connection closed: {e}");
                }
                // Answer garbage with an error rather than hanging up silently.
                let _ = framed
                    .send(&Response::Error(SlurmError::Other(format!(
                        "bad request: {e}"
                    ))))
                    .await;
                return Err(e.into());
            }
        };
        if let Request::StepLaunch { job_id, spec, het } = req {
            let specs = std::iter::once(*spec).chain(het).collect();
            return serve_step(
                framed,
                cred,
                tx,
                StreamStart::Launch { job_id, specs },
                relayed,
            )
            .await;
        }
        if let Request::StepAttach {
            job_id,
            step_id,
            received,
        } = req
        {
            let start = StreamStart::Attach {
                job_id,
                step_id,
                received,
            };
            return serve_step(framed, cred, tx, start, relayed).await;
        }
        let releasing = match &req {
            Request::ReleaseAllocation { job_id, .. } => Some(*job_id),
            _ => None,
        };
        let allocating = matches!(req, Request::Allocate { detach: false, .. });
        let (rtx, rrx) = oneshot::channel();
        let user = caller_name(cred.uid).await;
        tx.send(Msg::Client {
            cred,
            user,
            req,
            reply: rtx,
        })
        .await
        .map_err(|_| anyhow::anyhow!("controller is stopping"))?;
        let resp = rrx
            .await
            .map_err(|_| anyhow::anyhow!("controller is stopping"))?;
        match (&resp, allocating, releasing) {
            (Response::Allocation(j), true, _) => owned.push(j.id),
            (_, _, Some(id)) => owned.retain(|&o| o != id),
            _ => {}
        }
        framed.send(&resp).await?;
    }
}

/// How a step stream begins.
enum StreamStart {
    Launch {
        job_id: u32,
        specs: Vec<StepSpec>,
    },
    Attach {
        job_id: u32,
        step_id: u32,
        received: u64,
    },
}

/// A step stream: events from the actor to srun, input from srun to the actor, until
/// the step is done or either side goes away.
async fn serve_step<S>(
    framed: &mut Framed<S>,
    cred: PeerCred,
    tx: &mpsc::Sender<Msg>,
    start: StreamStart,
    relayed: bool,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (etx, mut erx) = mpsc::unbounded_channel::<StepEvent>();
    let stopping = || anyhow::anyhow!("controller is stopping");
    let token = match start {
        StreamStart::Launch { job_id, specs } => {
            let token = NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tx.send(Msg::StepLaunch {
                cred,
                job_id,
                specs,
                token,
                tx: etx,
                relayed,
            })
            .await
            .map_err(|_| stopping())?;
            token
        }
        StreamStart::Attach {
            job_id,
            step_id,
            received,
        } => {
            let (rtx, rrx) = oneshot::channel();
            tx.send(Msg::StepAttach {
                cred,
                job_id,
                step_id,
                received,
                tx: etx,
                reply: rtx,
            })
            .await
            .map_err(|_| stopping())?;
            match rrx.await.map_err(|_| stopping())? {
                Some(t) => t,
                None => {
                    let e = SlurmError::Other(format!(
                        "no broken stream of step {job_id}.{step_id} to re-attach"
                    ));
                    framed.send(&StepEvent::Error(e)).await?;
                    return Ok(());
                }
            }
        }
    };
    let res: anyhow::Result<()> = loop {
        tokio::select! {
            ev = erx.recv() => match ev {
                Some(ev) => {
                    let last = matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
                    if let Err(e) = framed.send(&ev).await {
                        break Err(e.into());
                    }
                    if last {
                        break Ok(());
                    }
                }
                None => break Ok(()),
            },
            m = framed.recv::<StepInput>() => match m {
                Ok(input) => {
                    if tx.send(Msg::StepInput { token, input }).await.is_err() {
                        break Ok(());
                    }
                }
                Err(crate::proto::ProtoError::Closed) => break Ok(()),
                Err(e) => break Err(e.into()),
            },
        }
    };
    let _ = tx.send(Msg::StepClosed { token }).await;
    res
}

/// Serves one agent link: registration first, then events both ways until it breaks.
/// `expect` is the node the link was opened for (a remote agent must register as it).
///
/// Errors (before registration only): the handshake fails, the agent sends something
/// other than its registration, or registers as another node. A registered link that
/// ends returns `Ok` after telling the actor.
async fn agent_link<S>(
    mut link: Framed<S>,
    tx: mpsc::Sender<Msg>,
    expect: Option<String>,
    limits: Arc<conns::ConnLimits>,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    link.handshake(Role::Controller, &[Role::Agent])
        .await
        .context("handshake failed")?;
    let reg: FromAgent = match link.recv().await {
        Ok(r @ FromAgent::Register { .. }) => r,
        Ok(other) => anyhow::bail!("agent did not register first: {other:?}"),
        Err(e) => anyhow::bail!("registration failed: {e}"),
    };
    let FromAgent::Register { node, .. } = &reg else {
        anyhow::bail!("agent did not register first");
    };
    let node = node.clone();
    if let Some(want) = expect
        && want != node
    {
        anyhow::bail!("agent registered as node '{node}', expected '{want}'");
    }
    let (atx, mut arx) = mpsc::unbounded_channel::<ToAgent>();
    if tx
        .send(Msg::AgentUp {
            node: node.clone(),
            reg,
            tx: atx,
        })
        .await
        .is_err()
    {
        return Ok(());
    }
    // Relayed front-end connections have their own outgoing queue, so that the link
    // still ends when the actor drops `atx`.
    let (mut relays, mut relay_out) = relay::Relays::new(limits);
    loop {
        tokio::select! {
            m = link.recv::<FromAgent>() => match m {
                Ok(msg) => {
                    let Some(msg) = relays.intercept(msg, &tx) else {
                        continue;
                    };
                    if tx.send(Msg::Agent { node: node.clone(), msg }).await.is_err() {
                        return Ok(());
                    }
                }
                Err(e) => {
                    tracing::warn!(node, "agent link: {e}");
                    break;
                }
            },
            Some(out) = relay_out.recv() => {
                if let Err(e) = link.send(&out).await {
                    tracing::warn!(node, "agent link: {e}");
                    break;
                }
            }
            out = arx.recv() => match out {
                Some(msg) => {
                    if let Err(e) = link.send(&msg).await {
                        tracing::warn!(node, "agent link: {e}");
                        break;
                    }
                }
                // The actor dropped the link (the node timed out).
                None => break,
            },
        }
    }
    let _ = tx.send(Msg::AgentDown { node }).await;
    Ok(())
}

#[cfg(test)]
mod page_tests {
    use super::*;
    use crate::model::JobState;
    use crate::proto::JobFilter;

    #[test]
    fn job_pages_cover_each_matching_job_once_in_id_order() {
        let mut jobs = std::collections::BTreeMap::new();
        for id in 1..=7u32 {
            let j = Job {
                id,
                state: if id % 3 == 0 {
                    JobState::Completed
                } else {
                    JobState::Pending
                },
                spec: crate::model::JobSpec {
                    script: "#!/bin/sh\ntrue\n".into(),
                    ..Default::default()
                },
                ..Job::default()
            };
            jobs.insert(id, Box::new(j));
        }
        let mut f = JobFilter {
            active_only: true,
            page: 2,
            ..JobFilter::default()
        };
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let Response::JobsPage { jobs: p, now, more } = jobs_page(&jobs, &f, 9) else {
                panic!("not a page")
            };
            assert_eq!(now, 9);
            assert!(p.len() <= 2);
            assert!(p.iter().all(|j| j.spec.script.is_empty()));
            seen.extend(p.iter().map(|j| j.id));
            match p.last() {
                Some(l) if more => f.after = l.id,
                _ => break,
            }
        }
        // 1 2 | 4 5 | 7: the finished ones (3, 6) are filtered out.
        assert_eq!(seen, vec![1, 2, 4, 5, 7]);
        assert_eq!(pages, 3);
        // The cursor at the end of the id space gives an empty last page.
        f.after = u32::MAX;
        assert_eq!(
            jobs_page(&jobs, &f, 9),
            Response::JobsPage {
                jobs: vec![],
                now: 9,
                more: false
            }
        );
    }
}
