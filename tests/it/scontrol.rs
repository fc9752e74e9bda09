//! scontrol through the real front-end: show job/node/partition/config, hostnames and
//! hostlist, hold/release/requeue, `update` of jobs and nodes, and bad input.

use crate::harness::*;
use std::time::Duration;

#[test]
fn show_job_node_partition_config_and_hostlists() {
    let c = TestCluster::start_with(Setup {
        top: "slurm_version = \"23.02.7\"",
        ..Setup::default()
    });
    let node = c.node();
    let id = c.submit(&[
        "-H", "-J", "shown", "-n", "2", "-t", "1:30", "--wrap", "true",
    ]);
    let out = c.ok("scontrol", &["show", "job", &id.to_string()]);
    let first = out.lines().next().unwrap();
    assert_eq!(first, format!("JobId={id} JobName=shown"));
    for want in [
        "JobState=PENDING Reason=JobHeldUser Dependency=(null)",
        "TimeLimit=00:02:00",
        "NumNodes=1 NumCPUs=2 NumTasks=2 CPUs/Task=1",
        "Partition=debug",
        &format!("WorkDir={}", c.work.display()),
        "StdIn=/dev/null",
    ] {
        assert!(out.contains(want), "{want} not in\n{out}");
    }
    // -o: one line; `show job` without id lists every job.
    let one = c.ok("scontrol", &["-o", "show", "job", &id.to_string()]);
    assert_eq!(one.lines().count(), 1);
    assert!(
        one.starts_with(&format!("JobId={id} JobName=shown UserId=")),
        "{one}"
    );
    assert!(
        c.ok("scontrol", &["show", "job"])
            .contains(&format!("JobId={id} "))
    );

    let out = c.ok("scontrol", &["show", "node", &node]);
    assert!(out.starts_with(&format!("NodeName={node} Arch=")), "{out}");
    for want in [
        "CPUTot=4",
        "RealMemory=4000",
        "State=IDLE",
        "Partitions=debug",
        "Version=23.02.7",
    ] {
        assert!(out.contains(want), "{want} not in\n{out}");
    }
    assert!(
        c.ok("scontrol", &["show", "node"])
            .contains(&format!("NodeName={node} "))
    );
    let out = c.ok("scontrol", &["show", "partition", "debug"]);
    assert!(out.starts_with("PartitionName=debug\n"), "{out}");
    for want in [
        "Default=YES",
        "MaxTime=01:00:00",
        &format!("Nodes={node}"),
        "State=UP",
        "TotalCPUs=4",
    ] {
        assert!(out.contains(want), "{want} not in\n{out}");
    }
    let out = c.ok("scontrol", &["show", "config"]);
    assert!(out.starts_with("Configuration data as of "), "{out}");
    for want in [
        "ClusterName             = testc\n",
        "KillWait                = 2 sec\n",
        "MinJobAge               = 300 sec\n",
        "SLURM_VERSION           = 23.02.7\n",
        "PriorityWeightFairShare = ",
        "PriorityWeightTRES      = (null)\n",
        "SlurmctldPort           = 6817\n",
    ] {
        assert!(out.contains(want), "{want:?} not in\n{out}");
    }
    // Each key once (scripts split these lines into a map).
    let mut keys: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim()))
        .collect();
    let all = keys.len();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), all, "a key repeats in\n{out}");
    // Hostlists: expand (prefix `hostname` accepted), compress in input order, sorted.
    assert_eq!(
        c.ok("scontrol", &["show", "hostnames", "node-[001-003,007]"]),
        "node-001\nnode-002\nnode-003\nnode-007\n"
    );
    assert_eq!(
        c.ok("scontrol", &["show", "hostname", "a[1-2],b"]),
        "a1\na2\nb\n"
    );
    assert_eq!(
        c.ok(
            "scontrol",
            &["show", "hostlist", "node1,node2,node10,node3"]
        ),
        "node[1-2,10,3]\n"
    );
    assert_eq!(
        c.ok(
            "scontrol",
            &["show", "hostlistsorted", "node1,node2,node10,node3"]
        ),
        "node[1-3,10]\n"
    );
    // Without a list, hostnames reads SLURM_NODELIST as inside a job.
    let o = c
        .cmd("scontrol")
        .args(["show", "hostnames"])
        .env("SLURM_NODELIST", "gpu[1-2]")
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "gpu1\ngpu2\n");
    // ... which a job sees.
    let j = c.submit(&["-n", "1", "--wrap", "scontrol show hostnames"]);
    c.wait_done(j);
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{j}.out"))).unwrap(),
        format!("{node}\n")
    );
}

#[test]
fn hold_release_requeue_and_job_updates() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"batch\"\nnodes = \"NODE\"\n",
        ..Setup::default()
    });
    let id = c.submit(&["-H", "-t", "30", "--wrap", "echo ran $SLURM_JOB_NAME"]);
    let sid = id.to_string();
    let jid = format!("JobId={id}");
    // Updates while pending: name, limit (lower), partition, nice.
    c.ok(
        "scontrol",
        &[
            "update",
            &jid,
            "JobName=renamed",
            "TimeLimit=20",
            "Partition=batch",
            "Nice=50",
        ],
    );
    // Case-insensitive keys, as Slurm.
    c.ok(
        "scontrol",
        &["update", &format!("jobid={id}"), "timelimit=0:15:00"],
    );
    assert_eq!(c.show_field(id, "JobName"), "renamed");
    assert_eq!(c.show_field(id, "TimeLimit"), "00:15:00");
    // Relative changes (`TimeLimit-=M`, `TimeLimit+=M`).
    c.ok("scontrol", &["update", &jid, "TimeLimit-=5"]);
    assert_eq!(c.show_field(id, "TimeLimit"), "00:10:00");
    c.ok("scontrol", &["update", &jid, "TimeLimit+=5"]);
    assert_eq!(c.show_field(id, "TimeLimit"), "00:15:00");
    assert_eq!(c.show_field(id, "Partition"), "batch");
    assert_eq!(c.show_field(id, "Nice"), "50");
    // Priority= from root (an operator): set, shown, and it resets Nice.
    let later = c.submit(&["--begin=now+1hour", "--wrap", "true"]);
    c.ok(
        "scontrol",
        &["update", &format!("JobId={later}"), "Priority=4321"],
    );
    assert_eq!(c.show_field(later, "Priority"), "4321");
    assert_eq!(c.show_field(later, "Nice"), "0");
    let (_, _, e) = c.fails(
        "scontrol",
        &["update", &format!("JobId={later}"), "Priority=lots"],
    );
    assert!(e.contains("Invalid Priority value: lots"), "{e}");
    c.ok("scancel", &[&later.to_string()]);
    // hold/uhold/release.
    c.ok("scontrol", &["release", &sid]);
    c.wait_done(id);
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap(),
        "ran renamed\n"
    );
    let p = c.submit(&["--begin=now+1hour", "--wrap", "true"]);
    c.ok("scontrol", &["hold", &p.to_string()]);
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &p.to_string(), "-o", "%r %p"]),
        "JobHeldAdmin 0.00000000000000\n"
    );
    c.ok("scontrol", &["release", &p.to_string()]);
    c.ok("scontrol", &["uhold", &p.to_string()]);
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &p.to_string(), "-o", "%r"]),
        "JobHeldUser\n"
    );
    // Holding a finished job fails with Slurm's text.
    let o = c.run("scontrol", &["hold", &sid]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "Job is no longer pending execution for job {id}\nslurm_suspend error: Job is no longer pending execution\n"
        )
    );
    // requeue: a running job goes back to PENDING and runs again; requeuehold holds it.
    c.script(
        "count.sh",
        "#!/bin/sh\necho run $SLURM_RESTART_COUNT\nwhile [ ! -e go ]; do sleep 0.05; done\n",
    );
    let r = c.submit(&["--open-mode=append", "count.sh"]);
    c.wait_state(r, &["RUNNING"], Duration::from_secs(20));
    c.wait_file(&format!("slurm-{r}.out"), |s| s.contains("run"));
    c.ok("scontrol", &["requeue", &r.to_string()]);
    c.wait_state(r, &["PENDING"], Duration::from_secs(20));
    assert_eq!(c.show_field(r, "Restarts"), "1");
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(
        c.wait_state(r, &["COMPLETED"], Duration::from_secs(30)),
        "COMPLETED"
    );
    let out = std::fs::read_to_string(c.path(&format!("slurm-{r}.out"))).unwrap();
    assert_eq!(
        out.lines().filter(|l| l.starts_with("run")).count(),
        2,
        "{out}"
    );
    // update of a finished job, and unknown jobs.
    let o = c.run("scontrol", &["update", &jid, "TimeLimit=5"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Job/step already completing or completed"),
        "{}",
        stderr(&o)
    );
    for cmd in ["hold", "release"] {
        let (code, _, err) = c.fails("scontrol", &[cmd, "999999"]);
        assert_eq!(code, 1);
        assert_eq!(
            err,
            "Invalid job id specified for job 999999\nslurm_suspend error: Invalid job id specified\n"
        );
    }
}

#[test]
fn node_drain_down_resume_with_reasons() {
    let c = TestCluster::start();
    let node = c.node();
    let n = format!("NodeName={node}");
    // A reason is required.
    let (code, out, err) = c.fails("scontrol", &["update", &n, "State=DRAIN"]);
    assert_eq!(code, 1);
    assert_eq!(
        format!("{out}{err}"),
        "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
    );
    c.ok(
        "scontrol",
        &["update", &n, "State=DRAIN", "Reason=disk swap"],
    );
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t %T"]), "drain drained\n");
    let r = c.ok("sinfo", &["-R", "-h"]);
    assert!(
        r.starts_with("disk swap ") && r.trim_end().ends_with(&node),
        "{r}"
    );
    let shown = c.ok("scontrol", &["show", "node", &node]);
    assert!(shown.contains("State=IDLE+DRAIN "), "{shown}");
    assert!(shown.contains("Reason=disk swap ["), "{shown}");
    // No new job starts on a drained node.
    let id = c.submit(&["--wrap", "true"]);
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%t"]),
        "PD\n"
    );
    c.ok("scontrol", &["update", &n, "State=RESUME"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t"]), "idle\n");
    // DOWN kills what runs there: NODE_FAIL (a requeueable job would go back to the
    // queue instead, as Slurm does).
    let running = c.submit(&["--no-requeue", "--wrap", "echo started; sleep 100"]);
    c.wait_file(&format!("slurm-{running}.out"), |s| s.contains("started"));
    c.ok(
        "scontrol",
        &["update", &n, "State=DOWN", "Reason=maintenance"],
    );
    assert_eq!(c.wait_done(running), "NODE_FAIL");
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t"]), "down\n");
    c.ok("scontrol", &["update", &n, "State=RESUME"]);
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t"]), "idle\n");
    // Bad input.
    let (code, _, err) = c.fails(
        "scontrol",
        &["update", "NodeName=nosuch", "State=DRAIN", "Reason=x"],
    );
    assert_eq!(
        (code, err.as_str()),
        (1, "slurm_update error: Invalid node name specified\n")
    );
    let (code, _, err) = c.fails("scontrol", &["update", &n, "State=BOGUS", "Reason=x"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("Invalid input: State=BOGUS\n"), "{err}");
}

#[test]
fn bad_input_and_unknown_entities() {
    let c = TestCluster::start();
    let id = c.submit(&["-H", "--wrap", "true"]);
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["show", "job", "999999"],
            "",
            "slurm_load_jobs error: Invalid job id specified\n",
        ),
        (&["show", "node", "nosuch"], "Node nosuch not found\n", ""),
        (
            &["show", "partition", "nosuch"],
            "Partition nosuch not found\n",
            "",
        ),
        (&["bogus"], "", "invalid keyword: bogus\n"),
        (
            &["show", "bogus"],
            "",
            "invalid entity:bogus for keyword:show\n",
        ),
    ];
    for (args, out, err) in cases {
        let (code, o, e) = c.fails("scontrol", args);
        assert_eq!((code, o.as_str(), e.as_str()), (1, *out, *err), "{args:?}");
    }
    let j = format!("JobId={id}");
    let (_, _, e) = c.fails("scontrol", &["update", &j, "TimeLimit=abc"]);
    assert!(e.starts_with("Invalid TimeLimit value: abc"), "{e}");
    let (_, _, e) = c.fails("scontrol", &["update", &j, "Partition=nosuch"]);
    assert!(e.contains("Invalid partition name specified"), "{e}");
    let (_, _, e) = c.fails("scontrol", &["update", &j, "Bogus=1"]);
    assert!(
        e.starts_with("Update of this parameter is not supported: Bogus=1"),
        "{e}"
    );
    // Nothing changed.
    assert_eq!(c.show_field(id, "Partition"), "debug");
    assert_eq!(c.show_field(id, "TimeLimit"), "01:00:00");
}

/// `scontrol reconfigure` re-reads the config file: a new partition and a node's
/// tmp_disk take effect while a job keeps running; a change that needs a restart is
/// reported and changes nothing.
#[test]
fn reconfigure_rereads_the_config() {
    let c = TestCluster::start();
    let id = c.submit(&["-o", "/dev/null", "--wrap", "sleep 300"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(30));
    let orig = std::fs::read_to_string(&c.conf).unwrap();
    let node = c.node();
    let changed = orig.replace(
        &format!("name = \"{node}\"\n"),
        &format!("name = \"{node}\"\ntmp_disk = 777\n"),
    ) + &format!("\n[[partitions]]\nname = \"extra\"\nnodes = \"{node}\"\n");
    // The appended partition must not land inside [cgroup]: put it before.
    let changed = match changed.split_once("[cgroup]") {
        Some((a, b)) => {
            let (b, part) = b.split_once("\n[[partitions]]\nname = \"extra\"").unwrap();
            format!("{a}[[partitions]]\nname = \"extra\"{part}\n[cgroup]{b}")
        }
        None => changed,
    };
    std::fs::write(&c.conf, &changed).unwrap();
    let o = c.run("scontrol", &["reconfigure"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let parts = c.ok("sinfo", &["-h", "-o", "%P"]);
    assert!(parts.lines().any(|l| l.trim() == "extra"), "{parts}");
    let n = c.ok("scontrol", &["show", "node", &node]);
    assert!(n.contains(" TmpDisk=777 "), "{n}");
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    // A change that needs a restart (a node added): an error, and the running
    // configuration stays.
    let more = changed.replacen("[[nodes]]", "[[nodes]]\nname = \"ghost\"\n[[nodes]]", 1);
    std::fs::write(&c.conf, &more).unwrap();
    let (code, err) = c.fails_err("scontrol", &["reconfigure"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("slurm_reconfigure error: adding or removing nodes"),
        "{err}"
    );
    assert!(err.contains("added: ghost"), "{err}");
    // So does a change to what a node is (its CPUs), even beside an allowed change.
    let cpus_line = changed
        .lines()
        .find(|l| l.starts_with("cpus = "))
        .unwrap()
        .to_string();
    let more = changed
        .replacen(&cpus_line, "cpus = 99", 1)
        .replace("name = \"extra\"", "name = \"extra2\"");
    std::fs::write(&c.conf, &more).unwrap();
    let (code, err) = c.fails_err("scontrol", &["reconfigure"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("node {node}: cpus changed")) && err.contains("restart"),
        "{err}"
    );
    let parts = c.ok("sinfo", &["-h", "-o", "%P"]);
    assert!(!parts.contains("extra2"), "nothing applied: {parts}");
    std::fs::write(&c.conf, &changed).unwrap();
    let parts = c.ok("sinfo", &["-h", "-o", "%P"]);
    assert!(parts.lines().any(|l| l.trim() == "extra"), "{parts}");
    c.ok("scancel", &[&id.to_string()]);
}
