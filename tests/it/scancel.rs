//! scancel through the real front-end: ids, `-u`, `-t`, `-p`, `-n`, `--signal` to the
//! steps, the batch shell (`-b`) or both with the shell's children (`-f`), finished and
//! unknown jobs (silent, exit 0), and bad input.

use crate::harness::*;
use std::time::Duration;

#[test]
fn by_id_user_state_partition_and_name() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"batch\"\nnodes = \"NODE\"\n",
        ..Setup::default()
    });
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let held = |args: &[&str]| {
        let mut a = vec!["-H"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--wrap", "true"]);
        c.submit(&a)
    };
    let a = held(&["-J", "alpha"]);
    let b = held(&["-J", "beta"]);
    let d = held(&["-J", "alpha", "-p", "batch"]);
    let e = held(&["-J", "gamma", "-p", "batch"]);
    let f = held(&["-J", "delta"]);
    let g = held(&["-J", "eps"]);
    let state = |id: u32| c.state(id).unwrap();
    // Ids (several, options after them too).
    let o = c.run("scancel", &[&a.to_string(), "-v"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), format!("scancel: Terminating job {a}\n"));
    assert_eq!(state(a), "CANCELLED");
    // -n and -p narrow together.
    c.ok("scancel", &["-n", "alpha", "-p", "batch"]);
    assert_eq!(state(d), "CANCELLED");
    assert_eq!(state(b), "PENDING");
    // -p alone.
    c.ok("scancel", &["--partition=batch"]);
    assert_eq!(state(e), "CANCELLED");
    // Ids with a filter: only ids that also match it.
    c.ok("scancel", &["-n", "nomatch", &b.to_string()]);
    assert_eq!(state(b), "PENDING");
    // -t and -u.
    c.ok("scancel", &["-t", "RUNNING", "-u", &user]);
    assert_eq!(state(b), "PENDING");
    c.ok("scancel", &["-t", "PENDING", "-u", &user, "-n", "delta"]);
    assert_eq!(state(f), "CANCELLED");
    c.ok("scancel", &["--me", &b.to_string(), &g.to_string()]);
    assert_eq!(
        (state(b), state(g)),
        ("CANCELLED".into(), "CANCELLED".into())
    );
}

/// `scancel -s SIG` reaches the job's steps, never the batch shell; `-b` the batch
/// shell only (not its children); `-f` the shell, its children and every step
/// (scancel(1): "By default, signals other than SIGKILL are not sent to the batch
/// step").
#[test]
fn signal_scopes_default_batch_and_full() {
    let c = TestCluster::start();
    c.script(
        "scopes.sh",
        "#!/bin/bash\ntrap 'echo shell got USR1' USR1\ntrap 'echo shell got USR2' USR2\n\
         srun bash -c 'trap \"echo step got USR2\" USR2; echo step-ready; \
         while :; do sleep 0.1; done' &\n\
         sleep 1000 &\necho $! > child.pid\necho started\nwhile :; do sleep 0.1; done\n",
    );
    let id = c.submit(&["-o", "scopes.out", "scopes.sh"]);
    let out = || c.wait_file("scopes.out", |_| true);
    c.wait_file("scopes.out", |s| {
        s.contains("started") && s.contains("step-ready")
    });
    let child: i32 = std::fs::read_to_string(c.path("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: i32| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    let count = |s: &str, what: &str| s.lines().filter(|l| *l == what).count();
    // Without -b or -f: the step only.
    c.ok("scancel", &["-s", "USR2", &id.to_string()]);
    c.wait_file("scopes.out", |s| s.contains("step got USR2"));
    // -b: the shell only. Had the USR2 reached the shell, it would show by now.
    c.ok("scancel", &["--signal=USR1", "-b", &id.to_string()]);
    c.wait_file("scopes.out", |s| s.contains("shell got USR1"));
    let o = out();
    assert_eq!(count(&o, "shell got USR2"), 0, "{o}");
    assert_eq!(count(&o, "step got USR2"), 1, "{o}");
    assert!(alive(child), "-b signalled the shell's child");
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    // -f: the shell, its child (killed by USR2) and the step.
    c.ok("scancel", &["--full", "-s", "USR2", &id.to_string()]);
    c.wait_file("scopes.out", |s| {
        s.contains("shell got USR2") && count(s, "step got USR2") >= 2
    });
    wait_until("the shell's child killed", Duration::from_secs(10), || {
        (!alive(child)).then_some(())
    });
    c.ok("scancel", &[&id.to_string()]);
    assert_eq!(c.wait_done(id), "CANCELLED");
}

#[test]
fn signals_finished_unknown_and_bad_input() {
    let c = TestCluster::start();
    // --signal with -b reaches the batch shell.
    c.script(
        "traps.sh",
        "#!/bin/bash\ntrap 'echo got USR1' USR1\ntrap 'echo got USR2; exit 0' USR2\n\
         echo started\nwhile :; do sleep 0.1; done\n",
    );
    let id = c.submit(&["traps.sh"]);
    c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("started"));
    c.ok("scancel", &["--signal=USR1", "-b", &id.to_string()]);
    c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("got USR1"));
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    c.ok("scancel", &["-b", "-s", "SIGUSR2", &id.to_string()]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    // A signal to a pending job is refused.
    let p = c.submit(&["-H", "--wrap", "true"]);
    let (code, _, err) = c.fails("scancel", &["-s", "USR1", &p.to_string()]);
    assert_eq!(code, 1);
    assert!(err.contains("Job is pending execution"), "{err}");
    assert_eq!(c.state(p).as_deref(), Some("PENDING"));
    // Finished or unknown: silent, exit 0 (with -v: Slurm's message, still 0).
    for target in [id.to_string(), "999999".to_string()] {
        let o = c.run("scancel", &[&target]);
        assert!(o.status.success(), "{target}");
        assert_eq!(
            (stdout(&o), stderr(&o)),
            (String::new(), String::new()),
            "{target}"
        );
    }
    let o = c.run("scancel", &["-v", "999999"]);
    assert!(o.status.success());
    assert_eq!(
        stderr(&o),
        "scancel: Terminating job 999999\nscancel: error: Kill job error on job id 999999: Invalid job id specified\n"
    );
    // Bad input: no job touched.
    let cases: &[(&[&str], &str)] = &[
        (&["abc"], "scancel: error: Invalid job id abc\n"),
        (&[], "scancel: error: No job identification provided\n"),
        (&["--bogus"], "scancel: unrecognized option '--bogus'\n"),
        (
            &["-s", "BOGUS", "1"],
            "scancel: error: Invalid job signal: BOGUS\n",
        ),
        (
            &["-t", "BOGUS"],
            "scancel: error: Invalid job state specified: BOGUS\n",
        ),
    ];
    for (args, err) in cases {
        let (code, out, e) = c.fails("scancel", args);
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}");
        assert!(e.starts_with(err), "{args:?}: {e}");
    }
    assert_eq!(c.state(p).as_deref(), Some("PENDING"));
}

#[test]
fn scancel_and_sacct_select_by_account_qos_and_node() {
    let c = TestCluster::start_with(Setup {
        cpus: 4,
        ..Setup::default()
    });
    let a = c.submit(&["-A", "proj1", "-o", "/dev/null", "--wrap", "sleep 30"]);
    let b = c.submit(&["-A", "proj2", "-o", "/dev/null", "--wrap", "sleep 30"]);
    for id in [a, b] {
        c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    }
    // -A picks proj1's job only.
    c.ok("scancel", &["-A", "proj1"]);
    c.wait_state(a, &["CANCELLED"], Duration::from_secs(10));
    assert_eq!(c.state(b).as_deref(), Some("RUNNING"));
    // A QOS nobody uses selects nothing; the node list selects b.
    c.ok("scancel", &["-q", "nosuchqos"]);
    assert_eq!(c.state(b).as_deref(), Some("RUNNING"));
    c.ok("scancel", &["-w", &c.node()]);
    c.wait_state(b, &["CANCELLED"], Duration::from_secs(10));
    let (code, err) = c.fails_err("scancel", &["-w", "bad[1-"]);
    assert_ne!(code, 0);
    assert!(err.contains("Invalid node list"), "{err}");
    // sacct filters the same way.
    let rows = |args: &[&str]| -> Vec<String> {
        let mut v = vec!["-X", "-n", "-P", "-o", "JobID,Account"];
        v.extend_from_slice(args);
        c.ok("sacct", &v).lines().map(String::from).collect()
    };
    assert_eq!(rows(&["-A", "proj2"]), vec![format!("{b}|proj2")]);
    assert_eq!(rows(&["-A", "proj1,proj2"]).len(), 2);
    assert!(rows(&["-q", "nosuchqos"]).is_empty());
    assert_eq!(rows(&["-N", &c.node()]).len(), 2);
    assert!(rows(&["-N", "othernode"]).is_empty());
}
