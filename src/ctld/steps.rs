//! Steps in the controller (cf. slurmctld/step_mgr.c): creating a step inside a running
//! job's allocation, routing its I/O between the node agents and the srun that owns it,
//! recording its end for accounting, and the allocation-only jobs of salloc and srun.
//!
//! Like the rest of [`Cluster`], these are reactor functions: they take `now` and
//! record what must happen in [`Effects`] (messages to agents, events to an srun's step
//! stream by its token, records to persist). An srun's stream is known only by its
//! token; the actor owns the channels.
//!
//! Step resources follow Slurm 22.05: a step holds, on each of its nodes, all of the
//! job's CPUs there unless `--exact`/`--exclusive` (then only what it asked for);
//! `--overlap` steps hold nothing and never wait. A step that does not fit now waits
//! ("Requested nodes are busy"); one that can never fit in the job is refused. The
//! batch step holds nothing. Memory is held only when the step asks for it.
//!
//! Invariants: every live step's `held` CPUs on a node plus the other live steps' never
//! exceed the job's CPUs there; a live step has a `Running` record in its job's
//! `steps`; its record is finalised exactly once.

use super::state::{Caller, Cluster, Effects};
use crate::model::job::{ExitStatus, StepDetail, StepRecord};
use crate::model::step::{StepLayout, StepSpec, StepUsage, layout_tasks};
use crate::model::{Job, JobState, MemReq, Reason, hostlist};
use crate::proto::{
    JobResult, LaunchStep, SlurmError, StepEvent, StepInput, StepdEvent, StepdInput, ToAgent,
};
use std::collections::HashMap;

mod gres;
mod pmi_fence;

/// Slurm's text for a step that must wait.
pub const BUSY: &str = "Requested nodes are busy";

/// Output bytes from one node's stepd that make the controller acknowledge them at
/// once rather than at the next tick, so that stepd's event log stays small.
const ACK_BYTES: usize = 1 << 20;
/// Most input bytes held for a node part whose link is down.
const QUEUE_CAP: usize = 16 << 20;

/// One node's part of a live step: what its stepd has delivered (events are numbered,
/// `stepd::stream`), and the state of its link.
#[derive(Debug, Default)]
struct Part {
    /// Highest event number received; events at or below it are replays, dropped.
    delivered: u64,
    /// Highest number acknowledged to stepd.
    acked: u64,
    /// Output bytes received since the last acknowledgement.
    unacked_bytes: usize,
    /// The node's agent link is down: stepd keeps the events, input waits here.
    detached: bool,
    /// The node reported its end of the step, or it was given up.
    done: bool,
    /// Input for stepd held while detached, sent once the step is re-adopted.
    queued: Vec<StepdInput>,
    queued_bytes: usize,
}

/// A step that is running on its nodes.
#[derive(Debug)]
struct LiveStep {
    token: u64,
    layout: StepLayout,
    /// CPUs held on each node of `layout.nodes` (0 for `--overlap`).
    held: Vec<u32>,
    /// MiB held per node.
    held_mem: u64,
    /// Whether the step holds `layout.gres` (it asked for GRES and is not `--overlap`).
    holds_gres: bool,
    /// Nodes that have not reported the end yet.
    nodes_left: usize,
    statuses: Vec<ExitStatus>,
    usage: HashMap<String, StepUsage>,
    /// Ended by scancel or by the end of the job.
    cancelled: bool,
    timed_out: bool,
    /// Per node of `layout.nodes`.
    parts: Vec<Part>,
    /// A node of the step stopped answering (SlurmdTimeout): the step ends NODE_FAIL.
    node_fail: bool,
    /// The launch failed on a node: the step is aborted and ends FAILED.
    launch_failed: bool,
    /// `--mpi=pmi2`: the PMI fence being gathered across the nodes.
    pmi: pmi_fence::PmiFence,
}

/// A step request waiting for resources: its parts, each the job (component) it runs
/// in and its request (one part unless the step spans a heterogeneous job's
/// components).
#[derive(Debug)]
struct PendingStep {
    token: u64,
    parts: Vec<(u32, StepSpec)>,
}

/// The controller's steps.
#[derive(Debug, Default)]
pub struct StepTable {
    live: HashMap<(u32, u32), LiveStep>,
    pending: Vec<PendingStep>,
    /// Heterogeneous steps with parts still running: the state of the parts already
    /// over, by stream token, for the one `Done` the stream gets when the last ends.
    het_done: HashMap<u64, JobState>,
    /// Job ids given to `srun -Z` steps so far (offsets from [`MIN_NOALLOC_JOBID`]).
    noalloc_seq: u32,
}

/// The job ids of `srun -Z` steps, which belong to no job (Slurm's
/// MIN_NOALLOC_JOBID..=MAX_NOALLOC_JOBID, above any real job id).
pub const MIN_NOALLOC_JOBID: u32 = 0xffff_0000;
const MAX_NOALLOC_JOBID: u32 = 0xffff_fffd;

/// Slurm's text for a launch refused because the step's credential is not valid
/// (ESLURMD_INVALID_JOB_CREDENTIAL): what a user other than root and SlurmUser gets
/// from `srun -Z`.
pub const INVALID_CREDENTIAL: &str = "Invalid job credential";

impl StepTable {
    /// Live step ids of `job_id`.
    fn of_job(&self, job_id: u32) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .live
            .keys()
            .filter(|(j, _)| *j == job_id)
            .map(|(_, s)| *s)
            .collect();
        v.sort_unstable();
        v
    }

    /// The live parts of the step of stream `token` (one unless it is a
    /// heterogeneous step), in job order.
    fn by_token(&self, token: u64) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> = self
            .live
            .iter()
            .filter(|(_, l)| l.token == token)
            .map(|(k, _)| *k)
            .collect();
        v.sort_unstable();
        v
    }

    /// Number of live steps (all jobs).
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// Whether job `job_id` has a step that has not reported its end.
    pub(crate) fn has_live(&self, job_id: u32) -> bool {
        self.live.keys().any(|(j, _)| *j == job_id)
    }
}

/// Why a step cannot be placed.
#[derive(Debug, PartialEq)]
enum Placement {
    /// Layout, CPUs held per node, memory held per node, whether `layout.gres` is held.
    Now(StepLayout, Vec<u32>, u64, bool),
    Busy,
    Never(SlurmError),
}

/// What a placed step part holds: CPUs per node of its layout, MiB per node, whether
/// it holds its layout's GRES.
type Held = (Vec<u32>, u64, bool);

/// Where the parts of a step go: every part now, or the whole step waits or fails.
#[derive(Debug)]
enum PartsPlacement {
    Now(Vec<(StepLayout, Held)>),
    Busy,
    Never(SlurmError),
}

impl Cluster {
    /// `srun` asks for a step in `job_id`; the outcome goes to stream `token`:
    /// `Launched` (and the step starts), `Pending` (it waits), or `Error`.
    ///
    /// `specs` are the step's parts: one for an ordinary step; in a heterogeneous job
    /// one per component it spans (`StepSpec::het_group`, else the component `job_id`
    /// is), started together or not at all, with one step id.
    ///
    /// Errors (as `StepEvent::Error`): the job is unknown, not the caller's, not
    /// running; [`SlurmError::HetGroup`] for parts that name components the job does
    /// not have (Slurm's srun texts).
    pub fn step_launch(
        &mut self,
        job_id: u32,
        specs: Vec<StepSpec>,
        caller: Caller,
        token: u64,
        now: i64,
        fx: &mut Effects,
    ) {
        let parts = match self.step_parts(job_id, specs, caller) {
            Ok(p) => p,
            Err(e) => {
                fx.to_client.push((token, StepEvent::Error(e)));
                return;
            }
        };
        match self.place_parts(&parts) {
            PartsPlacement::Now(placed) => self.start_parts(parts, placed, token, now, fx),
            PartsPlacement::Busy => {
                fx.to_client.push((
                    token,
                    StepEvent::Pending {
                        reason: BUSY.into(),
                    },
                ));
                self.steps.pending.push(PendingStep { token, parts });
            }
            PartsPlacement::Never(e) => fx.to_client.push((token, StepEvent::Error(e))),
        }
    }

    /// The jobs the parts of a step request run in, checked: each exists, is the
    /// caller's (or the caller is an operator) and runs; in component order.
    ///
    /// A job that is not heterogeneous takes one part, in component 0 (Slurm runs
    /// `srun A : B` there as one step of several parts; sluice does not yet).
    fn step_parts(
        &self,
        job_id: u32,
        specs: Vec<StepSpec>,
        caller: Caller,
    ) -> Result<Vec<(u32, StepSpec)>, SlurmError> {
        let job = self.jobs.get(&job_id).ok_or(SlurmError::InvalidJobId)?;
        if job.uid != caller.uid && !self.is_operator(caller) {
            return Err(SlurmError::AccessDenied);
        }
        let several = specs.len() > 1;
        let (members, own) = match (job.het, self.het_members(job_id)) {
            (Some(h), Some(m)) => (m, h.offset),
            _ => (vec![job_id], 0),
        };
        let last = members.len() as u32 - 1;
        let offsets: Vec<u32> = specs.iter().map(|s| s.het_group.unwrap_or(own)).collect();
        let top = offsets.iter().copied().max().unwrap_or(0);
        if several && job.het.is_none() {
            return Err(SlurmError::HetGroup(
                "a heterogeneous step (srun A : B) in a job that is not heterogeneous is not supported yet by sluice".into(),
            ));
        }
        if top > last {
            return Err(SlurmError::het_group_too_high(top, last, several));
        }
        let mut parts: Vec<(u32, StepSpec)> = Vec::new();
        for (spec, k) in specs.into_iter().zip(offsets) {
            let id = members[k as usize];
            if parts.iter().any(|(j, _)| *j == id) {
                return Err(SlurmError::het_group_twice(k));
            }
            parts.push((id, spec));
        }
        parts.sort_by_key(|(j, _)| *j);
        for (id, _) in &parts {
            let j = self.jobs.get(id).ok_or(SlurmError::InvalidJobId)?;
            if j.uid != caller.uid && !self.is_operator(caller) {
                return Err(SlurmError::AccessDenied);
            }
            if j.state != JobState::Running || j.completing {
                return Err(if j.state == JobState::Pending {
                    SlurmError::Other("Job is pending execution".into())
                } else {
                    SlurmError::AlreadyDone
                });
            }
        }
        Ok(parts)
    }

    /// Where every part of a step would run now: all of them, or why not.
    fn place_parts(&self, parts: &[(u32, StepSpec)]) -> PartsPlacement {
        let mut placed = Vec::new();
        let mut busy = false;
        for (id, spec) in parts {
            let placement = match self.jobs.get(id) {
                Some(job) => self.place_step(job, spec),
                None => Placement::Never(SlurmError::InvalidJobId),
            };
            match placement {
                Placement::Now(layout, held, mem, hg) => placed.push((layout, (held, mem, hg))),
                Placement::Busy => busy = true,
                Placement::Never(e) => return PartsPlacement::Never(e),
            }
        }
        if busy {
            PartsPlacement::Busy
        } else {
            PartsPlacement::Now(placed)
        }
    }

    /// Starts every part of a step where [`Cluster::place_parts`] put it: one step id
    /// (unused in every component of a heterogeneous job), ranks numbered across the
    /// parts in order, and one `Launched` event for srun with the parts' layouts
    /// joined.
    fn start_parts(
        &mut self,
        parts: Vec<(u32, StepSpec)>,
        placed: Vec<(StepLayout, Held)>,
        token: u64,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(&(first, _)) = parts.first() else {
            return;
        };
        let members = self.het_members(first).unwrap_or_else(|| vec![first]);
        let step_id = members
            .iter()
            .filter_map(|m| self.jobs.get(m))
            .flat_map(|j| j.steps.iter())
            .filter_map(|s| s.id.parse::<u32>().ok())
            .max()
            .map_or(0, |m| m + 1);
        // Ranks continue from one part to the next.
        let mut layouts: Vec<StepLayout> = Vec::new();
        let mut offset = 0;
        for (layout, _) in &placed {
            let mut l = layout.clone();
            for r in l.tasks.iter_mut().flatten() {
                *r += offset;
            }
            offset += layout.ntasks();
            layouts.push(l);
        }
        let mut whole = StepLayout::default();
        for l in &layouts {
            whole.nodes.extend(l.nodes.iter().cloned());
            whole.cpus.extend(l.cpus.iter().copied());
            whole.tasks.extend(l.tasks.iter().cloned());
            whole.gres.extend(l.gres.iter().cloned());
            whole.cpu_ids.extend(l.cpu_ids.iter().cloned());
        }
        let het_job = self.jobs.get(&first).and_then(|j| j.het);
        let components: Vec<Job> = match het_job {
            Some(_) => members
                .iter()
                .filter_map(|m| self.jobs.get(m).map(|j| j.for_query()))
                .collect(),
            None => Vec::new(),
        };
        let offsets: Vec<u32> = parts
            .iter()
            .filter_map(|(id, _)| self.jobs.get(id)?.het.map(|h| h.offset))
            .collect();
        let mut node_offset = 0;
        for ((id, spec), (layout, (_, held))) in
            parts.into_iter().zip(layouts.into_iter().zip(placed))
        {
            let het = het_job.map(|_| crate::proto::HetStepEnv {
                components: components.clone(),
                parts: offsets.clone(),
                node_offset,
                step_nodes: whole.nodes.clone(),
                step_tasks: whole.tasks_per_node(),
            });
            node_offset += layout.nodes.len() as u32;
            self.start_step(id, step_id, spec, layout, held, token, het, now, fx);
        }
        fx.to_client.push((
            token,
            StepEvent::Launched {
                job_id: het_job.map_or(first, |h| h.job_id),
                step_id,
                layout: whole,
            },
        ));
    }

    /// `srun -Z/--no-allocate` (srun(1)): runs `spec`'s tasks on the nodes of its
    /// `nodelist`, outside any job. No job is queued or recorded and nothing is taken
    /// from the scheduler's view of the nodes; the step gets a job id of its own
    /// (from [`MIN_NOALLOC_JOBID`]) and step id 0, one task per node unless `-n`
    /// says otherwise (in blocks of ⌈n/nodes⌉). `names`: the caller's user and group
    /// names. Only root and the controller's user may (Slurm: root and SlurmUser);
    /// anyone else sees the launch refused on every node with
    /// [`INVALID_CREDENTIAL`], as slurmd refuses the credential srun makes up.
    ///
    /// Errors (on stream `token`): `InvalidNodeName` for a bad or unknown node list;
    /// `NodeConfigUnavailable` when a node is not up and answering.
    pub fn step_launch_no_alloc(
        &mut self,
        spec: StepSpec,
        caller: Caller,
        names: (String, String),
        token: u64,
        now: i64,
        fx: &mut Effects,
    ) {
        let nodes = match spec.nodelist.as_deref().map(hostlist::expand) {
            Some(Ok(n)) if !n.is_empty() => n,
            _ => {
                fx.to_client
                    .push((token, StepEvent::Error(SlurmError::InvalidNodeName)));
                return;
            }
        };
        let mut cpus = Vec::new();
        for n in &nodes {
            match self.nodes.iter().find(|x| x.name == *n) {
                None => {
                    fx.to_client
                        .push((token, StepEvent::Error(SlurmError::InvalidNodeName)));
                    return;
                }
                Some(x) if x.state != crate::model::NodeState::Up || x.not_responding => {
                    fx.to_client
                        .push((token, StepEvent::Error(SlurmError::NodeConfigUnavailable)));
                    return;
                }
                Some(x) => cpus.push(x.cpus),
            }
        }
        let job_id = loop {
            let span = MAX_NOALLOC_JOBID - MIN_NOALLOC_JOBID + 1;
            let id = MIN_NOALLOC_JOBID + self.steps.noalloc_seq % span;
            self.steps.noalloc_seq = self.steps.noalloc_seq.wrapping_add(1);
            if !self.steps.has_live(id) {
                break id;
            }
        };
        let ntasks = spec.ntasks.unwrap_or(nodes.len() as u32).max(1);
        let per = ntasks.div_ceil(nodes.len() as u32);
        let cpt = spec.cpus_per_task.unwrap_or(1).max(1);
        let mut left = ntasks;
        let counts: Vec<u32> = nodes
            .iter()
            .map(|_| {
                let n = per.min(left);
                left -= n;
                n
            })
            .collect();
        let layout = StepLayout {
            nodes: nodes.clone(),
            gres: Vec::new(),
            cpus: counts
                .iter()
                .zip(&cpus)
                .map(|(n, c)| (n * cpt).min(*c).max(1))
                .collect(),
            tasks: layout_tasks(&counts, spec.distribution),
            cpu_ids: Vec::new(),
        };
        // The job the step's tasks see: the caller's, on these nodes, never queued.
        let job = Job {
            id: job_id,
            uid: caller.uid,
            gid: caller.gid,
            user: names.0,
            group: names.1,
            state: JobState::Running,
            start_time: Some(now),
            partition: String::new(),
            alloc: Some(crate::model::job::Allocation {
                nodes,
                cpus: layout.cpus.clone(),
                ..Default::default()
            }),
            spec: crate::model::JobSpec {
                name: spec.name.clone(),
                work_dir: spec.work_dir.clone(),
                ..Default::default()
            },
            ..Default::default()
        };
        if !self.is_operator(caller) {
            fx.to_client.push((
                token,
                StepEvent::Launched {
                    job_id,
                    step_id: 0,
                    layout: layout.clone(),
                },
            ));
            for node in &layout.nodes {
                fx.to_client.push((
                    token,
                    StepEvent::LaunchFailed {
                        node: node.clone(),
                        reason: INVALID_CREDENTIAL.into(),
                        detail: None,
                    },
                ));
            }
            fx.to_client.push((
                token,
                StepEvent::Done {
                    state: JobState::Failed,
                },
            ));
            return;
        }
        let held = vec![0; layout.nodes.len()];
        fx.to_client.push((
            token,
            StepEvent::Launched {
                job_id,
                step_id: 0,
                layout: layout.clone(),
            },
        ));
        self.dispatch_step(
            Box::new(job),
            0,
            spec,
            layout,
            (held, 0, false),
            token,
            None,
            fx,
        );
    }

    /// Where a step of `job` would run now.
    fn place_step(&self, job: &Job, spec: &StepSpec) -> Placement {
        let Some(alloc) = &job.alloc else {
            return Placement::Never(SlurmError::AlreadyDone);
        };
        let mut cands: Vec<usize> = (0..alloc.nodes.len()).collect();
        if let Some(w) = &spec.nodelist {
            let Ok(want) = hostlist::expand(w) else {
                return Placement::Never(SlurmError::InvalidNodeName);
            };
            if want.iter().any(|n| !alloc.nodes.contains(n)) {
                return Placement::Never(SlurmError::NodeConfigUnavailable);
            }
            cands.retain(|&i| want.contains(&alloc.nodes[i]));
        }
        if let Some(x) = &spec.exclude {
            let Ok(skip) = hostlist::expand(x) else {
                return Placement::Never(SlurmError::InvalidNodeName);
            };
            cands.retain(|&i| !skip.contains(&alloc.nodes[i]));
        }
        let cpt = spec.cpus_per_task.unwrap_or(1).max(1);
        let ntpn = spec.ntasks_per_node.filter(|&n| n > 0);
        let nnodes = match (spec.nodes_min, spec.ntasks) {
            (Some(n), _) => n,
            (None, Some(t)) => match ntpn {
                Some(p) => t.div_ceil(p),
                None => t.min(cands.len() as u32),
            },
            (None, None) => cands.len() as u32,
        }
        .max(1);
        if nnodes as usize > cands.len() || cands.is_empty() {
            return Placement::Never(SlurmError::NodeConfigUnavailable);
        }
        let ntasks = spec
            .ntasks
            .unwrap_or(nnodes * ntpn.unwrap_or(1))
            .max(nnodes);
        // What the job has on each candidate and what other steps hold there.
        let mut used = vec![0u32; alloc.nodes.len()];
        let mut used_mem = vec![0u64; alloc.nodes.len()];
        for ((j, _), l) in &self.steps.live {
            if *j != job.id {
                continue;
            }
            for (k, n) in l.layout.nodes.iter().enumerate() {
                if let Some(i) = alloc.nodes.iter().position(|x| x == n) {
                    used[i] += l.held[k];
                    used_mem[i] += l.held_mem;
                }
            }
        }
        let total_cpus: u32 = cands
            .iter()
            .take(nnodes as usize)
            .map(|&i| alloc.cpus[i])
            .sum();
        let largest: Vec<u32> = {
            let mut c: Vec<u32> = cands.iter().map(|&i| alloc.cpus[i]).collect();
            c.sort_unstable_by(|a, b| b.cmp(a));
            c
        };
        let best: u32 = largest.iter().take(nnodes as usize).sum();
        if ntasks.saturating_mul(cpt) > best.max(total_cpus) {
            return Placement::Never(SlurmError::Other(
                "More processors requested than permitted".into(),
            ));
        }
        let exact = spec.exact || spec.exclusive;
        // Choose nodes: the candidates in allocation order that can take tasks now.
        let free = |i: usize| {
            if spec.overlap {
                alloc.cpus[i]
            } else {
                alloc.cpus[i].saturating_sub(used[i])
            }
        };
        let usable: Vec<usize> = cands
            .iter()
            .copied()
            .filter(|&i| {
                if spec.overlap {
                    true
                } else if exact {
                    free(i) >= cpt
                } else {
                    used[i] == 0
                }
            })
            .collect();
        if usable.len() < nnodes as usize {
            return Placement::Busy;
        }
        let chosen: Vec<usize> = usable.into_iter().take(nnodes as usize).collect();
        let caps: Vec<u32> = chosen.iter().map(|&i| free(i)).collect();
        let counts = match ntpn {
            Some(p) => {
                let mut c = vec![p; chosen.len()];
                // -n smaller than N×ntpn trims the last nodes.
                let mut over = (p * chosen.len() as u32).saturating_sub(ntasks);
                for x in c.iter_mut().rev() {
                    let cut = over.min(x.saturating_sub(1));
                    *x -= cut;
                    over -= cut;
                }
                c
            }
            None => crate::model::step::tasks_per_node(ntasks, &caps, cpt, None),
        };
        if !spec.overlap
            && counts
                .iter()
                .zip(&caps)
                .any(|(&n, &cap)| n.saturating_mul(cpt) > cap)
        {
            // Fits in the job, but not beside the steps running now.
            return Placement::Busy;
        }
        let held: Vec<u32> = chosen
            .iter()
            .zip(&counts)
            .map(|(&i, &n)| {
                if spec.overlap {
                    0
                } else if exact {
                    (n * cpt).min(alloc.cpus[i])
                } else {
                    alloc.cpus[i]
                }
            })
            .collect();
        let mem = match spec.mem {
            None => 0,
            Some(MemReq::PerNode(m)) => m,
            Some(MemReq::PerCpu(m)) => m * u64::from(held.iter().copied().max().unwrap_or(cpt)),
        };
        if mem > 0 {
            if alloc.mem_per_node > 0 && mem > alloc.mem_per_node {
                return Placement::Never(SlurmError::Other(
                    "Memory required by task is not available".into(),
                ));
            }
            if alloc.mem_per_node > 0
                && chosen
                    .iter()
                    .any(|&i| used_mem[i] + mem > alloc.mem_per_node)
            {
                return Placement::Busy;
            }
        }
        // GRES: a subset of the job's devices, disjoint from other steps' holdings.
        let node_gres: Vec<gres::NodeGres> = chosen
            .iter()
            .zip(&counts)
            .map(|(&i, &n)| gres::NodeGres {
                job: alloc.gres.get(i).map(Vec::as_slice).unwrap_or(&[]),
                held: self
                    .steps
                    .live
                    .iter()
                    .filter(|((j, _), l)| *j == job.id && l.holds_gres)
                    .flat_map(|(_, l)| {
                        l.layout
                            .nodes
                            .iter()
                            .position(|x| *x == alloc.nodes[i])
                            .and_then(|k| l.layout.gres.get(k))
                            .into_iter()
                            .flatten()
                            .map(|d| (d.slot, d.count))
                    })
                    .collect(),
                tasks: n,
                sockets: self
                    .nodes
                    .iter()
                    .find(|x| x.name == alloc.nodes[i])
                    .map_or(1, |x| x.sockets.max(1)),
            })
            .collect();
        let (step_gres, holds_gres) = match gres::place(&spec.gpus, &node_gres, spec.overlap) {
            gres::GresPlacement::Now(g, h) => (g, h),
            gres::GresPlacement::Busy => return Placement::Busy,
            gres::GresPlacement::Never => {
                return Placement::Never(SlurmError::Other(gres::INVALID_GRES.into()));
            }
        };
        let cpus: Vec<u32> = chosen
            .iter()
            .zip(&counts)
            .map(|(&i, &n)| {
                if exact || spec.overlap {
                    (n * cpt).min(alloc.cpus[i]).max(n)
                } else {
                    alloc.cpus[i]
                }
            })
            .collect();
        // The job's CPU ids the step binds to: an exact step takes the lowest ids no
        // other holding step of the job has; others use the job's ids in order.
        let cpu_ids: Vec<Vec<u32>> = chosen
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let job_ids = alloc.cpu_ids.get(i).map(Vec::as_slice).unwrap_or(&[]);
                if exact && !spec.overlap {
                    let taken: Vec<u32> = self
                        .steps
                        .live
                        .iter()
                        .filter(|((j, _), _)| *j == job.id)
                        .flat_map(|(_, l)| {
                            l.layout
                                .nodes
                                .iter()
                                .position(|x| *x == alloc.nodes[i])
                                .filter(|&p| l.held.get(p).is_some_and(|h| *h > 0))
                                .and_then(|p| l.layout.cpu_ids.get(p))
                                .into_iter()
                                .flatten()
                                .copied()
                        })
                        .collect();
                    job_ids
                        .iter()
                        .copied()
                        .filter(|c| !taken.contains(c))
                        .take(held[k] as usize)
                        .collect()
                } else if spec.overlap {
                    job_ids.iter().copied().take(cpus[k] as usize).collect()
                } else {
                    job_ids.to_vec()
                }
            })
            .collect();
        let layout = StepLayout {
            nodes: chosen.iter().map(|&i| alloc.nodes[i].clone()).collect(),
            gres: step_gres,
            cpus,
            tasks: layout_tasks(&counts, spec.distribution),
            cpu_ids,
        };
        Placement::Now(layout, held, mem, holds_gres)
    }

    /// Starts one part of step `step_id` in `job_id` (the whole step, unless it spans
    /// a heterogeneous job's components): its record, its launch on each node, and
    /// its live entry on stream `token`.
    #[allow(clippy::too_many_arguments)]
    fn start_step(
        &mut self,
        job_id: u32,
        step_id: u32,
        spec: StepSpec,
        layout: StepLayout,
        (held, held_mem, holds_gres): Held,
        token: u64,
        het: Option<crate::proto::HetStepEnv>,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(job) = self.jobs.get_mut(&job_id) else {
            return;
        };
        let detail = StepDetail {
            uid: job.uid,
            layout: layout.clone(),
            srun: format!("{}:{}", spec.srun_host, spec.srun_pid),
            time_limit: spec.time_limit,
            distribution: spec.distribution,
            mem_per_node: held_mem,
            usage: StepUsage::default(),
            cancelled_by: None,
        };
        job.steps.push(StepRecord {
            id: step_id.to_string(),
            name: spec.name.clone(),
            state: JobState::Running,
            exit: ExitStatus::default(),
            start_time: now,
            end_time: None,
            nodes: hostlist::compress(&layout.nodes),
            ncpus: layout.cpus.iter().sum(),
            ntasks: layout.ntasks(),
            max_rss_kib: 0,
            cpu_secs: 0.0,
            detail: Some(Box::new(detail)),
            usage: None,
        });
        fx.persist.push(Job::clone(job));
        let job_copy = Box::new(Job::clone(job));
        self.dispatch_step(
            job_copy,
            step_id,
            spec,
            layout,
            (held, held_mem, holds_gres),
            token,
            het,
            fx,
        );
    }

    /// Sends a step's launch to each of its nodes, tells its srun (stream `token`), and
    /// records it as live. `het`: what the tasks of a part of a heterogeneous step
    /// see of the whole step.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_step(
        &mut self,
        job_copy: Box<Job>,
        step_id: u32,
        spec: StepSpec,
        layout: StepLayout,
        (held, held_mem, holds_gres): (Vec<u32>, u64, bool),
        token: u64,
        het: Option<crate::proto::HetStepEnv>,
        fx: &mut Effects,
    ) {
        let job_id = job_copy.id;
        let kill_wait = self.kill_wait;
        let cluster = self.cluster_name.clone();
        let cgroup = self.cgroup.clone();
        let scripts = self.scripts.clone();
        let node_gres: Vec<(String, Vec<crate::model::gres::GresDevice>)> = self
            .nodes
            .iter()
            .filter(|n| layout.nodes.contains(&n.name) && !n.gres.is_empty())
            .map(|n| (n.name.clone(), n.gres.clone()))
            .collect();
        let spec = Box::new(spec);
        for (i, node) in layout.nodes.iter().enumerate() {
            fx.to_agent.push((
                node.clone(),
                ToAgent::LaunchStep(Box::new(LaunchStep {
                    job: job_copy.clone(),
                    step_id,
                    spec: spec.clone(),
                    layout: layout.clone(),
                    node_index: i as u32,
                    kill_wait,
                    cluster: cluster.clone(),
                    cgroup: cgroup.clone(),
                    scripts: scripts.clone(),
                    node_gres: node_gres
                        .iter()
                        .find(|(n, _)| n == node)
                        .map(|(_, g)| g.clone())
                        .unwrap_or_default(),
                    linger_secs: 0,
                    het: het.clone(),
                })),
            ));
        }
        self.steps.live.insert(
            (job_id, step_id),
            LiveStep {
                token,
                nodes_left: layout.nodes.len(),
                parts: layout.nodes.iter().map(|_| Part::default()).collect(),
                node_fail: false,
                launch_failed: false,
                layout,
                held,
                held_mem,
                holds_gres,
                statuses: Vec::new(),
                usage: HashMap::new(),
                cancelled: false,
                timed_out: false,
                pmi: Default::default(),
            },
        );
    }

    /// Starts the waiting steps with a part in `job_id` that fit now, in arrival
    /// order.
    fn retry_pending(&mut self, job_id: u32, now: i64, fx: &mut Effects) {
        let mut i = 0;
        while i < self.steps.pending.len() {
            if !self.steps.pending[i]
                .parts
                .iter()
                .any(|(j, _)| *j == job_id)
            {
                i += 1;
                continue;
            }
            match self.place_parts(&self.steps.pending[i].parts) {
                PartsPlacement::Busy => i += 1,
                PartsPlacement::Now(placed) => {
                    let p = self.steps.pending.remove(i);
                    self.start_parts(p.parts, placed, p.token, now, fx);
                }
                PartsPlacement::Never(e) => {
                    let p = self.steps.pending.remove(i);
                    fx.to_client.push((p.token, StepEvent::Error(e)));
                }
            }
        }
    }

    /// An event from a step's stepd on `node`, numbered `seq` by stepd (0: made up by
    /// the agent, never replayed). Replays of events already received are dropped.
    #[allow(clippy::too_many_arguments)]
    pub fn step_event(
        &mut self,
        node: &str,
        job_id: u32,
        step_id: u32,
        ev: StepdEvent,
        seq: u64,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(live) = self.steps.live.get_mut(&(job_id, step_id)) else {
            // A step that ended here already: its stepd waits for this to exit.
            if seq > 0 && matches!(ev, StepdEvent::Done { .. }) {
                fx.to_agent.push((
                    node.to_string(),
                    ToAgent::StepInput {
                        job_id,
                        step_id,
                        input: StepdInput::Ack(seq),
                    },
                ));
            }
            return;
        };
        let token = live.token;
        let Some(pi) = live.layout.nodes.iter().position(|n| n == node) else {
            return;
        };
        let part = &mut live.parts[pi];
        if seq > 0 {
            if seq <= part.delivered {
                return;
            }
            if seq > part.delivered + 1 {
                tracing::warn!(
                    node,
                    job_id,
                    step_id,
                    "step events {}..{} missing",
                    part.delivered + 1,
                    seq - 1
                );
            }
            part.delivered = seq;
        }
        if part.done {
            return;
        }
        let ack_now = match &ev {
            StepdEvent::Output { data, .. } => {
                part.unacked_bytes += data.len();
                part.unacked_bytes >= ACK_BYTES
            }
            StepdEvent::Done { .. } => true,
            _ => false,
        };
        if ack_now && part.delivered > part.acked {
            part.acked = part.delivered;
            part.unacked_bytes = 0;
            fx.to_agent.push((
                node.to_string(),
                ToAgent::StepInput {
                    job_id,
                    step_id,
                    input: StepdInput::Ack(part.delivered),
                },
            ));
        }
        match ev {
            StepdEvent::Started { .. } => {}
            StepdEvent::Output { task, stderr, data } => {
                fx.to_client
                    .push((token, StepEvent::Output { task, stderr, data }));
            }
            StepdEvent::TaskExit { task, status } => {
                live.statuses.push(status);
                fx.to_client.push((
                    token,
                    StepEvent::TaskExit {
                        node: node.to_string(),
                        task,
                        status,
                    },
                ));
            }
            StepdEvent::Usage(u) => {
                live.usage.insert(node.to_string(), u);
                let total = merged(&live.usage);
                if let Some(rec) = self.step_record(job_id, step_id)
                    && let Some(d) = rec.detail.as_mut()
                {
                    d.usage = total;
                }
            }
            StepdEvent::Done { usage } => {
                if usage.ntasks > 0 || !live.usage.contains_key(node) {
                    live.usage.insert(node.to_string(), usage);
                }
                self.part_over(job_id, step_id, pi, now, fx);
            }
            StepdEvent::LaunchFailed { reason, detail } => {
                // Slurm aborts the whole step when a node cannot launch its tasks.
                let first = !live.launch_failed;
                live.launch_failed = true;
                fx.to_client.push((
                    token,
                    StepEvent::LaunchFailed {
                        node: node.to_string(),
                        reason,
                        detail,
                    },
                ));
                if first {
                    self.terminate_step(job_id, step_id, None, now, fx);
                }
            }
            StepdEvent::PmiFence { seq, kvs } => {
                let nodes = live.layout.nodes.clone();
                if let Some(kvs) = live.pmi.arrive(pi, nodes.len(), seq, kvs) {
                    let done = StepdInput::PmiFenceDone { seq, kvs };
                    self.send_nodes((job_id, step_id), &nodes, &done, fx);
                }
            }
        }
    }

    /// Part `pi` of a live step is over (reported, or given up); the step ends with
    /// its last part.
    fn part_over(&mut self, job_id: u32, step_id: u32, pi: usize, now: i64, fx: &mut Effects) {
        let Some(live) = self.steps.live.get_mut(&(job_id, step_id)) else {
            return;
        };
        let Some(part) = live.parts.get_mut(pi) else {
            return;
        };
        if part.done {
            return;
        }
        part.done = true;
        part.queued.clear();
        live.nodes_left = live.nodes_left.saturating_sub(1);
        if live.nodes_left == 0 {
            self.finish_step(job_id, step_id, now, fx);
        }
    }

    /// Sends `input` to part `pi` of a live step, or holds it while that node's link is
    /// down.
    fn send_part(&mut self, key: (u32, u32), pi: usize, input: StepdInput, fx: &mut Effects) {
        let Some(live) = self.steps.live.get_mut(&key) else {
            return;
        };
        let (Some(node), Some(part)) = (live.layout.nodes.get(pi), live.parts.get_mut(pi)) else {
            return;
        };
        if part.done {
            return;
        }
        if part.detached {
            let n = match &input {
                StepdInput::Stdin { data } => data.len(),
                _ => 0,
            };
            if part.queued_bytes + n > QUEUE_CAP {
                tracing::warn!(
                    node,
                    "input for step {}.{} dropped: its node is away",
                    key.0,
                    key.1
                );
                return;
            }
            part.queued_bytes += n;
            part.queued.push(input);
            return;
        }
        fx.to_agent.push((
            node.clone(),
            ToAgent::StepInput {
                job_id: key.0,
                step_id: key.1,
                input,
            },
        ));
    }

    /// Sends `input` to every part of a live step on a node in `nodes`.
    fn send_nodes(
        &mut self,
        key: (u32, u32),
        nodes: &[String],
        input: &StepdInput,
        fx: &mut Effects,
    ) {
        let idx: Vec<usize> = match self.steps.live.get(&key) {
            Some(l) => l
                .layout
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| nodes.contains(n))
                .map(|(i, _)| i)
                .collect(),
            None => return,
        };
        for pi in idx {
            self.send_part(key, pi, input.clone(), fx);
        }
    }

    fn step_record(&mut self, job_id: u32, step_id: u32) -> Option<&mut StepRecord> {
        let id = step_id.to_string();
        self.jobs
            .get_mut(&job_id)?
            .steps
            .iter_mut()
            .find(|s| s.id == id)
    }

    /// Records the end of a step on all its nodes and frees what it held.
    fn finish_step(&mut self, job_id: u32, step_id: u32, now: i64, fx: &mut Effects) {
        let Some(live) = self.steps.live.remove(&(job_id, step_id)) else {
            return;
        };
        let usage = merged(&live.usage);
        // The step's exit: the highest exit code; a signal when a task was killed.
        let code = live.statuses.iter().map(|s| s.code).max().unwrap_or(0);
        let signal = live
            .statuses
            .iter()
            .map(|s| s.signal)
            .find(|&s| s != 0)
            .unwrap_or(0);
        let exit = if live.launch_failed {
            // No task ran: the step failed as a whole (srun exits 1).
            ExitStatus { code: 1, signal: 0 }
        } else {
            ExitStatus {
                code,
                signal: if code == 0 { signal } else { 0 },
            }
        };
        let state = if live.node_fail {
            JobState::NodeFail
        } else if live.launch_failed {
            JobState::Failed
        } else if live.timed_out {
            JobState::Timeout
        } else if live.cancelled {
            JobState::Cancelled
        } else if code != 0 {
            JobState::Failed
        } else if signal != 0 {
            JobState::Cancelled
        } else {
            JobState::Completed
        };
        if let Some(job) = self.jobs.get_mut(&job_id) {
            if exit.code > job.derived_exit.code
                || (job.derived_exit.code == 0 && job.derived_exit.signal == 0 && exit.signal != 0)
            {
                job.derived_exit = exit;
            }
            let id = step_id.to_string();
            if let Some(rec) = job.steps.iter_mut().find(|s| s.id == id) {
                rec.state = state;
                rec.exit = exit;
                rec.end_time = Some(now);
                rec.max_rss_kib = usage.max_rss_kib;
                rec.cpu_secs = usage.sum_cpu_secs;
                if let Some(d) = rec.detail.as_mut() {
                    d.usage = usage;
                }
            }
            fx.persist.push(Job::clone(job));
        }
        // A heterogeneous step is done when its last part is; its state is the worst
        // of its parts'.
        let token = live.token;
        let worst = |a: JobState, b: JobState| {
            let rank = |s: JobState| match s {
                JobState::Completed => 0,
                JobState::Failed => 1,
                JobState::Cancelled => 2,
                JobState::Timeout => 3,
                _ => 4,
            };
            if rank(b) > rank(a) { b } else { a }
        };
        if self.steps.live.values().any(|l| l.token == token) {
            let e = self.steps.het_done.entry(token).or_insert(state);
            *e = worst(*e, state);
        } else {
            let state = match self.steps.het_done.remove(&token) {
                Some(s) => worst(s, state),
                None => state,
            };
            fx.to_client.push((token, StepEvent::Done { state }));
        }
        self.retry_pending(job_id, now, fx);
        // A job that ended while this step ran was waiting for its final report.
        self.try_complete(job_id, fx);
    }

    /// Input from the srun of stream `token`, for every part of its step.
    pub fn step_input(&mut self, token: u64, input: StepInput, now: i64, fx: &mut Effects) {
        let keys = self.steps.by_token(token);
        if keys.is_empty() {
            if matches!(input, StepInput::Terminate) {
                self.drop_pending(token, fx);
            }
            return;
        }
        for key in keys {
            let live = &self.steps.live[&key];
            let to_nodes = |ranks: &dyn Fn(u32) -> bool| -> Vec<String> {
                live.layout
                    .nodes
                    .iter()
                    .zip(&live.layout.tasks)
                    .filter(|(_, t)| t.iter().any(|&r| ranks(r)))
                    .map(|(n, _)| n.clone())
                    .collect()
            };
            let (nodes, msg) = match &input {
                StepInput::Stdin { data } => (
                    to_nodes(&|_| true),
                    StepdInput::Stdin { data: data.clone() },
                ),
                StepInput::StdinEof => (to_nodes(&|_| true), StepdInput::StdinEof),
                StepInput::Signal(s) => (live.layout.nodes.clone(), StepdInput::Signal(*s)),
                StepInput::WinSize { rows, cols } => (
                    to_nodes(&|r| r == 0),
                    StepdInput::WinSize {
                        rows: *rows,
                        cols: *cols,
                    },
                ),
                StepInput::Terminate => {
                    self.terminate_step(key.0, key.1, None, now, fx);
                    continue;
                }
                // Served by the actor (its record of a relayed stream).
                StepInput::Received(_) => return,
            };
            self.send_nodes(key, &nodes, &msg, fx);
        }
    }

    /// The srun of stream `token` went away: its step ends (a waiting one is dropped).
    pub fn step_stream_closed(&mut self, token: u64, now: i64, fx: &mut Effects) {
        let keys = self.steps.by_token(token);
        if keys.is_empty() {
            self.drop_pending(token, fx);
        }
        for (job_id, step_id) in keys {
            self.terminate_step(job_id, step_id, None, now, fx);
        }
    }

    fn drop_pending(&mut self, token: u64, fx: &mut Effects) {
        if let Some(i) = self.steps.pending.iter().position(|p| p.token == token) {
            self.steps.pending.remove(i);
            fx.to_client.push((
                token,
                StepEvent::Error(SlurmError::Other("Job step creation cancelled".into())),
            ));
        }
    }

    /// Ends a live step: SIGTERM, then SIGKILL after KillWait, with `message` (if any)
    /// in its first task's stderr.
    fn terminate_step(
        &mut self,
        job_id: u32,
        step_id: u32,
        message: Option<String>,
        _now: i64,
        fx: &mut Effects,
    ) {
        let kill_wait = self.kill_wait;
        let Some(live) = self.steps.live.get(&(job_id, step_id)) else {
            return;
        };
        let nodes = live.layout.nodes.clone();
        let input = StepdInput::Terminate { kill_wait, message };
        self.send_nodes((job_id, step_id), &nodes, &input, fx);
    }

    /// `scancel JOB.STEP` (and `--signal`): per pair, `InvalidJobId` when the job or
    /// step is unknown, `AlreadyDone` when the step has ended. In a heterogeneous job
    /// any component's id names the step in every component it spans (its parts share
    /// the step id), as `L+k.S` does.
    pub fn cancel_steps(
        &mut self,
        steps: &[(u32, u32)],
        signal: Option<i32>,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut out = Vec::new();
        for &(job_id, step_id) in steps {
            let r = (|| {
                let job = self.jobs.get(&job_id).ok_or(SlurmError::InvalidJobId)?;
                if !self.manager(c).may(job) {
                    return Err(SlurmError::AccessDenied);
                }
                let members = self.het_members(job_id).unwrap_or_else(|| vec![job_id]);
                let keys: Vec<(u32, u32)> = members
                    .iter()
                    .map(|&m| (m, step_id))
                    .filter(|k| self.steps.live.contains_key(k))
                    .collect();
                if keys.is_empty() {
                    let id = step_id.to_string();
                    let known = members
                        .iter()
                        .filter_map(|m| self.jobs.get(m))
                        .any(|j| j.steps.iter().any(|s| s.id == id));
                    return Err(if known {
                        SlurmError::AlreadyDone
                    } else {
                        SlurmError::InvalidJobId
                    });
                }
                for (job_id, step_id) in keys {
                    let nodes = self.steps.live[&(job_id, step_id)].layout.nodes.clone();
                    match signal.filter(|&s| s != 9) {
                        Some(sig) => {
                            self.send_nodes(
                                (job_id, step_id),
                                &nodes,
                                &StepdInput::Signal(sig),
                                fx,
                            );
                        }
                        None => {
                            let node = nodes.first().cloned().unwrap_or_default();
                            if let Some(l) = self.steps.live.get_mut(&(job_id, step_id)) {
                                l.cancelled = true;
                            }
                            if let Some(d) = self
                                .step_record(job_id, step_id)
                                .and_then(|r| r.detail.as_mut())
                            {
                                d.cancelled_by = Some(c.uid);
                            }
                            let msg = format!(
                                "*** STEP {job_id}.{step_id} ON {node} CANCELLED AT {} ***",
                                crate::common::timefmt::fmt_ts(now)
                            );
                            self.terminate_step(job_id, step_id, Some(msg), now, fx);
                        }
                    }
                }
                Ok(())
            })();
            out.push(JobResult::new(job_id, r.err()));
        }
        out
    }

    /// `scancel L+k.S`: step `S` of component `k` of heterogeneous job `L` (the whole
    /// step, as [`Cluster::cancel_steps`] ends it); `InvalidJobId` when `L+k` names
    /// no component.
    pub fn cancel_het_steps(
        &mut self,
        steps: &[(crate::proto::HetComponent, u32)],
        signal: Option<i32>,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Vec<JobResult> {
        let mut out = Vec::new();
        for &(hc, step_id) in steps {
            let mut r = match self.het_component_id(hc) {
                Some(id) => self.cancel_steps(&[(id, step_id)], signal, c, now, fx),
                None => vec![JobResult::new(hc.leader, Some(SlurmError::InvalidJobId))],
            };
            for x in &mut r {
                x.id = hc.leader;
                x.het = Some(hc.offset);
            }
            out.extend(r);
        }
        out
    }

    /// Signals every live step of a job (scancel --signal without -b).
    pub fn signal_job_steps(&mut self, job_id: u32, signal: i32, fx: &mut Effects) -> usize {
        let ids = self.steps.of_job(job_id);
        for &s in &ids {
            let nodes = self.steps.live[&(job_id, s)].layout.nodes.clone();
            self.send_nodes((job_id, s), &nodes, &StepdInput::Signal(signal), fx);
        }
        ids.len()
    }

    /// Nodes of a `--no-kill` job failed: its live steps that use any of `failed` end
    /// (cancelled, the part on an away node given up); its other steps run on (Slurm
    /// kills only the steps on the failed nodes when kill_on_node_fail is off).
    pub fn end_steps_on(&mut self, job_id: u32, failed: &[String], now: i64, fx: &mut Effects) {
        for s in self.steps.of_job(job_id) {
            let node = match self.steps.live.get_mut(&(job_id, s)) {
                Some(l) => match l.layout.nodes.iter().find(|n| failed.contains(n)) {
                    Some(n) => {
                        l.cancelled = true;
                        n.clone()
                    }
                    None => continue,
                },
                None => continue,
            };
            let msg = format!(
                "*** STEP {job_id}.{s} ON {node} CANCELLED AT {} DUE TO NODE FAILURE ***",
                crate::common::timefmt::fmt_ts(now),
            );
            self.terminate_step(job_id, s, Some(msg), now, fx);
            let away: Vec<usize> = self.steps.live.get(&(job_id, s)).map_or(vec![], |l| {
                l.parts
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| {
                        !p.done && (p.detached || failed.contains(&l.layout.nodes[*i]))
                    })
                    .map(|(i, _)| i)
                    .collect()
            });
            for pi in away {
                self.part_over(job_id, s, pi, now, fx);
            }
        }
    }

    /// The job is ending: its live steps are ended (marked cancelled, or timed out with
    /// `timeout`), and its waiting step requests fail.
    pub fn end_job_steps(&mut self, job_id: u32, timeout: bool, now: i64, fx: &mut Effects) {
        for s in self.steps.of_job(job_id) {
            let node = match self.steps.live.get_mut(&(job_id, s)) {
                Some(l) => {
                    l.cancelled = true;
                    l.timed_out = timeout;
                    l.layout.nodes.first().cloned().unwrap_or_default()
                }
                None => continue,
            };
            let msg = format!(
                "*** STEP {job_id}.{s} ON {node} CANCELLED AT {}{} ***",
                crate::common::timefmt::fmt_ts(now),
                if timeout { " DUE TO TIME LIMIT" } else { "" }
            );
            self.terminate_step(job_id, s, Some(msg), now, fx);
            // A node that is away cannot say when its part ended: the job is over, so
            // it is given up (the node ends what it still runs when it comes back).
            let away: Vec<usize> = self.steps.live.get(&(job_id, s)).map_or(vec![], |l| {
                l.parts
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.detached && !p.done)
                    .map(|(i, _)| i)
                    .collect()
            });
            for pi in away {
                self.part_over(job_id, s, pi, now, fx);
            }
        }
        let mut i = 0;
        while i < self.steps.pending.len() {
            if self.steps.pending[i]
                .parts
                .iter()
                .any(|(j, _)| *j == job_id)
            {
                let p = self.steps.pending.remove(i);
                fx.to_client
                    .push((p.token, StepEvent::Error(SlurmError::AlreadyDone)));
            } else {
                i += 1;
            }
        }
        // Records of steps nobody runs any more (their stepd went with a controller
        // restart) end with the job.
        let live = self.steps.of_job(job_id);
        if let Some(j) = self.jobs.get_mut(&job_id) {
            let mut changed = false;
            for r in j.steps.iter_mut().filter(|r| r.state == JobState::Running) {
                if r.id.parse::<u32>().is_ok_and(|s| !live.contains(&s)) {
                    r.state = JobState::Cancelled;
                    r.end_time = Some(now);
                    changed = true;
                }
            }
            if changed {
                fx.persist.push(Job::clone(j));
            }
        }
    }

    /// Ends steps that ran past their own `--time` (SIGTERM, then SIGKILL after
    /// KillWait, `*** STEP … DUE TO TIME LIMIT ***`); the step is recorded TIMEOUT.
    pub fn tick_steps(&mut self, now: i64, fx: &mut Effects) {
        // Acknowledge what came since the last tick, so stepd can drop it.
        for ((j, s), l) in self.steps.live.iter_mut() {
            for (node, p) in l.layout.nodes.iter().zip(l.parts.iter_mut()) {
                if !p.detached && !p.done && p.delivered > p.acked {
                    p.acked = p.delivered;
                    p.unacked_bytes = 0;
                    fx.to_agent.push((
                        node.clone(),
                        ToAgent::StepInput {
                            job_id: *j,
                            step_id: *s,
                            input: StepdInput::Ack(p.delivered),
                        },
                    ));
                }
            }
        }
        let mut due = Vec::new();
        for ((j, s), l) in &self.steps.live {
            if l.timed_out {
                continue;
            }
            let id = s.to_string();
            let rec = self
                .jobs
                .get(j)
                .and_then(|job| job.steps.iter().find(|r| r.id == id));
            let limit = rec
                .and_then(|r| r.detail.as_ref())
                .and_then(|d| d.time_limit)
                .and_then(|t| t.secs());
            if let (Some(r), Some(limit)) = (rec, limit)
                && now >= r.start_time + limit as i64
            {
                due.push((*j, *s, l.layout.nodes.first().cloned().unwrap_or_default()));
            }
        }
        for (j, s, node) in due {
            if let Some(l) = self.steps.live.get_mut(&(j, s)) {
                l.timed_out = true;
            }
            let msg = format!(
                "*** STEP {j}.{s} ON {node} CANCELLED AT {} DUE TO TIME LIMIT ***",
                crate::common::timefmt::fmt_ts(now)
            );
            self.terminate_step(j, s, Some(msg), now, fx);
        }
    }

    /// A node's agent link went down. Its parts of live steps wait: their stepd keeps
    /// running and keeps its output until a new link re-adopts them
    /// ([`Cluster::steps_registered`]), or the node misses SlurmdTimeout
    /// ([`Cluster::steps_node_failed`]). srun keeps waiting meanwhile.
    pub fn steps_detached_on(&mut self, node: &str) {
        for l in self.steps.live.values_mut() {
            for (n, p) in l.layout.nodes.iter().zip(l.parts.iter_mut()) {
                if n == node && !p.done {
                    p.detached = true;
                }
            }
        }
    }

    /// A node's agent registered, its stepds still running `reported` (job, step).
    /// Parts of live steps it still runs are re-adopted: replayed from the first event
    /// the controller lacks, and given the input held for them. Parts it no longer
    /// runs are over (cancelled). Steps it runs that the controller no longer tracks
    /// are ended.
    pub fn steps_registered(
        &mut self,
        node: &str,
        reported: &[(u32, u32)],
        now: i64,
        fx: &mut Effects,
    ) {
        let kill_wait = self.kill_wait;
        let mut lost = Vec::new();
        for (&(j, s), l) in self.steps.live.iter_mut() {
            let Some(pi) = l.layout.nodes.iter().position(|n| n == node) else {
                continue;
            };
            let p = &mut l.parts[pi];
            let runs = reported.contains(&(j, s));
            if p.done {
                if runs {
                    // Its end came; the acknowledgement may not have.
                    fx.to_agent.push((
                        node.to_string(),
                        ToAgent::StepInput {
                            job_id: j,
                            step_id: s,
                            input: StepdInput::Ack(p.delivered),
                        },
                    ));
                }
                continue;
            }
            if !runs {
                lost.push((j, s, pi));
                continue;
            }
            p.detached = false;
            fx.to_agent.push((
                node.to_string(),
                ToAgent::AdoptStep {
                    job_id: j,
                    step_id: s,
                    from: p.delivered + 1,
                },
            ));
            if p.delivered > 0 {
                p.acked = p.delivered;
                p.unacked_bytes = 0;
                fx.to_agent.push((
                    node.to_string(),
                    ToAgent::StepInput {
                        job_id: j,
                        step_id: s,
                        input: StepdInput::Ack(p.delivered),
                    },
                ));
            }
            p.queued_bytes = 0;
            for input in std::mem::take(&mut p.queued) {
                fx.to_agent.push((
                    node.to_string(),
                    ToAgent::StepInput {
                        job_id: j,
                        step_id: s,
                        input,
                    },
                ));
            }
        }
        for &(j, s) in reported {
            let tracked = self
                .steps
                .live
                .get(&(j, s))
                .is_some_and(|l| l.layout.nodes.iter().any(|n| n == node));
            if !tracked {
                tracing::warn!(node, job_id = j, step_id = s, "ending a step nobody tracks");
                fx.to_agent.push((
                    node.to_string(),
                    ToAgent::EndStep {
                        job_id: j,
                        step_id: s,
                        kill_wait,
                    },
                ));
            }
        }
        for (j, s, pi) in lost {
            tracing::warn!(
                node,
                job_id = j,
                step_id = s,
                "the node no longer runs its part of the step"
            );
            if let Some(l) = self.steps.live.get_mut(&(j, s)) {
                l.cancelled = true;
            }
            self.part_over(j, s, pi, now, fx);
        }
    }

    /// `nodes` missed SlurmdTimeout: their parts of live steps are given up and those
    /// steps end NODE_FAIL (their other nodes are told to end them when the job ends).
    pub fn steps_node_failed(&mut self, nodes: &[String], now: i64, fx: &mut Effects) {
        let mut hit = Vec::new();
        for (&k, l) in self.steps.live.iter_mut() {
            for (pi, (n, p)) in l.layout.nodes.iter().zip(&l.parts).enumerate() {
                if nodes.contains(n) && !p.done {
                    l.node_fail = true;
                    hit.push((k, pi));
                }
            }
        }
        for ((j, s), pi) in hit {
            self.part_over(j, s, pi, now, fx);
        }
    }

    // ------------------------------------------------------------ allocation-only jobs

    /// The owner gives an allocation-only job back: it ends COMPLETED (or FAILED with
    /// `exit`), its steps are ended, its resources freed. A pending one is cancelled.
    /// A heterogeneous allocation is given back whole (its components still active).
    pub fn release_allocation(
        &mut self,
        job_id: u32,
        exit: ExitStatus,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        let job = self.jobs.get(&job_id).ok_or(SlurmError::InvalidJobId)?;
        if job.uid != c.uid && !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        if !job.spec.alloc_only {
            return Err(SlurmError::NotBatch);
        }
        let members = self.het_members(job_id).unwrap_or_else(|| vec![job_id]);
        match job.state {
            JobState::Pending => {
                for m in members {
                    let Some(j) = self.jobs.get_mut(&m) else {
                        continue;
                    };
                    if j.state != JobState::Pending {
                        continue;
                    }
                    j.state = JobState::Cancelled;
                    j.end_time = Some(now);
                    j.cancelled_by = Some(c.uid);
                    fx.persist.push(Job::clone(j));
                }
                fx.schedule = true;
                Ok(())
            }
            JobState::Running if !job.completing => {
                let (state, reason) = if exit.success() {
                    (JobState::Completed, Reason::None)
                } else {
                    (JobState::Failed, Reason::NonZeroExitCode)
                };
                for m in members {
                    let running = self
                        .jobs
                        .get(&m)
                        .is_some_and(|j| j.state == JobState::Running && !j.completing);
                    if running {
                        self.end_job_steps(m, false, now, fx);
                        self.end_alloc_only(m, state, reason.clone(), exit, now, fx);
                    }
                }
                Ok(())
            }
            _ => Err(SlurmError::AlreadyDone),
        }
    }

    /// Ends a running allocation-only job at once (there is no batch step whose end
    /// the node would report) and frees its allocation.
    pub fn end_alloc_only(
        &mut self,
        job_id: u32,
        state: JobState,
        reason: Reason,
        exit: ExitStatus,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(j) = self.jobs.get_mut(&job_id) else {
            return;
        };
        let was_completing = j.completing;
        j.state = state;
        j.reason = reason;
        j.exit = exit;
        j.end_time = Some(now);
        j.completing = false;
        // slurmctld's _job_complete for an allocation (salloc, srun).
        tracing::info!("_job_complete: JobId={job_id} WEXITSTATUS {}", exit.code);
        tracing::info!("_job_complete: JobId={job_id} done");
        let alloc = j.alloc.clone();
        fx.persist.push(Job::clone(j));
        fx.schedule = true;
        if let Some(a) = alloc {
            self.release_ended(job_id, &a, was_completing, true, fx);
        }
    }

    /// At controller start: the allocations srun made for its own steps
    /// ([`crate::model::JobSpec::step_alloc`]) that are still pending or running. Their
    /// srun was connected to the previous controller and did not outlive that
    /// connection, so they end as that srun's death ends them (cancelled, by their
    /// owner); their steps, which nobody tracks any more, are ended on the nodes.
    /// Allocations of salloc are kept: salloc's command may still be running.
    pub fn end_orphaned_step_allocs(&mut self, now: i64, fx: &mut Effects) {
        let orphans: Vec<(u32, Caller)> = self
            .jobs
            .values()
            .filter(|j| j.spec.alloc_only && j.spec.step_alloc && j.is_active() && !j.completing)
            .map(|j| {
                (
                    j.id,
                    Caller {
                        uid: j.uid,
                        gid: j.gid,
                    },
                )
            })
            .collect();
        for (id, owner) in orphans {
            tracing::info!("JobId={id} ended: its srun did not outlive the previous controller");
            self.owner_gone(&[id], owner, now, fx);
        }
    }

    /// The connection that owned these allocations closed without releasing them.
    pub fn owner_gone(&mut self, jobs: &[u32], c: Caller, now: i64, fx: &mut Effects) {
        let all: Vec<u32> = jobs
            .iter()
            .flat_map(|&id| self.het_members(id).unwrap_or_else(|| vec![id]))
            .collect();
        for id in all {
            let active = self
                .jobs
                .get(&id)
                .is_some_and(|j| j.is_active() && !j.completing);
            if !active {
                continue;
            }
            let pending = self.jobs[&id].state == JobState::Pending;
            self.end_job_steps(id, false, now, fx);
            if pending {
                let _ = self.release_allocation(id, ExitStatus::default(), c, now, fx);
            } else {
                self.end_alloc_only(
                    id,
                    JobState::Cancelled,
                    Reason::None,
                    ExitStatus::default(),
                    now,
                    fx,
                );
            }
            if let Some(j) = self.jobs.get_mut(&id) {
                j.cancelled_by = Some(c.uid);
                fx.persist.push(Job::clone(j));
            }
        }
    }
}

/// Usage of all nodes of a step combined.
fn merged(by_node: &HashMap<String, StepUsage>) -> StepUsage {
    let mut names: Vec<&String> = by_node.keys().collect();
    names.sort();
    let mut total = StepUsage::default();
    for n in names {
        total.merge(&by_node[n]);
    }
    total
}

#[cfg(test)]
mod tests;
