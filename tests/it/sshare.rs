//! sshare and fair-share through the real controller: the tree from `[[accounts]]`,
//! usage recorded when jobs end and kept across a restart, the factor in sprio, and
//! the calls of COMPAT.md §2.8.

use crate::harness::*;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name
}

/// Accounts `research` (70 shares) and `other` (30), the test user in both.
fn cluster() -> TestCluster {
    let top = format!(
        r#"
[[accounts]]
name = "research"
fairshare = 70
users = ["{me}"]
[[accounts]]
name = "other"
fairshare = 30
users = ["{me}"]
"#,
        me = me()
    );
    TestCluster::start_with(Setup {
        top: Box::leak(top.into_boxed_str()),
        ..Setup::default()
    })
}

/// `account|user|rawusage` rows of `sshare -a -n -P`.
fn usage_rows(c: &TestCluster) -> Vec<(String, String, u64)> {
    c.ok("sshare", &["-a", "-n", "-P", "-o", "account,user,rawusage"])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            (
                f[0].trim().to_string(),
                f[1].to_string(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn raw_usage(c: &TestCluster, account: &str, user: &str) -> u64 {
    usage_rows(c)
        .into_iter()
        .find(|r| r.0 == account && r.1 == user)
        .map(|r| r.2)
        .unwrap()
}

#[test]
fn sshare_shows_the_tree_and_keeps_usage_across_restart() {
    let mut c = cluster();
    let me = me();
    let out = c.ok("sshare", &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
    );
    assert_eq!(
        lines[2],
        "root                                          0.000000           0      1.000000            "
    );
    // The association tree always holds user root under account root (1 share, next
    // to 30 and 70): its row is the caller's only when the caller is root.
    let mut rest: Vec<&str> = lines[3..].to_vec();
    if me == "root" {
        assert!(
            rest[0].starts_with(" root ") && rest[0].contains(" 0.009901 "),
            "{out}"
        );
        rest.remove(0);
    }
    // Accounts sorted by name, each followed by the caller's row.
    assert!(rest[0].starts_with(" other "), "{out}");
    assert!(rest[0].contains("        30    0.297030 "), "{out}");
    assert!(
        rest[1].starts_with("  other ") && rest[1].contains(&me),
        "{out}"
    );
    assert!(
        rest[2].starts_with(" research ") && rest[2].contains("0.693069"),
        "{out}"
    );
    assert!(
        rest[3].starts_with("  research ") && rest[3].contains(&me),
        "{out}"
    );
    assert_eq!(rest.len(), 4, "{out}");
    // A 2-CPU job of 2 s charged to research.
    let id = c.submit(&[
        "-n2",
        "-A",
        "research",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    // One snapshot: RawUsage is truncated and decays, so separate calls may differ
    // by one.
    let rows = usage_rows(&c);
    let get = |a: &str, u: &str| rows.iter().find(|r| r.0 == a && r.1 == u).unwrap().2;
    let used = get("research", &me);
    assert!((3..=8).contains(&used), "{used}");
    assert!(get("research", "").abs_diff(used) <= 1, "{rows:?}");
    assert!(get("root", "").abs_diff(used) <= 1, "{rows:?}");
    assert_eq!(get("other", &me), 0);
    let long = c.ok("sshare", &["-l", "-A", "research", "-n"]);
    assert!(long.contains("cpu=0,mem=0,energy=0,node=0,b+"), "{long}");
    // sacct goes through the store after the job's record and usage were queued, so
    // they are written before the controller is killed.
    c.ok("sacct", &["-j", &id.to_string()]);
    c.kill9_controller();
    c.start_controller();
    let after = raw_usage(&c, "research", &me);
    // Kept; decay over a few seconds of a 7-day half-life takes a fraction of a
    // CPU-second (RawUsage is truncated, as Slurm prints it).
    assert!(
        after > 0 && after <= used && after + 1 >= used,
        "{after} vs {used}"
    );
}

#[test]
fn usage_lowers_the_fair_share_factor_in_sprio() {
    let c = cluster();
    let id = c.submit(&[
        "-n4",
        "-A",
        "research",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 2",
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    // Hold the node, then queue one job per account.
    let hold = c.submit(&["-n4", "-o", "/dev/null", "--wrap", "sleep 60"]);
    c.wait_state(hold, &["RUNNING"], WAIT);
    let r = c.submit(&["-n1", "-A", "research", "--wrap", "true"]);
    let o = c.submit(&["-n1", "-A", "other", "--wrap", "true"]);
    let fs = |id: u32| -> u32 {
        c.ok("sprio", &["-h", "-o", "%F", "-j", &id.to_string()])
            .trim()
            .parse()
            .unwrap()
    };
    // other is under its share (no usage): its user ranks first; research's below.
    assert_eq!(fs(o), 10000);
    assert!(fs(r) < 10000, "{}", fs(r));
    let prio = c.ok("squeue", &["-h", "-o", "%i %Q", "-t", "PD"]);
    let p = |id: u32| -> u64 {
        prio.lines()
            .find_map(|l| l.strip_prefix(&format!("{id} ")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    assert!(p(o) > p(r), "{prio}");
    c.ok(
        "scancel",
        &[&hold.to_string(), &r.to_string(), &o.to_string()],
    );
}

#[test]
fn compat_calls_work() {
    let c = cluster();
    let me = me();
    // prometheus-slurm-exporter: `sshare -n -P -o account,fairshare`.
    let out = c.ok("sshare", &["-n", "-P", "-o", "account,fairshare"]);
    let mine = if me == "root" { " root|1.000000\n" } else { "" };
    assert_eq!(
        out,
        format!("root|\n{mine} other|\n  other|1.000000\n research|\n  research|1.000000\n")
    );
    // `sshare -U --format Account%256 --noheader`: the caller's accounts.
    let out = c.ok("sshare", &["-U", "--format", "Account%256", "--noheader"]);
    let accts: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|a| *a != "root")
        .collect();
    assert_eq!(accts, ["other", "research"]);
    assert!(out.lines().all(|l| l.len() == 257));
    let out = c.ok("sshare", &["-u", &me, "-U", "-P", "-n", "-o", "user"]);
    let n = if me == "root" { 3 } else { 2 };
    assert_eq!(out, format!("{me}\n").repeat(n));
    let (code, err) = c.fails_err("sshare", &["-o", "bogus"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid field"), "{err}");
    let (code, _) = c.fails_err("sshare", &["-M", "elsewhere"]);
    assert_eq!(code, 1);
    c.ok("sshare", &["-M", "testc", "-a", "-l"]);
}

/// Accounts declared in `[[accounts]]` are in the association tree: sacctmgr lists them
/// with their shares, and they can be changed like any other.
#[test]
fn config_accounts_are_in_the_sacctmgr_tree() {
    let mut c = cluster();
    let me = me();
    let out = c.ok(
        "sacctmgr",
        &["-n", "-P", "show", "assoc", "format=Account,User,Share"],
    );
    assert!(out.contains("research||70\n"), "{out}");
    assert!(out.contains("other||30\n"), "{out}");
    assert!(out.contains(&format!("research|{me}|1\n")), "{out}");
    let accts = c.ok(
        "sacctmgr",
        &["-n", "-P", "show", "account", "format=Account"],
    );
    assert_eq!(accts, "other\nresearch\nroot\n");
    // Changed with sacctmgr, the change survives a restart (the database wins).
    c.ok(
        "sacctmgr",
        &["-i", "modify", "account", "research", "set", "Fairshare=50"],
    );
    c.kill9_controller();
    c.start_controller();
    let out = c.ok(
        "sacctmgr",
        &[
            "-n",
            "-P",
            "show",
            "assoc",
            "where",
            "account=research",
            "format=Account,User,Share",
        ],
    );
    assert!(out.starts_with("research||50\n"), "{out}");
}
