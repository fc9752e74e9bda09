//! Absolute times as Slurm's front-ends accept them (`sacct -S/-E`, `sreport`,
//! `scontrol update StartTime=`, `sbatch --begin/--deadline`): the one parser, the twin
//! of src/common/parse_time.c `parse_time`.
//!
//! Grammar: `now[{+|-}N[seconds|minutes|hours|days|weeks]]`, `today`, `tomorrow`,
//! `midnight`, `noon`, `elevenses`, `fika`, `teatime`, `HH:MM[:SS] [AM|PM]`,
//! `MMDD[YY]`, `MM/DD[/YY]`, `MM.DD[.YY]`, `YYYY-MM-DD`, a date and a time together
//! (`MM/DD-HH:MM`, `YYYY-MM-DDTHH:MM:SS`), and `uts<epoch>`. Blanks, `-` and `T`
//! between the parts are skipped.
//!
//! Pure: the caller passes `now` and the time zone, so tests never depend on the
//! machine's clock or zone. A time of day without a date means today when `past` is
//! set (sacct) and otherwise the next such time; a date without a year means this
//! year, or the year before when `past` is set and the month lies ahead.

use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike};
use std::fmt;

/// A time specification Slurm would reject; `Display` is Slurm's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeParseError {
    /// Byte offset where parsing gave up.
    pub pos: usize,
    /// The text as given.
    pub input: String,
}

impl fmt::Display for TimeParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Invalid time specification (pos={}): {}",
            self.pos, self.input
        )
    }
}

impl std::error::Error for TimeParseError {}

/// Parses `s` relative to `now` (epoch seconds) in time zone `tz` into epoch seconds.
/// An empty specification yields 0, as Slurm's parser does.
///
/// Errors: unknown words, out-of-range fields, trailing garbage, or a local time that
/// does not exist in `tz`.
pub fn parse_time<Tz: TimeZone>(
    s: &str,
    now: i64,
    tz: &Tz,
    past: bool,
) -> Result<i64, TimeParseError> {
    let fail = |pos: usize| TimeParseError {
        pos,
        input: s.to_string(),
    };
    if starts_with_ci(s, "uts") {
        // The prefix is ASCII, so byte 3 starts a character.
        let rest = &s[3..];
        return match rest.parse::<i64>() {
            Ok(v) if v >= 1_000_000 => Ok(v),
            _ => Err(fail(3)),
        };
    }
    let local = |t: i64| -> Result<NaiveDateTime, TimeParseError> {
        tz.timestamp_opt(t, 0)
            .single()
            .map(|d| d.naive_local())
            .ok_or_else(|| fail(0))
    };
    let now_l = local(now)?;
    let b = s.as_bytes();
    let mut date: Option<DateParts> = None;
    let mut tod: Option<(u32, u32, u32)> = None;
    let mut pos = 0;
    while pos < b.len() {
        let c = b[pos];
        if c == b' ' || c == b'\t' || c == b'-' || c == b'T' {
            pos += 1;
            continue;
        }
        let rest = &s[pos..];
        let word = |w: &str| starts_with_ci(rest, w);
        if word("today") {
            date = Some((Some(now_l.year()), now_l.month(), now_l.day()));
            pos += 5;
        } else if word("tomorrow") {
            let t = local(now + 86400)?;
            date = Some((Some(t.year()), t.month(), t.day()));
            pos += 8;
        } else if let Some((w, h)) = [
            ("midnight", 0),
            ("noon", 12),
            ("elevenses", 11),
            ("fika", 15),
            ("teatime", 16),
        ]
        .into_iter()
        .find(|(w, _)| word(w))
        {
            tod = Some((h, 0, 0));
            pos += w.len();
        } else if word("now") {
            let (delta, end) = parse_now_delta(b, pos + 3).map_err(fail)?;
            let t = local(now + delta)?;
            date = Some((Some(t.year()), t.month(), t.day()));
            tod = Some((t.hour(), t.minute(), t.second()));
            pos = end;
        } else if c.is_ascii_digit() {
            let is_time = b.get(pos + 1) == Some(&b':') || b.get(pos + 2) == Some(&b':');
            if is_time {
                let (t, end) = parse_tod(b, pos).map_err(fail)?;
                tod = Some(t);
                pos = end;
            } else {
                let (d, end) = parse_date(b, pos).map_err(fail)?;
                date = Some(d);
                pos = end;
            }
        } else {
            return Err(fail(pos));
        }
    }
    let (hour, minute, second) = match (tod, date) {
        (None, None) => return Ok(0),
        (None, Some(_)) => (0, 0, 0),
        (Some(t), _) => t,
    };
    let (year, month, day) = match date {
        Some(d) => d,
        None => {
            // A bare time of day: today when looking back or still ahead, else tomorrow.
            let ahead = (hour, minute) > (now_l.hour(), now_l.minute());
            let d = if past || ahead {
                now_l
            } else {
                local(now + 86400)?
            };
            (Some(d.year()), d.month(), d.day())
        }
    };
    let year = match year {
        Some(y) => y,
        None if past => {
            if month > now_l.month() {
                now_l.year() - 1
            } else {
                now_l.year()
            }
        }
        None => {
            let ahead = (month, day, hour, minute)
                > (now_l.month(), now_l.day(), now_l.hour(), now_l.minute());
            if ahead {
                now_l.year()
            } else {
                now_l.year() + 1
            }
        }
    };
    let naive = NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|d| d.and_hms_opt(hour, minute, second))
        .ok_or_else(|| fail(s.len()))?;
    tz.from_local_datetime(&naive)
        .earliest()
        .map(|d| d.timestamp())
        .ok_or_else(|| fail(s.len()))
}

/// Whether `s` starts with the ASCII word `w`, in any case. Compares bytes, so that a
/// multi-byte character in `s` is simply no match (slicing `s` at `w.len()` could
/// split it).
fn starts_with_ci(s: &str, w: &str) -> bool {
    s.as_bytes()
        .get(..w.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(w.as_bytes()))
}

/// Reads up to `max` digits at `pos`; returns the value and the number of digits read.
fn digits(b: &[u8], pos: usize, max: usize) -> (u32, usize) {
    let mut v = 0u32;
    let mut n = 0;
    while n < max && pos + n < b.len() && b[pos + n].is_ascii_digit() {
        v = v * 10 + u32::from(b[pos + n] - b'0');
        n += 1;
    }
    (v, n)
}

/// After `now`: blanks, then optionally `+N[unit]` or `-N[unit]`, then the end.
fn parse_now_delta(b: &[u8], mut pos: usize) -> Result<(i64, usize), usize> {
    while pos < b.len() && (b[pos] == b' ' || b[pos] == b'\t') {
        pos += 1;
    }
    if pos == b.len() {
        return Ok((0, pos));
    }
    let sign = match b[pos] {
        b'+' => 1,
        b'-' => -1,
        _ => return Err(pos),
    };
    pos += 1;
    let start = pos;
    let mut n: i64 = 0;
    while pos < b.len() && b[pos].is_ascii_digit() {
        n = n
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(b[pos] - b'0')))
            .ok_or(pos)?;
        pos += 1;
    }
    if pos == start {
        return Err(pos);
    }
    while pos < b.len() && b[pos] == b' ' {
        pos += 1;
    }
    let unit_start = pos;
    while pos < b.len() && b[pos].is_ascii_alphabetic() {
        pos += 1;
    }
    let unit = String::from_utf8_lossy(&b[unit_start..pos]).to_ascii_lowercase();
    let mult = match unit.as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86400,
        "w" | "week" | "weeks" => 7 * 86400,
        _ => return Err(unit_start),
    };
    while pos < b.len() && b[pos] == b' ' {
        pos += 1;
    }
    if pos != b.len() {
        return Err(pos);
    }
    let secs = n.checked_mul(mult).ok_or(unit_start)?;
    Ok((sign * secs, pos))
}

/// `HH:MM[:SS] [AM|PM]`.
fn parse_tod(b: &[u8], pos: usize) -> Result<((u32, u32, u32), usize), usize> {
    let (mut h, n) = digits(b, pos, 2);
    let mut p = pos + n;
    if b.get(p) != Some(&b':') {
        return Err(p);
    }
    p += 1;
    let (m, n) = digits(b, p, 2);
    if n != 2 || m > 59 {
        return Err(p);
    }
    p += 2;
    let mut sec = 0;
    if b.get(p) == Some(&b':') {
        let (v, n) = digits(b, p + 1, 2);
        if n != 2 || v > 59 {
            return Err(p + 1);
        }
        sec = v;
        p += 3;
    }
    let mut q = p;
    while q < b.len() && b[q] == b' ' {
        q += 1;
    }
    let ampm = b.get(q..q + 2).map(|x| x.to_ascii_uppercase());
    match ampm.as_deref() {
        Some(b"AM") | Some(b"PM") => {
            if h == 0 || h > 12 {
                return Err(q);
            }
            let pm = ampm.as_deref() == Some(b"PM");
            h = match (pm, h) {
                (false, 12) => 0,
                (true, 12) => 12,
                (true, x) => x + 12,
                (false, x) => x,
            };
            p = q + 2;
        }
        _ => {
            if h > 23 {
                return Err(pos);
            }
        }
    }
    Ok(((h, m, sec), p))
}

/// A date as written: year (when given), month, day.
type DateParts = (Option<i32>, u32, u32);

/// `YYYY-MM-DD`, or `MM[/.]DD[[/.]YY]` (also run together: `MMDDYY`).
fn parse_date(b: &[u8], pos: usize) -> Result<(DateParts, usize), usize> {
    let (y, n) = digits(b, pos, 4);
    if n == 4 && b.get(pos + 4) == Some(&b'-') {
        let (mo, n1) = digits(b, pos + 5, 2);
        if n1 == 0 || !(1..=12).contains(&mo) || b.get(pos + 5 + n1) != Some(&b'-') {
            return Err(pos + 5);
        }
        let dp = pos + 6 + n1;
        let (d, n2) = digits(b, dp, 2);
        if n2 == 0 || !(1..=31).contains(&d) {
            return Err(dp);
        }
        return Ok(((Some(y as i32), mo, d), dp + n2));
    }
    let (mo, n1) = digits(b, pos, 2);
    if !(1..=12).contains(&mo) {
        return Err(pos);
    }
    let mut p = pos + n1;
    if matches!(b.get(p), Some(b'/') | Some(b'.')) {
        p += 1;
    }
    let (d, n2) = digits(b, p, 2);
    if n2 == 0 || !(1..=31).contains(&d) {
        return Err(p);
    }
    p += n2;
    if matches!(b.get(p), Some(b'/') | Some(b'.')) {
        p += 1;
    }
    let (yy, n3) = digits(b, p, 2);
    let year = match n3 {
        0 => None,
        2 => Some(2000 + yy as i32),
        _ => return Err(p),
    };
    Ok(((year, mo, d), p + n3))
}

/// Epoch seconds of 00:00 today in `tz` (sacct's default window start).
pub fn midnight_today<Tz: TimeZone>(now: i64, tz: &Tz) -> i64 {
    tz.timestamp_opt(now, 0)
        .single()
        .map(|d| d.naive_local().date())
        .and_then(|d| tz.from_local_datetime(&d.and_hms_opt(0, 0, 0)?).earliest())
        .map(|d| d.timestamp())
        .unwrap_or(now - now.rem_euclid(86400))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, Utc};

    // 2026-11-29T14:56:08Z, a Sunday.
    const NOW: i64 = 1_795_964_168;

    fn ts(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp()
    }

    fn p(s: &str) -> Result<i64, TimeParseError> {
        parse_time(s, NOW, &Utc, true)
    }

    #[test]
    fn non_ascii_text_is_an_error_not_a_panic() {
        // Each once panicked (a byte slice through a multi-byte character).
        for s in [
            "ÁÁÁÁ", "ÁÁÁ", "ÁÁ", "Á", "0９", "utsÁ", "uÁ", "noÁ", "todaÁ", "12:3Á", "now+1Á",
        ] {
            let e = p(s).unwrap_err();
            assert_eq!(e.input, s);
            assert!(
                e.to_string().starts_with("Invalid time specification"),
                "{e}"
            );
        }
    }

    #[test]
    fn now_and_offsets() {
        assert_eq!(ts(2026, 11, 29, 14, 56, 8), NOW);
        assert_eq!(p("now"), Ok(NOW));
        assert_eq!(p("NOW"), Ok(NOW));
        assert_eq!(p("now+30"), Ok(NOW + 30));
        assert_eq!(p("now-1hour"), Ok(NOW - 3600));
        assert_eq!(p("now-2days"), Ok(NOW - 2 * 86400));
        assert_eq!(p("now+1weeks"), Ok(NOW + 7 * 86400));
        assert_eq!(p("now-5minutes"), Ok(NOW - 300));
        assert_eq!(p("now+10sec"), Ok(NOW + 10));
        assert!(p("now+").is_err());
        assert!(p("now+3fortnights").is_err());
        assert!(p("nowish").is_err());
    }

    #[test]
    fn named_days_and_times() {
        assert_eq!(p("today"), Ok(ts(2026, 11, 29, 0, 0, 0)));
        assert_eq!(p("tomorrow"), Ok(ts(2026, 11, 30, 0, 0, 0)));
        // With `past`, a bare time of day is today.
        assert_eq!(p("midnight"), Ok(ts(2026, 11, 29, 0, 0, 0)));
        assert_eq!(p("noon"), Ok(ts(2026, 11, 29, 12, 0, 0)));
        assert_eq!(p("teatime"), Ok(ts(2026, 11, 29, 16, 0, 0)));
        // Looking forward (sbatch --begin), a passed time of day is tomorrow.
        let fwd = |s| parse_time(s, NOW, &Utc, false);
        assert_eq!(fwd("midnight"), Ok(ts(2026, 11, 30, 0, 0, 0)));
        assert_eq!(fwd("noon"), Ok(ts(2026, 11, 30, 12, 0, 0)));
        assert_eq!(fwd("16:00"), Ok(ts(2026, 11, 29, 16, 0, 0)));
    }

    #[test]
    fn clock_times() {
        assert_eq!(p("08:30"), Ok(ts(2026, 11, 29, 8, 30, 0)));
        assert_eq!(p("8:30:15"), Ok(ts(2026, 11, 29, 8, 30, 15)));
        assert_eq!(p("8:30 PM"), Ok(ts(2026, 11, 29, 20, 30, 0)));
        assert_eq!(p("12:00am"), Ok(ts(2026, 11, 29, 0, 0, 0)));
        assert!(p("25:00").is_err());
        assert!(p("13:00 PM").is_err());
        assert!(p("10:6").is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(p("1125"), Ok(ts(2026, 11, 25, 0, 0, 0)));
        assert_eq!(p("112524"), Ok(ts(2024, 11, 25, 0, 0, 0)));
        assert_eq!(p("11/25"), Ok(ts(2026, 11, 25, 0, 0, 0)));
        assert_eq!(p("11/25/25"), Ok(ts(2025, 11, 25, 0, 0, 0)));
        assert_eq!(p("11.25.25"), Ok(ts(2025, 11, 25, 0, 0, 0)));
        // Looking back, a month still ahead belongs to last year.
        assert_eq!(p("12/01"), Ok(ts(2025, 12, 1, 0, 0, 0)));
        assert_eq!(p("11/25-10:15"), Ok(ts(2026, 11, 25, 10, 15, 0)));
        assert_eq!(p("11/25/26-10:15:30"), Ok(ts(2026, 11, 25, 10, 15, 30)));
        assert_eq!(p("2026-11-01"), Ok(ts(2026, 11, 1, 0, 0, 0)));
        assert_eq!(p("2026-11-01T08:00"), Ok(ts(2026, 11, 1, 8, 0, 0)));
        assert_eq!(p("2026-11-01T08:00:05"), Ok(ts(2026, 11, 1, 8, 0, 5)));
        assert_eq!(p("1970-01-01-00:00:01"), Ok(1));
        assert!(p("13/01").is_err());
        assert!(p("02/30/26").is_err());
        assert!(p("2026-13-01").is_err());
        assert!(p("abc").is_err());
    }

    #[test]
    fn epoch_and_empty() {
        assert_eq!(p("uts1795964168"), Ok(NOW));
        assert!(p("uts12").is_err());
        assert!(p("uts17959x").is_err());
        assert_eq!(p(""), Ok(0));
    }

    #[test]
    fn time_zone_is_honoured() {
        let cet = FixedOffset::east_opt(3600).unwrap();
        // Local midnight in UTC+1 is 23:00 UTC the day before.
        assert_eq!(
            parse_time("today", NOW, &cet, true),
            Ok(ts(2026, 11, 28, 23, 0, 0))
        );
        assert_eq!(midnight_today(NOW, &cet), ts(2026, 11, 28, 23, 0, 0));
        assert_eq!(midnight_today(NOW, &Utc), ts(2026, 11, 29, 0, 0, 0));
    }

    #[test]
    fn error_text() {
        let e = p("garbage").unwrap_err();
        assert_eq!(e.to_string(), "Invalid time specification (pos=0): garbage");
    }
}
