//! Pending reasons for association and QOS limits, rendering to Slurm's exact strings
//! (cf. src/common/job_state_reason.c, the `WAIT_ASSOC_*` and `WAIT_QOS_*` entries).
//!
//! Slurm's names are irregular (`AssocGrpCpuLimit` but `AssocGrpGRES`,
//! `QOSMaxMemoryPerJob` but `AssocMaxMemPerJob`, per-account QOS limits without a
//! prefix); the table in [`LimitReason::as_str`] is the one place that knows them.

use serde::{Deserialize, Serialize};

/// Whose limit: the job's association (or an ancestor account) or its QOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    Assoc,
    Qos,
}

/// Which limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LimitKind {
    /// `GrpTRES`: running TRES of the group.
    GrpTres,
    /// `GrpTRESMins`: TRES-minutes used by the group.
    GrpTresMins,
    /// `GrpTRESRunMins`: TRES × remaining minutes of the group's running jobs.
    GrpTresRunMins,
    /// `MaxTRES` per job.
    MaxTresPerJob,
    /// `MaxTRESPerNode`.
    MaxTresPerNode,
    /// `MaxTRESMins` per job.
    MaxTresMinsPerJob,
    /// `MaxTRESPerUser` (QOS).
    MaxTresPerUser,
    /// `MaxTRESPerAccount` (QOS).
    MaxTresPerAccount,
    /// `MaxJobs` (association).
    MaxJobs,
    /// `MaxJobsPerUser` (QOS).
    MaxJobsPerUser,
    /// `MaxJobsPerAccount` (QOS).
    MaxJobsPerAccount,
    /// `GrpJobs`.
    GrpJobs,
    /// `GrpSubmitJobs`.
    GrpSubmit,
    /// `MaxSubmitJobs` (association).
    MaxSubmit,
    /// `MaxSubmitJobsPerUser` (QOS).
    MaxSubmitPerUser,
    /// `MaxSubmitJobsPerAccount` (QOS).
    MaxSubmitPerAccount,
    /// `MaxWall`.
    MaxWall,
    /// `GrpWall`.
    GrpWall,
    /// `MinTRES` per job (QOS).
    MinTresPerJob,
    /// `UsageThreshold` (QOS, with EnforceUsageThreshold).
    UsageThreshold,
}

/// The kind of TRES a TRES limit is about, as Slurm's reason names group them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TresClass {
    Cpu,
    Mem,
    Node,
    /// Any `gres/…`.
    Gres,
    Billing,
    Energy,
    /// Any `license/…`.
    License,
    /// Anything else (`fs/disk`, `vmem`, …).
    Unknown,
}

impl TresClass {
    /// The class of a TRES name (`cpu`, `gres/gpu:a100`, …).
    pub fn of(tres: &str) -> TresClass {
        match tres {
            "cpu" => TresClass::Cpu,
            "mem" => TresClass::Mem,
            "node" => TresClass::Node,
            "billing" => TresClass::Billing,
            "energy" => TresClass::Energy,
            t if t.starts_with("gres/") => TresClass::Gres,
            t if t.starts_with("license/") => TresClass::License,
            _ => TresClass::Unknown,
        }
    }
}

/// One limit reason: scope, limit and (for TRES limits) the TRES class. Non-TRES
/// limits ignore `tres`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitReason {
    pub scope: Scope,
    pub kind: LimitKind,
    pub tres: TresClass,
}

impl LimitReason {
    /// A reason for a limit that is not about a TRES (jobs, wall time).
    pub fn plain(scope: Scope, kind: LimitKind) -> LimitReason {
        LimitReason {
            scope,
            kind,
            tres: TresClass::Unknown,
        }
    }

    /// A reason for a TRES limit on `tres` (a TRES name).
    pub fn tres(scope: Scope, kind: LimitKind, tres: &str) -> LimitReason {
        LimitReason {
            scope,
            kind,
            tres: TresClass::of(tres),
        }
    }

    /// Slurm's reason text (`AssocGrpGRES`, `QOSMaxJobsPerUserLimit`, …).
    pub fn as_str(&self) -> &'static str {
        use LimitKind as K;
        use Scope::{Assoc as A, Qos as Q};
        use TresClass as T;
        // Eight names per TRES limit, in the order cpu, mem, node, gres, billing,
        // energy, license, unknown.
        let pick = |names: [&'static str; 8]| -> &'static str {
            names[match self.tres {
                T::Cpu => 0,
                T::Mem => 1,
                T::Node => 2,
                T::Gres => 3,
                T::Billing => 4,
                T::Energy => 5,
                T::License => 6,
                T::Unknown => 7,
            }]
        };
        match (self.scope, self.kind) {
            (A, K::GrpTres) => pick([
                "AssocGrpCpuLimit",
                "AssocGrpMemLimit",
                "AssocGrpNodeLimit",
                "AssocGrpGRES",
                "AssocGrpBilling",
                "AssocGrpEnergy",
                "AssocGrpLicense",
                "AssocGrpUnknown",
            ]),
            (A, K::GrpTresMins) => pick([
                "AssocGrpCPUMinutesLimit",
                "AssocGrpMemMinutes",
                "AssocGrpNodeMinutes",
                "AssocGrpGRESMinutes",
                "AssocGrpBillingMinutes",
                "AssocGrpEnergyMinutes",
                "AssocGrpLicenseMinutes",
                "AssocGrpUnknownMinutes",
            ]),
            (A, K::GrpTresRunMins) => pick([
                "AssocGrpCPURunMinutesLimit",
                "AssocGrpMemRunMinutes",
                "AssocGrpNodeRunMinutes",
                "AssocGrpGRESRunMinutes",
                "AssocGrpBillingRunMinutes",
                "AssocGrpEnergyRunMinutes",
                "AssocGrpLicenseRunMinutes",
                "AssocGrpUnknownRunMinutes",
            ]),
            (A, K::MaxTresPerJob) => pick([
                "AssocMaxCpuPerJobLimit",
                "AssocMaxMemPerJob",
                "AssocMaxNodePerJobLimit",
                "AssocMaxGRESPerJob",
                "AssocMaxBillingPerJob",
                "AssocMaxEnergyPerJob",
                "AssocMaxLicensePerJob",
                "AssocMaxUnknownPerJob",
            ]),
            (A, K::MaxTresPerNode) => pick([
                "AssocMaxCpuPerNode",
                "AssocMaxMemPerNode",
                "AssocMaxUnknownPerNode",
                "AssocMaxGRESPerNode",
                "AssocMaxBillingPerNode",
                "AssocMaxEnergyPerNode",
                "AssocMaxUnknownPerNode",
                "AssocMaxUnknownPerNode",
            ]),
            (A, K::MaxTresMinsPerJob) => pick([
                "AssocMaxCpuMinutesPerJobLimit",
                "AssocMaxMemMinutesPerJob",
                "AssocMaxNodeMinutesPerJob",
                "AssocMaxGRESMinutesPerJob",
                "AssocMaxBillingMinutesPerJob",
                "AssocMaxEnergyMinutesPerJob",
                "AssocMaxLicenseMinutesPerJob",
                "AssocMaxUnknownMinutesPerJob",
            ]),
            (Q, K::GrpTres) => pick([
                "QOSGrpCpuLimit",
                "QOSGrpMemLimit",
                "QOSGrpNodeLimit",
                "QOSGrpGRES",
                "QOSGrpBilling",
                "QOSGrpEnergy",
                "QOSGrpLicense",
                "QOSGrpUnknown",
            ]),
            (Q, K::GrpTresMins) => pick([
                "QOSGrpCPUMinutesLimit",
                "QOSGrpMemoryMinutes",
                "QOSGrpNodeMinutes",
                "QOSGrpGRESMinutes",
                "QOSGrpBillingMinutes",
                "QOSGrpEnergyMinutes",
                "QOSGrpLicenseMinutes",
                "QOSGrpUnknownMinutes",
            ]),
            (Q, K::GrpTresRunMins) => pick([
                "QOSGrpCPURunMinutesLimit",
                "QOSGrpMemoryRunMinutes",
                "QOSGrpNodeRunMinutes",
                "QOSGrpGRESRunMinutes",
                "QOSGrpBillingRunMinutes",
                "QOSGrpEnergyRunMinutes",
                "QOSGrpLicenseRunMinutes",
                "QOSGrpUnknownRunMinutes",
            ]),
            (Q, K::MaxTresPerJob) => pick([
                "QOSMaxCpuPerJobLimit",
                "QOSMaxMemoryPerJob",
                "QOSMaxNodePerJobLimit",
                "QOSMaxGRESPerJob",
                "QOSMaxBillingPerJob",
                "QOSMaxEnergyPerJob",
                "QOSMaxLicensePerJob",
                "QOSMaxUnknownPerJob",
            ]),
            (Q, K::MaxTresPerNode) => pick([
                "QOSMaxCpuPerNode",
                "QOSMaxMemoryPerNode",
                "QOSMaxUnknownPerNode",
                "QOSMaxGRESPerNode",
                "QOSMaxBillingPerNode",
                "QOSMaxEnergyPerNode",
                "QOSMaxUnknownPerNode",
                "QOSMaxUnknownPerNode",
            ]),
            (Q, K::MaxTresMinsPerJob) => pick([
                "QOSMaxCpuMinutesPerJobLimit",
                "QOSMaxMemoryMinutesPerJob",
                "QOSMaxNodeMinutesPerJob",
                "QOSMaxGRESMinutesPerJob",
                "QOSMaxBillingMinutesPerJob",
                "QOSMaxEnergyMinutesPerJob",
                "QOSMaxLicenseMinutesPerJob",
                "QOSMaxUnknownMinutesPerJob",
            ]),
            (_, K::MaxTresPerUser) => pick([
                "QOSMaxCpuPerUserLimit",
                "QOSMaxMemoryPerUser",
                "QOSMaxNodePerUserLimit",
                "QOSMaxGRESPerUser",
                "QOSMaxBillingPerUser",
                "QOSMaxEnergyPerUser",
                "QOSMaxLicensePerUser",
                "QOSMaxUnknownPerUser",
            ]),
            (_, K::MaxTresPerAccount) => pick([
                "MaxCpuPerAccount",
                "MaxMemoryPerAccount",
                "MaxNodePerAccount",
                "MaxGRESPerAccount",
                "MaxBillingPerAccount",
                "MaxEnergyPerAccount",
                "MaxLicensePerAccount",
                "MaxUnknownPerAccount",
            ]),
            (_, K::MinTresPerJob) => pick([
                "QOSMinCpuNotSatisfied",
                "QOSMinMemory",
                "QOSMinNode",
                "QOSMinGRES",
                "QOSMinBilling",
                "QOSMinEnergy",
                "QOSMinLicense",
                "QOSMinUnknown",
            ]),
            (_, K::UsageThreshold) => "QOSUsageThreshold",
            (A, K::MaxJobs) => "AssocMaxJobsLimit",
            (A, K::GrpJobs) => "AssocGrpJobsLimit",
            (A, K::GrpSubmit) => "AssocGrpSubmitJobsLimit",
            (A, K::MaxSubmit) => "AssocMaxSubmitJobLimit",
            (A, K::MaxWall) => "AssocMaxWallDurationPerJobLimit",
            (A, K::GrpWall) => "AssocGrpWallLimit",
            (Q, K::GrpJobs) => "QOSGrpJobsLimit",
            (Q, K::GrpSubmit) => "QOSGrpSubmitJobsLimit",
            (Q, K::MaxWall) => "QOSMaxWallDurationPerJobLimit",
            (Q, K::GrpWall) => "QOSGrpWallLimit",
            (_, K::MaxJobsPerUser) | (Q, K::MaxJobs) => "QOSMaxJobsPerUserLimit",
            (_, K::MaxSubmitPerUser) | (Q, K::MaxSubmit) => "QOSMaxSubmitJobPerUserLimit",
            (_, K::MaxJobsPerAccount) => "MaxJobsPerAccount",
            (_, K::MaxSubmitPerAccount) => "MaxSubmitJobsPerAccount",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_slurm() {
        use LimitKind as K;
        let a = |k, t| LimitReason::tres(Scope::Assoc, k, t).as_str();
        let q = |k, t| LimitReason::tres(Scope::Qos, k, t).as_str();
        assert_eq!(a(K::GrpTres, "cpu"), "AssocGrpCpuLimit");
        assert_eq!(a(K::GrpTres, "gres/gpu"), "AssocGrpGRES");
        assert_eq!(a(K::GrpTresMins, "gres/gpu:a100"), "AssocGrpGRESMinutes");
        assert_eq!(a(K::GrpTresRunMins, "cpu"), "AssocGrpCPURunMinutesLimit");
        assert_eq!(a(K::MaxTresPerJob, "mem"), "AssocMaxMemPerJob");
        assert_eq!(q(K::MaxTresPerJob, "mem"), "QOSMaxMemoryPerJob");
        assert_eq!(q(K::MaxTresPerUser, "gres/gpu"), "QOSMaxGRESPerUser");
        assert_eq!(q(K::GrpTres, "cpu"), "QOSGrpCpuLimit");
        assert_eq!(q(K::MaxTresPerAccount, "node"), "MaxNodePerAccount");
        let p = |s, k| LimitReason::plain(s, k).as_str();
        assert_eq!(p(Scope::Assoc, K::MaxJobs), "AssocMaxJobsLimit");
        assert_eq!(p(Scope::Assoc, K::GrpJobs), "AssocGrpJobsLimit");
        assert_eq!(
            p(Scope::Assoc, K::MaxWall),
            "AssocMaxWallDurationPerJobLimit"
        );
        assert_eq!(p(Scope::Qos, K::MaxJobsPerUser), "QOSMaxJobsPerUserLimit");
        assert_eq!(p(Scope::Qos, K::GrpJobs), "QOSGrpJobsLimit");
        assert_eq!(q(K::MinTresPerJob, "cpu"), "QOSMinCpuNotSatisfied");
        assert_eq!(q(K::MinTresPerJob, "gres/gpu"), "QOSMinGRES");
        assert_eq!(q(K::MinTresPerJob, "mem"), "QOSMinMemory");
        assert_eq!(p(Scope::Qos, K::UsageThreshold), "QOSUsageThreshold");
        assert_eq!(p(Scope::Assoc, K::GrpWall), "AssocGrpWallLimit");
        assert_eq!(p(Scope::Qos, K::GrpWall), "QOSGrpWallLimit");
    }

    /// Every reason the table can give is one of Slurm's (src/common/
    /// slurm_protocol_defs.c `job_reason_string`, 22.05): the limit-related strings,
    /// irregular spellings included.
    #[test]
    fn every_reason_is_one_slurm_prints() {
        const SLURM: &[&str] = &[
            "AssocGrpCpuLimit",
            "AssocGrpCPUMinutesLimit",
            "AssocGrpCPURunMinutesLimit",
            "AssocGrpJobsLimit",
            "AssocGrpMemLimit",
            "AssocGrpNodeLimit",
            "AssocGrpSubmitJobsLimit",
            "AssocGrpWallLimit",
            "AssocMaxJobsLimit",
            "AssocMaxCpuPerJobLimit",
            "AssocMaxCpuMinutesPerJobLimit",
            "AssocMaxNodePerJobLimit",
            "AssocMaxWallDurationPerJobLimit",
            "AssocMaxSubmitJobLimit",
            "AssocGrpUnknown",
            "AssocGrpUnknownMinutes",
            "AssocGrpUnknownRunMinutes",
            "AssocMaxUnknownPerJob",
            "AssocMaxUnknownPerNode",
            "AssocMaxUnknownMinutesPerJob",
            "AssocMaxCpuPerNode",
            "AssocGrpMemMinutes",
            "AssocGrpMemRunMinutes",
            "AssocMaxMemPerJob",
            "AssocMaxMemPerNode",
            "AssocMaxMemMinutesPerJob",
            "AssocGrpNodeMinutes",
            "AssocGrpNodeRunMinutes",
            "AssocMaxNodeMinutesPerJob",
            "AssocGrpEnergy",
            "AssocGrpEnergyMinutes",
            "AssocGrpEnergyRunMinutes",
            "AssocMaxEnergyPerJob",
            "AssocMaxEnergyPerNode",
            "AssocMaxEnergyMinutesPerJob",
            "AssocGrpGRES",
            "AssocGrpGRESMinutes",
            "AssocGrpGRESRunMinutes",
            "AssocMaxGRESPerJob",
            "AssocMaxGRESPerNode",
            "AssocMaxGRESMinutesPerJob",
            "AssocGrpLicense",
            "AssocGrpLicenseMinutes",
            "AssocGrpLicenseRunMinutes",
            "AssocMaxLicensePerJob",
            "AssocMaxLicenseMinutesPerJob",
            "AssocGrpBilling",
            "AssocGrpBillingMinutes",
            "AssocGrpBillingRunMinutes",
            "AssocMaxBillingPerJob",
            "AssocMaxBillingPerNode",
            "AssocMaxBillingMinutesPerJob",
            "QOSUsageThreshold",
            "QOSGrpCpuLimit",
            "QOSGrpCPUMinutesLimit",
            "QOSGrpCPURunMinutesLimit",
            "QOSGrpJobsLimit",
            "QOSGrpMemLimit",
            "QOSGrpNodeLimit",
            "QOSGrpSubmitJobsLimit",
            "QOSGrpWallLimit",
            "QOSMaxCpuPerJobLimit",
            "QOSMaxCpuMinutesPerJobLimit",
            "QOSMaxNodePerJobLimit",
            "QOSMaxWallDurationPerJobLimit",
            "QOSMaxCpuPerUserLimit",
            "QOSMaxJobsPerUserLimit",
            "QOSMaxNodePerUserLimit",
            "QOSMaxSubmitJobPerUserLimit",
            "QOSMinCpuNotSatisfied",
            "QOSGrpUnknown",
            "QOSGrpUnknownMinutes",
            "QOSGrpUnknownRunMinutes",
            "QOSMaxUnknownPerJob",
            "QOSMaxUnknownPerNode",
            "QOSMaxUnknownPerUser",
            "QOSMaxUnknownMinutesPerJob",
            "QOSMinUnknown",
            "QOSMaxCpuPerNode",
            "QOSGrpMemoryMinutes",
            "QOSGrpMemoryRunMinutes",
            "QOSMaxMemoryPerJob",
            "QOSMaxMemoryPerNode",
            "QOSMaxMemoryPerUser",
            "QOSMaxMemoryMinutesPerJob",
            "QOSMinMemory",
            "QOSGrpNodeMinutes",
            "QOSGrpNodeRunMinutes",
            "QOSMaxNodeMinutesPerJob",
            "QOSMinNode",
            "QOSGrpEnergy",
            "QOSGrpEnergyMinutes",
            "QOSGrpEnergyRunMinutes",
            "QOSMaxEnergyPerJob",
            "QOSMaxEnergyPerNode",
            "QOSMaxEnergyPerUser",
            "QOSMaxEnergyMinutesPerJob",
            "QOSMinEnergy",
            "QOSGrpGRES",
            "QOSGrpGRESMinutes",
            "QOSGrpGRESRunMinutes",
            "QOSMaxGRESPerJob",
            "QOSMaxGRESPerNode",
            "QOSMaxGRESPerUser",
            "QOSMaxGRESMinutesPerJob",
            "QOSMinGRES",
            "QOSGrpLicense",
            "QOSGrpLicenseMinutes",
            "QOSGrpLicenseRunMinutes",
            "QOSMaxLicensePerJob",
            "QOSMaxLicensePerUser",
            "QOSMaxLicenseMinutesPerJob",
            "QOSMinLicense",
            "MaxCpuPerAccount",
            "MaxEnergyPerAccount",
            "MaxGRESPerAccount",
            "MaxNodePerAccount",
            "MaxLicensePerAccount",
            "MaxMemoryPerAccount",
            "MaxUnknownPerAccount",
            "MaxJobsPerAccount",
            "MaxSubmitJobsPerAccount",
            "QOSGrpBilling",
            "QOSGrpBillingMinutes",
            "QOSGrpBillingRunMinutes",
            "QOSMaxBillingPerJob",
            "QOSMaxBillingPerNode",
            "QOSMaxBillingPerUser",
            "QOSMaxBillingMinutesPerJob",
            "MaxBillingPerAccount",
            "QOSMinBilling",
        ];
        use LimitKind as K;
        let kinds = [
            K::GrpTres,
            K::GrpTresMins,
            K::GrpTresRunMins,
            K::MaxTresPerJob,
            K::MaxTresPerNode,
            K::MaxTresMinsPerJob,
            K::MaxTresPerUser,
            K::MaxTresPerAccount,
            K::MaxJobs,
            K::MaxJobsPerUser,
            K::MaxJobsPerAccount,
            K::GrpJobs,
            K::GrpSubmit,
            K::MaxSubmit,
            K::MaxSubmitPerUser,
            K::MaxSubmitPerAccount,
            K::MaxWall,
            K::GrpWall,
            K::MinTresPerJob,
            K::UsageThreshold,
        ];
        let tres = [
            "cpu",
            "mem",
            "node",
            "gres/gpu",
            "billing",
            "energy",
            "license/x",
            "vmem",
        ];
        for scope in [Scope::Assoc, Scope::Qos] {
            for k in kinds {
                for t in tres {
                    let r = LimitReason::tres(scope, k, t).as_str();
                    assert!(SLURM.contains(&r), "{scope:?} {k:?} {t}: {r}");
                }
            }
        }
        // The TRES of a limit picks the name, cpu and billing among them.
        let a = |k, t| LimitReason::tres(Scope::Assoc, k, t).as_str();
        assert_eq!(a(K::GrpTresMins, "cpu"), "AssocGrpCPUMinutesLimit");
        assert_eq!(a(K::GrpTresMins, "billing"), "AssocGrpBillingMinutes");
        assert_eq!(a(K::GrpTres, "billing"), "AssocGrpBilling");
        assert_eq!(a(K::GrpTres, "license/x"), "AssocGrpLicense");
        assert_eq!(a(K::MaxTresPerNode, "node"), "AssocMaxUnknownPerNode");
    }
}
