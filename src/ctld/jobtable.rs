//! The controller's job table: records by id, with indexes by owner, by array and by
//! heterogeneous leader, so that a query naming ids or users (`squeue -j`, `scontrol
//! show job N`, `squeue -u`) costs what it returns, not the length of the queue
//! (issue 20; slurmctld keeps a job-id hash and array hashes for the same reason,
//! `job_mgr.c` `find_job_record`, `find_job_array_rec`).
//!
//! The indexed fields (`uid`, `array_job_id`, `het.job_id`) are fixed when a record is
//! inserted: records reach the table only through [`JobTable::insert`] and leave it only
//! through [`JobTable::retain`] / [`JobTable::remove`], which keep the indexes in step.
//! Reads go through `Deref` to the id-ordered map.

use crate::model::Job;
use crate::proto::JobFilter;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Bound, RangeBounds};

/// Job records by id plus secondary indexes (see the module docs).
#[derive(Debug, Default, Clone)]
pub struct JobTable {
    map: BTreeMap<u32, Box<Job>>,
    /// uid → ids of that user's records.
    by_user: HashMap<u32, BTreeSet<u32>>,
    /// array master id → ids of every record of the array (the master's included).
    by_array: HashMap<u32, BTreeSet<u32>>,
    /// heterogeneous leader id → ids of its components (the leader's included).
    by_het: HashMap<u32, BTreeSet<u32>>,
}

impl std::ops::Deref for JobTable {
    type Target = BTreeMap<u32, Box<Job>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl<'a> IntoIterator for &'a JobTable {
    type Item = (&'a u32, &'a Box<Job>);
    type IntoIter = std::collections::btree_map::Iter<'a, u32, Box<Job>>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

fn add(ix: &mut HashMap<u32, BTreeSet<u32>>, key: u32, id: u32) {
    ix.entry(key).or_default().insert(id);
}

fn drop_from(ix: &mut HashMap<u32, BTreeSet<u32>>, key: u32, id: u32) {
    if let Some(s) = ix.get_mut(&key) {
        s.remove(&id);
        if s.is_empty() {
            ix.remove(&key);
        }
    }
}

impl JobTable {
    /// An empty table.
    pub fn new() -> JobTable {
        JobTable::default()
    }

    fn index(&mut self, j: &Job) {
        add(&mut self.by_user, j.uid, j.id);
        if j.array_job_id != 0 {
            add(&mut self.by_array, j.array_job_id, j.id);
        }
        if let Some(h) = j.het {
            add(&mut self.by_het, h.job_id, j.id);
        }
    }

    fn unindex(&mut self, j: &Job) {
        drop_from(&mut self.by_user, j.uid, j.id);
        if j.array_job_id != 0 {
            drop_from(&mut self.by_array, j.array_job_id, j.id);
        }
        if let Some(h) = j.het {
            drop_from(&mut self.by_het, h.job_id, j.id);
        }
    }

    /// Adds (or replaces) the record with id `id` (`job.id` must equal `id`); returns
    /// the record it replaced.
    pub fn insert(&mut self, id: u32, job: Box<Job>) -> Option<Box<Job>> {
        debug_assert_eq!(id, job.id, "a job is filed under its own id");
        let old = self.remove(&id);
        self.index(&job);
        self.map.insert(id, job);
        old
    }

    /// Removes and returns the record `id`.
    pub fn remove(&mut self, id: &u32) -> Option<Box<Job>> {
        let old = self.map.remove(id)?;
        self.unindex(&old);
        Some(old)
    }

    /// Keeps the records for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&u32, &mut Box<Job>) -> bool) {
        let mut gone = Vec::new();
        self.map.retain(|id, j| {
            let k = keep(id, j);
            if !k {
                gone.push((j.id, j.uid, j.array_job_id, j.het.map(|h| h.job_id)));
            }
            k
        });
        for (id, uid, array, het) in gone {
            drop_from(&mut self.by_user, uid, id);
            if array != 0 {
                drop_from(&mut self.by_array, array, id);
            }
            if let Some(h) = het {
                drop_from(&mut self.by_het, h, id);
            }
        }
    }

    /// The record `id`, to change. The indexed fields (`uid`, `array_job_id`, `het`)
    /// must not be changed through it.
    pub fn get_mut(&mut self, id: &u32) -> Option<&mut Box<Job>> {
        self.map.get_mut(id)
    }

    /// Every record in id order, to change (same rule as [`JobTable::get_mut`]).
    pub fn values_mut(&mut self) -> std::collections::btree_map::ValuesMut<'_, u32, Box<Job>> {
        self.map.values_mut()
    }

    /// Every `(id, record)` in id order, to change (same rule as [`JobTable::get_mut`]).
    pub fn iter_mut(&mut self) -> std::collections::btree_map::IterMut<'_, u32, Box<Job>> {
        self.map.iter_mut()
    }

    /// Ids above `after` of the records `filter` can select, in increasing order, taken
    /// from the indexes when the filter names ids, array tasks or users; `None` when it
    /// names none of these (any record may match: scan the table). Callers still apply
    /// `filter.matches`, so this only narrows the search: the result is a scan's.
    ///
    /// Cost: the records of the named ids and arrays; for a filter by one user only,
    /// lazy (what the caller takes), so that a page of a long queue costs a page.
    pub fn candidates<'a>(
        &'a self,
        filter: &JobFilter,
        after: Bound<u32>,
    ) -> Option<Box<dyn Iterator<Item = u32> + 'a>> {
        let above = (after, Bound::Unbounded);
        if !filter.ids.is_empty() || !filter.array_tasks.is_empty() {
            // Users, if named too, are checked by `matches` on these few.
            let mut s = BTreeSet::new();
            for i in &filter.ids {
                if self.map.contains_key(i) {
                    s.insert(*i);
                }
                // `matches` takes no array or leader id 0.
                if *i != 0 {
                    s.extend(self.by_array.get(i).into_iter().flatten());
                    s.extend(self.by_het.get(i).into_iter().flatten());
                }
            }
            for t in &filter.array_tasks {
                if t.job != 0 {
                    s.extend(self.by_array.get(&t.job).into_iter().flatten());
                }
            }
            return Some(Box::new(s.into_iter().filter(move |i| above.contains(i))));
        }
        match filter.users.as_slice() {
            [] => None,
            [u] => Some(match self.by_user.get(u) {
                Some(s) => Box::new(s.range(above).copied()),
                None => Box::new(std::iter::empty()),
            }),
            us => {
                let mut s = BTreeSet::new();
                for u in us {
                    s.extend(self.by_user.get(u).into_iter().flat_map(|s| s.range(above)));
                }
                Some(Box::new(s.into_iter()))
            }
        }
    }

    /// Whether the indexes agree with the records (tests and debug checks).
    pub fn indexes_consistent(&self) -> bool {
        let mut t = JobTable::new();
        for j in self.map.values() {
            t.index(j);
        }
        t.by_user == self.by_user && t.by_array == self.by_array && t.by_het == self.by_het
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobState;
    use crate::model::array::IndexSet;
    use crate::model::job::HetInfo;
    use crate::proto::ArrayTasks;
    use proptest::prelude::*;

    /// One change to the table: file a record (id, uid, array master offset, het
    /// leader offset, state), drop one, or purge the finished ones.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32, u32, Option<u32>, Option<u32>, bool),
        Remove(u32),
        Purge,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1..40u32, 0..4u32, proptest::option::of(0..3u32), proptest::option::of(0..3u32), any::<bool>())
                .prop_map(|(id, uid, a, h, done)| Op::Insert(id, uid, a, h, done)),
            1 => (1..40u32).prop_map(Op::Remove),
            1 => Just(Op::Purge),
        ]
    }

    fn record(id: u32, uid: u32, array: Option<u32>, het: Option<u32>, done: bool) -> Job {
        Job {
            id,
            uid,
            // Masters and leaders a few ids below (or the record itself).
            array_job_id: array.map_or(0, |d| id.saturating_sub(d).max(1)),
            array_task_id: array,
            het: het.map(|d| HetInfo {
                job_id: id.saturating_sub(d).max(1),
                offset: d,
                size: 3,
            }),
            state: if done {
                JobState::Completed
            } else {
                JobState::Pending
            },
            ..Job::default()
        }
    }

    fn filter() -> impl Strategy<Value = JobFilter> {
        (
            proptest::collection::vec(0..42u32, 0..3),
            proptest::collection::vec(0..5u32, 0..3),
            proptest::option::of((0..42u32, 0..3u32)),
            any::<bool>(),
        )
            .prop_map(|(ids, users, task, active_only)| JobFilter {
                ids,
                users,
                array_tasks: task
                    .map(|(job, t)| ArrayTasks {
                        job,
                        tasks: IndexSet::of(t),
                    })
                    .into_iter()
                    .collect(),
                active_only,
                ..JobFilter::default()
            })
    }

    proptest! {
        /// After any run of inserts, removals and purges the indexes describe the
        /// records, and an indexed lookup selects exactly what a scan selects, from any
        /// paging cursor.
        #[test]
        fn indexes_follow_the_table_and_lookups_equal_scans(
            ops in proptest::collection::vec(op(), 0..60),
            filters in proptest::collection::vec(filter(), 1..6),
            after in 0..42u32,
        ) {
            let mut t = JobTable::new();
            for o in ops {
                match o {
                    Op::Insert(id, uid, a, h, done) => {
                        t.insert(id, Box::new(record(id, uid, a, h, done)));
                    }
                    Op::Remove(id) => {
                        t.remove(&id);
                    }
                    Op::Purge => t.retain(|_, j| j.is_active()),
                }
                prop_assert!(t.indexes_consistent());
            }
            for f in &filters {
                for from in [Bound::Unbounded, Bound::Excluded(after)] {
                    let scan: Vec<u32> = t
                        .range((from, Bound::Unbounded))
                        .filter(|(_, j)| f.matches(j))
                        .map(|(id, _)| *id)
                        .collect();
                    let indexed: Vec<u32> = match t.candidates(f, from) {
                        Some(ids) => ids.filter(|id| f.matches(&t[id])).collect(),
                        None => scan.clone(),
                    };
                    prop_assert_eq!(indexed, scan);
                }
            }
        }
    }

    #[test]
    fn a_lookup_by_id_visits_only_that_job_and_its_array() {
        let mut t = JobTable::new();
        for id in 1..=1000 {
            t.insert(id, Box::new(record(id, id % 7, None, None, false)));
        }
        // 1001 is an array master with tasks 1002 and 1003.
        for id in 1001..=1003 {
            let mut j = record(id, 1, None, None, false);
            j.array_job_id = 1001;
            t.insert(id, Box::new(j));
        }
        let one = JobFilter {
            ids: vec![500],
            ..JobFilter::default()
        };
        let ids: Vec<u32> = t.candidates(&one, Bound::Unbounded).unwrap().collect();
        assert_eq!(ids, vec![500]);
        let array = JobFilter {
            ids: vec![1001],
            ..JobFilter::default()
        };
        let ids: Vec<u32> = t.candidates(&array, Bound::Unbounded).unwrap().collect();
        assert_eq!(ids, vec![1001, 1002, 1003]);
        // No id, no user: the caller scans.
        assert!(
            t.candidates(&JobFilter::default(), Bound::Unbounded)
                .is_none()
        );
        t.retain(|id, _| *id != 1002);
        let ids: Vec<u32> = t.candidates(&array, Bound::Unbounded).unwrap().collect();
        assert_eq!(ids, vec![1001, 1003]);
        assert!(t.indexes_consistent());
    }
}
