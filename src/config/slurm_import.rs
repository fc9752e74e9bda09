//! Import of a Slurm configuration (`sluice config import slurm.conf [gres.conf]
//! [topology.conf] [cgroup.conf]`): slurm.conf(5)'s `NodeName=`, `PartitionName=`,
//! scheduler, priority, preemption, script and limit keys, gres.conf(5) (read by
//! [`super::gres_conf::parse_slurm`]), topology.conf(5) (read by
//! [`crate::model::topology::parse_topology_conf`]) and cgroup.conf(5), written out as
//! the equivalent sluice TOML, with a note for every key that is not carried and why.
//!
//! Where Slurm's default differs from sluice's, the default Slurm would apply is
//! written out (unset `PriorityWeight*` are 0 in Slurm, `EnforcePartLimits` is `NO`,
//! `AccountingStorageEnforce` is none), so that the imported cluster behaves as the
//! Slurm one did. Parsing follows src/common/read_config.c: `Key=Value` words, keys
//! in any case, `#` comments, `\` continuations, `NodeName=DEFAULT` and
//! `PartitionName=DEFAULT` lines giving defaults to the lines after them.

use super::gres_conf::{self, GresLine};
use crate::model::hostlist;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One input file: its name (for notes and errors) and its text.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// The files of a Slurm configuration; slurm.conf is required, the others optional.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub slurm_conf: Input<'a>,
    pub gres_conf: Option<Input<'a>>,
    pub topology_conf: Option<Input<'a>>,
    pub cgroup_conf: Option<Input<'a>>,
}

/// The result of an import: the TOML text, and one line per key or value that was not
/// carried (`slurm.conf:12: AuthType=auth/munge: not carried: …`).
#[derive(Debug, Clone, Default)]
pub struct Imported {
    pub toml: String,
    pub notes: Vec<String>,
}

/// Keys that start a line of their own kind in slurm.conf.
const LINE_KINDS: &[&str] = &[
    "nodename",
    "partitionname",
    "nodeset",
    "downnodes",
    "frontendname",
];

/// The global keys slurm.conf(5) of Slurm 22.05 defines (src/common/read_config.c's
/// option table), lower-case: a key outside them makes slurmctld refuse the file.
const SLURM_CONF_KEYS: &[&str] = &[
    "accountingstoragebackuphost",
    "accountingstorageenforce",
    "accountingstorageexternalhost",
    "accountingstoragehost",
    "accountingstorageloc",
    "accountingstorageparameters",
    "accountingstoragepass",
    "accountingstorageport",
    "accountingstoragetres",
    "accountingstoragetype",
    "accountingstorageuser",
    "accountingstoreflags",
    "accountingstorejobcomment",
    "acctgatherenergytype",
    "acctgatherfilesystemtype",
    "acctgatherinfinibandtype",
    "acctgatherinterconnecttype",
    "acctgathernodefreq",
    "acctgatherprofiletype",
    "allowspecresourcesusage",
    "authaltparameters",
    "authalttypes",
    "authinfo",
    "authtype",
    "backupaddr",
    "backupcontroller",
    "batchstarttimeout",
    "bcastexclude",
    "bcastparameters",
    "burstbufferparameters",
    "burstbuffertype",
    "clifilterplugins",
    "clustername",
    "communicationparameters",
    "completewait",
    "controladdr",
    "controlmachine",
    "corespecplugin",
    "cpufreqdef",
    "cpufreqgovernors",
    "credtype",
    "cryptotype",
    "debugflags",
    "defcpupergpu",
    "defmempercpu",
    "defmempergpu",
    "defmempernode",
    "dependencyparameters",
    "disablerootjobs",
    "eiotimeout",
    "enforcepartlimits",
    "epilog",
    "epilogmsgtime",
    "epilogslurmctld",
    "extsensorsfreq",
    "extsensorstype",
    "fairsharedampeningfactor",
    "fastschedule",
    "federationparameters",
    "firstjobid",
    "getenvtimeout",
    "gpufreqdef",
    "grestypes",
    "groupupdateforce",
    "groupupdatetime",
    "healthcheckinterval",
    "healthchecknodestate",
    "healthcheckprogram",
    "inactivelimit",
    "interactivestepoptions",
    "jobacctgatherfrequency",
    "jobacctgatherparams",
    "jobacctgathertype",
    "jobcomphost",
    "jobcomploc",
    "jobcompparams",
    "jobcomppass",
    "jobcompport",
    "jobcomptype",
    "jobcompuser",
    "jobcontainertype",
    "jobcredentialprivatekey",
    "jobcredentialpubliccertificate",
    "jobfileappend",
    "jobrequeue",
    "jobsubmitplugins",
    "keepalivetime",
    "killonbadexit",
    "killwait",
    "launchparameters",
    "launchtype",
    "licenses",
    "logtimeformat",
    "maildomain",
    "mailprog",
    "maxarraysize",
    "maxbatchrequeue",
    "maxdbdmsgs",
    "maxjobcount",
    "maxjobid",
    "maxmempercpu",
    "maxmempernode",
    "maxnodecount",
    "maxstepcount",
    "maxtaskspernode",
    "mcsparameters",
    "mcsplugin",
    "messagetimeout",
    "minjobage",
    "mpidefault",
    "mpiparams",
    "nodefeaturesplugins",
    "overtimelimit",
    "plugindir",
    "plugstackconfig",
    "powerparameters",
    "powerplugin",
    "preemptexempttime",
    "preemptmode",
    "preempttype",
    "prepparameters",
    "prepplugins",
    "prioritycalcperiod",
    "prioritydecayhalflife",
    "priorityfavorsmall",
    "priorityflags",
    "prioritymaxage",
    "priorityparameters",
    "prioritysitefactorparameters",
    "prioritysitefactorplugin",
    "prioritytype",
    "priorityusageresetperiod",
    "priorityweightage",
    "priorityweightassoc",
    "priorityweightfairshare",
    "priorityweightjobsize",
    "priorityweightpartition",
    "priorityweightqos",
    "priorityweighttres",
    "privatedata",
    "proctracktype",
    "prolog",
    "prologepilogtimeout",
    "prologflags",
    "prologslurmctld",
    "propagateprioprocess",
    "propagateresourcelimits",
    "propagateresourcelimitsexcept",
    "rebootprogram",
    "reconfigflags",
    "requeueexit",
    "requeueexithold",
    "resumefailprogram",
    "resumeprogram",
    "resumerate",
    "resumetimeout",
    "resvepilog",
    "resvoverrun",
    "resvprolog",
    "returntoservice",
    "routeplugin",
    "sallocdefaultcommand",
    "sbcastparameters",
    "schedulerauth",
    "schedulerparameters",
    "schedulertimeslice",
    "schedulertype",
    "scronparameters",
    "selecttype",
    "selecttypeparameters",
    "slurmctldaddr",
    "slurmctlddebug",
    "slurmctldhost",
    "slurmctldlogfile",
    "slurmctldparameters",
    "slurmctldpidfile",
    "slurmctldplugstack",
    "slurmctldport",
    "slurmctldprimaryoffprog",
    "slurmctldprimaryonprog",
    "slurmctldsyslogdebug",
    "slurmctldtimeout",
    "slurmddebug",
    "slurmdlogfile",
    "slurmdparameters",
    "slurmdpidfile",
    "slurmdport",
    "slurmdspooldir",
    "slurmdsyslogdebug",
    "slurmdtimeout",
    "slurmduser",
    "slurmschedlogfile",
    "slurmschedloglevel",
    "slurmuser",
    "srunepilog",
    "srunportrange",
    "srunprolog",
    "statesavelocation",
    "suspendexcnodes",
    "suspendexcparts",
    "suspendexcstates",
    "suspendprogram",
    "suspendrate",
    "suspendtime",
    "suspendtimeout",
    "switchparameters",
    "switchtype",
    "taskepilog",
    "taskplugin",
    "taskpluginparam",
    "taskprolog",
    "tcptimeout",
    "tmpfs",
    "topologyparam",
    "topologyplugin",
    "trackwckey",
    "treewidth",
    "unkillablestepprogram",
    "unkillablesteptimeout",
    "usepam",
    "vsizefactor",
    "waittime",
    "x11parameters",
];

/// The keys of a `NodeName=` line in slurm.conf(5), lower-case.
const NODE_KEYS: &[&str] = &[
    "bcastaddr",
    "boards",
    "corespeccount",
    "corespersocket",
    "cpubind",
    "cpus",
    "cpuspeclist",
    "feature",
    "features",
    "gres",
    "memspeclimit",
    "nodeaddr",
    "nodehostname",
    "port",
    "procs",
    "realmemory",
    "reason",
    "sockets",
    "socketsperboard",
    "state",
    "threadspercore",
    "tmpdisk",
    "tresweights",
    "weight",
];

/// The keys of a `PartitionName=` line in slurm.conf(5), lower-case.
const PARTITION_KEYS: &[&str] = &[
    "allocnodes",
    "allowaccounts",
    "allowgroups",
    "allowqos",
    "alternate",
    "cpubind",
    "default",
    "defaulttime",
    "defcpupergpu",
    "defmempercpu",
    "defmempergpu",
    "defmempernode",
    "denyaccounts",
    "denyqos",
    "disablerootjobs",
    "exclusiveuser",
    "gracetime",
    "hidden",
    "lln",
    "maxcpuspernode",
    "maxmempercpu",
    "maxmempernode",
    "maxnodes",
    "maxtime",
    "minnodes",
    "nodes",
    "oversubscribe",
    "overtimelimit",
    "powerdownonidle",
    "preemptmode",
    "priority",
    "priorityjobfactor",
    "prioritytier",
    "qos",
    "reqresv",
    "resumetimeout",
    "rootonly",
    "selecttypeparameters",
    "shared",
    "state",
    "suspendtime",
    "suspendtimeout",
    "tresbillingweights",
];

/// slurm.conf keys sluice needs no equivalent of, with the reason given in the note.
const NOT_NEEDED: &[(&str, &str)] = &[
    (
        "slurmctldhost",
        "the controller is wherever `sluice controller` runs; front-ends find it through its socket",
    ),
    (
        "controlmachine",
        "the controller is wherever `sluice controller` runs",
    ),
    (
        "controladdr",
        "the controller is wherever `sluice controller` runs",
    ),
    ("backupcontroller", "sluice has no backup controller"),
    ("slurmuser", "the controller runs as the user who starts it"),
    (
        "slurmduser",
        "agents run as root (system mode) or as the user",
    ),
    (
        "slurmctldport",
        "front-ends reach the controller over a Unix socket",
    ),
    ("slurmdport", "agents are reached in-process or over SSH"),
    (
        "authtype",
        "sluice authenticates with Unix socket credentials and SSH keys",
    ),
    (
        "credtype",
        "sluice authenticates with Unix socket credentials and SSH keys",
    ),
    (
        "authinfo",
        "sluice authenticates with Unix socket credentials and SSH keys",
    ),
    (
        "cryptotype",
        "sluice authenticates with Unix socket credentials and SSH keys",
    ),
    (
        "statesavelocation",
        "sluice keeps its state in state_dir (default /var/lib/sluice)",
    ),
    (
        "slurmdspooldir",
        "sluice's agents spool under spool_dir (default state_dir/spool)",
    ),
    ("slurmctldpidfile", "sluice keeps its pid in state_dir"),
    ("slurmdpidfile", "sluice keeps its pid in state_dir"),
    ("slurmctldlogfile", "the controller logs to state_dir"),
    ("slurmdlogfile", "agents log to the controller's log"),
    (
        "slurmddebug",
        "agents log at the controller's level (SLUICE_LOG)",
    ),
    (
        "mpidefault",
        "sluice starts tasks itself and sets PMI-free MPI variables",
    ),
    ("switchtype", "sluice has no switch plugins"),
    (
        "proctracktype",
        "sluice tracks processes with cgroups where it can ([cgroup] plugin)",
    ),
    (
        "selecttype",
        "sluice always allocates cores, memory and GRES (select/cons_tres)",
    ),
    (
        "selecttypeparameters",
        "sluice always allocates cores and memory (CR_Core_Memory)",
    ),
    ("grestypes", "sluice takes GRES names from the nodes' gres"),
    (
        "jobacctgathertype",
        "sluice samples usage through its cgroups and /proc",
    ),
    (
        "jobacctgatherfrequency",
        "sluice samples usage at its own period",
    ),
    (
        "accountingstoragetype",
        "sluice keeps accounting in its own SQLite database",
    ),
    (
        "accountingstoragehost",
        "sluice keeps accounting in its own SQLite database",
    ),
    (
        "accountingstorageport",
        "sluice keeps accounting in its own SQLite database",
    ),
    (
        "accountingstorageuser",
        "sluice keeps accounting in its own SQLite database",
    ),
    (
        "accountingstoragepass",
        "sluice keeps accounting in its own SQLite database",
    ),
    (
        "accountingstoragetres",
        "sluice records cpu, mem, node, billing and every GRES",
    ),
    (
        "jobcomptype",
        "sluice has no job completion plugin; sacct reads its database",
    ),
    (
        "jobcomploc",
        "sluice has no job completion plugin; sacct reads its database",
    ),
    ("maxjobcount", "sluice keeps no fixed job table"),
    ("slurmctldtimeout", "sluice has no backup controller"),
    (
        "waittime",
        "srun waits for its nodes as long as the controller keeps them",
    ),
    (
        "returntoservice",
        "a node that comes back returns to service",
    ),
    (
        "slurmdparameters",
        "sluice's nodes report what the config declares",
    ),
    ("launchtype", "sluice launches steps itself"),
    ("mailprog", "sluice sends no mail"),
    (
        "topologyplugin",
        "the topology comes from topology.conf (pass it to the import)",
    ),
    (
        "prioritytype",
        "sluice always computes multifactor priority",
    ),
    (
        "inactivelimit",
        "sluice ends an srun's job when srun goes away",
    ),
];

/// A parsed `Key=Value` word list of one logical line, keys lower-cased, with the
/// 1-based line number.
struct Line {
    no: usize,
    pairs: Vec<(String, String, String)>, // (lower key, key as written, value)
}

/// Splits the text into logical lines of `Key=Value` words (quotes keep spaces).
fn lines(text: &str, file: &str) -> Result<Vec<Line>, String> {
    let mut out = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if pending.is_empty() {
            start = i + 1;
        }
        let body = strip_comment(raw);
        if let Some(b) = body.trim_end().strip_suffix('\\') {
            pending.push_str(b);
            pending.push(' ');
            continue;
        }
        pending.push_str(&body);
        let logical = std::mem::take(&mut pending);
        let words = split_words(&logical).map_err(|e| format!("{file}:{start}: {e}"))?;
        if words.is_empty() {
            continue;
        }
        let mut pairs = Vec::new();
        for w in words {
            match w.split_once('=') {
                Some((k, v)) => pairs.push((k.to_ascii_lowercase(), k.to_string(), unquote(v))),
                // `Include FILE` and other bare words: kept with an empty value.
                None => pairs.push((w.to_ascii_lowercase(), w.clone(), String::new())),
            }
        }
        out.push(Line { no: start, pairs });
    }
    Ok(out)
}

fn strip_comment(s: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                out.push(c);
            }
            '#' if !quoted => break,
            _ => out.push(c),
        }
    }
    out
}

fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".into());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

fn unquote(v: &str) -> String {
    v.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(v)
        .to_string()
}

/// Whether `text` reads as a Slurm slurm.conf rather than TOML: a non-comment line that
/// starts with one of slurm.conf's characteristic keys followed directly by `=`.
pub fn looks_like_slurm_conf(text: &str) -> bool {
    const KEYS: &[&str] = &[
        "nodename=",
        "partitionname=",
        "slurmctldhost=",
        "controlmachine=",
        "clustername=",
        "schedulertype=",
        "selecttype=",
        "slurmuser=",
    ];
    text.lines().any(|l| {
        let l = l.trim_start().to_ascii_lowercase();
        KEYS.iter().any(|k| l.starts_with(k))
    })
}

/// A TOML value: a quoted string, a number or a boolean.
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn yes(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" | "1" => Some(true),
        "no" | "n" | "false" | "0" => Some(false),
        _ => None,
    }
}

fn unlimited(v: &str) -> bool {
    matches!(
        v.to_ascii_uppercase().as_str(),
        "UNLIMITED" | "INFINITE" | "NONE"
    )
}

/// Collects the notes of one file, and the errors that make slurmctld refuse it.
struct Notes<'a> {
    file: &'a str,
    out: &'a mut Vec<String>,
    errors: Vec<String>,
}

impl Notes<'_> {
    /// A value or key slurmctld refuses (`fatal: Parsing error at unrecognized key`,
    /// a number that does not parse): the import fails and writes nothing.
    fn error(&mut self, no: usize, key: &str, val: &str, why: &str) {
        self.errors
            .push(format!("{}:{no}: {key}={val}: {why}", self.file));
    }
    /// A key sluice does not carry: a note when slurm.conf(5) knows it (`known`, the
    /// lower-case names of its line kind), an error when it does not.
    fn unknown(&mut self, no: usize, key: &str, val: &str, known: &[&str], why: &str) {
        if known.contains(&key.to_ascii_lowercase().as_str()) {
            self.skip(no, key, val, why);
        } else {
            self.error(
                no,
                key,
                val,
                "unrecognized key (slurmctld refuses the file)",
            );
        }
    }
    fn skip(&mut self, no: usize, key: &str, val: &str, why: &str) {
        let kv = if val.is_empty() {
            key.to_string()
        } else {
            format!("{key}={val}")
        };
        self.out
            .push(format!("{}:{no}: {kv}: not carried: {why}", self.file));
    }
    fn say(&mut self, no: usize, what: &str) {
        self.out.push(format!("{}:{no}: {what}", self.file));
    }
}

/// A node line's resolved values.
#[derive(Debug, Clone, Default)]
struct NodeDecl {
    no: usize,
    names: String,
    addr: Option<String>,
    keys: BTreeMap<String, (String, String)>, // lower key -> (key, value)
}

/// A partition line's resolved values.
#[derive(Debug, Clone, Default)]
struct PartDecl {
    no: usize,
    name: String,
    keys: BTreeMap<String, (String, String)>,
}

/// The TOML being built, section by section.
#[derive(Default)]
struct Out {
    top: String,
    licenses: String,
    scheduler: String,
    priority: String,
    cgroup: String,
    nodes: String,
    partitions: String,
    gres: String,
    topology: String,
}

/// Converts a Slurm configuration to sluice TOML.
///
/// Errors: a syntax error (unterminated quote, a malformed gres.conf or topology.conf,
/// a bad hostlist), naming the file and line. Keys sluice cannot carry are not errors:
/// they are listed in [`Imported::notes`].
pub fn import(inputs: &Inputs) -> Result<Imported, String> {
    let mut notes = Vec::new();
    let mut out = Out::default();
    let sc = inputs.slurm_conf;
    let mut n = Notes {
        file: sc.name,
        out: &mut notes,
        errors: Vec::new(),
    };
    let mut node_default: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut part_default: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut nodes: Vec<NodeDecl> = Vec::new();
    let mut parts: Vec<PartDecl> = Vec::new();
    let mut globals: BTreeMap<String, (usize, String, String)> = BTreeMap::new();
    let mut ctld_hosts: Vec<String> = Vec::new();
    for line in lines(sc.text, sc.name)? {
        let (k0, key0, v0) = &line.pairs[0];
        match k0.as_str() {
            "nodename" => {
                let mut keys = BTreeMap::new();
                for (k, key, v) in &line.pairs[1..] {
                    keys.insert(k.clone(), (key.clone(), v.clone()));
                }
                if v0.eq_ignore_ascii_case("DEFAULT") {
                    node_default.extend(keys);
                    continue;
                }
                let mut all = node_default.clone();
                all.extend(keys);
                let addr = all
                    .get("nodeaddr")
                    .or(all.get("nodehostname"))
                    .map(|(_, v)| v.clone());
                nodes.push(NodeDecl {
                    no: line.no,
                    names: v0.clone(),
                    addr,
                    keys: all,
                });
            }
            "partitionname" => {
                let mut keys = BTreeMap::new();
                for (k, key, v) in &line.pairs[1..] {
                    keys.insert(k.clone(), (key.clone(), v.clone()));
                }
                if v0.eq_ignore_ascii_case("DEFAULT") {
                    part_default.extend(keys);
                    continue;
                }
                let mut all = part_default.clone();
                all.extend(keys);
                parts.push(PartDecl {
                    no: line.no,
                    name: v0.clone(),
                    keys: all,
                });
            }
            k if LINE_KINDS.contains(&k) => {
                n.skip(
                    line.no,
                    key0,
                    v0,
                    "sluice has no node sets, front-end nodes or DownNodes lines",
                );
            }
            "include" => n.skip(
                line.no,
                key0,
                v0,
                "included files are not read; import them as well or merge them by hand",
            ),
            _ => {
                for (k, key, v) in &line.pairs {
                    if k == "slurmctldhost" || k == "controlmachine" {
                        let host = v.split('(').next().unwrap_or("").to_string();
                        ctld_hosts.push(host);
                    }
                    globals.insert(k.clone(), (line.no, key.clone(), v.clone()));
                }
            }
        }
    }
    import_globals(&globals, &mut out, &mut n);
    let gl = |k: &str| globals.get(k).map(|(_, _, v)| v.clone());
    for d in &nodes {
        import_node(d, &ctld_hosts, &mut out, &mut n)?;
    }
    // Cluster-wide memory and GPU defaults, inherited by partitions that set none.
    let inherited: Vec<(&str, Option<String>)> = [
        "defmempercpu",
        "defmempernode",
        "maxmempernode",
        "defcpupergpu",
        "defmempergpu",
    ]
    .iter()
    .map(|k| (*k, gl(k)))
    .collect();
    for p in &parts {
        let mut p = p.clone();
        for (k, v) in &inherited {
            if let Some(v) = v
                && !p.keys.contains_key(*k)
            {
                p.keys
                    .insert((*k).to_string(), ((*k).to_string(), v.clone()));
            }
        }
        import_partition(&p, &mut out, &mut n);
    }
    let mut errors = std::mem::take(&mut n.errors);
    if !errors.is_empty() {
        let line_no = |e: &String| -> usize {
            e[sc.name.len()..]
                .trim_start_matches(':')
                .split(':')
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0)
        };
        errors.sort_by_key(line_no);
        return Err(errors.join("\n"));
    }
    if let Some(g) = inputs.gres_conf {
        let known: Vec<String> = nodes
            .iter()
            .filter_map(|d| hostlist::expand(&d.names).ok())
            .flatten()
            .collect();
        import_gres(g, &known, &mut out, &mut notes)?;
    }
    if let Some(t) = inputs.topology_conf {
        import_topology(t, &mut out)?;
    } else if let Some((no, key, v)) = globals.get("topologyplugin")
        && !v.eq_ignore_ascii_case("topology/none")
        && !v.eq_ignore_ascii_case("topology/default")
    {
        notes.push(format!(
            "{}:{no}: {key}={v}: no topology.conf was given, so no topology is carried",
            sc.name
        ));
    }
    if let Some(c) = inputs.cgroup_conf {
        import_cgroup(c, &mut out, &mut notes)?;
    }
    if let Some((no, key, v)) = globals.get("taskplugin")
        && !v.to_ascii_lowercase().contains("task/cgroup")
        && out
            .cgroup
            .lines()
            .any(|l| l.starts_with("constrain") && l.ends_with("= true"))
    {
        notes.push(format!(
            "{}:{no}: {key}={v}: without task/cgroup Slurm constrains nothing, but sluice applies cgroup.conf's Constrain* keys",
            sc.name
        ));
    }
    // In file order, then line order (the keys were visited by name).
    let files: Vec<&str> = [
        Some(sc),
        inputs.gres_conf,
        inputs.topology_conf,
        inputs.cgroup_conf,
    ]
    .into_iter()
    .flatten()
    .map(|i| i.name)
    .collect();
    let key = |note: &String| {
        let f = files
            .iter()
            .position(|f| note.starts_with(&format!("{f}:")))
            .unwrap_or(usize::MAX);
        let rest = files.get(f).map_or("", |f| &note[f.len() + 1..]);
        let no: usize = rest
            .split(':')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        (f, no)
    };
    notes.sort_by_key(key);
    Ok(Imported {
        toml: assemble(&out, sc.name),
        notes,
    })
}

fn assemble(out: &Out, source: &str) -> String {
    let mut s = format!(
        "# sluice configuration imported from {source} by `sluice config import`.\n\
         # Keys sluice could not carry were listed when it ran; see README.md.\n\n"
    );
    s.push_str(&out.top);
    for (head, body) in [
        ("[licenses]", &out.licenses),
        ("[scheduler]", &out.scheduler),
        ("[priority]", &out.priority),
        ("[cgroup]", &out.cgroup),
    ] {
        if !body.is_empty() {
            let _ = write!(s, "\n{head}\n{body}");
        }
    }
    s.push_str(&out.nodes);
    s.push_str(&out.partitions);
    s.push_str(&out.gres);
    s.push_str(&out.topology);
    s
}

/// Parses a number, noting the key when it is not one.
fn num<T: std::str::FromStr>(n: &mut Notes, no: usize, key: &str, v: &str) -> Option<T> {
    let r = v.trim().parse::<T>().ok();
    if r.is_none() {
        n.error(no, key, v, "not a number");
    }
    r
}

fn import_globals(g: &BTreeMap<String, (usize, String, String)>, out: &mut Out, n: &mut Notes) {
    let get = |k: &str| g.get(k).map(|(_, _, v)| v.as_str());
    let mut weights_seen: Option<usize> = None;
    let mut sched_params: Vec<(usize, String)> = Vec::new();
    for (k, (no, key, v)) in g {
        let no = *no;
        let (key, v) = (key.as_str(), v.as_str());
        let top = &mut out.top;
        match k.as_str() {
            "clustername" => {
                let _ = writeln!(top, "cluster_name = {}", q(v));
            }
            "minjobage" | "killwait" | "maxarraysize" | "slurmdtimeout" => {
                let name = match k.as_str() {
                    "minjobage" => "min_job_age",
                    "killwait" => "kill_wait",
                    "maxarraysize" => "max_array_size",
                    _ => "slurmd_timeout",
                };
                if k == "slurmdtimeout" && v.trim() == "0" {
                    n.skip(no, key, v, "sluice always times out silent nodes");
                } else if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(top, "{name} = {x}");
                }
            }
            "rebootprogram" => {
                let _ = writeln!(top, "reboot_program = {}", q(v));
            }
            "resumetimeout" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(top, "resume_timeout = {x}");
                }
            }
            "overtimelimit" => {
                if v.eq_ignore_ascii_case("UNLIMITED") {
                    let _ = writeln!(top, "over_time_limit = \"UNLIMITED\"");
                } else if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(top, "over_time_limit = {x}");
                }
            }
            "enforcepartlimits" => {
                let up = v.to_ascii_uppercase();
                let val = match up.as_str() {
                    "ALL" | "YES" => "ALL",
                    "ANY" => {
                        n.say(
                            no,
                            "EnforcePartLimits=ANY: carried as ALL (sluice checks every partition of the job)",
                        );
                        "ALL"
                    }
                    _ => "NO",
                };
                let _ = writeln!(top, "enforce_part_limits = {}", q(val));
            }
            "accountingstorageenforce" => {
                let _ = writeln!(top, "accounting_storage_enforce = {}", q(v));
            }
            "licenses" => {
                for item in v.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                    let (name, count) = match item.split_once([':', '*']) {
                        Some((a, b)) => (a, b.trim().parse::<u32>().ok()),
                        None => (item, Some(1)),
                    };
                    match count {
                        Some(c) => {
                            let _ = writeln!(out.licenses, "{} = {c}", q(name));
                        }
                        None => n.skip(no, key, item, "bad license count"),
                    }
                }
            }
            "prolog" | "epilog" | "taskprolog" | "taskepilog" | "healthcheckprogram" => {
                let name = match k.as_str() {
                    "prolog" => "prolog",
                    "epilog" => "epilog",
                    "taskprolog" => "task_prolog",
                    "taskepilog" => "task_epilog",
                    _ => "health_check_program",
                };
                if v.contains([',', '*']) {
                    n.skip(no, key, v, "sluice runs one script, not a list or a glob");
                } else {
                    let _ = writeln!(top, "{name} = {}", q(v));
                }
            }
            "prologflags" => {
                let mut keep = Vec::new();
                for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    match f.to_ascii_lowercase().as_str() {
                        "alloc" | "nohold" | "forcerequeueonfail" => keep.push(f),
                        "contain" => {
                            keep.push("Alloc");
                            n.say(
                                no,
                                "PrologFlags=Contain: carried as Alloc (sluice's job cgroups exist from allocation anyway)",
                            );
                        }
                        _ => n.skip(no, key, f, "not supported yet by sluice"),
                    }
                }
                keep.dedup();
                if !keep.is_empty() {
                    let _ = writeln!(top, "prolog_flags = {}", q(&keep.join(",")));
                }
            }
            "prologepilogtimeout" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(top, "prolog_epilog_timeout = {x}");
                }
            }
            "healthcheckinterval" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(top, "health_check_interval = {x}");
                }
            }
            "healthchecknodestate" => {
                let mut keep = Vec::new();
                for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    match f.to_ascii_uppercase().as_str() {
                        "ANY" | "IDLE" | "ALLOC" => keep.push(f.to_ascii_uppercase()),
                        _ => n.skip(no, key, f, "not supported yet by sluice"),
                    }
                }
                if let Some(last) = keep.last() {
                    let _ = writeln!(top, "health_check_node_state = {}", q(last));
                }
            }
            "schedulertype" => {
                let policy = match v.to_ascii_lowercase().as_str() {
                    "sched/backfill" => Some("conservative"),
                    "sched/builtin" => Some("fifo"),
                    _ => None,
                };
                match policy {
                    Some(p) => {
                        let _ = writeln!(out.scheduler, "policy = {}", q(p));
                    }
                    None => n.skip(no, key, v, "sluice has sched/backfill and sched/builtin"),
                }
            }
            "schedulerparameters" => {
                for p in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    sched_params.push((no, p.to_string()));
                }
            }
            "preempttype" => {
                let _ = writeln!(out.scheduler, "preempt_type = {}", q(v));
            }
            "preemptmode" => {
                let _ = writeln!(out.scheduler, "preempt_mode = {}", q(v));
            }
            "preemptexempttime" => {
                let _ = writeln!(out.scheduler, "preempt_exempt_time = {}", q(v));
            }
            "priorityweightage"
            | "priorityweightassoc"
            | "priorityweightfairshare"
            | "priorityweightjobsize"
            | "priorityweightpartition"
            | "priorityweightqos" => {
                weights_seen.get_or_insert(no);
                let _ = num::<u32>(n, no, key, v);
            }
            "priorityweighttres" => {
                let _ = writeln!(out.priority, "weight_tres = {}", q(v));
            }
            "prioritymaxage" => {
                let _ = writeln!(out.priority, "max_age = {}", q(v));
            }
            "prioritydecayhalflife" => {
                let _ = writeln!(out.priority, "decay_half_life = {}", q(v));
            }
            "priorityfavorsmall" => match yes(v) {
                Some(b) => {
                    let _ = writeln!(out.priority, "favor_small = {b}");
                }
                None => n.skip(no, key, v, "expected YES or NO"),
            },
            "priorityflags" => {
                let mut keep = Vec::new();
                for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    match f.to_ascii_uppercase().as_str() {
                        "SMALL_RELATIVE_TO_TIME" | "NO_FAIR_TREE" | "FAIR_TREE" | "MAX_TRES" => {
                            keep.push(f.to_ascii_uppercase())
                        }
                        _ => n.skip(no, key, f, "not supported yet by sluice"),
                    }
                }
                if !keep.is_empty() {
                    let _ = writeln!(out.priority, "flags = {}", q(&keep.join(",")));
                }
            }
            "priorityusageresetperiod" => {
                let _ = writeln!(out.priority, "usage_reset_period = {}", q(v));
            }
            "slurmctlddebug" => match crate::logsink::filter_for(v) {
                Some(_) => {
                    let _ = writeln!(top, "slurmctld_debug = {}", q(v));
                }
                None => n.skip(no, key, v, "not a Slurm debug level"),
            },
            // Read with the partitions.
            "defmempercpu" | "defmempernode" | "maxmempernode" | "defcpupergpu"
            | "defmempergpu" | "slurmctldhost" | "controlmachine" | "taskplugin"
            | "topologyplugin" => {}
            _ => match NOT_NEEDED.iter().find(|(nk, _)| nk == k) {
                Some((_, why)) => n.skip(no, key, v, why),
                None => n.unknown(no, key, v, SLURM_CONF_KEYS, "sluice has no equivalent"),
            },
        }
    }
    for (no, p) in sched_params {
        let (pk, pv) = match p.split_once('=') {
            Some((a, b)) => (a.to_ascii_lowercase(), Some(b)),
            None => (p.to_ascii_lowercase(), None),
        };
        let key = "SchedulerParameters";
        match (pk.as_str(), pv) {
            (
                "bf_window" | "bf_resolution" | "bf_max_job_test" | "bf_max_job_user"
                | "bf_interval" | "max_switch_wait",
                Some(x),
            ) => {
                if let Some(x) = num::<u32>(n, no, key, x) {
                    let _ = writeln!(out.scheduler, "{pk} = {x}");
                }
            }
            ("bf_continue", None) => {
                let _ = writeln!(out.scheduler, "bf_continue = true");
            }
            ("kill_invalid_depend", None) => {
                let _ = writeln!(out.top, "kill_invalid_depend = true");
            }
            _ => n.skip(no, key, &p, "not supported yet by sluice"),
        }
    }
    // Slurm's defaults where they differ from sluice's.
    if get("enforcepartlimits").is_none() {
        let _ = writeln!(out.top, "enforce_part_limits = \"NO\"   # Slurm's default");
    }
    if get("accountingstorageenforce").is_none() {
        let _ = writeln!(
            out.top,
            "accounting_storage_enforce = \"none\"   # Slurm's default"
        );
    }
    let basic = get("prioritytype").is_none_or(|t| t.eq_ignore_ascii_case("priority/basic"));
    if basic && let Some(no) = weights_seen {
        n.say(
            no,
            "PriorityWeight*: ignored by Slurm under priority/basic, so carried as 0",
        );
    }
    for (sk, name) in [
        ("priorityweightage", "weight_age"),
        ("priorityweightassoc", "weight_assoc"),
        ("priorityweightfairshare", "weight_fairshare"),
        ("priorityweightjobsize", "weight_jobsize"),
        ("priorityweightpartition", "weight_partition"),
        ("priorityweightqos", "weight_qos"),
    ] {
        let w = if basic {
            0
        } else {
            get(sk)
                .and_then(|v| v.trim().parse::<u32>().ok())
                .unwrap_or(0)
        };
        let _ = writeln!(out.priority, "{name} = {w}");
    }
}

/// Whether a node address is this machine (or the controller's host): such a node is
/// served by the controller's own agent, any other is reached over SSH.
fn is_local(addr: &str, ctld_hosts: &[String]) -> bool {
    let a = addr.to_ascii_lowercase();
    a == "localhost"
        || a.starts_with("127.")
        || a == "::1"
        || a == super::short_hostname().to_ascii_lowercase()
        || ctld_hosts.iter().any(|h| h.eq_ignore_ascii_case(addr))
}

fn import_node(
    d: &NodeDecl,
    ctld_hosts: &[String],
    out: &mut Out,
    n: &mut Notes,
) -> Result<(), String> {
    let no = d.no;
    let names = hostlist::expand(&d.names)
        .map_err(|e| format!("{}:{no}: NodeName={}: {e}", n.file, d.names))?;
    let addrs = match &d.addr {
        Some(a) => {
            let v =
                hostlist::expand(a).map_err(|e| format!("{}:{no}: NodeAddr={a}: {e}", n.file))?;
            if v.len() == names.len() {
                v
            } else {
                vec![a.clone(); names.len()]
            }
        }
        None => names.clone(),
    };
    let mut body = String::new();
    let mut sockets: Option<u32> = None;
    let mut boards: Option<u32> = None;
    for (k, (key, v)) in &d.keys {
        let v = v.as_str();
        match k.as_str() {
            "cpus" | "procs" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(body, "cpus = {x}");
                }
            }
            "realmemory" => {
                if let Some(x) = num::<u64>(n, no, key, v) {
                    let _ = writeln!(body, "memory = {x}");
                }
            }
            "tmpdisk" => {
                if let Some(x) = num::<u64>(n, no, key, v) {
                    let _ = writeln!(body, "tmp_disk = {x}");
                }
            }
            "weight" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(body, "weight = {x}");
                }
            }
            "sockets" | "socketsperboard" => sockets = num::<u32>(n, no, key, v),
            "boards" => boards = num::<u32>(n, no, key, v),
            "corespersocket" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(body, "cores_per_socket = {x}");
                }
            }
            "threadspercore" => {
                if let Some(x) = num::<u32>(n, no, key, v) {
                    let _ = writeln!(body, "threads_per_core = {x}");
                }
            }
            "feature" | "features" | "availablefeatures" => {
                let f: Vec<String> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(q)
                    .collect();
                let _ = writeln!(body, "features = [{}]", f.join(", "));
            }
            "gres" => {
                if crate::model::gres::parse_node_gres(v).is_ok() {
                    let _ = writeln!(body, "gres = {}", q(v));
                } else {
                    n.skip(no, key, v, "sluice does not read this Gres= form");
                }
            }
            "nodeaddr" | "nodehostname" => {}
            "state" => {
                let up = v.to_ascii_uppercase();
                if !matches!(up.as_str(), "UNKNOWN" | "IDLE") {
                    n.skip(no, key, v, "sluice nodes start as their agent reports them");
                }
            }
            _ => n.unknown(no, key, v, NODE_KEYS, "sluice has no equivalent"),
        }
    }
    if let Some(s) = sockets {
        let _ = writeln!(body, "sockets = {}", s.saturating_mul(boards.unwrap_or(1)));
    }
    let remote: Vec<bool> = addrs.iter().map(|a| !is_local(a, ctld_hosts)).collect();
    if remote.iter().all(|r| !r) {
        let _ = write!(out.nodes, "\n[[nodes]]\nname = {}\n{body}", q(&d.names));
        if names.len() > 1 {
            n.say(
                no,
                &format!(
                    "NodeName={}: several nodes on this machine: sluice's controller serves one local node itself; give each of the others an `ssh` address (its own sshd) to run its own agent",
                    d.names
                ),
            );
        }
    } else if remote.iter().all(|r| *r) {
        let ssh = match &d.addr {
            Some(a) => format!("root@{a}"),
            None => format!("root@{}", d.names),
        };
        let _ = write!(
            out.nodes,
            "\n[[nodes]]\nname = {}\nssh = {}\n{body}",
            q(&d.names),
            q(&ssh)
        );
        n.say(
            no,
            &format!(
                "NodeName={}: reached over SSH as {ssh} (sluice has no slurmd: run `sluice keygen` and add the controller's key to root's authorized_keys there)",
                d.names
            ),
        );
    } else {
        for ((name, addr), r) in names.iter().zip(&addrs).zip(&remote) {
            let ssh = if *r {
                format!("ssh = {}\n", q(&format!("root@{addr}")))
            } else {
                String::new()
            };
            let _ = write!(out.nodes, "\n[[nodes]]\nname = {}\n{ssh}{body}", q(name));
        }
    }
    Ok(())
}

fn import_partition(p: &PartDecl, out: &mut Out, n: &mut Notes) {
    let no = p.no;
    let mut body = String::new();
    let mut has_nodes = false;
    for (k, (key, v)) in &p.keys {
        let v = v.as_str();
        let mut int = |name: &str, body: &mut String| {
            if unlimited(v) {
                return;
            }
            if let Some(x) = num::<u64>(n, no, key, v) {
                let _ = writeln!(body, "{name} = {x}");
            }
        };
        match k.as_str() {
            "nodes" => {
                has_nodes = true;
                let _ = writeln!(body, "nodes = {}", q(v));
            }
            "default" => {
                if yes(v) == Some(true) {
                    let _ = writeln!(body, "default = true");
                }
            }
            "maxtime" | "defaulttime" => {
                let name = if k == "maxtime" {
                    "max_time"
                } else {
                    "default_time"
                };
                let v = if unlimited(v) { "UNLIMITED" } else { v };
                if !(k == "defaulttime" && v == "UNLIMITED") {
                    let _ = writeln!(body, "{name} = {}", q(v));
                }
            }
            "minnodes" => int("min_nodes", &mut body),
            "maxnodes" => int("max_nodes", &mut body),
            "prioritytier" => int("priority_tier", &mut body),
            "priorityjobfactor" => int("priority_job_factor", &mut body),
            "priority" => {
                int("priority_tier", &mut body);
                int("priority_job_factor", &mut body);
            }
            "defmempercpu" => int("def_mem_per_cpu", &mut body),
            "defmempernode" => int("def_mem_per_node", &mut body),
            "maxmempernode" => int("max_mem_per_node", &mut body),
            "defcpupergpu" => int("def_cpu_per_gpu", &mut body),
            "defmempergpu" => int("def_mem_per_gpu", &mut body),
            "maxcpuspernode" => int("max_cpus_per_node", &mut body),
            "gracetime" => int("grace_time", &mut body),
            "state" => {
                let _ = writeln!(body, "state = {}", q(&v.to_ascii_uppercase()));
            }
            "allowaccounts" | "allowgroups" | "allowqos" => {
                let name = match k.as_str() {
                    "allowaccounts" => "allow_accounts",
                    "allowgroups" => "allow_groups",
                    _ => "allow_qos",
                };
                if !v.eq_ignore_ascii_case("ALL") {
                    let _ = writeln!(body, "{name} = {}", q(v));
                }
            }
            "exclusiveuser" | "hidden" => match yes(v) {
                Some(b) => {
                    let name = if k == "hidden" {
                        "hidden"
                    } else {
                        "exclusive_user"
                    };
                    let _ = writeln!(body, "{name} = {b}");
                }
                None => n.skip(no, key, v, "expected YES or NO"),
            },
            "oversubscribe" | "shared" => {
                if crate::model::OverSubscribe::parse(v).is_some() {
                    let _ = writeln!(body, "oversubscribe = {}", q(&v.to_ascii_uppercase()));
                } else {
                    n.skip(
                        no,
                        key,
                        v,
                        "sluice has NO, YES[:n], FORCE[:n] and EXCLUSIVE",
                    );
                }
            }
            "preemptmode" => {
                let _ = writeln!(body, "preempt_mode = {}", q(v));
            }
            "qos" => {
                let _ = writeln!(body, "qos = {}", q(v));
            }
            "overtimelimit" => {
                if v.eq_ignore_ascii_case("UNLIMITED") {
                    let _ = writeln!(body, "over_time_limit = \"UNLIMITED\"");
                } else {
                    int("over_time_limit", &mut body);
                }
            }
            "tresbillingweights" => {
                let _ = writeln!(body, "billing_weights = {}", q(v));
            }
            _ => n.unknown(no, key, v, PARTITION_KEYS, "sluice has no equivalent"),
        }
    }
    if !has_nodes {
        n.skip(
            no,
            "PartitionName",
            &p.name,
            "a partition without Nodes= holds no node",
        );
        return;
    }
    let _ = write!(
        out.partitions,
        "\n[[partitions]]\nname = {}\n{body}",
        q(&p.name)
    );
}

/// Carries gres.conf's lines. A line for nodes slurm.conf does not define is not
/// carried (each slurmd reads only the lines naming itself, so Slurm ignores it);
/// a line naming some defined nodes is carried for those.
fn import_gres(
    g: Input,
    known: &[String],
    out: &mut Out,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let parsed: Vec<GresLine> =
        gres_conf::parse_slurm(g.text).map_err(|e| format!("{}: {e}", g.name))?;
    for (i, l) in g.text.lines().enumerate() {
        let low = l.split('#').next().unwrap_or("").to_ascii_lowercase();
        if let Some(at) = low.find("flags=") {
            let word = l[at..].split_whitespace().next().unwrap_or("Flags=");
            notes.push(format!(
                "{}:{}: {word}: not carried: sluice has no per-device GRES flags",
                g.name,
                i + 1
            ));
        }
    }
    for mut l in parsed {
        if let Some(names) = &l.nodes {
            let all = hostlist::expand(names)
                .map_err(|e| format!("{}: NodeName={names}: {e}", g.name))?;
            let (ours, others): (Vec<String>, Vec<String>) =
                all.into_iter().partition(|x| known.contains(x));
            if !others.is_empty() {
                let low = format!("nodename={}", names.to_ascii_lowercase());
                let no = g
                    .text
                    .lines()
                    .position(|t| t.to_ascii_lowercase().contains(&low))
                    .map_or(String::new(), |i| format!("{}:", i + 1));
                notes.push(format!(
                    "{}:{no} NodeName={}: not carried: slurm.conf defines no such node",
                    g.name,
                    hostlist::compress(&others)
                ));
            }
            if ours.is_empty() {
                continue;
            }
            l.nodes = Some(hostlist::compress(&ours));
        }
        let mut s = String::from("\n[[gres]]\n");
        for (k, v) in [
            ("nodes", &l.nodes),
            ("name", &l.name),
            ("type", &l.kind),
            ("file", &l.file),
            ("cores", &l.cores),
            ("links", &l.links),
            ("auto_detect", &l.auto_detect),
            ("multiple_files", &l.multiple_files),
            ("unique_id", &l.unique_id),
        ] {
            if let Some(v) = v {
                let _ = writeln!(s, "{k} = {}", q(v));
            }
        }
        if let Some(c) = l.count {
            let _ = writeln!(s, "count = {c}");
        }
        out.gres.push_str(&s);
    }
    Ok(())
}

fn import_topology(t: Input, out: &mut Out) -> Result<(), String> {
    let topo = crate::model::topology::parse_topology_conf(t.text)
        .map_err(|e| format!("{}: {e}", t.name))?;
    let s = &mut out.topology;
    if !topo.block_sizes.is_empty() {
        let sizes: Vec<String> = topo.block_sizes.iter().map(u32::to_string).collect();
        let _ = write!(s, "\n[topology]\nblock_sizes = [{}]\n", sizes.join(", "));
    }
    for sw in &topo.switches {
        let _ = write!(s, "\n[[topology.switches]]\nname = {}\n", q(&sw.name));
        if !sw.nodes.is_empty() {
            let _ = writeln!(s, "nodes = {}", q(&hostlist::compress(&sw.nodes)));
        }
        if !sw.switches.is_empty() {
            let _ = writeln!(s, "switches = {}", q(&hostlist::compress(&sw.switches)));
        }
        if sw.link_speed != 1 {
            let _ = writeln!(s, "link_speed = {}", sw.link_speed);
        }
    }
    for b in &topo.blocks {
        let _ = write!(
            s,
            "\n[[topology.blocks]]\nname = {}\nnodes = {}\n",
            q(&b.name),
            q(&hostlist::compress(&b.nodes))
        );
    }
    Ok(())
}

fn import_cgroup(c: Input, out: &mut Out, notes: &mut Vec<String>) -> Result<(), String> {
    let mut n = Notes {
        file: c.name,
        out: notes,
        errors: Vec::new(),
    };
    for line in lines(c.text, c.name)? {
        for (k, key, v) in &line.pairs {
            let no = line.no;
            let v = v.as_str();
            let boolean = |name: &str, n: &mut Notes, s: &mut String| match yes(v) {
                Some(b) => {
                    let _ = writeln!(s, "{name} = {b}");
                }
                None => n.skip(no, key, v, "expected yes or no"),
            };
            let s = &mut out.cgroup;
            match k.as_str() {
                "cgroupplugin" => match v.to_ascii_lowercase().as_str() {
                    "cgroup/v1" | "cgroup/v2" | "autodetect" => {
                        let _ = writeln!(s, "plugin = {}", q(&v.to_ascii_lowercase()));
                    }
                    _ => n.skip(no, key, v, "sluice has autodetect, cgroup/v1 and cgroup/v2"),
                },
                "cgroupmountpoint" => {
                    let _ = writeln!(s, "mountpoint = {}", q(v));
                }
                "constraincores" => boolean("constrain_cores", &mut n, s),
                "constrainramspace" => boolean("constrain_ram_space", &mut n, s),
                "constrainswapspace" => boolean("constrain_swap_space", &mut n, s),
                "constraindevices" => boolean("constrain_devices", &mut n, s),
                "allowedramspace" | "allowedswapspace" | "maxrampercent" | "maxswappercent" => {
                    let name = match k.as_str() {
                        "allowedramspace" => "allowed_ram_space",
                        "allowedswapspace" => "allowed_swap_space",
                        "maxrampercent" => "max_ram_percent",
                        _ => "max_swap_percent",
                    };
                    if let Some(x) = num::<f64>(&mut n, no, key, v) {
                        let _ = writeln!(s, "{name} = {x:?}");
                    }
                }
                "minramspace" => {
                    if let Some(x) = num::<u64>(&mut n, no, key, v) {
                        let _ = writeln!(s, "min_ram_space = {x}");
                    }
                }
                "cgroupautomount" => {
                    n.skip(no, key, v, "sluice uses the hierarchies that are mounted")
                }
                _ => n.skip(no, key, v, "sluice has no equivalent"),
            }
        }
    }
    if n.errors.is_empty() {
        Ok(())
    } else {
        Err(n.errors.join("\n"))
    }
}

/// Which kind of Slurm file `text` is, judged by its keys: `gres`, `topology`,
/// `cgroup` or `slurm`; `None` when nothing tells.
pub fn sniff(text: &str) -> Option<&'static str> {
    let keys: Vec<String> = text
        .lines()
        .flat_map(|l| {
            strip_comment(l)
                .split_whitespace()
                .map(|w| w.split('=').next().unwrap_or("").to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect();
    let has = |k: &str| keys.iter().any(|x| x == k);
    if looks_like_slurm_conf(text) && !has("name") {
        Some("slurm")
    } else if has("switchname") || has("blockname") || has("blocksizes") {
        Some("topology")
    } else if keys
        .iter()
        .any(|k| k.starts_with("constrain") || k.starts_with("cgroup"))
    {
        Some("cgroup")
    } else if has("name") || has("autodetect") || has("nodename") {
        Some("gres")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLURM_CONF: &str = "\
ClusterName=anchor
SlurmctldHost=localhost
AuthType=auth/munge
SchedulerType=sched/backfill
SchedulerParameters=bf_window=2880,bf_continue,default_queue_depth=100
SelectType=select/cons_tres
DefMemPerCPU=400
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityMaxAge=7-0
Prolog=/etc/slurm/prolog.sh
PrologFlags=Alloc,X11
NodeName=DEFAULT RealMemory=16000 \\
   ThreadsPerCore=1
NodeName=node01 NodeAddr=127.0.0.1 CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=16 Gres=gpu:4 State=UNKNOWN
NodeName=gpu[01-02] CPUs=8 Feature=a100,ib CoreSpecCount=1
PartitionName=debug Nodes=node01 Default=YES MaxTime=01:00:00 State=UP
PartitionName=batch Nodes=ALL MaxTime=INFINITE State=UP DenyAccounts=x
";

    fn run(conf: &str, gres: Option<&str>) -> Imported {
        import(&Inputs {
            slurm_conf: Input {
                name: "slurm.conf",
                text: conf,
            },
            gres_conf: gres.map(|t| Input {
                name: "gres.conf",
                text: t,
            }),
            topology_conf: None,
            cgroup_conf: None,
        })
        .unwrap()
    }

    #[test]
    fn imports_nodes_partitions_and_parameters_and_notes_the_rest() {
        let gres = "AutoDetect=off\nNodeName=node01 Name=gpu File=/dev/fakegpu[0-3] Flags=nvidia_gpu_env\n";
        let r = run(SLURM_CONF, Some(gres));
        let dir = tempfile::tempdir().unwrap();
        let c = super::super::Config::from_toml(&r.toml, &dir.path().join("s.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{}", r.toml));
        assert_eq!(c.cluster_name, "anchor");
        let names: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["node01", "gpu01", "gpu02"]);
        let n0 = &c.nodes[0];
        assert_eq!(
            (n0.cpus, n0.memory, n0.sockets, n0.cores_per_socket),
            (Some(32), Some(16000), Some(2), Some(16))
        );
        assert!(n0.ssh.is_none(), "a loopback node is local");
        assert_eq!(n0.gres_devices().unwrap().len(), 4);
        assert_eq!(n0.gres_autodetect, Some(false));
        assert_eq!(c.nodes[1].ssh.as_deref(), Some("root@gpu01"));
        assert_eq!(c.nodes[1].features, ["a100", "ib"]);
        assert_eq!(c.nodes[1].memory, Some(16000), "NodeName=DEFAULT applies");
        let p = &c.partitions[0];
        assert!(p.default);
        assert_eq!(p.def_mem_per_cpu, Some(400), "the cluster's DefMemPerCPU");
        assert_eq!(c.partitions[1].nodes.len(), 3);
        assert_eq!(c.sched.bf_window, 2880 * 60);
        assert!(c.sched.bf_continue);
        assert_eq!(c.sched.priority.weight_jobsize, 0, "Slurm's unset weight");
        assert_eq!(c.sched.priority.weight_fairshare, 10000);
        assert!(!c.enforce_part_limits);
        assert!(c.scripts.prolog_alloc);
        let notes = r.notes.join("\n");
        for want in [
            "slurm.conf:3: AuthType=auth/munge: not carried",
            "default_queue_depth=100: not carried",
            "PrologFlags=X11: not carried",
            "CoreSpecCount=1: not carried",
            "DenyAccounts=x: not carried",
            "gres.conf:2: Flags=nvidia_gpu_env: not carried",
            "reached over SSH as root@gpu[01-02]",
        ] {
            assert!(notes.contains(want), "missing '{want}' in\n{notes}");
        }
    }

    #[test]
    fn reboot_program_and_resume_timeout_are_carried() {
        let conf = "ClusterName=r\nRebootProgram=/usr/sbin/reboot\nResumeTimeout=300\n\
                    NodeName=n1 CPUs=2\nPartitionName=p Nodes=n1 Default=YES\n";
        let r = run(conf, None);
        let dir = tempfile::tempdir().unwrap();
        let c = super::super::Config::from_toml(&r.toml, &dir.path().join("s.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{}", r.toml));
        assert_eq!(c.reboot_program.as_deref(), Some("/usr/sbin/reboot"));
        assert_eq!(c.resume_timeout, 300);
        let notes = r.notes.join("\n");
        assert!(!notes.contains("RebootProgram"), "{notes}");
        let plain = run(
            "ClusterName=r\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n",
            None,
        );
        let c = super::super::Config::from_toml(&plain.toml, &dir.path().join("s.toml")).unwrap();
        assert_eq!((c.reboot_program, c.resume_timeout), (None, 60));
    }

    fn run_err(conf: &str) -> String {
        import(&Inputs {
            slurm_conf: Input {
                name: "slurm.conf",
                text: conf,
            },
            gres_conf: None,
            topology_conf: None,
            cgroup_conf: None,
        })
        .expect_err("slurmctld refuses this file, so must the import")
    }

    #[test]
    fn keys_slurmctld_refuses_fail_the_import_with_every_line_named() {
        let e = run_err(
            "ClusterName=x\nFooBar=1\nNodeName=a CPUs=four Colour=red\n\
             PartitionName=p Nodes=a MaxNodes=lots Flavour=x\n",
        );
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines,
            [
                "slurm.conf:2: FooBar=1: unrecognized key (slurmctld refuses the file)",
                "slurm.conf:3: Colour=red: unrecognized key (slurmctld refuses the file)",
                "slurm.conf:3: CPUs=four: not a number",
                "slurm.conf:4: Flavour=x: unrecognized key (slurmctld refuses the file)",
                "slurm.conf:4: MaxNodes=lots: not a number",
            ]
        );
        // Keys slurm.conf(5) defines stay notes, in any case.
        let r = run(
            "NodeName=a CPUs=1 cpuspeclist=0\nmailprog=/bin/mail\n",
            None,
        );
        let notes = r.notes.join("\n");
        assert!(
            notes.contains("slurm.conf:2: mailprog=/bin/mail: not carried"),
            "{notes}"
        );
        assert!(
            notes.contains("slurm.conf:1: cpuspeclist=0: not carried"),
            "{notes}"
        );
    }

    #[test]
    fn gres_lines_for_nodes_slurm_conf_lacks_are_noted_not_carried() {
        let gres = "NodeName=other Name=gpu File=/dev/g0\n\
                    NodeName=a,b,other2 Name=gpu File=/dev/g1\n";
        let r = run("NodeName=a,b CPUs=1\n", Some(gres));
        assert_eq!(r.toml.matches("[[gres]]").count(), 1, "{}", r.toml);
        assert!(r.toml.contains("nodes = \"a,b\""), "{}", r.toml);
        let notes = r.notes.join("\n");
        assert!(
            notes.contains(
                "gres.conf:1: NodeName=other: not carried: slurm.conf defines no such node"
            ),
            "{notes}"
        );
        assert!(
            notes.contains("gres.conf:2: NodeName=other2: not carried"),
            "{notes}"
        );
    }

    #[test]
    fn priority_basic_zeroes_the_weights() {
        let r = run("NodeName=a CPUs=1\nPriorityWeightAge=5\n", None);
        let dir = tempfile::tempdir().unwrap();
        let c = super::super::Config::from_toml(&r.toml, &dir.path().join("s.toml")).unwrap();
        assert_eq!(c.sched.priority.weight_age, 0);
        assert_eq!(c.sched.priority.weight_fairshare, 0);
    }

    #[test]
    fn recognises_slurm_files() {
        assert!(looks_like_slurm_conf(SLURM_CONF));
        assert!(!looks_like_slurm_conf(
            "cluster_name = \"x\"\n[[nodes]]\nname = \"a\"\n"
        ));
        assert_eq!(sniff(SLURM_CONF), Some("slurm"));
        assert_eq!(sniff("SwitchName=s0 Nodes=a\n"), Some("topology"));
        assert_eq!(sniff("ConstrainCores=yes\n"), Some("cgroup"));
        assert_eq!(sniff("NodeName=a Name=gpu File=/dev/x\n"), Some("gres"));
    }

    proptest::proptest! {
        /// Whatever the files hold, the import answers (TOML or an error), never panics.
        #[test]
        fn arbitrary_files_never_panic(
            conf in "(NodeName|PartitionName|Nodes|CPUs|Boards|Sockets|Gres|Licenses|SchedulerParameters|[A-Za-z]{1,6})=[A-Za-z0-9\\[\\],:=\"#*. -]{0,30}( [A-Za-z]{1,8}=[A-Za-z0-9\\[\\],:-]{0,12}){0,4}(\n|\\\\\n)",
            gres in "[A-Za-z=0-9\\[\\]/,# \n-]{0,80}",
            cg in "[A-Za-z=0-9. \n]{0,60}",
        ) {
            let _ = import(&Inputs {
                slurm_conf: Input { name: "s", text: &conf },
                gres_conf: Some(Input { name: "g", text: &gres }),
                topology_conf: Some(Input { name: "t", text: &gres }),
                cgroup_conf: Some(Input { name: "c", text: &cg }),
            });
        }
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let e = import(&Inputs {
            slurm_conf: Input {
                name: "s.conf",
                text: "ClusterName=x\nNodeName=\"a CPUs=1\n",
            },
            gres_conf: None,
            topology_conf: None,
            cgroup_conf: None,
        })
        .unwrap_err();
        assert!(e.contains("s.conf:2"), "{e}");
    }
}
