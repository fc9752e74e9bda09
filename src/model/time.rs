//! Durations and time limits in Slurm's textual forms (cf. src/common/parse_time.c,
//! `secs2time_str` and `mins2time_str`). Pure: epoch seconds in, text out.

/// Formats a duration in seconds the way squeue's `%M` and `%l` do: `M:SS`, `H:MM:SS`,
/// `D-HH:MM:SS` (no zero padding of the leading field).
pub fn fmt_squeue_duration(secs: u64) -> String {
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// Formats a duration in seconds as sacct's `Elapsed` and scontrol's `RunTime` do:
/// `HH:MM:SS`, or `D-HH:MM:SS` from one day up.
pub fn fmt_hms(secs: u64) -> String {
    let (d, h, m, s) = split(secs);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn split(secs: u64) -> (u64, u64, u64, u64) {
    (
        secs / 86400,
        (secs % 86400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    )
}

/// Seconds in a duration written as Slurm accepts it: `M`, `M:S`, `H:M:S`, `D-H`,
/// `D-H:M` or `D-H:M:S`, each field a plain number of at most 9 digits (surrounding
/// whitespace ignored). `None` for anything else, including signs and empty fields;
/// words such as `UNLIMITED` are the caller's. Cf. src/common/parse_time.c
/// `time_str2secs`.
pub fn parse_duration_secs(s: &str) -> Option<u64> {
    let num = |x: &str| -> Option<u64> {
        if x.is_empty() || x.len() > 9 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        x.parse().ok()
    };
    let t = s.trim();
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    Some(match (days, parts.as_slice()) {
        (None, [m]) => num(m)? * 60,
        (None, [m, s]) => num(m)? * 60 + num(s)?,
        (None, [h, m, s]) => num(h)? * 3600 + num(m)? * 60 + num(s)?,
        (Some(d), [h]) => d * 86400 + num(h)? * 3600,
        (Some(d), [h, m]) => d * 86400 + num(h)? * 3600 + num(m)? * 60,
        (Some(d), [h, m, s]) => d * 86400 + num(h)? * 3600 + num(m)? * 60 + num(s)?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_durations() {
        assert_eq!(fmt_squeue_duration(0), "0:00");
        assert_eq!(fmt_squeue_duration(30), "0:30");
        assert_eq!(fmt_squeue_duration(300), "5:00");
        assert_eq!(fmt_squeue_duration(3600), "1:00:00");
        assert_eq!(fmt_squeue_duration(86400 + 61), "1-00:01:01");
    }

    #[test]
    fn hms_durations() {
        assert_eq!(fmt_hms(0), "00:00:00");
        assert_eq!(fmt_hms(3600), "01:00:00");
        assert_eq!(fmt_hms(2 * 86400 + 3), "2-00:00:03");
    }
}
