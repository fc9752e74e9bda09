//! Selection options: GRES and GPUs, memory forms, constraints, contiguity,
//! distribution, overcommit, oversubscribe, licenses, partition defaults.

use super::*;
use crate::model::OverSubscribe;
use crate::model::gres::{GresDevice, GresReq, LicenseReq, parse_node_gres};

fn gpu_node(name: &str, cpus: u32, spec: &str) -> Node {
    let mut n = node(name, cpus, 64000);
    n.gres = parse_node_gres(spec).unwrap();
    n
}

fn gres(name: &str, kind: Option<&str>, count: u64) -> GresReq {
    GresReq {
        name: name.into(),
        kind: kind.map(str::to_string),
        count,
    }
}

fn one(jobs: &[&Job], nodes: &[Node], parts: &[Partition]) -> Vec<Decision> {
    schedule(jobs, nodes, parts, 0)
}

#[test]
fn gres_per_node_takes_devices_and_reports_indices() {
    let nodes = vec![gpu_node("g1", 8, "gpu:h100:4")];
    let parts = vec![part("p", &["g1"])];
    let mut a = job(1, 1, 10);
    a.spec.gres = vec![gres("gpu", None, 2)];
    let mut b = job(2, 1, 10);
    b.spec.gres = vec![gres("gpu", Some("h100"), 2)];
    let mut c = job(3, 1, 10);
    c.spec.gres = vec![gres("gpu", None, 1)];
    let d = one(&[&a, &b, &c], &nodes, &parts);
    let ga = alloc_of(&d, 1);
    let gb = alloc_of(&d, 2);
    let idx = |a: &Allocation| a.gres[0].iter().map(|g| g.index).collect::<Vec<_>>();
    assert_eq!(idx(&ga), vec![0, 1]);
    assert_eq!(idx(&gb), vec![2, 3]);
    assert_eq!(reason_of(&d, 3), Some(Reason::Resources));
    // A type the node does not have can never run.
    let mut x = job(4, 1, 10);
    x.spec.gres = vec![gres("gpu", Some("a100"), 1)];
    assert_eq!(
        static_reason(&x, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
}

#[test]
fn gpus_total_spread_and_per_task() {
    let nodes = vec![gpu_node("g1", 8, "gpu:2"), gpu_node("g2", 8, "gpu:2")];
    let parts = vec![part("p", &["g1", "g2"])];
    let mut a = job(1, 2, 10);
    a.spec.gpus = Some(gres("gpu", None, 3));
    let al = alloc_of(&one(&[&a], &nodes, &parts), 1);
    assert_eq!(al.gres_count("gpu"), 3);
    assert_eq!(al.nodes.len(), 2);
    let mut b = job(2, 4, 10);
    b.spec.gpus_per_task = Some(gres("gpu", None, 1));
    let al = alloc_of(&one(&[&b], &nodes, &parts), 2);
    assert_eq!(al.gres_count("gpu"), 4);
    assert_eq!(al.tasks, vec![2, 2]);
    let mut c = job(3, 5, 10);
    c.spec.gpus_per_task = Some(gres("gpu", None, 1));
    assert_eq!(
        static_reason(&c, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
}

#[test]
fn cpus_and_mem_per_gpu() {
    let nodes = vec![gpu_node("g1", 8, "gpu:4")];
    let mut p = part("p", &["g1"]);
    let mut a = job(1, 1, 10);
    a.spec.gres = vec![gres("gpu", None, 2)];
    a.spec.cpus_per_gpu = Some(3);
    a.spec.mem_per_gpu = Some(1000);
    let al = alloc_of(&one(&[&a], &nodes, std::slice::from_ref(&p)), 1);
    assert_eq!(al.cpus, vec![6]);
    assert_eq!(al.mem_per_node, 2000);
    // The partition's DefCpuPerGPU applies when the job gives none.
    p.def_cpu_per_gpu = Some(2);
    let mut b = job(2, 1, 10);
    b.spec.gres = vec![gres("gpu", None, 3)];
    let al = alloc_of(&one(&[&b], &nodes, &[p]), 2);
    assert_eq!(al.cpus, vec![6]);
}

#[test]
fn cpus_near_the_gpu_are_preferred() {
    let mut n = gpu_node("g1", 8, "gpu:2");
    n.gres[0].cores = vec![0, 1, 2, 3];
    n.gres[1].cores = vec![4, 5, 6, 7];
    let nodes = vec![n];
    let parts = vec![part("p", &["g1"])];
    let mut a = job(1, 1, 10);
    a.spec.cpus_per_task = Some(2);
    a.req_cpus = 2;
    let mut b = job(2, 1, 10);
    b.spec.gres = vec![gres("gpu", None, 1)];
    b.spec.cpus_per_task = Some(2);
    b.req_cpus = 2;
    let d = one(&[&a, &b], &nodes, &parts);
    assert_eq!(alloc_of(&d, 1).cpu_ids, vec![vec![0, 1]]);
    let gb = alloc_of(&d, 2);
    assert_eq!(gb.gres[0][0].index, 0);
    assert_eq!(gb.cpu_ids, vec![vec![2, 3]]);
}

#[test]
fn cpu_ids_never_overlap_running_jobs() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let mut r = running(9, "n1", 2, 0);
    r.alloc.as_mut().unwrap().cpu_ids = vec![vec![1, 2]];
    let a = job(1, 2, 10);
    let al = alloc_of(&one(&[&a, &r], &nodes, &parts), 1);
    assert_eq!(al.cpu_ids, vec![vec![0, 3]]);
}

#[test]
fn memory_forms() {
    let nodes = vec![node("n1", 4, 4000)];
    let parts = vec![part("p", &["n1"])];
    let mut all = job(1, 1, 10);
    all.req_mem = MemReq::PerNode(0);
    let al = alloc_of(&one(&[&all], &nodes, &parts), 1);
    assert_eq!(al.mem_per_node, 4000);
    // --mem=0 needs all the memory, so it waits behind anything holding some.
    let r = running(9, "n1", 1, 0);
    let d = one(&[&all, &r], &nodes, &parts);
    assert_eq!(reason_of(&d, 1), Some(Reason::Resources));
    let mut per_node = job(2, 2, 10);
    per_node.req_mem = MemReq::PerNode(3000);
    assert_eq!(
        alloc_of(&one(&[&per_node], &nodes, &parts), 2).mem_per_node,
        3000
    );
    let mut big = job(3, 1, 10);
    big.req_mem = MemReq::PerNode(5000);
    assert_eq!(
        static_reason(&big, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
}

#[test]
fn max_mem_per_node_limit() {
    let nodes = vec![node("n1", 4, 4000)];
    let mut p = part("p", &["n1"]);
    p.max_mem_per_node = Some(1000);
    let mut a = job(1, 1, 10);
    a.req_mem = MemReq::PerNode(2000);
    assert_eq!(
        static_reason(&a, &p, &nodes),
        Some(Reason::Other("MaxMemPerLimit".into()))
    );
}

fn feat_node(name: &str, f: &[&str]) -> Node {
    let mut n = node(name, 2, 4000);
    n.features = f.iter().map(|s| s.to_string()).collect();
    n
}

#[test]
fn constraints_and_or_counts_and_matching() {
    let nodes = vec![
        feat_node("n1", &["a", "rack1"]),
        feat_node("n2", &["b", "rack1"]),
        feat_node("n3", &["a", "b", "rack2"]),
        feat_node("n4", &["b", "rack2"]),
    ];
    let parts = vec![part("p", &["n1", "n2", "n3", "n4"])];
    let with = |id, c: &str, nodes_n: u32| {
        let mut j = job(id, nodes_n, 10);
        j.req_nodes = nodes_n;
        j.spec.nodes_min = Some(nodes_n);
        j.spec.constraint = Some(c.into());
        j
    };
    let names = |j: &Job| alloc_of(&one(&[j], &nodes, &parts), j.id).nodes;
    assert_eq!(names(&with(1, "a&b", 1)), ["n3"]);
    assert_eq!(names(&with(2, "a|b", 2)), ["n1", "n2"]);
    assert_eq!(names(&with(3, "[rack1|rack2]&b", 2)), ["n3", "n4"]);
    assert_eq!(names(&with(4, "a*2", 3)).len(), 3);
    let al = names(&with(4, "a*2", 3));
    assert!(al.contains(&"n1".to_string()) && al.contains(&"n3".to_string()));
    let bad = with(5, "gpu", 1);
    assert_eq!(
        static_reason(&bad, &parts[0], &nodes),
        Some(Reason::BadConstraints)
    );
    let syntax = with(6, "a&&", 1);
    assert_eq!(
        static_reason(&syntax, &parts[0], &nodes),
        Some(Reason::BadConstraints)
    );
}

#[test]
fn contiguous_nodes() {
    let nodes = vec![
        node("n1", 2, 4000),
        node("n2", 2, 4000),
        node("n3", 2, 4000),
        node("n4", 2, 4000),
    ];
    let parts = vec![part("p", &["n1", "n2", "n3", "n4"])];
    let r = running(9, "n2", 2, 0);
    let mut a = job(1, 2, 10);
    a.req_nodes = 2;
    a.spec.nodes_min = Some(2);
    a.spec.contiguous = true;
    assert_eq!(
        alloc_of(&one(&[&a, &r], &nodes, &parts), 1).nodes,
        ["n3", "n4"]
    );
    let mut b = a.clone();
    b.spec.contiguous = false;
    assert_eq!(
        alloc_of(&one(&[&b, &r], &nodes, &parts), 1).nodes,
        ["n1", "n3"]
    );
}

#[test]
fn distribution_cyclic_and_plane() {
    let nodes = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let parts = vec![part("p", &["n1", "n2"])];
    let mut a = job(1, 4, 10);
    a.req_nodes = 2;
    a.spec.nodes_min = Some(2);
    assert_eq!(alloc_of(&one(&[&a], &nodes, &parts), 1).tasks, [3, 1]);
    a.spec.distribution = Some("cyclic".into());
    assert_eq!(alloc_of(&one(&[&a], &nodes, &parts), 1).tasks, [2, 2]);
    let mut b = job(2, 6, 10);
    b.req_nodes = 2;
    b.spec.nodes_min = Some(2);
    b.spec.distribution = Some("plane=4".into());
    assert_eq!(alloc_of(&one(&[&b], &nodes, &parts), 2).tasks, [4, 2]);
    b.spec.distribution = Some("diagonal".into());
    assert_eq!(
        static_reason(&b, &parts[0], &nodes),
        Some(Reason::BadConstraints)
    );
}

#[test]
fn overcommit_takes_one_cpu_per_node() {
    let nodes = vec![node("n1", 2, 4000)];
    let parts = vec![part("p", &["n1"])];
    let mut a = job(1, 8, 1);
    a.spec.overcommit = true;
    let al = alloc_of(&one(&[&a], &nodes, &parts), 1);
    assert_eq!((al.cpus.clone(), al.tasks.clone()), (vec![1], vec![8]));
}

#[test]
fn oversubscribe_shares_cpus_up_to_the_limit() {
    let nodes = vec![node("n1", 2, 4000)];
    let mut p = part("p", &["n1"]);
    p.oversubscribe = OverSubscribe::Force(2);
    let jobs: Vec<Job> = (1..=5).map(|i| job(i, 2, 10)).collect();
    let refs: Vec<&Job> = jobs.iter().collect();
    let d = one(&refs, &nodes, &[p.clone()]);
    assert_eq!(starts(&d), vec![1, 2]);
    assert!(alloc_of(&d, 1).shared);
    // YES only shares jobs that ask for it.
    p.oversubscribe = OverSubscribe::Yes(4);
    let mut a = job(1, 2, 10);
    a.spec.oversubscribe = true;
    let mut b = job(2, 2, 10);
    b.spec.oversubscribe = true;
    let c = job(3, 2, 10);
    let d = one(&[&a, &b, &c], &nodes, &[p.clone()]);
    assert_eq!(starts(&d), vec![1, 2]);
    // EXCLUSIVE gives every job whole nodes.
    p.oversubscribe = OverSubscribe::Exclusive;
    let d = one(&[&job(1, 1, 10), &job(2, 1, 10)], &nodes, &[p]);
    assert_eq!(alloc_of(&d, 1).cpus, vec![2]);
    assert_eq!(starts(&d), vec![1]);
}

#[test]
fn exclusive_user_partition() {
    let nodes = vec![node("n1", 4, 4000), node("n2", 4, 4000)];
    let mut p = part("p", &["n1", "n2"]);
    p.exclusive_user = true;
    let mut mine = running(9, "n1", 1, 0);
    mine.uid = 1;
    mine.partition = "p".into();
    let mut a = job(1, 1, 10);
    a.uid = 2;
    let mut b = job(2, 1, 10);
    b.uid = 1;
    let d = one(&[&a, &b, &mine], &nodes, &[p]);
    assert_eq!(alloc_of(&d, 1).nodes, ["n2"]);
    assert_eq!(alloc_of(&d, 2).nodes, ["n1"]);
}

#[test]
fn licenses_are_counted() {
    let nodes = vec![node("n1", 8, 4000)];
    let parts = vec![part("p", &["n1"])];
    let lic = vec![("matlab".to_string(), 2)];
    let with = |id, n| {
        let mut j = job(id, 1, 10);
        j.spec.licenses = vec![LicenseReq {
            name: "matlab".into(),
            count: n,
        }];
        j
    };
    let (a, b, c) = (with(1, 1), with(2, 1), with(3, 1));
    let cfg = SchedConfig::default();
    let o = pass(&[&a, &b, &c], &nodes, &parts, &lic, &cfg, 0);
    assert_eq!(starts(&o.decisions), vec![1, 2]);
    assert_eq!(reason_of(&o.decisions, 3), Some(Reason::Licenses));
    assert_eq!(alloc_of(&o.decisions, 1).licenses[0].count, 1);
    // A running holder keeps its licenses; an unknown license never runs.
    let mut r = running(9, "n1", 1, 0);
    r.alloc.as_mut().unwrap().licenses = vec![LicenseReq {
        name: "matlab".into(),
        count: 2,
    }];
    let o = pass(&[&a, &r], &nodes, &parts, &lic, &cfg, 0);
    assert_eq!(reason_of(&o.decisions, 1), Some(Reason::Licenses));
    let mut u = job(4, 1, 10);
    u.spec.licenses = vec![LicenseReq {
        name: "nosuch".into(),
        count: 1,
    }];
    let o = pass(&[&u], &nodes, &parts, &lic, &cfg, 0);
    assert_eq!(reason_of(&o.decisions, 4), Some(Reason::Licenses));
}

#[test]
fn gres_device_type_matching() {
    let d = GresDevice {
        name: "gpu".into(),
        kind: Some("h100".into()),
        index: 0,
        count: 1,
        cores: vec![],
        file: None,
        links: Vec::new(),
        pci_bus: None,
        more_files: Vec::new(),
        unique_id: None,
    };
    assert!(d.matches("gpu", None));
}

fn smt_node(name: &str, cpus: u32, tpc: u32) -> Node {
    let mut n = node(name, cpus, 64000);
    n.threads_per_core = tpc;
    n.cores_per_socket = cpus / tpc;
    n
}

#[test]
fn nomultithread_takes_whole_cores_and_threads_per_core_filters_nodes() {
    // 8 CPUs = 4 cores of 2 threads.
    let nodes = vec![smt_node("s1", 8, 2)];
    let parts = vec![part("p", &["s1"])];
    // --hint=nomultithread -n 3: three cores, six CPUs; a fourth such task fits in
    // the last core, a fifth does not.
    let mut a = job(1, 3, 10);
    (a.spec.threads_per_core, a.spec.ntasks_per_core) = (Some(1), Some(1));
    let al = alloc_of(&one(&[&a], &nodes, &parts), 1);
    assert_eq!((al.cpus.clone(), al.tasks.clone()), (vec![6], vec![3]));
    let mut b = job(2, 2, 10);
    (b.spec.threads_per_core, b.spec.ntasks_per_core) = (Some(1), Some(1));
    let d = one(&[&a, &b], &nodes, &parts);
    assert_eq!(starts(&d), vec![1]);
    assert_eq!(reason_of(&d, 2), Some(Reason::Resources));
    // Without the hint three tasks take three CPUs.
    let c = job(3, 3, 10);
    assert_eq!(alloc_of(&one(&[&c], &nodes, &parts), 3).cpus, vec![3]);
    // -c 3 --threads-per-core=1: three cores (six CPUs) for the task; two such
    // tasks can never fit the node's four cores.
    let mut e = job(4, 1, 10);
    e.spec.cpus_per_task = Some(3);
    e.spec.threads_per_core = Some(1);
    assert_eq!(alloc_of(&one(&[&e], &nodes, &parts), 4).cpus, vec![6]);
    e.req_tasks = 2;
    assert_eq!(
        static_reason(&e, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
    // --ntasks-per-core=1 alone: a core per task.
    let mut f = job(5, 4, 10);
    f.spec.ntasks_per_core = Some(1);
    assert_eq!(alloc_of(&one(&[&f], &nodes, &parts), 5).cpus, vec![8]);
    // On a node of one thread per core nothing changes.
    let flat = vec![smt_node("f1", 8, 1)];
    let fparts = vec![part("p", &["f1"])];
    assert_eq!(alloc_of(&one(&[&a], &flat, &fparts), 1).cpus, vec![3]);
    // --threads-per-core=2 needs nodes with two threads per core: never on f1.
    let mut g = job(6, 1, 10);
    g.spec.threads_per_core = Some(2);
    assert_eq!(
        static_reason(&g, &fparts[0], &flat),
        Some(Reason::PartitionConfig)
    );
    assert_eq!(alloc_of(&one(&[&g], &nodes, &parts), 6).cpus, vec![2]);
}

#[test]
fn mincpus_raises_each_nodes_allocation_and_skips_small_nodes() {
    let nodes = vec![node("a", 2, 64000), node("b", 8, 64000)];
    let parts = vec![part("p", &["a", "b"])];
    // -n1 --mincpus=4: node a has too few CPUs; b gives four.
    let mut j = job(1, 1, 10);
    j.spec.mincpus = Some(4);
    let al = alloc_of(&one(&[&j], &nodes, &parts), 1);
    assert_eq!(
        (al.nodes.clone(), al.cpus.clone()),
        (vec!["b".to_string()], vec![4])
    );
    // Two nodes of at least 4: never possible here.
    let mut k = job(2, 2, 10);
    k.spec.mincpus = Some(4);
    k.req_nodes = 2;
    k.spec.nodes_min = Some(2);
    assert_eq!(
        static_reason(&k, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
    // Once b holds 5 CPUs, a --mincpus=4 job waits for Resources.
    let busy = running(3, "b", 5, 0);
    let d = one(&[&busy, &j], &nodes, &parts);
    assert_eq!(reason_of(&d, 1), Some(Reason::Resources));
}

#[test]
fn tmp_disk_filters_nodes_without_consuming() {
    let mut small = node("a", 4, 64000);
    small.tmp_disk = 100;
    let mut big = node("b", 4, 64000);
    big.tmp_disk = 4096;
    let nodes = vec![small, big];
    let parts = vec![part("p", &["a", "b"])];
    let mut j = job(1, 1, 10);
    j.spec.tmp_disk = Some(1024);
    let mut k = job(2, 1, 10);
    k.spec.tmp_disk = Some(4096);
    let d = one(&[&j, &k], &nodes, &parts);
    // Both go to b: --tmp is a per-node minimum, not a consumable.
    assert_eq!(alloc_of(&d, 1).nodes, ["b"]);
    assert_eq!(alloc_of(&d, 2).nodes, ["b"]);
    let mut x = job(3, 1, 10);
    x.spec.tmp_disk = Some(5000);
    assert_eq!(
        static_reason(&x, &parts[0], &nodes),
        Some(Reason::PartitionConfig)
    );
}

#[test]
fn exclusive_user_shares_nodes_only_with_the_same_user() {
    let nodes = vec![node("a", 4, 64000), node("b", 4, 64000)];
    let parts = vec![part("p", &["a", "b"])];
    let mut mine = job(1, 1, 10);
    mine.uid = 1;
    mine.spec.exclusive_user = true;
    let mut also_mine = job(2, 1, 10);
    also_mine.uid = 1;
    let mut other = job(3, 1, 10);
    other.uid = 2;
    let d = one(&[&mine, &also_mine, &other], &nodes, &parts);
    assert_eq!(alloc_of(&d, 1).nodes, ["a"]);
    // The same user's job joins a; another user's goes to b.
    assert_eq!(alloc_of(&d, 2).nodes, ["a"]);
    assert_eq!(alloc_of(&d, 3).nodes, ["b"]);
    // An --exclusive=user job never joins a node where another user runs.
    let busy_a = {
        let mut r = running(8, "a", 1, 0);
        r.uid = 2;
        r
    };
    let busy_b = {
        let mut r = running(9, "b", 1, 0);
        r.uid = 3;
        r
    };
    let d = one(&[&busy_a, &busy_b, &mine], &nodes, &parts);
    assert_eq!(reason_of(&d, 1), Some(Reason::Resources));
    // A running --exclusive=user job keeps other users off its node.
    let mut held = running(7, "a", 1, 0);
    held.uid = 1;
    held.spec.exclusive_user = true;
    let d = one(&[&held, &other], &nodes, &parts);
    assert_eq!(alloc_of(&d, 3).nodes, ["b"]);
}
