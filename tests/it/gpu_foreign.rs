//! GPUs used outside sluice and unhealthy GPUs (issue 24), through the real front-ends, with two fake GPUs
//! whose live state comes from the fake GPU probe (`SLUICE_GPU_PROBE_FILE`, see
//! `sluice::gpuprobe`): the test rewrites that file while the agent runs. A real
//! process of the test's stands for the foreign one (so that its user is known); a
//! job's own shell on a GPU does not count.

use crate::harness::*;
use std::process::{Child, Command};
use std::time::Duration;

/// Two untyped GPUs.
const TWO_GPUS: &str = r#"
[[gres]]
name = "gpu"
count = 2
"#;

/// A process of the test's own, ended when dropped.
struct Foreign(Child);

impl Foreign {
    fn start() -> Foreign {
        Foreign(
            Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cluster whose node has [`TWO_GPUS`], `node_extra` keys, and the probe file that
/// [`probe_file`] returns for `dir`.
fn cluster(dir: &tempfile::TempDir, node_extra: &'static str) -> TestCluster {
    write_probe(dir, &[]);
    TestCluster::start_with(Setup {
        top: TWO_GPUS,
        node_extra,
        env: vec![(
            "SLUICE_GPU_PROBE_FILE".to_string(),
            probe_file(dir).display().to_string(),
        )],
        ..Setup::default()
    })
}

fn probe_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("gpus.toml")
}

/// Writes the probe file: `(gpu index, pids on it)`.
fn write_probe(dir: &tempfile::TempDir, gpus: &[(u32, &[u32])]) {
    let mut text = String::new();
    for (i, pids) in gpus {
        let procs: Vec<String> = pids
            .iter()
            .map(|p| format!("{{ pid = {p}, used_mib = 1000 }}"))
            .collect();
        text.push_str(&format!(
            "[[gpu]]\nindex = {i}\nprocesses = [{}]\n",
            procs.join(", ")
        ));
    }
    // Written whole and renamed, so that the agent never reads half a file.
    let tmp = dir.path().join("gpus.toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, probe_file(dir)).unwrap();
}

/// The value of `key=` in `scontrol show node` (up to the next space).
fn node_field(c: &TestCluster, key: &str) -> Option<String> {
    let out = c.ok("scontrol", &["-o", "show", "node"]);
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")).map(String::from))
}

/// Waits until `scontrol show node` shows GPU 1 busy with `pid`; returns the user it
/// names.
fn wait_busy(c: &TestCluster, pid: u32) -> String {
    let want = format!("1(pid={pid},user=");
    let busy = wait_until("GPU 1 shown busy", Duration::from_secs(30), || {
        node_field(c, "GpusBusy").filter(|b| b.starts_with(&want))
    });
    busy[want.len()..]
        .strip_suffix(')')
        .unwrap_or_else(|| panic!("GpusBusy={busy}"))
        .to_string()
}

fn reason(c: &TestCluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%r"])
        .trim()
        .to_string()
}

#[test]
fn avoid_keeps_a_busy_gpu_out_until_its_process_ends_and_a_jobs_own_process_is_not_foreign() {
    let probe = tempfile::tempdir().unwrap();
    let c = cluster(&probe, "");
    // A job on one GPU whose shell is on that GPU.
    let a = c.submit(&[
        "--gres=gpu:1",
        "--wrap",
        "echo $$ $SLURM_JOB_GPUS > a.pid; while [ ! -e go ]; do sleep 0.1; done",
    ]);
    let a_line = c.wait_file("a.pid", |s| s.ends_with('\n'));
    let (apid, a_gpu) = a_line.trim().split_once(' ').expect("pid and GPU");
    let (apid, a_gpu): (u32, u32) = (apid.parse().unwrap(), a_gpu.parse().unwrap());
    let other = 1 - a_gpu;
    let f = Foreign::start();
    write_probe(&probe, &[(a_gpu, &[apid]), (other, &[f.pid()])]);
    let busy = wait_until("a busy GPU", Duration::from_secs(30), || {
        node_field(&c, "GpusBusy")
    });
    assert_eq!(
        busy.matches("(pid=").count(),
        1,
        "only the foreign process makes its GPU busy: {busy}"
    );
    assert!(
        busy.starts_with(&format!("{other}(pid={},", f.pid())),
        "{busy}"
    );
    std::fs::write(c.path("go"), "").unwrap();
    assert_eq!(c.wait_done(a), "COMPLETED");
    // Now with the foreign process on GPU 1 only: two GPUs are not to be had.
    write_probe(&probe, &[(1, &[f.pid()])]);
    let user = wait_busy(&c, f.pid());
    // One GPU still fits, on GPU 0.
    let one = c.submit(&["--gres=gpu:1", "--wrap", "echo gpu=$SLURM_JOB_GPUS"]);
    assert_eq!(c.wait_done(one), "COMPLETED");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{one}.out"))).unwrap();
    assert_eq!(out.trim(), "gpu=0");
    let b = c.submit(&["--gres=gpu:2", "--wrap", "true"]);
    let want = format!("Resources (gpu 1 in use by pid {}, user {user})", f.pid());
    wait_until("the busy-GPU reason", Duration::from_secs(30), || {
        (reason(&c, b) == want).then_some(())
    });
    assert_eq!(c.state(b).as_deref(), Some("PENDING"));
    let sinfo = c.ok("sinfo", &["-h", "-O", "gpusbusy:60"]);
    assert_eq!(
        sinfo.trim(),
        format!("1(pid={},user={user})", f.pid()),
        "{sinfo}"
    );
    // The process ends: the GPU returns on the next sample and the job runs.
    write_probe(&probe, &[(1, &[])]);
    assert_eq!(c.wait_done(b), "COMPLETED");
    wait_until("no busy GPU", Duration::from_secs(30), || {
        node_field(&c, "GpusBusy").is_none().then_some(())
    });
}

#[test]
fn ignore_allocates_a_busy_gpu_as_slurm_does() {
    let probe = tempfile::tempdir().unwrap();
    let c = cluster(&probe, "gpu_foreign = \"ignore\"");
    let f = Foreign::start();
    write_probe(&probe, &[(1, &[f.pid()])]);
    wait_busy(&c, f.pid());
    assert_eq!(node_field(&c, "GpuForeign").as_deref(), Some("ignore"));
    let b = c.submit(&["--gres=gpu:2", "--wrap", "true"]);
    assert_eq!(c.wait_done(b), "COMPLETED");
}

#[test]
fn drain_drains_the_node_while_a_gpu_is_busy_and_resumes_it_after() {
    let probe = tempfile::tempdir().unwrap();
    let c = cluster(&probe, "gpu_foreign = \"drain\"");
    let f = Foreign::start();
    write_probe(&probe, &[(1, &[f.pid()])]);
    let user = wait_busy(&c, f.pid());
    let want = format!("gpu 1 in use by pid {}, user {user}", f.pid());
    let sinfo = wait_until("the node drained", Duration::from_secs(30), || {
        let s = c.ok("sinfo", &["-h", "-R", "-o", "%E|%T"]);
        s.contains("drained").then_some(s)
    });
    assert_eq!(sinfo.trim(), format!("{want}|drained"));
    let b = c.submit(&["--gres=gpu:1", "--wrap", "true"]);
    assert_eq!(c.state(b).as_deref(), Some("PENDING"));
    write_probe(&probe, &[]);
    assert_eq!(c.wait_done(b), "COMPLETED");
    wait_until("the node idle again", Duration::from_secs(30), || {
        (c.ok("sinfo", &["-h", "-o", "%T"]).trim() == "idle").then_some(())
    });
    assert!(
        !c.ok("sinfo", &["-h", "-R", "-o", "%E"])
            .contains("in use by pid")
    );
}

/// Writes the probe file with raw `[[gpu]]` tables.
fn write_probe_text(dir: &tempfile::TempDir, text: &str) {
    let tmp = dir.path().join("gpus.toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, probe_file(dir)).unwrap();
}

#[test]
fn an_unhealthy_gpu_is_kept_out_and_a_gpu_off_the_bus_drains_the_node() {
    let probe = tempfile::tempdir().unwrap();
    let c = cluster(&probe, "");
    write_probe_text(&probe, "[[gpu]]\nindex = 1\necc_uncorrectable = 2\n");
    wait_until("GPU 1 shown failed", Duration::from_secs(30), || {
        (node_field(&c, "GpusFailed").as_deref() == Some("1")).then_some(())
    });
    let b = c.submit(&["--gres=gpu:2", "--wrap", "true"]);
    wait_until("the unhealthy-GPU reason", Duration::from_secs(30), || {
        (reason(&c, b) == "Resources (gpu 1: 2 uncorrectable ECC errors)").then_some(())
    });
    let node = c.ok("scontrol", &["show", "node"]);
    assert!(
        node.contains("Reason=gpu 1: 2 uncorrectable ECC errors ["),
        "{node}"
    );
    assert!(node.contains("State=IDLE "), "not drained: {node}");
    // Fallen off the bus: the node drains.
    write_probe_text(&probe, "[[gpu]]\nindex = 0\nlost = true\n");
    let sinfo = wait_until("the node drained", Duration::from_secs(30), || {
        let s = c.ok("sinfo", &["-h", "-R", "-o", "%E|%T"]);
        s.contains("drained").then_some(s)
    });
    assert_eq!(sinfo.trim(), "gpu 0: fell off the bus|drained");
    // Healthy again: the node resumes and the job runs.
    write_probe_text(&probe, "");
    assert_eq!(c.wait_done(b), "COMPLETED");
    assert!(!c.ok("scontrol", &["show", "node"]).contains("GpusFailed="));
}

#[test]
fn a_job_process_that_was_orphaned_is_still_the_jobs() {
    let probe = tempfile::tempdir().unwrap();
    let c = cluster(&probe, "");
    // The subshell exits at once: its `sleep` is reparented away from stepd's tree
    // but stays in the job's cgroup (or, without cgroups, goes to stepd, their
    // subreaper).
    let a = c.submit(&[
        "--gres=gpu:1",
        "--wrap",
        "(sleep 30 & echo $! $SLURM_JOB_GPUS > esc.pid); \
         while [ ! -e go ]; do sleep 0.1; done",
    ]);
    let line = c.wait_file("esc.pid", |s| s.ends_with('\n'));
    let (esc, gpu) = line.trim().split_once(' ').expect("pid and GPU");
    let (esc, gpu): (u32, u32) = (esc.parse().unwrap(), gpu.parse().unwrap());
    let f = Foreign::start();
    write_probe(&probe, &[(gpu, &[esc]), (1 - gpu, &[f.pid()])]);
    let busy = wait_until("a busy GPU", Duration::from_secs(30), || {
        node_field(&c, "GpusBusy")
    });
    assert!(
        busy.starts_with(&format!("{}(pid={},", 1 - gpu, f.pid()))
            && !busy.contains(&esc.to_string()),
        "{busy}"
    );
    std::fs::write(c.path("go"), "").unwrap();
    c.wait_done(a);
}
