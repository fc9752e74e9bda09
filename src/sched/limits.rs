//! Association and QOS limits (cf. src/slurmctld/acct_policy.c): which pending job
//! may start now without passing a limit, with Slurm's exact pending reason when not,
//! and which submissions are refused outright.
//!
//! PURE: the caller passes the association tree, `AccountingStorageEnforce`, the
//! TRES-minutes already used (decayed by the caller) and the active jobs.
//!
//! Counting, as Slurm: a job counts as *running* from its start until it ends
//! (suspended included, completing excluded: Slurm releases limits when the job ends);
//! *submitted* counts pending plus running jobs (an array's meta record counts each task
//! it still holds). `Grp*` limits of an account count every job below it; `Grp*` of a
//! user association count that association's jobs; `Max*` limits apply to each job or
//! association on its own, and a user association without one inherits the nearest
//! account's (Slurm's assoc_mgr inheritance). A QOS's `Grp*` limits count every job
//! in the QOS, its `*PerUser`/`*PerAccount` limits the user's/account's jobs in it.
//!
//! Order of checks (Slurm's pre-select then post-select): QOS job counts and wall
//! time, association job counts and wall time (the job's association, then its
//! accounts up to root), then QOS TRES limits, then association TRES limits. The first
//! limit hit is the reason.
//!
//! `GrpWall` is checked with the job counts (the group's recorded wall minutes, decayed
//! as GrpTRESMins' are, against the limit); QOS `MinTRES` before the QOS TRES limits;
//! QOS `UsageThreshold` (with EnforceUsageThreshold) first of all, against the
//! fair-share factor the caller gives in [`Policy::fairshare`].

use crate::model::assoc::{AssocTree, Enforce, Limits, Qos, QosFlag, TresMap, UserAssoc};
use crate::model::job::Allocation;
use crate::model::limit::{LimitKind as K, LimitReason, Scope};
use crate::model::{Job, JobState, MemReq};
use crate::sched::fairshare::UsageLedger;
use std::collections::HashMap;

use crate::model::billing::BillingTable;
pub use crate::model::billing::Tres;

/// TRES-minutes already used, per account (its whole subtree), per user association
/// `(user, account)` and per QOS: what `GrpTRESMins` and `GrpWall` are checked
/// against. A view of the controller's one usage ledger
/// ([`UsedMins::from_ledger`]), which holds finished jobs' usage and what running jobs
/// used up to the moment it was accrued to; decayed as Slurm decays `usage_tres_raw`.
/// (Serde is kept only to read what controllers before the single ledger stored.)
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsedMins {
    pub accounts: HashMap<String, HashMap<String, f64>>,
    pub users: HashMap<(String, String), HashMap<String, f64>>,
    pub qos: HashMap<String, HashMap<String, f64>>,
    /// Wall minutes used (Slurm's `grp_used_wall`) per account (its whole subtree),
    /// for `GrpWall`.
    #[serde(default)]
    pub wall_accounts: HashMap<String, f64>,
    /// Wall minutes used per user association `(user, account)`.
    #[serde(default)]
    pub wall_users: HashMap<(String, String), f64>,
    /// Wall minutes used per QOS.
    #[serde(default)]
    pub wall_qos: HashMap<String, f64>,
}

impl UsedMins {
    /// The view of `ledger` (seconds) in minutes: each user association's usage, the
    /// sum for every account from its account up to root, and each QOS's. The
    /// ledger's billing-seconds are the `billing` TRES.
    pub fn from_ledger(ledger: &UsageLedger, tree: &AssocTree) -> UsedMins {
        let mut out = UsedMins::default();
        let keys: std::collections::BTreeSet<&(String, String)> = ledger
            .usage
            .keys()
            .chain(ledger.tres.keys())
            .chain(ledger.wall.keys())
            .collect();
        for key in keys {
            let (account, user) = (key.0.as_str(), key.1.as_str());
            let mut mins: HashMap<String, f64> = ledger
                .tres
                .get(key)
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v / 60.0))
                .collect();
            if let Some(b) = ledger.usage.get(key) {
                mins.insert("billing".into(), b / 60.0);
            }
            let wall = ledger.wall.get(key).copied().unwrap_or(0.0) / 60.0;
            let chain = tree.parent_chain(account);
            add_mins(
                out.users.entry((user.into(), account.into())).or_default(),
                &mins,
            );
            for a in &chain {
                add_mins(out.accounts.entry(a.name.clone()).or_default(), &mins);
            }
            if wall > 0.0 {
                *out.wall_users
                    .entry((user.into(), account.into()))
                    .or_default() += wall;
                for a in &chain {
                    *out.wall_accounts.entry(a.name.clone()).or_default() += wall;
                }
            }
        }
        for (name, q) in &ledger.qos {
            let m = out.qos.entry(name.clone()).or_default();
            for (k, v) in &q.tres {
                *m.entry(k.clone()).or_default() += v / 60.0;
            }
            if q.billing > 0.0 {
                *m.entry("billing".into()).or_default() += q.billing / 60.0;
            }
            if q.wall > 0.0 {
                *out.wall_qos.entry(name.clone()).or_default() += q.wall / 60.0;
            }
        }
        out
    }

    /// Adds `tres` × `minutes` of a finished (or finishing) job of `user` under
    /// `account` in `qos` to its user association, every account from `account` up to
    /// root, and the QOS.
    pub fn record(
        &mut self,
        tree: &AssocTree,
        (user, account, qos): (&str, &str, &str),
        tres: &Tres,
        minutes: f64,
    ) {
        let add = |m: &mut HashMap<String, f64>| {
            for (k, v) in tres {
                *m.entry(k.clone()).or_default() += *v as f64 * minutes;
            }
        };
        add(self
            .users
            .entry((user.to_string(), account.to_string()))
            .or_default());
        for a in tree.parent_chain(account) {
            add(self.accounts.entry(a.name.clone()).or_default());
        }
        add(self.qos.entry(qos.to_string()).or_default());
    }

    /// Adds `minutes` of wall time of a job of `user` under `account` in `qos` to its
    /// user association, every account from `account` up to root, and the QOS
    /// (what `GrpWall` is checked against).
    pub fn record_wall(
        &mut self,
        tree: &AssocTree,
        (user, account, qos): (&str, &str, &str),
        minutes: f64,
    ) {
        if !(minutes > 0.0 && minutes.is_finite()) {
            return;
        }
        *self
            .wall_users
            .entry((user.to_string(), account.to_string()))
            .or_default() += minutes;
        for a in tree.parent_chain(account) {
            *self.wall_accounts.entry(a.name.clone()).or_default() += minutes;
        }
        *self.wall_qos.entry(qos.to_string()).or_default() += minutes;
    }

    /// Adds `tres` × `minutes` and `wall_minutes` of wall time to `qos` alone: what a
    /// job charges its partition's QOS when that is not the job's own (Slurm counts a
    /// job's usage in both).
    pub fn record_qos(&mut self, qos: &str, tres: &Tres, minutes: f64, wall_minutes: f64) {
        let m = self.qos.entry(qos.to_string()).or_default();
        for (k, v) in tres {
            *m.entry(k.clone()).or_default() += *v as f64 * minutes;
        }
        if wall_minutes > 0.0 && wall_minutes.is_finite() {
            *self.wall_qos.entry(qos.to_string()).or_default() += wall_minutes;
        }
    }

    /// Multiplies every figure by `factor` (decay).
    pub fn scale(&mut self, factor: f64) {
        let s = |m: &mut HashMap<String, f64>| m.values_mut().for_each(|v| *v *= factor);
        self.accounts.values_mut().for_each(s);
        self.users.values_mut().for_each(s);
        self.qos.values_mut().for_each(s);
        self.wall_accounts.values_mut().for_each(|v| *v *= factor);
        self.wall_users.values_mut().for_each(|v| *v *= factor);
        self.wall_qos.values_mut().for_each(|v| *v *= factor);
    }
}

/// Adds every entry of `from` to `to`.
fn add_mins(to: &mut HashMap<String, f64>, from: &HashMap<String, f64>) {
    for (k, v) in from {
        *to.entry(k.clone()).or_default() += v;
    }
}

/// What the limit checks need to know about accounting.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    pub tree: &'a AssocTree,
    pub enforce: Enforce,
    pub used: &'a UsedMins,
    /// Fair-share factors (0..1) by `(account, user)`, for QOS `UsageThreshold`;
    /// `None` when no QOS enforces one (then the check is skipped).
    pub fairshare: Option<&'a HashMap<(String, String), f64>>,
    /// Partition QOS (`QOS=` of a partition) by partition name; `None` when no
    /// partition has one. A name that is not a QOS of the tree is ignored.
    pub partition_qos: Option<&'a HashMap<String, String>>,
    /// How jobs are billed (the `billing` TRES of every limit); `None` bills CPUs.
    pub billing: Option<&'a BillingTable>,
}

impl<'a> Policy<'a> {
    /// The billing table (an empty one, billing CPUs, when none is set).
    fn billing(&self) -> &'a BillingTable {
        self.billing.unwrap_or(&*EMPTY_BILLING)
    }

    /// The QOS whose limits apply to a job of QOS `job_qos` in `partition`, the one
    /// whose limits win first (Slurm's `acct_policy_set_qos_order`): the partition's
    /// QOS before the job's unless the job's has the flag `OverPartQOS`; one entry
    /// when both are the same QOS or only one exists; none when neither does.
    pub fn qos_order(&self, job_qos: &str, partition: &str) -> Vec<&'a Qos> {
        let job = self.tree.qos(job_qos);
        let part = self
            .partition_qos
            .and_then(|m| m.get(partition))
            .and_then(|n| self.tree.qos(n));
        match (job, part) {
            (Some(j), Some(p)) if j.name == p.name => vec![j],
            (Some(j), Some(p)) if j.has_flag(QosFlag::OverPartQos) => vec![j, p],
            (Some(j), Some(p)) => vec![p, j],
            (j, p) => j.into_iter().chain(p).collect(),
        }
    }
}

/// The limits of each QOS of `qs` (in precedence order) that it decides: a limit (or,
/// for TRES limits, a TRES of one) set by an earlier QOS of the list is dropped from
/// the later ones, as acct_policy.c checks the second QOS only where the first left
/// a limit unset.
fn owned_limits(qs: &[&Qos]) -> Vec<Limits> {
    fn opt(l: &mut Option<u32>, earlier: Option<u32>) {
        if earlier.is_some() {
            *l = None;
        }
    }
    fn tres(l: &mut TresMap, earlier: &TresMap) {
        let mut out = TresMap::new();
        for (k, v) in l.iter().filter(|(k, _)| earlier.get(k).is_none()) {
            out.set(k, v);
        }
        *l = out;
    }
    let mut out: Vec<Limits> = Vec::with_capacity(qs.len());
    for (i, q) in qs.iter().enumerate() {
        let mut l = q.limits.clone();
        for e in qs[..i].iter().map(|p| &p.limits) {
            opt(&mut l.max_jobs, e.max_jobs);
            opt(&mut l.max_submit_jobs, e.max_submit_jobs);
            opt(&mut l.max_wall_mins, e.max_wall_mins);
            opt(&mut l.max_jobs_per_user, e.max_jobs_per_user);
            opt(&mut l.max_submit_jobs_per_user, e.max_submit_jobs_per_user);
            opt(&mut l.max_jobs_per_account, e.max_jobs_per_account);
            opt(
                &mut l.max_submit_jobs_per_account,
                e.max_submit_jobs_per_account,
            );
            opt(&mut l.grp_jobs, e.grp_jobs);
            opt(&mut l.grp_submit_jobs, e.grp_submit_jobs);
            opt(&mut l.grp_wall_mins, e.grp_wall_mins);
            tres(&mut l.max_tres_per_job, &e.max_tres_per_job);
            tres(&mut l.max_tres_per_node, &e.max_tres_per_node);
            tres(&mut l.max_tres_mins_per_job, &e.max_tres_mins_per_job);
            tres(&mut l.max_tres_per_user, &e.max_tres_per_user);
            tres(&mut l.max_tres_per_account, &e.max_tres_per_account);
            tres(&mut l.grp_tres, &e.grp_tres);
            tres(&mut l.grp_tres_mins, &e.grp_tres_mins);
            tres(&mut l.grp_tres_run_mins, &e.grp_tres_run_mins);
            tres(&mut l.min_tres_per_job, &e.min_tres_per_job);
        }
        out.push(l);
    }
    out
}

/// A job's TRES in total (cpu, mem, node, billing, each `gres/NAME` and
/// `gres/NAME:TYPE`, `license/NAME`). A running job's come from its allocation, a
/// pending job's from its request; billing is what `billing` makes of them in the
/// job's partition (the CPU count without weights), truncated as Slurm stores it.
pub fn job_tres(job: &Job, billing: &BillingTable) -> Tres {
    billing.with_billing(&job.partition, job_tres_unbilled(job))
}

/// A job's billable TRES (not truncated): what [`job_tres`]'s `billing` entry is
/// made of, and what the usage ledger charges per second.
pub fn job_billable(job: &Job, billing: &BillingTable) -> f64 {
    billing.billable(&job.partition, &job_tres_unbilled(job))
}

/// [`job_tres`] without the billing entry.
fn job_tres_unbilled(job: &Job) -> Tres {
    if let Some(a) = job
        .alloc
        .as_ref()
        .filter(|_| job.state != JobState::Pending)
    {
        return alloc_tres(a);
    }
    request_tres(job)
}

/// The TRES a job asks for (whatever it holds): CPUs, nodes, memory, GRES with and
/// without type (per node × nodes, `--gpus`, per task × tasks) and licenses; no
/// billing entry.
pub fn request_tres(job: &Job) -> Tres {
    let mut t = Tres::new();
    let mut add = |k: String, v: u64| {
        if v > 0 {
            *t.entry(k).or_default() += v;
        }
    };
    let cpus = u64::from(job.req_cpus.max(1));
    let nodes = u64::from(job.req_nodes.max(1));
    add("cpu".into(), cpus);
    add("node".into(), nodes);
    add(
        "mem".into(),
        match job.req_mem {
            MemReq::PerNode(m) => m.saturating_mul(nodes),
            MemReq::PerCpu(m) => m.saturating_mul(cpus),
        },
    );
    let s = &job.spec;
    let tasks = u64::from(job.req_tasks.max(1));
    let per_job = s
        .gres
        .iter()
        .map(|g| (g, nodes))
        .chain(s.gpus_per_node.iter().map(|g| (g, nodes)))
        .chain(s.gpus.iter().map(|g| (g, 1)))
        .chain(s.gpus_per_task.iter().map(|g| (g, tasks)));
    for (g, mult) in per_job {
        let n = g.count.saturating_mul(mult);
        add(format!("gres/{}", g.name), n);
        if let Some(k) = &g.kind {
            add(format!("gres/{}:{k}", g.name), n);
        }
    }
    for l in &s.licenses {
        add(format!("license/{}", l.name), u64::from(l.count));
    }
    t
}

/// The TRES an allocation holds (cpu, node, mem, GRES with and without type,
/// licenses); no billing entry (that depends on the partition: [`job_tres`],
/// [`BillingTable::billable`]).
pub fn alloc_tres(a: &Allocation) -> Tres {
    let mut t = Tres::new();
    let mut add = |k: String, v: u64| {
        if v > 0 {
            *t.entry(k).or_default() += v;
        }
    };
    add("cpu".into(), u64::from(a.total_cpus()));
    add("node".into(), a.nodes.len() as u64);
    add("mem".into(), a.mem_per_node * a.nodes.len() as u64);
    for g in a.gres.iter().flatten() {
        add(format!("gres/{}", g.name), u64::from(g.count));
        if let Some(k) = &g.kind {
            add(format!("gres/{}:{k}", g.name), u64::from(g.count));
        }
    }
    for l in &a.licenses {
        add(format!("license/{}", l.name), u64::from(l.count));
    }
    t
}

/// A job's TRES on its busiest node (for MaxTRESPerNode).
fn job_tres_per_node(job: &Job, total: &Tres) -> Tres {
    let nodes = match job
        .alloc
        .as_ref()
        .filter(|_| job.state != JobState::Pending)
    {
        Some(a) => a.nodes.len().max(1) as u64,
        None => u64::from(job.req_nodes.max(1)),
    };
    total
        .iter()
        .filter(|(k, _)| k.as_str() != "node")
        .map(|(k, v)| (k.clone(), v.div_ceil(nodes)))
        .collect()
}

/// The job's time limit in minutes; `None` when unlimited.
fn limit_mins(job: &Job) -> Option<f64> {
    job.time_limit.secs().map(|s| s as f64 / 60.0)
}

/// How many jobs a record stands for in submit counts: the tasks an array's meta
/// record still holds, else 1.
fn job_count(job: &Job) -> u32 {
    match &job.array {
        Some(a) if job.array_task_id.is_none() => (a.tasks.len() as u32).max(1),
        _ => 1,
    }
}

/// Running and submitted counts of one group.
#[derive(Debug, Clone, Default)]
struct Usage {
    running: u32,
    submitted: u32,
    tres: HashMap<String, u64>,
    /// TRES × remaining time-limit minutes of the running jobs.
    run_mins: HashMap<String, f64>,
}

impl Usage {
    fn add_running(&mut self, tres: &Tres, remaining_mins: f64) {
        self.running += 1;
        for (k, v) in tres {
            *self.tres.entry(k.clone()).or_default() += v;
            *self.run_mins.entry(k.clone()).or_default() += *v as f64 * remaining_mins;
        }
    }
}

/// Where a job's usage is counted.
struct Groups<'t> {
    /// Index of the job's user association in `tree.user_assocs`.
    assoc: Option<usize>,
    /// The job's account and its ancestors, nearest first.
    chain: Vec<&'t str>,
    /// The job's QOS and its partition's, in precedence order ([`Policy::qos_order`]).
    qos: Vec<&'t Qos>,
}

/// The limit state of one scheduling pass: usage counted from the active jobs, and
/// charged further as the pass starts jobs.
pub struct LimitState<'a> {
    policy: Policy<'a>,
    /// `(user, account)` → indices of user associations (partition-specific first).
    index: HashMap<(&'a str, &'a str), Vec<usize>>,
    assocs: HashMap<usize, Usage>,
    accounts: HashMap<&'a str, Usage>,
    qos: HashMap<&'a str, Usage>,
    qos_user: HashMap<(&'a str, String), Usage>,
    qos_acct: HashMap<(&'a str, String), Usage>,
}

/// The effective `Max*` limits of a user association: its own, else the nearest
/// account's up the chain.
#[derive(Debug, Default)]
struct MaxLimits {
    max_jobs: Option<u32>,
    max_submit: Option<u32>,
    max_wall: Option<u32>,
    per_job: TresMap,
    per_node: TresMap,
    mins_per_job: TresMap,
}

impl<'a> LimitState<'a> {
    /// Counts the usage of `jobs` (every active job; others are ignored) at `now`.
    pub fn new(policy: Policy<'a>, jobs: &[&Job], now: i64) -> LimitState<'a> {
        let mut index: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, a) in policy.tree.user_assocs.iter().enumerate() {
            index
                .entry((a.user.as_str(), a.account.as_str()))
                .or_default()
                .push(i);
        }
        let mut st = LimitState {
            policy,
            index,
            assocs: HashMap::new(),
            accounts: HashMap::new(),
            qos: HashMap::new(),
            qos_user: HashMap::new(),
            qos_acct: HashMap::new(),
        };
        if !policy.enforce.limits {
            return st;
        }
        for j in jobs {
            let running =
                matches!(j.state, JobState::Running | JobState::Suspended) && !j.completing;
            let pending = j.state == JobState::Pending;
            if !running && !pending {
                continue;
            }
            let n = job_count(j);
            st.for_each_group(j, |u| u.submitted += n);
            if running {
                let tres = job_tres(j, policy.billing());
                let remaining = match (limit_mins(j), j.start_time) {
                    (Some(m), Some(s)) => (m - (now - s).max(0) as f64 / 60.0).max(0.0),
                    (Some(m), None) => m,
                    (None, _) => 0.0,
                };
                st.for_each_group(j, |u| u.add_running(&tres, remaining));
            }
        }
        st
    }

    fn groups(&self, job: &Job) -> Groups<'a> {
        let tree = self.policy.tree;
        let assoc = self
            .index
            .get(&(job.user.as_str(), job.account.as_str()))
            .and_then(|v| {
                v.iter()
                    .copied()
                    .find(|&i| tree.user_assocs[i].partition.as_deref() == Some(&job.partition))
                    .or_else(|| {
                        v.iter()
                            .copied()
                            .find(|&i| tree.user_assocs[i].partition.is_none())
                    })
            });
        Groups {
            assoc,
            chain: tree
                .parent_chain(&job.account)
                .into_iter()
                .map(|a| a.name.as_str())
                .collect(),
            qos: self.policy.qos_order(&job.qos, &job.partition),
        }
    }

    fn for_each_group(&mut self, job: &Job, mut f: impl FnMut(&mut Usage)) {
        let g = self.groups(job);
        if let Some(i) = g.assoc {
            f(self.assocs.entry(i).or_default());
        }
        for a in g.chain {
            f(self.accounts.entry(a).or_default());
        }
        for q in g.qos {
            let name = q.name.as_str();
            f(self.qos.entry(name).or_default());
            f(self.qos_user.entry((name, job.user.clone())).or_default());
            f(self
                .qos_acct
                .entry((name, job.account.clone()))
                .or_default());
        }
    }

    fn max_limits(&self, assoc: Option<&UserAssoc>, chain: &[&str]) -> MaxLimits {
        let tree = self.policy.tree;
        let levels: Vec<&Limits> = assoc
            .map(|a| &a.limits)
            .into_iter()
            .chain(
                chain
                    .iter()
                    .filter_map(|n| tree.account(n))
                    .map(|a| &a.limits),
            )
            .collect();
        let first = |f: &dyn Fn(&Limits) -> Option<u32>| levels.iter().find_map(|l| f(l));
        // A TRES limit is inherited per TRES: the nearest level that names it.
        let tres = |f: &dyn Fn(&Limits) -> &TresMap| {
            let mut out = TresMap::new();
            for l in levels.iter().rev() {
                for (k, v) in f(l).iter() {
                    out.set(k, v);
                }
            }
            out
        };
        MaxLimits {
            max_jobs: first(&|l| l.max_jobs),
            max_submit: first(&|l| l.max_submit_jobs),
            max_wall: first(&|l| l.max_wall_mins),
            per_job: tres(&|l| &l.max_tres_per_job),
            per_node: tres(&|l| &l.max_tres_per_node),
            mins_per_job: tres(&|l| &l.max_tres_mins_per_job),
        }
    }

    /// Why `job` may not start now because of a limit, or `None`. Always `None` unless
    /// `AccountingStorageEnforce` includes `limits`.
    pub fn check(&self, job: &Job) -> Option<LimitReason> {
        if !self.policy.enforce.limits {
            return None;
        }
        let g = self.groups(job);
        let tree = self.policy.tree;
        let assoc = g.assoc.map(|i| &tree.user_assocs[i]);
        let empty = Usage::default();
        let mins = limit_mins(job);
        // Each QOS with the limits it decides and its usage (all, the user's, the
        // account's).
        let owned = owned_limits(&g.qos);
        let qos_use: Vec<(&Qos, &Limits, (&Usage, &Usage, &Usage))> = g
            .qos
            .iter()
            .zip(&owned)
            .map(|(q, l)| {
                let n = q.name.as_str();
                let u = (
                    self.qos.get(n).unwrap_or(&empty),
                    self.qos_user.get(&(n, job.user.clone())).unwrap_or(&empty),
                    self.qos_acct
                        .get(&(n, job.account.clone()))
                        .unwrap_or(&empty),
                );
                (*q, l, u)
            })
            .collect();
        let wall_over = |max: Option<u32>| match (max, mins) {
            (Some(m), Some(t)) => t > f64::from(m),
            (Some(_), None) => true,
            (None, _) => false,
        };
        // ---- usage threshold (job_scheduler.c: before the accounting limits)
        if let Some(q) = self.policy.tree.qos(&job.qos)
            && q.has_flag(QosFlag::EnforceUsageThreshold)
            && let (Some(thres), Some(fs)) = (q.usage_threshold, self.policy.fairshare)
            && fs
                .get(&(job.account.clone(), job.user.clone()))
                .is_some_and(|f| *f < thres)
        {
            return Some(LimitReason::plain(Scope::Qos, K::UsageThreshold));
        }
        let used = self.policy.used;
        let wall_used = |lim: Option<u32>, used: Option<&f64>| {
            lim.is_some_and(|m| used.copied().unwrap_or(0.0) >= f64::from(m))
        };
        // ---- job counts and wall time: QOS, then associations
        for &(q, l, (all, user, acct)) in &qos_use {
            let over = |lim: Option<u32>, u: &Usage| lim.is_some_and(|m| u.running + 1 > m);
            if over(l.grp_jobs, all) {
                return Some(LimitReason::plain(Scope::Qos, K::GrpJobs));
            }
            if wall_used(l.grp_wall_mins, used.wall_qos.get(&q.name)) {
                return Some(LimitReason::plain(Scope::Qos, K::GrpWall));
            }
            if over(l.max_jobs_per_user, user) {
                return Some(LimitReason::plain(Scope::Qos, K::MaxJobsPerUser));
            }
            if over(l.max_jobs_per_account, acct) {
                return Some(LimitReason::plain(Scope::Qos, K::MaxJobsPerAccount));
            }
            if wall_over(l.max_wall_mins) {
                return Some(LimitReason::plain(Scope::Qos, K::MaxWall));
            }
        }
        let max = self.max_limits(assoc, &g.chain);
        if let Some(i) = g.assoc {
            let u = self.assocs.get(&i).unwrap_or(&empty);
            let l = &tree.user_assocs[i].limits;
            if l.grp_jobs.is_some_and(|m| u.running + 1 > m) {
                return Some(LimitReason::plain(Scope::Assoc, K::GrpJobs));
            }
            let key = (job.user.clone(), job.account.clone());
            if wall_used(l.grp_wall_mins, used.wall_users.get(&key)) {
                return Some(LimitReason::plain(Scope::Assoc, K::GrpWall));
            }
            if max.max_jobs.is_some_and(|m| u.running + 1 > m) {
                return Some(LimitReason::plain(Scope::Assoc, K::MaxJobs));
            }
            if wall_over(max.max_wall) {
                return Some(LimitReason::plain(Scope::Assoc, K::MaxWall));
            }
        }
        for name in &g.chain {
            let Some(a) = tree.account(name) else {
                continue;
            };
            let u = self.accounts.get(name).unwrap_or(&empty);
            if a.limits.grp_jobs.is_some_and(|m| u.running + 1 > m) {
                return Some(LimitReason::plain(Scope::Assoc, K::GrpJobs));
            }
            if wall_used(a.limits.grp_wall_mins, used.wall_accounts.get(*name)) {
                return Some(LimitReason::plain(Scope::Assoc, K::GrpWall));
            }
        }
        // ---- TRES: QOS, then associations
        let jt = job_tres(job, self.policy.billing());
        let pn = job_tres_per_node(job, &jt);
        let need = |t: &str| jt.get(t).copied().unwrap_or(0);
        let safe = self.policy.enforce.safe;
        let mins_or_inf = mins.unwrap_or(f64::INFINITY);
        // The first TRES of `lim` that `over(tres, limit)` says is passed.
        let first_over = |lim: &TresMap, over: &dyn Fn(&str, u64) -> bool| {
            lim.iter()
                .find(|(t, v)| over(t, *v))
                .map(|(t, _)| t.to_string())
        };
        let grp_checks = |scope: Scope,
                          l: &Limits,
                          u: &Usage,
                          used: Option<&HashMap<String, f64>>|
         -> Option<LimitReason> {
            let used_of = |t: &str| used.and_then(|m| m.get(t)).copied().unwrap_or(0.0);
            // acct_policy.c `_validate_tres_usage_limits`: a job asking a TRES waits
            // once the group's usage (finished jobs plus what running ones used so
            // far) reaches the limit; with `safe`, also when that usage plus what the
            // running jobs may still use (their time left) plus this job's whole
            // time limit would pass it.
            if let Some(t) = first_over(&l.grp_tres_mins, &|t, v| {
                let run = u.run_mins.get(t).copied().unwrap_or(0.0);
                need(t) > 0
                    && (used_of(t) >= v as f64
                        || safe && used_of(t) + run + need(t) as f64 * mins_or_inf > v as f64)
            }) {
                return Some(LimitReason::tres(scope, K::GrpTresMins, &t));
            }
            if let Some(t) = first_over(&l.grp_tres, &|t, v| {
                need(t) > 0 && u.tres.get(t).copied().unwrap_or(0) + need(t) > v
            }) {
                return Some(LimitReason::tres(scope, K::GrpTres, &t));
            }
            if let Some(t) = first_over(&l.grp_tres_run_mins, &|t, v| {
                need(t) > 0
                    && u.run_mins.get(t).copied().unwrap_or(0.0) + need(t) as f64 * mins_or_inf
                        > v as f64
            }) {
                return Some(LimitReason::tres(scope, K::GrpTresRunMins, &t));
            }
            None
        };
        let per_job_checks = |scope: Scope,
                              per_job: &TresMap,
                              per_node: &TresMap,
                              mins_per_job: &TresMap|
         -> Option<LimitReason> {
            if let Some(t) = first_over(mins_per_job, &|t, v| {
                need(t) > 0 && need(t) as f64 * mins_or_inf > v as f64
            }) {
                return Some(LimitReason::tres(scope, K::MaxTresMinsPerJob, &t));
            }
            if let Some(t) = first_over(per_job, &|t, v| need(t) > v) {
                return Some(LimitReason::tres(scope, K::MaxTresPerJob, &t));
            }
            if let Some(t) = first_over(per_node, &|t, v| pn.get(t).copied().unwrap_or(0) > v) {
                return Some(LimitReason::tres(scope, K::MaxTresPerNode, &t));
            }
            None
        };
        for &(q, l, (all, user, acct)) in &qos_use {
            if let Some(t) = first_over(&l.min_tres_per_job, &|t, v| need(t) < v) {
                return Some(LimitReason::tres(Scope::Qos, K::MinTresPerJob, &t));
            }
            if let Some(r) = grp_checks(Scope::Qos, l, all, self.policy.used.qos.get(&q.name)) {
                return Some(r);
            }
            if let Some(r) = per_job_checks(
                Scope::Qos,
                &l.max_tres_per_job,
                &l.max_tres_per_node,
                &l.max_tres_mins_per_job,
            ) {
                return Some(r);
            }
            if let Some(t) = first_over(&l.max_tres_per_user, &|t, v| {
                need(t) > 0 && user.tres.get(t).copied().unwrap_or(0) + need(t) > v
            }) {
                return Some(LimitReason::tres(Scope::Qos, K::MaxTresPerUser, &t));
            }
            if let Some(t) = first_over(&l.max_tres_per_account, &|t, v| {
                need(t) > 0 && acct.tres.get(t).copied().unwrap_or(0) + need(t) > v
            }) {
                return Some(LimitReason::tres(Scope::Qos, K::MaxTresPerAccount, &t));
            }
        }
        if let Some(i) = g.assoc {
            let a = &tree.user_assocs[i];
            let u = self.assocs.get(&i).unwrap_or(&empty);
            let used = self
                .policy
                .used
                .users
                .get(&(a.user.clone(), a.account.clone()));
            if let Some(r) = grp_checks(Scope::Assoc, &a.limits, u, used) {
                return Some(r);
            }
        }
        for name in &g.chain {
            let Some(a) = tree.account(name) else {
                continue;
            };
            let u = self.accounts.get(name).unwrap_or(&empty);
            let used = self.policy.used.accounts.get(*name);
            if let Some(r) = grp_checks(Scope::Assoc, &a.limits, u, used) {
                return Some(r);
            }
        }
        per_job_checks(Scope::Assoc, &max.per_job, &max.per_node, &max.mins_per_job)
    }

    /// Whether running `job` must end now because of a limit (Slurm's
    /// `acct_policy_job_time_out`, which ends it TIMEOUT): its QOS's or association
    /// chain's `GrpTRESMins` (for a TRES it holds) or `GrpWall` has been reached by the
    /// usage so far, or the job itself has used more than its `MaxTRESMinsPerJob`
    /// (TRES held × minutes run). QOS first, then the user association and its
    /// accounts, root excluded (Slurm does not apply these on the root association).
    /// Never with `safe` enforcement (a job started safe may finish) nor without
    /// `limits`. Returns the reason as Slurm words it, for the log.
    pub fn time_out(&self, job: &Job, now: i64) -> Option<String> {
        let e = self.policy.enforce;
        if !e.limits || e.safe || !matches!(job.state, JobState::Running) {
            return None;
        }
        let g = self.groups(job);
        let tree = self.policy.tree;
        let used = self.policy.used;
        let held = job_tres(job, self.policy.billing());
        let ran_mins = (job.run_secs(now) / 60) as f64;
        // What the job used, +1 so that `>` means "at or past" (as Slurm counts).
        let job_mins = |t: &str| held.get(t).map_or(0.0, |&c| ran_mins * c as f64 + 1.0);
        let grp_over = |lim: &TresMap, used: Option<&HashMap<String, f64>>| {
            lim.iter()
                .find(|(t, v)| {
                    held.get(*t).is_some_and(|&c| c > 0)
                        && used.and_then(|m| m.get(*t)).copied().unwrap_or(0.0) >= *v as f64
                })
                .map(|(t, v)| (t.to_string(), v))
        };
        let wall_over = |lim: Option<u32>, used: Option<&f64>| {
            lim.filter(|&m| used.copied().unwrap_or(0.0) >= f64::from(m))
        };
        let max_over = |lim: &TresMap, skip_node: bool| {
            lim.iter()
                .find(|(t, v)| !(skip_node && *t == "node") && job_mins(t) > *v as f64)
                .map(|(t, v)| (t.to_string(), v))
        };
        let owned = owned_limits(&g.qos);
        for (q, l) in g.qos.iter().zip(&owned) {
            if let Some((t, v)) = grp_over(&l.grp_tres_mins, used.qos.get(&q.name)) {
                return Some(format!(
                    "Job is at or exceeds QOS {}'s group max TRES({t}) minutes of {v}",
                    q.name
                ));
            }
            if let Some(m) = wall_over(l.grp_wall_mins, used.wall_qos.get(&q.name)) {
                return Some(format!(
                    "Job is at or exceeds QOS {}'s group wall limit of {m}",
                    q.name
                ));
            }
            if let Some((t, v)) = max_over(&l.max_tres_mins_per_job, false) {
                return Some(format!(
                    "Job is at or exceeds QOS {}'s max TRES({t}) minutes of {v}",
                    q.name
                ));
            }
        }
        // A limit a QOS sets is the QOS's to decide (acct_policy.c passes the QOS's
        // limits as "already imposed").
        let qos_sets_mins = |t: &str| owned.iter().any(|l| l.grp_tres_mins.get(t).is_some());
        let qos_sets_wall = owned.iter().any(|l| l.grp_wall_mins.is_some());
        let qos_sets_max = |t: &str| {
            owned
                .iter()
                .any(|l| l.max_tres_mins_per_job.get(t).is_some())
        };
        let part = job.partition.as_str();
        // Each level: its limits, its TRES-minutes and wall minutes used, and how
        // Slurm names it in the message.
        type Level<'l> = (
            &'l Limits,
            Option<&'l HashMap<String, f64>>,
            Option<&'l f64>,
            String,
        );
        let levels: Vec<Level> = g
            .assoc
            .map(|i| {
                let a = &tree.user_assocs[i];
                let key = (a.user.clone(), a.account.clone());
                (
                    &a.limits,
                    used.users.get(&key),
                    used.wall_users.get(&key),
                    format!("acc={}/user={}/part={}", a.account, a.user, part),
                )
            })
            .into_iter()
            .chain(
                g.chain
                    .iter()
                    .filter(|n| **n != crate::model::assoc::ROOT)
                    .filter_map(|n| tree.account(n))
                    .map(|a| {
                        (
                            &a.limits,
                            used.accounts.get(&a.name),
                            used.wall_accounts.get(&a.name),
                            format!("acc={}/user=/part=", a.name),
                        )
                    }),
            )
            .collect();
        for (l, u, w, who) in levels {
            let mut grp = l.grp_tres_mins.clone();
            grp.retain(|t| !qos_sets_mins(t));
            if let Some((t, v)) = grp_over(&grp, u) {
                return Some(format!(
                    "Job is at or exceeds association ({who}) group max TRES({t}) minutes of {v}"
                ));
            }
            if !qos_sets_wall && let Some(m) = wall_over(l.grp_wall_mins, w) {
                return Some(format!(
                    "Job is at or exceeds association ({who}) group wall limit {m}"
                ));
            }
            let mut max = l.max_tres_mins_per_job.clone();
            max.retain(|t| !qos_sets_max(t));
            if let Some((t, v)) = max_over(&max, true) {
                return Some(format!(
                    "Job is at or exceeds association ({who}) max TRES({t}) minutes of {v}"
                ));
            }
        }
        None
    }

    /// Counts `job` as started now (by this pass), so later jobs of the pass see it.
    pub fn charge(&mut self, job: &Job) {
        if !self.policy.enforce.limits {
            return;
        }
        let tres = job_tres(job, self.policy.billing());
        let mins = limit_mins(job).unwrap_or(0.0);
        self.for_each_group(job, |u| u.add_running(&tres, mins));
    }

    /// The submit-time check (Slurm's acct_policy_validate): a submission that would
    /// pass a `*Submit*` limit is refused; with the QOS flag `DenyOnLimit`, so is one
    /// that alone passes a per-job, per-node, per-user or group TRES or wall limit
    /// (without it, such a job pends with the reason). `Ok` unless
    /// `AccountingStorageEnforce` includes `limits`.
    pub fn submit_check(&self, job: &Job) -> Result<(), LimitReason> {
        if !self.policy.enforce.limits {
            return Ok(());
        }
        let g = self.groups(job);
        let tree = self.policy.tree;
        let n = job_count(job);
        let empty = Usage::default();
        let over = |lim: Option<u32>, u: &Usage| lim.is_some_and(|m| u.submitted + n > m);
        for (q, l) in g.qos.iter().zip(owned_limits(&g.qos)) {
            let l = &l;
            let name = q.name.as_str();
            if over(l.grp_submit_jobs, self.qos.get(name).unwrap_or(&empty)) {
                return Err(LimitReason::plain(Scope::Qos, K::GrpSubmit));
            }
            let user = self.qos_user.get(&(name, job.user.clone()));
            if over(l.max_submit_jobs_per_user, user.unwrap_or(&empty)) {
                return Err(LimitReason::plain(Scope::Qos, K::MaxSubmitPerUser));
            }
            let acct = self.qos_acct.get(&(name, job.account.clone()));
            if over(l.max_submit_jobs_per_account, acct.unwrap_or(&empty)) {
                return Err(LimitReason::plain(Scope::Qos, K::MaxSubmitPerAccount));
            }
        }
        let assoc = g.assoc.map(|i| &tree.user_assocs[i]);
        let max = self.max_limits(assoc, &g.chain);
        if let Some(i) = g.assoc {
            let u = self.assocs.get(&i).unwrap_or(&empty);
            if over(tree.user_assocs[i].limits.grp_submit_jobs, u) {
                return Err(LimitReason::plain(Scope::Assoc, K::GrpSubmit));
            }
            if over(max.max_submit, u) {
                return Err(LimitReason::plain(Scope::Assoc, K::MaxSubmit));
            }
        }
        for name in &g.chain {
            if let Some(a) = tree.account(name)
                && over(
                    a.limits.grp_submit_jobs,
                    self.accounts.get(name).unwrap_or(&empty),
                )
            {
                return Err(LimitReason::plain(Scope::Assoc, K::GrpSubmit));
            }
        }
        if g.qos.iter().any(|q| q.has_flag(QosFlag::DenyOnLimit)) {
            // The job alone, on an idle cluster: what `check` would say.
            let alone = LimitState {
                policy: Policy {
                    used: &EMPTY_USED,
                    fairshare: None,
                    enforce: Enforce {
                        safe: false,
                        ..self.policy.enforce
                    },
                    ..self.policy
                },
                index: self.index.clone(),
                assocs: HashMap::new(),
                accounts: HashMap::new(),
                qos: HashMap::new(),
                qos_user: HashMap::new(),
                qos_acct: HashMap::new(),
            };
            if let Some(r) = alone.check(job) {
                return Err(r);
            }
        }
        Ok(())
    }
}

static EMPTY_USED: std::sync::LazyLock<UsedMins> = std::sync::LazyLock::new(UsedMins::default);
static EMPTY_BILLING: std::sync::LazyLock<BillingTable> =
    std::sync::LazyLock::new(BillingTable::default);

#[cfg(test)]
mod tests;
