//! Nodes: declared or detected resources, what is allocated, and the node state with its
//! flags as sinfo and scontrol print it (cf. src/common/slurm_protocol_defs.c
//! `node_state_string` and `node_state_string_compact`).
//!
//! Invariant: `alloc_cpus <= cpus` and `alloc_mem <= real_memory`; the base state
//! (IDLE/MIXED/ALLOCATED) is derived from the allocation, never stored.

use serde::{Deserialize, Serialize};

/// Administrative / health state of a node, beyond what the allocation implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    /// Usable.
    Up,
    /// Marked DOWN by an admin or because its agent does not answer.
    Down,
    /// Usable once its agent registers (initial state).
    Unknown,
}

/// A compute node as the controller sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// Address the agent is reached at (hostname, IP).
    pub addr: String,
    pub hostname: String,
    pub cpus: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// MiB.
    pub real_memory: u64,
    pub features: Vec<String>,
    pub weight: u32,
    /// Temporary disk space, MiB (`TmpDisk=`, as configured).
    #[serde(default)]
    pub tmp_disk: u64,
    /// Generic resources (GPUs, …), one entry per device.
    #[serde(default)]
    pub gres: Vec<super::gres::GresDevice>,
    /// Units in use per entry of `gres` (same order), maintained with `alloc_cpus`.
    #[serde(default)]
    pub alloc_gres: Vec<u32>,
    pub state: NodeState,
    /// DRAIN flag (set by `scontrol update State=DRAIN`).
    pub drain: bool,
    /// The agent is not answering (`*` suffix).
    pub not_responding: bool,
    /// FAIL flag: the node is expected to fail soon; no new work (`fail`/`failing`).
    #[serde(default)]
    pub fail: bool,
    /// MAINT flag: in a maintenance reservation (`maint`).
    #[serde(default)]
    pub maint: bool,
    /// In an advanced reservation (`resv`); jobs outside it do not start here.
    #[serde(default)]
    pub reserved: bool,
    pub reason: Option<String>,
    /// uid and time (epoch) of whoever set `reason`.
    pub reason_uid: Option<u32>,
    pub reason_time: Option<i64>,
    pub alloc_cpus: u32,
    /// MiB.
    pub alloc_mem: u64,
    /// Number of jobs or steps still cleaning up on the node (COMPLETING flag when > 0).
    pub completing_jobs: u32,
    /// Number of jobs running on the node.
    pub running_jobs: u32,
    pub partitions: Vec<String>,
    pub boot_time: Option<i64>,
    pub agent_start_time: Option<i64>,
    pub last_busy_time: Option<i64>,
    /// Load average over one minute, when the agent reported one.
    pub cpu_load: Option<f64>,
    /// Free memory in MiB, when the agent reported it.
    pub free_mem: Option<u64>,
    pub os: String,
    pub arch: String,
    pub version: String,
    /// Why jobs here are not fully isolated (no usable cgroup hierarchy: process-group
    /// tracking only), as the agent reported it; `None` when they are, or not known.
    #[serde(default)]
    pub isolation_degraded: Option<String>,
    /// What to do about GPUs used by processes of no sluice job (`gpu_foreign`).
    #[serde(default)]
    pub gpu_foreign: GpuForeign,
    /// GPUs running processes of no sluice job, as the agent last sampled them.
    #[serde(default)]
    pub gpu_busy: Vec<BusyGpu>,
    /// The node is drained because of `gpu_busy` (`gpu_foreign = "drain"`); the drain
    /// is lifted when the GPUs are free again.
    #[serde(default)]
    pub gpu_drained: bool,
    /// GPUs found unhealthy (ECC, retired pages, fallen off the bus), as the agent last
    /// sampled them: never allocated while listed.
    #[serde(default)]
    pub gpu_faults: Vec<GpuFault>,
    /// A pending `scontrol reboot` (REBOOT_REQUESTED, then REBOOT_ISSUED).
    #[serde(default)]
    pub reboot: Option<Reboot>,
}

/// A reboot asked for with `scontrol reboot` (cf. slurmctld `_slurm_rpc_reboot_nodes`
/// and `node_mgr.c`): requested until the node has no jobs, then issued (the agent
/// runs RebootProgram) until the node registers again or ResumeTimeout passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reboot {
    /// Epoch seconds the agent was told to run RebootProgram; `None` while requested.
    pub issued: Option<i64>,
    /// `nextstate=DOWN`: the node stays DOWN (with `reason`) once rebooted.
    pub next_down: bool,
    /// `ASAP`: the node was drained for the reboot; the drain is lifted after it.
    pub asap: bool,
    /// `reason=`: kept as the node's reason after a `nextstate=DOWN` reboot.
    #[serde(default)]
    pub reason: Option<String>,
}

/// An unhealthy GPU (issue 24; cf. the checks of NVIDIA's DCGM health watches, which
/// Slurm leaves to a HealthCheckProgram).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFault {
    /// GRES index of the GPU on its node.
    pub index: u32,
    /// Slurm-style text naming the GPU: `gpu 3: 2 uncorrectable ECC errors`,
    /// `gpu 3: 5 retired pages`, `gpu 3: fell off the bus` (`; `-joined when several).
    pub reason: String,
    /// The GPU fell off the bus: the node drains (a reset or reboot is needed).
    pub lost: bool,
}

/// Policy for GPUs used outside sluice (node key `gpu_foreign`; issue 24). Slurm has no
/// such policy: `Ignore` is its behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuForeign {
    /// A busy GPU is not allocated until it is free again (jobs needing it pend with
    /// `Resources (gpu N in use by pid P, user U)`).
    #[default]
    Avoid,
    /// Busy GPUs are allocated as if free (Slurm's behaviour); they are still shown.
    Ignore,
    /// The node drains while any GPU is busy, with the busy GPU as its reason.
    Drain,
}

impl GpuForeign {
    /// The stricter of two policies (drain, then avoid, then ignore).
    pub fn strictest(self, o: GpuForeign) -> GpuForeign {
        let rank = |g: GpuForeign| match g {
            GpuForeign::Ignore => 0,
            GpuForeign::Avoid => 1,
            GpuForeign::Drain => 2,
        };
        if rank(o) > rank(self) { o } else { self }
    }

    /// The configuration word (`avoid`, `ignore`, `drain`).
    pub fn as_str(self) -> &'static str {
        match self {
            GpuForeign::Avoid => "avoid",
            GpuForeign::Ignore => "ignore",
            GpuForeign::Drain => "drain",
        }
    }
}

/// A GPU in use by a process that belongs to no sluice job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyGpu {
    /// GRES index of the GPU on its node.
    pub index: u32,
    /// The lowest such pid on it.
    pub pid: u32,
    /// Its owner's name (its uid in digits when the name is unknown), `None` when the
    /// process could not be looked at (it ended, or another namespace).
    pub user: Option<String>,
}

impl BusyGpu {
    /// `gpu 1 in use by pid 4242, user bob` (without `, user …` when unknown).
    pub fn text(&self) -> String {
        match &self.user {
            Some(u) => format!("gpu {} in use by pid {}, user {u}", self.index, self.pid),
            None => format!("gpu {} in use by pid {}", self.index, self.pid),
        }
    }
}

impl Node {
    /// The node's GRES as `scontrol show node` `Gres=` and sinfo `%G` print them
    /// (`gpu:a100:4(S:0-1)`, `(null)` when none; see
    /// [`super::gres::fmt_node_gres_sockets`]).
    pub fn gres_text(&self) -> String {
        super::gres::fmt_node_gres_sockets(&self.gres, self.cpus, self.sockets)
    }

    /// A node with the given resources, not yet registered.
    pub fn new(name: &str, cpus: u32, real_memory: u64) -> Node {
        Node {
            name: name.to_string(),
            addr: name.to_string(),
            hostname: name.to_string(),
            cpus,
            sockets: 1,
            cores_per_socket: cpus,
            threads_per_core: 1,
            real_memory,
            features: Vec::new(),
            weight: 1,
            tmp_disk: 0,
            gres: Vec::new(),
            alloc_gres: Vec::new(),
            state: NodeState::Unknown,
            drain: false,
            not_responding: false,
            fail: false,
            maint: false,
            reserved: false,
            reason: None,
            reason_uid: None,
            reason_time: None,
            alloc_cpus: 0,
            alloc_mem: 0,
            completing_jobs: 0,
            running_jobs: 0,
            partitions: Vec::new(),
            boot_time: None,
            agent_start_time: None,
            last_busy_time: None,
            cpu_load: None,
            free_mem: None,
            os: String::new(),
            arch: String::new(),
            version: String::new(),
            isolation_degraded: None,
            gpu_foreign: GpuForeign::Avoid,
            gpu_busy: Vec::new(),
            gpu_drained: false,
            gpu_faults: Vec::new(),
            reboot: None,
        }
    }

    /// The reboot flag suffix of busy states: `^` issued, `@` requested, `` none.
    fn reboot_mark(&self) -> &'static str {
        match &self.reboot {
            Some(r) if r.issued.is_some() => "^",
            Some(_) => "@",
            None => "",
        }
    }

    /// The busy GPUs as `scontrol show node` `GpusBusy=` and sinfo `-O gpusbusy` print
    /// them (a sluice extension): `1(pid=4242,user=bob),3(pid=77)`; `(null)` when none.
    pub fn gpus_busy_text(&self) -> String {
        if self.gpu_busy.is_empty() {
            return "(null)".into();
        }
        self.gpu_busy
            .iter()
            .map(|b| match &b.user {
                Some(u) => format!("{}(pid={},user={u})", b.index, b.pid),
                None => format!("{}(pid={})", b.index, b.pid),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// GRES slots (indices into `gres`) the scheduler must not allocate now: the `gpu`
    /// devices found unhealthy, and those busy with foreign processes under
    /// `gpu_foreign = "avoid"`.
    pub fn withheld_gres(&self) -> Vec<usize> {
        (0..self.gres.len())
            .filter(|&i| self.withheld_why(i).is_some())
            .collect()
    }

    /// Why GRES slot `i` is withheld ([`Node::withheld_gres`]): the fault's text, or
    /// the busy GPU's (`gpu 1 in use by pid 4242, user bob`); `None` when it is not.
    pub fn withheld_why(&self, i: usize) -> Option<String> {
        let d = self.gres.get(i).filter(|d| d.name == "gpu")?;
        if let Some(f) = self.gpu_faults.iter().find(|f| f.index == d.index) {
            return Some(f.reason.clone());
        }
        if self.gpu_foreign != GpuForeign::Avoid {
            return None;
        }
        self.gpu_busy
            .iter()
            .find(|b| b.index == d.index)
            .map(BusyGpu::text)
    }

    /// Whether new work may start here.
    pub fn schedulable(&self) -> bool {
        self.state == NodeState::Up
            && !self.drain
            && !self.not_responding
            && !self.fail
            && !self.maint
            && !self.reserved
            && self.reboot.is_none()
    }

    /// GRES units in use on device `i` (0 when untracked).
    pub fn gres_used(&self, i: usize) -> u32 {
        self.alloc_gres.get(i).copied().unwrap_or(0)
    }

    fn base_long(&self) -> &'static str {
        match self.state {
            NodeState::Down => "down",
            NodeState::Unknown => "unknown",
            NodeState::Up => {
                if self.alloc_cpus == 0 {
                    "idle"
                } else if self.alloc_cpus >= self.cpus {
                    "allocated"
                } else {
                    "mixed"
                }
            }
        }
    }

    /// Long lowercase state as sinfo `%T` prints it (`idle`, `mixed`, `drained`,
    /// `draining`, `down*`, `completing`…), with the `*` suffix for a node that does not
    /// respond.
    pub fn state_long(&self) -> String {
        let base = self.base_long();
        let busy = base == "allocated" || base == "mixed" || self.completing_jobs > 0;
        let held = base == "allocated" || base == "mixed";
        // Slurm checks reboot before drain: an idle or down node to be rebooted reads
        // `reboot` (`reboot^` once issued) whatever else is set; a busy one keeps its
        // state with `@`/`^` appended.
        if let Some(r) = &self.reboot
            && !held
            && !(self.maint && !self.drain && base != "down")
        {
            return match (r.issued.is_some(), self.not_responding) {
                (true, _) => "reboot^".into(),
                (false, true) => "reboot*".into(),
                (false, false) => "reboot".into(),
            };
        }
        let s = if self.fail && base != "down" {
            if busy { "failing" } else { "fail" }
        } else if self.maint && !self.drain && base != "down" {
            "maint"
        } else if self.reserved && !self.drain && base == "idle" {
            "reserved"
        } else if self.drain {
            if base == "idle" && self.completing_jobs == 0 || base == "down" {
                if base == "down" { "down" } else { "drained" }
            } else {
                "draining"
            }
        } else if self.completing_jobs > 0 && self.state == NodeState::Up {
            "completing"
        } else {
            base
        };
        let mut s = s.to_string();
        let mark = self.reboot_mark();
        if !mark.is_empty() && (s == "draining" || s == "allocated" || s == "mixed") {
            s.push_str(mark);
        } else if self.not_responding {
            s.push('*');
        }
        s
    }

    /// Compact state as sinfo `%t` prints it (`idle`, `mix`, `alloc`, `drain`, `drng`,
    /// `comp`, `down`, `unk`), with the `*` suffix for a node that does not respond.
    pub fn state_compact(&self) -> String {
        let long = self.state_long();
        let (base, star) = match long.strip_suffix(['*', '@', '^']) {
            Some(b) => (b.to_string(), &long[b.len()..]),
            None => (long.clone(), ""),
        };
        let c = match base.as_str() {
            "allocated" => "alloc",
            "mixed" => "mix",
            "drained" => "drain",
            "draining" => "drng",
            "completing" => "comp",
            "unknown" => "unk",
            "failing" => "failg",
            "reserved" => "resv",
            "reboot" => "boot",
            other => other,
        };
        format!("{c}{star}")
    }

    /// Upper-case state for `scontrol show node` (`IDLE`, `MIXED`, `IDLE+DRAIN`,
    /// `DOWN*`, `MIXED+COMPLETING`…).
    pub fn state_scontrol(&self) -> String {
        let mut s = self.base_long().to_uppercase();
        if self.not_responding {
            s.push('*');
        }
        if self.completing_jobs > 0 {
            s.push_str("+COMPLETING");
        }
        if self.drain {
            s.push_str("+DRAIN");
        }
        if self.fail {
            s.push_str("+FAIL");
        }
        if self.maint {
            s.push_str("+MAINT");
        }
        if self.reserved {
            s.push_str("+RESERVED");
        }
        match &self.reboot {
            Some(r) if r.issued.is_some() => s.push_str("+REBOOT_ISSUED"),
            Some(_) => s.push_str("+REBOOT_REQUESTED"),
            None => {}
        }
        s
    }

    /// `NextState=` of `scontrol show node` while a reboot is pending (`RESUME`, or
    /// `DOWN` for `nextstate=DOWN`); `None` when no reboot is.
    pub fn next_state(&self) -> Option<&'static str> {
        self.reboot
            .as_ref()
            .map(|r| if r.next_down { "DOWN" } else { "RESUME" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(cpus: u32, alloc: u32) -> Node {
        let mut n = Node::new("n1", cpus, 1000);
        n.state = NodeState::Up;
        n.alloc_cpus = alloc;
        n
    }

    #[test]
    fn states_follow_allocation() {
        assert_eq!(up(4, 0).state_long(), "idle");
        assert_eq!(up(4, 2).state_long(), "mixed");
        assert_eq!(up(4, 2).state_compact(), "mix");
        assert_eq!(up(4, 4).state_compact(), "alloc");
        assert_eq!(up(4, 4).state_scontrol(), "ALLOCATED");
    }

    #[test]
    fn busy_and_sick_gpus_are_withheld_by_policy_and_shown() {
        let mut n = up(4, 0);
        n.gres = crate::model::gres::parse_node_gres("gpu:3").unwrap();
        assert_eq!(n.gpus_busy_text(), "(null)");
        n.gpu_busy = vec![
            BusyGpu {
                index: 1,
                pid: 4242,
                user: Some("bob".into()),
            },
            BusyGpu {
                index: 2,
                pid: 77,
                user: None,
            },
        ];
        n.gpu_faults = vec![GpuFault {
            index: 0,
            reason: "gpu 0: 1 retired page".into(),
            lost: false,
        }];
        assert_eq!(n.gpus_busy_text(), "1(pid=4242,user=bob),2(pid=77)");
        assert_eq!(n.withheld_gres(), vec![0, 1, 2]);
        assert_eq!(n.withheld_why(2).as_deref(), Some("gpu 2 in use by pid 77"));
        n.gpu_foreign = GpuForeign::Ignore;
        assert_eq!(
            n.withheld_gres(),
            vec![0],
            "sick GPUs stay out under ignore"
        );
        n.gpu_foreign = GpuForeign::Drain;
        assert_eq!(n.withheld_why(0).as_deref(), Some("gpu 0: 1 retired page"));
        assert_eq!(n.withheld_why(1), None);
    }

    #[test]
    fn drain_states() {
        let mut n = up(4, 0);
        n.drain = true;
        assert_eq!(n.state_long(), "drained");
        assert_eq!(n.state_compact(), "drain");
        assert_eq!(n.state_scontrol(), "IDLE+DRAIN");
        n.alloc_cpus = 1;
        assert_eq!(n.state_long(), "draining");
        assert_eq!(n.state_compact(), "drng");
    }

    #[test]
    fn fail_maint_reserved_states() {
        let mut n = up(4, 0);
        n.fail = true;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("fail".into(), "fail".into())
        );
        assert_eq!(n.state_scontrol(), "IDLE+FAIL");
        n.alloc_cpus = 2;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("failing".into(), "failg".into())
        );
        assert!(!n.schedulable());
        let mut n = up(4, 0);
        n.maint = true;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("maint".into(), "maint".into())
        );
        assert_eq!(n.state_scontrol(), "IDLE+MAINT");
        let mut n = up(4, 0);
        n.reserved = true;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("reserved".into(), "resv".into())
        );
        assert_eq!(n.state_scontrol(), "IDLE+RESERVED");
        assert!(!n.schedulable());
    }

    #[test]
    fn reboot_states_follow_slurm() {
        let mut n = up(4, 0);
        n.reboot = Some(Reboot {
            issued: None,
            next_down: false,
            asap: false,
            reason: None,
        });
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("reboot".into(), "boot".into())
        );
        assert_eq!(n.state_scontrol(), "IDLE+REBOOT_REQUESTED");
        assert!(!n.schedulable());
        n.drain = true;
        assert_eq!(n.state_long(), "reboot", "reboot is checked before drain");
        n.alloc_cpus = 2;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("draining@".into(), "drng@".into())
        );
        n.drain = false;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("mixed@".into(), "mix@".into())
        );
        n.alloc_cpus = 4;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("allocated@".into(), "alloc@".into())
        );
        n.reboot.as_mut().unwrap().issued = Some(5);
        assert_eq!(n.state_compact(), "alloc^");
        n.alloc_cpus = 0;
        assert_eq!(
            (n.state_long(), n.state_compact()),
            ("reboot^".into(), "boot^".into())
        );
        assert_eq!(n.state_scontrol(), "IDLE+REBOOT_ISSUED");
        assert_eq!(n.next_state(), Some("RESUME"));
    }

    #[test]
    fn down_not_responding() {
        let mut n = up(4, 0);
        n.state = NodeState::Down;
        n.not_responding = true;
        assert_eq!(n.state_long(), "down*");
        assert_eq!(n.state_compact(), "down*");
        assert!(!n.schedulable());
    }
}
