//! User and group names of uids and gids, as NSS gives them, for the controller: looked
//! up on every request, so they are cached while they cannot have changed.
//!
//! An answer (a name, or "no such user") is reused while the account file it comes from
//! (`/etc/passwd`, `/etc/group`) is the same file, unchanged (device, inode, size and
//! modification time as at the lookup), and for at most [`MAX_AGE`]. So a user renamed
//! or removed with the shadow utilities (which replace the file) is seen by the next
//! request, as without a cache; one changed in a directory service (LDAP, sssd) is seen
//! within [`MAX_AGE`], which is shorter than sssd's own cache. Slurm's
//! `uid_to_string_cached` keeps names until the controller restarts.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest an answer is reused, whatever the account files say.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// What identifies one version of an account file: device, inode, size in bytes,
/// modification time in nanoseconds; `None` when the file cannot be read.
type Stamp = Option<(u64, u64, u64, i128)>;

fn stamp(path: &str) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    Some((m.dev(), m.ino(), m.len(), mtime))
}

/// Answers looked up under one version of one account file.
struct Table {
    path: &'static str,
    stamp: Stamp,
    /// id → (name or none, when looked up).
    names: BTreeMap<u32, (Option<String>, Instant)>,
}

impl Table {
    const fn new(path: &'static str) -> Table {
        Table {
            path,
            stamp: None,
            names: BTreeMap::new(),
        }
    }

    /// The cached answer for `id`, if the file is unchanged and the answer young enough;
    /// a changed file drops every answer.
    fn get(&mut self, id: u32, now: Instant) -> Option<Option<String>> {
        let current = stamp(self.path);
        if current != self.stamp {
            self.names.clear();
            self.stamp = current;
            return None;
        }
        match self.names.get(&id) {
            Some((name, at)) if now.saturating_duration_since(*at) < MAX_AGE => Some(name.clone()),
            _ => None,
        }
    }

    /// Keeps `name` for `id`, looked up at `at` under the file version `seen` (checked
    /// before the lookup, so that a file replaced during it is not trusted).
    fn put(&mut self, id: u32, name: Option<String>, at: Instant, seen: Stamp) {
        if seen == self.stamp {
            self.names.insert(id, (name, at));
        }
    }
}

static USERS: Mutex<Table> = Mutex::new(Table::new("/etc/passwd"));
static GROUPS: Mutex<Table> = Mutex::new(Table::new("/etc/group"));

fn lock(m: &'static Mutex<Table>) -> std::sync::MutexGuard<'static, Table> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The cached user name of `uid` (`Some(None)`: known to have none), or `None` when it
/// must be looked up ([`user_name`]). Never blocks on NSS: one `stat` of `/etc/passwd`.
pub fn cached_user_name(uid: u32) -> Option<Option<String>> {
    lock(&USERS).get(uid, Instant::now())
}

/// The user name of `uid`; `None` when it has none. May block on NSS (a directory
/// service) when the answer is not cached.
pub fn user_name(uid: u32) -> Option<String> {
    lookup(&USERS, uid, |id| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(id))
            .ok()
            .flatten()
            .map(|u| u.name)
    })
}

/// The group name of `gid`; `None` when it has none. May block on NSS like
/// [`user_name`].
pub fn group_name(gid: u32) -> Option<String> {
    lookup(&GROUPS, gid, |id| {
        nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(id))
            .ok()
            .flatten()
            .map(|g| g.name)
    })
}

fn lookup(
    table: &'static Mutex<Table>,
    id: u32,
    nss: impl FnOnce(u32) -> Option<String>,
) -> Option<String> {
    let now = Instant::now();
    let seen = {
        let mut t = lock(table);
        if let Some(hit) = t.get(id, now) {
            return hit;
        }
        t.stamp
    };
    // The lock is not held across NSS, which may wait on the network.
    let name = nss(id);
    lock(table).put(id, name.clone(), now, seen);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_reused_until_the_file_changes_or_it_is_too_old() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("passwd");
        std::fs::write(&file, "a:x:1:1::/:/bin/sh\n").unwrap();
        let path: &'static str = Box::leak(file.display().to_string().into_boxed_str());
        let mut t = Table::new(path);
        let t0 = Instant::now();
        // The first look sees a new file: nothing cached.
        assert_eq!(t.get(1, t0), None);
        let seen = t.stamp;
        t.put(1, Some("a".into()), t0, seen);
        t.put(2, None, t0, seen);
        assert_eq!(t.get(1, t0), Some(Some("a".into())));
        assert_eq!(
            t.get(2, t0),
            Some(None),
            "a missing user is cached as missing"
        );
        assert_eq!(t.get(1, t0 + MAX_AGE), None, "too old");
        // Replaced, as usermod does: every answer goes.
        let new = dir.path().join("passwd.new");
        std::fs::write(&new, "b:x:1:1::/:/bin/sh\n").unwrap();
        std::fs::rename(&new, &file).unwrap();
        assert_eq!(t.get(2, t0), None);
        assert_eq!(t.get(1, t0), None);
    }

    #[test]
    fn an_answer_looked_up_while_the_file_changed_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("group");
        std::fs::write(&file, "g:x:5:\n").unwrap();
        let path: &'static str = Box::leak(file.display().to_string().into_boxed_str());
        let mut t = Table::new(path);
        let t0 = Instant::now();
        assert_eq!(t.get(5, t0), None);
        let before = t.stamp;
        std::fs::write(&file, "hh:x:5:\n").unwrap();
        // Another lookup saw the new file meanwhile.
        assert_eq!(t.get(6, t0), None);
        t.put(5, Some("g".into()), t0, before);
        assert_eq!(t.get(5, t0), None);
    }

    #[test]
    fn root_is_found_through_the_cache() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(cached_user_name(0), Some(Some("root".into())));
        assert_eq!(group_name(0).as_deref(), Some("root"));
    }
}
