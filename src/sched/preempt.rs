//! Preemption decisions (cf. slurmctld/preempt.c, plugins/preempt/partition_prio and
//! qos, and cons_tres `_will_run_test` with preemptees). PURE like the rest of
//! `sched`: the controller passes a snapshot and applies what comes back.
//!
//! A pending job that waits on resources may preempt running jobs when the
//! configuration lets it (`PreemptType`): jobs in partitions of a lower PriorityTier
//! (preempt/partition_prio), or jobs whose QOS is in its QOS's `Preempt=` list
//! (preempt/qos). A job is only preempted when removing the chosen jobs lets the
//! preemptor start at once; among the possible victims the lowest-priority (then the
//! most recently started) are taken first, and then any victim the preemptor can do
//! without is given back, so that as few jobs as possible are preempted.
//!
//! What a victim frees depends on its PreemptMode: CANCEL and REQUEUE free its whole
//! allocation (once it has ended); SUSPEND frees its CPUs only, since a stopped job
//! still holds its memory and GRES (as in Slurm). A job suspended by preemption keeps
//! its CPUs in the ordinary passes, so nothing but a preemptor takes them, and it is
//! resumed ([`resumable`]) once no running job uses them any more.
//!
//! Jobs already chosen (`Job::preempt`, in their grace time or ending) count as gone
//! for their preemptor's fit and are never chosen twice, so a preemptor waiting for
//! its victims to end preempts nothing more.

use super::{Input, Pass, holds_resources, job_partitions, partition_reason};
use crate::model::job::Allocation;
use crate::model::preempt::{PreemptMode, PreemptType, QosPreempt};
use crate::model::{Job, JobState};
use std::collections::{HashMap, HashSet};

/// Most pending jobs one [`plan`] tries to fit (each costs a few fit tests over the
/// whole snapshot). Jobs that may preempt nothing are skipped without counting, so the
/// budget goes to possible preemptors in priority order, wherever they are in the
/// queue (Slurm considers every pending job that could preempt).
pub const MAX_CANDIDATES: usize = 64;

/// A job chosen for preemption and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    pub job_id: u32,
    /// CANCEL, REQUEUE or SUSPEND (never OFF).
    pub mode: PreemptMode,
    /// Seconds between the preemption signal and the end (`GraceTime`; CANCEL and
    /// REQUEUE only).
    pub grace: u32,
}

/// What the planner decided for one pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Preempt `victims` for `preemptor`: it starts once they are suspended, or once
    /// the cancelled and requeued ones have ended.
    Preempt {
        preemptor: u32,
        victims: Vec<Victim>,
    },
    /// Start `job_id` now with `alloc`, on CPUs of jobs suspended for preemptors of its
    /// rank (the ordinary pass does not give those CPUs away).
    Start {
        job_id: u32,
        partition: String,
        alloc: Allocation,
    },
}

/// How `victim` would be preempted by `preemptor` under the configuration: its mode
/// and grace time, or `None` when it may not be preempted by it (preemption off, the
/// same or a higher rank, a job of a heterogeneous set, PreemptExemptTime not reached,
/// already chosen, or not running).
pub fn terms(
    input: &Input,
    qos: &[QosPreempt],
    preemptor: &Job,
    victim: &Job,
) -> Option<(PreemptMode, u32)> {
    let cfg = &input.config.preempt;
    if victim.id == preemptor.id || victim.het.is_some() || victim.completing {
        return None;
    }
    let by_preemption = victim.suspension.is_some_and(|s| s.preemptor.is_some());
    match victim.state {
        JobState::Running if victim.preempt.is_none() => {}
        JobState::Suspended if by_preemption => {}
        _ => return None,
    }
    let part = |name: &str| input.partitions.iter().find(|p| p.name == name);
    let (mode, grace, exempt) = match cfg.preempt_type {
        PreemptType::None => return None,
        PreemptType::PartitionPrio => {
            let vp = part(&victim.partition)?;
            let mine = job_partitions(preemptor)
                .iter()
                .filter_map(|p| part(p).map(|p| p.priority_tier))
                .max()?;
            if mine <= vp.priority_tier {
                return None;
            }
            (
                vp.preempt_mode.unwrap_or(cfg.mode),
                vp.grace_time,
                cfg.exempt_time,
            )
        }
        PreemptType::Qos => {
            let mine = qos.iter().find(|q| q.name == preemptor.qos)?;
            if !mine.preempt.contains(&victim.qos) {
                return None;
            }
            let theirs = qos.iter().find(|q| q.name == victim.qos);
            (
                theirs.and_then(|q| q.mode).unwrap_or(cfg.mode),
                theirs.map_or(0, |q| q.grace_time),
                theirs
                    .and_then(|q| q.exempt_time)
                    .unwrap_or(cfg.exempt_time),
            )
        }
    };
    if mode == PreemptMode::Off {
        return None;
    }
    if victim.state == JobState::Running && victim.run_secs(input.now) < exempt {
        return None;
    }
    Some((mode, grace))
}

/// What the holders of the snapshot look like for one fit test.
#[derive(Default)]
struct View {
    /// Jobs whose whole allocation counts as free (ending, or chosen to end).
    gone: HashSet<u32>,
    /// Jobs whose CPUs count as free (suspended, or chosen to be).
    cpus_free: HashSet<u32>,
}

/// Where `job` could start now if the jobs of `view` were out of the way.
fn fit(input: &Input, job: &Job, view: &View) -> Option<(String, Allocation)> {
    let stripped: Vec<Job> = input
        .jobs
        .iter()
        .filter(|j| view.cpus_free.contains(&j.id) && !view.gone.contains(&j.id))
        .map(|j| {
            let mut c = Job::clone(j);
            if let Some(a) = c.alloc.as_mut() {
                a.cpus.iter_mut().for_each(|n| *n = 0);
                a.cpu_ids.iter_mut().for_each(|v| v.clear());
                a.whole_nodes = false;
            }
            c
        })
        .collect();
    let mut jobs: Vec<&Job> = input
        .jobs
        .iter()
        .copied()
        .filter(|j| holds_resources(j))
        .filter(|j| !view.gone.contains(&j.id) && !view.cpus_free.contains(&j.id))
        .collect();
    jobs.extend(stripped.iter());
    let sub = Input {
        jobs: &jobs,
        ..*input
    };
    let mut pass = Pass::new(&sub);
    for pname in job_partitions(job) {
        let Some(pv) = pass.parts.get(pname) else {
            continue;
        };
        let Ok(req) = partition_reason(&pass, job, pv) else {
            continue;
        };
        let Some(lic) = pass.lic_req(&job.spec.licenses) else {
            continue;
        };
        if lic.iter().any(|&(i, c)| pass.lic_free[i] < c) {
            continue;
        }
        let cands = pass.caps_now(pv, &req);
        let name = pv.part.name.clone();
        if let Ok(p) = super::select::fit(&req, &pass.infos, &cands) {
            let alloc = pass.commit(job, &req, &p, &job.spec.licenses);
            return Some((name, alloc));
        }
    }
    None
}

/// The first thing to do for the `candidates` (pending jobs waiting on resources, in
/// any order; they are taken by partition tier, then priority): start one on CPUs
/// of suspended jobs it outranks, or preempt the fewest, lowest-priority jobs that let
/// one start now. `None` when nothing is to be done. The controller applies the
/// action and asks again, so each answer is planned on the state the previous one
/// left.
pub fn plan(input: &Input, qos: &[QosPreempt], candidates: &[&Job]) -> Option<Action> {
    if input.config.preempt.preempt_type == PreemptType::None {
        return None;
    }
    let tier = |j: &Job| {
        job_partitions(j)
            .iter()
            .filter_map(|p| input.partitions.iter().find(|x| x.name == *p))
            .map(|p| p.priority_tier)
            .max()
            .unwrap_or(0)
    };
    let mut order: Vec<&Job> = candidates
        .iter()
        .copied()
        .filter(|j| j.state == JobState::Pending && !j.completing)
        .collect();
    order.sort_by_key(|j| {
        (
            std::cmp::Reverse(tier(j)),
            std::cmp::Reverse(j.priority),
            j.submit_time,
            j.id,
        )
    });
    // Jobs on their way out: already ending, or chosen by an earlier preemption.
    let ending: HashSet<u32> = input
        .jobs
        .iter()
        .filter(|j| holds_resources(j) && (j.completing || j.preempt.is_some()))
        .map(|j| j.id)
        .collect();
    let mut tried = 0;
    for job in order {
        if tried == MAX_CANDIDATES {
            break;
        }
        let mut terms_of: HashMap<u32, (PreemptMode, u32)> = HashMap::new();
        for v in input.jobs.iter().filter(|v| holds_resources(v)) {
            if let Some(t) = terms(input, qos, job, v) {
                terms_of.insert(v.id, t);
            }
        }
        if terms_of.is_empty() {
            // Nothing it outranks: the ordinary pass decides for it.
            continue;
        }
        tried += 1;
        // Suspended by preemption and outranked by this job: their CPUs are its.
        let suspended: HashSet<u32> = input
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Suspended && terms_of.contains_key(&j.id))
            .map(|j| j.id)
            .collect();
        let now_view = View {
            gone: HashSet::new(),
            cpus_free: suspended.clone(),
        };
        if let Some((partition, alloc)) = fit(input, job, &now_view) {
            if suspended.is_empty() {
                // Free without preempting anything: the ordinary pass's business.
                continue;
            }
            return Some(Action::Start {
                job_id: job.id,
                partition,
                alloc,
            });
        }
        let later = View {
            gone: ending.clone(),
            cpus_free: suspended.clone(),
        };
        if fit(input, job, &later).is_some() {
            // It waits for jobs already on their way out.
            continue;
        }
        // Running victims, cheapest first: lowest priority, then youngest.
        let mut pool: Vec<&Job> = input
            .jobs
            .iter()
            .copied()
            .filter(|v| v.state == JobState::Running && terms_of.contains_key(&v.id))
            .filter(|v| !ending.contains(&v.id))
            .collect();
        pool.sort_by_key(|v| {
            (
                v.priority,
                std::cmp::Reverse(v.start_time.unwrap_or(0)),
                std::cmp::Reverse(v.id),
            )
        });
        let view_with = |chosen: &[u32]| {
            let mut v = View {
                gone: ending.clone(),
                cpus_free: suspended.clone(),
            };
            for id in chosen {
                if terms_of[id].0 == PreemptMode::Suspend {
                    v.cpus_free.insert(*id);
                } else {
                    v.gone.insert(*id);
                }
            }
            v
        };
        let mut chosen: Vec<u32> = Vec::new();
        let mut fits = false;
        for v in &pool {
            chosen.push(v.id);
            if fit(input, job, &view_with(&chosen)).is_some() {
                fits = true;
                break;
            }
        }
        if !fits {
            continue;
        }
        // Give back what the preemptor can do without, dearest first.
        let mut k = chosen.len();
        while k > 0 {
            k -= 1;
            if chosen.len() == 1 {
                break;
            }
            let mut without = chosen.clone();
            without.remove(k);
            if fit(input, job, &view_with(&without)).is_some() {
                chosen = without;
            }
        }
        return Some(Action::Preempt {
            preemptor: job.id,
            victims: chosen
                .into_iter()
                .map(|id| Victim {
                    job_id: id,
                    mode: terms_of[&id].0,
                    grace: terms_of[&id].1,
                })
                .collect(),
        });
    }
    None
}

/// Jobs suspended by preemption that may resume now: no running (or ending) job uses
/// any of their CPUs any more (gang-style resume; their memory and GRES were never
/// given away). In id order.
pub fn resumable(jobs: &[&Job]) -> Vec<u32> {
    let mut busy: HashSet<(&str, u32)> = HashSet::new();
    let mut busy_count: HashMap<&str, u32> = HashMap::new();
    for j in jobs.iter().filter(|j| holds_resources(j)) {
        if j.state == JobState::Suspended {
            continue;
        }
        let Some(a) = &j.alloc else { continue };
        for (k, n) in a.nodes.iter().enumerate() {
            *busy_count.entry(n.as_str()).or_default() += a.cpus.get(k).copied().unwrap_or(0);
            for id in a.cpu_ids.get(k).into_iter().flatten() {
                busy.insert((n.as_str(), *id));
            }
        }
    }
    let mut out: Vec<u32> = jobs
        .iter()
        .filter(|j| j.state == JobState::Suspended && !j.completing)
        .filter(|j| j.suspension.is_some_and(|s| s.preemptor.is_some()))
        .filter(|j| {
            let Some(a) = &j.alloc else { return true };
            a.nodes
                .iter()
                .enumerate()
                .all(|(k, n)| match a.cpu_ids.get(k) {
                    Some(ids) if !ids.is_empty() => {
                        ids.iter().all(|id| !busy.contains(&(n.as_str(), *id)))
                    }
                    // Records without CPU ids: only an idle node is safe.
                    _ => busy_count.get(n.as_str()).copied().unwrap_or(0) == 0,
                })
        })
        .map(|j| j.id)
        .collect();
    out.sort_unstable();
    out
}
