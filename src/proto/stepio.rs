//! The messages of a running step (DESIGN.md §2: stepd → agent → controller → srun and
//! back). Four families, one per hop direction:
//!
//! - [`StepEvent`]: controller → srun, on the connection that sent
//!   `Request::StepLaunch` (which has become the step's stream).
//! - [`StepInput`]: srun → controller on that stream.
//! - [`StepdInput`]: controller → agent (`ToAgent::StepInput`) → stepd.
//! - [`StepdEvent`]: stepd → agent → controller (`FromAgent::Step`).
//!
//! Task output is carried in chunks as the tasks write it; srun assembles lines (so
//! labelled lines of different tasks never mix) unless `--unbuffered`.

use crate::model::step::{StepLayout, StepSpec, StepUsage};
use crate::model::{ExitStatus, Job, JobState};
use serde::{Deserialize, Serialize};

use super::SlurmError;

/// Everything one node needs to run its part of a step; also the step's spool record.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchStep {
    /// The job (for its environment and the user to run as).
    pub job: Box<Job>,
    pub step_id: u32,
    pub spec: Box<StepSpec>,
    /// The whole step's layout; this node is `layout.nodes[node_index]`.
    pub layout: StepLayout,
    pub node_index: u32,
    /// Seconds between SIGTERM and SIGKILL when the step is ended.
    pub kill_wait: u32,
    pub cluster: String,
    /// The cluster's `[cgroup]` settings for stepd, from the controller's configuration.
    #[serde(default)]
    pub cgroup: crate::config::CgroupConf,
    /// This node's GRES devices as the controller knows them (files, `Cores=`): for
    /// binding tasks near their GPUs and denying the files of GPUs the step lacks.
    #[serde(default)]
    pub node_gres: Vec<crate::model::gres::GresDevice>,
    /// The node scripts; stepd runs TaskProlog/TaskEpilog from them.
    #[serde(default)]
    pub scripts: crate::config::scripts::NodeScripts,
    /// Seconds stepd keeps its unacknowledged events after the step ended while no
    /// controller has them (the link is down): past this the node counts as dead
    /// anyway (SlurmdTimeout). 0 means the default (10 minutes).
    #[serde(default)]
    pub linger_secs: u32,
    /// Set for a step of a heterogeneous job: what the tasks' environment says about
    /// the whole step and job (`layout` and `job` are this part's and this
    /// component's; the layout's ranks are already numbered across the parts).
    #[serde(default)]
    pub het: Option<HetStepEnv>,
}

/// What a part of a heterogeneous job's step tells its tasks about the rest (cf.
/// slurmstepd's `het_job_*` launch fields): SLURM_JOB_ID is the leader's,
/// SLURM_NODEID counts the nodes of the parts before, SLURM_NTASKS, SLURM_NNODES and
/// SLURM_STEP_* describe the whole step, and every component's allocation is named by
/// the `SLURM_*_HET_GROUP_<k>` variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HetStepEnv {
    /// Every component of the job, leader (offset 0) first, with its allocation.
    pub components: Vec<Job>,
    /// Offsets of the components the step runs in, in order.
    pub parts: Vec<u32>,
    /// Nodes of the parts before this one (SLURM_NODEID of this part's first node).
    pub node_offset: u32,
    /// Nodes of every part in order (a node in two parts is listed twice).
    pub step_nodes: Vec<String>,
    /// Tasks on each of `step_nodes`.
    pub step_tasks: Vec<u32>,
}

impl LaunchStep {
    /// This node's SLURM_NODEID: its index in the step, counting the nodes of a
    /// heterogeneous step's parts before this one.
    pub fn node_id(&self) -> u32 {
        self.node_index + self.het.as_ref().map_or(0, |h| h.node_offset)
    }
}

impl std::fmt::Debug for LaunchStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchStep")
            .field("job", &self.job.id)
            .field("step", &self.step_id)
            .field("node_index", &self.node_index)
            .finish_non_exhaustive()
    }
}

/// Controller → srun on a step stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepEvent {
    /// The step cannot start yet (Slurm: "step creation temporarily disabled"); it will
    /// when resources free up.
    Pending { reason: String },
    /// The step was created and its tasks are being started.
    Launched {
        job_id: u32,
        step_id: u32,
        layout: StepLayout,
    },
    /// Output of task `task` (`stderr` or stdout).
    Output {
        task: u32,
        stderr: bool,
        #[serde(with = "super::bytes")]
        data: Vec<u8>,
    },
    /// Task `task` on `node` ended.
    TaskExit {
        node: String,
        task: u32,
        status: ExitStatus,
    },
    /// The step is over on every node; `state` as recorded (COMPLETED, FAILED,
    /// CANCELLED, …). The stream ends after this.
    Done { state: JobState },
    /// The step could not be created or run; the stream ends after this.
    Error(SlurmError),
    /// First answer to a successful [`super::Request::StepAttach`]: the events srun
    /// missed follow, then the stream goes on.
    Reattached,
    /// The step's tasks could not be launched on `node` (`reason`: Slurm's error text,
    /// `detail`: a line saying why, if any): the step is aborted; `Done` follows.
    LaunchFailed {
        node: String,
        reason: String,
        detail: Option<String>,
    },
}

/// srun → controller on a step stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepInput {
    /// Bytes of srun's standard input.
    Stdin {
        #[serde(with = "super::bytes")]
        data: Vec<u8>,
    },
    /// srun's standard input reached its end.
    StdinEof,
    /// Forward a signal to every task.
    Signal(i32),
    /// The terminal size changed (`--pty`).
    WinSize { rows: u16, cols: u16 },
    /// End the step (srun `-K`, or a second Ctrl-C).
    Terminate,
    /// srun has received the first `n` events of the stream (so the controller need
    /// not keep them for a re-attach, [`super::Request::StepAttach`]).
    Received(u64),
}

/// Controller → stepd (through the agent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepdInput {
    Stdin {
        #[serde(with = "super::bytes")]
        data: Vec<u8>,
    },
    StdinEof,
    Signal(i32),
    WinSize {
        rows: u16,
        cols: u16,
    },
    /// SIGCONT+SIGTERM to the tasks, SIGKILL `kill_wait` seconds later; `message` goes
    /// to the first task's stderr first (`*** STEP N.S ON node CANCELLED AT … ***`).
    Terminate {
        kill_wait: u32,
        message: Option<String>,
    },
    /// Stop (`true`) or continue (`false`) the step's tasks (`scontrol suspend`).
    Suspend(bool),
    /// First message of an agent that connects to a running stepd's socket (a new link
    /// after an SSH drop or an agent restart): send the events numbered `from` and
    /// later, then go on live. Until it comes, a new connection gets nothing.
    Resume {
        from: u64,
    },
    /// The controller has every event up to and including number `seq`: stepd may drop
    /// them from its spool.
    Ack(u64),
    /// The controller no longer wants this step (it ended while the node was away, or
    /// the controller does not know it): end the tasks (SIGKILL after `kill_wait`
    /// seconds), discard their output, and exit without waiting for acknowledgements.
    Abandon {
        kill_wait: u32,
    },
    /// `--mpi=pmi2`: every node of the step reached PMI fence `seq`; `kvs` is what all
    /// of them put before it (see [`StepdEvent::PmiFence`]).
    PmiFenceDone {
        seq: u32,
        kvs: Vec<(String, String)>,
    },
}

/// One numbered event on the stepd → agent link. Numbers start at 1 and grow by one per
/// event of the step on this node; the controller uses them to drop the events it
/// already has when a new link replays them ([`StepdInput::Resume`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepdFrame {
    pub seq: u64,
    pub event: StepdEvent,
}

/// stepd → controller (through the agent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepdEvent {
    /// The tasks were started: `(rank, pid)`.
    Started {
        pids: Vec<(u32, u32)>,
    },
    Output {
        task: u32,
        stderr: bool,
        #[serde(with = "super::bytes")]
        data: Vec<u8>,
    },
    TaskExit {
        task: u32,
        status: ExitStatus,
    },
    /// A usage sample of this node's tasks.
    Usage(StepUsage),
    /// This node's part of the step is over: every task ended and its output is
    /// drained. `usage` is final (peak RSS, total CPU).
    Done {
        usage: StepUsage,
    },
    /// No task was started here: the launch failed for `reason` (Slurm's error text),
    /// explained by `detail` when there is more to say. `Done` follows.
    LaunchFailed {
        reason: String,
        detail: Option<String>,
    },
    /// `--mpi=pmi2`: every task of this node entered PMI fence number `seq` (counting
    /// from 1); `kvs` are the key-value pairs they put since the previous one. The
    /// controller answers every node with [`StepdInput::PmiFenceDone`] once all have.
    PmiFence {
        seq: u32,
        kvs: Vec<(String, String)>,
    },
}
