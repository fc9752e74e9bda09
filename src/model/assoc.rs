//! The accounting policy model: clusters, accounts, users, associations, QOS and their
//! limits, held as one [`AssocTree`] (cf. Slurm's slurmdbd tables `acct_table`,
//! `user_table`, `assoc_table`, `qos_table`, and src/common/assoc_mgr.c).
//!
//! Pure data: no I/O, no clock. The controller owns one tree, persists it in SQLite
//! (`ctld::store`) and hands a reference to the scheduler (limits, fair-share, preemption).
//!
//! Shape, as Slurm's: a tree of *accounts* rooted at `root`; each account has a parent
//! account (none for `root`); *user associations* hang under an account (optionally for
//! one partition). Each account and user association carries raw fair-share shares,
//! limits and the QOS it may use. sluice serves one cluster per controller, so
//! associations carry no cluster name: they belong to the controller's cluster, and the
//! `clusters` list only records names `sacctmgr add cluster` was given.
//!
//! Invariants (kept by the `AssocTree` mutators, checked by [`AssocTree::check`]):
//! `root` exists and has no parent; every other account's parent exists; the parent
//! links form no cycle; every user association names an existing account and user;
//! a user's default account is one they have an association under; a coordinator's
//! accounts exist.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The account at the top of every tree.
pub const ROOT: &str = "root";
/// The QOS that exists from the start and is every association's default.
pub const NORMAL_QOS: &str = "normal";

/// A TRES vector: counts keyed by Slurm's TRES names (`cpu`, `mem` in MiB, `node`,
/// `billing`, `energy`, `gres/gpu`, `gres/gpu:a100`, `license/foo`). A key that is
/// absent means "no limit" when the map is a limit. Iterates in Slurm's TRES order
/// (cpu, mem, energy, node, billing, then the rest by name), which is the order Slurm
/// prints TRES strings in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TresMap(BTreeMap<String, u64>);

/// Sort key that puts Slurm's built-in TRES first, in their id order.
fn tres_rank(name: &str) -> (u8, &str) {
    let r = match name {
        "cpu" => 1,
        "mem" => 2,
        "energy" => 3,
        "node" => 4,
        "billing" => 5,
        "fs/disk" => 6,
        "vmem" => 7,
        "pages" => 8,
        _ => 9,
    };
    (r, name)
}

/// Normalises a TRES name as Slurm accepts it: lower-case type, `gpu` alone meaning
/// `gres/gpu`. Errors name the problem.
fn tres_name(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    let (ty, rest) = match raw.split_once('/') {
        Some((t, r)) => (t.to_ascii_lowercase(), Some(r)),
        None => (raw.to_ascii_lowercase(), None),
    };
    match (ty.as_str(), rest) {
        ("cpu" | "mem" | "energy" | "node" | "billing" | "vmem" | "pages", None) => Ok(ty),
        ("gpu", None) => Ok("gres/gpu".into()),
        ("gres" | "license" | "fs" | "ic" | "bb", Some(r)) if !r.is_empty() => {
            Ok(format!("{ty}/{r}"))
        }
        _ => Err(format!("Invalid TRES '{raw}'")),
    }
}

/// Parses a TRES count; `mem` takes Slurm's size suffixes (K, M, G, T; default M) and
/// is stored in MiB.
fn tres_count(name: &str, v: &str) -> Result<u64, String> {
    let v = v.trim();
    if name == "mem" {
        let (num, mult) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
            Some('K') => (&v[..v.len() - 1], 0),
            Some('M') => (&v[..v.len() - 1], 1),
            Some('G') => (&v[..v.len() - 1], 1024),
            Some('T') => (&v[..v.len() - 1], 1024 * 1024),
            _ => (v, 1),
        };
        let n: u64 = num
            .parse()
            .map_err(|_| format!("Invalid TRES count '{v}' for {name}"))?;
        return Ok(if mult == 0 {
            n.div_ceil(1024)
        } else {
            n * mult
        });
    }
    v.parse()
        .map_err(|_| format!("Invalid TRES count '{v}' for {name}"))
}

impl TresMap {
    /// An empty vector (no limits).
    pub fn new() -> TresMap {
        TresMap::default()
    }

    /// Parses Slurm's `name=count[,name=count…]` (`cpu=4,mem=10G,gres/gpu=2`). The
    /// empty string is the empty map. `-1` for a count is refused here; use
    /// [`TresMap::parse_update`] for sacctmgr's "clear this limit".
    pub fn parse(s: &str) -> Result<TresMap, String> {
        let mut m = TresMap::new();
        for (k, v) in TresMap::parse_update(s)? {
            match v {
                Some(v) => {
                    m.0.insert(k, v);
                }
                None => return Err(format!("Invalid TRES count '-1' for {k}")),
            }
        }
        Ok(m)
    }

    /// Parses an update as `sacctmgr modify … set GrpTRES=` takes it: each item is a
    /// new count (`Some`) or `-1` to remove that limit (`None`).
    pub fn parse_update(s: &str) -> Result<Vec<(String, Option<u64>)>, String> {
        let mut out = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("Invalid TRES '{item}': expected name=count"))?;
            let name = tres_name(k)?;
            if v.trim() == "-1" {
                out.push((name, None));
            } else {
                out.push((name.clone(), Some(tres_count(&name, v)?)));
            }
        }
        Ok(out)
    }

    /// Applies an update from [`TresMap::parse_update`].
    pub fn apply_update(&mut self, upd: &[(String, Option<u64>)]) {
        for (k, v) in upd {
            match v {
                Some(v) => {
                    self.0.insert(k.clone(), *v);
                }
                None => {
                    self.0.remove(k);
                }
            }
        }
    }

    /// The count for `name`, if present.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }

    /// Sets `name` to `count`.
    pub fn set(&mut self, name: &str, count: u64) {
        self.0.insert(name.to_string(), count);
    }

    /// Adds `count` to `name` (saturating).
    pub fn add(&mut self, name: &str, count: u64) {
        let e = self.0.entry(name.to_string()).or_insert(0);
        *e = e.saturating_add(count);
    }

    /// Keeps only the TRES whose name `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|k, _| keep(k));
    }

    /// Whether no TRES is present.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in Slurm's TRES order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.0.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        v.sort_by(|a, b| tres_rank(a.0).cmp(&tres_rank(b.0)));
        v.into_iter()
    }
}

impl fmt::Display for TresMap {
    /// Slurm's text (`cpu=4,mem=10G,gres/gpu=2`): memory in the largest unit that
    /// divides it exactly, as sacctmgr prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in self.iter() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if k == "mem" {
                write!(f, "mem={}", fmt_mem_mib(v))?;
            } else {
                write!(f, "{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// MiB as Slurm's converted units: `10G`, `1536M`, `2T`.
pub fn fmt_mem_mib(mib: u64) -> String {
    if mib != 0 && mib.is_multiple_of(1024 * 1024) {
        format!("{}T", mib / (1024 * 1024))
    } else if mib != 0 && mib.is_multiple_of(1024) {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

/// The limits an account, user association or QOS can carry (cf. sacctmgr(1) "GENERAL
/// SPECIFICATIONS FOR ASSOCIATION BASED ENTITIES" and "SPECIFICATIONS FOR QOS"). `None`
/// or an absent TRES key means "no limit". Times are in minutes, as Slurm keeps them.
///
/// Slurm's names: on associations `MaxJobs`/`MaxSubmitJobs` count the association's
/// own jobs and `Grp*` count the association and everything below it; on a QOS the
/// `*PerUser`/`*PerAccount` forms count per user/account within the QOS and `Grp*`
/// counts all jobs in the QOS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `MaxJobs`: running jobs of this association.
    #[serde(default)]
    pub max_jobs: Option<u32>,
    /// `MaxSubmitJobs`: running plus pending jobs of this association.
    #[serde(default)]
    pub max_submit_jobs: Option<u32>,
    /// `MaxWall` (`MaxWallDurationPerJob`), minutes.
    #[serde(default)]
    pub max_wall_mins: Option<u32>,
    /// `MaxTRES` (`MaxTRESPerJob`): TRES one job may have.
    #[serde(default)]
    pub max_tres_per_job: TresMap,
    /// `MaxTRESPerNode`: TRES one job may have on each node.
    #[serde(default)]
    pub max_tres_per_node: TresMap,
    /// `MaxTRESMins` (`MaxTRESMinsPerJob`): TRES × time-limit minutes one job may ask.
    #[serde(default)]
    pub max_tres_mins_per_job: TresMap,
    /// `MaxTRESPerUser` (QOS): running TRES per user in this QOS.
    #[serde(default)]
    pub max_tres_per_user: TresMap,
    /// `MaxTRESPerAccount` (QOS): running TRES per account in this QOS.
    #[serde(default)]
    pub max_tres_per_account: TresMap,
    /// `MaxJobsPerUser` (QOS): running jobs per user in this QOS.
    #[serde(default)]
    pub max_jobs_per_user: Option<u32>,
    /// `MaxSubmitJobsPerUser` (QOS): running plus pending jobs per user in this QOS.
    #[serde(default)]
    pub max_submit_jobs_per_user: Option<u32>,
    /// `MaxJobsPerAccount` (QOS).
    #[serde(default)]
    pub max_jobs_per_account: Option<u32>,
    /// `MaxSubmitJobsPerAccount` (QOS).
    #[serde(default)]
    pub max_submit_jobs_per_account: Option<u32>,
    /// `GrpTRES`: running TRES of the whole group.
    #[serde(default)]
    pub grp_tres: TresMap,
    /// `GrpJobs`: running jobs of the whole group.
    #[serde(default)]
    pub grp_jobs: Option<u32>,
    /// `GrpSubmitJobs` (`GrpSubmit`): running plus pending jobs of the whole group.
    #[serde(default)]
    pub grp_submit_jobs: Option<u32>,
    /// `GrpTRESMins`: TRES-minutes the group may ever use (against recorded usage;
    /// jobs wait once it is reached).
    #[serde(default)]
    pub grp_tres_mins: TresMap,
    /// `GrpTRESRunMins`: TRES × remaining-time-limit minutes of the group's running jobs.
    #[serde(default)]
    pub grp_tres_run_mins: TresMap,
    /// `GrpWall`: wall minutes the group may use (against recorded, decayed wall
    /// time of its jobs; jobs wait once it is reached).
    #[serde(default)]
    pub grp_wall_mins: Option<u32>,
    /// `MinTRES` (`MinTRESPerJob`, QOS only): TRES each job must ask at least; a job
    /// asking less pends (reason `QOSMinCpuNotSatisfied`, `QOSMinGRES`, …) or, with
    /// DenyOnLimit, is refused.
    #[serde(default)]
    pub min_tres_per_job: TresMap,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// Raw fair-share shares (`Fairshare=`/`Shares=`). Slurm's default is 1; `parent`
/// makes the association use its parent's share and usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shares {
    /// A raw share count.
    Raw(u32),
    /// `Fairshare=parent`.
    Parent,
}

impl Default for Shares {
    fn default() -> Shares {
        Shares::Raw(1)
    }
}

impl Shares {
    /// Parses `N` or `parent` (any case); `-1` resets to the default 1, as sacctmgr.
    pub fn parse(s: &str) -> Result<Shares, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("parent") {
            return Ok(Shares::Parent);
        }
        if s == "-1" {
            return Ok(Shares::default());
        }
        s.parse::<u32>()
            .map(Shares::Raw)
            .map_err(|_| format!("Invalid Fairshare '{s}': expected a number or 'parent'"))
    }
}

impl fmt::Display for Shares {
    /// `1`, or `parent` as sacctmgr prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shares::Raw(n) => write!(f, "{n}"),
            Shares::Parent => f.write_str("parent"),
        }
    }
}

/// A cluster record (`sacctmgr add cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    pub name: String,
}

/// An account: a node of the association tree (account record plus its association).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub name: String,
    /// Parent account; `None` only for `root`.
    pub parent: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub organization: String,
    #[serde(default)]
    pub shares: Shares,
    /// Default QOS for jobs under this account when a user association sets none.
    #[serde(default)]
    pub default_qos: Option<String>,
    /// QOS allowed under this account; empty means inherited from the parent
    /// (root's empty list means `normal`).
    #[serde(default)]
    pub qos: Vec<String>,
    #[serde(default)]
    pub limits: Limits,
    /// Slurm's association id (sshare `ID`, sacctmgr `ID`): given once, in creation
    /// order, never reused; 0 until [`AssocTree::assign_ids`] gives one.
    #[serde(default)]
    pub id: u32,
}

impl Account {
    /// An account with Slurm's defaults (shares 1, no limits, QOS inherited);
    /// description and organization default to the name as sacctmgr does.
    pub fn new(name: &str, parent: Option<&str>) -> Account {
        Account {
            name: name.to_string(),
            parent: parent.map(str::to_string),
            description: name.to_string(),
            organization: name.to_string(),
            shares: Shares::default(),
            default_qos: None,
            qos: Vec::new(),
            limits: Limits::default(),
            id: 0,
        }
    }
}

/// `AdminLevel=` of a user (sacctmgr(1)): who may change accounting and the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AdminLevel {
    #[default]
    None,
    Operator,
    Administrator,
}

impl AdminLevel {
    /// Slurm's text: `None`, `Operator`, `Administrator`.
    pub fn as_str(self) -> &'static str {
        match self {
            AdminLevel::None => "None",
            AdminLevel::Operator => "Operator",
            AdminLevel::Administrator => "Administrator",
        }
    }

    /// Parses the text above in any case, plus `Admin`.
    pub fn parse(s: &str) -> Result<AdminLevel, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(AdminLevel::None),
            "operator" => Ok(AdminLevel::Operator),
            "admin" | "administrator" => Ok(AdminLevel::Administrator),
            _ => Err(format!(
                "Invalid AdminLevel '{s}': expected None, Operator or Administrator"
            )),
        }
    }
}

/// A user record (`sacctmgr add user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    /// The account a job runs under when `--account` is not given.
    pub default_account: String,
    #[serde(default)]
    pub admin_level: AdminLevel,
    /// Accounts this user coordinates directly (`sacctmgr add coordinator`); they
    /// coordinate these accounts' sub-accounts too (see
    /// [`AssocTree::coordinates`]).
    #[serde(default)]
    pub coord_accounts: Vec<String>,
}

/// A user's association with an account (optionally for one partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserAssoc {
    pub user: String,
    pub account: String,
    /// `None` means every partition.
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub shares: Shares,
    /// Default QOS for this user's jobs under this account; `None` inherits.
    #[serde(default)]
    pub default_qos: Option<String>,
    /// QOS allowed; empty means inherited from the account chain.
    #[serde(default)]
    pub qos: Vec<String>,
    #[serde(default)]
    pub limits: Limits,
    /// Slurm's association id (see [`Account::id`]).
    #[serde(default)]
    pub id: u32,
}

impl UserAssoc {
    /// An association with Slurm's defaults (shares 1, inherited QOS, no limits).
    pub fn new(user: &str, account: &str, partition: Option<&str>) -> UserAssoc {
        UserAssoc {
            user: user.to_string(),
            account: account.to_string(),
            partition: partition.map(str::to_string),
            shares: Shares::default(),
            default_qos: None,
            qos: Vec::new(),
            limits: Limits::default(),
            id: 0,
        }
    }
}

/// `PreemptMode=` of a QOS (cf. slurm.conf(5) PreemptMode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptMode {
    /// `cluster`: use the cluster-wide PreemptMode (the QOS default).
    #[default]
    Cluster,
    Off,
    Cancel,
    Requeue,
    Suspend,
}

impl PreemptMode {
    /// Slurm's text as sacctmgr prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptMode::Cluster => "cluster",
            PreemptMode::Off => "OFF",
            PreemptMode::Cancel => "CANCEL",
            PreemptMode::Requeue => "REQUEUE",
            PreemptMode::Suspend => "SUSPEND",
        }
    }

    /// Parses the names above in any case.
    pub fn parse(s: &str) -> Result<PreemptMode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cluster" => Ok(PreemptMode::Cluster),
            "off" => Ok(PreemptMode::Off),
            "cancel" => Ok(PreemptMode::Cancel),
            "requeue" => Ok(PreemptMode::Requeue),
            "suspend" => Ok(PreemptMode::Suspend),
            _ => Err(format!("Invalid PreemptMode '{s}'")),
        }
    }
}

/// One QOS flag (sacctmgr(1) QOS `Flags=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QosFlag {
    DenyOnLimit,
    EnforceUsageThreshold,
    NoDecay,
    NoReserve,
    OverPartQos,
    PartitionMaxNodes,
    PartitionMinNodes,
    PartitionTimeLimit,
    RequiresReservation,
    UsageFactorSafe,
    Relative,
}

impl QosFlag {
    const ALL: [QosFlag; 11] = [
        QosFlag::DenyOnLimit,
        QosFlag::EnforceUsageThreshold,
        QosFlag::NoDecay,
        QosFlag::NoReserve,
        QosFlag::OverPartQos,
        QosFlag::PartitionMaxNodes,
        QosFlag::PartitionMinNodes,
        QosFlag::PartitionTimeLimit,
        QosFlag::RequiresReservation,
        QosFlag::UsageFactorSafe,
        QosFlag::Relative,
    ];

    /// Slurm's text (`DenyOnLimit`, `OverPartQOS`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            QosFlag::DenyOnLimit => "DenyOnLimit",
            QosFlag::EnforceUsageThreshold => "EnforceUsageThreshold",
            QosFlag::NoDecay => "NoDecay",
            QosFlag::NoReserve => "NoReserve",
            QosFlag::OverPartQos => "OverPartQOS",
            QosFlag::PartitionMaxNodes => "PartitionMaxNodes",
            QosFlag::PartitionMinNodes => "PartitionMinNodes",
            QosFlag::PartitionTimeLimit => "PartitionTimeLimit",
            QosFlag::RequiresReservation => "RequiresReservation",
            QosFlag::UsageFactorSafe => "UsageFactorSafe",
            QosFlag::Relative => "Relative",
        }
    }

    /// Parses a flag name in any case.
    pub fn parse(s: &str) -> Result<QosFlag, String> {
        let t = s.trim();
        QosFlag::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| format!("Invalid QOS flag '{t}'"))
    }
}

/// A quality of service (`sacctmgr add qos`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qos {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `Priority=`: the QOS priority factor's raw value (normalised by the highest
    /// QOS priority in multifactor priority).
    #[serde(default)]
    pub priority: u32,
    /// `Preempt=`: QOS this one may preempt.
    #[serde(default)]
    pub preempt: Vec<String>,
    #[serde(default)]
    pub preempt_mode: PreemptMode,
    /// `PreemptExemptTime=`: seconds a job of this QOS runs before it may be preempted.
    #[serde(default)]
    pub preempt_exempt_secs: Option<u32>,
    /// `GraceTime=`: seconds between the preemption signal and the kill.
    #[serde(default)]
    pub grace_time_secs: u32,
    #[serde(default)]
    pub flags: Vec<QosFlag>,
    /// `UsageFactor=`: multiplier on the usage this QOS's jobs record (default 1.0).
    #[serde(default = "one")]
    pub usage_factor: f64,
    #[serde(default)]
    pub limits: Limits,
    /// `UsageThreshold`: with the flag EnforceUsageThreshold, a job whose
    /// association's fair-share factor is below this (0..1) does not start (reason
    /// `QOSUsageThreshold`; cf. job_scheduler.c `_job_runnable_test2`). `None`: unset.
    #[serde(default)]
    pub usage_threshold: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl Qos {
    /// A QOS with Slurm's defaults (priority 0, mode cluster, usage factor 1, no limits);
    /// the description defaults to the name.
    pub fn new(name: &str) -> Qos {
        Qos {
            name: name.to_string(),
            description: name.to_string(),
            priority: 0,
            preempt: Vec::new(),
            preempt_mode: PreemptMode::Cluster,
            preempt_exempt_secs: None,
            grace_time_secs: 0,
            flags: Vec::new(),
            usage_factor: 1.0,
            limits: Limits::default(),
            usage_threshold: None,
        }
    }

    /// Whether `flag` is set.
    pub fn has_flag(&self, flag: QosFlag) -> bool {
        self.flags.contains(&flag)
    }
}

/// `AccountingStorageEnforce=` (slurm.conf(5)): which policies are enforced at submit
/// and scheduling. `limits` implies `associations`; `qos` implies `associations`;
/// `safe` implies `associations` and `limits`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforce {
    /// A job must run under an existing association.
    pub associations: bool,
    /// Association and QOS limits are applied.
    pub limits: bool,
    /// A job's QOS must be one its association may use.
    pub qos: bool,
    /// A job that would pass GrpTRESMins/GrpWall only if it ran to its time limit
    /// starts only if it can finish within them.
    pub safe: bool,
}

impl Enforce {
    /// Parses Slurm's comma list (`associations,limits,qos,safe`; `all`; `none`; `wckeys`
    /// and `nojobs`/`nosteps` are accepted and have no effect here). Implied flags are set.
    pub fn parse(s: &str) -> Result<Enforce, String> {
        let mut e = Enforce::default();
        for w in s.split(',').map(|w| w.trim().to_ascii_lowercase()) {
            match w.as_str() {
                "" | "none" | "0" => {}
                "associations" | "assoc" => e.associations = true,
                "limits" => e.limits = true,
                "qos" => e.qos = true,
                "safe" => e.safe = true,
                "all" | "1" => {
                    e.limits = true;
                    e.qos = true;
                    e.safe = true;
                }
                "wckeys" | "nojobs" | "nosteps" => {}
                _ => return Err(format!("Invalid AccountingStorageEnforce value '{w}'")),
            }
        }
        if e.safe {
            e.limits = true;
        }
        if e.limits || e.qos {
            e.associations = true;
        }
        Ok(e)
    }

    /// Slurm's text as `scontrol show config` prints it (`associations,limits,qos,safe`,
    /// or `none`).
    pub fn as_text(self) -> String {
        let mut v = Vec::new();
        if self.associations {
            v.push("associations");
        }
        if self.limits {
            v.push("limits");
        }
        if self.qos {
            v.push("qos");
        }
        if self.safe {
            v.push("safe");
        }
        if v.is_empty() {
            "none".into()
        } else {
            v.join(",")
        }
    }
}

/// The whole accounting policy of a controller: clusters, the account tree, users,
/// user associations and QOS. See the module docs for the invariants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssocTree {
    pub clusters: Vec<Cluster>,
    /// Accounts by name, `root` included.
    pub accounts: BTreeMap<String, Account>,
    /// Users by name.
    pub users: BTreeMap<String, User>,
    /// User associations, in the order they were added.
    pub user_assocs: Vec<UserAssoc>,
    /// QOS by name, `normal` included.
    pub qos: BTreeMap<String, Qos>,
    /// The last association id given ([`AssocTree::assign_ids`]).
    #[serde(default)]
    pub last_id: u32,
}

impl Default for AssocTree {
    /// The tree every controller starts with, as `sacctmgr add cluster` makes it in
    /// Slurm: account `root`, user `root` (Administrator) associated with it, and QOS
    /// `normal`.
    fn default() -> AssocTree {
        let mut accounts = BTreeMap::new();
        accounts.insert(ROOT.to_string(), {
            let mut a = Account::new(ROOT, None);
            a.description = "default root account".into();
            a.organization = ROOT.into();
            a
        });
        let mut qos = BTreeMap::new();
        let mut normal = Qos::new(NORMAL_QOS);
        normal.description = "Normal QOS default".into();
        qos.insert(NORMAL_QOS.to_string(), normal);
        let mut users = BTreeMap::new();
        users.insert(
            ROOT.to_string(),
            User {
                name: ROOT.into(),
                default_account: ROOT.into(),
                admin_level: AdminLevel::Administrator,
                coord_accounts: Vec::new(),
            },
        );
        let mut t = AssocTree {
            clusters: Vec::new(),
            accounts,
            users,
            user_assocs: vec![UserAssoc::new(ROOT, ROOT, None)],
            qos,
            last_id: 0,
        };
        t.assign_ids();
        t
    }
}

impl AssocTree {
    /// Gives every association without an id (0) the next one, as slurmdbd numbers
    /// associations when they are created: the root account first, then accounts by
    /// name, then user associations in the order they were added. The next id follows
    /// both [`AssocTree::last_id`] (so a removed association's id is not given again)
    /// and the largest in use.
    pub fn assign_ids(&mut self) {
        let top = self
            .accounts
            .values()
            .map(|a| a.id)
            .chain(self.user_assocs.iter().map(|a| a.id))
            .max()
            .unwrap_or(0);
        let mut next = self.last_id.max(top);
        let mut give = |id: &mut u32| {
            if *id == 0 {
                next += 1;
                *id = next;
            }
        };
        if let Some(r) = self.accounts.get_mut(ROOT) {
            give(&mut r.id);
        }
        for a in self.accounts.values_mut() {
            give(&mut a.id);
        }
        for a in &mut self.user_assocs {
            give(&mut a.id);
        }
        self.last_id = next;
    }

    /// Whether anything beyond the initial tree (root account, root user, `normal`)
    /// was defined: another user or account. Personal mode runs with an undefined
    /// tree, and enforcement defaults to off then (see `config`).
    pub fn is_defined(&self) -> bool {
        self.users.keys().any(|u| u != ROOT) || self.accounts.len() > 1
    }

    /// The root account.
    pub fn root(&self) -> &Account {
        // The invariant: root is created by `default()` and can never be removed.
        &self.accounts[ROOT]
    }

    /// The account named `name`.
    pub fn account(&self, name: &str) -> Option<&Account> {
        self.accounts.get(name)
    }

    /// The user named `name`.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// The QOS named `name`.
    pub fn qos(&self, name: &str) -> Option<&Qos> {
        self.qos.get(name)
    }

    /// A user's default account, if the user exists.
    pub fn default_account(&self, user: &str) -> Option<&str> {
        self.users.get(user).map(|u| u.default_account.as_str())
    }

    /// The association a job of `user` under `account` in `partition` runs under:
    /// the partition-specific one if there is one, else the one for all partitions
    /// (Slurm's lookup order).
    pub fn find_assoc(&self, user: &str, account: &str, partition: &str) -> Option<&UserAssoc> {
        let mine = || {
            self.user_assocs
                .iter()
                .filter(move |a| a.user == user && a.account == account)
        };
        mine()
            .find(|a| a.partition.as_deref() == Some(partition))
            .or_else(|| mine().find(|a| a.partition.is_none()))
    }

    /// The user associations of `user`.
    pub fn assocs_of_user<'a>(&'a self, user: &'a str) -> impl Iterator<Item = &'a UserAssoc> {
        self.user_assocs.iter().filter(move |a| a.user == user)
    }

    /// The user associations directly under `account`.
    pub fn users_under<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a UserAssoc> {
        self.user_assocs
            .iter()
            .filter(move |a| a.account == account)
    }

    /// The accounts whose parent is `account`, by name.
    pub fn child_accounts<'a>(&'a self, account: &'a str) -> impl Iterator<Item = &'a Account> {
        self.accounts
            .values()
            .filter(move |a| a.parent.as_deref() == Some(account))
    }

    /// `account` and its ancestors, nearest first, ending with `root`. Empty when the
    /// account does not exist. Stops (instead of looping) on a broken parent link.
    pub fn parent_chain(&self, account: &str) -> Vec<&Account> {
        let mut out: Vec<&Account> = Vec::new();
        let mut cur = self.accounts.get(account);
        while let Some(a) = cur {
            if out.iter().any(|o| o.name == a.name) {
                break;
            }
            out.push(a);
            cur = a.parent.as_deref().and_then(|p| self.accounts.get(p));
        }
        out
    }

    /// Whether `account` is `ancestor` or below it.
    pub fn is_under(&self, account: &str, ancestor: &str) -> bool {
        self.parent_chain(account)
            .iter()
            .any(|a| a.name == ancestor)
    }

    /// Depth of an account below root (root is 0).
    pub fn depth(&self, account: &str) -> usize {
        self.parent_chain(account).len().saturating_sub(1)
    }

    /// The QOS a user association may use: its own list, else the nearest account's
    /// non-empty list up the chain, else `normal`.
    pub fn allowed_qos(&self, assoc: &UserAssoc) -> Vec<String> {
        if !assoc.qos.is_empty() {
            return assoc.qos.clone();
        }
        self.account_qos(&assoc.account)
    }

    /// The QOS an account may use (its own list or the nearest ancestor's; `normal`
    /// when none in the chain sets one).
    pub fn account_qos(&self, account: &str) -> Vec<String> {
        self.parent_chain(account)
            .into_iter()
            .find(|a| !a.qos.is_empty())
            .map(|a| a.qos.clone())
            .unwrap_or_else(|| vec![NORMAL_QOS.to_string()])
    }

    /// The QOS a job under this association gets when it names none: the
    /// association's default, else the nearest account's, else `normal` if allowed,
    /// else the first allowed one.
    pub fn default_qos(&self, assoc: &UserAssoc) -> String {
        if let Some(q) = &assoc.default_qos {
            return q.clone();
        }
        if let Some(q) = self
            .parent_chain(&assoc.account)
            .into_iter()
            .find_map(|a| a.default_qos.clone())
        {
            return q;
        }
        let allowed = self.allowed_qos(assoc);
        if allowed.iter().any(|q| q == NORMAL_QOS) {
            NORMAL_QOS.to_string()
        } else {
            allowed
                .into_iter()
                .next()
                .unwrap_or_else(|| NORMAL_QOS.into())
        }
    }

    /// Whether any account, user association or QOS sets a limit on usage over time
    /// (`GrpTRESMins`, `GrpWall`, `MaxTRESMinsPerJob`): the limits that can end a
    /// running job.
    pub fn has_usage_limits(&self) -> bool {
        let set = |l: &Limits| {
            !l.grp_tres_mins.is_empty()
                || l.grp_wall_mins.is_some()
                || !l.max_tres_mins_per_job.is_empty()
        };
        self.accounts.values().any(|a| set(&a.limits))
            || self.user_assocs.iter().any(|a| set(&a.limits))
            || self.qos.values().any(|q| set(&q.limits))
    }

    /// Whether `user` coordinates `account`: they were made coordinator of it or of
    /// an account above it (Slurm: a coordinator of an account is one of all its
    /// sub-accounts).
    pub fn coordinates(&self, user: &str, account: &str) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.coord_accounts.iter().any(|c| self.is_under(account, c)))
    }

    /// Whether anyone coordinates an account.
    pub fn has_coordinators(&self) -> bool {
        self.users.values().any(|u| !u.coord_accounts.is_empty())
    }

    /// The accounts `user` coordinates, sub-accounts included, by name (what
    /// `sacctmgr show user withcoord` lists).
    pub fn coord_accounts_of(&self, user: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .accounts
            .keys()
            .filter(|a| self.coordinates(user, a))
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// The users who coordinate `account`, directly or through an account above it,
    /// by name (what `sacctmgr show account withcoord` lists).
    pub fn coordinators_of(&self, account: &str) -> Vec<String> {
        self.users
            .values()
            .filter(|u| self.coordinates(&u.name, account))
            .map(|u| u.name.clone())
            .collect()
    }

    /// The highest `Priority` of any QOS (multifactor normalises the QOS factor by it);
    /// 0 when every QOS has priority 0.
    pub fn max_qos_priority(&self) -> u32 {
        self.qos.values().map(|q| q.priority).max().unwrap_or(0)
    }

    /// Checks the invariants in the module docs; the error names the first broken one.
    pub fn check(&self) -> Result<(), String> {
        let root = self
            .accounts
            .get(ROOT)
            .ok_or_else(|| "the root account is missing".to_string())?;
        if root.parent.is_some() {
            return Err("the root account has a parent".into());
        }
        for a in self.accounts.values() {
            if a.name == ROOT {
                continue;
            }
            let Some(p) = &a.parent else {
                return Err(format!("account {} has no parent", a.name));
            };
            if !self.accounts.contains_key(p) {
                return Err(format!("account {}'s parent {p} does not exist", a.name));
            }
            if self.parent_chain(&a.name).last().map(|r| r.name.as_str()) != Some(ROOT) {
                return Err(format!("account {} is not below root", a.name));
            }
        }
        for ua in &self.user_assocs {
            if !self.accounts.contains_key(&ua.account) {
                return Err(format!(
                    "user {}'s association names missing account {}",
                    ua.user, ua.account
                ));
            }
            if !self.users.contains_key(&ua.user) {
                return Err(format!("association for missing user {}", ua.user));
            }
        }
        for u in self.users.values() {
            if let Some(a) = u
                .coord_accounts
                .iter()
                .find(|a| !self.accounts.contains_key(*a))
            {
                return Err(format!("user {} coordinates missing account {a}", u.name));
            }
            if !self
                .user_assocs
                .iter()
                .any(|a| a.user == u.name && a.account == u.default_account)
            {
                return Err(format!(
                    "user {}'s default account {} has no association",
                    u.name, u.default_account
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> AssocTree {
        let mut t = AssocTree::default();
        t.accounts
            .insert("phys".into(), Account::new("phys", Some(ROOT)));
        t.accounts
            .insert("theory".into(), Account::new("theory", Some("phys")));
        t.users.insert(
            "alice".into(),
            User {
                name: "alice".into(),
                default_account: "theory".into(),
                admin_level: AdminLevel::None,
                coord_accounts: Vec::new(),
            },
        );
        t.user_assocs.push(UserAssoc::new("alice", "theory", None));
        t.user_assocs
            .push(UserAssoc::new("alice", "theory", Some("gpu")));
        t
    }

    #[test]
    fn new_tree_has_root_and_normal_and_is_undefined() {
        let t = AssocTree::default();
        assert_eq!(t.root().name, "root");
        assert!(t.qos("normal").is_some());
        assert!(!t.is_defined());
        t.check().unwrap();
    }

    #[test]
    fn parent_chain_walks_to_root() {
        let t = tree();
        let names: Vec<_> = t
            .parent_chain("theory")
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        assert_eq!(names, ["theory", "phys", "root"]);
        assert!(t.is_under("theory", "phys"));
        assert!(!t.is_under("phys", "theory"));
        assert_eq!(t.depth("theory"), 2);
        assert!(t.parent_chain("nope").is_empty());
        assert!(t.is_defined());
        t.check().unwrap();
    }

    #[test]
    fn parent_chain_stops_on_cycle_and_check_reports_it() {
        let mut t = tree();
        t.accounts.get_mut("phys").unwrap().parent = Some("theory".into());
        assert_eq!(t.parent_chain("theory").len(), 2);
        assert!(t.check().unwrap_err().contains("not below root"));
    }

    #[test]
    fn partition_assoc_wins_over_general() {
        let t = tree();
        assert_eq!(
            t.find_assoc("alice", "theory", "gpu")
                .unwrap()
                .partition
                .as_deref(),
            Some("gpu")
        );
        assert_eq!(
            t.find_assoc("alice", "theory", "cpu").unwrap().partition,
            None
        );
        assert!(t.find_assoc("alice", "phys", "cpu").is_none());
        assert_eq!(t.default_account("alice"), Some("theory"));
    }

    #[test]
    fn qos_inherits_down_the_chain() {
        let mut t = tree();
        let a = t.find_assoc("alice", "theory", "x").unwrap().clone();
        assert_eq!(t.allowed_qos(&a), ["normal"]);
        assert_eq!(t.default_qos(&a), "normal");
        t.accounts.get_mut("phys").unwrap().qos = vec!["high".into(), "low".into()];
        assert_eq!(t.allowed_qos(&a), ["high", "low"]);
        assert_eq!(t.default_qos(&a), "high");
        t.accounts.get_mut("theory").unwrap().default_qos = Some("low".into());
        assert_eq!(t.default_qos(&a), "low");
    }

    #[test]
    fn tres_parse_and_print_in_slurm_order() {
        let m = TresMap::parse("gres/gpu=2,mem=10G,CPU=4,node=1").unwrap();
        assert_eq!(m.get("mem"), Some(10240));
        assert_eq!(m.to_string(), "cpu=4,mem=10G,node=1,gres/gpu=2");
        assert_eq!(TresMap::parse("mem=1536").unwrap().to_string(), "mem=1536M");
        assert_eq!(TresMap::parse("gpu=1").unwrap().get("gres/gpu"), Some(1));
        assert!(TresMap::parse("cpu=x").is_err());
        assert!(TresMap::parse("bogus=1").is_err());
        assert!(TresMap::parse("cpu").is_err());
        assert!(TresMap::parse("cpu=-1").is_err());
        let mut m = TresMap::parse("cpu=4,gres/gpu=2").unwrap();
        m.apply_update(&TresMap::parse_update("cpu=-1,node=3").unwrap());
        assert_eq!(m.to_string(), "node=3,gres/gpu=2");
    }

    #[test]
    fn enforce_implications() {
        let e = Enforce::parse("safe").unwrap();
        assert!(e.associations && e.limits && e.safe && !e.qos);
        assert_eq!(e.as_text(), "associations,limits,safe");
        let e = Enforce::parse("qos").unwrap();
        assert!(e.associations && e.qos && !e.limits);
        assert_eq!(Enforce::parse("").unwrap().as_text(), "none");
        assert!(Enforce::parse("bogus").is_err());
    }

    #[test]
    fn words_parse() {
        assert_eq!(Shares::parse("parent").unwrap(), Shares::Parent);
        assert_eq!(Shares::parse("70").unwrap(), Shares::Raw(70));
        assert!(Shares::parse("x").is_err());
        assert_eq!(
            AdminLevel::parse("admin").unwrap(),
            AdminLevel::Administrator
        );
        assert_eq!(PreemptMode::parse("requeue").unwrap().as_str(), "REQUEUE");
        assert_eq!(
            QosFlag::parse("overpartqos").unwrap().as_str(),
            "OverPartQOS"
        );
        assert!(QosFlag::parse("x").is_err());
    }
}
