//! sacct through the real front-end: the default table and window, `-j`, `-u`, `-S/-E`,
//! `--format` with widths, `-X`, `-p/-P`, `-n`, `--delimiter`, `-s`, the `.batch` step
//! row, and bad input.

use crate::harness::*;

const HEADER: &str =
    "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode ";
const RULE: &str = "------------ ---------- ---------- ---------- ---------- ---------- -------- ";

#[test]
fn tables_fields_and_filters() {
    let c = TestCluster::start();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let ok = c.submit(&["-J", "okjob", "-n", "2", "--wrap", "true"]);
    let bad = c.submit(&["-J", "a_rather_long_name", "--wrap", "exit 4"]);
    let held = c.submit(&["-J", "held", "-H", "--wrap", "true"]);
    c.wait_done(ok);
    c.wait_done(bad);
    // Default: today's jobs with their batch steps (pending: no step row yet).
    let out = c.ok("sacct", &[]);
    let want = format!(
        "{HEADER}\n{RULE}\n\
         {ok:<12}      okjob      debug                     2  COMPLETED      0:0 \n\
         {ok:<12}      batch                                2  COMPLETED      0:0 \n\
         {bad:<12} a_rather_+      debug                     1     FAILED      4:0 \n\
         {bad:<12}      batch                                1     FAILED      4:0 \n\
         {held:<12}       held      debug                     0    PENDING      0:0 \n",
        ok = ok,
        bad = bad,
        held = held
    )
    .replace(
        &format!("{ok:<12}      batch"),
        &format!("{:<12}      batch", format!("{ok}.batch")),
    )
    .replace(
        &format!("{bad:<12}      batch"),
        &format!("{:<12}      batch", format!("{bad}.batch")),
    );
    assert_eq!(out, want);
    // -X: allocations only; -j lists and repeats; -n.
    let ids = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["-n", "-P", "-o", "JobID"];
        a.extend_from_slice(args);
        c.ok("sacct", &a).lines().map(str::to_string).collect()
    };
    assert_eq!(ids(&["-X"]), [ok, bad, held].map(|i| i.to_string()));
    assert_eq!(
        ids(&["-X", "-j", &format!("{bad},{held}")]),
        [bad, held].map(|i| i.to_string())
    );
    assert_eq!(
        ids(&["-j", &ok.to_string(), "-j", &bad.to_string(), "-X"]),
        [ok, bad].map(|i| i.to_string())
    );
    assert_eq!(
        ids(&["-j", &format!("{ok}.batch")]),
        [format!("{ok}.batch")]
    );
    assert_eq!(ids(&["-X", "-u", &user]).len(), 3);
    assert_eq!(ids(&["-X", "-u", "nobody"]), Vec::<String>::new());
    assert_eq!(
        ids(&["-X", "--name=held,okjob"]),
        [ok, held].map(|i| i.to_string())
    );
    // --state selects jobs in that state within [-S, -E]; without -E the window is the
    // single instant -S (Slurm's rule, golden sacct.txt), so finished jobs need -E.
    assert_eq!(
        ids(&["-X", "-s", "F", "-S", "now-1hour", "-E", "now"]),
        [bad.to_string()]
    );
    assert_eq!(
        ids(&["-X", "-s", "F", "-S", "now-1hour"]),
        Vec::<String>::new()
    );
    assert_eq!(ids(&["-X", "-s", "PD"]), [held.to_string()]);
    // Time windows: only the still-pending job exists an hour from now; everything
    // since yesterday; nothing before the jobs were submitted.
    assert_eq!(ids(&["-X", "-S", "now+1hour"]), [held.to_string()]);
    assert_eq!(ids(&["-X", "-S", "now-1days", "-E", "now"]).len(), 3);
    // (-E alone before the default start, midnight today, is an error as in Slurm;
    // see errors::bad_sbatch_input_names_the_problem_and_creates_no_job.)
    assert_eq!(
        ids(&["-X", "-S", "1999-01-01", "-E", "2000-01-01T00:00:00"]),
        Vec::<String>::new()
    );
    // -p ends lines with the delimiter, -P does not; --delimiter.
    let p = c.ok(
        "sacct",
        &["-p", "-X", "-j", &ok.to_string(), "-o", "JobID,State"],
    );
    assert_eq!(p, format!("JobID|State|\n{ok}|COMPLETED|\n"));
    let p = c.ok(
        "sacct",
        &["-P", "-X", "-j", &ok.to_string(), "-o", "jobid,state"],
    );
    assert_eq!(p, format!("JobID|State\n{ok}|COMPLETED\n"));
    let p = c.ok(
        "sacct",
        &[
            "-P",
            "--delimiter=^|^",
            "-n",
            "-X",
            "-j",
            &ok.to_string(),
            "-o",
            "JobID,ExitCode",
        ],
    );
    assert_eq!(p, format!("{ok}^|^0:0\n"));
    // --format widths: `%N` sets the width, truncation marks with `+`.
    let f = c.ok(
        "sacct",
        &[
            "-n",
            "-X",
            "-j",
            &bad.to_string(),
            "-o",
            "JobName%8,State%12,User%-10",
        ],
    );
    assert_eq!(f, format!("a_rathe+       FAILED {:<10} \n", user));
    // -b: brief.
    let b = c.ok("sacct", &["-b", "-X", "-n", "-j", &bad.to_string()]);
    assert_eq!(b, format!("{bad:<12}     FAILED      4:0 \n"));
    // Other fields a tool reads.
    let o = c.ok(
        "sacct",
        &[
            "-n",
            "-P",
            "-X",
            "-j",
            &ok.to_string(),
            "-o",
            "JobIDRaw,NNodes,NCPUS,Timelimit,NodeList,Elapsed,Submit",
        ],
    );
    let f: Vec<&str> = o.trim().split('|').collect();
    assert_eq!(
        &f[..5],
        [&ok.to_string()[..], "1", "2", "01:00:00", &c.node()[..]]
    );
    // `true` takes no time, but start and end may fall on either side of a second.
    assert!(["00:00:00", "00:00:01"].contains(&f[5]), "{o}");
    assert!(f[6].len() == 19 && f[6].contains('T'), "{o}");
}

#[test]
fn bad_input() {
    let c = TestCluster::start();
    let cases: &[(&[&str], &str)] = &[
        (
            &["-j", "abc"],
            "sacct: fatal: Bad job/step specified: abc\n",
        ),
        (&["bogus"], "sacct: error: Unknown arguments:\n"),
        (
            &["-o", "bogus"],
            "sacct: error: Invalid field requested: \"bogus\"\n",
        ),
        (
            &["-S", "garbage"],
            "Invalid time specification (pos=0): garbage\n",
        ),
        (&["--bogus"], "sacct: unrecognized option '--bogus'\n"),
    ];
    for (args, err) in cases {
        let (code, out, e) = c.fails("sacct", args);
        assert_eq!(code, 1, "{args:?}");
        assert_eq!(out, "", "{args:?}");
        assert!(e.starts_with(err), "{args:?}: {e}");
    }
    // An unknown job: the header only, exit 0.
    assert_eq!(
        c.ok("sacct", &["-j", "999999"]),
        format!("{HEADER}\n{RULE}\n")
    );
}

/// What tools parse: ReqMem is the ReqTRES memory total; `--format` names match by
/// case-insensitive prefix; `%N` right-justifies, `%-N` left-justifies, headers are cut
/// plainly (sacct(1) `--format`; golden sacct.txt `AllocTRES%40`).
#[test]
fn req_mem_total_prefix_names_and_justification() {
    let c = TestCluster::start();
    let id = c.submit(&["-n", "2", "--mem-per-cpu=100", "--wrap", "true"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let j = id.to_string();
    assert_eq!(
        c.ok(
            "sacct",
            &["-X", "-n", "-P", "-o", "reqm,jobidr,STAT", "-j", &j]
        ),
        format!("200M|{id}|COMPLETED\n")
    );
    let out = c.ok(
        "sacct",
        &["-X", "-j", &j, "-o", "JobID%8,State%-3,ReqMem%6"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "   JobID Sta ReqMem ");
    assert_eq!(lines[1], "-------- --- ------ ");
    assert_eq!(lines[2], format!("{id:>8} CO+   200M "));
}
