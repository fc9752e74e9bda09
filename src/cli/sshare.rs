//! `sshare`: the fair-share tree (cf. src/sshare/sshare.c and process.c, `sshare(1)`).
//!
//! Default columns `Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare`;
//! `-l` adds NormUsage, LevelFS, GrpTRESMins and TRESRunMins, `-m` Partition. `-o`
//! also takes Cluster, GrpTRESRaw (decayed TRES-minutes used), ID and Partition (every
//! field Slurm's sshare has). Rows come in tree order,
//! the account name indented by the association's depth (also in parsable output, which
//! tools rely on). Without `-a`/`-u`, user rows are the caller's only; `-u` picks users,
//! `-A` accounts, `-U` drops account rows. `-o/--format` takes `Name[%width]` fields
//! (case-insensitive prefixes); a positive width right-justifies, a negative one
//! left-justifies, and values too long end in `+` (src/common/print_fields.c).
//! `-P`/`--parsable2` separates with `|`, `-p`/`--parsable` also ends lines with `|`.

use crate::cli::client::{Client, answer};
use crate::cli::getopt::{self, Item, OptSpec, opt};
use crate::cli::help;
use crate::proto::{Request, Response, ShareRow};
use std::ffi::OsString;
use std::process::ExitCode;

/// Parsed command line.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Opts {
    pub all: bool,
    pub long: bool,
    pub noheader: bool,
    /// `Some(true)`: `-p` (trailing `|`); `Some(false)`: `-P`.
    pub parsable: Option<bool>,
    pub users_only: bool,
    /// `-m`/`--partition`: a Partition column in the default formats.
    pub partitions: bool,
    pub format: Option<String>,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub clusters: Vec<String>,
}

/// sshare's columns: name, default width (negative: left-justified), in Slurm's
/// order (src/sshare/process.c), which decides what a prefix names.
const FIELDS: &[(&str, i32)] = &[
    ("Account", -20),
    ("Cluster", 10),
    ("EffectvUsage", 13),
    ("FairShare", 10),
    ("GrpTRESMins", 30),
    ("GrpTRESRaw", 30),
    ("ID", 6),
    ("LevelFS", 10),
    ("NormShares", 11),
    ("NormUsage", 11),
    ("Partition", 12),
    ("RawShares", 10),
    ("RawUsage", 11),
    ("TRESRunMins", 30),
    ("User", 10),
];

const DEFAULT: &str = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare";
const LONG: &str = "Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare,LevelFS,GrpTRESMins,TRESRunMins";

/// The default columns (`-l` for `long`), with Partition after User for `-m`.
fn default_format(long: bool, partitions: bool) -> String {
    let f = if long { LONG } else { DEFAULT };
    if partitions {
        f.replacen("User,", "User,Partition,", 1)
    } else {
        f.to_string()
    }
}

/// A column: index into [`FIELDS`] and width.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Col {
    field: usize,
    width: i32,
}

/// Parses a `--format` list: `name[%width]`, names matched case-insensitively as
/// prefixes of sshare's field names.
///
/// Errors: an unknown field or a bad width.
fn parse_format(s: &str) -> Result<Vec<Col>, String> {
    use crate::cli::format::{ListItem, Lookup, list_items, lookup};
    let mut out = Vec::new();
    for ListItem { item, name, width } in list_items(s) {
        let width = match width {
            Some(w) => Some(
                w.parse::<i32>()
                    .map_err(|_| format!("sshare: error: Invalid field width '{item}'"))?,
            ),
            None => None,
        };
        let field = lookup(FIELDS.iter().map(|(f, _)| *f), name, Lookup::Prefix)
            .ok_or_else(|| format!("sshare: error: Invalid field requested: \"{name}\""))?;
        out.push(Col {
            field,
            width: width.unwrap_or(FIELDS[field].1),
        });
    }
    Ok(out)
}

fn f6(v: f64) -> String {
    if v.is_infinite() {
        "inf".into()
    } else {
        format!("{v:.6}")
    }
}

fn tres_text(t: &[(String, u64)]) -> String {
    t.iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The text of field `f` for `r` (indentation included for Account).
fn value(f: usize, r: &ShareRow, cluster: &str) -> String {
    let s = &r.share;
    let root = r.raw_shares.is_none();
    match FIELDS[f].0 {
        "Account" => format!("{}{}", " ".repeat(s.depth as usize), r.account),
        "User" => r.user.clone().unwrap_or_default(),
        "RawShares" => r.raw_shares.map(|x| x.to_string()).unwrap_or_default(),
        "NormShares" => f6(s.norm_shares),
        "RawUsage" => format!("{}", s.raw_usage.max(0.0) as u64),
        "NormUsage" if root => String::new(),
        "NormUsage" => f6(s.norm_usage),
        "EffectvUsage" => f6(s.effectv_usage),
        "FairShare" if r.user.is_some() => f6(s.fairshare),
        "LevelFS" if !root && r.fair_tree => f6(s.level_fs),
        "TRESRunMins" => tres_text(&r.tres_run_mins),
        "GrpTRESMins" => r.grp_tres_mins.clone(),
        "GrpTRESRaw" => tres_text(&r.grp_tres_raw),
        "ID" => r.id.map(|x| x.to_string()).unwrap_or_default(),
        "Partition" => r.partition.clone().unwrap_or_default(),
        "Cluster" => cluster.to_string(),
        _ => String::new(),
    }
}

/// Pads or truncates `v` to `width` (see the module doc).
fn cell(v: &str, width: i32) -> String {
    let w = width.unsigned_abs() as usize;
    let mut v: String = v.to_string();
    if v.chars().count() > w {
        v = v.chars().take(w.saturating_sub(1)).collect();
        v.push('+');
    }
    if width < 0 {
        format!("{v:<w$}")
    } else {
        format!("{v:>w$}")
    }
}

/// Which rows `o` selects, for a caller named `me`.
fn selected<'a>(o: &Opts, rows: &'a [ShareRow], me: &str) -> Vec<&'a ShareRow> {
    rows.iter()
        .filter(|r| o.accounts.is_empty() || o.accounts.contains(&r.account))
        .filter(|r| match &r.user {
            None => !o.users_only,
            Some(u) if !o.users.is_empty() => o.users.contains(u),
            Some(u) => o.all || u == me,
        })
        .collect()
}

/// Renders the reply for a caller named `me`.
///
/// Errors: a bad `--format`.
pub fn render(o: &Opts, rows: &[ShareRow], cluster: &str, me: &str) -> Result<String, String> {
    let fmt = match &o.format {
        Some(f) => f.clone(),
        None => default_format(o.long, o.partitions),
    };
    let cols = parse_format(&fmt)?;
    let mut out = String::new();
    let line = |vals: Vec<String>, out: &mut String| match o.parsable {
        Some(trailing) => {
            out.push_str(&vals.join("|"));
            if trailing {
                out.push('|');
            }
            out.push('\n');
        }
        None => {
            for (v, c) in vals.iter().zip(&cols) {
                out.push_str(&cell(v, c.width));
                out.push(' ');
            }
            out.push('\n');
        }
    };
    if !o.noheader {
        line(
            cols.iter().map(|c| FIELDS[c.field].0.to_string()).collect(),
            &mut out,
        );
        if o.parsable.is_none() {
            for c in &cols {
                out.push_str(&"-".repeat(c.width.unsigned_abs() as usize));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in selected(o, rows, me) {
        line(
            cols.iter().map(|c| value(c.field, r, cluster)).collect(),
            &mut out,
        );
    }
    Ok(out)
}

/// sshare's options (cf. src/sshare/sshare.c), with their `--help` lines. `-h` is
/// `--noheader` too.
pub const SPECS: &[OptSpec] = &[
    opt("accounts", Some('A'), true).doc("account_list", "show only these accounts"),
    opt("all", Some('a'), false).doc("", "show every user, not only yourself"),
    opt("long", Some('l'), false).doc("", "long listing: adds NormUsage, LevelFS and TRES columns"),
    opt("partition", Some('m'), false).doc("", "add a Partition column"),
    opt("clusters", Some('M'), true).doc("cluster_list", "clusters to show (this one only)"),
    opt("cluster", None, true),
    opt("noheader", Some('n'), false).doc("", "print no header line"),
    opt("noheader", Some('h'), false).doc("", "print no header line"),
    opt("format", Some('o'), true).doc(
        "field_list",
        "fields to print, each with an optional %width",
    ),
    opt("parsable", Some('p'), false).doc("", "fields delimited by '|', with a trailing '|'"),
    opt("parsable2", Some('P'), false).doc("", "fields delimited by '|', without a trailing '|'"),
    opt("users", Some('u'), true).doc("user_list", "show only these users"),
    opt("users-only", Some('U'), false).doc("", "show user rows only, no account rows"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
    opt("help", None, false).doc("", "show this help message"),
    opt("usage", None, false).doc("", "display a brief usage message"),
];

fn list(v: &str) -> impl Iterator<Item = String> + '_ {
    v.split(',').filter(|s| !s.is_empty()).map(String::from)
}

/// Parses sshare's options (`-A a,b`, `-Aa`, `--accounts=a`, bundled flags `-alP`).
/// `Ok(None)`: `--help`, `--usage` or `--version` was answered on stdout.
///
/// Errors: the message to print (exit 1).
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts::default();
    for item in getopt::parse("sshare", SPECS, args)? {
        let (name, v) = match item {
            Item::Opt(n, v) => (n, v.unwrap_or_default()),
            Item::Operand(a) => return Err(format!("sshare: error: Unknown argument '{a}'")),
        };
        match name {
            "all" => o.all = true,
            "long" => o.long = true,
            "noheader" => o.noheader = true,
            "parsable" => o.parsable = Some(true),
            "parsable2" => o.parsable = Some(false),
            "users-only" => o.users_only = true,
            "partition" => o.partitions = true,
            "accounts" => o.accounts.extend(list(&v)),
            "users" => o.users.extend(list(&v)),
            "clusters" | "cluster" => o.clusters.extend(list(&v)),
            "format" => o.format = Some(v),
            "help" => {
                let entries = help::from_getopt(SPECS);
                print!("{}", help::help("sshare [OPTIONS]", &entries, ""));
                return Ok(None);
            }
            "usage" => {
                print!("{}", help::usage("sshare", &help::from_getopt(SPECS), ""));
                return Ok(None);
            }
            "version" => {
                println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
                return Ok(None);
            }
            // --verbose: nothing more to say.
            _ => {}
        }
    }
    Ok(Some(o))
}

/// `sshare …`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let o = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if let Some(f) = &o.format
        && let Err(e) = parse_format(f)
    {
        eprintln!("{e}");
        return ExitCode::from(1);
    }
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| nix::unistd::getuid().to_string());
    let mut client = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("sshare: error: {e}");
            return ExitCode::from(1);
        }
    };
    match client.call(
        &Request::Shares,
        answer!(Response::Shares { rows, cluster } => (rows, cluster)),
    ) {
        Ok((rows, cluster)) => {
            if let Some(bad) = o.clusters.iter().find(|c| **c != cluster && *c != "all") {
                eprintln!("sshare: error: No cluster named '{bad}' (this one is '{cluster}')");
                return ExitCode::from(1);
            }
            match render(&o, &rows, &cluster, &me) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("sshare: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests;
