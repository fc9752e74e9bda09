//! Fair-share in the controller with an injected clock: usage recorded per
//! association while jobs run and when they end, decay, the factor in priorities and
//! the order jobs start in.

use super::*;
use crate::ctld::testutil::{ALICE, BOB, cluster_with, end, pass, spec, submit};
use crate::model::TimeLimit;

/// One CPU; accounts `a` (70 shares, user u2001 = alice) and `b` (30, u2002 = bob).
fn cluster() -> Cluster {
    cluster_with(
        1,
        r#"
[priority]
decay_half_life = "1:00:00"
[[accounts]]
name = "a"
fairshare = 70
users = ["u2001"]
[[accounts]]
name = "b"
fairshare = 30
users = ["u2002"]
"#,
    )
}

fn job(account: &str) -> crate::model::JobSpec {
    let mut s = spec(account);
    s.account = Some(account.into());
    s.time_limit = Some(TimeLimit::Minutes(30));
    s
}

fn fs_of(c: &Cluster, id: u32, now: i64) -> f64 {
    let (rows, _) = c.priority_rows(&[id], &[], now);
    rows[0].factors.fairshare
}

#[test]
fn usage_orders_jobs_by_fair_share() {
    let mut c = cluster();
    let k_a = ("a".to_string(), "u2001".to_string());
    // Alice's job runs alone for 600 s.
    let first = submit(&mut c, job("a"), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![first]);
    let a2 = submit(&mut c, job("a"), ALICE, 100);
    let b1 = submit(&mut c, job("b"), BOB, 100);
    // While it runs, alice's usage already counts: bob's job ranks above hers.
    assert!(fs_of(&c, b1, 300) > fs_of(&c, a2, 300));
    assert_eq!(fs_of(&c, b1, 300), 10000.0);
    // Three users (root/root is always in the tree): alice ranks last.
    assert!((fs_of(&c, a2, 300) - 10000.0 / 3.0).abs() < 1e-9);
    // The accounting tick charges 300 CPU-seconds; the end charges the rest.
    let mut fx = Effects::default();
    c.accrue_usage(300, &mut fx);
    assert!(fx.usage.is_some());
    assert_eq!(c.acct.ledger.usage[&k_a], 300.0);
    end(&mut c, first, 0, 600);
    // 300 s decayed by 300 s of a 1 h half-life, plus the last 300 s.
    let want = 300.0 * (-300.0f64 / 3600.0).exp2() + 300.0;
    assert!((c.acct.ledger.usage[&k_a] - want).abs() < 1e-6);
    // Bob's job starts first although alice's was submitted first.
    assert_eq!(pass(&mut c, 600), vec![b1]);
    let s = c.fairshare_tree(600, true);
    let ia = s
        .assocs
        .iter()
        .position(|x| x.user.as_deref() == Some("u2001"));
    assert!(s.shares[ia.unwrap()].raw_usage > 0.0);
}

#[test]
fn equal_usage_against_unequal_shares() {
    let mut c = cluster();
    // Both used 1000 CPU-seconds: a (70 %) is under its share, b (30 %) over.
    c.acct.ledger.charge(("a".into(), "u2001".into()), 1000.0);
    c.acct.ledger.charge(("b".into(), "u2002".into()), 1000.0);
    let b1 = submit(&mut c, job("b"), BOB, 0);
    let a1 = submit(&mut c, job("a"), ALICE, 0);
    assert!(fs_of(&c, a1, 0) > fs_of(&c, b1, 0));
    assert_eq!(pass(&mut c, 0), vec![a1]);
}

#[test]
fn decay_and_reset_forget_old_usage() {
    let mut c = cluster_with(
        1,
        "[priority]\ndecay_half_life = \"1:00:00\"\nusage_reset_period = \"DAILY\"\n",
    );
    let k = ("root".to_string(), "u2001".to_string());
    c.acct.ledger.charge(k.clone(), 1000.0);
    let mut fx = Effects::default();
    c.accrue_usage(3600, &mut fx);
    assert!((c.acct.ledger.usage[&k] - 500.0).abs() < 1e-9);
    c.accrue_usage(86400, &mut fx);
    assert!(c.acct.ledger.usage.is_empty());
}

#[test]
fn classic_algorithm_is_selectable() {
    let mut c = cluster_with(1, "[priority]\nflags = \"NO_FAIR_TREE\"\n");
    assert_eq!(
        c.sched_cfg.priority.fairshare_algorithm,
        crate::sched::fairshare::Algorithm::Classic
    );
    c.acct.ledger.charge(("root".into(), "u2001".into()), 300.0);
    c.acct.ledger.charge(("root".into(), "u2002".into()), 100.0);
    let a1 = submit(&mut c, spec("x"), ALICE, 0);
    // Three users under root (root/root too), 1/3 of the shares each: 2^(-0.75 × 3).
    assert!((fs_of(&c, a1, 0) - 10000.0 * (-2.25f64).exp2()).abs() < 1e-6);
}

#[test]
fn restored_usage_survives_and_reset_now_clears_it() {
    let mut c = cluster();
    let mut l = crate::sched::fairshare::UsageLedger::default();
    l.charge(("a".into(), "u2001".into()), 42.0);
    c.restore_usage(l.clone(), 1000);
    assert_eq!(c.acct.ledger.usage.len(), 1);
    assert_eq!(c.acct.ledger.accrued_at, 1000);
    let mut c = cluster_with(1, "[priority]\nusage_reset_period = \"NOW\"\n");
    c.restore_usage(l, 1000);
    assert!(c.acct.ledger.usage.is_empty());
}

#[test]
fn sacctmgr_tree_feeds_fair_share() {
    use crate::model::assoc::{Account, Shares, UserAssoc};
    // No [[accounts]]: the association tree (as sacctmgr builds it) is used.
    let mut c = cluster_with(1, "");
    for (name, shares) in [("phys", 80), ("chem", 20)] {
        let mut a = Account::new(name, Some("root"));
        a.shares = Shares::Raw(shares);
        c.acct.assoc.accounts.insert(name.into(), a);
    }
    c.acct
        .assoc
        .user_assocs
        .push(UserAssoc::new("u2001", "phys", None));
    c.acct
        .assoc
        .user_assocs
        .push(UserAssoc::new("u2002", "chem", None));
    // Equal usage: chem (20 %) is far over its share, phys under.
    c.acct.ledger.charge(("phys".into(), "u2001".into()), 500.0);
    c.acct.ledger.charge(("chem".into(), "u2002".into()), 500.0);
    let rows = c.share_rows(0);
    let phys = rows
        .iter()
        .find(|r| r.account == "phys" && r.user.is_none());
    assert_eq!(phys.unwrap().raw_shares, Some(80));
    let user = |u: &str| {
        rows.iter()
            .find(|r| r.user.as_deref() == Some(u))
            .unwrap()
            .share
            .fairshare
    };
    assert!(user("u2001") > user("u2002"));
    // root/root (no usage) ranks first of three users.
    assert_eq!(user("root"), 1.0);
}
