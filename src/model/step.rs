//! Job steps: what `srun` asks for ([`StepSpec`]), how its tasks are laid out over the
//! job's nodes ([`layout_tasks`]), and the usage a step's supervisor samples
//! ([`StepUsage`]). Cf. src/common/slurm_step_layout.c (task distribution) and
//! src/common/slurm_jobacct_gather.c (the per-step usage record).
//!
//! Pure: no I/O, no clock. Task ids are global ranks `0..ntasks`; a layout lists, per
//! node of the step, the ranks that run there in increasing order.

use super::job::{MemReq, TimeLimit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// How tasks are spread over the step's nodes (`-m/--distribution`, first level).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Distribution {
    /// Fill each node before the next (`block`, Slurm's default).
    #[default]
    Block,
    /// Round-robin over the nodes (`cyclic`).
    Cyclic,
    /// Blocks of `n` tasks round-robin over the nodes (`plane=n`).
    Plane(u32),
}

impl Distribution {
    /// Parses the first level of `-m` (`block`, `cyclic`, `plane=N`, with an optional
    /// `:…` second level that is accepted and ignored). `None` for anything else.
    pub fn parse(s: &str) -> Option<Distribution> {
        let first = s.split([':', ',']).next().unwrap_or("");
        let lower = first.to_ascii_lowercase();
        match lower.as_str() {
            "block" | "*" | "" => Some(Distribution::Block),
            "cyclic" => Some(Distribution::Cyclic),
            _ => {
                let n = lower.strip_prefix("plane=")?.parse::<u32>().ok()?;
                (n > 0).then_some(Distribution::Plane(n))
            }
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Block => f.write_str("block"),
            Distribution::Cyclic => f.write_str("cyclic"),
            Distribution::Plane(_) => f.write_str("plane"),
        }
    }
}

/// `--cpu-bind`: how each task is pinned to the CPUs the step holds on its node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CpuBindKind {
    /// No binding (sluice's default; Slurm's depends on TaskPlugin).
    #[default]
    None,
    /// Each task to the whole cores its CPUs belong to (every hardware thread).
    Cores,
    /// Each task to the hardware threads it was given.
    Threads,
    /// Each task to the sockets its CPUs are on (within the step's CPUs).
    Sockets,
    /// Each task to the NUMA locality domains its CPUs are on (within the step's CPUs).
    Ldoms,
    /// Local task `k` to CPU `k` (Slurm's `rank`).
    Rank,
    /// Local task `k` to CPU `list[k % len]` (`map_cpu:`).
    MapCpu,
    /// Local task `k` to the CPUs of mask `list[k % len]` (`mask_cpu:`).
    MaskCpu,
}

/// `--cpu-bind=[{quiet|verbose},]TYPE` (cf. srun(1) and Slurm's task/affinity).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuBind {
    pub kind: CpuBindKind,
    /// `verbose`: each task reports its mask on stderr.
    pub verbose: bool,
    /// The CPU ids (`map_cpu`) or CPU masks (`mask_cpu`, bit `i` = CPU `i`) given.
    #[serde(default)]
    pub list: Vec<u128>,
}

impl CpuBind {
    /// Parses `--cpu-bind`: `none`/`no`, `cores`, `threads`, `sockets`, `ldoms`,
    /// `rank`, `map_cpu:<ids>`, `mask_cpu:<masks>` (ids decimal or `0x` hex, masks
    /// hex with or without `0x`), `verbose`/`v`, `quiet`/`q`, comma-combined (a
    /// `map_cpu`/`mask_cpu` list is the rest of the argument). `None` for an unknown
    /// word, an empty or bad list, a mask of 0, or a CPU id past 127.
    pub fn parse(s: &str) -> Option<CpuBind> {
        let mut b = CpuBind::default();
        let mut rest = s;
        while !rest.is_empty() {
            let lower = rest.to_ascii_lowercase();
            for (prefix, kind) in [
                ("map_cpu:", CpuBindKind::MapCpu),
                ("mask_cpu:", CpuBindKind::MaskCpu),
            ] {
                if let Some(list) = lower.strip_prefix(prefix) {
                    b.kind = kind;
                    b.list = parse_cpu_list(list, kind == CpuBindKind::MaskCpu)?;
                    return Some(b);
                }
            }
            let (w, tail) = rest.split_once(',').unwrap_or((rest, ""));
            rest = tail;
            if w.is_empty() {
                continue;
            }
            match w.to_ascii_lowercase().as_str() {
                "none" | "no" => b.kind = CpuBindKind::None,
                "cores" | "core" => b.kind = CpuBindKind::Cores,
                "threads" | "thread" => b.kind = CpuBindKind::Threads,
                "sockets" | "socket" => b.kind = CpuBindKind::Sockets,
                "ldoms" | "ldom" => b.kind = CpuBindKind::Ldoms,
                "rank" => b.kind = CpuBindKind::Rank,
                "verbose" | "v" => b.verbose = true,
                "quiet" | "q" => b.verbose = false,
                _ => return None,
            }
        }
        Some(b)
    }

    /// The word task/affinity's verbose line shows for this binding: `MAP ` for
    /// `map_cpu`, `NONE` without binding, `MASK` otherwise (automatic bindings
    /// become masks before they are applied).
    pub fn verbose_type(&self) -> &'static str {
        match self.kind {
            CpuBindKind::None => "NONE",
            CpuBindKind::MapCpu => "MAP ",
            _ => "MASK",
        }
    }
}

/// A `map_cpu`/`mask_cpu` list: CPU ids (each below 128) or non-zero hex masks.
fn parse_cpu_list(list: &str, masks: bool) -> Option<Vec<u128>> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let hex = item.strip_prefix("0x");
        let v = match (masks, hex) {
            (true, h) => u128::from_str_radix(h.unwrap_or(item), 16)
                .ok()
                .filter(|m| *m != 0)?,
            (false, Some(h)) => u128::from_str_radix(h, 16).ok()?,
            (false, None) => item.parse::<u128>().ok()?,
        };
        if !masks && v >= 128 {
            return None;
        }
        out.push(v);
    }
    (!out.is_empty()).then_some(out)
}

/// Where the tasks' standard input comes from (`-i/--input`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StdinMode {
    /// srun's stdin goes to task 0 only (the default).
    #[default]
    Task0,
    /// srun's stdin is copied to every task (`--input=all`).
    All,
    /// Every task reads /dev/null (`--input=none`).
    None,
    /// srun's stdin goes to this task only (`--input=N`).
    Task(u32),
    /// Each task reads this file (a filename pattern, `%t` etc. expanded per task).
    File(String),
}

impl StdinMode {
    /// Whether task `rank` receives srun's standard input.
    pub fn reaches(&self, rank: u32) -> bool {
        match self {
            StdinMode::Task0 => rank == 0,
            StdinMode::All => true,
            StdinMode::Task(t) => *t == rank,
            StdinMode::None | StdinMode::File(_) => false,
        }
    }
}

/// The normalised step request that `srun` sends (inside an allocation, or after it got
/// one). Resolved on the client: the command per task, the environment after
/// `--export`, the working directory.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepSpec {
    /// Step name (`-J`, else the executable's base name).
    pub name: String,
    /// The command and its arguments (every task, unless `task_argv` is set).
    pub argv: Vec<String>,
    /// `--multi-prog`: the command of each rank, index = rank.
    #[serde(default)]
    pub task_argv: Vec<Vec<String>>,
    /// The tasks' base environment (srun's, after `--export`).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Absolute working directory of the tasks.
    pub work_dir: String,
    /// `-n`; `None` = one task per node of the step (or the allocation's SLURM_NTASKS,
    /// which the client passes here).
    #[serde(default)]
    pub ntasks: Option<u32>,
    /// `-N` minimum and maximum.
    #[serde(default)]
    pub nodes_min: Option<u32>,
    #[serde(default)]
    pub nodes_max: Option<u32>,
    /// `-c`.
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// `--ntasks-per-node`.
    #[serde(default)]
    pub ntasks_per_node: Option<u32>,
    /// `--mem`/`--mem-per-cpu` for the step.
    #[serde(default)]
    pub mem: Option<MemReq>,
    /// `-w` / `-x`: hostlist expressions within the allocation.
    #[serde(default)]
    pub nodelist: Option<String>,
    #[serde(default)]
    pub exclude: Option<String>,
    /// `--exact`: only the CPUs asked for (else all of the job's CPUs on each node).
    #[serde(default)]
    pub exact: bool,
    /// `--exclusive` for a step: like `--exact`, and no overlapping steps.
    #[serde(default)]
    pub exclusive: bool,
    /// `--overlap`: share CPUs with other steps; never waits for them.
    #[serde(default)]
    pub overlap: bool,
    #[serde(default)]
    pub distribution: Distribution,
    /// Whether `-m` was given (SLURM_DISTRIBUTION is then set from it).
    #[serde(default)]
    pub distribution_set: bool,
    #[serde(default)]
    pub cpu_bind: CpuBind,
    /// Whether `--cpu-bind` was given; when not, a step that uses one thread per core
    /// binds its tasks to threads (Slurm's `--hint`/`--threads-per-core` default).
    #[serde(default)]
    pub cpu_bind_set: bool,
    /// `--threads-per-core` (1 from `--hint=nomultithread` and the like) of the step;
    /// `None` takes the job's.
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    /// `-l/--label` (for SLURM_LABELIO; srun does the labelling).
    #[serde(default)]
    pub label: bool,
    /// `-u/--unbuffered` (SLURM_UNBUFFEREDIO).
    #[serde(default)]
    pub unbuffered: bool,
    /// `--pty`: task 0 runs on a pseudo-terminal.
    #[serde(default)]
    pub pty: bool,
    /// Initial terminal size for `--pty` (rows, columns).
    #[serde(default)]
    pub winsize: Option<(u16, u16)>,
    #[serde(default)]
    pub stdin: StdinMode,
    /// `-o`/`-e` patterns; `None` = stream to srun.
    #[serde(default)]
    pub stdout: Option<String>,
    #[serde(default)]
    pub stderr: Option<String>,
    #[serde(default)]
    pub open_append: bool,
    /// `-t` for the step (must fit in the job's limit).
    #[serde(default)]
    pub time_limit: Option<TimeLimit>,
    /// Where srun runs: host name, IPv4 address and pid (SLURM_LAUNCH_NODE_IPADDR,
    /// `SrunHost:Pid`).
    #[serde(default)]
    pub srun_host: String,
    #[serde(default)]
    pub srun_ip: String,
    #[serde(default)]
    pub srun_pid: u32,
    /// srun's umask (SLURM_UMASK, applied to the tasks).
    #[serde(default)]
    pub umask: u32,
    /// The step's GPU and other GRES request (`--gres`, `--gpus*`); all empty = the
    /// step uses the job's devices on its nodes without holding them.
    #[serde(default)]
    pub gpus: StepGpus,
    /// `--het-group` (or the position among srun's `:` groups): the component of a
    /// heterogeneous job this part of the step runs in, by offset; `None` = the
    /// component the request names.
    #[serde(default)]
    pub het_group: Option<u32>,
    /// `srun -Z/--no-allocate`: the tasks run on the `nodelist` nodes outside any job
    /// allocation (root and the controller's user only; cf. srun(1)).
    #[serde(default)]
    pub no_alloc: bool,
    /// `--mpi` (else SLURM_MPI_TYPE, else MpiDefault): the MPI bootstrap stepd serves.
    #[serde(default)]
    pub mpi: super::mpi::MpiType,
    /// pyxis's `--container-*`: the tasks run in this container.
    #[serde(default)]
    pub container: Option<super::container::ContainerSpec>,
}

/// What a step asks of the job's generic resources (cf. srun's `--gres`, `--gpus`,
/// `--gpus-per-node`, `--gpus-per-task`, `--gpus-per-socket`, `--gpu-bind`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepGpus {
    /// `--gres`: units per node of the step.
    #[serde(default)]
    pub gres: Vec<super::gres::GresReq>,
    /// `--gpus`: GPUs for the whole step.
    #[serde(default)]
    pub total: Option<super::gres::GresReq>,
    /// `--gpus-per-node`.
    #[serde(default)]
    pub per_node: Option<super::gres::GresReq>,
    /// `--gpus-per-task`.
    #[serde(default)]
    pub per_task: Option<super::gres::GresReq>,
    /// `--gpus-per-socket`: GPUs per socket of the node that the step's CPUs touch.
    #[serde(default)]
    pub per_socket: Option<super::gres::GresReq>,
    /// `--gpu-bind`; `None` = the default (per task with `--gpus-per-task`,
    /// `single:N` with `--ntasks-per-gpu=N`, else none).
    #[serde(default)]
    pub bind: Option<super::gpu_bind::GpuBind>,
    /// `--ntasks-per-gpu` (given to srun or inherited from the job); only the default
    /// binding depends on it here, the task and GPU counts are already resolved.
    #[serde(default)]
    pub ntasks_per_gpu: Option<u32>,
}

impl StepGpus {
    /// Whether the step asks for any generic resource itself.
    pub fn any(&self) -> bool {
        !self.gres.is_empty()
            || self.total.is_some()
            || self.per_node.is_some()
            || self.per_task.is_some()
            || self.per_socket.is_some()
    }

    /// The binding tasks get: `--gpu-bind` if given, else `per_task:N` with
    /// `--gpus-per-task=N` (as Slurm 21.08+), else `single:N` with
    /// `--ntasks-per-gpu=N` (as the srun man page says it implies), else none.
    pub fn effective_bind(&self) -> super::gpu_bind::GpuBind {
        use super::gpu_bind::{GpuBind, GpuBindKind};
        let per_task = |verbose| GpuBind {
            kind: GpuBindKind::PerTask(
                self.per_task
                    .as_ref()
                    .map_or(1, |t| t.count.clamp(1, u64::from(u32::MAX)) as u32),
            ),
            verbose,
        };
        let implied = |verbose| {
            if self.per_task.is_some() {
                Some(per_task(verbose))
            } else {
                self.ntasks_per_gpu.filter(|n| *n > 0).map(|n| GpuBind {
                    kind: GpuBindKind::Single(n),
                    verbose,
                })
            }
        };
        match &self.bind {
            // A bare `verbose` keeps the default binding.
            Some(b) if b.kind == GpuBindKind::None && b.verbose => {
                implied(true).unwrap_or_else(|| b.clone())
            }
            Some(b) => b.clone(),
            None => implied(false).unwrap_or_default(),
        }
    }
}

impl fmt::Debug for StepSpec {
    // Hand-written so that logs never carry the user's environment.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepSpec")
            .field("name", &self.name)
            .field("argv0", &self.argv.first())
            .field("ntasks", &self.ntasks)
            .field("nodes_min", &self.nodes_min)
            .field("cpus_per_task", &self.cpus_per_task)
            .field("exact", &self.exact)
            .field("overlap", &self.overlap)
            .field("pty", &self.pty)
            .finish_non_exhaustive()
    }
}

impl StepSpec {
    /// The command line of task `rank`.
    pub fn argv_of(&self, rank: u32) -> &[String] {
        self.task_argv
            .get(rank as usize)
            .filter(|a| !a.is_empty())
            .map(|a| a.as_slice())
            .unwrap_or(&self.argv)
    }
}

/// Where a step's tasks run: per node of the step, its name, the CPUs the step holds
/// there, and the global ranks of the tasks placed there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLayout {
    pub nodes: Vec<String>,
    pub cpus: Vec<u32>,
    pub tasks: Vec<Vec<u32>>,
    /// The job's GRES devices the step may use on each node (same order as `nodes`):
    /// those it holds when it asked for some, else all of the job's there.
    #[serde(default)]
    pub gres: Vec<Vec<super::job::GresAlloc>>,
    /// The job's CPU ids the step uses on each node (same order as `nodes`): a
    /// `--exact`/`--exclusive` step's own share (disjoint from other such steps'),
    /// else all of the job's there. Empty when the job's ids are not known.
    #[serde(default)]
    pub cpu_ids: Vec<Vec<u32>>,
}

impl StepLayout {
    /// Total number of tasks.
    pub fn ntasks(&self) -> u32 {
        self.tasks.iter().map(|t| t.len() as u32).sum()
    }

    /// Tasks per node as Slurm prints it (`2(x3),1`).
    pub fn tasks_per_node(&self) -> Vec<u32> {
        self.tasks.iter().map(|t| t.len() as u32).collect()
    }

    /// The node index and local index of `rank`.
    pub fn place_of(&self, rank: u32) -> Option<(usize, usize)> {
        self.tasks
            .iter()
            .enumerate()
            .find_map(|(n, t)| t.iter().position(|&r| r == rank).map(|l| (n, l)))
    }
}

/// Distributes `counts[i]` tasks on node `i` (their sum is the step's task count) and
/// numbers them by `dist`: block gives node 0 ranks `0..counts[0]`; cyclic deals ranks
/// one per node in turn (skipping full nodes); plane deals blocks of `n`.
pub fn layout_tasks(counts: &[u32], dist: Distribution) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = counts.iter().map(|_| Vec::new()).collect();
    let total: u32 = counts.iter().sum();
    let chunk = match dist {
        Distribution::Block => {
            let mut rank = 0;
            for (i, &c) in counts.iter().enumerate() {
                out[i].extend(rank..rank + c);
                rank += c;
            }
            return out;
        }
        Distribution::Cyclic => 1,
        Distribution::Plane(n) => n.max(1),
    };
    let mut rank = 0;
    while rank < total {
        let before = rank;
        for (i, &c) in counts.iter().enumerate() {
            let mut k = 0;
            while k < chunk && (out[i].len() as u32) < c && rank < total {
                out[i].push(rank);
                rank += 1;
                k += 1;
            }
        }
        if rank == before {
            break;
        }
    }
    out
}

/// Resource usage of a step's tasks as sampled from /proc (sizes in KiB, CPU in
/// seconds). Aggregated over nodes like sstat does: maxima with the node and task where
/// they were seen, averages per task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepUsage {
    pub ntasks: u32,
    pub max_rss_kib: u64,
    pub max_rss_node: String,
    pub max_rss_task: u32,
    /// Sum over tasks of their current RSS (divide by `ntasks` for AveRSS).
    pub sum_rss_kib: u64,
    /// The highest `sum_rss_kib` seen over the step's life, KiB (TRESUsageInTot's
    /// `mem`, which seff reports; Slurm sums each task's own peak, which equals this
    /// for one task and is close to it for tasks that peak together).
    #[serde(default)]
    pub peak_sum_rss_kib: u64,
    pub max_vsize_kib: u64,
    pub max_vsize_node: String,
    pub max_vsize_task: u32,
    pub sum_vsize_kib: u64,
    /// Major page faults.
    pub max_pages: u64,
    pub max_pages_node: String,
    pub max_pages_task: u32,
    pub sum_pages: u64,
    pub min_cpu_secs: f64,
    pub min_cpu_node: String,
    pub min_cpu_task: u32,
    /// The busiest task's CPU seconds (TRESUsageInMax's `cpu`).
    #[serde(default)]
    pub max_cpu_secs: f64,
    #[serde(default)]
    pub max_cpu_node: String,
    #[serde(default)]
    pub max_cpu_task: u32,
    /// User + system CPU seconds of every task (TotalCPU).
    pub sum_cpu_secs: f64,
    /// The user-mode and kernel-mode parts of `sum_cpu_secs` (UserCPU, SystemCPU).
    #[serde(default)]
    pub user_cpu_secs: f64,
    #[serde(default)]
    pub sys_cpu_secs: f64,
    pub max_disk_read: u64,
    pub max_disk_read_node: String,
    pub max_disk_read_task: u32,
    pub sum_disk_read: u64,
    pub max_disk_write: u64,
    pub max_disk_write_node: String,
    pub max_disk_write_task: u32,
    pub sum_disk_write: u64,
    /// Pids of the tasks' processes at the last sample.
    #[serde(default)]
    pub pids: Vec<u32>,
    /// Usage of the tasks' GPUs (the `gres/gpuutil` and `gres/gpumem` TRES); `None` when
    /// it was not measured (no GPU, or no NVML to ask), so that those TRES are left out
    /// rather than shown as zeros.
    #[serde(default)]
    pub gpu: Option<GpuUsage>,
}

/// GPU utilization and memory of a step's tasks, measured on each task's GPUs over the
/// step's life (cf. Slurm 23.02's gpu/nvml `gpu_p_usage_read`, which feeds the
/// `gres/gpuutil` and `gres/gpumem` TRES of jobacct_gather). A task's reading is the sum
/// over its GPUs (a GPU seen by several tasks is shared evenly among them), so
/// utilization may exceed 100 for a task with several GPUs, as in Slurm.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuUsage {
    /// Tasks measured.
    pub ntasks: u32,
    /// The highest utilization one task reached, percent, with its node and task.
    pub max_util_pct: u64,
    pub max_util_node: String,
    pub max_util_task: u32,
    /// The most GPU memory one task used, MiB, with its node and task.
    pub max_mem_mib: u64,
    pub max_mem_node: String,
    pub max_mem_task: u32,
    /// Sum over tasks of each task's mean utilization over the samples, percent
    /// (divide by `ntasks` for TRESUsageInAve).
    pub sum_mean_util_pct: f64,
    /// Sum over tasks of each task's mean GPU memory over the samples, MiB.
    pub sum_mean_mem_mib: f64,
}

impl GpuUsage {
    /// Combines the GPU usage of another node of the same step.
    pub fn merge(&mut self, o: &GpuUsage) {
        if o.max_util_pct > self.max_util_pct || self.ntasks == 0 {
            self.max_util_pct = o.max_util_pct;
            self.max_util_node = o.max_util_node.clone();
            self.max_util_task = o.max_util_task;
        }
        if o.max_mem_mib > self.max_mem_mib || self.ntasks == 0 {
            self.max_mem_mib = o.max_mem_mib;
            self.max_mem_node = o.max_mem_node.clone();
            self.max_mem_task = o.max_mem_task;
        }
        self.ntasks += o.ntasks;
        self.sum_mean_util_pct += o.sum_mean_util_pct;
        self.sum_mean_mem_mib += o.sum_mean_mem_mib;
    }

    /// Mean utilization per task, percent, rounded.
    pub fn ave_util_pct(&self) -> u64 {
        (self.sum_mean_util_pct / f64::from(self.ntasks.max(1))).round() as u64
    }

    /// Mean GPU memory per task, MiB, rounded.
    pub fn ave_mem_mib(&self) -> u64 {
        (self.sum_mean_mem_mib / f64::from(self.ntasks.max(1))).round() as u64
    }
}

/// One task's sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TaskSample {
    pub rank: u32,
    pub rss_kib: u64,
    pub vsize_kib: u64,
    pub pages: u64,
    /// User + system CPU seconds.
    pub cpu_secs: f64,
    /// The user-mode part of `cpu_secs`.
    pub user_secs: f64,
    pub disk_read: u64,
    pub disk_write: u64,
}

impl StepUsage {
    /// Aggregates one node's per-task samples.
    pub fn from_tasks(node: &str, tasks: &[TaskSample]) -> StepUsage {
        let mut u = StepUsage {
            min_cpu_secs: f64::MAX,
            ..StepUsage::default()
        };
        for t in tasks {
            u.ntasks += 1;
            if t.rss_kib >= u.max_rss_kib {
                (u.max_rss_kib, u.max_rss_task) = (t.rss_kib, t.rank);
            }
            if t.vsize_kib >= u.max_vsize_kib {
                (u.max_vsize_kib, u.max_vsize_task) = (t.vsize_kib, t.rank);
            }
            if t.pages >= u.max_pages {
                (u.max_pages, u.max_pages_task) = (t.pages, t.rank);
            }
            if t.cpu_secs < u.min_cpu_secs {
                (u.min_cpu_secs, u.min_cpu_task) = (t.cpu_secs, t.rank);
            }
            if t.cpu_secs >= u.max_cpu_secs {
                (u.max_cpu_secs, u.max_cpu_task) = (t.cpu_secs, t.rank);
            }
            if t.disk_read >= u.max_disk_read {
                (u.max_disk_read, u.max_disk_read_task) = (t.disk_read, t.rank);
            }
            if t.disk_write >= u.max_disk_write {
                (u.max_disk_write, u.max_disk_write_task) = (t.disk_write, t.rank);
            }
            u.sum_rss_kib += t.rss_kib;
            u.peak_sum_rss_kib += t.rss_kib;
            u.sum_vsize_kib += t.vsize_kib;
            u.sum_pages += t.pages;
            u.sum_cpu_secs += t.cpu_secs;
            u.user_cpu_secs += t.user_secs;
            u.sys_cpu_secs += (t.cpu_secs - t.user_secs).max(0.0);
            u.sum_disk_read += t.disk_read;
            u.sum_disk_write += t.disk_write;
        }
        if u.ntasks == 0 {
            u.min_cpu_secs = 0.0;
        }
        for s in [
            &mut u.max_rss_node,
            &mut u.max_vsize_node,
            &mut u.max_pages_node,
            &mut u.min_cpu_node,
            &mut u.max_cpu_node,
            &mut u.max_disk_read_node,
            &mut u.max_disk_write_node,
        ] {
            *s = node.to_string();
        }
        u
    }

    /// Combines the usage of two nodes (or keeps the larger maxima of two samples of
    /// the same node when `same_node`: sums are then replaced, not added).
    pub fn merge(&mut self, o: &StepUsage) {
        if o.ntasks == 0 {
            return;
        }
        if self.ntasks == 0 {
            *self = o.clone();
            return;
        }
        macro_rules! max_of {
            ($v:ident, $n:ident, $t:ident) => {
                if o.$v > self.$v {
                    self.$v = o.$v;
                    self.$n = o.$n.clone();
                    self.$t = o.$t;
                }
            };
        }
        max_of!(max_rss_kib, max_rss_node, max_rss_task);
        max_of!(max_vsize_kib, max_vsize_node, max_vsize_task);
        max_of!(max_pages, max_pages_node, max_pages_task);
        max_of!(max_disk_read, max_disk_read_node, max_disk_read_task);
        max_of!(max_disk_write, max_disk_write_node, max_disk_write_task);
        max_of!(max_cpu_secs, max_cpu_node, max_cpu_task);
        if o.min_cpu_secs < self.min_cpu_secs {
            self.min_cpu_secs = o.min_cpu_secs;
            self.min_cpu_node = o.min_cpu_node.clone();
            self.min_cpu_task = o.min_cpu_task;
        }
        self.ntasks += o.ntasks;
        self.sum_rss_kib += o.sum_rss_kib;
        self.peak_sum_rss_kib += o.peak_sum_rss_kib;
        self.sum_vsize_kib += o.sum_vsize_kib;
        self.sum_pages += o.sum_pages;
        self.sum_cpu_secs += o.sum_cpu_secs;
        self.user_cpu_secs += o.user_cpu_secs;
        self.sys_cpu_secs += o.sys_cpu_secs;
        self.sum_disk_read += o.sum_disk_read;
        self.sum_disk_write += o.sum_disk_write;
        self.pids.extend(o.pids.iter().copied());
        match (&mut self.gpu, &o.gpu) {
            (Some(a), Some(b)) => a.merge(b),
            (None, Some(b)) => self.gpu = Some(b.clone()),
            _ => {}
        }
    }

    /// Keeps the peaks of an earlier sample of the same tasks (the maxima are "max
    /// over the step's life"; sums and CPU are the latest sample's).
    pub fn keep_peaks(&mut self, earlier: &StepUsage) {
        for (now, then, node, then_node, task, then_task) in [
            (
                &mut self.max_rss_kib,
                earlier.max_rss_kib,
                &mut self.max_rss_node,
                &earlier.max_rss_node,
                &mut self.max_rss_task,
                earlier.max_rss_task,
            ),
            (
                &mut self.max_vsize_kib,
                earlier.max_vsize_kib,
                &mut self.max_vsize_node,
                &earlier.max_vsize_node,
                &mut self.max_vsize_task,
                earlier.max_vsize_task,
            ),
        ] {
            if then > *now {
                *now = then;
                *node = then_node.clone();
                *task = then_task;
            }
        }
        self.peak_sum_rss_kib = self.peak_sum_rss_kib.max(earlier.peak_sum_rss_kib);
        if earlier.sum_cpu_secs > self.sum_cpu_secs {
            self.sum_cpu_secs = earlier.sum_cpu_secs;
            self.user_cpu_secs = earlier.user_cpu_secs;
            self.sys_cpu_secs = earlier.sys_cpu_secs;
        }
        if earlier.max_cpu_secs > self.max_cpu_secs {
            self.max_cpu_secs = earlier.max_cpu_secs;
            self.max_cpu_node = earlier.max_cpu_node.clone();
            self.max_cpu_task = earlier.max_cpu_task;
        }
    }

    /// Raises the CPU totals to a measurement of the same tasks taken another way
    /// (`getrusage` of reaped children, a cgroup's counters), which also counts
    /// processes that had already exited when /proc was sampled: `user` and `sys`
    /// seconds. Only a larger total replaces the sampled one.
    pub fn raise_cpu(&mut self, user: f64, sys: f64) {
        if user + sys > self.sum_cpu_secs {
            self.sum_cpu_secs = user + sys;
            self.user_cpu_secs = user;
            self.sys_cpu_secs = sys;
        }
        if self.ntasks <= 1 && self.sum_cpu_secs > self.max_cpu_secs {
            self.max_cpu_secs = self.sum_cpu_secs;
            self.max_cpu_task = 0;
        }
        if self.ntasks <= 1 && self.sum_cpu_secs > self.min_cpu_secs {
            self.min_cpu_secs = self.sum_cpu_secs;
            self.min_cpu_task = 0;
        }
    }

    /// Raises the peak RSS to `kib` measured on `node` (a cgroup's memory peak, or
    /// `getrusage`'s `ru_maxrss` of the largest child), which sees peaks between
    /// samples.
    pub fn raise_rss(&mut self, node: &str, kib: u64) {
        if kib > self.max_rss_kib {
            self.max_rss_kib = kib;
            self.max_rss_node = node.to_string();
        }
        if self.ntasks <= 1 {
            self.peak_sum_rss_kib = self.peak_sum_rss_kib.max(kib);
        }
    }

    /// TRESUsageInTot's memory: the tasks' summed peak RSS, KiB (at least the largest
    /// single peak).
    pub fn tot_rss_kib(&self) -> u64 {
        self.peak_sum_rss_kib.max(self.max_rss_kib)
    }

    /// Names `node` wherever a maximum or minimum has no node yet (a step whose tasks
    /// ended before the first sample, measured only at the end).
    pub fn fill_empty_nodes(&mut self, node: &str) {
        for s in [
            &mut self.max_rss_node,
            &mut self.max_vsize_node,
            &mut self.max_pages_node,
            &mut self.min_cpu_node,
            &mut self.max_cpu_node,
            &mut self.max_disk_read_node,
            &mut self.max_disk_write_node,
        ] {
            if s.is_empty() {
                *s = node.to_string();
            }
        }
    }

    /// Average over tasks of their peak RSS, KiB (Slurm's AveRSS: for one task, its
    /// MaxRSS).
    pub fn ave_rss_kib(&self) -> u64 {
        self.tot_rss_kib() / u64::from(self.ntasks.max(1))
    }

    /// Average virtual size per task, KiB.
    pub fn ave_vsize_kib(&self) -> u64 {
        self.sum_vsize_kib / u64::from(self.ntasks.max(1))
    }

    /// Average CPU seconds per task.
    pub fn ave_cpu_secs(&self) -> f64 {
        self.sum_cpu_secs / f64::from(self.ntasks.max(1))
    }
}

/// How many of `ntasks` tasks land on each node under block distribution: nodes are
/// filled round by round, each up to the tasks its CPUs hold (`cpus / cpus_per_task`,
/// capped by `--ntasks-per-node`); tasks beyond every node's capacity are spread in
/// further rounds, as Slurm's step layout over-subscribes.
pub fn tasks_per_node(
    ntasks: u32,
    cpus: &[u32],
    cpus_per_task: u32,
    ntasks_per_node: Option<u32>,
) -> Vec<u32> {
    let mut out = vec![0u32; cpus.len()];
    if cpus.is_empty() {
        return out;
    }
    let cpt = cpus_per_task.max(1);
    let cap: Vec<u32> = cpus
        .iter()
        .map(|&c| {
            let by_cpu = c / cpt;
            ntasks_per_node.map_or(by_cpu, |n| by_cpu.min(n))
        })
        .collect();
    let mut left = ntasks;
    // Rounds within capacity.
    let max_cap = cap.iter().copied().max().unwrap_or(0);
    for round in 0..max_cap {
        for (i, c) in cap.iter().enumerate() {
            if left == 0 {
                return out;
            }
            if round < *c {
                out[i] += 1;
                left -= 1;
            }
        }
    }
    // Over-subscription: one more task per node per round.
    let n = cpus.len() as u32;
    let each = left / n;
    let extra = (left % n) as usize;
    for (i, o) in out.iter_mut().enumerate() {
        *o += each + u32::from(i < extra);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_cyclic_plane_layouts() {
        assert_eq!(
            layout_tasks(&[2, 2], Distribution::Block),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert_eq!(
            layout_tasks(&[2, 2], Distribution::Cyclic),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert_eq!(
            layout_tasks(&[3, 1], Distribution::Cyclic),
            vec![vec![0, 2, 3], vec![1]]
        );
        assert_eq!(
            layout_tasks(&[4, 2], Distribution::Plane(2)),
            vec![vec![0, 1, 4, 5], vec![2, 3]]
        );
        assert_eq!(
            layout_tasks(&[], Distribution::Cyclic),
            Vec::<Vec<u32>>::new()
        );
    }

    #[test]
    fn distribution_and_bind_parse() {
        assert_eq!(
            Distribution::parse("cyclic:block"),
            Some(Distribution::Cyclic)
        );
        assert_eq!(Distribution::parse("Block"), Some(Distribution::Block));
        assert_eq!(Distribution::parse("plane=4"), Some(Distribution::Plane(4)));
        assert_eq!(Distribution::parse("bogus"), None);
        assert_eq!(
            CpuBind::parse("verbose,cores"),
            Some(CpuBind {
                kind: CpuBindKind::Cores,
                verbose: true,
                list: Vec::new(),
            })
        );
        assert_eq!(CpuBind::parse("sockets-ish"), None);
    }

    #[test]
    fn usage_aggregates_and_merges() {
        let a = StepUsage::from_tasks(
            "n1",
            &[
                TaskSample {
                    rank: 0,
                    rss_kib: 100,
                    cpu_secs: 2.0,
                    ..Default::default()
                },
                TaskSample {
                    rank: 1,
                    rss_kib: 300,
                    cpu_secs: 1.0,
                    ..Default::default()
                },
            ],
        );
        assert_eq!(
            (a.max_rss_kib, a.max_rss_task, a.ave_rss_kib()),
            (300, 1, 200)
        );
        assert_eq!((a.min_cpu_secs, a.min_cpu_task), (1.0, 1));
        let mut b = StepUsage::from_tasks(
            "n2",
            &[TaskSample {
                rank: 2,
                rss_kib: 500,
                cpu_secs: 0.5,
                ..Default::default()
            }],
        );
        b.merge(&a);
        assert_eq!(
            (b.ntasks, b.max_rss_kib, b.max_rss_node.as_str()),
            (3, 500, "n2")
        );
        assert_eq!(b.min_cpu_node, "n2");
        let mut later = StepUsage::from_tasks("n1", &[TaskSample::default()]);
        later.keep_peaks(&a);
        assert_eq!(later.max_rss_kib, 300);
    }

    #[test]
    fn stdin_targets() {
        assert!(StdinMode::Task0.reaches(0) && !StdinMode::Task0.reaches(1));
        assert!(StdinMode::All.reaches(5));
        assert!(StdinMode::Task(2).reaches(2) && !StdinMode::Task(2).reaches(0));
        assert!(!StdinMode::None.reaches(0));
    }
}
