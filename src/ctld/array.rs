//! Job arrays in the controller (cf. slurmctld/job_mgr.c: `job_array_split`,
//! `_create_job_array`, and the `array_recs` of a meta job record).
//!
//! A submitted array is ONE pending record, the meta record: the array's id, no task id,
//! and the tasks not yet started in `ArrayInfo::tasks`. So a 100,000-task array costs one
//! record until its tasks run. When the scheduler starts the meta record, one task is
//! split off into a record of its own with a new job id; the meta record keeps the
//! array's id and becomes the last task to start (golden README: `151_3` is job 151,
//! `151_0` is 152). Holding, releasing or updating one pending task (`N_i`) splits it
//! off too; cancelling one just drops it from the set.
//!
//! To start several tasks in one pass without teaching the scheduler about arrays, the
//! controller hands it a few copies of a meta record (same id, no script or environment)
//! up to the array's throttle and the free CPUs; every `Start` decision for the meta's id
//! splits off the next task.
//!
//! Invariants: every record of array `A` has `array_job_id == A` and `array` set; at most
//! one record of `A` (the meta, id `A`) has no task id; a task index is held by exactly
//! one record or by none (cancelled while pending).

use super::depend::CorrEligible;
use super::state::{Caller, Cluster, Effects};
use crate::model::array::IndexSet;
use crate::model::{Job, JobState, Reason};
use crate::proto::{ArrayTasks, JobResult, SlurmError};
use std::collections::{HashMap, VecDeque};

/// Most copies of one meta record offered to the scheduler in one pass.
const MAX_COPIES_PER_PASS: u64 = 4096;

/// The records one command-line reference (`N`, `N_i`, `N_[a-b]`) stands for.
pub(super) struct Target {
    /// What the reference is reported as.
    pub result: JobResult,
    /// The records it names, or why it names none.
    pub records: Result<Vec<u32>, SlurmError>,
}

impl Cluster {
    /// The records an id names: the job itself, every record of the array whose id it
    /// is (`scancel N` cancels the whole array; a task's own id names that task), or
    /// every component of the heterogeneous job it is part of.
    pub(super) fn records_of(&self, id: u32) -> Vec<u32> {
        if let Some(members) = self.het_members(id) {
            return members;
        }
        match self.jobs.get(&id) {
            Some(j) if j.array_job_id != id => vec![id],
            _ => self
                .jobs
                .values()
                .filter(|j| j.array_job_id == id)
                .map(|j| j.id)
                .collect(),
        }
    }

    /// Splits pending task `t` off the meta record `meta_id` into a pending record of
    /// its own and returns that record's id. When `t` is the meta's last pending task,
    /// the meta record itself becomes task `t` (keeping the array's id).
    pub(super) fn split_task(&mut self, meta_id: u32, t: u32, fx: &mut Effects) -> Option<u32> {
        let meta = self.jobs.get_mut(&meta_id)?;
        if !meta.is_array_meta() {
            return None;
        }
        let a = meta.array.as_mut()?;
        if !a.tasks.remove(t) {
            return None;
        }
        if a.tasks.is_empty() {
            meta.array_task_id = Some(t);
            fx.persist.push(Job::clone(meta));
            return Some(meta_id);
        }
        let mut task = meta.clone();
        fx.persist.push(Job::clone(meta));
        let id = self.next_id;
        self.next_id += 1;
        task.id = id;
        task.array_task_id = Some(t);
        if let Some(a) = task.array.as_mut() {
            a.tasks = IndexSet::new();
        }
        fx.persist.push(Job::clone(&task));
        self.jobs.insert(id, task);
        Some(id)
    }

    /// Resolves command-line references to records. A plain id of an array names its
    /// records that are still active (every record when none is). With `split`, pending
    /// tasks named by `N_i` are split off the meta record first (so that a hold or an
    /// update applies to them alone); a selection covering all of the meta's pending
    /// tasks names the meta record itself.
    pub(super) fn targets(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        split: bool,
        c: Caller,
        fx: &mut Effects,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for &id in ids {
            let mut recs = self.records_of(id);
            let whole_array = self.jobs.get(&id).is_none_or(|j| j.array_job_id == id);
            if whole_array && recs.len() > 1 {
                let active: Vec<u32> = recs
                    .iter()
                    .copied()
                    .filter(|r| self.jobs[r].is_active())
                    .collect();
                if !active.is_empty() {
                    recs = active;
                }
            }
            out.push(Target {
                result: JobResult::new(id, None),
                records: if recs.is_empty() {
                    Err(SlurmError::InvalidJobId)
                } else {
                    Ok(recs)
                },
            });
        }
        for sel in tasks {
            let result = JobResult {
                id: sel.job,
                error: None,
                task: (sel.tasks.len() == 1).then(|| sel.tasks.min().unwrap_or(0)),
                het: None,
            };
            let mut recs = Vec::new();
            let mut meta_hit: Option<(u32, Vec<u32>)> = None;
            for rid in self.records_of(sel.job) {
                let j = &self.jobs[&rid];
                if j.array_job_id != sel.job {
                    continue;
                }
                match (j.array_task_id, &j.array) {
                    (Some(t), _) if sel.tasks.contains(t) => recs.push(rid),
                    (None, Some(a)) if j.is_array_meta() => {
                        let hit = a.tasks.intersection(&sel.tasks);
                        if !hit.is_empty() {
                            meta_hit = Some((rid, hit));
                        }
                    }
                    _ => {}
                }
            }
            if let Some((meta, hit)) = meta_hit {
                let covers_all = self.jobs[&meta]
                    .array
                    .as_ref()
                    .is_some_and(|a| a.tasks.len() == hit.len() as u64);
                let owner_ok = self.manager(c).may(&self.jobs[&meta]);
                if !split || covers_all || !owner_ok {
                    recs.push(meta);
                } else {
                    for t in hit {
                        if let Some(id) = self.split_task(meta, t, fx) {
                            recs.push(id);
                        }
                    }
                }
            }
            out.push(Target {
                result,
                records: if recs.is_empty() {
                    Err(SlurmError::InvalidJobId)
                } else {
                    Ok(recs)
                },
            });
        }
        out
    }

    /// Cancels pending tasks `hit` of meta record `meta_id` (`scancel N_i`): they leave
    /// the set; when none is left, the meta record becomes the last of them, CANCELLED.
    pub(super) fn cancel_pending_tasks(
        &mut self,
        meta_id: u32,
        hit: &[u32],
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let m = self.manager(c);
        let j = self
            .jobs
            .get_mut(&meta_id)
            .ok_or(SlurmError::InvalidJobId)?;
        if !m.may(j) {
            return Err(SlurmError::AccessDenied);
        }
        let Some(a) = j.array.as_mut() else {
            return Err(SlurmError::InvalidJobId);
        };
        for &t in hit {
            a.tasks.remove(t);
        }
        if a.tasks.is_empty() {
            j.array_task_id = hit.last().copied();
            j.state = JobState::Cancelled;
            j.end_time = Some(now);
            j.cancelled_by = Some(c.uid);
            j.reason = Reason::None;
        }
        fx.persist.push(Job::clone(j));
        fx.schedule = true;
        Ok(())
    }

    /// Before a scheduling pass: counts each array's running tasks (for its throttle)
    /// and picks, for each meta record that may start tasks, the indices that may start
    /// in this pass (bounded by the throttle, by the free CPUs, and for `aftercorr` by
    /// the partner tasks that completed).
    pub(super) fn array_plan(&mut self, corr: &CorrEligible) -> HashMap<u32, VecDeque<u32>> {
        let pending: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && j.array.is_some())
            .map(|j| j.id)
            .collect();
        let mut plan = HashMap::new();
        if pending.is_empty() {
            return plan;
        }
        let mut running: HashMap<u32, u32> = HashMap::new();
        for j in self.jobs.values() {
            let started = matches!(j.state, JobState::Running | JobState::Suspended);
            if j.array_job_id != 0 && (started || j.completing) {
                *running.entry(j.array_job_id).or_default() += 1;
            }
        }
        let mut metas = Vec::new();
        for id in pending {
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            let run = running.get(&j.array_job_id).copied().unwrap_or(0);
            if let Some(a) = j.array.as_mut() {
                a.running = run;
            }
            if j.is_array_meta() {
                metas.push(id);
            }
        }
        let free_cpus: u64 = self
            .nodes
            .iter()
            .filter(|n| n.schedulable())
            .map(|n| u64::from(n.cpus.saturating_sub(n.alloc_cpus)))
            .sum();
        for id in metas {
            let Some(j) = self.jobs.get_mut(&id) else {
                continue;
            };
            let run = running.get(&id).copied().unwrap_or(0);
            let Some(a) = j.array.as_ref() else { continue };
            let room = if a.throttle > 0 {
                u64::from(a.throttle.saturating_sub(run))
            } else {
                u64::MAX
            };
            let fit = free_cpus / u64::from(j.req_cpus.max(1)) + 1;
            let n = room.min(fit).clamp(1, MAX_COPIES_PER_PASS);
            let picks: VecDeque<u32> = match corr.get(&id) {
                Some(ok) => ok.iter().copied().take(n as usize).collect(),
                None => a.tasks.iter().take(n as usize).collect(),
            };
            plan.insert(id, picks);
        }
        plan
    }
}

/// A copy of a meta record for the scheduler: everything it reads, without the script,
/// environment and history it does not.
pub(super) fn sched_copy(j: &mut Job) -> Job {
    let script = std::mem::take(&mut j.spec.script);
    let env = std::mem::take(&mut j.spec.environment);
    let steps = std::mem::take(&mut j.steps);
    let copy = j.clone();
    j.spec.script = script;
    j.spec.environment = env;
    j.steps = steps;
    copy
}

#[cfg(test)]
mod tests;
