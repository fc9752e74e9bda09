//! Steps and interactive work through the real front-ends (issue 4): srun inside and
//! outside allocations, salloc, per-task environment, live I/O with labels and stdin,
//! exit codes and signals, step cancellation, concurrent steps, squeue -s, scontrol
//! show step, sstat, sacct step rows, and a `--pty` session under tmux.

use crate::harness::*;
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

fn job_of(out: &str, prefix: &str) -> u32 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} line in {out:?}"))
}

#[test]
fn srun_outside_an_allocation_labels_tasks_and_releases_the_job() {
    let c = TestCluster::start();
    let o = c.run(
        "srun",
        &[
            "-n3",
            "-l",
            "sh",
            "-c",
            "echo x$SLURM_PROCID; echo e$SLURM_PROCID >&2; echo job=$SLURM_JOB_ID",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let out = text(&o.stdout);
    let lines = sorted_lines(&out);
    assert!(
        lines.contains(&"0: x0".to_string()) && lines.contains(&"2: x2".to_string()),
        "{out}"
    );
    assert_eq!(lines.iter().filter(|l| l.contains(": x")).count(), 3);
    let err = text(&o.stderr);
    assert!(err.contains("1: e1"), "stderr: {err}");
    // Every task saw the same job, which ended COMPLETED.
    let jobs: std::collections::BTreeSet<&str> =
        out.lines().filter_map(|l| l.split("job=").nth(1)).collect();
    assert_eq!(jobs.len(), 1, "{out}");
    let id: u32 = jobs.iter().next().unwrap().parse().unwrap();
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(10));
    let rows = c.sacct_rows(id, 2);
    assert_eq!(rows[0], format!("{id}|COMPLETED|0:0"));
    assert!(rows.contains(&format!("{id}.0|COMPLETED|0:0")), "{rows:?}");
}

#[test]
fn task_environment_inside_a_batch_job() {
    let c = TestCluster::start();
    let id = c.submit(&["-n3", "-o", "env.out", "--wrap", "srun -n3 --label -c1 env"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("env.out", |s| s.lines().count() > 30);
    let task = |r: u32| -> std::collections::BTreeMap<String, String> {
        out.lines()
            .filter_map(|l| l.trim_start().strip_prefix(&format!("{r}: ")))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (t0, t2) = (task(0), task(2));
    let node = c.node();
    let want = [
        ("SLURM_JOB_ID", id.to_string()),
        ("SLURM_JOBID", id.to_string()),
        ("SLURM_STEP_ID", "0".into()),
        ("SLURM_STEPID", "0".into()),
        ("SLURM_STEP_NUM_TASKS", "3".into()),
        ("SLURM_STEP_NUM_NODES", "1".into()),
        ("SLURM_STEP_NODELIST", node.clone()),
        ("SLURM_STEP_TASKS_PER_NODE", "3".into()),
        ("SLURM_NTASKS", "3".into()),
        ("SLURM_NPROCS", "3".into()),
        ("SLURM_NNODES", "1".into()),
        ("SLURM_NODEID", "0".into()),
        ("SLURM_GTIDS", "0,1,2".into()),
        ("SLURM_LABELIO", "1".into()),
        ("SLURM_DISTRIBUTION", "block".into()),
        ("SLURM_CPUS_PER_TASK", "1".into()),
        ("SLURMD_NODENAME", node.clone()),
        ("ENVIRONMENT", "BATCH".into()),
    ];
    for (k, v) in want {
        assert_eq!(t0.get(k), Some(&v), "{k} in task 0: {t0:?}");
    }
    assert_eq!(t0.get("SLURM_PROCID").map(String::as_str), Some("0"));
    assert_eq!(t2.get("SLURM_PROCID").map(String::as_str), Some("2"));
    assert_eq!(t2.get("SLURM_LOCALID").map(String::as_str), Some("2"));
    for k in [
        "SLURM_TASK_PID",
        "SLURM_LAUNCH_NODE_IPADDR",
        "SLURM_SRUN_COMM_HOST",
        "SLURM_SRUN_COMM_PORT",
        "SLURM_UMASK",
    ] {
        assert!(t0.contains_key(k), "{k} missing: {t0:?}");
    }
    assert_ne!(t0["SLURM_TASK_PID"], t2["SLURM_TASK_PID"]);
}

#[test]
fn steps_are_numbered_recorded_and_carry_exit_codes() {
    let c = TestCluster::start();
    let id = c.submit(&[
        "-o",
        "steps.out",
        "--wrap",
        "srun true; srun -J second sh -c 'exit 7'; echo srun rc=$?; srun sh -c 'kill -SEGV $$'; echo rc3=$?",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("steps.out", |s| s.contains("rc3="));
    assert!(out.contains("srun rc=7"), "{out}");
    assert!(out.contains("rc3=139"), "{out}");
    assert!(
        out.contains(&format!(
            "srun: error: {}: task 0: Exited with exit code 7",
            c.node()
        )),
        "{out}"
    );
    assert!(out.contains("task 0: Segmentation fault"), "{out}");
    let rows = c.sacct_rows(id, 5);
    assert_eq!(
        rows,
        vec![
            format!("{id}|COMPLETED|0:0"),
            format!("{id}.batch|COMPLETED|0:0"),
            format!("{id}.0|COMPLETED|0:0"),
            format!("{id}.1|FAILED|7:0"),
            format!("{id}.2|CANCELLED|0:11"),
        ]
    );
    let o = c.ok(
        "sacct",
        &["-j", &format!("{id}.1"), "-n", "-P", "-o", "JobName"],
    );
    assert_eq!(o.trim(), "second");
    let d = c.ok("scontrol", &["-d", "show", "job", &id.to_string()]);
    assert!(d.contains("DerivedExitCode=7:0"), "{d}");
}

#[test]
fn stdin_goes_to_task_zero_or_where_asked() {
    let c = TestCluster::start();
    let run_with_input = |args: &[&str], input: &str| -> Output {
        let mut child = c
            .cmd("srun")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let o = run_with_input(&["-n2", "-l", "cat"], "hello\nworld\n");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stdout), "0: hello\n0: world\n");
    let o = run_with_input(&["-n2", "-l", "--input=all", "cat"], "x\n");
    assert_eq!(sorted_lines(&text(&o.stdout)), ["0: x", "1: x"]);
    let o = run_with_input(&["-n2", "-l", "--input=1", "cat"], "y\n");
    assert_eq!(text(&o.stdout), "1: y\n");
    let o = run_with_input(&["-n1", "--input=none", "cat"], "z\n");
    assert_eq!(text(&o.stdout), "");
}

#[test]
fn output_patterns_write_one_file_per_task() {
    let c = TestCluster::start();
    let o = c.run(
        "srun",
        &[
            "-n2",
            "-o",
            "t-%j-%t-%s.out",
            "-e",
            "t-%t.err",
            "sh",
            "-c",
            "echo out$SLURM_PROCID; echo err$SLURM_PROCID >&2",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stdout), "");
    let files: Vec<String> = std::fs::read_dir(&c.work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("t-") && n.ends_with("-0-0.out"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let id: u32 = files[0].split('-').nth(1).unwrap().parse().unwrap();
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("t-{id}-1-0.out"))).unwrap(),
        "out1\n"
    );
    assert_eq!(
        std::fs::read_to_string(c.path("t-0.err")).unwrap(),
        "err0\n"
    );
}

#[test]
fn kill_on_bad_exit_and_exit_code_rules() {
    let c = TestCluster::start();
    let start = std::time::Instant::now();
    let o = c.run(
        "srun",
        &[
            "-n2",
            "-K",
            "sh",
            "-c",
            "if [ $SLURM_PROCID = 1 ]; then exit 3; fi; sleep 30; echo survived",
        ],
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "took {:?}",
        start.elapsed()
    );
    assert!(!o.status.success());
    assert!(!text(&o.stdout).contains("survived"));
    let err = text(&o.stderr);
    assert!(err.contains("task 1: Exited with exit code 3"), "{err}");
    let o = c.run("srun", &["-n2", "sh", "-c", "exit $((SLURM_PROCID + 4))"]);
    assert_eq!(o.status.code(), Some(5));
    let o = c.run("srun", &["/nonexistent/binary"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(text(&o.stderr).contains("execve(): /nonexistent/binary: No such file or directory"));
}

#[test]
fn cpu_binding_pins_each_task_and_distribution_is_reported() {
    let c = TestCluster::start();
    let o = c.run(
        "srun",
        &["-n2", "-l", "-m", "cyclic", "--cpu-bind=verbose,cores", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo dist=$SLURM_DISTRIBUTION bind=$SLURM_CPU_BIND_TYPE"],
    );
    assert!(o.status.success(), "{o:?}");
    let out = text(&o.stdout);
    let lists: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split("Cpus_allowed_list:").nth(1))
        .map(str::trim)
        .collect();
    assert_eq!(lists.len(), 2, "{out}");
    assert!(
        !lists[0].contains(['-', ',']) && !lists[1].contains(['-', ',']),
        "{out}"
    );
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if online > 1 {
        assert_ne!(lists[0], lists[1], "tasks share a CPU: {out}");
    }
    assert!(out.contains("dist=cyclic bind=mask_cpu:"), "{out}");
    let err = text(&o.stderr);
    assert!(
        err.contains("cpu-bind=MASK - ") && err.contains(" set"),
        "{err}"
    );
    // Without --cpu-bind tasks are not pinned.
    let o = c.run("srun", &["-n1", "sh", "-c", "echo ${SLURM_CPU_BIND-unset}"]);
    assert_eq!(text(&o.stdout), "unset\n");
}

#[test]
fn signals_reach_the_tasks_and_two_interrupts_end_the_step() {
    let c = TestCluster::start();
    c.script(
        "trap.sh",
        "#!/bin/sh\ntrap 'echo got-usr1' USR1\necho ready\nwhile :; do sleep 0.1; done\n",
    );
    let child = c
        .cmd("srun")
        .args(["-n1", "-u", "./trap.sh"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Wait for the task to be up: its step shows in squeue -s.
    wait_until("running step", Duration::from_secs(20), || {
        let o = c.run("squeue", &["-h", "-s", "-o", "%i"]);
        text(&o.stdout).contains(".0").then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(out.contains("got-usr1"), "stdout: {out} stderr: {err}");
    assert!(
        err.contains("interrupt (one more within 1 sec to abort)"),
        "{err}"
    );
    assert!(err.contains("task 0: running"), "{err}");
    assert!(err.contains("sending Ctrl-C to StepId="), "{err}");
    assert!(!o.status.success());
}

#[test]
fn scancel_of_one_step_leaves_the_job_running() {
    let c = TestCluster::start();
    let id = c.submit(&[
        "-o",
        "cancel.out",
        "--wrap",
        "srun sleep 60; echo after rc=$?; srun true",
    ]);
    wait_until("step 0", Duration::from_secs(20), || {
        let o = c.run(
            "squeue",
            &["-h", "-s", "-j", &id.to_string(), "-o", "%i %j"],
        );
        text(&o.stdout)
            .contains(&format!("{id}.0 sleep"))
            .then_some(())
    });
    let show = c.ok("scontrol", &["show", "step", &format!("{id}.0")]);
    assert!(show.starts_with(&format!("StepId={id}.0 ")), "{show}");
    assert!(
        show.contains("State=RUNNING") && show.contains("Tasks=1 Name=sleep"),
        "{show}"
    );
    c.ok("scancel", &[&format!("{id}.0")]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("cancel.out", |s| s.contains("after rc="));
    assert!(!out.contains("after rc=0"), "{out}");
    assert!(out.contains(&format!("*** STEP {id}.0 ON")), "{out}");
    let rows = c.sacct_rows(id, 4);
    assert!(rows.contains(&format!("{id}.0|CANCELLED|0:15")), "{rows:?}");
    assert!(rows.contains(&format!("{id}.1|COMPLETED|0:0")), "{rows:?}");
}

#[test]
fn concurrent_steps_share_the_allocation_and_a_third_waits() {
    let c = TestCluster::start();
    // 4 CPUs: two --exact steps of 2 CPUs run at once; a third waits for one of them.
    let id = c.submit(&[
        "-n4",
        "-o",
        "conc.out",
        "--wrap",
        "srun -n2 --exact sleep 3 & srun -n2 --exact sleep 3 & sleep 1; srun -n1 --exact echo third; wait",
    ]);
    let both = wait_until("two steps at once", Duration::from_secs(20), || {
        let o = c.run("squeue", &["-h", "-s", "-j", &id.to_string(), "-o", "%i"]);
        let s = text(&o.stdout);
        (s.contains(&format!("{id}.0")) && s.contains(&format!("{id}.1"))).then_some(s)
    });
    assert!(both.contains(".batch"), "{both}");
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("conc.out", |s| s.contains("third"));
    assert!(
        out.contains(&format!(
            "srun: Job {id} step creation temporarily disabled, retrying (Requested nodes are busy)"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("srun: Step created for StepId={id}.2")),
        "{out}"
    );
    // Without --exact a step takes all of the job's CPUs; --overlap never waits.
    let id = c.submit(&[
        "-n2",
        "-o",
        "ovl.out",
        "--wrap",
        "srun sleep 2 & sleep 0.5; srun --overlap echo overlapped; wait",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("ovl.out", |s| s.contains("overlapped"));
    assert!(!out.contains("temporarily disabled"), "{out}");
}

#[test]
fn srun_waits_for_resources_when_the_node_is_full() {
    let c = TestCluster::start();
    let hog = c.submit(&["-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(hog, &["RUNNING"], Duration::from_secs(20));
    let child = c
        .cmd("srun")
        .args(["-n1", "echo", "finally"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    c.ok("scancel", &[&hog.to_string()]);
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(text(&o.stdout), "finally\n");
    let id = job_of(&err, "srun: job ");
    assert!(
        err.contains(&format!("srun: job {id} queued and waiting for resources")),
        "{err}"
    );
    assert!(
        err.contains(&format!("srun: job {id} has been allocated resources")),
        "{err}"
    );
}

#[test]
fn salloc_runs_a_command_in_a_new_allocation() {
    let c = TestCluster::start();
    let o = c.run(
        "salloc",
        &["-n2", "sh", "-c", "echo jid=$SLURM_JOB_ID name=$SLURM_JOB_NAME ntasks=$SLURM_NTASKS procid=${SLURM_PROCID-unset}; srun -l sh -c 'echo r$SLURM_PROCID=$SLURM_JOB_ID'"],
    );
    assert!(o.status.success(), "{o:?}");
    let out = text(&o.stdout);
    let id = job_of(&out.replace("jid=", "\njid="), "jid=");
    assert!(
        out.contains("name=interactive ntasks=2 procid=unset"),
        "{out}"
    );
    assert!(
        out.contains(&format!("0: r0={id}")) && out.contains(&format!("1: r1={id}")),
        "{out}"
    );
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("salloc: Granted job allocation {id}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("salloc: Relinquishing job allocation {id}")),
        "{err}"
    );
    // Giving the allocation back is no revocation (Slurm prints only "Relinquishing").
    assert!(!err.contains("has been revoked"), "{err}");
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(10));
    let o = c.run("salloc", &["-n1", "sh", "-c", "exit 4"]);
    assert_eq!(o.status.code(), Some(4));
    let id = job_of(&text(&o.stderr), "salloc: Granted job allocation ");
    c.wait_state(id, &["FAILED"], Duration::from_secs(10));
}

#[test]
fn a_killed_salloc_gives_its_allocation_back_and_scancel_revokes_it() {
    let c = TestCluster::start();
    let mut child = c
        .cmd("salloc")
        .args(["-n1", "sleep", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_until("salloc job", Duration::from_secs(20), || {
        let o = c.run(
            "squeue",
            &["-h", "-t", "R", "-n", "interactive", "-o", "%i"],
        );
        text(&o.stdout).trim().parse::<u32>().ok()
    });
    child.kill().unwrap();
    child.wait().unwrap();
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(10));
    // scancel of a salloc's job ends the command.
    let child = c
        .cmd("salloc")
        .args(["-n1", "sleep", "60"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = wait_until("second salloc job", Duration::from_secs(20), || {
        let o = c.run(
            "squeue",
            &["-h", "-t", "R", "-n", "interactive", "-o", "%i"],
        );
        text(&o.stdout).trim().parse::<u32>().ok()
    });
    c.ok("scancel", &[&id.to_string()]);
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains(&format!("salloc: Job allocation {id} has been revoked.")),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn salloc_no_shell_leaves_an_allocation_that_srun_jobid_uses_until_scancel() {
    let c = TestCluster::start();
    let o = c.run("salloc", &["--no-shell", "-n2", "-J", "kept"]);
    assert!(o.status.success(), "{o:?}");
    let id = job_of(&text(&o.stderr), "salloc: Granted job allocation ");
    // salloc has exited; the allocation is still running.
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    let out = c.ok(
        "srun",
        &[
            "--jobid",
            &id.to_string(),
            "-n2",
            "-l",
            "sh",
            "-c",
            "echo in=$SLURM_JOB_ID",
        ],
    );
    assert!(
        out.contains(&format!("0: in={id}")) && out.contains(&format!("1: in={id}")),
        "{out}"
    );
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    c.ok("scancel", &[&id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(10));
}

#[test]
fn sstat_reports_a_running_step() {
    let c = TestCluster::start();
    let id = c.submit(&[
        "-n2",
        "-o",
        "/dev/null",
        "--wrap",
        "srun -n2 sh -c 'head -c 20000000 /dev/zero | tail -c 1 >/dev/null; sleep 30'",
    ]);
    let row = wait_until("sstat row", Duration::from_secs(20), || {
        let o = c.run(
            "sstat",
            &[
                "-j",
                &id.to_string(),
                "-n",
                "-P",
                "-o",
                "JobID,NTasks,MaxRSS,MaxRSSNode,AveCPU",
            ],
        );
        let s = text(&o.stdout);
        s.starts_with(&format!("{id}.0|2|")).then_some(s)
    });
    let f: Vec<&str> = row.trim().split('|').collect();
    let rss: u64 = f[2].trim_end_matches('K').parse().unwrap();
    assert!(rss > 0, "{row}");
    assert_eq!(f[3], c.node());
    let o = c.run("sstat", &["-j", &format!("{id}.7"), "-n"]);
    assert!(text(&o.stderr).contains(&format!("no steps running for job {id}")));
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
}

#[test]
fn pty_session_under_tmux() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipping: tmux is not installed");
        return;
    }
    let c = TestCluster::start();
    let sock = format!("sluice-test-{}", std::process::id());
    let launcher = c.script(
        "pty.sh",
        &format!(
            "#!/bin/sh\nexport SLUICE_CONF={}\nexport PATH={}:/usr/bin:/bin\ncd {}\nexec srun --pty sh\n",
            c.conf.display(),
            c.bin.display(),
            c.work.display()
        ),
    );
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &sock, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = tmux(&[
        "new-session",
        "-d",
        "-x",
        "100",
        "-y",
        "30",
        &launcher.to_string_lossy(),
    ]);
    assert!(o.status.success(), "{o:?}");
    let pane = || text(&tmux(&["capture-pane", "-p"]).stdout);
    // The shell is interactive on a terminal: it has a prompt and `tty` names a pty.
    tmux(&[
        "send-keys",
        "tty; echo pty-task-$SLURM_PROCID-$((6*7))",
        "Enter",
    ]);
    let screen = wait_until("pty output", Duration::from_secs(20), || {
        let p = pane();
        p.contains("pty-task-0-42").then_some(p)
    });
    assert!(screen.contains("/dev/pts/"), "{screen}");
    tmux(&["send-keys", "stty size", "Enter"]);
    // The pane's size (the window less tmux's status line) reached the task's pty.
    wait_until("terminal size", Duration::from_secs(10), || {
        pane()
            .lines()
            .any(|l| l.trim() == "29 100" || l.trim() == "30 100")
            .then_some(())
    });
    tmux(&["send-keys", "exit", "Enter"]);
    wait_until("srun --pty to end", Duration::from_secs(20), || {
        (!tmux(&["has-session"]).status.success()).then_some(())
    });
    let _ = tmux(&["kill-server"]);
}

#[test]
fn nothing_a_step_started_outlives_it() {
    let c = TestCluster::start();
    c.script(
        "daemon.sh",
        "#!/bin/sh\necho $$ > daemon.pid.tmp; mv daemon.pid.tmp daemon.pid\nexec sleep 300\n",
    );
    // The task starts a daemon in a session of its own and returns once it runs.
    let o = c.run(
        "srun",
        &["sh", "-c", "setsid ./daemon.sh >/dev/null 2>&1 </dev/null & while [ ! -f daemon.pid ]; do sleep 0.05; done; echo started"],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stdout), "started\n");
    let pid: i32 = std::fs::read_to_string(c.path("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_until("the daemon to be gone", Duration::from_secs(15), || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for its (new) parent to reap it.
        (stat.is_empty()
            || stat
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z')))
        .then_some(())
    });
}

#[test]
fn ctrl_c_while_waiting_for_an_allocation_revokes_it() {
    let c = TestCluster::start();
    let hog = c.submit(&["-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(hog, &["RUNNING"], Duration::from_secs(20));
    for (prog, args, want) in [
        (
            "srun",
            vec!["-n1", "echo", "never"],
            "srun: Job allocation {id} has been revoked\n",
        ),
        (
            "salloc",
            vec!["-n1", "echo", "never"],
            "salloc: Job allocation {id} has been revoked.\nsalloc: Job aborted due to signal\n",
        ),
    ] {
        let child = c
            .cmd(prog)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        // The request is queued: a pending job besides the hog.
        let id = wait_until("pending allocation", Duration::from_secs(20), || {
            let o = c.run("squeue", &["-h", "-t", "PD", "-o", "%i"]);
            text(&o.stdout).trim().parse::<u32>().ok()
        });
        std::thread::sleep(Duration::from_millis(300));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{prog}: {err}");
        assert!(
            err.ends_with(&want.replace("{id}", &id.to_string())),
            "{prog}: {err}"
        );
        assert!(!text(&o.stdout).contains("never"));
        assert_eq!(c.wait_done(id), "CANCELLED", "{prog}");
    }
    assert_eq!(c.state(hog).as_deref(), Some("RUNNING"));
}

#[test]
fn cpu_bind_modes_use_the_steps_allocated_cpus() {
    let c = TestCluster::start();
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let allowed = |out: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter_map(|l| l.split("Cpus_allowed_list:").nth(1))
            .map(|s| s.trim().to_string())
            .collect();
        v.sort();
        v
    };
    // map_cpu and mask_cpu: as given, with task/affinity's verbose lines.
    let o = c.run(
        "srun",
        &["-n2", "-l", "--cpu-bind=verbose,map_cpu:0,0", "sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo $SLURM_CPU_BIND_TYPE$SLURM_CPU_BIND_LIST"],
    );
    assert!(o.status.success(), "{o:?}");
    let out = text(&o.stdout);
    assert_eq!(allowed(&out), ["0", "0"], "{out}");
    assert!(out.contains("0: map_cpu:0"), "{out}");
    let err = text(&o.stderr);
    let node = c.node();
    for t in 0..2 {
        let want = format!("cpu-bind=MAP  - {node}, task  {t}  {t} [");
        assert!(err.contains(&want), "{err}");
    }
    assert!(err.contains("]: mask 0x1 set"), "{err}");
    let o = c.run(
        "srun",
        &[
            "-n1",
            "--cpu-bind=verbose,mask_cpu:0x1",
            "grep",
            "Cpus_allowed_list",
            "/proc/self/status",
        ],
    );
    assert_eq!(allowed(&text(&o.stdout)), ["0"]);
    assert!(text(&o.stderr).contains("cpu-bind=MASK - "), "{o:?}");
    // none + verbose: reported, not bound.
    let o = c.run("srun", &["-n1", "--cpu-bind=verbose,none", "true"]);
    let err = text(&o.stderr);
    assert!(
        err.contains("cpu-bind=NONE - ") && !err.contains(" set"),
        "{err}"
    );
    // Bad lists are refused as Slurm does.
    let (code, e) = c.fails_err("srun", &["--cpu-bind=map_cpu:x", "true"]);
    assert_eq!(code, 255);
    assert!(e.contains("--cpu-bind"), "{e}");
    if online < 2 {
        return;
    }
    // Two --exact steps of a two-CPU job bind to the job's two different CPUs (each
    // step's own allocated id, not CPU 0 for both).
    c.script(
        "two.sh",
        "#!/bin/sh\nfor i in 1 2; do srun -n1 --exact --cpu-bind=threads sh -c 'grep Cpus_allowed_list /proc/self/status; sleep 2' & done\nwait\n",
    );
    let id = c.submit(&["-n2", "-o", "two.out", "two.sh"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = std::fs::read_to_string(c.path("two.out")).unwrap();
    let lists = allowed(&out);
    assert_eq!(lists.len(), 2, "{out}");
    assert_ne!(lists[0], lists[1], "both steps on one CPU: {out}");
    // Ranks and ldoms bind each task to one place within the step.
    let o = c.run(
        "srun",
        &[
            "-n2",
            "--cpu-bind=rank",
            "grep",
            "Cpus_allowed_list",
            "/proc/self/status",
        ],
    );
    let l = allowed(&text(&o.stdout));
    assert_eq!(l.len(), 2);
    assert_ne!(l[0], l[1], "{l:?}");
    let o = c.run(
        "srun",
        &[
            "-n1",
            "--cpu-bind=ldoms",
            "grep",
            "Cpus_allowed_list",
            "/proc/self/status",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(allowed(&text(&o.stdout)).len(), 1);
}

/// `--cpu-bind=map_cpu`/`mask_cpu` naming a CPU the step does not have fails the
/// launch as in Slurm (task/affinity's check): srun prints the allocated mask and the
/// launch error, no task runs, the step is FAILED and srun exits 1.
#[test]
fn cpu_bind_outside_the_step_fails_the_launch() {
    let c = TestCluster::start();
    let node = c.node();
    for (n, bind) in [(0, "map_cpu:99"), (1, "verbose,mask_cpu:0x100")] {
        let o = c.run(
            "srun",
            &["-n1", &format!("--cpu-bind={bind}"), "touch", "ran"],
        );
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        assert_eq!(text(&o.stdout), "");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 4, "{err}");
        assert!(
            lines[0].starts_with(
                "srun: error: CPU binding outside of job step allocation, allocated CPUs are: 0x"
            ) && lines[0].ends_with('.'),
            "{err}"
        );
        let id = *c.job_ids().iter().max().unwrap();
        assert_eq!(
            &lines[1..],
            [
                format!(
                    "srun: error: Task launch for StepId={id}.0 failed on node {node}: \
                     Unable to satisfy cpu bind request"
                )
                .as_str(),
                "srun: error: Application launch failed: Unable to satisfy cpu bind request",
                "srun: Job step aborted",
            ],
            "bind {n}: {err}"
        );
        assert!(!c.path("ran").exists());
        let acct = c.ok(
            "sacct",
            &["-n", "-P", "-j", &format!("{id}.0"), "-o", "State,ExitCode"],
        );
        assert_eq!(acct.trim(), "FAILED|1:0", "{acct}");
    }
}

/// `srun -Z -w NODE` (root, or the controller's user): the tasks run on the node
/// outside any job: nothing is queued or recorded, and the scheduler's view of the
/// node is untouched (a job asking for all of it starts meanwhile). Without `-w` it is
/// refused as srun refuses it.
#[test]
fn no_allocate_runs_on_the_named_node_without_a_job() {
    let c = TestCluster::start();
    let node = c.node();
    let o = c.run(
        "srun",
        &[
            "-Z",
            "-w",
            &node,
            "-n2",
            "-l",
            "sh",
            "-c",
            "echo id=$SLURM_JOB_ID step=$SLURM_STEP_ID",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let mut lines: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    lines.sort();
    let id = 0xffff_0000u32;
    assert_eq!(
        lines,
        [format!("0: id={id} step=0"), format!("1: id={id} step=0")]
    );
    assert_eq!(text(&o.stderr), "srun: do not allocate resources\n");
    assert!(c.job_ids().is_empty());
    assert_eq!(c.ok("sacct", &["-n", "-X", "-o", "JobID"]), "");
    // While one runs, a job that needs every CPU of the node starts.
    let mut z = c.cmd("srun");
    z.args([
        "-Z",
        "-w",
        &node,
        "sh",
        "-c",
        "touch z.ready; sleep 3; echo z-done",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let z = z.spawn().unwrap();
    c.wait_file("z.ready", |_| true);
    let all = c.submit(&["-n4", "--wrap", "true"]);
    assert_eq!(c.wait_done(all), "COMPLETED");
    let out = z.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "z-done\n");
    assert_eq!(c.job_ids(), vec![all]);
    let (code, _, err) = c.fails("srun", &["-Z", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "srun: error: must specify a node list with -Z, --no-allocate.\n"
    );
}
