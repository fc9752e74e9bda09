//! Reactor scenarios: submit, schedule, node events, cancel, hold, requeue, time limits.

use super::*;
use crate::config::Config;
use crate::model::TimeLimit;
use std::path::Path;

const ROOT: Caller = Caller { uid: 0, gid: 0 };
const ALICE: Caller = Caller {
    uid: 2001,
    gid: 2001,
};

fn names(uid: u32, gid: u32) -> (String, String) {
    (format!("u{uid}"), format!("g{gid}"))
}

fn cluster() -> Cluster {
    let cfg = Config::from_toml(
        r#"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "debug"
nodes = "n1"
default = true
max_time = "1:00:00"
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    c
}

fn spec(name: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        ..JobSpec::default()
    }
}

fn submit(c: &mut Cluster, s: JobSpec, who: Caller, now: i64) -> u32 {
    let j = c.resolve(s, who, now, &names).unwrap();
    let mut fx = Effects::default();
    c.submit(j, &mut fx)
}

fn launches(fx: &Effects) -> Vec<u32> {
    fx.to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Launch(l) => Some(l.job.id),
            _ => None,
        })
        .collect()
}

fn ended(id: u32, code: i32, signal: i32) -> FromAgent {
    FromAgent::Ended {
        job_id: id,
        kind: EndKind::Exited,
        status: ExitStatus { code, signal },
        time: 20,
        max_rss_kib: 100,
        cpu_secs: 0.5,
        oom: false,
        message: None,
        usage: Some(crate::model::step::StepUsage {
            ntasks: 1,
            max_rss_kib: 100,
            user_cpu_secs: 0.25,
            sys_cpu_secs: 0.25,
            sum_cpu_secs: 0.5,
            ..Default::default()
        }),
    }
}

#[test]
fn submit_resolves_defaults_and_schedules() {
    let mut c = cluster();
    let id = submit(&mut c, spec("a"), ALICE, 10);
    assert_eq!(id, 1);
    let j = &c.jobs[&1];
    assert_eq!(j.partition, "debug");
    assert_eq!(j.time_limit, TimeLimit::Minutes(60));
    assert_eq!(j.req_mem, MemReq::PerCpu(1000));
    assert_eq!(j.user, "u2001");
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(launches(&fx), vec![1]);
    assert_eq!(c.jobs[&1].state, JobState::Running);
    assert_eq!(c.nodes[0].alloc_cpus, 1);
    c.sanity_check().unwrap();
    // A live sample of the batch step is kept on its record (for sstat).
    let mut fx = Effects::default();
    let live = crate::model::step::StepUsage {
        ntasks: 1,
        max_rss_kib: 42,
        ..Default::default()
    };
    c.from_agent(
        "n1",
        FromAgent::BatchUsage {
            job_id: 1,
            usage: live,
        },
        15,
        &mut fx,
    );
    assert_eq!(c.jobs[&1].steps[0].usage().map(|u| u.max_rss_kib), Some(42));
    let mut fx = Effects::default();
    c.from_agent("n1", ended(1, 0, 0), 20, &mut fx);
    let j = &c.jobs[&1];
    assert_eq!(j.state, JobState::Completed);
    assert_eq!(j.steps[0].state, JobState::Completed);
    assert_eq!(j.steps[0].max_rss_kib, 100);
    // The final figures replace the sample, and are stored.
    let u = j.steps[0].usage().unwrap();
    assert_eq!((u.max_rss_kib, u.user_cpu_secs), (100, 0.25));
    assert!(
        fx.persist
            .iter()
            .any(|p| p.id == 1 && p.steps[0].usage().is_some_and(|u| u.max_rss_kib == 100))
    );
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    c.sanity_check().unwrap();
}

#[test]
fn exit_codes_map_to_states() {
    let mut c = cluster();
    for (code, sig, state, reason) in [
        (3, 0, JobState::Failed, Reason::NonZeroExitCode),
        (0, 9, JobState::Failed, Reason::JobLaunchFailure),
        (0, 15, JobState::Failed, Reason::NonZeroExitCode),
    ] {
        let id = submit(&mut c, spec("x"), ALICE, 0);
        let mut fx = Effects::default();
        c.schedule(0, &mut fx);
        c.from_agent("n1", ended(id, code, sig), 1, &mut fx);
        let j = &c.jobs[&id];
        assert_eq!((j.state, j.reason.clone()), (state, reason));
        assert_eq!(j.exit.to_string(), format!("{code}:{sig}"));
    }
}

#[test]
fn refuses_what_can_never_run() {
    let c = cluster();
    let mut s = spec("big");
    s.ntasks = Some(8);
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::NodeConfigUnavailable
    );
    let mut s = spec("long");
    s.time_limit = Some(TimeLimit::Minutes(120));
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::InvalidTimeLimit
    );
    let mut s = spec("nodes");
    s.nodes_min = Some(2);
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::InvalidNodeCount
    );
    let mut s = spec("mem");
    s.mem = Some(MemReq::PerNode(100_000));
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::NodeConfigUnavailable
    );
    let mut s = spec("part");
    s.partition = Some("nosuch".into());
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::InvalidPartition
    );
    let mut s = spec("w");
    s.nodelist = Some("n9".into());
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).unwrap_err(),
        SlurmError::InvalidNodeName
    );
}

#[test]
fn cancel_pending_and_running() {
    let mut c = cluster();
    let mut s = spec("wide");
    s.ntasks = Some(4);
    let a = submit(&mut c, s, ALICE, 0);
    let b = submit(&mut c, spec("b"), ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    assert_eq!(c.jobs[&b].reason, Reason::Resources);
    let f = JobFilter {
        ids: vec![b],
        ..JobFilter::default()
    };
    let r = c.cancel(&f, None, SignalScope::Steps, ALICE, 5, &mut fx);
    assert_eq!(r[0].error, None);
    assert_eq!(c.jobs[&b].state, JobState::Cancelled);
    assert_eq!(c.jobs[&b].cancelled_by, Some(2001));
    // A cancelled pending job keeps its last reason (golden scancel.txt).
    assert_eq!(c.jobs[&b].reason, Reason::Resources);
    // Someone else may not cancel alice's job.
    let f = JobFilter {
        ids: vec![a],
        ..JobFilter::default()
    };
    let bob = Caller {
        uid: 3000,
        gid: 3000,
    };
    assert_eq!(
        c.cancel(&f, None, SignalScope::Steps, bob, 5, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    let mut fx = Effects::default();
    c.cancel(&f, None, SignalScope::Steps, ALICE, 6, &mut fx);
    assert!(c.jobs[&a].completing);
    assert_eq!(c.jobs[&a].state_long(), "COMPLETING");
    assert!(
        fx.to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Terminate { job_id, .. } if *job_id == a))
    );
    c.from_agent("n1", ended(a, 0, 15), 7, &mut fx);
    let j = &c.jobs[&a];
    assert_eq!(j.state_long(), "CANCELLED");
    assert_eq!(j.steps[0].state, JobState::Cancelled);
    assert_eq!(j.steps[0].exit.to_string(), "0:15");
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    assert_eq!(c.nodes[0].completing_jobs, 0);
    // Cancelling it again says it is done.
    assert_eq!(
        c.cancel(&f, None, SignalScope::Steps, ALICE, 8, &mut fx)[0].error,
        Some(SlurmError::AlreadyDone)
    );
    let f = JobFilter {
        ids: vec![999],
        ..JobFilter::default()
    };
    assert_eq!(
        c.cancel(&f, None, SignalScope::Steps, ALICE, 8, &mut fx)[0].error,
        Some(SlurmError::InvalidJobId)
    );
}

#[test]
fn time_limit_ends_job_as_timeout() {
    let mut c = cluster();
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(1));
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    c.tick(59, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    let mut fx = Effects::default();
    c.tick(60, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(m, ToAgent::Terminate { reason: Some(r), .. } if r.contains("DUE TO TIME LIMIT"))));
    c.from_agent("n1", ended(id, 0, 15), 61, &mut fx);
    assert_eq!(c.jobs[&id].state_long(), "TIMEOUT");
    assert_eq!(c.jobs[&id].end_time, Some(60));
    // scontrol's ExitCode is how the shell ended (golden timeout.txt: 0:15 or 0:9).
    assert_eq!(c.jobs[&id].exit.to_string(), "0:15");
}

#[test]
fn over_time_limit_lets_a_job_run_past_its_limit() {
    // OverTimeLimit=2: a one-minute job ends three minutes after it started.
    let mut c = crate::ctld::testutil::cluster_with(2, "OverTimeLimit = 2");
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(1));
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    c.tick(179, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.tick(180, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
    // UNLIMITED: never ended for its limit.
    let mut c = crate::ctld::testutil::cluster_with(2, "OverTimeLimit = \"UNLIMITED\"");
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(1));
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    c.tick(1_000_000, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    assert!(
        c.config_entries
            .contains(&("OverTimeLimit".into(), "UNLIMITED".into()))
    );
}

#[test]
fn a_partitions_over_time_limit_overrides_the_clusters() {
    // Cluster OverTimeLimit=2; partition `strict` 0, `loose` UNLIMITED, `plain` unset.
    let cfg = Config::from_toml(
        r#"OverTimeLimit = 2
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "strict"
nodes = "n1"
default = true
OverTimeLimit = 0
[[partitions]]
name = "loose"
nodes = "n1"
over_time_limit = "UNLIMITED"
[[partitions]]
name = "plain"
nodes = "n1"
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    let job = |c: &mut Cluster, part: &str| {
        let mut s = spec(part);
        s.partition = Some(part.into());
        s.time_limit = Some(TimeLimit::Minutes(1));
        submit(c, s, ALICE, 0)
    };
    let (strict, loose, plain) = (
        job(&mut c, "strict"),
        job(&mut c, "loose"),
        job(&mut c, "plain"),
    );
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    c.tick(60, &mut fx);
    assert_eq!(c.jobs[&strict].state, JobState::Timeout);
    assert_eq!(c.jobs[&plain].state, JobState::Running);
    c.tick(180, &mut fx);
    assert_eq!(c.jobs[&plain].state, JobState::Timeout);
    c.tick(1_000_000, &mut fx);
    assert_eq!(c.jobs[&loose].state, JobState::Running);
}

#[test]
fn hold_release_and_admin_hold() {
    let mut c = cluster();
    let mut s = spec("h");
    s.hold = true;
    let id = submit(&mut c, s, ALICE, 0);
    assert_eq!(c.jobs[&id].reason, Reason::JobHeldUser);
    assert_eq!(c.jobs[&id].priority, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    assert!(launches(&fx).is_empty());
    assert_eq!(c.release(&[id], &[], ALICE, 1, &mut fx)[0].error, None);
    assert!(c.jobs[&id].priority > 0);
    c.hold(&[id], &[], false, ROOT, &mut fx);
    assert_eq!(c.jobs[&id].reason, Reason::JobHeldAdmin);
    assert_eq!(
        c.release(&[id], &[], ALICE, 1, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    // Nor can the owner turn it into a user hold (`scontrol uhold`) and release that.
    assert_eq!(
        c.hold(&[id], &[], true, ALICE, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    assert_eq!(c.jobs[&id].reason, Reason::JobHeldAdmin);
    assert_eq!(c.release(&[id], &[], ROOT, 1, &mut fx)[0].error, None);
    let mut fx = Effects::default();
    c.schedule(2, &mut fx);
    assert_eq!(launches(&fx), vec![id]);
}

#[test]
fn requeue_runs_the_job_again() {
    let mut c = cluster();
    let id = submit(&mut c, spec("r"), ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    assert_eq!(
        c.requeue(&[id], &[], false, ALICE, 1, &mut fx)[0].error,
        None
    );
    c.from_agent("n1", ended(id, 0, 15), 2, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Pending);
    assert_eq!(c.jobs[&id].restarts, 1);
    let mut fx = Effects::default();
    c.schedule(3, &mut fx);
    assert!(launches(&fx).is_empty());
    assert_eq!(c.jobs[&id].reason, Reason::BeginTime);
    c.schedule(2 + REQUEUE_DELAY, &mut fx);
    assert_eq!(launches(&fx), vec![id]);
    c.sanity_check().unwrap();
}

#[test]
fn registration_reconciles_lost_and_unknown_jobs() {
    let mut c = cluster();
    let mut s = spec("l");
    s.requeue = Some(false);
    let id = submit(&mut c, s, ALICE, 0);
    // A requeueable job lost by its node goes back to the queue instead.
    let back = submit(&mut c, spec("r"), ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    let reg = FromAgent::Register {
        node: "n1".into(),
        cpus: 4,
        sockets: 1,
        cores_per_socket: 4,
        threads_per_core: 1,
        real_memory: 4000,
        boot_time: 0,
        os: "Linux".into(),
        arch: "x86_64".into(),
        running: vec![77],
        gres: Vec::new(),
        steps: Vec::new(),
        reports_epilog: false,
    };
    let decl = crate::config::NodeConf::named("n1");
    let mut fx = Effects::default();
    c.agent_registered(reg, &decl, 5, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::NodeFail);
    let b = &c.jobs[&back];
    assert_eq!((b.state, b.restarts), (JobState::Pending, 1));
    assert!(b.past_runs[0].node_fail);
    assert!(
        fx.to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Forget { job_id: 77 }))
    );
    c.sanity_check().unwrap();
}

#[test]
fn min_job_age_purges_finished_jobs() {
    let mut c = cluster();
    let id = submit(&mut c, spec("p"), ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    c.from_agent("n1", ended(id, 0, 0), 20, &mut fx);
    c.tick(319, &mut fx);
    assert!(c.jobs.contains_key(&id));
    c.tick(320, &mut fx);
    assert!(!c.jobs.contains_key(&id));
}

#[test]
fn batch_signal_is_sent_before_the_limit_once() {
    let mut c = cluster();
    let mut s = spec("sig");
    s.time_limit = Some(TimeLimit::Minutes(2));
    s.signal = Some(crate::model::SignalSpec {
        signal: 10,
        secs_before: 30,
        batch_only: true,
        reservation: false,
    });
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    let sent = |fx: &Effects| {
        fx.to_agent
            .iter()
            .filter(|(_, m)| matches!(m, ToAgent::Signal { job_id, signal: 10, batch_only: true } if *job_id == id))
            .count()
    };
    let mut fx = Effects::default();
    c.tick(89, &mut fx);
    assert_eq!(sent(&fx), 0);
    c.tick(90, &mut fx);
    c.tick(91, &mut fx);
    assert_eq!(sent(&fx), 1);
}

#[test]
fn pending_jobs_get_expected_starts_and_multifactor_priorities() {
    let mut c = cluster();
    let mut s = spec("big");
    s.ntasks = Some(4);
    s.time_limit = Some(TimeLimit::Minutes(10));
    let first = submit(&mut c, s.clone(), ALICE, 10);
    let second = submit(&mut c, s, ALICE, 10);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(launches(&fx), vec![first]);
    let j = &c.jobs[&second];
    assert_eq!(j.reason, Reason::Resources);
    assert_eq!(j.sched.est_start, Some(10 + 600));
    assert_eq!(j.sched.sched_nodes.as_deref(), Some("n1"));
    // 4 of 4 CPUs on the only node: job size 1000, fair-share 10000, partition 1000.
    assert_eq!(j.priority, 12000);
    assert_eq!(c.stats.jobs_started, 1);
    assert!(c.stats.main_cycles >= 1 && c.stats.bf_cycles >= 1);
    let (rows, w) = c.priority_rows(&[], &[], 10);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].factors.jobsize, 1000.0);
    assert_eq!(w.fairshare, 10000);
    // Once the first job ran, alice's usage is recorded: under Fair Tree she now ranks
    // below user root (always in the association tree, no usage): 1/2.
    let mut fx = Effects::default();
    c.from_agent("n1", ended(first, 0, 0), 20, &mut fx);
    assert!(c.acct.ledger.usage[&("root".to_string(), "u2001".to_string())] > 0.0);
    let (rows, _) = c.priority_rows(&[], &[], 20);
    assert_eq!(rows[0].factors.fairshare, 5000.0);
}

#[test]
fn fail_state_stops_new_work_until_resumed() {
    let mut c = cluster();
    let mut fx = Effects::default();
    c.update_node(
        &["n1".into()],
        &NodeUpdate::Fail {
            reason: "flaky".into(),
        },
        ROOT,
        5,
        &mut fx,
    )
    .unwrap();
    assert_eq!(c.nodes[0].state_long(), "fail");
    let id = submit(&mut c, spec("a"), ALICE, 10);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert!(launches(&fx).is_empty());
    assert_eq!(c.jobs[&id].reason, Reason::Resources);
    c.update_node(&["n1".into()], &NodeUpdate::Resume, ROOT, 11, &mut fx)
        .unwrap();
    let mut fx = Effects::default();
    c.schedule(12, &mut fx);
    assert_eq!(launches(&fx), vec![id]);
}

#[test]
fn enforce_part_limits_no_accepts_and_pends() {
    let cfg = Config::from_toml(
        r#"
enforce_part_limits = "NO"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "debug"
nodes = "n1"
default = true
max_time = "1:00:00"
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    let mut s = spec("long");
    s.time_limit = Some(TimeLimit::Minutes(120));
    let id = submit(&mut c, s, ALICE, 10);
    let mut wide = spec("wide");
    wide.ntasks = Some(64);
    let w = submit(&mut c, wide, ALICE, 10);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(c.jobs[&id].reason, Reason::PartitionTimeLimit);
    assert_eq!(c.jobs[&w].reason, Reason::PartitionConfig);
    let mut mem = spec("mem");
    mem.mem = Some(MemReq::PerNode(100_000));
    assert_eq!(
        c.resolve(mem, ALICE, 10, &names).unwrap_err(),
        SlurmError::NodeConfigUnavailable
    );
}

#[test]
fn identical_environments_are_stored_once() {
    let mut c = cluster();
    let mut s = spec("a");
    s.environment = [("PATH".to_string(), "/bin".to_string())].into();
    let a = submit(&mut c, s.clone(), ALICE, 10);
    let b = submit(&mut c, s.clone(), ALICE, 10);
    s.environment = [("PATH".to_string(), "/usr/bin".to_string())].into();
    let d = submit(&mut c, s, ALICE, 10);
    let env = |id: u32| c.jobs[&id].spec.environment.clone();
    assert!(env(a).shares(&env(b)));
    assert!(!env(a).shares(&env(d)));
    assert_eq!(env(d)["PATH"], "/usr/bin");
    // Queries leave the environment and script out.
    let q = c.jobs[&a].for_query();
    assert!(q.spec.environment.is_empty() && q.spec.script.is_empty());
}

#[test]
fn relative_time_limit_updates() {
    let mut c = cluster();
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(30));
    s.hold = true;
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    // The owner may lower it, and raise a pending job's up to the partition's
    // MaxTime (1 hour); past that, raising is for operators.
    assert_eq!(
        c.update_job(id, None, &[JobUpdate::TimeLimitBy(-10)], ALICE, &mut fx),
        Ok(())
    );
    assert_eq!(c.jobs[&id].time_limit, TimeLimit::Minutes(20));
    assert_eq!(
        c.update_job(id, None, &[JobUpdate::TimeLimitBy(40)], ALICE, &mut fx),
        Ok(())
    );
    assert_eq!(c.jobs[&id].time_limit, TimeLimit::Minutes(60));
    assert_eq!(
        c.update_job(id, None, &[JobUpdate::TimeLimitBy(5)], ALICE, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.update_job(id, None, &[JobUpdate::TimeLimitBy(-35)], ROOT, &mut fx),
        Ok(())
    );
    assert_eq!(c.jobs[&id].time_limit, TimeLimit::Minutes(25));
    // Not below one minute.
    assert_eq!(
        c.update_job(id, None, &[JobUpdate::TimeLimitBy(-25)], ROOT, &mut fx),
        Err(SlurmError::InvalidTimeLimit)
    );
    assert_eq!(c.jobs[&id].time_limit, TimeLimit::Minutes(25));
}

#[test]
fn time_limit_update_on_a_running_job_moves_its_end() {
    let mut c = cluster();
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(30));
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    // Lowered to two minutes while it runs: it ends at 120 s, not 1800 s.
    let two = JobUpdate::TimeLimit(TimeLimit::Minutes(2));
    assert_eq!(c.update_job(id, None, &[two], ALICE, &mut fx), Ok(()));
    c.tick(119, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    // An operator raises it again before then: the job keeps running.
    let more = JobUpdate::TimeLimitBy(3);
    assert_eq!(c.update_job(id, None, &[more], ROOT, &mut fx), Ok(()));
    c.tick(200, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.tick(300, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
}

#[test]
fn overflowing_counts_are_refused_not_a_panic() {
    let c = cluster();
    let mut s = spec("huge");
    s.ntasks_per_node = Some(65536);
    s.nodes_min = Some(65536);
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).err(),
        Some(SlurmError::NodeConfigUnavailable)
    );
    let mut s = spec("wide");
    s.ntasks = Some(1 << 20);
    s.cpus_per_task = Some(1 << 20);
    assert_eq!(
        c.resolve(s, ALICE, 0, &names).err(),
        Some(SlurmError::NodeConfigUnavailable)
    );
    let mut s = spec("mem");
    s.ntasks = Some(1 << 16);
    s.mem = Some(MemReq::PerCpu(999_999_999_999_999));
    assert!(c.resolve(s, ALICE, 0, &names).is_err());
}

#[test]
fn suspended_time_pushes_the_time_limit_back_and_only_operators_suspend() {
    let mut c = cluster();
    let mut s = spec("s");
    s.time_limit = Some(TimeLimit::Minutes(1));
    let id = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    // The owner is not an operator.
    let r = c.suspend(&[id], &[], false, ALICE, 10, &mut fx);
    assert_eq!(r[0].error, Some(SlurmError::AccessDenied));
    let mut fx = Effects::default();
    let r = c.suspend(&[id], &[], false, ROOT, 10, &mut fx);
    assert_eq!(r[0].error, None);
    assert_eq!(c.jobs[&id].state, JobState::Suspended);
    assert!(fx.to_agent.iter().any(|(n, m)| n == "n1"
        && matches!(m, ToAgent::Suspend { job_id, suspend: true } if *job_id == id)));
    // Suspended past the limit: no timeout.
    c.tick(100, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Suspended);
    assert_eq!(c.jobs[&id].run_secs(100), 10);
    let mut fx = Effects::default();
    let r = c.suspend(&[id], &[], true, ROOT, 40, &mut fx);
    assert_eq!(r[0].error, None);
    assert_eq!(c.jobs[&id].suspended_secs, 30);
    // 60 s of run time end at 60 + 30 suspended.
    c.tick(89, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.tick(90, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
    let r = c.suspend(&[id], &[], true, ROOT, 91, &mut fx);
    assert_eq!(r[0].error, Some(SlurmError::AlreadyDone));
}

#[test]
fn a_higher_tier_job_preempts_and_the_victim_ends_preempted() {
    let cfg = Config::from_toml(
        r#"
[scheduler]
preempt_type = "preempt/partition_prio"
preempt_mode = "cancel"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "low"
nodes = "n1"
default = true
grace_time = 30
[[partitions]]
name = "high"
nodes = "n1"
priority_tier = 5
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    let mut s = spec("low");
    s.ntasks = Some(4);
    // `--signal=USR1@60`: the preemption notice is the job's own signal.
    s.signal = Some(crate::model::SignalSpec {
        signal: 10,
        secs_before: 60,
        batch_only: false,
        reservation: false,
    });
    let low = submit(&mut c, s, ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    let mut s = spec("high");
    s.ntasks = Some(4);
    s.partition = Some("high".into());
    let high = submit(&mut c, s, ALICE, 10);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    // The victim gets its notice and keeps running through its grace time.
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(m,
        ToAgent::Signal { job_id, signal: 10, batch_only: false } if *job_id == low)));
    assert_eq!(c.jobs[&low].state, JobState::Running);
    assert_eq!(c.jobs[&low].preempt.map(|p| p.end), Some(40));
    assert_eq!(c.jobs[&high].state, JobState::Pending);
    // A second pass preempts nothing more.
    let mut fx = Effects::default();
    c.schedule(20, &mut fx);
    assert!(fx.to_agent.is_empty(), "{:?}", fx.to_agent);
    let mut fx = Effects::default();
    c.tick(40, &mut fx);
    assert_eq!(c.jobs[&low].state, JobState::Preempted);
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(m,
        ToAgent::Terminate { reason: Some(r), .. } if r.contains("DUE TO PREEMPTION"))));
    let mut fx = Effects::default();
    c.from_agent("n1", ended(low, 0, 15), 41, &mut fx);
    assert_eq!(c.jobs[&low].state, JobState::Preempted);
    c.schedule(41, &mut fx);
    assert_eq!(c.jobs[&high].state, JobState::Running);
}

#[test]
fn silent_node_ends_its_jobs_node_fail_or_requeues_them() {
    let mut c = cluster();
    let mut keep = spec("norequeue");
    keep.requeue = Some(false);
    let a = submit(&mut c, keep, ALICE, 10);
    let mut rq = spec("requeue");
    rq.requeue = Some(true);
    let b = submit(&mut c, rq, ALICE, 10);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(launches(&fx), vec![a, b]);
    let mut fx = Effects::default();
    let hit = c.nodes_failed(&["n1".to_string()], 50, &mut fx);
    assert_eq!(hit, vec![a, b]);
    let ja = &c.jobs[&a];
    assert_eq!(
        (ja.state, &ja.reason),
        (JobState::NodeFail, &Reason::NodeDown)
    );
    assert_eq!(ja.steps[0].state, JobState::NodeFail);
    assert_eq!(ja.end_time, Some(50));
    let jb = &c.jobs[&b];
    assert_eq!((jb.state, jb.restarts), (JobState::Pending, 1));
    assert!(jb.past_runs[0].node_fail);
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    c.sanity_check().unwrap();
    // Back again, the node still runs both: both are orphans now.
    assert_eq!(c.orphans_on("n1", &[a, b, 999]), vec![a, b]);
    // A job running here normally is not.
    let d = submit(&mut c, spec("other"), ALICE, 60);
    let mut fx = Effects::default();
    c.schedule(60, &mut fx);
    assert_eq!(c.jobs[&d].state, JobState::Running);
    assert!(c.orphans_on("n1", &[d]).is_empty());
    // A failure of another node leaves it alone.
    let mut fx = Effects::default();
    assert!(c.nodes_failed(&["n9".to_string()], 70, &mut fx).is_empty());
    assert_eq!(c.jobs[&d].state, JobState::Running);
}

#[test]
fn degraded_isolation_is_a_reason_on_the_node_that_never_replaces_an_admins() {
    let mut c = cluster();
    c.isolation_reported("n1", "none", Some("no cgroups: disabled".into()), 30);
    let n = &c.nodes[0];
    assert_eq!(
        n.reason.as_deref(),
        Some("Isolation degraded: no cgroups: disabled")
    );
    assert_eq!((n.reason_uid, n.reason_time), (Some(999), Some(30)));
    assert_eq!(n.state, NodeState::Up);
    assert!(n.schedulable());
    // Full isolation again: our reason goes.
    c.isolation_reported("n1", "cgroup/v1", None, 40);
    assert_eq!(c.nodes[0].reason, None);
    assert_eq!(c.nodes[0].isolation_degraded, None);
    // An admin's reason stays.
    c.nodes[0].reason = Some("disk".into());
    c.isolation_reported("n1", "none", Some("no cgroups".into()), 50);
    assert_eq!(c.nodes[0].reason.as_deref(), Some("disk"));
    assert_eq!(c.nodes[0].isolation_degraded.as_deref(), Some("no cgroups"));
    c.isolation_reported("n1", "cgroup/v1", None, 60);
    assert_eq!(c.nodes[0].reason.as_deref(), Some("disk"));
}

#[test]
fn a_preemptor_behind_the_head_of_the_queue_still_preempts() {
    let cfg = Config::from_toml(
        r#"
[scheduler]
preempt_type = "preempt/qos"
preempt_mode = "cancel"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "p"
nodes = "n1"
default = true
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    let mut high = crate::model::assoc::Qos::new("high");
    high.preempt = vec!["normal".into()];
    c.acct.assoc.qos.insert("high".into(), high);
    let four = |name: &str, qos: Option<&str>| {
        let mut s = spec(name);
        s.ntasks = Some(4);
        s.qos = qos.map(str::to_string);
        s
    };
    let running = submit(&mut c, four("r", None), ALICE, 0);
    c.schedule(0, &mut Effects::default());
    assert_eq!(c.jobs[&running].state, JobState::Running);
    // The head of the queue may preempt nothing; the job behind it may.
    let head = submit(&mut c, four("head", None), ALICE, 1);
    let behind = submit(&mut c, four("behind", Some("high")), ALICE, 2);
    c.jobs.get_mut(&head).unwrap().priority = 100;
    c.jobs.get_mut(&behind).unwrap().priority = 10;
    c.schedule(3, &mut Effects::default());
    assert_eq!(c.jobs[&head].state, JobState::Pending);
    assert_eq!(
        c.jobs[&running].preempt.map(|p| p.preemptor),
        Some(behind),
        "head {:?}, behind {:?}",
        c.jobs[&head].reason,
        c.jobs[&behind].reason
    );
}

#[test]
fn priority_updates_follow_slurm_permissions_and_stick() {
    let mut c = cluster();
    let mut big = spec("big");
    big.ntasks = Some(4);
    let big = submit(&mut c, big, ALICE, 0);
    crate::ctld::testutil::pass(&mut c, 1);
    assert_eq!(c.jobs[&big].state, JobState::Running);
    let id = submit(&mut c, spec("p"), ALICE, 2);
    let mut fx = Effects::default();
    // Root (an operator) may set any priority, and later passes do not recompute it.
    c.update_job_at(id, None, &[JobUpdate::Priority(5000)], ROOT, 10, &mut fx)
        .unwrap();
    assert_eq!(c.jobs[&id].priority, 5000);
    assert_eq!(c.jobs[&id].spec.nice, 0);
    crate::ctld::testutil::pass(&mut c, 20);
    assert_eq!(c.jobs[&id].state, JobState::Pending);
    assert_eq!(c.jobs[&id].priority, 5000);
    let held = {
        let mut s = spec("q");
        s.hold = true;
        submit(&mut c, s, ALICE, 30)
    };
    let other = submit(&mut c, spec("r"), ALICE, 30);
    let before = c.jobs[&other].priority;
    // The owner may lower the priority, never raise it.
    assert_eq!(
        c.update_job_at(
            other,
            None,
            &[JobUpdate::Priority(before + 1)],
            ALICE,
            40,
            &mut fx
        ),
        Err(SlurmError::AccessDenied)
    );
    c.update_job_at(other, None, &[JobUpdate::Priority(1)], ALICE, 40, &mut fx)
        .unwrap();
    assert_eq!(c.jobs[&other].priority, 1);
    assert!(c.jobs[&other].priority_set);
    // Priority=0 holds; an operator's non-zero priority releases a held job.
    c.update_job_at(other, None, &[JobUpdate::Priority(0)], ALICE, 50, &mut fx)
        .unwrap();
    assert_eq!(c.jobs[&other].hold, Some(HoldKind::User));
    assert_eq!(c.jobs[&other].reason, Reason::JobHeldUser);
    assert_eq!(
        c.update_job_at(held, None, &[JobUpdate::Priority(7)], ALICE, 60, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    c.update_job_at(held, None, &[JobUpdate::Priority(7)], ROOT, 60, &mut fx)
        .unwrap();
    let h = &c.jobs[&held];
    assert_eq!((h.hold, h.priority, h.eligible_time), (None, 7, Some(60)));
}

#[test]
fn allow_groups_admits_by_the_group_data_the_edge_looked_up() {
    let mut c = cluster();
    c.partitions[0].allow_groups = Some(vec!["lab".into(), "4242".into()]);
    let refused = |c: &Cluster, who: Caller| {
        c.resolve(spec("g"), who, 0, &names).err()
            == Some(SlurmError::Other(
                "User's group not permitted to use this partition".into(),
            ))
    };
    // Nothing looked up: alice (gid 2001) is in neither group.
    assert!(refused(&c, ALICE));
    // The group database says `lab` is gid 77 and alice is a member: admitted.
    c.groups.gid_of.insert("lab".into(), 77);
    c.groups.member_gids.insert(ALICE.uid, vec![ALICE.gid, 77]);
    assert!(!refused(&c, ALICE));
    // A numeric entry matches the primary gid; operators pass regardless.
    c.groups.member_gids.clear();
    assert!(refused(&c, ALICE));
    assert!(!refused(
        &c,
        Caller {
            uid: ALICE.uid,
            gid: 4242
        }
    ));
    assert!(!refused(&c, ROOT));
}

#[test]
fn priority_tres_wholes_are_each_partitions_nodes_with_the_clusters_licenses() {
    let c = crate::ctld::testutil::two_nodes(
        r#"
[priority]
weight_tres = "cpu=1"
[licenses]
matlab = 3
[[partitions]]
name = "one"
nodes = "n1"
default = true
[[partitions]]
name = "both"
nodes = "n[1-2]"
"#,
    );
    let ctx = c.priority_context(0);
    let one = &ctx.partition_tres["one"];
    let both = &ctx.partition_tres["both"];
    assert_eq!((one["cpu"], one["node"], one["mem"]), (2, 1, 1000));
    assert_eq!((both["cpu"], both["node"], both["mem"]), (4, 2, 2000));
    assert_eq!((one["license/matlab"], both["license/matlab"]), (3, 3));
}

#[test]
fn test_only_names_nodes_even_behind_more_jobs_than_backfill_tests() {
    use crate::ctld::testutil::{cluster_with, pass, spec, submit};
    let mut c = cluster_with(2, "[scheduler]\nbf_max_job_test = 2\n");
    // Two running jobs fill the node; four more wait (backfill looks at two of them).
    for i in 0..6 {
        let mut s = spec(&format!("j{i}"));
        s.ntasks = Some(1);
        submit(&mut c, s, ALICE, 0);
    }
    assert_eq!(pass(&mut c, 0).len(), 2);
    let mut held = spec("probe");
    held.hold = true;
    let job = c.resolve(held, ALICE, 1, &names).unwrap();
    assert!(job.hold.is_some());
    let t = c.test_only(job, 1);
    assert_eq!((t.nodes.as_str(), t.partition.as_str()), ("n1", "debug"));
    assert!(
        t.start > 1,
        "it waits for a running job to end: {}",
        t.start
    );
}

#[test]
fn no_kill_job_on_a_failed_node_ends_node_fail_as_in_slurm() {
    // Slurm keeps a --no-kill job only on the nodes that still answer; a job whose
    // one node (its batch host) failed ends NODE_FAIL all the same.
    let mut c = cluster();
    let mut s = spec("nokill");
    s.requeue = Some(false);
    s.no_kill = true;
    let a = submit(&mut c, s, ALICE, 10);
    assert!(c.jobs[&a].spec.no_kill);
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(launches(&fx), vec![a]);
    let mut fx = Effects::default();
    assert_eq!(c.nodes_failed(&["n1".to_string()], 50, &mut fx), vec![a]);
    let ja = &c.jobs[&a];
    assert_eq!(
        (ja.state, &ja.reason),
        (JobState::NodeFail, &Reason::NodeDown)
    );
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    c.sanity_check().unwrap();
}

#[test]
fn no_kill_job_over_two_nodes_keeps_the_node_that_answers() {
    // Slurm with --no-kill (kill_on_node_fail off): a failed node that is not the batch
    // host is taken out of the job, which runs on; without it the job ends NODE_FAIL.
    let cfg = Config::from_toml(
        r#"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[nodes]]
name = "n2"
cpus = 4
memory = 4000
[[partitions]]
name = "debug"
nodes = "n[1-2]"
default = true
max_time = "1:00:00"
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    for n in &mut c.nodes {
        n.state = NodeState::Up;
    }
    let mut ids = Vec::new();
    for no_kill in [true, false] {
        let mut s = spec("wide");
        s.requeue = Some(false);
        s.no_kill = no_kill;
        s.nodes_min = Some(2);
        s.ntasks = Some(2);
        s.ntasks_per_node = Some(1);
        ids.push(submit(&mut c, s, ALICE, 10));
    }
    let mut fx = Effects::default();
    c.schedule(10, &mut fx);
    assert_eq!(launches(&fx), ids);
    let mut fx = Effects::default();
    let mut hit = c.nodes_failed(&["n2".to_string()], 50, &mut fx);
    hit.sort();
    assert_eq!(hit, ids);
    let kept = &c.jobs[&ids[0]];
    assert_eq!(kept.state, JobState::Running);
    let a = kept.alloc.as_ref().unwrap();
    assert_eq!(
        (a.nodes.as_slice(), a.cpus.len()),
        (&["n1".to_string()][..], 1)
    );
    assert!(fx.persist.iter().any(|j| j.id == ids[0]));
    let ended = &c.jobs[&ids[1]];
    assert_eq!(ended.state, JobState::NodeFail);
    assert_eq!(c.nodes[1].alloc_cpus, 0);
    c.sanity_check().unwrap();
}

#[test]
fn priority_at_submit_is_for_operators_and_stays_fixed() {
    let mut c = cluster();
    let mut s = spec("p");
    s.priority = Some(4242);
    // slurmctld: only operators may set a job's priority.
    assert_eq!(
        c.resolve(s.clone(), ALICE, 0, &names).unwrap_err(),
        SlurmError::AccessDenied
    );
    let id = submit(&mut c, s, ROOT, 0);
    let j = &c.jobs[&id];
    assert_eq!((j.priority, j.priority_set, j.hold), (4242, true, None));
    // A later recomputation leaves it alone.
    let mut fx = Effects::default();
    c.schedule(500, &mut fx);
    assert_eq!(c.jobs[&id].priority, 4242);
    // 0 holds the job, as an operator's hold.
    let mut z = spec("z");
    z.priority = Some(0);
    let id = submit(&mut c, z, ROOT, 0);
    let j = &c.jobs[&id];
    assert_eq!(
        (j.priority, j.hold, &j.reason),
        (0, Some(HoldKind::Admin), &Reason::JobHeldAdmin)
    );
}

#[test]
fn reconfigure_replaces_partitions_and_declarations_keeping_jobs() {
    let mut c = cluster();
    let id = submit(&mut c, spec("r"), ALICE, 0);
    let mut fx = Effects::default();
    c.schedule(0, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    let text = |extra: &str| {
        format!(
            "[[nodes]]\nname = \"n1\"\ncpus = 4\nmemory = 4000\nfeatures = [\"fast\"]\n\
             tmp_disk = 512\n[[partitions]]\nname = \"debug\"\nnodes = \"n1\"\n\
             default = true\nmax_time = \"2:00:00\"\n{extra}"
        )
    };
    let p = Path::new("/etc/sluice/sluice.toml");
    let cfg = Config::from_toml(
        &text("[[partitions]]\nname = \"long\"\nnodes = \"n1\"\n"),
        p,
    )
    .unwrap();
    c.reconfigure(&cfg).unwrap();
    let names: Vec<&str> = c.partitions.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["debug", "long"]);
    assert_eq!(c.partitions[0].max_time, TimeLimit::Minutes(120));
    let n = &c.nodes[0];
    assert_eq!(
        (n.features.clone(), n.tmp_disk),
        (vec!["fast".to_string()], 512)
    );
    assert_eq!(n.partitions, ["debug", "long"]);
    // The running job and its node's allocation are untouched.
    assert_eq!(c.jobs[&id].state, JobState::Running);
    assert_eq!(c.nodes[0].alloc_cpus, 1);
    c.sanity_check().unwrap();

    // Refused, changing nothing: a node added, a busy partition removed, a renamed
    // cluster.
    let added = Config::from_toml(&format!("{}[[nodes]]\nname = \"n2\"\n", text("")), p).unwrap();
    let e = c.reconfigure(&added).unwrap_err();
    assert!(e.contains("added: n2; removed: none"), "{e}");
    let gone =
        Config::from_toml(&text("").replace("name = \"debug\"", "name = \"other\""), p).unwrap();
    let e = c.reconfigure(&gone).unwrap_err();
    assert!(e.contains("partition debug still has job"), "{e}");
    let renamed = Config::from_toml(&format!("cluster_name = \"x\"\n{}", text("")), p).unwrap();
    assert!(
        c.reconfigure(&renamed)
            .unwrap_err()
            .contains("cluster_name")
    );
    assert_eq!(c.partitions.len(), 2);
    c.sanity_check().unwrap();
}

#[test]
fn more_licenses_than_the_cluster_has_are_refused_at_submit() {
    let c = crate::ctld::testutil::cluster_with(2, "[licenses]\nmatlab = 4\n");
    let with = |n: u32| {
        let mut s = spec("lic");
        s.licenses = crate::model::gres::parse_licenses(&format!("matlab:{n}")).unwrap();
        c.resolve(s, ALICE, 1, &names)
    };
    assert!(with(4).is_ok());
    assert_eq!(
        with(5).unwrap_err().to_string(),
        "Invalid license specification"
    );
}
