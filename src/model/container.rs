//! Containers as NVIDIA's pyxis defines them for srun/sbatch/salloc
//! (`--container-image`, `--container-mounts`, `--container-workdir`,
//! `--container-name`, `--container-writable`/`--container-readonly`,
//! `--container-env`, `--no-container-mount-home`, `--container-remap-root`), run by a
//! pluggable runtime: enroot, Apptainer or Podman.
//!
//! Pure: the request as data, its parsing, the choice of runtime and the command line
//! each runtime gets for one task ([`task_command`]). stepd execs that command in place
//! of the task's own (after the task joined the step's cgroup, so the container's
//! processes stay in it where the runtime allows).

use serde::{Deserialize, Serialize};

/// One `--container-mounts` entry: `SRC[:DST[:FLAGS]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub src: String,
    pub dst: String,
    /// `ro`, `rw`, or empty.
    pub flags: String,
}

/// A step's container request (pyxis's options, resolved by the front-end).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// `--container-image`: a registry reference, a local image file (squashfs,
    /// `.sif`, `.tar`), or `None` to reuse the named container.
    pub image: Option<String>,
    pub mounts: Vec<Mount>,
    /// `--container-workdir` (else the image's).
    pub workdir: Option<String>,
    /// `--container-name`: kept for the job's later steps on the node.
    pub name: Option<String>,
    /// `--container-writable` (`Some(true)`) / `--container-readonly` (`Some(false)`).
    pub writable: Option<bool>,
    /// `--container-env`: variables whose host (task) value wins over the image's.
    pub env: Vec<String>,
    /// Mount the user's home directory (`--no-container-mount-home` clears it).
    pub mount_home: bool,
    /// `--container-remap-root`: the user is root inside.
    pub remap_root: bool,
    /// The runtime the front-end chose from the configuration (`select_runtime`),
    /// with the configuration's extra flags for it.
    #[serde(default)]
    pub runtime: Option<Runtime>,
    #[serde(default)]
    pub runtime_args: Vec<String>,
    #[serde(default)]
    pub run_args: Vec<String>,
    #[serde(default)]
    pub podman_own_cgroup: bool,
}

/// The configuration's `[container]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerConf {
    /// `auto` (enroot, else Apptainer, else Podman), `enroot`, `apptainer`, `podman`
    /// or `none`.
    #[serde(default = "auto")]
    pub runtime: String,
    /// Global flags given to the runtime before its command (e.g. Podman's
    /// `["--runtime", "runc"]` where crun cannot run).
    #[serde(default)]
    pub runtime_args: Vec<String>,
    /// Flags added to the runtime's run command (`podman run`, `apptainer exec`,
    /// `enroot start`) after sluice's own, e.g. a lower `--ulimit=nproc=…` where the
    /// runtime may not set the node's.
    #[serde(default)]
    pub run_args: Vec<String>,
    /// Podman: put containers in Podman's own cgroups instead of the task's
    /// (`--cgroups=disabled`, the default, needs crun).
    #[serde(default)]
    pub podman_own_cgroup: bool,
}

fn auto() -> String {
    "auto".into()
}

impl Default for ContainerConf {
    fn default() -> Self {
        ContainerConf {
            runtime: auto(),
            runtime_args: Vec::new(),
            run_args: Vec::new(),
            podman_own_cgroup: false,
        }
    }
}

/// The container runtimes sluice drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Runtime {
    Enroot,
    Apptainer,
    Podman,
}

impl Runtime {
    /// The executable's name.
    pub fn program(self) -> &'static str {
        match self {
            Runtime::Enroot => "enroot",
            Runtime::Apptainer => "apptainer",
            Runtime::Podman => "podman",
        }
    }
}

/// Why a container request cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerError {
    /// A value that does not parse (the option and why).
    Invalid(String),
    /// No runtime is installed, or not the one configured.
    NoRuntime(String),
    /// The runtime cannot do what was asked.
    Unsupported(String),
}

impl std::fmt::Display for ContainerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContainerError::Invalid(s)
            | ContainerError::NoRuntime(s)
            | ContainerError::Unsupported(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ContainerError {}

/// Parses `--container-mounts`: comma-separated `SRC[:DST[:FLAGS]]` (DST defaults to
/// SRC; FLAGS `ro`/`rw` and their pyxis companions `private`/`rprivate`/`nosuid`…
/// are kept). Errors: an empty entry or a relative destination.
pub fn parse_mounts(s: &str) -> Result<Vec<Mount>, ContainerError> {
    let mut out = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        let mut parts = item.splitn(3, ':');
        let src = parts.next().unwrap_or_default();
        if src.is_empty() {
            return Err(ContainerError::Invalid(format!(
                "--container-mounts: invalid mount '{item}'"
            )));
        }
        let dst = parts.next().filter(|d| !d.is_empty()).unwrap_or(src);
        let flags = parts.next().unwrap_or_default();
        if !dst.starts_with('/') {
            return Err(ContainerError::Invalid(format!(
                "--container-mounts: destination '{dst}' is not an absolute path"
            )));
        }
        out.push(Mount {
            src: src.into(),
            dst: dst.into(),
            flags: flags.into(),
        });
    }
    Ok(out)
}

/// Picks the runtime: `configured` is the config's `[container] runtime` (`auto`,
/// `enroot`, `apptainer`, `podman`, `none`); `have(program)` says whether the program is
/// installed (on PATH). `auto` takes enroot, else Apptainer, else Podman.
/// Errors: none installed, or the configured one missing or unknown.
pub fn select_runtime(
    configured: &str,
    have: impl Fn(&str) -> bool,
) -> Result<Runtime, ContainerError> {
    let all = [Runtime::Enroot, Runtime::Apptainer, Runtime::Podman];
    match configured.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => all.into_iter().find(|r| have(r.program())).ok_or_else(|| {
            ContainerError::NoRuntime(
                "container support needs a container runtime on the nodes: none of enroot, \
                 apptainer or podman is installed"
                    .into(),
            )
        }),
        "none" => Err(ContainerError::NoRuntime(
            "containers are disabled on this cluster ([container] runtime = \"none\")".into(),
        )),
        name => {
            let r = all
                .into_iter()
                .find(|r| r.program() == name)
                .ok_or_else(|| {
                    ContainerError::Invalid(format!(
                        "unknown container runtime '{name}' in the configuration \
                         (auto, enroot, apptainer, podman or none)"
                    ))
                })?;
            if have(r.program()) {
                Ok(r)
            } else {
                Err(ContainerError::NoRuntime(format!(
                    "the configured container runtime '{name}' is not installed"
                )))
            }
        }
    }
}

/// Checks what `rt` can do with `spec`. Errors: Podman with `--container-name` (its
/// containers are not kept between steps by sluice yet); no image and no name.
pub fn check(rt: Runtime, spec: &ContainerSpec) -> Result<(), ContainerError> {
    if spec.image.is_none() && spec.name.is_none() {
        return Err(ContainerError::Invalid(
            "--container-image is required (or --container-name of a container made by an \
             earlier step)"
                .into(),
        ));
    }
    if rt == Runtime::Podman && spec.name.is_some() {
        return Err(ContainerError::Unsupported(
            "--container-name is not supported with the podman runtime yet".into(),
        ));
    }
    Ok(())
}

/// What the command line of one task depends on besides the request.
#[derive(Debug, Clone, Default)]
pub struct TaskCtx<'a> {
    pub job_id: u32,
    /// The user the task runs as (root runs rootful Podman: no user namespace).
    pub uid: u32,
    /// The user's home directory (mounted unless `--no-container-mount-home`).
    pub home: &'a str,
    /// The task's environment: Podman and enroot take every variable in by name (their
    /// own environment is the task's); Apptainer passes it through itself and gets the
    /// `--container-env` ones explicitly.
    pub env: Vec<(&'a str, &'a str)>,
    /// The task's command.
    pub argv: &'a [String],
    /// Device files the task may use (its GPUs), made visible in the container.
    pub devices: Vec<String>,
    /// The task's open-files and processes limits (soft, hard), carried into the
    /// container (Podman otherwise sets its own, which may exceed the node's).
    pub nofile: (u64, u64),
    pub nproc: (u64, u64),
    /// Global flags for the runtime (config `[container] runtime_args`).
    pub runtime_args: &'a [String],
    /// Flags for its run command, after sluice's (config `[container] run_args`).
    pub run_args: &'a [String],
    /// Podman: keep the container in the task's cgroup (`--cgroups=disabled`, the
    /// default) rather than one of Podman's.
    pub podman_own_cgroup: bool,
    /// Where a named container's state lives on this node (enroot/Apptainer).
    pub state_dir: &'a str,
}

/// The name a `--container-name` gets on the node: per job, as pyxis scopes it.
pub fn node_name(job_id: u32, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("sluice_{job_id}_{clean}")
}

/// The command that runs `ctx.argv` in the container (the program first). Every task
/// variable is passed in (`env_names`); the working directory is `--container-workdir`
/// (else the image's); the user's home is mounted unless asked not to.
pub fn task_command(rt: Runtime, spec: &ContainerSpec, ctx: &TaskCtx) -> Vec<String> {
    let mut mounts = spec.mounts.clone();
    if spec.mount_home && !ctx.home.is_empty() {
        mounts.push(Mount {
            src: ctx.home.into(),
            dst: ctx.home.into(),
            flags: String::new(),
        });
    }
    let s = |x: &str| x.to_string();
    let mut c: Vec<String> = vec![s(rt.program())];
    c.extend(ctx.runtime_args.iter().cloned());
    match rt {
        Runtime::Podman => {
            c.extend(["run", "--rm", "--network=host", "--ipc=host"].map(s));
            if !ctx.podman_own_cgroup {
                c.push(s("--cgroups=disabled"));
            }
            c.push(format!("--ulimit=nofile={}:{}", ctx.nofile.0, ctx.nofile.1));
            c.push(format!("--ulimit=nproc={}:{}", ctx.nproc.0, ctx.nproc.1));
            if spec.writable == Some(false) {
                c.push(s("--read-only"));
            }
            if spec.remap_root {
                c.push(s("--user=0:0"));
            } else if ctx.uid != 0 {
                c.push(s("--userns=keep-id"));
            }
            for m in &mounts {
                let mut v = format!("--volume={}:{}", m.src, m.dst);
                if !m.flags.is_empty() {
                    v.push(':');
                    v.push_str(&m.flags);
                }
                c.push(v);
            }
            for d in &ctx.devices {
                c.push(format!("--device={d}"));
            }
            for (n, _) in &ctx.env {
                c.push(format!("--env={n}"));
            }
            if let Some(w) = &spec.workdir {
                c.push(format!("--workdir={w}"));
            }
            c.extend(ctx.run_args.iter().cloned());
            c.push(spec.image.clone().unwrap_or_default());
        }
        Runtime::Apptainer => {
            // Apptainer passes the task's environment in itself; the image's own
            // settings win unless --container-env names the variable.
            c.extend(["exec", "--no-init"].map(s));
            if !spec.mount_home {
                c.push(s("--no-home"));
            }
            if spec.writable == Some(true) {
                c.push(s("--writable-tmpfs"));
            }
            if spec.remap_root {
                c.push(s("--fakeroot"));
            }
            // The task's GPUs: Apptainer binds the driver's devices and libraries.
            if !ctx.devices.is_empty() {
                c.push(s("--nv"));
            }
            for m in &spec.mounts {
                let mut v = format!("--bind={}:{}", m.src, m.dst);
                if !m.flags.is_empty() {
                    v.push(':');
                    v.push_str(&m.flags);
                }
                c.push(v);
            }
            for (n, v) in &ctx.env {
                if spec.env.iter().any(|e| e == n) {
                    c.push(format!("--env={n}={v}"));
                }
            }
            if let Some(w) = &spec.workdir {
                c.push(format!("--pwd={w}"));
            }
            c.extend(ctx.run_args.iter().cloned());
            c.push(match (&spec.name, &spec.image) {
                (Some(n), _) => format!("{}/{}", ctx.state_dir, node_name(ctx.job_id, n)),
                (None, Some(i)) => i.clone(),
                (None, None) => String::new(),
            });
        }
        Runtime::Enroot => {
            c.push(s("start"));
            if spec.remap_root {
                c.push(s("--root"));
            }
            if spec.writable != Some(false) {
                c.push(s("--rw"));
            }
            for m in &mounts {
                let mut v = format!("--mount={}:{}", m.src, m.dst);
                if !m.flags.is_empty() {
                    v.push(':');
                    v.push_str(&m.flags);
                }
                c.push(v);
            }
            for (n, _) in &ctx.env {
                c.push(format!("--env={n}"));
            }
            c.extend(ctx.run_args.iter().cloned());
            c.push(match &spec.name {
                Some(n) => node_name(ctx.job_id, n),
                None => spec.image.clone().unwrap_or_default(),
            });
        }
    }
    let argv: Vec<String> = match (rt, &spec.workdir) {
        // enroot has no working-directory flag: the command changes to it first.
        (Runtime::Enroot, Some(w)) => {
            let mut v = vec![s("sh"), s("-c"), s("cd \"$0\" && exec \"$@\""), w.clone()];
            v.extend(ctx.argv.iter().cloned());
            v
        }
        _ => ctx.argv.to_vec(),
    };
    c.extend(argv);
    // A named container is made on first use on the node (once: tasks take a lock).
    if let (Some(n), Some(image)) = (&spec.name, &spec.image)
        && rt != Runtime::Podman
    {
        let made = match rt {
            Runtime::Enroot => format!(
                "enroot list | grep -qx {0} || enroot create --name {0} {1}",
                sh_quote(&node_name(ctx.job_id, n)),
                sh_quote(image)
            ),
            _ => {
                let dir = format!("{}/{}", ctx.state_dir, node_name(ctx.job_id, n));
                format!(
                    "test -d {0} || apptainer build --sandbox {0} {1}",
                    sh_quote(&dir),
                    sh_quote(image)
                )
            }
        };
        let lock = format!("{}/.{}.lock", ctx.state_dir, node_name(ctx.job_id, n));
        let script = "mkdir -p \"$1\" && flock \"$2\" sh -c \"$3\" >&2 && shift 3 && exec \"$@\"";
        let mut v = vec![s("/bin/sh"), s("-c"), s(script), s("sh")];
        v.extend([s(ctx.state_dir), lock, made]);
        v.extend(c);
        return v;
    }
    c
}

/// `s` quoted for a POSIX shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ContainerSpec {
        ContainerSpec {
            image: Some("/img/busybox.tar".into()),
            mounts: parse_mounts("/data:/mnt/data:ro,/scratch").unwrap(),
            workdir: Some("/mnt/data".into()),
            mount_home: true,
            ..ContainerSpec::default()
        }
    }

    fn ctx<'a>(argv: &'a [String]) -> TaskCtx<'a> {
        TaskCtx {
            job_id: 7,
            uid: 1000,
            home: "/home/u",
            env: vec![("SLURM_PROCID", "3"), ("CUDA_VISIBLE_DEVICES", "0")],
            argv,
            devices: vec!["/dev/nvidia0".into()],
            nofile: (1024, 4096),
            nproc: (100, 200),
            state_dir: "/tmp/s",
            ..TaskCtx::default()
        }
    }

    #[test]
    fn mounts_parse() {
        let m = parse_mounts("/a,/b:/c,/d:/e:ro").unwrap();
        assert_eq!(
            m.iter()
                .map(|m| (m.src.as_str(), m.dst.as_str(), m.flags.as_str()))
                .collect::<Vec<_>>(),
            [("/a", "/a", ""), ("/b", "/c", ""), ("/d", "/e", "ro")]
        );
        assert!(parse_mounts("/a,").is_err());
        assert!(parse_mounts("/a:rel").is_err());
    }

    #[test]
    fn runtime_choice() {
        let only = |names: &'static [&'static str]| move |p: &str| names.contains(&p);
        assert_eq!(
            select_runtime("auto", only(&["podman", "apptainer"])),
            Ok(Runtime::Apptainer)
        );
        assert_eq!(
            select_runtime("", only(&["podman", "enroot"])),
            Ok(Runtime::Enroot)
        );
        assert_eq!(
            select_runtime("podman", only(&["podman"])),
            Ok(Runtime::Podman)
        );
        assert!(matches!(
            select_runtime("auto", only(&[])),
            Err(ContainerError::NoRuntime(_))
        ));
        assert!(matches!(
            select_runtime("enroot", only(&["podman"])),
            Err(ContainerError::NoRuntime(_))
        ));
        assert!(matches!(
            select_runtime("docker", only(&["podman"])),
            Err(ContainerError::Invalid(_))
        ));
        assert!(matches!(
            select_runtime("none", only(&["podman"])),
            Err(ContainerError::NoRuntime(_))
        ));
    }

    #[test]
    fn podman_command() {
        let argv = vec!["hostname".to_string()];
        let c = task_command(Runtime::Podman, &spec(), &ctx(&argv));
        assert_eq!(
            c,
            [
                "podman",
                "run",
                "--rm",
                "--network=host",
                "--ipc=host",
                "--cgroups=disabled",
                "--ulimit=nofile=1024:4096",
                "--ulimit=nproc=100:200",
                "--userns=keep-id",
                "--volume=/data:/mnt/data:ro",
                "--volume=/scratch:/scratch",
                "--volume=/home/u:/home/u",
                "--device=/dev/nvidia0",
                "--env=SLURM_PROCID",
                "--env=CUDA_VISIBLE_DEVICES",
                "--workdir=/mnt/data",
                "/img/busybox.tar",
                "hostname"
            ]
        );
        let mut s = spec();
        s.remap_root = true;
        s.writable = Some(false);
        s.mount_home = false;
        let c = task_command(Runtime::Podman, &s, &ctx(&argv));
        assert!(c.contains(&"--user=0:0".to_string()), "{c:?}");
        // Root's tasks run rootful Podman, with no user namespace to keep ids in.
        let root = TaskCtx {
            uid: 0,
            ..ctx(&argv)
        };
        let rc = task_command(Runtime::Podman, &spec(), &root);
        assert!(!rc.iter().any(|a| a.starts_with("--user")), "{rc:?}");
        assert!(c.contains(&"--read-only".to_string()), "{c:?}");
        assert!(!c.iter().any(|a| a.contains("/home/u")), "{c:?}");
        assert!(
            check(
                Runtime::Podman,
                &ContainerSpec {
                    name: Some("x".into()),
                    ..s
                }
            )
            .is_err()
        );
    }

    #[test]
    fn enroot_command_and_named_reuse() {
        let argv = vec!["id".to_string()];
        let c = task_command(Runtime::Enroot, &spec(), &ctx(&argv));
        assert_eq!(
            c,
            [
                "enroot",
                "start",
                "--rw",
                "--mount=/data:/mnt/data:ro",
                "--mount=/scratch:/scratch",
                "--mount=/home/u:/home/u",
                "--env=SLURM_PROCID",
                "--env=CUDA_VISIBLE_DEVICES",
                "/img/busybox.tar",
                "sh",
                "-c",
                "cd \"$0\" && exec \"$@\"",
                "/mnt/data",
                "id"
            ]
        );
        // A named container: made once per node under a lock, then started by name.
        let mut s = spec();
        s.name = Some("dev box".into());
        s.workdir = None;
        let c = task_command(Runtime::Enroot, &s, &ctx(&argv));
        assert_eq!(&c[..2], ["/bin/sh", "-c"]);
        assert_eq!(&c[4..6], ["/tmp/s", "/tmp/s/.sluice_7_dev_box.lock"]);
        assert_eq!(
            c[6],
            "enroot list | grep -qx 'sluice_7_dev_box' || \
             enroot create --name 'sluice_7_dev_box' '/img/busybox.tar'"
        );
        assert_eq!(c[7], "enroot");
        assert_eq!(&c[c.len() - 2..], ["sluice_7_dev_box", "id"]);
        // A later step names only the container.
        s.image = None;
        let c = task_command(Runtime::Enroot, &s, &ctx(&argv));
        assert_eq!(c[0], "enroot");
        assert_eq!(&c[c.len() - 2..], ["sluice_7_dev_box", "id"]);
    }

    #[test]
    fn apptainer_command() {
        let argv = vec!["id".to_string()];
        let mut s = spec();
        s.remap_root = true;
        s.writable = Some(true);
        s.env = vec!["CUDA_VISIBLE_DEVICES".into()];
        let c = task_command(Runtime::Apptainer, &s, &ctx(&argv));
        assert_eq!(
            c,
            [
                "apptainer",
                "exec",
                "--no-init",
                "--writable-tmpfs",
                "--fakeroot",
                "--nv",
                "--bind=/data:/mnt/data:ro",
                "--bind=/scratch:/scratch",
                "--env=CUDA_VISIBLE_DEVICES=0",
                "--pwd=/mnt/data",
                "/img/busybox.tar",
                "id"
            ]
        );
        s.name = Some("n".into());
        let c = task_command(Runtime::Apptainer, &s, &ctx(&argv));
        assert_eq!(
            c[6],
            "test -d '/tmp/s/sluice_7_n' || apptainer build --sandbox '/tmp/s/sluice_7_n' \
             '/img/busybox.tar'"
        );
        assert!(c.contains(&"/tmp/s/sluice_7_n".to_string()));
    }
}
