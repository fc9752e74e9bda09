//! sacctmgr command parsing and Slurm's listing layout.

use super::*;
use crate::model::acct_ops::{SetOp, apply};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn tree() -> AssocTree {
    let mut t = AssocTree::default();
    let ops = [
        "add account research Description=Research",
        "add user alice Account=research",
        "add user bob Account=research GrpTRES=cpu=4,mem=2G GrpJobs=3",
        "add qos high Priority=100 Preempt=normal GraceTime=60",
    ];
    for o in ops {
        let (_, Command::Change(op)) = parse(&args(o)).unwrap() else {
            panic!("{o}");
        };
        apply(&mut t, &op, "lab").unwrap();
    }
    t
}

fn show(cmd: &str) -> String {
    show_in(&tree(), cmd)
}

/// `sacctmgr CMD` (a show) rendered from `t`.
fn show_in(t: &AssocTree, cmd: &str) -> String {
    let (o, c) = parse(&args(cmd)).unwrap();
    let Command::Show {
        entity,
        cond,
        format,
    } = c
    else {
        panic!("not a show: {cmd}");
    };
    render_show(t, "lab", entity, &cond, &format, &o).unwrap()
}

#[test]
fn options_anywhere_and_combined() {
    let (o, c) = parse(&args("-nP show assoc format=User --noheader")).unwrap();
    assert!(o.noheader);
    assert_eq!(o.parsable, Parsable::Between);
    assert!(matches!(
        c,
        Command::Show {
            entity: Entity::Association,
            ..
        }
    ));
    let (o, _) = parse(&args("-i add account x")).unwrap();
    assert!(o.immediate);
    assert!(parse(&args("-x show assoc")).is_err());
    assert!(
        parse(&args("frobnicate assoc"))
            .unwrap_err()
            .contains("invalid keyword")
    );
    assert!(
        parse(&args("show bogus"))
            .unwrap_err()
            .contains("Unknown entity")
    );
    assert!(
        parse(&args("show tres"))
            .unwrap_err()
            .contains("not supported yet by sluice")
    );
    assert!(parse(&[]).is_err());
}

#[test]
fn modify_splits_where_and_set() {
    let (_, c) = parse(&args(
        "modify user where name=alice account=research set MaxJobs=2 QOS+=high",
    ))
    .unwrap();
    let Command::Change(AcctOp::Modify {
        entity,
        cond,
        settings,
    }) = c
    else {
        panic!()
    };
    assert_eq!(entity, Entity::User);
    assert_eq!(cond.names, ["alice"]);
    assert_eq!(cond.accounts, ["research"]);
    assert_eq!(settings.len(), 2);
    assert_eq!(settings[1].op, SetOp::Add);
    // A bare name before `set` is a condition.
    let (_, c) = parse(&args("update qos high set priority=5")).unwrap();
    let Command::Change(AcctOp::Modify { cond, .. }) = c else {
        panic!()
    };
    assert_eq!(cond.names, ["high"]);
    assert!(
        parse(&args("modify user where bogus=1 set MaxJobs=1"))
            .unwrap_err()
            .contains("Unknown condition: bogus")
    );
}

#[test]
fn show_assoc_default_layout() {
    let out = show("show assoc");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "   Cluster    Account       User  Partition     Share   Priority GrpJobs       GrpTRES GrpSubmit     GrpWall   GrpTRESMins MaxJobs       MaxTRES MaxTRESPerNode MaxSubmit     MaxWall   MaxTRESMins                  QOS   Def QOS GrpTRESRunMin "
    );
    assert!(lines[1].starts_with("---------- ---------- ---------- "));
    // Tree order: root, its users, then sub-accounts with theirs.
    let who: Vec<(String, String)> = lines[2..]
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].to_string(), f.get(2).unwrap_or(&"").to_string())
        })
        .collect();
    assert_eq!(who[0].0, "root");
    assert_eq!(who[1], ("root".into(), "root".into()));
    assert_eq!(who[2].0, "research");
    assert_eq!(who[3], ("research".into(), "alice".into()));
    assert_eq!(who[4], ("research".into(), "bob".into()));
    assert_eq!(lines.len(), 7);
}

#[test]
fn compat_invocations() {
    // COMPAT.md 2.8: the exporters' exact commands.
    assert_eq!(
        show(
            "show assoc format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit --noheader --parsable2"
        ),
        "|root||||\nroot|root||||\n|research||||\nalice|research||||\nbob|research|4|2048|3|\n"
    );
    assert_eq!(
        show("-n -s list user bob format=account%256").trim(),
        "research"
    );
    assert_eq!(
        show("-nP show users withassoc format=account,qos where user=alice cluster=lab"),
        "research|normal\n"
    );
    // Another cluster's name matches nothing.
    assert_eq!(
        show("-nP show users withassoc format=account,qos where user=alice cluster=other"),
        ""
    );
}

#[test]
fn widths_truncate_with_plus_and_negative_left_justifies() {
    let out = show("-n show account format=Account%4,Descr%-12");
    let l: Vec<&str> = out.lines().collect();
    assert!(l.contains(&"root default roo+ "), "{out}");
    assert!(l.contains(&"res+ Research     "), "{out}");
    let out = show("-p show qos format=Name,Priority,GraceTime,Preempt,UsageFactor");
    assert_eq!(
        out,
        "Name|Priority|GraceTime|Preempt|UsageFactor|\nhigh|100|00:01:00|normal|1.000000|\nnormal|0|00:00:00||1.000000|\n"
    );
}

#[test]
fn unknown_field_is_an_error() {
    let (o, c) = parse(&args("show assoc format=Bogus")).unwrap();
    let Command::Show {
        entity,
        cond,
        format,
    } = c
    else {
        panic!()
    };
    assert_eq!(
        render_show(&tree(), "lab", entity, &cond, &format, &o).unwrap_err(),
        "Unknown field 'Bogus'"
    );
}

#[test]
fn user_listing_default_columns() {
    let out = show("show user");
    let l: Vec<&str> = out.lines().collect();
    assert_eq!(l[0], "      User   Def Acct     Admin ");
    assert_eq!(l[2], "     alice   research      None ");
    assert!(l.contains(&"      root       root Administ+ "));
}

/// `tree()` plus account `theory` under research, alice coordinating research.
fn coord_tree() -> AssocTree {
    let mut t = tree();
    for o in [
        "add account theory Parent=research",
        "add coordinator account=research names=alice",
    ] {
        let (_, Command::Change(op)) = parse(&args(o)).unwrap() else {
            panic!("{o}");
        };
        apply(&mut t, &op, "lab").unwrap();
    }
    t
}

#[test]
fn withcoord_lists_coordinators_with_sub_accounts() {
    let t = coord_tree();
    let render = |cmd: &str| show_in(&t, cmd);
    assert_eq!(
        render("show user withcoord -P"),
        "User|Def Acct|Admin|Coord Accounts\n\
         alice|research|None|research,theory\n\
         bob|research|None|\n\
         root|root|Administrator|\n"
    );
    assert_eq!(
        render("show account withcoord -P"),
        "Account|Descr|Org|Coord Accounts\n\
         research|Research|research|alice\n\
         root|default root account|root|\n\
         theory|theory|research|alice\n"
    );
    let fixed = render("show user alice withcoord");
    assert_eq!(
        fixed.lines().next().unwrap(),
        "      User   Def Acct     Admin       Coord Accounts "
    );
    assert!(
        parse(&args("show coordinator")).is_err(),
        "coordinators are listed through users and accounts"
    );
}

#[test]
fn association_ids_cluster_rows_and_trailing_bar() {
    // Ids in creation order: root 1, root's user 2, research 3, alice 4, bob 5.
    assert_eq!(
        show("-nP show assoc format=Account,User,ID"),
        "root||1\nroot|root|2\nresearch||3\nresearch|alice|4\nresearch|bob|5\n"
    );
    // QOS rows carry no association id.
    assert_eq!(show("-nP show qos format=Name,ID"), "high|\nnormal|\n");
    // `show cluster` in Slurm's default columns; -p ends each line with `|`.
    let mut t = tree();
    let (_, Command::Change(op)) = parse(&args("add cluster lab")).unwrap() else {
        panic!("add cluster");
    };
    apply(&mut t, &op, "lab").unwrap();
    let out = show_in(&t, "show cluster");
    assert_eq!(
        out.lines().next(),
        Some(
            "   Cluster     ControlHost  ControlPort   RPC     Share GrpJobs       GrpTRES GrpSubmit MaxJobs       MaxTRES MaxSubmit     MaxWall                  QOS   Def QOS "
        ),
        "{out}"
    );
    assert_eq!(
        show_in(&t, "-np show cluster format=Cluster,Share"),
        "lab|1|\n"
    );
}
