//! `scancel` (stub: being written).

use std::ffi::OsString;
use std::process::ExitCode;

/// Runs `scancel` with its full argv (argv[0] included).
pub fn run(_args: Vec<OsString>) -> ExitCode {
    eprintln!("scancel: not implemented yet");
    ExitCode::from(1)
}
