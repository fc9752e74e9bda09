//! Hostlist expressions: `node[01-04,07],gpu1` (cf. src/common/hostlist.c).
//!
//! `expand` turns an expression into names, in order, keeping duplicates; `compress`
//! turns names into an expression keeping input order (as `scontrol show hostlist`
//! does: `node1,node2,node10,node3` → `node[1-2,10,3]`); `compress_sorted` sorts first
//! (`scontrol show hostlistsorted`, and every nodelist Slurm prints for a job).
//!
//! Invariant: `expand(&compress(names)) == names` for any list of valid names.

use std::fmt;

/// Why a hostlist expression could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("unbalanced brackets in hostlist '{0}'")]
    Unbalanced(String),
    #[error("invalid range '{0}' in hostlist")]
    BadRange(String),
    #[error("hostlist '{0}' is too large")]
    TooLarge(String),
}

/// The largest number of names one expression may expand to (guards against
/// `node[0-999999999]` eating memory).
pub const MAX_EXPANSION: usize = 1 << 20;

/// Expands a hostlist expression into host names, in order, duplicates kept.
///
/// Errors: unbalanced brackets, a range that is not numeric or runs backwards, or an
/// expansion above [`MAX_EXPANSION`] names.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for item in split_top_level(expr)? {
        if item.is_empty() {
            continue;
        }
        expand_item(item, expr, &mut out)?;
    }
    Ok(out)
}

/// Splits on commas that are not inside brackets.
fn split_top_level(expr: &str) -> Result<Vec<&str>, HostlistError> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(HostlistError::Unbalanced(expr.into()));
                }
            }
            ',' | ' ' if depth == 0 => {
                parts.push(expr[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Unbalanced(expr.into()));
    }
    parts.push(expr[start..].trim());
    Ok(parts)
}

/// Expands one item that may hold several bracket groups (`r[1-2]n[01-02]`).
fn expand_item(item: &str, whole: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let Some(open) = item.find('[') else {
        if item.contains(']') {
            return Err(HostlistError::Unbalanced(whole.into()));
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = item[open..]
        .find(']')
        .map(|c| c + open)
        .ok_or_else(|| HostlistError::Unbalanced(whole.into()))?;
    let prefix = &item[..open];
    let body = &item[open + 1..close];
    let rest = &item[close + 1..];
    let mut suffixes = Vec::new();
    expand_item_rest(rest, whole, &mut suffixes)?;
    for range in body.split(',') {
        let range = range.trim();
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a, b),
            None => (range, range),
        };
        if lo.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostlistError::BadRange(range.into()));
        }
        if hi.is_empty() || !hi.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostlistError::BadRange(range.into()));
        }
        let width = lo.len();
        let a: u64 = lo
            .parse()
            .map_err(|_| HostlistError::BadRange(range.into()))?;
        let b: u64 = hi
            .parse()
            .map_err(|_| HostlistError::BadRange(range.into()))?;
        if b < a {
            return Err(HostlistError::BadRange(range.into()));
        }
        if (b - a) as usize * suffixes.len().max(1) + out.len() > MAX_EXPANSION {
            return Err(HostlistError::TooLarge(whole.into()));
        }
        for n in a..=b {
            for s in &suffixes {
                out.push(format!("{prefix}{n:0width$}{s}"));
            }
        }
    }
    Ok(())
}

fn expand_item_rest(rest: &str, whole: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    if rest.is_empty() {
        out.push(String::new());
        Ok(())
    } else {
        expand_item(rest, whole, out)
    }
}

/// A host name split into a prefix, a numeric suffix (with its zero-padded width) and
/// nothing after it. Names whose digits are not at the end are kept whole.
struct Split<'a> {
    prefix: &'a str,
    num: Option<(u64, usize)>,
}

fn split_name(name: &str) -> Split<'_> {
    let digits = name
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 18 {
        return Split {
            prefix: name,
            num: None,
        };
    }
    let (prefix, num) = name.split_at(name.len() - digits);
    Split {
        prefix,
        num: num.parse().ok().map(|n| (n, digits)),
    }
}

/// Compresses names into a hostlist expression, keeping their order: runs of the same
/// prefix and width are merged into one bracket group while consecutive.
pub fn compress(names: &[String]) -> String {
    // (prefix, zero-padded width, numeric ranges) of the bracket group being built.
    type Group = (String, usize, Vec<(u64, u64)>);
    let mut groups: Vec<Group> = Vec::new();
    let mut out: Vec<String> = Vec::new();
    let flush = |groups: &mut Vec<Group>, out: &mut Vec<String>| {
        for (prefix, width, ranges) in groups.drain(..) {
            out.push(render_group(&prefix, width, &ranges));
        }
    };
    for name in names {
        let sp = split_name(name);
        match sp.num {
            None => {
                flush(&mut groups, &mut out);
                out.push(name.clone());
            }
            Some((n, digits)) => {
                // Slurm treats a number without leading zeros as width 0 (any width).
                let width = if name.as_bytes()[name.len() - digits] == b'0' && digits > 1 {
                    digits
                } else {
                    0
                };
                match groups.last_mut() {
                    // `n10` after `n09` has the group's width without needing zeros.
                    Some((p, w, ranges))
                        if p == sp.prefix && (*w == width || (width == 0 && digits == *w)) =>
                    {
                        let last = ranges.last_mut().expect("groups are never empty");
                        if last.1.checked_add(1) == Some(n) {
                            last.1 = n;
                        } else {
                            ranges.push((n, n));
                        }
                    }
                    _ => {
                        flush(&mut groups, &mut out);
                        groups.push((sp.prefix.to_string(), width, vec![(n, n)]));
                    }
                }
            }
        }
    }
    flush(&mut groups, &mut out);
    out.join(",")
}

fn render_group(prefix: &str, width: usize, ranges: &[(u64, u64)]) -> String {
    if ranges.len() == 1 && ranges[0].0 == ranges[0].1 {
        return format!("{prefix}{:0width$}", ranges[0].0);
    }
    let body: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("{a:0width$}")
            } else {
                format!("{a:0width$}-{b:0width$}")
            }
        })
        .collect();
    format!("{prefix}[{}]", body.join(","))
}

/// Node-name order: by prefix, then by number (`n2` before `n10`), then as text.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (sa, sb) = (split_name(a), split_name(b));
    sa.prefix
        .cmp(sb.prefix)
        .then(sa.num.map(|x| x.0).cmp(&sb.num.map(|x| x.0)))
        .then(a.cmp(b))
}

/// Sorts names ([`natural_cmp`]) and compresses them, dropping duplicates.
pub fn compress_sorted(names: &[String]) -> String {
    let mut v: Vec<String> = names.to_vec();
    v.sort_by(|a, b| natural_cmp(a, b));
    v.dedup();
    compress(&v)
}

/// A parsed hostlist, for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hostlist(pub Vec<String>);

impl fmt::Display for Hostlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&compress_sorted(&self.0))
    }
}

/// `0-3,8,10-11` from a list of ids (CPU ids, GRES indices), sorted and deduplicated.
pub fn id_ranges(ids: &[u32]) -> String {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn expands_ranges_and_padding() {
        assert_eq!(
            expand("node-[001-003,007]").unwrap(),
            v(&["node-001", "node-002", "node-003", "node-007"])
        );
        assert_eq!(expand("a,b[1-2]").unwrap(), v(&["a", "b1", "b2"]));
        assert_eq!(
            expand("r[1-2]n[1-2]").unwrap(),
            v(&["r1n1", "r1n2", "r2n1", "r2n2"])
        );
    }

    #[test]
    fn rejects_bad_expressions() {
        assert!(matches!(expand("n[1-"), Err(HostlistError::Unbalanced(_))));
        assert!(matches!(expand("n[a-b]"), Err(HostlistError::BadRange(_))));
        assert!(matches!(expand("n[5-1]"), Err(HostlistError::BadRange(_))));
        assert!(matches!(expand("n]"), Err(HostlistError::Unbalanced(_))));
        assert!(matches!(
            expand("n[0-99999999]"),
            Err(HostlistError::TooLarge(_))
        ));
    }

    #[test]
    fn compresses_in_input_order() {
        assert_eq!(
            compress(&v(&["node1", "node2", "node10", "node3"])),
            "node[1-2,10,3]"
        );
        assert_eq!(
            compress(&v(&["node-001", "node-002", "node-003", "node-007"])),
            "node-[001-003,007]"
        );
        assert_eq!(compress(&v(&["node01"])), "node01");
        assert_eq!(compress(&v(&["n08", "n09", "n10", "n11"])), "n[08-11]");
        assert_eq!(compress(&v(&["tux2", "tux1", "tux2"])), "tux[2,1-2]");
    }

    #[test]
    fn compresses_sorted() {
        assert_eq!(
            compress_sorted(&v(&[
                "node-007", "node-001", "node-003", "node-002", "gpu1"
            ])),
            "gpu1,node-[001-003,007]"
        );
    }

    proptest! {
        #[test]
        fn expand_compress_is_identity(names in proptest::collection::vec(
            ("[a-c]{1,2}", proptest::option::of(0u32..40), any::<bool>()), 0..20)) {
            let names: Vec<String> = names
                .into_iter()
                .map(|(p, n, pad)| match n {
                    Some(n) if pad => format!("{p}{n:03}"),
                    Some(n) => format!("{p}{n}"),
                    None => p,
                })
                .collect();
            prop_assert_eq!(expand(&compress(&names)).unwrap(), names);
        }
    }
}
