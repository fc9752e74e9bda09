//! How a front-end reaches the controller: a Unix socket, identity by SO_PEERCRED.
//! In personal mode a missing controller is started in the background on first use
//! (DESIGN.md §1); the controller's lock on its state directory makes a race of two
//! auto-starts harmless.

use crate::config::{Config, Mode};
use crate::proto::codec::SyncFramed;
use crate::proto::{ProtoError, Request, Response, Role, SlurmError};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Why a front-end could not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nobody listens on the socket (and, in personal mode, starting one failed).
    #[error("Unable to contact slurm controller (connect failure)")]
    Unreachable { hint: Option<String> },
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("Socket timed out on send/recv operation ({0})")]
    Proto(#[from] ProtoError),
}

impl ClientError {
    /// A line saying how to fix the problem, when there is one to give.
    pub fn hint(&self) -> Option<&str> {
        match self {
            ClientError::Unreachable { hint } => hint.as_deref(),
            _ => None,
        }
    }
}

/// A connection to the controller.
pub struct Client {
    framed: SyncFramed<UnixStream>,
}

/// How long a front-end waits for an answer before giving up.
const RECV_TIMEOUT: Duration = Duration::from_secs(60);

impl Client {
    /// Loads the configuration and connects, starting a personal controller if needed.
    pub fn connect() -> Result<(Client, Config), ClientError> {
        let cfg = Config::load()?;
        let c = Client::connect_with(&cfg)?;
        Ok((c, cfg))
    }

    /// Connects using `cfg`; in personal mode starts the controller when none answers.
    pub fn connect_with(cfg: &Config) -> Result<Client, ClientError> {
        match Client::try_connect(cfg) {
            Ok(c) => return Ok(c),
            Err(e) if cfg.mode == Mode::System => {
                return Err(ClientError::Unreachable {
                    hint: Some(format!(
                        "sluice: no controller answers on {} ({e}); start it as root with `sluice controller` (config {})",
                        cfg.socket.display(),
                        cfg.source
                            .as_ref()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    )),
                });
            }
            Err(_) => {}
        }
        spawn_personal_controller(cfg).map_err(|e| ClientError::Unreachable {
            hint: Some(format!(
                "sluice: could not start a personal controller: {e}"
            )),
        })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Client::try_connect(cfg) {
                Ok(c) => return Ok(c),
                Err(e) if Instant::now() >= deadline => {
                    return Err(ClientError::Unreachable {
                        hint: Some(format!(
                            "sluice: started a personal controller but it does not answer on {} ({e}); see {}",
                            cfg.socket.display(),
                            cfg.state_dir.join("controller.log").display()
                        )),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    fn try_connect(cfg: &Config) -> Result<Client, ClientError> {
        if cfg.mode == Mode::Personal {
            // Never talk to a socket another user could have planted.
            if let Some(dir) = cfg.socket.parent() {
                crate::transport::check_socket_dir(dir).map_err(|e| ClientError::Unreachable {
                    hint: Some(e.to_string()),
                })?;
            }
        }
        let s = UnixStream::connect(&cfg.socket).map_err(|e| ClientError::Unreachable {
            hint: Some(e.to_string()),
        })?;
        if cfg.mode == Mode::Personal {
            let me = nix::unistd::geteuid().as_raw();
            let peer = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
                .map(|c| c.uid())
                .map_err(|e| ClientError::Unreachable {
                    hint: Some(format!("cannot identify the controller: {e}")),
                })?;
            if peer != me && peer != 0 {
                return Err(ClientError::Unreachable {
                    hint: Some(format!(
                        "the process on {} runs as uid {peer}, not as you (uid {me}); refusing to talk to it",
                        cfg.socket.display()
                    )),
                });
            }
        }
        s.set_read_timeout(Some(RECV_TIMEOUT)).ok();
        let mut framed = SyncFramed::new(s);
        framed.handshake(Role::Client, &[Role::Controller])?;
        Ok(Client { framed })
    }

    /// The connection itself, for a step stream (no read timeout: a step may be quiet
    /// for as long as it likes).
    pub fn into_stream(self) -> UnixStream {
        let s = self.framed.into_inner();
        let _ = s.set_read_timeout(None);
        s
    }

    /// Like [`Client::request`] for a request whose answer may take arbitrarily long
    /// (waiting for a job to start or end): no read timeout.
    pub fn request_waiting(&mut self, req: &Request) -> Result<Response, ClientError> {
        let _ = self.framed.get_ref().set_read_timeout(None);
        let r = self.request(req);
        let _ = self.framed.get_ref().set_read_timeout(Some(RECV_TIMEOUT));
        r
    }

    /// One request, one response. A controller-side error arrives as `Ok(Response::Error)`.
    pub fn request(&mut self, req: &Request) -> Result<Response, ClientError> {
        self.framed.send(req)?;
        Ok(self.framed.recv()?)
    }
}

/// Starts `sluice controller` detached from this process (new session, output to the
/// controller log in the state directory).
fn spawn_personal_controller(cfg: &Config) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(&cfg.state_dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cfg.state_dir.join("controller.log"))?;
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0("sluice")
        .arg("controller")
        .arg("--detached")
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let mut child = cmd.spawn()?;
    // Reap it in the background if it exits early (lost a start race); the grandchild
    // detaches itself by becoming a session leader in `ctld::cli_main`.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

/// Turns a controller error into Slurm's text, or a transport problem into the text
/// Slurm front-ends print for it.
pub fn error_text(e: &SlurmError) -> String {
    e.to_string()
}
