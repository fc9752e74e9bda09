//! Property tests that feed every parser of outside input arbitrary text, arbitrary
//! bytes and mutations of valid input (issue 25): none may panic, and where a parser
//! has a printer, what it prints parses back to the same value.
//!
//! The parsers: command-line options and `#SBATCH` lines (sbatch, srun, salloc through
//! clap and normalisation; every getopt front-end; scontrol, sreport and sacctmgr
//! commands), hostlists, time and memory units, absolute times, `--export`,
//! dependency strings, array expressions, GRES, constraints, job ids, output formats,
//! configuration files (sluice TOML, gres.conf) and protocol frames (`Request`,
//! `Response` and the agent's and stepd's messages, framed and bare).
//!
//! Each target runs [`cases`] cases: 256 by default, so that the whole set stays well
//! under a minute of `cargo test`; `SLUICE_FUZZ_CASES=N` runs N each (the long runs
//! quoted in the report). Failures found are kept in `proptest-regressions/fuzz.txt`
//! and replayed first on every run.

use proptest::prelude::*;
use proptest::test_runner::Config;

/// Cases per target: `SLUICE_FUZZ_CASES`, else 256.
fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> Config {
    Config {
        cases: cases(),
        // Shrinking a panic in a parser takes few steps; keep a failing run short.
        max_shrink_iters: 2048,
        ..Config::default()
    }
}

/// Characters that trip parsers: the separators of Slurm's syntaxes, digits, letters,
/// blanks and control characters, and multi-byte ones (which a byte index can split).
fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::sample::select(
            "0123456789-+:,=@%_.[]()*?&|!/ \t\nabcdeghkmnpstuxyzAGKMNTU#\"'\\$;<>"
                .chars()
                .collect::<Vec<_>>()
        ),
        2 => proptest::sample::select(vec!['Á', 'é', '€', '😀', '\u{301}', 'ß', '\u{0}', '\u{7f}', '９']),
        1 => any::<char>(),
    ]
}

/// A string of up to `max` hostile characters.
fn hostile(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(hostile_char(), 0..max).prop_map(|v| v.into_iter().collect())
}

/// `seed` with up to four edits: a hostile character inserted, a character removed or
/// replaced, or the text cut, at positions counted in characters.
fn mutate(seed: &str, edits: &[(usize, u8, char)]) -> String {
    let mut v: Vec<char> = seed.chars().collect();
    for &(at, op, c) in edits {
        let i = if v.is_empty() { 0 } else { at % (v.len() + 1) };
        match op {
            0 => v.insert(i, c),
            1 if i < v.len() => {
                v.remove(i);
            }
            2 if i < v.len() => v[i] = c,
            3 => v.truncate(i),
            _ => v.insert(i, c),
        }
    }
    v.into_iter().collect()
}

/// Arbitrary text, or a valid example from `seeds` with a few edits.
fn input(seeds: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        hostile(40),
        (
            proptest::sample::select(seeds),
            proptest::collection::vec((0..200usize, 0..5u8, hostile_char()), 0..4)
        )
            .prop_map(|(s, e)| mutate(s, &e)),
    ]
}

/// An argument vector: words from `seeds` (options and values), each perhaps mutated,
/// mixed with arbitrary words.
fn argv(seeds: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(input(seeds), 0..6)
}

const TIMES: &[&str] = &[
    "now",
    "now+1hour",
    "now-2days",
    "today",
    "tomorrow",
    "midnight",
    "teatime",
    "16:00",
    "8:30 PM",
    "2026-03-10T14:30:00",
    "03/10",
    "0310",
    "3.10.26",
    "uts1795964168",
    "12/31-23:59",
];

const LIMITS: &[&str] = &[
    "5",
    "5:30",
    "1:00:00",
    "2-0",
    "2-3:00",
    "1-2:3:4",
    "UNLIMITED",
    "infinite",
    "-1",
    "0",
];

const MEMS: &[&str] = &[
    "400", "400M", "1G", "2g", "1T", "512K", "0", "62.5G", "1024MB",
];

const HOSTLISTS: &[&str] = &[
    "node-[001-003,007]",
    "a,b[1-2]",
    "r[1-2]n[01-02]",
    "n1 n2",
    "gpu[00-15]",
    "x[1-3,5]y",
];

const DEPENDENCIES: &[&str] = &[
    "afterok:12",
    "after:1:2,afterany:3",
    "afternotok:4?afterok:5",
    "singleton",
    "aftercorr:7_2",
    "after:9+10",
    "afterok:12_[1-3]",
];

const EXPORTS: &[&str] = &["ALL", "NONE", "A,B", "ALL,X=1", "NONE,Y=2,Z", "A=b=c", "=x"];

const ARRAYS: &[&str] = &["0-15", "1,3,5", "0-20:4", "1-100%5", "7", "0-3,8-9:1%2"];

const GRES: &[&str] = &[
    "gpu:2",
    "gpu:a100:1",
    "gpu",
    "gpu:a100:1,shard:4",
    "gpu:1(S:0-1)",
    "mps:100",
];

const JOB_IDS: &[&str] = &[
    "12", "12_3", "12_[1-3]", "12.0", "12.batch", "12+1", "12+1.0",
];

/// Options of sbatch, srun and salloc and values they take.
const JOB_WORDS: &[&str] = &[
    "-J",
    "name",
    "-n4",
    "--ntasks=2",
    "-N",
    "1-2",
    "-c",
    "3",
    "--mem=1G",
    "--mem-per-cpu=100",
    "-t",
    "1:00",
    "--time=2-0",
    "--begin=now+1hour",
    "--export=NONE,A=1",
    "--dependency=afterok:12",
    "--array=0-3%2",
    "--gres=gpu:2",
    "--gpus-per-task=1",
    "--constraint=a&b",
    "--nodelist=n[1-2]",
    "--signal=B:USR1@60",
    "--nice=5",
    "--hint=nomultithread",
    "--distribution=cyclic",
    "--cpu-bind=cores",
    "--gpu-bind=closest",
    "--het-group=0-1",
    "--switches=2@1:00",
    "--exclusive",
    "--wrap",
    "true",
    ":",
    "-o",
    "out-%j.txt",
    "--deadline=tomorrow",
    "--immediate=5",
    "--kill-on-bad-exit",
];

/// A fixed submit context (no machine state).
fn ctx() -> crate::jobspec::opts::SubmitContext {
    crate::jobspec::opts::SubmitContext {
        cwd: "/home/alice/work".into(),
        env: [("HOME", "/home/alice")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        host: "vm".into(),
        umask: 0o022,
        now: chrono::DateTime::parse_from_rfc3339("2026-03-10T14:30:00+01:00")
            .expect("a valid time"),
    }
}

const NOW: i64 = 1_795_964_168;

proptest! {
    #![proptest_config(config())]

    #[test]
    fn absolute_times(s in input(TIMES), past in any::<bool>()) {
        let _ = crate::cli::timeparse::parse_time(&s, NOW, &chrono::Utc, past);
        let tz = chrono::FixedOffset::east_opt(3600).expect("an offset");
        let _ = crate::cli::timeparse::parse_time(&s, NOW, &tz, past);
        let _ = crate::jobspec::opts::parse_begin(&s, &ctx().now);
    }

    #[test]
    fn time_limits_and_durations(s in input(LIMITS)) {
        let _ = crate::jobspec::units::parse_time_limit(&s);
        let _ = crate::model::time::parse_duration_secs(&s);
        let _ = crate::model::reservation::parse_secs(&s);
        let _ = crate::model::acct_ops::parse_minutes("MaxWall", &s);
    }

    #[test]
    fn memory_units(s in input(MEMS)) {
        let _ = crate::jobspec::units::parse_mem_mb(&s);
        let _ = crate::model::assoc::TresMap::parse(&format!("mem={s}"));
    }

    #[test]
    fn memory_round_trip(mb in 0u64..(1 << 40)) {
        // Whole units print exactly and parse back.
        let text = crate::jobspec::units::fmt_mem_mb(mb);
        if !text.contains('.') {
            prop_assert_eq!(crate::jobspec::units::parse_mem_mb(&text), Ok(mb));
        }
    }

    #[test]
    fn hostlists(s in input(HOSTLISTS)) {
        if let Ok(names) = crate::model::hostlist::expand(&s) {
            // What expands compresses back to the same names (bounded: a range can be
            // large).
            if names.len() < 10_000 && names.iter().all(|n| !n.is_empty()) {
                let again = crate::model::hostlist::expand(
                    &crate::model::hostlist::compress(&names));
                prop_assert_eq!(again.ok(), Some(names));
            }
        }
    }

    #[test]
    fn dependencies(s in input(DEPENDENCIES)) {
        // (Its Display is squeue's, with each item's state: not a round trip.)
        if let Ok(Some(d)) = crate::model::depend::Dependency::parse(&s) {
            let _ = d.to_string();
        }
    }

    #[test]
    fn exports(s in input(EXPORTS)) {
        let env = ctx().env;
        let _ = crate::jobspec::export::job_environment(Some(&s), &env);
    }

    #[test]
    fn arrays(s in input(ARRAYS)) {
        let _ = crate::model::array::ArraySpec::parse(&s, 1001);
        let _ = crate::model::array::IndexSet::parse(&s, 1001);
        let _ = crate::jobspec::opts::valid_array_syntax(&s);
    }

    #[test]
    fn resources(s in input(GRES)) {
        let _ = crate::model::gres::parse_gres_list(&s);
        let _ = crate::model::gres::parse_gpus(&s);
        let _ = crate::model::gres::parse_node_gres(&s);
        let _ = crate::model::gres::parse_licenses(&s);
        let _ = crate::model::gres::parse_gres_flags(&s);
        let _ = crate::model::constraint::Constraint::parse(&s);
        let _ = crate::model::gpu_bind::GpuBind::parse(&s);
        let _ = crate::model::billing::BillingWeights::parse(&s);
        let _ = crate::model::assoc::TresMap::parse(&s);
        let _ = crate::model::assoc::TresMap::parse_update(&s);
        let _ = crate::model::assoc::Shares::parse(&s);
        let _ = crate::config::parse_cpu_list(&s);
    }

    #[test]
    fn job_ids_and_small_values(s in input(JOB_IDS)) {
        let _ = crate::cli::jobid::parse_job_id(&s);
        let _ = crate::jobspec::opts::parse_signal(&s);
        let _ = crate::jobspec::opts::parse_node_count(&s);
        let _ = crate::jobspec::opts::parse_switches(&s);
        let _ = crate::jobspec::opts::parse_het_group(&s);
        let _ = crate::jobspec::opts::parse_nice(&s);
        let _ = crate::cli::squeue::parse_sort(&s);
        let _ = crate::cli::squeue::StateFilter::parse(&s);
        let _ = crate::cli::multiprog::parse(&s, 4);
    }

    #[test]
    fn file_patterns_and_selectors(s in input(&[
        "slurm-%A_%a.out", "%x-%j-%N.%t", "out\\%j", "%10j", "%%", "%u/%s.log", "%",
    ])) {
        use crate::jobspec::pattern::{PatternCtx, expand_pattern};
        let _ = expand_pattern(&s, &PatternCtx::batch(12, Some((10, 2)), "name", "alice", "n1"));
        let _ = expand_pattern(&s, &PatternCtx::batch(12, None, &s, &s, &s));
        let _ = crate::cli::squeue::JobSel::parse(&s);
        let _ = crate::cli::sinfo::NodeSel::parse(&s);
    }

    #[test]
    fn accounting_words(s in input(&[
        "account", "user", "qos", "assoc", "name=alice", "MaxWall=1-0", "GrpTRES=cpu=4,mem=1G",
        "Flags=DenyOnLimit", "AdminLevel=Operator", "Fairshare=parent", "Preempt=low",
        "PreemptMode=requeue", "MaxSubmitJobs=-1",
    ])) {
        use crate::model::assoc::{AdminLevel, PreemptMode, QosFlag, Shares};
        let _ = crate::model::acct_ops::Entity::parse(&s);
        let _ = crate::model::acct_ops::Setting::parse(&s);
        let _ = AdminLevel::parse(&s);
        let _ = PreemptMode::parse(&s);
        let _ = QosFlag::parse(&s);
        let _ = Shares::parse(&s);
        let _ = crate::model::assoc::Enforce::parse(&s);
        let _ = crate::config::sched::Policy::parse(&s);
    }

    #[test]
    fn reservation_specs(words in argv(&[
        "ReservationName=r1", "StartTime=now", "EndTime=now+1hour", "Duration=1-0",
        "Nodes=n[1-2]", "NodeCnt=2", "CoreCnt=4", "TRES=cpu=4,license/a=2", "Users=-bob",
        "Accounts+=a", "Flags=MAINT,IGNORE_JOBS", "Licenses=a:1", "PartitionName=debug",
        "res", "Á"])) {
        use crate::cli::scontrol_resv::{Mode, parse};
        let time = |v: &str| crate::cli::timeparse::parse_time(v, NOW, &chrono::Utc, false).ok();
        let _ = parse(&words, Mode::Create, &time);
        let _ = parse(&words, Mode::Update, &time);
    }

    #[test]
    fn environment_options(env in proptest::collection::btree_map(
        input(&["SBATCH_TIMELIMIT", "SBATCH_PARTITION", "SBATCH_EXPORT", "SLURM_JOB_ID",
                "SBATCH_HINT", "SBATCH_NO_KILL", "SBATCH_GRES_FLAGS", "SBATCH_MEM_BIND"]),
        input(&["1:00", "debug", "NONE", "12", "nomultithread", "off", "enforce-binding"]),
        0..4,
    )) {
        let words = crate::jobspec::directives::env_words(&env);
        let argv = std::iter::once("sbatch".to_string()).chain(words);
        if let Ok(a) = crate::jobspec::opts::parse_sbatch_argv(argv) {
            let _ = a.job.to_spec(&ctx());
        }
    }

    #[test]
    fn output_formats(s in input(&["%.18i %9P %j", "%all", "JobID,Name:30,State:.5", "%-5i%5u"])) {
        let _ = crate::cli::format::parse_short(&s, &crate::cli::squeue::job_fields());
        let _ = crate::cli::format::parse_long(&s, &crate::cli::squeue::job_fields());
    }

    #[test]
    fn sbatch_options_and_normalisation(words in argv(JOB_WORDS)) {
        let argv = std::iter::once("sbatch".to_string()).chain(words);
        if let Ok(a) = crate::jobspec::opts::parse_sbatch_argv(argv) {
            let _ = a.job.to_spec(&ctx());
        }
    }

    #[test]
    fn srun_and_salloc_options(words in argv(JOB_WORDS)) {
        let argv: Vec<String> = std::iter::once("srun".to_string()).chain(words).collect();
        if let Ok(groups) = crate::jobspec::opts::parse_srun_argv(argv.clone()) {
            for g in groups {
                let _ = g.job.to_step_spec(&ctx());
            }
        }
        let _ = crate::jobspec::opts::parse_salloc_argv(argv);
    }

    #[test]
    fn sbatch_directives(lines in proptest::collection::vec(
        input(&["#SBATCH -n 4", "#SBATCH --time=1:00 # comment", "#SBATCH -J \"a b\"",
                "#SBATCH hetjob", "#SBATCH --export=A='x y'", "echo hi", "#!/bin/sh"]), 0..6)) {
        let script = lines.join("\n");
        let _ = crate::jobspec::directives::extract(&script);
        let _ = crate::jobspec::directives::extract_groups(&script);
        for l in &lines {
            let _ = crate::jobspec::directives::split_words(l);
        }
    }

    #[test]
    fn getopt_front_ends(words in argv(&[
        "-j", "12", "--format=JobID%5,State", "-S", "ÁÁÁ", "--starttime=now-1hour", "-u",
        "alice", "-s", "R", "-o", "%i", "-lh", "--noheader", "--me", "--signal=USR1",
        "-A", "a,b", "--state=PD", "-M", "c1", "--", "12_[1-3]", "-t", "hours", "-P"])) {
        let lookup = |_: &str| Some(1000);
        let _ = crate::cli::sacct::parse_args(&words, &lookup);
        // sprio's and sshare's parsers answer --help, --usage and --version on stdout
        // themselves (which the test harness does not capture): not those words.
        let prints = |w: &String| {
            let long = w.strip_prefix("--").map(|r| r.split('=').next().unwrap_or(r));
            long.is_some_and(|n| {
                !n.is_empty() && ["help", "usage", "version"].iter().any(|k| k.starts_with(n))
            }) || (w.starts_with('-') && !w.starts_with("--") && w.contains('V'))
        };
        let words: Vec<String> = words.into_iter().filter(|w| !prints(w)).collect();
        let _ = crate::cli::scancel::parse_args(&words, 1000, &lookup);
        let _ = crate::cli::sstat::parse_args(&words);
        let _ = crate::cli::sprio::parse(&words);
        let _ = crate::cli::sshare::parse(&words);
        let _ = crate::cli::sacctmgr::parse(&words);
        let time = |v: &str| crate::cli::timeparse::parse_time(v, NOW, &chrono::Utc, true).ok();
        let _ = crate::cli::sreport::parse(&words, &time);
    }

    #[test]
    fn clap_front_ends(words in argv(&[
        "-j", "12", "-o", "%.5i %j", "-O", "JobID:10,Name", "-t", "PD,R", "-S", "-p,i",
        "--states=all", "-u", "alice", "-w", "n[1-2]", "-N", "-s", "--format=%N %c"])) {
        use clap::Parser;
        let env = |_: &str| None;
        let user = |_: &str| Some(1000);
        let argv = std::iter::once("squeue".to_string()).chain(words.iter().cloned());
        if let Ok(a) = crate::cli::squeue::Args::try_parse_from(argv) {
            let mut err = String::new();
            let _ = crate::cli::squeue::build_query(&a, &env, &user, 1000, &mut err);
        }
        let argv = std::iter::once("sinfo".to_string()).chain(words.iter().cloned());
        if let Ok(a) = crate::cli::sinfo::Args::try_parse_from(argv) {
            let _ = crate::cli::sinfo::build_query(&a, &env);
        }
    }

    #[test]
    fn scontrol_commands(words in argv(&[
        "show", "job", "12", "update", "JobId=1", "StartTime=now+1", "TimeLimit=5",
        "NodeName=n1", "State=DRAIN", "Reason=x", "create", "reservation",
        "StartTime=now", "Duration=60", "Nodes=n[1-2]", "Users=alice", "Flags=MAINT",
        "hold", "release", "requeue", "suspend", "delete", "ReservationName=r1",
        "hostlist", "hostnames", "n[1-3]", "-o", "--details", "Licenses=a:2"])) {
        if let Ok((_, w)) = crate::cli::scontrol::parse_args(&words) {
            let _ = crate::cli::scontrol::parse_command(&w);
        }
    }

    #[test]
    fn config_files(text in input(&[
        "cluster_name = \"c\"\nstate_dir = \"/tmp/s\"\n[[nodes]]\nname = \"n[1-2]\"\ncpus = 4\n",
        "[[partitions]]\nname = \"debug\"\nnodes = \"ALL\"\ndefault = true\nmax_time = \"1:00:00\"\n",
        "[scheduler]\npolicy = \"backfill\"\n[cgroup]\nenabled = false\n",
        "[[nodes]]\nname = \"g1\"\ngres = \"gpu:a100:4\"\nmemory = \"16G\"\n",
    ])) {
        let _ = crate::config::Config::from_toml(&text, std::path::Path::new("/tmp/fuzz.toml"));
        let _ = crate::config::gres_conf::parse_slurm(&text);
    }

    #[test]
    fn protocol_frames(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        use crate::proto::{FromAgent, Request, Response, ToAgent, codec};
        let _ = codec::decode::<Request>(&bytes);
        let _ = codec::decode::<Response>(&bytes);
        let _ = codec::decode::<ToAgent>(&bytes);
        let _ = codec::decode::<FromAgent>(&bytes);
        let _ = codec::decode::<crate::proto::stepio::StepdEvent>(&bytes);
        let _ = codec::decode::<crate::proto::stepio::StepdInput>(&bytes);
        let mut framed = codec::SyncFramed::new(std::io::Cursor::new(bytes));
        let _ = framed.recv::<Request>();
    }

    #[test]
    fn protocol_frames_mutated(
        which in 0..4usize,
        edits in proptest::collection::vec((0..64usize, any::<u8>()), 1..4),
    ) {
        // Valid messages with a few bytes changed.
        use crate::proto::{Request, codec};
        let msgs = [
            Request::Ping,
            Request::Stats,
            Request::Usage { start: 1, end: 2 },
            Request::Acct(crate::proto::AcctQuery::default()),
        ];
        let mut bytes = codec::encode(&msgs[which]).expect("encodes");
        for (at, b) in edits {
            let i = at % bytes.len().max(1);
            if i < bytes.len() {
                bytes[i] = b;
            }
        }
        let _ = codec::decode::<Request>(&bytes);
    }
}
