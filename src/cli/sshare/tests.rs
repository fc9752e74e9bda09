//! sshare's text against the golden cluster (shared/golden/sprio_sshare_sdiag.txt):
//! root → {root/root, research → {alice, bob}}, one share each, no usage.

use super::*;
use crate::sched::fairshare::{Algorithm, FairShareTree, UsageLedger, UserDef};

fn golden_rows() -> Vec<ShareRow> {
    let accounts = vec![crate::sched::fairshare::AccountDef {
        name: "research".into(),
        parent: None,
        shares: 1,
    }];
    let users = vec![
        UserDef {
            user: "root".into(),
            account: "root".into(),
            shares: 1,
        },
        UserDef {
            user: "alice".into(),
            account: "research".into(),
            shares: 1,
        },
        UserDef {
            user: "bob".into(),
            account: "research".into(),
            shares: 1,
        },
    ];
    let t = FairShareTree::build(
        &accounts,
        &users,
        &UsageLedger::default(),
        &[],
        Algorithm::FairTree,
    );
    let tres = [
        "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
    ]
    .iter()
    .map(|n| (n.to_string(), 0))
    .collect::<Vec<_>>();
    t.display_order()
        .into_iter()
        .map(|i| ShareRow {
            account: t.assocs[i].account.clone(),
            user: t.assocs[i].user.clone(),
            raw_shares: t.assocs[i].parent.map(|_| t.assocs[i].shares),
            share: t.shares[i].clone(),
            fair_tree: true,
            tres_run_mins: tres.clone(),
            grp_tres_mins: String::new(),
            grp_tres_raw: tres.clone(),
            id: Some(i as u32 + 1),
            partition: None,
        })
        .collect()
}

fn out(args: &str, me: &str) -> String {
    let a: Vec<String> = args.split_whitespace().map(String::from).collect();
    let o = parse(&a).unwrap().unwrap();
    render(&o, &golden_rows(), "cluster", me).unwrap()
}

/// `alice$ sshare` in shared/golden/sprio_sshare_sdiag.txt.
const GOLDEN_DEFAULT: &str = concat!(
    "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare \n",
    "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- \n",
    "root                                          0.000000           0      1.000000            \n",
    " research                                1    0.500000           0      0.000000            \n",
    "  research                alice          1    0.500000           0      0.000000   1.000000 \n",
);

/// `alice$ sshare -a -l` in the same file.
const GOLDEN_LONG: &str = concat!(
    "Account                    User  RawShares  NormShares    RawUsage   NormUsage  EffectvUsage  FairShare    LevelFS                    GrpTRESMins                    TRESRunMins \n",
    "-------------------- ---------- ---------- ----------- ----------- ----------- ------------- ---------- ---------- ------------------------------ ------------------------------ \n",
    "root                                          0.000000           0                  1.000000                                                      cpu=0,mem=0,energy=0,node=0,b+ \n",
    " root                      root          1    0.500000           0    0.000000      0.000000   1.000000        inf                                cpu=0,mem=0,energy=0,node=0,b+ \n",
    " research                                1    0.500000           0    0.000000      0.000000                   inf                                cpu=0,mem=0,energy=0,node=0,b+ \n",
    "  research                alice          1    0.500000           0    0.000000      0.000000   1.000000        inf                                cpu=0,mem=0,energy=0,node=0,b+ \n",
    "  research                  bob          1    0.500000           0    0.000000      0.000000   1.000000        inf                                cpu=0,mem=0,energy=0,node=0,b+ \n",
);

#[test]
fn default_output_matches_golden() {
    assert_eq!(out("", "alice"), GOLDEN_DEFAULT);
}

#[test]
fn long_all_matches_golden() {
    assert_eq!(out("-a -l", "alice"), GOLDEN_LONG);
}

#[test]
fn compat_calls() {
    // `sshare -n -P -o account,fairshare` (exporters): indented names, `|`.
    assert_eq!(
        out("-n -P -o account,fairshare", "alice"),
        "root|\n research|\n  research|1.000000\n"
    );
    // `sshare -U --format Account%256 --noheader`: the caller's accounts only.
    let o = out("-U --format Account%256 --noheader", "alice");
    assert_eq!(o.lines().count(), 1);
    assert_eq!(o.len(), 256 + 2);
    assert!(o.ends_with("  research \n"));
    // -p ends lines with `|`; headers are field names.
    assert_eq!(
        out("-p -a -A research -o User,RawShares", "x"),
        "User|RawShares|\n|1|\nalice|1|\nbob|1|\n"
    );
    assert_eq!(out("-P -n -u bob -U -oUser", "alice"), "bob\n");
}

#[test]
fn truncation_and_bad_options() {
    assert!(out("-l -n", "alice").contains("cpu=0,mem=0,energy=0,node=0,b+"));
    assert!(
        parse(&["-o".into(), "nosuch".into()])
            .map(|o| render(&o.unwrap(), &[], "c", "x"))
            .unwrap()
            .unwrap_err()
            .contains("Invalid field")
    );
    assert!(parse(&["-Z".into()]).is_err());
    assert!(parse(&["-A".into()]).is_err());
    assert!(parse(&["extra".into()]).is_err());
    assert_eq!(cell("abcdef", 4), "abc+");
    assert_eq!(cell("ab", -4), "ab  ");
}

#[test]
fn grp_tres_mins_shows_the_association_limit() {
    let mut rows = golden_rows();
    // Rows: root, root/root, research, research/alice, research/bob.
    rows[2].grp_tres_mins = "cpu=600".into();
    let a: Vec<String> = "-a -P -o Account,User,GrpTRESMins"
        .split_whitespace()
        .map(String::from)
        .collect();
    let o = parse(&a).unwrap().unwrap();
    let text = render(&o, &rows, "cluster", "alice").unwrap();
    assert_eq!(text.lines().nth(3), Some(" research||cpu=600"), "{text}");
    assert_eq!(text.lines().nth(4), Some("  research|alice|"), "{text}");
}

#[test]
fn grp_tres_raw_id_and_partition_fields() {
    let mut rows = golden_rows();
    // Rows: root, root/root, research, research/alice, research/bob.
    rows[3].grp_tres_raw[0].1 = 120;
    rows[3].grp_tres_raw[4].1 = 480;
    rows[4].partition = Some("gpu".into());
    let p = |args: &str| {
        let a: Vec<String> = args.split_whitespace().map(String::from).collect();
        render(&parse(&a).unwrap().unwrap(), &rows, "cluster", "alice").unwrap()
    };
    let text = p("-a -P -o Account,User,ID,Partition,GrpTRESRaw");
    assert_eq!(
        text.lines().next(),
        Some("Account|User|ID|Partition|GrpTRESRaw")
    );
    assert_eq!(
        text.lines().nth(4),
        Some(
            "  research|alice|4||cpu=120,mem=0,energy=0,node=0,billing=480,fs/disk=0,vmem=0,pages=0"
        )
    );
    assert!(
        text.lines()
            .nth(5)
            .unwrap()
            .starts_with("  research|bob|5|gpu|")
    );
    // Prefixes resolve as in Slurm's field table: GrpTRESR, P, I.
    assert_eq!(
        p("-n -P -u bob -U -o GrpTRESR,P,I").trim(),
        "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0|gpu|5"
    );
    // -m: Partition after User in the default columns (width 12).
    let m = p("-m -n -a -A research -U");
    assert!(
        m.contains("  research                  bob          gpu          1"),
        "{m}"
    );
    let head = p("-m");
    assert!(
        head.starts_with("Account                    User    Partition  RawShares"),
        "{head}"
    );
}
