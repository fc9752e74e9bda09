//! Framing: a 4-byte big-endian length, then a MessagePack body (named fields).
//! The async [`Framed`] serves daemons; [`SyncFramed`] serves front-ends, which make one
//! or two round trips and should not pay for a runtime.

use super::{Hello, MAX_FRAME, Role};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{Read, Write};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::LengthDelimitedCodec;

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

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// An async framed connection over any byte stream.
pub struct Framed<S> {
    inner: tokio_util::codec::Framed<S, LengthDelimitedCodec>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Framed<S> {
    /// Wraps a stream.
    pub fn new(stream: S) -> Framed<S> {
        Framed {
            inner: tokio_util::codec::Framed::new(stream, codec()),
        }
    }

    /// Sends one message.
    pub async fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), ProtoError> {
        let body = encode(msg)?;
        self.inner.send(bytes::Bytes::from(body)).await?;
        Ok(())
    }

    /// Receives one message; `Closed` at a clean end of stream.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> Result<T, ProtoError> {
        match self.inner.next().await {
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
}
