//! GPUs used outside sluice, and sick GPUs (issue 24): each agent reports which of its GPUs run
//! compute processes of no sluice job ([`FromAgent::GpuState`](crate::proto::FromAgent));
//! the controller records them on the node and applies the node's `gpu_foreign` policy:
//!
//! - `avoid` (default): the scheduler's input withholds those GPUs
//!   ([`crate::model::Node::withheld_gres`]); a job that would start were they free
//!   pends with `Resources (gpu 1 in use by pid 4242, user bob)` instead of plain
//!   `Resources` ([`Cluster::gpu_busy_reasons`]).
//! - `ignore`: Slurm's behaviour; the busy GPUs are only shown.
//! - `drain`: the node drains with the first busy GPU as its reason (set by the
//!   controller's user), and is resumed when the agent reports its GPUs free, unless
//!   someone changed the reason since. A node drained for another reason stays so.
//!
//! Unhealthy GPUs (the agent's [`GpuFault`]s: uncorrectable ECC errors, retired pages)
//! are withheld under every policy, and their text (`gpu 3: 2 uncorrectable ECC
//! errors`) becomes the node's reason while nobody else gave one; a GPU that fell off
//! the bus drains the node (`gpu 3: fell off the bus`) until the agent sees it again.
//!
//! Slurm has none of this; `scontrol show node` shows the busy and failed GPUs on a
//! line of its own (`GpusBusy= GpusFailed= GpuForeign=`), printed only when there are
//! some.

use super::Cluster;
use crate::model::node::{BusyGpu, GpuFault, GpuForeign};
use crate::model::{Job, JobState, Reason};
use crate::sched::{self, Decision};
use std::collections::HashMap;

impl Cluster {
    /// Records the GPUs `node`'s agent found busy (`busy`) and unhealthy (`faults`),
    /// possibly none, at `now` (epoch seconds), and applies the node's policy; asks for
    /// a scheduling pass when anything changed.
    pub fn gpu_state_reported(
        &mut self,
        node: &str,
        busy: Vec<BusyGpu>,
        faults: Vec<GpuFault>,
        now: i64,
        fx: &mut super::Effects,
    ) {
        let owner = self.owner_uid;
        let Some(n) = self.node_mut(node) else {
            return;
        };
        if n.gpu_busy != busy || n.gpu_faults != faults {
            for f in faults.iter().filter(|f| !n.gpu_faults.contains(f)) {
                tracing::warn!(node, "{}", f.reason);
            }
            match busy.first() {
                Some(b) => tracing::info!(node, "{}", b.text()),
                None => tracing::info!(node, "no GPU in use outside sluice jobs"),
            }
            fx.schedule = true;
        }
        n.gpu_busy = busy;
        n.gpu_faults = faults;
        // The node drains for a GPU that fell off the bus, or (policy drain) for a busy
        // GPU; our drain is lifted when the cause is gone.
        let drain_for = n
            .gpu_faults
            .iter()
            .find(|f| f.lost)
            .map(|f| f.reason.clone())
            .or_else(|| {
                (n.gpu_foreign == GpuForeign::Drain)
                    .then(|| n.gpu_busy.first().map(BusyGpu::text))
                    .flatten()
            });
        match drain_for {
            Some(text) => {
                if !n.drain && !n.fail {
                    n.drain = true;
                    n.gpu_drained = true;
                    n.reason = Some(text);
                    n.reason_uid = Some(owner);
                    n.reason_time = Some(now);
                } else if n.gpu_drained && n.reason.as_deref() != Some(text.as_str()) {
                    // Still ours: follow the GPU that keeps it drained.
                    n.reason = Some(text);
                    n.reason_time = Some(now);
                }
                return;
            }
            None if n.gpu_drained => {
                n.gpu_drained = false;
                let ours = n.reason.as_deref().is_some_and(|r| r.starts_with("gpu "));
                if n.drain && ours {
                    n.drain = false;
                    n.reason = None;
                    n.reason_uid = None;
                    n.reason_time = None;
                    fx.schedule = true;
                }
            }
            None => {}
        }
        // Other faults withhold their GPU only; their text is the node's reason (shown
        // by `scontrol show node`) while nobody else gave one, and goes with them.
        let ours = !n.drain && n.reason.as_deref().is_some_and(is_fault_text);
        if n.gpu_faults.is_empty() {
            if ours {
                n.reason = None;
                n.reason_uid = None;
                n.reason_time = None;
            }
            return;
        }
        let text = n
            .gpu_faults
            .iter()
            .map(|f| f.reason.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        if (n.reason.is_none() || ours) && n.reason.as_deref() != Some(text.as_str()) {
            n.reason = Some(text);
            n.reason_uid = Some(owner);
            n.reason_time = Some(now);
        }
    }

    /// For the jobs that `out` (a pass over `jobs`, the active jobs, at `now`) leaves
    /// pending for `Resources` but that a pass with the withheld busy GPUs given back
    /// starts: the reason text naming the busy GPUs the job would have got
    /// (`Resources (gpu 1 in use by pid 4242, user bob)`). Empty, at no cost, when no
    /// GPU is withheld.
    pub(super) fn gpu_busy_reasons(
        &self,
        jobs: &[&Job],
        out: &sched::Outcome,
        now: i64,
    ) -> HashMap<u32, String> {
        let mut reasons = HashMap::new();
        if self.nodes.iter().all(|n| n.withheld_gres().is_empty()) {
            return reasons;
        }
        let waiting: Vec<u32> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Pending { job_id, reason } if *reason == Reason::Resources => {
                    Some(*job_id)
                }
                _ => None,
            })
            .collect();
        if waiting.is_empty() {
            return reasons;
        }
        let freed: Vec<crate::model::Node> = self
            .nodes
            .iter()
            .map(|n| {
                let mut n = n.clone();
                n.gpu_busy.clear();
                n.gpu_faults.clear();
                n
            })
            .collect();
        let jobs: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|j| j.state != JobState::Pending || waiting.contains(&j.id))
            .collect();
        let what_if = sched::run(&sched::Input {
            jobs: &jobs,
            nodes: &freed,
            partitions: &self.partitions,
            licenses: &self.licenses,
            config: &self.sched_cfg,
            now,
            backfill: false,
            limits: self.limits_policy(),
            reservations: &self.resv.list,
        });
        for d in &what_if.decisions {
            let Decision::Start { job_id, alloc, .. } = d else {
                continue;
            };
            if !waiting.contains(job_id) {
                continue;
            }
            let mut texts = Vec::new();
            for (name, gres) in alloc.nodes.iter().zip(&alloc.gres) {
                let Some(n) = self.nodes.iter().find(|n| &n.name == name) else {
                    continue;
                };
                texts.extend(gres.iter().filter_map(|g| n.withheld_why(g.slot as usize)));
            }
            if !texts.is_empty() {
                reasons.insert(*job_id, format!("Resources ({})", texts.join("; ")));
            }
        }
        reasons
    }
}

/// Whether a node reason is a GPU fault's text (`gpu 3: …`, as [`GpuFault::reason`]),
/// not a busy GPU's (`gpu 3 in use by …`).
fn is_fault_text(r: &str) -> bool {
    r.strip_prefix("gpu ")
        .and_then(|t| t.split_once(": "))
        .is_some_and(|(i, _)| i.parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests {
    use crate::ctld::state::Effects;
    use crate::ctld::testutil::{ALICE, pass, spec, submit};
    use crate::model::node::{BusyGpu, GpuFault, GpuForeign};
    use crate::model::{JobState, NodeState, Reason};

    fn busy(index: u32) -> Vec<BusyGpu> {
        vec![BusyGpu {
            index,
            pid: 4242,
            user: Some("bob".into()),
        }]
    }

    fn two_gpu_cluster(policy: GpuForeign) -> super::Cluster {
        let cfg = crate::config::Config::from_toml(
            r#"
[[nodes]]
name = "n1"
cpus = 4
memory = 1000
gres = "gpu:2"
[[partitions]]
name = "p"
nodes = "n1"
default = true
"#,
            std::path::Path::new("/x/sluice.toml"),
        )
        .unwrap();
        let mut c = super::Cluster::new(&cfg, 0);
        c.nodes[0].state = NodeState::Up;
        c.nodes[0].gpu_foreign = policy;
        c
    }

    fn submit_gpus(c: &mut super::Cluster, n: u32) -> u32 {
        let mut s = spec("g");
        s.gres = crate::model::gres::parse_gres_list(&format!("gpu:{n}")).unwrap();
        let id = submit(c, s, ALICE, 10);
        pass(c, 10);
        id
    }

    #[test]
    fn avoid_withholds_the_busy_gpu_and_says_why() {
        let mut c = two_gpu_cluster(GpuForeign::Avoid);
        let mut fx = Effects::default();
        c.gpu_state_reported("n1", busy(1), Vec::new(), 5, &mut fx);
        assert!(fx.schedule);
        assert_eq!(c.nodes[0].withheld_gres(), vec![1]);
        let two = submit_gpus(&mut c, 2);
        let j = &c.jobs[&two];
        assert_eq!(j.state, JobState::Pending);
        assert_eq!(
            j.reason,
            Reason::Other("Resources (gpu 1 in use by pid 4242, user bob)".into())
        );
        // One GPU still fits, on GPU 0.
        let one = submit_gpus(&mut c, 1);
        let j = &c.jobs[&one];
        assert_eq!(j.state, JobState::Running);
        assert_eq!(j.alloc.as_ref().unwrap().gres[0][0].index, 0);
        // The process ends: the GPU returns; the first job still waits for GPU 0.
        let mut fx = Effects::default();
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 6, &mut fx);
        assert!(fx.schedule);
        pass(&mut c, 11);
        assert_eq!(c.jobs[&two].reason, Reason::Resources);
    }

    #[test]
    fn ignore_allocates_busy_gpus() {
        let mut c = two_gpu_cluster(GpuForeign::Ignore);
        let mut fx = Effects::default();
        c.gpu_state_reported("n1", busy(1), Vec::new(), 5, &mut fx);
        assert!(c.nodes[0].withheld_gres().is_empty());
        let id = submit_gpus(&mut c, 2);
        assert_eq!(c.jobs[&id].state, JobState::Running);
        assert_eq!(c.nodes[0].gpu_busy, busy(1), "still shown");
    }

    #[test]
    fn drain_drains_and_resumes_only_its_own_drain() {
        let mut c = two_gpu_cluster(GpuForeign::Drain);
        let mut fx = Effects::default();
        c.gpu_state_reported("n1", busy(1), Vec::new(), 5, &mut fx);
        let n = &c.nodes[0];
        assert!(n.drain);
        assert_eq!(
            n.reason.as_deref(),
            Some("gpu 1 in use by pid 4242, user bob")
        );
        assert_eq!((n.reason_uid, n.reason_time), (Some(0), Some(5)));
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 6, &mut fx);
        assert!(!c.nodes[0].drain);
        assert_eq!(c.nodes[0].reason, None);
        // An admin's drain is left alone, busy GPU or not.
        c.nodes[0].drain = true;
        c.nodes[0].reason = Some("maintenance".into());
        c.gpu_state_reported("n1", busy(0), Vec::new(), 7, &mut fx);
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 8, &mut fx);
        assert!(c.nodes[0].drain);
        assert_eq!(c.nodes[0].reason.as_deref(), Some("maintenance"));
    }

    fn fault(index: u32, reason: &str, lost: bool) -> Vec<GpuFault> {
        vec![GpuFault {
            index,
            reason: reason.into(),
            lost,
        }]
    }

    #[test]
    fn an_unhealthy_gpu_is_withheld_under_any_policy_and_named() {
        let mut c = two_gpu_cluster(GpuForeign::Ignore);
        let mut fx = Effects::default();
        let ecc = fault(1, "gpu 1: 2 uncorrectable ECC errors", false);
        c.gpu_state_reported("n1", Vec::new(), ecc.clone(), 5, &mut fx);
        assert!(fx.schedule);
        let n = &c.nodes[0];
        assert!(!n.drain, "only the GPU is out");
        assert_eq!(n.withheld_gres(), vec![1]);
        assert_eq!(
            n.reason.as_deref(),
            Some("gpu 1: 2 uncorrectable ECC errors")
        );
        let two = submit_gpus(&mut c, 2);
        assert_eq!(
            c.jobs[&two].reason,
            Reason::Other("Resources (gpu 1: 2 uncorrectable ECC errors)".into())
        );
        // The errors are gone (a driver reload): the GPU and the node's reason go back.
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 6, &mut fx);
        assert_eq!(c.nodes[0].reason, None);
        pass(&mut c, 11);
        assert_eq!(c.jobs[&two].state, JobState::Running);
        // An admin's reason is never replaced.
        c.nodes[0].reason = Some("flaky fan".into());
        c.gpu_state_reported("n1", Vec::new(), ecc, 7, &mut fx);
        assert_eq!(c.nodes[0].reason.as_deref(), Some("flaky fan"));
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 8, &mut fx);
        assert_eq!(c.nodes[0].reason.as_deref(), Some("flaky fan"));
    }

    #[test]
    fn a_gpu_off_the_bus_drains_the_node_until_it_is_back() {
        let mut c = two_gpu_cluster(GpuForeign::Avoid);
        let mut fx = Effects::default();
        let lost = fault(0, "gpu 0: fell off the bus", true);
        c.gpu_state_reported("n1", Vec::new(), lost, 5, &mut fx);
        let n = &c.nodes[0];
        assert!(n.drain);
        assert_eq!(n.reason.as_deref(), Some("gpu 0: fell off the bus"));
        c.gpu_state_reported("n1", Vec::new(), Vec::new(), 6, &mut fx);
        assert!(!c.nodes[0].drain);
        assert_eq!(c.nodes[0].reason, None);
        assert!(super::is_fault_text("gpu 12: 1 retired page"));
        assert!(!super::is_fault_text("gpu 1 in use by pid 4242, user bob"));
        assert!(!super::is_fault_text("gpu x: y"));
    }
}
