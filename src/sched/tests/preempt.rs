//! Preemption planning: who may preempt whom, the fewest and cheapest victims, what
//! each mode frees, and when suspended jobs resume.

use super::*;
use crate::model::Suspension;
use crate::model::preempt::{PreemptConfig, PreemptMode, PreemptType, Preemption, QosPreempt};
use crate::sched::preempt::{Action, Victim, plan, resumable};

fn cfg(t: PreemptType, mode: PreemptMode) -> SchedConfig {
    SchedConfig {
        preempt: PreemptConfig {
            preempt_type: t,
            mode,
            exempt_time: 0,
        },
        ..SchedConfig::default()
    }
}

/// Partitions `low` (tier 1) and `high` (tier 2) over the same nodes.
fn tiers(nodes: &[&str]) -> Vec<Partition> {
    let mut low = part("low", nodes);
    low.priority_tier = 1;
    let mut high = part("high", nodes);
    high.priority_tier = 2;
    high.default = false;
    vec![low, high]
}

fn in_part(mut j: Job, p: &str) -> Job {
    j.partition = p.into();
    j
}

fn with_prio(mut j: Job, prio: u32) -> Job {
    j.priority = prio;
    j
}

fn decide(
    jobs: &[&Job],
    nodes: &[Node],
    parts: &[Partition],
    c: &SchedConfig,
    qos: &[QosPreempt],
    cand: &Job,
    now: i64,
) -> Option<Action> {
    let input = Input {
        jobs,
        nodes,
        partitions: parts,
        licenses: &[],
        config: c,
        now,
        backfill: false,
        limits: None,
        reservations: &[],
    };
    plan(&input, qos, &[cand])
}

fn victims(a: Option<Action>) -> Vec<Victim> {
    match a {
        Some(Action::Preempt { victims, .. }) => victims,
        other => panic!("expected a preemption, got {other:?}"),
    }
}

fn ids(v: &[Victim]) -> Vec<u32> {
    v.iter().map(|v| v.job_id).collect()
}

#[test]
fn takes_the_fewest_lowest_priority_victims_that_let_the_job_start() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = tiers(&["n1"]);
    // Lowest priority first would take 2 (1 CPU), then 1 (2 CPUs); 1 alone is enough,
    // so 2 is given back. 3 has the highest priority and is never needed.
    let a = with_prio(in_part(running(1, "n1", 2, 10), "low"), 10);
    let b = with_prio(in_part(running(2, "n1", 1, 10), "low"), 5);
    let c = with_prio(in_part(running(3, "n1", 1, 10), "low"), 50);
    let h = in_part(job(9, 2, 10), "high");
    let jobs = [&a, &b, &c, &h];
    let conf = cfg(PreemptType::PartitionPrio, PreemptMode::Cancel);
    let v = victims(decide(&jobs, &nodes, &parts, &conf, &[], &h, 100));
    assert_eq!(ids(&v), vec![1]);
    assert_eq!(v[0].mode, PreemptMode::Cancel);
    // Needing 3 CPUs, two victims are needed: the two cheapest that suffice.
    let h3 = in_part(job(9, 3, 10), "high");
    let jobs = [&a, &b, &c, &h3];
    let mut v = ids(&victims(decide(
        &jobs,
        &nodes,
        &parts,
        &conf,
        &[],
        &h3,
        100,
    )));
    v.sort_unstable();
    assert_eq!(v, vec![1, 2]);
}

#[test]
fn equal_tiers_never_preempt_and_nothing_is_preempted_in_vain() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = tiers(&["n1"]);
    let conf = cfg(PreemptType::PartitionPrio, PreemptMode::Cancel);
    // Same tier: the running job stays.
    let r = in_part(running(1, "n1", 4, 10), "high");
    let h = in_part(job(9, 2, 10), "high");
    assert_eq!(decide(&[&r, &h], &nodes, &parts, &conf, &[], &h, 100), None);
    // A lower-tier job could go, but a same-tier one still holds what is needed.
    let low = in_part(running(1, "n1", 1, 10), "low");
    let same = in_part(running(2, "n1", 3, 10), "high");
    let h4 = in_part(job(9, 4, 10), "high");
    assert_eq!(
        decide(&[&low, &same, &h4], &nodes, &parts, &conf, &[], &h4, 100),
        None
    );
    // preempt/none: nothing, whatever the tiers.
    let off = cfg(PreemptType::None, PreemptMode::Cancel);
    let l4 = in_part(running(1, "n1", 4, 10), "low");
    assert_eq!(decide(&[&l4, &h], &nodes, &parts, &off, &[], &h, 100), None);
    // A partition whose jobs are PreemptMode=OFF.
    let mut p2 = tiers(&["n1"]);
    p2[0].preempt_mode = Some(PreemptMode::Off);
    assert_eq!(decide(&[&l4, &h], &nodes, &p2, &conf, &[], &h, 100), None);
}

#[test]
fn preempt_exempt_time_protects_young_jobs() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = tiers(&["n1"]);
    let mut conf = cfg(PreemptType::PartitionPrio, PreemptMode::Requeue);
    conf.preempt.exempt_time = 300;
    let old = in_part(running(1, "n1", 2, 0), "low");
    let young = in_part(running(2, "n1", 2, 900), "low");
    let h = in_part(job(9, 2, 10), "high");
    // At 1000 s, job 2 has run 100 s (exempt) and job 1 1000 s.
    let v = victims(decide(
        &[&old, &young, &h],
        &nodes,
        &parts,
        &conf,
        &[],
        &h,
        1000,
    ));
    assert_eq!(ids(&v), vec![1]);
    assert_eq!(v[0].mode, PreemptMode::Requeue);
    // Both exempt: nothing.
    let h4 = in_part(job(9, 4, 10), "high");
    assert_eq!(
        decide(&[&old, &young, &h4], &nodes, &parts, &conf, &[], &h4, 1000),
        None
    );
}

#[test]
fn suspend_frees_cpus_only_and_the_preemptor_starts_on_them() {
    let nodes = vec![node("n1", 4, 4000)];
    let mut parts = tiers(&["n1"]);
    parts[0].preempt_mode = Some(PreemptMode::Suspend);
    let conf = cfg(PreemptType::PartitionPrio, PreemptMode::Cancel);
    let low = in_part(running(1, "n1", 4, 10), "low");
    let h = in_part(job(9, 4, 10), "high");
    let v = victims(decide(&[&low, &h], &nodes, &parts, &conf, &[], &h, 100));
    assert_eq!(
        v,
        vec![Victim {
            job_id: 1,
            mode: PreemptMode::Suspend,
            grace: 0
        }]
    );
    // Once suspended, the preemptor starts on its CPUs.
    let mut sus = low.clone();
    sus.state = JobState::Suspended;
    sus.suspension = Some(Suspension {
        since: 100,
        preemptor: Some(9),
    });
    match decide(&[&sus, &h], &nodes, &parts, &conf, &[], &h, 101) {
        Some(Action::Start { job_id, alloc, .. }) => {
            assert_eq!(job_id, 9);
            assert_eq!(alloc.cpus, vec![4]);
        }
        other => panic!("expected a start, got {other:?}"),
    }
    // An ordinary pass does not give those CPUs away.
    let other = in_part(job(8, 1, 10), "low");
    let d = pass(&[&sus, &other], &nodes, &parts, &[], &conf, 101);
    assert_eq!(reason_of(&d.decisions, 8), Some(Reason::Resources));
    // The suspended job keeps its memory: a preemptor that needs it cannot use SUSPEND.
    let big_mem = in_part(job(9, 1, 3990), "high");
    assert_eq!(
        decide(&[&low, &big_mem], &nodes, &parts, &conf, &[], &big_mem, 100),
        None
    );
}

#[test]
fn qos_preempt_lists_decide_with_each_qos_mode_and_grace() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let conf = cfg(PreemptType::Qos, PreemptMode::Cancel);
    let qos = vec![
        QosPreempt {
            name: "high".into(),
            preempt: vec!["scavenger".into()],
            ..QosPreempt::default()
        },
        QosPreempt {
            name: "scavenger".into(),
            mode: Some(PreemptMode::Requeue),
            grace_time: 30,
            ..QosPreempt::default()
        },
        QosPreempt {
            name: "normal".into(),
            ..QosPreempt::default()
        },
    ];
    let mut normal = running(1, "n1", 2, 10);
    normal.qos = "normal".into();
    normal.priority = 1;
    let mut scav = running(2, "n1", 2, 10);
    scav.qos = "scavenger".into();
    scav.priority = 500;
    let mut h = job(9, 2, 10);
    h.qos = "high".into();
    // Only the scavenger job is in high's list, whatever the priorities.
    let v = victims(decide(
        &[&normal, &scav, &h],
        &nodes,
        &parts,
        &conf,
        &qos,
        &h,
        100,
    ));
    assert_eq!(
        v,
        vec![Victim {
            job_id: 2,
            mode: PreemptMode::Requeue,
            grace: 30
        }]
    );
    // While it is in its grace time, nothing more is preempted for the job.
    let mut going = scav.clone();
    going.preempt = Some(Preemption {
        time: 100,
        end: 130,
        requeue: true,
        preemptor: 9,
    });
    assert_eq!(
        decide(&[&normal, &going, &h], &nodes, &parts, &conf, &qos, &h, 110),
        None
    );
    // A normal-QOS job preempts nothing.
    let mut n = job(10, 2, 10);
    n.qos = "normal".into();
    assert_eq!(
        decide(&[&normal, &scav, &n], &nodes, &parts, &conf, &qos, &n, 100),
        None
    );
}

#[test]
fn suspended_jobs_resume_when_their_cpus_are_free() {
    let mut sus = running(1, "n1", 2, 10);
    sus.state = JobState::Suspended;
    sus.suspension = Some(Suspension {
        since: 20,
        preemptor: Some(9),
    });
    sus.alloc.as_mut().unwrap().cpu_ids = vec![vec![0, 1]];
    let mut pre = running(9, "n1", 1, 20);
    pre.alloc.as_mut().unwrap().cpu_ids = vec![vec![1]];
    let mut elsewhere = running(5, "n1", 2, 20);
    elsewhere.alloc.as_mut().unwrap().cpu_ids = vec![vec![2, 3]];
    assert_eq!(resumable(&[&sus, &pre, &elsewhere]), Vec::<u32>::new());
    assert_eq!(resumable(&[&sus, &elsewhere]), vec![1]);
    // An operator's suspension is only ended by an operator.
    let mut admin = sus.clone();
    admin.suspension = Some(Suspension {
        since: 20,
        preemptor: None,
    });
    assert_eq!(resumable(&[&admin]), Vec::<u32>::new());
}

#[test]
fn jobs_that_may_preempt_nothing_do_not_use_up_the_candidate_budget() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let conf = cfg(PreemptType::Qos, PreemptMode::Cancel);
    let qos = vec![
        QosPreempt {
            name: "high".into(),
            preempt: vec!["normal".into()],
            ..QosPreempt::default()
        },
        QosPreempt {
            name: "normal".into(),
            ..QosPreempt::default()
        },
    ];
    let mut r = running(1, "n1", 4, 10);
    r.priority = 1;
    // More higher-priority pending jobs than the budget, none of which may preempt.
    let ahead: Vec<Job> = (0..crate::sched::preempt::MAX_CANDIDATES as u32 + 10)
        .map(|k| with_prio(job(100 + k, 4, 10), 1000 - k))
        .collect();
    let mut h = with_prio(job(9, 4, 10), 5);
    h.qos = "high".into();
    let mut jobs: Vec<&Job> = vec![&r, &h];
    jobs.extend(ahead.iter());
    let input = Input {
        jobs: &jobs,
        nodes: &nodes,
        partitions: &parts,
        licenses: &[],
        config: &conf,
        now: 100,
        backfill: false,
        limits: None,
        reservations: &[],
    };
    let cands: Vec<&Job> = jobs[1..].to_vec();
    match plan(&input, &qos, &cands) {
        Some(Action::Preempt { preemptor, victims }) => {
            assert_eq!(preemptor, 9);
            assert_eq!(ids(&victims), vec![1]);
        }
        other => panic!("expected job 9 to preempt, got {other:?}"),
    }
}
