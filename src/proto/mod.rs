//! The one message protocol every sluice pipe speaks (DESIGN.md §2): length-prefixed
//! frames, each a MessagePack-encoded serde value with named fields (self-describing, so
//! a peer of another build can still decode what it knows).
//!
//! A connection starts with each side sending [`Hello`]; a peer whose protocol version is
//! outside `[MIN_PROTO, PROTO]` is refused with a clear message. Enums only ever grow at
//! the end, and new fields carry `#[serde(default)]`.
//!
//! Families: [`Request`]/[`Response`] between front-ends and the controller (one request,
//! one response, repeatable on one connection); [`ToAgent`]/[`FromAgent`] between the
//! controller and a node agent (asynchronous events both ways).

use crate::model::array::IndexSet;
use crate::model::step::StepSpec;
use crate::model::{ExitStatus, Job, JobSpec, JobState, Node, Partition};
use serde::{Deserialize, Serialize};

pub mod bytes;
pub mod codec;
pub mod spool;
pub mod stepio;

pub use stepio::{
    HetStepEnv, LaunchStep, StepEvent, StepInput, StepdEvent, StepdFrame, StepdInput,
};

pub use codec::{Framed, ProtoError};

/// This build's protocol version.
pub const PROTO: u32 = 1;
/// The oldest protocol version this build still talks to.
pub const MIN_PROTO: u32 = 1;
/// The largest frame accepted, in bytes (a job script plus environment fits easily).
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A front-end command (sbatch, squeue, …).
    Client,
    /// The controller.
    Controller,
    /// A node agent.
    Agent,
}

/// The first frame on every connection, from both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub proto: u32,
    pub role: Role,
    /// The sending binary's version string (`CARGO_PKG_VERSION`).
    pub build: String,
}

impl Hello {
    /// This build's hello for `role`.
    pub fn new(role: Role) -> Hello {
        Hello {
            proto: PROTO,
            role,
            build: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// Checks a peer's hello: version in range and the expected role.
    pub fn check(&self, expect: &[Role]) -> Result<(), ProtoError> {
        if self.proto < MIN_PROTO || self.proto > PROTO {
            return Err(ProtoError::Version {
                peer: self.proto,
                min: MIN_PROTO,
                max: PROTO,
                build: self.build.clone(),
            });
        }
        if !expect.contains(&self.role) {
            return Err(ProtoError::Role(format!("{:?}", self.role)));
        }
        Ok(())
    }
}

/// Tasks of one array as a command line names them: `N_i` or `N_[expr]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayTasks {
    /// The array's master id.
    pub job: u32,
    pub tasks: IndexSet,
}

impl ArrayTasks {
    /// Whether `job` is, or (as the meta record) still holds, one of these tasks.
    pub fn matches(&self, job: &Job) -> bool {
        if job.array_job_id != self.job || job.array_job_id == 0 {
            return false;
        }
        match (job.array_task_id, &job.array) {
            (Some(t), _) => self.tasks.contains(t),
            (None, Some(a)) => !a.tasks.intersection(&self.tasks).is_empty(),
            (None, None) => false,
        }
    }

    /// `N_i` or `N_[expr]` as written back to the user.
    pub fn label(&self) -> String {
        if self.tasks.len() == 1 {
            format!("{}_{}", self.job, self.tasks.min().unwrap_or(0))
        } else {
            format!("{}_[{}]", self.job, self.tasks)
        }
    }
}

/// Which jobs a query or a signal is about. Empty vectors mean "any"; `ids` and
/// `array_tasks` together are one "any of these" criterion.
///
/// An id matches the job with that id and, when it is an array's id (or a
/// heterogeneous job's leader), every record of the array (every component; Slurm:
/// `scancel N` cancels the whole array, `scancel <task's own id>` that task only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFilter {
    pub ids: Vec<u32>,
    pub users: Vec<u32>,
    pub states: Vec<JobState>,
    pub partitions: Vec<String>,
    pub names: Vec<String>,
    /// `N_i` / `N_[expr]` selections.
    #[serde(default)]
    pub array_tasks: Vec<ArrayTasks>,
    /// Only jobs still in the queue (pending, running, suspended or completing), so
    /// that a busy queue's finished jobs do not travel to every `squeue`.
    #[serde(default)]
    pub active_only: bool,
    /// Only jobs charged to these accounts (scancel `-A`).
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Only jobs of these QOS (scancel `-q`).
    #[serde(default)]
    pub qos: Vec<String>,
    /// Only jobs allocated any of these nodes (scancel `-w`, names expanded).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Paging of `Request::Jobs`: with `page > 0` the controller answers with
    /// [`Response::JobsPage`], at most `page` matching jobs with ids above `after`, so
    /// that a reply for a very long queue never exists whole in the controller's memory
    /// (`Client::request_jobs` fetches every page). 0 = one `Response::Jobs` reply.
    #[serde(default)]
    pub page: u32,
    /// Paging cursor: only jobs with a larger id (see `page`).
    #[serde(default)]
    pub after: u32,
    /// `L+k` selections: one component of a heterogeneous job (scancel `123+1`).
    /// Slurm's rule (scancel(1)): component 0 names the whole job; another component
    /// can be cancelled alone once the job runs, never while it is pending.
    #[serde(default)]
    pub het_components: Vec<HetComponent>,
}

/// One component `leader+offset` of a heterogeneous job, as `123+1` names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HetComponent {
    /// The leader's job id (`123` in `123+1`).
    pub leader: u32,
    /// The component's offset (`1` in `123+1`).
    pub offset: u32,
}

impl JobFilter {
    /// Whether `job` passes every non-empty criterion.
    pub fn matches(&self, job: &Job) -> bool {
        let by_id = self.ids.is_empty() && self.array_tasks.is_empty()
            || self.ids.iter().any(|&i| {
                job.id == i
                    || (job.array_job_id == i && i != 0)
                    || job.het.is_some_and(|h| h.job_id == i)
            })
            || self.array_tasks.iter().any(|t| t.matches(job));
        by_id
            && (!self.active_only || job.is_active())
            && (self.users.is_empty() || self.users.contains(&job.uid))
            && (self.states.is_empty() || self.states.contains(&job.state))
            && (self.partitions.is_empty() || self.partitions.contains(&job.partition))
            && (self.names.is_empty() || self.names.contains(&job.spec.name))
            && (self.accounts.is_empty() || self.accounts.contains(&job.account))
            && (self.qos.is_empty() || self.qos.contains(&job.qos))
            && (self.nodes.is_empty()
                || job
                    .alloc
                    .as_ref()
                    .is_some_and(|a| a.nodes.iter().any(|n| self.nodes.contains(n))))
    }
}

/// A change to a job (`scontrol update JobId=…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobUpdate {
    TimeLimit(crate::model::TimeLimit),
    Name(String),
    Partition(String),
    Nice(i32),
    /// `StartTime=`/`BeginTime=`: the earliest start, epoch seconds (pending jobs).
    BeginTime(i64),
    /// `TimeLimit+=M` / `TimeLimit-=M`: change the current limit by this many minutes.
    TimeLimitBy(i64),
    /// `Dependency=`: a new dependency list (empty clears it).
    Dependency(String),
    /// `ArrayTaskThrottle=`: most tasks of the array running at once (0 = no limit).
    ArrayTaskThrottle(u32),
    /// `Priority=N`: pins the job's priority (0 holds it). Operators may set any value;
    /// the job's owner may only lower it (Slurm's `_update_job`).
    Priority(u32),
}

/// A change to a node (`scontrol update NodeName=… State=…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeUpdate {
    Drain {
        reason: String,
    },
    Down {
        reason: String,
    },
    Resume,
    /// FAIL: no new work; running jobs go on (`fail`/`failing`).
    Fail {
        reason: String,
    },
}

/// An sacct query over the accounting records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctQuery {
    /// Only these jobs (empty = any).
    pub ids: Vec<u32>,
    /// Only these uids (empty = any).
    pub users: Vec<u32>,
    /// Jobs that were eligible/running/ended in [start, end] (epoch seconds).
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Only jobs in these states (during the window).
    pub states: Vec<JobState>,
    pub names: Vec<String>,
    pub partitions: Vec<String>,
    /// Only jobs charged to these accounts (sacct `-A`).
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Only jobs of these QOS (sacct `-q`).
    #[serde(default)]
    pub qos: Vec<String>,
    /// Only jobs that ran on any of these nodes (sacct `-N`, names expanded).
    #[serde(default)]
    pub nodes: Vec<String>,
}

/// A front-end's request to the controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Submit a batch job (sbatch). `test_only` validates and estimates, creating nothing.
    Submit {
        spec: Box<JobSpec>,
        test_only: bool,
        /// The other components of a heterogeneous job (`spec` is the first).
        #[serde(default)]
        het: Vec<JobSpec>,
    },
    /// Jobs still in the queue or finished within MinJobAge (without their script and
    /// environment: see `Job::for_query`).
    Jobs(JobFilter),
    /// Nodes and partitions.
    Nodes,
    /// Signal or cancel jobs. `signal: None` cancels. A signal goes to the job's steps
    /// only; with `batch_only` (scancel `-b`) to the batch shell only; with `full`
    /// (scancel `-f`, which wins) to the batch shell, its children and every step.
    Cancel {
        filter: JobFilter,
        signal: Option<i32>,
        batch_only: bool,
        #[serde(default)]
        full: bool,
    },
    Hold {
        ids: Vec<u32>,
        user_hold: bool,
        #[serde(default)]
        array_tasks: Vec<ArrayTasks>,
    },
    Release {
        ids: Vec<u32>,
        #[serde(default)]
        array_tasks: Vec<ArrayTasks>,
    },
    Requeue {
        ids: Vec<u32>,
        hold: bool,
        #[serde(default)]
        array_tasks: Vec<ArrayTasks>,
    },
    /// `scontrol update JobId=N` (with `tasks`: `JobId=N_i`).
    UpdateJob {
        id: u32,
        updates: Vec<JobUpdate>,
        #[serde(default)]
        tasks: Option<IndexSet>,
    },
    UpdateNode {
        names: Vec<String>,
        update: NodeUpdate,
    },
    /// Accounting records.
    Acct(AcctQuery),
    /// The running configuration as `Key = Value` pairs (scontrol show config).
    Config,
    /// Stop the controller (`sluice controller --stop`); only the owner or root.
    Shutdown,
    /// Liveness check.
    Ping,
    /// Priority factors of pending jobs (sprio); empty lists mean all.
    Priority { ids: Vec<u32>, users: Vec<u32> },
    /// Scheduler statistics (sdiag).
    Stats,
    /// The fair-share tree (sshare): every association, filtered by the client.
    Shares,
    /// Create a job that only holds an allocation (salloc, srun outside an allocation).
    /// Answered with [`Response::Allocation`] after the next scheduling pass, so the job
    /// is either running or pending with its reason. The connection that sent it owns
    /// the allocation: when it closes without [`Request::Release`], the job is
    /// cancelled — unless `detach` (salloc `--no-shell`), where the allocation lives
    /// until it is cancelled or reaches its time limit.
    Allocate {
        spec: Box<JobSpec>,
        #[serde(default)]
        detach: bool,
        /// The other components of a heterogeneous allocation (`salloc A : B`, `srun A
        /// : B` outside a job); `spec` is the first. All are allocated together or not
        /// at all, as `Submit`'s; the answer is about the leader (component 0).
        #[serde(default)]
        het: Vec<JobSpec>,
    },
    /// Answered with [`Response::Allocation`] once the job has started (`started`) or
    /// has ended (`!started`), whichever is asked; at once if that already happened.
    WaitJob { job_id: u32, started: bool },
    /// The owner of an allocation-only job gives it back; the job ends COMPLETED (exit
    /// 0) or FAILED with `exit`, and its steps are ended.
    ReleaseAllocation { job_id: u32, exit: ExitStatus },
    /// Launch a step in a running job. The connection then becomes the step's stream:
    /// the controller sends [`StepEvent`] frames until [`StepEvent::Done`] (or
    /// [`StepEvent::Error`]); the client sends [`StepInput`] frames. Closing it ends the
    /// step.
    ///
    /// In a heterogeneous job, `job_id` is any of its components (normally the leader,
    /// SLURM_JOB_ID) and each part runs in the component its `StepSpec::het_group`
    /// names (none: the component `job_id` is). `het` holds the parts after `spec`
    /// (srun `A : B`, `--het-group=0,1`), one per component, in component order: one
    /// step over all of them, ranks numbered across the parts in that order, ending
    /// when the last part ends (cf. slurm's heterogeneous job steps).
    StepLaunch {
        job_id: u32,
        spec: Box<StepSpec>,
        #[serde(default)]
        het: Vec<StepSpec>,
    },
    /// Signal (`Some`) or cancel (`None`) numbered steps, `(job, step)` pairs, and
    /// steps of heterogeneous job components named `L+k.S` (`het_steps`).
    CancelSteps {
        steps: Vec<(u32, u32)>,
        signal: Option<i32>,
        #[serde(default)]
        het_steps: Vec<(HetComponent, u32)>,
    },
    /// `scontrol suspend` (`resume: false`) or `scontrol resume` (`resume: true`);
    /// operators only.
    Suspend {
        ids: Vec<u32>,
        #[serde(default)]
        array_tasks: Vec<ArrayTasks>,
        resume: bool,
    },
    /// The accounting tree (sacctmgr show, sshare); anyone may read it.
    AcctTree,
    /// A sacctmgr change. `commit: false` only says what would change (the summary
    /// sacctmgr shows before asking to commit); `commit: true` applies and persists
    /// it. Only operators (root, the controller's owner, AdminLevel Operator or
    /// Administrator) may.
    AcctChange {
        op: crate::model::acct_ops::AcctOp,
        commit: bool,
    },
    /// `scontrol create reservation`; answered [`Response::ResvCreated`].
    CreateResv(crate::model::reservation::ResvSpec),
    /// `scontrol update reservation`; answered `Ok`.
    UpdateResv(crate::model::reservation::ResvSpec),
    /// `scontrol delete ReservationName=`; answered `Ok`.
    DeleteResv { name: String },
    /// Reservations (scontrol show reservation, sinfo -T); answered
    /// [`Response::Reservations`].
    Reservations,
    /// Usage for sreport: finished and running job records overlapping
    /// `[start, end)`, the nodes, and the reservations known; answered
    /// [`Response::Usage`].
    Usage { start: i64, end: i64 },
    /// The network topology placement uses (`scontrol show topology`); answered
    /// [`Response::Topology`].
    Topology,
    /// An srun whose relayed step stream broke (its node's agent restarted, or the
    /// node's SSH link dropped) takes the stream back: the connection becomes the
    /// step's stream again, starting with the events after the first `received` ones
    /// it had. [`StepEvent::Error`] when no broken stream of that step is waiting.
    StepAttach {
        job_id: u32,
        step_id: u32,
        received: u64,
    },
    /// `scontrol reconfigure`: the controller re-reads its config file (operators
    /// only); [`Response::Ok`], or [`SlurmError::Other`] saying why nothing changed.
    Reconfigure,
    /// `scontrol write batch_script JOB`: the job's script as submitted, answered
    /// [`Response::BatchScript`]; the job's owner or an operator only
    /// ([`SlurmError::AccessDenied`]), batch jobs only ([`SlurmError::NotBatch`]), jobs
    /// the controller still holds ([`SlurmError::InvalidJobId`]).
    BatchScript { job_id: u32 },
    /// `scontrol setdebug LEVEL`: the controller's log level from now on (Slurm's
    /// level names: quiet, fatal, error, info, verbose, debug, debug2…debug5, or 0–9);
    /// operators only. [`Response::Ok`].
    SetDebug { level: String },
    /// `scontrol reboot` (operators; cf. slurmctld `_slurm_rpc_reboot_nodes`): nodes
    /// (empty: all) are rebooted through RebootProgram once they have no jobs; `asap`
    /// drains them meanwhile; `next_down` leaves them DOWN with `reason` afterwards.
    /// [`Response::Ok`]; refused without a RebootProgram.
    Reboot {
        nodes: Vec<String>,
        asap: bool,
        next_down: bool,
        reason: Option<String>,
    },
    /// `scontrol cancel_reboot NODES` (operators): forgets reboots not yet issued.
    CancelReboot { nodes: Vec<String> },
}

/// A user-facing error from the controller; `Display` is Slurm's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum SlurmError {
    #[error("Invalid job id specified")]
    InvalidJobId,
    #[error("Invalid partition name specified")]
    InvalidPartition,
    #[error("Invalid node name specified")]
    InvalidNodeName,
    #[error("Access/permission denied")]
    AccessDenied,
    #[error("Requested node configuration is not available")]
    NodeConfigUnavailable,
    #[error("Requested partition configuration not available now")]
    PartitionConfigUnavailable,
    #[error("Requested time limit is invalid (missing or exceeds some limit)")]
    InvalidTimeLimit,
    #[error("Node count specification invalid")]
    InvalidNodeCount,
    #[error("Job/step already completing or completed")]
    AlreadyDone,
    #[error("Job is no longer pending execution")]
    NotPending,
    #[error("Job is pending execution")]
    JobPending,
    #[error("Only batch jobs are accepted or processed")]
    NotBatch,
    #[error("Unable to contact slurm controller (connect failure)")]
    Unreachable,
    /// Any other error, shown verbatim.
    #[error("{0}")]
    Other(String),
    #[error("Invalid job array specification")]
    InvalidArraySpec,
    #[error("Job dependency problem")]
    DependencyProblem,
    #[error("Job can not start immediately")]
    CannotStartImmediately,
    #[error("Invalid time specification")]
    InvalidTimeValue,
    #[error("Invalid account or account/partition combination specified")]
    InvalidAccount,
    #[error("Invalid qos specification")]
    InvalidQos,
    #[error(
        "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    )]
    AccountingPolicy,
    /// ESLURM_NOT_WHOLE_HET_JOB: a pending heterogeneous job's component named alone.
    #[error("Operation not permitted on individual component of heterogeneous job")]
    NotWholeHetJob,
    /// A heterogeneous step that names components the job does not have (srun's own
    /// checks in Slurm, e.g. `Requested het-group offset exceeds highest hetjob index
    /// (2 > 1)`); the text is printed as it is, after `srun: error: `.
    #[error("{0}")]
    HetGroup(String),
    /// ESLURM_INVALID_GRES: a GRES no node has (not in Slurm's GresTypes), or GPU
    /// counts that contradict each other.
    #[error("Invalid generic resource (gres) specification")]
    InvalidGres,
}

impl SlurmError {
    /// A step naming heterogeneous job component `top` in a job whose last component
    /// is `last`, in srun's words (srun_job.c): with `several` parts (`A : B`, or a
    /// `--het-group` list) the step's het group value is named, else the offset.
    pub fn het_group_too_high(top: u32, last: u32, several: bool) -> SlurmError {
        SlurmError::HetGroup(if several {
            format!(
                "Attempt to run a job step with het group value of {top}, but the job allocation has maximum value of {last}"
            )
        } else {
            format!("Requested het-group offset exceeds highest hetjob index ({top} > {last})")
        })
    }

    /// A step naming component `k` twice (Slurm launches one step part per
    /// component: `srun --het-group=0 a : --het-group=0 b` is refused).
    pub fn het_group_twice(k: u32) -> SlurmError {
        SlurmError::HetGroup(format!(
            "Heterogeneous job component {k} is named twice: a step has one part per component"
        ))
    }
}

/// Per-job outcome of a multi-job operation (cancel, hold, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobResult {
    pub id: u32,
    pub error: Option<SlurmError>,
    /// The array task the result is about (`N_i` in messages), when one was named.
    #[serde(default)]
    pub task: Option<u32>,
    /// The heterogeneous component the result is about (`L+k` in messages).
    #[serde(default)]
    pub het: Option<u32>,
}

impl JobResult {
    /// A result for plain job `id`.
    pub fn new(id: u32, error: Option<SlurmError>) -> JobResult {
        JobResult {
            id,
            error,
            task: None,
            het: None,
        }
    }

    /// The job as messages name it: `N`, `N_i` or `L+k`.
    pub fn label(&self) -> String {
        match (self.task, self.het) {
            (Some(t), _) => format!("{}_{t}", self.id),
            (None, Some(k)) => format!("{}+{k}", self.id),
            (None, None) => self.id.to_string(),
        }
    }
}

/// What `sbatch --test-only` learns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOnly {
    /// The id the job would get (Slurm prints it: `Job N to start at ...`); 0 = unknown.
    #[serde(default)]
    pub job_id: u32,
    /// Estimated start (epoch seconds).
    pub start: i64,
    pub nodes: String,
    pub cpus: u32,
    pub partition: String,
}

/// The controller's answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Submitted {
        job_id: u32,
    },
    TestOnly(TestOnly),
    Jobs {
        jobs: Vec<Job>,
        now: i64,
    },
    /// One page of a paged `Request::Jobs` (`JobFilter::page`): `more` when jobs with
    /// larger ids may follow (ask again with `after` = the last id here).
    JobsPage {
        jobs: Vec<Job>,
        now: i64,
        more: bool,
    },
    Nodes {
        nodes: Vec<Node>,
        partitions: Vec<Partition>,
        now: i64,
    },
    /// Per-job results of cancel/hold/release/requeue/update.
    Results(Vec<JobResult>),
    Acct {
        jobs: Vec<Job>,
        now: i64,
    },
    Config(Vec<(String, String)>),
    Ok,
    Error(SlurmError),
    /// The job an [`Request::Allocate`] or [`Request::WaitJob`] is about, as it is now.
    Allocation(Box<Job>),
    Priority {
        rows: Vec<PriorityRow>,
        weights: PriorityWeights,
    },
    Stats(Box<SchedStats>),
    /// The accounting tree, the controller's cluster name and the enforcement in force.
    AcctTree {
        tree: Box<crate::model::assoc::AssocTree>,
        cluster: String,
        enforce: crate::model::assoc::Enforce,
    },
    /// What a [`Request::AcctChange`] changed (or would change).
    AcctChanged(crate::model::acct_ops::Outcome),
    /// Answer to [`Request::Shares`]: associations in sshare's order.
    Shares {
        rows: Vec<ShareRow>,
        cluster: String,
    },
    /// The name of a reservation just created.
    ResvCreated {
        name: String,
    },
    Reservations {
        resvs: Vec<crate::model::reservation::Reservation>,
        now: i64,
    },
    /// Data for sreport (see [`Request::Usage`]).
    Usage(Box<UsageReport>),
    /// Answer to [`Request::Topology`] (empty when none is configured).
    Topology(Box<crate::model::topology::Topology>),
    /// Answer to [`Request::BatchScript`]: the script's text.
    BatchScript(String),
}

/// What sreport computes its reports from: job records overlapping the period, the
/// nodes' CPU counts, and the reservations (current and past) overlapping it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    pub cluster: String,
    pub jobs: Vec<Job>,
    /// (node name, CPUs).
    pub nodes: Vec<(String, u32)>,
    pub resvs: Vec<crate::model::reservation::Reservation>,
    /// Node down intervals overlapping the period: (node, start, end), epoch seconds.
    pub down: Vec<(String, i64, i64)>,
    pub now: i64,
    /// When the cluster came to exist (its database was created), epoch seconds: no
    /// time before it is reported.
    #[serde(default)]
    pub created: i64,
}

/// One association of the fair-share tree as sshare prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareRow {
    pub account: String,
    /// `None` for an account association.
    pub user: Option<String>,
    /// RawShares; `None` for the root account (printed blank).
    pub raw_shares: Option<u32>,
    /// NormShares, usages, FairShare and LevelFS (see `sched::fairshare::Share`).
    pub share: crate::model::priority::Share,
    /// Fair Tree (LevelFS meaningful) or classic.
    pub fair_tree: bool,
    /// TRESRunMins: (TRES name, allocated amount × minutes left) over running jobs of
    /// the association's subtree; memory in MiB.
    pub tres_run_mins: Vec<(String, u64)>,
    /// The association's GrpTRESMins limit as sacctmgr prints it (`cpu=600`); empty
    /// when it has none.
    #[serde(default)]
    pub grp_tres_mins: String,
    /// GrpTRESRaw: (TRES name, decayed TRES-minutes used by the association's
    /// subtree), in the same TRES order as `tres_run_mins`; memory in MiB.
    #[serde(default)]
    pub grp_tres_raw: Vec<(String, u64)>,
    /// The association's id (`None` for an association the tree does not hold).
    #[serde(default)]
    pub id: Option<u32>,
    /// The partition(s) of a partition-specific user association (`None`: every
    /// partition).
    #[serde(default)]
    pub partition: Option<String>,
}

/// One pending job's priority factors, weighted (sprio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityRow {
    pub job_id: u32,
    pub partition: String,
    pub user: String,
    pub priority: u32,
    pub factors: crate::model::priority::Factors,
}

/// The configured weights (sprio -w).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriorityWeights {
    pub age: u32,
    pub assoc: u32,
    pub fairshare: u32,
    pub jobsize: u32,
    pub partition: u32,
    pub qos: u32,
    pub tres: Vec<(String, f64)>,
}

/// Controller and scheduler counters (sdiag). Times are microseconds, epochs seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedStats {
    /// When the counters started (controller start).
    pub since: i64,
    /// When this answer was made.
    pub now: i64,
    pub jobs_submitted: u64,
    pub jobs_started: u64,
    pub jobs_completed: u64,
    pub jobs_canceled: u64,
    pub jobs_failed: u64,
    pub jobs_pending: u64,
    pub jobs_running: u64,
    pub main_cycles: u64,
    pub main_last_us: u64,
    pub main_max_us: u64,
    pub main_sum_us: u64,
    pub main_depth_sum: u64,
    pub main_last_queue: u64,
    pub main_first: i64,
    pub bf_cycles: u64,
    pub bf_jobs: u64,
    pub bf_last_when: Option<i64>,
    pub bf_last_us: u64,
    pub bf_max_us: u64,
    pub bf_sum_us: u64,
    pub bf_last_depth: u64,
    pub bf_last_depth_try: u64,
    pub bf_depth_sum: u64,
    pub bf_depth_try_sum: u64,
    pub bf_last_queue: u64,
    pub bf_queue_sum: u64,
    pub bf_last_table: u64,
    pub bf_table_sum: u64,
}

/// Everything a node needs to run a batch job's script.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchBatch {
    pub job: Box<Job>,
    /// Seconds between SIGTERM and SIGKILL when the job is ended.
    pub kill_wait: u32,
    pub cluster: String,
    /// The cluster's `[cgroup]` settings for stepd, from the controller's configuration.
    #[serde(default)]
    pub cgroup: crate::config::CgroupConf,
    /// For a heterogeneous job's leader: the other components, allocated (for the
    /// `_HET_GROUP_<k>` variables).
    #[serde(default)]
    pub het: Vec<Job>,
    /// The batch host's GRES devices as the controller knows them (files, `Cores=`), so
    /// that stepd can deny the device files of GPUs not allocated to the job.
    #[serde(default)]
    pub node_gres: Vec<crate::model::gres::GresDevice>,
    /// The node scripts; stepd runs TaskProlog/TaskEpilog from them.
    #[serde(default)]
    pub scripts: crate::config::scripts::NodeScripts,
}

impl std::fmt::Debug for LaunchBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchBatch")
            .field("job", &self.job.id)
            .finish_non_exhaustive()
    }
}

/// Controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToAgent {
    /// Start a batch job's script on this node.
    Launch(LaunchBatch),
    /// The cluster's `[cgroup]` settings, sent after registration: the agent checks
    /// whether its stepds can isolate jobs here and answers [`FromAgent::Isolation`].
    Configure {
        cgroup: crate::config::CgroupConf,
        /// Prolog, epilog and health-check settings the agent runs on this node.
        #[serde(default)]
        scripts: crate::config::scripts::NodeScripts,
    },
    /// Run RebootProgram (`sh -c program`) to reboot this node for `scontrol reboot`;
    /// the reboot is complete when the node's agent registers again.
    Reboot { program: String },
    /// Send `signal` to the job's processes (the batch shell only with `batch_only`).
    Signal {
        job_id: u32,
        signal: i32,
        batch_only: bool,
    },
    /// End the job: SIGCONT+SIGTERM, then SIGKILL after `kill_wait` seconds.
    /// `reason` is written into the job's stderr as slurmstepd does.
    Terminate {
        job_id: u32,
        kill_wait: u32,
        reason: Option<String>,
    },
    /// The controller has recorded the end of this job; the agent may forget it.
    Forget { job_id: u32 },
    /// Start this node's part of a step (one stepd per step per node).
    LaunchStep(Box<LaunchStep>),
    /// Input for a running step's stepd (stdin, signals, terminal size, terminate).
    StepInput {
        job_id: u32,
        step_id: u32,
        input: StepdInput,
    },
    /// Bytes from the controller for relayed connection `conn` (see
    /// [`FromAgent::RelayOpen`]).
    Relay {
        conn: u64,
        #[serde(with = "crate::proto::bytes")]
        bytes: Vec<u8>,
    },
    /// The controller has finished with relayed connection `conn`: close it.
    RelayClose { conn: u64 },
    /// Stop (`suspend: true`) or continue every process of the job on this node: the
    /// batch step and the job's steps (freezer, or SIGSTOP/SIGCONT without one).
    Suspend { job_id: u32, suspend: bool },
    /// Run the prolog for this job now (`PrologFlags=Alloc`: at allocation, on every
    /// node of the job); launches for the job on this node wait for it.
    Prolog { job: Box<Job>, cluster: String },
    /// The job has ended: run the epilog for it on this node (sent to every node of the
    /// allocation when an epilog is configured).
    Epilog { job: Box<Job>, cluster: String },
    /// Re-attach a step whose stepd outlived the previous link (listed in
    /// [`FromAgent::Register`]'s `steps`): connect to it and have it replay its events
    /// from number `from` ([`StepdInput::Resume`]), then relay it as a launched one.
    AdoptStep {
        job_id: u32,
        step_id: u32,
        from: u64,
    },
    /// A step the node still runs but the controller no longer tracks (it ended while
    /// the node was away): end it and let its stepd go ([`StepdInput::Abandon`]).
    EndStep {
        job_id: u32,
        step_id: u32,
        kill_wait: u32,
    },
}

/// How a batch job ended on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndKind {
    /// The script ran and exited (or was killed) with `status`.
    Exited,
    /// The job could not be started (bad working directory, output file, …).
    LaunchFailed,
    /// The job's stepd died while the job ran: the job's processes were killed and it
    /// ends FAILED, or is requeued when it asked for `--requeue`.
    StepdLost,
}

/// Agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromAgent {
    /// First message after Hello: who the node is and what it has; `running` lists jobs
    /// whose stepd is still alive (re-adopted after a restart).
    Register {
        node: String,
        cpus: u32,
        sockets: u32,
        cores_per_socket: u32,
        threads_per_core: u32,
        real_memory: u64,
        boot_time: i64,
        os: String,
        arch: String,
        running: Vec<u32>,
        /// GPUs the agent found (NVML, else `/dev/nvidia*`); used when the configuration
        /// declares none for the node and does not say `AutoDetect=off`.
        #[serde(default)]
        gres: Vec<crate::model::gres::GresDevice>,
        /// Steps (job, step) whose stepd is still running here, from an earlier link or
        /// agent; the controller answers [`ToAgent::AdoptStep`] or [`ToAgent::EndStep`].
        #[serde(default)]
        steps: Vec<(u32, u32)>,
        /// This agent answers every [`ToAgent::Epilog`] with
        /// [`FromAgent::EpilogComplete`], so the controller may keep the job COMPLETING
        /// until then (an older agent does not, and is not waited for).
        #[serde(default)]
        reports_epilog: bool,
    },
    /// The batch script started (pid of the shell, epoch seconds).
    Started { job_id: u32, pid: u32, time: i64 },
    /// The batch step ended.
    Ended {
        job_id: u32,
        kind: EndKind,
        status: ExitStatus,
        time: i64,
        /// Peak RSS in KiB and CPU seconds of the batch step.
        max_rss_kib: u64,
        cpu_secs: f64,
        /// The job ran out of memory (cgroup OOM event).
        oom: bool,
        /// A message for the controller's log when launch failed.
        message: Option<String>,
        /// The batch step's final usage (sacct's MaxRSS, AveRSS, MaxVMSize, UserCPU…).
        #[serde(default)]
        usage: Option<crate::model::step::StepUsage>,
    },
    /// Whether jobs here run isolated: the backend stepd will use (`cgroup/v1`,
    /// `cgroup/v2`, `none`), and why isolation is degraded (`None`: it is not).
    Isolation {
        backend: String,
        degraded: Option<String>,
    },
    /// The latest usage sample of a running job's batch step (sent with heartbeats).
    BatchUsage {
        job_id: u32,
        usage: crate::model::step::StepUsage,
    },
    /// Periodic load report.
    Heartbeat { load: f64, free_mem: u64 },
    /// What a step's stepd on this node reports (output, task exits, usage, the end).
    Step {
        job_id: u32,
        step_id: u32,
        event: StepdEvent,
        /// The event's number from stepd ([`StepdFrame`]); 0 for events the agent makes
        /// up itself (a launch failure, a stepd that died), which are never replayed.
        #[serde(default)]
        seq: u64,
    },
    /// A front-end inside a job on this node connected to the agent's relay socket
    /// (`SLUICE_SOCKET` in the job's environment); `uid`/`gid` are its SO_PEERCRED as
    /// the agent read them, which the controller trusts as it trusts the agent. The
    /// connection's bytes follow as [`FromAgent::Relay`] and are served exactly like a
    /// connection to the controller's own socket.
    RelayOpen { conn: u64, uid: u32, gid: u32 },
    /// Bytes from the front-end on relayed connection `conn`.
    Relay {
        conn: u64,
        #[serde(with = "crate::proto::bytes")]
        bytes: Vec<u8>,
    },
    /// The front-end closed relayed connection `conn`.
    RelayClose { conn: u64 },
    /// The prolog of `job_id` failed here (`message`: exit status and output, for the
    /// log); the controller drains the node ("Prolog error") and requeues the job held.
    PrologFailed { job_id: u32, message: String },
    /// The epilog of `job_id` failed here; the controller drains the node
    /// ("Epilog error").
    EpilogFailed { job_id: u32, message: String },
    /// The HealthCheckProgram failed here: `reason` is its output (or its exit status
    /// when it printed nothing); the controller drains the node with it.
    HealthCheckFailed { reason: String },
    /// The node's GPUs as last sampled (issue 24), sent on the first sample and on
    /// every change: those running processes of no sluice job here (`busy`, by GRES
    /// index), and the unhealthy ones. The controller applies the node's
    /// `gpu_foreign` policy and withholds unhealthy GPUs.
    GpuState {
        busy: Vec<crate::model::node::BusyGpu>,
        /// The unhealthy GPUs (ECC errors, retired pages, fallen off the bus).
        #[serde(default)]
        faults: Vec<crate::model::node::GpuFault>,
    },
    /// The epilog of `job_id` is over here (after [`FromAgent::EpilogFailed`] when it
    /// failed): the job no longer keeps this node COMPLETING (cf. Slurm's
    /// MESSAGE_EPILOG_COMPLETE).
    EpilogComplete { job_id: u32 },
}
