//! Advanced reservations in the controller: create, update and delete with Slurm's
//! checks and errors, the clock-driven life cycle (DAILY/WEEKLY roll forward, expiry,
//! PURGE_COMP), the submit-time check of `--reservation`, and the node states
//! (MAINT, RESERVED) that queries show (cf. src/slurmctld/reservation.c).
//!
//! The scheduler side (which nodes a job may use, and when) is `sched::resv`.
//!
//! Invariant: every reservation in [`Resvs::list`] has `start < end` and names only
//! configured nodes; a change marks the set dirty, and the actor writes the whole set
//! to the store before it answers the request that made the change.

use super::state::{Caller, Cluster, Effects};
use crate::model::reservation::{Reservation, ResvFlags, ResvSpec};
use crate::model::{HoldKind, Job, JobState, Node, Reason, hostlist};
use crate::proto::SlurmError;

/// The reservations of the cluster.
#[derive(Debug, Default)]
pub struct Resvs {
    /// Live reservations (active and future), by creation order.
    pub list: Vec<Reservation>,
    /// Changed since the store last saw the set.
    dirty: bool,
    /// Used windows (expired, rolled forward or deleted) not yet given to the store.
    history: Vec<Reservation>,
    /// When the life cycle last ran (a window opening since then needs a pass).
    clock: i64,
}

impl Resvs {
    /// Reservations loaded from the store.
    pub fn restore(&mut self, list: Vec<Reservation>) {
        self.list = list;
    }

    /// The set, if it changed since the last call (for the store).
    pub fn take_dirty(&mut self) -> Option<Vec<Reservation>> {
        std::mem::take(&mut self.dirty).then(|| self.list.clone())
    }

    /// Used windows to record for sreport.
    pub fn take_history(&mut self) -> Vec<Reservation> {
        std::mem::take(&mut self.history)
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|r| r.name == name)
    }
}

/// What a reservation holds (see `Cluster::resv_resources`).
#[derive(Debug, Default)]
struct Held {
    nodes: Vec<String>,
    /// Per node of a core reservation; empty for whole nodes.
    node_cpus: Vec<u32>,
    cpus: u32,
    cores: u32,
    licenses: Vec<(String, u32)>,
}

fn err(s: &str) -> SlurmError {
    SlurmError::Other(s.to_string())
}

/// Whether a user name exists on this host.
fn user_exists(name: &str) -> bool {
    matches!(nix::unistd::User::from_name(name), Ok(Some(_)))
}

/// The window `[start, end)` a spec asks for, from StartTime with EndTime or Duration.
fn window(spec: &ResvSpec, old: Option<&Reservation>, now: i64) -> Result<(i64, i64), SlurmError> {
    let start = spec.start.or(old.map(|r| r.start)).unwrap_or(now);
    let end = match (spec.end, spec.duration) {
        (Some(e), _) => e,
        (None, Some(d)) => start.saturating_add(d),
        // Moving the start keeps the duration.
        (None, None) => match old {
            Some(r) => start + (r.end - r.start),
            None => return Err(SlurmError::InvalidTimeValue),
        },
    };
    if end <= start {
        return Err(SlurmError::InvalidTimeValue);
    }
    Ok((start, end))
}

impl Cluster {
    /// Resolves `Nodes=` / `NodeCnt=` / `PartitionName=` to node names in configuration
    /// order. `NodeCnt` takes the first nodes that are free for the window (no other
    /// reservation, unless OVERLAP; no running job, unless IGNORE_JOBS).
    fn resv_nodes(
        &self,
        spec: &ResvSpec,
        flags: &ResvFlags,
        window: (i64, i64),
        skip: Option<&str>,
    ) -> Result<Vec<String>, SlurmError> {
        let part_nodes: Option<&Vec<String>> = match &spec.partition {
            Some(p) => Some(
                &self
                    .partitions
                    .iter()
                    .find(|x| &x.name == p)
                    .ok_or(SlurmError::InvalidPartition)?
                    .nodes,
            ),
            None => None,
        };
        let pool: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| part_nodes.is_none_or(|p| p.contains(&n.name)))
            .collect();
        if let Some(expr) = &spec.nodes {
            if expr.eq_ignore_ascii_case("ALL") {
                return Ok(pool.iter().map(|n| n.name.clone()).collect());
            }
            let names = hostlist::expand(expr).map_err(|_| SlurmError::InvalidNodeName)?;
            if names.is_empty()
                || names
                    .iter()
                    .any(|n| !self.nodes.iter().any(|x| &x.name == n))
            {
                return Err(SlurmError::InvalidNodeName);
            }
            // Configuration order, no duplicates.
            return Ok(self
                .nodes
                .iter()
                .filter(|n| names.contains(&n.name))
                .map(|n| n.name.clone())
                .collect());
        }
        let want = match spec.node_cnt {
            Some(0) => return Err(SlurmError::InvalidNodeCount),
            Some(k) => k as usize,
            None if spec.partition.is_some() => {
                return Ok(pool.iter().map(|n| n.name.clone()).collect());
            }
            None => {
                return Err(err(
                    "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified",
                ));
            }
        };
        let free: Vec<String> = pool
            .iter()
            .filter(|n| {
                flags.overlap
                    || !self
                        .resv
                        .list
                        .iter()
                        .filter(|r| Some(r.name.as_str()) != skip)
                        .any(|r| r.blocks(&n.name, window.0, window.1))
            })
            .filter(|n| flags.ignore_jobs || !self.node_busy(&n.name, window.0))
            .map(|n| n.name.clone())
            .collect();
        if free.len() < want {
            return Err(err("Requested nodes are busy"));
        }
        Ok(free.into_iter().take(want).collect())
    }

    /// What a reservation made from `spec` holds: its nodes, the CPUs it holds on
    /// each for a core reservation (`CoreCnt=` as one total spread over the nodes or
    /// one count per node, `TRES=cpu=`; cores are the nodes' cores, CPUs their
    /// threads), and its licenses. On update (`old`), what the spec does not name
    /// stays. Errors are Slurm's: an invalid core count or license, busy nodes
    /// (other reservations' cores and, unless IGNORE_JOBS, running jobs' CPUs leave
    /// too few), or nothing to reserve.
    fn resv_resources(
        &self,
        spec: &ResvSpec,
        flags: &ResvFlags,
        window: (i64, i64),
        skip: Option<&str>,
        old: Option<&Reservation>,
    ) -> Result<Held, SlurmError> {
        let bad_cores = || err("Core count for reservation is invalid");
        let licenses = match &spec.licenses {
            Some(l) => l.clone(),
            None => old.map(|r| r.licenses.clone()).unwrap_or_default(),
        };
        self.check_resv_licenses(&licenses, window, skip)?;
        let node_spec = spec.nodes.is_some() || spec.node_cnt.is_some() || spec.partition.is_some();
        // Core counts: asked now, else kept from a core reservation being updated (per
        // node while its nodes stay, as a total when new nodes are named).
        let old_cores = old.filter(|r| !r.node_cpus.is_empty());
        let cores: Option<Vec<u32>> = match (&spec.core_cnt, spec.cpu_cnt, old_cores) {
            (Some(c), _, _) => Some(c.clone()),
            (None, Some(_), _) => None,
            (None, None, Some(r)) if node_spec => Some(vec![r.core_count()]),
            (None, None, Some(r)) => Some(
                r.nodes
                    .iter()
                    .zip(&r.node_cpus)
                    .map(|(n, c)| c / self.threads_of(n))
                    .collect(),
            ),
            (None, None, None) => None,
        };
        let partial = cores.is_some() || spec.cpu_cnt.is_some();
        let nodes: Vec<String> = if node_spec {
            self.resv_nodes(spec, flags, window, skip)?
        } else {
            old.map(|r| r.nodes.clone()).unwrap_or_default()
        };
        if !partial && nodes.is_empty() {
            if licenses.is_empty() {
                return Err(err(
                    "CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified",
                ));
            }
            return Ok(Held {
                licenses,
                ..Held::default()
            });
        }
        if !partial {
            let cpus = self.resv_cpus(&nodes);
            let cores = nodes.iter().map(|n| self.cores_of(n)).sum();
            return Ok(Held {
                nodes,
                cpus,
                cores,
                node_cpus: Vec::new(),
                licenses,
            });
        }
        // CPUs each node can still give the reservation during its window.
        let avail = |n: &str| -> u32 {
            let Some(node) = self.nodes.iter().find(|x| x.name == n) else {
                return 0;
            };
            let mut left = node.cpus;
            for r in self
                .resv
                .list
                .iter()
                .filter(|r| Some(r.name.as_str()) != skip && r.overlaps(window.0, window.1))
            {
                if let Some(c) = r.cpus_on(n) {
                    left = left.saturating_sub(c);
                } else if r.nodes.iter().any(|x| x == n) && !(flags.overlap || r.flags.overlap) {
                    left = 0;
                }
            }
            if !flags.ignore_jobs {
                left = left.saturating_sub(self.busy_cpus(n, window.0, skip));
            }
            left
        };
        let mut node_cpus: Vec<u32> = Vec::new();
        let mut picked: Vec<String> = Vec::new();
        let threads = |n: &str| self.threads_of(n);
        match (&cores, spec.cpu_cnt) {
            (Some(per), _) if !nodes.is_empty() => {
                let counts: Vec<u32> = if per.len() == nodes.len() {
                    per.clone()
                } else if per.len() == 1 {
                    let k = nodes.len() as u32;
                    let (each, rest) = (per[0] / k, per[0] % k);
                    (0..k).map(|i| each + u32::from(i < rest)).collect()
                } else {
                    return Err(bad_cores());
                };
                if counts.contains(&0) {
                    return Err(bad_cores());
                }
                for (n, c) in nodes.iter().zip(counts) {
                    let want = c.saturating_mul(threads(n));
                    if want > self.cpus_of(n) {
                        return Err(bad_cores());
                    }
                    if want > avail(n) {
                        return Err(err("Requested nodes are busy"));
                    }
                    picked.push(n.clone());
                    node_cpus.push(want);
                }
            }
            (Some(per), _) if per.len() != 1 => return Err(bad_cores()),
            _ => {
                // A total: CPUs (TRES=cpu) or cores, taken from the nodes given or, in
                // configuration order, from any that can give them.
                let pool: Vec<String> = if nodes.is_empty() {
                    self.nodes.iter().map(|n| n.name.clone()).collect()
                } else {
                    nodes.clone()
                };
                let mut left_cores = cores.as_ref().map(|c| c[0]);
                let mut left_cpus = spec.cpu_cnt.filter(|_| cores.is_none());
                for n in &pool {
                    let th = threads(n);
                    let free = avail(n) / th * th;
                    let take = match (left_cores, left_cpus) {
                        (Some(c), _) => c.saturating_mul(th).min(free),
                        (None, Some(c)) => c.div_ceil(th).saturating_mul(th).min(free),
                        (None, None) => 0,
                    };
                    if take == 0 {
                        continue;
                    }
                    picked.push(n.clone());
                    node_cpus.push(take);
                    left_cores = left_cores.map(|c| c - take / th);
                    left_cpus = left_cpus.map(|c| c.saturating_sub(take));
                    if left_cores.unwrap_or(0) == 0 && left_cpus.unwrap_or(0) == 0 {
                        break;
                    }
                }
                if left_cores.unwrap_or(0) > 0 || left_cpus.unwrap_or(0) > 0 {
                    return Err(err("Requested nodes are busy"));
                }
            }
        }
        let cores = picked
            .iter()
            .zip(&node_cpus)
            .map(|(n, c)| c / threads(n))
            .sum();
        Ok(Held {
            cpus: node_cpus.iter().sum(),
            cores,
            nodes: picked,
            node_cpus,
            licenses,
        })
    }

    /// Refuses licenses the cluster does not have, or more than it has once the
    /// other reservations overlapping `window` took theirs (ESLURM_INVALID_LICENSES).
    fn check_resv_licenses(
        &self,
        licenses: &[(String, u32)],
        window: (i64, i64),
        skip: Option<&str>,
    ) -> Result<(), SlurmError> {
        for (name, count) in licenses {
            let Some((_, total)) = self.licenses.iter().find(|(n, _)| n == name) else {
                return Err(err("Invalid license specification"));
            };
            let taken: u32 = self
                .resv
                .list
                .iter()
                .filter(|r| Some(r.name.as_str()) != skip && r.overlaps(window.0, window.1))
                .map(|r| r.license(name))
                .sum();
            if taken.saturating_add(*count) > *total {
                return Err(err("Invalid license specification"));
            }
        }
        Ok(())
    }

    fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// CPUs of node `name`.
    fn cpus_of(&self, name: &str) -> u32 {
        self.node(name).map_or(0, |n| n.cpus)
    }

    /// Threads per core of node `name` (at least 1).
    fn threads_of(&self, name: &str) -> u32 {
        self.node(name).map_or(1, |n| n.threads_per_core.max(1))
    }

    /// Cores of node `name` (its CPUs over its threads per core).
    fn cores_of(&self, name: &str) -> u32 {
        self.cpus_of(name) / self.threads_of(name)
    }

    /// CPUs held on `node` by running jobs that may still run at `t` (by their time
    /// limits), other than the jobs of reservation `skip`.
    fn busy_cpus(&self, node: &str, t: i64, skip: Option<&str>) -> u32 {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running || j.completing)
            .filter(|j| skip.is_none() || j.spec.reservation.as_deref() != skip)
            .filter(|j| match (j.start_time, j.time_limit.secs()) {
                (Some(s), Some(l)) => s + l as i64 > t,
                _ => true,
            })
            .filter_map(|j| j.alloc.as_ref())
            .flat_map(|a| a.nodes.iter().zip(&a.cpus))
            .filter(|(n, _)| *n == node)
            .map(|(_, c)| *c)
            .sum()
    }

    /// Whether a job holding `node` may still run at `t` (by its time limit).
    fn node_busy(&self, node: &str, t: i64) -> bool {
        self.jobs.values().any(|j| {
            (j.state == JobState::Running || j.completing)
                && j.alloc
                    .as_ref()
                    .is_some_and(|a| a.nodes.iter().any(|n| n == node))
                && match (j.start_time, j.time_limit.secs()) {
                    (Some(s), Some(l)) => s + l as i64 > t,
                    _ => true,
                }
        })
    }

    /// Refuses `Accounts=` naming an account the association tree does not have, with
    /// Slurm's ESLURM_INVALID_ACCOUNT (reservation.c `_build_account_list`), before any
    /// node is looked at. Without accounting (the initial tree and no
    /// `accounting_storage_enforce`) any name is taken, as Slurm does without
    /// association enforcement.
    fn check_resv_accounts(&self, spec: &ResvSpec) -> Result<(), SlurmError> {
        let Some(a) = &spec.accounts else {
            return Ok(());
        };
        if !self.acct.assoc.is_defined() && !self.enforce().associations {
            return Ok(());
        }
        match a
            .names()
            .iter()
            .find(|n| self.acct.assoc.account(n).is_none())
        {
            Some(bad) => {
                tracing::info!(account = %bad, "reservation request has an invalid account");
                Err(SlurmError::InvalidAccount)
            }
            None => Ok(()),
        }
    }

    /// Checks a reservation about to be stored: users exist, nodes are not held by
    /// another reservation in the window (unless either has OVERLAP), and no running
    /// job is on them (unless IGNORE_JOBS).
    fn check_resv(&self, r: &Reservation, skip: Option<&str>) -> Result<(), SlurmError> {
        if r.users.is_empty() && r.accounts.is_empty() {
            return Err(err("Either Users or Accounts must be specified"));
        }
        if r.users.iter().any(|u| !user_exists(u)) {
            return Err(err("Invalid user id"));
        }
        if !r.flags.overlap {
            // Core reservations may share nodes (their CPUs were counted when they
            // were resolved); a whole-node one shares with nobody.
            let clash = self
                .resv
                .list
                .iter()
                .filter(|o| Some(o.name.as_str()) != skip && !o.flags.overlap)
                .filter(|o| o.node_cpus.is_empty() || r.node_cpus.is_empty())
                .any(|o| o.overlaps(r.start, r.end) && o.nodes.iter().any(|n| r.nodes.contains(n)));
            if clash {
                return Err(err(
                    "Requested reservation overlaps with another reservation",
                ));
            }
        }
        if !r.flags.ignore_jobs
            && r.node_cpus.is_empty()
            && r.nodes.iter().any(|n| self.node_busy(n, r.start))
        {
            return Err(err("Requested nodes are busy"));
        }
        Ok(())
    }

    fn resv_cpus(&self, nodes: &[String]) -> u32 {
        self.nodes
            .iter()
            .filter(|n| nodes.contains(&n.name))
            .map(|n| n.cpus)
            .sum()
    }

    /// `scontrol create reservation`: returns the new reservation's name. Only
    /// operators may create one. Errors are Slurm's (`Requested nodes are busy`,
    /// `Invalid user id`, `Duplicate reservation name`, …).
    pub fn create_resv(
        &mut self,
        spec: &ResvSpec,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<String, SlurmError> {
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        self.check_resv_accounts(spec)?;
        let mut flags = ResvFlags::default();
        if let Some((text, remove)) = &spec.flags {
            flags.apply(text, *remove).map_err(|e| err(&e))?;
        }
        let (start, end) = window(spec, None, now)?;
        let name = match &spec.name {
            Some(n) if self.resv.find(n).is_some() => {
                return Err(err("Duplicate reservation name"));
            }
            Some(n) if n.is_empty() || n.contains(char::is_whitespace) => {
                return Err(err("Requested reservation is invalid"));
            }
            Some(n) => n.clone(),
            None => {
                // Slurm names an unnamed reservation after its first user or account.
                let base = spec
                    .users
                    .as_ref()
                    .and_then(|u| u.names().first().cloned())
                    .or_else(|| {
                        spec.accounts
                            .as_ref()
                            .and_then(|a| a.names().first().cloned())
                    })
                    .unwrap_or_else(|| "resv".into());
                (1..)
                    .map(|k| format!("{base}_{k}"))
                    .find(|n| self.resv.find(n).is_none())
                    .unwrap_or_default()
            }
        };
        let held = self.resv_resources(spec, &flags, (start, end), None, None)?;
        if spec.nodes.is_some() {
            flags.spec_nodes = true;
        } else if spec.partition.is_some() && spec.node_cnt.is_none() {
            flags.part_nodes = true;
        }
        let mut users = Vec::new();
        let mut accounts = Vec::new();
        if let Some(u) = &spec.users {
            u.apply(&mut users);
        }
        if let Some(a) = &spec.accounts {
            a.apply(&mut accounts);
        }
        let r = Reservation {
            name: name.clone(),
            start,
            end,
            cpus: held.cpus,
            cores: held.cores,
            nodes: held.nodes,
            node_cpus: held.node_cpus,
            licenses: held.licenses,
            partition: spec.partition.clone(),
            users,
            accounts,
            flags,
            idle_since: None,
        };
        self.check_resv(&r, None)?;
        tracing::info!(name, start, end, nodes = ?r.nodes, "reservation created");
        self.resv.list.push(r);
        self.resv.dirty = true;
        fx.schedule = true;
        Ok(name)
    }

    /// `scontrol update reservation`: changes what the spec sets; the result must
    /// pass the same checks as a new reservation.
    pub fn update_resv(
        &mut self,
        spec: &ResvSpec,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        self.check_resv_accounts(spec)?;
        let name = spec.name.clone().unwrap_or_default();
        let k = self
            .resv
            .find(&name)
            .ok_or_else(|| err("Requested reservation is invalid"))?;
        let old = self.resv.list[k].clone();
        let mut r = old.clone();
        if let Some((text, remove)) = &spec.flags {
            r.flags.apply(text, *remove).map_err(|e| err(&e))?;
        }
        let moved = spec.start.is_some() || spec.end.is_some() || spec.duration.is_some();
        if moved {
            (r.start, r.end) = window(spec, Some(&old), now)?;
        }
        if spec.partition.is_some() {
            r.partition = spec.partition.clone();
        }
        let resources = spec.nodes.is_some()
            || spec.node_cnt.is_some()
            || spec.core_cnt.is_some()
            || spec.cpu_cnt.is_some()
            || spec.licenses.is_some();
        // A core or license reservation moved in time is checked again where it lands.
        if resources || (moved && (!r.node_cpus.is_empty() || !r.licenses.is_empty())) {
            let h =
                self.resv_resources(spec, &r.flags, (r.start, r.end), Some(&name), Some(&old))?;
            r.nodes = h.nodes;
            r.node_cpus = h.node_cpus;
            r.cpus = h.cpus;
            r.cores = h.cores;
            r.licenses = h.licenses;
        }
        if let Some(u) = &spec.users {
            u.apply(&mut r.users);
        }
        if let Some(a) = &spec.accounts {
            a.apply(&mut r.accounts);
        }
        // Jobs already running inside it are its own, not a conflict.
        let mut check = r.clone();
        check.flags.ignore_jobs = true;
        self.check_resv(&check, Some(&name))?;
        if !r.flags.ignore_jobs && r.node_cpus.is_empty() {
            let added: Vec<&String> = r.nodes.iter().filter(|n| !old.nodes.contains(n)).collect();
            let foreign = self.jobs.values().any(|j| {
                j.state == JobState::Running
                    && j.spec.reservation.as_deref() != Some(name.as_str())
                    && j.alloc
                        .as_ref()
                        .is_some_and(|a| a.nodes.iter().any(|n| added.contains(&n)))
            });
            if foreign && r.start <= now {
                return Err(err("Requested nodes are busy"));
            }
        }
        self.resv.list[k] = r;
        self.resv.dirty = true;
        fx.schedule = true;
        Ok(())
    }

    /// `scontrol delete ReservationName=`: refused while a job runs in it
    /// (`Requested reservation is in use`); pending jobs that named it are held with
    /// reason `ReservationDeleted`, as Slurm does.
    pub fn delete_resv(
        &mut self,
        name: &str,
        c: Caller,
        now: i64,
        fx: &mut Effects,
    ) -> Result<(), SlurmError> {
        if !self.is_operator(c) {
            return Err(SlurmError::AccessDenied);
        }
        let k = self
            .resv
            .find(name)
            .ok_or_else(|| err("Requested reservation is invalid"))?;
        let busy = self.jobs.values().any(|j| {
            j.spec.reservation.as_deref() == Some(name)
                && (j.state == JobState::Running || j.completing)
        });
        if busy {
            return Err(err("Requested reservation is in use"));
        }
        self.remove_resv(k, now, fx);
        Ok(())
    }

    /// Drops reservation `k`, recording its used window and holding its pending jobs.
    fn remove_resv(&mut self, k: usize, now: i64, fx: &mut Effects) {
        let mut r = self.resv.list.remove(k);
        tracing::info!(name = r.name, "reservation removed");
        if r.start < now {
            r.end = r.end.min(now);
            self.resv.history.push(r.clone());
        }
        for j in self.jobs.values_mut() {
            if j.state == JobState::Pending && j.spec.reservation.as_deref() == Some(&r.name) {
                hold_for_deleted(j);
                fx.persist.push(Job::clone(j));
            }
        }
        self.resv.dirty = true;
        fx.schedule = true;
    }

    /// The clock side: expired reservations end (DAILY/WEEKLY ones move forward),
    /// PURGE_COMP ones idle for their time are deleted. A pass is asked for whenever a
    /// window opens or closes.
    pub fn resv_tick(&mut self, now: i64, fx: &mut Effects) {
        let mut k = 0;
        while k < self.resv.list.len() {
            let r = &mut self.resv.list[k];
            let was_active = r.start <= now;
            if r.end <= now {
                let used = r.clone();
                if r.roll_forward(now) {
                    self.resv.history.push(used);
                    r.idle_since = None;
                    self.resv.dirty = true;
                    fx.schedule = true;
                    k += 1;
                } else {
                    self.remove_resv(k, now, fx);
                }
                continue;
            }
            if let Some(purge) = r.flags.purge_comp
                && was_active
            {
                let name = r.name.clone();
                let used = self
                    .jobs
                    .values()
                    .any(|j| j.is_active() && j.spec.reservation.as_deref() == Some(&name));
                let r = &mut self.resv.list[k];
                if used {
                    r.idle_since = None;
                } else {
                    let since = *r.idle_since.get_or_insert(now.max(r.start));
                    if now - since >= i64::from(purge) {
                        self.remove_resv(k, now, fx);
                        continue;
                    }
                }
            }
            k += 1;
        }
        // A window opening needs a pass to start the jobs waiting for it.
        if self
            .resv
            .list
            .iter()
            .any(|r| r.start <= now && r.start > self.resv.clock)
        {
            fx.schedule = true;
        }
        self.resv.clock = now;
    }

    /// Checks `--reservation` at submit: the reservation exists and lists the job's
    /// user or account (operators may use any).
    pub fn check_job_resv(&self, job: &Job, c: Caller) -> Result<(), SlurmError> {
        let Some(name) = job.spec.reservation.as_deref() else {
            return Ok(());
        };
        let r = self
            .resv
            .list
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| err("Requested reservation is invalid"))?;
        if !r.allows(&job.user, &job.account) && !self.is_operator(c) {
            return Err(err("Access denied to requested reservation"));
        }
        Ok(())
    }

    /// The nodes as queries show them: MAINT on nodes of an active maintenance
    /// reservation, RESERVED on nodes of another active one.
    pub fn nodes_for_query(&self, now: i64) -> Vec<Node> {
        let mut nodes = self.nodes.clone();
        // A core reservation leaves its nodes in service: they show as they are.
        for r in self
            .resv
            .list
            .iter()
            .filter(|r| r.active(now) && r.node_cpus.is_empty())
        {
            for n in nodes.iter_mut().filter(|n| r.nodes.contains(&n.name)) {
                if r.flags.maint {
                    n.maint = true;
                } else {
                    n.reserved = true;
                }
            }
        }
        nodes
    }
}

/// Holds a pending job whose reservation is gone (Slurm: priority 0, reason
/// ReservationDeleted); `scontrol release` lets it run outside any reservation.
fn hold_for_deleted(j: &mut Job) {
    j.hold = Some(HoldKind::Admin);
    j.priority = 0;
    j.reason = Reason::Other(crate::sched::resv::DELETED_REASON.into());
    j.spec.reservation = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctld::testutil::{ALICE, cluster_with, names, spec};
    use crate::model::reservation::ListEdit;

    const OP: Caller = Caller { uid: 999, gid: 999 };
    const T: i64 = 1_000_000;

    fn rspec(name: &str, flags: &str, start: i64, secs: i64) -> ResvSpec {
        ResvSpec {
            name: Some(name.into()),
            start: Some(start),
            duration: Some(secs),
            nodes: Some("ALL".into()),
            accounts: Some(ListEdit::Set(vec!["a".into()])),
            flags: (!flags.is_empty()).then(|| (flags.to_string(), false)),
            ..ResvSpec::default()
        }
    }

    fn create(c: &mut Cluster, s: &ResvSpec) -> Result<String, SlurmError> {
        c.create_resv(s, OP, T, &mut Effects::default())
    }

    #[test]
    fn only_operators_create_and_names_are_unique() {
        let mut c = cluster_with(4, "");
        let s = rspec("r", "", T, 60);
        assert_eq!(
            c.create_resv(&s, ALICE, T, &mut Effects::default()),
            Err(SlurmError::AccessDenied)
        );
        assert_eq!(create(&mut c, &s).unwrap(), "r");
        assert_eq!(
            create(&mut c, &s).unwrap_err().to_string(),
            "Duplicate reservation name"
        );
        assert!(c.resv.take_dirty().is_some());
        assert!(c.resv.take_dirty().is_none());
        let r = &c.resv.list[0];
        assert_eq!((r.start, r.end, r.cpus), (T, T + 60, 4));
        assert_eq!(r.nodes, vec!["n1".to_string()]);
        assert!(r.flags.spec_nodes);
    }

    #[test]
    fn daily_rolls_forward_and_a_plain_one_ends() {
        let mut c = cluster_with(4, "");
        create(&mut c, &rspec("d", "DAILY", T, 60)).unwrap();
        let mut fx = Effects::default();
        c.resv_tick(T + 60, &mut fx);
        assert_eq!(c.resv.list[0].start, T + 86400);
        assert_eq!(c.resv.take_history().len(), 1);
        c.resv.list.clear();
        create(&mut c, &rspec("once", "", T, 60)).unwrap();
        c.resv_tick(T + 30, &mut fx);
        assert_eq!(c.resv.list.len(), 1);
        c.resv_tick(T + 60, &mut fx);
        assert!(c.resv.list.is_empty());
        let h = c.resv.take_history();
        assert_eq!((h[0].name.as_str(), h[0].end), ("once", T + 60));
    }

    #[test]
    fn purge_comp_removes_an_idle_reservation_after_its_time() {
        let mut c = cluster_with(4, "");
        create(&mut c, &rspec("p", "PURGE_COMP=00:05", T, 3600)).unwrap();
        let mut fx = Effects::default();
        // A pending job that names it keeps it alive.
        let mut s = spec("j");
        s.account = Some("a".into());
        s.reservation = Some("p".into());
        let id = crate::ctld::testutil::submit(&mut c, s, ALICE, T);
        c.resv_tick(T, &mut fx);
        c.resv_tick(T + 10, &mut fx);
        assert_eq!(c.resv.list.len(), 1);
        c.jobs.get_mut(&id).unwrap().state = JobState::Completed;
        c.resv_tick(T + 11, &mut fx);
        c.resv_tick(T + 15, &mut fx);
        assert_eq!(c.resv.list.len(), 1);
        c.resv_tick(T + 16, &mut fx);
        assert!(c.resv.list.is_empty());
    }

    #[test]
    fn submit_checks_and_deletion_holds_pending_jobs() {
        let mut c = cluster_with(4, "");
        create(&mut c, &rspec("r", "MAINT", T + 600, 60)).unwrap();
        let mut s = spec("j");
        s.reservation = Some("nope".into());
        assert_eq!(
            c.resolve(s.clone(), ALICE, T, &names)
                .unwrap_err()
                .to_string(),
            "Requested reservation is invalid"
        );
        s.reservation = Some("r".into());
        assert_eq!(
            c.resolve(s.clone(), ALICE, T, &names)
                .unwrap_err()
                .to_string(),
            "Access denied to requested reservation"
        );
        s.account = Some("a".into());
        let id = crate::ctld::testutil::submit(&mut c, s, ALICE, T);
        let mut fx = Effects::default();
        c.delete_resv("r", OP, T, &mut fx).unwrap();
        let j = &c.jobs[&id];
        assert_eq!(j.hold, Some(HoldKind::Admin));
        assert_eq!(j.reason.as_str(), "ReservationDeleted");
        assert_eq!(fx.persist.len(), 1);
        // Not started yet: nothing was used, so no history.
        assert!(c.resv.take_history().is_empty());
    }

    #[test]
    fn core_reservations_share_nodes_by_their_cpus() {
        let mut c = cluster_with(8, "");
        let with_cores = |name: &str, flags: &str, start: i64, cores: &[u32]| ResvSpec {
            core_cnt: Some(cores.to_vec()),
            ..rspec(name, flags, start, 3600)
        };
        create(&mut c, &with_cores("c", "", T, &[3])).unwrap();
        let r = &c.resv.list[0];
        assert_eq!(
            (&r.nodes[..], &r.node_cpus[..], r.cpus, r.core_count()),
            (&["n1".to_string()][..], &[3][..], 3, 3)
        );
        // Another fits in the 5 left; then the node is full.
        create(&mut c, &with_cores("c2", "", T, &[5])).unwrap();
        let busy = |e: SlurmError| e.to_string();
        assert_eq!(
            busy(create(&mut c, &with_cores("c3", "", T, &[1])).unwrap_err()),
            "Requested nodes are busy"
        );
        assert_eq!(
            busy(create(&mut c, &with_cores("c4", "", T, &[1, 2])).unwrap_err()),
            "Core count for reservation is invalid"
        );
        // A whole-node reservation shares with nobody, unless one side has OVERLAP.
        assert_eq!(
            busy(create(&mut c, &rspec("w", "", T + 60, 60)).unwrap_err()),
            "Requested reservation overlaps with another reservation"
        );
        create(&mut c, &rspec("o", "OVERLAP", T + 60, 60)).unwrap();
        c.delete_resv("o", OP, T, &mut Effects::default()).unwrap();
        // After their window the node is free again; TRES=cpu= counts CPUs.
        let later = ResvSpec {
            cpu_cnt: Some(8),
            nodes: None,
            ..rspec("t", "", T + 3600, 60)
        };
        create(&mut c, &later).unwrap();
        assert_eq!(c.resv.list[2].node_cpus, vec![8]);
    }

    #[test]
    fn core_reservations_count_running_jobs_unless_ignore_jobs() {
        let mut c = cluster_with(8, "");
        let mut s = spec("j");
        s.ntasks = Some(6);
        let id = crate::ctld::testutil::submit(&mut c, s, ALICE, T);
        assert_eq!(crate::ctld::testutil::pass(&mut c, T), vec![id]);
        let want = |flags: &str| ResvSpec {
            core_cnt: Some(vec![3]),
            ..rspec("c", flags, T + 100, 600)
        };
        assert_eq!(
            create(&mut c, &want("")).unwrap_err().to_string(),
            "Requested nodes are busy"
        );
        create(&mut c, &want("IGNORE_JOBS")).unwrap();
        // Its nodes stay in service (no RESERVED state) while it is active.
        assert!(!c.nodes_for_query(T + 200)[0].reserved);
    }

    #[test]
    fn license_reservations_need_licenses_the_cluster_has() {
        let mut c = cluster_with(4, "[licenses]\nmatlab = 4\n");
        let lic = |name: &str, l: &[(&str, u32)], start: i64| ResvSpec {
            nodes: None,
            licenses: Some(l.iter().map(|(n, k)| (n.to_string(), *k)).collect()),
            ..rspec(name, "", start, 600)
        };
        create(&mut c, &lic("l", &[("matlab", 3)], T)).unwrap();
        let r = &c.resv.list[0];
        assert!(r.nodes.is_empty());
        assert_eq!(r.licenses, vec![("matlab".to_string(), 3)]);
        let invalid = "Invalid license specification";
        let e = |c: &mut Cluster, s: &ResvSpec| create(c, s).unwrap_err().to_string();
        assert_eq!(e(&mut c, &lic("l2", &[("matlab", 2)], T + 60)), invalid);
        assert_eq!(e(&mut c, &lic("l3", &[("fluent", 1)], T)), invalid);
        create(&mut c, &lic("l4", &[("matlab", 1)], T)).unwrap();
        // Nothing to reserve at all.
        let none = ResvSpec {
            nodes: None,
            ..rspec("x", "", T, 60)
        };
        assert!(e(&mut c, &none).contains("must be specified"));
        // Update: more licenses than are left is refused, the old ones stay.
        let more = ResvSpec {
            name: Some("l4".into()),
            licenses: Some(vec![("matlab".into(), 2)]),
            ..ResvSpec::default()
        };
        assert_eq!(
            c.update_resv(&more, OP, T, &mut Effects::default())
                .unwrap_err()
                .to_string(),
            invalid
        );
        assert_eq!(c.resv.list[1].licenses, vec![("matlab".to_string(), 1)]);
    }

    #[test]
    fn queries_show_maint_and_reserved_only_while_active() {
        let mut c = cluster_with(4, "");
        create(&mut c, &rspec("m", "MAINT", T + 100, 60)).unwrap();
        assert!(!c.nodes_for_query(T)[0].maint);
        assert!(c.nodes_for_query(T + 100)[0].maint);
        assert_eq!(c.nodes_for_query(T + 100)[0].state_compact(), "maint");
        // The scheduler's own copy is untouched.
        assert!(!c.nodes[0].maint);
        let mut u = ResvSpec {
            name: Some("m".into()),
            flags: Some(("MAINT".into(), true)),
            ..ResvSpec::default()
        };
        c.update_resv(&u, OP, T, &mut Effects::default()).unwrap();
        assert_eq!(c.nodes_for_query(T + 100)[0].state_compact(), "resv");
        u.flags = None;
        u.name = Some("zz".into());
        assert_eq!(
            c.update_resv(&u, OP, T, &mut Effects::default())
                .unwrap_err()
                .to_string(),
            "Requested reservation is invalid"
        );
    }

    #[test]
    fn unknown_accounts_are_refused_before_nodes_are_looked_at() {
        let mut c = cluster_with(4, "");
        // Without accounting any account name is taken.
        let mut free = rspec("free", "", T + 100, 60);
        free.accounts = Some(ListEdit::Set(vec!["nosuch".into()]));
        create(&mut c, &free).unwrap();
        c.delete_resv("free", OP, T, &mut Effects::default())
            .unwrap();
        let root = Caller { uid: 0, gid: 0 };
        let add = crate::model::acct_ops::AcctOp::Add {
            entity: crate::model::acct_ops::Entity::Account,
            names: vec!["a".into()],
            settings: vec![],
        };
        c.acct_change(&add, true, root, "root").unwrap();
        let user = crate::model::acct_ops::AcctOp::Add {
            entity: crate::model::acct_ops::Entity::User,
            names: vec!["u2001".into()],
            settings: vec![crate::model::acct_ops::Setting::parse("Account=a").unwrap()],
        };
        c.acct_change(&user, true, root, "root").unwrap();
        // A running job makes the nodes busy: the account error still comes first.
        let id = crate::ctld::testutil::submit(&mut c, spec("j"), ALICE, T);
        crate::ctld::testutil::pass(&mut c, T);
        assert_eq!(c.jobs[&id].state, JobState::Running);
        create(&mut c, &rspec("free", "IGNORE_JOBS", T + 100, 60)).unwrap();
        let mut s = rspec("bad", "", T, 60);
        s.accounts = Some(ListEdit::Set(vec!["a".into(), "nosuch".into()]));
        let e = create(&mut c, &s).unwrap_err();
        assert_eq!(e, SlurmError::InvalidAccount);
        assert_eq!(
            e.to_string(),
            "Invalid account or account/partition combination specified"
        );
        let u = ResvSpec {
            name: Some("free".into()),
            accounts: Some(ListEdit::Add(vec!["nosuch".into()])),
            ..ResvSpec::default()
        };
        assert_eq!(
            c.update_resv(&u, OP, T, &mut Effects::default())
                .unwrap_err(),
            SlurmError::InvalidAccount
        );
        assert_eq!(c.resv.list.len(), 1);
    }
}
