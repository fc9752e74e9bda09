//! What the priority plugin computes, as sent to the front-ends: a job's weighted
//! factors (sprio) and an association's fair-share figures (sshare). Computed by
//! `sched::priority` and `sched::fairshare`; plain data here so that the wire (`proto`)
//! need not name the scheduler.

use serde::{Deserialize, Serialize};

/// A job's weighted factors (what sprio prints) and the resulting priority.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub site: f64,
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub jobsize: f64,
    pub partition: f64,
    pub qos: f64,
    /// Weighted TRES factors: (name, value).
    pub tres: Vec<(String, f64)>,
    pub nice: i64,
}

impl Factors {
    /// The job priority: the truncated sum, at least 1.
    pub fn priority(&self) -> u32 {
        let sum = self.site
            + self.age
            + self.assoc
            + self.fairshare
            + self.jobsize
            + self.partition
            + self.qos
            + self.tres.iter().map(|t| t.1).sum::<f64>()
            - self.nice as f64;
        sum.clamp(1.0, f64::from(u32::MAX - 1)) as u32
    }
}

/// What fair-share computes for one association (sshare's columns).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Depth in the tree (root 0).
    pub depth: u32,
    pub norm_shares: f64,
    /// Decayed usage of the subtree, billing-seconds.
    pub raw_usage: f64,
    /// `raw_usage` over the root's.
    pub norm_usage: f64,
    pub effectv_usage: f64,
    /// The FairShare factor in [0, 1] (users; classic also fills accounts).
    pub fairshare: f64,
    /// Fair Tree's LevelFS (may be infinite); 0 under the classic algorithm.
    pub level_fs: f64,
}
