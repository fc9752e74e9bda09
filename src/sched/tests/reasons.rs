//! Every pending reason the core gives, each from the smallest scenario that shows it.

use super::*;

fn nodes1() -> (Vec<Node>, Vec<Partition>) {
    (vec![node("n1", 4, 4000)], vec![part("p", &["n1"])])
}

fn reason(j: &Job, extra: &[&Job], nodes: &[Node], parts: &[Partition]) -> Reason {
    let mut refs: Vec<&Job> = vec![j];
    refs.extend_from_slice(extra);
    reason_of(&schedule(&refs, nodes, parts, 100), j.id).expect("pending")
}

#[test]
fn priority_and_resources() {
    let (n, p) = nodes1();
    let big = job(1, 4, 10);
    let mut small = job(2, 4, 10);
    small.priority = 50;
    let r = running(9, "n1", 1, 0);
    assert_eq!(reason(&big, &[&small, &r], &n, &p), Reason::Resources);
    assert_eq!(reason(&small, &[&big, &r], &n, &p), Reason::Priority);
}

#[test]
fn held_and_begin_time() {
    let (n, p) = nodes1();
    let mut j = job(1, 1, 10);
    j.hold = Some(HoldKind::User);
    assert_eq!(reason(&j, &[], &n, &p), Reason::JobHeldUser);
    j.hold = Some(HoldKind::Admin);
    assert_eq!(reason(&j, &[], &n, &p), Reason::JobHeldAdmin);
    j.hold = None;
    j.eligible_time = Some(200);
    assert_eq!(reason(&j, &[], &n, &p), Reason::BeginTime);
}

#[test]
fn partition_state_and_limits() {
    let (n, mut p) = nodes1();
    let j = job(1, 1, 10);
    p[0].state = PartitionState::Down;
    assert_eq!(reason(&j, &[], &n, &p), Reason::PartitionDown);
    p[0].state = PartitionState::Inactive;
    assert_eq!(reason(&j, &[], &n, &p), Reason::PartitionInactive);
    p[0].state = PartitionState::Drain;
    assert!(starts(&schedule(&[&j], &n, &p, 100)).contains(&1));
    p[0].state = PartitionState::Up;
    p[0].max_time = TimeLimit::Minutes(5);
    assert_eq!(reason(&j, &[], &n, &p), Reason::PartitionTimeLimit);
    let mut unl = job(2, 1, 10);
    unl.time_limit = TimeLimit::Unlimited;
    assert_eq!(reason(&unl, &[], &n, &p), Reason::PartitionTimeLimit);
    p[0].max_time = TimeLimit::Unlimited;
    p[0].max_nodes = Some(1);
    let mut two = job(3, 2, 10);
    two.req_nodes = 2;
    assert_eq!(reason(&two, &[], &n, &p), Reason::PartitionNodeLimit);
    p[0].max_nodes = None;
    p[0].min_nodes = 2;
    let n2 = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let mut p2 = part("p", &["n1", "n2"]);
    p2.min_nodes = 2;
    assert_eq!(reason(&j, &[], &n2, &[p2]), Reason::PartitionNodeLimit);
    let wide = job(4, 5, 10);
    p[0].min_nodes = 0;
    assert_eq!(reason(&wide, &[], &n, &p), Reason::PartitionConfig);
    let mut nopart = job(5, 1, 10);
    nopart.partition = "nosuch".into();
    assert_eq!(reason(&nopart, &[], &n, &p), Reason::PartitionConfig);
}

#[test]
fn node_not_available_and_constraints() {
    let (mut n, p) = nodes1();
    let mut j = job(1, 1, 10);
    j.spec.nodelist = Some("n1".into());
    n[0].state = NodeState::Down;
    assert_eq!(reason(&j, &[], &n, &p), Reason::ReqNodeNotAvail);
    n[0].state = NodeState::Up;
    j.spec.nodelist = None;
    j.spec.constraint = Some("nvlink".into());
    assert_eq!(reason(&j, &[], &n, &p), Reason::BadConstraints);
}

#[test]
fn reason_texts() {
    assert_eq!(Reason::Licenses.as_str(), "Licenses");
    assert_eq!(
        Reason::NodesReserved.as_str(),
        "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
    );
}

#[test]
fn tiers_go_first() {
    let n = vec![node("n1", 1, 4000)];
    let mut lo = part("lo", &["n1"]);
    lo.priority_tier = 1;
    let mut hi = part("hi", &["n1"]);
    hi.priority_tier = 5;
    hi.default = false;
    let mut a = job(1, 1, 10);
    a.partition = "lo".into();
    a.priority = 1000;
    let mut b = job(2, 1, 10);
    b.partition = "hi".into();
    b.priority = 1;
    let d = schedule(&[&a, &b], &n, &[lo, hi], 0);
    assert_eq!(starts(&d), vec![2]);
}

#[test]
fn multi_partition_job_runs_where_it_fits() {
    let n = vec![node("n1", 1, 4000), node("n2", 1, 4000)];
    let a_part = part("a", &["n1"]);
    let mut b_part = part("b", &["n2"]);
    b_part.default = false;
    let r = running(9, "n1", 1, 0);
    let mut j = job(1, 1, 10);
    j.partition = "a".into();
    j.spec.partition = Some("a,b".into());
    let d = schedule(&[&j, &r], &n, &[a_part, b_part], 0);
    match &d[0] {
        Decision::Start {
            partition, alloc, ..
        } => {
            assert_eq!(partition, "b");
            assert_eq!(alloc.nodes, ["n2"]);
        }
        o => panic!("{o:?}"),
    }
}
