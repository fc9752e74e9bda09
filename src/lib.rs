//! sluice: a Slurm-compatible workload manager in one binary.
//!
//! Layering (STYLE.md "Dependency direction"): `model` ← `config`, `jobspec` ← `proto` ←
//! `transport`; `sched` is pure and imports only `model` and `config`; the roles `ctld`,
//! `agent`, `stepd` meet only through `proto`; `cli` sits on top.

/// Prints to stderr like std's `eprintln!`, but a write that fails is ignored, as
/// Slurm's commands ignore a stderr they cannot write (`2>/dev/full`): std's macro
/// panics (exit 101) instead. Being defined here, before the modules, it takes the
/// place of std's throughout the crate.
macro_rules! eprintln {
    () => {{
        let _ = std::io::Write::write_all(&mut std::io::stderr(), b"\n");
    }};
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr().lock(),
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// Prints to stderr like std's `eprint!`, ignoring a failed write (see `eprintln!`).
macro_rules! eprint {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!($($arg)*));
    }};
}

/// Prints to stdout like std's `println!`, ignoring a failed write (`>/dev/full`), as
/// Slurm's commands do; see `eprintln!`. (A closed pipe still ends a front-end by
/// SIGPIPE, as for C programs.)
macro_rules! println {
    () => {{
        let _ = std::io::Write::write_all(&mut std::io::stdout(), b"\n");
    }};
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(
            &mut std::io::stdout().lock(),
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// Prints to stdout like std's `print!`, ignoring a failed write (see `println!`).
macro_rules! print {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(&mut std::io::stdout(), format_args!($($arg)*));
    }};
}

pub mod agent;
pub mod cli;
pub mod config;
pub mod ctld;
pub mod jobspec;
pub mod logsink;
pub mod model;
pub mod proto;
pub mod sched;
pub mod sim;
pub mod stepd;
pub mod transport;
