//! `sreport`: usage reports computed from the job records and reservations in the
//! controller's store (the twin of src/sreport/: `cluster_reports.c`, `user_reports.c`,
//! `job_reports.c`, `common.c` for the number formats and column widths).
//!
//! Reports: `cluster Utilization`, `cluster AccountUtilizationByUser`, `cluster
//! UserUtilizationByAccount`, `user TopUsage`, `job SizesByAccount`, in CPU time.
//! Shape: argv → [`Opts`] + [`Query`] (pure) → one `Request::Usage` → the pure
//! [`render`], which works on CPU-seconds and prints Slurm's layouts.
//!
//! Difference from Slurm: slurmdbd answers from hourly rollups, so Slurm rounds the
//! period to whole hours; sluice reads the job records themselves and uses the period
//! to the second. `Down` is the CPU time of nodes DOWN, DRAIN or FAIL (recorded by the
//! controller once a second).

use super::client::{Client, answer};
use super::getopt::{self, Item, OptSpec, opt};
use super::help;
use super::timefmt::fmt_ts;
use crate::model::Job;
use crate::proto::{Request, Response, UsageReport};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::ExitCode;

/// How times are shown (`-t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeFmt {
    Secs,
    #[default]
    Mins,
    Hours,
    Percent,
    SecPer,
    MinPer,
    HourPer,
}

impl TimeFmt {
    fn parse(s: &str) -> Option<TimeFmt> {
        let l = s.to_ascii_lowercase();
        let is = |k: &str, min: usize| l.len() >= min && k.starts_with(&l);
        Some(if is("secper", 6) {
            TimeFmt::SecPer
        } else if is("minper", 6) {
            TimeFmt::MinPer
        } else if is("hourper", 6) {
            TimeFmt::HourPer
        } else if is("seconds", 1) {
            TimeFmt::Secs
        } else if is("minutes", 1) {
            TimeFmt::Mins
        } else if is("hours", 1) {
            TimeFmt::Hours
        } else if is("percent", 1) {
            TimeFmt::Percent
        } else {
            return None;
        })
    }

    /// Slurm's `time_format_string`.
    fn name(self) -> &'static str {
        match self {
            TimeFmt::Secs => "Seconds",
            TimeFmt::Mins => "Minutes",
            TimeFmt::Hours => "Hours",
            TimeFmt::Percent => "Percentage of Total",
            TimeFmt::SecPer => "Seconds/Percentage of Total",
            TimeFmt::MinPer => "Minutes/Percentage of Total",
            TimeFmt::HourPer => "Hours/Percentage of Total",
        }
    }

    fn with_percent(self) -> bool {
        matches!(self, TimeFmt::SecPer | TimeFmt::MinPer | TimeFmt::HourPer)
    }

    /// A CPU-seconds value as Slurm prints it, against `total` for percentages.
    pub fn value(self, secs: u64, total: u64) -> String {
        let pct = secs as f64 / total.max(1) as f64 * 100.0;
        let v = secs as f64;
        match self {
            TimeFmt::Secs => secs.to_string(),
            TimeFmt::Mins => format!("{:.0}", v / 60.0),
            TimeFmt::Hours => format!("{:.0}", v / 3600.0),
            TimeFmt::Percent => format!("{pct:.2}%"),
            TimeFmt::SecPer => format!("{secs}({pct:.2}%)"),
            TimeFmt::MinPer => format!("{:.0}({pct:.2}%)", v / 60.0),
            TimeFmt::HourPer => format!("{:.0}({pct:.2}%)", v / 3600.0),
        }
    }

    /// Width of a usage column whose largest value is `max` seconds (Slurm's
    /// `sreport_set_usage_col_width`).
    fn usage_width(self, max: u64) -> i32 {
        let mut len = 8;
        let mut order: u64 = 100_000_000;
        while max >= order && order < u64::MAX / 10 {
            len += 1;
            order *= 10;
        }
        if self.with_percent() { len + 9 } else { len }
    }
}

/// Global options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    pub time: TimeFmt,
    /// `-p` (`Some(true)`: with a trailing `|`) or `-P` (`Some(false)`).
    pub parsable: Option<bool>,
    /// `-n`: no banner and no column header.
    pub noheader: bool,
}

/// Which report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    ClusterUtilization,
    AccountUtilizationByUser,
    UserUtilizationByAccount,
    TopUsage { count: usize },
    SizesByAccount { groups: Vec<u32> },
}

/// A parsed command: the report and its conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub report: Report,
    /// `start=` / `end=` as given (epoch seconds); `None` = Slurm's default day.
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
}

fn kw(word: &str, keyword: &str, min: usize) -> bool {
    let w = word.to_ascii_lowercase();
    w.len() >= min.min(keyword.len()) && keyword.to_ascii_lowercase().starts_with(&w)
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// sreport's options (cf. src/sreport/sreport.c), with their `--help` lines.
pub const SPECS: &[OptSpec] = &[
    opt("all_clusters", Some('a'), false).doc("", "accepted: there is one cluster"),
    opt("cluster", Some('M'), true).doc("cluster", "cluster to report on (this one only)"),
    opt("clusters", None, true),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("noheader", Some('n'), false).doc("", "print no header lines"),
    opt("parsable", Some('p'), false).doc("", "fields delimited by '|', with a trailing '|'"),
    opt("parsable2", Some('P'), false).doc("", "fields delimited by '|', without a trailing '|'"),
    opt("quiet", Some('Q'), false).doc("", "print no warnings"),
    opt("time_format", Some('t'), true).doc(
        "format",
        "time unit: Seconds, Minutes, Hours, Percent, SecPer, MinPer, HourPer",
    ),
    opt("tres", Some('T'), true).doc("tres_list", "accepted: reports count CPU time"),
    opt("usage", None, false).doc("", "same as --help"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// The reports sreport makes and the conditions it takes (what [`parse`] knows), for
/// `--help`.
const REPORTS: &[(&str, &str)] = &[
    (
        "cluster Utilization",
        "allocated, down, reserved and idle time of the cluster",
    ),
    (
        "cluster AccountUtilizationByUser",
        "usage of each account, and of each user in it",
    ),
    (
        "cluster UserUtilizationByAccount",
        "usage of each user, by account",
    ),
    (
        "user TopUsage",
        "the users who used most (TopCount=N, default 10)",
    ),
    ("job SizesByAccount", "usage by job size (Grouping=N,N,...)"),
];
/// See [`REPORTS`].
const CONDITIONS: &[(&str, &str)] = &[
    (
        "Start=<time>, End=<time>",
        "the period (default: yesterday)",
    ),
    ("Users=<list>", "only these users"),
    ("Accounts=<list>", "only these accounts"),
];

/// The `--help` text: the options, [`REPORTS`] and [`CONDITIONS`].
fn help_text() -> String {
    let mut more = String::from("Reports:\n");
    for (r, what) in REPORTS {
        more.push_str(&help::line_with(r, what));
    }
    more.push_str("\nConditions (after the report; keywords may be abbreviated):\n");
    for (c, what) in CONDITIONS {
        more.push_str(&help::line_with(c, what));
    }
    help::help(
        "sreport [OPTIONS] [COMMAND]",
        &help::from_getopt(SPECS),
        &more,
    )
}

/// Whether argv asks for the help (`-h`, `--help`, `--usage`, `help`), as sreport
/// answers before anything else.
fn wants_help(args: &[String]) -> bool {
    getopt::parse("sreport", SPECS, args).is_ok_and(|items| {
        items.iter().any(|i| match i {
            Item::Opt(n, _) => matches!(*n, "help" | "usage"),
            Item::Operand(w) => kw(w, "help", 1) && items.len() == 1,
        })
    })
}

/// Parses argv (without argv[0]). `time` turns `start=`/`end=` values into epoch
/// seconds.
///
/// Errors: the text sreport prints (unknown option, report or condition, bad time
/// format).
pub fn parse(args: &[String], time: &dyn Fn(&str) -> Option<i64>) -> Result<(Opts, Query), String> {
    let mut opts = Opts::default();
    let mut words: Vec<String> = Vec::new();
    for item in getopt::parse("sreport", SPECS, args)? {
        let (name, v) = match item {
            Item::Opt(n, v) => (n, v.unwrap_or_default()),
            Item::Operand(w) => {
                words.push(w);
                continue;
            }
        };
        match name {
            "noheader" => opts.noheader = true,
            "parsable" => opts.parsable = Some(true),
            "parsable2" => opts.parsable = Some(false),
            "time_format" => {
                opts.time = TimeFmt::parse(&v).ok_or_else(|| format!("unknown time format {v}"))?;
            }
            // -a, -M, -T, -v, -Q: one cluster, CPU reports, nothing more to say.
            _ => {}
        }
    }
    let (Some(kind), Some(name)) = (words.first(), words.get(1)) else {
        return Err(
            "sreport: error: no report given (interactive mode is not supported by sluice)".into(),
        );
    };
    let report = if kw(kind, "cluster", 2) {
        if kw(name, "utilization", 2) {
            Report::ClusterUtilization
        } else if kw(name, "accountutilizationbyuser", 8) {
            Report::AccountUtilizationByUser
        } else if kw(name, "userutilizationbyaccount", 2) {
            Report::UserUtilizationByAccount
        } else {
            return Err(format!(
                "Not valid report {name}\nValid cluster reports are, \"AccountUtilizationByUser\", \"UserUtilizationByAccount\", and \"Utilization\""
            ));
        }
    } else if kw(kind, "user", 1) {
        if kw(name, "topusage", 1) {
            Report::TopUsage { count: 10 }
        } else {
            return Err(format!(
                "Not valid report {name}\nValid user reports are, \"TopUsage\""
            ));
        }
    } else if kw(kind, "job", 1) {
        if kw(name, "sizesbyaccount", 1) {
            Report::SizesByAccount {
                groups: vec![50, 250, 500, 1000],
            }
        } else {
            return Err(format!(
                "Not valid report {name}\nValid job reports are, \"SizesByAccount\""
            ));
        }
    } else {
        return Err(format!("invalid keyword: {kind}"));
    };
    let mut q = Query {
        report,
        start: None,
        end: None,
        users: Vec::new(),
        accounts: Vec::new(),
    };
    for w in &words[2..] {
        let Some((k, v)) = w.split_once('=') else {
            if kw(w, "all_clusters", 1) || kw(w, "tree", 4) {
                continue;
            }
            return Err(format!(
                " Unknown condition: {w}\nUse keyword set to modify value"
            ));
        };
        if kw(k, "start", 1) {
            q.start = Some(time(v).ok_or_else(|| format!("Invalid time specification: {v}"))?);
        } else if kw(k, "end", 1) {
            q.end = Some(time(v).ok_or_else(|| format!("Invalid time specification: {v}"))?);
        } else if kw(k, "users", 1) {
            q.users = list(v);
        } else if kw(k, "accounts", 2) || kw(k, "acct", 4) {
            q.accounts = list(v);
        } else if kw(k, "topcount", 1) {
            let n: usize = v
                .parse()
                .map_err(|_| format!("Invalid value for TopCount ({v})"))?;
            if let Report::TopUsage { count } = &mut q.report {
                *count = n;
            }
        } else if kw(k, "grouping", 1) {
            let mut g: Vec<u32> = Vec::new();
            for x in v.split(',') {
                g.push(
                    x.parse()
                        .map_err(|_| format!("Invalid value for Grouping ({v})"))?,
                );
            }
            g.sort_unstable();
            g.dedup();
            g.retain(|&x| x > 0);
            if let Report::SizesByAccount { groups } = &mut q.report {
                *groups = g;
            }
        } else if kw(k, "clusters", 1) || kw(k, "format", 1) {
            // One cluster; the default columns only.
        } else {
            return Err(format!(
                " Unknown condition: {w}\nUse keyword set to modify value"
            ));
        }
    }
    Ok((opts, q))
}

/// The report period: Slurm's default is yesterday 00:00 to today 00:00 (local); an
/// end after `now` is cut to `now`. `midnight` is today's local midnight.
pub fn period(q: &Query, now: i64, midnight: i64) -> (i64, i64) {
    let end = q.end.unwrap_or(midnight).min(now);
    let start = q.start.unwrap_or(midnight - 86400);
    (start, end.max(start))
}

fn overlap(a0: i64, a1: i64, b0: i64, b1: i64) -> u64 {
    (a1.min(b1) - a0.max(b0)).max(0) as u64
}

/// One run of a job inside the period: CPUs and CPU-seconds.
struct Run<'a> {
    job: &'a Job,
    cpus: u32,
    /// Run start and end (end = now while running).
    t0: i64,
    t1: i64,
}

fn runs<'a>(jobs: &'a [Job], now: i64) -> Vec<Run<'a>> {
    let mut out = Vec::new();
    for j in jobs {
        for p in &j.past_runs {
            let cpus = p.alloc.as_ref().map_or(0, |a| a.cpus.iter().sum());
            out.push(Run {
                job: j,
                cpus,
                t0: p.start_time,
                t1: p.end_time,
            });
        }
        if let (Some(s), Some(a)) = (j.start_time, &j.alloc) {
            out.push(Run {
                job: j,
                cpus: a.cpus.iter().sum(),
                t0: s,
                t1: j.end_time.unwrap_or(now).max(s),
            });
        }
    }
    out
}

/// Cluster Utilization figures, CPU-seconds over the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Util {
    pub alloc: u64,
    pub down: u64,
    pub pdown: u64,
    pub idle: u64,
    pub plan: u64,
    /// CPUs × period.
    pub total: u64,
}

impl Util {
    fn reported(&self) -> u64 {
        self.alloc + self.down + self.pdown + self.idle + self.plan
    }
}

/// Computes Utilization: allocated from job runs; a reservation's CPU time not used by
/// its own jobs is PLND Down (MAINT) or Planned (others); the rest is idle.
pub fn utilization(data: &UsageReport, start: i64, end: i64) -> Util {
    // Nothing is reported from before the cluster existed.
    let start = start.max(data.created).min(end.max(start));
    let cpus: u64 = data.nodes.iter().map(|(_, c)| u64::from(*c)).sum();
    let total = cpus * (end - start).max(0) as u64;
    let rs = runs(&data.jobs, data.now);
    let alloc: u64 = rs
        .iter()
        .map(|r| u64::from(r.cpus) * overlap(r.t0, r.t1, start, end))
        .sum();
    let mut pdown = 0u64;
    let mut plan = 0u64;
    let mut seen: Vec<(&str, i64)> = Vec::new();
    for r in &data.resvs {
        // The live list and the history may both hold a window; count each once.
        if seen.contains(&(r.name.as_str(), r.start)) {
            continue;
        }
        seen.push((r.name.as_str(), r.start));
        let (w0, w1) = (r.start.max(start), r.end.min(end).min(data.now));
        let held = u64::from(r.cpus) * (w1 - w0).max(0) as u64;
        let used: u64 = rs
            .iter()
            .filter(|x| x.job.spec.reservation.as_deref() == Some(r.name.as_str()))
            .map(|x| u64::from(x.cpus) * overlap(x.t0, x.t1, w0, w1))
            .sum();
        let unused = held.saturating_sub(used);
        if r.flags.maint {
            pdown += unused;
        } else {
            plan += unused;
        }
    }
    let cpus_of = |node: &str| {
        data.nodes
            .iter()
            .find(|(n, _)| n == node)
            .map_or(0, |(_, c)| u64::from(*c))
    };
    let down: u64 = data
        .down
        .iter()
        .map(|(n, s, e)| cpus_of(n) * overlap(*s, *e, start, end))
        .sum();
    let down = down.min(total.saturating_sub(alloc));
    let pdown = pdown.min(total.saturating_sub(alloc + down));
    let plan = plan.min(total.saturating_sub(alloc + down + pdown));
    Util {
        alloc,
        down,
        pdown,
        plan,
        idle: total.saturating_sub(alloc + down + pdown + plan),
        total,
    }
}

/// One printed column: name and width (negative: left-justified), as print_fields.
struct Col {
    name: String,
    len: i32,
}

fn col(name: &str, len: i32) -> Col {
    Col {
        name: name.to_string(),
        len,
    }
}

fn cell(c: &Col, v: &str, last: bool, parsable: Option<bool>) -> String {
    match parsable {
        Some(false) if last => v.to_string(),
        Some(_) => format!("{v}|"),
        None => {
            let w = c.len.unsigned_abs() as usize;
            let mut s: String = v.chars().take(w).collect();
            if v.chars().count() > w && w > 0 {
                s.pop();
                s.push('+');
            }
            if c.len < 0 {
                format!("{s:<w$} ")
            } else {
                format!("{s:>w$} ")
            }
        }
    }
}

fn table(cols: &[Col], rows: &[Vec<String>], opts: &Opts) -> String {
    let mut out = String::new();
    let n = cols.len();
    if !opts.noheader {
        for (i, c) in cols.iter().enumerate() {
            match opts.parsable {
                Some(false) if i + 1 == n => out.push_str(&c.name),
                Some(_) => {
                    out.push_str(&c.name);
                    out.push('|');
                }
                None => {
                    let w = c.len.unsigned_abs() as usize;
                    let s: String = c.name.chars().take(w).collect();
                    if c.len < 0 {
                        out.push_str(&format!("{s:<w$} "));
                    } else {
                        out.push_str(&format!("{s:>w$} "));
                    }
                }
            }
        }
        out.push('\n');
        if opts.parsable.is_none() {
            for c in cols {
                out.push_str(&"-".repeat(c.len.unsigned_abs() as usize));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in rows {
        for (i, (c, v)) in cols.iter().zip(r).enumerate() {
            out.push_str(&cell(c, v, i + 1 == n, opts.parsable));
        }
        out.push('\n');
    }
    out
}

const RULE: &str =
    "--------------------------------------------------------------------------------\n";

fn banner(title: &str, start: i64, end: i64, unit_line: &str, opts: &Opts) -> String {
    if opts.noheader {
        return String::new();
    }
    format!(
        "{RULE}{title} {} - {} ({} secs)\n{unit_line}\n{RULE}",
        fmt_ts(start),
        fmt_ts(end - 1),
        end - start
    )
}

fn usage_line(opts: &Opts) -> String {
    match opts.time {
        TimeFmt::Percent => format!("Usage reported in {}", opts.time.name()),
        t => format!("Usage reported in CPU {}", t.name()),
    }
}

/// The user's full name (first GECOS field), as Slurm's `Proper Name`.
fn proper_name(user: &str) -> String {
    nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .map(|u| {
            let g = u.gecos.to_string_lossy().into_owned();
            g.split(',').next().unwrap_or("").to_string()
        })
        .unwrap_or_default()
}

/// The account a job's usage is reported under: its own, or, for a job that ran
/// before any account existed (it has none), [`DEFAULT_ACCOUNT`].
fn job_account(j: &Job) -> &str {
    if j.account.is_empty() {
        DEFAULT_ACCOUNT
    } else {
        &j.account
    }
}

/// Where usage of jobs without an account is reported: the root of the account tree,
/// which every association sits under (its users are listed right after the root
/// line, as Slurm lists the root account's own users).
pub const DEFAULT_ACCOUNT: &str = "root";

/// CPU-seconds per (account, user) in the period, for jobs passing the filters.
fn by_assoc(
    data: &UsageReport,
    q: &Query,
    start: i64,
    end: i64,
) -> BTreeMap<(String, String), u64> {
    let mut m: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in runs(&data.jobs, data.now) {
        let j = r.job;
        let account = job_account(j);
        if (!q.users.is_empty() && !q.users.contains(&j.user))
            || (!q.accounts.is_empty() && !q.accounts.iter().any(|a| a == account))
        {
            continue;
        }
        let secs = u64::from(r.cpus) * overlap(r.t0, r.t1, start, end);
        if secs > 0 {
            *m.entry((account.to_string(), j.user.clone())).or_default() += secs;
        }
    }
    m
}

/// Renders a report from the controller's data. Pure apart from looking up users'
/// full names.
pub fn render(opts: &Opts, q: &Query, data: &UsageReport, start: i64, end: i64) -> String {
    let t = opts.time;
    let cluster = data.cluster.clone();
    match &q.report {
        Report::ClusterUtilization => {
            let u = utilization(data, start, end);
            let rep = u.reported();
            let w = |v: u64| t.usage_width(v);
            let cols = vec![
                col("Cluster", 9),
                col("Allocated", w(u.alloc)),
                col("Down", w(u.down)),
                col("PLND Down", w(u.pdown)),
                col("Idle", w(u.idle)),
                col("Planned", w(u.plan)),
                col("Reported", w(rep)),
            ];
            let row = vec![
                cluster,
                t.value(u.alloc, rep),
                t.value(u.down, rep),
                t.value(u.pdown, rep),
                t.value(u.idle, rep),
                t.value(u.plan, rep),
                t.value(rep, u.total),
            ];
            banner("Cluster Utilization", start, end, &usage_line(opts), opts)
                + &table(&cols, &[row], opts)
        }
        Report::AccountUtilizationByUser | Report::UserUtilizationByAccount => {
            let total = utilization(data, start, end).reported();
            let m = by_assoc(data, q, start, end);
            let sum: u64 = m.values().sum();
            let mut rows: Vec<Vec<String>> = Vec::new();
            let acct_first = q.report == Report::AccountUtilizationByUser;
            let used_w = t.usage_width(sum);
            let energy = || t.value(0, 0);
            let cols = if acct_first {
                vec![
                    col("Cluster", 9),
                    col("Account", 15),
                    col("Login", 9),
                    col("Proper Name", 15),
                    col("Used", used_w),
                    col("Energy", t.usage_width(0)),
                ]
            } else {
                vec![
                    col("Cluster", 9),
                    col("Login", 9),
                    col("Proper Name", 15),
                    col("Account", 15),
                    col("Used", used_w),
                    col("Energy", t.usage_width(0)),
                ]
            };
            if acct_first {
                // The root line carries the total, then each account and its users.
                rows.push(vec![
                    cluster.clone(),
                    "root".into(),
                    String::new(),
                    String::new(),
                    t.value(sum, total),
                    energy(),
                ]);
                let mut accts: BTreeMap<&str, u64> = BTreeMap::new();
                for ((a, _), v) in &m {
                    *accts.entry(a.as_str()).or_default() += v;
                }
                // The root account's own users first, under the root line itself.
                let root = accts.remove_entry(DEFAULT_ACCOUNT);
                for (a, v) in root.into_iter().chain(accts) {
                    if a != DEFAULT_ACCOUNT {
                        rows.push(vec![
                            cluster.clone(),
                            a.to_string(),
                            String::new(),
                            String::new(),
                            t.value(v, total),
                            energy(),
                        ]);
                    }
                    for ((_, user), uv) in m.iter().filter(|((x, _), _)| x == a) {
                        rows.push(vec![
                            cluster.clone(),
                            a.to_string(),
                            user.clone(),
                            proper_name(user),
                            t.value(*uv, total),
                            energy(),
                        ]);
                    }
                }
            } else {
                let mut v: Vec<(&(String, String), &u64)> = m.iter().collect();
                v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.1.cmp(&b.0.1)).then(a.0.0.cmp(&b.0.0)));
                for ((a, user), uv) in v {
                    rows.push(vec![
                        cluster.clone(),
                        user.clone(),
                        proper_name(user),
                        a.clone(),
                        t.value(*uv, total),
                        energy(),
                    ]);
                }
            }
            let title = if acct_first {
                "Cluster/Account/User Utilization"
            } else {
                "Cluster/User/Account Utilization"
            };
            banner(title, start, end, &usage_line(opts), opts) + &table(&cols, &rows, opts)
        }
        Report::TopUsage { count } => {
            let total = utilization(data, start, end).reported();
            let m = by_assoc(data, q, start, end);
            let mut users: BTreeMap<&str, (u64, Vec<&str>)> = BTreeMap::new();
            for ((a, u), v) in &m {
                let e = users.entry(u.as_str()).or_default();
                e.0 += v;
                if !e.1.contains(&a.as_str()) {
                    e.1.push(a.as_str());
                }
            }
            let mut v: Vec<(&str, (u64, Vec<&str>))> = users.into_iter().collect();
            v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            v.truncate(*count);
            let max = v.first().map_or(0, |x| x.1.0);
            let cols = vec![
                col("Cluster", 9),
                col("Login", 9),
                col("Proper Name", 15),
                col("Account", 15),
                col("Used", t.usage_width(max)),
                col("Energy", t.usage_width(0)),
            ];
            let rows: Vec<Vec<String>> = v
                .iter()
                .map(|(u, (secs, accts))| {
                    vec![
                        cluster.clone(),
                        u.to_string(),
                        proper_name(u),
                        accts.join(","),
                        t.value(*secs, total),
                        t.value(0, 0),
                    ]
                })
                .collect();
            let title = format!("Top {count} Users");
            banner(&title, start, end, &usage_line(opts), opts) + &table(&cols, &rows, opts)
        }
        Report::SizesByAccount { groups } => sizes(opts, q, data, groups, start, end),
    }
}

/// `job SizesByAccount`: CPU time per account, bucketed by the job's CPU count.
fn sizes(
    opts: &Opts,
    q: &Query,
    data: &UsageReport,
    groups: &[u32],
    start: i64,
    end: i64,
) -> String {
    let t = opts.time;
    // Bucket bounds: [0, g0), [g0, g1), …, [glast, ∞).
    let mut bounds: Vec<u32> = vec![0];
    bounds.extend(groups.iter().copied().filter(|&g| g > 0));
    let names: Vec<String> = bounds
        .iter()
        .enumerate()
        .map(|(i, &lo)| match bounds.get(i + 1) {
            Some(&hi) => format!("{lo}-{} CPUs", hi - 1),
            None => format!(">= {lo} CPUs"),
        })
        .collect();
    let mut per: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in runs(&data.jobs, data.now) {
        let j = r.job;
        if (!q.users.is_empty() && !q.users.contains(&j.user))
            || (!q.accounts.is_empty() && !q.accounts.contains(&j.account))
        {
            continue;
        }
        let secs = u64::from(r.cpus) * overlap(r.t0, r.t1, start, end);
        if secs == 0 {
            continue;
        }
        let k = bounds.iter().rposition(|&lo| r.cpus >= lo).unwrap_or(0);
        per.entry(j.account.clone())
            .or_insert_with(|| vec![0; bounds.len()])[k] += secs;
    }
    let cluster_total: u64 = per.values().flatten().sum();
    let mut cols = vec![col("Cluster", 9), col("Account", 9)];
    for n in &names {
        cols.push(col(n, 13));
    }
    cols.push(col("% of cluster", 12));
    let rows: Vec<Vec<String>> = per
        .iter()
        .map(|(a, v)| {
            let acct_total: u64 = v.iter().sum();
            let mut row = vec![data.cluster.clone(), a.clone()];
            row.extend(v.iter().map(|&s| t.value(s, cluster_total)));
            row.push(format!(
                "{:.2}%",
                acct_total as f64 / cluster_total.max(1) as f64 * 100.0
            ));
            row
        })
        .collect();
    let unit = format!("Time reported in {}", t.name());
    let head = if opts.noheader {
        String::new()
    } else {
        format!(
            "{RULE}Job Sizes {} - {} ({} secs)\n{unit}\n{RULE}",
            fmt_ts(start),
            fmt_ts(end - 1),
            end - start
        )
    };
    head + &table(&cols, &rows, opts)
}

/// Entry point for `sreport`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if wants_help(&args) {
        print!("{}", help_text());
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "-V" || a == "--version") {
        println!("slurm {}", crate::config::advertised_slurm_version());
        return ExitCode::SUCCESS;
    }
    let time = |v: &str| super::timeparse::parse_time_local(v, true).ok();
    let (opts, q) = match parse(&args, &time) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let now = super::timefmt::now();
    let midnight = super::timeparse::midnight_today(now, &chrono::Local);
    let (start, end) = period(&q, now, midnight);
    let mut client = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("sreport: error: {e}");
            return ExitCode::from(1);
        }
    };
    match client.call(
        &Request::Usage { start, end },
        answer!(Response::Usage(data) => data),
    ) {
        Ok(data) => {
            print!("{}", render(&opts, &q, &data, start, end));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sreport: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobState;
    use crate::model::job::Allocation;
    use crate::model::reservation::{Reservation, ResvFlags};

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn job(user: &str, acct: &str, cpus: u32, t0: i64, t1: Option<i64>, resv: Option<&str>) -> Job {
        let mut j = Job {
            user: user.into(),
            account: acct.into(),
            state: if t1.is_some() {
                JobState::Completed
            } else {
                JobState::Running
            },
            start_time: Some(t0),
            end_time: t1,
            alloc: Some(Allocation {
                nodes: vec!["n1".into()],
                cpus: vec![cpus],
                ..Allocation::default()
            }),
            ..Job::default()
        };
        j.spec.reservation = resv.map(String::from);
        j
    }

    fn resv(name: &str, maint: bool, start: i64, end: i64) -> Reservation {
        Reservation {
            name: name.into(),
            start,
            end,
            nodes: vec!["n2".into()],
            cpus: 4,
            partition: None,
            users: vec![],
            accounts: vec!["acct2".into()],
            flags: ResvFlags {
                maint,
                ..ResvFlags::default()
            },
            idle_since: None,
            ..Default::default()
        }
    }

    /// 8 CPUs for an hour; jobs of 3600, 7200 (half in the period), 600 (running) and
    /// 1200 CPU-seconds (inside reservation r); maint holds 4 CPUs for 15 minutes, r
    /// holds 4 CPUs for 20 minutes.
    fn data() -> UsageReport {
        UsageReport {
            cluster: "c".into(),
            nodes: vec![("n1".into(), 4), ("n2".into(), 4)],
            jobs: vec![
                job("sr_alice", "acct1", 2, 0, Some(1800), None),
                job("sr_bob", "acct2", 4, 1800, Some(5400), None),
                job("sr_bob", "acct1", 1, 3000, None, None),
                job("sr_alice", "acct2", 2, 2400, Some(3000), Some("r")),
            ],
            resvs: vec![resv("maint", true, 0, 900), resv("r", false, 2400, 3600)],
            down: vec![],
            now: 4000,
            created: 0,
        }
    }

    #[test]
    fn nothing_is_reported_from_before_the_cluster_existed() {
        let mut d = data();
        let whole = utilization(&d, 0, 3600);
        assert_eq!(whole.total, 8 * 3600);
        d.created = 1800;
        let half = utilization(&d, 0, 3600);
        assert_eq!(half.total, 8 * 1800);
        assert_eq!(
            half.alloc + half.down + half.pdown + half.idle + half.plan,
            half.total
        );
        d.created = 7200;
        assert_eq!(utilization(&d, 0, 3600).total, 0);
    }

    fn report(args: &str) -> String {
        let (o, q) = parse(&w(args), &|v| v.parse().ok()).unwrap();
        render(&o, &q, &data(), 0, 3600)
    }

    #[test]
    fn utilization_numbers_in_each_time_format() {
        let u = utilization(&data(), 0, 3600);
        assert_eq!(
            u,
            Util {
                alloc: 12600,
                down: 0,
                pdown: 3600,
                idle: 9000,
                plan: 3600,
                total: 28800
            }
        );
        assert_eq!(
            report("-n -P -t s cluster utilization"),
            "c|12600|0|3600|9000|3600|28800\n"
        );
        assert_eq!(
            report("-n -P cluster utilization"),
            "c|210|0|60|150|60|480\n"
        );
        assert_eq!(
            report("-n -p -t percent cluster utilization"),
            "c|43.75%|0.00%|12.50%|31.25%|12.50%|100.00%|\n"
        );
        assert_eq!(
            report("-n -P -t hourper cluster utilization"),
            "c|4(43.75%)|0(0.00%)|1(12.50%)|2(31.25%)|1(12.50%)|8(100.00%)\n"
        );
        // Hours as printf's %.0lf rounds them: 3.5 -> 4, 2.5 -> 2 (to even).
        assert_eq!(
            report("-n -P -t hours cluster utilization"),
            "c|4|0|1|2|1|8\n"
        );
        assert_eq!(
            report("-n -P -t minper cluster utilization"),
            "c|210(43.75%)|0(0.00%)|60(12.50%)|150(31.25%)|60(12.50%)|480(100.00%)\n"
        );
    }

    #[test]
    fn down_nodes_count_as_down() {
        let mut d = data();
        // n1 (4 CPUs) down for 5 minutes, partly before the period.
        d.down = vec![("n1".into(), -100, 200), ("zz".into(), 0, 3600)];
        let u = utilization(&d, 0, 3600);
        assert_eq!((u.alloc, u.down, u.idle), (12600, 800, 8200));
        assert_eq!(u.reported(), 28800);
    }

    #[test]
    fn utilization_layout() {
        let out = report("cluster Utilization");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "-".repeat(80));
        assert!(lines[1].starts_with("Cluster Utilization "), "{out}");
        assert!(lines[1].ends_with(" (3600 secs)"), "{out}");
        assert_eq!(lines[2], "Usage reported in CPU Minutes");
        assert_eq!(lines[3], "-".repeat(80));
        assert_eq!(
            lines[4],
            "  Cluster Allocate     Down PLND Dow     Idle  Planned Reported "
        );
        assert_eq!(
            lines[5],
            "--------- -------- -------- -------- -------- -------- -------- "
        );
        assert_eq!(
            lines[6],
            "        c      210        0       60      150       60      480 "
        );
        let pct = report("-t percent cluster Utilization");
        assert!(
            pct.contains("\nUsage reported in Percentage of Total\n"),
            "{pct}"
        );
    }

    #[test]
    fn account_and_user_reports() {
        assert_eq!(
            report("-n -P -t s cluster AccountUtilizationByUser"),
            "c|root|||12600|0\n\
             c|acct1|||4200|0\n\
             c|acct1|sr_alice||3600|0\n\
             c|acct1|sr_bob||600|0\n\
             c|acct2|||8400|0\n\
             c|acct2|sr_alice||1200|0\n\
             c|acct2|sr_bob||7200|0\n"
        );
        assert_eq!(
            report("-n -P -t s cluster UserUtilizationByAccount"),
            "c|sr_bob||acct2|7200|0\nc|sr_alice||acct1|3600|0\nc|sr_alice||acct2|1200|0\nc|sr_bob||acct1|600|0\n"
        );
        assert_eq!(
            report("-n -P -t s user TopUsage"),
            "c|sr_bob||acct1,acct2|7800|0\nc|sr_alice||acct1,acct2|4800|0\n"
        );
        assert_eq!(
            report("-n -P -t s user top topcount=1 users=sr_alice"),
            "c|sr_alice||acct1,acct2|4800|0\n"
        );
        let head = report("-P cluster AccountUtilizationByUser accounts=acct1");
        assert!(head.contains("Cluster/Account/User Utilization "), "{head}");
        assert!(
            head.ends_with("Cluster|Account|Login|Proper Name|Used|Energy\nc|root|||70|0\nc|acct1|||70|0\nc|acct1|sr_alice||60|0\nc|acct1|sr_bob||10|0\n"),
            "{head}"
        );
    }

    #[test]
    fn job_sizes_by_account() {
        assert_eq!(
            report("-n -P -t s job SizesByAccount"),
            "c|acct1|4200|0|0|0|0|33.33%\nc|acct2|8400|0|0|0|0|66.67%\n"
        );
        let out = report("-t s job SizesByAccount grouping=2");
        assert!(out.contains("\nTime reported in Seconds\n"), "{out}");
        assert!(
            out.contains("  Cluster   Account      0-1 CPUs     >= 2 CPUs % of cluster \n"),
            "{out}"
        );
        assert!(
            out.contains("        c     acct1           600          3600       33.33% \n"),
            "{out}"
        );
    }

    #[test]
    fn bad_arguments() {
        let e = |s: &str| parse(&w(s), &|v| v.parse().ok()).unwrap_err();
        assert_eq!(
            e("-t bogus cluster utilization"),
            "unknown time format bogus"
        );
        assert!(e("cluster nothing").starts_with("Not valid report nothing"));
        assert_eq!(
            e("cluster utilization color=red"),
            " Unknown condition: color=red\nUse keyword set to modify value"
        );
        assert_eq!(
            e("cluster utilization start=x"),
            "Invalid time specification: x"
        );
    }

    #[test]
    fn default_period_is_yesterday() {
        let (_, q) = parse(&w("cluster utilization"), &|v| v.parse().ok()).unwrap();
        assert_eq!(period(&q, 100_000, 86_400), (0, 86_400));
        let (_, q) = parse(&w("cluster utilization start=10 end=999999"), &|v| {
            v.parse().ok()
        })
        .unwrap();
        assert_eq!(period(&q, 5000, 86_400), (10, 5000));
    }
}
