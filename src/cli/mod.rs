//! Front-ends: one module per Slurm command, dispatched on argv[0] (or `sluice <cmd>`).
//! Front-ends parse options, make one or two requests through [`client`], and print
//! Slurm-shaped text; they hold no scheduling logic.

pub mod ci;
pub mod client;
pub mod config_cmd;
pub mod container;
pub mod docs;
pub mod doctor;
pub mod format;
pub mod getopt;
pub mod gpu_topo;
pub mod help;
pub mod jobfmt;
pub mod jobid;
pub mod jobjson;
pub mod keygen;
pub mod multiprog;
pub mod sacct;
pub mod sacctjson;
pub mod sacctmgr;
pub mod salloc;
pub mod sbatch;
pub mod scancel;
pub mod scontrol;
pub mod scontrol_listpids;
pub mod scontrol_resv;
pub mod scontrol_top;
pub mod sdiag;
pub mod seff;
pub mod sinfo;
pub mod slurmjson;
pub mod sprio;
pub mod squeue;
pub mod squeue_steps;
pub mod sreport;
pub mod srun;
pub mod sshare;
pub mod sstat;
pub mod stepio;
pub use crate::common::timefmt;
pub mod timeparse;
pub mod usagefmt;

use std::ffi::OsString;
use std::process::ExitCode;

/// The commands `install.sh` links to the binary, with the module that serves each.
pub const LINKED_COMMANDS: &[&str] = &[
    "sbatch", "srun", "salloc", "squeue", "scancel", "sinfo", "scontrol", "sacct", "sstat",
    "sprio", "sdiag", "sshare", "sacctmgr", "sreport", "seff",
];

/// Entry point for every role: picks the command from argv[0], or from argv[1] when
/// invoked as `sluice`.
pub fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = args
        .first()
        .and_then(|a| {
            std::path::Path::new(a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "sluice".into());
    let cmd = if argv0 == "sluice" || argv0.starts_with("sluice-") {
        if args.len() < 2 {
            print_usage();
            return ExitCode::from(2);
        }
        args.remove(0);
        args[0].to_string_lossy().into_owned()
    } else {
        argv0
    };
    dispatch(&cmd, args)
}

/// Re-opens any of stdin, stdout and stderr that is closed on `/dev/null`, so that a
/// file opened later cannot take its number (what Rust's runtime set-up does, which
/// the binary skips; see `main.rs`). Nothing to report when it fails.
pub fn open_standard_fds() {
    use nix::fcntl::{FcntlArg, OFlag, fcntl, open};
    for fd in 0..3 {
        if fcntl(fd, FcntlArg::F_GETFD) == Err(nix::errno::Errno::EBADF) {
            // The lowest free number is `fd` itself; it stays open for the process.
            let _ = open("/dev/null", OFlag::O_RDWR, nix::sys::stat::Mode::empty());
        }
    }
}

/// The exit status `code` stands for (`ExitCode` keeps its number private; it is one
/// of 0–255 and compares equal to the code made from it).
pub fn exit_status(code: ExitCode) -> i32 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .map_or(1, i32::from)
}

/// Front-ends die quietly on a closed pipe (`squeue | head -1`), as C programs do;
/// daemons ignore SIGPIPE (EPIPE returned instead), since a client that hangs up must
/// not kill them. Children get SIGPIPE back at its default (std's `Command` resets it).
#[allow(unsafe_code)]
fn set_sigpipe(daemon: bool) {
    use nix::sys::signal::{SigHandler, Signal, signal};
    let handler = if daemon {
        SigHandler::SigIgn
    } else {
        SigHandler::SigDfl
    };
    // SAFETY: called once at start-up on the main thread before any other thread exists;
    // SIG_DFL and SIG_IGN install no Rust handler.
    unsafe {
        let _ = signal(Signal::SIGPIPE, handler);
    }
}

fn dispatch(cmd: &str, args: Vec<OsString>) -> ExitCode {
    set_sigpipe(matches!(cmd, "controller" | "stepd" | "agent"));
    match cmd {
        "sbatch" => sbatch::run(args),
        "squeue" => squeue::run(args),
        "sinfo" => sinfo::run(args),
        "scancel" => scancel::run(args),
        "scontrol" => scontrol::run(args),
        "sacct" => sacct::run(args),
        "sprio" => sprio::run(args),
        "sdiag" => sdiag::run(args),
        "sshare" => sshare::run(args),
        "sacctmgr" => sacctmgr::run(args),
        "sreport" => sreport::run(args),
        "controller" => crate::ctld::cli_main(args),
        "stepd" => crate::stepd::cli_main(args),
        "simulate" => crate::sim::cli_main(args),
        "agent" => crate::agent::stdio::cli_main(args),
        "keygen" => keygen::run(args),
        "doctor" => doctor::run(args),
        "ci" => ci::run(args),
        "config" => config_cmd::run(args),
        "srun" => srun::run(args),
        "salloc" => salloc::run(args),
        "sstat" => sstat::run(args),
        "seff" => seff::run(args),
        "--version" | "-V" | "version" => {
            println!("sluice {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        "--help" | "-h" | "help" | "--usage" => {
            print!("{}", help_text());
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("sluice: unknown command '{other}'");
            print_usage();
            ExitCode::from(2)
        }
    }
}

/// What each Slurm command does (one line each, in [`LINKED_COMMANDS`]'s order), for
/// `sluice --help`.
pub const COMMAND_HELP: &[(&str, &str)] = &[
    ("sbatch", "submit a batch script"),
    (
        "srun",
        "run a parallel job step (in a new allocation or an existing one)",
    ),
    ("salloc", "obtain an allocation and run a command in it"),
    ("squeue", "view the queue of jobs and steps"),
    ("scancel", "cancel or signal jobs and steps"),
    ("sinfo", "view nodes and partitions"),
    (
        "scontrol",
        "view and change jobs, nodes, partitions, reservations, the config",
    ),
    ("sacct", "accounting records of jobs and steps"),
    ("sstat", "live usage of running steps"),
    ("sprio", "priority factors of pending jobs"),
    ("sdiag", "scheduler statistics"),
    ("sshare", "the fair-share tree"),
    ("sacctmgr", "accounts, users, QOS and associations"),
    ("sreport", "usage reports"),
    ("seff", "efficiency of a finished job"),
];

/// sluice's own roles and tools, for `sluice --help`.
pub const ROLE_HELP: &[(&str, &str)] = &[
    (
        "controller",
        "start (or --stop) the controller, which schedules and keeps state",
    ),
    (
        "agent",
        "a node's agent, started by the controller (locally or over ssh)",
    ),
    ("stepd", "a job step's supervisor, started by the agent"),
    (
        "simulate",
        "replay a workload trace or scenario through the scheduler",
    ),
    (
        "keygen",
        "create the controller's SSH key pair for remote nodes",
    ),
    (
        "doctor",
        "check what this user's controller gets (cgroups, GPUs, nodes)",
    ),
    (
        "ci",
        "run a command with a private, throw-away controller (CI pipelines)",
    ),
    (
        "config",
        "import a Slurm configuration (slurm.conf, …) or export this one as Slurm's",
    ),
    ("version", "print sluice's version"),
    ("help", "show this help message"),
];

/// `sluice --help`: how to call it, the Slurm commands and the roles.
pub fn help_text() -> String {
    let mut out = String::from(
        "Usage: sluice <command> [args...]\n\
         \x20      <slurm-command> [args...]   (through the symlinks install.sh makes)\n\n\
         Slurm commands (each takes --help and --usage):\n",
    );
    for (c, what) in COMMAND_HELP {
        out.push_str(&help::line_in(c, what, 14));
    }
    out.push_str("\nRoles and tools:\n");
    for (c, what) in ROLE_HELP {
        out.push_str(&help::line_in(c, what, 14));
    }
    out
}

/// The short form of [`help_text`], for a missing or unknown command (on stderr).
fn print_usage() {
    eprintln!(
        "usage: sluice <command> [args...]\n\ncommands: {} controller agent keygen doctor ci config stepd simulate\n\
         Each Slurm command also works under its own name through a symlink (see install.sh).\n\
         Try \"sluice --help\" for more information",
        LINKED_COMMANDS.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_linked_command_is_described_once_in_order() {
        let described: Vec<&str> = COMMAND_HELP.iter().map(|(c, _)| *c).collect();
        assert_eq!(described, LINKED_COMMANDS);
        let t = help_text();
        for c in LINKED_COMMANDS
            .iter()
            .chain(ROLE_HELP.iter().map(|(c, _)| c))
        {
            assert!(t.contains(&format!("\n  {c} ")), "{c} missing:\n{t}");
        }
    }
}
