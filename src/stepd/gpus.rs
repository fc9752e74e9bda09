//! GPUs on the node side of a step (cf. slurmstepd's calls into the gres/gpu plugin:
//! `gres_g_task_set_env`, and task/cgroup's device constraint): which device files the
//! job and the step must be denied, and each task's GPU binding, environment and CPUs
//! near its GPUs.
//!
//! Device numbering: `SLURM_JOB_GPUS`/`SLURM_STEP_GPUS` carry the devices' indices on
//! the node. `CUDA_VISIBLE_DEVICES` (and its AMD/Intel twins) carry the same indices,
//! except when the devices cgroup really hides the others: CUDA then only enumerates
//! the devices it can open, so the ordinals are positions among the step's devices
//! (Slurm does the same when ConstrainDevices=yes, `gres_use_local_device_index`).

use super::isolate::Device;
use crate::model::gpu_bind::{self, GpuBind, GpuBindKind};
use crate::model::gres::GresDevice;
use crate::model::job::GresAlloc;
use std::path::Path;

/// The device files to deny: those of `node` devices that are not in `allowed` (matched
/// by slot, the position in the node's list), except files an allowed device also uses
/// (the MIG instances of one GPU share its `/dev/nvidiaN`). Files that are not device
/// nodes cannot be denied by a devices cgroup; they are returned as notes.
pub fn deny_list(node: &[GresDevice], allowed: &[GresAlloc]) -> (Vec<Device>, Vec<String>) {
    let held = |slot: usize| allowed.iter().any(|a| a.slot as usize == slot);
    let keep: Vec<&str> = node
        .iter()
        .enumerate()
        .filter(|(slot, _)| held(*slot))
        .flat_map(|(_, d)| d.files())
        .collect();
    let mut deny = Vec::new();
    let mut notes = Vec::new();
    for (slot, d) in node.iter().enumerate() {
        if held(slot) {
            continue;
        }
        for f in d.files().filter(|f| !keep.contains(f)) {
            match Device::from_path(Path::new(f)) {
                Ok(dev) => {
                    if !deny.iter().any(|x: &Device| x.rule() == dev.rule()) {
                        deny.push(dev);
                    }
                }
                Err(e) => notes.push(format!("{}{}: {e}", d.name, d.index)),
            }
        }
    }
    (deny, notes)
}

/// A `CUDA_VISIBLE_DEVICES` value for devices `globals` (indices on the node) whose
/// ordinals are `ordinals` (the same length, comma-separated): each device with a
/// unique id (a MIG instance) is named by it (`MIG-…`), the others keep their ordinal,
/// as Slurm sets it for devices with a gres.conf `UniqueId`. `None` when no device has
/// a unique id or the lists disagree in length.
pub fn with_unique_ids(node: &[GresDevice], globals: &[u32], ordinals: &str) -> Option<String> {
    let ords: Vec<&str> = ordinals.split(',').filter(|x| !x.is_empty()).collect();
    if ords.len() != globals.len() {
        return None;
    }
    let uid = |g: &u32| {
        node.iter()
            .find(|d| d.name == "gpu" && d.index == *g)
            .and_then(|d| d.unique_id.as_deref())
    };
    if !globals.iter().any(|g| uid(g).is_some()) {
        return None;
    }
    let v: Vec<&str> = globals
        .iter()
        .zip(ords)
        .map(|(g, o)| uid(g).unwrap_or(o))
        .collect();
    Some(v.join(","))
}

/// Renames the devices of `CUDA_VISIBLE_DEVICES` in `env` by their unique ids (see
/// [`with_unique_ids`]); the devices are those `SLURM_STEP_GPUS` (or, for a batch
/// shell, `SLURM_JOB_GPUS`) lists.
pub fn use_unique_ids(env: &mut [(String, String)], node: &[GresDevice]) {
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let Some(list) = get("SLURM_STEP_GPUS").or_else(|| get("SLURM_JOB_GPUS")) else {
        return;
    };
    let Some(cvd) = get("CUDA_VISIBLE_DEVICES") else {
        return;
    };
    let globals: Vec<u32> = list.split(',').filter_map(|x| x.parse().ok()).collect();
    if let Some(ids) = with_unique_ids(node, &globals, &cvd) {
        for (k, v) in env.iter_mut() {
            if k == "CUDA_VISIBLE_DEVICES" {
                *v = ids.clone();
            }
        }
    }
}

/// One task's GPU binding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskGpus {
    /// Variables to add to the task's environment.
    pub env: Vec<(String, String)>,
    /// The task's CPUs, moved near its GPUs when it is CPU-bound and they have `Cores=`.
    pub cpus: Option<Vec<usize>>,
    /// `--gpu-bind=verbose` line (without newline).
    pub verbose: Option<String>,
    /// The device indices the task sees.
    pub globals: Vec<u32>,
}

/// The GPU side of one node of a step: its GPUs in index order with their cores.
#[derive(Debug, Clone, Default)]
pub struct StepGpus {
    /// (device index, cores near it).
    pub devs: Vec<(u32, Vec<u32>)>,
    pub bind: GpuBind,
    /// Whether ordinals are positions among `devs` (the devices cgroup hides others).
    pub local_ordinals: bool,
    /// Tasks bound so far to each of `devs`.
    pub loads: Vec<u32>,
}

impl StepGpus {
    /// The step's GPUs among `held` (the step's devices on the node), with the cores the
    /// node's device list gives them.
    pub fn new(held: &[GresAlloc], node: &[GresDevice], bind: GpuBind, local: bool) -> Self {
        let mut devs: Vec<(u32, Vec<u32>)> = held
            .iter()
            .filter(|d| d.name == "gpu")
            .map(|d| {
                let cores = node
                    .get(d.slot as usize)
                    .map(|n| n.cores.clone())
                    .unwrap_or_default();
                (d.index, cores)
            })
            .collect();
        devs.sort_by_key(|d| d.0);
        StepGpus {
            loads: vec![0; devs.len()],
            devs,
            bind,
            local_ordinals: local,
        }
    }

    /// Binds task `local` on this node (tasks are bound in local order). `cpus` is its CPU binding without
    /// regard to GPUs (`None` when not CPU-bound), `avail` the step's CPUs on the node,
    /// `taken` the CPUs earlier tasks were bound to.
    ///
    /// Errors: a `map_gpu`/`mask_gpu` naming a GPU the step lacks here.
    pub fn bind_task(
        &mut self,
        local: u32,
        cpus: Option<Vec<usize>>,
        avail: &[usize],
        taken: &[usize],
    ) -> Result<TaskGpus, String> {
        if self.devs.is_empty() {
            return Ok(TaskGpus {
                cpus,
                ..TaskGpus::default()
            });
        }
        let cores: Vec<Vec<u32>> = self.devs.iter().map(|d| d.1.clone()).collect();
        let as_u32 = |v: &[usize]| v.iter().map(|&c| c as u32).collect::<Vec<u32>>();
        let by_cpus = matches!(
            self.bind.kind,
            GpuBindKind::Closest | GpuBindKind::Single(_)
        );
        let (usable, cpus) = if by_cpus {
            let tc = cpus.as_deref().map(as_u32);
            let u =
                gpu_bind::task_gpus(&self.bind.kind, &cores, local, &self.loads, tc.as_deref())?;
            (u, cpus)
        } else {
            let u = gpu_bind::task_gpus(&self.bind.kind, &cores, local, &self.loads, None)?;
            // A CPU-bound task bound to particular GPUs gets CPUs near them.
            let near: Vec<u32> = u.iter().flat_map(|&g| cores[g].iter().copied()).collect();
            let moved = match &cpus {
                Some(c) if !near.is_empty() && self.bind.kind != GpuBindKind::None => {
                    let got = gpu_bind::cpus_near(&near, &as_u32(avail), &as_u32(taken), c.len());
                    Some(got.into_iter().map(|c| c as usize).collect())
                }
                _ => cpus,
            };
            (u, moved)
        };
        for &g in &usable {
            if let Some(l) = self.loads.get_mut(g) {
                *l += 1;
            }
        }
        let globals: Vec<u32> = usable.iter().map(|&g| self.devs[g].0).collect();
        let locals: Vec<u32> = if self.local_ordinals {
            usable.iter().map(|&g| g as u32).collect()
        } else {
            globals.clone()
        };
        let mut env = gpu_bind::gpu_env(&globals, &locals, true);
        env.push(("SLURM_GPUS_ON_NODE".into(), self.devs.len().to_string()));
        let verbose = self
            .bind
            .verbose
            .then(|| gpu_bind::verbose_line(&usable, self.devs.len(), local, &globals, &locals));
        Ok(TaskGpus {
            env,
            cpus,
            verbose,
            globals,
        })
    }
}

/// Whether the devices cgroup really hides the denied devices from the tasks: devices
/// are constrained, something is denied, and the backend did not report devices as
/// unconstrained (cgroup v2 without a device program, no cgroups).
pub fn devices_hidden(constrain: bool, deny: &[Device], degraded: &[String]) -> bool {
    constrain && !deny.is_empty() && !degraded.iter().any(|d| d.contains("devices"))
}

/// A batch shell's environment with `CUDA_VISIBLE_DEVICES` and its twins renumbered as
/// positions among the job's GPUs (for when the devices cgroup hides the others).
pub fn local_ordinals(env: &mut [(String, String)]) {
    let n = env
        .iter()
        .find(|(k, _)| k == "SLURM_JOB_GPUS")
        .map_or(0, |(_, v)| v.split(',').filter(|x| !x.is_empty()).count());
    let list = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    for (k, v) in env.iter_mut() {
        if matches!(
            k.as_str(),
            "CUDA_VISIBLE_DEVICES"
                | "GPU_DEVICE_ORDINAL"
                | "ROCR_VISIBLE_DEVICES"
                | "ZE_AFFINITY_MASK"
        ) {
            *v = list.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(idx: &[u32]) -> Vec<GresAlloc> {
        crate::model::job::gpu_allocs(idx)
    }

    fn node(n: u32) -> Vec<GresDevice> {
        (0..n)
            .map(|i| GresDevice {
                name: "gpu".into(),
                kind: None,
                index: i,
                count: 1,
                cores: (i * 4..i * 4 + 4).collect(),
                file: None,
                links: Vec::new(),
                pci_bus: None,
                more_files: Vec::new(),
                unique_id: None,
            })
            .collect()
    }

    fn var<'a>(t: &'a TaskGpus, k: &str) -> &'a str {
        t.env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    #[test]
    fn per_task_binding_matches_slurm_golden() {
        // golden env_gpu_per_task: task 1 sees device 1 only.
        let mut s = StepGpus::new(
            &alloc(&[0, 1]),
            &node(4),
            GpuBind {
                kind: GpuBindKind::PerTask(1),
                verbose: false,
            },
            false,
        );
        let t = s.bind_task(1, None, &[], &[]).unwrap();
        assert_eq!(var(&t, "CUDA_VISIBLE_DEVICES"), "1");
        assert_eq!(var(&t, "SLURM_STEP_GPUS"), "1");
        assert_eq!(var(&t, "GPU_DEVICE_ORDINAL"), "1");
    }

    #[test]
    fn local_ordinals_when_devices_are_hidden() {
        let mut s = StepGpus::new(&alloc(&[2, 3]), &node(4), GpuBind::default(), true);
        let t = s.bind_task(0, None, &[], &[]).unwrap();
        assert_eq!(var(&t, "CUDA_VISIBLE_DEVICES"), "0,1");
        assert_eq!(var(&t, "SLURM_STEP_GPUS"), "2,3");
    }

    #[test]
    fn cpus_follow_the_bound_gpu() {
        // Task 0 bound to GPU 3 (cores 12-15) by map_gpu; its 2 CPUs move there.
        let mut s = StepGpus::new(
            &alloc(&[0, 1, 2, 3]),
            &node(4),
            GpuBind::parse("verbose,map_gpu:3").unwrap(),
            false,
        );
        let avail: Vec<usize> = (0..16).collect();
        let t = s.bind_task(0, Some(vec![0, 1]), &avail, &[]).unwrap();
        assert_eq!(t.cpus, Some(vec![12, 13]));
        assert_eq!(var(&t, "CUDA_VISIBLE_DEVICES"), "3");
        assert!(t.verbose.unwrap().contains("global_list=3"));
        // closest: the GPU follows the CPUs instead.
        let mut s = StepGpus::new(
            &alloc(&[0, 1, 2, 3]),
            &node(4),
            GpuBind::parse("closest").unwrap(),
            false,
        );
        let t = s.bind_task(0, Some(vec![9]), &avail, &[]).unwrap();
        assert_eq!(var(&t, "CUDA_VISIBLE_DEVICES"), "2");
        assert_eq!(t.cpus, Some(vec![9]));
    }

    #[test]
    fn mig_instances_share_their_gpu_file_and_are_named_by_uuid() {
        // Two MIG instances of GPU 0 (both use /dev/null as the parent file here, with
        // /dev/zero and /dev/full standing in for their cap files) and a whole GPU.
        let mut n = node(3);
        n[0].file = Some("/dev/null".into());
        n[0].more_files = vec!["/dev/zero".into()];
        n[0].unique_id = Some("MIG-a".into());
        n[1].file = Some("/dev/null".into());
        n[1].more_files = vec!["/dev/full".into()];
        n[1].unique_id = Some("MIG-b".into());
        // Holding instance 1: instance 0's cap file is denied, the shared GPU file not.
        let (deny, _) = deny_list(&n, &alloc(&[1]));
        let rules: Vec<String> = deny.iter().map(|d| d.rule()).collect();
        assert_eq!(rules, ["c 1:5 rwm"], "only /dev/zero");
        // Holding the whole GPU only: both instances' files are denied.
        n[2].file = Some("/dev/random".into());
        let (deny, _) = deny_list(&n, &alloc(&[2]));
        let rules: Vec<String> = deny.iter().map(|d| d.rule()).collect();
        assert_eq!(rules, ["c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm"]);
        assert_eq!(
            with_unique_ids(&n, &[1, 0], "1,0").as_deref(),
            Some("MIG-b,MIG-a")
        );
        // GPU 2 has no unique id: it keeps its ordinal.
        assert_eq!(
            with_unique_ids(&n, &[0, 2], "0,1").as_deref(),
            Some("MIG-a,1")
        );
        assert_eq!(with_unique_ids(&n, &[2], "0"), None);
        assert_eq!(with_unique_ids(&n, &[0, 2], "0"), None, "lengths differ");
        let mut env = vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), "0".to_string()),
            ("SLURM_STEP_GPUS".to_string(), "1".to_string()),
            ("GPU_DEVICE_ORDINAL".to_string(), "0".to_string()),
        ];
        use_unique_ids(&mut env, &n);
        assert_eq!(env[0].1, "MIG-b");
        assert_eq!(env[2].1, "0", "ordinals stay numbers");
        let mut plain = vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), "0".to_string()),
            ("SLURM_JOB_GPUS".to_string(), "2".to_string()),
        ];
        use_unique_ids(&mut plain, &n);
        assert_eq!(plain[0].1, "0");
    }

    #[test]
    fn deny_list_skips_allowed_and_notes_plain_files() {
        let t = tempfile::tempdir().unwrap();
        let plain = t.path().join("gpu1");
        std::fs::write(&plain, "").unwrap();
        let mut n = node(3);
        n[0].file = Some("/dev/null".into());
        n[1].file = Some(plain.display().to_string());
        n[2].file = Some("/dev/zero".into());
        // Device 2 allowed, 0 denied (/dev/null is 1:3), 1 is not a device node.
        let (deny, notes) = deny_list(&n, &alloc(&[2]));
        assert_eq!(deny.len(), 1);
        assert_eq!(deny[0].rule(), "c 1:3 rwm");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("gpu1:"), "{notes:?}");
        let (deny, _) = deny_list(&n, &alloc(&[0, 2]));
        assert!(deny.is_empty());
    }
}
