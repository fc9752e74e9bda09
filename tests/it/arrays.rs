//! Job arrays through the real front-ends: task environment and files, ids, squeue's
//! collapsed and expanded forms, per-task scancel/scontrol, throttles, sacct rows.

use crate::harness::*;
use std::time::Duration;

/// Lines of `scontrol -o show job ID`: (JobId, ArrayTaskId, JobState) per record.
fn records(c: &TestCluster, id: &str) -> Vec<(String, String, String)> {
    let out = c.run("scontrol", &["-o", "show", "job", id]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")).map(str::to_string))
                    .unwrap_or_default()
            };
            (f("JobId"), f("ArrayTaskId"), f("JobState"))
        })
        .collect()
}

/// Waits until the array shows `n` records, all finished.
fn wait_all_done(c: &TestCluster, id: u32, n: usize) -> Vec<(String, String, String)> {
    wait_until(
        &format!("{n} finished records of array {id}"),
        Duration::from_secs(60),
        || {
            let r = records(c, &id.to_string());
            let done = r
                .iter()
                .all(|x| ["COMPLETED", "FAILED", "CANCELLED"].contains(&x.2.as_str()));
            (r.len() >= n && done).then_some(r)
        },
    )
}

fn squeue_ids(c: &TestCluster, args: &[&str]) -> String {
    let mut a = vec!["-h", "-o", "%i"];
    a.extend_from_slice(args);
    c.ok("squeue", &a)
}

#[test]
fn tasks_get_their_environment_files_and_ids() {
    let c = TestCluster::start();
    c.script(
        "env.sh",
        "#!/bin/sh\nenv | grep -E '^SLURM_(ARRAY|JOB_ID)' | sort\n",
    );
    let a = c.submit(&["--array=0-3%2", "env.sh"]);
    let recs = wait_all_done(&c, a, 4);
    assert!(recs.iter().all(|r| r.2 == "COMPLETED"), "{recs:?}");
    // The master id is the last task to start; the others got new ids in task order.
    let id_of = |t: &str| recs.iter().find(|r| r.1 == t).unwrap().0.clone();
    assert_eq!(id_of("3"), a.to_string());
    assert_eq!(id_of("0"), (a + 1).to_string());
    let out = c.wait_file(&format!("slurm-{a}_2.out"), |s| s.contains("TASK_MAX"));
    let want = format!(
        "SLURM_ARRAY_JOB_ID={a}\nSLURM_ARRAY_TASK_COUNT=4\nSLURM_ARRAY_TASK_ID=2\n\
         SLURM_ARRAY_TASK_MAX=3\nSLURM_ARRAY_TASK_MIN=0\nSLURM_ARRAY_TASK_STEP=1\n\
         SLURM_JOB_ID={}\n",
        id_of("2")
    );
    assert_eq!(out, want);
    // scontrol and sacct know each task by `A_i`.
    let l = c.ok("scontrol", &["-o", "show", "job", &format!("{a}_2")]);
    assert!(
        l.starts_with(&format!(
            "JobId={} ArrayJobId={a} ArrayTaskId=2 ArrayTaskThrottle=2 JobName=env.sh ",
            id_of("2")
        )),
        "{l}"
    );
    assert!(l.contains(&format!("StdOut={}/slurm-{a}_2.out", c.work.display())));
    let acct = c.ok(
        "sacct",
        &[
            "-j",
            &a.to_string(),
            "-X",
            "-n",
            "-P",
            "-o",
            "JobID,JobIDRaw,State",
        ],
    );
    let want: String = (0..4)
        .map(|t| format!("{a}_{t}|{}|COMPLETED\n", id_of(&t.to_string())))
        .collect();
    assert_eq!(acct, want);
    let one = c.ok(
        "sacct",
        &["-j", &format!("{a}_1"), "-n", "-P", "-o", "JobID"],
    );
    assert_eq!(one, format!("{a}_1\n{a}_1.batch\n"));
}

#[test]
fn steps_lists_and_patterns() {
    let c = TestCluster::start();
    let a = c.submit(&[
        "--array=1-7:3,10",
        "-o",
        "out_%A_%a.txt",
        "--wrap",
        "echo $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_STEP $SLURM_ARRAY_TASK_COUNT",
    ]);
    wait_all_done(&c, a, 4);
    for t in [1, 4, 7, 10] {
        let out = c.wait_file(&format!("out_{a}_{t}.txt"), |s| !s.is_empty());
        assert_eq!(out, format!("{t} 3 4\n"));
    }
    assert!(!c.path(&format!("out_{a}_2.txt")).exists());
}

#[test]
fn pending_arrays_collapse_expand_cancel_and_throttle() {
    let c = TestCluster::start();
    let a = c.submit(&[
        "--hold",
        "--array=0-9%3",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    let s = a.to_string();
    assert_eq!(squeue_ids(&c, &["-j", &s]), format!("{a}_[0-9%3]\n"));
    // sacct's record of the pending array carries the throttle too.
    assert_eq!(
        c.ok("sacct", &["-X", "-n", "-P", "-o", "JobID,State", "-j", &s]),
        format!("{a}_[0-9%3]|PENDING\n")
    );
    assert_eq!(
        c.ok("squeue", &["-h", "-r", "-j", &s, "-o", "%i"])
            .lines()
            .count(),
        10
    );
    assert_eq!(
        c.ok(
            "squeue",
            &["-h", "-j", &format!("{a}_4"), "-o", "%i %F %K %r"]
        ),
        format!("{a}_4 {a} 4 JobHeldUser\n")
    );
    // One pending task leaves the array; its record is gone.
    c.ok("scancel", &[&format!("{a}_4")]);
    assert_eq!(squeue_ids(&c, &["-j", &s]), format!("{a}_[0-3,5-9%3]\n"));
    let (code, err) = c.fails_err("squeue", &["-j", &format!("{a}_4")]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid job id specified"), "{err}");
    // The throttle can change; scontrol shows it.
    c.ok(
        "scontrol",
        &["update", &format!("JobId={a}"), "ArrayTaskThrottle=1"],
    );
    assert_eq!(c.field(&s, "ArrayTaskThrottle").as_deref(), Some("1"));
    // Releasing one task splits it off; it runs while the rest stay held.
    c.ok("scontrol", &["release", &format!("{a}_1")]);
    wait_until("task 1 done", Duration::from_secs(30), || {
        let r = records(&c, &format!("{a}_1"));
        (r.len() == 1 && r[0].2 == "COMPLETED").then_some(())
    });
    assert_eq!(squeue_ids(&c, &["-j", &s]), format!("{a}_[0,2-3,5-9%1]\n"));
    assert_eq!(c.field(&format!("{a}_0"), "Priority").as_deref(), Some("0"));
    // The array's id cancels what is left.
    c.ok("scancel", &[&s]);
    c.wait_field(&s, "JobState", "CANCELLED");
    assert_eq!(squeue_ids(&c, &["-j", &s]), "");
    let acct = c.ok("sacct", &["-j", &s, "-X", "-n", "-P", "-o", "JobID,State"]);
    let uid = nix::unistd::getuid();
    assert_eq!(
        acct,
        format!("{a}_[0,2-3,5-9]|CANCELLED by {uid}\n{a}_1|COMPLETED\n")
    );
}

#[test]
fn throttle_holds_running_tasks_to_the_limit() {
    let c = TestCluster::start();
    let a = c.submit(&["--array=0-5%2", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let mut most = 0;
    let end = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let r = records(&c, &a.to_string());
        most = most.max(r.iter().filter(|x| x.2 == "RUNNING").count());
        if r.len() == 6 && r.iter().all(|x| x.2 == "COMPLETED") {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "array did not finish: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(most <= 2, "{most} tasks ran at once");
    assert!(most >= 1);
}

#[test]
fn bad_arrays_are_refused() {
    let c = TestCluster::start();
    for bad in ["--array=5-2", "--array=0-1001", "--array=abc"] {
        let (code, err) = c.fails_err("sbatch", &[bad, "--wrap", "true"]);
        assert_eq!(code, 1, "{bad}");
        assert!(err.starts_with("sbatch: error: "), "{bad}: {err}");
        assert!(err.contains("array"), "{bad}: {err}");
    }
    let (_, err) = c.fails_err("sbatch", &["--array=5-2", "--wrap", "true"]);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Invalid job array specification\n"
    );
    assert_eq!(c.ok("squeue", &["-h"]), "");
}

#[test]
fn a_large_array_is_one_record() {
    let c = TestCluster::start_with(Setup {
        top: "max_array_size = 100001",
        ..Setup::default()
    });
    let t = std::time::Instant::now();
    let a = c.submit(&["--hold", "--array=0-99999", "--wrap", "true"]);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(records(&c, &a.to_string()).len(), 1);
    assert_eq!(squeue_ids(&c, &[]), format!("{a}_[0-99999]\n"));
    assert_eq!(
        c.ok("squeue", &["-h", "-r", "-o", "%i"]).lines().count(),
        100_000
    );
    c.ok("scancel", &[&a.to_string()]);
}
