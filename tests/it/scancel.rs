//! scancel through the real front-end: ids, `-u`, `-t`, `-p`, `-n`, `--signal` to the
//! batch shell, finished and unknown jobs (silent, exit 0), and bad input.

use crate::harness::*;

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

#[test]
fn signals_finished_unknown_and_bad_input() {
    let c = TestCluster::start();
    // --signal reaches the batch shell (with -b, and without: no steps exist yet).
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
    c.ok("scancel", &["-s", "SIGUSR2", &id.to_string()]);
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
