//! The scheduling core through the real front-ends: partitions and pending reasons,
//! backfill and `squeue --start`, EnforcePartLimits=NO, GRES and licenses, sprio and
//! sdiag.

use crate::harness::*;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// squeue's `%r` (reason) of one job.
fn reason(c: &TestCluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-o", "%r", "-j", &id.to_string()])
        .trim()
        .to_string()
}

fn wait_reason(c: &TestCluster, id: u32, want: &str) -> String {
    wait_until(&format!("job {id} reason {want}"), WAIT, || {
        let r = reason(c, id);
        (r == want).then_some(r)
    })
}

#[test]
fn reasons_backfill_and_start_estimates() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: r#"
[[partitions]]
name = "downp"
nodes = "NODE"
state = "down"
"#,
        ..Setup::default()
    });
    let long = c.submit(&["-n3", "-t", "10", "-o", "/dev/null", "--wrap", "sleep 120"]);
    c.wait_state(long, &["RUNNING"], WAIT);
    let big = c.submit(&["-n4", "-t", "5", "-o", "/dev/null", "--wrap", "true"]);
    let behind = c.submit(&["-n4", "-t", "5", "-o", "/dev/null", "--wrap", "true"]);
    let down = c.submit(&["-p", "downp", "-o", "/dev/null", "--wrap", "true"]);
    let held = c.submit(&["-H", "-o", "/dev/null", "--wrap", "true"]);
    let later = c.submit(&["--begin=now+1hour", "-o", "/dev/null", "--wrap", "true"]);
    // Fits beside the long job and ends before big's planned start: backfilled.
    let short = c.submit(&["-n1", "-t", "2", "-o", "/dev/null", "--wrap", "sleep 60"]);
    wait_reason(&c, big, "Resources");
    wait_reason(&c, behind, "Priority");
    wait_reason(&c, down, "PartitionDown");
    wait_reason(&c, held, "JobHeldUser");
    wait_reason(&c, later, "BeginTime");
    c.wait_state(short, &["RUNNING"], WAIT);
    let show = c.ok("scontrol", &["show", "job", &short.to_string()]);
    assert!(show.contains("Scheduler=Backfill"), "{show}");
    // -d names the CPU ids the job holds.
    let d = c.ok("scontrol", &["show", "job", "-d", &long.to_string()]);
    assert!(d.contains(" CPU_IDs=0-2 "), "{d}");

    let start = c.ok(
        "squeue",
        &[
            "--start",
            "-h",
            "-o",
            "%i %S %Y",
            "-j",
            &format!("{big},{behind},{later},{held}"),
        ],
    );
    let field = |id: u32, k: usize| -> String {
        start
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .and_then(|l| l.split_whitespace().nth(k))
            .unwrap_or_else(|| panic!("job {id} missing in {start}"))
            .to_string()
    };
    // big starts when the long job's limit ends; behind after big; later at its begin.
    assert_ne!(field(big, 1), "N/A", "{start}");
    assert!(field(behind, 1) > field(big, 1), "{start}");
    assert_eq!(field(big, 2), c.node(), "{start}");
    assert_ne!(field(later, 1), "N/A", "{start}");
    assert_eq!(field(held, 1), "N/A", "{start}");
    let sdiag = c.ok("sdiag", &[]);
    assert!(
        sdiag.contains("Main schedule statistics (microseconds):"),
        "{sdiag}"
    );
    let bf_jobs = sdiag
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Total backfilled jobs (since last slurm start): ")
        })
        .expect("backfill line");
    assert!(bf_jobs.parse::<u32>().unwrap() >= 1, "{sdiag}");
    c.ok("scancel", &[&long.to_string(), &short.to_string()]);
    c.wait_state(big, &["RUNNING", "COMPLETED"], WAIT);
}

#[test]
fn submit_time_refusals_and_enforce_part_limits_no() {
    let c = TestCluster::start();
    let refused = c.run("sbatch", &["-t", "2:00:00", "--wrap", "true"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("Requested time limit is invalid (missing or exceeds some limit)")
    );
    let bad = c.run("sbatch", &["-C", "nvlink", "--wrap", "true"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Invalid feature specification"));
    let lic = c.run("sbatch", &["-L", "matlab", "--wrap", "true"]);
    assert!(String::from_utf8_lossy(&lic.stderr).contains("Invalid license specification"));
    drop(c);

    let c = TestCluster::start_with(Setup {
        top: "enforce_part_limits = \"NO\"",
        ..Setup::default()
    });
    let long = c.submit(&["-t", "2:00:00", "--wrap", "true"]);
    let nodes = c.submit(&["-N", "2", "--wrap", "true"]);
    let wide = c.submit(&["-n", "64", "--wrap", "true"]);
    wait_reason(&c, long, "PartitionTimeLimit");
    wait_reason(&c, nodes, "PartitionNodeLimit");
    wait_reason(&c, wide, "PartitionConfig");
    // Memory beyond every node is still refused, as Slurm does.
    let mem = c.run("sbatch", &["--mem=100G", "--wrap", "true"]);
    assert!(
        String::from_utf8_lossy(&mem.stderr)
            .contains("Requested node configuration is not available")
    );
}

#[test]
fn gres_devices_and_licenses() {
    let c = TestCluster::start_with(Setup {
        node_extra: "gres = \"gpu:2\"",
        extra_partitions: "[licenses]\nmatlab = 1\n",
        ..Setup::default()
    });
    assert!(c.ok("sinfo", &["-h", "-o", "%G"]).contains("gpu:2"));
    let a = c.submit(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 60"]);
    let b = c.submit(&[
        "--gpus=1",
        "-L",
        "matlab",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 60",
    ]);
    let x = c.submit(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", "true"]);
    let l = c.submit(&["-L", "matlab", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_state(a, &["RUNNING"], WAIT);
    c.wait_state(b, &["RUNNING"], WAIT);
    wait_reason(&c, x, "Resources");
    wait_reason(&c, l, "Licenses");
    let da = c.ok("scontrol", &["show", "job", "-d", &a.to_string()]);
    let db = c.ok("scontrol", &["show", "job", "-d", &b.to_string()]);
    assert!(da.contains("GRES=gpu:1(IDX:0)"), "{da}");
    assert!(db.contains("GRES=gpu:1(IDX:1)"), "{db}");
    assert!(da.contains("TresPerNode=gres:gpu:1"), "{da}");
    assert!(
        db.contains("TresPerJob=gres:gpu:1") && db.contains("Licenses=matlab:1"),
        "{db}"
    );
    assert!(
        c.ok("squeue", &["-h", "-o", "%b", "-j", &a.to_string()])
            .contains("gres:gpu:1")
    );
    let node = c.ok("scontrol", &["show", "node"]);
    assert!(
        node.contains("Gres=gpu:2") && node.contains("gres/gpu=2"),
        "{node}"
    );
    c.ok("scancel", &[&a.to_string(), &b.to_string()]);
    c.wait_state(x, &["RUNNING", "COMPLETED"], WAIT);
    c.wait_state(l, &["RUNNING", "COMPLETED"], WAIT);
}

#[test]
fn sprio_shows_factors_and_weights() {
    let c = TestCluster::start();
    let run = c.submit(&["-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(run, &["RUNNING"], WAIT);
    let p1 = c.submit(&["-n4", "--wrap", "true"]);
    let p2 = c.submit(&["-n1", "--nice=100", "--wrap", "true"]);
    wait_reason(&c, p1, "Resources");
    let out = c.ok("sprio", &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "          JOBID PARTITION     USER   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION"
    );
    assert_eq!(lines.len(), 3, "{out}");
    // The 4-CPU job ranks first (job size), the niced one last.
    assert!(lines[1].trim_start().starts_with(&p1.to_string()), "{out}");
    assert!(lines[2].trim_start().starts_with(&p2.to_string()), "{out}");
    let long = c.ok("sprio", &["-l", "-j", &p2.to_string()]);
    assert!(
        long.lines().nth(1).unwrap().contains(" 100 "),
        "NICE column: {long}"
    );
    let w = c.ok("sprio", &["-w"]);
    assert!(w.contains("Weights") && w.contains("10000"), "{w}");
    let o = c.ok("sprio", &["-h", "-o", "%i %J", "-j", &p1.to_string()]);
    assert_eq!(o.trim(), format!("{p1} 1000"));
    c.ok(
        "scancel",
        &[&run.to_string(), &p1.to_string(), &p2.to_string()],
    );
}

/// `--hint=nomultithread` on a node of two threads per core: whole cores are
/// allocated and reported (SLURM_CPUS_ON_NODE, NumCPUs), scontrol shows the
/// per-core request, and a job asking more threads per core than any node has is
/// refused at submission.
#[test]
fn hint_nomultithread_allocates_whole_cores() {
    let c = TestCluster::start_with(Setup {
        cpus: 8,
        node_extra: "sockets = 1\ncores_per_socket = 4\nthreads_per_core = 2",
        ..Setup::default()
    });
    let env =
        "echo $SLURM_CPUS_ON_NODE ${SLURM_NTASKS_PER_CORE:-unset} ${SLURM_THREADS_PER_CORE:-unset}";
    let nomt = c.submit(&[
        "--hint=nomultithread",
        "-n2",
        "-o",
        "nomt.out",
        "--wrap",
        env,
    ]);
    let plain = c.submit(&["-n2", "-o", "plain.out", "--wrap", env]);
    let tpc = c.submit(&[
        "--threads-per-core=1",
        "-c3",
        "-o",
        "tpc.out",
        "--wrap",
        env,
    ]);
    for id in [nomt, plain, tpc] {
        assert_eq!(c.wait_done(id), "COMPLETED");
    }
    assert_eq!(c.wait_file("nomt.out", |s| s.ends_with('\n')), "4 1 1\n");
    assert_eq!(
        c.wait_file("plain.out", |s| s.ends_with('\n')),
        "2 unset unset\n"
    );
    assert_eq!(c.wait_file("tpc.out", |s| s.ends_with('\n')), "6 unset 1\n");
    assert_eq!(c.show_field(nomt, "NumCPUs"), "4");
    assert_eq!(c.show_field(nomt, "ReqB:S:C:T"), "0:0:*:1");
    assert_eq!(c.show_field(nomt, "NtasksPerN:B:S:C"), "0:0:*:1");
    assert_eq!(c.show_field(plain, "ReqB:S:C:T"), "0:0:*:*");
    // No node has four threads per core.
    let (code, err) = c.fails_err("sbatch", &["--threads-per-core=4", "--wrap", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Requested node configuration is not available"),
        "{err}"
    );
    let (code, err) = c.fails_err("sbatch", &["--hint=fast", "--wrap", "true"]);
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains("unrecognized --hint argument \"fast\""),
        "{err}"
    );
    // #SBATCH directives and SBATCH_HINT take the same path.
    let s = c.script(
        "h.sh",
        &format!("#!/bin/sh\n#SBATCH --hint=nomultithread\n#SBATCH -n1\n{env}\n"),
    );
    let d = c.submit(&["-o", "dir.out", s.to_str().unwrap()]);
    assert_eq!(c.wait_done(d), "COMPLETED");
    assert_eq!(c.wait_file("dir.out", |s| s.ends_with('\n')), "2 1 1\n");
}

/// `--mincpus=N`: the job holds at least N CPUs on its node, as its environment and
/// scontrol report; more than any node has is refused at submission.
#[test]
fn mincpus_raises_the_allocation() {
    let c = TestCluster::start();
    let s = c.script(
        "m.sh",
        "#!/bin/sh\n#SBATCH --mincpus=3\necho $SLURM_CPUS_ON_NODE $SLURM_JOB_CPUS_PER_NODE\n",
    );
    let id = c.submit(&["-n1", "-o", "m.out", s.to_str().unwrap()]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(c.wait_file("m.out", |s| s.ends_with('\n')), "3 3\n");
    assert_eq!(c.show_field(id, "MinCPUsNode"), "3");
    let sid = id.to_string();
    assert_eq!(
        c.ok("squeue", &["-h", "-t", "all", "-j", &sid, "-o", "%c"])
            .trim(),
        "3"
    );
    assert_eq!(c.show_field(id, "NumCPUs"), "3");
    let (code, err) = c.fails_err("sbatch", &["--mincpus=5", "--wrap", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Requested node configuration is not available"),
        "{err}"
    );
}

/// `--tmp`: the node's configured `tmp_disk` is shown as `TmpDisk=` and sinfo `%d`;
/// a job asking for more than any node has is refused, one within it runs and shows
/// `MinTmpDiskNode=`.
#[test]
fn tmp_disk_is_a_node_minimum() {
    let c = TestCluster::start_with(Setup {
        node_extra: "tmp_disk = 2048",
        ..Setup::default()
    });
    let node = c.ok("scontrol", &["show", "node", &c.node()]);
    assert!(node.contains(" TmpDisk=2048 "), "{node}");
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%d"]).trim(), "2048");
    let id = c.submit(&["--tmp=2G", "-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(c.show_field(id, "MinTmpDiskNode"), "2G");
    let sid = id.to_string();
    assert_eq!(
        c.ok("squeue", &["-h", "-t", "all", "-j", &sid, "-o", "%d"])
            .trim(),
        "2G"
    );
    let (code, err) = c.fails_err("sbatch", &["--tmp=3G", "--wrap", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Requested node configuration is not available"),
        "{err}"
    );
}

/// `-k/--no-kill` is accepted (command line, `#SBATCH`, `SBATCH_NO_KILL`) and the job
/// runs as any other.
#[test]
fn no_kill_is_accepted() {
    let c = TestCluster::start();
    let s = c.script("k.sh", "#!/bin/sh\n#SBATCH --no-kill=off\ntrue\n");
    let a = c.submit(&["-k", "-o", "/dev/null", "--wrap", "true"]);
    let b = c.submit(&["-o", "/dev/null", s.to_str().unwrap()]);
    let o = c
        .cmd("sbatch")
        .env("SBATCH_NO_KILL", "")
        .args(["--parsable", "-o", "/dev/null", "--wrap", "true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let e: u32 = stdout(&o).trim().parse().unwrap();
    for id in [a, b, e] {
        assert_eq!(c.wait_done(id), "COMPLETED");
    }
}

/// `--time-min`: backfill starts a job whose full limit would delay a reserved one
/// with its limit cut to end before that start, as Slurm does; scontrol shows the
/// cut `TimeLimit=` and `TimeMin=`.
#[test]
fn time_min_backfills_with_a_shorter_limit() {
    let c = TestCluster::start();
    let long = c.submit(&["-n3", "-t", "10", "-o", "/dev/null", "--wrap", "sleep 300"]);
    c.wait_state(long, &["RUNNING"], WAIT);
    let big = c.submit(&["-n4", "-t", "5", "-o", "/dev/null", "--wrap", "true"]);
    let stiff = c.submit(&["-t", "30", "-o", "/dev/null", "--wrap", "sleep 300"]);
    let flex = c.submit(&[
        "-t",
        "30",
        "--time-min=5",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 300",
    ]);
    assert_eq!(c.show_field(flex, "TimeMin"), "00:05:00");
    assert_eq!(c.show_field(stiff, "TimeMin"), "N/A");
    c.wait_state(flex, &["RUNNING"], WAIT);
    wait_reason(&c, big, "Resources");
    // The long job ends within 10 minutes of its start: flex was cut to the whole
    // minutes left (9 or 10), never below its minimum.
    let limit = c.show_field(flex, "TimeLimit");
    assert!(
        ["00:09:00", "00:10:00"].contains(&limit.as_str()),
        "{limit}"
    );
    assert_eq!(c.state(stiff).as_deref(), Some("PENDING"));
    // A time-min above the limit is refused.
    let (code, err) = c.fails_err("sbatch", &["-t", "5", "--time-min=10", "--wrap", "true"]);
    assert_eq!(code, 255, "{err}");
    assert!(err.contains("Invalid time-min specification"), "{err}");
    c.ok(
        "scancel",
        &[
            &long.to_string(),
            &flex.to_string(),
            &stiff.to_string(),
            &big.to_string(),
        ],
    );
}

/// `--priority=N` from an operator (the controller's own user here) fixes the job's
/// priority; a bad value is refused by sbatch.
#[test]
fn priority_set_at_submission() {
    let c = TestCluster::start();
    let s = c.script("p.sh", "#!/bin/sh\n#SBATCH --priority=4242\ntrue\n");
    let id = c.submit(&["--begin=now+1hour", "-o", "/dev/null", s.to_str().unwrap()]);
    assert_eq!(c.show_field(id, "Priority"), "4242");
    let held = c.submit(&["--priority=0", "-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.show_field(held, "Reason"), "JobHeldAdmin");
    let (code, err) = c.fails_err("sbatch", &["--priority=high", "--wrap", "true"]);
    assert_eq!(code, 255, "{err}");
    assert!(err.contains("Invalid priority: high"), "{err}");
    c.ok("scancel", &[&id.to_string(), &held.to_string()]);
}

/// `--exclusive=user`: the job shares its node with the same user's jobs (both run at
/// once here) and scontrol shows `OverSubscribe=USER`; `--exclusive=mcs` is refused
/// since sluice has no MCS plugin.
#[test]
fn exclusive_user_and_mcs() {
    let c = TestCluster::start();
    let a = c.submit(&["--exclusive=user", "-o", "/dev/null", "--wrap", "sleep 300"]);
    let b = c.submit(&["-o", "/dev/null", "--wrap", "sleep 300"]);
    c.wait_state(a, &["RUNNING"], WAIT);
    c.wait_state(b, &["RUNNING"], WAIT);
    assert_eq!(c.show_field(a, "OverSubscribe"), "USER");
    assert_eq!(c.show_field(b, "OverSubscribe"), "OK");
    let (code, err) = c.fails_err("sbatch", &["--exclusive=mcs", "--wrap", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("MCS plugin"), "{err}");
    c.ok("scancel", &[&a.to_string(), &b.to_string()]);
}

/// Issue 19 through the live controller: on two 2-CPU nodes, a 4-task job without
/// `-N` (Slurm lets it span nodes) waits behind a job holding one node. It gets a
/// reservation over both nodes (`squeue --start` shows a time and both nodes), 1-node
/// jobs that would still run at that time are not backfilled, a short one that ends
/// before it is, and the 4-task job starts no later than its reserved start, before
/// the jobs that were behind it.
#[test]
fn a_job_over_two_nodes_keeps_its_reservation() {
    use crate::harness::sshd::{NodeSetup, SshCluster};
    let setup = [NodeSetup::new("r1"), NodeSetup::new("r2")];
    let Some(c) = SshCluster::start_top(&setup, 30, "sched_interval = 1") else {
        return;
    };
    c.wait_all_idle();
    let hold = c.submit(&[
        "-w",
        "r1",
        "-n2",
        "-t",
        "1",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 15",
    ]);
    c.wait_state(hold, &["RUNNING"], WAIT);
    let big = c.submit(&["-n4", "-t", "1", "-o", "/dev/null", "--wrap", "sleep 2"]);
    wait_reason(&c, big, "Resources");
    // 1-node jobs that would hold r2 past big's start (5 minutes), and one that ends
    // long before it (10 s limit).
    let stream: Vec<u32> = (0..3)
        .map(|_| c.submit(&["-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 2"]))
        .collect();
    let short = c.submit(&["-n1", "-t", "0:10", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let planned = wait_until("big's reserved start", WAIT, || {
        let out = c.ok(
            "squeue",
            &["--start", "-h", "-o", "%i %S %Y", "-j", &big.to_string()],
        );
        let f: Vec<String> = out.split_whitespace().map(String::from).collect();
        (f.len() == 3 && f[1] != "N/A").then_some(f)
    });
    assert_eq!(planned[2], "r[1-2]", "{planned:?}");
    let sched = |id: u32| c.field(&id.to_string(), "StartTime").unwrap_or_default();
    // The short job fits before the reservation: backfilled on r2.
    c.wait_state(short, &["RUNNING", "COMPLETED"], WAIT);
    for &s in &stream {
        assert_eq!(
            c.state(s).as_deref(),
            Some("PENDING"),
            "job {s} passed job {big}"
        );
    }
    c.wait_state(big, &["RUNNING", "COMPLETED"], Duration::from_secs(90));
    let started = sched(big);
    // ISO times compare as strings.
    assert!(
        started <= planned[1],
        "started {started}, reserved {}",
        planned[1]
    );
    for &s in &stream {
        c.wait_state(s, &["RUNNING", "COMPLETED"], Duration::from_secs(90));
        assert!(
            sched(s) >= started,
            "job {s} started {} before {started}",
            sched(s)
        );
    }
}
