//! Usage sampling from /proc for sstat and sacct (cf. Slurm's jobacct_gather/linux):
//! per task, the sum over the processes of its process group (or its session, for a
//! `--pty` task whose shell makes job-control groups) of RSS, virtual size, major page
//! faults, CPU time and I/O bytes. Without cgroups this is the only view of a step's
//! processes; unreadable entries (processes that just exited, another user's /proc/PID/io)
//! are skipped.

use crate::model::step::{StepUsage, TaskSample};

/// KiB per memory page.
pub fn page_kib() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map(|p| (p as u64 / 1024).max(1))
        .unwrap_or(4)
}

fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map(|t| t as f64)
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// The fields of /proc/PID/stat that matter here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcStat {
    pub pid: i32,
    pub pgrp: i32,
    pub session: i32,
    pub majflt: u64,
    /// utime + stime + cutime + cstime, clock ticks.
    pub ticks: u64,
    /// utime + cutime (the user-mode part of `ticks`).
    pub user_ticks: u64,
    pub vsize_bytes: u64,
    pub rss_pages: u64,
}

/// Parses one /proc/PID/stat line; `None` if malformed. The command name is skipped by
/// its closing parenthesis, so names with spaces or parentheses parse.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let (head, rest) = line.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?.parse().ok()?;
    // Fields after the name, numbered from 3 (state).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num =
        |i: usize| -> Option<u64> { f.get(i - 3)?.parse::<i64>().ok().map(|v| v.max(0) as u64) };
    let int = |i: usize| -> Option<i32> { f.get(i - 3)?.parse().ok() };
    Some(ProcStat {
        pid,
        pgrp: int(5)?,
        session: int(6)?,
        majflt: num(12)?,
        ticks: num(14)? + num(15)? + num(16)? + num(17)?,
        user_ticks: num(14)? + num(16)?,
        vsize_bytes: num(23)?,
        rss_pages: num(24)?,
    })
}

/// Reads `read_bytes` and `write_bytes` of /proc/PID/io.
fn io_bytes(pid: i32) -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/io")) else {
        return (0, 0);
    };
    let get = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("read_bytes:"), get("write_bytes:"))
}

/// Samples the tasks `(rank, leader pid)`: a process belongs to a task when its process
/// group or its session is the leader's pid. Every process in /proc is looked at.
/// Returns one sample per task and the pids seen.
pub fn sample_groups(tasks: &[(u32, i32)], page_kib: u64) -> (Vec<TaskSample>, Vec<u32>) {
    sample_groups_among(tasks, page_kib, None)
}

/// [`sample_groups`] looking only at the processes `among` (the step's cgroup's list,
/// which holds every process of its tasks), or at all of /proc when `None`. With a
/// cgroup the cost is that of the job's own processes, not of every process on the
/// node.
pub fn sample_groups_among(
    tasks: &[(u32, i32)],
    page_kib: u64,
    among: Option<&[i32]>,
) -> (Vec<TaskSample>, Vec<u32>) {
    let mut samples: Vec<TaskSample> = tasks
        .iter()
        .map(|&(rank, _)| TaskSample {
            rank,
            ..TaskSample::default()
        })
        .collect();
    let mut pids = Vec::new();
    if tasks.is_empty() {
        return (samples, pids);
    }
    let hz = clock_ticks();
    let all: Box<dyn Iterator<Item = i32>> = match among {
        Some(pids) => Box::new(pids.iter().copied()),
        None => Box::new(
            std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok())),
        ),
    };
    for pid in all {
        let Ok(line) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(st) = parse_stat(&line) else {
            continue;
        };
        let Some(i) = tasks
            .iter()
            .position(|&(_, leader)| st.pgrp == leader || st.session == leader)
        else {
            continue;
        };
        let (r, w) = io_bytes(pid);
        let s = &mut samples[i];
        s.rss_kib += st.rss_pages * page_kib;
        s.vsize_kib += st.vsize_bytes / 1024;
        s.pages += st.majflt;
        s.cpu_secs += st.ticks as f64 / hz;
        s.user_secs += st.user_ticks as f64 / hz;
        s.disk_read += r;
        s.disk_write += w;
        pids.push(pid as u32);
    }
    pids.sort_unstable();
    (samples, pids)
}

/// Raises `u` to what `getrusage(RUSAGE_CHILDREN)` says of the reaped children of this
/// process (every task stepd has waited for): their CPU split into user and system
/// seconds, and the largest child's peak RSS, seen on `node`.
pub fn add_children_rusage(u: &mut StepUsage, node: &str) {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(ru) = getrusage(UsageWho::RUSAGE_CHILDREN) else {
        return;
    };
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    u.raise_cpu(t(ru.user_time()), t(ru.system_time()));
    u.raise_rss(node, ru.max_rss().max(0) as u64);
}

/// Raises `u` to a cgroup's counters (`c`, from the step's cgroup), which also count
/// processes that left the tasks' process groups: CPU, and the cgroup's RSS-only
/// memory now (`mem_rss`). The step cgroup holds every task of the step on this node,
/// so its RSS is one task's only for a one-task step; for more tasks it raises only
/// the tasks' summed RSS (TRESUsageInTot), never MaxRSS, which stays the largest
/// task's (Slurm's jobacct_gather keeps per-task figures). The cgroup's memory peak
/// counts page cache and is not used.
pub fn add_cgroup_usage(u: &mut StepUsage, node: &str, c: &super::isolate::Usage) {
    if let (Some(user), Some(sys)) = (c.cpu_user_usec, c.cpu_system_usec) {
        u.raise_cpu(user as f64 / 1e6, sys as f64 / 1e6);
    }
    if let Some(rss) = c.mem_rss {
        let kib = rss / 1024;
        if u.ntasks <= 1 {
            u.raise_rss(node, kib);
        } else {
            u.peak_sum_rss_kib = u.peak_sum_rss_kib.max(kib);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_names() {
        let line = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194304 100 0 3 0 7 5 2 1 20 0 1 0 99 10485760 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.pid, 4242);
        assert_eq!((st.pgrp, st.session), (4242, 4242));
        assert_eq!(st.majflt, 3);
        assert_eq!(st.ticks, 7 + 5 + 2 + 1);
        assert_eq!(st.user_ticks, 7 + 2);
        assert_eq!(st.vsize_bytes, 10_485_760);
        assert_eq!(st.rss_pages, 256);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn samples_this_process_group() {
        let me = std::process::id() as i32;
        let pgrp = nix::unistd::getpgrp().as_raw();
        let (s, pids) = sample_groups(&[(0, pgrp)], page_kib());
        assert!(pids.contains(&(me as u32)), "{pids:?}");
        assert!(s[0].rss_kib > 0 && s[0].vsize_kib > 0);
    }

    #[test]
    fn samples_only_the_listed_processes_of_the_group() {
        let me = std::process::id() as i32;
        let pgrp = nix::unistd::getpgrp().as_raw();
        // pid 1 is listed but not in our group; a pid that does not exist is skipped.
        let (s, pids) = sample_groups_among(&[(0, pgrp)], page_kib(), Some(&[1, me, i32::MAX]));
        assert_eq!(pids, vec![me as u32]);
        assert!(s[0].rss_kib > 0 && s[0].vsize_kib > 0);
        let (s, pids) = sample_groups_among(&[(0, pgrp)], page_kib(), Some(&[]));
        assert!(pids.is_empty());
        assert_eq!(s[0].rss_kib, 0);
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    #[test]
    fn cgroup_counters_raise_cpu_split_and_peak() {
        let mut u = StepUsage::from_tasks(
            "n1",
            &[TaskSample {
                rank: 0,
                rss_kib: 1000,
                cpu_secs: 1.0,
                user_secs: 0.75,
                ..TaskSample::default()
            }],
        );
        assert_eq!((u.user_cpu_secs, u.sys_cpu_secs), (0.75, 0.25));
        let c = super::super::isolate::Usage {
            mem_peak: Some(1 << 40),
            mem_rss: Some(4096 * 1024),
            mem_current: None,
            cpu_user_usec: Some(3_000_000),
            cpu_system_usec: Some(1_000_000),
        };
        add_cgroup_usage(&mut u, "n1", &c);
        assert_eq!(u.max_rss_kib, 4096);
        assert_eq!(
            (u.sum_cpu_secs, u.user_cpu_secs, u.sys_cpu_secs),
            (4.0, 3.0, 1.0)
        );
        assert_eq!((u.max_cpu_secs, u.min_cpu_secs), (4.0, 4.0));
        // A smaller reading changes nothing.
        let small = super::super::isolate::Usage {
            mem_rss: Some(1024),
            cpu_user_usec: Some(1),
            cpu_system_usec: Some(1),
            ..c
        };
        add_cgroup_usage(&mut u, "n1", &small);
        assert_eq!((u.max_rss_kib, u.sum_cpu_secs), (4096, 4.0));
    }

    #[test]
    fn a_multi_task_steps_cgroup_rss_is_not_one_tasks() {
        let t = |rank, rss_kib| TaskSample {
            rank,
            rss_kib,
            ..TaskSample::default()
        };
        let mut u = StepUsage::from_tasks("n1", &[t(0, 40_000), t(1, 120_000)]);
        let c = super::super::isolate::Usage {
            mem_peak: Some(500_000 * 1024),
            mem_rss: Some(170_000 * 1024),
            ..Default::default()
        };
        add_cgroup_usage(&mut u, "n1", &c);
        // MaxRSS stays the larger task's; the summed figure takes the cgroup's.
        assert_eq!((u.max_rss_kib, u.max_rss_task), (120_000, 1));
        assert_eq!(u.tot_rss_kib(), 170_000);
        assert_eq!(u.ave_rss_kib(), 85_000);
    }
}
