//! `sluice ci -- COMMAND [ARGS...]`: runs COMMAND with a private, ephemeral personal
//! controller, for one CI pipeline (or any script that wants a queue of its own).
//!
//! - The controller's state lives in a new temporary directory
//!   (`$TMPDIR/sluice-ci.XXXXXX`, else under `/tmp`); COMMAND gets
//!   `SLUICE_STATE_DIR=<that dir>/state` in its environment, which every front-end
//!   (and every job's environment, through `--export`) honours, so `sbatch`, `srun`,
//!   `squeue`, … in COMMAND reach this controller and no other.
//! - Everything the controller creates outside that directory is named by its id
//!   (`config::personal`), so pipelines side by side on one runner, of one user, never
//!   touch each other's jobs.
//! - When COMMAND exits, its jobs are cancelled and waited for, the controller is
//!   stopped, its cgroups are removed (with anything still in them) and the temporary
//!   directory is deleted. `sluice ci` exits with COMMAND's status (128 + N when a
//!   signal N ended it; 127 when it could not be run). SIGINT, SIGTERM, SIGHUP and
//!   SIGQUIT sent to `sluice ci` are passed on to COMMAND, and the tear-down still runs.

use crate::cli::client::Client;
use crate::config::Config;
use crate::config::personal::{CONTROLLER_LOCK, STATE_DIR_VAR};
use crate::proto::{JobFilter, Request, Response};
use nix::sys::signal::{SigSet, Signal};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str = "Usage: sluice ci [--] COMMAND [ARGS...]\n\
Runs COMMAND with a private controller whose state lives in a temporary directory\n\
(exported to COMMAND as SLUICE_STATE_DIR); when COMMAND exits, its jobs are cancelled,\n\
the controller stopped and the directory removed. Exits with COMMAND's status.";

/// `sluice ci …` (`args[0]` is `ci`). Exit status: COMMAND's, else 1 (no controller) or
/// 2 (usage).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let mut rest: Vec<OsString> = args.into_iter().skip(1).collect();
    match rest.first().and_then(|a| a.to_str()) {
        Some("-h" | "--help" | "--usage") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some("--") => {
            rest.remove(0);
        }
        Some(o) if o.starts_with('-') => {
            eprintln!("sluice ci: unrecognized option '{o}'\n{USAGE}");
            return ExitCode::from(2);
        }
        _ => {}
    }
    if rest.is_empty() {
        eprintln!("sluice ci: no command given\n{USAGE}");
        return ExitCode::from(2);
    }
    let tmp = match temp_dir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice ci: cannot create a temporary directory: {e}");
            return ExitCode::from(1);
        }
    };
    let code = with_controller(&tmp, &rest);
    if let Err(e) = std::fs::remove_dir_all(&tmp) {
        eprintln!("sluice ci: cannot remove {}: {e}", tmp.display());
    }
    ExitCode::from(code)
}

/// A new private directory `$TMPDIR/sluice-ci.XXXXXX` (mode 0700).
fn temp_dir() -> nix::Result<PathBuf> {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    nix::unistd::mkdtemp(&base.join("sluice-ci.XXXXXX"))
}

/// Starts the controller of `<tmp>/state`, runs `cmd`, tears down; COMMAND's status.
fn with_controller(tmp: &Path, cmd: &[OsString]) -> u8 {
    let state = tmp.join("state");
    let cfg = Config::personal_at(state.clone());
    if let Err(e) = Client::start_controller(&cfg) {
        match e.hint() {
            Some(h) => eprintln!("{h}"),
            None => eprintln!("sluice ci: {e}"),
        }
        teardown(&cfg);
        return 1;
    }
    // Blocked here (this thread is the only one) and taken by `sigwait` in the
    // forwarding thread; the child starts with an empty mask (std resets it).
    let mut sigs = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        sigs.add(s);
    }
    let _ = sigs.thread_block();
    let child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .env(STATE_DIR_VAR, &state)
        .spawn();
    let code = match child {
        Ok(c) => wait_forwarding(c, sigs),
        Err(e) => {
            eprintln!(
                "sluice ci: cannot run {}: {e}",
                Path::new(&cmd[0]).display()
            );
            127
        }
    };
    teardown(&cfg);
    code
}

/// Waits for `child`, passing on the signals of `sigs` meanwhile; its exit status as a
/// shell reports it.
fn wait_forwarding(mut child: std::process::Child, sigs: SigSet) -> u8 {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    use std::sync::{Arc, Mutex};
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Set (under the lock) before the child is reaped: a signal is never sent to its pid
    // once that pid may belong to another process.
    let reaped = Arc::new(Mutex::new(false));
    let flag = reaped.clone();
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(sig) = sigs.wait() {
                let done = flag.lock().unwrap_or_else(|e| e.into_inner());
                if *done {
                    return;
                }
                let _ = nix::sys::signal::kill(pid, sig);
            }
        });
    // Exited, not yet reaped: its pid stays reserved.
    while let Err(nix::errno::Errno::EINTR) =
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
    {}
    *reaped.lock().unwrap_or_else(|e| e.into_inner()) = true;
    match child.wait() {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            match (st.code(), st.signal()) {
                (Some(c), _) => c as u8,
                (None, Some(s)) => 128u8.wrapping_add(s as u8),
                (None, None) => 1,
            }
        }
        Err(e) => {
            eprintln!("sluice ci: cannot wait for the command: {e}");
            1
        }
    }
}

/// Cancels every job of the controller of `cfg` and waits until none is active (at most
/// KillWait + 60 s), stops the controller and waits for it to exit (at most 30 s), then
/// removes its cgroups with anything still in them. Problems are reported, not fatal:
/// the rest of the tear-down still runs.
fn teardown(cfg: &Config) {
    if let Ok(mut c) = Client::connect_existing(cfg) {
        let all = JobFilter {
            active_only: true,
            ..JobFilter::default()
        };
        let _ = c.request(&Request::Cancel {
            filter: all.clone(),
            signal: None,
            batch_only: false,
            full: false,
        });
        let end = Instant::now() + Duration::from_secs(u64::from(cfg.kill_wait) + 60);
        loop {
            match c.request_jobs(&all) {
                Ok(Response::Jobs { jobs, .. }) if !jobs.is_empty() => {}
                _ => break,
            }
            if Instant::now() > end {
                eprintln!("sluice ci: jobs still active after cancelling them; stopping anyway");
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.request(&Request::Shutdown);
    }
    let lock = cfg.state_dir.join(CONTROLLER_LOCK);
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let free = match std::fs::File::open(&lock) {
            Ok(f) => {
                nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
            }
            Err(_) => true,
        };
        if free {
            break;
        }
        if Instant::now() > end {
            eprintln!("sluice ci: the controller is still running after 30 s");
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // The cgroup root is this controller's alone (named by its id).
    if let Err(e) = crate::stepd::isolate::purge(&cfg.cgroup) {
        eprintln!("sluice ci: cannot remove the controller's cgroups: {e}");
    }
}
