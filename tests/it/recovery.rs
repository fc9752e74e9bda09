//! Crash recovery through the front-ends: after `kill -9` of the controller every
//! accepted job is still there, pending jobs run, and the outcome of jobs that ended
//! while it was down is not lost.

use crate::harness::*;
use std::time::Duration;

#[test]
fn kill9_loses_no_job_and_no_outcome() {
    let mut c = TestCluster::start();
    c.script(
        "gate.sh",
        "#!/bin/sh\necho started\nwhile [ ! -e gate ]; do sleep 0.05; done\necho finished\nexit $1\n",
    );
    let ok = c.submit(&["-J", "ok", "gate.sh", "0"]);
    let bad = c.submit(&["-J", "bad", "gate.sh", "3"]);
    for id in [ok, bad] {
        c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("started"));
    }
    let held = c.submit(&["-H", "-J", "held", "--wrap", "echo later"]);
    // Submitted a moment before the crash: its id was printed, so it is on disk.
    let last = c.submit(&["-H", "-J", "last", "--wrap", "true"]);
    c.kill9_controller();

    // While it is down: front-ends say so; the running jobs end on their own.
    let (code, _, err) = c.fails("squeue", &[]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("slurm_load_jobs error: Unable to contact slurm controller"),
        "{err}"
    );
    std::fs::write(c.path("gate"), "").unwrap();
    for id in [ok, bad] {
        c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("finished"));
    }

    c.start_controller();
    assert_eq!(c.wait_done(ok), "COMPLETED");
    assert_eq!(c.wait_done(bad), "FAILED");
    assert_eq!(c.show_field(bad, "ExitCode"), "3:0");
    assert_eq!(c.state(held).as_deref(), Some("PENDING"));
    assert_eq!(c.state(last).as_deref(), Some("PENDING"));
    let acct = c.ok(
        "sacct",
        &["-n", "-P", "-X", "-o", "JobID,JobName,State,ExitCode"],
    );
    assert_eq!(
        acct,
        format!(
            "{ok}|ok|COMPLETED|0:0\n{bad}|bad|FAILED|3:0\n{held}|held|PENDING|0:0\n{last}|last|PENDING|0:0\n"
        )
    );
    c.ok("scontrol", &["release", &held.to_string()]);
    assert_eq!(c.wait_done(held), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{held}.out"))).unwrap(),
        "later\n"
    );
    // Ids continue after the last one handed out.
    let next = c.submit(&["--wrap", "true"]);
    assert_eq!(next, last + 1);
    c.wait_state(next, &["COMPLETED"], Duration::from_secs(20));
}

/// Submits a job that appends a line to `ran.txt`, with the controller armed to kill
/// itself at `failpoint`; restarts it once it has, and returns sbatch's answer and the
/// cluster. sbatch runs in the background, since it waits for the controller to return.
fn submit_through_a_crash(failpoint: &str) -> (TestCluster, u32) {
    let mut c = TestCluster::start_with(Setup {
        env: vec![("SLUICE_FAILPOINTS".into(), failpoint.into())],
        ..Default::default()
    });
    let sbatch = c
        .cmd("sbatch")
        .args([
            "--parsable",
            "-o",
            "/dev/null",
            "--wrap",
            "echo ran >> ran.txt",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the failpoint", Duration::from_secs(30), || {
        c.controller_log()
            .contains(&format!("failpoint {failpoint}"))
            .then_some(())
    });
    c.kill9_controller();
    c.set_controller_env("SLUICE_FAILPOINTS", None);
    c.start_controller();
    let out = sbatch.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sbatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (c, id)
}

/// The invariants of issue #25 after one crash: the job sbatch reported exists once,
/// ran exactly once, and its id is not given again.
fn check_one_job_ran_once(c: &TestCluster, id: u32) {
    assert_eq!(c.wait_done(id), "COMPLETED");
    let ran = std::fs::read_to_string(c.path("ran.txt")).unwrap_or_default();
    assert_eq!(ran, "ran\n", "the job must run exactly once");
    assert_eq!(c.job_ids(), vec![id], "exactly one job was made");
    let next = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    assert!(next > id, "id {next} given again after {id}");
}

/// The controller dies after saving a submission but before answering it: sbatch
/// sends the same submission again to the restarted controller and reports the job
/// that was made, which runs once (before, sbatch said the submission failed while
/// the job ran anyway).
#[test]
fn a_submission_whose_answer_was_lost_is_reported_once_and_runs_once() {
    let (c, id) = submit_through_a_crash("submit-after-commit");
    check_one_job_ran_once(&c, id);
    assert!(
        c.controller_log().contains("submission retried"),
        "{}",
        c.controller_log()
    );
}

/// The controller dies after the scheduler started a job but before that was saved:
/// the node never heard of the launch, so the restarted controller starts the job
/// once (before, the launch went out first and the job could run twice).
#[test]
fn a_launch_is_sent_only_after_it_is_saved() {
    let (c, id) = submit_through_a_crash("launch-before-commit");
    check_one_job_ran_once(&c, id);
}
