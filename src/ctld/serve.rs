//! Connection serving: the listener, one task per front-end connection (requests, or
//! one step stream) and one per agent link, each passing [`Msg`]s to the actor.

use super::actor::Msg;
use super::{conns, names, relay};
use crate::model::step::StepSpec;
use crate::proto::{
    Framed, FromAgent, Request, Response, Role, SlurmError, StepEvent, StepInput, ToAgent,
};
use crate::transport::{self, PeerCred};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Tokens naming step streams (one per StepLaunch connection).
static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Serves front-end connections from `listener` until the process ends, within
/// `limits`: a connection past them is told why, and the log names its user.
pub(super) fn spawn_accept(
    listener: tokio::net::UnixListener,
    tx: mpsc::Sender<Msg>,
    limits: Arc<conns::ConnLimits>,
) {
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let tx = tx.clone();
                    let limits = limits.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_client(stream, tx, limits).await {
                            tracing::debug!("client connection: {e}");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
}

/// How many front-end connections the controller serves at once: its file descriptor
/// limit, raised to the hard limit (at most 65,536), less a reserve for its database,
/// agents and logs.
pub(super) fn connection_cap() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const RESERVE: u64 = 128;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024 - RESERVE as usize;
    };
    let want = hard.min(65_536).max(soft);
    let soft = if want > soft && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        want
    } else {
        soft
    };
    soft.saturating_sub(RESERVE).max(16) as usize
}

/// The user name of `uid` as the OS (NSS) gives it now; `None` when it has none.
/// Looked up for every request, so that permission checks by name (coordinators,
/// AdminLevel) follow a user who is renamed or removed; a cached answer ([`names`]) is
/// used at once, and a lookup that may block runs off the runtime's workers.
async fn caller_name(uid: u32) -> Option<String> {
    if let Some(hit) = names::cached_user_name(uid) {
        return hit;
    }
    tokio::task::spawn_blocking(move || names::user_name(uid))
        .await
        .ok()
        .flatten()
}

async fn serve_client(
    stream: tokio::net::UnixStream,
    tx: mpsc::Sender<Msg>,
    limits: Arc<conns::ConnLimits>,
) -> anyhow::Result<()> {
    let cred = transport::peer_cred(&stream)?;
    serve_stream(stream, cred, tx, false, &limits).await
}

/// Serves one front-end connection whose peer is `cred`: the controller's own socket, or
/// a connection relayed by a node's agent ([`relay`], `relayed`).
pub(super) async fn serve_stream<S>(
    stream: S,
    cred: PeerCred,
    tx: mpsc::Sender<Msg>,
    relayed: bool,
    limits: &Arc<conns::ConnLimits>,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut framed = Framed::with_limits(stream, limits.frame_limits(cred.uid));
    let _guard = match limits.admit(cred.uid) {
        Ok(g) => g,
        Err(why) => {
            tracing::warn!(uid = cred.uid, pid = ?cred.pid, relayed, "connection refused: {why}");
            // Tell the front-end, within a bound: its hello, then its first request.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                framed.handshake(Role::Controller, &[Role::Client]).await?;
                let _ = framed.recv::<Request>().await?;
                framed
                    .send(&Response::Error(SlurmError::Other(format!(
                        "controller refused the connection: {why}"
                    ))))
                    .await
            })
            .await;
            return Ok(());
        }
    };
    framed.handshake(Role::Controller, &[Role::Client]).await?;
    // Allocation-only jobs this connection owns (cancelled if it closes first).
    let mut owned: Vec<u32> = Vec::new();
    let res = serve_requests(&mut framed, cred, &tx, &mut owned, relayed).await;
    if !owned.is_empty() {
        let _ = tx.send(Msg::OwnerGone { cred, jobs: owned }).await;
    }
    res
}

async fn serve_requests<S>(
    framed: &mut Framed<S>,
    cred: PeerCred,
    tx: &mpsc::Sender<Msg>,
    owned: &mut Vec<u32>,
    relayed: bool,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let req: Request = match framed.recv().await {
            Ok(r) => r,
            Err(crate::proto::ProtoError::Closed) => return Ok(()),
            Err(e) => {
                if matches!(
                    e,
                    crate::proto::ProtoError::SlowPeer(_) | crate::proto::ProtoError::Io(_)
                ) {
                    tracing::warn!(uid = cred.uid, pid = ?cred.pid, "client connection closed: {e}");
                }
                // Answer garbage with an error rather than hanging up silently.
                let _ = framed
                    .send(&Response::Error(SlurmError::Other(format!(
                        "bad request: {e}"
                    ))))
                    .await;
                return Err(e.into());
            }
        };
        if let Request::StepLaunch { job_id, spec, het } = req {
            let specs = std::iter::once(*spec).chain(het).collect();
            return serve_step(
                framed,
                cred,
                tx,
                StreamStart::Launch { job_id, specs },
                relayed,
            )
            .await;
        }
        if let Request::StepAttach {
            job_id,
            step_id,
            received,
        } = req
        {
            let start = StreamStart::Attach {
                job_id,
                step_id,
                received,
            };
            return serve_step(framed, cred, tx, start, relayed).await;
        }
        let releasing = match &req {
            Request::ReleaseAllocation { job_id, .. } => Some(*job_id),
            _ => None,
        };
        let allocating = matches!(req, Request::Allocate { detach: false, .. });
        let (rtx, rrx) = oneshot::channel();
        let user = caller_name(cred.uid).await;
        tx.send(Msg::Client {
            cred,
            user,
            req,
            reply: rtx,
        })
        .await
        .map_err(|_| anyhow::anyhow!("controller is stopping"))?;
        let resp = rrx
            .await
            .map_err(|_| anyhow::anyhow!("controller is stopping"))?;
        match (&resp, allocating, releasing) {
            (Response::Allocation(j), true, _) => owned.push(j.id),
            (_, _, Some(id)) => owned.retain(|&o| o != id),
            _ => {}
        }
        framed.send(&resp).await?;
    }
}

/// How a step stream begins.
enum StreamStart {
    Launch {
        job_id: u32,
        specs: Vec<StepSpec>,
    },
    Attach {
        job_id: u32,
        step_id: u32,
        received: u64,
    },
}

/// A step stream: events from the actor to srun, input from srun to the actor, until
/// the step is done or either side goes away.
async fn serve_step<S>(
    framed: &mut Framed<S>,
    cred: PeerCred,
    tx: &mpsc::Sender<Msg>,
    start: StreamStart,
    relayed: bool,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (etx, mut erx) = mpsc::unbounded_channel::<StepEvent>();
    let stopping = || anyhow::anyhow!("controller is stopping");
    let token = match start {
        StreamStart::Launch { job_id, specs } => {
            let token = NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tx.send(Msg::StepLaunch {
                cred,
                job_id,
                specs,
                token,
                tx: etx,
                relayed,
            })
            .await
            .map_err(|_| stopping())?;
            token
        }
        StreamStart::Attach {
            job_id,
            step_id,
            received,
        } => {
            let (rtx, rrx) = oneshot::channel();
            tx.send(Msg::StepAttach {
                cred,
                job_id,
                step_id,
                received,
                tx: etx,
                reply: rtx,
            })
            .await
            .map_err(|_| stopping())?;
            match rrx.await.map_err(|_| stopping())? {
                Some(t) => t,
                None => {
                    let e = SlurmError::Other(format!(
                        "no broken stream of step {job_id}.{step_id} to re-attach"
                    ));
                    framed.send(&StepEvent::Error(e)).await?;
                    return Ok(());
                }
            }
        }
    };
    let res: anyhow::Result<()> = loop {
        tokio::select! {
            ev = erx.recv() => match ev {
                Some(ev) => {
                    let last = matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
                    if let Err(e) = framed.send(&ev).await {
                        break Err(e.into());
                    }
                    if last {
                        break Ok(());
                    }
                }
                None => break Ok(()),
            },
            m = framed.recv::<StepInput>() => match m {
                Ok(input) => {
                    if tx.send(Msg::StepInput { token, input }).await.is_err() {
                        break Ok(());
                    }
                }
                Err(crate::proto::ProtoError::Closed) => break Ok(()),
                Err(e) => break Err(e.into()),
            },
        }
    };
    let _ = tx.send(Msg::StepClosed { token }).await;
    res
}

/// Serves one agent link: registration first, then events both ways until it breaks.
/// `expect` is the node the link was opened for (a remote agent must register as it).
///
/// Errors (before registration only): the handshake fails, the agent sends something
/// other than its registration, or registers as another node. A registered link that
/// ends returns `Ok` after telling the actor.
pub(super) async fn agent_link<S>(
    mut link: Framed<S>,
    tx: mpsc::Sender<Msg>,
    expect: Option<String>,
    limits: Arc<conns::ConnLimits>,
) -> anyhow::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    link.handshake(Role::Controller, &[Role::Agent])
        .await
        .context("handshake failed")?;
    let reg: FromAgent = match link.recv().await {
        Ok(r @ FromAgent::Register { .. }) => r,
        Ok(other) => anyhow::bail!("agent did not register first: {other:?}"),
        Err(e) => anyhow::bail!("registration failed: {e}"),
    };
    let FromAgent::Register { node, .. } = &reg else {
        anyhow::bail!("agent did not register first");
    };
    let node = node.clone();
    if let Some(want) = expect
        && want != node
    {
        anyhow::bail!("agent registered as node '{node}', expected '{want}'");
    }
    let (atx, mut arx) = mpsc::unbounded_channel::<ToAgent>();
    if tx
        .send(Msg::AgentUp {
            node: node.clone(),
            reg,
            tx: atx,
        })
        .await
        .is_err()
    {
        return Ok(());
    }
    // Relayed front-end connections have their own outgoing queue, so that the link
    // still ends when the actor drops `atx`.
    let (mut relays, mut relay_out) = relay::Relays::new(limits);
    loop {
        tokio::select! {
            m = link.recv::<FromAgent>() => match m {
                Ok(msg) => {
                    let Some(msg) = relays.intercept(msg, &tx) else {
                        continue;
                    };
                    if tx.send(Msg::Agent { node: node.clone(), msg }).await.is_err() {
                        return Ok(());
                    }
                }
                Err(e) => {
                    tracing::warn!(node, "agent link: {e}");
                    break;
                }
            },
            Some(out) = relay_out.recv() => {
                if let Err(e) = link.send(&out).await {
                    tracing::warn!(node, "agent link: {e}");
                    break;
                }
            }
            out = arx.recv() => match out {
                Some(msg) => {
                    if let Err(e) = link.send(&msg).await {
                        tracing::warn!(node, "agent link: {e}");
                        break;
                    }
                }
                // The actor dropped the link (the node timed out).
                None => break,
            },
        }
    }
    let _ = tx.send(Msg::AgentDown { node }).await;
    Ok(())
}
