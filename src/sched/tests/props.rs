//! Property tests over random clusters and job streams: nothing is ever
//! over-allocated, conservative backfill never delays a planned start, and a pass is
//! deterministic.

use super::*;
use crate::model::gres::{GresBinding, GresReq, parse_node_gres};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct J {
    tasks: u32,
    cpt: u32,
    mins: u32,
    mem: u64,
    gpus: u64,
    nodes: u32,
    exclusive: bool,
    prio: u32,
}

fn arb_job() -> impl Strategy<Value = J> {
    (
        1u32..6,
        1u32..3,
        1u32..30,
        0u64..600,
        0u64..3,
        1u32..3,
        any::<bool>(),
        0u32..5,
    )
        .prop_map(|(tasks, cpt, mins, mem, gpus, nodes, ex, prio)| J {
            tasks: tasks.max(nodes),
            cpt,
            mins,
            mem,
            gpus,
            nodes,
            exclusive: ex && prio == 0,
            prio,
        })
}

fn arb_cluster() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec((1u32..9, 0u64..3), 1..5)
}

fn build(cluster: &[(u32, u64)], js: &[J]) -> (Vec<Node>, Vec<Partition>, Vec<Job>) {
    let nodes: Vec<Node> = cluster
        .iter()
        .enumerate()
        .map(|(i, (cpus, gpus))| {
            let mut n = node(&format!("n{i}"), *cpus, 2000);
            if *gpus > 0 {
                // GPU k near the CPUs of the node's k-th half (two sockets when the
                // CPU count is even).
                n.gres = parse_node_gres(&format!("gpu:{gpus}")).unwrap();
                n.sockets = if cpus % 2 == 0 { 2 } else { 1 };
                let half = (*cpus / 2).max(1);
                for d in &mut n.gres {
                    let lo = (d.index * half).min(cpus - 1);
                    d.cores = (lo..(lo + half).min(*cpus)).collect();
                }
            }
            n
        })
        .collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let parts = vec![part("p", &names)];
    let jobs = js
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut j = job(
                i as u32 + 1,
                s.tasks,
                s.mem / u64::from(s.tasks * s.cpt).max(1),
            );
            j.spec.cpus_per_task = Some(s.cpt);
            j.req_cpus = s.tasks * s.cpt;
            j.req_nodes = s.nodes;
            j.spec.nodes_min = Some(s.nodes);
            j.time_limit = TimeLimit::Minutes(s.mins);
            j.spec.exclusive = s.exclusive;
            j.priority = 100 + s.prio;
            if s.gpus > 0 {
                j.spec.gres = vec![GresReq {
                    name: "gpu".into(),
                    kind: None,
                    count: s.gpus,
                }];
                j.spec.gres_flags = match s.prio % 3 {
                    0 => GresBinding::Enforce,
                    1 => GresBinding::Disable,
                    _ => GresBinding::Default,
                };
            }
            j
        })
        .collect();
    (nodes, parts, jobs)
}

/// Checks that what running jobs hold fits every node, CPU ids included.
fn check_capacity(nodes: &[Node], jobs: &[Job]) -> Result<(), String> {
    for n in nodes {
        let mut ids = vec![0u32; n.cpus as usize];
        let mut mem = 0u64;
        let mut gres = vec![0u32; n.gres.len()];
        for j in jobs.iter().filter(|j| j.state == JobState::Running) {
            let a = j.alloc.as_ref().unwrap();
            for (k, name) in a.nodes.iter().enumerate() {
                if *name != n.name {
                    continue;
                }
                mem += a.mem_per_node;
                if a.cpu_ids[k].len() as u32 != a.cpus[k] {
                    return Err(format!("job {} id count", j.id));
                }
                for &c in &a.cpu_ids[k] {
                    ids[c as usize] += 1;
                }
                for g in &a.gres[k] {
                    gres[g.slot as usize] += g.count;
                }
                // Enforce-binding: only CPUs near the job's GPUs.
                if j.spec.gres_flags == GresBinding::Enforce && !a.gres[k].is_empty() {
                    let near: Vec<u32> = a.gres[k]
                        .iter()
                        .flat_map(|g| n.gres[g.slot as usize].cores.iter().copied())
                        .collect();
                    if !j.spec.exclusive && a.cpu_ids[k].iter().any(|c| !near.contains(c)) {
                        return Err(format!("job {} has CPUs away from its GPUs", j.id));
                    }
                }
            }
        }
        if ids.iter().any(|c| *c > 1) {
            return Err(format!("{}: a CPU held twice: {ids:?}", n.name));
        }
        if mem > n.real_memory {
            return Err(format!("{}: memory {mem} > {}", n.name, n.real_memory));
        }
        for (i, g) in gres.iter().enumerate() {
            if *g > n.gres[i].count {
                return Err(format!("{}: gres slot {i} used {g}", n.name));
            }
        }
    }
    Ok(())
}

/// Plays the stream forward (every job runs exactly its limit), calling `each` with
/// every pass's outcome. Returns each job's start.
fn play(
    nodes: &[Node],
    parts: &[Partition],
    mut jobs: Vec<Job>,
    cfg: &SchedConfig,
    mut each: impl FnMut(i64, &Outcome, &[Job]) -> Result<(), String>,
) -> Result<Vec<Option<i64>>, String> {
    let mut now = 0i64;
    for _ in 0..200 {
        let refs: Vec<&Job> = jobs.iter().filter(|j| j.is_active()).collect();
        let o = pass(&refs, nodes, parts, &[], cfg, now);
        for d in &o.decisions {
            if let Decision::Start { job_id, alloc, .. } = d {
                let j = jobs.iter_mut().find(|j| j.id == *job_id).unwrap();
                j.state = JobState::Running;
                j.start_time = Some(now);
                j.alloc = Some(alloc.clone());
            }
        }
        check_capacity(nodes, &jobs)?;
        each(now, &o, &jobs)?;
        let next = jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .map(|j| j.start_time.unwrap() + j.time_limit.secs().unwrap() as i64)
            .min();
        let Some(next) = next else { break };
        now = next;
        for j in jobs.iter_mut().filter(|j| j.state == JobState::Running) {
            if j.start_time.unwrap() + j.time_limit.secs().unwrap() as i64 <= now {
                j.state = JobState::Completed;
                j.end_time = Some(now);
            }
        }
    }
    Ok(jobs.iter().map(|j| j.start_time).collect())
}

fn conservative() -> SchedConfig {
    SchedConfig {
        bf_resolution: 1,
        bf_window: 10 * 86400,
        ..SchedConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn never_over_allocated(cluster in arb_cluster(), js in prop::collection::vec(arb_job(), 1..14),
                            policy in prop_oneof![Just(Policy::Fifo), Just(Policy::Easy), Just(Policy::Conservative)]) {
        let (nodes, parts, jobs) = build(&cluster, &js);
        let cfg = SchedConfig { policy, ..conservative() };
        play(&nodes, &parts, jobs, &cfg, |_, _, _| Ok(())).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn never_over_allocated_with_topology(cluster in arb_cluster(), js in prop::collection::vec(arb_job(), 1..14),
                                          leaf in 1usize..4, switches in prop::collection::vec(0u32..3, 14),
                                          blocks in any::<bool>()) {
        use crate::model::topology::{Block, Switch, Topology};
        let (nodes, parts, mut jobs) = build(&cluster, &js);
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let chunks: Vec<Vec<String>> = names.chunks(leaf).map(|c| c.to_vec()).collect();
        let topology = if blocks && names.len().is_multiple_of(leaf) {
            Topology {
                blocks: chunks.iter().enumerate().map(|(i, c)| Block { name: format!("b{i}"), nodes: c.clone() }).collect(),
                ..Topology::default()
            }
        } else {
            let mut sw: Vec<Switch> = chunks.iter().enumerate().map(|(i, c)| Switch {
                name: format!("s{i}"), nodes: c.clone(), switches: Vec::new(), link_speed: 1,
            }).collect();
            let children: Vec<String> = sw.iter().map(|s| s.name.clone()).collect();
            sw.push(Switch { name: "top".into(), nodes: Vec::new(), switches: children, link_speed: 1 });
            Topology { switches: sw, ..Topology::default() }
        };
        prop_assert_eq!(topology.validate(&names), Ok(()));
        for (j, s) in jobs.iter_mut().zip(&switches) {
            if *s > 0 {
                j.spec.switches = Some(*s);
                j.spec.switch_wait = Some(120);
            }
        }
        let cfg = SchedConfig { topology, ..conservative() };
        play(&nodes, &parts, jobs, &cfg, |_, _, _| Ok(())).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn conservative_never_delays_a_planned_start(cluster in arb_cluster(), js in prop::collection::vec(arb_job(), 1..12)) {
        let (nodes, parts, mut jobs) = build(&cluster, &js);
        // An enforce-binding job's plan counts CPUs, not which ones (the timeline does
        // not know future ids): it may start later than planned, and the jobs planned
        // behind it with it. The guarantee is for the others.
        for j in &mut jobs {
            if j.spec.gres_flags == GresBinding::Enforce {
                j.spec.gres_flags = GresBinding::Default;
            }
        }
        let cfg = conservative();
        // The first plan made for each job once some lower-priority job was backfilled.
        let mut planned: std::collections::HashMap<u32, i64> = Default::default();
        let starts = play(&nodes, &parts, jobs.clone(), &cfg, |_, o, _| {
            if !o.backfilled.is_empty() {
                for e in &o.estimates {
                    planned.entry(e.job_id).or_insert(e.start);
                }
            }
            Ok(())
        }).map_err(TestCaseError::fail)?;
        for (j, s) in jobs.iter().zip(starts) {
            if let (Some(p), Some(s)) = (planned.get(&j.id), s) {
                prop_assert!(s <= *p, "job {} planned at {} started at {}", j.id, p, s);
            }
        }
    }

    #[test]
    fn a_pass_is_deterministic(cluster in arb_cluster(), js in prop::collection::vec(arb_job(), 1..14), seed in 0usize..100) {
        let (nodes, parts, jobs) = build(&cluster, &js);
        let cfg = conservative();
        let refs: Vec<&Job> = jobs.iter().collect();
        let a = pass(&refs, &nodes, &parts, &[], &cfg, 0);
        let mut shuffled = refs.clone();
        let k = seed % shuffled.len();
        shuffled.rotate_left(k);
        let b = pass(&shuffled, &nodes, &parts, &[], &cfg, 0);
        prop_assert_eq!(&a.decisions, &b.decisions);
        prop_assert_eq!(&a.estimates, &b.estimates);
    }
}
