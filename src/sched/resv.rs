//! Advanced reservations in the scheduler (cf. src/slurmctld/reservation.c
//! `job_test_resv`, licenses.c `job_test_lic_resv`): a job that names a reservation
//! runs only on its nodes while it is active; any other job stays off a reservation's
//! nodes for every instant its time limit would overlap the window. A core
//! reservation (CoreCnt) holds only that many CPUs of its nodes: other jobs use the
//! rest, its own jobs only those. Reserved licenses are kept from jobs outside the
//! reservation. PURE: times are passed in.
//!
//! Invariant: with no reservations every function here allows everything, so the
//! scheduler behaves exactly as without them.

use super::select::Cap;
use crate::model::Job;
use crate::model::Reason;
use crate::model::job::Allocation;
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
/// nodes (FLEX, or a reservation of licenses only, also lets it use nodes no other
/// reservation holds). Outside: nodes no reservation holds whole during the window.
pub fn node_ok(acc: Access, resvs: &[Reservation], name: &str, t0: i64, t1: i64) -> bool {
    let free = || !resvs.iter().any(|r| r.blocks(name, t0, t1));
    match acc {
        Access::Inside(r) => {
            r.nodes.iter().any(|n| n == name) || ((r.flags.flex || r.nodes.is_empty()) && free())
        }
        Access::Outside => free(),
    }
}

/// What the jobs of core and license reservations hold: per job, its reservation's
/// name, its CPUs on each node and its licenses, until its planned end. Counted
/// from the running jobs and those a pass starts.
#[derive(Debug, Clone, Default)]
pub struct InsideUse {
    /// (reservation, node, CPUs, planned end).
    cpus: Vec<(String, String, u32, i64)>,
    /// (reservation, license, count, planned end).
    licenses: Vec<(String, String, u32, i64)>,
}

impl InsideUse {
    /// Counts `alloc`, held until `end` by a job of reservation `resv`.
    pub fn add(&mut self, resv: &str, alloc: &Allocation, end: i64) {
        for (n, c) in alloc.nodes.iter().zip(&alloc.cpus) {
            self.cpus.push((resv.to_string(), n.clone(), *c, end));
        }
        for l in &alloc.licenses {
            self.licenses
                .push((resv.to_string(), l.name.clone(), l.count, end));
        }
    }

    /// CPUs the jobs of `resv` hold on `node` at `t` (those still running then).
    fn cpus_at(&self, resv: &str, node: &str, t: i64) -> u32 {
        held_at(&self.cpus, resv, node, t)
    }

    /// Licenses `name` the jobs of `resv` hold at `t`.
    fn licenses_at(&self, resv: &str, name: &str, t: i64) -> u32 {
        held_at(&self.licenses, resv, name, t)
    }
}

/// What the jobs of `resv` hold of `what` (a node's CPUs, a license) at `t`, from
/// (reservation, what, count, planned end) records.
fn held_at(list: &[(String, String, u32, i64)], resv: &str, what: &str, t: i64) -> u32 {
    list.iter()
        .filter(|(r, w, _, end)| r == resv && w == what && *end > t)
        .map(|x| x.2)
        .sum()
}

/// What core reservations overlapping `[t0, t1)` on node `name` take from a job's
/// CPUs there (cf. reservation.c: a job outside a core reservation may not use its
/// cores; a job inside one is confined to them): `(keep, cap)`, where `keep` is the
/// CPUs of reservations other than the job's that their own jobs do not use at `t0`
/// (those they use are already busy), and `cap`, for a job inside a core
/// reservation holding this node (not FLEX), the reservation's CPUs its jobs leave.
pub fn cpu_hold(
    acc: Access,
    resvs: &[Reservation],
    name: &str,
    t0: i64,
    t1: i64,
    used: &InsideUse,
) -> (u32, Option<u32>) {
    let mut keep = 0u32;
    let mut cap = None;
    for r in resvs.iter().filter(|r| r.overlaps(t0, t1)) {
        let Some(held) = r.cpus_on(name) else {
            continue;
        };
        let unused = held.saturating_sub(used.cpus_at(&r.name, name, t0));
        match acc {
            Access::Inside(me) if me.name == r.name => {
                if !r.flags.flex {
                    cap = Some(unused);
                }
            }
            _ => keep = keep.saturating_add(unused),
        }
    }
    (keep, cap)
}

/// Lowers `c` by a [`cpu_hold`]: a node some of whose CPUs are held back is no
/// longer free as a whole.
pub fn hold_cap(c: &mut Cap, (keep, cap): (u32, Option<u32>)) {
    if keep == 0 && cap.is_none() {
        return;
    }
    c.cpus = c.cpus.saturating_sub(keep);
    c.share_cpus = c.share_cpus.saturating_sub(keep);
    if let Some(m) = cap {
        c.cpus = c.cpus.min(m);
        c.share_cpus = c.share_cpus.min(m);
    }
    c.idle = false;
}

/// Licenses `name` that reservations overlapping `[t0, t1)`, other than the job's,
/// keep from it: what they reserve and their jobs do not use at `t0`.
pub fn license_hold(
    acc: Access,
    resvs: &[Reservation],
    name: &str,
    t0: i64,
    t1: i64,
    used: &InsideUse,
) -> u32 {
    resvs
        .iter()
        .filter(|r| r.overlaps(t0, t1))
        .filter(|r| !matches!(acc, Access::Inside(me) if me.name == r.name))
        .map(|r| {
            r.license(name)
                .saturating_sub(used.licenses_at(&r.name, name, t0))
        })
        .sum()
}

/// When the earliest core reservation holding CPUs on node `name` during
/// `[t0, t1)` ends: a time worth trying again for a job its hold kept away.
pub fn hold_ends(resvs: &[Reservation], name: &str, t0: i64, t1: i64) -> Option<i64> {
    resvs
        .iter()
        .filter(|r| r.overlaps(t0, t1) && r.cpus_on(name).is_some())
        .map(|r| r.end)
        .min()
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
