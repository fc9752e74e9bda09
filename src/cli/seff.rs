//! `seff JOBID`: a job's CPU and memory efficiency, in the report format of Slurm's
//! contribs/seff (version 2.1, as shipped with 22.05).
//!
//! Figures, as seff computes them from the accounting record:
//! - CPU Utilized: the steps' TotalCPU summed (user + system), rounded to seconds;
//!   CPU Efficiency: that over Elapsed × allocated CPUs ("core-walltime").
//! - Memory Utilized: the largest over the steps of TRESUsageInTot's `mem` (the step's
//!   tasks' peak RSS summed); Memory Efficiency: that over the job's allocated memory,
//!   which is also shown per node (`--mem`) or per core (`--mem-per-cpu`).
//!
//! Errors: no argument → the usage text, exit 1; an unknown job → `Job not found.`,
//! exit 2; the controller cannot be reached → `seff: error: …`, exit 1.

use super::client::{self, Client, answer};
use super::getopt::{OptSpec, opt};
use super::jobfmt;
use super::jobid::{ArraySel, parse_job_id};
use crate::model::job::MemReq;
use crate::model::{Job, JobState};
use crate::proto::{AcctQuery, Request, Response};
use std::ffi::OsString;
use std::fmt::Write;
use std::process::ExitCode;

const USAGE: &str = "Usage: seff [Options] <Jobid>
       Options:
       -h    Help menu
       -v    Version
       -d    Debug mode: display raw Slurm data
";

/// seff's options, for its man page and completions (`cli::docs`). Slurm's seff is a
/// Perl script with a hand-made loop, which [`run`] follows: `-h` and `-v` answer and
/// exit 1, and anything else is the job id.
pub const SPECS: &[OptSpec] = &[
    opt("help", Some('h'), false).doc("", "help menu (exit status 1; --help exits 0)"),
    opt("usage", None, false).doc("", "the same text as --help"),
    opt("", Some('v'), false).doc("", "print seff's version and exit 1"),
    opt("", Some('d'), false).doc(
        "",
        "debug mode: accepted (the raw record is sacct -l -j JOBID)",
    ),
];

/// `[D-]HH:MM:SS` of whole seconds (seff's `time2str`).
pub fn time2str(secs: u64) -> String {
    let days = secs / 86400;
    let rest = secs % 86400;
    let d = if days > 0 {
        format!("{days}-")
    } else {
        String::new()
    };
    format!(
        "{d}{:02}:{:02}:{:02}",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    )
}

/// A size in KiB as seff prints it: two decimals in the largest binary unit that
/// keeps the figure at least 1 (`200.00 MB`, `512.00 KB`); zero is `0.00 MB`.
pub fn kbytes2str(kib: f64) -> String {
    if kib <= 0.0 {
        return "0.00 MB".into();
    }
    const PRE: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    let exp = ((kib.ln() / 1024f64.ln()).floor().max(0.0) as usize).min(PRE.len() - 1);
    format!("{:.2} {}B", kib / 1024f64.powi(exp as i32), PRE[exp])
}

/// The figures seff derives from a job's record (sizes in KiB, times in seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiency {
    pub ncpus: u32,
    pub nnodes: u32,
    pub cpu_secs: u64,
    pub wall_secs: u64,
    /// TRESUsageInTot memory of the step that used most, KiB.
    pub mem_kib: u64,
    /// That step's largest and average task peak, KiB.
    pub max_task_kib: u64,
    pub ave_task_kib: u64,
    /// The job's allocated (or requested) memory, KiB.
    pub alloc_kib: u64,
    /// Memory was requested per node (else per CPU).
    pub per_node: bool,
}

impl Efficiency {
    /// Computes the figures for `job` at `now` (epoch seconds; used while it runs).
    pub fn of(job: &Job, now: i64) -> Efficiency {
        let cpu: f64 = job
            .steps
            .iter()
            .map(|s| {
                s.usage()
                    .map_or(s.cpu_secs, |u| u.sum_cpu_secs.max(s.cpu_secs))
            })
            .sum();
        let mut mem = 0;
        let (mut max_task, mut ave_task) = (0, 0);
        for s in &job.steps {
            let (tot, max, ave) = match s.usage() {
                Some(u) => (
                    u.tot_rss_kib().max(s.max_rss_kib),
                    u.max_rss_kib.max(s.max_rss_kib),
                    u.ave_rss_kib(),
                ),
                None => (s.max_rss_kib, s.max_rss_kib, s.max_rss_kib),
            };
            if tot > mem {
                (mem, max_task, ave_task) = (tot, max, ave);
            }
        }
        Efficiency {
            ncpus: jobfmt::cpu_count(job).max(1),
            nnodes: jobfmt::node_count(job).max(1),
            cpu_secs: cpu.max(0.0).round() as u64,
            wall_secs: job.run_secs(now),
            mem_kib: mem,
            max_task_kib: max_task,
            ave_task_kib: ave_task,
            alloc_kib: jobfmt::total_mem_mb(job).saturating_mul(1024),
            per_node: matches!(job.req_mem, MemReq::PerNode(_)),
        }
    }
}

/// seff's report for `job` on cluster `cluster` at `now`.
pub fn report(job: &Job, cluster: &str, now: i64) -> String {
    let e = Efficiency::of(job, now);
    let mut o = String::new();
    let _ = writeln!(o, "Job ID: {}", job.id);
    if let Some(t) = job.array_task_id {
        let _ = writeln!(o, "Array Job ID: {}_{t}", job.array_job_id);
    }
    let _ = writeln!(o, "Cluster: {cluster}");
    let group = if job.group.is_empty() {
        job.gid.to_string()
    } else {
        job.group.clone()
    };
    let _ = writeln!(o, "User/Group: {}/{group}", job.user);
    let state = job.state.long();
    if matches!(job.state, JobState::Pending | JobState::Running) {
        let _ = writeln!(o, "State: {state}");
    } else {
        let _ = writeln!(o, "State: {state} (exit code {})", job.exit.code);
    }
    if e.ncpus == 1 {
        let _ = writeln!(o, "Cores: 1");
    } else {
        let _ = writeln!(o, "Nodes: {}", e.nnodes);
        let _ = writeln!(o, "Cores per node: {}", e.ncpus / e.nnodes);
    }
    if job.state == JobState::Pending {
        o.push_str("Efficiency not available for jobs in the PENDING state.\n");
        return o;
    }
    let core_wall = e.wall_secs * u64::from(e.ncpus);
    let pct = |num: f64, den: f64| if den > 0.0 { num / den * 100.0 } else { 0.0 };
    let _ = writeln!(o, "CPU Utilized: {}", time2str(e.cpu_secs));
    let _ = writeln!(
        o,
        "CPU Efficiency: {:.2}% of {} core-walltime",
        pct(e.cpu_secs as f64, core_wall as f64),
        time2str(core_wall)
    );
    let _ = writeln!(o, "Job Wall-clock time: {}", time2str(e.wall_secs));
    let _ = writeln!(o, "Memory Utilized: {}", kbytes2str(e.mem_kib as f64));
    let alloc = e.alloc_kib as f64;
    let (share, unit) = if e.per_node {
        (alloc / f64::from(e.nnodes), "node")
    } else {
        (alloc / f64::from(e.ncpus), "core")
    };
    let _ = writeln!(
        o,
        "Memory Efficiency: {:.2}% of {} ({}/{unit})",
        pct(e.mem_kib as f64, alloc),
        kbytes2str(alloc),
        kbytes2str(share)
    );
    if e.max_task_kib != 0 && e.ave_task_kib > 0 && e.max_task_kib > e.ave_task_kib {
        let _ = writeln!(
            o,
            "The task which had the largest memory consumption differs by {:.2}% from the average task max memory consumption",
            e.max_task_kib as f64 / e.ave_task_kib as f64 * 100.0
        );
    }
    if job.state == JobState::Running {
        o.push_str("WARNING: Efficiency statistics can only be obtained after the job has ended as seff tool is based on the accounting database data.\n");
    }
    o
}

/// Longest wait for the final usage of a just-ended job's steps.
const USAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Whether `job` has ended but is COMPLETING with a step whose end (and final usage)
/// has not been recorded yet.
fn awaits_step_usage(job: &Job) -> bool {
    job.completing
        && job.state != JobState::Running
        && job.steps.iter().any(|s| s.state == JobState::Running)
}

/// Picks the job `arg` names (`N`, or `N_T` for an array task; a bare array id
/// names its lowest task, as the accounting lookup does).
fn pick<'a>(jobs: &'a [Job], arg: &str) -> Option<&'a Job> {
    let spec = parse_job_id(arg)?;
    match spec.array {
        Some(ArraySel::Task(t)) => jobs
            .iter()
            .find(|j| j.array_job_id == spec.job && j.array_task_id == Some(t)),
        Some(ArraySel::Expr(_)) => None,
        None => jobs.iter().find(|j| j.id == spec.job).or_else(|| {
            jobs.iter()
                .filter(|j| j.array_job_id == spec.job)
                .min_by_key(|j| j.array_task_id)
        }),
    }
}

/// `seff [-h] [-v] [-d] JOBID`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut ids = Vec::new();
    for a in &args {
        match a.as_str() {
            "-v" => {
                println!("seff Version 2.1");
                return ExitCode::from(1);
            }
            "-h" => {
                print!("{USAGE}");
                return ExitCode::from(1);
            }
            // The long forms every front-end takes: the same text, as a success.
            "--help" | "--usage" => {
                print!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            // Raw data is the accounting record, which `sacct -l -j` shows.
            "-d" => {}
            _ => ids.push(a.clone()),
        }
    }
    if ids.len() != 1 {
        print!("{USAGE}");
        return ExitCode::from(1);
    }
    let Some(spec) = parse_job_id(&ids[0]) else {
        eprintln!("Job not found.");
        return ExitCode::from(2);
    };
    let (mut client, cfg) = match Client::connect() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("seff: error: {e}");
            return ExitCode::from(1);
        }
    };
    // Any user's job, any time (seff reads the accounting record directly).
    let q = AcctQuery {
        ids: vec![spec.job],
        ..AcctQuery::default()
    };
    let mut reply = client.request(&Request::Acct(q.clone()));
    // A job that has just ended may still wait for a step's final report, which
    // carries that step's usage: seff waits for it (a little) rather than report
    // figures without it.
    let deadline = std::time::Instant::now() + USAGE_WAIT;
    while let Ok(Response::Acct { jobs, .. }) = &reply
        && pick(jobs, &ids[0]).is_some_and(awaits_step_usage)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
        reply = client.request(&Request::Acct(q.clone()));
    }
    match client::expect(reply, answer!(Response::Acct { jobs, now } => (jobs, now))) {
        Ok((jobs, now)) => match pick(&jobs, &ids[0]) {
            Some(j) => {
                print!("{}", report(j, &cfg.cluster_name, now));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("Job not found.");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("seff: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{Allocation, ExitStatus, StepRecord};
    use crate::model::step::{StepUsage, TaskSample};

    #[test]
    fn units_and_times_as_seff_prints_them() {
        assert_eq!(kbytes2str(0.0), "0.00 MB");
        assert_eq!(kbytes2str(512.0), "512.00 KB");
        assert_eq!(kbytes2str(204800.0), "200.00 MB");
        assert_eq!(kbytes2str(1.5 * 1024.0 * 1024.0), "1.50 GB");
        assert_eq!(time2str(59), "00:00:59");
        assert_eq!(time2str(86400 + 3661), "1-01:01:01");
    }

    fn finished_job(req_mem: MemReq, cpus: u32, nodes: &[&str]) -> Job {
        let mut usage = StepUsage::from_tasks(
            "n1",
            &[TaskSample {
                rank: 0,
                rss_kib: 100 * 1024,
                cpu_secs: 9.6,
                user_secs: 9.0,
                ..TaskSample::default()
            }],
        );
        usage.ntasks = 1;
        Job {
            id: 42,
            user: "alice".into(),
            group: "lab".into(),
            state: JobState::Completed,
            start_time: Some(1000),
            end_time: Some(1010),
            req_mem,
            alloc: Some(Allocation {
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
                cpus: vec![cpus / nodes.len() as u32; nodes.len()],
                mem_per_node: 400,
                ..Allocation::default()
            }),
            steps: vec![StepRecord {
                id: "batch".into(),
                name: "batch".into(),
                state: JobState::Completed,
                exit: ExitStatus::default(),
                start_time: 1000,
                end_time: Some(1010),
                nodes: nodes[0].into(),
                ncpus: cpus,
                ntasks: 1,
                max_rss_kib: usage.max_rss_kib,
                cpu_secs: usage.sum_cpu_secs,
                detail: None,
                usage: Some(Box::new(usage)),
            }],
            ..Job::default()
        }
    }

    #[test]
    fn one_core_report() {
        let j = finished_job(MemReq::PerNode(400), 1, &["n1"]);
        assert_eq!(
            report(&j, "lab", 2000),
            "Job ID: 42
Cluster: lab
User/Group: alice/lab
State: COMPLETED (exit code 0)
Cores: 1
CPU Utilized: 00:00:10
CPU Efficiency: 100.00% of 00:00:10 core-walltime
Job Wall-clock time: 00:00:10
Memory Utilized: 100.00 MB
Memory Efficiency: 25.00% of 400.00 MB (400.00 MB/node)
"
        );
    }

    #[test]
    fn multi_node_per_cpu_report_and_pending() {
        let j = finished_job(MemReq::PerCpu(100), 4, &["n1", "n2"]);
        let r = report(&j, "lab", 2000);
        assert!(r.contains("Nodes: 2\nCores per node: 2\n"), "{r}");
        assert!(
            r.contains("CPU Efficiency: 25.00% of 00:00:40 core-walltime"),
            "{r}"
        );
        assert!(
            r.contains("Memory Efficiency: 25.00% of 400.00 MB (100.00 MB/core)"),
            "{r}"
        );
        let mut p = finished_job(MemReq::PerNode(400), 1, &["n1"]);
        p.state = JobState::Pending;
        p.alloc = None;
        p.start_time = None;
        let r = report(&p, "lab", 2000);
        assert!(r.ends_with("State: PENDING\nCores: 1\nEfficiency not available for jobs in the PENDING state.\n"), "{r}");
    }
}
