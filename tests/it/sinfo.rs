//! sinfo through the real front-end: default, `-N`, `-l`, `-o`, `-t`, `-s`, `-R`,
//! `--version` (default and configured), and bad input.

use crate::harness::*;
use std::time::Duration;

#[test]
fn views_follow_the_nodes_state() {
    let c = TestCluster::start_with(Setup {
        extra_partitions: "[[partitions]]\nname = \"batch\"\nnodes = \"NODE\"\n",
        ..Setup::default()
    });
    let node = c.node();
    assert_eq!(
        c.ok("sinfo", &[]),
        format!(
            "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n\
             debug*       up    1:00:00      1   idle {node}\n\
             batch        up   infinite      1   idle {node}\n"
        )
    );
    c.script(
        "gate.sh",
        "#!/bin/sh\nwhile [ ! -e gate ]; do sleep 0.05; done\n",
    );
    let id = c.submit(&["-n", "3", "gate.sh"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(
        c.ok("sinfo", &["-h", "-o", "%P %D %t %T %C %c %m %N"]),
        format!(
            "debug* 1 mix mixed 3/1/0/4 4 4000 {node}\nbatch 1 mix mixed 3/1/0/4 4 4000 {node}\n"
        )
    );
    // -N: one line per node and partition.
    assert_eq!(
        c.ok("sinfo", &["-N"]),
        format!(
            "NODELIST   NODES PARTITION STATE \n\
             {node:<10}     1    debug* mix   \n\
             {node:<10}     1     batch mix   \n"
        )
    );
    // -l: a date line first, then long headers and states.
    let l = c.ok("sinfo", &["-l"]);
    let lines: Vec<&str> = l.lines().collect();
    assert_eq!(
        lines[1],
        "PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST"
    );
    assert!(
        lines[2].starts_with("debug*       up    1:00:00 1-infinite")
            && lines[2].contains(" mixed "),
        "{l}"
    );
    let nl = c.ok("sinfo", &["-N", "-l"]);
    assert!(
        nl.lines()
            .nth(2)
            .unwrap()
            .contains("mixed 4       1:4:1   4000"),
        "{nl}"
    );
    // -t filters on state.
    assert_eq!(c.ok("sinfo", &["-h", "-t", "idle", "-o", "%P"]), "");
    assert_eq!(
        c.ok("sinfo", &["-h", "-t", "mix,alloc", "-o", "%P"]),
        "debug*\nbatch\n"
    );
    // -s: summary with A/I/O/T node counts.
    assert_eq!(
        c.ok("sinfo", &["-s", "-p", "debug"]),
        format!(
            "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n\
             debug*       up    1:00:00          1/0/0/1 {node}\n"
        )
    );
    std::fs::write(c.path("gate"), "").unwrap();
    c.wait_done(id);
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%t"]), "idle\nidle\n");
    // Partition filter and the -R reasons view.
    assert_eq!(
        c.ok("sinfo", &["-p", "nosuch"]),
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
    );
    assert_eq!(
        c.ok("sinfo", &["-R"]),
        "REASON               USER      TIMESTAMP           NODELIST\n"
    );
}

#[test]
fn version_is_the_emulated_slurms_and_configurable() {
    let c = TestCluster::start();
    assert_eq!(c.ok("sinfo", &["--version"]), "slurm 22.05.8\n");
    assert_eq!(c.ok("sinfo", &["-V"]), "slurm 22.05.8\n");
    // Configured, and answered without a controller (tools probe it before anything).
    let conf = c.dir.path().join("other.toml");
    std::fs::write(
        &conf,
        format!(
            "slurm_version = \"24.11.1\"\nsocket = \"{}/nowhere.sock\"\n",
            c.dir.path().display()
        ),
    )
    .unwrap();
    for cmd in ["sinfo", "sbatch", "squeue", "scancel", "scontrol", "sacct"] {
        let o = c
            .cmd(cmd)
            .arg("--version")
            .env("SLUICE_CONF", &conf)
            .output()
            .unwrap();
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        assert_eq!(stdout(&o), "slurm 24.11.1\n", "{cmd}");
    }
}

#[test]
fn bad_input() {
    let c = TestCluster::start();
    let (code, out, err) = c.fails("sinfo", &["--bogus"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with("sinfo: unrecognized option '--bogus'\n"),
        "{err}"
    );
    let (code, _, err) = c.fails("sinfo", &["-t", "bogus"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid node state specified: bogus"), "{err}");
}
