//! Configuration: the TOML file of system mode (`/etc/sluice/sluice.toml` or
//! `$SLUICE_CONF`), and the zero-config personal mode derived from the environment
//! (DESIGN.md §1). Cf. slurm.conf's NodeName= and PartitionName= lines.
//!
//! A loaded [`Config`] is fully resolved: every path is absolute, every partition's node
//! list is expanded and refers to declared nodes.

pub mod gres_conf;
pub mod personal;
pub mod sched;
pub mod scripts;
pub mod slurm_export;
pub mod slurm_import;
pub mod ssh_addr;
pub mod topology_conf;

use crate::model::hostlist;
use crate::model::{Partition, PartitionState, TimeLimit};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The Slurm version sluice reports (`sinfo --version`, `scontrol show config`): that of
/// the golden files it is checked against.
pub const DEFAULT_SLURM_VERSION: &str = "22.05.8";

/// The Slurm version front-ends report (`--version`): the loaded configuration's
/// `slurm_version`, or [`DEFAULT_SLURM_VERSION`] when no configuration loads. Needs no
/// controller.
pub fn advertised_slurm_version() -> String {
    Config::load()
        .map(|c| c.slurm_version)
        .unwrap_or_else(|_| DEFAULT_SLURM_VERSION.to_string())
}

/// Slurm's default MaxArraySize: array indices run from 0 to 1000.
pub const DEFAULT_MAX_ARRAY_SIZE: u32 = 1001;

/// Slurm's default SlurmctldPort, reported in `SLURM_WORKING_CLUSTER` and as
/// `scontrol show config`'s SlurmctldPort. sluice opens no TCP port; the field keeps the
/// variable's shape for tools that split it.
pub const WORKING_CLUSTER_PORT: u16 = 6817;

/// Default path of the system-mode configuration file.
pub const SYSTEM_CONF: &str = "/etc/sluice/sluice.toml";

/// Errors loading configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("{path}: {msg}")]
    Invalid { path: PathBuf, msg: String },
}

/// Whether the controller serves one user without configuration, or a system from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Zero-config: one user's controller, started on demand, one local node.
    Personal,
    /// Configured from a file; the controller usually runs as root.
    System,
}

/// Default known_hosts file the controller checks remote nodes' host keys against.
pub const SYSTEM_KNOWN_HOSTS: &str = "/etc/sluice/known_hosts";

/// Default remote path the controller pushes its own binary to (`~` is the SSH user's
/// home directory on the node).
pub const DEFAULT_PUSH_PATH: &str = "~/.local/lib/sluice/sluice";

/// A node as declared. `None` fields are detected by the node's agent.
///
/// A node with `ssh` set is remote: the controller reaches its agent over SSH
/// (`transport::ssh`); a node without it is served by the controller's in-process agent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConf {
    pub name: String,
    #[serde(default)]
    pub cpus: Option<u32>,
    /// MiB (`RealMemory`).
    #[serde(default, alias = "real_memory")]
    pub memory: Option<u64>,
    #[serde(default)]
    pub sockets: Option<u32>,
    #[serde(default)]
    pub cores_per_socket: Option<u32>,
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub weight: Option<u32>,
    /// Temporary disk space in MiB (slurm.conf `TmpDisk=`; default 0), what
    /// `--tmp` asks of a node.
    #[serde(default)]
    pub tmp_disk: Option<u64>,
    /// Generic resources (`gpu:h100:8,mps:100`), as gres.conf would declare them.
    #[serde(default)]
    pub gres: Option<String>,
    /// CPUs close to each GRES device, in device order (`["0-15", "16-31"]`, gres.conf
    /// `Cores=`); devices beyond the list have no affinity.
    #[serde(default)]
    pub gres_cores: Vec<String>,
    /// `user@host[:port]` (or `host`, `user@[v6addr]:port`) of a remote node.
    #[serde(default)]
    pub ssh: Option<String>,
    /// Private key the controller authenticates with; after loading, defaults to the key
    /// `sluice keygen` creates (`<state_dir>/ssh/id_ed25519`) for remote nodes.
    #[serde(default)]
    pub identity_file: Option<PathBuf>,
    /// known_hosts file the node's host key must be in; after loading, defaults to
    /// [`SYSTEM_KNOWN_HOSTS`] for remote nodes.
    #[serde(default)]
    pub known_hosts: Option<PathBuf>,
    /// Whether the controller may copy its own binary to the node when the node has no
    /// `sluice` or one of another protocol version (default: true; only done when the
    /// node's OS and architecture are the controller's).
    #[serde(default)]
    pub push_binary: Option<bool>,
    /// The command that runs sluice on the node (default `sluice`, looked up in the SSH
    /// session's PATH).
    #[serde(default)]
    pub sluice_path: Option<String>,
    /// Where a pushed binary goes on the node (default [`DEFAULT_PUSH_PATH`]).
    #[serde(default)]
    pub push_path: Option<String>,
    /// The remote agent's spool directory (default: the agent's own default,
    /// `/var/spool/sluice` as root).
    #[serde(default)]
    pub spool_dir: Option<String>,
    /// What to do about GPUs used by processes of no sluice job: `avoid` (default;
    /// they are not allocated while busy), `ignore` (Slurm's behaviour), `drain` (the
    /// node drains while one is busy). See `ctld::state::gpu` (issue 24). Without it,
    /// the strictest `gpu_foreign` of the node's partitions applies.
    #[serde(default)]
    pub gpu_foreign: Option<crate::model::node::GpuForeign>,
    /// Devices from `[[gres]]` entries or the imported gres.conf, when any names this
    /// node (they replace `gres`/`gres_cores`).
    #[serde(skip)]
    pub gres_declared: Option<Vec<crate::model::gres::GresDevice>>,
    /// gres.conf `AutoDetect=` for this node: `Some(false)` keeps the agent's NVML GPUs
    /// out; `None`/`Some(true)` lets them in when nothing is declared.
    #[serde(skip)]
    pub gres_autodetect: Option<bool>,
}

impl NodeConf {
    /// A node with this name and nothing declared.
    pub fn named(name: &str) -> NodeConf {
        NodeConf {
            name: name.to_string(),
            ..NodeConf::default()
        }
    }

    /// Whether the node is reached over SSH.
    pub fn is_remote(&self) -> bool {
        self.ssh.is_some()
    }

    /// The declared GRES devices, with their core affinity.
    ///
    /// Errors: a malformed `gres` or `gres_cores` entry.
    pub fn gres_devices(&self) -> Result<Vec<crate::model::gres::GresDevice>, String> {
        if let Some(d) = &self.gres_declared {
            return Ok(d.clone());
        }
        let mut devs = match &self.gres {
            None => Vec::new(),
            Some(g) => crate::model::gres::parse_node_gres(g).map_err(|e| e.to_string())?,
        };
        for (d, cores) in devs.iter_mut().zip(&self.gres_cores) {
            d.cores =
                parse_cpu_list(cores).ok_or_else(|| format!("bad gres_cores entry '{cores}'"))?;
        }
        Ok(devs)
    }
}

/// Parses a CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?);
                if b < a || b - a > 65536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// `[scheduler]`: backfill parameters (Slurm's `SchedulerParameters=bf_*`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SchedulerConf {
    #[serde(default)]
    policy: Option<String>,
    /// Minutes, as Slurm's bf_window.
    #[serde(default)]
    bf_window: Option<u32>,
    /// Seconds.
    #[serde(default)]
    bf_resolution: Option<u32>,
    #[serde(default)]
    bf_max_job_test: Option<u32>,
    #[serde(default)]
    bf_max_job_user: Option<u32>,
    #[serde(default)]
    bf_continue: Option<bool>,
    /// Seconds.
    #[serde(default)]
    bf_interval: Option<u32>,
    /// `preempt/none`, `preempt/partition_prio`, `preempt/qos`.
    #[serde(default)]
    preempt_type: Option<String>,
    /// `OFF`, `CANCEL`, `REQUEUE`, `SUSPEND[,GANG]`.
    #[serde(default)]
    preempt_mode: Option<String>,
    /// Slurm's time-limit format (`10` = ten minutes, `[D-]HH:MM:SS`).
    #[serde(default)]
    preempt_exempt_time: Option<String>,
    /// Seconds: the longest `--switches=N@wait` wait (`max_switch_wait`).
    #[serde(default)]
    max_switch_wait: Option<u32>,
}

/// `[priority]`: priority/multifactor weights and options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriorityConf {
    #[serde(default)]
    weight_age: Option<u32>,
    #[serde(default)]
    weight_assoc: Option<u32>,
    #[serde(default)]
    weight_fairshare: Option<u32>,
    #[serde(default)]
    weight_jobsize: Option<u32>,
    #[serde(default)]
    weight_partition: Option<u32>,
    #[serde(default)]
    weight_qos: Option<u32>,
    /// `cpu=100,mem=1,gres/gpu=1000` (PriorityWeightTRES).
    #[serde(default)]
    weight_tres: Option<String>,
    /// A duration (`7-0`, `14-0`), PriorityMaxAge.
    #[serde(default)]
    max_age: Option<String>,
    #[serde(default)]
    decay_half_life: Option<String>,
    #[serde(default)]
    favor_small: Option<bool>,
    /// `SMALL_RELATIVE_TO_TIME`, `NO_FAIR_TREE`, `MAX_TRES` (comma-separated flags).
    #[serde(default)]
    flags: Option<String>,
    /// PriorityUsageResetPeriod: NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY.
    #[serde(default)]
    usage_reset_period: Option<String>,
    /// TRESBillingWeights of every partition that sets none itself:
    /// `CPU=1.0,Mem=0.25G,GRES/gpu=4.0`.
    #[serde(default)]
    billing_weights: Option<String>,
}

/// `[[accounts]]`: one account of the fair-share tree and its users.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountConf {
    name: String,
    /// Parent account (root when absent).
    #[serde(default)]
    parent: Option<String>,
    /// Raw shares (sacctmgr `Fairshare=`), 1 when absent.
    #[serde(default)]
    fairshare: Option<u32>,
    /// Users associated with the account (1 share each).
    #[serde(default)]
    users: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartitionConf {
    name: String,
    nodes: String,
    /// `gpu_foreign` for member nodes that do not set their own (the strictest when
    /// partitions disagree: drain, then avoid, then ignore).
    #[serde(default)]
    gpu_foreign: Option<crate::model::node::GpuForeign>,
    #[serde(default)]
    default: bool,
    #[serde(default)]
    max_time: Option<String>,
    #[serde(default)]
    default_time: Option<String>,
    #[serde(default)]
    min_nodes: Option<u32>,
    #[serde(default)]
    max_nodes: Option<u32>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    priority_tier: Option<u32>,
    #[serde(default)]
    priority_job_factor: Option<u32>,
    #[serde(default)]
    def_mem_per_cpu: Option<u64>,
    #[serde(default)]
    allow_accounts: Option<String>,
    #[serde(default)]
    allow_groups: Option<String>,
    #[serde(default)]
    allow_qos: Option<String>,
    #[serde(default)]
    exclusive_user: Option<bool>,
    #[serde(default)]
    hidden: Option<bool>,
    #[serde(default)]
    oversubscribe: Option<String>,
    #[serde(default)]
    max_mem_per_node: Option<u64>,
    #[serde(default)]
    def_mem_per_node: Option<u64>,
    #[serde(default)]
    def_cpu_per_gpu: Option<u32>,
    #[serde(default)]
    def_mem_per_gpu: Option<u64>,
    #[serde(default)]
    max_cpus_per_node: Option<u32>,
    /// `OFF`, `CANCEL`, `REQUEUE`, `SUSPEND[,GANG]`.
    #[serde(default)]
    preempt_mode: Option<String>,
    /// Seconds.
    #[serde(default)]
    grace_time: Option<u32>,
    /// Partition QOS (Slurm's `QOS=`), a QOS name.
    #[serde(default, alias = "QOS")]
    qos: Option<String>,
    /// Minutes past its time limit a job here may run (a number or `UNLIMITED`);
    /// overrides the cluster's OverTimeLimit.
    #[serde(default, alias = "OverTimeLimit")]
    over_time_limit: Option<toml::Value>,
    /// `TRESBillingWeights`: `CPU=1.0,Mem=0.25G,GRES/gpu=4.0`; without it the
    /// partition takes `[priority] billing_weights`.
    #[serde(default, alias = "TRESBillingWeights")]
    billing_weights: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConf {
    #[serde(default)]
    cluster_name: Option<String>,
    #[serde(default)]
    state_dir: Option<PathBuf>,
    #[serde(default)]
    spool_dir: Option<PathBuf>,
    #[serde(default)]
    socket: Option<PathBuf>,
    #[serde(default)]
    slurm_version: Option<String>,
    #[serde(default)]
    min_job_age: Option<u32>,
    #[serde(default)]
    kill_wait: Option<u32>,
    #[serde(default)]
    sched_interval: Option<u32>,
    #[serde(default)]
    max_array_size: Option<u32>,
    #[serde(default)]
    kill_invalid_depend: Option<bool>,
    slurmd_timeout: Option<u32>,
    #[serde(default)]
    reconnect_max: Option<u32>,
    #[serde(default, alias = "RebootProgram")]
    reboot_program: Option<String>,
    #[serde(default, alias = "ResumeTimeout")]
    resume_timeout: Option<u32>,
    #[serde(default)]
    nodes: Vec<NodeConf>,
    #[serde(default)]
    partitions: Vec<PartitionConf>,
    /// Cluster licenses: name = count.
    #[serde(default)]
    licenses: std::collections::BTreeMap<String, u32>,
    /// `ALL` (default: refuse at submit what can never run) or `NO` (accept and pend).
    #[serde(default)]
    enforce_part_limits: Option<String>,
    /// Slurm's AccountingStorageEnforce (`associations,limits,qos,safe`, `all`, `none`).
    #[serde(default)]
    accounting_storage_enforce: Option<String>,
    #[serde(default)]
    scheduler: SchedulerConf,
    #[serde(default)]
    priority: PriorityConf,
    #[serde(default)]
    cgroup: CgroupConf,
    #[serde(default)]
    accounts: Vec<AccountConf>,
    /// gres.conf lines (`[[gres]]`).
    #[serde(default)]
    gres: Vec<gres_conf::GresLine>,
    /// A Slurm gres.conf to import (its lines come after the `[[gres]]` ones).
    #[serde(default)]
    gres_conf: Option<PathBuf>,
    // Node scripts (see `scripts`), with Slurm's names accepted.
    #[serde(default, alias = "Prolog")]
    prolog: Option<PathBuf>,
    #[serde(default, alias = "Epilog")]
    epilog: Option<PathBuf>,
    #[serde(default, alias = "TaskProlog")]
    task_prolog: Option<PathBuf>,
    #[serde(default, alias = "TaskEpilog")]
    task_epilog: Option<PathBuf>,
    #[serde(default, alias = "PrologFlags")]
    prolog_flags: Option<String>,
    #[serde(default, alias = "PrologEpilogTimeout")]
    prolog_epilog_timeout: Option<u32>,
    #[serde(default, alias = "HealthCheckProgram")]
    health_check_program: Option<PathBuf>,
    #[serde(default, alias = "HealthCheckInterval")]
    health_check_interval: Option<u32>,
    #[serde(default, alias = "HealthCheckNodeState")]
    health_check_node_state: Option<String>,
    /// Seconds stepd waits for a missing output directory at launch (see `scripts`).
    #[serde(default)]
    launch_io_wait: Option<u32>,
    /// Minutes past its time limit a job may run (a number or `UNLIMITED`).
    #[serde(default, alias = "OverTimeLimit")]
    over_time_limit: Option<toml::Value>,
    /// The MPI bootstrap of steps that name none (`none` or `pmi2`).
    #[serde(default, alias = "MpiDefault")]
    mpi_default: Option<String>,
    /// The controller's log level, a Slurm debug level name or number.
    #[serde(default, alias = "SlurmctldDebug")]
    slurmctld_debug: Option<String>,
    /// `[container]`: the runtime that runs pyxis's `--container-image`.
    #[serde(default)]
    container: crate::model::container::ContainerConf,
    /// `[topology]`: switches or blocks.
    #[serde(default)]
    topology: topology_conf::TopologyConf,
    /// A Slurm topology.conf to import (its switches/blocks come after `[topology]`'s).
    #[serde(default)]
    topology_conf: Option<PathBuf>,
}

/// The resolved configuration every role reads.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    /// Where the file came from (`None` in personal mode).
    pub source: Option<PathBuf>,
    pub cluster_name: String,
    /// Holds the SQLite database and the controller's log.
    pub state_dir: PathBuf,
    /// Holds per-job spool directories of the local agent.
    pub spool_dir: PathBuf,
    /// The controller's Unix socket.
    pub socket: PathBuf,
    pub slurm_version: String,
    /// Seconds a finished job stays visible in squeue/scontrol (Slurm's MinJobAge).
    pub min_job_age: u32,
    /// Seconds between SIGTERM and SIGKILL (Slurm's KillWait).
    pub kill_wait: u32,
    /// Seconds between periodic full scheduling passes.
    pub sched_interval: u32,
    /// Array task indices must be below this (Slurm's MaxArraySize, default 1001).
    pub max_array_size: u32,
    /// Cancel jobs whose dependency can never be satisfied (Slurm's
    /// `SchedulerParameters=kill_invalid_depend`); `--kill-on-invalid-dep` overrides it.
    pub kill_invalid_depend: bool,
    /// Seconds a node's agent may stay silent before the node is set DOWN
    /// "Not responding" (Slurm's SlurmdTimeout; agents send a heartbeat at least every
    /// third of it).
    pub slurmd_timeout: u32,
    /// Longest wait, in seconds, between attempts to reconnect to a remote node (the
    /// wait doubles from one second up to this).
    pub reconnect_max: u32,
    /// Command a node's agent runs to reboot it for `scontrol reboot` (Slurm's
    /// RebootProgram, run through `sh -c`); `None`: reboot requests are refused.
    pub reboot_program: Option<String>,
    /// Seconds a rebooting node may take to register again before it is set DOWN
    /// "reboot timed out" (Slurm's ResumeTimeout, default 60).
    pub resume_timeout: u32,
    pub nodes: Vec<NodeConf>,
    pub partitions: Vec<Partition>,
    /// Cluster licenses (name, count).
    pub licenses: Vec<(String, u32)>,
    /// EnforcePartLimits: refuse at submit what can never run (`ALL`, the default) or
    /// accept it and let it pend with a reason (`NO`).
    pub enforce_part_limits: bool,
    /// AccountingStorageEnforce as configured (`accounting_storage_enforce`). `None`
    /// (the key absent) means automatic: nothing is enforced while no account or user
    /// beyond the initial root has been defined with sacctmgr (so personal mode and a
    /// fresh install need no accounting set-up), and `associations,limits,qos` once
    /// one has. Set `"none"` to never enforce.
    pub accounting_storage_enforce: Option<crate::model::assoc::Enforce>,
    /// Backfill and priority parameters.
    pub sched: sched::SchedConfig,
    /// How stepd isolates jobs (Slurm's cgroup.conf).
    pub cgroup: CgroupConf,
    /// Prolog, epilog, task prolog/epilog and health check (slurm.conf's keys).
    pub scripts: scripts::NodeScripts,
    /// Minutes a job may run past its time limit before it is ended (Slurm's
    /// OverTimeLimit, default 0); [`OVER_TIME_UNLIMITED`] for `UNLIMITED`.
    pub over_time_limit: u32,
    /// Slurm's MpiDefault: the MPI bootstrap (`none`, `pmi2`) of steps that name none
    /// (`srun --mpi`, SLURM_MPI_TYPE); `none` by default.
    pub mpi_default: String,
    /// The controller's log level at start (Slurm's SlurmctldDebug): a Slurm debug
    /// level name (`quiet`, `fatal`, `error`, `info`, `verbose`, `debug`…`debug5`) or
    /// number; `info` by default. `sluice controller -v` raises it, `SLUICE_LOG`
    /// overrides it, `scontrol setdebug` changes it while the controller runs.
    pub slurmctld_debug: String,
    /// `[container]`: which runtime runs `--container-image` steps, and its flags.
    pub container: crate::model::container::ContainerConf,
}

/// `over_time_limit = "UNLIMITED"`: jobs are never ended for their time limit.
pub use crate::model::partition::OVER_TIME_UNLIMITED;

/// Reads OverTimeLimit: minutes (0 to 65533, as Slurm's 16-bit field) or `UNLIMITED`.
/// `what` names the setting in the error.
fn over_time_limit(v: &toml::Value, what: &str) -> Result<u32, String> {
    match v {
        toml::Value::Integer(n) if (0..=65533).contains(n) => Ok(*n as u32),
        toml::Value::String(s) if s.eq_ignore_ascii_case("UNLIMITED") => Ok(OVER_TIME_UNLIMITED),
        toml::Value::String(s) if s.trim().parse::<u16>().is_ok_and(|n| n < 65534) => {
            Ok(s.trim().parse::<u32>().unwrap_or(0))
        }
        v => Err(format!(
            "{what} must be minutes (0-65533) or UNLIMITED, not {v}"
        )),
    }
}

/// Set in a job's environment by a remote node's agent: the socket that relays
/// front-ends to the controller (see `agent::relay`).
pub const RELAY_SOCKET_VAR: &str = "SLUICE_SOCKET";

impl Config {
    /// Loads the configuration the way every front-end and daemon does:
    /// `$SLUICE_CONF` if set, else personal mode if `$SLUICE_STATE_DIR` is set, else
    /// `/etc/sluice/sluice.toml` if it exists, else personal mode.
    ///
    /// Inside a job on a remote node (`SLUICE_SOCKET` set by the node's agent), a
    /// `$SLUICE_CONF` inherited from the submitting host that does not exist on this
    /// node is passed over for personal-mode defaults: the front-end talks to the
    /// controller through the relay and needs no file of its own.
    pub fn load() -> Result<Config, ConfigError> {
        if let Some(p) = std::env::var_os("SLUICE_CONF").filter(|p| !p.is_empty()) {
            let relayed = std::env::var_os(RELAY_SOCKET_VAR).is_some_and(|s| !s.is_empty());
            if relayed && !Path::new(&p).exists() {
                return Ok(Config::personal());
            }
            return Config::from_file(Path::new(&p));
        }
        // A personal state directory named outright (`sluice ci`) is a personal
        // controller even where a system configuration exists.
        if std::env::var_os(personal::STATE_DIR_VAR).is_some_and(|p| Path::new(&p).is_absolute()) {
            return Ok(Config::personal());
        }
        if Path::new(SYSTEM_CONF).exists() {
            return Config::from_file(Path::new(SYSTEM_CONF));
        }
        Ok(Config::personal())
    }

    /// Reads and resolves a TOML file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_toml(&text, path)
    }

    /// Parses and resolves TOML text; `path` names the source in errors and anchors
    /// relative paths.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let fc: FileConf = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            msg: if slurm_import::looks_like_slurm_conf(text) {
                format!(
                    "this is a Slurm slurm.conf, not a sluice TOML file; convert it with \
                     `sluice config import {} [gres.conf] [topology.conf] [cgroup.conf] -o sluice.toml` \
                     and point SLUICE_CONF at the result",
                    path.display()
                )
            } else {
                e.to_string()
            },
        })?;
        let invalid = |msg: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            msg,
        };
        // Relative to the file, resolved now: the controller leaves its working
        // directory when it detaches, and re-reads the file on reconfigure.
        let full = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = full.parent().unwrap_or(Path::new("/"));
        let abs = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let state_dir = abs(fc.state_dir.unwrap_or_else(|| "/var/lib/sluice".into()));
        let spool_dir = abs(fc.spool_dir.unwrap_or_else(|| state_dir.join("spool")));
        let socket = abs(fc
            .socket
            .unwrap_or_else(|| "/run/sluice/sluice.sock".into()));
        let mut nodes = expand_node_decls(fc.nodes).map_err(&invalid)?;
        if nodes.is_empty() {
            nodes.push(local_node_conf());
        }
        let default_key = state_dir.join("ssh").join(KEY_FILE);
        for n in &mut nodes {
            let Some(addr) = &n.ssh else { continue };
            if let Err(e) = ssh_addr::SshAddr::parse(addr) {
                return Err(invalid(format!("node '{}': {e}", n.name)));
            }
            n.identity_file = Some(abs(n
                .identity_file
                .take()
                .unwrap_or_else(|| default_key.clone())));
            n.known_hosts = Some(abs(n
                .known_hosts
                .take()
                .unwrap_or_else(|| SYSTEM_KNOWN_HOSTS.into())));
        }
        if fc.slurmd_timeout == Some(0) {
            return Err(invalid("slurmd_timeout must be at least 1".into()));
        }
        let mut seen = std::collections::HashSet::new();
        for n in &nodes {
            if n.name.is_empty() || n.name.contains([',', '[', ']', ' ', '/']) {
                return Err(invalid(format!("invalid node name '{}'", n.name)));
            }
            if !seen.insert(n.name.clone()) {
                return Err(invalid(format!("node '{}' is declared twice", n.name)));
            }
            if n.cpus == Some(0) {
                return Err(invalid(format!(
                    "node '{}': cpus must be at least 1",
                    n.name
                )));
            }
            if n.memory == Some(0) {
                return Err(invalid(format!(
                    "node '{}': memory must be at least 1 (MiB)",
                    n.name
                )));
            }
        }
        let mut partitions = Vec::new();
        let own_gpu_policy: Vec<String> = nodes
            .iter()
            .filter(|n| n.gpu_foreign.is_some())
            .map(|n| n.name.clone())
            .collect();
        for pc in fc.partitions {
            let members = hostlist::expand(&pc.nodes)
                .map_err(|e| invalid(format!("partition '{}': {e}", pc.name)))?;
            let members = if pc.nodes.eq_ignore_ascii_case("ALL") {
                nodes.iter().map(|n| n.name.clone()).collect()
            } else {
                members
            };
            for m in &members {
                if !nodes.iter().any(|n| &n.name == m) {
                    return Err(invalid(format!(
                        "partition '{}' names node '{m}', which is not declared",
                        pc.name
                    )));
                }
            }
            if let Some(g) = pc.gpu_foreign {
                for n in nodes
                    .iter_mut()
                    .filter(|n| members.contains(&n.name) && !own_gpu_policy.contains(&n.name))
                {
                    n.gpu_foreign = Some(n.gpu_foreign.map_or(g, |h| h.strictest(g)));
                }
            }
            let mut p = Partition::new(&pc.name, members);
            p.default = pc.default;
            if let Some(t) = &pc.max_time {
                p.max_time = parse_limit(t).ok_or_else(|| {
                    invalid(format!("partition '{}': bad max_time '{t}'", pc.name))
                })?;
            }
            if let Some(t) = &pc.default_time {
                p.default_time = Some(parse_limit(t).ok_or_else(|| {
                    invalid(format!("partition '{}': bad default_time '{t}'", pc.name))
                })?);
            }
            p.min_nodes = pc.min_nodes.unwrap_or(0);
            p.max_nodes = pc.max_nodes;
            if let Some(s) = &pc.state {
                p.state = PartitionState::parse(s)
                    .ok_or_else(|| invalid(format!("partition '{}': bad state '{s}'", pc.name)))?;
            }
            p.priority_tier = pc.priority_tier.unwrap_or(1);
            p.priority_job_factor = pc.priority_job_factor.unwrap_or(1);
            p.def_mem_per_cpu = pc.def_mem_per_cpu;
            let list = |s: &Option<String>| {
                s.as_ref()
                    .filter(|v| !v.eq_ignore_ascii_case("ALL"))
                    .map(|v| {
                        v.split(',')
                            .map(|x| x.trim().to_string())
                            .filter(|x| !x.is_empty())
                            .collect()
                    })
            };
            p.allow_accounts = list(&pc.allow_accounts);
            p.allow_groups = list(&pc.allow_groups);
            p.allow_qos = list(&pc.allow_qos);
            p.exclusive_user = pc.exclusive_user.unwrap_or(false);
            if let Some(m) = &pc.preempt_mode {
                p.preempt_mode =
                    Some(crate::model::preempt::PreemptMode::parse(m).ok_or_else(|| {
                        invalid(format!("partition '{}': bad preempt_mode '{m}'", pc.name))
                    })?);
            }
            p.grace_time = pc.grace_time.unwrap_or(0);
            if let Some(v) = &pc.over_time_limit {
                let what = format!("partition '{}': over_time_limit", pc.name);
                p.over_time_limit = Some(over_time_limit(v, &what).map_err(&invalid)?);
            }
            if let Some(q) = &pc.qos {
                let q = q.trim();
                if q.is_empty() || q.contains([',', ' ']) {
                    return Err(invalid(format!(
                        "partition '{}': bad qos '{q}' (one QOS name)",
                        pc.name
                    )));
                }
                p.qos = Some(q.to_string());
            }
            p.hidden = pc.hidden.unwrap_or(false);
            if let Some(o) = &pc.oversubscribe {
                p.oversubscribe = crate::model::OverSubscribe::parse(o).ok_or_else(|| {
                    invalid(format!("partition '{}': bad oversubscribe '{o}'", pc.name))
                })?;
            }
            p.max_mem_per_node = pc.max_mem_per_node;
            p.def_mem_per_node = pc.def_mem_per_node;
            p.def_cpu_per_gpu = pc.def_cpu_per_gpu;
            p.def_mem_per_gpu = pc.def_mem_per_gpu;
            p.max_cpus_per_node = pc.max_cpus_per_node;
            let weights = pc
                .billing_weights
                .as_ref()
                .or(fc.priority.billing_weights.as_ref());
            if let Some(w) = weights {
                p.billing_weights = Some(
                    crate::model::billing::BillingWeights::parse(w)
                        .map_err(|e| invalid(format!("partition '{}': {e}", pc.name)))?,
                );
            }
            if partitions.iter().any(|q: &Partition| q.name == p.name) {
                return Err(invalid(format!("partition '{}' is declared twice", p.name)));
            }
            partitions.push(p);
        }
        if partitions.is_empty() {
            let mut p = Partition::new("debug", nodes.iter().map(|n| n.name.clone()).collect());
            p.default = true;
            if let Some(w) = &fc.priority.billing_weights {
                p.billing_weights = Some(
                    crate::model::billing::BillingWeights::parse(w)
                        .map_err(|e| invalid(format!("[priority] billing_weights: {e}")))?,
                );
            }
            partitions.push(p);
        }
        fc.cgroup.validate().map_err(&invalid)?;
        if partitions.iter().filter(|p| p.default).count() > 1 {
            return Err(invalid("more than one partition has default = true".into()));
        }
        let mut gres_lines = fc.gres;
        if let Some(p) = fc.gres_conf {
            let p = abs(p);
            let text = std::fs::read_to_string(&p)
                .map_err(|e| invalid(format!("cannot read gres_conf {}: {e}", p.display())))?;
            gres_lines.extend(gres_conf::parse_slurm(&text).map_err(&invalid)?);
        }
        for n in &mut nodes {
            let ng = gres_conf::for_node(&gres_lines, &n.name)
                .map_err(|e| invalid(format!("node '{}': {e}", n.name)))?;
            n.gres_autodetect = ng.auto_detect;
            if ng.devices.is_empty() {
                continue;
            }
            // `gres = "gpu:4"` beside gres.conf lines must agree, as slurm.conf's Gres=
            // must with gres.conf.
            let text = crate::model::gres::fmt_node_gres(&ng.devices);
            if let Some(g) = &n.gres {
                let said = n
                    .gres_devices()
                    .map_err(|e| invalid(format!("node '{}': {e}", n.name)))?;
                if crate::model::gres::fmt_node_gres(&said) != text {
                    return Err(invalid(format!(
                        "node '{}': gres = \"{g}\" disagrees with its [[gres]]/gres.conf lines ({text})",
                        n.name
                    )));
                }
            }
            n.gres_declared = Some(ng.devices);
        }
        for n in &nodes {
            n.gres_devices()
                .map_err(|e| invalid(format!("node '{}': {e}", n.name)))?;
        }
        let enforce_part_limits = match fc
            .enforce_part_limits
            .as_deref()
            .map(str::to_ascii_uppercase)
        {
            None => true,
            Some(v) if v == "ALL" || v == "ANY" || v == "YES" => true,
            Some(v) if v == "NO" => false,
            Some(v) => {
                return Err(invalid(format!(
                    "bad enforce_part_limits '{v}' (ALL or NO)"
                )));
            }
        };
        let accounting_storage_enforce = match fc.accounting_storage_enforce.as_deref() {
            None => None,
            Some(v) => Some(
                crate::model::assoc::Enforce::parse(v)
                    .map_err(|e| invalid(format!("accounting_storage_enforce: {e}")))?,
            ),
        };
        let scripts = scripts::RawScripts {
            prolog: fc.prolog,
            epilog: fc.epilog,
            task_prolog: fc.task_prolog,
            task_epilog: fc.task_epilog,
            prolog_flags: fc.prolog_flags,
            prolog_epilog_timeout: fc.prolog_epilog_timeout,
            health_check_program: fc.health_check_program,
            health_check_interval: fc.health_check_interval,
            health_check_node_state: fc.health_check_node_state,
            launch_io_wait: fc.launch_io_wait,
        }
        .resolve(abs)
        .map_err(&invalid)?;
        let over_time_limit = match &fc.over_time_limit {
            Some(v) => over_time_limit(v, "over_time_limit").map_err(&invalid)?,
            None => 0,
        };
        let mpi_default = match fc.mpi_default.as_deref() {
            None => "none".to_string(),
            Some(v) => crate::model::mpi::MpiType::parse(v)
                .map_err(|e| invalid(format!("mpi_default: {e}")))?
                .name()
                .to_string(),
        };
        let slurmctld_debug = match fc.slurmctld_debug {
            None => "info".to_string(),
            Some(v) if crate::logsink::filter_for(&v).is_some() => v,
            Some(v) => {
                return Err(invalid(format!(
                    "slurmctld_debug: invalid debug level: {v}"
                )));
            }
        };
        let mut sched = sched_config(&fc.scheduler, &fc.priority).map_err(&invalid)?;
        for (name, _) in &sched.priority.weight_tres {
            check_weight_tres_name(name, &fc.licenses).map_err(&invalid)?;
        }
        let imported = match &fc.topology_conf {
            None => None,
            Some(p) => {
                let p = abs(p.clone());
                Some(std::fs::read_to_string(&p).map_err(|e| {
                    invalid(format!("cannot read topology_conf {}: {e}", p.display()))
                })?)
            }
        };
        let node_names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        sched.topology = topology_conf::build(&fc.topology, imported.as_deref(), &node_names)
            .map_err(&invalid)?;
        fairshare_accounts(&fc.accounts, &mut sched.priority).map_err(invalid)?;
        Ok(Config {
            mode: Mode::System,
            source: Some(full.clone()),
            cluster_name: fc.cluster_name.unwrap_or_else(|| "sluice".into()),
            state_dir,
            spool_dir,
            socket,
            slurm_version: fc
                .slurm_version
                .unwrap_or_else(|| DEFAULT_SLURM_VERSION.into()),
            min_job_age: fc.min_job_age.unwrap_or(300),
            kill_wait: fc.kill_wait.unwrap_or(30),
            sched_interval: fc.sched_interval.unwrap_or(60),
            max_array_size: fc.max_array_size.unwrap_or(DEFAULT_MAX_ARRAY_SIZE),
            kill_invalid_depend: fc.kill_invalid_depend.unwrap_or(false),
            slurmd_timeout: fc.slurmd_timeout.unwrap_or(DEFAULT_SLURMD_TIMEOUT),
            reconnect_max: fc.reconnect_max.unwrap_or(30).max(1),
            reboot_program: fc.reboot_program.filter(|p| !p.trim().is_empty()),
            resume_timeout: fc.resume_timeout.unwrap_or(DEFAULT_RESUME_TIMEOUT).max(1),
            nodes,
            partitions,
            licenses: fc.licenses.into_iter().collect(),
            enforce_part_limits,
            accounting_storage_enforce,
            sched,
            cgroup: fc.cgroup,
            scripts,
            over_time_limit,
            mpi_default,
            slurmctld_debug,
            container: fc.container,
        })
    }

    /// The zero-config personal setup for the calling user: state under
    /// `$XDG_STATE_HOME/sluice` (else `.local/state/sluice` in the passwd entry's home),
    /// the socket and cgroup root named by the controller's id (see [`personal`]), one
    /// local node with detected resources, one default partition `debug` without a time
    /// limit.
    pub fn personal() -> Config {
        Config::personal_at(personal::state_dir())
    }

    /// [`Config::personal`] with the state directory `state_dir` (`sluice ci`'s).
    pub fn personal_at(state_dir: PathBuf) -> Config {
        let id = personal::controller_id(&state_dir);
        let socket = personal::socket(&state_dir, &id);
        let node = local_node_conf();
        let mut p = Partition::new("debug", vec![node.name.clone()]);
        p.default = true;
        Config {
            mode: Mode::Personal,
            source: None,
            cluster_name: "sluice".into(),
            spool_dir: state_dir.join("spool"),
            state_dir,
            socket,
            slurm_version: DEFAULT_SLURM_VERSION.into(),
            min_job_age: 300,
            kill_wait: 30,
            sched_interval: 60,
            max_array_size: DEFAULT_MAX_ARRAY_SIZE,
            kill_invalid_depend: false,
            slurmd_timeout: DEFAULT_SLURMD_TIMEOUT,
            reconnect_max: 30,
            reboot_program: None,
            resume_timeout: DEFAULT_RESUME_TIMEOUT,
            nodes: vec![node],
            partitions: vec![p],
            licenses: Vec::new(),
            enforce_part_limits: true,
            accounting_storage_enforce: None,
            sched: sched::SchedConfig::default(),
            // Its own cgroup root, so that neither a system controller nor another
            // personal one on the same machine shares its job cgroups (job ids overlap).
            cgroup: CgroupConf {
                root: personal::cgroup_root(&id),
                ..CgroupConf::default()
            },
            scripts: scripts::NodeScripts::default(),
            over_time_limit: 0,
            mpi_default: "none".into(),
            slurmctld_debug: "info".into(),
            container: Default::default(),
        }
    }

    /// The default partition (the one marked default, else the first).
    pub fn default_partition(&self) -> Option<&Partition> {
        self.partitions
            .iter()
            .find(|p| p.default)
            .or(self.partitions.first())
    }

    /// The node the controller's in-process agent serves: among nodes without `ssh`, the
    /// one named like this host's short name, else the first. `None` when every node is
    /// remote (the controller's machine is not a compute node).
    pub fn local_node(&self) -> Option<&NodeConf> {
        let host = short_hostname();
        let mut local = self.nodes.iter().filter(|n| !n.is_remote());
        local
            .clone()
            .find(|n| n.name == host)
            .or_else(|| local.next())
    }

    /// The controller's own SSH key pair, as `sluice keygen` creates it and remote nodes
    /// use by default: `<state_dir>/ssh/id_ed25519` (the public half next to it, `.pub`).
    pub fn key_file(&self) -> PathBuf {
        self.state_dir.join("ssh").join(KEY_FILE)
    }
}

/// File name of the controller's SSH private key inside `<state_dir>/ssh`.
const KEY_FILE: &str = "id_ed25519";

/// Slurm's default SlurmdTimeout, seconds.
const DEFAULT_SLURMD_TIMEOUT: u32 = 300;
/// Slurm's ResumeTimeout default, seconds.
const DEFAULT_RESUME_TIMEOUT: u32 = 60;

/// Expands `[[nodes]]` entries whose `name` is a hostlist expression (`gpu[01-16]`,
/// slurm.conf `NodeName=gpu[01-16]`) into one identical [`NodeConf`] per name, in
/// expression order. When such an entry also sets `ssh`, the address is a hostlist
/// expression too and is matched to the names by position, as slurm.conf's
/// `NodeAddr=`/`NodeHostname=` are (`ssh = "root@gpu[01-16].lab"`); a single address
/// for several nodes is refused, since each node needs its own agent.
///
/// Errors: a bad expression, an entry that expands to no name, or an `ssh` list whose
/// length differs from the names'. Duplicate names are caught by the caller.
fn expand_node_decls(decls: Vec<NodeConf>) -> Result<Vec<NodeConf>, String> {
    let mut out = Vec::with_capacity(decls.len());
    for d in decls {
        if !d.name.contains(['[', ']', ',']) {
            out.push(d);
            continue;
        }
        let names = hostlist::expand(&d.name).map_err(|e| format!("node '{}': {e}", d.name))?;
        if names.is_empty() {
            return Err(format!("node '{}' names no node", d.name));
        }
        let addrs = match &d.ssh {
            None => None,
            Some(a) if names.len() == 1 => Some(vec![a.clone()]),
            Some(a) => {
                let v = hostlist::expand(a).map_err(|e| format!("node '{}': ssh: {e}", d.name))?;
                if v.len() != names.len() {
                    return Err(format!(
                        "node '{}' declares {} nodes but ssh = \"{a}\" gives {} address(es); \
                         use one hostlist expression with an address per node",
                        d.name,
                        names.len(),
                        v.len()
                    ));
                }
                Some(v)
            }
        };
        for (i, name) in names.into_iter().enumerate() {
            out.push(NodeConf {
                name,
                ssh: addrs.as_ref().map(|v| v[i].clone()),
                ..d.clone()
            });
        }
    }
    Ok(out)
}

fn local_node_conf() -> NodeConf {
    NodeConf::named(&short_hostname())
}

/// Which cgroup interface stepd uses (Slurm's `CgroupPlugin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CgroupPlugin {
    /// cgroup v1 if its controllers are mounted, else v2, else no cgroups.
    #[default]
    #[serde(rename = "autodetect")]
    Autodetect,
    #[serde(rename = "cgroup/v1", alias = "v1")]
    V1,
    #[serde(rename = "cgroup/v2", alias = "v2")]
    V2,
    /// No cgroups: process tracking and rlimits only ("degraded isolation").
    #[serde(rename = "disabled", alias = "none")]
    Disabled,
}

/// The `[cgroup]` section: Slurm's cgroup.conf, with its defaults and meanings. Keys may
/// be written in snake_case or with Slurm's names (`ConstrainRAMSpace = true`).
///
/// Memory limits follow task/cgroup: the RAM limit is `AllowedRAMSpace` percent of the
/// job's allocated memory on the node, at most `MaxRAMPercent` percent of the node's
/// RAM and at least `MinRAMSpace` MiB; with `ConstrainSwapSpace` the RAM+swap limit adds
/// `AllowedSwapSpace` percent of the allocation, at most `MaxSwapPercent` percent of RAM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CgroupConf {
    #[serde(alias = "CgroupPlugin")]
    pub plugin: CgroupPlugin,
    /// Where cgroup hierarchies are mounted (v1: one directory per controller below it).
    /// `None`: found in /proc/self/mountinfo.
    #[serde(alias = "CgroupMountpoint")]
    pub mountpoint: Option<std::path::PathBuf>,
    /// Name of sluice's cgroup below the hierarchy's base (Slurm uses `slurm`): the tree
    /// is `<root>/uid_U/job_J/step_S/task_T`. Two controllers on one machine need two
    /// roots.
    pub root: String,
    /// Confine tasks to the CPUs chosen for the job (cpuset). Slurm default: no.
    #[serde(alias = "ConstrainCores")]
    pub constrain_cores: bool,
    /// Limit RAM to the job's allocated memory. Slurm default: no.
    #[serde(alias = "ConstrainRAMSpace")]
    pub constrain_ram_space: bool,
    /// Limit RAM+swap. Slurm default: no.
    #[serde(alias = "ConstrainSwapSpace")]
    pub constrain_swap_space: bool,
    /// Deny device files not allocated to the job. Slurm default: no.
    #[serde(alias = "ConstrainDevices")]
    pub constrain_devices: bool,
    /// Percent of the allocated memory the RAM limit is (default 100).
    #[serde(alias = "AllowedRAMSpace")]
    pub allowed_ram_space: f64,
    /// Percent of the allocated memory added as swap (default 0).
    #[serde(alias = "AllowedSwapSpace")]
    pub allowed_swap_space: f64,
    /// Upper bound of the RAM limit, percent of the node's RAM (default 100).
    #[serde(alias = "MaxRAMPercent")]
    pub max_ram_percent: f64,
    /// Upper bound of the swap part, percent of the node's RAM (default 100).
    #[serde(alias = "MaxSwapPercent")]
    pub max_swap_percent: f64,
    /// Lower bound of the RAM limit, MiB (default 30).
    #[serde(alias = "MinRAMSpace")]
    pub min_ram_space: u64,
}

impl Default for CgroupConf {
    fn default() -> Self {
        CgroupConf {
            plugin: CgroupPlugin::Autodetect,
            mountpoint: None,
            root: "sluice".into(),
            constrain_cores: false,
            constrain_ram_space: false,
            constrain_swap_space: false,
            constrain_devices: false,
            allowed_ram_space: 100.0,
            allowed_swap_space: 0.0,
            max_ram_percent: 100.0,
            max_swap_percent: 100.0,
            min_ram_space: 30,
        }
    }
}

impl CgroupConf {
    /// Checks ranges and the root name. Errors: a message naming the bad key.
    pub fn validate(&self) -> Result<(), String> {
        let r = &self.root;
        if r.is_empty() || r.contains('/') || r == "." || r == ".." {
            return Err(format!("cgroup.root must be one path component, not '{r}'"));
        }
        for (k, v) in [
            ("allowed_ram_space", self.allowed_ram_space),
            ("allowed_swap_space", self.allowed_swap_space),
            ("max_ram_percent", self.max_ram_percent),
            ("max_swap_percent", self.max_swap_percent),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("cgroup.{k} must be a percentage >= 0, not {v}"));
            }
        }
        Ok(())
    }
}

/// Resolves the preemption keys of `[scheduler]`.
fn preempt_config(s: &SchedulerConf) -> Result<crate::model::preempt::PreemptConfig, String> {
    use crate::model::preempt::{PreemptMode, PreemptType};
    let mut c = crate::model::preempt::PreemptConfig::default();
    if let Some(v) = &s.preempt_type {
        c.preempt_type = PreemptType::parse(v).ok_or_else(|| {
            format!("bad preempt_type '{v}' (preempt/none, preempt/partition_prio, preempt/qos)")
        })?;
    }
    if let Some(v) = &s.preempt_mode {
        c.mode = PreemptMode::parse(v)
            .ok_or_else(|| format!("bad preempt_mode '{v}' (OFF, CANCEL, REQUEUE, SUSPEND)"))?;
    }
    if let Some(v) = &s.preempt_exempt_time {
        // Slurm's time format to the second (read_config.c `time_str2secs`): `10` is
        // ten minutes, `1:00:00` an hour, `0:30` thirty seconds.
        c.exempt_time = crate::model::time::parse_duration_secs(v.trim())
            .ok_or_else(|| format!("bad preempt_exempt_time '{v}'"))?;
    }
    Ok(c)
}

/// Resolves `[scheduler]` and `[priority]`.
/// Checks a `weight_tres` TRES name as slurmctld checks PriorityWeightTRES: a TRES it
/// counts (`cpu`, `mem`, `node`, `billing`, `gres/<name>[:<type>]`) or a license the
/// config declares (`license/<name>`), any case. Errors name the TRES.
fn check_weight_tres_name(
    name: &str,
    licenses: &std::collections::BTreeMap<String, u32>,
) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    let ok = match lower.split_once('/') {
        None => matches!(lower.as_str(), "cpu" | "mem" | "node" | "billing"),
        Some(("gres", g)) => !g.is_empty(),
        Some(("license", l)) => licenses.keys().any(|k| k.eq_ignore_ascii_case(l)),
        Some(_) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "weight_tres names '{name}', which is not a TRES of this cluster (cpu, mem, node, billing, gres/<name>, or a license under [licenses])"
        ))
    }
}

fn sched_config(s: &SchedulerConf, p: &PriorityConf) -> Result<sched::SchedConfig, String> {
    let mut c = sched::SchedConfig::default();
    if let Some(v) = &s.policy {
        c.policy = sched::Policy::parse(v).ok_or_else(|| {
            format!("bad scheduler policy '{v}' (fifo, easy, conservative, easy-sjf)")
        })?;
    }
    if let Some(m) = s.bf_window {
        c.bf_window = i64::from(m.max(1)) * 60;
    }
    if let Some(v) = s.bf_resolution {
        c.bf_resolution = i64::from(v.max(1));
    }
    if let Some(v) = s.bf_max_job_test {
        c.bf_max_job_test = v as usize;
    }
    if let Some(v) = s.bf_max_job_user {
        c.bf_max_job_user = v as usize;
    }
    if let Some(v) = s.bf_continue {
        c.bf_continue = v;
    }
    if let Some(v) = s.bf_interval {
        c.bf_interval = i64::from(v.max(1));
    }
    c.preempt = preempt_config(s)?;
    if let Some(v) = s.max_switch_wait {
        c.max_switch_wait = i64::from(v);
    }
    let w = &mut c.priority;
    let set = |dst: &mut u32, v: Option<u32>| {
        if let Some(v) = v {
            *dst = v;
        }
    };
    set(&mut w.weight_age, p.weight_age);
    set(&mut w.weight_assoc, p.weight_assoc);
    set(&mut w.weight_fairshare, p.weight_fairshare);
    set(&mut w.weight_jobsize, p.weight_jobsize);
    set(&mut w.weight_partition, p.weight_partition);
    set(&mut w.weight_qos, p.weight_qos);
    if let Some(t) = p.weight_tres.as_deref().filter(|t| !t.trim().is_empty()) {
        w.weight_tres = t
            .split(',')
            .map(|kv| {
                let bad = || format!("bad weight_tres '{kv}' (want TRES=weight, weight >= 0)");
                let (k, v) = kv.split_once('=').ok_or_else(bad)?;
                let v: f64 = v.trim().parse().map_err(|_| bad())?;
                if k.trim().is_empty() || !v.is_finite() || v < 0.0 {
                    return Err(bad());
                }
                Ok((k.trim().to_string(), v))
            })
            .collect::<Result<_, String>>()?;
    }
    let dur = |s: &Option<String>, what: &str| -> Result<Option<i64>, String> {
        match s {
            None => Ok(None),
            Some(v) => crate::jobspec::units::parse_time_limit(v)
                .ok()
                .and_then(|l| l.secs())
                .map(|s| Some(s as i64))
                .ok_or_else(|| format!("bad {what} '{v}'")),
        }
    };
    if let Some(a) = dur(&p.max_age, "max_age")? {
        w.max_age = a;
    }
    if let Some(h) = dur(&p.decay_half_life, "decay_half_life")? {
        w.decay_half_life = h;
    }
    w.favor_small = p.favor_small.unwrap_or(false);
    if let Some(f) = &p.flags {
        for flag in f.split(',').map(|x| x.trim().to_ascii_uppercase()) {
            match flag.as_str() {
                "" => {}
                "SMALL_RELATIVE_TO_TIME" => w.small_relative_to_time = true,
                "NO_FAIR_TREE" => w.fairshare_algorithm = crate::config::sched::Algorithm::Classic,
                "FAIR_TREE" => w.fairshare_algorithm = crate::config::sched::Algorithm::FairTree,
                "MAX_TRES" => w.max_tres = true,
                other => return Err(format!("unknown priority flag '{other}'")),
            }
        }
    }
    if let Some(r) = &p.usage_reset_period {
        w.usage_reset = crate::config::sched::ResetPeriod::parse(r).ok_or_else(|| {
            format!(
                "bad usage_reset_period '{r}' (NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY, YEARLY)"
            )
        })?;
    }
    Ok(c)
}

/// Resolves `[[accounts]]` into the fair-share tree's accounts and user associations.
///
/// Errors: an account defined twice, an empty name, or a parent that is not defined
/// (other than `root`).
fn fairshare_accounts(accts: &[AccountConf], w: &mut sched::PriorityConfig) -> Result<(), String> {
    use crate::config::sched::{AccountDef, UserDef};
    let mut seen = std::collections::HashSet::new();
    for a in accts {
        if a.name.is_empty() || a.name == "root" {
            return Err(format!("bad account name '{}'", a.name));
        }
        if !seen.insert(a.name.as_str()) {
            return Err(format!("account '{}' is defined twice", a.name));
        }
    }
    for a in accts {
        if let Some(p) = &a.parent
            && p != "root"
            && !seen.contains(p.as_str())
        {
            return Err(format!(
                "account '{}' has parent '{p}', which is not defined",
                a.name
            ));
        }
        w.accounts.push(AccountDef {
            name: a.name.clone(),
            parent: a.parent.clone().filter(|p| p != "root"),
            shares: a.fairshare.unwrap_or(1),
        });
        for u in &a.users {
            w.user_assocs.push(UserDef {
                user: u.clone(),
                account: a.name.clone(),
                shares: 1,
            });
        }
    }
    Ok(())
}

/// This host's name up to the first dot.
pub fn short_hostname() -> String {
    let h = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    h.split('.').next().unwrap_or("localhost").to_string()
}

/// Parses a partition time limit: `UNLIMITED`/`INFINITE` or any Slurm duration.
fn parse_limit(s: &str) -> Option<TimeLimit> {
    match s.trim().to_ascii_uppercase().as_str() {
        "UNLIMITED" | "INFINITE" => Some(TimeLimit::Unlimited),
        _ => crate::jobspec::units::parse_time_limit(s).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_from_toml_and_an_imported_topology_conf() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("topology.conf"),
            "SwitchName=s2 Nodes=n[5-6]\nSwitchName=top Switches=s[0-2]\n",
        )
        .unwrap();
        let text = r#"
topology_conf = "topology.conf"
[scheduler]
max_switch_wait = 42
[[nodes]]
name = "n[1-6]"
[topology]
switches = [
  { name = "s0", nodes = "n[1-2]" },
  { name = "s1", nodes = "n[3-4]", link_speed = 5 },
]
"#
        .to_string();
        let c = Config::from_toml(&text, &dir.path().join("sluice.toml")).unwrap();
        let t = &c.sched.topology;
        assert_eq!(c.sched.max_switch_wait, 42);
        let names: Vec<&str> = t.switches.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s0", "s1", "s2", "top"]);
        assert_eq!(t.switches[1].link_speed, 5);
        assert_eq!(t.switch_levels(), vec![0, 0, 0, 1]);
        // A node that is not declared is refused, naming it.
        let bad = text.replace("n[3-4]", "n[3-9]");
        let e = Config::from_toml(&bad, &dir.path().join("sluice.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("names node 'n7', which is not declared"), "{e}");
        let missing = text.replace("topology.conf\"", "nope.conf\"");
        let e = Config::from_toml(&missing, &dir.path().join("sluice.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read topology_conf"), "{e}");
    }

    #[test]
    fn parses_a_system_config() {
        let c = Config::from_toml(
            r#"
cluster_name = "lab"
state_dir = "state"
[[nodes]]
name = "n1"
cpus = 8
memory = 4000
[[nodes]]
name = "n2"
cpus = 8
[[partitions]]
name = "debug"
nodes = "n[1-2]"
default = true
max_time = "1:00:00"
[[partitions]]
name = "long"
nodes = "n2"
state = "down"
"#,
            Path::new("/etc/sluice/sluice.toml"),
        )
        .unwrap();
        assert_eq!(c.cluster_name, "lab");
        assert_eq!(c.state_dir, PathBuf::from("/etc/sluice/state"));
        assert_eq!(c.partitions[0].nodes, vec!["n1", "n2"]);
        assert_eq!(c.partitions[0].max_time, TimeLimit::Minutes(60));
        assert_eq!(c.partitions[1].state, PartitionState::Down);
        assert_eq!(c.default_partition().unwrap().name, "debug");
    }

    #[test]
    fn every_example_config_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut loaded = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let c =
                    Config::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(c.default_partition().is_some(), "{}", path.display());
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                loaded.push((name, c));
            }
        }
        let find = |n: &str| {
            loaded
                .iter()
                .find(|(name, _)| name == n)
                .map(|(_, c)| c)
                .unwrap_or_else(|| panic!("examples/{n} missing"))
        };
        let shared = find("shared-box.toml");
        assert_eq!(shared.partitions.len(), 2);
        assert!(shared.cgroup.constrain_cores && shared.cgroup.constrain_swap_space);
        assert_eq!(shared.default_partition().unwrap().name, "short");
        let ws = find("workstation.toml");
        assert_eq!(ws.nodes.len(), 1);
        assert_eq!(ws.partitions[0].max_time, TimeLimit::Minutes(2 * 24 * 60));
    }

    #[test]
    fn gpu_foreign_is_a_node_policy_word() {
        use crate::model::node::GpuForeign;
        let p = Path::new("/x/sluice.toml");
        let node = |extra: &str| format!("[[nodes]]\nname = \"n1\"\n{extra}\n");
        let c = Config::from_toml(&node("gpu_foreign = \"drain\""), p).unwrap();
        assert_eq!(c.nodes[0].gpu_foreign, Some(GpuForeign::Drain));
        assert_eq!(
            Config::from_toml(&node(""), p).unwrap().nodes[0].gpu_foreign,
            None
        );
        let e = Config::from_toml(&node("gpu_foreign = \"never\""), p).unwrap_err();
        assert!(e.to_string().contains("unknown variant `never`"), "{e}");
        // From the partitions, strictest first; a node's own key wins.
        let parts = r#"
[[nodes]]
name = "a"
[[nodes]]
name = "b"
gpu_foreign = "ignore"
[[nodes]]
name = "c"
[[partitions]]
name = "p1"
nodes = "a,b"
gpu_foreign = "ignore"
[[partitions]]
name = "p2"
nodes = "a,b"
gpu_foreign = "drain"
[[partitions]]
name = "p3"
nodes = "c"
"#;
        let c = Config::from_toml(parts, p).unwrap();
        let policy: Vec<_> = c.nodes.iter().map(|n| n.gpu_foreign).collect();
        assert_eq!(
            policy,
            [Some(GpuForeign::Drain), Some(GpuForeign::Ignore), None]
        );
    }

    #[test]
    fn over_time_limit_minutes_or_unlimited() {
        let p = Path::new("/x/sluice.toml");
        assert_eq!(Config::from_toml("", p).unwrap().over_time_limit, 0);
        let c = Config::from_toml("OverTimeLimit = 5\n", p).unwrap();
        assert_eq!(c.over_time_limit, 5);
        let c = Config::from_toml("over_time_limit = \"unlimited\"\n", p).unwrap();
        assert_eq!(c.over_time_limit, OVER_TIME_UNLIMITED);
        let e = Config::from_toml("over_time_limit = -1\n", p).unwrap_err();
        assert!(
            e.to_string().contains("over_time_limit must be minutes"),
            "{e}"
        );
        let e = Config::from_toml("over_time_limit = \"soon\"\n", p).unwrap_err();
        assert!(e.to_string().contains("not \"soon\""), "{e}");
    }

    #[test]
    fn partition_over_time_limit_overrides_the_clusters() {
        let p = Path::new("/x/sluice.toml");
        let conf = |part: &str| {
            format!(
                "OverTimeLimit = 5\n[[nodes]]\nname = \"n1\"\n[[partitions]]\nname = \"a\"\nnodes = \"n1\"\n{part}"
            )
        };
        let c = Config::from_toml(&conf(""), p).unwrap();
        assert_eq!(c.partitions[0].over_time_limit, None);
        assert_eq!(c.partitions[0].over_time(c.over_time_limit), 5);
        assert_eq!(c.partitions[0].over_time_text(), "NONE");
        let c = Config::from_toml(&conf("OverTimeLimit = 2\n"), p).unwrap();
        assert_eq!(c.partitions[0].over_time(c.over_time_limit), 2);
        assert_eq!(c.partitions[0].over_time_text(), "2");
        let c = Config::from_toml(&conf("over_time_limit = \"UNLIMITED\"\n"), p).unwrap();
        assert_eq!(c.partitions[0].over_time(5), OVER_TIME_UNLIMITED);
        assert_eq!(c.partitions[0].over_time_text(), "UNLIMITED");
        let e = Config::from_toml(&conf("over_time_limit = 70000\n"), p).unwrap_err();
        assert!(
            e.to_string()
                .contains("partition 'a': over_time_limit must be minutes (0-65533)"),
            "{e}"
        );
    }

    #[test]
    fn node_script_keys_take_slurms_names() {
        let p = Path::new("/etc/sluice/sluice.toml");
        let c = Config::from_toml(
            "Prolog = \"/etc/sluice/prolog\"\nepilog = \"epilog.sh\"\nPrologFlags = \"Alloc\"\n\
             HealthCheckProgram = \"/usr/sbin/nhc\"\nHealthCheckInterval = 300\n\
             HealthCheckNodeState = \"IDLE\"\nPrologEpilogTimeout = 60\n",
            p,
        )
        .unwrap();
        let s = &c.scripts;
        assert_eq!(s.prolog.as_deref(), Some(Path::new("/etc/sluice/prolog")));
        assert_eq!(
            s.epilog.as_deref(),
            Some(Path::new("/etc/sluice/epilog.sh"))
        );
        assert!(s.prolog_alloc);
        assert_eq!(s.health_check_interval, 300);
        assert_eq!(s.prolog_epilog_timeout, Some(60));
        let e = Config::from_toml("PrologFlags = \"X11\"\n", p).unwrap_err();
        assert!(e.to_string().contains("X11 is not supported yet"), "{e}");
    }

    #[test]
    fn cgroup_section_defaults_and_slurm_names() {
        let p = Path::new("/x.toml");
        let d = Config::from_toml("", p).unwrap().cgroup;
        assert_eq!(d, CgroupConf::default());
        assert!(!d.constrain_cores && !d.constrain_ram_space && !d.constrain_swap_space);
        assert!(!d.constrain_devices);
        assert_eq!((d.allowed_ram_space, d.max_ram_percent), (100.0, 100.0));
        assert_eq!((d.allowed_swap_space, d.min_ram_space), (0.0, 30));
        assert_eq!(d.plugin, CgroupPlugin::Autodetect);
        let c = Config::from_toml(
            "[cgroup]\nConstrainCores = true\nConstrainRAMSpace = true\n\
             constrain_swap_space = true\nAllowedRAMSpace = 90.5\nMaxRAMPercent = 80\n\
             CgroupPlugin = \"cgroup/v1\"\nroot = \"sluice_n1\"\n",
            p,
        )
        .unwrap()
        .cgroup;
        assert!(c.constrain_cores && c.constrain_ram_space && c.constrain_swap_space);
        assert_eq!(c.allowed_ram_space, 90.5);
        assert_eq!(c.max_ram_percent, 80.0);
        assert_eq!(c.plugin, CgroupPlugin::V1);
        assert_eq!(c.root, "sluice_n1");
        let personal = Config::personal();
        let id = personal::controller_id(&personal.state_dir);
        assert_eq!(personal.cgroup.root, format!("sluice-personal-{id}"));
    }

    #[test]
    fn remote_nodes_get_ssh_defaults() {
        let c = Config::from_toml(
            r#"
state_dir = "/var/lib/sluice"
[[nodes]]
name = "head"
[[nodes]]
name = "gpu1"
ssh = "root@gpu1"
[[nodes]]
name = "gpu2"
ssh = "admin@10.0.0.2:2222"
identity_file = "keys/id"
known_hosts = "/srv/kh"
push_binary = false
"#,
            Path::new("/etc/sluice/sluice.toml"),
        )
        .unwrap();
        assert!(!c.nodes[0].is_remote());
        assert_eq!(c.nodes[0].identity_file, None);
        let g1 = &c.nodes[1];
        assert_eq!(
            g1.identity_file.as_deref(),
            Some(Path::new("/var/lib/sluice/ssh/id_ed25519"))
        );
        assert_eq!(
            g1.known_hosts.as_deref(),
            Some(Path::new(SYSTEM_KNOWN_HOSTS))
        );
        let g2 = &c.nodes[2];
        assert_eq!(
            g2.identity_file.as_deref(),
            Some(Path::new("/etc/sluice/keys/id"))
        );
        assert_eq!(g2.push_binary, Some(false));
        assert_eq!(
            c.key_file(),
            PathBuf::from("/var/lib/sluice/ssh/id_ed25519")
        );
        assert_eq!(c.local_node().map(|n| n.name.as_str()), Some("head"));
        assert_eq!(c.slurmd_timeout, 300);
        // Every node remote: the controller's machine runs no agent.
        let all = Config::from_toml(
            "[[nodes]]\nname='a'\nssh='a'\n[[nodes]]\nname='b'\nssh='b:22'\n",
            Path::new("/x.toml"),
        )
        .unwrap();
        assert!(all.local_node().is_none());
    }

    #[test]
    fn a_hostlist_name_declares_several_identical_nodes() {
        let c = Config::from_toml(
            r#"
[[nodes]]
name = "head"
[[nodes]]
name = "gpu[01-03],big7"
cpus = 8
memory = 1000
features = ["a100"]
ssh = "root@g[1-3].lab:2222,root@h4"
[[gres]]
nodes = "gpu[02-03]"
name = "gpu"
count = 2
[[partitions]]
name = "p"
nodes = "gpu[01-03]"
"#,
            Path::new("/x.toml"),
        )
        .unwrap();
        let names: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["head", "gpu01", "gpu02", "gpu03", "big7"]);
        for n in &c.nodes[1..] {
            assert_eq!((n.cpus, n.memory), (Some(8), Some(1000)));
            assert_eq!(n.features, ["a100"]);
        }
        let ssh: Vec<_> = c.nodes.iter().map(|n| n.ssh.as_deref()).collect();
        assert_eq!(
            ssh,
            [
                None,
                Some("root@g1.lab:2222"),
                Some("root@g2.lab:2222"),
                Some("root@g3.lab:2222"),
                Some("root@h4")
            ]
        );
        assert!(c.nodes[1].gres_declared.is_none());
        assert_eq!(c.nodes[2].gres_declared.as_ref().map(Vec::len), Some(2));
        assert_eq!(c.partitions[0].nodes, ["gpu01", "gpu02", "gpu03"]);
        // One name in brackets is one node, and its address is taken whole.
        let one = Config::from_toml(
            "[[nodes]]\nname='n[7]'\nssh='u@[::1]:22'\n",
            Path::new("/x.toml"),
        )
        .unwrap();
        assert_eq!(one.nodes[0].name, "n7");
        assert_eq!(one.nodes[0].ssh.as_deref(), Some("u@[::1]:22"));
    }

    #[test]
    fn rejects_bad_configs() {
        let p = Path::new("/x.toml");
        let cases = [
            (
                "[[nodes]]\nname='a'\n[[partitions]]\nname='p'\nnodes='b'\n",
                "not declared",
            ),
            ("[[nodes]]\nname='a'\n[[nodes]]\nname='a'\n", "twice"),
            (
                "[[nodes]]\nname='a[1-3]'\n[[nodes]]\nname='a2'\n",
                "node 'a2' is declared twice",
            ),
            ("[[nodes]]\nname='a[1-3'\n", "unbalanced brackets"),
            ("[[nodes]]\nname='a[3-1]'\n", "invalid range '3-1'"),
            ("[[nodes]]\nname='a[x]'\n", "invalid range 'x'"),
            (
                "[[nodes]]\nname='a[1-2]'\nssh='root@h'\n",
                "declares 2 nodes but ssh = \"root@h\" gives 1 address",
            ),
            ("bogus = 1\n", "unknown field"),
            ("[[nodes]]\nname='a'\ncpus=0\n", "at least 1"),
            (
                "[[nodes]]\nname='a'\nmemory=0\n",
                "memory must be at least 1",
            ),
            (
                "[priority]\nweight_tres='cpu=-5'\n",
                "bad weight_tres 'cpu=-5'",
            ),
            (
                "[priority]\nweight_tres='cpu=1,,mem=2'\n",
                "bad weight_tres ''",
            ),
            (
                "[priority]\nweight_tres='license/nosuch=5'\n",
                "'license/nosuch', which is not a TRES",
            ),
            (
                "[priority]\nweight_tres='disk=5'\n",
                "'disk', which is not a TRES",
            ),
            ("[[nodes]]\nname='a'\nssh='u@h:0'\n", "bad ssh address"),
            ("slurmd_timeout = 0\n", "slurmd_timeout"),
            (
                "[[nodes]]\nname='a'\n[[partitions]]\nname='p'\nnodes='a'\nmax_time='soon'\n",
                "bad max_time",
            ),
            ("[cgroup]\nroot='a/b'\n", "one path component"),
            ("[cgroup]\nMaxRAMPercent=-5\n", "max_ram_percent"),
            ("[cgroup]\nConstrainKernelMemory=true\n", "unknown field"),
            ("[cgroup]\nCgroupPlugin='cgroup/v3'\n", "unknown variant"),
        ];
        for (text, want) in cases {
            let e = Config::from_toml(text, p).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn preemption_keys() {
        use crate::model::preempt::{PreemptMode, PreemptType};
        let p = Path::new("/x/sluice.toml");
        let c = Config::from_toml(
            r#"
[scheduler]
preempt_type = "preempt/qos"
preempt_mode = "SUSPEND,GANG"
preempt_exempt_time = "5"
[[nodes]]
name = "n1"
[[partitions]]
name = "low"
nodes = "n1"
preempt_mode = "requeue"
grace_time = 30
"#,
            p,
        )
        .unwrap();
        assert_eq!(c.sched.preempt.preempt_type, PreemptType::Qos);
        assert_eq!(c.sched.preempt.mode, PreemptMode::Suspend);
        // Slurm's time format: a bare number is minutes; seconds are kept.
        assert_eq!(c.sched.preempt.exempt_time, 300);
        let secs = Config::from_toml("[scheduler]\npreempt_exempt_time = \"0:30\"\n", p).unwrap();
        assert_eq!(secs.sched.preempt.exempt_time, 30);
        assert_eq!(c.partitions[0].preempt_mode, Some(PreemptMode::Requeue));
        assert_eq!(c.partitions[0].grace_time, 30);
        for (text, want) in [
            (
                "[scheduler]\npreempt_type = \"preempt/magic\"\n",
                "bad preempt_type",
            ),
            ("[scheduler]\npreempt_mode = \"kill\"\n", "bad preempt_mode"),
            (
                "[scheduler]\npreempt_exempt_time = \"soon\"\n",
                "bad preempt_exempt_time",
            ),
        ] {
            let e = Config::from_toml(text, p).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn partition_qos_key() {
        let p = Path::new("/x/sluice.toml");
        let conf = |q: &str| {
            format!(
                "[[nodes]]\nname = \"n1\"\n[[partitions]]\nname = \"gpu\"\nnodes = \"n1\"\n{q}\n\
                 [[partitions]]\nname = \"cpu\"\nnodes = \"n1\"\n"
            )
        };
        let c = Config::from_toml(&conf("qos = \"gpuqos\""), p).unwrap();
        assert_eq!(c.partitions[0].qos.as_deref(), Some("gpuqos"));
        assert_eq!(c.partitions[1].qos, None);
        // Slurm's key name is accepted too.
        let c = Config::from_toml(&conf("QOS = \"gpuqos\""), p).unwrap();
        assert_eq!(c.partitions[0].qos.as_deref(), Some("gpuqos"));
        for bad in ["qos = \"\"", "qos = \"a,b\""] {
            let e = Config::from_toml(&conf(bad), p).unwrap_err().to_string();
            assert!(e.contains("partition 'gpu': bad qos"), "{bad}: {e}");
        }
    }
}
