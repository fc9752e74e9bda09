//! A cluster whose nodes are reached over real SSH: one OpenSSH server (Debian's
//! openssh-server, `/usr/sbin/sshd`) per node on a free loopback port, each with its own
//! generated host key, authorized_keys holding the controller's key (made by `sluice
//! keygen`), spool directory and declared resources. Every node runs on this machine;
//! a node's name comes from the config, not from the host name.
//!
//! When sshd is missing or cannot run here, [`SshCluster::start`] prints why and returns
//! `None` so the test can skip; with `SLUICE_REQUIRE_SSHD=1` (CI) it panics instead.
//! Everything started here is stopped by pid when the cluster is dropped.

use super::{TestCluster, kill_spooled_jobs, sluice_bin, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SSHD: &str = "/usr/sbin/sshd";

/// How one node is set up.
#[derive(Debug, Clone)]
pub struct NodeSetup {
    pub name: String,
    pub cpus: u32,
    pub memory: u64,
    /// Put a different key than the node's in known_hosts.
    pub wrong_host_key: bool,
    /// `sluice_path` on the node (default: the binary under test).
    pub sluice_path: Option<String>,
    /// Set `push_binary` and a `push_path` under the node's directory.
    pub push: Option<bool>,
    /// A shell script to install at `<node dir>/fake-sluice` and use as `sluice_path`
    /// (e.g. one that claims another protocol version).
    pub fake_sluice: Option<String>,
}

impl NodeSetup {
    /// A node with 2 CPUs and 1000 MiB that runs the binary under test.
    pub fn new(name: &str) -> NodeSetup {
        NodeSetup {
            name: name.into(),
            cpus: 2,
            memory: 1000,
            wrong_host_key: false,
            sluice_path: None,
            push: None,
            fake_sluice: None,
        }
    }
}

/// One node's sshd.
pub struct SshNode {
    pub name: String,
    pub port: u16,
    /// The node's directory (sshd config, keys, log, spool).
    pub dir: PathBuf,
    pub spool: PathBuf,
    /// `ssh-keygen -l` fingerprint of the host key (`SHA256:…`).
    pub host_fingerprint: String,
    sshd: Option<Child>,
}

/// A controller plus SSH-reached nodes; derefs to the [`TestCluster`] for front-ends.
pub struct SshCluster {
    cluster: Option<TestCluster>,
    pub nodes: Vec<SshNode>,
    pub known_hosts: PathBuf,
    /// The controller's public key line, as `sluice keygen` printed it.
    pub controller_pub: String,
}

impl std::ops::Deref for SshCluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        self.cluster.as_ref().expect("cluster")
    }
}

impl std::ops::DerefMut for SshCluster {
    fn deref_mut(&mut self) -> &mut TestCluster {
        self.cluster.as_mut().expect("cluster")
    }
}

/// Says why SSH tests cannot run here, or panics when CI requires them.
fn skip(why: &str) -> Option<SshCluster> {
    if std::env::var_os("SLUICE_REQUIRE_SSHD").is_some_and(|v| v == "1") {
        panic!("SSH test cannot run: {why} (SLUICE_REQUIRE_SSHD=1)");
    }
    eprintln!("skipping SSH test: {why} (apt-get install -y openssh-server; run as root)");
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn keygen_host(path: &Path, comment: &str) -> Result<(), String> {
    let o = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

fn fingerprint(pub_path: &Path) -> String {
    let o = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(pub_path)
        .output()
        .expect("ssh-keygen -l");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string()
}

fn key_part(pub_line: &str) -> String {
    pub_line
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

impl SshNode {
    /// Starts this node's sshd and waits until it greets.
    pub fn start_sshd(&mut self) {
        assert!(self.sshd.is_none(), "sshd of {} already running", self.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("sshd.log"))
            .unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(self.dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        self.sshd = Some(child);
        let port = self.port;
        let name = self.name.clone();
        let logp = self.dir.join("sshd.log");
        wait_until(&format!("sshd of {name}"), Duration::from_secs(10), || {
            use std::io::Read;
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            let mut buf = [0u8; 8];
            s.read_exact(&mut buf).ok()?;
            (&buf == b"SSH-2.0-").then_some(())
        });
        let _ = logp;
    }

    /// The pid of the listening sshd.
    pub fn sshd_pid(&self) -> Option<i32> {
        self.sshd.as_ref().map(|c| c.id() as i32)
    }

    /// Kills this node's sshd with SIGKILL: the listener and the per-connection sshd
    /// processes (so the controller's link drops); the agent then sees its stdin close.
    pub fn kill_sshd(&mut self) {
        let Some(mut c) = self.sshd.take() else {
            return;
        };
        let pid = c.id() as i32;
        let mut victims: Vec<i32> = descendants(pid)
            .into_iter()
            .filter(|p| comm(*p).starts_with("sshd"))
            .collect();
        victims.insert(0, pid);
        for p in victims {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        let _ = c.wait();
    }

    /// Pids of the node agents (`sluice agent --stdio`) running under this node's sshd.
    pub fn agent_pids(&self) -> Vec<i32> {
        let Some(pid) = self.sshd_pid() else {
            return Vec::new();
        };
        descendants(pid)
            .into_iter()
            .filter(|p| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
                args.contains(&&b"agent"[..]) && args.contains(&&b"--stdio"[..])
            })
            .collect()
    }

    /// Sends `sig` to the listening sshd and every process under it (its sessions and
    /// the agent they run).
    pub fn signal_all(&self, sig: Signal) {
        let Some(pid) = self.sshd_pid() else { return };
        for p in std::iter::once(pid).chain(descendants(pid)) {
            let _ = kill(Pid::from_raw(p), sig);
        }
    }
}

/// Parent pid of every process.
fn ppids() -> HashMap<i32, i32> {
    let mut m = HashMap::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may contain spaces, so split after ')'.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r)
            && let Some(ppid) = rest.split_whitespace().nth(1)
            && let Ok(ppid) = ppid.parse()
        {
            m.insert(pid, ppid);
        }
    }
    m
}

/// All processes below `root`.
fn descendants(root: i32) -> Vec<i32> {
    let pp = ppids();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, parent) in &pp {
            if *parent == p {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl SshCluster {
    /// Starts one sshd per node and a controller configured to reach them over SSH
    /// (no local node; partition `debug` holds them all). `slurmd_timeout` is short so
    /// that silence is noticed within seconds. Returns `None` (after saying why) when
    /// sshd cannot run here.
    pub fn start(nodes: &[NodeSetup], slurmd_timeout: u32) -> Option<SshCluster> {
        SshCluster::start_with_conf(nodes, slurmd_timeout, "", "")
    }

    /// Like [`SshCluster::start`], with `top` added to the config's top-level keys.
    pub fn start_top(nodes: &[NodeSetup], slurmd_timeout: u32, top: &str) -> Option<SshCluster> {
        SshCluster::start_with_conf(nodes, slurmd_timeout, top, "")
    }

    /// Like [`SshCluster::start`], with `top` added to the configuration's top-level
    /// keys (`sched_interval = 1`) and `extra` TOML appended after the `debug`
    /// partition (a `[topology]` section).
    pub fn start_with_conf(
        nodes: &[NodeSetup],
        slurmd_timeout: u32,
        top: &str,
        extra: &str,
    ) -> Option<SshCluster> {
        if !Path::new(SSHD).exists() {
            return skip(&format!("{SSHD} is not installed"));
        }
        if Command::new("ssh-keygen").arg("-?").output().is_err() {
            return skip("ssh-keygen is not installed");
        }
        if !nix::unistd::geteuid().is_root() {
            return skip("sshd needs root here (privilege separation)");
        }
        // sshd refuses to start without its privilege separation directory.
        if !Path::new("/run/sshd").exists()
            && let Err(e) = std::fs::create_dir_all("/run/sshd")
        {
            return skip(&format!("cannot create /run/sshd: {e}"));
        }
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| u.name)
            .unwrap_or_else(|| "root".into());
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().unwrap();
        let known_hosts = root.join("known_hosts");
        let mut conf = format!(
            r#"cluster_name = "sshc"
state_dir = "{root}/state"
spool_dir = "{root}/spool"
socket = "{root}/run/ctld.sock"
kill_wait = 2
slurmd_timeout = {slurmd_timeout}
reconnect_max = 2
{top}
[cgroup]
root = "sluice_ssh_{pid}_{uniq}"
"#,
            root = root.display(),
            top = top,
            pid = std::process::id(),
            uniq = root
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or("x")
                .replace('.', "_"),
        );
        // The controller's key, made the way an admin would.
        std::fs::write(root.join("sluice.toml"), &conf).unwrap();
        let kg = Command::new(sluice_bin())
            .arg("keygen")
            .env("SLUICE_CONF", root.join("sluice.toml"))
            .output()
            .expect("sluice keygen");
        assert!(
            kg.status.success(),
            "sluice keygen: {}",
            String::from_utf8_lossy(&kg.stderr)
        );
        let controller_pub = String::from_utf8_lossy(&kg.stdout).trim().to_string();
        assert!(
            controller_pub.starts_with("ssh-ed25519 "),
            "{controller_pub}"
        );

        let mut kh = String::new();
        let mut ssh_nodes = Vec::new();
        for n in nodes {
            let ndir = root.join("nodes").join(&n.name);
            let spool = ndir.join("spool");
            std::fs::create_dir_all(&spool).unwrap();
            let host_key = ndir.join("host_key");
            if let Err(e) = keygen_host(&host_key, &n.name) {
                return skip(&e);
            }
            let host_pub_path = ndir.join("host_key.pub");
            let host_pub = std::fs::read_to_string(&host_pub_path).unwrap();
            let listed = if n.wrong_host_key {
                let other = ndir.join("impostor_key");
                keygen_host(&other, "impostor").unwrap();
                std::fs::read_to_string(ndir.join("impostor_key.pub")).unwrap()
            } else {
                host_pub.clone()
            };
            let mut sluice_path = n.sluice_path.clone();
            if let Some(script) = &n.fake_sluice {
                use std::os::unix::fs::PermissionsExt;
                let p = ndir.join("fake-sluice");
                std::fs::write(&p, script).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
                sluice_path = Some(p.display().to_string());
            }
            let port = free_port();
            kh.push_str(&format!("[127.0.0.1]:{port} {}\n", key_part(&listed)));
            std::fs::write(ndir.join("authorized_keys"), format!("{controller_pub}\n")).unwrap();
            std::fs::write(
                ndir.join("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                     PidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\n\
                     StrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                     PermitRootLogin prohibit-password\nAllowUsers {user}\nPrintMotd no\n\
                     LogLevel VERBOSE\n",
                    d = ndir.display()
                ),
            )
            .unwrap();
            conf.push_str(&format!(
                "[[nodes]]\nname = \"{name}\"\ncpus = {cpus}\nmemory = {mem}\n\
                 ssh = \"{user}@127.0.0.1:{port}\"\nknown_hosts = \"{kh}\"\n\
                 spool_dir = \"{spool}\"\nsluice_path = \"{sp}\"\n",
                name = n.name,
                cpus = n.cpus,
                mem = n.memory,
                kh = known_hosts.display(),
                spool = spool.display(),
                sp = sluice_path.unwrap_or_else(|| sluice_bin().display().to_string()),
            ));
            if let Some(push) = n.push {
                conf.push_str(&format!(
                    "push_binary = {push}\npush_path = \"{}\"\n",
                    ndir.join("bin/sluice").display()
                ));
            }
            let mut node = SshNode {
                name: n.name.clone(),
                port,
                dir: ndir,
                spool,
                host_fingerprint: fingerprint(&host_pub_path),
                sshd: None,
            };
            node.start_sshd();
            ssh_nodes.push(node);
        }
        std::fs::write(&known_hosts, kh).unwrap();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        conf.push_str(&format!(
            "[[partitions]]\nname = \"debug\"\nnodes = \"{}\"\ndefault = true\nmax_time = \"1:00:00\"\n",
            names.join(",")
        ));
        conf.push_str(extra);
        let cluster = TestCluster::start_conf(dir, &conf);
        Some(SshCluster {
            cluster: Some(cluster),
            nodes: ssh_nodes,
            known_hosts,
            controller_pub,
        })
    }

    /// The node set up under `name`.
    pub fn node_mut(&mut self, name: &str) -> &mut SshNode {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .expect("node")
    }

    /// `State=` and `Reason=` of `scontrol show node NAME` (reason without the
    /// `[user@time]` suffix; empty when none).
    pub fn node_state(&self, name: &str) -> (String, String) {
        let out = self.run("scontrol", &["show", "node", name]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let state = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("State="))
            .unwrap_or("")
            .to_string();
        let reason = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("Reason="))
            .map(|r| r.rsplit_once(" [").map_or(r, |(a, _)| a).to_string())
            .unwrap_or_default();
        (state, reason)
    }

    /// Waits until the node's state satisfies `pred`; returns (state, reason).
    pub fn wait_node(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str, &str) -> bool,
    ) -> (String, String) {
        wait_until(&format!("node {name} {what}"), timeout, || {
            let (s, r) = self.node_state(name);
            pred(&s, &r).then_some((s, r))
        })
    }

    /// Waits until every node is IDLE (registered, nothing running).
    pub fn wait_all_idle(&self) {
        for n in &self.nodes {
            self.wait_node(&n.name, "idle", Duration::from_secs(30), |s, _| s == "IDLE");
        }
    }
}

impl Drop for SshCluster {
    fn drop(&mut self) {
        let spools: Vec<PathBuf> = self.nodes.iter().map(|n| n.spool.clone()).collect();
        // The controller first, so that links close and remote agents exit on EOF.
        let keep = std::env::var_os("SLUICE_KEEP_TEST_DIRS").is_some();
        if keep {
            eprintln!("SSH nodes: {}", self.nodes[0].dir.display());
        }
        // Jobs first (their pid files live in the temp dir the cluster removes).
        for s in &spools {
            kill_spooled_jobs(s);
        }
        drop(self.cluster.take());
        for n in &mut self.nodes {
            if let Some(mut c) = n.sshd.take() {
                let pid = c.id() as i32;
                for p in std::iter::once(pid).chain(descendants(pid)) {
                    let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                }
                let _ = c.wait();
            }
        }
    }
}
