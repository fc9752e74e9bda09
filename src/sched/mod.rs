//! The scheduler core. PURE and deterministic: no I/O, no clock, no randomness
//! (DESIGN.md §3, §5); the caller passes a snapshot and `now` and applies the returned
//! decisions. The controller and `sluice simulate` drive the same [`run`].
//!
//! One pass (cf. slurmctld/job_scheduler.c `schedule()` and
//! plugins/sched/backfill/backfill.c `_attempt_backfill()`):
//!
//! 1. **Main cycle**: pending jobs in order of partition PriorityTier, then priority;
//!    each either starts on nodes chosen by [`select`] or stays pending with Slurm's
//!    reason. Once a job of a partition is blocked on resources, the jobs behind it in
//!    that partition wait with reason `Priority` (with [`Policy::Fifo`], every job behind
//!    it, whatever its partition).
//! 2. **Backfill** (when asked): a per-node [`timeline`] of free resources is built from
//!    the time limits of running jobs; pending jobs are taken in the same order and each
//!    gets the earliest start at which it fits. A job whose earliest start is now starts
//!    (backfilled); otherwise its resources are reserved from that start
//!    ([`Policy::Conservative`]: for every job tested; [`Policy::Easy`]: for the first
//!    blocked job of each partition only), so a later job never delays it.
//!
//! Invariant: decisions never allocate more CPUs, memory, GRES or licenses than are
//! free in the snapshot, and a backfilled job never overlaps a reservation made in the
//! same pass. The timeline counts CPUs without naming them, so the planned start of a
//! job whose CPUs must be particular ones (`--gres-flags=enforce-binding`,
//! `--gpus-per-socket`) is an estimate that may slip, and with it the starts planned
//! behind it; other plans hold (conservative backfill never delays them).

pub mod affinity;
pub mod fairshare;
pub mod limits;
pub mod preempt;
pub mod priority;
pub mod resv;
pub mod select;
pub mod timeline;
pub mod usage;

use crate::model::depend::DepStatus;
use crate::model::gres::LicenseReq;
use crate::model::job::Allocation;
use crate::model::{HoldKind, Job, JobState, Node, Partition, PartitionState, Reason, TimeLimit};
use select::{Cap, FitError, NodeInfo, Placement, Req, ReqError, Take};
use std::collections::{HashMap, HashSet};
use timeline::{FOREVER, LicenseLine, NodeLine};
use usage::Usage;

/// What the scheduler decided for one pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start the job now with this allocation, in this partition.
    Start {
        job_id: u32,
        partition: String,
        alloc: Allocation,
        /// The job's time limit cut down by backfill towards its `--time-min`
        /// (`None`: it keeps its own).
        time_limit: Option<TimeLimit>,
    },
    /// Leave it pending for this reason.
    Pending { job_id: u32, reason: Reason },
}

pub use crate::config::sched::{Policy, SchedConfig};

/// One pass's input: all active jobs (pending, running, completing), the nodes,
/// partitions and licenses, at `now`.
pub struct Input<'a> {
    pub jobs: &'a [&'a Job],
    pub nodes: &'a [Node],
    pub partitions: &'a [Partition],
    /// Cluster licenses: (name, total).
    pub licenses: &'a [(String, u32)],
    pub config: &'a SchedConfig,
    pub now: i64,
    /// Run the backfill stage in this pass.
    pub backfill: bool,
    /// Association and QOS limits to apply (`None`: no accounting policy, as in
    /// personal mode or the simulator).
    pub limits: Option<limits::Policy<'a>>,
    /// Advanced reservations (active and future); see [`resv`].
    pub reservations: &'a [crate::model::reservation::Reservation],
}

/// A pending job's expected start from the backfill timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    pub job_id: u32,
    /// Epoch seconds.
    pub start: i64,
    pub partition: String,
    pub nodes: Vec<String>,
}

/// Counters of one pass (sdiag).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Pending jobs in the queue.
    pub queue_len: u32,
    /// Jobs the main cycle looked at.
    pub main_depth: u32,
    pub main_started: u32,
    /// Jobs backfill looked at, and those it tried to place.
    pub bf_depth: u32,
    pub bf_depth_try: u32,
    pub bf_started: u32,
    /// Pending jobs considered by backfill.
    pub bf_queue_len: u32,
    /// Steps in the timeline at the end of backfill.
    pub bf_table_size: u32,
}

/// Everything a pass decided.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// One decision per pending job.
    pub decisions: Vec<Decision>,
    /// Expected starts of jobs still pending (backfill passes only).
    pub estimates: Vec<Estimate>,
    /// Jobs started by backfill (their decisions are in `decisions`).
    pub backfilled: Vec<u32>,
    pub stats: PassStats,
}

/// Orders pending jobs as the main scheduler considers them: higher priority first,
/// then earlier submission, then lower id.
pub fn queue_order(jobs: &mut [&Job]) {
    jobs.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.submit_time.cmp(&b.submit_time))
            .then(a.id.cmp(&b.id))
    });
}

/// The partitions a job may run in: those it asked for (`-p a,b`) or its resolved one.
pub fn job_partitions(job: &Job) -> Vec<&str> {
    match &job.spec.partition {
        Some(list) if list.contains(',') => list.split(',').filter(|s| !s.is_empty()).collect(),
        _ => vec![job.partition.as_str()],
    }
}

/// Why a job can never run in a partition, whatever else happens (the static checks of
/// EnforcePartLimits): `None` when it could run once resources free up.
pub fn static_reason(job: &Job, part: &Partition, nodes: &[Node]) -> Option<Reason> {
    match (job.time_limit.secs(), part.max_time.secs()) {
        (Some(limit), Some(max)) if limit > max => return Some(Reason::PartitionTimeLimit),
        (None, Some(_)) => return Some(Reason::PartitionTimeLimit),
        _ => {}
    }
    let names: HashSet<&str> = part.nodes.iter().map(String::as_str).collect();
    let members: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| names.contains(n.name.as_str()))
        .map(|(i, _)| i)
        .collect();
    if job.req_nodes as usize > members.len()
        || part.max_nodes.is_some_and(|m| job.req_nodes > m)
        || job.req_nodes < part.min_nodes.min(members.len() as u32)
    {
        return Some(Reason::PartitionNodeLimit);
    }
    // A node whose agent has not registered since the controller started has no
    // detected CPUs or memory: what its configuration does not declare counts as
    // plentiful, so that jobs are not refused as impossible for want of a measurement.
    let infos: Vec<NodeInfo> = nodes
        .iter()
        .map(|n| {
            let mut i = NodeInfo::of(n);
            if n.agent_start_time.is_none() {
                if i.cpus == 0 {
                    i.cpus = 1 << 20;
                }
                if i.mem == 0 {
                    i.mem = 1 << 40;
                }
            }
            i
        })
        .collect();
    let index = |name: &str| nodes.iter().position(|n| n.name == name);
    let req = match Req::new(job, part, &index) {
        Ok(r) => r,
        Err(ReqError::BadConstraint | ReqError::BadDistribution) => {
            return Some(Reason::BadConstraints);
        }
        Err(ReqError::BadNodes) => return Some(Reason::PartitionConfig),
    };
    if let Some(max) = part.max_mem_per_node
        && let select::Mem::PerNode(m) = req.mem
        && m > max
    {
        return Some(Reason::Other("MaxMemPerLimit".into()));
    }
    if req.required.iter().any(|r| !members.contains(r)) {
        return Some(Reason::PartitionConfig);
    }
    let cands: Vec<(usize, Cap)> = members.iter().map(|&i| (i, Cap::full(&infos[i]))).collect();
    if select::fit(&req, &infos, &cands).is_err() {
        // A constraint no member can meet is BadConstraints; anything else PartitionConfig.
        if let Some(c) = &req.constraint
            && !members.iter().any(|&i| c.node_ok(&infos[i].features))
        {
            return Some(Reason::BadConstraints);
        }
        return Some(Reason::PartitionConfig);
    }
    None
}

/// Reasons that do not depend on resources. A job becomes eligible at its
/// `eligible_time` (`--begin`, release, or a requeue's delay), once its dependency is
/// satisfied (the controller evaluates it against other jobs and records each item's
/// state in `job.depend`), and while its array's `%N` throttle has room (the
/// controller counts the array's running tasks into `job.array`).
pub fn pre_check(job: &Job, now: i64) -> Option<Reason> {
    match job.hold {
        // Held after a failed launch (prolog error): Slurm keeps that reason.
        Some(HoldKind::User) if job.reason == Reason::LaunchFailedRequeuedHeld => {
            return Some(job.reason.clone());
        }
        Some(HoldKind::User) => return Some(Reason::JobHeldUser),
        // A job held because its reservation was deleted keeps that reason (Slurm's
        // WAIT_RESV_DELETED) until it is released.
        Some(HoldKind::Admin) if job.reason.as_str() == resv::DELETED_REASON => {
            return Some(job.reason.clone());
        }
        Some(HoldKind::Admin) => return Some(Reason::JobHeldAdmin),
        None => {}
    }
    if job.eligible_time.is_none_or(|e| e > now) {
        return Some(Reason::BeginTime);
    }
    match job.depend.as_ref().map(|d| d.status()) {
        Some(DepStatus::Waiting) => return Some(Reason::Dependency),
        Some(DepStatus::Never) => return Some(Reason::DependencyNeverSatisfied),
        Some(DepStatus::Satisfied) | None => {}
    }
    if job.array.as_ref().is_some_and(|a| a.throttled()) {
        return Some(Reason::JobArrayTaskLimit);
    }
    None
}

/// One main scheduling pass (with backfill, default parameters) over `jobs` at `now`.
/// Returns a decision for every pending job. A convenience over [`run`].
pub fn schedule(
    jobs: &[&Job],
    nodes: &[Node],
    partitions: &[Partition],
    now: i64,
) -> Vec<Decision> {
    let cfg = SchedConfig::default();
    run(&Input {
        jobs,
        nodes,
        partitions,
        licenses: &[],
        config: &cfg,
        now,
        backfill: true,
        limits: None,
        reservations: &[],
    })
    .decisions
}

/// A partition prepared for one pass.
struct PartView<'a> {
    part: &'a Partition,
    /// Member node indices, by weight then configuration order.
    members: Vec<usize>,
    /// The members that are usable, in the same order (backfill's candidates).
    usable: Vec<usize>,
    /// Position in the input's partitions (a cheap key).
    pos: usize,
    /// CPUs of all members.
    total_cpus: u64,
}

/// What the pass knows and changes.
struct Pass<'a> {
    input: &'a Input<'a>,
    infos: Vec<NodeInfo>,
    index: HashMap<&'a str, usize>,
    parts: HashMap<&'a str, PartView<'a>>,
    usage: Vec<Usage>,
    lic_names: Vec<&'a str>,
    lic_free: Vec<u32>,
    /// Jobs started by the main cycle: (job, allocation, partition).
    started: Vec<(&'a Job, Allocation, String)>,
    /// [`fits_empty`] results by request shape.
    memo: std::cell::RefCell<HashMap<(usize, [u64; 7]), bool>>,
    /// Association/QOS limit usage, charged as jobs start in this pass.
    limits: Option<limits::LimitState<'a>>,
    /// What jobs inside reservations hold (core and license reservations), charged
    /// as jobs start in this pass.
    inside: resv::InsideUse,
}

impl<'a> Pass<'a> {
    fn new(input: &'a Input<'a>) -> Pass<'a> {
        let mut infos: Vec<NodeInfo> = input.nodes.iter().map(NodeInfo::of).collect();
        let topo = &input.config.topology;
        if !topo.is_empty() {
            let groups = topo.node_groups();
            for n in &mut infos {
                if let Some(g) = groups.get(&n.name) {
                    n.topo = g.clone();
                }
            }
        }
        let index: HashMap<&str, usize> = input
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let parts = input
            .partitions
            .iter()
            .enumerate()
            .map(|(pos, p)| {
                let mut members: Vec<usize> = p
                    .nodes
                    .iter()
                    .filter_map(|n| index.get(n.as_str()).copied())
                    .collect();
                members.sort_by_key(|&i| (infos[i].weight, i));
                let usable = members
                    .iter()
                    .copied()
                    .filter(|&i| infos[i].usable)
                    .collect();
                let total_cpus = members.iter().map(|&i| u64::from(infos[i].cpus)).sum();
                (
                    p.name.as_str(),
                    PartView {
                        part: p,
                        members,
                        usable,
                        pos,
                        total_cpus,
                    },
                )
            })
            .collect::<HashMap<_, _>>();
        let mut usage: Vec<Usage> = infos.iter().map(Usage::new).collect();
        let lic_names: Vec<&str> = input.licenses.iter().map(|l| l.0.as_str()).collect();
        let mut lic_free: Vec<u32> = input.licenses.iter().map(|l| l.1).collect();
        let locked = |j: &Job| {
            j.spec.exclusive_user
                || input
                    .partitions
                    .iter()
                    .any(|p| p.name == j.partition && p.exclusive_user)
        };
        let mut inside = resv::InsideUse::default();
        for j in input.jobs.iter().filter(|j| holds_resources(j)) {
            if let Some(a) = &j.alloc {
                if let Some(r) = &j.spec.reservation {
                    inside.add(r, a, planned_end(j, input.now));
                }
                let idx = |n: &str| index.get(n).copied();
                usage::charge_alloc(&mut usage, &idx, a, j.uid, locked(j));
                for l in &a.licenses {
                    if let Some(i) = lic_names.iter().position(|n| *n == l.name) {
                        lic_free[i] = lic_free[i].saturating_sub(l.count);
                    }
                }
            }
        }
        for ((u, n), info) in usage.iter_mut().zip(input.nodes).zip(&infos) {
            u.withhold(info, &n.withheld_gres());
        }
        Pass {
            input,
            infos,
            index,
            parts,
            usage,
            lic_names,
            lic_free,
            started: Vec::new(),
            memo: Default::default(),
            limits: input
                .limits
                .filter(|p| p.enforce.limits)
                .map(|p| limits::LimitState::new(p, input.jobs, input.now)),
            inside,
        }
    }

    /// `lic` with, added to each count, the licenses reservations other than the
    /// job's keep from it during `[t0, t1)`: what must be free for the job to get
    /// its own.
    fn lic_needs(
        &self,
        acc: resv::Access,
        lic: &[(usize, u32)],
        t0: i64,
        t1: i64,
    ) -> Vec<(usize, u32)> {
        let resvs = self.input.reservations;
        if lic.is_empty() || resvs.iter().all(|r| r.licenses.is_empty()) {
            return lic.to_vec();
        }
        lic.iter()
            .map(|&(i, c)| {
                let hold = resv::license_hold(acc, resvs, self.lic_names[i], t0, t1, &self.inside);
                (i, c.saturating_add(hold))
            })
            .collect()
    }

    /// Lowers the caps of `cands` (node index, cap) by what core reservations hold
    /// back from the job during `[t0, t1)`.
    fn hold_cores(&self, acc: resv::Access, cands: &mut [(usize, Cap)], t0: i64, t1: i64) {
        let resvs = self.input.reservations;
        if resvs.iter().all(|r| r.node_cpus.is_empty()) {
            return;
        }
        for (i, c) in cands.iter_mut() {
            let h = resv::cpu_hold(acc, resvs, &self.infos[*i].name, t0, t1, &self.inside);
            resv::hold_cap(c, h);
        }
    }

    /// The limit that holds `job` now, if any.
    fn limit_reason(&self, job: &Job) -> Option<Reason> {
        self.limits
            .as_ref()
            .and_then(|l| l.check(job))
            .map(Reason::Limit)
    }

    /// Counts a job this pass starts against its limits.
    fn charge_limits(&mut self, job: &Job) {
        if let Some(l) = self.limits.as_mut() {
            l.charge(job);
        }
    }

    fn idx(&self) -> impl Fn(&str) -> Option<usize> + '_ {
        |n: &str| self.index.get(n).copied()
    }

    /// Licenses a job asks for as (index, count); `None` if one is unknown.
    fn lic_req(&self, l: &[LicenseReq]) -> Option<Vec<(usize, u32)>> {
        l.iter()
            .map(|r| {
                self.lic_names
                    .iter()
                    .position(|n| *n == r.name)
                    .map(|i| (i, r.count))
            })
            .collect()
    }

    /// Candidates of a partition with their caps now.
    fn caps_now(&self, pv: &PartView, req: &Req) -> Vec<(usize, Cap)> {
        pv.members
            .iter()
            .filter(|&&i| self.infos[i].usable)
            .map(|&i| (i, self.cap_now(i, req)))
            .collect()
    }

    /// What node `i` can give `req` now, with the free CPU ids when its CPUs depend
    /// on its GPUs.
    fn cap_now(&self, i: usize, req: &Req) -> Cap {
        if req.needs_ids() {
            self.usage[i].cap_with_ids(&self.infos[i], req.share)
        } else {
            self.usage[i].cap(&self.infos[i], req.share)
        }
    }

    /// Turns a placement into an allocation, taking CPU ids and devices from `usage`.
    fn commit(&mut self, job: &Job, req: &Req, p: &Placement, lic: &[LicenseReq]) -> Allocation {
        let mut a = Allocation {
            shared: req.share.is_some(),
            whole_nodes: req.exclusive,
            licenses: lic.to_vec(),
            mem_per_node: p.takes.iter().map(|t| t.mem).max().unwrap_or(0),
            ..Allocation::default()
        };
        for t in &p.takes {
            let mut t = t.clone();
            t.mem = a.mem_per_node;
            let (ids, gres) = self.usage[t.node].apply(
                &self.infos[t.node],
                &t,
                req.share,
                req.exclusive,
                job.uid,
                req.user_lock,
                req.binding != crate::model::gres::GresBinding::Disable,
            );
            a.nodes.push(self.infos[t.node].name.clone());
            a.cpus.push(t.cpus);
            a.cpu_ids.push(ids);
            a.gres.push(gres);
            a.tasks.push(t.tasks);
        }
        if let Some(lr) = self.lic_req(lic) {
            for (i, c) in lr {
                self.lic_free[i] = self.lic_free[i].saturating_sub(c);
            }
        }
        if let Some(r) = &job.spec.reservation {
            self.inside.add(r, &a, planned_end(job, self.input.now));
        }
        a
    }
}

/// Whether a job holds resources in the snapshot (running, suspended or completing).
fn holds_resources(j: &Job) -> bool {
    j.alloc.is_some()
        && (matches!(j.state, JobState::Running | JobState::Suspended) || j.completing)
}

/// The tier a job is ordered by: the highest PriorityTier of its partitions.
fn tier(job: &Job, parts: &HashMap<&str, PartView>) -> u32 {
    job_partitions(job)
        .iter()
        .filter_map(|p| parts.get(p).map(|v| v.part.priority_tier))
        .max()
        .unwrap_or(0)
}

/// Runs one pass. See the module documentation.
pub fn run(input: &Input) -> Outcome {
    run_marked(input, &mut || {})
}

/// [`run`], calling `main_done` once between the main cycle and backfill, so that a
/// caller with a clock can time the two phases apart (sdiag's main and backfill
/// cycle times). The core itself reads no clock.
pub fn run_marked(input: &Input, main_done: &mut dyn FnMut()) -> Outcome {
    let now = input.now;
    let policy = input.config.policy;
    let mut pass = Pass::new(input);
    let mut pending: Vec<&Job> = input
        .jobs
        .iter()
        .copied()
        .filter(|j| j.state == JobState::Pending && !j.completing)
        .collect();
    pending.sort_by_cached_key(|j| {
        (
            std::cmp::Reverse(tier(j, &pass.parts)),
            std::cmp::Reverse(j.priority),
            j.submit_time,
            j.id,
        )
    });
    let mut out = Outcome::default();
    out.stats.queue_len = pending.len() as u32;

    // ---- main cycle
    let mut blocked: HashSet<&str> = HashSet::new();
    let mut fifo_blocked = false;
    let mut reasons: Vec<Reason> = Vec::with_capacity(pending.len());
    for job in &pending {
        let r = match pre_check(job, now).or_else(|| pass.limit_reason(job)) {
            Some(r) => r,
            None => {
                out.stats.main_depth += 1;
                let r = main_one(&mut pass, job, &mut blocked, &mut fifo_blocked, policy);
                if r == Reason::None {
                    pass.charge_limits(job);
                }
                r
            }
        };
        reasons.push(r);
    }
    out.stats.main_started = pass.started.len() as u32;
    main_done();

    // ---- backfill
    // Keyed by record address: the controller may pass several copies of one array
    // record (same id), each standing for a task that may start.
    let mut bf_started: HashMap<*const Job, BfStart> = HashMap::new();
    if input.backfill && policy != Policy::Fifo {
        backfill(&mut pass, &pending, &mut reasons, &mut bf_started, &mut out);
    }

    // ---- decisions, in queue order
    let started: HashMap<*const Job, usize> = pass
        .started
        .iter()
        .enumerate()
        .map(|(k, (j, _, _))| (*j as *const Job, k))
        .collect();
    for (job, reason) in pending.iter().zip(reasons) {
        if let Some(&k) = started.get(&(*job as *const Job)) {
            let (_, alloc, part) = &pass.started[k];
            out.decisions.push(Decision::Start {
                job_id: job.id,
                partition: part.clone(),
                alloc: alloc.clone(),
                time_limit: None,
            });
        } else if let Some((part, alloc, time_limit)) = bf_started.remove(&(*job as *const Job)) {
            out.decisions.push(Decision::Start {
                job_id: job.id,
                partition: part,
                alloc,
                time_limit,
            });
        } else {
            out.decisions.push(Decision::Pending {
                job_id: job.id,
                reason,
            });
        }
    }
    out
}

/// A job backfill starts: its partition, allocation and any cut-down time limit.
type BfStart = (String, Allocation, Option<TimeLimit>);

/// Tries one job in the main cycle; starts it or returns its reason.
fn main_one<'a>(
    pass: &mut Pass<'a>,
    job: &'a Job,
    blocked: &mut HashSet<&'a str>,
    fifo_blocked: &mut bool,
    policy: Policy,
) -> Reason {
    let acc = match resv::access(job, pass.input.reservations, pass.input.now) {
        Ok(a) => a,
        Err(r) => return r,
    };
    let mut first: Option<Reason> = None;
    for pname in job_partitions(job) {
        let r = match try_partition(pass, job, pname, blocked, *fifo_blocked, acc) {
            Ok(()) => return Reason::None,
            Err(r) => r,
        };
        if (matches!(r, Reason::Resources | Reason::ReqNodeNotAvail) || resv::is_node_wait(&r))
            && let Some(pv) = pass.parts.get(pname)
        {
            blocked.insert(pv.part.name.as_str());
            if policy == Policy::Fifo {
                *fifo_blocked = true;
            }
        }
        first.get_or_insert(r);
    }
    first.unwrap_or(Reason::PartitionConfig)
}

/// Why a job cannot be considered in a partition at all (state, limits, request).
/// The partitions of `job` it may run in, in its order, each with the request as that
/// partition shapes it and the job's licenses as indices (partitions whose limits
/// refuse the job, and every partition when a license is unknown, left out).
fn usable_partitions<'b, 'a>(
    pass: &'b Pass<'a>,
    job: &'b Job,
) -> impl Iterator<Item = (&'b PartView<'a>, Req, Vec<(usize, u32)>)> + 'b {
    job_partitions(job).into_iter().filter_map(move |pname| {
        let pv = pass.parts.get(pname)?;
        let req = partition_reason(pass, job, pv).ok()?;
        let lic = pass.lic_req(&job.spec.licenses)?;
        Some((pv, req, lic))
    })
}

fn partition_reason(pass: &Pass, job: &Job, pv: &PartView) -> Result<Req, Reason> {
    match pv.part.state {
        PartitionState::Down => return Err(Reason::PartitionDown),
        PartitionState::Inactive => return Err(Reason::PartitionInactive),
        PartitionState::Up | PartitionState::Drain => {}
    }
    let mut req = static_checked(pass, job, pv)?;
    req.max_leaves = switch_limit(job, pass.input);
    Ok(req)
}

/// The leaf-switch limit of a `--switches=N[@wait]` job while its wait lasts: from
/// its eligible time (else submission) for `wait`, capped by `max_switch_wait`
/// (Slurm's `wait4switch`, bounded by SchedulerParameters=max_switch_wait). `None`
/// once the wait is over, or without `--switches` or a topology.
pub fn switch_limit(job: &Job, input: &Input) -> Option<u32> {
    let n = job.spec.switches?;
    if input.config.topology.is_empty() {
        return None;
    }
    let cap = input.config.max_switch_wait.max(0);
    let wait = job.spec.switch_wait.map_or(cap, |w| i64::from(w).min(cap));
    let from = job.eligible_time.unwrap_or(job.submit_time);
    (input.now < from.saturating_add(wait)).then_some(n.max(1))
}

/// [`static_reason`] against the pass's prepared nodes (same checks, no rebuilding);
/// returns the resolved request when the job could run here.
fn static_checked(pass: &Pass, job: &Job, pv: &PartView) -> Result<Req, Reason> {
    let part = pv.part;
    match (job.time_limit.secs(), part.max_time.secs()) {
        (Some(limit), Some(max)) if limit > max => return Err(Reason::PartitionTimeLimit),
        (None, Some(_)) => return Err(Reason::PartitionTimeLimit),
        _ => {}
    }
    let n = pv.members.len();
    if job.req_nodes as usize > n
        || part.max_nodes.is_some_and(|m| job.req_nodes > m)
        || job.req_nodes < part.min_nodes.min(n as u32)
    {
        return Err(Reason::PartitionNodeLimit);
    }
    let req = match Req::new(job, part, &pass.idx()) {
        Ok(r) => r,
        Err(ReqError::BadNodes) => return Err(Reason::PartitionConfig),
        Err(_) => return Err(Reason::BadConstraints),
    };
    static_fit(pass, job, pv, &req)?;
    Ok(req)
}

/// The resource part of the static checks: could `req` run here on empty nodes?
fn static_fit(pass: &Pass, job: &Job, pv: &PartView, req: &Req) -> Result<(), Reason> {
    let part = pv.part;
    if let Some(max) = part.max_mem_per_node
        && let select::Mem::PerNode(m) = req.mem
        && m > max
    {
        return Err(Reason::Other("MaxMemPerLimit".into()));
    }
    if req.required.iter().any(|r| !pv.members.contains(r)) {
        return Err(Reason::PartitionConfig);
    }
    // Quick capacity bound before the full empty-cluster fit.
    if req.share.is_none() && req.min_cpus() > pv.total_cpus {
        return Err(Reason::PartitionConfig);
    }
    if !fits_empty(pass, pv, req) {
        if let Some(c) = &req.constraint
            && !pv
                .members
                .iter()
                .any(|&i| c.node_ok(&pass.infos[i].features))
        {
            return Err(Reason::BadConstraints);
        }
        return Err(Reason::PartitionConfig);
    }
    if pass.lic_req(&job.spec.licenses).is_none() {
        return Err(Reason::Licenses);
    }
    Ok(())
}

/// Whether `req` fits the partition's nodes when all are empty. Simple requests (no
/// GRES, constraints, node lists or layout options) are remembered by shape for the
/// rest of the pass: a long queue of similar jobs costs one fit per shape.
fn fits_empty(pass: &Pass, pv: &PartView, req: &Req) -> bool {
    let simple = req.gres.is_empty()
        && req.gpus_total.is_none()
        && req.gpus_per_task.is_none()
        && req.gpus_per_socket.is_none()
        && req.sockets_per_node.is_none()
        && req.threads_per_core.is_none()
        && req.ntasks_per_core.is_none()
        && req.mincpus.is_none()
        && req.tmp_disk.is_none()
        && req.constraint.is_none()
        && req.required.is_empty()
        && req.excluded.is_empty()
        && !req.contiguous;
    let key = simple.then(|| {
        (
            pv.pos,
            [
                u64::from(req.ntasks),
                u64::from(req.cpt),
                u64::from(req.nodes_min),
                u64::from(req.nodes_max),
                u64::from(req.per_node.unwrap_or(0)),
                match req.mem {
                    select::Mem::PerNode(m) => m << 2,
                    select::Mem::All => 1,
                    select::Mem::PerCpu(m) => (m << 2) | 2,
                    select::Mem::PerGpu(m) => (m << 2) | 3,
                },
                u64::from(req.exclusive)
                    | u64::from(req.overcommit) << 1
                    | u64::from(req.share.is_some()) << 2,
            ],
        )
    });
    if let Some(k) = &key
        && let Some(v) = pass.memo.borrow().get(k)
    {
        return *v;
    }
    let cands: Vec<(usize, Cap)> = pv
        .members
        .iter()
        .map(|&i| (i, Cap::full(&pass.infos[i])))
        .collect();
    let ok = select::fit(req, &pass.infos, &cands).is_ok();
    if let Some(k) = key {
        pass.memo.borrow_mut().insert(k, ok);
    }
    ok
}

fn try_partition<'a>(
    pass: &mut Pass<'a>,
    job: &'a Job,
    pname: &str,
    blocked: &HashSet<&'a str>,
    fifo_blocked: bool,
    acc: resv::Access,
) -> Result<(), Reason> {
    let Some(pv) = pass.parts.get(pname) else {
        return Err(Reason::PartitionConfig);
    };
    let req = partition_reason(pass, job, pv)?;
    let now = pass.input.now;
    let end = req
        .time_limit
        .map_or(FOREVER, |l| now.saturating_add(l as i64));
    // Missing licenses are reported before queue position: they say what to wait for.
    let lic = pass.lic_req(&job.spec.licenses).ok_or(Reason::Licenses)?;
    let need = pass.lic_needs(acc, &lic, now, end);
    if need.iter().any(|&(i, c)| pass.lic_free[i] < c) {
        return Err(Reason::Licenses);
    }
    if fifo_blocked || blocked.contains(pv.part.name.as_str()) {
        return Err(Reason::Priority);
    }
    let mut cands = pass.caps_now(pv, &req);
    // Nodes a reservation holds during the job's window are not candidates; when that
    // hides a maintenance reservation's nodes, Slurm's reason says so.
    let resvs = pass.input.reservations;
    let mut maint_hidden = false;
    if !resvs.is_empty() {
        let mut hidden: Vec<&str> = Vec::new();
        cands.retain(|(i, _)| {
            let n = pass.infos[*i].name.as_str();
            let ok = resv::node_ok(acc, resvs, n, now, end);
            if !ok {
                hidden.push(n);
            }
            ok
        });
        maint_hidden = matches!(acc, resv::Access::Outside)
            && !hidden.is_empty()
            && resv::blocked_reason(resvs, &hidden, now, end) != Reason::Resources;
        pass.hold_cores(acc, &mut cands, now, end);
    }
    let name = pv.part.name.clone();
    match select::fit(&req, &pass.infos, &cands) {
        Ok(p) => {
            let alloc = pass.commit(job, &req, &p, &job.spec.licenses);
            pass.started.push((job, alloc, name));
            Ok(())
        }
        Err(_) if maint_hidden => Err(Reason::Other(resv::MAINT_REASON.into())),
        Err(FitError::RequiredMissing) => Err(Reason::ReqNodeNotAvail),
        Err(FitError::NoFit) => Err(Reason::Resources),
    }
}

/// End of a job's hold on its resources as the timeline assumes it.
fn planned_end(j: &Job, now: i64) -> i64 {
    if j.completing || j.state.is_terminal() {
        return now + 1;
    }
    match (j.start_time, j.time_limit.secs()) {
        // Suspended time does not count against the limit.
        (Some(_), Some(_)) => j.limit_end(now).unwrap_or(FOREVER).max(now + 1),
        (None, Some(l)) => now + l as i64,
        _ => FOREVER,
    }
}

/// The per-node takes of an existing allocation.
fn takes_of(a: &Allocation, index: &dyn Fn(&str) -> Option<usize>) -> Vec<Take> {
    a.nodes
        .iter()
        .enumerate()
        .filter_map(|(k, n)| {
            Some(Take {
                node: index(n)?,
                tasks: a.tasks.get(k).copied().unwrap_or(0),
                cpus: a.cpus.get(k).copied().unwrap_or(0),
                mem: a.mem_per_node,
                gres: a
                    .gres
                    .get(k)
                    .map(|v| v.iter().map(|g| (g.slot as usize, g.count)).collect())
                    .unwrap_or_default(),
                cpu_ids: Vec::new(),
            })
        })
        .collect()
}

/// The backfill stage: builds the timeline and plans or starts pending jobs.
fn backfill<'a>(
    pass: &mut Pass<'a>,
    pending: &[&'a Job],
    reasons: &mut [Reason],
    bf_started: &mut HashMap<*const Job, BfStart>,
    out: &mut Outcome,
) {
    let input = pass.input;
    let now = input.now;
    let cfg = input.config;
    // Lines start from what is free now (main-cycle starts included) and gain back
    // each holder's resources at its planned end.
    let mut lines: Vec<NodeLine> = pass
        .usage
        .iter()
        .zip(&pass.infos)
        .map(|(u, n)| NodeLine::new(now, u.cap(n, Some(u32::MAX)), u.jobs))
        .collect();
    let mut lic_line = LicenseLine::new(now, pass.lic_free.clone());
    // Free CPUs summed over all usable nodes, over time (what running jobs release and
    // what backfill starts or reserves, CPU sharing aside): Σ over nodes of the least
    // free over a window is at most the least of the sum, so a window where this line
    // falls short of a job's CPUs cannot hold it, and multi-node searches skip it.
    let total_free: u32 = pass
        .usage
        .iter()
        .zip(&pass.infos)
        .filter(|(_, n)| n.usable)
        .map(|(u, _)| u.free_cpus())
        .sum();
    let mut agg = NodeLine::new(
        now,
        Cap {
            cpus: total_free,
            share_cpus: total_free,
            mem: u64::MAX / 4,
            gres: Vec::new(),
            idle: false,
            blocked: false,
            users: select::UserSet::Nobody,
            free_ids: None,
        },
        0,
    );
    let usable: Vec<bool> = pass.infos.iter().map(|n| n.usable).collect();
    let cpu_only = |t: &Take| Take {
        node: t.node,
        tasks: t.tasks,
        cpus: if usable[t.node] { t.cpus } else { 0 },
        mem: 0,
        gres: Vec::new(),
        cpu_ids: Vec::new(),
    };
    {
        let idx = pass.idx();
        let holders = input
            .jobs
            .iter()
            .filter(|j| holds_resources(j))
            .filter_map(|j| Some((j.alloc.as_ref()?, planned_end(j, now))))
            .chain(
                pass.started
                    .iter()
                    .map(|(j, a, _)| (a, planned_end(j, now))),
            );
        for (a, end) in holders {
            for t in takes_of(a, &idx) {
                lines[t.node].release(end, &t, a.shared, a.whole_nodes);
                if !a.shared {
                    agg.release(end, &cpu_only(&t), false, false);
                }
            }
            let lic: Vec<(usize, u32)> = a
                .licenses
                .iter()
                .filter_map(|l| Some((pass.lic_names.iter().position(|n| *n == l.name)?, l.count)))
                .collect();
            lic_line.change(end, FOREVER, &lic, 1);
        }
    }
    // Per node, the CPUs free now on the line and in the pass's usage: a bound on what
    // a job starting now can get there (kept up to date as backfill starts jobs).
    let free_now = |lines: &[NodeLine], pass: &Pass, i: usize| {
        lines[i]
            .min_cap(now, now + 1)
            .cpus
            .min(pass.usage[i].free_cpus())
    };
    let mut now_free: Vec<u32> = (0..lines.len())
        .map(|i| free_now(&lines, pass, i))
        .collect();
    let started_ids: HashSet<*const Job> = pass
        .started
        .iter()
        .map(|(j, _, _)| *j as *const Job)
        .collect();
    let mut per_user: HashMap<u32, usize> = HashMap::new();
    let mut reserved_parts: HashSet<&str> = HashSet::new();
    let horizon = now.saturating_add(cfg.bf_window.max(cfg.bf_resolution));
    // EASY-SJF: behind the first job the main cycle found blocked on resources, the
    // candidates are tried shortest time limit first (ties: queue order). The blocked
    // job keeps its place, so it makes the reservation before any of them is tried.
    let mut order: Vec<usize> = (0..pending.len()).collect();
    if cfg.policy == Policy::EasySjf
        && let Some(h) = reasons.iter().position(|r| *r == Reason::Resources)
    {
        order[h + 1..].sort_by_key(|&k| (pending[k].time_limit.secs().unwrap_or(u64::MAX), k));
    }
    for k in order {
        let job = &pending[k];
        if started_ids.contains(&(*job as *const Job)) {
            continue;
        }
        if !matches!(
            reasons[k],
            Reason::Priority | Reason::Resources | Reason::Licenses | Reason::ReqNodeNotAvail
        ) && !resv::is_node_wait(&reasons[k])
        {
            continue;
        }
        let Ok(acc) = resv::access(job, input.reservations, now) else {
            continue;
        };
        out.stats.bf_queue_len += 1;
        out.stats.bf_depth += 1;
        if out.stats.bf_depth_try as usize >= cfg.bf_max_job_test {
            continue;
        }
        if cfg.bf_max_job_user > 0 {
            let n = per_user.entry(job.uid).or_default();
            if *n >= cfg.bf_max_job_user {
                continue;
            }
            *n += 1;
        }
        out.stats.bf_depth_try += 1;
        // Jobs backfill started earlier in the pass may have used up a limit.
        if let Some(r) = pass.limit_reason(job) {
            reasons[k] = r;
            continue;
        }
        // EASY: once a partition holds its reservation, later jobs may only start now.
        let mut best: Option<(i64, &str, Req, Placement)> = None;
        for (pv, req, lic) in usable_partitions(pass, job) {
            let only_now =
                input.config.policy.is_easy() && reserved_parts.contains(pv.part.name.as_str());
            let limit = best.as_ref().map_or(horizon, |b| b.0 - 1).min(horizon);
            if let Some((t, p)) = earliest(
                pass, pv, &req, &lines, &agg, &now_free, &lic_line, &lic, now, limit, only_now, acc,
            ) {
                best = Some((t, pv.part.name.as_str(), req, p));
            }
        }
        // --time-min: a job that cannot start now for its whole limit may start now
        // for less, down to its time-min, as long as it then ends in time (Slurm's
        // backfill tries the time-min, then stretches the limit as far as it fits).
        let mut cut: Option<TimeLimit> = None;
        if best.as_ref().is_none_or(|b| b.0 != now)
            && let Some(tmin) = job.spec.time_min.map(|m| u64::from(m) * 60)
            && job.time_limit.secs().is_none_or(|l| tmin < l)
        {
            for (pv, req, lic) in usable_partitions(pass, job) {
                let fits_for = |mins: u64| {
                    let mut r = req.clone();
                    r.time_limit = Some(mins * 60);
                    earliest(
                        pass, pv, &r, &lines, &agg, &now_free, &lic_line, &lic, now, now, true, acc,
                    )
                    .map(|(_, p)| (r, p))
                };
                let lo_min = tmin / 60;
                let Some(mut found) = fits_for(lo_min) else {
                    continue;
                };
                // The longest whole-minute limit that still fits, by bisection.
                let full_min = req.time_limit.map_or(
                    (horizon.saturating_sub(now).max(0) as u64).div_ceil(60),
                    |l| l / 60,
                );
                let (mut lo, mut hi) = (lo_min, full_min.max(lo_min));
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    match fits_for(mid) {
                        Some(f) => {
                            lo = mid;
                            found = f;
                        }
                        None => hi = mid - 1,
                    }
                }
                cut = Some(TimeLimit::Minutes(lo.min(u64::from(u32::MAX)) as u32));
                best = Some((now, pv.part.name.as_str(), found.0, found.1));
                break;
            }
        }
        let Some((t, pname, req, p)) = best else {
            continue;
        };
        let end = req
            .time_limit
            .map_or(FOREVER, |l| t.saturating_add(l as i64));
        let lic = pass.lic_req(&job.spec.licenses).unwrap_or_default();
        if t == now {
            let alloc = pass.commit(job, &req, &p, &job.spec.licenses);
            for tk in takes_of(&alloc, &pass.idx()) {
                lines[tk.node].reserve(
                    now,
                    end,
                    &tk,
                    alloc.shared,
                    alloc.whole_nodes,
                    job.uid,
                    req.user_lock,
                );
                if !alloc.shared {
                    agg.reserve(now, end, &cpu_only(&tk), false, false, 0, false);
                }
                now_free[tk.node] = free_now(&lines, pass, tk.node);
            }
            lic_line.change(now, end, &lic, -1);
            pass.charge_limits(job);
            out.backfilled.push(job.id);
            out.stats.bf_started += 1;
            bf_started.insert(*job as *const Job, (pname.to_string(), alloc, cut));
            continue;
        }
        out.estimates.push(Estimate {
            job_id: job.id,
            start: t,
            partition: pname.to_string(),
            nodes: p
                .takes
                .iter()
                .map(|tk| pass.infos[tk.node].name.clone())
                .collect(),
        });
        let reserve = match input.config.policy {
            Policy::Conservative => true,
            Policy::Easy | Policy::EasySjf => reserved_parts.insert(pname),
            Policy::Fifo => false,
        };
        if reserve {
            for tk in &p.takes {
                lines[tk.node].reserve(
                    t,
                    end,
                    tk,
                    req.share.is_some(),
                    req.exclusive,
                    job.uid,
                    req.user_lock,
                );
                if req.share.is_none() {
                    agg.reserve(t, end, &cpu_only(tk), false, false, 0, false);
                }
            }
            lic_line.change(t, end, &lic, -1);
        }
    }
    out.stats.bf_table_size = lines.iter().map(|l| l.len() as u32).sum();
}

/// The earliest time in `[now, limit]` at which `req` fits in `pv` for its whole time
/// limit, and where. With `only_now`, only `now` is tried. `agg` is the usable nodes'
/// free CPUs summed over time, `now_free` per node what a job starting now can get
/// at most: both only skip times at which the job cannot fit.
#[allow(clippy::too_many_arguments)]
fn earliest(
    pass: &Pass,
    pv: &PartView,
    req: &Req,
    lines: &[NodeLine],
    agg: &NodeLine,
    now_free: &[u32],
    lic_line: &LicenseLine,
    lic: &[(usize, u32)],
    now: i64,
    limit: i64,
    only_now: bool,
    acc: resv::Access,
) -> Option<(i64, Placement)> {
    let dur = req.time_limit.map_or(FOREVER, |l| l as i64);
    let end_of = |t: i64| {
        if dur >= FOREVER {
            FOREVER
        } else {
            t.saturating_add(dur)
        }
    };
    let members: &[usize] = &pv.usable;
    // Whether the job's CPUs must be free ones (not shared, not overcommitted): only
    // then do free-CPU totals bound where it fits.
    let counts_cpus = req.share.is_none() && !req.overcommit;
    let try_at = |t: i64| -> Option<Placement> {
        let end = end_of(t);
        if !lic_line.fits(t, end, &pass.lic_needs(acc, lic, t, end)) {
            return None;
        }
        let resvs = pass.input.reservations;
        let mut cands: Vec<(usize, Cap)> = members
            .iter()
            .filter(|&&i| {
                resvs.is_empty() || resv::node_ok(acc, resvs, &pass.infos[i].name, t, end)
            })
            .map(|&i| {
                let mut c = lines[i].min_cap(t, end);
                if req.share.is_none() {
                    c.share_cpus = c.cpus;
                }
                if t == now {
                    // Starting now: never more than is really free (CPU sharing is
                    // only approximated on the timeline).
                    c = c.min(&pass.cap_now(i, req));
                }
                (i, c)
            })
            .collect();
        pass.hold_cores(acc, &mut cands, t, end);
        if counts_cpus {
            let free: u64 = cands.iter().map(|(_, c)| u64::from(c.cpus)).sum();
            if free < req.min_cpus() {
                return None;
            }
        }
        select::fit(req, &pass.infos, &cands).ok()
    };
    // Starting now: the CPUs free now bound what the candidates can give (the same
    // test as in `try_at`, without building them), so a blocked queue costs a sum.
    let free_now: u64 = members.iter().map(|&i| u64::from(now_free[i])).sum();
    if (!counts_cpus || free_now >= req.min_cpus())
        && let Some(p) = try_at(now)
    {
        return Some((now, p));
    }
    if only_now {
        return None;
    }
    // A job that may run on one node is first planned on one node (a per-node scan);
    // when it may also span nodes (`-n N` without `-N`, as Slurm allows), a plan over
    // several nodes that starts earlier wins, and a job no single node can hold is
    // planned over several (Slurm's backfill tests the whole job at each time).
    let mut limit = limit;
    let mut one_node: Option<(i64, Placement)> = None;
    if lic.is_empty() && single_node(req) {
        one_node = earliest_one_node(pass, req, members, lines, now, dur, limit, acc);
        if let Some((t, _)) = &one_node {
            if req.nodes_max <= 1 || members.len() <= 1 {
                return one_node;
            }
            limit = t - 1;
        }
    }
    // Candidate starts: whenever something is released, rounded up to the
    // bf_resolution grid (a later start is always still free of what ended).
    let res = pass.input.config.bf_resolution.max(1);
    let mut times: Vec<i64> = members
        .iter()
        .flat_map(|&i| lines[i].changes(now))
        .chain(lic_line.changes(now))
        // A reservation's end frees its nodes for jobs outside it.
        .chain(
            pass.input
                .reservations
                .iter()
                .map(|r| r.end)
                .filter(|&e| e > now),
        )
        .map(|t| now + (t - now + res - 1) / res * res)
        .filter(|t| *t <= limit)
        .collect();
    times.sort_unstable();
    times.dedup();
    let need = if counts_cpus {
        u32::try_from(req.min_cpus()).unwrap_or(u32::MAX)
    } else {
        0
    };
    // Candidates before `fits_from` are known to fail the CPU total over their window
    // (the total line's own scan skips them in one go).
    let mut fits_from = i64::MIN;
    let mut bound: Option<TaskBound> = None;
    for t in times {
        if need > 0 && t != fits_from {
            if t < fits_from {
                continue;
            }
            match agg.earliest(t, dur, limit, |c| c.cpus >= need) {
                Some(a) => fits_from = a,
                None => break,
            }
            if t < fits_from {
                continue;
            }
        }
        let b = bound.get_or_insert_with(|| TaskBound::new(pass, req, members, lines, dur));
        if !b.may_fit(t) {
            continue;
        }
        if let Some(p) = try_at(t) {
            return Some((t, p));
        }
    }
    one_node
}

/// A quick upper bound for multi-node searches: per node, the tasks each step could
/// host, and a sliding minimum over the job's window as candidate times increase
/// (amortised O(steps) per node). A time passes when the nodes' bounds could hold
/// the job; only those get the exact fit. A step's task count is worked out when
/// the window first reaches it, once per distinct free capacity of the node.
struct TaskBound<'x> {
    infos: &'x [NodeInfo],
    lines: &'x [NodeLine],
    req: &'x Req,
    members: &'x [usize],
    gpus: u64,
    dur: i64,
    /// Per member: excluded by the job (never hosts a task).
    excluded: Vec<bool>,
    /// Per member: tasks per step, for the steps the window has reached.
    tasks: Vec<Vec<u32>>,
    /// Per member: task counts by free capacity already worked out (a few).
    memo: Vec<Vec<(Cap, u32)>>,
    /// Per member: first step of the window, next step to enter, deque of step indices
    /// with increasing task counts.
    lo: Vec<usize>,
    hi: Vec<usize>,
    deque: Vec<std::collections::VecDeque<usize>>,
}

/// Distinct capacities remembered per node by [`TaskBound`].
const TASK_MEMO: usize = 8;

impl<'x> TaskBound<'x> {
    fn new(
        pass: &'x Pass,
        req: &'x Req,
        members: &'x [usize],
        lines: &'x [NodeLine],
        dur: i64,
    ) -> TaskBound<'x> {
        let n = members.len();
        TaskBound {
            infos: &pass.infos,
            lines,
            req,
            members,
            gpus: req.gpus_total.as_ref().map_or(0, |g| g.1),
            dur,
            excluded: members.iter().map(|i| req.excluded.contains(i)).collect(),
            tasks: vec![Vec::new(); n],
            memo: vec![Vec::new(); n],
            lo: vec![0; n],
            hi: vec![0; n],
            deque: vec![Default::default(); n],
        }
    }

    /// The tasks member `k` could host with `cap` free (as [`select::node_take`]).
    fn tasks_with(&mut self, k: usize, cap: &Cap) -> u32 {
        let req = self.req;
        // What node_take reads of the users and the idle flag, decided here so that
        // capacities differing only there share a memo entry.
        if cap.blocked || !cap.users.admits(req.uid, req.user_lock) {
            return 0;
        }
        let mut c = cap.clone();
        if req.share.is_none() {
            c.share_cpus = c.cpus;
        }
        c.users = select::UserSet::Nobody;
        if !req.exclusive {
            c.idle = true;
        }
        if let Some(&(_, v)) = self.memo[k].iter().find(|(m, _)| *m == c) {
            return v;
        }
        let i = self.members[k];
        let v = select::node_take(req, i, &self.infos[i], &c, u32::MAX / 2, self.gpus)
            .map_or(0, |x| x.tasks);
        if self.memo[k].len() < TASK_MEMO {
            self.memo[k].push((c, v));
        }
        v
    }

    /// Whether the job might fit during `[t, t + dur)`; `t` must not decrease between
    /// calls.
    fn may_fit(&mut self, t: i64) -> bool {
        let end = if self.dur >= FOREVER {
            FOREVER
        } else {
            t.saturating_add(self.dur)
        };
        let req = self.req;
        let mut sum: u64 = 0;
        let mut hosts = 0u32;
        for k in 0..self.members.len() {
            if self.excluded[k] {
                continue;
            }
            let line = &self.lines[self.members[k]];
            let len = line.len();
            // Window: the step in force at t through the last step starting before end.
            let mut lo = self.lo[k];
            while lo + 1 < len && line.step(lo + 1).0 <= t {
                lo += 1;
            }
            self.lo[k] = lo;
            let mut hi = self.hi[k].max(lo);
            while hi < len && (hi == lo || line.step(hi).0 < end) {
                if self.tasks[k].len() <= hi {
                    // Steps are reached in order; any skipped by `lo` are filled too.
                    while self.tasks[k].len() <= hi {
                        let s = self.tasks[k].len();
                        let v = self.tasks_with(k, line.step(s).1);
                        self.tasks[k].push(v);
                    }
                }
                let tasks = &self.tasks[k];
                let dq = &mut self.deque[k];
                while dq.back().is_some_and(|&b| tasks[b] >= tasks[hi]) {
                    dq.pop_back();
                }
                dq.push_back(hi);
                hi += 1;
            }
            self.hi[k] = hi;
            let dq = &mut self.deque[k];
            while dq.front().is_some_and(|&f| f < lo) {
                dq.pop_front();
            }
            let m = dq.front().map_or(0, |&f| self.tasks[k][f]);
            // With --ntasks-per-node, a node hosts at most that many tasks (the last
            // nodes of a job may hold fewer).
            let m = req.per_node.map_or(m, |p| m.min(p));
            if m > 0 {
                hosts += 1;
                sum += u64::from(m);
            }
        }
        hosts >= req.nodes_min && sum >= u64::from(req.ntasks)
    }
}

/// Whether a job may be planned on one node: it asks for one node at least (`-N 1`, or
/// no `-N`), names one node at most and counts no features over several. Whether its
/// tasks fit one node is for [`earliest_one_node`] to find; when it may span nodes
/// (no `-N`), [`earliest`] also searches plans over several.
fn single_node(req: &Req) -> bool {
    req.nodes_min <= 1
        && req.required.len() <= 1
        && req
            .constraint
            .as_ref()
            .is_none_or(|c| c.counts().iter().all(|(_, n)| *n <= 1))
}

/// The earliest start of a one-node plan: each candidate node's own timeline is
/// scanned once for a window where the whole job fits, the earliest wins (ties: the
/// partition's node order). Windows a reservation forbids are skipped.
#[allow(clippy::too_many_arguments)]
fn earliest_one_node(
    pass: &Pass,
    req: &Req,
    members: &[usize],
    lines: &[NodeLine],
    now: i64,
    dur: i64,
    limit: i64,
    acc: resv::Access,
) -> Option<(i64, Placement)> {
    let resvs = pass.input.reservations;
    let gpus = req.gpus_total.as_ref().map_or(0, |g| g.1);
    let whole = |i: usize, cap: &Cap| -> Option<Take> {
        let mut c = cap.clone();
        if req.share.is_none() {
            c.share_cpus = c.cpus;
        }
        let t = select::node_take(req, i, &pass.infos[i], &c, req.ntasks, gpus)?;
        let got: u64 = t
            .gres
            .iter()
            .filter(|(s, _)| pass.infos[i].gres[*s].0 == "gpu")
            .map(|(_, c)| u64::from(*c))
            .sum();
        (t.tasks == req.ntasks && (gpus == 0 || got >= gpus)).then_some(t)
    };
    let mut best: Option<(i64, Placement)> = None;
    for &i in members {
        // A node that could not hold the job even empty is never scanned.
        if req.excluded.contains(&i)
            || whole(i, &Cap::full(&pass.infos[i])).is_none()
            || req.required.first().is_some_and(|r| *r != i)
            || req
                .constraint
                .as_ref()
                .is_some_and(|c| !c.alloc_ok(&[pass.infos[i].features.as_slice()]))
        {
            continue;
        }
        let lim = best.as_ref().map_or(limit, |b| b.0 - 1);
        let mut from = now;
        // Per-step checks can accept a window whose minimum does not fit (different GRES
        // slots free in different steps); such a window is checked and skipped.
        while let Some(t) = lines[i].earliest(from, dur, lim, |c| whole(i, c).is_some()) {
            let end = if dur >= FOREVER {
                FOREVER
            } else {
                t.saturating_add(dur)
            };
            let name = pass.infos[i].name.as_str();
            if !resvs.is_empty() && !resv::node_ok(acc, resvs, name, t, end) {
                // Outside: retry once the reservations in the way end; inside: the
                // node is not the reservation's, so never.
                match resv::blocked_until(resvs, name, t, end) {
                    Some(e) if matches!(acc, resv::Access::Outside) && e > t => {
                        from = e;
                        continue;
                    }
                    _ => break,
                }
            }
            let mut cap = lines[i].min_cap(t, end);
            if t == now {
                cap = cap.min(&pass.cap_now(i, req));
            }
            if !resvs.is_empty() {
                resv::hold_cap(
                    &mut cap,
                    resv::cpu_hold(acc, resvs, name, t, end, &pass.inside),
                );
            }
            if let Some(take) = whole(i, &cap) {
                best = Some((t, Placement { takes: vec![take] }));
                break;
            }
            // Try again when something is released, or a core reservation in the
            // way ends.
            let next = lines[i].changes(t).next();
            let resv_end = resv::hold_ends(resvs, name, t, end).filter(|e| *e > t);
            match next.into_iter().chain(resv_end).min() {
                Some(n) => from = n,
                None => break,
            }
        }
    }
    best
}

#[cfg(test)]
mod tests;
