//! The accounting policy in the controller (cf. slurmctld/job_mgr.c `_valid_job_assoc`,
//! acct_policy.c `acct_policy_validate`, and slurmdbd's association handling): the
//! association tree, which `AccountingStorageEnforce` is in force, the account/QOS a
//! job runs under, submit-time refusals, sacctmgr changes, and the TRES-minutes used
//! that `GrpTRESMins` is checked against.
//!
//! Enforcement: `accounting_storage_enforce` in the config wins. Without it, nothing is
//! enforced while the tree is the initial one (root account, root user, QOS `normal`),
//! so personal mode and a fresh install need no accounting set-up; once an account or
//! user has been added with sacctmgr, `associations,limits,qos` apply, as on a Slurm
//! cluster whose admin manages accounts.
//!
//! Invariant: `assoc` always passes `AssocTree::check`; a change is applied to a copy
//! and only a copy that passes replaces it.

use super::state::{Caller, Cluster};
use crate::model::acct_ops::{self, AcctOp, Outcome};
use crate::model::assoc::{Account, AdminLevel, AssocTree, Enforce, UserAssoc};
use crate::model::{Job, TimeLimit};
use crate::proto::SlurmError;
use crate::sched::limits::{LimitState, Policy};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The accounting sub-state of [`Cluster`]: the association tree and its enforcement,
/// the usage ledger and what limits and fair-share derive from it, and billing. Owned
/// by this module (sacctmgr changes, limits, usage accrual); the scheduler borrows it
/// apart from the jobs and nodes.
pub struct Accounting {
    /// The one usage ledger (fair-share RawUsage, and the TRES-minutes and wall time
    /// GrpTRESMins/GrpWall are checked against), charged by running jobs at each
    /// accounting tick and at their end; persisted.
    pub ledger: crate::sched::fairshare::UsageLedger,
    /// The last fair-share tree computed, and the second it was computed for (reused
    /// by submissions within that second).
    pub(super) fs_cache:
        std::cell::RefCell<Option<(i64, std::sync::Arc<crate::sched::fairshare::FairShareTree>)>>,
    /// Accounts, users, associations and QOS (`ctld::acct`, sacctmgr).
    pub assoc: crate::model::assoc::AssocTree,
    /// `accounting_storage_enforce` as configured; `None` = automatic (`ctld::acct`).
    pub enforce_cfg: Option<crate::model::assoc::Enforce>,
    /// The limits' view of `ledger` (TRES-minutes per association, account and QOS,
    /// running jobs' usage up to the last refresh included), refreshed by each
    /// scheduling pass (`ctld::acct`). Derived, never persisted.
    pub used_mins: crate::sched::limits::UsedMins,
    /// Fair-share factors of the pending jobs' associations, refreshed by each
    /// scheduling pass, when a QOS enforces a UsageThreshold (`ctld::acct`).
    pub usage_threshold_factors: Option<std::collections::HashMap<(String, String), f64>>,
    /// Partition QOS by partition name, from the partitions' `qos` (for the limits).
    pub partition_qos: std::collections::HashMap<String, String>,
    /// How jobs are billed: the partitions' `TRESBillingWeights` and MAX_TRES. The
    /// one source of every `billing` figure (limits, usage ledger, job records).
    pub billing: crate::model::billing::BillingTable,
}

impl Cluster {
    /// The `AccountingStorageEnforce` in force (see the module docs).
    pub fn enforce(&self) -> Enforce {
        self.acct.enforce_cfg.unwrap_or_else(|| {
            if self.acct.assoc.is_defined() {
                Enforce {
                    associations: true,
                    limits: true,
                    qos: true,
                    safe: false,
                }
            } else {
                Enforce::default()
            }
        })
    }

    /// What the scheduler needs to apply limits, or `None` when limits are not
    /// enforced.
    pub fn limits_policy(&self) -> Option<Policy<'_>> {
        let enforce = self.enforce();
        enforce.limits.then_some(Policy {
            tree: &self.acct.assoc,
            enforce,
            used: &self.acct.used_mins,
            fairshare: self.acct.usage_threshold_factors.as_ref(),
            partition_qos: Some(&self.acct.partition_qos).filter(|m| !m.is_empty()),
            billing: Some(&self.acct.billing),
        })
    }

    /// The fair-share factor of each pending job's `(account, user)` at `now`, for
    /// QOS `UsageThreshold`; `None` (and no fair-share work) unless some QOS has the
    /// flag EnforceUsageThreshold and a threshold.
    pub(super) fn threshold_factors(
        &self,
        now: i64,
    ) -> Option<std::collections::HashMap<(String, String), f64>> {
        use crate::model::assoc::QosFlag;
        let any = self
            .acct
            .assoc
            .qos
            .values()
            .any(|q| q.has_flag(QosFlag::EnforceUsageThreshold) && q.usage_threshold.is_some());
        if !any {
            return None;
        }
        let tree = self.fairshare_tree(now, false);
        Some(
            self.jobs
                .values()
                .filter(|j| j.state == crate::model::JobState::Pending)
                .map(|j| {
                    (
                        (j.account.clone(), j.user.clone()),
                        tree.factor(&j.account, &j.user),
                    )
                })
                .collect(),
        )
    }

    /// Once accounting is set up (a defined tree or a configured enforcement), fills a
    /// new job's account (the user's DefaultAccount when `--account` is not given) and
    /// QOS (the association's default when `--qos` is not given), and
    /// refuses it as Slurm does: `InvalidAccount` when associations are enforced and
    /// the user has none for the account (and partition); `InvalidQos` when QOS are
    /// enforced and the QOS does not exist or the association may not use it;
    /// `AccountingPolicy` when limits are enforced and it would pass a submit limit
    /// (or, with the QOS flag DenyOnLimit, any limit it alone passes). A job that
    /// names no time limit gets at most the smallest MaxWall of its QOS and
    /// association.
    pub fn acct_resolve(&self, job: &mut Job, now: i64) -> Result<(), SlurmError> {
        let e = self.enforce();
        let tree = &self.acct.assoc;
        // An undefined tree (personal mode, a fresh install) changes nothing about a
        // job: its account stays what was asked, as before accounting existed.
        if !tree.is_defined() && self.acct.enforce_cfg.is_none() {
            return Ok(());
        }
        if job.account.is_empty()
            && let Some(d) = tree.default_account(&job.user)
        {
            job.account = d.to_string();
        }
        let assoc = tree.find_assoc(&job.user, &job.account, &job.partition);
        if e.associations && assoc.is_none() {
            return Err(SlurmError::InvalidAccount);
        }
        if job.spec.qos.is_none()
            && let Some(a) = assoc
        {
            job.qos = tree.default_qos(a);
        }
        if e.qos {
            let allowed = match assoc {
                Some(a) => tree.allowed_qos(a),
                None => tree.qos.keys().cloned().collect(),
            };
            if tree.qos(&job.qos).is_none() || !allowed.contains(&job.qos) {
                return Err(SlurmError::InvalidQos);
            }
        }
        if !e.limits {
            return Ok(());
        }
        if job.spec.time_limit.is_none() {
            // The first MaxWall of the job's and its partition's QOS, in precedence.
            let qos_wall = self.limits_policy().and_then(|p| {
                p.qos_order(&job.qos, &job.partition)
                    .iter()
                    .find_map(|q| q.limits.max_wall_mins)
            });
            let assoc_wall = assoc.and_then(|a| {
                a.limits.max_wall_mins.or_else(|| {
                    tree.parent_chain(&a.account)
                        .iter()
                        .find_map(|x| x.limits.max_wall_mins)
                })
            });
            if let Some(max) = [qos_wall, assoc_wall].into_iter().flatten().min() {
                let over = job
                    .time_limit
                    .secs()
                    .is_none_or(|s| s > u64::from(max) * 60);
                if over {
                    job.time_limit = TimeLimit::Minutes(max);
                }
            }
        }
        if let Some(p) = self.limits_policy() {
            let jobs: Vec<&Job> = self
                .jobs
                .values()
                .filter(|j| j.is_active())
                .map(|j| &**j)
                .collect();
            LimitState::new(p, &jobs, now)
                .submit_check(job)
                .map_err(|_| SlurmError::AccountingPolicy)?;
        }
        Ok(())
    }

    /// Whether `c` (named `user`) may change accounting: root, the controller's owner,
    /// or a user whose AdminLevel is Operator or Administrator.
    pub fn is_acct_admin(&self, c: Caller, user: &str) -> bool {
        self.is_operator(c)
            || self
                .acct
                .assoc
                .user(user)
                .is_some_and(|u| u.admin_level >= AdminLevel::Operator)
    }

    /// Who may act on which jobs for caller `c`: see [`JobManager`].
    pub fn manager(&self, c: Caller) -> JobManager {
        let accounts = match self.groups.user_names.get(&c.uid) {
            Some(name) if self.acct.assoc.has_coordinators() => self
                .acct
                .assoc
                .coord_accounts_of(name)
                .into_iter()
                .collect(),
            _ => HashSet::new(),
        };
        JobManager {
            uid: c.uid,
            operator: self.is_operator(c),
            accounts,
        }
    }

    /// Applies (or, without `commit`, previews) a sacctmgr change for caller `c`
    /// named `user`. Root, the controller's owner and Operators/Administrators may
    /// change anything; a coordinator may change what lies in the accounts they
    /// coordinate ([`coordinator_may`]). Errors: access denied (Slurm's slurmdbd
    /// text), or the change's own refusal; the tree is unchanged then.
    pub fn acct_change(
        &mut self,
        op: &AcctOp,
        commit: bool,
        c: Caller,
        user: &str,
    ) -> Result<Outcome, SlurmError> {
        let denied =
            || SlurmError::Other("Your user doesn't have privilege to perform this action".into());
        let admin = self.is_acct_admin(c, user);
        let coordinator = self
            .acct
            .assoc
            .users
            .get(user)
            .is_some_and(|u| !u.coord_accounts.is_empty());
        if !admin && !coordinator {
            return Err(denied());
        }
        let mut copy = self.acct.assoc.clone();
        let out = acct_ops::apply(&mut copy, op, &self.cluster_name).map_err(SlurmError::Other)?;
        if !admin && !coordinator_may(&self.acct.assoc, &copy, user) {
            return Err(denied());
        }
        if matches!(op, AcctOp::Delete { .. }) {
            self.check_no_active_jobs(&copy)?;
        }
        self.keep_owner_associated(&mut copy, c, user);
        if commit && out.changed {
            self.acct.assoc = copy;
        }
        Ok(out)
    }

    /// The first change that defines the tree of a personal controller (one that runs
    /// as its user, not root) turns enforcement on; its owner, who is that cluster's
    /// administrator as root is a system cluster's, then gets what Slurm's root user
    /// has: an Administrator user with an association under `root`, its default
    /// account. Without it the owner's next `sbatch` would be refused "Invalid
    /// account". Nothing changes when the owner already is a user in `after`.
    fn keep_owner_associated(&self, after: &mut AssocTree, c: Caller, user: &str) {
        use crate::model::assoc::{ROOT, User};
        let owner = c.uid == self.owner_uid && c.uid != 0;
        if !owner || self.acct.assoc.is_defined() || !after.is_defined() {
            return;
        }
        if after.users.contains_key(user) || self.acct.enforce_cfg.is_some() {
            return;
        }
        after.users.insert(
            user.to_string(),
            User {
                name: user.to_string(),
                default_account: ROOT.into(),
                admin_level: AdminLevel::Administrator,
                coord_accounts: Vec::new(),
            },
        );
        after.user_assocs.push(UserAssoc::new(user, ROOT, None));
        after.assign_ids();
    }

    /// Brings the accounts and users declared in the config (`[[accounts]]`) into the
    /// association tree, so that they show in `sacctmgr show account/assoc/user` and
    /// are enforced, limited and charged like accounts added with sacctmgr. Called
    /// once at start, after the tree is loaded from the database.
    ///
    /// Conflict rule: the database wins. An account or user association already in
    /// the tree is kept as it is (sacctmgr changes survive a restart); only what the
    /// tree lacks is added: an account under its configured parent (root when none)
    /// with its configured Fairshare, a user whose DefaultAccount is the first account
    /// that lists them, and each listed user's association (1 share). Removing an
    /// account from the config does not remove it from the tree (`sacctmgr delete
    /// account` does). Returns a note per conflict (for the log) and whether the tree
    /// changed; a merge that would break the tree's invariants changes nothing.
    pub fn merge_config_accounts(&mut self) -> (Vec<String>, bool) {
        use crate::model::assoc::{Account, ROOT, Shares, User, UserAssoc};
        let p = &self.sched_cfg.priority;
        let mut t = self.acct.assoc.clone();
        let mut notes = Vec::new();
        let mut changed = false;
        // Parents first: a configured parent may be declared after its child.
        let mut left: Vec<&crate::sched::fairshare::AccountDef> = p.accounts.iter().collect();
        while !left.is_empty() {
            let before = left.len();
            left.retain(|a| {
                let parent = a.parent.clone().unwrap_or_else(|| ROOT.to_string());
                if let Some(have) = t.accounts.get(&a.name) {
                    if have.parent.as_deref() != Some(parent.as_str())
                        || have.shares != Shares::Raw(a.shares)
                    {
                        notes.push(format!(
                            "account {} differs between the config (parent {parent}, Fairshare {}) and the database (parent {}, Fairshare {}); the database wins",
                            a.name,
                            a.shares,
                            have.parent.as_deref().unwrap_or("-"),
                            have.shares
                        ));
                    }
                    return false;
                }
                if !t.accounts.contains_key(&parent) {
                    return true;
                }
                let mut acct = Account::new(&a.name, Some(&parent));
                acct.shares = Shares::Raw(a.shares);
                t.accounts.insert(a.name.clone(), acct);
                changed = true;
                false
            });
            if left.len() == before {
                for a in &left {
                    notes.push(format!(
                        "account {}: parent {} is not in the tree; not added",
                        a.name,
                        a.parent.as_deref().unwrap_or(ROOT)
                    ));
                }
                break;
            }
        }
        for u in &p.user_assocs {
            if !t.accounts.contains_key(&u.account) {
                continue;
            }
            if !t.users.contains_key(&u.user) {
                t.users.insert(
                    u.user.clone(),
                    User {
                        name: u.user.clone(),
                        default_account: u.account.clone(),
                        admin_level: Default::default(),
                        coord_accounts: Vec::new(),
                    },
                );
                changed = true;
            }
            if t.find_assoc(&u.user, &u.account, "").is_none() {
                let mut a = UserAssoc::new(&u.user, &u.account, None);
                a.shares = Shares::Raw(u.shares);
                t.user_assocs.push(a);
                changed = true;
            }
        }
        if !changed {
            return (notes, false);
        }
        if let Err(e) = t.check() {
            notes.push(format!("config accounts not merged: {e}"));
            return (notes, false);
        }
        t.assign_ids();
        self.acct.assoc = t;
        (notes, true)
    }

    /// Refuses a deletion that would take the association of an active (pending,
    /// running, suspended) job away, as slurmdbd does (as_mysql_assoc.c
    /// `_check_jobs_before_remove_assoc`): the error lists the jobs, one
    /// `JobID = … C = … A = … U = …` line each.
    fn check_no_active_jobs(
        &self,
        after: &crate::model::assoc::AssocTree,
    ) -> Result<(), SlurmError> {
        let mut lines: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.is_active())
            .filter(|j| {
                self.acct
                    .assoc
                    .find_assoc(&j.user, &j.account, &j.partition)
                    .is_some()
                    && after
                        .find_assoc(&j.user, &j.account, &j.partition)
                        .is_none()
            })
            .map(|j| {
                format!(
                    "  JobID = {:<10} C = {:<10.10} A = {:<10.10} U = {:<9.9}",
                    j.id, self.cluster_name, j.account, j.user
                )
            })
            .collect();
        if lines.is_empty() {
            return Ok(());
        }
        lines.sort();
        Err(SlurmError::Other(format!(
            " Error with request: Job(s) active, cancel job(s) before remove\n{}",
            lines.join("\n")
        )))
    }

    /// Brings the limits' view of the usage ledger (`used_mins`) to `now`: recorded
    /// usage plus what running jobs used since the last accounting tick, so a running
    /// job's usage counts against GrpTRESMins/GrpWall before it ends. Only computed
    /// while limits are enforced.
    pub(super) fn refresh_used(&mut self, now: i64) {
        if !self.enforce().limits {
            return;
        }
        let p = &self.sched_cfg.priority;
        let mut ledger = self.acct.ledger.clone();
        ledger.accrue(&self.running_usage(), now, p.decay_half_life, p.usage_reset);
        self.acct.used_mins =
            crate::sched::limits::UsedMins::from_ledger(&ledger, &self.acct.assoc);
    }

    /// Folds the TRES-minute usage a controller from before the single usage ledger
    /// kept apart (decayed to `at`) into the ledger: each user association's TRES
    /// and wall minutes, and each QOS's, decayed to the ledger's time. Billing is left
    /// out for associations (the ledger has always held it as fair-share usage).
    pub fn fold_legacy_usage(&mut self, old: &crate::sched::limits::UsedMins, at: i64) {
        let l = &mut self.acct.ledger;
        // Minutes to the ledger's seconds, decayed from `at` to the ledger's time.
        let f = crate::sched::fairshare::decay(
            60.0,
            at,
            l.decayed_at,
            self.sched_cfg.priority.decay_half_life,
        );
        let key = |user: &str, account: &str| {
            crate::sched::fairshare::FairShareTree::key_of(account, user)
        };
        for ((user, account), m) in &old.users {
            let t = l.tres.entry(key(user, account)).or_default();
            for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "billing") {
                *t.entry(k.clone()).or_insert(0.0) += v * f;
            }
        }
        for ((user, account), w) in &old.wall_users {
            *l.wall.entry(key(user, account)).or_insert(0.0) += w * f;
        }
        for (name, m) in &old.qos {
            let q = l.qos.entry(name.clone()).or_default();
            for (k, v) in m {
                if k == "billing" {
                    q.billing += v * f;
                } else {
                    *q.tres.entry(k.clone()).or_insert(0.0) += v * f;
                }
            }
        }
        for (name, w) in &old.wall_qos {
            l.qos.entry(name.clone()).or_default().wall += w * f;
        }
    }

    /// Ends (TIMEOUT, as Slurm's `acct_policy_job_time_out`) every running job a usage
    /// limit has caught up with: its group's GrpTRESMins or GrpWall reached, or its
    /// own MaxTRESMinsPerJob passed. Checked after each accounting tick; never under
    /// `safe` enforcement.
    pub(super) fn usage_time_outs(&mut self, now: i64, fx: &mut super::state::Effects) {
        let e = self.enforce();
        if !e.limits || e.safe || !self.acct.assoc.has_usage_limits() {
            return;
        }
        self.refresh_used(now);
        let Some(p) = self.limits_policy() else {
            return;
        };
        let active: Vec<&Job> = self
            .jobs
            .values()
            .filter(|j| j.is_active())
            .map(|j| &**j)
            .collect();
        let st = LimitState::new(p, &active, now);
        let out: Vec<(u32, String)> = active
            .iter()
            .filter(|j| !j.completing && j.het.is_none_or(|h| h.offset == 0))
            .filter_map(|j| Some((j.id, st.time_out(j, now)?)))
            .collect();
        for (id, why) in out {
            tracing::info!(job = id, "timed out: {why}");
            self.time_out_job(id, now, fx);
        }
    }
}

/// Who may act on which jobs (scancel, hold, release, update, requeue, step
/// signals): the job's owner, an operator, or a coordinator of the job's account or
/// an account above it (Slurm's `assoc_mgr_is_user_acct_coord`). A coordinator acts
/// as the owner would: operator-only actions (an admin hold, Priority=) stay the
/// operators'.
#[derive(Debug, Clone)]
pub struct JobManager {
    uid: u32,
    operator: bool,
    /// The accounts the caller coordinates, sub-accounts included.
    accounts: HashSet<String>,
}

impl JobManager {
    /// Whether the caller may manage `j`.
    pub fn may(&self, j: &Job) -> bool {
        self.operator || j.uid == self.uid || self.accounts.contains(&j.account)
    }

    /// Whether the caller is an operator.
    pub fn operator(&self) -> bool {
        self.operator
    }
}

/// Whether coordinator `user` may make the change that turns `before` into `after`
/// (cf. slurmdbd's as_mysql_* checks for non-admins): every association it adds,
/// removes or changes lies in an account `user` coordinates in `before` (for an
/// account's own association, its parent: a coordinator does not raise their own
/// account's limits); a new user gets no AdminLevel; a changed user keeps their
/// AdminLevel, and a new DefaultAccount or coordinator right concerns coordinated
/// accounts only; QOS and clusters stay as they are.
pub fn coordinator_may(before: &AssocTree, after: &AssocTree, user: &str) -> bool {
    let coord = |a: &str| before.coordinates(user, a);
    let parent_coord =
        |a: Option<&Account>| a.and_then(|a| a.parent.as_deref()).is_some_and(&coord);
    if before.qos != after.qos || before.clusters != after.clusters {
        return false;
    }
    let names: BTreeSet<&String> = before
        .accounts
        .keys()
        .chain(after.accounts.keys())
        .collect();
    for n in names {
        let (b, a) = (before.accounts.get(n), after.accounts.get(n));
        if b != a && !(b.is_none_or(|_| parent_coord(b)) && a.is_none_or(|_| parent_coord(a))) {
            return false;
        }
    }
    let users: BTreeSet<&String> = before.users.keys().chain(after.users.keys()).collect();
    for n in users {
        match (before.users.get(n), after.users.get(n)) {
            (None, Some(u)) if u.admin_level != AdminLevel::None || !coord(&u.default_account) => {
                return false;
            }
            (Some(b), Some(a)) if b != a => {
                if a.admin_level != b.admin_level {
                    return false;
                }
                if a.default_account != b.default_account
                    && !(coord(&a.default_account) && coord(&b.default_account))
                {
                    return false;
                }
                let changed = b
                    .coord_accounts
                    .iter()
                    .filter(|x| !a.coord_accounts.contains(x))
                    .chain(
                        a.coord_accounts
                            .iter()
                            .filter(|x| !b.coord_accounts.contains(x)),
                    );
                if changed.into_iter().any(|x| !coord(x)) {
                    return false;
                }
            }
            // A removed user went with their associations, checked below.
            _ => {}
        }
    }
    let key = |a: &UserAssoc| (a.user.clone(), a.account.clone(), a.partition.clone());
    let index = |t: &AssocTree| -> BTreeMap<_, UserAssoc> {
        t.user_assocs.iter().map(|a| (key(a), a.clone())).collect()
    };
    let (b, a) = (index(before), index(after));
    let keys: BTreeSet<_> = b.keys().chain(a.keys()).collect();
    keys.into_iter()
        .filter(|k| b.get(*k) != a.get(*k))
        .all(|k| coord(&k.1))
}

#[cfg(test)]
mod tests;
