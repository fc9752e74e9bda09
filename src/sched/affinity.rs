//! GPU–CPU affinity in node selection (cf. src/plugins/select/cons_tres/
//! gres_select_filter.c `gres_select_filter_sock_core` and gres_sock_list.c): which
//! of a node's free CPU ids a job may take given the GPUs it takes, for
//! `--gres-flags=enforce-binding` (CPUs only from the GPUs' gres.conf `Cores=`, and
//! every GPU near one of the job's CPUs) and `--gpus-per-socket` (GPUs and CPUs on the
//! sockets the job uses).
//!
//! CPU ids are Slurm's abstract ids, numbered socket by socket (see
//! [`crate::model::gres::socket_of`]). Pure functions over id lists.
//!
//! Invariant: [`pick_covering`] never returns an id that is not free, outside
//! `allowed`, or repeated, and returns exactly the count asked for or nothing.

pub use crate::model::gres::{device_sockets, socket_cpus, socket_of};

/// Chooses `count` CPU ids among `free` such that every id is
/// in `allowed` (`None`: any) and every set in `groups` holds at least one chosen id
/// (a GPU's `Cores=`, a socket's CPUs). Groups are covered first, each by the free
/// allowed id that covers the most still-uncovered groups (lowest id on ties); the
/// rest are filled from `prefer`, then from the lowest free ids. Returns the ids
/// ascending, or `None` when no such choice exists under this greedy order.
pub fn pick_covering(
    free: &[u32],
    allowed: Option<&[u32]>,
    groups: &[Vec<u32>],
    prefer: &[u32],
    count: u32,
) -> Option<Vec<u32>> {
    use std::collections::BTreeSet;
    let ok = |c: &u32| allowed.is_none_or(|a| a.contains(c));
    let pool: BTreeSet<u32> = free.iter().copied().filter(ok).collect();
    let count = count as usize;
    if pool.len() < count {
        return None;
    }
    let mut out: BTreeSet<u32> = BTreeSet::new();
    let mut uncovered: Vec<&Vec<u32>> = groups.iter().collect();
    while !uncovered.is_empty() {
        // Candidates are the group members in the pool: groups are small (a GPU's
        // cores, a socket), the pool may be a whole node.
        let best = uncovered
            .iter()
            .flat_map(|g| g.iter().copied())
            .filter(|c| pool.contains(c) && !out.contains(c))
            .map(|c| (uncovered.iter().filter(|g| g.contains(&c)).count(), c))
            .max_by_key(|&(n, c)| (n, std::cmp::Reverse(c)))?;
        out.insert(best.1);
        uncovered.retain(|g| !g.contains(&best.1));
    }
    if out.len() > count {
        return None;
    }
    for &c in prefer.iter().chain(pool.iter()) {
        if out.len() == count {
            break;
        }
        if pool.contains(&c) {
            out.insert(c);
        }
    }
    (out.len() == count).then(|| out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_blocks_of_ids() {
        assert_eq!(socket_of(0, 8, 2), 0);
        assert_eq!(socket_of(3, 8, 2), 0);
        assert_eq!(socket_of(4, 8, 2), 1);
        assert_eq!(socket_of(7, 8, 2), 1);
        // Uneven: 5 CPUs in 2 sockets are 0-2 and 3-4.
        assert_eq!(socket_cpus(1, 5, 2), vec![3, 4]);
        assert_eq!(socket_of(9, 4, 1), 0);
        assert_eq!(device_sockets(&[4, 5], 8, 2), vec![1]);
        assert_eq!(device_sockets(&[3, 4], 8, 2), vec![0, 1]);
        assert_eq!(device_sockets(&[], 8, 2), vec![0, 1]);
    }

    #[test]
    fn picks_cover_every_group_within_allowed() {
        let free: Vec<u32> = (0..8).collect();
        let s0 = vec![0, 1, 2, 3];
        let s1 = vec![4, 5, 6, 7];
        // Two groups, two CPUs: one from each.
        assert_eq!(
            pick_covering(&free, None, &[s0.clone(), s1.clone()], &[], 2),
            Some(vec![0, 4])
        );
        // One CPU cannot cover two disjoint groups.
        assert_eq!(
            pick_covering(&free, None, &[s0.clone(), s1.clone()], &[], 1),
            None
        );
        // Overlapping groups: one CPU in both covers them.
        assert_eq!(
            pick_covering(&free, None, &[vec![0, 1, 2], vec![2, 3]], &[], 1),
            Some(vec![2])
        );
        // Allowed limits the pool; preferred ids fill first.
        assert_eq!(
            pick_covering(&free, Some(&s1), &[], &[6, 7], 3),
            Some(vec![4, 6, 7])
        );
        assert_eq!(pick_covering(&free, Some(&s1), &[], &[], 5), None);
        // A group with no free CPU cannot be covered.
        assert_eq!(pick_covering(&[0, 1], None, &[vec![5]], &[], 1), None);
        assert_eq!(pick_covering(&free, None, &[], &[], 0), Some(vec![]));
    }
}
