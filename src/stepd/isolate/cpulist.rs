//! CPU id lists in the kernel's list format (`0-3,8,10-11`, as in `cpuset.cpus` and
//! `/proc/self/status` `Cpus_allowed_list`), and the choice of CPU ids for a job.
//!
//! The allocation a job gets from the controller says how many CPUs it has on a node,
//! not which: stepd picks the ids (cf. Slurm's task/cgroup confining to the job's
//! `JobCpus`), preferring CPUs no other job's cpuset holds.

use std::collections::BTreeSet;
use std::fmt;

/// A set of CPU ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuList(BTreeSet<u32>);

impl CpuList {
    /// Parses the kernel list format; whitespace around it is ignored and an empty string
    /// is the empty set. Errors: `None` for anything else.
    pub fn parse(s: &str) -> Option<CpuList> {
        let mut set = BTreeSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Some(CpuList(set));
        }
        for part in s.split(',') {
            let part = part.trim();
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                    // A bound on the range keeps a hostile file from exhausting memory.
                    if a > b || b - a > 65_536 {
                        return None;
                    }
                    set.extend(a..=b);
                }
                None => {
                    set.insert(part.parse().ok()?);
                }
            }
        }
        Some(CpuList(set))
    }

    /// The CPU ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
}

impl FromIterator<u32> for CpuList {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuList(iter.into_iter().collect())
    }
}

impl fmt::Display for CpuList {
    /// The kernel list format, with ranges compressed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.0.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end += 1;
                it.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

/// Picks `want` CPU ids out of `online`: the ones held by the fewest of `busy` (other
/// jobs' cpusets) first, lower ids first among equals. When `want` is 0 or at least the
/// number of online CPUs, all online CPUs are returned (a node declared with more CPUs
/// than it has cannot confine more finely).
pub fn choose(online: &CpuList, busy: &[CpuList], want: u32) -> CpuList {
    if want == 0 || want as usize >= online.len() {
        return online.clone();
    }
    let mut ranked: Vec<(usize, u32)> = online
        .ids()
        .map(|c| (busy.iter().filter(|b| b.contains(c)).count(), c))
        .collect();
    ranked.sort_unstable();
    ranked
        .into_iter()
        .take(want as usize)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> CpuList {
        CpuList::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints_the_kernel_format() {
        for (text, ids, shown) in [
            ("0-3", vec![0, 1, 2, 3], "0-3"),
            ("0,2-3,7\n", vec![0, 2, 3, 7], "0,2-3,7"),
            ("5,1,2", vec![1, 2, 5], "1-2,5"),
            ("", vec![], ""),
            ("4", vec![4], "4"),
        ] {
            let c = l(text);
            assert_eq!(c.ids().collect::<Vec<_>>(), ids, "{text:?}");
            assert_eq!(c.to_string(), shown, "{text:?}");
        }
        for bad in ["a", "3-1", "1-", "0-99999999", "1,,2"] {
            assert!(CpuList::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn chooses_free_cpus_first() {
        let online = l("0-7");
        assert_eq!(choose(&online, &[], 2).to_string(), "0-1");
        assert_eq!(choose(&online, &[l("0-1"), l("4")], 3).to_string(), "2-3,5");
        // Everything is taken once: the least shared ones come next.
        assert_eq!(choose(&online, &[l("0-7"), l("0-3")], 2).to_string(), "4-5");
        // More than the machine has, or no count: all of it.
        assert_eq!(choose(&l("0-1"), &[l("0")], 4).to_string(), "0-1");
        assert_eq!(choose(&online, &[], 0).to_string(), "0-7");
    }
}
