//! Isolation of a step's processes: cgroups for cores, memory, devices, freezing, tracking
//! and usage (cf. Slurm's task/cgroup, proctrack/cgroup, jobacct_gather/cgroup and the
//! cgroup/v1 and cgroup/v2 plugins).
//!
//! The hierarchy is Slurm's, below the cgroup stepd itself runs in (so an enclosing
//! slice or sandbox keeps accounting for the jobs):
//! `<base>/<root>/uid_<U>/job_<J>/step_<S>/task_<T>`. stepd creates it before a task
//! execs; the task's process joins its `task_<T>` cgroup itself, between fork and exec
//! ([`TaskJoin::enter`]), so there is no moment at which it, or anything it forks, runs
//! outside. When the step is over, everything in the job's cgroup is killed, and the
//! step's cgroups are removed, then the job's and the user's if nothing else is in them.
//!
//! One trait, [`CgroupManager`], four backends (youki's shape, STYLE.md convention 9):
//! - [`v1::V1`]: one directory per controller (cpuset, memory, devices, freezer, cpuacct).
//! - [`v2::V2`]: the unified hierarchy. Device rules need an eBPF program there, which
//!   sluice does not load: on v2, `ConstrainDevices` is reported as not enforced.
//! - [`none::NoCgroup`]: no usable hierarchy. stepd becomes a child subreaper so that
//!   double-forked processes stay its descendants and can be killed; memory is limited
//!   per process with `RLIMIT_DATA`; cores and devices are not confined. It says so in
//!   [`CgroupManager::degraded`].
//! - [`fake::Fake`]: records calls, for tests of code that drives a manager.
//!
//! The file operations are written here rather than taken from `cgroups-rs`: that crate
//! finds v1 hierarchies through the process's own mounts, so it cannot be pointed at a
//! fixture directory, and its v2 support pulls in systemd bindings sluice does not need.
//! What sluice uses is a few dozen reads and writes of well-documented files.

pub mod bpf;
pub mod cpulist;
pub mod fake;
pub mod files;
pub mod limits;
pub mod none;
#[cfg(test)]
mod real_tests;
pub mod step;
pub mod v1;
pub mod v2;

pub use cpulist::CpuList;
pub use limits::MemLimits;

use crate::config::{CgroupConf, CgroupPlugin};
use nix::sys::resource::Resource;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which implementation a manager is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    V1,
    V2,
    None,
    Fake,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::V1 => "cgroup/v1",
            Backend::V2 => "cgroup/v2",
            Backend::None => "none",
            Backend::Fake => "fake",
        })
    }
}

/// Errors setting up or driving a step's cgroups.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// No usable hierarchy (or not the one asked for).
    #[error("{0}")]
    Unavailable(String),
    #[error("cannot create cgroup {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write '{value}' to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: std::io::Error,
    },
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Processes were still there when the time to kill them ran out.
    #[error("processes {pids:?} are still in {what} after SIGKILL")]
    NotEmpty { what: String, pids: Vec<i32> },
    #[error("{path} did not freeze in time")]
    Freeze { path: PathBuf },
    #[error("{path}: {msg}")]
    Device { path: PathBuf, msg: String },
    #[error("cannot remove cgroup {path}: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Which cgroup of a step an operation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `job_<J>`: every step of the job on this node.
    Job,
    /// `step_<S>`: this step's tasks.
    Step,
}

/// The names of one step's cgroups, relative to a hierarchy's base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// sluice's top cgroup (`[cgroup] root`).
    pub root: String,
    pub uid: u32,
    pub job: u32,
    /// `batch`, `extern`, or a step number.
    pub step: String,
}

impl Scope {
    /// The batch step of job `job` of user `uid`.
    pub fn batch(root: &str, uid: u32, job: u32) -> Scope {
        Scope {
            root: root.to_string(),
            uid,
            job,
            step: "batch".into(),
        }
    }

    /// `<root>/uid_<U>`.
    pub fn uid_rel(&self) -> PathBuf {
        Path::new(&self.root).join(format!("uid_{}", self.uid))
    }

    /// `<root>/uid_<U>/job_<J>`.
    pub fn job_rel(&self) -> PathBuf {
        self.uid_rel().join(format!("job_{}", self.job))
    }

    /// `<root>/uid_<U>/job_<J>/step_<S>`.
    pub fn step_rel(&self) -> PathBuf {
        self.job_rel().join(format!("step_{}", self.step))
    }

    /// `<root>/uid_<U>/job_<J>/step_<S>/task_<T>`.
    pub fn task_rel(&self, task: u32) -> PathBuf {
        self.step_rel().join(format!("task_{task}"))
    }

    /// The directory of `level`.
    pub fn rel(&self, level: Level) -> PathBuf {
        match level {
            Level::Job => self.job_rel(),
            Level::Step => self.step_rel(),
        }
    }

    /// Every directory from the root down to the step, top first.
    pub fn chain(&self) -> [PathBuf; 4] {
        [
            PathBuf::from(&self.root),
            self.uid_rel(),
            self.job_rel(),
            self.step_rel(),
        ]
    }

    /// Slurm's name of the step in messages: `StepId=12.batch`.
    pub fn step_id(&self) -> String {
        format!("StepId={}.{}", self.job, self.step)
    }
}

/// A device file as a cgroup device rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub path: PathBuf,
    /// Block device (`b`) rather than character device (`c`).
    pub block: bool,
    pub major: u32,
    pub minor: u32,
}

impl Device {
    /// Reads the device numbers of `path`. Errors: it cannot be read, or it is not a
    /// character or block device.
    pub fn from_path(path: &Path) -> Result<Device, IsolateError> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::metadata(path).map_err(|e| IsolateError::Device {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        let ft = m.file_type();
        if !ft.is_char_device() && !ft.is_block_device() {
            return Err(IsolateError::Device {
                path: path.to_path_buf(),
                msg: "not a device file".into(),
            });
        }
        let rdev = m.rdev();
        Ok(Device {
            path: path.to_path_buf(),
            block: ft.is_block_device(),
            major: nix::libc::major(rdev),
            minor: nix::libc::minor(rdev),
        })
    }

    /// The v1 rule denying all access: `c 195:1 rwm`.
    pub fn rule(&self) -> String {
        format!(
            "{} {}:{} rwm",
            if self.block { 'b' } else { 'c' },
            self.major,
            self.minor
        )
    }
}

/// What a step's cgroups enforce.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Constraints {
    /// CPUs the job is confined to; `None` leaves the parent's.
    pub cpus: Option<CpuList>,
    pub mem: Option<MemLimits>,
    /// Devices the step may not open (written at the step level).
    pub deny: Vec<Device>,
    /// Devices the whole job may not open (written at the job level, which the job's
    /// other steps share); `None`: the same as `deny` (a job of one step).
    pub deny_job: Option<Vec<Device>>,
    /// Number of task cgroups to create (`task_0` … `task_<n-1>`).
    pub tasks: u32,
}

/// Resource usage read from a cgroup. `None`: not available from this backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Highest memory use, bytes (v1 `memory.max_usage_in_bytes`, v2 `memory.peak`).
    /// Both count page cache (a task that writes a big file "uses" its size), so
    /// this is never taken as RSS.
    pub mem_peak: Option<u64>,
    /// Anonymous (RSS-only) memory in use now, bytes: v1 `memory.stat` `total_rss`
    /// (cf. Slurm's jobacct_gather/cgroup on v1), v2 `memory.stat` `anon`. Page
    /// cache is not in it.
    pub mem_rss: Option<u64>,
    /// Memory in use now, bytes.
    pub mem_current: Option<u64>,
    /// CPU time in user mode, microseconds.
    pub cpu_user_usec: Option<u64>,
    /// CPU time in kernel mode, microseconds.
    pub cpu_system_usec: Option<u64>,
}

impl Usage {
    /// User + system CPU seconds, if known.
    pub fn cpu_secs(&self) -> Option<f64> {
        match (self.cpu_user_usec, self.cpu_system_usec) {
            (None, None) => None,
            (u, s) => Some((u.unwrap_or(0) + s.unwrap_or(0)) as f64 / 1e6),
        }
    }
}

/// What a task's process does between fork and exec to enter its cgroups: write "0"
/// (meaning "me") into each `cgroup.procs` opened beforehand, and set rlimits.
#[derive(Debug, Default)]
pub struct TaskJoin {
    files: Vec<OwnedFd>,
    rlimits: Vec<(Resource, u64)>,
}

impl TaskJoin {
    /// Opens `procs` (each a task cgroup's `cgroup.procs`) for writing, close-on-exec.
    /// Errors: one cannot be opened.
    pub fn open(
        procs: &[PathBuf],
        rlimits: Vec<(Resource, u64)>,
    ) -> Result<TaskJoin, IsolateError> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut files = Vec::new();
        for p in procs {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_CLOEXEC)
                .open(p)
                .map_err(|source| IsolateError::Open {
                    path: p.clone(),
                    source,
                })?;
            files.push(OwnedFd::from(f));
        }
        Ok(TaskJoin { files, rlimits })
    }

    /// Joins the cgroups and applies the rlimits. Runs in the forked child before exec:
    /// only `write(2)` and `setrlimit(2)`, no allocation. Errors: the kernel refused.
    pub fn enter(&self) -> std::io::Result<()> {
        let io = |e: nix::Error| std::io::Error::from_raw_os_error(e as i32);
        for f in &self.files {
            nix::unistd::write(f, b"0").map_err(io)?;
        }
        for &(r, v) in &self.rlimits {
            nix::sys::resource::setrlimit(r, v, v).map_err(io)?;
        }
        Ok(())
    }

    /// How many cgroups it joins.
    pub fn cgroups(&self) -> usize {
        self.files.len()
    }
}

/// A step's cgroups (or what stands in for them). See the module docs.
pub trait CgroupManager: fmt::Debug + Send {
    fn backend(&self) -> Backend;

    /// What is asked for but not enforced, one sentence each; empty when nothing is
    /// missing. Meaningful after [`CgroupManager::create`].
    fn degraded(&self) -> Vec<String>;

    /// The CPUs sluice's jobs may use here (the cpuset of the cgroup sluice lives in).
    fn online_cpus(&self) -> Option<CpuList>;

    /// The cpusets of the other jobs' cgroups under sluice's root.
    fn cpus_in_use(&self) -> Vec<CpuList>;

    /// Creates the job, step and task cgroups (reusing existing ones) and applies `c`
    /// at the job and step levels. Errors: a directory or control file could not be
    /// created or written.
    fn create(&mut self, c: &Constraints) -> Result<(), IsolateError>;

    /// What task `task`'s process runs before exec to join its cgroup.
    fn task_join(&self, task: u32) -> Result<TaskJoin, IsolateError>;

    /// Moves a running process into task `task`'s cgroup.
    fn add_pid(&self, task: u32, pid: i32) -> Result<(), IsolateError>;

    /// The live processes in `level`.
    fn pids(&self, level: Level) -> Vec<i32>;

    /// Sends `sig` to every process in `level`; returns how many were signalled.
    fn signal(&self, level: Level, sig: Signal) -> usize {
        self.pids(level)
            .into_iter()
            .filter(|&p| kill(Pid::from_raw(p), sig).is_ok())
            .count()
    }

    /// Kills every process in `level` (even ones that forked or called setsid) and
    /// waits up to `timeout` for them to be gone. Errors: some are still there.
    fn kill_all(&self, level: Level, timeout: Duration) -> Result<(), IsolateError>;

    /// Stops every process in `level` (suspend). Errors: no freezer, or it timed out.
    fn freeze(&self, level: Level) -> Result<(), IsolateError>;

    /// Resumes a frozen `level`.
    fn thaw(&self, level: Level) -> Result<(), IsolateError>;

    /// OOM kills in `level` since it was created.
    fn oom_kills(&self, level: Level) -> u64;

    /// Usage counters of `level`.
    fn usage(&self, level: Level) -> Usage;

    /// Removes the step's cgroups, then the job's and the user's if they are empty.
    /// Errors: the step's cgroup could not be removed (processes remain).
    fn destroy(&mut self) -> Result<(), IsolateError>;
}

/// Picks the backend `conf` asks for, falling back to [`none::NoCgroup`] (with the reason
/// in its `degraded()`) when that hierarchy is not there or not writable.
pub fn detect(conf: &CgroupConf, scope: Scope) -> Box<dyn CgroupManager> {
    let fallback = |why: String, scope: Scope| -> Box<dyn CgroupManager> {
        Box::new(none::NoCgroup::new(scope, conf, why))
    };
    match conf.plugin {
        CgroupPlugin::Disabled => fallback("cgroups disabled by configuration".into(), scope),
        CgroupPlugin::V1 => match v1::V1::detect(conf, scope.clone()) {
            Ok(m) => Box::new(m),
            Err(e) => fallback(format!("cgroup/v1: {e}"), scope),
        },
        CgroupPlugin::V2 => match v2::V2::detect(conf, scope.clone()) {
            Ok(m) => Box::new(m),
            Err(e) => fallback(format!("cgroup/v2: {e}"), scope),
        },
        CgroupPlugin::Autodetect => match v1::V1::detect(conf, scope.clone()) {
            Ok(m) => Box::new(m),
            Err(e1) => match v2::V2::detect(conf, scope.clone()) {
                Ok(m) => Box::new(m),
                Err(e2) => fallback(format!("cgroup/v1: {e1}; cgroup/v2: {e2}"), scope),
            },
        },
    }
}

/// Kills every process below sluice's root cgroup (`conf.root`) in every hierarchy
/// found, and removes the root: for tearing down a test cluster, or cleaning up after
/// a crash. It ends every job of that root on this machine, so it is never called by
/// the daemons. Errors: something could not be killed or removed.
pub fn purge(conf: &CgroupConf) -> Result<(), IsolateError> {
    let scope = Scope::batch(&conf.root, 0, 0);
    let mut roots = Vec::new();
    if let Ok(m) = v1::V1::detect(conf, scope.clone()) {
        roots.extend(m.root_dirs());
    }
    if let Ok(m) = v2::V2::detect(conf, scope) {
        roots.push(m.root_dir());
    }
    let mut first = None;
    for r in roots {
        let killed = kill_loop(
            &r,
            Duration::from_secs(5),
            || files::procs_below(&r),
            |_| {},
        );
        if let Err(e) = killed.and_then(|()| remove_retrying(&r)) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Whether another job's cgroup counts when choosing CPUs: it has processes, or was
/// created in the last minute (its stepd may be about to start the job's first
/// process; a leftover of a killed stepd stops counting after that).
fn job_cgroup_in_use(dir: &Path) -> bool {
    !files::procs_below(dir).is_empty()
        || std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|e| e < Duration::from_secs(60)))
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes; returns whether it held.
fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGKILL to `pids()` until it is empty or `timeout` passes, with `around` run
/// before (`true`) and after (`false`) each round (freeze/thaw, so nothing forks while
/// the list is read). Errors: processes remain.
fn kill_loop(
    what: &Path,
    timeout: Duration,
    pids: impl Fn() -> Vec<i32>,
    around: impl Fn(bool),
) -> Result<(), IsolateError> {
    // Nothing left (the usual end of a job): no freeze and thaw either, which on
    // cgroup v1 switches the kernel's freezer on and off again for the whole machine.
    // An empty cgroup stays empty: only its own processes could add to it.
    if pids().is_empty() {
        return Ok(());
    }
    let end = Instant::now() + timeout;
    loop {
        around(true);
        let left = pids();
        for &p in &left {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        around(false);
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(IsolateError::NotEmpty {
                what: what.display().to_string(),
                pids: left,
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes `dir` if no cgroup is below it (it is then empty of steps or jobs). Not
/// being able to is normal (another step is starting or running) and not reported.
fn remove_if_leaf(dir: &Path) {
    if dir.exists() && files::subdirs(dir).is_empty() {
        let _ = files::remove_cgroup(dir);
    }
}

/// Removes `dir` and the cgroups below it, retrying for up to a second while the
/// kernel still counts exiting processes.
fn remove_retrying(dir: &Path) -> Result<(), IsolateError> {
    let mut last = None;
    let ok = wait_for(Duration::from_secs(1), || match files::remove_cgroup(dir) {
        Ok(()) => true,
        Err(e) => {
            last = Some(e);
            false
        }
    });
    match (ok, last) {
        (true, _) | (false, None) => Ok(()),
        (false, Some(source)) => Err(IsolateError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_paths_are_slurms_shape() {
        let s = Scope::batch("sluice", 1000, 42);
        assert_eq!(s.job_rel(), PathBuf::from("sluice/uid_1000/job_42"));
        assert_eq!(
            s.task_rel(0),
            PathBuf::from("sluice/uid_1000/job_42/step_batch/task_0")
        );
        assert_eq!(s.rel(Level::Step), s.step_rel());
        assert_eq!(s.chain()[0], PathBuf::from("sluice"));
        assert_eq!(s.step_id(), "StepId=42.batch");
    }

    #[test]
    fn devices_become_deny_rules() {
        let d = Device::from_path(Path::new("/dev/null")).unwrap();
        assert_eq!(d.rule(), "c 1:3 rwm");
        let e = Device::from_path(Path::new("/etc/hostname")).unwrap_err();
        assert!(e.to_string().contains("not a device file"), "{e}");
        assert!(Device::from_path(Path::new("/nonexistent/gpu9")).is_err());
    }

    #[test]
    fn usage_cpu_seconds() {
        let u = Usage {
            cpu_user_usec: Some(1_500_000),
            cpu_system_usec: Some(500_000),
            ..Usage::default()
        };
        assert_eq!(u.cpu_secs(), Some(2.0));
        assert_eq!(Usage::default().cpu_secs(), None);
    }

    #[test]
    fn task_join_writes_zero_to_each_procs_file() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a.procs");
        let b = t.path().join("b.procs");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let j = TaskJoin::open(&[a.clone(), b.clone()], vec![]).unwrap();
        assert_eq!(j.cgroups(), 2);
        j.enter().unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "0");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "0");
        let missing = TaskJoin::open(&[t.path().join("nope")], vec![]).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }

    #[test]
    fn disabled_plugin_falls_back_with_a_reason() {
        let conf = CgroupConf {
            plugin: CgroupPlugin::Disabled,
            ..CgroupConf::default()
        };
        let m = detect(&conf, Scope::batch("sluice", 0, 1));
        assert_eq!(m.backend(), Backend::None);
        assert!(
            m.degraded()
                .iter()
                .any(|d| d.contains("disabled by configuration")),
            "{:?}",
            m.degraded()
        );
    }
}
