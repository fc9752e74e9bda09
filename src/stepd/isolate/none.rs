//! No cgroups ("degraded isolation"; cf. Slurm's proctrack/linuxproc with
//! jobacct_gather/linux): for personal mode on a machine without a writable hierarchy.
//!
//! Tracking: stepd marks itself a child subreaper, so a task's double-forked,
//! setsid'ed descendants are re-parented to stepd instead of init and stay findable as
//! its descendants in /proc; stepd runs one step, so its descendants are the step.
//! Memory: each task process gets `RLIMIT_DATA` = the RAM limit (heap and private
//! writable mappings; per process, not per job; an allocation past it fails instead of
//! being OOM-killed). Cores and devices are not confined; suspend is SIGSTOP/SIGCONT.

use super::{
    Backend, CgroupManager, Constraints, CpuList, IsolateError, Level, Scope, TaskJoin, Usage,
};
use crate::config::CgroupConf;
use nix::sys::resource::Resource;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::time::Duration;

/// Process-tree tracking and rlimits in place of cgroups.
#[derive(Debug)]
pub struct NoCgroup {
    scope: Scope,
    /// Why there are no cgroups.
    reason: String,
    conf: CgroupConf,
    wanted: Constraints,
    rlimits: Vec<(Resource, u64)>,
    /// Whether stepd could become a child subreaper.
    subreaper: bool,
}

impl NoCgroup {
    /// A stand-in for `scope`'s cgroups; `reason` says why there are none.
    pub fn new(scope: Scope, conf: &CgroupConf, reason: String) -> NoCgroup {
        NoCgroup {
            scope,
            reason,
            conf: conf.clone(),
            wanted: Constraints::default(),
            rlimits: Vec::new(),
            subreaper: false,
        }
    }

    /// The processes below this one (not itself), zombies left out.
    fn descendants(&self) -> Vec<i32> {
        descendants_of(std::process::id() as i32, &proc_table())
    }
}

/// `(pid, ppid, state)` of every process in /proc.
fn proc_table() -> Vec<(i32, i32, char)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            parse_stat(&stat).map(|(ppid, st)| (pid, ppid, st))
        })
        .collect()
}

/// `(ppid, state)` from `/proc/<pid>/stat` text; the command name may hold spaces and
/// parentheses, so fields are counted from its last `)`.
fn parse_stat(text: &str) -> Option<(i32, char)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((ppid, state))
}

/// Live (non-zombie) descendants of `root` in `table`.
fn descendants_of(root: i32, table: &[(i32, i32, char)]) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<(i32, char)>> = HashMap::new();
    for &(pid, ppid, st) in table {
        children.entry(ppid).or_default().push((pid, st));
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &(c, st) in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if st != 'Z' && st != 'X' {
                out.push(c);
            }
            stack.push(c);
        }
    }
    out.sort_unstable();
    out
}

/// Reaps every exited child of this process without blocking.
fn reap() {
    while let Ok(s) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}

impl CgroupManager for NoCgroup {
    fn backend(&self) -> Backend {
        Backend::None
    }

    fn degraded(&self) -> Vec<String> {
        let mut out = vec![format!("no cgroups: {}", self.reason)];
        if !self.subreaper {
            out.push("processes that leave the step's process group are not tracked".into());
        }
        if self.conf.constrain_cores || self.wanted.cpus.is_some() {
            out.push("cores are not confined".into());
        }
        if self
            .wanted
            .mem
            .is_some_and(|m| m.ram.is_some() || m.ram_swap.is_some())
        {
            out.push("memory is limited per process (RLIMIT_DATA), not per job; OOM kills are not detected".into());
        }
        if !self.wanted.deny.is_empty() {
            out.push("devices are not constrained".into());
        }
        out
    }

    fn online_cpus(&self) -> Option<CpuList> {
        None
    }

    fn cpus_in_use(&self) -> Vec<CpuList> {
        Vec::new()
    }

    fn create(&mut self, k: &Constraints) -> Result<(), IsolateError> {
        self.wanted = k.clone();
        self.subreaper = nix::sys::prctl::set_child_subreaper(true).is_ok();
        self.rlimits.clear();
        if let Some(limit) = k.mem.and_then(|m| m.ram.or(m.ram_swap)) {
            self.rlimits.push((Resource::RLIMIT_DATA, limit));
        }
        Ok(())
    }

    fn task_join(&self, _task: u32) -> Result<TaskJoin, IsolateError> {
        TaskJoin::open(&[], self.rlimits.clone())
    }

    fn add_pid(&self, _task: u32, _pid: i32) -> Result<(), IsolateError> {
        // A process not started by stepd cannot be adopted without cgroups.
        Err(IsolateError::Unavailable(format!(
            "no cgroups: cannot add a process to {}",
            self.scope.step_id()
        )))
    }

    fn pids(&self, _level: Level) -> Vec<i32> {
        self.descendants()
    }

    fn kill_all(&self, _level: Level, timeout: Duration) -> Result<(), IsolateError> {
        let r = super::kill_loop(
            std::path::Path::new(&self.scope.step_id()),
            timeout,
            || {
                reap();
                self.descendants()
            },
            |_| {},
        );
        reap();
        r
    }

    fn freeze(&self, level: Level) -> Result<(), IsolateError> {
        self.signal(level, Signal::SIGSTOP);
        Ok(())
    }

    fn thaw(&self, level: Level) -> Result<(), IsolateError> {
        for p in self.pids(level) {
            let _ = kill(Pid::from_raw(p), Signal::SIGCONT);
        }
        Ok(())
    }

    fn oom_kills(&self, _level: Level) -> u64 {
        0
    }

    fn usage(&self, _level: Level) -> Usage {
        Usage::default()
    }

    fn destroy(&mut self) -> Result<(), IsolateError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names() {
        assert_eq!(parse_stat("12 (bash) S 1 12 12 0"), Some((1, 'S')));
        assert_eq!(parse_stat("13 (a) b (c)) Z 12 13"), Some((12, 'Z')));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_skip_zombies_but_follow_through_them() {
        // 10 → 11 (zombie) → 12; 10 → 13; 20 is unrelated.
        let t = [
            (11, 10, 'Z'),
            (12, 11, 'S'),
            (13, 10, 'R'),
            (20, 1, 'S'),
            (21, 20, 'S'),
        ];
        assert_eq!(descendants_of(10, &t), vec![12, 13]);
        assert_eq!(descendants_of(99, &t), Vec::<i32>::new());
    }

    #[test]
    fn reports_what_is_not_enforced() {
        let conf = CgroupConf {
            constrain_cores: true,
            ..CgroupConf::default()
        };
        let mut m = NoCgroup::new(Scope::batch("sluice", 0, 1), &conf, "no mount".into());
        m.create(&Constraints {
            mem: Some(super::super::MemLimits {
                ram: Some(1 << 30),
                ..Default::default()
            }),
            ..Constraints::default()
        })
        .unwrap();
        // create() made the test process a subreaper; undo that for the other tests.
        nix::sys::prctl::set_child_subreaper(false).unwrap();
        let d = m.degraded();
        assert!(d[0].contains("no cgroups: no mount"), "{d:?}");
        assert!(
            d.iter().any(|x| x.contains("cores are not confined")),
            "{d:?}"
        );
        assert!(d.iter().any(|x| x.contains("RLIMIT_DATA")), "{d:?}");
        assert_eq!(m.rlimits, vec![(Resource::RLIMIT_DATA, 1 << 30)]);
        assert!(m.add_pid(0, 1).is_err());
    }
}
