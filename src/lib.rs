//! sluice: a Slurm-compatible workload manager in one binary.
//!
//! Layering (STYLE.md "Dependency direction"), lowest first: `model`, `common`,
//! `failpoint`, `logsink` ← `jobspec`, `gpuprobe` ← `config` ← `sched`, `proto` ←
//! `transport` ← the roles `ctld`, `sim`, `agent`, `stepd` and the front-ends `cli`, which
//! meet only through `proto` (`cli/mod.rs` calls each role's `cli_main`). `sched` is
//! pure and names only `model` and `config`. `tests/it/layering.rs` holds this table and
//! fails on a module naming a higher or sibling one; its `KNOWN` list is what is left.

/// Writes `format_args!(...)` to `stream`, ignoring a failed write: Slurm's commands
/// ignore a stdout or stderr they cannot write (`>/dev/full`), where std's print
/// macros panic (exit 101). The four print macros below are built on it; being
/// defined here, before the modules, they take the place of std's throughout the
/// crate. (A closed pipe still ends a front-end by SIGPIPE, as for C programs.)
macro_rules! write_or_ignore {
    ($stream:expr, $($arg:tt)*) => {{
        let _ = std::io::Write::write_fmt(&mut $stream, format_args!($($arg)*));
    }};
}

/// std's `eprintln!`, ignoring a failed write (see `write_or_ignore!`).
macro_rules! eprintln {
    () => { write_or_ignore!(std::io::stderr(), "\n") };
    ($($arg:tt)*) => {
        write_or_ignore!(std::io::stderr().lock(), "{}\n", format_args!($($arg)*))
    };
}

/// std's `eprint!`, ignoring a failed write (see `write_or_ignore!`).
macro_rules! eprint {
    ($($arg:tt)*) => { write_or_ignore!(std::io::stderr(), $($arg)*) };
}

/// std's `println!`, ignoring a failed write (see `write_or_ignore!`).
macro_rules! println {
    () => { write_or_ignore!(std::io::stdout(), "\n") };
    ($($arg:tt)*) => {
        write_or_ignore!(std::io::stdout().lock(), "{}\n", format_args!($($arg)*))
    };
}

/// std's `print!`, ignoring a failed write (see `write_or_ignore!`).
macro_rules! print {
    ($($arg:tt)*) => { write_or_ignore!(std::io::stdout(), $($arg)*) };
}

pub mod agent;
pub mod cli;
pub mod common;
pub mod config;
pub mod ctld;
pub mod failpoint;
pub mod gpuprobe;
pub mod jobspec;
pub mod logsink;
pub mod model;
pub mod proto;
pub mod sched;
pub mod sim;
pub mod stepd;
pub mod transport;

#[cfg(test)]
mod fuzz;
