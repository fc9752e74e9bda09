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

/// Submits a job that appends a line to `ran.txt`, with the controller armed to kill
/// itself at `failpoint`; restarts it once it has, and returns sbatch's answer and the
/// cluster. sbatch runs in the background, since it waits for the controller to return.
fn submit_through_a_crash(failpoint: &str) -> (TestCluster, u32) {
    let mut c = TestCluster::start_with(Setup {
        env: vec![("SLUICE_FAILPOINTS".into(), failpoint.into())],
        ..Default::default()
    });
    let sbatch = c
        .cmd("sbatch")
        .args([
            "--parsable",
            "-o",
            "/dev/null",
            "--wrap",
            "echo ran >> ran.txt",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the failpoint", Duration::from_secs(30), || {
        c.controller_log()
            .contains(&format!("failpoint {failpoint}"))
            .then_some(())
    });
    c.kill9_controller();
    c.set_controller_env("SLUICE_FAILPOINTS", None);
    c.start_controller();
    let out = sbatch.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sbatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (c, id)
}

/// The invariants of issue #25 after one crash: the job sbatch reported exists once,
/// ran exactly once, and its id is not given again.
fn check_one_job_ran_once(c: &TestCluster, id: u32) {
    assert_eq!(c.wait_done(id), "COMPLETED");
    let ran = std::fs::read_to_string(c.path("ran.txt")).unwrap_or_default();
    assert_eq!(ran, "ran\n", "the job must run exactly once");
    assert_eq!(c.job_ids(), vec![id], "exactly one job was made");
    let next = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    assert!(next > id, "id {next} given again after {id}");
}

/// The controller dies after saving a submission but before answering it: sbatch
/// sends the same submission again to the restarted controller and reports the job
/// that was made, which runs once (before, sbatch said the submission failed while
/// the job ran anyway).
#[test]
fn a_submission_whose_answer_was_lost_is_reported_once_and_runs_once() {
    let (c, id) = submit_through_a_crash("submit-after-commit");
    check_one_job_ran_once(&c, id);
    assert!(
        c.controller_log().contains("submission retried"),
        "{}",
        c.controller_log()
    );
}

/// The controller dies after the scheduler started a job but before that was saved:
/// the node never heard of the launch, so the restarted controller starts the job
/// once (before, the launch went out first and the job could run twice).
#[test]
fn a_launch_is_sent_only_after_it_is_saved() {
    let (c, id) = submit_through_a_crash("launch-before-commit");
    check_one_job_ran_once(&c, id);
}

/// A small deterministic generator (xorshift64*) for the crash schedule, so that a
/// failing run can be replayed from the seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The crash-injection harness of issue #25, in bounded form: rounds of submissions,
/// each ended by the controller dying (`kill -9`) at a random instant or at one of the
/// failpoints around the commits of submissions and launches, then a restart. At the
/// end every invariant is checked: each job sbatch acknowledged exists once and ran
/// exactly once with the outcome its script chose; no id was given twice; no
/// submission sbatch reported as failed ran; no job exists that nobody was told of.
///
/// `SLUICE_CRASHES` sets the number of crashes (default 40; CI runs 200) and
/// `SLUICE_CRASH_SEED` replays a schedule.
#[test]
fn crashes_lose_duplicate_or_misreport_nothing() {
    use std::collections::{HashMap, HashSet};
    let crashes: u64 = std::env::var("SLUICE_CRASHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("SLUICE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash harness: {crashes} crashes, SLUICE_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let mut c = TestCluster::start_with(Setup {
        cpus: 8,
        min_job_age: 100_000,
        ..Default::default()
    });
    c.script(
        "job.sh",
        "#!/bin/sh\necho \"$1 $SLURM_JOB_ID\" >> runs.txt\nexit $2\n",
    );
    const POINTS: [&str; 7] = [
        "launch-unstarted",
        "submit-before-commit",
        "submit-after-commit",
        "launch-before-commit",
        "launch-after-commit",
        "end-before-commit",
        "end-after-commit",
    ];
    // (tag, expected exit code, sbatch process)
    let mut subs: Vec<(String, i32, std::process::Child)> = Vec::new();
    let mut kinds: HashMap<&str, u64> = HashMap::new();
    // Each round starts its own controller, with that round's failpoint armed.
    c.kill9_controller();
    for round in 0..crashes {
        // Half the rounds die at a failpoint, half at a random instant.
        let point = (rng.below(2) == 0).then(|| POINTS[rng.below(POINTS.len() as u64) as usize]);
        c.set_controller_env("SLUICE_FAILPOINTS", point);
        c.spawn_controller_nowait();
        // It answers, or dies at its failpoint while it starts (recording the ends of
        // jobs that finished while it was down, say).
        let sock = c.dir.path().join("run/ctld.sock");
        let hits = |c: &TestCluster, p: &str| {
            c.controller_log()
                .matches(&format!("failpoint {p}"))
                .count() as u64
        };
        let until = std::time::Instant::now() + Duration::from_secs(60);
        let died_starting = loop {
            if let Some(p) = point
                && hits(&c, p) > *kinds.get(p).unwrap_or(&0)
            {
                break true;
            }
            if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
                break false;
            }
            if std::time::Instant::now() > until {
                let log = c.controller_log();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                panic!(
                    "round {round}: the controller did not start ({point:?}); its log ends:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if died_starting {
            let p = point.unwrap_or_default();
            kinds.insert(p, hits(&c, p));
            c.kill9_controller();
            continue;
        }
        let burst = 1 + rng.below(4);
        for k in 0..burst {
            let code = if rng.below(4) == 0 { 3 } else { 0 };
            let tag = format!("r{round}k{k}");
            let child = c
                .cmd("sbatch")
                .args(["--parsable", "-o", "/dev/null", "-J", &tag, "job.sh"])
                .args([&tag, &code.to_string()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            subs.push((tag, code, child));
        }
        match point {
            Some(p) => {
                // The point may not be reached (no launch this round): then a plain kill.
                let end = std::time::Instant::now() + Duration::from_secs(5);
                while std::time::Instant::now() < end {
                    let now = hits(&c, p);
                    if now > *kinds.get(p).unwrap_or(&0) {
                        kinds.insert(p, now);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            None => std::thread::sleep(Duration::from_millis(rng.below(400))),
        }
        c.kill9_controller();
    }
    c.set_controller_env("SLUICE_FAILPOINTS", None);
    c.start_controller();
    eprintln!("crash harness: failpoints reached {kinds:?}");

    let mut acked: HashMap<u32, (String, i32)> = HashMap::new();
    let mut failed: HashSet<String> = HashSet::new();
    for (tag, code, child) in subs {
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            let before = acked.insert(id, (tag.clone(), code));
            assert!(before.is_none(), "id {id} given to {tag} and {before:?}");
        } else {
            eprintln!(
                "sbatch for {tag} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            failed.insert(tag);
        }
    }
    for (&id, (tag, code)) in &acked {
        let want = if *code == 0 { "COMPLETED" } else { "FAILED" };
        let got = c.wait_done(id);
        if got != want {
            let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
            let acct = c.ok(
                "sacct",
                &[
                    "-j",
                    &id.to_string(),
                    "-D",
                    "-P",
                    "-o",
                    "JobID,State,ExitCode,Reason,NodeList",
                ],
            );
            let runs = std::fs::read_to_string(c.path("runs.txt")).unwrap_or_default();
            let log: Vec<String> = c
                .controller_log()
                .lines()
                .filter(|l| {
                    l.contains(&format!("job_id={id}")) || l.contains(&format!("JobId={id} "))
                })
                .map(String::from)
                .collect();
            panic!(
                "job {id} ({tag}) ended {got}, not {want}\n{show}\n{acct}\nruns: {:?}\nlog:\n{}",
                runs.lines()
                    .filter(|l| l.starts_with(&format!("{tag} ")))
                    .collect::<Vec<_>>(),
                log.join("\n")
            );
        }
        assert_eq!(c.show_field(id, "JobName"), *tag, "job {id}");
    }
    let runs = std::fs::read_to_string(c.path("runs.txt")).unwrap_or_default();
    let mut ran: HashMap<String, Vec<u32>> = HashMap::new();
    for l in runs.lines() {
        let (tag, id) = l.split_once(' ').unwrap();
        ran.entry(tag.to_string())
            .or_default()
            .push(id.parse().unwrap());
    }
    for (&id, (tag, _)) in &acked {
        assert_eq!(
            ran.get(tag),
            Some(&vec![id]),
            "{tag} (job {id}) must run once"
        );
    }
    for tag in &failed {
        assert!(!ran.contains_key(tag), "{tag} was reported failed but ran");
    }
    let mut known = c.job_ids();
    known.sort_unstable();
    let mut told: Vec<u32> = acked.keys().copied().collect();
    told.sort_unstable();
    assert_eq!(
        known, told,
        "jobs nobody was told of, or acknowledged jobs lost"
    );
    eprintln!(
        "crash harness: {crashes} crashes, {} acknowledged, {} failed, 0 lost, 0 duplicated",
        acked.len(),
        failed.len()
    );
}

/// The pid of the stepd supervising batch job `id`, from the spool directory.
fn stepd_pid(c: &TestCluster, id: u32) -> i32 {
    let want = format!("job_{id}");
    let find = || -> Option<i32> {
        let mut dirs = vec![c.dir.path().join("spool")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).ok()?.flatten() {
                let p = e.path();
                if p.is_dir() {
                    if e.file_name() == want.as_str() {
                        return std::fs::read_to_string(p.join("stepd.pid"))
                            .ok()?
                            .trim()
                            .parse()
                            .ok();
                    }
                    dirs.push(p);
                }
            }
        }
        None
    };
    wait_until("stepd pid", Duration::from_secs(20), find)
}

/// A stepd killed outright ends its job FAILED at once, keeps the output written so
/// far, and says in the job's output and the controller's log what happened; a job
/// that asked for `--requeue` goes back to the queue and runs again (issue #25).
#[test]
fn a_killed_stepd_fails_its_job_at_once_or_requeues_it() {
    let c = TestCluster::start();
    let script = "#!/bin/sh\necho \"run $SLURM_RESTART_COUNT\"\nif [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then sleep 60; fi\n";
    c.script("long.sh", script);
    let plain = c.submit(&["-o", "plain.out", "long.sh"]);
    let again = c.submit(&[
        "--requeue",
        "-o",
        "again.out",
        "--open-mode=append",
        "long.sh",
    ]);
    for (id, out) in [(plain, "plain.out"), (again, "again.out")] {
        c.wait_file(out, |s| s.contains("run"));
        let pid = stepd_pid(&c, id);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    assert_eq!(c.wait_done(plain), "FAILED");
    let out = c.wait_file("plain.out", |s| s.contains("STEPD"));
    assert!(
        out.starts_with("run \n") || out.starts_with("run\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("error: *** JOB {plain} ON "))
            && out.contains("DUE TO THE DEATH OF ITS STEPD ***"),
        "{out}"
    );
    assert!(
        c.controller_log()
            .contains(&format!("stepd of job {plain}"))
    );
    // The requeued one runs a second time and completes.
    let out = c.wait_file("again.out", |s| s.contains("run 1"));
    assert!(out.contains("DUE TO THE DEATH OF ITS STEPD"), "{out}");
    assert_eq!(c.wait_done(again), "COMPLETED");
    assert_eq!(c.show_field(again, "Restarts"), "1");
}

/// The controller (with its in-process agent) dies after the agent wrote a job's launch
/// record but before it started the job's stepd: the restarted agent starts that stepd,
/// and the job runs once and completes (before, it waited 30 s and ended FAILED 0:53,
/// a launch failure for a job that never ran, as the crash harness found).
#[test]
fn a_launch_left_unstarted_by_a_dying_agent_runs_once() {
    let (c, id) = submit_through_a_crash("launch-unstarted");
    check_one_job_ran_once(&c, id);
}

/// srun outside a job makes its own allocation and does not outlive its connection to
/// the controller. After a controller restart that allocation is ended (cancelled, its
/// step stopped on the node, its CPUs given back) instead of staying RUNNING for good;
/// a detached salloc allocation is kept.
#[test]
fn a_restart_ends_the_allocation_of_an_srun_that_did_not_survive_it() {
    let mut c = TestCluster::start();
    let mut srun = c
        .cmd("srun")
        .args(["-J", "orphan", "sleep", "300"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_until("srun's job running", Duration::from_secs(20), || {
        let out = c.ok("squeue", &["-h", "-n", "orphan", "-t", "R", "-o", "%i"]);
        out.trim().parse::<u32>().ok()
    });
    let o = c.run("salloc", &["--no-shell", "-n1", "-J", "kept"]);
    assert!(o.status.success(), "{}", stderr(&o));
    c.kill9_controller();
    // srun gives up on the lost controller.
    let status = srun.wait().unwrap();
    assert!(!status.success());
    c.start_controller();
    assert_eq!(c.wait_done(id), "CANCELLED");
    assert_eq!(
        c.ok("squeue", &["-h", "-n", "kept", "-o", "%T"]),
        "RUNNING\n"
    );
    // Its CPU is free again: a job asking for every CPU of the node runs.
    let all = c.ok("sinfo", &["-h", "-o", "%c"]);
    let next = c.submit(&["-n", all.trim(), "-o", "/dev/null", "--wrap", "true"]);
    c.ok("scancel", &["-n", "kept"]);
    assert_eq!(c.wait_done(next), "COMPLETED");
}
