//! Dependencies through the real front-ends: every kind, lists, what squeue and
//! scontrol show, kill-on-invalid-dep, singleton, updates and array dependencies.

use crate::harness::*;
use std::time::Duration;

fn sq(c: &TestCluster, id: u32, fmt: &str) -> String {
    c.ok(
        "squeue",
        &["-h", "-t", "all", "-j", &id.to_string(), "-o", fmt],
    )
}

#[test]
fn afterok_afternotok_afterany_and_kill_on_invalid_dep() {
    let c = TestCluster::start();
    let a = c.submit(&[
        "-J",
        "willfail",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 1; exit 1",
    ]);
    let dep = |kind: &str| format!("--dependency={kind}:{a}");
    let ok = c.submit(&[&dep("afterok"), "-o", "/dev/null", "--wrap", "true"]);
    let notok = c.submit(&[&dep("afternotok"), "-o", "/dev/null", "--wrap", "true"]);
    let any = c.submit(&[&dep("afterany"), "-o", "/dev/null", "--wrap", "true"]);
    let kill = c.submit(&[
        "--kill-on-invalid-dep=yes",
        &dep("afterok"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    let chain = c.submit(&[
        &format!("--dependency=afterok:{ok}"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    c.wait_field(&ok.to_string(), "Reason", "Dependency");
    assert_eq!(
        sq(&c, ok, "%T %r %E"),
        format!("PENDING Dependency afterok:{a}(unfulfilled)\n")
    );
    assert_eq!(
        c.field(&ok.to_string(), "Dependency"),
        Some(format!("afterok:{a}(unfulfilled)"))
    );
    assert_eq!(
        c.field(&ok.to_string(), "EligibleTime").as_deref(),
        Some("Unknown")
    );
    assert_eq!(c.wait_done(a), "FAILED");
    assert_eq!(c.wait_done(notok), "COMPLETED");
    assert_eq!(c.wait_done(any), "COMPLETED");
    assert_eq!(c.wait_done(kill), "CANCELLED");
    c.wait_field(&ok.to_string(), "Reason", "DependencyNeverSatisfied");
    assert_eq!(
        sq(&c, ok, "%T %r %E"),
        format!("PENDING DependencyNeverSatisfied afterok:{a}(failed)\n")
    );
    assert_eq!(
        sq(&c, kill, "%T %r %E"),
        format!("CANCELLED DependencyNeverSatisfied afterok:{a}(failed)\n")
    );
    assert_eq!(sq(&c, any, "%E"), "(null)\n");
    assert_eq!(sq(&c, chain, "%T %r"), "PENDING Dependency\n");
}

#[test]
fn lists_unknown_jobs_and_bad_specifications() {
    let c = TestCluster::start();
    let held = c.submit(&["-H", "-o", "/dev/null", "--wrap", "true"]);
    let quick = c.submit(&["-o", "/dev/null", "--wrap", "true"]);
    let and = c.submit(&[
        &format!("--dependency=afterok:{held}:{quick}"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    let or = c.submit(&[
        &format!("--dependency=afterok:{held}?afterok:{quick}"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(or), "COMPLETED");
    assert_eq!(
        sq(&c, and, "%T %E"),
        format!("PENDING afterok:{held}(unfulfilled),afterok:{quick}(fulfilled)\n")
    );
    c.ok("scontrol", &["release", &held.to_string()]);
    assert_eq!(c.wait_done(and), "COMPLETED");
    // A job the controller does not know satisfies the dependency.
    let u = c.submit(&[
        "--dependency=afterok:999999",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(u), "COMPLETED");
    for bad in ["bogus:1", "afterok:notanumber", "afterok"] {
        let (code, err) = c.fails_err(
            "sbatch",
            &[&format!("--dependency={bad}"), "--wrap", "true"],
        );
        assert_eq!(
            (code, err.as_str()),
            (
                1,
                "sbatch: error: Batch job submission failed: Job dependency problem\n"
            ),
            "{bad}"
        );
    }
}

#[test]
fn singleton_and_after_with_a_delay() {
    let c = TestCluster::start();
    let a = c.submit(&[
        "-J",
        "single",
        "--dependency=singleton",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2; touch a.done",
    ]);
    let b = c.submit(&[
        "-J",
        "single",
        "--dependency=singleton",
        "-o",
        "b.txt",
        "--wrap",
        "test -e a.done && echo after-a",
    ]);
    c.wait_state(a, &["RUNNING"], Duration::from_secs(20));
    // A new job's reason is None until the scheduling pass after its submission.
    let r = wait_until("b's pending reason", Duration::from_secs(20), || {
        let r = sq(&c, b, "%r %E");
        (!r.starts_with("None")).then_some(r)
    });
    assert_eq!(r, "Dependency singleton(unfulfilled)\n");
    assert_eq!(c.wait_done(b), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path("b.txt")).unwrap(),
        "after-a\n"
    );
    // after:A+1 waits a minute past A's start; here we only see it wait.
    let later = c.submit(&[
        &format!("--dependency=after:{b}+1"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    c.wait_field(&later.to_string(), "Reason", "Dependency");
    assert_eq!(sq(&c, later, "%E"), format!("after:{b}+1(unfulfilled)\n"));
}

#[test]
fn update_dependency_and_array_dependencies() {
    let c = TestCluster::start();
    let held = c.submit(&["-H", "-o", "/dev/null", "--wrap", "true"]);
    let j = c.submit(&[
        &format!("--dependency=afterany:{held}"),
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    c.wait_field(&j.to_string(), "Reason", "Dependency");
    // A cycle is refused; clearing the dependency lets the job run.
    let (code, err) = c.fails_err(
        "scontrol",
        &[
            "update",
            &format!("JobId={held}"),
            &format!("Dependency=afterok:{j}"),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(err, "slurm_update error: Job dependency problem\n");
    c.ok(
        "scontrol",
        &["update", &format!("JobId={j}"), "Dependency="],
    );
    assert_eq!(c.wait_done(j), "COMPLETED");
    c.ok("scancel", &[&held.to_string()]);

    let arr = c.submit(&[
        "--array=0-2",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep $((SLURM_ARRAY_TASK_ID * 2)); touch done.$SLURM_ARRAY_TASK_ID",
    ]);
    let all = c.submit(&[
        &format!("--dependency=afterok:{arr}"),
        "-o",
        "all.txt",
        "--wrap",
        "ls done.* | wc -l",
    ]);
    let first = c.submit(&[
        &format!("--dependency=afterok:{arr}_0"),
        "-o",
        "first.txt",
        "--wrap",
        "ls done.* | wc -l",
    ]);
    assert_eq!(
        c.field(&all.to_string(), "Dependency"),
        Some(format!("afterok:{arr}_*(unfulfilled)"))
    );
    assert_eq!(c.wait_done(first), "COMPLETED");
    assert_eq!(c.wait_done(all), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path("all.txt")).unwrap().trim(),
        "3"
    );
    let first_saw: u32 = std::fs::read_to_string(c.path("first.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        first_saw < 3,
        "afterok on task 0 waited for the whole array"
    );
}
