//! `sluice doctor`: checks what a cluster needs and explains what is wrong (issue #7).
//! No Slurm twin; it answers the questions an admin asks when a node stays DOWN: is the
//! controller up, can the controller's key reach each node over SSH, is the host key
//! known, which sluice runs there and does it speak our protocol, are cgroups usable
//! for isolation, which GPUs does the node have.
//!
//! The systemd unit `install.sh --systemd` writes (the system unit in system mode, the
//! user unit in personal mode) is checked when it is there: its `ExecStart=` binary
//! exists and is this one, and it stops only the controller (`KillMode=process`).
//!
//! Each check prints one line, `ok`, `warn` or `FAIL`, with the reason and, for
//! failures, what to do. Exit status 0 when nothing failed, 1 otherwise, 2 on bad usage.

use crate::config::{Config, NodeConf};
use crate::transport::ssh::{self, LinkSpec};
use std::ffi::OsString;
use std::process::ExitCode;

const USAGE: &str = "usage: sluice doctor [NODE...]\n       sluice doctor --gpus\n\n\
Checks the controller and each node (all, or those named): SSH reachability and host key,\n\
the sluice binary and protocol there, cgroup isolation, and GPUs; explains what is wrong.\n\
--gpus prints this machine's GPU/NIC topology matrix as `nvidia-smi topo -m` does.";

/// The node-side facts, gathered by one shell snippet run locally or over SSH.
const FACTS: &str = "echo cgfs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null); \
echo cgctl=$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null); \
for c in cpuset memory freezer devices; do test -d /sys/fs/cgroup/$c && echo v1=$c; done; \
echo ndev=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l); \
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | sed 's/^/gpu=/'; \
true";

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

/// One printed line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub verdict: Verdict,
    pub what: &'static str,
    pub text: String,
}

impl Check {
    fn new(verdict: Verdict, what: &'static str, text: impl Into<String>) -> Check {
        Check {
            verdict,
            what,
            text: text.into(),
        }
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = match self.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
        };
        write!(f, "  {v}  {:<10} {}", self.what, self.text)
    }
}

/// Reads [`FACTS`] output into the isolation and GPU checks.
///
/// `stat -f` names the cgroup mount's file system: `cgroup2fs` is the unified (v2)
/// hierarchy, `tmpfs` with controller directories is v1; anything else means no
/// cgroup isolation (sluice falls back to process groups and rlimits).
pub fn interpret_facts(text: &str) -> Vec<Check> {
    let mut cgfs = "";
    let mut v2_ctl = "";
    let mut v1 = Vec::new();
    let mut ndev = 0u32;
    let mut gpus = Vec::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "cgfs" => cgfs = v.trim(),
            "cgctl" => v2_ctl = v.trim(),
            "v1" => v1.push(v.trim()),
            "ndev" => ndev = v.trim().parse().unwrap_or(0),
            "gpu" => gpus.push(v.trim()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let isolation = if cgfs == "cgroup2fs" {
        let have: Vec<&str> = v2_ctl.split_whitespace().collect();
        let missing: Vec<&str> = ["cpuset", "memory"]
            .into_iter()
            .filter(|c| !have.contains(c))
            .collect();
        if missing.is_empty() {
            Check::new(Verdict::Ok, "isolation", format!("cgroup v2 ({v2_ctl})"))
        } else {
            Check::new(
                Verdict::Warn,
                "isolation",
                format!(
                    "cgroup v2 without the {} controller(s): jobs are not confined there; enable them in the root cgroup's cgroup.subtree_control",
                    missing.join(", ")
                ),
            )
        }
    } else if !v1.is_empty() {
        let missing: Vec<&str> = ["cpuset", "memory", "freezer"]
            .into_iter()
            .filter(|c| !v1.contains(c))
            .collect();
        if missing.is_empty() {
            Check::new(
                Verdict::Ok,
                "isolation",
                format!("cgroup v1 ({})", v1.join(" ")),
            )
        } else {
            Check::new(
                Verdict::Warn,
                "isolation",
                format!(
                    "cgroup v1 without {}: that part of isolation is degraded",
                    missing.join(", ")
                ),
            )
        }
    } else {
        Check::new(
            Verdict::Warn,
            "isolation",
            "no usable cgroup hierarchy: isolation is degraded to process groups and rlimits (cores, memory and devices are not confined)",
        )
    };
    out.push(isolation);
    out.push(match (gpus.len(), ndev) {
        (0, 0) => Check::new(Verdict::Ok, "gpus", "none found"),
        (0, n) => Check::new(
            Verdict::Warn,
            "gpus",
            format!("{n} /dev/nvidia device(s) but nvidia-smi is missing or failed: GPUs are not described"),
        ),
        (n, _) => Check::new(Verdict::Ok, "gpus", format!("{n}: {}", gpus.join("; "))),
    });
    out
}

/// `sluice doctor …` (see the module docs).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "--gpus") {
        if let Some(extra) = args.iter().find(|a| *a != "--gpus") {
            eprintln!("sluice doctor: --gpus takes no other argument ('{extra}')\n{USAGE}");
            return ExitCode::from(2);
        }
        return super::gpu_topo::run();
    }
    if let Some(bad) = args.iter().find(|a| a.starts_with('-')) {
        eprintln!("sluice doctor: unknown option '{bad}'\n{USAGE}");
        return ExitCode::from(2);
    }
    let cfg = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            println!("  FAIL  config     {e}");
            return ExitCode::from(1);
        }
    };
    let nodes: Vec<&NodeConf> = cfg
        .nodes
        .iter()
        .filter(|n| args.is_empty() || args.contains(&n.name))
        .collect();
    if let Some(unknown) = args
        .iter()
        .find(|a| !cfg.nodes.iter().any(|n| &n.name == *a))
    {
        eprintln!("sluice doctor: no node named '{unknown}' in the configuration");
        return ExitCode::from(2);
    }
    let mut failed = false;
    println!(
        "cluster {} ({}), {} node(s)",
        cfg.cluster_name,
        cfg.source
            .as_ref()
            .map_or_else(|| "personal mode".to_string(), |p| p.display().to_string()),
        cfg.nodes.len()
    );
    let controller = match std::os::unix::net::UnixStream::connect(&cfg.socket) {
        Ok(_) => Check::new(
            Verdict::Ok,
            "controller",
            format!("answers on {}", cfg.socket.display()),
        ),
        Err(e) => Check::new(
            Verdict::Warn,
            "controller",
            format!(
                "nothing answers on {} ({e}); start it with `sluice controller`",
                cfg.socket.display()
            ),
        ),
    };
    println!("{controller}");
    let exe = std::env::current_exe().unwrap_or_else(|_| "sluice".into());
    if let Some(unit) = unit_path(cfg.mode) {
        let text = std::fs::read_to_string(&unit).ok();
        let c = unit_check(text.as_deref(), &unit, &exe);
        println!("{c}");
        failed |= c.verdict == Verdict::Fail;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice doctor: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    for n in nodes {
        let checks = match &n.ssh {
            None => {
                println!("node {} (local)", n.name);
                local_checks()
            }
            Some(addr) => {
                println!("node {} ({addr})", n.name);
                match LinkSpec::from_conf(n, 10, exe.clone()) {
                    Ok(spec) => rt.block_on(remote_checks(&spec)),
                    Err(e) => vec![Check::new(Verdict::Fail, "config", e)],
                }
            }
        };
        for c in &checks {
            println!("{c}");
            failed |= c.verdict == Verdict::Fail;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Where `install.sh --systemd` puts the unit for this mode (`SLUICE_SYSTEMD_DIR`
/// overrides the directory, as for install.sh); `None` without a home directory.
fn unit_path(mode: crate::config::Mode) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("SLUICE_SYSTEMD_DIR").map(std::path::PathBuf::from);
    match mode {
        crate::config::Mode::System => Some(
            dir.unwrap_or_else(|| "/etc/systemd/system".into())
                .join("sluice-controller.service"),
        ),
        crate::config::Mode::Personal => {
            let dir = match dir {
                Some(d) => d,
                None => std::env::var_os("XDG_CONFIG_HOME")
                    .filter(|x| !x.is_empty())
                    .map(std::path::PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".config"))
                    })?
                    .join("systemd/user"),
            };
            Some(dir.join("sluice.service"))
        }
    }
}

/// Checks a systemd unit's text (`None`: no unit at `path`) against the binary `exe`.
pub fn unit_check(text: Option<&str>, path: &std::path::Path, exe: &std::path::Path) -> Check {
    let Some(text) = text else {
        return Check::new(
            Verdict::Ok,
            "service",
            format!(
                "no systemd unit at {} (optional: install.sh --systemd installs one)",
                path.display()
            ),
        );
    };
    let exec = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("ExecStart="))
        .and_then(|l| l.split_whitespace().next());
    let Some(bin) = exec else {
        return Check::new(
            Verdict::Fail,
            "service",
            format!(
                "{} has no ExecStart= line; rerun install.sh --systemd",
                path.display()
            ),
        );
    };
    let bin = std::path::Path::new(bin);
    if !bin.is_file() {
        return Check::new(
            Verdict::Fail,
            "service",
            format!(
                "{} runs {}, which does not exist; rerun install.sh --systemd",
                path.display(),
                bin.display()
            ),
        );
    }
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a.canonicalize()
            .ok()
            .zip(b.canonicalize().ok())
            .is_some_and(|(a, b)| a == b)
    };
    if !same(bin, exe) {
        return Check::new(
            Verdict::Warn,
            "service",
            format!(
                "{} runs {}, not this sluice ({})",
                path.display(),
                bin.display(),
                exe.display()
            ),
        );
    }
    if !text.lines().any(|l| l.trim() == "KillMode=process") {
        return Check::new(
            Verdict::Warn,
            "service",
            format!(
                "{} lacks KillMode=process: stopping the service kills running jobs",
                path.display()
            ),
        );
    }
    Check::new(
        Verdict::Ok,
        "service",
        format!("{} runs {}", path.display(), bin.display()),
    )
}

fn local_checks() -> Vec<Check> {
    match std::process::Command::new("sh")
        .arg("-c")
        .arg(FACTS)
        .output()
    {
        Ok(o) => interpret_facts(&String::from_utf8_lossy(&o.stdout)),
        Err(e) => vec![Check::new(
            Verdict::Fail,
            "facts",
            format!("cannot run sh: {e}"),
        )],
    }
}

async fn remote_checks(spec: &LinkSpec) -> Vec<Check> {
    let session = match ssh::connect(spec).await {
        Ok(s) => s,
        // The error says what failed and how to fix it (unknown or changed host key,
        // refused key, unreachable address).
        Err(e) => return vec![Check::new(Verdict::Fail, "ssh", e.to_string())],
    };
    let mut out = vec![Check::new(
        Verdict::Ok,
        "ssh",
        format!(
            "connected as {}, host key known, key {} accepted",
            spec.addr.user_or_current(),
            spec.identity_file.display()
        ),
    )];
    out.push(match session.probe_usable().await {
        Ok(Ok((path, info))) => Check::new(
            Verdict::Ok,
            "agent",
            format!(
                "{path}: sluice {} (protocol {}) on {} {}",
                info.build, info.proto, info.os, info.arch
            ),
        ),
        Ok(Err(why)) if spec.push_binary => Check::new(
            Verdict::Warn,
            "agent",
            format!(
                "{why}; the controller will push its own binary to {} when it connects",
                spec.push_path
            ),
        ),
        Ok(Err(why)) => Check::new(
            Verdict::Fail,
            "agent",
            format!("{why}; install sluice there or set push_binary = true"),
        ),
        Err(e) => Check::new(Verdict::Fail, "agent", e.to_string()),
    });
    match session.run_text(FACTS).await {
        Ok((_, text)) => out.extend(interpret_facts(&text)),
        Err(e) => out.push(Check::new(Verdict::Fail, "facts", e.to_string())),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_systemd_unit() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("sluice");
        std::fs::write(&bin, "x").unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "y").unwrap();
        let unit = dir.path().join("u.service");
        let text = |b: &std::path::Path, kill: &str| {
            format!(
                "[Service]\nExecStart={} controller --foreground\n{kill}\n",
                b.display()
            )
        };
        let c = unit_check(None, &unit, &bin);
        assert_eq!(c.verdict, Verdict::Ok);
        assert!(c.text.contains("install.sh --systemd"), "{}", c.text);
        let ok = text(&bin, "KillMode=process");
        assert_eq!(unit_check(Some(&ok), &unit, &bin).verdict, Verdict::Ok);
        let c = unit_check(Some(&ok), &unit, &other);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.text.contains("not this sluice"), "{}", c.text);
        let c = unit_check(Some(&text(&bin, "")), &unit, &bin);
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.text.contains("KillMode=process"), "{}", c.text);
        let gone = dir.path().join("gone");
        let c = unit_check(Some(&text(&gone, "KillMode=process")), &unit, &bin);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.text.contains("does not exist"), "{}", c.text);
    }

    #[test]
    fn reads_cgroup_v2_with_and_without_controllers() {
        let c = interpret_facts("cgfs=cgroup2fs\ncgctl=cpuset cpu io memory pids\nndev=0\n");
        assert_eq!(c[0].verdict, Verdict::Ok);
        assert!(c[0].text.starts_with("cgroup v2"), "{}", c[0].text);
        let c = interpret_facts("cgfs=cgroup2fs\ncgctl=cpu io pids\nndev=0\n");
        assert_eq!(c[0].verdict, Verdict::Warn);
        assert!(c[0].text.contains("cpuset, memory"), "{}", c[0].text);
    }

    #[test]
    fn reads_cgroup_v1_and_none() {
        let c = interpret_facts("cgfs=tmpfs\nv1=cpuset\nv1=memory\nv1=freezer\nv1=devices\n");
        assert_eq!(c[0].verdict, Verdict::Ok);
        assert_eq!(c[0].text, "cgroup v1 (cpuset memory freezer devices)");
        let c = interpret_facts("cgfs=tmpfs\nv1=cpuset\n");
        assert_eq!(c[0].verdict, Verdict::Warn);
        assert!(c[0].text.contains("memory, freezer"), "{}", c[0].text);
        let c = interpret_facts("cgfs=\nndev=0\n");
        assert_eq!(c[0].verdict, Verdict::Warn);
        assert!(c[0].text.contains("degraded"), "{}", c[0].text);
    }

    #[test]
    fn reads_gpus() {
        let c = interpret_facts(
            "ndev=2\ngpu=GPU 0: NVIDIA H100 (UUID: GPU-a)\ngpu=GPU 1: NVIDIA H100 (UUID: GPU-b)\n",
        );
        assert_eq!(c[1].verdict, Verdict::Ok);
        assert!(
            c[1].text.starts_with("2: GPU 0: NVIDIA H100"),
            "{}",
            c[1].text
        );
        let c = interpret_facts("ndev=1\n");
        assert_eq!(c[1].verdict, Verdict::Warn);
        assert_eq!(interpret_facts("ndev=0\n")[1].text, "none found");
    }
}
