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

use crate::cli::client::{Client, error_text};
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
    let mut out = Vec::new();
    for tok in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, width) = match tok.split_once('%') {
            Some((n, w)) => (
                n,
                Some(
                    w.parse::<i32>()
                        .map_err(|_| format!("sshare: error: Invalid field width '{tok}'"))?,
                ),
            ),
            None => (tok, None),
        };
        let lower = name.to_ascii_lowercase();
        let field = FIELDS
            .iter()
            .position(|(f, _)| !lower.is_empty() && f.to_ascii_lowercase().starts_with(&lower))
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

const USAGE: &str = "Usage:  sshare [-A Accounts] [-a] [-h] [-l] [-m] [-M clusters] [-n] [-o format] [-P] [-p] [-U] [-u user_list] [-v] [-V]";

fn list(v: &str) -> impl Iterator<Item = String> + '_ {
    v.split(',').filter(|s| !s.is_empty()).map(String::from)
}

/// Parses sshare's options (`-A a,b`, `-Aa`, `--accounts=a`, bundled flags `-alP`).
///
/// Errors: the message to print (exit 1).
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let (key, inline): (String, Option<String>) = if let Some(rest) = a.strip_prefix("--") {
            match rest.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (rest.to_string(), None),
            }
        } else if let Some(rest) = a.strip_prefix('-').filter(|r| !r.is_empty()) {
            // Bundled flags, an option letter taking the rest as its value.
            let mut chars = rest.char_indices();
            let mut key = None;
            for (k, c) in chars.by_ref() {
                if "AMou".contains(c) {
                    let v = &rest[k + c.len_utf8()..];
                    key = Some((c.to_string(), (!v.is_empty()).then(|| v.to_string())));
                    break;
                }
                flag(&mut o, c).map_err(|_| format!("sshare: invalid option -- '{c}'\n{USAGE}"))?;
            }
            match key {
                Some(k) => k,
                None => continue,
            }
        } else {
            return Err(format!("sshare: error: Unknown argument '{a}'\n{USAGE}"));
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| format!("sshare: option '{a}' requires an argument\n{USAGE}"))?;
            i += 1;
            Ok(v)
        };
        match key.as_str() {
            "all" => o.all = true,
            "long" => o.long = true,
            "noheader" => o.noheader = true,
            "parsable" => o.parsable = Some(true),
            "parsable2" => o.parsable = Some(false),
            "users-only" => o.users_only = true,
            "verbose" => {}
            "partition" => o.partitions = true,
            "A" | "accounts" => o.accounts.extend(list(&value()?)),
            "u" | "users" => o.users.extend(list(&value()?)),
            "M" | "clusters" => o.clusters.extend(list(&value()?)),
            "o" | "format" => o.format = Some(value()?),
            "help" | "usage" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "version" => {
                println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
                return Ok(None);
            }
            _ => return Err(format!("sshare: unrecognized option '{a}'\n{USAGE}")),
        }
    }
    Ok(Some(o))
}

/// A one-letter flag; `Err` for an unknown letter.
fn flag(o: &mut Opts, c: char) -> Result<(), ()> {
    match c {
        'a' => o.all = true,
        'l' => o.long = true,
        'n' | 'h' => o.noheader = true,
        'p' => o.parsable = Some(true),
        'P' => o.parsable = Some(false),
        'U' => o.users_only = true,
        'm' => o.partitions = true,
        'v' => {}
        'V' => {}
        _ => return Err(()),
    }
    Ok(())
}

/// `sshare …`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.iter().any(|a| a == "-V") {
        println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
        return ExitCode::SUCCESS;
    }
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
    match client.request(&Request::Shares) {
        Ok(Response::Shares { rows, cluster }) => {
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
        Ok(Response::Error(e)) => {
            eprintln!("sshare: error: {}", error_text(&e));
            ExitCode::from(1)
        }
        Ok(_) => {
            eprintln!("sshare: error: unexpected answer from the controller");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("sshare: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests;
