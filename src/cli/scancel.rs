//! `scancel`: cancel or signal jobs by id or by filter. The twin of src/scancel/
//! (`opt.c` for the options, `scancel.c` for what is reported).
//!
//! Shape: argv → [`Opts`] (pure, Slurm's error texts) → one `Request::Cancel` →
//! [`report`] turns the per-job results into Slurm's output. As in current Slurm, a job
//! that is unknown or already finished is not an error (silent, exit 0) unless `-v`.

use super::client::{CallError, Client, ClientError, answer};
use super::getopt::{self, Item, opt};
use super::help;
use super::jobid::parse_job_id;
use crate::model::JobState;
use crate::proto::{ArrayTasks, JobFilter, JobResult, Request, Response, SlurmError};
use std::ffi::OsString;
use std::process::ExitCode;

/// scancel's options (getopt table): what [`getopt::parse`] accepts, `--help` lists, and
/// the man page and completions are generated from (`cli::docs`).
pub const SPECS: &[getopt::OptSpec] = &[
    opt("account", Some('A'), true).doc("account", "act only on jobs charging this account"),
    opt("batch", Some('b'), false).doc("", "signal the batch shell only, not its steps"),
    opt("full", Some('f'), false).doc("", "signal the batch shell and every step"),
    opt("hurry", Some('H'), false).doc(
        "",
        "accepted for compatibility; no burst buffer to stage out",
    ),
    opt("clusters", Some('M'), true).doc("cluster", "cluster whose jobs to act on (this one only)"),
    opt("cluster", None, true),
    opt("name", Some('n'), true).doc("job_name", "act only on jobs with this name"),
    opt("jobname", None, true),
    opt("partition", Some('p'), true).doc("partition", "act only on jobs in this partition"),
    opt("qos", Some('q'), true).doc("qos", "act only on jobs with this quality of service"),
    opt("quiet", Some('Q'), false).doc("", "print no error messages"),
    opt("reservation", Some('R'), true).doc("reservation", "act only on jobs in this reservation"),
    opt("signal", Some('s'), true).doc(
        "signal",
        "send this signal (name or number) instead of cancelling",
    ),
    opt("state", Some('t'), true).doc(
        "state",
        "act only on jobs in this state (PENDING, RUNNING, SUSPENDED)",
    ),
    opt("user", Some('u'), true).doc("user_name", "act only on jobs of this user"),
    opt("me", None, false).doc("", "act only on jobs of the calling user"),
    opt("verbose", Some('v'), false).doc("", "say what is done, and report unknown or ended jobs"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
    opt("nodelist", Some('w'), true).doc("hosts", "act only on jobs using these nodes"),
    opt("wckey", None, true).doc(
        "wckey",
        "act only on jobs with this workload characterization key",
    ),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("usage", None, false).doc("", "display a brief usage message"),
];

/// Parsed scancel options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    /// Plain job ids given as operands (an array's id names the whole array).
    pub ids: Vec<u32>,
    /// `N_i` / `N_[expr]` operands.
    pub array_tasks: Vec<ArrayTasks>,
    /// `L+k` operands (one component of a heterogeneous job).
    pub het_components: Vec<crate::proto::HetComponent>,
    /// `-u`/`--me`, as uids.
    pub users: Vec<u32>,
    /// `-t`.
    pub states: Vec<JobState>,
    /// `-p`.
    pub partitions: Vec<String>,
    /// `-n/--name`.
    pub names: Vec<String>,
    /// `-A/--account`.
    pub accounts: Vec<String>,
    /// `-q/--qos`.
    pub qos: Vec<String>,
    /// `-w/--nodelist`, expanded.
    pub nodes: Vec<String>,
    /// `-s`: signal number; `None` cancels.
    pub signal: Option<i32>,
    /// `-b`: signal only the batch shell (not its children, not the steps).
    pub batch: bool,
    /// `-f`: signal the batch shell, its children and every step.
    pub full: bool,
    /// `-v`: say what is done, and report unknown or finished jobs.
    pub verbose: bool,
    /// `-Q`: no error messages.
    pub quiet: bool,
    /// `-M/--clusters`: must name this cluster (or `all`).
    pub clusters: Option<String>,
    /// `-V`, `-h`: print and exit.
    pub version: bool,
    pub help: bool,
    /// `--usage`: print the brief usage and exit.
    pub usage: bool,
    /// Numbered steps given as `JOB.STEP` operands.
    pub steps: Vec<(u32, u32)>,
    /// Steps of heterogeneous job components given as `L+k.STEP` operands.
    pub het_steps: Vec<(crate::proto::HetComponent, u32)>,
}

/// Signal names as `kill -l` spells them (without `SIG`), by number.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("POLL", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// Parses a signal as scancel accepts it: `TERM`, `SIGTERM`, `term`, or a number.
pub fn parse_signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let u = s.to_ascii_uppercase();
    let name = u.strip_prefix("SIG").unwrap_or(&u);
    SIGNALS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Resolves `-u` entries (names or uids) with `lookup`.
fn resolve_users(
    list: &str,
    lookup: &dyn Fn(&str) -> Option<u32>,
    out: &mut Vec<u32>,
) -> Result<(), String> {
    for u in list.split(',').filter(|u| !u.is_empty()) {
        let uid = u.parse::<u32>().ok().or_else(|| lookup(u));
        match uid {
            Some(id) => out.push(id),
            None => return Err(format!("scancel: error: Invalid user name: {u}")),
        }
    }
    Ok(())
}

/// Parses argv (without argv[0]). `my_uid` serves `--me`; `lookup` maps user names.
///
/// Errors: Slurm's text for bad options, ids, signals, users or states.
pub fn parse_args(
    args: &[String],
    my_uid: u32,
    lookup: &dyn Fn(&str) -> Option<u32>,
) -> Result<Opts, String> {
    let mut o = Opts::default();
    let mut filtered = false;
    for item in getopt::parse("scancel", SPECS, args)? {
        match item {
            Item::Operand(a) => {
                for part in a.split(',').filter(|p| !p.is_empty()) {
                    match parse_job_id(part) {
                        Some(s) if s.is_plain() => o.ids.push(s.job),
                        Some(crate::cli::jobid::JobIdSpec {
                            job,
                            array: None,
                            het: None,
                            step: Some(crate::cli::jobid::StepSel::Num(n)),
                        }) => o.steps.push((job, n)),
                        Some(s) if s.step.is_none() && s.het.is_none() => match s.array_tasks() {
                            Some(t) => o.array_tasks.push(t),
                            None => {
                                return Err(format!("scancel: error: Invalid job id {part}"));
                            }
                        },
                        Some(crate::cli::jobid::JobIdSpec {
                            job,
                            array: None,
                            het: Some(k),
                            step: None,
                        }) => o.het_components.push(crate::proto::HetComponent {
                            leader: job,
                            offset: k,
                        }),
                        Some(crate::cli::jobid::JobIdSpec {
                            job,
                            array: None,
                            het: Some(k),
                            step: Some(crate::cli::jobid::StepSel::Num(n)),
                        }) => o.het_steps.push((
                            crate::proto::HetComponent {
                                leader: job,
                                offset: k,
                            },
                            n,
                        )),
                        Some(_) => {
                            return Err(format!(
                                "scancel: error: steps of array tasks, and the batch or extern step of a het component, are not supported yet by sluice: {part}"
                            ));
                        }
                        None => return Err(format!("scancel: error: Invalid job id {part}")),
                    }
                }
            }
            Item::Opt(name, v) => {
                let v = v.unwrap_or_default();
                match name {
                    "batch" => o.batch = true,
                    "full" => o.full = true,
                    "verbose" => o.verbose = true,
                    "quiet" => o.quiet = true,
                    "version" => o.version = true,
                    "help" => o.help = true,
                    "usage" => o.usage = true,
                    "clusters" | "cluster" => o.clusters = Some(v),
                    "hurry" => {}
                    "me" => {
                        o.users.push(my_uid);
                        filtered = true;
                    }
                    "user" => {
                        resolve_users(&v, lookup, &mut o.users)?;
                        filtered = true;
                    }
                    "signal" => match parse_signal(&v) {
                        Some(n) => o.signal = Some(n),
                        None => return Err(format!("scancel: error: Invalid job signal: {v}")),
                    },
                    "state" => {
                        for s in v.split(',').filter(|s| !s.is_empty()) {
                            match JobState::parse(s) {
                                Some(st) => o.states.push(st),
                                None => {
                                    return Err(format!(
                                        "scancel: error: Invalid job state specified: {s}"
                                    ));
                                }
                            }
                        }
                        filtered = true;
                    }
                    "partition" => {
                        o.partitions
                            .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
                        filtered = true;
                    }
                    "name" | "jobname" => {
                        o.names
                            .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
                        filtered = true;
                    }
                    "account" => {
                        o.accounts
                            .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
                        filtered = true;
                    }
                    "qos" => {
                        o.qos
                            .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
                        filtered = true;
                    }
                    "nodelist" => {
                        match crate::model::hostlist::expand(&v) {
                            Ok(names) => o.nodes.extend(names),
                            Err(_) => {
                                return Err(format!("scancel: error: Invalid node list: {v}"));
                            }
                        }
                        filtered = true;
                    }
                    "reservation" | "wckey" => {
                        return Err(format!(
                            "scancel: error: --{name} is not supported yet by sluice"
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    if o.ids.is_empty()
        && o.array_tasks.is_empty()
        && o.het_components.is_empty()
        && o.steps.is_empty()
        && o.het_steps.is_empty()
        && !filtered
        && !o.version
        && !o.help
        && !o.usage
    {
        return Err("scancel: error: No job identification provided".into());
    }
    Ok(o)
}

/// The one request scancel sends for `o`.
pub fn request_for(o: &Opts) -> Request {
    Request::Cancel {
        filter: JobFilter {
            ids: o.ids.clone(),
            users: o.users.clone(),
            states: o.states.clone(),
            partitions: o.partitions.clone(),
            names: o.names.clone(),
            array_tasks: o.array_tasks.clone(),
            active_only: false,
            accounts: o.accounts.clone(),
            qos: o.qos.clone(),
            nodes: o.nodes.clone(),
            het_components: o.het_components.clone(),
            ..JobFilter::default()
        },
        signal: o.signal,
        batch_only: o.batch && !o.full,
        full: o.full,
    }
}

/// Turns the controller's per-job results into scancel's stderr and exit status.
/// Unknown and finished jobs are reported only with `-v`, and never fail the command.
pub fn report(o: &Opts, results: &[JobResult]) -> (String, u8) {
    let mut err = String::new();
    let mut code = 0;
    for r in results {
        if o.verbose {
            match o.signal {
                Some(sig) => err.push_str(&format!("scancel: Signal {sig} to job {}\n", r.label())),
                None => err.push_str(&format!("scancel: Terminating job {}\n", r.label())),
            }
        }
        let Some(e) = &r.error else { continue };
        let benign = matches!(e, SlurmError::InvalidJobId | SlurmError::AlreadyDone);
        if !benign {
            code = 1;
        }
        if (o.verbose || !benign) && !o.quiet {
            err.push_str(&format!(
                "scancel: error: Kill job error on job id {}: {e}\n",
                r.label()
            ));
        }
    }
    (err, code)
}

/// Maps the controller's answer to per-job results (a whole-request error applies to
/// every id asked for).
pub fn results_of(o: &Opts, resp: Response) -> Result<Vec<JobResult>, String> {
    let reply = super::client::expect(
        Ok(resp),
        answer!(Response::Results(rs) => rs, Response::Ok => Vec::new()),
    );
    match reply {
        Ok(rs) => Ok(rs),
        Err(CallError::Slurm(e)) if !o.ids.is_empty() => Ok(o
            .ids
            .iter()
            .map(|&id| JobResult::new(id, Some(e.clone())))
            .collect()),
        Err(e) => Err(format!("scancel: error: {e}")),
    }
}

fn lookup_user(name: &str) -> Option<u32> {
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// The operands scancel takes, for its help texts.
const OPERANDS: &str = "[job_id[_array_id][.step_id]]";

/// Runs `scancel` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let me = nix::unistd::getuid().as_raw();
    let o = match parse_args(&args, me, &lookup_user) {
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
    if o.help {
        let synopsis = format!("scancel [OPTIONS] {OPERANDS}");
        print!("{}", help::help(&synopsis, &help::from_getopt(SPECS), ""));
        return ExitCode::SUCCESS;
    }
    if o.usage {
        print!(
            "{}",
            help::usage("scancel", &help::from_getopt(SPECS), OPERANDS)
        );
        return ExitCode::SUCCESS;
    }
    // Another cluster's jobs are not ours to cancel: refuse before any request.
    let asked = o
        .clusters
        .clone()
        .map(|l| (l, false))
        .or_else(|| super::squeue::clusters_asked(None));
    if let Some((list, from_env)) = asked {
        let ours = crate::config::Config::load()
            .map(|c| c.cluster_name)
            .unwrap_or_default();
        if let Err(m) = super::client::check_clusters(&list, from_env, &ours) {
            eprintln!("scancel: error: {m}");
            return ExitCode::from(1);
        }
    }
    let mut step_results = Vec::new();
    if !o.steps.is_empty() || !o.het_steps.is_empty() {
        let r = Client::connect().and_then(|(mut c, _)| {
            c.request(&Request::CancelSteps {
                steps: o.steps.clone(),
                signal: o.signal,
                het_steps: o.het_steps.clone(),
            })
        });
        match r {
            Ok(Response::Results(rs)) => step_results = rs,
            Ok(Response::Error(e)) => {
                eprintln!("scancel: error: {e}");
                return ExitCode::from(1);
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("scancel: error: {e}");
                return ExitCode::from(1);
            }
        }
        if o.ids.is_empty()
            && o.array_tasks.is_empty()
            && o.het_components.is_empty()
            && o.users.is_empty()
            && o.names.is_empty()
            && o.states.is_empty()
            && o.partitions.is_empty()
        {
            let (err, code) = report(&o, &step_results);
            eprint!("{err}");
            return ExitCode::from(code);
        }
    }
    let resp = Client::connect().and_then(|(mut c, _)| c.request(&request_for(&o)));
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            eprintln!("scancel: error: {e}");
            if let Some(h) = ClientError::hint(&e) {
                eprintln!("{h}");
            }
            return ExitCode::from(1);
        }
    };
    match results_of(&o, resp) {
        Ok(mut rs) => {
            rs.extend(step_results);
            let (err, code) = report(&o, &rs);
            eprint!("{err}");
            ExitCode::from(code)
        }
        Err(m) => {
            eprintln!("{m}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(n: &str) -> Option<u32> {
        (n == "alice").then_some(2001)
    }

    fn p(s: &str) -> Result<Opts, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse_args(&v, 2001, &lookup)
    }

    #[test]
    fn ids_and_options_in_any_order() {
        let o = p("172 169 --signal=USR1 -b 180,181").unwrap();
        assert_eq!(o.ids, vec![172, 169, 180, 181]);
        assert_eq!(o.signal, Some(10));
        assert!(o.batch);
        assert_eq!(
            request_for(&o),
            Request::Cancel {
                filter: JobFilter {
                    ids: vec![172, 169, 180, 181],
                    ..JobFilter::default()
                },
                signal: Some(10),
                batch_only: true,
                full: false,
            }
        );
        let o = p("-u alice -t PENDING -n later").unwrap();
        assert_eq!(o.users, vec![2001]);
        assert_eq!(o.states, vec![JobState::Pending]);
        assert_eq!(o.names, vec!["later".to_string()]);
        assert!(o.ids.is_empty());
        let o = p("--me --name=x -p debug").unwrap();
        assert_eq!(o.users, vec![2001]);
        assert_eq!(o.partitions, vec!["debug".to_string()]);
        assert_eq!(p("-u 3000").unwrap().users, vec![3000]);
        // Steps: `N.S`, and `L+k.S` for a heterogeneous job's component.
        let o = p("5.0 7+1.2").unwrap();
        assert_eq!(o.steps, vec![(5, 0)]);
        let hc = crate::proto::HetComponent {
            leader: 7,
            offset: 1,
        };
        assert_eq!(o.het_steps, vec![(hc, 2)]);
        assert!(p("7+1.batch").unwrap_err().contains("not supported yet"));
    }

    #[test]
    fn signals() {
        for (s, n) in [
            ("TERM", 15),
            ("SIGTERM", 15),
            ("term", 15),
            ("USR2", 12),
            ("KILL", 9),
            ("10", 10),
        ] {
            assert_eq!(parse_signal(s), Some(n), "{s}");
        }
        assert_eq!(parse_signal("BOGUS"), None);
        assert_eq!(parse_signal("0"), None);
        assert_eq!(
            p("-s BOGUS 5").unwrap_err(),
            "scancel: error: Invalid job signal: BOGUS"
        );
    }

    #[test]
    fn bad_input_matches_slurm() {
        assert_eq!(p("abc").unwrap_err(), "scancel: error: Invalid job id abc");
        assert_eq!(p("0").unwrap_err(), "scancel: error: Invalid job id 0");
        assert_eq!(
            p("").unwrap_err(),
            "scancel: error: No job identification provided"
        );
        assert_eq!(
            p("-v").unwrap_err(),
            "scancel: error: No job identification provided"
        );
        assert_eq!(
            p("-u nosuch").unwrap_err(),
            "scancel: error: Invalid user name: nosuch"
        );
        assert!(
            p("--bogus 5")
                .unwrap_err()
                .starts_with("scancel: unrecognized option '--bogus'")
        );
    }

    #[test]
    fn unknown_or_finished_jobs_are_silent_unless_verbose() {
        let rs = vec![
            JobResult::new(999999, Some(SlurmError::InvalidJobId)),
            JobResult::new(169, Some(SlurmError::AlreadyDone)),
        ];
        let o = p("999999 169").unwrap();
        assert_eq!(report(&o, &rs), (String::new(), 0));
        let o = p("-v 999999").unwrap();
        assert_eq!(
            report(&o, &rs[..1]),
            (
                "scancel: Terminating job 999999\n\
                 scancel: error: Kill job error on job id 999999: Invalid job id specified\n"
                    .to_string(),
                0
            )
        );
        let ok = vec![JobResult::new(168, None)];
        assert_eq!(
            report(&p("-v 168").unwrap(), &ok),
            ("scancel: Terminating job 168\n".to_string(), 0)
        );
        assert_eq!(report(&p("168").unwrap(), &ok), (String::new(), 0));
    }

    #[test]
    fn other_errors_fail() {
        let rs = vec![JobResult::new(175, Some(SlurmError::AccessDenied))];
        let o = p("175").unwrap();
        assert_eq!(
            report(&o, &rs),
            (
                "scancel: error: Kill job error on job id 175: Access/permission denied\n"
                    .to_string(),
                1
            )
        );
        assert_eq!(report(&p("-Q 175").unwrap(), &rs), (String::new(), 1));
        // A whole-request error becomes one result per id.
        let rs = results_of(&o, Response::Error(SlurmError::InvalidJobId)).unwrap();
        assert_eq!(rs[0].id, 175);
        assert_eq!(report(&o, &rs).1, 0);
    }
}
