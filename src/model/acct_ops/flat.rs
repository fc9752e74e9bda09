//! sacctmgr's flat file (`sacctmgr dump` / `sacctmgr load`; cf. sacctmgr(1) "FLAT
//! FILE DUMP AND LOAD" and src/sacctmgr/file_functions.c): one record per line,
//! `Kind - 'name':Key=Value:Key='Value'…`, where Kind is `Cluster`, `Parent`, `Account`
//! or `User`. A `Parent - 'A'` line makes A the parent of the `Account` lines and the
//! account of the `User` lines that follow it; `#` starts a comment.
//!
//! Pure: [`dump`] renders a tree, [`parse`] turns a file into the [`AcctOp::Load`]
//! the controller applies all or nothing. Load adds what the tree lacks (accounts,
//! users, associations, with the file's settings); records the tree already has take
//! the file's values, each change named in the summary as sacctmgr names it (the
//! `Cluster` line's settings are the root association's).

use super::{AcctOp, Entity, Setting};
use crate::model::assoc::{AssocTree, Limits, ROOT, UserAssoc};

/// The `:Key=Value` options of an association's limits, in sacctmgr's names.
fn limit_opts(l: &Limits, out: &mut Vec<String>) {
    let n = |out: &mut Vec<String>, k: &str, v: Option<u32>| {
        if let Some(v) = v {
            out.push(format!("{k}={v}"));
        }
    };
    let t = |out: &mut Vec<String>, k: &str, m: &crate::model::assoc::TresMap| {
        if !m.is_empty() {
            out.push(format!("{k}={m}"));
        }
    };
    n(out, "GrpJobs", l.grp_jobs);
    n(out, "GrpSubmitJobs", l.grp_submit_jobs);
    t(out, "GrpTRES", &l.grp_tres);
    t(out, "GrpTRESMins", &l.grp_tres_mins);
    t(out, "GrpTRESRunMins", &l.grp_tres_run_mins);
    n(out, "GrpWall", l.grp_wall_mins);
    n(out, "MaxJobs", l.max_jobs);
    n(out, "MaxSubmitJobs", l.max_submit_jobs);
    t(out, "MaxTRESPerJob", &l.max_tres_per_job);
    t(out, "MaxTRESMinsPerJob", &l.max_tres_mins_per_job);
    t(out, "MaxTRESPerNode", &l.max_tres_per_node);
    n(out, "MaxWallDurationPerJob", l.max_wall_mins);
}

fn quoted(k: &str, v: &str) -> String {
    format!("{k}='{v}'")
}

fn assoc_opts(
    shares: crate::model::assoc::Shares,
    qos: &[String],
    default_qos: &Option<String>,
    l: &Limits,
    out: &mut Vec<String>,
) {
    out.push(format!("Fairshare={shares}"));
    if !qos.is_empty() {
        out.push(quoted("QOS", &qos.join(",")));
    }
    if let Some(d) = default_qos {
        out.push(quoted("DefaultQOS", d));
    }
    limit_opts(l, out);
}

fn line(kind: &str, name: &str, opts: &[String]) -> String {
    let mut s = format!("{kind} - '{name}'");
    for o in opts {
        s.push(':');
        s.push_str(o);
    }
    s.push('\n');
    s
}

fn user_line(t: &AssocTree, a: &UserAssoc) -> String {
    let mut o = Vec::new();
    if let Some(u) = t.user(&a.user) {
        o.push(quoted("DefaultAccount", &u.default_account));
        if u.admin_level != Default::default() {
            o.push(quoted("AdminLevel", u.admin_level.as_str()));
        }
    }
    if let Some(p) = &a.partition {
        o.push(quoted("Partition", p));
    }
    assoc_opts(a.shares, &a.qos, &a.default_qos, &a.limits, &mut o);
    line("User", &a.user, &o)
}

/// The flat file of `tree` for cluster `cluster`: the cluster line, then each account
/// (depth first, by name) as a `Parent` line followed by its users and its
/// sub-accounts' `Account` lines.
pub fn dump(tree: &AssocTree, cluster: &str) -> String {
    let mut s = String::from(
        "# sacctmgr flat file, written by `sacctmgr dump`; read back with `sacctmgr load`.\n\
         # Records: Cluster - 'name', Parent - 'account', Account - 'name':Key=Value...,\n\
         # User - 'name':Key=Value... (users and accounts belong to the Parent above them).\n",
    );
    let root = tree.root();
    let mut o = Vec::new();
    assoc_opts(
        root.shares,
        &root.qos,
        &root.default_qos,
        &root.limits,
        &mut o,
    );
    s.push_str(&line("Cluster", cluster, &o));
    let mut stack = vec![ROOT.to_string()];
    while let Some(acct) = stack.pop() {
        let mut users: Vec<&UserAssoc> = tree.users_under(&acct).collect();
        users.sort_by(|a, b| (&a.user, &a.partition).cmp(&(&b.user, &b.partition)));
        let kids: Vec<_> = tree.child_accounts(&acct).collect();
        if users.is_empty() && kids.is_empty() {
            continue;
        }
        s.push_str(&line("Parent", &acct, &[]));
        for u in users {
            s.push_str(&user_line(tree, u));
        }
        for k in &kids {
            let mut o = vec![
                quoted("Description", &k.description),
                quoted("Organization", &k.organization),
            ];
            assoc_opts(k.shares, &k.qos, &k.default_qos, &k.limits, &mut o);
            s.push_str(&line("Account", &k.name, &o));
        }
        // Depth first, in name order.
        stack.extend(kids.iter().rev().map(|k| k.name.clone()));
    }
    s
}

/// The QOS of `tree` as `sacctmgr` commands for a shell, since the flat file has no
/// QOS records and `sacctmgr load` refuses associations naming a QOS that does not
/// exist: every QOS but `normal` (which Slurm creates) is added first, then each one's
/// settings are set (a QOS's `Preempt=` may name one added after it). Values are
/// single-quoted for the shell.
pub fn qos_script(tree: &AssocTree) -> String {
    let sq = |v: &str| format!("'{}'", v.replace('\'', "'\\''"));
    let mut s = String::from(
        "#!/bin/sh\n# QOS for Slurm, written by `sluice config export`; run before `sacctmgr load`.\nset -e\n",
    );
    for q in tree.qos.values().filter(|q| q.name != "normal") {
        s.push_str(&format!("sacctmgr -i add qos {}\n", sq(&q.name)));
    }
    for q in tree.qos.values() {
        let mut o = vec![format!("Description={}", sq(&q.description))];
        o.push(format!("Priority={}", q.priority));
        if !q.preempt.is_empty() {
            o.push(format!("Preempt={}", sq(&q.preempt.join(","))));
        }
        o.push(format!("PreemptMode={}", q.preempt_mode.as_str()));
        if let Some(t) = q.preempt_exempt_secs {
            o.push(format!("PreemptExemptTime={t}"));
        }
        if q.grace_time_secs > 0 {
            o.push(format!("GraceTime={}", q.grace_time_secs));
        }
        if !q.flags.is_empty() {
            let f: Vec<&str> = q.flags.iter().map(|f| f.as_str()).collect();
            o.push(format!("Flags={}", f.join(",")));
        }
        o.push(format!("UsageFactor={}", q.usage_factor));
        if let Some(t) = q.usage_threshold {
            o.push(format!("UsageThreshold={t}"));
        }
        let l = &q.limits;
        let n = |o: &mut Vec<String>, k: &str, v: Option<u32>| {
            if let Some(v) = v {
                o.push(format!("{k}={v}"));
            }
        };
        let t = |o: &mut Vec<String>, k: &str, m: &crate::model::assoc::TresMap| {
            if !m.is_empty() {
                o.push(format!("{k}={m}"));
            }
        };
        n(&mut o, "GrpJobs", l.grp_jobs);
        n(&mut o, "GrpSubmitJobs", l.grp_submit_jobs);
        t(&mut o, "GrpTRES", &l.grp_tres);
        t(&mut o, "GrpTRESMins", &l.grp_tres_mins);
        t(&mut o, "GrpTRESRunMins", &l.grp_tres_run_mins);
        n(&mut o, "GrpWall", l.grp_wall_mins);
        n(&mut o, "MaxJobsPerUser", l.max_jobs_per_user.or(l.max_jobs));
        n(
            &mut o,
            "MaxSubmitJobsPerUser",
            l.max_submit_jobs_per_user.or(l.max_submit_jobs),
        );
        n(&mut o, "MaxJobsPerAccount", l.max_jobs_per_account);
        n(
            &mut o,
            "MaxSubmitJobsPerAccount",
            l.max_submit_jobs_per_account,
        );
        t(&mut o, "MaxTRESPerJob", &l.max_tres_per_job);
        t(&mut o, "MaxTRESPerNode", &l.max_tres_per_node);
        t(&mut o, "MaxTRESMinsPerJob", &l.max_tres_mins_per_job);
        t(&mut o, "MaxTRESPerUser", &l.max_tres_per_user);
        t(&mut o, "MaxTRESPerAccount", &l.max_tres_per_account);
        t(&mut o, "MinTRESPerJob", &l.min_tres_per_job);
        n(&mut o, "MaxWall", l.max_wall_mins);
        s.push_str(&format!(
            "sacctmgr -i modify qos where name={} set {}\n",
            sq(&q.name),
            o.join(" ")
        ));
    }
    s
}

/// Splits `Kind - 'name':opt:opt` at the colons outside quotes.
fn split_opts(rest: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in rest.chars() {
        match (c, quote) {
            ('\'' | '"', None) => {
                quote = Some(c);
                cur.push(c);
            }
            (c2, Some(q)) if c2 == q => {
                quote = None;
                cur.push(c);
            }
            (':', None) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unterminated quote in '{rest}'"));
    }
    out.push(cur);
    Ok(out)
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    for q in ['\'', '"'] {
        if let Some(i) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return i;
        }
    }
    s
}

/// Parses a flat file for the controller's cluster `cluster` into one
/// [`AcctOp::Load`]. Errors name the line: an unknown record kind, a record before the
/// `Cluster` line, a file for another cluster, an option without `=`, a `User` before
/// any `Parent`.
pub fn parse(text: &str, cluster: &str) -> Result<AcctOp, String> {
    let mut ops = Vec::new();
    let mut parent: Option<String> = None;
    let mut seen_cluster = false;
    for (i, raw) in text.lines().enumerate() {
        let at = |e: String| format!(" Line {}: {e}", i + 1);
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let parts = split_opts(l).map_err(at)?;
        let (kind, name) = parts[0]
            .split_once('-')
            .map(|(k, n)| (k.trim().to_ascii_lowercase(), unquote(n).to_string()))
            .ok_or_else(|| at(format!("expected 'Kind - 'name'', got '{}'", parts[0])))?;
        if name.is_empty() {
            return Err(at("a record needs a name".into()));
        }
        let mut settings = Vec::new();
        for o in &parts[1..] {
            let s = Setting::parse(o).ok_or_else(|| at(format!("option '{o}' has no '='")))?;
            settings.push(s);
        }
        match kind.as_str() {
            "cluster" => {
                if name != cluster {
                    return Err(at(format!(
                        "the file is for cluster '{name}'; this controller serves '{cluster}'"
                    )));
                }
                seen_cluster = true;
                if !settings.is_empty() {
                    ops.push(AcctOp::Add {
                        entity: Entity::Account,
                        names: vec![ROOT.to_string()],
                        settings,
                    });
                }
            }
            _ if !seen_cluster => {
                return Err(at("the first record must be 'Cluster - ...'".into()));
            }
            "parent" => parent = Some(name),
            "account" => {
                let p = parent.clone().unwrap_or_else(|| ROOT.to_string());
                settings.push(Setting {
                    key: "Parent".into(),
                    op: super::SetOp::Assign,
                    value: p,
                });
                ops.push(AcctOp::Add {
                    entity: Entity::Account,
                    names: vec![name],
                    settings,
                });
            }
            "user" => {
                let p = parent
                    .clone()
                    .ok_or_else(|| at("a User record needs a Parent record before it".into()))?;
                settings.push(Setting {
                    key: "Account".into(),
                    op: super::SetOp::Assign,
                    value: p,
                });
                ops.push(AcctOp::Add {
                    entity: Entity::User,
                    names: vec![name],
                    settings,
                });
            }
            k => return Err(at(format!("unknown record kind '{k}'"))),
        }
    }
    if !seen_cluster {
        return Err(" No 'Cluster - ...' record in the file".into());
    }
    Ok(AcctOp::Load { ops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::acct_ops::apply;

    fn add(t: &mut AssocTree, e: Entity, n: &str, args: &[&str]) {
        apply(
            t,
            &AcctOp::Add {
                entity: e,
                names: vec![n.into()],
                settings: args.iter().map(|a| Setting::parse(a).unwrap()).collect(),
            },
            "lab",
        )
        .unwrap();
    }

    fn sample() -> AssocTree {
        let mut t = AssocTree::default();
        add(&mut t, Entity::Qos, "high", &[]);
        add(
            &mut t,
            Entity::Account,
            "phys",
            &[
                "Description=Physics: all of it",
                "Fairshare=70",
                "GrpTRES=cpu=8",
            ],
        );
        add(
            &mut t,
            Entity::Account,
            "theory",
            &["Parent=phys", "MaxWall=90"],
        );
        add(
            &mut t,
            Entity::User,
            "alice",
            &[
                "Account=theory",
                "QOS=normal,high",
                "MaxJobs=3",
                "AdminLevel=Operator",
            ],
        );
        add(&mut t, Entity::User, "alice", &["Account=phys"]);
        t
    }

    #[test]
    fn dump_lists_the_tree_parent_first() {
        let text = dump(&sample(), "lab");
        let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            [
                "Cluster - 'lab':Fairshare=1",
                "Parent - 'root'",
                "User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1",
                "Account - 'phys':Description='Physics: all of it':Organization='phys':Fairshare=70:GrpTRES=cpu=8",
                "Parent - 'phys'",
                "User - 'alice':DefaultAccount='theory':AdminLevel='Operator':Fairshare=1",
                "Account - 'theory':Description='theory':Organization='phys':Fairshare=1:MaxWallDurationPerJob=90",
                "Parent - 'theory'",
                "User - 'alice':DefaultAccount='theory':AdminLevel='Operator':Fairshare=1:QOS='normal,high':MaxJobs=3",
            ]
        );
    }

    #[test]
    fn load_of_a_dump_rebuilds_the_same_tree() {
        let t = sample();
        let text = dump(&t, "lab");
        let mut fresh = AssocTree::default();
        add(&mut fresh, Entity::Qos, "high", &[]);
        let op = parse(&text, "lab").unwrap();
        let out = apply(&mut fresh, &op, "lab").unwrap();
        assert!(out.changed);
        // Association ids are not in the file: each tree numbers its own.
        let no_ids = |t: &AssocTree| {
            let mut t = t.clone();
            t.accounts.values_mut().for_each(|a| a.id = 0);
            t.user_assocs.iter_mut().for_each(|a| a.id = 0);
            t
        };
        let (fresh_t, t) = (no_ids(&fresh), no_ids(&t));
        assert_eq!(fresh_t.accounts, t.accounts);
        assert_eq!(fresh_t.users, t.users);
        let key = |a: &UserAssoc| (a.user.clone(), a.account.clone());
        let mut got = fresh_t.user_assocs.clone();
        let mut want = t.user_assocs.clone();
        got.sort_by_key(key);
        want.sort_by_key(key);
        assert_eq!(got, want);
        // Loading it again changes nothing.
        let out = apply(&mut fresh, &op, "lab").unwrap();
        assert!(!out.changed, "{:?}", out.lines);
    }

    #[test]
    fn load_changes_records_that_exist_and_says_what_changed() {
        let mut t = sample();
        let file = "Cluster - 'lab':Fairshare=1:GrpJobs=50\n\
                    Parent - 'root'\n\
                    Account - 'phys':Description='Physics dept':Organization='phys':Fairshare=60:GrpTRES=cpu=16\n\
                    Account - 'chem':Fairshare=30\n\
                    Parent - 'theory'\n\
                    User - 'alice':DefaultAccount='phys':AdminLevel='None':QOS='high':MaxJobs=5\n\
                    User - 'bob':DefaultAccount='theory'\n";
        let op = parse(file, "lab").unwrap();
        let out = apply(&mut t, &op, "lab").unwrap();
        assert!(out.changed);
        let changed: Vec<&str> = out
            .lines
            .iter()
            .map(String::as_str)
            .filter(|l| l.contains(" for "))
            .collect();
        assert_eq!(
            changed,
            [
                " Changed GrpJobs               for Cluster lab              -1 -> 50",
                " Changed description           for Account phys       Physics: all of it -> Physics dept",
                " Changed fairshare             for Account phys             70 -> 60",
                " Changed GrpTRES               for Account phys          cpu=8 -> cpu=16",
                " Changed MaxJobs               for User    alice             3 -> 5",
                " Changed Admin Level           for User    alice      Operator -> None",
                " Changed Default Account       for User    alice        theory -> phys",
            ]
        );
        // New records are added as before; QOS named by the file are only added.
        assert!(t.account("chem").is_some());
        assert!(t.find_assoc("bob", "theory", "").is_some());
        let a = t.find_assoc("alice", "theory", "").unwrap();
        assert_eq!(a.qos, ["normal", "high"]);
        assert_eq!(t.root().limits.grp_jobs, Some(50));
        // The same file again changes nothing.
        let again = apply(&mut t, &op, "lab").unwrap();
        assert!(!again.changed, "{:?}", again.lines);
        // A record the tree refuses undoes the whole load.
        let before = t.clone();
        let bad = parse(
            "Cluster - 'lab'\nParent - 'root'\nAccount - 'phys':Fairshare=5\nAccount - 'x':MaxJobs=x\n",
            "lab",
        )
        .unwrap();
        assert!(apply(&mut t, &bad, "lab").is_err());
        assert_eq!(t, before);
    }

    #[test]
    fn bad_files_are_refused_naming_the_line() {
        let e = parse("Cluster - 'other'\n", "lab").unwrap_err();
        assert!(e.contains("Line 1") && e.contains("'other'"), "{e}");
        let e = parse("Account - 'a'\n", "lab").unwrap_err();
        assert!(e.contains("first record must be"), "{e}");
        let e = parse("Cluster - 'lab'\nUser - 'u':DefaultAccount='a'\n", "lab").unwrap_err();
        assert!(e.contains("Line 2") && e.contains("Parent"), "{e}");
        let e = parse(
            "Cluster - 'lab'\nParent - 'root'\nAccount - 'a':Bogus\n",
            "lab",
        )
        .unwrap_err();
        assert!(e.contains("Line 3") && e.contains("no '='"), "{e}");
        let e = parse("Cluster - 'lab'\nThing - 'x'\n", "lab").unwrap_err();
        assert!(e.contains("unknown record kind"), "{e}");
        // A setting the tree refuses makes the whole load fail, nothing applied.
        let mut t = AssocTree::default();
        let op = parse(
            "Cluster - 'lab'\nParent - 'root'\nAccount - 'a'\nAccount - 'b':MaxJobs=x\n",
            "lab",
        )
        .unwrap();
        assert!(apply(&mut t, &op, "lab").is_err());
        assert!(t.account("a").is_none());
    }
}
