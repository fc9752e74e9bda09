//! Backfill on the timeline: what starts early, what waits, the starts it plans, and
//! the difference between FIFO, EASY and conservative.

use super::*;

fn cfg(policy: Policy) -> SchedConfig {
    SchedConfig {
        policy,
        bf_resolution: 1,
        ..SchedConfig::default()
    }
}

/// n1 has 4 CPUs; job 9 holds 3 of them until t=600.
fn setup() -> (Vec<Node>, Vec<Partition>, Job) {
    (
        vec![node("n1", 4, 4000)],
        vec![part("p", &["n1"])],
        running(9, "n1", 3, 0),
    )
}

fn limited(id: u32, cpus: u32, mins: u32, prio: u32) -> Job {
    let mut j = job(id, cpus, 10);
    j.time_limit = TimeLimit::Minutes(mins);
    j.priority = prio;
    j
}

fn est(o: &Outcome, id: u32) -> Option<i64> {
    o.estimates.iter().find(|e| e.job_id == id).map(|e| e.start)
}

#[test]
fn short_job_backfills_without_delaying_the_reserved_one() {
    let (n, p, r) = setup();
    let big = limited(1, 4, 10, 300);
    let short = limited(2, 1, 5, 200);
    let long = limited(3, 1, 20, 100);
    let o = pass(
        &[&big, &short, &long, &r],
        &n,
        &p,
        &[],
        &cfg(Policy::Conservative),
        0,
    );
    assert_eq!(starts(&o.decisions), vec![2]);
    assert_eq!(o.backfilled, vec![2]);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
    assert_eq!(reason_of(&o.decisions, 3), Some(Reason::Priority));
    assert_eq!(est(&o, 1), Some(600));
    // The long one would overlap big's start; it is planned after big.
    assert_eq!(est(&o, 3), Some(1200));
    assert_eq!(o.stats.bf_started, 1);
    assert_eq!(o.stats.main_started, 0);
}

#[test]
fn fifo_never_passes_a_blocked_job() {
    let (n, p, r) = setup();
    let big = limited(1, 4, 10, 300);
    let short = limited(2, 1, 5, 200);
    let o = pass(&[&big, &short, &r], &n, &p, &[], &cfg(Policy::Fifo), 0);
    assert!(starts(&o.decisions).is_empty());
    assert_eq!(reason_of(&o.decisions, 2), Some(Reason::Priority));
    assert!(o.estimates.is_empty());
}

#[test]
fn easy_reserves_for_the_first_blocked_job_only() {
    // 4 CPUs; 3 held until 600. big (4) reserves 600..1200. mid (2 CPUs, 30 min)
    // cannot start now (1 free). tiny (1 CPU, 9 min) fits now and before 600.
    // With conservative, mid reserves 1200..3000 on 2 CPUs; late (3 CPUs, 60 min),
    // which fits at 1200 next to... nothing: it is planned after mid. With EASY, mid
    // holds nothing, so late is planned at 1200 too, next to mid's start.
    let (n, p, r) = setup();
    let big = limited(1, 4, 10, 400);
    let mid = limited(2, 2, 30, 300);
    let tiny = limited(3, 1, 9, 200);
    let late = limited(4, 3, 60, 100);
    let jobs = [&big, &mid, &tiny, &late, &r];
    let c = pass(&jobs, &n, &p, &[], &cfg(Policy::Conservative), 0);
    let e = pass(&jobs, &n, &p, &[], &cfg(Policy::Easy), 0);
    assert_eq!(c.backfilled, vec![3]);
    assert_eq!(e.backfilled, vec![3]);
    assert_eq!(est(&c, 1), Some(600));
    assert_eq!(est(&c, 2), Some(1200));
    assert_eq!(est(&c, 4), Some(3000));
    // EASY plans no start for jobs after the reserved one.
    assert_eq!(est(&e, 1), Some(600));
    assert_eq!(est(&e, 2), None);
}

#[test]
fn backfill_respects_bf_max_job_test_and_user_limits() {
    let (n, p, r) = setup();
    let big = limited(1, 4, 10, 300);
    let a = limited(2, 1, 5, 200);
    let mut c = cfg(Policy::Conservative);
    c.bf_max_job_test = 1;
    let o = pass(&[&big, &a, &r], &n, &p, &[], &c, 0);
    assert!(o.backfilled.is_empty());
    assert_eq!(o.stats.bf_depth_try, 1);
    let mut c = cfg(Policy::Conservative);
    c.bf_max_job_user = 1;
    let o = pass(&[&big, &a, &r], &n, &p, &[], &c, 0);
    assert!(o.backfilled.is_empty(), "user 0's second job is not tested");
}

#[test]
fn estimates_follow_time_limits_of_running_jobs() {
    let n = vec![node("n1", 2, 4000), node("n2", 2, 4000)];
    let p = vec![part("p", &["n1", "n2"])];
    let r1 = running(8, "n1", 2, 0); // ends 600
    let mut r2 = running(9, "n2", 2, 0);
    r2.time_limit = TimeLimit::Minutes(30); // ends 1800
    let mut two = limited(1, 4, 10, 300);
    two.req_nodes = 2;
    two.spec.nodes_min = Some(2);
    let one = limited(2, 2, 10, 200);
    let o = pass(
        &[&two, &one, &r1, &r2],
        &n,
        &p,
        &[],
        &cfg(Policy::Conservative),
        100,
    );
    assert_eq!(est(&o, 1), Some(1800));
    // n1 is free from 600 to 1800: the one-node job fits there without delaying job 1.
    assert_eq!(est(&o, 2), Some(600));
    let e = o.estimates.iter().find(|e| e.job_id == 2).unwrap();
    assert_eq!(e.nodes, ["n1"]);
}

#[test]
fn overdue_and_unlimited_jobs() {
    let (n, p, mut r) = setup();
    // A job past its limit is about to be killed: planned to end right away.
    r.start_time = Some(-10_000);
    let big = limited(1, 4, 10, 300);
    let o = pass(&[&big, &r], &n, &p, &[], &cfg(Policy::Conservative), 0);
    assert_eq!(est(&o, 1), Some(1));
    // An unlimited running job never frees its CPUs.
    r.time_limit = TimeLimit::Unlimited;
    r.start_time = Some(0);
    let o = pass(&[&big, &r], &n, &p, &[], &cfg(Policy::Conservative), 0);
    assert_eq!(est(&o, 1), None);
}

#[test]
fn bf_window_bounds_the_plan() {
    let (n, p, mut r) = setup();
    r.time_limit = TimeLimit::Minutes(3 * 24 * 60);
    let big = limited(1, 4, 10, 300);
    let o = pass(&[&big, &r], &n, &p, &[], &cfg(Policy::Conservative), 0);
    assert_eq!(est(&o, 1), None, "beyond the one-day window");
    let mut c = cfg(Policy::Conservative);
    c.bf_window = 4 * 86400;
    let o = pass(&[&big, &r], &n, &p, &[], &c, 0);
    assert_eq!(est(&o, 1), Some(3 * 86400));
}

#[test]
fn time_min_lets_backfill_cut_the_limit_to_end_before_a_reservation() {
    let (n, p, r) = setup();
    let big = limited(1, 4, 10, 300);
    // 20 minutes would overlap big's start at 600; 5 to 20 minutes are acceptable,
    // so it starts now for the 10 minutes left before 600.
    let mut flex = limited(2, 1, 20, 200);
    flex.spec.time_min = Some(5);
    // Its minimum (15) does not fit before 600 either: it waits.
    let mut stiff = limited(3, 1, 30, 100);
    stiff.spec.time_min = Some(15);
    for policy in [Policy::Conservative, Policy::Easy] {
        let o = pass(&[&big, &flex, &stiff, &r], &n, &p, &[], &cfg(policy), 0);
        assert_eq!(starts(&o.decisions), vec![2], "{policy:?}");
        let cut = o.decisions.iter().find_map(|d| match d {
            Decision::Start {
                job_id: 2,
                time_limit,
                ..
            } => Some(*time_limit),
            _ => None,
        });
        assert_eq!(cut, Some(Some(TimeLimit::Minutes(10))), "{policy:?}");
        assert_eq!(est(&o, 1), Some(600), "{policy:?}");
        assert_ne!(est(&o, 3), Some(0), "{policy:?}");
    }
    // With nothing in the way the full limit is kept.
    let o = pass(&[&flex], &n, &p, &[], &cfg(Policy::Conservative), 0);
    assert!(o.decisions.iter().any(|d| matches!(
        d,
        Decision::Start {
            job_id: 2,
            time_limit: None,
            ..
        }
    )));
}
