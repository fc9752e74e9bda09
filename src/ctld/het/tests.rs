//! Heterogeneous job scenarios: consecutive ids, all-or-nothing starts, one launch
//! with every component, and components that follow their leader.

use crate::ctld::state::{Cluster, Effects, SignalScope};
use crate::ctld::testutil::*;
use crate::model::{Job, JobSpec, JobState, Reason};
use crate::proto::{JobFilter, SlurmError, ToAgent};

fn comp(tasks: u32) -> JobSpec {
    JobSpec {
        ntasks: Some(tasks),
        ..spec("het")
    }
}

fn submit_het(c: &mut Cluster, specs: Vec<JobSpec>) -> u32 {
    let jobs = specs
        .into_iter()
        .map(|s| c.resolve(s, ALICE, 0, &names).unwrap())
        .collect();
    let mut fx = Effects::default();
    c.submit_het(jobs, &mut fx).unwrap()
}

/// Launch messages of a pass: (job id, ids of the components it carries).
fn pass_launches(c: &mut Cluster, now: i64) -> Vec<(u32, Vec<u32>)> {
    let mut fx = Effects::default();
    c.schedule(now, &mut fx);
    c.sanity_check().unwrap();
    fx.to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Launch(l) => Some((l.job.id, l.het.iter().map(|j| j.id).collect())),
            _ => None,
        })
        .collect()
}

#[test]
fn components_get_consecutive_ids_and_start_together() {
    let mut c = cluster_with(4, "");
    let l = submit_het(&mut c, vec![comp(1), comp(2)]);
    assert_eq!(c.jobs[&l].display_id(false), format!("{l}+0"));
    assert_eq!(c.jobs[&(l + 1)].display_id(false), format!("{l}+1"));
    // Only the leader keeps the script.
    assert!(c.jobs[&(l + 1)].spec.script.is_empty());
    assert_eq!(pass_launches(&mut c, 1), vec![(l, vec![l + 1])]);
    assert_eq!(c.jobs[&(l + 1)].state, JobState::Running);
    assert_eq!(c.nodes[0].alloc_cpus, 3);
    // The leader's end ends the job.
    end(&mut c, l, 0, 5);
    for id in [l, l + 1] {
        assert_eq!(c.jobs[&id].state, JobState::Completed, "{id}");
        assert_eq!(c.jobs[&id].end_time, Some(5));
    }
    assert_eq!(c.nodes[0].alloc_cpus, 0);
}

#[test]
fn all_or_nothing() {
    let mut c = cluster_with(4, "");
    let busy = submit(&mut c, comp(2), ALICE, 0);
    assert_eq!(pass(&mut c, 1), vec![busy]);
    // Two free CPUs: the first component would fit, the second cannot.
    let l = submit_het(&mut c, vec![comp(1), comp(3)]);
    let small = submit(&mut c, comp(2), ALICE, 0);
    assert_eq!(pass_launches(&mut c, 2), vec![(small, vec![])]);
    assert_eq!(c.jobs[&l].state, JobState::Pending);
    assert_eq!(c.jobs[&l].reason, Reason::Resources);
    assert_eq!(c.jobs[&(l + 1)].reason, Reason::Resources);
    end(&mut c, small, 0, 3);
    // Alone in the queue, it still waits (with its reason) rather than start in part.
    assert!(pass_launches(&mut c, 3).is_empty());
    assert_eq!(c.jobs[&(l + 1)].reason, Reason::Resources);
    assert_eq!(c.nodes[0].alloc_cpus, 2);
    end(&mut c, busy, 0, 3);
    assert_eq!(pass_launches(&mut c, 3), vec![(l, vec![l + 1])]);
}

#[test]
fn any_component_id_names_the_whole_job() {
    let mut c = cluster_with(4, "");
    let l = submit_het(&mut c, vec![comp(1), comp(1)]);
    pass(&mut c, 1);
    let mut fx = Effects::default();
    let f = JobFilter {
        ids: vec![l + 1],
        ..JobFilter::default()
    };
    assert_eq!(
        c.cancel(&f, None, SignalScope::Steps, ALICE, 2, &mut fx)[0].error,
        None
    );
    // Only the leader's processes are told to end.
    let terminated: Vec<u32> = fx
        .to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Terminate { job_id, .. } => Some(*job_id),
            _ => None,
        })
        .collect();
    assert_eq!(terminated, vec![l]);
    end(&mut c, l, 0, 3);
    for id in [l, l + 1] {
        assert_eq!(c.jobs[&id].state, JobState::Cancelled);
        assert!(!c.jobs[&id].completing);
    }
    c.sanity_check().unwrap();
}

#[test]
fn requeue_brings_every_component_back() {
    let mut c = cluster_with(4, "");
    let l = submit_het(&mut c, vec![comp(1), comp(1)]);
    pass(&mut c, 1);
    let mut fx = Effects::default();
    assert_eq!(
        c.requeue(&[l], &[], false, ALICE, 2, &mut fx)[0].error,
        None
    );
    end(&mut c, l, 0, 3);
    for id in [l, l + 1] {
        let j = &c.jobs[&id];
        assert_eq!((j.state, j.restarts), (JobState::Pending, 1), "{id}");
    }
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    assert_eq!(pass_launches(&mut c, 20), vec![(l, vec![l + 1])]);
}

#[test]
fn heterogeneous_arrays_are_refused() {
    let mut c = cluster_with(4, "");
    let mut a = comp(1);
    a.array = Some("0-1".into());
    let jobs = vec![
        c.resolve(comp(1), ALICE, 0, &names).unwrap(),
        c.resolve(a, ALICE, 0, &names).unwrap(),
    ];
    let mut fx = Effects::default();
    assert_eq!(
        c.submit_het(jobs, &mut fx),
        Err(SlurmError::InvalidArraySpec)
    );
    assert!(c.jobs.is_empty());
}

#[test]
fn batch_env_has_every_group() {
    let mut c = cluster_with(4, "");
    let mut second = comp(2);
    second.name = "second".into();
    let l = submit_het(&mut c, vec![comp(1), second]);
    pass(&mut c, 1);
    let leader = Job::clone(&c.jobs[&l]);
    let others = vec![Job::clone(&c.jobs[&(l + 1)])];
    let env = crate::stepd::env::het_batch_env(&leader, &others, "c", "n1", 1);
    let get = |k: &str| env.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
    assert_eq!(get("SLURM_HET_SIZE"), Some("2"));
    assert_eq!(get("SLURM_JOB_ID"), Some(l.to_string().as_str()));
    assert_eq!(
        get("SLURM_JOB_ID_HET_GROUP_1"),
        Some((l + 1).to_string().as_str())
    );
    assert_eq!(get("SLURM_NTASKS_HET_GROUP_0"), Some("1"));
    assert_eq!(get("SLURM_NTASKS_HET_GROUP_1"), Some("2"));
    assert_eq!(get("SLURM_JOB_NAME_HET_GROUP_1"), Some("second"));
}
