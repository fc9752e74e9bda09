//! `scontrol`: show jobs, nodes, partitions and the configuration; hostlist helpers;
//! hold/release/requeue and updates of jobs and nodes. The twin of src/scontrol/
//! (`scontrol.c` for the keyword table, `info_job.c`/`info_node.c`/`info_part.c` for
//! the record layouts, `update_job.c`/`update_node.c` for updates).
//!
//! Shape: argv → [`Opts`] + [`Command`] (pure parsing, Slurm's error texts) →
//! [`execute`] with a request function (so tests fake the controller) → [`Output`].
//! Record layouts are pure functions of a model value and `now`. Commands that need
//! no controller (`show hostnames`, `show hostlist*`) never call the request function.

use super::client::{self, CallError, Client, ClientError, answer};
use super::getopt::{self, Item, OptSpec, opt};
use super::help;
use super::jobfmt::{self, Stream};
use super::jobid::parse_job_id;
use super::slurmjson::{self, J};
use super::timefmt::fmt_ts;
use crate::jobspec::units::parse_time_limit;
use crate::model::{Job, JobState, MemReq, Node, Partition, Reason, TimeLimit, hostlist};
use crate::proto::{ArrayTasks, JobFilter, JobResult, JobUpdate, NodeUpdate, Request, Response};
use std::ffi::OsString;
use std::process::ExitCode;

/// Global options (they may appear anywhere before the command's own arguments).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    /// `-o/--oneliner`: one line per record.
    pub oneliner: bool,
    /// `-d/--details`: extra fields (DerivedExitCode).
    pub details: bool,
    /// `-M/--clusters`: accepted; sluice has one cluster.
    pub cluster: Option<String>,
    /// `-Q/--quiet`: no error messages for hold/release and the like.
    pub quiet: bool,
    /// `--json`: `show job` prints OpenAPI v0.0.38 job objects (`cli::jobjson`).
    pub json: bool,
}

/// What to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Show {
    Job(Option<String>),
    Node(Option<String>),
    Partition(Option<String>),
    Config,
    /// `show hostnames [list]`; `None` = `$SLURM_NODELIST`.
    Hostnames(Option<String>),
    Hostlist(String),
    HostlistSorted(String),
    /// `show step [JOB[.STEP]]`: running steps.
    Step(Option<String>),
    /// `show reservation [NAME]`.
    Reservation(Option<String>),
    /// `show licenses [NAME]`.
    Licenses(Option<String>),
    /// `show topology [SWITCH|BLOCK|NODE]`.
    Topology(Option<String>),
}

/// One scontrol command, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Show(Show),
    /// `hold` (`user: false`) and `uhold` (`user: true`).
    Hold {
        ids: Vec<String>,
        user: bool,
    },
    Release(Vec<String>),
    Requeue {
        ids: Vec<String>,
        hold: bool,
    },
    /// `suspend` (`resume: false`) and `resume` (`resume: true`).
    Suspend {
        ids: Vec<String>,
        resume: bool,
    },
    UpdateJob {
        id: String,
        updates: Vec<JobUpdate>,
    },
    UpdateNode {
        names: Vec<String>,
        update: NodeUpdate,
    },
    Ping,
    Version,
    /// `reconfigure`: the controller reads its config file again.
    Reconfigure,
    /// `create reservation …` (see `scontrol_resv`).
    CreateResv(crate::model::reservation::ResvSpec),
    /// `update ReservationName=…`.
    UpdateResv(crate::model::reservation::ResvSpec),
    /// `delete ReservationName=NAME`.
    DeleteResv(String),
    /// `write batch_script JOB [FILE|-]`: the job's script into FILE (default
    /// `slurm-JOB.sh`) or, with `-`, to standard output.
    WriteBatchScript {
        job: String,
        file: Option<String>,
    },
    /// `setdebug LEVEL`: the controller's log level.
    SetDebug(String),
    /// `top JOBID[,JOBID…]`: these pending jobs first in their user's queue (see
    /// `scontrol_top`).
    Top(Vec<u32>),
    /// `listpids [JOBID[.STEPID]|*] [NODENAME]`: processes of this node's steps (see
    /// `scontrol_listpids`; NODENAME is accepted: this node is the only one listed).
    ListPids(super::scontrol_listpids::Which),
    /// `reboot [ASAP] [nextstate=RESUME|DOWN] [reason=…] NODES|ALL`: nodes rebooted
    /// through RebootProgram once idle (`nodes` empty: ALL).
    Reboot {
        nodes: Vec<String>,
        asap: bool,
        next_down: bool,
        reason: Option<String>,
    },
    /// `cancel_reboot NODES`: forget reboots not yet issued.
    CancelReboot(Vec<String>),
}

/// What a command prints and its exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Text for standard output.
    pub stdout: String,
    /// Text for standard error.
    pub stderr: String,
    /// Exit status.
    pub code: u8,
}

impl Output {
    fn ok(stdout: String) -> Output {
        Output {
            stdout,
            ..Output::default()
        }
    }
    fn err(stderr: String) -> Output {
        Output {
            stderr,
            code: 1,
            ..Output::default()
        }
    }
}

/// Case-insensitive keyword match allowing abbreviations of at least `min` characters.
fn abbrev(word: &str, keyword: &str, min: usize) -> bool {
    let w = word.to_ascii_lowercase();
    w.len() >= min.min(keyword.len()) && keyword.starts_with(&w)
}

/// scontrol's options (cf. src/scontrol/scontrol.c), with their `--help` lines.
pub const SPECS: &[OptSpec] = &[
    opt("all", Some('a'), false).doc("", "accepted: every partition is shown anyway"),
    opt("details", Some('d'), false).doc("", "more detail in show output"),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("json", None, false).doc("", "show output as JSON"),
    opt("clusters", Some('M'), true).doc("cluster", "cluster to act on (this one only)"),
    opt("cluster", None, true),
    opt("oneliner", Some('o'), false).doc("", "print each record on one line"),
    opt("quiet", Some('Q'), false).doc("", "print no error messages"),
    opt("usage", None, false).doc("", "same as --help"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// The commands scontrol takes (the keywords [`parse_command`] knows, each with what
/// it does), for `--help` and `scontrol help`.
pub const COMMANDS: &[(&str, &str)] = &[
    ("cancel_reboot <nodes>", "cancel a reboot not yet begun"),
    ("create reservation <SPECS>", "create a reservation"),
    ("delete ReservationName=<name>", "delete a reservation"),
    ("help", "show this help message"),
    (
        "hold <job_list>",
        "hold jobs (administrator hold for operators)",
    ),
    (
        "listpids [<job_id>[.<step_id>]]",
        "list the processes of this node's job steps",
    ),
    ("ping", "say whether the controller responds"),
    (
        "reconfigure",
        "make the controller read its configuration again",
    ),
    (
        "reboot [ASAP] [nextstate=..] [reason=..] <ALL|nodes>",
        "reboot nodes through RebootProgram (refused when none is configured)",
    ),
    ("release <job_list>", "release held jobs"),
    ("requeue <job_list>", "requeue batch jobs"),
    ("requeuehold <job_list>", "requeue batch jobs and hold them"),
    ("resume <job_list>", "resume suspended jobs"),
    (
        "setdebug <level>",
        "set the controller's log level (quiet, fatal, error, info, verbose, debug, …)",
    ),
    (
        "show <ENTITY> [<ID>]",
        "show entities: config, job, node, partition, reservation, step, licenses, topology, hostlist, hostlistsorted, hostnames",
    ),
    ("suspend <job_list>", "suspend running jobs"),
    (
        "top <job_list>",
        "move pending jobs ahead of their user's other jobs",
    ),
    ("uhold <job_list>", "hold jobs (user hold)"),
    (
        "update <SPECS>",
        "update a job, node or reservation (JobId=, NodeName=, ReservationName=)",
    ),
    ("version", "print the Slurm version"),
    (
        "write batch_script <job_id> [<file>|-]",
        "write a job's batch script to a file (default slurm-<job_id>.sh)",
    ),
];

/// The `--help` text: the options, then [`COMMANDS`].
pub fn help_text() -> String {
    let mut commands = String::from("Commands:\n");
    for (c, what) in COMMANDS {
        commands.push_str(&help::line_with(c, what));
    }
    commands.push_str(
        "\nKeywords may be abbreviated (sh job). Without a command scontrol would read\n\
         commands interactively, which sluice does not support.\n",
    );
    help::help(
        "scontrol [OPTIONS] [COMMAND]",
        &help::from_getopt(SPECS),
        &commands,
    )
}

/// Splits argv (without argv[0]) into global options and command words; `--help`,
/// `-h` and `--usage` become the `help` command, `-V` the `version` command.
///
/// Errors: an unknown option, or `-M` without a value, as getopt's text.
pub fn parse_args(args: &[String]) -> Result<(Opts, Vec<String>), String> {
    let mut opts = Opts::default();
    let mut words = Vec::new();
    let mut special = None;
    for item in getopt::parse("scontrol", SPECS, args)? {
        match item {
            Item::Operand(w) => words.push(w),
            Item::Opt(name, v) => match name {
                "oneliner" => opts.oneliner = true,
                "details" => opts.details = true,
                "quiet" => opts.quiet = true,
                "json" => opts.json = true,
                "clusters" | "cluster" => opts.cluster = v,
                "version" => special = special.or(Some("version")),
                "help" | "usage" => special = special.or(Some("help")),
                // -v, -a: no effect.
                _ => {}
            },
        }
    }
    if let Some(w) = special {
        words = vec![w.to_string()];
    }
    Ok((opts, words))
}

/// Parses the command words (`show job 12`, `update JobId=12 TimeLimit=5`, …).
///
/// Errors: Slurm's message for an unknown keyword, a missing argument, or a bad update.
/// `reboot [ASAP] [nextstate=RESUME|DOWN] [reason=…] ALL|NODES` (cf. scontrol.c's
/// reboot_nodes keyword): options in any order, the node list (or ALL) once.
fn parse_reboot(rest: &[String]) -> Result<Command, String> {
    if rest.is_empty() {
        return Err("too few arguments for keyword:reboot".into());
    }
    let (mut asap, mut next_down, mut reason, mut nodes) = (false, false, None, None);
    for w in rest {
        let (k, v) = match w.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (w.as_str(), None),
        };
        match (k.to_ascii_lowercase().as_str(), v) {
            ("asap", None) => asap = true,
            (k, Some(v)) if abbrev(k, "nextstate", 3) => {
                next_down = match v.to_ascii_uppercase().as_str() {
                    "RESUME" => false,
                    "DOWN" => true,
                    _ => {
                        return Err(format!(
                            "Invalid value for nextstate: {v}. Valid options are: RESUME DOWN"
                        ));
                    }
                }
            }
            (k, Some(v)) if abbrev(k, "reason", 3) => reason = Some(v.to_string()),
            (_, Some(_)) => return Err(format!("Invalid input: {w}")),
            (_, None) if nodes.is_some() => {
                return Err(format!("Node list given twice: {w}"));
            }
            ("all", None) => nodes = Some(Vec::new()),
            (_, None) => {
                let names =
                    hostlist::expand(w).map_err(|_| format!("Invalid node name specified: {w}"))?;
                nodes = Some(names);
            }
        }
    }
    let Some(nodes) = nodes else {
        return Err(
            "Missing node list. Specify ALL|<NodeList> to reboot all nodes or the given nodes."
                .into(),
        );
    };
    Ok(Command::Reboot {
        nodes,
        asap,
        next_down,
        reason,
    })
}

pub fn parse_command(words: &[String]) -> Result<Command, String> {
    let Some(first) = words.first() else {
        return Err(
            "scontrol: error: no command given (interactive mode is not supported by sluice)"
                .into(),
        );
    };
    let rest = &words[1..];
    let w = first.as_str();
    if abbrev(w, "show", 3) {
        return parse_show(rest);
    }
    if abbrev(w, "uhold", 2) {
        return Ok(Command::Hold {
            ids: job_args(rest, "uhold")?,
            user: true,
        });
    }
    if abbrev(w, "hold", 2) {
        return Ok(Command::Hold {
            ids: job_args(rest, "hold")?,
            user: false,
        });
    }
    if abbrev(w, "release", 3) {
        return Ok(Command::Release(job_args(rest, "release")?));
    }
    if abbrev(w, "requeuehold", 8) {
        return Ok(Command::Requeue {
            ids: job_args(rest, "requeuehold")?,
            hold: true,
        });
    }
    if abbrev(w, "requeue", 3) {
        return Ok(Command::Requeue {
            ids: job_args(rest, "requeue")?,
            hold: false,
        });
    }
    if abbrev(w, "suspend", 2) {
        return Ok(Command::Suspend {
            ids: job_args(rest, "suspend")?,
            resume: false,
        });
    }
    if abbrev(w, "resume", 3) {
        return Ok(Command::Suspend {
            ids: job_args(rest, "resume")?,
            resume: true,
        });
    }
    if abbrev(w, "update", 1) {
        return parse_update(rest);
    }
    if abbrev(w, "create", 2) {
        return match rest.first() {
            Some(e) if abbrev(e, "reservation", 3) => super::scontrol_resv::parse(
                &rest[1..],
                super::scontrol_resv::Mode::Create,
                &resv_time,
            )
            .map(Command::CreateResv),
            Some(e) => Err(format!("invalid entity:{e} for keyword:create")),
            None => Err("too few arguments for keyword:create".into()),
        };
    }
    if abbrev(w, "delete", 3) {
        let arg = match rest {
            [one] => one,
            [] => return Err("too few arguments for keyword:delete".into()),
            _ => return Err("too many arguments for keyword:delete".into()),
        };
        return match arg.split_once('=') {
            Some((k, v)) if abbrev(k, "reservationname", 3) => Ok(Command::DeleteResv(v.into())),
            _ => Err(format!("invalid keyword: {arg}")),
        };
    }
    if abbrev(w, "ping", 2) {
        return Ok(Command::Ping);
    }
    if abbrev(w, "reconfigure", 5) {
        return match rest {
            [] => Ok(Command::Reconfigure),
            _ => Err("too many arguments for keyword:reconfigure".into()),
        };
    }
    if abbrev(w, "version", 4) {
        return Ok(Command::Version);
    }
    if abbrev(w, "write", 5) {
        return match rest {
            [what, job, file @ ..]
                if what.eq_ignore_ascii_case("batch_script") && file.len() <= 1 =>
            {
                Ok(Command::WriteBatchScript {
                    job: job.clone(),
                    file: file.first().cloned(),
                })
            }
            [what, _, _, _, ..] if what.eq_ignore_ascii_case("batch_script") => {
                Err("too many arguments for keyword:write".into())
            }
            [what, ..] if !what.eq_ignore_ascii_case("batch_script") => {
                Err(format!("invalid write option: {what}"))
            }
            _ => Err("too few arguments for keyword:write".into()),
        };
    }
    if abbrev(w, "listpids", 5) {
        return match rest {
            [] | [_] | [_, _] => {
                super::scontrol_listpids::parse_which(rest.first().map(String::as_str))
                    .map(Command::ListPids)
            }
            _ => Err("too many arguments for keyword:listpids".into()),
        };
    }
    if w.eq_ignore_ascii_case("top") {
        let ids: Vec<&str> = rest
            .iter()
            .flat_map(|a| a.split(','))
            .filter(|x| !x.is_empty())
            .collect();
        if ids.is_empty() {
            return Err("too few arguments for keyword:top".into());
        }
        return ids
            .iter()
            .map(|x| {
                x.parse::<u32>()
                    .map_err(|_| format!("Invalid job id specified: {x}"))
            })
            .collect::<Result<Vec<u32>, String>>()
            .map(Command::Top);
    }
    if abbrev(w, "setdebug", 7) {
        return match rest {
            [level] => match crate::logsink::filter_for(level) {
                Some(_) => Ok(Command::SetDebug(level.clone())),
                None => Err(format!("invalid debug level: {level}")),
            },
            [] => Err("too few arguments for keyword:setdebug".into()),
            _ => Err("too many arguments for keyword:setdebug".into()),
        };
    }
    if abbrev(w, "reboot_nodes", 6) {
        return parse_reboot(rest);
    }
    if abbrev(w, "cancel_reboot", 13) {
        return match rest {
            [] => Err("too few arguments for keyword:cancel_reboot".into()),
            [nodes] => hostlist::expand(nodes)
                .map(Command::CancelReboot)
                .map_err(|_| format!("Invalid node name specified: {nodes}")),
            _ => Err("too many arguments for keyword:cancel_reboot".into()),
        };
    }
    // Slurm keywords sluice does not have yet are named as such, not as unknown words.
    for (kw, min, hint) in [
        ("shutdown", 8, "; use sluice controller --stop"),
        ("takeover", 8, ""),
    ] {
        if abbrev(w, kw, min) {
            return Err(format!("{kw} is not supported yet by sluice{hint}"));
        }
    }
    Err(format!("invalid keyword: {w}"))
}

/// Job ids after hold/release/requeue: several arguments, each possibly a comma list.
fn job_args(rest: &[String], cmd: &str) -> Result<Vec<String>, String> {
    let ids: Vec<String> = rest
        .iter()
        .flat_map(|a| a.split(','))
        .filter(|s| !s.is_empty())
        .map(|s| s.strip_prefix("jobid=").unwrap_or(s).to_string())
        .collect();
    if ids.is_empty() {
        return Err(format!("too few arguments for keyword:{cmd}"));
    }
    Ok(ids)
}

fn parse_show(rest: &[String]) -> Result<Command, String> {
    let Some(entity) = rest.first() else {
        return Err("too few arguments for keyword:show".into());
    };
    let arg = rest.get(1).cloned();
    if rest.len() > 2 {
        return Err(format!("too many arguments for keyword:{}", rest[0]));
    }
    let e = entity.as_str();
    let show = if abbrev(e, "jobs", 1) {
        Show::Job(arg)
    } else if abbrev(e, "nodes", 1) {
        Show::Node(arg)
    } else if abbrev(e, "partitions", 2) {
        Show::Partition(arg)
    } else if abbrev(e, "steps", 2) {
        Show::Step(arg)
    } else if abbrev(e, "config", 1) {
        Show::Config
    } else if abbrev(e, "hostnames", 5) {
        Show::Hostnames(arg)
    } else if abbrev(e, "hostlistsorted", 9) {
        Show::HostlistSorted(arg.ok_or("invalid hostlist")?)
    } else if abbrev(e, "hostlist", 5) {
        Show::Hostlist(arg.ok_or("invalid hostlist")?)
    } else if abbrev(e, "reservations", 3) {
        Show::Reservation(arg)
    } else if abbrev(e, "licenses", 3) {
        Show::Licenses(arg)
    } else if abbrev(e, "topology", 4) {
        Show::Topology(arg)
    } else {
        return Err(format!("invalid entity:{e} for keyword:show"));
    };
    Ok(Command::Show(show))
}

/// StartTime/EndTime values: Slurm's time grammar in local time, future-leaning.
fn resv_time(v: &str) -> Option<i64> {
    super::timeparse::parse_time_local(v, false).ok()
}

fn parse_update(rest: &[String]) -> Result<Command, String> {
    if rest.iter().any(|a| {
        a.split_once('=')
            .is_some_and(|(k, _)| abbrev(k, "reservationname", 3))
    }) {
        return super::scontrol_resv::parse(rest, super::scontrol_resv::Mode::Update, &resv_time)
            .map(Command::UpdateResv);
    }
    let mut pairs = Vec::new();
    for a in rest {
        match a.split_once('=') {
            Some((k, v)) => pairs.push((k.to_ascii_lowercase(), k, v.to_string())),
            None => return Err(format!("Invalid input: {a}\nRequest aborted")),
        }
    }
    if pairs.is_empty() {
        return Err("too few arguments for keyword:update".into());
    }
    if let Some((_, _, id)) = pairs.iter().find(|(k, _, _)| k == "jobid") {
        let mut updates = Vec::new();
        for (k, orig, v) in &pairs {
            match k.as_str() {
                "jobid" => {}
                "timelimit" => match parse_time_limit(v) {
                    Ok(t) => updates.push(JobUpdate::TimeLimit(t)),
                    Err(_) => return Err(format!("Invalid TimeLimit value: {v}\nRequest aborted")),
                },
                // `TimeLimit+=30` / `TimeLimit-=30`: relative to the current limit.
                "timelimit+" | "timelimit-" => match parse_time_limit(v) {
                    Ok(TimeLimit::Minutes(m)) => {
                        let m = i64::from(m);
                        updates.push(JobUpdate::TimeLimitBy(if k.ends_with('-') {
                            -m
                        } else {
                            m
                        }))
                    }
                    _ => return Err(format!("Invalid TimeLimit value: {v}\nRequest aborted")),
                },
                "jobname" | "name" => updates.push(JobUpdate::Name(v.clone())),
                "partition" => updates.push(JobUpdate::Partition(v.clone())),
                "starttime" | "begintime" => {
                    match crate::cli::timeparse::parse_time_local(v, false) {
                        Ok(t) => updates.push(JobUpdate::BeginTime(t)),
                        Err(_) => {
                            return Err(format!("Invalid StartTime value: {v}\nRequest aborted"));
                        }
                    }
                }
                "dependency" => updates.push(JobUpdate::Dependency(v.clone())),
                "arraytaskthrottle" => match v.parse::<u32>() {
                    Ok(n) => updates.push(JobUpdate::ArrayTaskThrottle(n)),
                    Err(_) => {
                        return Err(format!(
                            "Invalid ArrayTaskThrottle value: {v}\nRequest aborted"
                        ));
                    }
                },
                "priority" => match v.parse::<u32>() {
                    Ok(n) if n < u32::MAX => updates.push(JobUpdate::Priority(n)),
                    _ => return Err(format!("Invalid Priority value: {v}\nRequest aborted")),
                },
                "nice" => match v.parse::<i32>() {
                    Ok(n) if (-2_147_483_645..=2_147_483_645).contains(&n) => {
                        updates.push(JobUpdate::Nice(n))
                    }
                    _ => return Err(format!("Invalid nice value: {v}\nRequest aborted")),
                },
                _ => {
                    return Err(format!(
                        "Update of this parameter is not supported: {orig}={v}\nRequest aborted"
                    ));
                }
            }
        }
        if updates.is_empty() {
            return Err("No changes specified".into());
        }
        return Ok(Command::UpdateJob {
            id: id.clone(),
            updates,
        });
    }
    if let Some((_, _, nodes)) = pairs.iter().find(|(k, _, _)| k == "nodename") {
        let names =
            hostlist::expand(nodes).map_err(|_| format!("Invalid node name specified: {nodes}"))?;
        let mut state = None;
        let mut reason = None;
        for (k, orig, v) in &pairs {
            match k.as_str() {
                "nodename" => {}
                "state" => state = Some(v.to_ascii_uppercase()),
                "reason" => reason = Some(v.clone()),
                _ => {
                    return Err(format!(
                        "Update of this parameter is not supported: {orig}={v}\nRequest aborted"
                    ));
                }
            }
        }
        let update = match state.as_deref() {
            Some("RESUME") | Some("IDLE") | Some("UNDRAIN") => NodeUpdate::Resume,
            Some(s @ ("DRAIN" | "DOWN" | "FAIL")) => {
                let Some(reason) = reason.filter(|r| !r.is_empty()) else {
                    return Err(
                        "You must specify a reason when DOWNING or DRAINING a node. Request denied"
                            .into(),
                    );
                };
                if s == "DRAIN" {
                    NodeUpdate::Drain { reason }
                } else if s == "FAIL" {
                    NodeUpdate::Fail { reason }
                } else {
                    NodeUpdate::Down { reason }
                }
            }
            Some(other) => {
                return Err(format!(
                    "Invalid input: State={other}\nRequest aborted\nValid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN DOWN"
                ));
            }
            None => return Err("No changes specified".into()),
        };
        return Ok(Command::UpdateNode { names, update });
    }
    let (_, orig, v) = &pairs[0];
    Err(format!(
        "Update of this parameter is not supported: {orig}={v}\nRequest aborted"
    ))
}

/// A way to ask the controller; tests pass a fake.
pub type Requester<'a> = dyn FnMut(&Request) -> Result<Response, ClientError> + 'a;

/// One request through `req` whose answer must be of one kind ([`client::expect`]); a
/// failure becomes the `{prefix}: …` text scontrol prints.
fn call<T>(
    req: &mut Requester<'_>,
    r: &Request,
    prefix: &str,
    pick: impl FnOnce(Response) -> Option<T>,
) -> Result<T, Output> {
    client::expect(req(r), pick).map_err(|e| call_failure(prefix, &e))
}

/// `{prefix}: {why}` (with a hint on how to reach the controller, when there is one).
fn call_failure(prefix: &str, e: &CallError) -> Output {
    match e {
        CallError::Client(c) => client_failure(prefix, c),
        other => Output::err(format!("{prefix}: {other}\n")),
    }
}

fn client_failure(prefix: &str, e: &ClientError) -> Output {
    let mut s = format!("{prefix}: {e}\n");
    if let Some(h) = e.hint() {
        s.push_str(h);
        s.push('\n');
    }
    Output::err(s)
}

/// Runs one parsed command. `env_nodelist` is `$SLURM_NODELIST`; `host` names the
/// controller's host for `ping` and `show config`.
pub fn execute(
    cmd: &Command,
    opts: &Opts,
    env_nodelist: Option<&str>,
    host: &str,
    req: &mut Requester<'_>,
) -> Output {
    // `--json` exists for `show job` and `show licenses`; elsewhere it is refused rather
    // than silently printing text.
    if opts.json
        && let Command::Show(show) = cmd
        && !matches!(show, Show::Job(_) | Show::Licenses(_))
    {
        return Output::err(
            "scontrol: error: --json is supported by sluice only for show job and show licenses (not supported yet by sluice for the others)\n"
                .into(),
        );
    }
    match cmd {
        Command::Version => Output::ok(format!(
            "slurm {}\n",
            crate::config::advertised_slurm_version()
        )),
        Command::Show(Show::Hostnames(list)) => {
            let Some(list) = list.as_deref().or(env_nodelist) else {
                return Output::err("scontrol: error: host list is empty\n".into());
            };
            match hostlist::expand(list) {
                Ok(names) => Output::ok(names.iter().map(|n| format!("{n}\n")).collect()),
                // Slurm reports a bad expression but still exits 0 here.
                Err(e) => Output {
                    stderr: format!("scontrol: error: {e}\nInvalid hostlist: {list}\n"),
                    ..Output::default()
                },
            }
        }
        Command::Show(Show::Hostlist(list)) | Command::Show(Show::HostlistSorted(list)) => {
            let sorted = matches!(cmd, Command::Show(Show::HostlistSorted(_)));
            match hostlist::expand(list) {
                Ok(mut names) => {
                    if sorted {
                        names.sort_by_key(|a| host_key(a));
                    }
                    Output::ok(format!("{}\n", hostlist::compress(&names)))
                }
                Err(e) => Output::err(format!("scontrol: error: {e}\nInvalid hostlist: {list}\n")),
            }
        }
        Command::Show(Show::Job(id)) => show_job(id.as_deref(), opts, req),
        Command::Show(Show::Step(id)) => show_step(id.as_deref(), opts, req),
        Command::Show(Show::Node(name)) => show_nodes(name.as_deref(), opts, req),
        Command::Show(Show::Partition(name)) => show_partitions(name.as_deref(), opts, req),
        Command::Show(Show::Licenses(name)) => show_licenses(name.as_deref(), opts, req),
        Command::Show(Show::Config) => call(
            req,
            &Request::Config,
            "slurm_load_ctl_conf error",
            answer!(Response::Config(pairs) => pairs),
        )
        .map_or_else(
            |o| o,
            |pairs| Output::ok(render_config(&pairs, super::timefmt::now(), host)),
        ),
        Command::Show(Show::Topology(name)) => match call(
            req,
            &Request::Topology,
            "slurm_load_topo error",
            answer!(Response::Topology(t) => t),
        ) {
            Ok(t) => {
                let text = t.render_scontrol(name.as_deref());
                let missing = text.starts_with("Switch/block ");
                Output {
                    stdout: text,
                    code: u8::from(missing),
                    ..Output::default()
                }
            }
            Err(o) => o,
        },
        Command::Show(Show::Reservation(name)) => match call(
            req,
            &Request::Reservations,
            "slurm_load_reservations error",
            answer!(Response::Reservations { resvs, now } => (resvs, now)),
        ) {
            Ok((resvs, now)) => {
                let (stdout, stderr, code) =
                    super::scontrol_resv::show(&resvs, name.as_deref(), now, opts.oneliner);
                Output {
                    stdout,
                    stderr,
                    code,
                }
            }
            Err(o) => o,
        },
        Command::CreateResv(spec) => call(
            req,
            &Request::CreateResv(spec.clone()),
            "Error creating the reservation",
            answer!(Response::ResvCreated { name } => name),
        )
        .map_or_else(
            |o| o,
            |name| Output::ok(format!("Reservation created: {name}\n")),
        ),
        Command::UpdateResv(spec) => call(
            req,
            &Request::UpdateResv(spec.clone()),
            "Error updating the reservation",
            answer!(Response::Ok => ()),
        )
        .map_or_else(|o| o, |()| Output::ok("Reservation updated.\n".into())),
        Command::DeleteResv(name) => call(
            req,
            &Request::DeleteResv { name: name.clone() },
            &format!("delete_reservation {name}"),
            answer!(Response::Ok => ()),
        )
        .map_or_else(|o| o, |()| Output::default()),
        Command::Reconfigure => {
            match client::expect(req(&Request::Reconfigure), answer!(Response::Ok => ())) {
                Ok(()) => Output::default(),
                // No controller reads `slurm_reconfigure: …`, a refusal `… error: …`.
                Err(CallError::Client(e)) => client_failure("slurm_reconfigure", &e),
                Err(e) => call_failure("slurm_reconfigure error", &e),
            }
        }
        Command::WriteBatchScript { job, file } => {
            // scontrol reads the leading number (atoll), so `108_3` or `108.batch`
            // name job 108: every task of an array shares its script.
            let digits = job.bytes().take_while(u8::is_ascii_digit).count();
            let id = match job[..digits].parse::<u32>() {
                Ok(id) if id > 0 => id,
                _ => {
                    return Output::err(
                        "job script retrieval failed: Invalid job id specified\n".into(),
                    );
                }
            };
            match call(
                req,
                &Request::BatchScript { job_id: id },
                "job script retrieval failed",
                answer!(Response::BatchScript(text) => text),
            ) {
                Ok(text) => match file.as_deref() {
                    Some("-") => Output::ok(text),
                    f => {
                        let name = f.map_or_else(|| format!("slurm-{id}.sh"), str::to_string);
                        match std::fs::write(&name, &text) {
                            Ok(()) if opts.quiet => Output::default(),
                            Ok(()) => {
                                Output::ok(format!("batch script for job {id} written to {name}\n"))
                            }
                            Err(e) => Output::err(format!(
                                "failed to open file `{name}`: {}\n",
                                e.raw_os_error()
                                    .map(|c| nix::errno::Errno::from_raw(c).desc().to_string())
                                    .unwrap_or_else(|| e.to_string())
                            )),
                        }
                    }
                },
                Err(o) => o,
            }
        }
        Command::SetDebug(level) => call(
            req,
            &Request::SetDebug {
                level: level.clone(),
            },
            "slurm_set_debug_level error",
            answer!(Response::Ok => ()),
        )
        .map_or_else(|o| o, |()| Output::default()),
        Command::ListPids(which) => {
            let root = crate::config::Config::load()
                .map(|c| c.cgroup.root)
                .unwrap_or_else(|_| "sluice".into());
            let procs = super::scontrol_listpids::scan(std::path::Path::new("/proc"), &root);
            let (stdout, stderr, code) = super::scontrol_listpids::render(&procs, which);
            Output {
                stdout,
                stderr,
                code,
            }
        }
        Command::Top(ids) => super::scontrol_top::execute(ids, req),
        Command::Reboot {
            nodes,
            asap,
            next_down,
            reason,
        } => {
            let r = req(&Request::Reboot {
                nodes: nodes.clone(),
                asap: *asap,
                next_down: *next_down,
                reason: reason.clone(),
            });
            match client::expect(r, answer!(Response::Ok => ())) {
                Ok(()) => Output::default(),
                Err(CallError::Slurm(crate::proto::SlurmError::Other(e)))
                    if e == "RebootProgram isn't defined" =>
                {
                    Output::err(format!("scontrol: error: {e}\n"))
                }
                Err(e) => call_failure("scontrol_reboot_nodes error", &e),
            }
        }
        Command::CancelReboot(nodes) => {
            let r = req(&Request::CancelReboot {
                nodes: nodes.clone(),
            });
            update_result(r)
        }
        Command::Ping => match req(&Request::Ping) {
            Ok(_) => Output::ok(format!("Slurmctld(primary) at {host} is UP\n")),
            Err(_) => Output {
                stdout: format!("Slurmctld(primary) at {host} is DOWN\n"),
                code: 1,
                ..Output::default()
            },
        },
        Command::Hold { ids, user } => {
            with_ids(ids, "slurm_suspend error", opts, req, |ids, array_tasks| {
                Request::Hold {
                    ids,
                    user_hold: *user,
                    array_tasks,
                }
            })
        }
        Command::Release(ids) => {
            with_ids(ids, "slurm_suspend error", opts, req, |ids, array_tasks| {
                Request::Release { ids, array_tasks }
            })
        }
        Command::Requeue { ids, hold } => {
            with_ids(ids, "slurm_requeue error", opts, req, |ids, array_tasks| {
                Request::Requeue {
                    ids,
                    hold: *hold,
                    array_tasks,
                }
            })
        }
        Command::Suspend { ids, resume } => {
            let prefix = if *resume {
                "slurm_resume error"
            } else {
                "slurm_suspend error"
            };
            with_ids(ids, prefix, opts, req, |ids, array_tasks| {
                Request::Suspend {
                    ids,
                    array_tasks,
                    resume: *resume,
                }
            })
        }
        Command::UpdateJob { id, updates } => {
            let spec = parse_job_id(id)
                .filter(|s| s.step.is_none() && !(s.het.is_some() && s.array.is_some()));
            let Some(mut spec) = spec else {
                return Output::err(format!("Invalid job id specified: {id}\n"));
            };
            // `L+k` updates that component (Slurm: `scontrol update JobId=123+1`).
            if let Some(k) = spec.het.take() {
                match resolve_het(req, spec.job, k) {
                    Some(cid) => spec.job = cid,
                    None => return Output::err(format!("Invalid job id specified: {id}\n")),
                }
            }
            let tasks = match &spec.array {
                None => None,
                Some(_) => match spec.array_tasks() {
                    Some(t) => Some(t.tasks),
                    None => return Output::err(format!("Invalid job id specified: {id}\n")),
                },
            };
            let r = req(&Request::UpdateJob {
                id: spec.job,
                updates: updates.clone(),
                tasks,
            });
            update_result(r)
        }
        Command::UpdateNode { names, update } => {
            let r = req(&Request::UpdateNode {
                names: names.clone(),
                update: update.clone(),
            });
            update_result(r)
        }
    }
}

fn update_result(r: Result<Response, ClientError>) -> Output {
    let results = client::expect(
        r,
        answer!(Response::Ok => Vec::new(), Response::Results(rs) => rs),
    );
    match results {
        Ok(rs) => match rs.iter().find_map(|r| r.error.clone()) {
            None => Output::default(),
            Some(e) => Output::err(format!("slurm_update error: {e}\n")),
        },
        Err(e) => call_failure("slurm_update error", &e),
    }
}

/// Sort key for `hostlistsorted`: prefix, then number, then the whole name.
fn host_key(name: &str) -> (String, Option<u64>, String) {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (p, n) = name.split_at(name.len() - digits);
    (p.to_string(), n.parse().ok(), name.to_string())
}

/// The job id of component `k` of the heterogeneous job led by `leader` (`L+k`), or
/// `None` when there is no such component (or the controller cannot be asked).
fn resolve_het(req: &mut Requester<'_>, leader: u32, k: u32) -> Option<u32> {
    let filter = JobFilter {
        ids: vec![leader],
        ..JobFilter::default()
    };
    match req(&Request::Jobs(filter)) {
        Ok(Response::Jobs { jobs, .. }) => jobs
            .iter()
            .find(|j| j.het.is_some_and(|h| h.job_id == leader && h.offset == k))
            .map(|j| j.id),
        _ => None,
    }
}

/// hold/release/requeue: ids → one request → Slurm's two-line error per failed job.
fn with_ids(
    ids: &[String],
    prefix: &str,
    opts: &Opts,
    req: &mut Requester<'_>,
    make: impl Fn(Vec<u32>, Vec<ArrayTasks>) -> Request,
) -> Output {
    let mut out = Output::default();
    let mut nums = Vec::new();
    let mut tasks = Vec::new();
    for id in ids {
        match parse_job_id(id) {
            Some(s) if s.is_plain() => nums.push(s.job),
            Some(s) if s.step.is_none() && s.het.is_none() && s.array_tasks().is_some() => {
                tasks.extend(s.array_tasks());
            }
            Some(s) if s.step.is_none() && s.array.is_none() && s.het.is_some() => {
                match resolve_het(req, s.job, s.het.unwrap_or(0)) {
                    Some(id) => nums.push(id),
                    None => {
                        out.stderr.push_str(&format!(
                            "Invalid job id specified for job {id}\n{prefix}: Invalid job id specified\n"
                        ));
                        out.code = 1;
                    }
                }
            }
            Some(_) => {
                out.stderr.push_str(&format!(
                    "Invalid job id specified for job {id}\n{prefix}: Invalid job id specified\n"
                ));
                out.code = 1;
            }
            None => {
                out.stderr.push_str(&format!(
                    "Invalid job id specified for job {id}\n{prefix}: Invalid job id specified\n"
                ));
                out.code = 1;
            }
        }
    }
    if nums.is_empty() && tasks.is_empty() {
        return out;
    }
    let results: Vec<JobResult> = match req(&make(nums.clone(), tasks)) {
        Ok(Response::Results(rs)) => rs,
        Ok(Response::Ok) => Vec::new(),
        Ok(Response::Error(e)) => nums
            .iter()
            .map(|&id| JobResult::new(id, Some(e.clone())))
            .collect(),
        Ok(_) => Vec::new(),
        Err(e) => return client_failure(prefix, &e),
    };
    for r in results {
        if let Some(e) = &r.error {
            if !opts.quiet {
                out.stderr
                    .push_str(&format!("{e} for job {}\n{prefix}: {e}\n", r.label()));
            }
            out.code = 1;
        }
    }
    out
}

/// One cluster license: name, total, and the count held by jobs that run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenseUse {
    pub name: String,
    pub total: u32,
    pub used: u32,
}

/// Totals from the controller's `Licenses` setting (`name:count,…` or `(null)`) and
/// use from the jobs that hold resources (running, suspended or completing), sorted
/// by name as scontrol sorts them.
pub fn license_use(setting: &str, jobs: &[Job]) -> Vec<LicenseUse> {
    let mut out: Vec<LicenseUse> = crate::model::gres::parse_licenses(setting)
        .unwrap_or_default()
        .into_iter()
        .map(|l| LicenseUse {
            name: l.name,
            total: l.count,
            used: 0,
        })
        .collect();
    for j in jobs
        .iter()
        .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended) || j.completing)
    {
        for l in &j.spec.licenses {
            if let Some(u) = out.iter_mut().find(|u| u.name == l.name) {
                u.used += l.count;
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `show licenses` as text (src/scontrol/info_lics.c layout) or, with `--json`, the
/// openapi/v0.0.38 licenses document (diag.c `_op_handler_licenses` field order).
pub fn render_licenses(
    lics: &[LicenseUse],
    name: Option<&str>,
    oneliner: bool,
    json: bool,
    slurm_version: &str,
) -> String {
    let shown = lics.iter().filter(|l| name.is_none_or(|n| n == l.name));
    if json {
        let items = shown
            .map(|l| {
                J::obj()
                    .with("LicenseName", l.name.as_str())
                    .with("Total", l.total)
                    .with("Used", l.used)
                    .with("Free", l.total.saturating_sub(l.used))
                    .with("Reserved", 0u32)
                    .with("Remote", false)
            })
            .collect();
        return slurmjson::to_text(&slurmjson::document(
            slurmjson::meta_v38(slurm_version),
            "licenses",
            items,
        ));
    }
    if lics.is_empty() {
        return "No licenses configured in Slurm.\n".into();
    }
    let sep = if oneliner { " " } else { "\n    " };
    shown
        .map(|l| {
            format!(
                "LicenseName={}{sep}Total={} Used={} Free={} Reserved=0 Remote=no\n",
                l.name,
                l.total,
                l.used,
                l.total.saturating_sub(l.used)
            )
        })
        .collect()
}

fn show_licenses(name: Option<&str>, opts: &Opts, req: &mut Requester<'_>) -> Output {
    const PREFIX: &str = "slurm_load_license error";
    let setting = match call(
        req,
        &Request::Config,
        PREFIX,
        answer!(Response::Config(p) => p),
    ) {
        Ok(pairs) => pairs
            .into_iter()
            .find(|(k, _)| k == "Licenses")
            .map(|(_, v)| v)
            .unwrap_or_default(),
        Err(o) => return o,
    };
    let all = Request::Jobs(JobFilter::default());
    let jobs = match call(
        req,
        &all,
        PREFIX,
        answer!(Response::Jobs { jobs, .. } => jobs),
    ) {
        Ok(jobs) => jobs,
        Err(o) => return o,
    };
    let version = crate::config::advertised_slurm_version();
    Output::ok(render_licenses(
        &license_use(&setting, &jobs),
        name,
        opts.oneliner,
        opts.json,
        &version,
    ))
}

fn show_job(id: Option<&str>, opts: &Opts, req: &mut Requester<'_>) -> Output {
    let mut filter = JobFilter::default();
    let mut het_offset = None;
    if let Some(id) = id {
        match parse_job_id(id) {
            Some(s) if s.is_plain() => filter.ids.push(s.job),
            Some(s) if s.step.is_none() && s.het.is_none() && s.array_tasks().is_some() => {
                filter.array_tasks.extend(s.array_tasks());
            }
            // `L+k`: fetch the heterogeneous job, keep component k below.
            Some(s) if s.step.is_none() && s.array.is_none() && s.het.is_some() => {
                filter.ids.push(s.job);
                het_offset = s.het;
            }
            Some(_) => {
                return Output::err("slurm_load_jobs error: Invalid job id specified\n".into());
            }
            None => return Output::err("slurm_load_jobs error: Invalid job id specified\n".into()),
        }
    }
    let reply = call(
        req,
        &Request::Jobs(filter),
        "slurm_load_jobs error",
        answer!(Response::Jobs { jobs, now } => (jobs, now)),
    );
    match reply {
        Ok((mut jobs, now)) => {
            if let Some(k) = het_offset {
                jobs.retain(|j| j.het.is_some_and(|h| h.offset == k));
            }
            if opts.json && (!jobs.is_empty() || id.is_none()) {
                let (cluster, version, nodes) = crate::config::Config::load()
                    .map(|c| (c.cluster_name, c.slurm_version, c.nodes))
                    .unwrap_or_else(|_| {
                        (
                            "sluice".into(),
                            crate::config::DEFAULT_SLURM_VERSION.into(),
                            Vec::new(),
                        )
                    });
                let shown: Vec<&Job> = jobs.iter().collect();
                let per_socket = |n: &str| {
                    nodes
                        .iter()
                        .find(|c| c.name == n)
                        .and_then(|c| c.cores_per_socket)
                };
                return Output::ok(crate::cli::jobjson::render(
                    &shown,
                    &cluster,
                    &version,
                    &per_socket,
                ));
            }
            if jobs.is_empty() {
                if id.is_some() {
                    return Output::err("slurm_load_jobs error: Invalid job id specified\n".into());
                }
                return Output::ok("No jobs in the system\n".into());
            }
            Output::ok(
                jobs.iter()
                    .map(|j| render_job(j, now, opts.details, opts.oneliner))
                    .collect(),
            )
        }
        Err(o) => o,
    }
}

fn show_step(id: Option<&str>, opts: &Opts, req: &mut Requester<'_>) -> Output {
    let mut filter = JobFilter::default();
    let mut want_step = None;
    if let Some(id) = id {
        match parse_job_id(id) {
            Some(s) if s.array.is_none() && s.het.is_none() => {
                filter.ids.push(s.job);
                want_step = s.step.map(|x| x.as_record_id());
            }
            _ => return Output::err(format!("Invalid job id specified: {id}\n")),
        }
    }
    let (jobs, now) = match call(
        req,
        &Request::Jobs(filter),
        "slurm_get_job_steps error",
        answer!(Response::Jobs { jobs, now } => (jobs, now)),
    ) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let mut out = String::new();
    for j in jobs.iter().filter(|j| j.is_active()) {
        for st in j
            .steps
            .iter()
            .filter(|s| s.state == crate::model::JobState::Running)
        {
            if want_step.as_ref().is_some_and(|w| *w != st.id) {
                continue;
            }
            out.push_str(&join_record(&step_lines(j, st, now), opts.oneliner, false));
        }
    }
    if out.is_empty() {
        return match (id, want_step) {
            (Some(id), Some(_)) => Output::err(format!("Job step {id} not found\n")),
            (Some(id), None) => Output::err(format!("Job {id} has no steps running\n")),
            _ => Output::ok("No job steps in the system\n".into()),
        };
    }
    Output::ok(out)
}

/// The lines of `scontrol show step` for one running step.
pub fn step_lines(job: &Job, st: &crate::model::StepRecord, _now: i64) -> Vec<String> {
    let d = st.detail.as_deref();
    let limit = d
        .and_then(|d| d.time_limit)
        .unwrap_or(job.time_limit)
        .to_hms();
    let nnodes = hostlist::expand(&st.nodes).map(|v| v.len()).unwrap_or(1);
    let mem = d.map(|d| d.mem_per_node).unwrap_or(0);
    let mut tres = format!("cpu={}", st.ncpus);
    if mem > 0 {
        tres.push_str(&format!(",mem={}M", mem * nnodes as u64));
    }
    tres.push_str(&format!(",node={nnodes}"));
    let dist = match d.map(|d| d.distribution) {
        Some(crate::model::step::Distribution::Cyclic) => "Cyclic",
        Some(crate::model::step::Distribution::Plane(_)) => "Plane",
        _ => "Block",
    };
    let mut v = vec![
        format!(
            "StepId={}.{} UserId={} StartTime={} TimeLimit={limit}",
            job.id,
            st.id,
            job.uid,
            fmt_ts(st.start_time)
        ),
        format!(
            "State={} Partition={} NodeList={}",
            st.state.long(),
            job.partition,
            st.nodes
        ),
        format!(
            "Nodes={nnodes} CPUs={} Tasks={} Name={} Network=(null)",
            st.ncpus, st.ntasks, st.name
        ),
        format!("TRES={tres}"),
        "ResvPorts=(null)".to_string(),
        format!("CPUFreqReq=Default Dist={dist}"),
    ];
    if let Some(d) = d {
        v.push(format!("SrunHost:Pid={}", d.srun));
    }
    v
}

fn load_nodes(
    req: &mut Requester<'_>,
    prefix: &str,
) -> Result<(Vec<Node>, Vec<Partition>, i64), Output> {
    call(
        req,
        &Request::Nodes,
        prefix,
        answer!(Response::Nodes { nodes, partitions, now } => (nodes, partitions, now)),
    )
}

fn show_nodes(name: Option<&str>, opts: &Opts, req: &mut Requester<'_>) -> Output {
    let (nodes, _, _) = match load_nodes(req, "slurm_load_node error") {
        Ok(x) => x,
        Err(o) => return o,
    };
    let selected: Vec<&Node> = match name {
        None => nodes.iter().collect(),
        Some(expr) => {
            let wanted = hostlist::expand(expr).unwrap_or_else(|_| vec![expr.to_string()]);
            let found: Vec<&Node> = nodes.iter().filter(|n| wanted.contains(&n.name)).collect();
            if found.is_empty() {
                return Output {
                    stdout: format!("Node {expr} not found\n"),
                    code: 1,
                    ..Output::default()
                };
            }
            found
        }
    };
    if selected.is_empty() {
        return Output::ok("No nodes in the system\n".into());
    }
    Output::ok(
        selected
            .iter()
            .map(|n| render_node(n, opts.oneliner))
            .collect(),
    )
}

fn show_partitions(name: Option<&str>, opts: &Opts, req: &mut Requester<'_>) -> Output {
    let (nodes, parts, _) = match load_nodes(req, "slurm_load_partitions error") {
        Ok(x) => x,
        Err(o) => return o,
    };
    let selected: Vec<&Partition> = parts
        .iter()
        .filter(|p| name.is_none_or(|n| p.name == n))
        .collect();
    if selected.is_empty() {
        return match name {
            Some(n) => Output {
                stdout: format!("Partition {n} not found\n"),
                code: 1,
                ..Output::default()
            },
            None => Output::ok("No partitions in the system\n".into()),
        };
    }
    Output::ok(
        selected
            .iter()
            .map(|p| render_partition(p, &nodes, opts.oneliner))
            .collect(),
    )
}

/// Joins a record's lines: indented multi-line form, or one line with `-o`.
/// `dangling` reproduces scontrol's empty indented line after a job record.
fn join_record(lines: &[String], oneliner: bool, dangling: bool) -> String {
    if oneliner {
        let mut s = lines.join(" ");
        if dangling {
            s.push(' ');
        }
        s.push('\n');
        return s;
    }
    let mut s = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            s.push_str("\n   ");
        }
        s.push_str(l);
    }
    if dangling {
        s.push_str("\n   ");
    }
    s.push_str("\n\n");
    s
}

fn or_null(s: &str) -> &str {
    if s.is_empty() { "(null)" } else { s }
}

fn ts_or_unknown(t: Option<i64>) -> String {
    t.map(fmt_ts).unwrap_or_else(|| "Unknown".into())
}

/// The lines of `scontrol show job` for one job (without indentation).
pub fn job_lines(job: &Job, now: i64, details: bool) -> Vec<String> {
    let spec = &job.spec;
    let pending = job.state == JobState::Pending;
    // A pending job with a future --begin shows that as its expected start.
    let start = job
        .start_time
        .or(job.sched.est_start.filter(|_| pending))
        .or(spec.begin.filter(|b| pending && *b > now));
    let end = job.end_time.or_else(|| {
        let s = start?;
        job.time_limit.secs().map(|l| s + l as i64)
    });
    let mut l = Vec::new();
    match &job.array {
        Some(a) => {
            let task = match job.array_task_id {
                Some(t) => t.to_string(),
                None => a.pending_text(true),
            };
            let throttle = if a.throttle > 0 {
                format!(" ArrayTaskThrottle={}", a.throttle)
            } else {
                String::new()
            };
            l.push(format!(
                "JobId={} ArrayJobId={} ArrayTaskId={task}{throttle} JobName={}",
                job.id, job.array_job_id, spec.name
            ));
        }
        None => match &job.het {
            Some(h) => l.push(format!(
                "JobId={} HetJobId={} HetJobOffset={} JobName={}",
                job.id, h.job_id, h.offset, spec.name
            )),
            None => l.push(format!("JobId={} JobName={}", job.id, spec.name)),
        },
    }
    l.push(format!(
        "UserId={}({}) GroupId={}({}) MCS_label=N/A",
        job.user, job.uid, job.group, job.gid
    ));
    l.push(format!(
        "Priority={} Nice={} Account={} QOS={}",
        job.priority, spec.nice, job.account, job.qos
    ));
    l.push(format!(
        "JobState={} Reason={} Dependency={}",
        job.state_long(),
        // Slurm prints a state description with its blanks as underscores.
        match &job.reason {
            crate::model::Reason::LaunchFailedRequeuedHeld => job.reason.as_str().replace(' ', "_"),
            r => r.to_string(),
        },
        job.depend
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_else(|| "(null)".into())
    ));
    l.push(format!(
        "Requeue={} Restarts={} BatchFlag={} Reboot=0 ExitCode={}",
        u8::from(spec.requeue.unwrap_or(true)),
        job.restarts,
        u8::from(!spec.alloc_only),
        job.exit
    ));
    if details {
        l.push(format!("DerivedExitCode={}", job.derived_exit));
    }
    l.push(format!(
        "RunTime={} TimeLimit={} TimeMin={}",
        crate::model::time::fmt_hms(job.run_secs(now)),
        job.time_limit.to_hms(),
        spec.time_min.map_or_else(
            || "N/A".to_string(),
            |m| crate::model::TimeLimit::Minutes(m).to_hms()
        )
    ));
    // A job waiting on other jobs (or on its array's throttle) is not eligible yet.
    let blocked = pending
        && (job.depend.is_some()
            || matches!(
                job.reason,
                Reason::JobArrayTaskLimit | Reason::DependencyNeverSatisfied
            ));
    let eligible = job.eligible_time.filter(|_| !blocked);
    l.push(format!(
        "SubmitTime={} EligibleTime={}",
        fmt_ts(job.submit_time),
        ts_or_unknown(eligible)
    ));
    l.push(format!("AccrueTime={}", ts_or_unknown(eligible)));
    l.push(format!(
        "StartTime={} EndTime={} Deadline={}",
        ts_or_unknown(start),
        ts_or_unknown(end),
        spec.deadline.map(fmt_ts).unwrap_or_else(|| "N/A".into())
    ));
    // A job chosen for preemption (Slurm prints this line where preemption applies).
    if let Some(p) = job.preempt {
        l.push(format!(
            "PreemptEligibleTime={} PreemptTime={}",
            ts_or_unknown(start),
            fmt_ts(p.time)
        ));
    }
    // While suspended: when, and how long the job had run before it.
    let (suspend_time, pre_suspend) = match job.suspension {
        Some(sus) => (fmt_ts(sus.since), job.run_secs(sus.since)),
        None => ("None".to_string(), 0),
    };
    l.push(format!(
        "SuspendTime={suspend_time} SecsPreSuspend={pre_suspend} LastSchedEval={} Scheduler={}",
        ts_or_unknown(job.last_sched_eval),
        if job.sched.backfilled {
            "Backfill"
        } else {
            "Main"
        }
    ));
    l.push(format!(
        "Partition={} AllocNode:Sid={}:0",
        job.partition,
        or_null(&spec.submit_host)
    ));
    l.push(format!(
        "ReqNodeList={} ExcNodeList={}",
        or_null(spec.nodelist.as_deref().unwrap_or("")),
        or_null(spec.exclude.as_deref().unwrap_or(""))
    ));
    l.push(format!("NodeList={}", job.nodelist()));
    if let Some(host) = job.alloc.as_ref().and_then(|a| a.nodes.first()) {
        l.push(format!("BatchHost={host}"));
    }
    let cpt = spec.cpus_per_task.unwrap_or(1).max(1);
    l.push(format!(
        "NumNodes={} NumCPUs={} NumTasks={} CPUs/Task={cpt} ReqB:S:C:T=0:0:*:{}",
        jobfmt::node_count(job),
        jobfmt::cpu_count(job),
        job.req_tasks.max(1),
        jobfmt::star(spec.threads_per_core)
    ));
    l.push(format!("TRES={}", jobfmt::tres_scontrol(job)));
    let ntpn = spec.ntasks_per_node.unwrap_or(0);
    l.push(format!(
        "Socks/Node={} NtasksPerN:B:S:C={ntpn}:0:*:{} CoreSpec=*",
        jobfmt::star(spec.sockets_per_node),
        jobfmt::star(spec.ntasks_per_core)
    ));
    // Allocations recorded before CPU ids were tracked have no detail to show.
    if details
        && let Some(a) = job
            .alloc
            .as_ref()
            .filter(|a| job.is_active() && !a.cpu_ids.is_empty())
    {
        l.extend(alloc_detail_lines(job, a));
    }
    let mem_key = match job.req_mem {
        MemReq::PerCpu(_) => "MinMemoryCPU",
        MemReq::PerNode(_) => "MinMemoryNode",
    };
    l.push(format!(
        "MinCPUsNode={} {mem_key}={} MinTmpDiskNode={}",
        jobfmt::min_cpus_per_node(job),
        jobfmt::req_mem_text(job),
        spec.tmp_disk
            .map_or_else(|| "0".into(), jobfmt::fmt_mem_exact)
    ));
    l.push(format!(
        "Features={} DelayBoot=00:00:00",
        or_null(spec.constraint.as_deref().unwrap_or(""))
    ));
    // Slurm prints the reservation on a line of its own, only when the job has one.
    if let Some(r) = &spec.reservation {
        l.push(format!("Reservation={r}"));
    }
    l.push(format!(
        "OverSubscribe={} Contiguous={} Licenses={} Network=(null)",
        if spec.exclusive {
            "NO"
        } else if spec.exclusive_user {
            "USER"
        } else if spec.oversubscribe {
            "YES"
        } else {
            "OK"
        },
        u8::from(spec.contiguous),
        crate::model::gres::fmt_licenses(&spec.licenses)
    ));
    l.push(format!("Command={}", or_null(&spec.command)));
    l.push(format!("WorkDir={}", spec.work_dir));
    if let Some(c) = spec.comment.as_deref().filter(|c| !c.is_empty()) {
        l.push(format!("Comment={c}"));
    }
    l.push(format!("StdErr={}", jobfmt::std_path(job, Stream::Err)));
    l.push(format!("StdIn={}", jobfmt::std_path(job, Stream::In)));
    l.push(format!("StdOut={}", jobfmt::std_path(job, Stream::Out)));
    l.push("Power=".into());
    // Only for `--switches`: the leaf-switch count and the longest wait for it.
    if let Some(n) = spec.switches {
        l.push(format!(
            "Switches={n}@{}",
            crate::model::time::fmt_hms(u64::from(spec.switch_wait.unwrap_or(0)))
        ));
    }
    // The TRES request lines, in slurm's job_info.c order.
    if let Some(c) = spec.cpus_per_gpu {
        l.push(format!("CpusPerTres=gres:gpu:{c}"));
    }
    if let Some(m) = spec.mem_per_gpu {
        l.push(format!("MemPerTres=gres:gpu:{m}"));
    }
    if let Some(g) = &spec.gpus {
        l.push(format!("TresPerJob=gres:{g}"));
    }
    if spec.tres_per_node() != "N/A" {
        l.push(format!("TresPerNode={}", spec.tres_per_node()));
    }
    if let Some(g) = &spec.gpus_per_socket {
        l.push(format!("TresPerSocket=gres:{g}"));
    }
    if let Some(g) = &spec.gpus_per_task {
        l.push(format!("TresPerTask=gres:{g}"));
    }
    if let Some(n) = spec.ntasks_per_gpu {
        l.push(format!("NtasksPerTRES={n}"));
    }
    l
}

/// `scontrol show job -d`'s allocation lines: `JOB_GRES=` and one
/// `  Nodes=… CPU_IDs=… Mem=… GRES=…` line per node (two more spaces of indent).
fn alloc_detail_lines(job: &Job, a: &crate::model::job::Allocation) -> Vec<String> {
    use crate::model::job::GresAlloc;
    let all: Vec<GresAlloc> = a.gres.iter().flatten().cloned().collect();
    let mut l = vec![format!(
        "JOB_GRES={}",
        if all.is_empty() {
            "(null)".to_string()
        } else {
            jobfmt::gres_alloc_text(&all, false)
        }
    )];
    for (k, node) in a.nodes.iter().enumerate() {
        let ids = a
            .cpu_ids
            .get(k)
            .map(|v| jobfmt::id_ranges(v))
            .unwrap_or_default();
        let gres = a
            .gres
            .get(k)
            .map(|g| jobfmt::gres_alloc_text(g, true))
            .unwrap_or_default();
        l.push(format!(
            "  Nodes={node} CPU_IDs={ids} Mem={} GRES={gres}",
            a.mem_per_node
        ));
    }
    let _ = job;
    l
}

/// `0-3,8,10-11` from a list of ids.
/// One job record as `scontrol show job` prints it.
pub fn render_job(job: &Job, now: i64, details: bool, oneliner: bool) -> String {
    join_record(&job_lines(job, now, details), oneliner, true)
}

/// The lines of `scontrol show node` for one node.
pub fn node_lines(n: &Node) -> Vec<String> {
    let mut l = Vec::new();
    l.push(format!(
        "NodeName={} Arch={} CoresPerSocket={} ",
        n.name,
        or_null(&n.arch),
        n.cores_per_socket
    ));
    l.push(format!(
        "CPUAlloc={} CPUEfctv={} CPUTot={} CPULoad={}",
        n.alloc_cpus,
        n.cpus,
        n.cpus,
        n.cpu_load
            .map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| "N/A".into())
    ));
    let feats = n.features.join(",");
    l.push(format!("AvailableFeatures={}", or_null(&feats)));
    l.push(format!("ActiveFeatures={}", or_null(&feats)));
    l.push(format!("Gres={}", n.gres_text()));
    // GPUs used outside sluice or unhealthy (issue 24; Slurm has no such line): only
    // when there are some.
    if !n.gpu_busy.is_empty() || !n.gpu_faults.is_empty() {
        let failed: Vec<String> = n.gpu_faults.iter().map(|f| f.index.to_string()).collect();
        l.push(format!(
            "GpusBusy={} GpusFailed={} GpuForeign={}",
            n.gpus_busy_text(),
            or_null(&failed.join(",")),
            n.gpu_foreign.as_str()
        ));
    }
    l.push(format!(
        "NodeAddr={} NodeHostName={} Version={}",
        n.addr,
        n.hostname,
        or_null(&n.version)
    ));
    l.push(format!("OS={} ", or_null(&n.os)));
    l.push(format!(
        "RealMemory={} AllocMem={} FreeMem={} Sockets={} Boards=1",
        n.real_memory,
        n.alloc_mem,
        n.free_mem
            .map(|x| x.to_string())
            .unwrap_or_else(|| "N/A".into()),
        n.sockets
    ));
    l.push(format!(
        "State={} ThreadsPerCore={} TmpDisk={} Weight={} Owner=N/A MCS_label=N/A",
        n.state_scontrol(),
        n.threads_per_core,
        n.tmp_disk,
        n.weight
    ));
    if let Some(next) = n.next_state() {
        l.push(format!("NextState={next}"));
    }
    l.push(format!("Partitions={} ", n.partitions.join(",")));
    let none = |t: Option<i64>| t.map(fmt_ts).unwrap_or_else(|| "None".into());
    l.push(format!(
        "BootTime={} SlurmdStartTime={}",
        none(n.boot_time),
        none(n.agent_start_time)
    ));
    l.push(format!("LastBusyTime={}", ts_or_unknown(n.last_busy_time)));
    let gpus: u32 = n
        .gres
        .iter()
        .filter(|g| g.name == "gpu")
        .map(|g| g.count)
        .sum();
    let gpus_used: u32 = n
        .gres
        .iter()
        .enumerate()
        .filter(|(_, g)| g.name == "gpu")
        .map(|(i, _)| n.gres_used(i))
        .sum();
    l.push(format!(
        "CfgTRES=cpu={},mem={},billing={}{}",
        n.cpus,
        jobfmt::fmt_mem_exact(n.real_memory),
        n.cpus,
        if gpus > 0 {
            format!(",gres/gpu={gpus}")
        } else {
            String::new()
        }
    ));
    let alloc = if n.alloc_cpus > 0 {
        format!(
            "cpu={},mem={}{}",
            n.alloc_cpus,
            jobfmt::fmt_mem_exact(n.alloc_mem),
            if gpus_used > 0 {
                format!(",gres/gpu={gpus_used}")
            } else {
                String::new()
            }
        )
    } else {
        String::new()
    };
    l.push(format!("AllocTRES={alloc}"));
    l.push("CapWatts=n/a".into());
    l.push("CurrentWatts=0 AveWatts=0".into());
    l.push("ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s".into());
    if let Some(r) = n.reason.as_deref() {
        let who = n.reason_uid.map(user_name).unwrap_or_else(|| "root".into());
        l.push(format!(
            "Reason={r} [{who}@{}]",
            ts_or_unknown(n.reason_time)
        ));
    }
    l
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// One node record as `scontrol show node` prints it.
pub fn render_node(n: &Node, oneliner: bool) -> String {
    join_record(&node_lines(n), oneliner, false)
}

/// The lines of `scontrol show partition` for one partition.
pub fn partition_lines(p: &Partition, nodes: &[Node]) -> Vec<String> {
    let members: Vec<&Node> = nodes.iter().filter(|n| p.nodes.contains(&n.name)).collect();
    let cpus: u32 = members.iter().map(|n| n.cpus).sum();
    let mem: u64 = members.iter().map(|n| n.real_memory).sum();
    let nnodes = p.nodes.len();
    let gpus: u64 = members
        .iter()
        .flat_map(|n| &n.gres)
        .filter(|g| g.name == "gpu")
        .map(|g| u64::from(g.count))
        .sum();
    // The partition's whole TRES, billed with its weights (`model::billing`; the
    // front-end does not know PriorityFlags, so MAX_TRES is not applied here).
    let totals: crate::model::billing::Tres = [
        ("cpu", u64::from(cpus)),
        ("mem", mem),
        ("node", nnodes as u64),
        ("gres/gpu", gpus),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let billing =
        crate::model::billing::BillingTable::from_partitions(std::slice::from_ref(p), false)
            .billable(&p.name, &totals) as u64;
    let mut lines = vec![
        format!("PartitionName={}", p.name),
        format!(
            "AllowGroups={} AllowAccounts={} AllowQos={}",
            list(&p.allow_groups),
            list(&p.allow_accounts),
            list(&p.allow_qos)
        ),
        format!(
            "AllocNodes=ALL Default={} QoS={}",
            if p.default { "YES" } else { "NO" },
            p.qos.as_deref().unwrap_or("N/A")
        ),
        format!(
            "DefaultTime={} DisableRootJobs=NO ExclusiveUser={} GraceTime={} Hidden={}",
            p.default_time
                .map(|t| t.to_hms())
                .unwrap_or_else(|| "NONE".into()),
            yes_no(p.exclusive_user),
            p.grace_time,
            yes_no(p.hidden)
        ),
        format!(
            "MaxNodes={} MaxTime={} MinNodes={} LLN=NO MaxCPUsPerNode={}",
            p.max_nodes
                .map(|n| n.to_string())
                .unwrap_or_else(|| "UNLIMITED".into()),
            p.max_time.to_hms(),
            p.min_nodes,
            p.max_cpus_per_node
                .map(|n| n.to_string())
                .unwrap_or_else(|| "UNLIMITED".into())
        ),
        format!("Nodes={}", or_null(&hostlist::compress(&p.nodes))),
        format!(
            "PriorityJobFactor={} PriorityTier={} RootOnly=NO ReqResv=NO OverSubscribe={}",
            p.priority_job_factor,
            p.priority_tier,
            p.oversubscribe.as_text()
        ),
        format!(
            "OverTimeLimit={} PreemptMode={}",
            p.over_time_text(),
            p.preempt_mode.unwrap_or_default().as_str()
        ),
        format!(
            "State={} TotalCPUs={cpus} TotalNodes={nnodes} SelectTypeParameters=NONE",
            p.state.as_str()
        ),
        {
            let mut d = Vec::new();
            if let Some(c) = p.def_cpu_per_gpu {
                d.push(format!("DefCpuPerGPU={c}"));
            }
            if let Some(m) = p.def_mem_per_gpu {
                d.push(format!("DefMemPerGPU={m}"));
            }
            format!(
                "JobDefaults={}",
                if d.is_empty() {
                    "(null)".into()
                } else {
                    d.join(",")
                }
            )
        },
        format!(
            "{} MaxMemPerNode={}",
            match (p.def_mem_per_cpu, p.def_mem_per_node) {
                (Some(c), _) => format!("DefMemPerCPU={c}"),
                (None, Some(n)) => format!("DefMemPerNode={n}"),
                (None, None) => "DefMemPerNode=UNLIMITED".into(),
            },
            p.max_mem_per_node
                .map(|n| n.to_string())
                .unwrap_or_else(|| "UNLIMITED".into())
        ),
        format!(
            "TRES=cpu={cpus},mem={},node={nnodes}{}{}",
            jobfmt::fmt_mem_exact(mem),
            match billing {
                0 => String::new(),
                b => format!(",billing={b}"),
            },
            if gpus > 0 {
                format!(",gres/gpu={gpus}")
            } else {
                String::new()
            }
        ),
    ];
    // Slurm prints the weights after the TRES line when the partition has them.
    if let Some(w) = &p.billing_weights {
        lines.push(format!("TRESBillingWeights={}", w.text));
    }
    lines
}

fn list(v: &Option<Vec<String>>) -> String {
    v.as_ref().map_or("ALL".into(), |v| v.join(","))
}

fn yes_no(b: bool) -> &'static str {
    if b { "YES" } else { "NO" }
}

/// One partition record as `scontrol show partition` prints it.
pub fn render_partition(p: &Partition, nodes: &[Node], oneliner: bool) -> String {
    join_record(&partition_lines(p, nodes), oneliner, false)
}

/// `scontrol show config`: header, `Key = Value` lines, and the controller's status.
pub fn render_config(pairs: &[(String, String)], now: i64, host: &str) -> String {
    let mut s = format!("Configuration data as of {}\n", fmt_ts(now));
    for (k, v) in pairs {
        s.push_str(&format!("{k:<23} = {v}\n"));
    }
    s.push_str(&format!("\nSlurmctld(primary) at {host} is UP\n"));
    s
}

/// Runs `scontrol` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Ok((_, w)) = parse_args(&args)
        && w.first().is_some_and(|w| abbrev(w, "help", 2))
    {
        print!("{}", help_text());
        return ExitCode::SUCCESS;
    }
    let out = match parse_args(&args).and_then(|(o, w)| Ok((o, parse_command(&w)?))) {
        Err(msg) => Output::err(format!("{msg}\n")),
        Ok((opts, _))
            if opts.cluster.as_deref().is_some_and(|l| {
                let ours = crate::config::Config::load()
                    .map(|c| c.cluster_name)
                    .unwrap_or_default();
                super::client::check_clusters(l, false, &ours).is_err()
            }) =>
        {
            // Another cluster's jobs and nodes are not this controller's to touch.
            let list = opts.cluster.clone().unwrap_or_default();
            let msg = super::client::check_clusters(&list, false, "")
                .err()
                .unwrap_or_default();
            Output::err(format!("scontrol: error: {msg}\n"))
        }
        Ok((opts, cmd)) => {
            let mut client: Option<Client> = None;
            let mut req = |r: &Request| -> Result<Response, ClientError> {
                if client.is_none() {
                    client = Some(Client::connect()?.0);
                }
                match client.as_mut() {
                    Some(c) => c.request(r),
                    None => Err(ClientError::Unreachable { hint: None }),
                }
            };
            let nodelist = std::env::var("SLURM_NODELIST").ok();
            let host = crate::config::short_hostname();
            execute(&cmd, &opts, nodelist.as_deref(), &host, &mut req)
        }
    };
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    ExitCode::from(out.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::jobfmt::testjobs::{T0, ended, job, running};
    use crate::model::{ExitStatus, NodeState, Reason, TimeLimit};
    use crate::proto::SlurmError;

    #[test]
    fn every_command_in_the_help_is_one_scontrol_knows() {
        for (c, _) in COMMANDS {
            let w: Vec<String> = c
                .split_whitespace()
                .take_while(|w| !w.starts_with('<') && !w.contains('='))
                .map(String::from)
                .collect();
            if w == ["help"] {
                continue;
            }
            if let Err(e) = parse_command(&w) {
                assert!(
                    !e.contains("invalid keyword") && !e.contains("invalid entity"),
                    "{c}: {e}"
                );
            }
        }
        let (_, w) = parse_args(&words("-o --help")).unwrap();
        assert_eq!(w, ["help"]);
        let (o, w) = parse_args(&words("show -d job 5 --clusters=c1")).unwrap();
        assert_eq!(w, ["show", "job", "5"]);
        assert!(o.details);
        assert_eq!(o.cluster.as_deref(), Some("c1"));
        assert!(help_text().contains("  -o, --oneliner"));
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn job168() -> Job {
        let mut j = running(job(168, "run16"), 16, T0 + 2);
        j.priority = 11750;
        j.time_limit = TimeLimit::Minutes(10);
        j
    }

    fn golden_168(details: bool) -> String {
        let t = fmt_ts;
        format!(
            "JobId=168 JobName=run16
   UserId=alice(2001) GroupId=alice(2001) MCS_label=N/A
   Priority=11750 Nice=0 Account=research QOS=normal
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
{}   RunTime=00:00:31 TimeLimit=00:10:00 TimeMin=N/A
   SubmitTime={} EligibleTime={}
   AccrueTime={}
   StartTime={} EndTime={} Deadline=N/A
   SuspendTime=None SecsPreSuspend=0 LastSchedEval={} Scheduler=Main
   Partition=debug AllocNode:Sid=localhost:0
   ReqNodeList=(null) ExcNodeList=(null)
   NodeList=node01
   BatchHost=node01
   NumNodes=1 NumCPUs=16 NumTasks=16 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=16,mem=6400M,node=1,billing=16
   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*
   MinCPUsNode=1 MinMemoryCPU=400M MinTmpDiskNode=0
   Features=(null) DelayBoot=00:00:00
   OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null)
   Command=(null)
   WorkDir=/home/alice/golden-work
   StdErr=/home/alice/golden-work/slurm-168.out
   StdIn=/dev/null
   StdOut=/home/alice/golden-work/slurm-168.out
   Power=
   

",
            if details {
                "   DerivedExitCode=0:0\n"
            } else {
                ""
            },
            t(T0),
            t(T0),
            t(T0),
            t(T0 + 2),
            t(T0 + 2 + 600),
            t(T0 + 2),
        )
    }

    #[test]
    fn show_job_running_matches_golden() {
        let j = job168();
        assert_eq!(render_job(&j, T0 + 33, false, false), golden_168(false));
        assert_eq!(render_job(&j, T0 + 33, true, false), golden_168(true));
    }

    #[test]
    fn show_job_oneliner_is_one_line_with_trailing_space() {
        let line = render_job(&job168(), T0 + 33, false, true);
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.starts_with("JobId=168 JobName=run16 UserId=alice(2001) GroupId="));
        assert!(
            line.ends_with(
                "StdIn=/dev/null StdOut=/home/alice/golden-work/slurm-168.out Power= \n"
            )
        );
        // The one-liner is the multi-line record with "\n   " turned into spaces.
        let multi = render_job(&job168(), T0 + 33, false, false);
        assert_eq!(
            multi.trim_end_matches('\n').replace("\n   ", " "),
            line.trim_end_matches('\n')
        );
    }

    #[test]
    fn show_job_pending_held_and_finished() {
        let mut j = job(174, "held");
        j.priority = 0;
        j.reason = Reason::JobHeldUser;
        j.eligible_time = None;
        let s = render_job(&j, T0 + 10, false, false);
        assert!(s.contains("   JobState=PENDING Reason=JobHeldUser Dependency=(null)\n"));
        assert!(s.contains(&format!(
            "   SubmitTime={} EligibleTime=Unknown\n   AccrueTime=Unknown\n",
            fmt_ts(T0)
        )));
        assert!(s.contains("   StartTime=Unknown EndTime=Unknown Deadline=N/A\n"));
        assert!(s.contains("   NodeList=\n   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1"));
        assert!(!s.contains("BatchHost"));
        assert!(s.contains("   TRES=cpu=1,mem=400M,node=1,billing=1\n"));

        let f = ended(
            running(job(195, "exit3"), 1, T0 + 3),
            JobState::Failed,
            ExitStatus { code: 3, signal: 0 },
            T0 + 3,
        );
        let s = render_job(&f, T0 + 100, false, false);
        assert!(s.contains("JobState=FAILED"));
        assert!(s.contains("ExitCode=3:0\n   RunTime=00:00:00 TimeLimit=01:00:00"));
        assert!(s.contains(&format!(
            "StartTime={} EndTime={} Deadline",
            fmt_ts(T0 + 3),
            fmt_ts(T0 + 3)
        )));
    }

    #[test]
    fn show_job_begin_time_and_options() {
        let mut j = job(176, "later");
        j.reason = Reason::BeginTime;
        j.spec.begin = Some(T0 + 3600);
        j.spec.command = "/home/alice/golden-work/env.sh".into();
        j.spec.cpus_per_task = Some(2);
        j.spec.ntasks_per_node = Some(2);
        j.spec.stdout = Some("out-%j-%x.txt".into());
        j.spec.stderr = Some("/tmp/err-%u.txt".into());
        j.req_mem = MemReq::PerNode(1024);
        let s = render_job(&j, T0, false, false);
        assert!(s.contains(&format!(
            "StartTime={} EndTime={}",
            fmt_ts(T0 + 3600),
            fmt_ts(T0 + 7200)
        )));
        assert!(s.contains("   Command=/home/alice/golden-work/env.sh\n"));
        assert!(s.contains("NtasksPerN:B:S:C=2:0:*:*"));
        assert!(s.contains("   MinCPUsNode=4 MinMemoryNode=1G MinTmpDiskNode=0\n"));
        assert!(s.contains("CPUs/Task=2"));
        assert!(s.contains("   StdErr=/tmp/err-alice.txt\n"));
        assert!(s.contains("   StdOut=/home/alice/golden-work/out-176-later.txt\n"));
    }

    #[test]
    fn show_job_gpu_request_lines() {
        let g = |s: &str| Some(crate::model::gres::parse_gpus(s).unwrap());
        let mut j = job(180, "gpus");
        j.spec.gpus = g("4");
        j.spec.gpus_per_socket = g("a100:1");
        j.spec.sockets_per_node = Some(2);
        j.spec.cpus_per_gpu = Some(3);
        j.spec.mem_per_gpu = Some(2048);
        j.spec.ntasks_per_gpu = Some(2);
        let s = render_job(&j, T0, false, false);
        assert!(
            s.contains("   Socks/Node=2 NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n"),
            "{s}"
        );
        assert!(
            s.contains(
                "   Power=\n   CpusPerTres=gres:gpu:3\n   MemPerTres=gres:gpu:2048\n   \
                 TresPerJob=gres:gpu:4\n   TresPerSocket=gres:gpu:a100:1\n   NtasksPerTRES=2\n"
            ),
            "{s}"
        );
        let plain = render_job(&job(181, "plain"), T0, false, false);
        assert!(plain.contains("Socks/Node=* "), "{plain}");
        assert!(!plain.contains("NtasksPerTRES") && !plain.contains("TresPerSocket"));
    }

    fn node01() -> Node {
        let mut n = Node::new("node01", 32, 16000);
        n.state = NodeState::Up;
        n.addr = "127.0.0.1".into();
        n.arch = "x86_64".into();
        n.sockets = 2;
        n.cores_per_socket = 16;
        n.alloc_cpus = 27;
        n.alloc_mem = 10800;
        n.free_mem = Some(23660);
        n.cpu_load = Some(0.64);
        n.version = "22.05.8".into();
        n.os = "Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0".into();
        n.partitions = vec!["debug".into(), "batch".into()];
        n.boot_time = Some(T0 - 1127);
        n.agent_start_time = Some(T0 - 301);
        n.last_busy_time = Some(T0 - 1);
        n
    }

    #[test]
    fn show_node_matches_golden() {
        let t = fmt_ts;
        let want = format!(
            "NodeName=node01 Arch=x86_64 CoresPerSocket=16 
   CPUAlloc=27 CPUEfctv=32 CPUTot=32 CPULoad=0.64
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=node01 Version=22.05.8
   OS=Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=16000 AllocMem=10800 FreeMem=23660 Sockets=2 Boards=1
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug,batch 
   BootTime={} SlurmdStartTime={}
   LastBusyTime={}
   CfgTRES=cpu=32,mem=16000M,billing=32
   AllocTRES=cpu=27,mem=10800M
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s

",
            t(T0 - 1127),
            t(T0 - 301),
            t(T0 - 1)
        );
        assert_eq!(render_node(&node01(), false), want);
        let one = render_node(&node01(), true);
        assert_eq!(one.matches('\n').count(), 1);
        assert!(one.contains(" CPUTot=32 "));
    }

    fn partitions() -> Vec<Partition> {
        let mut debug = Partition::new("debug", vec!["node01".into()]);
        debug.default = true;
        debug.max_time = TimeLimit::Minutes(60);
        let batch = Partition::new("batch", vec!["node01".into()]);
        vec![debug, batch]
    }

    #[test]
    fn show_partition_matches_golden() {
        let want = "PartitionName=debug
   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL
   AllocNodes=ALL Default=YES QoS=N/A
   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO
   MaxNodes=UNLIMITED MaxTime=01:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED
   Nodes=node01
   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO
   OverTimeLimit=NONE PreemptMode=OFF
   State=UP TotalCPUs=32 TotalNodes=1 SelectTypeParameters=NONE
   JobDefaults=(null)
   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED
   TRES=cpu=32,mem=16000M,node=1,billing=32

";
        let parts = partitions();
        assert_eq!(render_partition(&parts[0], &[node01()], false), want);
        let one = render_partition(&parts[1], &[node01()], true);
        assert!(one.starts_with("PartitionName=batch AllowGroups=ALL "));
        assert!(one.contains(" MaxTime=UNLIMITED "));
        assert!(one.split_whitespace().all(|t| t.contains('=')), "{one}");
    }

    #[test]
    fn config_lines_are_padded() {
        let pairs = vec![
            ("MinJobAge".to_string(), "300 sec".to_string()),
            (
                "AccountingStorageBackupHost".to_string(),
                "(null)".to_string(),
            ),
        ];
        let s = render_config(&pairs, T0, "vm");
        let want = format!(
            "Configuration data as of {}\nMinJobAge               = 300 sec\n\
             AccountingStorageBackupHost = (null)\n\nSlurmctld(primary) at vm is UP\n",
            fmt_ts(T0)
        );
        assert_eq!(s, want);
    }

    /// Runs argv against a fake controller answering with `answer`, recording requests.
    fn exec_with(argv: &str, answer: Response) -> (Output, Vec<Request>) {
        let mut seen = Vec::new();
        let args = words(argv);
        let out = match parse_args(&args).and_then(|(o, w)| Ok((o, parse_command(&w)?))) {
            Err(m) => Output::err(format!("{m}\n")),
            Ok((opts, cmd)) => {
                let mut req = |r: &Request| {
                    seen.push(r.clone());
                    Ok(answer.clone())
                };
                execute(&cmd, &opts, Some("a[1-2],b7"), "vm", &mut req)
            }
        };
        (out, seen)
    }

    #[test]
    fn json_outside_show_job_and_licenses_is_refused_not_ignored() {
        let (o, seen) = exec_with("--json show node n1", Response::Ok);
        assert_eq!(o.code, 1, "{o:?}");
        assert!(o.stdout.is_empty() && o.stderr.contains("not supported yet by sluice"));
        assert!(seen.is_empty());
    }

    #[test]
    fn hostlist_commands_never_contact_the_controller() {
        let (o, seen) = exec_with("show hostnames node-[001-003,007]", Response::Ok);
        assert_eq!(o.stdout, "node-001\nnode-002\nnode-003\nnode-007\n");
        assert!(seen.is_empty());
        let (o, _) = exec_with("show hostname", Response::Ok);
        assert_eq!(o.stdout, "a1\na2\nb7\n");
        let (o, _) = exec_with("SHOW HOSTN n[1-2]", Response::Ok);
        assert_eq!(o.stdout, "n1\nn2\n");
        let (o, _) = exec_with(
            "show hostlist node-001,node-002,node-003,node-007",
            Response::Ok,
        );
        assert_eq!(o.stdout, "node-[001-003,007]\n");
        let (o, _) = exec_with("show hostlist node1,node2,node10,node3", Response::Ok);
        assert_eq!(o.stdout, "node[1-2,10,3]\n");
        let (o, _) = exec_with(
            "show hostlistsorted node-007,node-001,node-003,node-002,gpu1",
            Response::Ok,
        );
        assert_eq!(o.stdout, "gpu1,node-[001-003,007]\n");
        let (o, _) = exec_with("show hostlist tux2,tux1,tux2", Response::Ok);
        assert_eq!(o.stdout, "tux[2,1-2]\n");
        let (o, seen) = exec_with("show hostlistsorted tux2,tux1,tux2", Response::Ok);
        assert_eq!(o.stdout, "tux[1-2,2]\n");
        assert!(seen.is_empty());
        let (o, _) = exec_with("show hostnames n[1-3]-[a,b],x", Response::Ok);
        assert_eq!(o.code, 0);
        assert!(o.stdout.is_empty());
        assert!(o.stderr.ends_with("Invalid hostlist: n[1-3]-[a,b],x\n"));
    }

    #[test]
    fn show_job_errors_and_queries() {
        let empty = Response::Jobs {
            jobs: vec![],
            now: T0,
        };
        let (o, seen) = exec_with("show job 999999", empty.clone());
        assert_eq!(o.code, 1);
        assert_eq!(
            o.stderr,
            "slurm_load_jobs error: Invalid job id specified\n"
        );
        assert_eq!(
            seen,
            vec![Request::Jobs(JobFilter {
                ids: vec![999999],
                ..JobFilter::default()
            })]
        );
        let (o, seen) = exec_with("show job abc", empty);
        assert_eq!(o.code, 1);
        assert!(seen.is_empty());
        let jobs = Response::Jobs {
            jobs: vec![job168()],
            now: T0 + 33,
        };
        let (o, _) = exec_with("-o show job 168", jobs.clone());
        assert_eq!(o.stdout.lines().count(), 1);
        let (o, _) = exec_with("show -d jobs 168", jobs.clone());
        assert_eq!(o.stdout, golden_168(true));
        let (o, _) = exec_with("show job 168 --details", jobs);
        assert!(o.stdout.contains("DerivedExitCode=0:0"));
    }

    #[test]
    fn show_licenses_text_and_json() {
        let mut j = crate::cli::jobfmt::testjobs::running(
            crate::cli::jobfmt::testjobs::job(5, "m"),
            1,
            crate::cli::jobfmt::testjobs::T0,
        );
        j.spec.licenses = crate::model::gres::parse_licenses("matlab:2").unwrap();
        let pending = crate::cli::jobfmt::testjobs::job(6, "p");
        let mut p2 = pending.clone();
        p2.spec.licenses = crate::model::gres::parse_licenses("matlab:1").unwrap();
        let lics = license_use("matlab:5,ansys:1", &[j, p2]);
        assert_eq!(lics[0].name, "ansys");
        assert_eq!((lics[1].total, lics[1].used), (5, 2));
        assert_eq!(
            render_licenses(&lics, None, false, false, "22.05.8"),
            "LicenseName=ansys\n    Total=1 Used=0 Free=1 Reserved=0 Remote=no\n\
             LicenseName=matlab\n    Total=5 Used=2 Free=3 Reserved=0 Remote=no\n"
        );
        assert_eq!(
            render_licenses(&lics, Some("matlab"), true, false, "22.05.8"),
            "LicenseName=matlab Total=5 Used=2 Free=3 Reserved=0 Remote=no\n"
        );
        assert_eq!(
            render_licenses(&license_use("(null)", &[]), None, false, false, "22.05.8"),
            "No licenses configured in Slurm.\n"
        );
        let doc = render_licenses(&lics, None, false, true, "22.05.8");
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["meta"]["plugin"]["type"], "openapi/v0.0.38");
        assert_eq!(v["licenses"][1]["LicenseName"], "matlab");
        assert_eq!(v["licenses"][1]["Used"], 2);
        assert_eq!(v["licenses"][1]["Free"], 3);
        assert!(doc.contains("\"LicenseName\": \"ansys\",\n      \"Total\": 1,"));
        assert!(matches!(
            parse_command(&["show".into(), "lic".into()]),
            Ok(Command::Show(Show::Licenses(None)))
        ));
    }

    #[test]
    fn show_node_and_partition_not_found() {
        let nodes = Response::Nodes {
            nodes: vec![node01()],
            partitions: partitions(),
            now: T0,
        };
        let (o, _) = exec_with("show node nosuch", nodes.clone());
        assert_eq!((o.code, o.stdout.as_str()), (1, "Node nosuch not found\n"));
        let (o, _) = exec_with("show partition nosuch", nodes.clone());
        assert_eq!(
            (o.code, o.stdout.as_str()),
            (1, "Partition nosuch not found\n")
        );
        let (o, _) = exec_with("show part", nodes.clone());
        assert_eq!(o.stdout.matches("PartitionName=").count(), 2);
        let (o, _) = exec_with("show part debug -o", nodes.clone());
        assert_eq!(o.stdout.lines().count(), 1);
        let (o, _) = exec_with("show n node01", nodes);
        assert!(o.stdout.starts_with("NodeName=node01 "));
    }

    #[test]
    fn hold_release_errors_follow_slurm() {
        let denied = Response::Results(vec![JobResult::new(175, Some(SlurmError::AccessDenied))]);
        let (o, seen) = exec_with("release 175", denied);
        assert_eq!(o.code, 1);
        assert_eq!(
            o.stderr,
            "Access/permission denied for job 175\nslurm_suspend error: Access/permission denied\n"
        );
        assert_eq!(
            seen,
            vec![Request::Release {
                ids: vec![175],
                array_tasks: vec![]
            }]
        );
        let (o, _) = exec_with("hold 999999", Response::Error(SlurmError::InvalidJobId));
        assert_eq!(
            o.stderr,
            "Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n"
        );
        let (o, seen) = exec_with("uhold 174,176 177", Response::Results(vec![]));
        assert_eq!(o, Output::default());
        assert_eq!(
            seen,
            vec![Request::Hold {
                ids: vec![174, 176, 177],
                user_hold: true,
                array_tasks: vec![]
            }]
        );
        let (_, seen) = exec_with("requeuehold 5", Response::Ok);
        assert_eq!(
            seen,
            vec![Request::Requeue {
                ids: vec![5],
                hold: true,
                array_tasks: vec![]
            }]
        );
        let (_, seen) = exec_with("requeue 5", Response::Ok);
        assert_eq!(
            seen,
            vec![Request::Requeue {
                ids: vec![5],
                hold: false,
                array_tasks: vec![]
            }]
        );
    }

    #[test]
    fn show_topology_asks_the_controller_and_prints_switch_lines() {
        let t = crate::model::topology::parse_topology_conf(
            "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\nSwitchName=top Switches=s[0-1]\n",
        )
        .unwrap();
        let answer = Response::Topology(Box::new(t));
        let (o, seen) = exec_with("show topology", answer.clone());
        assert_eq!(seen, vec![Request::Topology]);
        assert_eq!(
            (o.code, o.stdout.as_str()),
            (
                0,
                "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n[1-2]\n\
                 SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n\
                 SwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-4] Switches=s[0-1]\n"
            )
        );
        let (o, _) = exec_with("show topo n3", answer.clone());
        assert_eq!(o.stdout, "SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n");
        let (o, _) = exec_with("show topology zz", answer);
        assert_eq!(
            (o.code, o.stdout.as_str()),
            (1, "Switch/block zz not found\n")
        );
        let (o, _) = exec_with("show topology", Response::Topology(Box::default()));
        assert_eq!(
            (o.code, o.stdout.as_str()),
            (0, "No topology information available\n")
        );
    }

    #[test]
    fn keywords_and_bad_input() {
        let (o, _) = exec_with("bogus", Response::Ok);
        assert_eq!((o.code, o.stderr.as_str()), (1, "invalid keyword: bogus\n"));
        let (o, seen) = exec_with("reconfig", Response::Ok);
        assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "", ""));
        assert!(
            matches!(seen.as_slice(), [Request::Reconfigure]),
            "{seen:?}"
        );
        let (o, _) = exec_with(
            "reconfigure",
            Response::Error(SlurmError::Other("bad config".into())),
        );
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (1, "slurm_reconfigure error: bad config\n")
        );
        let (o, seen) = exec_with("reconfigure now", Response::Ok);
        assert_eq!(o.code, 1);
        assert!(seen.is_empty());
        let (o, _) = exec_with("--bogus show job", Response::Ok);
        assert_eq!(o.code, 1);
        assert!(
            o.stderr
                .starts_with("scontrol: unrecognized option '--bogus'")
        );
        let (o, _) = exec_with("-M anchor show hostlist a1,a2", Response::Ok);
        assert_eq!(o.stdout, "a[1-2]\n");
        let (o, _) = exec_with("show", Response::Ok);
        assert_eq!(o.code, 1);
    }

    #[test]
    fn update_job_and_node() {
        let (o, seen) = exec_with("update JobId=12 TimeLimit=10 Name=x Nice=5", Response::Ok);
        assert_eq!(o, Output::default());
        assert_eq!(
            seen,
            vec![Request::UpdateJob {
                id: 12,
                updates: vec![
                    JobUpdate::TimeLimit(TimeLimit::Minutes(10)),
                    JobUpdate::Name("x".into()),
                    JobUpdate::Nice(5),
                ],
                tasks: None
            }]
        );
        let (_, seen) = exec_with(
            "update jobid=12 timelimit=0:05:00 partition=batch",
            Response::Ok,
        );
        assert_eq!(
            seen,
            vec![Request::UpdateJob {
                id: 12,
                updates: vec![
                    JobUpdate::TimeLimit(TimeLimit::Minutes(5)),
                    JobUpdate::Partition("batch".into()),
                ],
                tasks: None
            }]
        );
        let (_, seen) = exec_with(
            "update JobId=12 TimeLimit+=30 TimeLimit-=1:00:00",
            Response::Ok,
        );
        assert_eq!(
            seen,
            vec![Request::UpdateJob {
                id: 12,
                updates: vec![JobUpdate::TimeLimitBy(30), JobUpdate::TimeLimitBy(-60)],
                tasks: None,
            }]
        );
        let (o, seen) = exec_with("update JobId=12 TimeLimit+=UNLIMITED", Response::Ok);
        assert_eq!(o.code, 1);
        assert!(seen.is_empty());
        let (o, seen) = exec_with("update JobId=12 TimeLimit=notatime", Response::Ok);
        assert_eq!(o.code, 1);
        assert!(o.stderr.starts_with("Invalid TimeLimit value: notatime"));
        assert!(seen.is_empty());
        let (o, _) = exec_with("update JobId=12 Colour=blue", Response::Ok);
        assert_eq!(
            o.stderr,
            "Update of this parameter is not supported: Colour=blue\nRequest aborted\n"
        );
        let (o, _) = exec_with(
            "update JobId=999999992 TimeLimit=5",
            Response::Error(SlurmError::InvalidJobId),
        );
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (1, "slurm_update error: Invalid job id specified\n")
        );
        let (_, seen) = exec_with(
            "update NodeName=n[1-2] State=DRAIN Reason=disk",
            Response::Ok,
        );
        assert_eq!(
            seen,
            vec![Request::UpdateNode {
                names: vec!["n1".into(), "n2".into()],
                update: NodeUpdate::Drain {
                    reason: "disk".into()
                }
            }]
        );
        let (_, seen) = exec_with("update nodename=n1 state=resume", Response::Ok);
        assert_eq!(
            seen,
            vec![Request::UpdateNode {
                names: vec!["n1".into()],
                update: NodeUpdate::Resume
            }]
        );
        let (o, seen) = exec_with("update NodeName=n1 State=DOWN", Response::Ok);
        assert_eq!(o.code, 1);
        assert!(seen.is_empty());
    }
}
