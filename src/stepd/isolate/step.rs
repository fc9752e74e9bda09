//! One step's isolation as stepd drives it (cf. slurmstepd's calls into task/cgroup,
//! proctrack and jobacct_gather): choose the job's CPU ids and memory limits from the
//! allocation and the `[cgroup]` settings, create the cgroups, hand the task its
//! [`TaskJoin`], and at the end kill everything left in the job, read the OOM count and
//! usage, and remove the cgroups.
//!
//! CPU ids: the controller's allocation says how many CPUs the job has on the node, not
//! which, so they are chosen here, from the CPUs sluice's cgroup may use, least used by
//! other running jobs' cpusets first. Choosing and creating happen under an exclusive
//! lock on a file in the agent's spool directory, so two stepds starting together do not
//! pick the same CPUs; removing the job and user cgroups takes the same lock, so it
//! cannot race with another step creating below them.

use super::{
    CgroupManager, Constraints, CpuList, Device, IsolateError, Level, Scope, TaskJoin, Usage,
    cpulist, detect, limits,
};
use crate::config::CgroupConf;
use crate::proto::LaunchBatch;
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long the processes left at the end of a step get to disappear after SIGKILL.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// What one step on this node is entitled to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepRequest {
    /// CPUs allocated on this node (0: no confinement possible).
    pub cpus: u32,
    /// Memory allocated on this node, MiB (0: the whole node).
    pub mem_mib: u64,
    /// The node's RAM, bytes.
    pub node_ram: u64,
    /// Devices the step may not open (GPUs not allocated to it).
    pub deny: Vec<Device>,
    /// Devices no step of the job may open (GPUs not allocated to the job); `None`: the
    /// same as `deny`.
    pub deny_job: Option<Vec<Device>>,
    /// Number of tasks.
    pub tasks: u32,
}

/// A step's cgroups, set up. See the module docs.
#[derive(Debug)]
pub struct StepIsolation {
    mgr: Box<dyn CgroupManager>,
    scope: Scope,
    cpus: Option<CpuList>,
    /// One per task, opened while setting up (so that a failure is a launch failure).
    joins: Vec<Arc<TaskJoin>>,
    /// What [`StepIsolation::signal`] and [`StepIsolation::finish`] act on: the whole
    /// job for the batch step (its end is the job's end on this node), else the step.
    level: Level,
    lock: PathBuf,
}

/// What a step's cgroups recorded by its end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    pub oom_kills: u64,
    /// Slurm's line for the step's stderr when there were OOM kills (without the
    /// `slurmstepd-<node>: error: ` prefix).
    pub oom_message: Option<String>,
    pub usage: Usage,
    /// Problems killing or removing (the step's result does not depend on them).
    pub errors: Vec<String>,
}

impl StepIsolation {
    /// Sets up the batch step of `lb`'s job on this node, with `lb.cgroup`'s settings;
    /// `lock` is the file that serialises stepds of one agent.
    ///
    /// Errors: a cgroup hierarchy was found but the step's cgroups could not be created
    /// or constrained (the job must then not run unconfined). No hierarchy at all is
    /// not an error: the result then reports degraded isolation.
    pub fn batch(lb: &LaunchBatch, lock: &Path) -> Result<StepIsolation, IsolateError> {
        let conf = &lb.cgroup;
        let job = &lb.job;
        let scope = Scope::batch(&conf.root, job.uid, job.id);
        let (cpus, mem_mib) = job
            .alloc
            .as_ref()
            .map(|a| (a.cpus.first().copied().unwrap_or(0), a.mem_per_node))
            .unwrap_or((0, 0));
        let allowed = job
            .alloc
            .as_ref()
            .and_then(|a| a.gres.first())
            .map_or(&[][..], Vec::as_slice);
        let (deny, _) = crate::stepd::gpus::deny_list(&lb.node_gres, allowed);
        let req = StepRequest {
            cpus,
            mem_mib,
            node_ram: node_ram(),
            deny,
            deny_job: None,
            tasks: 1,
        };
        Self::setup(detect(conf, scope.clone()), conf, scope, &req, lock)
    }

    /// Sets up `scope` with `mgr`. Errors: as [`StepIsolation::batch`].
    pub fn setup(
        mut mgr: Box<dyn CgroupManager>,
        conf: &CgroupConf,
        scope: Scope,
        req: &StepRequest,
        lock: &Path,
    ) -> Result<StepIsolation, IsolateError> {
        let guard = lock_file(lock);
        let cpus = if conf.constrain_cores {
            mgr.online_cpus()
                .map(|online| cpulist::choose(&online, &mgr.cpus_in_use(), req.cpus))
        } else {
            None
        };
        let c = Constraints {
            cpus: cpus.clone(),
            mem: limits::memory_limits(conf, req.mem_mib, req.node_ram),
            deny: if conf.constrain_devices {
                req.deny.clone()
            } else {
                Vec::new()
            },
            deny_job: if conf.constrain_devices {
                req.deny_job.clone()
            } else {
                None
            },
            tasks: req.tasks.max(1),
        };
        let made = mgr.create(&c).and_then(|()| {
            (0..c.tasks)
                .map(|t| mgr.task_join(t).map(Arc::new))
                .collect::<Result<Vec<_>, _>>()
        });
        let joins = match made {
            Ok(j) => j,
            Err(e) => {
                let _ = mgr.destroy();
                return Err(e);
            }
        };
        drop(guard);
        let level = if scope.step == "batch" {
            Level::Job
        } else {
            Level::Step
        };
        Ok(StepIsolation {
            mgr,
            scope,
            cpus,
            joins,
            level,
            lock: lock.to_path_buf(),
        })
    }

    /// Which backend is in use.
    pub fn backend(&self) -> super::Backend {
        self.mgr.backend()
    }

    /// What is asked for and not enforced (empty: full isolation).
    pub fn degraded(&self) -> Vec<String> {
        self.mgr.degraded()
    }

    /// The CPUs the job is confined to, if cores are constrained.
    pub fn cpus(&self) -> Option<&CpuList> {
        self.cpus.as_ref()
    }

    /// What task `task`'s process runs between fork and exec; `None` past the step's
    /// task count.
    pub fn task_join(&self, task: u32) -> Option<Arc<TaskJoin>> {
        self.joins.get(task as usize).cloned()
    }

    /// Sends `sig` to every process of the step (of the job, for the batch step);
    /// returns how many.
    pub fn signal(&self, sig: Signal) -> usize {
        self.mgr.signal(self.level, sig)
    }

    /// The processes of the step (of the job, for the batch step) as its cgroups list
    /// them; `None` when the backend keeps no such list (without cgroups they are found
    /// by scanning /proc).
    pub fn member_pids(&self) -> Option<Vec<i32>> {
        match self.mgr.backend() {
            super::Backend::V1 | super::Backend::V2 => Some(self.mgr.pids(self.level)),
            super::Backend::None | super::Backend::Fake => None,
        }
    }

    /// The step cgroup's counters now (memory peak and current, CPU user/system);
    /// fields are `None` where the backend has no such counter.
    pub fn usage(&self) -> Usage {
        self.mgr.usage(Level::Step)
    }

    /// Stops every process of the step (of the job, for the batch step), for
    /// `scontrol suspend`. Errors: no freezer, or it did not freeze in time.
    pub fn suspend(&self) -> Result<(), IsolateError> {
        self.mgr.freeze(self.level)
    }

    /// Resumes what [`StepIsolation::suspend`] stopped.
    pub fn resume(&self) -> Result<(), IsolateError> {
        self.mgr.thaw(self.level)
    }

    /// Ends the step: kills whatever is left in its cgroup (the job's, for the batch
    /// step), reads the OOM count and usage of the step, removes the cgroups.
    pub fn finish(mut self) -> Finished {
        let mut errors = Vec::new();
        if let Err(e) = self.mgr.kill_all(self.level, KILL_TIMEOUT) {
            errors.push(e.to_string());
        }
        let oom_kills = self.mgr.oom_kills(Level::Step);
        let usage = self.mgr.usage(Level::Step);
        let guard = lock_file(&self.lock);
        if let Err(e) = self.mgr.destroy() {
            errors.push(e.to_string());
        }
        drop(guard);
        Finished {
            oom_kills,
            oom_message: (oom_kills > 0).then(|| oom_message(&self.scope, oom_kills)),
            usage,
            errors,
        }
    }
}

/// `Detected N oom-kill event(s) in StepId=J.S. …`, as slurmstepd reports it.
pub fn oom_message(scope: &Scope, kills: u64) -> String {
    format!(
        "Detected {kills} oom-kill event(s) in {}. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        scope.step_id()
    )
}

/// Takes an exclusive lock on `path` (created if needed); released when the file is
/// dropped. `None` if it cannot be opened or locked: the lock only avoids two jobs
/// choosing the same CPUs, which is not worth failing a job for.
fn lock_file(path: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    f.lock().ok()?;
    Some(f)
}

/// The machine's RAM in bytes (`MemTotal` of /proc/meminfo; 0 if unreadable).
pub fn node_ram() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::super::fake::Fake;
    use super::*;

    fn setup(
        fake: &Fake,
        conf: &CgroupConf,
        req: &StepRequest,
    ) -> Result<StepIsolation, IsolateError> {
        setup_step(fake, conf, req, "batch")
    }

    fn setup_step(
        fake: &Fake,
        conf: &CgroupConf,
        req: &StepRequest,
        step: &str,
    ) -> Result<StepIsolation, IsolateError> {
        let t = tempfile::tempdir().unwrap();
        let scope = Scope {
            step: step.into(),
            ..Scope::batch("sluice", 1000, 5)
        };
        StepIsolation::setup(
            Box::new(fake.clone()),
            conf,
            scope,
            req,
            &t.path().join("lock"),
        )
    }

    fn constrained() -> CgroupConf {
        CgroupConf {
            constrain_cores: true,
            constrain_ram_space: true,
            constrain_devices: true,
            ..CgroupConf::default()
        }
    }

    #[test]
    fn picks_cpus_away_from_other_jobs_and_limits_memory() {
        let fake = Fake {
            online: CpuList::parse("0-3"),
            in_use: vec![CpuList::parse("0").unwrap()],
            ..Fake::default()
        };
        let req = StepRequest {
            cpus: 2,
            mem_mib: 100,
            node_ram: 1 << 34,
            deny: vec![Device::from_path(Path::new("/dev/null")).unwrap()],
            deny_job: None,
            tasks: 1,
        };
        let iso = setup(&fake, &constrained(), &req).unwrap();
        assert_eq!(iso.cpus().unwrap().to_string(), "1-2");
        assert_eq!(
            fake.calls(),
            vec![
                format!(
                    "create cpus=1-2 ram={} ram_swap=- deny=1 tasks=1",
                    100u64 << 20
                ),
                "task_join 0".to_string()
            ]
        );
    }

    #[test]
    fn slurm_defaults_confine_nothing_but_still_track() {
        let fake = Fake {
            online: CpuList::parse("0-3"),
            ..Fake::default()
        };
        let req = StepRequest {
            cpus: 1,
            mem_mib: 100,
            node_ram: 1 << 34,
            deny: vec![Device::from_path(Path::new("/dev/null")).unwrap()],
            deny_job: None,
            tasks: 1,
        };
        let iso = setup(&fake, &CgroupConf::default(), &req).unwrap();
        assert_eq!(iso.cpus(), None);
        assert_eq!(
            fake.calls()[0],
            "create cpus=- ram=- ram_swap=- deny=0 tasks=1"
        );
        let fin = iso.finish();
        assert_eq!(fin.oom_kills, 0);
        assert_eq!(fin.oom_message, None);
        assert_eq!(
            fake.calls()[2..],
            ["kill_all Job", "oom_kills Step", "usage Step", "destroy"]
        );
    }

    #[test]
    fn a_numbered_step_joins_each_task_and_ends_only_itself() {
        let fake = Fake::default();
        let req = StepRequest {
            tasks: 3,
            ..StepRequest::default()
        };
        let iso = setup_step(&fake, &CgroupConf::default(), &req, "0").unwrap();
        assert!(iso.task_join(2).is_some());
        assert!(iso.task_join(3).is_none());
        iso.signal(Signal::SIGTERM);
        iso.suspend().unwrap();
        iso.resume().unwrap();
        let fin = iso.finish();
        assert_eq!(fin.oom_message, None);
        let calls = fake.calls();
        assert_eq!(calls[1..4], ["task_join 0", "task_join 1", "task_join 2"]);
        assert_eq!(
            calls[4..8],
            ["pids Step", "freeze Step", "thaw Step", "kill_all Step"]
        );
    }

    #[test]
    fn a_failed_create_is_an_error_and_cleans_up() {
        let fake = Fake {
            fail_create: Some("cpuset.cpus: invalid argument".into()),
            ..Fake::default()
        };
        let e = setup(&fake, &constrained(), &StepRequest::default()).unwrap_err();
        assert!(e.to_string().contains("invalid argument"), "{e}");
        assert_eq!(fake.calls().last().map(String::as_str), Some("destroy"));
    }

    #[test]
    fn oom_kills_are_reported_in_slurms_words() {
        let fake = Fake {
            oom: 1,
            ..Fake::default()
        };
        let iso = setup(&fake, &constrained(), &StepRequest::default()).unwrap();
        let fin = iso.finish();
        assert_eq!(fin.oom_kills, 1);
        assert_eq!(
            fin.oom_message.unwrap(),
            "Detected 1 oom-kill event(s) in StepId=5.batch. Some of your processes may have been killed by the cgroup out-of-memory handler."
        );
    }

    #[test]
    fn node_ram_is_read() {
        assert!(node_ram() > 0);
    }
}
