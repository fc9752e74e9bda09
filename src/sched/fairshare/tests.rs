//! Fair-share on small trees: the golden cluster's sshare figures, Fair Tree ranking,
//! the classic formula, decay and reset periods, and properties over random trees.

use super::*;
use proptest::prelude::*;

fn acct(name: &str, parent: Option<usize>, shares: u32) -> Assoc {
    Assoc {
        account: name.into(),
        user: None,
        parent,
        shares,
        usage: 0.0,
    }
}

fn user(account: &str, name: &str, parent: usize, shares: u32, usage: f64) -> Assoc {
    Assoc {
        account: account.into(),
        user: Some(name.into()),
        parent: Some(parent),
        shares,
        usage,
    }
}

/// The golden cluster: root → {root/root, research → {alice, bob}}, one share each.
fn golden(alice: f64, bob: f64) -> Vec<Assoc> {
    vec![
        acct("root", None, 1),
        user("root", "root", 0, 1, 0.0),
        acct("research", Some(0), 1),
        user("research", "alice", 2, 1, alice),
        user("research", "bob", 2, 1, bob),
    ]
}

#[test]
fn golden_sshare_without_usage() {
    let s = compute(&golden(0.0, 0.0), Algorithm::FairTree).unwrap();
    // root: NormShares 0, EffectvUsage 1; everyone else 0.5 of their level.
    assert_eq!((s[0].norm_shares, s[0].effectv_usage), (0.0, 1.0));
    for x in &s[1..] {
        assert_eq!(x.norm_shares, 0.5);
        assert_eq!(x.effectv_usage, 0.0);
        assert_eq!(x.level_fs, f64::INFINITY);
    }
    // All tied: every user ranks first.
    for i in [1, 3, 4] {
        assert_eq!(s[i].fairshare, 1.0);
    }
    assert_eq!(
        s.iter().map(|x| x.depth).collect::<Vec<_>>(),
        [0, 1, 1, 2, 2]
    );
}

#[test]
fn fair_tree_ranks_by_level_fairshare() {
    // alice used 300, bob 100: research holds all usage, root/root none.
    let s = compute(&golden(300.0, 100.0), Algorithm::FairTree).unwrap();
    assert_eq!(s[2].raw_usage, 400.0);
    assert_eq!(s[0].raw_usage, 400.0);
    assert_eq!(s[3].effectv_usage, 0.75);
    assert!((s[3].level_fs - 0.5 / 0.75).abs() < 1e-12);
    assert_eq!(s[4].level_fs, 2.0);
    // root/root (no usage, LevelFS ∞) first, then research's bob, then alice.
    assert_eq!(s[1].fairshare, 1.0);
    assert!((s[4].fairshare - 2.0 / 3.0).abs() < 1e-12, "{s:?}");
    assert!((s[3].fairshare - 1.0 / 3.0).abs() < 1e-12);
    assert!((s[3].norm_usage - 0.75).abs() < 1e-12);
}

#[test]
fn fair_tree_siblings_are_compared_before_their_children() {
    // a (70 shares) and b (30) each with one user; a used 80 %, b 20 %: a is over its
    // share, so b's user ranks above a's even though a's user has more raw shares.
    let t = vec![
        acct("root", None, 1),
        acct("a", Some(0), 70),
        acct("b", Some(0), 30),
        user("a", "u1", 1, 1, 80.0),
        user("b", "u2", 2, 1, 20.0),
    ];
    let s = compute(&t, Algorithm::FairTree).unwrap();
    assert!((s[1].level_fs - 0.7 / 0.8).abs() < 1e-12);
    assert!((s[2].level_fs - 0.3 / 0.2).abs() < 1e-12);
    assert_eq!(s[4].fairshare, 1.0);
    assert_eq!(s[3].fairshare, 0.5);
    // At exactly 70/30 they tie.
    let mut t = t;
    t[3].usage = 70.0;
    t[4].usage = 30.0;
    let s = compute(&t, Algorithm::FairTree).unwrap();
    assert_eq!(s[3].fairshare, s[4].fairshare);
}

#[test]
fn classic_formula() {
    let t = golden(300.0, 100.0);
    let s = compute(&t, Algorithm::Classic).unwrap();
    // NormShares multiply down: alice 0.5 × 0.5.
    assert_eq!(s[0].norm_shares, 1.0);
    assert_eq!(s[3].norm_shares, 0.25);
    // research under root: EffectvUsage = NormUsage = 1.
    assert_eq!(s[2].effectv_usage, 1.0);
    // alice: 0.75 + (1 − 0.75) × 0.5.
    assert!((s[3].effectv_usage - 0.875).abs() < 1e-12);
    assert!((s[3].fairshare - (-0.875f64 / 0.25).exp2()).abs() < 1e-12);
    assert!(s[4].fairshare > s[3].fairshare);
    // root/root has no usage: 2^0.
    assert_eq!(s[1].fairshare, 1.0);
}

#[test]
fn bad_trees_are_refused() {
    assert_eq!(compute(&[], Algorithm::FairTree), Err(TreeError::Empty));
    let t = vec![acct("root", None, 1), acct("a", Some(5), 1)];
    assert_eq!(
        compute(&t, Algorithm::FairTree),
        Err(TreeError::BadParent(1))
    );
    let t = vec![
        acct("root", None, 1),
        user("root", "x", 0, 1, 0.0),
        user("root", "y", 1, 1, 0.0),
    ];
    assert_eq!(
        compute(&t, Algorithm::FairTree),
        Err(TreeError::BadParent(2))
    );
    let t = vec![user("root", "x", 0, 1, 0.0)];
    assert_eq!(compute(&t, Algorithm::Classic), Err(TreeError::BadRoot));
}

#[test]
fn reset_periods_cross_utc_boundaries() {
    // 2026-11-29 is a Sunday.
    let sun = 1_795_910_400; // 2026-11-29T00:00:00Z
    let sat_noon = sun - 12 * 3600;
    assert!(ResetPeriod::Daily.crossed(sat_noon, sun));
    assert!(!ResetPeriod::Daily.crossed(sat_noon, sun - 1));
    assert!(ResetPeriod::Weekly.crossed(sat_noon, sun));
    assert!(!ResetPeriod::Weekly.crossed(sun, sun + 6 * 86400));
    // 2026-12-01T00:00:00Z starts a month, not a quarter.
    let dec1 = 1_796_083_200;
    assert!(ResetPeriod::Monthly.crossed(dec1 - 1, dec1));
    assert!(!ResetPeriod::Quarterly.crossed(dec1 - 1, dec1));
    let jan1 = dec1 + 31 * 86400;
    assert!(ResetPeriod::Quarterly.crossed(jan1 - 1, jan1));
    assert!(ResetPeriod::Yearly.crossed(jan1 - 1, jan1));
    assert!(!ResetPeriod::Yearly.crossed(dec1, jan1 - 1));
    assert!(!ResetPeriod::None.crossed(0, i64::MAX / 2));
    assert_eq!(ResetPeriod::parse("weekly"), Some(ResetPeriod::Weekly));
    assert_eq!(ResetPeriod::parse("hourly"), None);
}

#[test]
fn ledger_decays_accrues_and_resets() {
    let k = ("a".to_string(), "u".to_string());
    let mut l = UsageLedger {
        decayed_at: 1000,
        accrued_at: 1000,
        ..Default::default()
    };
    // 4 CPUs since 400 (before the last tick): only 1000..1100 is charged.
    l.accrue(
        &[RunCharge::billing_only(k.clone(), 4.0, 400)],
        1100,
        100,
        ResetPeriod::None,
    );
    assert_eq!(l.usage[&k], 400.0);
    // One half-life later with nothing running: halved.
    l.accrue(&[], 1200, 100, ResetPeriod::None);
    assert_eq!(l.usage[&k], 200.0);
    // A job that ended at 1250 charges from the last tick only.
    l.charge_running(&RunCharge::billing_only(k.clone(), 2.0, 900), 1250);
    assert_eq!(l.usage[&k], 300.0);
    // A daily reset clears it.
    l.accrue(&[], 86400 + 10, 100, ResetPeriod::Daily);
    assert!(l.usage.is_empty());
    // Time going backwards changes nothing.
    l.charge(k.clone(), 5.0);
    l.accrue(
        &[RunCharge::billing_only(k.clone(), 1.0, 0)],
        50,
        100,
        ResetPeriod::None,
    );
    assert_eq!(l.usage[&k], 5.0);
}

#[test]
fn tree_from_definitions() {
    let accounts = vec![
        AccountDef {
            name: "a".into(),
            parent: None,
            shares: 70,
        },
        AccountDef {
            name: "b".into(),
            parent: Some("a".into()),
            shares: 30,
        },
        // Cycle: c ↔ d.
        AccountDef {
            name: "c".into(),
            parent: Some("d".into()),
            shares: 1,
        },
        AccountDef {
            name: "d".into(),
            parent: Some("c".into()),
            shares: 1,
        },
    ];
    let users = vec![UserDef {
        user: "alice".into(),
        account: "b".into(),
        shares: 2,
    }];
    let mut ledger = UsageLedger::default();
    ledger.charge(("b".into(), "alice".into()), 50.0);
    ledger.charge(("nosuch".into(), "bob".into()), 50.0);
    let extra = vec![("".to_string(), "carol".to_string())];
    let t = FairShareTree::build(&accounts, &users, &ledger, &extra, Algorithm::FairTree);
    assert_eq!(t.shares.len(), t.assocs.len());
    let b = t
        .assocs
        .iter()
        .position(|x| x.account == "b" && x.user.is_none())
        .unwrap();
    assert_eq!(t.assocs[t.assocs[b].parent.unwrap()].account, "a");
    // bob's unknown account is filed under root; his usage counts.
    let bob = t
        .assocs
        .iter()
        .position(|x| x.user.as_deref() == Some("bob"))
        .unwrap();
    assert_eq!(t.assocs[bob].account, "root");
    assert_eq!(t.shares[bob].raw_usage, 50.0);
    assert_eq!(t.shares[0].raw_usage, 100.0);
    // carol (no usage) ranks first; alice and bob tie below? No: their levels differ.
    assert_eq!(t.factor("", "carol"), 1.0);
    assert!(t.factor("b", "alice") < 1.0);
    assert!(t.factor("nosuch", "bob") < 1.0);
    assert_eq!(t.factor("x", "nobody"), 1.0);
    // sshare order: root, its users, then accounts depth-first.
    let names: Vec<String> = t
        .display_order()
        .iter()
        .map(|&i| {
            let a = &t.assocs[i];
            format!("{}:{}", a.account, a.user.clone().unwrap_or_default())
        })
        .collect();
    assert_eq!(names[0], "root:");
    assert_eq!(&names[1..3], ["root:bob", "root:carol"]);
    assert_eq!(&names[3..6], ["a:", "b:", "b:alice"]);
}

/// A random two-level tree: accounts under root, users under accounts.
fn arb_tree() -> impl Strategy<Value = Vec<Assoc>> {
    prop::collection::vec(
        (
            0u32..100,
            prop::collection::vec((0u32..100, 0.0f64..1e6), 1..4),
        ),
        1..4,
    )
    .prop_map(|accts| {
        let mut t = vec![acct("root", None, 1)];
        let mut idx = Vec::new();
        for (k, (shares, _)) in accts.iter().enumerate() {
            idx.push(t.len());
            t.push(acct(&format!("a{k}"), Some(0), *shares));
        }
        for (k, (_, users)) in accts.iter().enumerate() {
            for (j, (shares, usage)) in users.iter().enumerate() {
                t.push(user(
                    &format!("a{k}"),
                    &format!("u{k}_{j}"),
                    idx[k],
                    *shares,
                    *usage,
                ));
            }
        }
        t
    })
}

fn algs() -> impl Strategy<Value = Algorithm> {
    prop_oneof![Just(Algorithm::FairTree), Just(Algorithm::Classic)]
}

proptest! {
    #[test]
    fn factor_is_in_unit_interval(t in arb_tree(), alg in algs()) {
        let s = compute(&t, alg).unwrap();
        for (a, x) in t.iter().zip(&s) {
            if a.user.is_some() {
                prop_assert!((0.0..=1.0).contains(&x.fairshare), "{x:?}");
            }
        }
    }

    #[test]
    fn more_usage_never_raises_the_factor(
        t in arb_tree(),
        alg in algs(),
        pick in 0usize..100,
        extra in 1.0f64..1e6,
    ) {
        let users: Vec<usize> = (0..t.len()).filter(|&i| t[i].user.is_some()).collect();
        let u = users[pick % users.len()];
        let before = compute(&t, alg).unwrap()[u].fairshare;
        let mut t2 = t.clone();
        t2[u].usage += extra;
        let after = compute(&t2, alg).unwrap()[u].fairshare;
        prop_assert!(after <= before + 1e-12, "{before} -> {after}");
    }

    #[test]
    fn usage_in_proportion_to_shares_gives_equal_factors(
        shares in prop::collection::vec(1u32..100, 2..6),
        scale in 1.0f64..1e6,
        alg in algs(),
    ) {
        // Every user under one account (Fair Tree) or under root (classic: below
        // root its EffectvUsage is pulled toward the parent's, so only root's
        // children have EffectvUsage = NormUsage), usage ∝ shares.
        let total: u32 = shares.iter().sum();
        let mut t = vec![acct("root", None, 1)];
        let parent = match alg {
            Algorithm::FairTree => {
                t.push(acct("a", Some(0), 1));
                1
            }
            Algorithm::Classic => 0,
        };
        let first = t.len();
        for (k, s) in shares.iter().enumerate() {
            let u = scale * f64::from(*s) / f64::from(total);
            t.push(user("a", &format!("u{k}"), parent, *s, u));
        }
        let out = compute(&t, alg).unwrap();
        let f: Vec<f64> = out[first..].iter().map(|x| x.fairshare).collect();
        for x in &f {
            prop_assert!((x - f[0]).abs() < 1e-9, "{f:?}");
        }
    }
}

#[test]
fn tied_accounts_have_their_children_ranked_together() {
    // a and b tie (equal shares, equal usage); within them, a's user u1 used less of a
    // than b's u3 of b, so u1 ranks first even though b's u4 is b's best.
    let t = vec![
        acct("root", None, 1),
        acct("a", Some(0), 1),
        acct("b", Some(0), 1),
        user("a", "u1", 1, 1, 10.0),
        user("a", "u2", 1, 1, 90.0),
        user("b", "u3", 2, 1, 40.0),
        user("b", "u4", 2, 1, 60.0),
    ];
    let s = compute(&t, Algorithm::FairTree).unwrap();
    assert_eq!(s[1].level_fs, s[2].level_fs);
    // LevelFS: u1 5.0, u3 1.25, u4 0.833, u2 0.556.
    let f: Vec<f64> = s[3..].iter().map(|x| x.fairshare).collect();
    assert_eq!(f, [1.0, 0.25, 0.75, 0.5]);
}

#[test]
fn a_user_tied_with_an_account_shares_its_first_users_rank() {
    // Nobody has usage: root's user, account a and its users all tie at LevelFS ∞.
    let t = vec![
        acct("root", None, 1),
        user("root", "r", 0, 1, 0.0),
        acct("a", Some(0), 1),
        user("a", "x", 2, 1, 0.0),
        user("a", "y", 2, 1, 0.0),
    ];
    let s = compute(&t, Algorithm::FairTree).unwrap();
    assert_eq!(
        [s[1].fairshare, s[3].fairshare, s[4].fairshare],
        [1.0, 1.0, 1.0]
    );
}
