//! GPUs through the real front-ends (issue 8), with fake GPUs declared in `[[gres]]`
//! entries: steps taking disjoint subsets of the job's GPUs and waiting when they are
//! taken, per-task binding for each `--gpu-bind` mode, typed step requests, CPUs moved
//! near a task's GPU, and (where cgroup v1 devices and mknod are available) the device
//! file of a GPU not allocated being unopenable.

use crate::harness::*;
use std::collections::BTreeSet;
use std::time::Duration;

/// `[[gres]]` lines for four untyped GPUs: 0-1 near CPU 0, 2-3 near CPU 1 (every machine
/// that runs the tests has CPUs 0 and 1).
pub(crate) const FOUR_GPUS: &str = r#"
[[gres]]
name = "gpu"
count = 2
cores = "0"
[[gres]]
name = "gpu"
count = 2
cores = "1"
"#;

fn cluster(top: &'static str) -> TestCluster {
    TestCluster::start_with(Setup {
        top,
        ..Setup::default()
    })
}

/// Runs `script` as a batch job with `args` and returns its output once it ended
/// COMPLETED.
fn batch_output(c: &TestCluster, name: &str, args: &[&str], script: &str) -> String {
    let out = c.path(&format!("{name}.out"));
    c.script(&format!("{name}.sh"), &format!("#!/bin/sh\n{script}"));
    let out_s = out.display().to_string();
    let mut a: Vec<&str> = vec!["-o", &out_s];
    a.extend_from_slice(args);
    let sh = c.path(&format!("{name}.sh")).display().to_string();
    a.push(&sh);
    let id = c.submit(&a);
    let state = c.wait_done(id);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(
        state,
        "COMPLETED",
        "job {id} output:\n{text}\n{}\n{}",
        c.ok("scontrol", &["show", "job", &id.to_string()]),
        c.controller_log()
    );
    text
}

/// The value after `key=` on the line starting with `prefix` (srun `-l` labels).
fn value(out: &str, prefix: &str) -> String {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
        .trim()
        .to_string()
}

#[test]
fn concurrent_steps_get_disjoint_gpus_and_a_step_that_does_not_fit_waits() {
    let c = cluster(FOUR_GPUS);
    let wait_for = |f: &str| format!("while [ ! -e {f} ]; do sleep 0.1; done");
    let script = format!(
        "echo job=$CUDA_VISIBLE_DEVICES\n\
         srun --exact -n1 --gres=gpu:2 sh -c 'echo A=$SLURM_STEP_GPUS; touch a.up; {go}' &\n\
         {a}\n\
         srun --exact -n1 --gpus=2 sh -c 'echo B=$SLURM_STEP_GPUS; touch b.up; {go}' &\n\
         {b}\n\
         srun --exact -n1 --gres=gpu:1 sh -c 'echo C=$SLURM_STEP_GPUS' 2>c.err\n\
         wait\n",
        go = wait_for("go"),
        a = wait_for("a.up"),
        b = wait_for("b.up"),
    );
    for f in ["a.up", "b.up", "go", "c.err"] {
        let _ = std::fs::remove_file(c.path(f));
    }
    c.script("steps.sh", &format!("#!/bin/sh\n{script}"));
    let out = c.path("steps.out").display().to_string();
    let sh = c.path("steps.sh").display().to_string();
    let id = c.submit(&["-n4", "--gres=gpu:4", "-o", &out, &sh]);
    // The third step waits, saying so as Slurm does, while the first two hold all four.
    let err = c.wait_file("c.err", |s| s.contains("temporarily disabled"));
    assert!(
        err.contains(&format!(
            "srun: Job {id} step creation temporarily disabled, retrying (Requested nodes are busy)"
        )),
        "{err}"
    );
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(value(&text, "job="), "0,1,2,3");
    let set = |v: String| -> BTreeSet<String> { v.split(',').map(String::from).collect() };
    let a = set(value(&text, "A="));
    let b = set(value(&text, "B="));
    assert_eq!(a.len(), 2, "{text}");
    assert_eq!(b.len(), 2, "{text}");
    assert!(a.is_disjoint(&b), "{text}");
    assert_eq!(value(&text, "C=").split(',').count(), 1, "{text}");
}

#[test]
fn every_gpu_bind_mode_chooses_each_tasks_devices() {
    let c = cluster(FOUR_GPUS);
    let show = "sh -c 'echo $CUDA_VISIBLE_DEVICES/$SLURM_STEP_GPUS/$GPU_DEVICE_ORDINAL'";
    let script = format!(
        "srun -l -n2 --gpus-per-task=1 {show} | sed 's/^/pertask /'\n\
         srun -l -n2 --gres=gpu:4 --gpu-bind=map_gpu:3,1 {show} | sed 's/^/map /'\n\
         srun -l -n2 --gres=gpu:4 --gpu-bind=mask_gpu:0x3,0xc {show} | sed 's/^/mask /'\n\
         srun -l -n2 --gres=gpu:4 --cpu-bind=cores --gpu-bind=closest {show} | sed 's/^/closest /'\n\
         srun -l -n2 --gres=gpu:4 --cpu-bind=cores --gpu-bind=single:1 {show} | sed 's/^/single /'\n\
         srun -l -n2 --gpus-per-task=1 --gpu-bind=none {show} | sed 's/^/none /'\n\
         srun -n1 --gres=gpu:2 --gpu-bind=verbose,map_gpu:1 true 2>&1 | sed 's/^/verbose /'\n\
         srun -n1 --gres=gpu:4 --cpu-bind=cores --gpu-bind=map_gpu:2 \
           sh -c 'grep Cpus_allowed_list /proc/self/status' | sed 's/^/near /'\n"
    );
    let out = batch_output(&c, "bind", &["-n4", "--gres=gpu:4"], &script);
    // --gpus-per-task=1: Slurm's golden env_gpu_per_task.
    assert_eq!(value(&out, "pertask 0:"), "0/0/0");
    assert_eq!(value(&out, "pertask 1:"), "1/1/1");
    assert_eq!(value(&out, "map 0:"), "3/3/3");
    assert_eq!(value(&out, "map 1:"), "1/1/1");
    assert_eq!(value(&out, "mask 0:"), "0,1/0,1/0,1");
    assert_eq!(value(&out, "mask 1:"), "2,3/2,3/2,3");
    // Task 0 is bound to CPU 0 (near GPUs 0-1), task 1 to CPU 1 (near 2-3).
    assert_eq!(value(&out, "closest 0:"), "0,1/0,1/0,1");
    assert_eq!(value(&out, "closest 1:"), "2,3/2,3/2,3");
    assert_eq!(value(&out, "single 0:"), "0/0/0");
    assert_eq!(value(&out, "single 1:"), "2/2/2");
    assert_eq!(value(&out, "none 0:"), "0,1/0,1/0,1");
    assert_eq!(value(&out, "none 1:"), "0,1/0,1/0,1");
    assert!(
        out.contains("verbose gpu-bind: usable_gres=0x2; bit_alloc=0x3; local_inx=0; global_list=1; local_list=1"),
        "{out}"
    );
    // The task bound to GPU 2 runs on GPU 2's CPU (1), not the first one.
    assert_eq!(value(&out, "near Cpus_allowed_list:"), "1");
}

#[test]
fn typed_step_requests_take_devices_of_that_type_and_bad_ones_are_refused() {
    let c = cluster(
        r#"
[[gres]]
name = "gpu"
type = "a100"
count = 2
[[gres]]
name = "gpu"
type = "h100"
count = 2
"#,
    );
    assert!(
        c.ok("sinfo", &["-h", "-o", "%G"])
            .contains("gpu:a100:2,gpu:h100:2")
    );
    let script = "srun -n1 --gres=gpu:h100:1 sh -c 'echo h=$SLURM_STEP_GPUS'\n\
                  srun -n1 --gpus=a100:2 sh -c 'echo a=$SLURM_STEP_GPUS'\n\
                  srun -n1 --gres=gpu:v100:1 true 2>&1 | sed 's/^/v100 /'\n\
                  srun -n1 --gres=gpu:5 true 2>&1 | sed 's/^/five /'\n\
                  srun -n1 --gpu-bind=nearest true 2>&1 | sed 's/^/badbind /'\n";
    let out = batch_output(&c, "typed", &["--gres=gpu:4"], script);
    assert_eq!(value(&out, "h="), "2");
    assert_eq!(value(&out, "a="), "0,1");
    for p in ["v100 ", "five "] {
        assert!(
            value(&out, p).contains("Invalid generic resource (gres) specification"),
            "{out}"
        );
    }
    assert!(
        value(&out, "badbind ").contains("Invalid --gpu-bind argument: nearest"),
        "{out}"
    );
    // Submissions: a GRES no node has is an invalid GRES (golden errors_sbatch), a
    // known one beyond every node an impossible configuration.
    for (args, want) in [
        (
            "--gres=fpga:1",
            "sbatch: error: Invalid generic resource (gres) specification\n",
        ),
        (
            "--gres=gpu:v100:1",
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
        (
            "--gpus=5",
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
    ] {
        let (code, err) = c.fails_err("sbatch", &[args, "--wrap", "true"]);
        assert_eq!((code, err.as_str()), (1, want), "{args}");
    }
}

#[test]
fn srun_outside_an_allocation_binds_one_gpu_per_task() {
    let c = cluster(FOUR_GPUS);
    let o = c.ok(
        "srun",
        &[
            "-l",
            "-n2",
            "--gpus-per-task=1",
            "sh",
            "-c",
            "echo $CUDA_VISIBLE_DEVICES",
        ],
    );
    let mut seen: Vec<String> = o.lines().map(|l| l.trim().to_string()).collect();
    seen.sort();
    assert_eq!(seen, vec!["0: 0", "1: 1"], "{o}");
}

/// Makes `n` character devices `gpuN` in `dir` with a major number no driver uses:
/// opening one fails with ENXIO ("No such device") unless a devices cgroup refuses it
/// first (EPERM). `None` when mknod is not permitted here.
fn fake_gpu_nodes(dir: &std::path::Path, n: u32) -> Option<()> {
    for i in 0..n {
        let made = nix::sys::stat::mknod(
            &dir.join(format!("gpu{i}")),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(240, u64::from(i)),
        );
        if let Err(e) = made {
            eprintln!("skipped: cannot create device files: {e}");
            return None;
        }
    }
    Some(())
}

#[test]
fn a_gpu_not_allocated_is_unopenable_and_ordinals_are_local() {
    let devdir = tempfile::tempdir().unwrap();
    if fake_gpu_nodes(devdir.path(), 2).is_none() {
        return;
    }
    let top: &'static str = Box::leak(
        format!(
            "[[gres]]\nname = \"gpu\"\nfile = \"{}/gpu[0-1]\"\n",
            devdir.path().display()
        )
        .into_boxed_str(),
    );
    let c = TestCluster::start_with(Setup {
        top,
        cgroup: "ConstrainDevices = true",
        ..Setup::default()
    });
    let m = sluice::stepd::isolate::detect(
        &c.cgroup,
        sluice::stepd::isolate::Scope::batch(&c.cgroup.root, 0, 0),
    );
    if m.backend() != sluice::stepd::isolate::Backend::V1 {
        eprintln!(
            "skipped: no writable cgroup v1 devices hierarchy ({:?})",
            m.backend()
        );
        return;
    }
    let d = devdir.path().display();
    // Prints the reason an open of the file fails (the shell's message after its last
    // `: `).
    c.script(
        "probe.sh",
        "#!/bin/sh\n(exec 3< \"$1\") 2>&1 | sed 's/.*: //'\n",
    );
    let probe = |f: &str| format!("./probe.sh {d}/{f}");
    // A job of two GPUs; its steps take one each.
    let script = format!(
        "echo job=$CUDA_VISIBLE_DEVICES\n\
         srun --gres=gpu:1 sh -c 'echo s0=$SLURM_STEP_GPUS/$CUDA_VISIBLE_DEVICES; echo own=$({p0}); echo other=$({p1})'\n",
        p0 = probe("gpu0"),
        p1 = probe("gpu1"),
    );
    let out = batch_output(&c, "devs", &["--gres=gpu:2"], &script);
    assert_eq!(value(&out, "job="), "0,1");
    // The step holds GPU 0: its file opens as far as the (absent) driver, GPU 1's is
    // refused by the devices cgroup; CUDA would number the one visible device 0.
    assert_eq!(value(&out, "s0="), "0/0");
    // ENXIO: "No such device or address".
    assert!(value(&out, "own=").starts_with("No such device"), "{out}");
    assert_eq!(value(&out, "other="), "Operation not permitted");
    // A batch job of one GPU cannot open the other's file: with GPU 0 taken by another
    // job, it gets GPU 1, sees it as ordinal 0, and GPU 0's file is refused.
    let script = format!(
        "echo job=$SLURM_JOB_GPUS/$CUDA_VISIBLE_DEVICES\necho other=$({})\n",
        probe("gpu0")
    );
    let blocker = c.submit(&["--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 30"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let out = batch_output(&c, "devs1", &["--gres=gpu:1"], &script);
    assert_eq!(value(&out, "job="), "1/0");
    assert_eq!(value(&out, "other="), "Operation not permitted");
    c.ok("scancel", &[&blocker.to_string()]);
}

#[test]
fn gpu_steps_get_nccl_variables_unless_the_user_set_them() {
    let c = cluster(FOUR_GPUS);
    let show = "sh -c 'echo $MASTER_ADDR/$MASTER_PORT/$NCCL_DEBUG_FILE'";
    let script = format!(
        "srun -l -n2 --gpus-per-task=1 {show} | sed 's/^/plain /'\n\
         export NCCL_DEBUG=INFO MASTER_PORT=29500\n\
         srun -l -n2 --gpus-per-task=1 {show} | sed 's/^/user /'\n\
"
    );
    let out = batch_output(&c, "nccl", &["-n2", "--gres=gpu:2"], &script);
    let node = c.node();
    let plain: Vec<String> = ["plain 0:", "plain 1:"]
        .iter()
        .map(|p| value(&out, p))
        .collect();
    // Both ranks agree on the rendezvous; the port is sluice's, derived from the ids.
    assert_eq!(plain[0], plain[1], "{out}");
    let (addr, rest) = plain[0].split_once('/').unwrap();
    assert_eq!(addr, node);
    let port: u16 = rest.trim_end_matches('/').parse().unwrap();
    assert!((20000..32000).contains(&port), "{port}");
    // The user's MASTER_PORT stays; NCCL_DEBUG brings one debug file per rank.
    let u0 = value(&out, "user 0:");
    let u1 = value(&out, "user 1:");
    assert!(u0.starts_with(&format!("{node}/29500/nccl-debug.")), "{u0}");
    assert!(
        u0.ends_with(".0.log") && u1.ends_with(".1.log"),
        "{u0} {u1}"
    );
}

/// Two MIG instances of one GPU and one whole GPU, declared as gres.conf does for MIG
/// (`MultipleFiles=` the GPU's file plus the instance's cap files, `UniqueId=` its
/// UUID). The device files are `/dev/null` (the shared GPU file), `/dev/zero` and
/// `/dev/full` (the instances' caps), and `/dev/random` (the whole GPU).
const MIG_GPUS: &str = r#"
[[gres]]
name = "gpu"
type = "a100_3g.20gb"
multiple_files = "/dev/null,/dev/zero"
unique_id = "MIG-11111111-2222-3333-4444-555555555555"
[[gres]]
name = "gpu"
type = "a100_1g.5gb"
multiple_files = "/dev/null,/dev/full"
unique_id = "MIG-66666666-7777-8888-9999-000000000000"
[[gres]]
name = "gpu"
type = "a100"
file = "/dev/random"
"#;

#[test]
fn mig_instances_are_typed_gres_and_jobs_see_their_uuids() {
    let c = cluster(MIG_GPUS);
    let node = c.node();
    assert_eq!(
        c.ok("sinfo", &["-h", "-N", "-n", &node, "-o", "%G"]).trim(),
        "gpu:a100_3g.20gb:1,gpu:a100_1g.5gb:1,gpu:a100:1"
    );
    let show = "echo cvd=$CUDA_VISIBLE_DEVICES; echo step=$SLURM_STEP_GPUS";
    let script = format!(
        "echo job=$SLURM_JOB_GPUS/$CUDA_VISIBLE_DEVICES\n\
         srun -n1 --gres=gpu:a100_1g.5gb:1 sh -c '{show}' | sed 's/^/small /'\n\
         srun -n1 --gres=gpu:a100:1 sh -c '{show}' | sed 's/^/whole /'\n\
         sleep 3\n"
    );
    let out = batch_output(&c, "mig", &["--gres=gpu:a100_1g.5gb:1,gpu:a100:1"], &script);
    // The batch shell holds instance 1 and GPU 2: the instance is named by its UUID,
    // the whole GPU keeps its ordinal.
    assert_eq!(
        value(&out, "job="),
        "1,2/MIG-66666666-7777-8888-9999-000000000000,2"
    );
    assert_eq!(
        value(&out, "small cvd="),
        "MIG-66666666-7777-8888-9999-000000000000"
    );
    assert_eq!(value(&out, "small step="), "1");
    assert_eq!(value(&out, "whole cvd="), "2");
    // The instance alone, as a job.
    let out = batch_output(
        &c,
        "mig1",
        &["--gres=gpu:a100_3g.20gb:1"],
        "echo job=$SLURM_JOB_GPUS/$CUDA_VISIBLE_DEVICES\n",
    );
    assert_eq!(
        value(&out, "job="),
        "0/MIG-11111111-2222-3333-4444-555555555555"
    );
    // No NVML here and no test hook: the GPU TRES are absent from sacct, not zeros.
    let ids = c.ok("sacct", &["-n", "-P", "-o", "JobID,TRESUsageInMax"]);
    assert!(ids.contains(".batch|cpu="), "{ids}");
    assert!(!ids.contains("gres/gpu"), "{ids}");
}

#[test]
fn gpu_usage_from_the_sampler_reaches_sacct_and_sstat() {
    // The test hook: the GPU probe (and so stepd's sampler) reads the GPUs' state
    // from this file (see sluice::gpuprobe).
    let readings = tempfile::tempdir().unwrap();
    let file = readings.path().join("gpus.toml");
    let gpu = |i: u32, util: u64, mem: u64| {
        format!("[[gpu]]\nindex = {i}\nutil = {util}\nmem_used_mib = {mem}\n")
    };
    std::fs::write(
        &file,
        [
            gpu(0, 40, 1024),
            gpu(1, 90, 3072),
            gpu(2, 20, 2048),
            gpu(3, 70, 5120),
        ]
        .concat(),
    )
    .unwrap();
    let c = TestCluster::start_with(Setup {
        top: FOUR_GPUS,
        env: vec![(
            "SLUICE_GPU_PROBE_FILE".to_string(),
            file.display().to_string(),
        )],
        ..Setup::default()
    });
    c.script(
        "use.sh",
        "#!/bin/sh\n\
         echo job=$SLURM_JOB_GPUS\n\
         srun -l -n2 --gpus-per-task=1 sh -c 'echo g=$SLURM_STEP_GPUS; sleep 4'\n\
         touch step.done\n\
         sleep 30\n",
    );
    // (utilization %, memory MiB) of each fake GPU, as in the readings file.
    let reading = |g: u32| [(40u64, 1024u64), (90, 3072), (20, 2048), (70, 5120)][g as usize];
    let size = |mib: f64| sluice::cli::usagefmt::convert_exact(mib, 2);
    let out = c.path("use.out");
    let sh = c.path("use.sh").display().to_string();
    let out_s = out.display().to_string();
    let id = c.submit(&["-n2", "--gres=gpu:2", "-o", &out_s, &sh]);
    let done = c.path("step.done");
    wait_until("the GPU step", Duration::from_secs(60), || {
        done.exists().then_some(())
    });
    let text = std::fs::read_to_string(&out).unwrap();
    let gpus = |prefix: &str| -> Vec<u32> {
        value(&text, prefix)
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect()
    };
    // sstat of the running batch step: its one task holds both of the job's GPUs, so
    // its reading is their sum.
    let job: Vec<u32> = gpus("job=");
    let (ju, jm) = job
        .iter()
        .fold((0, 0), |(u, m), g| (u + reading(*g).0, m + reading(*g).1));
    let batch = format!("{id}.batch");
    let row = wait_until("a batch sample with GPUs", Duration::from_secs(20), || {
        let o = c.ok("sstat", &["-n", "-P", "-j", &batch, "-o", "TRESUsageInMax"]);
        o.contains("gres/gpu").then_some(o)
    });
    assert!(
        row.contains(&format!(
            ",gres/gpumem={},gres/gpuutil={ju},mem=",
            size(jm as f64)
        )),
        "{row} (job GPUs {job:?})"
    );
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
    // The step's two tasks, one GPU each: the max is the busier task's GPU, the
    // average is over both tasks.
    let t0 = reading(gpus("0: g=")[0]);
    let t1 = reading(gpus("1: g=")[0]);
    let busier = if t1.0 > t0.0 { 1 } else { 0 };
    let fullest = if t1.1 > t0.1 { 1 } else { 0 };
    let step = c.ok(
        "sacct",
        &[
            "-n",
            "-P",
            "-j",
            &format!("{id}.0"),
            "-o",
            "TRESUsageInMax,TRESUsageInMaxTask,TRESUsageInAve",
        ],
    );
    let f: Vec<&str> = step.trim_end().split('|').collect();
    assert_eq!(f.len(), 3, "{step}");
    let want_max = format!(
        ",gres/gpumem={},gres/gpuutil={},",
        size(t0.1.max(t1.1) as f64),
        t0.0.max(t1.0)
    );
    assert!(f[0].contains(&want_max), "{step} want {want_max}");
    let want_task = format!(",gres/gpumem={fullest},gres/gpuutil={busier},");
    assert!(f[1].contains(&want_task), "{step} want {want_task}");
    let want_ave = format!(
        ",gres/gpumem={},gres/gpuutil={},",
        size(((t0.1 + t1.1) as f64 / 2.0).round()),
        ((t0.0 + t1.0) as f64 / 2.0).round()
    );
    assert!(f[2].contains(&want_ave), "{step} want {want_ave}");
}

/// A node of 6 CPUs in 2 sockets whose GPUs 0-1 are near the second socket (CPUs 3-5)
/// and GPUs 2-3 near the first (CPUs 0-2), so that "lowest GPU" and "lowest CPU"
/// point at different sockets.
fn two_socket_cluster() -> TestCluster {
    TestCluster::start_with(Setup {
        cpus: 6,
        node_extra: "sockets = 2\ncores_per_socket = 3",
        top: r#"
[[gres]]
name = "gpu"
count = 2
cores = "3-5"
[[gres]]
name = "gpu"
count = 2
cores = "0-2"
"#,
        ..Setup::default()
    })
}

/// The job's CPU ids and GRES on its (first) node, from `scontrol show job -d`.
fn alloc_detail(c: &TestCluster, id: u32) -> (String, String) {
    let out = c.ok("scontrol", &["show", "job", "-d", &id.to_string()]);
    let line = out
        .lines()
        .find(|l| l.contains("CPU_IDs="))
        .unwrap_or_else(|| panic!("no allocation detail:\n{out}"));
    let f = |k: &str| field(line, k).unwrap_or_else(|| panic!("no {k} in {line}"));
    (f("CPU_IDs"), f("GRES"))
}

/// Submits a held-open job (`sleep 300`) with `args` and waits until it runs.
fn running_job(c: &TestCluster, args: &[&str]) -> u32 {
    let mut a = args.to_vec();
    a.extend_from_slice(&["--wrap", "sleep 300"]);
    let id = c.submit(&a);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    id
}

fn cancel(c: &TestCluster, id: u32) {
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
}

#[test]
fn gres_flags_bind_cpus_to_the_gpus_or_not() {
    let c = two_socket_cluster();
    // Default: the lowest GPU, with a CPU near it.
    let a = running_job(&c, &["-c1", "--gres=gpu:1"]);
    assert_eq!(alloc_detail(&c, a), ("3".into(), "gpu:1(IDX:0)".into()));
    cancel(&c, a);
    // disable-binding: the lowest GPU and the lowest CPU, whatever their affinity.
    let b = running_job(&c, &["-c1", "--gres=gpu:1", "--gres-flags=disable-binding"]);
    assert_eq!(alloc_detail(&c, b), ("0".into(), "gpu:1(IDX:0)".into()));
    cancel(&c, b);
    // Fill the node: GPUs 0-1 with CPU 3, then enforce-binding GPU 2 with CPUs 0-2.
    let j1 = running_job(&c, &["-c1", "--gres=gpu:2"]);
    assert_eq!(alloc_detail(&c, j1), ("3".into(), "gpu:2(IDX:0-1)".into()));
    let j2 = running_job(&c, &["-c3", "--gres=gpu:1", "--gres-flags=enforce-binding"]);
    assert_eq!(alloc_detail(&c, j2), ("0-2".into(), "gpu:1(IDX:2)".into()));
    // Free now: CPUs 4-5 and GPU 3, whose CPUs (0-2) are all taken. An
    // enforce-binding job waits for them; the same job without the flag would fit.
    let e = c.submit(&[
        "-c1",
        "--gres=gpu:1",
        "--gres-flags=enforce-binding",
        "--wrap",
        "echo gpus=$SLURM_JOB_GPUS",
    ]);
    c.wait_field(&e.to_string(), "Reason", "Resources");
    assert_eq!(c.state(e).as_deref(), Some("PENDING"));
    // Its CPUs come free: it starts there.
    cancel(&c, j2);
    assert_eq!(c.wait_done(e), "COMPLETED");
    let out = std::fs::read_to_string(c.work.join(format!("slurm-{e}.out"))).unwrap();
    assert_eq!(out.trim(), "gpus=2");
    cancel(&c, j1);
    // A step inside the job takes --gres-flags as Slurm's srun does: the flag is the
    // allocation's, so the step runs on what the job holds.
    let s = c.submit(&[
        "-c1",
        "--gres=gpu:1",
        "--wrap",
        "srun --gres-flags=enforce-binding -n1 true",
    ]);
    assert_eq!(c.wait_done(s), "COMPLETED");
    // A request no GPU's CPUs can hold is refused at submission, as impossible.
    let (code, err) = c.fails_err(
        "sbatch",
        &[
            "-c4",
            "--gres=gpu:1",
            "--gres-flags=enforce-binding",
            "--wrap",
            "true",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
}

#[test]
fn gpus_per_socket_takes_gpus_on_the_sockets_of_the_jobs_cpus() {
    let c = two_socket_cluster();
    // The node's GRES name the sockets their cores are on, as Slurm prints them.
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%G"]).trim(), "gpu:4(S:0-1)");
    assert!(
        c.ok("scontrol", &["show", "node"])
            .contains("   Gres=gpu:4(S:0-1)\n"),
        "{}",
        c.ok("scontrol", &["show", "node"])
    );
    let id = running_job(&c, &["--gpus-per-socket=1", "--sockets-per-node=2"]);
    // One GPU and one CPU on each socket.
    assert_eq!(
        alloc_detail(&c, id),
        ("0,3".into(), "gpu:2(IDX:0,2)".into())
    );
    assert_eq!(c.show_field(id, "TresPerSocket"), "gres:gpu:1");
    assert_eq!(c.show_field(id, "Socks/Node"), "2");
    cancel(&c, id);
    // Two on one socket: the socket's two GPUs, and CPUs of that socket only.
    let out = batch_output(
        &c,
        "sock1",
        &["-c2", "--gpus-per-socket=2", "--sockets-per-node=1"],
        "echo gpus=$SLURM_JOB_GPUS per_socket=$SLURM_GPUS_PER_SOCKET\n",
    );
    assert_eq!(out.trim(), "gpus=2,3 per_socket=2");
    // Slurm's refusals.
    let (code, err) = c.fails_err("sbatch", &["--gpus-per-socket=1", "--wrap", "true"]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "sbatch: error: --gpus-per-socket option requires --sockets-per-node specification\n"
        )
    );
    let (_, err) = c.fails_err(
        "sbatch",
        &[
            "--gpus-per-socket=1",
            "--sockets-per-node=1",
            "--gres=gpu:2",
            "--wrap",
            "true",
        ],
    );
    assert_eq!(
        err,
        "sbatch: error: Invalid generic resource (gres) specification\n"
    );
    // Options that only make sense together may come from the script.
    c.script(
        "sock.sh",
        "#!/bin/sh\n#SBATCH --sockets-per-node=2\necho gpus=$SLURM_JOB_GPUS\n",
    );
    let out_s = c.path("sock.out").display().to_string();
    let sh = c.path("sock.sh").display().to_string();
    let id = c.submit(&["--gpus-per-socket=1", "-o", &out_s, &sh]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(std::fs::read_to_string(&out_s).unwrap().trim(), "gpus=0,2");
    let (_, err) = c.fails_err(
        "sbatch",
        &[
            "--gpus-per-socket=1",
            "--sockets-per-node=3",
            "--wrap",
            "true",
        ],
    );
    assert!(
        err.contains("Requested node configuration is not available"),
        "{err}"
    );
    let (code, err) = c.fails_err(
        "salloc",
        &["--gpus-per-socket=1", "--ntasks-per-gpu=1", "true"],
    );
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "salloc: fatal: --gpus-per-socket is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n"
        )
    );
}

#[test]
fn ntasks_per_gpu_derives_tasks_and_binds_them_to_single_gpus() {
    let c = cluster(FOUR_GPUS);
    // GPUs given: four tasks for two GPUs, bound two per GPU.
    let script = "echo ntasks=$SLURM_NTASKS per_gpu=$SLURM_NTASKS_PER_GPU\n\
                  srun -l sh -c 'echo $CUDA_VISIBLE_DEVICES' | sort\n";
    let out = batch_output(&c, "npg", &["--gres=gpu:2", "--ntasks-per-gpu=2"], script);
    assert_eq!(value(&out, "ntasks="), "4 per_gpu=2");
    for (rank, gpu) in [(0, "0"), (1, "0"), (2, "1"), (3, "1")] {
        assert_eq!(value(&out, &format!("{rank}:")), gpu, "{out}");
    }
    // The job's --gpu-bind is its steps' default, and wins over single:N.
    let out = batch_output(
        &c,
        "npgbind",
        &["--gres=gpu:2", "--ntasks-per-gpu=1", "--gpu-bind=map_gpu:1"],
        "echo bind=$SLURM_GPU_BIND\nsrun -l sh -c 'echo $CUDA_VISIBLE_DEVICES' | sort\n",
    );
    assert_eq!(value(&out, "bind="), "map_gpu:1");
    assert_eq!(
        (value(&out, "0:"), value(&out, "1:")),
        ("1".into(), "1".into())
    );
    // Tasks given: one GPU for every two tasks.
    let id = c.submit(&["-n4", "--ntasks-per-gpu=2", "--wrap", "sleep 300"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(c.show_field(id, "TresPerJob"), "gres:gpu:2");
    assert_eq!(c.show_field(id, "NtasksPerTRES"), "2");
    assert!(c.show_field(id, "TRES").ends_with("gres/gpu=2"));
    cancel(&c, id);
    // Neither: Slurm's refusal; and the options it says conflict.
    let (code, err) = c.fails_err("sbatch", &["--ntasks-per-gpu=2", "--wrap", "true"]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "sbatch: error: gres_job_state_validate: --ntasks-per-tres needs either a GRES GPU \
             specification or a node/ntask specification\n\
             sbatch: error: Invalid generic resource (gres) specification\n"
        )
    );
    let (code, err) = c.fails_err("srun", &["--ntasks-per-gpu=1", "--gpus-per-task=1", "true"]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "srun: fatal: --gpus-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n"
        )
    );
    // srun creating the allocation resolves it the same way.
    let o = c.ok(
        "srun",
        &[
            "-l",
            "--gpus=2",
            "--ntasks-per-gpu=1",
            "sh",
            "-c",
            "echo $CUDA_VISIBLE_DEVICES",
        ],
    );
    let mut seen: Vec<&str> = o.lines().map(str::trim).collect();
    seen.sort();
    assert_eq!(seen, vec!["0: 0", "1: 1"], "{o}");
}

/// A fake sysfs: GPU 0 (bus 17) behind one PCIe switch with mlx5_0 (PIX), GPU 1 (bus
/// 3b) two switch levels from mlx5_1 (PXB), mlx5_2 on another root complex (SYS) and
/// mlx5_3 on another root port of the same host bridge (PHB).
fn fake_sysfs(root: &std::path::Path) {
    let dev = |rel: &str| {
        let p = root.join("devices").join(rel);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let gpu0 = dev("pci0000:00/0000:00:01.0/0000:16:00.0/0000:17:00.0");
    let hca0 = dev("pci0000:00/0000:00:01.0/0000:16:00.0/0000:18:00.0");
    let gpu1 = dev("pci0000:00/0000:00:02.0/0000:39:00.0/0000:3a:08.0/0000:3b:00.0");
    let hca1 = dev("pci0000:00/0000:00:02.0/0000:39:00.0/0000:3a:10.0/0000:3c:00.0");
    let hca2 = dev("pci0000:80/0000:80:01.0/0000:81:00.0");
    let hca3 = dev("pci0000:00/0000:00:03.0/0000:50:00.0");
    let bus = root.join("bus/pci/devices");
    std::fs::create_dir_all(&bus).unwrap();
    std::os::unix::fs::symlink(&gpu0, bus.join("0000:17:00.0")).unwrap();
    std::os::unix::fs::symlink(&gpu1, bus.join("0000:3b:00.0")).unwrap();
    for (name, p) in [
        ("mlx5_0", &hca0),
        ("mlx5_1", &hca1),
        ("mlx5_2", &hca2),
        ("mlx5_3", &hca3),
    ] {
        let d = root.join("class/infiniband").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink(p, d.join("device")).unwrap();
    }
}

#[test]
fn nccl_variables_follow_the_gpu_nic_affinity_of_each_rank() {
    let sys = tempfile::tempdir().unwrap();
    fake_sysfs(sys.path());
    let c = TestCluster::start_with(Setup {
        top: r#"
[[gres]]
name = "gpu"
cores = "0"
pci_bus = "00000000:17:00.0"
[[gres]]
name = "gpu"
cores = "1"
pci_bus = "0000:3B:00.0"
"#,
        env: vec![("SLUICE_SYSFS_ROOT".into(), sys.path().display().to_string())],
        ..Setup::default()
    });
    let show = "sh -c 'echo \"$NCCL_IB_HCA|$NCCL_SOCKET_IFNAME|$MASTER_ADDR|$MASTER_PORT|$NCCL_DEBUG_FILE\"'";
    let script = format!(
        "echo job=$SLURM_JOB_ID\n\
         srun -l -n2 --gpus-per-task=1 {show} | sed 's/^/plain /'\n\
         export NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_9 NCCL_SOCKET_IFNAME=eth9 MASTER_ADDR=elsewhere MASTER_PORT=29500\n\
         srun -l -n2 --gpus-per-task=1 {show} | sed 's/^/user /'\n"
    );
    let out = batch_output(&c, "nccl", &["-n2", "--gres=gpu:2"], &script);
    let job: u32 = value(&out, "job=").parse().unwrap();
    let node = c.node();
    // The interface that reaches the step's first node, as stepd computes it here.
    let ifname = {
        use std::net::ToSocketAddrs;
        (node.as_str(), 0)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| {
                a.find_map(|x| match x.ip() {
                    std::net::IpAddr::V4(v) => Some(v),
                    _ => None,
                })
            })
            .and_then(|a| sluice::stepd::nccl::ifname_for(a, &sluice::stepd::nccl::local_ifaces()))
            .unwrap_or_default()
    };
    let port = sluice::stepd::nccl::master_port(job, 0);
    // Each rank's HCAs are those near its own GPU: PIX for rank 0, PXB for rank 1;
    // the SYS and PHB ones are never chosen.
    assert_eq!(
        value(&out, "plain 0:"),
        format!("=mlx5_0|{ifname}|{node}|{port}|")
    );
    assert_eq!(
        value(&out, "plain 1:"),
        format!("=mlx5_1|{ifname}|{node}|{port}|")
    );
    // Whatever the user set stays; NCCL_DEBUG brings one debug file per rank.
    for r in 0..2 {
        assert_eq!(
            value(&out, &format!("user {r}:")),
            format!("mlx5_9|eth9|elsewhere|29500|nccl-debug.{job}.1.{r}.log")
        );
    }
}
