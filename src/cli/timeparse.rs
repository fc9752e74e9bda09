//! Slurm's time parser for the front-ends: the parser itself lives in
//! [`crate::jobspec::timeparse`] (shared with `sbatch --begin`); this adds the reading
//! of the clock and the machine's time zone.

pub use crate::jobspec::timeparse::{TimeParseError, midnight_today, parse_time};

/// `parse_time` in the machine's local time zone at the current time.
pub fn parse_time_local(s: &str, past: bool) -> Result<i64, TimeParseError> {
    parse_time(s, super::timefmt::now(), &chrono::Local, past)
}
