//! The admin verbs through the real front-ends (issue 23): `scontrol write
//! batch_script`, `scontrol setdebug`, `scontrol reboot`/`cancel_reboot`,
//! `scontrol reconfigure` applying a new Prolog, and `sprio -S`.

use crate::harness::*;
use std::time::Duration;

#[test]
fn scontrol_write_batch_script_to_stdout_a_file_or_the_default_name() {
    let c = TestCluster::start();
    let script = "#!/bin/sh\n#SBATCH -J keepme\necho from the script\n";
    let path = c.script("job.sh", script);
    let id = c.submit(&["--hold", path.to_str().unwrap()]);
    let ids = id.to_string();
    assert_eq!(
        c.ok("scontrol", &["write", "batch_script", &ids, "-"]),
        script
    );
    assert_eq!(
        c.ok("scontrol", &["write", "batch_script", &ids]),
        format!("batch script for job {id} written to slurm-{id}.sh\n")
    );
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.sh"))).unwrap(),
        script
    );
    assert_eq!(
        c.ok("scontrol", &["write", "batch_script", &ids, "copy.sh"]),
        format!("batch script for job {id} written to copy.sh\n")
    );
    assert_eq!(std::fs::read_to_string(c.path("copy.sh")).unwrap(), script);
    // -Q: written without a word.
    assert_eq!(
        c.ok("scontrol", &["-Q", "write", "batch_script", &ids, "q.sh"]),
        ""
    );
    let (code, _, err) = c.fails("scontrol", &["write", "batch_script", "999999"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "job script retrieval failed: Invalid job id specified\n"
    );
    assert!(
        !c.path("slurm-999999.sh").exists(),
        "nothing written on failure"
    );
    // An array task's id names the array's script, as scontrol's atoll reads it.
    let arr = c.submit(&["--hold", "--array=1-3", path.to_str().unwrap()]);
    assert_eq!(
        c.ok(
            "scontrol",
            &["write", "batch_script", &format!("{arr}_2"), "-"]
        ),
        script
    );
    // An allocation has no script.
    let o = c.run("salloc", &["--no-shell", "-n1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let aid = stderr(&o)
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .map(|x| x.trim().to_string())
        .unwrap_or_else(|| panic!("no allocation granted: {}", stderr(&o)));
    let (_, _, err) = c.fails("scontrol", &["write", "batch_script", &aid, "-"]);
    assert_eq!(
        err,
        "job script retrieval failed: Only batch jobs are accepted or processed\n"
    );
}

#[test]
fn scontrol_setdebug_changes_the_controller_log_level() {
    let c = TestCluster::start();
    let (code, _, err) = c.fails("scontrol", &["setdebug", "loud"]);
    assert_eq!((code, err.as_str()), (1, "invalid debug level: loud\n"));
    // Each change is logged at info before it applies: shown while the level allows
    // info, hidden while it does not.
    for level in ["quiet", "info", "debug", "error", "5"] {
        assert_eq!(c.ok("scontrol", &["setdebug", level]), "", "{level}");
    }
    let log = c.controller_log();
    let said = |l: &str| log.contains(&format!("Set debug level to '{l}'"));
    assert!(said("quiet"), "logged at the harness's debug level:\n{log}");
    assert!(!said("info"), "logged while quiet:\n{log}");
    assert!(said("debug"), "not logged at info:\n{log}");
    assert!(said("error"), "not logged at debug:\n{log}");
    assert!(!said("5"), "logged at error:\n{log}");
}

#[test]
fn scontrol_reboot_is_refused_without_a_reboot_program() {
    let c = TestCluster::start();
    let node = c.node();
    for args in [
        vec!["reboot", "ALL"],
        vec![
            "reboot",
            "ASAP",
            "nextstate=RESUME",
            "reason=upgrade",
            &node,
        ],
    ] {
        let (code, out, err) = c.fails("scontrol", &args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (1, "", "scontrol: error: RebootProgram isn't defined\n"),
            "{args:?}"
        );
    }
    let (_, _, err) = c.fails("scontrol", &["reboot"]);
    assert_eq!(err, "too few arguments for keyword:reboot\n");
}

#[test]
fn scontrol_reconfigure_applies_a_new_prolog() {
    let c = TestCluster::start();
    let w = c.work.display().to_string();
    c.script(
        "prolog.sh",
        &format!("#!/bin/sh\necho \"$SLURM_JOB_ID\" > {w}/prolog.$SLURM_JOB_ID\n"),
    );
    let before = c.submit(&["--wrap", "true"]);
    assert_eq!(c.wait_done(before), "COMPLETED");
    assert!(!c.path(&format!("prolog.{before}")).exists());
    let conf = std::fs::read_to_string(&c.conf).unwrap();
    std::fs::write(&c.conf, format!("Prolog = \"work/prolog.sh\"\n{conf}")).unwrap();
    assert_eq!(c.ok("scontrol", &["reconfigure"]), "");
    let after = c.submit(&["--wrap", "true"]);
    assert_eq!(c.wait_done(after), "COMPLETED");
    assert_eq!(
        c.wait_file(&format!("prolog.{after}"), |s| s.ends_with('\n')),
        format!("{after}\n")
    );
}

#[test]
fn sprio_sort_orders_by_the_fields_given() {
    let c = TestCluster::start();
    // All four CPUs taken, so the next three pend.
    let _blocker = c.submit(&["-n4", "--wrap", "sleep 300"]);
    let a = c.submit(&["--wrap", "true"]);
    let b = c.submit(&["--nice=500", "--wrap", "true"]);
    let d = c.submit(&["--wrap", "true"]);
    let order = |args: &[&str]| -> Vec<u32> {
        let mut all = vec!["-h", "-o", "%i"];
        all.extend_from_slice(args);
        c.ok("sprio", &all)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    assert_eq!(order(&["-S", "-i"]), [d, b, a]);
    assert_eq!(order(&["--sort=i"]), [a, b, d]);
    // Ascending priority: the niced job first, the others in the default order.
    assert_eq!(order(&["-SY"]), [b, a, d]);
    assert_eq!(order(&["--sort", "-N,i"]), [b, a, d]);
    let (code, _, err) = c.fails("sprio", &["-S", "Z"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "sprio: Invalid sort specification: Z\n")
    );
    c.ok("scancel", &["-u", &whoami()]);
}

fn whoami() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name
}

#[test]
fn scontrol_listpids_lists_this_nodes_step_processes() {
    let c = TestCluster::start();
    let id = c.submit(&["--wrap", "sleep 300"]);
    let ids = id.to_string();
    c.wait_state(id, &["RUNNING"], std::time::Duration::from_secs(30));
    let header = "PID      JOBID    STEPID LOCALID GLOBALID\n";
    let out = wait_until(
        "the batch step's processes",
        std::time::Duration::from_secs(30),
        || {
            let o = c.run("scontrol", &["listpids", &ids]);
            let s = stdout(&o);
            (o.status.success() && s.lines().count() >= 2).then_some(s)
        },
    );
    assert!(out.starts_with(header), "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    // The batch shell is task 0, rank 0; whatever it started follows with "-".
    assert_eq!(rows[0][1..], [ids.as_str(), "batch", "0", "0"], "{out}");
    for r in &rows {
        let pid: u32 = r[0].parse().unwrap();
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{out}"
        );
        assert_eq!(r[1], ids);
    }
    // The same with the step named, and with every step listed.
    let step = c.ok("scontrol", &["listpids", &format!("{id}.batch")]);
    assert_eq!(step.lines().nth(1), out.lines().nth(1));
    assert!(
        c.ok("scontrol", &["listpids"])
            .contains(&out.lines().nth(1).unwrap().to_string())
    );
    let (code, o, err) = c.fails("scontrol", &["listpids", "999999"]);
    assert_eq!((code, o.as_str()), (1, header));
    assert_eq!(err, "Job 999999 does not exist on this node.\n");
    let (_, _, err) = c.fails("scontrol", &["listpids", "12x"]);
    assert_eq!(err, "\"12x\" does not look like a jobid\n");
    c.ok("scancel", &[&ids]);
}

#[test]
fn scontrol_top_puts_jobs_first_in_their_users_queue() {
    let c = TestCluster::start();
    let blocker = c.submit(&["-n4", "--wrap", "sleep 300"]);
    let a = c.submit(&["--wrap", "true"]);
    let b = c.submit(&["--wrap", "true"]);
    let d = c.submit(&["--wrap", "true"]);
    let order = || -> Vec<u32> {
        c.ok("sprio", &["-h", "-o", "%i"])
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    };
    assert_eq!(order(), [a, b, d]);
    assert_eq!(c.ok("scontrol", &["top", &d.to_string()]), "");
    wait_until("d first", std::time::Duration::from_secs(10), || {
        (order() == [d, a, b]).then_some(())
    });
    assert_eq!(c.ok("scontrol", &["top", &format!("{b},{a}")]), "");
    wait_until("b then a first", std::time::Duration::from_secs(10), || {
        (order() == [b, a, d]).then_some(())
    });
    // A running job cannot be moved.
    let (code, _, err) = c.fails("scontrol", &["top", &blocker.to_string()]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "slurm_top_job error: Job is no longer pending execution\n"
        )
    );
    c.ok(
        "scancel",
        &[
            &blocker.to_string(),
            &a.to_string(),
            &b.to_string(),
            &d.to_string(),
        ],
    );
}

/// A finished job's script is still there until the record is purged (a finished job
/// once wrote an empty file and said it had written the script).
#[test]
fn scontrol_write_batch_script_of_a_finished_job() {
    let c = TestCluster::start();
    let id = c.submit(&["--wrap", "true"]);
    c.wait_done(id);
    assert_eq!(
        c.ok("scontrol", &["write", "batch_script", &id.to_string(), "-"]),
        "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n"
    );
}

/// A cluster whose RebootProgram appends the node's name to `<marks>/ran` (it records
/// that it ran and reboots nothing); ResumeTimeout `timeout` seconds.
fn reboot_cluster(marks: &std::path::Path, timeout: u32) -> TestCluster {
    let top = format!(
        "reboot_program = \"echo $SLURMD_NODENAME >> {}/ran\"\nresume_timeout = {timeout}",
        marks.display()
    );
    TestCluster::start_with(Setup {
        top: Box::leak(top.into_boxed_str()),
        ..Setup::default()
    })
}

fn node_line(c: &TestCluster, fmt: &str) -> String {
    c.ok("sinfo", &["-h", "-N", "-o", fmt]).trim().to_string()
}

#[test]
fn scontrol_reboot_asap_drains_waits_for_the_job_then_times_out_down() {
    let marks = tempfile::tempdir().unwrap();
    let c = reboot_cluster(marks.path(), 4);
    let node = c.node();
    let id = c.submit(&["-n1", "--wrap", "while [ ! -e go ]; do sleep 0.1; done"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(
        c.ok("scontrol", &["reboot", "ASAP", "reason=firmware", &node]),
        ""
    );
    assert_eq!(node_line(&c, "%T %t"), "draining@ drng@");
    let show = c.ok("scontrol", &["show", "node", &node]);
    assert_eq!(
        field(&show, "State").as_deref(),
        Some("MIXED+DRAIN+REBOOT_REQUESTED")
    );
    assert!(show.contains("\n   NextState=RESUME\n"), "{show}");
    assert!(show.contains("Reason=firmware ["), "{show}");
    // No new job starts on the node meanwhile, and the program has not run.
    let later = c.submit(&["-n1", "--wrap", "true"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.state(later).as_deref(), Some("PENDING"));
    assert!(!marks.path().join("ran").exists());
    // The job ends: the reboot is issued through the program.
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    let ran = wait_until("RebootProgram ran", Duration::from_secs(20), || {
        std::fs::read_to_string(marks.path().join("ran")).ok()
    });
    assert_eq!(ran, format!("{node}\n"));
    assert_eq!(
        field(&c.ok("scontrol", &["show", "node", &node]), "State").as_deref(),
        Some("IDLE+DRAIN+REBOOT_ISSUED")
    );
    assert_eq!(node_line(&c, "%T %t"), "reboot^ boot^");
    // This agent never registers again: after ResumeTimeout the node is DOWN.
    let (state, reason) = wait_until("reboot timed out", Duration::from_secs(20), || {
        let s = c.ok("scontrol", &["show", "node", &node]);
        let st = field(&s, "State")?;
        st.starts_with("DOWN").then_some((st, s))
    });
    assert_eq!(state, "DOWN+DRAIN");
    assert!(reason.contains("Reason=reboot timed out ["), "{reason}");
    assert_eq!(c.state(later).as_deref(), Some("PENDING"));
}

#[test]
fn scontrol_reboot_of_a_busy_node_can_be_cancelled_and_checks_its_words() {
    let marks = tempfile::tempdir().unwrap();
    let c = reboot_cluster(marks.path(), 60);
    let node = c.node();
    let id = c.submit(&["-n1", "--wrap", "while [ ! -e go ]; do sleep 0.1; done"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(c.ok("scontrol", &["reboot", "nextstate=DOWN", &node]), "");
    assert_eq!(node_line(&c, "%T %t"), "mixed@ mix@");
    let show = c.ok("scontrol", &["show", "node", &node]);
    assert_eq!(
        field(&show, "State").as_deref(),
        Some("MIXED+REBOOT_REQUESTED")
    );
    assert!(show.contains("\n   NextState=DOWN\n"), "{show}");
    assert_eq!(
        c.ok("sinfo", &["-h", "-t", "boot", "-o", "%N"]).trim(),
        node
    );
    assert_eq!(c.ok("scontrol", &["cancel_reboot", &node]), "");
    assert_eq!(node_line(&c, "%T %t"), "mixed mix");
    assert!(
        !c.ok("scontrol", &["show", "node", &node])
            .contains("NextState=")
    );
    assert_eq!(c.ok("sinfo", &["-h", "-t", "boot", "-o", "%N"]), "");
    for (args, want) in [
        (
            vec!["reboot", "nextstate=UP", "ALL"],
            "Invalid value for nextstate: UP. Valid options are: RESUME DOWN\n",
        ),
        (
            vec!["reboot", "ASAP"],
            "Missing node list. Specify ALL|<NodeList> to reboot all nodes or the given nodes.\n",
        ),
        (
            vec!["reboot", "nosuchnode"],
            "scontrol_reboot_nodes error: Invalid node name specified\n",
        ),
        (
            vec!["cancel_reboot", "nosuchnode"],
            "slurm_update error: Invalid node name specified\n",
        ),
        (
            vec!["cancel_reboot"],
            "too few arguments for keyword:cancel_reboot\n",
        ),
    ] {
        let (code, _, err) = c.fails("scontrol", &args);
        assert_eq!((code, err.as_str()), (1, want), "{args:?}");
    }
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !marks.path().join("ran").exists(),
        "a cancelled reboot runs nothing"
    );
    assert_eq!(node_line(&c, "%T"), "idle");
}

#[test]
fn scontrol_reboot_completes_when_the_agent_registers_again() {
    use crate::harness::sshd::{NodeSetup, SshCluster};
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let marks = tempfile::tempdir().unwrap();
    let top = format!(
        "reboot_program = \"echo $SLURMD_NODENAME >> {}/ran\"\nresume_timeout = 60",
        marks.path().display()
    );
    let Some(c) = SshCluster::start_top(&[NodeSetup::new("rb1"), NodeSetup::new("rb2")], 60, &top)
    else {
        return;
    };
    c.wait_all_idle();
    let ran = |want: &str| {
        wait_until("RebootProgram ran", Duration::from_secs(20), || {
            let s = std::fs::read_to_string(marks.path().join("ran")).ok()?;
            s.lines().any(|l| l == want).then_some(())
        })
    };
    // "Rebooting" rb1: its agent is killed and the controller starts a new one.
    assert_eq!(c.ok("scontrol", &["reboot", "rb1"]), "");
    ran("rb1");
    assert_eq!(c.node_state("rb1").0, "IDLE+REBOOT_ISSUED");
    let old = c.nodes[0].agent_pids();
    assert_eq!(old.len(), 1, "{old:?}");
    kill(Pid::from_raw(old[0]), Signal::SIGKILL).unwrap();
    let (_, reason) = c.wait_node("rb1", "back in service", Duration::from_secs(30), |s, _| {
        s == "IDLE"
    });
    assert_eq!(reason, "");
    assert_ne!(c.nodes[0].agent_pids(), old, "a new agent registered");
    // nextstate=DOWN: the node stays DOWN with the reason after its reboot.
    assert_eq!(
        c.ok(
            "scontrol",
            &["reboot", "nextstate=DOWN", "reason=retire", "rb2"]
        ),
        ""
    );
    ran("rb2");
    let old = c.nodes[1].agent_pids();
    kill(Pid::from_raw(old[0]), Signal::SIGKILL).unwrap();
    wait_until("a new agent on rb2", Duration::from_secs(30), || {
        let p = c.nodes[1].agent_pids();
        (p.len() == 1 && p != old).then_some(())
    });
    let (state, reason) = c.wait_node(
        "rb2",
        "down after reboot",
        Duration::from_secs(30),
        |s, r| s == "DOWN" && r == "retire",
    );
    assert_eq!((state.as_str(), reason.as_str()), ("DOWN", "retire"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.node_state("rb2").0, "DOWN", "stays down");
    assert_eq!(c.node_state("rb1").0, "IDLE");
}
