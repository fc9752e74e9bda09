//! `--help` and `--usage` texts shaped like Slurm 22.05's (cf. `_help()` and
//! `_usage()` in src/sbatch/opt.c, src/squeue/opts.c, src/sacct/options.c):
//!
//! - `--help`: a `Usage:` line, then one line per option, `  -A, --account=name` in a
//!   30-column field followed by what it does, grouped under `Heading:` lines where the
//!   definition has sections;
//! - `--usage`: `Usage: prog` followed by every option in brackets (`[-A name]`,
//!   `[--mem=size]`, `[-v]`), wrapped at 80 columns under the first one.
//!
//! Both are built from the option definitions that the parser itself uses, so the
//! help cannot list an option the command refuses or miss one it takes: a clap command
//! ([`from_clap`]: sbatch, srun, salloc, squeue, sinfo) or a getopt table
//! ([`from_getopt`]: scancel, sacct, sstat, sprio, sshare, sdiag, scontrol, sreport).
//! Options without a help text (aliases, hidden options) are not listed.

use super::getopt::OptSpec;

/// One option as the help shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The short letter (`-A`), if any.
    pub short: Option<char>,
    /// The long name without dashes (`account`); empty for a short-only option.
    pub long: String,
    /// The value's name (`name`), `None` for a flag.
    pub value: Option<String>,
    /// Whether the value is optional (`--nice[=value]`, getopt's `optional_argument`).
    pub optional: bool,
    /// What the option does, one line (wrapped when printed).
    pub text: String,
    /// The section it is listed under (`Parallel run options`), `None` for the first,
    /// unnamed one.
    pub heading: Option<String>,
}

/// Width of the option column of `--help` (Slurm's `%-30s`-like layout).
const COLUMN: usize = 30;
/// Right margin for wrapping.
const WIDTH: usize = 80;

/// The help entries of a clap command, in definition order: every non-positional,
/// non-hidden argument that has a help text. Value names are lower-cased as Slurm
/// writes them (`--job-name=name`); a description loses its final full stop,
/// backquotes and an initial capital (`Job name` → `job name`), as Slurm's are written.
pub fn from_clap(cmd: &clap::Command) -> Vec<Entry> {
    cmd.get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .filter_map(|a| {
            let text = a.get_help()?.to_string();
            let takes = a.get_action().takes_values();
            let value = takes.then(|| {
                a.get_value_names()
                    .and_then(|v| v.first())
                    .map_or_else(|| a.get_id().as_str().to_string(), |n| n.to_string())
                    .to_ascii_lowercase()
            });
            let optional = takes && a.get_num_args().is_some_and(|r| r.min_values() == 0);
            Some(Entry {
                short: a.get_short(),
                long: a.get_long().unwrap_or_default().to_string(),
                value,
                optional,
                text: slurm_text(&text),
                heading: a.get_help_heading().map(String::from),
            })
        })
        .collect()
}

/// The help entries of a getopt table: every option with a help text (see
/// [`OptSpec::doc`]), in table order.
pub fn from_getopt(specs: &[OptSpec]) -> Vec<Entry> {
    specs
        .iter()
        .filter(|s| !s.help.is_empty())
        .map(|s| Entry {
            short: s.short,
            long: s.long.to_string(),
            value: s.takes_value.then(|| s.value.to_string()),
            optional: false,
            text: s.help.to_string(),
            heading: None,
        })
        .collect()
}

/// A description in Slurm's manner: first letter lower-cased unless the second is a
/// capital too (`GPU`), backquotes dropped, no final full stop, one line.
fn slurm_text(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let s = s.replace('`', "");
    let s = match s.strip_suffix('.') {
        Some(t) if !t.ends_with('.') => t.to_string(),
        _ => s,
    };
    let mut cs = s.chars();
    match (cs.next(), cs.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && !b.is_uppercase() => {
            a.to_lowercase().chain(s.chars().skip(1)).collect()
        }
        _ => s,
    }
}

/// `-A, --account=name` (or `    --mem=size`, `-x`), as the option column shows it.
fn left(e: &Entry) -> String {
    let mut s = String::new();
    match (e.short, e.long.is_empty()) {
        (Some(c), false) => s.push_str(&format!("-{c}, --{}", e.long)),
        (Some(c), true) => s.push_str(&format!("-{c}")),
        (None, _) => s.push_str(&format!("    --{}", e.long)),
    }
    if let Some(v) = &e.value {
        let sep = if e.long.is_empty() { " " } else { "=" };
        if e.optional {
            s.push_str(&format!("[{sep}{v}]"));
        } else {
            s.push_str(&format!("{sep}{v}"));
        }
    }
    s
}

/// Splits `text` into lines of at most `width` characters at spaces (a longer word
/// stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for w in text.split_whitespace() {
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The option list of `--help`: one entry per line (its text wrapped under the text
/// column); the entries without a heading first, then each named section in the order
/// it first appears, after a blank line and `Heading:`.
pub fn options(entries: &[Entry]) -> String {
    let mut headings: Vec<Option<&str>> = vec![None];
    for e in entries {
        if !headings.contains(&e.heading.as_deref()) {
            headings.push(e.heading.as_deref());
        }
    }
    let mut out = String::new();
    for h in headings {
        let mut section = entries
            .iter()
            .filter(|e| e.heading.as_deref() == h)
            .peekable();
        if let (Some(name), Some(_)) = (h, section.peek()) {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{name}:\n"));
        }
        for e in section {
            out.push_str(&line(e));
        }
    }
    out
}

/// One entry of the option list, its text wrapped under the text column.
fn line(e: &Entry) -> String {
    line_with(&left(e), &e.text)
}

/// A line of the option list with `l` in the option column and `text` (wrapped)
/// beside it; also used for lists of commands (`scontrol --help`).
pub fn line_with(l: &str, text: &str) -> String {
    line_in(l, text, COLUMN)
}

/// [`line_with`] with the text at `column` (0-based; at least 4).
pub fn line_in(l: &str, text: &str, column: usize) -> String {
    let body = wrap(text, WIDTH.saturating_sub(column).max(20));
    let pad = column.saturating_sub(2);
    let mut out = if l.chars().count() + 1 < pad {
        format!("  {l:<pad$}{}\n", body[0])
    } else {
        format!("  {l}\n{:column$}{}\n", "", body[0])
    };
    for b in &body[1..] {
        out.push_str(&format!("{:column$}{b}\n", ""));
    }
    out
}

/// The whole `--help` text: `Usage: <synopsis>`, a blank line, the option list, and
/// `trailer` (more text, e.g. a command list; may be empty).
pub fn help(synopsis: &str, entries: &[Entry], trailer: &str) -> String {
    let list = options(entries);
    // A blank line before a first section heading, none before plain option lines
    // (as sbatch's and squeue's help differ).
    let gap = if list.starts_with(' ') { "" } else { "\n" };
    let mut out = format!("Usage: {synopsis}\n{gap}{list}");
    if !trailer.is_empty() {
        out.push('\n');
        out.push_str(trailer);
        if !trailer.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// `[-A name]`, `[--mem=size]`, `[-v]`: one option in `--usage` form.
fn bracket(e: &Entry) -> String {
    let v = e.value.as_deref();
    match (e.short, v, e.optional) {
        (Some(c), Some(v), false) => format!("[-{c} {v}]"),
        (Some(c), None, _) => format!("[-{c}]"),
        (_, Some(v), true) => format!("[--{}[={v}]]", e.long),
        (_, Some(v), false) => format!("[--{}={v}]", e.long),
        (None, None, _) => format!("[--{}]", e.long),
    }
}

/// The whole `--usage` text: `Usage: prog` and every option in brackets, wrapped at
/// 80 columns with continuation lines under the first option, then `tail` (the
/// operands, `executable [args...]`; may be empty) on a line of its own.
pub fn usage(prog: &str, entries: &[Entry], tail: &str) -> String {
    let head = format!("Usage: {prog} ");
    let indent = head.chars().count();
    let mut out = head;
    let mut col = indent;
    let mut first = true;
    for e in entries {
        let b = bracket(e);
        let n = b.chars().count();
        if !first && col + 1 + n > WIDTH {
            out.push_str(&format!("\n{:indent$}", ""));
            col = indent;
            first = true;
        }
        if !first {
            out.push(' ');
            col += 1;
        }
        out.push_str(&b);
        col += n;
        first = false;
    }
    if !tail.is_empty() {
        out.push_str(&format!("\n{:indent$}{tail}", ""));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(short: Option<char>, long: &str, value: Option<&str>, text: &str) -> Entry {
        Entry {
            short,
            long: long.into(),
            value: value.map(String::from),
            optional: false,
            text: text.into(),
            heading: None,
        }
    }

    #[test]
    fn help_lines_have_slurms_two_columns() {
        let es = vec![
            e(
                Some('A'),
                "account",
                Some("name"),
                "charge job to this account",
            ),
            e(None, "mem", Some("size"), "memory per node"),
            e(
                None,
                "a-very-long-option-name",
                Some("value"),
                "text on the next line",
            ),
        ];
        assert_eq!(
            options(&es),
            "  -A, --account=name          charge job to this account\n\
             \x20     --mem=size              memory per node\n\
             \x20     --a-very-long-option-name=value\n\
             \x20                             text on the next line\n"
        );
    }

    #[test]
    fn long_texts_wrap_under_the_text_column() {
        let es = vec![e(Some('x'), "x", None, &"word ".repeat(20))];
        let t = options(&es);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines.len() > 1, "{t}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{t}");
        assert!(lines[1].starts_with(&" ".repeat(COLUMN)), "{t}");
    }

    #[test]
    fn usage_wraps_under_the_first_option() {
        let es: Vec<Entry> = (0..20)
            .map(|i| e(None, &format!("option{i}"), Some("v"), "t"))
            .collect();
        let t = usage("sbatch", &es, "executable [args...]");
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("Usage: sbatch [--option0=v] [--option1=v]"));
        assert!(lines[1].starts_with("              [--option"), "{t}");
        assert_eq!(lines.last(), Some(&"              executable [args...]"));
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{t}");
    }

    #[test]
    fn descriptions_read_like_slurms() {
        assert_eq!(
            slurm_text("Job name (default: `x`)."),
            "job name (default: x)"
        );
        assert_eq!(slurm_text("GPUs per task"), "GPUs per task");
        assert_eq!(slurm_text("A, B, ..."), "a, B, ...");
    }
}
