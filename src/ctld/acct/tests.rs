//! Controller-side accounting: account/QOS resolution, refusals at submit, who may
//! change the tree, and limits applied by the scheduling pass.

use super::super::state::Cluster;
use super::super::testutil::*;
use crate::model::acct_ops::{AcctOp, Entity, Setting};
use crate::model::{JobState, Reason};
use crate::proto::SlurmError;

fn op(entity: Entity, names: &[&str], args: &[&str]) -> AcctOp {
    AcctOp::Add {
        entity,
        names: names.iter().map(|s| s.to_string()).collect(),
        settings: args.iter().map(|a| Setting::parse(a).unwrap()).collect(),
    }
}

/// A cluster whose tree has account `lab` with user u2001 (alice) in it.
fn with_lab(extra: &str) -> Cluster {
    let mut c = cluster_with(8, extra);
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(&op(Entity::Account, &["lab"], &[]), true, root, "root")
        .unwrap();
    c.acct_change(
        &op(Entity::User, &["u2001"], &["Account=lab"]),
        true,
        root,
        "root",
    )
    .unwrap();
    c
}

#[test]
fn personal_mode_enforces_nothing_until_accounts_exist() {
    let mut c = cluster_with(8, "");
    assert_eq!(c.enforce().as_text(), "none");
    let mut s = spec("a");
    s.account = Some("whatever".into());
    s.qos = Some("nope".into());
    assert!(c.resolve(s, ALICE, 1, &names).is_ok());
    let id = submit(&mut c, spec("b"), ALICE, 1);
    assert_eq!(pass(&mut c, 1), vec![id]);
}

#[test]
fn default_account_and_invalid_account_or_qos() {
    let c = with_lab("");
    assert_eq!(c.enforce().as_text(), "associations,limits,qos");
    let j = c.resolve(spec("a"), ALICE, 1, &names).unwrap();
    assert_eq!(j.account, "lab");
    assert_eq!(j.qos, "normal");
    // bob has no association.
    assert_eq!(
        c.resolve(spec("b"), BOB, 1, &names).unwrap_err(),
        SlurmError::InvalidAccount
    );
    let mut s = spec("c");
    s.account = Some("other".into());
    assert_eq!(
        c.resolve(s, ALICE, 1, &names).unwrap_err(),
        SlurmError::InvalidAccount
    );
    let mut s = spec("d");
    s.qos = Some("high".into());
    assert_eq!(
        c.resolve(s, ALICE, 1, &names).unwrap_err(),
        SlurmError::InvalidQos
    );
    assert_eq!(
        SlurmError::InvalidAccount.to_string(),
        "Invalid account or account/partition combination specified"
    );
    assert_eq!(
        SlurmError::InvalidQos.to_string(),
        "Invalid qos specification"
    );
}

#[test]
fn explicit_enforce_none_accepts_unknown_users() {
    let c = with_lab("accounting_storage_enforce = \"none\"");
    assert!(c.resolve(spec("b"), BOB, 1, &names).is_ok());
}

#[test]
fn only_admins_change_the_tree() {
    let mut c = with_lab("");
    let err = c
        .acct_change(&op(Entity::Account, &["x"], &[]), true, ALICE, "u2001")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Your user doesn't have privilege to perform this action"
    );
    assert!(c.assoc.account("x").is_none());
    // An Operator may.
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity: Entity::User,
            cond: crate::model::acct_ops::Cond {
                names: vec!["u2001".into()],
                ..Default::default()
            },
            settings: vec![Setting::parse("AdminLevel=Operator").unwrap()],
        },
        true,
        root,
        "root",
    )
    .unwrap();
    // A preview changes nothing.
    c.acct_change(&op(Entity::Account, &["x"], &[]), false, ALICE, "u2001")
        .unwrap();
    assert!(c.assoc.account("x").is_none());
    c.acct_change(&op(Entity::Account, &["x"], &[]), true, ALICE, "u2001")
        .unwrap();
    assert!(c.assoc.account("x").is_some());
}

#[test]
fn max_jobs_holds_the_second_job_with_slurms_reason() {
    let mut c = with_lab("");
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity: Entity::User,
            cond: crate::model::acct_ops::Cond {
                names: vec!["u2001".into()],
                ..Default::default()
            },
            settings: vec![Setting::parse("MaxJobs=1").unwrap()],
        },
        true,
        root,
        "root",
    )
    .unwrap();
    let a = submit(&mut c, spec("a"), ALICE, 1);
    let b = submit(&mut c, spec("b"), ALICE, 1);
    assert_eq!(pass(&mut c, 1), vec![a]);
    assert_eq!(c.jobs[&b].state, JobState::Pending);
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocMaxJobsLimit");
    assert!(matches!(c.jobs[&b].reason, Reason::Limit(_)));
}

#[test]
fn max_submit_refuses_at_submit_and_max_wall_caps_the_default_time() {
    let mut c = with_lab("");
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity: Entity::User,
            cond: crate::model::acct_ops::Cond {
                names: vec!["u2001".into()],
                ..Default::default()
            },
            settings: vec![
                Setting::parse("MaxSubmitJobs=1").unwrap(),
                Setting::parse("MaxWall=00:10:00").unwrap(),
            ],
        },
        true,
        root,
        "root",
    )
    .unwrap();
    let a = submit(&mut c, spec("a"), ALICE, 1);
    assert_eq!(
        c.jobs[&a].time_limit,
        crate::model::TimeLimit::Minutes(10),
        "no --time: MaxWall applies"
    );
    assert_eq!(
        c.resolve(spec("b"), ALICE, 1, &names).unwrap_err(),
        SlurmError::AccountingPolicy
    );
}

#[test]
fn grp_tres_mins_counts_what_finished_jobs_used() {
    let mut c = with_lab("");
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity: Entity::Account,
            cond: crate::model::acct_ops::Cond {
                names: vec!["lab".into()],
                ..Default::default()
            },
            settings: vec![Setting::parse("GrpTRESMins=cpu=10").unwrap()],
        },
        true,
        root,
        "root",
    )
    .unwrap();
    let mut s = spec("a");
    s.ntasks = Some(2);
    let a = submit(&mut c, s, ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    // 2 CPUs for 6 minutes: 12 CPU-minutes, past the limit of 10.
    end(&mut c, a, 0, 360);
    assert!(c.used_dirty, "usage must be saved");
    let used = c.used_mins.accounts["lab"]["cpu"];
    assert!((used - 12.0).abs() < 0.01, "{used}");
    let b = submit(&mut c, spec("b"), ALICE, 360);
    assert!(pass(&mut c, 360).is_empty());
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpCPUMinutesLimit");
    // Usage decays (half-life 7 days by default): two weeks later it is below 10.
    assert_eq!(pass(&mut c, 360 + 14 * 86400), vec![b]);
}
