//! `--help` and `--usage` of every front-end (issue 18), run through its Slurm-named
//! symlink with no controller and no configuration: each prints its text on stdout,
//! nothing on stderr, and exits 0; every option the help lists is one the command's
//! parser accepts, `--usage` names each of them, and an option the help does not list
//! is refused.

use crate::harness::sluice_bin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A directory of Slurm-named symlinks to the binary, and an environment without a
/// controller: `SLUICE_CONF` names a file that does not exist, so that a front-end
/// that tried to reach (or start) a controller would fail instead.
struct Links {
    dir: tempfile::TempDir,
}

impl Links {
    fn new() -> Links {
        let dir = tempfile::tempdir().unwrap();
        for name in sluice::cli::LINKED_COMMANDS.iter().chain(["sluice"].iter()) {
            std::os::unix::fs::symlink(sluice_bin(), dir.path().join(name)).unwrap();
        }
        Links { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn run(&self, name: &str, args: &[String]) -> Output {
        let home: PathBuf = self.path().join("home");
        Command::new(self.path().join(name))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.path().display()))
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &home)
            .env("SLUICE_CONF", self.path().join("no-such-config.toml"))
            .current_dir(self.path())
            .stdin(Stdio::null())
            .output()
            .expect("run front-end")
    }

    /// Runs `name args`, asserting exit 0, text on stdout and nothing on stderr.
    fn text(&self, name: &str, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let o = self.run(name, &args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && err.is_empty() && !out.trim().is_empty(),
            "{name} {args:?}: {} stdout:\n{out}\nstderr:\n{err}",
            o.status
        );
        out
    }
}

/// One option as a help line shows it: `-A, --account=name`, `    --mem=size`,
/// `--nice[=value]`, `-X`.
#[derive(Debug)]
struct Listed {
    short: Option<char>,
    long: Option<String>,
    /// Takes a value (`=value`, not an optional `[=value]`).
    value: bool,
}

/// The options of a help text's option column: lines `  -X, --name…` and
/// `      --name…`.
fn listed(help: &str) -> Vec<Listed> {
    help.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("  ")?;
            let field = l.split("  ").next()?.trim();
            let (short, rest) = if let Some(r) = field.strip_prefix("--") {
                (None, Some(r))
            } else {
                let r = field.strip_prefix('-')?;
                let c = r.chars().next()?;
                (Some(c), r[c.len_utf8()..].strip_prefix(", --"))
            };
            if short.is_none() && rest.is_none() {
                return None;
            }
            let (long, value) = match rest {
                Some(r) => match r.split_once('=') {
                    Some((n, _)) if n.ends_with('[') => (Some(n.trim_end_matches('[')), false),
                    Some((n, _)) => (Some(n), true),
                    None => (Some(r.split('[').next().unwrap_or(r)), false),
                },
                None => (None, field.contains(' ')),
            };
            Some(Listed {
                short,
                long: long.map(String::from),
                value,
            })
        })
        .collect()
}

/// The front-ends and an option each must list (one it is known for).
const EXPECT: &[(&str, &str)] = &[
    ("sbatch", "--job-name"),
    ("srun", "--ntasks"),
    ("salloc", "--nodes"),
    ("squeue", "--states"),
    ("scancel", "--signal"),
    ("sinfo", "--Node"),
    ("scontrol", "--oneliner"),
    ("sacct", "--starttime"),
    ("sstat", "--allsteps"),
    ("sprio", "--weights"),
    ("sdiag", "--all"),
    ("sshare", "--accounts"),
    ("sacctmgr", "--parsable2"),
    ("sreport", "--time_format"),
];

#[test]
fn every_front_end_answers_help_and_usage_on_stdout_with_exit_0() {
    let l = Links::new();
    assert_eq!(
        EXPECT.len() + 1,
        sluice::cli::LINKED_COMMANDS.len(),
        "every linked command but seff has an entry in EXPECT"
    );
    for (name, must) in EXPECT {
        let help = l.text(name, &["--help"]);
        assert!(help.starts_with(&format!("Usage: {name} ")), "{help}");
        let opts = listed(&help);
        assert!(
            opts.len() >= 5,
            "{name} --help lists {} options:\n{help}",
            opts.len()
        );
        assert!(
            opts.iter()
                .any(|o| o.long.as_deref() == must.strip_prefix("--")),
            "{name} --help does not list {must}:\n{help}"
        );
        assert!(help.contains("--help"), "{help}");
        let usage = l.text(name, &["--usage"]);
        assert!(usage.starts_with(&format!("Usage: {name} ")), "{usage}");
        // Every option the help lists is named in the usage too.
        for o in &opts {
            let named = o.long.as_ref().is_some_and(|n| {
                usage.contains(&format!("--{n}="))
                    || usage.contains(&format!("--{n}]"))
                    || usage.contains(&format!("--{n}["))
                    || usage.contains(&format!("--{n} "))
                    || usage.contains(&format!("--{n}\n"))
            }) || o.short.is_some_and(|c| {
                usage.contains(&format!("[-{c}]")) || usage.contains(&format!("[-{c} "))
            });
            assert!(named, "{name} --usage does not name {o:?}:\n{usage}");
        }
    }
    // seff: its one-screen usage for both.
    for flag in ["--help", "--usage"] {
        let t = l.text("seff", &[flag]);
        assert!(t.starts_with("Usage: seff") && t.contains("<Jobid>"), "{t}");
    }
    // stepd, a role started by agents, still answers --help (it was "no launch record").
    for flag in ["--help", "--usage"] {
        let t = l.text("sluice", &["stepd", flag]);
        assert!(t.starts_with("Usage: sluice stepd <job-spool-dir>"), "{t}");
    }
    // sluice itself: the roles and every command.
    for flag in ["--help", "--usage", "help"] {
        let t = l.text("sluice", &[flag]);
        for c in sluice::cli::LINKED_COMMANDS
            .iter()
            .chain(["controller", "agent", "stepd", "doctor", "keygen", "ci"].iter())
        {
            assert!(t.contains(&format!("\n  {c} ")), "sluice {flag}: {c}\n{t}");
        }
    }
}

#[test]
fn every_option_a_help_lists_is_accepted_and_others_are_refused() {
    let l = Links::new();
    for (name, _) in EXPECT {
        let help = l.text(name, &["--help"]);
        for o in listed(&help) {
            if matches!(o.long.as_deref(), Some("help" | "usage")) {
                continue;
            }
            // The option (with a value when it takes one), then --usage: the parser
            // must know the option; what it then does (print, refuse the value,
            // need a controller) is not this test's business.
            let mut args: Vec<String> = match (&o.long, o.short) {
                (Some(n), _) if o.value => vec![format!("--{n}=1")],
                (Some(n), _) => vec![format!("--{n}")],
                (None, Some(c)) if o.value => vec![format!("-{c}"), "1".into()],
                (None, Some(c)) => vec![format!("-{c}")],
                (None, None) => continue,
            };
            args.push("--usage".into());
            let out = l.run(name, &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains("unrecognized option")
                    && !err.contains("invalid option")
                    && !err.contains("requires an argument")
                    && !err.contains("doesn't allow an argument")
                    && out.status.code() != Some(101),
                "{name} {args:?} ({o:?} is listed in --help): {} {err}",
                out.status
            );
        }
        let out = l.run(name, &["--no-such-option".to_string()]);
        assert!(
            !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains("--no-such-option"),
            "{name} --no-such-option: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Non-ASCII and odd values on the command line (issue 25): each front-end refuses
/// them with a message naming the value, never a panic (exit 101). These once
/// panicked in byte-indexed slicing (`cli/timeparse.rs`, the hand-written option
/// parsers of sprio and sshare, `scontrol create reservation`).
#[test]
fn hostile_values_are_refused_with_a_message_not_a_panic() {
    let l = Links::new();
    let cases: &[(&str, &[&str], &str)] = &[
        ("sacct", &["-S", "ÁÁÁÁ"], "ÁÁÁÁ"),
        ("sacct", &["-E", "0９"], "0９"),
        ("scontrol", &["update", "JobId=1", "StartTime=ÁÁÁ"], "ÁÁÁ"),
        ("sreport", &["cluster", "utilization", "Start=ÁÁÁ"], "ÁÁÁ"),
        ("scontrol", &["create", "reservation", "ÁÁ"], "ÁÁ"),
        ("sprio", &["-Á"], "Á"),
        ("sshare", &["-Á"], "Á"),
        ("scancel", &["-Á"], "Á"),
        ("sdiag", &["-Á"], "Á"),
        ("sacctmgr", &["-Á"], "Á"),
        ("sbatch", &["--begin=ÁÁ", "--wrap=true"], "ÁÁ"),
        ("sbatch", &["--time=ÁÁ", "--wrap=true"], "--time"),
        ("sbatch", &["--mem=5Á", "--wrap=true"], "--mem"),
        ("srun", &["-t", "1Á", "true"], "--time"),
    ];
    for (name, args, named) in cases {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let o = l.run(name, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && o.status.code() != Some(101) && !err.contains("panicked"),
            "{name} {args:?}: {} {err}",
            o.status
        );
        assert!(err.contains(named), "{name} {args:?}: {err}");
    }
}
