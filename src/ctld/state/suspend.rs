//! `scontrol suspend`/`resume` and the suspensions preemption makes (cf.
//! slurmctld/job_mgr.c `job_suspend`): a suspended job keeps its allocation, its
//! processes are stopped on every node of it (freezer, or SIGSTOP without one), and the
//! time it spends suspended is not counted against its time limit.

use super::{Caller, Cluster, Effects};
use crate::model::{Job, JobState, Suspension};
use crate::proto::{ArrayTasks, JobResult, SlurmError, ToAgent};

impl Cluster {
    /// `scontrol suspend` (`resume: false`) or `scontrol resume` (`resume: true`) of
    /// jobs (ids, array ids or tasks). Operators only (AccessDenied otherwise); a job
    /// to suspend must be running ("Job is not running"; pending jobs: "Job is pending
    /// execution"), a job to resume suspended ("Job is not suspended").
    pub fn suspend(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        resume: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        let mut out = Vec::new();
        for t in self.targets(ids, tasks, false, c, fx) {
            let error = match t.records {
                Err(e) => Some(e),
                Ok(_) if !op => Some(SlurmError::AccessDenied),
                Ok(recs) => {
                    let rs = recs
                        .into_iter()
                        .map(|id| {
                            if resume {
                                self.resume_job(id, now, fx)
                            } else {
                                self.suspend_job(id, None, now, fx)
                            }
                        })
                        .collect();
                    super::fold_results(rs)
                }
            };
            out.push(JobResult { error, ..t.result });
        }
        out
    }

    /// Suspends a running job: state SUSPENDED from `now`, its processes stopped on
    /// each of its nodes. `preemptor` is the job it makes room for (PreemptMode=SUSPEND;
    /// the job is resumed when that one no longer holds its CPUs).
    pub(super) fn suspend_job(
        &mut self,
        id: u32,
        preemptor: Option<u32>,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let j = self.jobs.get_mut(&id).ok_or(SlurmError::InvalidJobId)?;
        match j.state {
            JobState::Pending => return Err(SlurmError::JobPending),
            JobState::Running if !j.completing => {}
            s if s.is_terminal() || j.completing => return Err(SlurmError::AlreadyDone),
            _ => return Err(SlurmError::Other("Job is not running".into())),
        }
        j.state = JobState::Suspended;
        j.suspension = Some(Suspension {
            since: now,
            preemptor,
        });
        set_step_states(j, JobState::Running, JobState::Suspended);
        fx.persist.push(Job::clone(j));
        for node in nodes_of(j) {
            fx.to_agent.push((
                node,
                ToAgent::Suspend {
                    job_id: id,
                    suspend: true,
                },
            ));
        }
        Ok(())
    }

    /// Resumes a suspended job: RUNNING again, the time it was suspended added to
    /// `suspended_secs` (which pushes its time limit back).
    pub(super) fn resume_job(
        &mut self,
        id: u32,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let j = self.jobs.get_mut(&id).ok_or(SlurmError::InvalidJobId)?;
        match j.state {
            JobState::Suspended if !j.completing => {}
            JobState::Pending => return Err(SlurmError::JobPending),
            s if s.is_terminal() || j.completing => return Err(SlurmError::AlreadyDone),
            _ => return Err(SlurmError::Other("Job is not suspended".into())),
        }
        end_suspension(j, now);
        j.state = JobState::Running;
        set_step_states(j, JobState::Suspended, JobState::Running);
        fx.persist.push(Job::clone(j));
        for node in nodes_of(j) {
            fx.to_agent.push((
                node,
                ToAgent::Suspend {
                    job_id: id,
                    suspend: false,
                },
            ));
        }
        fx.schedule = true;
        Ok(())
    }
}

/// Folds a suspension in progress into `suspended_secs` (the job resumes or ends).
pub(super) fn end_suspension(j: &mut Job, now: i64) {
    if let Some(s) = j.suspension.take() {
        j.suspended_secs += (now - s.since).max(0) as u64;
    }
}

/// The job's nodes, each once, in allocation order.
fn nodes_of(j: &Job) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in j.alloc.iter().flat_map(|a| a.nodes.iter()) {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// Step records still going (no end) in state `from` move to `to`, as sacct shows
/// a suspended job's steps SUSPENDED.
fn set_step_states(j: &mut Job, from: JobState, to: JobState) {
    for s in j.steps.iter_mut() {
        if s.end_time.is_none() && s.state == from {
            s.state = to;
        }
    }
}
