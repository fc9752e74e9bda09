//! Node scripts (issue 5): Prolog and Epilog run by the agent with the job's SLURM_*
//! environment, TaskProlog/TaskEpilog run by stepd around each task (export, unset and
//! print honoured), PrologFlags=Alloc, a failing prolog draining the node ("Prolog
//! error") and requeueing the job held, and HealthCheckProgram draining the node with
//! its output. Relative script paths in the config are relative to its directory, so
//! `work/x.sh` is the test's work directory.

use crate::harness::{Setup, TestCluster, wait_until};
use std::time::Duration;

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name
}

#[test]
fn prolog_epilog_and_task_scripts_run_around_jobs_and_steps() {
    let c = TestCluster::start_with(Setup {
        top: "Prolog = \"work/prolog.sh\"\nEpilog = \"work/epilog.sh\"\n\
              TaskProlog = \"work/taskprolog.sh\"\nTaskEpilog = \"work/taskepilog.sh\"",
        ..Setup::default()
    });
    let w = c.work.display().to_string();
    c.script(
        "prolog.sh",
        &format!(
            "#!/bin/sh\necho \"$SLURM_JOB_ID $SLURM_JOB_USER $SLURMD_NODENAME $SLURM_SCRIPT_CONTEXT $(id -u)\" > {w}/prolog.$SLURM_JOB_ID\n"
        ),
    );
    c.script(
        "epilog.sh",
        &format!("#!/bin/sh\necho \"$SLURM_SCRIPT_CONTEXT\" > {w}/epilog.$SLURM_JOB_ID\n"),
    );
    c.script(
        "taskprolog.sh",
        "#!/bin/sh\necho \"export FROM_TP=yes-$SLURM_PROCID\"\necho 'unset DROPME'\n\
         echo 'print hello from task prolog'\necho 'ignored line'\n",
    );
    c.script(
        "taskepilog.sh",
        &format!(
            "#!/bin/sh\necho \"$FROM_TP\" > {w}/taskepilog.$SLURM_JOB_ID.${{SLURM_STEP_ID:-batch}}.$SLURM_PROCID\n"
        ),
    );
    let id = c.submit(&[
        "--export=ALL,DROPME=here",
        "--wrap",
        "cat prolog.$SLURM_JOB_ID; echo FROM_TP=$FROM_TP; echo DROPME=${DROPME-unset}; \
         test -e epilog.$SLURM_JOB_ID && echo epilog-too-early; true",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap();
    let uid = nix::unistd::geteuid().as_raw();
    assert_eq!(
        out,
        format!(
            "hello from task prolog\n{id} {} {} prolog_slurmd {uid}\nFROM_TP=yes-0\nDROPME=unset\n",
            me(),
            c.node()
        )
    );
    // The epilog runs once the job has ended.
    let e = c.wait_file(&format!("epilog.{id}"), |s| s.ends_with('\n'));
    assert_eq!(e, "epilog_slurmd\n");
    let te = c.wait_file(&format!("taskepilog.{id}.batch.0"), |s| s.ends_with('\n'));
    assert_eq!(te, "yes-0\n");

    // A step's tasks get their own TaskProlog run (by rank) and print line.
    let out = c.ok("srun", &["-n2", "-l", "sh", "-c", "echo got=$FROM_TP"]);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "0: got=yes-0",
            "0: hello from task prolog",
            "1: got=yes-1",
            "1: hello from task prolog"
        ],
        "{out}"
    );
    let srun_job = *c.job_ids().iter().max().unwrap();
    assert_ne!(srun_job, id);
    c.wait_file(&format!("prolog.{srun_job}"), |s| s.ends_with('\n'));
    let te = c.wait_file(&format!("taskepilog.{srun_job}.0.1"), |s| s.ends_with('\n'));
    assert_eq!(te, "yes-1\n");
}

/// A job stays COMPLETING (squeue `CG`, its node COMPLETING, sinfo `comp`) while its
/// Epilog runs, keeping its CPUs, and is over only once the epilog has finished.
#[test]
fn a_job_stays_completing_while_its_epilog_runs() {
    let c = TestCluster::start_with(Setup {
        top: "Epilog = \"work/epilog.sh\"",
        ..Setup::default()
    });
    let w = c.work.display().to_string();
    c.script(
        "epilog.sh",
        &format!(
            "#!/bin/sh\ntouch {w}/epilog.started\nwhile [ ! -e {w}/epilog.go ]; do sleep 0.1; done\n\
             touch {w}/epilog.done\n"
        ),
    );
    let id = c.submit(&["--wrap", "true"]);
    c.wait_file("epilog.started", |_| true);
    assert_eq!(c.state(id).as_deref(), Some("COMPLETING"));
    let sq = c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%t"]);
    assert_eq!(sq.trim(), "CG");
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t"]).trim(), "comp");
    let node = c.ok("scontrol", &["show", "node", &c.node()]);
    assert!(node.contains("+COMPLETING"), "{node}");
    // Its end is recorded already.
    let job = id.to_string();
    let acct = c.ok("sacct", &["-XnP", "-j", &job, "-o", "State,ExitCode"]);
    assert_eq!(acct.trim(), "COMPLETED|0:0");
    // A job that needs every CPU of the node waits for the epilog.
    let next = c.submit(&["-n4", "--wrap", "true"]);
    let show = c.ok("squeue", &["-h", "-j", &next.to_string(), "-o", "%T"]);
    assert_eq!(show.trim(), "PENDING");
    std::fs::write(c.path("epilog.go"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert!(
        c.path("epilog.done").exists(),
        "over before its epilog ended"
    );
    assert_eq!(c.wait_done(next), "COMPLETED");
    wait_until("the node idle", Duration::from_secs(30), || {
        (c.ok("sinfo", &["-h", "-o", "%t"]).trim() == "idle").then_some(())
    });
}

/// An agent started afresh while a job runs (here with its controller, killed with
/// SIGKILL) knows from its spool that the job's prolog ran on its node: the job's
/// next step does not run it again.
#[test]
fn a_restarted_agent_does_not_rerun_the_prolog_of_a_running_job() {
    let mut c = TestCluster::start_with(Setup {
        top: "Prolog = \"work/prolog.sh\"",
        ..Setup::default()
    });
    let w = c.work.display().to_string();
    c.script(
        "prolog.sh",
        &format!("#!/bin/sh\necho ran >> {w}/prolog.$SLURM_JOB_ID\n"),
    );
    let id = c.submit(&[
        "-o",
        "restart.out",
        "--wrap",
        "srun echo step0; echo waiting; while [ ! -e go ]; do sleep 0.1; done; \
         srun echo step1; echo done",
    ]);
    c.wait_file("restart.out", |s| s.contains("waiting"));
    let record = c.path(&format!("prolog.{id}"));
    let runs = || std::fs::read_to_string(&record).unwrap();
    assert_eq!(runs(), "ran\n");
    c.kill9_controller();
    c.start_controller();
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = std::fs::read_to_string(c.path("restart.out")).unwrap();
    assert_eq!(out, "step0\nwaiting\nstep1\ndone\n");
    assert_eq!(runs(), "ran\n", "the prolog ran again after the restart");
    // The record goes with the job (its epilog message).
    let records = c.dir.path().join("spool/prologs");
    wait_until("the prolog record dropped", Duration::from_secs(30), || {
        std::fs::read_dir(&records)
            .map(|d| d.count() == 0)
            .unwrap_or(true)
            .then_some(())
    });
}

#[test]
fn a_failing_task_prolog_keeps_the_task_from_running() {
    let c = TestCluster::start_with(Setup {
        top: "TaskProlog = \"work/tp.sh\"",
        ..Setup::default()
    });
    c.script("tp.sh", "#!/bin/sh\nexit 3\n");
    let id = c.submit(&["--wrap", "touch ran.$SLURM_JOB_ID"]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "3:0");
    assert!(!c.path(&format!("ran.{id}")).exists());
}

#[test]
fn a_failing_prolog_drains_the_node_and_requeues_the_job_held() {
    let c = TestCluster::start_with(Setup {
        top: "Prolog = \"work/prolog.sh\"",
        ..Setup::default()
    });
    c.script("prolog.sh", "#!/bin/sh\necho 'no scratch space'\nexit 1\n");
    let id = c.submit(&["--wrap", "touch ran.$SLURM_JOB_ID"]);
    let reason = wait_until(
        "job held after the prolog failure",
        Duration::from_secs(30),
        || {
            let r = c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T|%r"]);
            (r.trim() == "PENDING|launch failed requeued held").then_some(r)
        },
    );
    assert!(!reason.is_empty());
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(
        show.contains("JobState=PENDING Reason=launch_failed_requeued_held"),
        "{show}"
    );
    assert!(show.contains("Restarts=1"), "{show}");
    // The node is drained with Slurm's reason, by the controller's user, with a time.
    let r = c.ok("sinfo", &["-R", "-h", "-o", "%E|%u|%N"]);
    assert_eq!(r.trim(), format!("Prolog error|{}|{}", me(), c.node()));
    let r = c.ok("sinfo", &["-R", "-h", "-o", "%H"]);
    assert!(r.trim().starts_with("20"), "timestamp: {r}");
    let node = c.ok("scontrol", &["show", "node", &c.node()]);
    assert!(
        node.contains(&format!("Reason=Prolog error [{}@", me())),
        "{node}"
    );
    assert!(node.contains("+DRAIN"), "{node}");
    assert!(!c.path(&format!("ran.{id}")).exists());
    // Fixed: the node returns to service and the released job runs.
    c.script("prolog.sh", "#!/bin/sh\nexit 0\n");
    c.ok(
        "scontrol",
        &["update", &format!("NodeName={}", c.node()), "State=RESUME"],
    );
    c.ok("scontrol", &["release", &id.to_string()]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert!(c.path(&format!("ran.{id}")).exists());
}

#[test]
fn prolog_flags_alloc_runs_the_prolog_at_allocation() {
    let c = TestCluster::start_with(Setup {
        top: "Prolog = \"work/prolog.sh\"\nPrologFlags = \"Alloc\"",
        ..Setup::default()
    });
    let w = c.work.display().to_string();
    c.script(
        "prolog.sh",
        &format!("#!/bin/sh\necho \"$SLURM_JOB_ID\" > {w}/prolog.$SLURM_JOB_ID\n"),
    );
    let o = c.run("salloc", &["--no-shell", "-n1"]);
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let id: u32 = err
        .split("salloc: Granted job allocation ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {err}"));
    // No step has run: the prolog ran because the job was allocated.
    let p = c.wait_file(&format!("prolog.{id}"), |s| s.ends_with('\n'));
    assert_eq!(p.trim(), id.to_string());
    c.ok("scancel", &[&id.to_string()]);
}

#[test]
fn health_check_drains_with_its_output_and_a_passing_one_leaves_the_node_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let health = work.join("health.sh");
    std::fs::write(
        &health,
        format!(
            "#!/bin/sh\necho run >> {w}/health.log\n\
             if [ -e {w}/sick ]; then echo 'ib0 link down'; exit 1; fi\nexit 0\n",
            w = work.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&health, std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = sluice::config::short_hostname();
    let conf = format!(
        r#"cluster_name = "testc"
state_dir = "{root}/state"
spool_dir = "{root}/spool"
socket = "{root}/run/ctld.sock"
HealthCheckProgram = "{health}"
HealthCheckInterval = 1
[[nodes]]
name = "{node}"
cpus = 2
memory = 2000
[cgroup]
root = "sluice-it-health-{pid}"
"#,
        root = root.display(),
        health = health.display(),
        pid = std::process::id(),
    );
    let c = TestCluster::start_conf(dir, &conf);
    // Several passing runs leave the node as it was.
    c.wait_file("health.log", |s| s.lines().count() >= 3);
    let r = c.ok("sinfo", &["-R", "-h"]);
    assert_eq!(r.trim(), "", "a passing health check drained the node");
    let st = c.ok("sinfo", &["-h", "-o", "%t"]);
    assert_eq!(st.trim(), "idle");
    // A failing one drains it with its output as the reason.
    std::fs::write(c.path("sick"), "").unwrap();
    let r = wait_until("health-check drain", Duration::from_secs(20), || {
        let r = c.ok("sinfo", &["-R", "-h", "-o", "%E|%u|%N"]);
        (!r.trim().is_empty()).then_some(r)
    });
    assert_eq!(r.trim(), format!("ib0 link down|{}|{node}", me()));
    let st = c.ok("sinfo", &["-h", "-o", "%t"]);
    assert_eq!(st.trim(), "drain");
}
