//! `sluice config import|export`: the way in from a Slurm configuration and the way
//! out to one (see `config::slurm_import` and `config::slurm_export`).
//!
//! ```text
//! sluice config import SLURM.CONF [GRES.CONF] [TOPOLOGY.CONF] [CGROUP.CONF] [-o FILE]
//! sluice config export --slurm DIR [--force]
//! ```
//!
//! Import writes the TOML to stdout (or `-o FILE`, written only when the whole import
//! succeeded and the result loads) and one line per key it could not carry on stderr.
//! The extra files are told apart by their keys; when none is given, the gres.conf,
//! topology.conf and cgroup.conf next to slurm.conf are read if they exist, as Slurm
//! reads them. Export writes slurm.conf, gres.conf, topology.conf and cgroup.conf into
//! DIR, and, when the controller answers, its accounts and users as a `sacctmgr dump`
//! flat file (`CLUSTER.cfg`, for Slurm's `sacctmgr load`) and its QOS as the
//! `sacctmgr` commands that create them (`CLUSTER-qos.sh`, run first: the flat file
//! has no QOS records).

use crate::config::Config;
use crate::config::slurm_export::{self, NodeFacts};
use crate::config::slurm_import::{self, Input, Inputs};
use crate::proto::{Request, Response};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: sluice config import SLURM.CONF [GRES.CONF] [TOPOLOGY.CONF] [CGROUP.CONF] [-o FILE]\n       sluice config export --slurm DIR [--force]";

/// Entry point: `args[0]` is `config`.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match args.first().map(String::as_str) {
        Some("import") => import(&args[1..]),
        Some("export") => export(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn import(args: &[String]) -> ExitCode {
    let mut files = Vec::new();
    let mut out: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" | "--output" => match it.next() {
                Some(f) => out = Some(f.clone()),
                None => {
                    eprintln!("sluice config import: -o needs a file name");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with("--output=") => out = Some(s["--output=".len()..].to_string()),
            s if s.starts_with('-') && s.len() > 1 => {
                eprintln!("sluice config import: unknown option '{s}'\n{USAGE}");
                return ExitCode::from(2);
            }
            s => files.push(PathBuf::from(s)),
        }
    }
    let Some(main) = files.first().cloned() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let read = |p: &Path| {
        let bytes = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        String::from_utf8(bytes).map_err(|e| {
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = good.iter().filter(|b| **b == b'\n').count() + 1;
            format!("{}:{line}: not valid UTF-8 text", p.display())
        })
    };
    let slurm_text = match read(&main) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice config import: {e}");
            return ExitCode::from(1);
        }
    };
    if !slurm_import::looks_like_slurm_conf(&slurm_text) {
        eprintln!(
            "sluice config import: {} does not look like a slurm.conf (no NodeName=, PartitionName=, ClusterName= or SlurmctldHost= line)",
            main.display()
        );
        return ExitCode::from(1);
    }
    let mut extra: Vec<(PathBuf, String, &'static str)> = Vec::new();
    let given = files.len() > 1;
    let candidates: Vec<PathBuf> = if given {
        files[1..].to_vec()
    } else {
        let dir = main.parent().unwrap_or(Path::new("."));
        ["gres.conf", "topology.conf", "cgroup.conf"]
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.is_file())
            .collect()
    };
    for p in candidates {
        let text = match read(&p) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("sluice config import: {e}");
                return ExitCode::from(1);
            }
        };
        let by_name = p.file_name().and_then(|n| n.to_str()).and_then(|n| {
            ["gres", "topology", "cgroup"]
                .into_iter()
                .find(|k| n.starts_with(k))
        });
        let Some(kind) = by_name.or_else(|| slurm_import::sniff(&text)) else {
            eprintln!(
                "sluice config import: cannot tell whether {} is a gres.conf, topology.conf or cgroup.conf",
                p.display()
            );
            return ExitCode::from(1);
        };
        if !matches!(kind, "gres" | "topology" | "cgroup") {
            eprintln!(
                "sluice config import: {} is a second slurm.conf; give one slurm.conf",
                p.display()
            );
            return ExitCode::from(1);
        }
        if extra.iter().any(|(_, _, k)| *k == kind) {
            eprintln!("sluice config import: two {kind}.conf files given");
            return ExitCode::from(1);
        }
        if !given {
            eprintln!("sluice config import: reading {}", p.display());
        }
        extra.push((p, text, kind));
    }
    let names: Vec<String> = std::iter::once(&main)
        .chain(extra.iter().map(|(p, _, _)| p))
        .map(|p| p.display().to_string())
        .collect();
    let find = |k: &str| {
        extra
            .iter()
            .position(|(_, _, kind)| *kind == k)
            .map(|i| Input {
                name: &names[i + 1],
                text: &extra[i].1,
            })
    };
    let inputs = Inputs {
        slurm_conf: Input {
            name: &names[0],
            text: &slurm_text,
        },
        gres_conf: find("gres"),
        topology_conf: find("topology"),
        cgroup_conf: find("cgroup"),
    };
    let imported = match slurm_import::import(&inputs) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("sluice config import: {e}");
            return ExitCode::from(1);
        }
    };
    // What is written must load: checked with the loader itself, relative paths as if
    // the file sat where it will be written.
    let anchor = out
        .as_ref()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("sluice.toml"));
    if let Err(e) = Config::from_toml(&imported.toml, &anchor) {
        eprintln!("sluice config import: the converted configuration does not load: {e}");
        return ExitCode::from(1);
    }
    match out {
        None => print!("{}", imported.toml),
        Some(f) => {
            if let Err(e) = write_new(Path::new(&f), &imported.toml) {
                eprintln!("sluice config import: cannot write {f}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    for n in &imported.notes {
        eprintln!("{n}");
    }
    ExitCode::SUCCESS
}

/// Writes `text` to `path` through a temporary file renamed into place, so that a
/// failure leaves nothing half-written.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let tmp = match dir {
        Some(d) => d.join(format!(".{}.tmp", std::process::id())),
        None => PathBuf::from(format!(".{}.tmp", std::process::id())),
    };
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn export(args: &[String]) -> ExitCode {
    let mut dir: Option<String> = None;
    let mut force = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--slurm" => dir = it.next().cloned(),
            "--force" => force = true,
            s if s.starts_with("--slurm=") => dir = Some(s["--slurm=".len()..].to_string()),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s => {
                eprintln!("sluice config export: unexpected argument '{s}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("sluice config export: --slurm DIR is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let cfg = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice config export: {e}");
            return ExitCode::from(1);
        }
    };
    let dir = PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("sluice config export: cannot create {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    // What the controller detected, and its accounts, when it answers; never started
    // for this.
    let mut live = Vec::new();
    let mut accounts: Option<(String, String)> = None;
    let mut qos_file: Option<(String, String)> = None;
    let mut notes = Vec::new();
    match crate::cli::client::Client::try_connect(&cfg) {
        Ok(mut c) => {
            if let Ok(Response::Nodes { nodes, .. }) = c.request(&Request::Nodes) {
                live = nodes
                    .into_iter()
                    .map(|n| NodeFacts {
                        name: n.name,
                        cpus: Some(n.cpus).filter(|&c| c > 0),
                        sockets: Some(n.sockets).filter(|&c| c > 0),
                        cores_per_socket: Some(n.cores_per_socket).filter(|&c| c > 0),
                        threads_per_core: Some(n.threads_per_core).filter(|&c| c > 0),
                        memory: Some(n.real_memory).filter(|&c| c > 0),
                        gres: n.gres,
                    })
                    .collect();
            }
            match c.request(&Request::AcctTree) {
                Ok(Response::AcctTree { tree, cluster, .. }) => {
                    let text = crate::model::acct_ops::flat::dump(&tree, &cluster);
                    let qos = crate::model::acct_ops::flat::qos_script(&tree);
                    accounts = Some((format!("{cluster}.cfg"), text));
                    qos_file = Some((format!("{cluster}-qos.sh"), qos));
                }
                _ => notes.push(
                    "accounts: the controller did not give its account tree; run `sacctmgr dump` to export them".to_string(),
                ),
            }
        }
        Err(_) => notes.push(format!(
            "accounts, users and QOS: not exported, no controller answers on {} (start it and export again, or run `sacctmgr dump`)",
            cfg.socket.display()
        )),
    }
    let here = crate::config::short_hostname();
    let mut ex = slurm_export::export(&cfg, &live, &here);
    if let (Some((cfg_name, _)), Some((qos_name, _))) = (&accounts, &qos_file) {
        notes.push(format!(
            "accounts: with slurmdbd up, run `sh {qos_name}` (the QOS), then `sacctmgr load file={cfg_name}`"
        ));
    }
    ex.files.extend(qos_file);
    ex.files.extend(accounts);
    // A Slurm configuration already there (a live /etc/slurm) is not overwritten
    // unless asked: nothing is written then.
    if !force {
        let there: Vec<String> = ex
            .files
            .iter()
            .map(|(n, _)| dir.join(n))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if !there.is_empty() {
            eprintln!(
                "sluice config export: nothing written: {} already exist(s); export into another directory or give --force",
                there.join(", ")
            );
            return ExitCode::from(1);
        }
    }
    for (name, text) in &ex.files {
        let p = dir.join(name);
        if let Err(e) = write_new(&p, text) {
            eprintln!("sluice config export: cannot write {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    for n in ex.notes.iter().chain(&notes) {
        eprintln!("sluice config export: {n}");
    }
    ExitCode::SUCCESS
}
