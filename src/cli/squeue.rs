//! `squeue`: the job queue as Slurm prints it (cf. src/squeue/opts.c for options and
//! filters, src/squeue/print.c for the `%` specifiers, src/squeue/sort.c for `--sort`).
//!
//! Shape: [`run`] parses argv and the `SQUEUE_*` environment into a [`Query`]
//! ([`build_query`]), fetches the jobs with one `Request::Jobs`, and hands everything to
//! the pure [`render`], which filters, sorts and formats (args + data + now → text).
//!
//! Behaviour kept from Slurm 22.05 (see golden/queue_squeue.txt, errors_other.txt,
//! completed_visibility.txt): without `-t` only pending, running, suspended and
//! completing jobs show; finished jobs need a matching `-t`. One unknown id in `-j` is
//! `slurm_load_jobs error: Invalid job id specified` (exit 1), several just omit it.
//! An unknown `-u` user prints Slurm's error (with its extra blank line), then the header.
//!
//! Arrays: an array's pending tasks are one record (the meta record) shown as
//! `123_[5-99%10]`; `-r` and `-j 123_i` show them one per line. An array's id in `-j`
//! selects every record of the array, a task's own id that task.
//!
//! `--json` prints OpenAPI v0.0.38 job objects (`cli::jobjson`). Not yet: `--yaml`, `-i` iteration. `--start` shows the backfill timeline's
//! expected start of a pending job (else `N/A`) and the nodes it was planned on
//! (SCHEDNODES).

use crate::cli::client::{self, CallError, Client, answer};
use crate::cli::format::{self, Field, Format};
use crate::cli::jobid::parse_job_id;
use crate::cli::timefmt::{fmt_banner, fmt_ts};
use crate::model::array::IndexSet;
use crate::model::time::fmt_squeue_duration;
use crate::model::{Job, JobState, MemReq, hostlist};
use crate::proto::ArrayTasks;
use crate::proto::{JobFilter, Response, SlurmError};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::process::ExitCode;

/// squeue's default format.
pub const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// `-l`.
pub const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// `--start`.
pub const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
/// `--only-job-state`.
pub const ONLY_STATE_FORMAT: &str = "%.18i %.2t";
/// The default sort: partition, state, then priority descending.
pub const DEFAULT_SORT: &str = "P,t,-p";

/// squeue's command line (Slurm's getopt names; `-h` is `--noheader`).
#[derive(Parser, Debug, Default)]
#[command(
    name = "squeue",
    disable_help_flag = true,
    disable_version_flag = true,
    infer_long_args = true,
    about = "view information about jobs located in the Slurm scheduling queue"
)]
pub struct Args {
    /// Comma separated list of accounts to view.
    #[arg(short = 'A', long = "account", value_name = "ACCOUNTS")]
    pub account: Option<String>,
    /// Display jobs in hidden partitions too.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Display one job array element per line.
    #[arg(short = 'r', long = "array")]
    pub array: bool,
    /// Do not print a header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// Comma separated list of job ids to view; without a list (Slurm's optional
    /// `j::` argument), every job.
    #[arg(
        short = 'j',
        long = "jobs",
        visible_alias = "job",
        value_name = "JOB_ID",
        num_args = 0..=1
    )]
    pub jobs: Vec<String>,
    /// Long report (adds STATE and TIME_LIMIT, and a time banner).
    #[arg(short = 'l', long = "long")]
    pub long: bool,
    /// Cluster(s) to query; prints a `CLUSTER:` line first.
    #[arg(short = 'M', long = "clusters", value_name = "NAMES")]
    pub clusters: Option<String>,
    /// Show only jobs of the calling user.
    #[arg(long = "me")]
    pub me: bool,
    /// Comma separated list of job names to view.
    #[arg(short = 'n', long = "name", value_name = "NAMES")]
    pub name: Option<String>,
    /// Don't convert units to their human readable form.
    #[arg(long = "noconvert")]
    pub noconvert: bool,
    /// Output format (`%.18i %9P …`).
    #[arg(short = 'o', long = "format", allow_hyphen_values = true)]
    pub format: Option<String>,
    /// Long output format (`JobID,Name:30,…`).
    #[arg(short = 'O', long = "Format", allow_hyphen_values = true)]
    pub format_long: Option<String>,
    /// Show only the job id and its compact state.
    #[arg(long = "only-job-state")]
    pub only_job_state: bool,
    /// Comma separated list of partitions to view.
    #[arg(short = 'p', long = "partition", value_name = "PARTITIONS")]
    pub partition: Option<String>,
    /// Comma separated list of QOS to view.
    #[arg(short = 'q', long = "qos")]
    pub qos: Option<String>,
    /// Sort keys (`P,t,-p`).
    #[arg(short = 'S', long = "sort")]
    pub sort: Option<String>,
    /// Show the expected start time of pending jobs.
    #[arg(long = "start")]
    pub start: bool,
    /// Show job steps (optionally only these `JOB.STEP`s) instead of jobs.
    #[arg(short = 's', long = "steps", value_name = "STEPS", num_args = 0..=1,
          require_equals = true, default_missing_value = "")]
    pub steps: Option<String>,
    /// Comma separated list of states to view (`all`, `PD`, `running`, …).
    #[arg(short = 't', long = "states", value_name = "STATES")]
    pub states: Option<String>,
    /// Comma separated list of users to view.
    #[arg(short = 'u', long = "user", value_name = "USERS")]
    pub user: Vec<String>,
    /// Only jobs on these nodes.
    #[arg(short = 'w', long = "nodelist", value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
    /// Verbose output (accepted, no effect).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// JSON output (not supported yet).
    #[arg(long = "json")]
    pub json: bool,
    /// Print version information.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// Show this help message.
    #[arg(long = "help")]
    pub help: bool,
    /// Display brief usage message.
    #[arg(long = "usage")]
    pub usage: bool,
}

/// Which job states a query shows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StateFilter {
    /// Pending, running, suspended and completing (Slurm's default).
    #[default]
    Active,
    /// `-t all`.
    All,
    /// An explicit list.
    Only(Vec<StateSel>),
}

/// One entry of `-t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSel {
    Base(JobState),
    /// `CG`/`COMPLETING` (a flag on top of the base state).
    Completing,
    /// A state Slurm knows that sluice never produces (`CONFIGURING`, `REQUEUED`, …).
    Never,
}

impl StateFilter {
    /// Parses `-t`'s value; `Err` names the first bad token.
    pub fn parse(s: &str) -> Result<StateFilter, String> {
        let mut sels = Vec::new();
        for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if tok.eq_ignore_ascii_case("all") {
                return Ok(StateFilter::All);
            }
            let u = tok.to_ascii_uppercase();
            let sel = if u == "CG" || u == "COMPLETING" {
                StateSel::Completing
            } else if let Some(st) = JobState::parse(&u) {
                StateSel::Base(st)
            } else if NEVER_STATES.contains(&u.as_str()) {
                StateSel::Never
            } else {
                return Err(tok.to_string());
            };
            sels.push(sel);
        }
        Ok(StateFilter::Only(sels))
    }

    /// Whether only jobs still in the queue can match.
    pub fn active_only(&self) -> bool {
        match self {
            StateFilter::Active => true,
            StateFilter::All => false,
            StateFilter::Only(sels) => sels.iter().all(|s| match s {
                StateSel::Base(st) => !st.is_terminal(),
                StateSel::Completing | StateSel::Never => true,
            }),
        }
    }

    fn matches(&self, job: &Job) -> bool {
        match self {
            StateFilter::Active => job.is_active(),
            StateFilter::All => true,
            StateFilter::Only(sels) => sels.iter().any(|s| match s {
                StateSel::Base(st) => job.state == *st,
                StateSel::Completing => job.completing,
                StateSel::Never => false,
            }),
        }
    }
}

/// States Slurm accepts in `-t` that sluice jobs are never in.
const NEVER_STATES: &[&str] = &[
    "CF",
    "CONFIGURING",
    "RD",
    "RESV_DEL_HOLD",
    "RF",
    "REQUEUE_FED",
    "RH",
    "REQUEUE_HOLD",
    "RQ",
    "REQUEUED",
    "RS",
    "RESIZING",
    "RV",
    "REVOKED",
    "SI",
    "SIGNALING",
    "SE",
    "SPECIAL_EXIT",
    "SO",
    "STAGE_OUT",
    "ST",
    "STOPPED",
];

/// One `-j` entry: a job id (an array's id selects the whole array, a heterogeneous
/// job's leader every component), optionally array tasks (`N_i`, `N_[a-b]`) or one
/// component (`N+k`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSel {
    pub id: u32,
    pub tasks: Option<IndexSet>,
    pub het: Option<u32>,
}

impl JobSel {
    /// Parses `N`, `N_i`, `N_[expr]` or `N+k`.
    pub fn parse(s: &str) -> Option<JobSel> {
        let spec = parse_job_id(s).filter(|p| p.step.is_none())?;
        let tasks = match &spec.array {
            None => None,
            Some(_) => Some(spec.array_tasks()?.tasks),
        };
        Some(JobSel {
            id: spec.job,
            tasks,
            het: spec.het,
        })
    }

    fn matches(&self, job: &Job) -> bool {
        if let Some(k) = self.het {
            return job
                .het
                .is_some_and(|h| h.job_id == self.id && h.offset == k);
        }
        match &self.tasks {
            None => {
                job.id == self.id
                    || (job.array_job_id == self.id && self.id != 0)
                    || job.het.is_some_and(|h| h.job_id == self.id)
            }
            Some(t) => ArrayTasks {
                job: self.id,
                tasks: t.clone(),
            }
            .matches(job),
        }
    }

    /// The pending tasks of meta record `job` this entry selects (`None`: not this
    /// array, or no task selection).
    fn tasks_of(&self, job: &Job) -> Option<Vec<u32>> {
        let t = self.tasks.as_ref()?;
        let a = job.array.as_ref()?;
        (job.array_job_id == self.id).then(|| a.tasks.intersection(t))
    }
}

/// One `--sort` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub letter: char,
    pub descending: bool,
}

/// Parses `--sort` (`P,t,-p`, `+i`); `Err` names a bad key.
pub fn parse_sort(s: &str) -> Result<Vec<SortKey>, String> {
    let mut keys = Vec::new();
    for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (descending, rest) = match tok.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, tok.strip_prefix('+').unwrap_or(tok)),
        };
        let mut it = rest.chars();
        match (it.next(), it.next()) {
            (Some(letter), None) if letter.is_ascii_alphabetic() => {
                keys.push(SortKey { letter, descending })
            }
            _ => return Err(tok.to_string()),
        }
    }
    Ok(keys)
}

/// Which output format a query uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatSpec {
    Short(String),
    Long(String),
}

/// Everything [`render`] needs, normalised from the command line and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub format: FormatSpec,
    pub noheader: bool,
    /// `-l`: print the time banner.
    pub banner: bool,
    /// `-M`: print `CLUSTER: <name>` first.
    pub cluster_line: bool,
    pub states: StateFilter,
    /// `None` = any user; `Some(empty)` = nobody (every `-u` name was unknown).
    pub users: Option<Vec<u32>>,
    pub partitions: Vec<String>,
    pub accounts: Vec<String>,
    pub qos: Vec<String>,
    pub names: Vec<String>,
    pub jobs: Vec<JobSel>,
    /// Nodes a job must use one of (expanded `-w`).
    pub nodes: Vec<String>,
    pub sort: Vec<SortKey>,
    pub noconvert: bool,
    /// `--start`: pending jobs only, sorted by expected start.
    pub start: bool,
    /// `-r`: one line per pending array task.
    pub expand_array: bool,
}

/// What a run prints, and its exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// Builds a [`Query`] from parsed options, the environment (`SQUEUE_*`), a user-name
/// resolver and the caller's uid. Warnings (bad users) go into `stderr`; a fatal error
/// is `Err(Output)`.
pub fn build_query(
    args: &Args,
    env: &dyn Fn(&str) -> Option<String>,
    resolve_user: &dyn Fn(&str) -> Option<u32>,
    my_uid: u32,
    stderr: &mut String,
) -> Result<Query, Output> {
    let fail = |msg: String| Output {
        stdout: String::new(),
        stderr: msg,
        code: 1,
    };
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());

    let format = if let Some(f) = &args.format_long {
        FormatSpec::Long(f.clone())
    } else if let Some(f) = &args.format {
        FormatSpec::Short(f.clone())
    } else if let Some(f) = nonempty("SQUEUE_FORMAT2") {
        FormatSpec::Long(f)
    } else if let Some(f) = nonempty("SQUEUE_FORMAT") {
        FormatSpec::Short(f)
    } else if args.only_job_state {
        FormatSpec::Short(ONLY_STATE_FORMAT.into())
    } else if args.start {
        FormatSpec::Short(START_FORMAT.into())
    } else if args.long {
        FormatSpec::Short(LONG_FORMAT.into())
    } else {
        FormatSpec::Short(DEFAULT_FORMAT.into())
    };

    let states_text = args.states.clone().or_else(|| nonempty("SQUEUE_STATES"));
    let states = match states_text {
        Some(t) => StateFilter::parse(&t).map_err(|bad| {
            fail(format!(
                "squeue: error: Invalid job state specified: {bad}\n"
            ))
        })?,
        None if args.start => StateFilter::Only(vec![StateSel::Base(JobState::Pending)]),
        None => StateFilter::Active,
    };

    let user_text = if args.user.is_empty() {
        nonempty("SQUEUE_USERS").map(|u| vec![u])
    } else {
        Some(args.user.clone())
    };
    let mut users = None;
    if let Some(list) = user_text {
        let mut uids = Vec::new();
        for name in list.iter().flat_map(|u| split_list(u)) {
            match resolve_user(&name) {
                Some(uid) => uids.push(uid),
                // Slurm's message carries its own "\n", hence the blank line.
                None => stderr.push_str(&format!("squeue: error: Invalid user: {name}\n\n")),
            }
        }
        users = Some(uids);
    }
    if args.me {
        users.get_or_insert_with(Vec::new).push(my_uid);
    }

    let mut jobs = Vec::new();
    for tok in args.jobs.iter().flat_map(|j| split_list(j)) {
        match JobSel::parse(&tok) {
            Some(sel) => jobs.push(sel),
            None => return Err(fail(format!("squeue: error: Invalid job id: {tok}\n"))),
        }
    }

    let sort_text = args.sort.clone().or_else(|| nonempty("SQUEUE_SORT"));
    let sort = match sort_text {
        Some(s) => parse_sort(&s).map_err(|bad| {
            fail(format!(
                "squeue: error: Invalid sort specification: {bad}\n"
            ))
        })?,
        None if args.start => parse_sort("S").unwrap_or_default(),
        None => parse_sort(DEFAULT_SORT).unwrap_or_default(),
    };

    let nodes = match &args.nodelist {
        Some(expr) => hostlist::expand(expr).map_err(|_| {
            fail(format!(
                "squeue: error: Invalid node name specified: {expr}\n"
            ))
        })?,
        None => Vec::new(),
    };

    let list_of = |a: &Option<String>, var: &str| {
        a.clone()
            .or_else(|| nonempty(var))
            .map(|s| split_list(&s))
            .unwrap_or_default()
    };
    Ok(Query {
        format,
        noheader: args.noheader,
        banner: args.long,
        cluster_line: args.clusters.is_some() || nonempty("SLURM_CLUSTERS").is_some(),
        states,
        users,
        partitions: list_of(&args.partition, "SQUEUE_PARTITION"),
        accounts: list_of(&args.account, "SQUEUE_ACCOUNT"),
        qos: list_of(&args.qos, "SQUEUE_QOS"),
        names: list_of(&args.name, "SQUEUE_NAMES"),
        jobs,
        nodes,
        sort,
        noconvert: args.noconvert,
        start: args.start,
        expand_array: args.array,
    })
}

impl Query {
    fn matches(&self, job: &Job) -> bool {
        self.states.matches(job)
            && self.users.as_ref().is_none_or(|u| u.contains(&job.uid))
            && (self.partitions.is_empty() || self.partitions.contains(&job.partition))
            && (self.accounts.is_empty() || self.accounts.contains(&job.account))
            && (self.qos.is_empty() || self.qos.contains(&job.qos))
            && (self.names.is_empty() || self.names.contains(&job.spec.name))
            && (self.jobs.is_empty() || self.jobs.iter().any(|s| s.matches(job)))
            && (self.nodes.is_empty()
                || job
                    .alloc
                    .as_ref()
                    .is_some_and(|a| a.nodes.iter().any(|n| self.nodes.contains(n))))
    }
}

/// One job as the field table sees it.
pub struct JobRow<'a> {
    pub job: &'a Job,
    /// For a pending array task shown on its own line (`-r`, `-j N_i`): its index,
    /// while `job` is the array's meta record.
    pub task: Option<u32>,
    pub now: i64,
    pub noconvert: bool,
    pub cluster: &'a str,
}

fn or_null(s: &Option<String>) -> String {
    match s {
        Some(v) if !v.is_empty() => v.clone(),
        _ => "(null)".into(),
    }
}

fn nodes_of(job: &Job) -> u32 {
    match &job.alloc {
        Some(a) if !a.nodes.is_empty() => a.nodes.len() as u32,
        _ => job.req_nodes.max(1),
    }
}

fn cpus_of(job: &Job) -> u32 {
    match &job.alloc {
        Some(a) if a.total_cpus() > 0 => a.total_cpus(),
        _ => job.req_cpus,
    }
}

fn mem_text(mb: u64, noconvert: bool) -> String {
    if mb == 0 {
        "0".into()
    } else if noconvert {
        format!("{mb}M")
    } else {
        format::mem_mb(mb)
    }
}

/// `%m`: the per-node or per-CPU minimum as requested.
fn min_memory(r: &JobRow) -> String {
    match r.job.req_mem {
        MemReq::PerNode(m) | MemReq::PerCpu(m) => mem_text(m, r.noconvert),
    }
}

/// The whole job's memory, MiB (for `tres-alloc`).
fn total_mem(job: &Job) -> u64 {
    match job.req_mem {
        MemReq::PerNode(m) => m * u64::from(nodes_of(job)),
        MemReq::PerCpu(m) => m * u64::from(cpus_of(job)),
    }
}

/// Whether `%R` shows the reason rather than the node list.
fn shows_reason(job: &Job) -> bool {
    !job.completing
        && matches!(
            job.state,
            JobState::Pending | JobState::Failed | JobState::Timeout | JobState::OutOfMemory
        )
}

/// The job's start, or for a pending job the scheduler's expected start.
fn start_of(job: &Job) -> Option<i64> {
    job.start_time.or(job.sched.est_start)
}

fn start_text(job: &Job) -> String {
    start_of(job).map(fmt_ts).unwrap_or_else(|| "N/A".into())
}

fn end_text(job: &Job) -> String {
    if let Some(e) = job.end_time {
        return fmt_ts(e);
    }
    match (start_of(job), job.time_limit.secs()) {
        (Some(s), Some(l)) => fmt_ts(s + l as i64),
        _ => "N/A".into(),
    }
}

fn time_left(r: &JobRow) -> String {
    match r.job.time_limit.secs() {
        None => "UNLIMITED".into(),
        Some(limit) => {
            let left = limit as i64 - r.job.run_secs(r.now) as i64;
            if left < 0 {
                "INVALID".into()
            } else {
                fmt_squeue_duration(left as u64)
            }
        }
    }
}

fn priority_float(job: &Job) -> String {
    format!("{:.14}", f64::from(job.priority) / 4_294_967_296.0)
}

fn tres_alloc(r: &JobRow) -> String {
    crate::cli::jobfmt::tres_with_mem(r.job, &mem_text(total_mem(r.job), r.noconvert))
}

/// squeue's fields: every `-o` letter and the `-O` names that map to them.
pub fn job_fields<'a>() -> Vec<Field<JobRow<'a>>> {
    type R<'b, 'c> = &'b JobRow<'c>;
    vec![
        Field::new(Some('a'), &["account"], "ACCOUNT", |r: R| {
            r.job.account.clone()
        }),
        Field::new(Some('b'), &["tres-per-node"], "TRES_PER_NODE", |r: R| {
            r.job.spec.tres_per_node()
        }),
        Field::new(Some('c'), &["mincpus"], "MIN_CPUS", |r: R| {
            crate::cli::jobfmt::min_cpus_per_node(r.job).to_string()
        }),
        Field::new(Some('d'), &["mintmpdisk"], "MIN_TMP_DISK", |r: R| {
            r.job
                .spec
                .tmp_disk
                .filter(|t| *t > 0)
                .map_or_else(|| "0".into(), |t| mem_text(t, r.noconvert))
        }),
        Field::new(Some('e'), &["endtime"], "END_TIME", |r: R| end_text(r.job)),
        Field::new(Some('f'), &["feature"], "FEATURES", |_: R| "(null)".into()),
        Field::new(Some('g'), &["groupname"], "GROUP", |r: R| {
            r.job.group.clone()
        }),
        Field::new(Some('h'), &["oversubscribe"], "OVER_SUBSCRIBE", |r: R| {
            if r.job.spec.exclusive {
                "NO"
            } else if r.job.spec.exclusive_user {
                "USER"
            } else {
                "OK"
            }
            .into()
        }),
        Field::new(Some('i'), &["jobarrayid"], "JOBID", |r: R| match r.task {
            Some(t) => format!("{}_{t}", r.job.array_job_id),
            None => r.job.display_id(true),
        }),
        Field::new(Some('j'), &["name"], "NAME", |r: R| r.job.spec.name.clone()),
        Field::new(Some('k'), &["comment"], "COMMENT", |r: R| {
            or_null(&r.job.spec.comment)
        }),
        Field::new(Some('l'), &["timelimit"], "TIME_LIMIT", |r: R| {
            r.job.time_limit.to_squeue()
        }),
        Field::new(Some('m'), &["minmemory"], "MIN_MEMORY", |r: R| {
            min_memory(r)
        }),
        Field::new(Some('n'), &["reqnodes"], "REQ_NODES", |r: R| {
            r.job.spec.nodelist.clone().unwrap_or_default()
        }),
        Field::new(Some('o'), &["command"], "COMMAND", |r: R| {
            or_null(&Some(r.job.spec.command.clone()))
        }),
        Field::new(Some('p'), &["priority"], "PRIORITY", |r: R| {
            priority_float(r.job)
        }),
        Field::new(Some('q'), &["qos"], "QOS", |r: R| r.job.qos.clone()),
        Field::new(Some('r'), &["reason"], "REASON", |r: R| {
            r.job.reason.to_string()
        }),
        Field::new(Some('s'), &["selectjobinfo"], "SELECT_JOBINFO", |_: R| {
            String::new()
        }),
        Field::new(Some('t'), &["statecompact"], "ST", |r: R| {
            r.job.state_compact().into()
        }),
        Field::new(Some('u'), &["username"], "USER", |r: R| r.job.user.clone()),
        Field::new(Some('v'), &["reservation"], "RESERVATION", |r: R| {
            r.job
                .spec
                .reservation
                .clone()
                .unwrap_or_else(|| "(null)".into())
        }),
        Field::new(Some('w'), &["wckey"], "WCKEY", |_: R| "(null)".into()),
        Field::new(Some('x'), &["excnodes"], "EXC_NODES", |r: R| {
            r.job.spec.exclude.clone().unwrap_or_default()
        }),
        Field::new(Some('y'), &["nice"], "NICE", |r: R| {
            r.job.spec.nice.to_string()
        }),
        Field::new(Some('z'), &["sct"], "S:C:T", |_: R| "*:*:*".into()),
        Field::new(Some('A'), &["jobid"], "JOBID", |r: R| r.job.id.to_string()),
        Field::new(Some('B'), &["batchhost"], "EXEC_HOST", |r: R| {
            r.job
                .alloc
                .as_ref()
                .and_then(|a| a.nodes.first().cloned())
                .unwrap_or_else(|| "n/a".into())
        }),
        Field::new(Some('C'), &["numcpus"], "CPUS", |r: R| {
            cpus_of(r.job).to_string()
        }),
        Field::new(Some('D'), &["numnodes"], "NODES", |r: R| {
            nodes_of(r.job).to_string()
        }),
        Field::new(Some('E'), &["dependency"], "DEPENDENCY", |r: R| {
            r.job
                .depend
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_else(|| "(null)".into())
        }),
        Field::new(Some('F'), &["arrayjobid"], "ARRAY_JOB_ID", |r: R| {
            if r.job.array_job_id != 0 {
                r.job.array_job_id.to_string()
            } else {
                r.job.id.to_string()
            }
        }),
        Field::new(Some('G'), &["groupid"], "GROUP", |r: R| {
            r.job.gid.to_string()
        }),
        Field::new(Some('H'), &["sockets"], "SOCKETS_PER_NODE", |r: R| {
            crate::cli::jobfmt::star(r.job.spec.sockets_per_node)
        }),
        Field::new(Some('I'), &["cores"], "CORES_PER_SOCKET", |_: R| "*".into()),
        Field::new(Some('J'), &["threads"], "THREADS_PER_CORE", |r: R| {
            crate::cli::jobfmt::star(r.job.spec.threads_per_core)
        }),
        Field::new(Some('K'), &["arraytaskid"], "ARRAY_TASK_ID", |r: R| match (
            r.task.or(r.job.array_task_id),
            &r.job.array,
        ) {
            (Some(t), _) => t.to_string(),
            (None, Some(a)) => a.pending_text(true),
            (None, None) => "N/A".into(),
        }),
        Field::new(Some('L'), &["timeleft"], "TIME_LEFT", |r: R| time_left(r)),
        Field::new(Some('M'), &["timeused"], "TIME", |r: R| {
            fmt_squeue_duration(r.job.run_secs(r.now))
        }),
        Field::new(Some('N'), &["nodelist"], "NODELIST", |r: R| {
            r.job.nodelist()
        }),
        Field::new(Some('O'), &["contiguous"], "CONTIGUOUS", |_: R| "0".into()),
        Field::new(Some('P'), &["partition"], "PARTITION", |r: R| {
            r.job.partition.clone()
        }),
        Field::new(Some('Q'), &["prioritylong"], "PRIORITY", |r: R| {
            r.job.priority.to_string()
        }),
        Field::new(Some('R'), &["reasonlist"], "NODELIST(REASON)", |r: R| {
            if shows_reason(r.job) {
                format!("({})", r.job.reason)
            } else {
                r.job.nodelist()
            }
        }),
        Field::new(Some('S'), &["starttime"], "START_TIME", |r: R| {
            start_text(r.job)
        }),
        Field::new(Some('T'), &["state"], "STATE", |r: R| {
            r.job.state_long().into()
        }),
        Field::new(Some('U'), &["userid"], "UID", |r: R| r.job.uid.to_string()),
        Field::new(Some('V'), &["submittime"], "SUBMIT_TIME", |r: R| {
            fmt_ts(r.job.submit_time)
        }),
        Field::new(Some('W'), &["licenses"], "LICENSES", |r: R| {
            crate::model::gres::fmt_licenses(&r.job.spec.licenses)
        }),
        Field::new(Some('X'), &["corespec"], "CORE_SPEC", |_: R| "N/A".into()),
        Field::new(Some('Y'), &["schednodes"], "SCHEDNODES", |r: R| {
            r.job
                .sched
                .sched_nodes
                .clone()
                .unwrap_or_else(|| "(null)".into())
        }),
        Field::new(Some('Z'), &["workdir"], "WORK_DIR", |r: R| {
            r.job.spec.work_dir.clone()
        }),
        Field::new(None, &["tres-alloc"], "TRES_ALLOC", |r: R| tres_alloc(r)),
        Field::new(None, &["cluster"], "CLUSTER", |r: R| r.cluster.to_string()),
        Field::new(None, &["cpus-per-task"], "CPUS_PER_TASK", |r: R| {
            r.job.spec.cpus_per_task.unwrap_or(1).to_string()
        }),
        Field::new(None, &["numtasks"], "TASKS", |r: R| {
            r.job.req_tasks.to_string()
        }),
        Field::new(None, &["eligibletime"], "ELIGIBLE_TIME", |r: R| {
            r.job
                .eligible_time
                .map(fmt_ts)
                .unwrap_or_else(|| "N/A".into())
        }),
        Field::new(None, &["exit_code"], "EXIT_CODE", |r: R| {
            r.job.exit.to_string()
        }),
        Field::new(None, &["restartcnt"], "RESTARTCNT", |r: R| {
            r.job.restarts.to_string()
        }),
        Field::new(None, &["lastschedeval"], "LAST_SCHED_EVAL", |r: R| {
            r.job
                .last_sched_eval
                .map(fmt_ts)
                .unwrap_or_else(|| "N/A".into())
        }),
    ]
}

/// `%all`: every letter, `|`-separated, in Slurm's order (a–z, then A–Z).
fn all_format() -> String {
    ('a'..='z')
        .chain('A'..='Z')
        .map(|c| format!("%{c}"))
        .collect::<Vec<_>>()
        .join("|")
}

/// Orders two jobs by one sort key.
fn compare(a: &Job, b: &Job, letter: char, now: i64) -> Ordering {
    let num = |f: &dyn Fn(&Job) -> i64| f(a).cmp(&f(b));
    let text = |f: &dyn Fn(&Job) -> String| f(a).cmp(&f(b));
    // Unknown start/end times sort last, as squeue lists N/A after real estimates.
    let opt_time = |f: &dyn Fn(&Job) -> Option<i64>| match (f(a), f(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    };
    let state_rank = |j: &Job| {
        let base = JobState::ALL
            .iter()
            .position(|s| *s == j.state)
            .unwrap_or(0) as i64;
        base + if j.completing { 256 } else { 0 }
    };
    let limit = |j: &Job| j.time_limit.secs().map_or(i64::MAX, |s| s as i64);
    match letter {
        'i' | 'A' | 'F' => num(&|j| i64::from(j.id)),
        'j' => text(&|j| j.spec.name.clone()),
        'u' => text(&|j| j.user.clone()),
        'U' => num(&|j| i64::from(j.uid)),
        'g' => text(&|j| j.group.clone()),
        'G' => num(&|j| i64::from(j.gid)),
        'a' => text(&|j| j.account.clone()),
        'q' => text(&|j| j.qos.clone()),
        'P' => text(&|j| j.partition.clone()),
        't' | 'T' => num(&state_rank),
        'r' | 'R' => text(&|j| j.reason.to_string()),
        'p' | 'Q' => num(&|j| i64::from(j.priority)),
        'M' => num(&|j| j.run_secs(now) as i64),
        'l' => num(&limit),
        'L' => num(&|j| limit(j).saturating_sub(j.run_secs(now) as i64)),
        'D' => num(&|j| i64::from(nodes_of(j))),
        'C' => num(&|j| i64::from(cpus_of(j))),
        'm' => num(&|j| match j.req_mem {
            MemReq::PerNode(m) | MemReq::PerCpu(m) => m as i64,
        }),
        'N' | 'B' => text(&|j| j.nodelist()),
        'S' => opt_time(&|j| start_of(j)),
        'e' => opt_time(&|j| {
            j.end_time
                .or_else(|| Some(start_of(j)? + j.time_limit.secs()? as i64))
        }),
        'V' => num(&|j| j.submit_time),
        'y' => num(&|j| i64::from(j.spec.nice)),
        _ => Ordering::Equal,
    }
}

/// Sorts jobs by `keys` (first key most significant), ties by job id.
pub fn sort_jobs(jobs: &mut [&Job], keys: &[SortKey], now: i64) {
    jobs.sort_by(|a, b| {
        for k in keys {
            let o = compare(a, b, k.letter, now);
            let o = if k.descending { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.id.cmp(&b.id)
    });
}

/// The whole of squeue's output for `q` over `jobs` at `now`.
pub fn render(q: &Query, jobs: &[Job], now: i64, cluster: &str) -> Output {
    let mut out = Output::default();
    // One id asked for and not known at all (purged or never existed) is an error;
    // a known id filtered out by state just prints the header.
    if q.jobs.len() == 1 && !jobs.iter().any(|j| q.jobs[0].matches(j)) {
        out.stderr = "slurm_load_jobs error: Invalid job id specified\n".into();
        out.code = 1;
        return out;
    }
    let table = job_fields();
    let parsed = match &q.format {
        FormatSpec::Short(f) if f == "%all" => format::parse_short(&all_format(), &table),
        FormatSpec::Short(f) => format::parse_short(f, &table),
        FormatSpec::Long(f) => format::parse_long(f, &table),
    };
    for bad in &parsed.unknown {
        out.stderr.push_str(&format!(
            "squeue: error: Invalid job format specification: {bad}\n"
        ));
    }
    let fmt: Format = parsed.format;

    if q.cluster_line {
        out.stdout.push_str(&format!("CLUSTER: {cluster}\n"));
    }
    if q.banner {
        out.stdout.push_str(&fmt_banner(now));
        out.stdout.push('\n');
    }
    if !q.noheader {
        out.stdout.push_str(&fmt.header(&table));
        out.stdout.push('\n');
    }
    let mut shown: Vec<&Job> = jobs.iter().filter(|j| q.matches(j)).collect();
    sort_jobs(&mut shown, &q.sort, now);
    for job in shown {
        for task in rows_of(q, job) {
            let row = JobRow {
                job,
                task,
                now,
                noconvert: q.noconvert,
                cluster,
            };
            out.stdout.push_str(&fmt.row(&table, &row));
            out.stdout.push('\n');
        }
    }
    out
}

/// The lines a job is shown as: one, or for an array's meta record one per pending
/// task with `-r`, or one per task that `-j N_i` selects.
fn rows_of(q: &Query, job: &Job) -> Vec<Option<u32>> {
    if !job.is_array_meta() {
        return vec![None];
    }
    let picked: Vec<Vec<u32>> = q.jobs.iter().filter_map(|s| s.tasks_of(job)).collect();
    let whole = q.jobs.is_empty() || q.jobs.iter().any(|s| s.tasks.is_none() && s.matches(job));
    if !whole && !picked.is_empty() {
        let mut v: Vec<u32> = picked.into_iter().flatten().collect();
        v.sort_unstable();
        v.dedup();
        return v.into_iter().map(Some).collect();
    }
    match (&job.array, q.expand_array) {
        (Some(a), true) => a.tasks.iter().map(Some).collect(),
        _ => vec![None],
    }
}

/// Turns a clap error into the getopt-style text Slurm's commands print, and the exit
/// status they use (1 for squeue/sinfo option errors).
pub(crate) fn getopt_error(cmd: &str, err: &clap::Error, argv: &[OsString]) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let arg = match err.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let arg = arg.split_whitespace().next().unwrap_or("").to_string();
    let line = match err.kind() {
        ErrorKind::UnknownArgument => {
            if let Some(long) = arg.strip_prefix("--") {
                let given = argv
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .find(|a| a.starts_with(&format!("--{long}")))
                    .map(|a| a.split('=').next().unwrap_or("").to_string())
                    .unwrap_or_else(|| format!("--{long}"));
                format!("{cmd}: unrecognized option '{given}'")
            } else {
                let c = arg.trim_start_matches('-').chars().next().unwrap_or('?');
                format!("{cmd}: invalid option -- '{c}'")
            }
        }
        ErrorKind::InvalidValue | ErrorKind::NoEquals => {
            if let Some(long) = arg.strip_prefix("--") {
                let name = long.split(['=', ' ', '<']).next().unwrap_or(long);
                format!("{cmd}: option '--{name}' requires an argument")
            } else {
                let c = arg.trim_start_matches('-').chars().next().unwrap_or('?');
                format!("{cmd}: option requires an argument -- '{c}'")
            }
        }
        _ => {
            let text = err.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            format!("{cmd}: {first}")
        }
    };
    format!("{line}\nTry \"{cmd} --help\" for more information\n")
}

/// The `-M` list, else a non-empty `SLURM_CLUSTERS` (with `true`: it came from the
/// environment).
pub fn clusters_asked(opt: Option<&str>) -> Option<(String, bool)> {
    match opt {
        Some(l) => Some((l.to_string(), false)),
        None => std::env::var("SLURM_CLUSTERS")
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (v, true)),
    }
}

fn resolve_user(name: &str) -> Option<u32> {
    if let Ok(uid) = name.parse::<u32>() {
        return Some(uid);
    }
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// `squeue -s`.
fn run_steps(opts: &Args, list: &str) -> ExitCode {
    use super::squeue_steps as st;
    let my_uid = nix::unistd::getuid().as_raw();
    let q = match st::build(opts, list, &resolve_user, my_uid) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("{}", e.trim_end());
            return ExitCode::from(1);
        }
    };
    let mut client = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("slurm_load_jobs error: {e}");
            return ExitCode::from(1);
        }
    };
    let filter = JobFilter {
        ids: q.jobs.clone(),
        ..JobFilter::default()
    };
    match client.request_jobs(&filter) {
        Ok(Response::Jobs { jobs, now }) => {
            print!("{}", st::render(&q, &jobs, now));
            ExitCode::SUCCESS
        }
        Ok(Response::Error(e)) => {
            eprintln!("slurm_load_jobs error: {e}");
            ExitCode::from(1)
        }
        _ => {
            eprintln!(
                "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
            );
            ExitCode::from(1)
        }
    }
}

fn emit(out: &Output) -> ExitCode {
    use std::io::Write;
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    ExitCode::from(out.code)
}

/// Runs `squeue` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let mut cmd = crate::jobspec::opts::getopt_values(Args::command());
    let matches = match cmd.try_get_matches_from_mut(&args) {
        Ok(m) => m,
        Err(e) => {
            eprint!("{}", getopt_error("squeue", &e, &args));
            return ExitCode::from(1);
        }
    };
    let opts = match Args::from_arg_matches(&matches) {
        Ok(o) => o,
        Err(e) => {
            eprint!("{}", getopt_error("squeue", &e, &args));
            return ExitCode::from(1);
        }
    };
    if opts.help {
        let entries = super::help::from_clap(&cmd);
        print!("{}", super::help::help("squeue [OPTIONS]", &entries, ""));
        return ExitCode::SUCCESS;
    }
    if opts.usage {
        print!(
            "{}",
            super::help::usage("squeue", &super::help::from_clap(&cmd), "")
        );
        return ExitCode::SUCCESS;
    }
    if opts.version {
        println!("slurm {}", crate::config::advertised_slurm_version());
        return ExitCode::SUCCESS;
    }
    if let Some(list) = &opts.steps {
        return run_steps(&opts, list);
    }
    let mut stderr = String::new();
    let env = |k: &str| std::env::var(k).ok();
    let my_uid = nix::unistd::getuid().as_raw();
    let q = match build_query(&opts, &env, &resolve_user, my_uid, &mut stderr) {
        Ok(q) => q,
        Err(out) => return emit(&out),
    };
    eprint!("{stderr}");

    let (mut client, cfg) = match Client::connect() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm_load_jobs error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("{h}");
            }
            return ExitCode::from(1);
        }
    };
    if let Some((list, from_env)) = clusters_asked(opts.clusters.as_deref())
        && let Err(m) = super::client::check_clusters(&list, from_env, &cfg.cluster_name)
    {
        eprintln!("squeue: error: {m}");
        return ExitCode::from(1);
    }
    // Ids (or, without ids, users) narrow the reply; everything else is filtered here,
    // in `render`. Users are not sent with ids: a known job of another user must come
    // back so that `-j` does not call it invalid.
    let filter = JobFilter {
        ids: q
            .jobs
            .iter()
            .map(|s| s.id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        // Without ids (where an unknown id must be told from a finished one), only the
        // queue's active jobs are needed for the default or an active-states filter.
        active_only: q.jobs.is_empty() && q.states.active_only(),
        users: if q.jobs.is_empty() {
            q.users.clone().unwrap_or_default()
        } else {
            Vec::new()
        },
        ..JobFilter::default()
    };
    let reply = client::expect(
        client.request_jobs(&filter),
        answer!(Response::Jobs { jobs, now } => (jobs, now)),
    );
    match reply {
        Ok((jobs, _)) if opts.json => {
            // Format options do not apply; the selection (users, states, ids…) does.
            let mut shown: Vec<&Job> = jobs.iter().filter(|j| q.matches(j)).collect();
            shown.sort_by_key(|j| j.id);
            print!(
                "{}",
                crate::cli::jobjson::render(
                    &shown,
                    &cfg.cluster_name,
                    &cfg.slurm_version,
                    &|n: &str| {
                        cfg.nodes
                            .iter()
                            .find(|c| c.name == n)
                            .and_then(|c| c.cores_per_socket)
                    }
                )
            );
            ExitCode::SUCCESS
        }
        Ok((jobs, now)) => emit(&render(&q, &jobs, now, &cfg.cluster_name)),
        Err(CallError::Slurm(SlurmError::InvalidJobId)) if q.jobs.len() > 1 => {
            // Several ids: unknown ones are simply omitted.
            emit(&render(
                &q,
                &[],
                crate::cli::timefmt::now(),
                &cfg.cluster_name,
            ))
        }
        Err(e) => {
            eprintln!("slurm_load_jobs error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TimeLimit;
    use crate::model::job::Allocation;
    use crate::model::{JobSpec, Reason};

    const T0: i64 = 1_795_964_135; // submit time of the golden queue

    /// A job shaped like golden/queue_setup.txt: user alice (2001), account research,
    /// DefMemPerCPU=400, one CPU, pending with reason None.
    fn job(id: u32, name: &str, part: &str) -> Job {
        Job {
            id,
            spec: JobSpec {
                name: name.into(),
                work_dir: "/home/alice/golden-work".into(),
                ..JobSpec::default()
            },
            uid: 2001,
            gid: 2001,
            user: "alice".into(),
            group: "alice".into(),
            partition: part.into(),
            account: "research".into(),
            qos: "normal".into(),
            time_limit: TimeLimit::Minutes(60),
            req_cpus: 1,
            req_tasks: 1,
            req_nodes: 1,
            req_mem: MemReq::PerCpu(400),
            priority: 11515,
            submit_time: T0,
            ..Job::default()
        }
    }

    fn pending(id: u32, name: &str, part: &str, reason: Reason, prio: u32) -> Job {
        let mut j = job(id, name, part);
        j.reason = reason;
        j.priority = prio;
        j
    }

    fn running(id: u32, name: &str, part: &str, cpus: u32, start: i64) -> Job {
        let mut j = job(id, name, part);
        j.state = JobState::Running;
        j.req_cpus = cpus;
        j.start_time = Some(start);
        j.alloc = Some(Allocation {
            nodes: vec!["node01".into()],
            cpus: vec![cpus],
            mem_per_node: 400 * u64::from(cpus),
            ..Default::default()
        });
        j
    }

    fn limit(mut j: Job, mins: u32) -> Job {
        j.time_limit = TimeLimit::Minutes(mins);
        j
    }

    const NOW: i64 = T0 + 32; // running jobs started at T0+2 show 0:30

    /// The golden queue without the array job (arrays are not modelled yet). Priorities
    /// of equal-priority jobs are spread so the order is the one Slurm happened to print.
    fn queue() -> Vec<Job> {
        let nodes_reason = Reason::Other(
            "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions".into(),
        );
        let mut big = limit(pending(171, "big32", "debug", Reason::Resources, 12000), 5);
        big.req_cpus = 32;
        let mut wait = limit(pending(172, "wait16", "debug", Reason::Priority, 11750), 5);
        wait.req_cpus = 16;
        let mut admin = pending(175, "adminheld", "debug", Reason::JobHeldAdmin, 1);
        admin.req_cpus = 16;
        vec![
            running(168, "run16", "debug", 16, T0 + 2),
            limit(running(169, "run8", "batch", 8, T0 + 2), 10),
            limit(running(170, "gpu8", "batch", 1, T0 + 2), 5),
            big,
            wait,
            pending(
                173,
                "dep",
                "debug",
                Reason::Other("Dependency".into()),
                11515,
            ),
            pending(174, "held", "debug", Reason::JobHeldUser, 0),
            admin,
            pending(176, "later", "debug", Reason::BeginTime, 11517),
            limit(
                pending(177, "toolong", "debug", Reason::PartitionTimeLimit, 11516),
                120,
            ),
            limit(pending(178, "gpuwait", "batch", nodes_reason, 11515), 5),
        ]
        .into_iter()
        .map(|mut j| {
            if j.id == 168 {
                j.time_limit = TimeLimit::Minutes(10);
            }
            j
        })
        .collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn users(name: &str) -> Option<u32> {
        match name {
            "alice" => Some(2001),
            "bob" => Some(2002),
            _ => name.parse().ok(),
        }
    }

    fn args(argv: &[&str]) -> Args {
        let full: Vec<&str> = std::iter::once("squeue")
            .chain(argv.iter().copied())
            .collect();
        Args::try_parse_from(full).expect("test argv parses")
    }

    fn squeue_env(argv: &[&str], env: &dyn Fn(&str) -> Option<String>, jobs: &[Job]) -> Output {
        let mut stderr = String::new();
        match build_query(&args(argv), env, &users, 2001, &mut stderr) {
            Ok(q) => {
                let mut out = render(&q, jobs, NOW, "anchor");
                out.stderr = stderr + &out.stderr;
                out
            }
            Err(out) => out,
        }
    }

    fn squeue(argv: &[&str], jobs: &[Job]) -> Output {
        squeue_env(argv, &no_env, jobs)
    }

    /// Lines of `case` in golden/queue_squeue.txt, minus the array job's lines.
    const GOLDEN_DEFAULT: &str = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
               178     batch  gpuwait    alice PD       0:00      1 (Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions)
               169     batch     run8    alice  R       0:30      1 node01
               170     batch     gpu8    alice  R       0:30      1 node01
               171     debug    big32    alice PD       0:00      1 (Resources)
               172     debug   wait16    alice PD       0:00      1 (Priority)
               176     debug    later    alice PD       0:00      1 (BeginTime)
               177     debug  toolong    alice PD       0:00      1 (PartitionTimeLimit)
               173     debug      dep    alice PD       0:00      1 (Dependency)
               175     debug adminhel    alice PD       0:00      1 (JobHeldAdmin)
               174     debug     held    alice PD       0:00      1 (JobHeldUser)
               168     debug    run16    alice  R       0:30      1 node01
";

    #[test]
    fn default_format_matches_golden() {
        let out = squeue(&["-u", "alice"], &queue());
        assert_eq!(out.stdout, GOLDEN_DEFAULT);
        assert_eq!(out.code, 0);
        assert_eq!(out.stderr, "");
        // The same text through an explicit -o of the default format.
        let out = squeue(&["-u", "alice", "-o", DEFAULT_FORMAT], &queue());
        assert_eq!(out.stdout, GOLDEN_DEFAULT);
    }

    #[test]
    fn long_format_matches_golden() {
        let out = squeue(&["-u", "alice", "-l"], &queue());
        let mut lines = out.stdout.lines();
        assert_eq!(lines.next(), Some(fmt_banner(NOW).as_str()));
        let rest: Vec<&str> = lines.collect();
        assert_eq!(
            rest[0],
            "             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES NODELIST(REASON)"
        );
        assert_eq!(
            rest[2],
            "               169     batch     run8    alice  RUNNING       0:30     10:00      1 node01"
        );
        assert_eq!(
            rest[6],
            "               176     debug    later    alice  PENDING       0:00   1:00:00      1 (BeginTime)"
        );
        assert_eq!(
            rest[7],
            "               177     debug  toolong    alice  PENDING       0:00   2:00:00      1 (PartitionTimeLimit)"
        );
    }

    #[test]
    fn state_filters() {
        let out = squeue(&["-u", "alice", "-t", "R", "-h", "-o", "%i"], &queue());
        assert_eq!(out.stdout, "169\n170\n168\n");
        let out = squeue(&["-t", "pending,running", "-h", "-o", "%i"], &queue());
        assert_eq!(out.stdout.lines().count(), 11);
        let out = squeue(&["-t", "PD", "-p", "batch", "-h", "-o", "%i"], &queue());
        assert_eq!(out.stdout, "178\n");
        let out = squeue(&["-t", "bogus"], &queue());
        assert_eq!(out.code, 1);
        assert!(out.stderr.contains("Invalid job state specified: bogus"));
    }

    #[test]
    fn finished_jobs_need_matching_state() {
        let mut f = job(195, "exit3", "debug");
        f.state = JobState::Failed;
        f.reason = Reason::NonZeroExitCode;
        f.start_time = Some(T0);
        f.end_time = Some(T0);
        f.alloc = Some(Allocation {
            nodes: vec!["node01".into()],
            cpus: vec![1],
            mem_per_node: 400,
            ..Default::default()
        });
        let jobs = vec![f];
        let header = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n";
        let out = squeue(&["-j", "195"], &jobs);
        assert_eq!((out.stdout.as_str(), out.code), (header, 0));
        let out = squeue(&["-j", "195", "-t", "all"], &jobs);
        assert_eq!(
            out.stdout,
            format!(
                "{header}               195     debug    exit3    alice  F       0:00      1 (NonZeroExitCode)\n"
            )
        );
        let out = squeue(&["-t", "all", "-h", "-o", "%i %T"], &jobs);
        assert_eq!(out.stdout, "195 FAILED\n");
    }

    #[test]
    fn completing_shows_cg_and_nodelist() {
        let mut j = running(200, "cg", "debug", 1, T0);
        j.state = JobState::Completed;
        j.completing = true;
        j.end_time = Some(T0 + 5);
        let jobs = vec![j];
        let out = squeue(&["-h", "-o", "%t|%T|%R|%M"], &jobs);
        assert_eq!(out.stdout, "CG|COMPLETING|node01|0:05\n");
        let out = squeue(&["-h", "-t", "CG", "-o", "%i"], &jobs);
        assert_eq!(out.stdout, "200\n");
        let out = squeue(&["-h", "-t", "CD", "-o", "%i"], &jobs);
        assert_eq!(out.stdout, "200\n");
    }

    #[test]
    fn job_id_selection_and_errors() {
        let q = queue();
        let out = squeue(&["-j", "999999"], &q);
        assert_eq!(out.code, 1);
        assert_eq!(out.stdout, "");
        assert_eq!(
            out.stderr,
            "slurm_load_jobs error: Invalid job id specified\n"
        );
        let out = squeue(&["-j", "171,999999", "-h", "-o", "%i"], &q);
        assert_eq!((out.stdout.as_str(), out.code), ("171\n", 0));
        let out = squeue(&["--jobs=171", "--jobs", "168", "-h", "-o", "%i"], &q);
        assert_eq!(out.stdout, "171\n168\n");
        // Known but filtered out (another user's job): header only, exit 0.
        let out = squeue(&["-u", "bob", "-j", "171", "-h"], &q);
        assert_eq!((out.stdout.as_str(), out.code), ("", 0));
        let out = squeue(&["-j", "abc"], &q);
        assert_eq!(out.code, 1);
        assert_eq!(out.stderr, "squeue: error: Invalid job id: abc\n");
    }

    #[test]
    fn unknown_user_prints_error_and_header() {
        let out = squeue(&["-u", "nosuchuser"], &queue());
        assert_eq!(out.code, 0);
        assert_eq!(out.stderr, "squeue: error: Invalid user: nosuchuser\n\n");
        assert_eq!(
            out.stdout,
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        );
        let out = squeue(&["-u", "bob", "-h"], &queue());
        assert_eq!(out.stdout, "");
        let out = squeue(&["--me", "-h", "-o", "%i"], &queue());
        assert_eq!(out.stdout.lines().count(), 11);
        let out = squeue(&["-p", "nosuch", "-h"], &queue());
        assert_eq!(out.stdout, "");
    }

    #[test]
    fn pipe_format_matches_golden_values() {
        let out = squeue(
            &[
                "-u",
                "alice",
                "-o",
                "%i|%A|%a|%F|%K|%j|%T|%r|%C|%D|%b|%l|%L|%p|%Q|%m|%N|%P",
            ],
            &queue(),
        );
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[0],
            "JOBID|JOBID|ACCOUNT|ARRAY_JOB_ID|ARRAY_TASK_ID|NAME|STATE|REASON|CPUS|NODES|TRES_PER_NODE|TIME_LIMIT|TIME_LEFT|PRIORITY|PRIORITY|MIN_MEMORY|NODELIST|PARTITION"
        );
        assert_eq!(
            lines[1],
            "178|178|research|178|N/A|gpuwait|PENDING|Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions|1|1|N/A|5:00|5:00|0.00000268104486|11515|400M||batch"
        );
        // 169 at 0:30 of a 10:00 limit; golden shows 9:29 one second later.
        assert_eq!(
            lines[2],
            "169|169|research|169|N/A|run8|RUNNING|None|8|1|N/A|10:00|9:30|0.00000268104486|11515|400M|node01|batch"
        );
        assert_eq!(
            lines[4],
            "171|171|research|171|N/A|big32|PENDING|Resources|32|1|N/A|5:00|5:00|0.00000279396772|12000|400M||debug"
        );
    }

    #[test]
    fn times_use_the_local_timestamp_form() {
        let q = queue();
        let out = squeue(&["-h", "-j", "169", "-o", "%S|%V|%e"], &q);
        let want = format!(
            "{}|{}|{}\n",
            fmt_ts(T0 + 2),
            fmt_ts(T0),
            fmt_ts(T0 + 2 + 600)
        );
        assert_eq!(out.stdout, want);
        let out = squeue(&["-h", "-j", "174", "-o", "%S|%e|%B|%M"], &q);
        assert_eq!(out.stdout, "N/A|N/A|n/a|0:00\n");
    }

    #[test]
    fn long_format_option_matches_golden_shape() {
        let out = squeue(
            &[
                "-u",
                "alice",
                "-O",
                "JobID,ArrayJobID,ArrayTaskID,Name,State,Reason,NumCPUs,MinMemory,TimeLimit,TimeLeft,TresPerNode,tres-alloc",
            ],
            &queue(),
        );
        assert_eq!(
            out.stderr,
            "squeue: error: Invalid job format specification: TresPerNode\n"
        );
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[0],
            "JOBID               ARRAY_JOB_ID        ARRAY_TASK_ID       NAME                STATE               REASON              CPUS                MIN_MEMORY          TIME_LIMIT          TIME_LEFT           TRES_ALLOC          "
        );
        assert_eq!(
            lines[1],
            "178                 178                 N/A                 gpuwait             PENDING             Nodes required for j1                   400M                5:00                5:00                cpu=1,mem=400M,node="
        );
        assert_eq!(
            lines[4],
            "171                 171                 N/A                 big32               PENDING             Resources           32                  400M                5:00                5:00                cpu=32,mem=12.50G,no"
        );
        assert_eq!(
            lines[2],
            "169                 169                 N/A                 run8                RUNNING             None                8                   400M                10:00               9:30                cpu=8,mem=3200M,node"
        );
    }

    #[test]
    fn formats_from_environment() {
        let q = queue();
        let env = |k: &str| (k == "SQUEUE_FORMAT").then(|| "JID=%i NAME=%j".to_string());
        let out = squeue_env(&["-h", "-j", "174"], &env, &q);
        assert_eq!(out.stdout, "JID=174 NAME=held\n");
        let out = squeue_env(&["-h", "-j", "174", "-o", "%j"], &env, &q);
        assert_eq!(out.stdout, "held\n");
        let env2 = |k: &str| match k {
            "SQUEUE_FORMAT2" => Some("jobid:5,name:.6".to_string()),
            "SQUEUE_STATES" => Some("R".to_string()),
            "SQUEUE_SORT" => Some("-i".to_string()),
            _ => None,
        };
        let out = squeue_env(&["-h"], &env2, &q);
        assert_eq!(out.stdout, "170    gpu8\n169    run8\n168   run16\n");
        let env3 = |k: &str| (k == "SQUEUE_USERS").then(|| "bob".to_string());
        assert_eq!(squeue_env(&["-h"], &env3, &q).stdout, "");
    }

    #[test]
    fn sort_keys() {
        let q = queue();
        let out = squeue(&["-h", "-o", "%i", "--sort=-i", "-t", "R"], &q);
        assert_eq!(out.stdout, "170\n169\n168\n");
        let out = squeue(&["-h", "-o", "%i", "-S", "+C,i", "-t", "R"], &q);
        assert_eq!(out.stdout, "170\n169\n168\n");
        let out = squeue(&["-h", "-o", "%i", "--sort", "j", "-p", "batch"], &q);
        assert_eq!(out.stdout, "170\n178\n169\n");
        assert!(parse_sort("P,t,-p").is_ok());
        assert!(parse_sort("xy").is_err());
    }

    #[test]
    fn start_lists_pending_by_expected_start() {
        let mut q = queue();
        for j in &mut q {
            match j.id {
                178 => j.start_time = Some(T0 + 300),
                171 => j.start_time = Some(T0 + 600),
                _ => {}
            }
        }
        let out = squeue(&["-u", "alice", "--start"], &q);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[0],
            "             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)"
        );
        assert!(lines[1].starts_with("               178     batch  gpuwait    alice PD "));
        assert!(lines[1].contains(&fmt_ts(T0 + 300)));
        assert!(lines[2].starts_with("               171 "));
        assert_eq!(
            lines[3],
            "               172     debug   wait16    alice PD                 N/A      1 (null)               (Priority)"
        );
        assert_eq!(lines.len(), 1 + 8);
    }

    #[test]
    fn cluster_line_and_only_state() {
        let q = queue();
        let out = squeue(&["-M", "anchor", "-h", "-j", "168", "-o", "%i"], &q);
        assert_eq!(out.stdout, "CLUSTER: anchor\n168\n");
        let out = squeue(&["--only-job-state", "-j", "168"], &q);
        assert_eq!(out.stdout, "             JOBID ST\n               168  R\n");
    }

    #[test]
    fn memory_and_noconvert() {
        let mut j = job(300, "m", "debug");
        j.req_mem = MemReq::PerNode(64000);
        let jobs = vec![j];
        assert_eq!(squeue(&["-h", "-o", "%m"], &jobs).stdout, "62.50G\n");
        assert_eq!(
            squeue(&["-h", "--noconvert", "-o", "%m"], &jobs).stdout,
            "64000M\n"
        );
    }

    #[test]
    fn time_left_edge_cases() {
        let mut j = running(301, "x", "debug", 1, NOW - 120);
        j.time_limit = TimeLimit::Minutes(1);
        let mut u = running(302, "y", "debug", 1, NOW - 120);
        u.time_limit = TimeLimit::Unlimited;
        let jobs = vec![j, u];
        assert_eq!(
            squeue(&["-h", "-o", "%L %l"], &jobs).stdout,
            "INVALID 1:00\nUNLIMITED UNLIMITED\n"
        );
    }

    #[test]
    fn all_format_has_every_letter() {
        let q = queue();
        let out = squeue(&["-h", "-j", "178", "--format=%all"], &q);
        let line = out.stdout.trim_end_matches('\n');
        assert_eq!(line.split('|').count(), 52);
        assert!(line.starts_with("research|N/A|1|0|"));
        assert!(line.ends_with("|(null)|N/A|(null)|/home/alice/golden-work"));
    }

    #[test]
    fn getopt_style_errors() {
        let argv: Vec<OsString> = ["squeue", "--bogus"].iter().map(OsString::from).collect();
        let err = Args::try_parse_from(&argv).unwrap_err();
        assert_eq!(
            getopt_error("squeue", &err, &argv),
            "squeue: unrecognized option '--bogus'\nTry \"squeue --help\" for more information\n"
        );
        let argv: Vec<OsString> = ["squeue", "-o"].iter().map(OsString::from).collect();
        let err = Args::try_parse_from(&argv).unwrap_err();
        assert!(getopt_error("squeue", &err, &argv).starts_with("squeue: option"));
        // -ofmt and --format=fmt both work.
        assert_eq!(args(&["-o%i"]).format.as_deref(), Some("%i"));
        assert_eq!(args(&["--format=%i %j"]).format.as_deref(), Some("%i %j"));
        assert_eq!(args(&["--form", "%i"]).format.as_deref(), Some("%i"));
    }

    /// The golden array 179 (`--array=0-9%2 --time=2`): tasks 0 and 1 running as jobs
    /// 181 and 182, the rest pending in the meta record (reason JobArrayTaskLimit).
    fn array_179() -> Vec<Job> {
        use crate::model::array::{ArrayInfo, ArraySpec};
        let info = ArrayInfo::from_spec(&ArraySpec::parse("0-9%2", 1001).unwrap());
        let mut meta = limit(
            pending(179, "arr", "debug", Reason::JobArrayTaskLimit, 11515),
            2,
        );
        meta.array_job_id = 179;
        let mut pending_info = info.clone();
        pending_info.tasks = crate::model::array::IndexSet::parse("2-9", 1001).unwrap();
        meta.array = Some(Box::new(pending_info));
        let task = |id: u32, t: u32| {
            let mut j = limit(running(id, "arr", "debug", 1, T0 + 29), 2);
            j.array_job_id = 179;
            j.array_task_id = Some(t);
            let mut i = info.clone();
            i.tasks = Default::default();
            j.array = Some(Box::new(i));
            j.priority = 11515;
            j
        };
        vec![meta, task(181, 0), task(182, 1)]
    }

    #[test]
    fn arrays_collapse_expand_and_select_tasks() {
        let q = array_179();
        let out = squeue(&["-u", "alice", "-h", "-o", "%i"], &q);
        assert_eq!(out.stdout, "179_[2-9%2]\n179_0\n179_1\n");
        let out = squeue(&["-u", "alice", "-h", "-r", "-o", "%.18i %r"], &q);
        let want: String = (2..=9)
            .map(|t| format!("{:>18} JobArrayTaskLimit\n", format!("179_{t}")))
            .chain([
                "             179_0 None\n".to_string(),
                "             179_1 None\n".to_string(),
            ])
            .collect();
        assert_eq!(out.stdout, want);
        // golden queue_squeue.txt `squeue -j 179_5`.
        let out = squeue(&["-j", "179_5"], &q);
        assert_eq!(
            out.stdout,
            "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n\
             \x20            179_5     debug      arr    alice PD       0:00      1 (JobArrayTaskLimit)\n"
        );
        // The array's id selects all of it; a task's own id that task only.
        assert_eq!(
            squeue(&["-h", "-j", "179", "-o", "%i"], &q)
                .stdout
                .lines()
                .count(),
            3
        );
        assert_eq!(
            squeue(&["-h", "-j", "181", "-o", "%i"], &q).stdout,
            "179_0\n"
        );
        assert_eq!(
            squeue(&["-h", "-j", "179_[1-2]", "-o", "%i"], &q).stdout,
            "179_2\n179_1\n"
        );
        // golden `-o "%i|%A|%a|%F|%K|..."` columns for the array's lines.
        let out = squeue(&["-u", "alice", "-h", "-o", "%i|%A|%F|%K|%l|%E"], &q);
        assert_eq!(
            out.stdout,
            "179_[2-9%2]|179|179|2-9%2|2:00|(null)\n179_0|181|179|0|2:00|(null)\n179_1|182|179|1|2:00|(null)\n"
        );
    }

    #[test]
    fn dependency_column() {
        use crate::model::depend::Dependency;
        let mut j = pending(213, "dep_chain", "debug", Reason::Dependency, 11515);
        j.depend = Dependency::parse("afterok:209").unwrap();
        let out = squeue(&["-o", "%i %j %T %r %E"], &[j]);
        assert_eq!(
            out.stdout,
            "JOBID NAME STATE REASON DEPENDENCY\n213 dep_chain PENDING Dependency afterok:209(unfulfilled)\n"
        );
    }
}
