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

/// Refuses a socket directory that someone else could use to replace our socket: it
/// must belong to us (or root) and not be writable by group or others, unless it has the
/// sticky bit (like /tmp, where only owners may remove entries).
pub fn check_socket_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    // A symlink planted by someone else (e.g. /tmp/sluice-<uid> -> their dir) is refused
    // before its target is looked at.
    let link = std::fs::symlink_metadata(dir)?;
    if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing to use socket directory {}: it is a symlink owned by uid {}",
                dir.display(),
                link.uid()
            ),
        ));
    }
    let m = std::fs::metadata(dir)?;
    let sticky = m.mode() & 0o1000 != 0;
    if m.uid() != me && m.uid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing to use socket directory {}: it belongs to uid {}, not to uid {me}",
                dir.display(),
                m.uid()
            ),
        ));
    }
    if m.mode() & 0o022 != 0 && !sticky {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing to use socket directory {}: it is writable by other users (mode {:o})",
                dir.display(),
                m.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Binds a listening socket at `path`, creating its directory (mode 0755 for a shared
/// socket, 0700 for a personal one) and replacing a stale socket file that nobody
/// listens on. Refuses to replace anything that is not a socket.
pub fn bind_unix(path: &Path, shared: bool) -> io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            let mode = if shared { 0o755 } else { 0o700 };
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))?;
        }
        check_socket_dir(dir)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn socket_dirs_writable_by_others_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let set =
            |m| std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(m)).unwrap();
        set(0o700);
        assert!(check_socket_dir(d.path()).is_ok());
        set(0o777);
        let e = check_socket_dir(d.path()).unwrap_err().to_string();
        assert!(e.contains("writable by other users"), "{e}");
        set(0o1777);
        assert!(check_socket_dir(d.path()).is_ok());
        set(0o700);
    }
}
