//! Heterogeneous jobs through the real front-ends: `:` groups and `#SBATCH hetjob`,
//! ids `L+k`, the per-component environment, all components started and ended
//! together.

use crate::harness::*;
use std::time::Duration;

#[test]
fn colon_groups_run_one_script_with_every_component() {
    let c = TestCluster::start();
    let l = c.submit(&[
        "-n1",
        "-J",
        "lead",
        "-o",
        "het.txt",
        ":",
        "-n2",
        "-J",
        "second",
        "--wrap",
        "env | grep -E '^SLURM_(HET_SIZE|JOB_ID|NTASKS|JOB_NAME)' | sort",
    ]);
    // The leader's id shows every component.
    let ids = c.ok("squeue", &["-h", "-j", &l.to_string(), "-o", "%i %A %j"]);
    // squeue orders by priority; the bigger component may come first.
    let mut rows: Vec<&str> = ids.lines().collect();
    rows.sort();
    assert_eq!(
        rows,
        [format!("{l}+0 {l} lead"), format!("{l}+1 {} second", l + 1)]
    );
    c.wait_file("het.txt", |s| s.contains("SLURM_HET_SIZE"));
    assert_eq!(c.wait_done(l + 1), "COMPLETED");
    assert_eq!(
        c.field(&l.to_string(), "JobState").as_deref(),
        Some("COMPLETED")
    );
    let out = std::fs::read_to_string(c.path("het.txt")).unwrap();
    let want = format!(
        "SLURM_HET_SIZE=2\nSLURM_JOB_ID={l}\nSLURM_JOB_ID_HET_GROUP_0={l}\n\
         SLURM_JOB_ID_HET_GROUP_1={}\nSLURM_JOB_NAME=lead\nSLURM_JOB_NAME_HET_GROUP_0=lead\n\
         SLURM_JOB_NAME_HET_GROUP_1=second\nSLURM_NTASKS=1\nSLURM_NTASKS_HET_GROUP_0=1\n\
         SLURM_NTASKS_HET_GROUP_1=2\n",
        l + 1
    );
    assert_eq!(out, want);
    let acct = c.ok(
        "sacct",
        &[
            "-j",
            &l.to_string(),
            "-X",
            "-n",
            "-P",
            "-o",
            "JobID,JobName,State",
        ],
    );
    assert_eq!(
        acct,
        format!("{l}+0|lead|COMPLETED\n{l}+1|second|COMPLETED\n")
    );
    assert_eq!(
        c.ok(
            "squeue",
            &["-h", "-t", "all", "-j", &format!("{l}+1"), "-o", "%A"]
        ),
        format!("{}\n", l + 1)
    );
    let show = c.ok("scontrol", &["-o", "show", "job", &format!("{l}+1")]);
    assert_eq!(show.lines().count(), 1);
    assert!(
        show.contains(&format!("HetJobId={l} HetJobOffset=1 JobName=second")),
        "{show}"
    );
}

#[test]
fn hetjob_directives_wait_for_room_for_every_component() {
    let c = TestCluster::start();
    let busy = c.submit(&["-n3", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(busy, &["RUNNING"], Duration::from_secs(20));
    c.script(
        "het.sh",
        "#!/bin/sh\n#SBATCH -n1\n#SBATCH -o het.out\n#SBATCH hetjob\n#SBATCH -n2\necho $SLURM_HET_SIZE $SLURM_NTASKS_HET_GROUP_1\n",
    );
    let l = c.submit(&["het.sh"]);
    // One CPU is free: enough for the first component, not for both.
    c.wait_field(&l.to_string(), "Reason", "Resources");
    assert_eq!(c.state(l).as_deref(), Some("PENDING\nPENDING"));
    assert_eq!(c.wait_done(l + 1), "COMPLETED");
    assert_eq!(
        c.field(&l.to_string(), "JobState").as_deref(),
        Some("COMPLETED")
    );
    assert_eq!(std::fs::read_to_string(c.path("het.out")).unwrap(), "2 2\n");
    // Cancelling a component cancels the job.
    let k = c.submit(&["-H", "--wrap", "true", ":", "-n1"]);
    c.ok("scancel", &[&(k + 1).to_string()]);
    c.wait_state(k + 1, &["CANCELLED"], Duration::from_secs(10));
    assert_eq!(
        c.field(&k.to_string(), "JobState").as_deref(),
        Some("CANCELLED")
    );
}

#[test]
fn component_ids_work_in_scancel_and_scontrol() {
    let c = TestCluster::start();
    let l = c.submit(&[
        "-H",
        "-n1",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 60",
        ":",
        "-n1",
    ]);
    let comp = format!("{l}+1");
    // A pending job's component cannot be cancelled alone (scancel(1)).
    let (code, _, err) = c.fails("scancel", &[&comp]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        format!(
            "scancel: error: Kill job error on job id {comp}: Operation not permitted on individual component of heterogeneous job\n"
        )
    );
    assert_eq!(c.state(l + 1).as_deref(), Some("PENDING"));
    // `scontrol update JobId=L+k` changes that component.
    c.ok(
        "scontrol",
        &["update", &format!("JobId={comp}"), "TimeLimit=7"],
    );
    assert_eq!(c.field(&comp, "TimeLimit").as_deref(), Some("00:07:00"));
    // An `L+k` that names no component is refused.
    let bad = format!("{l}+5");
    let (code, err) = c.fails_err("scontrol", &["release", &bad]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid job id specified"), "{err}");
    c.ok("scontrol", &["release", &comp]);
    c.wait_state(l + 1, &["RUNNING"], Duration::from_secs(20));
    // Once running, component 1 ends alone; the leader goes on.
    c.ok("scancel", &[&comp]);
    c.wait_state(l + 1, &["CANCELLED"], Duration::from_secs(10));
    assert_eq!(
        c.field(&format!("{l}+0"), "JobState").as_deref(),
        Some("RUNNING")
    );
    let q = c.ok("squeue", &["-h", "-j", &comp, "-t", "all", "-o", "%i %T"]);
    assert_eq!(q, format!("{comp} CANCELLED\n"));
    // Component 0 names the whole job; the cancelled component keeps its state.
    c.ok("scancel", &[&format!("{l}+0")]);
    c.wait_field(&format!("{l}+0"), "JobState", "CANCELLED");
    assert_eq!(c.state(l + 1).as_deref(), Some("CANCELLED"));
}
