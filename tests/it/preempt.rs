//! Preemption through the real front-ends (preempt/partition_prio): a job in a
//! partition of a higher PriorityTier takes the node from a running lower-tier job,
//! which is cancelled (PREEMPTED), requeued (and reruns after), or suspended (and
//! resumed after), each as the lower partition's PreemptMode says; GraceTime gives the
//! victim SIGTERM first.

use crate::harness::*;
use std::time::Duration;

/// A 4-CPU node shared by `low` (tier 1, PreemptMode `mode`, GraceTime `grace`) and
/// `high` (tier 2), with preempt/partition_prio.
fn cluster(low_extra: &'static str) -> TestCluster {
    TestCluster::start_with(Setup {
        top: "[scheduler]\npreempt_type = \"preempt/partition_prio\"\npreempt_mode = \"cancel\"\n",
        extra_partitions: low_extra,
        ..Setup::default()
    })
}

fn count(c: &TestCluster, name: &str) -> u64 {
    std::fs::read_to_string(c.path(name))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

const LOW_CANCEL: &str = r#"
[[partitions]]
name = "low"
nodes = "NODE"
priority_tier = 1
preempt_mode = "cancel"
[[partitions]]
name = "high"
nodes = "NODE"
priority_tier = 2
"#;

#[test]
fn cancel_mode_ends_the_victim_preempted_and_starts_the_preemptor() {
    let c = cluster(LOW_CANCEL);
    let low = c.submit(&["-p", "low", "-n4", "-o", "low.out", "--wrap", "sleep 60"]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(20));
    let high = c.submit(&[
        "-p",
        "high",
        "-n4",
        "-o",
        "high.out",
        "--wrap",
        "echo high ran",
    ]);
    assert_eq!(
        c.wait_state(low, &["PREEMPTED"], Duration::from_secs(30)),
        "PREEMPTED"
    );
    c.wait_file("high.out", |t| t == "high ran\n");
    assert_eq!(c.wait_done(high), "COMPLETED");
    let acct = c.ok(
        "sacct",
        &["-j", &low.to_string(), "-X", "-n", "-P", "-o", "State"],
    );
    assert_eq!(acct.trim(), "PREEMPTED");
    let err = c.wait_file("low.out", |t| t.contains("DUE TO PREEMPTION"));
    assert!(
        err.contains(&format!("*** JOB {low} ON ")),
        "slurmstepd's line names the job: {err}"
    );
    // Same tier: a `low` job waits for another `low` job instead of preempting it.
    let a = c.submit(&["-p", "low", "-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(a, &["RUNNING"], Duration::from_secs(20));
    let b = c.submit(&["-p", "low", "-n4", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_field(&b.to_string(), "Reason", "Resources");
    assert_eq!(c.state(a).as_deref(), Some("RUNNING"));
    c.ok("scancel", &[&a.to_string(), &b.to_string()]);
}

#[test]
fn requeue_mode_puts_the_victim_back_and_it_reruns_after() {
    let c = cluster(
        r#"
[[partitions]]
name = "low"
nodes = "NODE"
priority_tier = 1
preempt_mode = "requeue"
[[partitions]]
name = "high"
nodes = "NODE"
priority_tier = 2
"#,
    );
    let low = c.submit(&[
        "-p",
        "low",
        "-n4",
        "-o",
        "low.out",
        "--wrap",
        "echo run ${SLURM_RESTART_COUNT:-0}; sleep 60",
    ]);
    let s = low.to_string();
    c.wait_file("low.out", |t| t == "run 0\n");
    let high = c.submit(&["-p", "high", "-n4", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(high, &["RUNNING"], Duration::from_secs(30));
    assert_eq!(c.field(&s, "JobState").as_deref(), Some("PENDING"));
    assert_eq!(c.field(&s, "Restarts").as_deref(), Some("1"));
    // Once the preemptor is done, the victim runs again, appending to its output.
    assert_eq!(c.wait_done(high), "COMPLETED");
    c.wait_state(low, &["RUNNING"], Duration::from_secs(30));
    c.wait_file("low.out", |t| t == "run 0\nrun 1\n");
    let hist = c.ok(
        "sacct",
        &["-j", &s, "-X", "-D", "-n", "-P", "-o", "JobID,State"],
    );
    assert_eq!(hist, format!("{low}|REQUEUED\n{low}|RUNNING\n"));
    c.ok("scancel", &[&s]);
}

#[test]
fn suspend_mode_suspends_the_victim_and_resumes_it_when_the_preemptor_ends() {
    let c = cluster(
        r#"
[[partitions]]
name = "low"
nodes = "NODE"
priority_tier = 1
preempt_mode = "suspend"
[[partitions]]
name = "high"
nodes = "NODE"
priority_tier = 2
"#,
    );
    // A suspended job keeps its memory: both jobs ask for a part of the node's.
    let low = c.submit(&[
        "-p",
        "low",
        "-n4",
        "--mem=1000",
        "-o",
        "/dev/null",
        "--wrap",
        "i=0; while true; do i=$((i+1)); echo $i > count.txt; sleep 0.1; done",
    ]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(20));
    wait_until("the counter moves", Duration::from_secs(20), || {
        (count(&c, "count.txt") > 3).then_some(())
    });
    let high = c.submit(&[
        "-p",
        "high",
        "-n4",
        "--mem=1000",
        "-o",
        "high.out",
        "--wrap",
        "sleep 4; echo high done",
    ]);
    c.wait_state(high, &["RUNNING"], Duration::from_secs(30));
    assert_eq!(c.state(low).as_deref(), Some("SUSPENDED"));
    std::thread::sleep(Duration::from_millis(500));
    let frozen = count(&c, "count.txt");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        count(&c, "count.txt"),
        frozen,
        "the victim ran while suspended"
    );
    // Gang-style resume once the preemptor has ended.
    assert_eq!(c.wait_done(high), "COMPLETED");
    c.wait_state(low, &["RUNNING"], Duration::from_secs(20));
    wait_until("the counter moves again", Duration::from_secs(20), || {
        (count(&c, "count.txt") > frozen + 3).then_some(())
    });
    c.ok("scancel", &[&low.to_string()]);
}

#[test]
fn grace_time_sends_sigterm_first_then_ends_the_victim() {
    let c = cluster(
        r#"
[[partitions]]
name = "low"
nodes = "NODE"
priority_tier = 1
preempt_mode = "cancel"
grace_time = 5
[[partitions]]
name = "high"
nodes = "NODE"
priority_tier = 2
"#,
    );
    let low = c.submit(&[
        "-p",
        "low",
        "-n4",
        "-o",
        "/dev/null",
        "--wrap",
        "trap 'echo got TERM >> grace.txt' TERM; echo ready > ready.txt; \
         while true; do sleep 0.2; done",
    ]);
    c.wait_file("ready.txt", |t| t == "ready\n");
    let high = c.submit(&["-p", "high", "-n4", "-o", "/dev/null", "--wrap", "true"]);
    // The notice arrives while the victim still runs (its grace time).
    c.wait_file("grace.txt", |t| t.starts_with("got TERM\n"));
    assert_eq!(c.state(low).as_deref(), Some("RUNNING"));
    assert_eq!(c.state(high).as_deref(), Some("PENDING"));
    assert!(
        c.field(&low.to_string(), "PreemptTime")
            .is_some_and(|t| t != "None")
    );
    // Then it is ended, and the preemptor runs.
    assert_eq!(
        c.wait_state(low, &["PREEMPTED"], Duration::from_secs(30)),
        "PREEMPTED"
    );
    assert_eq!(c.wait_done(high), "COMPLETED");
}

/// Applies a sacctmgr change through the controller's protocol (as `sacctmgr -i`).
fn acct(c: &TestCluster, entity: &str, name: &str, settings: &[&str]) {
    use sluice::model::acct_ops::{AcctOp, Entity, Setting};
    let cfg = sluice::config::Config::from_file(&c.conf).unwrap();
    let mut cl = sluice::cli::client::Client::connect_with(&cfg).unwrap();
    let op = AcctOp::Add {
        entity: Entity::parse(entity).unwrap(),
        names: vec![name.to_string()],
        settings: settings
            .iter()
            .map(|s| Setting::parse(s).unwrap())
            .collect(),
    };
    match cl
        .request(&sluice::proto::Request::AcctChange { op, commit: true })
        .unwrap()
    {
        sluice::proto::Response::AcctChanged(_) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn qos_preempt_lists_choose_the_victims() {
    let c = TestCluster::start_with(Setup {
        top: "accounting_storage_enforce = \"none\"\n[scheduler]\npreempt_type = \"preempt/qos\"\npreempt_mode = \"cancel\"\n",
        ..Setup::default()
    });
    acct(&c, "qos", "scavenger", &["PreemptMode=requeue"]);
    acct(&c, "qos", "urgent", &["Preempt=scavenger"]);
    let scav = c.submit(&[
        "--qos=scavenger",
        "-n4",
        "-o",
        "scav.out",
        "--wrap",
        "echo run ${SLURM_RESTART_COUNT:-0}; sleep 60",
    ]);
    c.wait_file("scav.out", |t| t == "run 0\n");
    // A job of a QOS that preempts nothing waits.
    let plain = c.submit(&["--qos=normal", "-n4", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_field(&plain.to_string(), "Reason", "Resources");
    assert_eq!(c.state(scav).as_deref(), Some("RUNNING"));
    c.ok("scancel", &[&plain.to_string()]);
    // urgent may preempt scavenger, whose mode is REQUEUE.
    let urgent = c.submit(&[
        "--qos=urgent",
        "-n4",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2",
    ]);
    c.wait_state(urgent, &["RUNNING"], Duration::from_secs(30));
    assert_eq!(c.field(&scav.to_string(), "Restarts").as_deref(), Some("1"));
    assert_eq!(c.wait_done(urgent), "COMPLETED");
    c.ok("scancel", &[&scav.to_string()]);
}

/// PreemptExemptTime: a victim younger than it is left alone (the preemptor waits
/// with Resources) and is preempted once it has run that long.
#[test]
fn preempt_exempt_time_protects_young_jobs_until_they_are_old_enough() {
    let c = TestCluster::start_with(Setup {
        top: "[scheduler]\npreempt_type = \"preempt/partition_prio\"\npreempt_mode = \"cancel\"\npreempt_exempt_time = \"0:15\"\n",
        extra_partitions: LOW_CANCEL,
        ..Setup::default()
    });
    let victim = c.submit(&["-p", "low", "-n4", "-o", "/dev/null", "--wrap", "sleep 300"]);
    c.wait_state(victim, &["RUNNING"], Duration::from_secs(30));
    let started = std::time::Instant::now();
    let urgent = c.submit(&["-p", "high", "-n4", "-o", "/dev/null", "--wrap", "sleep 1"]);
    c.wait_field(&urgent.to_string(), "Reason", "Resources");
    std::thread::sleep(Duration::from_secs(5));
    // Young: still running, the preemptor still waiting.
    assert_eq!(c.state(victim).as_deref(), Some("RUNNING"));
    assert_eq!(c.state(urgent).as_deref(), Some("PENDING"));
    assert!(
        started.elapsed() < Duration::from_secs(14),
        "too slow to tell"
    );
    c.wait_state(victim, &["PREEMPTED"], Duration::from_secs(40));
    assert!(
        started.elapsed() >= Duration::from_secs(14),
        "preempted too young"
    );
    assert_eq!(c.wait_done(urgent), "COMPLETED");
}
