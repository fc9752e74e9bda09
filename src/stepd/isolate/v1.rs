//! cgroup v1: one hierarchy per controller (cf. Slurm's cgroup/v1 plugin).
//!
//! Controllers used: `cpuset` (cores), `memory` (RAM and RAM+swap limits, OOM count,
//! peak use), `devices` (deny rules), `freezer` (suspend, and a still picture while
//! everything is killed), `cpuacct` (CPU time). Each is optional; a missing one is
//! reported by `degraded()` when its constraint is asked for. Processes are tracked in
//! the freezer hierarchy when there is one, else in the first one found.
//!
//! v1 specifics handled here: a new cpuset cgroup is empty and must get `cpuset.cpus`
//! and `cpuset.mems` before a process can join; `memory.memsw.limit_in_bytes` must stay
//! at or above `memory.limit_in_bytes` at every write; OOM kills are counted in
//! `memory.oom_control` (`oom_kill`, kernel 4.13+) of the cgroup of the killed task, not
//! propagated upwards, so a level's count is the sum over its subtree.

use super::files::{self, keyed, number};
use super::{
    Backend, CgroupManager, Constraints, CpuList, IsolateError, Level, Scope, TaskJoin, Usage,
};
use crate::config::CgroupConf;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A v1 controller sluice uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ctrl {
    Cpuset,
    Memory,
    Devices,
    Freezer,
    Cpuacct,
}

impl Ctrl {
    pub const ALL: [Ctrl; 5] = [
        Ctrl::Cpuset,
        Ctrl::Memory,
        Ctrl::Devices,
        Ctrl::Freezer,
        Ctrl::Cpuacct,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Ctrl::Cpuset => "cpuset",
            Ctrl::Memory => "memory",
            Ctrl::Devices => "devices",
            Ctrl::Freezer => "freezer",
            Ctrl::Cpuacct => "cpuacct",
        }
    }
}

/// A step's cgroups on v1.
#[derive(Debug)]
pub struct V1 {
    scope: Scope,
    /// Each usable controller with its base: the directory `<root>` is created in.
    bases: Vec<(Ctrl, PathBuf)>,
    /// Controllers that could not be used, with why.
    unusable: Vec<(Ctrl, String)>,
    /// Found while creating: constraints asked for and not enforced.
    notes: Vec<String>,
    /// The constraints asked for (for `degraded`).
    wanted: Constraints,
}

impl V1 {
    /// Finds the mounted v1 controllers (from `conf.mountpoint`, else mountinfo), the
    /// cgroup this process is in for each, and checks that sluice's root can be created
    /// there. Errors: no usable controller.
    pub fn detect(conf: &CgroupConf, scope: Scope) -> Result<V1, IsolateError> {
        let mounts = files::parse_mountinfo(
            &std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
        );
        let own = files::parse_proc_cgroup(
            &std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        );
        let mut bases = Vec::new();
        let mut unusable = Vec::new();
        for c in Ctrl::ALL {
            let Some(m) = own
                .iter()
                .find(|m| m.controllers.iter().any(|x| x == c.name()))
            else {
                unusable.push((c, "not mounted".to_string()));
                continue;
            };
            let mount = match &conf.mountpoint {
                Some(mp) => Some((mount_dir_for(mp, c), "/".to_string())),
                None => mounts
                    .iter()
                    .find(|x| x.fstype == "cgroup" && x.super_opts.iter().any(|o| o == c.name()))
                    .map(|x| (Some(x.mount_point.clone()), x.root.clone())),
            };
            let Some((Some(mp), root)) = mount else {
                unusable.push((c, "not mounted".to_string()));
                continue;
            };
            let Some(base) = files::cgroup_dir(&mp, &root, &m.path) else {
                unusable.push((
                    c,
                    format!("own cgroup {} is outside {}", m.path, mp.display()),
                ));
                continue;
            };
            // Usable only if this process can make and write its user's subtree: a tree
            // made by another (root) instance is not ours to use.
            let uid_dir = base.join(&scope.root).join(format!("uid_{}", scope.uid));
            match files::mkdir(&base.join(&scope.root)).and_then(|_| files::mkdir(&uid_dir)) {
                Ok(_) if nix::unistd::access(&uid_dir, nix::unistd::AccessFlags::W_OK).is_ok() => {
                    bases.push((c, base))
                }
                Ok(_) => unusable.push((c, format!("{} is not writable", uid_dir.display()))),
                Err(e) => unusable.push((c, e.to_string())),
            }
        }
        if bases.is_empty() {
            let why: Vec<String> = unusable
                .iter()
                .map(|(c, w)| format!("{}: {w}", c.name()))
                .collect();
            return Err(IsolateError::Unavailable(format!(
                "no usable controller ({})",
                why.join("; ")
            )));
        }
        Ok(V1::with_bases(scope, bases, unusable))
    }

    /// A manager over explicit base directories (a fixture, or a known layout).
    pub fn with_bases(
        scope: Scope,
        bases: Vec<(Ctrl, PathBuf)>,
        unusable: Vec<(Ctrl, String)>,
    ) -> V1 {
        V1 {
            scope,
            bases,
            unusable,
            notes: Vec::new(),
            wanted: Constraints::default(),
        }
    }

    /// sluice's root cgroup in each usable controller.
    pub fn root_dirs(&self) -> Vec<PathBuf> {
        self.bases
            .iter()
            .map(|(_, b)| b.join(&self.scope.root))
            .collect()
    }

    /// The controllers in use.
    pub fn controllers(&self) -> Vec<Ctrl> {
        self.bases.iter().map(|(c, _)| *c).collect()
    }

    fn base(&self, c: Ctrl) -> Option<&Path> {
        self.bases
            .iter()
            .find(|(x, _)| *x == c)
            .map(|(_, b)| b.as_path())
    }

    fn dir(&self, c: Ctrl, rel: &Path) -> Option<PathBuf> {
        self.base(c).map(|b| b.join(rel))
    }

    /// The hierarchy processes are tracked in.
    fn tracker(&self) -> &Path {
        self.base(Ctrl::Freezer)
            .or(self.base(Ctrl::Memory))
            .unwrap_or(&self.bases[0].1)
    }

    fn create_in(&mut self, c: Ctrl, base: &Path, k: &Constraints) -> Result<(), IsolateError> {
        let mut parent = base.to_path_buf();
        let chain = self.scope.chain();
        let tasks: Vec<PathBuf> = (0..k.tasks.max(1))
            .map(|t| self.scope.task_rel(t))
            .collect();
        for (i, rel) in chain.iter().chain(tasks.iter()).enumerate() {
            let dir = base.join(rel);
            files::mkdir(&dir)?;
            // 0 root, 1 uid, 2 job, 3 step, 4.. tasks
            match c {
                Ctrl::Cpuset => {
                    let cpus = if i == 2 { k.cpus.as_ref() } else { None };
                    init_cpuset(&dir, &parent, i < 2, cpus)?;
                }
                Ctrl::Memory if i == 2 || i == 3 => {
                    if let Some(m) = &k.mem {
                        self.set_memory(&dir, m)?;
                    }
                }
                Ctrl::Devices if i == 2 || i == 3 => {
                    // v1 device rules are inherited: the job level gets only what no
                    // step of the job may open, the step level the step's own.
                    let rules = match (&k.deny_job, i) {
                        (Some(j), 2) => j,
                        _ => &k.deny,
                    };
                    for d in rules {
                        files::write(&dir.join("devices.deny"), &d.rule())?;
                    }
                }
                _ => {}
            }
            parent = dir;
        }
        Ok(())
    }

    fn set_memory(&mut self, dir: &Path, m: &super::MemLimits) -> Result<(), IsolateError> {
        let memsw = dir.join("memory.memsw.limit_in_bytes");
        let has_memsw = memsw.exists();
        // RAM+swap caps RAM too: without a RAM limit of its own, RAM gets the same one.
        let ram = m.ram.or(m.ram_swap);
        if has_memsw {
            // Lift the old RAM+swap limit first so that any new RAM limit is accepted.
            files::write(&memsw, "-1")?;
        }
        if let Some(r) = ram {
            files::write(&dir.join("memory.limit_in_bytes"), &r.to_string())?;
        }
        if let Some(s) = m.soft {
            files::write(&dir.join("memory.soft_limit_in_bytes"), &s.to_string())?;
        }
        match m.ram_swap {
            Some(rs) if has_memsw => files::write(&memsw, &rs.max(ram.unwrap_or(0)).to_string())?,
            Some(_) => {
                let n = "swap is not limited: the kernel has no swap accounting (memory.memsw)";
                if !self.notes.iter().any(|x| x == n) {
                    self.notes.push(n.to_string());
                }
            }
            None => {}
        }
        Ok(())
    }
}

/// `<mountpoint>/<name>`, or the directory there whose comma-separated name lists it
/// (`cpu,cpuacct`).
fn mount_dir_for(mp: &Path, c: Ctrl) -> Option<PathBuf> {
    let direct = mp.join(c.name());
    if direct.is_dir() {
        return Some(direct);
    }
    files::subdirs(mp).into_iter().find(|d| {
        d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.split(',').any(|x| x == c.name()))
    })
}

/// Fills a cpuset cgroup: the sluice root and uid levels (`keep`) get the parent's CPUs
/// and memory nodes only while still empty; the job gets `cpus` (or the parent's); steps
/// and tasks copy their parent.
fn init_cpuset(
    dir: &Path,
    parent: &Path,
    keep: bool,
    cpus: Option<&CpuList>,
) -> Result<(), IsolateError> {
    let cur = files::read(&dir.join("cpuset.cpus")).unwrap_or_default();
    if keep && !cur.is_empty() {
        return Ok(());
    }
    let inherit = |name: &str, effective: &str| {
        let v = files::read(&parent.join(name)).unwrap_or_default();
        if v.is_empty() {
            files::read(&parent.join(effective)).unwrap_or_default()
        } else {
            v
        }
    };
    let mems = inherit("cpuset.mems", "cpuset.effective_mems");
    files::write(&dir.join("cpuset.mems"), &mems)?;
    let cpus = match cpus {
        Some(c) => c.to_string(),
        None => inherit("cpuset.cpus", "cpuset.effective_cpus"),
    };
    files::write(&dir.join("cpuset.cpus"), &cpus)
}

impl CgroupManager for V1 {
    fn backend(&self) -> Backend {
        Backend::V1
    }

    fn degraded(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        let missing = |c: Ctrl| {
            self.unusable
                .iter()
                .find(|(x, _)| *x == c)
                .map(|(_, why)| why.clone())
        };
        let w = &self.wanted;
        for (c, asked, what) in [
            (Ctrl::Cpuset, w.cpus.is_some(), "cores are not confined"),
            (Ctrl::Memory, w.mem.is_some(), "memory is not limited"),
            (
                Ctrl::Devices,
                !w.deny.is_empty(),
                "devices are not constrained",
            ),
            (Ctrl::Freezer, true, "jobs cannot be suspended"),
        ] {
            if asked && let Some(why) = missing(c) {
                out.push(format!("{what} (cgroup/v1 {}: {why})", c.name()));
            }
        }
        out
    }

    fn online_cpus(&self) -> Option<CpuList> {
        let b = self.base(Ctrl::Cpuset)?;
        let v = files::read(&b.join("cpuset.effective_cpus"))
            .or_else(|_| files::read(&b.join("cpuset.cpus")))
            .ok()?;
        CpuList::parse(&v)
    }

    fn cpus_in_use(&self) -> Vec<CpuList> {
        let Some(b) = self.base(Ctrl::Cpuset) else {
            return Vec::new();
        };
        let own = b.join(self.scope.job_rel());
        let mut out = Vec::new();
        for user in files::subdirs(&b.join(&self.scope.root)) {
            for job in files::subdirs(&user) {
                if job == own || !super::job_cgroup_in_use(&job) {
                    continue;
                }
                if let Some(c) = files::read(&job.join("cpuset.cpus"))
                    .ok()
                    .and_then(|t| CpuList::parse(&t))
                {
                    out.push(c);
                }
            }
        }
        out
    }

    fn create(&mut self, k: &Constraints) -> Result<(), IsolateError> {
        self.wanted = k.clone();
        // As Slurm's task/cgroup: a cpuset cgroup only to confine cores, a devices one
        // only to deny some (unconstrained, they would hold every CPU and device, and
        // each costs a mkdir and rmdir per level per job). Memory, freezer and cpuacct
        // track, suspend and measure every job.
        let devices = !k.deny.is_empty() || k.deny_job.as_ref().is_some_and(|d| !d.is_empty());
        let needed: Vec<(Ctrl, PathBuf)> = self
            .bases
            .iter()
            .filter(|(c, _)| match c {
                Ctrl::Cpuset => k.cpus.is_some(),
                Ctrl::Devices => devices,
                Ctrl::Memory | Ctrl::Freezer | Ctrl::Cpuacct => true,
            })
            .cloned()
            .collect();
        // Something must track the processes, even if only those two are mounted.
        if !needed.is_empty() {
            self.bases = needed;
        }
        for (c, base) in self.bases.clone() {
            self.create_in(c, &base, k)?;
        }
        Ok(())
    }

    fn task_join(&self, task: u32) -> Result<TaskJoin, IsolateError> {
        let rel = self.scope.task_rel(task);
        let procs: Vec<PathBuf> = self
            .bases
            .iter()
            .map(|(_, b)| b.join(&rel).join("cgroup.procs"))
            .collect();
        TaskJoin::open(&procs, Vec::new())
    }

    fn add_pid(&self, task: u32, pid: i32) -> Result<(), IsolateError> {
        let rel = self.scope.task_rel(task);
        for (_, b) in &self.bases {
            files::write(&b.join(&rel).join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    fn pids(&self, level: Level) -> Vec<i32> {
        files::procs_below(&self.tracker().join(self.scope.rel(level)))
    }

    fn kill_all(&self, level: Level, timeout: Duration) -> Result<(), IsolateError> {
        let dir = self.tracker().join(self.scope.rel(level));
        let freezer = self.dir(Ctrl::Freezer, &self.scope.rel(level));
        kill_loop_v1(&dir, freezer.as_deref(), timeout)
    }

    fn freeze(&self, level: Level) -> Result<(), IsolateError> {
        let dir = self
            .dir(Ctrl::Freezer, &self.scope.rel(level))
            .ok_or_else(|| IsolateError::Unavailable("no freezer controller".into()))?;
        let state = dir.join("freezer.state");
        files::write(&state, "FROZEN")?;
        if super::wait_for(Duration::from_secs(5), || {
            files::read(&state).is_ok_and(|s| s == "FROZEN")
        }) {
            Ok(())
        } else {
            Err(IsolateError::Freeze { path: dir })
        }
    }

    fn thaw(&self, level: Level) -> Result<(), IsolateError> {
        let dir = self
            .dir(Ctrl::Freezer, &self.scope.rel(level))
            .ok_or_else(|| IsolateError::Unavailable("no freezer controller".into()))?;
        files::write(&dir.join("freezer.state"), "THAWED")
    }

    fn oom_kills(&self, level: Level) -> u64 {
        let Some(dir) = self.dir(Ctrl::Memory, &self.scope.rel(level)) else {
            return 0;
        };
        let mut total = 0;
        let mut counted = false;
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            if let Some(n) = files::read(&d.join("memory.oom_control"))
                .ok()
                .and_then(|t| keyed(&t, "oom_kill"))
            {
                total += n;
                counted = true;
            }
            stack.extend(files::subdirs(&d));
        }
        if !counted {
            // Kernels before 4.13 have no oom_kill count: a hit limit is the best sign.
            return u64::from(number(&dir.join("memory.failcnt")).unwrap_or(0) > 0);
        }
        total
    }

    fn usage(&self, level: Level) -> Usage {
        let rel = self.scope.rel(level);
        let mut u = Usage::default();
        if let Some(d) = self.dir(Ctrl::Memory, &rel) {
            u.mem_peak = number(&d.join("memory.max_usage_in_bytes"));
            u.mem_current = number(&d.join("memory.usage_in_bytes"));
            if let Ok(t) = files::read(&d.join("memory.stat")) {
                u.mem_rss = keyed(&t, "total_rss").or_else(|| keyed(&t, "rss"));
            }
        }
        if let Some(d) = self.dir(Ctrl::Cpuacct, &rel)
            && let Ok(t) = files::read(&d.join("cpuacct.stat"))
        {
            // cpuacct.stat counts USER_HZ ticks, which Linux fixes at 100 per second.
            u.cpu_user_usec = keyed(&t, "user").map(|v| v * 10_000);
            u.cpu_system_usec = keyed(&t, "system").map(|v| v * 10_000);
        }
        u
    }

    fn destroy(&mut self) -> Result<(), IsolateError> {
        let mut first_err = None;
        for (_, b) in &self.bases {
            if let Err(e) = super::remove_retrying(&b.join(self.scope.step_rel())) {
                first_err.get_or_insert(e);
            }
            super::remove_if_leaf(&b.join(self.scope.job_rel()));
            super::remove_if_leaf(&b.join(self.scope.uid_rel()));
        }
        first_err.map_or(Ok(()), Err)
    }
}

fn kill_loop_v1(dir: &Path, freezer: Option<&Path>, timeout: Duration) -> Result<(), IsolateError> {
    let state = freezer.map(|f| f.join("freezer.state"));
    super::kill_loop(
        dir,
        timeout,
        || files::procs_below(dir),
        |before| {
            if let Some(s) = &state {
                if before {
                    // A short wait: what does not freeze now is killed in the next round.
                    if files::write(s, "FROZEN").is_ok() {
                        super::wait_for(Duration::from_millis(100), || {
                            files::read(s).is_ok_and(|v| v == "FROZEN")
                        });
                    }
                } else {
                    let _ = files::write(s, "THAWED");
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::{Device, MemLimits};
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A temp directory laid out like a v1 host: one directory per controller with the
    /// root cgroup's files.
    fn fixture() -> (tempfile::TempDir, V1) {
        let t = tempfile::tempdir().unwrap();
        let mut bases = Vec::new();
        for c in Ctrl::ALL {
            let d = t.path().join(c.name());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "1\n").unwrap();
            bases.push((c, d));
        }
        let cs = t.path().join("cpuset");
        std::fs::write(cs.join("cpuset.cpus"), "0-7\n").unwrap();
        std::fs::write(cs.join("cpuset.effective_cpus"), "0-7\n").unwrap();
        std::fs::write(cs.join("cpuset.mems"), "0\n").unwrap();
        let m = V1::with_bases(Scope::batch("sluice", 1000, 7), bases, vec![]);
        (t, m)
    }

    fn rd(p: PathBuf) -> String {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    }

    /// Creates the files a kernel would in a new memory cgroup.
    fn memsw_files(t: &Path, rel: &Path) {
        for f in ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"] {
            let d = t.join("memory").join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(f), "9223372036854771712\n").unwrap();
        }
    }

    #[test]
    fn creates_the_hierarchy_with_cpuset_memory_and_devices() {
        let (t, mut m) = fixture();
        let null = Device::from_path(Path::new("/dev/null")).unwrap();
        let s = m.scope.clone();
        memsw_files(t.path(), &s.job_rel());
        memsw_files(t.path(), &s.step_rel());
        let k = Constraints {
            cpus: CpuList::parse("2-3"),
            mem: Some(MemLimits {
                ram: Some(100 * MIB),
                soft: Some(100 * MIB),
                ram_swap: Some(120 * MIB),
            }),
            deny: vec![null],
            deny_job: None,
            tasks: 1,
        };
        m.create(&k).unwrap();
        let p = |c: &str, rel: PathBuf, f: &str| t.path().join(c).join(rel).join(f);
        // Every level of every controller exists; cpuset levels are filled top-down.
        for c in Ctrl::ALL {
            assert!(
                t.path().join(c.name()).join(s.task_rel(0)).is_dir(),
                "{}",
                c.name()
            );
        }
        assert_eq!(rd(p("cpuset", "sluice".into(), "cpuset.cpus")), "0-7");
        assert_eq!(rd(p("cpuset", s.uid_rel(), "cpuset.cpus")), "0-7");
        assert_eq!(rd(p("cpuset", s.job_rel(), "cpuset.cpus")), "2-3");
        assert_eq!(rd(p("cpuset", s.step_rel(), "cpuset.cpus")), "2-3");
        assert_eq!(rd(p("cpuset", s.task_rel(0), "cpuset.cpus")), "2-3");
        assert_eq!(rd(p("cpuset", s.task_rel(0), "cpuset.mems")), "0");
        for level in [s.job_rel(), s.step_rel()] {
            assert_eq!(
                rd(p("memory", level.clone(), "memory.limit_in_bytes")),
                (100 * MIB).to_string()
            );
            assert_eq!(
                rd(p("memory", level.clone(), "memory.memsw.limit_in_bytes")),
                (120 * MIB).to_string()
            );
            assert_eq!(rd(p("devices", level, "devices.deny")), "c 1:3 rwm");
        }
        assert!(!p("memory", s.task_rel(0), "memory.limit_in_bytes").exists());
        assert!(m.degraded().is_empty(), "{:?}", m.degraded());
        // The task joins every controller's task cgroup.
        assert_eq!(m.task_join(0).unwrap().cgroups(), Ctrl::ALL.len());
    }

    #[test]
    fn unconstrained_job_gets_no_cpuset_devices_or_memory_limit() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let s = m.scope.clone();
        // No cores to confine and no device to deny: neither controller is used.
        for c in ["cpuset", "devices"] {
            assert!(!t.path().join(c).join(s.job_rel()).exists(), "{c}");
        }
        for c in ["memory", "freezer", "cpuacct"] {
            assert!(t.path().join(c).join(s.task_rel(0)).is_dir(), "{c}");
        }
        assert!(
            !t.path()
                .join("memory")
                .join(s.job_rel())
                .join("memory.limit_in_bytes")
                .exists()
        );
        assert_eq!(m.task_join(0).unwrap().cgroups(), 3);
        assert!(m.degraded().is_empty(), "{:?}", m.degraded());
        m.destroy().unwrap();
        assert!(!t.path().join("memory").join(s.job_rel()).exists());
    }

    #[test]
    fn killing_an_empty_job_does_not_freeze_it() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let s = m.scope.clone();
        m.kill_all(Level::Job, Duration::from_secs(1)).unwrap();
        let state = t
            .path()
            .join("freezer")
            .join(s.job_rel())
            .join("freezer.state");
        assert!(!state.exists(), "freezer.state was written");
        // With a process left, the job is frozen around the kill and thawed again
        // (the fixture's process never goes away, so the loop times out).
        std::fs::write(
            t.path()
                .join("freezer")
                .join(s.task_rel(0))
                .join("cgroup.procs"),
            format!("{}\n", i32::MAX),
        )
        .unwrap();
        assert!(m.kill_all(Level::Job, Duration::from_millis(50)).is_err());
        assert_eq!(rd(state), "THAWED");
    }

    #[test]
    fn denying_devices_to_the_job_alone_uses_the_devices_controller() {
        let (t, mut m) = fixture();
        let null = Device::from_path(Path::new("/dev/null")).unwrap();
        let k = Constraints {
            deny_job: Some(vec![null]),
            ..Constraints::default()
        };
        m.create(&k).unwrap();
        let s = m.scope.clone();
        assert_eq!(
            rd(t.path()
                .join("devices")
                .join(s.job_rel())
                .join("devices.deny")),
            "c 1:3 rwm"
        );
        assert!(!t.path().join("cpuset").join(s.job_rel()).exists());
    }

    #[test]
    fn missing_swap_accounting_is_reported() {
        let (_t, mut m) = fixture();
        let k = Constraints {
            mem: Some(MemLimits {
                ram: None,
                soft: None,
                ram_swap: Some(64 * MIB),
            }),
            ..Constraints::default()
        };
        m.create(&k).unwrap();
        let d = m.degraded();
        assert!(d.iter().any(|x| x.contains("swap is not limited")), "{d:?}");
    }

    #[test]
    fn missing_controllers_are_reported_when_asked_for() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("freezer");
        std::fs::create_dir_all(&d).unwrap();
        let mut m = V1::with_bases(
            Scope::batch("sluice", 0, 1),
            vec![(Ctrl::Freezer, d)],
            vec![
                (Ctrl::Memory, "not mounted".into()),
                (Ctrl::Cpuset, "not mounted".into()),
            ],
        );
        m.create(&Constraints {
            mem: Some(MemLimits::default()),
            ..Constraints::default()
        })
        .unwrap();
        let d = m.degraded();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].contains("memory is not limited"), "{d:?}");
        assert_eq!(m.online_cpus(), None);
    }

    #[test]
    fn counts_oom_kills_over_the_subtree_and_reads_usage() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let s = m.scope.clone();
        let mem = |rel: PathBuf| t.path().join("memory").join(rel);
        std::fs::write(
            mem(s.step_rel()).join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        std::fs::write(
            mem(s.task_rel(0)).join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(m.oom_kills(Level::Step), 2);
        assert_eq!(m.oom_kills(Level::Job), 2);
        std::fs::write(
            mem(s.step_rel()).join("memory.max_usage_in_bytes"),
            "4096\n",
        )
        .unwrap();
        std::fs::write(mem(s.step_rel()).join("memory.usage_in_bytes"), "1024\n").unwrap();
        // RSS-only: the hierarchical total_rss, not the page cache.
        std::fs::write(
            mem(s.step_rel()).join("memory.stat"),
            "cache 900000\nrss 100\nrss_huge 0\ntotal_cache 900000\ntotal_rss 2048\n",
        )
        .unwrap();
        std::fs::write(
            t.path()
                .join("cpuacct")
                .join(s.step_rel())
                .join("cpuacct.stat"),
            "user 250\nsystem 50\n",
        )
        .unwrap();
        let u = m.usage(Level::Step);
        assert_eq!(u.mem_peak, Some(4096));
        assert_eq!(u.mem_current, Some(1024));
        assert_eq!(u.mem_rss, Some(2048));
        assert_eq!(u.cpu_user_usec, Some(2_500_000));
        assert_eq!(u.cpu_secs(), Some(3.0));
    }

    #[test]
    fn old_kernels_fall_back_to_failcnt() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let step = t.path().join("memory").join(m.scope.step_rel());
        std::fs::write(step.join("memory.failcnt"), "3\n").unwrap();
        assert_eq!(m.oom_kills(Level::Step), 1);
    }

    #[test]
    fn other_running_jobs_cpusets_are_in_use() {
        let (t, mut m) = fixture();
        let cs = t.path().join("cpuset/sluice");
        for (job, cpus, procs) in [
            ("job_1", "0-1", "100\n"),
            ("job_2", "4", ""),
            ("job_3", "6", ""),
        ] {
            let d = cs.join("uid_5").join(job);
            std::fs::create_dir_all(d.join("step_batch/task_0")).unwrap();
            std::fs::write(d.join("cpuset.cpus"), cpus).unwrap();
            std::fs::write(d.join("step_batch/task_0/cgroup.procs"), procs).unwrap();
        }
        // job_3 is an old leftover; job_2 was just created and is about to start.
        let old = std::time::SystemTime::now() - Duration::from_secs(600);
        std::fs::File::open(cs.join("uid_5/job_3"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        m.create(&Constraints {
            cpus: CpuList::parse("2-3"),
            ..Constraints::default()
        })
        .unwrap();
        // job_1 runs, job_2 is starting; job_3 and our own job are not counted.
        assert_eq!(
            m.cpus_in_use(),
            vec![CpuList::parse("0-1").unwrap(), CpuList::parse("4").unwrap()]
        );
        assert_eq!(m.online_cpus(), CpuList::parse("0-7"));
    }

    #[test]
    fn freezes_and_thaws_through_freezer_state() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let st = t
            .path()
            .join("freezer")
            .join(m.scope.step_rel())
            .join("freezer.state");
        // A fixture file does not change state by itself: it reads back what was written.
        m.freeze(Level::Step).unwrap();
        assert_eq!(rd(st.clone()), "FROZEN");
        m.thaw(Level::Step).unwrap();
        assert_eq!(rd(st), "THAWED");
    }

    #[test]
    fn destroy_removes_step_then_empty_job_and_uid_but_keeps_others() {
        let (t, mut m) = fixture();
        let s = m.scope.clone();
        // Another job of the same user is running.
        let other = t.path().join("memory/sluice/uid_1000/job_8/step_batch");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("cgroup.procs"), "99\n").unwrap();
        m.create(&Constraints::default()).unwrap();
        m.destroy().unwrap();
        // (An unconstrained job uses no cpuset or devices cgroup.)
        for c in [Ctrl::Memory, Ctrl::Freezer, Ctrl::Cpuacct] {
            let b = t.path().join(c.name());
            assert!(!b.join(s.job_rel()).exists(), "{}", c.name());
            assert!(b.join("sluice").is_dir(), "the root stays");
        }
        assert!(other.exists(), "other job untouched");
        assert!(t.path().join("memory").join(s.uid_rel()).exists());
        assert!(
            !t.path().join("freezer").join(s.uid_rel()).exists(),
            "empty uid removed"
        );
    }

    #[test]
    fn destroy_fails_while_a_process_remains() {
        let (t, mut m) = fixture();
        m.create(&Constraints::default()).unwrap();
        let procs = t
            .path()
            .join("freezer")
            .join(m.scope.task_rel(0))
            .join("cgroup.procs");
        std::fs::write(&procs, "4242\n").unwrap();
        assert_eq!(m.pids(Level::Job), vec![4242]);
        let e = m.destroy().unwrap_err();
        assert!(e.to_string().contains("step_batch"), "{e}");
    }
}
