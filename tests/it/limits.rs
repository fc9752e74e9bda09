//! Time limits: partition DefaultTime/MaxTime, and enforcement (SIGTERM at the limit,
//! SIGKILL KillWait later, state TIMEOUT), with `--signal=B:SIG@secs` before it.
//!
//! The enforcement test needs real minutes: `--time` has a one-minute granularity, as
//! in Slurm, so it takes a little over 60 s. It is the only such test and runs beside
//! the others; the controller's limit logic is also tested on virtual time in
//! `ctld/state/tests.rs`, which is why no test-only "short minute" knob exists.

use crate::harness::*;
use std::time::Duration;

#[test]
fn partition_default_and_max_time() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"short\"\nnodes = \"NODE\"\n\
                           max_time = \"0:30:00\"\ndefault_time = \"0:10:00\"\n",
        ..Setup::default()
    });
    let dflt = c.submit(&["-H", "--wrap", "true"]);
    assert_eq!(c.show_field(dflt, "TimeLimit"), "01:00:00");
    let short = c.submit(&["-H", "-p", "short", "--wrap", "true"]);
    assert_eq!(c.show_field(short, "TimeLimit"), "00:10:00");
    // Above MaxTime: refused at submit (sluice enforces partition limits at submit,
    // EnforcePartLimits=ALL), no job created.
    let before = c.job_ids();
    let (code, _, err) = c.fails("sbatch", &["-p", "short", "-t", "31", "--wrap", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)\n"
    );
    assert_eq!(c.job_ids(), before);
    // The owner may lower a limit but not raise it past the partition's.
    c.ok(
        "scontrol",
        &["update", &format!("JobId={short}"), "TimeLimit=5"],
    );
    assert_eq!(c.show_field(short, "TimeLimit"), "00:05:00");
    let sinfo = c.ok("sinfo", &["-h", "-p", "short", "-o", "%l"]);
    assert_eq!(sinfo, "30:00\n");
}

#[test]
fn time_limit_sends_sigterm_then_sigkill_after_kill_wait_and_ends_in_timeout() {
    let c = TestCluster::start_with(Setup {
        kill_wait: 3,
        // A partition whose OverTimeLimit (UNLIMITED) overrides the cluster's (0).
        extra_partitions: "[[partitions]]\nname = \"over\"\nnodes = \"NODE\"\n\
                           OverTimeLimit = \"UNLIMITED\"\n",
        ..Setup::default()
    });
    let node = c.node();
    let show = |p: &str| c.ok("scontrol", &["show", "partition", p]);
    assert!(
        show("over").contains(" OverTimeLimit=UNLIMITED "),
        "{}",
        show("over")
    );
    assert!(
        show("debug").contains(" OverTimeLimit=NONE "),
        "{}",
        show("debug")
    );
    let overtime = c.submit(&["-p", "over", "--time=1", "--wrap", "exec sleep 300"]);
    // Dies on the SIGTERM.
    let plain = c.submit(&[
        "-J",
        "to_plain",
        "--time=1",
        "--wrap",
        "echo started; exec sleep 300",
    ]);
    // Ignores SIGTERM: needs the SIGKILL KillWait seconds later.
    c.script(
        "traps.sh",
        "#!/bin/bash\n\
         t0=$(date +%s)\n\
         trap 'echo \"+$(( $(date +%s) - t0 ))s got SIGTERM\"' TERM\n\
         trap 'echo \"+$(( $(date +%s) - t0 ))s got SIGUSR1\"' USR1\n\
         echo started\n\
         while :; do sleep 0.2; done\n",
    );
    let trap = c.submit(&["-J", "to_trap", "--time=1", "traps.sh"]);
    // --signal=B:USR1@50: the batch shell gets USR1 about 10 s after it starts.
    let warned = c.submit(&["-J", "sig_b", "--time=1", "--signal=B:USR1@50", "traps.sh"]);
    for id in [plain, trap, warned] {
        c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("started"));
    }
    let out = |id: u32| std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap();
    let usr1 = wait_until("USR1 warning", Duration::from_secs(30), || {
        let s = out(warned);
        s.lines()
            .find(|l| l.ends_with("got SIGUSR1"))
            .map(str::to_string)
    });
    let secs: u32 = usr1[1..usr1.find('s').unwrap()].parse().unwrap();
    assert!(
        (8..=15).contains(&secs),
        "USR1 at +{secs}s (limit 60 s, @50)"
    );
    assert!(
        !out(trap).contains("SIGUSR1"),
        "only --signal jobs are warned"
    );
    // Still running well before the limit.
    assert_eq!(c.state(plain).as_deref(), Some("RUNNING"));

    for id in [plain, trap, warned] {
        c.wait_state(id, &["TIMEOUT"], Duration::from_secs(75));
    }
    // Past its limit too, but its partition lets it run on.
    assert_eq!(c.state(overtime).as_deref(), Some("RUNNING"));
    c.ok("scancel", &[&overtime.to_string()]);
    // The trapping jobs are still there (COMPLETING) until the SIGKILL.
    wait_until(
        "SIGKILL of the trapping jobs",
        Duration::from_secs(20),
        || {
            c.ok("squeue", &["-h", "-t", "all", "-o", "%i %t"])
                .lines()
                .all(|l| !l.ends_with(" CG"))
                .then_some(())
        },
    );
    for (id, sig) in [(plain, "0:15"), (trap, "0:9"), (warned, "0:9")] {
        let text = out(id);
        assert!(
            text.contains(&format!(
                "slurmstepd-{node}: error: *** JOB {id} ON {node} CANCELLED AT "
            )) && text.contains(" DUE TO TIME LIMIT ***\n"),
            "{text}"
        );
        assert_eq!(c.show_field(id, "JobState"), "TIMEOUT");
        assert_eq!(c.show_field(id, "Reason"), "TimeLimit");
        assert_eq!(c.show_field(id, "ExitCode"), sig, "job {id}");
        let acct = c.ok(
            "sacct",
            &[
                "-j",
                &id.to_string(),
                "-n",
                "-P",
                "-o",
                "JobID,State,ExitCode,Timelimit,Elapsed,End",
            ],
        );
        let rows: Vec<Vec<&str>> = acct.lines().map(|l| l.split('|').collect()).collect();
        assert_eq!(rows.len(), 2, "{acct}");
        assert_eq!(
            &rows[0][..4],
            [&id.to_string()[..], "TIMEOUT", "0:0", "00:01:00"]
        );
        assert_eq!(&rows[1][1..3], ["CANCELLED", sig], "{acct}");
        // Killed at the limit, not before (the controller checks every second).
        assert!(
            ["00:01:00", "00:01:01", "00:01:02"].contains(&rows[0][4]),
            "{acct}"
        );
        assert_eq!(
            c.ok(
                "squeue",
                &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%t %r"]
            ),
            "TO TimeLimit\n"
        );
    }
    // SIGTERM reached the trapping shell; SIGKILL came KillWait (3 s) after it.
    let text = out(trap);
    assert!(text.contains("got SIGTERM"), "{text}");
    let acct = c.ok("sacct", &["-j", &trap.to_string(), "-n", "-P", "-o", "End"]);
    let ends: Vec<i64> = acct
        .lines()
        .map(|l| {
            chrono::NaiveDateTime::parse_from_str(l, "%Y-%m-%dT%H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp()
        })
        .collect();
    assert!(
        (2..=6).contains(&(ends[1] - ends[0])),
        "job end {} vs step end {}",
        ends[0],
        ends[1]
    );
}
