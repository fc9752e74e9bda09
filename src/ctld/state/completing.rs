//! The end of a job's COMPLETING phase (cf. slurmctld's `job_epilog_complete` and
//! `make_node_idle`): once a job's end is recorded (its final state, exit code and
//! batch usage), it stays COMPLETING (squeue `CG`, its nodes `COMPLETING`/`comp`) and
//! keeps its allocation while
//! - an Epilog still runs on one of its nodes (the agent answers every
//!   [`ToAgent::Epilog`](crate::proto::ToAgent::Epilog) with
//!   [`FromAgent::EpilogComplete`](crate::proto::FromAgent::EpilogComplete)), or
//! - one of its steps has not reported its end yet (its stepd's final usage, which
//!   `sacct` and `seff` read, arrives with that report).
//!
//! Invariants: `Job::cleanup` is `Some` only while `completing` is set and the job's
//! end is recorded; the allocation is charged (as completing) until the cleanup is
//! over, then released exactly once. A node that goes away (its agent re-registers, or
//! it is set DOWN) no longer holds anyone's cleanup: its epilog run is lost with it.
//! Nodes whose agent does not report epilogs (an older install) are not waited for.
//! A requeued job goes back to the queue at once (its epilog still runs).

use super::{Cluster, Effects, shed_after_end};
use crate::model::job::{Allocation, Cleanup};
use crate::model::{Job, NodeState};

impl Cluster {
    /// Job `id`'s end is recorded and its batch step is gone from `alloc`: every node
    /// runs the epilog, and the allocation is released now, or, while an epilog or a
    /// step is still to report, once they have (see the module docs). `wait`: whether
    /// the job may stay COMPLETING (not for a job that went back to the queue);
    /// `was_completing`: whether its nodes already count it as completing.
    pub(crate) fn release_ended(
        &mut self,
        id: u32,
        alloc: &Allocation,
        was_completing: bool,
        wait: bool,
        fx: &mut Effects,
    ) {
        self.run_epilogs(id, alloc, fx);
        let epilog: Vec<String> = if wait && self.scripts.epilog.is_some() {
            let mut v: Vec<String> = alloc
                .nodes
                .iter()
                .filter(|n| self.epilog_waitable(n))
                .cloned()
                .collect();
            v.dedup();
            v
        } else {
            Vec::new()
        };
        let steps_left = wait && self.steps.has_live(id);
        let Some(j) = self.jobs.get_mut(&id) else {
            self.charge(alloc, was_completing, -1);
            return;
        };
        if epilog.is_empty() && !steps_left {
            self.charge(alloc, was_completing, -1);
            return;
        }
        j.completing = true;
        j.cleanup = Some(Cleanup { epilog });
        fx.persist.push(Job::clone(j));
        if !was_completing {
            for name in &alloc.nodes {
                if let Some(n) = self.node_mut(name) {
                    n.completing_jobs += 1;
                }
            }
        }
    }

    /// Whether `node` will report the end of an epilog sent to it now: its agent says
    /// it does, and it is up and answering.
    fn epilog_waitable(&self, node: &str) -> bool {
        self.epilog_reporters.contains(node)
            && self
                .nodes
                .iter()
                .any(|n| n.name == node && n.state == NodeState::Up && !n.not_responding)
    }

    /// `node` reported the end of job `id`'s epilog (or will not: it went away).
    pub fn epilog_complete(&mut self, node: &str, id: u32, fx: &mut Effects) {
        let Some(c) = self.jobs.get_mut(&id).and_then(|j| j.cleanup.as_mut()) else {
            return;
        };
        c.epilog.retain(|n| n != node);
        self.try_complete(id, fx);
    }

    /// `node` went away (its agent started afresh, or the node is DOWN): the epilogs
    /// it was running are given up, and the jobs that waited only for them complete.
    pub(super) fn cleanup_lost_on(&mut self, node: &str, fx: &mut Effects) {
        let ids: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.cleanup.is_some())
            .filter(|j| {
                j.alloc
                    .as_ref()
                    .is_some_and(|a| a.nodes.iter().any(|n| n == node))
            })
            .map(|j| j.id)
            .collect();
        for id in ids {
            self.epilog_complete(node, id, fx);
        }
    }

    /// Ends job `id`'s COMPLETING phase when nothing is left to wait for: it leaves
    /// the queue's active jobs and its allocation is released.
    pub(crate) fn try_complete(&mut self, id: u32, fx: &mut Effects) {
        let steps_left = self.steps.has_live(id);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        match &j.cleanup {
            Some(c) if c.epilog.is_empty() && !steps_left => {}
            _ => return,
        }
        j.cleanup = None;
        j.completing = false;
        let alloc = j.alloc.clone();
        fx.persist.push(Job::clone(j));
        shed_after_end(j);
        fx.schedule = true;
        if let Some(a) = alloc {
            self.charge(&a, true, -1);
        }
    }

    /// Completes the jobs whose cleanup has nothing left (a safety net for waits
    /// whose last report was lost, e.g. a step record given up by a restart).
    pub(super) fn sweep_cleanups(&mut self, fx: &mut Effects) {
        let ids: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.cleanup.as_ref().is_some_and(|c| c.epilog.is_empty()))
            .map(|j| j.id)
            .collect();
        for id in ids {
            self.try_complete(id, fx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctld::testutil::{ALICE, ended_msg, names, spec, start_on, two_nodes};
    use crate::model::JobState;
    use crate::model::step::{StepSpec, StepUsage};
    use crate::proto::{EndKind, FromAgent, StepdEvent};

    /// Nodes n1, n2 (2 CPUs each) with an Epilog; both agents report epilogs.
    fn cluster() -> Cluster {
        let mut c = two_nodes("Epilog = \"/e\"");
        for n in &c.nodes {
            c.epilog_reporters.insert(n.name.clone());
        }
        c
    }

    /// A running job on both nodes.
    fn start(c: &mut Cluster) -> u32 {
        start_on(c, 2, &mut Effects::default())
    }

    fn ended(id: u32) -> FromAgent {
        ended_msg(id, EndKind::Exited, 0, 30)
    }

    fn completing(c: &Cluster) -> Vec<u32> {
        c.nodes.iter().map(|n| n.completing_jobs).collect()
    }

    #[test]
    fn an_ended_job_stays_completing_until_every_epilog_reports() {
        let mut c = cluster();
        let id = start(&mut c);
        let mut fx = Effects::default();
        c.from_agent("n1", ended(id), 30, &mut fx);
        let j = &c.jobs[&id];
        // The end is recorded (sacct's state), the job is COMPLETING (squeue CG).
        assert_eq!((j.state, j.completing), (JobState::Completed, true));
        assert_eq!(j.state_compact(), "CG");
        assert!(j.is_active());
        assert!(fx.persist.last().is_some_and(|p| p.cleanup.is_some()));
        assert_eq!(completing(&c), [1, 1]);
        assert_eq!(c.nodes[0].state_compact(), "comp");
        assert!(c.nodes[0].alloc_cpus > 0);
        assert_eq!(c.sanity_check(), Ok(()));
        let mut fx = Effects::default();
        c.from_agent("n2", FromAgent::EpilogComplete { job_id: id }, 31, &mut fx);
        assert!(c.jobs[&id].completing);
        // A report from a node that is not waited for changes nothing.
        c.from_agent("n2", FromAgent::EpilogComplete { job_id: id }, 31, &mut fx);
        assert!(c.jobs[&id].completing);
        c.from_agent("n1", FromAgent::EpilogComplete { job_id: id }, 32, &mut fx);
        let j = &c.jobs[&id];
        assert_eq!(
            (j.state, j.completing, j.cleanup.is_some()),
            (JobState::Completed, false, false)
        );
        assert!(!j.is_active());
        assert!(fx.schedule);
        assert_eq!(completing(&c), [0, 0]);
        assert_eq!((c.nodes[0].alloc_cpus, c.nodes[1].alloc_cpus), (0, 0));
        assert_eq!(c.nodes[0].state_compact(), "idle");
        assert_eq!(c.sanity_check(), Ok(()));
    }

    #[test]
    fn nodes_that_do_not_report_or_go_away_are_not_waited_for() {
        // An agent of an older install (no EpilogComplete): n2 is not waited for.
        let mut c = cluster();
        c.epilog_reporters.remove("n2");
        let id = start(&mut c);
        let mut fx = Effects::default();
        c.from_agent("n1", ended(id), 30, &mut fx);
        assert_eq!(c.jobs[&id].cleanup.as_ref().unwrap().epilog, ["n1"]);
        // n1's agent starts afresh: its epilog run is lost, the job is over.
        c.cleanup_lost_on("n1", &mut fx);
        assert!(!c.jobs[&id].completing);
        assert_eq!(completing(&c), [0, 0]);
        // Set DOWN while the epilog runs: the same.
        let mut c = cluster();
        let id = start(&mut c);
        let mut fx = Effects::default();
        c.from_agent("n1", ended(id), 30, &mut fx);
        c.from_agent("n2", FromAgent::EpilogComplete { job_id: id }, 31, &mut fx);
        assert!(c.nodes_failed(&["n1".to_string()], 40, &mut fx).is_empty());
        let j = &c.jobs[&id];
        assert_eq!((j.state, j.completing), (JobState::Completed, false));
        assert_eq!(c.sanity_check(), Ok(()));
    }

    #[test]
    fn a_step_still_running_at_the_end_is_waited_for_with_its_usage() {
        let cfg = crate::config::Config::from_toml(
            "[[nodes]]\nname = \"n1\"\ncpus = 2\nmemory = 1000\n",
            std::path::Path::new("/x/sluice.toml"),
        )
        .unwrap();
        let mut c = Cluster::new(&cfg, 999);
        c.nodes[0].state = NodeState::Up;
        let j = c.resolve(spec("j"), ALICE, 10, &names).unwrap();
        let id = c.submit(j, &mut Effects::default());
        let mut fx = Effects::default();
        c.schedule(10, &mut fx);
        let step = StepSpec {
            argv: vec!["sleep".into()],
            ntasks: Some(1),
            ..StepSpec::default()
        };
        c.step_launch(id, vec![step], ALICE, 7, 11, &mut fx);
        // The batch script ends first (no epilog configured): the step still runs.
        c.from_agent("n1", ended(id), 30, &mut fx);
        assert_eq!(c.jobs[&id].state, JobState::Completed);
        assert!(c.jobs[&id].completing);
        // Its final usage arrives with its end; then the job is over.
        let usage = StepUsage {
            ntasks: 1,
            max_rss_kib: 204_800,
            ..Default::default()
        };
        let done = FromAgent::Step {
            job_id: id,
            step_id: 0,
            event: StepdEvent::Done { usage },
            seq: 0,
        };
        let mut fx = Effects::default();
        c.from_agent("n1", done, 31, &mut fx);
        let j = &c.jobs[&id];
        assert!(!j.completing);
        let rec = j.steps.iter().find(|s| s.id == "0").unwrap();
        assert_eq!(rec.max_rss_kib, 204_800);
        // The record that says the job is over carries the step's usage.
        let last = fx.persist.last().unwrap();
        assert!(!last.completing);
        assert_eq!(
            last.steps.iter().find(|s| s.id == "0").unwrap().max_rss_kib,
            204_800
        );
        assert_eq!(c.nodes[0].alloc_cpus, 0);
    }
}
