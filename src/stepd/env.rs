//! The environment of a batch shell: the submit environment (after the client applied
//! `--export`) plus the `SLURM_*` variables that describe the job, its allocation and
//! the node the shell runs on. Cf. Slurm's src/common/env.c (`env_array_for_batch_job`,
//! `_uint16_array_to_str`) and slurmstepd's additions (`HOSTNAME`, `TMPDIR`).
//!
//! Pure: the caller passes the job, the cluster name, the node name and `now`; nothing
//! here reads the clock, the process environment or the password database.
//!
//! Invariants:
//! - Every variable sluice sets wins over an inherited variable of the same name.
//! - Job-describing `SLURM_*` variables that this job does not set are removed from the
//!   inherited environment (see [`STALE_JOB_VARS`]), so a job submitted from inside
//!   another job never sees its parent's task counts, array indices or step ids.
//! - `SLURM_TASK_PID` is never set here: the launcher adds it after fork.
//! - `SLURM_UMASK` is never exported: like slurmstepd, the launcher applies
//!   `JobSpec::umask` to the shell process and the variable disappears (the golden batch
//!   environments have no `SLURM_UMASK`).
//!
//! Where sluice differs from Slurm 22.05 on purpose:
//! - `SLURM_JOB_START_TIME` and `SLURM_JOB_END_TIME` are set (Slurm sets them from 23.02
//!   on); checkpointing scripts use them to know how long they have left.
//! - `SLURM_CONF` is empty: sluice has no slurm.conf (see [`SLURM_CONF_VALUE`]).
//! - GPU variables (`CUDA_VISIBLE_DEVICES`, `SLURM_JOB_GPUS`, …) are not built here; they
//!   depend on the devices bound to the job and are added by the GPU binding code.

use crate::model::job::{Job, MemReq};
use crate::model::{TimeLimit, hostlist};
use std::collections::BTreeMap;

/// Value of `SLURM_CONF` inside jobs. Slurm points it at the node's slurm.conf; sluice
/// has none, and pointing Slurm-aware tools at sluice's TOML file would make them fail to
/// parse it. An empty value keeps the variable present (scripts under `set -u` that
/// mention it still work) while saying "no slurm.conf here".
pub const SLURM_CONF_VALUE: &str = "";

pub use crate::config::WORKING_CLUSTER_PORT;

/// Slurm 22.05's RPC protocol version (`SLURM_22_05_PROTOCOL_VERSION`), the version
/// sluice reports, for `SLURM_WORKING_CLUSTER`.
pub const WORKING_CLUSTER_PROTOCOL: u32 = 9728;

/// Plugin id of select/cons_tres (109), whose behaviour sluice's scheduler follows, for
/// `SLURM_WORKING_CLUSTER`.
pub const WORKING_CLUSTER_SELECT_ID: u32 = 109;

/// Default `TMPDIR` when the job did not bring one (Slurm's default `TmpFS`).
pub const DEFAULT_TMPDIR: &str = "/tmp";

/// Seconds Slurm adds to the start time for the end time of a job without time limit
/// (one year, as slurmctld does for `INFINITE`).
const UNLIMITED_END_SECS: i64 = 365 * 24 * 3600;

/// Job-describing variables removed from the inherited environment before this job's
/// own are added. Each of them is either set again below or must not leak from an
/// enclosing job (a job submitted from inside another job's shell).
pub const STALE_JOB_VARS: &[&str] = &[
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_NTASKS_PER_CORE",
    "SLURM_THREADS_PER_CORE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_RESTART_COUNT",
    "SLURM_TASK_PID",
    "SLURM_UMASK",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_STEP_GPUS",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
    "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_LABELIO",
    "SLURM_DISTRIBUTION",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_GPUS_PER_SOCKET",
    "SLURM_NTASKS_PER_GPU",
    "SLURM_GPU_BIND",
    "SLURM_CPUS_PER_GPU",
    "SLURM_MEM_PER_GPU",
];

/// The array task a batch shell belongs to, for the `SLURM_ARRAY_*` variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayTask {
    /// The array's master job id (`%A`, `SLURM_ARRAY_JOB_ID`).
    pub array_job_id: u32,
    /// This task's index (`%a`, `SLURM_ARRAY_TASK_ID`).
    pub task_id: u32,
    /// Smallest index of the array.
    pub min: u32,
    /// Largest index of the array.
    pub max: u32,
    /// Stride between indices (1 for `0-3`, 2 for `0-6:2`).
    pub step: u32,
    /// Number of tasks in the array.
    pub count: u32,
}

/// The environment of the batch shell of `job` on `node`, sorted by name.
///
/// `cluster` is the cluster name (`SLURM_CLUSTER_NAME`), `node` the node the shell runs
/// on (normally the allocation's first node), `now` the time used when the job has no
/// recorded start time yet.
pub fn batch_env(job: &Job, cluster: &str, node: &str, now: i64) -> Vec<(String, String)> {
    batch_env_with_array(job, array_task_of(job).as_ref(), cluster, node, now)
}

/// Variables that describe one job's allocation; a heterogeneous job's batch shell
/// gets each of them once per component with a `_HET_GROUP_<k>` suffix.
const HET_GROUP_VARS: &[&str] = &[
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_QOS",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_NODE",
];

/// The batch environment of a heterogeneous job's leader: its own variables, plus
/// `SLURM_HET_SIZE` and, for every component (the leader is group 0, `others` follow
/// in offset order), the allocation variables suffixed `_HET_GROUP_<k>`.
pub fn het_batch_env(
    leader: &Job,
    others: &[Job],
    cluster: &str,
    node: &str,
    now: i64,
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> =
        batch_env(leader, cluster, node, now).into_iter().collect();
    let all: Vec<&Job> = std::iter::once(leader).chain(others).collect();
    env.extend(het_group_env(&all, cluster, node, now));
    env.into_iter().collect()
}

/// `SLURM_HET_SIZE` and, for every component of a heterogeneous job (`components` in
/// offset order, the leader first), its allocation variables suffixed
/// `_HET_GROUP_<k>` (cf. Slurm's `env_array_for_job` with a het job offset). `node`
/// stands in for a component without an allocation.
pub fn het_group_env(
    components: &[&Job],
    cluster: &str,
    node: &str,
    now: i64,
) -> Vec<(String, String)> {
    let mut env = vec![("SLURM_HET_SIZE".to_string(), components.len().to_string())];
    for (k, comp) in components.iter().enumerate() {
        let comp_node = comp
            .alloc
            .as_ref()
            .and_then(|a| a.nodes.first().cloned())
            .unwrap_or_else(|| node.to_string());
        for (key, value) in batch_env(comp, cluster, &comp_node, now) {
            if HET_GROUP_VARS.contains(&key.as_str()) {
                env.push((format!("{key}_HET_GROUP_{k}"), value));
            }
        }
    }
    env
}

/// The array task `job` is, from its array fields; `None` for a job that is not a
/// started array task.
pub fn array_task_of(job: &Job) -> Option<ArrayTask> {
    let a = job.array.as_ref()?;
    Some(ArrayTask {
        array_job_id: job.array_job_id,
        task_id: job.array_task_id?,
        min: a.min,
        max: a.max,
        step: a.step,
        count: a.count,
    })
}

/// Like [`batch_env`], for a job that may be an array task.
pub fn batch_env_with_array(
    job: &Job,
    array: Option<&ArrayTask>,
    cluster: &str,
    node: &str,
    now: i64,
) -> Vec<(String, String)> {
    let spec = &job.spec;
    let mut env: BTreeMap<String, String> = (*spec.environment).clone();
    for k in STALE_JOB_VARS {
        env.remove(*k);
    }
    env.retain(|k, _| {
        k != "SLURM_HET_SIZE" && !(k.starts_with("SLURM_") && k.contains("_HET_GROUP_"))
    });
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };

    // The allocation; a job launched without one (should not happen) is treated as one
    // node, this one, with the CPUs it asked for.
    let (nodes, cpus): (Vec<String>, Vec<u32>) = match &job.alloc {
        Some(a) if !a.nodes.is_empty() => {
            let mut cpus = a.cpus.clone();
            cpus.resize(a.nodes.len(), 1);
            (a.nodes.clone(), cpus)
        }
        _ => (vec![node.to_string()], vec![job.req_cpus.max(1)]),
    };
    let node_idx = nodes.iter().position(|n| n == node).unwrap_or(0);
    let nodelist = hostlist::compress(&nodes);
    let nnodes = nodes.len() as u32;

    // Shell and node identity (slurmstepd).
    set("ENVIRONMENT", "BATCH".into());
    set("HOSTNAME", node.into());
    if !spec.work_dir.is_empty() {
        set("PWD", spec.work_dir.clone());
    }
    let tmpdir = spec
        .environment
        .get("TMPDIR")
        .filter(|t| !t.is_empty())
        .cloned()
        .unwrap_or_else(|| DEFAULT_TMPDIR.into());
    set("TMPDIR", tmpdir);
    // With --export=NONE the user's login variables are gone; Slurm would rebuild them
    // from a login shell. USER and LOGNAME are known here; HOME and SHELL need the
    // password database and are the launcher's to add.
    for k in ["USER", "LOGNAME"] {
        if !spec.environment.contains_key(k) && !job.user.is_empty() {
            set(k, job.user.clone());
        }
    }

    // Job identity.
    set("SLURM_CLUSTER_NAME", cluster.into());
    set("SLURM_CONF", SLURM_CONF_VALUE.into());
    set(
        "SLURM_WORKING_CLUSTER",
        format!(
            "{cluster}:localhost:{WORKING_CLUSTER_PORT}:{WORKING_CLUSTER_PROTOCOL}:{WORKING_CLUSTER_SELECT_ID}"
        ),
    );
    set("SLURM_JOB_ID", job.id.to_string());
    set("SLURM_JOBID", job.id.to_string());
    set("SLURM_JOB_NAME", spec.name.clone());
    set("SLURM_JOB_ACCOUNT", job.account.clone());
    set("SLURM_JOB_PARTITION", job.partition.clone());
    set("SLURM_JOB_QOS", job.qos.clone());
    set("SLURM_JOB_USER", job.user.clone());
    set("SLURM_JOB_UID", job.uid.to_string());
    set("SLURM_JOB_GID", job.gid.to_string());
    set("SLURM_SUBMIT_DIR", spec.submit_dir.clone());
    set("SLURM_SUBMIT_HOST", spec.submit_host.clone());
    let prio = spec
        .environment
        .get("SLURM_PRIO_PROCESS")
        .filter(|v| v.trim().parse::<i32>().is_ok())
        .cloned()
        .unwrap_or_else(|| "0".into());
    set("SLURM_PRIO_PROCESS", prio);
    if let Some(export) = &spec.export {
        set("SLURM_EXPORT_ENV", export.clone());
    }
    if job.restarts > 0 {
        set("SLURM_RESTART_COUNT", job.restarts.to_string());
    }
    let start = job.start_time.unwrap_or(now);
    let end = match job.time_limit {
        TimeLimit::Minutes(m) => start.saturating_add(i64::from(m) * 60),
        TimeLimit::Seconds(s) => start.saturating_add(s as i64),
        TimeLimit::Unlimited => start.saturating_add(UNLIMITED_END_SECS),
    };
    set("SLURM_JOB_START_TIME", start.to_string());
    set("SLURM_JOB_END_TIME", end.to_string());

    // Allocation.
    set("SLURM_JOB_NODELIST", nodelist.clone());
    set("SLURM_NODELIST", nodelist);
    set("SLURM_JOB_NUM_NODES", nnodes.to_string());
    set("SLURM_NNODES", nnodes.to_string());
    set("SLURM_JOB_CPUS_PER_NODE", compress_counts(&cpus));
    set("SLURM_CPUS_ON_NODE", cpus[node_idx].to_string());
    set("SLURMD_NODENAME", node.into());
    set("SLURM_NODE_ALIASES", "(null)".into());
    set("SLURM_TOPOLOGY_ADDR", node.into());
    set("SLURM_TOPOLOGY_ADDR_PATTERN", "node".into());

    // GPUs allocated on this node: the devices the job may see (binding per task
    // comes with steps).
    let gpus = job
        .alloc
        .as_ref()
        .map(|a| a.gpu_indices(node_idx))
        .unwrap_or_default();
    if !gpus.is_empty() {
        let list = gpus.join(",");
        for k in [
            "CUDA_VISIBLE_DEVICES",
            "GPU_DEVICE_ORDINAL",
            "ROCR_VISIBLE_DEVICES",
            "ZE_AFFINITY_MASK",
            "SLURM_JOB_GPUS",
        ] {
            set(k, list.clone());
        }
        set("SLURM_GPUS_ON_NODE", gpus.len().to_string());
    }
    // The GPU request as given (sbatch's output variables; `a100:2` when typed), which
    // srun reads back for the job's steps.
    let as_given = |g: &crate::model::gres::GresReq| match &g.kind {
        Some(k) => format!("{k}:{}", g.count),
        None => g.count.to_string(),
    };
    for (k, g) in [
        ("SLURM_GPUS", &spec.gpus),
        ("SLURM_GPUS_PER_NODE", &spec.gpus_per_node),
        ("SLURM_GPUS_PER_TASK", &spec.gpus_per_task),
        ("SLURM_GPUS_PER_SOCKET", &spec.gpus_per_socket),
    ] {
        if let Some(g) = g {
            set(k, as_given(g));
        }
    }
    if let Some(n) = spec.ntasks_per_gpu {
        set("SLURM_NTASKS_PER_GPU", n.to_string());
    }
    // sbatch(1) OUTPUT ENVIRONMENT: set only when asked for (here also through
    // --hint, which stands for them).
    if let Some(n) = spec.ntasks_per_core {
        set("SLURM_NTASKS_PER_CORE", n.to_string());
    }
    if let Some(n) = spec.threads_per_core {
        set("SLURM_THREADS_PER_CORE", n.to_string());
    }
    if let Some(b) = &spec.gpu_bind {
        set("SLURM_GPU_BIND", b.clone());
    }
    if let Some(c) = spec.cpus_per_gpu {
        set("SLURM_CPUS_PER_GPU", c.to_string());
    }
    if let Some(m) = spec.mem_per_gpu {
        set("SLURM_MEM_PER_GPU", m.to_string());
    }

    // The batch shell is task 0 of its own step on the first node.
    set("SLURM_PROCID", "0".into());
    set("SLURM_LOCALID", "0".into());
    set("SLURM_NODEID", "0".into());
    set("SLURM_GTIDS", "0".into());

    // Tasks: SLURM_NTASKS only when the user asked for a task count (-n or
    // --ntasks-per-node); otherwise the layout is one task per CPU group.
    let cpt = spec.cpus_per_task.filter(|&c| c > 0).unwrap_or(1);
    let ntpn = spec.ntasks_per_node.filter(|&n| n > 0);
    let asked_tasks = spec
        .ntasks
        .filter(|&n| n > 0)
        .or_else(|| ntpn.map(|n| n.saturating_mul(nnodes)));
    let ntasks = asked_tasks.unwrap_or_else(|| (cpus.iter().sum::<u32>() / cpt).max(1));
    if let Some(n) = asked_tasks {
        set("SLURM_NTASKS", n.to_string());
        set("SLURM_NPROCS", n.to_string());
    }
    if let Some(n) = ntpn {
        set("SLURM_NTASKS_PER_NODE", n.to_string());
    }
    if let Some(c) = spec.cpus_per_task.filter(|&c| c > 0) {
        set("SLURM_CPUS_PER_TASK", c.to_string());
    }
    let per_node = tasks_per_node(ntasks, &cpus, cpt, ntpn);
    set("SLURM_TASKS_PER_NODE", compress_counts(&per_node));

    // Memory: per CPU or per node, whichever the job's request was (DefMemPerCPU
    // resolves to per CPU). `--mem=0` (the whole node) reports what was allocated.
    match job.req_mem {
        MemReq::PerCpu(m) if m > 0 => set("SLURM_MEM_PER_CPU", m.to_string()),
        MemReq::PerNode(m) if m > 0 => set("SLURM_MEM_PER_NODE", m.to_string()),
        MemReq::PerNode(_) if spec.mem == Some(MemReq::PerNode(0)) => {
            if let Some(a) = job.alloc.as_ref().filter(|a| a.mem_per_node > 0) {
                set("SLURM_MEM_PER_NODE", a.mem_per_node.to_string());
            }
        }
        _ => {}
    }

    if let Some(a) = array {
        set("SLURM_ARRAY_JOB_ID", a.array_job_id.to_string());
        set("SLURM_ARRAY_TASK_ID", a.task_id.to_string());
        set("SLURM_ARRAY_TASK_COUNT", a.count.to_string());
        set("SLURM_ARRAY_TASK_MIN", a.min.to_string());
        set("SLURM_ARRAY_TASK_MAX", a.max.to_string());
        set("SLURM_ARRAY_TASK_STEP", a.step.to_string());
    }

    env.into_iter().collect()
}

/// Compresses per-node counts the way Slurm prints `SLURM_TASKS_PER_NODE` and
/// `SLURM_JOB_CPUS_PER_NODE`: runs of equal values become `value(xN)`, others stay
/// plain, comma-separated (`[2, 2, 2, 1]` → `2(x3),1`). Empty input gives `""`.
pub fn compress_counts(values: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let v = values[i];
        let run = values[i..].iter().take_while(|&&x| x == v).count();
        if run > 1 {
            out.push(format!("{v}(x{run})"));
        } else {
            out.push(v.to_string());
        }
        i += run;
    }
    out.join(",")
}

pub use crate::model::step::tasks_per_node;

/// Step and task variables removed from a step's inherited environment (srun's, which
/// inside a job carries the batch shell's or an enclosing step's) before the step's own
/// are set. `SLURM_CPUS_PER_TASK` and `SLURM_NTASKS_PER_NODE` are not among them: as
/// with Slurm's srun, which passes its whole environment to the tasks and overwrites
/// only what it sets (src/common/env.c `setup_env`), the job's values reach the tasks
/// of a step that did not ask for its own (Lightning's SLURMEnvironment and torchrun
/// recipes read them in the tasks).
pub const STALE_STEP_VARS: &[&str] = &[
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NNODES",
    "SLURM_NODELIST",
    "SLURM_TASKS_PER_NODE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_GTIDS",
    "SLURM_TASK_PID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
    "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_LABELIO",
    "SLURM_UNBUFFEREDIO",
    "SLURM_DISTRIBUTION",
    "SLURM_CPU_BIND",
    "SLURM_CPU_BIND_LIST",
    "SLURM_CPU_BIND_TYPE",
    "SLURM_CPU_BIND_VERBOSE",
    "SLURM_UMASK",
];

/// The port srun "listens" on, for `SLURM_SRUN_COMM_PORT` and `SLURM_STEP_LAUNCHER_PORT`.
/// sluice's srun opens no port (its I/O goes through the controller); 0 keeps the
/// variables numeric for scripts that parse them.
pub const SRUN_PORT: u16 = 0;

/// The environment shared by every task of step `ls` on `node`: srun's environment
/// (after `--export`) with the job's variables (as in a batch shell of the job) and the
/// step's, sorted by name. Cf. src/common/env.c `setup_env` as srun and slurmstepd
/// apply it.
pub fn step_env(ls: &crate::proto::LaunchStep, node: &str) -> Vec<(String, String)> {
    let job = &ls.job;
    let spec = &ls.spec;
    let mut env: BTreeMap<String, String> = spec.environment.clone();
    for k in STALE_STEP_VARS {
        env.remove(*k);
    }
    // The job's identity and allocation, from the job's record: the same values a batch
    // shell of the job gets (without the batch-only ones).
    let job_vars = batch_env(job, &ls.cluster, node, job.start_time.unwrap_or(0));
    const FROM_JOB: &[&str] = &[
        "SLURM_CLUSTER_NAME",
        "SLURM_CONF",
        "SLURM_WORKING_CLUSTER",
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_ACCOUNT",
        "SLURM_JOB_PARTITION",
        "SLURM_JOB_QOS",
        "SLURM_JOB_USER",
        "SLURM_JOB_UID",
        "SLURM_JOB_GID",
        "SLURM_SUBMIT_DIR",
        "SLURM_SUBMIT_HOST",
        "SLURM_PRIO_PROCESS",
        "SLURM_JOB_NODELIST",
        "SLURM_JOB_NUM_NODES",
        "SLURM_JOB_CPUS_PER_NODE",
        "SLURM_CPUS_ON_NODE",
        "SLURMD_NODENAME",
        "SLURM_TOPOLOGY_ADDR",
        "SLURM_TOPOLOGY_ADDR_PATTERN",
        "SLURM_JOB_START_TIME",
        "SLURM_JOB_END_TIME",
        "SLURM_JOB_GPUS",
        "TMPDIR",
    ];
    for (k, v) in job_vars {
        if FROM_JOB.contains(&k.as_str()) {
            env.insert(k, v);
        }
    }
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    let layout = &ls.layout;
    let nodelist = hostlist::compress(&layout.nodes);
    let nnodes = layout.nodes.len().to_string();
    let ntasks = layout.ntasks().to_string();
    let per_node = compress_counts(&layout.tasks_per_node());
    set("SLURM_STEP_ID", ls.step_id.to_string());
    set("SLURM_STEPID", ls.step_id.to_string());
    set("SLURM_STEP_NODELIST", nodelist.clone());
    set("SLURM_STEP_NUM_NODES", nnodes.clone());
    set("SLURM_STEP_NUM_TASKS", ntasks.clone());
    set("SLURM_STEP_TASKS_PER_NODE", per_node.clone());
    set("SLURM_NODELIST", nodelist);
    set("SLURM_NNODES", nnodes);
    set("SLURM_NTASKS", ntasks.clone());
    set("SLURM_NPROCS", ntasks);
    set("SLURM_TASKS_PER_NODE", per_node);
    set("SLURM_DISTRIBUTION", spec.distribution.to_string());
    let ip = if spec.srun_ip.is_empty() {
        "127.0.0.1".to_string()
    } else {
        spec.srun_ip.clone()
    };
    set("SLURM_LAUNCH_NODE_IPADDR", ip.clone());
    set("SLURM_SRUN_COMM_HOST", ip);
    set("SLURM_SRUN_COMM_PORT", SRUN_PORT.to_string());
    set("SLURM_STEP_LAUNCHER_PORT", SRUN_PORT.to_string());
    set("SLURM_UMASK", format!("{:04o}", spec.umask & 0o7777));
    if spec.label {
        set("SLURM_LABELIO", "1".into());
    }
    if spec.unbuffered {
        set("SLURM_UNBUFFEREDIO", "1".into());
    }
    if let Some(c) = spec.cpus_per_task.filter(|&c| c > 0) {
        set("SLURM_CPUS_PER_TASK", c.to_string());
    }
    if let Some(n) = spec.ntasks_per_node.filter(|&n| n > 0) {
        set("SLURM_NTASKS_PER_NODE", n.to_string());
    }
    if let Some(ranks) = layout.tasks.get(ls.node_index as usize) {
        let g: Vec<String> = ranks.iter().map(u32::to_string).collect();
        set("SLURM_GTIDS", g.join(","));
    }
    if let Some(h) = &ls.het {
        env.extend(het_step_env(
            h,
            &ls.cluster,
            node,
            job.start_time.unwrap_or(0),
        ));
    }
    env.into_iter().collect()
}

/// What a part of a heterogeneous job's step adds to (and overrides in) its tasks'
/// environment (cf. slurmstepd's `het_job_*` fields and srun's
/// `_compress_het_job_nodelist`): SLURM_JOB_ID is the leader's; the step variables
/// and SLURM_NTASKS, SLURM_NNODES, SLURM_NODELIST, SLURM_TASKS_PER_NODE describe
/// the whole step; SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES and
/// SLURM_JOB_CPUS_PER_NODE the nodes of the components it spans (each node's CPUs
/// as the first of them that has it); plus [`het_group_env`].
pub fn het_step_env(
    h: &crate::proto::HetStepEnv,
    cluster: &str,
    node: &str,
    now: i64,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let mut set = |k: &str, v: String| env.push((k.to_string(), v));
    if let Some(leader) = h.components.first() {
        set("SLURM_JOB_ID", leader.id.to_string());
        set("SLURM_JOBID", leader.id.to_string());
    }
    let nodelist = hostlist::compress_sorted(&h.step_nodes);
    let nnodes = h.step_nodes.len().to_string();
    let ntasks = h.step_tasks.iter().sum::<u32>().to_string();
    let per_node = compress_counts(&h.step_tasks);
    for (k, v) in [
        ("SLURM_STEP_NODELIST", &nodelist),
        ("SLURM_NODELIST", &nodelist),
        ("SLURM_STEP_NUM_NODES", &nnodes),
        ("SLURM_NNODES", &nnodes),
        ("SLURM_STEP_NUM_TASKS", &ntasks),
        ("SLURM_NTASKS", &ntasks),
        ("SLURM_NPROCS", &ntasks),
        ("SLURM_STEP_TASKS_PER_NODE", &per_node),
        ("SLURM_TASKS_PER_NODE", &per_node),
    ] {
        set(k, v.clone());
    }
    // The nodes of the components the step runs in, each once.
    let mut nodes: Vec<String> = Vec::new();
    let mut cpus: Vec<u32> = Vec::new();
    for &k in &h.parts {
        let Some(a) = h.components.get(k as usize).and_then(|c| c.alloc.as_ref()) else {
            continue;
        };
        for (n, &c) in a.nodes.iter().zip(&a.cpus) {
            if !nodes.contains(n) {
                nodes.push(n.clone());
                cpus.push(c);
            }
        }
    }
    if !nodes.is_empty() {
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by(|&a, &b| hostlist::natural_cmp(&nodes[a], &nodes[b]));
        let sorted: Vec<String> = order.iter().map(|&i| nodes[i].clone()).collect();
        let sorted_cpus: Vec<u32> = order.iter().map(|&i| cpus[i]).collect();
        set("SLURM_JOB_NODELIST", hostlist::compress(&sorted));
        set("SLURM_JOB_NUM_NODES", sorted.len().to_string());
        set("SLURM_JOB_CPUS_PER_NODE", compress_counts(&sorted_cpus));
    }
    let comps: Vec<&Job> = h.components.iter().collect();
    env.extend(het_group_env(&comps, cluster, node, now));
    env
}

/// The environment of task `rank` (local index `local`, on the step's node
/// `node_index`): the step's plus SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID.
/// (SLURM_TASK_PID is added by the launcher after fork.)
pub fn task_env(
    step: &[(String, String)],
    rank: u32,
    local: u32,
    node_index: u32,
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = step.iter().cloned().collect();
    env.insert("SLURM_PROCID".into(), rank.to_string());
    env.insert("SLURM_LOCALID".into(), local.to_string());
    env.insert("SLURM_NODEID".into(), node_index.to_string());
    env.into_iter().collect()
}

/// The SLURM_CPU_BIND* variables of a task bound to `cpus`: `map_cpu:` with the
/// CPU id for `--cpu-bind=map_cpu`, else `mask_cpu:` with a hexadecimal mask (the
/// automatic bindings are masks once laid out, as in Slurm).
pub fn cpu_bind_env(bind: &crate::model::step::CpuBind, cpus: &[usize]) -> Vec<(String, String)> {
    use crate::model::step::CpuBindKind;
    let verbose = if bind.verbose { "verbose" } else { "quiet" };
    let (ty, list) = match (bind.kind, cpus) {
        (CpuBindKind::MapCpu, [one]) => ("map_cpu:", one.to_string()),
        _ => ("mask_cpu:", super::cpubind::mask_hex(cpus)),
    };
    vec![
        ("SLURM_CPU_BIND_VERBOSE".into(), verbose.into()),
        ("SLURM_CPU_BIND_TYPE".into(), ty.into()),
        ("SLURM_CPU_BIND_LIST".into(), list.clone()),
        ("SLURM_CPU_BIND".into(), format!("{verbose},{ty}{list}")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::job::{Allocation, JobSpec, JobState};
    use std::path::PathBuf;

    /// The real Slurm transcripts kept with the tests (`tests/data/golden`).
    fn golden_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden")
    }

    /// The `env | sort` lines of the first `[file: …]` block of a golden transcript.
    fn golden_env(name: &str) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(golden_dir().join(name)).expect("golden file readable");
        let mut lines = text.lines().skip_while(|l| !l.starts_with("[file: "));
        lines.next().expect("golden file has an output block");
        lines
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn job(id: u32, name: &str, cpus: Vec<u32>) -> Job {
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
                ..Default::default()
            }),
            ..Job::default()
        }
    }

    /// Variables a golden file shows that batch_env does not make: the shell's own
    /// (`SHLVL`, `_`), the launcher's (`SLURM_TASK_PID`), and GPU binding variables.
    const NOT_OURS: &[&str] = &["SHLVL", "_", "SLURM_TASK_PID"];
    /// Variables sluice adds on purpose (module docs).
    const EXTRAS: &[&str] = &["SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"];
    /// What the client's `--export=ALL` would have carried in: the golden's plain
    /// variables, minus those the node side sets.
    const SET_BY_NODE: &[&str] = &["ENVIRONMENT", "HOSTNAME", "TMPDIR", "PWD"];

    /// Builds the job's inherited environment from a golden file, runs batch_env and
    /// compares every variable (SLURM_CONF excepted: see SLURM_CONF_VALUE).
    fn check_against_golden(file: &str, mut j: Job, array: Option<ArrayTask>) {
        let golden = golden_env(file);
        j.spec.environment = golden
            .iter()
            .filter(|(k, _)| !k.starts_with("SLURM") && !NOT_OURS.contains(&k.as_str()))
            .filter(|(k, _)| !SET_BY_NODE.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got: BTreeMap<String, String> =
            batch_env_with_array(&j, array.as_ref(), "anchor", "node01", 5000)
                .into_iter()
                .filter(|(k, _)| !EXTRAS.contains(&k.as_str()))
                .collect();
        let mut want: BTreeMap<String, String> = golden
            .into_iter()
            .filter(|(k, _)| !NOT_OURS.contains(&k.as_str()))
            .collect();
        assert_eq!(
            want.insert("SLURM_CONF".into(), SLURM_CONF_VALUE.into()),
            Some("/etc/slurm/slurm.conf".into()),
            "{file}"
        );
        for (k, v) in &want {
            assert_eq!(got.get(k), Some(v), "{file}: {k}");
        }
        for k in got.keys() {
            assert!(want.contains_key(k), "{file}: unexpected {k}={}", got[k]);
        }
    }

    #[test]
    fn golden_plain() {
        check_against_golden("env_sbatch_plain.txt", job(125, "env.sh", vec![1]), None);
    }

    #[test]
    fn golden_wrap() {
        check_against_golden("env_sbatch_wrap.txt", job(146, "wrap", vec![1]), None);
    }

    #[test]
    fn golden_n1_n4() {
        let mut j = job(128, "env.sh", vec![4]);
        j.spec.ntasks = Some(4);
        j.spec.nodes_min = Some(1);
        check_against_golden("env_sbatch_N1_n4.txt", j, None);
    }

    #[test]
    fn golden_ntasks_per_node_cpus_per_task() {
        let mut j = job(130, "env.sh", vec![4]);
        j.spec.ntasks_per_node = Some(2);
        j.spec.cpus_per_task = Some(2);
        check_against_golden("env_sbatch_ntpn2_cpt2.txt", j, None);
    }

    #[test]
    fn golden_mem_per_node_other_partition() {
        let mut j = job(136, "env.sh", vec![1]);
        j.partition = "batch".into();
        j.spec.partition = Some("batch".into());
        j.spec.mem = Some(MemReq::PerNode(1024));
        j.req_mem = MemReq::PerNode(1024);
        j.time_limit = TimeLimit::Minutes(2);
        check_against_golden("env_sbatch_mem1G_batchpart.txt", j, None);
    }

    #[test]
    fn golden_gpu_jobs() {
        let two_gpus = |mut j: Job| {
            let a = j.alloc.as_mut().unwrap();
            a.gres = vec![crate::model::job::gpu_allocs(&[0, 1])];
            j
        };
        let gpu2 = crate::model::gres::parse_gpus("2").unwrap();
        let mut j = two_gpus(job(134, "env.sh", vec![1]));
        j.spec.gpus = Some(gpu2.clone());
        check_against_golden("env_sbatch_gpus2.txt", j, None);
        let mut j = two_gpus(job(132, "env.sh", vec![1]));
        j.spec.gres = vec![gpu2];
        check_against_golden("env_sbatch_gres_gpu2.txt", j, None);
    }

    #[test]
    fn gpu_requests_are_exported_as_given() {
        let mut j = job(7, "x", vec![4]);
        let g = |s: &str| Some(crate::model::gres::parse_gpus(s).unwrap());
        j.spec.gpus = g("a100:4");
        j.spec.gpus_per_node = g("2");
        j.spec.gpus_per_socket = g("1");
        j.spec.ntasks_per_gpu = Some(2);
        j.spec.gpu_bind = Some("closest".into());
        j.spec.cpus_per_gpu = Some(3);
        j.spec.mem_per_gpu = Some(1024);
        let e = batch_env(&j, "c", "node1", 0);
        for (k, v) in [
            ("SLURM_GPUS", "a100:4"),
            ("SLURM_GPUS_PER_NODE", "2"),
            ("SLURM_GPUS_PER_SOCKET", "1"),
            ("SLURM_NTASKS_PER_GPU", "2"),
            ("SLURM_GPU_BIND", "closest"),
            ("SLURM_CPUS_PER_GPU", "3"),
            ("SLURM_MEM_PER_GPU", "1024"),
        ] {
            assert_eq!(get(&e, k), Some(v), "{k}");
        }
        // A job without GPU requests inherits none of them from its submitter.
        let mut j = job(8, "x", vec![1]);
        j.spec.environment =
            BTreeMap::from([("SLURM_GPUS_PER_TASK".to_string(), "1".to_string())]).into();
        assert_eq!(
            get(&batch_env(&j, "c", "node1", 0), "SLURM_GPUS_PER_TASK"),
            None
        );
    }

    #[test]
    fn golden_array_task() {
        let arr = ArrayTask {
            array_job_id: 151,
            task_id: 2,
            min: 0,
            max: 3,
            step: 1,
            count: 4,
        };
        check_against_golden(
            "env_sbatch_array_task2.txt",
            job(155, "env.sh", vec![1]),
            Some(arr),
        );
    }

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn multi_node_counts_are_compressed() {
        let mut j = job(7, "mn", vec![2, 2, 2, 1]);
        j.spec.ntasks = Some(7);
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_JOB_CPUS_PER_NODE"), Some("2(x3),1"));
        assert_eq!(get(&env, "SLURM_TASKS_PER_NODE"), Some("2(x3),1"));
        assert_eq!(get(&env, "SLURM_JOB_NODELIST"), Some("node[01-04]"));
        assert_eq!(get(&env, "SLURM_NNODES"), Some("4"));
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("2"));
        let on_last = batch_env(&j, "c", "node04", 0);
        assert_eq!(get(&on_last, "SLURM_CPUS_ON_NODE"), Some("1"));
        assert_eq!(get(&on_last, "HOSTNAME"), Some("node04"));
    }

    #[test]
    fn compress_counts_forms() {
        assert_eq!(compress_counts(&[]), "");
        assert_eq!(compress_counts(&[4]), "4");
        assert_eq!(compress_counts(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(compress_counts(&[1, 2, 2, 1, 1]), "1,2(x2),1(x2)");
        assert_eq!(compress_counts(&[32, 32]), "32(x2)");
    }

    #[test]
    fn task_layout() {
        // Balanced within capacity, as Slurm's block layout counts tasks.
        assert_eq!(tasks_per_node(5, &[4, 4], 1, None), vec![3, 2]);
        assert_eq!(tasks_per_node(5, &[4, 1], 1, None), vec![4, 1]);
        assert_eq!(tasks_per_node(2, &[4], 2, None), vec![2]);
        assert_eq!(tasks_per_node(4, &[8, 8], 1, Some(2)), vec![2, 2]);
        // Over-subscription spreads the rest.
        assert_eq!(tasks_per_node(7, &[2, 2], 1, None), vec![4, 3]);
        assert_eq!(tasks_per_node(3, &[], 1, None), Vec::<u32>::new());
        assert_eq!(tasks_per_node(1, &[1], 4, None), vec![1]);
    }

    #[test]
    fn no_task_count_means_one_task_per_cpu_group() {
        let mut j = job(9, "x", vec![8]);
        j.spec.cpus_per_task = Some(2);
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_TASKS_PER_NODE"), Some("4"));
        assert_eq!(get(&env, "SLURM_NTASKS"), None);
        assert_eq!(get(&env, "SLURM_CPUS_PER_TASK"), Some("2"));
    }

    #[test]
    fn overrides_and_strips_inherited_job_variables() {
        let mut j = job(11, "inner", vec![1]);
        for (k, v) in [
            ("SLURM_JOB_ID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_TASK_PID", "77"),
            ("SLURM_UMASK", "0022"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PRIO_PROCESS", "5"),
            ("TMPDIR", "/scratch/alice"),
            ("MY_VAR", "kept"),
        ] {
            j.spec.environment.insert(k.into(), v.into());
        }
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_JOB_ID"), Some("11"));
        for k in [
            "SLURM_NTASKS",
            "SLURM_ARRAY_TASK_ID",
            "SLURM_TASK_PID",
            "SLURM_UMASK",
            "SLURM_STEP_ID",
        ] {
            assert_eq!(get(&env, k), None, "{k}");
        }
        assert_eq!(get(&env, "SLURM_PRIO_PROCESS"), Some("5"));
        assert_eq!(get(&env, "TMPDIR"), Some("/scratch/alice"));
        assert_eq!(get(&env, "MY_VAR"), Some("kept"));
        assert!(env.windows(2).all(|w| w[0].0 < w[1].0), "sorted, unique");
    }

    #[test]
    fn export_restart_times_and_user() {
        let mut j = job(12, "x", vec![1]);
        j.spec.export = Some("NONE".into());
        j.restarts = 2;
        j.start_time = None;
        j.time_limit = TimeLimit::Minutes(5);
        let env = batch_env(&j, "lab", "node01", 1_000);
        assert_eq!(get(&env, "SLURM_EXPORT_ENV"), Some("NONE"));
        assert_eq!(get(&env, "SLURM_RESTART_COUNT"), Some("2"));
        assert_eq!(get(&env, "SLURM_JOB_START_TIME"), Some("1000"));
        assert_eq!(get(&env, "SLURM_JOB_END_TIME"), Some("1300"));
        assert_eq!(get(&env, "USER"), Some("alice"));
        assert_eq!(get(&env, "LOGNAME"), Some("alice"));
        assert_eq!(
            get(&env, "SLURM_WORKING_CLUSTER"),
            Some("lab:localhost:6817:9728:109")
        );
        assert_eq!(get(&env, "SLURM_CONF"), Some(""));
        assert_eq!(get(&env, "TMPDIR"), Some("/tmp"));
        j.time_limit = TimeLimit::Unlimited;
        let env = batch_env(&j, "lab", "node01", 1_000);
        assert_eq!(
            get(&env, "SLURM_JOB_END_TIME"),
            Some((1_000 + UNLIMITED_END_SECS).to_string().as_str())
        );
    }

    #[test]
    fn memory_variables() {
        let mut j = job(13, "x", vec![2]);
        j.req_mem = MemReq::PerNode(0);
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_MEM_PER_CPU"), None);
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), None);
        // --mem=0: the whole node, reported as what was allocated.
        j.spec.mem = Some(MemReq::PerNode(0));
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), Some("400"));
    }

    #[test]
    fn missing_allocation_does_not_panic() {
        let mut j = job(14, "x", vec![1]);
        j.alloc = None;
        j.req_cpus = 3;
        let env = batch_env(&j, "c", "here", 0);
        assert_eq!(get(&env, "SLURM_JOB_NODELIST"), Some("here"));
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("3"));
        let mut j = job(15, "x", vec![1]);
        j.alloc.as_mut().unwrap().cpus.clear();
        let env = batch_env(&j, "c", "node01", 0);
        assert_eq!(get(&env, "SLURM_CPUS_ON_NODE"), Some("1"));
    }

    /// Task 0's environment under `srun -n 3 --label env` in an `sbatch -n 3` job
    /// (golden env_srun_in_batch): the batch shell's environment is srun's, the step
    /// adds its own and the task's.
    #[test]
    fn step_task_environment_matches_golden() {
        let text = std::fs::read_to_string(golden_dir().join("env_srun_in_batch.txt")).unwrap();
        let golden: BTreeMap<String, String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("0: "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(golden.len() > 40);
        let mut j = job(158, "srun_env.sh", vec![3]);
        j.spec.ntasks = Some(3);
        j.spec.environment = golden
            .iter()
            .filter(|(k, _)| !k.starts_with("SLURM") && !NOT_OURS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // srun runs in the batch shell, so its environment is the shell's.
        let shell: BTreeMap<String, String> = batch_env(&j, "anchor", "node01", 5000)
            .into_iter()
            .collect();
        let ls = crate::proto::LaunchStep {
            job: Box::new(j),
            step_id: 0,
            spec: Box::new(crate::model::step::StepSpec {
                name: "env".into(),
                argv: vec!["env".into()],
                environment: shell,
                work_dir: "/home/alice/golden-work".into(),
                ntasks: Some(3),
                label: true,
                srun_ip: "127.0.0.1".into(),
                umask: 0o022,
                ..Default::default()
            }),
            layout: crate::model::step::StepLayout {
                nodes: vec!["node01".into()],
                cpus: vec![3],
                tasks: vec![vec![0, 1, 2]],
                gres: Vec::new(),
                cpu_ids: Vec::new(),
            },
            node_index: 0,
            kill_wait: 30,
            cluster: "anchor".into(),
            cgroup: Default::default(),
            node_gres: Vec::new(),
            scripts: Default::default(),
            linger_secs: 0,
            het: None,
        };
        let got: BTreeMap<String, String> = task_env(&step_env(&ls, "node01"), 0, 0, 0)
            .into_iter()
            .collect();
        // Differences on purpose: no slurm.conf, no srun port, no het-job pack
        // variables, SLURM_TASK_PID set after fork; plus the shell's own variables.
        let differ = [
            "SLURM_CONF",
            "SLURM_SRUN_COMM_PORT",
            "SLURM_STEP_LAUNCHER_PORT",
            "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0",
            "SLURM_TASK_PID",
            "SRUN_DEBUG",
        ];
        for (k, v) in golden.iter().filter(|(k, _)| !differ.contains(&k.as_str())) {
            if NOT_OURS.contains(&k.as_str()) {
                continue;
            }
            assert_eq!(got.get(k), Some(v), "{k}");
        }
        assert_eq!(
            got.get("SLURM_SRUN_COMM_PORT").map(String::as_str),
            Some("0")
        );
        for k in got.keys() {
            assert!(
                golden.contains_key(k) || EXTRAS.contains(&k.as_str()),
                "unexpected {k}={}",
                got[k]
            );
        }
    }

    #[test]
    fn a_het_step_part_sees_the_whole_step_and_every_component() {
        use crate::model::job::HetInfo;
        let mut l = job(40, "lead", vec![2]);
        l.het = Some(HetInfo {
            job_id: 40,
            offset: 0,
            size: 2,
        });
        let mut c = job(41, "other", vec![1]);
        c.het = Some(HetInfo {
            job_id: 40,
            offset: 1,
            size: 2,
        });
        c.alloc.as_mut().unwrap().nodes = vec!["node02".into()];
        let ls = crate::proto::LaunchStep {
            job: Box::new(c.clone()),
            step_id: 3,
            spec: Box::new(crate::model::step::StepSpec {
                name: "hostname".into(),
                argv: vec!["hostname".into()],
                work_dir: "/tmp".into(),
                het_group: Some(1),
                ..Default::default()
            }),
            layout: crate::model::step::StepLayout {
                nodes: vec!["node02".into()],
                cpus: vec![1],
                tasks: vec![vec![2]],
                gres: Vec::new(),
                cpu_ids: Vec::new(),
            },
            node_index: 0,
            kill_wait: 30,
            cluster: "c".into(),
            cgroup: Default::default(),
            node_gres: Vec::new(),
            scripts: Default::default(),
            linger_secs: 0,
            het: Some(crate::proto::HetStepEnv {
                components: vec![l, c],
                parts: vec![0, 1],
                node_offset: 1,
                step_nodes: vec!["node01".into(), "node02".into()],
                step_tasks: vec![2, 1],
            }),
        };
        let env: BTreeMap<String, String> = task_env(&step_env(&ls, "node02"), 2, 0, ls.node_id())
            .into_iter()
            .collect();
        let get = |k: &str| env.get(k).map(String::as_str);
        for (k, v) in [
            ("SLURM_JOB_ID", "40"),
            ("SLURM_JOBID", "40"),
            ("SLURM_HET_SIZE", "2"),
            ("SLURM_JOB_ID_HET_GROUP_0", "40"),
            ("SLURM_JOB_ID_HET_GROUP_1", "41"),
            ("SLURM_JOB_NAME_HET_GROUP_1", "other"),
            ("SLURM_JOB_NODELIST_HET_GROUP_1", "node02"),
            ("SLURM_PROCID", "2"),
            ("SLURM_NODEID", "1"),
            ("SLURM_LOCALID", "0"),
            ("SLURM_GTIDS", "2"),
            ("SLURM_STEP_ID", "3"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_NPROCS", "3"),
            ("SLURM_STEP_NUM_TASKS", "3"),
            ("SLURM_NNODES", "2"),
            ("SLURM_STEP_NUM_NODES", "2"),
            ("SLURM_STEP_NODELIST", "node[01-02]"),
            ("SLURM_NODELIST", "node[01-02]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2,1"),
            ("SLURM_TASKS_PER_NODE", "2,1"),
            ("SLURM_JOB_NODELIST", "node[01-02]"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_JOB_CPUS_PER_NODE", "2,1"),
        ] {
            assert_eq!(get(k), Some(v), "{k}");
        }
        // The component's own identity stays in its _HET_GROUP_ variables only.
        assert_eq!(get("SLURM_JOB_NAME"), Some("other"));
    }
}
