//! `examples/`: every config runs a real controller (paths and the node name adapted to
//! the test machine), and every job script runs on a test cluster and does what its
//! comments promise.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn files(ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_config_runs_a_controller() {
    let tomls = files("toml");
    assert!(tomls.len() >= 2, "{tomls:?}");
    let mut started = 0;
    let host = sluice::config::short_hostname();
    for path in tomls {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut v: toml::Table = text.parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        v.insert(
            "state_dir".into(),
            d.join("state").display().to_string().into(),
        );
        v.insert(
            "spool_dir".into(),
            d.join("spool").display().to_string().into(),
        );
        v.insert(
            "socket".into(),
            d.join("run/ctld.sock").display().to_string().into(),
        );
        // The examples name their machine; this one has another name. Cluster examples
        // reach other machines over SSH: those only load (their nodes cannot be
        // reached from a test, and tests stay on loopback).
        let nodes = v["nodes"].as_array().unwrap();
        if nodes.iter().any(|n| n.get("ssh").is_some()) {
            sluice::config::Config::from_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        assert_eq!(nodes.len(), 1, "{}", path.display());
        let name = nodes[0]["name"].as_str().unwrap().to_string();
        let adapted = toml::to_string(&v)
            .unwrap()
            .replace(&format!("\"{name}\""), &format!("\"{host}\""));
        let conf = d.join("sluice.toml");
        std::fs::write(&conf, adapted).unwrap();
        let cfg = sluice::config::Config::from_file(&conf)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let run = |args: &[&str]| {
            std::process::Command::new(sluice_bin())
                .args(args)
                .env("SLUICE_CONF", &conf)
                .output()
                .unwrap()
        };
        let o = run(&["controller"]);
        assert!(o.status.success(), "{}: {}", path.display(), stderr(&o));
        let parts = run(&["sinfo", "-h", "-o", "%P %l %c %m"]);
        let _stop = run(&["controller", "--stop"]);
        assert!(parts.status.success(), "{}", stderr(&parts));
        let shown = stdout(&parts);
        for p in &cfg.partitions {
            let star = if p.default { "*" } else { "" };
            assert!(
                shown.contains(&format!("{}{star} ", p.name)),
                "{}: {} missing from\n{shown}",
                path.display(),
                p.name
            );
        }
        started += 1;
        let n = &cfg.nodes[0];
        assert!(
            shown.contains(&format!(" {} {}\n", n.cpus.unwrap(), n.memory.unwrap())),
            "{}: declared resources not shown\n{shown}",
            path.display()
        );
    }
    // The workstation and shared-box examples at least.
    assert!(
        started >= 2,
        "only {started} example configs ran a controller"
    );
}

#[test]
fn hello_and_cpu_examples_run() {
    let c = TestCluster::start();
    for f in files("sbatch") {
        std::fs::copy(&f, c.path(f.file_name().unwrap().to_str().unwrap())).unwrap();
    }
    let hello = c.submit(&["hello.sbatch"]);
    let cpu = c.submit(&["cpu-array-free.sbatch"]);
    assert_eq!(c.wait_done(hello), "COMPLETED");
    assert_eq!(c.wait_done(cpu), "COMPLETED");
    let out = c.wait_file(&format!("hello-{hello}.out"), |_| true);
    assert!(
        out.starts_with(&format!("Hello from job {hello} (hello) on ")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "partition=debug cpus=1 submitted from {}",
            c.work.display()
        )),
        "{out}"
    );
    let out = std::fs::read_to_string(c.path(&format!("slurm-{cpu}.out"))).unwrap();
    assert!(
        out.starts_with(&format!("job {cpu}: 2 CPUs, 500 MB on {}\n", c.node())),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.starts_with("block ")).count(),
        4,
        "{out}"
    );
    assert_eq!(c.show_field(cpu, "TimeLimit"), "00:05:00");
    assert_eq!(c.show_field(hello, "TimeLimit"), "00:01:00");
}

#[test]
fn the_training_skeleton_checkpoints_and_requeues_itself() {
    let c = TestCluster::start();
    std::fs::copy(
        examples().join("train-skeleton.sbatch"),
        c.path("train-skeleton.sbatch"),
    )
    .unwrap();
    // As its comment says, a missing log directory fails the job at start.
    let lost = c.submit(&["--mem=100M", "-c", "1", "-t", "5", "train-skeleton.sbatch"]);
    assert_eq!(c.wait_done(lost), "FAILED");
    assert_eq!(c.show_field(lost, "ExitCode"), "0:53");
    std::fs::create_dir(c.path("logs")).unwrap();
    // This machine is small and the test short: less memory and CPU, a one-minute
    // limit, and the warning 50 s before it (about 10 s in).
    let id = c.submit(&[
        "--mem=100M",
        "-c",
        "1",
        "--time=1",
        "--signal=B:USR1@50",
        "train-skeleton.sbatch",
    ]);
    let log = format!("logs/train-{id}.out");
    c.wait_file(&log, |s| s.contains(&format!("run 1 of job {id} on ")));
    // USR1 arrives, the job checkpoints, requeues itself and runs again from there.
    wait_until("the second run", Duration::from_secs(40), || {
        let s = std::fs::read_to_string(c.path(&log)).ok()?;
        s.contains(&format!("run 2 of job {id} on ")).then_some(())
    });
    let step: u32 = std::fs::read_to_string(c.path("checkpoint.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(step >= 7, "the second run did not resume (step {step})");
    assert_eq!(c.show_field(id, "Restarts"), "1");
    assert_eq!(c.show_field(id, "JobState"), "RUNNING");
    c.ok("scancel", &[&id.to_string()]);
    assert_eq!(c.wait_done(id), "CANCELLED");
}

#[test]
fn ddp_examples_are_valid_and_accepted_by_a_gpu_cluster() {
    let c = TestCluster::start_with(Setup {
        cpus: 64,
        node_extra: "gres = \"gpu:4\"",
        ..Setup::default()
    });
    for name in ["ddp-srun.sbatch", "ddp-torchrun.sbatch"] {
        let f = examples().join(name);
        let o = std::process::Command::new("bash")
            .arg("-n")
            .arg(&f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        std::fs::copy(&f, c.path(name)).unwrap();
        // The torchrun example asks for two nodes; this cluster has one.
        let o = c.run("sbatch", &["--test-only", "--nodes=1", name]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("to start at"), "{name}: {}", stderr(&o));
    }
    // The srun example's step takes one GPU per task, and each task sees only its own.
    let text = std::fs::read_to_string(examples().join("ddp-srun.sbatch")).unwrap();
    assert!(text.contains("srun --gpus-per-task=1"), "{text}");
}
