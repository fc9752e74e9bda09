//! Shared builders for the controller's reactor tests: a one-node cluster, specs,
//! submission, and node-side events.

use super::state::{Caller, Cluster, Effects};
use crate::config::Config;
use crate::model::{ExitStatus, JobSpec, NodeState};
use crate::proto::{EndKind, FromAgent, ToAgent};
use std::path::Path;

pub const ALICE: Caller = Caller {
    uid: 2001,
    gid: 2001,
};
pub const BOB: Caller = Caller {
    uid: 2002,
    gid: 2002,
};

pub fn names(uid: u32, gid: u32) -> (String, String) {
    (format!("u{uid}"), format!("g{gid}"))
}

/// One node `n1` with `cpus` CPUs and 4000 MiB in partition `debug` (MaxTime 1 h),
/// plus `extra` TOML.
pub fn cluster_with(cpus: u32, extra: &str) -> Cluster {
    let cfg = Config::from_toml(
        &format!(
            r#"{extra}
[[nodes]]
name = "n1"
cpus = {cpus}
memory = 4000
[[partitions]]
name = "debug"
nodes = "n1"
default = true
max_time = "1:00:00"
"#
        ),
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    c
}

pub fn spec(name: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        ..JobSpec::default()
    }
}

pub fn submit(c: &mut Cluster, s: JobSpec, who: Caller, now: i64) -> u32 {
    let j = c.resolve(s, who, now, &names).unwrap();
    let mut fx = Effects::default();
    c.submit(j, &mut fx)
}

/// Runs a scheduling pass; returns the ids launched.
pub fn pass(c: &mut Cluster, now: i64) -> Vec<u32> {
    let mut fx = Effects::default();
    c.schedule(now, &mut fx);
    c.sanity_check().unwrap();
    launches(&fx)
}

pub fn launches(fx: &Effects) -> Vec<u32> {
    fx.to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Launch(l) => Some(l.job.id),
            _ => None,
        })
        .collect()
}

/// What a node says when job `id`'s batch step ended (`kind`, exit `code`) at `time`,
/// without usage.
pub fn ended_msg(id: u32, kind: EndKind, code: i32, time: i64) -> FromAgent {
    FromAgent::Ended {
        job_id: id,
        kind,
        status: ExitStatus { code, signal: 0 },
        time,
        max_rss_kib: 0,
        cpu_secs: 0.0,
        oom: false,
        message: None,
        usage: None,
    }
}

/// The node reports job `id` ended with `code`.
pub fn end(c: &mut Cluster, id: u32, code: i32, now: i64) {
    let mut fx = Effects::default();
    c.from_agent(
        "n1",
        ended_msg(id, EndKind::Exited, code, now),
        now,
        &mut fx,
    );
    c.sanity_check().unwrap();
}

/// Nodes n1 and n2 (2 CPUs, 1000 MiB each, up) with `keys` as top-level config lines.
pub fn two_nodes(keys: &str) -> Cluster {
    let cfg = Config::from_toml(
        &format!(
            r#"{keys}
[[nodes]]
name = "n1"
cpus = 2
memory = 1000
[[nodes]]
name = "n2"
cpus = 2
memory = 1000
"#
        ),
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    for n in &mut c.nodes {
        n.state = NodeState::Up;
    }
    c
}

/// Submits a job of alice's on `nodes` nodes and runs a pass (its effects in `fx`);
/// returns its id, running.
pub fn start_on(c: &mut Cluster, nodes: u32, fx: &mut Effects) -> u32 {
    let mut s = spec("j");
    s.nodes_min = Some(nodes);
    s.nodes_max = Some(nodes);
    let j = c.resolve(s, ALICE, 10, &names).unwrap();
    let id = c.submit(j, &mut Effects::default());
    c.schedule(10, fx);
    assert_eq!(c.jobs[&id].state, crate::model::JobState::Running);
    id
}
