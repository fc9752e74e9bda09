//! How sacct (and seff) print a step's measured usage: sizes with Slurm's "exact" unit
//! conversion, CPU times, and the `TRESUsageIn*`/`TRESUsageOut*` strings. Cf.
//! src/common/xstring.c `convert_num_unit2` (with `CONVERT_NUM_UNIT_EXACT`, sacct's
//! default) and src/sacct/print.c.

use crate::model::step::StepUsage;
use crate::model::time::fmt_hms;

const SUFFIX: [&str; 6] = ["", "K", "M", "G", "T", "P"];

/// `num` in unit `unit` (0 = none, 1 = K, 2 = M, …) with Slurm's exact conversion:
/// moved to the next unit only while it is at least 1024 and a whole multiple of 512
/// (so no precision is lost beyond a `.50`); printed whole when integral, else with
/// two decimals. Zero prints as `0`.
pub fn convert_exact(num: f64, unit: usize) -> String {
    if num == 0.0 {
        return "0".into();
    }
    let mut n = num;
    let mut u = unit.min(SUFFIX.len() - 1);
    while n >= 1024.0 && n.fract() == 0.0 && (n as u64).is_multiple_of(512) && u + 1 < SUFFIX.len()
    {
        n /= 1024.0;
        u += 1;
    }
    if n.fract() == 0.0 {
        format!("{}{}", n as u64, SUFFIX[u])
    } else {
        format!("{n:.2}{}", SUFFIX[u])
    }
}

/// A size in KiB (`3372K`, `200M`).
pub fn kib(v: u64) -> String {
    convert_exact(v as f64, 1)
}

/// A byte count as sacct prints disk I/O: MiB with two decimals (`0.00M` for a few
/// bytes), `0` for none.
pub fn disk(bytes: u64) -> String {
    convert_exact(bytes as f64 / (1024.0 * 1024.0), 2)
}

/// `TotalCPU`/`UserCPU`/`SystemCPU` style: `MM:SS.mmm` under an hour, else
/// `[D-]HH:MM:SS`.
pub fn cpu(secs: f64) -> String {
    let whole = secs.max(0.0) as u64;
    if whole >= 3600 {
        return fmt_hms(whole);
    }
    let ms = ((secs.max(0.0) - whole as f64) * 1000.0).round() as u64;
    format!("{:02}:{:02}.{:03}", whole / 60, whole % 60, ms.min(999))
}

/// Which `TRESUsage…` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TresUsage {
    InMax,
    InMaxNode,
    InMaxTask,
    InMin,
    InMinNode,
    InMinTask,
    InAve,
    InTot,
    OutMax,
    OutMaxNode,
    OutMaxTask,
    OutMin,
    OutMinNode,
    OutMinTask,
    OutAve,
    OutTot,
}

impl TresUsage {
    /// The kind for a sacct field name (`TRESUsageInMax` …); `None` for other fields.
    pub fn from_field(f: &str) -> Option<TresUsage> {
        use TresUsage::*;
        Some(match f {
            "TRESUsageInMax" => InMax,
            "TRESUsageInMaxNode" => InMaxNode,
            "TRESUsageInMaxTask" => InMaxTask,
            "TRESUsageInMin" => InMin,
            "TRESUsageInMinNode" => InMinNode,
            "TRESUsageInMinTask" => InMinTask,
            "TRESUsageInAve" => InAve,
            "TRESUsageInTot" => InTot,
            "TRESUsageOutMax" => OutMax,
            "TRESUsageOutMaxNode" => OutMaxNode,
            "TRESUsageOutMaxTask" => OutMaxTask,
            "TRESUsageOutMin" => OutMin,
            "TRESUsageOutMinNode" => OutMinNode,
            "TRESUsageOutMinTask" => OutMinTask,
            "TRESUsageOutAve" => OutAve,
            "TRESUsageOutTot" => OutTot,
            _ => return None,
        })
    }
}

/// The `TRESUsage…` string of a step, TRES in sacct's order (`cpu`, `energy`,
/// `fs/disk`, `gres/gpumem`, `gres/gpuutil`, `mem`, `pages`, `vmem`; `energy` and
/// `fs/disk` for the Out kinds), as in
/// `cpu=00:00:05,energy=0,fs/disk=0,mem=3372K,pages=0,vmem=78900K`. The two GPU TRES
/// (Slurm 23.02+) are there only when the step's GPU usage was measured
/// ([`StepUsage::gpu`]): `gres/gpumem` as a size (`38888M`), `gres/gpuutil` in percent. Task strings have
/// no `energy` (Slurm measures it per node). Minima are tracked for CPU only: the
/// other minima are given for a one-task step (where they equal the maxima) and left
/// out otherwise.
pub fn tres_usage(kind: TresUsage, u: &StepUsage) -> String {
    use TresUsage::*;
    let n = u64::from(u.ntasks.max(1));
    let one = u.ntasks <= 1;
    let bytes = |k: u64| convert_exact((k * 1024) as f64, 0);
    let raw = |b: u64| convert_exact(b as f64, 0);
    let mut parts: Vec<(&str, String)> = Vec::new();
    let mut push = |k: &'static str, v: String| parts.push((k, v));
    match kind {
        InMax => {
            push("cpu", fmt_hms(u.max_cpu_secs as u64));
            push("energy", "0".into());
            push("fs/disk", raw(u.max_disk_read));
            push("mem", bytes(u.max_rss_kib));
            push("pages", u.max_pages.to_string());
            push("vmem", bytes(u.max_vsize_kib));
        }
        InMin => {
            push("cpu", fmt_hms(u.min_cpu_secs as u64));
            push("energy", "0".into());
            if one {
                push("fs/disk", raw(u.max_disk_read));
                push("mem", bytes(u.max_rss_kib));
                push("pages", u.max_pages.to_string());
                push("vmem", bytes(u.max_vsize_kib));
            }
        }
        InMaxNode | InMinNode => {
            let min = kind == InMinNode;
            push(
                "cpu",
                if min {
                    u.min_cpu_node.clone()
                } else {
                    u.max_cpu_node.clone()
                },
            );
            push("energy", u.max_rss_node.clone());
            if !min || one {
                push("fs/disk", u.max_disk_read_node.clone());
                push("mem", u.max_rss_node.clone());
                push("pages", u.max_pages_node.clone());
                push("vmem", u.max_vsize_node.clone());
            }
        }
        InMaxTask | InMinTask => {
            let min = kind == InMinTask;
            push(
                "cpu",
                if min { u.min_cpu_task } else { u.max_cpu_task }.to_string(),
            );
            if !min || one {
                push("fs/disk", u.max_disk_read_task.to_string());
                push("mem", u.max_rss_task.to_string());
                push("pages", u.max_pages_task.to_string());
                push("vmem", u.max_vsize_task.to_string());
            }
        }
        InAve => {
            push("cpu", fmt_hms(u.ave_cpu_secs() as u64));
            push("energy", "0".into());
            push("fs/disk", raw(u.sum_disk_read / n));
            push("mem", bytes(u.ave_rss_kib()));
            push("pages", (u.sum_pages / n).to_string());
            push("vmem", bytes(u.ave_vsize_kib()));
        }
        InTot => {
            push("cpu", fmt_hms(u.sum_cpu_secs as u64));
            push("energy", "0".into());
            push("fs/disk", raw(u.sum_disk_read));
            push("mem", bytes(u.tot_rss_kib()));
            push("pages", u.sum_pages.to_string());
            push("vmem", bytes(u.sum_vsize_kib));
        }
        OutMax => {
            push("energy", "0".into());
            push("fs/disk", raw(u.max_disk_write));
        }
        OutMin => {
            push("energy", "0".into());
            if one {
                push("fs/disk", raw(u.max_disk_write));
            }
        }
        OutMaxNode | OutMinNode => {
            push("energy", u.max_disk_write_node.clone());
            if kind == OutMaxNode || one {
                push("fs/disk", u.max_disk_write_node.clone());
            }
        }
        OutMaxTask | OutMinTask => {
            if kind == OutMaxTask || one {
                push("fs/disk", u.max_disk_write_task.to_string());
            }
        }
        OutAve => {
            push("energy", "0".into());
            push("fs/disk", raw(u.sum_disk_write / n));
        }
        OutTot => {
            push("energy", "0".into());
            push("fs/disk", raw(u.sum_disk_write));
        }
    }
    // The GPU TRES, in name order (between fs/disk and mem): gres/gpumem, gres/gpuutil.
    let mib = |m: u64| convert_exact(m as f64, 2);
    let gpu = u.gpu.as_ref().and_then(|g| {
        Some(match kind {
            InMax => (mib(g.max_mem_mib), g.max_util_pct.to_string()),
            InMin if one => (mib(g.max_mem_mib), g.max_util_pct.to_string()),
            InAve => (mib(g.ave_mem_mib()), g.ave_util_pct().to_string()),
            InTot => (
                mib(g.sum_mean_mem_mib.round() as u64),
                (g.sum_mean_util_pct.round() as u64).to_string(),
            ),
            InMaxNode => (g.max_mem_node.clone(), g.max_util_node.clone()),
            InMinNode if one => (g.max_mem_node.clone(), g.max_util_node.clone()),
            InMaxTask => (g.max_mem_task.to_string(), g.max_util_task.to_string()),
            InMinTask if one => (g.max_mem_task.to_string(), g.max_util_task.to_string()),
            _ => return None,
        })
    });
    if let Some((m, t)) = gpu {
        let at = parts
            .iter()
            .position(|(k, _)| *k > "gres/gpuutil")
            .unwrap_or(parts.len());
        parts.insert(at, ("gres/gpuutil", t));
        parts.insert(at, ("gres/gpumem", m));
    }
    parts
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The value of a usage field (MaxRSS, AveVMSize, MinCPU, TotalCPU, TRESUsageInMax …)
/// for a step measured as `u`; `None` when `field` is not a usage field.
pub fn step_field(field: &str, u: &StepUsage) -> Option<String> {
    let n = u64::from(u.ntasks.max(1));
    if let Some(k) = TresUsage::from_field(field) {
        return Some(tres_usage(k, u));
    }
    Some(match field {
        "MaxVMSize" => kib(u.max_vsize_kib),
        "MaxVMSizeNode" => u.max_vsize_node.clone(),
        "MaxVMSizeTask" => u.max_vsize_task.to_string(),
        "AveVMSize" => kib(u.ave_vsize_kib()),
        "MaxRSS" => kib(u.max_rss_kib),
        "MaxRSSNode" => u.max_rss_node.clone(),
        "MaxRSSTask" => u.max_rss_task.to_string(),
        "AveRSS" => kib(u.ave_rss_kib()),
        "MaxPages" => u.max_pages.to_string(),
        "MaxPagesNode" => u.max_pages_node.clone(),
        "MaxPagesTask" => u.max_pages_task.to_string(),
        "AvePages" => (u.sum_pages / n).to_string(),
        "MinCPU" => fmt_hms(u.min_cpu_secs as u64),
        "MinCPUNode" => u.min_cpu_node.clone(),
        "MinCPUTask" => u.min_cpu_task.to_string(),
        "AveCPU" => fmt_hms(u.ave_cpu_secs() as u64),
        "MaxDiskRead" => disk(u.max_disk_read),
        "MaxDiskReadNode" => u.max_disk_read_node.clone(),
        "MaxDiskReadTask" => u.max_disk_read_task.to_string(),
        "AveDiskRead" => disk(u.sum_disk_read / n),
        "MaxDiskWrite" => disk(u.max_disk_write),
        "MaxDiskWriteNode" => u.max_disk_write_node.clone(),
        "MaxDiskWriteTask" => u.max_disk_write_task.to_string(),
        "AveDiskWrite" => disk(u.sum_disk_write / n),
        "ConsumedEnergy" | "ConsumedEnergyRaw" => "0".into(),
        "TotalCPU" => cpu(u.sum_cpu_secs),
        "UserCPU" => cpu(u.user_cpu_secs),
        "SystemCPU" => cpu(u.sys_cpu_secs),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_conversion_keeps_precision() {
        assert_eq!(kib(3372), "3372K");
        assert_eq!(kib(78900), "78900K");
        assert_eq!(kib(204800), "200M");
        assert_eq!(kib(1536), "1.50M");
        assert_eq!(kib(0), "0");
        assert_eq!(kib(1024 * 1024), "1G");
        assert_eq!(disk(0), "0");
        assert_eq!(disk(1), "0.00M");
        assert_eq!(disk(2 * 1024 * 1024), "2M");
        assert_eq!(cpu(5.25), "00:05.250");
        assert_eq!(cpu(3725.0), "01:02:05");
    }

    /// The batch step of the golden `sacct -j 125 -l` (one task, 3372K RSS, 78900K VM,
    /// one byte written).
    fn golden_step() -> StepUsage {
        let mut u = StepUsage::from_tasks(
            "node01",
            &[crate::model::step::TaskSample {
                rank: 0,
                rss_kib: 3372,
                vsize_kib: 78900,
                disk_write: 1,
                ..Default::default()
            }],
        );
        u.ntasks = 1;
        u
    }

    #[test]
    fn tres_strings_match_slurms_golden_row() {
        let u = golden_step();
        let t = |k| tres_usage(k, &u);
        let all = "cpu=00:00:00,energy=0,fs/disk=0,mem=3372K,pages=0,vmem=78900K";
        assert_eq!(t(TresUsage::InMax), all);
        assert_eq!(t(TresUsage::InAve), all);
        assert_eq!(t(TresUsage::InMin), all);
        assert_eq!(t(TresUsage::InTot), all);
        assert_eq!(
            t(TresUsage::InMaxNode),
            "cpu=node01,energy=node01,fs/disk=node01,mem=node01,pages=node01,vmem=node01"
        );
        assert_eq!(
            t(TresUsage::InMaxTask),
            "cpu=0,fs/disk=0,mem=0,pages=0,vmem=0"
        );
        assert_eq!(t(TresUsage::OutMax), "energy=0,fs/disk=1");
        assert_eq!(t(TresUsage::OutMaxNode), "energy=node01,fs/disk=node01");
        assert_eq!(t(TresUsage::OutMaxTask), "fs/disk=0");
        assert_eq!(t(TresUsage::OutTot), "energy=0,fs/disk=1");
        let f = |name| step_field(name, &u).unwrap();
        assert_eq!(
            [
                f("MaxVMSize"),
                f("AveVMSize"),
                f("MaxRSS"),
                f("AveRSS"),
                f("MaxDiskRead"),
                f("AveDiskWrite"),
                f("MinCPU"),
            ],
            [
                "78900K", "78900K", "3372K", "3372K", "0", "0.00M", "00:00:00"
            ]
        );
        assert!(step_field("JobName", &u).is_none());
    }

    #[test]
    fn gpu_tres_appear_only_when_measured_in_slurm_23_order() {
        let mut u = golden_step();
        // Not measured: no gres/gpu* at all (not zeros).
        assert!(!tres_usage(TresUsage::InMax, &u).contains("gres/"));
        u.gpu = Some(crate::model::step::GpuUsage {
            ntasks: 1,
            max_util_pct: 100,
            max_util_node: "node01".into(),
            max_util_task: 0,
            max_mem_mib: 38888,
            max_mem_node: "node01".into(),
            max_mem_task: 0,
            sum_mean_util_pct: 54.4,
            sum_mean_mem_mib: 20480.0,
        });
        assert_eq!(
            tres_usage(TresUsage::InMax, &u),
            "cpu=00:00:00,energy=0,fs/disk=0,gres/gpumem=38888M,gres/gpuutil=100,\
             mem=3372K,pages=0,vmem=78900K"
        );
        assert_eq!(
            tres_usage(TresUsage::InAve, &u),
            "cpu=00:00:00,energy=0,fs/disk=0,gres/gpumem=20G,gres/gpuutil=54,\
             mem=3372K,pages=0,vmem=78900K"
        );
        assert_eq!(
            tres_usage(TresUsage::InMaxTask, &u),
            "cpu=0,fs/disk=0,gres/gpumem=0,gres/gpuutil=0,mem=0,pages=0,vmem=0"
        );
        assert!(tres_usage(TresUsage::InMaxNode, &u).contains("gres/gpuutil=node01,mem="));
        // Nothing GPU in the Out strings.
        assert_eq!(tres_usage(TresUsage::OutMax, &u), "energy=0,fs/disk=1");
        // A measured idle GPU shows real zeros.
        u.gpu = Some(crate::model::step::GpuUsage {
            ntasks: 1,
            ..Default::default()
        });
        assert!(tres_usage(TresUsage::InMax, &u).contains("gres/gpumem=0,gres/gpuutil=0,"));
    }

    #[test]
    fn multi_task_minima_only_for_cpu() {
        let mut u = golden_step();
        u.merge(&StepUsage::from_tasks(
            "node02",
            &[crate::model::step::TaskSample {
                rank: 1,
                rss_kib: 1024,
                cpu_secs: 61.0,
                user_secs: 60.0,
                ..Default::default()
            }],
        ));
        assert_eq!(tres_usage(TresUsage::InMin, &u), "cpu=00:00:00,energy=0");
        assert_eq!(
            tres_usage(TresUsage::InMax, &u),
            "cpu=00:01:01,energy=0,fs/disk=0,mem=3372K,pages=0,vmem=78900K"
        );
        assert_eq!(
            tres_usage(TresUsage::InMaxTask, &u),
            "cpu=1,fs/disk=0,mem=0,pages=0,vmem=0"
        );
        assert_eq!(step_field("UserCPU", &u).unwrap(), "01:00.000");
        assert_eq!(step_field("SystemCPU", &u).unwrap(), "00:01.000");
        assert_eq!(step_field("AveRSS", &u).unwrap(), "2198K");
    }
}
