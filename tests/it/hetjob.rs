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
