//! Dependency scenarios, each kind against jobs that end in different ways.

use crate::ctld::state::{Cluster, Effects};
use crate::ctld::testutil::*;
use crate::model::{JobSpec, JobState, Reason};
use crate::proto::{JobUpdate, SlurmError};

fn dep(name: &str, d: &str) -> JobSpec {
    JobSpec {
        dependency: Some(d.into()),
        ..spec(name)
    }
}

fn dep_text(c: &Cluster, id: u32) -> String {
    c.jobs[&id]
        .depend
        .as_ref()
        .map(|d| d.to_string())
        .unwrap_or_else(|| "(null)".into())
}

#[test]
fn afterok_afternotok_afterany_on_a_failing_job() {
    let mut c = cluster_with(4, "");
    let a = submit(&mut c, spec("willfail"), ALICE, 0);
    let ok = submit(&mut c, dep("needs_ok", &format!("afterok:{a}")), ALICE, 0);
    let notok = submit(
        &mut c,
        dep("needs_notok", &format!("afternotok:{a}")),
        ALICE,
        0,
    );
    let any = submit(&mut c, dep("needs_any", &format!("afterany:{a}")), ALICE, 0);
    let chain = submit(&mut c, dep("chain", &format!("afterok:{ok}")), ALICE, 0);
    assert_eq!(pass(&mut c, 1), vec![a]);
    for id in [ok, notok, any, chain] {
        assert_eq!(c.jobs[&id].reason, Reason::Dependency);
    }
    assert_eq!(dep_text(&c, ok), format!("afterok:{a}(unfulfilled)"));
    end(&mut c, a, 1, 5);
    let started = pass(&mut c, 5);
    assert_eq!(started, vec![notok, any]);
    assert_eq!(c.jobs[&ok].reason, Reason::DependencyNeverSatisfied);
    assert_eq!(dep_text(&c, ok), format!("afterok:{a}(failed)"));
    // Satisfied dependencies are cleared.
    assert_eq!(dep_text(&c, any), "(null)");
    // A job behind a never-satisfied one just waits.
    assert_eq!(c.jobs[&chain].reason, Reason::Dependency);
    // Once the failed job is purged (MinJobAge), the failure still stands.
    let mut fx = Effects::default();
    c.tick(5 + 400, &mut fx);
    assert!(!c.jobs.contains_key(&a), "purged");
    assert!(pass(&mut c, 406).is_empty());
    assert_eq!(c.jobs[&ok].reason, Reason::DependencyNeverSatisfied);
    assert_eq!(dep_text(&c, ok), format!("afterok:{a}(failed)"));
}

#[test]
fn afternotok_on_success_never_satisfied_and_kill_invalid() {
    let mut c = cluster_with(4, "kill_invalid_depend = true\n");
    let a = submit(&mut c, spec("good"), ALICE, 0);
    let b = submit(&mut c, dep("b", &format!("afternotok:{a}")), ALICE, 0);
    let mut keep = dep("keep", &format!("afternotok:{a}"));
    keep.kill_on_invalid_dep = Some(false);
    let k = submit(&mut c, keep, ALICE, 0);
    pass(&mut c, 1);
    end(&mut c, a, 0, 2);
    pass(&mut c, 2);
    let j = &c.jobs[&b];
    assert_eq!(
        (j.state, j.reason.clone()),
        (JobState::Cancelled, Reason::DependencyNeverSatisfied)
    );
    assert_eq!(dep_text(&c, b), format!("afternotok:{a}(failed)"));
    assert_eq!(c.jobs[&k].state, JobState::Pending);
    assert_eq!(c.jobs[&k].reason, Reason::DependencyNeverSatisfied);
}

#[test]
fn unknown_jobs_satisfy_and_bad_text_is_refused() {
    let mut c = cluster_with(4, "");
    let j = submit(&mut c, dep("x", "afterok:999999"), ALICE, 0);
    assert_eq!(pass(&mut c, 1), vec![j]);
    for bad in ["bogus:1", "afterok:abc", "afterok:1,afterany:2?after:3"] {
        let r = c.resolve(dep("bad", bad), ALICE, 0, &names);
        assert_eq!(r.err(), Some(SlurmError::DependencyProblem), "{bad}");
    }
}

#[test]
fn and_or_lists() {
    let mut c = cluster_with(1, "");
    let mut h = spec("held");
    h.hold = true;
    let held = submit(&mut c, h, ALICE, 0);
    let b = submit(&mut c, spec("b"), ALICE, 0);
    let and = submit(&mut c, dep("and", &format!("afterok:{held}:{b}")), ALICE, 0);
    let or = submit(
        &mut c,
        dep("or", &format!("afterok:{held}?afterok:{b}")),
        ALICE,
        0,
    );
    assert_eq!(pass(&mut c, 1), vec![b]);
    end(&mut c, b, 0, 2);
    pass(&mut c, 2);
    assert_eq!(c.jobs[&and].reason, Reason::Dependency);
    assert_eq!(
        dep_text(&c, and),
        format!("afterok:{held}(unfulfilled),afterok:{b}(fulfilled)")
    );
    assert_eq!(c.jobs[&or].state, JobState::Running);
}

#[test]
fn after_with_minutes() {
    let mut c = cluster_with(4, "");
    let a = submit(&mut c, spec("a"), ALICE, 0);
    let b = submit(&mut c, dep("b", &format!("after:{a}+1")), ALICE, 0);
    assert_eq!(pass(&mut c, 10), vec![a]);
    assert!(pass(&mut c, 69).is_empty());
    assert_eq!(dep_text(&c, b), format!("after:{a}+1(unfulfilled)"));
    assert_eq!(pass(&mut c, 70), vec![b]);
}

#[test]
fn singleton_runs_one_job_per_name_and_user() {
    let mut c = cluster_with(4, "");
    let a = submit(&mut c, dep("single", "singleton"), ALICE, 0);
    let b = submit(&mut c, dep("single", "singleton"), ALICE, 0);
    let other_user = submit(&mut c, dep("single", "singleton"), BOB, 0);
    assert_eq!(pass(&mut c, 1), vec![a, other_user]);
    assert_eq!(dep_text(&c, b), "singleton(unfulfilled)");
    end(&mut c, a, 0, 2);
    assert_eq!(pass(&mut c, 2), vec![b]);
}

#[test]
fn a_dependency_on_an_array_waits_for_every_task() {
    let mut c = cluster_with(2, "");
    let mut s = spec("arr");
    s.array = Some("0-2".into());
    let a = submit(&mut c, s, ALICE, 0);
    let d = submit(&mut c, dep("d", &format!("afterok:{a}")), ALICE, 0);
    let one = submit(&mut c, dep("one", &format!("afterok:{a}_0")), ALICE, 0);
    assert_eq!(dep_text(&c, d), format!("afterok:{a}_*(unfulfilled)"));
    // Tasks 0 and 1 split off with the next ids; task 2 keeps the array's id.
    let (t0, t1) = (one + 1, one + 2);
    assert_eq!(pass(&mut c, 1), vec![t0, t1]);
    end(&mut c, t0, 0, 2);
    // The array's last task comes first in the queue; `one` may start too once a
    // CPU is free, while `d` still waits for tasks 1 and 2.
    assert_eq!(pass(&mut c, 2), vec![a]);
    assert_eq!(dep_text(&c, one), "(null)");
    end(&mut c, t1, 0, 3);
    assert_eq!(pass(&mut c, 3), vec![one]);
    assert_eq!(c.jobs[&d].reason, Reason::Dependency);
    end(&mut c, a, 0, 4);
    assert_eq!(pass(&mut c, 4), vec![d]);
}

#[test]
fn aftercorr_pairs_tasks() {
    let mut c = cluster_with(2, "");
    let mut first = spec("first");
    first.array = Some("0-1".into());
    let a = submit(&mut c, first, ALICE, 0);
    let mut second = dep("second", &format!("aftercorr:{a}"));
    second.array = Some("0-1".into());
    let b = submit(&mut c, second, ALICE, 0);
    assert_eq!(pass(&mut c, 1), vec![a + 2, a]);
    assert_eq!(c.jobs[&b].reason, Reason::Dependency);
    // a's task 1 is job a (the last to start); it ends first.
    end(&mut c, a, 0, 2);
    let started = pass(&mut c, 2);
    assert_eq!(started.len(), 1);
    let t = &c.jobs[&started[0]];
    assert_eq!((t.array_job_id, t.array_task_id), (b, Some(1)));
    assert!(t.depend.is_none());
    end(&mut c, a + 2, 3, 3);
    pass(&mut c, 3);
    assert_eq!(c.jobs[&b].reason, Reason::DependencyNeverSatisfied);
}

#[test]
fn update_dependency_and_cycles() {
    let mut c = cluster_with(4, "");
    let mut h = spec("h");
    h.hold = true;
    let a = submit(&mut c, h.clone(), ALICE, 0);
    let b = submit(&mut c, dep("b", &format!("afterok:{a}")), ALICE, 0);
    let mut fx = Effects::default();
    let cyc = [JobUpdate::Dependency(format!("afterok:{b}"))];
    assert_eq!(
        c.update_job(a, None, &cyc, ALICE, &mut fx),
        Err(SlurmError::DependencyProblem)
    );
    let me = [JobUpdate::Dependency(format!("afterany:{a}"))];
    assert_eq!(
        c.update_job(a, None, &me, ALICE, &mut fx),
        Err(SlurmError::DependencyProblem)
    );
    let clear = [JobUpdate::Dependency(String::new())];
    c.update_job(b, None, &clear, ALICE, &mut fx).unwrap();
    assert_eq!(dep_text(&c, b), "(null)");
    assert_eq!(pass(&mut c, 1), vec![b]);
}
