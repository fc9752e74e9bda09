//! The agent's relay socket (issue #7): front-ends run inside a job on a remote node
//! (`srun` in a batch script, `squeue`, `scontrol`…) cannot reach the controller's Unix
//! socket, so the agent listens on one of its own, names it in the job's environment as
//! `SLUICE_SOCKET`, and tunnels each connection's bytes over its link to the controller
//! ([`FromAgent::RelayOpen`]/[`FromAgent::Relay`]/[`FromAgent::RelayClose`] one way,
//! [`ToAgent::Relay`]/[`ToAgent::RelayClose`] the other). The caller's uid and gid are
//! read here with SO_PEERCRED and attested to the controller, which trusts the agent as
//! Slurm trusts slurmd.

use crate::proto::{FromAgent, ToAgent};
use anyhow::Context;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

/// The environment variable that points front-ends at a relay (or any controller
/// socket); `cli::client` connects there first and never auto-starts a controller.
pub const SOCKET_VAR: &str = crate::config::RELAY_SOCKET_VAR;

/// Largest chunk read from a front-end at once, bytes.
const CHUNK: usize = 64 * 1024;

/// The listening socket and the connections being relayed.
pub struct Relay {
    listener: UnixListener,
    path: PathBuf,
    next: u64,
    /// Connection → bytes from the controller for it.
    conns: HashMap<u64, mpsc::UnboundedSender<Vec<u8>>>,
}

impl Relay {
    /// Listens on `path`, replacing a stale socket from an earlier agent. The socket is
    /// open to every local user (each connection carries its caller's credentials); its
    /// directory is created traversable by all.
    ///
    /// Errors: the directory or socket cannot be created.
    pub fn bind(path: &Path) -> anyhow::Result<Relay> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot set the mode of {}", dir.display()))?;
        }
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)
            .with_context(|| format!("cannot listen on relay socket {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
            .with_context(|| format!("cannot set the mode of {}", path.display()))?;
        tracing::info!(socket = %path.display(), "relaying front-ends in jobs to the controller");
        Ok(Relay {
            listener,
            path: path.to_path_buf(),
            next: 1,
            conns: HashMap::new(),
        })
    }

    /// Starts relaying a new connection: announces it with its caller's credentials and
    /// forwards what the front-end writes until it closes. Must run inside a tokio
    /// runtime.
    pub fn serve(&mut self, stream: UnixStream, etx: &mpsc::UnboundedSender<FromAgent>) {
        let cred = match stream.peer_cred() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("relay: cannot read the caller's credentials: {e}");
                return;
            }
        };
        let conn = self.next;
        self.next += 1;
        let _ = etx.send(FromAgent::RelayOpen {
            conn,
            uid: cred.uid(),
            gid: cred.gid(),
        });
        let (mut rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        self.conns.insert(conn, tx);
        tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if wr.write_all(&b).await.is_err() {
                    break;
                }
            }
            let _ = wr.shutdown().await;
        });
        let etx = etx.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let bytes = buf[..n].to_vec();
                        if etx.send(FromAgent::Relay { conn, bytes }).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = etx.send(FromAgent::RelayClose { conn });
        });
    }

    /// Delivers a relay message from the controller and returns `None`; any other
    /// message is given back.
    pub fn intercept(&mut self, msg: ToAgent) -> Option<ToAgent> {
        match msg {
            ToAgent::Relay { conn, bytes } => {
                if let Some(c) = self.conns.get(&conn)
                    && c.send(bytes).is_err()
                {
                    self.conns.remove(&conn);
                }
                None
            }
            ToAgent::RelayClose { conn } => {
                // Dropping the sender lets the writer finish and close the socket.
                self.conns.remove(&conn);
                None
            }
            other => Some(other),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The next connection on `relay`'s socket; never resolves without a relay (so it can
/// sit in a `select!`), nor on an accept error (logged).
pub async fn accept(relay: Option<&Relay>) -> Option<UnixStream> {
    let Some(r) = relay else {
        return std::future::pending().await;
    };
    match r.listener.accept().await {
        Ok((s, _)) => Some(s),
        Err(e) => {
            tracing::warn!("relay accept failed: {e}");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            None
        }
    }
}
