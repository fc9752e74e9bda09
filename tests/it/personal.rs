//! Zero-config personal mode: the controller starts on first use, only once, and stops
//! cleanly.

use crate::harness::*;
use std::process::Command;
use std::time::Duration;

fn personal_cmd(home: &std::path::Path) -> Command {
    let mut c = Command::new(sluice_bin());
    c.env_remove("SLUICE_CONF")
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_RUNTIME_DIR", home.join("run"));
    c
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
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let a = personal_cmd(h).arg("controller").spawn().unwrap();
    let b = personal_cmd(h).arg("controller").spawn().unwrap();
    for mut p in [a, b] {
        assert!(p.wait().unwrap().success());
    }
    let sock = h.join("run/sluice/sluice.sock");
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
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let work = h.join("work");
    std::fs::create_dir(&work).unwrap();
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
        (!h.join("run/sluice/sluice.sock").exists()).then_some(())
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
