//! Node selection in the spirit of select/cons_tres (cf.
//! src/plugins/select/cons_tres/job_test.c, gres_select_filter.c, dist_tasks.c): fit a
//! job's tasks onto nodes by CPUs, memory and GRES per node, honouring -n/-N (min-max),
//! --ntasks-per-node, -c, --mem/--mem-per-cpu/--mem-per-gpu, --gres/--gpus*/
//! --cpus-per-gpu, --gpus-per-socket with --sockets-per-node, --gres-flags,
//! --exclusive, --nodelist/--exclude, --constraint, --contiguous,
//! --distribution block|cyclic|plane, --overcommit and OverSubscribe.
//!
//! Selection works on *counts* ([`Cap`]: what a node can still give during some
//! window), so the same code answers "can it start now" (caps = free resources now) and
//! "can it start at t" (caps = the least free over [t, t+limit) on the backfill
//! timeline). Naming exact CPU ids and GRES devices is [`super::usage`]'s job, except
//! for jobs whose CPUs depend on their GPUs (`--gres-flags=enforce-binding`,
//! `--gpus-per-socket`): for those a cap of "now" carries the free CPU ids
//! ([`Cap::free_ids`]) and the [`Take`] names the CPUs chosen with the GPUs (see
//! [`super::affinity`]). On the timeline the ids of the future are not known, so such
//! a job's planned start assumes the CPUs it needs will be the free ones; it only
//! starts once they really are.
//!
//! Invariant: a [`Placement`] never takes more from a node than its [`Cap`], and the
//! CPU ids a [`Take`] names are free in it.

use super::affinity;
use crate::model::constraint::Constraint;
use crate::model::gres::{GresBinding, GresReq};
use crate::model::{Job, MemReq, Node, OverSubscribe, Partition};

/// Static facts about a node for one pass (index = position in the node list).
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    pub cpus: u32,
    /// Sockets (at least 1); CPU ids are numbered socket by socket.
    pub sockets: u32,
    /// Hardware threads per core (at least 1).
    pub threads_per_core: u32,
    /// Temporary disk, MiB.
    pub tmp_disk: u64,
    /// MiB.
    pub mem: u64,
    pub weight: u32,
    pub features: Vec<String>,
    /// GRES slots: (name, type, units).
    pub gres: Vec<(String, Option<String>, u32)>,
    /// Per GRES slot: the device's index and its close CPUs (`Cores=`).
    pub gres_dev: Vec<(u32, Vec<u32>)>,
    /// Whether new work may start (up, not drained, …).
    pub usable: bool,
    /// The node's topology groups, level 0 (leaf switch or block) first; empty when
    /// no topology is configured or the node is outside it (see
    /// [`crate::model::topology::Topology::node_groups`]).
    pub topo: crate::model::topology::NodeGroups,
}

/// CPUs assumed for a node whose agent has not registered and whose configuration
/// declares none (so that jobs are not refused as impossible for want of a
/// measurement; such a node is not usable until it registers).
pub const UNKNOWN_CPUS: u32 = 4096;

impl NodeInfo {
    /// The scheduler's view of `n`.
    pub fn of(n: &Node) -> NodeInfo {
        let unknown = n.agent_start_time.is_none();
        NodeInfo {
            name: n.name.clone(),
            cpus: if unknown && n.cpus == 0 {
                UNKNOWN_CPUS
            } else {
                n.cpus
            },
            sockets: n.sockets.max(1),
            threads_per_core: n.threads_per_core.max(1),
            tmp_disk: n.tmp_disk,
            mem: if unknown && n.real_memory == 0 {
                u64::MAX / 4
            } else {
                n.real_memory
            },
            weight: n.weight,
            features: n.features.clone(),
            gres: n
                .gres
                .iter()
                .map(|d| (d.name.clone(), d.kind.clone(), d.count))
                .collect(),
            gres_dev: n.gres.iter().map(|d| (d.index, d.cores.clone())).collect(),
            usable: n.schedulable(),
            topo: Vec::new(),
        }
    }
}

/// What a node can give a job over some window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cap {
    /// CPUs nobody holds.
    pub cpus: u32,
    /// CPUs a sharing job may still use (free ones plus those shared below the limit).
    pub share_cpus: u32,
    /// MiB.
    pub mem: u64,
    /// Free units per GRES slot.
    pub gres: Vec<u32>,
    /// No job holds anything here during the window.
    pub idle: bool,
    /// The node is held whole by an exclusive job, or locked to another user.
    pub blocked: bool,
    /// A user other than the asking one has a job here (for ExclusiveUser).
    pub users: UserSet,
    /// The free CPU ids (ascending), when known: filled for a job whose CPUs depend
    /// on its GPUs, from what is free now. `None`: not known, any ids below the
    /// node's CPU count may be the free ones (an empty node, or a future window).
    pub free_ids: Option<Vec<u32>>,
}

/// Which users hold a node, as far as ExclusiveUser cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UserSet {
    #[default]
    Nobody,
    One(u32),
    Several,
    /// Locked to this user by an ExclusiveUser job.
    Locked(u32),
}

impl UserSet {
    /// The set after adding a job of `uid` (`lock`: the job is in an ExclusiveUser
    /// partition).
    pub fn with(self, uid: u32, lock: bool) -> UserSet {
        match self {
            UserSet::Locked(u) => UserSet::Locked(u),
            _ if lock => UserSet::Locked(uid),
            UserSet::Nobody => UserSet::One(uid),
            UserSet::One(u) if u == uid => UserSet::One(u),
            _ => UserSet::Several,
        }
    }

    /// Whether a job of `uid` may join (`lock`: it wants the node for its user only).
    pub fn admits(self, uid: u32, lock: bool) -> bool {
        match self {
            UserSet::Nobody => true,
            UserSet::One(u) => !lock || u == uid,
            UserSet::Several => !lock,
            UserSet::Locked(u) => u == uid,
        }
    }
}

impl Cap {
    /// An empty node.
    pub fn full(n: &NodeInfo) -> Cap {
        Cap {
            cpus: n.cpus,
            share_cpus: n.cpus,
            mem: n.mem,
            gres: n.gres.iter().map(|g| g.2).collect(),
            idle: true,
            blocked: false,
            users: UserSet::Nobody,
            free_ids: None,
        }
    }

    /// The least of two caps (what is free during both windows).
    pub fn min(&self, o: &Cap) -> Cap {
        Cap {
            cpus: self.cpus.min(o.cpus),
            share_cpus: self.share_cpus.min(o.share_cpus),
            mem: self.mem.min(o.mem),
            gres: self
                .gres
                .iter()
                .zip(&o.gres)
                .map(|(a, b)| *a.min(b))
                .collect(),
            idle: self.idle && o.idle,
            blocked: self.blocked || o.blocked,
            users: match (self.users, o.users) {
                (UserSet::Locked(u), _) | (_, UserSet::Locked(u)) => UserSet::Locked(u),
                (UserSet::Nobody, x) | (x, UserSet::Nobody) => x,
                (UserSet::One(a), UserSet::One(b)) if a == b => UserSet::One(a),
                _ => UserSet::Several,
            },
            free_ids: match (&self.free_ids, &o.free_ids) {
                (Some(a), Some(b)) => Some(a.iter().copied().filter(|c| b.contains(c)).collect()),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
        }
    }

    /// The free CPU ids: [`Cap::free_ids`], or every id of `n` when unknown.
    pub fn ids(&self, n: &NodeInfo) -> Vec<u32> {
        match &self.free_ids {
            Some(v) => v.clone(),
            None => (0..n.cpus).collect(),
        }
    }
}

/// How memory is asked for, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mem {
    PerNode(u64),
    /// `--mem=0`: all of each node's memory.
    All,
    PerCpu(u64),
    PerGpu(u64),
}

pub use crate::model::job::{Dist, parse_dist};

/// A job's request resolved against one partition: everything selection needs.
#[derive(Debug, Clone)]
pub struct Req {
    pub uid: u32,
    pub ntasks: u32,
    pub cpt: u32,
    pub nodes_min: u32,
    pub nodes_max: u32,
    pub per_node: Option<u32>,
    pub mem: Mem,
    /// Per-node GRES (`--gres`, `--gpus-per-node`).
    pub gres: Vec<GresReq>,
    /// `--gpus` over the whole job: (type, count).
    pub gpus_total: Option<(Option<String>, u64)>,
    /// `--gpus-per-task`: (type, count).
    pub gpus_per_task: Option<(Option<String>, u32)>,
    /// `--gpus-per-socket`: (type, count) on each of `sockets_per_node` sockets.
    pub gpus_per_socket: Option<(Option<String>, u32)>,
    /// `--sockets-per-node`: nodes with fewer sockets are not candidates.
    pub sockets_per_node: Option<u32>,
    /// `--gres-flags`.
    pub binding: GresBinding,
    pub cpus_per_gpu: Option<u32>,
    pub exclusive: bool,
    /// Share CPUs with up to this many jobs (OverSubscribe).
    pub share: Option<u32>,
    /// ExclusiveUser partition.
    pub user_lock: bool,
    pub overcommit: bool,
    pub required: Vec<usize>,
    pub excluded: Vec<usize>,
    pub constraint: Option<Constraint>,
    pub contiguous: bool,
    pub dist: Dist,
    pub max_cpus_per_node: Option<u32>,
    /// `--threads-per-core`: nodes with fewer threads per core are not candidates;
    /// with [`Req::ntasks_per_core`] it sizes tasks in whole cores
    /// ([`crate::model::job::task_cpus_on`]).
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-core`.
    pub ntasks_per_core: Option<u32>,
    /// `--mincpus`: CPUs the job takes at least on each node.
    pub mincpus: Option<u32>,
    /// `--tmp`, MiB: nodes with less `TmpDisk` are not candidates.
    pub tmp_disk: Option<u64>,
    /// Seconds (`None` = unlimited).
    pub time_limit: Option<u64>,
    /// At most this many leaf switches (or blocks): `--switches` while its wait lasts
    /// (set by the pass, which knows the time; `None` from [`Req::new`]).
    pub max_leaves: Option<u32>,
}

/// Why a request cannot be resolved at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqError {
    /// `--constraint` does not parse.
    BadConstraint,
    /// `-w`/`-x` names an unknown node or is not a hostlist.
    BadNodes,
    /// `--distribution` is not understood.
    BadDistribution,
}

impl Req {
    /// Resolves `job` for `part`. `index` maps node names to positions.
    ///
    /// Errors: [`ReqError`] for a malformed constraint, node list or distribution.
    pub fn new(
        job: &Job,
        part: &Partition,
        index: &dyn Fn(&str) -> Option<usize>,
    ) -> Result<Req, ReqError> {
        let spec = &job.spec;
        let names = |e: &Option<String>| -> Result<Vec<usize>, ReqError> {
            match e {
                None => Ok(Vec::new()),
                Some(e) => crate::model::hostlist::expand(e)
                    .map_err(|_| ReqError::BadNodes)?
                    .iter()
                    .map(|n| index(n).ok_or(ReqError::BadNodes))
                    .collect(),
            }
        };
        let gpu_kind = |g: &GresReq| g.kind.clone();
        let has_gpus = spec.wants_gres();
        let mem = match (spec.mem_per_gpu, job.req_mem) {
            (Some(m), _) => Mem::PerGpu(m),
            (None, MemReq::PerNode(0)) => Mem::All,
            (None, MemReq::PerNode(m)) => Mem::PerNode(m),
            (None, MemReq::PerCpu(m)) => Mem::PerCpu(m),
        };
        let mut gres = spec.gres.clone();
        if let Some(g) = &spec.gpus_per_node {
            gres.push(g.clone());
        }
        // With --gpus-per-socket a node's GPUs are sockets × per-socket; the per-node
        // and per-job GPU counts only bound it (checked when the job was submitted).
        let per_socket = spec.gpus_per_socket.is_some();
        if per_socket {
            gres.retain(|g| g.name != "gpu");
        }
        let share = match part.oversubscribe {
            OverSubscribe::Force(n) => Some(n),
            OverSubscribe::Yes(n) if spec.oversubscribe => Some(n),
            _ => None,
        };
        let exclusive = spec.exclusive || part.oversubscribe == OverSubscribe::Exclusive;
        let nodes_min = job.req_nodes.max(1);
        Ok(Req {
            uid: job.uid,
            ntasks: job.req_tasks.max(1),
            cpt: spec.cpus_per_task.unwrap_or(1).max(1),
            nodes_min,
            nodes_max: spec
                .nodes_max
                .unwrap_or(if spec.nodes_min.is_some() {
                    nodes_min
                } else {
                    u32::MAX
                })
                .max(nodes_min),
            per_node: spec.ntasks_per_node,
            mem,
            gres,
            gpus_total: spec
                .gpus
                .as_ref()
                .filter(|_| !per_socket)
                .map(|g| (gpu_kind(g), g.count)),
            gpus_per_task: spec
                .gpus_per_task
                .as_ref()
                .map(|g| (gpu_kind(g), g.count.min(u64::from(u32::MAX)) as u32)),
            gpus_per_socket: spec
                .gpus_per_socket
                .as_ref()
                .map(|g| (gpu_kind(g), g.count.min(u64::from(u32::MAX)) as u32)),
            sockets_per_node: spec.sockets_per_node,
            binding: spec.gres_flags,
            cpus_per_gpu: spec
                .cpus_per_gpu
                .or(part.def_cpu_per_gpu.filter(|_| has_gpus)),
            exclusive,
            share: if exclusive { None } else { share },
            user_lock: part.exclusive_user || spec.exclusive_user,
            overcommit: spec.overcommit,
            required: names(&spec.nodelist)?,
            excluded: names(&spec.exclude)?,
            constraint: match spec.constraint.as_deref().filter(|c| !c.is_empty()) {
                None => None,
                Some(c) => Some(Constraint::parse(c).map_err(|_| ReqError::BadConstraint)?),
            },
            contiguous: spec.contiguous,
            dist: match spec.distribution.as_deref() {
                None => Dist::Block,
                Some(d) => parse_dist(d).ok_or(ReqError::BadDistribution)?,
            },
            max_cpus_per_node: part.max_cpus_per_node,
            threads_per_core: spec.threads_per_core,
            ntasks_per_core: spec.ntasks_per_core,
            mincpus: spec.mincpus,
            tmp_disk: spec.tmp_disk,
            time_limit: job.time_limit.secs(),
            max_leaves: None,
        })
    }

    /// Whether the job's CPUs depend on its GPUs' or sockets' placement, so that
    /// selection must see free CPU ids ([`Cap::free_ids`]).
    pub fn needs_ids(&self) -> bool {
        self.binding == GresBinding::Enforce || self.gpus_per_socket.is_some()
    }

    /// CPUs one task takes on node `n` (`-c`, widened to whole cores by
    /// `--threads-per-core`/`--ntasks-per-core` where the node has several threads).
    pub fn task_cpus(&self, n: &NodeInfo) -> u32 {
        crate::model::job::task_cpus_on(
            self.cpt,
            self.threads_per_core,
            self.ntasks_per_core,
            n.threads_per_core,
        )
    }

    /// CPUs the job needs in total (a lower bound used for quick rejections).
    pub fn min_cpus(&self) -> u64 {
        if self.overcommit {
            u64::from(self.cpt) * u64::from(self.nodes_min)
        } else {
            u64::from(self.cpt) * u64::from(self.ntasks)
        }
    }
}

/// What a job takes from one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Take {
    pub node: usize,
    pub tasks: u32,
    pub cpus: u32,
    /// MiB.
    pub mem: u64,
    /// (GRES slot, units).
    pub gres: Vec<(usize, u32)>,
    /// The CPU ids chosen with the GPUs (see [`Req::needs_ids`]); empty: any free
    /// ones, chosen when the job starts.
    pub cpu_ids: Vec<u32>,
}

/// Where a job would run: one [`Take`] per node, in task order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub takes: Vec<Take>,
}

/// Why selection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitError {
    /// A node of `--nodelist` is not usable or not in the candidates.
    RequiredMissing,
    /// Not enough resources.
    NoFit,
}

/// GRES units of `(name, kind)` free on a node, and which slots.
fn gres_free(n: &NodeInfo, cap: &Cap, name: &str, kind: Option<&str>) -> u64 {
    n.gres
        .iter()
        .enumerate()
        .filter(|(_, g)| g.0 == name && kind.is_none_or(|k| g.1.as_deref() == Some(k)))
        .map(|(i, _)| u64::from(cap.gres.get(i).copied().unwrap_or(0)))
        .sum()
}

/// Whether GRES slot `i` of `n` serves `name[:kind]`.
fn slot_matches(n: &NodeInfo, i: usize, name: &str, kind: Option<&str>) -> bool {
    let g = &n.gres[i];
    g.0 == name && kind.is_none_or(|k| g.1.as_deref() == Some(k))
}

/// Takes `count` units of `(name, kind)` from the slots of `n` listed in `order`, in
/// that order.
#[allow(clippy::too_many_arguments)]
fn take_gres(
    n: &NodeInfo,
    cap: &Cap,
    used: &mut [u32],
    name: &str,
    kind: Option<&str>,
    mut count: u64,
    out: &mut Vec<(usize, u32)>,
    order: &[usize],
) -> bool {
    for &i in order {
        if count == 0 {
            break;
        }
        if !slot_matches(n, i, name, kind) {
            continue;
        }
        let free = cap.gres[i].saturating_sub(used[i]);
        let t = u64::from(free).min(count) as u32;
        if t > 0 {
            used[i] += t;
            count -= u64::from(t);
            match out.iter_mut().find(|(s, _)| *s == i) {
                Some(e) => e.1 += t,
                None => out.push((i, t)),
            }
        }
    }
    count == 0
}

/// The GRES slots of `n` grouped by the CPUs close to them (same `Cores=`), the
/// groups with the most free CPUs (`free`) first: the order in which an
/// enforce-binding job takes devices, so that its GPUs share few CPU sets with room.
fn affinity_groups(n: &NodeInfo, free: &[u32]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(&[u32], Vec<usize>)> = Vec::new();
    for (i, (_, cores)) in n.gres_dev.iter().enumerate() {
        match groups.iter_mut().find(|(c, _)| *c == cores.as_slice()) {
            Some(g) => g.1.push(i),
            None => groups.push((cores.as_slice(), vec![i])),
        }
    }
    let room = |cores: &[u32]| {
        if cores.is_empty() {
            free.len()
        } else {
            free.iter().filter(|c| cores.contains(c)).count()
        }
    };
    groups.sort_by_key(|(c, slots)| (std::cmp::Reverse(room(c)), slots[0]));
    groups.into_iter().map(|(_, s)| s).collect()
}

/// The order in which to take `count` units of `(name, kind)`: slot order, or with
/// affinity `groups` the first group that can give them all, then the groups in turn.
fn slot_order(
    n: &NodeInfo,
    cap: &Cap,
    used: &[u32],
    (name, kind): (&str, Option<&str>),
    count: u64,
    groups: Option<&[Vec<usize>]>,
) -> Vec<usize> {
    let Some(groups) = groups else {
        return (0..n.gres.len()).collect();
    };
    let free_in = |g: &[usize]| -> u64 {
        g.iter()
            .filter(|&&i| slot_matches(n, i, name, kind))
            .map(|&i| u64::from(cap.gres[i].saturating_sub(used[i])))
            .sum()
    };
    let mut order: Vec<usize> = groups
        .iter()
        .find(|g| free_in(g) >= count)
        .cloned()
        .unwrap_or_default();
    for &i in groups.iter().flatten() {
        if !order.contains(&i) {
            order.push(i);
        }
    }
    order
}

/// `--gpus-per-socket`: takes `per` GPUs of `kind` on each of `sockets` sockets of
/// `n` that has a free CPU (`free`) and enough free GPUs attached to it, the sockets
/// with the most free CPUs first. Returns the sockets chosen, or `None` when fewer
/// qualify.
#[allow(clippy::too_many_arguments)]
fn take_per_socket(
    n: &NodeInfo,
    cap: &Cap,
    free: &[u32],
    used: &mut [u32],
    kind: Option<&str>,
    per: u32,
    sockets: u32,
    out: &mut Vec<(usize, u32)>,
) -> Option<Vec<u32>> {
    let on_socket = |s: u32| -> Vec<usize> {
        (0..n.gres.len())
            .filter(|&i| slot_matches(n, i, "gpu", kind))
            .filter(|&i| affinity::device_sockets(&n.gres_dev[i].1, n.cpus, n.sockets).contains(&s))
            .collect()
    };
    let cpus_on = |s: u32| {
        free.iter()
            .filter(|&&c| c < n.cpus && affinity::socket_of(c, n.cpus, n.sockets) == s)
            .count()
    };
    let mut order: Vec<u32> = (0..n.sockets).filter(|&s| cpus_on(s) > 0).collect();
    order.sort_by_key(|&s| (std::cmp::Reverse(cpus_on(s)), s));
    let mut chosen = Vec::new();
    for s in order {
        if chosen.len() as u32 == sockets {
            break;
        }
        let mut u2 = used.to_vec();
        let mut o2 = out.clone();
        if take_gres(
            n,
            cap,
            &mut u2,
            "gpu",
            kind,
            u64::from(per),
            &mut o2,
            &on_socket(s),
        ) {
            used.copy_from_slice(&u2);
            *out = o2;
            chosen.push(s);
        }
    }
    (chosen.len() as u32 == sockets).then_some(chosen)
}

/// The CPU ids a job whose CPUs depend on its devices takes on `n`: `cpus` of the
/// `free` ids, on the chosen `sockets` (each getting one at least) and, with
/// enforce-binding, among the `Cores=` of its GPUs `gres` (each GPU getting one near
/// it). `None` when they cannot be had.
fn constrained_cpus(
    req: &Req,
    n: &NodeInfo,
    free: &[u32],
    gres: &[(usize, u32)],
    sockets: &[u32],
    cpus: u32,
) -> Option<Vec<u32>> {
    let mut allowed: Option<Vec<u32>> = None;
    let mut groups: Vec<Vec<u32>> = Vec::new();
    if !sockets.is_empty() {
        let per: Vec<Vec<u32>> = sockets
            .iter()
            .map(|&s| affinity::socket_cpus(s, n.cpus, n.sockets))
            .collect();
        allowed = Some(per.iter().flatten().copied().collect());
        groups.extend(per);
    }
    let gpu_cores: Vec<&Vec<u32>> = gres
        .iter()
        .filter(|(s, _)| n.gres[*s].0 == "gpu")
        .map(|(s, _)| &n.gres_dev[*s].1)
        .collect();
    // A GPU without `Cores=` may be bound to any CPU.
    let known = !gpu_cores.is_empty() && gpu_cores.iter().all(|c| !c.is_empty());
    if req.binding == GresBinding::Enforce && known {
        let mut near: Vec<u32> = gpu_cores.iter().flat_map(|c| c.iter().copied()).collect();
        near.sort_unstable();
        near.dedup();
        allowed = Some(match allowed {
            Some(a) => a.into_iter().filter(|c| near.contains(c)).collect(),
            None => near,
        });
        for c in &gpu_cores {
            if !groups.contains(c) {
                groups.push((*c).clone());
            }
        }
    }
    let prefer: Vec<u32> = if req.binding == GresBinding::Disable {
        Vec::new()
    } else {
        gpu_cores.iter().flat_map(|c| c.iter().copied()).collect()
    };
    affinity::pick_covering(free, allowed.as_deref(), &groups, &prefer, cpus)
}

/// The most of the job's tasks that fit on one node (up to `want`), with what they
/// take; `want_gpus` is what is still needed of `--gpus`. `None` if the node cannot
/// host the job at all.
pub fn node_take(
    req: &Req,
    idx: usize,
    n: &NodeInfo,
    cap: &Cap,
    want: u32,
    want_gpus: u64,
) -> Option<Take> {
    if cap.blocked || !cap.users.admits(req.uid, req.user_lock) {
        return None;
    }
    if req.sockets_per_node.is_some_and(|s| n.sockets < s) {
        return None;
    }
    if req.threads_per_core.is_some_and(|t| n.threads_per_core < t)
        || req.tmp_disk.is_some_and(|t| n.tmp_disk < t)
    {
        return None;
    }
    let tcpus = req.task_cpus(n);
    let min_cpus = req.mincpus.unwrap_or(0);
    if !req.exclusive && min_cpus > avail_cpus_of(req, cap) {
        return None;
    }
    if req.exclusive && (!cap.idle || cap.cpus < n.cpus) {
        return None;
    }
    let avail_cpus = match req.share {
        Some(_) => cap.share_cpus,
        None => cap.cpus,
    };
    let avail_cpus = req
        .max_cpus_per_node
        .map_or(avail_cpus, |m| avail_cpus.min(m));
    // Jobs whose CPUs follow their GPUs see the free ids; enforce-binding takes
    // devices group by group of shared affinity.
    let free_ids: Option<Vec<u32>> = req.needs_ids().then(|| cap.ids(n));
    let groups: Option<Vec<Vec<usize>>> = match (&free_ids, req.binding) {
        (Some(f), GresBinding::Enforce) => Some(affinity_groups(n, f)),
        _ => None,
    };
    let groups = groups.as_deref();
    let take = |used: &mut [u32],
                out: &mut Vec<(usize, u32)>,
                name: &str,
                kind: Option<&str>,
                count: u64| {
        let order = slot_order(n, cap, used, (name, kind), count, groups);
        take_gres(n, cap, used, name, kind, count, out, &order)
    };
    // Per-node and per-socket GRES first: they do not depend on the task count.
    let mut used = vec![0u32; n.gres.len()];
    let mut gres = Vec::new();
    for g in &req.gres {
        if !take(&mut used, &mut gres, &g.name, g.kind.as_deref(), g.count) {
            return None;
        }
    }
    let sockets: Vec<u32> = match &req.gpus_per_socket {
        Some((kind, per)) => take_per_socket(
            n,
            cap,
            free_ids.as_deref().unwrap_or(&[]),
            &mut used,
            kind.as_deref(),
            *per,
            req.sockets_per_node.unwrap_or(1).max(1),
            &mut gres,
        )?,
        None => Vec::new(),
    };
    let gpt = req.gpus_per_task.as_ref();
    let free_gpt = gpt.map(|(k, _)| {
        gres_free(n, cap, "gpu", k.as_deref()).saturating_sub(
            gres.iter()
                .filter(|(s, _)| n.gres[*s].0 == "gpu")
                .map(|(_, c)| u64::from(*c))
                .sum(),
        )
    });
    let mut k = want.max(1);
    if let Some(p) = req.per_node {
        k = k.min(p);
    }
    if !req.overcommit {
        k = k.min(avail_cpus / tcpus);
    } else if avail_cpus < tcpus {
        return None;
    }
    if let (Some((_, per)), Some(free)) = (gpt, free_gpt) {
        k = k.min((free / u64::from((*per).max(1))).min(u64::from(u32::MAX)) as u32);
    }
    // The --gpus share this node could give (all that is still wanted, up to free).
    let total_kind = req.gpus_total.as_ref().map(|(k, _)| k.as_deref());
    while k > 0 {
        let mut used2 = used.clone();
        let mut g2 = gres.clone();
        let mut ok = true;
        if let Some((kind, per)) = gpt
            && !take(
                &mut used2,
                &mut g2,
                "gpu",
                kind.as_deref(),
                u64::from(*per) * u64::from(k),
            )
        {
            ok = false;
        }
        if ok && let Some(kind) = total_kind {
            let free = gres_free(n, cap, "gpu", kind)
                .saturating_sub(used2.iter().map(|u| u64::from(*u)).sum());
            let t = free.min(want_gpus);
            if t > 0 {
                take(&mut used2, &mut g2, "gpu", kind, t);
            }
        }
        let gpus_here: u64 = g2
            .iter()
            .filter(|(s, _)| n.gres[*s].0 == "gpu")
            .map(|(_, c)| u64::from(*c))
            .sum();
        let mut cpus = if req.overcommit { tcpus } else { k * tcpus };
        if let Some(cpg) = req.cpus_per_gpu {
            cpus = cpus.max((gpus_here * u64::from(cpg)).min(u64::from(u32::MAX)) as u32);
        }
        // At least one CPU on each socket the GPUs were taken for.
        cpus = cpus.max(sockets.len() as u32).max(min_cpus);
        if req.exclusive {
            cpus = n.cpus;
        }
        let mem = match req.mem {
            Mem::PerNode(m) => m,
            Mem::All => n.mem,
            Mem::PerCpu(m) => m.saturating_mul(u64::from(cpus)),
            Mem::PerGpu(m) => m.saturating_mul(gpus_here.max(1)),
        };
        let cpu_room = if req.exclusive { n.cpus } else { avail_cpus };
        if ok && cpus <= cpu_room && mem <= cap.mem {
            let cpu_ids = match &free_ids {
                Some(free) if !req.exclusive => constrained_cpus(req, n, free, &g2, &sockets, cpus),
                _ => Some(Vec::new()),
            };
            if let Some(cpu_ids) = cpu_ids {
                g2.sort_unstable();
                return Some(Take {
                    node: idx,
                    tasks: k,
                    cpus,
                    mem,
                    gres: g2,
                    cpu_ids,
                });
            }
        }
        if !ok && gpt.is_none() {
            return None;
        }
        k -= 1;
    }
    None
}

/// CPUs a node offers the job before its per-node cap (shared or free ones, within
/// MaxCPUsPerNode).
fn avail_cpus_of(req: &Req, cap: &Cap) -> u32 {
    let a = match req.share {
        Some(_) => cap.share_cpus,
        None => cap.cpus,
    };
    req.max_cpus_per_node.map_or(a, |m| a.min(m))
}

/// Fits `req` on `cands` (node index, cap), already filtered to the partition and to
/// usable nodes, in the order given (callers sort by weight). Honours required and
/// excluded nodes, constraints, contiguity and distribution, and the topology when
/// the nodes carry one (see [`fit_topo`]).
///
/// Errors: [`FitError::RequiredMissing`] when a `--nodelist` node is not among the
/// candidates, else [`FitError::NoFit`].
pub fn fit(req: &Req, nodes: &[NodeInfo], cands: &[(usize, Cap)]) -> Result<Placement, FitError> {
    if cands.iter().all(|(i, _)| nodes[*i].topo.is_empty()) {
        return fit_flat(req, nodes, cands);
    }
    fit_topo(req, nodes, cands)
}

/// Whether a node could give a job anything (for best-fit counts).
fn has_room(c: &Cap) -> bool {
    !c.blocked && c.cpus > 0
}

/// The leaf switches (or blocks) a placement spans; a node outside the topology
/// counts as a leaf of its own.
pub fn leaves_used(nodes: &[NodeInfo], p: &Placement) -> usize {
    let mut leaves: Vec<(bool, u32)> = p
        .takes
        .iter()
        .map(|t| match nodes[t.node].topo.first() {
            Some(&(_, g)) => (true, g),
            None => (false, t.node as u32),
        })
        .collect();
    leaves.sort_unstable();
    leaves.dedup();
    leaves.len()
}

/// Topology-aware selection in the manner of topology/tree and topology/block (cf.
/// cons_tres `_eval_nodes_topo` and `_eval_nodes_block`): levels are tried from the
/// leaves up, so the highest switch level a job uses is as low as it can be; at the
/// first level where some group (switch, or aligned set of blocks) can hold the job,
/// the group with the fewest nodes that still have room is chosen (best fit, which
/// leaves the emptier groups whole for bigger jobs). Inside a group above the leaves,
/// the emptiest leaves are filled first, so the job spans few of them. A job no
/// group can hold is placed as without topology. `req.max_leaves` refuses a
/// placement over more leaves.
fn fit_topo(req: &Req, nodes: &[NodeInfo], cands: &[(usize, Cap)]) -> Result<Placement, FitError> {
    use std::collections::BTreeMap;
    for r in &req.required {
        if !cands.iter().any(|(i, _)| i == r) {
            return Err(FitError::RequiredMissing);
        }
    }
    let within = |p: &Placement| {
        req.max_leaves
            .is_none_or(|m| leaves_used(nodes, p) <= m as usize)
    };
    // (level, group) -> candidate positions, in candidate order.
    let mut groups: BTreeMap<(u16, u32), Vec<usize>> = BTreeMap::new();
    for (pos, (i, _)) in cands.iter().enumerate() {
        for &g in &nodes[*i].topo {
            groups.entry(g).or_default().push(pos);
        }
    }
    let free_of = |members: &[usize]| members.iter().filter(|&&p| has_room(&cands[p].1)).count();
    let mut levels: Vec<u16> = groups.keys().map(|k| k.0).collect();
    levels.dedup();
    for level in levels {
        let mut best: Option<(usize, Placement)> = None;
        for (_, members) in groups.range((level, 0)..=(level, u32::MAX)) {
            let free = free_of(members);
            if (free as u64) < u64::from(req.nodes_min)
                || best.as_ref().is_some_and(|b| b.0 <= free)
            {
                continue;
            }
            let mut order: Vec<usize> = members.clone();
            if level > 0 {
                // Emptiest leaf first; the leaf order is otherwise kept.
                let leaf = |p: usize| nodes[cands[p].0].topo.first().map_or(u32::MAX, |g| g.1);
                let mut leaf_free: BTreeMap<u32, usize> = BTreeMap::new();
                for &p in members {
                    if has_room(&cands[p].1) {
                        *leaf_free.entry(leaf(p)).or_default() += 1;
                    }
                }
                order.sort_by_key(|&p| {
                    std::cmp::Reverse(leaf_free.get(&leaf(p)).copied().unwrap_or(0))
                });
            }
            let pool: Vec<(usize, Cap)> = order.iter().map(|&p| cands[p].clone()).collect();
            if let Ok(p) = fit_flat(req, nodes, &pool)
                && within(&p)
            {
                best = Some((free, p));
            }
        }
        if let Some((_, p)) = best {
            return Ok(p);
        }
    }
    let p = fit_flat(req, nodes, cands)?;
    if within(&p) {
        Ok(p)
    } else {
        Err(FitError::NoFit)
    }
}

fn fit_flat(req: &Req, nodes: &[NodeInfo], cands: &[(usize, Cap)]) -> Result<Placement, FitError> {
    for r in &req.required {
        if !cands.iter().any(|(i, _)| i == r) {
            return Err(FitError::RequiredMissing);
        }
    }
    let base: Vec<&(usize, Cap)> = cands
        .iter()
        .filter(|(i, _)| !req.excluded.contains(i))
        .filter(|(i, _)| {
            req.constraint
                .as_ref()
                .is_none_or(|c| c.node_ok(&nodes[*i].features))
        })
        .collect();
    // A matching OR (`[a|b]`) is tried one alternative at a time.
    if let Some(alts) = req.constraint.as_ref().and_then(|c| c.match_alternatives()) {
        for alt in alts {
            let sub: Vec<&(usize, Cap)> = base
                .iter()
                .copied()
                .filter(|(i, _)| alt.node_ok(&nodes[*i].features))
                .collect();
            if let Ok(p) = fit_pool(req, nodes, &sub) {
                return Ok(p);
            }
        }
        return Err(FitError::NoFit);
    }
    fit_pool(req, nodes, &base)
}

fn fit_pool(req: &Req, nodes: &[NodeInfo], pool: &[&(usize, Cap)]) -> Result<Placement, FitError> {
    // Required nodes first, then nodes with counted features, then the given order.
    let counted: Vec<&str> = req
        .constraint
        .as_ref()
        .map(|c| c.counts().into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let mut order: Vec<&(usize, Cap)> = pool.to_vec();
    order.sort_by_key(|(i, _)| {
        (
            !req.required.contains(i),
            !counted
                .iter()
                .any(|f| nodes[*i].features.iter().any(|x| x == f)),
        )
    });
    if req.contiguous {
        // Runs of consecutive node indices, tried in order.
        let mut idx: Vec<&(usize, Cap)> = pool.to_vec();
        idx.sort_by_key(|(i, _)| *i);
        let mut start = 0;
        while start < idx.len() {
            let mut end = start + 1;
            while end < idx.len() && idx[end].0 == idx[end - 1].0 + 1 {
                end += 1;
            }
            let run = &idx[start..end];
            if req.required.iter().all(|r| run.iter().any(|(i, _)| i == r)) {
                // Slide a window over the run so that the job's nodes are adjacent.
                for s in 0..run.len() {
                    if let Ok(p) = fit_block(req, nodes, &run[s..])
                        && p.takes.windows(2).all(|w| w[1].node == w[0].node + 1)
                    {
                        return Ok(p);
                    }
                }
            }
            start = end;
        }
        return Err(FitError::NoFit);
    }
    fit_block(req, nodes, &order)
}

fn fit_block(req: &Req, nodes: &[NodeInfo], pool: &[&(usize, Cap)]) -> Result<Placement, FitError> {
    let first = fit_greedy(req, nodes, pool);
    if first.is_ok() || req.per_node.is_some() || (req.nodes_max as usize) >= pool.len() {
        return first;
    }
    // With a node cap, filling nodes in order can waste the allowed nodes on small
    // holes: retry with the roomiest nodes first (required nodes stay in front).
    let room = |(i, cap): &(usize, Cap)| {
        node_take(req, *i, &nodes[*i], cap, req.ntasks, 0).map_or(0, |t| t.tasks)
    };
    let mut by_room: Vec<&(usize, Cap)> = pool.to_vec();
    by_room.sort_by_key(|x| (!req.required.contains(&x.0), std::cmp::Reverse(room(x))));
    fit_greedy(req, nodes, &by_room).or(first)
}

fn fit_greedy(
    req: &Req,
    nodes: &[NodeInfo],
    pool: &[&(usize, Cap)],
) -> Result<Placement, FitError> {
    let n_required = req.required.len();
    let mut takes: Vec<Take> = Vec::new();
    let mut gpus_left = req.gpus_total.as_ref().map_or(0, |g| g.1);
    if let Some(per) = req.per_node {
        let need = req.nodes_min.max(req.ntasks.div_ceil(per.max(1)));
        let mut left = req.ntasks;
        for (pos, (i, cap)) in pool.iter().enumerate() {
            if takes.len() as u32 == need {
                break;
            }
            let want = per.min(left.max(1));
            match node_take(req, *i, &nodes[*i], cap, want, gpus_left) {
                Some(t) if t.tasks == want => {
                    left = left.saturating_sub(t.tasks);
                    gpus_left = gpus_left.saturating_sub(gpu_units(nodes, &t));
                    takes.push(t);
                }
                _ if pos < n_required => return Err(FitError::NoFit),
                _ => {}
            }
        }
        if (takes.len() as u32) < need {
            return Err(FitError::NoFit);
        }
    } else {
        let mut left = req.ntasks;
        for (pos, (i, cap)) in pool.iter().enumerate() {
            let placed = takes.len() as u32;
            if left == 0 && placed >= req.nodes_min && gpus_left == 0 {
                break;
            }
            if placed == req.nodes_max {
                break;
            }
            // Keep one task for each further node the job must still get.
            let still = req.nodes_min.saturating_sub(placed + 1);
            let want = left.saturating_sub(still).max(1);
            match node_take(req, *i, &nodes[*i], cap, want, gpus_left) {
                Some(t) if t.tasks > 0 => {
                    left = left.saturating_sub(t.tasks);
                    gpus_left = gpus_left.saturating_sub(gpu_units(nodes, &t));
                    takes.push(t);
                }
                _ if pos < n_required => return Err(FitError::NoFit),
                _ => {}
            }
        }
        if left > 0 || (takes.len() as u32) < req.nodes_min {
            return Err(FitError::NoFit);
        }
    }
    if gpus_left > 0 {
        return Err(FitError::NoFit);
    }
    if let Some(c) = &req.constraint {
        let feats: Vec<&[String]> = takes
            .iter()
            .map(|t| nodes[t.node].features.as_slice())
            .collect();
        if !c.alloc_ok(&feats) {
            return Err(FitError::NoFit);
        }
    }
    let mut p = Placement { takes };
    distribute(req, nodes, pool, &mut p);
    Ok(p)
}

fn gpu_units(nodes: &[NodeInfo], t: &Take) -> u64 {
    t.gres
        .iter()
        .filter(|(s, _)| nodes[t.node].gres[*s].0 == "gpu")
        .map(|(_, c)| u64::from(*c))
        .sum()
}

/// Re-lays tasks over the chosen nodes for `cyclic` and `plane=N` (block is what the
/// fit produced), keeping each node within what it can host.
fn distribute(req: &Req, nodes: &[NodeInfo], pool: &[&(usize, Cap)], p: &mut Placement) {
    let chunk = match req.dist {
        Dist::Block => return,
        Dist::Cyclic => 1,
        Dist::Plane(n) => n,
    };
    // A job whose CPUs were chosen with its GPUs keeps the layout they were chosen for.
    if p.takes.len() < 2
        || req.per_node.is_some()
        || req.exclusive
        || req.overcommit
        || req.needs_ids()
    {
        return;
    }
    let caps: Vec<u32> = p
        .takes
        .iter()
        .map(|t| {
            let cap = &pool
                .iter()
                .find(|(i, _)| *i == t.node)
                .expect("chosen from pool")
                .1;
            node_take(req, t.node, &nodes[t.node], cap, req.ntasks, 0).map_or(t.tasks, |x| x.tasks)
        })
        .collect();
    let mut tasks = vec![0u32; p.takes.len()];
    let mut left = req.ntasks;
    while left > 0 {
        let mut moved = false;
        for (i, t) in tasks.iter_mut().enumerate() {
            if left == 0 {
                break;
            }
            let add = chunk.min(left).min(caps[i].saturating_sub(*t));
            if add > 0 {
                *t += add;
                left -= add;
                moved = true;
            }
        }
        if !moved {
            return; // cannot honour the distribution; keep block
        }
    }
    for (t, k) in p.takes.iter_mut().zip(tasks) {
        if k == 0 {
            continue;
        }
        let cap = &pool.iter().find(|(i, _)| *i == t.node).expect("chosen").1;
        if let Some(x) = node_take(req, t.node, &nodes[t.node], cap, k, 0)
            && x.tasks == k
        {
            // Keep the GRES picked before (per-node requests do not depend on tasks).
            let gres = if req.gpus_per_task.is_some() {
                x.gres
            } else {
                t.gres.clone()
            };
            *t = Take { gres, ..x };
        }
    }
    p.takes.retain(|t| t.tasks > 0);
}
