//! Scheduler-core benchmarks (DESIGN.md §8: figures here, never in pass/fail tests).
//!
//! `pass_10k_pending_1k_running`: one main cycle, and one main cycle + backfill, with
//! 10,000 pending and 1,000 running jobs on 256 nodes of 64 CPUs (targets: main
//! ≤ 50 ms, backfill ≤ 200 ms). `simulate_lublin_256`: the simulator on the shared
//! lublin_256 trace, EASY.

use criterion::{Criterion, criterion_group, criterion_main};
use sluice::model::job::Allocation;
use sluice::model::{Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, TimeLimit};
use sluice::sched::{self, Input, Policy, SchedConfig};
use std::hint::black_box;

/// A small deterministic generator (no randomness in the scheduler, none here).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn job(id: u32, tasks: u32, mins: u32, prio: u32) -> Job {
    Job {
        id,
        spec: JobSpec::default(),
        uid: 1000 + id % 50,
        gid: 1000,
        user: String::new(),
        group: String::new(),
        partition: "batch".into(),
        account: String::new(),
        qos: String::new(),
        time_limit: TimeLimit::Minutes(mins),
        req_cpus: tasks,
        req_tasks: tasks,
        req_nodes: 1,
        req_mem: MemReq::PerCpu(1000),
        priority: prio,
        submit_time: i64::from(id),
        eligible_time: Some(0),
        ..Job::default()
    }
}

/// 256 nodes × 64 CPUs, 1,000 running jobs filling them, 10,000 pending.
fn scenario() -> (Vec<Node>, Vec<Partition>, Vec<Job>) {
    let mut rng = Lcg(42);
    let nodes: Vec<Node> = (0..256)
        .map(|i| {
            let mut n = Node::new(&format!("n{i:03}"), 64, 256_000);
            n.state = NodeState::Up;
            n
        })
        .collect();
    let mut p = Partition::new("batch", nodes.iter().map(|n| n.name.clone()).collect());
    p.default = true;
    let mut jobs = Vec::new();
    let mut free = vec![64u32; 256];
    let mut id = 1;
    // Running: about four per node, leaving a few CPUs here and there.
    while jobs.len() < 1000 {
        let node = (jobs.len() / 4) % 256;
        let cpus = [8, 16, 15, 24][jobs.len() % 4].min(free[node]);
        if cpus == 0 {
            continue;
        }
        free[node] -= cpus;
        let mut j = job(id, cpus, 60 + rng.next(24 * 60) as u32, 0);
        j.state = JobState::Running;
        j.start_time = Some(-(rng.next(3600) as i64));
        j.alloc = Some(Allocation {
            nodes: vec![nodes[node].name.clone()],
            cpus: vec![cpus],
            mem_per_node: 1000 * u64::from(cpus),
            ..Default::default()
        });
        jobs.push(j);
        id += 1;
    }
    for _ in 0..10_000 {
        let tasks = [1, 2, 4, 8, 16, 32, 64, 128][rng.next(8) as usize];
        let mut j = job(
            id,
            tasks,
            10 + rng.next(48 * 60) as u32,
            1 + rng.next(100_000) as u32,
        );
        if tasks > 64 {
            j.req_nodes = tasks / 64;
        }
        jobs.push(j);
        id += 1;
    }
    (nodes, vec![p], jobs)
}

fn pass(c: &mut Criterion) {
    let (nodes, parts, jobs) = scenario();
    let refs: Vec<&Job> = jobs.iter().collect();
    let cfg = SchedConfig::default();
    let input = |backfill| Input {
        jobs: &refs,
        nodes: &nodes,
        partitions: &parts,
        licenses: &[],
        config: &cfg,
        now: 0,
        backfill,
        limits: None,
        reservations: &[],
    };
    let mut g = c.benchmark_group("pass_10k_pending_1k_running_256_nodes");
    g.sample_size(10);
    g.bench_function("main", |b| b.iter(|| black_box(sched::run(&input(false)))));
    g.bench_function("main_and_backfill", |b| {
        b.iter(|| black_box(sched::run(&input(true))))
    });
    // The same cluster as 16 leaf switches of 16 nodes under one core switch.
    let mut tree = SchedConfig::default();
    let leaf = |k: usize| sluice::model::topology::Switch {
        name: format!("s{k}"),
        nodes: nodes[k * 16..(k + 1) * 16]
            .iter()
            .map(|n| n.name.clone())
            .collect(),
        switches: Vec::new(),
        link_speed: 1,
    };
    tree.topology.switches = (0..16).map(leaf).collect();
    tree.topology
        .switches
        .push(sluice::model::topology::Switch {
            name: "core".into(),
            nodes: Vec::new(),
            switches: (0..16).map(|k| format!("s{k}")).collect(),
            link_speed: 1,
        });
    let tree_input = |backfill| Input {
        config: &tree,
        ..input(backfill)
    };
    g.bench_function("main_tree16", |b| {
        b.iter(|| black_box(sched::run(&tree_input(false))))
    });
    g.bench_function("main_and_backfill_tree16", |b| {
        b.iter(|| black_box(sched::run(&tree_input(true))))
    });
    g.finish();
}

fn simulate(c: &mut Criterion) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces/lublin_256.swf.gz");
    let trace = sluice::sim::swf::read(&path).expect("tests/data/traces/lublin_256.swf.gz");
    let (n, p) = sluice::sim::default_cluster(trace.max_procs);
    let mut g = c.benchmark_group("simulate_lublin_256");
    g.sample_size(10);
    g.bench_function("easy", |b| {
        b.iter(|| {
            black_box(sluice::sim::simulate(
                &trace,
                &n,
                &p,
                &sluice::sim::sim_config(Policy::Easy),
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, pass, simulate);
criterion_main!(benches);
