//! The dependency direction of `src/` (STYLE.md "Dependency direction", lib.rs): reads
//! every source file of the library and checks each `crate::<module>` path it names
//! against [`LAYERS`]. A module may name modules of lower layers only: never one of its
//! own layer (the roles `ctld`, `agent`, `stepd`, `sim` and the front-ends `cli` meet
//! only through `proto`) and never a higher one. `sched` is narrower still: the pure
//! core names `model` and `config` only.
//!
//! Test code (`tests.rs` files, `#[cfg(test)]` modules) is not checked: a test may
//! compare two layers' answers. Comments are not checked either.
//!
//! [`KNOWN`] lists the crossings that exist today and are still to be moved; the test
//! fails on any crossing not listed there, and on a listed one that is gone (so that the
//! list only shrinks).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, lowest layer first.
const LAYERS: &[&[&str]] = &[
    // Leaves: name no other module of sluice.
    &["model", "common", "failpoint", "logsink"],
    &["jobspec", "gpuprobe"],
    &["config"],
    // The pure core, and the wire types.
    &["sched", "proto"],
    &["transport"],
    // Roles and front-ends: each reaches the others only through `proto`.
    &["ctld", "sim", "agent", "stepd", "cli"],
];

/// Modules that may name only the modules listed, even among lower layers.
const NARROW: &[(&str, &[&str])] = &[("sched", &["model", "config", "common"])];

/// The entry points the dispatcher (`cli/mod.rs`, argv[0] and `sluice <role>`) calls:
/// the one place a front-end names a role.
const ENTRY: &[&str] = &[
    "ctld::cli_main",
    "stepd::cli_main",
    "sim::cli_main",
    "agent::stdio::cli_main",
];

/// Crossings still in the tree: (file under src/, the path it names, or a module the
/// paths it names are in). Each is work left (issue 21, item 4); remove the line when
/// the crossing is gone.
const KNOWN: &[(&str, &str)] = &[
    // Node-side helpers (cgroups, GPU and NCCL discovery, the batch environment) that
    // live in a role but serve the others: they belong in a node layer below the roles.
    ("agent/mod.rs", "stepd::isolate"),
    ("agent/mod.rs", "stepd::note_stepd_lost"),
    ("cli/ci.rs", "stepd::isolate"),
    ("cli/doctor.rs", "agent::gpu"),
    ("cli/doctor.rs", "stepd::isolate"),
    ("cli/gpu_topo.rs", "agent::gpu"),
    ("cli/gpu_topo.rs", "stepd::isolate"),
    ("cli/gpu_topo.rs", "stepd::nccl"),
    ("cli/salloc.rs", "stepd::env"),
    // The controller's own front-end (`sluice controller start|stop`) is a client of
    // the controller; and the controller hosts the local node's agent in-process.
    ("ctld/daemon.rs", "cli::client"),
    ("ctld/main_loop.rs", "agent"),
    // Job options build their --help text with the front-ends' help builder.
    ("jobspec/opts.rs", "cli::help"),
];

/// `(file, path)` of every `crate::…` path in the non-test code of `src/`, where `path`
/// is the module path after `crate::` (up to the first non-path character).
fn crate_paths(src: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    collect(src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let name = f.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") || rel.contains("/tests/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for path in paths_in(&text) {
            out.push((rel.clone(), path));
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::` paths of `text`, outside comments and outside a trailing
/// `#[cfg(test)]` module.
fn paths_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        // An inline test module at the top level: the rest of the file, by this code
        // base's habit of putting it last.
        if line.starts_with("#[cfg(test)]")
            && lines.get(i + 1).is_some_and(|n| {
                let n = n.trim_end();
                n.starts_with("mod ") && n.ends_with('{')
            })
        {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = match code.find("//") {
            Some(k) if !code[..k].contains('"') => &code[..k],
            _ => code,
        };
        let mut rest = code;
        while let Some(k) = rest.find("crate::") {
            let before = rest[..k].chars().last();
            rest = &rest[k + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            out.push(rest[..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// Whether module path `path` is `prefix` or inside it.
fn under(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with("::"))
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// Why `from` (a top-level module) may not name `path`, or `None` when it may.
fn violation(file: &str, from: &str, path: &str) -> Option<String> {
    let to = path.split("::").next().unwrap();
    if to == from || to.is_empty() {
        return None;
    }
    if file == "cli/mod.rs" && ENTRY.contains(&path) {
        return None;
    }
    let (Some(lf), Some(lt)) = (layer_of(from), layer_of(to)) else {
        return Some(format!(
            "`{from}` or `{to}` has no layer in LAYERS (tests/it/layering.rs)"
        ));
    };
    if let Some((_, only)) = NARROW.iter().find(|(m, _)| *m == from)
        && !only.contains(&to)
    {
        return Some(format!("`{from}` may name only {only:?}"));
    }
    if lt == lf && lf == LAYERS.len() - 1 {
        Some(format!(
            "`{from}` and `{to}` are roles: they meet through `proto`"
        ))
    } else if lt == lf {
        Some(format!("`{from}` and `{to}` are siblings in layer {lf}"))
    } else if lt > lf {
        Some(format!(
            "`{from}` (layer {lf}) names the higher `{to}` (layer {lt})"
        ))
    } else {
        None
    }
}

#[test]
fn modules_name_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut new = Vec::new();
    let mut seen = BTreeSet::new();
    for (file, path) in crate_paths(&src) {
        let from = file
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if matches!(from.as_str(), "lib" | "main" | "fuzz") {
            continue;
        }
        let Some(why) = violation(&file, &from, &path) else {
            continue;
        };
        if let Some(k) = KNOWN.iter().find(|(f, p)| *f == file && under(&path, p)) {
            seen.insert(*k);
            continue;
        }
        new.push(format!("src/{file}: crate::{path}: {why}"));
    }
    new.sort();
    new.dedup();
    let gone: Vec<String> = KNOWN
        .iter()
        .filter(|k| !seen.contains(*k))
        .map(|(f, p)| format!("src/{f}: crate::{p}"))
        .collect();
    assert!(
        new.is_empty(),
        "imports against the layering (move the helper to a lower module):\n{}",
        new.join("\n")
    );
    assert!(
        gone.is_empty(),
        "crossings listed in KNOWN that are gone (remove them from the list):\n{}",
        gone.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_and_skips_comments_and_tests() {
    let text = "use crate::model::Job;\n\
        // crate::cli::x is a comment\n\
        //! [`crate::sched::select`]\n\
        let a = crate::proto::spool::read(d); // crate::ctld::y\n\
        let b = notcrate::stepd::z;\n\
        #[cfg(test)]\n\
        mod tests {\n\
            use crate::cli::help;\n\
        }\n";
    assert_eq!(
        paths_in(text),
        vec!["model::Job".to_string(), "proto::spool::read".to_string()]
    );
    assert!(violation("agent/mod.rs", "agent", "stepd::isolate").is_some());
    assert!(violation("config/mod.rs", "config", "sched::fairshare").is_some());
    assert!(violation("sched/mod.rs", "sched", "proto::Request").is_some());
    assert!(violation("ctld/mod.rs", "ctld", "sched::select").is_none());
    assert!(violation("cli/mod.rs", "cli", "ctld::cli_main").is_none());
    assert!(violation("cli/srun.rs", "cli", "ctld::cli_main").is_some());
}
