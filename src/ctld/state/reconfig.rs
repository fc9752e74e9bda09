//! `scontrol reconfigure` (cf. slurmctld `read_slurm_conf(reconfig=1)`): a config read
//! again replaces the cluster's partitions, node declarations (features, weight,
//! tmp_disk, partition membership), licenses, scheduler and priority parameters,
//! limits and scripts, keeping every job, step, reservation and node state.
//!
//! Invariant: a refused config changes nothing. As in Slurm 22.05, adding or removing
//! nodes needs a controller restart; so do changes to what a node is (CPUs, memory,
//! GRES, how it is reached), which its agent reports when it registers.

use super::Cluster;
use crate::config::Config;
use crate::model::JobState;

impl Cluster {
    /// Applies `cfg`, read again from the cluster's config file.
    ///
    /// Errors (nothing changed): a different `cluster_name`; nodes added or removed;
    /// a partition removed while a pending or running job is in it.
    pub fn reconfigure(&mut self, cfg: &Config) -> Result<(), String> {
        if cfg.cluster_name != self.cluster_name {
            return Err(format!(
                "cluster_name changed ({} to {}): restart the controller",
                self.cluster_name, cfg.cluster_name
            ));
        }
        let mut old: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        let mut new: Vec<&str> = cfg.nodes.iter().map(|n| n.name.as_str()).collect();
        old.sort_unstable();
        new.sort_unstable();
        if old != new {
            let added: Vec<&str> = new.iter().filter(|n| !old.contains(n)).copied().collect();
            let gone: Vec<&str> = old.iter().filter(|n| !new.contains(n)).copied().collect();
            return Err(format!(
                "adding or removing nodes needs a controller restart (added: {}; removed: {})",
                list(&added),
                list(&gone)
            ));
        }
        for j in self.jobs.values() {
            let active = matches!(j.state, JobState::Pending | JobState::Running) || j.completing;
            if active && !cfg.partitions.iter().any(|p| p.name == j.partition) {
                return Err(format!(
                    "partition {} still has job {}: it cannot be removed",
                    j.partition, j.id
                ));
            }
        }
        let fresh = Cluster::new(cfg, self.owner_uid);
        for n in &mut self.nodes {
            if let Some(f) = fresh.nodes.iter().find(|f| f.name == n.name) {
                n.features.clone_from(&f.features);
                n.weight = f.weight;
                n.tmp_disk = f.tmp_disk;
                n.gpu_foreign = f.gpu_foreign;
                n.partitions.clone_from(&f.partitions);
            }
        }
        self.reboot = fresh.reboot;
        self.partitions = fresh.partitions;
        self.acct.partition_qos = fresh.acct.partition_qos;
        self.acct.billing = fresh.acct.billing;
        self.sched_cfg = fresh.sched_cfg;
        self.licenses = fresh.licenses;
        self.enforce_part_limits = fresh.enforce_part_limits;
        self.acct.enforce_cfg = fresh.acct.enforce_cfg;
        self.min_job_age = fresh.min_job_age;
        self.kill_wait = fresh.kill_wait;
        self.max_array_size = fresh.max_array_size;
        self.kill_invalid_depend = fresh.kill_invalid_depend;
        self.over_time_limit = fresh.over_time_limit;
        self.scripts = fresh.scripts;
        self.cgroup = fresh.cgroup;
        self.config_entries = fresh.config_entries;
        self.sched_interval = fresh.sched_interval;
        // Fair-share weights may have changed.
        *self.acct.fs_cache.borrow_mut() = None;
        Ok(())
    }
}

/// Refuses a reconfigured node declaration that changes what the node is (CPUs and
/// their layout, memory, GRES, how it is reached): the agent registers those, so they
/// change with a controller restart, as in Slurm 22.05. Errors name the first field
/// that differs, old and new.
pub(crate) fn node_identity_unchanged(
    old: &crate::config::NodeConf,
    new: &crate::config::NodeConf,
) -> Result<(), String> {
    let show = |v: &dyn std::fmt::Debug| format!("{v:?}");
    let fields: [(&str, String, String); 8] = [
        ("cpus", show(&old.cpus), show(&new.cpus)),
        ("memory", show(&old.memory), show(&new.memory)),
        ("sockets", show(&old.sockets), show(&new.sockets)),
        (
            "cores_per_socket",
            show(&old.cores_per_socket),
            show(&new.cores_per_socket),
        ),
        (
            "threads_per_core",
            show(&old.threads_per_core),
            show(&new.threads_per_core),
        ),
        ("gres", show(&old.gres), show(&new.gres)),
        ("gres_cores", show(&old.gres_cores), show(&new.gres_cores)),
        ("ssh", show(&old.ssh), show(&new.ssh)),
    ];
    match fields.iter().find(|(_, a, b)| a != b) {
        Some((key, a, b)) => Err(format!(
            "node {}: {key} changed ({a} to {b}); changing what a node is needs a controller restart",
            old.name
        )),
        None => Ok(()),
    }
}

fn list(v: &[&str]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(",")
    }
}
