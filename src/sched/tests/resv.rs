//! Advanced reservations: a job outside stays off reserved nodes for any instant its
//! time limit overlaps the window (and backfill plans it after), a job inside runs only
//! on the reservation's nodes while it is active, with Slurm's pending reasons.

use super::*;
use crate::model::reservation::{Reservation, ResvFlags};

fn resv(name: &str, nodes: &[&str], start: i64, end: i64, maint: bool) -> Reservation {
    Reservation {
        name: name.into(),
        start,
        end,
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        cpus: 4 * nodes.len() as u32,
        partition: None,
        users: vec!["u".into()],
        accounts: vec![],
        flags: ResvFlags {
            maint,
            ..ResvFlags::default()
        },
        idle_since: None,
        ..Default::default()
    }
}

fn run_with(
    jobs: &[&Job],
    nodes: &[Node],
    parts: &[Partition],
    resvs: &[Reservation],
    now: i64,
) -> Outcome {
    let cfg = SchedConfig {
        bf_resolution: 1,
        ..SchedConfig::default()
    };
    run(&Input {
        jobs,
        nodes,
        partitions: parts,
        licenses: &[],
        config: &cfg,
        now,
        backfill: true,
        limits: None,
        reservations: resvs,
    })
}

fn in_resv(id: u32, name: &str) -> Job {
    let mut j = job(id, 1, 10);
    j.spec.reservation = Some(name.into());
    j
}

fn est(o: &Outcome, id: u32) -> Option<i64> {
    o.estimates.iter().find(|e| e.job_id == id).map(|e| e.start)
}

#[test]
fn outside_jobs_avoid_reserved_nodes_and_inside_jobs_use_them() {
    let nodes = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let r = [resv("r", &["n1"], 0, 3600, false)];
    let a = job(1, 1, 10);
    let b = in_resv(2, "r");
    let o = run_with(&[&a, &b], &nodes, &parts, &r, 100);
    assert_eq!(alloc_of(&o.decisions, 1).nodes, vec!["n2".to_string()]);
    assert_eq!(alloc_of(&o.decisions, 2).nodes, vec!["n1".to_string()]);
}

#[test]
fn a_job_that_would_overlap_an_upcoming_window_waits_until_it_ends() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    // Window opens in 5 minutes; the job's limit is 10 minutes.
    let r = [resv("m", &["n1"], 300, 900, true)];
    let a = job(1, 1, 10);
    let o = run_with(&[&a], &nodes, &parts, &r, 0);
    assert!(starts(&o.decisions).is_empty());
    assert_eq!(
        reason_of(&o.decisions, 1),
        Some(Reason::Other(crate::sched::resv::MAINT_REASON.into()))
    );
    assert_eq!(est(&o, 1), Some(900));
    // A job short enough to end before the window starts now.
    let mut short = job(2, 1, 10);
    short.time_limit = TimeLimit::Minutes(4);
    let o = run_with(&[&a, &short], &nodes, &parts, &r, 0);
    assert_eq!(starts(&o.decisions), vec![2]);
}

#[test]
fn ordinary_reservation_gives_resources_and_later_jobs_backfill() {
    let nodes = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let r = [resv("r", &["n1"], 0, 3600, false)];
    let mut wide = job(1, 8, 10);
    wide.req_nodes = 2;
    wide.priority = 200;
    let small = job(2, 1, 10);
    let o = run_with(&[&wide, &small], &nodes, &parts, &r, 0);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
    assert_eq!(est(&o, 1), Some(3600));
    assert_eq!(starts(&o.decisions), vec![2]);
    assert_eq!(alloc_of(&o.decisions, 2).nodes, vec!["n2".to_string()]);
}

#[test]
fn inside_jobs_wait_for_the_window_and_for_a_deleted_reservation() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let r = [resv("r", &["n1"], 500, 1000, false)];
    let a = in_resv(1, "r");
    let gone = in_resv(2, "nope");
    let o = run_with(&[&a, &gone], &nodes, &parts, &r, 0);
    assert_eq!(
        reason_of(&o.decisions, 1),
        Some(Reason::Other("Reservation".into()))
    );
    assert_eq!(
        reason_of(&o.decisions, 2),
        Some(Reason::Other("ReservationDeleted".into()))
    );
    let o = run_with(&[&a], &nodes, &parts, &r, 500);
    assert_eq!(starts(&o.decisions), vec![1]);
}

#[test]
fn inside_jobs_never_leave_the_reservation_nodes() {
    let nodes = vec![node("n1", 1, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let r = [resv("r", &["n1"], 0, 3600, false)];
    let a = in_resv(1, "r");
    let b = in_resv(2, "r");
    let o = run_with(&[&a, &b], &nodes, &parts, &r, 0);
    assert_eq!(starts(&o.decisions), vec![1]);
    assert_eq!(alloc_of(&o.decisions, 1).nodes, vec!["n1".to_string()]);
    assert_eq!(reason_of(&o.decisions, 2), Some(Reason::Resources));
}

#[test]
fn flex_jobs_may_use_nodes_outside_the_reservation_and_run_past_it() {
    let nodes = vec![node("n1", 1, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let mut r = resv("r", &["n1"], 0, 300, false);
    r.flags.flex = true;
    let a = in_resv(1, "r");
    let b = in_resv(2, "r");
    // Both start: the second on n2, outside the reservation's node; their 10-minute
    // limits run past the 5-minute window.
    let o = run_with(&[&a, &b], &nodes, &parts, &[r], 0);
    assert_eq!(starts(&o.decisions), vec![1, 2]);
    assert_eq!(alloc_of(&o.decisions, 1).nodes, vec!["n1".to_string()]);
    assert_eq!(alloc_of(&o.decisions, 2).nodes, vec!["n2".to_string()]);
}

#[test]
fn no_reservations_changes_nothing() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let jobs: Vec<Job> = (1..=5).map(|i| job(i, 1, 100)).collect();
    let refs: Vec<&Job> = jobs.iter().collect();
    let with = run_with(&refs, &nodes, &parts, &[], 0);
    let plain = schedule(&refs, &nodes, &parts, 0);
    assert_eq!(with.decisions, plain);
}

/// A core reservation `name` holding `cpus` CPUs on each of `nodes`.
fn cores(name: &str, nodes: &[&str], cpus: u32, start: i64, end: i64) -> Reservation {
    let mut r = resv(name, nodes, start, end, false);
    r.node_cpus = vec![cpus; nodes.len()];
    r.cpus = cpus * nodes.len() as u32;
    r
}

#[test]
fn a_core_reservation_leaves_the_rest_of_its_node_to_others() {
    let nodes = vec![node("n1", 8, 8000)];
    let parts = vec![part("p", &["n1"])];
    let r = [cores("c", &["n1"], 4, 0, 3600)];
    // Outside: 4 of 8 CPUs are kept; 5 do not fit, 4 do.
    let big = job(1, 5, 10);
    let o = run_with(&[&big], &nodes, &parts, &r, 100);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
    assert_eq!(est(&o, 1), Some(3600), "backfill plans it after the window");
    let fits = job(2, 4, 10);
    let o = run_with(&[&fits], &nodes, &parts, &r, 100);
    assert_eq!(starts(&o.decisions), vec![2]);
    // Inside: confined to the reservation's 4 CPUs, while others use the rest.
    let mut inside = job(3, 4, 10);
    inside.spec.reservation = Some("c".into());
    let mut too_big = job(4, 5, 10);
    too_big.spec.reservation = Some("c".into());
    let o = run_with(&[&fits, &inside, &too_big], &nodes, &parts, &r, 100);
    assert_eq!(starts(&o.decisions), vec![2, 3]);
    assert_eq!(reason_of(&o.decisions, 4), Some(Reason::Resources));
    // A job running in the reservation uses its CPUs: they are not kept twice.
    let mut busy = running(5, "n1", 3, 50);
    busy.spec.reservation = Some("c".into());
    let o = run_with(&[&busy, &fits], &nodes, &parts, &r, 100);
    assert_eq!(starts(&o.decisions), vec![2]);
    let one_more = job(6, 1, 10);
    let o = run_with(&[&busy, &fits, &one_more], &nodes, &parts, &r, 100);
    assert_eq!(
        starts(&o.decisions),
        vec![2],
        "the reservation's last CPU is kept"
    );
}

#[test]
fn backfill_keeps_an_upcoming_core_reservation_free() {
    let nodes = vec![node("n1", 8, 8000)];
    let parts = vec![part("p", &["n1"])];
    // Opens in 5 minutes; 6 CPUs held. A 10-minute 4-CPU job would overlap it.
    let r = [cores("c", &["n1"], 6, 300, 900)];
    let a = job(1, 4, 10);
    let o = run_with(&[&a], &nodes, &parts, &r, 0);
    assert!(starts(&o.decisions).is_empty());
    assert_eq!(est(&o, 1), Some(900));
    // 2 CPUs stay free through the window: such a job starts at once.
    let b = job(2, 2, 10);
    let o = run_with(&[&a, &b], &nodes, &parts, &r, 0);
    assert_eq!(starts(&o.decisions), vec![2]);
}

#[test]
fn reserved_licenses_are_kept_from_jobs_outside() {
    let nodes = vec![node("n1", 8, 8000)];
    let parts = vec![part("p", &["n1"])];
    let mut r = resv("l", &[], 0, 3600, false);
    r.cpus = 0;
    r.licenses = vec![("matlab".into(), 3)];
    let lic = |id: u32, n: u32, resv: Option<&str>| {
        let mut j = job(id, 1, 10);
        j.spec.licenses = vec![crate::model::gres::LicenseReq {
            name: "matlab".into(),
            count: n,
        }];
        j.spec.reservation = resv.map(str::to_string);
        j
    };
    let cfg = SchedConfig {
        bf_resolution: 1,
        ..SchedConfig::default()
    };
    let go = |jobs: &[&Job]| {
        run(&Input {
            jobs,
            nodes: &nodes,
            partitions: &parts,
            licenses: &[("matlab".into(), 4)],
            config: &cfg,
            now: 100,
            backfill: true,
            limits: None,
            reservations: std::slice::from_ref(&r),
        })
    };
    // Of 4, 3 are reserved: an outside job gets 1, not 2.
    let (two, one) = (lic(1, 2, None), lic(2, 1, None));
    let o = go(&[&two, &one]);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Licenses));
    assert_eq!(est(&o, 1), Some(3600));
    assert_eq!(starts(&o.decisions), vec![2]);
    // Inside the reservation (licenses only: any node) 3 are there.
    let inside = lic(3, 3, Some("l"));
    let o = go(&[&inside, &one]);
    assert_eq!(starts(&o.decisions), vec![2, 3]);
}
