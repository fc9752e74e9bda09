//! `--cpu-bind` for one task (cf. Slurm's task/affinity: `lllp_distribution` turns the
//! automatic bindings into per-task masks; `map_cpu`/`mask_cpu` are taken as given,
//! once [`validate`] has found every CPU they name among the step's).
//!
//! The step's CPUs on a node are the job's CPU ids the controller gave it
//! ([`crate::model::step::StepLayout::cpu_ids`]), mapped onto CPUs that exist here (a
//! node may declare more CPUs than the machine has). Local task `k` with `c` CPUs per
//! task takes the `k`-th block of `c` of them; `cores`, `sockets` and `ldoms` then
//! widen the block to whole cores, sockets or NUMA nodes, within the step's CPUs.

use crate::model::step::{CpuBind, CpuBindKind};
use std::collections::HashMap;
use std::path::Path;

/// Which core, socket and NUMA node each CPU is on, as binding needs it. CPUs missing
/// from a map count as their own core / socket 0 / NUMA node 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// CPU → the hardware threads of its core (itself included).
    pub siblings: HashMap<usize, Vec<usize>>,
    /// CPU → physical package id.
    pub socket: HashMap<usize, u32>,
    /// CPU → NUMA node.
    pub ldom: HashMap<usize, u32>,
}

impl Topology {
    /// Reads the topology of `cpus` under `root` (`/sys` on a real machine):
    /// `devices/system/cpu/cpuN/topology/{thread_siblings_list,physical_package_id}`
    /// and `devices/system/node/nodeM/cpulist`. Unreadable files leave gaps.
    pub fn read(root: &Path, cpus: &[usize]) -> Topology {
        use super::isolate::cpulist::CpuList;
        let mut t = Topology::default();
        let cpu_dir = root.join("devices/system/cpu");
        for &c in cpus {
            let topo = cpu_dir.join(format!("cpu{c}/topology"));
            if let Some(l) = std::fs::read_to_string(topo.join("thread_siblings_list"))
                .ok()
                .and_then(|s| CpuList::parse(&s))
            {
                t.siblings.insert(c, l.ids().map(|x| x as usize).collect());
            }
            if let Some(p) = std::fs::read_to_string(topo.join("physical_package_id"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                t.socket.insert(c, p);
            }
        }
        let node_dir = root.join("devices/system/node");
        for e in std::fs::read_dir(&node_dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(l) = std::fs::read_to_string(e.path().join("cpulist"))
                .ok()
                .and_then(|s| CpuList::parse(&s))
            {
                for c in l.ids() {
                    t.ldom.insert(c as usize, id);
                }
            }
        }
        t
    }
}

/// The step's CPUs here: the job CPU ids it was given (`ids`), each mapped onto a
/// CPU the tasks may use (`usable`, in order), without repeats. When the job is
/// confined to a cpuset (`job_ids` are the job's ids here, `usable` its cpuset, which
/// stepd chose), an id maps by its position among the job's ids; otherwise an id is
/// that CPU when it exists and wraps onto `usable` when the node declares more CPUs
/// than the machine has. Without ids (an older controller) the step has all of
/// `usable`.
pub fn step_cpus(ids: &[u32], job_ids: &[u32], usable: &[usize], confined: bool) -> Vec<usize> {
    if ids.is_empty() || usable.is_empty() {
        return usable.to_vec();
    }
    let mut out: Vec<usize> = Vec::new();
    for &id in ids {
        let c = match job_ids.iter().position(|&j| j == id) {
            Some(p) if confined => usable[p % usable.len()],
            _ if usable.contains(&(id as usize)) => id as usize,
            _ => usable[id as usize % usable.len()],
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The CPUs of `base` a step that uses `per_core` threads of each core keeps: the
/// first `per_core` of each core's threads among `base`, in `base` order (cf.
/// task/affinity with `--hint=nomultithread` or `--threads-per-core`: one task
/// thread per core). CPUs whose siblings are unknown count as cores of their own.
/// Never empty when `base` is not.
pub fn threads_per_core(base: &[usize], topo: &Topology, per_core: usize) -> Vec<usize> {
    let per_core = per_core.max(1);
    let mut out: Vec<usize> = Vec::new();
    for &c in base {
        let kept = match topo.siblings.get(&c) {
            Some(sib) => out.iter().filter(|k| sib.contains(k)).count(),
            None => 0,
        };
        if kept < per_core {
            out.push(c);
        }
    }
    if out.is_empty() { base.to_vec() } else { out }
}

/// Slurm's text for a bind request that cannot be satisfied (ESLURMD_CPU_BIND_ERROR).
pub const CPU_BIND_ERROR: &str = "Unable to satisfy cpu bind request";

/// A `map_cpu`/`mask_cpu` list naming a CPU outside the step's CPUs on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsideStep {
    /// The first CPU named that the step does not have.
    pub cpu: usize,
    /// Slurm's line for it: `CPU binding outside of job step allocation, allocated
    /// CPUs are: 0x….` (the step's CPUs as a hex mask over the node's CPUs).
    pub detail: String,
}

/// Checks a `map_cpu`/`mask_cpu` binding against the step's CPUs here (`base`), as
/// Slurm's task/affinity does before launching (`_validate_map`/`_validate_mask` in
/// dist_tasks.c): every CPU a list names must be one of them. `node_cpus` sizes the
/// mask in the message (the node's CPU count). Other kinds always pass.
///
/// Errors: [`OutsideStep`] naming the first CPU outside the step.
pub fn validate(bind: &CpuBind, base: &[usize], node_cpus: usize) -> Result<(), OutsideStep> {
    let named: Vec<usize> = match bind.kind {
        CpuBindKind::MapCpu => bind.list.iter().map(|&c| c as usize).collect(),
        CpuBindKind::MaskCpu => bind
            .list
            .iter()
            .flat_map(|&m| (0..128).filter(move |b| m & (1u128 << b) != 0))
            .collect(),
        _ => return Ok(()),
    };
    match named.into_iter().find(|c| !base.contains(c)) {
        None => Ok(()),
        Some(cpu) => Err(OutsideStep {
            cpu,
            detail: format!(
                "CPU binding outside of job step allocation, allocated CPUs are: {}.",
                hex_mask(base, node_cpus)
            ),
        }),
    }
}

/// `cpus` as Slurm prints a CPU mask: `0x` and upper-case hex digits, one per four of
/// the node's `node_cpus` CPUs (at least one, and enough for the highest CPU).
pub fn hex_mask(cpus: &[usize], node_cpus: usize) -> String {
    let top = cpus.iter().max().map_or(0, |m| m + 1);
    let digits = node_cpus.max(top).div_ceil(4).max(1);
    let mut s = String::from("0x");
    for d in (0..digits).rev() {
        let nibble = (0..4)
            .filter(|b| cpus.contains(&(d * 4 + b)))
            .fold(0u32, |acc, b| acc | 1 << b);
        s.push(
            std::char::from_digit(nibble, 16)
                .unwrap_or('0')
                .to_ascii_uppercase(),
        );
    }
    s
}

/// The CPUs local task `local` is bound to, or `None` without binding.
/// `base` is the step's CPUs here ([`step_cpus`]), `cpt` the CPUs per task.
pub fn task_cpus(
    bind: &CpuBind,
    base: &[usize],
    local: u32,
    cpt: usize,
    topo: &Topology,
) -> Option<Vec<usize>> {
    if base.is_empty() {
        return None;
    }
    let k = local as usize;
    let mut v: Vec<usize> = match bind.kind {
        CpuBindKind::None => return None,
        CpuBindKind::Rank => vec![base[k % base.len()]],
        CpuBindKind::MapCpu => vec![*bind.list.get(k % bind.list.len().max(1))? as usize],
        CpuBindKind::MaskCpu => {
            let m = *bind.list.get(k % bind.list.len().max(1))?;
            (0..128).filter(|b| m & (1u128 << b) != 0).collect()
        }
        CpuBindKind::Threads | CpuBindKind::Cores | CpuBindKind::Sockets | CpuBindKind::Ldoms => {
            let cpt = cpt.max(1);
            let block: Vec<usize> = (k * cpt..k * cpt + cpt)
                .map(|i| base[i % base.len()])
                .collect();
            let same = |a: usize, b: usize| -> bool {
                match bind.kind {
                    CpuBindKind::Cores => topo.siblings.get(&a).is_some_and(|s| s.contains(&b)),
                    CpuBindKind::Sockets => {
                        topo.socket.get(&a).copied().unwrap_or(0)
                            == topo.socket.get(&b).copied().unwrap_or(0)
                    }
                    CpuBindKind::Ldoms => {
                        topo.ldom.get(&a).copied().unwrap_or(0)
                            == topo.ldom.get(&b).copied().unwrap_or(0)
                    }
                    _ => false,
                }
            };
            let mut out = block.clone();
            if bind.kind != CpuBindKind::Threads {
                for &b in base {
                    if block.iter().any(|&a| same(a, b)) {
                        out.push(b);
                    }
                }
            }
            out
        }
    };
    v.sort_unstable();
    v.dedup();
    (!v.is_empty()).then_some(v)
}

/// A CPU set as task/affinity prints it: hexadecimal, no leading zeros.
pub fn mask_hex(cpus: &[usize]) -> String {
    let m: u128 = cpus
        .iter()
        .filter(|&&c| c < 128)
        .fold(0, |m, &c| m | (1u128 << c));
    format!("0x{m:x}")
}

/// The line `--cpu-bind=verbose` prints for a task (task/affinity's
/// `slurm_chkaffinity`): `cpu-bind=MASK - node, task  R  L [pid]: mask 0x.. set`;
/// without binding (`none`) the type is `NONE`, the mask is what the task may use,
/// and there is no ` set`.
pub fn verbose_line(
    bind: &CpuBind,
    node: &str,
    rank: u32,
    local: u32,
    pid: i32,
    cpus: &[usize],
) -> String {
    let action = if bind.kind == CpuBindKind::None {
        ""
    } else {
        " set"
    };
    format!(
        "cpu-bind={} - {node}, task {rank:2} {local:2} [{pid}]: mask {}{action}\n",
        bind.verbose_type(),
        mask_hex(cpus)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(s: &str) -> CpuBind {
        CpuBind::parse(s).unwrap()
    }

    #[test]
    fn map_and_mask_lists_must_stay_within_the_step() {
        let base = [2, 3];
        assert_eq!(validate(&bind("map_cpu:3,2"), &base, 8), Ok(()));
        assert_eq!(validate(&bind("mask_cpu:0xc"), &base, 8), Ok(()));
        assert_eq!(validate(&bind("cores"), &base, 8), Ok(()));
        let e = validate(&bind("map_cpu:2,99"), &base, 8).unwrap_err();
        assert_eq!(e.cpu, 99);
        assert_eq!(
            e.detail,
            "CPU binding outside of job step allocation, allocated CPUs are: 0x0C."
        );
        assert_eq!(
            validate(&bind("mask_cpu:0x4,0x11"), &base, 8)
                .unwrap_err()
                .cpu,
            0
        );
        assert_eq!(
            hex_mask(&[0, 1, 2, 3, 4], 80),
            format!("0x{}1F", "0".repeat(18))
        );
        assert_eq!(hex_mask(&[], 0), "0x0");
    }

    /// Two sockets of two cores of two threads: CPUs 0-3 on socket 0 (cores {0,4},
    /// {1,5} ...): siblings are `c` and `c+4`.
    fn topo() -> Topology {
        let mut t = Topology::default();
        for c in 0..8usize {
            t.siblings.insert(c, vec![c % 4, c % 4 + 4]);
            let s = ((c % 4) / 2) as u32;
            t.socket.insert(c, s);
            t.ldom.insert(c, s);
        }
        t
    }

    #[test]
    fn one_thread_of_each_core() {
        let t = topo();
        // The step holds cores {0,4} and {1,5}: one thread of each.
        assert_eq!(threads_per_core(&[0, 1, 4, 5], &t, 1), vec![0, 1]);
        assert_eq!(threads_per_core(&[4, 0, 5, 1], &t, 1), vec![4, 5]);
        assert_eq!(threads_per_core(&[0, 1, 4, 5], &t, 2), vec![0, 1, 4, 5]);
        // Unknown siblings: every CPU is its own core.
        let none = Topology::default();
        assert_eq!(threads_per_core(&[0, 4], &none, 1), vec![0, 4]);
        // Tasks bound to threads then take one CPU of distinct cores each.
        let base = threads_per_core(&[0, 1, 4, 5], &t, 1);
        let th = bind("threads");
        assert_eq!(task_cpus(&th, &base, 0, 1, &t), Some(vec![0]));
        assert_eq!(task_cpus(&th, &base, 1, 1, &t), Some(vec![1]));
    }

    #[test]
    fn parse_every_mode() {
        assert_eq!(bind("verbose,cores").kind, CpuBindKind::Cores);
        assert!(bind("v,threads").verbose);
        assert!(!bind("verbose,quiet,none").verbose);
        assert_eq!(bind("sockets").kind, CpuBindKind::Sockets);
        assert_eq!(bind("ldoms").kind, CpuBindKind::Ldoms);
        assert_eq!(bind("rank").kind, CpuBindKind::Rank);
        let m = bind("verbose,map_cpu:3,0x1,2");
        assert_eq!(
            (m.kind, m.list.clone()),
            (CpuBindKind::MapCpu, vec![3, 1, 2])
        );
        assert!(m.verbose);
        let k = bind("mask_cpu:0x3,c");
        assert_eq!(
            (k.kind, k.list.clone()),
            (CpuBindKind::MaskCpu, vec![3, 12])
        );
        for bad in [
            "bogus",
            "map_cpu:",
            "map_cpu:x",
            "map_cpu:200",
            "mask_cpu:0",
            "mask_cpu:zz",
        ] {
            assert_eq!(CpuBind::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn step_cpus_are_the_given_ids_on_existing_cpus() {
        let online: Vec<usize> = (0..4).collect();
        assert_eq!(
            step_cpus(&[2, 3], &[0, 1, 2, 3], &online, false),
            vec![2, 3]
        );
        // Declared CPUs past the machine's wrap onto it.
        assert_eq!(step_cpus(&[3, 5, 6], &[], &online, false), vec![3, 1, 2]);
        assert_eq!(step_cpus(&[], &[], &online, false), online);
        // In a cpuset stepd chose, ids map by their place among the job's ids.
        assert_eq!(
            step_cpus(&[6, 7], &[4, 5, 6, 7], &[0, 1, 8, 9], true),
            vec![8, 9]
        );
    }

    #[test]
    fn tasks_take_blocks_of_the_steps_cpus() {
        let t = topo();
        let base = vec![2, 3, 6, 7];
        let th = bind("threads");
        assert_eq!(task_cpus(&th, &base, 0, 1, &t), Some(vec![2]));
        assert_eq!(task_cpus(&th, &base, 1, 1, &t), Some(vec![3]));
        assert_eq!(task_cpus(&th, &base, 1, 2, &t), Some(vec![6, 7]));
        // Cores: the whole core (both threads) when both are the step's.
        let co = bind("cores");
        assert_eq!(task_cpus(&co, &base, 0, 1, &t), Some(vec![2, 6]));
        assert_eq!(task_cpus(&co, &[2, 3], 0, 1, &t), Some(vec![2]));
        // Sockets and ldoms: every step CPU on the same socket / NUMA node.
        assert_eq!(
            task_cpus(&bind("sockets"), &[0, 1, 2, 3], 0, 1, &t),
            Some(vec![0, 1])
        );
        assert_eq!(
            task_cpus(&bind("ldoms"), &[0, 1, 2, 3], 1, 2, &t),
            Some(vec![2, 3])
        );
        assert_eq!(task_cpus(&bind("rank"), &base, 1, 1, &t), Some(vec![3]));
        assert_eq!(task_cpus(&bind("none"), &base, 0, 1, &t), None);
        let m = bind("map_cpu:5,1");
        assert_eq!(task_cpus(&m, &base, 0, 1, &t), Some(vec![5]));
        assert_eq!(task_cpus(&m, &base, 3, 1, &t), Some(vec![1]));
        let k = bind("mask_cpu:0x6");
        assert_eq!(task_cpus(&k, &base, 0, 1, &t), Some(vec![1, 2]));
    }

    #[test]
    fn verbose_lines_as_task_affinity_prints_them() {
        assert_eq!(
            verbose_line(&bind("verbose,cores"), "n1", 3, 1, 4242, &[1]),
            "cpu-bind=MASK - n1, task  3  1 [4242]: mask 0x2 set\n"
        );
        assert_eq!(
            verbose_line(&bind("verbose,map_cpu:2"), "n1", 0, 0, 7, &[2]),
            "cpu-bind=MAP  - n1, task  0  0 [7]: mask 0x4 set\n"
        );
        assert_eq!(
            verbose_line(&bind("verbose,none"), "n1", 12, 0, 7, &[0, 1]),
            "cpu-bind=NONE - n1, task 12  0 [7]: mask 0x3\n"
        );
    }
}
