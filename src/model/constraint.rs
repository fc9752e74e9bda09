//! `--constraint` expressions over node features (cf. src/slurmctld/node_scheduler.c
//! `_valid_feature_list`/`_match_feature` and `--constraint` in sbatch(1)):
//!
//! - `a&b` every node has both; `a|b` every node has one of them (nodes may differ);
//! - `a*2&b` at least two of the job's nodes have `a` (all have `b`);
//! - `[a|b|c]` all nodes have the *same* one of the alternatives (matching OR);
//! - `(…)` groups. `&` binds tighter than `|`, `,` is an old spelling of `&`.
//!
//! Pure: parsing and evaluation on feature lists.

use std::fmt;

/// A parsed constraint expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// A feature, with a node count (`a*2`) when given.
    Feature {
        name: String,
        count: Option<u32>,
    },
    And(Vec<Constraint>),
    Or(Vec<Constraint>),
    /// `[a|b]`: one alternative, the same on every node.
    Match(Vec<Constraint>),
}

/// Why a constraint could not be parsed (Slurm then rejects the job with
/// "Invalid feature specification").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid feature specification: {0}")]
pub struct ConstraintError(pub String);

impl Constraint {
    /// Parses an expression.
    ///
    /// Errors: empty names, unbalanced brackets or parentheses, a bad `*count`.
    pub fn parse(s: &str) -> Result<Constraint, ConstraintError> {
        let toks: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
        let mut p = Parser {
            t: &toks,
            i: 0,
            src: s,
        };
        let c = p.or()?;
        if p.i != toks.len() {
            return Err(p.err());
        }
        Ok(c)
    }

    /// Whether one node with `features` can be part of the job's allocation (counted
    /// features are not required on every node; a matching-OR accepts any alternative).
    pub fn node_ok(&self, features: &[String]) -> bool {
        match self {
            Constraint::Feature { name, count } => {
                count.is_some() || features.iter().any(|f| f == name)
            }
            Constraint::And(v) => v.iter().all(|c| c.node_ok(features)),
            Constraint::Or(v) | Constraint::Match(v) => v.iter().any(|c| c.node_ok(features)),
        }
    }

    /// Whether a whole allocation (one feature list per node) satisfies the expression:
    /// counts are met and matching-OR groups agree on one alternative.
    pub fn alloc_ok(&self, nodes: &[&[String]]) -> bool {
        match self {
            Constraint::Feature { name, count: None } => {
                nodes.iter().all(|f| f.iter().any(|x| x == name))
            }
            Constraint::Feature {
                name,
                count: Some(n),
            } => nodes.iter().filter(|f| f.iter().any(|x| x == name)).count() >= *n as usize,
            Constraint::And(v) => v.iter().all(|c| c.alloc_ok(nodes)),
            Constraint::Or(v) => nodes
                .iter()
                .all(|f| v.iter().any(|c| c.alloc_ok(std::slice::from_ref(f)))),
            Constraint::Match(v) => v.iter().any(|c| c.alloc_ok(nodes)),
        }
    }

    /// The alternatives of the outermost matching-OR, when the expression is one
    /// (`[a|b]`): each alternative alone, for selection to try one at a time.
    pub fn match_alternatives(&self) -> Option<&[Constraint]> {
        match self {
            Constraint::Match(v) => Some(v),
            Constraint::And(v) => v.iter().find_map(|c| match c {
                Constraint::Match(alts) => Some(alts.as_slice()),
                _ => None,
            }),
            _ => None,
        }
    }

    /// Counted features (`a*2`) anywhere in the expression, as (name, count).
    pub fn counts(&self) -> Vec<(&str, u32)> {
        let mut out = Vec::new();
        self.collect_counts(&mut out);
        out
    }

    fn collect_counts<'a>(&'a self, out: &mut Vec<(&'a str, u32)>) {
        match self {
            Constraint::Feature {
                name,
                count: Some(n),
            } => out.push((name, *n)),
            Constraint::Feature { .. } => {}
            Constraint::And(v) | Constraint::Or(v) | Constraint::Match(v) => {
                v.iter().for_each(|c| c.collect_counts(out))
            }
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, v: &[Constraint], sep: &str| {
            for (i, c) in v.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                match c {
                    Constraint::Or(_) if sep == "&" => write!(f, "({c})")?,
                    _ => write!(f, "{c}")?,
                }
            }
            Ok(())
        };
        match self {
            Constraint::Feature { name, count: None } => f.write_str(name),
            Constraint::Feature {
                name,
                count: Some(n),
            } => write!(f, "{name}*{n}"),
            Constraint::And(v) => join(f, v, "&"),
            Constraint::Or(v) => join(f, v, "|"),
            Constraint::Match(v) => {
                f.write_str("[")?;
                join(f, v, "|")?;
                f.write_str("]")
            }
        }
    }
}

struct Parser<'a> {
    t: &'a [char],
    i: usize,
    src: &'a str,
}

impl Parser<'_> {
    fn err(&self) -> ConstraintError {
        ConstraintError(self.src.to_string())
    }

    fn peek(&self) -> Option<char> {
        self.t.get(self.i).copied()
    }

    fn or(&mut self) -> Result<Constraint, ConstraintError> {
        let mut v = vec![self.and()?];
        while self.peek() == Some('|') {
            self.i += 1;
            v.push(self.and()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Constraint::Or(v)
        })
    }

    fn and(&mut self) -> Result<Constraint, ConstraintError> {
        let mut v = vec![self.atom()?];
        while matches!(self.peek(), Some('&' | ',')) {
            self.i += 1;
            v.push(self.atom()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Constraint::And(v)
        })
    }

    fn atom(&mut self) -> Result<Constraint, ConstraintError> {
        match self.peek() {
            Some('(') => {
                self.i += 1;
                let c = self.or()?;
                if self.peek() != Some(')') {
                    return Err(self.err());
                }
                self.i += 1;
                Ok(c)
            }
            Some('[') => {
                self.i += 1;
                let c = self.or()?;
                if self.peek() != Some(']') {
                    return Err(self.err());
                }
                self.i += 1;
                Ok(match c {
                    Constraint::Or(v) => Constraint::Match(v),
                    other => Constraint::Match(vec![other]),
                })
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')
                }) {
                    self.i += 1;
                }
                if self.i == start {
                    return Err(self.err());
                }
                let name: String = self.t[start..self.i].iter().collect();
                let count = if self.peek() == Some('*') {
                    self.i += 1;
                    let s = self.i;
                    while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        self.i += 1;
                    }
                    let n: String = self.t[s..self.i].iter().collect();
                    Some(
                        n.parse::<u32>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| self.err())?,
                    )
                } else {
                    None
                };
                Ok(Constraint::Feature { name, count })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_and_prints() {
        for s in [
            "a",
            "a&b",
            "a|b",
            "a*2&b",
            "[a|b|c]",
            "(a|b)&c",
            "[rack1|rack2]&gpu",
        ] {
            assert_eq!(Constraint::parse(s).unwrap().to_string(), s, "{s}");
        }
        assert_eq!(Constraint::parse("a,b").unwrap().to_string(), "a&b");
        for bad in ["", "a&", "[a|b", "(a", "a*0", "a*x", "&a", "a b c|"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_predicates() {
        let c = Constraint::parse("a&b").unwrap();
        assert!(c.node_ok(&f(&["a", "b", "c"])));
        assert!(!c.node_ok(&f(&["a"])));
        let c = Constraint::parse("a|b").unwrap();
        assert!(c.node_ok(&f(&["b"])) && !c.node_ok(&f(&["c"])));
        let c = Constraint::parse("(a|b)&c").unwrap();
        assert!(c.node_ok(&f(&["b", "c"])) && !c.node_ok(&f(&["b"])));
    }

    #[test]
    fn allocation_checks() {
        let (a, b, ab) = (f(&["a"]), f(&["b"]), f(&["a", "b"]));
        let m = Constraint::parse("[a|b]").unwrap();
        assert!(m.alloc_ok(&[&a, &ab]));
        assert!(!m.alloc_ok(&[&a, &b]));
        assert_eq!(m.match_alternatives().unwrap().len(), 2);
        let c = Constraint::parse("a*2&b").unwrap();
        assert!(c.alloc_ok(&[&ab, &ab, &b]));
        assert!(!c.alloc_ok(&[&ab, &b, &b]));
        assert_eq!(c.counts(), vec![("a", 2)]);
        let o = Constraint::parse("a|b").unwrap();
        assert!(o.alloc_ok(&[&a, &b]));
    }
}
