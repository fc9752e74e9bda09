//! `scontrol create|update|delete reservation` and `scontrol show reservation`: the
//! twin of src/scontrol/create_res.c (option parsing and its messages) and
//! src/api/reservation_info.c (the record layout).
//!
//! Parsing is pure given `now` and a time parser; the record layout is a pure
//! function of a [`Reservation`] and `now`.

use super::timefmt::fmt_ts;
use crate::model::reservation::{
    ListEdit, Reservation, ResvFlags, ResvSpec, fmt_duration, parse_secs,
};

/// Which command the options are for (it changes the error suffix, as in Slurm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Create,
    Update,
}

impl Mode {
    fn suffix(self) -> &'static str {
        match self {
            Mode::Create => "No reservation created.",
            Mode::Update => "No reservation update.",
        }
    }
}

/// Case-insensitive prefix match of at least `min` characters (`strncasecmp` with
/// `MAX(taglen, min)` in Slurm).
fn tag_is(tag: &str, keyword: &str, min: usize) -> bool {
    let t = tag.to_ascii_lowercase();
    t.len() >= min && keyword.to_ascii_lowercase().starts_with(&t)
}

fn names(v: &str) -> Vec<String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Parses `Key=Value` words into a [`ResvSpec`]. `time` turns a StartTime/EndTime
/// value into epoch seconds (`now`, `now+1hour`, ISO forms).
///
/// Errors: Slurm's `scontrol: error: …` text, with `No reservation created.` or
/// `No reservation update.` appended, and the create-time completeness checks.
pub fn parse(
    args: &[String],
    mode: Mode,
    time: &dyn Fn(&str) -> Option<i64>,
) -> Result<ResvSpec, String> {
    let msg = mode.suffix();
    let mut spec = ResvSpec::default();
    for a in args {
        let Some(eq) = a.find('=') else {
            if a.len() >= 3 && a[..3].eq_ignore_ascii_case("res") {
                continue;
            }
            return Err(format!("scontrol: error: Unknown parameter {a}.  {msg}"));
        };
        let (mut tag, val) = (&a[..eq], &a[eq + 1..]);
        let mut pm = None;
        if let Some(t) = tag.strip_suffix('+') {
            pm = Some('+');
            tag = t;
        } else if let Some(t) = tag.strip_suffix('-') {
            pm = Some('-');
            tag = t;
        }
        if tag.is_empty() {
            return Err(format!("scontrol: error: Unknown parameter {a}.  {msg}"));
        }
        let list = |v: &str| match pm {
            Some('+') => ListEdit::Add(names(v)),
            Some('-') => ListEdit::Remove(names(v)),
            _ => ListEdit::Set(names(v)),
        };
        if tag_is(tag, "ReservationName", 1) {
            spec.name = Some(val.to_string());
        } else if tag_is(tag, "Accounts", 1) {
            spec.accounts = Some(list(val));
        } else if tag_is(tag, "StartTime", 1) {
            spec.start = Some(
                time(val)
                    .ok_or_else(|| format!("scontrol: error: Invalid start time {a}.  {msg}"))?,
            );
        } else if tag_is(tag, "EndTime", 1) {
            spec.end = Some(
                time(val)
                    .ok_or_else(|| format!("scontrol: error: Invalid end time {a}.  {msg}"))?,
            );
        } else if tag_is(tag, "Duration", 1) {
            let d = if val.eq_ignore_ascii_case("UNLIMITED") || val.eq_ignore_ascii_case("INFINITE")
            {
                // A year stands for "no end": sluice keeps every window finite.
                Some(365 * 86400)
            } else {
                parse_secs(val).map(i64::from)
            };
            spec.duration =
                Some(d.ok_or_else(|| format!("scontrol: error: Invalid duration {a}.  {msg}"))?);
        } else if tag_is(tag, "Flags", 2) {
            // Validate here so that a bad flag is refused before any request.
            ResvFlags::default()
                .apply(val, pm == Some('-'))
                .map_err(|e| format!("scontrol: error: {e}  {msg}"))?;
            spec.flags = Some((val.to_string(), pm == Some('-')));
        } else if tag_is(tag, "NodeCnt", 5) || tag_is(tag, "NodeCount", 5) {
            let n = val
                .parse::<u32>()
                .map_err(|_| format!("scontrol: error: Invalid node count {a}.  {msg}"))?;
            spec.node_cnt = Some(n);
        } else if tag_is(tag, "Nodes", 5) {
            spec.nodes = Some(val.to_string());
        } else if tag_is(tag, "PartitionName", 1) {
            spec.partition = Some(val.to_string());
        } else if tag_is(tag, "Users", 1) {
            spec.users = Some(list(val));
        } else if ["CoreCnt", "Licenses", "TRES", "BurstBuffer", "Watts"]
            .iter()
            .any(|k| tag.eq_ignore_ascii_case(k))
        {
            return Err(format!(
                "scontrol: error: {tag}= on a reservation is not supported yet by sluice.  {msg}"
            ));
        } else {
            return Err(format!("scontrol: error: Unknown parameter {a}.  {msg}"));
        }
    }
    match mode {
        Mode::Update => {
            if spec.name.is_none() {
                return Err(
                    "scontrol: error: Reservation must be given.  No reservation update.".into(),
                );
            }
        }
        Mode::Create => check_create(&spec)?,
    }
    Ok(spec)
}

/// The completeness checks scontrol makes before sending a creation.
fn check_create(spec: &ResvSpec) -> Result<(), String> {
    let e = |s: &str| Err(format!("scontrol: error: {s}"));
    let Some(start) = spec.start else {
        return e("A start time must be given.  No reservation created.");
    };
    if spec.end.is_none() && spec.duration.is_none() {
        return e("An end time or duration must be given.  No reservation created.");
    }
    if let (Some(end), Some(d)) = (spec.end, spec.duration)
        && start + d != end
    {
        return e("StartTime + Duration does not equal EndTime.  No reservation created.");
    }
    if spec.end.is_some_and(|end| start > end) {
        return e("Start time cannot be after end time.  No reservation created.");
    }
    if spec.nodes.is_none() && spec.node_cnt.is_none() && spec.partition.is_none() {
        return e(
            "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licensesor Watts must be specified. No reservation created.",
        );
    }
    let empty = |l: &Option<ListEdit>| l.as_ref().is_none_or(|l| l.names().is_empty());
    if empty(&spec.users) && empty(&spec.accounts) {
        return e("Either Users or Accounts must be specified.  No reservation created.");
    }
    Ok(())
}

fn or_null(v: &[String]) -> String {
    if v.is_empty() {
        "(null)".into()
    } else {
        v.join(",")
    }
}

/// One reservation as `scontrol show reservation` prints it (Slurm 22.05 layout);
/// `oneliner` joins the lines with spaces.
pub fn format(r: &Reservation, now: i64, oneliner: bool) -> String {
    let lines = [
        format!(
            "ReservationName={} StartTime={} EndTime={} Duration={}",
            r.name,
            fmt_ts(r.start),
            fmt_ts(r.end),
            fmt_duration(r.end - r.start)
        ),
        format!(
            "Nodes={} NodeCnt={} CoreCnt={} Features=(null) PartitionName={} Flags={}",
            crate::model::hostlist::compress(&r.nodes),
            r.nodes.len(),
            r.cpus,
            r.partition.as_deref().unwrap_or("(null)"),
            r.flags.render()
        ),
        format!("TRES=cpu={}", r.cpus),
        format!(
            "Users={} Groups=(null) Accounts={} Licenses=(null) State={} BurstBuffer=(null) Watts=n/a",
            or_null(&r.users),
            or_null(&r.accounts),
            r.state(now)
        ),
        "MaxStartDelay=(null)".to_string(),
    ];
    if oneliner {
        format!("{}\n", lines.join(" "))
    } else {
        format!("{}\n\n", lines.join("\n   "))
    }
}

/// `scontrol show reservation [NAME]`: (stdout, stderr, exit code).
pub fn show(
    list: &[Reservation],
    name: Option<&str>,
    now: i64,
    oneliner: bool,
) -> (String, String, u8) {
    let shown: Vec<&Reservation> = list
        .iter()
        .filter(|r| name.is_none_or(|n| r.name == n))
        .collect();
    match (name, shown.is_empty()) {
        (Some(n), true) => (String::new(), format!("Reservation {n} not found\n"), 1),
        (None, true) => ("No reservations in the system\n".into(), String::new(), 0),
        _ => (
            shown.iter().map(|r| format(r, now, oneliner)).collect(),
            String::new(),
            0,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn t(s: &str) -> Option<i64> {
        match s {
            "now" => Some(1000),
            "now+1hour" => Some(4600),
            _ => s.parse().ok(),
        }
    }

    #[test]
    fn create_options() {
        let s = parse(
            &w("ReservationName=m starttime=now duration=60 nodes=n[1-2] users=root flags=maint,ignore_jobs"),
            Mode::Create,
            &t,
        )
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("m"));
        assert_eq!((s.start, s.duration), (Some(1000), Some(3600)));
        assert_eq!(s.nodes.as_deref(), Some("n[1-2]"));
        assert_eq!(s.users, Some(ListEdit::Set(vec!["root".into()])));
        assert_eq!(s.flags, Some(("maint,ignore_jobs".into(), false)));
    }

    #[test]
    fn unsupported_resources_are_refused_by_name() {
        let e = |s: &str| parse(&w(s), Mode::Create, &t).unwrap_err();
        assert_eq!(
            e("res starttime=now duration=5 licenses=matlab:1 users=a"),
            "scontrol: error: licenses= on a reservation is not supported yet by sluice.  No reservation created."
        );
        let u = parse(&w("reservation=r CoreCnt=4"), Mode::Update, &t).unwrap_err();
        assert!(
            u.contains("CoreCnt= on a reservation is not supported yet by sluice"),
            "{u}"
        );
    }

    #[test]
    fn create_errors_are_slurms() {
        let e = |s: &str| parse(&w(s), Mode::Create, &t).unwrap_err();
        assert_eq!(
            e("res duration=5 nodes=n1 users=a"),
            "scontrol: error: A start time must be given.  No reservation created."
        );
        assert_eq!(
            e("res starttime=now nodes=n1 users=a"),
            "scontrol: error: An end time or duration must be given.  No reservation created."
        );
        assert_eq!(
            e("res starttime=now duration=5 nodes=n1"),
            "scontrol: error: Either Users or Accounts must be specified.  No reservation created."
        );
        assert_eq!(
            e("res starttime=bogus duration=5"),
            "scontrol: error: Invalid start time starttime=bogus.  No reservation created."
        );
        assert_eq!(
            e("res starttime=now duration=5 nodes=n1 users=a color=red"),
            "scontrol: error: Unknown parameter color=red.  No reservation created."
        );
        assert_eq!(
            parse(&w("users+=a"), Mode::Update, &t).unwrap_err(),
            "scontrol: error: Reservation must be given.  No reservation update."
        );
        let u = parse(&w("reservationname=x users-=a"), Mode::Update, &t).unwrap();
        assert_eq!(u.users, Some(ListEdit::Remove(vec!["a".into()])));
    }

    #[test]
    fn show_layout() {
        let r = Reservation {
            name: "maint".into(),
            start: 0,
            end: 3600,
            nodes: vec!["n1".into(), "n2".into()],
            cpus: 8,
            partition: None,
            users: vec!["root".into()],
            accounts: vec![],
            flags: ResvFlags {
                maint: true,
                spec_nodes: true,
                ..ResvFlags::default()
            },
            idle_since: None,
        };
        let text = format(&r, 10, false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ReservationName=maint StartTime="));
        assert!(lines[0].ends_with(" Duration=01:00:00"));
        assert_eq!(
            lines[1],
            "   Nodes=n[1-2] NodeCnt=2 CoreCnt=8 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES"
        );
        assert_eq!(lines[2], "   TRES=cpu=8");
        assert_eq!(
            lines[3],
            "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a"
        );
        assert_eq!(lines[4], "   MaxStartDelay=(null)");
        assert_eq!(lines[5], "");
        assert_eq!(
            show(&[], None, 0, false).0,
            "No reservations in the system\n"
        );
        assert_eq!(
            show(&[r], Some("x"), 0, false).1,
            "Reservation x not found\n"
        );
    }
}
