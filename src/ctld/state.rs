//! The controller's state and the reactor functions that change it (cf. slurmctld's
//! job_mgr.c, node_mgr.c, proc_req.c). Every function takes `now` and records what the
//! outside world must do in [`Effects`]; nothing here performs I/O, so the actor loop is
//! thin and these functions are tested directly.
//!
//! Invariants (checked by [`Cluster::sanity_check`]): a node's `alloc_cpus`/`alloc_mem`
//! equal the sum over running or completing jobs allocated on it; only active jobs hold
//! allocations.

use crate::config::Config;
use crate::model::job::{Allocation, ExitStatus, StepRecord};
use crate::model::{
    HoldKind, Job, JobSpec, JobState, MemReq, Node, NodeState, Partition, PartitionState, Reason,
    TimeLimit, hostlist,
};
use crate::proto::{
    EndKind, FromAgent, JobFilter, JobResult, JobUpdate, LaunchBatch, NodeUpdate, SlurmError,
    TestOnly, ToAgent,
};
use crate::sched::{self, Decision};
use std::collections::{BTreeMap, HashMap};

/// The priority a job gets before multifactor priority exists: a constant lowered by
/// `--nice`, so that equal jobs run in submission order.
const BASE_PRIORITY: i64 = 100_000;

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
}

/// Why a running job is being ended by the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Requeue { hold: bool },
}

/// The whole cluster as the controller knows it.
pub struct Cluster {
    pub cluster_name: String,
    pub slurm_version: String,
    pub min_job_age: u32,
    pub kill_wait: u32,
    /// The uid the controller runs as; it is an operator like root.
    pub owner_uid: u32,
    pub jobs: BTreeMap<u32, Job>,
    pub nodes: Vec<Node>,
    pub partitions: Vec<Partition>,
    pub next_id: u32,
    endings: HashMap<u32, Ending>,
    /// Running jobs whose `--signal` warning has been sent.
    warned: std::collections::HashSet<u32>,
    /// How stepd isolates jobs (the `[cgroup]` section), sent with every launch so that
    /// remote nodes need no configuration of their own.
    pub cgroup: crate::config::CgroupConf,
    /// Extra `scontrol show config` entries.
    pub config_entries: Vec<(String, String)>,
    /// Live and waiting steps (`ctld::steps`).
    pub steps: super::steps::StepTable,
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
            ("SlurmctldPort".into(), cfg.socket.display().to_string()),
            (
                "StateSaveLocation".into(),
                cfg.state_dir.display().to_string(),
            ),
            ("SlurmdSpoolDir".into(), cfg.spool_dir.display().to_string()),
            ("SchedulerType".into(), "sched/builtin".into()),
            ("SelectType".into(), "select/cons_tres".into()),
            ("SelectTypeParameters".into(), "CR_CPU_MEMORY".into()),
            ("EnforcePartLimits".into(), "ALL".into()),
            ("PriorityType".into(), "priority/basic".into()),
            ("ProctrackType".into(), "proctrack/pgid".into()),
            (
                "AccountingStorageType".into(),
                "accounting_storage/sluice".into(),
            ),
            ("MaxArraySize".into(), "1001".into()),
            ("SchedulerTimeSlice".into(), "30 sec".into()),
        ];
        Cluster {
            cluster_name: cfg.cluster_name.clone(),
            slurm_version: cfg.slurm_version.clone(),
            min_job_age: cfg.min_job_age,
            kill_wait: cfg.kill_wait,
            owner_uid,
            jobs: BTreeMap::new(),
            nodes,
            partitions: cfg.partitions.clone(),
            next_id: 1,
            endings: HashMap::new(),
            warned: Default::default(),
            cgroup: cfg.cgroup.clone(),
            config_entries,
            steps: Default::default(),
        }
    }

    /// Root and the controller's owner may act on any job and node.
    pub fn is_operator(&self, c: Caller) -> bool {
        c.uid == 0 || c.uid == self.owner_uid
    }

    /// Takes jobs loaded from the store, re-applying allocations of active jobs.
    pub fn restore(&mut self, jobs: Vec<Job>, next_id: u32) {
        for j in jobs {
            if j.is_active()
                && let Some(a) = &j.alloc
            {
                let a = a.clone();
                self.charge(&a, j.completing, 1);
            }
            self.jobs.insert(j.id, j);
        }
        self.next_id = next_id.max(self.next_id);
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }

    /// Removes an allocation from its nodes (the job ended).
    pub(super) fn uncharge(&mut self, a: &Allocation, completing: bool) {
        self.charge(a, completing, -1);
    }

    /// Adds (`sign` = 1) or removes (`sign` = -1) an allocation from its nodes.
    fn charge(&mut self, a: &Allocation, completing: bool, sign: i32) {
        for (name, cpus) in a.nodes.iter().zip(&a.cpus) {
            let mem = a.mem_per_node;
            if let Some(n) = self.node_mut(name) {
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
        let part = self.pick_partition(&spec)?;
        if matches!(part.state, PartitionState::Inactive | PartitionState::Drain) {
            return Err(SlurmError::PartitionConfigUnavailable);
        }
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
        let req_mem = spec.mem.unwrap_or_else(|| {
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
            id: 0,
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
            state: JobState::Pending,
            completing: false,
            reason: Reason::None,
            priority: 0,
            hold: None,
            submit_time: now,
            eligible_time: None,
            start_time: None,
            end_time: None,
            suspended_secs: 0,
            alloc: None,
            exit: ExitStatus::default(),
            derived_exit: ExitStatus::default(),
            restarts: 0,
            cancelled_by: None,
            steps: Vec::new(),
            last_sched_eval: None,
            spec,
        };
        if job.spec.nice < 0 && !self.is_operator(caller) {
            return Err(SlurmError::AccessDenied);
        }
        job.priority = priority_of(&job);
        if job.spec.hold {
            job.hold = Some(HoldKind::User);
            job.priority = 0;
            job.reason = Reason::JobHeldUser;
        } else {
            job.eligible_time = Some(job.spec.begin.unwrap_or(now).max(now));
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
                _ => SlurmError::NodeConfigUnavailable,
            });
        }
        Ok(job)
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

    /// Inserts a resolved job under a new id; returns the id.
    pub fn submit(&mut self, mut job: Job, fx: &mut Effects) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        job.id = id;
        fx.persist.push(job.clone());
        fx.schedule = true;
        self.jobs.insert(id, job);
        id
    }

    /// What `sbatch --test-only` reports for a resolved job.
    pub fn test_only(&self, mut job: Job, now: i64) -> TestOnly {
        job.id = u32::MAX;
        let jobs = [&job];
        let decision = sched::schedule(&jobs, &self.nodes, &self.partitions, now);
        let (nodes, partition) = match decision.first() {
            Some(Decision::Start {
                alloc, partition, ..
            }) => (hostlist::compress_sorted(&alloc.nodes), partition.clone()),
            _ => (String::new(), job.partition.clone()),
        };
        TestOnly {
            job_id: self.next_id,
            start: job.spec.begin.unwrap_or(now).max(now),
            nodes,
            cpus: job.req_cpus,
            partition,
        }
    }

    // ------------------------------------------------------------------ scheduling

    /// Runs one scheduling pass and applies its decisions.
    pub fn schedule(&mut self, now: i64, fx: &mut Effects) {
        let decisions = {
            let jobs: Vec<&Job> = self
                .jobs
                .values()
                .filter(|j| j.state == JobState::Pending)
                .collect();
            if jobs.is_empty() {
                return;
            }
            sched::schedule(&jobs, &self.nodes, &self.partitions, now)
        };
        for d in decisions {
            match d {
                Decision::Start {
                    job_id,
                    partition,
                    alloc,
                } => self.start_job(job_id, partition, alloc, now, fx),
                Decision::Pending { job_id, reason } => {
                    if let Some(j) = self.jobs.get_mut(&job_id) {
                        j.last_sched_eval = Some(now);
                        if j.reason != reason {
                            j.reason = reason;
                        }
                    }
                }
            }
        }
    }

    fn start_job(
        &mut self,
        id: u32,
        partition: String,
        alloc: Allocation,
        now: i64,
        fx: &mut Effects,
    ) {
        self.charge(&alloc, false, 1);
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
            fx.persist.push(j.clone());
            return;
        }
        j.steps.retain(|s| s.id != "batch");
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
        });
        let batch_host = alloc.nodes[0].clone();
        j.alloc = Some(alloc);
        for n in self.nodes.iter_mut().filter(|n| n.name == batch_host) {
            n.last_busy_time = Some(now);
        }
        let j = self.jobs[&id].clone();
        fx.persist.push(j.clone());
        fx.to_agent.push((
            batch_host,
            ToAgent::Launch(LaunchBatch {
                job: Box::new(j),
                kill_wait: self.kill_wait,
                cluster: self.cluster_name.clone(),
                cgroup: self.cgroup.clone(),
            }),
        ));
    }

    /// Periodic work: `--signal` warnings, time limits and MinJobAge purge.
    pub fn tick(&mut self, now: i64, fx: &mut Effects) {
        self.tick_steps(now, fx);
        // `--signal=B:SIG@secs` goes to the batch shell `secs` before the limit. Without
        // `B:` Slurm signals the job's steps only (those running at that moment).
        let warn: Vec<(u32, String, i32, bool)> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running && !j.completing && !self.warned.contains(&j.id)
            })
            .filter_map(|j| {
                let sig = j.spec.signal?;
                let limit = j.time_limit.secs()? as i64;
                let due = j.start_time? + limit - i64::from(sig.secs_before);
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
            .filter(|j| match (j.start_time, j.time_limit.secs()) {
                (Some(s), Some(l)) => now >= s + l as i64,
                _ => false,
            })
            .map(|j| j.id)
            .collect();
        for id in expired {
            let node = self.end_running(id, JobState::Timeout, Reason::TimeLimit, now, fx);
            if let Some(node) = node {
                let msg = format!(
                    "*** JOB {id} ON {node} CANCELLED AT {} DUE TO TIME LIMIT ***",
                    crate::cli::timefmt::fmt_ts(now)
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
        let age = i64::from(self.min_job_age);
        self.jobs
            .retain(|_, j| j.is_active() || j.end_time.is_none_or(|e| now - e < age));
        fx.schedule = true;
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
        if j.state != JobState::Running || j.completing {
            return None;
        }
        let alloc_only = j.spec.alloc_only;
        self.end_job_steps(id, state == JobState::Timeout, now, fx);
        if alloc_only {
            self.end_alloc_only(id, state, reason, ExitStatus::default(), now, fx);
            return None;
        }
        let j = self.jobs.get_mut(&id)?;
        j.state = state;
        j.reason = reason;
        j.end_time = Some(now);
        j.completing = true;
        let alloc = j.alloc.clone();
        fx.persist.push(j.clone());
        if let Some(a) = &alloc {
            for name in &a.nodes {
                if let Some(n) = self.node_mut(name) {
                    n.completing_jobs += 1;
                }
            }
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
        } = msg
        else {
            return;
        };
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
            if n.state == NodeState::Unknown {
                n.state = NodeState::Up;
            }
        }
        // Jobs the controller believes run here but the node does not know are lost.
        let lost: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running || j.completing)
            .filter(|j| j.alloc.as_ref().is_some_and(|a| a.nodes[0] == node))
            .filter(|j| !running.contains(&j.id))
            .map(|j| j.id)
            .collect();
        for id in lost {
            self.finish(id, None, now, fx);
        }
        // Jobs the node runs that the controller still has pending (it crashed between
        // sending the launch and recording it) are adopted as running.
        for id in running {
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
                };
                let part = self.jobs[&id].partition.clone();
                self.charge(&alloc, false, 1);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.state = JobState::Running;
                    j.start_time = Some(now);
                    j.alloc = Some(alloc);
                    j.partition = part;
                    fx.persist.push(j.clone());
                }
            } else if !self.jobs.contains_key(&id) {
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
            FromAgent::Step {
                job_id,
                step_id,
                event,
            } => self.step_event(node, job_id, step_id, event, now, fx),
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
        if !(j.state == JobState::Running || j.completing) {
            return;
        }
        let was_completing = j.completing;
        let alloc = j.alloc.clone();
        let end_time = end.as_ref().map(|e| e.time).unwrap_or(now);
        let status = end.as_ref().map(|e| e.status).unwrap_or_default();
        // The batch step's own record.
        let step_state = match &end {
            None => JobState::NodeFail,
            Some(e) if e.oom => JobState::OutOfMemory,
            Some(e) if e.kind == EndKind::LaunchFailed => JobState::Failed,
            Some(_) if was_completing && j.state != JobState::Completed => JobState::Cancelled,
            Some(e) if e.status.success() => JobState::Completed,
            Some(e) if e.status.signal != 0 => JobState::Cancelled,
            Some(_) => JobState::Failed,
        };
        if let Some(s) = j.steps.iter_mut().find(|s| s.id == "batch") {
            s.state = step_state;
            s.exit = status;
            s.end_time = Some(end_time);
            if let Some(e) = &end {
                s.max_rss_kib = e.max_rss_kib;
                s.cpu_secs = e.cpu_secs;
            }
        }
        j.completing = false;
        if let Some(Ending::Requeue { hold }) = ending {
            j.state = JobState::Pending;
            j.restarts += 1;
            j.alloc = None;
            j.start_time = None;
            j.end_time = None;
            j.exit = ExitStatus::default();
            j.eligible_time = Some(now + REQUEUE_DELAY);
            j.reason = Reason::BeginTime;
            if hold {
                j.hold = Some(HoldKind::User);
                j.priority = 0;
                j.reason = Reason::JobHeldUser;
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
        }
        fx.persist.push(j.clone());
        fx.schedule = true;
        if let Some(a) = alloc {
            self.charge(&a, was_completing, -1);
        }
    }

    // ------------------------------------------------------------------ requests

    fn check_owner(&self, j: &Job, c: Caller) -> Result<(), SlurmError> {
        if j.uid == c.uid || self.is_operator(c) {
            Ok(())
        } else {
            Err(SlurmError::AccessDenied)
        }
    }

    /// Cancels or signals jobs (scancel). Ids that match nothing give `InvalidJobId`;
    /// finished jobs give `AlreadyDone`.
    pub fn cancel(
        &mut self,
        filter: &JobFilter,
        signal: Option<i32>,
        batch_only: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut results = Vec::new();
        let ids: Vec<u32> = if filter.ids.is_empty() {
            self.jobs
                .values()
                .filter(|j| j.is_active() && filter.matches(j))
                .filter(|j| self.is_operator(c) || j.uid == c.uid)
                .map(|j| j.id)
                .collect()
        } else {
            filter.ids.clone()
        };
        for id in ids {
            let r = self.cancel_one(id, filter, signal, batch_only, c, now, fx);
            results.push(JobResult { id, error: r.err() });
        }
        results
    }

    #[allow(clippy::too_many_arguments)]
    fn cancel_one(
        &mut self,
        id: u32,
        filter: &JobFilter,
        signal: Option<i32>,
        batch_only: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        let others = JobFilter {
            ids: vec![],
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
                let j = self.jobs.get_mut(&id).expect("checked above");
                // The last pending reason stays, as in Slurm (`CANCELLED Priority`).
                j.state = JobState::Cancelled;
                j.end_time = Some(now);
                j.cancelled_by = Some(c.uid);
                fx.persist.push(j.clone());
                fx.schedule = true;
                Ok(())
            }
            (JobState::Pending, Some(_)) => Err(SlurmError::JobPending),
            (_, None) => {
                let node = self.end_running(id, JobState::Cancelled, Reason::None, now, fx);
                if let Some(j) = self.jobs.get_mut(&id) {
                    j.cancelled_by = Some(c.uid);
                    fx.persist.push(j.clone());
                }
                if let Some(node) = node {
                    fx.to_agent.push((
                        node.clone(),
                        ToAgent::Terminate {
                            job_id: id,
                            kill_wait: self.kill_wait,
                            reason: Some(format!(
                                "*** JOB {id} ON {node} CANCELLED AT {} ***",
                                crate::cli::timefmt::fmt_ts(now)
                            )),
                        },
                    ));
                }
                Ok(())
            }
            (_, Some(sig)) => {
                // Without -b the signal goes to the job's steps (Slurm 22.05); a job
                // without steps gets it in its batch shell's process group.
                if !batch_only && self.signal_job_steps(id, sig, fx) > 0 {
                    return Ok(());
                }
                let j = self.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
                let node = j.alloc.as_ref().map(|a| a.nodes[0].clone());
                if let Some(node) = node {
                    fx.to_agent.push((
                        node,
                        ToAgent::Signal {
                            job_id: id,
                            signal: sig,
                            batch_only,
                        },
                    ));
                }
                Ok(())
            }
        }
    }

    /// Holds pending jobs (`scontrol hold`/`uhold`, `user_hold` for uhold).
    pub fn hold(
        &mut self,
        ids: &[u32],
        user_hold: bool,
        c: Caller,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        self.each_job(ids, c, fx, |j| {
            if j.state != JobState::Pending {
                return Err(SlurmError::NotPending);
            }
            let kind = if user_hold || !op {
                HoldKind::User
            } else {
                HoldKind::Admin
            };
            j.hold = Some(kind);
            j.priority = 0;
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
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        self.each_job(ids, c, fx, |j| {
            if j.state != JobState::Pending {
                return Err(SlurmError::NotPending);
            }
            if j.hold == Some(HoldKind::Admin) && !op {
                return Err(SlurmError::AccessDenied);
            }
            if j.hold.take().is_some() {
                j.priority = priority_of(j);
                j.reason = Reason::None;
                j.eligible_time = Some(j.spec.begin.unwrap_or(now).max(now));
            }
            Ok(())
        })
    }

    /// Requeues running jobs (`scontrol requeue`, `requeuehold` with `hold`). A pending
    /// job can be requeue-held.
    pub fn requeue(
        &mut self,
        ids: &[u32],
        hold: bool,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut out = Vec::new();
        for &id in ids {
            let r = (|| {
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
                        fx.persist.push(j.clone());
                        Ok(())
                    }
                    JobState::Pending => Err(SlurmError::JobPending),
                    JobState::Running if !j.completing => {
                        let node = self.end_running(id, JobState::Running, Reason::None, now, fx);
                        // Keep showing RUNNING+COMPLETING until the node confirms.
                        if let Some(j) = self.jobs.get_mut(&id) {
                            j.end_time = None;
                        }
                        self.endings.insert(id, Ending::Requeue { hold });
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
                        Ok(())
                    }
                    _ => Err(SlurmError::AlreadyDone),
                }
            })();
            out.push(JobResult { id, error: r.err() });
        }
        out
    }

    /// Applies `scontrol update JobId=…` changes.
    pub fn update_job(
        &mut self,
        id: u32,
        updates: &[JobUpdate],
        c: Caller,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let op = self.is_operator(c);
        let parts = self.partitions.clone();
        let j = self.jobs.get_mut(&id).ok_or(SlurmError::InvalidJobId)?;
        if j.uid != c.uid && !op {
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
                    let raise = match (t.secs(), new.time_limit.secs()) {
                        (Some(a), Some(b)) => a > b,
                        (None, Some(_)) => true,
                        _ => false,
                    };
                    if raise && !op {
                        return Err(SlurmError::AccessDenied);
                    }
                    if let Some(p) = parts.iter().find(|p| p.name == new.partition)
                        && !op
                        && t.secs().unwrap_or(u64::MAX) > p.max_time.secs().unwrap_or(u64::MAX)
                    {
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
                    if *n < new.spec.nice && !op {
                        return Err(SlurmError::AccessDenied);
                    }
                    new.spec.nice = *n;
                    if new.hold.is_none() {
                        new.priority = priority_of(&new);
                    }
                }
                JobUpdate::Partition(p) => {
                    if new.state != JobState::Pending {
                        return Err(SlurmError::NotPending);
                    }
                    if !parts.iter().any(|x| &x.name == p) {
                        return Err(SlurmError::InvalidPartition);
                    }
                    new.partition = p.clone();
                    new.spec.partition = Some(p.clone());
                }
            }
        }
        *j = new;
        fx.persist.push(j.clone());
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
            let n = self.node_mut(name).expect("checked above");
            match update {
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
        // Jobs on a node set DOWN end as NODE_FAIL.
        let victims: Vec<(u32, String)> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.completing)
            .filter_map(|j| {
                let a = j.alloc.as_ref()?;
                a.nodes
                    .iter()
                    .any(|n| kill.contains(n))
                    .then(|| (j.id, a.nodes[0].clone()))
            })
            .collect();
        for (id, node) in victims {
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

    fn each_job(
        &mut self,
        ids: &[u32],
        c: Caller,
        fx: &mut Effects,
        mut f: impl FnMut(&mut Job) -> Result<(), SlurmError>,
    ) -> Vec<JobResult> {
        let op = self.is_operator(c);
        let mut out = Vec::new();
        for &id in ids {
            let r = match self.jobs.get_mut(&id) {
                None => Err(SlurmError::InvalidJobId),
                Some(j) if j.uid != c.uid && !op => Err(SlurmError::AccessDenied),
                Some(j) => {
                    let r = f(j);
                    if r.is_ok() {
                        fx.persist.push(j.clone());
                        fx.schedule = true;
                    }
                    r
                }
            };
            out.push(JobResult { id, error: r.err() });
        }
        out
    }
}

struct End {
    kind: EndKind,
    status: ExitStatus,
    time: i64,
    max_rss_kib: u64,
    cpu_secs: f64,
    oom: bool,
}

/// The priority of an unheld job.
fn priority_of(job: &Job) -> u32 {
    (BASE_PRIORITY - i64::from(job.spec.nice)).clamp(1, i64::from(u32::MAX - 1)) as u32
}

#[cfg(test)]
mod tests;
