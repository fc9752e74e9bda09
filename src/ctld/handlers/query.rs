//! Read-only requests: squeue, sinfo, scontrol show (config, topology, reservations,
//! batch script), sprio, sdiag, sshare (cf. slurmctld's `_slurm_rpc_dump_*`).
//!
//! Each reads the cluster and changes nothing, so it takes `&Cluster`: the query path
//! may later be served from a snapshot without the actor's other state.

use super::Reply;
use crate::ctld::jobtable::JobTable;
use crate::ctld::state::{Caller, Cluster};
use crate::model::Job;
use crate::proto::{JobFilter, Response, SlurmError};
use std::ops::Bound;

/// squeue, scontrol show job: the jobs `filter` selects, as queries see them
/// (`Job::for_query`), whole or one page at a time (`filter.page > 0`).
pub fn jobs(c: &Cluster, filter: &JobFilter, now: i64) -> Reply {
    if filter.page > 0 {
        return Reply::Now(jobs_page(&c.jobs, filter, now));
    }
    Reply::Now(Response::Jobs {
        jobs: matching(&c.jobs, filter, Bound::Unbounded)
            .map(|j| j.for_query())
            .collect(),
        now,
    })
}

/// The jobs `filter` selects with ids past `after`, in id order: through the table's
/// indexes when the filter names ids, array tasks or users (cost: those records), by a
/// scan of the table otherwise.
fn matching<'a>(
    jobs: &'a JobTable,
    filter: &'a JobFilter,
    after: Bound<u32>,
) -> impl Iterator<Item = &'a Job> + 'a {
    let found: Box<dyn Iterator<Item = &'a Job> + 'a> = match jobs.candidates(filter, after) {
        Some(ids) => Box::new(ids.filter_map(|id| jobs.get(&id).map(|j| &**j))),
        None => Box::new(jobs.range((after, Bound::Unbounded)).map(|(_, j)| &**j)),
    };
    found.filter(move |j| filter.matches(j))
}

/// One page of a paged `Request::Jobs` (`filter.page > 0`): the first `filter.page`
/// matching jobs with ids above `filter.after`, in id order, as the query sees them
/// (`Job::for_query`), and whether more may follow.
fn jobs_page(jobs: &JobTable, filter: &JobFilter, now: i64) -> Response {
    let page = filter.page as usize;
    let mut out: Vec<Job> = matching(jobs, filter, Bound::Excluded(filter.after))
        .take(page + 1)
        .map(|j| j.for_query())
        .collect();
    let more = out.len() > page;
    out.truncate(page);
    Response::JobsPage {
        jobs: out,
        now,
        more,
    }
}

/// sinfo, scontrol show node/partition.
pub fn nodes(c: &Cluster, now: i64) -> Reply {
    Reply::Now(Response::Nodes {
        nodes: c.nodes_for_query(now),
        partitions: c.partitions_shown(),
        now,
    })
}

/// scontrol show config: `Key = Value` pairs, sorted.
pub fn config(c: &Cluster) -> Reply {
    Reply::Now(Response::Config(config_pairs(c)))
}

fn config_pairs(c: &Cluster) -> Vec<(String, String)> {
    let mut v = c.config_entries.clone();
    v.push(("KillWait".into(), format!("{} sec", c.kill_wait)));
    v.push(("MinJobAge".into(), format!("{} sec", c.min_job_age)));
    v.push(("SLURM_VERSION".into(), c.slurm_version.clone()));
    v.push(("AccountingStorageEnforce".into(), c.enforce().as_text()));
    v.sort();
    v
}

/// scontrol show topology.
pub fn topology(c: &Cluster) -> Reply {
    Reply::Now(Response::Topology(Box::new(c.sched_cfg.topology.clone())))
}

/// sprio: priority factors of pending jobs (`ids`, `users`: filters, empty = all).
pub fn priority(c: &Cluster, ids: &[u32], users: &[u32], now: i64) -> Reply {
    let (rows, weights) = c.priority_rows(ids, users, now);
    Reply::Now(Response::Priority { rows, weights })
}

/// sdiag.
pub fn stats(c: &Cluster, now: i64) -> Reply {
    Reply::Now(Response::Stats(Box::new(c.stats_at(now))))
}

/// sshare: the fair-share tree.
pub fn shares(c: &Cluster, now: i64) -> Reply {
    Reply::Now(Response::Shares {
        rows: c.share_rows(now),
        cluster: c.cluster_name.clone(),
    })
}

/// scontrol show reservation, sinfo -T.
pub fn reservations(c: &Cluster, now: i64) -> Reply {
    Reply::Now(Response::Reservations {
        resvs: c.resv.list.clone(),
        now,
    })
}

/// scontrol write batch_script: the job's script, to its owner or an operator.
/// Errors: no such job, another user's job, an allocation (no script).
pub fn batch_script(c: &Cluster, caller: Caller, job_id: u32) -> Reply {
    Reply::Now(match c.jobs.get(&job_id) {
        None => Response::Error(SlurmError::InvalidJobId),
        Some(j) if j.uid != caller.uid && !c.is_operator(caller) => {
            Response::Error(SlurmError::AccessDenied)
        }
        Some(j) if j.spec.alloc_only => Response::Error(SlurmError::NotBatch),
        Some(j) => Response::BatchScript(j.spec.script.clone()),
    })
}

#[cfg(test)]
mod page_tests {
    use super::*;
    use crate::model::JobState;
    use crate::proto::JobFilter;

    #[test]
    fn job_pages_cover_each_matching_job_once_in_id_order() {
        let mut jobs = JobTable::new();
        for id in 1..=7u32 {
            let j = Job {
                id,
                state: if id % 3 == 0 {
                    JobState::Completed
                } else {
                    JobState::Pending
                },
                spec: crate::model::JobSpec {
                    script: "#!/bin/sh\ntrue\n".into(),
                    ..Default::default()
                },
                ..Job::default()
            };
            jobs.insert(id, Box::new(j));
        }
        let mut f = JobFilter {
            active_only: true,
            page: 2,
            ..JobFilter::default()
        };
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let Response::JobsPage { jobs: p, now, more } = jobs_page(&jobs, &f, 9) else {
                panic!("not a page")
            };
            assert_eq!(now, 9);
            assert!(p.len() <= 2);
            assert!(p.iter().all(|j| j.spec.script.is_empty()));
            seen.extend(p.iter().map(|j| j.id));
            match p.last() {
                Some(l) if more => f.after = l.id,
                _ => break,
            }
        }
        // 1 2 | 4 5 | 7: the finished ones (3, 6) are filtered out.
        assert_eq!(seen, vec![1, 2, 4, 5, 7]);
        assert_eq!(pages, 3);
        // The cursor at the end of the id space gives an empty last page.
        f.after = u32::MAX;
        assert_eq!(
            jobs_page(&jobs, &f, 9),
            Response::JobsPage {
                jobs: vec![],
                now: 9,
                more: false
            }
        );
    }
}
