//! Timestamps as Slurm front-ends print them, in the local time zone
//! (`2026-11-29T14:54:54`, `Sun Nov 29 14:56:08 2026`).

use chrono::{Local, TimeZone};

/// `YYYY-MM-DDTHH:MM:SS` in local time, as scontrol/sacct/squeue print times.
/// Out-of-range epochs print as `Unknown`.
pub fn fmt_ts(epoch: i64) -> String {
    match Local.timestamp_opt(epoch, 0).single() {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S").to_string(),
        None => "Unknown".into(),
    }
}

/// `Sun Nov 29 14:56:08 2026`, the first line of `squeue -l` and `sinfo -l`.
pub fn fmt_banner(epoch: i64) -> String {
    match Local.timestamp_opt(epoch, 0).single() {
        Some(t) => t.format("%a %b %e %H:%M:%S %Y").to_string(),
        None => "Unknown".into(),
    }
}

/// Current time as epoch seconds (for the edges: front-ends, the controller's loop, the
/// agent; the core never reads the clock).
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}
