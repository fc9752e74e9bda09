//! Byte streams the protocol runs over: Unix sockets with the peer's kernel-attested
//! identity (SO_PEERCRED), and SSH channels to remote node agents ([`ssh`]; the agent
//! end is `sluice agent --stdio`, see `agent::stdio`).

pub mod ssh;

use std::io;
use std::path::Path;
use tokio::net::{UnixListener, UnixStream};

/// The kernel-attested identity of a Unix-socket peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

/// Reads SO_PEERCRED of a connected stream.
pub fn peer_cred(s: &UnixStream) -> io::Result<PeerCred> {
    let c = s.peer_cred()?;
    Ok(PeerCred {
        uid: c.uid(),
        gid: c.gid(),
        pid: c.pid(),
    })
}

/// Binds a listening socket at `path`, creating its directory (mode 0755 for a shared
/// socket, 0700 for a personal one) and replacing a stale socket file that nobody
/// listens on. Refuses to replace anything that is not a socket.
pub fn bind_unix(path: &Path, shared: bool) -> io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir)?;
        let mode = if shared { 0o755 } else { 0o700 };
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another controller already listens on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        Err(_) => {}
    }
    let l = UnixListener::bind(path)?;
    let mode = if shared { 0o666 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}
