//! sacctmgr through the real front-end: adding, listing, changing and deleting
//! accounts, users and QOS in Slurm's layout; the exporters' invocations (COMPAT 2.8);
//! the tree surviving a controller restart; and `--account`/`--qos` validation at
//! submit once accounting is set up.

use crate::harness::*;

/// Runs a sacctmgr command that must fail; returns its stderr.
fn refused(c: &TestCluster, args: &[&str]) -> String {
    let (code, _, err) = c.fails("sacctmgr", args);
    assert_eq!(code, 1, "{args:?}: {err}");
    err
}

#[test]
fn sacctmgr_builds_lists_and_persists_the_tree() {
    let mut c = TestCluster::start();
    // A fresh controller: root account and user, QOS normal, nothing enforced.
    assert_eq!(
        c.ok(
            "sacctmgr",
            &[
                "show",
                "assoc",
                "format=Cluster,Account,User,Share,QOS",
                "-P"
            ]
        ),
        "Cluster|Account|User|Share|QOS\ntestc|root||1|normal\ntestc|root|root|1|normal\n"
    );
    let conf = c.ok("scontrol", &["show", "config"]);
    assert!(conf.contains("AccountingStorageEnforce = none"), "{conf}");

    let out = c.ok(
        "sacctmgr",
        &[
            "-i",
            "add",
            "account",
            "research",
            "Description=Research Lab",
            "Fairshare=70",
        ],
    );
    assert_eq!(
        out,
        " Adding Account(s)\n  research\n Settings\n  Description     = Research Lab\n  Organization    = Parent/Account Name\n Associations\n  A = research   C = testc     \n Settings\n  Parent        = root\n  Fairshare     = 70\n"
    );
    // Not on a terminal: committed without -i and without a prompt.
    let out = c.ok("sacctmgr", &["add", "user", "root", "Account=research"]);
    assert!(out.contains(" Associations ="), "{out}");
    assert!(!out.contains("Would you like to commit"), "{out}");
    c.ok("sacctmgr", &["-i", "add", "qos", "high", "Priority=100"]);

    // The exporters' invocations.
    assert_eq!(
        c.ok(
            "sacctmgr",
            &[
                "-nP",
                "show",
                "users",
                "withassoc",
                "format=account,qos",
                "where",
                "user=root",
                "cluster=testc"
            ]
        ),
        "research|normal\nroot|normal\n"
    );
    assert_eq!(
        c.ok(
            "sacctmgr",
            &["-n", "-s", "list", "user", "root", "format=account%256"]
        )
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>(),
        ["research", "root"]
    );
    c.ok(
        "sacctmgr",
        &[
            "-i",
            "modify",
            "account",
            "where",
            "name=research",
            "set",
            "GrpTRES=cpu=8",
            "GrpJobs=5",
            "GrpSubmit=9",
        ],
    );
    assert_eq!(
        c.ok(
            "sacctmgr",
            &[
                "show",
                "assoc",
                "format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit",
                "--noheader",
                "--parsable2"
            ]
        ),
        "|root||||\nroot|root||||\n|research|8||5|9\nroot|research||||\n"
    );
    // Fixed-width layout: Slurm's headers and widths.
    let qos = c.ok("sacctmgr", &["show", "qos", "format=Name,Priority,MaxWall"]);
    assert_eq!(
        qos,
        "      Name   Priority     MaxWall \n---------- ---------- ----------- \n      high        100             \n    normal          0             \n"
    );
    let conf = c.ok("scontrol", &["show", "config"]);
    assert!(
        conf.contains("AccountingStorageEnforce = associations,limits,qos"),
        "{conf}"
    );

    // Refusals name the problem and change nothing.
    let err = refused(&c, &["-i", "add", "user", "bob", "Account=nope"]);
    assert!(err.contains("This account 'nope' doesn't exist"), "{err}");
    let err = refused(&c, &["show", "assoc", "format=Bogus"]);
    assert!(err.contains("Unknown field 'Bogus'"), "{err}");
    let err = refused(&c, &["-i", "delete", "account", "root"]);
    assert!(err.contains("root account can not be deleted"), "{err}");
    let out = c.run(
        "sacctmgr",
        &[
            "-i",
            "modify",
            "qos",
            "where",
            "name=nope",
            "set",
            "Priority=1",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), " Nothing modified\n");

    // The tree is in the database: a restarted controller has it.
    c.kill9_controller();
    c.start_controller();
    let accts = c.ok(
        "sacctmgr",
        &["-nP", "show", "account", "format=Account,Descr"],
    );
    assert_eq!(accts, "research|Research Lab\nroot|default root account\n");

    let out = c.ok("sacctmgr", &["-i", "delete", "qos", "high"]);
    assert_eq!(out, " Deleting QOS(s)...\n  high\n");
    let out = c.ok(
        "sacctmgr",
        &["-i", "delete", "user", "root", "where", "account=research"],
    );
    assert!(out.starts_with(" Deleting user associations...\n"), "{out}");
    c.ok("sacctmgr", &["-i", "delete", "account", "research"]);
    assert_eq!(
        c.ok("sacctmgr", &["-nP", "show", "assoc", "format=Account,User"]),
        "root|\nroot|root\n"
    );
}

#[test]
fn submit_validates_account_and_qos_once_accounting_is_set_up() {
    let c = TestCluster::start();
    // Personal mode: any account or QOS name is taken as given.
    let id = c.submit(&["--account=anything", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_done(id);

    c.ok("sacctmgr", &["-i", "add", "account", "lab"]);
    c.ok("sacctmgr", &["-i", "add", "user", "root", "Account=lab"]);
    c.ok("sacctmgr", &["-i", "add", "qos", "high"]);
    let o = c.run("sbatch", &["--account=nope", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"
        ),
        "{}",
        stderr(&o)
    );
    // high exists but root's associations may not use it.
    let o = c.run("sbatch", &["--qos=high", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Batch job submission failed: Invalid qos specification"),
        "{}",
        stderr(&o)
    );
    // The default account is the user's DefaultAccount.
    let id = c.submit(&["-H", "--wrap", "true"]);
    assert_eq!(c.show_field(id, "Account"), "root");
    c.ok(
        "sacctmgr",
        &[
            "-i",
            "modify",
            "user",
            "root",
            "set",
            "DefaultAccount=lab",
            "QOS+=high",
        ],
    );
    let id = c.submit(&["-H", "--qos=high", "--wrap", "true"]);
    assert_eq!(c.show_field(id, "Account"), "lab");
    assert_eq!(c.show_field(id, "QOS"), "high");
    c.ok("scancel", &["--me"]);
}

/// sacctmgr on a terminal (a pty from util-linux `script`), answering `answer`.
fn on_tty(c: &TestCluster, cmd: &str, answer: &str) -> Option<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let which = Command::new("sh")
        .args(["-c", "command -v script"])
        .output()
        .ok()?;
    if !which.status.success() {
        return None;
    }
    let mut child = Command::new("script")
        .args(["-qec", &format!("{}/{cmd}", c.bin.display()), "/dev/null"])
        .env("SLUICE_CONF", &c.conf)
        .env("PATH", format!("{}:/usr/bin:/bin", c.bin.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    // Answer once the question is up (the pty would echo an early answer anyway).
    std::thread::sleep(std::time::Duration::from_millis(500));
    stdin.write_all(answer.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).replace('\r', ""))
}

#[test]
fn on_a_terminal_sacctmgr_asks_before_committing() {
    let c = TestCluster::start();
    let Some(out) = on_tty(&c, "sacctmgr add account ttyno", "n\n") else {
        eprintln!("skipping: util-linux script is not available");
        return;
    };
    assert!(
        out.contains("Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): "),
        "{out}"
    );
    assert!(out.contains(" Changes Discarded"), "{out}");
    let out = on_tty(&c, "sacctmgr add account ttyyes", "y\n").unwrap();
    assert!(out.contains(" Adding Account(s)\n  ttyyes"), "{out}");
    let accts = c.ok("sacctmgr", &["-nP", "show", "account", "format=Account"]);
    assert_eq!(accts, "root\nttyyes\n");
    // -i never asks.
    let out = on_tty(&c, "sacctmgr -i add account ttyi", "").unwrap();
    assert!(!out.contains("Would you like"), "{out}");
    assert!(
        c.ok(
            "sacctmgr",
            &["-nP", "show", "account", "ttyi", "format=Account"]
        )
        .contains("ttyi")
    );
}

/// `sacctmgr dump` writes the tree as Slurm's flat file and `sacctmgr load` adds what a
/// flat file holds and gives existing records the file's values.
#[test]
fn dump_and_load_flat_files() {
    let c = TestCluster::start();
    c.ok(
        "sacctmgr",
        &["-i", "add", "account", "phys", "Fairshare=70"],
    );
    c.ok(
        "sacctmgr",
        &["-i", "add", "user", "alice", "Account=phys", "MaxJobs=2"],
    );
    let file = c.dir.path().join("dump.cfg");
    let f = format!("File={}", file.display());
    c.ok("sacctmgr", &["dump", "testc", &f]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\nCluster - 'testc':Fairshare=1\n"), "{text}");
    assert!(
        text.contains("\nParent - 'root'\n")
            && text
                .contains("Account - 'phys':Description='phys':Organization='phys':Fairshare=70\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "Parent - 'phys'\nUser - 'alice':DefaultAccount='phys':Fairshare=1:MaxJobs=2\n"
        ),
        "{text}"
    );
    let load = c.dir.path().join("load.cfg");
    std::fs::write(
        &load,
        "Cluster - 'testc'\nParent - 'root'\nAccount - 'phys':Fairshare=5\nAccount - 'chem':Description='Chemistry'\nParent - 'chem'\nUser - 'bob':DefaultAccount='chem':GrpJobs=4\n",
    )
    .unwrap();
    let out = c.ok("sacctmgr", &["-i", "load", &load.display().to_string()]);
    assert!(out.contains("  chem"), "{out}");
    // phys exists: it takes the file's values, and the summary says so.
    assert!(
        out.contains(" Changed fairshare             for Account phys             70 -> 5\n"),
        "{out}"
    );
    let assoc = c.ok(
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "format=Account,User,Share,GrpJobs",
        ],
    );
    assert!(assoc.contains("chem|bob|1|4\n"), "{assoc}");
    assert!(assoc.contains("phys||5|\n"), "{assoc}");
    // alice is not in the file: her association stays as it was.
    assert_eq!(
        c.ok(
            "sacctmgr",
            &["-n", "-P", "show", "assoc", "user=alice", "format=MaxJobs"]
        ),
        "2\n"
    );
    // A file for another cluster is refused and changes nothing.
    std::fs::write(
        &load,
        "Cluster - 'elsewhere'\nParent - 'root'\nAccount - 'x'\n",
    )
    .unwrap();
    let (code, err) = c.fails_err("sacctmgr", &["-i", "load", &load.display().to_string()]);
    assert_eq!(code, 1);
    assert!(err.contains("elsewhere"), "{err}");
    assert!(
        !c.ok(
            "sacctmgr",
            &["-n", "-P", "show", "account", "format=Account"]
        )
        .contains("x\n")
    );
}
