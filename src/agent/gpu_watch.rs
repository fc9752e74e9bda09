//! Which of the node's GPUs run processes that belong to no sluice job (issue 24).
//!
//! Every [`INTERVAL`] the agent samples its [`GpuProbe`] and matches each GPU's compute
//! processes against the jobs it runs: a process belongs to a sluice job when it, or one
//! of its ancestors, is a stepd recorded in this agent's spool (`job_*/stepd.pid`,
//! `step_*/stepd.pid`: tasks are stepd's children, and their children inherit it), or
//! when it sits in a job cgroup under the controller's `[cgroup] root` (which also
//! catches processes that left stepd's tree).
//! Any other process makes its GPU busy; the agent reports the busy GPUs
//! ([`FromAgent::GpuState`]) on its first sample and whenever they change, and the
//! controller applies the node's `gpu_foreign` policy. Nothing is sampled on a node
//! without GPUs or without a probe (no NVML and no test hook).
//!
//! Where cgroups are unavailable, a process that escaped its stepd's tree (double fork
//! and reparenting to init) counts as foreign: erring that way only keeps a GPU out of
//! use.

use crate::gpuprobe::{GpuProbe, GpuSample};
use crate::model::gres::GresDevice;
use crate::model::node::{BusyGpu, GpuFault};
use crate::proto::{FromAgent, spool};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// Time between samples.
pub const INTERVAL: Duration = Duration::from_secs(2);

/// The pids of the stepds of `spool` (batch and numbered steps) that are recorded.
pub fn stepd_pids(spool: &Path) -> HashSet<u32> {
    std::fs::read_dir(spool)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("job_") || n.starts_with("step_")
        })
        .filter_map(|e| spool::read_pid(&e.path(), spool::STEPD_PID))
        .filter_map(|p| u32::try_from(p).ok())
        .collect()
}

/// Whether a `/proc/<pid>/cgroup` text puts the process in a job cgroup under
/// sluice's `[cgroup] root` `root` (`…/<root>/uid_<U>/job_<J>…`, cgroup v1 or v2).
pub fn cgroup_text_in(text: &str, root: &str) -> bool {
    let root = root.trim_matches('/');
    if root.is_empty() {
        return false;
    }
    let needle = format!("/{root}/uid_");
    text.lines().any(|l| {
        l.splitn(3, ':')
            .nth(2)
            .is_some_and(|path| path.contains(&needle) && path.contains("/job_"))
    })
}

/// Whether `pid` is in a job cgroup under `root` (see [`cgroup_text_in`]); false when
/// it is gone.
pub fn in_job_cgroup(pid: u32, root: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|t| cgroup_text_in(&t, root))
}

/// The parent pid of `pid` from `/proc/<pid>/stat` (the field after the command name,
/// which may itself hold spaces and parentheses); `None` when it is gone.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_ppid(&stat)
}

/// The ppid field of a `/proc/<pid>/stat` text.
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The name of the owner of `pid` (its uid in digits when it has no name); `None`
/// when the process is gone.
pub fn user_of(pid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    Some(
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or_else(|| uid.to_string(), |u| u.name),
    )
}

/// Whether `pid` or one of its ancestors (through `parent`) is in `owners`. The walk
/// stops at pid 1, at a pid whose parent is unknown, and after 256 steps.
pub fn belongs(pid: u32, owners: &HashSet<u32>, parent: impl Fn(u32) -> Option<u32>) -> bool {
    let mut p = pid;
    for _ in 0..256 {
        if owners.contains(&p) {
            return true;
        }
        match parent(p) {
            Some(q) if q > 1 && q != p => p = q,
            _ => return false,
        }
    }
    false
}

/// The busy GPUs of `samples`: for each GPU with a process that does not belong
/// (`ours` false), the lowest such pid and its user (from `user`), by GPU index.
pub fn busy_gpus(
    samples: &[GpuSample],
    ours: impl Fn(u32) -> bool,
    user: impl Fn(u32) -> Option<String>,
) -> Vec<BusyGpu> {
    let mut out: Vec<BusyGpu> = samples
        .iter()
        .filter_map(|s| {
            let pid = s
                .processes
                .iter()
                .map(|p| p.pid)
                .filter(|p| !ours(*p))
                .min()?;
            Some(BusyGpu {
                index: s.index,
                pid,
                user: user(pid),
            })
        })
        .collect();
    out.sort_by_key(|b| b.index);
    out
}

/// The unhealthy GPUs of `samples`, by index, each with Slurm-style text: `gpu 3: 2
/// uncorrectable ECC errors`, `gpu 3: 5 retired pages`, `gpu 3: fell off the bus`
/// (`; `-joined when one GPU has several).
pub fn gpu_faults(samples: &[GpuSample]) -> Vec<GpuFault> {
    let mut out: Vec<GpuFault> = samples
        .iter()
        .filter_map(|s| {
            let mut what = Vec::new();
            if s.lost {
                what.push("fell off the bus".to_string());
            }
            match s.ecc_uncorrectable {
                0 => {}
                1 => what.push("1 uncorrectable ECC error".into()),
                k => what.push(format!("{k} uncorrectable ECC errors")),
            }
            match s.retired_pages {
                0 => {}
                1 => what.push("1 retired page".into()),
                k => what.push(format!("{k} retired pages")),
            }
            (!what.is_empty()).then(|| GpuFault {
                index: s.index,
                reason: what
                    .iter()
                    .map(|w| format!("gpu {}: {w}", s.index))
                    .collect::<Vec<_>>()
                    .join("; "),
                lost: s.lost,
            })
        })
        .collect();
    out.sort_by_key(|f| f.index);
    out
}

/// The `[cgroup] root` the controller last configured (`None` before it did), shared
/// between the agent's loop and the sampling thread.
pub type CgroupRoot = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// Samples `probe` over `gpus` every [`INTERVAL`] on a thread of its own (NVML calls
/// block), sending [`FromAgent::GpuState`] on `tx` first and on each change, until
/// `tx` closes. Errors of the probe go to the log once each time they change.
pub fn spawn(
    mut probe: Box<dyn GpuProbe>,
    gpus: Vec<GresDevice>,
    spool: PathBuf,
    cgroup_root: CgroupRoot,
    tx: mpsc::UnboundedSender<FromAgent>,
) {
    let _ = std::thread::Builder::new()
        .name("gpu-watch".into())
        .spawn(move || {
            let mut last: Option<(Vec<BusyGpu>, Vec<GpuFault>)> = None;
            let mut last_err: Option<String> = None;
            while !tx.is_closed() {
                match probe.sample(&gpus) {
                    Ok(samples) => {
                        last_err = None;
                        let owners = stepd_pids(&spool);
                        let root = cgroup_root.lock().map(|r| r.clone()).unwrap_or_default();
                        let ours = |p: u32| {
                            belongs(p, &owners, parent_of)
                                || root.as_deref().is_some_and(|r| in_job_cgroup(p, r))
                        };
                        let busy = busy_gpus(&samples, ours, user_of);
                        let now = (busy, gpu_faults(&samples));
                        if last.as_ref() != Some(&now) {
                            let msg = FromAgent::GpuState {
                                busy: now.0.clone(),
                                faults: now.1.clone(),
                            };
                            if tx.send(msg).is_err() {
                                return;
                            }
                            last = Some(now);
                        }
                    }
                    Err(e) => {
                        if last_err.as_ref() != Some(&e) {
                            tracing::warn!("GPU sample failed: {e}");
                            last_err = Some(e);
                        }
                    }
                }
                std::thread::sleep(INTERVAL);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpuprobe::GpuProcess;
    use std::collections::HashMap;

    fn gpu(index: u32, pids: &[u32]) -> GpuSample {
        GpuSample {
            index,
            processes: pids
                .iter()
                .map(|&pid| GpuProcess { pid, used_mib: 100 })
                .collect(),
            ..GpuSample::default()
        }
    }

    #[test]
    fn processes_under_a_stepd_are_ours_and_others_make_the_gpu_busy() {
        // 10 = stepd; 11 its task; 12 the task's child; 20 a shell of bob's; 30 a
        // process whose parent is gone.
        let tree: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 11), (20, 1), (30, 99)].into();
        let parent = |p: u32| tree.get(&p).copied();
        let owners: HashSet<u32> = [10].into();
        assert!(belongs(12, &owners, parent));
        assert!(belongs(10, &owners, parent));
        assert!(!belongs(20, &owners, parent));
        assert!(!belongs(30, &owners, parent));
        let loops: HashMap<u32, u32> = [(5, 6), (6, 5)].into();
        assert!(!belongs(5, &owners, |p| loops.get(&p).copied()));
        let samples = [gpu(0, &[12]), gpu(1, &[4242, 20, 11]), gpu(2, &[])];
        let ours = |p: u32| belongs(p, &owners, parent);
        assert!(gpu_faults(&samples).is_empty());
        let user = |p: u32| (p == 20).then(|| "bob".to_string());
        assert_eq!(
            busy_gpus(&samples, ours, user),
            vec![BusyGpu {
                index: 1,
                pid: 20,
                user: Some("bob".into())
            }]
        );
        assert!(busy_gpus(&[gpu(0, &[11])], ours, user).is_empty());
    }

    #[test]
    fn unhealthy_gpus_are_named_in_slurm_style() {
        let sick = [
            GpuSample {
                index: 3,
                ecc_uncorrectable: 2,
                retired_pages: 1,
                ..GpuSample::default()
            },
            gpu(0, &[]),
            GpuSample {
                index: 1,
                lost: true,
                ..GpuSample::default()
            },
        ];
        let f = gpu_faults(&sick);
        assert_eq!(f.len(), 2);
        assert_eq!(
            (f[0].index, f[0].reason.as_str(), f[0].lost),
            (1, "gpu 1: fell off the bus", true)
        );
        assert_eq!(
            f[1].reason,
            "gpu 3: 2 uncorrectable ECC errors; gpu 3: 1 retired page"
        );
        assert!(!f[1].lost);
    }

    #[test]
    fn a_process_in_a_job_cgroup_under_our_root_is_ours() {
        let v1 = "12:cpuset:/sluice-a/uid_1000/job_7/step_batch/task_0\n4:pids:/\n";
        let v2 = "0::/system.slice/sluice-a/uid_0/job_12/step_0/task_1\n";
        assert!(cgroup_text_in(v1, "sluice-a"));
        assert!(cgroup_text_in(v2, "/sluice-a/"));
        assert!(!cgroup_text_in(v1, "sluice-b"), "another controller's job");
        assert!(!cgroup_text_in(
            "0::/user.slice/session-3.scope\n",
            "sluice-a"
        ));
        assert!(!cgroup_text_in("0::/sluice-a/uid_0\n", "sluice-a"));
        assert!(!cgroup_text_in(v1, ""));
        assert!(!in_job_cgroup(std::process::id(), "sluice-not-here"));
    }

    #[test]
    fn proc_stat_parent_and_owner() {
        assert_eq!(parse_ppid("42 (a) b) c) S 7 42 42 0"), Some(7));
        assert_eq!(parse_ppid("garbage"), None);
        let me = std::process::id();
        assert_eq!(parent_of(me), Some(nix::unistd::getppid().as_raw() as u32));
        assert!(user_of(me).is_some());
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("job_7");
        std::fs::create_dir(&d).unwrap();
        spool::write_pid(&d, spool::STEPD_PID, 4321).unwrap();
        std::fs::create_dir(t.path().join("other")).unwrap();
        assert_eq!(stepd_pids(t.path()), [4321].into());
    }
}
