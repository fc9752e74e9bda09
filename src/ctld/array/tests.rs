//! Array scenarios: one meta record, tasks split off as they start, throttles, and
//! per-task cancel/hold/release/update.

use crate::ctld::state::{Cluster, Effects, SignalScope};
use crate::ctld::testutil::*;
use crate::model::array::IndexSet;
use crate::model::{JobSpec, JobState, Reason};
use crate::proto::{ArrayTasks, JobFilter, JobUpdate, SlurmError};

fn array_spec(expr: &str) -> JobSpec {
    JobSpec {
        array: Some(expr.into()),
        ..spec("arr")
    }
}

fn tasks(job: u32, expr: &str) -> ArrayTasks {
    ArrayTasks {
        job,
        tasks: IndexSet::parse(expr, u32::MAX).unwrap(),
    }
}

/// (own id, task id, state) of every record of array `a`, by task.
fn records(c: &Cluster, a: u32) -> Vec<(u32, Option<u32>, JobState)> {
    let mut v: Vec<_> = c
        .jobs
        .values()
        .filter(|j| j.array_job_id == a)
        .map(|j| (j.id, j.array_task_id, j.state))
        .collect();
    v.sort_by_key(|r| (r.1, r.0));
    v
}

#[test]
fn an_array_is_one_record_until_its_tasks_start() {
    let mut c = cluster_with(4, "");
    let a = submit(&mut c, array_spec("0-5"), ALICE, 0);
    assert_eq!(c.jobs.len(), 1);
    let meta = &c.jobs[&a];
    assert!(meta.is_array_meta());
    assert_eq!(meta.array_job_id, a);
    assert_eq!(meta.display_id(true), format!("{a}_[0-5]"));
    // Four CPUs: four tasks start in one pass, each split off with a new id.
    let started = pass(&mut c, 1);
    assert_eq!(started, vec![a + 1, a + 2, a + 3, a + 4]);
    assert_eq!(c.jobs[&(a + 1)].array_task_id, Some(0));
    assert_eq!(c.jobs[&(a + 4)].array_task_id, Some(3));
    assert_eq!(c.jobs[&a].array.as_ref().unwrap().tasks.to_string(), "4-5");
    assert_eq!(c.jobs[&a].reason, Reason::Resources);
    // The master keeps its id for the last task to start.
    end(&mut c, a + 1, 0, 2);
    end(&mut c, a + 2, 0, 2);
    assert_eq!(pass(&mut c, 3), vec![a + 5, a]);
    assert_eq!(c.jobs[&a].array_task_id, Some(5));
    assert!(!c.jobs[&a].is_array_meta());
    assert_eq!(c.jobs[&a].display_id(true), format!("{a}_5"));
    let env = crate::stepd::env::array_task_of(&c.jobs[&(a + 5)]).unwrap();
    assert_eq!(
        (env.task_id, env.count, env.min, env.max, env.step),
        (4, 6, 0, 5, 1)
    );
}

#[test]
fn throttle_limits_running_tasks() {
    let mut c = cluster_with(8, "");
    let a = submit(&mut c, array_spec("0-9%2"), ALICE, 0);
    assert_eq!(pass(&mut c, 1).len(), 2);
    assert_eq!(c.jobs[&a].reason, Reason::JobArrayTaskLimit);
    assert!(pass(&mut c, 2).is_empty());
    end(&mut c, a + 1, 0, 3);
    assert_eq!(pass(&mut c, 3), vec![a + 3]);
    let mut fx = Effects::default();
    let up = [JobUpdate::ArrayTaskThrottle(5)];
    c.update_job(a, None, &up, ALICE, &mut fx).unwrap();
    assert_eq!(pass(&mut c, 4).len(), 3);
    assert_eq!(c.jobs[&a].array.as_ref().unwrap().throttle, 5);
    // Every running task shows the new throttle too.
    assert_eq!(c.jobs[&(a + 2)].array.as_ref().unwrap().throttle, 5);
}

#[test]
fn max_array_size_and_bad_expressions_are_refused() {
    let c = cluster_with(4, "max_array_size = 100\n");
    for bad in ["0-100", "5-2", "abc", "1-3:0"] {
        let r = c.resolve(array_spec(bad), ALICE, 0, &names);
        assert_eq!(r.err(), Some(SlurmError::InvalidArraySpec), "{bad}");
    }
    assert!(c.resolve(array_spec("0-99"), ALICE, 0, &names).is_ok());
}

#[test]
fn a_huge_array_costs_one_record() {
    let mut c = cluster_with(4, "max_array_size = 100001\n");
    let a = submit(&mut c, array_spec("0-99999"), ALICE, 0);
    assert_eq!(c.jobs.len(), 1);
    let bytes = crate::proto::codec::encode(&c.jobs[&a]).unwrap().len();
    assert!(bytes < 2048, "meta record is {bytes} bytes");
    assert_eq!(pass(&mut c, 1).len(), 4);
    assert_eq!(c.jobs[&a].array.as_ref().unwrap().tasks.len(), 99_996);
}

#[test]
fn cancelling_tasks() {
    let mut c = cluster_with(1, "");
    let a = submit(&mut c, array_spec("0-3"), ALICE, 0);
    assert_eq!(pass(&mut c, 1), vec![a + 1]);
    let mut fx = Effects::default();
    // A pending task leaves the set; no record is made for it.
    let f = JobFilter {
        array_tasks: vec![tasks(a, "2")],
        ..JobFilter::default()
    };
    let r = c.cancel(&f, None, SignalScope::Steps, ALICE, 2, &mut fx);
    assert_eq!(r[0].error, None);
    assert_eq!(r[0].label(), format!("{a}_2"));
    assert_eq!(c.jobs[&a].display_id(false), format!("{a}_[1,3]"));
    // Another user may not.
    let r = c.cancel(&f, None, SignalScope::Steps, BOB, 2, &mut fx);
    assert!(r[0].error.is_some());
    // A task that is not there.
    let f9 = JobFilter {
        array_tasks: vec![tasks(a, "9")],
        ..JobFilter::default()
    };
    let r = c.cancel(&f9, None, SignalScope::Steps, ALICE, 2, &mut fx);
    assert_eq!(r[0].error, Some(SlurmError::InvalidJobId));
    // The array's id cancels the running task and the pending rest.
    let all = JobFilter {
        ids: vec![a],
        ..JobFilter::default()
    };
    assert_eq!(
        c.cancel(&all, None, SignalScope::Steps, ALICE, 3, &mut fx)[0].error,
        None
    );
    assert_eq!(c.jobs[&a].state, JobState::Cancelled);
    assert!(c.jobs[&(a + 1)].completing);
    assert_eq!(c.jobs[&(a + 1)].state, JobState::Cancelled);
    // A cancelled meta record keeps its unstarted tasks (sacct shows `A_[1,3]`).
    assert_eq!(c.jobs[&a].display_id(false), format!("{a}_[1,3]"));
}

#[test]
fn cancelling_the_last_pending_task_ends_the_meta_record() {
    let mut c = cluster_with(1, "");
    let a = submit(&mut c, array_spec("0-1"), ALICE, 0);
    let mut fx = Effects::default();
    let f = JobFilter {
        array_tasks: vec![tasks(a, "0-1")],
        ..JobFilter::default()
    };
    c.cancel(&f, None, SignalScope::Steps, ALICE, 1, &mut fx);
    let j = &c.jobs[&a];
    assert_eq!((j.state, j.array_task_id), (JobState::Cancelled, Some(1)));
    assert!(pass(&mut c, 2).is_empty());
}

#[test]
fn holding_and_releasing_single_tasks_splits_them_off() {
    let mut c = cluster_with(4, "");
    let mut s = array_spec("0-2");
    s.begin = Some(3600);
    let a = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    assert_eq!(c.hold(&[a], &[], false, ALICE, &mut fx)[0].error, None);
    assert_eq!(c.jobs[&a].priority, 0);
    assert_eq!(c.jobs.len(), 1);
    let r = c.release(&[], &[tasks(a, "1")], ALICE, 1, &mut fx);
    assert_eq!(r[0].error, None);
    let recs = records(&c, a);
    assert_eq!(recs.len(), 2);
    let t1 = recs.iter().find(|r| r.1 == Some(1)).unwrap().0;
    assert_ne!(t1, a);
    assert!(c.jobs[&t1].priority > 0);
    assert_eq!(c.jobs[&a].priority, 0);
    assert_eq!(c.jobs[&a].array.as_ref().unwrap().tasks.to_string(), "0,2");
    // The whole array: every record.
    c.release(&[a], &[], ALICE, 1, &mut fx);
    assert!(c.jobs[&a].priority > 0);
    // A selection that covers all pending tasks applies to the meta record itself.
    c.hold(&[], &[tasks(a, "0-2")], true, ALICE, &mut fx);
    assert_eq!(c.jobs[&a].reason, Reason::JobHeldUser);
    assert_eq!(records(&c, a).len(), 2);
}

#[test]
fn updating_one_pending_task() {
    let mut c = cluster_with(4, "");
    let mut s = array_spec("0-2");
    s.hold = true;
    let a = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    let set = IndexSet::of(2);
    let up = [JobUpdate::Name("solo".into())];
    c.update_job(a, Some(&set), &up, ALICE, &mut fx).unwrap();
    let t2 = records(&c, a).iter().find(|r| r.1 == Some(2)).unwrap().0;
    assert_eq!(c.jobs[&t2].spec.name, "solo");
    assert_eq!(c.jobs[&a].spec.name, "arr");
    let none = IndexSet::of(7);
    assert_eq!(
        c.update_job(a, Some(&none), &up, ALICE, &mut fx),
        Err(SlurmError::InvalidJobId)
    );
    let thr = [JobUpdate::ArrayTaskThrottle(1)];
    let plain = submit(&mut c, spec("plain"), ALICE, 0);
    assert_eq!(
        c.update_job(plain, None, &thr, ALICE, &mut fx),
        Err(SlurmError::InvalidArraySpec)
    );
}

#[test]
fn requeue_of_a_running_task() {
    let mut c = cluster_with(4, "");
    let a = submit(&mut c, array_spec("0-1"), ALICE, 0);
    let started = pass(&mut c, 1);
    assert_eq!(started, vec![a + 1, a]);
    let mut fx = Effects::default();
    let r = c.requeue(&[], &[tasks(a, "0")], false, ALICE, 2, &mut fx);
    assert_eq!(r[0].error, None);
    end(&mut c, a + 1, 0, 3);
    let t = &c.jobs[&(a + 1)];
    assert_eq!((t.state, t.restarts), (JobState::Pending, 1));
    assert_eq!(t.array_task_id, Some(0));
    assert_eq!(t.past_runs.len(), 1);
}
