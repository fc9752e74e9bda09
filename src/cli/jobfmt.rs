//! Job values rendered the way both `scontrol show job` and `sacct` print them: memory
//! with Slurm's "exact" unit rule, TRES strings, and the job's standard-stream paths
//! with their `%` patterns filled in (cf. src/common/slurm_protocol_defs.c
//! `convert_num_unit2` with CONVERT_NUM_UNIT_EXACT, and slurmctld's `_fill_std_path`).

use crate::model::{Job, MemReq};

/// Formats MiB as Slurm prints memory in TRES strings and `MinMemory*`: the value moves
/// up a unit only while it is a multiple of half that unit (`6400M` stays, `12800M` is
/// `12.50G`, `1024M` is `1G`).
pub fn fmt_mem_exact(mb: u64) -> String {
    const UNITS: [char; 5] = ['M', 'G', 'T', 'P', 'E'];
    let mut v = mb as f64;
    let mut raw = mb;
    let mut u = 0;
    while raw >= 1024 && raw.is_multiple_of(512) && u + 1 < UNITS.len() {
        v /= 1024.0;
        raw /= 1024;
        u += 1;
        if v.fract() != 0.0 {
            break;
        }
    }
    if v.fract() == 0.0 {
        format!("{}{}", v as u64, UNITS[u])
    } else {
        format!("{:.2}{}", v, UNITS[u])
    }
}

/// Number of nodes the job holds, or asks for while it holds none.
pub fn node_count(job: &Job) -> u32 {
    match &job.alloc {
        Some(a) if !a.nodes.is_empty() => a.nodes.len() as u32,
        _ => job.req_nodes.max(1),
    }
}

/// CPUs the job holds, or asks for while it holds none.
pub fn cpu_count(job: &Job) -> u32 {
    match &job.alloc {
        Some(a) if a.total_cpus() > 0 => a.total_cpus(),
        _ => job.req_cpus.max(1),
    }
}

/// Total memory of the job in MiB (per-CPU requests times CPUs, per-node times nodes).
pub fn total_mem_mb(job: &Job) -> u64 {
    match job.req_mem {
        MemReq::PerCpu(m) => m.saturating_mul(u64::from(cpu_count(job))),
        MemReq::PerNode(m) => {
            let per_node = match &job.alloc {
                Some(a) if m == 0 => a.mem_per_node,
                _ => m,
            };
            per_node.saturating_mul(u64::from(node_count(job)))
        }
    }
}

/// GPUs the job holds, or asks for while it holds none.
pub fn gpu_count(job: &Job) -> u64 {
    match &job.alloc {
        Some(a) if !a.gres.is_empty() => a.gres_count("gpu"),
        _ => crate::sched::priority::job_gpus(job),
    }
}

/// The job's TRES beyond cpu/mem/node/billing, as `(name, count)`: `gres/gpu` first,
/// then every other GRES (`gres/mps`, `gres/nic`, …) and then every license
/// (`license/matlab`) by name; what the job holds once it has an allocation, else what
/// it asks for (GRES per node times its nodes). Zero counts are left out, as Slurm
/// leaves out TRES a job does not use.
pub fn extra_tres(job: &Job) -> Vec<(String, u64)> {
    let mut gres: std::collections::BTreeMap<&str, u64> = Default::default();
    let gpus = gpu_count(job);
    let licenses = match &job.alloc {
        Some(a) => {
            for g in a.gres.iter().flatten().filter(|g| g.name != "gpu") {
                *gres.entry(&g.name).or_default() += u64::from(g.count);
            }
            &a.licenses
        }
        None => {
            let nodes = u64::from(job.req_nodes.max(1));
            for g in job.spec.gres.iter().filter(|g| g.name != "gpu") {
                *gres.entry(&g.name).or_default() += g.count * nodes;
            }
            &job.spec.licenses
        }
    };
    let mut lic: std::collections::BTreeMap<&str, u64> = Default::default();
    for l in licenses {
        *lic.entry(&l.name).or_default() += u64::from(l.count);
    }
    std::iter::once(("gres/gpu".to_string(), gpus))
        .chain(gres.into_iter().map(|(n, c)| (format!("gres/{n}"), c)))
        .chain(lic.into_iter().map(|(n, c)| (format!("license/{n}"), c)))
        .filter(|(_, c)| *c > 0)
        .collect()
}

/// `,gres/gpu=G,gres/mps=M,license/L=K` (empty when the job has none of them): what
/// scontrol's and squeue's TRES strings end with.
pub fn extra_tres_suffix(job: &Job) -> String {
    extra_tres(job)
        .iter()
        .map(|(k, v)| format!(",{k}={v}"))
        .collect()
}

/// The job's billable TRES as its TRES strings print it (whole units): the figure
/// the controller recorded (`Job::billing`, `model::billing`), or the CPU count for
/// a record without one.
pub fn billing(job: &Job) -> u64 {
    job.billing
        .map_or(u64::from(cpu_count(job)), |b| b.max(0.0) as u64)
}

/// `,billing=N`, or nothing when the job bills 0 (Slurm leaves zero counts out of
/// TRES strings).
fn billing_item(job: &Job) -> String {
    match billing(job) {
        0 => String::new(),
        b => format!(",billing={b}"),
    }
}

/// `cpu=N,mem=M,node=K,billing=B[,gres/gpu=G,gres/…,license/…]` as scontrol's `TRES=`
/// prints it.
pub fn tres_scontrol(job: &Job) -> String {
    format!(
        "cpu={},mem={},node={}{}{}",
        cpu_count(job),
        fmt_mem_exact(total_mem_mb(job)),
        node_count(job),
        billing_item(job),
        extra_tres_suffix(job)
    )
}

/// scontrol's `TRES=` with the memory as `mem` formats it (squeue's `tres-alloc`
/// prints it with `--noconvert` units).
pub fn tres_with_mem(job: &Job, mem: &str) -> String {
    format!(
        "cpu={},mem={mem},node={}{}{}",
        cpu_count(job),
        node_count(job),
        billing_item(job),
        extra_tres_suffix(job)
    )
}

/// `billing=N,cpu=N,[gres/…=G,license/…=L,]mem=M,node=K` as sacct's
/// `AllocTRES`/`ReqTRES` print it (sorted keys).
pub fn tres_sacct(job: &Job) -> String {
    let cpus = cpu_count(job);
    let mut items: Vec<(String, String)> = vec![
        ("billing".into(), billing(job).to_string()),
        ("cpu".into(), cpus.to_string()),
        ("mem".into(), fmt_mem_exact(total_mem_mb(job))),
        ("node".into(), node_count(job).to_string()),
    ];
    items.retain(|(k, v)| k != "billing" || v != "0");
    items.extend(extra_tres(job).into_iter().map(|(k, v)| (k, v.to_string())));
    items.sort();
    items
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// GRES held on one node (or the whole job), grouped by name and type as scontrol and
/// squeue's JSON show them: `gpu:4` or, with `with_idx`, `gpu:4(IDX:0-3)`; several
/// groups are comma-joined.
pub fn gres_alloc_text(gs: &[crate::model::job::GresAlloc], with_idx: bool) -> String {
    let mut groups: Vec<(&str, Option<&str>, u32, Vec<u32>)> = Vec::new();
    for g in gs {
        match groups
            .iter_mut()
            .find(|x| x.0 == g.name && x.1 == g.kind.as_deref())
        {
            Some(x) => {
                x.2 += g.count;
                x.3.push(g.index);
            }
            None => groups.push((&g.name, g.kind.as_deref(), g.count, vec![g.index])),
        }
    }
    groups
        .iter()
        .map(|(n, k, c, idx)| {
            let head = match k {
                Some(k) => format!("{n}:{k}:{c}"),
                None => format!("{n}:{c}"),
            };
            if with_idx {
                format!("{head}(IDX:{})", id_ranges(idx))
            } else {
                head
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub use crate::model::hostlist::id_ranges;

/// `ReqMem` / `MinMemory*` value: `400M` per CPU or per node, exact units.
pub fn req_mem_text(job: &Job) -> String {
    match job.req_mem {
        MemReq::PerCpu(m) | MemReq::PerNode(m) => fmt_mem_exact(m),
    }
}

/// The memory of the job's ReqTRES (`mem=`), as sacct's ReqMem shows it: the total
/// over its CPUs or nodes, e.g. `200M` for `-n2 --mem-per-cpu=100`.
pub fn req_mem_total_text(job: &Job) -> String {
    fmt_mem_exact(total_mem_mb(job))
}

/// Which standard stream of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    In,
    Out,
    Err,
}

/// The job's path for `which` as scontrol shows it: the pattern (or Slurm's default)
/// with `%%`, `%j`, `%J`, `%A`, `%a`, `%u`, `%x` and, once allocated, `%N` filled in,
/// made absolute against the working directory. Other patterns stay as written.
pub fn std_path(job: &Job, which: Stream) -> String {
    let default_out = crate::jobspec::pattern::default_stdout(job.array.is_some());
    let pattern = match which {
        Stream::In => job.spec.stdin.clone().unwrap_or_else(|| "/dev/null".into()),
        Stream::Out => job
            .spec
            .stdout
            .clone()
            .unwrap_or_else(|| default_out.into()),
        Stream::Err => match (&job.spec.stderr, &job.spec.stdout) {
            (Some(e), _) => e.clone(),
            (None, Some(o)) => o.clone(),
            (None, None) => default_out.into(),
        },
    };
    let filled = fill_pattern(&pattern, job);
    if filled.starts_with('/') || job.spec.work_dir.is_empty() {
        filled
    } else {
        format!("{}/{}", job.spec.work_dir.trim_end_matches('/'), filled)
    }
}

fn fill_pattern(p: &str, job: &Job) -> String {
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*d);
            chars.next();
        }
        let w: usize = width.parse().unwrap_or(0).min(10);
        let Some(spec) = chars.next() else {
            out.push('%');
            out.push_str(&width);
            break;
        };
        let num = |n: u64| format!("{n:0w$}");
        let first_node = job.alloc.as_ref().and_then(|a| a.nodes.first().cloned());
        match spec {
            '%' => out.push('%'),
            'j' | 'J' => out.push_str(&num(u64::from(job.id))),
            'A' if job.array_job_id != 0 => out.push_str(&num(u64::from(job.array_job_id))),
            'A' => out.push_str(&num(u64::from(job.id))),
            'a' => out.push_str(&num(job.array_task_id.map_or(4_294_967_294, u64::from))),
            'u' => out.push_str(&job.user),
            'x' => out.push_str(&job.spec.name),
            'N' if first_node.is_some() => out.push_str(&first_node.unwrap_or_default()),
            other => {
                out.push('%');
                out.push_str(&width);
                out.push(other);
            }
        }
    }
    out
}

/// A per-node count as scontrol and squeue print it: `*` when the job did not ask.
pub fn star(v: Option<u32>) -> String {
    v.map_or_else(|| "*".into(), |n| n.to_string())
}

/// The minimum CPUs per node a job asks for (Slurm's `pn_min_cpus`): its CPUs per task
/// times its tasks per node, or `--mincpus` when larger; at least 1. What scontrol's
/// `MinCPUsNode=`, squeue's `%c` and the JSON `minimum_cpus_per_node` show.
pub fn min_cpus_per_node(job: &Job) -> u32 {
    let s = &job.spec;
    let cpt = s.cpus_per_task.unwrap_or(1).max(1);
    let ntpn = s.ntasks_per_node.unwrap_or(0).max(1);
    cpt.saturating_mul(ntpn).max(s.mincpus.unwrap_or(0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_memory_units() {
        assert_eq!(fmt_mem_exact(400), "400M");
        assert_eq!(fmt_mem_exact(1600), "1600M");
        assert_eq!(fmt_mem_exact(6400), "6400M");
        assert_eq!(fmt_mem_exact(10800), "10800M");
        assert_eq!(fmt_mem_exact(16000), "16000M");
        assert_eq!(fmt_mem_exact(12800), "12.50G");
        assert_eq!(fmt_mem_exact(1024), "1G");
        assert_eq!(fmt_mem_exact(64), "64M");
        assert_eq!(fmt_mem_exact(0), "0M");
        assert_eq!(fmt_mem_exact(2 * 1024 * 1024), "2T");
    }

    #[test]
    fn general_tres_show_every_gres_and_license() {
        use crate::model::gres::{GresReq, LicenseReq};
        let mut j = testjobs::job(7, "t");
        j.req_nodes = 2;
        j.req_cpus = 2;
        j.spec.gres = vec![
            GresReq {
                name: "nic".into(),
                kind: None,
                count: 1,
            },
            GresReq {
                name: "gpu".into(),
                kind: None,
                count: 2,
            },
        ];
        j.spec.licenses = vec![LicenseReq {
            name: "matlab".into(),
            count: 3,
        }];
        // Requested: GRES per node times the nodes; gres/gpu first, licenses last.
        assert_eq!(
            extra_tres_suffix(&j),
            ",gres/gpu=4,gres/nic=2,license/matlab=3"
        );
        assert_eq!(
            tres_sacct(&j),
            "billing=2,cpu=2,gres/gpu=4,gres/nic=2,license/matlab=3,mem=800M,node=2"
        );
        // A job with neither keeps the four basic TRES.
        let mut plain = testjobs::job(8, "p");
        assert_eq!(tres_scontrol(&plain), "cpu=1,mem=400M,node=1,billing=1");
        // The controller's billing figure (TRESBillingWeights) wins over the CPU
        // count, whole units; a zero is left out as Slurm leaves zero counts out.
        plain.billing = Some(7.9);
        assert_eq!(tres_scontrol(&plain), "cpu=1,mem=400M,node=1,billing=7");
        assert_eq!(tres_sacct(&plain), "billing=7,cpu=1,mem=400M,node=1");
        plain.billing = Some(0.0);
        assert_eq!(tres_scontrol(&plain), "cpu=1,mem=400M,node=1");
        assert_eq!(tres_sacct(&plain), "cpu=1,mem=400M,node=1");
    }
}

/// Hand-made jobs for the front-ends' unit tests (the golden `alice` setup).
#[cfg(test)]
pub(crate) mod testjobs {
    use crate::model::job::Allocation;
    use crate::model::{ExitStatus, Job, JobSpec, JobState, MemReq, TimeLimit};

    /// 2026-11-29T14:55:35Z.
    pub const T0: i64 = 1_795_964_135;

    /// A one-CPU job of alice's in `debug`, submitted at `T0`, still pending.
    pub fn job(id: u32, name: &str) -> Job {
        Job {
            id,
            spec: JobSpec {
                name: name.into(),
                work_dir: "/home/alice/golden-work".into(),
                submit_dir: "/home/alice/golden-work".into(),
                submit_host: "localhost".into(),
                ..JobSpec::default()
            },
            uid: 2001,
            gid: 2001,
            user: "alice".into(),
            group: "alice".into(),
            partition: "debug".into(),
            account: "research".into(),
            qos: "normal".into(),
            time_limit: TimeLimit::Minutes(60),
            req_cpus: 1,
            req_tasks: 1,
            req_nodes: 1,
            req_mem: MemReq::PerCpu(400),
            priority: 11515,
            submit_time: T0,
            eligible_time: Some(T0),
            last_sched_eval: Some(T0),
            ..Job::default()
        }
    }

    /// Makes `job` run on node01 with `cpus` CPUs from `start`.
    pub fn running(mut job: Job, cpus: u32, start: i64) -> Job {
        job.state = JobState::Running;
        job.req_cpus = cpus;
        job.req_tasks = cpus;
        job.start_time = Some(start);
        job.last_sched_eval = Some(start);
        job.alloc = Some(Allocation {
            nodes: vec!["node01".into()],
            cpus: vec![cpus],
            mem_per_node: 400 * u64::from(cpus),
            ..Default::default()
        });
        job
    }

    /// Makes `job` end at `end` in `state` with `exit`.
    pub fn ended(mut job: Job, state: JobState, exit: ExitStatus, end: i64) -> Job {
        job.state = state;
        job.exit = exit;
        job.end_time = Some(end);
        job
    }
}
