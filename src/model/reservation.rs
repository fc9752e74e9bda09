//! Advanced reservations: a named window of time on a set of nodes, usable only by the
//! users and accounts it lists (cf. src/slurmctld/reservation.c and `scontrol show
//! reservation`).
//!
//! Pure data and text forms. Times are epoch seconds; a reservation covers the
//! half-open window `[start, end)`. Which jobs it admits and which it keeps away is
//! decided in `sched/` from [`Reservation::admits`] and [`Reservation::blocks`].
//!
//! Invariant: `start < end`; `nodes` names configured nodes and is empty only when
//! licenses are reserved; `node_cpus` is empty or as long as `nodes` (the controller
//! checks this when it creates or updates one).

use serde::{Deserialize, Serialize};

/// The reservation flags sluice knows (a subset of Slurm's `Flags=`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResvFlags {
    /// MAINT: maintenance; its nodes show the MAINT state and sreport counts the time
    /// as planned down rather than reserved.
    pub maint: bool,
    /// IGNORE_JOBS: created even though jobs are running on its nodes.
    pub ignore_jobs: bool,
    /// HOURLY / DAILY / WEEKLY: after its end the window moves one hour / day /
    /// week forward.
    #[serde(default)]
    pub hourly: bool,
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
                "HOURLY" => self.hourly = on,
                "DAILY" => self.daily = on,
                "WEEKLY" => self.weekly = on,
                "FLEX" => self.flex = on,
                "OVERLAP" => self.overlap = on,
                "SPEC_NODES" => self.spec_nodes = on,
                "PART_NODES" => self.part_nodes = on,
                "NO_MAINT" => self.maint = false,
                "NO_HOURLY" => self.hourly = false,
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
                // Slurm's other flags: known, refused by name.
                "ANY_NODES" | "FIRST_CORES" | "LICENSE_ONLY" | "MAGNETIC"
                | "NO_HOLD_JOBS_AFTER" | "REPLACE" | "REPLACE_DOWN" | "STATIC_ALLOC"
                | "TIME_FLOAT" | "WEEKDAY" | "WEEKEND" => {
                    return Err(format!(
                        "Flags={} on a reservation is not supported yet by sluice.",
                        key.to_ascii_uppercase()
                    ));
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
        add(self.hourly, "HOURLY");
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// `ReservationName`.
    pub name: String,
    /// Window start and end, epoch seconds (`[start, end)`).
    pub start: i64,
    pub end: i64,
    /// Reserved node names, in configuration order; empty for a reservation of
    /// licenses only.
    pub nodes: Vec<String>,
    /// CPUs reserved (`TRES=cpu=`): all of the nodes' CPUs, or those `node_cpus`
    /// lists.
    pub cpus: u32,
    /// Cores reserved (`CoreCnt`); 0 in records made before it was kept (then `cpus`
    /// stands for it).
    #[serde(default)]
    pub cores: u32,
    /// A core reservation (`CoreCnt=`, `TRES=cpu=`): the CPUs it holds on each of
    /// `nodes`, in the same order; the rest of those nodes stays usable by other
    /// jobs. Empty when the reservation holds its nodes whole.
    #[serde(default)]
    pub node_cpus: Vec<u32>,
    /// Licenses reserved (`Licenses=name:count`): only the reservation's jobs may use
    /// them while it is active.
    #[serde(default)]
    pub licenses: Vec<(String, u32)>,
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
    /// `node` during `[t0, t1)`: it holds the node whole (a core reservation leaves
    /// the rest of its nodes to others, see [`Reservation::cpus_on`]).
    pub fn blocks(&self, node: &str, t0: i64, t1: i64) -> bool {
        self.node_cpus.is_empty() && self.overlaps(t0, t1) && self.nodes.iter().any(|n| n == node)
    }

    /// For a core reservation, the CPUs it holds on `node` (`None` when it holds
    /// whole nodes or not this one).
    pub fn cpus_on(&self, node: &str) -> Option<u32> {
        let k = self.nodes.iter().position(|n| n == node)?;
        self.node_cpus.get(k).copied()
    }

    /// The count of license `name` it reserves (0 if none).
    pub fn license(&self, name: &str) -> u32 {
        self.licenses
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .sum()
    }

    /// `CoreCnt` as shown.
    pub fn core_count(&self) -> u32 {
        if self.cores > 0 {
            self.cores
        } else {
            self.cpus
        }
    }

    /// `Licenses=` text: `name:count,…`, or `(null)`.
    pub fn licenses_text(&self) -> String {
        if self.licenses.is_empty() {
            return "(null)".into();
        }
        self.licenses
            .iter()
            .map(|(n, c)| format!("{n}:{c}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `TRES=` text: `cpu=N` (when it holds CPUs), then `license/NAME=N` per license.
    pub fn tres_text(&self) -> String {
        let mut v = Vec::new();
        if self.cpus > 0 || self.licenses.is_empty() {
            v.push(format!("cpu={}", self.cpus));
        }
        for (n, c) in &self.licenses {
            v.push(format!("license/{n}={c}"));
        }
        v.join(",")
    }

    /// `ACTIVE` or `INACTIVE` at `now`.
    pub fn state(&self, now: i64) -> &'static str {
        if self.active(now) {
            "ACTIVE"
        } else {
            "INACTIVE"
        }
    }

    /// Rolls a HOURLY/DAILY/WEEKLY reservation whose window ended at or before `now` forward
    /// by whole periods until it ends after `now`. Returns whether it moved.
    pub fn roll_forward(&mut self, now: i64) -> bool {
        let period = if self.flags.weekly {
            7 * 86400
        } else if self.flags.daily {
            86400
        } else if self.flags.hourly {
            3600
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
    /// `CoreCnt=`: one total (spread over the nodes) or one count per node.
    #[serde(default)]
    pub core_cnt: Option<Vec<u32>>,
    /// `TRES=cpu=N`: CPUs to reserve (the controller turns them into cores).
    #[serde(default)]
    pub cpu_cnt: Option<u32>,
    /// `Licenses=name[:count],…` (also from `TRES=license/name=count`).
    #[serde(default)]
    pub licenses: Option<Vec<(String, u32)>>,
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
            cores: 8,
            node_cpus: vec![],
            licenses: vec![],
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
        assert_eq!(
            f.apply("weekday", false).unwrap_err(),
            "Flags=WEEKDAY on a reservation is not supported yet by sluice."
        );
        f.apply("HOURLY", false).unwrap();
        assert_eq!(f.render(), "IGNORE_JOBS,HOURLY,PURGE_COMP=00:00:30");
    }

    #[test]
    fn core_and_license_reservations_leave_their_nodes_to_others() {
        let mut r = r();
        r.node_cpus = vec![2, 1];
        r.cpus = 3;
        r.cores = 3;
        r.licenses = vec![("matlab".into(), 2)];
        assert!(
            !r.blocks("n1", 1000, 1500),
            "a core reservation hides no node"
        );
        assert_eq!(
            (r.cpus_on("n1"), r.cpus_on("n2"), r.cpus_on("n3")),
            (Some(2), Some(1), None)
        );
        assert_eq!(r.license("matlab"), 2);
        assert_eq!(r.license("other"), 0);
        assert_eq!(r.licenses_text(), "matlab:2");
        assert_eq!(r.tres_text(), "cpu=3,license/matlab=2");
        r.nodes.clear();
        r.node_cpus.clear();
        r.cpus = 0;
        assert_eq!(r.tres_text(), "license/matlab=2");
    }

    #[test]
    fn daily_rolls_by_whole_days() {
        let mut r = r();
        assert!(!r.roll_forward(5000));
        r.flags.daily = true;
        assert!(!r.roll_forward(1500));
        assert!(r.roll_forward(2000 + 86400 + 5));
        assert_eq!((r.start, r.end), (1000 + 2 * 86400, 2000 + 2 * 86400));
        let mut h = self::r();
        h.flags.hourly = true;
        assert!(h.roll_forward(2000));
        assert_eq!((h.start, h.end), (1000 + 3600, 2000 + 3600));
        let mut w = self::r();
        w.flags.weekly = true;
        assert!(!w.roll_forward(1999));
        assert!(w.roll_forward(2000));
        assert_eq!((w.start, w.end), (1000 + 7 * 86400, 2000 + 7 * 86400));
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
