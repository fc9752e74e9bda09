//! GPU usage sampling for sstat and sacct's `gres/gpuutil` and `gres/gpumem` TRES (cf.
//! Slurm 23.02's gpu/nvml `gpu_p_usage_read`, called by jobacct_gather at each poll).
//! stepd reads the step's GPUs at the cadence of its /proc sampler and attributes each
//! GPU's utilization and used memory to the tasks bound to it ([`GpuTracker`]).
//!
//! Readings come from a [`GpuSampler`]; on a node, [`ProbeSampler`] over the node's
//! [`crate::gpuprobe::GpuProbe`]: NVML, or the file the `SLUICE_GPU_PROBE_FILE` test
//! hook names (read from stepd's own environment, the agent's, never from a job's), which
//! lets the integration tests exercise the path from stepd to sacct on machines without
//! GPUs. Without NVML and without the hook, nothing is measured and the GPU TRES are
//! absent, not zero.
//!
//! Device-level readings are what NVML gives for a whole GPU; jobs own their GPUs, so
//! they are the job's. A MIG instance has no utilization counter in NVML, so a step on
//! MIG instances reports no GPU usage.

use crate::gpuprobe::GpuProbe;
use crate::model::gres::GresDevice;
use crate::model::step::GpuUsage;

/// One GPU's reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuReading {
    /// The device's index among the node's GPUs (GRES index).
    pub index: u32,
    /// Utilization over NVML's last sample period, percent.
    pub util_pct: u32,
    /// Memory in use, MiB.
    pub mem_used_mib: u64,
}

/// A source of GPU readings.
pub trait GpuSampler {
    /// Readings of `devices` (the step's GPUs on this node); `None` when they cannot all
    /// be measured (nothing is then reported for this sample).
    fn read(&mut self, devices: &[&GresDevice]) -> Option<Vec<GpuReading>>;
}

/// Readings from the node's [`GpuProbe`] (NVML, or the test hook's file).
pub struct ProbeSampler(pub Box<dyn GpuProbe>);

impl GpuSampler for ProbeSampler {
    fn read(&mut self, devices: &[&GresDevice]) -> Option<Vec<GpuReading>> {
        let owned: Vec<GresDevice> = devices.iter().map(|d| (*d).clone()).collect();
        let all = self.0.sample(&owned).ok()?;
        devices
            .iter()
            .map(|d| {
                let s = all.iter().find(|s| s.index == d.index)?;
                Some(GpuReading {
                    index: d.index,
                    util_pct: s.util,
                    mem_used_mib: s.mem_used_mib,
                })
            })
            .collect()
    }
}

/// The sampler for a step with GPUs: over the probe of [`crate::gpuprobe::probe`]
/// (the test hook's file when `SLUICE_GPU_PROBE_FILE` is set, else NVML when it
/// loads), else none.
pub fn sampler() -> Option<Box<dyn GpuSampler>> {
    crate::gpuprobe::probe().map(|p| Box::new(ProbeSampler(p)) as Box<dyn GpuSampler>)
}

/// One task's GPU usage so far.
#[derive(Debug, Clone, Default, PartialEq)]
struct TaskTrack {
    rank: u32,
    gpus: Vec<u32>,
    samples: u32,
    peak_util: f64,
    peak_mem: f64,
    sum_util: f64,
    sum_mem: f64,
}

/// GPU usage of the tasks of a step on one node over its life.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuTracker {
    tasks: Vec<TaskTrack>,
}

impl GpuTracker {
    /// Tracks `tasks` as (rank, GPU indices the task is bound to); tasks without GPUs
    /// are not measured.
    pub fn new(tasks: Vec<(u32, Vec<u32>)>) -> GpuTracker {
        GpuTracker {
            tasks: tasks
                .into_iter()
                .filter(|(_, g)| !g.is_empty())
                .map(|(rank, gpus)| TaskTrack {
                    rank,
                    gpus,
                    ..TaskTrack::default()
                })
                .collect(),
        }
    }

    /// The GPU indices any task is bound to, sorted.
    pub fn gpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.tasks.iter().flat_map(|t| t.gpus.clone()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Adds one sample: each GPU's reading is split evenly among the tasks bound to it.
    /// A sample that lacks one of a task's GPUs is not counted for that task.
    pub fn observe(&mut self, readings: &[GpuReading]) {
        let sharers = |g: u32, tasks: &[TaskTrack]| {
            tasks.iter().filter(|t| t.gpus.contains(&g)).count().max(1) as f64
        };
        let shares: Vec<Option<(f64, f64)>> = self
            .tasks
            .iter()
            .map(|t| {
                t.gpus.iter().try_fold((0.0, 0.0), |(u, m), g| {
                    let r = readings.iter().find(|r| r.index == *g)?;
                    let k = sharers(*g, &self.tasks);
                    Some((u + f64::from(r.util_pct) / k, m + r.mem_used_mib as f64 / k))
                })
            })
            .collect();
        for (t, s) in self.tasks.iter_mut().zip(shares) {
            let Some((u, m)) = s else { continue };
            t.samples += 1;
            t.peak_util = t.peak_util.max(u);
            t.peak_mem = t.peak_mem.max(m);
            t.sum_util += u;
            t.sum_mem += m;
        }
    }

    /// The usage so far as seen on `node`; `None` before any task was measured.
    pub fn usage(&self, node: &str) -> Option<GpuUsage> {
        let measured: Vec<&TaskTrack> = self.tasks.iter().filter(|t| t.samples > 0).collect();
        if measured.is_empty() {
            return None;
        }
        let mut u = GpuUsage {
            max_util_node: node.to_string(),
            max_mem_node: node.to_string(),
            ..GpuUsage::default()
        };
        for (i, t) in measured.iter().enumerate() {
            let (pu, pm) = (t.peak_util.round() as u64, t.peak_mem.round() as u64);
            if i == 0 || pu > u.max_util_pct {
                (u.max_util_pct, u.max_util_task) = (pu, t.rank);
            }
            if i == 0 || pm > u.max_mem_mib {
                (u.max_mem_mib, u.max_mem_task) = (pm, t.rank);
            }
            u.ntasks += 1;
            u.sum_mean_util_pct += t.sum_util / f64::from(t.samples);
            u.sum_mean_mem_mib += t.sum_mem / f64::from(t.samples);
        }
        Some(u)
    }
}

/// A step's GPU measuring on one node: the tracker and the sampler feeding it.
pub struct GpuMeter {
    tracker: GpuTracker,
    devices: Vec<GresDevice>,
    sampler: Box<dyn GpuSampler>,
}

impl GpuMeter {
    /// A meter for `tasks` (rank, bound GPU indices) over the node's devices `node`
    /// with readings from `sampler`; `None` when no task has a GPU.
    pub fn new(
        tasks: Vec<(u32, Vec<u32>)>,
        node: &[GresDevice],
        sampler: Box<dyn GpuSampler>,
    ) -> Option<GpuMeter> {
        let tracker = GpuTracker::new(tasks);
        let want = tracker.gpus();
        if want.is_empty() {
            return None;
        }
        let devices = node
            .iter()
            .filter(|d| d.name == "gpu" && want.contains(&d.index))
            .cloned()
            .collect();
        Some(GpuMeter {
            tracker,
            devices,
            sampler,
        })
    }

    /// Takes one sample and returns the usage so far on `node` (`None` while nothing
    /// could be measured).
    pub fn sample(&mut self, node: &str) -> Option<GpuUsage> {
        let devs: Vec<&GresDevice> = self.devices.iter().collect();
        if let Some(r) = self.sampler.read(&devs) {
            self.tracker.observe(&r);
        }
        self.tracker.usage(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays fixed rounds of readings, then none.
    struct Replay(Vec<Option<Vec<GpuReading>>>);

    impl GpuSampler for Replay {
        fn read(&mut self, _: &[&GresDevice]) -> Option<Vec<GpuReading>> {
            if self.0.is_empty() {
                None
            } else {
                self.0.remove(0)
            }
        }
    }

    fn r(index: u32, util_pct: u32, mem_used_mib: u64) -> GpuReading {
        GpuReading {
            index,
            util_pct,
            mem_used_mib,
        }
    }

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
    fn one_task_per_gpu_gets_its_own_gpu_readings() {
        let s = Replay(vec![
            Some(vec![r(0, 20, 1000), r(1, 90, 3000)]),
            Some(vec![r(0, 60, 2000), r(1, 70, 3000)]),
        ]);
        let mut m = GpuMeter::new(vec![(0, vec![0]), (1, vec![1])], &gpus(2), Box::new(s)).unwrap();
        m.sample("n1");
        let u = m.sample("n1").unwrap();
        assert_eq!((u.ntasks, u.max_util_pct, u.max_util_task), (2, 90, 1));
        assert_eq!((u.max_mem_mib, u.max_mem_task), (3000, 1));
        // Means: task 0 40 % / 1500 MiB, task 1 80 % / 3000 MiB.
        assert_eq!(u.ave_util_pct(), 60);
        assert_eq!(u.ave_mem_mib(), 2250);
        assert_eq!(u.max_util_node, "n1");
        // A round that cannot be read changes nothing.
        let again = m.sample("n1").unwrap();
        assert_eq!(again, u);
    }

    #[test]
    fn a_shared_gpu_is_split_and_several_gpus_add_up() {
        let mut t = GpuTracker::new(vec![(0, vec![0, 1]), (1, vec![1]), (2, vec![])]);
        assert_eq!(t.gpus(), vec![0, 1]);
        t.observe(&[r(0, 50, 100), r(1, 80, 400)]);
        let u = t.usage("n").unwrap();
        // Task 0: 50 + 80/2 = 90 %, 100 + 200 MiB; task 1: 40 %, 200 MiB; task 2 none.
        assert_eq!((u.ntasks, u.max_util_pct, u.max_util_task), (2, 90, 0));
        assert_eq!((u.max_mem_mib, u.max_mem_task), (300, 0));
        assert_eq!(u.sum_mean_util_pct, 130.0);
        // A reading without GPU 1 counts for nobody bound to it.
        t.observe(&[r(0, 100, 100)]);
        assert_eq!(t.usage("n").unwrap(), u);
    }

    #[test]
    fn nothing_measured_means_no_usage_at_all() {
        assert!(GpuMeter::new(vec![(0, vec![])], &gpus(1), Box::new(Replay(vec![]))).is_none());
        let mut m =
            GpuMeter::new(vec![(0, vec![0])], &gpus(1), Box::new(Replay(vec![None]))).unwrap();
        assert_eq!(m.sample("n"), None);
        assert_eq!(GpuTracker::new(vec![(0, vec![0])]).usage("n"), None);
    }

    #[test]
    fn probe_samples_become_readings() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("gpus.toml");
        std::fs::write(&p, "[[gpu]]\nindex = 1\nutil = 55\nmem_used_mib = 4096\n").unwrap();
        let mut f = ProbeSampler(Box::new(crate::gpuprobe::FakeProbe { path: p.clone() }));
        let d = gpus(2);
        assert_eq!(f.read(&[&d[1]]), Some(vec![r(1, 55, 4096)]));
        assert_eq!(
            f.read(&[&d[0], &d[1]]),
            Some(vec![r(0, 0, 0), r(1, 55, 4096)]),
            "an unlisted GPU is idle"
        );
        std::fs::remove_file(&p).unwrap();
        assert_eq!(f.read(&[&d[1]]), None);
    }
}
