//! NCCL-aware launch (DESIGN.md §6): the variables a distributed-training task needs
//! and that users otherwise compute by hand in every job script. For tasks with GPUs,
//! unless the user's environment already sets them:
//!
//! - `NCCL_IB_HCA`: the InfiniBand/RoCE HCAs (from `/sys/class/infiniband`) whose PCIe
//!   path shares a PCIe switch with one of the task's GPUs (nvidia-smi's `PIX`/`PXB`),
//!   as `=mlx5_0,mlx5_1` (exact names);
//! - `NCCL_SOCKET_IFNAME`: the interface whose subnet holds the step's first node's
//!   address (the one the bootstrap connects to);
//! - `MASTER_ADDR` (the step's first node) and `MASTER_PORT` (derived from the job and
//!   step ids, so every node computes the same and concurrent steps differ);
//! - `NCCL_DEBUG_FILE` per rank when `NCCL_DEBUG` is set.
//!
//! The sysfs reading takes a root directory, so tests lay out a fake tree (unit tests
//! pass it; integration tests set `SLUICE_SYSFS_ROOT` for the agent, see
//! [`sys_root`]). Declared GPUs give their PCI bus id with `pci_bus` in `[[gres]]`.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// Lowest MASTER_PORT sluice hands out; ports are `BASE .. BASE + SPAN`.
pub const MASTER_PORT_BASE: u32 = 20000;
/// Number of distinct MASTER_PORT values (below the usual ephemeral range, 32768+).
pub const MASTER_PORT_SPAN: u32 = 12000;

/// The MASTER_PORT of step `step` of job `job`: the same on every node, different for
/// consecutive jobs and for the steps of one job.
pub fn master_port(job: u32, step: u32) -> u16 {
    let k = (u64::from(job) * 7 + u64::from(step)) % u64::from(MASTER_PORT_SPAN);
    (MASTER_PORT_BASE + k as u32) as u16
}

/// The PCIe path of a device under `sys/devices`: its ancestors from the root complex
/// down (`["pci0000:00", "0000:00:01.0", "0000:17:00.0"]`), from the canonical path of
/// `link` (a `…/device` symlink or `bus/pci/devices/<id>`). Empty when unreadable.
pub fn pci_path(link: &Path) -> Vec<String> {
    let Ok(real) = link.canonicalize() else {
        return Vec::new();
    };
    let parts: Vec<String> = real
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.iter().position(|p| p.starts_with("pci")) {
        Some(i) => parts[i..]
            .iter()
            .take_while(|p| p.starts_with("pci") || p.contains(':'))
            .cloned()
            .collect(),
        None => Vec::new(),
    }
}

/// Whether two PCIe paths meet below the host bridge (through one or more PCIe
/// switches: nvidia-smi's PIX or PXB), rather than only at the root complex (PHB) or
/// not at all (NODE/SYS).
pub fn near(a: &[String], b: &[String]) -> bool {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    // The root complex plus at least one bridge, and neither device is the other.
    common >= 2 && common < a.len() && common < b.len()
}

/// Normalises a PCI bus id to sysfs's form (`0000:17:00.0`, lowercase, 4-digit domain).
pub fn sysfs_bus_id(id: &str) -> String {
    let l = id.to_ascii_lowercase();
    match l.split_once(':') {
        Some((dom, rest)) => {
            format!("{:04x}:{rest}", u32::from_str_radix(dom, 16).unwrap_or(0))
        }
        None => l,
    }
}

/// The HCAs under `sys/class/infiniband` near one of the GPUs with PCI bus ids `gpus`,
/// sorted by name.
pub fn hcas_near(sys: &Path, gpus: &[String]) -> Vec<String> {
    let gpu_paths: Vec<Vec<String>> = gpus
        .iter()
        .map(|b| pci_path(&sys.join("bus/pci/devices").join(sysfs_bus_id(b))))
        .filter(|p| !p.is_empty())
        .collect();
    let mut out: Vec<String> = std::fs::read_dir(sys.join("class/infiniband"))
        .map(|rd| {
            rd.filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().into_string().ok()?;
                let p = pci_path(&e.path().join("device"));
                gpu_paths.iter().any(|g| near(g, &p)).then_some(name)
            })
            .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The interface (name, from `(name, address, netmask)` triples) whose subnet holds
/// `target`; an interface holding the address itself wins, loopback only for a
/// loopback target.
pub fn ifname_for(target: Ipv4Addr, ifaces: &[(String, Ipv4Addr, Ipv4Addr)]) -> Option<String> {
    if let Some((n, _, _)) = ifaces.iter().find(|(_, a, _)| *a == target) {
        return Some(n.clone());
    }
    ifaces
        .iter()
        .filter(|(_, a, _)| !a.is_loopback() || target.is_loopback())
        .filter(|(_, a, m)| u32::from(*a) & u32::from(*m) == u32::from(target) & u32::from(*m))
        .max_by_key(|(_, _, m)| u32::from(*m))
        .map(|(n, _, _)| n.clone())
}

/// This machine's IPv4 interfaces as (name, address, netmask).
pub fn local_ifaces() -> Vec<(String, Ipv4Addr, Ipv4Addr)> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|i| {
            let a = i.address?.as_sockaddr_in()?.ip();
            let m = i.netmask?.as_sockaddr_in()?.ip();
            Some((i.interface_name, a, m))
        })
        .collect()
}

/// What a task's NCCL variables are computed from.
#[derive(Debug, Clone, Default)]
pub struct NcclInput<'a> {
    pub job: u32,
    pub step: u32,
    pub rank: u32,
    /// The step's first node's name (MASTER_ADDR).
    pub first_node: &'a str,
    /// Its IPv4 address, when it resolves.
    pub first_addr: Option<Ipv4Addr>,
    /// This machine's interfaces.
    pub ifaces: &'a [(String, Ipv4Addr, Ipv4Addr)],
    /// HCAs near the task's GPUs.
    pub hcas: &'a [String],
}

/// The variables to add for a task with GPUs, leaving out those `env` already has.
pub fn nccl_env(inp: &NcclInput, env: &[(String, String)]) -> Vec<(String, String)> {
    let has = |k: &str| env.iter().any(|(n, _)| n == k);
    let mut out = Vec::new();
    let mut add = |k: &str, v: String| {
        if !has(k) {
            out.push((k.to_string(), v));
        }
    };
    if !inp.hcas.is_empty() {
        add("NCCL_IB_HCA", format!("={}", inp.hcas.join(",")));
    }
    if let Some(i) = inp.first_addr.and_then(|a| ifname_for(a, inp.ifaces)) {
        add("NCCL_SOCKET_IFNAME", i);
    }
    add("MASTER_ADDR", inp.first_node.to_string());
    add("MASTER_PORT", master_port(inp.job, inp.step).to_string());
    if has("NCCL_DEBUG") {
        add(
            "NCCL_DEBUG_FILE",
            format!("nccl-debug.{}.{}.{}.log", inp.job, inp.step, inp.rank),
        );
    }
    out
}

/// The environment variable that points the NCCL affinity reading at another sysfs
/// tree (see [`sys_root`]).
pub const SYSFS_ROOT_VAR: &str = "SLUICE_SYSFS_ROOT";

/// The sysfs root read for GPU–HCA affinity: `/sys`, or the directory named by
/// `SLUICE_SYSFS_ROOT` in the reader's own environment (stepd inherits the agent's;
/// `sluice doctor --gpus` its caller's). The variable is a **test hook**: it lets the
/// integration tests lay out fake PCIe trees of GPUs and InfiniBand HCAs; it is never
/// taken from a job's environment.
pub fn sys_root() -> PathBuf {
    match std::env::var_os(SYSFS_ROOT_VAR) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("/sys"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs: two PCIe switches under one root complex; GPU 17 and mlx5_0 behind
    /// the first switch, GPU ca and mlx5_1 behind the second, mlx5_2 on another root.
    fn fake_sys() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        let dev = |rel: &str| {
            let p = s.join("devices").join(rel);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let g0 = dev("pci0000:00/0000:00:01.0/0000:01:00.0/0000:17:00.0");
        let h0 = dev("pci0000:00/0000:00:01.0/0000:01:00.0/0000:18:00.0");
        let g1 = dev("pci0000:00/0000:00:02.0/0000:02:00.0/0000:ca:00.0");
        let h1 = dev("pci0000:00/0000:00:02.0/0000:02:00.0/0000:cb:00.0");
        let h2 = dev("pci0000:80/0000:80:01.0/0000:81:00.0");
        std::fs::create_dir_all(s.join("bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(&g0, s.join("bus/pci/devices/0000:17:00.0")).unwrap();
        std::os::unix::fs::symlink(&g1, s.join("bus/pci/devices/0000:ca:00.0")).unwrap();
        for (name, p) in [("mlx5_0", &h0), ("mlx5_1", &h1), ("mlx5_2", &h2)] {
            let d = s.join("class/infiniband").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::os::unix::fs::symlink(p, d.join("device")).unwrap();
        }
        t
    }

    #[test]
    fn hcas_behind_the_same_pcie_switch_as_the_gpu() {
        let t = fake_sys();
        // NVML's bus id form: 8-digit domain, upper case.
        assert_eq!(
            hcas_near(t.path(), &["00000000:17:00.0".into()]),
            vec!["mlx5_0"]
        );
        assert_eq!(
            hcas_near(t.path(), &["00000000:CA:00.0".into()]),
            vec!["mlx5_1"]
        );
        assert_eq!(
            hcas_near(t.path(), &["0000:17:00.0".into(), "0000:ca:00.0".into()]),
            vec!["mlx5_0", "mlx5_1"]
        );
        assert!(hcas_near(t.path(), &[]).is_empty());
        assert!(hcas_near(t.path(), &["0000:99:00.0".into()]).is_empty());
        assert!(hcas_near(&t.path().join("nothing"), &["0000:17:00.0".into()]).is_empty());
    }

    #[test]
    fn only_a_shared_switch_counts_as_near() {
        let p = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        let gpu = p("pci0000:00/0000:00:01.0/0000:17:00.0");
        assert!(near(&gpu, &p("pci0000:00/0000:00:01.0/0000:18:00.0")));
        assert!(!near(&gpu, &p("pci0000:00/0000:00:02.0/0000:cb:00.0")));
        assert!(!near(&gpu, &p("pci0000:80/0000:80:01.0/0000:81:00.0")));
        assert!(!near(&gpu, &gpu));
    }

    #[test]
    fn socket_interface_and_ports() {
        let ifs = vec![
            (
                "lo".to_string(),
                Ipv4Addr::LOCALHOST,
                Ipv4Addr::new(255, 0, 0, 0),
            ),
            (
                "eth0".to_string(),
                Ipv4Addr::new(10, 1, 2, 3),
                Ipv4Addr::new(255, 255, 0, 0),
            ),
            (
                "ib0".to_string(),
                Ipv4Addr::new(10, 1, 9, 3),
                Ipv4Addr::new(255, 255, 255, 0),
            ),
        ];
        assert_eq!(
            ifname_for(Ipv4Addr::new(10, 1, 9, 7), &ifs).as_deref(),
            Some("ib0")
        );
        assert_eq!(
            ifname_for(Ipv4Addr::new(10, 1, 4, 4), &ifs).as_deref(),
            Some("eth0")
        );
        assert_eq!(
            ifname_for(Ipv4Addr::new(10, 1, 2, 3), &ifs).as_deref(),
            Some("eth0")
        );
        assert_eq!(ifname_for(Ipv4Addr::LOCALHOST, &ifs).as_deref(), Some("lo"));
        assert_eq!(ifname_for(Ipv4Addr::new(192, 168, 0, 1), &ifs), None);
        let p = master_port(1234, 0);
        assert!((20000..32000).contains(&p));
        assert_ne!(master_port(1234, 1), p);
        assert_ne!(master_port(1235, 0), p);
        assert_eq!(master_port(1234, 0), p);
    }

    #[test]
    fn env_fills_only_what_the_user_left_unset() {
        let ifs = vec![(
            "eth0".to_string(),
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(255, 255, 255, 0),
        )];
        let hcas = vec!["mlx5_0".to_string(), "mlx5_1".to_string()];
        let inp = NcclInput {
            job: 42,
            step: 1,
            rank: 3,
            first_node: "gpu1",
            first_addr: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ifaces: &ifs,
            hcas: &hcas,
        };
        let user = vec![
            ("NCCL_DEBUG".to_string(), "INFO".to_string()),
            ("MASTER_PORT".to_string(), "29500".to_string()),
        ];
        let e = nccl_env(&inp, &user);
        let get = |k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("NCCL_IB_HCA"), Some("=mlx5_0,mlx5_1"));
        assert_eq!(get("NCCL_SOCKET_IFNAME"), Some("eth0"));
        assert_eq!(get("MASTER_ADDR"), Some("gpu1"));
        assert_eq!(get("MASTER_PORT"), None, "the user's value stays");
        assert_eq!(get("NCCL_DEBUG_FILE"), Some("nccl-debug.42.1.3.log"));
        // Without NCCL_DEBUG no debug file, without HCAs no NCCL_IB_HCA.
        let e = nccl_env(&NcclInput { hcas: &[], ..inp }, &[]);
        assert!(
            !e.iter()
                .any(|(k, _)| k == "NCCL_DEBUG_FILE" || k == "NCCL_IB_HCA")
        );
    }
}
