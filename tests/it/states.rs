//! Job states through their life (PENDING → RUNNING → COMPLETING → COMPLETED / FAILED /
//! CANCELLED) and exit codes as `N:S`, as squeue, scontrol and sacct show them
//! (golden `exit_codes.txt`, `scancel.txt`).

use crate::harness::*;
use std::time::Duration;

#[test]
fn pending_running_completed_as_every_front_end_shows_it() {
    let c = TestCluster::start();
    c.script(
        "gate.sh",
        "#!/bin/sh\nwhile [ ! -e gate ]; do sleep 0.05; done\necho done\n",
    );
    let id = c.submit(&["-H", "-J", "life", "gate.sh"]);
    let sid = id.to_string();
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &sid, "-o", "%t %T %r"]),
        "PD PENDING JobHeldUser\n"
    );
    c.ok("scontrol", &["release", &sid]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &sid, "-o", "%t %R"]),
        format!("R {}\n", c.node())
    );
    assert_eq!(c.show_field(id, "JobState"), "RUNNING");
    let acct = c.ok(
        "sacct",
        &["-j", &sid, "-n", "-P", "-o", "JobID,State,ExitCode"],
    );
    assert_eq!(acct, format!("{id}|RUNNING|0:0\n{id}.batch|RUNNING|0:0\n"));
    std::fs::write(c.path("gate"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &sid, "-t", "all", "-o", "%t %T"]),
        "CD COMPLETED\n"
    );
    assert_eq!(c.show_field(id, "ExitCode"), "0:0");
    assert_eq!(c.show_field(id, "Reason"), "None");
    let acct = c.ok(
        "sacct",
        &["-j", &sid, "-n", "-P", "-o", "JobID,JobName,State,ExitCode"],
    );
    assert_eq!(
        acct,
        format!("{id}|life|COMPLETED|0:0\n{id}.batch|batch|COMPLETED|0:0\n")
    );
}

#[test]
fn exit_codes_and_signals_give_slurms_states() {
    let c = TestCluster::start();
    let exit3 = c.submit(&["-J", "exit3", "--wrap", "exit 3"]);
    let kill9 = c.submit(&["-J", "selfkill9", "--wrap", "kill -KILL $$"]);
    let term = c.submit(&["-J", "selfterm", "--wrap", "kill -TERM $$"]);
    let segv = c.submit(&["-J", "segv_exec", "--wrap", "exec sh -c 'kill -SEGV $$'"]);
    for id in [exit3, kill9, term, segv] {
        assert_eq!(c.wait_done(id), "FAILED", "job {id}");
    }
    let want = [
        (exit3, "3:0", "NonZeroExitCode", "FAILED"),
        (kill9, "0:9", "JobLaunchFailure", "CANCELLED"),
        (term, "0:15", "NonZeroExitCode", "CANCELLED"),
        (segv, "0:11", "NonZeroExitCode", "CANCELLED"),
    ];
    let list = want
        .iter()
        .map(|w| w.0.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let acct = c.ok(
        "sacct",
        &[
            "-j",
            &list,
            "-n",
            "-P",
            "-o",
            "JobID,State,ExitCode,DerivedExitCode",
        ],
    );
    for (id, code, reason, step_state) in want {
        assert_eq!(c.show_field(id, "ExitCode"), code, "job {id}");
        assert_eq!(c.show_field(id, "Reason"), reason, "job {id}");
        assert!(
            acct.contains(&format!("\n{id}|FAILED|{code}|0:0\n"))
                || acct.starts_with(&format!("{id}|FAILED|{code}|0:0\n")),
            "{acct}"
        );
        assert!(
            acct.contains(&format!("\n{id}.batch|{step_state}|{code}|\n")),
            "{id}: {acct}"
        );
        assert_eq!(
            c.ok(
                "squeue",
                &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%t %r"]
            ),
            format!("F {reason}\n")
        );
    }
    // The default sacct table, and its width-truncated CANCELLED+ for cancels.
    let table = c.ok("sacct", &["-j", &exit3.to_string(), "-X"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next(),
        Some("JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ")
    );
    assert_eq!(
        lines.next(),
        Some("------------ ---------- ---------- ---------- ---------- ---------- -------- ")
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with(&format!("{exit3:<12} ")), "{row}");
    assert!(row.ends_with("     FAILED      3:0 "), "{row:?}");
}

#[test]
fn cancel_pending_and_running_jobs_through_completing() {
    let c = TestCluster::start_with(Setup {
        kill_wait: 3,
        ..Setup::default()
    });
    // A running job that ignores SIGTERM stays COMPLETING until SIGKILL after KillWait.
    let stubborn = c.submit(&[
        "-J",
        "stubborn",
        "--wrap",
        "trap 'echo got TERM' TERM; echo started; while :; do sleep 0.1; done",
    ]);
    c.wait_file(&format!("slurm-{stubborn}.out"), |s| s.contains("started"));
    let pending = c.submit(&["-H", "-J", "waiting", "--wrap", "true"]);
    c.ok("scancel", &[&stubborn.to_string(), &pending.to_string()]);
    let sid = stubborn.to_string();
    let o = c.ok("squeue", &["-h", "-t", "all", "-j", &sid, "-o", "%t %T"]);
    assert_eq!(o, "CG COMPLETING\n");
    assert_eq!(
        c.ok(
            "squeue",
            &[
                "-h",
                "-t",
                "all",
                "-j",
                &pending.to_string(),
                "-o",
                "%t %T %r"
            ]
        ),
        "CA CANCELLED JobHeldUser\n"
    );
    assert_eq!(c.wait_done(stubborn), "CANCELLED");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{stubborn}.out"))).unwrap();
    assert!(out.contains("got TERM"), "{out}");
    assert!(
        out.contains(&format!(
            "error: *** JOB {stubborn} ON {} CANCELLED AT ",
            c.node()
        )),
        "{out}"
    );
    // The batch step needed SIGKILL; scontrol shows how the shell ended.
    assert_eq!(c.show_field(stubborn, "ExitCode"), "0:9");
    let uid = nix::unistd::getuid().as_raw();
    let acct = c.ok(
        "sacct",
        &[
            "-j",
            &format!("{stubborn},{pending}"),
            "-n",
            "-P",
            "-o",
            "JobID,State,ExitCode",
        ],
    );
    assert_eq!(
        acct,
        format!(
            "{stubborn}|CANCELLED by {uid}|0:0\n{stubborn}.batch|CANCELLED|0:9\n\
             {pending}|CANCELLED by {uid}|0:0\n"
        )
    );
    // A job that ends on SIGTERM: the batch step shows 0:15.
    let soft = c.submit(&["--wrap", "echo started; exec sleep 100"]);
    c.wait_file(&format!("slurm-{soft}.out"), |s| s.contains("started"));
    c.ok("scancel", &[&soft.to_string()]);
    assert_eq!(c.wait_done(soft), "CANCELLED");
    let acct = c.ok(
        "sacct",
        &[
            "-j",
            &soft.to_string(),
            "-n",
            "-P",
            "-o",
            "JobID,State,ExitCode",
        ],
    );
    assert_eq!(
        acct,
        format!("{soft}|CANCELLED by {uid}|0:0\n{soft}.batch|CANCELLED|0:15\n")
    );
    assert_eq!(c.show_field(soft, "ExitCode"), "0:15");
    // squeue keeps the finished jobs.
    let all = c.ok("squeue", &["-h", "-t", "all", "-o", "%i %t"]);
    for id in [stubborn, pending, soft] {
        assert!(all.contains(&format!("{id} CA")), "{all}");
    }
}

#[test]
fn a_job_terminated_before_its_stepd_starts_never_runs() {
    // The agent writes a terminate request, then signals stepd if its pid is known. A
    // cancel (or time limit) that lands in the instant between launch and stepd's
    // start used to be lost, and the "cancelled" job ran to its end. Replayed here
    // deterministically: a copy of a real launch record, with the request already there.
    use sluice::proto::spool;
    let c = TestCluster::start();
    let id = c.submit(&["--wrap", "echo run >> runs.txt; sleep 100"]);
    c.wait_file("runs.txt", |s| s == "run\n");
    let live = c.dir.path().join(format!("spool/job_{id}"));
    let copy = c.dir.path().join("replay");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(live.join(spool::LAUNCH), copy.join(spool::LAUNCH)).unwrap();
    spool::write(
        &copy,
        spool::TERMINATE,
        &spool::TerminateRequest {
            kill_wait: 1,
            message: None,
        },
    )
    .unwrap();
    let mut stepd = std::process::Command::new(sluice_bin())
        .arg("stepd")
        .arg(&copy)
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    let done = loop {
        if let Some(st) = stepd.try_wait().unwrap() {
            break st;
        }
        if std::time::Instant::now() > end {
            // Leave nothing behind: the job it started, then stepd itself.
            if let Some(pid) = spool::read_pid(&copy, spool::JOB_PID) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(-pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = stepd.kill();
            let _ = stepd.wait();
            panic!("stepd ran the job although it had been terminated before it started");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(done.success());
    let r: spool::StepResult = spool::read(&copy, spool::RESULT).unwrap().unwrap();
    assert_eq!(r.status.to_string(), "0:15");
    assert!(!copy.join(spool::JOB_PID).exists());
    assert_eq!(
        std::fs::read_to_string(c.path("runs.txt")).unwrap(),
        "run\n"
    );
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
}
