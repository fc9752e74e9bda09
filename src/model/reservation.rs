//! Advanced reservations: a named window of time on a set of nodes, usable only by the
//! users and accounts it lists (cf. src/slurmctld/reservation.c and `scontrol show
//! reservation`).
//!
//! Pure data and text forms. Times are epoch seconds; a reservation covers the
//! half-open window `[start, end)`. Which jobs it admits and which it keeps away is
//! decided in `sched/` from [`Reservation::admits`] and [`Reservation::blocks`].
//!
//! Invariant: `start < end`, `nodes` is non-empty and names configured nodes (the
//! controller checks this when it creates or updates one).

use serde::{Deserialize, Serialize};

/// The reservation flags sluice knows (a subset of Slurm's `Flags=`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResvFlags {
    /// MAINT: maintenance; its nodes show the MAINT state and sreport counts the time
    /// as planned down rather than reserved.
    pub maint: bool,
    /// IGNORE_JOBS: created even though jobs are running on its nodes.
    pub ignore_jobs: bool,
    /// DAILY / WEEKLY: after its end the window moves one day / one week forward.
    pub daily: bool,
    pub weekly: bool,
    /// FLEX: jobs in it may also use nodes outside it and run past its window.
    pub flex: bool,
    /// OVERLAP: may share nodes and time with other reservations.
    pub overlap: bool,
    /// SPEC_NODES: the node list was given explicitly (set by the controller).
    pub spec_nodes: bool,
    /// PART_NODES: the reservation holds all nodes of its partition.
    pub part_nodes: bool,
    /// PURGE_COMP: deleted once it has had no job for this many seconds (300 when
    /// given without a value).
    pub purge_comp: Option<u32>,
}

impl ResvFlags {
    /// Applies a `Flags=` list (`+` adds, `-` removes, plain sets). Values are
    /// case-insensitive; `PURGE_COMP=<time>` takes a time limit form (`5:00`).
    ///
    /// Errors: the text of Slurm's complaint for an unknown flag.
    pub fn apply(&mut self, list: &str, remove: bool) -> Result<(), String> {
        for item in list.split(',').filter(|s| !s.is_empty()) {
            let (key, val) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let on = !remove;
            match key.to_ascii_uppercase().as_str() {
                "MAINT" => self.maint = on,
                "IGNORE_JOBS" => self.ignore_jobs = on,
                "DAILY" => self.daily = on,
                "WEEKLY" => self.weekly = on,
                "FLEX" => self.flex = on,
                "OVERLAP" => self.overlap = on,
                "SPEC_NODES" => self.spec_nodes = on,
                "PART_NODES" => self.part_nodes = on,
                "NO_MAINT" => self.maint = false,
                "NO_DAILY" => self.daily = false,
                "NO_WEEKLY" => self.weekly = false,
                "NO_FLEX" => self.flex = false,
                "PURGE_COMP" => {
                    self.purge_comp = if remove {
                        None
                    } else {
                        Some(match val {
                            None => 300,
                            Some(v) => parse_secs(v)
                                .ok_or_else(|| format!("Invalid purge_comp time {v}"))?,
                        })
                    }
                }
                _ => return Err(format!("Error parsing flags {item}.")),
            }
        }
        Ok(())
    }

    /// `Flags=` text in Slurm's order (`MAINT,IGNORE_JOBS,SPEC_NODES`); empty if none.
    pub fn render(&self) -> String {
        let mut v: Vec<String> = Vec::new();
        let mut add = |b: bool, s: &str| {
            if b {
                v.push(s.to_string());
            }
        };
        add(self.maint, "MAINT");
        add(self.flex, "FLEX");
        add(self.overlap, "OVERLAP");
        add(self.ignore_jobs, "IGNORE_JOBS");
        add(self.daily, "DAILY");
        add(self.weekly, "WEEKLY");
        add(self.spec_nodes, "SPEC_NODES");
        add(self.part_nodes, "PART_NODES");
        if let Some(s) = self.purge_comp {
            v.push(format!("PURGE_COMP={}", fmt_duration(i64::from(s))));
        }
        v.join(",")
    }
}

/// Seconds from a time-limit form: `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`.
pub fn parse_secs(s: &str) -> Option<u32> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u32>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u32> = rest
        .split(':')
        .map(|p| p.parse::<u32>().ok())
        .collect::<Option<_>>()?;
    let hms = match (s.contains('-'), parts.as_slice()) {
        (false, [m]) => m.checked_mul(60)?,
        (false, [m, sec]) => m.checked_mul(60)?.checked_add(*sec)?,
        (true, [h]) => h.checked_mul(3600)?,
        (true, [h, m]) => h.checked_mul(3600)?.checked_add(m.checked_mul(60)?)?,
        (_, [h, m, sec]) => h
            .checked_mul(3600)?
            .checked_add(m.checked_mul(60)?)?
            .checked_add(*sec)?,
        _ => return None,
    };
    days.checked_mul(86400)?.checked_add(hms)
}

/// Slurm's duration text: `HH:MM:SS`, `D-HH:MM:SS` from one day.
pub fn fmt_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, sec) = (s / 86400, s % 86400 / 3600, s % 3600 / 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// One advanced reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// `ReservationName`.
    pub name: String,
    /// Window start and end, epoch seconds (`[start, end)`).
    pub start: i64,
    pub end: i64,
    /// Reserved node names, in configuration order.
    pub nodes: Vec<String>,
    /// CPUs of the reserved nodes (`CoreCnt`, `TRES=cpu=`).
    pub cpus: u32,
    /// `PartitionName`; `None` prints `(null)`.
    pub partition: Option<String>,
    /// User names allowed (`Users=`); empty when only accounts are listed.
    pub users: Vec<String>,
    /// Accounts allowed (`Accounts=`).
    pub accounts: Vec<String>,
    pub flags: ResvFlags,
    /// When the reservation last had no job (PURGE_COMP bookkeeping); `None` while a
    /// job uses it or before it started.
    #[serde(default)]
    pub idle_since: Option<i64>,
}

impl Reservation {
    /// Whether the window covers `t`.
    pub fn active(&self, t: i64) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether the window meets `[t0, t1)`.
    pub fn overlaps(&self, t0: i64, t1: i64) -> bool {
        self.start < t1 && t0 < self.end
    }

    /// Whether a job of `user` charged to `account` may use the reservation (Users=
    /// or Accounts= list it).
    pub fn allows(&self, user: &str, account: &str) -> bool {
        self.users.iter().any(|u| u == user)
            || (!account.is_empty() && self.accounts.iter().any(|a| a == account))
    }

    /// Whether a job that named `resv` (`--reservation`) runs in this one.
    pub fn admits(&self, resv: Option<&str>) -> bool {
        resv == Some(self.name.as_str())
    }

    /// Whether this reservation keeps a job that does not run in it away from node
    /// `node` during `[t0, t1)`.
    pub fn blocks(&self, node: &str, t0: i64, t1: i64) -> bool {
        self.overlaps(t0, t1) && self.nodes.iter().any(|n| n == node)
    }

    /// `ACTIVE` or `INACTIVE` at `now`.
    pub fn state(&self, now: i64) -> &'static str {
        if self.active(now) {
            "ACTIVE"
        } else {
            "INACTIVE"
        }
    }

    /// Rolls a DAILY/WEEKLY reservation whose window ended at or before `now` forward
    /// by whole periods until it ends after `now`. Returns whether it moved.
    pub fn roll_forward(&mut self, now: i64) -> bool {
        let period = if self.flags.weekly {
            7 * 86400
        } else if self.flags.daily {
            86400
        } else {
            return false;
        };
        if self.end > now {
            return false;
        }
        let k = (now - self.end) / period + 1;
        self.start += k * period;
        self.end += k * period;
        true
    }
}

/// A change to a name list (`Users=a,b`, `Users+=c`, `Users-=a`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListEdit {
    Set(Vec<String>),
    Add(Vec<String>),
    Remove(Vec<String>),
}

impl ListEdit {
    /// Applies the edit to `list`, keeping its order and no duplicates.
    pub fn apply(&self, list: &mut Vec<String>) {
        match self {
            ListEdit::Set(v) => {
                list.clear();
                for x in v {
                    if !list.contains(x) {
                        list.push(x.clone());
                    }
                }
            }
            ListEdit::Add(v) => {
                for x in v {
                    if !list.contains(x) {
                        list.push(x.clone());
                    }
                }
            }
            ListEdit::Remove(v) => list.retain(|x| !v.contains(x)),
        }
    }

    /// The names the edit mentions.
    pub fn names(&self) -> &[String] {
        match self {
            ListEdit::Set(v) | ListEdit::Add(v) | ListEdit::Remove(v) => v,
        }
    }
}

/// What `scontrol create|update reservation` asks for, as parsed by the client: times
/// are absolute epoch seconds, durations seconds. Unset fields keep their value on
/// update and take Slurm's defaults on create.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResvSpec {
    /// `ReservationName`; on create, `None` lets the controller pick one.
    pub name: Option<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// `Duration`, seconds.
    pub duration: Option<i64>,
    /// `Nodes=`: hostlist expression or `ALL`.
    pub nodes: Option<String>,
    /// `NodeCnt=`.
    pub node_cnt: Option<u32>,
    pub users: Option<ListEdit>,
    pub accounts: Option<ListEdit>,
    pub partition: Option<String>,
    /// `Flags=` text and whether it removes (`Flags-=`).
    pub flags: Option<(String, bool)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Reservation {
        Reservation {
            name: "maint".into(),
            start: 1000,
            end: 2000,
            nodes: vec!["n1".into(), "n2".into()],
            cpus: 8,
            partition: None,
            users: vec!["root".into()],
            accounts: vec![],
            flags: ResvFlags::default(),
            idle_since: None,
        }
    }

    #[test]
    fn windows_are_half_open() {
        let r = r();
        assert!(!r.active(999) && r.active(1000) && r.active(1999) && !r.active(2000));
        assert!(r.blocks("n1", 500, 1001) && !r.blocks("n1", 500, 1000));
        assert!(!r.blocks("n3", 0, 5000));
        assert_eq!(r.state(1500), "ACTIVE");
        assert_eq!(r.state(2500), "INACTIVE");
    }

    #[test]
    fn flags_parse_and_render_in_slurm_order() {
        let mut f = ResvFlags::default();
        f.apply("ignore_jobs,MAINT,purge_comp=00:30", false)
            .unwrap();
        assert_eq!(f.render(), "MAINT,IGNORE_JOBS,PURGE_COMP=00:00:30");
        f.apply("MAINT", true).unwrap();
        assert_eq!(f.render(), "IGNORE_JOBS,PURGE_COMP=00:00:30");
        assert_eq!(
            f.apply("BOGUS", false).unwrap_err(),
            "Error parsing flags BOGUS."
        );
    }

    #[test]
    fn daily_rolls_by_whole_days() {
        let mut r = r();
        assert!(!r.roll_forward(5000));
        r.flags.daily = true;
        assert!(!r.roll_forward(1500));
        assert!(r.roll_forward(2000 + 86400 + 5));
        assert_eq!((r.start, r.end), (1000 + 2 * 86400, 2000 + 2 * 86400));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_secs("60"), Some(3600));
        assert_eq!(parse_secs("1:30"), Some(90));
        assert_eq!(parse_secs("1-02:00:00"), Some(93600));
        assert_eq!(parse_secs("x"), None);
        assert_eq!(fmt_duration(3600), "01:00:00");
        assert_eq!(fmt_duration(86400 * 365), "365-00:00:00");
    }
}
