//! sacctmgr changes applied to a tree: what changes, what is refused, what is printed.

use super::*;

fn set(args: &[&str]) -> Vec<Setting> {
    args.iter().map(|a| Setting::parse(a).unwrap()).collect()
}

fn add(t: &mut AssocTree, e: Entity, names: &[&str], args: &[&str]) -> Result<Outcome, String> {
    apply(
        t,
        &AcctOp::Add {
            entity: e,
            names: names.iter().map(|s| s.to_string()).collect(),
            settings: set(args),
        },
        "lab",
    )
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn by_name(n: &[&str]) -> Cond {
    Cond {
        names: names(n),
        ..Cond::default()
    }
}

fn modify(t: &mut AssocTree, e: Entity, cond: Cond, args: &[&str]) -> Result<Outcome, String> {
    apply(
        t,
        &AcctOp::Modify {
            entity: e,
            cond,
            settings: set(args),
        },
        "lab",
    )
}

fn delete(t: &mut AssocTree, e: Entity, cond: Cond) -> Result<Outcome, String> {
    apply(t, &AcctOp::Delete { entity: e, cond }, "lab")
}

#[test]
fn add_account_user_and_print_as_sacctmgr() {
    let mut t = AssocTree::default();
    let o = add(
        &mut t,
        Entity::Account,
        &["phys"],
        &["Description=Physics", "Fairshare=70"],
    )
    .unwrap();
    assert!(o.changed);
    assert_eq!(
        o.lines,
        [
            " Adding Account(s)",
            "  phys",
            " Settings",
            "  Description     = Physics",
            "  Organization    = Parent/Account Name",
            " Associations",
            "  A = phys       C = lab       ",
            " Settings",
            "  Parent        = root",
            "  Fairshare     = 70",
        ]
    );
    let a = t.account("phys").unwrap();
    assert_eq!(a.shares, Shares::Raw(70));
    assert_eq!(a.organization, "phys");
    let o = add(
        &mut t,
        Entity::User,
        &["alice"],
        &["Account=phys", "MaxJobs=2"],
    )
    .unwrap();
    assert_eq!(o.lines[0], " Adding User(s)");
    assert!(o.lines.contains(&"  Default Account = phys".to_string()));
    assert!(
        o.lines
            .contains(&"  U = alice     A = phys       C = lab       ".to_string())
    );
    assert_eq!(t.default_account("alice"), Some("phys"));
    assert_eq!(
        t.find_assoc("alice", "phys", "any")
            .unwrap()
            .limits
            .max_jobs,
        Some(2)
    );
    // Adding it again changes nothing.
    let o = add(&mut t, Entity::User, &["alice"], &["Account=phys"]).unwrap();
    assert!(!o.changed);
    assert_eq!(o.lines, [" Nothing new added."]);
}

#[test]
fn refusals_leave_the_tree_unchanged() {
    let mut t = AssocTree::default();
    let before = t.clone();
    assert!(
        add(&mut t, Entity::Account, &["x"], &["Parent=nope"])
            .unwrap_err()
            .contains("Parent account 'nope' doesn't exist")
    );
    assert!(
        add(&mut t, Entity::User, &["bob"], &["Account=nope"])
            .unwrap_err()
            .contains("This account 'nope' doesn't exist")
    );
    assert!(
        add(&mut t, Entity::Account, &["x"], &["QOS=bogus"])
            .unwrap_err()
            .contains("bad qos 'bogus'")
    );
    assert!(
        add(&mut t, Entity::Account, &["x"], &["Bogus=1"])
            .unwrap_err()
            .contains("Unknown option")
    );
    assert!(add(&mut t, Entity::Account, &["x"], &["GrpTRES=cpu=x"]).is_err());
    assert!(add(&mut t, Entity::Account, &["x"], &["Cluster=elsewhere"]).is_err());
    assert_eq!(t, before);
}

#[test]
fn modify_limits_qos_lists_and_parent() {
    let mut t = AssocTree::default();
    add(&mut t, Entity::Account, &["a"], &[]).unwrap();
    add(&mut t, Entity::Account, &["b"], &["Parent=a"]).unwrap();
    add(&mut t, Entity::Qos, &["high", "low"], &["Priority=10"]).unwrap();
    modify(
        &mut t,
        Entity::Account,
        by_name(&["b"]),
        &["GrpTRES=cpu=8,gres/gpu=2", "QOS=normal,high"],
    )
    .unwrap();
    let b = t.account("b").unwrap();
    assert_eq!(b.limits.grp_tres.to_string(), "cpu=8,gres/gpu=2");
    assert_eq!(b.qos, ["normal", "high"]);
    modify(
        &mut t,
        Entity::Account,
        by_name(&["b"]),
        &["QOS-=normal", "GrpTRES=cpu=-1"],
    )
    .unwrap();
    let b = t.account("b").unwrap();
    assert_eq!(b.qos, ["high"]);
    assert_eq!(b.limits.grp_tres.to_string(), "gres/gpu=2");
    // No cycles.
    assert!(
        modify(&mut t, Entity::Account, by_name(&["a"]), &["Parent=b"])
            .unwrap_err()
            .contains("below its own sub-account")
    );
    modify(
        &mut t,
        Entity::Qos,
        by_name(&["high"]),
        &[
            "Preempt=low",
            "PreemptMode=requeue",
            "GraceTime=120",
            "Flags=DenyOnLimit",
            "MaxJobsPerUser=3",
        ],
    )
    .unwrap();
    let q = t.qos("high").unwrap();
    assert_eq!(q.preempt, ["low"]);
    assert_eq!(q.preempt_mode, PreemptMode::Requeue);
    assert_eq!(q.grace_time_secs, 120);
    assert!(q.has_flag(QosFlag::DenyOnLimit));
    assert_eq!(q.limits.max_jobs_per_user, Some(3));
    let o = modify(&mut t, Entity::Qos, by_name(&["nope"]), &["Priority=1"]).unwrap();
    assert!(!o.changed);
    assert_eq!(o.lines, [" Nothing modified"]);
}

#[test]
fn modify_user_default_account_must_be_associated() {
    let mut t = AssocTree::default();
    add(&mut t, Entity::Account, &["a", "b"], &[]).unwrap();
    add(&mut t, Entity::User, &["alice"], &["Account=a"]).unwrap();
    assert!(
        modify(
            &mut t,
            Entity::User,
            by_name(&["alice"]),
            &["DefaultAccount=b"]
        )
        .unwrap_err()
        .contains("aren't associated")
    );
    add(&mut t, Entity::User, &["alice"], &["Account=b"]).unwrap();
    let o = modify(
        &mut t,
        Entity::User,
        by_name(&["alice"]),
        &["DefaultAccount=b", "GrpJobs=4"],
    )
    .unwrap();
    assert_eq!(t.default_account("alice"), Some("b"));
    assert_eq!(o.lines[0], " Modified users...");
    assert!(
        o.lines
            .contains(&" Modified user associations...".to_string())
    );
    assert!(
        t.assocs_of_user("alice")
            .all(|a| a.limits.grp_jobs == Some(4))
    );
}

#[test]
fn delete_keeps_the_tree_consistent() {
    let mut t = AssocTree::default();
    add(&mut t, Entity::Account, &["a", "b"], &[]).unwrap();
    add(
        &mut t,
        Entity::User,
        &["alice"],
        &["Account=a,b", "DefaultAccount=a"],
    )
    .unwrap();
    add(&mut t, Entity::Qos, &["high"], &[]).unwrap();
    modify(
        &mut t,
        Entity::Account,
        by_name(&["a"]),
        &["QOS=normal,high", "DefaultQOS=high"],
    )
    .unwrap();
    // The QOS goes from every list that named it.
    delete(&mut t, Entity::Qos, by_name(&["high"])).unwrap();
    assert_eq!(t.account("a").unwrap().qos, ["normal"]);
    assert_eq!(t.account("a").unwrap().default_qos, None);
    // alice's default account cannot go while she has another one (Slurm's
    // ESLURM_NO_REMOVE_DEFAULT_ACCOUNT), neither as an account nor as her association.
    let before = t.clone();
    let e = delete(&mut t, Entity::Account, by_name(&["a"])).unwrap_err();
    assert!(
        e.starts_with(" Error with request: You can not remove the default account of a user\n  C = lab        A = a          U = alice    \n"),
        "{e}"
    );
    let alice_a = Cond {
        names: names(&["alice"]),
        accounts: names(&["a"]),
        ..Cond::default()
    };
    assert!(delete(&mut t, Entity::User, alice_a.clone()).is_err());
    assert_eq!(t, before);
    // Once her default is the other account, it goes, and she stays.
    modify(
        &mut t,
        Entity::User,
        by_name(&["alice"]),
        &["DefaultAccount=b"],
    )
    .unwrap();
    let o = delete(&mut t, Entity::Account, by_name(&["a"])).unwrap();
    assert_eq!(o.lines, [" Deleting accounts...", "  a"]);
    assert_eq!(t.default_account("alice"), Some("b"));
    // Deleting her last account removes her too, and the summary says so.
    let o = delete(&mut t, Entity::Account, by_name(&["b"])).unwrap();
    assert_eq!(
        o.lines,
        [
            " Deleting accounts...",
            "  b",
            " Deleting users left without an association...",
            "  alice"
        ]
    );
    assert!(t.user("alice").is_none());
    assert!(delete(&mut t, Entity::Account, by_name(&["root"])).is_err());
    assert!(delete(&mut t, Entity::Qos, by_name(&["normal"])).is_err());
    t.check().unwrap();
}

#[test]
fn settings_and_entities_parse() {
    let s = Setting::parse("QOS+=high").unwrap();
    assert_eq!(
        (s.key.as_str(), s.op, s.value.as_str()),
        ("QOS", SetOp::Add, "high")
    );
    let s = Setting::parse("Description=\"Big Lab\"").unwrap();
    assert_eq!(s.value, "Big Lab");
    assert!(Setting::parse("where").is_none());
    assert_eq!(Entity::parse("assoc"), Some(Entity::Association));
    assert_eq!(Entity::parse("users"), Some(Entity::User));
    assert_eq!(Entity::parse("acc"), Some(Entity::Account));
    assert_eq!(Entity::parse("bogus"), None);
    assert_eq!(parse_minutes("MaxWall", "1-00:00:00").unwrap(), Some(1440));
    assert_eq!(parse_minutes("MaxWall", "90").unwrap(), Some(90));
    assert_eq!(parse_minutes("MaxWall", "-1").unwrap(), None);
    assert!(parse_minutes("MaxWall", "x").is_err());
}

#[test]
fn qos_plus_on_a_user_adds_to_the_inherited_list() {
    let mut t = AssocTree::default();
    add(&mut t, Entity::Account, &["phys"], &[]).unwrap();
    add(&mut t, Entity::User, &["alice"], &["Account=phys"]).unwrap();
    add(&mut t, Entity::Qos, &["gpu-high"], &[]).unwrap();
    modify(
        &mut t,
        Entity::User,
        by_name(&["alice"]),
        &["QOS+=gpu-high"],
    )
    .unwrap();
    let a = t.find_assoc("alice", "phys", "any").unwrap();
    assert_eq!(a.qos, ["normal", "gpu-high"]);
    modify(&mut t, Entity::User, by_name(&["alice"]), &["QOS-=normal"]).unwrap();
    let a = t.find_assoc("alice", "phys", "any").unwrap();
    assert_eq!(a.qos, ["gpu-high"]);
}

#[test]
fn qos_min_tres_and_usage_threshold_are_settable() {
    let mut t = AssocTree::default();
    add(
        &mut t,
        Entity::Qos,
        &["big"],
        &["MinTRES=cpu=4,gres/gpu=1", "UsageThreshold=0.25"],
    )
    .unwrap();
    let q = t.qos("big").unwrap();
    assert_eq!(q.limits.min_tres_per_job.to_string(), "cpu=4,gres/gpu=1");
    assert_eq!(q.usage_threshold, Some(0.25));
    modify(
        &mut t,
        Entity::Qos,
        by_name(&["big"]),
        &["MinTRES=gres/gpu=-1", "UsageThreshold=-1"],
    )
    .unwrap();
    let q = t.qos("big").unwrap();
    assert_eq!(q.limits.min_tres_per_job.to_string(), "cpu=4");
    assert_eq!(q.usage_threshold, None);
    assert!(
        modify(
            &mut t,
            Entity::Qos,
            by_name(&["big"]),
            &["UsageThreshold=2"]
        )
        .is_err()
    );
    // MinTRES is a QOS limit only, as in Slurm.
    add(&mut t, Entity::Account, &["a"], &[]).unwrap();
    assert!(modify(&mut t, Entity::Account, by_name(&["a"]), &["MinTRES=cpu=1"]).is_err());
}

#[test]
fn coordinators_are_added_removed_and_leave_with_their_account() {
    let mut t = AssocTree::default();
    add(&mut t, Entity::Account, &["phys"], &[]).unwrap();
    add(&mut t, Entity::Account, &["theory"], &["Parent=phys"]).unwrap();
    add(&mut t, Entity::User, &["alice"], &["Account=phys"]).unwrap();
    let o = add(
        &mut t,
        Entity::Coordinator,
        &[],
        &["Account=phys", "Names=alice"],
    )
    .unwrap();
    assert!(o.changed);
    assert_eq!(
        o.lines,
        [
            " Adding Coordinator User(s)",
            "  alice",
            " To Account(s) and all sub-accounts",
            "  phys"
        ]
    );
    assert!(t.coordinates("alice", "phys") && t.coordinates("alice", "theory"));
    assert!(!t.coordinates("alice", "root"));
    assert_eq!(t.coord_accounts_of("alice"), ["phys", "theory"]);
    assert_eq!(t.coordinators_of("theory"), ["alice"]);
    // Again: nothing new.
    let again = add(&mut t, Entity::Coordinator, &["alice"], &["Account=phys"]).unwrap();
    assert!(!again.changed);
    // Slurm's checks: both lists, existing names.
    assert_eq!(
        add(&mut t, Entity::Coordinator, &["alice"], &[]).unwrap_err(),
        " You need to specify an account list here."
    );
    assert_eq!(
        add(&mut t, Entity::Coordinator, &["nobody"], &["Account=nope"]).unwrap_err(),
        " You specified a non-existent account 'nope'.\n You specified a non-existent user 'nobody'."
    );
    // Removal lists what went.
    let mut t2 = t.clone();
    let cond = Cond {
        names: names(&["alice"]),
        accounts: names(&["phys"]),
        ..Cond::default()
    };
    let o = delete(&mut t2, Entity::Coordinator, cond.clone()).unwrap();
    assert_eq!(
        o.lines,
        [
            " Removing Coordinators with user name",
            "  alice",
            " From Account(s)",
            "  phys",
            " Removed Coordinators (sub accounts not listed)...",
            "  U = alice     A = phys      "
        ]
    );
    assert!(!t2.coordinates("alice", "theory"));
    assert_eq!(
        delete(&mut t2, Entity::Coordinator, cond)
            .unwrap()
            .lines
            .last()
            .unwrap(),
        " Nothing removed"
    );
    // Deleting the account takes the right with it (the tree stays consistent).
    add(&mut t, Entity::User, &["alice"], &["Account=root"]).unwrap();
    modify(
        &mut t,
        Entity::User,
        by_name(&["alice"]),
        &["DefaultAccount=root"],
    )
    .unwrap();
    delete(&mut t, Entity::Account, by_name(&["theory", "phys"])).unwrap();
    assert!(t.users["alice"].coord_accounts.is_empty());
    t.check().unwrap();
}

#[test]
fn associations_get_ids_in_creation_order_never_reused() {
    let mut t = AssocTree::default();
    // slurmdbd's numbering: the root account, then root's user association.
    assert_eq!(t.accounts[ROOT].id, 1);
    assert_eq!(t.user_assocs[0].id, 2);
    add(&mut t, Entity::Account, &["phys"], &[]).unwrap();
    add(&mut t, Entity::User, &["alice"], &["Account=phys"]).unwrap();
    add(&mut t, Entity::User, &["bob"], &["Account=phys"]).unwrap();
    assert_eq!(t.accounts["phys"].id, 3);
    let id = |t: &AssocTree, u: &str| t.user_assocs.iter().find(|a| a.user == u).unwrap().id;
    assert_eq!((id(&t, "alice"), id(&t, "bob")), (4, 5));
    // A change keeps the id; a removed association's id is not given again.
    modify(&mut t, Entity::User, by_name(&["alice"]), &["MaxJobs=2"]).unwrap();
    assert_eq!(id(&t, "alice"), 4);
    delete(&mut t, Entity::User, by_name(&["bob"])).unwrap();
    add(&mut t, Entity::User, &["carol"], &["Account=phys"]).unwrap();
    assert_eq!(id(&t, "carol"), 6);
}
