//! SSH links from the controller to remote node agents (DESIGN.md §2). Slurm's twin is
//! slurmctld's TCP connection to slurmd, authenticated with munge; sluice instead runs
//! `sluice agent --stdio` on the node through SSH (russh), so SSH does authentication and
//! encryption and no port is opened on compute nodes.
//!
//! One link is one SSH session: connect, verify the host key strictly against a
//! known_hosts file, authenticate with the controller's key, make sure a compatible
//! `sluice` exists on the node (optionally pushing the controller's own binary there),
//! then run the agent on one channel and hand back a byte stream over it. The agent's
//! stderr is logged by the controller, prefixed with the node's name.

use crate::config::NodeConf;
use crate::proto::{MIN_PROTO, PROTO};
use russh::ChannelMsg;
use russh::client;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// How long connecting, authenticating and each probe may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long pushing the binary may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(300);
/// Lines of the remote agent's stderr kept to explain a failed link.
const STDERR_TAIL: usize = 5;

pub use crate::config::ssh_addr::SshAddr;

/// Everything needed to bring up one remote node's agent.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// The node's name (passed to the agent, and named in every error).
    pub node: String,
    pub addr: SshAddr,
    pub identity_file: PathBuf,
    pub known_hosts: PathBuf,
    /// Whether the controller may copy its own binary to the node.
    pub push_binary: bool,
    /// Command that runs sluice on the node.
    pub sluice_path: String,
    /// Where a pushed binary goes (`~/` is the remote home).
    pub push_path: String,
    /// The agent's spool directory on the node (`None`: the agent's default).
    pub spool_dir: Option<String>,
    /// Seconds between the agent's heartbeats.
    pub heartbeat_secs: u32,
    /// The controller's own executable (what gets pushed).
    pub local_exe: PathBuf,
}

impl LinkSpec {
    /// The link for a declared remote node. Errors: the node has no `ssh` address or a
    /// bad one.
    pub fn from_conf(
        n: &NodeConf,
        heartbeat_secs: u32,
        local_exe: PathBuf,
    ) -> Result<Self, String> {
        let addr = n
            .ssh
            .as_deref()
            .ok_or_else(|| format!("node '{}' has no ssh address", n.name))?;
        Ok(LinkSpec {
            node: n.name.clone(),
            addr: SshAddr::parse(addr)?,
            identity_file: n
                .identity_file
                .clone()
                .unwrap_or_else(|| PathBuf::from("id_ed25519")),
            known_hosts: n
                .known_hosts
                .clone()
                .unwrap_or_else(|| PathBuf::from(crate::config::SYSTEM_KNOWN_HOSTS)),
            push_binary: n.push_binary.unwrap_or(true),
            sluice_path: n.sluice_path.clone().unwrap_or_else(|| "sluice".into()),
            push_path: n
                .push_path
                .clone()
                .unwrap_or_else(|| crate::config::DEFAULT_PUSH_PATH.into()),
            spool_dir: n.spool_dir.clone(),
            heartbeat_secs: heartbeat_secs.max(1),
            local_exe,
        })
    }
}

/// The host presented a key that known_hosts does not list for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "ssh: host key of {host} (node {node}) is not known: it presented {algo} key \
     {fingerprint}, which is not in {known_hosts}{others}; if this is the right host, \
     add it (e.g. ssh-keyscan{port_opt} -t {algo} {bare_host} >> {known_hosts})"
)]
pub struct UnknownHostKey {
    pub node: String,
    pub host: String,
    pub bare_host: String,
    pub port_opt: String,
    pub algo: String,
    pub fingerprint: String,
    pub known_hosts: String,
    pub others: String,
}

/// The host presented another key than the one known_hosts lists for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "ssh: HOST KEY MISMATCH for {host} (node {node}): it presented {algo} key \
     {fingerprint} but {known_hosts} line {line} has {expected}; refusing to connect \
     (the host was reinstalled, or someone is intercepting the connection)"
)]
pub struct HostKeyMismatch {
    pub node: String,
    pub host: String,
    pub algo: String,
    pub fingerprint: String,
    pub expected: String,
    pub known_hosts: String,
    /// 1-based line of the known_hosts entry.
    pub line: usize,
}

/// Why a link could not be brought up. Each message names the node and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("ssh: cannot connect to {addr}: {msg}")]
    Connect { addr: String, msg: String },
    #[error("{0}")]
    UnknownHostKey(Box<UnknownHostKey>),
    #[error("{0}")]
    HostKeyMismatch(Box<HostKeyMismatch>),
    #[error("ssh: cannot use known_hosts file {path}: {msg}")]
    KnownHosts { path: String, msg: String },
    #[error(
        "ssh: cannot read identity file {path}: {msg} (create the controller's key with \
         `sluice keygen`)"
    )]
    Identity { path: String, msg: String },
    #[error(
        "ssh: {addr} refused the controller's key {fingerprint} (add {path}.pub to \
         ~/.ssh/authorized_keys of {user} on node {node})"
    )]
    AuthRefused {
        addr: String,
        node: String,
        user: String,
        fingerprint: String,
        path: String,
    },
    #[error("ssh: {0}")]
    Protocol(String),
    #[error("ssh: node {node}: {msg}")]
    Remote { node: String, msg: String },
}

impl From<russh::Error> for SshError {
    fn from(e: russh::Error) -> Self {
        SshError::Protocol(e.to_string())
    }
}

/// Checks `key` against the entries for `addr` in `known_hosts`: the same key is
/// accepted; a different key of the same type is a mismatch; no entry of that type
/// makes the host unknown. Nothing is ever learned or written.
///
/// Errors: [`SshError::UnknownHostKey`], [`SshError::HostKeyMismatch`],
/// [`SshError::KnownHosts`] (unreadable file or a malformed entry for this host).
pub fn verify_host_key(
    node: &str,
    addr: &SshAddr,
    key: &PublicKey,
    known_hosts: &Path,
) -> Result<(), SshError> {
    let kh = known_hosts.display().to_string();
    let name = addr.known_hosts_name();
    let algo = key.algorithm().to_string();
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let entries = if known_hosts.exists() {
        russh::keys::known_hosts::known_host_keys_path(&addr.host, addr.port, known_hosts).map_err(
            |e| SshError::KnownHosts {
                path: kh.clone(),
                msg: e.to_string(),
            },
        )?
    } else {
        Vec::new()
    };
    if entries.iter().any(|(_, k)| k.key_data() == key.key_data()) {
        return Ok(());
    }
    if let Some((line, k)) = entries
        .iter()
        .find(|(_, k)| k.algorithm() == key.algorithm())
    {
        return Err(SshError::HostKeyMismatch(Box::new(HostKeyMismatch {
            node: node.to_string(),
            host: name.clone(),
            algo,
            fingerprint,
            expected: k.fingerprint(HashAlg::Sha256).to_string(),
            line: line_of(known_hosts, &name, k).unwrap_or(*line),
            known_hosts: kh,
        })));
    }
    let others = if !known_hosts.exists() {
        " (the file does not exist)".to_string()
    } else if entries.is_empty() {
        String::new()
    } else {
        let types: Vec<String> = entries
            .iter()
            .map(|(_, k)| k.algorithm().to_string())
            .collect();
        format!(" (it lists only {} keys for this host)", types.join(", "))
    };
    Err(SshError::UnknownHostKey(Box::new(UnknownHostKey {
        node: node.to_string(),
        host: name,
        bare_host: addr.host.clone(),
        port_opt: if addr.port == 22 {
            String::new()
        } else {
            format!(" -p {}", addr.port)
        },
        algo,
        fingerprint,
        known_hosts: kh,
        others,
    })))
}

/// The 1-based number of the known_hosts line that holds `key` for `name` (the reader
/// russh offers does not count comment lines): a line naming the host in clear text
/// first, else any line with that key (hashed host names).
fn line_of(path: &Path, name: &str, key: &PublicKey) -> Option<usize> {
    let text = std::fs::read_to_string(path).ok()?;
    let openssh = key.to_openssh().ok()?;
    let b64 = openssh.split_whitespace().nth(1)?;
    let has_key = |l: &str| l.split_whitespace().any(|w| w == b64);
    let names_host = |l: &str| {
        l.split_whitespace()
            .find(|w| !w.starts_with('@'))
            .is_some_and(|hosts| hosts.split(',').any(|h| h == name))
    };
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .position(|l| has_key(l) && names_host(l))
        .or_else(|| lines.iter().position(|l| has_key(l)))
        .map(|i| i + 1)
}

/// The russh client handler: strict host-key checking, nothing else.
struct Checker {
    node: String,
    addr: SshAddr,
    known_hosts: PathBuf,
}

impl client::Handler for Checker {
    type Error = SshError;

    async fn check_server_key(
        &mut self,
        key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, SshError> {
        match key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => {
                verify_host_key(&self.node, &self.addr, key, &self.known_hosts)?;
                Ok(true)
            }
            russh::keys::PublicKeyOrCertificate::Certificate(_) => Err(SshError::Remote {
                node: self.node.clone(),
                msg: "the host presented a certificate; sluice only checks plain host keys \
                      against known_hosts"
                    .into(),
            }),
        }
    }
}

/// An authenticated SSH session to one node.
pub struct Session {
    handle: client::Handle<Checker>,
    spec: LinkSpec,
}

/// Reads an OpenSSH private key (unencrypted).
///
/// Errors: [`SshError::Identity`].
pub fn load_identity(path: &Path) -> Result<PrivateKey, SshError> {
    russh::keys::load_secret_key(path, None).map_err(|e| SshError::Identity {
        path: path.display().to_string(),
        msg: e.to_string(),
    })
}

async fn timed<T>(
    what: &str,
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, SshError>>,
) -> Result<T, SshError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => Err(SshError::Protocol(format!(
            "{what} timed out after {} s",
            limit.as_secs()
        ))),
    }
}

/// Connects, verifies the host key and authenticates.
///
/// Errors: every [`SshError`] kind but [`SshError::Remote`].
pub async fn connect(spec: &LinkSpec) -> Result<Session, SshError> {
    let key = load_identity(&spec.identity_file)?;
    let fingerprint = key.public_key().fingerprint(HashAlg::Sha256).to_string();
    let config = Arc::new(client::Config {
        keepalive_interval: Some(Duration::from_secs(15)),
        keepalive_max: 3,
        nodelay: true,
        ..Default::default()
    });
    let checker = Checker {
        node: spec.node.clone(),
        addr: spec.addr.clone(),
        known_hosts: spec.known_hosts.clone(),
    };
    let addr = spec.addr.to_string();
    let tcp = timed("connecting", STEP_TIMEOUT, async {
        tokio::net::TcpStream::connect((spec.addr.host.as_str(), spec.addr.port))
            .await
            .map_err(|e| SshError::Connect {
                addr: addr.clone(),
                msg: e.to_string(),
            })
    })
    .await?;
    let _ = tcp.set_nodelay(true);
    let mut handle = timed(
        &format!("ssh handshake with {addr}"),
        STEP_TIMEOUT,
        client::connect_stream(config, tcp, checker),
    )
    .await?;
    let user = spec.addr.user_or_current();
    let hash = if key.algorithm().is_rsa() {
        handle.best_supported_rsa_hash().await?.flatten()
    } else {
        None
    };
    let auth = timed("authentication", STEP_TIMEOUT, async {
        Ok(handle
            .authenticate_publickey(
                user.clone(),
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            )
            .await?)
    })
    .await?;
    if !auth.success() {
        return Err(SshError::AuthRefused {
            addr,
            node: spec.node.clone(),
            user,
            fingerprint,
            path: spec.identity_file.display().to_string(),
        });
    }
    Ok(Session {
        handle,
        spec: spec.clone(),
    })
}

/// What a remote command printed, and how it ended.
#[derive(Debug, Default)]
struct ExecOutput {
    status: Option<u32>,
    signal: Option<String>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl ExecOutput {
    fn first_stderr_line(&self) -> String {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

/// Quotes `s` for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Quotes a remote path for a POSIX shell, expanding a leading `~/` to `$HOME/`.
pub fn sh_path(p: &str) -> String {
    match p.strip_prefix("~/") {
        Some(rest) => format!("\"$HOME\"/{}", sh_quote(rest)),
        None if p == "~" => "\"$HOME\"".into(),
        None => sh_quote(p),
    }
}

/// What `sluice agent --probe` says about a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeInfo {
    pub proto: u32,
    pub min_proto: u32,
    pub build: String,
    pub os: String,
    pub arch: String,
}

impl ProbeInfo {
    /// This binary's own probe line.
    pub fn own_line() -> String {
        format!(
            "sluice-agent proto={PROTO} min_proto={MIN_PROTO} build={} os={} arch={}",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH
        )
    }

    /// Parses a probe line; `None` if it is not one.
    pub fn parse(line: &str) -> Option<ProbeInfo> {
        let mut words = line.split_whitespace();
        if words.next()? != "sluice-agent" {
            return None;
        }
        let mut info = ProbeInfo {
            proto: 0,
            min_proto: 0,
            build: String::new(),
            os: String::new(),
            arch: String::new(),
        };
        for w in words {
            let (k, v) = w.split_once('=')?;
            match k {
                "proto" => info.proto = v.parse().ok()?,
                "min_proto" => info.min_proto = v.parse().ok()?,
                "build" => info.build = v.to_string(),
                "os" => info.os = v.to_string(),
                "arch" => info.arch = v.to_string(),
                _ => {}
            }
        }
        (info.proto > 0).then_some(info)
    }

    /// Whether this binary and the probed one accept each other's hello.
    pub fn compatible(&self) -> bool {
        (MIN_PROTO..=PROTO).contains(&self.proto) && (self.min_proto..=self.proto).contains(&PROTO)
    }
}

/// Whether a remote sluice can be used, and if not, why.
#[derive(Debug)]
enum Probe {
    Usable(ProbeInfo),
    Unusable(String),
}

impl Session {
    /// Runs `cmd` through the remote user's shell, feeding it `stdin` (then EOF), and
    /// collects its output until the channel closes.
    async fn exec(&self, cmd: &str, stdin: Option<&Path>) -> Result<ExecOutput, SshError> {
        let ch = self.handle.channel_open_session().await?;
        ch.exec(true, cmd).await?;
        let (mut rd, wr) = ch.split();
        let feed = async {
            if let Some(p) = stdin {
                let mut f = tokio::fs::File::open(p)
                    .await
                    .map_err(|e| SshError::Remote {
                        node: self.spec.node.clone(),
                        msg: format!("cannot read {}: {e}", p.display()),
                    })?;
                let mut w = wr.make_writer();
                tokio::io::copy(&mut f, &mut w)
                    .await
                    .map_err(|e| SshError::Protocol(format!("sending {}: {e}", p.display())))?;
                w.flush()
                    .await
                    .map_err(|e| SshError::Protocol(e.to_string()))?;
            }
            wr.eof().await?;
            Ok::<_, SshError>(())
        };
        let collect = async {
            let mut out = ExecOutput::default();
            while let Some(msg) = rd.wait().await {
                match msg {
                    ChannelMsg::Data { data } => out.stdout.extend_from_slice(&data),
                    ChannelMsg::ExtendedData { data, .. } => out.stderr.extend_from_slice(&data),
                    ChannelMsg::ExitStatus { exit_status } => out.status = Some(exit_status),
                    ChannelMsg::ExitSignal { signal_name, .. } => {
                        out.signal = Some(format!("{signal_name:?}"))
                    }
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            out
        };
        let (fed, out) = tokio::join!(feed, collect);
        fed?;
        Ok(out)
    }

    /// Asks the sluice at `path` who it is.
    async fn probe(&self, path: &str) -> Result<Probe, SshError> {
        let cmd = format!("{} agent --probe", sh_path(path));
        let out = timed(
            "probing the remote sluice",
            STEP_TIMEOUT,
            self.exec(&cmd, None),
        )
        .await?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or("").trim();
        if out.status == Some(0)
            && let Some(info) = ProbeInfo::parse(line)
        {
            return Ok(if info.compatible() {
                Probe::Usable(info)
            } else {
                Probe::Unusable(format!(
                    "{path} speaks protocol {}..{} (build {}), this controller {MIN_PROTO}..{PROTO}",
                    info.min_proto, info.proto, info.build
                ))
            });
        }
        let why = match (out.status, out.first_stderr_line()) {
            (Some(127), _) => format!("{path} not found"),
            (Some(126), e) => format!("{path} cannot be run: {e}"),
            (_, e) if !e.is_empty() => format!("{path} did not identify itself ({e})"),
            (s, _) => format!(
                "{path} did not identify itself (exit status {})",
                s.map_or_else(|| "unknown".into(), |s| s.to_string())
            ),
        };
        Ok(Probe::Unusable(why))
    }

    /// What the node's configured sluice (else a binary pushed earlier) says about
    /// itself: `Ok(info)` when usable, `Err(why)` when not (`sluice doctor`).
    ///
    /// Errors: the session fails.
    pub async fn probe_usable(&self) -> Result<Result<(String, ProbeInfo), String>, SshError> {
        let spec = &self.spec;
        let why = match self.probe(&spec.sluice_path).await? {
            Probe::Usable(info) => return Ok(Ok((spec.sluice_path.clone(), info))),
            Probe::Unusable(why) => why,
        };
        if spec.push_path != spec.sluice_path
            && let Probe::Usable(info) = self.probe(&spec.push_path).await?
        {
            return Ok(Ok((spec.push_path.clone(), info)));
        }
        Ok(Err(why))
    }

    /// Runs `cmd` through the remote shell and returns its exit status and stdout
    /// (lossily decoded), waiting at most the usual step timeout.
    ///
    /// Errors: the session fails or the command does not finish in time.
    pub async fn run_text(&self, cmd: &str) -> Result<(Option<u32>, String), SshError> {
        let out = timed("running a check", STEP_TIMEOUT, self.exec(cmd, None)).await?;
        Ok((
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ))
    }

    /// Copies the controller's own binary to `spec.push_path` through this session
    /// (written to a temporary name, then renamed, so a running agent is not disturbed).
    async fn push(&self) -> Result<u64, SshError> {
        let spec = &self.spec;
        let node = || spec.node.clone();
        let uname = timed("uname", STEP_TIMEOUT, self.exec("uname -sm", None)).await?;
        let uname_text = String::from_utf8_lossy(&uname.stdout).trim().to_string();
        let mut it = uname_text.split_whitespace();
        let (os, arch) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
        if !os.eq_ignore_ascii_case(std::env::consts::OS) || arch != std::env::consts::ARCH {
            return Err(SshError::Remote {
                node: node(),
                msg: format!(
                    "cannot push the controller's binary: the node is '{uname_text}', \
                     the controller {} {}; install sluice there yourself",
                    std::env::consts::OS,
                    std::env::consts::ARCH
                ),
            });
        }
        let size = std::fs::metadata(&spec.local_exe)
            .map(|m| m.len())
            .map_err(|e| SshError::Remote {
                node: node(),
                msg: format!("cannot read {}: {e}", spec.local_exe.display()),
            })?;
        let (dir, _) = spec.push_path.rsplit_once('/').unwrap_or((".", ""));
        let dest = sh_path(&spec.push_path);
        let tmp = format!("{dest}.tmp.$$");
        let cmd = format!(
            "umask 022 && mkdir -p {dir} && cat > {tmp} && chmod 0755 {tmp} && mv -f {tmp} {dest}",
            dir = sh_path(if dir.is_empty() { "/" } else { dir }),
        );
        let out = timed(
            "pushing the binary",
            PUSH_TIMEOUT,
            self.exec(&cmd, Some(&spec.local_exe)),
        )
        .await?;
        if out.status != Some(0) {
            return Err(SshError::Remote {
                node: node(),
                msg: format!(
                    "pushing the controller's binary to {} failed (exit status {:?}): {}",
                    spec.push_path,
                    out.status,
                    out.first_stderr_line()
                ),
            });
        }
        Ok(size)
    }

    /// Finds a compatible sluice on the node, pushing ours when allowed. Returns the
    /// path to run and, when something was pushed, a sentence saying what and why.
    async fn ensure_binary(&self) -> Result<(String, Option<String>), SshError> {
        let spec = &self.spec;
        let why = match self.probe(&spec.sluice_path).await? {
            Probe::Usable(info) => {
                tracing::debug!(
                    node = spec.node,
                    build = info.build,
                    path = spec.sluice_path,
                    "remote sluice found"
                );
                return Ok((spec.sluice_path.clone(), None));
            }
            Probe::Unusable(why) => why,
        };
        if spec.push_path != spec.sluice_path
            && let Probe::Usable(info) = self.probe(&spec.push_path).await?
        {
            tracing::info!(
                node = spec.node,
                build = info.build,
                "{why}; using the binary pushed earlier to {}",
                spec.push_path
            );
            return Ok((spec.push_path.clone(), None));
        }
        if !spec.push_binary {
            return Err(SshError::Remote {
                node: spec.node.clone(),
                msg: format!("no usable sluice: {why}; install it there or set push_binary = true"),
            });
        }
        let size = self.push().await?;
        match self.probe(&spec.push_path).await? {
            Probe::Usable(_) => Ok((
                spec.push_path.clone(),
                Some(format!(
                    "pushed the controller's binary ({} bytes) to {}:{} because {why}",
                    size, spec.node, spec.push_path
                )),
            )),
            Probe::Unusable(after) => Err(SshError::Remote {
                node: spec.node.clone(),
                msg: format!("pushed the controller's binary but it does not run: {after}"),
            }),
        }
    }

    /// Runs the agent on a new channel and returns the link. The session stays open as
    /// long as the returned [`AgentLink`] lives.
    pub async fn start_agent(self) -> Result<AgentLink, SshError> {
        let (path, pushed) = self.ensure_binary().await?;
        let spec = &self.spec;
        let mut cmd = format!(
            "exec {} agent --stdio --node {} --heartbeat {}",
            sh_path(&path),
            sh_quote(&spec.node),
            spec.heartbeat_secs
        );
        if let Some(s) = &spec.spool_dir {
            cmd.push_str(&format!(" --spool {}", sh_path(s)));
        }
        let ch = self.handle.channel_open_session().await?;
        ch.exec(true, cmd).await?;
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let tail = Arc::new(Mutex::new(Vec::<String>::new()));
        tokio::spawn(pump(ch, theirs, spec.node.clone(), tail.clone()));
        Ok(AgentLink {
            stream: ours,
            pushed,
            stderr_tail: tail,
            _session: self,
        })
    }
}

/// A running remote agent: a byte stream to it (the framed protocol runs over it), what
/// was done to start it, and the last lines it wrote to stderr.
pub struct AgentLink {
    pub stream: DuplexStream,
    /// Set when the controller pushed its binary to the node first.
    pub pushed: Option<String>,
    stderr_tail: Arc<Mutex<Vec<String>>>,
    _session: Session,
}

impl AgentLink {
    /// The agent's last stderr lines (and how it exited, when it did), for error
    /// messages.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }
}

/// Connects and starts the node's agent: [`connect`] then [`Session::start_agent`].
///
/// Errors: any [`SshError`].
pub async fn start_agent(spec: &LinkSpec) -> Result<AgentLink, SshError> {
    connect(spec).await?.start_agent().await
}

fn push_tail(tail: &Mutex<Vec<String>>, line: String) {
    if let Ok(mut t) = tail.lock() {
        t.push(line);
        let n = t.len();
        if n > STDERR_TAIL {
            t.drain(..n - STDERR_TAIL);
        }
    }
}

/// Moves bytes between the agent's channel and the duplex end handed to the link, and
/// logs the agent's stderr line by line.
async fn pump(
    ch: russh::Channel<client::Msg>,
    theirs: DuplexStream,
    node: String,
    tail: Arc<Mutex<Vec<String>>>,
) {
    let (mut rd, wr) = ch.split();
    let (mut from_ctld, mut to_ctld) = tokio::io::split(theirs);
    let up = async {
        let mut w = wr.make_writer();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match from_ctld.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if w.write_all(&buf[..n]).await.is_err() || w.flush().await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = wr.eof().await;
    };
    let down = async {
        let mut partial = Vec::<u8>::new();
        while let Some(msg) = rd.wait().await {
            match msg {
                ChannelMsg::Data { data } if to_ctld.write_all(&data).await.is_err() => break,
                ChannelMsg::ExtendedData { data, .. } => {
                    partial.extend_from_slice(&data);
                    while let Some(i) = partial.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = partial.drain(..=i).collect();
                        let line = String::from_utf8_lossy(&line).trim_end().to_string();
                        if !line.is_empty() {
                            tracing::info!(node, "agent: {line}");
                            push_tail(&tail, line);
                        }
                    }
                }
                ChannelMsg::ExitStatus { exit_status } => {
                    push_tail(&tail, format!("agent exited with status {exit_status}"));
                }
                ChannelMsg::ExitSignal { signal_name, .. } => {
                    push_tail(&tail, format!("agent killed by signal {signal_name:?}"));
                }
                ChannelMsg::Close => break,
                _ => {}
            }
        }
        let _ = to_ctld.shutdown().await;
    };
    // The link ends when either direction does: the controller hung up, or the agent
    // (or the connection) went away.
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Creates an ed25519 key pair for the controller: the private key at `path` (mode
/// 0600, OpenSSH format, parent directory created 0700) and the public key at
/// `<path>.pub`. Returns the public key line.
///
/// Errors: the files cannot be written, or `path` exists (never overwritten).
pub fn generate_key(path: &Path, comment: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut key = PrivateKey::random(
        &mut russh::keys::key::safe_rng(),
        russh::keys::Algorithm::Ed25519,
    )
    .map_err(|e| anyhow::anyhow!("cannot generate a key: {e}"))?;
    key.set_comment(comment);
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let private = key
        .to_openssh(russh::keys::ssh_key::LineEnding::LF)
        .map_err(|e| anyhow::anyhow!("cannot encode the key: {e}"))?;
    let public = key
        .public_key()
        .to_openssh()
        .map_err(|e| anyhow::anyhow!("cannot encode the public key: {e}"))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(private.as_bytes())?;
    f.sync_all()?;
    let pub_path = pub_path(path);
    std::fs::write(&pub_path, format!("{public}\n"))
        .with_context(|| format!("cannot write {}", pub_path.display()))?;
    Ok(public)
}

/// `<path>.pub`.
pub fn pub_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    PathBuf::from(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses() {
        let a = SshAddr::parse("root@n1:2222").unwrap();
        assert_eq!(
            (a.user.as_deref(), a.host.as_str(), a.port),
            (Some("root"), "n1", 2222)
        );
        assert_eq!(a.known_hosts_name(), "[n1]:2222");
        let b = SshAddr::parse("gpu7").unwrap();
        assert_eq!((b.user.as_deref(), b.port), (None, 22));
        assert_eq!(b.known_hosts_name(), "gpu7");
        let c = SshAddr::parse("me@[::1]:2200").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 2200));
        assert_eq!(c.to_string(), "me@[::1]:2200");
        for bad in [
            "", "@h", "u@", "h:0", "h:99999", "h:x", "u@[::1", "u@[::1]x",
        ] {
            assert!(SshAddr::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(sh_quote("/usr/bin/sluice"), "/usr/bin/sluice");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_path("~/.local/x y"), "\"$HOME\"/'.local/x y'");
        assert_eq!(sh_path("/opt/$x"), "'/opt/$x'");
    }

    #[test]
    fn probe_lines_and_compatibility() {
        let own = ProbeInfo::parse(&ProbeInfo::own_line()).unwrap();
        assert!(own.compatible());
        assert_eq!(own.arch, std::env::consts::ARCH);
        let newer = ProbeInfo {
            proto: PROTO + 5,
            min_proto: PROTO + 1,
            ..own.clone()
        };
        assert!(!newer.compatible());
        assert!(ProbeInfo::parse("bash: sluice: command not found").is_none());
        assert!(ProbeInfo::parse("sluice-agent build=1").is_none());
    }

    fn key_line(seed: u8) -> (PublicKey, String) {
        let kp = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]);
        let k = PrivateKey::from(kp);
        let p = k.public_key().clone();
        let line = p.to_openssh().unwrap();
        (p, line)
    }

    #[test]
    fn host_keys_are_checked_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let kh = dir.path().join("known_hosts");
        let (good, good_line) = key_line(1);
        let (other, _) = key_line(2);
        let addr = SshAddr::parse("root@127.0.0.1:2222").unwrap();
        // Missing file: unknown, and the message says so.
        let e = verify_host_key("n1", &addr, &good, &kh)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not known") && e.contains("does not exist"),
            "{e}"
        );
        assert!(
            e.contains(&good.fingerprint(HashAlg::Sha256).to_string()),
            "{e}"
        );
        std::fs::write(
            &kh,
            format!("# comment\n127.0.0.1 {good_line}\n[127.0.0.1]:2222 {good_line}\n"),
        )
        .unwrap();
        verify_host_key("n1", &addr, &good, &kh).unwrap();
        // The same host on another port is a different entry.
        let addr2 = SshAddr::parse("root@127.0.0.1:2223").unwrap();
        let e = verify_host_key("n1", &addr2, &good, &kh).unwrap_err();
        assert!(matches!(e, SshError::UnknownHostKey(_)), "{e}");
        // Another key of the same type: mismatch naming the line and both fingerprints.
        let e = verify_host_key("n1", &addr, &other, &kh).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(&e, SshError::HostKeyMismatch(m) if m.line == 3),
            "{msg}"
        );
        assert!(msg.contains("MISMATCH") && msg.contains("node n1"), "{msg}");
        assert!(msg.contains(&other.fingerprint(HashAlg::Sha256).to_string()));
        assert!(msg.contains(&good.fingerprint(HashAlg::Sha256).to_string()));
    }

    #[test]
    fn generated_keys_load_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ssh/id_ed25519");
        let public = generate_key(&p, "test@here").unwrap();
        assert!(public.starts_with("ssh-ed25519 "), "{public}");
        let k = load_identity(&p).unwrap();
        assert_eq!(k.public_key().to_openssh().unwrap(), public);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            std::fs::read_to_string(pub_path(&p)).unwrap().trim(),
            public
        );
        // Never overwritten.
        assert!(generate_key(&p, "again").is_err());
        assert_eq!(
            load_identity(&p)
                .unwrap()
                .public_key()
                .to_openssh()
                .unwrap(),
            public
        );
    }
}
