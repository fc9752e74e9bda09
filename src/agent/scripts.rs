//! Node scripts run by the agent (cf. slurmd's `run_prolog`/`run_epilog` and
//! `run_script_health_check`): Prolog, Epilog and HealthCheckProgram, as the agent's
//! user (root in system mode), with Slurm's prolog environment.
//!
//! Invariants:
//! - A job's prolog runs at most once per node: at its first launch here (batch script
//!   or step), or when the controller sends `ToAgent::Prolog` (`PrologFlags=Alloc`).
//!   Launches that arrive while it runs wait for it ([`Prologs::gate`]); after a failure
//!   they are refused (the controller requeues the job).
//! - A job's prolog record is dropped when its epilog message arrives, so the table
//!   holds only jobs alive on this node.
//! - Finished prologs are recorded in the spool (`prologs/<job id>`, with the run's
//!   start time) before the launches that waited for them go ahead, so that an agent
//!   started afresh while the job runs does not run the prolog again at its next step
//!   (slurmd keeps this in its job credential state). A record of an earlier run of
//!   the same job id (requeued) does not count.
//! - Scripts that outlive `PrologEpilogTimeout` are killed (their process group) and
//!   count as failed.

use crate::config::scripts::{HealthNodeState, NodeScripts};
use crate::model::Job;
use crate::proto::ToAgent;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where one job's prolog stands on this node.
enum State {
    /// Running; these launches wait for it.
    Running(Vec<ToAgent>),
    Done,
    Failed,
}

/// What the agent loop must do with a message after [`Prologs::gate`].
pub enum Gate {
    /// Handle it now.
    Pass(ToAgent),
    /// It waits for the job's prolog (started if need be, with this environment).
    Wait(Option<(u32, Vec<(String, String)>)>),
    /// The job's prolog failed here: refuse it.
    Refuse(ToAgent),
}

/// The prolog state of this node's jobs.
#[derive(Default)]
pub struct Prologs {
    jobs: HashMap<u32, State>,
    /// The run (the job's start time) each entry of `jobs` is for.
    runs: HashMap<u32, Option<i64>>,
    /// Where finished prologs are recorded (`None`: nowhere, in tests).
    dir: Option<PathBuf>,
}

/// The spool subdirectory of the prolog records.
const RECORDS: &str = "prologs";

impl Prologs {
    /// The table of an agent whose spool is `spool`, with the prologs an earlier
    /// agent recorded there. Unreadable records are skipped (their job's prolog runs
    /// again).
    pub fn load(spool: &Path) -> Prologs {
        let dir = spool.join(RECORDS);
        let mut p = Prologs {
            dir: Some(dir.clone()),
            ..Prologs::default()
        };
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            let mut words = text.split_whitespace();
            let state = match words.next() {
                Some("done") => State::Done,
                Some("failed") => State::Failed,
                _ => continue,
            };
            let run = match words.next() {
                Some("-") => None,
                Some(t) => match t.parse::<i64>() {
                    Ok(t) => Some(t),
                    Err(_) => continue,
                },
                None => continue,
            };
            p.jobs.insert(id, state);
            p.runs.insert(id, run);
        }
        p
    }

    /// Records that `job_id`'s prolog for run `run` ended (`ok`), durably: written to a
    /// temporary file, synced, then renamed into place.
    fn record(&self, job_id: u32, run: Option<i64>, ok: bool) -> std::io::Result<()> {
        use std::io::Write;
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(".{job_id}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        let run = run.map_or("-".to_string(), |t| t.to_string());
        writeln!(f, "{} {run}", if ok { "done" } else { "failed" })?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(job_id.to_string()))
    }

    /// Decides about a launch (`Launch`, `LaunchStep`) or an explicit `Prolog` when a
    /// prolog is configured (`prolog`: whether one is). Other messages pass.
    pub fn gate(&mut self, msg: ToAgent, prolog: bool, node: &str) -> Gate {
        if !prolog {
            return match msg {
                ToAgent::Prolog { .. } => Gate::Wait(None),
                m => Gate::Pass(m),
            };
        }
        let (id, env) = match &msg {
            ToAgent::Launch(lb) => (lb.job.id, (&lb.job, &lb.cluster)),
            // `srun -Z` runs outside any job: no job, no prolog.
            ToAgent::LaunchStep(ls) if ls.spec.no_alloc => return Gate::Pass(msg),
            ToAgent::LaunchStep(ls) => (ls.job.id, (&ls.job, &ls.cluster)),
            ToAgent::Prolog { job, cluster } => (job.id, (job, cluster)),
            _ => return Gate::Pass(msg),
        };
        let explicit = matches!(msg, ToAgent::Prolog { .. });
        let run = env.0.start_time;
        // What was recorded for an earlier run of this id (a requeued job) is stale.
        if !matches!(self.jobs.get(&id), Some(State::Running(_)) | None)
            && self.runs.get(&id) != Some(&run)
        {
            self.forget(id);
        }
        match self.jobs.get_mut(&id) {
            None => {
                let env = script_env(env.0, env.1, node, "prolog_slurmd");
                let queued = if explicit { Vec::new() } else { vec![msg] };
                self.jobs.insert(id, State::Running(queued));
                self.runs.insert(id, run);
                Gate::Wait(Some((id, env)))
            }
            Some(State::Running(q)) => {
                if !explicit {
                    q.push(msg);
                }
                Gate::Wait(None)
            }
            Some(State::Done | State::Failed) if explicit => Gate::Wait(None),
            Some(State::Done) => Gate::Pass(msg),
            Some(State::Failed) => Gate::Refuse(msg),
        }
    }

    /// The prolog of `job_id` finished (`ok`): recorded in the spool, then returns the
    /// launches that waited for it.
    pub fn finished(&mut self, job_id: u32, ok: bool) -> Vec<ToAgent> {
        let run = self.runs.get(&job_id).copied().flatten();
        if let Err(e) = self.record(job_id, run, ok) {
            tracing::warn!(job_id, "cannot record the prolog's end: {e}");
        }
        let new = if ok { State::Done } else { State::Failed };
        match self.jobs.insert(job_id, new) {
            Some(State::Running(q)) => q,
            _ => Vec::new(),
        }
    }

    /// Takes the launches of `job_id` still waiting for its prolog (the job is being
    /// ended before it started here).
    pub fn cancel_waiting(&mut self, job_id: u32) -> Vec<ToAgent> {
        match self.jobs.get_mut(&job_id) {
            Some(State::Running(q)) => std::mem::take(q),
            _ => Vec::new(),
        }
    }

    /// Forgets `job_id` (it ended), with its record in the spool.
    pub fn forget(&mut self, job_id: u32) {
        if !matches!(self.jobs.get(&job_id), Some(State::Running(_))) {
            self.jobs.remove(&job_id);
            self.runs.remove(&job_id);
            if let Some(dir) = &self.dir {
                let _ = std::fs::remove_file(dir.join(job_id.to_string()));
            }
        }
    }
}

/// The environment Slurm gives Prolog and Epilog on `node` (slurmd's
/// `_build_env`, cf. prolog_epilog.html): the job's identity and allocation, this
/// node's GPUs, and `SLURM_SCRIPT_CONTEXT` (`prolog_slurmd`/`epilog_slurmd`).
pub fn script_env(job: &Job, cluster: &str, node: &str, context: &str) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("SLURM_SCRIPT_CONTEXT".into(), context.into()),
        ("SLURMD_NODENAME".into(), node.into()),
        ("SLURM_CLUSTER_NAME".into(), cluster.into()),
        ("SLURM_JOB_ID".into(), job.id.to_string()),
        ("SLURM_JOBID".into(), job.id.to_string()),
        ("SLURM_JOB_NAME".into(), job.spec.name.clone()),
        ("SLURM_JOB_USER".into(), job.user.clone()),
        ("SLURM_JOB_UID".into(), job.uid.to_string()),
        ("SLURM_JOB_GID".into(), job.gid.to_string()),
        ("SLURM_JOB_GROUP".into(), job.group.clone()),
        ("SLURM_JOB_ACCOUNT".into(), job.account.clone()),
        ("SLURM_JOB_PARTITION".into(), job.partition.clone()),
    ];
    if let Some(t) = job.array_task_id {
        env.push(("SLURM_ARRAY_JOB_ID".into(), job.array_job_id.to_string()));
        env.push(("SLURM_ARRAY_TASK_ID".into(), t.to_string()));
    }
    if let Some(a) = &job.alloc {
        env.push((
            "SLURM_JOB_NODELIST".into(),
            crate::model::hostlist::compress(&a.nodes),
        ));
        let gpus = a
            .nodes
            .iter()
            .position(|n| n == node)
            .map(|i| a.gpu_indices(i))
            .unwrap_or_default();
        if !gpus.is_empty() {
            env.push(("SLURM_JOB_GPUS".into(), gpus.join(",")));
            env.push(("CUDA_VISIBLE_DEVICES".into(), gpus.join(",")));
        }
    }
    env
}

/// How a script ended when it did not succeed: its exit status or timeout, and what
/// it printed (stdout, then stderr), trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptFailure {
    /// `exit status N`, `killed by signal N`, `timed out after N s`, or why it could
    /// not be started.
    pub status: String,
    /// Its standard output then standard error, trimmed (may be empty).
    pub output: String,
}

impl std::fmt::Display for ScriptFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.output.is_empty() {
            f.write_str(&self.status)
        } else {
            write!(f, "{}: {}", self.status, self.output)
        }
    }
}

/// Runs `path` with exactly `env`, stdin from /dev/null, in its own process group,
/// killed after `timeout` seconds (`None`: no limit).
///
/// Errors: the script could not be started, exited non-zero, was killed by a signal,
/// or timed out.
pub async fn run_script(
    path: &Path,
    env: &[(String, String)],
    timeout: Option<u32>,
) -> Result<(), ScriptFailure> {
    let mut cmd = tokio::process::Command::new(path);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| ScriptFailure {
        status: format!("cannot run {}: {e}", path.display()),
        output: String::new(),
    })?;
    let pgid = child.id();
    let out = child.wait_with_output();
    let out = match timeout {
        Some(t) => match tokio::time::timeout(Duration::from_secs(u64::from(t)), out).await {
            Ok(r) => r,
            Err(_) => {
                if let Some(pid) = pgid {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                return Err(ScriptFailure {
                    status: format!("timed out after {t} s"),
                    output: String::new(),
                });
            }
        },
        None => out.await,
    };
    let out = out.map_err(|e| ScriptFailure {
        status: format!("cannot wait for {}: {e}", path.display()),
        output: String::new(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    use std::os::unix::process::ExitStatusExt;
    let status = match (out.status.code(), out.status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "failed".into(),
    };
    let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.trim().is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(err.trim());
    }
    Err(ScriptFailure {
        status,
        output: text,
    })
}

/// The reason a failed health check drains the node with: the program's output on
/// one line, or its exit status when it printed nothing.
pub fn health_reason(f: &ScriptFailure) -> String {
    let one_line: Vec<&str> = f
        .output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if one_line.is_empty() {
        format!("HealthCheckProgram failed: {}", f.status)
    } else {
        one_line.join("; ")
    }
}

/// Whether this node is in `state` for the periodic health check: it runs jobs when
/// the spool holds a job or step directory.
pub fn node_state_matches(state: HealthNodeState, spool: &Path) -> bool {
    let busy = std::fs::read_dir(spool)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("job_") || n.starts_with("step_")
        });
    match state {
        HealthNodeState::Any => true,
        HealthNodeState::Idle => !busy,
        HealthNodeState::Alloc => busy,
    }
}

/// Runs the HealthCheckProgram now and then every `health_check_interval` seconds
/// (only now when it is 0), calling `failed` with the drain reason on each failure.
pub async fn health_loop(
    scripts: NodeScripts,
    spool: PathBuf,
    node: String,
    failed: impl Fn(String),
) {
    let Some(prog) = scripts.health_check_program.clone() else {
        return;
    };
    let env = vec![
        (
            "PATH".to_string(),
            "/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("SLURMD_NODENAME".to_string(), node),
    ];
    let mut first = true;
    loop {
        if (first || node_state_matches(scripts.health_check_node_state, &spool))
            && let Err(f) = run_script(&prog, &env, scripts.prolog_epilog_timeout).await
        {
            failed(health_reason(&f));
        }
        first = false;
        if scripts.health_check_interval == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(u64::from(
            scripts.health_check_interval,
        )))
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::Allocation;

    fn job(id: u32) -> Box<Job> {
        Box::new(Job {
            id,
            user: "alice".into(),
            uid: 2001,
            alloc: Some(Allocation {
                nodes: vec!["n1".into(), "n2".into()],
                cpus: vec![1, 1],
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn prolog_msg(id: u32) -> ToAgent {
        ToAgent::Prolog {
            job: job(id),
            cluster: "c".into(),
        }
    }

    fn forget(id: u32) -> ToAgent {
        ToAgent::Forget { job_id: id }
    }

    #[test]
    fn launches_wait_for_one_prolog_and_pass_after_it() {
        let mut p = Prologs::default();
        // The explicit prolog starts it; nothing waits yet.
        match p.gate(prolog_msg(4), true, "n2") {
            Gate::Wait(Some((4, env))) => {
                assert!(env.contains(&("SLURMD_NODENAME".into(), "n2".into())));
                assert!(env.contains(&("SLURM_JOB_NODELIST".into(), "n[1-2]".into())));
                assert!(env.contains(&("SLURM_SCRIPT_CONTEXT".into(), "prolog_slurmd".into())));
                assert!(env.contains(&("SLURM_JOB_USER".into(), "alice".into())));
            }
            _ => panic!("the prolog should start"),
        }
        // A second prolog message does not start another one.
        assert!(matches!(
            p.gate(prolog_msg(4), true, "n2"),
            Gate::Wait(None)
        ));
        // Other messages pass.
        assert!(matches!(p.gate(forget(4), true, "n2"), Gate::Pass(_)));
        assert!(p.finished(4, true).is_empty());
        assert!(matches!(
            p.gate(prolog_msg(4), true, "n2"),
            Gate::Wait(None)
        ));
        p.forget(4);
        assert!(p.jobs.is_empty());
    }

    #[test]
    fn without_a_prolog_everything_passes_and_prolog_messages_are_dropped() {
        let mut p = Prologs::default();
        assert!(matches!(
            p.gate(prolog_msg(1), false, "n1"),
            Gate::Wait(None)
        ));
        assert!(matches!(p.gate(forget(1), false, "n1"), Gate::Pass(_)));
        assert!(p.jobs.is_empty());
    }

    #[test]
    fn a_failed_prolog_refuses_later_launches() {
        let mut p = Prologs::default();
        assert!(matches!(
            p.gate(prolog_msg(2), true, "n1"),
            Gate::Wait(Some(_))
        ));
        p.finished(2, false);
        // A launch that comes after the failure is refused.
        let lb = crate::proto::LaunchBatch {
            job: job(2),
            kill_wait: 30,
            cluster: "c".into(),
            cgroup: Default::default(),
            het: Vec::new(),
            node_gres: Vec::new(),
            scripts: Default::default(),
        };
        assert!(matches!(
            p.gate(ToAgent::Launch(lb.clone()), true, "n1"),
            Gate::Refuse(_)
        ));
        // A launch queued while it runs comes back from `finished`.
        let mut p = Prologs::default();
        assert!(matches!(
            p.gate(ToAgent::Launch(lb.clone()), true, "n1"),
            Gate::Wait(Some(_))
        ));
        assert!(matches!(
            p.gate(ToAgent::Launch(lb), true, "n1"),
            Gate::Wait(None)
        ));
        assert_eq!(p.cancel_waiting(2).len(), 2);
        assert!(p.finished(2, true).is_empty());
    }

    #[test]
    fn finished_prologs_survive_an_agent_restart_for_the_same_run_only() {
        let spool = tempfile::tempdir().unwrap();
        let mut p = Prologs::load(spool.path());
        let mut j = job(8);
        j.start_time = Some(1000);
        let msg = |j: &Job| ToAgent::Prolog {
            job: Box::new(j.clone()),
            cluster: "c".into(),
        };
        assert!(matches!(p.gate(msg(&j), true, "n1"), Gate::Wait(Some(_))));
        p.finished(8, true);
        assert!(matches!(
            p.gate(prolog_msg(3), true, "n1"),
            Gate::Wait(Some(_))
        ));
        p.finished(3, false);
        // A new agent: job 8's prolog ran (no second run), job 3's failed.
        let mut p = Prologs::load(spool.path());
        assert!(matches!(p.gate(msg(&j), true, "n1"), Gate::Wait(None)));
        assert!(matches!(p.jobs.get(&8), Some(State::Done)));
        assert!(matches!(p.jobs.get(&3), Some(State::Failed)));
        // The same job id requeued (another start): its prolog runs again.
        let mut again = (*j).clone();
        again.start_time = Some(2000);
        assert!(matches!(
            p.gate(msg(&again), true, "n1"),
            Gate::Wait(Some(_))
        ));
        p.finished(8, true);
        let p2 = Prologs::load(spool.path());
        assert_eq!(p2.runs.get(&8), Some(&Some(2000)));
        // Forgetting removes the record too.
        p.forget(8);
        p.forget(3);
        assert!(Prologs::load(spool.path()).jobs.is_empty());
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("s.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[tokio::test]
    async fn run_script_reports_status_output_and_timeout() {
        let d = tempfile::tempdir().unwrap();
        let env = vec![("X".to_string(), "1".to_string())];
        let ok = script(d.path(), "test \"$X\" = 1 && test -z \"$HOME\"");
        assert_eq!(run_script(&ok, &env, None).await, Ok(()));
        let bad = script(d.path(), "echo 'disk full'; echo oops >&2; exit 3");
        let f = run_script(&bad, &env, None).await.unwrap_err();
        assert_eq!(f.status, "exit status 3");
        assert_eq!(f.output, "disk full\noops");
        assert_eq!(health_reason(&f), "disk full; oops");
        let slow = script(d.path(), "sleep 30");
        let f = run_script(&slow, &env, Some(1)).await.unwrap_err();
        assert_eq!(f.status, "timed out after 1 s");
        let quiet = script(d.path(), "exit 4");
        let f = run_script(&quiet, &env, None).await.unwrap_err();
        assert_eq!(
            health_reason(&f),
            "HealthCheckProgram failed: exit status 4"
        );
        let missing = run_script(&d.path().join("nope"), &env, None).await;
        assert!(missing.unwrap_err().status.starts_with("cannot run"));
    }

    #[test]
    fn node_state_filter_reads_the_spool() {
        let d = tempfile::tempdir().unwrap();
        assert!(node_state_matches(HealthNodeState::Idle, d.path()));
        assert!(!node_state_matches(HealthNodeState::Alloc, d.path()));
        std::fs::create_dir(d.path().join("job_3")).unwrap();
        assert!(!node_state_matches(HealthNodeState::Idle, d.path()));
        assert!(node_state_matches(HealthNodeState::Alloc, d.path()));
        assert!(node_state_matches(HealthNodeState::Any, d.path()));
    }
}
