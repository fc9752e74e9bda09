//! The `%`-format engine shared by squeue, sinfo, sprio and sacct (cf. Slurm's
//! src/squeue/opts.c `_parse_format`/`_parse_long_format`, src/sinfo/opts.c, and the
//! `_print_str` helpers in src/squeue/print.c and src/sinfo/print.c).
//!
//! Two syntaxes compile to one [`Format`]:
//! - `-o` style ([`parse_short`]): `%[.|-][width]<letter>` specifiers with literal text
//!   between them copied verbatim (into the header line too); `%%` is a literal `%`.
//! - `-O` style ([`parse_long`]): comma-separated `name[:[.][width][suffix]]` tokens,
//!   names case-insensitive, width 20 when there is no `:`, no padding when `:` is
//!   followed by no digits; the suffix is literal text after the column; empty tokens
//!   are skipped.
//!
//! Rendering: a width of 0 prints the value as is; any other width pads (left-justified,
//! or right-justified with `.`) and TRUNCATES to that many characters, keeping the
//! leading ones, exactly as Slurm does (`%.8j` of `adminheld` is `adminhel`).
//!
//! Callers own the vocabulary: a table of [`Field`]s, each a letter and/or long names,
//! a header and a value function over the caller's row type.

/// One printable field: how it is named in formats, its header, and its value.
pub struct Field<R> {
    /// The `-o` letter (`i` for `%i`), if the field has one.
    pub letter: Option<char>,
    /// The `-O` names (matched case-insensitively), if any.
    pub names: &'static [&'static str],
    /// The header text (`JOBID`).
    pub header: &'static str,
    /// The value shown for one row.
    pub value: fn(&R) -> String,
}

impl<R> Field<R> {
    /// A field reachable by `-o` letter and by `-O` names.
    pub fn new(
        letter: Option<char>,
        names: &'static [&'static str],
        header: &'static str,
        value: fn(&R) -> String,
    ) -> Field<R> {
        Field {
            letter,
            names,
            header,
            value,
        }
    }
}

/// One column of a compiled format: which field of the table, and how it is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Index into the field table.
    pub field: usize,
    /// 0 = as is; otherwise pad and truncate to this many characters.
    pub width: usize,
    /// Right-justify (`%.8j`, `name:.8`).
    pub right: bool,
}

/// A piece of a compiled format: literal text or a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Col(Column),
}

/// A compiled format, ready to render headers and rows for one field table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    pub pieces: Vec<Piece>,
}

/// The result of parsing a format: the format and the specifiers that named no field
/// (a letter for `-o`, a token name for `-O`), for the caller's error message. Slurm
/// reports these and goes on without them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub format: Format,
    pub unknown: Vec<String>,
}

/// Parses an `-o`-style format against `table`.
pub fn parse_short<R>(fmt: &str, table: &[Field<R>]) -> Parsed {
    let mut out = Parsed::default();
    let mut text = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            text.push('%');
            continue;
        }
        let mut right = false;
        match chars.peek() {
            Some('.') => {
                right = true;
                chars.next();
            }
            Some('-') => {
                chars.next();
            }
            _ => {}
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width.saturating_mul(10).saturating_add(d as usize);
            chars.next();
        }
        let Some(letter) = chars.next() else {
            // A lone trailing `%` stays literal text.
            text.push('%');
            break;
        };
        match table.iter().position(|f| f.letter == Some(letter)) {
            Some(field) => {
                if !text.is_empty() {
                    out.format
                        .pieces
                        .push(Piece::Text(std::mem::take(&mut text)));
                }
                out.format.pieces.push(Piece::Col(Column {
                    field,
                    width: width.min(MAX_WIDTH),
                    right,
                }));
            }
            None => out.unknown.push(letter.to_string()),
        }
    }
    if !text.is_empty() {
        out.format.pieces.push(Piece::Text(text));
    }
    out
}

/// Widths beyond this are clamped so a typo cannot make us allocate gigabytes.
const MAX_WIDTH: usize = 1 << 16;

/// The width an `-O` field gets when its token has no `:`.
pub const DEFAULT_LONG_WIDTH: usize = 20;

/// Parses an `-O`-style format against `table`.
pub fn parse_long<R>(fmt: &str, table: &[Field<R>]) -> Parsed {
    let mut out = Parsed::default();
    for token in fmt.split(',') {
        if token.is_empty() {
            continue;
        }
        let (name, width, right, suffix) = match token.split_once(':') {
            None => (token, DEFAULT_LONG_WIDTH, false, ""),
            Some((name, rest)) => {
                let (right, rest) = match rest.strip_prefix('.') {
                    Some(r) => (true, r),
                    None => (false, rest),
                };
                let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
                let width = rest[..digits].parse::<usize>().unwrap_or(0).min(MAX_WIDTH);
                (name, width, right, &rest[digits..])
            }
        };
        let found = table
            .iter()
            .position(|f| f.names.iter().any(|n| n.eq_ignore_ascii_case(name)));
        match found {
            Some(field) => {
                out.format.pieces.push(Piece::Col(Column {
                    field,
                    width,
                    right,
                }));
                if !suffix.is_empty() {
                    out.format.pieces.push(Piece::Text(suffix.to_string()));
                }
            }
            None => out.unknown.push(name.to_string()),
        }
    }
    out
}

/// One item of a `name[%W],…` list, the `--format` syntax of sacct, sstat and sshare
/// (cf. src/sacct/options.c, src/sstat/options.c, src/sshare/sshare.c): the item as
/// written (trimmed), the field name, and the width text after the first `%`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListItem<'a> {
    pub item: &'a str,
    pub name: &'a str,
    pub width: Option<&'a str>,
}

/// The items of a `name[%W],…` list, split at commas, blank ones skipped.
pub fn list_items(list: &str) -> Vec<ListItem<'_>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once('%') {
            Some((name, w)) => ListItem {
                item,
                name,
                width: Some(w),
            },
            None => ListItem {
                item,
                name: item,
                width: None,
            },
        })
        .collect()
}

/// How a name in a `name[%W]` list finds its field (always ignoring case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The whole name (sstat).
    Exact,
    /// The first field, in table order, that starts with the name (sshare).
    Prefix,
    /// The field of exactly that name, else the first that starts with it (sacct's
    /// `strncasecmp` lookup).
    ExactThenPrefix,
}

/// The index among `names` of the field `name` names, `None` when none does (an empty
/// name never matches a prefix).
pub fn lookup<'n>(
    names: impl Iterator<Item = &'n str> + Clone,
    name: &str,
    how: Lookup,
) -> Option<usize> {
    let exact = || names.clone().position(|f| f.eq_ignore_ascii_case(name));
    let prefix = || {
        let lower = name.to_ascii_lowercase();
        (!lower.is_empty())
            .then(|| {
                names
                    .clone()
                    .position(|f| f.to_ascii_lowercase().starts_with(&lower))
            })
            .flatten()
    };
    match how {
        Lookup::Exact => exact(),
        Lookup::Prefix => prefix(),
        Lookup::ExactThenPrefix => exact().or_else(prefix),
    }
}

/// Lays out `s` in `width` characters: as is for 0, else padded and truncated.
pub fn pad(s: &str, width: usize, right: bool) -> String {
    if width == 0 {
        return s.to_string();
    }
    let cut: String = s.chars().take(width).collect();
    let n = cut.chars().count();
    let fill = " ".repeat(width - n);
    if right { fill + &cut } else { cut + &fill }
}

impl Format {
    /// The columns in order.
    pub fn columns(&self) -> impl Iterator<Item = &Column> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Col(c) => Some(c),
            Piece::Text(_) => None,
        })
    }

    /// Whether the format shows any of the given fields (by table index).
    pub fn uses(&self, field: usize) -> bool {
        self.columns().any(|c| c.field == field)
    }

    /// The header line (without newline).
    pub fn header<R>(&self, table: &[Field<R>]) -> String {
        self.render(|c| table[c.field].header.to_string())
    }

    /// One row (without newline).
    pub fn row<R>(&self, table: &[Field<R>], row: &R) -> String {
        self.render(|c| (table[c.field].value)(row))
    }

    /// Renders with a caller-supplied value per column (used when values are
    /// aggregated outside the table, as sinfo does for node groups).
    pub fn render(&self, mut value: impl FnMut(&Column) -> String) -> String {
        let mut line = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => line.push_str(t),
                Piece::Col(c) => line.push_str(&pad(&value(c), c.width, c.right)),
            }
        }
        line
    }
}

/// Memory in MiB as Slurm's `convert_num_unit` prints it: move up a unit (M→G→T→P)
/// only while the value is at least 1024 and a multiple of 512, so `12800` is `12.50G`
/// but `3200` stays `3200M`; two decimals unless the result is whole.
pub fn mem_mb(mb: u64) -> String {
    const UNITS: [char; 4] = ['M', 'G', 'T', 'P'];
    let mut v = mb as f64;
    let mut u = 0;
    while v >= 1024.0 && v.fract() == 0.0 && (v as u64).is_multiple_of(512) && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{}{}", v as u64, UNITS[u])
    } else {
        format!("{:.2}{}", v, UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Row {
        id: u32,
        name: &'static str,
    }

    fn table() -> Vec<Field<Row>> {
        vec![
            Field::new(Some('i'), &["jobid"], "JOBID", |r: &Row| r.id.to_string()),
            Field::new(Some('j'), &["name"], "NAME", |r: &Row| r.name.to_string()),
            Field::new(None, &["tres-alloc"], "TRES_ALLOC", |_: &Row| {
                "cpu=1,mem=400M,node=1,billing=1".into()
            }),
        ]
    }

    fn row() -> Row {
        Row {
            id: 178,
            name: "adminheld",
        }
    }

    #[test]
    fn short_widths_justify_and_truncate() {
        let t = table();
        let p = parse_short("%.18i %.8j|%-4j|%5i|", &t);
        assert!(p.unknown.is_empty());
        assert_eq!(
            p.format.header(&t),
            "             JOBID     NAME|NAME|JOBID|"
        );
        assert_eq!(
            p.format.row(&t, &row()),
            "               178 adminhel|admi|178  |"
        );
    }

    #[test]
    fn short_literal_text_quotes_and_percent() {
        let t = table();
        let p = parse_short("JID=%i \"%j\" 100%%", &t);
        assert_eq!(p.format.header(&t), "JID=JOBID \"NAME\" 100%");
        assert_eq!(p.format.row(&t, &row()), "JID=178 \"adminheld\" 100%");
    }

    #[test]
    fn short_no_width_means_as_is() {
        let t = table();
        let p = parse_short("%i|%j", &t);
        assert_eq!(p.format.row(&t, &row()), "178|adminheld");
        assert_eq!(parse_short("%.i", &t).format.row(&t, &row()), "178");
    }

    #[test]
    fn short_unknown_letters_are_reported_and_skipped() {
        let t = table();
        let p = parse_short("%i %Q %j", &t);
        assert_eq!(p.unknown, vec!["Q".to_string()]);
        assert_eq!(p.format.row(&t, &row()), "178  adminheld");
        // A trailing lone % is kept as text.
        assert_eq!(parse_short("%i%", &t).format.row(&t, &row()), "178%");
    }

    #[test]
    fn long_default_width_and_case() {
        let t = table();
        let p = parse_long("JobID,NAME,Tres-Alloc", &t);
        assert!(p.unknown.is_empty());
        assert_eq!(
            p.format.header(&t),
            "JOBID               NAME                TRES_ALLOC          "
        );
        assert_eq!(
            p.format.row(&t, &row()),
            "178                 adminheld           cpu=1,mem=400M,node="
        );
    }

    #[test]
    fn long_size_suffix_and_right() {
        let t = table();
        let p = parse_long("jobid:.6|,name:|,", &t);
        assert_eq!(p.format.header(&t), " JOBID|NAME|");
        assert_eq!(p.format.row(&t, &row()), "   178|adminheld|");
        let p = parse_long("name:4 x", &t);
        assert_eq!(p.format.row(&t, &row()), "admi x");
    }

    #[test]
    fn long_unknown_names_are_reported() {
        let t = table();
        let p = parse_long("jobid,TresPerNode,name:3", &t);
        assert_eq!(p.unknown, vec!["TresPerNode".to_string()]);
        assert_eq!(p.format.row(&t, &row()), "178                 adm");
        assert!(p.format.uses(0) && p.format.uses(1) && !p.format.uses(2));
    }

    #[test]
    fn pad_is_char_based() {
        assert_eq!(pad("héllo", 3, false), "hél");
        assert_eq!(pad("é", 3, true), "  é");
        assert_eq!(pad("abc", 0, true), "abc");
    }

    #[test]
    fn memory_units_like_slurm() {
        assert_eq!(mem_mb(400), "400M");
        assert_eq!(mem_mb(3200), "3200M");
        assert_eq!(mem_mb(6400), "6400M");
        assert_eq!(mem_mb(12800), "12.50G");
        assert_eq!(mem_mb(64000), "62.50G");
        assert_eq!(mem_mb(1024), "1G");
        assert_eq!(mem_mb(0), "0M");
        assert_eq!(mem_mb(1024 * 1024 * 3 / 2), "1.50T");
    }

    #[test]
    fn name_width_lists_split_and_look_up_fields() {
        let items = list_items(" JobID%-12, ,State,Elapsed%8%x,");
        let got: Vec<(&str, &str, Option<&str>)> =
            items.iter().map(|i| (i.item, i.name, i.width)).collect();
        assert_eq!(
            got,
            [
                ("JobID%-12", "JobID", Some("-12")),
                ("State", "State", None),
                ("Elapsed%8%x", "Elapsed", Some("8%x")),
            ]
        );
        let names = ["JobIDRaw", "JobID", "State", "Start"];
        let find = |n: &str, how| lookup(names.iter().copied(), n, how);
        // An exact name wins over an earlier field it is a prefix of.
        assert_eq!(find("jobid", Lookup::ExactThenPrefix), Some(1));
        assert_eq!(find("jobid", Lookup::Prefix), Some(0));
        assert_eq!(find("jobid", Lookup::Exact), Some(1));
        assert_eq!(find("sta", Lookup::ExactThenPrefix), Some(2));
        assert_eq!(find("sta", Lookup::Exact), None);
        assert_eq!(find("", Lookup::Prefix), None);
        assert_eq!(find("nosuch", Lookup::ExactThenPrefix), None);
    }
}
