//! `sluice controller`: its options, starting in the background or detached, stopping
//! a running controller, and the locks and directories a controller holds.

use super::main_loop::run;
use crate::config::{Config, Mode};
use crate::proto::{Request, Response};
use anyhow::Context;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

/// `sluice controller [--foreground] [--stop] [--detached] [-v…]`.
///
/// Without `--foreground` the controller starts in the background and this returns once
/// it answers. `--stop` asks a running controller to shut down and waits for it. Each
/// `-v` raises the log level one step above `slurmctld_debug` (as slurmctld's `-v`).
pub fn cli_main(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut foreground = false;
    let mut stop = false;
    let mut detached = false;
    let mut verbose = 0;
    for a in &args {
        match a.as_str() {
            "--foreground" | "-D" => foreground = true,
            "-v" | "--verbose" => verbose += 1,
            v if v.len() > 2 && v.starts_with('-') && v[1..].bytes().all(|b| b == b'v') => {
                verbose += v.len() - 1
            }
            "--stop" => stop = true,
            "--detached" => detached = true,
            "-h" | "--help" => {
                println!(
                    "usage: sluice controller [--foreground] [--stop] [-v...]\n\n\
                     Starts the controller (in the background unless --foreground), or stops it.\n\
                     -v: log more (each -v one level above slurmctld_debug).\n\
                     Configuration: $SLUICE_CONF, else /etc/sluice/sluice.toml, else personal mode."
                );
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("sluice controller: unknown option '{other}'");
                return ExitCode::from(2);
            }
        }
    }
    let cfg = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
    };
    if stop {
        return stop_controller(&cfg);
    }
    if !foreground && !detached {
        return start_background(&cfg, verbose);
    }
    if detached {
        // Leave the caller's session so that its terminal and signals are not ours.
        let _ = nix::unistd::setsid();
        // Nor its working directory, which would stay busy (unmountable) for as long
        // as the controller runs; every path it uses is absolute by now.
        let _ = std::env::set_current_dir("/");
        close_inherited_fds();
    }
    // Job scripts, environments and the database are private to the controller.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    init_tracing(&cfg, verbose);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sluice controller: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let res = rt.block_on(async {
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("signal handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            }
        };
        // The actor runs as a task on a worker, not on this thread: a request's task
        // wakes it on the same worker (tokio's LIFO slot) instead of across threads.
        match tokio::spawn(run(cfg, shutdown)).await {
            Ok(r) => r,
            Err(e) => Err(anyhow::anyhow!("controller task failed: {e}")),
        }
    });
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice controller: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Closes every descriptor above stderr that the detached controller inherited from
/// whoever started it (a shell's `7>&1` pipe would otherwise stay open, and its reader
/// wait, for as long as the controller runs), as Slurm's daemons do when they detach.
fn close_inherited_fds() {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    // The listing's own descriptor is closed by now; closing it again fails harmlessly.
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
}

/// The log level: `SLUICE_LOG` (a tracing filter) when set, else `slurmctld_debug`
/// raised by `verbose` steps. Colour only on a terminal: a log file or journald gets
/// plain lines.
fn init_tracing(cfg: &Config, verbose: usize) {
    let level = crate::logsink::raised(&cfg.slurmctld_debug, verbose)
        .and_then(crate::logsink::filter_for)
        .unwrap_or("info");
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    crate::logsink::init_reloadable(filter, std::io::IsTerminal::is_terminal(&std::io::stderr()));
}

fn start_background(cfg: &Config, verbose: usize) -> ExitCode {
    match crate::cli::client::Client::start_controller_verbose(cfg, verbose) {
        Ok(_) => {
            eprintln!(
                "sluice controller: running (socket {})",
                cfg.socket.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The hint names the cause; "Unable to contact slurm controller" before it
            // would only mislead.
            match e.hint() {
                Some(h) => eprintln!("{h}"),
                None => eprintln!("sluice controller: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

/// Stops a controller whose socket does not answer, from the pid it recorded, if that
/// process is still a sluice controller holding the state directory.
///
/// The pid file is believed only while the state directory's lock is held: a stale
/// file (the controller is gone, its pid reused, perhaps by another user's or another
/// state directory's controller) never leads to a signal.
fn stop_by_pid(cfg: &Config) -> ExitCode {
    let lock_held =
        std::fs::File::open(cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK))
            .is_ok_and(|f| {
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
            });
    let pid = std::fs::read_to_string(cfg.state_dir.join(PID_FILE))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let alive_controller = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("sluice") && c.contains("controller")
            })
            .unwrap_or(false)
    };
    match pid {
        Some(pid) if lock_held && alive_controller(pid) => {
            eprintln!(
                "sluice controller: no answer on {}; stopping pid {pid} by signal",
                cfg.socket.display()
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            for _ in 0..200 {
                if !alive_controller(pid) {
                    return ExitCode::SUCCESS;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            eprintln!("sluice controller: pid {pid} still running after 5 s");
            ExitCode::from(1)
        }
        _ => {
            eprintln!(
                "sluice controller: not running (no answer on {})",
                cfg.socket.display()
            );
            ExitCode::SUCCESS
        }
    }
}

fn stop_controller(cfg: &Config) -> ExitCode {
    let sock = std::os::unix::net::UnixStream::connect(&cfg.socket);
    if sock.is_err() {
        return stop_by_pid(cfg);
    }
    let mut c = match crate::cli::client::Client::connect_with(cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
    };
    match c.request(&Request::Shutdown) {
        Ok(Response::Ok) => {}
        Ok(Response::Error(e)) => {
            eprintln!("sluice controller: {e}");
            return ExitCode::from(1);
        }
        Ok(_) | Err(_) => {}
    }
    // Wait until the controller has exited, i.e. released its lock on the state
    // directory (the socket goes away earlier, while the store still commits), so that
    // a controller started right after this returns does not find the lock taken.
    let lock = cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK);
    for _ in 0..400 {
        let released = match std::fs::File::open(&lock) {
            Ok(f) => {
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
            }
            Err(_) => true,
        };
        if released {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    eprintln!("sluice controller: still running after 10 s");
    ExitCode::from(1)
}

/// Holds an exclusive lock on the state directory for the controller's lifetime, so two
/// controllers never share one database.
pub(super) fn lock_state_dir(cfg: &Config) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("cannot create state directory {}", cfg.state_dir.display()))?;
    lock_file(
        &cfg.state_dir.join(crate::config::personal::CONTROLLER_LOCK),
        |e| {
            format!(
                "{} {} ({e})",
                crate::cli::client::LOCK_HELD,
                cfg.state_dir.display()
            )
        },
    )
}

/// Takes an exclusive, non-blocking `flock` on `path` (created if missing), held until
/// the returned guard drops. Errors: the file cannot be opened, or the lock is held
/// (then the message is `held(errno)`).
fn lock_file(
    path: &std::path::Path,
    held: impl FnOnce(nix::errno::Errno) -> String,
) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| anyhow::anyhow!(held(e)))
}

/// Holds an exclusive lock on the spool directory for the controller's lifetime: its
/// local agent re-adopts (or ends) every job found there, so a second controller
/// configured with the same `spool_dir` and another `state_dir` would end the first
/// one's running jobs. Errors: the lock is held (another controller's spool).
pub(super) fn lock_spool_dir(cfg: &Config) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    lock_file(&cfg.spool_dir.join("spool.lock"), |e| {
        format!(
            "the spool directory {} is in use by another controller ({e}); give each \
             controller its own spool_dir",
            cfg.spool_dir.display()
        )
    })
}

/// Sets the state and spool directories' modes and records the controller's pid.
/// The state directory is private (0700) in personal mode; in system mode it and the
/// spool are traversable but not listable (0711) so that jobs can reach their own files,
/// while every file in them is created private (umask 077).
pub(super) fn prepare_dirs(cfg: &Config) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let shared = cfg.mode == Mode::System;
    let mode = if shared { 0o711 } else { 0o700 };
    std::fs::set_permissions(&cfg.state_dir, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", cfg.state_dir.display()))?;
    std::fs::create_dir_all(&cfg.spool_dir)
        .with_context(|| format!("cannot create {}", cfg.spool_dir.display()))?;
    std::fs::set_permissions(&cfg.spool_dir, std::fs::Permissions::from_mode(0o711))
        .with_context(|| format!("cannot set the mode of {}", cfg.spool_dir.display()))?;
    std::fs::write(
        cfg.state_dir.join(PID_FILE),
        format!("{}\n", std::process::id()),
    )
    .context("cannot write the controller's pid file")?;
    Ok(())
}

/// The controller's pid, in the state directory (used by `--stop` when the socket is gone).
const PID_FILE: &str = "controller.pid";
