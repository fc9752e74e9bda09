//! Scheduler scenarios built from small node and job builders (the test kit), with
//! scenario files per area: selection, backfill, priority, reasons, properties.

mod backfill;
mod gres_bind;
mod preempt;
mod priority;
mod props;
mod reasons;
mod resv;
mod select;
mod streams;
mod topology;

use super::*;
use crate::model::{JobSpec, MemReq, NodeState, TimeLimit};

pub fn node(name: &str, cpus: u32, mem: u64) -> Node {
    let mut n = Node::new(name, cpus, mem);
    n.state = NodeState::Up;
    n
}

pub fn part(name: &str, nodes: &[&str]) -> Partition {
    let mut p = Partition::new(name, nodes.iter().map(|s| s.to_string()).collect());
    p.default = true;
    p
}

pub fn job(id: u32, tasks: u32, mem_per_cpu: u64) -> Job {
    Job {
        id,
        spec: JobSpec {
            name: format!("j{id}"),
            ..JobSpec::default()
        },
        user: "u".into(),
        group: "g".into(),
        partition: "p".into(),
        account: "a".into(),
        qos: "normal".into(),
        time_limit: TimeLimit::Minutes(10),
        req_cpus: tasks,
        req_tasks: tasks,
        req_nodes: 1,
        req_mem: MemReq::PerCpu(mem_per_cpu),
        priority: 100,
        submit_time: i64::from(id),
        eligible_time: Some(0),
        ..Job::default()
    }
}

/// A job running on `node` with `cpus` CPUs since `start` (10-minute limit).
pub fn running(id: u32, node: &str, cpus: u32, start: i64) -> Job {
    let mut j = job(id, cpus, 10);
    j.state = JobState::Running;
    j.start_time = Some(start);
    j.alloc = Some(Allocation {
        nodes: vec![node.into()],
        cpus: vec![cpus],
        mem_per_node: 10 * u64::from(cpus),
        ..Default::default()
    });
    j
}

/// Runs a full pass with `cfg` at `now`.
pub fn pass(
    jobs: &[&Job],
    nodes: &[Node],
    parts: &[Partition],
    licenses: &[(String, u32)],
    cfg: &SchedConfig,
    now: i64,
) -> Outcome {
    run(&Input {
        jobs,
        nodes,
        partitions: parts,
        licenses,
        config: cfg,
        now,
        backfill: true,
        limits: None,
        reservations: &[],
    })
}

/// The allocation a job got, or a panic naming what happened instead.
pub fn alloc_of(d: &[Decision], id: u32) -> Allocation {
    d.iter()
        .find_map(|d| match d {
            Decision::Start { job_id, alloc, .. } if *job_id == id => Some(alloc.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("job {id} did not start: {d:?}"))
}

pub fn starts(d: &[Decision]) -> Vec<u32> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Start { job_id, .. } => Some(*job_id),
            _ => None,
        })
        .collect()
}

pub fn reason_of(d: &[Decision], id: u32) -> Option<Reason> {
    d.iter().find_map(|d| match d {
        Decision::Pending { job_id, reason } if *job_id == id => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn fills_a_node_then_reports_resources_and_priority() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let jobs: Vec<Job> = (1..=6).map(|i| job(i, 1, 100)).collect();
    let refs: Vec<&Job> = jobs.iter().collect();
    let d = schedule(&refs, &nodes, &parts, 0);
    assert_eq!(starts(&d), vec![1, 2, 3, 4]);
    assert_eq!(reason_of(&d, 5), Some(Reason::Resources));
    assert_eq!(reason_of(&d, 6), Some(Reason::Priority));
}

#[test]
fn memory_limits_the_fit() {
    let nodes = vec![node("n1", 4, 1000)];
    let parts = vec![part("p", &["n1"])];
    let jobs = [job(1, 1, 600), job(2, 1, 600)];
    let refs: Vec<&Job> = jobs.iter().collect();
    let d = schedule(&refs, &nodes, &parts, 0);
    assert_eq!(starts(&d), vec![1]);
    assert_eq!(reason_of(&d, 2), Some(Reason::Resources));
}

#[test]
fn held_and_future_jobs_wait_with_their_reason() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let mut a = job(1, 1, 10);
    a.hold = Some(HoldKind::User);
    let mut b = job(2, 1, 10);
    b.hold = Some(HoldKind::Admin);
    let mut c = job(3, 1, 10);
    c.spec.begin = Some(100);
    c.eligible_time = Some(100);
    let jobs = [a, b, c];
    let refs: Vec<&Job> = jobs.iter().collect();
    let d = schedule(&refs, &nodes, &parts, 50);
    assert_eq!(reason_of(&d, 1), Some(Reason::JobHeldUser));
    assert_eq!(reason_of(&d, 2), Some(Reason::JobHeldAdmin));
    assert_eq!(reason_of(&d, 3), Some(Reason::BeginTime));
    let d = schedule(&refs, &nodes, &parts, 100);
    assert_eq!(starts(&d), vec![3]);
}

#[test]
fn partition_limits_give_static_reasons() {
    let nodes = vec![node("n1", 4, 4000)];
    let mut p = part("p", &["n1"]);
    p.max_time = TimeLimit::Minutes(5);
    let parts = vec![p.clone()];
    let long = job(1, 1, 10);
    let mut two_nodes = job(2, 2, 10);
    two_nodes.time_limit = TimeLimit::Minutes(1);
    two_nodes.req_nodes = 2;
    let mut too_wide = job(3, 8, 10);
    too_wide.time_limit = TimeLimit::Minutes(1);
    assert_eq!(
        static_reason(&long, &p, &nodes),
        Some(Reason::PartitionTimeLimit)
    );
    assert_eq!(
        static_reason(&two_nodes, &p, &nodes),
        Some(Reason::PartitionNodeLimit)
    );
    assert_eq!(
        static_reason(&too_wide, &p, &nodes),
        Some(Reason::PartitionConfig)
    );
    let jobs = [long, two_nodes, too_wide];
    let refs: Vec<&Job> = jobs.iter().collect();
    assert!(starts(&schedule(&refs, &nodes, &parts, 0)).is_empty());
}

#[test]
fn down_partition_and_drained_node() {
    let mut n = node("n1", 4, 4000);
    let mut p = part("p", &["n1"]);
    p.state = PartitionState::Down;
    let jobs = [job(1, 1, 10)];
    let refs: Vec<&Job> = jobs.iter().collect();
    let d = schedule(&refs, std::slice::from_ref(&n), std::slice::from_ref(&p), 0);
    assert_eq!(reason_of(&d, 1), Some(Reason::PartitionDown));
    p.state = PartitionState::Up;
    n.drain = true;
    let d = schedule(&refs, &[n], &[p], 0);
    assert_eq!(reason_of(&d, 1), Some(Reason::Resources));
}

#[test]
fn multi_node_block_layout_and_ntasks_per_node() {
    let nodes = vec![
        node("n1", 4, 4000),
        node("n2", 4, 4000),
        node("n3", 4, 4000),
    ];
    let parts = vec![part("p", &["n1", "n2", "n3"])];
    let mut a = job(1, 6, 10);
    a.req_nodes = 2;
    a.spec.nodes_min = Some(2);
    let refs = [&a];
    let d = schedule(&refs, &nodes, &parts, 0);
    match &d[0] {
        Decision::Start { alloc, .. } => {
            assert_eq!(alloc.nodes, vec!["n1", "n2"]);
            assert_eq!(alloc.cpus, vec![4, 2]);
        }
        other => panic!("{other:?}"),
    }
    let mut b = job(2, 6, 10);
    b.spec.ntasks_per_node = Some(2);
    let refs = [&b];
    let d = schedule(&refs, &nodes, &parts, 0);
    match &d[0] {
        Decision::Start { alloc, .. } => assert_eq!(alloc.cpus, vec![2, 2, 2]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nodelist_exclude_and_exclusive() {
    let nodes = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let busy = running(9, "n1", 1, 0);
    let mut a = job(1, 1, 10);
    a.spec.exclusive = true;
    let refs = [&a, &busy];
    match &schedule(&refs, &nodes, &parts, 0)[0] {
        Decision::Start { alloc, .. } => {
            assert_eq!(alloc.nodes, vec!["n2"]);
            assert_eq!(alloc.cpus, vec![4]);
        }
        other => panic!("{other:?}"),
    }
    let mut b = job(2, 1, 10);
    b.spec.exclude = Some("n1".into());
    let refs = [&b, &busy];
    assert!(
        matches!(&schedule(&refs, &nodes, &parts, 0)[0], Decision::Start { alloc, .. } if alloc.nodes == ["n2"])
    );
    let mut c = job(3, 1, 10);
    c.spec.nodelist = Some("n1".into());
    let mut drained = nodes.clone();
    drained[0].drain = true;
    let refs = [&c];
    assert_eq!(
        reason_of(&schedule(&refs, &drained, &parts, 0), 3),
        Some(Reason::ReqNodeNotAvail)
    );
    c.spec.nodelist = Some("n9".into());
    let refs = [&c];
    assert_eq!(
        reason_of(&schedule(&refs, &nodes, &parts, 0), 3),
        Some(Reason::PartitionConfig)
    );
}

#[test]
fn scheduling_is_deterministic() {
    let nodes = vec![node("n1", 3, 4000), node("n2", 5, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let jobs: Vec<Job> = (1..=10).map(|i| job(i, 1 + i % 3, 100)).collect();
    let refs: Vec<&Job> = jobs.iter().collect();
    assert_eq!(
        schedule(&refs, &nodes, &parts, 0),
        schedule(&refs, &nodes, &parts, 0)
    );
}

#[test]
fn nodes_not_yet_registered_do_not_make_jobs_impossible() {
    // Before its agent registers (here: unreachable, DOWN), a node's undeclared CPUs
    // and memory are unknown.
    let mut fresh = Node::new("n1", 0, 0);
    fresh.state = NodeState::Down;
    let p = part("p", &["n1"]);
    let j = job(1, 8, 1000);
    assert_eq!(static_reason(&j, &p, std::slice::from_ref(&fresh)), None);
    // Declared values still count.
    let mut declared = Node::new("n1", 4, 0);
    declared.state = NodeState::Unknown;
    assert_eq!(
        static_reason(&j, &p, std::slice::from_ref(&declared)),
        Some(Reason::PartitionConfig)
    );
    // Once registered, the detected size decides.
    let mut small = node("n1", 4, 4000);
    small.agent_start_time = Some(0);
    assert_eq!(
        static_reason(&j, &p, std::slice::from_ref(&small)),
        Some(Reason::PartitionConfig)
    );
    // And it is not started before it registers.
    let d = schedule(&[&j], std::slice::from_ref(&fresh), &[p], 0);
    assert!(starts(&d).is_empty());
}

#[test]
fn dependency_state_and_array_throttle_keep_jobs_pending() {
    use crate::model::array::{ArrayInfo, ArraySpec};
    use crate::model::depend::{DepState, Dependency};
    let nodes = vec![node("n1", 8, 8000)];
    let parts = vec![part("p", &["n1"])];
    let mut waiting = job(1, 1, 100);
    waiting.depend = Dependency::parse("afterok:9").unwrap();
    let mut never = job(2, 1, 100);
    never.depend = Dependency::parse("afterok:9").unwrap();
    never.depend.as_mut().unwrap().items[0].state = DepState::Failed;
    let mut throttled = job(3, 1, 100);
    let mut info = ArrayInfo::from_spec(&ArraySpec::parse("0-9%2", 1001).unwrap());
    info.running = 2;
    throttled.array = Some(Box::new(info.clone()));
    let mut room = job(4, 1, 100);
    info.running = 1;
    room.array = Some(Box::new(info));
    let mut satisfied = job(5, 1, 100);
    satisfied.depend = Dependency::parse("afterany:9").unwrap();
    satisfied.depend.as_mut().unwrap().items[0].state = DepState::Fulfilled;
    let jobs = [&waiting, &never, &throttled, &room, &satisfied];
    let d = schedule(&jobs, &nodes, &parts, 10);
    let reason = |id: u32| {
        d.iter().find_map(|x| match x {
            Decision::Pending { job_id, reason } if *job_id == id => Some(reason.clone()),
            _ => None,
        })
    };
    assert_eq!(reason(1), Some(Reason::Dependency));
    assert_eq!(reason(2), Some(Reason::DependencyNeverSatisfied));
    assert_eq!(reason(3), Some(Reason::JobArrayTaskLimit));
    let started: Vec<u32> = d
        .iter()
        .filter_map(|x| match x {
            Decision::Start { job_id, .. } => Some(*job_id),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![4, 5]);
}

#[test]
fn the_main_done_mark_comes_once_and_changes_nothing() {
    // One running job fills n1; a 1-CPU job behind a blocked 2-CPU one is backfilled.
    let nodes = [node("n1", 2, 4000)];
    let parts = [part("p", &["n1"])];
    let r = running(1, "n1", 2, 0);
    let big = job(2, 2, 100);
    let jobs = [&r, &big];
    let cfg = SchedConfig::default();
    let input = Input {
        jobs: &jobs,
        nodes: &nodes,
        partitions: &parts,
        licenses: &[],
        config: &cfg,
        now: 10,
        backfill: true,
        limits: None,
        reservations: &[],
    };
    let mut marks = 0;
    let marked = run_marked(&input, &mut || marks += 1);
    assert_eq!(marks, 1);
    let plain = run(&input);
    assert_eq!(marked.decisions, plain.decisions);
    assert_eq!(marked.stats, plain.stats);
}
