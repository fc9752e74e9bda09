//! Framing: a 4-byte big-endian length, then a MessagePack body (named fields).
//! The async [`Framed`] serves daemons; [`SyncFramed`] serves front-ends, which make one
//! or two round trips and should not pay for a runtime.

use super::{Hello, MAX_FRAME, Role};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// Errors of the wire layer.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error("connection closed by peer")]
    Closed,
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed message: {0}")]
    Decode(String),
    #[error("cannot encode message: {0}")]
    Encode(String),
    #[error(
        "peer speaks protocol version {peer} (sluice {build}); this build supports {min}..={max}"
    )]
    Version {
        peer: u32,
        min: u32,
        max: u32,
        build: String,
    },
    #[error("unexpected peer role {0}")]
    Role(String),
    /// A frame began but its rest did not arrive within the deadline.
    #[error("peer sent part of a message and nothing more for {0:?}")]
    SlowPeer(Duration),
}

/// Encodes a message body.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    rmp_serde::to_vec_named(msg).map_err(|e| ProtoError::Encode(e.to_string()))
}

/// Decodes a message body; never panics on arbitrary bytes.
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<T, ProtoError> {
    rmp_serde::from_slice(buf).map_err(|e| ProtoError::Decode(e.to_string()))
}

/// One message as it goes on the wire: the 4-byte big-endian length, then the body.
pub fn frame<T: Serialize>(msg: &T) -> Result<Vec<u8>, ProtoError> {
    let body = encode(msg)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| {
            ProtoError::Encode(format!("message of {} bytes is too large", body.len()))
        })?;
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    Ok(buf)
}

/// A byte pool shared by connections: the input they hold in frames not yet complete.
/// A connection takes a frame's whole length from the pool when its header arrives and
/// gives it back when the frame is complete or the connection goes away, so that peers
/// together can never make the process buffer more than the pool's size.
#[derive(Debug)]
pub struct Budget {
    /// The pool's size, in bytes.
    cap: usize,
    used: std::sync::atomic::AtomicUsize,
}

impl Budget {
    /// A pool of `cap` bytes.
    pub fn new(cap: usize) -> Budget {
        Budget {
            cap,
            used: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes when they are free; `false` (and nothing taken) otherwise.
    pub fn try_take(&self, n: usize) -> bool {
        use std::sync::atomic::Ordering;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.cap)
            })
            .is_ok()
    }

    /// Gives back `n` bytes taken by [`Budget::try_take`].
    pub fn give(&self, n: usize) {
        self.used.fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// Bytes taken now.
    pub fn used(&self) -> usize {
        self.used.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// What one connection may make its reader buffer: the largest frame, the pools its
/// incomplete frames draw from, and how long a started frame may take to arrive.
/// [`Limits::default`] is what daemons use among themselves: [`MAX_FRAME`], no pool,
/// no deadline.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest frame body accepted, in bytes.
    pub max_frame: usize,
    /// Pools every incomplete frame of this connection must fit in (e.g. the peer's
    /// user's and the whole process's); a frame that does not fit ends the connection.
    pub budgets: Vec<Arc<Budget>>,
    /// Once a frame's first byte has arrived, the rest must follow within this time;
    /// `None`: no deadline.
    pub frame_deadline: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_frame: MAX_FRAME,
            budgets: Vec::new(),
            frame_deadline: None,
        }
    }
}

/// A length-prefixed codec (4-byte big-endian length, then the body) that checks each
/// frame's length against [`Limits`] before buffering any of it.
struct FrameCodec {
    limits: Limits,
    /// The body length of the frame being received and taken from the budgets.
    taken: Option<usize>,
    /// Milliseconds since `epoch` when the frame being received began, 0 when none is:
    /// read by [`Framed::recv`] while the codec is borrowed by the stream.
    partial_since: Arc<AtomicU64>,
    epoch: Instant,
}

impl FrameCodec {
    fn release(&mut self) {
        if let Some(n) = self.taken.take() {
            for b in &self.limits.budgets {
                b.give(n);
            }
        }
    }

    fn mark_partial(&self, partial: bool) {
        let v = if partial {
            // Never 0, which means "no frame under way".
            (self.epoch.elapsed().as_millis() as u64).max(1)
        } else {
            0
        };
        if !partial || self.partial_since.load(Ordering::Relaxed) == 0 {
            self.partial_since.store(v, Ordering::Relaxed);
        }
    }
}

impl Drop for FrameCodec {
    fn drop(&mut self) {
        self.release();
    }
}

impl tokio_util::codec::Decoder for FrameCodec {
    type Item = bytes::BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut bytes::BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        use bytes::Buf;
        if src.len() < 4 {
            self.mark_partial(!src.is_empty());
            return Ok(None);
        }
        let len = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
        if len > self.limits.max_frame {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "frame of {len} bytes is larger than the {} bytes allowed",
                    self.limits.max_frame
                ),
            ));
        }
        if self.taken.is_none() {
            let mut got = 0;
            while got < self.limits.budgets.len() && self.limits.budgets[got].try_take(len) {
                got += 1;
            }
            if got < self.limits.budgets.len() {
                for b in &self.limits.budgets[..got] {
                    b.give(len);
                }
                return Err(std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!("frame of {len} bytes: too much input already pending"),
                ));
            }
            self.taken = Some(len);
        }
        if src.len() < 4 + len {
            src.reserve(4 + len - src.len());
            self.mark_partial(true);
            return Ok(None);
        }
        src.advance(4);
        let body = src.split_to(len);
        self.release();
        self.mark_partial(false);
        self.mark_partial(!src.is_empty());
        Ok(Some(body))
    }
}

impl tokio_util::codec::Encoder<bytes::Bytes> for FrameCodec {
    type Error = std::io::Error;

    fn encode(&mut self, body: bytes::Bytes, dst: &mut bytes::BytesMut) -> Result<(), Self::Error> {
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&n| n as usize <= MAX_FRAME)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("message of {} bytes is too large", body.len()),
                )
            })?;
        dst.reserve(4 + body.len());
        dst.extend_from_slice(&len.to_be_bytes());
        dst.extend_from_slice(&body);
        Ok(())
    }
}

/// An async framed connection over any byte stream.
pub struct Framed<S> {
    inner: tokio_util::codec::Framed<S, FrameCodec>,
    partial_since: Arc<AtomicU64>,
    epoch: Instant,
    frame_deadline: Option<Duration>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Framed<S> {
    /// Wraps a stream, with the limits daemons use among themselves.
    pub fn new(stream: S) -> Framed<S> {
        Framed::with_limits(stream, Limits::default())
    }

    /// Wraps a stream whose peer may be hostile: frames past `limits` end the connection
    /// with an error from [`Framed::recv`].
    pub fn with_limits(stream: S, limits: Limits) -> Framed<S> {
        let partial_since = Arc::new(AtomicU64::new(0));
        let epoch = Instant::now();
        let frame_deadline = limits.frame_deadline;
        let codec = FrameCodec {
            limits,
            taken: None,
            partial_since: partial_since.clone(),
            epoch,
        };
        Framed {
            inner: tokio_util::codec::Framed::new(stream, codec),
            partial_since,
            epoch,
            frame_deadline,
        }
    }

    /// Sends one message.
    pub async fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), ProtoError> {
        let body = encode(msg)?;
        self.inner.send(bytes::Bytes::from(body)).await?;
        Ok(())
    }

    /// Receives one message; `Closed` at a clean end of stream, `SlowPeer` when a frame
    /// began but did not complete within the limits' deadline.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> Result<T, ProtoError> {
        let next = match self.frame_deadline {
            None => self.inner.next().await,
            Some(limit) => loop {
                // Waiting for a frame that has not begun takes no deadline (srun holds
                // its connection while its step runs); a begun one must finish in time.
                let since = self.partial_since.load(Ordering::Relaxed);
                let wait = if since == 0 {
                    limit
                } else {
                    let elapsed = Duration::from_millis(
                        (self.epoch.elapsed().as_millis() as u64).saturating_sub(since),
                    );
                    if elapsed >= limit {
                        return Err(ProtoError::SlowPeer(limit));
                    }
                    limit - elapsed
                };
                tokio::select! {
                    r = self.inner.next() => break r,
                    _ = tokio::time::sleep(wait) => {}
                }
            },
        };
        match next {
            Some(Ok(buf)) => decode(&buf),
            Some(Err(e)) => Err(e.into()),
            None => Err(ProtoError::Closed),
        }
    }

    /// Exchanges hellos: sends ours, checks theirs against `expect`.
    pub async fn handshake(&mut self, me: Role, expect: &[Role]) -> Result<Hello, ProtoError> {
        self.send(&Hello::new(me)).await?;
        let peer: Hello = self.recv().await?;
        peer.check(expect)?;
        Ok(peer)
    }
}

/// A blocking framed connection for front-ends.
pub struct SyncFramed<S> {
    stream: S,
}

impl<S: Read + Write> SyncFramed<S> {
    /// Wraps a stream.
    pub fn new(stream: S) -> SyncFramed<S> {
        SyncFramed { stream }
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), ProtoError> {
        self.send_framed(&frame(msg)?)
    }

    /// Sends bytes made of whole frames (see [`frame`]) in one write, so that several
    /// messages reach the peer together.
    pub fn send_framed(&mut self, frames: &[u8]) -> Result<(), ProtoError> {
        self.stream.write_all(frames)?;
        self.stream.flush()?;
        Ok(())
    }

    /// Receives one message.
    pub fn recv<T: DeserializeOwned>(&mut self) -> Result<T, ProtoError> {
        let mut len = [0u8; 4];
        if let Err(e) = self.stream.read_exact(&mut len) {
            return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                ProtoError::Closed
            } else {
                e.into()
            });
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(ProtoError::Decode(format!(
                "frame of {len} bytes is too large"
            )));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        decode(&body)
    }

    /// The underlying stream, borrowed.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The underlying stream.
    pub fn into_inner(self) -> S {
        self.stream
    }

    /// Sends our hello and checks the peer's (sent before ours is read, so one round trip).
    pub fn handshake(&mut self, me: Role, expect: &[Role]) -> Result<Hello, ProtoError> {
        self.send(&Hello::new(me))?;
        let peer: Hello = self.recv()?;
        peer.check(expect)?;
        Ok(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{JobFilter, Request, Response};

    #[test]
    fn garbage_does_not_panic() {
        for bytes in [&b""[..], b"\xff\xff", b"\x93\x01", b"hello world"] {
            assert!(decode::<Request>(bytes).is_err());
        }
    }

    #[test]
    fn sync_round_trip() {
        let mut buf = Vec::new();
        {
            let mut f = SyncFramed::new(std::io::Cursor::new(&mut buf));
            f.send(&Request::Jobs(JobFilter::default())).unwrap();
        }
        let mut f = SyncFramed::new(std::io::Cursor::new(buf));
        let r: Request = f.recv().unwrap();
        assert_eq!(r, Request::Jobs(JobFilter::default()));
    }

    #[test]
    fn version_window_is_enforced() {
        let mut h = Hello::new(Role::Client);
        assert!(h.check(&[Role::Client]).is_ok());
        assert!(h.check(&[Role::Agent]).is_err());
        h.proto = super::super::PROTO + 1;
        let e = h.check(&[Role::Client]).unwrap_err().to_string();
        assert!(e.contains("protocol version"), "{e}");
    }

    #[tokio::test]
    async fn async_round_trip() {
        let (a, b) = tokio::io::duplex(1024);
        let mut a = Framed::new(a);
        let mut b = Framed::new(b);
        a.send(&Response::Ok).await.unwrap();
        let r: Response = b.recv().await.unwrap();
        assert_eq!(r, Response::Ok);
        drop(a);
        assert!(matches!(
            b.recv::<Response>().await,
            Err(ProtoError::Closed)
        ));
    }

    fn small_limits(max_frame: usize, pool: usize) -> (Limits, Arc<Budget>) {
        let b = Arc::new(Budget::new(pool));
        (
            Limits {
                max_frame,
                budgets: vec![b.clone()],
                frame_deadline: Some(Duration::from_secs(30)),
            },
            b,
        )
    }

    #[tokio::test]
    async fn oversized_frames_end_the_connection_before_any_is_buffered() {
        use tokio::io::AsyncWriteExt;
        let (mut a, b) = tokio::io::duplex(1024);
        let (limits, pool) = small_limits(1000, 10_000);
        let mut b = Framed::with_limits(b, limits);
        a.write_all(&5000u32.to_be_bytes()).await.unwrap();
        let e = b.recv::<Response>().await.unwrap_err().to_string();
        assert!(e.contains("5000 bytes is larger than the 1000"), "{e}");
        assert_eq!(pool.used(), 0);
    }

    #[tokio::test]
    async fn pending_input_is_drawn_from_the_pool_and_given_back() {
        use tokio::io::AsyncWriteExt;
        let (limits, pool) = small_limits(1 << 20, 100);
        // A frame that does not fit the pool is refused.
        let (mut a, b) = tokio::io::duplex(1024);
        let mut b = Framed::with_limits(b, limits.clone());
        a.write_all(&500u32.to_be_bytes()).await.unwrap();
        let e = b.recv::<Response>().await.unwrap_err().to_string();
        assert!(e.contains("too much input already pending"), "{e}");
        assert_eq!(pool.used(), 0);
        // One that fits holds its length while it arrives, and gives it back after.
        let (a, b) = tokio::io::duplex(1024);
        let mut a = Framed::new(a);
        let mut b = Framed::with_limits(b, limits.clone());
        a.send(&Response::Ok).await.unwrap();
        assert_eq!(b.recv::<Response>().await.unwrap(), Response::Ok);
        assert_eq!(pool.used(), 0);
        // A connection that goes away mid-frame gives its share back too.
        let (mut a, b) = tokio::io::duplex(1024);
        let mut b = Framed::with_limits(b, limits);
        a.write_all(&60u32.to_be_bytes()).await.unwrap();
        a.write_all(&[0u8; 10]).await.unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(50), b.recv::<Response>()).await;
        assert!(pending.is_err(), "the frame is not complete");
        assert_eq!(pool.used(), 60);
        drop(b);
        assert_eq!(pool.used(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_begun_frame_must_finish_in_time_but_an_idle_peer_may_wait() {
        use tokio::io::AsyncWriteExt;
        let (limits, _) = small_limits(1 << 20, 1 << 20);
        // Idle: no deadline (srun holds its connection while its step runs).
        let (_a, b) = tokio::io::duplex(1024);
        let mut b = Framed::with_limits(b, limits.clone());
        let idle = tokio::time::timeout(Duration::from_secs(600), b.recv::<Response>()).await;
        assert!(idle.is_err(), "an idle peer is not cut off");
        // Begun: half a header, then nothing.
        let (mut a, b) = tokio::io::duplex(1024);
        let mut b = Framed::with_limits(b, limits);
        a.write_all(&[0u8, 0]).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(600), b.recv::<Response>())
            .await
            .expect("the slow peer is cut off before 600 s");
        assert!(matches!(r, Err(ProtoError::SlowPeer(_))), "{r:?}");
    }
}
