//! priority/multifactor (cf. src/plugins/priority/multifactor/priority_multifactor.c and
//! the "Multifactor Priority Plugin" page): a job's priority is the weighted sum of
//! normalised factors in [0, 1] — age, association, fair-share, job size, partition,
//! QOS and TRES — plus the site factor, minus the nice value.
//!
//! The fair-share factor comes from [`super::fairshare`] (Fair Tree by default, classic
//! with `PriorityFlags=NO_FAIR_TREE`) over the association tree the caller computed
//! from decayed usage. Pure: the caller passes the tree and `now`.
//!
//! The QOS factor is the job's QOS `Priority` normalised by the highest QOS priority
//! (`PriorityContext::qos_norm`, filled by the controller from the association tree).
//!
//! Invariant: the sum is truncated to an integer and an eligible job's priority is at
//! least 1 (0 is reserved for held jobs).

use super::fairshare::FairShareTree;
use crate::model::Job;
use std::collections::HashMap;
use std::sync::Arc;

pub use crate::config::sched::PriorityConfig;
pub use crate::model::priority::Factors;

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
    /// The computed fair-share tree (decayed usage and shares per association).
    pub fairshare: Arc<FairShareTree>,
    /// Each QOS's normalised priority in [0, 1]: its `Priority` over the highest
    /// `Priority` of any QOS (Slurm's QOS factor). A QOS not listed has 0.
    pub qos_norm: HashMap<String, f64>,
    /// How jobs are billed (`model::billing`), for a `billing` TRES weight: the
    /// factor is the job's billing over the cluster's billed whole.
    pub billing: crate::model::billing::BillingTable,
    /// Each partition's TRES (`model::billing::nodes_tres` of its nodes, with the
    /// cluster's licenses), by partition name: a job's TRES factors are its request
    /// over its partition's whole, as in Slurm. A partition not listed is normalised by
    /// the cluster totals above (cpu, node, mem, gres/gpu).
    pub partition_tres: HashMap<String, crate::model::billing::Tres>,
}

impl PriorityContext {
    /// The fair-share factor in [0, 1] of a job of `user` charged to `account` (root
    /// when empty); 1.0 for an association the tree does not hold.
    pub fn fairshare(&self, account: &str, user: &str) -> f64 {
        self.fairshare.factor(account, user)
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
    // PriorityWeightTRES: each TRES the job asks for (the limits' count, billing
    // included) over the cluster's total of it.
    let tres = if cfg.weight_tres.is_empty() {
        Vec::new()
    } else {
        let asked = super::limits::job_tres(job, &ctx.billing);
        let cluster: crate::model::billing::Tres;
        let whole = match ctx.partition_tres.get(&job.partition) {
            Some(t) => t,
            None => {
                cluster = [
                    ("cpu", ctx.total_cpus),
                    ("node", ctx.total_nodes),
                    ("mem", ctx.total_mem),
                    ("gres/gpu", ctx.total_gpus),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
                &cluster
            }
        };
        cfg.weight_tres
            .iter()
            .map(|(name, w)| {
                let key = name.to_ascii_lowercase();
                let total = match key.as_str() {
                    "billing" => ctx.billing.billable(&job.partition, whole),
                    k => whole.get(k).copied().unwrap_or(0) as f64,
                };
                let have = asked.get(&key).copied().unwrap_or(0) as f64;
                // A TRES the whole lacks (none configured) adds nothing.
                let f = if total > 0.0 {
                    (have / total).min(1.0)
                } else {
                    0.0
                };
                (name.clone(), w * f)
            })
            .collect()
    };
    Factors {
        site: 0.0,
        age: f64::from(cfg.weight_age) * age,
        assoc: 0.0,
        fairshare: f64::from(cfg.weight_fairshare) * ctx.fairshare(&job.account, &job.user),
        jobsize: f64::from(cfg.weight_jobsize) * size,
        partition: f64::from(cfg.weight_partition) * part,
        qos: f64::from(cfg.weight_qos) * ctx.qos_norm.get(&job.qos).copied().unwrap_or(0.0),
        tres,
        nice: i64::from(job.spec.nice),
    }
}

/// GPUs a job asks for in total (`gres/gpu` of [`super::limits::request_tres`]).
pub fn job_gpus(job: &Job) -> u64 {
    super::limits::request_tres(job)
        .get("gres/gpu")
        .copied()
        .unwrap_or(0)
}

pub use super::fairshare::decay;
