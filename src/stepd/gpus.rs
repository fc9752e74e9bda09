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

/// The device files to deny: those of `node` devices (with a `file`) that are not in
/// `allowed` (matched by slot, the position in the node's list). Files that are not
/// device nodes cannot be denied by a devices cgroup; they are returned as notes.
pub fn deny_list(node: &[GresDevice], allowed: &[GresAlloc]) -> (Vec<Device>, Vec<String>) {
    let mut deny = Vec::new();
    let mut notes = Vec::new();
    for (slot, d) in node.iter().enumerate() {
        let Some(f) = &d.file else { continue };
        if allowed.iter().any(|a| a.slot as usize == slot) {
            continue;
        }
        match Device::from_path(Path::new(f)) {
            Ok(dev) => {
                if !deny.iter().any(|x: &Device| x.rule() == dev.rule()) {
                    deny.push(dev);
                }
            }
            Err(e) => notes.push(format!("{}{}: {e}", d.name, d.index)),
        }
    }
    (deny, notes)
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
        idx.iter()
            .map(|&i| GresAlloc {
                slot: i,
                name: "gpu".into(),
                kind: None,
                index: i,
                count: 1,
            })
            .collect()
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
    fn deny_list_skips_allowed_and_notes_plain_files() {
        let t = tempfile::tempdir().unwrap();
        let plain = t.path().join("gpu1");
        std::fs::write(&plain, "").unwrap();
        let mut n = node(3);
        n[0].file = Some("/dev/null".into());
        n[1].file = Some(plain.display().to_string());
        n[2].file = Some("/dev/null".into());
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
