//! `sluice doctor` tells the truth (issue 18): on a real cluster it reports the
//! isolation this user's controller really gets, agreeing with the node's `Reason=`,
//! finds declared GPUs that are not there, and says how to fix every finding that is
//! not ok.

use crate::harness::{Setup, TestCluster};

/// The report's findings: (verdict, what, text, fix) for each `  ok|warn|FAIL  what …`
/// line, with the `fix:` line that follows it, if any.
fn findings(report: &str) -> Vec<(String, String, String, Option<String>)> {
    let mut out: Vec<(String, String, String, Option<String>)> = Vec::new();
    for line in report.lines() {
        let t = line.trim_start();
        if let Some(fix) = t.strip_prefix("fix: ") {
            if let Some(last) = out.last_mut() {
                last.3 = Some(fix.to_string());
            }
            continue;
        }
        let mut w = t.splitn(2, "  ");
        let (Some(v), Some(rest)) = (w.next(), w.next()) else {
            continue;
        };
        if !matches!(v, "ok" | "warn" | "FAIL") {
            continue;
        }
        let rest = rest.trim_start();
        let (what, text) = rest.split_once(' ').unwrap_or((rest, ""));
        out.push((v.into(), what.into(), text.trim().into(), None));
    }
    out
}

fn doctor(c: &TestCluster) -> (i32, String) {
    let o = c.run("sluice", &["doctor"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code().unwrap_or(-1), out)
}

/// The node's reason as `sinfo -R` prints it (`None`: none).
fn node_reason(c: &TestCluster) -> Option<String> {
    let r = c.ok("sinfo", &["-R", "-h", "-o", "%E"]);
    Some(r.trim().to_string()).filter(|r| !r.is_empty())
}

#[test]
fn doctor_agrees_with_the_nodes_reason_and_says_how_to_fix_what_is_not_ok() {
    // Cgroups disabled: the agent reports degraded isolation, the node carries the
    // reason, and the doctor's probe (as this uid, with this configuration) says so.
    let c = TestCluster::start_with(Setup {
        cgroup: "plugin = \"disabled\"",
        ..Setup::default()
    });
    let reason = crate::harness::wait_until(
        "the node's isolation reason",
        std::time::Duration::from_secs(30),
        || node_reason(&c).filter(|r| r.starts_with("Isolation degraded")),
    );
    let (code, report) = doctor(&c);
    let f = findings(&report);
    let get = |what: &str| f.iter().find(|x| x.1 == what).cloned();
    let iso = get("isolation").unwrap_or_else(|| panic!("no isolation line:\n{report}"));
    assert_eq!(iso.0, "warn", "{report}");
    assert!(iso.2.contains("disabled by configuration"), "{report}");
    assert!(
        iso.3.as_deref().is_some_and(|x| x.contains("autodetect")),
        "{report}"
    );
    let state = get("state").unwrap_or_else(|| panic!("no state line:\n{report}"));
    assert!(state.2.contains(&format!("Reason={reason}")), "{report}");
    assert!(get("agreement").is_none(), "{report}");
    assert_eq!(
        get("controller").map(|x| x.0),
        Some("ok".into()),
        "{report}"
    );
    for x in &f {
        assert!(x.0 == "ok" || x.3.is_some(), "{x:?} has no fix:\n{report}");
    }
    // Nothing failed (a warning is not a failure).
    assert_eq!(code, 0, "{report}");
}

#[test]
fn doctor_finds_declared_gpus_that_are_not_there() {
    // More GPUs than any test machine has, declared without device files.
    let c = TestCluster::start_with(Setup {
        node_extra: "gres = \"gpu:64\"",
        ..Setup::default()
    });
    let (code, report) = doctor(&c);
    let f = findings(&report);
    let gpus = f
        .iter()
        .find(|x| x.1 == "gpus")
        .unwrap_or_else(|| panic!("no gpus line:\n{report}"));
    assert_eq!(gpus.0, "FAIL", "{report}");
    assert!(gpus.2.starts_with("64 declared, "), "{report}");
    assert!(
        gpus.3
            .as_deref()
            .is_some_and(|x| x.contains(&format!("node {}", c.node()))),
        "{report}"
    );
    assert_eq!(code, 1, "{report}");
}
