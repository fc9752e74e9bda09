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
use crate::model::job::Suspension;
use crate::model::preempt::{PreemptMode, Preemption, QosPreempt};
use crate::model::{Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, Reason, TimeLimit};
use crate::sched::preempt::Action;
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
    /// Jobs preempted (each preemption of a job counts).
    pub preempted: usize,
    /// Preempted jobs put back in the queue (REQUEUE).
    pub requeued: usize,
    /// CPU-hours delivered per account, when fair-share accounts are configured.
    pub accounts: Vec<(String, f64)>,
    /// Longest wait, seconds.
    pub max_wait: i64,
    /// 99th-percentile wait (nearest rank), seconds.
    pub p99_wait: i64,
    /// Jobs that ran longer than their requested time (the trace's run time past its
    /// estimate; the simulator lets them run on, as a cluster without enforcement).
    pub overran: usize,
    /// One record per trace job, in trace order.
    pub per_job: Vec<JobResult>,
}

/// What happened to one trace job (`--jobs-out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobResult {
    /// The trace's job number.
    pub id: u64,
    /// Epoch seconds of the trace's clock.
    pub submit: i64,
    /// Last start (a requeued job's final run).
    pub start: i64,
    /// When it left the machine.
    pub end: i64,
    /// The nodes of its last allocation.
    pub nodes: Vec<String>,
    /// `start - submit`, seconds.
    pub wait: i64,
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

fn sim_job(i: usize, j: &swf::SwfJob, partition: &str, qos: &str, cfg: &SchedConfig) -> Job {
    let user = j.user.max(0).to_string();
    Job {
        id: i as u32 + 1,
        spec: JobSpec::default(),
        uid: j.user.max(0) as u32,
        account: fairshare::account_of(&user, cfg),
        user,
        group: String::new(),
        partition: partition.to_string(),
        qos: qos.to_string(),
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

/// Most preemption actions applied at one instant (as the controller's bound).
const MAX_PREEMPT_ACTIONS: usize = 32;

/// What happens at an instant of virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The job's run is over (it ran its trace run time).
    End,
    /// The job's preemption grace time is over: it ends PREEMPTED or is requeued.
    Preempted,
}

/// The clock-side state of one simulated job.
#[derive(Debug, Clone, Default)]
struct Run {
    /// Seconds of its trace run time still to run.
    left: i64,
    /// Start of the current running stretch (none while pending or suspended).
    since: Option<i64>,
    /// Bumped whenever the job's scheduled event changes, so stale ones are skipped.
    generation: u32,
    /// CPU-seconds it held the CPUs (all runs, as the machine delivered them).
    cpu_secs: f64,
    /// When it left the machine for good (completed or preempted).
    done_at: Option<i64>,
}

/// Pending events by time: (time, what, job index, the job's generation then).
type Events = BinaryHeap<Reverse<(i64, Event, usize, u32)>>;

/// Starts job `i` at `now` with `alloc`: it runs what is left of its run time.
fn start_run(
    i: usize,
    alloc: crate::model::job::Allocation,
    now: i64,
    jobs: &mut [Job],
    runs: &mut [Run],
    events: &mut Events,
) {
    jobs[i].state = JobState::Running;
    jobs[i].start_time = Some(now);
    jobs[i].alloc = Some(alloc);
    run_from(i, now, runs, events);
}

/// Job `i` runs from `now`: its end comes when what is left of its run time is over.
fn run_from(i: usize, now: i64, runs: &mut [Run], events: &mut Events) {
    runs[i].since = Some(now);
    runs[i].generation += 1;
    events.push(Reverse((
        now + runs[i].left,
        Event::End,
        i,
        runs[i].generation,
    )));
}

/// Replays `trace` on `nodes`/`parts` with `cfg` and returns the metrics. Jobs go
/// to the partition their SWF partition number (field 16) names, counting the
/// configured partitions from 1, else to the default one; with `qos`, to the QOS
/// their queue number (field 15) names, counting from 1. Preemption follows
/// `cfg.preempt` through the controller's planner ([`sched::preempt`]) on virtual
/// time: SUSPEND stops a victim (it resumes when its CPUs are free again),
/// CANCEL/REQUEUE end it or put it back in the queue after its grace time (a
/// requeued job runs its whole run time again).
///
/// Errors: a job that can never run on the cluster (it would wait forever).
pub fn simulate(
    trace: &Trace,
    nodes: &[Node],
    parts: &[Partition],
    cfg: &SchedConfig,
) -> Result<Metrics, String> {
    simulate_with_qos(trace, nodes, parts, cfg, &[])
}

/// How closely a simulation follows the controller (see [`simulate_opts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimOptions {
    /// Multifactor priorities from `cfg.priority` for every pass, with or without
    /// accounts (without: only with fair-share accounts, else submission order).
    pub priority: bool,
    /// Backfill only every `cfg.bf_interval` seconds, as the controller's backfill
    /// thread (without: at every event, the textbook policies).
    pub bf_interval: bool,
}

/// [`simulate`] with QOS records for preempt/qos (see there).
pub fn simulate_with_qos(
    trace: &Trace,
    nodes: &[Node],
    parts: &[Partition],
    cfg: &SchedConfig,
    qos: &[QosPreempt],
) -> Result<Metrics, String> {
    simulate_opts(trace, nodes, parts, cfg, qos, SimOptions::default())
}

/// [`simulate_with_qos`] at the controller's settings as `opts` asks.
///
/// Errors: as [`simulate`].
pub fn simulate_opts(
    trace: &Trace,
    nodes: &[Node],
    parts: &[Partition],
    cfg: &SchedConfig,
    qos: &[QosPreempt],
    opts: SimOptions,
) -> Result<Metrics, String> {
    let default_part = parts
        .iter()
        .find(|p| p.default)
        .or(parts.first())
        .ok_or("the cluster has no partition")?
        .name
        .clone();
    let part_of = |j: &swf::SwfJob| -> String {
        usize::try_from(j.partition - 1)
            .ok()
            .and_then(|k| parts.get(k))
            .map_or_else(|| default_part.clone(), |p| p.name.clone())
    };
    let qos_of = |j: &swf::SwfJob| -> String {
        usize::try_from(j.queue - 1)
            .ok()
            .and_then(|k| qos.get(k))
            .map(|q| q.name.clone())
            .unwrap_or_default()
    };
    let mut jobs: Vec<Job> = trace
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| sim_job(i, j, &part_of(j), &qos_of(j), cfg))
        .collect();
    // Trace jobs differ, as far as the static checks read, only in partition, size and
    // time limit: each shape is checked once.
    let mut checked: std::collections::HashMap<(&str, u32, u32, Option<u64>), bool> =
        std::collections::HashMap::new();
    for j in &jobs {
        let pview = parts
            .iter()
            .find(|p| p.name == j.partition)
            .expect("a configured partition");
        let key = (
            pview.name.as_str(),
            j.req_cpus,
            j.req_tasks,
            j.time_limit.secs(),
        );
        let never = *checked
            .entry(key)
            .or_insert_with(|| sched::static_reason(j, pview, nodes).is_some());
        if never {
            return Err(format!(
                "trace job {} (size {}) can never run on this cluster",
                trace.jobs[j.id as usize - 1].id,
                j.req_cpus
            ));
        }
    }
    let n = jobs.len();
    let mut runs: Vec<Run> = trace
        .jobs
        .iter()
        .map(|j| Run {
            left: j.run,
            ..Run::default()
        })
        .collect();
    let mut next_arrival = 0usize;
    let mut pending: Vec<usize> = Vec::new();
    let mut running: Vec<usize> = Vec::new();
    let mut suspended: Vec<usize> = Vec::new();
    let mut events: Events = BinaryHeap::new();
    let mut backfilled = 0usize;
    let mut passes = 0u64;
    let mut preempted = 0usize;
    let mut requeued = 0usize;
    let mut done = 0usize;
    // Fair-share priorities when accounts are configured; otherwise every job has
    // the same priority and the order is submission order.
    let fs_on = opts.priority || !cfg.priority.accounts.is_empty();
    let bf_every = if opts.bf_interval {
        cfg.bf_interval.max(1)
    } else {
        0
    };
    // The next backfill pass (controller settings: every bf_interval seconds).
    let mut next_bf: i64 = i64::MIN;
    let mut last_bf = false;
    let mut fs = fairshare::FairShare::new(
        trace.jobs.first().map_or(0, |j| j.submit),
        parts,
        cfg.priority.max_tres,
    );
    let preempt_on = cfg.preempt.preempt_type != crate::model::preempt::PreemptType::None;
    // A running stretch of job `i` ends at `t`: what it delivered is counted.
    let stop = |i: usize, t: i64, jobs: &[Job], runs: &mut [Run], fs: &mut fairshare::FairShare| {
        if let Some(from) = runs[i].since.take() {
            let secs = (t - from).max(0);
            runs[i].left -= secs;
            runs[i].cpu_secs += f64::from(jobs[i].req_cpus) * secs as f64;
            if fs_on {
                fs.charge(&jobs[i], from, t);
                fs.deliver(&jobs[i], jobs[i].req_cpus, from, t, i64::MAX);
            }
        }
    };
    while done < n {
        let t_arr = trace.jobs.get(next_arrival).map(|j| j.submit);
        let t_ev = events.peek().map(|Reverse((t, ..))| *t);
        // A pending queue also wakes the backfill timer.
        let t_ev = match t_ev {
            Some(e) if bf_every > 0 && !pending.is_empty() => Some(e.min(next_bf)),
            // Nothing else will happen: one more backfill pass, unless the last pass
            // was one (then the queue can never start).
            None if bf_every > 0 && !pending.is_empty() && !last_bf && t_arr.is_none() => {
                Some(next_bf)
            }
            e => e,
        };
        let now = match (t_arr, t_ev) {
            (Some(a), Some(e)) => a.min(e),
            (Some(a), None) => a,
            (None, Some(e)) => e,
            (None, None) => return Err("jobs left that can never start".into()),
        };
        while let Some(Reverse((t, ev, i, generation))) = events.peek().copied() {
            if t > now {
                break;
            }
            events.pop();
            if generation != runs[i].generation {
                continue;
            }
            stop(i, t, &jobs, &mut runs, &mut fs);
            running.retain(|&r| r != i);
            suspended.retain(|&r| r != i);
            let j = &mut jobs[i];
            let requeue = ev == Event::Preempted && j.preempt.is_some_and(|p| p.requeue);
            if requeue {
                // Back to the queue, to run its whole time again.
                requeued += 1;
                j.state = JobState::Pending;
                j.alloc = None;
                j.start_time = None;
                j.preempt = None;
                j.suspension = None;
                j.restarts += 1;
                j.eligible_time = Some(t);
                runs[i].left = trace.jobs[i].run;
                runs[i].generation += 1;
                pending.push(i);
                continue;
            }
            j.state = if ev == Event::Preempted {
                JobState::Preempted
            } else {
                JobState::Completed
            };
            j.end_time = Some(t);
            runs[i].done_at = Some(t);
            done += 1;
        }
        while next_arrival < n && trace.jobs[next_arrival].submit <= now {
            pending.push(next_arrival);
            next_arrival += 1;
        }
        // Jobs suspended by preemption resume once their CPUs are free again.
        if preempt_on && !suspended.is_empty() {
            let back = {
                let held: Vec<&Job> = running
                    .iter()
                    .chain(suspended.iter())
                    .map(|&i| &jobs[i])
                    .collect();
                sched::preempt::resumable(&held)
            };
            for id in back {
                let i = id as usize - 1;
                let j = &mut jobs[i];
                if let Some(s) = j.suspension.take() {
                    j.suspended_secs += (now - s.since).max(0) as u64;
                }
                j.state = JobState::Running;
                suspended.retain(|&r| r != i);
                running.push(i);
                run_from(i, now, &mut runs, &mut events);
            }
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
                .chain(suspended.iter())
                .map(|&i| &jobs[i])
                .collect();
            let backfill = bf_every == 0 || now >= next_bf;
            last_bf = backfill;
            if backfill && bf_every > 0 {
                next_bf = now + bf_every;
            }
            let out = sched::run(&Input {
                jobs: &refs,
                nodes,
                partitions: parts,
                licenses: &[],
                config: cfg,
                now,
                backfill,
                limits: None,
                reservations: &[],
            });
            passes += 1;
            backfilled += out.backfilled.len();
            out.decisions
        };
        for d in decisions {
            match d {
                Decision::Start { job_id, alloc, .. } => {
                    let i = job_id as usize - 1;
                    start_run(i, alloc, now, &mut jobs, &mut runs, &mut events);
                    running.push(i);
                }
                Decision::Pending { job_id, reason } => jobs[job_id as usize - 1].reason = reason,
            }
        }
        pending.retain(|&i| jobs[i].state == JobState::Pending);
        if !preempt_on {
            continue;
        }
        // Pending jobs waiting on resources may preempt, as in the controller.
        for _ in 0..MAX_PREEMPT_ACTIONS {
            let action = {
                let cands: Vec<&Job> = pending
                    .iter()
                    .map(|&i| &jobs[i])
                    .filter(|j| matches!(j.reason, Reason::Resources | Reason::Priority))
                    .collect();
                if cands.is_empty() {
                    break;
                }
                let all: Vec<&Job> = pending
                    .iter()
                    .chain(running.iter())
                    .chain(suspended.iter())
                    .map(|&i| &jobs[i])
                    .collect();
                let input = Input {
                    jobs: &all,
                    nodes,
                    partitions: parts,
                    licenses: &[],
                    config: cfg,
                    now,
                    backfill: false,
                    limits: None,
                    reservations: &[],
                };
                sched::preempt::plan(&input, qos, &cands)
            };
            match action {
                None => break,
                Some(Action::Start { job_id, alloc, .. }) => {
                    let i = job_id as usize - 1;
                    start_run(i, alloc, now, &mut jobs, &mut runs, &mut events);
                    running.push(i);
                    pending.retain(|&r| r != i);
                }
                Some(Action::Preempt { preemptor, victims }) => {
                    for v in victims {
                        let i = v.job_id as usize - 1;
                        preempted += 1;
                        if v.mode == PreemptMode::Suspend {
                            stop(i, now, &jobs, &mut runs, &mut fs);
                            runs[i].generation += 1;
                            jobs[i].state = JobState::Suspended;
                            jobs[i].suspension = Some(Suspension {
                                since: now,
                                preemptor: Some(preemptor),
                            });
                            running.retain(|&r| r != i);
                            suspended.push(i);
                            continue;
                        }
                        let end = now + i64::from(v.grace);
                        jobs[i].preempt = Some(Preemption {
                            time: now,
                            end,
                            requeue: v.mode == PreemptMode::Requeue,
                            preemptor,
                        });
                        runs[i].generation += 1;
                        // It ends at its grace time, or before if its run is over.
                        let natural = now + runs[i].left;
                        let (t, ev) = if natural <= end {
                            (natural, Event::End)
                        } else {
                            (end, Event::Preempted)
                        };
                        events.push(Reverse((t, ev, i, runs[i].generation)));
                    }
                }
            }
        }
    }
    let mut m = metrics(trace, &jobs, &runs, nodes, cfg.policy, backfilled, passes);
    m.preempted = preempted;
    m.requeued = requeued;
    m.accounts = fs
        .delivered
        .into_iter()
        .map(|(a, secs)| (a, secs / 3600.0))
        .collect();
    Ok(m)
}

/// The figures of a finished simulation. A job's wait is until its last start
/// (a requeued job's first runs count as waiting); its response time runs until it
/// left the machine; the work is what the machine really delivered, preempted runs
/// included.
fn metrics(
    trace: &Trace,
    jobs: &[Job],
    runs: &[Run],
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
    let mut per_job = Vec::with_capacity(jobs.len());
    let mut overran = 0usize;
    for ((j, t), r) in jobs.iter().zip(&trace.jobs).zip(runs) {
        let start = j.start_time.unwrap_or(t.submit);
        let wait = start - t.submit;
        waits.push(wait);
        let end = r.done_at.unwrap_or(start + t.run);
        if t.run > t.limit.max(1) {
            overran += 1;
        }
        per_job.push(JobResult {
            id: t.id,
            submit: t.submit,
            start,
            end,
            nodes: j
                .alloc
                .as_ref()
                .map(|a| a.nodes.clone())
                .unwrap_or_default(),
            wait,
        });
        let run = t.run as f64;
        let response = (end - t.submit) as f64;
        bsld += (response / run.max(10.0)).max(1.0);
        work += r.cpu_secs;
        last = last.max(end);
    }
    waits.sort_unstable();
    let median = match waits.len() {
        0 => 0.0,
        k if k % 2 == 1 => waits[k / 2] as f64,
        k => (waits[k / 2 - 1] + waits[k / 2]) as f64 / 2.0,
    };
    let max_wait = waits.last().copied().unwrap_or(0);
    let p99_wait = if waits.is_empty() {
        0
    } else {
        // Nearest rank: the smallest wait at or above 99% of the jobs.
        waits[(waits.len() * 99).div_ceil(100).max(1) - 1]
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
        preempted: 0,
        requeued: 0,
        accounts: Vec::new(),
        max_wait,
        p99_wait,
        overran,
        per_job,
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

const USAGE: &str = "usage: sluice simulate --trace FILE [--config CLUSTER.toml] [--textbook] [--policy fifo|easy|conservative|easy-sjf] [--jobs-out FILE] [--json]
       sluice simulate --scenario fairshare|fairshare-gpu [--days N] [--policy P] [--json]

Replays a Standard Workload Format trace (.swf or .swf.gz) on virtual time through the
scheduler and reports utilization, mean and median wait, mean bounded slowdown
(tau = 10 s), makespan and jobs backfilled. Without --config the machine is one node
with the trace's MaxProcs CPUs. With --config, its [priority], [topology] and
preemption settings apply (placement and preemption are the controller's; a job goes
to the partition its SWF partition number names, counting the config's partitions
from 1), and its [[accounts]] (users = SWF user ids) turn on fair-share priorities
and per-account CPU-hours.

With --config the controller's settings apply: its [scheduler] (policy unless --policy
is given, bf_resolution, bf_window, bf_max_job_test, bf_max_job_user; backfill runs
every bf_interval seconds; bf_continue changes nothing, as a pass is never cut short)
and multifactor priorities from its [priority] weights, with or without accounts.
--textbook (the default without --config) runs the textbook policies instead: exact
times, an unbounded plan, every job tested, backfill at every event, submission order.
--jobs-out FILE writes one tab-separated line per job: id submit start end nodes wait.

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
    let mut policy: Option<Policy> = None;
    let mut json = false;
    let mut textbook = false;
    let mut jobs_out: Option<PathBuf> = None;
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
                    Some(p) => policy = Some(p),
                    None => {
                        eprintln!(
                            "sluice simulate: unknown policy '{v}' (fifo, easy, conservative, easy-sjf)"
                        );
                        return ExitCode::from(2);
                    }
                },
                Err(c) => return c,
            },
            "--json" => json = true,
            "--textbook" => textbook = true,
            "--jobs-out" => match value("--jobs-out") {
                Ok(v) => jobs_out = Some(v.into()),
                Err(c) => return c,
            },
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
        sc.policy = policy.unwrap_or(Policy::Easy);
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
    let mut sched_cfg = sim_config(policy.unwrap_or(Policy::Easy));
    // With a config and without --textbook: the controller's settings.
    let production = config.is_some() && !textbook;
    let opts = SimOptions {
        priority: production,
        bf_interval: production,
    };
    let (nodes, parts) = match &config {
        None => default_cluster(t.max_procs),
        Some(p) => match Config::from_file(p)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                if production {
                    sched_cfg = c.sched.clone();
                    if let Some(p) = policy {
                        sched_cfg.policy = p;
                    }
                }
                sched_cfg.priority = c.sched.priority.clone();
                sched_cfg.topology = c.sched.topology.clone();
                sched_cfg.max_switch_wait = c.sched.max_switch_wait;
                sched_cfg.preempt = c.sched.preempt.clone();
                if sched_cfg.preempt.preempt_type == crate::model::preempt::PreemptType::Qos {
                    return Err(
                        "preempt/qos is not supported yet by sluice simulate (a config holds no QOS records); use preempt/partition_prio"
                            .into(),
                    );
                }
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
    let m = match simulate_opts(&t, &nodes, &parts, &sched_cfg, &[], opts) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("sluice simulate: {e}");
            return ExitCode::from(1);
        }
    };
    let secs = wall.elapsed().as_secs_f64();
    if let Some(path) = &jobs_out
        && let Err(e) = write_jobs(path, &m.per_job)
    {
        eprintln!("sluice simulate: cannot write {}: {e}", path.display());
        return ExitCode::from(1);
    }
    let settings = if production {
        format!(
            "config (bf_resolution {} s, bf_window {} s, bf_max_job_test {}, bf_interval {} s, multifactor priority)",
            sched_cfg.bf_resolution,
            sched_cfg.bf_window,
            sched_cfg.bf_max_job_test,
            sched_cfg.bf_interval
        )
    } else {
        "textbook (exact times, unbounded plan, every job tested, backfill at every event)"
            .to_string()
    };
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
            "settings": if production { "config" } else { "textbook" },
            "mean_wait": m.mean_wait,
            "median_wait": m.median_wait,
            "max_wait": m.max_wait,
            "p99_wait": m.p99_wait,
            "overran": m.overran,
            "mean_bounded_slowdown": m.mean_bounded_slowdown,
            "bsld_tau": 10,
            "makespan": m.makespan,
            "backfilled": m.backfilled,
            "preempted": m.preempted,
            "requeued": m.requeued,
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
        println!("settings:               {settings}");
        println!("utilization:            {:.4}", m.utilization);
        println!("mean wait:              {:.1} s", m.mean_wait);
        println!("median wait:            {:.1} s", m.median_wait);
        println!("p99 wait:               {} s", m.p99_wait);
        println!("max wait:               {} s", m.max_wait);
        println!("jobs past estimate:     {}", m.overran);
        println!(
            "mean bounded slowdown:  {:.3} (tau = 10 s)",
            m.mean_bounded_slowdown
        );
        println!("makespan:               {} s", m.makespan);
        println!("jobs backfilled:        {}", m.backfilled);
        if sched_cfg.preempt.preempt_type != crate::model::preempt::PreemptType::None {
            println!(
                "jobs preempted:         {} ({} requeued)",
                m.preempted, m.requeued
            );
        }
        println!("scheduling passes:      {}", m.passes);
        println!("wall time:              {secs:.2} s ({rate:.0} jobs/minute)");
        for (a, h) in &m.accounts {
            let a = if a.is_empty() { "root" } else { a };
            println!("account {a:<15} {h:.1} CPU-hours");
        }
    }
    ExitCode::SUCCESS
}

/// Writes one line per job: `id submit start end nodes wait` (tab-separated, with a
/// header; nodes as a hostlist, `-` when none), into a temporary file renamed over
/// `path`, so nothing half-written is left.
///
/// Errors: the file cannot be written.
pub fn write_jobs(path: &std::path::Path, jobs: &[JobResult]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("part");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        writeln!(w, "id\tsubmit\tstart\tend\tnodes\twait")?;
        for j in jobs {
            let nodes = if j.nodes.is_empty() {
                "-".to_string()
            } else {
                crate::model::hostlist::compress(&j.nodes)
            };
            writeln!(
                w,
                "{}\t{}\t{}\t{}\t{nodes}\t{}",
                j.id, j.submit, j.start, j.end, j.wait
            )?;
        }
        w.flush()?;
    }
    std::fs::rename(&tmp, path)
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
