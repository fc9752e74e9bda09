//! The controller's log tells each job's and node's story in slurmctld's words (what
//! an admin greps for), at the level `slurmctld_debug`, `-v` and `scontrol setdebug`
//! set.

use crate::harness::{Setup, TestCluster};
use std::time::Duration;

/// The lines of `log` that name `JobId=<id>` (followed by a space or the line's end).
fn lines_of(log: &str, id: u32) -> Vec<&str> {
    let key = format!("JobId={id}");
    log.lines()
        .filter(|l| {
            l.match_indices(&key)
                .any(|(i, _)| !l[i + key.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect()
}

/// Asserts that `log` holds each of `want` for job `id`, in that order.
fn assert_story(log: &str, id: u32, want: &[&str]) {
    let lines = lines_of(log, id);
    let mut at = 0;
    for w in want {
        match lines[at..].iter().position(|l| l.contains(w)) {
            Some(k) => at += k + 1,
            None => panic!("job {id}: no line with {w:?} (in order) among:\n{lines:#?}"),
        }
    }
}

fn wait_log(c: &TestCluster, what: &str) -> String {
    crate::harness::wait_until(what, Duration::from_secs(20), || {
        let log = c.controller_log();
        log.contains(what).then_some(log)
    })
}

#[test]
fn controller_log_tells_each_jobs_story_in_slurmctlds_words() {
    let c = TestCluster::start();
    let node = c.node();
    let uid = nix::unistd::getuid().as_raw();
    let ok = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    let bad = c.submit(&["-o", "/dev/null", "--wrap", "exit 3"]);
    let cancelled = c.submit(&["-o", "/dev/null", "--wrap", "sleep 300"]);
    let requeued = c.submit(&["-o", "/dev/null", "--wrap", "sleep 300"]);
    assert_eq!(c.wait_done(ok), "COMPLETED");
    assert_eq!(c.wait_done(bad), "FAILED");
    c.wait_state(cancelled, &["RUNNING"], Duration::from_secs(20));
    c.wait_state(requeued, &["RUNNING"], Duration::from_secs(20));
    c.ok("scancel", &[&cancelled.to_string()]);
    assert_eq!(c.wait_done(cancelled), "CANCELLED");
    c.ok("scontrol", &["requeue", &requeued.to_string()]);
    // Back in the queue, then allocated again after the requeue delay.
    let log = wait_log(
        &c,
        &format!("_job_complete: requeue JobId={requeued} per user/system request"),
    );
    let alloc = format!("sched: Allocate JobId={ok} NodeList={node} #CPUs=1 Partition=debug");
    assert!(log.contains(&alloc), "no {alloc:?} in:\n{log}");
    assert_story(
        &log,
        ok,
        &[
            &format!("_slurm_rpc_submit_batch_job: JobId={ok} InitPrio="),
            "sched: Allocate",
            &format!("_job_complete: JobId={ok} WEXITSTATUS 0"),
            &format!("_job_complete: JobId={ok} done"),
        ],
    );
    assert_story(
        &log,
        bad,
        &[
            "_slurm_rpc_submit_batch_job",
            "sched: Allocate",
            "WEXITSTATUS 3",
            "done",
        ],
    );
    assert_story(
        &log,
        cancelled,
        &[
            "sched: Allocate",
            &format!("_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId={cancelled} uid {uid}"),
            &format!("_job_complete: JobId={cancelled} W"),
            "done",
        ],
    );
    assert_story(
        &log,
        requeued,
        &[
            "sched: Allocate",
            &format!("_slurm_rpc_requeue: Requeue of JobId={requeued} uid {uid}"),
            "requeue",
        ],
    );
    // It runs again; its node set DOWN under it requeues it again, in the words of
    // slurmctld's update_node and kill_running_job_by_node_name.
    c.wait_field(&requeued.to_string(), "Restarts", "1");
    c.wait_state(requeued, &["RUNNING"], Duration::from_secs(20));
    let name = format!("NodeName={node}");
    c.ok("scontrol", &["update", &name, "State=DOWN", "Reason=lost"]);
    let log = wait_log(
        &c,
        &format!("_job_complete: requeue JobId={requeued} due to node failure"),
    );
    for want in [
        format!("update_node: node {node} reason set to: lost"),
        format!("update_node: node {node} state set to DOWN"),
        format!("requeue job JobId={requeued} due to failure of node {node}"),
    ] {
        assert!(log.contains(&want), "no {want:?} in:\n{log}");
    }
    c.ok("scontrol", &["update", &name, "State=RESUME"]);
    c.ok(
        "scontrol",
        &["update", &name, "State=DRAIN", "Reason=maint"],
    );
    let log = wait_log(
        &c,
        &format!("update_node: node {node} state set to DRAINED"),
    );
    let said = |w: &str| log.lines().any(|l| l.ends_with(w));
    assert!(
        said(&format!("update_node: node {node} state set to IDLE")),
        "{log}"
    );
    assert!(
        said(&format!("update_node: node {node} reason set to: maint")),
        "{log}"
    );
    c.ok("scontrol", &["update", &name, "State=RESUME"]);
    // At level error the job lines are not written.
    c.ok("scontrol", &["setdebug", "error"]);
    let quiet = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.wait_done(quiet), "COMPLETED");
    c.ok("scancel", &[&requeued.to_string()]);
    c.wait_done(requeued);
    let log = c.controller_log();
    assert_eq!(
        lines_of(&log, quiet),
        Vec::<&str>::new(),
        "logged at level error"
    );
    assert!(
        !log.contains(&format!("REQUEST_KILL_JOB JobId={requeued}")),
        "logged at level error:\n{log}"
    );
    // Back at info, they are again.
    c.ok("scontrol", &["setdebug", "info"]);
    let loud = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    c.wait_done(loud);
    wait_log(&c, &format!("_job_complete: JobId={loud} done"));
}

/// `slurmctld_debug` sets the level the controller starts at; `-v` raises it.
#[test]
fn slurmctld_debug_sets_the_starting_level_and_v_raises_it() {
    let mut c = TestCluster::start_with(Setup {
        top: "slurmctld_debug = \"error\"",
        env: vec![("SLUICE_LOG".into(), String::new())],
        ..Setup::default()
    });
    let quiet = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.wait_done(quiet), "COMPLETED");
    let log = c.controller_log();
    assert_eq!(
        lines_of(&log, quiet),
        Vec::<&str>::new(),
        "logged at level error"
    );
    // A bad level is refused when the configuration loads.
    let bad = c.dir.path().join("bad.toml");
    let text = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&bad, text.replace("\"error\"", "\"loud\"")).unwrap();
    let err = sluice::config::Config::from_file(&bad)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("slurmctld_debug: invalid debug level: loud"),
        "{err}"
    );
    // `sluice controller -v` (through the background start) logs at info again.
    let c2 = c.run("sluice", &["controller", "--stop"]);
    assert!(c2.status.success(), "{c2:?}");
    c.kill9_controller();
    let o = c.run("sluice", &["controller", "-v"]);
    assert!(o.status.success(), "{o:?}");
    // Stops the background controller however the test ends.
    struct Stop<'a>(&'a TestCluster);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.run("sluice", &["controller", "--stop"]);
        }
    }
    let c = &c;
    let _stop = Stop(c);
    let loud = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.wait_done(loud), "COMPLETED");
    let log = std::fs::read_to_string(c.dir.path().join("state/controller.log")).unwrap();
    assert!(
        log.contains(&format!("_job_complete: JobId={loud} done")),
        "-v did not raise the level:\n{log}"
    );
    assert!(!log.contains('\x1b'), "colour in a log file:\n{log}");
}

/// Preemption (preempt/partition_prio, PreemptMode CANCEL) in slurm_job_preempt's words.
#[test]
fn preemption_is_logged_with_victim_and_preemptor() {
    let c = TestCluster::start_with(Setup {
        top: "[scheduler]\npreempt_type = \"preempt/partition_prio\"\n",
        extra_partitions: r#"
[[partitions]]
name = "low"
nodes = "NODE"
priority_tier = 1
preempt_mode = "cancel"
[[partitions]]
name = "high"
nodes = "NODE"
priority_tier = 2
"#,
        ..Setup::default()
    });
    let low = c.submit(&["-p", "low", "-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(20));
    let high = c.submit(&["-p", "high", "-n4", "-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.wait_done(high), "COMPLETED");
    let log = c.controller_log();
    let want =
        format!("preempted JobId={low} has been killed to reclaim resources for JobId={high}");
    assert!(log.contains(&want), "no {want:?} in:\n{log}");
    assert_story(
        &log,
        high,
        &[
            "_slurm_rpc_submit_batch_job",
            "Partition=high",
            "WEXITSTATUS 0",
            "done",
        ],
    );
}
