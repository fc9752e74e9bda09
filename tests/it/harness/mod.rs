//! A test cluster of real processes: a controller (with its in-process local agent)
//! started from the built binary in a temp dir, a directory of Slurm-named symlinks to
//! it, and helpers to run front-ends and wait for conditions without bare sleeps.

#![allow(dead_code)]

pub mod sshd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: cargo's build of this tree, or the one `SLUICE_TEST_BIN`
/// names (so that the ignored benchmarks can time a release binary while the harness
/// itself stays a quick debug build).
pub fn sluice_bin() -> PathBuf {
    match std::env::var_os("SLUICE_TEST_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_sluice")),
    }
}

/// Polls `cond` every 20 ms until it returns `Some`, or panics with `what` after
/// `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut cond: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        if Instant::now() > end {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A controller plus one local node, in a temp directory.
pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
    pub bin: PathBuf,
    pub work: PathBuf,
    /// The `[cgroup] root` of this cluster: unique, so that clusters running at the same
    /// time never share job cgroups (their job ids overlap).
    pub cgroup: sluice::config::CgroupConf,
    ctld: Option<Child>,
    /// Extra environment of the controller (and so of its local agent and stepds).
    ctld_env: Vec<(String, String)>,
}

/// Options for [`TestCluster::start_with`].
pub struct Setup {
    pub cpus: u32,
    pub memory: u64,
    /// TOML appended after the `debug` partition (`NODE` stands for the node's name).
    pub extra_partitions: &'static str,
    /// Seconds between SIGTERM and SIGKILL (KillWait).
    pub kill_wait: u32,
    /// Seconds finished jobs stay visible (MinJobAge).
    pub min_job_age: u32,
    /// Extra top-level TOML lines (e.g. `slurm_version = "23.11.1"`).
    pub top: &'static str,
    /// More lines of the `[cgroup]` section (Slurm's defaults: nothing constrained).
    pub cgroup: &'static str,
    /// More keys of the node's `[[nodes]]` entry (`gres = "gpu:2"`).
    pub node_extra: &'static str,
    /// Extra environment variables of the controller, its agent and their stepds (test
    /// hooks such as `SLUICE_GPU_PROBE_FILE`).
    pub env: Vec<(String, String)>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            cpus: 4,
            memory: 4000,
            extra_partitions: "",
            kill_wait: 2,
            min_job_age: 300,
            top: "",
            cgroup: "",
            node_extra: "",
            env: Vec::new(),
        }
    }
}

impl TestCluster {
    /// Starts a cluster with one node of 4 CPUs and 4000 MiB, partition `debug`
    /// (default, MaxTime 1:00:00).
    pub fn start() -> TestCluster {
        TestCluster::start_with(Setup::default())
    }

    pub fn start_with(s: Setup) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().unwrap();
        let node = sluice::config::short_hostname();
        let conf = root.join("sluice.toml");
        let cg_root = format!(
            "sluice-it-{}",
            root.file_name()
                .unwrap()
                .to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "")
        );
        std::fs::write(
            &conf,
            format!(
                r#"cluster_name = "testc"
state_dir = "{root}/state"
spool_dir = "{root}/spool"
socket = "{root}/run/ctld.sock"
kill_wait = {kw}
min_job_age = {age}
{top}
[[nodes]]
name = "{node}"
cpus = {cpus}
memory = {mem}
{node_extra}
[[partitions]]
name = "debug"
nodes = "{node}"
default = true
max_time = "1:00:00"
{extra}
[cgroup]
root = "{cg_root}"
{cg}
"#,
                root = root.display(),
                kw = s.kill_wait,
                age = s.min_job_age,
                top = s.top,
                cpus = s.cpus,
                mem = s.memory,
                extra = s.extra_partitions.replace("NODE", &node),
                cg_root = cg_root,
                cg = s.cgroup,
                node_extra = s.node_extra,
            ),
        )
        .unwrap();
        let cgroup = sluice::config::Config::from_file(&conf)
            .expect("test config loads")
            .cgroup;
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in sluice::cli::LINKED_COMMANDS.iter().chain(["sluice"].iter()) {
            std::os::unix::fs::symlink(sluice_bin(), bin.join(name)).unwrap();
        }
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let mut c = TestCluster {
            dir,
            conf,
            bin,
            work,
            cgroup,
            ctld: None,
            ctld_env: s.env,
        };
        c.start_controller();
        c
    }

    /// A cluster from a config of the caller's (it must put the socket at
    /// `<dir>/run/ctld.sock`; `spool_dir` at `<dir>/spool`), started without waiting for
    /// any node to register.
    pub fn start_conf(dir: tempfile::TempDir, conf_text: &str) -> TestCluster {
        let root = dir.path().canonicalize().unwrap();
        let conf = root.join("sluice.toml");
        std::fs::write(&conf, conf_text).unwrap();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in sluice::cli::LINKED_COMMANDS.iter().chain(["sluice"].iter()) {
            let _ = std::os::unix::fs::symlink(sluice_bin(), bin.join(name));
        }
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let cgroup = sluice::config::Config::from_file(&conf)
            .map(|c| c.cgroup)
            .unwrap_or_default();
        let mut c = TestCluster {
            dir,
            conf,
            bin,
            work,
            ctld: None,
            cgroup,
            ctld_env: Vec::new(),
        };
        c.spawn_controller();
        c
    }

    /// The node's name.
    pub fn node(&self) -> String {
        sluice::config::short_hostname()
    }

    /// Starts (or restarts) the controller and waits until it answers and every node
    /// is up.
    pub fn start_controller(&mut self) {
        self.spawn_controller();
        // The node is usable once its agent has registered.
        let cfg = sluice::config::Config::from_file(&self.conf).unwrap();
        wait_until("node registration", Duration::from_secs(20), || {
            let mut cl = sluice::cli::client::Client::connect_with(&cfg).ok()?;
            match cl.request(&sluice::proto::Request::Nodes).ok()? {
                sluice::proto::Response::Nodes { nodes, .. } => nodes
                    .iter()
                    .all(|n| n.state == sluice::model::NodeState::Up)
                    .then_some(()),
                _ => None,
            }
        });
    }

    /// Starts (or restarts) the controller and waits until it answers.
    pub fn spawn_controller(&mut self) {
        self.spawn_controller_nowait();
        let sock = self.dir.path().join("run/ctld.sock");
        wait_until("controller socket", Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&sock).ok()
        });
    }

    /// Starts (or restarts) the controller without waiting for it.
    pub fn spawn_controller_nowait(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("controller.log"))
            .unwrap();
        let mut child = Command::new(sluice_bin());
        child
            .args(["controller", "--foreground"])
            .env("SLUICE_CONF", &self.conf)
            .env("SLUICE_LOG", "debug")
            .envs(self.ctld_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        // An empty value unsets the variable (SLUICE_LOG: the configured level rules).
        for (k, _) in self.ctld_env.iter().filter(|(_, v)| v.is_empty()) {
            child.env_remove(k);
        }
        let child = child.spawn().expect("start controller");
        self.ctld = Some(child);
    }

    /// Sets (`Some`) or removes (`None`) one variable of the controller's environment,
    /// from its next start on.
    pub fn set_controller_env(&mut self, key: &str, value: Option<&str>) {
        self.ctld_env.retain(|(k, _)| k != key);
        if let Some(v) = value {
            self.ctld_env.push((key.to_string(), v.to_string()));
        }
    }

    /// The controller's log so far.
    pub fn controller_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("controller.log")).unwrap_or_default()
    }

    /// Kills the controller with SIGKILL (its jobs keep running).
    pub fn kill9_controller(&mut self) {
        if let Some(mut c) = self.ctld.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A command for a front-end by its Slurm name, run in the work dir.
    pub fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(self.bin.join(name));
        c.env("SLUICE_CONF", &self.conf)
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .current_dir(&self.work)
            .stdin(Stdio::null());
        for (k, _) in std::env::vars() {
            if k.starts_with("SLURM_") || k.starts_with("SBATCH_") || k.starts_with("SQUEUE_") {
                c.env_remove(k);
            }
        }
        c
    }

    /// Runs a front-end to completion.
    pub fn run(&self, name: &str, args: &[&str]) -> Output {
        self.cmd(name).args(args).output().expect("run front-end")
    }

    /// Runs a front-end and returns stdout, panicking (with stderr) if it failed.
    pub fn ok(&self, name: &str, args: &[&str]) -> String {
        let o = self.run(name, args);
        assert!(
            o.status.success(),
            "{name} {args:?} failed ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs a front-end with `input` on its stdin.
    pub fn run_stdin(&self, name: &str, args: &[&str], input: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .cmd(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run front-end");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input).unwrap();
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// Runs a front-end that must fail: returns (exit code, stdout, stderr).
    pub fn fails(&self, name: &str, args: &[&str]) -> (i32, String, String) {
        let o = self.run(name, args);
        assert!(
            !o.status.success(),
            "{name} {args:?} succeeded: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Every job the controller knows (any user, any state), by id.
    pub fn job_ids(&self) -> Vec<u32> {
        let cfg = sluice::config::Config::from_file(&self.conf).unwrap();
        let mut cl = sluice::cli::client::Client::connect_with(&cfg).unwrap();
        match cl
            .request(&sluice::proto::Request::Jobs(
                sluice::proto::JobFilter::default(),
            ))
            .unwrap()
        {
            sluice::proto::Response::Jobs { jobs, .. } => jobs.iter().map(|j| j.id).collect(),
            other => panic!("{other:?}"),
        }
    }

    /// A job's field from `scontrol show job -o` (e.g. `TimeLimit`).
    pub fn show_field(&self, id: u32, key: &str) -> String {
        let out = self.ok("scontrol", &["-o", "show", "job", &id.to_string()]);
        field(&out, key).unwrap_or_else(|| panic!("no {key}= in {out}"))
    }

    /// `sbatch --parsable ARGS` → job id.
    pub fn submit(&self, args: &[&str]) -> u32 {
        let mut a = vec!["--parsable"];
        a.extend_from_slice(args);
        let out = self.ok("sbatch", &a);
        out.trim()
            .parse()
            .unwrap_or_else(|_| panic!("sbatch printed {out:?}"))
    }

    /// A job's state as `squeue -t all` shows it (long name), or None when not shown.
    pub fn state(&self, id: u32) -> Option<String> {
        let o = self.run(
            "squeue",
            &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T"],
        );
        let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
        (!s.is_empty()).then_some(s)
    }

    /// Waits until the job's state is one of `states`.
    pub fn wait_state(&self, id: u32, states: &[&str], timeout: Duration) -> String {
        wait_until(&format!("job {id} in {states:?}"), timeout, || {
            self.state(id).filter(|s| states.contains(&s.as_str()))
        })
    }

    /// Runs a front-end that must fail; returns (exit code, stderr).
    pub fn fails_err(&self, name: &str, args: &[&str]) -> (i32, String) {
        let o = self.run(name, args);
        assert!(
            !o.status.success(),
            "{name} {args:?} succeeded: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// One field of `scontrol -o show job ID` (first record), e.g. `Reason`.
    pub fn field(&self, id: &str, key: &str) -> Option<String> {
        let o = self.run("scontrol", &["-o", "show", "job", id]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let line = text.lines().next()?.to_string();
        let pat = format!("{key}=");
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&pat).map(str::to_string))
    }

    /// Waits until `scontrol` shows `key=value` for the job.
    pub fn wait_field(&self, id: &str, key: &str, value: &str) {
        wait_until(
            &format!("job {id} {key}={value}"),
            Duration::from_secs(30),
            || (self.field(id, key).as_deref() == Some(value)).then_some(()),
        )
    }

    /// Waits until the job has finished.
    pub fn wait_done(&self, id: u32) -> String {
        self.wait_state(
            id,
            &[
                "COMPLETED",
                "FAILED",
                "CANCELLED",
                "TIMEOUT",
                "NODE_FAIL",
                "OUT_OF_MEMORY",
                "DEADLINE",
            ],
            Duration::from_secs(30),
        )
    }

    /// Path in the work dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.work.join(name)
    }

    /// Writes an executable script in the work dir.
    pub fn script(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.work.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Reads a file in the work dir once it exists and `pred` holds for its content.
    pub fn wait_file(&self, name: &str, pred: impl Fn(&str) -> bool) -> String {
        let p = self.path(name);
        wait_until(
            &format!("file {}", p.display()),
            Duration::from_secs(30),
            || std::fs::read_to_string(&p).ok().filter(|s| pred(s)),
        )
    }

    /// sacct rows `JobID|State|ExitCode` of a job (every component of a
    /// heterogeneous one), once `want` rows are recorded and none is running.
    pub fn sacct_rows(&self, id: u32, want: usize) -> Vec<String> {
        wait_until("sacct rows", Duration::from_secs(20), || {
            let o = self.run(
                "sacct",
                &[
                    "-j",
                    &id.to_string(),
                    "-n",
                    "-P",
                    "-o",
                    "JobID,State,ExitCode",
                ],
            );
            let rows: Vec<String> = text(&o.stdout).lines().map(String::from).collect();
            (rows.len() >= want && !rows.iter().any(|r| r.contains("RUNNING"))).then_some(rows)
        })
    }

    fn spool(&self) -> PathBuf {
        self.dir.path().join("spool")
    }
}

/// The value of `key=` in a `Key=Value` line (up to the next space).
pub fn field(text: &str, key: &str) -> Option<String> {
    let pat = format!("{key}=");
    text.split([' ', '\n'])
        .find_map(|tok| tok.trim().strip_prefix(&pat).map(str::to_string))
}

/// Bytes as text (lossy).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The lines of `s`, leading blanks trimmed (srun's label padding), sorted.
pub fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(|l| l.trim_start().to_string()).collect();
    v.sort();
    v
}

/// The stdout of a finished command.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The stderr of a finished command.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The real Slurm transcripts the tests compare with (`tests/data/golden`).
pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden")
}

fn kill_spooled_jobs(spool: &Path) {
    for e in std::fs::read_dir(spool).into_iter().flatten().flatten() {
        for (f, group) in [("job.pid", true), ("stepd.pid", false)] {
            if let Ok(s) = std::fs::read_to_string(e.path().join(f))
                && let Ok(pid) = s.trim().parse::<i32>()
            {
                let pid = if group { -pid } else { pid };
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(mut c) = self.ctld.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let end = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                if Instant::now() > end {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        kill_spooled_jobs(&self.spool());
        // stepds killed above cannot remove their cgroups, nor kill what escaped the
        // job's process group.
        if let Err(e) = sluice::stepd::isolate::purge(&self.cgroup) {
            eprintln!("test cluster cgroups: {e}");
        }
        if std::env::var_os("SLUICE_KEEP_TEST_DIRS").is_some() {
            let p = self.dir.path().to_path_buf();
            eprintln!("keeping {}", p.display());
            std::mem::forget(std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().unwrap(),
            ));
        }
    }
}
