//! `-M/--clusters` through the real front-ends: this cluster (or `all`) works and adds
//! Slurm's `CLUSTER:` line or ` on cluster` suffix; another cluster is refused with
//! Slurm's text and exit 1 and touches no job; sacct shows no rows for it.

use crate::harness::*;
use std::time::Duration;

const NOT_REACHED: &str = "'other' can't be reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr list clusters' to see available clusters.\n";

#[test]
fn other_clusters_are_refused_and_ours_is_served() {
    let c = TestCluster::start();
    let out = c.ok("sbatch", &["-M", "testc", "--wrap", "sleep 60"]);
    let id: u32 = out
        .strip_prefix("Submitted batch job ")
        .and_then(|r| r.strip_suffix(" on cluster testc\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        c.ok(
            "sbatch",
            &["--parsable", "-M", "all", "-H", "--wrap", "true"]
        )
        .ends_with(";testc\n")
    );
    c.wait_state(id, &["RUNNING"], Duration::from_secs(30));

    // Another cluster: refused, nothing cancelled.
    let (code, err) = c.fails_err("scancel", &["-M", "other", &id.to_string()]);
    assert_eq!(
        (code, err.as_str()),
        (1, format!("scancel: error: {NOT_REACHED}").as_str())
    );
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    for cmd in ["squeue", "sinfo"] {
        let (code, err) = c.fails_err(cmd, &["--clusters=other"]);
        assert_eq!(code, 1);
        assert_eq!(err, format!("{cmd}: error: {NOT_REACHED}"));
    }
    let (code, err) = c.fails_err("scontrol", &["-M", "other", "requeue", &id.to_string()]);
    assert_eq!((code, err), (1, format!("scontrol: error: {NOT_REACHED}")));
    assert_eq!(c.state(id).as_deref(), Some("RUNNING"));
    assert!(
        c.ok("scontrol", &["-M", "testc", "show", "part", "-o"])
            .starts_with("PartitionName=debug ")
    );
    let (code, err) = c.fails_err("sbatch", &["-M", "other", "--wrap", "true"]);
    assert_eq!(code, 1);
    assert_eq!(err, format!("sbatch: error: {NOT_REACHED}"));
    let o = c
        .cmd("squeue")
        .env("SLURM_CLUSTERS", "other")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("invalid entry for SLURM_CLUSTERS."),
        "{}",
        stderr(&o)
    );

    // Ours: CLUSTER: lines, and sacct's -M filter.
    let q = c.ok("squeue", &["-M", "testc", "-h", "-o", "%i"]);
    assert!(q.starts_with("CLUSTER: testc\n"), "{q}");
    assert!(q.contains(&format!("{id}\n")));
    assert!(
        c.ok("sinfo", &["-M", "all", "-h"])
            .starts_with("CLUSTER: testc\n")
    );
    let ids = |m: &str| c.ok("sacct", &["-X", "-n", "-P", "-o", "JobID", "-M", m]);
    assert!(ids("testc").contains(&format!("{id}\n")));
    assert!(ids("all").contains(&format!("{id}\n")));
    assert_eq!(ids("other"), "");
    // scancel on our cluster works.
    c.ok("scancel", &["-M", "testc", &id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(30));
}

#[test]
fn sacct_units_and_noconvert() {
    let c = TestCluster::start();
    let id = c.submit(&["--mem=1G", "--wrap", "true"]);
    c.wait_done(id);
    let f = |extra: &[&str]| {
        let mut a = vec!["-X", "-n", "-P", "-o", "ReqMem", "-j"];
        let s = id.to_string();
        a.push(&s);
        a.extend_from_slice(extra);
        c.ok("sacct", &a)
    };
    assert_eq!(f(&[]), "1G\n");
    assert_eq!(f(&["--noconvert"]), "1024M\n");
    assert_eq!(f(&["--units=K"]), "1048576K\n");
    assert_eq!(f(&["--units", "G"]), "1G\n");
    let (code, err) = c.fails_err("sacct", &["--units=Q"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid unit type 'Q'"), "{err}");
}
