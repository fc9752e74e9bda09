//! Handlers called on a bare cluster, with no actor, channel or store: what each
//! answers, and when.

use super::submit::Submissions;
use super::{Control, Ctx, Later, Reply, dispatch};
use crate::ctld::downtime::DownLog;
use crate::ctld::state::{Caller, Cluster, Effects};
use crate::ctld::testutil::{ALICE, BOB, cluster_with, names, spec};
use crate::model::JobSpec;
use crate::proto::{JobFilter, Request, Response, SlurmError};
use std::collections::HashMap;

/// The controller's tables a handler borrows, kept across requests.
struct Bench {
    cluster: Cluster,
    submissions: Submissions,
    declared: HashMap<String, crate::config::NodeConf>,
    downlog: DownLog,
}

impl Bench {
    fn new() -> Bench {
        Bench {
            cluster: cluster_with(4, ""),
            submissions: Submissions::default(),
            declared: HashMap::new(),
            downlog: DownLog::default(),
        }
    }

    /// Dispatches `req` from `who` at `now`: the reply, what the actor is asked to
    /// do, and the effects.
    fn ask(&mut self, who: Caller, req: Request, now: i64) -> (Reply, Control, Effects) {
        let mut fx = Effects::default();
        let mut cx = Ctx {
            cluster: &mut self.cluster,
            fx: &mut fx,
            caller: who,
            user: Some(format!("u{}", who.uid)),
            now,
            submissions: &mut self.submissions,
            declared: &mut self.declared,
            downlog: &self.downlog,
            names: &names,
            refresh_groups: &|_, _| {},
            control: Control::default(),
        };
        let out = dispatch(&mut cx, req);
        let control = cx.control;
        (out, control, fx)
    }
}

fn submit_req(s: JobSpec) -> Request {
    Request::Submit {
        spec: Box::new(s),
        test_only: false,
        het: Vec::new(),
    }
}

#[test]
fn a_submission_is_answered_after_its_record_commits_and_a_retry_gets_the_same_job() {
    let mut b = Bench::new();
    let mut s = spec("a");
    s.submit_token = 77;
    let (out, _, fx) = b.ask(ALICE, submit_req(s.clone()), 100);
    let Reply::AfterCommit(Response::Submitted { job_id }) = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        fx.persist.iter().map(|j| j.id).collect::<Vec<_>>(),
        [job_id]
    );
    assert!(fx.schedule);
    // The same submission again (its answer was lost): the same job, nothing new.
    let (again, _, fx) = b.ask(ALICE, submit_req(s.clone()), 101);
    assert_eq!(again, Reply::AfterCommit(Response::Submitted { job_id }));
    assert!(fx.persist.is_empty());
    assert_eq!(b.cluster.jobs.len(), 1);
    // Another user's submission with the same token is a new job.
    let (other, _, _) = b.ask(BOB, submit_req(s), 102);
    assert_ne!(other, Reply::AfterCommit(Response::Submitted { job_id }));
    assert_eq!(b.cluster.jobs.len(), 2);
}

#[test]
fn a_refused_or_trial_submission_is_answered_now_and_makes_no_job() {
    let mut b = Bench::new();
    let mut big = spec("big");
    big.ntasks = Some(64);
    let (out, _, fx) = b.ask(ALICE, submit_req(big), 100);
    assert!(matches!(out, Reply::Now(Response::Error(_))), "{out:?}");
    assert!(fx.persist.is_empty());
    let (trial, _, _) = b.ask(
        ALICE,
        Request::Submit {
            spec: Box::new(spec("t")),
            test_only: true,
            het: Vec::new(),
        },
        100,
    );
    assert!(
        matches!(trial, Reply::Now(Response::TestOnly(_))),
        "{trial:?}"
    );
    assert!(b.cluster.jobs.is_empty());
}

#[test]
fn allocations_and_waits_are_answered_later_and_unknown_jobs_now() {
    let mut b = Bench::new();
    let (out, _, _) = b.ask(
        ALICE,
        Request::Allocate {
            spec: Box::new(spec("x")),
            detach: false,
            het: Vec::new(),
        },
        100,
    );
    let Reply::Later(Later::Allocation(id)) = out else {
        panic!("{out:?}")
    };
    assert!(b.cluster.jobs[&id].spec.alloc_only);
    let wait = Request::WaitJob {
        job_id: id,
        started: true,
    };
    assert_eq!(
        b.ask(ALICE, wait, 100).0,
        Reply::Later(Later::Wait {
            job_id: id,
            started: true
        })
    );
    let unknown = Request::WaitJob {
        job_id: id + 1,
        started: false,
    };
    assert_eq!(
        b.ask(ALICE, unknown, 100).0,
        Reply::Now(Response::Error(SlurmError::InvalidJobId))
    );
}

#[test]
fn queries_answer_now_and_change_nothing() {
    let mut b = Bench::new();
    let (out, _, _) = b.ask(ALICE, submit_req(spec("q")), 100);
    let Reply::AfterCommit(Response::Submitted { job_id }) = out else {
        panic!("{out:?}")
    };
    let (out, control, fx) = b.ask(BOB, Request::Jobs(JobFilter::default()), 105);
    let Reply::Now(Response::Jobs { jobs, now }) = out else {
        panic!("{out:?}")
    };
    assert_eq!((jobs.len(), jobs[0].id, now), (1, job_id, 105));
    assert!(fx.persist.is_empty() && !fx.schedule);
    assert_eq!(control, Control::default());
    // Another user's batch script is refused; the owner's is given.
    assert_eq!(
        b.ask(BOB, Request::BatchScript { job_id }, 105).0,
        Reply::Now(Response::Error(SlurmError::AccessDenied))
    );
    assert_eq!(
        b.ask(ALICE, Request::BatchScript { job_id }, 105).0,
        Reply::Now(Response::BatchScript(spec("q").script))
    );
}

#[test]
fn only_an_operator_stops_the_controller() {
    let mut b = Bench::new();
    let (out, control, _) = b.ask(ALICE, Request::Shutdown, 100);
    assert_eq!(out, Reply::Now(Response::Error(SlurmError::AccessDenied)));
    assert!(!control.stop);
    // The cluster's owner (uid 999 in `cluster_with`) is an operator.
    let owner = Caller { uid: 999, gid: 999 };
    let (out, control, _) = b.ask(owner, Request::Shutdown, 100);
    assert_eq!(out, Reply::Now(Response::Ok));
    assert!(control.stop);
}

#[test]
fn accounting_queries_and_reports_go_to_the_store() {
    let mut b = Bench::new();
    let (out, _, _) = b.ask(ALICE, Request::Acct(Default::default()), 100);
    assert!(
        matches!(out, Reply::Later(Later::Acct { now: 100, .. })),
        "{out:?}"
    );
    let (out, _, _) = b.ask(ALICE, Request::Usage { start: 0, end: 50 }, 100);
    let Reply::Later(Later::Usage { start, end, report }) = out else {
        panic!("{out:?}")
    };
    assert_eq!((start, end, report.now), (0, 50, 100));
    assert_eq!(report.nodes, vec![("n1".to_string(), 4)]);
}
