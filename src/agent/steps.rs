//! The agent's side of numbered steps (cf. slurmd's launch of slurmstepd for a step):
//! one detached `sluice stepd` per step on this node, started with a Unix socket on its
//! stdin; the agent relays [`StepdInput`] to it and its numbered [`StepdFrame`]s to the
//! controller. Step spool directories are `<spool>/step_<job>.<step>`.
//!
//! stepd outlives the agent (`stepd::stream`): a new agent lists the steps whose stepd
//! still runs when it registers ([`running`]), and the controller has it re-attach
//! them ([`Steps::adopt`]: connect to the step's `stepd.sock`, replay from the first
//! event the controller lacks) or end them ([`Steps::end_step`]).

use super::AgentConfig;
use crate::model::step::StepUsage;
use crate::proto::spool;
use crate::proto::{Framed, FromAgent, LaunchStep, StepdEvent, StepdFrame, StepdInput};
use nix::sys::signal::kill;
use nix::unistd::Pid;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Running steps of this node: where to send their input.
#[derive(Default)]
pub struct Steps {
    links: HashMap<(u32, u32), mpsc::UnboundedSender<StepdInput>>,
}

fn step_dir(spool: &Path, job: u32, step: u32) -> PathBuf {
    spool.join(format!("step_{job}.{step}"))
}

impl Steps {
    /// Starts stepd for this node's part of a step. A failure to start is reported as
    /// the step's output and end, so srun learns it.
    pub fn launch(
        &mut self,
        ls: LaunchStep,
        cfg: &AgentConfig,
        etx: &mpsc::UnboundedSender<FromAgent>,
    ) {
        let (job_id, step_id) = (ls.job.id, ls.step_id);
        self.prune();
        match start(&ls, cfg, etx.clone()) {
            Ok(tx) => {
                self.links.insert((job_id, step_id), tx);
            }
            Err(e) => {
                tracing::error!(job_id, step_id, "step launch failed: {e:#}");
                refuse(
                    &ls,
                    &cfg.node.name,
                    &format!("cannot start the step: {e:#}"),
                    etx,
                );
            }
        }
    }

    /// Passes input to a running step (dropped if it is gone).
    pub fn input(&mut self, job_id: u32, step_id: u32, input: StepdInput) {
        if let Some(tx) = self.links.get(&(job_id, step_id)) {
            let _ = tx.send(input);
        }
    }

    /// Signals every step of a job.
    pub fn signal_job(&mut self, job_id: u32, signal: i32) {
        for ((j, _), tx) in &self.links {
            if *j == job_id {
                let _ = tx.send(StepdInput::Signal(signal));
            }
        }
    }

    /// Stops (`true`) or continues every step of a job (`scontrol suspend`/`resume`).
    pub fn suspend_job(&mut self, job_id: u32, stop: bool) {
        for ((j, _), tx) in &self.links {
            if *j == job_id {
                let _ = tx.send(StepdInput::Suspend(stop));
            }
        }
    }

    /// Ends every step of a job (the job is ending).
    pub fn terminate_job(&mut self, job_id: u32, kill_wait: u32) {
        for ((j, _), tx) in &self.links {
            if *j == job_id {
                let _ = tx.send(StepdInput::Terminate {
                    kill_wait,
                    message: None,
                });
            }
        }
    }

    /// Forgets the steps whose relay task ended (stepd exited or went to another agent).
    fn prune(&mut self) {
        self.links.retain(|_, tx| !tx.is_closed());
    }

    /// Re-attaches a step whose stepd outlived an earlier link: connects to its socket
    /// and has it replay its events from number `from`. A stepd that is gone by now is
    /// reported ended (its part of the step has nothing more to say).
    pub fn adopt(
        &mut self,
        job_id: u32,
        step_id: u32,
        from: u64,
        cfg: &AgentConfig,
        etx: &mpsc::UnboundedSender<FromAgent>,
    ) {
        self.prune();
        if let Some(tx) = self.links.get(&(job_id, step_id)) {
            // Already relayed by this agent (adoption asked twice): replay again.
            let _ = tx.send(StepdInput::Resume { from });
            return;
        }
        let dir = step_dir(&cfg.spool_dir, job_id, step_id);
        let stream =
            std::os::unix::net::UnixStream::connect(dir.join(crate::proto::spool::STEPD_SOCKET))
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .and_then(tokio::net::UnixStream::from_std);
        match stream {
            Ok(stream) => {
                tracing::info!(job_id, step_id, from, "re-attaching step");
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send(StepdInput::Resume { from });
                tokio::spawn(relay(stream, job_id, step_id, dir, etx.clone(), rx, None));
                self.links.insert((job_id, step_id), tx);
            }
            Err(e) => {
                tracing::warn!(job_id, step_id, "cannot re-attach step: {e}");
                let _ = std::fs::remove_dir_all(&dir);
                let _ = etx.send(done(job_id, step_id));
            }
        }
    }

    /// Ends a step the controller no longer tracks: its tasks are terminated, their
    /// output discarded, and its stepd exits.
    pub fn end_step(&mut self, job_id: u32, step_id: u32, kill_wait: u32, cfg: &AgentConfig) {
        self.prune();
        let abandon = StepdInput::Abandon { kill_wait };
        if let Some(tx) = self.links.get(&(job_id, step_id)) {
            let _ = tx.send(abandon);
            return;
        }
        let dir = step_dir(&cfg.spool_dir, job_id, step_id);
        let Ok(stream) =
            std::os::unix::net::UnixStream::connect(dir.join(crate::proto::spool::STEPD_SOCKET))
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .and_then(tokio::net::UnixStream::from_std)
        else {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        };
        tokio::spawn(async move {
            let mut link = Framed::new(stream);
            if link.send(&abandon).await.is_ok() {
                // Until stepd exits; what it still says is not wanted.
                while link.recv::<StepdFrame>().await.is_ok() {}
            }
            if stepd_gone(&dir, None).await {
                let _ = std::fs::remove_dir_all(&dir);
            }
        });
    }
}

/// Steps `(job, step)` whose stepd is still running in `spool` (left by an earlier
/// agent or link). Directories of stepds that are gone are removed.
pub fn running(spool: &Path) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(spool).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(ids) = name.to_str().and_then(|n| n.strip_prefix("step_")) else {
            continue;
        };
        let Some((j, st)) = ids.split_once('.') else {
            continue;
        };
        let (Ok(j), Ok(st)) = (j.parse::<u32>(), st.parse::<u32>()) else {
            continue;
        };
        let dir = e.path();
        let alive = spool::read_pid(&dir, spool::STEPD_PID)
            .is_some_and(|pid| kill(Pid::from_raw(pid), None).is_ok());
        if alive && dir.join(crate::proto::spool::STEPD_SOCKET).exists() {
            out.push((j, st));
        } else if !alive {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    out.sort_unstable();
    out
}

/// Whether the stepd of `dir` has exited (waiting up to 2 s): through `exit` when it is
/// this agent's child, else by its pid.
async fn stepd_gone(dir: &Path, exit: Option<oneshot::Receiver<()>>) -> bool {
    if let Some(rx) = exit {
        return tokio::time::timeout(Duration::from_secs(2), rx)
            .await
            .is_ok();
    }
    let Some(pid) = spool::read_pid(dir, spool::STEPD_PID) else {
        return true;
    };
    for _ in 0..40 {
        if kill(Pid::from_raw(pid), None).is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Reports that this node's part of step `ls` will not run: `why` goes to the step's
/// stderr as a slurmstepd error line, then the step's end.
pub fn refuse(ls: &LaunchStep, node: &str, why: &str, etx: &mpsc::UnboundedSender<FromAgent>) {
    let (job_id, step_id) = (ls.job.id, ls.step_id);
    let first_rank = ls
        .layout
        .tasks
        .get(ls.node_index as usize)
        .and_then(|t| t.first().copied())
        .unwrap_or(0);
    let _ = etx.send(FromAgent::Step {
        job_id,
        step_id,
        event: StepdEvent::Output {
            task: first_rank,
            stderr: true,
            data: format!("slurmstepd-{node}: error: {why}\n").into_bytes(),
        },
        seq: 0,
    });
    let _ = etx.send(done(job_id, step_id));
}

fn done(job_id: u32, step_id: u32) -> FromAgent {
    FromAgent::Step {
        job_id,
        step_id,
        event: StepdEvent::Done {
            usage: StepUsage::default(),
        },
        seq: 0,
    }
}

fn start(
    ls: &LaunchStep,
    cfg: &AgentConfig,
    etx: mpsc::UnboundedSender<FromAgent>,
) -> anyhow::Result<mpsc::UnboundedSender<StepdInput>> {
    use anyhow::Context;
    let (job_id, step_id) = (ls.job.id, ls.step_id);
    let dir = step_dir(&cfg.spool_dir, job_id, step_id);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).ok();
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    spool::write(&dir, spool::STEP_LAUNCH, ls)?;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().context("socketpair")?;
    let log = std::fs::File::create(dir.join("stepd.log"))?;
    let mut child = tokio::process::Command::new(&cfg.exe)
        .arg("stepd")
        .arg(&dir)
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            theirs,
        )))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run {} stepd", cfg.exe.display()))?;
    ours.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(ours)?;
    let (tx, rx) = mpsc::unbounded_channel::<StepdInput>();
    let (exit_tx, exit_rx) = oneshot::channel();
    tokio::spawn(async move {
        let _ = child.wait().await;
        let _ = exit_tx.send(());
    });
    tokio::spawn(relay(stream, job_id, step_id, dir, etx, rx, Some(exit_rx)));
    Ok(tx)
}

/// Relays one stepd link until stepd closes it: its numbered events to the controller,
/// the controller's input to it. When stepd has exited (`exit` says so for this agent's
/// own child) its directory is removed, and a stepd that died without reporting its
/// end gets one made up; a stepd that lives on was taken over by another agent.
async fn relay(
    stream: tokio::net::UnixStream,
    job_id: u32,
    step_id: u32,
    dir: PathBuf,
    etx: mpsc::UnboundedSender<FromAgent>,
    mut rx: mpsc::UnboundedReceiver<StepdInput>,
    exit: Option<oneshot::Receiver<()>>,
) {
    let mut link = Framed::new(stream);
    let mut finished = false;
    let mut input_open = true;
    loop {
        tokio::select! {
            ev = link.recv::<StepdFrame>() => match ev {
                Ok(StepdFrame { seq, event }) => {
                    finished |= matches!(event, StepdEvent::Done { .. });
                    let _ = etx.send(FromAgent::Step { job_id, step_id, event, seq });
                }
                Err(_) => break,
            },
            m = rx.recv(), if input_open => match m {
                Some(m) => {
                    if link.send(&m).await.is_err() {
                        break;
                    }
                }
                None => input_open = false,
            },
        }
    }
    drop(rx);
    if !stepd_gone(&dir, exit).await {
        return;
    }
    if !finished {
        let log = std::fs::read_to_string(dir.join("stepd.log")).unwrap_or_default();
        tracing::warn!(
            job_id,
            step_id,
            "stepd ended without a report: {}",
            log.trim()
        );
        let _ = etx.send(done(job_id, step_id));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
