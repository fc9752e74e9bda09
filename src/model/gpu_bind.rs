//! Binding a step's tasks to GPUs: `--gpu-bind` (`closest`, `map_gpu:…`, `mask_gpu:…`,
//! `single:N`, `none`, `verbose`) and the implicit per-task binding of
//! `--gpus-per-task` (Slurm 21.08+ turns it into `--tres-bind=gres/gpu:per_task:N`),
//! plus choosing a task's CPUs near its GPUs (gres.conf `Cores=`). Cf. Slurm's
//! src/interfaces/gres.c `_get_usable_gres`/`gres_g_task_set_env` and
//! src/plugins/gres/common/gres_common.c `common_gres_set_env`.
//!
//! Pure. GPU ids in `map_gpu`/`mask_gpu` are positions among the GPUs the step holds on
//! the node (0 = its first GPU), which is what Slurm uses when devices are constrained;
//! sluice uses it always, so a binding means the same whatever the step was given.

use serde::{Deserialize, Serialize};

/// How each task of a step picks its GPUs among the step's GPUs on its node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GpuBindKind {
    /// Every task sees all of the step's GPUs on its node (`none`; the default).
    #[default]
    None,
    /// Each task sees the GPUs whose `Cores=` hold its CPUs (`closest`).
    Closest,
    /// Task `i` sees GPU `list[i % len]` (`map_gpu:0,1` or `map_gpu:0*2,1*2`).
    MapGpu(Vec<u32>),
    /// Task `i` sees the GPUs set in hexadecimal mask `list[i % len]` (`mask_gpu:0x3,0xc`).
    MaskGpu(Vec<u64>),
    /// Each task sees one GPU near its CPUs, at most N tasks per GPU (`single:N`).
    Single(u32),
    /// Task `i` sees GPUs `i*N .. i*N+N` (what `--gpus-per-task=N` implies).
    PerTask(u32),
}

/// `--gpu-bind=[verbose,]TYPE`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuBind {
    pub kind: GpuBindKind,
    /// `verbose`: each task reports its GPU binding on stderr.
    pub verbose: bool,
}

/// A `--gpu-bind` value that cannot be parsed; the text is Slurm's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid --gpu-bind argument: {0}")]
pub struct GpuBindError(pub String);

/// Expands a `map_gpu`/`mask_gpu` list with Slurm's `value*count` repetition.
fn expand_list<T: Clone>(s: &str, parse: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let (v, n) = match item.split_once('*') {
            Some((v, n)) => (
                v,
                n.parse::<usize>().ok().filter(|n| (1..=4096).contains(n))?,
            ),
            None => (item, 1),
        };
        let v = parse(v.trim())?;
        out.extend(std::iter::repeat_n(v, n));
    }
    (!out.is_empty()).then_some(out)
}

impl GpuBind {
    /// Parses `--gpu-bind`: `none`, `closest`, `map_gpu:<list>`, `mask_gpu:<list>`,
    /// `single:<N>`, `per_task:<N>`, each optionally preceded by `verbose,`; a bare
    /// `verbose` keeps the default binding and reports it.
    ///
    /// Errors: [`GpuBindError`] naming the value.
    pub fn parse(s: &str) -> Result<GpuBind, GpuBindError> {
        let bad = || GpuBindError(s.to_string());
        let mut b = GpuBind::default();
        let mut rest = s.trim();
        loop {
            let lower = rest.to_ascii_lowercase();
            if lower == "verbose" || lower == "v" {
                b.verbose = true;
                return Ok(b);
            }
            if let Some(r) = lower.strip_prefix("verbose,") {
                b.verbose = true;
                rest = &rest[rest.len() - r.len()..];
                continue;
            }
            break;
        }
        let (word, arg) = match rest.split_once(':') {
            Some((w, a)) => (w.to_ascii_lowercase(), Some(a)),
            None => (rest.to_ascii_lowercase(), None),
        };
        b.kind = match (word.as_str(), arg) {
            ("none" | "no", None) => GpuBindKind::None,
            ("closest", None) => GpuBindKind::Closest,
            ("map_gpu", Some(a)) => {
                GpuBindKind::MapGpu(expand_list(a, |v| v.parse::<u32>().ok()).ok_or_else(bad)?)
            }
            ("mask_gpu", Some(a)) => GpuBindKind::MaskGpu(
                expand_list(a, |v| {
                    let h = v.strip_prefix("0x").or(v.strip_prefix("0X")).unwrap_or(v);
                    u64::from_str_radix(h, 16).ok().filter(|m| *m != 0)
                })
                .ok_or_else(bad)?,
            ),
            ("single", Some(a)) => {
                GpuBindKind::Single(a.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(bad)?)
            }
            ("per_task", Some(a)) => {
                GpuBindKind::PerTask(a.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(bad)?)
            }
            _ => return Err(bad()),
        };
        Ok(b)
    }
}

/// The GPUs task `local` (0-based among the step's tasks on this node) may use, as
/// positions into the step's GPUs on the node (in device-index order), whose core
/// affinities are `cores` (empty = no affinity known). `task_cpus` are the CPUs the task
/// is bound to, when it is; `loads` how many earlier tasks each GPU was bound to (for
/// `single:N`; missing entries count 0).
///
/// Errors: a `map_gpu`/`mask_gpu` entry naming a GPU the step does not hold on the node
/// (the text says which).
pub fn task_gpus(
    bind: &GpuBindKind,
    cores: &[Vec<u32>],
    local: u32,
    loads: &[u32],
    task_cpus: Option<&[u32]>,
) -> Result<Vec<usize>, String> {
    let n = cores.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let all: Vec<usize> = (0..n).collect();
    let local = local as usize;
    // GPUs whose cores hold one of the task's CPUs (all of them when nothing is known).
    let closest = || -> Vec<usize> {
        let Some(cpus) = task_cpus else {
            return all.clone();
        };
        let near: Vec<usize> = (0..n)
            .filter(|&g| cores[g].iter().any(|c| cpus.contains(c)))
            .collect();
        if near.is_empty() { all.clone() } else { near }
    };
    Ok(match bind {
        GpuBindKind::None => all,
        GpuBindKind::Closest => closest(),
        GpuBindKind::PerTask(k) => {
            let k = *k as usize;
            let mut v: Vec<usize> = (0..k).map(|j| (local * k + j) % n).collect();
            v.sort_unstable();
            v.dedup();
            v
        }
        GpuBindKind::MapGpu(list) => {
            let g = list[local % list.len()] as usize;
            if g >= n {
                return Err(format!("map_gpu id {g} exceeds the step's GPU count {n}"));
            }
            vec![g]
        }
        GpuBindKind::MaskGpu(list) => {
            let m = list[local % list.len()];
            if n < 64 && m >> n != 0 {
                return Err(format!("mask_gpu 0x{m:x} names GPUs beyond the step's {n}"));
            }
            (0..n.min(64)).filter(|&g| m & (1 << g) != 0).collect()
        }
        GpuBindKind::Single(per) => {
            // The first near GPU with fewer than N tasks; when all have N, the least
            // loaded near one (Slurm then oversubscribes too).
            let near = closest();
            let load = |g: usize| loads.get(g).copied().unwrap_or(0);
            let g = near
                .iter()
                .copied()
                .find(|&g| load(g) < *per)
                .or_else(|| near.iter().copied().min_by_key(|&g| (load(g), g)))
                .unwrap_or(0);
            vec![g]
        }
    })
}

/// Chooses `count` CPUs for a task bound to GPUs with affinity `near` (their `Cores=`,
/// empty = none known): CPUs from `avail` (the step's CPUs on the node, ascending) that
/// are near and not `taken` by earlier tasks first, then other near ones, then any free,
/// then any. Returns them ascending.
pub fn cpus_near(near: &[u32], avail: &[u32], taken: &[u32], count: usize) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let passes: [&dyn Fn(u32) -> bool; 4] = [
        &|c| near.contains(&c) && !taken.contains(&c),
        &|c| near.contains(&c),
        &|c| !taken.contains(&c),
        &|_| true,
    ];
    for pass in passes {
        for &c in avail {
            if out.len() >= count {
                break;
            }
            if pass(c) && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The device-number variables of a task that sees `globals` (device indices on the
/// node, `SLURM_STEP_GPUS`) with `locals` as their ordinals (`CUDA_VISIBLE_DEVICES`,
/// `GPU_DEVICE_ORDINAL`, `ROCR_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK`). Empty when the task
/// has no GPU.
pub fn gpu_env(globals: &[u32], locals: &[u32], step: bool) -> Vec<(String, String)> {
    if globals.is_empty() {
        return Vec::new();
    }
    let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let l = join(locals);
    let mut out: Vec<(String, String)> = [
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "ROCR_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
    ]
    .iter()
    .map(|k| (k.to_string(), l.clone()))
    .collect();
    out.push((
        if step {
            "SLURM_STEP_GPUS"
        } else {
            "SLURM_JOB_GPUS"
        }
        .to_string(),
        join(globals),
    ));
    out
}

/// Slurm's `--gpu-bind=verbose` line for a task (`gpu-bind: usable_gres=0x1;
/// bit_alloc=0x3; local_inx=1; global_list=0; local_list=0`), without the trailing newline.
/// `usable` are positions among the step's `n` GPUs; `globals`/`locals` as in [`gpu_env`].
pub fn verbose_line(
    usable: &[usize],
    n: usize,
    local: u32,
    globals: &[u32],
    locals: &[u32],
) -> String {
    let mask =
        |it: &mut dyn Iterator<Item = usize>| it.fold(0u128, |m, g| m | (1u128 << g.min(127)));
    let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    format!(
        "gpu-bind: usable_gres=0x{:x}; bit_alloc=0x{:x}; local_inx={local}; global_list={}; local_list={}",
        mask(&mut usable.iter().copied()),
        mask(&mut (0..n)),
        join(globals),
        join(locals)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_mode() {
        let p = |s: &str| GpuBind::parse(s).unwrap();
        assert_eq!(p("none").kind, GpuBindKind::None);
        assert_eq!(p("closest").kind, GpuBindKind::Closest);
        assert_eq!(p("map_gpu:1,0").kind, GpuBindKind::MapGpu(vec![1, 0]));
        assert_eq!(
            p("map_gpu:0*2,1*2").kind,
            GpuBindKind::MapGpu(vec![0, 0, 1, 1])
        );
        assert_eq!(p("mask_gpu:0x3,c").kind, GpuBindKind::MaskGpu(vec![3, 12]));
        assert_eq!(p("single:2").kind, GpuBindKind::Single(2));
        let v = p("verbose,map_gpu:1");
        assert!(v.verbose);
        assert_eq!(v.kind, GpuBindKind::MapGpu(vec![1]));
        assert_eq!(
            p("verbose"),
            GpuBind {
                kind: GpuBindKind::None,
                verbose: true
            }
        );
        for bad in [
            "",
            "nearest",
            "map_gpu:",
            "map_gpu:x",
            "mask_gpu:0",
            "single:0",
            "single",
        ] {
            let e = GpuBind::parse(bad).unwrap_err();
            assert_eq!(e.to_string(), format!("Invalid --gpu-bind argument: {bad}"));
        }
    }

    #[test]
    fn per_task_and_none() {
        let cores = vec![vec![]; 4];
        let t = |b: &GpuBindKind, l| task_gpus(b, &cores, l, &[], None).unwrap();
        assert_eq!(t(&GpuBindKind::None, 3), vec![0, 1, 2, 3]);
        assert_eq!(t(&GpuBindKind::PerTask(1), 2), vec![2]);
        assert_eq!(t(&GpuBindKind::PerTask(2), 1), vec![2, 3]);
        // More tasks than GPUs wrap round.
        assert_eq!(t(&GpuBindKind::PerTask(1), 5), vec![1]);
        assert!(
            task_gpus(&GpuBindKind::None, &[], 0, &[], None)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn map_and_mask() {
        let cores = vec![vec![]; 2];
        let map = GpuBindKind::MapGpu(vec![1, 0]);
        assert_eq!(task_gpus(&map, &cores, 0, &[], None).unwrap(), vec![1]);
        assert_eq!(task_gpus(&map, &cores, 1, &[], None).unwrap(), vec![0]);
        assert_eq!(task_gpus(&map, &cores, 2, &[], None).unwrap(), vec![1]);
        let e = task_gpus(&GpuBindKind::MapGpu(vec![2]), &cores, 0, &[], None).unwrap_err();
        assert!(e.contains("map_gpu id 2"), "{e}");
        let mask = GpuBindKind::MaskGpu(vec![0x3, 0x2]);
        assert_eq!(task_gpus(&mask, &cores, 0, &[], None).unwrap(), vec![0, 1]);
        assert_eq!(task_gpus(&mask, &cores, 1, &[], None).unwrap(), vec![1]);
        assert!(task_gpus(&GpuBindKind::MaskGpu(vec![0x4]), &cores, 0, &[], None).is_err());
    }

    #[test]
    fn closest_and_single_follow_core_affinity() {
        // GPU 0 near CPUs 0-3, GPU 1 near 4-7.
        let cores = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        let c =
            |cpus: &[u32]| task_gpus(&GpuBindKind::Closest, &cores, 0, &[], Some(cpus)).unwrap();
        assert_eq!(c(&[5]), vec![1]);
        assert_eq!(c(&[1]), vec![0]);
        assert_eq!(c(&[3, 4]), vec![0, 1]);
        // Unknown CPUs or no affinity: all are equally close.
        assert_eq!(c(&[9]), vec![0, 1]);
        assert_eq!(
            task_gpus(&GpuBindKind::Closest, &cores, 0, &[], None).unwrap(),
            vec![0, 1]
        );
        // single:1: the near GPU; without CPU binding the least loaded one.
        let s = GpuBindKind::Single(1);
        assert_eq!(task_gpus(&s, &cores, 1, &[1, 0], None).unwrap(), vec![1]);
        assert_eq!(task_gpus(&s, &cores, 0, &[], Some(&[6])).unwrap(), vec![1]);
        // single:2 fills each GPU with two tasks before the next.
        let s2 = GpuBindKind::Single(2);
        let mut loads = vec![0u32; 2];
        let mut got = Vec::new();
        for l in 0..5 {
            let g = task_gpus(&s2, &cores, l, &loads, None).unwrap()[0];
            loads[g] += 1;
            got.push(g);
        }
        assert_eq!(got, vec![0, 0, 1, 1, 0]);
        // Near GPUs full: another near one is not invented, the least loaded is reused.
        assert_eq!(
            task_gpus(&GpuBindKind::Single(1), &cores, 0, &[1, 1], Some(&[0])).unwrap(),
            vec![0]
        );
    }

    #[test]
    fn cpus_are_chosen_near_the_gpu() {
        let avail: Vec<u32> = (0..8).collect();
        assert_eq!(cpus_near(&[4, 5, 6, 7], &avail, &[], 2), vec![4, 5]);
        assert_eq!(cpus_near(&[4, 5, 6, 7], &avail, &[4, 5], 2), vec![6, 7]);
        // Near CPUs exhausted: the rest come from elsewhere, free first.
        assert_eq!(cpus_near(&[6, 7], &avail, &[6], 3), vec![0, 6, 7]);
        // No affinity: the first free.
        assert_eq!(cpus_near(&[], &avail, &[0, 1], 2), vec![2, 3]);
    }

    #[test]
    fn env_and_verbose_text() {
        let e = gpu_env(&[2, 3], &[0, 1], true);
        assert!(e.contains(&("CUDA_VISIBLE_DEVICES".into(), "0,1".into())));
        assert!(e.contains(&("SLURM_STEP_GPUS".into(), "2,3".into())));
        assert!(gpu_env(&[], &[], true).is_empty());
        assert_eq!(
            verbose_line(&[1], 2, 1, &[1], &[1]),
            "gpu-bind: usable_gres=0x2; bit_alloc=0x3; local_inx=1; global_list=1; local_list=1"
        );
    }
}
