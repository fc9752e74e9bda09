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

/// Control commands run inside the job they act on get their answer and exit as with
/// slurmctld (whose answer reaches them before slurmd signals the job): the job's
/// shell traps the signals and records the command's exit status after it.
#[test]
fn control_commands_inside_their_own_job_get_their_answer() {
    let c = TestCluster::start();
    let dir = c.work.display().to_string();
    let submit = |name: &str, cmd: &str| -> u32 {
        let log = format!("{dir}/{name}.log");
        let text = format!(
            "#!/bin/bash\n\
             trap 'echo TERM >> {log}' TERM\n\
             trap 'echo USR1 >> {log}' USR1\n\
             if [ \"${{SLURM_RESTART_COUNT:-0}}\" != 0 ]; then echo rerun >> {log}; exit 0; fi\n\
             {cmd} > {dir}/{name}.cmd 2>&1\n\
             echo \"rc=$?\" >> {log}\n\
             sleep 2\n\
             exit 0\n"
        );
        let sh = c.script(&format!("{name}.sh"), &text);
        c.submit(&["-o", "/dev/null", &sh.display().to_string()])
    };
    let requeue = submit("requeue", "scontrol requeue $SLURM_JOB_ID");
    let cancel = submit("cancel", "scancel $SLURM_JOB_ID");
    let usr1 = submit("usr1", "scancel --full --signal=USR1 $SLURM_JOB_ID");
    let update = submit("update", "scontrol update JobId=$SLURM_JOB_ID TimeLimit=7");
    let log =
        |name: &str| std::fs::read_to_string(c.path(&format!("{name}.log"))).unwrap_or_default();
    let cmd =
        |name: &str| std::fs::read_to_string(c.path(&format!("{name}.cmd"))).unwrap_or_default();

    c.wait_file("requeue.log", |t| t.contains("rerun"));
    assert!(
        log("requeue").contains("rc=0\n"),
        "{}{}",
        log("requeue"),
        cmd("requeue")
    );
    assert_eq!(cmd("requeue"), "");
    assert_eq!(c.wait_done(requeue), "COMPLETED");
    assert_eq!(
        c.field(&requeue.to_string(), "Restarts").as_deref(),
        Some("1")
    );

    assert_eq!(c.wait_done(cancel), "CANCELLED");
    c.wait_file("cancel.log", |t| t.contains("rc="));
    assert!(
        log("cancel").contains("rc=0\n"),
        "{}{}",
        log("cancel"),
        cmd("cancel")
    );
    assert_eq!(cmd("cancel"), "");

    assert_eq!(c.wait_done(usr1), "COMPLETED");
    let l = log("usr1");
    assert!(
        l.contains("USR1\n") && l.contains("rc=0\n"),
        "{l}{}",
        cmd("usr1")
    );
    assert_eq!(cmd("usr1"), "");

    assert_eq!(c.wait_done(update), "COMPLETED");
    assert!(
        log("update").contains("rc=0\n"),
        "{}{}",
        log("update"),
        cmd("update")
    );
    assert_eq!(cmd("update"), "");
    let s = update.to_string();
    assert_eq!(c.field(&s, "TimeLimit").as_deref(), Some("00:07:00"));

    // requeuehold: the answer, then the job back in the queue, held.
    let held = submit("held", "scontrol requeuehold $SLURM_JOB_ID");
    let s = held.to_string();
    c.wait_field(&s, "Reason", "JobHeldUser");
    c.wait_file("held.log", |t| t.contains("rc="));
    assert!(
        log("held").contains("rc=0\n"),
        "{}{}",
        log("held"),
        cmd("held")
    );
    assert_eq!(cmd("held"), "");
    assert_eq!(c.field(&s, "JobState").as_deref(), Some("PENDING"));
    c.ok("scancel", &[&s]);
}
