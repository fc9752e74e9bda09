//! GPU affinity in selection: `--gres-flags=enforce-binding` and `disable-binding`,
//! `--gpus-per-socket` with `--sockets-per-node`, on a node of 8 CPUs in 2 sockets
//! whose GPUs 0-1 are near CPUs 0-3 (socket 0) and GPUs 2-3 near CPUs 4-7 (socket 1).

use super::*;
use crate::model::gres::{GresBinding, GresReq, parse_node_gres};

fn two_socket_node() -> Node {
    let mut n = node("g1", 8, 64000);
    n.sockets = 2;
    n.cores_per_socket = 4;
    n.gres = parse_node_gres("gpu:4").unwrap();
    for d in &mut n.gres {
        d.cores = if d.index < 2 {
            (0..4).collect()
        } else {
            (4..8).collect()
        };
    }
    n
}

fn gpus(count: u64) -> GresReq {
    GresReq {
        name: "gpu".into(),
        kind: None,
        count,
    }
}

/// A running job holding CPU ids `cpus` and GPUs `gpu_idx` of node g1.
fn holder(id: u32, cpus: &[u32], gpu_idx: &[u32]) -> Job {
    let mut j = running(id, "g1", cpus.len() as u32, 0);
    let a = j.alloc.as_mut().unwrap();
    a.cpu_ids = vec![cpus.to_vec()];
    a.gres = vec![crate::model::job::gpu_allocs(gpu_idx)];
    j
}

/// A pending job of `cpus` CPUs (one task) asking `gres=gpu:N` with `binding`.
fn gpu_job(id: u32, cpus: u32, n: u64, binding: GresBinding) -> Job {
    let mut j = job(id, 1, 10);
    j.req_cpus = cpus;
    j.spec.cpus_per_task = Some(cpus);
    j.spec.gres = vec![gpus(n)];
    j.spec.gres_flags = binding;
    j
}

fn gpu_idx(a: &Allocation) -> Vec<u32> {
    a.gres[0].iter().map(|g| g.index).collect()
}

fn one_pass(jobs: &[&Job]) -> Vec<Decision> {
    schedule(jobs, &[two_socket_node()], &[part("p", &["g1"])], 0)
}

#[test]
fn enforce_binding_takes_gpus_whose_cores_are_free_and_only_those_cores() {
    // CPUs 0-3 busy: an enforce-binding job gets a GPU of socket 1 and CPUs there.
    let busy = holder(1, &[0, 1, 2, 3], &[]);
    let j = gpu_job(2, 2, 1, GresBinding::Enforce);
    let a = alloc_of(&one_pass(&[&busy, &j]), 2);
    assert_eq!(gpu_idx(&a), vec![2]);
    assert_eq!(a.cpu_ids[0], vec![4, 5]);
    // By default the lowest GPU is taken, with whatever CPUs are free.
    let j = gpu_job(3, 2, 1, GresBinding::Default);
    let a = alloc_of(&one_pass(&[&busy, &j]), 3);
    assert_eq!(gpu_idx(&a), vec![0]);
    assert_eq!(a.cpu_ids[0], vec![4, 5]);
    // On an empty node, CPUs near the GPU are preferred unless binding is disabled.
    let j = gpu_job(4, 1, 1, GresBinding::Default);
    let mut d = two_socket_node();
    d.gres[0].cores = vec![3];
    let parts = [part("p", &["g1"])];
    let a = alloc_of(&schedule(&[&j], std::slice::from_ref(&d), &parts, 0), 4);
    assert_eq!(a.cpu_ids[0], vec![3]);
    let j = gpu_job(5, 1, 1, GresBinding::Disable);
    let a = alloc_of(&schedule(&[&j], &[d], &parts, 0), 5);
    assert_eq!(a.cpu_ids[0], vec![0]);
}

#[test]
fn enforce_binding_pends_until_cpus_near_its_gpus_are_free() {
    // Free: CPUs 0-1 (socket 0), GPUs 2-3 (socket 1).
    let busy = holder(1, &[2, 3, 4, 5, 6, 7], &[0, 1]);
    let strict = gpu_job(2, 1, 1, GresBinding::Enforce);
    let d = one_pass(&[&busy, &strict]);
    assert_eq!(reason_of(&d, 2), Some(Reason::Resources));
    // It could run on an empty node, so it is not refused as impossible.
    assert_eq!(
        static_reason(&strict, &part("p", &["g1"]), &[two_socket_node()]),
        None
    );
    let loose = gpu_job(3, 1, 1, GresBinding::Default);
    let a = alloc_of(&one_pass(&[&busy, &loose]), 3);
    assert_eq!((gpu_idx(&a), a.cpu_ids[0].clone()), (vec![2], vec![0]));
}

#[test]
fn enforce_binding_gives_each_gpu_a_cpu_near_it() {
    // GPUs 1 (socket 0) and 2 (socket 1) are the free ones.
    let busy = holder(1, &[], &[0, 3]);
    // Two GPUs on two sockets and one CPU: one GPU would have no CPU near it.
    let one_cpu = gpu_job(2, 1, 2, GresBinding::Enforce);
    assert_eq!(
        reason_of(&one_pass(&[&busy, &one_cpu]), 2),
        Some(Reason::Resources)
    );
    let two_cpus = gpu_job(3, 2, 2, GresBinding::Enforce);
    let a = alloc_of(&one_pass(&[&busy, &two_cpus]), 3);
    assert_eq!(gpu_idx(&a), vec![1, 2]);
    assert_eq!(a.cpu_ids[0], vec![0, 4]);
    // With all four free, two GPUs and one CPU fit on one socket.
    let a = alloc_of(&one_pass(&[&one_cpu]), 2);
    assert_eq!((gpu_idx(&a), a.cpu_ids[0].clone()), (vec![0, 1], vec![0]));
}

#[test]
fn enforce_binding_never_fits_more_cpus_than_its_gpus_are_near() {
    let parts = [part("p", &["g1"])];
    let nodes = [two_socket_node()];
    let j = gpu_job(1, 5, 1, GresBinding::Enforce);
    assert_eq!(
        static_reason(&j, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
    let j = gpu_job(2, 5, 1, GresBinding::Default);
    assert_eq!(static_reason(&j, &parts[0], &nodes), None);
    // Two GPUs of two sockets: five CPUs fit among their eight.
    let j = gpu_job(3, 5, 3, GresBinding::Enforce);
    let a = alloc_of(&one_pass(&[&j]), 3);
    assert_eq!(a.cpu_ids[0].len(), 5);
}

fn per_socket_job(id: u32, cpus: u32, per: u64, sockets: u32) -> Job {
    let mut j = job(id, 1, 10);
    j.req_cpus = cpus;
    j.spec.cpus_per_task = Some(cpus);
    j.spec.gpus_per_socket = Some(gpus(per));
    j.spec.sockets_per_node = Some(sockets);
    j
}

#[test]
fn gpus_per_socket_puts_gpus_on_the_sockets_whose_cpus_the_job_gets() {
    // One GPU on each of two sockets, and a CPU on each.
    let j = per_socket_job(1, 1, 1, 2);
    let a = alloc_of(&one_pass(&[&j]), 1);
    assert_eq!(gpu_idx(&a), vec![0, 2]);
    assert_eq!(a.cpu_ids[0], vec![0, 4]);
    assert_eq!(a.cpus, vec![2]);
    // Two on one socket: the socket with more free CPUs.
    let busy = holder(2, &[0, 1, 2], &[]);
    let j = per_socket_job(3, 2, 2, 1);
    let a = alloc_of(&one_pass(&[&busy, &j]), 3);
    assert_eq!(gpu_idx(&a), vec![2, 3]);
    assert_eq!(a.cpu_ids[0], vec![4, 5]);
    // Its CPUs stay on its sockets: five CPUs do not fit one socket of four.
    let j = per_socket_job(4, 5, 1, 1);
    assert_eq!(
        static_reason(&j, &part("p", &["g1"]), &[two_socket_node()]),
        Some(Reason::PartitionConfig)
    );
    // A node with fewer sockets than asked is never a candidate.
    let j = per_socket_job(5, 1, 1, 3);
    assert_eq!(
        static_reason(&j, &part("p", &["g1"]), &[two_socket_node()]),
        Some(Reason::PartitionConfig)
    );
    // Socket 1's GPUs are taken: a job wanting GPUs on two sockets waits.
    let held = holder(6, &[], &[2, 3]);
    let j = per_socket_job(7, 2, 1, 2);
    assert_eq!(
        reason_of(&one_pass(&[&held, &j]), 7),
        Some(Reason::Resources)
    );
}

#[test]
fn a_blocked_enforce_binding_job_gets_a_backfill_estimate() {
    let mut busy = holder(1, &[2, 3, 4, 5, 6, 7], &[0, 1]);
    busy.time_limit = TimeLimit::Minutes(5);
    let strict = gpu_job(2, 1, 1, GresBinding::Enforce);
    let nodes = [two_socket_node()];
    let parts = [part("p", &["g1"])];
    let o = pass(
        &[&busy, &strict],
        &nodes,
        &parts,
        &[],
        &SchedConfig::default(),
        0,
    );
    assert_eq!(reason_of(&o.decisions, 2), Some(Reason::Resources));
    let est = o
        .estimates
        .iter()
        .find(|e| e.job_id == 2)
        .expect("estimate");
    assert_eq!(est.start, 300);
}
