//! Scheduler parameters as configured (slurm.conf `SchedulerType`,
//! `SchedulerParameters=bf_*`, `PriorityWeight*`): plain data read by the pure
//! scheduler (`crate::sched`) and filled from the TOML file.

use serde::{Deserialize, Serialize};

/// Backfill flavour (`SchedulerType`/`sluice simulate --policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Policy {
    /// First come, first served: no job passes a blocked one (sched/builtin).
    Fifo,
    /// EASY backfill: only the first blocked job of each partition holds a reservation.
    Easy,
    /// Conservative backfill: every job tested holds a reservation (sched/backfill).
    #[default]
    Conservative,
    /// EASY backfill whose candidates behind the reserved job are tried shortest
    /// time limit first (SJF backfill order): the reserved job is never delayed, and
    /// short jobs get the holes first.
    EasySjf,
}

impl Policy {
    /// Parses `fifo`/`fcfs`, `easy`, `conservative`, `easy-sjf`.
    pub fn parse(s: &str) -> Option<Policy> {
        match s.to_ascii_lowercase().as_str() {
            "fifo" | "fcfs" | "builtin" => Some(Policy::Fifo),
            "easy" => Some(Policy::Easy),
            "conservative" | "backfill" => Some(Policy::Conservative),
            "easy-sjf" => Some(Policy::EasySjf),
            _ => None,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Easy => "easy",
            Policy::Conservative => "conservative",
            Policy::EasySjf => "easy-sjf",
        }
    }

    /// Whether only the first blocked job of each partition holds a reservation.
    pub fn is_easy(self) -> bool {
        matches!(self, Policy::Easy | Policy::EasySjf)
    }
}

/// Scheduler parameters (`SchedulerParameters=bf_*`, priority weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedConfig {
    pub policy: Policy,
    /// How far ahead backfill plans, seconds (`bf_window`, default one day).
    pub bf_window: i64,
    /// Granularity of planned start times, seconds (`bf_resolution`).
    pub bf_resolution: i64,
    /// Most pending jobs backfill tests per pass (`bf_max_job_test`).
    pub bf_max_job_test: usize,
    /// Most jobs per user backfill tests per pass; 0 = no limit (`bf_max_job_user`).
    pub bf_max_job_user: usize,
    /// Resume where the previous pass stopped (`bf_continue`); sluice's passes are
    /// never interrupted, so this only affects reporting.
    pub bf_continue: bool,
    /// Seconds between backfill passes (`bf_interval`), used by the controller.
    pub bf_interval: i64,
    pub priority: PriorityConfig,
    /// Preemption (`preempt_type`, `preempt_mode`, `preempt_exempt_time`).
    #[serde(default)]
    pub preempt: crate::model::preempt::PreemptConfig,
    /// Switches or blocks placement packs jobs into (`[topology]`, topology.conf).
    #[serde(default)]
    pub topology: crate::model::topology::Topology,
    /// Longest a `--switches=N@wait` job waits for N leaf switches, seconds, and the
    /// wait of `--switches=N` without `@` (`SchedulerParameters=max_switch_wait`,
    /// default 300).
    #[serde(default = "default_max_switch_wait")]
    pub max_switch_wait: i64,
}

fn default_max_switch_wait() -> i64 {
    300
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            policy: Policy::Conservative,
            bf_window: 86400,
            bf_resolution: 60,
            bf_max_job_test: 500,
            bf_max_job_user: 0,
            bf_continue: false,
            bf_interval: 30,
            priority: PriorityConfig::default(),
            preempt: Default::default(),
            topology: Default::default(),
            max_switch_wait: default_max_switch_wait(),
        }
    }
}

/// Weights and options (`PriorityWeight*`, `PriorityMaxAge`, `PriorityFavorSmall`,
/// `PriorityFlags=SMALL_RELATIVE_TO_TIME`). Defaults are those of the golden cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityConfig {
    pub weight_age: u32,
    pub weight_assoc: u32,
    pub weight_fairshare: u32,
    pub weight_jobsize: u32,
    pub weight_partition: u32,
    pub weight_qos: u32,
    /// `PriorityWeightTRES`: (TRES name such as `cpu`, `mem`, `gres/gpu`, weight).
    pub weight_tres: Vec<(String, f64)>,
    /// Seconds of eligibility at which the age factor reaches 1 (`PriorityMaxAge`).
    pub max_age: i64,
    pub favor_small: bool,
    pub small_relative_to_time: bool,
    /// Half-life of recorded usage in seconds (`PriorityDecayHalfLife`).
    pub decay_half_life: i64,
    /// Fair Tree, or classic with `PriorityFlags=NO_FAIR_TREE`.
    #[serde(default)]
    pub fairshare_algorithm: Algorithm,
    /// `PriorityUsageResetPeriod`.
    #[serde(default)]
    pub usage_reset: ResetPeriod,
    /// `PriorityFlags=MAX_TRES`: a job is billed its largest weighted per-node TRES
    /// plus its global ones (see `model::billing`); the weights themselves are the
    /// partitions' (`Partition::billing_weights`).
    #[serde(default)]
    pub max_tres: bool,
    /// Accounts of the fair-share tree as configured (`[[accounts]]`).
    #[serde(default)]
    pub accounts: Vec<AccountDef>,
    /// User associations as configured (each account's `users`).
    #[serde(default)]
    pub user_assocs: Vec<UserDef>,
}

impl Default for PriorityConfig {
    fn default() -> Self {
        PriorityConfig {
            weight_age: 1000,
            weight_assoc: 0,
            weight_fairshare: 10000,
            weight_jobsize: 1000,
            weight_partition: 1000,
            weight_qos: 0,
            weight_tres: Vec::new(),
            max_age: 7 * 86400,
            favor_small: false,
            small_relative_to_time: false,
            decay_half_life: 7 * 86400,
            fairshare_algorithm: Default::default(),
            usage_reset: Default::default(),
            max_tres: false,
            accounts: Vec::new(),
            user_assocs: Vec::new(),
        }
    }
}

/// Which fair-share algorithm computes the factor (`PriorityFlags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Algorithm {
    /// Fair Tree (Slurm's default since 19.05).
    #[default]
    FairTree,
    /// The classic formula `2^(-U/S)` (`PriorityFlags=NO_FAIR_TREE`).
    Classic,
}

/// `PriorityUsageResetPeriod`: when all recorded usage is cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ResetPeriod {
    /// Never (rely on decay).
    #[default]
    None,
    /// Once, when the controller next starts.
    Now,
    /// At 00:00 UTC every day.
    Daily,
    /// At 00:00 UTC every Sunday.
    Weekly,
    /// At 00:00 UTC on the first of each month.
    Monthly,
    /// At 00:00 UTC on the first of January, April, July and October.
    Quarterly,
    /// At 00:00 UTC on the first of January.
    Yearly,
}

impl ResetPeriod {
    /// Parses Slurm's names (case-insensitive): NONE, NOW, DAILY, WEEKLY, MONTHLY,
    /// QUARTERLY, YEARLY.
    pub fn parse(s: &str) -> Option<ResetPeriod> {
        Some(match s.to_ascii_uppercase().as_str() {
            "NONE" => ResetPeriod::None,
            "NOW" => ResetPeriod::Now,
            "DAILY" => ResetPeriod::Daily,
            "WEEKLY" => ResetPeriod::Weekly,
            "MONTHLY" => ResetPeriod::Monthly,
            "QUARTERLY" => ResetPeriod::Quarterly,
            "YEARLY" => ResetPeriod::Yearly,
            _ => return None,
        })
    }

    /// Slurm's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            ResetPeriod::None => "NONE",
            ResetPeriod::Now => "NOW",
            ResetPeriod::Daily => "DAILY",
            ResetPeriod::Weekly => "WEEKLY",
            ResetPeriod::Monthly => "MONTHLY",
            ResetPeriod::Quarterly => "QUARTERLY",
            ResetPeriod::Yearly => "YEARLY",
        }
    }
}

/// An account as configured (sacctmgr `add account NAME parent=P fairshare=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountDef {
    pub name: String,
    /// `None` (or an unknown name): under root.
    pub parent: Option<String>,
    pub shares: u32,
}

/// A user association as configured (`add user U account=A fairshare=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDef {
    pub user: String,
    pub account: String,
    pub shares: u32,
}
