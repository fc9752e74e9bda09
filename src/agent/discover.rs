//! What this node has: CPUs and their topology from sysfs, memory from /proc/meminfo,
//! boot time, OS and architecture (cf. slurmd's get_cpuinfo/get_memory). Declared values
//! in the configuration override these at the controller.

use std::collections::HashSet;

/// Detected node resources.
#[derive(Debug, Clone, PartialEq)]
pub struct Resources {
    pub cpus: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// MiB.
    pub memory_mb: u64,
    /// Epoch seconds.
    pub boot_time: i64,
    pub os: String,
    pub arch: String,
}

/// Detects this machine's resources; anything unreadable falls back to safe values
/// (one socket, one thread per core).
pub fn resources() -> Resources {
    let cpus = nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map(|n| n.max(1) as u32)
        .unwrap_or(1);
    let (sockets, threads) = topology(cpus);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_mb = meminfo_kib(&meminfo, "MemTotal")
        .map(|k| k / 1024)
        .unwrap_or(0);
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let boot_time = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let (os, arch) = match nix::sys::utsname::uname() {
        Ok(u) => (
            format!(
                "{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.version().to_string_lossy()
            ),
            u.machine().to_string_lossy().into_owned(),
        ),
        Err(_) => ("Linux".into(), std::env::consts::ARCH.into()),
    };
    Resources {
        cpus,
        sockets,
        cores_per_socket: (cpus / sockets / threads).max(1),
        threads_per_core: threads,
        memory_mb,
        boot_time,
        os,
        arch,
    }
}

/// (sockets, threads per core) from sysfs.
fn topology(cpus: u32) -> (u32, u32) {
    let mut packages = HashSet::new();
    for i in 0..cpus {
        let p = format!("/sys/devices/system/cpu/cpu{i}/topology/physical_package_id");
        if let Ok(s) = std::fs::read_to_string(p) {
            packages.insert(s.trim().to_string());
        }
    }
    let sockets = (packages.len() as u32).max(1);
    let threads =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
            .ok()
            .map(|s| count_cpu_list(s.trim()))
            .filter(|t| *t >= 1 && cpus.is_multiple_of(sockets * *t))
            .unwrap_or(1);
    (sockets, threads)
}

/// Counts CPUs in a kernel CPU list such as `0,4` or `0-1`.
fn count_cpu_list(s: &str) -> u32 {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

/// A `Key:   N kB` value from /proc/meminfo text, in KiB.
fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// One-minute load average and available memory in MiB.
pub fn load_and_free_mem() -> (f64, u64) {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let free = meminfo_kib(&meminfo, "MemAvailable")
        .map(|k| k / 1024)
        .unwrap_or(0);
    (load, free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list("0,4"), 2);
        assert_eq!(count_cpu_list("0-3"), 4);
        assert_eq!(count_cpu_list("0-1,8-9"), 4);
    }

    #[test]
    fn meminfo_parsing() {
        let t = "MemTotal:       16315648 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(meminfo_kib(t, "MemTotal"), Some(16315648));
        assert_eq!(meminfo_kib(t, "MemAvailable"), Some(1000));
        assert_eq!(meminfo_kib(t, "Nope"), None);
    }

    #[test]
    fn detects_something_sane() {
        let r = resources();
        assert!(r.cpus >= 1);
        assert_eq!(r.sockets * r.cores_per_socket * r.threads_per_core, r.cpus);
    }
}
