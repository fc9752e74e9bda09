//! The step supervisor (cf. slurmstepd).

pub mod env;

use std::ffi::OsString;
use std::process::ExitCode;

/// `sluice stepd <spool-dir>`.
pub fn cli_main(_args: Vec<OsString>) -> ExitCode {
    ExitCode::from(1)
}
