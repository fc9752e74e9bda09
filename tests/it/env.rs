//! The batch step's environment against the variable set of real Slurm's batch jobs
//! (`tests/data/golden/env_sbatch_*.txt`), `--export` semantics and `--chdir`.

use crate::harness::*;
use std::collections::BTreeMap;

/// Variables sluice sets on purpose that Slurm 22.05 does not (see `stepd::env`).
const SLUICE_EXTRAS: &[&str] = &["SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"];

/// `env | sort`-style lines into a map.
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The job-side variables (Slurm's own plus those slurmd/slurmstepd set) of the first
/// job output block of a golden transcript.
fn golden_job_vars(file: &str) -> Vec<String> {
    let path = golden_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().skip_while(|l| !l.starts_with("[file: "));
    assert!(lines.next().is_some(), "{file} has no job output block");
    lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
        .filter(|k| {
            k.starts_with("SLURM")
                || ["ENVIRONMENT", "HOSTNAME", "TMPDIR", "PWD"].contains(&k.as_str())
        })
        .collect()
}

/// Runs `env` in a batch job with `args` and returns its environment.
fn job_env(c: &TestCluster, args: &[&str]) -> (u32, BTreeMap<String, String>) {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--wrap", "env; echo END_OF_ENV=1"]);
    let mut cmd = c.cmd("sbatch");
    cmd.arg("--parsable")
        .args(&a)
        .env("PROBE_FROM_SUBMIT", "kept");
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let id: u32 = stdout(&o).trim().parse().unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    let text = c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("END_OF_ENV=1"));
    (id, parse_env(&text))
}

#[test]
fn the_batch_environment_has_slurms_variables_with_this_jobs_values() {
    let c = TestCluster::start();
    let (id, env) = job_env(&c, &[]);
    let node = c.node();
    let work = c.work.display().to_string();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap();
    let want = [
        ("SLURM_JOB_ID", id.to_string()),
        ("SLURM_JOBID", id.to_string()),
        ("SLURM_JOB_NAME", "wrap".into()),
        ("SLURM_SUBMIT_DIR", work.clone()),
        ("SLURM_SUBMIT_HOST", sluice::config::short_hostname()),
        ("SLURM_JOB_NODELIST", node.clone()),
        ("SLURM_NODELIST", node.clone()),
        ("SLURM_NNODES", "1".into()),
        ("SLURM_JOB_NUM_NODES", "1".into()),
        ("SLURM_CPUS_ON_NODE", "1".into()),
        ("SLURM_JOB_CPUS_PER_NODE", "1".into()),
        ("SLURM_TASKS_PER_NODE", "1".into()),
        ("SLURM_JOB_PARTITION", "debug".into()),
        ("SLURM_CLUSTER_NAME", "testc".into()),
        ("SLURMD_NODENAME", node.clone()),
        ("SLURM_JOB_USER", user.name.clone()),
        ("SLURM_JOB_UID", user.uid.to_string()),
        ("SLURM_JOB_GID", user.gid.to_string()),
        ("SLURM_GTIDS", "0".into()),
        ("SLURM_PROCID", "0".into()),
        ("SLURM_LOCALID", "0".into()),
        ("SLURM_NODEID", "0".into()),
        ("SLURM_JOB_QOS", "normal".into()),
        ("SLURM_NODE_ALIASES", "(null)".into()),
        ("ENVIRONMENT", "BATCH".into()),
        ("HOSTNAME", node.clone()),
        ("TMPDIR", "/tmp".into()),
        ("PWD", work.clone()),
        // --export=ALL (the default) carries the submit environment.
        ("PROBE_FROM_SUBMIT", "kept".into()),
    ];
    for (k, v) in want {
        assert_eq!(env.get(k), Some(&v), "{k} in {env:#?}");
    }
    assert!(
        env.get("SLURM_WORKING_CLUSTER")
            .is_some_and(|v| v.starts_with("testc:")),
        "{env:#?}"
    );
    assert!(
        env.get("SLURM_TASK_PID")
            .is_some_and(|v| v.parse::<u32>().is_ok())
    );
    // Without -n, no task count (as in Slurm's plain batch job).
    assert!(!env.contains_key("SLURM_NTASKS"), "{env:#?}");
    assert!(!env.contains_key("SLURM_CPUS_PER_TASK"), "{env:#?}");

    let golden = golden_job_vars("env_sbatch_plain.txt");
    for k in &golden {
        assert!(env.contains_key(k), "Slurm sets {k}; sluice does not");
    }
    for k in env.keys().filter(|k| k.starts_with("SLURM")) {
        assert!(
            golden.contains(k) || SLUICE_EXTRAS.contains(&k.as_str()),
            "sluice sets {k}, Slurm's plain batch job does not"
        );
    }
}

#[test]
fn task_and_cpu_counts_match_slurms_variable_sets() {
    let c = TestCluster::start();
    let (_, env) = job_env(&c, &["-N", "1", "-n", "4"]);
    for (k, v) in [
        ("SLURM_NTASKS", "4"),
        ("SLURM_NPROCS", "4"),
        ("SLURM_CPUS_ON_NODE", "4"),
        ("SLURM_JOB_CPUS_PER_NODE", "4"),
        ("SLURM_TASKS_PER_NODE", "4"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }
    let golden = golden_job_vars("env_sbatch_N1_n4.txt");
    for k in golden.iter().filter(|k| k.as_str() != "SLURM_TASK_PID") {
        assert!(
            env.contains_key(k),
            "-N1 -n4: Slurm sets {k}; sluice does not"
        );
    }
    let (_, env) = job_env(&c, &["--ntasks-per-node=2", "-c", "2"]);
    for (k, v) in [
        ("SLURM_NTASKS", "2"),
        ("SLURM_NTASKS_PER_NODE", "2"),
        ("SLURM_CPUS_PER_TASK", "2"),
        ("SLURM_CPUS_ON_NODE", "4"),
        ("SLURM_TASKS_PER_NODE", "2"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }
    for k in &golden_job_vars("env_sbatch_ntpn2_cpt2.txt") {
        assert!(
            env.contains_key(k),
            "--ntasks-per-node=2 -c2: Slurm sets {k}; sluice does not"
        );
    }
    let (_, env) = job_env(&c, &["--mem=1G"]);
    assert_eq!(
        env.get("SLURM_MEM_PER_NODE").map(String::as_str),
        Some("1024")
    );
    assert!(!env.contains_key("SLURM_MEM_PER_CPU"));
}

#[test]
fn export_all_none_and_lists() {
    let c = TestCluster::start();
    let probe = |args: &[&str]| {
        let mut a = vec!["--parsable"];
        a.extend_from_slice(args);
        a.extend_from_slice(&[
            "--wrap",
            "echo \"a=${EXP_A-unset} b=${EXP_B-unset} c=${EXP_C-unset} id=${SLURM_JOB_ID-unset} path=${PATH:+set}\"",
        ]);
        let o = c
            .cmd("sbatch")
            .args(&a)
            .env("EXP_A", "from_env_a")
            .env("EXP_C", "from_env_c")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let id: u32 = stdout(&o).trim().parse().unwrap();
        c.wait_done(id);
        let s = c.wait_file(&format!("slurm-{id}.out"), |s| s.ends_with('\n'));
        (id, s.trim().to_string())
    };
    let (id, s) = probe(&[]);
    assert_eq!(
        s,
        format!("a=from_env_a b=unset c=from_env_c id={id} path=set")
    );
    let (id, s) = probe(&["--export=ALL"]);
    assert_eq!(
        s,
        format!("a=from_env_a b=unset c=from_env_c id={id} path=set")
    );
    let (id, s) = probe(&["--export=NONE"]);
    assert!(
        s.starts_with(&format!("a=unset b=unset c=unset id={id}")),
        "{s}"
    );
    let (id, s) = probe(&["--export=EXP_A,EXP_B=given"]);
    assert!(
        s.starts_with(&format!("a=from_env_a b=given c=unset id={id}")),
        "{s}"
    );
    let (id, s) = probe(&["--export=ALL,EXP_B=given,EXP_C=over"]);
    assert_eq!(s, format!("a=from_env_a b=given c=over id={id} path=set"));
    // SBATCH_EXPORT is the same option from the environment.
    let o = c
        .cmd("sbatch")
        .args(["--parsable", "--wrap", "echo \"a=${EXP_A-unset}\""])
        .env("EXP_A", "x")
        .env("SBATCH_EXPORT", "NONE")
        .output()
        .unwrap();
    let id: u32 = stdout(&o).trim().parse().unwrap();
    c.wait_done(id);
    assert_eq!(
        c.wait_file(&format!("slurm-{id}.out"), |s| s.ends_with('\n')),
        "a=unset\n"
    );
}

#[test]
fn chdir_sets_the_working_directory_and_relative_outputs_follow_it() {
    let c = TestCluster::start();
    let sub = c.path("sub");
    std::fs::create_dir(&sub).unwrap();
    // Relative --chdir is taken from the submit directory; -o relative to the work dir.
    let id = c.submit(&[
        "-D",
        "sub",
        "-o",
        "o-%j.txt",
        "--wrap",
        "pwd; echo $SLURM_SUBMIT_DIR",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = std::fs::read_to_string(sub.join(format!("o-{id}.txt"))).unwrap();
    assert_eq!(out, format!("{}\n{}\n", sub.display(), c.work.display()));
    assert_eq!(c.show_field(id, "WorkDir"), sub.display().to_string());
    // An absolute one, and the default output file lands there too.
    let abs = c.submit(&["--chdir", &sub.display().to_string(), "--wrap", "pwd"]);
    assert_eq!(c.wait_done(abs), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(sub.join(format!("slurm-{abs}.out"))).unwrap(),
        format!("{}\n", sub.display())
    );
    // A directory that does not exist, with the default output file: the output is
    // created under the work dir (Slurm's fname_create), so the job fails at launch
    // with 0:53 and no output anywhere.
    let bad = c.submit(&["-D", "/nonexistent-sluice-dir", "--wrap", "true"]);
    assert_eq!(c.wait_done(bad), "FAILED");
    assert_eq!(c.show_field(bad, "ExitCode"), "0:53");
    assert!(!c.path(&format!("slurm-{bad}.out")).exists());
    // With an absolute output file, slurmstepd runs the job in /tmp instead and says
    // so in the job's stderr.
    let out = c.path("fallback.out");
    let tmp = c.submit(&[
        "-D",
        "/nonexistent-sluice-dir",
        "-o",
        &out.display().to_string(),
        "--wrap",
        "pwd",
    ]);
    assert_eq!(c.wait_done(tmp), "COMPLETED");
    let node = c.show_field(tmp, "BatchHost");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        format!(
            "slurmstepd-{node}: error: couldn't chdir to `/nonexistent-sluice-dir': \
             No such file or directory: going to /tmp instead\n/tmp\n"
        )
    );
}

/// Variables srun sets for its step and tasks (src/common/env.c `setup_env` as srun and
/// slurmstepd apply it): everything else a task sees comes unchanged from the
/// environment srun ran in.
const STEP_SET: &[&str] = &[
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_SRUN_COMM_HOST",
    "SLURM_SRUN_COMM_PORT",
    "SLURM_LAUNCH_NODE_IPADDR",
    "SLURM_NODELIST",
    "SLURM_NNODES",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_DISTRIBUTION",
    "SLURM_UMASK",
    "SLURM_LABELIO",
    "SLURM_GTIDS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_TASK_PID",
    "SLURM_CPU_BIND",
    "SLURM_CPU_BIND_LIST",
    "SLURM_CPU_BIND_TYPE",
    "SLURM_CPU_BIND_VERBOSE",
    "_",
];

/// Runs `script` (sh) as a batch job with `args`; the script finds `$OUT` (a directory
/// for what it writes) and its environment is saved as `$OUT/batch.env` first.
/// Returns the directory once the job ended COMPLETED.
fn run_in_job(c: &TestCluster, name: &str, args: &[&str], script: &str) -> std::path::PathBuf {
    let dir = c.path(name);
    std::fs::create_dir(&dir).unwrap();
    let text = format!(
        "#!/bin/sh\nexport OUT={}\nenv > $OUT/batch.env\n{script}\n",
        dir.display()
    );
    let sh = c.script(&format!("{name}.sh"), &text);
    let log = dir.join("job.out").display().to_string();
    let mut a: Vec<&str> = vec!["-o", &log];
    a.extend_from_slice(args);
    let sh_s = sh.display().to_string();
    a.push(&sh_s);
    let id = c.submit(&a);
    // A heterogeneous job ends with its last component (`L+1`).
    let state = if args.contains(&":") {
        c.wait_done(id + 1);
        c.field(&id.to_string(), "JobState").unwrap_or_default()
    } else {
        c.wait_done(id)
    };
    assert_eq!(
        state,
        "COMPLETED",
        "{name}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    dir
}

fn read_env(dir: &std::path::Path, file: &str) -> BTreeMap<String, String> {
    let p = dir.join(file);
    parse_env(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// Every variable of the batch shell that srun does not set reaches the task with the
/// same value (`also` names more that the step sets in this case).
fn assert_inherited(
    what: &str,
    batch: &BTreeMap<String, String>,
    task: &BTreeMap<String, String>,
    also: &[&str],
) {
    for (k, v) in batch {
        if STEP_SET.contains(&k.as_str()) || also.contains(&k.as_str()) {
            continue;
        }
        assert_eq!(task.get(k), Some(v), "{what}: {k} in the task");
    }
}

/// `srun -n3 --label env` in an `sbatch -n3` job shows the variable set of Slurm's
/// (tests/data/golden/env_srun_in_batch.txt) and the job's values.
#[test]
fn srun_tasks_see_slurms_variable_set_and_the_jobs_values() {
    let c = TestCluster::start();
    let dir = run_in_job(
        &c,
        "plain",
        &["-n3"],
        "srun -n3 --label env > $OUT/tasks.txt",
    );
    let batch = read_env(&dir, "batch.env");
    let text = std::fs::read_to_string(dir.join("tasks.txt")).unwrap();
    let task0: BTreeMap<String, String> = parse_env(
        &text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("0: "))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    assert_eq!(task0.get("SLURM_NTASKS").map(String::as_str), Some("3"));
    assert_eq!(task0.get("SLURM_PROCID").map(String::as_str), Some("0"));
    assert_eq!(task0.get("SLURM_STEP_ID").map(String::as_str), Some("0"));
    assert_inherited("-n3", &batch, &task0, &[]);
    let golden_text = std::fs::read_to_string(golden_dir().join("env_srun_in_batch.txt")).unwrap();
    let golden: Vec<&str> = golden_text
        .lines()
        .filter_map(|l| l.strip_prefix("0: "))
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| k.starts_with("SLURM"))
        .collect();
    assert!(golden.len() > 40);
    // No slurm.conf pack-group variable in sluice (no het pack of one component).
    for k in golden
        .iter()
        .filter(|k| **k != "SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0")
    {
        assert!(task0.contains_key(*k), "Slurm's task has {k}; sluice's not");
    }
    for k in task0.keys().filter(|k| k.starts_with("SLURM")) {
        assert!(
            golden.contains(&k.as_str()) || SLUICE_EXTRAS.contains(&k.as_str()),
            "sluice's task has {k}; Slurm's not"
        );
    }
}

/// The job's --ntasks-per-node and -c reach srun's tasks when srun was not given its
/// own (as srun passes its environment on); SLURM_NTASKS_PER_NODE shapes a step given
/// only -N; SRUN_CPUS_PER_TASK is srun's -c; srun's own options win.
#[test]
fn srun_tasks_inherit_the_jobs_per_node_and_per_task_counts() {
    let c = TestCluster::start();
    let dir = run_in_job(
        &c,
        "ntpn",
        &["--ntasks-per-node=2", "-c2"],
        "srun env > $OUT/task.env\n\
         srun -N1 printenv SLURM_PROCID > $OUT/n1.txt\n\
         srun -n1 -c1 --ntasks-per-node=1 env > $OUT/own.env",
    );
    let batch = read_env(&dir, "batch.env");
    assert_eq!(
        batch.get("SLURM_NTASKS_PER_NODE").map(String::as_str),
        Some("2")
    );
    let task = read_env(&dir, "task.env");
    assert_eq!(
        task.get("SLURM_NTASKS_PER_NODE").map(String::as_str),
        Some("2")
    );
    assert_eq!(
        task.get("SLURM_CPUS_PER_TASK").map(String::as_str),
        Some("2")
    );
    assert_inherited("--ntasks-per-node=2 -c2", &batch, &task, &[]);
    let mut ranks: Vec<String> = std::fs::read_to_string(dir.join("n1.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    ranks.sort();
    assert_eq!(ranks, ["0", "1"], "srun -N1 in a --ntasks-per-node=2 job");
    let own = read_env(&dir, "own.env");
    assert_eq!(
        own.get("SLURM_CPUS_PER_TASK").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        own.get("SLURM_NTASKS_PER_NODE").map(String::as_str),
        Some("1")
    );
    assert_inherited(
        "srun -c1 --ntasks-per-node=1",
        &batch,
        &own,
        &["SLURM_CPUS_PER_TASK", "SLURM_NTASKS_PER_NODE"],
    );

    // A job without -c: SRUN_CPUS_PER_TASK is srun's -c, and a step's CPUs count
    // against the job's (two tasks of three CPUs do not fit in four).
    let dir = run_in_job(
        &c,
        "srun_cpt",
        &["-n4"],
        "srun -n1 sh -c 'echo ${SLURM_CPUS_PER_TASK-unset}' > $OUT/none.txt\n\
         SRUN_CPUS_PER_TASK=2 srun -n1 printenv SLURM_CPUS_PER_TASK > $OUT/two.txt\n\
         SRUN_CPUS_PER_TASK=3 srun -n2 true 2> $OUT/three.err; echo $? > $OUT/three.rc",
    );
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    assert_eq!(read("none.txt"), "unset\n");
    assert_eq!(read("two.txt"), "2\n");
    assert_ne!(read("three.rc"), "0\n", "{}", read("three.err"));
    assert!(
        read("three.err").contains("More processors requested than permitted"),
        "{}",
        read("three.err")
    );
}

/// A heterogeneous job's srun part sees the batch shell's per-component variables.
#[test]
fn a_het_job_step_inherits_the_components_variables() {
    let c = TestCluster::start();
    let dir = run_in_job(
        &c,
        "het",
        &["--ntasks-per-node=1", "-c2", ":", "-n1"],
        "srun --het-group=0 env > $OUT/task.env",
    );
    let batch = read_env(&dir, "batch.env");
    let task = read_env(&dir, "task.env");
    for k in [
        "SLURM_CPUS_PER_TASK_HET_GROUP_0",
        "SLURM_NTASKS_PER_NODE_HET_GROUP_0",
        "SLURM_HET_SIZE",
    ] {
        assert!(batch.contains_key(k), "batch shell has no {k}");
    }
    assert_eq!(
        task.get("SLURM_CPUS_PER_TASK").map(String::as_str),
        Some("2")
    );
    assert_inherited(
        "het group 0",
        &batch,
        &task,
        &[
            "SLURM_JOB_NODELIST",
            "SLURM_JOB_NUM_NODES",
            "SLURM_JOB_CPUS_PER_NODE",
        ],
    );
}

/// `--gpus-per-task` in the job: each task of a plain `srun` sees the job's request
/// and its own device, the rest as in the batch shell.
#[test]
fn srun_tasks_of_a_gpus_per_task_job_inherit_the_request() {
    let c = TestCluster::start_with(Setup {
        top: crate::gpu::FOUR_GPUS,
        ..Setup::default()
    });
    let dir = run_in_job(
        &c,
        "gpt",
        &["-n2", "--gpus-per-task=1"],
        "srun sh -c 'env > $OUT/task$SLURM_PROCID.env'",
    );
    let batch = read_env(&dir, "batch.env");
    assert_eq!(
        batch.get("SLURM_GPUS_PER_TASK").map(String::as_str),
        Some("1")
    );
    // Device variables are the step's and the task's own.
    let devices: Vec<&str> = batch
        .keys()
        .map(String::as_str)
        .filter(|k| {
            [
                "CUDA_",
                "GPU_DEVICE",
                "ROCR_",
                "ZE_",
                "NCCL_",
                "SLURM_STEP_GPUS",
                "SLURM_JOB_GPUS",
            ]
            .iter()
            .any(|p| k.starts_with(p))
        })
        .collect();
    let mut seen = Vec::new();
    for r in 0..2 {
        let task = read_env(&dir, &format!("task{r}.env"));
        assert_eq!(
            task.get("SLURM_GPUS_PER_TASK").map(String::as_str),
            Some("1")
        );
        assert_inherited("--gpus-per-task=1", &batch, &task, &devices);
        let dev = task
            .get("CUDA_VISIBLE_DEVICES")
            .cloned()
            .unwrap_or_default();
        assert_eq!(dev.split(',').count(), 1, "task {r}: {dev}");
        seen.push(dev);
    }
    assert_ne!(seen[0], seen[1], "each task its own GPU");
}
