//! Preemption vocabulary (cf. slurm.conf `PreemptType`, `PreemptMode`,
//! `PreemptExemptTime`, partition `PreemptMode=`/`GraceTime=`, QOS `Preempt=`,
//! `PreemptMode=`, `GraceTime=`): plain data shared by the configuration, the pure
//! planner (`sched::preempt`) and the controller.

use serde::{Deserialize, Serialize};

/// `PreemptType`: which jobs may preempt which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreemptType {
    /// `preempt/none` (Slurm's default): nothing is preempted.
    #[default]
    None,
    /// `preempt/partition_prio`: a pending job may preempt jobs running in partitions
    /// of a lower `PriorityTier` than its own.
    PartitionPrio,
    /// `preempt/qos`: a pending job may preempt jobs whose QOS is in its QOS's
    /// `Preempt=` list.
    Qos,
}

impl PreemptType {
    /// Parses `preempt/none`, `preempt/partition_prio`, `preempt/qos` (the `preempt/`
    /// prefix is optional, any case).
    pub fn parse(s: &str) -> Option<PreemptType> {
        let l = s.trim().to_ascii_lowercase();
        match l.strip_prefix("preempt/").unwrap_or(&l) {
            "none" => Some(PreemptType::None),
            "partition_prio" => Some(PreemptType::PartitionPrio),
            "qos" => Some(PreemptType::Qos),
            _ => None,
        }
    }

    /// Slurm's name (`preempt/qos`), as `scontrol show config` prints it.
    pub fn name(self) -> &'static str {
        match self {
            PreemptType::None => "preempt/none",
            PreemptType::PartitionPrio => "preempt/partition_prio",
            PreemptType::Qos => "preempt/qos",
        }
    }
}

/// `PreemptMode`: what happens to a preempted job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PreemptMode {
    /// `OFF`: the job is never preempted.
    #[default]
    Off,
    /// `CANCEL`: the job ends in state PREEMPTED.
    Cancel,
    /// `REQUEUE`: the job goes back to the queue (if it may be requeued; else it is
    /// cancelled as with CANCEL).
    Requeue,
    /// `SUSPEND`: the job is suspended while its preemptor runs and resumed
    /// (gang-style) once the preemptor no longer needs its CPUs.
    Suspend,
}

impl PreemptMode {
    /// Parses `OFF`, `CANCEL`, `REQUEUE`, `SUSPEND`, each optionally followed by
    /// `,GANG` (accepted: sluice always resumes suspended jobs when their CPUs free up).
    pub fn parse(s: &str) -> Option<PreemptMode> {
        let mut mode = None;
        for part in s.split(',').map(|p| p.trim().to_ascii_uppercase()) {
            match part.as_str() {
                "GANG" | "WITHIN" => {}
                "OFF" => mode = Some(PreemptMode::Off),
                "CANCEL" => mode = Some(PreemptMode::Cancel),
                "REQUEUE" => mode = Some(PreemptMode::Requeue),
                "SUSPEND" => mode = Some(PreemptMode::Suspend),
                _ => return None,
            }
        }
        // `GANG` alone is Slurm's "OFF with gang scheduling".
        mode.or_else(|| (!s.trim().is_empty()).then_some(PreemptMode::Off))
    }

    /// Upper-case name as scontrol prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptMode::Off => "OFF",
            PreemptMode::Cancel => "CANCEL",
            PreemptMode::Requeue => "REQUEUE",
            PreemptMode::Suspend => "SUSPEND",
        }
    }
}

/// The cluster-wide preemption settings (`[scheduler]` keys `preempt_type`,
/// `preempt_mode`, `preempt_exempt_time`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptConfig {
    pub preempt_type: PreemptType,
    /// The mode of jobs whose partition (partition_prio) or QOS (qos) names none.
    pub mode: PreemptMode,
    /// Seconds a job runs before it may be preempted (`PreemptExemptTime`).
    pub exempt_time: u64,
}

/// What the preemption planner needs to know of one QOS (filled from the accounting
/// model's QOS records).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosPreempt {
    pub name: String,
    /// QOS names jobs of this QOS may preempt (`Preempt=`).
    pub preempt: Vec<String>,
    /// `PreemptMode=` of jobs in this QOS; `None` follows the cluster's.
    pub mode: Option<PreemptMode>,
    /// Seconds a preempted job of this QOS gets between its signal and its end
    /// (`GraceTime=`).
    pub grace_time: u32,
    /// Seconds a job of this QOS runs before it may be preempted
    /// (`PreemptExemptTime=`); `None` follows the cluster's.
    #[serde(default)]
    pub exempt_time: Option<u64>,
}

/// A running job chosen for preemption (CANCEL or REQUEUE) that is in its grace time:
/// it was signalled at `time` and is ended at `end` (scontrol `PreemptTime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    /// When it was chosen, epoch seconds.
    pub time: i64,
    /// When it is ended (`time` + GraceTime), epoch seconds.
    pub end: i64,
    /// Back to the queue (REQUEUE) rather than ended PREEMPTED (CANCEL).
    pub requeue: bool,
    /// The job it makes room for.
    pub preemptor: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_slurm_names() {
        assert_eq!(
            PreemptType::parse("preempt/partition_prio"),
            Some(PreemptType::PartitionPrio)
        );
        assert_eq!(PreemptType::parse("QOS"), Some(PreemptType::Qos));
        assert_eq!(PreemptType::parse("preempt/other"), None);
        assert_eq!(
            PreemptMode::parse("suspend,gang"),
            Some(PreemptMode::Suspend)
        );
        assert_eq!(PreemptMode::parse("GANG"), Some(PreemptMode::Off));
        assert_eq!(PreemptMode::parse("requeue"), Some(PreemptMode::Requeue));
        assert_eq!(PreemptMode::parse("kill"), None);
        assert_eq!(PreemptMode::Cancel.as_str(), "CANCEL");
    }
}
