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
use crate::model::assoc::{AdminLevel, Enforce};
use crate::model::job::Allocation;
use crate::model::{Job, TimeLimit};
use crate::proto::SlurmError;
use crate::sched::limits::{LimitState, Policy};

impl Cluster {
    /// The `AccountingStorageEnforce` in force (see the module docs).
    pub fn enforce(&self) -> Enforce {
        self.enforce_cfg.unwrap_or_else(|| {
            if self.assoc.is_defined() {
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
            tree: &self.assoc,
            enforce,
            used: &self.used_mins,
            fairshare: self.usage_threshold_factors.as_ref(),
            partition_qos: Some(&self.partition_qos).filter(|m| !m.is_empty()),
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
        let tree = &self.assoc;
        // An undefined tree (personal mode, a fresh install) changes nothing about a
        // job: its account stays what was asked, as before accounting existed.
        if !tree.is_defined() && self.enforce_cfg.is_none() {
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
                .assoc
                .user(user)
                .is_some_and(|u| u.admin_level >= AdminLevel::Operator)
    }

    /// Applies (or, without `commit`, previews) a sacctmgr change for caller `c`
    /// named `user`. Errors: access denied (Slurm's slurmdbd text), or the change's
    /// own refusal; the tree is unchanged then.
    pub fn acct_change(
        &mut self,
        op: &AcctOp,
        commit: bool,
        c: Caller,
        user: &str,
    ) -> Result<Outcome, SlurmError> {
        if !self.is_acct_admin(c, user) {
            return Err(SlurmError::Other(
                "Your user doesn't have privilege to perform this action".into(),
            ));
        }
        let mut copy = self.assoc.clone();
        let out = acct_ops::apply(&mut copy, op, &self.cluster_name).map_err(SlurmError::Other)?;
        if matches!(op, AcctOp::Delete { .. }) {
            self.check_no_active_jobs(&copy)?;
        }
        if commit && out.changed {
            self.assoc = copy;
        }
        Ok(out)
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
        let mut t = self.assoc.clone();
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
        self.assoc = t;
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
                self.assoc
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

    /// Adds what a job that ran `ran_secs` on `alloc` used, in TRES-minutes, to its
    /// association, accounts and QOS (scaled by the QOS UsageFactor).
    pub(super) fn record_assoc_usage(
        &mut self,
        id: u32,
        alloc: &Allocation,
        ran_secs: u64,
        now: i64,
    ) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        if !self.assoc.is_defined() && self.enforce_cfg.is_none() {
            return;
        }
        let factor = self.assoc.qos(&j.qos).map_or(1.0, |q| q.usage_factor);
        let (user, account, qos) = (j.user.clone(), j.account.clone(), j.qos.clone());
        let part_qos = self.partition_qos.get(&j.partition).cloned();
        self.decay_used(now);
        let tres = crate::sched::limits::alloc_tres(alloc);
        self.used_mins.record(
            &self.assoc,
            (&user, &account, &qos),
            &tres,
            ran_secs as f64 / 60.0 * factor,
        );
        self.used_mins
            .record_wall(&self.assoc, (&user, &account, &qos), ran_secs as f64 / 60.0);
        if let Some(pq) = part_qos
            && pq != qos
            && self.assoc.qos(&pq).is_some()
        {
            self.used_mins.record_qos(
                &pq,
                &tres,
                ran_secs as f64 / 60.0 * factor,
                ran_secs as f64 / 60.0,
            );
        }
        self.used_dirty = true;
    }

    /// Decays the TRES-minute usage to `now` with PriorityDecayHalfLife.
    pub(super) fn decay_used(&mut self, now: i64) {
        if self.used_mins_at == 0 || now <= self.used_mins_at {
            self.used_mins_at = self.used_mins_at.max(now);
            return;
        }
        let half = self.sched_cfg.priority.decay_half_life;
        let f = crate::sched::priority::decay(1.0, self.used_mins_at, now, half);
        if f < 1.0 {
            self.used_mins.scale(f);
        }
        self.used_mins_at = now;
    }
}

#[cfg(test)]
mod tests;
