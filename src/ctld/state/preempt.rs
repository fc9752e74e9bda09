//! Applying preemption (the decisions come from the pure `sched::preempt`): after a
//! pass, jobs waiting on resources may preempt; victims in SUSPEND mode are suspended
//! and the preemptor starts on their CPUs; victims in CANCEL or REQUEUE mode get their
//! `--signal` (else SIGTERM) and, after their GraceTime, are ended PREEMPTED or put
//! back in the queue, and the preemptor starts in a later pass once they are gone.
//! Before each pass, jobs suspended by preemption whose CPUs are free again resume.

use super::{Cluster, Effects};
use crate::model::preempt::{PreemptMode, PreemptType, Preemption, QosPreempt};
use crate::model::{Job, JobState, Reason};
use crate::proto::ToAgent;
use crate::sched::{self, preempt::Action, preempt::Victim};

/// Most preemption actions applied after one pass (each is planned on the state the
/// previous one left).
const MAX_ACTIONS_PER_PASS: usize = 32;

impl From<&crate::model::assoc::Qos> for QosPreempt {
    fn from(q: &crate::model::assoc::Qos) -> QosPreempt {
        use crate::model::assoc::PreemptMode as M;
        QosPreempt {
            name: q.name.clone(),
            preempt: q.preempt.clone(),
            mode: match q.preempt_mode {
                M::Cluster => None,
                M::Off => Some(PreemptMode::Off),
                M::Cancel => Some(PreemptMode::Cancel),
                M::Requeue => Some(PreemptMode::Requeue),
                M::Suspend => Some(PreemptMode::Suspend),
            },
            grace_time: q.grace_time_secs,
            exempt_time: q.preempt_exempt_secs.map(u64::from),
        }
    }
}

impl Cluster {
    /// The partitions as `scontrol show partition` shows them: each with the
    /// PreemptMode its jobs get (the cluster's where the partition names none; OFF
    /// under preempt/none).
    pub fn partitions_shown(&self) -> Vec<crate::model::Partition> {
        let cfg = &self.sched_cfg.preempt;
        self.partitions
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.preempt_mode = Some(match cfg.preempt_type {
                    PreemptType::None => PreemptMode::Off,
                    _ => p.preempt_mode.unwrap_or(cfg.mode),
                });
                p
            })
            .collect()
    }

    /// Resumes jobs suspended by preemption once no running job uses their CPUs
    /// (gang-style resume when their preemptor has ended).
    pub(super) fn resume_preempted(&mut self, now: i64, fx: &mut Effects) {
        if !self
            .jobs
            .values()
            .any(|j| j.suspension.is_some_and(|s| s.preemptor.is_some()))
        {
            return;
        }
        let jobs: Vec<&Job> = self
            .jobs
            .values()
            .map(|j| &**j)
            .filter(|j| j.is_active())
            .collect();
        for id in sched::preempt::resumable(&jobs) {
            if let Err(e) = self.resume_job(id, now, fx) {
                tracing::warn!(job_id = id, "cannot resume preempted job: {e}");
            }
        }
    }

    /// Preempts for pending jobs that wait on resources, as `sched::preempt::plan`
    /// decides, until it has nothing more to do.
    pub(super) fn preempt_for_pending(&mut self, now: i64, fx: &mut Effects) {
        if self.sched_cfg.preempt.preempt_type == PreemptType::None {
            return;
        }
        // preempt/qos reads the QOS records (sacctmgr's Preempt, PreemptMode, …).
        let qos: Vec<QosPreempt> = self.acct.assoc.qos.values().map(QosPreempt::from).collect();
        for _ in 0..MAX_ACTIONS_PER_PASS {
            let action = {
                let cands: Vec<&Job> = self
                    .jobs
                    .values()
                    .map(|j| &**j)
                    // Behind a blocked job (reason Priority) a job may still
                    // preempt lower-ranked ones: not only the head of the queue.
                    .filter(|j| {
                        j.state == JobState::Pending
                            && matches!(j.reason, Reason::Resources | Reason::Priority)
                    })
                    .filter(|j| j.hold.is_none() && j.het.is_none() && !j.is_array_meta())
                    .collect();
                if cands.is_empty() {
                    return;
                }
                let jobs: Vec<&Job> = self
                    .jobs
                    .values()
                    .map(|j| &**j)
                    .filter(|j| j.is_active())
                    .collect();
                let input = sched::Input {
                    jobs: &jobs,
                    nodes: &self.nodes,
                    partitions: &self.partitions,
                    licenses: &self.licenses,
                    config: &self.sched_cfg,
                    now,
                    backfill: false,
                    limits: None,
                    reservations: &self.resv.list,
                };
                sched::preempt::plan(&input, &qos, &cands)
            };
            match action {
                None => return,
                Some(Action::Start {
                    job_id,
                    partition,
                    alloc,
                }) => {
                    tracing::info!(job_id, "starting on the CPUs of jobs it preempted");
                    self.start_job(job_id, partition, alloc, true, now, fx);
                }
                Some(Action::Preempt { preemptor, victims }) => {
                    for v in &victims {
                        tracing::info!(
                            job_id = v.job_id,
                            preemptor,
                            mode = v.mode.as_str(),
                            "preempting"
                        );
                        self.preempt_job(v, preemptor, now, fx);
                    }
                }
            }
        }
    }

    /// Preempts one job: suspends it (SUSPEND), or signals it and ends it after its
    /// grace time (CANCEL, REQUEUE; a job that may not be requeued is cancelled).
    fn preempt_job(&mut self, v: &Victim, preemptor: u32, now: i64, fx: &mut Effects) {
        let victim = v.job_id;
        if v.mode == PreemptMode::Suspend {
            match self.suspend_job(v.job_id, Some(preemptor), now, fx) {
                // slurmctld's slurm_job_preempt.
                Ok(_) => tracing::info!(
                    "preempted JobId={victim} has been suspended to reclaim resources for JobId={preemptor}"
                ),
                Err(e) => tracing::warn!(job_id = v.job_id, "cannot suspend for preemption: {e}"),
            }
            return;
        }
        let Some(j) = self.jobs.get_mut(&v.job_id) else {
            return;
        };
        let requeue =
            v.mode == PreemptMode::Requeue && j.spec.requeue != Some(false) && !j.spec.alloc_only;
        j.preempt = Some(Preemption {
            time: now,
            end: now + i64::from(v.grace),
            requeue,
            preemptor,
        });
        fx.persist.push(Job::clone(j));
        // slurmctld's slurm_job_preempt.
        let how = if requeue { "requeued" } else { "killed" };
        tracing::info!(
            "preempted JobId={victim} has been {how} to reclaim resources for JobId={preemptor}"
        );
        if v.grace == 0 {
            self.end_preempted(v.job_id, now, fx);
            return;
        }
        // The notice: the job's `--signal` if it has one, else SIGTERM, to its batch
        // shell and steps on every node (each agent signals what it runs of the job).
        let signal = j.spec.signal.map_or(nix::libc::SIGTERM, |s| s.signal);
        self.signal_everywhere(v.job_id, signal, fx);
    }

    /// Sends `signal` to job `id`'s batch shell with its process group and to its steps,
    /// on every node of its allocation (each agent signals what it runs of the job):
    /// `scancel -f` and the preemption notice.
    pub(super) fn signal_everywhere(&mut self, id: u32, signal: i32, fx: &mut Effects) {
        let Some(j) = self.jobs.get(&id) else { return };
        let mut nodes: Vec<String> = Vec::new();
        for n in j.alloc.iter().flat_map(|a| a.nodes.iter()) {
            if !nodes.contains(n) {
                nodes.push(n.clone());
            }
        }
        for node in nodes {
            fx.to_agent.push((
                node,
                ToAgent::Signal {
                    job_id: id,
                    signal,
                    batch_only: false,
                },
            ));
        }
    }

    /// Ends jobs whose preemption grace time is over.
    pub(super) fn end_graced(&mut self, now: i64, fx: &mut Effects) {
        let due: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended))
            .filter(|j| !j.completing && j.preempt.is_some_and(|p| now >= p.end))
            .map(|j| j.id)
            .collect();
        for id in due {
            self.end_preempted(id, now, fx);
        }
    }

    /// Ends a job chosen for preemption: back to the queue (REQUEUE) or PREEMPTED with
    /// slurmstepd's "DUE TO PREEMPTION" line in its stderr (CANCEL).
    fn end_preempted(&mut self, id: u32, now: i64, fx: &mut Effects) {
        let Some(p) = self.jobs.get(&id).and_then(|j| j.preempt) else {
            return;
        };
        if p.requeue {
            self.requeue_running(id, false, false, now, fx);
            return;
        }
        self.end_with_notice(id, JobState::Preempted, Reason::None, "PREEMPTION", now, fx);
    }
}
