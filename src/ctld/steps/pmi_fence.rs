//! The controller's part of `--mpi=pmi2`: the fence across a step's nodes (cf. the
//! tree of slurmstepds rooted at srun in Slurm's mpi/pmi2 plugin; here the controller,
//! which already hears every node of the step, is the root).
//!
//! Each node's stepd reports fence `seq` once all of its tasks entered it, with the
//! pairs they put since the previous fence; when the last node of the step has
//! reported, every node gets the union. Pure: no I/O.

use std::collections::BTreeMap;

/// The fence of one live step (see the module docs).
#[derive(Debug, Default)]
pub struct PmiFence {
    /// The fence being gathered (the last completed one + 1).
    seq: u32,
    /// Nodes (step-relative indices) that reported `seq`.
    arrived: Vec<bool>,
    /// The pairs reported for `seq` so far (a later node's value for a key wins).
    kvs: BTreeMap<String, String>,
}

impl PmiFence {
    /// Node `node` of a step of `nodes` nodes reached fence `seq` with `kvs`. Returns
    /// the union of every node's pairs when this was the last node to arrive (the
    /// fence is then complete and the next one starts). A report for another fence
    /// than the one being gathered, or a node's second report, is ignored (`None`).
    pub fn arrive(
        &mut self,
        node: usize,
        nodes: usize,
        seq: u32,
        kvs: Vec<(String, String)>,
    ) -> Option<Vec<(String, String)>> {
        if self.arrived.len() != nodes {
            self.arrived = vec![false; nodes];
        }
        if seq != self.seq + 1 || node >= nodes || self.arrived[node] {
            return None;
        }
        self.arrived[node] = true;
        self.kvs.extend(kvs);
        if !self.arrived.iter().all(|a| *a) {
            return None;
        }
        self.seq = seq;
        self.arrived = vec![false; nodes];
        Some(std::mem::take(&mut self.kvs).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.into(), v.into())
    }

    #[test]
    fn completes_when_every_node_arrived() {
        let mut f = PmiFence::default();
        assert_eq!(f.arrive(1, 2, 1, vec![kv("b", "1")]), None);
        // A replayed report changes nothing.
        assert_eq!(f.arrive(1, 2, 1, vec![kv("b", "2")]), None);
        let all = f.arrive(0, 2, 1, vec![kv("a", "0")]).unwrap();
        assert_eq!(all, vec![kv("a", "0"), kv("b", "1")]);
        // The next fence starts empty.
        assert_eq!(f.arrive(0, 2, 2, vec![]), None);
        assert_eq!(
            f.arrive(1, 2, 2, vec![kv("c", "3")]),
            Some(vec![kv("c", "3")])
        );
    }

    #[test]
    fn out_of_order_fences_are_ignored() {
        let mut f = PmiFence::default();
        assert_eq!(f.arrive(0, 1, 2, vec![]), None);
        assert_eq!(f.arrive(5, 1, 1, vec![]), None);
        assert_eq!(f.arrive(0, 1, 1, vec![]), Some(vec![]));
    }
}
