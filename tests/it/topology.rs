//! Topology-aware placement through the real controller (issue 8): a cluster of 20
//! one-CPU nodes over SSH in three leaf switches (8, 8 and 4 nodes) under one core
//! switch. An 8-node job lands on one leaf; a `--switches=1@5` job that no leaf can
//! hold waits with reason Resources and then runs across leaves.

use crate::harness::sshd::{NodeSetup, SshCluster};
use crate::harness::wait_until;
use std::time::{Duration, Instant};

const TOPOLOGY: &str = r#"
[topology]
switches = [
  { name = "s0", nodes = "t[01-08]" },
  { name = "s1", nodes = "t[09-16]" },
  { name = "s2", nodes = "t[17-20]" },
  { name = "core", switches = "s[0-2]" },
]
"#;

/// Leaf of node `tNN` (s0, s1, s2).
fn leaf(node: &str) -> usize {
    match node[1..].parse::<u32>().unwrap() {
        1..=8 => 0,
        9..=16 => 1,
        _ => 2,
    }
}

fn nodes_of(c: &SshCluster, id: u32) -> Vec<String> {
    let list = c.field(&id.to_string(), "NodeList").unwrap_or_default();
    let out = c.ok("scontrol", &["show", "hostnames", &list]);
    out.lines().map(str::to_string).collect()
}

#[test]
fn topology_places_on_one_leaf_and_switches_waits_then_falls_back() {
    let setup: Vec<NodeSetup> = (1..=20)
        .map(|i| {
            let mut n = NodeSetup::new(&format!("t{i:02}"));
            n.cpus = 1;
            n.memory = 200;
            n
        })
        .collect();
    let Some(c) = SshCluster::start_with_conf(&setup, 30, "sched_interval = 1", TOPOLOGY) else {
        return;
    };
    c.wait_all_idle();
    let topo = c.ok("scontrol", &["show", "topology"]);
    assert_eq!(
        topo,
        "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=t[01-08]\n\
         SwitchName=s1 Level=0 LinkSpeed=1 Nodes=t[09-16]\n\
         SwitchName=s2 Level=0 LinkSpeed=1 Nodes=t[17-20]\n\
         SwitchName=core Level=1 LinkSpeed=1 Nodes=t[01-20] Switches=s[0-2]\n"
    );

    // One busy node in s0: an 8-node job fits only s1 whole (without topology it
    // would take t02..t09, across two leaves).
    let hold = c.submit(&["-w", "t01", "--wrap", "sleep 300"]);
    c.wait_state(hold, &["RUNNING"], Duration::from_secs(30));
    let eight = c.submit(&["-N", "8", "--wrap", "sleep 300"]);
    c.wait_state(eight, &["RUNNING"], Duration::from_secs(30));
    let got = nodes_of(&c, eight);
    assert_eq!(got.len(), 8, "{got:?}");
    assert!(got.iter().all(|n| leaf(n) == 1), "{got:?}");

    // Now s0 has 7 free nodes and s2 4: no leaf holds 8, so `--switches=1@5` waits
    // (Slurm shows Resources) and, after 5 s, takes 8 nodes over two leaves.
    let submitted = Instant::now();
    let wide = c.submit(&["-N", "8", "--switches=1@0:05", "--wrap", "sleep 300"]);
    assert_eq!(
        c.field(&wide.to_string(), "Switches").as_deref(),
        Some("1@00:00:05")
    );
    wait_until("the pending reason", Duration::from_secs(10), || {
        (c.field(&wide.to_string(), "Reason").as_deref() == Some("Resources")).then_some(())
    });
    assert_eq!(c.state(wide).as_deref(), Some("PENDING"));
    c.wait_state(wide, &["RUNNING"], Duration::from_secs(30));
    assert!(
        submitted.elapsed() >= Duration::from_secs(4),
        "started after {:?}, before the switch wait ended",
        submitted.elapsed()
    );
    let got = nodes_of(&c, wide);
    assert_eq!(got.len(), 8, "{got:?}");
    let leaves: std::collections::BTreeSet<usize> = got.iter().map(|n| leaf(n)).collect();
    assert_eq!(leaves, [0, 2].into_iter().collect(), "{got:?}");
    for id in [hold, eight, wide] {
        c.ok("scancel", &[&id.to_string()]);
    }
}
