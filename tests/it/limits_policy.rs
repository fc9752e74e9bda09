//! Association and QOS limits through the real front-ends: each limit holds the job
//! with Slurm's exact pending reason in `squeue`, and the job starts once the limit
//! allows it; submit limits refuse with Slurm's error.
//!
//! One cluster serves several scenarios, each under its own account so that their
//! counts do not mix; the holding jobs are cancelled between scenarios.

use crate::harness::*;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn reason(c: &TestCluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-o", "%r", "-j", &id.to_string()])
        .trim()
        .to_string()
}

fn wait_reason(c: &TestCluster, id: u32, want: &str) {
    wait_until(&format!("job {id} reason {want}"), WAIT, || {
        (reason(c, id) == want).then_some(())
    });
}

fn sacctmgr(c: &TestCluster, args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    c.ok("sacctmgr", &a);
}

/// An account `name` with root (the test's user) associated to it.
fn account(c: &TestCluster, name: &str) {
    sacctmgr(c, &format!("-i add account {name}"));
    sacctmgr(c, &format!("-i add user root Account={name}"));
}

/// Submits `holder` (which must start) and then `waiter` under `acct`, checks the
/// waiter's reason, lifts the hold by cancelling the holder, and checks the waiter
/// then starts; cleans up.
fn holds(c: &TestCluster, acct: &str, holder: &[&str], waiter: &[&str], want: &str) {
    let a = format!("--account={acct}");
    let mut h = vec![a.as_str(), "-o", "/dev/null"];
    h.extend_from_slice(holder);
    h.extend_from_slice(&["--wrap", "sleep 300"]);
    let hid = c.submit(&h);
    c.wait_state(hid, &["RUNNING"], WAIT);
    let mut w = vec![a.as_str(), "-o", "/dev/null"];
    w.extend_from_slice(waiter);
    w.extend_from_slice(&["--wrap", "sleep 300"]);
    let wid = c.submit(&w);
    wait_reason(c, wid, want);
    c.ok("scancel", &[&hid.to_string()]);
    c.wait_state(wid, &["RUNNING"], WAIT);
    c.ok("scancel", &[&wid.to_string()]);
    c.wait_state(wid, &["CANCELLED"], WAIT);
}

#[test]
fn association_limits_hold_jobs_with_slurms_reasons() {
    let c = TestCluster::start_with(Setup {
        node_extra: "gres = \"gpu:2\"",
        ..Setup::default()
    });
    account(&c, "a1");
    sacctmgr(&c, "-i modify user root where account=a1 set MaxJobs=1");
    holds(&c, "a1", &[], &[], "AssocMaxJobsLimit");

    account(&c, "a2");
    sacctmgr(&c, "-i modify account a2 set GrpJobs=1");
    holds(&c, "a2", &[], &[], "AssocGrpJobsLimit");

    account(&c, "a3");
    sacctmgr(&c, "-i modify account a3 set GrpTRES=cpu=2");
    holds(&c, "a3", &["-n2"], &["-n1"], "AssocGrpCpuLimit");

    account(&c, "a4");
    sacctmgr(&c, "-i modify account a4 set GrpTRES=gres/gpu=1");
    holds(
        &c,
        "a4",
        &["--gres=gpu:1"],
        &["--gres=gpu:1"],
        "AssocGrpGRES",
    );

    account(&c, "a5");
    sacctmgr(&c, "-i modify account a5 set GrpTRESRunMins=cpu=100");
    holds(
        &c,
        "a5",
        &["-t", "60"],
        &["-t", "60"],
        "AssocGrpCPURunMinutesLimit",
    );

    // Per-job limits: the job waits until the limit is raised.
    account(&c, "a6");
    sacctmgr(
        &c,
        "-i modify user root where account=a6 set MaxWall=00:10:00 MaxTRES=cpu=1",
    );
    let long = c.submit(&[
        "--account=a6",
        "-t",
        "30",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    wait_reason(&c, long, "AssocMaxWallDurationPerJobLimit");
    let wide = c.submit(&[
        "--account=a6",
        "-n2",
        "-t",
        "5",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    wait_reason(&c, wide, "AssocMaxCpuPerJobLimit");
    sacctmgr(
        &c,
        "-i modify user root where account=a6 set MaxWall=-1 MaxTRES=cpu=-1",
    );
    c.wait_done(long);
    c.wait_done(wide);

    // A job with no --time gets MaxWall as its limit.
    let capped = c.submit(&["--account=a6", "-H", "--wrap", "true"]);
    assert_eq!(c.show_field(capped, "TimeLimit"), "01:00:00");
    sacctmgr(&c, "-i modify user root where account=a6 set MaxWall=5");
    let capped = c.submit(&["--account=a6", "-H", "--wrap", "true"]);
    assert_eq!(c.show_field(capped, "TimeLimit"), "00:05:00");
    c.ok("scancel", &["--me"]);
}

#[test]
fn qos_limits_and_submit_refusals() {
    let c = TestCluster::start_with(Setup {
        node_extra: "gres = \"gpu:2\"",
        top: "accounting_storage_enforce = \"associations,limits,qos,safe\"",
        ..Setup::default()
    });
    account(&c, "q");
    sacctmgr(&c, "-i add qos perjob MaxJobsPerUser=1");
    sacctmgr(&c, "-i add qos grp GrpTRES=cpu=1");
    sacctmgr(&c, "-i add qos gpus MaxTRESPerUser=gres/gpu=1");
    sacctmgr(
        &c,
        "-i modify user root where account=q set QOS=normal,perjob,grp,gpus",
    );
    holds(
        &c,
        "q",
        &["--qos=perjob"],
        &["--qos=perjob"],
        "QOSMaxJobsPerUserLimit",
    );
    holds(&c, "q", &["--qos=grp"], &["--qos=grp"], "QOSGrpCpuLimit");
    holds(
        &c,
        "q",
        &["--qos=gpus", "--gpus=1"],
        &["--qos=gpus", "--gpus=1"],
        "QOSMaxGRESPerUser",
    );

    // safe: a job that could not finish within GrpTRESMins does not start.
    account(&c, "m");
    sacctmgr(&c, "-i modify account m set GrpTRESMins=gres/gpu=10");
    let j = c.submit(&[
        "--account=m",
        "--gres=gpu:1",
        "-t",
        "60",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    wait_reason(&c, j, "AssocGrpGRESMinutes");
    let short = c.submit(&[
        "--account=m",
        "--gres=gpu:1",
        "-t",
        "5",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    c.wait_done(short);
    c.ok("scancel", &[&j.to_string()]);
    // The same with CPU- and billing-minutes (the billing of a job without
    // TRESBillingWeights is its CPU count): a 60-minute job cannot finish within 10.
    account(&c, "cm");
    sacctmgr(&c, "-i modify account cm set GrpTRESMins=cpu=10");
    account(&c, "bm");
    sacctmgr(&c, "-i modify account bm set GrpTRESMins=billing=10");
    let long = |acct: &str| {
        let a = format!("--account={acct}");
        c.submit(&[&a, "-t", "60", "-o", "/dev/null", "--wrap", "true"])
    };
    let (cm, bm) = (long("cm"), long("bm"));
    wait_reason(&c, cm, "AssocGrpCPUMinutesLimit");
    wait_reason(&c, bm, "AssocGrpBillingMinutes");
    c.ok("scancel", &[&cm.to_string(), &bm.to_string()]);

    // Submit limits refuse with Slurm's error; nothing is queued.
    account(&c, "s");
    sacctmgr(
        &c,
        "-i modify user root where account=s set MaxSubmitJobs=1",
    );
    let first = c.submit(&["--account=s", "-H", "--wrap", "true"]);
    let o = c.run("sbatch", &["--account=s", "-H", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
        ),
        "{}",
        stderr(&o)
    );
    c.ok("scancel", &[&first.to_string()]);
    c.wait_state(first, &["CANCELLED"], WAIT);
    let again = c.submit(&["--account=s", "-H", "--wrap", "true"]);
    c.ok("scancel", &[&again.to_string()]);

    // DenyOnLimit: what would only pend is refused at submit.
    sacctmgr(&c, "-i add qos strict MaxTRES=cpu=1 Flags=DenyOnLimit");
    sacctmgr(&c, "-i modify user root where account=q set QOS+=strict");
    let o = c.run(
        "sbatch",
        &["--account=q", "--qos=strict", "-n2", "--wrap", "true"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Job violates accounting/QOS policy"),
        "{}",
        stderr(&o)
    );
}

/// The per-job and per-node TRES limits, QOS MinTRES and the remaining submit limits,
/// each with Slurm's reason or error; and sacctmgr refusing to delete an account that
/// has active jobs or is a user's default.
#[test]
fn per_node_minutes_min_tres_and_submit_limits() {
    let c = TestCluster::start_with(Setup {
        node_extra: "gres = \"gpu:2\"",
        ..Setup::default()
    });
    let pend = |acct: &str, extra: &[&str]| {
        let a = format!("--account={acct}");
        let mut v = vec![a.as_str(), "-o", "/dev/null"];
        v.extend_from_slice(extra);
        v.extend_from_slice(&["--wrap", "true"]);
        c.submit(&v)
    };

    account(&c, "pn");
    sacctmgr(
        &c,
        "-i modify user root where account=pn set MaxTRESPerNode=cpu=1",
    );
    let wide = pend("pn", &["-n2", "-N1", "-t", "5"]);
    wait_reason(&c, wide, "AssocMaxCpuPerNode");
    sacctmgr(
        &c,
        "-i modify user root where account=pn set MaxTRESPerNode=cpu=-1",
    );
    c.wait_done(wide);

    account(&c, "tm");
    sacctmgr(&c, "-i modify account tm set MaxTRESMins=cpu=30");
    let long = pend("tm", &["-n1", "-t", "60"]);
    wait_reason(&c, long, "AssocMaxCpuMinutesPerJobLimit");
    // 2 CPUs × 10 minutes fit under 30 CPU-minutes.
    let fits = pend("tm", &["-n2", "-t", "10"]);
    c.wait_done(fits);
    sacctmgr(&c, "-i modify account tm set MaxTRESMins=cpu=-1");
    c.wait_done(long);

    account(&c, "mn");
    sacctmgr(&c, "-i add qos atleast2 MinTRES=cpu=2");
    sacctmgr(&c, "-i add qos gpuonly MinTRES=gres/gpu=1");
    sacctmgr(
        &c,
        "-i modify user root where account=mn set QOS=normal,atleast2,gpuonly",
    );
    let small = pend("mn", &["--qos=atleast2", "-n1", "-t", "5"]);
    wait_reason(&c, small, "QOSMinCpuNotSatisfied");
    let nogpu = pend("mn", &["--qos=gpuonly", "-n1", "-t", "5"]);
    wait_reason(&c, nogpu, "QOSMinGRES");
    let ok = pend("mn", &["--qos=atleast2", "-n2", "-t", "5"]);
    c.wait_done(ok);
    let show = c.ok(
        "sacctmgr",
        &["-n", "-P", "show", "qos", "atleast2", "format=Name,MinTRES"],
    );
    assert_eq!(show, "atleast2|cpu=2\n");
    c.ok("scancel", &[&small.to_string(), &nogpu.to_string()]);

    // GrpSubmit on an account and MaxSubmitJobsPerUser on a QOS refuse at submit.
    let refused = |args: &[&str]| {
        let o = c.run("sbatch", args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).contains("Job violates accounting/QOS policy"),
            "{}",
            stderr(&o)
        );
    };
    account(&c, "gs");
    sacctmgr(&c, "-i modify account gs set GrpSubmit=1");
    let first = c.submit(&["--account=gs", "-H", "--wrap", "true"]);
    refused(&["--account=gs", "-H", "--wrap", "true"]);
    sacctmgr(&c, "-i add qos onesub MaxSubmitJobsPerUser=1");
    sacctmgr(&c, "-i modify user root where account=mn set QOS+=onesub");
    let q1 = c.submit(&["--account=mn", "--qos=onesub", "-H", "--wrap", "true"]);
    refused(&["--account=mn", "--qos=onesub", "-H", "--wrap", "true"]);

    // An account with an active job is not deleted, nor is a user's default account
    // while they have another; nothing changes.
    let (code, err) = c.fails_err("sacctmgr", &["-i", "delete", "account", "gs"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("Error with request: Job(s) active, cancel job(s) before remove"),
        "{err}"
    );
    assert!(err.contains(&format!("JobID = {first:<10}")), "{err}");
    c.ok("scancel", &[&first.to_string(), &q1.to_string()]);
    c.wait_state(first, &["CANCELLED"], WAIT);
    sacctmgr(&c, "-i add account solo");
    sacctmgr(&c, "-i add user nobody Account=solo,gs DefaultAccount=solo");
    let (code, err) = c.fails_err("sacctmgr", &["-i", "delete", "account", "solo"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("You can not remove the default account of a user"),
        "{err}"
    );
    assert!(
        c.ok(
            "sacctmgr",
            &["-n", "-P", "show", "assoc", "format=Account,User"]
        )
        .contains("solo|nobody\n")
    );
    sacctmgr(&c, "-i modify user nobody set DefaultAccount=gs");
    let out = c.ok("sacctmgr", &["-i", "delete", "account", "solo"]);
    assert!(out.contains("Deleting accounts...\n  solo\n"), "{out}");
}

/// A partition's QOS (`qos =` in the config, Slurm's partition `QOS=`): its limits
/// hold the jobs of that partition with the QOS reasons, win over the job's QOS unless
/// that one has OverPartQOS, cap a job's default time limit, and `scontrol show
/// partition` names it.
#[test]
fn partition_qos_limits_jobs_of_its_partition() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"lim\"\nnodes = \"NODE\"\nqos = \"plim\"\n",
        ..Setup::default()
    });
    let show = c.ok("scontrol", &["show", "partition", "lim"]);
    assert!(show.contains(" QoS=plim\n"), "{show}");
    let show = c.ok("scontrol", &["show", "partition", "debug"]);
    assert!(show.contains(" QoS=N/A\n"), "{show}");

    account(&c, "pa");
    sacctmgr(&c, "-i add qos plim MaxJobsPerUser=1 MaxWall=00:20:00");
    sacctmgr(&c, "-i add qos over MaxJobsPerUser=2 Flags=OverPartQOS");
    sacctmgr(
        &c,
        "-i modify user root where account=pa set QOS=normal,over",
    );
    holds(
        &c,
        "pa",
        &["-p", "lim"],
        &["-p", "lim"],
        "QOSMaxJobsPerUserLimit",
    );

    // The partition QOS's MaxWall caps a job that gives no --time there only.
    let capped = c.submit(&["--account=pa", "-p", "lim", "-H", "--wrap", "true"]);
    assert_eq!(c.show_field(capped, "TimeLimit"), "00:20:00");
    let free = c.submit(&["--account=pa", "-H", "--wrap", "true"]);
    assert_eq!(c.show_field(free, "TimeLimit"), "01:00:00");
    c.ok("scancel", &[&capped.to_string(), &free.to_string()]);

    // With OverPartQOS the job QOS's MaxJobsPerUser=2 wins: two run, the third waits.
    let sub = |part: bool| {
        let mut v = vec!["--account=pa", "--qos=over", "-o", "/dev/null"];
        if part {
            v.extend_from_slice(&["-p", "lim"]);
        }
        v.extend_from_slice(&["--wrap", "sleep 300"]);
        c.submit(&v)
    };
    let a = sub(true);
    let b = sub(true);
    c.wait_state(a, &["RUNNING"], WAIT);
    c.wait_state(b, &["RUNNING"], WAIT);
    let third = sub(true);
    wait_reason(&c, third, "QOSMaxJobsPerUserLimit");
    c.ok("scancel", &["--me"]);
}

/// A partition's TRESBillingWeights make one billing figure: scontrol's and sacct's
/// `billing=`, the `GrpTRES=billing=` limit (AssocGrpBilling: the same job in a
/// partition without weights bills its CPUs and fits) and sshare's GrpTRESRaw.
#[test]
fn billing_weights_hold_grp_billing_and_show_in_scontrol_sacct_sshare() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"heavy\"\nnodes = \"NODE\"\nbilling_weights = \"CPU=3.0,Mem=1G\"\n",
        ..Setup::default()
    });
    let show = c.ok("scontrol", &["show", "partition", "heavy"]);
    assert!(
        show.contains("\n   TRESBillingWeights=CPU=3.0,Mem=1G\n"),
        "{show}"
    );
    account(&c, "bw");
    sacctmgr(&c, "-i modify account bw set GrpTRES=billing=10");
    // 2 CPUs and 1 GiB in heavy: 2 × 3 + 1 = 7.
    let job = |part: &str| {
        c.submit(&[
            "--account=bw",
            "-p",
            part,
            "-n2",
            "--mem=1024",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ])
    };
    let first = job("heavy");
    c.wait_state(first, &["RUNNING"], WAIT);
    assert_eq!(c.show_field(first, "TRES"), "cpu=2,mem=1G,node=1,billing=7");
    let second = job("heavy");
    wait_reason(&c, second, "AssocGrpBilling");
    let cheap = job("debug");
    c.wait_state(cheap, &["RUNNING"], WAIT);
    assert_eq!(c.show_field(cheap, "TRES"), "cpu=2,mem=1G,node=1,billing=2");
    // GrpTRESRaw counts what the running job used so far: 7 billing units for 9 s
    // make a billing-minute.
    std::thread::sleep(Duration::from_secs(10));
    let raw = c.ok(
        "sshare",
        &["-n", "-P", "-A", "bw", "-o", "Account,ID,GrpTRESRaw"],
    );
    let row = raw.lines().next().unwrap_or_default().to_string();
    let f: Vec<&str> = row.split('|').collect();
    assert_eq!(f[0], " bw", "{raw}");
    assert!(f[1].parse::<u32>().is_ok_and(|id| id > 1), "{raw}");
    let billing: u64 = field_of(f[2], "billing");
    assert!((1..=3).contains(&billing), "{raw}");
    assert!(field_of(f[2], "cpu") <= billing, "{raw}");
    c.ok("scancel", &[&first.to_string(), &cheap.to_string()]);
    c.wait_state(second, &["RUNNING"], WAIT);
    c.ok("scancel", &[&second.to_string()]);
    let alloc = c.ok(
        "sacct",
        &[
            "-n",
            "-P",
            "-X",
            "-j",
            &first.to_string(),
            "-o",
            "AllocTRES",
        ],
    );
    assert_eq!(alloc.trim(), "billing=7,cpu=2,mem=1G,node=1");
}

/// The count of `name` in a TRES list `a=1,b=2`.
fn field_of(list: &str, name: &str) -> u64 {
    list.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}
