//! Jobs and steps: the normalised request (`JobSpec`), the controller's record (`Job`),
//! states, pending reasons and exit codes, each rendering to Slurm's exact text in one
//! place (cf. src/common/slurm_protocol_defs.c `job_state_string`, job_state_reason.c).
//!
//! Invariants: `Job::state` is the base state; `Job::completing` is the COMPLETING flag,
//! which wins over the base state when shown (`CG`). A job in a terminal base state has
//! `end_time` set.

use super::array::ArrayInfo;
use super::depend::Dependency;
use super::gres::{GresReq, LicenseReq};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A job time limit. Slurm keeps limits in whole minutes (`--time=1:30` rounds up to 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeLimit {
    /// A limit in minutes.
    Minutes(u32),
    /// No limit (`UNLIMITED`, `infinite`, `--time=0`).
    Unlimited,
    /// A limit in seconds: only the simulator makes these (trace estimates are in
    /// seconds); front-ends and the controller always use minutes.
    Seconds(u64),
}

impl TimeLimit {
    /// The limit in seconds, or `None` when unlimited.
    pub fn secs(self) -> Option<u64> {
        match self {
            TimeLimit::Minutes(m) => Some(u64::from(m) * 60),
            TimeLimit::Seconds(s) => Some(s),
            TimeLimit::Unlimited => None,
        }
    }

    /// Text as scontrol's `TimeLimit=` and sacct's `Timelimit` print it:
    /// `UNLIMITED` or `[D-]HH:MM:SS`.
    pub fn to_hms(self) -> String {
        match self {
            TimeLimit::Minutes(m) => super::time::fmt_hms(u64::from(m) * 60),
            TimeLimit::Seconds(s) => super::time::fmt_hms(s),
            TimeLimit::Unlimited => "UNLIMITED".into(),
        }
    }

    /// Text as squeue `%l` and sinfo `%l` print it: `UNLIMITED` or `M:SS` / `H:MM:SS`.
    pub fn to_squeue(self) -> String {
        match self {
            TimeLimit::Minutes(m) => super::time::fmt_squeue_duration(u64::from(m) * 60),
            TimeLimit::Seconds(s) => super::time::fmt_squeue_duration(s),
            TimeLimit::Unlimited => "UNLIMITED".into(),
        }
    }
}

/// A job's environment. Shared copy-on-write, so that the controller can keep one copy
/// for the many jobs one shell submits with the same environment (see
/// `Cluster::submit`); reads go through `Deref`, writes copy first if shared. On the
/// wire it is the plain map.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Env(std::sync::Arc<BTreeMap<String, String>>);

impl Env {
    /// Whether two environments are the same allocation (interned).
    pub fn shares(&self, other: &Env) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Env {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Self::Target {
        std::sync::Arc::make_mut(&mut self.0)
    }
}

impl From<BTreeMap<String, String>> for Env {
    fn from(m: BTreeMap<String, String>) -> Env {
        Env(std::sync::Arc::new(m))
    }
}

impl<const N: usize> From<[(String, String); N]> for Env {
    fn from(a: [(String, String); N]) -> Env {
        Env::from(BTreeMap::from(a))
    }
}

impl FromIterator<(String, String)> for Env {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(it: I) -> Env {
        Env::from(it.into_iter().collect::<BTreeMap<_, _>>())
    }
}

impl PartialEq<BTreeMap<String, String>> for Env {
    fn eq(&self, other: &BTreeMap<String, String>) -> bool {
        *self.0 == *other
    }
}

impl fmt::Debug for Env {
    // Names only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// A memory request, in MiB (Slurm's "MB").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemReq {
    /// `--mem`: MiB per node (0 means all of the node's memory).
    PerNode(u64),
    /// `--mem-per-cpu`: MiB per allocated CPU.
    PerCpu(u64),
}

/// `--signal=[{R|B}:]SIG[@secs]`: which signal to send how many seconds before the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalSpec {
    /// Signal number.
    pub signal: i32,
    /// Seconds before the end of the time limit (Slurm's default is 60).
    pub secs_before: u32,
    /// `B:` — deliver to the batch shell only.
    pub batch_only: bool,
    /// `R:` — do not deliver to a job that is being requeued... (accepted, kept).
    pub reservation: bool,
}

/// Who holds a job: the user (`JobHeldUser`, `-H`, `scontrol uhold`) or an operator
/// (`JobHeldAdmin`, `scontrol hold` by root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldKind {
    User,
    Admin,
}

/// The normalised job request that `sbatch` (and later `srun`/`salloc`) sends to the
/// controller. Everything the client could resolve (script text, environment, working
/// directory, default name) is resolved here; partition and limits are resolved by the
/// controller.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Job name (`-J`); the client fills Slurm's default (script basename, `sbatch`, `wrap`).
    pub name: String,
    /// A random number sbatch draws for one submission and sends again when it retries
    /// after losing the controller's answer: the controller answers a submission whose
    /// (user, token) it has already made a job for with that job's id, so a retried
    /// submission never makes a second job. 0: none (srun, salloc, older clients).
    #[serde(default)]
    pub submit_token: u64,
    /// The batch script's full text, captured at submit time.
    pub script: String,
    /// Arguments after the script path, passed to the script.
    #[serde(default)]
    pub argv: Vec<String>,
    /// What scontrol shows as `Command=` (absolute script path; empty for stdin/--wrap).
    #[serde(default)]
    pub command: String,
    /// Absolute working directory (`-D`, default the submit directory).
    pub work_dir: String,
    /// The directory sbatch ran in.
    pub submit_dir: String,
    /// The host sbatch ran on.
    pub submit_host: String,
    /// `-o` pattern as given (unexpanded); `None` = `slurm-%j.out` (`slurm-%A_%a.out` for arrays).
    #[serde(default)]
    pub stdout: Option<String>,
    /// `-e` pattern as given; `None` = same file as stdout.
    #[serde(default)]
    pub stderr: Option<String>,
    /// `-i` pattern; `None` = `/dev/null`.
    #[serde(default)]
    pub stdin: Option<String>,
    /// `--open-mode=append` (default truncate).
    #[serde(default)]
    pub open_append: bool,
    /// `-p`: comma-separated partition names; `None` = the default partition.
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub qos: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
    /// `-t`; `None` = the partition's DefaultTime, else its MaxTime.
    #[serde(default)]
    pub time_limit: Option<TimeLimit>,
    /// `-n`.
    #[serde(default)]
    pub ntasks: Option<u32>,
    /// `-N` minimum and maximum node counts.
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
    /// `--mem` or `--mem-per-cpu`.
    #[serde(default)]
    pub mem: Option<MemReq>,
    /// `-w`: hostlist expression of nodes the job must include.
    #[serde(default)]
    pub nodelist: Option<String>,
    /// `-x`: hostlist expression of nodes the job must avoid.
    #[serde(default)]
    pub exclude: Option<String>,
    /// `--exclusive`.
    #[serde(default)]
    pub exclusive: bool,
    /// The environment the job starts with, after `--export` was applied by the client.
    #[serde(default)]
    pub environment: Env,
    /// The `--export` value as given (for SLURM_EXPORT_ENV); `None` when not given.
    #[serde(default)]
    pub export: Option<String>,
    /// `-H`.
    #[serde(default)]
    pub hold: bool,
    /// `--begin` as epoch seconds.
    #[serde(default)]
    pub begin: Option<i64>,
    /// `--nice`.
    #[serde(default)]
    pub nice: i32,
    /// `--requeue` (`Some(true)`), `--no-requeue` (`Some(false)`), or the default.
    #[serde(default)]
    pub requeue: Option<bool>,
    /// `--signal`.
    #[serde(default)]
    pub signal: Option<SignalSpec>,
    /// The submitting process's umask (SLURM_UMASK).
    #[serde(default)]
    pub umask: u32,
    /// `--array` as given (`0-9%2`); parsed and checked by the controller.
    #[serde(default)]
    pub array: Option<String>,
    /// `--dependency` as given; parsed and checked by the controller.
    #[serde(default)]
    pub dependency: Option<String>,
    /// `--kill-on-invalid-dep=yes|no`; `None` follows the controller's
    /// `kill_invalid_depend` setting.
    #[serde(default)]
    pub kill_on_invalid_dep: Option<bool>,
    /// `--deadline` as epoch seconds: the job is removed (state DEADLINE) once it can
    /// no longer end before it.
    #[serde(default)]
    pub deadline: Option<i64>,
    /// `--immediate`: refuse the submission unless the job can start at once.
    #[serde(default)]
    pub immediate: bool,
    /// An allocation without a batch script (salloc, srun outside an allocation): no
    /// batch step is launched, and the job ends when its owner releases it.
    #[serde(default)]
    pub alloc_only: bool,
    /// An allocation `srun` made for its own step (srun outside a job). Its srun does
    /// not outlive its connection to the controller, so after a controller restart
    /// nobody would release it: the controller ends it at start
    /// (`Cluster::end_orphaned_step_allocs`).
    #[serde(default)]
    pub step_alloc: bool,
    /// `--gres`: generic resources per node.
    #[serde(default)]
    pub gres: Vec<GresReq>,
    /// `--gpus`: GPUs for the whole job.
    #[serde(default)]
    pub gpus: Option<GresReq>,
    /// `--gpus-per-node`.
    #[serde(default)]
    pub gpus_per_node: Option<GresReq>,
    /// `--gpus-per-task`.
    #[serde(default)]
    pub gpus_per_task: Option<GresReq>,
    /// `--gpus-per-socket`: GPUs on each socket the job uses on a node (it asks for
    /// `sockets_per_node` sockets).
    #[serde(default)]
    pub gpus_per_socket: Option<GresReq>,
    /// `--sockets-per-node`: nodes need at least this many sockets, and a
    /// `--gpus-per-socket` job gets GPUs and CPUs on this many of each node's sockets.
    #[serde(default)]
    pub sockets_per_node: Option<u32>,
    /// `--ntasks-per-gpu` (Slurm's `ntasks_per_tres`); the controller derives the task
    /// or GPU count from it ([`JobSpec::resolve_ntasks_per_gpu`]) and steps default to
    /// `--gpu-bind=single:N`.
    #[serde(default)]
    pub ntasks_per_gpu: Option<u32>,
    /// `--gres-flags`: how CPUs are chosen relative to the GPUs' affinity.
    #[serde(default)]
    pub gres_flags: super::gres::GresBinding,
    /// `--gpu-bind` as given, for the job's steps (`SLURM_GPU_BIND`; validated by the
    /// client).
    #[serde(default)]
    pub gpu_bind: Option<String>,
    /// `--cpus-per-gpu`.
    #[serde(default)]
    pub cpus_per_gpu: Option<u32>,
    /// `--mem-per-gpu`, MiB.
    #[serde(default)]
    pub mem_per_gpu: Option<u64>,
    /// `--constraint` as given (validated by the client).
    #[serde(default)]
    pub constraint: Option<String>,
    /// `--contiguous`: nodes with consecutive names/indices.
    #[serde(default)]
    pub contiguous: bool,
    /// `--distribution` as given (`block`, `cyclic`, `plane=4`, `arbitrary`, with an
    /// optional `:…` socket part).
    #[serde(default)]
    pub distribution: Option<String>,
    /// `--overcommit`: allocate as if one task per node.
    #[serde(default)]
    pub overcommit: bool,
    /// `--oversubscribe`: may share CPUs where the partition allows it.
    #[serde(default)]
    pub oversubscribe: bool,
    /// `--licenses`.
    #[serde(default)]
    pub licenses: Vec<LicenseReq>,
    /// `--reservation`: the advanced reservation the job runs in (checked at submit).
    #[serde(default)]
    pub reservation: Option<String>,
    /// `--switches=N[@wait]`: the most leaf switches (or blocks) the job wants; it
    /// waits for such a placement, then takes any (Slurm's `req_switch`).
    #[serde(default)]
    pub switches: Option<u32>,
    /// The `@wait` of `--switches`, seconds; `None` = the scheduler's
    /// `max_switch_wait`, which also caps it (Slurm's `wait4switch`).
    #[serde(default)]
    pub switch_wait: Option<u32>,
    /// `--threads-per-core` (or 1 from `--hint=nomultithread|compute_bound|
    /// memory_bound`): nodes need at least this many threads per core, and the job's
    /// tasks use this many threads of each core they get; cores are allocated whole.
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core` (or 1 from `--hint=nomultithread`): at most this many
    /// tasks share one core.
    #[serde(default)]
    pub ntasks_per_core: Option<u32>,
    /// `--hint` as given (its effect is in the two fields above).
    #[serde(default)]
    pub hint: Option<Hint>,
    /// `--mincpus`: at least this many CPUs on each node of the job (Slurm's
    /// `pn_min_cpus`): nodes with fewer free are passed over, and each node's
    /// allocation is raised to it.
    #[serde(default)]
    pub mincpus: Option<u32>,
    /// `--tmp`, MiB: nodes need at least this much temporary disk (`TmpDisk=`; not
    /// consumed, as in Slurm).
    #[serde(default)]
    pub tmp_disk: Option<u64>,
    /// `-k/--no-kill`: Slurm keeps the job on its other nodes when one fails. sluice
    /// records it; a job whose node fails ends NODE_FAIL (or is requeued) as without
    /// it, which is Slurm's behaviour for a job on one node and for the batch host.
    #[serde(default)]
    pub no_kill: bool,
    /// `--time-min`, minutes: backfill may start the job with its time limit cut down
    /// as far as this when the full limit would not end before a reservation for a
    /// higher-priority job (Slurm's `time_min`).
    #[serde(default)]
    pub time_min: Option<u32>,
    /// `--priority`: operators (root, the controller's user) fix the job's priority
    /// at this value, no longer recomputed (Slurm's `direct_set_prio`); 0 holds it.
    /// Others are refused at submission.
    #[serde(default)]
    pub priority: Option<u32>,
    /// `--exclusive=user`: the job's nodes are shared only with jobs of the same
    /// user (as in an ExclusiveUser partition); `exclusive` stays false.
    #[serde(default)]
    pub exclusive_user: bool,
}

/// `--hint` values (cf. `verify_hint` in src/common/proc_args.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hint {
    /// All cores of each socket, one thread per core.
    ComputeBound,
    /// One core of each socket, one thread per core (sluice: one thread per core).
    MemoryBound,
    /// Use every hardware thread (the default).
    Multithread,
    /// Whole cores, one thread and one task per core.
    Nomultithread,
}

impl Hint {
    /// Parses Slurm's spelling (case-insensitive); `None` for anything else.
    pub fn parse(s: &str) -> Option<Hint> {
        match s.trim().to_ascii_lowercase().as_str() {
            "compute_bound" => Some(Hint::ComputeBound),
            "memory_bound" => Some(Hint::MemoryBound),
            "multithread" => Some(Hint::Multithread),
            "nomultithread" => Some(Hint::Nomultithread),
            _ => None,
        }
    }

    /// Slurm's spelling (`SLURM_HINT`).
    pub fn as_str(self) -> &'static str {
        match self {
            Hint::ComputeBound => "compute_bound",
            Hint::MemoryBound => "memory_bound",
            Hint::Multithread => "multithread",
            Hint::Nomultithread => "nomultithread",
        }
    }

    /// Whether a step should use only one thread of each core.
    pub fn one_thread(self) -> bool {
        self != Hint::Multithread
    }
}

/// CPUs one task takes on a node with `node_tpc` threads per core, given the job's
/// `-c` (`cpt`) and its `--threads-per-core`/`--ntasks-per-core` (cf. cons_tres
/// `_get_res_usage`/`_allocate_sc`: with those options cores are allocated whole).
/// Without either option, or on a node of one thread per core, it is `cpt`.
///
/// With `threads_per_core = u`, a task needs `ceil(cpt / u)` cores and takes all
/// their threads; with `ntasks_per_core = m < node_tpc`, a task takes at least
/// `node_tpc / m` (rounded up) CPUs, in whole multiples of it.
pub fn task_cpus_on(
    cpt: u32,
    threads_per_core: Option<u32>,
    ntasks_per_core: Option<u32>,
    node_tpc: u32,
) -> u32 {
    let t = node_tpc.max(1);
    let cpt = cpt.max(1);
    let mut out = cpt;
    if t > 1 {
        if let Some(u) = threads_per_core {
            let u = u.clamp(1, t);
            out = out.max(cpt.div_ceil(u).saturating_mul(t));
        }
        if let Some(m) = ntasks_per_core.filter(|&m| m < t) {
            let slice = t.div_ceil(m.max(1));
            out = out.max(cpt.div_ceil(slice).saturating_mul(slice));
        }
    }
    out
}

/// slurmctld's words (gres_job_state_validate) for `--ntasks-per-gpu` with neither
/// GPUs nor a task or node count.
pub const NTASKS_PER_GPU_ALONE: &str =
    "--ntasks-per-tres needs either a GRES GPU specification or a node/ntask specification";

impl JobSpec {
    /// Whether the job asks for any GPU or other generic resource.
    pub fn wants_gres(&self) -> bool {
        !self.gres.is_empty()
            || self.gpus.is_some()
            || self.gpus_per_node.is_some()
            || self.gpus_per_task.is_some()
            || self.gpus_per_socket.is_some()
    }

    /// GPUs the request names over the whole job (see
    /// [`super::gres::total_gpus`]); `None` when it names none.
    pub fn total_gpus(&self) -> Option<u64> {
        let mut per_node: Vec<&GresReq> = self.gres.iter().collect();
        per_node.extend(self.gpus_per_node.as_ref());
        let nodes = self.nodes_min.unwrap_or(1);
        let from_tasks = self.gpus_per_task.as_ref().and_then(|g| {
            self.ntasks.map(|n| GresReq {
                count: g.count.saturating_mul(u64::from(n)),
                ..g.clone()
            })
        });
        let by_job = match (&self.gpus, from_tasks) {
            (Some(g), Some(t)) => Some(if g.count >= t.count { g.clone() } else { t }),
            (g, t) => g.clone().or(t),
        };
        super::gres::total_gpus(
            by_job.as_ref(),
            &per_node,
            self.gpus_per_socket.as_ref(),
            nodes,
            self.sockets_per_node.unwrap_or(1),
        )
    }

    /// Checks that `--gpus-per-socket` agrees with the other GPU counts as slurmctld's
    /// `_test_gres_cnt` does: `--gpus` ≥ `--gres=gpu`/`--gpus-per-node` ≥
    /// `--gpus-per-socket`, and a per-node count is `--sockets-per-node` times the
    /// per-socket one.
    ///
    /// Errors: [`super::gres::GresError::Bad`] naming the per-socket request.
    pub fn check_gpu_counts(&self) -> Result<(), super::gres::GresError> {
        let Some(sock) = &self.gpus_per_socket else {
            return Ok(());
        };
        let bad = || super::gres::GresError::Bad(format!("--gpus-per-socket={sock}"));
        if self.gpus.as_ref().is_some_and(|g| g.count < sock.count) {
            return Err(bad());
        }
        let per_node: u64 = self
            .gres
            .iter()
            .chain(self.gpus_per_node.as_ref())
            .filter(|g| g.name == "gpu")
            .map(|g| g.count)
            .sum();
        if per_node > 0 {
            let sockets = u64::from(self.sockets_per_node.unwrap_or(1));
            if per_node < sock.count
                || !per_node.is_multiple_of(sock.count)
                || per_node / sock.count != sockets
            {
                return Err(bad());
            }
        }
        Ok(())
    }

    /// Applies `--ntasks-per-gpu=N` as slurmctld does (src/interfaces/gres.c
    /// `gres_job_state_validate`): with a fixed node count and no `-n`, the task count
    /// is nodes × N; a job that names GPUs then runs GPUs × N tasks; a job that names
    /// none gets `-n / N` untyped GPUs (`--gpus`). Nothing changes without
    /// `--ntasks-per-gpu`.
    ///
    /// Errors: [`super::gres::GresError::Bad`] when the job names neither GPUs nor a
    /// task or node count (its text is then [`NTASKS_PER_GPU_ALONE`]), or when `-n` is
    /// below N (no whole GPU to give).
    pub fn resolve_ntasks_per_gpu(&mut self) -> Result<(), super::gres::GresError> {
        let Some(per) = self.ntasks_per_gpu.filter(|n| *n > 0) else {
            return Ok(());
        };
        let bad = || super::gres::GresError::Bad(format!("--ntasks-per-gpu={per}"));
        let fixed_nodes = self
            .nodes_min
            .filter(|&m| self.nodes_max.is_none_or(|x| x == m));
        if self.ntasks.is_none()
            && let Some(n) = fixed_nodes
        {
            self.ntasks = Some(n.checked_mul(per).ok_or_else(bad)?);
        }
        if let Some(g) = self.total_gpus() {
            let t = g
                .checked_mul(u64::from(per))
                .and_then(|t| u32::try_from(t).ok())
                .ok_or_else(bad)?;
            self.ntasks = Some(t);
            return Ok(());
        }
        match self.ntasks {
            Some(n) if n >= per => {
                self.gpus = Some(GresReq {
                    name: "gpu".into(),
                    kind: None,
                    count: u64::from(n / per),
                });
                Ok(())
            }
            Some(_) => Err(bad()),
            None => Err(super::gres::GresError::Bad(NTASKS_PER_GPU_ALONE.into())),
        }
    }

    /// `TresPerNode=`/squeue `%b` text: `gres:gpu:4`, `N/A` when none.
    pub fn tres_per_node(&self) -> String {
        let mut v = self.gres.clone();
        if let Some(g) = &self.gpus_per_node {
            v.push(g.clone());
        }
        if v.is_empty() {
            "N/A".into()
        } else {
            super::gres::fmt_tres_per_node(&v)
        }
    }
}

impl fmt::Debug for JobSpec {
    // Hand-written so that logs never carry the user's environment or script.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobSpec")
            .field("name", &self.name)
            .field("partition", &self.partition)
            .field("ntasks", &self.ntasks)
            .field("nodes_min", &self.nodes_min)
            .field("cpus_per_task", &self.cpus_per_task)
            .field("mem", &self.mem)
            .field("time_limit", &self.time_limit)
            .field("env_vars", &self.environment.len())
            .finish_non_exhaustive()
    }
}

/// Base job states (cf. `enum job_states` in slurm.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
}

impl JobState {
    /// All base states, in Slurm's order.
    pub const ALL: [JobState; 12] = [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Completed,
        JobState::Cancelled,
        JobState::Failed,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::Preempted,
        JobState::BootFail,
        JobState::Deadline,
        JobState::OutOfMemory,
    ];

    /// Long name (`PENDING`, `OUT_OF_MEMORY`, …).
    pub fn long(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
        }
    }

    /// Compact name (`PD`, `R`, `CD`, `OOM`, …).
    pub fn compact(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
        }
    }

    /// True for states a job never leaves (COMPLETED, FAILED, …).
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended
        )
    }

    /// Parses a state as squeue `-t`/scancel `-t`/sacct `-s` accept it: long or compact
    /// name, any case (`pd`, `PENDING`, `running`, `CG` is handled by callers).
    pub fn parse(s: &str) -> Option<JobState> {
        let u = s.to_ascii_uppercase();
        JobState::ALL
            .into_iter()
            .find(|st| st.long() == u || st.compact() == u)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.long())
    }
}

/// Why a job is pending (or why it ended), rendered as Slurm prints it in squeue `%r`
/// and scontrol `Reason=` (cf. src/common/job_state_reason.c).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    None,
    Priority,
    Resources,
    BeginTime,
    JobHeldUser,
    JobHeldAdmin,
    PartitionDown,
    PartitionInactive,
    PartitionTimeLimit,
    PartitionNodeLimit,
    PartitionConfig,
    ReqNodeNotAvail,
    BadConstraints,
    NodeDown,
    NonZeroExitCode,
    TimeLimit,
    JobLaunchFailure,
    /// A reason given by an admin or not in this list, shown verbatim.
    Other(String),
    /// Waiting for licenses (`Licenses`).
    Licenses,
    /// Could start now, but the resources are reserved for a higher-priority job's
    /// planned start (Slurm prints this long text as the reason).
    NodesReserved,
    /// Waiting for another job (`--dependency`).
    Dependency,
    /// A dependency that can never be satisfied.
    DependencyNeverSatisfied,
    /// The array's `%N` throttle is reached.
    JobArrayTaskLimit,
    /// `--deadline` passed.
    DeadLine,
    /// An association or QOS limit holds the job (`AssocGrpGRES`,
    /// `QOSMaxJobsPerUserLimit`, …; see [`super::limit`]).
    Limit(super::limit::LimitReason),
    /// Requeued and held because the job could not be launched (its prolog failed):
    /// Slurm's `launch failed requeued held`, which the user may `scontrol release`.
    LaunchFailedRequeuedHeld,
}

impl Reason {
    /// Slurm's text for the reason.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::None => "None",
            Reason::Priority => "Priority",
            Reason::Resources => "Resources",
            Reason::BeginTime => "BeginTime",
            Reason::JobHeldUser => "JobHeldUser",
            Reason::JobHeldAdmin => "JobHeldAdmin",
            Reason::PartitionDown => "PartitionDown",
            Reason::PartitionInactive => "PartitionInactive",
            Reason::PartitionTimeLimit => "PartitionTimeLimit",
            Reason::PartitionNodeLimit => "PartitionNodeLimit",
            Reason::PartitionConfig => "PartitionConfig",
            Reason::ReqNodeNotAvail => "ReqNodeNotAvail",
            Reason::BadConstraints => "BadConstraints",
            Reason::NodeDown => "NodeDown",
            Reason::NonZeroExitCode => "NonZeroExitCode",
            Reason::TimeLimit => "TimeLimit",
            Reason::JobLaunchFailure => "JobLaunchFailure",
            Reason::Other(s) => s,
            Reason::Licenses => "Licenses",
            Reason::NodesReserved => {
                "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
            }
            Reason::Dependency => "Dependency",
            Reason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            Reason::JobArrayTaskLimit => "JobArrayTaskLimit",
            Reason::DeadLine => "DeadLine",
            Reason::Limit(l) => l.as_str(),
            Reason::LaunchFailedRequeuedHeld => "launch failed requeued held",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A process's end as Slurm reports it: `ExitCode=status:signal`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// Exit status (0–255) when the process exited.
    pub code: i32,
    /// Signal number when the process was killed by a signal, else 0.
    pub signal: i32,
}

impl ExitStatus {
    /// From a raw `waitpid` status.
    pub fn from_wait_status(raw: i32) -> ExitStatus {
        if raw & 0x7f == 0 {
            ExitStatus {
                code: (raw >> 8) & 0xff,
                signal: 0,
            }
        } else {
            ExitStatus {
                code: 0,
                signal: raw & 0x7f,
            }
        }
    }

    /// True for exit 0 without a signal.
    pub fn success(self) -> bool {
        self.code == 0 && self.signal == 0
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.code, self.signal)
    }
}

/// One finished or running step as recorded for accounting (`JOB.batch`, `JOB.0`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// `batch`, `extern`, or a step number.
    pub id: String,
    pub name: String,
    pub state: JobState,
    pub exit: ExitStatus,
    pub start_time: i64,
    pub end_time: Option<i64>,
    pub nodes: String,
    pub ncpus: u32,
    pub ntasks: u32,
    /// Peak resident set size of the step's tasks, KiB (0 when unknown).
    #[serde(default)]
    pub max_rss_kib: u64,
    /// User + system CPU time of the step's tasks, seconds.
    #[serde(default)]
    pub cpu_secs: f64,
    /// What only `srun` steps have: layout, launcher, limits, live usage.
    #[serde(default)]
    pub detail: Option<Box<StepDetail>>,
    /// Usage of a step without `detail` (the batch step): the latest sample while it
    /// runs, the final figures after.
    #[serde(default)]
    pub usage: Option<Box<super::step::StepUsage>>,
}

impl StepRecord {
    /// The step's usage as sampled by its stepd (`srun` steps keep it in `detail`);
    /// `None` when nothing was measured.
    pub fn usage(&self) -> Option<&super::step::StepUsage> {
        match &self.detail {
            Some(d) => Some(&d.usage),
            None => self.usage.as_deref(),
        }
    }
}

/// The parts of a numbered step's record beyond accounting (`scontrol show step`,
/// `squeue -s`, `sstat`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepDetail {
    /// Owner of the step (the job's user).
    pub uid: u32,
    /// Nodes, CPUs and ranks of the step.
    pub layout: super::step::StepLayout,
    /// `host:pid` of the srun that launched it.
    pub srun: String,
    pub time_limit: Option<TimeLimit>,
    pub distribution: super::step::Distribution,
    /// Memory the step holds per node, MiB (0 = not tracked).
    pub mem_per_node: u64,
    /// The latest usage sample (final at the end).
    pub usage: super::step::StepUsage,
    /// uid that cancelled the step.
    pub cancelled_by: Option<u32>,
}

/// Units of one GRES device held by a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GresAlloc {
    /// Position of the device in the node's `gres` list.
    pub slot: u32,
    pub name: String,
    #[serde(default)]
    pub kind: Option<String>,
    /// The device's index (`IDX:`).
    pub index: u32,
    pub count: u32,
}

/// Test helper: one GPU of count 1 per index, in node slot `index` (nodes whose GPUs
/// are their first devices).
#[cfg(test)]
pub fn gpu_allocs(idx: &[u32]) -> Vec<GresAlloc> {
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

/// What a job whose end is recorded still waits for before it leaves COMPLETING and
/// frees its allocation (cf. slurmctld's `job_epilog_complete`: a job is COMPLETING
/// until every node's epilog has finished). Its live steps' final reports are waited
/// for too, so that their usage is in the job's record when it is over.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    /// Nodes whose Epilog has not reported its end yet.
    pub epilog: Vec<String>,
}

/// The allocation a running job holds on its nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// Node names, in the order tasks are laid out.
    pub nodes: Vec<String>,
    /// CPUs allocated on each node (same order as `nodes`).
    pub cpus: Vec<u32>,
    /// Memory allocated on each node, MiB.
    pub mem_per_node: u64,
    /// The CPU ids held on each node (same order as `nodes`); empty for records made
    /// before ids were tracked.
    #[serde(default)]
    pub cpu_ids: Vec<Vec<u32>>,
    /// GRES devices held on each node (same order as `nodes`; may be empty).
    #[serde(default)]
    pub gres: Vec<Vec<GresAlloc>>,
    /// Tasks placed on each node (same order as `nodes`).
    #[serde(default)]
    pub tasks: Vec<u32>,
    /// Licenses held.
    #[serde(default)]
    pub licenses: Vec<LicenseReq>,
    /// The job shares its CPUs with other jobs (OverSubscribe).
    #[serde(default)]
    pub shared: bool,
    /// The job holds its nodes whole (`--exclusive`, OverSubscribe=EXCLUSIVE).
    #[serde(default)]
    pub whole_nodes: bool,
}

/// What the scheduler last learned about a pending job (`squeue --start`,
/// `scontrol show job`'s `Scheduler=`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedInfo {
    /// Expected start from the backfill timeline (epoch seconds).
    #[serde(default)]
    pub est_start: Option<i64>,
    /// Nodes the expected start was planned on (squeue SCHEDNODES).
    #[serde(default)]
    pub sched_nodes: Option<String>,
    /// Started by the backfill scheduler rather than the main one.
    #[serde(default)]
    pub backfilled: bool,
}

impl Allocation {
    /// Total CPUs allocated.
    pub fn total_cpus(&self) -> u32 {
        self.cpus.iter().sum()
    }

    /// Device indices of the GPUs held on the `node_idx`-th node, in allocation order
    /// (`SLURM_JOB_GPUS` and the prolog's `CUDA_VISIBLE_DEVICES`); empty past the end.
    pub fn gpu_indices(&self, node_idx: usize) -> Vec<String> {
        self.gres
            .get(node_idx)
            .map(|g| {
                g.iter()
                    .filter(|d| d.name == "gpu")
                    .map(|d| d.index.to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// GRES units of `name` held on all nodes.
    pub fn gres_count(&self, name: &str) -> u64 {
        self.gres
            .iter()
            .flatten()
            .filter(|g| g.name == name)
            .map(|g| u64::from(g.count))
            .sum()
    }
}

/// Task distribution over nodes (`-m` first part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dist {
    Block,
    Cyclic,
    Plane(u32),
}

/// Parses the node part of `--distribution` (`block`, `cyclic`, `plane=N`,
/// `arbitrary`, `*`), ignoring the socket/core parts after `:`.
pub fn parse_dist(s: &str) -> Option<Dist> {
    let first = s.split([':', ',']).next().unwrap_or("");
    let lower = first.to_ascii_lowercase();
    if let Some(n) = lower.strip_prefix("plane=") {
        return n.parse::<u32>().ok().filter(|n| *n > 0).map(Dist::Plane);
    }
    match lower.as_str() {
        "block" | "*" | "arbitrary" | "" => Some(Dist::Block),
        "cyclic" => Some(Dist::Cyclic),
        _ => None,
    }
}

/// The controller's record of a job: what was asked, who asked, what it got, how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: u32,
    pub spec: JobSpec,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub group: String,
    /// The resolved partition (the first of `spec.partition` that could run it).
    pub partition: String,
    pub account: String,
    pub qos: String,
    /// The resolved time limit.
    pub time_limit: TimeLimit,
    /// CPUs and tasks the job asks for in total (resolved from -n/-c/-N).
    pub req_cpus: u32,
    pub req_tasks: u32,
    pub req_nodes: u32,
    /// Memory per node in MiB as resolved at submit (0 = none asked).
    pub req_mem: MemReq,
    pub state: JobState,
    /// COMPLETING flag: the job ended and its processes are being cleaned up.
    #[serde(default)]
    pub completing: bool,
    /// Set (with `completing`) once the job's end is recorded while its nodes still
    /// clean up: it stays COMPLETING, holding its allocation, until this is empty and
    /// its steps have reported their end. `None` otherwise.
    #[serde(default)]
    pub cleanup: Option<Cleanup>,
    pub reason: Reason,
    pub priority: u32,
    /// Set by `scontrol update Priority=N`: the priority stays N and the multifactor
    /// plugin no longer recomputes it (Slurm's `direct_set_prio`).
    #[serde(default)]
    pub priority_set: bool,
    pub hold: Option<HoldKind>,
    pub submit_time: i64,
    pub eligible_time: Option<i64>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    /// Seconds the job has been suspended in total, not counting a suspension still
    /// in progress (see `suspension`). Time limits are extended by it, as in Slurm.
    #[serde(default)]
    pub suspended_secs: u64,
    /// The suspension in progress while the state is SUSPENDED; `None` otherwise.
    #[serde(default)]
    pub suspension: Option<Suspension>,
    /// Set once the job is chosen for preemption (CANCEL/REQUEUE) until it ends.
    #[serde(default)]
    pub preempt: Option<super::preempt::Preemption>,
    pub alloc: Option<Allocation>,
    pub exit: ExitStatus,
    /// Highest exit among the job's steps (scontrol -d `DerivedExitCode`).
    #[serde(default)]
    pub derived_exit: ExitStatus,
    pub restarts: u32,
    /// uid that cancelled the job (sacct `CANCELLED by <uid>`).
    pub cancelled_by: Option<u32>,
    pub steps: Vec<StepRecord>,
    /// When the job was last evaluated by the scheduler.
    #[serde(default)]
    pub last_sched_eval: Option<i64>,
    /// Expected start and planned nodes while pending; how it was started.
    #[serde(default)]
    pub sched: SchedInfo,
    /// The array's master id (`SLURM_ARRAY_JOB_ID`, squeue `%F`); 0 for a job that is
    /// not part of an array.
    #[serde(default)]
    pub array_job_id: u32,
    /// This record's task index (`SLURM_ARRAY_TASK_ID`); `None` for a job that is not
    /// an array task and for an array's meta record of not-yet-started tasks.
    #[serde(default)]
    pub array_task_id: Option<u32>,
    /// Array data (every record of an array has it; see [`ArrayInfo`]).
    #[serde(default)]
    pub array: Option<Box<ArrayInfo>>,
    /// The parsed `--dependency` with each item's last evaluated state; `None` when the
    /// job has none (or it was satisfied and cleared).
    #[serde(default)]
    pub depend: Option<Dependency>,
    /// Earlier runs of a requeued job, oldest first (sacct `--duplicates` shows them as
    /// REQUEUED).
    #[serde(default)]
    pub past_runs: Vec<PastRun>,
    /// Heterogeneous job membership; `None` for an ordinary job.
    #[serde(default)]
    pub het: Option<HetInfo>,
    /// The job's billable TRES (Slurm's `billable_tres`, `model::billing`): what it
    /// holds once started, else what it asks for, as its partition bills it. Set by
    /// the controller; `None` on records made before (shown as the CPU count).
    #[serde(default)]
    pub billing: Option<f64>,
}

/// A component of a heterogeneous job (`sbatch A : B`, `#SBATCH hetjob`). Components
/// have consecutive job ids from the leader's (`123+0` is 123, `123+1` is 124), are
/// started together or not at all, and only the leader runs the batch script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HetInfo {
    /// The leader's id (scontrol's `HetJobId`).
    pub job_id: u32,
    /// This component's offset (`+k`).
    pub offset: u32,
    /// Number of components (`SLURM_HET_SIZE`).
    pub size: u32,
}

/// A suspension in progress (`scontrol suspend`, or preemption in SUSPEND mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspension {
    /// When it began, epoch seconds.
    pub since: i64,
    /// The job whose start suspended this one (PreemptMode=SUSPEND); `None` for an
    /// operator's `scontrol suspend`, which only `scontrol resume` ends.
    pub preemptor: Option<u32>,
}

/// One run of a job that was requeued afterwards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PastRun {
    pub start_time: i64,
    pub end_time: i64,
    pub exit: ExitStatus,
    pub alloc: Option<Allocation>,
    pub steps: Vec<StepRecord>,
    /// The run ended because its node failed (sacct shows NODE_FAIL, not REQUEUED).
    #[serde(default)]
    pub node_fail: bool,
}

impl Default for Job {
    /// A pending record with nothing resolved: id 0, owned by uid/gid 0 with empty
    /// names, no partition/account/QOS, one task on one CPU of one node, no memory
    /// asked, no time limit, submitted at time 0. The controller fills the resolved
    /// fields at submit; tests and the simulator override what they need with
    /// `Job { .., ..Job::default() }` so that a new field is defaulted in one place.
    fn default() -> Job {
        Job {
            id: 0,
            spec: JobSpec::default(),
            uid: 0,
            gid: 0,
            user: String::new(),
            group: String::new(),
            partition: String::new(),
            account: String::new(),
            qos: String::new(),
            time_limit: TimeLimit::Unlimited,
            req_cpus: 1,
            req_tasks: 1,
            req_nodes: 1,
            req_mem: MemReq::PerNode(0),
            state: JobState::Pending,
            completing: false,
            cleanup: None,
            reason: Reason::None,
            priority: 0,
            priority_set: false,
            hold: None,
            submit_time: 0,
            eligible_time: None,
            start_time: None,
            end_time: None,
            suspended_secs: 0,
            suspension: None,
            preempt: None,
            alloc: None,
            exit: ExitStatus::default(),
            derived_exit: ExitStatus::default(),
            restarts: 0,
            cancelled_by: None,
            steps: Vec::new(),
            last_sched_eval: None,
            sched: SchedInfo::default(),
            array_job_id: 0,
            array_task_id: None,
            array: None,
            depend: None,
            past_runs: Vec::new(),
            het: None,
            billing: None,
        }
    }
}

impl Job {
    /// The nodes of the job's allocation that are among `nodes`, as a hostlist
    /// (`n[1-2]`); empty without an allocation. slurmctld names them so when a node
    /// failure ends or requeues the job (`kill_running_job_by_node_name`).
    pub fn alloc_nodes_among(&self, nodes: &[String]) -> String {
        self.alloc.as_ref().map_or(String::new(), |a| {
            let hit: Vec<String> = a
                .nodes
                .iter()
                .filter(|n| nodes.contains(n))
                .cloned()
                .collect();
            super::hostlist::compress(&hit)
        })
    }

    /// The record as queries send it: without the batch script and the environment,
    /// which no query prints and which make up most of a job's size.
    pub fn for_query(&self) -> Job {
        let mut j = self.clone();
        j.spec.script = String::new();
        j.spec.environment = Env::default();
        j
    }

    /// The state shown in squeue/scontrol: COMPLETING wins over the base state.
    pub fn state_long(&self) -> &'static str {
        if self.completing {
            "COMPLETING"
        } else {
            self.state.long()
        }
    }

    /// Compact state (`CG` while completing).
    pub fn state_compact(&self) -> &'static str {
        if self.completing {
            "CG"
        } else {
            self.state.compact()
        }
    }

    /// Whether the job is still in the queue (pending, running, suspended or completing).
    pub fn is_active(&self) -> bool {
        !self.state.is_terminal() || self.completing
    }

    /// Node list as a compressed hostlist, or empty when nothing is allocated.
    pub fn nodelist(&self) -> String {
        match &self.alloc {
            Some(a) => super::hostlist::compress(&a.nodes),
            None => String::new(),
        }
    }

    /// Seconds the job has run at `now` (0 if it never started): the time since its
    /// start less the time it spent suspended (including a suspension in progress).
    pub fn run_secs(&self, now: i64) -> u64 {
        match self.start_time {
            Some(s) => {
                let end = self.end_time.unwrap_or(now);
                let wall = (end - s).max(0) as u64;
                wall - self.suspended_total(end).min(wall)
            }
            None => 0,
        }
    }

    /// Seconds spent suspended up to `now`, the suspension in progress included.
    pub fn suspended_total(&self, now: i64) -> u64 {
        let current = self.suspension.map_or(0, |s| (now - s.since).max(0) as u64);
        self.suspended_secs + current
    }

    /// When the job's time limit runs out, epoch seconds: its start plus the limit,
    /// pushed back by the time it spent suspended (Slurm does not count suspended time
    /// against the limit). `None` for a job not started or without a limit.
    pub fn limit_end(&self, now: i64) -> Option<i64> {
        let start = self.start_time?;
        let limit = self.time_limit.secs()?;
        Some(
            start
                .saturating_add(limit.min(i64::MAX as u64 / 4) as i64)
                .saturating_add(self.suspended_total(now) as i64),
        )
    }

    /// True for an array's meta record: the pending tasks that have not been split off
    /// into records of their own (squeue shows it as `N_[2-9%2]`).
    pub fn is_array_meta(&self) -> bool {
        self.array_task_id.is_none() && self.array.as_ref().is_some_and(|a| !a.tasks.is_empty())
    }

    /// The id as squeue `%i` and sacct `JobID` print it: `N`, `A_i`, `L+k` for a
    /// heterogeneous job's component, or `A_[set]` for
    /// an array's meta record (with `%N` when `throttle` and the array has one).
    pub fn display_id(&self, throttle: bool) -> String {
        if let Some(h) = &self.het {
            return format!("{}+{}", h.job_id, h.offset);
        }
        match (&self.array, self.array_task_id) {
            (Some(_), Some(t)) => format!("{}_{t}", self.array_job_id),
            (Some(a), None) if !a.tasks.is_empty() => {
                format!("{}_[{}]", self.array_job_id, a.pending_text(throttle))
            }
            _ => self.id.to_string(),
        }
    }

    /// Memory per node in MiB this job asks for, given its CPUs per node.
    pub fn mem_per_node(&self, cpus_on_node: u32) -> u64 {
        match self.req_mem {
            MemReq::PerNode(m) => m,
            MemReq::PerCpu(m) => m.saturating_mul(u64::from(cpus_on_node)),
        }
    }
}

/// A running job of alice's on nodes `node01…` with `cpus` CPUs each, for tests.
#[cfg(test)]
pub(crate) fn sample_running(id: u32, name: &str, cpus: Vec<u32>) -> Job {
    let nodes = (1..=cpus.len()).map(|i| format!("node{i:02}")).collect();
    Job {
        id,
        spec: JobSpec {
            name: name.into(),
            work_dir: "/home/alice/golden-work".into(),
            submit_dir: "/home/alice/golden-work".into(),
            submit_host: "vm".into(),
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
        req_cpus: cpus.iter().sum(),
        req_tasks: 1,
        req_nodes: cpus.len() as u32,
        req_mem: MemReq::PerCpu(400),
        state: JobState::Running,
        priority: 1,
        submit_time: 1000,
        eligible_time: Some(1000),
        start_time: Some(1003),
        alloc: Some(Allocation {
            nodes,
            cpus,
            mem_per_node: 400,
            ..Allocation::default()
        }),
        ..Job::default()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn task_cpus_take_whole_cores_only_when_asked() {
        // (cpt, threads_per_core, ntasks_per_core, node threads) -> CPUs per task
        for (cpt, tpc, npc, t, want) in [
            (1, None, None, 2, 1),
            (3, None, None, 2, 3),
            (1, Some(1), None, 1, 1),
            (1, Some(1), Some(1), 2, 2),
            (2, Some(1), None, 2, 4),
            (3, Some(2), None, 2, 4),
            (3, Some(4), None, 2, 4),
            (1, None, Some(1), 4, 4),
            (1, None, Some(2), 4, 2),
            (3, None, Some(2), 4, 4),
            (1, None, Some(4), 4, 1),
            (2, Some(1), None, 4, 8),
        ] {
            assert_eq!(
                task_cpus_on(cpt, tpc, npc, t),
                want,
                "{cpt} {tpc:?} {npc:?} {t}"
            );
        }
        assert_eq!(Hint::parse("NoMultiThread"), Some(Hint::Nomultithread));
        assert_eq!(Hint::parse("fast"), None);
        assert_eq!(Hint::ComputeBound.as_str(), "compute_bound");
    }

    use super::*;

    #[test]
    fn exit_status_from_wait() {
        assert_eq!(ExitStatus::from_wait_status(0).to_string(), "0:0");
        assert_eq!(ExitStatus::from_wait_status(3 << 8).to_string(), "3:0");
        assert_eq!(ExitStatus::from_wait_status(9).to_string(), "0:9");
        assert_eq!(ExitStatus::from_wait_status(15).to_string(), "0:15");
    }

    #[test]
    fn state_names_round_trip() {
        for s in JobState::ALL {
            assert_eq!(JobState::parse(s.long()), Some(s));
            assert_eq!(JobState::parse(&s.compact().to_lowercase()), Some(s));
        }
        assert_eq!(JobState::parse("nonsense"), None);
    }

    fn gpu(count: u64) -> Option<GresReq> {
        Some(GresReq {
            name: "gpu".into(),
            kind: None,
            count,
        })
    }

    #[test]
    fn ntasks_per_gpu_derives_tasks_or_gpus_as_slurmctld_does() {
        let base = JobSpec {
            ntasks_per_gpu: Some(2),
            ..JobSpec::default()
        };
        // GPUs named: tasks = GPUs × N, over -n when both are given.
        let mut s = JobSpec {
            gpus: gpu(3),
            ntasks: Some(9),
            ..base.clone()
        };
        s.resolve_ntasks_per_gpu().unwrap();
        assert_eq!(s.ntasks, Some(6));
        // Per-node GPUs count on each node of a fixed node count.
        let mut s = JobSpec {
            gpus_per_node: gpu(2),
            nodes_min: Some(2),
            ..base.clone()
        };
        s.resolve_ntasks_per_gpu().unwrap();
        assert_eq!(s.ntasks, Some(8));
        // Tasks only: -n / N untyped GPUs for the job.
        let mut s = JobSpec {
            ntasks: Some(5),
            ..base.clone()
        };
        s.resolve_ntasks_per_gpu().unwrap();
        assert_eq!((s.ntasks, s.gpus.map(|g| g.count)), (Some(5), Some(2)));
        // Nodes only: nodes × N tasks, one GPU per N of them.
        let mut s = JobSpec {
            nodes_min: Some(3),
            ..base.clone()
        };
        s.resolve_ntasks_per_gpu().unwrap();
        assert_eq!((s.ntasks, s.gpus.map(|g| g.count)), (Some(6), Some(3)));
        // Neither, or fewer tasks than N: no GPU to give.
        assert!(base.clone().resolve_ntasks_per_gpu().is_err());
        let mut s = JobSpec {
            ntasks: Some(1),
            ..base.clone()
        };
        assert!(s.resolve_ntasks_per_gpu().is_err());
        // A node range is not a fixed count.
        let mut s = JobSpec {
            nodes_min: Some(1),
            nodes_max: Some(3),
            ..base
        };
        assert!(s.resolve_ntasks_per_gpu().is_err());
        // Without the option nothing changes.
        let mut s = JobSpec::default();
        s.resolve_ntasks_per_gpu().unwrap();
        assert_eq!((s.ntasks, s.gpus), (None, None));
    }

    #[test]
    fn gpus_per_socket_must_agree_with_the_other_gpu_counts() {
        let per_socket = |per: u64, sockets: u32| JobSpec {
            gpus_per_socket: gpu(per),
            sockets_per_node: Some(sockets),
            ..JobSpec::default()
        };
        assert!(per_socket(1, 2).check_gpu_counts().is_ok());
        // --gpus below one socket's worth.
        let s = JobSpec {
            gpus: gpu(1),
            ..per_socket(2, 1)
        };
        assert!(s.check_gpu_counts().is_err());
        // --gres=gpu:2 is two sockets of one GPU, not one.
        let s = JobSpec {
            gres: vec![gpu(2).unwrap()],
            ..per_socket(1, 1)
        };
        assert!(s.check_gpu_counts().is_err());
        let s = JobSpec {
            gpus_per_node: gpu(2),
            ..per_socket(1, 2)
        };
        assert!(s.check_gpu_counts().is_ok());
        assert_eq!(s.total_gpus(), Some(2));
        assert_eq!(
            JobSpec {
                nodes_min: Some(3),
                ..per_socket(1, 2)
            }
            .total_gpus(),
            Some(6)
        );
    }

    #[test]
    fn time_limits_render() {
        assert_eq!(TimeLimit::Minutes(60).to_hms(), "01:00:00");
        assert_eq!(TimeLimit::Minutes(5).to_squeue(), "5:00");
        assert_eq!(TimeLimit::Unlimited.to_hms(), "UNLIMITED");
    }
}
