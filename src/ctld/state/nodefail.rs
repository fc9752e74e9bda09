//! Jobs on a node that stopped answering (issue 7): Slurm's behaviour when slurmd
//! misses SlurmdTimeout. The node's running jobs end NODE_FAIL, or go back to the
//! queue when requeueable (JobRequeue=1; `--no-requeue` opts out); their steps end; a
//! multi-node job's batch host is told to end what it runs. When the node answers
//! again, whatever its agent still runs for jobs that ended meanwhile (or that run
//! elsewhere now) is terminated, so that nothing runs untracked.

use super::{Cluster, Effects};
use crate::model::JobState;
use crate::proto::ToAgent;

impl Cluster {
    /// `nodes` stopped answering (silent past SlurmdTimeout): ends or requeues every
    /// job running or completing on any of them. Returns the ids handled.
    pub fn nodes_failed(&mut self, nodes: &[String], now: i64, fx: &mut Effects) -> Vec<u32> {
        // Jobs that have ended stop waiting for these nodes' epilogs.
        for n in nodes {
            self.cleanup_lost_on(n, fx);
        }
        let mut hit: Vec<(u32, String)> = self
            .jobs
            .values()
            .filter(|j| (j.state == JobState::Running || j.completing) && j.cleanup.is_none())
            .filter_map(|j| {
                let a = j.alloc.as_ref()?;
                a.nodes
                    .iter()
                    .any(|n| nodes.contains(n))
                    .then(|| (j.id, a.nodes[0].clone()))
            })
            .collect();
        // A heterogeneous job ends through its leader.
        hit = hit
            .into_iter()
            .filter_map(|(id, host)| match self.jobs[&id].het {
                Some(h) if h.offset != 0 => {
                    let l = self.jobs.get(&h.job_id)?;
                    Some((h.job_id, l.alloc.as_ref()?.nodes[0].clone()))
                }
                _ => Some((id, host)),
            })
            .collect();
        hit.sort();
        hit.dedup();
        // --no-kill: a running job whose batch host still answers keeps its other
        // nodes (Slurm's kill_on_node_fail off): it loses the failed ones and the steps
        // on them, and runs on.
        let mut kept: Vec<u32> = Vec::new();
        hit.retain(|(id, host)| {
            let j = &self.jobs[id];
            let keep = j.spec.no_kill
                && j.state == JobState::Running
                && !j.completing
                && j.het.is_none()
                && !nodes.contains(host);
            if keep {
                kept.push(*id);
            }
            !keep
        });
        for id in &kept {
            self.drop_failed_nodes(*id, nodes, now, fx);
        }
        for (id, host) in &hit {
            // slurmctld's kill_running_job_by_node_name.
            let j = &self.jobs[id];
            let failed = j.alloc_nodes_among(nodes);
            if j.spec.alloc_only || j.spec.requeue == Some(false) {
                tracing::info!("Killing JobId={id} on failed node {failed}");
            } else {
                tracing::info!("requeue job JobId={id} due to failure of node {failed}");
            }
            // An allocation of salloc or srun has no batch step and is never requeued
            // (Slurm requeues batch jobs only): it ends NODE_FAIL with its steps.
            if self.jobs[id].spec.alloc_only {
                self.end_job_steps(*id, false, now, fx);
                self.end_alloc_only(
                    *id,
                    JobState::NodeFail,
                    crate::model::Reason::NodeDown,
                    Default::default(),
                    now,
                    fx,
                );
                continue;
            }
            self.finish(*id, None, now, fx);
            if !nodes.contains(host) {
                fx.to_agent.push((
                    host.clone(),
                    ToAgent::Terminate {
                        job_id: *id,
                        kill_wait: self.kill_wait,
                        reason: None,
                    },
                ));
            }
        }
        fx.schedule = true;
        hit.into_iter().map(|(id, _)| id).chain(kept).collect()
    }

    /// Takes the `failed` nodes out of running job `id`'s allocation (their
    /// resources go back, its steps there end); the job keeps the rest.
    fn drop_failed_nodes(&mut self, id: u32, failed: &[String], now: i64, fx: &mut Effects) {
        let Some(old) = self.jobs.get(&id).and_then(|j| j.alloc.clone()) else {
            return;
        };
        // slurmctld's kill_running_job_by_node_name.
        tracing::error!("Removing failed node {} from JobId={id}", failed.join(","));
        self.end_steps_on(id, failed, now, fx);
        let keep: Vec<usize> = (0..old.nodes.len())
            .filter(|&k| !failed.contains(&old.nodes[k]))
            .collect();
        fn pick<T: Clone>(v: &[T], keep: &[usize]) -> Vec<T> {
            keep.iter().filter_map(|&k| v.get(k).cloned()).collect()
        }
        let mut new = old.clone();
        new.nodes = pick(&old.nodes, &keep);
        new.cpus = pick(&old.cpus, &keep);
        new.cpu_ids = pick(&old.cpu_ids, &keep);
        new.gres = pick(&old.gres, &keep);
        new.tasks = pick(&old.tasks, &keep);
        self.charge(&old, false, -1);
        self.charge(&new, false, 1);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.alloc = Some(new);
            fx.persist.push((**j).clone());
        }
    }

    /// Of the jobs a registering `node` says it runs, those that must not run there:
    /// ended (NODE_FAIL, cancelled while the node was away), or running on another
    /// node now. A pending job is left to the caller (the controller may have crashed
    /// between launching and recording it), unless its last run ended by node failure.
    pub fn orphans_on(&self, node: &str, running: &[u32]) -> Vec<u32> {
        running
            .iter()
            .copied()
            .filter(|id| match self.jobs.get(id) {
                None => false,
                Some(j) if j.state == JobState::Pending => {
                    j.past_runs.last().is_some_and(|r| r.node_fail)
                }
                Some(j) if j.state == JobState::Running || j.completing => {
                    j.alloc.as_ref().is_some_and(|a| a.nodes[0] != node)
                }
                Some(_) => true,
            })
            .collect()
    }
}
