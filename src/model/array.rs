//! Job arrays: the index expression of `--array` (`0-99,200,300-400:5%10`), the set of
//! task indices it names, and the array data every record of an array carries (cf.
//! Slurm's src/common/bitstring.c `bit_unfmt`/`bit_fmt` for the index lists, and
//! slurmctld/job_mgr.c for the meta record that holds the not-yet-started tasks).
//!
//! An [`IndexSet`] is kept as sorted, disjoint runs `lo..=hi` by `step`, so the usual
//! `0-99999` costs one run however many tasks it names; a stepped range stays one run.
//!
//! Invariants of [`IndexSet`]: runs are sorted by `lo`, every run's `hi` is below the
//! next run's `lo`, `lo <= hi`, `step >= 1`, `(hi - lo) % step == 0`, and a run of one
//! element has step 1.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One run of indices: `lo, lo+step, …, hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub lo: u32,
    pub hi: u32,
    pub step: u32,
}

impl Run {
    fn single(i: u32) -> Run {
        Run {
            lo: i,
            hi: i,
            step: 1,
        }
    }

    fn len(&self) -> u64 {
        u64::from((self.hi - self.lo) / self.step) + 1
    }

    fn contains(&self, i: u32) -> bool {
        i >= self.lo && i <= self.hi && (i - self.lo).is_multiple_of(self.step)
    }

    /// A run from `lo` to `hi` by `step`, normalised so that one element has step 1.
    fn new(lo: u32, hi: u32, step: u32) -> Run {
        if lo == hi {
            Run::single(lo)
        } else {
            Run { lo, hi, step }
        }
    }
}

/// A set of array task indices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexSet {
    runs: Vec<Run>,
}

/// Why an `--array` expression was refused (Slurm says only "Invalid job array
/// specification"; the variants say why, for logs and tests).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    #[error("empty array expression")]
    Empty,
    #[error("bad array element {0:?}")]
    Syntax(String),
    #[error("range {0:?} ends before it starts")]
    Reversed(String),
    #[error("index {index} is not below MaxArraySize {max}")]
    TooLarge { index: u64, max: u32 },
    #[error("bad throttle {0:?}")]
    Throttle(String),
}

impl IndexSet {
    /// The empty set.
    pub fn new() -> IndexSet {
        IndexSet::default()
    }

    /// A set of one index.
    pub fn of(i: u32) -> IndexSet {
        IndexSet {
            runs: vec![Run::single(i)],
        }
    }

    /// Builds a set from indices in any order (duplicates are dropped).
    pub fn from_indices(mut v: Vec<u32>) -> IndexSet {
        v.sort_unstable();
        v.dedup();
        let mut runs: Vec<Run> = Vec::new();
        let mut i = 0;
        while i < v.len() {
            // Greedy: extend a run while the gap stays the same.
            let lo = v[i];
            if i + 1 == v.len() {
                runs.push(Run::single(lo));
                break;
            }
            let step = v[i + 1] - lo;
            let mut j = i + 1;
            while j + 1 < v.len() && v[j + 1] - v[j] == step {
                j += 1;
            }
            // A stepped run needs three elements; two with a gap are two singles (so
            // that `1,3,4,5` stays `1,3-5`).
            if step > 1 && j == i + 1 {
                runs.push(Run::single(lo));
                i += 1;
                continue;
            }
            runs.push(Run::new(lo, v[j], step));
            i = j + 1;
        }
        IndexSet { runs }
    }

    /// Parses Slurm's index list (without a `%` throttle): comma-separated `N`, `A-B`
    /// and `A-B:S`. Every index must be below `max_size` (MaxArraySize).
    ///
    /// Errors: [`ArrayError`] for empty input, bad syntax, `B < A`, a zero step, or an
    /// index at or above `max_size`.
    pub fn parse(expr: &str, max_size: u32) -> Result<IndexSet, ArrayError> {
        if expr.trim().is_empty() {
            return Err(ArrayError::Empty);
        }
        let num = |s: &str, whole: &str| -> Result<u64, ArrayError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ArrayError::Syntax(whole.to_string()));
            }
            s.parse::<u64>()
                .map_err(|_| ArrayError::TooLarge {
                    index: u64::MAX,
                    max: max_size,
                })
                .and_then(|n| {
                    if n >= u64::from(max_size) {
                        Err(ArrayError::TooLarge {
                            index: n,
                            max: max_size,
                        })
                    } else {
                        Ok(n)
                    }
                })
        };
        let mut runs = Vec::new();
        for part in expr.split(',') {
            if part.trim().is_empty() {
                return Err(ArrayError::Syntax(expr.to_string()));
            }
            let (range, step) = match part.split_once(':') {
                Some((r, s)) => {
                    let s = s.trim();
                    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(ArrayError::Syntax(part.to_string()));
                    }
                    let step: u32 = s
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| ArrayError::Syntax(part.to_string()))?;
                    (r, step)
                }
                None => (part, 1),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (num(a, part)?, num(b, part)?),
                None if step == 1 => {
                    let n = num(range, part)?;
                    (n, n)
                }
                None => return Err(ArrayError::Syntax(part.to_string())),
            };
            if hi < lo {
                return Err(ArrayError::Reversed(part.to_string()));
            }
            let (lo, hi) = (lo as u32, hi as u32);
            let hi = hi - (hi - lo) % step;
            runs.push(Run::new(lo, hi, step));
        }
        Ok(IndexSet::from_runs(runs))
    }

    /// Normalises arbitrary runs into the invariant form.
    fn from_runs(mut runs: Vec<Run>) -> IndexSet {
        runs.sort_by_key(|r| (r.lo, r.hi));
        let disjoint = runs.windows(2).all(|w| w[0].hi < w[1].lo);
        if disjoint {
            // Join neighbours that continue each other (`3,4,5` is `3-5`).
            let mut out: Vec<Run> = Vec::with_capacity(runs.len());
            for r in runs {
                match out.last_mut() {
                    Some(p) if p.step == 1 && r.step == 1 && r.lo == p.hi + 1 => p.hi = r.hi,
                    _ => out.push(r),
                }
            }
            return IndexSet { runs: out };
        }
        // Overlapping or interleaved pieces (`0-10:2,1-11:2`): merge through the values.
        let mut all = Vec::new();
        for r in &runs {
            let mut i = r.lo;
            loop {
                all.push(i);
                if i >= r.hi {
                    break;
                }
                i += r.step;
            }
        }
        IndexSet::from_indices(all)
    }

    /// Number of indices.
    pub fn len(&self) -> u64 {
        self.runs.iter().map(Run::len).sum()
    }

    /// True when no index is left.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Smallest index.
    pub fn min(&self) -> Option<u32> {
        self.runs.first().map(|r| r.lo)
    }

    /// Largest index.
    pub fn max(&self) -> Option<u32> {
        self.runs.last().map(|r| r.hi)
    }

    /// Whether `i` is in the set.
    pub fn contains(&self, i: u32) -> bool {
        // Runs are sorted and disjoint: find the last run starting at or before i.
        let pos = self.runs.partition_point(|r| r.lo <= i);
        pos > 0 && self.runs[pos - 1].contains(i)
    }

    /// Removes `i`; returns whether it was there.
    pub fn remove(&mut self, i: u32) -> bool {
        let pos = self.runs.partition_point(|r| r.lo <= i);
        if pos == 0 || !self.runs[pos - 1].contains(i) {
            return false;
        }
        let k = pos - 1;
        let r = self.runs[k];
        let mut pieces = Vec::with_capacity(2);
        if i > r.lo {
            pieces.push(Run::new(r.lo, i - r.step, r.step));
        }
        if i < r.hi {
            pieces.push(Run::new(i + r.step, r.hi, r.step));
        }
        self.runs.splice(k..=k, pieces);
        true
    }

    /// All indices in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs.iter().flat_map(|r| {
            let n = r.len();
            (0..n).map(move |k| r.lo + (k as u32) * r.step)
        })
    }

    /// The indices that are in both sets, ascending.
    pub fn intersection(&self, other: &IndexSet) -> Vec<u32> {
        let (small, big) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        small.iter().filter(|i| big.contains(*i)).collect()
    }

    /// The stride `SLURM_ARRAY_TASK_STEP` reports: the common gap between consecutive
    /// indices when there is one, else 1.
    pub fn stride(&self) -> u32 {
        let mut gap: Option<u32> = None;
        let mut prev: Option<u32> = None;
        for r in &self.runs {
            let first_gap = prev.map(|p| r.lo - p);
            for g in first_gap
                .into_iter()
                .chain((r.lo != r.hi).then_some(r.step))
            {
                match gap {
                    None => gap = Some(g),
                    Some(x) if x != g => return 1,
                    _ => {}
                }
            }
            prev = Some(r.hi);
        }
        gap.unwrap_or(1)
    }
}

impl fmt::Display for IndexSet {
    /// Slurm's list form: `0-3,5,7-9`; a stepped run prints its elements (`1,4,7`),
    /// or `lo-hi:step` when it has more than 64 of them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        enum Piece {
            Range(u32, u32),
            Stepped(Run),
        }
        let mut pieces: Vec<Piece> = Vec::new();
        let push = |lo: u32, hi: u32, pieces: &mut Vec<Piece>| match pieces.last_mut() {
            Some(Piece::Range(_, h)) if lo == *h + 1 => *h = hi,
            _ => pieces.push(Piece::Range(lo, hi)),
        };
        for r in &self.runs {
            if r.step == 1 {
                push(r.lo, r.hi, &mut pieces);
            } else if r.len() > 64 {
                pieces.push(Piece::Stepped(*r));
            } else {
                let mut i = r.lo;
                loop {
                    push(i, i, &mut pieces);
                    if i >= r.hi {
                        break;
                    }
                    i += r.step;
                }
            }
        }
        for (k, p) in pieces.iter().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            match p {
                Piece::Range(lo, hi) if lo == hi => write!(f, "{lo}")?,
                Piece::Range(lo, hi) => write!(f, "{lo}-{hi}")?,
                Piece::Stepped(r) => write!(f, "{}-{}:{}", r.lo, r.hi, r.step)?,
            }
        }
        Ok(())
    }
}

/// A parsed `--array` value: the indices and the `%N` throttle (0 = none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    pub tasks: IndexSet,
    pub throttle: u32,
}

impl ArraySpec {
    /// Parses `--array=LIST[%N]` with indices below `max_size` (MaxArraySize).
    ///
    /// Errors: [`ArrayError`] for any malformed or out-of-range part.
    pub fn parse(s: &str, max_size: u32) -> Result<ArraySpec, ArrayError> {
        let (list, throttle) = match s.split_once('%') {
            Some((l, t)) => {
                let t = t.trim();
                let n = t
                    .parse::<u32>()
                    .ok()
                    .filter(|_| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| ArrayError::Throttle(t.to_string()))?;
                (l, n)
            }
            None => (s, 0),
        };
        Ok(ArraySpec {
            tasks: IndexSet::parse(list, max_size)?,
            throttle,
        })
    }
}

/// Array data on every record of an array. The meta record (the array's own id, no
/// task id) holds the tasks that have not started in `tasks`; a started task holds an
/// empty set. `count`/`min`/`max`/`step` describe the whole array as submitted (the
/// `SLURM_ARRAY_TASK_*` variables).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayInfo {
    /// Tasks not split off yet (meta record only).
    pub tasks: IndexSet,
    /// `%N`: most tasks running at once (0 = unlimited).
    pub throttle: u32,
    pub count: u32,
    pub min: u32,
    pub max: u32,
    pub step: u32,
    /// Tasks of the array running at the controller's last scheduling pass (it
    /// refreshes this on the meta record before every pass).
    #[serde(default)]
    pub running: u32,
}

impl ArrayInfo {
    /// The array data of a new submission.
    pub fn from_spec(spec: &ArraySpec) -> ArrayInfo {
        ArrayInfo {
            count: spec.tasks.len() as u32,
            min: spec.tasks.min().unwrap_or(0),
            max: spec.tasks.max().unwrap_or(0),
            step: spec.tasks.stride(),
            throttle: spec.throttle,
            tasks: spec.tasks.clone(),
            running: 0,
        }
    }

    /// Whether the `%N` throttle stops another task from starting now.
    pub fn throttled(&self) -> bool {
        self.throttle > 0 && self.running >= self.throttle
    }

    /// The pending-task text squeue `%K` and scontrol `ArrayTaskId=` print for a meta
    /// record: `2-9%2` (with the throttle) or `2-9`.
    pub fn pending_text(&self, with_throttle: bool) -> String {
        if with_throttle && self.throttle > 0 {
            format!("{}%{}", self.tasks, self.throttle)
        } else {
            self.tasks.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IndexSet {
        IndexSet::parse(s, 1001).unwrap()
    }

    #[test]
    fn parses_lists_ranges_and_steps() {
        assert_eq!(p("0-3").to_string(), "0-3");
        assert_eq!(p("0-3").len(), 4);
        assert_eq!(p("1-7:3").to_string(), "1,4,7");
        assert_eq!(p("1-8:3").to_string(), "1,4,7");
        assert_eq!(p("2,5,9").to_string(), "2,5,9");
        assert_eq!(p("2,5,9").len(), 3);
        let mix = p("0-99,200,300-400:5");
        assert_eq!(mix.len(), 100 + 1 + 21);
        assert!(mix.contains(305) && !mix.contains(301) && mix.contains(200));
        assert_eq!(mix.min(), Some(0));
        assert_eq!(mix.max(), Some(400));
        assert_eq!(p("5,3,4").to_string(), "3-5");
        // Overlapping pieces merge.
        assert_eq!(p("0-10:2,1-11:2").to_string(), "0-11");
        assert_eq!(p("3").to_string(), "3");
    }

    #[test]
    fn refuses_bad_expressions() {
        for bad in [
            "", "abc", "5-2", "1-", "-1", "1,,2", "0-4:0", "3:2", "1-2:x",
        ] {
            assert!(IndexSet::parse(bad, 1001).is_err(), "{bad}");
        }
        assert_eq!(
            IndexSet::parse("0-1001", 1001),
            Err(ArrayError::TooLarge {
                index: 1001,
                max: 1001
            })
        );
        assert!(IndexSet::parse("0-1000", 1001).is_ok());
        assert!(IndexSet::parse("99999999999", 1001).is_err());
    }

    #[test]
    fn throttle() {
        let a = ArraySpec::parse("0-9%2", 1001).unwrap();
        assert_eq!((a.tasks.len(), a.throttle), (10, 2));
        assert!(ArraySpec::parse("0-9%", 1001).is_err());
        assert!(ArraySpec::parse("0-9%x", 1001).is_err());
        let info = ArrayInfo::from_spec(&a);
        assert_eq!(info.pending_text(true), "0-9%2");
        assert_eq!(info.pending_text(false), "0-9");
    }

    #[test]
    fn remove_splits_runs() {
        let mut s = p("0-9");
        assert!(s.remove(7));
        assert!(!s.remove(7));
        assert_eq!(s.to_string(), "0-6,8-9");
        assert!(s.remove(0));
        assert!(s.remove(9));
        assert_eq!(s.to_string(), "1-6,8");
        let mut st = p("0-20:5");
        assert!(st.remove(10));
        assert_eq!(st.to_string(), "0,5,15,20");
        assert_eq!(st.len(), 4);
        assert!(!st.remove(11));
        for i in [0, 5, 15, 20] {
            assert!(st.remove(i));
        }
        assert!(st.is_empty());
        assert_eq!(st.min(), None);
    }

    #[test]
    fn big_sets_stay_small() {
        let s = IndexSet::parse("0-99999", 100_001).unwrap();
        assert_eq!(s.len(), 100_000);
        assert_eq!(s.runs.len(), 1);
        let st = IndexSet::parse("0-99998:2", 100_001).unwrap();
        assert_eq!(st.runs.len(), 1);
        assert_eq!(st.len(), 50_000);
        assert_eq!(st.to_string(), "0-99998:2");
        assert_eq!(st.stride(), 2);
    }

    #[test]
    fn stride_and_iteration() {
        assert_eq!(p("1-7:3").stride(), 3);
        assert_eq!(p("0-3").stride(), 1);
        assert_eq!(p("2,5,9").stride(), 1);
        assert_eq!(p("3").stride(), 1);
        assert_eq!(p("0,10,20").stride(), 10);
        assert_eq!(p("0-2,5").iter().collect::<Vec<_>>(), vec![0, 1, 2, 5]);
        assert_eq!(p("0-9").intersection(&p("3-4,8,20")), vec![3, 4, 8]);
    }

    #[test]
    fn from_indices_compresses() {
        assert_eq!(
            IndexSet::from_indices(vec![1, 3, 4, 5]).to_string(),
            "1,3-5"
        );
        assert_eq!(
            IndexSet::from_indices(vec![0, 5, 10, 11]).to_string(),
            "0,5,10-11"
        );
        let s = IndexSet::from_indices(vec![9, 1, 3, 5, 7, 8]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![1, 3, 5, 7, 8, 9]);
        assert!(s.contains(8) && !s.contains(2));
    }
}
