//! The simulator on small hand-made traces, and the pinned KTH-SP2 EASY figures.

use super::*;
use std::path::Path;

fn trace(text: &str) -> Trace {
    swf::parse(text).unwrap()
}

/// Four CPUs: job 1 (3 CPUs, 100 s) runs; job 2 (4 CPUs) must wait for it; job 3
/// (1 CPU, 50 s, asked 60 s) fits beside job 1 before job 2's start.
const SMALL: &str = "; MaxProcs: 4
1 0 -1 100 3 -1 -1 3 100 -1 1 1 -1 -1 -1 -1 -1 -1
2 1 -1 100 4 -1 -1 4 100 -1 1 1 -1 -1 -1 -1 -1 -1
3 2 -1 50 1 -1 -1 1 60 -1 1 1 -1 -1 -1 -1 -1 -1
";

fn run(policy: Policy, t: &Trace) -> Metrics {
    let (n, p) = default_cluster(t.max_procs);
    simulate(t, &n, &p, &sim_config(policy)).unwrap()
}

#[test]
fn fifo_waits_and_backfill_fills_the_hole() {
    let t = trace(SMALL);
    let f = run(Policy::Fifo, &t);
    // FIFO: 1 at 0, 2 at 100, 3 at 200.
    assert_eq!(f.backfilled, 0);
    assert_eq!(f.mean_wait, (0.0 + 99.0 + 198.0) / 3.0);
    assert_eq!(f.makespan, 250);
    for p in [Policy::Easy, Policy::Conservative] {
        let m = run(p, &t);
        // 3 starts at 2 beside job 1 and ends before job 2's reserved start.
        assert_eq!(m.backfilled, 1, "{p:?}");
        assert_eq!(m.mean_wait, 99.0 / 3.0, "{p:?}");
        assert_eq!(m.median_wait, 0.0);
        assert_eq!(m.makespan, 200);
        let work = 3.0 * 100.0 + 4.0 * 100.0 + 50.0;
        assert!((m.utilization - work / (4.0 * 200.0)).abs() < 1e-12);
        // bsld: 1, (99+100)/100, 1.
        assert!((m.mean_bounded_slowdown - (1.0 + 1.99 + 1.0) / 3.0).abs() < 1e-12);
    }
}

#[test]
fn jobs_past_their_estimate_keep_running() {
    // Job 1 asks 10 s but runs 100 s: job 2 (needs all CPUs) waits until it really ends.
    let t = trace(
        "; MaxProcs: 2\n\
         1 0 -1 100 2 -1 -1 2 10 -1 1 1 -1 -1 -1 -1 -1 -1\n\
         2 0 -1 10 2 -1 -1 2 10 -1 1 1 -1 -1 -1 -1 -1 -1\n",
    );
    let m = run(Policy::Conservative, &t);
    assert_eq!(m.makespan, 110);
    assert_eq!(m.mean_wait, 50.0);
}

#[test]
fn reads_a_config_cluster() {
    let cfg = crate::config::Config::from_toml(
        "[[nodes]]\nname='a'\ncpus=2\n[[nodes]]\nname='b'\ncpus=2\n[[partitions]]\nname='p'\nnodes='a,b'\ndefault=true\n",
        Path::new("/x.toml"),
    )
    .unwrap();
    let (n, p) = cluster_from(&cfg).unwrap();
    let t = trace(SMALL);
    let m = simulate(&t, &n, &p, &sim_config(Policy::Easy)).unwrap();
    assert_eq!(m.jobs, 3);
    // A 5-CPU job can never run on 4 CPUs.
    let big = trace("1 0 -1 1 5 -1 -1 5 1 -1 1 1 -1 -1 -1 -1 -1 -1\n");
    assert!(simulate(&big, &n, &p, &sim_config(Policy::Easy)).is_err());
}

/// The workload traces kept with the tests (`tests/data/traces`, see its README).
fn traces_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces")
}

/// Pins the KTH-SP2 EASY figures (one node of 100 CPUs, the README conventions): a
/// change to the scheduler that moves any of them must be deliberate.
#[test]
fn kth_sp2_easy_is_pinned() {
    let t = swf::read(&traces_dir().join("KTH-SP2-1996-2.1-cln.swf.gz")).unwrap();
    let m = run(Policy::Easy, &t);
    assert_eq!((m.jobs, m.dropped), (28475, 1));
    assert_eq!(m.makespan, 28_763_776);
    assert_eq!(m.backfilled, 17159);
    assert_eq!(m.median_wait, 0.0);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(
        close(m.utilization, 0.699_237_595_578_549_9),
        "{}",
        m.utilization
    );
    assert!(close(m.mean_wait, 6_847.503_107_989_464), "{}", m.mean_wait);
    assert!(
        close(m.mean_bounded_slowdown, 91.515_090_729_404_14),
        "{}",
        m.mean_bounded_slowdown
    );
}

/// A 4-CPU node with a preemptible partition `low` (PreemptMode `mode`, GraceTime
/// `grace` s) and a partition `high` above it; job 1 (4 CPUs, 100 s) runs in `low`
/// from 0, job 2 (2 CPUs, 30 s) arrives in `high` at 10.
fn preempt_run(mode: &str, grace: u32) -> Metrics {
    let cfg = crate::config::Config::from_toml(
        &format!(
            "[scheduler]\npreempt_type = 'preempt/partition_prio'\n\
             [[nodes]]\nname='n1'\ncpus=4\n\
             [[partitions]]\nname='low'\nnodes='n1'\ndefault=true\npriority_tier=1\n\
             preempt_mode='{mode}'\ngrace_time={grace}\n\
             [[partitions]]\nname='high'\nnodes='n1'\npriority_tier=10\n"
        ),
        Path::new("/x.toml"),
    )
    .unwrap();
    let (n, p) = cluster_from(&cfg).unwrap();
    let mut sc = sim_config(Policy::Easy);
    sc.preempt = cfg.sched.preempt.clone();
    let t = trace(
        "1 0 -1 100 4 -1 -1 4 200 -1 1 1 -1 -1 -1 1 -1 -1\n\
         2 10 -1 30 2 -1 -1 2 60 -1 1 1 -1 -1 -1 2 -1 -1\n",
    );
    simulate(&t, &n, &p, &sc).unwrap()
}

#[test]
fn preemption_on_virtual_time_is_the_controllers() {
    // REQUEUE: job 1 goes back to the queue at 10, job 2 runs 10..40, job 1 runs its
    // whole 100 s again from 40.
    let m = preempt_run("requeue", 0);
    assert_eq!((m.preempted, m.requeued), (1, 1));
    assert_eq!(m.makespan, 140);
    assert_eq!(m.mean_wait, 20.0);
    assert!(
        (m.utilization - (4.0 * 10.0 + 4.0 * 100.0 + 2.0 * 30.0) / (4.0 * 140.0)).abs() < 1e-12
    );
    // CANCEL after a 20 s grace time: job 1 ends PREEMPTED at 30, job 2 runs 30..60.
    let m = preempt_run("cancel", 20);
    assert_eq!((m.preempted, m.requeued), (1, 0));
    assert_eq!(m.makespan, 60);
    assert_eq!(m.mean_wait, 10.0);
    assert!((m.utilization - (4.0 * 30.0 + 2.0 * 30.0) / (4.0 * 60.0)).abs() < 1e-12);
    // SUSPEND: job 2 starts at once on job 1's CPUs; job 1 resumes at 40 for its
    // last 90 s.
    let m = preempt_run("suspend", 0);
    assert_eq!((m.preempted, m.requeued), (1, 0));
    assert_eq!(m.makespan, 130);
    assert_eq!(m.mean_wait, 0.0);
    assert!((m.utilization - (4.0 * 100.0 + 2.0 * 30.0) / (4.0 * 130.0)).abs() < 1e-12);
    // OFF: no preemption; job 2 waits for job 1.
    let m = preempt_run("off", 0);
    assert_eq!((m.preempted, m.requeued), (0, 0));
    assert_eq!(m.makespan, 130);
    assert_eq!(m.mean_wait, 45.0);
}

/// The reproducer of issue 19: on 4 nodes × 2 CPUs, an 8-CPU job (submitted at 1 behind
/// a running 6-CPU job) gets a reservation over the four nodes, so the stream of 2- and
/// 6-CPU jobs behind it cannot pass it: it starts when the first job ends (100), as it
/// would on one 8-CPU node, under both backfill policies.
#[test]
fn a_job_over_several_nodes_is_not_passed_by_a_stream() {
    let cfg = crate::config::Config::from_toml(
        "[[nodes]]\nname='n1'\ncpus=2\n[[nodes]]\nname='n2'\ncpus=2\n\
         [[nodes]]\nname='n3'\ncpus=2\n[[nodes]]\nname='n4'\ncpus=2\n\
         [[partitions]]\nname='p'\nnodes='n[1-4]'\ndefault=true\n",
        Path::new("/x.toml"),
    )
    .unwrap();
    let (n, p) = cluster_from(&cfg).unwrap();
    let mut text = String::from(
        "; MaxProcs: 8\n\
         1 0 -1 100 6 -1 -1 6 100 -1 1 1 -1 -1 -1 -1 -1 -1\n\
         2 1 -1 100 8 -1 -1 8 100 -1 1 1 -1 -1 -1 -1 -1 -1\n",
    );
    let mut id = 3;
    for t in (2..3000).step_by(50) {
        text += &format!("{id} {t} -1 100 2 -1 -1 2 100 -1 1 1 -1 -1 -1 -1 -1 -1\n");
        text += &format!(
            "{} {} -1 100 6 -1 -1 6 100 -1 1 1 -1 -1 -1 -1 -1 -1\n",
            id + 1,
            t + 1
        );
        id += 2;
    }
    let t = trace(&text);
    for policy in [Policy::Easy, Policy::Conservative] {
        let m = simulate(&t, &n, &p, &sim_config(policy)).unwrap();
        let big = &m.per_job[1];
        assert_eq!((big.id, big.start), (2, 100), "{policy:?}");
        assert_eq!(big.nodes.len(), 4, "{policy:?}");
        assert!(m.max_wait >= big.wait && m.p99_wait <= m.max_wait);
    }
}

/// At the controller's settings backfill runs every bf_interval seconds: job 3 of
/// SMALL (which only backfill may start) waits for the first backfill pass after
/// its submission at 2; the textbook run starts it at once. `--jobs-out` writes one
/// line per job.
#[test]
fn controller_settings_backfill_on_their_interval() {
    let t = trace(SMALL);
    let (n, p) = default_cluster(t.max_procs);
    let mut cfg = sim_config(Policy::Easy);
    let textbook = simulate(&t, &n, &p, &cfg).unwrap();
    assert_eq!(textbook.per_job[2].start, 2);
    cfg.bf_interval = 30;
    let opts = SimOptions {
        priority: true,
        bf_interval: true,
    };
    let m = simulate_opts(&t, &n, &p, &cfg, &[], opts).unwrap();
    // Backfill at 0 (nothing to do for job 3), then at 30.
    assert_eq!(m.per_job[2].start, 30);
    assert_eq!(m.per_job[1].start, 100);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jobs.tsv");
    write_jobs(&out, &m.per_job).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text,
        "id\tsubmit\tstart\tend\tnodes\twait\n\
         1\t0\t0\t100\tsim1\t0\n\
         2\t1\t100\t200\tsim1\t99\n\
         3\t2\t30\t80\tsim1\t28\n"
    );
    assert_eq!((m.max_wait, m.p99_wait, m.overran), (99, 99, 0));
}

/// EASY-SJF: of two jobs that could each take the one free CPU before job 2's
/// reservation, the shorter one (job 4, 10 s) gets it; EASY gives it to the earlier
/// one (job 3, 90 s; job 4 follows it at 82). Job 2 starts at 100 under both.
#[test]
fn easy_sjf_backfills_the_shortest_first() {
    let t = trace(
        "; MaxProcs: 4
1 0 -1 100 3 -1 -1 3 100 -1 1 1 -1 -1 -1 -1 -1 -1
2 1 -1 100 4 -1 -1 4 100 -1 1 1 -1 -1 -1 -1 -1 -1
3 2 -1 80 1 -1 -1 1 90 -1 1 1 -1 -1 -1 -1 -1 -1
4 2 -1 10 1 -1 -1 1 10 -1 1 1 -1 -1 -1 -1 -1 -1
",
    );
    let easy = run(Policy::Easy, &t);
    let sjf = run(Policy::EasySjf, &t);
    assert_eq!((easy.per_job[2].start, easy.per_job[1].start), (2, 100));
    assert_eq!(easy.per_job[3].start, 82);
    assert_eq!((sjf.per_job[3].start, sjf.per_job[1].start), (2, 100));
    assert!(sjf.per_job[2].start >= 100);
}

/// FNV-1a of a file's bytes (stable across Rust versions, easy to recompute by hand).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `count` nodes `n001`… of `cpus` CPUs in one default partition, as a config gives
/// them to `sluice simulate --config`.
fn cluster(count: usize, cpus: u32) -> (Vec<Node>, Vec<Partition>) {
    let mut text = String::new();
    for k in 1..=count {
        text += &format!("[[nodes]]\nname='n{k:03}'\ncpus={cpus}\n");
    }
    text += &format!("[[partitions]]\nname='p'\nnodes='n[001-{count:03}]'\ndefault=true\n");
    let cfg = crate::config::Config::from_toml(&text, Path::new("/x.toml")).unwrap();
    cluster_from(&cfg).unwrap()
}

/// Pins every job's start and nodes (the `--jobs-out` file's FNV-1a) on the first
/// jobs of KTH-SP2 and lublin_256, over several cluster shapes and all policies, so
/// that work on the scheduler's speed cannot change a decision unnoticed. The
/// digests were taken from `sluice simulate --textbook --config C --jobs-out F` on
/// the same prefixes before the timeline search was made faster; a deliberate
/// change of policy updates them.
#[test]
fn starts_are_pinned_on_trace_prefixes() {
    let kth = swf::read(&traces_dir().join("KTH-SP2-1996-2.1-cln.swf.gz")).unwrap();
    let lublin = swf::read(&traces_dir().join("lublin_256.swf.gz")).unwrap();
    let prefix = |t: &Trace, n: usize| Trace {
        jobs: t.jobs[..n].to_vec(),
        ..t.clone()
    };
    let kth = prefix(&kth, 400);
    let lublin = prefix(&lublin, 200);
    let cases: [(&str, &Trace, usize, u32); 4] = [
        ("kth400", &kth, 100, 1),
        ("kth400", &kth, 25, 4),
        ("lub200", &lublin, 16, 16),
        ("lub200", &lublin, 256, 1),
    ];
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jobs.tsv");
    let mut got = Vec::new();
    for (name, t, count, cpus) in cases {
        let (n, p) = cluster(count, cpus);
        for policy in [
            Policy::Fifo,
            Policy::Easy,
            Policy::Conservative,
            Policy::EasySjf,
        ] {
            let m = simulate(t, &n, &p, &sim_config(policy)).unwrap();
            write_jobs(&out, &m.per_job).unwrap();
            let digest = fnv(&std::fs::read(&out).unwrap());
            got.push(format!(
                "{name} c{count}x{cpus} {} {digest:016x}",
                policy.name()
            ));
        }
    }
    let want: Vec<&str> = PINNED_STARTS.lines().collect();
    assert_eq!(got, want, "got:\n{}", got.join("\n"));
}

const PINNED_STARTS: &str = "\
kth400 c100x1 fifo cd69cea08d475487\n\
kth400 c100x1 easy 78c1b5985acf7455\n\
kth400 c100x1 conservative 5c64a6c2c6372d61\n\
kth400 c100x1 easy-sjf c8b4a5aef46dc382\n\
kth400 c25x4 fifo 10d3d3235549a0c3\n\
kth400 c25x4 easy f8db30b2cb0b5804\n\
kth400 c25x4 conservative 78fa33139d6a2191\n\
kth400 c25x4 easy-sjf 9492dbdcd49ddd5d\n\
lub200 c16x16 fifo c0eeae98eb373f05\n\
lub200 c16x16 easy e5f972d4e1a909a9\n\
lub200 c16x16 conservative dfeeb820d1c4ec7d\n\
lub200 c16x16 easy-sjf 1a6e76d7c652b25a\n\
lub200 c256x1 fifo d0f319f793cbbf88\n\
lub200 c256x1 easy d13e03f0365a8bee\n\
lub200 c256x1 conservative ee101dc4fed202fe\n\
lub200 c256x1 easy-sjf 3021c5d977f49552";
