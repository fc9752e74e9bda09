//! Bad input gets Slurm's meaning (an error naming the problem, a non-zero exit, no job
//! created); a front-end that cannot reach the controller says so (and, in system mode,
//! how to start it); a corrupt or foreign database is refused, never replaced.

use crate::harness::*;
use std::process::Command;

#[test]
fn bad_sbatch_input_names_the_problem_and_creates_no_job() {
    let c = TestCluster::start();
    c.script("noshebang.sh", "echo no interpreter line\n");
    c.script("empty.sh", "");
    // (arguments, exit code, the whole of stderr)
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--time=abc", "--wrap", "true"],
            255,
            "sbatch: error: Invalid --time specification\n",
        ),
        (
            &["-p", "nosuch", "--wrap", "true"],
            1,
            "sbatch: error: invalid partition specified: nosuch\n\
             sbatch: error: Batch job submission failed: Invalid partition name specified\n",
        ),
        (
            &["--bogus-option", "--wrap", "true"],
            255,
            "sbatch: unrecognized option '--bogus-option'\nTry \"sbatch --help\" for more information\n",
        ),
        (
            &["nonexistent.sh"],
            1,
            "sbatch: error: Unable to open file nonexistent.sh\n",
        ),
        (
            &["noshebang.sh"],
            1,
            "sbatch: error: This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh\n",
        ),
        (&["empty.sh"], 1, "sbatch: error: Batch script is empty!\n"),
        (&[], 1, "sbatch: error: Batch script is empty!\n"),
        (
            &["--begin=garbage", "--wrap", "true"],
            255,
            "Invalid time specification (pos=0): garbage\nsbatch: error: Invalid --begin specification\n",
        ),
        (
            &["--wrap", "true", "extra_arg.sh"],
            1,
            "sbatch: error: Script arguments not permitted with --wrap option\n",
        ),
        (
            &["-n", "abc", "--wrap", "true"],
            255,
            "sbatch: error: Invalid numeric value \"abc\" for --ntasks.\n",
        ),
        (
            &["--mem=12Q", "--wrap", "true"],
            255,
            "sbatch: error: Invalid --mem specification\n",
        ),
        (
            &["--open-mode=bogus", "--wrap", "true"],
            255,
            "sbatch: error: Invalid --open-mode specification\n",
        ),
        (
            &["--signal=FOO", "--wrap", "true"],
            255,
            "sbatch: error: Invalid --signal specification\n",
        ),
        (
            &["-o"],
            255,
            "sbatch: option '--output' requires an argument\nTry \"sbatch --help\" for more information\n",
        ),
        (
            &["--mem=100G", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
        (
            &["-n", "64", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
        // Products of user counts that overflow (the controller once panicked here).
        (
            &["--ntasks-per-node=65536", "-N", "65536", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
        (
            &["-n", "65536", "-c", "65536", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
        ),
        (
            &["--nodes=2", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Node count specification invalid\n",
        ),
        (
            &["--time=2:00:00", "--wrap", "true"],
            1,
            "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)\n",
        ),
    ];
    for (args, code, err) in cases {
        let (got, out, e) = c.fails("sbatch", args);
        assert_eq!(
            (got, out.as_str(), e.as_str()),
            (*code, "", *err),
            "sbatch {args:?}"
        );
    }
    // Empty stdin, and a bad directive inside the script.
    let o = c.run_stdin("sbatch", &[], b"");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stderr(&o), "sbatch: error: Batch script is empty!\n");
    c.script("baddir.sh", "#!/bin/sh\n#SBATCH --time=soon\ntrue\n");
    let (code, _, e) = c.fails("sbatch", &["baddir.sh"]);
    assert_eq!(
        (code, e.as_str()),
        (255, "sbatch: error: Invalid --time specification\n")
    );
    // sacct refuses a window that ends before it starts (src/sacct/options.c).
    let (code, out, e) = c.fails("sacct", &["-S", "now-1days", "-E", "now-2days"]);
    assert_eq!((code, out.as_str()), (1, ""), "{e}");
    assert!(
        e.starts_with("sacct: error: Start time (")
            && e.contains(") requested is after end time ("),
        "{e}"
    );
    assert!(
        c.job_ids().is_empty(),
        "jobs were created: {:?}",
        c.job_ids()
    );
}

/// A config whose socket nobody listens on.
/// Runs `sluice ARGS` (a `controller …` command line) with `SLUICE_CONF=conf`.
fn controller_with(conf: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(sluice_bin())
        .args(args)
        .env("SLUICE_CONF", conf)
        .output()
        .unwrap()
}

fn dead_config(dir: &std::path::Path) -> std::path::PathBuf {
    let conf = dir.join("dead.toml");
    std::fs::write(
        &conf,
        format!(
            "state_dir = \"{0}/state\"\nsocket = \"{0}/run/ctld.sock\"\n",
            dir.display()
        ),
    )
    .unwrap();
    conf
}

#[test]
fn an_unreachable_controller_is_reported_in_one_line_plus_how_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dead_config(dir.path());
    let sock = dir.path().join("run/ctld.sock");
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "sbatch",
            &["--wrap", "true"],
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
        ),
        (
            "squeue",
            &[],
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
        ),
        (
            "sinfo",
            &[],
            "slurm_load_partitions: Unable to contact slurm controller (connect failure)",
        ),
        (
            "scancel",
            &["5"],
            "scancel: error: Unable to contact slurm controller (connect failure)",
        ),
        (
            "scontrol",
            &["show", "job"],
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
        ),
        (
            "sacct",
            &[],
            "sacct: error: Unable to contact slurm controller (connect failure)",
        ),
    ];
    for (cmd, args, line) in cases {
        let o = Command::new(sluice_bin())
            .arg(cmd)
            .args(*args)
            .env("SLUICE_CONF", &conf)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert_eq!(stdout(&o), "", "{cmd}");
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        // Slurm's own line (tools match it), then one line on how to start it.
        assert_eq!(lines.len(), 2, "{cmd}: {err}");
        assert_eq!(lines[0], *line, "{cmd}");
        assert_eq!(
            lines[1],
            format!(
                "sluice: no controller answers on {} (No such file or directory); start it as root: SLUICE_CONF={} sluice controller",
                sock.display(),
                conf.display()
            ),
            "{cmd}"
        );
    }
    // Nothing was started by those calls (system mode never auto-starts)...
    assert!(!sock.exists());
    // ...and the suggested command does start it, in the background.
    let o = controller_with(&conf, &["controller"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = Command::new(sluice_bin())
        .args(["squeue", "-h"])
        .env("SLUICE_CONF", &conf)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = controller_with(&conf, &["controller", "--stop"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!sock.exists());
}

#[test]
fn a_foreign_database_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dead_config(dir.path());
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    let db = dir.path().join("state/sluice.db");
    {
        // A valid SQLite database of some other application.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE recipes (name TEXT, minutes INTEGER);
             INSERT INTO recipes VALUES ('bread', 240);",
        )
        .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let o = controller_with(&conf, &["controller", "--foreground"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{} is not a sluice database", db.display()))
            && err.contains("refusing"),
        "{err}"
    );
    // Started in the background, the refusal reaches the caller too.
    let o = controller_with(&conf, &["controller"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is not a sluice database"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database was modified"
    );
    assert!(!dir.path().join("state/sluice.db-wal").exists());
}

#[test]
fn a_corrupt_database_in_personal_mode_is_reported_by_the_first_front_end() {
    if std::path::Path::new(sluice::config::SYSTEM_CONF).exists() {
        eprintln!(
            "skipping: {} exists, so personal mode is off",
            sluice::config::SYSTEM_CONF
        );
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join("state/sluice")).unwrap();
    let db = h.join("state/sluice/sluice.db");
    std::fs::write(&db, b"not a database at all\n".repeat(100)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let o = Command::new(sluice_bin())
        .args(["sbatch", "--wrap", "true"])
        .env_remove("SLUICE_CONF")
        .env("HOME", h)
        .env("XDG_STATE_HOME", h.join("state"))
        .env("XDG_RUNTIME_DIR", h.join("run"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("Unable to contact slurm controller"), "{err}");
    assert!(
        err.contains("is corrupt or not a database") && err.contains("Refusing to replace it"),
        "{err}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn the_multicall_binary_dispatches_and_refuses_unknown_roles() {
    let c = TestCluster::start();
    // `sluice <command>` is the same as the Slurm-named link.
    let a = c.ok("sluice", &["sbatch", "--parsable", "-H", "--wrap", "true"]);
    let b = c.ok("sbatch", &["--parsable", "-H", "--wrap", "true"]);
    assert_eq!(
        b.trim().parse::<u32>().unwrap(),
        a.trim().parse::<u32>().unwrap() + 1
    );
    assert_eq!(
        c.ok("sluice", &["squeue", "-h", "-o", "%i"]),
        c.ok("squeue", &["-h", "-o", "%i"])
    );
    let (code, _, err) = c.fails("sluice", &["bogus"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("sluice: unknown command 'bogus'\nusage: sluice <command>"),
        "{err}"
    );
    let (code, _, err) = c.fails("sluice", &["controller", "--bogus"]);
    assert_eq!(
        (code, err.as_str()),
        (2, "sluice controller: unknown option '--bogus'\n")
    );
    // srun and salloc are dispatched like the others (`sluice srun …`).
    assert_eq!(
        c.ok("sluice", &["srun", "sh", "-c", "echo via-sluice"]),
        "via-sluice\n"
    );
    assert_eq!(
        c.ok("sluice", &["salloc", "sh", "-c", "echo alloc-ok"]),
        "alloc-ok\n"
    );
}

#[test]
fn simulate_refuses_an_unbounded_scenario_length() {
    for bad in ["99999999999", "0", "-3", "x"] {
        let o = Command::new(sluice_bin())
            .args(["simulate", "--scenario", "fairshare", "--days", bad])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--days {bad}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--days needs a whole number from 1 to"),
            "{o:?}"
        );
    }
}

#[test]
fn a_second_controller_on_the_same_spool_is_refused_and_leaves_the_running_job_alone() {
    let c = TestCluster::start();
    let id = c.submit(&["--wrap", "sleep 2"]);
    c.wait_state(id, &["RUNNING"], std::time::Duration::from_secs(20));
    // Another database and socket, but the first controller's spool directory.
    let other = c.dir.path().join("other.toml");
    std::fs::write(
        &other,
        format!(
            "state_dir = \"{0}/state2\"\nsocket = \"{0}/run2/ctld.sock\"\nspool_dir = \"{0}/spool\"\n",
            c.dir.path().canonicalize().unwrap().display()
        ),
    )
    .unwrap();
    for args in [&["controller", "--foreground"][..], &["controller"][..]] {
        let o = controller_with(&other, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.contains("spool directory") && err.contains("in use by another controller"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("Unable to contact"), "{err}");
    }
    assert_eq!(c.wait_done(id), "COMPLETED");
}

#[test]
fn a_background_start_names_the_directory_it_cannot_create() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bad.toml");
    std::fs::write(
        &conf,
        "state_dir = \"/proc/sluice-no-such\"\nsocket = \"/proc/sluice-no-such/s.sock\"\n",
    )
    .unwrap();
    let o = controller_with(&conf, &["controller"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("cannot create state directory /proc/sluice-no-such"),
        "{err}"
    );
    assert!(!err.contains("Unable to contact"), "{err}");
}

/// A stderr that cannot be written (`2>/dev/full`) changes nothing: the front-end
/// exits as it would have (Slurm's commands ignore the failed write), not 101 from a
/// panic in the printing.
#[test]
fn an_unwritable_stderr_keeps_the_exit_status() {
    let c = TestCluster::start();
    let cases: &[(&str, &[&str], i32)] = &[
        ("sbatch", &["-t", "bad", "--wrap", "true"], 255),
        ("sbatch", &["-p", "nosuch", "--wrap", "true"], 1),
        ("scancel", &["abc"], 1),
        ("squeue", &["-u", "nosuchuser"], 0),
        ("sinfo", &["--bogus"], 1),
    ];
    for (cmd, args, code) in cases {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = c.cmd(cmd).args(*args).stderr(full).output().unwrap();
        assert_eq!(out.status.code(), Some(*code), "{cmd} {args:?}");
    }
    // The same for stdout (`sacct >/dev/full`, `sinfo --version >/dev/full`).
    for (cmd, args) in [
        ("sacct", &[][..]),
        ("sinfo", &["--version"][..]),
        ("scontrol", &["ping"][..]),
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = c.cmd(cmd).args(args).stdout(full).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{cmd} {args:?}: {}",
            stderr(&out)
        );
    }
}

/// An option's value is the next word whatever it starts with, as getopt_long takes it
/// (`-J -dash`, `squeue -S -i`).
#[test]
fn option_values_may_start_with_a_dash() {
    let c = TestCluster::start();
    let out = c.run(
        "sbatch",
        &["--parsable", "-H", "-J", "-dash", "--wrap", "true"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let first = stdout(&out).trim().to_string();
    let out = c.run(
        "sbatch",
        &["--parsable", "-H", "-J", "plain", "--wrap", "true"],
    );
    let second = stdout(&out).trim().to_string();
    let out = c.run("squeue", &["-h", "-S", "-i", "-o", "%i %j"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{second} plain\n{first} -dash\n"),
        "sorted by descending id"
    );
    let out = c.run("squeue", &["-h", "-n", "-dash", "-o", "%i"]);
    assert_eq!(stdout(&out), format!("{first}\n"));
    // `-j` takes a list only when one follows (Slurm's optional `j::`).
    let out = c.run("squeue", &["-j", "-h", "-o", "%i"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2);
}
