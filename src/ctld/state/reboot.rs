//! `scontrol reboot` and `scontrol cancel_reboot` (cf. slurmctld `_slurm_rpc_reboot_nodes`
//! and the reboot handling of `node_mgr.c` / `ping_nodes.c` in Slurm 22.05).
//!
//! A requested reboot (REBOOT_REQUESTED) keeps new jobs off the node; `ASAP` also
//! drains it. Once the node has no jobs the controller tells its agent to run
//! RebootProgram and the reboot is issued (REBOOT_ISSUED). It is complete when the
//! node's agent registers again after that (its agent start time, and normally its
//! boot time, are then newer than the issue): the node returns to service, or stays
//! DOWN for `nextstate=DOWN`. A node that does not register within ResumeTimeout is
//! set DOWN "reboot timed out".

use super::{Caller, Cluster, Effects};
use crate::config::Config;
use crate::model::NodeState;
use crate::model::node::Reboot;
use crate::proto::{SlurmError, ToAgent};

/// Reason Slurm gives a node drained by `scontrol reboot ASAP` without a reason.
const ASAP_REASON: &str = "Reboot ASAP";
/// Reason of a node that did not come back within ResumeTimeout.
const TIMED_OUT: &str = "reboot timed out";
/// Reason of a `nextstate=DOWN` node rebooted without a reason given.
const DOWN_AFTER: &str = "reboot complete";

/// The configuration the reboot path needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebootConf {
    /// RebootProgram, run by the node's agent through `sh -c`; `None`: refused.
    pub program: Option<String>,
    /// ResumeTimeout, seconds.
    pub resume_timeout: u32,
}

impl RebootConf {
    /// From the loaded configuration.
    pub fn from_config(cfg: &Config) -> RebootConf {
        RebootConf {
            program: cfg.reboot_program.clone(),
            resume_timeout: cfg.resume_timeout,
        }
    }
}

/// What `scontrol reboot` asks besides the nodes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RebootAsk<'a> {
    /// `ASAP`: drain the nodes until they reboot.
    pub asap: bool,
    /// `nextstate=DOWN`.
    pub next_down: bool,
    /// `reason=` (`Reboot ASAP` for ASAP without one).
    pub reason: Option<&'a str>,
}

/// `scontrol show config` lines: `RebootProgram` (`(null)` when unset) and
/// `ResumeTimeout` (`60 sec`).
pub fn config_entries(cfg: &Config) -> Vec<(String, String)> {
    vec![
        (
            "RebootProgram".into(),
            cfg.reboot_program
                .clone()
                .unwrap_or_else(|| "(null)".into()),
        ),
        (
            "ResumeTimeout".into(),
            format!("{} sec", cfg.resume_timeout),
        ),
    ]
}

impl Cluster {
    /// Names `nodes` stands for (empty: every node). Errors: an unknown name.
    fn reboot_targets(&self, nodes: &[String]) -> Result<Vec<String>, SlurmError> {
        if nodes.is_empty() {
            return Ok(self.nodes.iter().map(|n| n.name.clone()).collect());
        }
        for name in nodes {
            if !self.nodes.iter().any(|n| &n.name == name) {
                return Err(SlurmError::InvalidNodeName);
            }
        }
        Ok(nodes.to_vec())
    }

    /// `scontrol reboot`: marks `nodes` (empty: all) to be rebooted; those already
    /// idle are issued at once.
    ///
    /// Errors: not an operator; no RebootProgram (`RebootProgram isn't defined`); an
    /// unknown node name. Nothing changes on error.
    pub fn request_reboot(
        &mut self,
        nodes: &[String],
        ask: RebootAsk,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let RebootAsk {
            asap,
            next_down,
            reason,
        } = ask;
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        if self.reboot.program.is_none() {
            return Err(SlurmError::Other("RebootProgram isn't defined".into()));
        }
        let targets = self.reboot_targets(nodes)?;
        for name in &targets {
            let n = self.node_mut(name).expect("checked above");
            // A reboot already issued goes on as it is.
            if n.reboot.as_ref().is_some_and(|r| r.issued.is_some()) {
                continue;
            }
            let why = reason
                .filter(|r| !r.is_empty())
                .or(asap.then_some(ASAP_REASON));
            n.reboot = Some(Reboot {
                issued: None,
                next_down,
                asap,
                reason: why.map(str::to_string),
            });
            if asap {
                n.drain = true;
            }
            if let Some(why) = why {
                n.reason = Some(why.to_string());
                n.reason_uid = Some(c.uid);
                n.reason_time = Some(now);
            }
            tracing::info!(node = %name, asap, next_down, "reboot requested");
        }
        self.reboot_tick(now, fx);
        Ok(())
    }

    /// `scontrol cancel_reboot`: forgets the reboots of `nodes` not yet issued (an
    /// `ASAP` drain is lifted with them). Errors: not an operator; an unknown node.
    pub fn cancel_reboot(&mut self, nodes: &[String], c: Caller) -> Result<(), SlurmError> {
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        let targets = self.reboot_targets(nodes)?;
        for name in &targets {
            let n = self.node_mut(name).expect("checked above");
            match &n.reboot {
                Some(r) if r.issued.is_none() => {
                    if r.asap {
                        n.drain = false;
                    }
                    n.reboot = None;
                    n.reason = None;
                    n.reason_uid = None;
                    n.reason_time = None;
                    tracing::info!(node = %name, "reboot cancelled");
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Issues the reboots of nodes that have become free, and sets DOWN the nodes that
    /// did not come back within ResumeTimeout.
    pub fn reboot_tick(&mut self, now: i64, fx: &mut Effects) {
        let timeout = i64::from(self.reboot.resume_timeout);
        let program = self.reboot.program.clone();
        for n in &mut self.nodes {
            let Some(r) = &mut n.reboot else { continue };
            match r.issued {
                None => {
                    let free = n.alloc_cpus == 0
                        && n.running_jobs == 0
                        && n.completing_jobs == 0
                        && !n.not_responding
                        && n.state != NodeState::Unknown;
                    if let (true, Some(p)) = (free, &program) {
                        r.issued = Some(now);
                        tracing::info!(node = %n.name, "reboot issued");
                        fx.to_agent
                            .push((n.name.clone(), ToAgent::Reboot { program: p.clone() }));
                    }
                }
                Some(at) if now - at >= timeout => {
                    tracing::warn!(node = %n.name, "reboot timed out; set DOWN");
                    n.reboot = None;
                    n.state = NodeState::Down;
                    n.reason = Some(TIMED_OUT.into());
                    n.reason_uid = Some(self.owner_uid);
                    n.reason_time = Some(now);
                }
                Some(_) => {}
            }
        }
    }

    /// The agent of `node` registered: an issued reboot is complete (the agent start
    /// time it reported is newer than the issue). The node returns to service, or
    /// stays DOWN for `nextstate=DOWN`.
    pub(super) fn reboot_registered(&mut self, node: &str, now: i64) {
        let owner = self.owner_uid;
        let Some(n) = self.node_mut(node) else { return };
        let Some(r) = n.reboot.clone() else { return };
        let Some(issued) = r.issued else { return };
        let newer = n.agent_start_time.is_some_and(|t| t >= issued)
            || n.boot_time.is_some_and(|b| b > issued);
        if !newer {
            return;
        }
        tracing::info!(node, "reboot complete");
        n.reboot = None;
        if r.asap {
            n.drain = false;
        }
        if r.next_down {
            // The reason given with the request, whatever the node's link set
            // meanwhile (so that the return of its agent does not resume it).
            n.state = NodeState::Down;
            n.reason = Some(r.reason.unwrap_or_else(|| DOWN_AFTER.into()));
            n.reason_uid = Some(owner);
            n.reason_time = Some(now);
        } else {
            n.state = NodeState::Up;
            n.reason = None;
            n.reason_uid = None;
            n.reason_time = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctld::testutil::{ALICE, cluster_with, end, pass, spec, submit};

    const ROOT: Caller = Caller { uid: 0, gid: 0 };

    fn ask(asap: bool, next_down: bool, reason: Option<&str>) -> RebootAsk<'_> {
        RebootAsk {
            asap,
            next_down,
            reason,
        }
    }

    fn reboots(fx: &Effects) -> Vec<(String, String)> {
        fx.to_agent
            .iter()
            .filter_map(|(n, m)| match m {
                ToAgent::Reboot { program } => Some((n.clone(), program.clone())),
                _ => None,
            })
            .collect()
    }

    fn with_program() -> Cluster {
        cluster_with(4, "reboot_program = \"/sbin/reboot\"\nresume_timeout = 30")
    }

    #[test]
    fn refused_without_program_or_operator_and_unknown_nodes() {
        let mut fx = Effects::default();
        let mut c = cluster_with(4, "");
        assert_eq!(
            c.request_reboot(&[], ask(false, false, None), ROOT, 5, &mut fx),
            Err(SlurmError::Other("RebootProgram isn't defined".into()))
        );
        let mut c = with_program();
        assert_eq!(
            c.request_reboot(&[], ask(false, false, None), ALICE, 5, &mut fx),
            Err(SlurmError::AccessDenied)
        );
        assert_eq!(c.cancel_reboot(&[], ALICE), Err(SlurmError::AccessDenied));
        assert_eq!(
            c.request_reboot(&["nx".into()], ask(false, false, None), ROOT, 5, &mut fx),
            Err(SlurmError::InvalidNodeName)
        );
        assert!(c.nodes[0].reboot.is_none() && fx.to_agent.is_empty());
        let show = |c: &Cluster, k: &str| {
            c.config_entries
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(show(&c, "RebootProgram").as_deref(), Some("/sbin/reboot"));
        assert_eq!(show(&c, "ResumeTimeout").as_deref(), Some("30 sec"));
        let c = cluster_with(4, "");
        assert_eq!(show(&c, "RebootProgram").as_deref(), Some("(null)"));
        assert_eq!(show(&c, "ResumeTimeout").as_deref(), Some("60 sec"));
    }

    #[test]
    fn asap_drains_waits_for_the_job_then_issues_and_completes() {
        let mut c = with_program();
        let id = submit(&mut c, spec("a"), ALICE, 1);
        assert_eq!(pass(&mut c, 1), vec![id]);
        let mut fx = Effects::default();
        c.request_reboot(&["n1".into()], ask(true, false, None), ROOT, 2, &mut fx)
            .unwrap();
        assert!(reboots(&fx).is_empty(), "not while the job runs");
        let n = &c.nodes[0];
        assert_eq!(n.state_long(), "draining@");
        assert_eq!(n.reason.as_deref(), Some(ASAP_REASON));
        // No new job starts there meanwhile.
        let later = submit(&mut c, spec("b"), ALICE, 3);
        assert!(pass(&mut c, 3).is_empty());
        end(&mut c, id, 0, 4);
        let mut fx = Effects::default();
        c.reboot_tick(5, &mut fx);
        assert_eq!(reboots(&fx), vec![("n1".into(), "/sbin/reboot".into())]);
        assert_eq!(c.nodes[0].state_long(), "reboot^");
        assert_eq!(c.nodes[0].state_scontrol(), "IDLE+DRAIN+REBOOT_ISSUED");
        // Issued once only.
        let mut fx = Effects::default();
        c.reboot_tick(6, &mut fx);
        assert!(reboots(&fx).is_empty());
        // The agent registers again after the issue: back in service, drain lifted.
        c.nodes[0].agent_start_time = Some(9);
        c.reboot_registered("n1", 9);
        let n = &c.nodes[0];
        assert_eq!((n.state_long(), n.reason.clone()), ("idle".into(), None));
        assert_eq!(pass(&mut c, 10), vec![later]);
    }

    #[test]
    fn next_state_down_keeps_the_node_down_with_the_reason() {
        let mut c = with_program();
        let mut fx = Effects::default();
        c.request_reboot(&[], ask(false, true, Some("new kernel")), ROOT, 2, &mut fx)
            .unwrap();
        assert_eq!(reboots(&fx).len(), 1, "an idle node is issued at once");
        assert_eq!(c.nodes[0].next_state(), Some("DOWN"));
        c.nodes[0].agent_start_time = Some(4);
        c.reboot_registered("n1", 4);
        let n = &c.nodes[0];
        assert_eq!(n.state, NodeState::Down);
        assert_eq!(n.reason.as_deref(), Some("new kernel"));
        assert!(n.reboot.is_none());
    }

    #[test]
    fn a_node_that_does_not_come_back_goes_down_after_resume_timeout() {
        let mut c = with_program();
        let mut fx = Effects::default();
        c.request_reboot(&[], ask(false, false, None), ROOT, 100, &mut fx)
            .unwrap();
        c.reboot_tick(129, &mut fx);
        assert_eq!(c.nodes[0].state_long(), "reboot^");
        c.reboot_tick(130, &mut fx);
        let n = &c.nodes[0];
        assert_eq!(n.state, NodeState::Down);
        assert_eq!(n.reason.as_deref(), Some(TIMED_OUT));
        assert!(n.reboot.is_none());
    }

    #[test]
    fn cancel_clears_a_request_not_yet_issued_only() {
        let mut c = with_program();
        let id = submit(&mut c, spec("a"), ALICE, 1);
        assert_eq!(pass(&mut c, 1), vec![id]);
        let mut fx = Effects::default();
        c.request_reboot(&[], ask(true, false, Some("fw")), ROOT, 2, &mut fx)
            .unwrap();
        assert_eq!(c.nodes[0].state_scontrol(), "MIXED+DRAIN+REBOOT_REQUESTED");
        c.cancel_reboot(&["n1".into()], ROOT).unwrap();
        let n = &c.nodes[0];
        assert_eq!((n.state_long(), n.reason.clone()), ("mixed".into(), None));
        end(&mut c, id, 0, 3);
        c.request_reboot(&[], ask(false, false, None), ROOT, 4, &mut fx)
            .unwrap();
        c.cancel_reboot(&[], ROOT).unwrap();
        assert_eq!(
            c.nodes[0].state_long(),
            "reboot^",
            "an issued reboot goes on"
        );
    }
}
