//! `scontrol suspend`/`resume` through the real front-ends: a job that counts stops
//! counting while suspended and goes on after, shows SUSPENDED in squeue, scontrol and
//! sacct, and the time it spent suspended is not run time.

use crate::harness::*;
use std::time::Duration;

/// The counter the job writes (0 while the file is missing or half-written).
fn count(c: &TestCluster, name: &str) -> u64 {
    std::fs::read_to_string(c.path(name))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn suspend_stops_a_counting_job_and_resume_continues_it() {
    let c = TestCluster::start();
    // The counter is written by a child of the batch shell, and by a step, so that
    // both the batch step and numbered steps are stopped.
    let j = c.submit(&[
        "-o",
        "out.txt",
        "--wrap",
        "srun sh -c 'i=0; while true; do i=$((i+1)); echo $i > step.txt; sleep 0.1; done' & \
         i=0; while true; do i=$((i+1)); echo $i > count.txt; sleep 0.1; done",
    ]);
    let s = j.to_string();
    c.wait_state(j, &["RUNNING"], Duration::from_secs(20));
    wait_until("counters move", Duration::from_secs(20), || {
        (count(&c, "count.txt") > 3 && count(&c, "step.txt") > 3).then_some(())
    });
    c.ok("scontrol", &["suspend", &s]);
    c.wait_state(j, &["SUSPENDED"], Duration::from_secs(10));
    // Give the stop a moment to land, then the counters must stand still.
    std::thread::sleep(Duration::from_millis(500));
    let (a, b) = (count(&c, "count.txt"), count(&c, "step.txt"));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        count(&c, "count.txt"),
        a,
        "the batch script ran while suspended"
    );
    assert_eq!(count(&c, "step.txt"), b, "the step ran while suspended");
    // Every front-end says SUSPENDED; scontrol says since when.
    assert_eq!(c.ok("squeue", &["-h", "-j", &s, "-o", "%t"]).trim(), "S");
    assert_eq!(c.field(&s, "JobState").as_deref(), Some("SUSPENDED"));
    assert_ne!(c.field(&s, "SuspendTime").as_deref(), Some("None"));
    let acct = c.ok("sacct", &["-j", &s, "-X", "-n", "-P", "-o", "State"]);
    assert_eq!(acct.trim(), "SUSPENDED");
    // Suspending twice is an error, as in Slurm.
    let (code, err) = c.fails_err("scontrol", &["suspend", &s]);
    assert_eq!(code, 1);
    assert!(err.contains("Job is not running"), "{err}");
    std::thread::sleep(Duration::from_secs(1));
    c.ok("scontrol", &["resume", &s]);
    c.wait_state(j, &["RUNNING"], Duration::from_secs(10));
    wait_until("counters move again", Duration::from_secs(10), || {
        (count(&c, "count.txt") > a + 3 && count(&c, "step.txt") > b + 3).then_some(())
    });
    // The seconds spent suspended are not run time: RunTime lags the wall clock.
    let start = c.field(&s, "StartTime").unwrap();
    let run = c.field(&s, "RunTime").unwrap();
    let run_secs = hms_secs(&run);
    let wall = wall_since(&start);
    assert!(
        wall >= run_secs + 2,
        "RunTime {run} should lag the {wall} s since {start} by the suspension"
    );
    let (code, err) = c.fails_err("scontrol", &["resume", &s]);
    assert_eq!(code, 1);
    assert!(err.contains("Job is not suspended"), "{err}");
    c.ok("scancel", &[&s]);
    c.wait_done(j);
}

#[test]
fn a_suspended_job_can_be_cancelled_and_pending_ones_cannot_be_suspended() {
    let c = TestCluster::start();
    let j = c.submit(&["-o", "/dev/null", "--wrap", "sleep 60"]);
    let s = j.to_string();
    c.wait_state(j, &["RUNNING"], Duration::from_secs(20));
    c.ok("scontrol", &["suspend", &s]);
    c.wait_state(j, &["SUSPENDED"], Duration::from_secs(10));
    // Cancelling thaws the job first, so that it can take its signals and end.
    c.ok("scancel", &[&s]);
    assert_eq!(c.wait_done(j), "CANCELLED");
    let p = c.submit(&["-H", "--wrap", "true"]);
    let (code, err) = c.fails_err("scontrol", &["suspend", &p.to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("slurm_suspend error: Job is pending execution"),
        "{err}"
    );
    let (_, err) = c.fails_err("scontrol", &["resume", "999999"]);
    assert!(
        err.contains("slurm_resume error: Invalid job id specified"),
        "{err}"
    );
    c.ok("scancel", &[&p.to_string()]);
}

/// `[D-]HH:MM:SS` or `MM:SS` in seconds.
fn hms_secs(t: &str) -> u64 {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().unwrap(), r),
        None => (0, t),
    };
    let parts: Vec<u64> = rest.split(':').map(|p| p.parse().unwrap()).collect();
    days * 86400 + parts.iter().fold(0, |acc, p| acc * 60 + p)
}

/// Seconds from a local `YYYY-MM-DDTHH:MM:SS` to now.
fn wall_since(ts: &str) -> u64 {
    let t = chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%dT%H:%M:%S").unwrap();
    let t = t.and_local_timezone(chrono::Local).unwrap();
    (chrono::Local::now() - t).num_seconds().max(0) as u64
}
