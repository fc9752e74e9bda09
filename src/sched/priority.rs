//! priority/multifactor (cf. src/plugins/priority/multifactor/priority_multifactor.c and
//! the "Multifactor Priority Plugin" page): a job's priority is the weighted sum of
//! normalised factors in [0, 1] — age, association, fair-share, job size, partition,
//! QOS and TRES — plus the site factor, minus the nice value.
//!
//! Fair-share is the classic formula `2^(-U/S)` over per-user usage (U: the user's share
//! of all decayed usage, S: the user's normalised shares; equal shares for every user
//! until accounts and shares exist). Pure: the caller passes usage and `now`.
//!
//! The QOS factor is the job's QOS `Priority` normalised by the highest QOS priority
//! (`PriorityContext::qos_norm`, filled by the controller from the association tree).
//!
//! Invariant: the sum is truncated to an integer and an eligible job's priority is at
//! least 1 (0 is reserved for held jobs).

use crate::model::Job;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub use crate::config::sched::PriorityConfig;

/// Cluster-wide facts the factors are normalised by.
#[derive(Debug, Clone, Default)]
pub struct PriorityContext {
    pub total_cpus: u64,
    pub total_nodes: u64,
    /// MiB.
    pub total_mem: u64,
    pub total_gpus: u64,
    /// The largest PriorityJobFactor of any partition.
    pub max_part_factor: u32,
    /// Decayed usage per uid (CPU-seconds).
    pub usage: HashMap<u32, f64>,
    /// Users sharing the cluster (each gets 1/users of the shares).
    pub users: usize,
    /// Each QOS's normalised priority in [0, 1]: its `Priority` over the highest
    /// `Priority` of any QOS (Slurm's QOS factor). A QOS not listed has 0.
    pub qos_norm: HashMap<String, f64>,
}

impl PriorityContext {
    /// The fair-share factor of `uid` in [0, 1].
    pub fn fairshare(&self, uid: u32) -> f64 {
        let total: f64 = self.usage.values().sum();
        if total <= 0.0 {
            return 1.0;
        }
        let u = self.usage.get(&uid).copied().unwrap_or(0.0) / total;
        let s = 1.0 / self.users.max(1) as f64;
        (-u / s).exp2()
    }
}

/// A job's weighted factors (what sprio prints) and the resulting priority.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub site: f64,
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub jobsize: f64,
    pub partition: f64,
    pub qos: f64,
    /// Weighted TRES factors: (name, value).
    pub tres: Vec<(String, f64)>,
    pub nice: i64,
}

impl Factors {
    /// The job priority: the truncated sum, at least 1.
    pub fn priority(&self) -> u32 {
        let sum = self.site
            + self.age
            + self.assoc
            + self.fairshare
            + self.jobsize
            + self.partition
            + self.qos
            + self.tres.iter().map(|t| t.1).sum::<f64>()
            - self.nice as f64;
        sum.clamp(1.0, f64::from(u32::MAX - 1)) as u32
    }
}

/// The factors of `job` in a partition with PriorityJobFactor `part_factor`, at `now`.
pub fn factors(
    job: &Job,
    part_factor: u32,
    ctx: &PriorityContext,
    cfg: &PriorityConfig,
    now: i64,
) -> Factors {
    let age = match job.eligible_time {
        Some(e) if now > e && cfg.max_age > 0 => {
            ((now - e).min(cfg.max_age)) as f64 / cfg.max_age as f64
        }
        _ => 0.0,
    };
    let cpus = f64::from(job.req_cpus.max(1));
    let nodes = f64::from(job.req_nodes.max(1));
    let total_cpus = ctx.total_cpus.max(1) as f64;
    let total_nodes = ctx.total_nodes.max(1) as f64;
    let mut size = if cfg.small_relative_to_time {
        let mins = job
            .time_limit
            .secs()
            .map_or(525_600.0, |s| (s as f64 / 60.0).max(1.0));
        ((cpus / mins) / total_cpus).min(1.0)
    } else {
        ((nodes / total_nodes).min(1.0) + (cpus / total_cpus).min(1.0)) / 2.0
    };
    if cfg.favor_small {
        size = 1.0 - size;
    }
    let part = if ctx.max_part_factor > 0 {
        f64::from(part_factor) / f64::from(ctx.max_part_factor)
    } else {
        0.0
    };
    let tres = cfg
        .weight_tres
        .iter()
        .map(|(name, w)| {
            let (have, total) = match name.as_str() {
                "cpu" => (cpus, total_cpus),
                "node" => (nodes, total_nodes),
                "mem" => (
                    job.mem_per_node(job.req_cpus) as f64 * nodes,
                    ctx.total_mem.max(1) as f64,
                ),
                "gres/gpu" => (job_gpus(job) as f64, ctx.total_gpus.max(1) as f64),
                _ => (0.0, 1.0),
            };
            (name.clone(), w * (have / total).min(1.0))
        })
        .collect();
    Factors {
        site: 0.0,
        age: f64::from(cfg.weight_age) * age,
        assoc: 0.0,
        fairshare: f64::from(cfg.weight_fairshare) * ctx.fairshare(job.uid),
        jobsize: f64::from(cfg.weight_jobsize) * size,
        partition: f64::from(cfg.weight_partition) * part,
        qos: f64::from(cfg.weight_qos) * ctx.qos_norm.get(&job.qos).copied().unwrap_or(0.0),
        tres,
        nice: i64::from(job.spec.nice),
    }
}

/// GPUs a job asks for in total (for TRES weights).
pub fn job_gpus(job: &Job) -> u64 {
    let s = &job.spec;
    let per_node: u64 = s
        .gres
        .iter()
        .filter(|g| g.name == "gpu")
        .map(|g| g.count)
        .sum::<u64>()
        + s.gpus_per_node.as_ref().map_or(0, |g| g.count);
    per_node * u64::from(job.req_nodes.max(1))
        + s.gpus.as_ref().map_or(0, |g| g.count)
        + s.gpus_per_task
            .as_ref()
            .map_or(0, |g| g.count * u64::from(job.req_tasks.max(1)))
}

/// Usage decayed from `then` to `now` with half-life `half_life` seconds.
pub fn decay(usage: f64, then: i64, now: i64, half_life: i64) -> f64 {
    if half_life <= 0 || now <= then {
        return usage;
    }
    usage * (-((now - then) as f64) / half_life as f64).exp2()
}
