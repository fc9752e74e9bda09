//! `sluice doctor --gpus`: this machine's GPU/NIC topology matrix in the layout of
//! `nvidia-smi topo -m` (a row and a column per GPU and per InfiniBand/RoCE HCA, then
//! CPU Affinity and NUMA Affinity, a legend, and the NIC names). No Slurm twin; it shows
//! what sluice's GPU binding and NCCL_IB_HCA choice see.
//!
//! The GPUs and their NVLink counts come from NVML (`agent::gpu`); every PCIe relation
//! comes from the sysfs device paths (`/sys/bus/pci/devices/<bus id>` and
//! `/sys/class/infiniband/<hca>/device`), read under a root directory so that tests lay
//! out a fake tree. The relation of two devices:
//!
//! - `X` the device itself; `NV#` GPUs joined by # NVLinks;
//! - below one PCIe root port: `PIX` when each side is at most one switch port away
//!   from where the paths meet, else `PXB`;
//! - `PHB` same root complex, different root ports;
//! - `NODE` different root complexes on one NUMA node, `SYS` across NUMA nodes (or
//!   unknown).

use std::path::Path;

/// One device of the matrix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopoDevice {
    /// PCIe path from the root complex (`["pci0000:00", "0000:00:01.0", …, own id]`);
    /// empty when unknown.
    pub path: Vec<String>,
    /// NUMA node; `None` when sysfs says -1 or nothing.
    pub numa: Option<u32>,
    /// CPUs local to the device as a kernel CPU list (`0-31,64-95`); empty when unknown.
    pub cpus: String,
}

/// The relation code of two distinct devices with PCIe paths `a` and `b` and NUMA
/// nodes `na`, `nb` (see the module docs; NVLinks are the caller's).
pub fn pcie_relation(a: &TopoDevice, b: &TopoDevice) -> &'static str {
    let (pa, pb) = (&a.path, &b.path);
    let common = pa.iter().zip(pb).take_while(|(x, y)| x == y).count();
    if pa.is_empty() || pb.is_empty() || common == 0 {
        return match (a.numa, b.numa) {
            (Some(x), Some(y)) if x == y => "NODE",
            _ => "SYS",
        };
    }
    if common == 1 {
        return "PHB";
    }
    if pa.len() - common <= 2 && pb.len() - common <= 2 {
        "PIX"
    } else {
        "PXB"
    }
}

/// The matrix text: `gpus` with their NVLink counts `links[i][j]` (gres.conf `Links=`
/// shape; missing = none), then `nics` as (name, device).
pub fn matrix(gpus: &[TopoDevice], links: &[Vec<i32>], nics: &[(String, TopoDevice)]) -> String {
    let names: Vec<String> = (0..gpus.len())
        .map(|i| format!("GPU{i}"))
        .chain((0..nics.len()).map(|i| format!("NIC{i}")))
        .collect();
    let devs: Vec<&TopoDevice> = gpus.iter().chain(nics.iter().map(|(_, d)| d)).collect();
    let mut out = String::new();
    out.push('\t');
    out.push_str(&names.join("\t"));
    out.push_str("\tCPU Affinity\tNUMA Affinity\n");
    for (i, a) in devs.iter().enumerate() {
        let mut row = vec![names[i].clone()];
        for (j, b) in devs.iter().enumerate() {
            let nv = links
                .get(i)
                .and_then(|l| l.get(j))
                .copied()
                .filter(|n| *n > 0 && i < gpus.len() && j < gpus.len());
            row.push(if i == j {
                " X ".to_string()
            } else if let Some(n) = nv {
                format!("NV{n}")
            } else {
                pcie_relation(a, b).to_string()
            });
        }
        if i < gpus.len() {
            row.push(if a.cpus.is_empty() {
                "N/A".into()
            } else {
                a.cpus.clone()
            });
            row.push(a.numa.map_or("N/A".into(), |n| n.to_string()));
        }
        out.push_str(&row.join("\t"));
        out.push('\n');
    }
    out.push_str(
        "\nLegend:\n\n\
         \x20 X    = the device itself\n\
         \x20 SYS  = through PCIe and the link between NUMA nodes (QPI/UPI/Infinity Fabric)\n\
         \x20 NODE = through PCIe and between PCIe host bridges of one NUMA node\n\
         \x20 PHB  = through PCIe and a PCIe host bridge (the CPU)\n\
         \x20 PXB  = through several PCIe switches, not through the host bridge\n\
         \x20 PIX  = through at most one PCIe switch\n\
         \x20 NV#  = through a bonded set of # NVLinks\n",
    );
    if !nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for (i, (n, _)) in nics.iter().enumerate() {
            out.push_str(&format!("  NIC{i}: {n}\n"));
        }
    }
    out
}

/// The matrix entry of the PCI device `bus` (any case, 4- or 8-digit domain) under
/// `sys`: its path, NUMA node and local CPUs.
pub fn pci_device(sys: &Path, bus: &str) -> TopoDevice {
    device_at(
        &sys.join("bus/pci/devices")
            .join(crate::stepd::nccl::sysfs_bus_id(bus)),
    )
}

fn device_at(link: &Path) -> TopoDevice {
    let read = |f: &str| {
        std::fs::read_to_string(link.join(f))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    TopoDevice {
        path: crate::stepd::nccl::pci_path(link),
        numa: read("numa_node")
            .parse::<i64>()
            .ok()
            .and_then(|n| u32::try_from(n).ok()),
        cpus: read("local_cpulist"),
    }
}

/// The InfiniBand/RoCE HCAs under `sys/class/infiniband`, by name.
pub fn nics(sys: &Path) -> Vec<(String, TopoDevice)> {
    let mut v: Vec<(String, TopoDevice)> = std::fs::read_dir(sys.join("class/infiniband"))
        .map(|rd| {
            rd.filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().into_string().ok()?;
                Some((name, device_at(&e.path().join("device"))))
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The report for GPUs `gpus` (from NVML) on the sysfs tree `sys`; `Err` with the line
/// to print when there are none.
pub fn report(sys: &Path, gpus: &[crate::agent::gpu::DetectedGpu]) -> Result<String, String> {
    if gpus.is_empty() {
        return Err("no NVIDIA GPU found: nothing to show".into());
    }
    let mut g: Vec<&crate::agent::gpu::DetectedGpu> = gpus.iter().collect();
    g.sort_by_key(|x| x.index);
    let devs: Vec<TopoDevice> = g
        .iter()
        .map(|x| {
            let mut d = pci_device(sys, &x.bus_id);
            if d.cpus.is_empty() && !x.cores.is_empty() {
                d.cpus = x
                    .cores
                    .iter()
                    .copied()
                    .collect::<crate::stepd::isolate::cpulist::CpuList>()
                    .to_string();
            }
            d
        })
        .collect();
    let links: Vec<Vec<i32>> = g.iter().map(|x| x.links.clone()).collect();
    Ok(matrix(&devs, &links, &nics(sys)))
}

/// `sluice doctor --gpus`: prints the matrix of this machine; exit 0, also when there
/// is no GPU (which it says), 1 when NVML is present but fails.
pub fn run() -> std::process::ExitCode {
    use crate::agent::gpu::{NvmlProbe, nvml_gpus};
    let gpus = match nvml_gpus() {
        NvmlProbe::Gpus(g) => g,
        NvmlProbe::Absent(why) => {
            println!("no NVIDIA GPU found: NVML is not available ({why})");
            return std::process::ExitCode::SUCCESS;
        }
        NvmlProbe::Failed(why) => {
            eprintln!("sluice doctor: {why}");
            return std::process::ExitCode::from(1);
        }
    };
    match report(&crate::stepd::nccl::sys_root(), &gpus) {
        Ok(t) => print!("{t}"),
        Err(t) => println!("{t}"),
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sockets. NUMA 0: root complex pci0000:00 with a PCIe switch (upstream
    /// 01:00.0, downstream ports 02:00.0 and 02:04.0) holding GPU 17 and mlx5_0, and a
    /// second root port with GPU 65 directly. NUMA 0 also has root complex pci0000:40
    /// with mlx5_1. NUMA 1: pci0000:80 with two levels of switches: GPU ca and mlx5_2
    /// (ca under a second switch).
    fn fake_sys() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        let mk = |rel: &str, numa: i32, cpus: &str| {
            let p = s.join("devices").join(rel);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("numa_node"), format!("{numa}\n")).unwrap();
            std::fs::write(p.join("local_cpulist"), format!("{cpus}\n")).unwrap();
            p
        };
        let g0 = mk(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:17:00.0",
            0,
            "0-15",
        );
        let n0 = mk(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:04.0/0000:18:00.0",
            0,
            "0-15",
        );
        let g1 = mk("pci0000:00/0000:00:03.0/0000:65:00.0", 0, "0-15");
        let n1 = mk("pci0000:40/0000:40:01.0/0000:41:00.0", 0, "0-15");
        let g2 = mk(
            "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0/0000:84:00.0/0000:ca:00.0",
            1,
            "16-31",
        );
        let n2 = mk(
            "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:cb:00.0",
            1,
            "16-31",
        );
        std::fs::create_dir_all(s.join("bus/pci/devices")).unwrap();
        for (id, p) in [
            ("0000:17:00.0", &g0),
            ("0000:65:00.0", &g1),
            ("0000:ca:00.0", &g2),
        ] {
            std::os::unix::fs::symlink(p, s.join("bus/pci/devices").join(id)).unwrap();
        }
        for (name, p) in [("mlx5_0", &n0), ("mlx5_1", &n1), ("mlx5_2", &n2)] {
            let d = s.join("class/infiniband").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::os::unix::fs::symlink(p, d.join("device")).unwrap();
        }
        t
    }

    fn gpu(index: u32, bus: &str, links: Vec<i32>) -> crate::agent::gpu::DetectedGpu {
        crate::agent::gpu::DetectedGpu {
            index,
            bus_id: bus.into(),
            links,
            ..Default::default()
        }
    }

    #[test]
    fn matrix_from_nvlinks_and_a_fake_sysfs() {
        let t = fake_sys();
        let gpus = [
            gpu(0, "00000000:17:00.0", vec![-1, 12, 0]),
            gpu(1, "00000000:65:00.0", vec![12, -1, 0]),
            gpu(2, "00000000:CA:00.0", vec![0, 0, -1]),
        ];
        let text = report(t.path(), &gpus).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .take(7)
            .map(|l| l.split('\t').collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "",
                "GPU0",
                "GPU1",
                "GPU2",
                "NIC0",
                "NIC1",
                "NIC2",
                "CPU Affinity",
                "NUMA Affinity"
            ]
        );
        assert_eq!(
            rows[1],
            [
                "GPU0", " X ", "NV12", "SYS", "PIX", "NODE", "SYS", "0-15", "0"
            ]
        );
        assert_eq!(
            rows[2],
            [
                "GPU1", "NV12", " X ", "SYS", "PHB", "NODE", "SYS", "0-15", "0"
            ]
        );
        assert_eq!(
            rows[3],
            [
                "GPU2", "SYS", "SYS", " X ", "SYS", "SYS", "PXB", "16-31", "1"
            ]
        );
        assert_eq!(rows[4], ["NIC0", "PIX", "PHB", "SYS", " X ", "NODE", "SYS"]);
        assert_eq!(rows[6], ["NIC2", "SYS", "SYS", "PXB", "SYS", "SYS", " X "]);
        assert!(text.contains("\nLegend:\n"), "{text}");
        assert!(text.contains("  NV#  = "), "{text}");
        assert!(
            text.ends_with("  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n"),
            "{text}"
        );
    }

    #[test]
    fn unknown_paths_and_no_gpus() {
        let t = tempfile::tempdir().unwrap();
        // A GPU sysfs does not know: SYS to everything, NVML's cores as its affinity.
        let mut g = gpu(0, "0000:99:00.0", vec![]);
        g.cores = vec![0, 1, 2, 5];
        let text = report(t.path(), &[g]).unwrap();
        assert!(
            text.starts_with("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-2,5\tN/A\n"),
            "{text}"
        );
        assert!(!text.contains("NIC Legend"));
        let e = report(t.path(), &[]).unwrap_err();
        assert!(e.contains("no NVIDIA GPU"), "{e}");
        let a = TopoDevice {
            numa: Some(0),
            ..TopoDevice::default()
        };
        assert_eq!(pcie_relation(&a, &a.clone()), "NODE");
        assert_eq!(pcie_relation(&a, &TopoDevice::default()), "SYS");
    }
}
