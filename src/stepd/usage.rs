//! Usage sampling from /proc for sstat and sacct (cf. Slurm's jobacct_gather/linux):
//! per task, the sum over the processes of its process group (or its session, for a
//! `--pty` task whose shell makes job-control groups) of RSS, virtual size, major page
//! faults, CPU time and I/O bytes. Without cgroups this is the only view of a step's
//! processes; unreadable entries (processes that just exited, another user's /proc/PID/io)
//! are skipped.

use crate::model::step::TaskSample;

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
/// group or its session is the leader's pid. Returns one sample per task and the pids
/// seen.
pub fn sample_groups(tasks: &[(u32, i32)], page_kib: u64) -> (Vec<TaskSample>, Vec<u32>) {
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
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
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
        s.disk_read += r;
        s.disk_write += w;
        pids.push(pid as u32);
    }
    pids.sort_unstable();
    (samples, pids)
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
}
