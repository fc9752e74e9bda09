//! Submissions: `sbatch` (one job, or a heterogeneous job's components) and
//! `salloc`/`srun` allocations (cf. slurmctld `_slurm_rpc_submit_batch_job`,
//! `_slurm_rpc_allocate_resources`, `_slurm_rpc_submit_batch_het_job`).

use super::{Ctx, Later, Reply};
use crate::model::{Job, JobSpec};
use crate::proto::{Response, SlurmError};
use std::collections::{BTreeMap, HashMap};

/// The job each (uid, `JobSpec::submit_token`) submission made, so that a submission
/// sbatch retries after losing the answer is answered with the same job (rebuilt from
/// the job records at start; pruned as jobs are purged).
#[derive(Debug, Default)]
pub struct Submissions(HashMap<(u32, u64), u32>);

/// The id a submission of `j` was answered with: its array's or heterogeneous
/// job's id for a task or component, else its own.
fn submitted_id(j: &Job) -> u32 {
    if j.array_job_id != 0 {
        j.array_job_id
    } else {
        j.het.map_or(j.id, |h| h.job_id)
    }
}

impl Submissions {
    /// The submissions of the jobs the controller holds.
    pub fn of_jobs(jobs: &BTreeMap<u32, Box<Job>>) -> Submissions {
        Submissions(
            jobs.values()
                .filter(|j| j.spec.submit_token != 0)
                .map(|j| ((j.uid, j.spec.submit_token), submitted_id(j)))
                .collect(),
        )
    }

    /// Notes the job a submission made; forgets those of purged jobs now and then, so
    /// the map stays within twice the job count.
    fn note(&mut self, uid: u32, token: u64, id: u32, jobs: &BTreeMap<u32, Box<Job>>) {
        if token == 0 {
            return;
        }
        self.0.insert((uid, token), id);
        if self.0.len() > 2 * jobs.len() + 1024 {
            self.0.retain(|_, id| jobs.contains_key(id));
        }
    }

    /// The job an earlier copy of this submission already made, if it is still known.
    fn resubmitted(&self, uid: u32, token: u64, jobs: &BTreeMap<u32, Box<Job>>) -> Option<u32> {
        if token == 0 {
            return None;
        }
        let id = *self.0.get(&(uid, token))?;
        jobs.contains_key(&id).then_some(id)
    }
}

/// Resolves the specs of one submission (a job, or a heterogeneous job's components
/// in order) against the cluster for the caller; `alloc_only` marks them as
/// allocations. Errors: the first spec that does not resolve.
fn resolve_all(
    cx: &mut Ctx,
    specs: impl Iterator<Item = JobSpec>,
    alloc_only: bool,
) -> Result<Vec<Job>, SlurmError> {
    (cx.refresh_groups)(cx.cluster, cx.caller);
    specs
        .map(|mut s| {
            if alloc_only {
                s.alloc_only = true;
            }
            cx.cluster.resolve(s, cx.caller, cx.now, cx.names)
        })
        .collect()
}

/// `sbatch` (`het`: the further components of a heterogeneous job; `test_only`:
/// `--test-only`). Answered after the job's record is committed; a retry of a
/// submission whose answer was lost gets the job the first copy made.
pub fn submit(cx: &mut Ctx, spec: JobSpec, het: Vec<JobSpec>, test_only: bool) -> Reply {
    let token = spec.submit_token;
    if !test_only
        && let Some(id) = cx
            .submissions
            .resubmitted(cx.caller.uid, token, &cx.cluster.jobs)
    {
        tracing::info!(
            job_id = id,
            uid = cx.caller.uid,
            "submission retried; answered with the job it made"
        );
        return Reply::AfterCommit(Response::Submitted { job_id: id });
    }
    let mut jobs = match resolve_all(cx, std::iter::once(spec).chain(het), false) {
        Ok(jobs) => jobs,
        Err(e) => return Reply::Now(Response::Error(e)),
    };
    if test_only {
        let first = jobs.swap_remove(0);
        return Reply::Now(Response::TestOnly(cx.cluster.test_only(first, cx.now)));
    }
    let id = if jobs.len() == 1 {
        let job = jobs.swap_remove(0);
        if job.spec.immediate && !cx.cluster.can_start_now(&job, cx.now) {
            return Reply::Now(Response::Error(SlurmError::CannotStartImmediately));
        }
        cx.cluster.submit(job, cx.fx)
    } else {
        match cx.cluster.submit_het(jobs, cx.fx) {
            Ok(id) => id,
            Err(e) => return Reply::Now(Response::Error(e)),
        }
    };
    cx.submissions
        .note(cx.caller.uid, token, id, &cx.cluster.jobs);
    let prio = cx.cluster.jobs.get(&id).map_or(0, |j| j.priority);
    tracing::info!("_slurm_rpc_submit_batch_job: JobId={id} InitPrio={prio}");
    Reply::AfterCommit(Response::Submitted { job_id: id })
}

/// `salloc`, or `srun` outside a job: an allocation-only job (heterogeneous with
/// `het`), scheduled as sbatch's jobs are and answered after the scheduling pass.
pub fn allocate(cx: &mut Ctx, spec: JobSpec, het: Vec<JobSpec>) -> Reply {
    let mut jobs = match resolve_all(cx, std::iter::once(spec).chain(het), true) {
        Ok(jobs) => jobs,
        Err(e) => return Reply::Now(Response::Error(e)),
    };
    let id = if jobs.len() == 1 {
        Ok(cx.cluster.submit(jobs.swap_remove(0), cx.fx))
    } else {
        cx.cluster.submit_het(jobs, cx.fx)
    };
    match id {
        Ok(id) => {
            tracing::info!(
                "_slurm_rpc_allocate_resources: JobId={id} uid {}",
                cx.caller.uid
            );
            Reply::Later(Later::Allocation(id))
        }
        Err(e) => Reply::Now(Response::Error(e)),
    }
}
