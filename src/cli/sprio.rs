//! `sprio`: the priority factors of pending jobs (cf. src/sprio/, `sprio(1)`).
//!
//! Default columns are those whose weight is not zero (SITE always), as Slurm prints
//! them: `%.15i %9r %.8u %.10Y %.10S %.10A %.10F %.10J %.10P`, plus ASSOC, QOS and TRES
//! when weighted; `-l` shows every factor and NICE; `-w` prints the weights; `-o`
//! takes a format (upper-case letters: weighted values, lower-case: normalised);
//! `-j` and `-u` select jobs. Rows are sorted by priority, highest first, or by
//! `-S/--sort` (the `-o` field letters, comma-separated, each optionally preceded by
//! `+` for ascending, the default, or `-` for descending; ties keep the default order).

use crate::cli::client::{Client, answer};
use crate::cli::format::{Field, parse_short};
use crate::cli::getopt::{self, Item, OptSpec, opt};
use crate::cli::help;
use crate::proto::{PriorityRow, PriorityWeights, Request, Response};
use std::ffi::OsString;
use std::process::ExitCode;

/// Parsed command line.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Opts {
    pub noheader: bool,
    pub long: bool,
    pub weights: bool,
    pub norm: bool,
    pub format: Option<String>,
    pub jobs: Vec<u32>,
    pub users: Vec<String>,
    pub partitions: Vec<String>,
    /// `-S/--sort`: (field letter as in `-o`, descending), most significant first.
    pub sort: Vec<(char, bool)>,
}

/// One row for the format engine.
pub struct Row<'a> {
    pub r: Option<&'a PriorityRow>,
    pub w: &'a PriorityWeights,
}

fn weighted(v: f64) -> String {
    format!("{}", v.round() as i64)
}

fn norm(v: f64, w: u32) -> String {
    if w == 0 {
        "0.0000000".into()
    } else {
        format!("{:.7}", v / f64::from(w))
    }
}

fn tres_text(t: &[(String, f64)]) -> String {
    t.iter()
        .map(|(n, v)| format!("{n}={}", v.round() as i64))
        .collect::<Vec<_>>()
        .join(",")
}

type R<'b, 'c> = &'b Row<'c>;

/// sprio's fields. On the weights row (`-w`) every factor column shows its weight.
pub fn fields<'a>() -> Vec<Field<Row<'a>>> {
    vec![
        Field::new(Some('i'), &["jobid"], "JOBID", |x: R| {
            x.r.map_or("Weights".into(), |r| r.job_id.to_string())
        }),
        Field::new(Some('r'), &["partition"], "PARTITION", |x: R| {
            x.r.map_or(String::new(), |r| r.partition.clone())
        }),
        Field::new(Some('u'), &["user"], "USER", |x: R| {
            x.r.map_or(String::new(), |r| r.user.clone())
        }),
        Field::new(Some('Y'), &["priority"], "PRIORITY", |x: R| {
            x.r.map_or(String::new(), |r| r.priority.to_string())
        }),
        Field::new(Some('y'), &["prioritynorm"], "PRIORITY", |x: R| {
            x.r.map_or(String::new(), |r| {
                format!("{:.10}", f64::from(r.priority) / 4_294_967_296.0)
            })
        }),
        Field::new(Some('S'), &["site"], "SITE", |x: R| {
            x.r.map_or("1".into(), |r| weighted(r.factors.site))
        }),
        Field::new(Some('A'), &["age"], "AGE", |x: R| {
            x.r.map_or(x.w.age.to_string(), |r| weighted(r.factors.age))
        }),
        Field::new(Some('a'), &["agenorm"], "AGE", |x: R| {
            x.r.map_or(x.w.age.to_string(), |r| norm(r.factors.age, x.w.age))
        }),
        Field::new(Some('B'), &["assoc"], "ASSOC", |x: R| {
            x.r.map_or(x.w.assoc.to_string(), |r| weighted(r.factors.assoc))
        }),
        Field::new(Some('b'), &["assocnorm"], "ASSOC", |x: R| {
            x.r.map_or(x.w.assoc.to_string(), |r| norm(r.factors.assoc, x.w.assoc))
        }),
        Field::new(Some('F'), &["fairshare"], "FAIRSHARE", |x: R| {
            x.r.map_or(x.w.fairshare.to_string(), |r| weighted(r.factors.fairshare))
        }),
        Field::new(Some('f'), &["fairsharenorm"], "FAIRSHARE", |x: R| {
            x.r.map_or(x.w.fairshare.to_string(), |r| {
                norm(r.factors.fairshare, x.w.fairshare)
            })
        }),
        Field::new(Some('J'), &["jobsize"], "JOBSIZE", |x: R| {
            x.r.map_or(x.w.jobsize.to_string(), |r| weighted(r.factors.jobsize))
        }),
        Field::new(Some('j'), &["jobsizenorm"], "JOBSIZE", |x: R| {
            x.r.map_or(x.w.jobsize.to_string(), |r| {
                norm(r.factors.jobsize, x.w.jobsize)
            })
        }),
        Field::new(Some('P'), &["partitionprio"], "PARTITION", |x: R| {
            x.r.map_or(x.w.partition.to_string(), |r| weighted(r.factors.partition))
        }),
        Field::new(Some('p'), &["partitionnorm"], "PARTITION", |x: R| {
            x.r.map_or(x.w.partition.to_string(), |r| {
                norm(r.factors.partition, x.w.partition)
            })
        }),
        Field::new(Some('Q'), &["qos"], "QOS", |x: R| {
            x.r.map_or(x.w.qos.to_string(), |r| weighted(r.factors.qos))
        }),
        Field::new(Some('q'), &["qosnorm"], "QOS", |x: R| {
            x.r.map_or(x.w.qos.to_string(), |r| norm(r.factors.qos, x.w.qos))
        }),
        Field::new(Some('N'), &["nice"], "NICE", |x: R| {
            x.r.map_or(String::new(), |r| r.factors.nice.to_string())
        }),
        Field::new(Some('T'), &["tres"], "TRES", |x: R| match x.r {
            Some(r) => tres_text(&r.factors.tres),
            None => tres_text(&x.w.tres),
        }),
        Field::new(Some('t'), &["tresnorm"], "TRES", |x: R| match x.r {
            Some(r) => tres_text(&r.factors.tres),
            None => tres_text(&x.w.tres),
        }),
    ]
}

/// The format sprio uses for these options and weights.
pub fn default_format(o: &Opts, w: &PriorityWeights) -> String {
    if let Some(f) = &o.format {
        return f.clone();
    }
    let l = |c: char| if o.norm { c.to_ascii_lowercase() } else { c };
    let mut f = String::from("%.15i %9r");
    if !o.weights {
        f.push_str(" %.8u");
    }
    f.push_str(&format!(" %.10{}", if o.norm { 'y' } else { 'Y' }));
    f.push_str(" %.10S");
    let all = o.long;
    let mut add = |weight: bool, c: char| {
        if all || weight {
            f.push_str(&format!(" %.10{}", l(c)));
        }
    };
    add(w.age > 0, 'A');
    add(w.assoc > 0, 'B');
    add(w.fairshare > 0, 'F');
    add(w.jobsize > 0, 'J');
    add(w.partition > 0, 'P');
    add(w.qos > 0, 'Q');
    if all {
        f.push_str(" %.11N");
    }
    if all || !w.tres.is_empty() {
        f.push_str(&format!(" %.20{}", l('T')));
    }
    f
}

/// Renders the reply: header, then one line per row (or the weights line with `-w`).
pub fn render(o: &Opts, rows: &[PriorityRow], w: &PriorityWeights) -> String {
    let table = fields();
    let fmt = default_format(o, w);
    let parsed = parse_short(&fmt, &table);
    let format = parsed.format;
    let mut out = String::new();
    if !o.noheader {
        out.push_str(&format.header(&table));
        out.push('\n');
    }
    if o.weights {
        out.push_str(&format.row(&table, &Row { r: None, w }));
        out.push('\n');
        return out;
    }
    let mut rows: Vec<&PriorityRow> = rows
        .iter()
        .filter(|r| o.partitions.is_empty() || o.partitions.contains(&r.partition))
        .collect();
    rows.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.job_id.cmp(&b.job_id)));
    // Stable: the keys decide, the default order breaks ties.
    rows.sort_by(|a, b| {
        o.sort
            .iter()
            .map(|&(c, desc)| {
                let ord = sort_cmp(c, a, b);
                if desc { ord.reverse() } else { ord }
            })
            .find(|x| x.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for r in rows {
        out.push_str(&format.row(&table, &Row { r: Some(r), w }));
        out.push('\n');
    }
    out
}

/// sprio's options (cf. src/sprio/opts.c), with their `--help` lines.
pub const SPECS: &[OptSpec] = &[
    opt("noheader", Some('h'), false).doc("", "print no header line"),
    opt("jobs", Some('j'), true).doc("job_id_list", "show only these comma separated jobs"),
    opt("long", Some('l'), false).doc("", "every factor, and NICE"),
    opt("clusters", Some('M'), true).doc("cluster", "cluster to query (this one only)"),
    opt("norm", Some('n'), false).doc("", "normalized factor values (0 to 1)"),
    opt("format", Some('o'), true).doc("format", "output format (%i %u %Y %A %F ...)"),
    opt("sort", Some('S'), true).doc(
        "sort_list",
        "sort by these fields (-y,i: priority descending, then job id)",
    ),
    opt("partition", Some('p'), true).doc("partition_list", "show only jobs in these partitions"),
    opt("user", Some('u'), true).doc("user_list", "show only jobs of these users"),
    opt("users", None, true),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
    opt("weights", Some('w'), false).doc("", "print the configured factor weights"),
    opt("federation", None, false).doc("", "accepted: one cluster, no federation"),
    opt("local", None, false).doc("", "accepted: one cluster, no federation"),
    opt("sibling", None, false).doc("", "accepted: one cluster, no federation"),
    opt("help", None, false).doc("", "show this help message"),
    opt("usage", None, false).doc("", "display a brief usage message"),
];

/// The `-S` field letters.
const SORT_FIELDS: &str = "irRuYySAaBbFfJjPpQqNTt";

/// Compares two rows on one `-S` field (ascending).
fn sort_cmp(c: char, a: &PriorityRow, b: &PriorityRow) -> std::cmp::Ordering {
    let f = |r: &PriorityRow| -> f64 {
        let x = &r.factors;
        match c.to_ascii_uppercase() {
            'Y' => f64::from(r.priority),
            'S' => x.site,
            'A' => x.age,
            'B' => x.assoc,
            'F' => x.fairshare,
            'J' => x.jobsize,
            'P' => x.partition,
            'Q' => x.qos,
            'N' => x.nice as f64,
            'T' => x.tres.iter().map(|t| t.1).sum(),
            _ => 0.0,
        }
    };
    match c {
        'i' => a.job_id.cmp(&b.job_id),
        'r' | 'R' => a.partition.cmp(&b.partition),
        'u' => a.user.cmp(&b.user),
        _ => f(a).total_cmp(&f(b)),
    }
}

/// Parses a `-S` list: `-y,i`, `+u`, `Yi`.
fn parse_sort(v: &str) -> Result<Vec<(char, bool)>, String> {
    let mut out = Vec::new();
    let mut desc = false;
    for c in v.chars() {
        match c {
            ',' | ' ' => {}
            '-' => desc = true,
            '+' => desc = false,
            c if SORT_FIELDS.contains(c) => {
                out.push((c, desc));
                desc = false;
            }
            c => return Err(format!("sprio: Invalid sort specification: {c}")),
        }
    }
    Ok(out)
}

fn list(v: &str) -> impl Iterator<Item = String> + '_ {
    v.split(',').filter(|s| !s.is_empty()).map(String::from)
}

/// Parses sprio's options (getopt style: `-l`, `-j 1,2`, `--jobs=1,2`, `-ofmt`,
/// bundled flags `-lh`). `Ok(None)`: `--help`, `--usage` or `-V` was answered on
/// stdout.
///
/// Errors: the message to print (exit 1).
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts::default();
    for item in getopt::parse("sprio", SPECS, args)? {
        let (name, v) = match item {
            Item::Opt(n, v) => (n, v.unwrap_or_default()),
            Item::Operand(a) => return Err(format!("sprio: unrecognized argument '{a}'")),
        };
        match name {
            "noheader" => o.noheader = true,
            "long" => o.long = true,
            "norm" => o.norm = true,
            "weights" => o.weights = true,
            "format" => o.format = Some(v),
            "sort" => o.sort = parse_sort(&v)?,
            "jobs" => {
                for id in v.split(',').filter(|s| !s.is_empty()) {
                    let n: u32 = id
                        .split('_')
                        .next()
                        .and_then(|x| x.parse().ok())
                        .ok_or_else(|| format!("Invalid job id: {id}"))?;
                    o.jobs.push(n);
                }
            }
            "user" | "users" => o.users.extend(list(&v)),
            "partition" => o.partitions.extend(list(&v)),
            "help" => {
                let entries = help::from_getopt(SPECS);
                print!("{}", help::help("sprio [OPTIONS]", &entries, ""));
                return Ok(None);
            }
            "usage" => {
                print!("{}", help::usage("sprio", &help::from_getopt(SPECS), ""));
                return Ok(None);
            }
            "version" => {
                println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
                return Ok(None);
            }
            // -M names this cluster; --verbose, --local, --federation, --sibling: no
            // effect on one cluster.
            _ => {}
        }
    }
    Ok(Some(o))
}

/// `sprio …`.
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
    let mut uids = Vec::new();
    for u in &o.users {
        match nix::unistd::User::from_name(u).ok().flatten() {
            Some(x) => uids.push(x.uid.as_raw()),
            None => match u.parse::<u32>() {
                Ok(n) => uids.push(n),
                Err(_) => {
                    eprintln!("sprio: error: Invalid user: {u}");
                    return ExitCode::from(1);
                }
            },
        }
    }
    let mut client = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return ExitCode::from(1);
        }
    };
    let req = Request::Priority {
        ids: o.jobs.clone(),
        users: uids,
    };
    match client.call(
        &req,
        answer!(Response::Priority { rows, weights } => (rows, weights)),
    ) {
        Ok((rows, weights)) => {
            if rows.is_empty() && !o.weights && !o.jobs.is_empty() {
                eprintln!("Unable to find jobs matching user/id(s) specified");
                return ExitCode::from(1);
            }
            print!("{}", render(&o, &rows, &weights));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sprio: error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::priority::Factors;

    fn golden_weights() -> PriorityWeights {
        PriorityWeights {
            age: 1000,
            assoc: 0,
            fairshare: 10000,
            jobsize: 1000,
            partition: 1000,
            qos: 0,
            tres: vec![],
        }
    }

    fn row(id: u32, part: &str, prio: u32, js: f64) -> PriorityRow {
        PriorityRow {
            job_id: id,
            partition: part.into(),
            user: "alice".into(),
            priority: prio,
            factors: Factors {
                fairshare: 10000.0,
                jobsize: js,
                partition: 1000.0,
                ..Factors::default()
            },
        }
    }

    fn golden_rows() -> Vec<PriorityRow> {
        vec![
            row(177, "debug", 11515, 515.625),
            row(171, "debug", 12000, 1000.0),
            row(178, "batch", 11515, 515.625),
            row(172, "debug", 11750, 750.0),
        ]
    }

    fn opts(a: &[&str]) -> Opts {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn default_matches_golden() {
        let out = render(&opts(&["-u", "alice"]), &golden_rows(), &golden_weights());
        assert_eq!(
            out,
            "          JOBID PARTITION     USER   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION\n\
            \x20           171 debug        alice      12000          0          0      10000       1000       1000\n\
            \x20           172 debug        alice      11750          0          0      10000        750       1000\n\
            \x20           177 debug        alice      11515          0          0      10000        516       1000\n\
            \x20           178 batch        alice      11515          0          0      10000        516       1000\n"
        );
    }

    #[test]
    fn long_and_weights_match_golden() {
        let out = render(
            &opts(&["-u", "alice", "-l"]),
            &golden_rows(),
            &golden_weights(),
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE                 TRES"
        );
        assert_eq!(
            lines[1],
            "            171 debug        alice      12000          0          0          0      10000       1000       1000          0           0                     "
        );
        let out = render(&opts(&["-w"]), &[], &golden_weights());
        assert_eq!(
            out,
            "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION\n\
            \x20       Weights                               1       1000      10000       1000       1000\n"
        );
    }

    #[test]
    fn formats_options_and_errors() {
        let o = opts(&["-h", "-o", "%i %Y %f", "-j", "171,172", "-p", "debug"]);
        assert_eq!(o.jobs, vec![171, 172]);
        let out = render(&o, &golden_rows(), &golden_weights());
        assert_eq!(out.lines().next(), Some("171 12000 1.0000000"));
        assert_eq!(out.lines().count(), 3);
        assert!(opts(&["-lh"]).long);
        assert!(parse(&["--bogus".to_string()]).is_err());
        assert!(parse(&["-j".to_string()]).is_err());
        assert!(parse(&["-j".to_string(), "x".to_string()]).is_err());
    }
}
