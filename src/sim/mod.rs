//! `sluice simulate`: replays a workload trace on virtual time through the same
//! [`crate::sched`] code the controller runs (cf. the Slurm simulator, and the PWA
//! conventions of shared/traces/README.md).
//!
//! The driver is an event loop: at every submit or end, jobs that ended give back their
//! resources, new jobs join the queue, and one scheduling pass (main cycle + backfill
//! with the chosen policy) runs at that instant. Jobs run for their trace run time; the
//! scheduler only knows their requested time. Nothing reads the clock except the
//! wall-time report.

pub mod fairshare;
pub mod swf;

use crate::config::Config;
use crate::model::{Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, TimeLimit};
use crate::sched::{self, Decision, Input, Policy, SchedConfig};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use swf::Trace;

/// Results of one simulation, with the conventions of shared/traces/README.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    pub policy: Policy,
    pub jobs: usize,
    pub dropped: usize,
    /// Σ(size × run) / (capacity × (last end − first submit)).
    pub utilization: f64,
    /// Seconds.
    pub mean_wait: f64,
    /// Seconds (the mean of the two middle values for an even count).
    pub median_wait: f64,
    /// Mean of max(1, (wait + run) / max(run, 10 s)).
    pub mean_bounded_slowdown: f64,
    /// Last end − first submit, seconds.
    pub makespan: i64,
    /// Jobs started by the backfill stage.
    pub backfilled: usize,
    /// Scheduling passes run.
    pub passes: u64,
    /// CPU-hours delivered per account, when fair-share accounts are configured.
    pub accounts: Vec<(String, f64)>,
}

/// The cluster a trace runs on: one node with the trace's `MaxProcs` CPUs.
pub fn default_cluster(procs: u32) -> (Vec<Node>, Vec<Partition>) {
    let mut n = Node::new("sim1", procs, 0);
    n.state = NodeState::Up;
    let mut p = Partition::new("sim", vec!["sim1".into()]);
    p.default = true;
    (vec![n], vec![p])
}

/// The cluster of a config file: its declared nodes (CPUs must be declared) and
/// partitions; jobs go to the default partition.
///
/// Errors: the file does not load, or a node has no declared CPUs.
pub fn cluster_from(cfg: &Config) -> Result<(Vec<Node>, Vec<Partition>), String> {
    let mut nodes = Vec::new();
    for nc in &cfg.nodes {
        let cpus = nc
            .cpus
            .ok_or_else(|| format!("node '{}' declares no cpus", nc.name))?;
        let mut n = Node::new(&nc.name, cpus, nc.memory.unwrap_or(0));
        n.state = NodeState::Up;
        n.features = nc.features.clone();
        n.weight = nc.weight.unwrap_or(1);
        nodes.push(n);
    }
    Ok((nodes, cfg.partitions.clone()))
}

fn sim_job(i: usize, j: &swf::SwfJob, partition: &str, cfg: &SchedConfig) -> Job {
    let user = j.user.max(0).to_string();
    Job {
        id: i as u32 + 1,
        spec: JobSpec::default(),
        uid: j.user.max(0) as u32,
        account: fairshare::account_of(&user, cfg),
        user,
        group: String::new(),
        partition: partition.to_string(),
        qos: String::new(),
        time_limit: TimeLimit::Seconds(j.limit.max(1) as u64),
        req_cpus: j.size,
        req_tasks: j.size,
        req_nodes: 1,
        req_mem: MemReq::PerCpu(0),
        priority: 1,
        submit_time: j.submit,
        eligible_time: Some(j.submit),
        ..Job::default()
    }
}

/// Replays `trace` on `nodes`/`parts` with `cfg` and returns the metrics.
///
/// Errors: a job that can never run on the cluster (it would wait forever).
pub fn simulate(
    trace: &Trace,
    nodes: &[Node],
    parts: &[Partition],
    cfg: &SchedConfig,
) -> Result<Metrics, String> {
    let part = parts
        .iter()
        .find(|p| p.default)
        .or(parts.first())
        .ok_or("the cluster has no partition")?
        .name
        .clone();
    let mut jobs: Vec<Job> = trace
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| sim_job(i, j, &part, cfg))
        .collect();
    let pview = parts.iter().find(|p| p.name == part).expect("found above");
    if let Some(j) = jobs
        .iter()
        .find(|j| sched::static_reason(j, pview, nodes).is_some())
    {
        return Err(format!(
            "trace job {} (size {}) can never run on this cluster",
            trace.jobs[j.id as usize - 1].id,
            j.req_cpus
        ));
    }
    let mut next_arrival = 0usize;
    let mut pending: Vec<usize> = Vec::new();
    let mut running: Vec<usize> = Vec::new();
    let mut ends: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut backfilled = 0usize;
    let mut passes = 0u64;
    let mut done = 0usize;
    let n = jobs.len();
    // Fair-share priorities when accounts are configured; otherwise every job has
    // the same priority and the order is submission order.
    let fs_on = !cfg.priority.accounts.is_empty();
    let mut fs = fairshare::FairShare::new(trace.jobs.first().map_or(0, |j| j.submit));
    while done < n {
        let t_arr = trace.jobs.get(next_arrival).map(|j| j.submit);
        let t_end = ends.peek().map(|Reverse((t, _))| *t);
        let now = match (t_arr, t_end) {
            (Some(a), Some(e)) => a.min(e),
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (None, None) => return Err("jobs left that can never start".into()),
        };
        while let Some(Reverse((t, i))) = ends.peek().copied() {
            if t > now {
                break;
            }
            ends.pop();
            if fs_on {
                fs.ended(&jobs[i], t, cfg);
            }
            jobs[i].state = JobState::Completed;
            jobs[i].end_time = Some(t);
            running.retain(|&r| r != i);
            done += 1;
        }
        while next_arrival < n && trace.jobs[next_arrival].submit <= now {
            pending.push(next_arrival);
            next_arrival += 1;
        }
        if pending.is_empty() {
            continue;
        }
        if fs_on {
            fs.prioritise(&mut jobs, &pending, &running, nodes, cfg, now);
        }
        let decisions = {
            let refs: Vec<&Job> = pending
                .iter()
                .chain(running.iter())
                .map(|&i| &jobs[i])
                .collect();
            let out = sched::run(&Input {
                jobs: &refs,
                nodes,
                partitions: parts,
                licenses: &[],
                config: cfg,
                now,
                backfill: true,
                limits: None,
                reservations: &[],
            });
            passes += 1;
            backfilled += out.backfilled.len();
            out.decisions
        };
        let mut started = false;
        for d in decisions {
            if let Decision::Start { job_id, alloc, .. } = d {
                let i = job_id as usize - 1;
                jobs[i].state = JobState::Running;
                jobs[i].start_time = Some(now);
                jobs[i].alloc = Some(alloc);
                running.push(i);
                ends.push(Reverse((now + trace.jobs[i].run, i)));
                if fs_on {
                    let cpus = jobs[i].req_cpus;
                    fs.deliver(&jobs[i], cpus, now, now + trace.jobs[i].run, i64::MAX);
                }
                started = true;
            }
        }
        if started {
            pending.retain(|&i| jobs[i].state == JobState::Pending);
        }
    }
    let mut m = metrics(trace, &jobs, nodes, cfg.policy, backfilled, passes);
    m.accounts = fs
        .delivered
        .into_iter()
        .map(|(a, secs)| (a, secs / 3600.0))
        .collect();
    Ok(m)
}

fn metrics(
    trace: &Trace,
    jobs: &[Job],
    nodes: &[Node],
    policy: Policy,
    backfilled: usize,
    passes: u64,
) -> Metrics {
    let n = jobs.len().max(1) as f64;
    let mut waits: Vec<i64> = Vec::with_capacity(jobs.len());
    let mut bsld = 0.0;
    let mut work = 0.0;
    let first = trace.jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    let mut last = first;
    for (j, t) in jobs.iter().zip(&trace.jobs) {
        let start = j.start_time.unwrap_or(t.submit);
        let wait = start - t.submit;
        waits.push(wait);
        let run = t.run as f64;
        bsld += ((wait as f64 + run) / run.max(10.0)).max(1.0);
        work += f64::from(t.size) * run;
        last = last.max(start + t.run);
    }
    waits.sort_unstable();
    let median = match waits.len() {
        0 => 0.0,
        k if k % 2 == 1 => waits[k / 2] as f64,
        k => (waits[k / 2 - 1] + waits[k / 2]) as f64 / 2.0,
    };
    let capacity: u64 = nodes.iter().map(|n| u64::from(n.cpus)).sum();
    let capacity = if capacity == 0 {
        u64::from(trace.max_procs)
    } else {
        capacity.min(u64::from(trace.max_procs).max(1))
    };
    let span = (last - first).max(1);
    Metrics {
        policy,
        jobs: jobs.len(),
        dropped: trace.dropped,
        utilization: work / (capacity as f64 * span as f64),
        mean_wait: waits.iter().sum::<i64>() as f64 / n,
        median_wait: median,
        mean_bounded_slowdown: bsld / n,
        makespan: last - first,
        backfilled,
        passes,
        accounts: Vec::new(),
    }
}

/// The scheduler settings a simulation uses: exact times (bf_resolution 1 s), an
/// unbounded plan and no per-pass job cap, so the policies are the textbook ones.
pub fn sim_config(policy: Policy) -> SchedConfig {
    SchedConfig {
        policy,
        bf_resolution: 1,
        bf_window: 1 << 40,
        bf_max_job_test: usize::MAX,
        ..SchedConfig::default()
    }
}

const USAGE: &str = "usage: sluice simulate --trace FILE [--config CLUSTER.toml] [--policy fifo|easy|conservative] [--json]
       sluice simulate --scenario fairshare|fairshare-gpu [--days N] [--policy P] [--json]

Replays a Standard Workload Format trace (.swf or .swf.gz) on virtual time through the
scheduler and reports utilization, mean and median wait, mean bounded slowdown
(tau = 10 s), makespan and jobs backfilled. Without --config the machine is one node
with the trace's MaxProcs CPUs. With --config, its [priority] and [topology] settings
apply (placement is the controller's), and its
[[accounts]] (users = SWF user ids) turn on fair-share priorities and per-account
CPU-hours.

--scenario fairshare: two accounts with 70/30 shares each keep 16 4-CPU jobs queued
on 64 CPUs for N days (default 7); prints the CPU-hours each account got.
--scenario fairshare-gpu: the same with 1-GPU jobs on 32 GPUs, billed per GPU-hour.";

/// `sluice simulate …`.
pub fn cli_main(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut trace: Option<PathBuf> = None;
    let mut config: Option<PathBuf> = None;
    let mut policy = Policy::Easy;
    let mut json = false;
    let mut scenario: Option<String> = None;
    /// A scenario runs in about a second per simulated week on this machine; ten years
    /// is already far past convergence.
    const MAX_SCENARIO_DAYS: i64 = 3650;
    let mut days: i64 = 7;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, ExitCode> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| {
                    eprintln!("sluice simulate: {name} needs a value\n{USAGE}");
                    ExitCode::from(2)
                })
        };
        match key {
            "--trace" | "-t" => match value("--trace") {
                Ok(v) => trace = Some(v.into()),
                Err(c) => return c,
            },
            "--config" | "-c" => match value("--config") {
                Ok(v) => config = Some(v.into()),
                Err(c) => return c,
            },
            "--policy" | "-p" => match value("--policy") {
                Ok(v) => match Policy::parse(&v) {
                    Some(p) => policy = p,
                    None => {
                        eprintln!(
                            "sluice simulate: unknown policy '{v}' (fifo, easy, conservative)"
                        );
                        return ExitCode::from(2);
                    }
                },
                Err(c) => return c,
            },
            "--json" => json = true,
            "--scenario" => match value("--scenario") {
                Ok(v) => scenario = Some(v),
                Err(c) => return c,
            },
            "--days" => match value("--days").map(|v| v.parse::<i64>()) {
                Ok(Ok(d)) if (1..=MAX_SCENARIO_DAYS).contains(&d) => days = d,
                Ok(_) => {
                    eprintln!(
                        "sluice simulate: --days needs a whole number from 1 to {MAX_SCENARIO_DAYS}"
                    );
                    return ExitCode::from(2);
                }
                Err(c) => return c,
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("sluice simulate: unknown option '{other}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some(name) = scenario {
        let mut sc = match name.as_str() {
            "fairshare" => fairshare::Scenario::seventy_thirty(days),
            "fairshare-gpu" => fairshare::Scenario::seventy_thirty_gpu(days),
            _ => {
                eprintln!("sluice simulate: unknown scenario '{name}' (fairshare, fairshare-gpu)");
                return ExitCode::from(2);
            }
        };
        sc.policy = policy;
        return print_scenario(&name, &sc, json);
    }
    let Some(trace_path) = trace else {
        eprintln!("sluice simulate: --trace is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let t = match swf::read(&trace_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice simulate: {e}");
            return ExitCode::from(1);
        }
    };
    let mut sched_cfg = sim_config(policy);
    let (nodes, parts) = match &config {
        None => default_cluster(t.max_procs),
        Some(p) => match Config::from_file(p)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                sched_cfg.priority = c.sched.priority.clone();
                sched_cfg.topology = c.sched.topology.clone();
                sched_cfg.max_switch_wait = c.sched.max_switch_wait;
                cluster_from(&c)
            }) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("sluice simulate: {e}");
                return ExitCode::from(1);
            }
        },
    };
    let wall = std::time::Instant::now();
    let m = match simulate(&t, &nodes, &parts, &sched_cfg) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("sluice simulate: {e}");
            return ExitCode::from(1);
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    let rate = m.jobs as f64 / (secs / 60.0).max(1e-9);
    let cpus: u64 = nodes.iter().map(|n| u64::from(n.cpus)).sum();
    let name = trace_path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if json {
        let v = serde_json::json!({
            "trace": name,
            "policy": m.policy.name(),
            "nodes": nodes.len(),
            "cpus": cpus,
            "jobs": m.jobs,
            "dropped": m.dropped,
            "utilization": m.utilization,
            "mean_wait": m.mean_wait,
            "median_wait": m.median_wait,
            "mean_bounded_slowdown": m.mean_bounded_slowdown,
            "bsld_tau": 10,
            "makespan": m.makespan,
            "backfilled": m.backfilled,
            "passes": m.passes,
            "wall_seconds": secs,
            "jobs_per_minute": rate,
            "account_cpu_hours": m.accounts.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        });
        println!("{v}");
    } else {
        println!(
            "trace:                  {name} ({} jobs, {} dropped)",
            m.jobs, m.dropped
        );
        println!(
            "cluster:                {} node(s), {cpus} CPUs",
            nodes.len()
        );
        println!("policy:                 {}", m.policy.name());
        println!("utilization:            {:.4}", m.utilization);
        println!("mean wait:              {:.1} s", m.mean_wait);
        println!("median wait:            {:.1} s", m.median_wait);
        println!(
            "mean bounded slowdown:  {:.3} (tau = 10 s)",
            m.mean_bounded_slowdown
        );
        println!("makespan:               {} s", m.makespan);
        println!("jobs backfilled:        {}", m.backfilled);
        println!("scheduling passes:      {}", m.passes);
        println!("wall time:              {secs:.2} s ({rate:.0} jobs/minute)");
        for (a, h) in &m.accounts {
            let a = if a.is_empty() { "root" } else { a };
            println!("account {a:<15} {h:.1} CPU-hours");
        }
    }
    ExitCode::SUCCESS
}

/// Runs the fair-share scenario and prints what each account got.
fn print_scenario(name: &str, sc: &fairshare::Scenario, json: bool) -> ExitCode {
    let wall = std::time::Instant::now();
    let r = match fairshare::run_scenario(sc) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice simulate: {e}");
            return ExitCode::from(1);
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    let unit = if sc.gpus_per_node > 0 && sc.job_gpus > 0 {
        "GPU"
    } else {
        "CPU"
    };
    if json {
        let accts: Vec<_> = r
            .accounts
            .iter()
            .map(|(a, s, h, f)| {
                serde_json::json!({"account": a, "shares": s, "hours": h, "unit": unit, "fraction": f})
            })
            .collect();
        let v = serde_json::json!({
            "scenario": name,
            "days": sc.duration as f64 / 86400.0,
            "cpus": sc.nodes * sc.cpus_per_node,
            "gpus": sc.nodes * sc.gpus_per_node,
            "policy": sc.policy.name(),
            "accounts": accts,
            "worst_relative_error": r.worst_relative_error(),
            "utilization": r.utilization,
            "jobs_started": r.jobs_started,
            "wall_seconds": secs,
        });
        println!("{v}");
    } else {
        println!(
            "scenario:               {name}, {} days on {} CPUs and {} GPUs, policy {}",
            sc.duration as f64 / 86400.0,
            sc.nodes * sc.cpus_per_node,
            sc.nodes * sc.gpus_per_node,
            sc.policy.name()
        );
        for (a, s, h, f) in &r.accounts {
            println!(
                "account {a:<15} shares {:5.1}%  delivered {h:9.1} {unit}-hours = {:5.2}%",
                s * 100.0,
                f * 100.0
            );
        }
        println!(
            "worst relative error:   {:.2}%",
            r.worst_relative_error() * 100.0
        );
        println!("utilization:            {:.4}", r.utilization);
        println!("jobs started:           {}", r.jobs_started);
        println!("wall time:              {secs:.2} s");
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests;
