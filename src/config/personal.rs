//! Where a user's personal controller lives, found the same way from any environment of
//! that uid (as Slurm's slurm.conf is found whatever the environment).
//!
//! - The state directory is `$SLUICE_STATE_DIR` when set (what `sluice ci` exports to
//!   its pipeline), else `$XDG_STATE_HOME/sluice` when `XDG_STATE_HOME` is set (an
//!   explicit choice: another state directory is another controller), else
//!   `<home>/.local/state/sluice` with `<home>` the uid's passwd entry's home directory
//!   (`getpwuid`, never `$HOME`: tools run front-ends with filtered environments), else,
//!   without a usable passwd home, `/tmp/sluice-<uid>/state/sluice`.
//! - The controller is named by a short id derived from its state directory's canonical
//!   path ([`controller_id`]). Everything it creates outside that directory carries the
//!   id: its cgroup root (`sluice-personal-<id>`), its socket (`<id>.sock`). Two
//!   controllers of one uid (two CI pipelines, two state directories) therefore never
//!   share a job cgroup or a socket, though their job ids overlap.
//! - The socket goes to `$XDG_RUNTIME_DIR/sluice/<id>.sock`, else
//!   `/run/user/<uid>/sluice/<id>.sock` when that runtime directory exists and is the
//!   uid's, else `/tmp/sluice-<uid>/<id>.sock`. The controller records the path it
//!   listens on in its state directory ([`SOCKET_RECORD`]); every later command uses the
//!   recorded path while that socket exists, so a command run without (or with another)
//!   `XDG_RUNTIME_DIR` still reaches the running controller instead of starting a second
//!   one.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The variable naming a personal controller's state directory outright (absolute path;
/// it wins over `XDG_STATE_HOME`).
pub const STATE_DIR_VAR: &str = "SLUICE_STATE_DIR";

/// File in the state directory that a controller holds an exclusive `flock` on for its
/// lifetime (any mode): free again once it has exited.
pub const CONTROLLER_LOCK: &str = "controller.lock";

/// File in the state directory naming the socket the controller listens on (one line,
/// the absolute path).
pub const SOCKET_RECORD: &str = "controller.socket";

/// The personal state directory of the calling user, from `SLUICE_STATE_DIR`,
/// `XDG_STATE_HOME` and the passwd entry of the real uid (see the module docs).
pub fn state_dir() -> PathBuf {
    let uid = nix::unistd::getuid();
    let home = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir);
    state_dir_from(
        std::env::var_os(STATE_DIR_VAR).as_deref(),
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        home.as_deref(),
        uid.as_raw(),
    )
}

/// [`state_dir`] from its inputs: `explicit` (`$SLUICE_STATE_DIR`) and `xdg_state`
/// (`$XDG_STATE_HOME`), each ignored when empty or relative (as the XDG spec says of
/// its variables), `passwd_home` (the passwd entry's home, used only when it is an
/// absolute path to an existing directory other than `/`).
pub fn state_dir_from(
    explicit: Option<&OsStr>,
    xdg_state: Option<&OsStr>,
    passwd_home: Option<&Path>,
    uid: u32,
) -> PathBuf {
    if let Some(x) = explicit.map(Path::new).filter(|p| p.is_absolute()) {
        return x.to_path_buf();
    }
    if let Some(x) = xdg_state.map(Path::new).filter(|p| p.is_absolute()) {
        return x.join("sluice");
    }
    match passwd_home.filter(|h| h.is_absolute() && *h != Path::new("/") && h.is_dir()) {
        Some(h) => h.join(".local/state/sluice"),
        None => PathBuf::from(format!("/tmp/sluice-{uid}/state/sluice")),
    }
}

/// The controller id of `state_dir`: 10 hex digits of the SHA-256 of its canonical path
/// (the longest existing prefix resolved, so the id is the same before and after the
/// directory is created). Stable across releases: it names the cgroups and socket of
/// jobs that outlive a controller restart.
pub fn controller_id(state_dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let canon = canonical(state_dir);
    let d = Sha256::digest(canon.as_os_str().as_bytes());
    d.iter().take(5).map(|b| format!("{b:02x}")).collect()
}

/// `p` made absolute with its longest existing prefix canonicalized and the rest
/// appended as written.
fn canonical(p: &Path) -> PathBuf {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut rest = Vec::new();
    let mut cur = p.as_path();
    loop {
        if let Ok(c) = cur.canonicalize() {
            return rest
                .iter()
                .rev()
                .fold(c, |acc, part: &&OsStr| acc.join(part));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                cur = parent;
            }
            _ => return p.clone(),
        }
    }
}

/// The cgroup root of the controller with id `id` (one path component).
pub fn cgroup_root(id: &str) -> String {
    format!("sluice-personal-{id}")
}

/// The socket a controller started in this environment listens on (see the module
/// docs); [`socket`] is where commands look.
pub fn fresh_socket(id: &str) -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    fresh_socket_from(std::env::var_os("XDG_RUNTIME_DIR").as_deref(), uid, id)
}

/// [`fresh_socket`] from its inputs (`xdg_runtime`: `$XDG_RUNTIME_DIR`, ignored when
/// empty or relative).
pub fn fresh_socket_from(xdg_runtime: Option<&OsStr>, uid: u32, id: &str) -> PathBuf {
    let name = format!("{id}.sock");
    if let Some(r) = xdg_runtime.map(Path::new).filter(|p| p.is_absolute()) {
        return r.join("sluice").join(name);
    }
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    let owned = {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&run_user).is_ok_and(|m| m.is_dir() && m.uid() == uid)
    };
    if owned {
        return run_user.join("sluice").join(name);
    }
    PathBuf::from(format!("/tmp/sluice-{uid}")).join(name)
}

/// The socket recorded in `state_dir` by the controller, if the record names one that
/// exists.
pub fn recorded_socket(state_dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let text = std::fs::read_to_string(state_dir.join(SOCKET_RECORD)).ok()?;
    let p = PathBuf::from(text.trim_end_matches('\n'));
    let is_socket = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_socket());
    (p.is_absolute() && is_socket).then_some(p)
}

/// Where commands reach the controller of `state_dir` (id `id`): the recorded socket
/// while it exists, else the one a controller started here would use.
pub fn socket(state_dir: &Path, id: &str) -> PathBuf {
    recorded_socket(state_dir).unwrap_or_else(|| fresh_socket(id))
}

/// Records `socket` in `state_dir` (written to a temporary file and renamed, so a reader
/// never sees half a path). Errors: the file cannot be written.
pub fn record_socket(state_dir: &Path, socket: &Path) -> std::io::Result<()> {
    let tmp = state_dir.join(format!("{SOCKET_RECORD}.{}", std::process::id()));
    std::fs::write(&tmp, format!("{}\n", socket.display()))?;
    std::fs::rename(&tmp, state_dir.join(SOCKET_RECORD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_comes_from_xdg_then_passwd_never_home() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path();
        assert_eq!(
            state_dir_from(None, Some(OsStr::new("/x/state")), Some(home), 7),
            PathBuf::from("/x/state/sluice")
        );
        assert_eq!(
            state_dir_from(
                Some(OsStr::new("/ci/s")),
                Some(OsStr::new("/x")),
                Some(home),
                7
            ),
            PathBuf::from("/ci/s")
        );
        // Empty or relative values is ignored (XDG base directory spec).
        for bad in ["", "rel/state"] {
            assert_eq!(
                state_dir_from(Some(OsStr::new(bad)), Some(OsStr::new(bad)), Some(home), 7),
                home.join(".local/state/sluice")
            );
        }
        assert_eq!(
            state_dir_from(None, None, Some(home), 7),
            home.join(".local/state/sluice")
        );
        // No usable passwd home: a per-uid fallback, the same from every environment.
        for h in [
            None,
            Some(Path::new("/")),
            Some(Path::new("/nonexistent/x")),
        ] {
            assert_eq!(
                state_dir_from(None, None, h, 7),
                PathBuf::from("/tmp/sluice-7/state/sluice")
            );
        }
    }

    #[test]
    fn the_id_is_stable_and_the_same_before_and_after_creation() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("state/sluice");
        let before = controller_id(&s);
        assert_eq!(before.len(), 10);
        assert!(before.chars().all(|c| c.is_ascii_hexdigit()));
        std::fs::create_dir_all(&s).unwrap();
        assert_eq!(controller_id(&s), before);
        // A symlink to the same directory is the same controller.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("state"), &link).unwrap();
        assert_eq!(controller_id(&link.join("sluice")), before);
        assert_ne!(controller_id(&d.path().join("other/sluice")), before);
        // Pinned: the id names cgroups of running jobs across upgrades.
        assert_eq!(controller_id(Path::new("/")), "8a5edab282");
    }

    #[test]
    fn sockets_carry_the_id_and_the_record_wins_while_it_exists() {
        assert_eq!(
            fresh_socket_from(Some(OsStr::new("/r")), 7, "abc"),
            PathBuf::from("/r/sluice/abc.sock")
        );
        let uid = nix::unistd::getuid().as_raw();
        let no_xdg = fresh_socket_from(None, uid, "abc");
        assert!(no_xdg.ends_with("abc.sock"), "{}", no_xdg.display());
        assert_eq!(fresh_socket_from(Some(OsStr::new("")), uid, "abc"), no_xdg);
        let d = tempfile::tempdir().unwrap();
        assert_eq!(recorded_socket(d.path()), None);
        let sock = d.path().join("s.sock");
        record_socket(d.path(), &sock).unwrap();
        // Recorded but gone (the controller stopped): not used.
        assert_eq!(recorded_socket(d.path()), None);
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(recorded_socket(d.path()), Some(sock.clone()));
        assert_eq!(socket(d.path(), "zzz"), sock);
    }
}
