//! TaskProlog and TaskEpilog (cf. slurmstepd's `_run_script_and_set_env` in
//! task.c): stepd runs them as the job's user, in the task's environment and working
//! directory, before and after each task. TaskProlog's standard output is read line by
//! line as Slurm does:
//!
//! - `export NAME=value` sets NAME in the task's environment,
//! - `unset NAME` removes it,
//! - `print text` writes `text` and a newline to the task's standard output,
//!
//! and any other line is ignored. A TaskProlog that exits non-zero (or outlives
//! PrologEpilogTimeout) keeps the task from running: it ends with that status, as
//! slurmstepd's task exits with the prolog's status.

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

/// One directive from TaskProlog's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directive {
    /// `export NAME=value`.
    Export(String, String),
    /// `unset NAME`.
    Unset(String),
    /// `print text` (the text after `print `).
    Print(String),
}

/// Parses TaskProlog's standard output into directives (other lines are dropped).
pub fn parse(out: &str) -> Vec<Directive> {
    out.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix("export ") {
                let (k, v) = rest.trim_start().split_once('=')?;
                let k = k.trim();
                valid_name(k).then(|| Directive::Export(k.to_string(), v.to_string()))
            } else if let Some(rest) = line.strip_prefix("unset ") {
                let k = rest.trim();
                valid_name(k).then(|| Directive::Unset(k.to_string()))
            } else if let Some(rest) = line.strip_prefix("print ") {
                Some(Directive::Print(rest.to_string()))
            } else if line == "print" {
                Some(Directive::Print(String::new()))
            } else {
                None
            }
        })
        .collect()
}

fn valid_name(k: &str) -> bool {
    !k.is_empty() && !k.contains(['=', '\0', ' '])
}

/// Applies `directives` to `env`; returns the bytes `print` lines write to the
/// task's standard output.
pub fn apply(directives: &[Directive], env: &mut Vec<(String, String)>) -> Vec<u8> {
    let mut printed = Vec::new();
    for d in directives {
        match d {
            Directive::Export(k, v) => match env.iter_mut().find(|(n, _)| n == k) {
                Some(e) => e.1 = v.clone(),
                None => env.push((k.clone(), v.clone())),
            },
            Directive::Unset(k) => env.retain(|(n, _)| n != k),
            Directive::Print(t) => {
                printed.extend_from_slice(t.as_bytes());
                printed.push(b'\n');
            }
        }
    }
    printed
}

/// Who a task script runs as: (user name, uid, gid); `None` keeps stepd's identity.
pub type RunAs = Option<(CString, u32, u32)>;

/// Runs `path` as `user` with exactly `env`, in `work_dir` (`/` if it cannot be
/// entered), stdin from /dev/null and stderr discarded; returns its standard output.
///
/// Errors: a message naming the exit status, the signal, the timeout (`timeout`
/// seconds; `None`: no limit), or why it could not start.
pub fn run(
    path: &Path,
    env: &[(String, String)],
    user: &RunAs,
    work_dir: &str,
    timeout: Option<u32>,
) -> Result<String, (i32, String)> {
    use std::io::Read;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut cmd = std::process::Command::new(path);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(if Path::new(work_dir).is_dir() {
            work_dir
        } else {
            "/"
        })
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    if let Some((name, uid, gid)) = user.clone() {
        let drop_privileges = move || -> std::io::Result<()> {
            let io = |e: nix::Error| std::io::Error::from_raw_os_error(e as i32);
            let gid = nix::unistd::Gid::from_raw(gid);
            nix::unistd::initgroups(&name, gid).map_err(io)?;
            nix::unistd::setgid(gid).map_err(io)?;
            nix::unistd::setuid(nix::unistd::Uid::from_raw(uid)).map_err(io)
        };
        set_pre_exec(&mut cmd, drop_privileges);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| (1, format!("cannot run {}: {e}", path.display())))?;
    let mut stdout = child.stdout.take().expect("piped");
    // Read without blocking, so a script that never exits can be timed out, and one
    // that prints much is never stuck on a full pipe.
    {
        use std::os::fd::AsRawFd;
        let fd = stdout.as_raw_fd();
        if let Ok(fl) = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL) {
            let fl = nix::fcntl::OFlag::from_bits_truncate(fl) | nix::fcntl::OFlag::O_NONBLOCK;
            let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(fl));
        }
    }
    let deadline = timeout.map(|t| Instant::now() + Duration::from_secs(u64::from(t)));
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let status = loop {
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err((1, format!("cannot wait for {}: {e}", path.display()))),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            return Err((1, format!("timed out after {} s", timeout.unwrap_or(0))));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    while let Ok(n) = stdout.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(String::from_utf8_lossy(&out).into_owned()),
        (Some(c), _) => Err((c, format!("status={c}"))),
        (None, Some(s)) => Err((1, format!("killed by signal {s}"))),
        _ => Err((1, "failed".into())),
    }
}

#[allow(unsafe_code)]
fn set_pre_exec(
    cmd: &mut std::process::Command,
    f: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) {
    use std::os::unix::process::CommandExt;
    // SAFETY: stepd is single-threaded (no runtime, no helper threads), so the forked
    // child holds no lock another thread owns; the closure only makes the
    // initgroups/setgid/setuid system calls and returns their errors.
    unsafe {
        cmd.pre_exec(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_parsed_as_slurm_reads_them() {
        let d = parse(
            "export FOO=bar baz\nunset HOME\nprint hello world\nnoise\nexport =x\nexport BAD\nprint\n",
        );
        assert_eq!(
            d,
            vec![
                Directive::Export("FOO".into(), "bar baz".into()),
                Directive::Unset("HOME".into()),
                Directive::Print("hello world".into()),
                Directive::Print(String::new()),
            ]
        );
        let mut env = vec![("HOME".into(), "/h".into()), ("FOO".into(), "old".into())];
        let printed = apply(&d, &mut env);
        assert_eq!(env, vec![("FOO".to_string(), "bar baz".to_string())]);
        assert_eq!(printed, b"hello world\n\n");
    }

    fn script(dir: &Path, body: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("tp.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn runs_in_the_task_environment_and_reports_failures() {
        let d = tempfile::tempdir().unwrap();
        let wd = d.path().to_str().unwrap();
        let env = vec![("SLURM_PROCID".to_string(), "3".to_string())];
        let p = script(d.path(), "echo \"export RANK=$SLURM_PROCID\"; pwd >&2");
        assert_eq!(run(&p, &env, &None, wd, None).unwrap(), "export RANK=3\n");
        let p = script(d.path(), "echo partial; exit 7");
        assert_eq!(run(&p, &env, &None, wd, None).unwrap_err().0, 7);
        let p = script(d.path(), "sleep 20");
        let e = run(&p, &env, &None, wd, Some(1)).unwrap_err();
        assert!(e.1.contains("timed out"), "{e:?}");
        let e = run(&d.path().join("none"), &env, &None, wd, None).unwrap_err();
        assert!(e.1.starts_with("cannot run"), "{e:?}");
    }
}
