//! `sluice doctor`: checks what a cluster needs and explains what is wrong (issue #7).
//! No Slurm twin; it answers the questions an admin asks when a node stays DOWN: is the
//! controller up, can the controller's key reach each node over SSH, is the host key
//! known, which sluice runs there and does it speak our protocol, are cgroups usable
//! for isolation, which GPUs does the node have.
//!
//! Each check prints one line, `ok`, `warn` or `FAIL`, with the reason; every finding
//! that is not ok is followed by a `fix:` line saying what to do. Exit status 0 when
//! nothing failed, 1 otherwise, 2 on bad usage.
//!
//! It checks what this user's controller really gets, not what the machine has: on the
//! local node, isolation is probed as the agent probes it (the same cgroup detection,
//! as this uid, under this controller's `[cgroup] root`), so a hierarchy that exists
//! but is not writable for this uid is reported as degraded, as the node's
//! `Reason=Isolation degraded: …` says; the GPUs the configuration declares are looked
//! for (their device files, or as many GPUs as the agent's detection finds). When the
//! controller answers, each node's state and `Reason=` are shown, and a disagreement
//! between the node's reported isolation and this probe is a finding of its own.
//!
//! The systemd unit `install.sh --systemd` writes (the system unit in system mode, the
//! user unit in personal mode) is checked when it is there: its `ExecStart=` binary
//! exists and is this one, and it stops only the controller (`KillMode=process`).

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

/// One finding of the report: a line, and for a finding that is not ok, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub verdict: Verdict,
    pub what: &'static str,
    pub text: String,
    /// What to do about it; every `Warn` and `Fail` has one.
    pub fix: Option<String>,
}

impl Check {
    fn new(verdict: Verdict, what: &'static str, text: impl Into<String>) -> Check {
        Check {
            verdict,
            what,
            text: text.into(),
            fix: None,
        }
    }

    /// A `Warn` or `Fail` finding with what to do about it.
    fn bad(
        verdict: Verdict,
        what: &'static str,
        text: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            fix: Some(fix.into()),
            ..Check::new(verdict, what, text)
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
        write!(f, "  {v}  {:<10} {}", self.what, self.text)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n        {:<10} fix: {fix}", "")?;
        }
        Ok(())
    }
}

/// How to give this uid a cgroup subtree it may write (cgroup v1 or v2), for fixes.
fn delegate_fix(uid: u32, root: &str) -> String {
    format!(
        "run the controller as root (system mode, /etc/sluice/sluice.toml), or give uid {uid} \
         its own subtree: cgroup v2: start it in a delegated scope (systemd-run --user \
         --scope -p Delegate=yes sluice controller); cgroup v1: as root, mkdir \
         /sys/fs/cgroup/{{cpuset,memory,freezer,devices}}/{root} and chown them to uid {uid} \
         (cpuset: copy cpuset.cpus and cpuset.mems from the parent first)"
    )
}

/// The isolation this controller's stepds get, from the cgroup manager a probe as this
/// uid found (`backend`, and its `degraded()` notes); `root` is `[cgroup] root`.
pub fn isolation_check(backend: &str, notes: &[String], uid: u32, root: &str) -> Check {
    if backend == "none" {
        let why = notes.first().map_or("no cgroups", String::as_str);
        let fix = if why.contains("disabled by configuration") {
            "set [cgroup] plugin = \"autodetect\" in the configuration and restart the controller"
                .to_string()
        } else if why.contains("not mounted")
            && !why.contains("writable")
            && !why.contains("ermission")
        {
            "mount a cgroup hierarchy (cgroup v2 at /sys/fs/cgroup, or the v1 cpuset, memory, \
             freezer and devices controllers), then restart the controller"
                .to_string()
        } else {
            delegate_fix(uid, root)
        };
        return Check::bad(
            Verdict::Warn,
            "isolation",
            format!(
                "degraded for uid {uid}: {} (jobs run tracked by process group only)",
                notes.join("; ")
            ),
            fix,
        );
    }
    if notes.is_empty() {
        Check::new(
            Verdict::Ok,
            "isolation",
            format!("cgroup {backend}, writable by uid {uid}"),
        )
    } else {
        Check::bad(
            Verdict::Warn,
            "isolation",
            format!(
                "cgroup {backend} with gaps for uid {uid}: {}",
                notes.join("; ")
            ),
            delegate_fix(uid, root),
        )
    }
}

/// A remote node's isolation as its agent reported it to the controller (`why`:
/// its reason for degraded isolation); `root` is `[cgroup] root`.
pub fn reported_isolation(why: &str, root: &str) -> Check {
    Check::bad(
        Verdict::Warn,
        "isolation",
        format!("degraded for the agent's user there (as it reported): {why}"),
        format!(
            "connect as root there (ssh = \"root@host\"), or give the agent's user a \
             writable cgroup subtree named {root} (see sluice doctor on that node)"
        ),
    )
}

/// Probes isolation on this machine exactly as the agent does at start (creating this
/// uid's directory under `[cgroup] root`, as a stepd would).
fn local_isolation(cfg: &Config) -> Check {
    use crate::stepd::isolate::{Scope, detect};
    let uid = nix::unistd::geteuid().as_raw();
    let m = detect(&cfg.cgroup, Scope::batch(&cfg.cgroup.root, uid, 0));
    isolation_check(
        &m.backend().to_string(),
        &m.degraded(),
        uid,
        &cfg.cgroup.root,
    )
}

/// Whether the GPUs a node's configuration declares are there: each declared device
/// file exists (`missing`: those that do not), or, for devices declared without a
/// file, at least as many GPUs were found (`found`). `source` names the configuration.
pub fn gpu_check(
    node: &str,
    declared: &[crate::model::gres::GresDevice],
    found: usize,
    missing: &[String],
    source: &str,
) -> Check {
    let gpus: Vec<&crate::model::gres::GresDevice> =
        declared.iter().filter(|d| d.name == "gpu").collect();
    let fix = format!(
        "correct the gres of node {node} in {source} (or its gres.conf lines) to what the node \
         has, or install the GPU driver there; then restart the controller"
    );
    if !missing.is_empty() {
        return Check::bad(
            Verdict::Fail,
            "gpus",
            format!(
                "{} declared, but {} missing: jobs given them get no device",
                gpus.len(),
                missing.join(", ")
            ),
            fix,
        );
    }
    let without_file = gpus.iter().filter(|d| d.file.is_none()).count();
    if without_file > found {
        return Check::bad(
            Verdict::Fail,
            "gpus",
            format!(
                "{} declared, {found} found: jobs given the others get no device",
                gpus.len()
            ),
            fix,
        );
    }
    match (gpus.len(), found) {
        (0, 0) => Check::new(Verdict::Ok, "gpus", "none declared, none found"),
        (0, n) => Check::new(
            Verdict::Ok,
            "gpus",
            format!("{n} found; none declared, so the controller adopts the ones found"),
        ),
        (n, f) => Check::new(
            Verdict::Ok,
            "gpus",
            format!("{n} declared, present ({f} found)"),
        ),
    }
}

/// The declared GPUs of `n` and which of their device files are missing here.
fn declared_gpus(n: &NodeConf) -> (Vec<crate::model::gres::GresDevice>, Vec<String>) {
    let declared = n.gres_devices().unwrap_or_default();
    let missing = declared
        .iter()
        .filter(|d| d.name == "gpu")
        .filter_map(|d| d.file.clone())
        .filter(|f| !std::path::Path::new(f).exists())
        .collect();
    (declared, missing)
}

/// What the controller says of `node`: its state and `Reason=`, and whether the
/// isolation its agent reported agrees with this machine's probe (`local`, for the
/// node this command runs on).
pub fn node_checks(node: &crate::model::Node, local: Option<&Check>) -> Vec<Check> {
    let mut out = Vec::new();
    // The reason the controller sets for degraded isolation ends with what the agent
    // reported (`Isolation degraded: <why>`).
    let isolation_reason = |r: &str| {
        node.isolation_degraded
            .as_deref()
            .is_some_and(|why| r.ends_with(why))
    };
    let state = node.state_scontrol();
    let unusable = node.state == crate::model::node::NodeState::Down || node.drain || node.fail;
    match node.reason.as_deref() {
        None if unusable => out.push(Check::bad(
            Verdict::Fail,
            "state",
            format!("{state} without a reason"),
            format!("see the controller's log, then scontrol update NodeName={} State=RESUME", node.name),
        )),
        None => out.push(Check::new(Verdict::Ok, "state", state)),
        Some(r) if isolation_reason(r) && !unusable => out.push(Check::bad(
            Verdict::Warn,
            "state",
            format!("{state}, Reason={r}"),
            "see the isolation finding; the controller clears this reason when the node reports full isolation",
        )),
        Some(r) => out.push(Check::bad(
            if unusable { Verdict::Fail } else { Verdict::Warn },
            "state",
            format!("{state}, Reason={r}"),
            format!(
                "fix what the reason says, then scontrol update NodeName={} State=RESUME",
                node.name
            ),
        )),
    }
    if let Some(local) = local {
        let here_degraded = local.verdict != Verdict::Ok;
        let node_degraded = node.isolation_degraded.is_some();
        if here_degraded != node_degraded && node.agent_start_time.is_some() {
            out.push(Check::bad(
                Verdict::Warn,
                "agreement",
                format!(
                    "the node's agent reported {} isolation, this probe finds {}",
                    if node_degraded { "degraded" } else { "full" },
                    if here_degraded { "degraded" } else { "full" },
                ),
                "the controller runs with other privileges or settings than this command \
                 (another uid, or an older configuration): restart it with \
                 sluice controller --stop; sluice controller",
            ));
        }
    }
    out
}

/// How many GPUs [`FACTS`] output shows: those nvidia-smi lists, else the
/// `/dev/nvidia<N>` files.
fn facts_gpu_count(text: &str) -> usize {
    let listed = text.lines().filter(|l| l.starts_with("gpu=")).count();
    let files = text
        .lines()
        .find_map(|l| l.strip_prefix("ndev="))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if listed > 0 { listed } else { files }
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
            Check::bad(
                Verdict::Warn,
                "isolation",
                format!(
                    "cgroup v2 without the {} controller(s): jobs are not confined there",
                    missing.join(", ")
                ),
                format!(
                    "enable them: echo '{}' > /sys/fs/cgroup/cgroup.subtree_control (as root)",
                    missing
                        .iter()
                        .map(|c| format!("+{c}"))
                        .collect::<Vec<_>>()
                        .join(" ")
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
            Check::bad(
                Verdict::Warn,
                "isolation",
                format!(
                    "cgroup v1 without {}: that part of isolation is degraded",
                    missing.join(", ")
                ),
                format!(
                    "mount the missing controller(s) (as root): mount -t cgroup -o {0} cgroup /sys/fs/cgroup/{0}",
                    missing[0]
                ),
            )
        }
    } else {
        Check::bad(
            Verdict::Warn,
            "isolation",
            "no usable cgroup hierarchy: isolation is degraded to process groups and rlimits (cores, memory and devices are not confined)",
            "mount a cgroup hierarchy there (cgroup v2 at /sys/fs/cgroup), then restart the controller",
        )
    };
    out.push(isolation);
    out.push(match (gpus.len(), ndev) {
        (0, 0) => Check::new(Verdict::Ok, "gpus", "none found"),
        (0, n) => Check::bad(
            Verdict::Warn,
            "gpus",
            format!("{n} /dev/nvidia device(s) but nvidia-smi is missing or failed: GPUs are not described"),
            "install the NVIDIA driver's utilities (nvidia-smi), or declare the GPUs' gres in the configuration",
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
            let fix = "correct the file, or point SLUICE_CONF at a readable sluice.toml \
                       (unset, a user gets the personal mode)";
            println!(
                "{}",
                Check::bad(Verdict::Fail, "config", e.to_string(), fix)
            );
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
    let source = cfg.source.as_ref().map_or_else(
        || "the personal configuration".to_string(),
        |p| p.display().to_string(),
    );
    // The controller's view of the nodes, when it answers (never started from here).
    let (controller, known) = match super::client::Client::try_connect(&cfg)
        .and_then(|mut c| c.request(&crate::proto::Request::Nodes))
    {
        Ok(crate::proto::Response::Nodes { nodes, .. }) => (
            Check::new(
                Verdict::Ok,
                "controller",
                format!("answers on {}", cfg.socket.display()),
            ),
            Some(nodes),
        ),
        Ok(other) => (
            Check::bad(
                Verdict::Warn,
                "controller",
                format!(
                    "answers on {} but not with its nodes ({other:?})",
                    cfg.socket.display()
                ),
                "check that this binary and the controller are the same sluice version; restart the controller",
            ),
            None,
        ),
        Err(e) => (
            Check::bad(
                Verdict::Warn,
                "controller",
                format!(
                    "nothing answers on {} ({})",
                    cfg.socket.display(),
                    e.hint().map_or_else(|| e.to_string(), str::to_string)
                ),
                "start it with `sluice controller` (any front-end starts a personal one)",
            ),
            None,
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
        let (declared, missing) = declared_gpus(n);
        let mut local_iso = None;
        let checks = match &n.ssh {
            None => {
                println!("node {} (local)", n.name);
                let iso = local_isolation(&cfg);
                let found = crate::agent::gpu::detect()
                    .0
                    .iter()
                    .filter(|d| d.name == "gpu")
                    .count();
                local_iso = Some(iso.clone());
                vec![iso, gpu_check(&n.name, &declared, found, &missing, &source)]
            }
            Some(addr) => {
                println!("node {} ({addr})", n.name);
                match LinkSpec::from_conf(n, 10, exe.clone()) {
                    Ok(spec) => rt.block_on(remote_checks(&spec, n, &source)),
                    Err(e) => vec![Check::bad(
                        Verdict::Fail,
                        "config",
                        e,
                        format!("correct node {} in {source}", n.name),
                    )],
                }
            }
        };
        let mut checks = checks;
        if let Some(node) = known
            .as_ref()
            .and_then(|k| k.iter().find(|x| x.name == n.name))
        {
            // Over SSH the facts show what the machine has; what the agent's user
            // gets there is what the agent reported, which wins.
            if n.ssh.is_some()
                && let Some(why) = &node.isolation_degraded
            {
                for c in checks.iter_mut().filter(|c| c.what == "isolation") {
                    *c = reported_isolation(why, &cfg.cgroup.root);
                }
            }
            checks.extend(node_checks(node, local_iso.as_ref()));
        }
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
        return Check::bad(
            Verdict::Fail,
            "service",
            format!("{} has no ExecStart= line", path.display()),
            "rerun install.sh --systemd",
        );
    };
    let bin = std::path::Path::new(bin);
    if !bin.is_file() {
        return Check::bad(
            Verdict::Fail,
            "service",
            format!(
                "{} runs {}, which does not exist",
                path.display(),
                bin.display()
            ),
            "rerun install.sh --systemd",
        );
    }
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a.canonicalize()
            .ok()
            .zip(b.canonicalize().ok())
            .is_some_and(|(a, b)| a == b)
    };
    if !same(bin, exe) {
        return Check::bad(
            Verdict::Warn,
            "service",
            format!(
                "{} runs {}, not this sluice ({})",
                path.display(),
                bin.display(),
                exe.display()
            ),
            "rerun install.sh --systemd from the sluice you want the service to run",
        );
    }
    if !text.lines().any(|l| l.trim() == "KillMode=process") {
        return Check::bad(
            Verdict::Warn,
            "service",
            format!(
                "{} lacks KillMode=process: stopping the service kills running jobs",
                path.display()
            ),
            "add KillMode=process to its [Service] section, or rerun install.sh --systemd",
        );
    }
    Check::new(
        Verdict::Ok,
        "service",
        format!("{} runs {}", path.display(), bin.display()),
    )
}

/// The checks of a node reached over SSH; its GPUs are compared with what `n`
/// declares in `source`.
async fn remote_checks(spec: &LinkSpec, n: &NodeConf, source: &str) -> Vec<Check> {
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
        Ok((_, text)) => {
            let mut facts = interpret_facts(&text);
            let (declared, _) = declared_gpus(n);
            if declared.iter().any(|d| d.name == "gpu") {
                // Declared GPUs: there must be as many there (device files are checked
                // only on the local node).
                let found = facts_gpu_count(&text);
                facts.retain(|c| c.what != "gpus");
                facts.push(gpu_check(&n.name, &declared, found, &[], source));
            }
            out.extend(facts);
        }
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
    fn every_finding_that_is_not_ok_says_how_to_fix_it() {
        let mut all = Vec::new();
        for facts in [
            "cgfs=cgroup2fs\ncgctl=cpu\nndev=2\n",
            "cgfs=tmpfs\nv1=cpuset\n",
            "cgfs=\nndev=0\n",
        ] {
            all.extend(interpret_facts(facts));
        }
        for notes in [
            vec!["no cgroups: cgroups disabled by configuration".to_string()],
            vec!["no cgroups: cgroup/v1: no usable controller (memory: /x is not writable)".into()],
            vec!["no cgroups: cgroup/v1: no usable controller (memory: not mounted)".into()],
        ] {
            all.push(isolation_check("none", &notes, 1000, "sluice-personal"));
        }
        all.push(isolation_check(
            "cgroup/v1",
            &["memory is not limited".into()],
            1000,
            "r",
        ));
        all.push(reported_isolation("no cgroups: x", "r"));
        all.push(gpu_check("n1", &gpus(2, false), 0, &[], "c.toml"));
        all.push(gpu_check(
            "n1",
            &gpus(1, true),
            0,
            &["/dev/nvidia0".into()],
            "c.toml",
        ));
        let mut n = crate::model::Node::new("n1", 4, 1000);
        n.drain = true;
        n.reason = Some("disk".into());
        all.extend(node_checks(&n, None));
        n.reason = None;
        all.extend(node_checks(&n, None));
        let bad: Vec<&Check> = all.iter().filter(|c| c.verdict != Verdict::Ok).collect();
        assert!(bad.len() >= 12, "{bad:?}");
        for c in bad {
            assert!(c.fix.as_deref().is_some_and(|f| !f.is_empty()), "{c:?}");
            assert!(
                c.to_string().contains("\n") && c.to_string().contains("fix: "),
                "{c}"
            );
        }
    }

    fn gpus(n: u32, files: bool) -> Vec<crate::model::gres::GresDevice> {
        let mut d = crate::model::gres::parse_node_gres(&format!("gpu:{n}")).unwrap();
        for (i, g) in d.iter_mut().enumerate() {
            g.file = files.then(|| format!("/dev/nvidia{i}"));
        }
        d
    }

    #[test]
    fn isolation_as_this_uid_gets_it() {
        let ok = isolation_check("cgroup/v1", &[], 1000, "r");
        assert_eq!(ok.verdict, Verdict::Ok);
        assert_eq!(ok.text, "cgroup cgroup/v1, writable by uid 1000");
        let c = isolation_check(
            "none",
            &["no cgroups: cgroup/v1: no usable controller (memory: /sys/fs/cgroup/memory/r/uid_1000 is not writable)".into()],
            1000,
            "r",
        );
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.text.contains("degraded for uid 1000") && c.text.contains("not writable"));
        assert!(c.fix.unwrap().contains("chown"));
        let c = isolation_check(
            "none",
            &["no cgroups: cgroups disabled by configuration".into()],
            0,
            "r",
        );
        assert!(c.fix.unwrap().contains("plugin = \"autodetect\""));
    }

    #[test]
    fn declared_gpus_must_be_there() {
        assert_eq!(gpu_check("n", &[], 0, &[], "c").verdict, Verdict::Ok);
        assert_eq!(
            gpu_check("n", &gpus(2, false), 2, &[], "c").verdict,
            Verdict::Ok
        );
        let c = gpu_check("n", &gpus(4, false), 1, &[], "c.toml");
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(
            c.text,
            "4 declared, 1 found: jobs given the others get no device"
        );
        assert!(c.fix.unwrap().contains("node n in c.toml"));
        // Declared with files: the files decide, whatever detection finds.
        assert_eq!(
            gpu_check("n", &gpus(2, true), 0, &[], "c").verdict,
            Verdict::Ok
        );
        let c = gpu_check("n", &gpus(2, true), 0, &["/dev/nvidia1".into()], "c");
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.text.contains("/dev/nvidia1 missing"), "{}", c.text);
        let c = gpu_check("n", &[], 3, &[], "c");
        assert!(c.text.contains("adopts"), "{}", c.text);
    }

    #[test]
    fn the_nodes_reason_and_the_probe_agree_or_it_is_said() {
        let mut n = crate::model::Node::new("n1", 4, 1000);
        n.state = crate::model::node::NodeState::Up;
        n.agent_start_time = Some(1);
        let full = isolation_check("cgroup/v1", &[], 0, "r");
        let degraded = isolation_check("none", &["no cgroups: x".into()], 0, "r");
        let c = node_checks(&n, Some(&full));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].verdict, Verdict::Ok);
        // The agent reported degraded isolation: the reason is shown, and this probe
        // disagreeing is a finding.
        n.isolation_degraded = Some("no cgroups: x".into());
        n.reason = Some("Isolation degraded: no cgroups: x".into());
        let c = node_checks(&n, Some(&degraded));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].verdict, Verdict::Warn);
        assert!(
            c[0].text
                .contains("Reason=Isolation degraded: no cgroups: x"),
            "{}",
            c[0].text
        );
        let c = node_checks(&n, Some(&full));
        assert_eq!(c[1].what, "agreement");
        assert!(
            c[1].text
                .contains("reported degraded isolation, this probe finds full"),
            "{}",
            c[1].text
        );
        // An admin's drain is a failure with its reason.
        n.drain = true;
        n.reason = Some("bad fan".into());
        let c = node_checks(&n, None);
        assert_eq!(c[0].verdict, Verdict::Fail);
        assert!(c[0].fix.as_deref().unwrap().contains("State=RESUME"));
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
