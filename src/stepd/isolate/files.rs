//! Small file operations on cgroup directories, shared by the v1 and v2 backends, and
//! the parsers for `/proc/self/mountinfo` and `/proc/self/cgroup`.
//!
//! The same code runs on a real cgroupfs and on a temporary directory laid out like one
//! (the unit-test fixtures). They differ in what the kernel does by itself: a new
//! cgroup directory comes with its control files, and is removed while they are still
//! listed. [`mkdir`] and [`remove_cgroup`] bridge that (an empty `cgroup.procs`; the
//! files deleted first), and only off a cgroup filesystem.

use super::IsolateError;
use std::io;
use std::path::{Path, PathBuf};

/// Reads a control file, trimmed.
pub fn read(path: &Path) -> io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// Writes `value` to a control file. Errors name the file and the value.
pub fn write(path: &Path, value: &str) -> Result<(), IsolateError> {
    std::fs::write(path, value).map_err(|source| IsolateError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

/// The number after `key` in a `key value` per line file (`memory.events`, `cpu.stat`,
/// `cpuacct.stat`, `memory.oom_control`).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(char::is_whitespace)?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Reads a file holding one number; `max` (v2's "no limit") reads as `None`.
pub fn number(path: &Path) -> Option<u64> {
    read(path).ok()?.parse().ok()
}

/// Creates `dir` (its parent must exist); `Ok(true)` if it was created now. Off a
/// cgroup filesystem (a fixture) it also creates the empty `cgroup.procs` the kernel
/// would list.
pub fn mkdir(dir: &Path) -> Result<bool, IsolateError> {
    match std::fs::create_dir(dir) {
        Ok(()) => {
            // Readable by the job's user (tools size themselves from their cgroup's
            // limits), whatever the creating process's umask.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
            if !on_cgroupfs(dir) {
                let _ = std::fs::write(dir.join("cgroup.procs"), "");
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(IsolateError::Create {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// The pids in `dir/cgroup.procs` and in every cgroup below it.
pub fn procs_below(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(t) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(t.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
        stack.extend(subdirs(&d));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The directories directly below `dir` (child cgroups), sorted.
pub fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Removes the cgroup `dir` and every cgroup below it, deepest first. A missing
/// directory is not an error; a cgroup that still has processes is (EBUSY).
pub fn remove_cgroup(dir: &Path) -> io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for d in subdirs(dir) {
        remove_cgroup(&d)?;
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty && !on_cgroupfs(dir) => {
            // A fixture: behave as the kernel would, refusing only while processes remain.
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                std::fs::remove_dir_all(dir)
            } else {
                Err(io::Error::from_raw_os_error(nix::libc::EBUSY))
            }
        }
        Err(e) => Err(e),
    }
}

/// Whether `path` lies on a cgroup v1 or v2 filesystem.
pub fn on_cgroupfs(path: &Path) -> bool {
    use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, statfs};
    statfs(path).is_ok_and(|s| {
        let t = s.filesystem_type();
        t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
    })
}

/// One line of `/proc/self/mountinfo`, the fields this module needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The directory of the hierarchy that is mounted (`/` unless a subtree is).
    pub root: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    /// Superblock options: for cgroup v1 these name the controllers.
    pub super_opts: Vec<String>,
}

/// Parses mountinfo text (proc(5)); malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?.to_string();
            let _source = post.next()?;
            let super_opts = post.next()?.split(',').map(str::to_string).collect();
            Some(Mount {
                root: unescape(pre.get(3)?),
                mount_point: PathBuf::from(unescape(pre.get(4)?)),
                fstype,
                super_opts,
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = |c: u8| (b'0'..=b'7').contains(&c).then(|| u32::from(c - b'0'));
        let code = (b[i] == b'\\' && i + 3 < b.len())
            .then(|| Some(octal(b[i + 1])? * 64 + octal(b[i + 2])? * 8 + octal(b[i + 3])?))
            .flatten()
            .and_then(|v| u8::try_from(v).ok());
        if let Some(v) = code {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of `/proc/<pid>/cgroup`: hierarchy id, controllers (empty for v2's `0::`),
/// path within the hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub id: u32,
    pub controllers: Vec<String>,
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup` text; malformed lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let id = it.next()?.parse().ok()?;
            let ctl = it.next()?;
            let path = it.next()?.to_string();
            Some(Membership {
                id,
                controllers: ctl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// `mount_point` + (`own` relative to the mount's `root`): where a process's cgroup
/// appears in this mount. `None` when the cgroup lies outside the mounted subtree.
pub fn cgroup_dir(mount_point: &Path, mount_root: &str, own: &str) -> Option<PathBuf> {
    let root = mount_root.trim_end_matches('/');
    let rel = own.strip_prefix(root)?;
    if !(rel.is_empty() || rel.starts_with('/')) {
        return None;
    }
    let rel = rel.trim_start_matches('/');
    Some(if rel.is_empty() {
        mount_point.to_path_buf()
    } else {
        mount_point.join(rel)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_of_a_hybrid_host() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /sub /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
42 31 0:39 / /mnt/with\\040space rw - ext4 /dev/sda1 rw
garbage
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 5);
        assert_eq!(
            m[1].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert_eq!(m[1].fstype, "cgroup");
        assert!(m[1].super_opts.iter().any(|o| o == "cpuacct"));
        assert_eq!(m[2].root, "/sub");
        assert_eq!(m[3].fstype, "cgroup2");
        assert_eq!(m[4].mount_point, PathBuf::from("/mnt/with space"));
    }

    #[test]
    fn parses_proc_cgroup() {
        let m = parse_proc_cgroup("4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/user.slice\n");
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].controllers, vec!["memory"]);
        assert_eq!(m[0].path, "/process_api/x");
        assert_eq!(m[1].controllers, vec!["cpu", "cpuacct"]);
        assert!(m[2].controllers.is_empty());
        assert_eq!(m[2].path, "/user.slice");
    }

    #[test]
    fn own_cgroup_directory_within_a_mount() {
        let mp = Path::new("/sys/fs/cgroup/memory");
        assert_eq!(cgroup_dir(mp, "/", "/"), Some(mp.to_path_buf()));
        assert_eq!(cgroup_dir(mp, "/", "/a/b"), Some(mp.join("a/b")));
        assert_eq!(cgroup_dir(mp, "/a", "/a/b"), Some(mp.join("b")));
        assert_eq!(cgroup_dir(mp, "/a", "/a"), Some(mp.to_path_buf()));
        assert_eq!(cgroup_dir(mp, "/a", "/ab"), None);
        assert_eq!(cgroup_dir(mp, "/a", "/c"), None);
    }

    #[test]
    fn keyed_values() {
        let t = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(t, "oom_kill"), Some(3));
        assert_eq!(keyed(t, "oom"), None);
        assert_eq!(keyed("user 12\nsystem 4\n", "system"), Some(4));
    }

    #[test]
    fn fixture_cgroups_are_removed_only_when_empty() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        std::fs::create_dir_all(a.join("b")).unwrap();
        std::fs::write(a.join("cgroup.procs"), "").unwrap();
        std::fs::write(a.join("b/cgroup.procs"), "42\n").unwrap();
        assert!(remove_cgroup(&a).is_err(), "b still has a process");
        assert!(a.exists());
        std::fs::write(a.join("b/cgroup.procs"), "").unwrap();
        remove_cgroup(&a).unwrap();
        assert!(!a.exists());
        remove_cgroup(&a).unwrap();
        assert_eq!(procs_below(t.path()), Vec::<i32>::new());
    }
}
