//! Advanced reservations in the scheduler (cf. src/slurmctld/reservation.c
//! `job_test_resv`): a job that names a reservation runs only on its nodes while it is
//! active; any other job stays off a reservation's nodes for every instant its time
//! limit would overlap the window. PURE: times are passed in.
//!
//! Invariant: with no reservations every function here allows everything, so the
//! scheduler behaves exactly as without them.

use crate::model::Job;
use crate::model::Reason;
use crate::model::reservation::Reservation;

/// Slurm's reason for a job kept off nodes by a maintenance reservation.
pub const MAINT_REASON: &str = "ReqNodeNotAvail, Reserved for maintenance";
/// Slurm's reason (WAIT_RESERVATION) for a job whose reservation has not started.
pub const WAIT_REASON: &str = "Reservation";
/// Slurm's reason (WAIT_RESV_DELETED) for a job whose reservation was deleted.
pub const DELETED_REASON: &str = "ReservationDeleted";

/// How one job relates to the reservations of a pass.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// The job names no reservation: reservations keep it away from their nodes.
    Outside,
    /// The job runs in this reservation.
    Inside(&'a Reservation),
}

/// The job's access, or the reason it cannot be considered now: its reservation is
/// gone ([`DELETED_REASON`]) or has not started ([`WAIT_REASON`]).
pub fn access<'a>(job: &Job, resvs: &'a [Reservation], now: i64) -> Result<Access<'a>, Reason> {
    let Some(name) = job.spec.reservation.as_deref() else {
        return Ok(Access::Outside);
    };
    match resvs.iter().find(|r| r.admits(Some(name))) {
        None => Err(Reason::Other(DELETED_REASON.into())),
        Some(r) if r.start > now => Err(Reason::Other(WAIT_REASON.into())),
        Some(r) if r.end <= now => Err(Reason::Other(WAIT_REASON.into())),
        Some(r) => Ok(Access::Inside(r)),
    }
}

/// Whether node `name` may hold the job during `[t0, t1)`. Inside a reservation: its
/// nodes (FLEX also lets it use nodes no other reservation holds). Outside: nodes no
/// reservation holds during the window.
pub fn node_ok(acc: Access, resvs: &[Reservation], name: &str, t0: i64, t1: i64) -> bool {
    let free = || !resvs.iter().any(|r| r.blocks(name, t0, t1));
    match acc {
        Access::Inside(r) => r.nodes.iter().any(|n| n == name) || (r.flags.flex && free()),
        Access::Outside => free(),
    }
}

/// Why a job outside reservations did not fit when reservations hid some of its
/// candidate nodes: Slurm names maintenance, otherwise it is `Resources`.
pub fn blocked_reason(resvs: &[Reservation], names: &[&str], t0: i64, t1: i64) -> Reason {
    let maint = resvs
        .iter()
        .filter(|r| r.flags.maint)
        .any(|r| names.iter().any(|n| r.blocks(n, t0, t1)));
    if maint {
        Reason::Other(MAINT_REASON.into())
    } else {
        Reason::Resources
    }
}

/// When a reservation holding node `name` during `[t0, t1)` ends (the latest such
/// end), if one does: the earliest a job outside it can try that node again.
pub fn blocked_until(resvs: &[Reservation], name: &str, t0: i64, t1: i64) -> Option<i64> {
    resvs
        .iter()
        .filter(|r| r.blocks(name, t0, t1))
        .map(|r| r.end)
        .max()
}

/// Whether a pending reason is one backfill may still plan around (kept off nodes by
/// a maintenance reservation).
pub fn is_node_wait(r: &Reason) -> bool {
    matches!(r, Reason::Other(s) if s == MAINT_REASON)
}
