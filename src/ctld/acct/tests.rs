//! Controller-side accounting: account/QOS resolution, refusals at submit, who may
//! change the tree, and limits applied by the scheduling pass.

use super::super::state::{Cluster, Effects, SignalScope};
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
fn a_personal_owner_keeps_an_association_when_the_tree_gets_defined() {
    // The controller of cluster_with runs as uid 999 (not root): its owner adds an
    // account, which turns enforcement on; the owner can still submit (under root,
    // as Slurm's root user can), others without an association cannot.
    let mut c = cluster_with(8, "");
    let owner = super::super::state::Caller { uid: 999, gid: 999 };
    c.acct_change(&op(Entity::Account, &["foo"], &[]), true, owner, "u999")
        .unwrap();
    assert_eq!(c.enforce().as_text(), "associations,limits,qos");
    let u = c.acct.assoc.user("u999").expect("the owner is a user");
    assert_eq!(u.default_account, "root");
    assert!(c.resolve(spec("mine"), owner, 1, &names).is_ok());
    assert!(c.resolve(spec("alice"), ALICE, 1, &names).is_err());
    // Once defined, later changes leave the owner's associations alone.
    let before = c.acct.assoc.user_assocs.len();
    c.acct_change(&op(Entity::Account, &["bar"], &[]), true, owner, "u999")
        .unwrap();
    assert_eq!(c.acct.assoc.user_assocs.len(), before);

    // A preview adds no one; neither does root defining the tree.
    let mut c = cluster_with(8, "");
    c.acct_change(&op(Entity::Account, &["foo"], &[]), false, owner, "u999")
        .unwrap();
    assert!(
        c.acct.assoc.user("u999").is_none(),
        "a preview changes nothing"
    );
    let mut c3 = cluster_with(8, "");
    c3.acct_change(
        &op(Entity::Account, &["foo"], &[]),
        true,
        ROOT_CALLER,
        "root",
    )
    .unwrap();
    assert!(
        c3.acct.assoc.user("u999").is_none(),
        "root defining the tree adds no one"
    );
}

const ROOT_CALLER: super::super::state::Caller = super::super::state::Caller { uid: 0, gid: 0 };

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
    assert!(c.acct.assoc.account("x").is_none());
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
    assert!(c.acct.assoc.account("x").is_none());
    c.acct_change(&op(Entity::Account, &["x"], &[]), true, ALICE, "u2001")
        .unwrap();
    assert!(c.acct.assoc.account("x").is_some());
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
    let key = ("lab".to_string(), "u2001".to_string());
    let used = c.acct.ledger.tres[&key]["cpu"];
    assert!(
        (used - 720.0).abs() < 0.01,
        "CPU-seconds in the ledger: {used}"
    );
    let b = submit(&mut c, spec("b"), ALICE, 360);
    assert!(pass(&mut c, 360).is_empty());
    let used = c.acct.used_mins.accounts["lab"]["cpu"];
    assert!((used - 12.0).abs() < 0.01, "{used}");
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpCPUMinutesLimit");
    // Usage decays (half-life 7 days by default): two weeks later it is below 10.
    assert_eq!(pass(&mut c, 360 + 14 * 86400), vec![b]);
}

/// Sets `settings` on the `entity` named `name`, as root.
fn modify(c: &mut Cluster, entity: Entity, name: &str, settings: &[&str]) {
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity,
            cond: crate::model::acct_ops::Cond {
                names: vec![name.into()],
                ..Default::default()
            },
            settings: settings
                .iter()
                .map(|a| Setting::parse(a).unwrap())
                .collect(),
        },
        true,
        root,
        "root",
    )
    .unwrap();
}

/// A job of alice with `cpus` tasks and a time limit of `mins` minutes.
fn sized(name: &str, cpus: u32, mins: u32) -> crate::model::JobSpec {
    let mut s = spec(name);
    s.ntasks = Some(cpus);
    s.time_limit = Some(crate::model::TimeLimit::Minutes(mins));
    s
}

#[test]
fn grp_tres_mins_counts_what_running_jobs_used_so_far() {
    let mut c = with_lab("");
    modify(&mut c, Entity::Account, "lab", &["GrpTRESMins=cpu=10"]);
    let a = submit(&mut c, sized("a", 2, 60), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    // Four minutes in: 8 CPU-minutes used, a job asking CPUs may still start.
    let b = submit(&mut c, sized("b", 1, 60), ALICE, 240);
    assert_eq!(pass(&mut c, 240), vec![b]);
    // Six minutes in, `a` still running: 12 + 2 CPU-minutes are past the limit, so
    // the next job waits although nothing has ended.
    let d = submit(&mut c, sized("d", 1, 60), ALICE, 360);
    assert!(pass(&mut c, 360).is_empty());
    assert_eq!(c.jobs[&a].state, JobState::Running);
    assert_eq!(c.jobs[&d].reason.as_str(), "AssocGrpCPUMinutesLimit");
    let used = c.acct.used_mins.accounts["lab"]["cpu"];
    assert!((used - 14.0).abs() < 0.01, "{used}");
}

#[test]
fn qos_grp_tres_mins_counts_running_jobs_too() {
    let mut c = with_lab("");
    modify(&mut c, Entity::Qos, "normal", &["GrpTRESMins=cpu=10"]);
    let a = submit(&mut c, sized("a", 4, 60), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    let b = submit(&mut c, sized("b", 1, 60), ALICE, 180);
    assert!(pass(&mut c, 180).is_empty());
    assert_eq!(c.jobs[&b].reason.as_str(), "QOSGrpCPUMinutesLimit");
}

#[test]
fn running_job_times_out_once_its_group_reaches_grp_tres_mins() {
    let mut c = with_lab("");
    modify(&mut c, Entity::Account, "lab", &["GrpTRESMins=cpu=10"]);
    let a = submit(&mut c, sized("a", 2, 60), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    let mut fx = Effects::default();
    c.accrue_usage(240, &mut fx);
    assert_eq!(c.jobs[&a].state, JobState::Running, "8 of 10 CPU-minutes");
    assert!(fx.usage.is_some(), "the ledger is saved at each tick");
    let mut fx = Effects::default();
    c.accrue_usage(330, &mut fx);
    // acct_policy_job_time_out: at the limit (11 decayed CPU-minutes), the job ends
    // TIMEOUT.
    assert_eq!(c.jobs[&a].state, JobState::Timeout);
    assert_eq!(c.jobs[&a].reason, Reason::TimeLimit);
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(
        m,
        crate::proto::ToAgent::Terminate { job_id, reason: Some(r), .. }
            if *job_id == a && r.contains("DUE TO TIME LIMIT")
    )));
}

#[test]
fn running_job_times_out_past_max_tres_mins_per_job() {
    let mut c = with_lab("");
    let a = submit(&mut c, sized("a", 2, 60), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    // The limit is lowered after the job started: 2 CPUs × 5 minutes passes 9.
    modify(&mut c, Entity::User, "u2001", &["MaxTRESMins=cpu=9"]);
    let mut fx = Effects::default();
    c.accrue_usage(240, &mut fx);
    assert_eq!(c.jobs[&a].state, JobState::Running, "2 × 4 + 1 ≤ 9");
    c.accrue_usage(300, &mut fx);
    assert_eq!(c.jobs[&a].state, JobState::Timeout);
}

#[test]
fn safe_grp_tres_mins_counts_time_left_and_never_ends_a_job() {
    let mut c = with_lab("accounting_storage_enforce = \"associations,limits,safe\"\n");
    modify(&mut c, Entity::Account, "lab", &["GrpTRESMins=cpu=100"]);
    let a = submit(&mut c, sized("a", 2, 30), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    // 0 used + 60 still to come for `a` + 60 asked: past 100.
    let b = submit(&mut c, sized("b", 2, 30), ALICE, 0);
    assert!(pass(&mut c, 0).is_empty());
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpCPUMinutesLimit");
    // 10 minutes later: 20 used + 40 to come + 60 asked, still past.
    assert!(pass(&mut c, 600).is_empty());
    // Safe never ends a running job for usage.
    let mut fx = Effects::default();
    c.accrue_usage(600, &mut fx);
    assert_eq!(c.jobs[&a].state, JobState::Running);
    // `a` ends at 10 minutes: 20 used + 60 asked fit.
    end(&mut c, a, 0, 600);
    assert_eq!(pass(&mut c, 600), vec![b]);
}

#[test]
fn usage_kept_apart_by_an_older_controller_joins_the_ledger() {
    let mut c = with_lab("");
    modify(
        &mut c,
        Entity::Account,
        "lab",
        &["GrpTRESMins=cpu=10", "GrpWall=5"],
    );
    let mut old = crate::sched::limits::UsedMins::default();
    old.record(
        &c.acct.assoc,
        ("u2001", "lab", "normal"),
        &[("cpu".to_string(), 2), ("billing".to_string(), 2)].into(),
        6.0,
    );
    old.record_wall(&c.acct.assoc, ("u2001", "lab", "normal"), 6.0);
    c.acct.ledger.decayed_at = 100;
    c.acct.ledger.accrued_at = 100;
    c.fold_legacy_usage(&old, 100);
    let key = ("lab".to_string(), "u2001".to_string());
    assert_eq!(c.acct.ledger.tres[&key]["cpu"], 720.0);
    assert!(!c.acct.ledger.tres[&key].contains_key("billing"));
    assert_eq!(c.acct.ledger.wall[&key], 360.0);
    assert_eq!(c.acct.ledger.qos["normal"].tres["cpu"], 720.0);
    let b = submit(&mut c, spec("b"), ALICE, 100);
    assert!(pass(&mut c, 100).is_empty());
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpWallLimit");
}

#[test]
fn delete_refuses_while_jobs_of_the_association_are_active() {
    let mut c = with_lab("");
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    let id = submit(&mut c, spec("a"), ALICE, 1);
    let del = AcctOp::Delete {
        entity: Entity::Account,
        cond: crate::model::acct_ops::Cond {
            names: vec!["lab".into()],
            ..Default::default()
        },
    };
    let before = c.acct.assoc.clone();
    let e = c.acct_change(&del, true, root, "root").unwrap_err();
    let SlurmError::Other(text) = e else {
        panic!("{e:?}")
    };
    assert!(
        text.starts_with(
            " Error with request: Job(s) active, cancel job(s) before remove\n  JobID = "
        ),
        "{text}"
    );
    assert!(text.contains(&format!("JobID = {id:<10} ")), "{text}");
    assert!(text.contains("A = lab "), "{text}");
    assert_eq!(c.acct.assoc, before);
    // Once the job is gone, the account (and its only user) can go.
    c.jobs.get_mut(&id).unwrap().state = JobState::Cancelled;
    let out = c.acct_change(&del, true, root, "root").unwrap();
    assert!(out.lines.iter().any(|l| l == "  u2001"), "{:?}", out.lines);
    assert!(c.acct.assoc.account("lab").is_none());
}

#[test]
fn config_accounts_join_the_tree_and_the_database_wins() {
    let mut c = cluster_with(
        8,
        r#"
[[accounts]]
name = "child"
parent = "phys"
fairshare = 3
users = ["u2001"]
[[accounts]]
name = "phys"
fairshare = 70
users = ["u2001", "u2002"]
"#,
    );
    assert!(!c.acct.assoc.is_defined());
    let (notes, changed) = c.merge_config_accounts();
    assert!(changed && notes.is_empty(), "{notes:?}");
    let t = &c.acct.assoc;
    assert_eq!(t.account("phys").unwrap().parent.as_deref(), Some("root"));
    assert_eq!(t.account("child").unwrap().parent.as_deref(), Some("phys"));
    assert_eq!(
        t.account("phys").unwrap().shares,
        crate::model::assoc::Shares::Raw(70)
    );
    // u2001 is listed first under child: that is their default account.
    assert_eq!(t.default_account("u2001"), Some("child"));
    assert_eq!(t.default_account("u2002"), Some("phys"));
    assert!(t.find_assoc("u2001", "phys", "debug").is_some());
    // They now behave as sacctmgr's: alice's job lands in her default account, bob
    // may not use one he has no association with.
    let j = c.resolve(spec("a"), ALICE, 1, &names).unwrap();
    assert_eq!(j.account, "child");
    let mut s = spec("b");
    s.account = Some("child".into());
    assert_eq!(
        c.resolve(s, BOB, 1, &names).unwrap_err(),
        SlurmError::InvalidAccount
    );
    // A sacctmgr change to a config account survives the next merge.
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    c.acct_change(
        &AcctOp::Modify {
            entity: Entity::Account,
            cond: crate::model::acct_ops::Cond {
                names: vec!["phys".into()],
                ..Default::default()
            },
            settings: vec![Setting::parse("Fairshare=5").unwrap()],
        },
        true,
        root,
        "root",
    )
    .unwrap();
    let (notes, changed) = c.merge_config_accounts();
    assert!(!changed);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("the database wins"), "{notes:?}");
    assert_eq!(
        c.acct.assoc.account("phys").unwrap().shares,
        crate::model::assoc::Shares::Raw(5)
    );
}

const CAROL: super::super::state::Caller = super::super::state::Caller {
    uid: 2003,
    gid: 2003,
};

/// `with_lab` plus account `sub` under lab, account `other` under root, bob (u2002)
/// in `sub`, carol (u2003) in `other`, and alice (u2001) coordinating `lab`.
fn with_coordinator() -> Cluster {
    let mut c = with_lab("");
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    for (e, n, a) in [
        (Entity::Account, "sub", &["Parent=lab"][..]),
        (Entity::Account, "other", &[][..]),
        (Entity::User, "u2002", &["Account=sub"][..]),
        (Entity::User, "u2003", &["Account=other"][..]),
        (Entity::Coordinator, "u2001", &["Account=lab"][..]),
    ] {
        c.acct_change(&op(e, &[n], a), true, root, "root").unwrap();
    }
    for (uid, name) in [(2001, "u2001"), (2002, "u2002"), (2003, "u2003")] {
        c.groups.user_names.insert(uid, name.into());
    }
    c
}

#[test]
fn coordinators_change_only_what_lies_in_their_accounts() {
    let mut c = with_coordinator();
    let denied =
        SlurmError::Other("Your user doesn't have privilege to perform this action".into());
    let as_alice = |c: &mut Cluster, o: AcctOp| c.acct_change(&o, true, ALICE, "u2001");
    let modify_op = |e: Entity, n: &str, s: &[&str]| AcctOp::Modify {
        entity: e,
        cond: crate::model::acct_ops::Cond {
            names: vec![n.into()],
            ..Default::default()
        },
        settings: s.iter().map(|a| Setting::parse(a).unwrap()).collect(),
    };
    // Users and associations under lab (sub-accounts included).
    as_alice(&mut c, op(Entity::User, &["u2004"], &["Account=sub"])).unwrap();
    assert!(c.acct.assoc.find_assoc("u2004", "sub", "").is_some());
    as_alice(&mut c, modify_op(Entity::User, "u2002", &["MaxJobs=2"])).unwrap();
    // A sub-account and its limits; not lab's own association.
    as_alice(&mut c, op(Entity::Account, &["sub2"], &["Parent=lab"])).unwrap();
    as_alice(&mut c, modify_op(Entity::Account, "sub", &["GrpJobs=3"])).unwrap();
    let before = c.acct.assoc.clone();
    for o in [
        modify_op(Entity::Account, "lab", &["GrpJobs=3"]),
        op(Entity::User, &["u2005"], &["Account=other"]),
        op(Entity::Account, &["x"], &["Parent=other"]),
        op(
            Entity::User,
            &["u2005"],
            &["Account=sub", "AdminLevel=Operator"],
        ),
        modify_op(Entity::User, "u2002", &["AdminLevel=Operator"]),
        modify_op(Entity::User, "u2003", &["MaxJobs=1"]),
        op(Entity::Qos, &["high"], &[]),
        op(Entity::Coordinator, &["u2002"], &["Account=other"]),
    ] {
        assert_eq!(as_alice(&mut c, o.clone()).unwrap_err(), denied, "{o:?}");
    }
    assert_eq!(
        c.acct.assoc, before,
        "a refused change leaves the tree as it was"
    );
    // A coordinator may name another coordinator of their accounts.
    as_alice(
        &mut c,
        op(Entity::Coordinator, &["u2002"], &["Account=sub"]),
    )
    .unwrap();
    assert!(c.acct.assoc.coordinates("u2002", "sub"));
    // Someone who coordinates nothing changes nothing.
    assert_eq!(
        c.acct_change(
            &op(Entity::User, &["u2006"], &["Account=other"]),
            true,
            CAROL,
            "u2003"
        )
        .unwrap_err(),
        denied
    );
}

#[test]
fn coordinators_manage_the_jobs_of_their_accounts() {
    let mut c = with_coordinator();
    let mut s = spec("bobs");
    s.account = Some("sub".into());
    s.hold = true;
    let bobs = submit(&mut c, s, BOB, 1);
    let carols = submit(&mut c, spec("carols"), CAROL, 1);
    assert_eq!(c.jobs[&carols].account, "other");
    let mut fx = Effects::default();
    // alice coordinates lab, so bob's job in lab's sub-account is hers to manage.
    assert_eq!(c.release(&[bobs], &[], ALICE, 2, &mut fx)[0].error, None);
    assert_eq!(c.hold(&[bobs], &[], false, ALICE, &mut fx)[0].error, None);
    assert_eq!(
        c.jobs[&bobs].reason,
        Reason::JobHeldUser,
        "a coordinator's hold is the user's"
    );
    let upd = [crate::proto::JobUpdate::Name("renamed".into())];
    c.update_job(bobs, None, &upd, ALICE, &mut fx).unwrap();
    assert_eq!(c.jobs[&bobs].spec.name, "renamed");
    // Not carol's: `other` is not under lab.
    assert_eq!(
        c.release(&[carols], &[], ALICE, 2, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.update_job(carols, None, &upd, ALICE, &mut fx)
            .unwrap_err(),
        SlurmError::AccessDenied
    );
    let f = |id| crate::proto::JobFilter {
        ids: vec![id],
        ..Default::default()
    };
    assert_eq!(
        c.cancel(&f(carols), None, SignalScope::Steps, ALICE, 3, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    // Nor may bob (no coordinator) touch alice's jobs; alice cancels bob's.
    let alices = submit(&mut c, spec("alices"), ALICE, 3);
    assert_eq!(
        c.cancel(&f(alices), None, SignalScope::Steps, BOB, 3, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.cancel(&f(bobs), None, SignalScope::Steps, ALICE, 3, &mut fx)[0].error,
        None
    );
    assert_eq!(c.jobs[&bobs].state, JobState::Cancelled);
}

#[test]
fn sshare_rows_carry_the_grp_tres_mins_limits() {
    let mut c = with_lab("");
    modify(&mut c, Entity::Account, "lab", &["GrpTRESMins=cpu=600"]);
    modify(&mut c, Entity::User, "u2001", &["GrpTRESMins=gres/gpu=60"]);
    let rows = c.share_rows(0);
    let of = |acct: &str, user: Option<&str>| {
        rows.iter()
            .find(|r| r.account == acct && r.user.as_deref() == user)
            .map(|r| r.grp_tres_mins.clone())
    };
    assert_eq!(of("lab", None).as_deref(), Some("cpu=600"));
    assert_eq!(of("lab", Some("u2001")).as_deref(), Some("gres/gpu=60"));
    assert_eq!(of("root", None).as_deref(), Some(""));
}

/// TRESBillingWeights make one billing figure: the job record's (what sacct and
/// scontrol print), what the usage ledger charges per second, and what GrpTRES and
/// GrpTRESMins `billing=` limits compare (before, limits counted CPUs while the
/// ledger counted weights).
#[test]
fn billing_weights_are_one_figure_for_records_ledger_and_limits() {
    // 2 CPUs and 1000 MiB per job: 2 × 1.0 + 1000 MiB × 2 per GiB ≈ 3.95 billed.
    let mut c = with_lab("[priority]\nbilling_weights = \"CPU=1.0,Mem=2G\"\n");
    let job = |name: &str| {
        let mut s = sized(name, 2, 60);
        s.mem = Some(crate::model::MemReq::PerNode(1000));
        s
    };
    let billed = 2.0 + 1000.0 * 2.0 / 1024.0;
    let a = submit(&mut c, job("a"), ALICE, 0);
    assert_eq!(c.jobs[&a].billing, Some(billed));
    // GrpTRES=billing=5: one job (3 billed, truncated as Slurm counts) fits, two (6)
    // do not; counting CPUs (2 + 2) both would have started.
    modify(&mut c, Entity::Account, "lab", &["GrpTRES=billing=5"]);
    let b = submit(&mut c, job("b"), ALICE, 0);
    assert_eq!(pass(&mut c, 0), vec![a]);
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpBilling");
    assert_eq!(c.jobs[&a].billing, Some(billed));
    // The ledger charges the same figure per second.
    let run = c.running_usage();
    assert_eq!(run.len(), 1);
    assert!((run[0].billing - billed).abs() < 1e-9);
    // GrpTRESMins=billing: 10 minutes of `a` used 39.5 billing-minutes.
    modify(
        &mut c,
        Entity::Account,
        "lab",
        &["GrpTRES=billing=-1", "GrpTRESMins=billing=30"],
    );
    let mut fx = Effects::default();
    c.accrue_usage(600, &mut fx);
    let key = ("lab".to_string(), "u2001".to_string());
    assert!((c.acct.ledger.usage[&key] - billed * 600.0).abs() < 1e-6);
    assert!(pass(&mut c, 600).is_empty());
    assert_eq!(c.jobs[&b].reason.as_str(), "AssocGrpBillingMinutes");
}

/// A coordinator acts on the jobs of their accounts with the owner's rights, not an
/// operator's (job_mgr.c `_update_job`: `operator` is validate_operator alone): their
/// hold is a user hold, an admin hold is not theirs to release, a running job's time
/// limit is not theirs to raise (a pending job's only up to the partition's MaxTime),
/// no negative nice, no suspend; requeue and cancel they may.
#[test]
fn coordinators_have_the_owners_rights_not_an_operators() {
    use crate::proto::JobUpdate;
    let mut c = with_coordinator();
    let root = super::super::state::Caller { uid: 0, gid: 0 };
    let mut fx = Effects::default();
    let mut s = sized("bobs", 1, 30);
    s.account = Some("sub".into());
    let bobs = submit(&mut c, s.clone(), BOB, 1);
    // Pending: raised up to the partition's MaxTime (1 hour), not past it.
    let limit = |m| [JobUpdate::TimeLimit(crate::model::TimeLimit::Minutes(m))];
    c.update_job(bobs, None, &limit(60), ALICE, &mut fx)
        .unwrap();
    assert_eq!(
        c.update_job(bobs, None, &limit(61), ALICE, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.update_job(bobs, None, &[JobUpdate::Nice(-5)], ALICE, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    c.update_job(bobs, None, &[JobUpdate::Nice(50)], ALICE, &mut fx)
        .unwrap();
    // An admin hold stays the operators'.
    assert_eq!(c.hold(&[bobs], &[], false, root, &mut fx)[0].error, None);
    assert_eq!(c.jobs[&bobs].reason, Reason::JobHeldAdmin);
    assert_eq!(
        c.release(&[bobs], &[], ALICE, 2, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    assert_eq!(c.release(&[bobs], &[], root, 2, &mut fx)[0].error, None);
    // Running: lowered yes, raised no; not suspended; requeued yes.
    assert_eq!(pass(&mut c, 3), vec![bobs]);
    c.update_job(bobs, None, &limit(20), ALICE, &mut fx)
        .unwrap();
    assert_eq!(
        c.update_job(bobs, None, &limit(30), ALICE, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.suspend(&[bobs], &[], false, ALICE, 4, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    assert_eq!(
        c.requeue(&[bobs], &[], false, ALICE, 4, &mut fx)[0].error,
        None
    );
}

/// Coordinator rights go by the name the OS gives the caller's uid at each request
/// (`GroupView::note_name`, fed at the controller's edge): a coordinator renamed or
/// removed loses them at once, whoever now holds the name gains them.
#[test]
fn coordinator_rights_follow_the_callers_current_name() {
    let mut c = with_coordinator();
    let mut s = spec("bobs");
    s.account = Some("sub".into());
    s.hold = true;
    let bobs = submit(&mut c, s, BOB, 1);
    let mut fx = Effects::default();
    assert!(c.manager(ALICE).may(&c.jobs[&bobs]));
    // uid 2001 is renamed: the tree's coordinator u2001 is no longer this caller.
    c.groups.note_name(ALICE.uid, Some("alice2".into()));
    assert!(!c.manager(ALICE).may(&c.jobs[&bobs]));
    assert_eq!(
        c.release(&[bobs], &[], ALICE, 2, &mut fx)[0].error,
        Some(SlurmError::AccessDenied)
    );
    // Removed (no name any more): nothing either.
    c.groups.note_name(ALICE.uid, None);
    assert!(!c.manager(ALICE).may(&c.jobs[&bobs]));
    // Another uid now named u2001 is the coordinator.
    c.groups.note_name(CAROL.uid, Some("u2001".into()));
    assert!(c.manager(CAROL).may(&c.jobs[&bobs]));
    assert_eq!(c.release(&[bobs], &[], CAROL, 2, &mut fx)[0].error, None);
}
