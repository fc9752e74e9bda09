//! Dependency evaluation: the controller knows every job's state, so it decides how far
//! each pending job's `--dependency` items are and records that in the job's
//! [`Dependency`]; the pure scheduler only reads the folded status (reasons
//! `Dependency` / `DependencyNeverSatisfied`). Cf. slurmctld/job_scheduler.c
//! (`test_job_dependency`, `update_job_dependency`) and job_mgr.c (`kill_invalid_depend`).
//!
//! Rules (Slurm 22.05, golden `dependency.txt`):
//! - a job the controller does not know (never existed, or purged after MinJobAge)
//!   satisfies every kind, unless an earlier evaluation already found the item failed
//!   (a failed item never recovers);
//! - `after` waits for the other job to start (or end without starting), `afterany` for
//!   it to end, `afterok` for COMPLETED (any other end fails it), `afternotok` for an end
//!   other than COMPLETED (COMPLETED fails it); `+MIN` adds minutes after that event;
//! - an array id (or `N_*`) means every task; `N_i` one task; `aftercorr` pairs task i
//!   of this array with task i of the other;
//! - `singleton` waits while another job of the same user and name runs, or is queued
//!   with a lower id;
//! - a satisfied dependency is cleared (`Dependency=(null)`); one that can never be
//!   satisfied leaves the job pending, or cancels it with `kill_invalid_depend`.

use super::state::{Cluster, Effects};
use crate::model::depend::{DepKind, DepState, DepStatus, DepTarget, Dependency};
use crate::model::{Job, JobState, Reason};
use crate::proto::SlurmError;
use std::collections::{BTreeMap, HashMap};

/// How far a dependency's target (one job, one task or a whole array) has got.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Records still pending (a meta record counts its tasks).
    pending: u64,
    /// Records running, suspended or completing.
    active: u64,
    /// Ended records, and how many of them COMPLETED.
    done: u64,
    done_ok: u64,
    /// Latest start and latest end among the records.
    last_start: Option<i64>,
    last_end: Option<i64>,
}

impl Progress {
    fn add(&mut self, j: &Job) {
        if j.state == JobState::Pending {
            self.pending += match (&j.array, j.array_task_id) {
                (Some(a), None) => a.tasks.len().max(1),
                _ => 1,
            };
        } else if j.is_active() {
            self.active += 1;
        } else {
            self.done += 1;
            if j.state == JobState::Completed {
                self.done_ok += 1;
            }
        }
        if let Some(s) = j.start_time {
            self.last_start = self.last_start.max(Some(s));
        }
        if !j.is_active()
            && let Some(e) = j.end_time
        {
            self.last_end = self.last_end.max(Some(e));
        }
    }

    fn is_empty(&self) -> bool {
        self.pending + self.active + self.done == 0
    }

    /// The state of an item of `kind` waiting on this target, with `+minutes`.
    fn state(&self, kind: DepKind, minutes: u32, now: i64) -> DepState {
        if self.is_empty() {
            return DepState::Fulfilled;
        }
        let all_done = self.pending == 0 && self.active == 0;
        let failed = self.done - self.done_ok;
        let after = |t: Option<i64>| t.unwrap_or(now) + i64::from(minutes) * 60 <= now;
        match kind {
            DepKind::Singleton => DepState::Fulfilled,
            DepKind::After => {
                if self.pending == 0 && after(self.last_start.max(self.last_end)) {
                    DepState::Fulfilled
                } else {
                    DepState::Unfulfilled
                }
            }
            DepKind::AfterAny | DepKind::AfterBurstBuffer => {
                if all_done && after(self.last_end) {
                    DepState::Fulfilled
                } else {
                    DepState::Unfulfilled
                }
            }
            DepKind::AfterOk | DepKind::AfterCorr => {
                if failed > 0 {
                    DepState::Failed
                } else if all_done && after(self.last_end) {
                    DepState::Fulfilled
                } else {
                    DepState::Unfulfilled
                }
            }
            DepKind::AfterNotOk => {
                if !all_done {
                    DepState::Unfulfilled
                } else if failed == 0 {
                    DepState::Failed
                } else if after(self.last_end) {
                    DepState::Fulfilled
                } else {
                    DepState::Unfulfilled
                }
            }
        }
    }
}

/// Per-array facts gathered once per evaluation.
#[derive(Default)]
struct Index {
    /// Every record of each array, by array id.
    arrays: HashMap<u32, Vec<u32>>,
    /// (uid, name) → ids of jobs that block a singleton: running/completing, or pending.
    names: HashMap<(u32, String), Vec<(u32, bool)>>,
}

impl Index {
    fn build(jobs: &BTreeMap<u32, Box<Job>>, want_arrays: bool, want_names: bool) -> Index {
        let mut ix = Index::default();
        for j in jobs.values() {
            if want_arrays && j.array_job_id != 0 {
                ix.arrays.entry(j.array_job_id).or_default().push(j.id);
            }
            if want_names && j.is_active() {
                ix.names
                    .entry((j.uid, j.spec.name.clone()))
                    .or_default()
                    .push((j.id, j.state == JobState::Pending));
            }
        }
        ix
    }
}

/// What evaluation found for array meta records with `aftercorr`: the pending task
/// indices whose partner task has completed, in order.
pub type CorrEligible = HashMap<u32, Vec<u32>>;

impl Cluster {
    /// The progress of `target` of job `id`.
    fn progress_of(&self, ix: &Index, id: u32, target: DepTarget) -> Progress {
        let mut p = Progress::default();
        match target {
            DepTarget::Job => match self.jobs.get(&id) {
                // An id that is an array's id means the whole array.
                Some(j) if j.array_job_id == id => {
                    return self.progress_of(ix, id, DepTarget::AllTasks);
                }
                Some(j) => p.add(j),
                None if ix.arrays.contains_key(&id) => {
                    return self.progress_of(ix, id, DepTarget::AllTasks);
                }
                None => {}
            },
            DepTarget::AllTasks => {
                for rid in ix.arrays.get(&id).into_iter().flatten() {
                    if let Some(j) = self.jobs.get(rid) {
                        p.add(j);
                    }
                }
            }
            DepTarget::Task(t) => {
                for rid in ix.arrays.get(&id).into_iter().flatten() {
                    let Some(j) = self.jobs.get(rid) else {
                        continue;
                    };
                    match j.array_task_id {
                        Some(x) if x == t => p.add(j),
                        None if j.array.as_ref().is_some_and(|a| a.tasks.contains(t)) => {
                            if j.state == JobState::Pending {
                                p.pending += 1;
                            } else {
                                // A cancelled meta record: the task ended unstarted.
                                p.done += 1;
                                p.last_end = j.end_time;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        p
    }

    /// Whether a singleton job `j` must wait for another job of its user and name.
    fn singleton_blocked(ix: &Index, j: &Job) -> bool {
        ix.names
            .get(&(j.uid, j.spec.name.clone()))
            .is_some_and(|v| {
                v.iter().any(|&(other, pending)| {
                    other != j.id && (!pending || other < j.id) && other != j.array_job_id
                })
            })
    }

    /// Re-evaluates the dependencies of every pending job: updates item states, clears
    /// satisfied dependencies, and cancels jobs whose dependency can never be satisfied
    /// when `--kill-on-invalid-dep` or `kill_invalid_depend` says so. Returns, for array
    /// meta records with `aftercorr`, the tasks that may start.
    pub(super) fn evaluate_dependencies(&mut self, now: i64, fx: &mut Effects) -> CorrEligible {
        let waiting: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && j.depend.is_some())
            .map(|j| j.id)
            .collect();
        let mut corr = CorrEligible::new();
        if waiting.is_empty() {
            return corr;
        }
        let (mut want_arrays, mut want_names) = (false, false);
        for id in &waiting {
            for it in &self.jobs[id].depend.as_ref().expect("filtered").items {
                match it.kind {
                    DepKind::Singleton => want_names = true,
                    _ => want_arrays = true,
                }
            }
        }
        let ix = Index::build(&self.jobs, want_arrays, want_names);
        for id in waiting {
            let job = &self.jobs[&id];
            let Some(dep) = &job.depend else { continue };
            let mut new = dep.clone();
            for item in &mut new.items {
                // A failed item stays failed: its job may be purged later (and an
                // unknown job satisfies every kind), but what it did is settled.
                if item.state == DepState::Failed {
                    continue;
                }
                item.state = match item.kind {
                    DepKind::Singleton => {
                        if Self::singleton_blocked(&ix, job) {
                            DepState::Unfulfilled
                        } else {
                            DepState::Fulfilled
                        }
                    }
                    DepKind::AfterCorr if job.is_array_meta() => {
                        let (state, ok) = self.corr_state(&ix, job, item.job, now);
                        corr.insert(id, ok);
                        state
                    }
                    DepKind::AfterCorr if job.array_task_id.is_some() => {
                        let t = job.array_task_id.unwrap_or(0);
                        self.corr_task_state(&ix, item.job, t, now)
                    }
                    kind => {
                        self.progress_of(&ix, item.job, item.target)
                            .state(kind, item.minutes, now)
                    }
                };
            }
            let status = new.status();
            let kill = status == DepStatus::Never
                && job
                    .spec
                    .kill_on_invalid_dep
                    .unwrap_or(self.kill_invalid_depend);
            let changed = Some(&new) != job.depend.as_ref();
            let j = self.jobs.get_mut(&id).expect("listed above");
            if kill {
                j.depend = Some(new);
                j.state = JobState::Cancelled;
                j.reason = Reason::DependencyNeverSatisfied;
                j.end_time = Some(now);
                fx.persist.push(Job::clone(j));
                super::state::shed_after_end(j);
                fx.schedule = true;
                continue;
            }
            if status == DepStatus::Satisfied && !(j.is_array_meta() && corr.contains_key(&id)) {
                j.depend = None;
                fx.persist.push(Job::clone(j));
            } else if changed {
                j.depend = Some(new);
                fx.persist.push(Job::clone(j));
            }
        }
        corr
    }

    /// The state of task `t`'s partner in array `other` for `aftercorr` (as `afterok`);
    /// a partner that does not exist satisfies it.
    fn corr_task_state(&self, ix: &Index, other: u32, t: u32, now: i64) -> DepState {
        let is_array = ix.arrays.contains_key(&other);
        let target = if is_array {
            DepTarget::Task(t)
        } else {
            DepTarget::Job
        };
        self.progress_of(ix, other, target)
            .state(DepKind::AfterOk, 0, now)
    }

    /// `aftercorr` for a meta record: fulfilled while some pending task's partner has
    /// completed (those tasks are returned), failed once every pending task's partner
    /// has failed, else unfulfilled.
    fn corr_state(&self, ix: &Index, meta: &Job, other: u32, now: i64) -> (DepState, Vec<u32>) {
        let Some(a) = &meta.array else {
            return (DepState::Fulfilled, Vec::new());
        };
        let mut ok = Vec::new();
        let mut all_failed = true;
        // Bounded: a huge array only needs enough startable tasks for one pass.
        for t in a.tasks.iter() {
            match self.corr_task_state(ix, other, t, now) {
                DepState::Fulfilled => {
                    ok.push(t);
                    all_failed = false;
                    if ok.len() >= 4096 {
                        break;
                    }
                }
                DepState::Unfulfilled => all_failed = false,
                DepState::Failed => {}
            }
        }
        let state = if !ok.is_empty() {
            DepState::Fulfilled
        } else if all_failed {
            DepState::Failed
        } else {
            DepState::Unfulfilled
        };
        (state, ok)
    }

    /// Parses and checks a dependency for job `self_id` (0 while submitting): job ids
    /// that are arrays become `N_*`, and a job may not depend on itself or on a job
    /// that (transitively) depends on it.
    ///
    /// Errors: [`SlurmError::DependencyProblem`] for bad syntax, a self-dependency or a
    /// cycle.
    pub fn parse_dependency(
        &self,
        text: &str,
        self_id: u32,
    ) -> Result<Option<Dependency>, SlurmError> {
        let Some(mut dep) = Dependency::parse(text).map_err(|_| SlurmError::DependencyProblem)?
        else {
            return Ok(None);
        };
        for item in &mut dep.items {
            if item.kind == DepKind::Singleton {
                continue;
            }
            if self_id != 0 && (item.job == self_id) {
                return Err(SlurmError::DependencyProblem);
            }
            if item.target == DepTarget::Job
                && item.kind != DepKind::AfterCorr
                && self.jobs.get(&item.job).is_some_and(|j| {
                    j.array_job_id == item.job && (j.is_array_meta() || j.array.is_some())
                })
            {
                item.target = DepTarget::AllTasks;
            }
        }
        if self_id != 0 && self.depends_on(&dep, self_id) {
            return Err(SlurmError::DependencyProblem);
        }
        Ok(Some(dep))
    }

    /// Whether following `dep` through other jobs' dependencies reaches `target`.
    fn depends_on(&self, dep: &Dependency, target: u32) -> bool {
        let mut stack: Vec<u32> = dep.items.iter().map(|i| i.job).collect();
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = stack.pop() {
            if id == target {
                return true;
            }
            if id == 0 || !seen.insert(id) {
                continue;
            }
            if let Some(d) = self.jobs.get(&id).and_then(|j| j.depend.as_ref()) {
                stack.extend(d.items.iter().map(|i| i.job));
            }
        }
        false
    }
}

#[cfg(test)]
mod tests;
