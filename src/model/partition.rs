//! Partitions: named sets of nodes with limits and defaults (cf. slurm.conf
//! `PartitionName=`, src/slurmctld/partition_mgr.c).

use super::job::TimeLimit;
use serde::{Deserialize, Serialize};

/// Partition state (`State=` in slurm.conf and scontrol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionState {
    /// Accepts and runs jobs.
    Up,
    /// Accepts jobs, runs none (reason PartitionDown).
    Down,
    /// Accepts no new jobs, runs queued ones.
    Drain,
    /// Accepts no jobs, runs none (reason PartitionInactive).
    Inactive,
}

impl PartitionState {
    /// Upper-case text as scontrol prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionState::Up => "UP",
            PartitionState::Down => "DOWN",
            PartitionState::Drain => "DRAIN",
            PartitionState::Inactive => "INACTIVE",
        }
    }

    /// Parses `UP`, `DOWN`, `DRAIN`, `INACTIVE` in any case.
    pub fn parse(s: &str) -> Option<PartitionState> {
        match s.to_ascii_uppercase().as_str() {
            "UP" => Some(PartitionState::Up),
            "DOWN" => Some(PartitionState::Down),
            "DRAIN" => Some(PartitionState::Drain),
            "INACTIVE" => Some(PartitionState::Inactive),
            _ => None,
        }
    }
}

/// `OverSubscribe=` of a partition: whether jobs may share CPUs (cf. slurm.conf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OverSubscribe {
    /// CPUs are never shared (the default); nodes are shared by CPU.
    #[default]
    No,
    /// Jobs that ask `--oversubscribe` may share CPUs, up to `n` jobs per CPU.
    Yes(u32),
    /// Every job may share CPUs, up to `n` per CPU.
    Force(u32),
    /// Every job gets whole nodes.
    Exclusive,
}

impl OverSubscribe {
    /// Text as scontrol prints it (`NO`, `YES:4`, `FORCE:4`, `EXCLUSIVE`).
    pub fn as_text(self) -> String {
        match self {
            OverSubscribe::No => "NO".into(),
            OverSubscribe::Yes(n) => format!("YES:{n}"),
            OverSubscribe::Force(n) => format!("FORCE:{n}"),
            OverSubscribe::Exclusive => "EXCLUSIVE".into(),
        }
    }

    /// Parses `NO`, `YES[:n]`, `FORCE[:n]`, `EXCLUSIVE` (default count 4, as Slurm).
    pub fn parse(s: &str) -> Option<OverSubscribe> {
        let up = s.to_ascii_uppercase();
        let (word, n) = match up.split_once(':') {
            Some((w, n)) => (
                w.to_string(),
                Some(n.parse::<u32>().ok().filter(|n| *n > 0)?),
            ),
            None => (up.clone(), None),
        };
        match word.as_str() {
            "NO" => Some(OverSubscribe::No),
            "YES" => Some(OverSubscribe::Yes(n.unwrap_or(4))),
            "FORCE" => Some(OverSubscribe::Force(n.unwrap_or(4))),
            "EXCLUSIVE" => Some(OverSubscribe::Exclusive),
            _ => None,
        }
    }
}

/// A partition as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    /// Member node names, in configuration order.
    pub nodes: Vec<String>,
    pub default: bool,
    pub max_time: TimeLimit,
    /// `None` = Slurm's `NONE` (the job gets MaxTime).
    pub default_time: Option<TimeLimit>,
    pub min_nodes: u32,
    /// `None` = UNLIMITED.
    pub max_nodes: Option<u32>,
    pub state: PartitionState,
    pub priority_tier: u32,
    pub priority_job_factor: u32,
    /// MiB per CPU given to jobs that ask for no memory (`DefMemPerCPU`); `None` = all
    /// of the node's memory per node, as Slurm does without a default.
    pub def_mem_per_cpu: Option<u64>,
    /// Accounts allowed to run here (`AllowAccounts`); `None` = ALL.
    #[serde(default)]
    pub allow_accounts: Option<Vec<String>>,
    /// Unix groups whose members may run here (`AllowGroups`); `None` = ALL.
    #[serde(default)]
    pub allow_groups: Option<Vec<String>>,
    /// QOS allowed here (`AllowQos`); `None` = ALL.
    #[serde(default)]
    pub allow_qos: Option<Vec<String>>,
    /// Nodes are given to one user at a time (`ExclusiveUser=YES`).
    #[serde(default)]
    pub exclusive_user: bool,
    /// Not shown by sinfo/squeue unless `-a` (`Hidden=YES`).
    #[serde(default)]
    pub hidden: bool,
    #[serde(default)]
    pub oversubscribe: OverSubscribe,
    /// Largest memory per node a job may get, MiB (`MaxMemPerNode`); `None` = UNLIMITED.
    #[serde(default)]
    pub max_mem_per_node: Option<u64>,
    /// MiB per node for jobs that ask for no memory (`DefMemPerNode`), when no
    /// `DefMemPerCPU` is set.
    #[serde(default)]
    pub def_mem_per_node: Option<u64>,
    /// CPUs per allocated GPU for jobs that give no `--cpus-per-gpu` (`DefCpuPerGPU`).
    #[serde(default)]
    pub def_cpu_per_gpu: Option<u32>,
    /// MiB per allocated GPU for jobs that ask for no memory (`DefMemPerGPU`).
    #[serde(default)]
    pub def_mem_per_gpu: Option<u64>,
    /// Most CPUs a job may use per node here (`MaxCPUsPerNode`); `None` = UNLIMITED.
    #[serde(default)]
    pub max_cpus_per_node: Option<u32>,
    /// `PreemptMode=` of jobs running here (preempt/partition_prio); `None` follows
    /// the cluster's.
    #[serde(default)]
    pub preempt_mode: Option<super::preempt::PreemptMode>,
    /// Seconds a job preempted here gets between its signal and its end (`GraceTime=`).
    #[serde(default)]
    pub grace_time: u32,
    /// The partition QOS (`QOS=`): its limits apply to every job here besides the
    /// job's own QOS's, winning over them unless the job's QOS has `OverPartQOS`
    /// (see `sched::limits::Policy::qos_order`). `None`: none (`QoS=N/A`).
    #[serde(default)]
    pub qos: Option<String>,
    /// Minutes a job here may run past its time limit (`OverTimeLimit=`), overriding
    /// the cluster's; [`OVER_TIME_UNLIMITED`] for `UNLIMITED`; `None`: the cluster's
    /// (`OverTimeLimit=NONE` in scontrol).
    #[serde(default)]
    pub over_time_limit: Option<u32>,
    /// `TRESBillingWeights=`: what a job here is billed per TRES (see
    /// [`super::billing`]); `None` bills its CPUs.
    #[serde(default)]
    pub billing_weights: Option<super::billing::BillingWeights>,
}

/// OverTimeLimit `UNLIMITED` (cluster or partition): jobs are never ended for their
/// time limit.
pub const OVER_TIME_UNLIMITED: u32 = u32::MAX;

impl Partition {
    /// A partition with Slurm's defaults over the given nodes.
    pub fn new(name: &str, nodes: Vec<String>) -> Partition {
        Partition {
            name: name.to_string(),
            nodes,
            default: false,
            max_time: TimeLimit::Unlimited,
            default_time: None,
            min_nodes: 0,
            max_nodes: None,
            state: PartitionState::Up,
            priority_tier: 1,
            priority_job_factor: 1,
            def_mem_per_cpu: None,
            allow_accounts: None,
            allow_groups: None,
            allow_qos: None,
            exclusive_user: false,
            hidden: false,
            oversubscribe: OverSubscribe::No,
            max_mem_per_node: None,
            def_mem_per_node: None,
            def_cpu_per_gpu: None,
            def_mem_per_gpu: None,
            max_cpus_per_node: None,
            preempt_mode: None,
            grace_time: 0,
            qos: None,
            over_time_limit: None,
            billing_weights: None,
        }
    }

    /// The time limit a job that asked for none gets here.
    pub fn default_limit(&self) -> TimeLimit {
        self.default_time.unwrap_or(self.max_time)
    }

    /// The OverTimeLimit of jobs here, in minutes ([`OVER_TIME_UNLIMITED`]): this
    /// partition's, else `cluster`'s (slurmctld's `_job_timed_out` takes the
    /// partition's value when it is set).
    pub fn over_time(&self, cluster: u32) -> u32 {
        self.over_time_limit.unwrap_or(cluster)
    }

    /// `OverTimeLimit=` as `scontrol show partition` prints it: `NONE` when unset,
    /// `UNLIMITED`, or the minutes.
    pub fn over_time_text(&self) -> String {
        match self.over_time_limit {
            None => "NONE".into(),
            Some(OVER_TIME_UNLIMITED) => "UNLIMITED".into(),
            Some(m) => m.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversubscribe_text() {
        assert_eq!(
            OverSubscribe::parse("force:2"),
            Some(OverSubscribe::Force(2))
        );
        assert_eq!(OverSubscribe::parse("YES"), Some(OverSubscribe::Yes(4)));
        assert_eq!(
            OverSubscribe::parse("exclusive").unwrap().as_text(),
            "EXCLUSIVE"
        );
        assert_eq!(OverSubscribe::Yes(4).as_text(), "YES:4");
        assert_eq!(OverSubscribe::parse("maybe"), None);
        assert_eq!(OverSubscribe::parse("YES:0"), None);
    }
}
