//! `sacctmgr`: view and change accounts, users, associations, QOS and clusters (cf.
//! src/sacctmgr/, `sacctmgr(1)`).
//!
//! One command per invocation (`sacctmgr [OPTIONS] COMMAND ENTITY ...`); Slurm's
//! interactive shell is not offered. `show`/`list` print Slurm's columns (names,
//! widths, right-justified, a value wider than its column cut with `+`), `-n`, `-p`,
//! `-P`, `format=Name%W`, `where` conditions, `withassoc`/`-s`, `withcoord`. `add`,
//! `modify … set` and `delete` (also of coordinators) build an [`AcctOp`]; the
//! controller applies it and returns the summary sacctmgr prints. On a terminal (and
//! without `-i`), the summary of a preview is shown first with Slurm's "Would you like
//! to commit changes?" prompt; elsewhere the change is committed at once, so scripts
//! need no `-i`.

use super::getopt::{self, Item, OptSpec, opt};
use super::help;
use crate::cli::client::{CallError, Client, answer, error_text};
use crate::model::acct_ops::{AcctOp, Cond, Entity, Setting};
use crate::model::assoc::{
    Account, AssocTree, Limits, Qos, Shares, TresMap, User, UserAssoc, fmt_mem_mib,
};
use crate::proto::{Request, Response};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// How rows are separated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Parsable {
    /// Fixed-width columns.
    #[default]
    No,
    /// `-p`: `|` after every field.
    Trailing,
    /// `-P`: `|` between fields.
    Between,
}

/// Command-line options (they may come before or after the command words).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    pub immediate: bool,
    pub noheader: bool,
    pub parsable: Parsable,
    /// `-s`/`withassoc`: list associations with users and accounts.
    pub with_assoc: bool,
    /// `withcoord`: add the `Coord Accounts` column to a user or account listing.
    pub with_coord: bool,
    pub quiet: bool,
}

/// One `format=` column: a field name and an optional `%W` width (negative: left
/// justified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatItem {
    pub name: String,
    pub width: Option<i32>,
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Show {
        entity: Entity,
        cond: Cond,
        format: Vec<FormatItem>,
    },
    Change(AcctOp),
    /// `dump [CLUSTER] [File=PATH]`: the tree as a flat file (default `CLUSTER.cfg`).
    Dump {
        file: Option<String>,
    },
    /// `load [File=]PATH`: adds what a flat file holds.
    Load {
        file: String,
    },
    Help,
    Version,
}

/// sacctmgr's options (cf. src/sacctmgr/sacctmgr.c), with their `--help` lines.
pub const SPECS: &[OptSpec] = &[
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("immediate", Some('i'), false).doc("", "commit changes without asking"),
    opt("noheader", Some('n'), false).doc("", "print no header line"),
    opt("parsable", Some('p'), false).doc("", "fields delimited by '|', with a trailing '|'"),
    opt("parsable2", Some('P'), false).doc("", "fields delimited by '|', without a trailing '|'"),
    opt("quiet", Some('Q'), false).doc("", "print no messages other than errors"),
    opt("readonly", Some('r'), false).doc("", "accepted; changes are not refused"),
    opt("associations", Some('s'), false).doc("", "show the associations of the listed entities"),
    opt("usage", None, false).doc("", "same as --help"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// The commands, entities and specifications sacctmgr takes, for `--help`.
const COMMANDS: &[(&str, &str)] = &[
    (
        "add|create ENTITY SPECS",
        "add accounts, users, QOS, clusters or coordinators",
    ),
    (
        "modify|update ENTITY where SPECS set SPECS",
        "change the entities that match",
    ),
    (
        "delete|remove ENTITY where SPECS",
        "remove the entities that match",
    ),
    (
        "list|show ENTITY [SPECS]",
        "show entities (format=Field[%W],..., withassoc, withcoord)",
    ),
    (
        "dump [cluster] [File=PATH]",
        "write the associations as a flat file",
    ),
    ("load [File=]PATH", "add what a flat file holds"),
    ("help", "show this help message"),
    ("version", "print the Slurm version"),
];

/// The `--help` text: options, then [`COMMANDS`] and the entities.
fn help_text() -> String {
    let mut more = String::from("Commands:\n");
    for (c, what) in COMMANDS {
        more.push_str(&help::line_with(c, what));
    }
    more.push_str(
        "\nENTITY: account, association, cluster, coordinator, qos, user\n\
         SPECS: KEY=VALUE words; keywords may be abbreviated\n",
    );
    help::help(
        "sacctmgr [OPTIONS] [COMMAND ENTITY [SPECS]]",
        &help::from_getopt(SPECS),
        &more,
    )
}

fn parse_format(v: &str) -> Vec<FormatItem> {
    crate::model::acct_ops::split_list(v)
        .into_iter()
        .map(|f| match f.split_once('%') {
            Some((n, w)) => FormatItem {
                name: n.to_string(),
                width: w.parse::<i32>().ok().filter(|w| *w != 0),
            },
            None => FormatItem {
                name: f,
                width: None,
            },
        })
        .collect()
}

/// Parses the command line (without argv[0]). Errors are the text to print.
pub fn parse(args: &[String]) -> Result<(Opts, Command), String> {
    let mut o = Opts::default();
    let mut words: Vec<String> = Vec::new();
    for item in getopt::parse("sacctmgr", SPECS, args)? {
        match item {
            Item::Operand(w) => words.push(w),
            Item::Opt(name, _) => match name {
                "immediate" => o.immediate = true,
                "noheader" => o.noheader = true,
                "parsable" => o.parsable = Parsable::Trailing,
                "parsable2" => o.parsable = Parsable::Between,
                "associations" => o.with_assoc = true,
                "quiet" => o.quiet = true,
                "help" | "usage" => return Ok((o, Command::Help)),
                "version" => return Ok((o, Command::Version)),
                // --verbose, --readonly: no effect.
                _ => {}
            },
        }
    }
    let Some(verb) = words.first().map(|w| w.to_ascii_lowercase()) else {
        return Err(
            "sacctmgr: error: the interactive mode is not supported yet by sluice; give a command (sacctmgr show assoc)"
                .into(),
        );
    };
    let pre = |full: &str, min: usize| verb.len() >= min && full.starts_with(&verb);
    enum Verb {
        Add,
        Modify,
        Delete,
        Show,
    }
    let v = if pre("add", 3) || pre("create", 2) {
        Verb::Add
    } else if pre("modify", 1) || pre("update", 1) {
        Verb::Modify
    } else if pre("delete", 3) || pre("remove", 3) {
        Verb::Delete
    } else if pre("list", 2) || pre("show", 3) {
        Verb::Show
    } else if pre("help", 2) {
        return Ok((o, Command::Help));
    } else if pre("version", 1) {
        return Ok((o, Command::Version));
    } else if pre("dump", 2) || pre("load", 2) {
        // `dump [cluster] [File=PATH]`, `load [File=]PATH`.
        let mut file = None;
        for w in &words[1..] {
            match w.split_once('=') {
                Some((k, v)) if k.eq_ignore_ascii_case("file") => file = Some(v.to_string()),
                Some((k, _)) if k.eq_ignore_ascii_case("cluster") => {}
                Some((k, _)) => return Err(format!("sacctmgr: error: Unknown option: {k}")),
                None if verb.starts_with('l') => file = Some(w.clone()),
                None => {}
            }
        }
        return Ok((
            o,
            if verb.starts_with('d') {
                Command::Dump { file }
            } else {
                Command::Load {
                    file: file.ok_or("sacctmgr: error: No filename given to load")?,
                }
            },
        ));
    } else if ["archive", "reconfigure", "shutdown", "clear"]
        .iter()
        .any(|k| k.starts_with(&verb) && verb.len() >= 2)
    {
        return Err(format!(
            "sacctmgr: error: '{verb}' is not supported yet by sluice"
        ));
    } else {
        return Err(format!("sacctmgr: error: invalid keyword: {}", words[0]));
    };
    let Some(ent_word) = words.get(1) else {
        return Err(
            "sacctmgr: error: No entity given (account, association, cluster, coordinator, qos, user)".into(),
        );
    };
    let Some(entity) = Entity::parse(ent_word) else {
        if [
            "tres",
            "wckeys",
            "events",
            "problems",
            "transactions",
            "reservations",
            "federations",
            "resources",
            "runawayjobs",
            "stats",
            "configuration",
        ]
        .iter()
        .any(|k| k.starts_with(&ent_word.to_ascii_lowercase()))
        {
            return Err(format!(
                "sacctmgr: error: '{ent_word}' is not supported yet by sluice"
            ));
        }
        return Err(format!("sacctmgr: error: Unknown entity '{ent_word}'"));
    };
    if entity == Entity::Coordinator && matches!(v, Verb::Show | Verb::Modify) {
        return Err(
            "sacctmgr: error: coordinators are only added and deleted; 'show user withcoord' or 'show account withcoord' lists them"
                .into(),
        );
    }
    let rest = &words[2..];
    let unknown_cond =
        |k: &str| format!(" Unknown condition: {k}\n Use keyword 'set' to modify value");
    match v {
        Verb::Show => {
            let mut cond = Cond::default();
            let mut format = Vec::new();
            for w in rest {
                let lw = w.to_ascii_lowercase();
                match lw.as_str() {
                    "where" => continue,
                    "withassoc" | "withassocs" => {
                        o.with_assoc = true;
                        continue;
                    }
                    "withdeleted" | "wopl" | "wopi" | "wolimits" => continue,
                    w if w.len() >= 5 && "withcoordinators".starts_with(w) => {
                        o.with_coord = true;
                        continue;
                    }
                    "tree" | "withsubaccounts" => {
                        return Err(format!(
                            "sacctmgr: error: '{w}' is not supported yet by sluice"
                        ));
                    }
                    _ => {}
                }
                match Setting::parse(w) {
                    Some(s) if s.key.eq_ignore_ascii_case("format") => {
                        format.extend(parse_format(&s.value))
                    }
                    Some(s) => {
                        let mut s = s;
                        if entity == Entity::Qos && s.key.eq_ignore_ascii_case("qos") {
                            s.key = "name".into();
                        }
                        if !cond.take(&s) {
                            return Err(unknown_cond(&s.key));
                        }
                    }
                    None => cond.names.extend(crate::model::acct_ops::split_list(w)),
                }
            }
            Ok((
                o,
                Command::Show {
                    entity,
                    cond,
                    format,
                },
            ))
        }
        Verb::Add => {
            let mut names = Vec::new();
            let mut settings = Vec::new();
            for w in rest {
                if w.eq_ignore_ascii_case("where") || w.eq_ignore_ascii_case("set") {
                    continue;
                }
                match Setting::parse(w) {
                    Some(s) => settings.push(s),
                    None => names.extend(crate::model::acct_ops::split_list(w)),
                }
            }
            Ok((
                o,
                Command::Change(AcctOp::Add {
                    entity,
                    names,
                    settings,
                }),
            ))
        }
        Verb::Modify => {
            let mut cond = Cond::default();
            let mut settings = Vec::new();
            let mut in_set = false;
            for w in rest {
                if w.eq_ignore_ascii_case("set") {
                    in_set = true;
                    continue;
                }
                if w.eq_ignore_ascii_case("where") {
                    in_set = false;
                    continue;
                }
                match (in_set, Setting::parse(w)) {
                    (true, Some(s)) => settings.push(s),
                    (true, None) => return Err(format!(" Unknown option: {w}")),
                    (false, Some(s)) => {
                        if !cond.take(&s) {
                            return Err(unknown_cond(&s.key));
                        }
                    }
                    (false, None) => cond.names.extend(crate::model::acct_ops::split_list(w)),
                }
            }
            Ok((
                o,
                Command::Change(AcctOp::Modify {
                    entity,
                    cond,
                    settings,
                }),
            ))
        }
        Verb::Delete => {
            let mut cond = Cond::default();
            for w in rest {
                if w.eq_ignore_ascii_case("where") {
                    continue;
                }
                match Setting::parse(w) {
                    Some(s) => {
                        if !cond.take(&s) {
                            return Err(unknown_cond(&s.key));
                        }
                    }
                    None => cond.names.extend(crate::model::acct_ops::split_list(w)),
                }
            }
            Ok((o, Command::Change(AcctOp::Delete { entity, cond })))
        }
    }
}

/// One printed row: the association tree and the records the row is about.
#[derive(Clone, Copy)]
pub struct Row<'a> {
    tree: &'a AssocTree,
    /// What is being listed (`show user` or `show account` rows both carry users).
    listing: Entity,
    cluster: &'a str,
    /// The account of an account row, or the account of a user association.
    account: Option<&'a Account>,
    user: Option<&'a User>,
    assoc: Option<&'a UserAssoc>,
    qos: Option<&'a Qos>,
    /// A cluster row's name.
    cluster_row: Option<&'a str>,
}

impl<'a> Row<'a> {
    fn limits(&self) -> Option<&'a Limits> {
        if let Some(a) = self.assoc {
            return Some(&a.limits);
        }
        if let Some(q) = self.qos {
            return Some(&q.limits);
        }
        if self.user.is_none() {
            return self.account.map(|a| &a.limits);
        }
        None
    }

    /// Whether the row is an association (account or user association).
    fn is_assoc(&self) -> bool {
        self.assoc.is_some() || (self.user.is_none() && self.account.is_some())
    }
}

type Val = fn(&Row) -> String;

/// One field sacctmgr can print.
struct FieldDef {
    name: &'static str,
    /// Shortest prefix accepted in `format=`.
    min: usize,
    header: &'static str,
    width: i32,
    value: Val,
}

fn opt_u32(v: Option<u32>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

fn mins(v: Option<u32>) -> String {
    v.map(|m| crate::model::time::fmt_hms(u64::from(m) * 60))
        .unwrap_or_default()
}

fn tres(f: fn(&Limits) -> &TresMap) -> impl Fn(&Row) -> String {
    move |r: &Row| r.limits().map(|l| f(l).to_string()).unwrap_or_default()
}

fn one_tres(m: &TresMap, name: &str) -> String {
    match m.get(name) {
        Some(v) if name == "mem" => fmt_mem_mib(v).trim_end_matches('M').to_string(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn lim(r: &Row, f: fn(&Limits) -> Option<u32>) -> String {
    opt_u32(r.limits().and_then(f))
}

fn qos_list(r: &Row) -> String {
    let mut v = if let Some(a) = r.assoc {
        r.tree.allowed_qos(a)
    } else if r.user.is_none()
        && let Some(a) = r.account
    {
        r.tree.account_qos(&a.name)
    } else {
        return String::new();
    };
    v.sort();
    v.join(",")
}

macro_rules! f {
    ($name:expr, $min:expr, $header:expr, $width:expr, $val:expr) => {
        FieldDef {
            name: $name,
            min: $min,
            header: $header,
            width: $width,
            value: $val,
        }
    };
}

/// The fields, in the order names are matched (Slurm's alphabetical table).
fn fields() -> Vec<FieldDef> {
    vec![
        f!("Account", 3, "Account", 10, |r| {
            r.assoc
                .map(|a| a.account.clone())
                .or_else(|| r.account.map(|a| a.name.clone()))
                .unwrap_or_default()
        }),
        f!("Acct", 4, "Account", 10, |r| {
            r.assoc
                .map(|a| a.account.clone())
                .or_else(|| r.account.map(|a| a.name.clone()))
                .unwrap_or_default()
        }),
        f!("AdminLevel", 2, "Admin", 9, |r| r
            .user
            .map(|u| u.admin_level.as_str().to_string())
            .unwrap_or_default()),
        f!("Clusters", 2, "Cluster", 10, |r| r
            .cluster_row
            .unwrap_or(r.cluster)
            .to_string()),
        f!(
            "Coordinators",
            2,
            "Coord Accounts",
            20,
            |r| match r.listing {
                Entity::User => r
                    .user
                    .map(|u| r.tree.coord_accounts_of(&u.name).join(","))
                    .unwrap_or_default(),
                Entity::Account => r
                    .account
                    .map(|a| r.tree.coordinators_of(&a.name).join(","))
                    .unwrap_or_default(),
                _ => String::new(),
            }
        ),
        f!("ControlHost", 8, "ControlHost", 15, |_| String::new()),
        f!("ControlPort", 8, "ControlPort", 12, |_| "0".into()),
        f!("DefaultAccount", 8, "Def Acct", 10, |r| r
            .user
            .map(|u| u.default_account.clone())
            .unwrap_or_default()),
        f!("DefaultQOS", 8, "Def QOS", 9, |r| {
            if let Some(a) = r.assoc {
                a.default_qos.clone().unwrap_or_default()
            } else if r.is_assoc() {
                r.account
                    .and_then(|a| a.default_qos.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        }),
        f!("Description", 3, "Descr", 20, |r| {
            if let Some(q) = r.qos {
                q.description.clone()
            } else {
                r.account.map(|a| a.description.clone()).unwrap_or_default()
            }
        }),
        f!("Fairshare", 2, "Share", 9, |r| {
            if let Some(a) = r.assoc {
                a.shares.to_string()
            } else if r.is_assoc() {
                r.account.map(|a| a.shares.to_string()).unwrap_or_default()
            } else if r.cluster_row.is_some() {
                Shares::default().to_string()
            } else {
                String::new()
            }
        }),
        f!("Flags", 2, "Flags", 40, |r| r
            .qos
            .map(|q| q
                .flags
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_default()),
        f!("GraceTime", 3, "GraceTime", 10, |r| r
            .qos
            .map(|q| crate::model::time::fmt_hms(u64::from(q.grace_time_secs)))
            .unwrap_or_default()),
        f!("GrpCPUs", 6, "GrpCPUs", 8, |r| r
            .limits()
            .map(|l| one_tres(&l.grp_tres, "cpu"))
            .unwrap_or_default()),
        f!("GrpCPUMins", 7, "GrpCPUMins", 11, |r| r
            .limits()
            .map(|l| one_tres(&l.grp_tres_mins, "cpu"))
            .unwrap_or_default()),
        f!("GrpCPURunMins", 7, "GrpCPURunMins", 13, |r| r
            .limits()
            .map(|l| one_tres(&l.grp_tres_run_mins, "cpu"))
            .unwrap_or_default()),
        f!("GrpTRES", 7, "GrpTRES", 13, |r| tres(|l| &l.grp_tres)(r)),
        f!("GrpTRESMins", 7, "GrpTRESMins", 13, |r| tres(
            |l| &l.grp_tres_mins
        )(r)),
        f!("GrpTRESRunMins", 7, "GrpTRESRunMins", 13, |r| tres(
            |l| &l.grp_tres_run_mins
        )(r)),
        f!("GrpJobs", 4, "GrpJobs", 7, |r| lim(r, |l| l.grp_jobs)),
        f!("GrpMemory", 4, "GrpMem", 7, |r| r
            .limits()
            .map(|l| l
                .grp_tres
                .get("mem")
                .map(|v| v.to_string())
                .unwrap_or_default())
            .unwrap_or_default()),
        f!("GrpNodes", 4, "GrpNodes", 8, |r| r
            .limits()
            .map(|l| one_tres(&l.grp_tres, "node"))
            .unwrap_or_default()),
        f!("GrpSubmitJobs", 4, "GrpSubmit", 9, |r| lim(r, |l| l
            .grp_submit_jobs)),
        f!("GrpWall", 4, "GrpWall", 11, |r| mins(
            r.limits().and_then(|l| l.grp_wall_mins)
        )),
        // The association's id (slurmdbd's numbering, `AssocTree::assign_ids`);
        // empty on rows that are no association (QOS have no ids here).
        f!("ID", 2, "ID", 6, |r| {
            let id = match (r.assoc, r.account) {
                (Some(a), _) => Some(a.id),
                (None, Some(a)) if r.user.is_none() && r.qos.is_none() => Some(a.id),
                _ => None,
            };
            id.filter(|&i| i > 0)
                .map(|i| i.to_string())
                .unwrap_or_default()
        }),
        f!("MaxCPUMinsPerJob", 7, "MaxCPUMins", 11, |r| r
            .limits()
            .map(|l| one_tres(&l.max_tres_mins_per_job, "cpu"))
            .unwrap_or_default()),
        f!("MaxCPUsPerJob", 7, "MaxCPUs", 8, |r| r
            .limits()
            .map(|l| one_tres(&l.max_tres_per_job, "cpu"))
            .unwrap_or_default()),
        f!("MaxCPUsPerUser", 11, "MaxCPUsPU", 9, |r| r
            .limits()
            .map(|l| one_tres(&l.max_tres_per_user, "cpu"))
            .unwrap_or_default()),
        f!("MaxCPUsPU", 9, "MaxCPUsPU", 9, |r| r
            .limits()
            .map(|l| one_tres(&l.max_tres_per_user, "cpu"))
            .unwrap_or_default()),
        f!("MaxTRES", 7, "MaxTRES", 13, |r| tres(
            |l| &l.max_tres_per_job
        )(r)),
        f!("MaxTRESPerJob", 11, "MaxTRES", 13, |r| tres(
            |l| &l.max_tres_per_job
        )(r)),
        f!("MaxTRESPerNode", 11, "MaxTRESPerNode", 14, |r| tres(
            |l| &l.max_tres_per_node
        )(r)),
        f!("MaxTRESMinsPerJob", 8, "MaxTRESMins", 13, |r| tres(
            |l| &l.max_tres_mins_per_job
        )(r)),
        f!("MaxTRESPerAccount", 11, "MaxTRESPA", 13, |r| tres(
            |l| &l.max_tres_per_account
        )(r)),
        f!("MaxTRESPA", 9, "MaxTRESPA", 13, |r| tres(
            |l| &l.max_tres_per_account
        )(r)),
        f!("MaxTRESPerUser", 11, "MaxTRESPU", 13, |r| tres(
            |l| &l.max_tres_per_user
        )(r)),
        f!("MaxTRESPU", 9, "MaxTRESPU", 13, |r| tres(
            |l| &l.max_tres_per_user
        )(r)),
        f!("MaxJobs", 4, "MaxJobs", 7, |r| {
            if r.qos.is_some() {
                lim(r, |l| l.max_jobs_per_user)
            } else {
                lim(r, |l| l.max_jobs)
            }
        }),
        f!("MaxJobsPerAccount", 11, "MaxJobsPA", 9, |r| lim(r, |l| l
            .max_jobs_per_account)),
        f!("MaxJobsPA", 9, "MaxJobsPA", 9, |r| lim(r, |l| l
            .max_jobs_per_account)),
        f!("MaxJobsPerUser", 11, "MaxJobsPU", 9, |r| lim(r, |l| l
            .max_jobs_per_user)),
        f!("MaxJobsPU", 9, "MaxJobsPU", 9, |r| lim(r, |l| l
            .max_jobs_per_user)),
        f!("MaxNodesPerJob", 4, "MaxNodes", 8, |r| r
            .limits()
            .map(|l| one_tres(&l.max_tres_per_job, "node"))
            .unwrap_or_default()),
        f!("MaxSubmitJobs", 4, "MaxSubmit", 9, |r| {
            if r.qos.is_some() {
                lim(r, |l| l.max_submit_jobs_per_user)
            } else {
                lim(r, |l| l.max_submit_jobs)
            }
        }),
        f!("MaxSubmitJobsPerAccount", 17, "MaxSubmitPA", 11, |r| lim(
            r,
            |l| l.max_submit_jobs_per_account
        )),
        f!("MaxSubmitPA", 11, "MaxSubmitPA", 11, |r| lim(r, |l| l
            .max_submit_jobs_per_account)),
        f!("MaxSubmitJobsPerUser", 10, "MaxSubmitPU", 11, |r| lim(
            r,
            |l| l.max_submit_jobs_per_user
        )),
        f!("MaxSubmitPU", 10, "MaxSubmitPU", 11, |r| lim(r, |l| l
            .max_submit_jobs_per_user)),
        f!("MaxWallDurationPerJob", 4, "MaxWall", 11, |r| mins(
            r.limits().and_then(|l| l.max_wall_mins)
        )),
        f!("MinTRESPerJob", 7, "MinTRES", 13, |r| tres(
            |l| &l.min_tres_per_job
        )(r)),
        f!("Name", 2, "Name", 10, |r| {
            if let Some(q) = r.qos {
                q.name.clone()
            } else if let Some(c) = r.cluster_row {
                c.to_string()
            } else if let Some(u) = r.user {
                u.name.clone()
            } else {
                r.account.map(|a| a.name.clone()).unwrap_or_default()
            }
        }),
        f!("Organization", 1, "Org", 20, |r| r
            .account
            .map(|a| a.organization.clone())
            .unwrap_or_default()),
        f!("ParentName", 7, "Par Name", 10, |r| {
            if r.assoc.is_none() && r.is_assoc() {
                r.account.and_then(|a| a.parent.clone()).unwrap_or_default()
            } else {
                String::new()
            }
        }),
        f!("Partition", 4, "Partition", 10, |r| r
            .assoc
            .and_then(|a| a.partition.clone())
            .unwrap_or_default()),
        f!("PreemptMode", 8, "PreemptMode", 11, |r| r
            .qos
            .map(|q| q.preempt_mode.as_str().to_string())
            .unwrap_or_default()),
        f!("PreemptExemptTime", 8, "PreemptExemptTime", 19, |r| r
            .qos
            .and_then(|q| q.preempt_exempt_secs)
            .map(|s| crate::model::time::fmt_hms(u64::from(s)))
            .unwrap_or_default()),
        f!("Preempt", 7, "Preempt", 10, |r| r
            .qos
            .map(|q| {
                let mut v = q.preempt.clone();
                v.sort();
                v.join(",")
            })
            .unwrap_or_default()),
        f!("Priority", 3, "Priority", 10, |r| r
            .qos
            .map(|q| q.priority.to_string())
            .unwrap_or_default()),
        f!("QOSLevel", 3, "QOS", 20, qos_list),
        f!("RPC", 3, "RPC", 5, |_| String::new()),
        f!("Share", 1, "Share", 9, |r| {
            if let Some(a) = r.assoc {
                a.shares.to_string()
            } else if r.is_assoc() {
                r.account.map(|a| a.shares.to_string()).unwrap_or_default()
            } else if r.cluster_row.is_some() {
                Shares::default().to_string()
            } else {
                String::new()
            }
        }),
        f!("UsageFactor", 6, "UsageFactor", 11, |r| r
            .qos
            .map(|q| format!("{:.6}", q.usage_factor))
            .unwrap_or_default()),
        f!("UsageThreshold", 6, "UsageThres", 10, |r| r
            .qos
            .and_then(|q| q.usage_threshold)
            .map(|t| format!("{t:.6}"))
            .unwrap_or_default()),
        f!("User", 1, "User", 10, |r| {
            r.assoc
                .map(|a| a.user.clone())
                .or_else(|| r.user.map(|u| u.name.clone()))
                .unwrap_or_default()
        }),
    ]
}

/// The field `name` (a format item) selects: an exact name first, else the first
/// whose name starts with it, given at least that field's shortest prefix (Slurm's
/// `strncasecmp(full, given, MAX(len, min))`).
fn find_field(table: &[FieldDef], name: &str) -> Option<usize> {
    let n = name.to_ascii_lowercase();
    // Slurm's historical names that are not prefixes of the table's.
    let n = match n.as_str() {
        "grpcpu" => "grpcpus".to_string(),
        "grpmem" => "grpmemory".to_string(),
        "qos" => "qoslevel".to_string(),
        "def qos" | "defqos" => "defaultqos".to_string(),
        "cluster" => "clusters".to_string(),
        "maxsubmit" => "maxsubmitjobs".to_string(),
        "grpsubmit" => "grpsubmitjobs".to_string(),
        "maxwall" => "maxwalldurationperjob".to_string(),
        "maxtresmins" => "maxtresminsperjob".to_string(),
        "fairshare" => "share".to_string(),
        _ => n,
    };
    table
        .iter()
        .position(|f| f.name.eq_ignore_ascii_case(&n))
        .or_else(|| {
            table
                .iter()
                .position(|f| n.len() >= f.min && f.name.to_ascii_lowercase().starts_with(&n))
        })
}

/// The default columns of a listing (Slurm's format strings).
fn default_format(entity: Entity, with_assoc: bool) -> &'static str {
    match (entity, with_assoc) {
        (Entity::Association, _) => {
            "Cluster,Account,User,Partition,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpWall,GrpTRESMins,MaxJobs,MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins"
        }
        (Entity::Account, false) => "Account,Descr,Org",
        (Entity::Account, true) => {
            "Account,Descr,Org,Cluster,ParentName,User,Share,Priority,GrpJobs,GrpNodes,GrpCPUs,GrpMemory,GrpSubmit,GrpWall,GrpCPUMins,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,MaxCPUMins,QOS,DefaultQOS"
        }
        (Entity::User, false) => "User,DefaultAccount,AdminLevel",
        (Entity::User, true) => {
            "User,DefaultAccount,AdminLevel,Cluster,Account,Partition,Share,Priority,MaxJobs,MaxNodes,MaxCPUs,MaxSubmit,MaxWall,MaxCPUMins,QOS,DefaultQOS"
        }
        (Entity::Qos, _) => {
            "Name,Priority,GraceTime,Preempt,PreemptExemptTime,PreemptMode,Flags,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJobs,GrpSubmit,GrpWall,MaxTRES,MaxTRESPerNode,MaxTRESMins,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU,MaxTRESPA,MaxJobsPA,MaxSubmitPA,MinTRES"
        }
        (Entity::Cluster | Entity::Coordinator, _) => {
            "Cluster,ControlHost,ControlPort,RPC,Share,GrpJobs,GrpTRES,GrpSubmit,MaxJobs,MaxTRES,MaxSubmit,MaxWall,QOS,DefaultQOS"
        }
    }
}

/// One cell in fixed-width output: cut to the width with `+` last, right-justified
/// (left for a negative width), followed by a space.
fn cell(v: &str, width: i32) -> String {
    let w = width.unsigned_abs() as usize;
    let n = v.chars().count();
    let s: String = if n > w && w > 0 {
        v.chars().take(w - 1).chain(std::iter::once('+')).collect()
    } else {
        v.to_string()
    };
    if width < 0 {
        format!("{s:<w$} ")
    } else {
        format!("{s:>w$} ")
    }
}

/// The rows of a listing, in Slurm's order.
fn rows<'a>(
    tree: &'a AssocTree,
    cluster: &'a str,
    entity: Entity,
    cond: &Cond,
    with_assoc: bool,
) -> Vec<Row<'a>> {
    let base = Row {
        tree,
        listing: entity,
        cluster,
        account: None,
        user: None,
        assoc: None,
        qos: None,
        cluster_row: None,
    };
    if !cond.clusters.is_empty()
        && !cond.clusters.iter().any(|c| c == cluster)
        && entity != Entity::Cluster
    {
        return Vec::new();
    }
    let any = |l: &[String], v: &str| l.is_empty() || l.iter().any(|x| x == v);
    let assoc_ok = |a: &UserAssoc, users: &[String]| {
        any(users, &a.user)
            && any(&cond.accounts, &a.account)
            && (cond.partitions.is_empty()
                || a.partition
                    .as_ref()
                    .is_some_and(|p| cond.partitions.contains(p)))
    };
    let user_assocs_under = |acct: &str| -> Vec<&'a UserAssoc> {
        let mut v: Vec<&'a UserAssoc> = tree
            .user_assocs
            .iter()
            .filter(|a| a.account == acct)
            .collect();
        v.sort_by(|a, b| (&a.user, &a.partition).cmp(&(&b.user, &b.partition)));
        v
    };
    let mut out = Vec::new();
    match entity {
        Entity::Association => {
            // Depth first: an account, its users, then its sub-accounts.
            let mut stack = vec![tree.root()];
            let users_cond: Vec<String> = cond.users.clone();
            while let Some(a) = stack.pop() {
                if users_cond.is_empty()
                    && cond.partitions.is_empty()
                    && any(&cond.accounts, &a.name)
                    && (cond.parents.is_empty()
                        || a.parent.as_ref().is_some_and(|p| cond.parents.contains(p)))
                {
                    out.push(Row {
                        account: Some(a),
                        ..base
                    });
                }
                for ua in user_assocs_under(&a.name) {
                    if assoc_ok(ua, &users_cond) && cond.parents.is_empty() {
                        out.push(Row {
                            account: tree.account(&ua.account),
                            assoc: Some(ua),
                            user: tree.user(&ua.user),
                            ..base
                        });
                    }
                }
                let mut kids: Vec<&Account> = tree.child_accounts(&a.name).collect();
                kids.sort_by(|x, y| y.name.cmp(&x.name));
                stack.extend(kids);
            }
        }
        Entity::Account => {
            let names: Vec<String> = cond.names.iter().chain(&cond.accounts).cloned().collect();
            for a in tree.accounts.values() {
                if !any(&names, &a.name)
                    || !(cond.parents.is_empty()
                        || a.parent.as_ref().is_some_and(|p| cond.parents.contains(p)))
                {
                    continue;
                }
                if !with_assoc {
                    out.push(Row {
                        account: Some(a),
                        ..base
                    });
                    continue;
                }
                if cond.users.is_empty() {
                    out.push(Row {
                        account: Some(a),
                        ..base
                    });
                }
                for ua in user_assocs_under(&a.name) {
                    if any(&cond.users, &ua.user) {
                        out.push(Row {
                            account: Some(a),
                            assoc: Some(ua),
                            user: tree.user(&ua.user),
                            ..base
                        });
                    }
                }
            }
        }
        Entity::User => {
            let names: Vec<String> = cond.names.iter().chain(&cond.users).cloned().collect();
            for u in tree.users.values() {
                if !any(&names, &u.name) {
                    continue;
                }
                let mut mine: Vec<&UserAssoc> = tree
                    .assocs_of_user(&u.name)
                    .filter(|a| assoc_ok(a, &[]))
                    .collect();
                mine.sort_by(|a, b| (&a.account, &a.partition).cmp(&(&b.account, &b.partition)));
                if !with_assoc {
                    if (cond.accounts.is_empty() && cond.partitions.is_empty()) || !mine.is_empty()
                    {
                        out.push(Row {
                            user: Some(u),
                            ..base
                        });
                    }
                    continue;
                }
                for ua in mine {
                    out.push(Row {
                        user: Some(u),
                        assoc: Some(ua),
                        account: tree.account(&ua.account),
                        ..base
                    });
                }
            }
        }
        Entity::Coordinator => {}
        Entity::Qos => {
            for q in tree.qos.values() {
                if any(&cond.names, &q.name) {
                    out.push(Row {
                        qos: Some(q),
                        ..base
                    });
                }
            }
        }
        Entity::Cluster => {
            let mut names: Vec<&str> = vec![cluster];
            for c in &tree.clusters {
                if !names.contains(&c.name.as_str()) {
                    names.push(&c.name);
                }
            }
            names.sort();
            let want: Vec<String> = cond.names.iter().chain(&cond.clusters).cloned().collect();
            for n in names {
                if any(&want, n) {
                    out.push(Row {
                        cluster_row: Some(n),
                        // The cluster's own association is the root account's.
                        account: (n == cluster).then(|| tree.root()),
                        ..base
                    });
                }
            }
        }
    }
    out
}

/// Renders a listing. Errors: an unknown field name (Slurm's text).
pub fn render_show(
    tree: &AssocTree,
    cluster: &str,
    entity: Entity,
    cond: &Cond,
    format: &[FormatItem],
    o: &Opts,
) -> Result<String, String> {
    let table = fields();
    let items: Vec<FormatItem> = if format.is_empty() {
        let mut v = parse_format(default_format(entity, o.with_assoc));
        // sacctmgr appends the coordinators to the default columns only.
        if o.with_coord && matches!(entity, Entity::User | Entity::Account) {
            v.push(FormatItem {
                name: "Coordinators".into(),
                width: None,
            });
        }
        v
    } else {
        format.to_vec()
    };
    let mut cols: Vec<(usize, i32)> = Vec::new();
    for it in &items {
        let Some(i) = find_field(&table, &it.name) else {
            return Err(format!("Unknown field '{}'", it.name));
        };
        cols.push((i, it.width.unwrap_or(table[i].width)));
    }
    let rows = rows(tree, cluster, entity, cond, o.with_assoc);
    let mut out = String::new();
    let line = |vals: Vec<String>, out: &mut String, header: bool| {
        match o.parsable {
            Parsable::No => {
                for ((_, w), v) in cols.iter().zip(&vals) {
                    if header {
                        let n = w.unsigned_abs() as usize;
                        let cut: String = v.chars().take(n).collect();
                        if *w < 0 {
                            out.push_str(&format!("{cut:<n$} "));
                        } else {
                            out.push_str(&format!("{cut:>n$} "));
                        }
                    } else {
                        out.push_str(&cell(v, *w));
                    }
                }
            }
            Parsable::Trailing => {
                for v in &vals {
                    out.push_str(v);
                    out.push('|');
                }
            }
            Parsable::Between => out.push_str(&vals.join("|")),
        }
        out.push('\n');
    };
    if !o.noheader {
        let names: Vec<String> = cols
            .iter()
            .map(|(i, _)| table[*i].header.to_string())
            .collect();
        line(names, &mut out, true);
        if o.parsable == Parsable::No {
            for (_, w) in &cols {
                let n = w.unsigned_abs() as usize;
                out.push_str(&"-".repeat(n));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in &rows {
        let vals = cols.iter().map(|(i, _)| (table[*i].value)(r)).collect();
        line(vals, &mut out, false);
    }
    Ok(out)
}

/// Asks Slurm's commit question on the terminal; `true` for `y`/`Y`. Gives up after
/// 30 seconds (printing `timeout`, as Slurm does).
fn confirm() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    println!("Would you like to commit changes? (You have 30 seconds to decide)");
    loop {
        print!("(N/y): ");
        let _ = std::io::stdout().flush();
        let stdin = std::io::stdin();
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(30_000u16)) {
            Ok(n) if n > 0 => {}
            _ => {
                println!("timeout");
                return false;
            }
        }
        let mut line = String::new();
        if stdin.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        match line.trim() {
            "y" | "Y" | "yes" | "Yes" => return true,
            "" | "n" | "N" | "no" | "No" => return false,
            _ => println!("Y or N please"),
        }
    }
}

/// Prints why a call failed, as sacctmgr does; the exit code to return.
fn call_failed(e: CallError) -> ExitCode {
    match e {
        CallError::Slurm(e) => print_error(&e),
        other => eprintln!("sacctmgr: error: {other}"),
    }
    ExitCode::from(1)
}

fn print_error(e: &crate::proto::SlurmError) {
    let text = error_text(e);
    if text.starts_with(' ') {
        eprintln!("{text}");
    } else {
        eprintln!("sacctmgr: error: {text}");
    }
}

/// The controller's association tree and cluster name; the exit code after printing
/// the error when it cannot be had.
fn fetch_tree(client: &mut Client) -> Result<(crate::model::assoc::AssocTree, String), ExitCode> {
    client
        .call(
            &Request::AcctTree,
            answer!(Response::AcctTree { tree, cluster, .. } => (*tree, cluster)),
        )
        .map_err(call_failed)
}

/// Entry point.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (o, cmd) = match parse(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let connect = || match Client::connect() {
        Ok((c, _)) => Ok(c),
        Err(e) => {
            eprintln!("sacctmgr: error: {e}");
            if let Some(h) = e.hint() {
                eprintln!("sacctmgr: error: {h}");
            }
            Err(ExitCode::from(1))
        }
    };
    let op = match cmd {
        Command::Help => {
            print!("{}", help_text());
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            match crate::config::Config::load() {
                Ok(c) => println!("slurm {}", c.slurm_version),
                Err(_) => println!("slurm"),
            }
            return ExitCode::SUCCESS;
        }
        Command::Show {
            entity,
            cond,
            format,
        } => {
            let mut client = match connect() {
                Ok(c) => c,
                Err(code) => return code,
            };
            let (tree, cluster) = match fetch_tree(&mut client) {
                Ok(t) => t,
                Err(code) => return code,
            };
            return match render_show(&tree, &cluster, entity, &cond, &format, &o) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Change(op) => op,
        Command::Dump { file } => {
            let mut client = match connect() {
                Ok(c) => c,
                Err(code) => return code,
            };
            let (tree, cluster) = match fetch_tree(&mut client) {
                Ok(x) => x,
                Err(code) => return code,
            };
            let path = file.unwrap_or_else(|| format!("{cluster}.cfg"));
            let text = crate::model::acct_ops::flat::dump(&tree, &cluster);
            return match std::fs::write(&path, text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("sacctmgr: error: Can't open file {path}: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Load { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("sacctmgr: error: Unable to read \"{file}\": {e}");
                    return ExitCode::from(1);
                }
            };
            let mut client = match connect() {
                Ok(c) => c,
                Err(code) => return code,
            };
            let cluster = match fetch_tree(&mut client) {
                Ok((_, c)) => c,
                Err(code) => return code,
            };
            match crate::model::acct_ops::flat::parse(&text, &cluster) {
                Ok(op) => op,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(1);
                }
            }
        }
    };
    let mut client = match connect() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let ask = !o.immediate && std::io::stdin().is_terminal();
    let exit_for = |changed: bool| {
        if changed || matches!(op, AcctOp::Add { .. } | AcctOp::Load { .. }) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    };
    let send =
        |client: &mut Client, commit: bool| -> Result<crate::model::acct_ops::Outcome, ExitCode> {
            let req = Request::AcctChange {
                op: op.clone(),
                commit,
            };
            client
                .call(&req, answer!(Response::AcctChanged(out) => out))
                .map_err(call_failed)
        };
    let first = match send(&mut client, !ask) {
        Ok(out) => out,
        Err(code) => return code,
    };
    if !o.quiet || !first.changed {
        for l in &first.lines {
            println!("{l}");
        }
    }
    if !ask || !first.changed {
        return exit_for(first.changed);
    }
    if !confirm() {
        println!(" Changes Discarded");
        return ExitCode::SUCCESS;
    }
    match send(&mut client, true) {
        Ok(out) => exit_for(out.changed),
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests;
