//! The fair-share scenario converges to the shares (a shorter run than the reported
//! week), a control without fair-share does not, and traces mapped to accounts get
//! fair-share priorities.

use super::*;

fn run(s: &Scenario) -> ScenarioResult {
    run_scenario(s).unwrap()
}

#[test]
fn seventy_thirty_converges_within_five_percent() {
    for alg in [Algorithm::FairTree, Algorithm::Classic] {
        let s = Scenario {
            algorithm: alg,
            ..Scenario::seventy_thirty(2)
        };
        let r = run(&s);
        assert!(r.worst_relative_error() < 0.05, "{alg:?}: {r:?}");
        assert!((r.utilization - 1.0).abs() < 1e-9, "{r:?}");
        let a = &r.accounts[0];
        assert_eq!((a.0.as_str(), a.1), ("acct_a", 0.7));
    }
}

#[test]
fn gpu_hours_converge_too() {
    let r = run(&Scenario::seventy_thirty_gpu(2));
    assert!(r.worst_relative_error() < 0.05, "{r:?}");
    assert!((r.utilization - 1.0).abs() < 1e-9, "{r:?}");
    // 32 GPUs busy for 2 days.
    let total: f64 = r.accounts.iter().map(|a| a.2).sum();
    assert!((total - 32.0 * 48.0).abs() < 1e-6, "{r:?}");
}

#[test]
fn without_fair_share_equal_demand_gets_equal_service() {
    // The control: the same demand with PriorityWeightFairshare=0 splits ~50/50, so
    // the convergence above is fair-share's doing.
    let s = Scenario {
        weight_fairshare: 0,
        ..Scenario::seventy_thirty(2)
    };
    let r = run(&s);
    assert!(r.worst_relative_error() > 0.25, "{r:?}");
    assert!((r.accounts[0].3 - 0.5).abs() < 0.05, "{r:?}");
}

#[test]
fn unequal_shares_three_ways() {
    let s = Scenario {
        accounts: vec![("x".into(), 50), ("y".into(), 30), ("z".into(), 20)],
        ..Scenario::seventy_thirty(3)
    };
    let r = run(&s);
    assert!(r.worst_relative_error() < 0.05, "{r:?}");
}

#[test]
fn bad_scenarios_are_refused() {
    let mut s = Scenario::seventy_thirty(1);
    s.job_cpus = 17;
    assert!(run_scenario(&s).is_err());
    let mut s = Scenario::seventy_thirty(1);
    s.accounts.clear();
    assert!(run_scenario(&s).is_err());
}

#[test]
fn trace_users_mapped_to_accounts_get_fair_share() {
    use crate::sim::{default_cluster, sim_config, simulate, swf};
    // Two CPUs. User 1 runs first (jobs 1-2, 100 s each, both CPUs busy); then user 1
    // and user 2 each queue a full-machine job at t=10 (user 1's first): with fair
    // share, user 2 (no usage) goes first.
    let t = swf::parse(
        "; MaxProcs: 2\n\
         1 0 -1 100 2 -1 -1 2 100 -1 1 1 -1 -1 -1 -1 -1 -1\n\
         2 10 -1 100 2 -1 -1 2 100 -1 1 1 -1 -1 -1 -1 -1 -1\n\
         3 11 -1 100 2 -1 -1 2 100 -1 1 2 -1 -1 -1 -1 -1 -1\n",
    )
    .unwrap();
    let (n, p) = default_cluster(2);
    let plain = simulate(&t, &n, &p, &sim_config(Policy::Easy)).unwrap();
    assert!(plain.accounts.is_empty());
    let mut cfg = sim_config(Policy::Easy);
    cfg.priority.accounts = vec![
        AccountDef {
            name: "a".into(),
            parent: None,
            shares: 1,
        },
        AccountDef {
            name: "b".into(),
            parent: None,
            shares: 1,
        },
    ];
    cfg.priority.user_assocs = vec![
        UserDef {
            user: "1".into(),
            account: "a".into(),
            shares: 1,
        },
        UserDef {
            user: "2".into(),
            account: "b".into(),
            shares: 1,
        },
    ];
    let fair = simulate(&t, &n, &p, &cfg).unwrap();
    // FIFO order: job 2 waits 90 s, job 3 189 s; fair-share swaps them: 3 waits 89 s,
    // 2 waits 190 s.
    assert_eq!(plain.mean_wait, (0.0 + 90.0 + 189.0) / 3.0);
    assert_eq!(fair.mean_wait, (0.0 + 190.0 + 89.0) / 3.0);
    let hours = |a: &str| fair.accounts.iter().find(|x| x.0 == a).unwrap().1;
    assert!((hours("a") - 400.0 / 3600.0).abs() < 1e-9);
    assert!((hours("b") - 200.0 / 3600.0).abs() < 1e-9);
}
