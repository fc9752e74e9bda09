//! Job control: scancel, scontrol hold/release/requeue/suspend/resume/update job,
//! waiting on a job, releasing an allocation, signalling steps (cf. slurmctld's
//! `_slurm_rpc_job_step_kill`, `_slurm_rpc_update_job`, `_slurm_rpc_suspend`,
//! `_slurm_rpc_requeue`). Answers wait for the commit of the records they changed.

use super::{Ctx, Later, Reply, done};
use crate::ctld::state::SignalScope;
use crate::model::ExitStatus;
use crate::model::array::IndexSet;
use crate::proto::{ArrayTasks, HetComponent, JobFilter, JobUpdate, Response, SlurmError};

/// scancel: cancel the jobs `filter` selects (`signal: None`), or signal them
/// (`batch_only`: `-b`, `full`: `-f`); one result per job.
pub fn cancel(
    cx: &mut Ctx,
    filter: &JobFilter,
    signal: Option<i32>,
    batch_only: bool,
    full: bool,
) -> Reply {
    let scope = SignalScope::of(batch_only, full);
    // slurmctld's _slurm_rpc_kill_job, one line per job named.
    for id in &filter.ids {
        let uid = cx.caller.uid;
        match signal {
            None | Some(9) => {
                tracing::info!("_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId={id} uid {uid}")
            }
            Some(s) => tracing::info!(
                "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId={id} signal {s} uid {uid}"
            ),
        }
    }
    Reply::Now(Response::Results(
        cx.cluster
            .cancel(filter, signal, scope, cx.caller, cx.now, cx.fx),
    ))
}

/// scontrol hold/uhold.
pub fn hold(cx: &mut Ctx, ids: &[u32], tasks: &[ArrayTasks], user_hold: bool) -> Reply {
    Reply::Now(Response::Results(
        cx.cluster.hold(ids, tasks, user_hold, cx.caller, cx.fx),
    ))
}

/// scontrol release.
pub fn release(cx: &mut Ctx, ids: &[u32], tasks: &[ArrayTasks]) -> Reply {
    Reply::Now(Response::Results(
        cx.cluster.release(ids, tasks, cx.caller, cx.now, cx.fx),
    ))
}

/// scontrol requeue/requeuehold.
pub fn requeue(cx: &mut Ctx, ids: &[u32], tasks: &[ArrayTasks], hold: bool) -> Reply {
    Reply::Now(Response::Results(
        cx.cluster
            .requeue(ids, tasks, hold, cx.caller, cx.now, cx.fx),
    ))
}

/// scontrol suspend/resume.
pub fn suspend(cx: &mut Ctx, ids: &[u32], tasks: &[ArrayTasks], resume: bool) -> Reply {
    Reply::Now(Response::Results(
        cx.cluster
            .suspend(ids, tasks, resume, cx.caller, cx.now, cx.fx),
    ))
}

/// scontrol update job (`tasks`: some tasks of an array only).
pub fn update_job(cx: &mut Ctx, id: u32, tasks: Option<&IndexSet>, updates: &[JobUpdate]) -> Reply {
    done(
        cx.cluster
            .update_job_at(id, tasks, updates, cx.caller, cx.now, cx.fx),
    )
}

/// `sbatch --wait`, `srun`/`salloc` waiting for their job: answered when the job has
/// started (`started`) or ended. Errors: no such job.
pub fn wait_job(cx: &mut Ctx, job_id: u32, started: bool) -> Reply {
    if !cx.cluster.jobs.contains_key(&job_id) {
        return Reply::Now(Response::Error(SlurmError::InvalidJobId));
    }
    Reply::Later(Later::Wait { job_id, started })
}

/// salloc/srun giving back an allocation, with its exit status.
pub fn release_allocation(cx: &mut Ctx, job_id: u32, exit: ExitStatus) -> Reply {
    done(
        cx.cluster
            .release_allocation(job_id, exit, cx.caller, cx.now, cx.fx),
    )
}

/// scancel of steps (`job.step`, and `job+component.step` of heterogeneous jobs).
pub fn cancel_steps(
    cx: &mut Ctx,
    steps: &[(u32, u32)],
    het_steps: &[(HetComponent, u32)],
    signal: Option<i32>,
) -> Reply {
    let mut out = cx
        .cluster
        .cancel_steps(steps, signal, cx.caller, cx.now, cx.fx);
    out.extend(
        cx.cluster
            .cancel_het_steps(het_steps, signal, cx.caller, cx.now, cx.fx),
    );
    Reply::Now(Response::Results(out))
}
