//! A recording [`CgroupManager`] for tests of code that drives one (cf. youki's test
//! managers): every call is appended to a shared log, and what it reports (CPUs, OOM
//! kills, usage, failures) is set by the test.

use super::{Backend, CgroupManager, Constraints, CpuList, IsolateError, Level, TaskJoin, Usage};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// See the module docs. Clone it before boxing to keep a handle on the log.
#[derive(Debug, Clone, Default)]
pub struct Fake {
    /// One line per call: `create cpus=2-3 ram=1048576 deny=0 tasks=1`, `kill_all Job`, …
    pub log: Arc<Mutex<Vec<String>>>,
    pub online: Option<CpuList>,
    pub in_use: Vec<CpuList>,
    pub oom: u64,
    pub usage: Usage,
    /// `create` fails with this message.
    pub fail_create: Option<String>,
    pub degraded: Vec<String>,
}

impl Fake {
    fn record(&self, s: String) {
        if let Ok(mut l) = self.log.lock() {
            l.push(s);
        }
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl CgroupManager for Fake {
    fn backend(&self) -> Backend {
        Backend::Fake
    }

    fn degraded(&self) -> Vec<String> {
        self.degraded.clone()
    }

    fn online_cpus(&self) -> Option<CpuList> {
        self.online.clone()
    }

    fn cpus_in_use(&self) -> Vec<CpuList> {
        self.in_use.clone()
    }

    fn create(&mut self, c: &Constraints) -> Result<(), IsolateError> {
        let show = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
        self.record(format!(
            "create cpus={} ram={} ram_swap={} deny={} tasks={}",
            c.cpus.as_ref().map_or("-".to_string(), |c| c.to_string()),
            show(c.mem.and_then(|m| m.ram)),
            show(c.mem.and_then(|m| m.ram_swap)),
            c.deny.len(),
            c.tasks
        ));
        match &self.fail_create {
            Some(m) => Err(IsolateError::Unavailable(m.clone())),
            None => Ok(()),
        }
    }

    fn task_join(&self, task: u32) -> Result<TaskJoin, IsolateError> {
        self.record(format!("task_join {task}"));
        TaskJoin::open(&[], Vec::new())
    }

    fn add_pid(&self, task: u32, pid: i32) -> Result<(), IsolateError> {
        self.record(format!("add_pid {task} {pid}"));
        Ok(())
    }

    fn pids(&self, level: Level) -> Vec<i32> {
        self.record(format!("pids {level:?}"));
        Vec::new()
    }

    fn kill_all(&self, level: Level, _timeout: Duration) -> Result<(), IsolateError> {
        self.record(format!("kill_all {level:?}"));
        Ok(())
    }

    fn freeze(&self, level: Level) -> Result<(), IsolateError> {
        self.record(format!("freeze {level:?}"));
        Ok(())
    }

    fn thaw(&self, level: Level) -> Result<(), IsolateError> {
        self.record(format!("thaw {level:?}"));
        Ok(())
    }

    fn oom_kills(&self, level: Level) -> u64 {
        self.record(format!("oom_kills {level:?}"));
        self.oom
    }

    fn usage(&self, level: Level) -> Usage {
        self.record(format!("usage {level:?}"));
        self.usage
    }

    fn destroy(&mut self) -> Result<(), IsolateError> {
        self.record("destroy".into());
        Ok(())
    }
}
