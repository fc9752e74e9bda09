//! Holds and times through the real front-ends: `-H`, `scontrol hold/uhold/release`,
//! `--begin` in Slurm's forms, `scontrol update StartTime=`, `--nice`, `--deadline`,
//! `--immediate`.

use crate::harness::*;
use std::time::Duration;

fn parse_ts(s: &str) -> i64 {
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S")
        .unwrap()
        .and_local_timezone(chrono::Local)
        .unwrap()
        .timestamp()
}

#[test]
fn hold_uhold_release() {
    let c = TestCluster::start();
    let j = c.submit(&["-H", "-o", "out.txt", "--wrap", "echo released"]);
    let s = j.to_string();
    assert_eq!(c.field(&s, "Priority").as_deref(), Some("0"));
    assert_eq!(c.field(&s, "Reason").as_deref(), Some("JobHeldUser"));
    assert_eq!(c.field(&s, "EligibleTime").as_deref(), Some("Unknown"));
    c.ok("scontrol", &["release", &s]);
    assert_eq!(c.wait_done(j), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path("out.txt")).unwrap(),
        "released\n"
    );
    // The controller's owner is an operator: `hold` is an admin hold, `uhold` a user one.
    let k = c.submit(&["--begin=now+1hour", "-o", "/dev/null", "--wrap", "true"]);
    let s = k.to_string();
    c.ok("scontrol", &["hold", &s]);
    assert_eq!(c.field(&s, "Reason").as_deref(), Some("JobHeldAdmin"));
    c.ok("scontrol", &["release", &s]);
    assert_ne!(c.field(&s, "Priority").as_deref(), Some("0"));
    c.wait_field(&s, "Reason", "BeginTime");
    c.ok("scontrol", &["uhold", &s]);
    assert_eq!(c.field(&s, "Reason").as_deref(), Some("JobHeldUser"));
    assert_eq!(c.field(&s, "Priority").as_deref(), Some("0"));
    // Held or not, a running or finished job cannot be held.
    let (code, err) = c.fails_err("scontrol", &["hold", "999999"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n"
    );
}

#[test]
fn begin_times_and_start_time_updates() {
    let c = TestCluster::start();
    let now = chrono::Local::now().timestamp();
    let tomorrow = (chrono::Local::now() + chrono::Duration::days(2))
        .format("%Y-%m-%dT08:00")
        .to_string();
    for (begin, lo, hi) in [
        ("now+1hour".to_string(), now + 3590, now + 3610),
        ("now+90minutes".to_string(), now + 5390, now + 5410),
        (tomorrow.clone(), now + 86_400, now + 3 * 86_400),
    ] {
        let j = c.submit(&[
            &format!("--begin={begin}"),
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ]);
        let s = j.to_string();
        c.wait_field(&s, "Reason", "BeginTime");
        let st = parse_ts(&c.field(&s, "StartTime").unwrap());
        assert!((lo..=hi).contains(&st), "{begin}: StartTime {st}");
    }
    // HH:MM is the next such time (today or tomorrow).
    let j = c.submit(&["--begin=16:00", "-o", "/dev/null", "--wrap", "true"]);
    let st = parse_ts(&c.field(&j.to_string(), "EligibleTime").unwrap());
    assert!(st > now - 60 && st <= now + 86_400, "16:00 gave {st}");
    // Pulling the start time in lets the job run.
    let j = c.submit(&[
        "--begin=now+1hour",
        "-o",
        "began.txt",
        "--wrap",
        "echo began",
    ]);
    c.ok(
        "scontrol",
        &["update", &format!("JobId={j}"), "StartTime=now"],
    );
    assert_eq!(c.wait_done(j), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path("began.txt")).unwrap(),
        "began\n"
    );
    let (code, _) = c.fails_err("sbatch", &["--begin=garbage", "--wrap", "true"]);
    assert_eq!(code, 255);
}

#[test]
fn nice_orders_equal_jobs() {
    let c = TestCluster::start_with(Setup {
        cpus: 1,
        ..Setup::default()
    });
    let blocker = c.submit(&["-o", "/dev/null", "--wrap", "sleep 2"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let nice = c.submit(&[
        "--nice=100",
        "-o",
        "/dev/null",
        "--wrap",
        "date +%s.%N > nice.t",
    ]);
    let plain = c.submit(&["-o", "/dev/null", "--wrap", "date +%s.%N > plain.t"]);
    let p_nice: u64 = c
        .field(&nice.to_string(), "Priority")
        .unwrap()
        .parse()
        .unwrap();
    let p_plain: u64 = c
        .field(&plain.to_string(), "Priority")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(p_plain - p_nice, 100);
    assert_eq!(c.field(&nice.to_string(), "Nice").as_deref(), Some("100"));
    c.wait_done(nice);
    c.wait_done(plain);
    let t = |f: &str| -> f64 {
        std::fs::read_to_string(c.path(f))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert!(t("plain.t") < t("nice.t"), "the nicer job ran first");
}

#[test]
fn deadline_removes_jobs_that_cannot_finish_in_time() {
    let c = TestCluster::start_with(Setup {
        cpus: 1,
        ..Setup::default()
    });
    // Fits: 1-minute limit, deadline in an hour.
    let ok = c.submit(&[
        "-t",
        "1",
        "--deadline=now+1hour",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(ok), "COMPLETED");
    // Cannot fit: a 10-minute limit against a deadline 5 minutes away.
    let late = c.submit(&[
        "-t",
        "10",
        "--deadline=now+5minutes",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(late), "DEADLINE");
    assert_eq!(
        c.field(&late.to_string(), "Reason").as_deref(),
        Some("DeadLine")
    );
    let (code, err) = c.fails_err("sbatch", &["--deadline=2020-01-01T00:00", "--wrap", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Invalid time specification\n"
    );
}

#[test]
fn immediate_needs_free_resources_now() {
    let c = TestCluster::start_with(Setup {
        cpus: 1,
        ..Setup::default()
    });
    let j = c.submit(&["-I", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(j, &["RUNNING", "COMPLETED"], Duration::from_secs(20));
    let (code, err) = c.fails_err("sbatch", &["--immediate", "--wrap", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Job can not start immediately\n"
    );
    let (_, err) = c.fails_err("sbatch", &["-I", "-H", "--wrap", "true"]);
    assert!(err.contains("can not start immediately"));
    assert_eq!(c.ok("squeue", &["-h", "-t", "PD"]), "");
}
