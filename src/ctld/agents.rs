//! Links to remote node agents and node health (cf. slurmctld's ping_nodes.c and the
//! node part of node_mgr.c: SlurmdTimeout, NOT_RESPONDING, ReturnToService=1).
//!
//! Each remote node (one with `ssh` in the config) gets one task that connects through
//! SSH (`transport::ssh`), runs the shared `agent_link` over the channel, and reconnects
//! with exponential backoff when the link fails or ends. A node whose link cannot be
//! brought up is DOWN and NOT_RESPONDING with the error as its reason; a node silent for
//! longer than SlurmdTimeout is DOWN "Not responding". A node set DOWN this way returns
//! to service when its agent registers again, unless an admin has changed its state or
//! reason meanwhile (Slurm's ReturnToService=1).
//!
//! [`Health`] is the bookkeeping part: it takes `now` and the node table and performs
//! no I/O, so it is tested directly.

use super::Msg;
use crate::model::{Node, NodeState};
use crate::proto::Framed;
use crate::transport::ssh::{self, LinkSpec};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The reason Slurm gives a node it set DOWN for silence.
pub const NOT_RESPONDING: &str = "Not responding";

/// A link that stayed up this long resets the reconnect backoff.
const STABLE_LINK: Duration = Duration::from_secs(30);

/// Per-node liveness: when each node was last heard from, and which DOWN reasons were
/// set here (so that only those are cleared when the node comes back).
#[derive(Debug)]
pub struct Health {
    /// SlurmdTimeout, seconds.
    timeout: i64,
    last_heard: HashMap<String, i64>,
    /// Node → the reason this module set when it marked the node DOWN.
    auto_down: HashMap<String, String>,
    /// Nodes whose silence was already reported (until heard from again).
    silent: std::collections::HashSet<String>,
    /// uid recorded as the setter of automatic reasons (the controller's own).
    owner_uid: u32,
}

impl Health {
    /// Tracks `nodes` from `now` (a node never heard from times out `timeout` seconds
    /// after the controller started, as in Slurm).
    pub fn new(nodes: &[Node], timeout_secs: u32, owner_uid: u32, now: i64) -> Health {
        Health {
            timeout: i64::from(timeout_secs.max(1)),
            last_heard: nodes.iter().map(|n| (n.name.clone(), now)).collect(),
            auto_down: HashMap::new(),
            silent: Default::default(),
            owner_uid,
        }
    }

    /// Sets a node DOWN + NOT_RESPONDING with `reason`, unless an admin already set it
    /// DOWN for a reason of their own (then only NOT_RESPONDING is set).
    fn mark_down(&mut self, nodes: &mut [Node], node: &str, reason: &str, now: i64) {
        let Some(n) = nodes.iter_mut().find(|n| n.name == node) else {
            return;
        };
        n.not_responding = true;
        let ours = self.auto_down.get(node);
        let admin_down = n.state == NodeState::Down && n.reason.as_ref() != ours;
        if admin_down || n.reason.as_deref() == Some(reason) {
            return;
        }
        n.state = NodeState::Down;
        n.reason = Some(reason.to_string());
        n.reason_uid = Some(self.owner_uid);
        n.reason_time = Some(now);
        self.auto_down.insert(node.to_string(), reason.to_string());
    }

    /// Any message from the node's agent: it is alive. Returns true when a node this
    /// module had set DOWN for silence came back (on a link that was kept).
    pub fn heard(&mut self, nodes: &mut [Node], node: &str, now: i64) -> bool {
        self.last_heard.insert(node.to_string(), now);
        if self.silent.remove(node) {
            self.restore(nodes, node);
            return true;
        }
        false
    }

    /// The node's link could not be brought up (or failed before registration).
    pub fn link_failed(&mut self, nodes: &mut [Node], node: &str, reason: &str, now: i64) {
        self.mark_down(nodes, node, reason, now);
    }

    /// The node's agent registered: clear what this module set, so it returns to service.
    pub fn registered(&mut self, nodes: &mut [Node], node: &str, now: i64) {
        self.last_heard.insert(node.to_string(), now);
        self.silent.remove(node);
        self.restore(nodes, node);
    }

    fn restore(&mut self, nodes: &mut [Node], node: &str) {
        let Some(n) = nodes.iter_mut().find(|n| n.name == node) else {
            return;
        };
        n.not_responding = false;
        let ours = self.auto_down.remove(node);
        // Down for our reason, or resumed by an admin while it did not respond (Resume
        // clears the reason but keeps a non-responding node DOWN).
        if n.state == NodeState::Down && (n.reason.is_none() || n.reason == ours) {
            n.state = NodeState::Up;
            n.reason = None;
            n.reason_uid = None;
            n.reason_time = None;
        }
    }

    /// Nodes silent for longer than SlurmdTimeout become DOWN "Not responding"; returns
    /// the ones newly marked (the caller drops their links so that they reconnect).
    pub fn check(&mut self, nodes: &mut [Node], now: i64) -> Vec<String> {
        let late: Vec<String> = self
            .last_heard
            .iter()
            .filter(|(name, t)| now - **t > self.timeout && !self.silent.contains(*name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &late {
            self.silent.insert(name.clone());
            self.mark_down(nodes, name, NOT_RESPONDING, now);
        }
        late
    }
}

/// The heartbeat interval agents are told to use: a third of SlurmdTimeout, between 1
/// and 10 seconds.
pub fn heartbeat_secs(slurmd_timeout: u32) -> u32 {
    (slurmd_timeout / 3).clamp(1, 10)
}

/// Keeps one remote node's agent linked: connect, serve, and on failure report it and
/// retry after 1, 2, 4, … seconds up to `max_wait`. Returns when the controller stops.
pub(super) async fn remote_link(
    spec: LinkSpec,
    tx: mpsc::Sender<Msg>,
    max_wait: Duration,
    limits: std::sync::Arc<super::conns::ConnLimits>,
) {
    let node = spec.node.clone();
    let mut delay = Duration::from_secs(1);
    let mut last_reason = String::new();
    loop {
        let started = Instant::now();
        let failure = match ssh::start_agent(&spec).await {
            Ok(mut link) => {
                if let Some(note) = &link.pushed {
                    tracing::info!(node, "{note}");
                }
                let res = super::agent_link(
                    Framed::new(&mut link.stream),
                    tx.clone(),
                    Some(node.clone()),
                    limits.clone(),
                )
                .await;
                // Give the agent's last words a moment to arrive.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let tail = link.stderr_tail();
                let said = if tail.is_empty() {
                    String::new()
                } else {
                    format!(" (agent: {})", tail.join(" / "))
                };
                match res {
                    Ok(()) => {
                        tracing::info!(node, "link ended{said}; reconnecting");
                        None
                    }
                    Err(e) => Some(format!("agent on {node} did not register: {e:#}{said}")),
                }
            }
            Err(e) => Some(e.to_string()),
        };
        if tx.is_closed() {
            return;
        }
        if let Some(reason) = failure {
            // Say it once; the same failure on every retry is noise.
            if reason != last_reason {
                tracing::warn!(node, "{reason}");
            } else {
                tracing::debug!(node, "{reason}");
            }
            last_reason.clone_from(&reason);
            if tx
                .send(Msg::LinkFailed {
                    node: node.clone(),
                    reason,
                })
                .await
                .is_err()
            {
                return;
            }
        } else {
            last_reason.clear();
        }
        if started.elapsed() >= STABLE_LINK {
            delay = Duration::from_secs(1);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(max_wait.max(Duration::from_secs(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<Node> {
        let mut a = Node::new("a", 4, 1000);
        a.state = NodeState::Up;
        let b = Node::new("b", 4, 1000);
        vec![a, b]
    }

    #[test]
    fn link_failure_sets_down_with_reason_and_registration_returns_it() {
        let mut ns = nodes();
        let mut h = Health::new(&ns, 300, 0, 1000);
        h.link_failed(
            &mut ns,
            "b",
            "ssh: HOST KEY MISMATCH for [127.0.0.1]:2222",
            1001,
        );
        let b = &ns[1];
        assert_eq!(b.state, NodeState::Down);
        assert!(b.not_responding);
        assert_eq!(b.state_long(), "down*");
        assert!(b.reason.as_deref().unwrap().contains("MISMATCH"));
        assert_eq!((b.reason_uid, b.reason_time), (Some(0), Some(1001)));
        // A later, different failure replaces our own reason.
        h.link_failed(&mut ns, "b", "ssh: cannot connect", 1002);
        assert_eq!(ns[1].reason.as_deref(), Some("ssh: cannot connect"));
        h.registered(&mut ns, "b", 1003);
        assert_eq!(ns[1].state, NodeState::Up);
        assert!(!ns[1].not_responding);
        assert_eq!(ns[1].reason, None);
    }

    #[test]
    fn an_admin_down_is_kept() {
        let mut ns = nodes();
        let mut h = Health::new(&ns, 300, 0, 1000);
        ns[0].state = NodeState::Down;
        ns[0].reason = Some("disk swap".into());
        h.link_failed(&mut ns, "a", "ssh: cannot connect", 1001);
        assert_eq!(ns[0].reason.as_deref(), Some("disk swap"));
        assert!(ns[0].not_responding);
        h.registered(&mut ns, "a", 1002);
        assert_eq!(ns[0].state, NodeState::Down);
        assert_eq!(ns[0].reason.as_deref(), Some("disk swap"));
        assert!(!ns[0].not_responding);
        // `scontrol update state=resume` while it was away: it comes back.
        h.link_failed(&mut ns, "a", "ssh: cannot connect", 1003);
        ns[0].reason = None;
        h.registered(&mut ns, "a", 1004);
        assert_eq!(ns[0].state, NodeState::Up);
        // The admin replaced our reason while the node was away: theirs stays.
        h.link_failed(&mut ns, "b", "ssh: cannot connect", 1003);
        ns[1].reason = Some("maintenance".into());
        h.registered(&mut ns, "b", 1004);
        assert_eq!(ns[1].state, NodeState::Down);
    }

    #[test]
    fn silence_past_the_timeout_sets_down_not_responding() {
        let mut ns = nodes();
        let mut h = Health::new(&ns, 10, 0, 1000);
        h.heard(&mut ns, "a", 1005);
        // b has not been heard from since the start.
        assert_eq!(h.check(&mut ns, 1010), Vec::<String>::new());
        assert_eq!(h.check(&mut ns, 1011), vec!["b".to_string()]);
        assert_eq!(ns[1].reason.as_deref(), Some(NOT_RESPONDING));
        assert_eq!(ns[1].state_long(), "down*");
        // Reported once.
        assert_eq!(h.check(&mut ns, 1012), Vec::<String>::new());
        assert_eq!(h.check(&mut ns, 1016), vec!["a".to_string()]);
        // A node that speaks again on a kept link comes back.
        assert!(h.heard(&mut ns, "a", 1017));
        assert_eq!(ns[0].state, NodeState::Up);
        assert!(!ns[0].not_responding);
        assert!(!h.heard(&mut ns, "a", 1018));
    }

    #[test]
    fn heartbeat_is_a_third_of_the_timeout() {
        assert_eq!(heartbeat_secs(300), 10);
        assert_eq!(heartbeat_secs(6), 2);
        assert_eq!(heartbeat_secs(1), 1);
    }
}
