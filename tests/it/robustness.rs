//! Findings of a new user's trial, kept fixed: private state, stepd's own lines never
//! overwritten by the job's output, a deleted socket re-created, and front-ends that
//! exit quietly on a closed pipe.

use crate::harness::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

#[test]
fn state_and_spool_files_are_private() {
    let c = TestCluster::start();
    let id = c.submit(&["-o", "/dev/null", "--wrap", "sleep 5"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    let root = c.dir.path();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root.join("state/sluice.db")), 0o600);
    assert_eq!(
        mode(&root.join("spool")) & 0o044,
        0,
        "spool must not be listable"
    );
    let launch = root.join(format!("spool/job_{id}/launch"));
    assert_eq!(
        mode(&launch) & 0o077,
        0,
        "launch record carries the environment"
    );
    c.ok("scancel", &[&id.to_string()]);
}

#[test]
fn the_cancel_line_survives_a_job_that_keeps_writing() {
    let c = TestCluster::start();
    c.script(
        "trap.sh",
        "#!/bin/bash\ntrap 'echo got TERM; sleep 0.5; echo after; exit 0' TERM\necho start\nsleep 30 &\nwait\n",
    );
    let id = c.submit(&["-o", "trap.out", "trap.sh"]);
    c.wait_file("trap.out", |s| s.contains("start"));
    c.ok("scancel", &[&id.to_string()]);
    let out = c.wait_file("trap.out", |s| s.contains("after"));
    let lines: Vec<&str> = out.lines().collect();
    let cancel = lines
        .iter()
        .position(|l| l.starts_with("slurmstepd-") && l.contains(&format!("*** JOB {id} ON ")))
        .unwrap_or_else(|| panic!("no intact cancel line in {out:?}"));
    let after = lines.iter().position(|l| *l == "after").unwrap();
    assert!(cancel < after, "{out:?}");
    assert_eq!(
        out.matches("got TERM").count(),
        1,
        "TERM delivered once: {out:?}"
    );
}

#[test]
fn a_deleted_socket_is_created_again() {
    let c = TestCluster::start();
    let sock = c.dir.path().join("run/ctld.sock");
    std::fs::remove_file(&sock).unwrap();
    wait_until("socket re-created", Duration::from_secs(10), || {
        sock.exists().then_some(())
    });
    assert!(c.ok("sinfo", &["-h", "-o", "%P"]).contains("debug"));
}

#[test]
fn front_ends_exit_quietly_on_a_closed_pipe() {
    let c = TestCluster::start();
    for _ in 0..3 {
        c.submit(&["-H", "--wrap", "true"]);
    }
    let sh = format!(
        "{b}/scontrol show job | head -1; {b}/squeue --help | head -1 >/dev/null; echo ok",
        b = c.bin.display()
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &sh])
        .env("SLUICE_CONF", &c.conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("ok\n"));
}

#[test]
fn endless_script_input_is_refused_without_eating_memory() {
    let c = TestCluster::start();
    let o = c.run("sbatch", &["/dev/zero"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("too large"));
}
