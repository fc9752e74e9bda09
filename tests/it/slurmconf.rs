//! `sluice config import|export` through the real binary: a Slurm 22.05 configuration
//! (the fixture in tests/data/slurm, modelled on the reference cluster) comes in
//! as TOML the loader takes, goes out as Slurm files, and comes in again as the same
//! cluster; `SLUICE_CONF` pointing at a slurm.conf says how to convert it; an export
//! with the controller up carries its accounts as a `sacctmgr load` file and its QOS
//! as sacctmgr commands (both checked by hand against Slurm 22.05). Where
//! Debian's Slurm daemons are installed, slurmd also reads the exported files.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/slurm")
        .join(name)
}

fn sluice(args: &[&str], conf: Option<&Path>) -> std::process::Output {
    let mut c = Command::new(sluice_bin());
    c.args(args);
    match conf {
        Some(p) => c.env("SLUICE_CONF", p),
        None => c.env_remove("SLUICE_CONF"),
    };
    c.output().expect("run sluice")
}

/// What the loader makes of the nodes, partitions and GRES of a TOML file.
fn cluster(path: &Path) -> (Vec<String>, Vec<sluice::model::Partition>) {
    let c = sluice::config::Config::from_file(path).unwrap_or_else(|e| panic!("{e}"));
    let nodes = c
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{} {:?} {:?} {:?} {:?} {:?} {:?}",
                n.name,
                n.cpus,
                n.memory,
                n.sockets,
                n.features,
                n.ssh,
                n.gres_devices().unwrap()
            )
        })
        .collect();
    (nodes, c.partitions)
}

#[test]
fn config_import_then_export_then_import_gives_the_same_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.toml");
    let f = |n: &str| fixture(n).display().to_string();
    let o = sluice(
        &[
            "config",
            "import",
            &f("slurm.conf"),
            &f("cgroup.conf"),
            &f("gres.conf"),
            &f("topology.conf"),
            "-o",
            first.to_str().unwrap(),
        ],
        None,
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(stdout(&o), "", "with -o the TOML goes to the file");
    // Line by line, what was not carried and why.
    let slurm_conf = f("slurm.conf");
    for want in [
        format!("{slurm_conf}:9: AuthType=auth/munge: not carried: "),
        format!("{slurm_conf}:71: PrologFlags=X11: not carried: not supported yet by sluice"),
        "DenyQos=scavenger: not carried".to_string(),
        "CgroupAutomount=no: not carried".to_string(),
    ] {
        assert!(err.contains(&want), "missing '{want}' in:\n{err}");
    }
    // SlurmctldDebug is the controller's starting log level.
    let toml = std::fs::read_to_string(&first).unwrap();
    assert!(toml.contains("slurmctld_debug = \"info\"\n"), "{toml}");
    let (nodes, parts) = cluster(&first);
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(
        nodes[0].starts_with("node01 Some(32) Some(16000) Some(2)"),
        "{nodes:?}"
    );
    assert!(nodes[1].contains("Some(\"root@10.1.0.11\")"), "{nodes:?}");
    let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["debug", "batch", "long"]);

    // Out to Slurm's files (no controller answers: the notes say accounts stay behind).
    let out = dir.path().join("slurm");
    let o = sluice(
        &["config", "export", "--slurm", out.to_str().unwrap()],
        Some(&first),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("accounts, users and QOS: not exported"),
        "{}",
        stderr(&o)
    );
    for name in ["slurm.conf", "gres.conf", "topology.conf", "cgroup.conf"] {
        assert!(out.join(name).is_file(), "{name} not written");
    }
    // Files already there are not overwritten unless asked.
    std::fs::write(out.join("cgroup.conf"), "# mine\n").unwrap();
    let again = |extra: &[&str]| {
        let mut a = vec!["config", "export", "--slurm", out.to_str().unwrap()];
        a.extend_from_slice(extra);
        sluice(&a, Some(&first))
    };
    let o = again(&[]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nothing written"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("cgroup.conf")).unwrap(),
        "# mine\n"
    );
    assert!(again(&["--force"]).status.success());
    assert_ne!(
        std::fs::read_to_string(out.join("cgroup.conf")).unwrap(),
        "# mine\n"
    );
    let conf = std::fs::read_to_string(out.join("slurm.conf")).unwrap();
    assert!(
        conf.contains("\nPartitionName=debug Nodes=node01 Default=YES MaxTime=01:00:00"),
        "{conf}"
    );

    // And in again: the same cluster.
    let second = dir.path().join("second.toml");
    let o = sluice(
        &[
            "config",
            "import",
            out.join("slurm.conf").to_str().unwrap(),
            "-o",
            second.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("reading ") && stderr(&o).contains("gres.conf"),
        "the files next to slurm.conf are read: {}",
        stderr(&o)
    );
    assert_eq!(cluster(&first), cluster(&second));
    real_slurm_reads(&out);
}

/// Where Debian's Slurm is installed (see ../shared/reference-slurm/setup.sh), its
/// own parsers read the export: `sinfo` parses slurm.conf before it looks for a
/// controller (a bad key or line is a fatal parse error), and `slurmd -G` parses
/// slurm.conf and gres.conf for a node of this machine (it checks device files and
/// CPU ids against the machine, so it gets an export of its own). Skipped, saying so,
/// where Slurm is not installed.
fn real_slurm_reads(dir: &Path) {
    let (sinfo, slurmd) = (Path::new("/usr/bin/sinfo"), Path::new("/usr/sbin/slurmd"));
    if !sinfo.exists() || !slurmd.exists() {
        eprintln!(
            "skipped: Slurm's sinfo and slurmd are not installed here, so the exported files were not given to a real Slurm (see reference-slurm/setup.sh)"
        );
        return;
    }
    let o = Command::new(sinfo)
        .env("SLURM_CONF", dir.join("slurm.conf"))
        .output()
        .expect("run sinfo");
    let err = stderr(&o);
    assert!(
        !err.contains("Parse") && !err.contains("fatal") && !err.contains("unrecognized"),
        "Slurm's sinfo refused the exported slurm.conf:\n{err}"
    );
    // One node: this machine, with a GPU whose device file exists.
    let here = sluice::config::short_hostname();
    let tmp = tempfile::tempdir().unwrap();
    let toml = tmp.path().join("s.toml");
    std::fs::write(
        &toml,
        format!(
            "cluster_name = \"g\"\nsocket = \"{sock}\"\n[[nodes]]\nname = \"{here}\"\ncpus = 1\nmemory = 100\n\
             [[gres]]\nnodes = \"{here}\"\nname = \"gpu\"\nfile = \"/dev/null\"\ncores = \"0\"\n\
             [[partitions]]\nname = \"p\"\nnodes = \"{here}\"\n",
            sock = tmp.path().join("none.sock").display()
        ),
    )
    .unwrap();
    let out = tmp.path().join("slurm");
    let o = sluice(
        &["config", "export", "--slurm", out.to_str().unwrap()],
        Some(&toml),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new(slurmd)
        .args(["-G", "-N", &here, "-f"])
        .arg(out.join("slurm.conf"))
        .output()
        .expect("run slurmd");
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "slurmd -G refused the export:\n{all}");
    assert!(!all.contains("error:"), "slurmd -G complained:\n{all}");
    assert!(
        all.contains("Gres Name=gpu") && all.contains("File=/dev/null"),
        "slurmd -G did not read the exported gres.conf:\n{all}"
    );
}

#[test]
fn sluice_conf_pointing_at_a_slurm_conf_says_how_to_convert_it() {
    let o = Command::new(sluice_bin())
        .arg("squeue")
        .env("SLUICE_CONF", fixture("slurm.conf"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("this is a Slurm slurm.conf, not a sluice TOML file")
            && err.contains("sluice config import"),
        "{err}"
    );
}

#[test]
fn config_export_with_the_controller_up_carries_accounts_and_detected_nodes() {
    let c = TestCluster::start();
    c.ok(
        "sacctmgr",
        &["-i", "add", "account", "physics", "Fairshare=30"],
    );
    c.ok("sacctmgr", &["-i", "add", "qos", "gold", "Priority=100"]);
    c.ok(
        "sacctmgr",
        &[
            "-i",
            "add",
            "user",
            "alice",
            "Account=physics",
            "QOS=normal,gold",
        ],
    );
    let out = c.dir.path().join("export");
    let o = c
        .cmd("sluice")
        .args(["config", "export", "--slurm", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // sacctmgr load's flat file, as `sacctmgr dump` writes it.
    let cfg = std::fs::read_to_string(out.join("testc.cfg")).unwrap();
    assert!(cfg.contains("Cluster - 'testc'"), "{cfg}");
    assert!(cfg.contains("Account - 'physics'"), "{cfg}");
    assert!(cfg.contains("User - 'alice'"), "{cfg}");
    assert!(cfg.contains("QOS='normal,gold'"), "{cfg}");
    // The flat file has no QOS records: they come as sacctmgr commands, run first.
    let qos = std::fs::read_to_string(out.join("testc-qos.sh")).unwrap();
    let lines: Vec<&str> = qos.lines().filter(|l| l.starts_with("sacctmgr")).collect();
    assert_eq!(lines[0], "sacctmgr -i add qos 'gold'", "{qos}");
    assert!(
        lines.iter().any(
            |l| l.starts_with("sacctmgr -i modify qos where name='gold' set ")
                && l.contains(" Priority=100 ")
        ),
        "{qos}"
    );
    assert!(!qos.contains("add qos 'normal'"), "{qos}");
    let conf = std::fs::read_to_string(out.join("slurm.conf")).unwrap();
    let node = c.node();
    assert!(
        conf.contains(&format!("NodeName={node} NodeAddr={node} CPUs=4 ")),
        "{conf}"
    );
    assert!(conf.contains("RealMemory=4000"), "{conf}");
}

/// A file slurmctld would refuse (a key it does not know, a number that is not one,
/// bytes that are not text) fails the import with each line named, exit 1, and
/// `-o` leaves no file behind.
#[test]
fn config_import_refuses_what_slurmctld_refuses_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.toml");
    let conf = dir.path().join("slurm.conf");
    std::fs::write(
        &conf,
        "ClusterName=x\nNodeName=a CPUs=2x\nPartitionName=p Nodes=a\nNoSuchKey=1\n",
    )
    .unwrap();
    let args = |c: &Path| {
        vec![
            "config".to_string(),
            "import".into(),
            c.display().to_string(),
            "-o".into(),
            out.display().to_string(),
        ]
    };
    let a = args(&conf);
    let o = sluice(&a.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("slurm.conf:2: CPUs=2x: not a number"), "{err}");
    assert!(
        err.contains("slurm.conf:4: NoSuchKey=1: unrecognized key"),
        "{err}"
    );
    assert!(!out.exists(), "a refused import wrote {}", out.display());

    let bin = dir.path().join("latin1.conf");
    std::fs::write(&bin, b"ClusterName=x\nNodeName=a CPUs=2\n# caf\xe9\n").unwrap();
    let a = args(&bin);
    let o = sluice(&a.iter().map(String::as_str).collect::<Vec<_>>(), None);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("latin1.conf:3: not valid UTF-8 text"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}
