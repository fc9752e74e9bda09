//! The controller's state and the reactor functions that change it (cf. slurmctld's
//! job_mgr.c, node_mgr.c, proc_req.c). Every function takes `now` and records what the
//! outside world must do in [`Effects`]; nothing here performs I/O, so the actor loop is
//! thin and these functions are tested directly.
//!
//! Invariants (checked by [`Cluster::sanity_check`]): a node's `alloc_cpus`/`alloc_mem`
//! equal the sum over running or completing jobs allocated on it; only active jobs hold
//! allocations.

use crate::config::Config;
use crate::model::array::{ArrayInfo, ArraySpec, IndexSet};
use crate::model::depend::DepStatus;
use crate::model::job::{Allocation, ExitStatus, PastRun, StepRecord};
use crate::model::{
    HoldKind, Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, PartitionState, Reason,
    TimeLimit, hostlist,
};
use crate::proto::ArrayTasks;
use crate::proto::{
    EndKind, FromAgent, JobFilter, JobResult, JobUpdate, LaunchBatch, NodeUpdate, SlurmError,
    TestOnly, ToAgent,
};
use crate::proto::{PriorityRow, PriorityWeights, SchedStats};
use crate::sched::priority::{self, PriorityContext};
use crate::sched::{self, Decision, SchedConfig};
use std::collections::{HashMap, HashSet};

/// Pending jobs up to which every pass also runs backfill; above it, backfill runs
/// every `bf_interval` seconds (Slurm runs it only on its interval; sluice plans small
/// queues at once so that `squeue --start` and short jobs need not wait).
const BACKFILL_EVERY_PASS: usize = 1000;

/// Seconds a requeued job waits before it is eligible again (reason BeginTime), so that
/// its node finishes cleaning up and the requeue is visible as PENDING.
const REQUEUE_DELAY: i64 = 5;

/// Who is asking (from SO_PEERCRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
}

/// What the actor must do after a reactor function ran.
#[derive(Debug, Default)]
pub struct Effects {
    /// Jobs whose record changed and must be written to the store.
    pub persist: Vec<Job>,
    /// Messages for node agents.
    pub to_agent: Vec<(String, ToAgent)>,
    /// A scheduling pass is due.
    pub schedule: bool,
    /// Events for srun step streams, by stream token (`ctld::steps`).
    pub to_client: Vec<(u64, crate::proto::StepEvent)>,
    /// The fair-share usage ledger changed and must be written to the store.
    pub usage: Option<Box<crate::sched::fairshare::UsageLedger>>,
}

/// Why a running job is being ended by the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Back to the queue once the node confirms the end; `node_fail` when its node
    /// failed (the ended run is recorded as NODE_FAIL rather than REQUEUED).
    Requeue { hold: bool, node_fail: bool },
}

/// Which processes of a running job a signal from `scancel --signal` reaches
/// (scancel(1); slurmctld `job_signal` with KILL_JOB_BATCH / KILL_FULL_JOB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalScope {
    /// The default: every step of the job, never the batch shell (Slurm sends signals
    /// other than SIGKILL to the batch step only when asked). A job without steps
    /// gets nothing.
    Steps,
    /// `-b/--batch`: the batch shell only, not its children, not the steps.
    Batch,
    /// `-f/--full`: the batch shell, its children (its process group) and every step.
    Full,
}

impl SignalScope {
    /// The scope of scancel's `-b` (`batch`) and `-f` (`full`, which wins).
    pub fn of(batch: bool, full: bool) -> SignalScope {
        match (batch, full) {
            (_, true) => SignalScope::Full,
            (true, false) => SignalScope::Batch,
            (false, false) => SignalScope::Steps,
        }
    }
}

/// The whole cluster as the controller knows it.
pub struct Cluster {
    pub cluster_name: String,
    pub slurm_version: String,
    pub min_job_age: u32,
    pub kill_wait: u32,
    /// The uid the controller runs as; it is an operator like root.
    pub owner_uid: u32,
    /// Boxed: map nodes are often half full, and a job record is over a kilobyte.
    /// Indexed by owner, array and heterogeneous leader (`JobTable`).
    pub jobs: crate::ctld::jobtable::JobTable,
    pub nodes: Vec<Node>,
    pub partitions: Vec<Partition>,
    /// Group memberships for partitions' AllowGroups, looked up by the controller's
    /// edge (`ctld::refresh_groups`) before a request that needs them.
    pub groups: GroupView,
    pub next_id: u32,
    endings: HashMap<u32, Ending>,
    /// Running jobs whose `--signal` warning has been sent.
    warned: std::collections::HashSet<u32>,
    /// How stepd isolates jobs (the `[cgroup]` section), sent with every launch so that
    /// remote nodes need no configuration of their own.
    pub cgroup: crate::config::CgroupConf,
    /// Extra `scontrol show config` entries.
    pub config_entries: Vec<(String, String)>,
    /// The config file the cluster was built from (`None` in personal mode), which
    /// `scontrol reconfigure` reads again.
    pub config_source: Option<std::path::PathBuf>,
    /// Scheduler and priority parameters.
    pub sched_cfg: SchedConfig,
    /// Cluster licenses (name, total).
    pub licenses: Vec<(String, u32)>,
    /// EnforcePartLimits=ALL (refuse at submit what can never run).
    pub enforce_part_limits: bool,
    /// sdiag counters.
    pub stats: SchedStats,
    /// When backfill last ran.
    last_backfill: i64,
    /// When any scheduling pass last ran.
    last_pass: i64,
    /// Environments of recent submissions by hash, to share identical ones.
    envs: HashMap<u64, crate::model::Env>,
    /// Seconds between periodic passes (`sched_interval`).
    pub sched_interval: u32,
    /// Array indices must be below this (MaxArraySize).
    pub max_array_size: u32,
    /// Cancel jobs whose dependency can never be satisfied (`kill_invalid_depend`).
    pub kill_invalid_depend: bool,
    /// Live and waiting steps (`ctld::steps`).
    pub steps: super::steps::StepTable,
    /// Accounts, QOS, limits, usage and billing (`ctld::acct`), owned by accounting.
    pub acct: super::acct::Accounting,
    /// Advanced reservations (`ctld::resv`).
    pub resv: super::resv::Resvs,
    /// Prolog/epilog/health-check settings, sent to agents and with every launch.
    pub scripts: crate::config::scripts::NodeScripts,
    /// RebootProgram and ResumeTimeout (`state/reboot.rs`).
    pub reboot: reboot::RebootConf,
    /// Jobs being requeued because their prolog failed: held with Slurm's
    /// `launch failed requeued held` once their node confirms the end.
    launch_failed: std::collections::HashSet<u32>,
    /// Minutes a job may run past its time limit (OverTimeLimit;
    /// `config::OVER_TIME_UNLIMITED`: never ended for it).
    pub over_time_limit: u32,
    /// Nodes whose agent reports the end of each epilog (`Register::reports_epilog`):
    /// ended jobs stay COMPLETING there until it comes (`state::completing`).
    epilog_reporters: HashSet<String>,
}

impl Cluster {
    /// A cluster from configuration, with no jobs; nodes start UNKNOWN until their agent
    /// registers.
    pub fn new(cfg: &Config, owner_uid: u32) -> Cluster {
        let nodes = cfg
            .nodes
            .iter()
            .map(|nc| {
                let mut n = Node::new(&nc.name, nc.cpus.unwrap_or(0), nc.memory.unwrap_or(0));
                n.features = nc.features.clone();
                n.weight = nc.weight.unwrap_or(1);
                n.tmp_disk = nc.tmp_disk.unwrap_or(0);
                n.gres = nc.gres_devices().unwrap_or_default();
                n.alloc_gres = vec![0; n.gres.len()];
                n.gpu_foreign = nc.gpu_foreign.unwrap_or_default();
                n.sockets = nc.sockets.unwrap_or(1);
                n.threads_per_core = nc.threads_per_core.unwrap_or(1);
                n.cores_per_socket = nc.cores_per_socket.unwrap_or(n.cpus / n.sockets.max(1));
                n.partitions = cfg
                    .partitions
                    .iter()
                    .filter(|p| p.nodes.contains(&nc.name))
                    .map(|p| p.name.clone())
                    .collect();
                n.version = cfg.slurm_version.clone();
                n
            })
            .collect();
        let config_entries = vec![
            ("ClusterName".into(), cfg.cluster_name.clone()),
            (
                "SLUICE_CONF".into(),
                cfg.source
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "(personal mode)".into()),
            ),
            // sluice listens on a Unix socket, not Slurm's TCP port: the port keeps
            // the value SLURM_WORKING_CLUSTER reports, the socket has its own key.
            (
                "SlurmctldPort".into(),
                crate::config::WORKING_CLUSTER_PORT.to_string(),
            ),
            ("SluiceSocket".into(), cfg.socket.display().to_string()),
            (
                "StateSaveLocation".into(),
                cfg.state_dir.display().to_string(),
            ),
            ("SlurmdSpoolDir".into(), cfg.spool_dir.display().to_string()),
            (
                "SchedulerType".into(),
                match cfg.sched.policy {
                    sched::Policy::Fifo => "sched/builtin",
                    _ => "sched/backfill",
                }
                .into(),
            ),
            (
                "SchedulerParameters".into(),
                format!(
                    "bf_window={},bf_resolution={},bf_max_job_test={},bf_max_job_user={},bf_interval={}{}{}{}",
                    cfg.sched.bf_window / 60,
                    cfg.sched.bf_resolution,
                    cfg.sched.bf_max_job_test,
                    cfg.sched.bf_max_job_user,
                    cfg.sched.bf_interval,
                    if cfg.sched.bf_continue {
                        ",bf_continue"
                    } else {
                        ""
                    },
                    if cfg.sched.policy.is_easy() {
                        ",easy"
                    } else {
                        ""
                    },
                    if cfg.kill_invalid_depend {
                        ",kill_invalid_depend"
                    } else {
                        ""
                    },
                ),
            ),
            ("SelectType".into(), "select/cons_tres".into()),
            ("SelectTypeParameters".into(), "CR_CPU_MEMORY".into()),
            (
                "EnforcePartLimits".into(),
                if cfg.enforce_part_limits { "ALL" } else { "NO" }.into(),
            ),
            (
                "PriorityMaxAge".into(),
                crate::model::time::fmt_hms(cfg.sched.priority.max_age.max(0) as u64),
            ),
            (
                "PriorityDecayHalfLife".into(),
                crate::model::time::fmt_hms(cfg.sched.priority.decay_half_life.max(0) as u64),
            ),
            ("PriorityCalcPeriod".into(), "00:01:00".into()),
            (
                "PriorityUsageResetPeriod".into(),
                cfg.sched.priority.usage_reset.name().into(),
            ),
            ("PriorityFlags".into(), {
                let p = &cfg.sched.priority;
                let mut f = Vec::new();
                if p.small_relative_to_time {
                    f.push("SMALL_RELATIVE_TO_TIME");
                }
                if p.fairshare_algorithm == crate::sched::fairshare::Algorithm::Classic {
                    f.push("NO_FAIR_TREE");
                }
                f.join(",")
            }),
            ("PriorityType".into(), "priority/multifactor".into()),
            ("PriorityWeightTRES".into(), {
                let t = &cfg.sched.priority.weight_tres;
                if t.is_empty() {
                    "(null)".into()
                } else {
                    t.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                }
            }),
            (
                "Licenses".into(),
                if cfg.licenses.is_empty() {
                    "(null)".into()
                } else {
                    cfg.licenses
                        .iter()
                        .map(|(n, c)| format!("{n}:{c}"))
                        .collect::<Vec<_>>()
                        .join(",")
                },
            ),
            ("ProctrackType".into(), "proctrack/pgid".into()),
            (
                "AccountingStorageType".into(),
                "accounting_storage/sluice".into(),
            ),
            ("MaxArraySize".into(), cfg.max_array_size.to_string()),
            ("SchedulerTimeSlice".into(), "30 sec".into()),
            ("PreemptMode".into(), cfg.sched.preempt.mode.as_str().into()),
            (
                "PreemptType".into(),
                cfg.sched.preempt.preempt_type.name().into(),
            ),
            (
                "PreemptExemptTime".into(),
                crate::model::time::fmt_hms(cfg.sched.preempt.exempt_time),
            ),
        ];
        let mut config_entries = config_entries;
        // The integer PriorityWeight* lines, just before PriorityWeightTRES.
        let w = &cfg.sched.priority;
        let at = config_entries
            .iter()
            .position(|(k, _)| k == "PriorityWeightTRES")
            .unwrap_or(config_entries.len());
        config_entries.splice(
            at..at,
            [
                ("PriorityWeightAge", w.weight_age),
                ("PriorityWeightAssoc", w.weight_assoc),
                ("PriorityWeightFairShare", w.weight_fairshare),
                ("PriorityWeightJobSize", w.weight_jobsize),
                ("PriorityWeightPartition", w.weight_partition),
                ("PriorityWeightQOS", w.weight_qos),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        config_entries.extend(scripts::config_entries(&cfg.scripts));
        config_entries.extend(reboot::config_entries(cfg));
        config_entries.push((
            "OverTimeLimit".into(),
            match cfg.over_time_limit {
                crate::config::OVER_TIME_UNLIMITED => "UNLIMITED".into(),
                m => format!("{m} min"),
            },
        ));
        Cluster {
            cluster_name: cfg.cluster_name.clone(),
            slurm_version: cfg.slurm_version.clone(),
            min_job_age: cfg.min_job_age,
            kill_wait: cfg.kill_wait,
            reboot: reboot::RebootConf::from_config(cfg),
            owner_uid,
            jobs: crate::ctld::jobtable::JobTable::new(),
            nodes,
            partitions: cfg.partitions.clone(),
            next_id: 1,
            endings: HashMap::new(),
            warned: Default::default(),
            cgroup: cfg.cgroup.clone(),
            config_entries,
            config_source: cfg.source.clone(),
            sched_cfg: cfg.sched.clone(),
            licenses: cfg.licenses.clone(),
            enforce_part_limits: cfg.enforce_part_limits,
            groups: GroupView::default(),
            stats: SchedStats::default(),
            last_backfill: i64::MIN / 2,
            last_pass: i64::MIN / 2,
            envs: HashMap::new(),
            sched_interval: cfg.sched_interval,
            max_array_size: cfg.max_array_size,
            kill_invalid_depend: cfg.kill_invalid_depend,
            steps: Default::default(),
            acct: super::acct::Accounting {
                assoc: Default::default(),
                enforce_cfg: cfg.accounting_storage_enforce,
                used_mins: Default::default(),
                usage_threshold_factors: None,
                partition_qos: cfg
                    .partitions
                    .iter()
                    .filter_map(|p| Some((p.name.clone(), p.qos.clone()?)))
                    .collect(),
                billing: crate::model::billing::BillingTable::from_partitions(
                    &cfg.partitions,
                    cfg.sched.priority.max_tres,
                ),
                ledger: Default::default(),
                fs_cache: Default::default(),
            },
            resv: Default::default(),
            scripts: cfg.scripts.clone(),
            launch_failed: Default::default(),
            over_time_limit: cfg.over_time_limit,
            epilog_reporters: Default::default(),
        }
    }

    /// Root and the controller's owner may act on any job and node.
    pub fn is_operator(&self, c: Caller) -> bool {
        c.uid == 0 || c.uid == self.owner_uid
    }

    /// Takes jobs loaded from the store, re-applying allocations of active jobs.
    pub fn restore(&mut self, jobs: Vec<Job>, next_id: u32) {
        for mut j in jobs {
            let mut env = std::mem::take(&mut j.spec.environment);
            self.intern_env(&mut env);
            j.spec.environment = env;
            if j.is_active()
                && let Some(a) = &j.alloc
            {
                let a = a.clone();
                self.charge(&a, j.completing, 1);
            }
            self.jobs.insert(j.id, Box::new(j));
        }
        self.next_id = next_id.max(self.next_id);
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }

    /// Adds (`sign` = 1) or removes (`sign` = -1) an allocation from its nodes.
    fn charge(&mut self, a: &Allocation, completing: bool, sign: i32) {
        for (k, (name, cpus)) in a.nodes.iter().zip(&a.cpus).enumerate() {
            let mem = a.mem_per_node;
            if let Some(n) = self.node_mut(name) {
                if let Some(gres) = a.gres.get(k) {
                    n.alloc_gres.resize(n.gres.len(), 0);
                    for g in gres {
                        if let Some(u) = n.alloc_gres.get_mut(g.slot as usize) {
                            *u = if sign > 0 {
                                u.saturating_add(g.count)
                            } else {
                                u.saturating_sub(g.count)
                            };
                        }
                    }
                }
                if sign > 0 {
                    n.alloc_cpus += cpus;
                    n.alloc_mem += mem;
                    n.running_jobs += 1;
                    if completing {
                        n.completing_jobs += 1;
                    }
                } else {
                    n.alloc_cpus = n.alloc_cpus.saturating_sub(*cpus);
                    n.alloc_mem = n.alloc_mem.saturating_sub(mem);
                    n.running_jobs = n.running_jobs.saturating_sub(1);
                    if completing {
                        n.completing_jobs = n.completing_jobs.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// Checks the invariants; returns the first violation.
    pub fn sanity_check(&self) -> Result<(), String> {
        let mut cpus: HashMap<&str, u32> = HashMap::new();
        for j in self.jobs.values().filter(|j| j.is_active()) {
            if let Some(a) = &j.alloc {
                for (n, c) in a.nodes.iter().zip(&a.cpus) {
                    *cpus.entry(n).or_default() += c;
                }
            }
        }
        for n in &self.nodes {
            let want = cpus.get(n.name.as_str()).copied().unwrap_or(0);
            if n.alloc_cpus != want {
                return Err(format!(
                    "node {}: alloc_cpus {} != {}",
                    n.name, n.alloc_cpus, want
                ));
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ submit

    /// Validates a submission and resolves partition, limits and resources into a new
    /// pending job (not yet inserted). Errors are Slurm's submit errors
    /// (EnforcePartLimits=ALL: a job that could never run is refused).
    pub fn resolve(
        &self,
        spec: JobSpec,
        caller: Caller,
        now: i64,
        names: &dyn Fn(u32, u32) -> (String, String),
    ) -> Result<Job, SlurmError> {
        let mut spec = spec;
        // GPU counts as gres_job_state_validate settles them (the front-ends check
        // first; this is for any other client).
        spec.resolve_ntasks_per_gpu()
            .map_err(|_| SlurmError::InvalidGres)?;
        spec.check_gpu_counts()
            .map_err(|_| SlurmError::InvalidGres)?;
        self.check_gres_names(&spec)?;
        let part = self.pick_partition(&spec)?;
        if matches!(part.state, PartitionState::Inactive | PartitionState::Drain) {
            return Err(SlurmError::PartitionConfigUnavailable);
        }
        self.check_request(&spec, part, caller)?;
        for expr in [&spec.nodelist, &spec.exclude].into_iter().flatten() {
            let names = hostlist::expand(expr).map_err(|_| SlurmError::InvalidNodeName)?;
            if names
                .iter()
                .any(|n| !self.nodes.iter().any(|x| &x.name == n))
            {
                return Err(SlurmError::InvalidNodeName);
            }
        }
        let time_limit = spec.time_limit.unwrap_or_else(|| part.default_limit());
        // slurmctld refuses a time-min above the limit the job gets.
        if let (Some(m), Some(l)) = (spec.time_min, time_limit.secs())
            && u64::from(m) * 60 > l
        {
            return Err(SlurmError::InvalidTimeLimit);
        }
        let cpt = spec.cpus_per_task.unwrap_or(1).max(1);
        let nodes_min = spec.nodes_min.unwrap_or(1).max(1);
        // Counts come from the user: products that overflow are requests no node can
        // satisfy, never a reason to panic.
        let ntasks = match (spec.ntasks, spec.ntasks_per_node) {
            (Some(n), _) => n.max(1),
            (None, Some(per)) => per
                .max(1)
                .checked_mul(nodes_min)
                .ok_or(SlurmError::NodeConfigUnavailable)?,
            (None, None) => nodes_min,
        };
        let req_cpus = ntasks
            .checked_mul(cpt)
            .ok_or(SlurmError::NodeConfigUnavailable)?;
        let req_nodes = match (spec.ntasks_per_node, spec.nodes_min) {
            (Some(per), None) => ntasks.div_ceil(per.max(1)),
            _ => nodes_min,
        };
        let members: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| part.nodes.contains(&n.name))
            .collect();
        let gpu_default = spec.wants_gres() && spec.mem_per_gpu.is_none();
        if spec.mem.is_none()
            && gpu_default
            && let Some(m) = part.def_mem_per_gpu
        {
            spec.mem_per_gpu = Some(m);
        }
        let req_mem = spec.mem.unwrap_or_else(|| {
            if let (None, Some(m)) = (part.def_mem_per_cpu, part.def_mem_per_node) {
                return MemReq::PerNode(m);
            }
            if let Some(m) = spec.mem_per_gpu {
                // Shown per node: the GPUs asked per node times the per-GPU memory.
                let per_node: u64 = spec
                    .gres
                    .iter()
                    .filter(|g| g.name == "gpu")
                    .map(|g| g.count)
                    .sum::<u64>()
                    + spec.gpus_per_node.as_ref().map_or(0, |g| g.count);
                return MemReq::PerNode(m * per_node.max(1));
            }
            let per_cpu = part.def_mem_per_cpu.unwrap_or_else(|| {
                members
                    .iter()
                    .filter(|n| n.cpus > 0)
                    .map(|n| n.real_memory / u64::from(n.cpus))
                    .min()
                    .unwrap_or(0)
            });
            MemReq::PerCpu(per_cpu)
        });
        let (user, group) = names(caller.uid, caller.gid);
        let mut job = Job {
            uid: caller.uid,
            gid: caller.gid,
            user,
            group,
            partition: part.name.clone(),
            account: spec.account.clone().unwrap_or_default(),
            qos: spec.qos.clone().unwrap_or_else(|| "normal".into()),
            time_limit,
            req_cpus,
            req_tasks: ntasks,
            req_nodes,
            req_mem,
            priority: 0,
            submit_time: now,
            spec,
            ..Job::default()
        };
        self.set_billing(&mut job);
        // slurmctld lets only operators set a negative nice or a priority.
        if (job.spec.nice < 0 || job.spec.priority.is_some()) && !self.is_operator(caller) {
            return Err(SlurmError::AccessDenied);
        }
        self.check_job_resv(&job, caller)?;
        if let Some(text) = &job.spec.array {
            let a = ArraySpec::parse(text, self.max_array_size)
                .map_err(|_| SlurmError::InvalidArraySpec)?;
            job.array = Some(Box::new(ArrayInfo::from_spec(&a)));
        }
        if let Some(text) = &job.spec.dependency {
            job.depend = self.parse_dependency(text, 0)?;
        }
        if let Some(d) = job.spec.deadline
            && (d <= now || job.spec.begin.is_some_and(|b| b > d))
        {
            return Err(SlurmError::InvalidTimeValue);
        }
        // Account, QOS and limits (AccountingStorageEnforce).
        self.acct_resolve(&mut job, now)?;
        job.priority = self.priority_of(&job, now);
        if let Some(p) = job.spec.priority {
            job.priority = p;
            job.priority_set = p > 0;
            if p == 0 && !job.spec.hold {
                job.hold = Some(HoldKind::Admin);
                job.reason = Reason::JobHeldAdmin;
            }
        }
        if job.spec.hold {
            job.hold = Some(HoldKind::User);
            job.priority = 0;
            job.reason = Reason::JobHeldUser;
        } else if job.hold.is_none() {
            job.eligible_time = Some(job.spec.begin.unwrap_or(now).max(now));
        }
        if !self.enforce_part_limits {
            // EnforcePartLimits=NO: accept; the job pends with the reason that applies.
            // Memory and GRES beyond every node are still refused, as Slurm does.
            return match sched::static_reason(&job, part, &self.nodes) {
                Some(Reason::PartitionConfig)
                    if job.spec.wants_gres()
                        || matches!(job.req_mem, MemReq::PerNode(m) if m > 0) =>
                {
                    Err(SlurmError::NodeConfigUnavailable)
                }
                _ => Ok(job),
            };
        }
        // EnforcePartLimits=ALL: refuse what can never run, with Slurm's errors.
        let any_fits = sched::job_partitions(&job).iter().any(|p| {
            self.partitions
                .iter()
                .find(|x| &x.name == p)
                .is_some_and(|x| sched::static_reason(&job, x, &self.nodes).is_none())
        });
        if !any_fits {
            return Err(match sched::static_reason(&job, part, &self.nodes) {
                Some(Reason::PartitionTimeLimit) => SlurmError::InvalidTimeLimit,
                Some(Reason::PartitionNodeLimit) => SlurmError::InvalidNodeCount,
                Some(Reason::BadConstraints) => {
                    SlurmError::Other("Invalid feature specification".into())
                }
                Some(Reason::Licenses) => SlurmError::Other("Invalid license specification".into()),
                _ => SlurmError::NodeConfigUnavailable,
            });
        }
        Ok(job)
    }

    /// Checks what is refused whatever EnforcePartLimits says: unknown licenses,
    /// malformed constraints and distributions, and partition access (AllowAccounts,
    /// AllowGroups, AllowQos), with Slurm's messages.
    /// Refuses a request naming a GRES that no node has, as Slurm refuses one not in
    /// its GresTypes (ESLURM_INVALID_GRES, rather than "node configuration not
    /// available"). Only once every node has registered: an agent that has not yet
    /// reported may still discover GPUs.
    fn check_gres_names(&self, spec: &JobSpec) -> Result<(), SlurmError> {
        if self.nodes.iter().any(|n| n.agent_start_time.is_none()) {
            return Ok(());
        }
        let gpu_asked = spec.gpus.is_some()
            || spec.gpus_per_node.is_some()
            || spec.gpus_per_task.is_some()
            || spec.gpus_per_socket.is_some();
        let names = spec
            .gres
            .iter()
            .map(|g| g.name.as_str())
            .chain(gpu_asked.then_some("gpu"));
        for name in names {
            if !self
                .nodes
                .iter()
                .any(|n| n.gres.iter().any(|d| d.name == name))
            {
                return Err(SlurmError::InvalidGres);
            }
        }
        Ok(())
    }

    fn check_request(&self, spec: &JobSpec, part: &Partition, c: Caller) -> Result<(), SlurmError> {
        // An unknown license, or more of one than the cluster has (a job that could
        // never run), is refused as slurmctld's license_validate refuses it.
        for l in &spec.licenses {
            let total = self
                .licenses
                .iter()
                .find(|(n, _)| *n == l.name)
                .map(|(_, t)| *t);
            if total.is_none_or(|t| l.count > t) {
                return Err(SlurmError::Other("Invalid license specification".into()));
            }
        }
        if let Some(cst) = spec.constraint.as_deref().filter(|s| !s.is_empty())
            && crate::model::constraint::Constraint::parse(cst).is_err()
        {
            return Err(SlurmError::Other("Invalid feature specification".into()));
        }
        if let Some(d) = &spec.distribution
            && crate::model::job::parse_dist(d).is_none()
        {
            return Err(SlurmError::Other(
                "Invalid --distribution specification".into(),
            ));
        }
        let op = self.is_operator(c);
        if let Some(allowed) = &part.allow_accounts {
            let acct = spec.account.clone().unwrap_or_default();
            if !op && !allowed.contains(&acct) {
                return Err(SlurmError::Other(format!(
                    "Job's account not permitted to use this partition ({} allows {} not {})",
                    part.name,
                    allowed.join(","),
                    if acct.is_empty() { "(null)" } else { &acct }
                )));
            }
        }
        if let Some(groups) = &part.allow_groups
            && !op
            && !self.groups.admits(c, groups)
        {
            return Err(SlurmError::Other(
                "User's group not permitted to use this partition".into(),
            ));
        }
        if let Some(qos) = &part.allow_qos {
            let q = spec.qos.clone().unwrap_or_else(|| "normal".into());
            if !op && !qos.contains(&q) {
                return Err(SlurmError::Other(format!(
                    "Job's QOS not permitted to use this partition ({} allows {} not {q})",
                    part.name,
                    qos.join(",")
                )));
            }
        }
        Ok(())
    }

    /// The multifactor priority of an unheld job at `now`.
    pub fn priority_of(&self, job: &Job, now: i64) -> u32 {
        let ctx = self.priority_context(now);
        let pf = self
            .partitions
            .iter()
            .find(|p| p.name == job.partition)
            .map_or(1, |p| p.priority_job_factor);
        priority::factors(job, pf, &ctx, &self.sched_cfg.priority, now).priority()
    }

    /// Cluster totals and the fair-share tree for priority factors.
    pub fn priority_context(&self, now: i64) -> PriorityContext {
        PriorityContext {
            total_cpus: self.nodes.iter().map(|n| u64::from(n.cpus)).sum(),
            total_nodes: self.nodes.len() as u64,
            total_mem: self.nodes.iter().map(|n| n.real_memory).sum(),
            total_gpus: self
                .nodes
                .iter()
                .flat_map(|n| &n.gres)
                .filter(|g| g.name == "gpu")
                .map(|g| u64::from(g.count))
                .sum(),
            max_part_factor: self
                .partitions
                .iter()
                .map(|p| p.priority_job_factor)
                .max()
                .unwrap_or(1),
            fairshare: self.fairshare_tree(now, false),
            qos_norm: {
                let max = self.acct.assoc.max_qos_priority();
                self.acct
                    .assoc
                    .qos
                    .values()
                    .filter(|_| max > 0)
                    .map(|q| (q.name.clone(), f64::from(q.priority) / f64::from(max)))
                    .collect()
            },
            billing: self.acct.billing.clone(),
            // Only TRES weights read the partitions' wholes: no work on each pass
            // without them.
            partition_tres: if self.sched_cfg.priority.weight_tres.is_empty() {
                Default::default()
            } else {
                self.partitions
                    .iter()
                    .map(|p| {
                        let nodes = self.nodes.iter().filter(|n| n.partitions.contains(&p.name));
                        (
                            p.name.clone(),
                            crate::model::billing::nodes_tres(nodes, &self.licenses),
                        )
                    })
                    .collect()
            },
        }
    }

    /// The fair-share tree at `now`: recorded usage decayed to `now` plus what running
    /// jobs have used since the last accounting tick, over the configured accounts and
    /// every association with usage or an active job. `fresh`: recompute even if a
    /// tree was computed for this second.
    pub fn fairshare_tree(
        &self,
        now: i64,
        fresh: bool,
    ) -> std::sync::Arc<crate::sched::fairshare::FairShareTree> {
        use crate::sched::fairshare::FairShareTree;
        if !fresh
            && let Some((t, tree)) = &*self.acct.fs_cache.borrow()
            && *t == now
        {
            return tree.clone();
        }
        let p = &self.sched_cfg.priority;
        let ledger = self.ledger_at(now);
        let mut extra: Vec<(String, String)> = self
            .jobs
            .values()
            .filter(|j| j.is_active())
            .map(|j| FairShareTree::key_of(&j.account, &j.user))
            .collect();
        extra.sort_unstable();
        extra.dedup();
        let (accounts, users) = self.fairshare_defs();
        let tree = std::sync::Arc::new(FairShareTree::build(
            &accounts,
            &users,
            &ledger,
            &extra,
            p.fairshare_algorithm,
        ));
        *self.acct.fs_cache.borrow_mut() = Some((now, tree.clone()));
        tree
    }

    /// The usage ledger as it would be at `now`: decayed, with running jobs charged
    /// up to `now` (the stored ledger is not changed).
    fn ledger_at(&self, now: i64) -> crate::sched::fairshare::UsageLedger {
        let p = &self.sched_cfg.priority;
        let mut ledger = self.acct.ledger.clone();
        ledger.accrue(&self.running_usage(), now, p.decay_half_life, p.usage_reset);
        ledger
    }

    /// The accounts and user associations fair-share works on: those of the
    /// association tree (sacctmgr), then those of `[[accounts]]` in the config that the
    /// tree lacks. `Fairshare=parent` counts as 1 share (not modelled yet).
    fn fairshare_defs(
        &self,
    ) -> (
        Vec<crate::sched::fairshare::AccountDef>,
        Vec<crate::sched::fairshare::UserDef>,
    ) {
        use crate::model::assoc::Shares;
        use crate::sched::fairshare::{AccountDef, UserDef};
        let raw = |s: Shares| match s {
            Shares::Raw(n) => n,
            Shares::Parent => 1,
        };
        let mut accounts: Vec<AccountDef> = self
            .acct
            .assoc
            .accounts
            .values()
            .filter(|a| a.name != crate::model::assoc::ROOT)
            .map(|a| AccountDef {
                name: a.name.clone(),
                parent: a.parent.clone(),
                shares: raw(a.shares),
            })
            .collect();
        let mut users: Vec<UserDef> = self
            .acct
            .assoc
            .user_assocs
            .iter()
            .map(|u| UserDef {
                user: u.user.clone(),
                account: u.account.clone(),
                shares: raw(u.shares),
            })
            .collect();
        let p = &self.sched_cfg.priority;
        for a in &p.accounts {
            if !self.acct.assoc.accounts.contains_key(&a.name) {
                accounts.push(a.clone());
            }
        }
        for u in &p.user_assocs {
            if !users
                .iter()
                .any(|x| x.user == u.user && x.account == u.account)
            {
                users.push(u.clone());
            }
        }
        (accounts, users)
    }

    /// What each running job charges the usage ledger per second.
    pub(super) fn running_usage(&self) -> Vec<crate::sched::fairshare::RunCharge> {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .filter_map(|j| self.run_charge(j, j.alloc.as_ref()?, j.start_time?))
            .collect()
    }

    /// What `j`, holding `a` since `start`, charges the usage ledger per second: its
    /// billing and TRES times its QOS's UsageFactor, to its association, its QOS and
    /// its partition's QOS (when that is another one).
    fn run_charge(
        &self,
        j: &Job,
        a: &Allocation,
        start: i64,
    ) -> Option<crate::sched::fairshare::RunCharge> {
        let factor = self.acct.assoc.qos(&j.qos).map_or(1.0, |q| q.usage_factor);
        let held = crate::sched::limits::alloc_tres(a);
        let billing = self.acct.billing.billable(&j.partition, &held) * factor;
        let tres = held
            .into_iter()
            .map(|(k, v)| (k, v as f64 * factor))
            .collect();
        let mut qos = Vec::new();
        if self.acct.assoc.qos(&j.qos).is_some() {
            qos.push(j.qos.clone());
        }
        if let Some(pq) = self.acct.partition_qos.get(&j.partition)
            && *pq != j.qos
            && self.acct.assoc.qos(pq).is_some()
        {
            qos.push(pq.clone());
        }
        Some(crate::sched::fairshare::RunCharge {
            key: crate::sched::fairshare::FairShareTree::key_of(&j.account, &j.user),
            billing,
            tres,
            qos,
            start,
        })
    }

    /// sshare's rows at `now`: every association of the fair-share tree in display
    /// order, with TRESRunMins from running jobs' time left, GrpTRESRaw from the usage
    /// ledger (decayed TRES-minutes, running jobs' usage so far included), and the
    /// association's id, partition and GrpTRESMins limit from the association tree.
    pub fn share_rows(&self, now: i64) -> Vec<crate::proto::ShareRow> {
        use crate::sched::fairshare::{Algorithm, FairShareTree};
        use crate::sched::limits::{UsedMins, alloc_tres};
        let tree = self.fairshare_tree(now, true);
        // Per association of the fair-share tree: TRES × minutes left of running jobs.
        let mut run: Vec<HashMap<String, f64>> = vec![HashMap::new(); tree.assocs.len()];
        let index: HashMap<(String, String), usize> = tree
            .assocs
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some(((a.account.clone(), a.user.clone()?), i)))
            .collect();
        for j in self.jobs.values().filter(|j| j.state == JobState::Running) {
            let (Some(a), Some(start)) = (&j.alloc, j.start_time) else {
                continue;
            };
            let key = FairShareTree::key_of(&j.account, &j.user);
            let i = index
                .get(&key)
                .or_else(|| index.get(&("root".to_string(), j.user.clone())));
            let Some(&i) = i else { continue };
            let left = match j.time_limit.secs() {
                Some(l) => ((start + l as i64 - now).max(0) as f64 / 60.0).floor(),
                None => 0.0,
            };
            let mut held: HashMap<String, f64> = alloc_tres(a)
                .into_iter()
                .map(|(k, v)| (k, v as f64))
                .collect();
            held.insert(
                "billing".into(),
                self.acct.billing.billable(&j.partition, &alloc_tres(a)),
            );
            for (k, x) in held {
                *run[i].entry(k).or_default() += x * left;
            }
        }
        // Sum up the tree (children follow parents).
        for i in (1..tree.assocs.len()).rev() {
            if let Some(p) = tree.assocs[i].parent {
                for (k, x) in run[i].clone() {
                    *run[p].entry(k).or_default() += x;
                }
            }
        }
        let used = UsedMins::from_ledger(&self.ledger_at(now), &self.acct.assoc);
        let has_gpus = self
            .nodes
            .iter()
            .flat_map(|n| &n.gres)
            .any(|g| g.name == "gpu");
        // sshare lists the cluster's TRES in id order (AccountingStorageTRES).
        let names: Vec<&str> = [
            "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
        ]
        .into_iter()
        .chain(has_gpus.then_some("gres/gpu"))
        .collect();
        let list = |m: Option<&HashMap<String, f64>>| -> Vec<(String, u64)> {
            names
                .iter()
                .map(|n| {
                    let v = m.and_then(|m| m.get(*n)).copied().unwrap_or(0.0);
                    (n.to_string(), v.max(0.0) as u64)
                })
                .collect()
        };
        let fair_tree = self.sched_cfg.priority.fairshare_algorithm == Algorithm::FairTree;
        tree.display_order()
            .into_iter()
            .map(|i| {
                let a = &tree.assocs[i];
                let (limits, id, partition, raw) = match &a.user {
                    Some(u) => {
                        let mine: Vec<&crate::model::assoc::UserAssoc> = self
                            .acct
                            .assoc
                            .user_assocs
                            .iter()
                            .filter(|x| &x.user == u && x.account == a.account)
                            .collect();
                        // The partition-less association, else the user's only
                        // partition-specific ones (one fair-share leaf for all).
                        let all = mine.iter().copied().find(|x| x.partition.is_none());
                        let parts: Vec<&str> =
                            mine.iter().filter_map(|x| x.partition.as_deref()).collect();
                        let shown = all.or(mine.first().copied());
                        (
                            shown.map(|x| &x.limits),
                            shown.map(|x| x.id),
                            (all.is_none() && !parts.is_empty()).then(|| parts.join(",")),
                            used.users.get(&(u.clone(), a.account.clone())),
                        )
                    }
                    None => {
                        let acct = self.acct.assoc.account(&a.account);
                        (
                            acct.map(|x| &x.limits),
                            acct.map(|x| x.id),
                            None,
                            used.accounts.get(&a.account),
                        )
                    }
                };
                crate::proto::ShareRow {
                    account: a.account.clone(),
                    user: a.user.clone(),
                    raw_shares: a.parent.map(|_| a.shares),
                    share: tree.shares.get(i).cloned().unwrap_or_default(),
                    fair_tree,
                    tres_run_mins: list(Some(&run[i])),
                    grp_tres_mins: limits
                        .map(|l| l.grp_tres_mins.to_string())
                        .unwrap_or_default(),
                    grp_tres_raw: list(raw),
                    id: id.filter(|&x| x > 0),
                    partition,
                }
            })
            .collect()
    }

    /// Installs the fair-share usage saved before a restart. `PriorityUsageResetPeriod=
    /// NOW` clears it; a ledger never saved starts accruing at `now`.
    pub fn restore_usage(&mut self, mut l: crate::sched::fairshare::UsageLedger, now: i64) {
        use crate::sched::fairshare::ResetPeriod;
        if self.sched_cfg.priority.usage_reset == ResetPeriod::Now {
            l.usage.clear();
        }
        if l.accrued_at == 0 {
            l.accrued_at = now;
            l.decayed_at = now;
        }
        self.acct.ledger = l;
        self.acct.fs_cache.borrow_mut().take();
    }

    /// The periodic accounting tick: charges running jobs up to `now`, decays, asks
    /// for the ledger to be saved, and ends the running jobs a usage limit has caught
    /// up with (`ctld::acct::usage_time_outs`).
    pub fn accrue_usage(&mut self, now: i64, fx: &mut Effects) {
        let p = &self.sched_cfg.priority;
        let (half, reset) = (p.decay_half_life, p.usage_reset);
        let running = self.running_usage();
        self.acct.ledger.accrue(&running, now, half, reset);
        fx.usage = Some(Box::new(self.acct.ledger.clone()));
        self.acct.fs_cache.borrow_mut().take();
        self.usage_time_outs(now, fx);
    }

    /// sprio's rows: the factors of pending jobs matching `ids`/`users` (all if empty).
    pub fn priority_rows(
        &self,
        ids: &[u32],
        users: &[u32],
        now: i64,
    ) -> (Vec<PriorityRow>, PriorityWeights) {
        let ctx = self.priority_context(now);
        let w = &self.sched_cfg.priority;
        let rows = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && j.hold.is_none())
            .filter(|j| ids.is_empty() || ids.contains(&j.id))
            .filter(|j| users.is_empty() || users.contains(&j.uid))
            .map(|j| {
                let pf = self
                    .partitions
                    .iter()
                    .find(|p| p.name == j.partition)
                    .map_or(1, |p| p.priority_job_factor);
                let f = priority::factors(j, pf, &ctx, w, now);
                PriorityRow {
                    job_id: j.id,
                    partition: j.partition.clone(),
                    user: j.user.clone(),
                    priority: j.priority,
                    factors: f,
                }
            })
            .collect();
        let weights = PriorityWeights {
            age: w.weight_age,
            assoc: w.weight_assoc,
            fairshare: w.weight_fairshare,
            jobsize: w.weight_jobsize,
            partition: w.weight_partition,
            qos: w.weight_qos,
            tres: w.weight_tres.clone(),
        };
        (rows, weights)
    }

    /// sdiag's counters at `now`.
    pub fn stats_at(&self, now: i64) -> SchedStats {
        let mut s = self.stats.clone();
        s.now = now;
        s.jobs_pending = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .count() as u64;
        s.jobs_running = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.completing)
            .count() as u64;
        s
    }

    /// Charges job `id`, which held `a` for `ran` seconds up to `end`, to the usage
    /// ledger: the part after the last accounting tick (earlier seconds were charged
    /// by it).
    fn record_usage(
        &mut self,
        id: u32,
        a: &Allocation,
        ran: u64,
        end: i64,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(charge) = self
            .jobs
            .get(&id)
            .and_then(|j| self.run_charge(j, a, end - ran as i64))
        else {
            return;
        };
        let p = &self.sched_cfg.priority;
        let (half, reset) = (p.decay_half_life, p.usage_reset);
        self.acct.ledger.decay_to(now, half, reset);
        self.acct.ledger.charge_running(&charge, end);
        fx.usage = Some(Box::new(self.acct.ledger.clone()));
        self.acct.fs_cache.borrow_mut().take();
    }

    fn pick_partition(&self, spec: &JobSpec) -> Result<&Partition, SlurmError> {
        match &spec.partition {
            Some(list) => {
                let mut first = None;
                for name in list.split(',').filter(|s| !s.is_empty()) {
                    let p = self
                        .partitions
                        .iter()
                        .find(|p| p.name == name)
                        .ok_or(SlurmError::InvalidPartition)?;
                    first.get_or_insert(p);
                }
                first.ok_or(SlurmError::InvalidPartition)
            }
            None => self
                .partitions
                .iter()
                .find(|p| p.default)
                .or(self.partitions.first())
                .ok_or(SlurmError::InvalidPartition),
        }
    }

    /// Shares `env` with an identical environment already held, if any: jobs submitted
    /// from one shell carry the same environment, and 100,000 copies of it would be
    /// most of the controller's memory.
    fn intern_env(&mut self, env: &mut crate::model::Env) {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        env.hash(&mut h);
        let key = h.finish();
        match self.envs.get(&key) {
            Some(known) if *known == *env => *env = known.clone(),
            _ => {
                if self.envs.len() >= 4096 {
                    self.envs.clear();
                }
                self.envs.insert(key, env.clone());
            }
        }
    }

    /// Inserts a resolved job under a new id; returns the id. An array is inserted as
    /// its meta record (see `ctld::array`).
    pub fn submit(&mut self, mut job: Job, fx: &mut Effects) -> u32 {
        let mut env = std::mem::take(&mut job.spec.environment);
        self.intern_env(&mut env);
        job.spec.environment = env;
        if job.spec.switches.is_some() {
            // As slurmctld does: the wait for switches is bounded by max_switch_wait,
            // which is also the wait when none was given.
            let cap = u32::try_from(self.sched_cfg.max_switch_wait.max(0)).unwrap_or(u32::MAX);
            job.spec.switch_wait = Some(job.spec.switch_wait.map_or(cap, |w| w.min(cap)));
        }
        let id = self.next_id;
        self.next_id += 1;
        job.id = id;
        if job.array.is_some() {
            job.array_job_id = id;
        }
        fx.persist.push(job.clone());
        fx.schedule = true;
        self.jobs.insert(id, Box::new(job));
        self.stats.jobs_submitted += 1;
        id
    }

    /// What `sbatch --test-only` reports for a resolved job.
    pub fn test_only(&self, mut job: Job, now: i64) -> TestOnly {
        job.id = u32::MAX;
        let begin = job.spec.begin.unwrap_or(now).max(now);
        // The job is planned among the queue as it is, from its earliest begin; a
        // hold (-H) is left out, as Slurm's will-run test ignores it.
        job.eligible_time = Some(now);
        job.hold = None;
        // First among the whole queue; when that gives no plan for it (behind
        // bf_max_job_test jobs, say), among the running jobs only, as Slurm's will-run
        // test does.
        let queue = self.test_only_plan(&job, begin, true);
        let (start, nodes, partition) = queue
            .or_else(|| self.test_only_plan(&job, begin, false))
            .unwrap_or((begin, String::new(), job.partition.clone()));
        TestOnly {
            job_id: self.next_id,
            start,
            nodes,
            cpus: job.req_cpus,
            partition,
        }
    }

    /// The start, nodes (compressed) and partition a scheduling pass at `begin` plans
    /// for `job` (id `u32::MAX`), among every active job (`with_queue`) or the running
    /// ones only; `None` when the pass neither starts it nor estimates its start.
    fn test_only_plan(
        &self,
        job: &Job,
        begin: i64,
        with_queue: bool,
    ) -> Option<(i64, String, String)> {
        let mut jobs: Vec<&Job> = self
            .jobs
            .values()
            .filter(|j| j.is_active() && (with_queue || j.state != JobState::Pending))
            .map(|j| &**j)
            .collect();
        jobs.push(job);
        let out = sched::run(&sched::Input {
            jobs: &jobs,
            nodes: &self.nodes,
            partitions: &self.partitions,
            licenses: &self.licenses,
            config: &self.sched_cfg,
            now: begin,
            backfill: true,
            limits: self.limits_policy(),
            reservations: &self.resv.list,
        });
        let mine = out.decisions.iter().find(|d| {
            matches!(d, Decision::Start { job_id, .. } | Decision::Pending { job_id, .. } if *job_id == u32::MAX)
        });
        match mine {
            Some(Decision::Start {
                alloc, partition, ..
            }) => Some((
                begin,
                hostlist::compress_sorted(&alloc.nodes),
                partition.clone(),
            )),
            _ => out
                .estimates
                .iter()
                .find(|e| e.job_id == u32::MAX)
                .map(|e| {
                    (
                        e.start,
                        hostlist::compress_sorted(&e.nodes),
                        e.partition.clone(),
                    )
                }),
        }
    }

    // ------------------------------------------------------------------ scheduling

    /// Recomputes the multifactor priority of every pending, unheld job.
    fn refresh_priorities(&mut self, now: i64) {
        self.acct.fs_cache.borrow_mut().take();
        let ctx = self.priority_context(now);
        let w = self.sched_cfg.priority.clone();
        let factor: HashMap<String, u32> = self
            .partitions
            .iter()
            .map(|p| (p.name.clone(), p.priority_job_factor))
            .collect();
        for j in self.jobs.values_mut() {
            if j.state == JobState::Pending && j.hold.is_none() && !j.priority_set {
                let pf = factor.get(&j.partition).copied().unwrap_or(1);
                j.priority = priority::factors(j, pf, &ctx, &w, now).priority();
            }
        }
    }

    /// Updates the sdiag counters after a pass whose main cycle took `main_us` and
    /// whose backfill (when `backfill`) took `bf_us` microseconds.
    fn record_pass_stats(
        &mut self,
        out: &sched::Outcome,
        backfill: bool,
        main_us: u64,
        bf_us: u64,
        now: i64,
    ) {
        let s = &mut self.stats;
        let us = main_us;
        s.main_cycles += 1;
        s.main_last_us = us;
        s.main_max_us = s.main_max_us.max(us);
        s.main_sum_us += us;
        s.main_depth_sum += u64::from(out.stats.main_depth);
        s.main_last_queue = u64::from(out.stats.queue_len);
        if s.main_first == 0 {
            s.main_first = now;
        }
        if backfill {
            self.last_backfill = now;
            s.bf_cycles += 1;
            s.bf_last_when = Some(now);
            s.bf_last_us = bf_us;
            s.bf_max_us = s.bf_max_us.max(bf_us);
            s.bf_sum_us += bf_us;
            s.bf_jobs += u64::from(out.stats.bf_started);
            s.bf_last_depth = u64::from(out.stats.bf_depth);
            s.bf_last_depth_try = u64::from(out.stats.bf_depth_try);
            s.bf_depth_sum += u64::from(out.stats.bf_depth);
            s.bf_depth_try_sum += u64::from(out.stats.bf_depth_try);
            s.bf_last_queue = u64::from(out.stats.bf_queue_len);
            s.bf_queue_sum += u64::from(out.stats.bf_queue_len);
            s.bf_last_table = u64::from(out.stats.bf_table_size);
            s.bf_table_sum += u64::from(out.stats.bf_table_size);
        }
    }

    /// Whether a resolved, not yet inserted job would start in a scheduling pass now,
    /// behind the jobs already queued (`--immediate`).
    pub fn can_start_now(&self, job: &Job, now: i64) -> bool {
        let mut job = job.clone();
        job.id = u32::MAX;
        if job
            .depend
            .as_ref()
            .is_some_and(|d| d.status() != DepStatus::Satisfied)
        {
            return false;
        }
        // Running jobs are in the input too: the scheduler plans around them.
        let mut jobs: Vec<&Job> = self
            .jobs
            .values()
            .map(|j| &**j)
            .filter(|j| j.is_active())
            .collect();
        jobs.push(&job);
        sched::schedule(&jobs, &self.nodes, &self.partitions, now)
            .iter()
            .any(|d| matches!(d, Decision::Start { job_id, .. } if *job_id == u32::MAX))
    }

    /// Runs one scheduling pass and applies its decisions: first dependencies and
    /// deadlines are brought up to date, then the pure scheduler decides, with copies
    /// of array meta records standing for the tasks that may start (`ctld::array`).
    ///
    /// Priorities are refreshed first (multifactor), and the pass runs the main cycle,
    /// then backfill when it is due (every pass for queues up to
    /// [`BACKFILL_EVERY_PASS`] jobs, else every `bf_interval` seconds); pending jobs get
    /// their reason and, from backfill, their expected start.
    pub fn schedule(&mut self, now: i64, fx: &mut Effects) {
        let corr = self.evaluate_dependencies(now, fx);
        self.expire_deadlines(now, fx);
        self.resume_preempted(now, fx);
        let pending = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .count();
        self.last_pass = now;
        if pending == 0 {
            return;
        }

        self.refresh_priorities(now);
        self.refresh_used(now);
        self.acct.usage_threshold_factors = self.threshold_factors(now);
        if self.stats.since == 0 {
            self.stats.since = now;
        }
        let backfill = self.sched_cfg.policy != sched::Policy::Fifo
            && (pending <= BACKFILL_EVERY_PASS
                || now - self.last_backfill >= self.sched_cfg.bf_interval);
        // Held jobs cannot start and their reason is the hold's: they are settled here
        // in one cheap sweep instead of travelling through the pass (a queue of held
        // jobs made every submission cost a pass over all of them).
        let held = self.settle_held(now, backfill);
        let mut plan = self.array_plan(&corr);
        let mut copies: Vec<Job> = plan
            .iter()
            .flat_map(|(id, picks)| std::iter::repeat_n(*id, picks.len().saturating_sub(1)))
            .collect::<Vec<u32>>()
            .into_iter()
            .filter_map(|id| self.jobs.get_mut(&id).map(|j| super::array::sched_copy(j)))
            .collect();
        // Each copy gets an id of its own for the pass (the scheduler keys what it
        // started by id), mapped back to its array's meta record below.
        let mut alias: HashMap<u32, u32> = HashMap::new();
        for (k, copy) in copies.iter_mut().enumerate() {
            let fake = u32::MAX - 1 - k as u32;
            alias.insert(fake, copy.id);
            copy.id = fake;
        }
        // A heterogeneous job starts whole or not at all: a pass that would start it in
        // part runs again without it (it waits with its blocked component's reason).
        let check_het = self.has_pending_het();
        let mut left_out: HashMap<u32, Reason> = HashMap::new();
        // Main and backfill are timed apart for sdiag (the pure pass marks the point
        // between them); a heterogeneous re-run adds to both.
        let t0 = std::time::Instant::now();
        let mut main_time = std::time::Duration::ZERO;
        let out = loop {
            // Running jobs are in the input too: backfill plans around their limits.
            let jobs: Vec<&Job> = self
                .jobs
                .values()
                .map(|j| &**j)
                .filter(|j| j.is_active() && !is_held(j) && !left_out.contains_key(&j.id))
                .chain(copies.iter())
                .collect();
            if !jobs.iter().any(|j| j.state == JobState::Pending) {
                break sched::Outcome::default();
            }
            let start = std::time::Instant::now();
            let mut main_end = None;
            let out = sched::run_marked(
                &sched::Input {
                    jobs: &jobs,
                    nodes: &self.nodes,
                    partitions: &self.partitions,
                    licenses: &self.licenses,
                    config: &self.sched_cfg,
                    now,
                    backfill,
                    limits: self.limits_policy(),
                    reservations: &self.resv.list,
                },
                &mut || main_end = Some(std::time::Instant::now()),
            );
            main_time += main_end.map_or(start.elapsed(), |e| e - start);
            let d = &out.decisions;
            let partial = if check_het {
                self.partial_het_starts(d)
            } else {
                Vec::new()
            };
            if partial.is_empty() {
                break out;
            }
            for leader in partial {
                let members = self.het_members(leader).unwrap_or_default();
                let reason = d
                    .iter()
                    .find_map(|x| match x {
                        Decision::Pending { job_id, reason } if members.contains(job_id) => {
                            Some(reason.clone())
                        }
                        _ => None,
                    })
                    .unwrap_or(Reason::Resources);
                for m in members {
                    left_out.insert(m, reason.clone());
                }
            }
        };
        for (id, reason) in left_out {
            if let Some(j) = self.jobs.get_mut(&id)
                && j.state == JobState::Pending
            {
                j.reason = reason;
                j.last_sched_eval = Some(now);
            }
        }
        let mut out = out;
        // sdiag's queue length counts the held jobs, as the pass used to see them.
        out.stats.queue_len += held as u32;
        let total = t0.elapsed();
        self.record_pass_stats(
            &out,
            backfill,
            main_time.as_micros() as u64,
            total.saturating_sub(main_time).as_micros() as u64,
            now,
        );
        let gpu_reasons = {
            let jobs: Vec<&Job> = self
                .jobs
                .values()
                .map(|j| &**j)
                .filter(|j| j.is_active() && !is_held(j))
                .collect();
            self.gpu_busy_reasons(&jobs, &out, now)
        };
        let backfilled: HashSet<u32> = out.backfilled.iter().copied().collect();
        let est: HashMap<u32, &sched::Estimate> =
            out.estimates.iter().map(|e| (e.job_id, e)).collect();
        let mut het_started = Vec::new();
        let mut split: HashMap<u32, u32> = HashMap::new();
        for d in out.decisions.iter().cloned() {
            match d {
                Decision::Start {
                    job_id,
                    partition,
                    alloc,
                    time_limit,
                } => {
                    let job_id = alias.get(&job_id).copied().unwrap_or(job_id);
                    let id = match plan.get_mut(&job_id) {
                        Some(picks) => {
                            let Some(t) = picks.pop_front() else { continue };
                            *split.entry(job_id).or_default() += 1;
                            match self.split_task(job_id, t, fx) {
                                Some(id) => id,
                                None => continue,
                            }
                        }
                        None => job_id,
                    };
                    let mut launch = true;
                    if let Some(j) = self.jobs.get_mut(&id) {
                        // A task started from a satisfied meta record waits for nothing.
                        if id != job_id || j.array_task_id.is_some() {
                            j.depend = None;
                        }
                        if let Some(h) = j.het {
                            launch = false;
                            // An allocation (salloc, srun) has no script to launch.
                            if h.offset == 0 && !j.spec.alloc_only {
                                het_started.push(id);
                            }
                        }
                    }
                    // Backfill cut the limit towards --time-min (scontrol shows it).
                    if let (Some(l), Some(j)) = (time_limit, self.jobs.get_mut(&id)) {
                        j.time_limit = l;
                    }
                    self.start_job(id, partition, alloc, launch, now, fx);
                    if let Some(j) = self.jobs.get_mut(&id) {
                        j.sched.backfilled = backfilled.contains(&job_id);
                        j.sched.est_start = None;
                        j.sched.sched_nodes = None;
                    }
                }
                Decision::Pending { job_id, reason } => {
                    let job_id = alias.get(&job_id).copied().unwrap_or(job_id);
                    if let Some(j) = self.jobs.get_mut(&job_id)
                        && j.state == JobState::Pending
                    {
                        j.last_sched_eval = Some(now);
                        if reason == Reason::BeginTime {
                            j.sched.est_start = j.eligible_time.filter(|e| *e > now);
                            j.sched.sched_nodes = None;
                        } else if backfill {
                            match est.get(&job_id) {
                                Some(e) => {
                                    j.sched.est_start = Some(e.start);
                                    j.sched.sched_nodes = Some(hostlist::compress_sorted(&e.nodes));
                                }
                                None => {
                                    j.sched.est_start = None;
                                    j.sched.sched_nodes = None;
                                }
                            }
                        }
                        // A GPU busy outside sluice is named (see `gpu`).
                        let reason = match gpu_reasons.get(&job_id) {
                            Some(t) if reason == Reason::Resources => Reason::Other(t.clone()),
                            _ => reason,
                        };
                        if j.reason != reason {
                            j.reason = reason;
                        }
                    }
                }
            }
        }
        // Heterogeneous jobs launch once every component has its allocation.
        for leader in het_started {
            self.launch(leader, fx);
        }
        self.preempt_for_pending(now, fx);
        // An array that started up to its throttle waits on it from now on.
        for (id, n) in split {
            if let Some(j) = self.jobs.get_mut(&id)
                && j.state == JobState::Pending
                && let Some(a) = j.array.as_mut()
            {
                a.running += n;
                if a.throttled() {
                    j.reason = Reason::JobArrayTaskLimit;
                    j.last_sched_eval = Some(now);
                }
            }
        }
    }

    /// Gives each held pending job what a scheduling pass would: its hold reason
    /// (`sched::pre_check`), the evaluation time, and with `backfill` no expected
    /// start. Returns how many there are.
    fn settle_held(&mut self, now: i64, backfill: bool) -> usize {
        let mut n = 0;
        for j in self.jobs.values_mut().filter(|j| is_held(j)) {
            n += 1;
            j.last_sched_eval = Some(now);
            if backfill {
                j.sched.est_start = None;
                j.sched.sched_nodes = None;
            }
            if let Some(r) = sched::pre_check(j, now)
                && j.reason != r
            {
                j.reason = r;
            }
        }
        n
    }

    /// Removes pending jobs that can no longer end before their `--deadline` (state
    /// DEADLINE): those whose time limit, counted from now, ends after it.
    fn expire_deadlines(&mut self, now: i64, fx: &mut Effects) {
        for j in self.jobs.values_mut() {
            let Some(d) = j.spec.deadline else { continue };
            if j.state != JobState::Pending {
                continue;
            }
            let need = j.time_limit.secs().unwrap_or(0) as i64;
            if now + need > d {
                j.state = JobState::Deadline;
                j.reason = Reason::DeadLine;
                j.end_time = Some(now);
                fx.persist.push(Job::clone(j));
                shed_after_end(j);
            }
        }
    }

    /// Records `j`'s billable TRES (what it holds once started, else what it asks for)
    /// as its partition bills it: the figure sacct, scontrol and squeue print.
    pub(super) fn set_billing(&self, j: &mut Job) {
        j.billing = Some(crate::sched::limits::job_billable(j, &self.acct.billing));
    }

    /// Allocates and records a job's start; with `launch`, sends its batch script to
    /// the batch host (a heterogeneous job's components are launched with the leader).
    fn start_job(
        &mut self,
        id: u32,
        partition: String,
        alloc: Allocation,
        launch: bool,
        now: i64,
        fx: &mut Effects,
    ) {
        self.charge(&alloc, false, 1);
        self.stats.jobs_started += 1;
        // slurmctld's select_nodes line, the one an admin greps for.
        tracing::info!(
            "sched: Allocate JobId={id} NodeList={} #CPUs={} Partition={partition}",
            crate::model::hostlist::compress(&alloc.nodes),
            alloc.cpus.iter().sum::<u32>()
        );
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        j.state = JobState::Running;
        j.reason = Reason::None;
        j.partition = partition;
        j.start_time = Some(now);
        j.last_sched_eval = Some(now);
        j.end_time = None;
        if j.spec.alloc_only {
            // salloc/srun: the allocation is the job; steps come from its owner.
            j.alloc = Some(alloc);
            j.billing = Some(crate::sched::limits::job_billable(j, &self.acct.billing));
            fx.persist.push(Job::clone(j));
            self.run_alloc_prologs(id, fx);
            return;
        }
        j.steps.retain(|s| s.id != "batch");
        // Only a heterogeneous job's leader runs the script (sacct shows `L+0.batch`
        // alone, as Slurm does).
        if j.het.is_none_or(|h| h.offset == 0) {
            j.steps.push(StepRecord {
                id: "batch".into(),
                name: "batch".into(),
                state: JobState::Running,
                exit: ExitStatus::default(),
                start_time: now,
                end_time: None,
                nodes: alloc.nodes[0].clone(),
                ncpus: alloc.cpus[0],
                ntasks: 1,
                max_rss_kib: 0,
                cpu_secs: 0.0,
                detail: None,
                usage: None,
            });
        }
        let batch_host = alloc.nodes[0].clone();
        j.alloc = Some(alloc);
        j.billing = Some(crate::sched::limits::job_billable(j, &self.acct.billing));
        for n in self.nodes.iter_mut().filter(|n| n.name == batch_host) {
            n.last_busy_time = Some(now);
        }
        let j = &self.jobs[&id];
        fx.persist.push(Job::clone(j));
        if launch {
            self.run_alloc_prologs(id, fx);
            self.launch(id, fx);
        }
    }

    /// Sends job `id`'s batch script to its batch host (with a heterogeneous job's
    /// other components).
    fn launch(&mut self, id: u32, fx: &mut Effects) {
        let Some(j) = self.jobs.get(&id) else { return };
        let Some(batch_host) = j.alloc.as_ref().and_then(|a| a.nodes.first().cloned()) else {
            return;
        };
        let het = if j.het.is_some() {
            self.het_components(id)
        } else {
            Vec::new()
        };
        let node_gres = self
            .nodes
            .iter()
            .find(|n| n.name == batch_host)
            .map(|n| n.gres.clone())
            .unwrap_or_default();
        fx.to_agent.push((
            batch_host,
            ToAgent::Launch(LaunchBatch {
                job: Box::new(Job::clone(j)),
                kill_wait: self.kill_wait,
                cluster: self.cluster_name.clone(),
                cgroup: self.cgroup.clone(),
                het,
                node_gres,
                scripts: self.scripts.clone(),
            }),
        ));
    }

    /// Periodic work: `--signal` warnings, time limits and MinJobAge purge.
    pub fn tick(&mut self, now: i64, fx: &mut Effects) {
        self.tick_steps(now, fx);
        self.reboot_tick(now, fx);
        self.end_graced(now, fx);
        self.sweep_cleanups(fx);
        // `--signal=B:SIG@secs` goes to the batch shell `secs` before the limit. Without
        // `B:` Slurm signals the job's steps only (those running at that moment).
        let warn: Vec<(u32, String, i32, bool)> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running
                    && !j.completing
                    && !self.warned.contains(&j.id)
                    && j.het.is_none_or(|h| h.offset == 0)
            })
            .filter_map(|j| {
                let sig = j.spec.signal?;
                let due = j.limit_end(now)? - i64::from(sig.secs_before);
                let node = j.alloc.as_ref()?.nodes[0].clone();
                (now >= due).then_some((j.id, node, sig.signal, sig.batch_only))
            })
            .collect();
        for (id, node, signal, batch_only) in warn {
            self.warned.insert(id);
            if !batch_only {
                self.signal_job_steps(id, signal, fx);
                continue;
            }
            fx.to_agent.push((
                node,
                ToAgent::Signal {
                    job_id: id,
                    signal,
                    batch_only: true,
                },
            ));
        }
        self.warned.retain(|id| {
            self.jobs
                .get(id)
                .is_some_and(|j| j.state == JobState::Running)
        });
        let expired: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.completing)
            .filter(|j| j.het.is_none_or(|h| h.offset == 0))
            .filter(|j| {
                // OverTimeLimit (its partition's, else the cluster's): the job may run
                // this much longer than its limit.
                let over = self
                    .partitions
                    .iter()
                    .find(|p| p.name == j.partition)
                    .map_or(self.over_time_limit, |p| p.over_time(self.over_time_limit));
                let over = match over {
                    crate::config::OVER_TIME_UNLIMITED => return false,
                    m => i64::from(m) * 60,
                };
                j.limit_end(now)
                    .is_some_and(|e| now >= e.saturating_add(over))
            })
            .map(|j| j.id)
            .collect();
        for id in expired {
            self.time_out_job(id, now, fx);
        }
        // A running job past its `--deadline` ends as DEADLINE.
        let late: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.completing)
            .filter(|j| j.spec.deadline.is_some_and(|d| now >= d))
            .filter(|j| j.het.is_none_or(|h| h.offset == 0))
            .map(|j| j.id)
            .collect();
        for id in late {
            tracing::info!("job_time_limit: JobId={id} reached its deadline");
            if let Some(node) = self.end_running(id, JobState::Deadline, Reason::DeadLine, now, fx)
            {
                fx.to_agent.push((
                    node,
                    ToAgent::Terminate {
                        job_id: id,
                        kill_wait: self.kill_wait,
                        reason: None,
                    },
                ));
            }
        }
        let age = i64::from(self.min_job_age);
        self.jobs
            .retain(|_, j| j.is_active() || j.end_time.is_none_or(|e| now - e < age));
        // Events schedule on their own; the tick adds a pass when a pending job's begin
        // time has come, and a periodic one (backfill interval, sched_interval).
        let due = self.jobs.values().any(|j| {
            j.state == JobState::Pending
                && j.hold.is_none()
                && j.eligible_time
                    .is_some_and(|e| e <= now && e > self.last_pass)
        });
        let period = self
            .sched_cfg
            .bf_interval
            .min(i64::from(self.sched_interval.max(1)));
        if due || now - self.last_pass >= period {
            fx.schedule = true;
        }
    }

    /// Ends running job `id` TIMEOUT (reason TimeLimit) and tells its batch host, with
    /// slurmstepd's "DUE TO TIME LIMIT" line for its output.
    pub(super) fn time_out_job(&mut self, id: u32, now: i64, fx: &mut Effects) {
        // slurmctld's job_time_limit.
        tracing::info!("Time limit exhausted for JobId={id}");
        self.end_with_notice(
            id,
            JobState::Timeout,
            Reason::TimeLimit,
            "TIME LIMIT",
            now,
            fx,
        );
    }

    /// Ends running job `id` in `state` and tells its batch host to end it, with
    /// slurmstepd's `*** JOB … CANCELLED AT … DUE TO <why> ***` line for its output.
    pub(super) fn end_with_notice(
        &mut self,
        id: u32,
        state: JobState,
        reason: Reason,
        why: &str,
        now: i64,
        fx: &mut Effects,
    ) {
        if let Some(node) = self.end_running(id, state, reason, now, fx) {
            let msg = format!(
                "*** JOB {id} ON {node} CANCELLED AT {} DUE TO {why} ***",
                crate::common::timefmt::fmt_ts(now)
            );
            fx.to_agent.push((
                node,
                ToAgent::Terminate {
                    job_id: id,
                    kill_wait: self.kill_wait,
                    reason: Some(msg),
                },
            ));
        }
    }

    /// Marks a running job as ending in `state` (COMPLETING until its node reports the
    /// end). Returns the batch host.
    fn end_running(
        &mut self,
        id: u32,
        state: JobState,
        reason: Reason,
        now: i64,
        fx: &mut Effects,
    ) -> Option<String> {
        let j = self.jobs.get(&id)?;
        if !matches!(j.state, JobState::Running | JobState::Suspended) || j.completing {
            return None;
        }
        let alloc_only = j.spec.alloc_only;
        self.end_job_steps(id, state == JobState::Timeout, now, fx);
        if alloc_only {
            self.end_alloc_only(id, state, reason, ExitStatus::default(), now, fx);
            return None;
        }
        let j = self.jobs.get_mut(&id)?;
        suspend::end_suspension(j, now);
        j.state = state;
        j.reason = reason;
        j.end_time = Some(now);
        j.completing = true;
        let alloc = j.alloc.clone();
        // A heterogeneous job's other components have no processes to end: they
        // follow the leader when its node reports the end.
        let follower = j.het.is_some_and(|h| h.offset != 0);
        fx.persist.push(Job::clone(j));
        if let Some(a) = &alloc {
            for name in &a.nodes {
                if let Some(n) = self.node_mut(name) {
                    n.completing_jobs += 1;
                }
            }
        }
        if follower {
            return None;
        }
        alloc.map(|a| a.nodes[0].clone())
    }

    // ------------------------------------------------------------------ agents

    /// A node agent registered: take its resources (declared values win), mark it up,
    /// and reconcile the jobs it still knows.
    pub fn agent_registered(
        &mut self,
        msg: FromAgent,
        declared: &crate::config::NodeConf,
        now: i64,
        fx: &mut Effects,
    ) {
        let FromAgent::Register {
            node,
            cpus,
            sockets,
            cores_per_socket,
            threads_per_core,
            real_memory,
            boot_time,
            os,
            arch,
            running,
            gres,
            reports_epilog,
            ..
        } = msg
        else {
            return;
        };
        // A fresh agent: the epilogs the node was running for ended jobs are lost.
        self.cleanup_lost_on(&node, fx);
        if reports_epilog {
            self.epilog_reporters.insert(node.clone());
        } else {
            self.epilog_reporters.remove(&node);
        }
        let detected = super::gres_detect::adopt(declared, gres);
        if let Some(n) = self.node_mut(&node) {
            n.cpus = declared.cpus.unwrap_or(cpus);
            n.real_memory = declared.memory.unwrap_or(real_memory);
            n.sockets = declared.sockets.unwrap_or(sockets);
            n.cores_per_socket = declared.cores_per_socket.unwrap_or(cores_per_socket);
            n.threads_per_core = declared.threads_per_core.unwrap_or(threads_per_core);
            if declared.cpus.is_some() && declared.sockets.is_none() {
                n.sockets = 1;
                n.cores_per_socket = n.cpus / n.threads_per_core.max(1);
            }
            n.boot_time = Some(boot_time);
            n.agent_start_time = Some(now);
            n.os = os;
            n.arch = arch;
            n.not_responding = false;
            if let Some(g) = detected
                && n.gres.is_empty()
            {
                n.alloc_gres = vec![0; g.len()];
                n.gres = g;
            }
            if n.state == NodeState::Unknown {
                n.state = NodeState::Up;
            }
        }
        self.reboot_registered(&node, now);
        // Jobs the controller believes run here but the node does not know are lost.
        // Allocation-only jobs (salloc, srun) have no batch step for a node to know:
        // their steps are reconciled on their own (`steps_registered`).
        let lost: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| !j.spec.alloc_only && j.cleanup.is_none())
            .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended) || j.completing)
            .filter(|j| j.alloc.as_ref().is_some_and(|a| a.nodes[0] == node))
            .filter(|j| !running.contains(&j.id))
            .filter(|j| j.het.is_none_or(|h| h.offset == 0))
            .map(|j| j.id)
            .collect();
        for id in lost {
            self.finish(id, None, now, fx);
        }
        // What it still runs for jobs that ended (or moved) while it was away is ended.
        let orphans = self.orphans_on(&node, &running);
        for &id in &orphans {
            tracing::warn!(
                node,
                job_id = id,
                "ending a run the node kept while it was away"
            );
            fx.to_agent.push((
                node.clone(),
                ToAgent::Terminate {
                    job_id: id,
                    kill_wait: self.kill_wait,
                    reason: None,
                },
            ));
            fx.to_agent
                .push((node.clone(), ToAgent::Forget { job_id: id }));
        }
        // Jobs the node runs that the controller still has pending (it crashed between
        // sending the launch and recording it) are adopted as running.
        for id in running.into_iter().filter(|id| !orphans.contains(id)) {
            let pending_here = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.state == JobState::Pending);
            if pending_here {
                let cpus = self.jobs[&id].req_cpus;
                let mem = self.jobs[&id].mem_per_node(cpus);
                let alloc = Allocation {
                    nodes: vec![node.clone()],
                    cpus: vec![cpus],
                    mem_per_node: mem,
                    ..Default::default()
                };
                let part = self.jobs[&id].partition.clone();
                self.charge(&alloc, false, 1);
                let billing = &self.acct.billing;
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.state = JobState::Running;
                    j.start_time = Some(now);
                    j.alloc = Some(alloc);
                    j.partition = part;
                    j.billing = Some(crate::sched::limits::job_billable(j, billing));
                    fx.persist.push(Job::clone(j));
                }
            } else if !self.jobs.contains_key(&id) {
                // A job the controller has no record of (its record was never saved)
                // must not run untracked: end it; its end report then makes the node
                // forget it.
                fx.to_agent.push((
                    node.clone(),
                    ToAgent::Terminate {
                        job_id: id,
                        kill_wait: self.kill_wait,
                        reason: None,
                    },
                ));
                fx.to_agent
                    .push((node.clone(), ToAgent::Forget { job_id: id }));
            }
        }
        fx.schedule = true;
    }

    /// A node's agent link went away: the node does not respond.
    pub fn agent_lost(&mut self, node: &str) {
        if let Some(n) = self.node_mut(node) {
            n.not_responding = true;
        }
    }

    /// An event from a node agent.
    pub fn from_agent(&mut self, node: &str, msg: FromAgent, now: i64, fx: &mut Effects) {
        match msg {
            FromAgent::Register { .. } => {}
            FromAgent::Started { .. } => {}
            // Relayed connections are served by the link task (ctld::relay).
            FromAgent::RelayOpen { .. }
            | FromAgent::Relay { .. }
            | FromAgent::RelayClose { .. } => {}
            FromAgent::Step {
                job_id,
                step_id,
                event,
                seq,
            } => self.step_event(node, job_id, step_id, event, seq, now, fx),
            FromAgent::Isolation { backend, degraded } => {
                self.isolation_reported(node, &backend, degraded, now);
            }
            FromAgent::PrologFailed { job_id, message } => {
                self.prolog_failed(node, job_id, &message, now, fx);
            }
            FromAgent::EpilogFailed { job_id, message } => {
                self.epilog_failed(node, job_id, &message, now);
            }
            FromAgent::EpilogComplete { job_id } => self.epilog_complete(node, job_id, fx),
            FromAgent::HealthCheckFailed { reason } => {
                self.health_check_failed(node, &reason, now);
            }
            FromAgent::GpuState { busy, faults } => {
                self.gpu_state_reported(node, busy, faults, now, fx);
            }
            FromAgent::BatchUsage { job_id, usage } => {
                // Kept in memory only: the final figures are stored when the job ends.
                if let Some(s) = self
                    .jobs
                    .get_mut(&job_id)
                    .and_then(|j| j.steps.iter_mut().find(|s| s.id == "batch"))
                    .filter(|s| s.state == JobState::Running)
                {
                    s.usage = Some(Box::new(usage));
                }
            }
            FromAgent::Heartbeat { load, free_mem } => {
                if let Some(n) = self.node_mut(node) {
                    n.cpu_load = Some(load);
                    n.free_mem = Some(free_mem);
                }
            }
            FromAgent::Ended {
                job_id,
                kind,
                status,
                time,
                max_rss_kib,
                cpu_secs,
                oom,
                message,
                usage,
            } => {
                if let Some(m) = message {
                    tracing::warn!(job_id, "{m}");
                }
                let end = End {
                    kind,
                    status,
                    time,
                    max_rss_kib,
                    cpu_secs,
                    oom,
                    usage,
                };
                self.finish(job_id, Some(end), now, fx);
                fx.to_agent
                    .push((node.to_string(), ToAgent::Forget { job_id }));
            }
        }
    }

    /// Records the end of a job's batch step and frees its allocation. `end: None` means
    /// the node lost the job (NODE_FAIL).
    fn finish(&mut self, id: u32, end: Option<End>, now: i64, fx: &mut Effects) {
        let ending = self.endings.remove(&id);
        // Steps still running when the batch script ends are ended with it.
        self.end_job_steps(id, false, now, fx);
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        // Not running any more, or its end is recorded already (it is cleaning up).
        if !(matches!(j.state, JobState::Running | JobState::Suspended) || j.completing)
            || j.cleanup.is_some()
        {
            return;
        }
        suspend::end_suspension(j, now);
        if j.state == JobState::Suspended {
            j.state = JobState::Running;
        }
        let was_completing = j.completing;
        let alloc = j.alloc.clone();
        let end_time = end.as_ref().map(|e| e.time).unwrap_or(now);
        let status = end.as_ref().map(|e| e.status).unwrap_or_default();
        // slurmctld's _job_complete: how the batch shell ended.
        if end.is_some() {
            match status.signal {
                0 => tracing::info!("_job_complete: JobId={id} WEXITSTATUS {}", status.code),
                s => tracing::info!("_job_complete: JobId={id} WTERMSIG {s}"),
            }
        }
        // The batch step's own record.
        let step_state = match &end {
            None => JobState::NodeFail,
            Some(e) if e.oom => JobState::OutOfMemory,
            Some(e) if matches!(e.kind, EndKind::LaunchFailed | EndKind::StepdLost) => {
                JobState::Failed
            }
            Some(_) if was_completing && j.state != JobState::Completed => JobState::Cancelled,
            Some(e) if e.status.success() => JobState::Completed,
            Some(e) if e.status.signal != 0 => JobState::Cancelled,
            Some(_) => JobState::Failed,
        };
        if let Some(s) = j.steps.iter_mut().find(|s| s.id == "batch") {
            s.state = step_state;
            // An OOM-killed batch step ends 0:125 like the job (golden exit_codes.txt,
            // `200.batch ... OUT_OF_ME+ 0:125`), not with the shell's own status.
            s.exit = if step_state == JobState::OutOfMemory {
                ExitStatus {
                    code: 0,
                    signal: 125,
                }
            } else {
                status
            };
            s.end_time = Some(end_time);
            if let Some(e) = &end {
                s.max_rss_kib = e.max_rss_kib;
                s.cpu_secs = e.cpu_secs;
                if let Some(u) = &e.usage {
                    s.usage = Some(Box::new(u.clone()));
                }
            }
        }
        j.completing = false;
        // A node that lost a requeueable job puts it back in the queue (JobRequeue=1).
        let ending = match (ending, &end) {
            (None, None) if j.spec.requeue != Some(false) => Some(Ending::Requeue {
                hold: false,
                node_fail: true,
            }),
            // A job in its preemption grace time that ended by itself still goes
            // back to the queue when it was to be requeued.
            (None, Some(_)) if !was_completing && j.preempt.is_some_and(|p| p.requeue) => {
                Some(Ending::Requeue {
                    hold: false,
                    node_fail: false,
                })
            }
            // A job whose stepd died goes back to the queue when it asked for that.
            (None, Some(e)) if e.kind == EndKind::StepdLost && j.spec.requeue == Some(true) => {
                Some(Ending::Requeue {
                    hold: false,
                    node_fail: false,
                })
            }
            (e, _) => e,
        };
        if let Some(Ending::Requeue { hold, node_fail }) = ending {
            if node_fail {
                tracing::info!("_job_complete: requeue JobId={id} due to node failure");
            } else {
                tracing::info!("_job_complete: requeue JobId={id} per user/system request");
            }
            // The run that ended stays in the history (sacct -D shows it REQUEUED).
            j.past_runs.push(PastRun {
                start_time: j.start_time.unwrap_or(end_time),
                end_time,
                exit: status,
                alloc: j.alloc.clone(),
                steps: std::mem::take(&mut j.steps),
                node_fail,
            });
            j.state = JobState::Pending;
            j.preempt = None;
            j.restarts += 1;
            j.alloc = None;
            j.billing = Some(crate::sched::limits::job_billable(j, &self.acct.billing));
            j.start_time = None;
            j.end_time = None;
            j.exit = ExitStatus::default();
            j.eligible_time = Some(now + REQUEUE_DELAY);
            j.reason = Reason::BeginTime;
            if hold {
                j.hold = Some(HoldKind::User);
                j.priority = 0;
                j.reason = if self.launch_failed.remove(&id) {
                    Reason::LaunchFailedRequeuedHeld
                } else {
                    Reason::JobHeldUser
                };
            }
        } else if was_completing {
            // Cancelled, timed out or node set down: the state stays; the job's exit
            // code is how the batch shell ended (scontrol `ExitCode=0:15` or `0:9`,
            // golden scancel.txt and timeout.txt).
            if end.is_some() {
                j.exit = status;
            }
        } else {
            j.end_time = Some(end_time);
            match &end {
                None => {
                    j.state = JobState::NodeFail;
                    j.reason = Reason::NodeDown;
                }
                Some(e) if e.kind == EndKind::LaunchFailed => {
                    j.state = JobState::Failed;
                    j.reason = Reason::JobLaunchFailure;
                    j.exit = ExitStatus {
                        code: 0,
                        signal: 53,
                    };
                }
                Some(e) if e.oom => {
                    j.state = JobState::OutOfMemory;
                    j.reason = Reason::None;
                    j.exit = ExitStatus {
                        code: 0,
                        signal: 125,
                    };
                }
                Some(e) if e.status.success() => {
                    j.state = JobState::Completed;
                    j.reason = Reason::None;
                    j.exit = e.status;
                }
                Some(e) => {
                    j.state = JobState::Failed;
                    j.reason = if e.status.signal == 9 {
                        Reason::JobLaunchFailure
                    } else {
                        Reason::NonZeroExitCode
                    };
                    j.exit = e.status;
                }
            }
            // It ended during its preemption grace time: preempted all the same.
            if end.is_some() && j.preempt.is_some() {
                j.state = JobState::Preempted;
                j.reason = Reason::None;
            }
        }
        if j.state != JobState::Pending {
            tracing::info!("_job_complete: JobId={id} done");
        }
        fx.persist.push(Job::clone(j));
        shed_after_end(j);
        fx.schedule = true;
        let (state, ran) = (j.state, j.run_secs(end_time));
        let het_leader = j.het.filter(|h| h.offset == 0).map(|h| h.job_id);
        if let Some(a) = alloc {
            self.release_ended(id, &a, was_completing, state != JobState::Pending, fx);
            // Usage (fair-share and the usage limits): what it held since the last tick.
            self.record_usage(id, &a, ran, end_time, now, fx);
        }
        match state {
            JobState::Pending => {}
            JobState::Completed => self.stats.jobs_completed += 1,
            JobState::Cancelled => self.stats.jobs_canceled += 1,
            _ => self.stats.jobs_failed += 1,
        }
        // The other components of a heterogeneous job end (or are requeued) with it.
        if let Some(leader) = het_leader {
            // Components cancelled alone earlier (scancel L+k) keep their own end.
            let ended_alone: Vec<u32> = self
                .het_members(leader)
                .unwrap_or_default()
                .into_iter()
                .filter(|m| *m != leader && self.jobs.get(m).is_some_and(|j| !j.is_active()))
                .collect();
            for m in self.het_members(leader).unwrap_or_default() {
                if m == leader || ended_alone.contains(&m) {
                    continue;
                }
                if let Some(e) = ending {
                    self.endings.insert(m, e);
                }
                self.finish(m, end.clone(), now, fx);
            }
            self.het_follow_leader(leader, &ended_alone);
            for m in self.het_members(leader).unwrap_or_default() {
                if let Some(j) = self.jobs.get_mut(&m)
                    && m != leader
                    && !ended_alone.contains(&m)
                {
                    fx.persist.push(Job::clone(j));
                    shed_after_end(j);
                }
            }
        }
    }

    // ------------------------------------------------------------------ requests

    fn check_owner(&self, j: &Job, c: Caller) -> Result<(), SlurmError> {
        if self.manager(c).may(j) {
            Ok(())
        } else {
            Err(SlurmError::AccessDenied)
        }
    }

    /// Cancels or signals jobs (scancel); a signal reaches the processes `scope` names.
    /// Ids that match nothing give `InvalidJobId`; finished jobs give `AlreadyDone`.
    pub fn cancel(
        &mut self,
        filter: &JobFilter,
        signal: Option<i32>,
        scope: SignalScope,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut results = Vec::new();
        if filter.ids.is_empty()
            && filter.array_tasks.is_empty()
            && filter.het_components.is_empty()
        {
            let m = self.manager(c);
            let ids: Vec<u32> = self
                .jobs
                .values()
                .filter(|j| j.is_active() && filter.matches(j))
                .filter(|j| m.may(j))
                .map(|j| j.id)
                .collect();
            for id in ids {
                let r = self.cancel_one(id, filter, signal, scope, c, now, fx);
                results.push(JobResult::new(id, r.err()));
            }
            return results;
        }
        // Ids: the job, or every record of the array with that id.
        for &id in &filter.ids {
            let recs = self.records_of(id);
            let rs: Vec<Result<(), SlurmError>> = recs
                .iter()
                .map(|&r| self.cancel_one(r, filter, signal, scope, c, now, fx))
                .collect();
            results.push(JobResult::new(id, fold_results(rs)));
        }
        // `N_i`, `N_[...]`: started tasks are cancelled, pending ones leave the array.
        for sel in &filter.array_tasks {
            let mut rs = Vec::new();
            for rid in self.records_of(sel.job) {
                let Some(j) = self.jobs.get(&rid) else {
                    continue;
                };
                if j.array_job_id != sel.job {
                    continue;
                }
                match j.array_task_id {
                    Some(t) if sel.tasks.contains(t) => {
                        rs.push(self.cancel_one(rid, filter, signal, scope, c, now, fx));
                    }
                    None if j.is_array_meta() && j.state == JobState::Pending => {
                        let hit = j.array.as_ref().map(|a| a.tasks.intersection(&sel.tasks));
                        let Some(hit) = hit.filter(|h| !h.is_empty()) else {
                            continue;
                        };
                        rs.push(if signal.is_some_and(|s| s != 9) {
                            Err(SlurmError::JobPending)
                        } else {
                            self.cancel_pending_tasks(rid, &hit, c, now, fx)
                        });
                    }
                    _ => {}
                }
            }
            results.push(JobResult {
                id: sel.job,
                error: fold_results(rs),
                task: (sel.tasks.len() == 1).then(|| sel.tasks.min().unwrap_or(0)),
                het: None,
            });
        }
        // `L+k`: component 0 is the whole job; another one alone, once running.
        for hc in &filter.het_components {
            let r = self.cancel_het_component(*hc, filter, signal, scope, c, now, fx);
            results.push(JobResult {
                het: Some(hc.offset),
                ..JobResult::new(hc.leader, r.err())
            });
        }
        results
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn cancel_one(
        &mut self,
        id: u32,
        filter: &JobFilter,
        signal: Option<i32>,
        scope: SignalScope,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        let others = JobFilter {
            ids: vec![],
            array_tasks: vec![],
            ..filter.clone()
        };
        if !others.matches(j) {
            return Ok(());
        }
        self.check_owner(j, c)?;
        if !j.is_active() || j.completing {
            return Err(SlurmError::AlreadyDone);
        }
        let signal = signal.filter(|s| *s != 9);
        match (j.state, signal) {
            (JobState::Pending, None) => {
                // slurmctld's _job_signal for a pending job.
                tracing::info!("_job_signal: 9 of pending JobId={id} successful");
                let j = self.jobs.get_mut(&id).expect("checked above");
                // The last pending reason stays, as in Slurm (`CANCELLED Priority`).
                j.state = JobState::Cancelled;
                j.end_time = Some(now);
                j.cancelled_by = Some(c.uid);
                self.stats.jobs_canceled += 1;
                fx.persist.push(Job::clone(j));
                shed_after_end(j);
                fx.schedule = true;
                Ok(())
            }
            (JobState::Pending, Some(_)) => Err(SlurmError::JobPending),
            (_, None) => {
                let node = self.end_running(id, JobState::Cancelled, Reason::None, now, fx);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.cancelled_by = Some(c.uid);
                    fx.persist.push(Job::clone(j));
                }
                if let Some(node) = node {
                    fx.to_agent.push((
                        node.clone(),
                        ToAgent::Terminate {
                            job_id: id,
                            kill_wait: self.kill_wait,
                            reason: Some(format!(
                                "*** JOB {id} ON {node} CANCELLED AT {} ***",
                                crate::common::timefmt::fmt_ts(now)
                            )),
                        },
                    ));
                }
                Ok(())
            }
            (_, Some(sig)) => {
                match scope {
                    SignalScope::Steps => {
                        self.signal_job_steps(id, sig, fx);
                    }
                    SignalScope::Batch => {
                        let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
                        if let Some(node) = j.alloc.as_ref().map(|a| a.nodes[0].clone()) {
                            fx.to_agent.push((
                                node,
                                ToAgent::Signal {
                                    job_id: id,
                                    signal: sig,
                                    batch_only: true,
                                },
                            ));
                        }
                    }
                    SignalScope::Full => self.signal_everywhere(id, sig, fx),
                }
                Ok(())
            }
        }
    }

    /// `scancel L+k` (scancel(1)): component 0 names the whole heterogeneous job;
    /// another component is cancelled (or signalled) alone once the job runs, and is
    /// refused with [`SlurmError::NotWholeHetJob`] while it is pending. A component
    /// cancelled alone frees its resources at once (it has no processes of its own)
    /// and keeps its CANCELLED state when the leader ends later.
    ///
    /// Errors: `InvalidJobId` when `L+k` names no component; the errors of
    /// `cancel_one`.
    #[allow(clippy::too_many_arguments)]
    fn cancel_het_component(
        &mut self,
        hc: crate::proto::HetComponent,
        filter: &JobFilter,
        signal: Option<i32>,
        scope: SignalScope,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let id = self.het_component_id(hc).ok_or(SlurmError::InvalidJobId)?;
        if hc.offset == 0 {
            let rs: Vec<Result<(), SlurmError>> = self
                .records_of(id)
                .into_iter()
                .map(|r| self.cancel_one(r, filter, signal, scope, c, now, fx))
                .collect();
            return fold_results(rs).map_or(Ok(()), Err);
        }
        let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        self.check_owner(j, c)?;
        if !j.is_active() || j.completing {
            return Err(SlurmError::AlreadyDone);
        }
        if j.state == JobState::Pending {
            return Err(SlurmError::NotWholeHetJob);
        }
        if let Some(sig) = signal.filter(|s| *s != 9) {
            // The component has no batch shell: only its steps can take a signal.
            self.signal_job_steps(id, sig, fx);
            return Ok(());
        }
        self.end_running(id, JobState::Cancelled, Reason::None, now, fx);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.cancelled_by = Some(c.uid);
        }
        let end = End {
            kind: EndKind::Exited,
            status: ExitStatus::default(),
            time: now,
            max_rss_kib: 0,
            cpu_secs: 0.0,
            oom: false,
            usage: None,
        };
        self.finish(id, Some(end), now, fx);
        Ok(())
    }

    /// Holds pending jobs (`scontrol hold`/`uhold`, `user_hold` for uhold).
    pub fn hold(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        user_hold: bool,
        c: Caller,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        self.each_job(ids, tasks, c, fx, |j| {
            if j.state != JobState::Pending {
                return Err(SlurmError::NotPending);
            }
            // An admin hold is not the user's to turn into one they may release.
            if j.hold == Some(HoldKind::Admin) && !op {
                return Err(SlurmError::AccessDenied);
            }
            let kind = if user_hold || !op {
                HoldKind::User
            } else {
                HoldKind::Admin
            };
            j.hold = Some(kind);
            j.priority = 0;
            // Released, the job gets a computed priority again (Slurm resets
            // `direct_set_prio` on hold).
            j.priority_set = false;
            j.reason = match kind {
                HoldKind::User => Reason::JobHeldUser,
                HoldKind::Admin => Reason::JobHeldAdmin,
            };
            Ok(())
        })
    }

    /// Releases held jobs; an admin hold can only be released by an operator.
    pub fn release(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        self.each_job(ids, tasks, c, fx, |j| {
            if j.state != JobState::Pending {
                return Err(SlurmError::NotPending);
            }
            if j.hold == Some(HoldKind::Admin) && !op {
                return Err(SlurmError::AccessDenied);
            }
            if j.hold.take().is_some() {
                j.priority = 1; // recomputed by the next pass
                j.reason = Reason::None;
                j.eligible_time = Some(j.spec.begin.unwrap_or(now).max(now));
            }
            Ok(())
        })
    }

    /// Requeues running jobs (`scontrol requeue`, `requeuehold` with `hold`). A pending
    /// job can be requeue-held. An array's id requeues its running tasks.
    pub fn requeue(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        hold: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut out = Vec::new();
        for t in self.targets(ids, tasks, false, c, fx) {
            let error = match t.records {
                Err(e) => Some(e),
                Ok(recs) => {
                    let rs = recs
                        .into_iter()
                        .map(|id| self.requeue_one(id, hold, c, now, fx))
                        .collect();
                    fold_results(rs)
                }
            };
            out.push(JobResult { error, ..t.result });
        }
        out
    }

    fn requeue_one(
        &mut self,
        id: u32,
        hold: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        self.check_owner(j, c)?;
        if j.spec.requeue == Some(false) && !self.is_operator(c) {
            return Err(SlurmError::Other(
                "Requested operation is presently disabled".into(),
            ));
        }
        match j.state {
            JobState::Pending if hold => {
                let j = self.jobs.get_mut(&id).expect("checked");
                j.hold = Some(HoldKind::User);
                j.priority = 0;
                j.reason = Reason::JobHeldUser;
                fx.persist.push(Job::clone(j));
                Ok(())
            }
            JobState::Pending => Err(SlurmError::JobPending),
            JobState::Running | JobState::Suspended if !j.completing => {
                // slurmctld's _slurm_rpc_requeue.
                tracing::info!("_slurm_rpc_requeue: Requeue of JobId={id} uid {}", c.uid);
                self.requeue_running(id, hold, false, now, fx);
                Ok(())
            }
            _ => Err(SlurmError::AlreadyDone),
        }
    }

    /// Ends a running job's processes and puts it back in the queue once its node
    /// confirms the end (RUNNING+COMPLETING until then).
    fn requeue_running(
        &mut self,
        id: u32,
        hold: bool,
        node_fail: bool,
        now: i64,
        fx: &mut Effects,
    ) {
        let node = self.end_running(id, JobState::Running, Reason::None, now, fx);
        if let Some(j) = self.jobs.get_mut(&id) {
            j.end_time = None;
        }
        self.endings.insert(id, Ending::Requeue { hold, node_fail });
        if let Some(node) = node {
            fx.to_agent.push((
                node,
                ToAgent::Terminate {
                    job_id: id,
                    kill_wait: self.kill_wait,
                    reason: None,
                },
            ));
        }
    }

    /// [`Cluster::update_job_at`] at the time of the last scheduling pass (for callers
    /// without a clock).
    pub fn update_job(
        &mut self,
        id: u32,
        tasks: Option<&IndexSet>,
        updates: &[JobUpdate],
        c: Caller,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let now = self.last_pass.max(0);
        self.update_job_at(id, tasks, updates, c, now, fx)
    }

    /// Applies `scontrol update JobId=…` changes at `now` (epoch seconds): to one job, to
    /// every active record of an array (its id), or to tasks `N_i` (split off the meta
    /// record when pending).
    pub fn update_job_at(
        &mut self,
        id: u32,
        tasks: Option<&IndexSet>,
        updates: &[JobUpdate],
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let sel: Vec<ArrayTasks> = tasks
            .map(|t| ArrayTasks {
                job: id,
                tasks: t.clone(),
            })
            .into_iter()
            .collect();
        let ids = if sel.is_empty() { vec![id] } else { vec![] };
        // A throttle belongs to the whole array: no splitting for it.
        let split = !updates
            .iter()
            .all(|u| matches!(u, JobUpdate::ArrayTaskThrottle(_)));
        let mut errors = Vec::new();
        for t in self.targets(&ids, &sel, split, c, fx) {
            match t.records {
                Err(e) => errors.push(Err(e)),
                Ok(recs) => {
                    for r in recs {
                        errors.push(self.update_one(r, updates, c, now, fx));
                    }
                }
            }
        }
        match fold_results(errors) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    fn update_one(
        &mut self,
        id: u32,
        updates: &[JobUpdate],
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let m = self.manager(c);
        let op = m.operator();
        // Partitions and billing are borrowed apart from the job changed below.
        let parts = &self.partitions;
        let billing = &self.acct.billing;
        // Parsed before borrowing the job mutably: it looks at other jobs.
        let mut new_dep = None;
        for u in updates {
            if let JobUpdate::Dependency(text) = u {
                new_dep = Some(self.parse_dependency(text, id)?);
            }
        }
        let j = self.jobs.get_mut(&id).ok_or(SlurmError::InvalidJobId)?;
        if !m.may(j) {
            return Err(SlurmError::AccessDenied);
        }
        if !j.is_active() {
            return Err(SlurmError::AlreadyDone);
        }
        let mut new = j.clone();
        for u in updates {
            // A relative change becomes an absolute one; an unlimited limit or a result
            // below one minute is invalid.
            let relative;
            let u = match u {
                JobUpdate::TimeLimitBy(delta) => {
                    let TimeLimit::Minutes(cur) = new.time_limit else {
                        return Err(SlurmError::InvalidTimeLimit);
                    };
                    let m = i64::from(cur) + delta;
                    if m < 1 || m > i64::from(u32::MAX) {
                        return Err(SlurmError::InvalidTimeLimit);
                    }
                    relative = JobUpdate::TimeLimit(TimeLimit::Minutes(m as u32));
                    &relative
                }
                other => other,
            };
            match u {
                // Made absolute above.
                JobUpdate::TimeLimitBy(_) => {}
                JobUpdate::TimeLimit(t) => {
                    // Slurm's `_update_job`: an operator sets any limit; the owner (or
                    // a coordinator, who acts as the owner) may lower it, or raise a
                    // pending job's up to its partition's MaxTime, nothing more.
                    let raise = match (t.secs(), new.time_limit.secs()) {
                        (Some(a), Some(b)) => a > b,
                        (None, Some(_)) => true,
                        _ => false,
                    };
                    let part_max = parts
                        .iter()
                        .find(|p| p.name == new.partition)
                        .map(|p| p.max_time.secs().unwrap_or(u64::MAX));
                    let within_part = part_max.is_some_and(|m| t.secs().unwrap_or(u64::MAX) <= m);
                    if raise && !op && !(new.state == JobState::Pending && within_part) {
                        return Err(SlurmError::AccessDenied);
                    }
                    if !op && part_max.is_some() && !within_part {
                        return Err(SlurmError::InvalidTimeLimit);
                    }
                    new.time_limit = *t;
                }
                JobUpdate::Name(n) => new.spec.name = n.clone(),
                JobUpdate::BeginTime(t) => {
                    if new.state != JobState::Pending {
                        return Err(SlurmError::NotPending);
                    }
                    new.spec.begin = Some(*t);
                    if new.hold.is_none() {
                        new.eligible_time = Some(*t);
                    }
                }
                JobUpdate::Nice(n) => {
                    // Only operators give a negative nice (a priority boost); others
                    // may set any nice from 0 up (Slurm's `_update_job`).
                    if *n < 0 && !op {
                        return Err(SlurmError::AccessDenied);
                    }
                    new.spec.nice = *n;
                    if new.hold.is_none() {
                        new.priority = new.priority.max(1);
                    }
                }
                JobUpdate::Dependency(_) => {
                    if new.state != JobState::Pending {
                        return Err(SlurmError::NotPending);
                    }
                    new.depend = new_dep.clone().flatten();
                    new.spec.dependency = new.depend.as_ref().map(|d| d.to_string());
                    if new.reason == Reason::Dependency
                        || new.reason == Reason::DependencyNeverSatisfied
                    {
                        new.reason = Reason::None;
                    }
                }
                JobUpdate::Priority(p) => {
                    // Slurm's `_update_job`: operators set any priority, the owner may
                    // only lower it; 0 holds the job, and a set priority replaces the
                    // nice value and is no longer recomputed.
                    if !op && *p > new.priority {
                        return Err(SlurmError::AccessDenied);
                    }
                    if *p == 0 {
                        if new.state == JobState::Pending {
                            let kind = if op { HoldKind::Admin } else { HoldKind::User };
                            new.hold = Some(kind);
                            new.reason = match kind {
                                HoldKind::User => Reason::JobHeldUser,
                                HoldKind::Admin => Reason::JobHeldAdmin,
                            };
                        }
                        new.priority = 0;
                        new.priority_set = false;
                    } else {
                        if new.hold.take().is_some() {
                            new.reason = Reason::None;
                            new.eligible_time = Some(new.spec.begin.unwrap_or(now).max(now));
                        }
                        new.priority = *p;
                        new.priority_set = true;
                        new.spec.nice = 0;
                    }
                }
                JobUpdate::ArrayTaskThrottle(n) => match new.array.as_mut() {
                    Some(a) => a.throttle = *n,
                    None => return Err(SlurmError::InvalidArraySpec),
                },
                JobUpdate::Partition(p) => {
                    if new.state != JobState::Pending {
                        return Err(SlurmError::NotPending);
                    }
                    if !parts.iter().any(|x| &x.name == p) {
                        return Err(SlurmError::InvalidPartition);
                    }
                    new.partition = p.clone();
                    new.spec.partition = Some(p.clone());
                    new.billing = Some(crate::sched::limits::job_billable(&new, billing));
                }
            }
        }
        *j = new;
        fx.persist.push(Job::clone(j));
        fx.schedule = true;
        Ok(())
    }

    /// Applies `scontrol update NodeName=… State=…` (operators only).
    pub fn update_node(
        &mut self,
        names: &[String],
        update: &NodeUpdate,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        for name in names {
            if !self.nodes.iter().any(|n| &n.name == name) {
                return Err(SlurmError::InvalidNodeName);
            }
        }
        let mut kill = Vec::new();
        for name in names {
            // slurmctld's update_node lines (the state as node_state_string names a
            // requested drain: DRAINED).
            let (reason, state) = match update {
                NodeUpdate::Fail { reason } => (Some(reason), "FAIL"),
                NodeUpdate::Drain { reason } => (Some(reason), "DRAINED"),
                NodeUpdate::Down { reason } => (Some(reason), "DOWN"),
                NodeUpdate::Resume => (None, "IDLE"),
            };
            if let Some(r) = reason {
                tracing::info!("update_node: node {name} reason set to: {r}");
            }
            tracing::info!("update_node: node {name} state set to {state}");
            let n = self.node_mut(name).expect("checked above");
            match update {
                NodeUpdate::Fail { reason } => {
                    n.fail = true;
                    n.reason = Some(reason.clone());
                    n.reason_uid = Some(c.uid);
                    n.reason_time = Some(now);
                }
                NodeUpdate::Drain { reason } => {
                    n.drain = true;
                    n.reason = Some(reason.clone());
                    n.reason_uid = Some(c.uid);
                    n.reason_time = Some(now);
                }
                NodeUpdate::Down { reason } => {
                    n.state = NodeState::Down;
                    n.reason = Some(reason.clone());
                    n.reason_uid = Some(c.uid);
                    n.reason_time = Some(now);
                    kill.push(name.clone());
                }
                NodeUpdate::Resume => {
                    n.drain = false;
                    n.fail = false;
                    if n.state == NodeState::Down {
                        n.state = if n.not_responding {
                            NodeState::Down
                        } else {
                            NodeState::Up
                        };
                    }
                    n.reason = None;
                    n.reason_uid = None;
                    n.reason_time = None;
                }
            }
        }
        // Ended jobs no longer wait for the epilogs of a node set DOWN.
        for name in &kill {
            self.cleanup_lost_on(name, fx);
        }
        // Jobs on a node set DOWN end as NODE_FAIL.
        let victims: Vec<(u32, String)> = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, JobState::Running | JobState::Suspended) && !j.completing)
            .filter_map(|j| {
                let a = j.alloc.as_ref()?;
                a.nodes
                    .iter()
                    .any(|n| kill.contains(n))
                    .then(|| (j.id, a.nodes[0].clone()))
            })
            .collect();
        // A heterogeneous job is ended through its leader (on whatever node).
        let mut victims: Vec<(u32, String)> = victims
            .into_iter()
            .filter_map(|(id, node)| match self.jobs[&id].het {
                Some(h) if h.offset != 0 => {
                    let l = self.jobs.get(&h.job_id)?;
                    Some((h.job_id, l.alloc.as_ref()?.nodes[0].clone()))
                }
                _ => Some((id, node)),
            })
            .collect();
        victims.sort();
        victims.dedup();
        for (id, node) in victims {
            // slurmctld's kill_running_job_by_node_name, naming the downed node(s).
            let down = self.jobs[&id].alloc_nodes_among(&kill);
            // Requeueable jobs go back to the queue (JobRequeue=1); others fail.
            if self.jobs[&id].spec.requeue != Some(false) {
                tracing::info!("requeue job JobId={id} due to failure of node {down}");
                self.requeue_running(id, false, true, now, fx);
                continue;
            }
            tracing::info!("Killing JobId={id} on failed node {down}");
            self.end_running(id, JobState::NodeFail, Reason::NodeDown, now, fx);
            fx.to_agent.push((
                node,
                ToAgent::Terminate {
                    job_id: id,
                    kill_wait: self.kill_wait,
                    reason: None,
                },
            ));
        }
        fx.schedule = true;
        Ok(())
    }

    /// Applies `f` to every record the references name (splitting pending array tasks
    /// off their meta record), checking ownership; one result per reference.
    fn each_job(
        &mut self,
        ids: &[u32],
        tasks: &[ArrayTasks],
        c: Caller,
        fx: &mut Effects,
        mut f: impl FnMut(&mut Job) -> Result<(), SlurmError>,
    ) -> Vec<JobResult> {
        let m = self.manager(c);
        let mut out = Vec::new();
        for t in self.targets(ids, tasks, true, c, fx) {
            let error = match t.records {
                Err(e) => Some(e),
                Ok(recs) => {
                    let mut rs = Vec::new();
                    for id in recs {
                        rs.push(match self.jobs.get_mut(&id) {
                            None => Err(SlurmError::InvalidJobId),
                            Some(j) if !m.may(j) => Err(SlurmError::AccessDenied),
                            Some(j) => {
                                let r = f(j);
                                if r.is_ok() {
                                    fx.persist.push(Job::clone(j));
                                    fx.schedule = true;
                                }
                                r
                            }
                        });
                    }
                    fold_results(rs)
                }
            };
            out.push(JobResult { error, ..t.result });
        }
        out
    }
}

#[derive(Clone)]
struct End {
    kind: EndKind,
    status: ExitStatus,
    time: i64,
    max_rss_kib: u64,
    cpu_secs: f64,
    oom: bool,
    usage: Option<crate::model::step::StepUsage>,
}

/// Drops the environment of a job that has ended from the in-memory record (its stored
/// record keeps it): nothing reads it any more, and a queue of many finished jobs, such
/// as a drained array whose tasks all copied the submission's environment, would
/// otherwise hold it until MinJobAge. The script stays: `scontrol write batch_script`
/// reads it until the record is purged, as from slurmctld (`_slurm_rpc_batch_script`).
pub(super) fn shed_after_end(j: &mut Job) {
    if !j.is_active() {
        j.spec.environment = Default::default();
    }
}

/// One outcome for a reference that named several records: success when any record
/// was acted on, else the first error (`InvalidJobId` when it named none).
fn fold_results(rs: Vec<Result<(), SlurmError>>) -> Option<SlurmError> {
    if rs.iter().any(|r| r.is_ok()) {
        return None;
    }
    Some(
        rs.into_iter()
            .find_map(|r| r.err())
            .unwrap_or(SlurmError::InvalidJobId),
    )
}

mod completing;
mod preempt;
mod suspend;

#[cfg(test)]
#[path = "state/fs_tests.rs"]
mod fs_tests;
mod gpu;
mod isolation;
#[cfg(test)]
mod log_tests;
mod nodefail;
mod reboot;
pub use reboot::RebootAsk;
mod reconfig;
pub(crate) use reconfig::node_identity_unchanged;
mod scripts;
#[cfg(test)]
mod tests;

/// What the group database said, as data: each looked-up user's supplementary group
/// ids and each AllowGroups name's gid. Filled at the controller's edge (which does
/// the lookups); the checks here do no I/O.
#[derive(Debug, Clone, Default)]
pub struct GroupView {
    /// uid → its groups (`getgrouplist`), primary included.
    pub member_gids: HashMap<u32, Vec<u32>>,
    /// uid → user name as the OS named the caller at its latest request (looked up
    /// at the edge for every request, [`GroupView::note_name`]): what the coordinator
    /// checks go by.
    pub user_names: HashMap<u32, String>,
    /// Group name → gid, for the names partitions' AllowGroups list.
    pub gid_of: HashMap<String, u32>,
}

impl GroupView {
    /// Records the name the OS gives `uid` for the request being handled; `None` (a
    /// uid without a name, e.g. a removed user) forgets any earlier name, so no
    /// right held under it survives.
    pub fn note_name(&mut self, uid: u32, name: Option<String>) {
        match name {
            Some(n) => {
                self.user_names.insert(uid, n);
            }
            None => {
                self.user_names.remove(&uid);
            }
        }
    }

    /// Whether the caller's primary gid or the groups recorded for its uid include one
    /// of `groups` (names, or numeric gids as Slurm also accepts).
    pub fn admits(&self, c: Caller, groups: &[String]) -> bool {
        let member = |gid: u32| {
            gid == c.gid
                || self
                    .member_gids
                    .get(&c.uid)
                    .is_some_and(|l| l.contains(&gid))
        };
        groups.iter().any(|g| {
            self.gid_of.get(g).is_some_and(|&gid| member(gid)) || g.parse::<u32>().is_ok_and(member)
        })
    }
}

/// A pending job under a user or admin hold (it takes no part in a pass).
fn is_held(j: &Job) -> bool {
    j.state == JobState::Pending && j.hold.is_some()
}
