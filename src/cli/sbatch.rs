//! `sbatch` (stub: being written).

use std::ffi::OsString;
use std::process::ExitCode;

/// Runs `sbatch` with its full argv (argv[0] included).
pub fn run(_args: Vec<OsString>) -> ExitCode {
    eprintln!("sbatch: not implemented yet");
    ExitCode::from(1)
}
