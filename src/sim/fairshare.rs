//! Fair-share in the simulator: priorities from the association tree and recorded
//! usage on virtual time (the controller's [`crate::sched::fairshare`] code), for
//! traces whose users are mapped to accounts (`[[accounts]] users = ["<SWF user id>"]`),
//! and the closed-loop scenario `sluice simulate --scenario fairshare`: accounts with
//! shares (70/30 by default) each keeping the same number of jobs queued, so demand is
//! equal and always exceeds the cluster; delivered CPU-hours per account are compared
//! with the shares.

use crate::model::billing::BillingTable;
use crate::model::{Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, TimeLimit};
use crate::sched::fairshare::{
    AccountDef, Algorithm, FairShareTree, RunCharge, UsageLedger, UserDef,
};
use crate::sched::priority::{self, PriorityConfig, PriorityContext};
use crate::sched::{self, Decision, Input, Policy, SchedConfig};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

/// Fair-share bookkeeping of one simulation.
pub struct FairShare {
    pub ledger: UsageLedger,
    /// CPU-seconds delivered per account, up to the end of the measured window.
    pub delivered: BTreeMap<String, f64>,
    /// How jobs are billed (the partitions' `TRESBillingWeights`, MAX_TRES), as the
    /// controller bills them.
    pub billing: BillingTable,
}

impl FairShare {
    /// Empty usage starting at `t0`, billing jobs in `parts` as the controller does
    /// (`max_tres`: `PriorityFlags=MAX_TRES`).
    pub fn new(t0: i64, parts: &[Partition], max_tres: bool) -> FairShare {
        FairShare {
            ledger: UsageLedger {
                decayed_at: t0,
                accrued_at: t0,
                ..Default::default()
            },
            delivered: BTreeMap::new(),
            billing: BillingTable::from_partitions(parts, max_tres),
        }
    }

    /// What `j` (running on `a`) charges per second in billing units.
    fn rate(&self, j: &Job, a: &crate::model::job::Allocation) -> f64 {
        self.billing
            .billable(&j.partition, &crate::sched::limits::alloc_tres(a))
    }

    /// A job ended at `end`: charges what the last tick did not.
    pub fn ended(&mut self, j: &Job, end: i64) {
        if let Some(start) = j.start_time {
            self.charge(j, start, end);
        }
    }

    /// Charges job `j` for running from `from` to `to` (the part after the last
    /// tick): the end of a stretch of its run (it ended, or was suspended).
    pub fn charge(&mut self, j: &Job, from: i64, to: i64) {
        let Some(a) = j.alloc.as_ref() else {
            return;
        };
        let rate = self.rate(j, a);
        let key = FairShareTree::key_of(&j.account, &j.user);
        self.ledger
            .charge_running(&RunCharge::billing_only(key, rate, from), to);
    }

    /// Sets the multifactor priority of every pending job at `now` (running jobs'
    /// usage accrued first).
    pub fn prioritise(
        &mut self,
        jobs: &mut [Job],
        pending: &[usize],
        running: &[usize],
        nodes: &[Node],
        cfg: &SchedConfig,
        now: i64,
    ) {
        let p = &cfg.priority;
        let run: Vec<_> = running
            .iter()
            .filter_map(|&i| {
                let j = &jobs[i];
                Some(RunCharge::billing_only(
                    FairShareTree::key_of(&j.account, &j.user),
                    self.rate(j, j.alloc.as_ref()?),
                    j.start_time?,
                ))
            })
            .collect();
        self.ledger
            .accrue(&run, now, p.decay_half_life, p.usage_reset);
        let mut extra: Vec<_> = pending
            .iter()
            .map(|&i| FairShareTree::key_of(&jobs[i].account, &jobs[i].user))
            .collect();
        extra.sort_unstable();
        extra.dedup();
        let tree = FairShareTree::build(
            &p.accounts,
            &p.user_assocs,
            &self.ledger,
            &extra,
            p.fairshare_algorithm,
        );
        let ctx = PriorityContext {
            total_cpus: nodes.iter().map(|n| u64::from(n.cpus)).sum(),
            total_nodes: nodes.len() as u64,
            total_mem: nodes.iter().map(|n| n.real_memory).sum(),
            total_gpus: 0,
            max_part_factor: 1,
            fairshare: Arc::new(tree),
            qos_norm: Default::default(),
            billing: self.billing.clone(),
            partition_tres: Default::default(),
        };
        for &i in pending {
            jobs[i].priority = priority::factors(&jobs[i], 1, &ctx, p, now).priority();
        }
    }

    /// Adds `units` (CPUs or GPUs) × the part of `[start, end)` before `horizon` to
    /// the job's account.
    pub fn deliver(&mut self, j: &Job, units: u32, start: i64, end: i64, horizon: i64) {
        let secs = (end.min(horizon) - start).max(0) as f64;
        *self.delivered.entry(j.account.clone()).or_insert(0.0) += f64::from(units) * secs;
    }
}

/// The account a trace user (SWF user id as text) charges: the first configured
/// account listing the user, else none (root).
pub fn account_of(user: &str, cfg: &SchedConfig) -> String {
    cfg.priority
        .user_assocs
        .iter()
        .find(|u| u.user == user)
        .map(|u| u.account.clone())
        .unwrap_or_default()
}

/// The closed-loop fair-share scenario's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// (account, raw shares); one user per account.
    pub accounts: Vec<(String, u32)>,
    pub nodes: u32,
    pub cpus_per_node: u32,
    /// CPUs per job.
    pub job_cpus: u32,
    /// GPUs per node; when not 0, jobs ask `job_gpus` GPUs each and usage and delivery
    /// are counted in GPU-seconds (`TRESBillingWeights=GRES/gpu=1`).
    pub gpus_per_node: u32,
    pub job_gpus: u32,
    /// Run times cycled through, seconds (each job's limit equals its run time).
    pub runtimes: Vec<i64>,
    /// Jobs each account keeps pending at all times.
    pub queued: usize,
    /// Simulated seconds.
    pub duration: i64,
    /// PriorityDecayHalfLife, seconds.
    pub half_life: i64,
    pub policy: Policy,
    pub algorithm: Algorithm,
    /// PriorityWeightFairshare (0 turns fair-share off: a control run).
    pub weight_fairshare: u32,
}

impl Scenario {
    /// Two accounts with 70/30 shares on 4 nodes of 16 CPUs, 4-CPU jobs of 30 min,
    /// 1 h and 2 h, 16 queued per account, for `days` days, half-life 7 days.
    pub fn seventy_thirty(days: i64) -> Scenario {
        Scenario {
            accounts: vec![("acct_a".into(), 70), ("acct_b".into(), 30)],
            nodes: 4,
            cpus_per_node: 16,
            job_cpus: 4,
            gpus_per_node: 0,
            job_gpus: 0,
            runtimes: vec![1800, 3600, 7200],
            queued: 16,
            duration: days * 86400,
            half_life: 7 * 86400,
            policy: Policy::Easy,
            algorithm: Algorithm::FairTree,
            weight_fairshare: PriorityConfig::default().weight_fairshare,
        }
    }
}

impl Scenario {
    /// The 70/30 scenario on GPUs: 4 nodes of 32 CPUs and 8 GPUs, jobs of 1 GPU and
    /// 4 CPUs, usage billed per GPU.
    pub fn seventy_thirty_gpu(days: i64) -> Scenario {
        Scenario {
            cpus_per_node: 32,
            gpus_per_node: 8,
            job_gpus: 1,
            ..Scenario::seventy_thirty(days)
        }
    }

    fn gpu(&self) -> bool {
        self.gpus_per_node > 0 && self.job_gpus > 0
    }
}

/// What the scenario delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioResult {
    /// (account, shares fraction, CPU-hours (GPU-hours with GPUs) delivered, fraction
    /// of all delivered).
    pub accounts: Vec<(String, f64, f64, f64)>,
    /// Delivered over capacity × duration.
    pub utilization: f64,
    pub jobs_started: usize,
}

impl ScenarioResult {
    /// The largest |delivered fraction / shares fraction − 1| over the accounts.
    pub fn worst_relative_error(&self) -> f64 {
        self.accounts
            .iter()
            .map(|(_, s, _, f)| (f / s - 1.0).abs())
            .fold(0.0, f64::max)
    }
}

/// Runs the closed-loop scenario on virtual time through [`sched::run`].
///
/// Errors: no accounts, zero-sized jobs or cluster, jobs that do not fit a node.
pub fn run_scenario(s: &Scenario) -> Result<ScenarioResult, String> {
    if s.accounts.is_empty() || s.runtimes.is_empty() || s.queued == 0 {
        return Err("the scenario needs accounts, run times and queued jobs".into());
    }
    if s.job_cpus == 0
        || s.job_cpus > s.cpus_per_node
        || s.nodes == 0
        || s.job_gpus > s.gpus_per_node
    {
        return Err(format!(
            "jobs of {} CPUs and {} GPUs do not fit nodes of {} CPUs and {} GPUs",
            s.job_cpus, s.job_gpus, s.cpus_per_node, s.gpus_per_node
        ));
    }
    let gres = if s.gpu() {
        crate::model::gres::parse_node_gres(&format!("gpu:{}", s.gpus_per_node))
            .map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };
    let nodes: Vec<Node> = (0..s.nodes)
        .map(|k| {
            let mut n = Node::new(&format!("sim{k}"), s.cpus_per_node, 0);
            n.state = NodeState::Up;
            n.alloc_gres = vec![0; gres.len()];
            n.gres = gres.clone();
            n
        })
        .collect();
    let mut part = Partition::new("sim", nodes.iter().map(|n| n.name.clone()).collect());
    part.default = true;
    if s.gpu() {
        // Usage is GPU time: one billing unit per GPU.
        part.billing_weights =
            Some(crate::model::billing::BillingWeights::parse("GRES/gpu=1").expect("valid"));
    }
    let parts = vec![part];
    let mut cfg = super::sim_config(s.policy);
    cfg.priority.decay_half_life = s.half_life;
    cfg.priority.fairshare_algorithm = s.algorithm;
    cfg.priority.weight_fairshare = s.weight_fairshare;
    cfg.priority.accounts = s
        .accounts
        .iter()
        .map(|(a, sh)| AccountDef {
            name: a.clone(),
            parent: None,
            shares: *sh,
        })
        .collect();
    cfg.priority.user_assocs = s
        .accounts
        .iter()
        .map(|(a, _)| UserDef {
            user: format!("{a}_user"),
            account: a.clone(),
            shares: 1,
        })
        .collect();
    let mut fs = FairShare::new(0, &parts, cfg.priority.max_tres);
    let mut jobs: Vec<Job> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut running: Vec<usize> = Vec::new();
    let mut ends: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut next_rt = vec![0usize; s.accounts.len()];
    let mut now = 0i64;
    let mut started = 0usize;
    loop {
        // Ends at `now`.
        while let Some(Reverse((t, i))) = ends.peek().copied() {
            if t > now {
                break;
            }
            ends.pop();
            fs.ended(&jobs[i], t);
            jobs[i].state = JobState::Completed;
            jobs[i].end_time = Some(t);
            running.retain(|&r| r != i);
        }
        if now >= s.duration {
            break;
        }
        // Each account tops its queue up.
        for (k, (acct, _)) in s.accounts.iter().enumerate() {
            let have = pending
                .iter()
                .filter(|&&i| jobs[i].account == *acct)
                .count();
            for _ in have..s.queued {
                let rt = s.runtimes[next_rt[k] % s.runtimes.len()];
                next_rt[k] += 1;
                let id = jobs.len() as u32 + 1;
                let mut spec = JobSpec::default();
                if s.gpu() {
                    spec.gres = vec![crate::model::gres::GresReq {
                        name: "gpu".into(),
                        kind: None,
                        count: u64::from(s.job_gpus),
                    }];
                }
                jobs.push(Job {
                    id,
                    spec,
                    user: format!("{acct}_user"),
                    partition: "sim".into(),
                    account: acct.clone(),
                    time_limit: TimeLimit::Seconds(rt as u64),
                    req_cpus: s.job_cpus,
                    req_tasks: s.job_cpus,
                    req_nodes: 1,
                    req_mem: MemReq::PerCpu(0),
                    priority: 1,
                    submit_time: now,
                    eligible_time: Some(now),
                    ..Job::default()
                });
                pending.push(jobs.len() - 1);
            }
        }
        fs.prioritise(&mut jobs, &pending, &running, &nodes, &cfg, now);
        let decisions = {
            let refs: Vec<&Job> = pending
                .iter()
                .chain(running.iter())
                .map(|&i| &jobs[i])
                .collect();
            sched::run(&Input {
                jobs: &refs,
                nodes: &nodes,
                partitions: &parts,
                licenses: &[],
                config: &cfg,
                now,
                backfill: true,
                limits: None,
                reservations: &[],
            })
            .decisions
        };
        for d in decisions {
            if let Decision::Start { job_id, alloc, .. } = d {
                let i = job_id as usize - 1;
                let rt = jobs[i].time_limit.secs().unwrap_or(0) as i64;
                jobs[i].state = JobState::Running;
                jobs[i].start_time = Some(now);
                jobs[i].alloc = Some(alloc);
                running.push(i);
                ends.push(Reverse((now + rt, i)));
                let units = if s.gpu() { s.job_gpus } else { s.job_cpus };
                fs.deliver(&jobs[i], units, now, now + rt, s.duration);
                started += 1;
            }
        }
        pending.retain(|&i| jobs[i].state == JobState::Pending);
        now = match ends.peek() {
            Some(Reverse((t, _))) => (*t).min(s.duration),
            None => return Err("nothing runs: the jobs never start".into()),
        };
    }
    let total_shares: f64 = s.accounts.iter().map(|(_, x)| f64::from(*x)).sum();
    let total: f64 = fs.delivered.values().sum();
    let accounts = s
        .accounts
        .iter()
        .map(|(a, sh)| {
            let d = fs.delivered.get(a).copied().unwrap_or(0.0);
            (
                a.clone(),
                f64::from(*sh) / total_shares,
                d / 3600.0,
                if total > 0.0 { d / total } else { 0.0 },
            )
        })
        .collect();
    let per_node = if s.gpu() {
        s.gpus_per_node
    } else {
        s.cpus_per_node
    };
    let capacity = f64::from(s.nodes * per_node) * s.duration as f64;
    Ok(ScenarioResult {
        accounts,
        utilization: total / capacity,
        jobs_started: started,
    })
}

#[cfg(test)]
mod tests;
