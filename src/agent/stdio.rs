//! `sluice agent`: a node agent (cf. slurmd) speaking the framed protocol on its stdin
//! and stdout, which is how the controller runs it on a remote node through SSH
//! (`transport::ssh`). Logs go to stderr (the controller logs them, prefixed with the
//! node's name) or to `--log FILE`; stdout carries protocol frames only.
//!
//! `sluice agent --probe` prints one line saying which protocol versions this binary
//! speaks and what it was built for; the controller uses it to decide whether to push
//! its own binary.

use super::AgentConfig;
use crate::config::NodeConf;
use crate::proto::Framed;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: sluice agent --stdio --node NAME [--spool DIR] [--heartbeat SECS] [--log FILE]\n       sluice agent --probe\n\n\
Runs a node agent speaking sluice's protocol on stdin/stdout (the controller starts it\n\
over SSH). --probe prints this binary's protocol versions and platform.";

/// Parsed `sluice agent` options.
#[derive(Debug, Default, PartialEq)]
struct Opts {
    stdio: bool,
    probe: bool,
    node: Option<String>,
    spool: Option<PathBuf>,
    heartbeat: Option<u64>,
    log: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("option '{name}' needs a value"))
        };
        match flag {
            "--stdio" => o.stdio = true,
            "--probe" => o.probe = true,
            "--node" => o.node = Some(value("--node")?),
            "--spool" => o.spool = Some(PathBuf::from(value("--spool")?)),
            "--log" => o.log = Some(PathBuf::from(value("--log")?)),
            "--heartbeat" => {
                let v = value("--heartbeat")?;
                o.heartbeat = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or_else(|| format!("bad --heartbeat '{v}' (seconds, at least 1)"))?,
                );
            }
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if !o.probe && !o.stdio {
        return Err("say --stdio (the only transport) or --probe".into());
    }
    if o.stdio && o.node.as_deref().is_none_or(str::is_empty) {
        return Err("--stdio needs --node NAME".into());
    }
    Ok(o)
}

/// The spool directory an agent uses when not told: `/var/spool/sluice/<node>` as root,
/// else `$XDG_STATE_HOME/sluice/agent-spool/<node>` (`~/.local/state/...`). The node's
/// name is part of it so that several agents can share one machine.
pub fn default_spool(node: &str) -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/var/spool/sluice").join(node);
    }
    let uid = nix::unistd::getuid().as_raw();
    std::env::var_os("XDG_STATE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/sluice-{uid}/state")))
        .join("sluice/agent-spool")
        .join(node)
}

/// Where a remote agent listens for front-ends in its jobs: `relay/sock` in its spool
/// directory (the path stays short enough for a Unix socket name).
pub fn relay_path(spool: &std::path::Path) -> PathBuf {
    spool.join("relay").join("sock")
}

fn init_log(path: Option<&PathBuf>) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let r = match path {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("cannot open log file {}: {e}", p.display()))?;
            b.with_writer(std::sync::Mutex::new(f)).try_init()
        }
        // Under SSH the controller logs these lines with its own timestamps.
        None => b
            .without_time()
            .with_writer(crate::logsink::stderr)
            .try_init(),
    };
    r.map_err(|e| format!("cannot set up logging: {e}"))
}

/// `sluice agent …` (see the module docs). Exit status 0 when the controller closes the
/// link, 1 on errors, 2 on bad usage.
pub fn cli_main(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        eprintln!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sluice agent: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if o.probe {
        println!("{}", crate::transport::ssh::ProbeInfo::own_line());
        return ExitCode::SUCCESS;
    }
    if let Err(e) = init_log(o.log.as_ref()) {
        eprintln!("sluice agent: {e}");
        return ExitCode::from(1);
    }
    let node = o.node.clone().unwrap_or_default();
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sluice agent: cannot find own executable: {e}");
            return ExitCode::from(1);
        }
    };
    // Launch records carry job environments: keep every spool file private.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let spool = o.spool.clone().unwrap_or_else(|| default_spool(&node));
    let cfg = AgentConfig {
        spool_dir: spool.clone(),
        node: NodeConf::named(&node),
        exe,
        heartbeat: Duration::from_secs(o.heartbeat.unwrap_or(10)),
        relay: Some(relay_path(&spool)),
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice agent: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(node, spool = %cfg.spool_dir.display(), "agent starting on stdio");
    let link = Framed::new(tokio::io::join(tokio::io::stdin(), tokio::io::stdout()));
    let res = rt.block_on(super::run(link, cfg));
    // Blocking stdin reads would keep the runtime from shutting down.
    rt.shutdown_timeout(Duration::from_millis(100));
    match res {
        Ok(()) => {
            tracing::info!(node, "controller closed the link");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(node, "agent stopped: {e:#}");
            eprintln!("sluice agent: {e:#}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Opts, String> {
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn parses_options() {
        let o = p(&["--stdio", "--node", "n1", "--spool=/s", "--heartbeat", "3"]).unwrap();
        assert_eq!(o.node.as_deref(), Some("n1"));
        assert_eq!(o.spool, Some(PathBuf::from("/s")));
        assert_eq!(o.heartbeat, Some(3));
        assert!(p(&["--probe"]).unwrap().probe);
        for (bad, want) in [
            (&["--stdio"][..], "needs --node"),
            (&["--node", "x"][..], "--stdio"),
            (&["--stdio", "--node"][..], "needs a value"),
            (
                &["--stdio", "--node", "x", "--heartbeat", "0"][..],
                "bad --heartbeat",
            ),
            (&["--bogus"][..], "unknown option"),
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }

    #[test]
    fn default_spool_is_per_node() {
        let a = default_spool("n1");
        let b = default_spool("n2");
        assert_ne!(a, b);
        assert!(a.ends_with("n1"));
    }
}
