//! The controller (cf. slurmctld + slurmdbd).

use std::ffi::OsString;
use std::process::ExitCode;

/// `sluice controller [--foreground] [--stop]`.
pub fn cli_main(_args: Vec<OsString>) -> ExitCode {
    ExitCode::from(1)
}
