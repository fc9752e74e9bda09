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
            // Bytes, not a `str` slice: `a` may start with a multi-byte character.
            if a.as_bytes()
                .get(..3)
                .is_some_and(|h| h.eq_ignore_ascii_case(b"res"))
            {
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
        } else if tag_is(tag, "CoreCnt", 5) {
            let counts: Option<Vec<u32>> = val
                .split(',')
                .map(|c| c.trim().parse::<u32>().ok().filter(|n| *n > 0))
                .collect();
            spec.core_cnt = Some(
                counts.ok_or_else(|| format!("scontrol: error: Invalid core count {a}.  {msg}"))?,
            );
        } else if tag_is(tag, "Licenses", 2) {
            spec.licenses = Some(parse_licenses(val).ok_or_else(|| {
                format!("scontrol: error: Invalid license specification {a}.  {msg}")
            })?);
        } else if tag_is(tag, "TRES", 4) {
            parse_tres(val, &mut spec).map_err(|e| format!("scontrol: error: {e}  {msg}"))?;
        } else if ["BurstBuffer", "Watts"]
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

/// `Licenses=name[:count],…` (`name*count` too; the count defaults to 1); `None`
/// when an item is malformed.
fn parse_licenses(v: &str) -> Option<Vec<(String, u32)>> {
    v.split(',')
        .filter(|x| !x.is_empty())
        .map(|item| {
            let (n, c) = match item.split_once([':', '*']) {
                Some((n, c)) => (n, c.parse::<u32>().ok().filter(|c| *c > 0)?),
                None => (item, 1),
            };
            (!n.is_empty()).then(|| (n.to_string(), c))
        })
        .collect()
}

/// `TRES=cpu=N,node=N,license/NAME=N`: the CPU count (turned into cores by the
/// controller), the node count and licenses. Other TRES are refused by name.
fn parse_tres(v: &str, spec: &mut ResvSpec) -> Result<(), String> {
    for item in v.split(',').filter(|x| !x.is_empty()) {
        let bad = || format!("Invalid TRES {item}.");
        let (k, n) = item.split_once('=').ok_or_else(bad)?;
        let n: u32 = n.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
        let k = k.to_ascii_lowercase();
        if k == "cpu" {
            spec.cpu_cnt = Some(n);
        } else if k == "node" {
            spec.node_cnt = Some(n);
        } else if let Some(name) = k.strip_prefix("license/") {
            spec.licenses
                .get_or_insert_with(Vec::new)
                .push((item[8..8 + name.len()].to_string(), n));
        } else {
            return Err(format!(
                "TRES={k} on a reservation is not supported yet by sluice (cpu, node and license/NAME are)."
            ));
        }
    }
    Ok(())
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
    if spec.nodes.is_none()
        && spec.node_cnt.is_none()
        && spec.partition.is_none()
        && spec.core_cnt.is_none()
        && spec.cpu_cnt.is_none()
        && spec.licenses.is_none()
    {
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
            if r.nodes.is_empty() {
                "(null)".to_string()
            } else {
                crate::model::hostlist::compress(&r.nodes)
            },
            r.nodes.len(),
            r.core_count(),
            r.partition.as_deref().unwrap_or("(null)"),
            r.flags.render()
        ),
        format!("TRES={}", r.tres_text()),
        format!(
            "Users={} Groups=(null) Accounts={} Licenses={} State={} BurstBuffer=(null) Watts=n/a",
            or_null(&r.users),
            or_null(&r.accounts),
            r.licenses_text(),
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
    fn a_non_ascii_word_is_an_unknown_parameter() {
        // `ÁÁ` once panicked: its first three bytes split the second character.
        for word in ["ÁÁ", "rÁ", "ÁÁ=1"] {
            let e = parse(&w(word), Mode::Create, &t).unwrap_err();
            assert!(e.contains(word.split('=').next().unwrap_or(word)), "{e}");
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
    fn cores_licenses_and_tres() {
        let p = |s: &str| parse(&w(s), Mode::Create, &t);
        let s =
            p("res starttime=now duration=5 corecnt=4 licenses=matlab:2,fluent users=a").unwrap();
        assert_eq!(s.core_cnt, Some(vec![4]));
        assert_eq!(
            s.licenses,
            Some(vec![("matlab".into(), 2), ("fluent".into(), 1)])
        );
        let s = p("res starttime=now duration=5 nodes=n[1-2] CoreCnt=2,3 users=a").unwrap();
        assert_eq!(s.core_cnt, Some(vec![2, 3]));
        let s =
            p("res starttime=now duration=5 TRES=cpu=8,node=2,license/Matlab=1 users=a").unwrap();
        assert_eq!((s.cpu_cnt, s.node_cnt), (Some(8), Some(2)));
        assert_eq!(s.licenses, Some(vec![("Matlab".into(), 1)]));
        assert_eq!(
            p("res starttime=now duration=5 corecnt=x users=a").unwrap_err(),
            "scontrol: error: Invalid core count corecnt=x.  No reservation created."
        );
        assert_eq!(
            p("res starttime=now duration=5 licenses=a:0 users=a").unwrap_err(),
            "scontrol: error: Invalid license specification licenses=a:0.  No reservation created."
        );
        let e = p("res starttime=now duration=5 TRES=gres/gpu=1 users=a").unwrap_err();
        assert!(
            e.contains("TRES=gres/gpu on a reservation is not supported yet by sluice"),
            "{e}"
        );
        let e = p("res starttime=now duration=5 watts=100 nodes=n1 users=a").unwrap_err();
        assert!(
            e.contains("watts= on a reservation is not supported yet by sluice"),
            "{e}"
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
            ..Default::default()
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
        // A core and license reservation.
        let cores = Reservation {
            nodes: vec!["n1".into()],
            cpus: 4,
            cores: 2,
            node_cpus: vec![4],
            licenses: vec![("matlab".into(), 2)],
            flags: ResvFlags::default(),
            ..r.clone()
        };
        let text = format(&cores, 10, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1],
            "   Nodes=n1 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags="
        );
        assert_eq!(lines[2], "   TRES=cpu=4,license/matlab=2");
        assert!(lines[3].contains(" Licenses=matlab:2 "), "{}", lines[3]);
        let lic_only = Reservation {
            nodes: vec![],
            cpus: 0,
            cores: 0,
            node_cpus: vec![],
            ..cores
        };
        let text = format(&lic_only, 10, true);
        assert!(
            text.contains(" Nodes=(null) NodeCnt=0 CoreCnt=0 ")
                && text.contains(" TRES=license/matlab=2 "),
            "{text}"
        );
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
