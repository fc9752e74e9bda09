//! The controller's main loop: loads state, starts the store thread, agent links and
//! listener, then feeds the actor messages, ticks and scheduling passes until shutdown.

use super::actor::{Actor, Msg};
use super::daemon::{lock_spool_dir, lock_state_dir, prepare_dirs};
use super::serve::{agent_link, connection_cap, spawn_accept};
use super::state::{Cluster, Effects};
use super::store::{self, StoreOp};
use super::{agents, conns, handlers};
use crate::config::{Config, Mode};
use crate::proto::Framed;
use crate::transport;
use anyhow::Context;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Seconds between fair-share usage accounting ticks (Slurm's PriorityCalcPeriod,
/// whose default is 5 minutes; shorter here so that `sshare` follows running jobs).
const PRIORITY_CALC_PERIOD: i64 = 60;

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
    cluster.acct.assoc = store.load_assoc()?;
    let (notes, merged) = cluster.merge_config_accounts();
    for n in notes {
        tracing::warn!("{n}");
    }
    if merged {
        store.put_assoc(&cluster.acct.assoc)?;
    }
    cluster.resv.restore(store.load_resvs()?);
    cluster.restore_usage(store.load_fs_usage()?, now);
    // Usage a controller from before the single ledger kept apart joins the ledger.
    if let Some((old, at)) = store.load_legacy_usage()? {
        cluster.fold_legacy_usage(&old, at);
        store.put_fs_usage(&cluster.acct.ledger)?;
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
    let submissions = handlers::submit::Submissions::of_jobs(&cluster.jobs);
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
        submissions,
    };
    {
        let mut fx = Effects::default();
        actor
            .cluster
            .end_orphaned_step_allocs(crate::common::timefmt::now(), &mut fx);
        actor.apply(fx);
    }
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
                if now - actor.cluster.acct.ledger.accrued_at >= PRIORITY_CALC_PERIOD {
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
