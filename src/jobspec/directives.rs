//! `#SBATCH` directives and `SBATCH_*` input variables, and how they merge with the
//! command line (cf. src/sbatch/opt.c `_get_opts_from_script`, `_opt_env` and the
//! INPUT ENVIRONMENT VARIABLES table of sbatch(1)).
//!
//! Directives are the `#SBATCH` lines of the script header: every line up to the first
//! one that is neither blank nor a comment; later `#SBATCH` lines are plain comments.
//! Each line is split into words like a shell would (quotes, backslashes, `#` comments;
//! no expansion) and may hold several options.
//!
//! Precedence is command line > `SBATCH_*` variables > directives. It is implemented by
//! parsing one argument vector `directives ++ env ++ command line` with the same clap
//! command as the command line: options override themselves, so the last source wins,
//! which is exactly that precedence and needs no per-option merge code. Each directive
//! line is also parsed alone first, so a bad line is reported before anything else.

use crate::jobspec::opts::{OptError, SbatchArgs, parse_sbatch_argv};
use std::collections::BTreeMap;

/// The marker of a batch directive.
pub const SBATCH_PREFIX: &str = "#SBATCH";

/// One `#SBATCH` line, split into words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// 1-based line number in the script.
    pub line: usize,
    pub words: Vec<String>,
}

/// A line that cannot be split into words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("unterminated {0} quote")]
    Unterminated(char),
}

/// Splits `s` into words as a POSIX shell would, without expansions: blanks separate
/// words; `'…'` is literal; in `"…"` a backslash escapes only `"` `\` `$` `` ` ``;
/// elsewhere a backslash escapes the next character; an unquoted `#` at the start of
/// a word begins a comment.
///
/// Errors: [`SplitError::Unterminated`] for an unclosed quote.
pub fn split_words(s: &str) -> Result<Vec<String>, SplitError> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(SplitError::Unterminated('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(SplitError::Unterminated('"')),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(SplitError::Unterminated('"')),
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// The `#SBATCH` directives of `script`, in order, up to the first line that is
/// neither blank nor a comment, for a job of one component.
///
/// Errors: [`OptError::Fatal`] for a line with an unclosed quote;
/// [`OptError::Unsupported`] for a `#SBATCH hetjob` separator (use [`extract_groups`]).
pub fn extract(script: &str) -> Result<Vec<Directive>, OptError> {
    let mut groups = extract_groups(script)?;
    if groups.len() > 1 {
        return Err(OptError::Unsupported(
            "#SBATCH hetjob (heterogeneous jobs)".into(),
        ));
    }
    Ok(groups.pop().unwrap_or_default())
}

/// The `#SBATCH` directives of `script` split into the components of a heterogeneous
/// job at `#SBATCH hetjob` (or the older `packjob`) lines: one group per component,
/// one group for an ordinary job.
///
/// Errors: [`OptError::Fatal`] for a line with an unclosed quote.
pub fn extract_groups(script: &str) -> Result<Vec<Vec<Directive>>, OptError> {
    let mut groups = vec![Vec::new()];
    for (i, raw) in script.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        if !t.starts_with('#') {
            break;
        }
        let Some(rest) = line.strip_prefix(SBATCH_PREFIX) else {
            continue;
        };
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            continue; // `#SBATCHX`: just a comment
        }
        let words = split_words(rest).map_err(|e| {
            OptError::Fatal(format!("Invalid #SBATCH directive on line {}: {e}", i + 1))
        })?;
        if matches!(
            words.first().map(String::as_str),
            Some("hetjob" | "packjob")
        ) {
            groups.push(Vec::new());
            continue;
        }
        if !words.is_empty() {
            groups
                .last_mut()
                .expect("one group at least")
                .push(Directive { line: i + 1, words });
        }
    }
    Ok(groups)
}

/// Splits a command line at standalone `:` words into the option groups of a
/// heterogeneous job's components (`sbatch -n1 : -n2 job.sh`); one group when there is
/// no `:`.
pub fn split_het_groups(cli: &[String]) -> Vec<Vec<String>> {
    let mut groups = vec![Vec::new()];
    for a in cli {
        if a == ":" {
            groups.push(Vec::new());
        } else {
            groups
                .last_mut()
                .expect("one group at least")
                .push(a.clone());
        }
    }
    groups
}

/// How an input variable becomes an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EnvKind {
    /// `--opt=<value>`; an empty value is ignored.
    Value,
    /// `--opt` whatever the value.
    Flag,
    /// `--opt` when empty, else `--opt=<value>`.
    OptionalValue,
}

/// Input variables and the options they stand for (sbatch(1) INPUT ENVIRONMENT
/// VARIABLES). `SLURM_CLUSTERS` comes before `SBATCH_CLUSTERS` so the latter wins.
const INPUT_ENV: &[(&str, &str, EnvKind)] = &[
    ("SBATCH_ACCOUNT", "--account", EnvKind::Value),
    ("SBATCH_ARRAY_INX", "--array", EnvKind::Value),
    ("SLURM_CLUSTERS", "--clusters", EnvKind::Value),
    ("SBATCH_CLUSTERS", "--clusters", EnvKind::Value),
    ("SBATCH_CONSTRAINT", "--constraint", EnvKind::Value),
    ("SBATCH_CPUS_PER_GPU", "--cpus-per-gpu", EnvKind::Value),
    ("SBATCH_EXCLUSIVE", "--exclusive", EnvKind::OptionalValue),
    ("SBATCH_EXPORT", "--export", EnvKind::Value),
    (
        "SBATCH_GET_USER_ENV",
        "--get-user-env",
        EnvKind::OptionalValue,
    ),
    ("SBATCH_GPU_BIND", "--gpu-bind", EnvKind::Value),
    ("SBATCH_GPUS", "--gpus", EnvKind::Value),
    ("SBATCH_GPUS_PER_NODE", "--gpus-per-node", EnvKind::Value),
    (
        "SBATCH_GPUS_PER_SOCKET",
        "--gpus-per-socket",
        EnvKind::Value,
    ),
    ("SBATCH_GPUS_PER_TASK", "--gpus-per-task", EnvKind::Value),
    ("SBATCH_GRES", "--gres", EnvKind::Value),
    ("SBATCH_GRES_FLAGS", "--gres-flags", EnvKind::Value),
    ("SBATCH_HINT", "--hint", EnvKind::Value),
    ("SBATCH_IGNORE_PBS", "--ignore-pbs", EnvKind::Flag),
    ("SBATCH_JOB_NAME", "--job-name", EnvKind::Value),
    ("SBATCH_MEM_PER_CPU", "--mem-per-cpu", EnvKind::Value),
    ("SBATCH_MEM_PER_GPU", "--mem-per-gpu", EnvKind::Value),
    ("SBATCH_MEM_PER_NODE", "--mem", EnvKind::Value),
    ("SBATCH_NO_KILL", "--no-kill", EnvKind::OptionalValue),
    ("SBATCH_NO_REQUEUE", "--no-requeue", EnvKind::Flag),
    ("SBATCH_OPEN_MODE", "--open-mode", EnvKind::Value),
    ("SBATCH_OVERCOMMIT", "--overcommit", EnvKind::Flag),
    ("SBATCH_PARTITION", "--partition", EnvKind::Value),
    ("SBATCH_QOS", "--qos", EnvKind::Value),
    ("SBATCH_REQ_SWITCH", "--switches", EnvKind::Value),
    ("SBATCH_REQUEUE", "--requeue", EnvKind::Flag),
    ("SBATCH_RESERVATION", "--reservation", EnvKind::Value),
    ("SBATCH_SIGNAL", "--signal", EnvKind::Value),
    (
        "SBATCH_THREADS_PER_CORE",
        "--threads-per-core",
        EnvKind::Value,
    ),
    ("SBATCH_TIMELIMIT", "--time", EnvKind::Value),
    ("SBATCH_WAIT", "--wait", EnvKind::Flag),
    ("SBATCH_WCKEY", "--wckey", EnvKind::Value),
];

/// The options that the `SBATCH_*` input variables of `env` stand for, in
/// [`INPUT_ENV`] order, as `--opt=value` words.
pub fn env_words(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (var, opt, kind) in INPUT_ENV {
        let Some(v) = env.get(*var) else { continue };
        match kind {
            EnvKind::Value if v.is_empty() => {}
            EnvKind::Value => out.push(format!("{opt}={v}")),
            EnvKind::Flag => out.push((*opt).to_string()),
            EnvKind::OptionalValue if v.is_empty() => out.push((*opt).to_string()),
            EnvKind::OptionalValue => out.push(format!("{opt}={v}")),
        }
    }
    out
}

/// The options after merging all three sources, and the argument vector they were
/// parsed from (argv[0] included), for diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub args: SbatchArgs,
    pub argv: Vec<String>,
}

/// Merges directives, `SBATCH_*` variables of `env` and the command line `cli`
/// (without argv[0]), in increasing precedence.
///
/// Errors: the first bad directive line (unknown option, missing value, or a word that
/// is not an option), then any error of the merged parse.
pub fn merge(
    directives: &[Directive],
    env: &BTreeMap<String, String>,
    cli: &[String],
) -> Result<Merged, OptError> {
    for d in directives {
        let alone =
            parse_sbatch_argv(std::iter::once("sbatch").chain(d.words.iter().map(String::as_str)))?;
        if let Some(w) = alone.script.first() {
            return Err(OptError::Fatal(format!(
                "Invalid directive on line {} of the batch script: {w}",
                d.line
            )));
        }
    }
    let mut env_opts = env_words(env);
    for w in &env_opts {
        parse_sbatch_argv(["sbatch", w.as_str()])?;
    }
    drop_env_hint_conflicts(directives, cli, &mut env_opts)?;
    let argv: Vec<String> = std::iter::once("sbatch".to_string())
        .chain(directives.iter().flat_map(|d| d.words.iter().cloned()))
        .chain(env_opts)
        .chain(cli.iter().cloned())
        .collect();
    let args = parse_sbatch_argv(&argv)?;
    Ok(Merged { args, argv })
}

/// `--hint` and `--threads-per-core`/`--ntasks-per-core` exclude each other, but only
/// when both are given in the script or on the command line: one of them coming from
/// an input variable (`SBATCH_HINT`, `SBATCH_THREADS_PER_CORE`, …) gives way to the
/// other given explicitly, as slurm_opt.c's hint validation drops it.
fn drop_env_hint_conflicts(
    directives: &[Directive],
    cli: &[String],
    env_opts: &mut Vec<String>,
) -> Result<(), OptError> {
    let own = std::iter::once("sbatch")
        .chain(
            directives
                .iter()
                .flat_map(|d| d.words.iter().map(String::as_str)),
        )
        .chain(cli.iter().map(String::as_str));
    let l = parse_sbatch_argv(own)?.job.later;
    let own_threads = l.threads_per_core.is_some() || l.ntasks_per_core.is_some();
    let env_word = |w: &str, opt: &str| w.strip_prefix(opt).is_some_and(|r| r.starts_with('='));
    if own_threads {
        env_opts.retain(|w| !env_word(w, "--hint"));
    }
    if l.hint.is_some() {
        env_opts
            .retain(|w| !env_word(w, "--threads-per-core") && !env_word(w, "--ntasks-per-core"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        split_words(s).unwrap()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn word_splitting() {
        assert_eq!(w("  -a 1 --signal=KILL "), ["-a", "1", "--signal=KILL"]);
        assert_eq!(
            w(r#"-J "two words" --comment='it''s'"#),
            ["-J", "two words", "--comment=its"]
        );
        assert_eq!(
            w(r#"--comment="say \"hi\" \$x \n""#),
            [r#"--comment=say "hi" $x \n"#]
        );
        assert_eq!(w(r"--comment=a\ b\\c"), [r"--comment=a b\c"]);
        assert_eq!(w("-J x # a comment -t 5"), ["-J", "x"]);
        assert_eq!(w("-J a#b"), ["-J", "a#b"]);
        assert_eq!(w("-J '#x'"), ["-J", "#x"]);
        assert_eq!(w("--comment=''"), ["--comment="]);
        assert_eq!(w(""), Vec::<String>::new());
        assert_eq!(split_words("-J 'x"), Err(SplitError::Unterminated('\'')));
        assert_eq!(split_words("-J \"x"), Err(SplitError::Unterminated('"')));
    }

    #[test]
    fn directives_stop_at_the_first_command() {
        let script = "#!/bin/bash\n\
                      # a comment\n\
                      #SBATCH -J early_name\n\
                      \n\
                      #SBATCH --time=5 -o out.txt\r\n\
                      #SBATCHX --not-a-directive\n\
                      \x20 #SBATCH --indented-is-a-comment\n\
                      #SBATCH\n\
                      echo hello\n\
                      #SBATCH -J late_name\n";
        let d = extract(script).unwrap();
        assert_eq!(
            d,
            [
                Directive {
                    line: 3,
                    words: strings(&["-J", "early_name"])
                },
                Directive {
                    line: 5,
                    words: strings(&["--time=5", "-o", "out.txt"])
                },
            ]
        );
    }

    #[test]
    fn hetjob_splits_components() {
        let g = extract_groups(
            "#!/bin/sh\n#SBATCH -n1\n#SBATCH hetjob\n#SBATCH -n2 -c2\n#SBATCH packjob\necho\n",
        )
        .unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[0][0].words, ["-n1"]);
        assert_eq!(g[1][0].words, ["-n2", "-c2"]);
        assert!(g[2].is_empty());
        assert_eq!(
            extract_groups("#!/bin/sh\n#SBATCH -J x\n").unwrap().len(),
            1
        );
        let cli: Vec<String> = ["-n1", ":", "-n2", "job.sh", "a"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            split_het_groups(&cli),
            vec![vec!["-n1".to_string()], strings(&["-n2", "job.sh", "a"])]
        );
    }

    #[test]
    fn hetjob_is_refused() {
        let e = extract("#!/bin/sh\n#SBATCH -n1\n#SBATCH hetjob\n#SBATCH -n2\n").unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.render("sbatch").contains("hetjob"));
    }

    #[test]
    fn unclosed_quote_names_the_line() {
        let e = extract("#!/bin/sh\n#SBATCH -J 'x\n").unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: Invalid #SBATCH directive on line 2: unterminated ' quote\n"
        );
    }

    #[test]
    fn env_words_from_input_variables() {
        let e = env(&[
            ("SBATCH_JOB_NAME", "from_env"),
            ("SBATCH_TIMELIMIT", "7"),
            ("SBATCH_REQUEUE", "1"),
            ("SBATCH_EXCLUSIVE", ""),
            ("SBATCH_PARTITION", ""),
            ("SLURM_CLUSTERS", "a"),
            ("SBATCH_CLUSTERS", "b"),
            ("UNRELATED", "x"),
        ]);
        assert_eq!(
            env_words(&e),
            [
                "--clusters=a",
                "--clusters=b",
                "--exclusive",
                "--job-name=from_env",
                "--requeue",
                "--time=7"
            ]
        );
    }

    fn merged(script: &str, e: &[(&str, &str)], cli: &[&str]) -> Result<SbatchArgs, OptError> {
        merge(&extract(script)?, &env(e), &strings(cli)).map(|m| m.args)
    }

    #[test]
    fn a_hint_from_the_environment_gives_way_to_explicit_thread_options() {
        let script = "#!/bin/bash\ntrue\n";
        let e = [("SBATCH_HINT", "nomultithread")];
        let a = merged(script, &e, &["--threads-per-core=2", "job.sh"]).unwrap();
        assert_eq!(
            (a.job.later.hint, a.job.later.threads_per_core.as_deref()),
            (None, Some("2"))
        );
        let e = [("SBATCH_THREADS_PER_CORE", "1")];
        let a = merged(script, &e, &["--hint=multithread", "job.sh"]).unwrap();
        assert_eq!(
            (a.job.later.hint.as_deref(), a.job.later.threads_per_core),
            (Some("multithread"), None)
        );
        // Both explicit: still the conflict Slurm reports, when the spec is built.
        let a = merged(
            "#!/bin/bash\n#SBATCH --hint=nomultithread\ntrue\n",
            &[],
            &["--threads-per-core=2", "job.sh"],
        )
        .unwrap();
        assert!(a.job.later.hint.is_some() && a.job.later.threads_per_core.is_some());
    }

    #[test]
    fn precedence_cli_over_env_over_directives() {
        let script = "#!/bin/bash\n#SBATCH -J from_script -t 7\n#SBATCH --mem=1G\ntrue\n";
        // Directive alone.
        let a = merged(script, &[], &["job.sh"]).unwrap();
        assert_eq!(a.job.job_name.as_deref(), Some("from_script"));
        assert_eq!(a.job.time.as_deref(), Some("7"));
        assert_eq!(a.script, ["job.sh"]);
        // conformance 009: env over directive; command line over both.
        let e = [("SBATCH_JOB_NAME", "from_env")];
        let a = merged(script, &e, &["--hold", "job.sh"]).unwrap();
        assert_eq!(a.job.job_name.as_deref(), Some("from_env"));
        assert!(a.job.hold);
        let a = merged(script, &e, &["-J", "from_cli", "-t", "9", "job.sh", "arg"]).unwrap();
        assert_eq!(a.job.job_name.as_deref(), Some("from_cli"));
        assert_eq!(a.job.time.as_deref(), Some("9"));
        assert_eq!(a.script, ["job.sh", "arg"]);
        // --mem-per-cpu on the command line replaces a directive's --mem.
        let a = merged(script, &[], &["--mem-per-cpu=100"]).unwrap();
        assert_eq!(
            (a.job.mem, a.job.mem_per_cpu.as_deref()),
            (None, Some("100"))
        );
    }

    #[test]
    fn several_options_per_line_and_prefixes() {
        let a = merged(
            "#!/bin/sh\n#SBATCH --part=batch -n 2 --signal=B:USR1@30 -vv\n",
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(a.job.partition.as_deref(), Some("batch"));
        assert_eq!(a.job.ntasks.as_deref(), Some("2"));
        assert_eq!(a.job.signal.as_deref(), Some("B:USR1@30"));
        assert_eq!(a.job.verbose, 2);
    }

    #[test]
    fn bad_directives_are_reported() {
        let e = merged("#!/bin/sh\n#SBATCH --bogus\n", &[], &[]).unwrap_err();
        assert_eq!(e, OptError::Usage("unrecognized option '--bogus'".into()));
        let e = merged("#!/bin/sh\n#SBATCH -J x stray\n", &[], &[]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: Invalid directive on line 2 of the batch script: stray\n"
        );
        let e = merged("#!/bin/sh\n", &[("SBATCH_JOB_NAME", "x")], &["--bogus"]).unwrap_err();
        assert_eq!(e, OptError::Usage("unrecognized option '--bogus'".into()));
    }
}
