//! squeue through the real front-end: a new job is listed at once, formats (default,
//! `-l`, `-o`, `-O`), filters (`-u -t -p -j -n`), `-h`, `--sort`, `--start`, finished
//! jobs kept for MinJobAge and then purged, and the unknown-id error.

use crate::harness::*;
use std::time::Duration;

const DEFAULT_HEADER: &str =
    "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)";

#[test]
fn formats_filters_and_sorting() {
    let c = TestCluster::start_with(Setup {
        cpus: 2,
        extra_partitions: "[[partitions]]\nname = \"batch\"\nnodes = \"NODE\"\n",
        ..Setup::default()
    });
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let node = c.node();
    c.script(
        "gate.sh",
        "#!/bin/sh\nwhile [ ! -e gate ]; do sleep 0.05; done\n",
    );
    let run = c.submit(&["-J", "runner", "-n", "2", "-t", "10", "gate.sh"]);
    c.wait_state(run, &["RUNNING"], Duration::from_secs(20));
    let wait = c.submit(&["-J", "waiter", "-p", "batch", "--wrap", "true"]);
    let held = c.submit(&["-J", "held_job", "-H", "--wrap", "true"]);

    // Default format: Slurm's header and columns.
    let out = c.ok("squeue", &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], DEFAULT_HEADER);
    assert_eq!(lines.len(), 4, "{out}");
    let u8 = format!("{:>8}", &user[..user.len().min(8)]);
    assert!(
        lines.contains(
            &format!("{run:>18}     debug   runner {u8}  R       0:00      1 {node}").as_str()
        ) || lines
            .iter()
            .any(|l| l.starts_with(&format!("{run:>18}     debug   runner {u8}  R "))),
        "{out}"
    );
    assert!(
        lines.contains(
            &format!("{wait:>18}     batch   waiter {u8} PD       0:00      1 (Resources)")
                .as_str()
        ),
        "{out}"
    );
    assert!(
        lines.contains(
            &format!("{held:>18}     debug held_job {u8} PD       0:00      1 (JobHeldUser)")
                .as_str()
        ),
        "{out}"
    );
    // -l: a time line, then long state names and the time limit.
    let out = c.ok("squeue", &["-l", "-j", &run.to_string()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1],
        "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)"
    );
    assert!(
        lines[2].contains(" RUNNING ") && lines[2].contains(" 10:00 "),
        "{out}"
    );
    // -o with widths and literal text; -O with sizes; -h.
    assert_eq!(
        c.ok(
            "squeue",
            &[
                "-h",
                "-j",
                &wait.to_string(),
                "-o",
                "%.6i|%-8j|%T|%r|%P|%C|%D|%l"
            ]
        ),
        format!("{wait:>6}|waiter  |PENDING|Resources|batch|1|1|UNLIMITED\n")
    );
    assert_eq!(
        c.ok(
            "squeue",
            &[
                "-j",
                &held.to_string(),
                "-O",
                "JobID:8,Name:10,StateCompact:4,Reason"
            ]
        ),
        format!(
            "JOBID   NAME      ST  REASON              \n{held:<8}held_job  PD  JobHeldUser         \n"
        )
    );
    // Filters.
    let ids = |args: &[&str]| -> Vec<u32> {
        let mut a = vec!["-h", "-o", "%i"];
        a.extend_from_slice(args);
        c.ok("squeue", &a)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    let mut all = ids(&[]);
    all.sort();
    assert_eq!(all, vec![run, wait, held]);
    assert_eq!(ids(&["-t", "R"]), vec![run]);
    assert_eq!(ids(&["-t", "RUNNING,PD", "-p", "batch"]), vec![wait]);
    assert_eq!(ids(&["--states=pending", "-n", "held_job"]), vec![held]);
    assert_eq!(ids(&["-u", &user, "-j", &run.to_string()]), vec![run]);
    assert_eq!(ids(&["-u", "nobody"]), Vec::<u32>::new());
    assert_eq!(ids(&["--name=runner,waiter", "--sort=i"]), vec![run, wait]);
    assert_eq!(ids(&["--sort=-i"]), vec![held, wait, run]);
    assert_eq!(
        ids(&["--jobs", &format!("{held},{wait}"), "--sort=i"]),
        vec![wait, held]
    );
    // --start: pending jobs only, with START_TIME.
    let out = c.ok("squeue", &["--start"]);
    assert!(out.lines().next().unwrap().contains("START_TIME"), "{out}");
    assert!(!out.contains(&format!("{run:>18} ")), "{out}");
    assert!(out.contains(&format!("{wait:>18} ")), "{out}");
    std::fs::write(c.path("gate"), "").unwrap();
    c.wait_done(run);
}

#[test]
fn new_jobs_show_at_once_and_finished_jobs_stay_for_min_job_age() {
    let c = TestCluster::start_with(Setup {
        min_job_age: 4,
        ..Setup::default()
    });
    // Visible as PENDING the moment sbatch returns, in squeue and sacct.
    let held = c.submit(&["-H", "--wrap", "true"]);
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &held.to_string(), "-o", "%T"]),
        "PENDING\n"
    );
    assert_eq!(
        c.ok(
            "sacct",
            &["-n", "-X", "-P", "-j", &held.to_string(), "-o", "State"]
        ),
        "PENDING\n"
    );
    // A job that starts at once is just as visible (sluice schedules immediately
    // instead of after Slurm's batch_sched_delay, so it may already be RUNNING).
    for _ in 0..5 {
        let quick = c.submit(&["--wrap", "true"]);
        let q = quick.to_string();
        assert!(c.state(quick).is_some(), "job {quick} not in squeue");
        assert_eq!(
            c.ok("sacct", &["-n", "-X", "-P", "-j", &q, "-o", "JobID"]),
            format!("{quick}\n")
        );
    }
    let done = c.submit(&["--wrap", "exit 2"]);
    assert_eq!(c.wait_done(done), "FAILED");
    let sid = done.to_string();
    // Not in the default view (active states), but with -t all, and in scontrol.
    assert_eq!(c.ok("squeue", &["-j", &sid]), format!("{DEFAULT_HEADER}\n"));
    let out = c.ok("squeue", &["-j", &sid, "-t", "all"]);
    assert!(out.lines().nth(1).unwrap().contains(" F "), "{out}");
    assert!(out.contains("(NonZeroExitCode)"), "{out}");
    assert!(
        c.ok("scontrol", &["show", "job", &sid])
            .contains("JobState=FAILED")
    );
    // After MinJobAge it is gone from the controller's view, but not from sacct.
    wait_until("MinJobAge purge", Duration::from_secs(20), || {
        c.state(done).is_none().then_some(())
    });
    let (code, _, err) = c.fails("squeue", &["-j", &sid]);
    assert_eq!(
        (code, err.as_str()),
        (1, "slurm_load_jobs error: Invalid job id specified\n")
    );
    assert_eq!(
        c.ok(
            "sacct",
            &["-n", "-X", "-P", "-j", &sid, "-o", "State,ExitCode"]
        ),
        "FAILED|2:0\n"
    );
    // The held job is never purged.
    assert_eq!(c.state(held).as_deref(), Some("PENDING"));
}

#[test]
fn unknown_ids_and_bad_input() {
    let c = TestCluster::start();
    let id = c.submit(&["-H", "--wrap", "true"]);
    // One unknown id: Slurm's error, exit 1. Two ids: the known ones, exit 0.
    let (code, out, err) = c.fails("squeue", &["-j", "999999"]);
    assert_eq!(code, 1);
    assert_eq!(out, "");
    assert_eq!(err, "slurm_load_jobs error: Invalid job id specified\n");
    let o = c.run("squeue", &["-h", "-j", &format!("999999,{id}"), "-o", "%i"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), format!("{id}\n"));
    for (args, want) in [
        (&["-j", "abc"][..], "squeue: error: Invalid job id: abc\n"),
        (&["--bogus"][..], "squeue: unrecognized option '--bogus'\n"),
        (
            &["-t", "BOGUS"][..],
            "squeue: error: Invalid job state specified: BOGUS\n",
        ),
        (
            &["--sort=?"][..],
            "squeue: error: Invalid sort specification: ?\n",
        ),
    ] {
        let (code, out, err) = c.fails("squeue", args);
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(out, "", "{args:?}");
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
    // An unknown user: an error and the header, exit 0; an unknown partition: header.
    let o = c.run("squeue", &["-u", "nosuchuser"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), format!("{DEFAULT_HEADER}\n"));
    assert_eq!(stderr(&o), "squeue: error: Invalid user: nosuchuser\n\n"); // sic (golden)
    assert_eq!(
        c.ok("squeue", &["-p", "nosuch"]),
        format!("{DEFAULT_HEADER}\n")
    );
}

#[test]
fn squeue_and_scontrol_json_give_slurms_job_objects() {
    let c = TestCluster::start();
    let done = c.submit(&["-J", "first", "-o", "/dev/null", "--wrap", "exit 3"]);
    c.wait_done(done);
    let run = c.submit(&["-J", "sleeper", "-o", "/dev/null", "--wrap", "sleep 30"]);
    c.wait_state(run, &["RUNNING"], Duration::from_secs(20));
    let parse = |text: &str| -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    // squeue --json: the queue's selection (active jobs by default), as objects.
    let v = parse(&c.ok("squeue", &["--json"]));
    assert_eq!(v["meta"]["plugin"]["type"], "openapi/v0.0.38");
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{v}");
    assert_eq!(jobs[0]["job_id"], run);
    assert_eq!(jobs[0]["name"], "sleeper");
    assert_eq!(jobs[0]["job_state"], "RUNNING");
    assert_eq!(jobs[0]["nodes"], c.node());
    // -t all adds the finished one, with its exit code as a wait status.
    let v = parse(&c.ok("squeue", &["--json", "-t", "all"]));
    let first = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == done)
        .cloned()
        .expect("the finished job");
    assert_eq!(first["job_state"], "FAILED");
    assert_eq!(first["exit_code"], 3 << 8);
    // scontrol show job --json ID.
    let v = parse(&c.ok("scontrol", &["--json", "show", "job", &run.to_string()]));
    assert_eq!(v["jobs"][0]["job_id"], run);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    let (code, err) = c.fails_err("scontrol", &["--json", "show", "job", "999999"]);
    assert_ne!(code, 0);
    assert!(err.contains("Invalid job id"), "{err}");
    c.ok("scancel", &[&run.to_string()]);
}
