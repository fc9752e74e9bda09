//! Fair-share on the association tree (cf. src/plugins/priority/multifactor/
//! priority_multifactor.c, fair_tree.c, and the "Fair Tree Fairshare Algorithm" and
//! "Multifactor Priority Plugin" pages). Pure: usage arrives already recorded, time is
//! passed in.
//!
//! The tree is a list of associations, root first, every parent before its children:
//! account associations (`user == None`) and user associations (leaves). Each has raw
//! shares (sacctmgr `Fairshare=`) and its own raw usage (decayed billing-seconds; an
//! account's usage is the sum over its subtree).
//!
//! - **Fair Tree** (the default, as in Slurm 19.05+): NormShares are relative to the
//!   siblings (`shares / Σ sibling shares`), EffectvUsage is relative to the parent's
//!   usage, `LevelFS = NormShares / EffectvUsage` (∞ without usage, 0 without shares).
//!   Users are ranked by a depth-first walk that visits siblings in decreasing LevelFS;
//!   the FairShare factor is `rank / number of users` (the first user gets 1.0, ties
//!   share a rank).
//! - **Classic** (`PriorityFlags=NO_FAIR_TREE`): NormShares are multiplied down the
//!   tree, `EffectvUsage = NormUsage + (parent EffectvUsage − NormUsage) × shares /
//!   Σ sibling shares` (just NormUsage below root), and the factor is
//!   `2^(−EffectvUsage / NormShares)`.
//!
//! Usage bookkeeping ([`UsageLedger`], the controller's one usage ledger, which the
//! GrpTRESMins/GrpWall limits read too): usage decays with `PriorityDecayHalfLife` and
//! is cleared at each `PriorityUsageResetPeriod` boundary (UTC); running jobs accrue
//! their billing (`model::billing`: CPUs, or their partition's `TRESBillingWeights`)
//! and TRES times the seconds they held them, at every accounting tick and at their
//! end.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub use crate::config::sched::{AccountDef, Algorithm, ResetPeriod, UserDef};
pub use crate::model::priority::Share;

impl ResetPeriod {
    /// The index of the period holding epoch second `t` (None for NONE/NOW).
    fn period(self, t: i64) -> Option<i64> {
        let days = t.div_euclid(86400);
        let (y, m) = year_month(days);
        match self {
            ResetPeriod::None | ResetPeriod::Now => None,
            ResetPeriod::Daily => Some(days),
            // 1970-01-01 was a Thursday; weeks start on Sunday.
            ResetPeriod::Weekly => Some((days + 4).div_euclid(7)),
            ResetPeriod::Monthly => Some(y * 12 + m - 1),
            ResetPeriod::Quarterly => Some(y * 4 + (m - 1) / 3),
            ResetPeriod::Yearly => Some(y),
        }
    }

    /// True when a reset boundary lies in `(from, to]` (epoch seconds).
    pub fn crossed(self, from: i64, to: i64) -> bool {
        to > from
            && match (self.period(from), self.period(to)) {
                (Some(a), Some(b)) => a != b,
                _ => false,
            }
    }
}

/// Civil (year, month 1..=12) of a day count since 1970-01-01 (proleptic Gregorian).
fn year_month(days: i64) -> (i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m)
}

/// `value` decayed from `then` to `now` with a half-life of `half_life` seconds (no
/// decay when `half_life` is 0, as `PriorityDecayHalfLife=0`).
pub fn decay(value: f64, then: i64, now: i64, half_life: i64) -> f64 {
    if half_life <= 0 || now <= then {
        return value;
    }
    value * (-((now - then) as f64) / half_life as f64).exp2()
}

/// An association's key: (account, user); the account is `root` when a job names
/// none.
pub type AssocKey = (String, String);

/// What one running job charges for each second it holds its allocation (cf. the
/// priority plugin's `_apply_new_usage`, which adds running jobs' usage to
/// `usage_raw`, `usage_tres_raw` and `grp_used_wall` of their association chain and
/// QOS every PriorityCalcPeriod).
#[derive(Debug, Clone, PartialEq)]
pub struct RunCharge {
    /// The job's association.
    pub key: AssocKey,
    /// Billing units per second (`model::billing::BillingTable::billable`), times the QOS
    /// UsageFactor: what fair-share's RawUsage grows by.
    pub billing: f64,
    /// The other TRES it holds (`cpu`, `mem` in MiB, `node`, `gres/…`, `license/…`),
    /// each count times the QOS UsageFactor: what GrpTRESMins is checked against.
    /// Empty where only fair-share matters (the simulator).
    pub tres: Vec<(String, f64)>,
    /// The QOS charged besides the association: the job's, and its partition's when
    /// that is another (Slurm charges both).
    pub qos: Vec<String>,
    /// Epoch second it started.
    pub start: i64,
}

impl RunCharge {
    /// A charge for fair-share alone: `billing` units per second since `start`.
    pub fn billing_only(key: AssocKey, billing: f64, start: i64) -> RunCharge {
        RunCharge {
            key,
            billing,
            tres: Vec::new(),
            qos: Vec::new(),
            start,
        }
    }
}

/// Decayed usage charged to one QOS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QosUsage {
    /// Billing-seconds.
    #[serde(default)]
    pub billing: f64,
    /// TRES-seconds by TRES name (billing excluded: it is `billing`).
    #[serde(default)]
    pub tres: BTreeMap<String, f64>,
    /// Wall seconds of its jobs (GrpWall).
    #[serde(default)]
    pub wall: f64,
}

/// The one usage ledger of a controller (Slurm keeps it in each association's and
/// QOS's `usage_raw`, `usage_tres_raw` and `grp_used_wall`): decayed usage per user
/// association and per QOS, which fair-share (RawUsage, the billing figure) and the
/// `GrpTRESMins`/`GrpWall` limits (every TRES, wall time) both read. Running jobs are
/// charged at every accounting tick and at their end, so a running job's usage counts
/// before it ends. What the controller persists.
///
/// Units: seconds (billing-seconds, TRES-seconds, wall seconds). An account's usage is
/// the sum over the user associations below it (see `limits::UsedMins::from_ledger`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageLedger {
    /// Billing-seconds per (account, user), decayed to `decayed_at`: fair-share's
    /// RawUsage and the `billing` TRES of the limits.
    pub usage: BTreeMap<AssocKey, f64>,
    /// TRES-seconds per (account, user) and TRES name (billing excluded: it is
    /// `usage`).
    #[serde(default)]
    pub tres: BTreeMap<AssocKey, BTreeMap<String, f64>>,
    /// Wall seconds per (account, user): each job counts its own run time.
    #[serde(default)]
    pub wall: BTreeMap<AssocKey, f64>,
    /// Usage per QOS.
    #[serde(default)]
    pub qos: BTreeMap<String, QosUsage>,
    /// Epoch second the values are decayed to.
    pub decayed_at: i64,
    /// Epoch second up to which running jobs' usage has been charged.
    pub accrued_at: i64,
}

impl UsageLedger {
    /// Decays every value from `decayed_at` to `now` (half-life in seconds), first
    /// clearing everything if a `reset` boundary lies in between. Time never runs
    /// backwards here: an earlier `now` changes nothing.
    pub fn decay_to(&mut self, now: i64, half_life: i64, reset: ResetPeriod) {
        if now <= self.decayed_at {
            return;
        }
        if reset.crossed(self.decayed_at, now) {
            self.usage.clear();
            self.tres.clear();
            self.wall.clear();
            self.qos.clear();
        } else {
            let f = decay(1.0, self.decayed_at, now, half_life);
            if f < 1.0 {
                let scale = |m: &mut BTreeMap<String, f64>| m.values_mut().for_each(|v| *v *= f);
                self.usage.values_mut().for_each(|v| *v *= f);
                self.wall.values_mut().for_each(|v| *v *= f);
                self.tres.values_mut().for_each(scale);
                for q in self.qos.values_mut() {
                    q.billing *= f;
                    q.wall *= f;
                    scale(&mut q.tres);
                }
            }
        }
        self.decayed_at = now;
    }

    /// Adds `amount` billing-seconds to `key`.
    pub fn charge(&mut self, key: AssocKey, amount: f64) {
        if amount > 0.0 && amount.is_finite() {
            *self.usage.entry(key).or_insert(0.0) += amount;
        }
    }

    /// Charges a running job for `(max(start, accrued_at), until]`. Does not move
    /// `accrued_at` (see [`UsageLedger::accrue`]).
    pub fn charge_running(&mut self, c: &RunCharge, until: i64) {
        let from = c.start.max(self.accrued_at);
        if until <= from {
            return;
        }
        let secs = (until - from) as f64;
        self.charge(c.key.clone(), c.billing * secs);
        let add = |m: &mut BTreeMap<String, f64>| {
            for (k, v) in &c.tres {
                let x = v * secs;
                if x > 0.0 && x.is_finite() {
                    *m.entry(k.clone()).or_insert(0.0) += x;
                }
            }
        };
        if !c.tres.is_empty() {
            add(self.tres.entry(c.key.clone()).or_default());
        }
        *self.wall.entry(c.key.clone()).or_insert(0.0) += secs;
        for q in &c.qos {
            let u = self.qos.entry(q.clone()).or_default();
            if c.billing > 0.0 && c.billing.is_finite() {
                u.billing += c.billing * secs;
            }
            add(&mut u.tres);
            u.wall += secs;
        }
    }

    /// One accounting tick: decays to `now`, then charges every running job for the
    /// time since the previous tick.
    pub fn accrue(&mut self, running: &[RunCharge], now: i64, half_life: i64, reset: ResetPeriod) {
        if now <= self.accrued_at {
            return;
        }
        self.decay_to(now, half_life, reset);
        for c in running {
            self.charge_running(c, now);
        }
        self.accrued_at = now;
    }
}

/// One association as the algorithm sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assoc {
    pub account: String,
    /// `None` for an account association.
    pub user: Option<String>,
    /// Index of the parent account association; `None` only for the root (index 0).
    pub parent: Option<usize>,
    /// RawShares (`Fairshare=`).
    pub shares: u32,
    /// The association's own decayed usage, billing-seconds (0 for accounts: theirs is
    /// the sum of their children's).
    pub usage: f64,
}

/// Why a tree cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("the association tree is empty")]
    Empty,
    #[error("association {0} has a parent that is not an account listed before it")]
    BadParent(usize),
    #[error("the first association must be the root account")]
    BadRoot,
}

/// Two LevelFS values that differ only by rounding are a tie.
fn same_fs(a: f64, b: f64) -> bool {
    a == b || (a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-9 * a.abs().max(b.abs()))
}

/// Computes every association's [`Share`] with `alg`.
///
/// Errors: an empty tree, a root that is not an account without parent, a parent
/// that is not an account association listed earlier.
pub fn compute(tree: &[Assoc], alg: Algorithm) -> Result<Vec<Share>, TreeError> {
    let root = tree.first().ok_or(TreeError::Empty)?;
    if root.parent.is_some() || root.user.is_some() {
        return Err(TreeError::BadRoot);
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); tree.len()];
    for (i, a) in tree.iter().enumerate().skip(1) {
        match a.parent {
            Some(p) if p < i && tree[p].user.is_none() => children[p].push(i),
            _ => return Err(TreeError::BadParent(i)),
        }
    }
    let mut out = vec![Share::default(); tree.len()];
    // Usage sums bottom-up (children come after parents); depth top-down.
    let mut raw: Vec<f64> = tree.iter().map(|a| a.usage.max(0.0)).collect();
    for i in (1..tree.len()).rev() {
        let p = tree[i].parent.unwrap_or(0);
        raw[p] += raw[i];
    }
    let level: Vec<f64> = (0..tree.len())
        .map(|i| match tree[i].parent {
            Some(p) => children[p].iter().map(|&c| f64::from(tree[c].shares)).sum(),
            None => 0.0,
        })
        .collect();
    let total = raw[0];
    for i in 0..tree.len() {
        let norm_usage = if total > 0.0 { raw[i] / total } else { 0.0 };
        let rel = if level[i] > 0.0 {
            f64::from(tree[i].shares) / level[i]
        } else {
            0.0
        };
        let (depth, norm_shares, effectv_usage) = match (tree[i].parent, alg) {
            (None, Algorithm::FairTree) => (0, 0.0, 1.0),
            (None, Algorithm::Classic) => (0, 1.0, 1.0),
            (Some(p), Algorithm::FairTree) => (
                out[p].depth + 1,
                rel,
                if raw[p] > 0.0 { raw[i] / raw[p] } else { 0.0 },
            ),
            (Some(p), Algorithm::Classic) => (
                out[p].depth + 1,
                out[p].norm_shares * rel,
                if p == 0 {
                    norm_usage
                } else {
                    norm_usage + (out[p].effectv_usage - norm_usage) * rel
                },
            ),
        };
        out[i] = Share {
            depth,
            norm_shares,
            raw_usage: raw[i],
            norm_usage,
            effectv_usage,
            fairshare: 0.0,
            level_fs: 0.0,
        };
    }
    match alg {
        Algorithm::Classic => {
            for s in out.iter_mut().skip(1) {
                s.fairshare = if s.norm_shares > 0.0 {
                    (-s.effectv_usage / s.norm_shares).exp2()
                } else {
                    0.0
                };
            }
        }
        Algorithm::FairTree => {
            for s in out.iter_mut().skip(1) {
                s.level_fs = if s.norm_shares <= 0.0 {
                    0.0
                } else if s.effectv_usage <= 0.0 {
                    f64::INFINITY
                } else {
                    s.norm_shares / s.effectv_usage
                };
            }
            let users = tree.iter().filter(|a| a.user.is_some()).count() as u32;
            let mut walk = Walk {
                rank: users,
                next: users,
                users: f64::from(users.max(1)),
            };
            walk.level(tree, &children, &mut out, children[0].clone(), false);
        }
    }
    Ok(out)
}

/// Fair Tree's depth-first ranking state: `next` counts down from the number of users;
/// `rank` is the rank given to the last user (kept for ties).
struct Walk {
    rank: u32,
    next: u32,
    users: f64,
}

impl Walk {
    /// Ranks the users in and below `siblings`, highest LevelFS first. Ties (the Fair
    /// Tree page's rules): users with equal LevelFS share a rank; sibling accounts with
    /// equal LevelFS have their children merged and ranked as one list; a user tied with
    /// an account shares its rank with that account's first user. `tied`: the first of
    /// `siblings` ties with the user ranked just before them.
    fn level(
        &mut self,
        tree: &[Assoc],
        children: &[Vec<usize>],
        out: &mut [Share],
        mut siblings: Vec<usize>,
        tied: bool,
    ) {
        // Highest LevelFS first; equal ones in tree order (deterministic).
        siblings.sort_by(|&a, &b| out[b].level_fs.total_cmp(&out[a].level_fs).then(a.cmp(&b)));
        let mut k = 0;
        while k < siblings.len() {
            let fs = out[siblings[k]].level_fs;
            let mut end = k + 1;
            while end < siblings.len() && same_fs(fs, out[siblings[end]].level_fs) {
                end += 1;
            }
            let group = &siblings[k..end];
            let mut tie = tied && k == 0;
            let mut merged = Vec::new();
            for &c in group {
                if tree[c].user.is_some() {
                    if !tie {
                        self.rank = self.next;
                    }
                    out[c].fairshare = f64::from(self.rank) / self.users;
                    self.next = self.next.saturating_sub(1);
                    tie = true;
                } else {
                    merged.extend(children[c].iter().copied());
                }
            }
            if !merged.is_empty() {
                self.level(tree, children, out, merged, tie);
            }
            k = end;
        }
    }
}

/// A computed tree with its lookups.
#[derive(Debug, Clone, Default)]
pub struct FairShareTree {
    pub assocs: Vec<Assoc>,
    pub shares: Vec<Share>,
    users: HashMap<AssocKey, usize>,
}

impl FairShareTree {
    /// Builds the tree `root → accounts → users` and computes it with `alg`.
    ///
    /// Accounts whose parent is missing (or would make a cycle) hang under root.
    /// Usage keys and `extra` keys (users of active jobs) without a configured user
    /// association get one with 1 share under their account (root if the account is
    /// unknown or empty), so every user that runs has a factor. An account named
    /// `root` is the root itself.
    pub fn build(
        accounts: &[AccountDef],
        users: &[UserDef],
        ledger: &UsageLedger,
        extra: &[AssocKey],
        alg: Algorithm,
    ) -> FairShareTree {
        let mut assocs = vec![Assoc {
            account: "root".into(),
            user: None,
            parent: None,
            shares: 1,
            usage: 0.0,
        }];
        let mut acct_idx: HashMap<String, usize> = HashMap::new();
        acct_idx.insert("root".into(), 0);
        let defs: BTreeMap<&str, &AccountDef> = accounts
            .iter()
            .filter(|a| a.name != "root")
            .map(|a| (a.name.as_str(), a))
            .collect();
        // Place accounts parent-first; those whose parent chain never reaches a placed
        // account (missing or cyclic) go under root.
        let mut left: Vec<&AccountDef> = defs.values().copied().collect();
        while !left.is_empty() {
            let before = left.len();
            left.retain(|a| {
                let parent = match a.parent.as_deref() {
                    Some(p) if defs.contains_key(p) || p == "root" => p,
                    _ => "root",
                };
                match acct_idx.get(parent) {
                    Some(&pi) => {
                        acct_idx.insert(a.name.clone(), assocs.len());
                        assocs.push(Assoc {
                            account: a.name.clone(),
                            user: None,
                            parent: Some(pi),
                            shares: a.shares,
                            usage: 0.0,
                        });
                        false
                    }
                    None => true,
                }
            });
            if left.len() == before {
                // A cycle: break it by hanging the first remaining account on root.
                let a = left.remove(0);
                acct_idx.insert(a.name.clone(), assocs.len());
                assocs.push(Assoc {
                    account: a.name.clone(),
                    user: None,
                    parent: Some(0),
                    shares: a.shares,
                    usage: 0.0,
                });
            }
        }
        let mut user_idx: HashMap<AssocKey, usize> = HashMap::new();
        let mut add_user = |assocs: &mut Vec<Assoc>, account: &str, user: &str, shares: u32| {
            let account = if acct_idx.contains_key(account) {
                account
            } else {
                "root"
            };
            let key = (account.to_string(), user.to_string());
            if user_idx.contains_key(&key) {
                return;
            }
            user_idx.insert(key, assocs.len());
            assocs.push(Assoc {
                account: account.to_string(),
                user: Some(user.to_string()),
                parent: Some(acct_idx[account]),
                shares,
                usage: 0.0,
            });
        };
        for u in users {
            add_user(&mut assocs, &u.account, &u.user, u.shares);
        }
        for (a, u) in ledger.usage.keys().chain(extra.iter()) {
            add_user(&mut assocs, a, u, 1);
        }
        // Usage of an unknown account's user was filed under root above.
        let mut users_map = user_idx;
        for ((a, u), v) in &ledger.usage {
            let key = Self::resolve(&users_map, a, u);
            if let Some(&i) = key.and_then(|k| users_map.get(&k)) {
                assocs[i].usage += *v;
            }
        }
        // Children must follow parents: users were appended after all accounts.
        let shares = compute(&assocs, alg).unwrap_or_default();
        users_map.shrink_to_fit();
        FairShareTree {
            assocs,
            shares,
            users: users_map,
        }
    }

    fn resolve(map: &HashMap<AssocKey, usize>, account: &str, user: &str) -> Option<AssocKey> {
        let k = (account.to_string(), user.to_string());
        if map.contains_key(&k) {
            return Some(k);
        }
        let r = ("root".to_string(), user.to_string());
        map.contains_key(&r).then_some(r)
    }

    /// The FairShare factor in [0, 1] of `user` charging `account` (root when empty
    /// or unknown); 1.0 for an association the tree does not hold.
    pub fn factor(&self, account: &str, user: &str) -> f64 {
        let account = if account.is_empty() { "root" } else { account };
        Self::resolve(&self.users, account, user)
            .and_then(|k| self.users.get(&k))
            .and_then(|&i| self.shares.get(i))
            .map_or(1.0, |s| s.fairshare.clamp(0.0, 1.0))
    }

    /// The association key usage of `user` charging `account` is recorded under.
    pub fn key_of(account: &str, user: &str) -> AssocKey {
        let account = if account.is_empty() { "root" } else { account };
        (account.to_string(), user.to_string())
    }

    /// Rows in sshare's order: depth-first, each account followed by its users and
    /// then its sub-accounts (as `sshare` lists them), in name order.
    pub fn display_order(&self) -> Vec<usize> {
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); self.assocs.len()];
        for (i, a) in self.assocs.iter().enumerate().skip(1) {
            if let Some(p) = a.parent {
                children[p].push(i);
            }
        }
        for c in children.iter_mut() {
            c.sort_by(|&x, &y| {
                let (a, b) = (&self.assocs[x], &self.assocs[y]);
                (a.user.is_none(), &a.account, &a.user).cmp(&(
                    b.user.is_none(),
                    &b.account,
                    &b.user,
                ))
            });
        }
        let mut out = Vec::with_capacity(self.assocs.len());
        let mut stack = vec![0usize];
        while let Some(i) = stack.pop() {
            out.push(i);
            for &c in children[i].iter().rev() {
                stack.push(c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
