//! pyxis-style containers (issue 26): `--container-image` and friends on srun, sbatch
//! and salloc, run by the configured runtime.
//!
//! The refusal at submit needs no runtime. The runs use Podman (Debian's `podman`, the
//! only one of enroot/Apptainer/Podman Debian 12 packages) on an image built here from
//! a static busybox (Debian's `busybox-static`) and imported (`podman import`):
//! nothing is pulled. Without a working Podman the test says why and skips, unless
//! `SLUICE_REQUIRE_PODMAN=1`. Where crun cannot run containers (a cgroup v1/v2 hybrid
//! host), runc is used through `[container] runtime_args`, and the containers then
//! live in Podman's cgroups rather than the task's (`podman_own_cgroup`).

use crate::harness::sshd::{NodeSetup, SshCluster};
use crate::harness::{Setup, TestCluster, sorted_lines, stderr, stdout, text};
use std::path::Path;
use std::process::Command;

#[test]
fn container_request_without_a_runtime_is_refused_at_submit() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[container]\nruntime = \"enroot\"",
        ..Setup::default()
    });
    let want = "the configured container runtime 'enroot' is not installed";
    for (cmd, args) in [
        ("srun", vec!["--container-image=/img.sqsh", "true"]),
        (
            "sbatch",
            vec!["--container-image=/img.sqsh", "--wrap", "true"],
        ),
        ("salloc", vec!["--container-image=/img.sqsh", "true"]),
    ] {
        let (code, err) = c.fails_err(cmd, &args);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert_eq!(err, format!("{cmd}: error: {want}\n"), "{cmd}");
    }
    // Bad values are named.
    let (code, err) = c.fails_err(
        "srun",
        &["--container-image=/i", "--container-mounts=/a:rel", "true"],
    );
    // An invalid option value is fatal, as srun's option errors are.
    assert_eq!(code, 255);
    assert!(
        err.contains("destination 'rel' is not an absolute path"),
        "{err}"
    );
    assert!(c.job_ids().is_empty(), "nothing was submitted");
    // Without container options nothing changes.
    assert_eq!(c.ok("srun", &["echo", "plain"]), "plain\n");
}

/// How Podman runs here: the `[container]` lines for the config, or why it cannot.
fn podman_setup(image: &str) -> Result<String, String> {
    if !Path::new("/usr/bin/podman").exists() {
        return Err("podman is not installed".into());
    }
    if !nix::unistd::geteuid().is_root() {
        return Err("the test runs Podman as root (tasks run as the submitting user)".into());
    }
    let lim = |r| nix::sys::resource::getrlimit(r).unwrap();
    let (nf, np) = (
        lim(nix::sys::resource::Resource::RLIMIT_NOFILE),
        lim(nix::sys::resource::Resource::RLIMIT_NPROC),
    );
    let tries: [(&[&str], &[&str], &str); 2] = [
        (&[], &["--cgroups=disabled"], ""),
        (
            &["--runtime", "runc"],
            &[],
            "runtime_args = [\"--runtime\", \"runc\"]\npodman_own_cgroup = true\n",
        ),
    ];
    // The node's process limit, else lower ones (conmon may hold a lower hard limit
    // than the task, and the container may not raise it).
    let nprocs = [np, (32768, 32768), (4096, 4096)];
    let mut why = Vec::new();
    for (global, run, conf) in tries {
        for (i, nproc) in nprocs.iter().enumerate() {
            let o = Command::new("podman")
                .args(global)
                .arg("run")
                .arg("--rm")
                .args(run)
                .arg(format!("--ulimit=nofile={}:{}", nf.0, nf.1))
                .arg(format!("--ulimit=nproc={}:{}", nproc.0, nproc.1))
                .args([image, "/bin/sh", "-c", ":"])
                .output()
                .map_err(|e| e.to_string())?;
            if o.status.success() {
                let run_args = if i == 0 {
                    String::new()
                } else {
                    eprintln!("podman: the containers get nproc {nproc:?} here");
                    format!("run_args = [\"--ulimit=nproc={}:{}\"]\n", nproc.0, nproc.1)
                };
                return Ok(format!(
                    "[container]\nruntime = \"podman\"\n{conf}{run_args}"
                ));
            }
            why.push(format!(
                "{global:?} nproc {nproc:?}: {}",
                text(&o.stderr).trim()
            ));
        }
    }
    Err(format!(
        "podman cannot run a container here: {}",
        why.join("; ")
    ))
}

/// Builds and imports the test image (static busybox); returns its reference.
fn busybox_image(dir: &Path) -> Result<String, String> {
    let bb = Path::new("/bin/busybox");
    let ldd = Command::new("ldd")
        .arg(bb)
        .output()
        .map_err(|e| e.to_string())?;
    let said = format!("{}{}", text(&ldd.stdout), text(&ldd.stderr));
    if !bb.exists() || !said.contains("not a dynamic") {
        return Err("no static /bin/busybox (Debian's busybox-static)".into());
    }
    let root = dir.join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    for d in ["mnt/work", "tmp", "proc", "sys", "dev", "etc", "root"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(bb, root.join("bin/busybox")).unwrap();
    for app in [
        "sh", "cat", "echo", "test", "ls", "env", "id", "pwd", "hostname", "touch",
    ] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(app)).unwrap();
    }
    std::fs::write(root.join("etc/image-marker"), "from-the-image\n").unwrap();
    let tar = dir.join("rootfs.tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err("tar failed".into());
    }
    let tag = format!(
        "localhost/sluice-test-busybox:{}",
        dir.file_name()
            .unwrap()
            .to_string_lossy()
            .to_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    let o = Command::new("podman")
        .args(["import", "-q"])
        .arg(&tar)
        .arg(&tag)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("podman import: {}", text(&o.stderr)));
    }
    Ok(tag)
}

/// Removes the test image when dropped.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rmi", "-f", &self.0]).output();
    }
}

fn skip_or_fail(why: &str) {
    if std::env::var("SLUICE_REQUIRE_PODMAN").is_ok_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("skipping: {why}");
}

#[test]
fn podman_runs_tasks_in_a_local_image_on_two_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let image = match busybox_image(tmp.path()) {
        Ok(i) => Image(i),
        Err(e) if !Path::new("/usr/bin/podman").exists() => {
            return skip_or_fail(&format!("podman is not installed ({e})"));
        }
        Err(e) => return skip_or_fail(&e),
    };
    let conf = match podman_setup(&image.0) {
        Ok(c) => c,
        Err(e) => return skip_or_fail(&e),
    };
    let setup = [NodeSetup::new("ct1"), NodeSetup::new("ct2")];
    let Some(c) = SshCluster::start_with_conf(&setup, 60, "", &conf) else {
        return;
    };
    c.wait_all_idle();
    std::fs::write(c.path("marker"), "from-the-host\n").unwrap();
    let img = format!("--container-image={}", image.0);
    let mounts = format!("--container-mounts={}:/mnt/work:ro", c.work.display());
    let prog = "echo $SLURM_PROCID/$SLURM_NTASKS $SLURMD_NODENAME $(cat /etc/image-marker) \
                $(cat /mnt/work/marker) $(pwd)";
    let o = c.run(
        "srun",
        &[
            "-N2",
            "-n2",
            &img,
            &mounts,
            "--container-workdir=/mnt/work",
            "sh",
            "-c",
            prog,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        sorted_lines(&stdout(&o)),
        [
            "0/2 ct1 from-the-image from-the-host /mnt/work",
            "1/2 ct2 from-the-image from-the-host /mnt/work",
        ],
        "{}",
        stderr(&o)
    );
    // A batch job's container options reach its steps (pyxis's SPANK variables).
    let id = c.submit(&[
        &img,
        &mounts,
        "-o",
        "ct.out",
        "--wrap",
        "srun sh -c 'echo step $SLURM_STEP_ID $(cat /etc/image-marker) $(cat /mnt/work/marker)'",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file("ct.out", |s| s.contains("step"));
    assert_eq!(out, "step 0 from-the-image from-the-host\n");
    // A read-only container refuses writes; the default one takes them.
    let o = c.run(
        "srun",
        &[
            &img,
            "--container-readonly",
            "sh",
            "-c",
            "touch /x 2>/dev/null && echo wrote || echo refused",
        ],
    );
    assert_eq!(stdout(&o), "refused\n", "{}", stderr(&o));
    let o = c.run(
        "srun",
        &[
            &img,
            "sh",
            "-c",
            "touch /x 2>/dev/null && echo wrote || echo refused",
        ],
    );
    assert_eq!(stdout(&o), "wrote\n", "{}", stderr(&o));
}
