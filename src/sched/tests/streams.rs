//! Property tests over random multi-node clusters and job *streams* (jobs arrive over
//! time and run at most their limit): the job at the head of the queue starts no
//! later than the first start reserved for it while it was at the head, and no job
//! starves, under EASY, EASY-SJF and conservative backfill (issue 19). Jobs take every shape the
//! timeline plans: `-n` with or without `-N` (Slurm lets them span nodes), node count
//! ranges, `--ntasks-per-node`, `--exclusive` and GPUs per node.

use super::*;
use crate::model::gres::{GresReq, parse_node_gres};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct S {
    /// Seconds after the previous submission.
    gap: i64,
    tasks: u32,
    /// `-N min[-max]`: none, or (min, extra to the max).
    nodes: Option<(u32, u32)>,
    per_node: Option<u32>,
    exclusive: bool,
    gpus: u64,
    limit: u64,
    /// Run time as a share of the limit, in percent.
    run_pct: u64,
}

fn arb_stream_job() -> impl Strategy<Value = S> {
    (
        0i64..40,
        1u32..10,
        prop::option::of((1u32..4, 0u32..3)),
        prop::option::weighted(0.2, 1u32..3),
        prop::bool::weighted(0.15),
        prop::option::weighted(0.2, 1u64..3),
        1u64..200,
        1u64..=100,
    )
        .prop_map(
            |(gap, tasks, nodes, per_node, exclusive, gpus, limit, run_pct)| S {
                gap,
                tasks,
                nodes,
                per_node,
                exclusive,
                gpus: gpus.unwrap_or(0),
                limit,
                run_pct,
            },
        )
}

/// Nodes: (CPUs, GPUs).
fn arb_nodes() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec((1u32..5, prop::option::weighted(0.3, 1u64..3)), 2..6)
        .prop_map(|v| v.into_iter().map(|(c, g)| (c, g.unwrap_or(0))).collect())
}

/// The cluster, and the jobs that could ever run on it (the others are refused at
/// submission, as the controller does) with their run times.
fn stream(cluster: &[(u32, u64)], ss: &[S]) -> (Vec<Node>, Vec<Partition>, Vec<Job>, Vec<i64>) {
    let nodes: Vec<Node> = cluster
        .iter()
        .enumerate()
        .map(|(i, (cpus, gpus))| {
            let mut n = node(&format!("n{i}"), *cpus, 1000);
            if *gpus > 0 {
                n.gres = parse_node_gres(&format!("gpu:{gpus}")).unwrap();
            }
            n
        })
        .collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let parts = vec![part("p", &names)];
    let mut jobs = Vec::new();
    let mut runs = Vec::new();
    let mut t = 0i64;
    for s in ss {
        t += s.gap;
        let id = jobs.len() as u32 + 1;
        let mut j = job(id, s.tasks, 0);
        j.submit_time = t;
        j.eligible_time = Some(t);
        j.time_limit = TimeLimit::Seconds(s.limit);
        if let Some((min, extra)) = s.nodes {
            j.req_nodes = min;
            j.spec.nodes_min = Some(min);
            j.spec.nodes_max = Some(min + extra);
            j.req_tasks = j.req_tasks.max(min);
            j.req_cpus = j.req_tasks;
        }
        j.spec.ntasks_per_node = s.per_node;
        j.spec.exclusive = s.exclusive;
        if s.gpus > 0 {
            j.spec.gres = vec![GresReq {
                name: "gpu".into(),
                kind: None,
                count: s.gpus,
            }];
        }
        if static_reason(&j, &parts[0], &nodes).is_some() {
            continue;
        }
        jobs.push(j);
        runs.push(((s.limit * s.run_pct).div_ceil(100)).max(1) as i64);
    }
    // Ids in submission order of the kept jobs.
    for (k, j) in jobs.iter_mut().enumerate() {
        j.id = k as u32 + 1;
    }
    (nodes, parts, jobs, runs)
}

/// What a replay saw: each job's start, and the first start reserved for it while it
/// was the head of the queue.
struct Replay {
    starts: Vec<i64>,
    head_plan: Vec<Option<i64>>,
}

/// Replays the stream: a pass at every submission and every end.
fn replay(
    nodes: &[Node],
    parts: &[Partition],
    mut jobs: Vec<Job>,
    runs: &[i64],
    cfg: &SchedConfig,
) -> Result<Replay, String> {
    let n = jobs.len();
    let mut head_plan = vec![None; n];
    let mut now = 0i64;
    for _ in 0..10 * n + 10 {
        for (k, j) in jobs.iter_mut().enumerate() {
            if j.state == JobState::Running && j.start_time.unwrap() + runs[k] <= now {
                j.state = JobState::Completed;
                j.end_time = Some(now);
            }
        }
        let refs: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.is_active() && j.submit_time <= now)
            .collect();
        let o = pass(&refs, nodes, parts, &[], cfg, now);
        // The head: the first pending job in queue order (same priority: submission).
        let head = refs
            .iter()
            .filter(|j| j.state == JobState::Pending)
            .map(|j| j.id)
            .min();
        for d in &o.decisions {
            if let Decision::Start { job_id, alloc, .. } = d {
                let j = &mut jobs[*job_id as usize - 1];
                j.state = JobState::Running;
                j.start_time = Some(now);
                j.alloc = Some(alloc.clone());
            }
        }
        if let Some(h) = head
            && jobs[h as usize - 1].state == JobState::Pending
        {
            // A head that cannot start now always has a reserved start (the plan has
            // no window limit).
            let e = o.estimates.iter().find(|e| e.job_id == h).ok_or(format!(
                "at {now}: head job {h} pending without a reserved start"
            ))?;
            head_plan[h as usize - 1].get_or_insert(e.start);
        }
        let next_submit = jobs
            .iter()
            .map(|j| j.submit_time)
            .filter(|&t| t > now)
            .min();
        let next_end = jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.state == JobState::Running)
            .map(|(k, j)| j.start_time.unwrap() + runs[k])
            .min();
        match next_submit.into_iter().chain(next_end).min() {
            Some(t) => now = t,
            None => break,
        }
    }
    let starts = jobs
        .iter()
        .map(|j| j.start_time.ok_or(format!("job {} never started", j.id)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Replay { starts, head_plan })
}

fn textbook(policy: Policy) -> SchedConfig {
    SchedConfig {
        policy,
        bf_resolution: 1,
        bf_window: 1 << 40,
        bf_max_job_test: usize::MAX,
        ..SchedConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_head_keeps_its_reservation_and_nobody_starves(
        cluster in arb_nodes(),
        ss in prop::collection::vec(arb_stream_job(), 1..14),
        which in 0u8..3,
    ) {
        let policy = [Policy::Easy, Policy::Conservative, Policy::EasySjf][usize::from(which)];
        let conservative = policy == Policy::Conservative;
        let (nodes, parts, jobs, runs) = stream(&cluster, &ss);
        let r = replay(&nodes, &parts, jobs.clone(), &runs, &textbook(policy))
            .map_err(TestCaseError::fail)?;
        let longest = jobs.iter().map(|j| j.time_limit.secs().unwrap() as i64).max().unwrap_or(0);
        for (k, j) in jobs.iter().enumerate() {
            let start = r.starts[k];
            if let Some(p) = r.head_plan[k] {
                prop_assert!(start <= p, "{:?}: head job {} reserved {} started {}", policy, j.id, p, start);
            }
            // No starvation. Conservative: a job waits at most for the limits of
            // the jobs submitted before it. EASY protects the head only, so a job
            // backfilled behind a job may still delay it while it is not the head
            // (the textbook bound of the brief fails there; proptest finds the case):
            // once every job ahead of it has started, it waits at most one longest
            // limit.
            let ahead: i64 = jobs[..k].iter().map(|a| a.time_limit.secs().unwrap() as i64).sum();
            if conservative {
                prop_assert!(start - j.submit_time <= ahead,
                    "job {} waited {} > {} (the limits ahead)", j.id, start - j.submit_time, ahead);
            }
            let ahead_started = r.starts[..k].iter().copied().max().unwrap_or(j.submit_time);
            prop_assert!(start <= ahead_started.max(j.submit_time) + longest,
                "{:?}: job {} started {}, after the last job ahead ({}) plus the longest limit {}",
                policy, j.id, start, ahead_started, longest);
        }
    }
}
