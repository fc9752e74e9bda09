//! Topology-aware placement: best-fit leaf, lowest switch level, blocks, and the
//! `--switches` wait with its fallback.

use super::*;
use crate::model::topology::{Block, Switch, Topology};

fn sw(name: &str, nodes: &str, children: &str) -> Switch {
    let list = |s: &str| {
        if s.is_empty() {
            Vec::new()
        } else {
            crate::model::hostlist::expand(s).unwrap()
        }
    };
    Switch {
        name: name.into(),
        nodes: list(nodes),
        switches: list(children),
        link_speed: 1,
    }
}

fn cluster(n: usize) -> (Vec<Node>, Vec<Partition>) {
    let nodes: Vec<Node> = (1..=n)
        .map(|i| node(&format!("n{i:02}"), 4, 4000))
        .collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let parts = vec![part("p", &names)];
    (nodes, parts)
}

fn cfg(t: Topology) -> SchedConfig {
    SchedConfig {
        topology: t,
        bf_resolution: 1,
        ..SchedConfig::default()
    }
}

/// Three leaves of four nodes each under one core switch.
fn three_leaves() -> Topology {
    Topology {
        switches: vec![
            sw("s0", "n[01-04]", ""),
            sw("s1", "n[05-08]", ""),
            sw("s2", "n[09-12]", ""),
            sw("top", "", "s[0-2]"),
        ],
        ..Topology::default()
    }
}

/// A job of `nodes` whole nodes (4 CPUs each).
fn wide(id: u32, nodes: u32) -> Job {
    let mut j = job(id, nodes * 4, 10);
    j.req_nodes = nodes;
    j.spec.nodes_min = Some(nodes);
    j.req_cpus = nodes * 4;
    j
}

fn busy(ids: std::ops::RangeInclusive<u32>, nodes: &[&str]) -> Vec<Job> {
    ids.zip(nodes).map(|(id, n)| running(id, n, 4, 0)).collect()
}

fn nodes_of(d: &[Decision], id: u32) -> Vec<String> {
    alloc_of(d, id).nodes
}

#[test]
fn picks_the_best_fitting_leaf() {
    let (nodes, parts) = cluster(12);
    // s0 has 2 free nodes, s1 4, s2 3.
    let mut jobs = busy(100..=102, &["n01", "n02", "n09"]);
    jobs.push(wide(1, 3));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(three_leaves()), 0);
    // s2 (3 free) is the tightest leaf that holds 3 nodes; s1 stays whole.
    assert_eq!(nodes_of(&o.decisions, 1), ["n10", "n11", "n12"]);

    let mut jobs = busy(100..=102, &["n01", "n02", "n09"]);
    jobs.push(wide(2, 2));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(three_leaves()), 0);
    assert_eq!(nodes_of(&o.decisions, 2), ["n03", "n04"]);
}

#[test]
fn a_one_node_job_goes_to_the_fullest_leaf() {
    let (nodes, parts) = cluster(12);
    let mut jobs = busy(100..=102, &["n05", "n06", "n07"]);
    jobs.push(job(3, 1, 10));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(three_leaves()), 0);
    // Without topology it would take n01 (first in order); s1 has one free node.
    assert_eq!(nodes_of(&o.decisions, 3), ["n08"]);
}

#[test]
fn minimises_the_highest_switch_level() {
    let (nodes, parts) = cluster(16);
    let t = Topology {
        switches: vec![
            sw("s0", "n[01-04]", ""),
            sw("s1", "n[05-08]", ""),
            sw("s2", "n[09-12]", ""),
            sw("s3", "n[13-16]", ""),
            sw("a", "", "s[0-1]"),
            sw("b", "", "s[2-3]"),
            sw("top", "", "a,b"),
        ],
        ..Topology::default()
    };
    // One node busy under b: b has 7 free nodes, a 8; a 6-node job fits either at
    // level 1, and the tighter b is chosen, filling its emptiest leaf (s3) first.
    let mut jobs = busy(100..=100, &["n09"]);
    jobs.push(wide(1, 6));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(t.clone()), 0);
    let got = nodes_of(&o.decisions, 1);
    assert_eq!(got, ["n13", "n14", "n15", "n16", "n10", "n11"]);

    // Nine nodes fit under no level-1 switch: the job goes up to the core.
    let jobs = [wide(2, 9)];
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(t), 0);
    assert_eq!(nodes_of(&o.decisions, 2).len(), 9);
}

#[test]
fn a_job_no_switch_holds_still_runs_across_a_forest() {
    let (nodes, parts) = cluster(8);
    let t = Topology {
        switches: vec![sw("s0", "n[01-04]", ""), sw("s1", "n[05-08]", "")],
        ..Topology::default()
    };
    let jobs = [wide(1, 6)];
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(t), 0);
    assert_eq!(nodes_of(&o.decisions, 1).len(), 6);
}

#[test]
fn switches_wait_then_fall_back() {
    let (nodes, parts) = cluster(12);
    // Every leaf has one busy node: 4 whole nodes only exist across two leaves.
    let mut jobs = busy(100..=102, &["n01", "n05", "n09"]);
    let mut j = wide(1, 4);
    j.submit_time = 1000;
    j.eligible_time = Some(1000);
    j.spec.switches = Some(1);
    j.spec.switch_wait = Some(60);
    jobs.push(j);
    let refs: Vec<&Job> = jobs.iter().collect();
    let c = cfg(three_leaves());
    let o = pass(&refs, &nodes, &parts, &[], &c, 1030);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
    // After the wait it takes what there is.
    let o = pass(&refs, &nodes, &parts, &[], &c, 1060);
    let got = nodes_of(&o.decisions, 1);
    assert_eq!(got.len(), 4);
    let leaves: std::collections::BTreeSet<u32> = got
        .iter()
        .map(|n| (n[1..].parse::<u32>().unwrap() - 1) / 4)
        .collect();
    assert_eq!(leaves.len(), 2, "{got:?}");
    // --switches=2 is satisfied at once.
    let mut two = jobs.clone();
    two.last_mut().unwrap().spec.switches = Some(2);
    let refs: Vec<&Job> = two.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &c, 1000);
    assert_eq!(nodes_of(&o.decisions, 1).len(), 4);
}

#[test]
fn the_switch_wait_is_capped_by_max_switch_wait() {
    let (nodes, parts) = cluster(12);
    let mut jobs = busy(100..=102, &["n01", "n05", "n09"]);
    let mut j = wide(1, 4);
    j.eligible_time = Some(0);
    j.spec.switches = Some(1);
    j.spec.switch_wait = Some(100_000);
    jobs.push(j);
    let refs: Vec<&Job> = jobs.iter().collect();
    let mut c = cfg(three_leaves());
    c.max_switch_wait = 300;
    let o = pass(&refs, &nodes, &parts, &[], &c, 299);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
    let o = pass(&refs, &nodes, &parts, &[], &c, 300);
    assert_eq!(nodes_of(&o.decisions, 1).len(), 4);
    // Without @wait, max_switch_wait is the wait.
    let mut jobs2 = jobs.clone();
    jobs2.last_mut().unwrap().spec.switch_wait = None;
    let refs: Vec<&Job> = jobs2.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &c, 299);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Resources));
}

#[test]
fn backfill_does_not_start_a_job_waiting_for_switches() {
    // The job is behind a blocked higher-priority one, so only backfill could start it.
    let (nodes, parts) = cluster(12);
    let mut jobs = busy(100..=102, &["n01", "n05", "n09"]);
    let mut big = wide(1, 12);
    big.priority = 1000;
    jobs.push(big);
    let mut j = wide(2, 4);
    j.time_limit = TimeLimit::Minutes(5);
    j.spec.switches = Some(1);
    j.spec.switch_wait = Some(60);
    jobs.push(j);
    let refs: Vec<&Job> = jobs.iter().collect();
    let c = cfg(three_leaves());
    let o = pass(&refs, &nodes, &parts, &[], &c, 30);
    assert!(!starts(&o.decisions).contains(&2), "{:?}", o.decisions);
}

#[test]
fn blocks_take_the_smallest_aligned_group() {
    let (nodes, parts) = cluster(16);
    let t = Topology {
        blocks: (0..4)
            .map(|b| Block {
                name: format!("b{b}"),
                nodes: (1..=4).map(|k| format!("n{:02}", b * 4 + k)).collect(),
            })
            .collect(),
        block_sizes: vec![4, 8, 16],
        ..Topology::default()
    };
    t.validate(&nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>())
        .unwrap();
    // b0 has one node busy; a 6-node job needs a pair of blocks: (b0,b1) has 7 free,
    // (b2,b3) 8, so the tighter pair is taken.
    let mut jobs = busy(100..=100, &["n01"]);
    jobs.push(wide(1, 6));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(t.clone()), 0);
    let got = nodes_of(&o.decisions, 1);
    assert!(
        got.iter()
            .all(|n| n.as_str() >= "n02" && n.as_str() <= "n08"),
        "{got:?}"
    );
    // A 4-node job fits one whole block: not b0 (3 free), the first whole one.
    let mut jobs = busy(100..=100, &["n01"]);
    jobs.push(wide(2, 4));
    let refs: Vec<&Job> = jobs.iter().collect();
    let o = pass(&refs, &nodes, &parts, &[], &cfg(t), 0);
    assert_eq!(nodes_of(&o.decisions, 2), ["n05", "n06", "n07", "n08"]);
}
