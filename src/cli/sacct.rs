//! `sacct`: accounting records of jobs and their steps. The twin of src/sacct/
//! (`options.c` for options, the default time window and field parsing, `print.c` for
//! field values, src/common/print_fields.c for widths, `+` truncation and parsable
//! output).
//!
//! Shape: argv → [`Opts`] (pure, Slurm's error texts) → [`window`] (default time
//! window, from `now` and the zone) → one `Request::Acct` → [`select`] (the same
//! filters again, so the output is right whatever the controller pre-filtered) →
//! [`render`] (rows: the job, then its steps).

use super::client::{Client, answer};
use super::getopt::{self, Item, opt};
use super::jobfmt;
use super::jobid::{JobIdSpec, parse_job_id};
use super::timefmt::fmt_ts;
use super::timeparse::{TimeParseError, midnight_today, parse_time};
use super::usagefmt;
use crate::model::job::PastRun;
use crate::model::time::fmt_hms;
use crate::model::{Job, JobState, StepRecord, hostlist};
use crate::proto::{AcctQuery, Request, Response};
use chrono::TimeZone;
use std::ffi::OsString;
use std::process::ExitCode;

/// sacct's options (getopt table): what [`getopt::parse`] accepts, `--help` lists, and
/// the man page and completions are generated from (`cli::docs`).
pub const SPECS: &[getopt::OptSpec] = &[
    opt("allusers", Some('a'), false).doc("", "show jobs of every user, not only your own"),
    opt("accounts", Some('A'), true)
        .doc("account_list", "show only jobs charged to these accounts"),
    opt("brief", Some('b'), false).doc("", "short listing: jobid, state and exit code"),
    opt("clusters", Some('M'), true).doc(
        "cluster_list",
        "show records of these clusters (all: every one)",
    ),
    opt("cluster", None, true),
    opt("allclusters", Some('L'), false).doc("", "show records of every cluster"),
    opt("duplicates", Some('D'), false).doc("", "also show the earlier runs of requeued jobs"),
    opt("endtime", Some('E'), true).doc("time", "show jobs in any state before this time"),
    opt("helpformat", Some('e'), false).doc("", "list the fields --format accepts"),
    opt("format", Some('o'), true).doc(
        "field_list",
        "comma separated fields to print (see --helpformat), each with an optional %width",
    ),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("jobs", Some('j'), true).doc(
        "job(.step)",
        "show only these comma separated jobs or steps",
    ),
    opt("long", Some('l'), false).doc("", "long listing: every usage field"),
    opt("name", None, true).doc("name_list", "show only jobs with these names"),
    opt("noheader", Some('n'), false).doc("", "print no header line"),
    opt("nodelist", Some('N'), true).doc("node_list", "show only jobs that ran on these nodes"),
    opt("parsable", Some('p'), false).doc("", "fields delimited by '|', with a trailing '|'"),
    opt("parsable2", Some('P'), false).doc("", "fields delimited by '|', without a trailing '|'"),
    opt("delimiter", None, true).doc(
        "characters",
        "delimiter for --parsable and --parsable2 in place of |",
    ),
    opt("partition", Some('r'), true).doc("partition_list", "show only jobs in these partitions"),
    opt("qos", Some('q'), true).doc("qos", "show only jobs with these qualities of service"),
    opt("starttime", Some('S'), true).doc(
        "time",
        "show jobs in any state after this time (default: midnight)",
    ),
    opt("state", Some('s'), true).doc(
        "state_list",
        "show only jobs in these states (CD, F, R, PD, ...)",
    ),
    opt("truncate", Some('T'), false)
        .doc("", "cut the job times to the --starttime/--endtime window"),
    opt("user", Some('u'), true).doc("user_list", "show only jobs of these users"),
    opt("units", None, true).doc("[KMGTP]", "print sizes in this unit"),
    opt("noconvert", None, false).doc("", "print sizes in their stored unit, unscaled"),
    opt("allocations", Some('X'), false).doc("", "show allocations only, not their steps"),
    opt("array", None, false).doc("", "one line per array task, even for pending arrays"),
    opt("json", None, false).doc("", "print the records as JSON"),
    opt("usage", None, false).doc("", "display a brief usage message"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// Every field name sacct knows (`sacct -e`), canonical spelling, in Slurm's order.
pub const ALL_FIELDS: &[&str] = &[
    "Account",
    "AdminComment",
    "AllocCPUS",
    "AllocNodes",
    "AllocTRES",
    "AssocID",
    "AveCPU",
    "AveCPUFreq",
    "AveDiskRead",
    "AveDiskWrite",
    "AvePages",
    "AveRSS",
    "AveVMSize",
    "BlockID",
    "Cluster",
    "Comment",
    "Constraints",
    "ConsumedEnergy",
    "ConsumedEnergyRaw",
    "Container",
    "CPUTime",
    "CPUTimeRAW",
    "DBIndex",
    "DerivedExitCode",
    "Elapsed",
    "ElapsedRaw",
    "Eligible",
    "End",
    "ExitCode",
    "Flags",
    "GID",
    "Group",
    "JobID",
    "JobIDRaw",
    "JobName",
    "Layout",
    "MaxDiskRead",
    "MaxDiskReadNode",
    "MaxDiskReadTask",
    "MaxDiskWrite",
    "MaxDiskWriteNode",
    "MaxDiskWriteTask",
    "MaxPages",
    "MaxPagesNode",
    "MaxPagesTask",
    "MaxRSS",
    "MaxRSSNode",
    "MaxRSSTask",
    "MaxVMSize",
    "MaxVMSizeNode",
    "MaxVMSizeTask",
    "McsLabel",
    "MinCPU",
    "MinCPUNode",
    "MinCPUTask",
    "NCPUS",
    "NNodes",
    "NodeList",
    "NTasks",
    "Partition",
    "Priority",
    "QOS",
    "QOSRAW",
    "Reason",
    "ReqCPUFreq",
    "ReqCPUFreqGov",
    "ReqCPUFreqMax",
    "ReqCPUFreqMin",
    "ReqCPUS",
    "ReqMem",
    "ReqNodes",
    "ReqTRES",
    "Reservation",
    "ReservationId",
    "Reserved",
    "ResvCPU",
    "ResvCPURAW",
    "Start",
    "State",
    "Submit",
    "SubmitLine",
    "Suspended",
    "SystemComment",
    "SystemCPU",
    "Timelimit",
    "TimelimitRaw",
    "TotalCPU",
    "TRESUsageInAve",
    "TRESUsageInMax",
    "TRESUsageInMaxNode",
    "TRESUsageInMaxTask",
    "TRESUsageInMin",
    "TRESUsageInMinNode",
    "TRESUsageInMinTask",
    "TRESUsageInTot",
    "TRESUsageOutAve",
    "TRESUsageOutMax",
    "TRESUsageOutMaxNode",
    "TRESUsageOutMaxTask",
    "TRESUsageOutMin",
    "TRESUsageOutMinNode",
    "TRESUsageOutMinTask",
    "TRESUsageOutTot",
    "UID",
    "User",
    "UserCPU",
    "WCKey",
    "WCKeyID",
    "WorkDir",
];

const DEFAULT_FORMAT: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";
const BRIEF_FORMAT: &str = "jobid,state,exitcode";
const LONG_FORMAT: &str = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,\
avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,\
mincpunode,mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,\
reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,\
avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,reqtres,alloctres,\
tresusageinave,tresusageinmax,tresusageinmaxnode,tresusageinmaxtask,tresusageinmin,\
tresusageinminnode,tresusageinmintask,tresusageintot,tresusageoutmax,tresusageoutmaxnode,\
tresusageoutmaxtask,tresusageoutave,tresusageouttot";

/// Slurm's default column width for a field, and whether it is left-justified.
/// The widest `%W` accepted (wider ones are refused rather than padded into megabytes).
const MAX_FIELD_WIDTH: usize = 4096;

fn default_width(name: &str) -> (usize, bool) {
    match name {
        "JobID" | "JobIDRaw" => (12, true),
        "ExitCode" | "NNodes" | "NTasks" | "ReqCPUS" | "ReqNodes" => (8, false),
        "DerivedExitCode" | "NodeList" | "WorkDir" => (15, false),
        "Comment" => (14, false),
        "Submit" | "Start" | "End" | "Eligible" => (19, false),
        "User" | "Group" => (9, false),
        "UID" | "GID" => (6, false),
        "Reason" => (20, false),
        _ => (10, false),
    }
}

/// One output column: canonical name, width, justification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Canonical name, also the header text.
    pub name: &'static str,
    /// Column width in the table layout.
    pub width: usize,
    /// Left-justified (JobID, or a `%-W` width).
    pub left: bool,
}

/// Parses a `--format` list: `name[%[-]W]`. A name matches a field by case-insensitive
/// prefix, the first in Slurm's field order (an exact name wins), as sacct's
/// `strncasecmp` lookup does. `%W` right-justifies in W columns and `%-W`
/// left-justifies (sacct(1), `--format`).
///
/// Errors: Slurm's text for an unknown field or a bad width.
pub fn parse_format(list: &str) -> Result<Vec<Field>, String> {
    use super::format::{ListItem, Lookup, list_items, lookup};
    let mut out = Vec::new();
    for ListItem { item, name, width } in list_items(list) {
        let found = lookup(ALL_FIELDS.iter().copied(), name, Lookup::ExactThenPrefix);
        let Some(canon) = found.map(|i| ALL_FIELDS[i]) else {
            return Err(format!("sacct: error: Invalid field requested: \"{name}\""));
        };
        let (mut w, mut left) = default_width(canon);
        if let Some(ws) = width {
            let (neg, digits) = match ws.strip_prefix('-') {
                Some(d) => (true, d),
                None => (false, ws),
            };
            w = digits
                .parse::<usize>()
                .ok()
                .filter(|w| *w <= MAX_FIELD_WIDTH)
                .ok_or_else(|| format!("sacct: error: Invalid field requested: \"{item}\""))?;
            left = neg;
        }
        out.push(Field {
            name: canon,
            width: w,
            left,
        });
    }
    Ok(out)
}

/// How records are printed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Layout {
    /// Fixed-width columns with a dashed line under the header.
    #[default]
    Table,
    /// `-p`: fields followed by the delimiter, trailing one included.
    Parsable,
    /// `-P`: fields separated by the delimiter.
    Parsable2,
}

/// Parsed sacct options.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Opts {
    /// `-j`: jobs (and steps) to show; empty = any.
    pub jobs: Vec<JobIdSpec>,
    /// `-u`: users by uid; empty = see [`effective_users`].
    pub users: Vec<u32>,
    /// `-a`.
    pub all_users: bool,
    /// `-S` and `-E` as given (resolved by [`window`]).
    pub start: Option<String>,
    pub end: Option<String>,
    /// `-s`.
    pub states: Vec<JobState>,
    /// `--name`.
    pub names: Vec<String>,
    /// `-r/--partition`.
    pub partitions: Vec<String>,
    /// `-A/--accounts`.
    pub accounts: Vec<String>,
    /// `-q/--qos`.
    pub qos: Vec<String>,
    /// `-N/--nodelist`, expanded.
    pub nodes: Vec<String>,
    /// Columns, from `-o`, `-b`, `-l` or the default list.
    pub fields: Vec<Field>,
    pub layout: Layout,
    /// `--delimiter` for `-p`/`-P` (default `|`).
    pub delimiter: String,
    /// `-n`.
    pub noheader: bool,
    /// `-X`: job rows only, no steps.
    pub allocations: bool,
    /// `-D`: also the earlier runs of requeued jobs (state REQUEUED).
    pub duplicates: bool,
    /// `-e`, `-V`, `-h`: print and exit.
    pub helpformat: bool,
    pub version: bool,
    pub help: bool,
    /// `--usage`: print the brief usage and exit.
    pub usage: bool,
    /// `--json`: the openapi/dbv0.0.38 document instead of columns (`cli::sacctjson`).
    pub json: bool,
    /// `--units=[KMGTP]`: sizes in that unit (index into `K M G T P`).
    pub units: Option<usize>,
    /// `--noconvert`: sizes in their stored unit, unscaled.
    pub noconvert: bool,
    /// `-M/--clusters`: the clusters whose records to show (`all`, or a list); records
    /// of this cluster show only when it is named. `None`: this cluster.
    pub clusters: Option<String>,
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Parses argv (without argv[0]); `lookup` maps user names to uids.
///
/// Errors: Slurm's text (`sacct: fatal: Bad job/step specified: abc`, `Unknown
/// arguments:`, option errors), always exit status 1.
pub fn parse_args(args: &[String], lookup: &dyn Fn(&str) -> Option<u32>) -> Result<Opts, String> {
    let mut o = Opts {
        delimiter: "|".into(),
        ..Opts::default()
    };
    let mut format = String::new();
    let mut brief = false;
    let mut long = false;
    let mut extra = Vec::new();
    for item in getopt::parse("sacct", SPECS, args)? {
        match item {
            Item::Operand(a) => extra.push(a),
            Item::Opt(name, v) => {
                let v = v.unwrap_or_default();
                match name {
                    "allusers" => o.all_users = true,
                    "brief" => brief = true,
                    "long" => long = true,
                    "helpformat" => o.helpformat = true,
                    "help" => o.help = true,
                    "usage" => o.usage = true,
                    "version" => o.version = true,
                    "noheader" => o.noheader = true,
                    "parsable" => o.layout = Layout::Parsable,
                    "parsable2" => o.layout = Layout::Parsable2,
                    "delimiter" => o.delimiter = v,
                    "allocations" => o.allocations = true,
                    "duplicates" => o.duplicates = true,
                    "starttime" => o.start = Some(v),
                    "endtime" => o.end = Some(v),
                    "name" => o.names.extend(split_list(&v).map(String::from)),
                    "partition" => o.partitions.extend(split_list(&v).map(String::from)),
                    "format" => {
                        if !format.is_empty() {
                            format.push(',');
                        }
                        format.push_str(&v);
                    }
                    "jobs" => {
                        for j in split_list(&v) {
                            match parse_job_id(j) {
                                Some(spec) => o.jobs.push(spec),
                                None => {
                                    return Err(format!(
                                        "sacct: fatal: Bad job/step specified: {j}"
                                    ));
                                }
                            }
                        }
                    }
                    "user" => {
                        for u in split_list(&v) {
                            match u.parse::<u32>().ok().or_else(|| lookup(u)) {
                                Some(id) => o.users.push(id),
                                None => return Err(format!("sacct: fatal: Invalid user id: {u}")),
                            }
                        }
                    }
                    "state" => {
                        for s in split_list(&v) {
                            match JobState::parse(s) {
                                Some(st) => o.states.push(st),
                                None => return Err(format!("sacct: error: Invalid state: {s}")),
                            }
                        }
                    }
                    "json" => o.json = true,
                    "clusters" | "cluster" => o.clusters = Some(v),
                    "noconvert" => o.noconvert = true,
                    "units" => {
                        let u = v.trim().to_ascii_uppercase();
                        match ["K", "M", "G", "T", "P"].iter().position(|x| *x == u) {
                            Some(i) => o.units = Some(i),
                            None => {
                                return Err(format!(
                                    "sacct: error: Invalid unit type '{v}'. Possible options are \
                                     'K', 'M', 'G', 'T', 'P'"
                                ));
                            }
                        }
                    }
                    "allclusters" => o.clusters = Some("all".into()),
                    "accounts" => o.accounts.extend(split_list(&v).map(String::from)),
                    "qos" => o.qos.extend(split_list(&v).map(String::from)),
                    "nodelist" => match crate::model::hostlist::expand(&v) {
                        Ok(names) => o.nodes.extend(names),
                        Err(_) => return Err(format!("sacct: error: Invalid node list: {v}")),
                    },
                    // Accepted for compatibility; one cluster, no unit conversion options.
                    _ => {}
                }
            }
        }
    }
    if !extra.is_empty() {
        let mut m = String::from("sacct: error: Unknown arguments:");
        for a in &extra {
            m.push_str(&format!("\nsacct: error:  {a}"));
        }
        return Err(m);
    }
    let list = if !format.is_empty() {
        format
    } else if brief {
        BRIEF_FORMAT.into()
    } else if long {
        LONG_FORMAT.into()
    } else {
        DEFAULT_FORMAT.into()
    };
    o.fields = parse_format(&list)?;
    Ok(o)
}

/// The time window `[start, end]` sacct asks about (src/sacct/options.c rules): with
/// `-j` and no `-S` from the beginning of time; with `--state` and no `-S` from now;
/// otherwise from midnight today. Without `-E` it ends now, or at the start when
/// `--state` is given (so `--state` without `-E` selects jobs in that state at `-S`).
///
/// Errors: an `-S`/`-E` value outside Slurm's time grammar.
pub fn window<Tz: TimeZone>(
    o: &Opts,
    now: i64,
    tz: &Tz,
) -> Result<(Option<i64>, Option<i64>), TimeParseError> {
    let start = match &o.start {
        Some(s) => Some(parse_time(s, now, tz, true)?),
        None if !o.jobs.is_empty() => None,
        None if !o.states.is_empty() => Some(now),
        None => Some(midnight_today(now, tz)),
    };
    let end = match &o.end {
        Some(s) => Some(parse_time(s, now, tz, true)?),
        None if !o.states.is_empty() => start.or(Some(now)),
        None => None,
    };
    Ok((start, end))
}

/// The request for the controller (it may filter coarsely; [`select`] is exact).
pub fn query_for(o: &Opts, users: &[u32], win: (Option<i64>, Option<i64>)) -> AcctQuery {
    AcctQuery {
        ids: o.jobs.iter().map(|j| j.job).collect(),
        users: users.to_vec(),
        start: win.0,
        end: win.1,
        states: o.states.clone(),
        names: o.names.clone(),
        partitions: o.partitions.clone(),
        accounts: o.accounts.clone(),
        qos: o.qos.clone(),
        nodes: o.nodes.clone(),
    }
}

/// Whether `job` was in one of `states` at some time in `[start, end]`, or (without
/// states) existed then.
fn in_window(job: &Job, states: &[JobState], start: Option<i64>, end: Option<i64>) -> bool {
    let lo = start.unwrap_or(i64::MIN);
    let hi = end.unwrap_or(i64::MAX);
    if states.is_empty() {
        return job.submit_time <= hi && job.end_time.is_none_or(|e| e >= lo);
    }
    states.iter().any(|st| {
        if *st != job.state {
            return false;
        }
        match st {
            JobState::Pending => job.submit_time <= hi && job.start_time.is_none_or(|s| s >= lo),
            JobState::Running | JobState::Suspended => {
                job.start_time.is_some_and(|s| s <= hi) && job.end_time.is_none_or(|e| e >= lo)
            }
            _ => job.end_time.is_some_and(|e| e >= lo && e <= hi),
        }
    })
}

/// The jobs to print, sorted by id: every filter of `o` applied to `jobs`.
pub fn select<'a>(
    o: &Opts,
    users: &[u32],
    win: (Option<i64>, Option<i64>),
    jobs: &'a [Job],
) -> Vec<&'a Job> {
    let mut v: Vec<&Job> = jobs
        .iter()
        .filter(|j| o.jobs.is_empty() || o.jobs.iter().any(|s| spec_matches(s, j)))
        .filter(|j| users.is_empty() || users.contains(&j.uid))
        .filter(|j| o.names.is_empty() || o.names.contains(&j.spec.name))
        .filter(|j| o.partitions.is_empty() || o.partitions.contains(&j.partition))
        .filter(|j| in_window(j, &o.states, win.0, win.1))
        .collect();
    v.sort_by_key(|j| j.id);
    v.dedup_by_key(|j| j.id);
    // Array tasks follow their array's id in task order (`151_0` … `151_3`), whatever
    // their own ids.
    v.sort_by_key(|j| {
        let task = j
            .array_task_id
            .or_else(|| j.array.as_ref().and_then(|a| a.tasks.min()));
        match j.array_job_id {
            0 => (j.id, 0, j.id),
            a => (a, task.unwrap_or(0), j.id),
        }
    });
    v
}

/// Whether `-j` entry `s` names `job`: its id, or every record of the array with that
/// id, or (`N_i`, `N_[a-b]`) the array tasks named, or (`L+k`) that component of a
/// heterogeneous job (`L` alone names every component).
fn spec_matches(s: &JobIdSpec, job: &Job) -> bool {
    if let Some(k) = s.het {
        return s.array.is_none() && job.het.is_some_and(|h| h.job_id == s.job && h.offset == k);
    }
    match s.array_tasks() {
        Some(t) => t.matches(job),
        None if s.array.is_some() => false,
        None => {
            job.id == s.job
                || (job.array_job_id == s.job && s.job != 0)
                || job.het.is_some_and(|h| h.job_id == s.job)
        }
    }
}

/// Which rows of `job` to print: `None` is the job row, `Some(step)` a step row.
fn rows<'a>(o: &Opts, job: &'a Job) -> Vec<Option<&'a StepRecord>> {
    let specs: Vec<&JobIdSpec> = o.jobs.iter().filter(|s| spec_matches(s, job)).collect();
    let whole = specs.is_empty() || specs.iter().any(|s| s.step.is_none());
    let mut out = Vec::new();
    if whole {
        out.push(None);
    }
    if o.allocations {
        return out;
    }
    for st in &job.steps {
        let wanted = whole
            || specs.iter().any(|s| {
                s.step
                    .as_ref()
                    .is_some_and(|sel| sel.as_record_id() == st.id)
            });
        if wanted {
            out.push(Some(st));
        }
    }
    out
}

fn job_elapsed(job: &Job, now: i64) -> u64 {
    job.run_secs(now)
}

fn step_elapsed(st: &StepRecord, now: i64) -> u64 {
    (st.end_time.unwrap_or(now) - st.start_time).max(0) as u64
}

fn ts_or_unknown(t: Option<i64>) -> String {
    t.map(fmt_ts).unwrap_or_else(|| "Unknown".into())
}

/// The value of `field` for the job row (`step: None`) or a step row.
pub fn value(field: &str, job: &Job, step: Option<&StepRecord>, now: i64, cluster: &str) -> String {
    let started = job.start_time.is_some();
    // Measured usage of a step (its stepd's samples and final figures).
    if let Some(u) = step.and_then(|s| s.usage())
        && let Some(v) = usagefmt::step_field(field, u)
    {
        return v;
    }
    match (field, step) {
        // A pending array's record carries its throttle (`A_[3-4%2]`), as sacct
        // appends `%array_max_tasks` to the pending array's task string.
        ("JobID", None) => job.display_id(job.state == JobState::Pending),
        ("JobID", Some(s)) => format!("{}.{}", job.display_id(false), s.id),
        ("JobIDRaw", None) => job.id.to_string(),
        ("JobIDRaw", Some(s)) => format!("{}.{}", job.id, s.id),
        ("JobName", None) => job.spec.name.clone(),
        ("JobName", Some(s)) => s.name.clone(),
        // The accounting record has the state the job ended in, never COMPLETING
        // (slurmdbd stores the base state at the job's end).
        ("State", None) => match (job.state, job.cancelled_by) {
            (JobState::Cancelled, Some(uid)) => format!("CANCELLED by {uid}"),
            _ => job.state.long().to_string(),
        },
        ("State", Some(s)) => s.state.long().to_string(),
        // slurmdbd records a cancelled or timed-out job's own exit as 0:0 (scontrol
        // shows the batch shell's signal, e.g. 0:15); the batch step row keeps it.
        ("ExitCode", None) if matches!(job.state, JobState::Cancelled | JobState::Timeout) => {
            "0:0".into()
        }
        ("ExitCode", None) => job.exit.to_string(),
        ("ExitCode", Some(s)) => s.exit.to_string(),
        ("DerivedExitCode", None) => job.derived_exit.to_string(),
        ("Partition", None) => job.partition.clone(),
        ("Account", _) => job.account.clone(),
        ("Reservation", _) => job.spec.reservation.clone().unwrap_or_default(),
        ("Cluster", _) => cluster.to_string(),
        ("AllocCPUS", None) => {
            if started {
                jobfmt::cpu_count(job).to_string()
            } else {
                "0".into()
            }
        }
        ("NCPUS", None) => jobfmt::cpu_count(job).to_string(),
        ("AllocCPUS" | "NCPUS", Some(s)) => s.ncpus.to_string(),
        ("NNodes" | "AllocNodes", None) => {
            if field == "AllocNodes" && !started {
                "0".into()
            } else {
                jobfmt::node_count(job).to_string()
            }
        }
        ("NNodes" | "AllocNodes", Some(s)) => hostlist::expand(&s.nodes)
            .map(|v| v.len())
            .unwrap_or(1)
            .to_string(),
        ("NTasks", Some(s)) => s.ntasks.to_string(),
        ("NodeList", None) => {
            if job.alloc.is_some() {
                job.nodelist()
            } else {
                "None assigned".into()
            }
        }
        ("NodeList", Some(s)) => s.nodes.clone(),
        ("Elapsed", None) => fmt_hms(job_elapsed(job, now)),
        ("Elapsed", Some(s)) => fmt_hms(step_elapsed(s, now)),
        ("ElapsedRaw", None) => job_elapsed(job, now).to_string(),
        ("ElapsedRaw", Some(s)) => step_elapsed(s, now).to_string(),
        ("CPUTime", None) => fmt_hms(job_elapsed(job, now) * u64::from(jobfmt::cpu_count(job))),
        ("CPUTime", Some(s)) => fmt_hms(step_elapsed(s, now) * u64::from(s.ncpus)),
        ("CPUTimeRAW", None) => {
            (job_elapsed(job, now) * u64::from(jobfmt::cpu_count(job))).to_string()
        }
        ("CPUTimeRAW", Some(s)) => (step_elapsed(s, now) * u64::from(s.ncpus)).to_string(),
        ("TotalCPU", None) => usagefmt::cpu(job.steps.iter().map(|s| s.cpu_secs).sum()),
        ("UserCPU", None) => usagefmt::cpu(
            job.steps
                .iter()
                .filter_map(|s| s.usage())
                .map(|u| u.user_cpu_secs)
                .sum(),
        ),
        ("SystemCPU", None) => usagefmt::cpu(
            job.steps
                .iter()
                .filter_map(|s| s.usage())
                .map(|u| u.sys_cpu_secs)
                .sum(),
        ),
        // Records from before usage was kept whole.
        ("TotalCPU", Some(s)) => usagefmt::cpu(s.cpu_secs),
        ("MaxRSS", Some(s)) if s.max_rss_kib > 0 => usagefmt::kib(s.max_rss_kib),
        // Since Slurm 21.08 ReqMem is the job's ReqTRES memory (the total, not the
        // per-CPU or per-node request): `-n2 --mem-per-cpu=100` shows 200M.
        ("ReqMem", None) => jobfmt::req_mem_total_text(job),
        ("Timelimit", None) => job.time_limit.to_hms(),
        ("TimelimitRaw", None) => job
            .time_limit
            .secs()
            .map(|s| (s / 60).to_string())
            .unwrap_or_else(|| "UNLIMITED".into()),
        ("Submit", _) => fmt_ts(job.submit_time),
        ("Eligible", _) => ts_or_unknown(job.eligible_time),
        ("Start", None) => ts_or_unknown(job.start_time),
        ("Start", Some(s)) => fmt_ts(s.start_time),
        ("End", None) => ts_or_unknown(job.end_time),
        ("End", Some(s)) => ts_or_unknown(s.end_time),
        ("User", None) => job.user.clone(),
        ("UID", None) => job.uid.to_string(),
        ("Group", None) => job.group.clone(),
        ("GID", None) => job.gid.to_string(),
        ("WorkDir", None) => job.spec.work_dir.clone(),
        ("Comment", None) => job.spec.comment.clone().unwrap_or_default(),
        ("Reason", None) => job.reason.to_string(),
        ("Priority", None) => job.priority.to_string(),
        ("ReqCPUS", None) => job.req_cpus.to_string(),
        ("ReqNodes", None) => job.req_nodes.max(1).to_string(),
        ("ReqTRES", None) => jobfmt::tres_sacct(job),
        ("AllocTRES", None) if started => jobfmt::tres_sacct(job),
        ("AllocTRES", Some(s)) => {
            let mut step_job = job.clone();
            step_job.alloc = None;
            // Steps print no billing (its CPU-count stand-in is cut off below).
            step_job.billing = None;
            step_job.req_cpus = s.ncpus;
            step_job.req_nodes = hostlist::expand(&s.nodes)
                .map(|v| v.len() as u32)
                .unwrap_or(1);
            let t = jobfmt::tres_sacct(&step_job);
            t.split_once(',').map(|x| x.1.to_string()).unwrap_or(t)
        }
        ("QOS", None) => job.qos.clone(),
        ("Suspended", None) => fmt_hms(job.suspended_secs),
        _ => String::new(),
    }
}

/// A size field's text re-expressed for `--units`/`--noconvert` (src/common/xstring.c
/// `convert_num_unit` with a fixed unit, or CONVERT_NUM_UNIT_NO): `3372K` with units
/// `M` is `3.29M`; with `--noconvert` `200M` of an RSS stays in KiB, `204800K`. Other
/// fields, empty values and `0` are returned as they are.
pub fn convert_size(field: &str, text: &str, units: Option<usize>, noconvert: bool) -> String {
    const SUF: [char; 5] = ['K', 'M', 'G', 'T', 'P'];
    // The unit each field is stored in: KiB for task sizes, MiB for ReqMem.
    let base = match field {
        "MaxVMSize" | "AveVMSize" | "MaxRSS" | "AveRSS" => 0,
        "ReqMem" => 1,
        _ => return text.to_string(),
    };
    if units.is_none() && !noconvert {
        return text.to_string();
    }
    let Some(last) = text.chars().last() else {
        return text.to_string();
    };
    let (num, unit) = match SUF.iter().position(|c| *c == last) {
        Some(u) => (&text[..text.len() - 1], u),
        None => (text, base),
    };
    let Ok(n) = num.parse::<f64>() else {
        return text.to_string();
    };
    if n == 0.0 {
        return text.to_string();
    }
    let target = units.unwrap_or(base);
    let v = n * 1024f64.powi(unit as i32 - target as i32);
    if (v - v.round()).abs() < 1e-9 {
        format!("{}{}", v.round() as u64, SUF[target])
    } else {
        format!("{v:.2}{}", SUF[target])
    }
}

/// Fits `v` into `width` columns: longer values keep `width - 1` characters and a `+`.
fn fit(v: &str, f: &Field) -> String {
    let n = v.chars().count();
    let w = f.width;
    let text = if n > w && w > 0 {
        let mut t: String = v.chars().take(w - 1).collect();
        t.push('+');
        t
    } else {
        v.to_string()
    };
    // Padded by hand: `format!` widths stop at u16::MAX.
    let pad = " ".repeat(w.saturating_sub(text.chars().count()));
    if f.left {
        format!("{text}{pad} ")
    } else {
        format!("{pad}{text} ")
    }
}

fn line(o: &Opts, values: &[String]) -> String {
    let mut s = String::new();
    match o.layout {
        Layout::Table => {
            for (f, v) in o.fields.iter().zip(values) {
                s.push_str(&fit(v, f));
            }
        }
        Layout::Parsable => {
            for v in values {
                s.push_str(v);
                s.push_str(&o.delimiter);
            }
        }
        Layout::Parsable2 => s.push_str(&values.join(&o.delimiter)),
    }
    s.push('\n');
    s
}

/// The whole output for the selected jobs: header (unless `-n`), then per job its row
/// and its steps' rows (only the job's with `-X`).
pub fn render(o: &Opts, jobs: &[&Job], now: i64, cluster: &str) -> String {
    let mut out = String::new();
    if !o.noheader {
        if o.layout == Layout::Table {
            // Headers are cut plainly, without the `+` of cut values (print_fields.c).
            for f in &o.fields {
                let cut: String = f.name.chars().take(f.width).collect();
                out.push_str(&fit(&cut, f));
            }
            out.push('\n');
            for f in &o.fields {
                out.push_str(&"-".repeat(f.width));
                out.push(' ');
            }
            out.push('\n');
        } else {
            let names: Vec<String> = o.fields.iter().map(|f| f.name.to_string()).collect();
            out.push_str(&line(o, &names));
        }
    }
    for job in jobs {
        if o.duplicates {
            for past in &job.past_runs {
                let run = past_run_job(job, past);
                let state = if past.node_fail {
                    "NODE_FAIL"
                } else {
                    "REQUEUED"
                };
                for step in rows(o, &run) {
                    let vals: Vec<String> = o
                        .fields
                        .iter()
                        .map(|f| match (f.name, step) {
                            ("State", None) => state.to_string(),
                            _ => value(f.name, &run, step, now, cluster),
                        })
                        .collect();
                    out.push_str(&line(o, &vals));
                }
            }
        }
        for step in rows(o, job) {
            let vals: Vec<String> = o
                .fields
                .iter()
                .map(|f| {
                    convert_size(
                        f.name,
                        &value(f.name, job, step, now, cluster),
                        o.units,
                        o.noconvert,
                    )
                })
                .collect();
            out.push_str(&line(o, &vals));
        }
    }
    out
}

/// An earlier run of a requeued job, as a job record for the row printer.
fn past_run_job(job: &Job, p: &PastRun) -> Job {
    let mut r = job.clone();
    r.start_time = Some(p.start_time);
    r.end_time = Some(p.end_time);
    r.exit = p.exit;
    r.alloc = p.alloc.clone();
    r.steps = p.steps.clone();
    r.past_runs = Vec::new();
    r.completing = false;
    r
}

/// `sacct -e`: every field name, four to a line.
pub fn helpformat() -> String {
    let mut s = String::new();
    for chunk in ALL_FIELDS.chunks(4) {
        let cols: Vec<String> = chunk.iter().map(|f| format!("{f:<19}")).collect();
        s.push_str(&cols.join(" "));
        s.push('\n');
    }
    s
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

fn lookup_user(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// The uids to show: `-u` as given; everyone with `-a`, for root, or when `-j` names
/// jobs; otherwise only the caller's.
pub fn effective_users(o: &Opts, my_uid: u32) -> Vec<u32> {
    if !o.users.is_empty() {
        o.users.clone()
    } else if o.all_users || my_uid == 0 || !o.jobs.is_empty() {
        Vec::new()
    } else {
        vec![my_uid]
    }
}

/// Runs `sacct` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let o = match parse_args(&args, &lookup_user) {
        Ok(o) => o,
        Err(m) => {
            eprintln!("{m}");
            return ExitCode::from(1);
        }
    };
    if o.version {
        println!("slurm {}", crate::config::advertised_slurm_version());
        return ExitCode::SUCCESS;
    }
    if o.helpformat {
        print!("{}", helpformat());
        return ExitCode::SUCCESS;
    }
    if o.help {
        let entries = super::help::from_getopt(SPECS);
        print!("{}", super::help::help("sacct [OPTIONS]", &entries, ""));
        return ExitCode::SUCCESS;
    }
    if o.usage {
        print!(
            "{}",
            super::help::usage("sacct", &super::help::from_getopt(SPECS), "")
        );
        return ExitCode::SUCCESS;
    }
    let now = super::timefmt::now();
    let win = match window(&o, now, &chrono::Local) {
        Ok(w) => w,
        Err(e) => {
            // parse_time's own message, as Slurm prints it (no program prefix).
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if let (Some(start), Some(end)) = win
        && start > end
    {
        // src/sacct/options.c refuses an empty window the same way.
        eprintln!(
            "sacct: error: Start time ({}) requested is after end time ({}).",
            super::timefmt::fmt_ts(start),
            super::timefmt::fmt_ts(end)
        );
        return ExitCode::from(1);
    }
    let users = effective_users(&o, nix::unistd::getuid().as_raw());
    let (mut client, cfg) = match Client::connect() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("sacct: error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("{h}");
            }
            return ExitCode::from(1);
        }
    };
    match client.call(
        &Request::Acct(query_for(&o, &users, win)),
        answer!(Response::Acct { jobs, now } => (jobs, now)),
    ) {
        Ok((jobs, now)) => {
            let mut sel = select(&o, &users, win, &jobs);
            // The database holds this cluster only: naming others selects nothing.
            if let Some(list) = &o.clusters
                && !super::sbatch::cluster_requested(list, &cfg.cluster_name)
            {
                sel.clear();
            }
            if o.json {
                print!(
                    "{}",
                    super::sacctjson::render(
                        &sel,
                        &cfg.cluster_name,
                        &cfg.slurm_version,
                        now,
                        !o.allocations,
                        &user_name,
                    )
                );
                return ExitCode::SUCCESS;
            }
            print!("{}", render(&o, &sel, now, &cfg.cluster_name));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sacct: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::jobfmt::testjobs::{T0, ended, job, running};
    use crate::model::{ExitStatus, MemReq};
    use chrono::Utc;

    fn lookup(n: &str) -> Option<u32> {
        (n == "alice").then_some(2001)
    }

    fn p(s: &str) -> Result<Opts, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse_args(&v, &lookup)
    }

    fn ex(code: i32, signal: i32) -> ExitStatus {
        ExitStatus { code, signal }
    }

    fn step(id: &str, name: &str, state: JobState, exit: ExitStatus, rss: u64) -> StepRecord {
        StepRecord {
            id: id.into(),
            name: name.into(),
            state,
            exit,
            start_time: T0 + 3,
            end_time: Some(T0 + 3),
            nodes: "node01".into(),
            ncpus: 1,
            ntasks: 1,
            max_rss_kib: rss,
            cpu_secs: 0.0,
            detail: None,
            usage: None,
        }
    }

    /// A finished one-CPU job of alice's with a batch step.
    fn done(id: u32, name: &str, state: JobState, exit: ExitStatus, rss: u64) -> Job {
        let mut j = ended(running(job(id, name), 1, T0 + 3), state, exit, T0 + 3);
        let bstate = if exit.signal != 0 {
            JobState::Cancelled
        } else {
            state
        };
        j.steps.push(step("batch", "batch", bstate, exit, rss));
        j
    }

    fn exit_code_jobs() -> Vec<Job> {
        let a = done(195, "exit3", JobState::Failed, ex(3, 0), 3440);
        let b = done(196, "selfkill9", JobState::Failed, ex(0, 9), 3348);
        let mut c = done(199, "step_fail", JobState::Completed, ex(0, 0), 3280);
        c.derived_exit = ex(7, 0);
        c.steps
            .push(step("0", "bash", JobState::Failed, ex(7, 0), 3140));
        let mut d = done(200, "oom", JobState::OutOfMemory, ex(0, 125), 3420);
        d.steps[0].state = JobState::OutOfMemory;
        d.req_mem = MemReq::PerNode(64);
        vec![d, c, b, a]
    }

    fn out(args: &str, jobs: &[Job]) -> String {
        let o = p(args).unwrap();
        let users = effective_users(&o, 2001);
        let win = window(&o, T0 + 100, &Utc).unwrap();
        let sel = select(&o, &users, win, jobs);
        render(&o, &sel, T0 + 100, "anchor")
    }

    #[test]
    fn exit_codes_table_matches_golden() {
        let want = "\
JobID           JobName      State ExitCode DerivedExitCode     MaxRSS     ReqMem 
------------ ---------- ---------- -------- --------------- ---------- ---------- 
195               exit3     FAILED      3:0             0:0                  400M 
195.batch         batch     FAILED      3:0                      3440K            
196           selfkill9     FAILED      0:9             0:0                  400M 
196.batch         batch  CANCELLED      0:9                      3348K            
199           step_fail  COMPLETED      0:0             7:0                  400M 
199.batch         batch  COMPLETED      0:0                      3280K            
199.0              bash     FAILED      7:0                      3140K            
200                 oom OUT_OF_ME+    0:125             0:0                   64M 
200.batch         batch OUT_OF_ME+    0:125                      3420K            
";
        assert_eq!(
            out(
                "-j 195,196,199,200 --format=JobID,JobName,State,ExitCode,DerivedExitCode,MaxRSS,ReqMem",
                &exit_code_jobs()
            ),
            want
        );
    }

    #[test]
    fn default_format_and_parsable_forms() {
        let jobs = vec![done(125, "env.sh", JobState::Completed, ex(0, 0), 3372)];
        assert_eq!(
            out("-j 125", &jobs),
            "\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------- -------- 
125              env.sh      debug   research          1  COMPLETED      0:0 
125.batch         batch              research          1  COMPLETED      0:0 
"
        );
        assert_eq!(
            out("-j 125 --parsable2", &jobs),
            "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode\n\
             125|env.sh|debug|research|1|COMPLETED|0:0\n\
             125.batch|batch||research|1|COMPLETED|0:0\n"
        );
        assert_eq!(
            out("-j 125 -p", &jobs),
            "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode|\n\
             125|env.sh|debug|research|1|COMPLETED|0:0|\n\
             125.batch|batch||research|1|COMPLETED|0:0|\n"
        );
        assert_eq!(
            out("-j 125 -X -n -p -o JobID,State", &jobs),
            "125|COMPLETED|\n"
        );
        assert_eq!(
            out("-j 125 -X -P -o jobid,state --delimiter=^|^", &jobs),
            "JobID^|^State\n125^|^COMPLETED\n"
        );
        assert_eq!(out("-j 125 -n -P -o JobID", &jobs), "125\n125.batch\n");
        assert_eq!(out("-j 125.batch -n -P -o JobID", &jobs), "125.batch\n");
        assert_eq!(
            out("-X -j 125 -o JobID,JobName,Partition,Account,AllocCPUS,AllocTRES%40,State,ExitCode", &jobs),
            "\
JobID           JobName  Partition    Account  AllocCPUS                                AllocTRES      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------------------------------------- ---------- -------- 
125              env.sh      debug   research          1          billing=1,cpu=1,mem=400M,node=1  COMPLETED      0:0 
"
        );
        assert_eq!(
            out("-j 125 -b -n -P", &jobs),
            "125|COMPLETED|0:0\n125.batch|COMPLETED|0:0\n"
        );
    }

    #[test]
    fn cancelled_jobs_show_who_and_truncate() {
        let mut j = running(job(168, "run16"), 16, T0 + 2);
        j = ended(j, JobState::Cancelled, ex(0, 15), T0 + 37);
        j.cancelled_by = Some(2001);
        j.steps
            .push(step("batch", "batch", JobState::Cancelled, ex(0, 15), 0));
        let jobs = vec![j];
        assert_eq!(
            out(
                "-j 168 -X --format=JobID,JobName,State,ExitCode,Elapsed",
                &jobs
            ),
            "\
JobID           JobName      State ExitCode    Elapsed 
------------ ---------- ---------- -------- ---------- 
168               run16 CANCELLED+      0:0   00:00:35 
"
        );
        assert_eq!(
            out("-j 168 -P -n -o State,ExitCode,ElapsedRaw", &jobs),
            "CANCELLED by 2001|0:0|35\nCANCELLED|0:15|0\n"
        );
        assert_eq!(
            out("-j 168 -X -n -o State%20,JobName%-8", &jobs),
            "   CANCELLED by 2001 run16    \n"
        );
        assert_eq!(out("-j 168 -X -n -o JobName%3", &jobs), "ru+ \n");
    }

    #[test]
    fn pending_job_is_visible_with_placeholders() {
        let jobs = vec![job(300, "waiting")];
        assert_eq!(
            out(
                "-j 300 -P -n -o JobID,State,AllocCPUS,NodeList,Start,End,Elapsed",
                &jobs
            ),
            "300|PENDING|0|None assigned|Unknown|Unknown|00:00:00\n"
        );
        let s = out("-j 300 -P -n -o Submit,User,NNodes,NCPUS,Timelimit", &jobs);
        assert_eq!(s, format!("{}|alice|1|1|01:00:00\n", fmt_ts(T0)));
    }

    #[test]
    fn huge_widths_are_refused_not_a_panic() {
        assert!(parse_format("jobid%99999999999").is_err());
        assert!(parse_format("state%70000").is_err());
        let f = parse_format(&format!("state%{MAX_FIELD_WIDTH}")).unwrap();
        let cell = fit("COMPLETED", &f[0]);
        assert_eq!(cell.len(), MAX_FIELD_WIDTH + 1);
        assert!(cell.ends_with("COMPLETED "));
    }

    #[test]
    fn errors_match_slurm() {
        assert_eq!(
            p("-j abc").unwrap_err(),
            "sacct: fatal: Bad job/step specified: abc"
        );
        assert_eq!(
            p("-j 12,x").unwrap_err(),
            "sacct: fatal: Bad job/step specified: x"
        );
        assert_eq!(
            p("-X foo bar").unwrap_err(),
            "sacct: error: Unknown arguments:\nsacct: error:  foo\nsacct: error:  bar"
        );
        assert_eq!(
            p("-o JobID,Bogus").unwrap_err(),
            "sacct: error: Invalid field requested: \"Bogus\""
        );
        assert!(
            p("--bogus")
                .unwrap_err()
                .starts_with("sacct: unrecognized option '--bogus'")
        );
        // An unknown job prints just the header.
        assert_eq!(
            out("-j 999999", &[]),
            "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n\
             ------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
        );
    }

    #[test]
    fn format_prefixes_and_justification() {
        // Names match by case-insensitive prefix, first in Slurm's field order.
        let o = p("-o jobn,st,exitc,JobID%8,jobid%-8,maxrs").unwrap();
        let names: Vec<&str> = o.fields.iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            ["JobName", "Start", "ExitCode", "JobID", "JobID", "MaxRSS"]
        );
        // %N right-justifies, even JobID; %-N left-justifies.
        assert!(!o.fields[3].left && o.fields[4].left);
        // Headers are cut plainly (no `+`), justified as the column.
        let o = p("-o JobName%4,State%-3").unwrap();
        let out = render(&o, &[], 0, "c");
        assert_eq!(out.lines().next(), Some("JobN Sta "));
    }

    #[test]
    fn jobs_repeatable_and_headers_canonical() {
        let o = p("-j 1 -j 2,3.batch --jobs=4_1 -o jobid,JOBNAME,nodelist%-256").unwrap();
        let ids: Vec<u32> = o.jobs.iter().map(|j| j.job).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        let names: Vec<&str> = o.fields.iter().map(|f| f.name).collect();
        assert_eq!(names, vec!["JobID", "JobName", "NodeList"]);
        assert_eq!((o.fields[2].width, o.fields[2].left), (256, true));
        let o = p("-l").unwrap();
        assert_eq!(o.fields.len(), 54);
        assert_eq!(o.fields[0].name, "JobID");
    }

    #[test]
    fn helpformat_layout() {
        let h = helpformat();
        let lines: Vec<&str> = h.lines().collect();
        assert_eq!(
            lines[0],
            "Account             AdminComment        AllocCPUS           AllocNodes         "
        );
        assert_eq!(*lines.last().unwrap(), "WorkDir            ");
        assert_eq!(lines.len(), 28);
    }

    #[test]
    fn default_windows() {
        let now = T0; // 14:55:35 UTC
        let midnight = midnight_today(now, &Utc);
        assert_eq!(
            window(&p("").unwrap(), now, &Utc),
            Ok((Some(midnight), None))
        );
        assert_eq!(window(&p("-j 5").unwrap(), now, &Utc), Ok((None, None)));
        assert_eq!(
            window(&p("-s F").unwrap(), now, &Utc),
            Ok((Some(now), Some(now)))
        );
        assert_eq!(
            window(&p("-S today --state=F,TO,CA,OOM").unwrap(), now, &Utc),
            Ok((Some(midnight), Some(midnight)))
        );
        assert_eq!(
            window(&p("-S today -E now -s CA").unwrap(), now, &Utc),
            Ok((Some(midnight), Some(now)))
        );
        assert_eq!(
            window(&p("-S now-1hour").unwrap(), now, &Utc),
            Ok((Some(now - 3600), None))
        );
        assert!(window(&p("-S yesterday-ish").unwrap(), now, &Utc).is_err());
    }

    #[test]
    fn state_window_selection() {
        let jobs = exit_code_jobs(); // all ended at T0 + 3
        let o = p("-S today --state=F").unwrap();
        let at_midnight = (
            Some(midnight_today(T0, &Utc)),
            Some(midnight_today(T0, &Utc)),
        );
        assert!(select(&o, &[], at_midnight, &jobs).is_empty());
        let o = p("-S today -E now --state=F").unwrap();
        let win = window(&o, T0 + 100, &Utc).unwrap();
        let ids: Vec<u32> = select(&o, &[], win, &jobs).iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![195, 196]);
        // Without states: everything that existed in the window, sorted by id.
        let o = p("").unwrap();
        let win = window(&o, T0 + 100, &Utc).unwrap();
        let ids: Vec<u32> = select(&o, &[2001], win, &jobs)
            .iter()
            .map(|j| j.id)
            .collect();
        assert_eq!(ids, vec![195, 196, 199, 200]);
        assert!(select(&o, &[3000], win, &jobs).is_empty());
        let o = p("--name=oom").unwrap();
        let ids: Vec<u32> = select(&o, &[], win, &jobs).iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![200]);
    }

    #[test]
    fn users_default_to_the_caller() {
        assert_eq!(effective_users(&p("").unwrap(), 2001), vec![2001]);
        assert!(effective_users(&p("-a").unwrap(), 2001).is_empty());
        assert!(effective_users(&p("-j 5").unwrap(), 2001).is_empty());
        assert!(effective_users(&p("").unwrap(), 0).is_empty());
        assert_eq!(effective_users(&p("-u alice").unwrap(), 0), vec![2001]);
    }

    #[test]
    fn units_and_noconvert() {
        assert_eq!(convert_size("MaxRSS", "3372K", Some(1), false), "3.29M");
        assert_eq!(convert_size("MaxRSS", "200M", None, true), "204800K");
        assert_eq!(convert_size("MaxRSS", "1G", Some(1), false), "1024M");
        assert_eq!(convert_size("ReqMem", "400M", Some(2), false), "0.39G");
        assert_eq!(convert_size("ReqMem", "1G", None, true), "1024M");
        assert_eq!(convert_size("MaxRSS", "", Some(2), false), "");
        assert_eq!(convert_size("MaxRSS", "0", Some(2), false), "0");
        assert_eq!(convert_size("JobName", "12K", Some(2), false), "12K");
        assert_eq!(convert_size("MaxRSS", "3372K", None, false), "3372K");
        let jobs = vec![done(125, "env.sh", JobState::Completed, ex(0, 0), 3372)];
        assert_eq!(
            out("-j 125 -n -P -o JobID,ReqMem,MaxRSS --units=M", &jobs),
            "125|400M|\n125.batch||3.29M\n"
        );
        assert!(
            p("--units=X")
                .unwrap_err()
                .contains("Invalid unit type 'X'")
        );
    }

    #[test]
    fn cpu_time_text() {
        assert_eq!(usagefmt::cpu(0.0), "00:00.000");
        assert_eq!(usagefmt::cpu(61.5), "01:01.500");
        assert_eq!(usagefmt::cpu(3661.0), "01:01:01");
    }
}
