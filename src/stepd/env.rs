//! The batch shell's environment (provisional; replaced by the full Slurm set).

use crate::model::Job;

/// The environment of a batch shell: the exported environment plus SLURM_* variables.
pub fn batch_env(job: &Job, cluster: &str, node: &str, _now: i64) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = job
        .spec
        .environment
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let id = job.id.to_string();
    for (k, v) in [
        ("SLURM_JOB_ID", id.clone()),
        ("SLURM_JOBID", id),
        ("SLURM_JOB_NAME", job.spec.name.clone()),
        ("SLURM_CLUSTER_NAME", cluster.to_string()),
        ("SLURMD_NODENAME", node.to_string()),
        ("SLURM_JOB_NODELIST", job.nodelist()),
        ("SLURM_NODELIST", job.nodelist()),
    ] {
        env.retain(|(x, _)| x != k);
        env.push((k.to_string(), v));
    }
    env
}
