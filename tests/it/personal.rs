//! Zero-config personal mode: the controller starts on first use, only once, and stops
//! cleanly; commands from any environment of the user reach it; two personal
//! controllers of one uid never touch each other's jobs.

use crate::harness::*;
use std::process::Command;
use std::time::Duration;

fn personal_cmd(home: &std::path::Path) -> Command {
    let mut c = Command::new(sluice_bin());
    c.env_remove("SLUICE_CONF")
        .env_remove("SLUICE_STATE_DIR")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_RUNTIME_DIR", home.join("run"));
    c
}

/// The socket of the personal controller of `personal_cmd(home)`.
fn socket_of(home: &std::path::Path) -> std::path::PathBuf {
    let id = sluice::config::personal::controller_id(&home.join("state/sluice"));
    home.join(format!("run/sluice/{id}.sock"))
}

#[test]
fn concurrent_auto_starts_start_one_controller_and_stop_cleanly() {
    if std::path::Path::new(sluice::config::SYSTEM_CONF).exists() {
        eprintln!(
            "skipping: {} exists, so personal mode is off",
            sluice::config::SYSTEM_CONF
        );
        return;
    }
    let home = Home::new();
    let h = home.path();
    let a = personal_cmd(h).arg("controller").spawn().unwrap();
    let b = personal_cmd(h).arg("controller").spawn().unwrap();
    for mut p in [a, b] {
        assert!(p.wait().unwrap().success());
    }
    let sock = socket_of(h);
    assert!(sock.exists(), "socket at {}", sock.display());
    let mut cfg = sluice::config::Config::personal();
    cfg.socket = sock.clone();
    let mut cl = sluice::cli::client::Client::connect_with(&cfg).unwrap();
    assert_eq!(
        cl.request(&sluice::proto::Request::Ping).unwrap(),
        sluice::proto::Response::Ok
    );
    let log = std::fs::read_to_string(h.join("state/sluice/controller.log")).unwrap();
    assert_eq!(log.matches("controller starting").count(), 1, "{log}");
    assert!(h.join("state/sluice/sluice.db").exists());
    let st = personal_cmd(h)
        .args(["controller", "--stop"])
        .status()
        .unwrap();
    assert!(st.success());
    wait_until("socket removal", Duration::from_secs(10), || {
        (!sock.exists()).then_some(())
    });
}

#[test]
fn the_first_front_end_starts_a_personal_controller_with_the_detected_node() {
    if std::path::Path::new(sluice::config::SYSTEM_CONF).exists() {
        eprintln!(
            "skipping: {} exists, so personal mode is off",
            sluice::config::SYSTEM_CONF
        );
        return;
    }
    let home = Home::new();
    let h = home.path();
    let work = h.join("work");
    // `sbatch --wait` as README's first command does: starts the controller, runs the
    // job, returns its exit code.
    let o = personal_cmd(h)
        .args([
            "sbatch",
            "--wait",
            "-o",
            "hello.out",
            "--wrap",
            "echo hello from $SLURM_JOB_ID",
        ])
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id: u32 = String::from_utf8_lossy(&o.stdout)
        .trim()
        .strip_prefix("Submitted batch job ")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(work.join("hello.out")).unwrap(),
        format!("hello from {id}\n")
    );
    // One node: this machine, with its detected CPUs; partition `debug`, no limit.
    let o = personal_cmd(h)
        .args(["sinfo", "-h", "-o", "%P %l %D %c %N"])
        .output()
        .unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "debug* infinite 1 {cpus} {}\n",
            sluice::config::short_hostname()
        )
    );
    let st = personal_cmd(h)
        .args(["controller", "--stop"])
        .status()
        .unwrap();
    assert!(st.success());
    wait_until("socket removal", Duration::from_secs(10), || {
        (!socket_of(h).exists()).then_some(())
    });
    // State survives the stop; the next front-end starts it again.
    let o = personal_cmd(h)
        .args(["sacct", "-n", "-X", "-P", "-o", "JobID,State"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("{id}|COMPLETED\n")
    );
    let st = personal_cmd(h)
        .args(["controller", "--stop"])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_corrupt_database_is_refused_not_replaced() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path();
    std::fs::create_dir_all(root.join("state")).unwrap();
    let db = root.join("state/sluice.db");
    std::fs::write(
        &db,
        b"this is not a database, it is a poem about queues\n".repeat(200),
    )
    .unwrap();
    let conf = root.join("c.toml");
    std::fs::write(
        &conf,
        format!(
            "state_dir = \"{0}/state\"\nsocket = \"{0}/ctld.sock\"\n",
            root.display()
        ),
    )
    .unwrap();
    let o = Command::new(sluice_bin())
        .args(["controller", "--foreground"])
        .env("SLUICE_CONF", &conf)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a database") || err.contains("corrupt"),
        "{err}"
    );
    let after = std::fs::read(&db).unwrap();
    assert!(after.starts_with(b"this is not a database"));
}

/// A personal controller's home for a test: stops the controller and removes its
/// cgroup root (which only its jobs use) when dropped, whatever the test's outcome.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        Home { dir }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A command of this home's user with a full environment.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = personal_cmd(self.path());
        c.args(args).current_dir(self.path().join("work"));
        c
    }

    /// `args` run with a full environment; panics unless it succeeds; stdout.
    fn ok(&self, args: &[&str]) -> String {
        ok(self.cmd(args))
    }

    fn state(&self, id: u32) -> String {
        self.ok(&[
            "sacct",
            "-n",
            "-X",
            "-P",
            "-o",
            "State",
            "-j",
            &id.to_string(),
        ])
        .trim()
        .to_string()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = self.cmd(&["controller", "--stop"]).output();
        let id = sluice::config::personal::controller_id(&self.path().join("state/sluice"));
        let conf = sluice::config::CgroupConf {
            root: sluice::config::personal::cgroup_root(&id),
            ..Default::default()
        };
        let _ = sluice::stepd::isolate::purge(&conf);
    }
}

/// Runs `c`; panics unless it succeeds; its stdout.
fn ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Two personal controllers of one uid (two state directories, one runtime directory)
/// number their jobs from 1 alike. While one's jobs run, the other's jobs with the same
/// ids start and end; the first one's jobs must all survive and complete. (With one
/// cgroup root for every personal controller, the end of job N in one killed job N of
/// the other.)
#[test]
fn two_personal_controllers_of_one_uid_never_touch_each_others_jobs() {
    let (a, b) = (Home::new(), Home::new());
    let run = tempfile::tempdir().unwrap();
    let with_run = |h: &Home, args: &[&str]| {
        let mut c = h.cmd(args);
        c.env("XDG_RUNTIME_DIR", run.path());
        c
    };
    // As many as run at once on this machine's CPUs (each controller sees them all).
    let n = std::thread::available_parallelism().unwrap().get().min(3);
    let mut a_ids = Vec::new();
    for _ in 0..n {
        let out = ok(with_run(
            &a,
            &[
                "sbatch",
                "--parsable",
                "-o",
                "a-%j.out",
                "--wrap",
                "echo started; while [ ! -e go ]; do sleep 0.1; done; echo survived",
            ],
        ));
        a_ids.push(out.trim().parse::<u32>().unwrap());
    }
    assert_eq!(a_ids, (1..=n as u32).collect::<Vec<_>>());
    let running = |h: &Home| {
        ok(with_run(h, &["squeue", "-h", "-t", "R", "-o", "%i"]))
            .lines()
            .count()
    };
    wait_until("a's jobs running", Duration::from_secs(60), || {
        (running(&a) == n).then_some(())
    });
    for id in &a_ids {
        wait_until("a's jobs started", Duration::from_secs(30), || {
            std::fs::read_to_string(a.path().join(format!("work/a-{id}.out")))
                .is_ok_and(|t| t.contains("started"))
                .then_some(())
        });
    }
    // b's jobs 1, 2 and 3 start and end meanwhile, concurrently.
    let waits: Vec<_> = (0..3)
        .map(|i| {
            with_run(
                &b,
                &[
                    "sbatch",
                    "--wait",
                    "-o",
                    "b-%j.out",
                    "--wrap",
                    &format!("echo b{i}"),
                ],
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut b_ids: Vec<u32> = waits
        .into_iter()
        .map(|p| {
            let o = p.wait_with_output().unwrap();
            assert!(o.status.success(), "b's sbatch --wait failed");
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .strip_prefix("Submitted batch job ")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    b_ids.sort();
    assert_eq!(b_ids, [1, 2, 3]);
    for id in &b_ids {
        assert_eq!(b.state(*id), "COMPLETED");
    }
    // Both controllers have their own socket in the one runtime directory.
    let socks = std::fs::read_dir(run.path().join("sluice"))
        .unwrap()
        .count();
    assert_eq!(socks, 2);
    // a's jobs are all still running, then complete normally.
    assert_eq!(running(&a), n);
    std::fs::write(a.path().join("work/go"), "").unwrap();
    for id in &a_ids {
        wait_until("a's job completed", Duration::from_secs(60), || {
            let st = a.state(*id);
            (!st.is_empty() && st != "RUNNING" && st != "PENDING").then_some(())
        });
        assert_eq!(a.state(*id), "COMPLETED", "job {id} of a");
        let out = std::fs::read_to_string(a.path().join(format!("work/a-{id}.out"))).unwrap();
        assert_eq!(out, "started\nsurvived\n");
    }
}

/// Tools run sbatch with a filtered environment and squeue/scancel with the full one
/// (batchspawner). Whatever the environment (none at all but the state directory, no
/// XDG_RUNTIME_DIR, another HOME), every command reaches the one controller of the
/// state directory: none starts a second one or fails on its lock. Both orders: the
/// controller started from the full environment, and from an empty one.
#[test]
fn commands_from_any_environment_reach_the_same_controller() {
    for full_first in [true, false] {
        let h = Home::new();
        let state = h.path().join("state");
        // Only the state directory: no HOME, PATH, XDG_RUNTIME_DIR or anything else.
        let bare = |args: &[&str]| {
            let mut c = Command::new(sluice_bin());
            c.env_clear()
                .env("XDG_STATE_HOME", &state)
                .args(args)
                .current_dir(h.path().join("work"));
            c
        };
        let no_runtime = |args: &[&str]| {
            let mut c = h.cmd(args);
            c.env_remove("XDG_RUNTIME_DIR");
            c
        };
        let other_home = |args: &[&str]| {
            let mut c = h.cmd(args);
            c.env("HOME", h.path().join("elsewhere"))
                .env("XDG_RUNTIME_DIR", h.path().join("run2"));
            c
        };
        let submit = |c: Command| -> u32 {
            let mut c = c;
            c.args(["--parsable", "-H", "--wrap", "true"]);
            ok(c).trim().parse().unwrap()
        };
        let first = if full_first {
            submit(h.cmd(&["sbatch"]))
        } else {
            submit(bare(&["sbatch"]))
        };
        let ids = [
            first,
            submit(if full_first {
                bare(&["sbatch"])
            } else {
                h.cmd(&["sbatch"])
            }),
            submit(no_runtime(&["sbatch"])),
            submit(other_home(&["sbatch"])),
        ];
        assert_eq!(ids, [1, 2, 3, 4], "one controller numbers them all");
        let all = "1\n2\n3\n4\n";
        for mut c in [
            bare(&["squeue", "-h", "-o", "%i"]),
            no_runtime(&["squeue", "-h", "-o", "%i"]),
            other_home(&["squeue", "-h", "-o", "%i"]),
            h.cmd(&["squeue", "-h", "-o", "%i"]),
        ] {
            c.args(["--sort", "i"]);
            assert_eq!(ok(c), all);
        }
        ok(no_runtime(&["scancel", "1"]));
        ok(bare(&["scancel", "2"]));
        ok(other_home(&["scancel", "3", "4"]));
        assert_eq!(ok(h.cmd(&["squeue", "-h", "-o", "%i"])), "");
        let log = std::fs::read_to_string(state.join("sluice/controller.log")).unwrap();
        assert_eq!(log.matches("controller starting").count(), 1, "{log}");
        assert!(!log.contains("another controller"), "{log}");
    }
}

/// Three CI pipelines side by side on one runner, of one user, each under `sluice ci`:
/// their job ids overlap, each sees only its own queue, `sbatch --wait` and `srun` exit
/// codes reach the pipeline and the pipeline's reaches the runner, and each is torn down
/// (the job it left running killed, the controller's directory and cgroups gone).
#[test]
fn three_ci_pipelines_run_side_by_side_and_clean_up() {
    let bin = tempfile::tempdir().unwrap();
    for name in ["sbatch", "srun", "squeue"] {
        std::os::unix::fs::symlink(sluice_bin(), bin.path().join(name)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let tmp = tempfile::tempdir().unwrap();
    let tmp_dir = tmp.path().canonicalize().unwrap();
    let top = tempfile::tempdir().unwrap();
    // Each waits (at most 2 minutes) for `go`, so that all three are up at once.
    let script = r#"
        set -u
        echo "$SLUICE_STATE_DIR" > state_dir
        touch ready
        n=0; while [ ! -e ../go ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done
        sbatch --wait -o job.out --wrap "exit $((10 + I))" > /dev/null; echo "sbatch=$?" >> codes
        srun sh -c "exit $((20 + I))" 2> /dev/null; echo "srun=$?" >> codes
        sbatch -o left.out --wrap 'echo $$ > left.pid; exec sleep 300' > /dev/null
        n=0; while [ ! -s left.pid ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done
        squeue -h -o '%i %T' > queue
        exit $((30 + I))
    "#;
    let work: Vec<_> = (0..3).map(|i| top.path().join(format!("p{i}"))).collect();
    let runs: Vec<_> = (0..3)
        .map(|i| {
            std::fs::create_dir(&work[i]).unwrap();
            Command::new(sluice_bin())
                .args(["ci", "--", "sh", "-c", script])
                .env_remove("SLUICE_CONF")
                .env_remove("SLUICE_STATE_DIR")
                .env("PATH", &path)
                .env("TMPDIR", &tmp_dir)
                .env("I", i.to_string())
                .current_dir(&work[i])
                .spawn()
                .unwrap()
        })
        .collect();
    wait_until("three pipelines up", Duration::from_secs(120), || {
        work.iter().all(|w| w.join("ready").exists()).then_some(())
    });
    std::fs::write(top.path().join("go"), "").unwrap();
    for (i, mut p) in runs.into_iter().enumerate() {
        let st = p.wait().unwrap();
        let w = &work[i];
        assert_eq!(st.code(), Some(30 + i as i32), "pipeline {i}");
        assert_eq!(
            std::fs::read_to_string(w.join("codes")).unwrap(),
            format!("sbatch={}\nsrun={}\n", 10 + i, 20 + i),
            "pipeline {i}"
        );
        // Its own jobs only: 1 (sbatch --wait) and 2 (srun) are done, 3 runs.
        assert_eq!(
            std::fs::read_to_string(w.join("queue")).unwrap(),
            "3 RUNNING\n",
            "pipeline {i}"
        );
        let state = std::fs::read_to_string(w.join("state_dir")).unwrap();
        let state = std::path::Path::new(state.trim());
        assert!(state.starts_with(&tmp_dir), "{}", state.display());
        assert!(
            !state.parent().unwrap().exists(),
            "{} left",
            state.display()
        );
        let pid: i32 = std::fs::read_to_string(w.join("left.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            !cmdline.starts_with(b"sleep"),
            "pipeline {i}'s job process {pid} survived"
        );
        let id = sluice::config::personal::controller_id(state);
        let root = sluice::config::personal::cgroup_root(&id);
        for h in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            assert!(
                !h.path().join(&root).exists(),
                "{root} left in {:?}",
                h.path()
            );
        }
    }
    assert_eq!(std::fs::read_dir(&tmp_dir).unwrap().count(), 0);
}

/// `sluice controller --stop` of a state directory whose controller is gone, but whose
/// pid file names a live controller (a reused pid: here another state directory's
/// controller), signals nothing: the pid file is believed only while the state
/// directory's lock is held.
#[test]
fn a_stale_pid_file_never_stops_another_controller() {
    let (a, b) = (Home::new(), Home::new());
    b.ok(&["sbatch", "-H", "--wrap", "true"]);
    let b_state = b.path().join("state/sluice");
    let pid = std::fs::read_to_string(b_state.join("controller.pid")).unwrap();
    let a_state = a.path().join("state/sluice");
    std::fs::create_dir_all(&a_state).unwrap();
    std::fs::write(a_state.join("controller.pid"), &pid).unwrap();
    let o = a.cmd(&["controller", "--stop"]).output().unwrap();
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not running"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // b's controller still answers, with its job.
    assert_eq!(b.ok(&["squeue", "-h", "-o", "%i"]), "1\n");
    let log = std::fs::read_to_string(b_state.join("controller.log")).unwrap();
    assert_eq!(log.matches("controller starting").count(), 1, "{log}");
}

/// Two commands from different environments (one with XDG_RUNTIME_DIR, one with none,
/// so each would put the socket elsewhere) start the controller at the same moment:
/// one controller starts, the other command finds it through the socket it recorded,
/// and both succeed.
#[test]
fn racing_auto_starts_from_different_environments_share_one_controller() {
    for _ in 0..3 {
        let h = Home::new();
        let state = h.path().join("state");
        let full = h
            .cmd(&["sbatch", "--parsable", "-H", "--wrap", "true"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let bare = Command::new(sluice_bin())
            .env_clear()
            .env("XDG_STATE_HOME", &state)
            .args(["sbatch", "--parsable", "-H", "--wrap", "true"])
            .current_dir(h.path().join("work"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ids: Vec<u32> = [full, bare]
            .into_iter()
            .map(|p| {
                let o = p.wait_with_output().unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
            })
            .collect();
        ids.sort();
        assert_eq!(ids, [1, 2]);
        let log = std::fs::read_to_string(state.join("sluice/controller.log")).unwrap();
        assert_eq!(log.matches("controller starting").count(), 1, "{log}");
    }
}

/// A cancelled pipeline: SIGTERM to `sluice ci` reaches COMMAND, whose status (killed
/// by signal 15: 143) is sluice ci's, and the tear-down still runs (the job it left
/// running is killed, the temporary directory removed).
#[test]
fn a_signalled_ci_run_passes_the_signal_on_and_still_tears_down() {
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(sluice_bin(), bin.path().join("sbatch")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let tmp_dir = tmp.path().canonicalize().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = r#"
        echo "$SLUICE_STATE_DIR" > state_dir
        sbatch -o left.out --wrap 'echo $$ > left.pid; exec sleep 300' > /dev/null
        n=0; while [ ! -s left.pid ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done
        touch ready
        exec sleep 300
    "#;
    let mut p = Command::new(sluice_bin())
        .args(["ci", "--", "sh", "-c", script])
        .env_remove("SLUICE_CONF")
        .env_remove("SLUICE_STATE_DIR")
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
        .env("TMPDIR", &tmp_dir)
        .current_dir(work.path())
        .spawn()
        .unwrap();
    wait_until(
        "the pipeline's job running",
        Duration::from_secs(120),
        || work.path().join("ready").exists().then_some(()),
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(p.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let st = p.wait().unwrap();
    assert_eq!(st.code(), Some(143));
    let pid: i32 = std::fs::read_to_string(work.path().join("left.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        !cmdline.starts_with(b"sleep"),
        "the job's process {pid} survived"
    );
    assert_eq!(std::fs::read_dir(&tmp_dir).unwrap().count(), 0);
}

/// `sluice ci` without a command is a usage error (2); with one that cannot be run it
/// exits 127, as a shell does, and leaves no temporary directory behind.
#[test]
fn sluice_ci_usage_errors_and_a_missing_command() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(sluice_bin())
            .arg("ci")
            .args(args)
            .env_remove("SLUICE_CONF")
            .env_remove("SLUICE_STATE_DIR")
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap()
    };
    for args in [&[][..], &["--"], &["--bogus", "true"]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("Usage: sluice ci"));
    }
    let o = run(&["--", "/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/command"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(run(&["--", "true"]).status.code(), Some(0));
    assert_eq!(run(&["sh", "-c", "exit 9"]).status.code(), Some(9));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}
