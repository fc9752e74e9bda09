//! GPU discovery on a node (cf. Slurm's gpu/nvml plugin, src/plugins/gpu/nvml/gpu_nvml.c,
//! which gres.conf `AutoDetect=nvml` uses): through NVML when libnvidia-ml can be loaded
//! at run time, else from the `/dev/nvidia[0-9]*` files. Each GPU becomes a `gpu` GRES
//! device with its type (`h100`, `a100`, `rtx4090`, from the model name), device file,
//! CPU affinity (`Cores=`) and NVLink counts to its peers (`Links=`).
//!
//! A missing library, or a library without a driver, means "no NVML GPUs", never an
//! error: most nodes have no NVIDIA GPU. Other NVML failures are reported as text for
//! the agent's log and also give no NVML GPUs (the device files may still show some).
//!
//! A GPU in MIG mode is not offered whole: each of its MIG instances becomes a `gpu`
//! device typed `<gpu type>_<slices>g.<GB>gb` (`a100_1g.5gb`, as Slurm's AutoDetect=nvml
//! names them, with sluice's short GPU type in front), whose files are the GPU's
//! `/dev/nvidiaN` and the instance's two `/dev/nvidia-caps/nvidia-cap<minor>` files
//! (minors from `/proc/driver/nvidia-caps/mig-minors`), and whose unique id is the
//! instance's `MIG-…` UUID, which `CUDA_VISIBLE_DEVICES` then carries. nvml-wrapper 0.11
//! has no safe call for MIG instance handles, so [`mig_instances`] calls the four NVML
//! functions through nvml-wrapper-sys (the only unsafe code here).

use crate::model::gres::GresDevice;
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use std::path::Path;

/// One GPU as NVML describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetectedGpu {
    /// NVML index (the CUDA/`nvidia-smi` order).
    pub index: u32,
    pub uuid: String,
    /// Model name (`NVIDIA H100 80GB HBM3`).
    pub model: String,
    /// Total memory, MiB.
    pub memory_mib: u64,
    /// `/dev/nvidia<minor>`.
    pub file: String,
    /// PCI bus id (`00000000:17:00.0`).
    pub bus_id: String,
    /// CPUs close to the GPU.
    pub cores: Vec<u32>,
    /// NVLink links to each GPU, by index (`-1` for itself, 0 for none).
    pub links: Vec<i32>,
    /// MIG mode is on.
    pub mig: bool,
    /// The GPU's MIG instances when `mig` (possibly none, which NVML reports when no
    /// instance was created).
    pub migs: Vec<DetectedMig>,
}

/// One MIG instance (a GPU instance with one compute instance) as NVML describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetectedMig {
    /// `MIG-…` UUID (what CUDA_VISIBLE_DEVICES takes).
    pub uuid: String,
    /// GPU instance and compute instance ids.
    pub gi: u32,
    pub ci: u32,
    /// GPU slices of the instance (the `1` of `1g.5gb`).
    pub slices: u32,
    /// Memory of the instance, MiB.
    pub memory_mib: u64,
    /// Minors of `/dev/nvidia-caps/nvidia-cap<N>` for the GPU and compute instance,
    /// when `mig-minors` lists them.
    pub caps: Option<(u32, u32)>,
}

/// The MIG profile part of a GRES type: `1g.5gb` for 1 slice and 4864 MiB (memory in
/// GiB, rounded, as Slurm's gpu/nvml plugin computes it).
pub fn mig_profile(slices: u32, memory_mib: u64) -> String {
    format!("{slices}g.{}gb", (memory_mib + 512) / 1024)
}

/// The minors of the access files of GPU instance `gi` and compute instance `ci` of GPU
/// `gpu` in the text of `/proc/driver/nvidia-caps/mig-minors` (lines such as
/// `gpu0/gi1/access 21` and `gpu0/gi1/ci0/access 22`); `None` unless both are there.
pub fn mig_minors(text: &str, gpu: u32, gi: u32, ci: u32) -> Option<(u32, u32)> {
    let gi_key = format!("gpu{gpu}/gi{gi}/access");
    let ci_key = format!("gpu{gpu}/gi{gi}/ci{ci}/access");
    let find = |key: &str| {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == key).then(|| w.next()?.parse::<u32>().ok())?
        })
    };
    Some((find(&gi_key)?, find(&ci_key)?))
}

/// What NVML discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlProbe {
    /// libnvidia-ml is not installed or has no driver to talk to: no NVML GPUs.
    Absent(String),
    /// NVML answered; these are its GPUs (possibly none).
    Gpus(Vec<DetectedGpu>),
    /// NVML is there but failed; the text says how. No NVML GPUs.
    Failed(String),
}

/// How an NVML error at initialisation is taken: `None` = absent (not an error),
/// `Some(text)` = a real failure to report.
pub fn classify_init_error(e: &NvmlError) -> Option<String> {
    match e {
        NvmlError::LibloadingError(_)
        | NvmlError::LibraryNotFound
        | NvmlError::DriverNotLoaded
        | NvmlError::FailedToLoadSymbol(_)
        | NvmlError::FunctionNotFound => None,
        other => Some(format!("NVML initialisation failed: {other}")),
    }
}

/// Loads libnvidia-ml (the versioned name first: most systems have no unversioned
/// development link) and lists its GPUs.
pub fn nvml_gpus() -> NvmlProbe {
    let mut last: Option<NvmlError> = None;
    for lib in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
        match Nvml::builder().lib_path(std::ffi::OsStr::new(lib)).init() {
            Ok(n) => return list(&n),
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => match classify_init_error(&e) {
            None => NvmlProbe::Absent(e.to_string()),
            Some(t) => NvmlProbe::Failed(t),
        },
        None => NvmlProbe::Absent("not loaded".into()),
    }
}

/// Turns NVML's CPU affinity words (bit `i` of word `w` = CPU `w*64+i`) into CPU ids.
pub fn affinity_cpus(words: &[u64]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, bits) in words.iter().enumerate() {
        for i in 0..64 {
            if bits & (1u64 << i) != 0 {
                out.push((w * 64 + i) as u32);
            }
        }
    }
    out
}

fn list(n: &Nvml) -> NvmlProbe {
    let minors = std::fs::read_to_string("/proc/driver/nvidia-caps/mig-minors").unwrap_or_default();
    let count = match n.device_count() {
        Ok(c) => c,
        Err(e) => return NvmlProbe::Failed(format!("NVML device count: {e}")),
    };
    let ncpus = std::thread::available_parallelism().map_or(64, |p| p.get());
    let mut gpus = Vec::new();
    let mut buses = Vec::new();
    for i in 0..count {
        let d = match n.device_by_index(i) {
            Ok(d) => d,
            Err(e) => return NvmlProbe::Failed(format!("NVML device {i}: {e}")),
        };
        let bus_id = d.pci_info().map(|p| p.bus_id).unwrap_or_default();
        let minor = d.minor_number().unwrap_or(i);
        // `c_ulong` is 32 bits on some targets; the words are widened either way.
        #[allow(clippy::unnecessary_cast)]
        let words = d
            .cpu_affinity(ncpus.div_ceil(64).max(1))
            .map(|v| v.into_iter().map(|w| w as u64).collect::<Vec<_>>())
            .unwrap_or_default();
        let mig = d.mig_mode().is_ok_and(|m| m.current == 1);
        let migs = if mig {
            match mig_instances(n, &d, minor, &minors) {
                Ok(m) => m,
                Err(e) => return NvmlProbe::Failed(format!("NVML device {i} MIG instances: {e}")),
            }
        } else {
            Vec::new()
        };
        gpus.push(DetectedGpu {
            index: d.index().unwrap_or(i),
            uuid: d.uuid().unwrap_or_default(),
            model: d.name().unwrap_or_default(),
            memory_mib: d.memory_info().map(|m| m.total >> 20).unwrap_or(0),
            file: format!("/dev/nvidia{minor}"),
            bus_id: bus_id.clone(),
            cores: affinity_cpus(&words),
            links: Vec::new(),
            mig,
            migs,
        });
        // Remote ends of this GPU's active NVLinks, by bus id.
        let mut remote = Vec::new();
        for l in 0..18 {
            let link = d.link_wrapper_for(l);
            if link.is_active().unwrap_or(false)
                && let Ok(p) = link.remote_pci_info()
            {
                remote.push(p.bus_id);
            }
        }
        buses.push(remote);
    }
    let ids: Vec<String> = gpus.iter().map(|g| norm_bus(&g.bus_id)).collect();
    for (k, g) in gpus.iter_mut().enumerate() {
        g.links = nvlink_counts(k, &ids, &buses[k]);
    }
    NvmlProbe::Gpus(gpus)
}

/// The MIG instances of `dev` (a GPU in MIG mode with minor number `minor`), with their
/// cap file minors looked up in `minors` (the text of `mig-minors`).
///
/// Errors: the NVML call's error text; a driver without the MIG functions gives none.
#[allow(unsafe_code)]
fn mig_instances(
    n: &Nvml,
    dev: &nvml_wrapper::Device,
    minor: u32,
    minors: &str,
) -> Result<Vec<DetectedMig>, String> {
    use nvml_wrapper::error::nvml_try;
    use nvml_wrapper_sys::bindings::{NvmlLib, nvmlDevice_t};
    // SAFETY: loading libnvidia-ml runs its initialisers, which NVML's own `init` above
    // already did for the same library; the handle stays open for this function only.
    let lib = match unsafe { NvmlLib::new("libnvidia-ml.so.1") } {
        Ok(l) => l,
        Err(e) => return Err(e.to_string()),
    };
    if lib.nvmlDeviceGetMaxMigDeviceCount.is_err()
        || lib.nvmlDeviceGetMigDeviceHandleByIndex.is_err()
        || lib.nvmlDeviceGetGpuInstanceId.is_err()
        || lib.nvmlDeviceGetComputeInstanceId.is_err()
    {
        return Ok(Vec::new());
    }
    // SAFETY: `dev` is a live handle of the initialised `n`, which outlives this call.
    let handle = unsafe { dev.handle() };
    let mut max: std::os::raw::c_uint = 0;
    // SAFETY: the symbol was checked above; `handle` is valid; `max` is a valid out
    // pointer.
    nvml_try(unsafe { lib.nvmlDeviceGetMaxMigDeviceCount(handle, &mut max) })
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for j in 0..max {
        let mut mig: nvmlDevice_t = std::ptr::null_mut();
        // SAFETY: as above; `mig` is a valid out pointer.
        let rc = unsafe { lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, j, &mut mig) };
        match nvml_try(rc) {
            Ok(()) => {}
            // Instance indices are contiguous: the first missing one ends the list.
            Err(NvmlError::NotFound) => break,
            Err(e) => return Err(e.to_string()),
        }
        let (mut gi, mut ci): (std::os::raw::c_uint, std::os::raw::c_uint) = (0, 0);
        // SAFETY: `mig` was just returned by NVML for a live parent; valid out pointers.
        nvml_try(unsafe { lib.nvmlDeviceGetGpuInstanceId(mig, &mut gi) })
            .map_err(|e| e.to_string())?;
        // SAFETY: as above.
        nvml_try(unsafe { lib.nvmlDeviceGetComputeInstanceId(mig, &mut ci) })
            .map_err(|e| e.to_string())?;
        // SAFETY: `mig` is a valid device handle of `n` (MIG handles are accepted by
        // the device queries used below: UUID and attributes).
        let m = unsafe { nvml_wrapper::Device::new(mig, n) };
        let attr = m.attributes().map_err(|e| e.to_string())?;
        out.push(DetectedMig {
            uuid: m.uuid().map_err(|e| e.to_string())?,
            gi,
            ci,
            slices: attr.gpu_instance_slice_count,
            memory_mib: attr.memory_size_mb,
            caps: mig_minors(minors, minor, gi, ci),
        });
    }
    Ok(out)
}

/// Bus ids compared without case and leading zero domain digits.
fn norm_bus(s: &str) -> String {
    let s = s.to_ascii_lowercase();
    match s.split_once(':') {
        Some((dom, rest)) => format!("{:04x}:{rest}", u32::from_str_radix(dom, 16).unwrap_or(0)),
        None => s,
    }
}

/// gres.conf `Links=` of GPU `me`: how many of its links reach each GPU (`-1` itself).
pub fn nvlink_counts(me: usize, ids: &[String], remote: &[String]) -> Vec<i32> {
    ids.iter()
        .enumerate()
        .map(|(j, id)| {
            if j == me {
                -1
            } else {
                remote.iter().filter(|r| norm_bus(r) == *id).count() as i32
            }
        })
        .collect()
}

/// The GRES type Slurm users write for a model name: the first word after the vendor
/// and brand words, lowercased, with `rtx`/`gtx` joined to their number
/// (`NVIDIA GeForce RTX 4090` → `rtx4090`, `NVIDIA A100-SXM4-40GB` → `a100`,
/// `Tesla V100-SXM2-16GB` → `v100`).
pub fn gres_type(model: &str) -> Option<String> {
    let lower = model.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split([' ', '-', '_'])
        .filter(|w| !w.is_empty())
        .filter(|w| !matches!(*w, "nvidia" | "geforce" | "tesla" | "quadro" | "graphics"))
        .collect();
    let first = *words.first()?;
    let t = match (first, words.get(1)) {
        ("rtx" | "gtx" | "titan", Some(n)) => format!("{first}{n}"),
        _ => first.to_string(),
    };
    t.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.')
        .then_some(t)
}

/// GRES devices for NVML's GPUs, in index order; a GPU in MIG mode gives one device
/// per MIG instance (see the module docs) and none for itself.
pub fn devices_from(gpus: &[DetectedGpu]) -> Vec<GresDevice> {
    let mut v: Vec<&DetectedGpu> = gpus.iter().collect();
    v.sort_by_key(|g| g.index);
    let mut out: Vec<GresDevice> = Vec::new();
    for g in v {
        let base = GresDevice {
            name: "gpu".into(),
            kind: gres_type(&g.model),
            index: out.len() as u32,
            count: 1,
            cores: g.cores.clone(),
            file: Some(g.file.clone()),
            links: g.links.clone(),
            pci_bus: Some(g.bus_id.clone()).filter(|b| !b.is_empty()),
            more_files: Vec::new(),
            unique_id: None,
        };
        if !g.mig {
            out.push(base);
            continue;
        }
        for m in &g.migs {
            let profile = mig_profile(m.slices, m.memory_mib);
            out.push(GresDevice {
                index: out.len() as u32,
                kind: Some(match &base.kind {
                    Some(t) => format!("{t}_{profile}"),
                    None => profile,
                }),
                // MIG instances have no NVLinks.
                links: Vec::new(),
                more_files: m
                    .caps
                    .map(|(a, b)| {
                        vec![
                            format!("/dev/nvidia-caps/nvidia-cap{a}"),
                            format!("/dev/nvidia-caps/nvidia-cap{b}"),
                        ]
                    })
                    .unwrap_or_default(),
                unique_id: Some(m.uuid.clone()).filter(|u| !u.is_empty()),
                ..base.clone()
            });
        }
    }
    out
}

/// Untyped GPUs from the `nvidia<N>` files of `dev` (normally `/dev`), by number.
pub fn devices_from_dev(dev: &Path) -> Vec<GresDevice> {
    let mut nums: Vec<u32> = std::fs::read_dir(dev)
        .map(|rd| {
            rd.filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                name.strip_prefix("nvidia")?.parse::<u32>().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    nums.sort_unstable();
    nums.iter()
        .enumerate()
        .map(|(i, n)| GresDevice {
            name: "gpu".into(),
            kind: None,
            index: i as u32,
            count: 1,
            cores: Vec::new(),
            file: Some(dev.join(format!("nvidia{n}")).display().to_string()),
            links: Vec::new(),
            pci_bus: None,
            more_files: Vec::new(),
            unique_id: None,
        })
        .collect()
}

/// This node's GPUs: NVML's when it answers with some, else the `/dev/nvidia*` files.
/// The second value holds notes for the agent's log (an NVML failure, MIG mode).
pub fn detect() -> (Vec<GresDevice>, Vec<String>) {
    let mut notes = Vec::new();
    match nvml_gpus() {
        NvmlProbe::Gpus(g) if !g.is_empty() => {
            for x in g.iter().filter(|x| x.mig) {
                if x.migs.is_empty() {
                    notes.push(format!(
                        "GPU {} is in MIG mode but has no MIG instances: it offers no GPU",
                        x.index
                    ));
                } else if x.migs.iter().any(|m| m.caps.is_none()) {
                    notes.push(format!(
                        "GPU {}: /proc/driver/nvidia-caps/mig-minors does not list all its \
                         MIG instances; their cap files are not in the devices cgroup rules",
                        x.index
                    ));
                }
            }
            return (devices_from(&g), notes);
        }
        NvmlProbe::Failed(t) => notes.push(t),
        _ => {}
    }
    (devices_from_dev(Path::new("/dev")), notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_errors_that_mean_no_gpu_are_not_failures() {
        assert_eq!(classify_init_error(&NvmlError::LibraryNotFound), None);
        assert_eq!(classify_init_error(&NvmlError::DriverNotLoaded), None);
        assert_eq!(classify_init_error(&NvmlError::FunctionNotFound), None);
        assert_eq!(
            classify_init_error(&NvmlError::FailedToLoadSymbol("nvmlInit_v2".into())),
            None
        );
        for e in [
            NvmlError::NoPermission,
            NvmlError::LibRmVersionMismatch,
            NvmlError::Unknown,
        ] {
            let t = classify_init_error(&e).expect("a real failure");
            assert!(t.starts_with("NVML initialisation failed: "), "{t}");
        }
    }

    #[test]
    fn a_machine_without_the_library_has_no_nvml_gpus() {
        // On machines without NVIDIA's driver this is the path taken; with it, GPUs.
        match nvml_gpus() {
            NvmlProbe::Absent(_) | NvmlProbe::Gpus(_) => {}
            NvmlProbe::Failed(t) => panic!("NVML present but failing here: {t}"),
        }
    }

    #[test]
    fn model_names_become_gres_types() {
        for (m, t) in [
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H200", "h200"),
            ("NVIDIA A100-SXM4-40GB", "a100"),
            ("NVIDIA GeForce RTX 4090", "rtx4090"),
            ("Tesla V100-SXM2-16GB", "v100"),
            ("NVIDIA L40S", "l40s"),
            ("Quadro RTX 8000", "rtx8000"),
        ] {
            assert_eq!(gres_type(m).as_deref(), Some(t), "{m}");
        }
        assert_eq!(gres_type("NVIDIA"), None);
        assert_eq!(gres_type(""), None);
    }

    #[test]
    fn affinity_links_and_devices() {
        assert_eq!(affinity_cpus(&[0b101, 1]), vec![0, 2, 64]);
        let ids: Vec<String> = ["00000000:17:00.0", "00000000:65:00.0", "00000000:CA:00.0"]
            .iter()
            .map(|s| norm_bus(s))
            .collect();
        let remote = vec![
            "0000:65:00.0".to_string(),
            "00000000:65:00.0".to_string(),
            "00000000:ca:00.0".to_string(),
        ];
        assert_eq!(nvlink_counts(0, &ids, &remote), vec![-1, 2, 1]);
        let g = DetectedGpu {
            index: 1,
            model: "NVIDIA H100 80GB HBM3".into(),
            file: "/dev/nvidia3".into(),
            cores: vec![0, 1],
            ..DetectedGpu::default()
        };
        let d = devices_from(&[g]);
        assert_eq!(d[0].index, 0);
        assert_eq!(d[0].kind.as_deref(), Some("h100"));
        assert_eq!(d[0].file.as_deref(), Some("/dev/nvidia3"));
    }

    #[test]
    fn mig_instances_become_typed_devices_with_cap_files_and_uuids() {
        let minors = "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\n\
                      gpu0/gi2/ci0/access 22\ngpu1/gi1/access 147\n";
        assert_eq!(mig_minors(minors, 0, 2, 0), Some((21, 22)));
        assert_eq!(
            mig_minors(minors, 1, 1, 0),
            None,
            "no compute instance line"
        );
        assert_eq!(mig_minors("", 0, 1, 0), None);
        assert_eq!(mig_profile(1, 4864), "1g.5gb");
        assert_eq!(mig_profile(3, 19968), "3g.20gb");
        assert_eq!(mig_profile(1, 9856), "1g.10gb");
        let mig = DetectedGpu {
            index: 0,
            model: "NVIDIA A100-SXM4-40GB".into(),
            file: "/dev/nvidia0".into(),
            bus_id: "00000000:17:00.0".into(),
            cores: vec![0, 1],
            links: vec![-1, 12],
            mig: true,
            migs: vec![
                DetectedMig {
                    uuid: "MIG-11111111-2222-3333-4444-555555555555".into(),
                    gi: 1,
                    ci: 0,
                    slices: 3,
                    memory_mib: 19968,
                    caps: mig_minors(minors, 0, 1, 0),
                },
                DetectedMig {
                    uuid: "MIG-66666666-7777-8888-9999-000000000000".into(),
                    gi: 2,
                    ci: 0,
                    slices: 1,
                    memory_mib: 4864,
                    caps: mig_minors(minors, 0, 2, 0),
                },
            ],
            ..DetectedGpu::default()
        };
        let whole = DetectedGpu {
            index: 1,
            model: "NVIDIA A100-SXM4-40GB".into(),
            file: "/dev/nvidia1".into(),
            ..DetectedGpu::default()
        };
        let empty_mig = DetectedGpu {
            index: 2,
            model: "NVIDIA A100-SXM4-40GB".into(),
            file: "/dev/nvidia2".into(),
            mig: true,
            ..DetectedGpu::default()
        };
        let d = devices_from(&[whole, mig, empty_mig]);
        assert_eq!(
            crate::model::gres::fmt_node_gres(&d),
            "gpu:a100_3g.20gb:1,gpu:a100_1g.5gb:1,gpu:a100:1"
        );
        assert_eq!(d.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(
            d[1].files().collect::<Vec<_>>(),
            [
                "/dev/nvidia0",
                "/dev/nvidia-caps/nvidia-cap21",
                "/dev/nvidia-caps/nvidia-cap22"
            ]
        );
        assert_eq!(
            d[1].unique_id.as_deref(),
            Some("MIG-66666666-7777-8888-9999-000000000000")
        );
        assert!(d[0].links.is_empty(), "MIG instances have no NVLinks");
        assert_eq!(d[0].cores, vec![0, 1]);
        assert_eq!(d[2].unique_id, None);
        assert_eq!(d[2].file.as_deref(), Some("/dev/nvidia1"));
    }

    #[test]
    fn dev_files_give_untyped_gpus() {
        let t = tempfile::tempdir().unwrap();
        for f in ["nvidia1", "nvidia0", "nvidiactl", "nvidia-uvm", "null"] {
            std::fs::write(t.path().join(f), "").unwrap();
        }
        let d = devices_from_dev(t.path());
        assert_eq!(d.len(), 2);
        assert!(d[1].file.as_deref().unwrap().ends_with("nvidia1"));
        assert!(devices_from_dev(&t.path().join("missing")).is_empty());
    }
}
