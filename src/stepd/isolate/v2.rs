//! cgroup v2: the unified hierarchy (cf. Slurm's cgroup/v2 plugin).
//!
//! Processes live only in the `task_<T>` leaves; every level above enables the
//! controllers its children need in `cgroup.subtree_control` (`memory` always, for the
//! OOM count and usage; `cpuset` when cores are confined). Where a level refuses (a
//! cgroup with processes of its own, or no delegation), the controller is skipped below
//! it and `degraded()` says so; tracking, freezing and killing need no controller and
//! keep working.
//!
//! Used files: `cpuset.cpus`, `memory.max`, `memory.swap.max` (the swap part only:
//! RAM+swap minus RAM), `memory.events` (`oom_kill`, counted hierarchically),
//! `memory.peak`, `memory.current`, `cpu.stat`, `cgroup.freeze` + `cgroup.events`,
//! `cgroup.kill` (5.14+; else freeze, SIGKILL each, thaw).
//!
//! Devices: v2 has no device files; access is decided by an eBPF program attached to
//! the job's and the step's cgroups (`bpf`), refusing the GPUs not allocated as v1's
//! `devices.deny` does. Where the kernel refuses the program (no CAP_BPF, no cgroup v2
//! directory), `degraded()` says so with the kernel's error.

use super::files::{self, keyed, number};
use super::{
    Backend, CgroupManager, Constraints, CpuList, IsolateError, Level, Scope, TaskJoin, Usage,
};
use crate::config::CgroupConf;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A step's cgroups on v2.
#[derive(Debug)]
pub struct V2 {
    scope: Scope,
    /// The directory `<root>` is created in.
    base: PathBuf,
    notes: Vec<String>,
}

impl V2 {
    /// Finds the unified hierarchy (`conf.mountpoint`, else mountinfo) and the base:
    /// its top when running as root, else this process's own cgroup (a delegated
    /// subtree). Errors: no v2 mount, or sluice's root cannot be created there.
    pub fn detect(conf: &CgroupConf, scope: Scope) -> Result<V2, IsolateError> {
        let mounts = files::parse_mountinfo(
            &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
        );
        let (mp, mroot) = match &conf.mountpoint {
            Some(mp) if mp.join("cgroup.controllers").exists() => (mp.clone(), "/".to_string()),
            _ => mounts
                .iter()
                .find(|m| m.fstype == "cgroup2")
                .map(|m| (m.mount_point.clone(), m.root.clone()))
                .ok_or_else(|| IsolateError::Unavailable("no cgroup2 mount".into()))?,
        };
        let base = if nix::unistd::geteuid().is_root() {
            mp.clone()
        } else {
            let own = files::parse_proc_cgroup(
                &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
            )
            .into_iter()
            .find(|m| m.id == 0 && m.controllers.is_empty())
            .ok_or_else(|| IsolateError::Unavailable("not in a cgroup2 hierarchy".into()))?;
            files::cgroup_dir(&mp, &mroot, &own.path).ok_or_else(|| {
                IsolateError::Unavailable(format!("own cgroup {} is not visible", own.path))
            })?
        };
        files::mkdir(&base.join(&scope.root))?;
        Ok(V2::at(scope, base))
    }

    /// A manager whose sluice root goes below `base` (a fixture, or a known place).
    pub fn at(scope: Scope, base: PathBuf) -> V2 {
        V2 {
            scope,
            base,
            notes: Vec::new(),
        }
    }

    /// sluice's root cgroup.
    pub fn root_dir(&self) -> PathBuf {
        self.base.join(&self.scope.root)
    }

    fn dir(&self, rel: &Path) -> PathBuf {
        self.base.join(rel)
    }

    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    /// Enables `want` in `dir`'s subtree_control, one controller at a time so that a
    /// refusal names the controller; returns those enabled.
    fn enable(&mut self, dir: &Path, want: &[&str]) -> Vec<String> {
        let ctl = dir.join("cgroup.subtree_control");
        let already = files::read(&ctl).unwrap_or_default();
        let mut on = Vec::new();
        for c in want {
            if already.split_whitespace().any(|x| x == *c) {
                on.push(c.to_string());
                continue;
            }
            match files::write(&ctl, &format!("+{c}")) {
                Ok(()) => on.push(c.to_string()),
                Err(e) => {
                    let what = if *c == "cpuset" {
                        "cores are not confined"
                    } else {
                        "memory is not limited and OOM kills are not counted"
                    };
                    self.note(format!("{what} (cgroup/v2: {e})"));
                }
            }
        }
        on
    }
}

impl CgroupManager for V2 {
    fn backend(&self) -> Backend {
        Backend::V2
    }

    fn degraded(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn online_cpus(&self) -> Option<CpuList> {
        let v = files::read(&self.base.join("cpuset.cpus.effective")).ok()?;
        CpuList::parse(&v).filter(|c| !c.is_empty())
    }

    fn cpus_in_use(&self) -> Vec<CpuList> {
        let own = self.dir(&self.scope.job_rel());
        let mut out = Vec::new();
        for user in files::subdirs(&self.dir(Path::new(&self.scope.root))) {
            for job in files::subdirs(&user) {
                if job == own || !super::job_cgroup_in_use(&job) {
                    continue;
                }
                if let Some(c) = files::read(&job.join("cpuset.cpus"))
                    .ok()
                    .and_then(|t| CpuList::parse(&t))
                    .filter(|c| !c.is_empty())
                {
                    out.push(c);
                }
            }
        }
        out
    }

    fn create(&mut self, k: &Constraints) -> Result<(), IsolateError> {
        let top = files::read(&self.base.join("cgroup.controllers")).unwrap_or_default();
        let mut avail: Vec<String> = top.split_whitespace().map(str::to_string).collect();
        let mut want = vec!["memory"];
        if k.cpus.is_some() {
            want.insert(0, "cpuset");
        }
        for w in &want {
            if !avail.iter().any(|a| a == w) {
                let what = if *w == "cpuset" {
                    "cores are not confined"
                } else if k.mem.is_some() {
                    "memory is not limited"
                } else {
                    continue;
                };
                self.note(format!(
                    "{what} (cgroup/v2: {w} controller not available in {})",
                    self.base.display()
                ));
            }
        }
        // Enable down the chain: base → root → uid → job → step (the tasks' parent).
        let mut parent = self.base.clone();
        for rel in self.scope.chain() {
            let usable: Vec<&str> = want
                .iter()
                .copied()
                .filter(|w| avail.iter().any(|a| a == w))
                .collect();
            avail = self.enable(&parent, &usable);
            let dir = self.dir(&rel);
            files::mkdir(&dir)?;
            parent = dir;
        }
        let usable: Vec<&str> = want
            .iter()
            .copied()
            .filter(|w| avail.iter().any(|a| a == w))
            .collect();
        let step_ctl = self.enable(&parent, &usable);
        for t in 0..k.tasks.max(1) {
            files::mkdir(&self.dir(&self.scope.task_rel(t)))?;
        }
        let job = self.dir(&self.scope.job_rel());
        let step = self.dir(&self.scope.step_rel());
        // The job's controllers are those its parent (uid) enabled, which the step's
        // enable list was filtered by; the step has what the job enabled.
        let has = |c: &str| step_ctl.iter().any(|x| x == c);
        if let Some(cpus) = &k.cpus
            && has("cpuset")
        {
            files::write(&job.join("cpuset.cpus"), &cpus.to_string())?;
        }
        if let Some(m) = &k.mem
            && has("memory")
        {
            let ram = m.ram.or(m.ram_swap);
            for d in [&job, &step] {
                if let Some(r) = ram {
                    files::write(&d.join("memory.max"), &r.to_string())?;
                }
                if let Some(rs) = m.ram_swap {
                    let swap = d.join("memory.swap.max");
                    let v = rs.saturating_sub(ram.unwrap_or(rs));
                    if swap.exists() || !files::on_cgroupfs(d) {
                        files::write(&swap, &v.to_string())?;
                    } else {
                        self.note(
                            "swap is not limited: the kernel has no swap accounting (memory.swap.max)"
                                .into(),
                        );
                    }
                }
            }
        }
        // v1's inheritance, with programs: the job level refuses what no step of the
        // job may open, the step level the step's own (both must allow an access).
        let job_deny = k.deny_job.as_ref().unwrap_or(&k.deny);
        for (dir, deny) in [(&job, job_deny), (&step, &k.deny)] {
            if deny.is_empty() {
                continue;
            }
            let r = super::bpf::program(deny).and_then(|p| super::bpf::attach(dir, &p));
            if let Err(e) = r {
                self.note(format!(
                    "devices are not constrained (cgroup/v2: cannot attach the eBPF device program to {}: {e})",
                    dir.display()
                ));
                break;
            }
        }
        Ok(())
    }

    fn task_join(&self, task: u32) -> Result<TaskJoin, IsolateError> {
        let p = self.dir(&self.scope.task_rel(task)).join("cgroup.procs");
        TaskJoin::open(&[p], Vec::new())
    }

    fn add_pid(&self, task: u32, pid: i32) -> Result<(), IsolateError> {
        let p = self.dir(&self.scope.task_rel(task)).join("cgroup.procs");
        files::write(&p, &pid.to_string())
    }

    fn pids(&self, level: Level) -> Vec<i32> {
        files::procs_below(&self.dir(&self.scope.rel(level)))
    }

    fn kill_all(&self, level: Level, timeout: Duration) -> Result<(), IsolateError> {
        let dir = self.dir(&self.scope.rel(level));
        let kill = dir.join("cgroup.kill");
        if kill.exists()
            && files::write(&kill, "1").is_ok()
            && super::wait_for(timeout, || files::procs_below(&dir).is_empty())
        {
            return Ok(());
        }
        let freeze = dir.join("cgroup.freeze");
        super::kill_loop(
            &dir,
            timeout,
            || files::procs_below(&dir),
            |before| {
                let _ = files::write(&freeze, if before { "1" } else { "0" });
            },
        )
    }

    fn freeze(&self, level: Level) -> Result<(), IsolateError> {
        let dir = self.dir(&self.scope.rel(level));
        files::write(&dir.join("cgroup.freeze"), "1")?;
        let events = dir.join("cgroup.events");
        if super::wait_for(Duration::from_secs(5), || {
            files::read(&events).is_ok_and(|t| keyed(&t, "frozen") == Some(1))
        }) {
            Ok(())
        } else {
            Err(IsolateError::Freeze { path: dir })
        }
    }

    fn thaw(&self, level: Level) -> Result<(), IsolateError> {
        files::write(&self.dir(&self.scope.rel(level)).join("cgroup.freeze"), "0")
    }

    fn oom_kills(&self, level: Level) -> u64 {
        files::read(&self.dir(&self.scope.rel(level)).join("memory.events"))
            .ok()
            .and_then(|t| keyed(&t, "oom_kill"))
            .unwrap_or(0)
    }

    fn usage(&self, level: Level) -> Usage {
        let d = self.dir(&self.scope.rel(level));
        let cpu = files::read(&d.join("cpu.stat")).unwrap_or_default();
        let stat = files::read(&d.join("memory.stat")).ok();
        Usage {
            mem_peak: number(&d.join("memory.peak")),
            mem_current: number(&d.join("memory.current")),
            mem_rss: stat.as_deref().and_then(|t| keyed(t, "anon")),
            cpu_user_usec: keyed(&cpu, "user_usec"),
            cpu_system_usec: keyed(&cpu, "system_usec"),
        }
    }

    fn destroy(&mut self) -> Result<(), IsolateError> {
        super::remove_retrying(&self.dir(&self.scope.step_rel()))?;
        super::remove_if_leaf(&self.dir(&self.scope.job_rel()));
        super::remove_if_leaf(&self.dir(&self.scope.uid_rel()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Device, MemLimits};
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A temp directory laid out like the top of a v2 hierarchy.
    fn fixture(controllers: &str) -> (tempfile::TempDir, V2) {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(t.path().join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(t.path().join("cpuset.cpus.effective"), "0-15\n").unwrap();
        let m = V2::at(Scope::batch("sluice", 1000, 9), t.path().to_path_buf());
        (t, m)
    }

    fn rd(p: PathBuf) -> String {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    #[test]
    fn creates_the_hierarchy_enabling_controllers_down_to_the_step() {
        let (t, mut m) = fixture("cpuset cpu io memory pids\n");
        let k = Constraints {
            cpus: CpuList::parse("4-5"),
            mem: Some(MemLimits {
                ram: Some(200 * MIB),
                soft: Some(200 * MIB),
                ram_swap: Some(250 * MIB),
            }),
            deny: vec![],
            deny_job: None,
            tasks: 2,
        };
        m.create(&k).unwrap();
        let s = m.scope.clone();
        let p = |rel: PathBuf, f: &str| t.path().join(rel).join(f);
        assert!(t.path().join(s.task_rel(1)).is_dir());
        // Each level above the tasks enabled memory last (one write per controller).
        for rel in [
            PathBuf::new(),
            "sluice".into(),
            s.uid_rel(),
            s.job_rel(),
            s.step_rel(),
        ] {
            assert_eq!(
                rd(p(rel.clone(), "cgroup.subtree_control")),
                "+memory",
                "{rel:?}"
            );
        }
        assert!(
            !p(s.task_rel(0), "cgroup.subtree_control").exists(),
            "leaves enable nothing"
        );
        assert_eq!(rd(p(s.job_rel(), "cpuset.cpus")), "4-5");
        for level in [s.job_rel(), s.step_rel()] {
            assert_eq!(rd(p(level.clone(), "memory.max")), (200 * MIB).to_string());
            assert_eq!(rd(p(level, "memory.swap.max")), (50 * MIB).to_string());
        }
        assert!(m.degraded().is_empty(), "{:?}", m.degraded());
        assert_eq!(m.task_join(1).unwrap().cgroups(), 1);
        assert_eq!(m.online_cpus(), CpuList::parse("0-15"));
    }

    #[test]
    fn swap_only_limit_caps_ram_with_no_swap() {
        let (t, mut m) = fixture("memory\n");
        m.create(&Constraints {
            mem: Some(MemLimits {
                ram: None,
                soft: None,
                ram_swap: Some(64 * MIB),
            }),
            ..Constraints::default()
        })
        .unwrap();
        let job = t.path().join(m.scope.job_rel());
        assert_eq!(rd(job.join("memory.max")), (64 * MIB).to_string());
        assert_eq!(rd(job.join("memory.swap.max")), "0");
    }

    #[test]
    fn missing_controllers_and_devices_are_reported() {
        let (t, mut m) = fixture("io pids\n");
        m.create(&Constraints {
            cpus: CpuList::parse("0"),
            mem: Some(MemLimits::default()),
            deny: vec![Device::from_path(Path::new("/dev/null")).unwrap()],
            deny_job: None,
            tasks: 1,
        })
        .unwrap();
        let d = m.degraded();
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].contains("cores are not confined"), "{d:?}");
        assert!(d[1].contains("memory is not limited"), "{d:?}");
        assert!(d[2].contains("eBPF"), "{d:?}");
        assert!(
            !t.path()
                .join(m.scope.job_rel())
                .join("cpuset.cpus")
                .exists()
        );
    }

    #[test]
    fn reads_oom_kills_and_usage() {
        let (t, mut m) = fixture("memory\n");
        m.create(&Constraints::default()).unwrap();
        let step = t.path().join(m.scope.step_rel());
        std::fs::write(
            step.join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        std::fs::write(step.join("memory.peak"), "1048576\n").unwrap();
        std::fs::write(step.join("memory.current"), "4096\n").unwrap();
        std::fs::write(
            step.join("memory.stat"),
            "anon 3072\nfile 900000\nkernel 100\nfile_mapped 50\n",
        )
        .unwrap();
        std::fs::write(
            step.join("cpu.stat"),
            "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\n",
        )
        .unwrap();
        assert_eq!(m.oom_kills(Level::Step), 1);
        assert_eq!(
            m.oom_kills(Level::Job),
            0,
            "no memory.events in the fixture's job"
        );
        let u = m.usage(Level::Step);
        assert_eq!(u.mem_peak, Some(1 << 20));
        assert_eq!(u.mem_current, Some(4096));
        assert_eq!(u.mem_rss, Some(3072));
        assert_eq!(u.cpu_secs(), Some(3.0));
    }

    #[test]
    fn freeze_waits_for_cgroup_events() {
        let (t, mut m) = fixture("memory\n");
        m.create(&Constraints::default()).unwrap();
        let step = t.path().join(m.scope.step_rel());
        std::fs::write(step.join("cgroup.events"), "populated 1\nfrozen 1\n").unwrap();
        m.freeze(Level::Step).unwrap();
        assert_eq!(rd(step.join("cgroup.freeze")), "1");
        m.thaw(Level::Step).unwrap();
        assert_eq!(rd(step.join("cgroup.freeze")), "0");
        // A job that never reports frozen is an error, not a hang.
        let job = t.path().join(m.scope.job_rel());
        std::fs::write(job.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        assert!(matches!(
            m.freeze(Level::Job),
            Err(IsolateError::Freeze { .. })
        ));
    }

    #[test]
    fn destroy_keeps_other_jobs() {
        let (t, mut m) = fixture("memory\n");
        let other = t.path().join("sluice/uid_1000/job_3/step_batch/task_0");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("cgroup.procs"), "77\n").unwrap();
        m.create(&Constraints::default()).unwrap();
        assert_eq!(m.pids(Level::Job), Vec::<i32>::new());
        m.destroy().unwrap();
        assert!(!t.path().join(m.scope.job_rel()).exists());
        assert!(other.exists());
        assert!(t.path().join(m.scope.uid_rel()).exists());
    }
}
