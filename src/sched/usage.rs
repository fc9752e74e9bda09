//! What is in use on each node *now*, down to CPU ids and GRES devices (cf.
//! src/plugins/select/cons_tres/part_data.c and node_data.c: per-node core bitmaps and
//! GRES usage built from the running jobs).
//!
//! Built from the allocations of running and completing jobs, never from the
//! controller's counters, so the scheduler's view cannot drift from the jobs.
//! Invariant: no CPU is held by a non-sharing job and anything else at once; GRES and
//! memory in use never exceed the node's.

use super::select::{Cap, NodeInfo, Take, UserSet};
use crate::model::job::{Allocation, GresAlloc};

/// Exact use of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// CPUs held by non-sharing jobs.
    pub cpu_busy: Vec<bool>,
    /// Number of sharing (OverSubscribe) jobs on each CPU.
    pub cpu_shared: Vec<u8>,
    /// MiB in use.
    pub mem: u64,
    /// Units in use per GRES slot.
    pub gres: Vec<u32>,
    /// Jobs holding anything here.
    pub jobs: u32,
    /// An exclusive job holds the node.
    pub whole: bool,
    pub users: UserSet,
}

impl Usage {
    /// An empty node.
    pub fn new(n: &NodeInfo) -> Usage {
        Usage {
            cpu_busy: vec![false; n.cpus as usize],
            cpu_shared: vec![0; n.cpus as usize],
            mem: 0,
            gres: vec![0; n.gres.len()],
            jobs: 0,
            whole: false,
            users: UserSet::Nobody,
        }
    }

    /// Marks GRES `slots` of `n` wholly in use, for devices the node may not give
    /// out now (a GPU busy outside sluice, see [`crate::model::Node::withheld_gres`]).
    /// They are never given back in the backfill timeline.
    pub fn withhold(&mut self, n: &NodeInfo, slots: &[usize]) {
        for &i in slots {
            if let (Some(u), Some(g)) = (self.gres.get_mut(i), n.gres.get(i)) {
                *u = g.2;
            }
        }
    }

    /// CPUs nobody holds.
    pub fn free_cpus(&self) -> u32 {
        self.cpu_busy
            .iter()
            .zip(&self.cpu_shared)
            .filter(|(b, s)| !**b && **s == 0)
            .count() as u32
    }

    /// What the node can give now; `share` is the job's sharing limit, if it shares.
    pub fn cap(&self, n: &NodeInfo, share: Option<u32>) -> Cap {
        let share_cpus = match share {
            Some(lim) => self
                .cpu_busy
                .iter()
                .zip(&self.cpu_shared)
                .filter(|(b, s)| !**b && u32::from(**s) < lim)
                .count() as u32,
            None => 0,
        };
        Cap {
            cpus: self.free_cpus(),
            share_cpus,
            mem: n.mem.saturating_sub(self.mem),
            gres: n
                .gres
                .iter()
                .zip(&self.gres)
                .map(|(g, u)| g.2.saturating_sub(*u))
                .collect(),
            idle: self.jobs == 0,
            blocked: self.whole,
            users: self.users,
            free_ids: None,
        }
    }

    /// [`Usage::cap`] with the free CPU ids ([`Cap::free_ids`]): those nobody holds,
    /// or for a sharing job those shared below its limit.
    pub fn cap_with_ids(&self, n: &NodeInfo, share: Option<u32>) -> Cap {
        let ids = (0..self.cpu_busy.len())
            .filter(|&i| self.cpu_ok(i, share.is_some(), share.unwrap_or(0)))
            .map(|i| i as u32)
            .collect();
        Cap {
            free_ids: Some(ids),
            ..self.cap(n, share)
        }
    }

    /// Whether CPU `i` may be given to a job (`shared`: one sharing up to `limit`).
    fn cpu_ok(&self, i: usize, shared: bool, limit: u32) -> bool {
        !self.cpu_busy[i]
            && if shared {
                u32::from(self.cpu_shared[i]) < limit
            } else {
                self.cpu_shared[i] == 0
            }
    }

    /// Records a job that already holds `cpus` CPUs (ids when known) here.
    #[allow(clippy::too_many_arguments)]
    pub fn charge(
        &mut self,
        cpu_ids: Option<&[u32]>,
        cpus: u32,
        mem: u64,
        gres: &[GresAlloc],
        shared: bool,
        whole: bool,
        uid: u32,
        lock: bool,
    ) {
        let ids: Vec<u32> = match cpu_ids {
            Some(ids) if !ids.is_empty() => ids.to_vec(),
            _ => self.pick_cpus(cpus, shared, u32::MAX, &[]),
        };
        for id in ids {
            let i = id as usize;
            if i < self.cpu_busy.len() {
                if shared {
                    self.cpu_shared[i] = self.cpu_shared[i].saturating_add(1);
                } else {
                    self.cpu_busy[i] = true;
                }
            }
        }
        self.mem = self.mem.saturating_add(mem);
        for g in gres {
            if let Some(u) = self.gres.get_mut(g.slot as usize) {
                *u = u.saturating_add(g.count);
            }
        }
        self.jobs += 1;
        self.whole |= whole;
        self.users = self.users.with(uid, lock);
    }

    /// Chooses `n` CPU ids: those in `prefer` first, then the lowest free ones.
    fn pick_cpus(&self, n: u32, shared: bool, limit: u32, prefer: &[u32]) -> Vec<u32> {
        let ok = |i: usize| self.cpu_ok(i, shared, limit);
        let mut out: Vec<u32> = Vec::with_capacity(n as usize);
        for &p in prefer {
            if out.len() as u32 == n {
                break;
            }
            if (p as usize) < self.cpu_busy.len() && ok(p as usize) && !out.contains(&p) {
                out.push(p);
            }
        }
        // Sharing jobs spread over the least-shared CPUs.
        let mut rest: Vec<usize> = (0..self.cpu_busy.len()).filter(|i| ok(*i)).collect();
        if shared {
            rest.sort_by_key(|i| (self.cpu_shared[*i], *i));
        }
        for i in rest {
            if out.len() as u32 == n {
                break;
            }
            if !out.contains(&(i as u32)) {
                out.push(i as u32);
            }
        }
        out.sort_unstable();
        out
    }

    /// Takes what `t` says for a job starting now; returns the CPU ids and GRES devices
    /// it gets: the ids `t` names when it names them (and they are free), else free
    /// ones, those close to its GRES devices first unless `near` is false
    /// (`--gres-flags=disable-binding`).
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        n: &NodeInfo,
        t: &Take,
        share: Option<u32>,
        whole: bool,
        uid: u32,
        lock: bool,
        near: bool,
    ) -> (Vec<u32>, Vec<GresAlloc>) {
        let (shared, limit) = (share.is_some(), share.unwrap_or(0));
        let named = !t.cpu_ids.is_empty()
            && t.cpu_ids.len() as u32 == t.cpus
            && t.cpu_ids.iter().all(|&c| {
                (c as usize) < self.cpu_busy.len() && self.cpu_ok(c as usize, shared, limit)
            });
        let ids = if named {
            t.cpu_ids.clone()
        } else {
            let prefer: Vec<u32> = if near {
                t.gres
                    .iter()
                    .flat_map(|(s, _)| n.gres_dev[*s].1.iter().copied())
                    .collect()
            } else {
                Vec::new()
            };
            self.pick_cpus(t.cpus, shared, limit, &prefer)
        };
        let gres: Vec<GresAlloc> = t
            .gres
            .iter()
            .map(|(s, c)| GresAlloc {
                slot: *s as u32,
                name: n.gres[*s].0.clone(),
                kind: n.gres[*s].1.clone(),
                index: n.gres_dev[*s].0,
                count: *c,
            })
            .collect();
        self.charge(
            Some(&ids),
            t.cpus,
            t.mem,
            &gres,
            share.is_some(),
            whole,
            uid,
            lock,
        );
        (ids, gres)
    }
}

/// Charges an existing allocation onto per-node usages; `index` maps names to nodes.
pub fn charge_alloc(
    usage: &mut [Usage],
    index: &dyn Fn(&str) -> Option<usize>,
    a: &Allocation,
    uid: u32,
    lock: bool,
) {
    for (k, name) in a.nodes.iter().enumerate() {
        let Some(i) = index(name) else { continue };
        let ids = a.cpu_ids.get(k).map(|v| v.as_slice());
        let gres = a.gres.get(k).map(|v| v.as_slice()).unwrap_or(&[]);
        usage[i].charge(
            ids,
            a.cpus.get(k).copied().unwrap_or(0),
            a.mem_per_node,
            gres,
            a.shared,
            a.whole_nodes,
            uid,
            lock,
        );
    }
}
