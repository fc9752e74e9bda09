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

#[test]
fn salloc_het_gives_its_command_every_component_and_srun_spans_them() {
    let c = TestCluster::start();
    let o = c.run(
        "salloc",
        &[
            "-n2",
            "-J",
            "lead",
            ":",
            "-n1",
            "sh",
            "-c",
            "env | grep -E '^SLURM_(HET_SIZE|JOB_ID|NTASKS|JOB_NAME)' | sort; \
             squeue -h -j $SLURM_JOB_ID -o 'q=%i %T'; \
             srun --het-group=0,1 -l sh -c 'echo r$SLURM_PROCID=$SLURM_JOB_ID/$SLURM_NTASKS'",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let err = text(&o.stderr);
    let l: u32 = err
        .lines()
        .find_map(|x| x.strip_prefix("salloc: Granted job allocation "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        err.contains(&format!("salloc: Relinquishing job allocation {l}")),
        "{err}"
    );
    let out = text(&o.stdout);
    let env: Vec<&str> = out.lines().filter(|x| x.starts_with("SLURM_")).collect();
    let want = format!(
        "SLURM_HET_SIZE=2\nSLURM_JOB_ID={l}\nSLURM_JOB_ID_HET_GROUP_0={l}\n\
         SLURM_JOB_ID_HET_GROUP_1={}\nSLURM_JOB_NAME=lead\nSLURM_JOB_NAME_HET_GROUP_0=lead\n\
         SLURM_JOB_NAME_HET_GROUP_1=lead\nSLURM_NTASKS=2\nSLURM_NTASKS_HET_GROUP_0=2\n\
         SLURM_NTASKS_HET_GROUP_1=1",
        l + 1
    );
    assert_eq!(env.join("\n"), want, "{out}");
    // squeue inside the allocation shows both components running.
    let mut q: Vec<&str> = out.lines().filter(|x| x.starts_with("q=")).collect();
    q.sort();
    assert_eq!(
        q,
        [format!("q={l}+0 RUNNING"), format!("q={l}+1 RUNNING")],
        "{out}"
    );
    // One step over both components: ranks 0-1 in component 0, 2 in component 1, all
    // with the leader's id and the whole step's task count.
    let ranks: Vec<String> = sorted_lines(&out)
        .into_iter()
        .filter(|x| x.contains(": r"))
        .collect();
    assert_eq!(
        ranks,
        [
            format!("0: r0={l}/3"),
            format!("1: r1={l}/3"),
            format!("2: r2={l}/3")
        ],
        "{out}"
    );
    let rows = c.sacct_rows(l, 4);
    assert_eq!(
        rows,
        [
            format!("{l}+0|COMPLETED|0:0"),
            format!("{l}+0.0|COMPLETED|0:0"),
            format!("{l}+1|COMPLETED|0:0"),
            format!("{l}+1.0|COMPLETED|0:0"),
        ]
    );
}

#[test]
fn srun_het_outside_an_allocation_runs_each_components_command() {
    let c = TestCluster::start();
    let o = c.run(
        "srun",
        &[
            "-n2",
            "-l",
            "sh",
            "-c",
            "echo a$SLURM_PROCID $SLURM_JOB_ID $SLURM_HET_SIZE $SLURM_NTASKS $SLURM_NODEID",
            ":",
            "-n1",
            "sh",
            "-c",
            "echo b$SLURM_PROCID $SLURM_JOB_ID $SLURM_NODEID $SLURM_JOB_ID_HET_GROUP_1 $SLURM_STEP_NUM_TASKS",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let out = text(&o.stdout);
    let lines = sorted_lines(&out);
    assert_eq!(lines.len(), 3, "{out}");
    let l: u32 = lines[0]
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        lines,
        [
            format!("0: a0 {l} 2 3 0"),
            format!("1: a1 {l} 2 3 0"),
            format!("2: b2 {l} 1 {} 3", l + 1)
        ]
    );
    // Both components were allocated for srun, named after its first command, and
    // given back.
    assert_eq!(c.field(&format!("{l}+1"), "JobName").as_deref(), Some("sh"));
    assert_eq!(
        c.sacct_rows(l, 4),
        [
            format!("{l}+0|COMPLETED|0:0"),
            format!("{l}+0.0|COMPLETED|0:0"),
            format!("{l}+1|COMPLETED|0:0"),
            format!("{l}+1.0|COMPLETED|0:0"),
        ]
    );
    // A component without a command runs the next one's (srun(1)).
    let out = c.ok("srun", &["-l", "-n2", ":", "-n1", "echo", "hi"]);
    assert_eq!(sorted_lines(&out), ["0: hi", "1: hi", "2: hi"]);
}

#[test]
fn a_het_step_exits_with_the_highest_code_of_all_its_tasks() {
    let c = TestCluster::start();
    let o = c.run(
        "srun",
        &[
            "-n1", "sh", "-c", "exit 3", ":", "-n1", "sh", "-c", "exit 5",
        ],
    );
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = text(&o.stderr);
    let node = c.node();
    assert!(
        err.contains(&format!(
            "srun: error: {node}: task 0: Exited with exit code 3"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "srun: error: {node}: task 1: Exited with exit code 5"
        )),
        "{err}"
    );
    // A task killed by a signal counts as 128+N, above every exit code.
    let o = c.run(
        "srun",
        &[
            "-n1",
            "sh",
            "-c",
            "kill -9 $$",
            ":",
            "-n1",
            "sh",
            "-c",
            "exit 2",
        ],
    );
    assert_eq!(o.status.code(), Some(137), "{o:?}");
}

#[test]
fn srun_het_group_inside_an_sbatch_hetjob() {
    let c = TestCluster::start();
    c.script(
        "het.sh",
        "#!/bin/sh\n#SBATCH -n2\n#SBATCH -o het.out\n#SBATCH hetjob\n#SBATCH -n1\n\
         srun -l --het-group=0,1 sh -c 'echo both$SLURM_PROCID/$SLURM_NTASKS/$SLURM_JOB_ID'\n\
         srun -l sh -c 'echo plain$SLURM_PROCID/$SLURM_NTASKS'\n\
         srun -l --het-group=1 sh -c 'echo one$SLURM_PROCID/$SLURM_JOB_ID/$SLURM_NTASKS'\n\
         srun -l -n1 sh -c 'echo x$SLURM_PROCID' : sh -c 'echo y$SLURM_PROCID'\n\
         srun --het-group=2 true; echo rc2=$?\n\
         srun true : true : true; echo rc3=$?\n\
         echo done\n",
    );
    let l = c.submit(&["het.sh"]);
    let out = c.wait_file("het.out", |s| s.contains("done\n"));
    let lines = sorted_lines(&out);
    let has = |s: &str| lines.iter().any(|x| x == s);
    for want in [
        format!("0: both0/3/{l}"),
        format!("1: both1/3/{l}"),
        format!("2: both2/3/{l}"),
        "0: plain0/2".into(),
        "1: plain1/2".into(),
        format!("0: one0/{l}/1"),
        "0: x0".into(),
        "1: y1".into(),
    ] {
        assert!(has(&want), "no {want:?} in {out}");
    }
    // Components the job does not have are refused with srun's words.
    assert!(
        out.contains(
            "srun: error: Requested het-group offset exceeds highest hetjob index (2 > 1)\nrc2=1"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "srun: error: Attempt to run a job step with het group value of 2, but the job allocation has maximum value of 1\nrc3=1"
        ),
        "{out}"
    );
    assert_eq!(c.wait_done(l + 1), "COMPLETED");
    // Step ids are shared by the parts of a step, and unused in a component a step
    // did not span.
    let rows = c.sacct_rows(l, 9);
    let ids: Vec<&str> = rows.iter().map(|r| r.split('|').next().unwrap()).collect();
    assert_eq!(
        ids,
        [
            format!("{l}+0"),
            format!("{l}+0.batch"),
            format!("{l}+0.0"),
            format!("{l}+0.1"),
            format!("{l}+0.3"),
            format!("{l}+1"),
            format!("{l}+1.0"),
            format!("{l}+1.2"),
            format!("{l}+1.3"),
        ],
        "{rows:?}"
    );
    // Outside a heterogeneous job, --het-group names only component 0.
    let plain = c.submit(&["-n1", "-o", "/dev/null", "--wrap", "sleep 30"]);
    c.wait_state(plain, &["RUNNING"], Duration::from_secs(20));
    let (code, err) = c.fails_err(
        "srun",
        &["--jobid", &plain.to_string(), "--het-group=1", "true"],
    );
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "srun: error: Requested het-group offset exceeds highest hetjob index (1 > 0)\n"
        )
    );
    c.ok("scancel", &[&plain.to_string()]);
}

#[test]
fn scancel_of_a_het_step_ends_every_part() {
    let c = TestCluster::start();
    c.script(
        "long.sh",
        "#!/bin/sh\n#SBATCH -n1\n#SBATCH -o long.out\n#SBATCH hetjob\n#SBATCH -n1\n\
         srun --het-group=0,1 sleep 60; echo rc=$?\n",
    );
    let l = c.submit(&["long.sh"]);
    // Wait for the step's part in component 1 (`squeue -s` lists it by that job's id).
    wait_until("het step", Duration::from_secs(30), || {
        let o = c.run("squeue", &["-h", "-s", "-o", "%i"]);
        let s = text(&o.stdout);
        (s.contains(&format!("{l}.0")) && s.contains(&format!("{}.0", l + 1))).then_some(())
    });
    // `L+1.0` names the step of component 1: the whole step ends.
    c.ok("scancel", &[&format!("{l}+1.0")]);
    let out = c.wait_file("long.out", |s| s.contains("rc="));
    assert!(!out.contains("rc=0"), "{out}");
    assert_eq!(c.wait_done(l + 1), "COMPLETED");
    let rows = c.sacct_rows(l, 5);
    assert!(
        rows.contains(&format!("{l}+0.0|CANCELLED|0:15")),
        "{rows:?}"
    );
    assert!(
        rows.contains(&format!("{l}+1.0|CANCELLED|0:15")),
        "{rows:?}"
    );
    // `sacct -j L+1` shows that component alone, `L+1.0` its step alone.
    let one = c.ok(
        "sacct",
        &["-j", &format!("{l}+1"), "-n", "-P", "-o", "JobID,State"],
    );
    assert_eq!(one, format!("{l}+1|COMPLETED\n{l}+1.0|CANCELLED\n"));
    let step = c.ok(
        "sacct",
        &["-j", &format!("{l}+1.0"), "-n", "-P", "-o", "JobID"],
    );
    assert_eq!(step, format!("{l}+1.0\n"));
}

#[test]
fn a_het_allocation_waits_until_every_component_fits() {
    let c = TestCluster::start();
    let busy = c.submit(&["-n3", "-o", "/dev/null", "--wrap", "sleep 4"]);
    c.wait_state(busy, &["RUNNING"], Duration::from_secs(20));
    // One CPU is free: enough for component 0 alone, so neither starts.
    let child = c
        .cmd("salloc")
        .args(["-n1", ":", "-n2", "sh", "-c", "echo got $SLURM_JOB_ID"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let l = busy + 1;
    wait_until("pending het allocation", Duration::from_secs(20), || {
        let o = c.run("squeue", &["-h", "-j", &l.to_string(), "-o", "%i %T %r"]);
        let mut rows: Vec<String> = text(&o.stdout).lines().map(String::from).collect();
        rows.sort();
        (rows
            == [
                format!("{l}+0 PENDING Resources"),
                format!("{l}+1 PENDING Resources"),
            ])
        .then_some(())
    });
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(text(&o.stdout), format!("got {l}\n"));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("salloc: Pending job allocation {l}"))
            && err.contains(&format!("salloc: job {l} queued and waiting for resources"))
            && err.contains(&format!("salloc: Granted job allocation {l}")),
        "{err}"
    );
}
