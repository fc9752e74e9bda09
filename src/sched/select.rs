//! Node selection: fit a job's tasks onto nodes by CPUs and memory per node, in the
//! spirit of select/cons_tres (cf. src/plugins/select/cons_tres/job_test.c). Tasks are
//! laid out block-wise: each chosen node is filled before the next is used, while
//! leaving at least one task for every further node the job needs.

use crate::model::hostlist;
use crate::model::job::Allocation;
use crate::model::{Job, MemReq, Node, Reason};
use std::collections::HashMap;

/// What is still free on a node during one scheduling pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Free {
    pub cpus: u32,
    /// MiB.
    pub mem: u64,
    pub total_cpus: u32,
    pub total_mem: u64,
    /// Something already runs here (an exclusive job cannot join).
    pub used: bool,
    /// An exclusive job holds the node (nobody can join).
    pub exclusive: bool,
}

impl Free {
    /// What is free on `node` now.
    pub fn of(node: &Node) -> Free {
        Free {
            cpus: node.cpus.saturating_sub(node.alloc_cpus),
            mem: node.real_memory.saturating_sub(node.alloc_mem),
            total_cpus: node.cpus,
            total_mem: node.real_memory,
            used: node.alloc_cpus > 0,
            exclusive: false,
        }
    }

    /// The whole node, as if empty.
    pub fn full(node: &Node) -> Free {
        Free {
            cpus: node.cpus,
            mem: node.real_memory,
            total_cpus: node.cpus,
            total_mem: node.real_memory,
            used: false,
            exclusive: false,
        }
    }

    /// Takes `cpus` and `mem` MiB (the whole node when `exclusive`).
    pub fn take(&mut self, cpus: u32, mem: u64, exclusive: bool) {
        self.cpus = self.cpus.saturating_sub(cpus);
        self.mem = self.mem.saturating_sub(mem);
        self.used = true;
        if exclusive {
            self.cpus = 0;
            self.exclusive = true;
        }
    }
}

/// Memory per node in MiB the job needs with `cpus` CPUs on a node of `total_mem` MiB
/// (`--mem=0` means all of it).
fn mem_needed(job: &Job, cpus: u32, total_mem: u64) -> u64 {
    match job.req_mem {
        MemReq::PerNode(0) => total_mem,
        MemReq::PerNode(m) => m,
        MemReq::PerCpu(m) => m.saturating_mul(u64::from(cpus)),
    }
}

/// How many of the job's tasks fit into `f`, up to `want` (0 if the node cannot host it).
fn tasks_fitting(job: &Job, f: &Free, want: u32) -> u32 {
    if f.exclusive || (job.spec.exclusive && f.used) {
        return 0;
    }
    let cpt = job.spec.cpus_per_task.unwrap_or(1).max(1);
    let mut k = (f.cpus / cpt).min(want);
    while k > 0 && mem_needed(job, k * cpt, f.total_mem) > f.mem {
        k -= 1;
    }
    k
}

/// Chooses nodes and CPUs for `job` among `candidates` (already filtered to the
/// partition and to schedulable nodes) given what is `free`. Errors carry the pending
/// reason: `ReqNodeNotAvail` when a required node is unusable, else `Resources`.
pub fn select(
    job: &Job,
    candidates: &[&Node],
    free: &HashMap<&str, Free>,
) -> Result<Allocation, Reason> {
    let lookup = |n: &Node| free.get(n.name.as_str()).copied();
    fit(job, candidates, lookup).map_err(|e| match e {
        FitError::RequiredMissing => Reason::ReqNodeNotAvail,
        FitError::NoFit => Reason::Resources,
    })
}

/// Whether the job could run on `members` if they were all empty and up.
///
/// A node whose agent has not registered since the controller started (it has just
/// started, or a remote node is still connecting or unreachable) has no detected CPUs
/// or memory; what its configuration does not declare is taken as unbounded, so that
/// jobs are not refused as impossible for want of a measurement.
pub fn could_ever_fit(job: &Job, members: &[&Node]) -> bool {
    let assumed: Vec<Node> = members
        .iter()
        .map(|n| {
            let mut n = (*n).clone();
            if n.agent_start_time.is_none() {
                if n.cpus == 0 {
                    n.cpus = u32::MAX / 2;
                }
                if n.real_memory == 0 {
                    n.real_memory = u64::MAX / 2;
                }
            }
            n
        })
        .collect();
    let refs: Vec<&Node> = assumed.iter().collect();
    fit(job, &refs, |n| Some(Free::full(n))).is_ok()
}

enum FitError {
    RequiredMissing,
    NoFit,
}

fn fit(
    job: &Job,
    candidates: &[&Node],
    lookup: impl Fn(&Node) -> Option<Free>,
) -> Result<Allocation, FitError> {
    let required: Vec<String> = job
        .spec
        .nodelist
        .as_deref()
        .and_then(|e| hostlist::expand(e).ok())
        .unwrap_or_default();
    let excluded: Vec<String> = job
        .spec
        .exclude
        .as_deref()
        .and_then(|e| hostlist::expand(e).ok())
        .unwrap_or_default();
    let mut pool: Vec<(&Node, Free)> = Vec::new();
    for name in &required {
        match candidates.iter().find(|n| &n.name == name) {
            Some(n) => match lookup(n) {
                Some(f) => pool.push((n, f)),
                None => return Err(FitError::RequiredMissing),
            },
            None => return Err(FitError::RequiredMissing),
        }
    }
    let mut rest: Vec<(&Node, Free)> = candidates
        .iter()
        .filter(|n| !required.contains(&n.name) && !excluded.contains(&n.name))
        .filter_map(|n| lookup(n).map(|f| (*n, f)))
        .collect();
    rest.sort_by_key(|(n, _)| n.weight);
    let n_required = pool.len();
    pool.extend(rest);

    let cpt = job.spec.cpus_per_task.unwrap_or(1).max(1);
    let ntasks = job.req_tasks.max(1);
    let nodes_min = job.req_nodes.max(1).max(n_required as u32);
    let nodes_max = job
        .spec
        .nodes_max
        .unwrap_or(if job.spec.nodes_min.is_some() {
            nodes_min
        } else {
            u32::MAX
        })
        .max(nodes_min);

    let mut chosen: Vec<(&Node, u32)> = Vec::new();
    if let Some(per) = job.spec.ntasks_per_node {
        let need = nodes_min.max(ntasks.div_ceil(per.max(1)));
        for (i, (n, f)) in pool.iter().enumerate() {
            if chosen.len() as u32 == need {
                break;
            }
            if tasks_fitting(job, f, per) == per {
                chosen.push((n, per));
            } else if i < n_required {
                return Err(FitError::NoFit);
            }
        }
        if (chosen.len() as u32) < need {
            return Err(FitError::NoFit);
        }
    } else {
        let mut left = ntasks;
        for (i, (n, f)) in pool.iter().enumerate() {
            let placed = chosen.len() as u32;
            if left == 0 && placed >= nodes_min {
                break;
            }
            if placed == nodes_max {
                break;
            }
            // Keep one task for each further node the job must still get.
            let still_needed = nodes_min.saturating_sub(placed + 1);
            let want = left.saturating_sub(still_needed).max(1).min(left.max(1));
            let k = tasks_fitting(job, f, want);
            if k == 0 {
                if i < n_required {
                    return Err(FitError::NoFit);
                }
                continue;
            }
            let k = k.min(left.max(1));
            chosen.push((n, k));
            left = left.saturating_sub(k);
        }
        if left > 0 || (chosen.len() as u32) < nodes_min {
            return Err(FitError::NoFit);
        }
    }
    let mem = chosen
        .iter()
        .map(|(n, k)| mem_needed(job, k * cpt, n.real_memory))
        .max()
        .unwrap_or(0);
    Ok(Allocation {
        nodes: chosen.iter().map(|(n, _)| n.name.clone()).collect(),
        cpus: chosen
            .iter()
            .map(|(n, k)| if job.spec.exclusive { n.cpus } else { k * cpt })
            .collect(),
        mem_per_node: mem,
    })
}
