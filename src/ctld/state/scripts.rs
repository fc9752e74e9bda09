//! The controller's side of node scripts (cf. slurmctld's handling of prolog and epilog
//! completion, and of `drain_nodes`): agents run Prolog, Epilog and HealthCheckProgram
//! on their own node and report failures here.
//!
//! - A failed prolog drains the node with Slurm's reason `Prolog error` (set by the
//!   controller's user, as Slurm sets it by SlurmUser) and requeues the job held with
//!   `launch failed requeued held` (a job that asked `--no-requeue` fails instead, unless
//!   `PrologFlags=ForceRequeueOnFail`).
//! - A failed epilog drains the node with `Epilog error`.
//! - A failed health check drains the node with the program's output as the reason.
//!
//! A node already drained (or failed) keeps the reason it has, as in Slurm.
//! With `PrologFlags=Alloc` the prolog is sent to every node of a job when it is
//! allocated; otherwise each agent runs it before the job's first launch there. The
//! epilog (or, without one, the end of the job's prolog bookkeeping) is sent to every
//! node of the allocation when the job ends.

use super::{Cluster, Effects};
use crate::config::scripts::NodeScripts;
use crate::model::job::Allocation;
use crate::model::{Job, JobState, Reason};
use crate::proto::ToAgent;

/// Slurm's node reason after a prolog failure.
pub const PROLOG_ERROR: &str = "Prolog error";
/// Slurm's node reason after an epilog failure.
pub const EPILOG_ERROR: &str = "Epilog error";

/// `scontrol show config` entries for the node scripts (`(null)` when unset).
pub fn config_entries(s: &NodeScripts) -> Vec<(String, String)> {
    let path = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(null)".into())
    };
    let mut flags = Vec::new();
    if s.prolog_alloc {
        flags.push("Alloc");
    }
    if s.force_requeue_on_fail {
        flags.push("ForceRequeueOnFail");
    }
    vec![
        ("Prolog".into(), path(&s.prolog)),
        ("Epilog".into(), path(&s.epilog)),
        ("TaskProlog".into(), path(&s.task_prolog)),
        ("TaskEpilog".into(), path(&s.task_epilog)),
        (
            "PrologFlags".into(),
            if flags.is_empty() {
                "(null)".into()
            } else {
                flags.join(",")
            },
        ),
        (
            "PrologEpilogTimeout".into(),
            s.prolog_epilog_timeout
                .map(|t| t.to_string())
                .unwrap_or_else(|| "65534".into()),
        ),
        ("HealthCheckProgram".into(), path(&s.health_check_program)),
        (
            "HealthCheckInterval".into(),
            s.health_check_interval.to_string(),
        ),
    ]
}

impl Cluster {
    /// Drains `node` with `reason` set by the controller's user at `now`, unless it is
    /// already drained or failed (then its reason stays).
    fn drain_for(&mut self, node: &str, reason: &str, now: i64) {
        let owner = self.owner_uid;
        let Some(n) = self.node_mut(node) else {
            return;
        };
        if n.drain || n.fail {
            return;
        }
        n.drain = true;
        n.reason = Some(reason.to_string());
        n.reason_uid = Some(owner);
        n.reason_time = Some(now);
    }

    /// With `PrologFlags=Alloc`, sends the prolog of just-allocated job `id` to every
    /// node of its allocation.
    pub(super) fn run_alloc_prologs(&mut self, id: u32, fx: &mut Effects) {
        if self.scripts.prolog.is_none() || !self.scripts.prolog_alloc {
            return;
        }
        let Some(j) = self.jobs.get(&id) else { return };
        let Some(a) = &j.alloc else { return };
        for node in &a.nodes {
            fx.to_agent.push((
                node.clone(),
                ToAgent::Prolog {
                    job: Box::new(Job::clone(j)),
                    cluster: self.cluster_name.clone(),
                },
            ));
        }
    }

    /// Job `id` ended on `alloc`: each of its nodes runs the epilog (and forgets the
    /// job's prolog). Nothing is sent when neither script is configured.
    pub(crate) fn run_epilogs(&mut self, id: u32, alloc: &Allocation, fx: &mut Effects) {
        if self.scripts.prolog.is_none() && self.scripts.epilog.is_none() {
            return;
        }
        let Some(j) = self.jobs.get(&id) else { return };
        for node in &alloc.nodes {
            fx.to_agent.push((
                node.clone(),
                ToAgent::Epilog {
                    job: Box::new(Job::clone(j)),
                    cluster: self.cluster_name.clone(),
                },
            ));
        }
    }

    /// `node`'s prolog for `job_id` failed: drain the node and requeue the job held
    /// (or end it FAILED when it may not be requeued). `now`: epoch seconds.
    pub fn prolog_failed(
        &mut self,
        node: &str,
        job_id: u32,
        message: &str,
        now: i64,
        fx: &mut Effects,
    ) {
        tracing::error!(node, job_id, "prolog failed, draining the node: {message}");
        self.drain_for(node, PROLOG_ERROR, now);
        fx.schedule = true;
        let Some(j) = self.jobs.get(&job_id) else {
            return;
        };
        if !matches!(j.state, JobState::Running | JobState::Suspended) || j.completing {
            return;
        }
        let requeue = !j.spec.alloc_only
            && (j.spec.requeue != Some(false) || self.scripts.force_requeue_on_fail);
        if requeue {
            self.launch_failed.insert(job_id);
            self.requeue_running(job_id, true, false, now, fx);
            return;
        }
        if let Some(head) =
            self.end_running(job_id, JobState::Failed, Reason::JobLaunchFailure, now, fx)
        {
            fx.to_agent.push((
                head,
                ToAgent::Terminate {
                    job_id,
                    kill_wait: self.kill_wait,
                    reason: None,
                },
            ));
        }
    }

    /// `node`'s epilog for `job_id` failed: drain the node.
    pub fn epilog_failed(&mut self, node: &str, job_id: u32, message: &str, now: i64) {
        tracing::error!(node, job_id, "epilog failed, draining the node: {message}");
        self.drain_for(node, EPILOG_ERROR, now);
    }

    /// `node`'s HealthCheckProgram failed with `reason` (its output): drain the node.
    pub fn health_check_failed(&mut self, node: &str, reason: &str, now: i64) {
        tracing::warn!(node, "health check failed: {reason}");
        self.drain_for(node, reason, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctld::testutil::{ALICE, ended_msg, names, spec, start_on, two_nodes};
    use crate::proto::{EndKind, FromAgent};

    #[test]
    fn a_failed_prolog_drains_and_requeues_held() {
        let mut c = two_nodes("Prolog = \"/etc/sluice/prolog\"");
        let mut fx = Effects::default();
        let id = start_on(&mut c, 1, &mut fx);
        let node = c.jobs[&id].alloc.as_ref().unwrap().nodes[0].clone();
        let mut fx = Effects::default();
        let failed = FromAgent::PrologFailed {
            job_id: id,
            message: "exit 1".into(),
        };
        c.from_agent(&node, failed, 20, &mut fx);
        let n = c.nodes.iter().find(|n| n.name == node).unwrap();
        assert!(n.drain);
        assert_eq!(n.reason.as_deref(), Some(PROLOG_ERROR));
        assert_eq!(n.reason_uid, Some(c.owner_uid));
        assert_eq!(n.reason_time, Some(20));
        // The node confirms that the launch did not happen.
        c.from_agent(
            &node,
            ended_msg(id, EndKind::LaunchFailed, 0, 21),
            21,
            &mut fx,
        );
        let j = &c.jobs[&id];
        assert_eq!(j.state, JobState::Pending);
        assert_eq!(j.reason, Reason::LaunchFailedRequeuedHeld);
        assert_eq!(j.priority, 0);
        assert_eq!(j.restarts, 1);
        // The scheduler keeps the reason while it is held.
        assert_eq!(
            crate::sched::pre_check(j, 100),
            Some(Reason::LaunchFailedRequeuedHeld)
        );
        // A later failure does not replace an existing drain reason.
        let i = c.nodes.iter().position(|n| n.name == node).unwrap();
        c.nodes[i].reason = Some("disk".into());
        c.prolog_failed(&node, id, "again", 30, &mut fx);
        assert_eq!(c.nodes[i].reason.as_deref(), Some("disk"));
    }

    #[test]
    fn a_job_that_may_not_requeue_fails_unless_forced() {
        let mut c = two_nodes("Prolog = \"/p\"");
        let mut s = spec("nr");
        s.requeue = Some(false);
        let j = c.resolve(s, ALICE, 10, &names).unwrap();
        let id = c.submit(j, &mut Effects::default());
        let mut fx = Effects::default();
        c.schedule(10, &mut fx);
        let node = c.jobs[&id].alloc.as_ref().unwrap().nodes[0].clone();
        c.prolog_failed(&node, id, "exit 1", 20, &mut fx);
        c.from_agent(
            &node,
            ended_msg(id, EndKind::LaunchFailed, 0, 21),
            21,
            &mut fx,
        );
        assert_eq!(c.jobs[&id].state, JobState::Failed);

        let mut c = two_nodes("Prolog = \"/p\"\nPrologFlags = \"ForceRequeueOnFail\"");
        let mut s = spec("nr");
        s.requeue = Some(false);
        let j = c.resolve(s, ALICE, 10, &names).unwrap();
        let id = c.submit(j, &mut Effects::default());
        let mut fx = Effects::default();
        c.schedule(10, &mut fx);
        let node = c.jobs[&id].alloc.as_ref().unwrap().nodes[0].clone();
        c.prolog_failed(&node, id, "exit 1", 20, &mut fx);
        c.from_agent(
            &node,
            ended_msg(id, EndKind::LaunchFailed, 0, 21),
            21,
            &mut fx,
        );
        assert_eq!(c.jobs[&id].state, JobState::Pending);
        assert_eq!(c.jobs[&id].reason, Reason::LaunchFailedRequeuedHeld);
    }

    #[test]
    fn alloc_flag_sends_the_prolog_to_every_node_and_the_end_sends_epilogs() {
        let mut c = two_nodes("prolog = \"/p\"\nepilog = \"/e\"\nprolog_flags = \"Alloc\"");
        let mut fx = Effects::default();
        let id = start_on(&mut c, 2, &mut fx);
        let mut prologs: Vec<&str> = fx
            .to_agent
            .iter()
            .filter(|(_, m)| matches!(m, ToAgent::Prolog { job, .. } if job.id == id))
            .map(|(n, _)| n.as_str())
            .collect();
        prologs.sort();
        assert_eq!(prologs, ["n1", "n2"]);
        // The prologs go out before the batch launch.
        let launch = fx
            .to_agent
            .iter()
            .position(|(_, m)| matches!(m, ToAgent::Launch(_)))
            .unwrap();
        assert_eq!(launch, 2);
        let head = c.jobs[&id].alloc.as_ref().unwrap().nodes[0].clone();
        let mut fx = Effects::default();
        c.from_agent(&head, ended_msg(id, EndKind::Exited, 0, 30), 30, &mut fx);
        let mut epilogs: Vec<&str> = fx
            .to_agent
            .iter()
            .filter(|(_, m)| matches!(m, ToAgent::Epilog { job, .. } if job.id == id))
            .map(|(n, _)| n.as_str())
            .collect();
        epilogs.sort();
        assert_eq!(epilogs, ["n1", "n2"]);
    }

    #[test]
    fn without_alloc_or_scripts_nothing_extra_is_sent() {
        let mut c = two_nodes("Prolog = \"/p\"");
        let mut fx = Effects::default();
        start_on(&mut c, 1, &mut fx);
        let sent_prolog = fx
            .to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Prolog { .. }));
        assert!(!sent_prolog);
        let mut c = two_nodes("");
        let mut fx = Effects::default();
        let id = start_on(&mut c, 1, &mut fx);
        let head = c.jobs[&id].alloc.as_ref().unwrap().nodes[0].clone();
        c.from_agent(&head, ended_msg(id, EndKind::Exited, 0, 30), 30, &mut fx);
        let sent_epilog = fx
            .to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Epilog { .. }));
        assert!(!sent_epilog);
    }

    #[test]
    fn epilog_and_health_failures_drain_with_their_reasons() {
        let mut c = two_nodes("");
        let mut fx = Effects::default();
        let failed = FromAgent::EpilogFailed {
            job_id: 5,
            message: "exit 3".into(),
        };
        c.from_agent("n1", failed, 40, &mut fx);
        assert_eq!(c.nodes[0].reason.as_deref(), Some(EPILOG_ERROR));
        assert!(c.nodes[0].drain);
        let failed = FromAgent::HealthCheckFailed {
            reason: "ib0 is down".into(),
        };
        c.from_agent("n2", failed, 41, &mut fx);
        assert!(c.nodes[1].drain);
        assert_eq!(c.nodes[1].reason.as_deref(), Some("ib0 is down"));
        assert_eq!(c.nodes[1].reason_time, Some(41));
        assert_eq!(c.nodes[1].reason_uid, Some(999));
    }

    #[test]
    fn config_entries_name_slurms_keys() {
        let c = two_nodes("Prolog = \"p.sh\"\nPrologFlags = \"Alloc\"\nHealthCheckInterval = 30");
        let e = &c.config_entries;
        assert!(e.contains(&("Prolog".into(), "/x/p.sh".into())));
        assert!(e.contains(&("Epilog".into(), "(null)".into())));
        assert!(e.contains(&("PrologFlags".into(), "Alloc".into())));
        assert!(e.contains(&("HealthCheckInterval".into(), "30".into())));
    }
}
