//! The scheduler core. PURE: no I/O, no clock, no randomness (DESIGN.md §3); the caller
//! passes a snapshot and `now` and applies the returned decisions.
//!
//! This is the main scheduling pass of slurmctld (cf. src/slurmctld/job_scheduler.c
//! `schedule()`): pending jobs in priority order, each either started on nodes chosen by
//! [`select`] (cons_tres-style fit of CPUs and memory per node) or left pending with
//! Slurm's reason. Within a partition, once a job is blocked on resources the jobs
//! behind it wait with reason `Priority` (strict order; backfill comes with the
//! scheduling-core work).
//!
//! Invariant: the decisions never allocate more CPUs or memory on a node than it has
//! free in the snapshot.

pub mod select;

use crate::model::depend::DepStatus;
use crate::model::job::Allocation;
use crate::model::{HoldKind, Job, JobState, Node, Partition, PartitionState, Reason};
use std::collections::{HashMap, HashSet};

/// What the scheduler decided for one pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start the job now with this allocation, in this partition.
    Start {
        job_id: u32,
        partition: String,
        alloc: Allocation,
    },
    /// Leave it pending for this reason.
    Pending { job_id: u32, reason: Reason },
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

/// Why a job can never run in a partition, whatever else happens (the static checks of
/// EnforcePartLimits): `None` when it could run once resources free up.
pub fn static_reason(job: &Job, part: &Partition, nodes: &[Node]) -> Option<Reason> {
    if let (Some(limit), Some(max)) = (job.time_limit.secs(), part.max_time.secs()) {
        if limit > max {
            return Some(Reason::PartitionTimeLimit);
        }
    } else if job.time_limit.secs().is_none() && part.max_time.secs().is_some() {
        return Some(Reason::PartitionTimeLimit);
    }
    let members: Vec<&Node> = nodes
        .iter()
        .filter(|n| part.nodes.contains(&n.name))
        .collect();
    if job.req_nodes as usize > members.len()
        || part.max_nodes.is_some_and(|m| job.req_nodes > m)
        || job.req_nodes < part.min_nodes.min(members.len() as u32)
    {
        return Some(Reason::PartitionNodeLimit);
    }
    if !select::could_ever_fit(job, &members) {
        return Some(Reason::PartitionConfig);
    }
    None
}

/// One main scheduling pass over `jobs` (all jobs; only pending ones are considered)
/// at time `now`. Returns a decision for every pending job.
pub fn schedule(
    jobs: &[&Job],
    nodes: &[Node],
    partitions: &[Partition],
    now: i64,
) -> Vec<Decision> {
    let mut pending: Vec<&Job> = jobs
        .iter()
        .copied()
        .filter(|j| j.state == JobState::Pending)
        .collect();
    queue_order(&mut pending);
    let mut free: HashMap<&str, select::Free> = nodes
        .iter()
        .filter(|n| n.schedulable())
        .map(|n| (n.name.as_str(), select::Free::of(n)))
        .collect();
    let parts: HashMap<&str, &Partition> =
        partitions.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut blocked: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(pending.len());
    for job in pending {
        let reason = match pre_check(job, now) {
            Some(r) => r,
            None => match try_partitions(job, &parts, nodes, &mut free, &mut blocked) {
                Ok(d) => {
                    out.push(d);
                    continue;
                }
                Err(r) => r,
            },
        };
        out.push(Decision::Pending {
            job_id: job.id,
            reason,
        });
    }
    out
}

/// Reasons that do not depend on resources. A job becomes eligible at its
/// `eligible_time` (`--begin`, release, or a requeue's delay), once its dependency is
/// satisfied (the controller evaluates it against other jobs and records each item's
/// state in `job.depend`), and while its array's `%N` throttle has room (the
/// controller counts the array's running tasks into `job.array`).
fn pre_check(job: &Job, now: i64) -> Option<Reason> {
    match job.hold {
        Some(HoldKind::User) => return Some(Reason::JobHeldUser),
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

/// Tries each of the job's partitions in order (the resolved one first); the first that
/// can start it wins. The reason reported is the first partition's.
fn try_partitions<'a>(
    job: &'a Job,
    parts: &HashMap<&str, &'a Partition>,
    nodes: &'a [Node],
    free: &mut HashMap<&'a str, select::Free>,
    blocked: &mut HashSet<&'a str>,
) -> Result<Decision, Reason> {
    let mut first_reason = None;
    for pname in job_partitions(job) {
        let reason = match parts.get(pname) {
            None => Reason::PartitionConfig,
            Some(part) => match try_partition(job, part, nodes, free, blocked) {
                Ok(alloc) => {
                    return Ok(Decision::Start {
                        job_id: job.id,
                        partition: part.name.clone(),
                        alloc,
                    });
                }
                Err(r) => r,
            },
        };
        first_reason.get_or_insert(reason);
    }
    Err(first_reason.unwrap_or(Reason::PartitionConfig))
}

/// The partitions a job may run in: those it asked for (`-p a,b`) or its resolved one.
pub fn job_partitions(job: &Job) -> Vec<&str> {
    match &job.spec.partition {
        Some(list) if list.contains(',') => list.split(',').filter(|s| !s.is_empty()).collect(),
        _ => vec![job.partition.as_str()],
    }
}

fn try_partition<'a>(
    job: &Job,
    part: &'a Partition,
    nodes: &'a [Node],
    free: &mut HashMap<&'a str, select::Free>,
    blocked: &mut HashSet<&'a str>,
) -> Result<Allocation, Reason> {
    match part.state {
        PartitionState::Down => return Err(Reason::PartitionDown),
        PartitionState::Inactive => return Err(Reason::PartitionInactive),
        PartitionState::Up | PartitionState::Drain => {}
    }
    if let Some(r) = static_reason(job, part, nodes) {
        return Err(r);
    }
    if blocked.contains(part.name.as_str()) {
        return Err(Reason::Priority);
    }
    let candidates: Vec<&Node> = nodes
        .iter()
        .filter(|n| part.nodes.contains(&n.name) && free.contains_key(n.name.as_str()))
        .collect();
    match select::select(job, &candidates, free) {
        Ok(alloc) => {
            for (name, cpus) in alloc.nodes.iter().zip(&alloc.cpus) {
                if let Some(f) = free.get_mut(name.as_str()) {
                    f.take(*cpus, alloc.mem_per_node, job.spec.exclusive);
                }
            }
            Ok(alloc)
        }
        Err(r) => {
            blocked.insert(part.name.as_str());
            Err(r)
        }
    }
}

#[cfg(test)]
mod tests;
