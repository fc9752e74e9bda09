//! sbatch through the real front-end: where the script comes from (and that it is
//! captured at submit time), `#SBATCH` directives against the command line, the option
//! grammar as it reaches the job, the output contract (`--parsable`, `-Q`, `-v`,
//! `--test-only`, `--wait`), and options that later issues implement.

use crate::harness::*;
use std::time::Duration;

/// The names and limits of jobs, from squeue.
fn name_and_limit(c: &TestCluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%j|%l"])
        .trim()
        .to_string()
}

#[test]
fn the_script_is_captured_at_submit_from_a_file_stdin_dev_stdin_and_wrap() {
    let c = TestCluster::start();
    // A file deleted right after sbatch returns (dask, submitit): held so it cannot
    // have started before the deletion.
    let path = c.script(
        "job.sh",
        "#!/bin/sh\necho \"from file: $SLURM_JOB_NAME args=$1,$2\"\n",
    );
    let held = c.submit(&["-H", "job.sh", "one", "two words"]);
    std::fs::remove_file(&path).unwrap();
    c.ok("scontrol", &["release", &held.to_string()]);
    assert_eq!(c.wait_done(held), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{held}.out"))).unwrap(),
        "from file: job.sh args=one,two words\n"
    );

    // No path: the script is read from stdin and the job is named `sbatch`.
    let o = c.run_stdin(
        "sbatch",
        &["--parsable"],
        b"#!/bin/sh\necho \"from stdin: $SLURM_JOB_NAME\"\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let from_stdin: u32 = stdout(&o).trim().parse().unwrap();
    // The literal path /dev/stdin (batchspawner, Open OnDemand): named after the path.
    let o = c.run_stdin(
        "sbatch",
        &["--parsable", "/dev/stdin"],
        b"#!/bin/sh\necho \"from /dev/stdin: $SLURM_JOB_NAME\"\n",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let dev_stdin: u32 = stdout(&o).trim().parse().unwrap();
    // --wrap: Slurm's generated /bin/sh script, job named `wrap`.
    let wrapped = c.submit(&[
        "--wrap",
        "echo \"wrapped: $SLURM_JOB_NAME\"; head -2 \"$0\"",
    ]);

    for id in [from_stdin, dev_stdin, wrapped] {
        assert_eq!(c.wait_done(id), "COMPLETED", "job {id}");
    }
    let out = |id: u32| std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap();
    assert_eq!(out(from_stdin), "from stdin: sbatch\n");
    assert_eq!(out(dev_stdin), "from /dev/stdin: stdin\n");
    assert_eq!(
        out(wrapped),
        "wrapped: wrap\n#!/bin/sh\n# This script was created by sbatch --wrap.\n"
    );
}

#[test]
fn directives_are_read_up_to_the_first_command_and_the_command_line_wins() {
    let c = TestCluster::start();
    c.script(
        "d.sh",
        "#!/bin/bash\n\
         # a comment before the directives\n\
         \n\
         #SBATCH -J early_name\n\
         #SBATCH --time 5 --nice=7\n\
         #SBATCH --output=dir-%j.out\n\
         echo body\n\
         #SBATCH -J late_name\n\
         #SBATCH --time=9\n",
    );
    let a = c.submit(&["-H", "d.sh"]);
    assert_eq!(name_and_limit(&c, a), "early_name|5:00");
    assert_eq!(c.show_field(a, "Nice"), "7");
    assert!(
        c.show_field(a, "StdOut")
            .ends_with(&format!("/dir-{a}.out"))
    );
    let b = c.submit(&["-H", "-J", "cli_name", "--time=7", "d.sh"]);
    assert_eq!(name_and_limit(&c, b), "cli_name|7:00");
    assert_eq!(c.show_field(b, "Nice"), "7");
    // The directives' output file is used when the job runs.
    c.ok("scontrol", &["release", &a.to_string()]);
    c.wait_done(a);
    assert_eq!(c.wait_file(&format!("dir-{a}.out"), |_| true), "body\n");
}

#[test]
fn the_option_grammar_reaches_the_job() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"batch\"\nnodes = \"NODE\"\n",
        ..Setup::default()
    });
    // Short options with separate values, glued values, long options with `=` and with
    // a separate value, an unambiguous long prefix.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (
            &[
                "-p", "batch", "-J", "short", "-t", "1-2", "-n", "2", "-c", "2", "--mem=1G",
            ],
            &[
                ("JobName", "short"),
                ("TimeLimit", "1-02:00:00"),
                ("NumTasks", "2"),
                ("CPUs/Task", "2"),
                ("NumCPUs", "4"),
                ("MinMemoryNode", "1G"),
            ],
        ),
        (
            &["-pbatch", "-Jglued", "-t90", "-n1", "--mem-per-cpu", "500M"],
            &[
                ("JobName", "glued"),
                ("TimeLimit", "01:30:00"),
                ("NumCPUs", "1"),
                ("MinMemoryCPU", "500M"),
            ],
        ),
        (
            &[
                "--job-name=long",
                "--time=2:30",
                "--ntasks-per-node=3",
                "--mem",
                "2048K",
            ],
            &[
                ("JobName", "long"),
                ("TimeLimit", "00:03:00"),
                ("NumTasks", "3"),
                ("MinMemoryNode", "2M"),
            ],
        ),
        (
            &[
                "--job-name",
                "hms",
                "--time",
                "0:10:30",
                "-N",
                "1",
                "--mem=1024",
            ],
            &[
                ("TimeLimit", "00:11:00"),
                ("NumNodes", "1"),
                ("MinMemoryNode", "1G"),
            ],
        ),
        (
            &["--part=batch", "-t", "1-0:5", "--nice=5", "--no-requeue"],
            &[
                ("Partition", "batch"),
                ("TimeLimit", "1-00:05:00"),
                ("Nice", "5"),
                ("Requeue", "0"),
            ],
        ),
        (
            &["-p", "batch", "-t", "2-3:4:5", "--requeue", "-D", "/tmp"],
            &[
                ("TimeLimit", "2-03:05:00"),
                ("Requeue", "1"),
                ("WorkDir", "/tmp"),
            ],
        ),
    ];
    for (args, want) in cases {
        let mut a = vec!["-H"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--wrap", "true"]);
        let id = c.submit(&a);
        let shown = c.ok("scontrol", &["-o", "show", "job", &id.to_string()]);
        for (k, v) in *want {
            assert_eq!(
                field(&shown, k).as_deref(),
                Some(*v),
                "{args:?}: {k} in {shown}"
            );
        }
    }
    // --hold and --begin keep a job pending with Slurm's reasons.
    let held = c.submit(&["--hold", "--wrap", "true"]);
    let later = c.submit(&["--begin=now+1hour", "--wrap", "true"]);
    let o = c.ok(
        "squeue",
        &["-h", "-j", &format!("{held},{later}"), "-o", "%i %T %r"],
    );
    assert!(o.contains(&format!("{held} PENDING JobHeldUser")), "{o}");
    assert!(o.contains(&format!("{later} PENDING BeginTime")), "{o}");
}

#[test]
fn output_contract_parsable_quiet_verbose_test_only_and_wait() {
    let c = TestCluster::start();
    let o = c.run("sbatch", &["--wrap", "true"]);
    assert!(o.status.success());
    let line = stdout(&o);
    let id: u32 = line
        .strip_prefix("Submitted batch job ")
        .and_then(|s| s.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    assert_eq!(stderr(&o), "");
    // --parsable: the id alone; -M adds the cluster.
    assert_eq!(
        c.ok("sbatch", &["--parsable", "--wrap", "true"]),
        format!("{}\n", id + 1)
    );
    assert_eq!(
        c.ok("sbatch", &["--parsable", "-M", "testc", "--wrap", "true"]),
        format!("{};testc\n", id + 2)
    );
    assert_eq!(
        c.ok("sbatch", &["-M", "testc", "--wrap", "true"]),
        format!("Submitted batch job {} on cluster testc\n", id + 3)
    );
    // -Q: nothing at all, but the job exists.
    let o = c.run("sbatch", &["-Q", "--wrap", "true"]);
    assert!(o.status.success());
    assert_eq!((stdout(&o), stderr(&o)), (String::new(), String::new()));
    assert!(c.job_ids().contains(&(id + 4)));
    // -v: diagnostics on stderr only.
    let o = c.run("sbatch", &["-v", "--wrap", "true"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), format!("Submitted batch job {}\n", id + 5));
    assert!(stderr(&o).starts_with("sbatch: "), "{}", stderr(&o));

    // --test-only: says where and when it would run; creates nothing.
    let before = c.job_ids();
    let o = c.run("sbatch", &["--test-only", "-n", "2", "--wrap", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.starts_with(&format!("sbatch: Job {} to start at ", id + 6))
            && e.contains(&format!(
                "using 2 processors on nodes {} in partition debug",
                c.node()
            )),
        "{e}"
    );
    assert_eq!(stdout(&o), "");
    assert_eq!(c.job_ids(), before);
    // A held job is placed as if released (Slurm's will-run ignores the hold).
    let o = c.run("sbatch", &["--test-only", "-H", "--wrap", "true"]);
    assert!(
        stderr(&o).contains(&format!("on nodes {} in partition debug", c.node())),
        "{}",
        stderr(&o)
    );

    // --wait: returns when the job ends, with its exit code.
    let o = c.run("sbatch", &["--wait", "--wrap", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("Submitted batch job "));
    let o = c.run("sbatch", &["--wait", "--parsable", "--wrap", "sleep 0.2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let waited: u32 = stdout(&o).trim().parse().unwrap();
    assert_eq!(c.state(waited).as_deref(), Some("COMPLETED"));
}

#[test]
fn options_of_later_issues_are_refused_not_ignored() {
    let c = TestCluster::start();
    let (code, out, err) = c.fails("sbatch", &["--priority=TOP", "--wrap", "true"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "");
    assert!(
        err.starts_with("sbatch: error: --priority") && err.contains("is not supported yet"),
        "{err}"
    );
    // The same from a directive.
    c.script("tm.sh", "#!/bin/sh\n#SBATCH --container=/b\ntrue\n");
    let (_, _, err) = c.fails("sbatch", &["tm.sh"]);
    assert!(
        err.contains("--container") && err.contains("not supported yet"),
        "{err}"
    );
    // --gres-flags is implemented now: a bad value is refused as Slurm refuses it.
    let (code, _, err) = c.fails("sbatch", &["--gres-flags=bogus", "--wrap", "true"]);
    assert_eq!(
        (code, err.as_str()),
        (255, "sbatch: error: Invalid --gres-flags specification\n")
    );
    // --signal=R: (overlap with a MaxStartDelay reservation): refused by sbatch, srun
    // and salloc alike, and nothing is submitted; B: and plain signals are taken.
    let before = c.job_ids();
    for prog in ["sbatch", "srun", "salloc"] {
        let mut args = vec!["--signal=R:USR1@30"];
        if prog == "sbatch" {
            args.extend(["--wrap", "true"]);
        } else {
            args.push("true");
        }
        let (code, out, err) = c.fails(prog, &args);
        assert_eq!((code, out.as_str()), (1, ""), "{prog}: {err}");
        assert_eq!(
            err,
            format!(
                "{prog}: error: --signal=R: (overlapping reservations that have MaxStartDelay) is not supported yet by sluice\n"
            )
        );
    }
    assert_eq!(c.job_ids(), before);
    let b = c.submit(&["--signal=B:USR1@30", "--wrap", "true"]);
    assert_eq!(c.wait_done(b), "COMPLETED");
    // --switches is implemented now: accepted without a topology (it then has no
    // effect, as in Slurm without a topology plugin).
    let id = c.submit(&["--switches=1", "--wrap", "true"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    // --reservation is implemented now: a directive naming an unknown one reaches the
    // controller and is refused with Slurm's error.
    c.script("resv.sh", "#!/bin/sh\n#SBATCH --reservation=r\ntrue\n");
    let (_, _, err) = c.fails("sbatch", &["resv.sh"]);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Requested reservation is invalid\n"
    );
    assert_eq!(c.job_ids(), vec![b, id]);
}

#[test]
fn a_job_runs_in_submission_order_when_the_node_is_full() {
    // Jobs that do not fit wait as PENDING (Resources/Priority) and start as others end.
    let c = TestCluster::start_with(Setup {
        cpus: 2,
        ..Setup::default()
    });
    c.script(
        "touch.sh",
        "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\n",
    );
    let first = c.submit(&["-n", "2", "touch.sh"]);
    c.wait_state(first, &["RUNNING"], Duration::from_secs(20));
    let second = c.submit(&["-n", "2", "--wrap", "true"]);
    let third = c.submit(&["-n", "1", "--wrap", "true"]);
    // The reasons are set by the first scheduling pass after each submission (as in
    // Slurm, where a new job shows `None` until then): wait for it on a loaded machine.
    let want = [
        format!("{second} PD Resources"),
        format!("{third} PD Priority"),
    ];
    wait_until("the pending reasons", Duration::from_secs(20), || {
        let o = c.ok(
            "squeue",
            &["-h", "-j", &format!("{second},{third}"), "-o", "%i %t %r"],
        );
        want.iter().all(|w| o.contains(w.as_str())).then_some(())
    });
    std::fs::write(c.path("go"), "").unwrap();
    for id in [first, second, third] {
        assert_eq!(c.wait_done(id), "COMPLETED");
    }
}

#[test]
fn jobs_for_nodes_that_have_not_registered_yet_are_accepted_and_wait() {
    // A node that never registers (a remote node whose SSH link cannot come up; the
    // address is loopback, so nothing leaves the machine) has no detected size: jobs
    // for it are accepted and pend, rather than refused as impossible. This is also the
    // window between a controller's start and its local agent's registration, which
    // once refused the very first `sbatch` of a personal controller.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let conf = d.join("sluice.toml");
    std::fs::write(
        &conf,
        format!(
            "state_dir = \"{0}/state\"\nsocket = \"{0}/run/ctld.sock\"\n\
             [[nodes]]\nname = \"{1}\"\ncpus = 2\nmemory = 1000\n\
             [[nodes]]\nname = \"far\"\nssh = \"root@127.0.0.1:1\"\n\
             [[nodes]]\nname = \"farsmall\"\nssh = \"root@127.0.0.1:1\"\ncpus = 2\n\
             [[partitions]]\nname = \"debug\"\nnodes = \"{1}\"\ndefault = true\n\
             [[partitions]]\nname = \"remote\"\nnodes = \"far\"\n\
             [[partitions]]\nname = \"small\"\nnodes = \"farsmall\"\n",
            d.display(),
            sluice::config::short_hostname()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(sluice_bin())
            .args(args)
            .env("SLUICE_CONF", &conf)
            .current_dir(d)
            .output()
            .unwrap()
    };
    let o = run(&["controller"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[
        "sbatch",
        "--parsable",
        "-p",
        "remote",
        "-n",
        "8",
        "--mem=10G",
        "--wrap",
        "true",
    ]);
    let accepted = o.status.success();
    let out = stdout(&o);
    let err = stderr(&o);
    // Declared sizes still decide: 8 tasks never fit 2 declared CPUs.
    let small = run(&["sbatch", "-p", "small", "-n", "8", "--wrap", "true"]);
    let shown = stdout(&run(&["squeue", "-h", "-o", "%P %t"]));
    let _ = run(&["controller", "--stop"]);
    assert!(accepted, "{err}");
    assert!(out.trim().parse::<u32>().is_ok(), "{out}");
    assert_eq!(shown, "remote PD\n");
    assert_eq!(small.status.code(), Some(1));
    assert_eq!(
        stderr(&small),
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
}
