//! Node down time for sreport (cf. slurmdbd's event table: a node that is DOWN,
//! DRAINED/DRAINING or FAILing counts as down in `cluster Utilization`).
//!
//! The actor observes the nodes on every tick; an interval is closed when the node
//! is usable again and is then written to the store. Open intervals are reported from
//! memory until they close. A controller restart forgets an open interval.

use crate::model::{Node, NodeState};
use std::collections::HashMap;

/// Intervals during which nodes were down.
#[derive(Debug, Default)]
pub struct DownLog {
    /// Node → since when it has been down.
    since: HashMap<String, i64>,
    /// Closed intervals (node, start, end) not yet given to the store.
    closed: Vec<(String, i64, i64)>,
}

/// Whether a node counts as down for accounting.
pub fn is_down(n: &Node) -> bool {
    n.state == NodeState::Down || n.drain || n.fail
}

impl DownLog {
    /// Records state changes seen at `now`.
    pub fn observe(&mut self, nodes: &[Node], now: i64) {
        for n in nodes {
            match (is_down(n), self.since.get(&n.name).copied()) {
                (true, None) => {
                    self.since.insert(n.name.clone(), now);
                }
                (false, Some(s)) => {
                    self.since.remove(&n.name);
                    if now > s {
                        self.closed.push((n.name.clone(), s, now));
                    }
                }
                _ => {}
            }
        }
    }

    /// Closed intervals for the store.
    pub fn take_closed(&mut self) -> Vec<(String, i64, i64)> {
        std::mem::take(&mut self.closed)
    }

    /// Intervals still open at `now` (ending `now`), and closed ones not yet stored.
    pub fn pending(&self, now: i64) -> Vec<(String, i64, i64)> {
        let mut v: Vec<(String, i64, i64)> = self
            .since
            .iter()
            .map(|(n, s)| (n.clone(), *s, now))
            .collect();
        v.extend(self.closed.iter().cloned());
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_open_and_close() {
        let mut n = Node::new("n1", 4, 100);
        n.state = NodeState::Up;
        let mut log = DownLog::default();
        log.observe(std::slice::from_ref(&n), 10);
        assert!(log.pending(10).is_empty());
        n.state = NodeState::Down;
        log.observe(std::slice::from_ref(&n), 20);
        assert_eq!(log.pending(25), vec![("n1".into(), 20, 25)]);
        n.state = NodeState::Up;
        n.drain = true;
        log.observe(std::slice::from_ref(&n), 30);
        assert_eq!(log.pending(30), vec![("n1".into(), 20, 30)]);
        n.drain = false;
        log.observe(std::slice::from_ref(&n), 40);
        assert_eq!(log.take_closed(), vec![("n1".into(), 20, 40)]);
        assert!(log.pending(50).is_empty());
    }
}
