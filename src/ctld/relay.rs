//! Front-end connections relayed by a node's agent (issue #7: "front-ends inside a job on
//! any node work through the agent's local relay socket"). A remote node has no path to
//! the controller's Unix socket, so its agent listens on a socket of its own, named in
//! the job's `SLUICE_SOCKET`, and tunnels each connection's bytes over the agent link.
//! Here each tunnelled connection becomes an in-memory stream served exactly like a
//! connection to the controller's socket, with the peer credentials the agent read.

use super::Msg;
use super::conns::ConnLimits;
use crate::proto::{FromAgent, ToAgent};
use crate::transport::PeerCred;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Bytes buffered per direction of one relayed connection.
const BUFFER: usize = 64 * 1024;

/// The relayed connections of one agent link.
pub struct Relays {
    /// Connection → bytes for its server side (closed channel = front-end gone).
    conns: HashMap<u64, mpsc::UnboundedSender<Vec<u8>>>,
    out: mpsc::UnboundedSender<ToAgent>,
    /// The controller's connection bounds, which relayed connections count against.
    limits: Arc<ConnLimits>,
}

impl Relays {
    /// No connections yet; what the relayed servers write comes out of the receiver as
    /// messages for the agent.
    pub fn new(limits: Arc<ConnLimits>) -> (Relays, mpsc::UnboundedReceiver<ToAgent>) {
        let (out, rx) = mpsc::unbounded_channel();
        (
            Relays {
                conns: HashMap::new(),
                out,
                limits,
            },
            rx,
        )
    }

    /// Handles a relay message from the agent and returns `None`; any other message is
    /// given back for the actor. Must run inside a tokio runtime.
    pub fn intercept(&mut self, msg: FromAgent, tx: &mpsc::Sender<Msg>) -> Option<FromAgent> {
        match msg {
            FromAgent::RelayOpen { conn, uid, gid } => {
                self.open(
                    conn,
                    PeerCred {
                        uid,
                        gid,
                        pid: None,
                    },
                    tx.clone(),
                );
                None
            }
            FromAgent::Relay { conn, bytes } => {
                if let Some(c) = self.conns.get(&conn)
                    && c.send(bytes).is_err()
                {
                    self.conns.remove(&conn);
                }
                None
            }
            FromAgent::RelayClose { conn } => {
                self.conns.remove(&conn);
                None
            }
            other => Some(other),
        }
    }

    fn open(&mut self, conn: u64, cred: PeerCred, tx: mpsc::Sender<Msg>) {
        let (ours, theirs) = tokio::io::duplex(BUFFER);
        let (mut rd, mut wr) = tokio::io::split(ours);
        let (in_tx, mut in_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        self.conns.insert(conn, in_tx);
        // The server: the same code as for a local connection.
        let limits = self.limits.clone();
        tokio::spawn(async move {
            if let Err(e) = super::serve_stream(theirs, cred, tx, true, &limits).await {
                tracing::debug!(conn, "relayed client connection: {e}");
            }
        });
        // Front-end → server.
        tokio::spawn(async move {
            while let Some(b) = in_rx.recv().await {
                if wr.write_all(&b).await.is_err() {
                    return;
                }
            }
            let _ = wr.shutdown().await;
        });
        // Server → front-end, then the close.
        let out = self.out.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; BUFFER];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let bytes = buf[..n].to_vec();
                        if out.send(ToAgent::Relay { conn, bytes }).is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = out.send(ToAgent::RelayClose { conn });
        });
    }
}
