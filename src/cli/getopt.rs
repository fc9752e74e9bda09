//! A small GNU `getopt_long` work-alike for the front-ends whose Slurm twins parse
//! with it (scancel, sacct): options and operands in any order, `--opt=value` and
//! `--opt value`, `-xVALUE` and `-x VALUE`, bundled short flags, unambiguous long
//! prefixes (`--sig=USR1`), `--` ending the options, and glibc's error texts.

/// One option a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct OptSpec {
    /// Long name without dashes; also the key reported in [`Item::Opt`].
    pub long: &'static str,
    pub short: Option<char>,
    pub takes_value: bool,
    /// The value's name in `--help` (`--account=name`); empty for a flag.
    pub value: &'static str,
    /// What the option does, for `--help`; empty for an option not listed (an alias).
    pub help: &'static str,
}

/// Shorthand for building option tables (without help text; see [`OptSpec::doc`]).
/// An empty `long` is a short-only option, which only [`command`] understands.
pub const fn opt(long: &'static str, short: Option<char>, takes_value: bool) -> OptSpec {
    OptSpec {
        long,
        short,
        takes_value,
        value: "",
        help: "",
    }
}

impl OptSpec {
    /// This option with its `--help` line: the value's name (ignored for a flag) and
    /// what the option does (see `cli::help`).
    pub const fn doc(self, value: &'static str, help: &'static str) -> OptSpec {
        OptSpec {
            value,
            help,
            ..self
        }
    }
}

/// The clap definition of a getopt table, for what is generated from definitions
/// (man pages and shell completions, see `cli::docs`); parsing stays with [`parse`],
/// whose glibc rules and messages clap does not reproduce.
///
/// Each option becomes an argument named by its long name, with its short letter,
/// value name and help text; an entry that repeats a long name (a second short letter)
/// adds a short alias; an entry without help text (an alias) is hidden. clap's own
/// `--help`/`--version` are off: the tables list their own.
pub fn command(prog: &'static str, specs: &[OptSpec]) -> clap::Command {
    use clap::{Arg, ArgAction};
    let mut cmd = clap::Command::new(prog)
        .disable_help_flag(true)
        .disable_version_flag(true);
    let mut longs: Vec<&str> = Vec::new();
    let mut shorts: Vec<char> = Vec::new();
    for s in specs {
        let short = s.short.filter(|c| !shorts.contains(c));
        shorts.extend(short);
        if !s.long.is_empty() && longs.contains(&s.long) {
            if let Some(c) = short {
                cmd = cmd.mut_arg(s.long, |a| a.visible_short_alias(c));
            }
            continue;
        }
        let mut a = if s.long.is_empty() {
            // A short-only option (seff's `-d`): named by its letter.
            Arg::new(s.short.map(String::from).unwrap_or_default())
        } else {
            longs.push(s.long);
            Arg::new(s.long).long(s.long)
        };
        a = a.action(if s.takes_value {
            ArgAction::Set
        } else {
            ArgAction::SetTrue
        });
        if let Some(c) = short {
            a = a.short(c);
        }
        if s.takes_value && !s.value.is_empty() {
            a = a.value_name(s.value);
        }
        a = if s.help.is_empty() {
            a.hide(true)
        } else {
            a.help(s.help)
        };
        cmd = cmd.arg(a);
    }
    cmd
}

/// A parsed argument: an option (by long name) with its value, or an operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Opt(&'static str, Option<String>),
    Operand(String),
}

/// Parses `args` (argv without argv[0]) against `specs`.
///
/// Errors: glibc's message for an unknown, ambiguous or argument-less option, followed
/// by the `Try "prog --help"` line.
pub fn parse(prog: &str, specs: &[OptSpec], args: &[String]) -> Result<Vec<Item>, String> {
    let tail = format!("\nTry \"{prog} --help\" for more information");
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            out.extend(args[i..].iter().cloned().map(Item::Operand));
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let spec = match specs.iter().find(|s| s.long == name) {
                Some(s) => s,
                None => {
                    // Entries sharing a long name (two short letters for one
                    // option) are one candidate.
                    let mut cands: Vec<&OptSpec> =
                        specs.iter().filter(|s| s.long.starts_with(name)).collect();
                    cands.dedup_by_key(|s| s.long);
                    match cands.as_slice() {
                        [one] => *one,
                        [] => return Err(format!("{prog}: unrecognized option '{a}'{tail}")),
                        many => {
                            let list: Vec<String> =
                                many.iter().map(|s| format!("'--{}'", s.long)).collect();
                            return Err(format!(
                                "{prog}: option '--{name}' is ambiguous; possibilities: {}{tail}",
                                list.join(" ")
                            ));
                        }
                    }
                }
            };
            if spec.takes_value {
                let v = match inline {
                    Some(v) => v,
                    None if i < args.len() => {
                        i += 1;
                        args[i - 1].clone()
                    }
                    None => {
                        return Err(format!(
                            "{prog}: option '--{}' requires an argument{tail}",
                            spec.long
                        ));
                    }
                };
                out.push(Item::Opt(spec.long, Some(v)));
            } else if inline.is_some() {
                return Err(format!(
                    "{prog}: option '--{}' doesn't allow an argument{tail}",
                    spec.long
                ));
            } else {
                out.push(Item::Opt(spec.long, None));
            }
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                let Some(spec) = specs.iter().find(|s| s.short == Some(c)) else {
                    return Err(format!("{prog}: invalid option -- '{c}'{tail}"));
                };
                if spec.takes_value {
                    let rest: String = chars[k..].iter().collect();
                    let v = if !rest.is_empty() {
                        rest
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        return Err(format!(
                            "{prog}: option requires an argument -- '{c}'{tail}"
                        ));
                    };
                    out.push(Item::Opt(spec.long, Some(v)));
                    break;
                }
                out.push(Item::Opt(spec.long, None));
            }
            continue;
        }
        out.push(Item::Operand(a.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[OptSpec] = &[
        opt("signal", Some('s'), true),
        opt("state", Some('t'), true),
        opt("batch", Some('b'), false),
        opt("verbose", Some('v'), false),
        opt("me", None, false),
    ];

    fn p(s: &str) -> Result<Vec<Item>, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse("scancel", SPECS, &v)
    }

    #[test]
    fn forms() {
        use Item::*;
        assert_eq!(
            p("12 --signal=USR1 -bv 13 -sKILL -t PD --sig TERM --me -- -5").unwrap(),
            vec![
                Operand("12".into()),
                Opt("signal", Some("USR1".into())),
                Opt("batch", None),
                Opt("verbose", None),
                Operand("13".into()),
                Opt("signal", Some("KILL".into())),
                Opt("state", Some("PD".into())),
                Opt("signal", Some("TERM".into())),
                Opt("me", None),
                Operand("-5".into()),
            ]
        );
    }

    #[test]
    fn errors() {
        assert_eq!(
            p("--bogus").unwrap_err(),
            "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information"
        );
        assert!(
            p("-z")
                .unwrap_err()
                .starts_with("scancel: invalid option -- 'z'")
        );
        assert!(
            p("--s=1")
                .unwrap_err()
                .starts_with("scancel: option '--s' is ambiguous")
        );
        assert!(
            p("-s")
                .unwrap_err()
                .starts_with("scancel: option requires an argument -- 's'")
        );
        assert!(p("--me=x").is_err());
    }
}
