//! The agent's side of numbered steps (cf. slurmd's launch of slurmstepd for a step):
//! one detached `sluice stepd` per step on this node, started with a Unix socket on its
//! stdin; the agent relays [`StepdInput`] to it and its [`StepdEvent`]s to the
//! controller. Step spool directories are `<spool>/step_<job>.<step>`.

use super::AgentConfig;
use crate::model::step::StepUsage;
use crate::proto::spool;
use crate::proto::{Framed, FromAgent, LaunchStep, StepdEvent, StepdInput};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

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

    /// Forgets a step once its end passes to the controller.
    pub fn observe(&mut self, ev: &FromAgent) {
        if let FromAgent::Step {
            job_id,
            step_id,
            event: StepdEvent::Done { .. },
        } = ev
        {
            self.links.remove(&(*job_id, *step_id));
        }
    }
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
    let (tx, mut rx) = mpsc::unbounded_channel::<StepdInput>();
    tokio::spawn(async move {
        let mut link = Framed::new(stream);
        let mut finished = false;
        let mut input_open = true;
        loop {
            tokio::select! {
                ev = link.recv::<StepdEvent>() => match ev {
                    Ok(event) => {
                        finished |= matches!(event, StepdEvent::Done { .. });
                        let _ = etx.send(FromAgent::Step { job_id, step_id, event });
                        if finished {
                            break;
                        }
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
        let _ = child.wait().await;
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
    });
    Ok(tx)
}
