//! Requeue through the real front-ends: `scontrol requeue`/`requeuehold`, automatic
//! requeue when a node fails, SLURM_RESTART_COUNT, appended output, and the REQUEUED
//! run in sacct's history.

use crate::harness::*;
use std::time::Duration;

#[test]
fn requeue_appends_output_counts_restarts_and_keeps_history() {
    let c = TestCluster::start();
    let j = c.submit(&[
        "--requeue",
        "-o",
        "out.txt",
        "--wrap",
        "echo run ${SLURM_RESTART_COUNT:-0}; sleep 30",
    ]);
    let s = j.to_string();
    c.wait_file("out.txt", |t| t == "run 0\n");
    c.ok("scontrol", &["requeue", &s]);
    c.wait_field(&s, "Restarts", "1");
    // Back in the queue for a few seconds, then running again, appending.
    c.wait_state(j, &["RUNNING"], Duration::from_secs(30));
    c.wait_file("out.txt", |t| t == "run 0\nrun 1\n");
    let hist = c.ok(
        "sacct",
        &["-j", &s, "-X", "-D", "-n", "-P", "-o", "JobID,State"],
    );
    assert_eq!(hist, format!("{j}|REQUEUED\n{j}|RUNNING\n"));
    let plain = c.ok("sacct", &["-j", &s, "-X", "-n", "-P", "-o", "JobID,State"]);
    assert_eq!(plain, format!("{j}|RUNNING\n"));
    // --no-requeue jobs are not requeued by their owner... but the controller's owner
    // is an operator here, so check the flag as scontrol shows it.
    let n = c.submit(&["--no-requeue", "-H", "--wrap", "true"]);
    assert_eq!(c.field(&n.to_string(), "Requeue").as_deref(), Some("0"));
    c.ok("scancel", &[&s]);
}

#[test]
fn requeuehold_then_release() {
    let c = TestCluster::start();
    let j = c.submit(&["-o", "/dev/null", "--wrap", "sleep 30"]);
    let s = j.to_string();
    c.wait_state(j, &["RUNNING"], Duration::from_secs(20));
    c.ok("scontrol", &["requeuehold", &s]);
    c.wait_field(&s, "Reason", "JobHeldUser");
    assert_eq!(c.field(&s, "JobState").as_deref(), Some("PENDING"));
    assert_eq!(c.field(&s, "Priority").as_deref(), Some("0"));
    c.ok("scontrol", &["release", &s]);
    c.wait_state(j, &["RUNNING"], Duration::from_secs(30));
    assert_eq!(c.field(&s, "Restarts").as_deref(), Some("1"));
    // A pending job cannot be requeued.
    let p = c.submit(&["-H", "--wrap", "true"]);
    let (code, err) = c.fails_err("scontrol", &["requeue", &p.to_string()]);
    assert_eq!(code, 1);
    assert!(err.contains("Job is pending execution"), "{err}");
    c.ok("scancel", &[&s, &p.to_string()]);
}

#[test]
fn a_failed_node_requeues_requeueable_jobs() {
    let c = TestCluster::start();
    let again = c.submit(&[
        "-o",
        "again.txt",
        "--wrap",
        "echo start ${SLURM_RESTART_COUNT:-0}; sleep 30",
    ]);
    let fails = c.submit(&["--no-requeue", "-o", "/dev/null", "--wrap", "sleep 30"]);
    c.wait_file("again.txt", |t| t == "start 0\n");
    c.wait_state(fails, &["RUNNING"], Duration::from_secs(20));
    let node = c.node();
    c.ok(
        "scontrol",
        &[
            "update",
            &format!("NodeName={node}"),
            "State=DOWN",
            "Reason=test",
        ],
    );
    assert_eq!(c.wait_done(fails), "NODE_FAIL");
    c.wait_field(&again.to_string(), "Restarts", "1");
    assert_eq!(c.state(again).as_deref(), Some("PENDING"));
    let hist = c.ok(
        "sacct",
        &[
            "-j",
            &again.to_string(),
            "-X",
            "-D",
            "-n",
            "-P",
            "-o",
            "State",
        ],
    );
    assert_eq!(hist, "NODE_FAIL\nPENDING\n");
    c.ok(
        "scontrol",
        &["update", &format!("NodeName={node}"), "State=RESUME"],
    );
    c.wait_file("again.txt", |t| t == "start 0\nstart 1\n");
    c.ok("scancel", &[&again.to_string()]);
}
