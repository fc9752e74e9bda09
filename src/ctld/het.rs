//! Heterogeneous jobs in the controller (cf. slurmctld/job_mgr.c `_het_job_*`, and
//! the "heterogeneous job" guide): `sbatch A : B` or `#SBATCH hetjob` makes one record
//! per component, with consecutive ids from the leader's (`123+0` is 123, `123+1` is
//! 124).
//!
//! - Scheduling is all or nothing: a pass whose decisions start only some components
//!   of a job is run again without that job (it waits, with the reason of the
//!   component that could not start), so the scheduler itself knows nothing of it.
//! - Only the leader runs the batch script; its launch carries the other components'
//!   allocations for the `_HET_GROUP_<k>` variables. The other components have no
//!   processes: they follow the leader (started, requeued, ended) and are never sent
//!   to a node on their own.
//! - Any component's id (or the leader's) names the whole job for cancel, hold,
//!   release, requeue and update.
//!
//! Invariant: the components of leader `L` are exactly the records with
//! `het.job_id == L`, offsets `0..size`, and all are in the same state.

use super::state::{Cluster, Effects};
use crate::model::job::HetInfo;
use crate::model::{Job, JobState};
use crate::proto::SlurmError;
use crate::sched::Decision;
use std::collections::HashSet;

impl Cluster {
    /// Inserts the resolved components of a heterogeneous job under consecutive ids
    /// (the first is the leader); returns the leader's id.
    ///
    /// Errors: [`SlurmError::InvalidArraySpec`] when a component is an array (Slurm
    /// refuses heterogeneous job arrays).
    pub fn submit_het(&mut self, jobs: Vec<Job>, fx: &mut Effects) -> Result<u32, SlurmError> {
        if jobs.iter().any(|j| j.array.is_some()) {
            return Err(SlurmError::InvalidArraySpec);
        }
        let leader = self.next_id;
        let size = jobs.len() as u32;
        // Components rank together: they start together, and they list in order.
        let prio = jobs.first().map_or(0, |j| j.priority);
        for (k, mut j) in jobs.into_iter().enumerate() {
            j.priority = prio;
            let id = self.next_id;
            self.next_id += 1;
            j.id = id;
            j.het = Some(HetInfo {
                job_id: leader,
                offset: k as u32,
                size,
            });
            if k > 0 {
                // Only the leader's script runs, in the leader's environment.
                j.spec.script = String::new();
                j.spec.environment = Default::default();
            }
            fx.persist.push(j.clone());
            self.jobs.insert(id, Box::new(j));
        }
        fx.schedule = true;
        Ok(leader)
    }

    /// Every component of the heterogeneous job `id` belongs to (leader first), or
    /// `None` when it is not one.
    pub(super) fn het_members(&self, id: u32) -> Option<Vec<u32>> {
        let h = self.jobs.get(&id)?.het?;
        Some(
            (h.job_id..h.job_id + h.size)
                .filter(|m| {
                    self.jobs
                        .get(m)
                        .is_some_and(|j| j.het.is_some_and(|x| x.job_id == h.job_id))
                })
                .collect(),
        )
    }

    /// The job id of component `hc` (`L+k`), or `None` when `L+k` names no component
    /// of a heterogeneous job led by `L`.
    pub(super) fn het_component_id(&self, hc: crate::proto::HetComponent) -> Option<u32> {
        let id = hc.leader.checked_add(hc.offset)?;
        self.jobs
            .get(&id)?
            .het
            .is_some_and(|h| h.job_id == hc.leader && h.offset == hc.offset)
            .then_some(id)
    }

    /// Leaders of heterogeneous jobs that `decisions` start only in part.
    pub(super) fn partial_het_starts(&self, decisions: &[Decision]) -> Vec<u32> {
        let started: HashSet<u32> = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job_id, .. } => Some(*job_id),
                _ => None,
            })
            .collect();
        let mut out: Vec<u32> = started
            .iter()
            .filter_map(|id| self.jobs.get(id)?.het)
            .filter(|h| (h.job_id..h.job_id + h.size).any(|m| !started.contains(&m)))
            .map(|h| h.job_id)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// After the leader of a heterogeneous job ended (or went back to the queue), the
    /// other components do the same, with the leader's state and times; those in
    /// `skip` (cancelled alone before, `scancel L+k`) keep their own.
    pub(super) fn het_follow_leader(&mut self, leader: u32, skip: &[u32]) {
        let Some(members) = self.het_members(leader) else {
            return;
        };
        let Some(l) = self.jobs.get(&leader).cloned() else {
            return;
        };
        for m in members
            .into_iter()
            .filter(|m| *m != leader && !skip.contains(m))
        {
            let Some(j) = self.jobs.get_mut(&m) else {
                continue;
            };
            j.state = l.state;
            j.reason = l.reason.clone();
            j.exit = l.exit;
            j.start_time = l.start_time;
            j.end_time = l.end_time;
            j.restarts = l.restarts;
            j.hold = l.hold;
            j.priority = l.priority;
            j.eligible_time = l.eligible_time;
            j.cancelled_by = l.cancelled_by;
        }
    }

    /// Components of started heterogeneous jobs, by leader, for the leader's launch.
    pub(super) fn het_components(&self, leader: u32) -> Vec<Job> {
        self.het_members(leader)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| *m != leader)
            .filter_map(|m| self.jobs.get(&m).map(|j| Job::clone(j)))
            .collect()
    }

    /// Whether some pending job is part of a heterogeneous job (so a pass must check
    /// for partial starts).
    pub(super) fn has_pending_het(&self) -> bool {
        self.jobs
            .values()
            .any(|j| j.het.is_some() && j.state == JobState::Pending)
    }
}

#[cfg(test)]
mod tests;
