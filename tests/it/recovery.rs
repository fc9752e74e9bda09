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
