//! The one seam between sluice and the GPUs' live state (issue 24): which compute
//! processes each GPU runs, its utilisation and memory in use, and its health (ECC
//! uncorrectable errors, retired pages, fallen off the bus). The agent samples it to
//! find GPUs used outside sluice's jobs and sick GPUs; stepd samples it for sstat and
//! sacct's `gres/gpuutil` and `gres/gpumem` (`stepd::gpu_usage`).
//!
//! Two implementations of [`GpuProbe`]: [`NvmlGpuProbe`], NVML through nvml-wrapper
//! (cf. Slurm's gpu/nvml plugin, `gpu_p_usage_read`), always compiled in and loaded at
//! run time; and [`FakeProbe`], a TOML file named by the `SLUICE_GPU_PROBE_FILE`
//! variable of the agent's environment, re-read at every sample, so that tests drive
//! every GPU policy on machines without GPUs. The variable is a **test hook**, read from
//! the agent's and stepd's own environment (never a job's). It names a file such as
//!
//! ```toml
//! [[gpu]]
//! index = 1            # the GPU's GRES device index on the node
//! util = 35            # utilisation, percent (default 0)
//! mem_used_mib = 2048  # memory in use, MiB (default 0)
//! ecc_uncorrectable = 0
//! retired_pages = 0
//! lost = false         # fell off the bus
//! processes = [{ pid = 4242, used_mib = 2000 }]
//! ```
//!
//! A GPU the file does not list is idle and healthy. A file that cannot be read or
//! parsed gives an error for the caller's log and no sample (nothing changes).
//!
//! Indices are GRES device indices (the node's `gpu` devices in order), so a sample
//! names GPUs as jobs and `scontrol show node` do. MIG instances are not sampled (NVML
//! has no per-instance utilisation, and their processes are the parent GPU's).

use crate::model::gres::GresDevice;
use serde::Deserialize;
use std::path::PathBuf;

/// The environment variable naming a [`FakeProbe`] file (test hook, see the module
/// docs).
pub const PROBE_FILE_VAR: &str = "SLUICE_GPU_PROBE_FILE";

/// A compute process on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// GPU memory it holds, MiB (0 when NVML cannot say).
    #[serde(default)]
    pub used_mib: u64,
}

/// One GPU's state at one sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct GpuSample {
    /// GRES device index of the GPU on this node.
    pub index: u32,
    /// Utilisation over NVML's last sample period, percent.
    #[serde(default)]
    pub util: u32,
    /// Memory in use, MiB.
    #[serde(default)]
    pub mem_used_mib: u64,
    /// Compute processes running on it.
    #[serde(default)]
    pub processes: Vec<GpuProcess>,
    /// Uncorrectable (double-bit) ECC errors since the driver loaded.
    #[serde(default)]
    pub ecc_uncorrectable: u64,
    /// Memory pages retired for double-bit ECC errors.
    #[serde(default)]
    pub retired_pages: u64,
    /// The GPU fell off the bus (NVML_ERROR_GPU_IS_LOST).
    #[serde(default)]
    pub lost: bool,
}

/// A source of GPU samples.
pub trait GpuProbe: Send {
    /// The state of the GPUs among `devices` (the node's GRES devices) that can be
    /// sampled, by GRES index; GPUs not in the answer were not measured.
    ///
    /// Errors: the source cannot be read (text for the log).
    fn sample(&mut self, devices: &[GresDevice]) -> Result<Vec<GpuSample>, String>;
}

/// The file form of a [`FakeProbe`]: `[[gpu]]` tables.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FakeFile {
    #[serde(default)]
    gpu: Vec<GpuSample>,
}

/// Parses the text of a [`FakeProbe`] file.
///
/// Errors: not TOML of the documented shape (the parser's message).
pub fn parse_fake(text: &str) -> Result<Vec<GpuSample>, String> {
    toml::from_str::<FakeFile>(text)
        .map(|f| f.gpu)
        .map_err(|e| e.to_string())
}

/// Samples from a file (see the module docs), re-read each time.
pub struct FakeProbe {
    /// The TOML file, read at every sample.
    pub path: PathBuf,
}

impl GpuProbe for FakeProbe {
    fn sample(&mut self, devices: &[GresDevice]) -> Result<Vec<GpuSample>, String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let all = parse_fake(&text).map_err(|e| format!("{}: {e}", self.path.display()))?;
        Ok(devices
            .iter()
            .filter(|d| d.name == "gpu")
            .map(|d| {
                all.iter()
                    .find(|s| s.index == d.index)
                    .cloned()
                    .unwrap_or(GpuSample {
                        index: d.index,
                        ..GpuSample::default()
                    })
            })
            .collect())
    }
}

/// Samples through NVML.
pub struct NvmlGpuProbe {
    nvml: nvml_wrapper::Nvml,
}

/// The `N` of `/dev/nvidiaN`.
pub fn dev_minor(file: &str) -> Option<u32> {
    file.strip_prefix("/dev/nvidia")?.parse().ok()
}

impl NvmlGpuProbe {
    /// Initialises NVML; `None` without libnvidia-ml or a driver.
    pub fn open() -> Option<NvmlGpuProbe> {
        for lib in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
            if let Ok(nvml) = nvml_wrapper::Nvml::builder()
                .lib_path(std::ffi::OsStr::new(lib))
                .init()
            {
                return Some(NvmlGpuProbe { nvml });
            }
        }
        None
    }

    /// The NVML device for a GRES device: by PCI bus id when discovery found it, else
    /// by the minor number of its `/dev/nvidiaN` file; none for a MIG instance.
    fn device(&self, d: &GresDevice) -> Option<nvml_wrapper::Device<'_>> {
        if d.unique_id.is_some() {
            return None;
        }
        if let Some(b) = &d.pci_bus
            && let Ok(dev) = self.nvml.device_by_pci_bus_id(b.as_str())
        {
            return Some(dev);
        }
        let minor = dev_minor(d.file.as_deref()?)?;
        let n = self.nvml.device_count().ok()?;
        (0..n)
            .filter_map(|i| self.nvml.device_by_index(i).ok())
            .find(|x| x.minor_number().ok() == Some(minor))
    }
}

impl GpuProbe for NvmlGpuProbe {
    fn sample(&mut self, devices: &[GresDevice]) -> Result<Vec<GpuSample>, String> {
        use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
        use nvml_wrapper::enums::device::UsedGpuMemory;
        use nvml_wrapper::error::NvmlError;
        let mut out = Vec::new();
        for d in devices.iter().filter(|d| d.name == "gpu") {
            // A GPU that fell off the bus cannot even be looked up.
            if let Some(b) = &d.pci_bus
                && matches!(
                    self.nvml.device_by_pci_bus_id(b.as_str()),
                    Err(NvmlError::GpuLost)
                )
            {
                out.push(GpuSample {
                    index: d.index,
                    lost: true,
                    ..GpuSample::default()
                });
                continue;
            }
            let Some(dev) = self.device(d) else { continue };
            let mem = dev.memory_info();
            let lost = matches!(mem, Err(NvmlError::GpuLost));
            let processes = dev
                .running_compute_processes()
                .unwrap_or_default()
                .into_iter()
                .map(|p| GpuProcess {
                    pid: p.pid,
                    used_mib: match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => b >> 20,
                        UsedGpuMemory::Unavailable => 0,
                    },
                })
                .collect();
            out.push(GpuSample {
                index: d.index,
                util: dev.utilization_rates().map(|u| u.gpu).unwrap_or(0),
                mem_used_mib: mem.map(|m| m.used >> 20).unwrap_or(0),
                processes,
                // GPUs without ECC (most consumer cards) answer NotSupported: none.
                ecc_uncorrectable: dev
                    .total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)
                    .unwrap_or(0),
                retired_pages: dev
                    .retired_pages(RetirementCause::DoubleBitEccError)
                    .map(|v| v.len() as u64)
                    .unwrap_or(0),
                lost,
            });
        }
        Ok(out)
    }
}

/// The probe of this process: the test hook's file when `SLUICE_GPU_PROBE_FILE` is
/// set, else NVML when it loads, else none.
pub fn probe() -> Option<Box<dyn GpuProbe>> {
    if let Some(p) = std::env::var_os(PROBE_FILE_VAR) {
        return Some(Box::new(FakeProbe { path: p.into() }));
    }
    NvmlGpuProbe::open().map(|p| Box::new(p) as Box<dyn GpuProbe>)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: u32) -> Vec<GresDevice> {
        (0..n)
            .map(|i| GresDevice {
                name: "gpu".into(),
                index: i,
                count: 1,
                ..GresDevice::default()
            })
            .collect()
    }

    #[test]
    fn the_fake_file_is_reread_and_unlisted_gpus_are_idle() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("gpus.toml");
        std::fs::write(
            &p,
            "[[gpu]]\nindex = 1\nutil = 35\nmem_used_mib = 2048\n\
             processes = [{ pid = 4242, used_mib = 2000 }]\n",
        )
        .unwrap();
        let mut f = FakeProbe { path: p.clone() };
        let s = f.sample(&gpus(2)).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].index, 0);
        assert!(s[0].processes.is_empty());
        assert_eq!((s[1].util, s[1].mem_used_mib), (35, 2048));
        assert_eq!(
            s[1].processes,
            vec![GpuProcess {
                pid: 4242,
                used_mib: 2000
            }]
        );
        std::fs::write(
            &p,
            "[[gpu]]\nindex = 0\necc_uncorrectable = 2\nlost = true\n",
        )
        .unwrap();
        let s = f.sample(&gpus(2)).unwrap();
        assert_eq!((s[0].ecc_uncorrectable, s[0].lost), (2, true));
        assert!(s[1].processes.is_empty(), "the process is gone");
        std::fs::write(&p, "[[gpu]]\nindex = \"x\"\n").unwrap();
        assert!(f.sample(&gpus(1)).is_err());
        std::fs::write(&p, "[[gpus]]\nindex = 0\n").unwrap();
        assert!(f.sample(&gpus(1)).is_err(), "unknown table");
        std::fs::remove_file(&p).unwrap();
        assert!(f.sample(&gpus(1)).unwrap_err().contains("cannot read"));
    }

    #[test]
    fn device_minors_and_the_real_probe_without_a_driver() {
        assert_eq!(dev_minor("/dev/nvidia3"), Some(3));
        assert_eq!(dev_minor("/dev/nvidiactl"), None);
        assert_eq!(dev_minor("/tmp/gpu0"), None);
        // Without libnvidia-ml (this machine) there is no probe; with it, a file-backed
        // fake GPU is not an NVML device and gives no sample.
        if let Some(mut p) = NvmlGpuProbe::open() {
            let fake = GresDevice {
                name: "gpu".into(),
                file: Some("/tmp/not-a-gpu".into()),
                ..GresDevice::default()
            };
            assert_eq!(p.sample(&[fake]), Ok(Vec::new()));
        }
    }
}
