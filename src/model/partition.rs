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
}

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
        }
    }

    /// The time limit a job that asked for none gets here.
    pub fn default_limit(&self) -> TimeLimit {
        self.default_time.unwrap_or(self.max_time)
    }
}
