//! `sinfo`: partitions and nodes as Slurm prints them (cf. src/sinfo/opts.c for options
//! and default formats, src/sinfo/sinfo.c for grouping nodes into lines, and
//! src/sinfo/print.c for the `%` specifiers).
//!
//! Shape: [`run`] parses argv into a [`Query`], fetches nodes and partitions with one
//! `Request::Nodes`, and hands them to the pure [`render`].
//!
//! Grouping: the partition view prints one line per partition per set of nodes that
//! show the same values for every non-aggregate column of the format (so the default
//! format, which shows the state, gives one line per state). Aggregate columns (node
//! list, host names, node count, `%C`, `%F`, `%A`, allocated memory) sum or list over
//! the group. `-N` prints one line per node per partition; `-R` groups down, drained
//! and failing nodes by reason, user and time, across partitions.
//!
//! `-T` lists reservations instead ([`render_reservations`]).
//!
//! `--json` prints the openapi/v0.0.38 node objects ([`render_json`]).
//!
//! Not yet: ranges for differing
//! numeric values (nodes that differ land on separate lines instead), `-i` iteration.

use crate::cli::client::{Client, answer};
use crate::cli::format::{self, Field, Format};
use crate::cli::slurmjson::{self, J};
use crate::cli::squeue::getopt_error;
use crate::cli::timefmt::{fmt_banner, fmt_ts};
use crate::model::time::fmt_squeue_duration;
use crate::model::{Node, NodeState, Partition, PartitionState, TimeLimit, hostlist};
use crate::proto::{Request, Response};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::process::ExitCode;

/// The default partition view.
pub const DEFAULT_FORMAT: &str = "%9P %.5a %.10l %.6D %.6t %N";
/// `-l`.
pub const LONG_FORMAT: &str = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N";
/// `-s`.
pub const SUMMARIZE_FORMAT: &str = "%9P %.5a %.10l %.16F %N";
/// `-R`.
pub const REASON_FORMAT: &str = "%20E %9u %19H %N";
/// `-R -l`.
pub const REASON_LONG_FORMAT: &str = "%20E %12U %19H %6t %N";

/// `-N` (node list width filled in by [`node_format`]).
fn node_format(long: bool, width: usize) -> String {
    if long {
        format!("%{width}N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E")
    } else {
        format!("%{width}N %.6D %.9P %6t")
    }
}

/// sinfo's command line (Slurm's getopt names; `-h` is `--noheader`).
#[derive(Parser, Debug, Default)]
#[command(
    name = "sinfo",
    disable_help_flag = true,
    disable_version_flag = true,
    infer_long_args = true,
    about = "view information about Slurm nodes and partitions"
)]
pub struct Args {
    /// Show all partitions, hidden ones too.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Only nodes that are not responding.
    #[arg(short = 'd', long = "dead")]
    pub dead: bool,
    /// Group only nodes with identical configuration (the default here).
    #[arg(short = 'e', long = "exact")]
    pub exact: bool,
    /// Do not print a header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// Long report, with a time banner.
    #[arg(short = 'l', long = "long")]
    pub long: bool,
    /// Cluster(s) to query; prints a `CLUSTER:` line first.
    #[arg(short = 'M', long = "clusters", value_name = "NAMES")]
    pub clusters: Option<String>,
    /// Only these nodes (hostlist expression).
    #[arg(short = 'n', long = "nodes", value_name = "NODES")]
    pub nodes: Option<String>,
    /// Node-oriented: one line per node.
    #[arg(short = 'N', long = "Node")]
    pub node: bool,
    /// Don't convert units to their human readable form.
    #[arg(long = "noconvert")]
    pub noconvert: bool,
    /// Output format (`%P %D %t`).
    #[arg(short = 'o', long = "format", allow_hyphen_values = true)]
    pub format: Option<String>,
    /// Long output format (`NodeList,StateLong,CPUsState`).
    #[arg(short = 'O', long = "Format", allow_hyphen_values = true)]
    pub format_long: Option<String>,
    /// Only these partitions (comma separated).
    #[arg(short = 'p', long = "partition", value_name = "PARTITIONS")]
    pub partition: Option<String>,
    /// Only responding nodes.
    #[arg(short = 'r', long = "responding")]
    pub responding: bool,
    /// List reasons nodes are down, drained or failing.
    #[arg(short = 'R', long = "list-reasons")]
    pub list_reasons: bool,
    /// Summary: one line per partition with node counts by state.
    #[arg(short = 's', long = "summarize")]
    pub summarize: bool,
    /// Sort order (accepted; output follows partition and node order).
    #[arg(short = 'S', long = "sort")]
    pub sort: Option<String>,
    /// Only nodes in these states (`idle,mix,alloc`, `drain`, `down`, …).
    #[arg(short = 't', long = "states", value_name = "STATES")]
    pub states: Option<String>,
    /// Verbose output (accepted, no effect).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// JSON output: Slurm's openapi/v0.0.38 node objects.
    #[arg(long = "json")]
    pub json: bool,
    /// Print `slurm <version>`.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// Show this help message.
    #[arg(long = "help")]
    pub help: bool,
    /// Display brief usage message.
    #[arg(long = "usage")]
    pub usage: bool,
    /// Show reservations instead of partitions.
    #[arg(short = 'T', long = "reservation")]
    pub reservation: bool,
}

/// `sinfo -T`: one line per reservation (name, state, start, end, duration, nodes),
/// in Slurm's fixed layout; `noheader` drops the header line.
pub fn render_reservations(
    list: &[crate::model::reservation::Reservation],
    now: i64,
    noheader: bool,
) -> String {
    use crate::model::reservation::fmt_duration;
    let line = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str| {
        format!("{a:<10} {b:>8}  {c:>19}  {d:>19}  {e:>11}  {f}\n")
    };
    let mut out = String::new();
    if !noheader {
        out.push_str(&line(
            "RESV_NAME",
            "STATE",
            "START_TIME",
            "END_TIME",
            "DURATION",
            "NODELIST",
        ));
    }
    for r in list {
        out.push_str(&line(
            &r.name,
            r.state(now),
            &fmt_ts(r.start),
            &fmt_ts(r.end),
            &fmt_duration(r.end - r.start),
            &hostlist::compress(&r.nodes),
        ));
    }
    out
}

/// One `-t` entry, matched against a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSel {
    Idle,
    Mixed,
    Allocated,
    Completing,
    /// Drained or draining.
    Drain,
    Drained,
    Draining,
    Down,
    Unknown,
    NoRespond,
    Responding,
    /// A reboot is requested or issued (`boot`, `reboot`).
    Reboot,
    /// A state Slurm knows that sluice nodes are never in (`fail`, `maint`, `resv`…).
    Never,
}

impl NodeSel {
    /// Parses one `-t` token, any case, long or compact.
    pub fn parse(s: &str) -> Option<NodeSel> {
        Some(match s.to_ascii_lowercase().as_str() {
            "idle" => NodeSel::Idle,
            "mix" | "mixed" => NodeSel::Mixed,
            "alloc" | "allocated" => NodeSel::Allocated,
            "comp" | "completing" => NodeSel::Completing,
            "drain" => NodeSel::Drain,
            "drained" => NodeSel::Drained,
            "drng" | "draining" => NodeSel::Draining,
            "down" => NodeSel::Down,
            "unk" | "unknown" => NodeSel::Unknown,
            "no_respond" | "not_responding" => NodeSel::NoRespond,
            "responding" => NodeSel::Responding,
            "boot" | "reboot" => NodeSel::Reboot,
            "fail" | "failing" | "maint" | "resv" | "reserved" | "future" | "futr" | "plnd"
            | "planned" | "inval" | "npc" | "perfctrs" | "power_down" | "powered_down"
            | "powering_down" | "power_up" | "powering_up" | "cloud" => NodeSel::Never,
            _ => return None,
        })
    }

    fn matches(self, n: &Node) -> bool {
        let long = n.state_long();
        let base = long.trim_end_matches(['*', '@', '^']);
        match self {
            NodeSel::Idle => base == "idle",
            NodeSel::Mixed => base == "mixed",
            NodeSel::Allocated => base == "allocated",
            NodeSel::Completing => n.completing_jobs > 0,
            NodeSel::Drain => n.drain,
            NodeSel::Drained => base == "drained",
            NodeSel::Draining => base == "draining",
            NodeSel::Down => n.state == NodeState::Down,
            NodeSel::Unknown => n.state == NodeState::Unknown,
            NodeSel::NoRespond => n.not_responding,
            NodeSel::Responding => !n.not_responding,
            NodeSel::Reboot => n.reboot.is_some(),
            NodeSel::Never => false,
        }
    }
}

/// Which view of the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// Lines per partition per group of alike nodes.
    #[default]
    Partitions,
    /// `-N`: lines per node per partition.
    Nodes,
    /// `-R`: lines per reason.
    Reasons,
}

/// Everything [`render`] needs, normalised from the command line and the environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    pub view: View,
    /// `None` = the view's default format; `Some(Err(s))` = an `-O` format.
    pub format: Option<Result<String, String>>,
    pub long: bool,
    pub summarize: bool,
    pub noheader: bool,
    pub cluster_line: bool,
    pub partitions: Vec<String>,
    /// Expanded `-n`.
    pub nodes: Option<Vec<String>>,
    pub states: Vec<NodeSel>,
    pub responding: bool,
    pub dead: bool,
    pub noconvert: bool,
    /// `-a`: hidden partitions too.
    pub all: bool,
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

/// Builds a [`Query`] from parsed options and the environment (`SINFO_FORMAT`,
/// `SINFO_PARTITION`); a bad option value is `Err(Output)`.
pub fn build_query(args: &Args, env: &dyn Fn(&str) -> Option<String>) -> Result<Query, Output> {
    let fail = |msg: String| Output {
        stdout: String::new(),
        stderr: msg,
        code: 1,
    };
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut states = Vec::new();
    if let Some(s) = &args.states {
        for tok in split_list(s) {
            match NodeSel::parse(&tok) {
                Some(sel) => states.push(sel),
                None => {
                    return Err(fail(format!(
                        "sinfo: error: Invalid node state specified: {tok}\n"
                    )));
                }
            }
        }
    }
    let nodes = match &args.nodes {
        Some(expr) => Some(hostlist::expand(expr).map_err(|_| {
            fail(format!(
                "sinfo: error: Invalid node name specified: {expr}\n"
            ))
        })?),
        None => None,
    };
    let format = if let Some(f) = &args.format_long {
        Some(Err(f.clone()))
    } else if let Some(f) = &args.format {
        Some(Ok(f.clone()))
    } else {
        nonempty("SINFO_FORMAT").map(Ok)
    };
    let view = if args.list_reasons {
        View::Reasons
    } else if args.node {
        View::Nodes
    } else {
        View::Partitions
    };
    Ok(Query {
        view,
        format,
        long: args.long,
        summarize: args.summarize,
        noheader: args.noheader,
        cluster_line: args.clusters.is_some() || nonempty("SLURM_CLUSTERS").is_some(),
        partitions: args
            .partition
            .clone()
            .or_else(|| nonempty("SINFO_PARTITION"))
            .map(|p| split_list(&p))
            .unwrap_or_default(),
        nodes,
        states,
        responding: args.responding,
        dead: args.dead,
        noconvert: args.noconvert,
        all: args.all,
    })
}

/// Context shared by every line.
pub struct Ctx<'a> {
    pub now: i64,
    pub cluster: &'a str,
    /// uid → user name (for `-R`'s USER).
    pub user_name: &'a dyn Fn(u32) -> String,
}

/// One output line's worth of data: a partition (none in `-R`) and its nodes.
pub struct Group<'a> {
    pub part: Option<&'a Partition>,
    pub nodes: Vec<&'a Node>,
    pub ctx: &'a Ctx<'a>,
}

impl Group<'_> {
    fn first(&self) -> Option<&Node> {
        self.nodes.first().copied()
    }

    fn node_val(&self, f: impl Fn(&Node) -> String) -> String {
        self.first().map(f).unwrap_or_else(|| "n/a".into())
    }

    fn part_val(&self, f: impl Fn(&Partition) -> String) -> String {
        self.part.map(f).unwrap_or_else(|| "n/a".into())
    }

    fn names(&self, f: impl Fn(&Node) -> String) -> String {
        let v: Vec<String> = self.nodes.iter().map(|n| f(n)).collect();
        hostlist::compress_sorted(&v)
    }

    /// (allocated, idle, other, total) CPUs.
    fn cpu_counts(&self) -> (u64, u64, u64, u64) {
        let (mut a, mut i, mut o, mut t) = (0, 0, 0, 0);
        for n in &self.nodes {
            let alloc = u64::from(n.alloc_cpus.min(n.cpus));
            let rest = u64::from(n.cpus) - alloc;
            a += alloc;
            if usable(n) {
                i += rest;
            } else {
                o += rest;
            }
            t += u64::from(n.cpus);
        }
        (a, i, o, t)
    }

    /// (allocated, idle, other, total) nodes.
    fn node_counts(&self) -> (usize, usize, usize, usize) {
        let (mut a, mut i, mut o) = (0, 0, 0);
        for n in &self.nodes {
            if !usable(n) {
                o += 1;
            } else if n.alloc_cpus > 0 {
                a += 1;
            } else {
                i += 1;
            }
        }
        (a, i, o, self.nodes.len())
    }
}

/// Whether a node counts as available (not down, drained or silent) in `%C`/`%F`.
fn usable(n: &Node) -> bool {
    n.state == NodeState::Up && !n.drain && !n.not_responding
}

/// A partition limit as sinfo prints it: `infinite` or `[D-]H:MM:SS`/`M:SS`.
pub fn fmt_limit(l: TimeLimit) -> String {
    match l {
        TimeLimit::Unlimited => "infinite".into(),
        TimeLimit::Minutes(m) => fmt_squeue_duration(u64::from(m) * 60),
        TimeLimit::Seconds(s) => fmt_squeue_duration(s),
    }
}

fn avail(p: &Partition) -> String {
    match p.state {
        PartitionState::Up => "up",
        PartitionState::Down => "down",
        PartitionState::Drain => "drain",
        PartitionState::Inactive => "inact",
    }
    .into()
}

fn reason_time(n: &Node) -> String {
    n.reason_time
        .map(fmt_ts)
        .unwrap_or_else(|| "Unknown".into())
}

type G<'b, 'c> = &'b Group<'c>;

/// `%G`: the first node's GRES (`gpu:h100:8`, `gpu:4(S:0-1)` with core affinity),
/// `(null)` when none.
fn node_gres(g: G) -> String {
    g.first()
        .map(|n| n.gres_text())
        .unwrap_or_else(|| "(null)".into())
}

/// `GresUsed`: GRES in use on the first node with device indices
/// (`gpu:2(IDX:0-1)`, `gpu:0(IDX:N/A)`), `(null)` when it has none.
fn node_gres_used(g: G) -> String {
    let Some(n) = g.first() else {
        return "(null)".into();
    };
    let mut groups: Vec<(String, Option<String>, u32, Vec<u32>)> = Vec::new();
    for (i, d) in n.gres.iter().enumerate() {
        let used = n.gres_used(i);
        let e = match groups.iter_mut().find(|x| x.0 == d.name && x.1 == d.kind) {
            Some(e) => e,
            None => {
                groups.push((d.name.clone(), d.kind.clone(), 0, Vec::new()));
                groups.last_mut().expect("just pushed")
            }
        };
        e.2 += used;
        if used > 0 {
            e.3.push(d.index);
        }
    }
    if groups.is_empty() {
        return "(null)".into();
    }
    groups
        .iter()
        .map(|(name, kind, used, idx)| {
            let head = match kind {
                Some(k) => format!("{name}:{k}:{used}"),
                None => format!("{name}:{used}"),
            };
            let idx = if idx.is_empty() {
                "N/A".to_string()
            } else {
                crate::model::hostlist::compress(
                    &idx.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
                )
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string()
            };
            format!("{head}(IDX:{idx})")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// sinfo's fields with, for each, whether it aggregates over a group of nodes.
pub fn node_fields<'a>() -> (Vec<Field<Group<'a>>>, Vec<bool>) {
    let list: Vec<(Field<Group<'a>>, bool)> = vec![
        (
            Field::new(Some('a'), &["available"], "AVAIL", |g: G| g.part_val(avail)),
            false,
        ),
        (
            Field::new(Some('A'), &["nodeai"], "NODES(A/I)", |g: G| {
                let (a, i, _, _) = g.node_counts();
                format!("{a}/{i}")
            }),
            true,
        ),
        (
            Field::new(Some('b'), &["featuresact"], "ACTIVE_FEATURES", |g: G| {
                g.node_val(features)
            }),
            false,
        ),
        (
            Field::new(
                Some('B'),
                &["maxcpuspernode"],
                "MAX_CPUS_PER_NODE",
                |_: G| "UNLIMITED".into(),
            ),
            false,
        ),
        (
            Field::new(Some('c'), &["cpus"], "CPUS", |g: G| {
                g.node_val(|n| n.cpus.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('C'), &["cpusstate"], "CPUS(A/I/O/T)", |g: G| {
                let (a, i, o, t) = g.cpu_counts();
                format!("{a}/{i}/{o}/{t}")
            }),
            true,
        ),
        (
            Field::new(Some('d'), &["disk"], "TMP_DISK", |g: G| {
                g.node_val(|n| n.tmp_disk.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('D'), &["nodes"], "NODES", |g: G| {
                g.nodes.len().to_string()
            }),
            true,
        ),
        (
            Field::new(Some('e'), &["freemem"], "FREE_MEM", |g: G| {
                g.node_val(|n| n.free_mem.map_or("N/A".into(), |m| m.to_string()))
            }),
            false,
        ),
        (
            Field::new(Some('E'), &["reason"], "REASON", |g: G| {
                g.node_val(|n| n.reason.clone().unwrap_or_else(|| "none".into()))
            }),
            false,
        ),
        (
            Field::new(Some('f'), &["features"], "AVAIL_FEATURES", |g: G| {
                g.node_val(features)
            }),
            false,
        ),
        (
            Field::new(Some('F'), &["nodeaiot"], "NODES(A/I/O/T)", |g: G| {
                let (a, i, o, t) = g.node_counts();
                format!("{a}/{i}/{o}/{t}")
            }),
            true,
        ),
        (
            Field::new(Some('g'), &["groups"], "GROUPS", |_: G| "all".into()),
            false,
        ),
        (
            Field::new(Some('G'), &["gres"], "GRES", |g: G| node_gres(g)),
            false,
        ),
        (
            Field::new(Some('h'), &["oversubscribe"], "OVERSUBSCRIBE", |g: G| {
                g.part_val(|_| "NO".into())
            }),
            false,
        ),
        (
            Field::new(Some('H'), &["timestamp"], "TIMESTAMP", |g: G| {
                g.node_val(reason_time)
            }),
            false,
        ),
        (
            Field::new(
                Some('I'),
                &["priorityjobfactor"],
                "PRIO_JOB_FACTOR",
                |g: G| g.part_val(|p| p.priority_job_factor.to_string()),
            ),
            false,
        ),
        (
            Field::new(Some('l'), &["time"], "TIMELIMIT", |g: G| {
                g.part_val(|p| fmt_limit(p.max_time))
            }),
            false,
        ),
        (
            Field::new(Some('L'), &["defaulttime"], "DEFAULTTIME", |g: G| {
                g.part_val(|p| p.default_time.map_or("n/a".into(), fmt_limit))
            }),
            false,
        ),
        (
            Field::new(Some('m'), &["memory"], "MEMORY", |g: G| {
                g.node_val(|n| n.real_memory.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('M'), &["preemptmode"], "PREEMPT_MODE", |g: G| {
                g.part_val(|_| "OFF".into())
            }),
            false,
        ),
        (
            Field::new(Some('n'), &["nodehost"], "HOSTNAMES", |g: G| {
                g.names(|n| n.hostname.clone())
            }),
            true,
        ),
        (
            Field::new(Some('N'), &["nodelist"], "NODELIST", |g: G| {
                g.names(|n| n.name.clone())
            }),
            true,
        ),
        (
            Field::new(Some('o'), &["nodeaddr"], "NODE_ADDR", |g: G| {
                g.names(|n| n.addr.clone())
            }),
            true,
        ),
        (
            Field::new(Some('O'), &["cpusload"], "CPU_LOAD", |g: G| {
                g.node_val(|n| n.cpu_load.map_or("N/A".into(), |l| format!("{l:.2}")))
            }),
            false,
        ),
        (
            Field::new(Some('p'), &["prioritytier"], "PRIO_TIER", |g: G| {
                g.part_val(|p| p.priority_tier.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('P'), &["partition"], "PARTITION", |g: G| {
                g.part_val(|p| {
                    if p.default {
                        format!("{}*", p.name)
                    } else {
                        p.name.clone()
                    }
                })
            }),
            false,
        ),
        (
            Field::new(Some('r'), &["root"], "ROOT", |g: G| {
                g.part_val(|_| "no".into())
            }),
            false,
        ),
        (
            Field::new(Some('R'), &["partitionname"], "PARTITION", |g: G| {
                g.part_val(|p| p.name.clone())
            }),
            false,
        ),
        (
            Field::new(Some('s'), &["size"], "JOB_SIZE", |g: G| {
                g.part_val(|p| {
                    let max = p.max_nodes.map_or("infinite".into(), |m| m.to_string());
                    format!("{}-{max}", p.min_nodes.max(1))
                })
            }),
            false,
        ),
        (
            Field::new(Some('S'), &["allocnodes"], "ALLOCNODES", |g: G| {
                g.part_val(|_| "all".into())
            }),
            false,
        ),
        (
            Field::new(Some('t'), &["statecompact"], "STATE", |g: G| {
                g.node_val(|n| n.state_compact())
            }),
            false,
        ),
        (
            Field::new(Some('T'), &["statelong"], "STATE", |g: G| {
                g.node_val(|n| n.state_long())
            }),
            false,
        ),
        (
            Field::new(Some('u'), &["user"], "USER", |g: G| {
                g.node_val(|n| {
                    n.reason_uid
                        .map_or("Unknown".into(), |u| (g.ctx.user_name)(u))
                })
            }),
            false,
        ),
        (
            Field::new(Some('U'), &["userlong"], "USER", |g: G| {
                g.node_val(|n| {
                    n.reason_uid.map_or("Unknown".into(), |u| {
                        format!("{}({u})", (g.ctx.user_name)(u))
                    })
                })
            }),
            false,
        ),
        (
            Field::new(Some('V'), &["cluster"], "CLUSTER", |g: G| {
                g.ctx.cluster.to_string()
            }),
            false,
        ),
        (
            Field::new(Some('w'), &["weight"], "WEIGHT", |g: G| {
                g.node_val(|n| n.weight.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('X'), &["sockets"], "SOCKETS", |g: G| {
                g.node_val(|n| n.sockets.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('Y'), &["cores"], "CORES", |g: G| {
                g.node_val(|n| n.cores_per_socket.to_string())
            }),
            false,
        ),
        (
            Field::new(Some('z'), &["socketcorethread"], "S:C:T", |g: G| {
                g.node_val(|n| {
                    format!(
                        "{}:{}:{}",
                        n.sockets, n.cores_per_socket, n.threads_per_core
                    )
                })
            }),
            false,
        ),
        (
            Field::new(Some('Z'), &["threads"], "THREADS", |g: G| {
                g.node_val(|n| n.threads_per_core.to_string())
            }),
            false,
        ),
        (
            Field::new(None, &["allocmem"], "ALLOCMEM", |g: G| {
                g.nodes.iter().map(|n| n.alloc_mem).sum::<u64>().to_string()
            }),
            true,
        ),
        (
            Field::new(None, &["gresused"], "GRES_USED", |g: G| node_gres_used(g)),
            false,
        ),
        (
            // GPUs used outside sluice on the first node (issue 24; not in Slurm).
            Field::new(None, &["gpusbusy"], "GPUS_BUSY", |g: G| {
                g.first()
                    .map(|n| n.gpus_busy_text())
                    .unwrap_or_else(|| "(null)".into())
            }),
            false,
        ),
        (
            Field::new(None, &["version"], "VERSION", |g: G| {
                g.node_val(|n| {
                    if n.version.is_empty() {
                        "N/A".into()
                    } else {
                        n.version.clone()
                    }
                })
            }),
            false,
        ),
        (
            Field::new(None, &["port"], "PORT", |g: G| g.node_val(|_| "0".into())),
            false,
        ),
    ];
    list.into_iter().unzip()
}

fn features(n: &Node) -> String {
    if n.features.is_empty() {
        "(null)".into()
    } else {
        n.features.join(",")
    }
}

impl Query {
    fn node_ok(&self, n: &Node) -> bool {
        self.nodes.as_ref().is_none_or(|l| l.contains(&n.name))
            && (self.states.is_empty() || self.states.iter().any(|s| s.matches(n)))
            && (!self.responding || !n.not_responding)
            && (!self.dead || n.not_responding || n.state == NodeState::Down)
    }

    fn part_ok(&self, p: &Partition) -> bool {
        // Hidden partitions show only with -a or when named.
        (self.partitions.is_empty() && (self.all || !p.hidden)) || self.partitions.contains(&p.name)
    }

    fn node_filtered(&self) -> bool {
        self.nodes.is_some() || !self.states.is_empty() || self.responding || self.dead
    }
}

/// The whole of sinfo's output for `q` over the cluster's nodes and partitions.
pub fn render(q: &Query, nodes: &[Node], partitions: &[Partition], ctx: &Ctx) -> Output {
    let mut out = Output::default();
    let (table, aggregate) = node_fields();
    let by_name = |name: &str| nodes.iter().find(|n| n.name == name);

    // Groups before merging: (partition, nodes).
    let mut raw: Vec<Group> = Vec::new();
    match q.view {
        View::Partitions => {
            for p in partitions.iter().filter(|p| q.part_ok(p)) {
                let members: Vec<&Node> = p
                    .nodes
                    .iter()
                    .filter_map(|n| by_name(n))
                    .filter(|n| q.node_ok(n))
                    .collect();
                if members.is_empty() && !q.node_filtered() {
                    raw.push(Group {
                        part: Some(p),
                        nodes: Vec::new(),
                        ctx,
                    });
                }
                for n in members {
                    raw.push(Group {
                        part: Some(p),
                        nodes: vec![n],
                        ctx,
                    });
                }
            }
        }
        View::Nodes => {
            for n in nodes.iter().filter(|n| q.node_ok(n)) {
                for p in partitions
                    .iter()
                    .filter(|p| q.part_ok(p) && p.nodes.contains(&n.name))
                {
                    raw.push(Group {
                        part: Some(p),
                        nodes: vec![n],
                        ctx,
                    });
                }
            }
        }
        View::Reasons => {
            let in_parts = |n: &Node| {
                q.partitions.is_empty()
                    || partitions
                        .iter()
                        .any(|p| q.part_ok(p) && p.nodes.contains(&n.name))
            };
            for n in nodes.iter().filter(|n| q.node_ok(n) && in_parts(n)) {
                // A node whose jobs run without cgroups says so here too.
                let troubled = n.drain
                    || n.state == NodeState::Down
                    || n.not_responding
                    || n.isolation_degraded.is_some();
                if troubled && n.reason.is_some() {
                    raw.push(Group {
                        part: None,
                        nodes: vec![n],
                        ctx,
                    });
                }
            }
        }
    }

    let width = raw
        .iter()
        .flat_map(|g| g.nodes.iter().map(|n| n.name.chars().count()))
        .max()
        .unwrap_or(0)
        .max(9);
    let text = match (&q.format, q.view) {
        (Some(f), _) => f.clone(),
        (None, View::Reasons) if q.long => Ok(REASON_LONG_FORMAT.to_string()),
        (None, View::Reasons) => Ok(REASON_FORMAT.to_string()),
        (None, View::Nodes) => Ok(node_format(q.long, width)),
        (None, View::Partitions) if q.summarize => Ok(SUMMARIZE_FORMAT.to_string()),
        (None, View::Partitions) if q.long => Ok(LONG_FORMAT.to_string()),
        (None, View::Partitions) => Ok(DEFAULT_FORMAT.to_string()),
    };
    let parsed = match &text {
        Ok(f) => format::parse_short(f, &table),
        Err(f) => format::parse_long(f, &table),
    };
    for bad in &parsed.unknown {
        out.stderr.push_str(&format!(
            "sinfo: error: Invalid node format specification: {bad}\n"
        ));
    }
    let fmt: Format = parsed.format;

    // Merge groups that show the same non-aggregate values (not in -N).
    let groups = if q.view == View::Nodes {
        raw
    } else {
        let mut merged: Vec<(Vec<String>, Group)> = Vec::new();
        for g in raw {
            let k: Vec<String> = fmt
                .columns()
                .filter(|c| !aggregate[c.field])
                .map(|c| (table[c.field].value)(&g))
                .collect();
            let part_name = g.part.map(|p| p.name.as_str());
            match merged
                .iter_mut()
                .find(|(mk, mg)| *mk == k && mg.part.map(|p| p.name.as_str()) == part_name)
            {
                Some((_, mg)) => mg.nodes.extend(g.nodes),
                None => merged.push((k, g)),
            }
        }
        merged.into_iter().map(|(_, g)| g).collect()
    };

    if q.cluster_line {
        out.stdout.push_str(&format!("CLUSTER: {}\n", ctx.cluster));
    }
    if q.long {
        out.stdout.push_str(&fmt_banner(ctx.now));
        out.stdout.push('\n');
    }
    if !q.noheader {
        out.stdout.push_str(&fmt.header(&table));
        out.stdout.push('\n');
    }
    for g in &groups {
        out.stdout.push_str(&fmt.row(&table, g));
        out.stdout.push('\n');
    }
    out
}

/// Slurm's base node state, lowercase (`idle`, `mixed`, `allocated`, `down`,
/// `unknown`); flags such as DRAIN go to `state_flags`.
fn base_state(n: &Node) -> &'static str {
    match n.state {
        NodeState::Down => "down",
        NodeState::Unknown => "unknown",
        NodeState::Up if n.alloc_cpus == 0 => "idle",
        NodeState::Up if n.alloc_cpus >= n.cpus => "allocated",
        NodeState::Up => "mixed",
    }
}

/// A node's flags in Slurm's order (`node_state_flags[]`).
fn state_flags(n: &Node) -> Vec<J> {
    let mut v = Vec::new();
    let mut push = |on: bool, s: &str| {
        if on {
            v.push(J::from(s));
        }
    };
    push(n.completing_jobs > 0, "COMPLETING");
    push(n.drain, "DRAIN");
    push(n.fail, "FAIL");
    push(n.maint, "MAINTENANCE");
    push(n.reserved, "RESERVED");
    push(n.not_responding, "NOT_RESPONDING");
    v
}

/// GRES totals (or, with `used`, units in use) per `name[:type]`, in node order.
fn gres_counts(n: &Node, used: bool) -> Vec<(String, Option<String>, u64)> {
    let mut groups: Vec<(String, Option<String>, u64)> = Vec::new();
    for (i, d) in n.gres.iter().enumerate() {
        let c = if used {
            u64::from(n.gres_used(i))
        } else {
            u64::from(d.count)
        };
        match groups
            .iter_mut()
            .find(|(name, kind, _)| *name == d.name && *kind == d.kind)
        {
            Some(g) => g.2 += c,
            None => groups.push((d.name.clone(), d.kind.clone(), c)),
        }
    }
    groups
}

fn gres_text(n: &Node, used: bool) -> String {
    if !used && !n.gres.is_empty() {
        return n.gres_text();
    }
    gres_counts(n, used)
        .iter()
        .map(|(name, kind, c)| match kind {
            Some(k) => format!("{name}:{k}:{c}"),
            None => format!("{name}:{c}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `cpu=N,mem=M,billing=N[,gres/NAME=G…]` for `cpus` CPUs and `mem` MiB.
fn node_tres(n: &Node, cpus: u32, mem: u64, used: bool) -> String {
    let mut t = format!(
        "cpu={cpus},mem={},billing={cpus}",
        crate::cli::jobfmt::fmt_mem_exact(mem)
    );
    if used {
        // slurmctld's allocated-TRES string has no billing.
        t = format!("cpu={cpus},mem={}", crate::cli::jobfmt::fmt_mem_exact(mem));
    }
    let mut names: Vec<(String, u64)> = Vec::new();
    for (name, _, c) in gres_counts(n, used) {
        match names.iter_mut().find(|(x, _)| *x == name) {
            Some(e) => e.1 += c,
            None => names.push((name, c)),
        }
    }
    for (name, c) in names {
        if c > 0 {
            t.push_str(&format!(",gres/{name}={c}"));
        }
    }
    t
}

/// One node object as the openapi/v0.0.38 nodes dumper writes it (src/plugins/openapi/
/// v0.0.38/nodes.c `_dump_node`; field order as in `../shared/golden/sinfo.txt`).
/// Fields sluice has no notion of (boards, burst buffer address, MCS label, owner,
/// next state after reboot) carry the values Slurm prints for an ordinary node.
pub fn node_json(n: &Node, partitions: &[Partition], user_name: &dyn Fn(u32) -> String) -> J {
    let features = n.features.join(",");
    let parts: Vec<J> = partitions
        .iter()
        .filter(|p| p.nodes.contains(&n.name))
        .map(|p| J::from(p.name.as_str()))
        .collect();
    let alloc = n.alloc_cpus.min(n.cpus);
    J::obj()
        .with("architecture", n.arch.as_str())
        .with("burstbuffer_network_address", "")
        .with("boards", 1u32)
        .with("boot_time", n.boot_time.unwrap_or(0))
        .with("comment", "")
        .with("cores", n.cores_per_socket)
        .with("cpu_binding", 0u32)
        .with(
            "cpu_load",
            n.cpu_load
                .map_or(0, |l| (l * 100.0).round().max(0.0) as u64),
        )
        .with("extra", "")
        .with("free_memory", n.free_mem.unwrap_or(0))
        .with("cpus", n.cpus)
        .with("last_busy", n.last_busy_time.unwrap_or(0))
        .with("features", features.as_str())
        .with("active_features", features.as_str())
        .with("gres", gres_text(n, false))
        .with("gres_drained", "N/A")
        .with("gres_used", gres_text(n, true))
        .with("mcs_label", "")
        .with("name", n.name.as_str())
        .with("next_state_after_reboot", "invalid")
        .with("address", n.addr.as_str())
        .with("hostname", n.hostname.as_str())
        .with("state", base_state(n))
        .with("state_flags", state_flags(n))
        .with("next_state_after_reboot_flags", J::Arr(Vec::new()))
        .with("operating_system", n.os.as_str())
        .with("owner", J::Null)
        .with("partitions", parts)
        .with("port", 0u32)
        .with("real_memory", n.real_memory)
        .with("reason", n.reason.clone().unwrap_or_default())
        .with("reason_changed_at", n.reason_time.unwrap_or(0))
        .with("reason_set_by_user", n.reason_uid.map(user_name))
        .with("slurmd_start_time", n.agent_start_time.unwrap_or(0))
        .with("sockets", n.sockets)
        .with("threads", n.threads_per_core)
        .with("temporary_disk", 0u32)
        .with("weight", n.weight)
        .with("tres", node_tres(n, n.cpus, n.real_memory, false))
        .with("slurmd_version", n.version.as_str())
        .with("alloc_memory", n.alloc_mem)
        .with("alloc_cpus", alloc)
        .with("idle_cpus", n.cpus - alloc)
        .with(
            "tres_used",
            if alloc > 0 {
                J::from(node_tres(n, alloc, n.alloc_mem, true))
            } else {
                J::Null
            },
        )
        .with("tres_weighted", f64::from(alloc))
}

/// `sinfo --json`: every node (Slurm 22.05 ignores sinfo's format and filter options
/// in this mode, cf. its man page), as `meta`, `errors`, `nodes`.
pub fn render_json(
    nodes: &[Node],
    partitions: &[Partition],
    slurm_version: &str,
    user_name: &dyn Fn(u32) -> String,
) -> String {
    let doc = slurmjson::document(
        slurmjson::meta_v38(slurm_version),
        "nodes",
        nodes
            .iter()
            .map(|n| node_json(n, partitions, user_name))
            .collect(),
    );
    slurmjson::to_text(&doc)
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

fn emit(out: &Output) -> ExitCode {
    use std::io::Write;
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    ExitCode::from(out.code)
}

/// Runs `sinfo` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let mut cmd = crate::jobspec::opts::getopt_values(Args::command());
    let opts = match cmd
        .try_get_matches_from_mut(&args)
        .and_then(|m| Args::from_arg_matches(&m))
    {
        Ok(o) => o,
        Err(e) => {
            eprint!("{}", getopt_error("sinfo", &e, &args));
            return ExitCode::from(1);
        }
    };
    if opts.help {
        let entries = super::help::from_clap(&cmd);
        print!("{}", super::help::help("sinfo [OPTIONS]", &entries, ""));
        return ExitCode::SUCCESS;
    }
    if opts.usage {
        print!(
            "{}",
            super::help::usage("sinfo", &super::help::from_clap(&cmd), "")
        );
        return ExitCode::SUCCESS;
    }
    if opts.version {
        // From the configuration alone: no controller needed.
        println!("slurm {}", crate::config::advertised_slurm_version());
        return ExitCode::SUCCESS;
    }
    let env = |k: &str| std::env::var(k).ok();
    let q = match build_query(&opts, &env) {
        Ok(q) => q,
        Err(out) => return emit(&out),
    };
    let (mut client, cfg) = match Client::connect() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm_load_partitions: {e}");
            if let Some(h) = e.hint() {
                eprintln!("{h}");
            }
            return ExitCode::from(1);
        }
    };
    if let Some((list, from_env)) = crate::cli::squeue::clusters_asked(opts.clusters.as_deref())
        && let Err(m) = crate::cli::client::check_clusters(&list, from_env, &cfg.cluster_name)
    {
        eprintln!("sinfo: error: {m}");
        return ExitCode::from(1);
    }
    if opts.reservation {
        return match client.call(
            &Request::Reservations,
            answer!(Response::Reservations { resvs, now } => (resvs, now)),
        ) {
            Ok((resvs, now)) => {
                print!("{}", render_reservations(&resvs, now, opts.noheader));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("slurm_load_reservations: {e}");
                ExitCode::from(1)
            }
        };
    }
    let reply = client.call(
        &Request::Nodes,
        answer!(Response::Nodes { nodes, partitions, now } => (nodes, partitions, now)),
    );
    match reply {
        Ok((nodes, partitions, _)) if opts.json => {
            print!(
                "{}",
                render_json(&nodes, &partitions, &cfg.slurm_version, &user_name)
            );
            ExitCode::SUCCESS
        }
        Ok((nodes, partitions, now)) => {
            let ctx = Ctx {
                now,
                cluster: &cfg.cluster_name,
                user_name: &user_name,
            };
            emit(&render(&q, &nodes, &partitions, &ctx))
        }
        Err(e) => {
            eprintln!("slurm_load_partitions: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_795_964_168;

    /// node01 of the golden cluster: 32 CPUs (2:16:1), 16000 MB, 27 CPUs allocated.
    fn node(name: &str, alloc: u32) -> Node {
        let mut n = Node::new(name, 32, 16000);
        n.state = NodeState::Up;
        n.sockets = 2;
        n.cores_per_socket = 16;
        n.alloc_cpus = alloc;
        n.free_mem = Some(23660);
        n.cpu_load = Some(0.64);
        n.gres = crate::model::gres::parse_node_gres("gpu:4").unwrap();
        n.alloc_gres = vec![1, 1, 1, 1];
        n
    }

    const GOLDEN_SINFO_JSON: &str = r#"{
  "meta": {
    "plugin": {
      "type": "openapi\/v0.0.38",
      "name": "Slurm OpenAPI v0.0.38"
    },
    "Slurm": {
      "version": {
        "major": 22,
        "micro": 8,
        "minor": 5
      },
      "release": "22.05.8"
    }
  },
  "errors": [
  ],
  "nodes": [
    {
      "architecture": "x86_64",
      "burstbuffer_network_address": "",
      "boards": 1,
      "boot_time": 1795963008,
      "comment": "",
      "cores": 16,
      "cpu_binding": 0,
      "cpu_load": 64,
      "extra": "",
      "free_memory": 23660,
      "cpus": 32,
      "last_busy": 1795964134,
      "features": "",
      "active_features": "",
      "gres": "gpu:4",
      "gres_drained": "N\/A",
      "gres_used": "gpu:4",
      "mcs_label": "",
      "name": "node01",
      "next_state_after_reboot": "invalid",
      "address": "127.0.0.1",
      "hostname": "node01",
      "state": "mixed",
      "state_flags": [
      ],
      "next_state_after_reboot_flags": [
      ],
      "operating_system": "Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC @0",
      "owner": null,
      "partitions": [
        "debug",
        "batch"
      ],
      "port": 6818,
      "real_memory": 16000,
      "reason": "",
      "reason_changed_at": 0,
      "reason_set_by_user": null,
      "slurmd_start_time": 1795963834,
      "sockets": 2,
      "threads": 1,
      "temporary_disk": 0,
      "weight": 1,
      "tres": "cpu=32,mem=16000M,billing=32,gres\/gpu=4",
      "slurmd_version": "22.05.8",
      "alloc_memory": 10800,
      "alloc_cpus": 27,
      "idle_cpus": 5,
      "tres_used": "cpu=27,mem=10800M,gres\/gpu=4",
      "tres_weighted": 27.0
    }
  ]
}"#;

    /// The keys of the objects at `indent` spaces, in text order.
    fn keys_at(text: &str, indent: usize) -> Vec<String> {
        let pre = " ".repeat(indent);
        text.lines()
            .filter(|l| l.starts_with(&format!("{pre}\"")))
            .filter_map(|l| l.trim().split('"').nth(1).map(String::from))
            .collect()
    }

    #[test]
    fn json_nodes_match_golden_order_and_values() {
        // `sinfo --json` of ../shared/golden/sinfo.txt (real Slurm 22.05.8).
        let doc = GOLDEN_SINFO_JSON;
        let mut n = node("node01", 27);
        n.alloc_mem = 10800;
        n.arch = "x86_64".into();
        n.addr = "127.0.0.1".into();
        n.version = "22.05.8".into();
        n.alloc_gres = vec![1, 1, 1, 1];
        let ours = render_json(&[n.clone()], &parts(&["node01"]), "22.05.8", &name_of);
        assert_eq!(keys_at(&ours, 6), keys_at(doc, 6));
        assert_eq!(keys_at(&ours, 2), vec!["meta", "errors", "nodes"]);
        let g: serde_json::Value = serde_json::from_str(doc).unwrap();
        let v: serde_json::Value = serde_json::from_str(&ours).unwrap();
        for k in [
            "cores",
            "cpus",
            "cpu_load",
            "free_memory",
            "gres",
            "gres_drained",
            "gres_used",
            "name",
            "state",
            "state_flags",
            "partitions",
            "real_memory",
            "reason",
            "sockets",
            "threads",
            "weight",
            "tres",
            "alloc_memory",
            "alloc_cpus",
            "idle_cpus",
            "tres_used",
            "tres_weighted",
            "architecture",
            "address",
            "next_state_after_reboot",
            "owner",
        ] {
            assert_eq!(v["nodes"][0][k], g["nodes"][0][k], "{k}");
        }
        assert!(ours.contains("\"gres_drained\": \"N\\/A\","));
        assert!(ours.contains("\"state_flags\": [\n      ],"));
        assert!(ours.ends_with("\n  ]\n}"));
        // A drained idle node: base state idle, DRAIN flag, reason and who set it.
        let mut d = node("node02", 0);
        d.drain = true;
        d.reason = Some("disk".into());
        d.reason_uid = Some(0);
        d.reason_time = Some(1_795_963_000);
        let v = serde_json::to_value(node_json(&d, &parts(&["node01"]), &name_of)).unwrap();
        assert_eq!(v["state"], "idle");
        assert_eq!(v["state_flags"], serde_json::json!(["DRAIN"]));
        assert_eq!(v["reason"], "disk");
        assert_eq!(v["reason_set_by_user"], "root");
        assert_eq!(v["partitions"], serde_json::json!([]));
        assert_eq!(v["tres_used"], serde_json::Value::Null);
        assert_eq!(v["idle_cpus"], 32);
    }

    fn parts(nodes: &[&str]) -> Vec<Partition> {
        let names: Vec<String> = nodes.iter().map(|s| s.to_string()).collect();
        let mut debug = Partition::new("debug", names.clone());
        debug.default = true;
        debug.max_time = TimeLimit::Minutes(60);
        let batch = Partition::new("batch", names);
        vec![debug, batch]
    }

    fn name_of(uid: u32) -> String {
        if uid == 0 {
            "root".into()
        } else {
            uid.to_string()
        }
    }

    fn sinfo(argv: &[&str], nodes: &[Node], partitions: &[Partition]) -> Output {
        let full: Vec<&str> = std::iter::once("sinfo")
            .chain(argv.iter().copied())
            .collect();
        let args = Args::try_parse_from(full).expect("test argv parses");
        match build_query(&args, &|_| None) {
            Ok(q) => {
                let ctx = Ctx {
                    now: NOW,
                    cluster: "anchor",
                    user_name: &name_of,
                };
                render(&q, nodes, partitions, &ctx)
            }
            Err(o) => o,
        }
    }

    fn golden() -> (Vec<Node>, Vec<Partition>) {
        (vec![node("node01", 27)], parts(&["node01"]))
    }

    #[test]
    fn default_view_matches_golden() {
        let (n, p) = golden();
        assert_eq!(
            sinfo(&[], &n, &p).stdout,
            "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*       up    1:00:00      1    mix node01\n\
             batch        up   infinite      1    mix node01\n"
        );
    }

    #[test]
    fn node_long_matches_golden() {
        let (n, p) = golden();
        let out = sinfo(&["-N", "-l"], &n, &p);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[0], fmt_banner(NOW));
        assert_eq!(
            lines[1],
            "NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              "
        );
        assert_eq!(
            lines[2],
            "node01         1    debug*       mixed 32     2:16:1  16000        0      1   (null) none                "
        );
        assert_eq!(
            lines[3],
            "node01         1     batch       mixed 32     2:16:1  16000        0      1   (null) none                "
        );
    }

    #[test]
    fn hidden_partitions_need_all() {
        let (n, mut p) = golden();
        p[1].hidden = true;
        assert_eq!(sinfo(&["-h", "-o", "%P"], &n, &p).stdout, "debug*\n");
        assert_eq!(
            sinfo(&["-h", "-a", "-o", "%P"], &n, &p).stdout,
            "debug*\nbatch\n"
        );
        assert_eq!(
            sinfo(&["-h", "-p", "batch", "-o", "%P"], &n, &p).stdout,
            "batch\n"
        );
    }

    #[test]
    fn custom_formats_match_golden() {
        let (n, p) = golden();
        assert_eq!(
            sinfo(&["-o", "%P %D %t %G"], &n, &p).stdout,
            "PARTITION NODES STATE GRES\ndebug* 1 mix gpu:4\nbatch 1 mix gpu:4\n"
        );
        assert!(
            sinfo(&["-N", "-O", "NodeList,GresUsed:30"], &n, &p)
                .stdout
                .contains("gpu:4(IDX:0-3)")
        );
        assert_eq!(
            sinfo(&["-N", "-o", "%N %c %C %m %e %t %T %O"], &n, &p).stdout,
            "NODELIST CPUS CPUS(A/I/O/T) MEMORY FREE_MEM STATE STATE CPU_LOAD\n\
             node01 32 27/5/0/32 16000 23660 mix mixed 0.64\n\
             node01 32 27/5/0/32 16000 23660 mix mixed 0.64\n"
        );
    }

    #[test]
    fn summarize_matches_golden() {
        let (n, p) = golden();
        assert_eq!(
            sinfo(&["-s"], &n, &p).stdout,
            "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n\
             debug*       up    1:00:00          1/0/0/1 node01\n\
             batch        up   infinite          1/0/0/1 node01\n"
        );
    }

    #[test]
    fn reasons_list() {
        let (n, p) = golden();
        assert_eq!(
            sinfo(&["-R"], &n, &p).stdout,
            "REASON               USER      TIMESTAMP           NODELIST\n"
        );
        let mut a = node("n1", 0);
        a.drain = true;
        a.reason = Some("maintenance".into());
        a.reason_uid = Some(0);
        a.reason_time = Some(NOW - 60);
        let mut b = a.clone();
        b.name = "n2".into();
        let c = node("n3", 0);
        let nodes = vec![a, b, c];
        let out = sinfo(&["-R", "-h"], &nodes, &parts(&["n1", "n2", "n3"]));
        assert_eq!(
            out.stdout,
            format!(
                "maintenance          root      {} n[1-2]\n",
                fmt_ts(NOW - 60)
            )
        );
    }

    #[test]
    fn groups_split_by_state_and_merge_alike_nodes() {
        let mut d = node("n4", 0);
        d.drain = true;
        let nodes = vec![node("n1", 0), node("n2", 32), node("n3", 0), d];
        let p = parts(&["n1", "n2", "n3", "n4"]);
        let out = sinfo(&["-p", "debug"], &nodes, &p);
        assert_eq!(
            out.stdout,
            "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*       up    1:00:00      2   idle n[1,3]\n\
             debug*       up    1:00:00      1  alloc n2\n\
             debug*       up    1:00:00      1  drain n4\n"
        );
        assert_eq!(
            sinfo(&["-h", "-p", "batch", "-o", "%R %D %C %F %A"], &nodes, &p).stdout,
            "batch 4 32/64/32/128 1/2/1/4 1/2\n"
        );
        assert_eq!(sinfo(&["-h", "-p", "nosuch"], &nodes, &p).stdout, "");
    }

    #[test]
    fn state_and_node_filters() {
        let mut d = node("n3", 0);
        d.state = NodeState::Down;
        d.not_responding = true;
        let nodes = vec![node("n1", 0), node("n2", 4), d];
        let p = parts(&["n1", "n2", "n3"]);
        let q = |argv: &[&str]| sinfo(argv, &nodes, &p).stdout;
        assert_eq!(
            q(&[
                "-h",
                "-N",
                "-p",
                "debug",
                "-t",
                "idle,mix,alloc",
                "-o",
                "%N"
            ]),
            "n1\nn2\n"
        );
        assert_eq!(
            q(&["-h", "-N", "-p", "debug", "-t", "down,drain", "-o", "%N"]),
            "n3\n"
        );
        assert_eq!(
            q(&["-h", "-N", "-p", "debug", "-t", "MIXED", "-o", "%N|%t|%T"]),
            "n2|mix|mixed\n"
        );
        assert_eq!(
            q(&["-h", "-N", "-p", "debug", "-n", "n[1-2]", "-o", "%N"]),
            "n1\nn2\n"
        );
        assert_eq!(
            q(&["-h", "-N", "-p", "debug", "-r", "-o", "%N"]),
            "n1\nn2\n"
        );
        assert_eq!(q(&["-h", "-N", "-p", "debug", "-d", "-o", "%t"]), "down*\n");
        let out = sinfo(&["-t", "sideways"], &nodes, &p);
        assert_eq!(out.code, 1);
        assert!(
            out.stderr
                .contains("Invalid node state specified: sideways")
        );
    }

    #[test]
    fn long_format_option() {
        let (n, p) = golden();
        let out = sinfo(
            &[
                "-N",
                "-O",
                "NodeList,StateLong,CPUsState,Memory:.8,AllocMem,Gres:8|,bogus",
            ],
            &n,
            &p,
        );
        assert_eq!(
            out.stderr,
            "sinfo: error: Invalid node format specification: bogus\n"
        );
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[0],
            "NODELIST            STATE               CPUS(A/I/O/T)         MEMORYALLOCMEM            GRES    |"
        );
        assert_eq!(
            lines[1],
            "node01              mixed               27/5/0/32              160000                   gpu:4   |"
        );
    }

    #[test]
    fn partition_long_and_empty_partitions() {
        let (n, mut p) = golden();
        p.push(Partition::new("empty", Vec::new()));
        let out = sinfo(&["-l"], &n, &p);
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(
            lines[1],
            "PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST"
        );
        assert_eq!(
            lines[2],
            "debug*       up    1:00:00 1-infinite   no       NO        all      1       mixed node01"
        );
        assert_eq!(
            lines[4],
            "empty        up   infinite 1-infinite   no       NO        all      0         n/a "
        );
    }

    #[test]
    fn cluster_line_and_noheader() {
        let (n, p) = golden();
        assert_eq!(
            sinfo(&["-M", "anchor", "-h", "-o", "%P"], &n, &p).stdout,
            "CLUSTER: anchor\ndebug*\nbatch\n"
        );
    }

    #[test]
    fn limits_text() {
        assert_eq!(fmt_limit(TimeLimit::Unlimited), "infinite");
        assert_eq!(fmt_limit(TimeLimit::Minutes(5)), "5:00");
        assert_eq!(fmt_limit(TimeLimit::Minutes(1440 * 2)), "2-00:00:00");
    }

    #[test]
    fn version_and_errors_parse() {
        let a = Args::try_parse_from(["sinfo", "--version"]).expect("parses");
        assert!(a.version);
        let a = Args::try_parse_from(["sinfo", "-V"]).expect("parses");
        assert!(a.version);
        let argv: Vec<OsString> = ["sinfo", "--bogus"].iter().map(OsString::from).collect();
        let e = Args::try_parse_from(&argv).unwrap_err();
        assert_eq!(
            getopt_error("sinfo", &e, &argv),
            "sinfo: unrecognized option '--bogus'\nTry \"sinfo --help\" for more information\n"
        );
    }
}
