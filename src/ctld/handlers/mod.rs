//! Request handlers (cf. slurmctld's proc_req.c): one module per family of
//! [`Request`], each function taking the request's fields and the state it needs
//! ([`Ctx`]) and returning a [`Reply`] that says what to answer and when.
//!
//! A handler never sees a connection or a channel: the actor routes every [`Reply`] in
//! one place (`Actor::route`), so that another transport (a REST API, a metrics
//! endpoint) reuses the handlers by sending the actor the same request, and tests call
//! them on a bare [`Cluster`].
//!
//! Families: [`submit`] (sbatch, salloc), [`jobs`] (scancel, scontrol hold/release/
//! requeue/suspend/update job, waiting on and releasing allocations, step signals),
//! [`query`] (squeue, sinfo, scontrol show, sprio, sdiag, sshare), [`acct`] (sacct,
//! sacctmgr, sreport), [`resv`] (reservations), [`admin`] (scontrol update node,
//! reconfigure, setdebug, shutdown). To add a request: a `proto::Request` variant, a
//! function in its family's module, and one arm in [`dispatch`].

pub mod acct;
pub mod admin;
pub mod jobs;
pub mod query;
pub mod resv;
pub mod submit;

use super::downtime::DownLog;
use super::state::{Caller, Cluster, Effects};
use crate::config::NodeConf;
use crate::proto::{AcctQuery, Request, Response, SlurmError, UsageReport};
use std::collections::HashMap;

/// What a handler answers, and when.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// Answer now; if records changed in this burst of messages (this request's or an
    /// earlier one's), the answer waits for their commit.
    Now(Response),
    /// Answer once the records this request wrote are committed (a job id returned
    /// to a client is durable).
    AfterCommit(Response),
    /// Answered later, as [`Later`] says.
    Later(Later),
}

/// Replies that wait for something other than the current commit.
#[derive(Debug, PartialEq)]
pub enum Later {
    /// `salloc`/`srun` allocation: after this iteration's scheduling pass, the job as
    /// it then stands ([`Response::Allocation`]).
    Allocation(u32),
    /// Until the job has started (`started`), else until it has ended.
    Wait { job_id: u32, started: bool },
    /// An accounting query, answered by the store after the writes queued so far.
    Acct { query: AcctQuery, now: i64 },
    /// An sreport query: the store adds job records and past reservation windows to
    /// `report` after the writes queued so far.
    Usage {
        start: i64,
        end: i64,
        report: Box<UsageReport>,
    },
    /// A committed sacctmgr change: answered after the association tree's commit.
    AssocCommit(Response),
}

/// Things only the actor can do, asked for by a handler and done after it returns.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// Stop the controller (`sluice controller --stop`).
    pub stop: bool,
    /// Send every connected agent the current cgroup and script settings.
    pub configure_agents: bool,
}

/// What a handler may read and change: the cluster state, the effects it records, the
/// caller, and the actor-side tables a few requests use.
pub struct Ctx<'a> {
    pub cluster: &'a mut Cluster,
    pub fx: &'a mut Effects,
    pub caller: Caller,
    /// The caller's user name as the OS gave it for this request (`None`: no name).
    pub user: Option<String>,
    /// Seconds since the epoch.
    pub now: i64,
    /// Submissions by token, to answer a retried submission with its first job.
    pub submissions: &'a mut submit::Submissions,
    /// Node declarations agents register against (changed by reconfigure).
    pub declared: &'a mut HashMap<String, NodeConf>,
    /// Node down intervals for sreport.
    pub downlog: &'a DownLog,
    /// User and group names of a uid and gid (NSS at run time, fixed names in tests).
    pub names: &'a dyn Fn(u32, u32) -> (String, String),
    /// Group memberships for partitions' AllowGroups, refreshed before a request that
    /// resolves a job (NSS at run time; nothing in tests).
    pub refresh_groups: &'a dyn Fn(&mut Cluster, Caller),
    /// Filled in by the handler.
    pub control: Control,
}

/// The one place that maps a request to its handler.
pub fn dispatch(cx: &mut Ctx, req: Request) -> Reply {
    // Coordinators and accounting admins are known by name: the caller's, as the
    // OS names the uid for this very request (a renamed or removed user is seen
    // at once; nothing is kept from an earlier request).
    cx.cluster.groups.note_name(cx.caller.uid, cx.user.clone());
    match req {
        Request::Ping => Reply::Now(Response::Ok),
        Request::Submit {
            spec,
            test_only,
            het,
        } => submit::submit(cx, *spec, het, test_only),
        Request::Allocate { spec, het, .. } => submit::allocate(cx, *spec, het),
        Request::Jobs(filter) => query::jobs(cx.cluster, &filter, cx.now),
        Request::Nodes => query::nodes(cx.cluster, cx.now),
        Request::Config => query::config(cx.cluster),
        Request::Topology => query::topology(cx.cluster),
        Request::Priority { ids, users } => query::priority(cx.cluster, &ids, &users, cx.now),
        Request::Stats => query::stats(cx.cluster, cx.now),
        Request::Shares => query::shares(cx.cluster, cx.now),
        Request::Reservations => query::reservations(cx.cluster, cx.now),
        Request::BatchScript { job_id } => query::batch_script(cx.cluster, cx.caller, job_id),
        Request::Cancel {
            filter,
            signal,
            batch_only,
            full,
        } => jobs::cancel(cx, &filter, signal, batch_only, full),
        Request::Hold {
            ids,
            user_hold,
            array_tasks,
        } => jobs::hold(cx, &ids, &array_tasks, user_hold),
        Request::Release { ids, array_tasks } => jobs::release(cx, &ids, &array_tasks),
        Request::Requeue {
            ids,
            hold,
            array_tasks,
        } => jobs::requeue(cx, &ids, &array_tasks, hold),
        Request::Suspend {
            ids,
            array_tasks,
            resume,
        } => jobs::suspend(cx, &ids, &array_tasks, resume),
        Request::UpdateJob { id, updates, tasks } => {
            jobs::update_job(cx, id, tasks.as_ref(), &updates)
        }
        Request::WaitJob { job_id, started } => jobs::wait_job(cx, job_id, started),
        Request::ReleaseAllocation { job_id, exit } => jobs::release_allocation(cx, job_id, exit),
        Request::CancelSteps {
            steps,
            signal,
            het_steps,
        } => jobs::cancel_steps(cx, &steps, &het_steps, signal),
        Request::Acct(q) => acct::query(cx, q),
        Request::AcctTree => acct::tree(cx),
        Request::AcctChange { op, commit } => acct::change(cx, &op, commit),
        Request::Usage { start, end } => acct::usage(cx, start, end),
        Request::CreateResv(spec) => resv::create(cx, &spec),
        Request::UpdateResv(spec) => resv::update(cx, &spec),
        Request::DeleteResv { name } => resv::delete(cx, &name),
        Request::UpdateNode { names, update } => admin::update_node(cx, &names, &update),
        Request::Reconfigure => admin::reconfigure(cx),
        Request::SetDebug { level } => admin::set_debug(cx, &level),
        Request::Reboot {
            nodes,
            asap,
            next_down,
            reason,
        } => admin::reboot(cx, &nodes, asap, next_down, reason.as_deref()),
        Request::CancelReboot { nodes } => admin::cancel_reboot(cx, &nodes),
        Request::Shutdown => admin::shutdown(cx),
        // A connection that asks for a step becomes its stream before the actor sees
        // a request (`serve::serve_requests`).
        Request::StepLaunch { .. } | Request::StepAttach { .. } => Reply::Now(Response::Error(
            SlurmError::Other("step launch out of place".into()),
        )),
    }
}

/// `Ok` or the error, answered now.
fn done(r: Result<(), SlurmError>) -> Reply {
    Reply::Now(match r {
        Ok(()) => Response::Ok,
        Err(e) => Response::Error(e),
    })
}

#[cfg(test)]
mod tests;
