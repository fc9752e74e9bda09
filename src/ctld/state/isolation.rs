//! Degraded isolation shown on the node (issue 5): when a node's stepds cannot use
//! cgroups (no writable hierarchy, or disabled), its agent says so after registering,
//! and the node carries a reason, `Isolation degraded: …`, set by the controller's
//! user at that time, so that `scontrol show node` and `sinfo -R` show it. The node's
//! state is not changed: jobs still run there, tracked by process group. A reason an
//! admin (or node health) set is never replaced; ours is cleared when the node reports
//! full isolation again.

use super::Cluster;

/// The prefix of the reason this module sets.
pub const DEGRADED_PREFIX: &str = "Isolation degraded: ";

impl Cluster {
    /// Records what `node`'s agent reported: `backend` in use and, when isolation is
    /// degraded, why (`None`: full isolation). `now`: epoch seconds.
    pub fn isolation_reported(
        &mut self,
        node: &str,
        backend: &str,
        degraded: Option<String>,
        now: i64,
    ) {
        let owner = self.owner_uid;
        let Some(n) = self.nodes.iter_mut().find(|n| n.name == node) else {
            return;
        };
        let ours = n
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(DEGRADED_PREFIX));
        match &degraded {
            Some(why) => {
                tracing::warn!(node, backend, "isolation degraded: {why}");
                if n.reason.is_none() || ours {
                    n.reason = Some(format!("{DEGRADED_PREFIX}{why}"));
                    n.reason_uid = Some(owner);
                    n.reason_time = Some(now);
                }
            }
            None if ours => {
                n.reason = None;
                n.reason_uid = None;
                n.reason_time = None;
            }
            None => {}
        }
        n.isolation_degraded = degraded;
    }
}
