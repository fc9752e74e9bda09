//! The backfill timeline: for every node, what will be free when, built from the time
//! limits of the jobs holding it and from the starts reserved for pending jobs (cf.
//! src/plugins/sched/backfill/backfill.c `node_space_map`; sluice keeps one step
//! function per node instead of one global list, so a reservation on one node never
//! splits the others).
//!
//! Each [`NodeLine`] is a step function: step `k` holds from `steps[k].t` until the next
//! step's time (the last one forever). Counts only: which CPU ids a job gets is decided
//! when it really starts.
//!
//! Invariant: steps are sorted by time, the first is at the line's origin, and no count
//! goes below zero (a reservation is only made where the minimum over its window fits).

use super::select::{Cap, Take, UserSet};

/// "Never ends" for jobs without a time limit.
pub const FOREVER: i64 = i64::MAX / 4;

#[derive(Debug, Clone)]
struct Step {
    t: i64,
    cap: Cap,
    jobs: u32,
    whole: u32,
}

/// One node's free resources over time.
#[derive(Debug, Clone)]
pub struct NodeLine {
    steps: Vec<Step>,
}

impl NodeLine {
    /// A line starting at `now` with `cap` free and `jobs` jobs holding the node.
    pub fn new(now: i64, cap: Cap, jobs: u32) -> NodeLine {
        let whole = u32::from(cap.blocked);
        NodeLine {
            steps: vec![Step {
                t: now,
                cap,
                jobs,
                whole,
            }],
        }
    }

    /// Index of the step in force at `t` (the first one for times before the origin).
    fn at(&self, t: i64) -> usize {
        match self.steps.binary_search_by(|s| s.t.cmp(&t)) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        }
    }

    /// Makes sure a step starts exactly at `t`; returns its index.
    fn split(&mut self, t: i64) -> usize {
        let i = self.at(t);
        if self.steps[i].t == t || t < self.steps[0].t {
            return i;
        }
        let s = Step {
            t,
            ..self.steps[i].clone()
        };
        self.steps.insert(i + 1, s);
        i + 1
    }

    /// A job holding `take` until `end` gives its resources back then.
    pub fn release(&mut self, end: i64, take: &Take, shared: bool, whole: bool) {
        if end >= FOREVER {
            return;
        }
        let from = self.split(end.max(self.steps[0].t));
        for s in &mut self.steps[from..] {
            if !shared {
                s.cap.cpus += take.cpus;
            }
            s.cap.share_cpus += take.cpus;
            s.cap.mem += take.mem;
            for (slot, c) in &take.gres {
                if let Some(g) = s.cap.gres.get_mut(*slot) {
                    *g += c;
                }
            }
            s.jobs = s.jobs.saturating_sub(1);
            if whole {
                s.whole = s.whole.saturating_sub(1);
            }
            s.cap.idle = s.jobs == 0;
            s.cap.blocked = s.whole > 0;
            if s.jobs == 0 {
                s.cap.users = UserSet::Nobody;
            }
        }
    }

    /// Holds `take` during `[start, end)` for a job of `uid`.
    #[allow(clippy::too_many_arguments)]
    pub fn reserve(
        &mut self,
        start: i64,
        end: i64,
        take: &Take,
        shared: bool,
        whole: bool,
        uid: u32,
        lock: bool,
    ) {
        let a = self.split(start);
        let b = if end >= FOREVER {
            self.steps.len()
        } else {
            self.split(end)
        };
        for s in &mut self.steps[a..b] {
            if !shared {
                s.cap.cpus = s.cap.cpus.saturating_sub(take.cpus);
            }
            s.cap.share_cpus = s.cap.share_cpus.saturating_sub(take.cpus);
            s.cap.mem = s.cap.mem.saturating_sub(take.mem);
            for (slot, c) in &take.gres {
                if let Some(g) = s.cap.gres.get_mut(*slot) {
                    *g = g.saturating_sub(*c);
                }
            }
            s.jobs += 1;
            s.cap.idle = false;
            if whole {
                s.whole += 1;
                s.cap.blocked = true;
            }
            s.cap.users = s.cap.users.with(uid, lock);
        }
    }

    /// The least free over `[start, end)`.
    pub fn min_cap(&self, start: i64, end: i64) -> Cap {
        let a = self.at(start);
        let mut cap = self.steps[a].cap.clone();
        for s in &self.steps[a + 1..] {
            if s.t >= end {
                break;
            }
            cap = cap.min(&s.cap);
        }
        cap
    }

    /// The earliest start in `[from, limit]` from which `ok` holds on every step for
    /// `dur` seconds (`dur` ≥ [`FOREVER`]: for ever). One pass over the steps: a
    /// failing step moves the candidate start past it.
    pub fn earliest(
        &self,
        from: i64,
        dur: i64,
        limit: i64,
        ok: impl Fn(&Cap) -> bool,
    ) -> Option<i64> {
        let mut i = self.at(from);
        let mut start = from;
        while start <= limit {
            let end = if dur >= FOREVER {
                FOREVER
            } else {
                start.saturating_add(dur)
            };
            // Check the steps covering [start, end).
            let mut k = i;
            let mut bad = None;
            while k < self.steps.len() && (k == i || self.steps[k].t < end) {
                if !ok(&self.steps[k].cap) {
                    bad = Some(k);
                    break;
                }
                k += 1;
            }
            match bad {
                None => return Some(start),
                Some(b) => {
                    if b + 1 >= self.steps.len() {
                        return None;
                    }
                    i = b + 1;
                    start = self.steps[i].t;
                }
            }
        }
        None
    }

    /// The steps as (start time, what is free).
    pub fn steps(&self) -> impl Iterator<Item = (i64, &Cap)> + '_ {
        self.steps.iter().map(|s| (s.t, &s.cap))
    }

    /// Step `k` as (start time, what is free); `k` < [`NodeLine::len`].
    pub fn step(&self, k: usize) -> (i64, &Cap) {
        let s = &self.steps[k];
        (s.t, &s.cap)
    }

    /// Times at which something changes, from `from` on.
    pub fn changes(&self, from: i64) -> impl Iterator<Item = i64> + '_ {
        self.steps.iter().map(|s| s.t).filter(move |t| *t > from)
    }

    /// Number of steps (for statistics: Slurm's "table size").
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Never true: a line always has its first step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Cluster licenses over time: free count per license (same order as configured).
#[derive(Debug, Clone)]
pub struct LicenseLine {
    steps: Vec<(i64, Vec<u32>)>,
}

impl LicenseLine {
    /// A line starting at `now` with `free` licenses.
    pub fn new(now: i64, free: Vec<u32>) -> LicenseLine {
        LicenseLine {
            steps: vec![(now, free)],
        }
    }

    fn at(&self, t: i64) -> usize {
        match self.steps.binary_search_by(|s| s.0.cmp(&t)) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        }
    }

    fn split(&mut self, t: i64) -> usize {
        let i = self.at(t);
        if self.steps[i].0 == t || t < self.steps[0].0 {
            return i;
        }
        let v = self.steps[i].1.clone();
        self.steps.insert(i + 1, (t, v));
        i + 1
    }

    /// Adds (`sign` > 0) or removes licenses `(index, count)` from `start` until `end`.
    pub fn change(&mut self, start: i64, end: i64, lic: &[(usize, u32)], sign: i32) {
        if lic.is_empty() || start >= FOREVER {
            return;
        }
        let a = self.split(start.max(self.steps[0].0));
        let b = if end >= FOREVER {
            self.steps.len()
        } else {
            self.split(end)
        };
        for (_, v) in &mut self.steps[a..b] {
            for &(i, c) in lic {
                if let Some(x) = v.get_mut(i) {
                    *x = if sign > 0 {
                        x.saturating_add(c)
                    } else {
                        x.saturating_sub(c)
                    };
                }
            }
        }
    }

    /// Whether `lic` are free during all of `[start, end)`.
    pub fn fits(&self, start: i64, end: i64, lic: &[(usize, u32)]) -> bool {
        if lic.is_empty() {
            return true;
        }
        let a = self.at(start);
        self.steps[a..]
            .iter()
            .take_while(|(t, _)| *t < end || *t == self.steps[a].0)
            .all(|(_, v)| {
                lic.iter()
                    .all(|&(i, c)| v.get(i).copied().unwrap_or(0) >= c)
            })
    }

    /// Times at which the free counts change, after `from`.
    pub fn changes(&self, from: i64) -> impl Iterator<Item = i64> + '_ {
        self.steps.iter().map(|s| s.0).filter(move |t| *t > from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(cpus: u32) -> Cap {
        Cap {
            cpus,
            share_cpus: cpus,
            mem: 1000,
            gres: vec![],
            idle: cpus == 8,
            blocked: false,
            users: UserSet::Nobody,
            free_ids: None,
        }
    }

    fn take(cpus: u32) -> Take {
        Take {
            node: 0,
            tasks: cpus,
            cpus,
            mem: 0,
            gres: vec![],
            cpu_ids: vec![],
        }
    }

    #[test]
    fn reserve_and_release_shape_the_line() {
        // 8 CPUs, 6 held until t=100.
        let mut l = NodeLine::new(0, cap(2), 1);
        l.release(100, &take(6), false, false);
        assert_eq!(l.min_cap(0, 50).cpus, 2);
        assert_eq!(l.min_cap(100, 200).cpus, 8);
        assert!(l.min_cap(100, 200).idle);
        assert_eq!(l.min_cap(50, 150).cpus, 2);
        l.reserve(100, 300, &take(5), false, false, 1, false);
        assert_eq!(l.min_cap(100, 300).cpus, 3);
        assert_eq!(l.min_cap(300, 400).cpus, 8);
        assert_eq!(l.changes(0).collect::<Vec<_>>(), vec![100, 300]);
        // Earliest window of 150 s with 4 CPUs: not before 300 (3 free 100..300).
        assert_eq!(l.earliest(0, 150, 10_000, |c| c.cpus >= 4), Some(300));
        assert_eq!(l.earliest(0, 50, 10_000, |c| c.cpus >= 2), Some(0));
        assert_eq!(l.earliest(0, 50, 200, |c| c.cpus >= 4), None);
        assert_eq!(l.earliest(0, 50, 10_000, |c| c.cpus >= 9), None);
        l.reserve(400, FOREVER, &take(1), false, false, 1, false);
        assert_eq!(l.min_cap(500, FOREVER).cpus, 7);
    }

    #[test]
    fn licenses_over_time() {
        let mut l = LicenseLine::new(0, vec![2]);
        l.change(0, 100, &[(0, 2)], -1);
        assert!(!l.fits(0, 10, &[(0, 1)]));
        assert!(l.fits(100, 200, &[(0, 2)]));
        assert!(!l.fits(50, 150, &[(0, 1)]));
        assert_eq!(l.changes(0).collect::<Vec<_>>(), vec![100]);
    }
}
