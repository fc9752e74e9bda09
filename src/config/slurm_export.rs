//! Export of a sluice configuration as Slurm 22.05 files (`sluice config export
//! --slurm DIR`): slurm.conf, gres.conf, topology.conf and cgroup.conf, in the forms
//! slurm.conf(5), gres.conf(5), topology.conf(5) and cgroup.conf(5) describe, with
//! the plugins and paths a Debian Slurm installation uses. Pure: the caller passes the
//! resolved [`Config`] and what the controller reports about each node (its detected
//! CPUs, memory and GPUs), and writes the files.
//!
//! The files are the inverse of [`super::slurm_import`]: importing them again gives the
//! same nodes, partitions, GRES, topology and parameters.

use super::{CgroupPlugin, Config, NodeConf};
use crate::model::gres::GresDevice;
use crate::model::hostlist;
use std::fmt::Write as _;

/// What the controller knows of a node beyond its configuration (detected values);
/// all optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    pub name: String,
    pub cpus: Option<u32>,
    pub sockets: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    /// MiB.
    pub memory: Option<u64>,
    pub gres: Vec<GresDevice>,
}

/// The exported files (name, text) in the order written, and notes on what a Slurm
/// cluster cannot take over.
#[derive(Debug, Clone, Default)]
pub struct Exported {
    pub files: Vec<(String, String)>,
    pub notes: Vec<String>,
}

fn yn(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Seconds as Slurm's `D-HH:MM:SS`.
fn dur(secs: i64) -> String {
    crate::model::time::fmt_hms(secs.max(0) as u64)
}

/// A value, quoted when it holds a space.
fn val(v: &str) -> String {
    if v.contains(char::is_whitespace) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

/// The node's address for `NodeAddr=`: the host of its SSH address, or this machine.
fn node_addr(n: &NodeConf, here: &str) -> String {
    match &n.ssh {
        Some(a) => super::ssh_addr::SshAddr::parse(a)
            .map(|s| s.host)
            .unwrap_or_else(|_| a.clone()),
        None => here.to_string(),
    }
}

/// Writes the Slurm files for `cfg`; `live` adds what the controller detected (may be
/// empty). `here` is this machine's host name (SlurmctldHost, and the address of the
/// nodes the controller serves itself).
pub fn export(cfg: &Config, live: &[NodeFacts], here: &str) -> Exported {
    let mut notes = Vec::new();
    let mut s = String::new();
    let mpi = &cfg.mpi_default;
    let src = cfg
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "personal mode".into());
    let _ = writeln!(
        s,
        "# slurm.conf written by `sluice config export --slurm` from {src}.\n\
         # Slurm 22.05; needs munge, and slurmdbd up before slurmctld first starts (then\n\
         # `sacctmgr load CLUSTER.cfg` brings the accounts; without slurmdbd set\n\
         # AccountingStorageType=accounting_storage/none and drop AccountingStorageEnforce).\n\
         ClusterName={}\n\
         SlurmctldHost={here}\n\
         SlurmUser=slurm\n\
         AuthType=auth/munge\n\
         CredType=cred/munge\n\
         StateSaveLocation=/var/spool/slurmctld\n\
         SlurmdSpoolDir=/var/spool/slurmd\n\
         SlurmctldPidFile=/run/slurmctld.pid\n\
         SlurmdPidFile=/run/slurmd.pid\n\
         SlurmctldLogFile=/var/log/slurm/slurmctld.log\n\
         SlurmdLogFile=/var/log/slurm/slurmd.log\n\
         MailProg=/bin/true\n\
         MpiDefault={mpi}\n\
         SwitchType=switch/none\n\
         ReturnToService=2\n\
         ProctrackType=proctrack/cgroup\n\
         TaskPlugin=task/cgroup,task/affinity\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\n\
         JobAcctGatherType=jobacct_gather/cgroup\n\
         AccountingStorageType=accounting_storage/slurmdbd",
        val(&cfg.cluster_name)
    );
    let sc = &cfg.sched;
    let policy = match sc.policy {
        super::sched::Policy::Fifo => "sched/builtin",
        super::sched::Policy::Easy => {
            notes.push(
                "scheduler policy easy: exported as sched/backfill, which plans every job it tests (conservative)".into(),
            );
            "sched/backfill"
        }
        super::sched::Policy::EasySjf => {
            notes.push(
                "scheduler policy easy-sjf: exported as sched/backfill, which has no shortest-first backfill order".into(),
            );
            "sched/backfill"
        }
        super::sched::Policy::Conservative => "sched/backfill",
    };
    let mut params = vec![
        format!("bf_window={}", (sc.bf_window / 60).max(1)),
        format!("bf_resolution={}", sc.bf_resolution),
        format!("bf_max_job_test={}", sc.bf_max_job_test),
        format!("bf_interval={}", sc.bf_interval),
        format!("max_switch_wait={}", sc.max_switch_wait),
    ];
    if sc.bf_max_job_user > 0 {
        params.push(format!("bf_max_job_user={}", sc.bf_max_job_user));
    }
    if sc.bf_continue {
        params.push("bf_continue".into());
    }
    if cfg.kill_invalid_depend {
        params.push("kill_invalid_depend".into());
    }
    let _ = writeln!(
        s,
        "# scheduling\nSchedulerType={policy}\nSchedulerParameters={}",
        params.join(",")
    );
    let pr = &sc.priority;
    let _ = writeln!(
        s,
        "# priority\nPriorityType=priority/multifactor\n\
         PriorityWeightAge={}\nPriorityWeightAssoc={}\nPriorityWeightFairshare={}\n\
         PriorityWeightJobSize={}\nPriorityWeightPartition={}\nPriorityWeightQOS={}\n\
         PriorityMaxAge={}\nPriorityDecayHalfLife={}\nPriorityFavorSmall={}\n\
         PriorityUsageResetPeriod={}",
        pr.weight_age,
        pr.weight_assoc,
        pr.weight_fairshare,
        pr.weight_jobsize,
        pr.weight_partition,
        pr.weight_qos,
        dur(pr.max_age),
        dur(pr.decay_half_life),
        if pr.favor_small { "YES" } else { "NO" },
        pr.usage_reset.name()
    );
    if !pr.weight_tres.is_empty() {
        let w: Vec<String> = pr
            .weight_tres
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "PriorityWeightTRES={}", w.join(","));
    }
    let mut flags = Vec::new();
    if pr.small_relative_to_time {
        flags.push("SMALL_RELATIVE_TO_TIME");
    }
    if pr.fairshare_algorithm == crate::config::sched::Algorithm::Classic {
        flags.push("NO_FAIR_TREE");
    }
    if pr.max_tres {
        flags.push("MAX_TRES");
    }
    if !flags.is_empty() {
        let _ = writeln!(s, "PriorityFlags={}", flags.join(","));
    }
    let pc = &sc.preempt;
    if pc.preempt_type != Default::default() {
        let _ = writeln!(
            s,
            "PreemptType={}\nPreemptMode={}",
            pc.preempt_type.name(),
            pc.mode.as_str()
        );
        if pc.exempt_time > 0 {
            let _ = writeln!(s, "PreemptExemptTime={}", dur(pc.exempt_time as i64));
        }
    }
    let otl = if cfg.over_time_limit == super::OVER_TIME_UNLIMITED {
        "UNLIMITED".to_string()
    } else {
        cfg.over_time_limit.to_string()
    };
    let _ = writeln!(
        s,
        "# limits and timers\nMinJobAge={}\nKillWait={}\nMaxArraySize={}\nSlurmdTimeout={}\n\
         OverTimeLimit={otl}\nEnforcePartLimits={}",
        cfg.min_job_age,
        cfg.kill_wait,
        cfg.max_array_size,
        cfg.slurmd_timeout,
        if cfg.enforce_part_limits { "ALL" } else { "NO" },
    );
    if let Some(p) = &cfg.reboot_program {
        let _ = writeln!(s, "RebootProgram={p}\nResumeTimeout={}", cfg.resume_timeout);
    }
    match cfg.accounting_storage_enforce {
        Some(e) => {
            let mut w = Vec::new();
            for (on, name) in [
                (e.associations, "associations"),
                (e.limits, "limits"),
                (e.qos, "qos"),
                (e.safe, "safe"),
            ] {
                if on {
                    w.push(name);
                }
            }
            if !w.is_empty() {
                let _ = writeln!(s, "AccountingStorageEnforce={}", w.join(","));
            }
        }
        None => notes.push(
            "accounting_storage_enforce is automatic in sluice (limits apply once accounts exist); Slurm enforces nothing unless AccountingStorageEnforce is set, so none is written".into(),
        ),
    }
    if !cfg.licenses.is_empty() {
        let l: Vec<String> = cfg
            .licenses
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        let _ = writeln!(s, "Licenses={}", l.join(","));
    }
    let sp = &cfg.scripts;
    let mut scripts = String::new();
    for (k, v) in [
        ("Prolog", &sp.prolog),
        ("Epilog", &sp.epilog),
        ("TaskProlog", &sp.task_prolog),
        ("TaskEpilog", &sp.task_epilog),
        ("HealthCheckProgram", &sp.health_check_program),
    ] {
        if let Some(p) = v {
            let _ = writeln!(scripts, "{k}={}", val(&p.display().to_string()));
        }
    }
    let mut pf = Vec::new();
    if sp.prolog_alloc {
        pf.push("Alloc");
    }
    if sp.force_requeue_on_fail {
        pf.push("ForceRequeueOnFail");
    }
    if !pf.is_empty() {
        let _ = writeln!(scripts, "PrologFlags={}", pf.join(","));
    }
    if let Some(t) = sp.prolog_epilog_timeout {
        let _ = writeln!(scripts, "PrologEpilogTimeout={t}");
    }
    if sp.health_check_program.is_some() {
        let st = match sp.health_check_node_state {
            super::scripts::HealthNodeState::Any => "ANY",
            super::scripts::HealthNodeState::Idle => "IDLE",
            super::scripts::HealthNodeState::Alloc => "ALLOC",
        };
        let _ = writeln!(
            scripts,
            "HealthCheckInterval={}\nHealthCheckNodeState={st}",
            sp.health_check_interval
        );
    }
    if !scripts.is_empty() {
        let _ = write!(s, "# node scripts\n{scripts}");
    }
    let topo = &sc.topology;
    if !topo.switches.is_empty() {
        let _ = writeln!(s, "TopologyPlugin=topology/tree");
    }
    // Nodes: the configuration, completed by what the controller detected.
    let mut gres_names: Vec<String> = Vec::new();
    let mut gres_conf =
        String::from("# gres.conf written by `sluice config export --slurm`.\nAutoDetect=off\n");
    let mut node_lines = String::from("# nodes\n");
    let local_count = cfg.nodes.iter().filter(|n| !n.is_remote()).count();
    if local_count > 1 {
        notes.push(format!(
            "{local_count} nodes are served on this machine; each needs its own slurmd (Slurm's multiple-slurmd build, with a Port= per node)"
        ));
    }
    for n in &cfg.nodes {
        let f = live.iter().find(|f| f.name == n.name);
        let cpus = n.cpus.or(f.and_then(|f| f.cpus));
        let sockets = n.sockets.or(f.and_then(|f| f.sockets));
        let cores = n.cores_per_socket.or(f.and_then(|f| f.cores_per_socket));
        let threads = n.threads_per_core.or(f.and_then(|f| f.threads_per_core));
        let mem = n.memory.or(f.and_then(|f| f.memory));
        let mut l = format!("NodeName={} NodeAddr={}", n.name, node_addr(n, here));
        match cpus {
            Some(c) => {
                let _ = write!(l, " CPUs={c}");
            }
            None => notes.push(format!(
                "node {}: CPUs unknown (not configured, and no controller reported them); Slurm will assume 1",
                n.name
            )),
        }
        if let (Some(so), Some(co), Some(th)) = (sockets, cores, threads)
            && cpus.is_none_or(|c| Some(c) == so.checked_mul(co).and_then(|x| x.checked_mul(th)))
        {
            let _ = write!(l, " Sockets={so} CoresPerSocket={co} ThreadsPerCore={th}");
        }
        match mem {
            Some(m) => {
                let _ = write!(l, " RealMemory={m}");
            }
            None => notes.push(format!(
                "node {}: memory unknown; Slurm will assume 1 MB",
                n.name
            )),
        }
        if let Some(t) = n.tmp_disk {
            let _ = write!(l, " TmpDisk={t}");
        }
        if let Some(w) = n.weight {
            let _ = write!(l, " Weight={w}");
        }
        if !n.features.is_empty() {
            let _ = write!(l, " Feature={}", n.features.join(","));
        }
        let devs = match n.gres_devices() {
            Ok(d) if !d.is_empty() => d,
            _ => f.map(|f| f.gres.clone()).unwrap_or_default(),
        };
        if !devs.is_empty() {
            let _ = write!(l, " Gres={}", crate::model::gres::fmt_node_gres(&devs));
            for d in &devs {
                if !gres_names.contains(&d.name) {
                    gres_names.push(d.name.clone());
                }
            }
            gres_conf.push_str(&gres_lines(&n.name, &devs));
        }
        if n.is_remote() && n.ssh.as_deref().is_some_and(|a| a.contains(':')) {
            notes.push(format!(
                "node {}: its SSH port is not carried (slurmd listens on SlurmdPort)",
                n.name
            ));
        }
        let _ = writeln!(node_lines, "{l} State=UNKNOWN");
    }
    if !gres_names.is_empty() {
        let _ = writeln!(s, "GresTypes={}", gres_names.join(","));
    }
    s.push_str(&node_lines);
    s.push_str("# partitions\n");
    for p in &cfg.partitions {
        s.push_str(&partition_line(p, cfg));
    }
    let mut files = vec![("slurm.conf".to_string(), s)];
    if !gres_names.is_empty() {
        files.push(("gres.conf".into(), gres_conf));
    }
    if !topo.switches.is_empty() {
        let mut t = String::from("# topology.conf written by `sluice config export --slurm`.\n");
        for sw in &topo.switches {
            let _ = write!(t, "SwitchName={}", sw.name);
            if !sw.nodes.is_empty() {
                let _ = write!(t, " Nodes={}", hostlist::compress(&sw.nodes));
            }
            if !sw.switches.is_empty() {
                let _ = write!(t, " Switches={}", hostlist::compress(&sw.switches));
            }
            if sw.link_speed != 1 {
                let _ = write!(t, " LinkSpeed={}", sw.link_speed);
            }
            t.push('\n');
        }
        files.push(("topology.conf".into(), t));
    }
    if !topo.blocks.is_empty() {
        notes.push(
            "topology blocks: not exported (topology/block needs Slurm 23.11; 22.05 has only topology/tree)".into(),
        );
    }
    files.push(("cgroup.conf".into(), cgroup_conf(&cfg.cgroup, &mut notes)));
    Exported { files, notes }
}

/// gres.conf lines of one node: one per device with a file, one `Count=` line per run
/// of devices without.
fn gres_lines(node: &str, devs: &[GresDevice]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < devs.len() {
        let d = &devs[i];
        let mut l = format!("NodeName={node} Name={}", d.name);
        if let Some(t) = &d.kind {
            let _ = write!(l, " Type={t}");
        }
        if d.file.is_some() {
            if d.more_files.is_empty() {
                let _ = write!(l, " File={}", d.file.as_deref().unwrap_or(""));
            } else {
                let files: Vec<&str> = d.files().collect();
                let _ = write!(l, " MultipleFiles={}", files.join(","));
            }
            if let Some(u) = &d.unique_id {
                let _ = write!(l, " UniqueId={u}");
            }
            if d.count > 1 {
                let _ = write!(l, " Count={}", d.count);
            }
            i += 1;
        } else {
            // A run of file-less devices of one name and type.
            let mut count = 0u64;
            let mut j = i;
            while j < devs.len()
                && devs[j].file.is_none()
                && devs[j].name == d.name
                && devs[j].kind == d.kind
                && devs[j].cores == d.cores
            {
                count += u64::from(devs[j].count);
                j += 1;
            }
            let _ = write!(l, " Count={count}");
            i = j;
        }
        if !d.cores.is_empty() {
            let _ = write!(l, " Cores={}", hostlist::id_ranges(&d.cores));
        }
        if !d.links.is_empty() {
            let links: Vec<String> = d.links.iter().map(i32::to_string).collect();
            let _ = write!(l, " Links={}", links.join(","));
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

fn partition_line(p: &crate::model::Partition, cfg: &Config) -> String {
    let all: Vec<String> = cfg.nodes.iter().map(|n| n.name.clone()).collect();
    let nodes = if p.nodes == all && all.len() > 1 {
        "ALL".to_string()
    } else {
        hostlist::compress(&p.nodes)
    };
    let mut l = format!("PartitionName={} Nodes={nodes}", p.name);
    if p.default {
        l.push_str(" Default=YES");
    }
    let _ = write!(l, " MaxTime={}", p.max_time.to_hms());
    if let Some(t) = p.default_time {
        let _ = write!(l, " DefaultTime={}", t.to_hms());
    }
    if p.min_nodes > 0 {
        let _ = write!(l, " MinNodes={}", p.min_nodes);
    }
    if let Some(m) = p.max_nodes {
        let _ = write!(l, " MaxNodes={m}");
    }
    let _ = write!(l, " State={}", p.state.as_str());
    if p.priority_tier != 1 {
        let _ = write!(l, " PriorityTier={}", p.priority_tier);
    }
    if p.priority_job_factor != 1 {
        let _ = write!(l, " PriorityJobFactor={}", p.priority_job_factor);
    }
    let opt = |l: &mut String, k: &str, v: Option<String>| {
        if let Some(v) = v {
            let _ = write!(l, " {k}={v}");
        }
    };
    opt(
        &mut l,
        "DefMemPerCPU",
        p.def_mem_per_cpu.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "DefMemPerNode",
        p.def_mem_per_node.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "MaxMemPerNode",
        p.max_mem_per_node.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "DefCpuPerGPU",
        p.def_cpu_per_gpu.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "DefMemPerGPU",
        p.def_mem_per_gpu.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "MaxCPUsPerNode",
        p.max_cpus_per_node.map(|v| v.to_string()),
    );
    opt(
        &mut l,
        "AllowAccounts",
        p.allow_accounts.as_ref().map(|v| v.join(",")),
    );
    opt(
        &mut l,
        "AllowGroups",
        p.allow_groups.as_ref().map(|v| v.join(",")),
    );
    opt(
        &mut l,
        "AllowQos",
        p.allow_qos.as_ref().map(|v| v.join(",")),
    );
    if p.exclusive_user {
        l.push_str(" ExclusiveUser=YES");
    }
    if p.hidden {
        l.push_str(" Hidden=YES");
    }
    if p.oversubscribe != crate::model::OverSubscribe::No {
        let _ = write!(l, " OverSubscribe={}", p.oversubscribe.as_text());
    }
    opt(
        &mut l,
        "PreemptMode",
        p.preempt_mode.map(|m| m.as_str().to_string()),
    );
    if p.grace_time > 0 {
        let _ = write!(l, " GraceTime={}", p.grace_time);
    }
    opt(&mut l, "QOS", p.qos.clone());
    opt(
        &mut l,
        "OverTimeLimit",
        p.over_time_limit.map(|v| {
            if v == super::OVER_TIME_UNLIMITED {
                "UNLIMITED".to_string()
            } else {
                v.to_string()
            }
        }),
    );
    opt(
        &mut l,
        "TRESBillingWeights",
        p.billing_weights.as_ref().map(|w| w.text.clone()),
    );
    l.push('\n');
    l
}

fn cgroup_conf(c: &super::CgroupConf, notes: &mut Vec<String>) -> String {
    let mut s = String::from("# cgroup.conf written by `sluice config export --slurm`.\n");
    let plugin = match c.plugin {
        CgroupPlugin::Autodetect => "autodetect",
        CgroupPlugin::V1 => "cgroup/v1",
        CgroupPlugin::V2 => "cgroup/v2",
        CgroupPlugin::Disabled => {
            notes.push(
                "cgroup plugin disabled: Slurm's proctrack/cgroup and task/cgroup need cgroups; exported as autodetect".into(),
            );
            "autodetect"
        }
    };
    let _ = writeln!(s, "CgroupPlugin={plugin}");
    if let Some(m) = &c.mountpoint {
        let _ = writeln!(s, "CgroupMountpoint={}", m.display());
    }
    let _ = writeln!(
        s,
        "ConstrainCores={}\nConstrainRAMSpace={}\nConstrainSwapSpace={}\nConstrainDevices={}\n\
         AllowedRAMSpace={}\nAllowedSwapSpace={}\nMaxRAMPercent={}\nMaxSwapPercent={}\nMinRAMSpace={}",
        yn(c.constrain_cores),
        yn(c.constrain_ram_space),
        yn(c.constrain_swap_space),
        yn(c.constrain_devices),
        c.allowed_ram_space,
        c.allowed_swap_space,
        c.max_ram_percent,
        c.max_swap_percent,
        c.min_ram_space
    );
    if c.root != "sluice" && c.root != "slurm" {
        notes.push(format!(
            "cgroup root '{}': Slurm always uses its own 'slurm' cgroup",
            c.root
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::slurm_import::{Input, Inputs, import};
    use super::*;

    const SLURM: &str = include_str!("../../tests/data/slurm/slurm.conf");
    const GRES: &str = include_str!("../../tests/data/slurm/gres.conf");
    const TOPO: &str = include_str!("../../tests/data/slurm/topology.conf");
    const CGROUP: &str = include_str!("../../tests/data/slurm/cgroup.conf");

    fn load(files: [Option<&str>; 4]) -> Config {
        let [s, g, t, c] = files;
        let r = import(&Inputs {
            slurm_conf: Input {
                name: "slurm.conf",
                text: s.unwrap_or(""),
            },
            gres_conf: g.map(|text| Input {
                name: "gres.conf",
                text,
            }),
            topology_conf: t.map(|text| Input {
                name: "topology.conf",
                text,
            }),
            cgroup_conf: c.map(|text| Input {
                name: "cgroup.conf",
                text,
            }),
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        Config::from_toml(&r.toml, &dir.path().join("sluice.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{}", r.toml))
    }

    /// The node facts a comparison needs (paths and defaults the loader fills aside).
    fn nodes(c: &Config) -> Vec<String> {
        c.nodes
            .iter()
            .map(|n| {
                format!(
                    "{} cpus={:?} mem={:?} s={:?} c={:?} t={:?} f={:?} w={:?} tmp={:?} ssh={:?} gres={:?} auto={:?}",
                    n.name,
                    n.cpus,
                    n.memory,
                    n.sockets,
                    n.cores_per_socket,
                    n.threads_per_core,
                    n.features,
                    n.weight,
                    n.tmp_disk,
                    n.ssh,
                    n.gres_devices().unwrap(),
                    n.gres_autodetect
                )
            })
            .collect()
    }

    /// easy-sjf (merged beside the exporter) exports as sched/backfill, with a note.
    #[test]
    fn easy_sjf_exports_as_backfill_with_a_note() {
        let mut a = load([Some(SLURM), None, None, None]);
        a.sched.policy = super::super::sched::Policy::EasySjf;
        let ex = export(&a, &[], "here");
        let conf = &ex.files.iter().find(|(f, _)| f == "slurm.conf").unwrap().1;
        assert!(conf.contains("SchedulerType=sched/backfill\n"), "{conf}");
        assert!(
            ex.notes.iter().any(|n| n.contains("easy-sjf")),
            "{:?}",
            ex.notes
        );
    }

    #[test]
    fn import_export_import_gives_the_same_cluster() {
        let a = load([Some(SLURM), Some(GRES), Some(TOPO), Some(CGROUP)]);
        let here = super::super::short_hostname();
        let ex = export(&a, &[], &here);
        let file = |n: &str| {
            ex.files
                .iter()
                .find(|(f, _)| f == n)
                .map(|(_, t)| t.as_str())
        };
        let b = load([
            file("slurm.conf"),
            file("gres.conf"),
            file("topology.conf"),
            file("cgroup.conf"),
        ]);
        assert_eq!(nodes(&a), nodes(&b));
        assert_eq!(a.nodes.len(), 3);
        assert_eq!(a.partitions, b.partitions);
        assert_eq!(a.sched, b.sched);
        assert_eq!(a.cgroup, b.cgroup);
        assert_eq!(a.scripts, b.scripts);
        assert_eq!(a.licenses, b.licenses);
        assert_eq!(a.cluster_name, b.cluster_name);
        assert_eq!(
            (a.enforce_part_limits, a.accounting_storage_enforce),
            (b.enforce_part_limits, b.accounting_storage_enforce)
        );
        assert_eq!(
            (
                a.min_job_age,
                a.kill_wait,
                a.max_array_size,
                a.slurmd_timeout
            ),
            (
                b.min_job_age,
                b.kill_wait,
                b.max_array_size,
                b.slurmd_timeout
            )
        );
        assert_eq!(a.over_time_limit, b.over_time_limit);
        // What the fixture sets is really there.
        assert_eq!(a.sched.topology.switches.len(), 3);
        assert_eq!(
            a.nodes[0].gres_devices().unwrap()[2].cores,
            (16..32).collect::<Vec<_>>()
        );
        assert!(a.cgroup.constrain_devices);
        assert_eq!(a.partitions[2].state, crate::model::PartitionState::Down);
    }

    #[test]
    fn detected_values_fill_what_the_config_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::from_toml(
            "[[nodes]]\nname = \"n1\"\n[[partitions]]\nname = \"p\"\nnodes = \"n1\"\n",
            &dir.path().join("s.toml"),
        )
        .unwrap();
        let bare = export(&c, &[], "head");
        assert!(
            bare.notes
                .iter()
                .any(|n| n.contains("node n1: CPUs unknown"))
        );
        let facts = NodeFacts {
            name: "n1".into(),
            cpus: Some(8),
            sockets: Some(2),
            cores_per_socket: Some(4),
            threads_per_core: Some(1),
            memory: Some(1000),
            gres: crate::model::gres::parse_node_gres("gpu:2").unwrap(),
        };
        let ex = export(&c, &[facts], "head");
        let conf = &ex.files[0].1;
        assert!(
            conf.contains("NodeName=n1 NodeAddr=head CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:2 State=UNKNOWN"),
            "{conf}"
        );
        assert!(conf.contains("GresTypes=gpu\n"), "{conf}");
        let gres = &ex.files.iter().find(|(n, _)| n == "gres.conf").unwrap().1;
        assert!(gres.contains("NodeName=n1 Name=gpu Count=2\n"), "{gres}");
    }
}
