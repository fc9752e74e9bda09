//! Time-limit and memory units as sbatch/srun/salloc accept them
//! (cf. src/common/parse_time.c `time_str2mins`, slurm_opt.c `str_to_mbytes`).

use crate::model::TimeLimit;

/// A value that is not a valid time or memory specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} specification '{value}'")]
pub struct UnitError {
    pub what: &'static str,
    pub value: String,
}

/// Parses a time limit: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, or
/// `INFINITE`/`UNLIMITED`/`-1`. Seconds round up to whole minutes; `0` means unlimited
/// (as Slurm treats `--time=0`).
///
/// Errors: anything else, including negative numbers and empty fields.
pub fn parse_time_limit(s: &str) -> Result<TimeLimit, UnitError> {
    let err = || UnitError {
        what: "time",
        value: s.to_string(),
    };
    let t = s.trim();
    if t.eq_ignore_ascii_case("infinite") || t.eq_ignore_ascii_case("unlimited") || t == "-1" {
        return Ok(TimeLimit::Unlimited);
    }
    let secs = crate::model::time::parse_duration_secs(t).ok_or_else(err)?;
    if secs == 0 {
        return Ok(TimeLimit::Unlimited);
    }
    let mins = secs.div_ceil(60);
    u32::try_from(mins)
        .ok()
        .filter(|m| *m < u32::MAX)
        .map(TimeLimit::Minutes)
        .ok_or_else(err)
}

/// Parses a memory size into MiB: a number with an optional unit `K`, `M`, `G`, `T`
/// (also `KB`, `MB`, `GB`, `TB`, any case); no unit means MiB. Kilobytes round up.
///
/// Errors: empty, non-numeric, negative or overflowing values and unknown units.
pub fn parse_mem_mb(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "memory",
        value: s.to_string(),
    };
    let t = s.trim();
    let digits = t.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 15 {
        return Err(err());
    }
    let n: u64 = t[..digits].parse().map_err(|_| err())?;
    let unit = t[digits..].to_ascii_uppercase();
    let mb = match unit.as_str() {
        "" | "M" | "MB" => Some(n),
        "K" | "KB" => Some(n.div_ceil(1024)),
        "G" | "GB" => n.checked_mul(1024),
        "T" | "TB" => n.checked_mul(1024 * 1024),
        _ => None,
    };
    mb.ok_or_else(err)
}

/// Formats MiB as Slurm prints memory (`400M`, `1G`, `62.50G`): whole units when exact,
/// else two decimals of the largest unit at or below the value.
pub fn fmt_mem_mb(mb: u64) -> String {
    if mb >= 1024 * 1024 && mb.is_multiple_of(1024 * 1024) {
        format!("{}T", mb / (1024 * 1024))
    } else if mb >= 1024 * 1024 {
        format!("{:.2}T", mb as f64 / (1024.0 * 1024.0))
    } else if mb >= 1024 && mb.is_multiple_of(1024) {
        format!("{}G", mb / 1024)
    } else if mb >= 1024 {
        format!("{:.2}G", mb as f64 / 1024.0)
    } else {
        format!("{mb}M")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_formats() {
        let m = |x| Ok(TimeLimit::Minutes(x));
        assert_eq!(parse_time_limit("5"), m(5));
        assert_eq!(parse_time_limit("1:30"), m(2));
        assert_eq!(parse_time_limit("1:00:00"), m(60));
        assert_eq!(parse_time_limit("30:00:00"), m(1800));
        assert_eq!(parse_time_limit("1-0"), m(1440));
        assert_eq!(parse_time_limit("1-2:30"), m(1440 + 150));
        assert_eq!(parse_time_limit("2-00:00:01"), m(2 * 1440 + 1));
        assert_eq!(parse_time_limit("0"), Ok(TimeLimit::Unlimited));
        assert_eq!(parse_time_limit("UNLIMITED"), Ok(TimeLimit::Unlimited));
        for bad in ["abc", "", "1:2:3:4", "-5", "1-", ":5", "1.5", "99999999999"] {
            assert!(parse_time_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_mem_mb("100"), Ok(100));
        assert_eq!(parse_mem_mb("1G"), Ok(1024));
        assert_eq!(parse_mem_mb("2gb"), Ok(2048));
        assert_eq!(parse_mem_mb("512K"), Ok(1));
        assert_eq!(parse_mem_mb("1T"), Ok(1024 * 1024));
        assert_eq!(parse_mem_mb("400MB"), Ok(400));
        for bad in ["", "G", "-1G", "1X", "1.5G", "99999999999999999999"] {
            assert!(parse_mem_mb(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_text() {
        assert_eq!(fmt_mem_mb(400), "400M");
        assert_eq!(fmt_mem_mb(1024), "1G");
        assert_eq!(fmt_mem_mb(64000), "62.50G");
    }
}
