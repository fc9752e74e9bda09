//! Changes to the association tree as `sacctmgr add|modify|delete` express them, and
//! the summary Slurm's sacctmgr prints for each (cf. src/sacctmgr/{account,user,qos,
//! cluster}_functions.c).
//!
//! Pure and shared: the front-end builds an [`AcctOp`] from its command line, the
//! controller applies it to its tree with [`apply`] (on a copy, so a failing change
//! leaves nothing half-done) and returns the summary, which the front-end prints (and,
//! on a terminal, asks to commit before the controller applies it for real).
//!
//! Settings are Slurm's `Key=Value`, `Key+=Value`, `Key-=Value` (the last two for lists:
//! `QOS`, `Preempt`, `Flags`); keys are case-insensitive and take Slurm's aliases
//! (`Fairshare`/`Shares`, `MaxWall`/`MaxWallDurationPerJob`, `GrpCPUs` for
//! `GrpTRES=cpu=N`, …). A count or TRES of `-1` removes that limit.

use super::assoc::{
    Account, AdminLevel, AssocTree, Cluster, Limits, NORMAL_QOS, PreemptMode, Qos, QosFlag, ROOT,
    Shares, TresMap, User, UserAssoc,
};
use serde::{Deserialize, Serialize};

/// What a sacctmgr command is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entity {
    Cluster,
    Account,
    User,
    Qos,
    /// Only for `show`/`list`.
    Association,
    /// Only for `add`/`delete` (`sacctmgr add coordinator Account=A Names=U`).
    Coordinator,
}

impl Entity {
    /// Parses sacctmgr's entity words (`account`, `accounts`, `assoc`, `qos`, …) with
    /// Slurm's shortest accepted prefixes.
    pub fn parse(word: &str) -> Option<Entity> {
        let w = word.to_ascii_lowercase();
        let pre = |full: &str, min: usize| w.len() >= min && full.starts_with(&w);
        if pre("accounts", 3) {
            Some(Entity::Account)
        } else if pre("associations", 3) {
            Some(Entity::Association)
        } else if pre("clusters", 2) {
            Some(Entity::Cluster)
        } else if pre("coordinators", 2) {
            Some(Entity::Coordinator)
        } else if pre("qos", 1) {
            Some(Entity::Qos)
        } else if pre("users", 1) {
            Some(Entity::User)
        } else {
            None
        }
    }
}

/// How a setting changes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetOp {
    /// `Key=Value`.
    Assign,
    /// `Key+=Value` (lists).
    Add,
    /// `Key-=Value` (lists).
    Remove,
}

/// One `Key=Value` of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub key: String,
    pub op: SetOp,
    pub value: String,
}

impl Setting {
    /// Splits `Key=Value`, `Key+=Value` or `Key-=Value`; `None` without `=`.
    pub fn parse(arg: &str) -> Option<Setting> {
        let (k, v) = arg.split_once('=')?;
        let (key, op) = if let Some(k) = k.strip_suffix('+') {
            (k, SetOp::Add)
        } else if let Some(k) = k.strip_suffix('-') {
            (k, SetOp::Remove)
        } else {
            (k, SetOp::Assign)
        };
        Some(Setting {
            key: key.trim().to_string(),
            op,
            value: strip_quotes(v.trim()).to_string(),
        })
    }
}

fn strip_quotes(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// A `where` clause: empty lists match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cond {
    /// `Names=` (or the bare names after the entity).
    pub names: Vec<String>,
    pub accounts: Vec<String>,
    pub users: Vec<String>,
    pub partitions: Vec<String>,
    pub parents: Vec<String>,
    pub clusters: Vec<String>,
}

impl Cond {
    /// Takes a where-clause key into the condition; `false` when the key is not one.
    pub fn take(&mut self, s: &Setting) -> bool {
        let list = split_list(&s.value);
        let k = s.key.to_ascii_lowercase();
        let slot = match k.as_str() {
            "name" | "names" => &mut self.names,
            "account" | "accounts" | "acct" | "accts" => &mut self.accounts,
            "user" | "users" => &mut self.users,
            "partition" | "partitions" => &mut self.partitions,
            "parent" | "parentname" => &mut self.parents,
            "cluster" | "clusters" => &mut self.clusters,
            _ => return false,
        };
        slot.extend(list);
        true
    }

    fn any(list: &[String], v: &str) -> bool {
        list.is_empty() || list.iter().any(|x| x == v)
    }
}

/// Splits a comma list, dropping empty items and surrounding quotes.
pub fn split_list(s: &str) -> Vec<String> {
    strip_quotes(s)
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// One sacctmgr change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AcctOp {
    /// `add ENTITY NAMES settings…` (for users: `Account=` names the associations).
    Add {
        entity: Entity,
        names: Vec<String>,
        settings: Vec<Setting>,
    },
    /// `modify ENTITY where COND set settings…`.
    Modify {
        entity: Entity,
        cond: Cond,
        settings: Vec<Setting>,
    },
    /// `delete ENTITY [where] COND`.
    Delete { entity: Entity, cond: Cond },
    /// `sacctmgr load FILE`: the file's adds, applied in order, all or nothing
    /// (see [`flat`]).
    Load { ops: Vec<AcctOp> },
}

impl AcctOp {
    /// The entity the change is about.
    pub fn entity(&self) -> Entity {
        match self {
            AcctOp::Add { entity, .. }
            | AcctOp::Modify { entity, .. }
            | AcctOp::Delete { entity, .. } => *entity,
            AcctOp::Load { .. } => Entity::Cluster,
        }
    }
}

/// What [`apply`] did: the lines sacctmgr prints, and whether anything changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub lines: Vec<String>,
    pub changed: bool,
}

/// Applies `op` to `tree` for the controller's cluster `cluster`, all or nothing.
/// Errors are the message sacctmgr prints (the tree is unchanged then).
pub fn apply(tree: &mut AssocTree, op: &AcctOp, cluster: &str) -> Result<Outcome, String> {
    let mut t = tree.clone();
    let out = match op {
        AcctOp::Add {
            entity: Entity::Coordinator,
            names,
            settings,
        } => add_coord(&mut t, names, settings, cluster)?,
        AcctOp::Delete {
            entity: Entity::Coordinator,
            cond,
        } => remove_coord(&mut t, cond, cluster)?,
        AcctOp::Add {
            entity,
            names,
            settings,
        } => add(&mut t, *entity, names, settings, cluster)?,
        AcctOp::Modify {
            entity,
            cond,
            settings,
        } => modify(&mut t, *entity, cond, settings, cluster)?,
        AcctOp::Delete { entity, cond } => delete(&mut t, *entity, cond, cluster)?,
        AcctOp::Load { ops } => load(&mut t, ops, cluster)?,
    };
    t.check()?;
    t.assign_ids();
    *tree = t;
    Ok(out)
}

fn check_cluster(list: &[String], cluster: &str) -> Result<(), String> {
    match list.iter().find(|c| !c.eq_ignore_ascii_case(cluster)) {
        Some(c) => Err(format!(
            " This cluster '{c}' doesn't exist.\n        Contact your admin to add it to accounting."
        )),
        None => Ok(()),
    }
}

fn bad_qos(name: &str) -> String {
    format!(" error: You gave a bad qos '{name}'.  Use 'list qos' to get complete list.")
}

/// Parses a count; `-1` clears it.
fn count(key: &str, v: &str) -> Result<Option<u32>, String> {
    if v.trim() == "-1" {
        return Ok(None);
    }
    v.trim()
        .parse::<u32>()
        .map(Some)
        .map_err(|_| format!(" Bad {key} value '{v}'"))
}

/// Parses a wall time in minutes as sacctmgr accepts it (`M`, `M:S`, `H:M:S`, `D-H`,
/// `D-H:M`, `D-H:M:S`, `UNLIMITED`); `-1` clears it.
pub fn parse_minutes(key: &str, v: &str) -> Result<Option<u32>, String> {
    let t = v.trim();
    let err = || format!(" Bad {key} time format '{v}'");
    if t == "-1" || t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("infinite") {
        return Ok(None);
    }
    let secs = crate::model::time::parse_duration_secs(t).ok_or_else(err)?;
    u32::try_from(secs.div_ceil(60))
        .map(Some)
        .map_err(|_| err())
}

/// Applies a list edit (`=`, `+=`, `-=`) of names.
fn edit_list(list: &mut Vec<String>, op: SetOp, value: &str) {
    let items = split_list(value);
    match op {
        SetOp::Assign => *list = items,
        SetOp::Add => {
            for i in items {
                if !list.contains(&i) {
                    list.push(i);
                }
            }
        }
        SetOp::Remove => list.retain(|x| !items.contains(x)),
    }
}

/// Sets one TRES of a TRES limit (`GrpCPUs=4` is `GrpTRES=cpu=4`).
fn set_one_tres(map: &mut TresMap, tres: &str, key: &str, v: &str) -> Result<(), String> {
    let upd = TresMap::parse_update(&format!("{tres}={v}"))
        .map_err(|_| format!(" Bad {key} value '{v}'"))?;
    map.apply_update(&upd);
    Ok(())
}

/// Applies a limit setting; `Ok(false)` when `key` is not a limit. `qos` selects the
/// QOS meanings of `MaxJobs`/`MaxSubmitJobs` (per user).
fn set_limit(l: &mut Limits, s: &Setting, qos: bool) -> Result<bool, String> {
    let k = s.key.to_ascii_lowercase();
    let v = s.value.as_str();
    let tres = |m: &mut TresMap| -> Result<(), String> {
        // `MaxTRES=cpu=4` changes the cpu limit and keeps the other TRES limits, as
        // Slurm does; `cpu=-1` removes it.
        let upd = TresMap::parse_update(v).map_err(|e| format!(" {e}"))?;
        m.apply_update(&upd);
        Ok(())
    };
    match k.as_str() {
        "maxjobs" if qos => l.max_jobs_per_user = count(&s.key, v)?,
        "maxjobs" => l.max_jobs = count(&s.key, v)?,
        "maxsubmitjobs" | "maxsubmit" if qos => l.max_submit_jobs_per_user = count(&s.key, v)?,
        "maxsubmitjobs" | "maxsubmit" => l.max_submit_jobs = count(&s.key, v)?,
        "maxjobsperuser" | "maxjobspu" => l.max_jobs_per_user = count(&s.key, v)?,
        "maxsubmitjobsperuser" | "maxsubmitjobspu" | "maxsubmitpu" => {
            l.max_submit_jobs_per_user = count(&s.key, v)?
        }
        "maxjobsperaccount" | "maxjobsperacct" | "maxjobspa" => {
            l.max_jobs_per_account = count(&s.key, v)?
        }
        "maxsubmitjobsperaccount" | "maxsubmitjobsperacct" | "maxsubmitjobspa" | "maxsubmitpa" => {
            l.max_submit_jobs_per_account = count(&s.key, v)?
        }
        "maxwall" | "maxwalldurationperjob" => l.max_wall_mins = parse_minutes(&s.key, v)?,
        "grpwall" => l.grp_wall_mins = parse_minutes(&s.key, v)?,
        "grpjobs" => l.grp_jobs = count(&s.key, v)?,
        "grpsubmitjobs" | "grpsubmit" => l.grp_submit_jobs = count(&s.key, v)?,
        "grptres" => tres(&mut l.grp_tres)?,
        "grptresmins" => tres(&mut l.grp_tres_mins)?,
        "grptresrunmins" => tres(&mut l.grp_tres_run_mins)?,
        "maxtres" | "maxtresperjob" | "maxtrespj" => tres(&mut l.max_tres_per_job)?,
        "maxtrespernode" | "maxtrespn" => tres(&mut l.max_tres_per_node)?,
        "maxtresmins" | "maxtresminsperjob" | "maxtresminspj" => {
            tres(&mut l.max_tres_mins_per_job)?
        }
        "mintres" | "mintresperjob" | "mintrespj" if qos => tres(&mut l.min_tres_per_job)?,
        "maxtresperuser" | "maxtrespu" => tres(&mut l.max_tres_per_user)?,
        "maxtresperaccount" | "maxtresperacct" | "maxtrespa" => tres(&mut l.max_tres_per_account)?,
        "grpcpus" | "grpcpu" => set_one_tres(&mut l.grp_tres, "cpu", &s.key, v)?,
        "grpmem" | "grpmemory" => set_one_tres(&mut l.grp_tres, "mem", &s.key, v)?,
        "grpnodes" => set_one_tres(&mut l.grp_tres, "node", &s.key, v)?,
        "grpcpumins" => set_one_tres(&mut l.grp_tres_mins, "cpu", &s.key, v)?,
        "grpcpurunmins" => set_one_tres(&mut l.grp_tres_run_mins, "cpu", &s.key, v)?,
        "maxcpus" | "maxcpusperjob" => set_one_tres(&mut l.max_tres_per_job, "cpu", &s.key, v)?,
        "maxnodes" | "maxnodesperjob" => set_one_tres(&mut l.max_tres_per_job, "node", &s.key, v)?,
        "maxcpumins" | "maxcpuminsperjob" => {
            set_one_tres(&mut l.max_tres_mins_per_job, "cpu", &s.key, v)?
        }
        "maxcpusperuser" | "maxcpuspu" => set_one_tres(&mut l.max_tres_per_user, "cpu", &s.key, v)?,
        "maxnodesperuser" | "maxnodespu" => {
            set_one_tres(&mut l.max_tres_per_user, "node", &s.key, v)?
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The association part shared by accounts and user associations.
struct AssocFields<'a> {
    shares: &'a mut Shares,
    default_qos: &'a mut Option<String>,
    qos: &'a mut Vec<String>,
    limits: &'a mut Limits,
}

/// Applies an association setting; `Ok(false)` when `key` is not one.
fn set_assoc(
    known_qos: &dyn Fn(&str) -> bool,
    f: AssocFields,
    s: &Setting,
) -> Result<bool, String> {
    match s.key.to_ascii_lowercase().as_str() {
        "fairshare" | "shares" | "share" => {
            *f.shares = Shares::parse(&s.value).map_err(|e| format!(" {e}"))?
        }
        "defaultqos" | "defqos" => {
            *f.default_qos = if s.value == "-1" || s.value.is_empty() {
                None
            } else {
                if !known_qos(&s.value) {
                    return Err(bad_qos(&s.value));
                }
                Some(s.value.clone())
            }
        }
        "qos" | "qoslevel" => {
            for q in split_list(&s.value) {
                if !known_qos(q.trim_start_matches(['+', '-'])) {
                    return Err(bad_qos(&q));
                }
            }
            edit_list(f.qos, s.op, &s.value);
        }
        _ => return set_limit(f.limits, s, false),
    }
    Ok(true)
}

fn unknown(key: &str) -> String {
    format!(" Unknown option: {key}\n Use keyword 'where' to modify condition")
}

/// Parses a duration in seconds (`PreemptExemptTime`): plain seconds, or
/// `[D-]H:M:S`/`M:S`; `-1` clears it.
fn parse_secs(key: &str, v: &str) -> Result<Option<u32>, String> {
    let t = v.trim();
    if t == "-1" {
        return Ok(None);
    }
    if let Ok(n) = t.parse::<u32>() {
        return Ok(Some(n));
    }
    let err = || format!(" Bad {key} time format '{v}'");
    let num = |x: &str| x.parse::<u64>().map_err(|_| err());
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (num(d)?, r),
        None => (0, t),
    };
    let p: Vec<&str> = rest.split(':').collect();
    let secs = days * 86400
        + match p.as_slice() {
            [m, s] => num(m)? * 60 + num(s)?,
            [h, m, s] => num(h)? * 3600 + num(m)? * 60 + num(s)?,
            _ => return Err(err()),
        };
    u32::try_from(secs).map(Some).map_err(|_| err())
}

/// Applies a QOS setting.
fn set_qos(known: &dyn Fn(&str) -> bool, q: &mut Qos, s: &Setting) -> Result<(), String> {
    let v = s.value.as_str();
    match s.key.to_ascii_lowercase().as_str() {
        "description" | "descr" => q.description = v.to_string(),
        "priority" => q.priority = count(&s.key, v)?.unwrap_or(0),
        "preempt" => {
            for p in split_list(v) {
                if !known(&p) {
                    return Err(bad_qos(&p));
                }
                if p == q.name {
                    return Err(format!(" QOS {p} can not preempt itself"));
                }
            }
            edit_list(&mut q.preempt, s.op, v);
        }
        "preemptmode" => q.preempt_mode = PreemptMode::parse(v).map_err(|e| format!(" {e}"))?,
        "preemptexempttime" => q.preempt_exempt_secs = parse_secs(&s.key, v)?,
        "gracetime" => q.grace_time_secs = parse_secs(&s.key, v)?.unwrap_or(0),
        "flags" => {
            let mut names: Vec<String> = q.flags.iter().map(|f| f.as_str().to_string()).collect();
            if s.op == SetOp::Assign && (v == "-1" || v.eq_ignore_ascii_case("none")) {
                names.clear();
            } else {
                for f in split_list(v) {
                    QosFlag::parse(&f).map_err(|e| format!(" {e}"))?;
                }
                let canon: Vec<String> = split_list(v)
                    .iter()
                    .filter_map(|f| QosFlag::parse(f).ok())
                    .map(|f| f.as_str().to_string())
                    .collect();
                edit_list(&mut names, s.op, &canon.join(","));
            }
            let mut flags: Vec<QosFlag> = names
                .iter()
                .filter_map(|n| QosFlag::parse(n).ok())
                .collect();
            flags.sort();
            flags.dedup();
            q.flags = flags;
        }
        "usagefactor" => {
            let f: f64 = v
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| format!(" Bad UsageFactor value '{v}'"))?;
            q.usage_factor = f;
        }
        "usagethreshold" | "usagethres" => {
            q.usage_threshold = if v == "-1" {
                None
            } else {
                Some(
                    v.parse()
                        .ok()
                        .filter(|f: &f64| (0.0..=1.0).contains(f))
                        .ok_or_else(|| format!(" Bad UsageThreshold value '{v}'"))?,
                )
            };
        }
        "name" | "names" => {}
        _ => {
            if !set_limit(&mut q.limits, s, true)? {
                return Err(unknown(&s.key));
            }
        }
    }
    Ok(())
}

fn known_qos(t: &AssocTree) -> impl Fn(&str) -> bool + '_ {
    |n: &str| t.qos.contains_key(n)
}

/// `  Key = value` lines for the settings sacctmgr echoes after an add.
fn echo_settings(lines: &mut Vec<String>, settings: &[&Setting], width: usize) {
    for s in settings {
        let op = match s.op {
            SetOp::Assign => "=",
            SetOp::Add => "+=",
            SetOp::Remove => "-=",
        };
        lines.push(format!("  {:<width$} {op} {}", s.key, s.value));
    }
}

fn add(
    t: &mut AssocTree,
    entity: Entity,
    names: &[String],
    settings: &[Setting],
    cluster: &str,
) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let mut names: Vec<String> = names.to_vec();
    let mut clusters = Vec::new();
    let mut rest: Vec<&Setting> = Vec::new();
    let get = |keys: &[&str]| -> Vec<String> {
        settings
            .iter()
            .filter(|s| keys.contains(&s.key.to_ascii_lowercase().as_str()))
            .flat_map(|s| split_list(&s.value))
            .collect()
    };
    names.extend(get(&["name", "names"]));
    clusters.extend(get(&["cluster", "clusters"]));
    check_cluster(&clusters, cluster)?;
    let mut seen = Vec::new();
    names.retain(|n| {
        let new = !seen.contains(n);
        seen.push(n.clone());
        new
    });
    if names.is_empty() {
        return Err(format!(
            " Need name of {} to add.",
            match entity {
                Entity::Qos => "qos",
                Entity::User => "user",
                Entity::Cluster => "cluster",
                _ => "account",
            }
        ));
    }
    let lines = &mut out.lines;
    match entity {
        Entity::Cluster => {
            let new: Vec<String> = names
                .into_iter()
                .filter(|n| !t.clusters.iter().any(|c| &c.name == n))
                .collect();
            if new.is_empty() {
                lines.push(" Nothing new added.".into());
                return Ok(out);
            }
            lines.push(" Adding Cluster(s)".into());
            for n in new {
                lines.push(format!("  Name           = {n}"));
                t.clusters.push(Cluster { name: n });
            }
        }
        Entity::Account => {
            let parent = get(&["parent"]).pop().unwrap_or_else(|| ROOT.to_string());
            let descr = get_raw(settings, &["description", "descr"]);
            let org = get_raw(settings, &["organization", "org"]);
            for s in settings {
                if !matches!(
                    s.key.to_ascii_lowercase().as_str(),
                    "parent"
                        | "description"
                        | "descr"
                        | "organization"
                        | "org"
                        | "name"
                        | "names"
                        | "cluster"
                        | "clusters"
                ) {
                    rest.push(s);
                }
            }
            let Some(parent_org) = t.accounts.get(&parent).map(|a| a.organization.clone()) else {
                return Err(format!(
                    " Parent account '{parent}' doesn't exist on cluster {cluster}\n        Contact your admin to add this account."
                ));
            };
            let new: Vec<String> = names
                .into_iter()
                .filter(|n| !t.accounts.contains_key(n))
                .collect();
            if new.is_empty() {
                lines.push(" Nothing new added.".into());
                return Ok(out);
            }
            let known = t.qos.keys().cloned().collect::<Vec<_>>();
            let is_known = |n: &str| known.iter().any(|k| k == n);
            for n in &new {
                let mut a = Account::new(n, Some(&parent));
                a.description = descr.clone().unwrap_or_else(|| n.clone());
                a.organization = org.clone().unwrap_or_else(|| {
                    if parent == ROOT {
                        n.clone()
                    } else {
                        parent_org.clone()
                    }
                });
                for s in &rest {
                    let f = AssocFields {
                        shares: &mut a.shares,
                        default_qos: &mut a.default_qos,
                        qos: &mut a.qos,
                        limits: &mut a.limits,
                    };
                    if !set_assoc(&is_known, f, s)? {
                        return Err(unknown(&s.key));
                    }
                }
                t.accounts.insert(n.clone(), a);
            }
            lines.push(" Adding Account(s)".into());
            lines.extend(new.iter().map(|n| format!("  {n}")));
            lines.push(" Settings".into());
            lines.push(format!(
                "  Description     = {}",
                descr.as_deref().unwrap_or("Account Name")
            ));
            lines.push(format!(
                "  Organization    = {}",
                org.as_deref().unwrap_or("Parent/Account Name")
            ));
            lines.push(" Associations".into());
            for n in &new {
                lines.push(format!("  A = {n:<10.10} C = {cluster:<10.10}"));
            }
            lines.push(" Settings".into());
            lines.push(format!("  Parent        = {parent}"));
            echo_settings(lines, &rest, 13);
        }
        Entity::User => {
            let accounts = get(&["account", "accounts", "acct", "accts"]);
            let default = get_raw(settings, &["defaultaccount", "defaultacct"]);
            let partitions = get(&["partition", "partitions"]);
            let admin = match get_raw(settings, &["adminlevel", "admin"]) {
                Some(a) => Some(AdminLevel::parse(&a).map_err(|e| format!(" {e}"))?),
                None => None,
            };
            for s in settings {
                if !matches!(
                    s.key.to_ascii_lowercase().as_str(),
                    "account"
                        | "accounts"
                        | "acct"
                        | "accts"
                        | "defaultaccount"
                        | "defaultacct"
                        | "partition"
                        | "partitions"
                        | "adminlevel"
                        | "admin"
                        | "name"
                        | "names"
                        | "cluster"
                        | "clusters"
                ) {
                    rest.push(s);
                }
            }
            let mut accounts = accounts;
            if accounts.is_empty()
                && let Some(d) = &default
            {
                accounts.push(d.clone());
            }
            if accounts.is_empty() {
                return Err(" Need name of account to add user to.".into());
            }
            if let Some(a) = accounts.iter().find(|a| !t.accounts.contains_key(*a)) {
                return Err(format!(
                    " This account '{a}' doesn't exist.\n        Contact your admin to add this account."
                ));
            }
            if let Some(d) = &default
                && !accounts.contains(d)
            {
                return Err(format!(
                    " Default account '{d}' is not one of the accounts given (Account=)."
                ));
            }
            let parts: Vec<Option<String>> = if partitions.is_empty() {
                vec![None]
            } else {
                partitions.into_iter().map(Some).collect()
            };
            let known = t.qos.keys().cloned().collect::<Vec<_>>();
            let is_known = |n: &str| known.iter().any(|k| k == n);
            let mut new_users = Vec::new();
            let mut assoc_lines = Vec::new();
            for n in &names {
                if !t.users.contains_key(n) {
                    t.users.insert(
                        n.clone(),
                        User {
                            name: n.clone(),
                            default_account: default.clone().unwrap_or_else(|| accounts[0].clone()),
                            admin_level: admin.unwrap_or_default(),
                            coord_accounts: Vec::new(),
                        },
                    );
                    new_users.push(n.clone());
                }
                for a in &accounts {
                    for p in &parts {
                        if t.user_assocs
                            .iter()
                            .any(|x| &x.user == n && &x.account == a && x.partition == *p)
                        {
                            continue;
                        }
                        let mut ua = UserAssoc::new(n, a, p.as_deref());
                        for s in &rest {
                            let f = AssocFields {
                                shares: &mut ua.shares,
                                default_qos: &mut ua.default_qos,
                                qos: &mut ua.qos,
                                limits: &mut ua.limits,
                            };
                            if !set_assoc(&is_known, f, s)? {
                                return Err(unknown(&s.key));
                            }
                        }
                        t.user_assocs.push(ua);
                        let mut l = format!("  U = {n:<9.9} A = {a:<10.10} C = {cluster:<10.10}");
                        if let Some(p) = p {
                            l.push_str(&format!(" P = {p:<10.10}"));
                        }
                        assoc_lines.push(l);
                    }
                }
            }
            if new_users.is_empty() && assoc_lines.is_empty() {
                lines.push(" Nothing new added.".into());
                return Ok(out);
            }
            if !new_users.is_empty() {
                lines.push(" Adding User(s)".into());
                lines.extend(new_users.iter().map(|n| format!("  {n}")));
                lines.push(" Settings =".into());
                lines.push(format!(
                    "  Default Account = {}",
                    default.clone().unwrap_or_else(|| accounts[0].clone())
                ));
                if let Some(a) = admin {
                    lines.push(format!("  Admin Level     = {}", a.as_str()));
                }
            }
            if !assoc_lines.is_empty() {
                lines.push(" Associations =".into());
                lines.extend(assoc_lines);
            }
            if !rest.is_empty() {
                lines.push(" Non Default Settings".into());
                echo_settings(lines, &rest, 15);
            }
        }
        Entity::Qos => {
            let new: Vec<String> = names
                .into_iter()
                .filter(|n| !t.qos.contains_key(n))
                .collect();
            if new.is_empty() {
                lines.push(" Nothing new added.".into());
                return Ok(out);
            }
            // New QOS may preempt each other: they are known while settings apply.
            for n in &new {
                t.qos.insert(n.clone(), Qos::new(n));
            }
            for n in &new {
                let mut q = t.qos[n].clone();
                for s in settings {
                    if matches!(s.key.to_ascii_lowercase().as_str(), "cluster" | "clusters") {
                        continue;
                    }
                    set_qos(&known_qos(t), &mut q, s)?;
                }
                t.qos.insert(n.clone(), q);
            }
            lines.push(" Adding QOS(s)".into());
            lines.extend(new.iter().map(|n| format!("  {n}")));
            lines.push(" Settings".into());
            let descr = get_raw(settings, &["description", "descr"]);
            lines.push(format!(
                "  Description    = {}",
                descr.as_deref().unwrap_or("QOS Name")
            ));
            let others: Vec<&Setting> = settings
                .iter()
                .filter(|s| {
                    !matches!(
                        s.key.to_ascii_lowercase().as_str(),
                        "description" | "descr" | "name" | "names" | "cluster" | "clusters"
                    )
                })
                .collect();
            echo_settings(lines, &others, 14);
        }
        Entity::Association => {
            return Err(" Use 'add user' or 'add account' to add associations.".into());
        }
        Entity::Coordinator => return add_coord(t, &names, settings, cluster),
    }
    out.changed = true;
    Ok(out)
}

/// The last value given for any of `keys`, unsplit.
fn get_raw(settings: &[Setting], keys: &[&str]) -> Option<String> {
    settings
        .iter()
        .rev()
        .find(|s| keys.contains(&s.key.to_ascii_lowercase().as_str()))
        .map(|s| s.value.clone())
}

/// `add coordinator`: makes each named user a coordinator of each account given
/// (and so of its sub-accounts). Errors as sacctmgr's `_check_coord_request`: both
/// lists are needed and every user and account must exist.
fn add_coord(
    t: &mut AssocTree,
    names: &[String],
    settings: &[Setting],
    cluster: &str,
) -> Result<Outcome, String> {
    let mut users: Vec<String> = names.to_vec();
    let mut accounts: Vec<String> = Vec::new();
    let mut clusters = Vec::new();
    for s in settings {
        match s.key.to_ascii_lowercase().as_str() {
            "name" | "names" | "user" | "users" => users.extend(split_list(&s.value)),
            "account" | "accounts" | "acct" | "accts" => accounts.extend(split_list(&s.value)),
            "cluster" | "clusters" => clusters.extend(split_list(&s.value)),
            _ => {
                return Err(format!(
                    " Unknown condition: {}\n Use keyword 'set' to modify value",
                    s.key
                ));
            }
        }
    }
    check_cluster(&clusters, cluster)?;
    users.dedup();
    accounts.dedup();
    if users.is_empty() {
        return Err(" You need to specify a user list here.".into());
    }
    if accounts.is_empty() {
        return Err(" You need to specify an account list here.".into());
    }
    let mut missing: Vec<String> = accounts
        .iter()
        .filter(|a| !t.accounts.contains_key(*a))
        .map(|a| format!(" You specified a non-existent account '{a}'."))
        .collect();
    missing.extend(
        users
            .iter()
            .filter(|u| !t.users.contains_key(*u))
            .map(|u| format!(" You specified a non-existent user '{u}'.")),
    );
    if !missing.is_empty() {
        return Err(missing.join("\n"));
    }
    let mut out = Outcome::default();
    out.lines.push(" Adding Coordinator User(s)".into());
    out.lines.extend(users.iter().map(|u| format!("  {u}")));
    out.lines.push(" To Account(s) and all sub-accounts".into());
    out.lines.extend(accounts.iter().map(|a| format!("  {a}")));
    for u in &users {
        let Some(rec) = t.users.get_mut(u) else {
            continue;
        };
        for a in &accounts {
            if !rec.coord_accounts.contains(a) {
                rec.coord_accounts.push(a.clone());
                out.changed = true;
            }
        }
    }
    Ok(out)
}

/// `delete coordinator [where] Names=U Account=A`: takes the named users'
/// coordinator rights over the given accounts (every account without `Account=`;
/// every user of those accounts without names). Slurm's summary lists what was
/// removed, one `U = … A = …` line each.
fn remove_coord(t: &mut AssocTree, cond: &Cond, cluster: &str) -> Result<Outcome, String> {
    check_cluster(&cond.clusters, cluster)?;
    let users: Vec<String> = cond.names.iter().chain(&cond.users).cloned().collect();
    let accounts = &cond.accounts;
    if users.is_empty() && accounts.is_empty() {
        return Err(" You need to specify a user list or an account list here.".into());
    }
    let mut out = Outcome::default();
    if !users.is_empty() {
        out.lines
            .push(" Removing Coordinators with user name".into());
        out.lines.extend(users.iter().map(|u| format!("  {u}")));
        if accounts.is_empty() {
            out.lines.push(" From all accounts".into());
        } else {
            out.lines.push(" From Account(s)".into());
            out.lines.extend(accounts.iter().map(|a| format!("  {a}")));
        }
    } else {
        out.lines.push(" Removing all users from Accounts".into());
        out.lines.extend(accounts.iter().map(|a| format!("  {a}")));
    }
    let mut removed = Vec::new();
    for u in t.users.values_mut() {
        if !Cond::any(&users, &u.name) {
            continue;
        }
        let mut mine = u.coord_accounts.clone();
        mine.sort();
        for a in mine.iter().filter(|a| Cond::any(accounts, a)) {
            removed.push(format!("  U = {:<9} A = {a:<10}", u.name));
        }
        u.coord_accounts.retain(|a| !Cond::any(accounts, a));
    }
    if removed.is_empty() {
        out.lines.push(" Nothing removed".into());
        return Ok(out);
    }
    out.lines
        .push(" Removed Coordinators (sub accounts not listed)...".into());
    out.lines.extend(removed);
    out.changed = true;
    Ok(out)
}

fn nothing(what: &str) -> Outcome {
    Outcome {
        lines: vec![format!(" Nothing {what}")],
        changed: false,
    }
}

fn modify(
    t: &mut AssocTree,
    entity: Entity,
    cond: &Cond,
    settings: &[Setting],
    cluster: &str,
) -> Result<Outcome, String> {
    check_cluster(&cond.clusters, cluster)?;
    if settings.is_empty() {
        return Err(" You didn't give me anything to set".into());
    }
    let mut out = Outcome::default();
    let known: Vec<String> = t.qos.keys().cloned().collect();
    let is_known = |n: &str| known.iter().any(|k| k == n);
    match entity {
        Entity::Account => {
            if cond.names.is_empty() && cond.accounts.is_empty() && cond.parents.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            let names: Vec<String> = cond.names.iter().chain(&cond.accounts).cloned().collect();
            let targets: Vec<String> = t
                .accounts
                .values()
                .filter(|a| Cond::any(&names, &a.name))
                .filter(|a| {
                    cond.parents.is_empty()
                        || a.parent.as_ref().is_some_and(|p| cond.parents.contains(p))
                })
                .map(|a| a.name.clone())
                .collect();
            if targets.is_empty() {
                return Ok(nothing("modified"));
            }
            let mut record = false;
            let mut assoc = false;
            for name in &targets {
                let mut a = t.accounts[name].clone();
                for s in settings {
                    match s.key.to_ascii_lowercase().as_str() {
                        "description" | "descr" => {
                            a.description = s.value.clone();
                            record = true;
                        }
                        "organization" | "org" => {
                            a.organization = s.value.clone();
                            record = true;
                        }
                        "parent" => {
                            if a.name == ROOT {
                                return Err(" The root account can not have a parent".into());
                            }
                            if !t.accounts.contains_key(&s.value) {
                                return Err(format!(
                                    " Parent account '{}' doesn't exist on cluster {cluster}",
                                    s.value
                                ));
                            }
                            if t.is_under(&s.value, &a.name) {
                                return Err(format!(
                                    " Can't move account {} below its own sub-account {}",
                                    a.name, s.value
                                ));
                            }
                            a.parent = Some(s.value.clone());
                            assoc = true;
                        }
                        _ => {
                            let f = AssocFields {
                                shares: &mut a.shares,
                                default_qos: &mut a.default_qos,
                                qos: &mut a.qos,
                                limits: &mut a.limits,
                            };
                            if !set_assoc(&is_known, f, s)? {
                                return Err(unknown(&s.key));
                            }
                            assoc = true;
                        }
                    }
                }
                t.accounts.insert(name.clone(), a);
            }
            if record {
                out.lines.push(" Modified accounts...".into());
                out.lines.extend(targets.iter().map(|n| format!("  {n}")));
            }
            if assoc {
                out.lines.push(" Modified account associations...".into());
                for n in &targets {
                    out.lines
                        .push(format!("  C = {cluster:<10.10} A = {n:<10.10}"));
                }
            }
        }
        Entity::User => {
            let names: Vec<String> = cond.names.iter().chain(&cond.users).cloned().collect();
            if names.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            let users: Vec<String> = t
                .users
                .keys()
                .filter(|u| names.contains(u))
                .cloned()
                .collect();
            if users.is_empty() {
                return Ok(nothing("modified"));
            }
            let mut user_set = Vec::new();
            let mut assoc_set = Vec::new();
            for s in settings {
                match s.key.to_ascii_lowercase().as_str() {
                    "defaultaccount" | "defaultacct" | "adminlevel" | "admin" => user_set.push(s),
                    "name" | "names" | "newname" | "account" | "accounts" | "partition" => {
                        return Err(format!(
                            " Can't set {} with modify; use add/delete user",
                            s.key
                        ));
                    }
                    _ => assoc_set.push(s),
                }
            }
            for u in &users {
                let mut rec = t.users[u].clone();
                for s in &user_set {
                    match s.key.to_ascii_lowercase().as_str() {
                        "adminlevel" | "admin" => {
                            rec.admin_level =
                                AdminLevel::parse(&s.value).map_err(|e| format!(" {e}"))?
                        }
                        _ => {
                            if !t
                                .user_assocs
                                .iter()
                                .any(|a| &a.user == u && a.account == s.value)
                            {
                                return Err(format!(
                                    " Can't modify because these users aren't associated with new default account '{}'...\n  U = {u}",
                                    s.value
                                ));
                            }
                            rec.default_account = s.value.clone();
                        }
                    }
                }
                t.users.insert(u.clone(), rec);
            }
            if !user_set.is_empty() {
                out.lines.push(" Modified users...".into());
                out.lines.extend(users.iter().map(|u| format!("  {u}")));
            }
            if !assoc_set.is_empty() {
                let mut touched = Vec::new();
                // `QOS+=`/`QOS-=` on an association that inherits its list edits the
                // inherited list (Slurm: `+=gpu` on a user with `normal` gives both).
                let edits_inherited = assoc_set.iter().any(|s| {
                    matches!(s.key.to_ascii_lowercase().as_str(), "qos" | "qoslevel")
                        && s.op != SetOp::Assign
                });
                let inherited: std::collections::HashMap<String, Vec<String>> = if edits_inherited {
                    t.user_assocs
                        .iter()
                        .map(|a| (a.account.clone(), t.account_qos(&a.account)))
                        .collect()
                } else {
                    Default::default()
                };
                for a in t.user_assocs.iter_mut() {
                    if !users.contains(&a.user)
                        || !Cond::any(&cond.accounts, &a.account)
                        || !(cond.partitions.is_empty()
                            || a.partition
                                .as_ref()
                                .is_some_and(|p| cond.partitions.contains(p)))
                    {
                        continue;
                    }
                    if a.qos.is_empty()
                        && let Some(list) = inherited.get(&a.account)
                    {
                        a.qos = list.clone();
                    }
                    for s in &assoc_set {
                        let f = AssocFields {
                            shares: &mut a.shares,
                            default_qos: &mut a.default_qos,
                            qos: &mut a.qos,
                            limits: &mut a.limits,
                        };
                        if !set_assoc(&is_known, f, s)? {
                            return Err(unknown(&s.key));
                        }
                    }
                    let mut l = format!(
                        "  C = {cluster:<10.10} A = {:<10.10} U = {:<9.9}",
                        a.account, a.user
                    );
                    if let Some(p) = &a.partition {
                        l.push_str(&format!(" P = {p:<10.10}"));
                    }
                    touched.push(l);
                }
                if touched.is_empty() {
                    return Ok(nothing("modified"));
                }
                out.lines.push(" Modified user associations...".into());
                out.lines.extend(touched);
            }
        }
        Entity::Qos => {
            if cond.names.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            let targets: Vec<String> = t
                .qos
                .keys()
                .filter(|q| cond.names.contains(q))
                .cloned()
                .collect();
            if targets.is_empty() {
                return Ok(nothing("modified"));
            }
            for n in &targets {
                let mut q = t.qos[n].clone();
                for s in settings {
                    set_qos(&is_known, &mut q, s)?;
                }
                t.qos.insert(n.clone(), q);
            }
            out.lines.push(" Modified qos...".into());
            out.lines.extend(targets.iter().map(|n| format!("  {n}")));
        }
        Entity::Cluster | Entity::Association => {
            return Err(" Modifying clusters and bare associations is not supported yet by sluice; modify the account or user".into());
        }
        Entity::Coordinator => {
            return Err(
                " Coordinators are not modified: use 'add coordinator' or 'delete coordinator'"
                    .into(),
            );
        }
    }
    out.changed = true;
    Ok(out)
}

fn delete(
    t: &mut AssocTree,
    entity: Entity,
    cond: &Cond,
    cluster: &str,
) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    match entity {
        Entity::Cluster => {
            let gone: Vec<String> = t
                .clusters
                .iter()
                .filter(|c| cond.names.contains(&c.name) || cond.clusters.contains(&c.name))
                .map(|c| c.name.clone())
                .collect();
            if gone.is_empty() {
                return Ok(nothing("deleted"));
            }
            t.clusters.retain(|c| !gone.contains(&c.name));
            out.lines.push(" Deleting clusters...".into());
            out.lines.extend(gone.iter().map(|n| format!("  {n}")));
        }
        Entity::Account => {
            check_cluster(&cond.clusters, cluster)?;
            let names: Vec<String> = cond.names.iter().chain(&cond.accounts).cloned().collect();
            if names.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            if names.iter().any(|n| n == ROOT) {
                return Err(" The root account can not be deleted".into());
            }
            let gone: Vec<String> = t
                .accounts
                .keys()
                .filter(|a| names.contains(a))
                .cloned()
                .collect();
            if gone.is_empty() {
                return Ok(nothing("deleted"));
            }
            for g in &gone {
                let kids: Vec<String> = t
                    .child_accounts(g)
                    .map(|a| a.name.clone())
                    .filter(|k| !gone.contains(k))
                    .collect();
                if !kids.is_empty() {
                    return Err(format!(
                        " Error with request: account {g} has sub-accounts ({}); delete or move them first",
                        kids.join(",")
                    ));
                }
            }
            let hit = |a: &UserAssoc| gone.contains(&a.account);
            let conflicts = default_conflicts(t, &hit, cluster);
            if !conflicts.is_empty() {
                return Err(format!(
                    " Error with request: {NO_REMOVE_DEFAULT}\n{}\n Please either remove the accounts listed above from list and resubmit,\n or change these users' default accounts to remove the account(s).\n Changes Discarded",
                    conflicts.join("\n")
                ));
            }
            let orphans = orphaned_users(t, &hit);
            for g in &gone {
                t.accounts.remove(g);
            }
            for u in t.users.values_mut() {
                u.coord_accounts.retain(|a| !gone.contains(a));
            }
            t.user_assocs.retain(|a| !hit(a));
            fix_users(t);
            out.lines.push(" Deleting accounts...".into());
            out.lines.extend(gone.iter().map(|n| format!("  {n}")));
            push_orphans(&mut out, &orphans);
        }
        Entity::User => {
            check_cluster(&cond.clusters, cluster)?;
            let names: Vec<String> = cond.names.iter().chain(&cond.users).cloned().collect();
            if names.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            if names.iter().any(|n| n == ROOT) && cond.accounts.is_empty() {
                return Err(" The root user can not be deleted".into());
            }
            if cond.accounts.is_empty() && cond.partitions.is_empty() {
                let gone: Vec<String> = t
                    .users
                    .keys()
                    .filter(|u| names.contains(u))
                    .cloned()
                    .collect();
                if gone.is_empty() {
                    return Ok(nothing("deleted"));
                }
                for g in &gone {
                    t.users.remove(g);
                }
                t.user_assocs.retain(|a| !gone.contains(&a.user));
                out.lines.push(" Deleting users...".into());
                out.lines.extend(gone.iter().map(|n| format!("  {n}")));
            } else {
                let hit = |a: &UserAssoc| {
                    names.contains(&a.user)
                        && Cond::any(&cond.accounts, &a.account)
                        && (cond.partitions.is_empty()
                            || a.partition
                                .as_ref()
                                .is_some_and(|p| cond.partitions.contains(p)))
                };
                let lines: Vec<String> = t
                    .user_assocs
                    .iter()
                    .filter(|a| hit(a))
                    .map(|a| {
                        format!(
                            "  C = {cluster:<10.10} A = {:<10.10} U = {:<9.9}",
                            a.account, a.user
                        )
                    })
                    .collect();
                if lines.is_empty() {
                    return Ok(nothing("deleted"));
                }
                let conflicts = default_conflicts(t, &hit, cluster);
                if !conflicts.is_empty() {
                    return Err(format!(
                        " Error with request: {NO_REMOVE_DEFAULT}\n{}\n You must change the default account of these users or remove the users completely from the affected accounts",
                        conflicts.join("\n")
                    ));
                }
                let orphans = orphaned_users(t, &hit);
                t.user_assocs.retain(|a| !hit(a));
                fix_users(t);
                out.lines.push(" Deleting user associations...".into());
                out.lines.extend(lines);
                push_orphans(&mut out, &orphans);
            }
        }
        Entity::Qos => {
            if cond.names.is_empty() {
                return Err(" No conditions given (where Name=...)".into());
            }
            if cond.names.iter().any(|n| n == NORMAL_QOS) {
                return Err(" The normal QOS can not be deleted".into());
            }
            let gone: Vec<String> = t
                .qos
                .keys()
                .filter(|q| cond.names.contains(q))
                .cloned()
                .collect();
            if gone.is_empty() {
                return Ok(nothing("deleted"));
            }
            for g in &gone {
                t.qos.remove(g);
            }
            let strip = |list: &mut Vec<String>| list.retain(|q| !gone.contains(q));
            let strip_def = |d: &mut Option<String>| {
                if d.as_ref().is_some_and(|q| gone.contains(q)) {
                    *d = None;
                }
            };
            for a in t.accounts.values_mut() {
                strip(&mut a.qos);
                strip_def(&mut a.default_qos);
            }
            for a in &mut t.user_assocs {
                strip(&mut a.qos);
                strip_def(&mut a.default_qos);
            }
            for q in t.qos.values_mut() {
                strip(&mut q.preempt);
            }
            out.lines.push(" Deleting QOS(s)...".into());
            out.lines.extend(gone.iter().map(|n| format!("  {n}")));
        }
        Entity::Association => {
            return Err(" Use 'delete user … account=…' to delete associations.".into());
        }
        Entity::Coordinator => return remove_coord(t, cond, cluster),
    }
    out.changed = true;
    Ok(out)
}

/// Applies a flat file's records in order (cf. file_functions.c): what the tree lacks
/// is added with the file's settings; a record the tree already has takes the file's
/// values (description, organization, parent, fair-share, limits, DefaultQOS; QOS
/// the file lists are added; a user's DefaultAccount and AdminLevel), and each change
/// is reported as sacctmgr reports it (` Changed MaxJobs  for User alice  2 -> 4`).
/// Values the file leaves out stay. All or nothing: [`apply`] works on a copy.
fn load(t: &mut AssocTree, ops: &[AcctOp], cluster: &str) -> Result<Outcome, String> {
    let mut out = Outcome::default();
    let mut changes: Vec<String> = Vec::new();
    // A user's DefaultAccount may be an account a later line creates: it is set
    // once every line is in.
    let before: Vec<String> = t.users.keys().cloned().collect();
    let mut defaults: Vec<(String, String)> = Vec::new();
    for op in ops {
        let AcctOp::Add {
            entity,
            names,
            settings,
        } = op
        else {
            return Err(" A load holds only additions".into());
        };
        match entity {
            Entity::Account => {
                let (old, new): (Vec<String>, Vec<String>) = names
                    .iter()
                    .cloned()
                    .partition(|n| t.accounts.contains_key(n));
                for n in &old {
                    changes.extend(modify_account_from_file(t, n, settings, cluster)?);
                }
                if !new.is_empty() {
                    let o = add(t, Entity::Account, &new, settings, cluster)?;
                    out.changed |= o.changed;
                    out.lines.extend(o.lines);
                }
            }
            Entity::User => {
                let default = get_raw(settings, &["defaultaccount", "defaultacct"]);
                let admin = get_raw(settings, &["adminlevel", "admin"]);
                let acct = get_raw(settings, &["account"]).unwrap_or_default();
                let part = get_raw(settings, &["partition"]);
                let mut plain = settings.clone();
                plain.retain(|s| {
                    !matches!(
                        s.key.to_ascii_lowercase().as_str(),
                        "defaultaccount" | "defaultacct"
                    )
                });
                for n in names {
                    if let Some(d) = &default {
                        defaults.push((n.clone(), d.clone()));
                    }
                    let existing = t
                        .user_assocs
                        .iter()
                        .position(|a| &a.user == n && a.account == acct && a.partition == part);
                    match existing {
                        Some(i) => {
                            changes.extend(modify_assoc_from_file(t, i, settings)?);
                        }
                        None => {
                            let o = add(t, Entity::User, std::slice::from_ref(n), &plain, cluster)?;
                            out.changed |= o.changed;
                            out.lines.extend(o.lines);
                        }
                    }
                    if let (Some(a), Some(u)) = (&admin, t.users.get_mut(n))
                        && before.contains(n)
                    {
                        let level = AdminLevel::parse(a).map_err(|e| format!(" {e}"))?;
                        if u.admin_level != level {
                            changes.push(changed_line(
                                " Changed Admin Level",
                                "User",
                                n,
                                u.admin_level.as_str(),
                                level.as_str(),
                            ));
                            u.admin_level = level;
                        }
                    }
                }
            }
            _ => {
                let o = add(t, *entity, names, settings, cluster)?;
                out.changed |= o.changed;
                out.lines.extend(o.lines);
            }
        }
    }
    for (u, d) in defaults {
        if !t.user_assocs.iter().any(|a| a.user == u && a.account == d) {
            return Err(format!(
                " User {u}: DefaultAccount '{d}' is not one of their accounts in the file"
            ));
        }
        if let Some(user) = t.users.get_mut(&u)
            && user.default_account != d
        {
            if before.contains(&u) {
                changes.push(changed_line(
                    " Changed Default Account",
                    "User",
                    &u,
                    &user.default_account,
                    &d,
                ));
            }
            user.default_account = d;
        }
    }
    if !changes.is_empty() {
        out.changed = true;
        out.lines.extend(changes);
    }
    if !out.changed && out.lines.is_empty() {
        out.lines.push(" Nothing new added.".into());
    }
    Ok(out)
}

/// One line of what a load changed, as sacctmgr prints it.
fn changed_line(what: &str, kind: &str, name: &str, old: &str, new: &str) -> String {
    format!("{what:<30.30} for {kind:<7.7} {name:<10.10} {old:>8} -> {new}")
}

/// The association fields a flat file may set, as `(label, text)` for the change
/// lines (Slurm's labels; `-1`/`(null)` for unset, as sacctmgr prints them).
fn assoc_texts(
    shares: Shares,
    default_qos: &Option<String>,
    l: &Limits,
) -> Vec<(&'static str, String)> {
    let n = |v: Option<u32>| v.map_or("-1".to_string(), |v| v.to_string());
    let t = |m: &TresMap| {
        if m.is_empty() {
            "(null)".to_string()
        } else {
            m.to_string()
        }
    };
    vec![
        (" Changed fairshare", shares.to_string()),
        (" Changed GrpTRESMins", t(&l.grp_tres_mins)),
        (" Changed GrpTRESRunMins", t(&l.grp_tres_run_mins)),
        (" Changed GrpTRES", t(&l.grp_tres)),
        (" Changed GrpJobs", n(l.grp_jobs)),
        (" Changed GrpSubmitJobs", n(l.grp_submit_jobs)),
        (" Changed GrpWallDuration", n(l.grp_wall_mins)),
        (" Changed MaxTRESMinsPerJob", t(&l.max_tres_mins_per_job)),
        (" Changed MaxTRESPerJob", t(&l.max_tres_per_job)),
        (" Changed MaxTRESPerNode", t(&l.max_tres_per_node)),
        (" Changed MaxJobs", n(l.max_jobs)),
        (" Changed MaxSubmitJobs", n(l.max_submit_jobs)),
        (" Changed MaxWallDurationPerJob", n(l.max_wall_mins)),
        (
            " Changed DefaultQOS",
            default_qos.clone().unwrap_or_else(|| "(null)".into()),
        ),
    ]
}

/// Applies a file record's association settings to `f` (QOS only added to, as
/// Slurm's load does) and returns the change lines for `kind` `name`.
fn assoc_from_file(
    known: &dyn Fn(&str) -> bool,
    f: AssocFields,
    settings: &[&Setting],
    kind: &str,
    name: &str,
) -> Result<Vec<String>, String> {
    let before = assoc_texts(*f.shares, f.default_qos, f.limits);
    let mut added_qos: Vec<String> = Vec::new();
    for s in settings {
        if matches!(s.key.to_ascii_lowercase().as_str(), "qos" | "qoslevel") {
            for q in split_list(&s.value) {
                if !known(&q) {
                    return Err(bad_qos(&q));
                }
                if !f.qos.contains(&q) && !added_qos.contains(&q) {
                    added_qos.push(q);
                }
            }
            continue;
        }
        let g = AssocFields {
            shares: &mut *f.shares,
            default_qos: &mut *f.default_qos,
            qos: &mut *f.qos,
            limits: &mut *f.limits,
        };
        if !set_assoc(known, g, s)? {
            return Err(unknown(&s.key));
        }
    }
    let after = assoc_texts(*f.shares, f.default_qos, f.limits);
    let mut lines: Vec<String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.1 != a.1)
        .map(|(b, a)| changed_line(b.0, kind, name, &b.1, &a.1))
        .collect();
    if !added_qos.is_empty() {
        f.qos.extend(added_qos);
        lines.push(format!(
            "{:<30.30} for {kind:<7.7} {name:<10.10} {:>8}",
            " Added QOS",
            f.qos.join(",")
        ));
    }
    Ok(lines)
}

/// A file's `Account` record for an account the tree has: its description,
/// organization, parent and association settings take the file's values.
fn modify_account_from_file(
    t: &mut AssocTree,
    name: &str,
    settings: &[Setting],
    cluster: &str,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let known: Vec<String> = t.qos.keys().cloned().collect();
    let is_known = |n: &str| known.iter().any(|k| k == n);
    let mut a = t.accounts[name].clone();
    let mut assoc: Vec<&Setting> = Vec::new();
    for s in settings {
        match s.key.to_ascii_lowercase().as_str() {
            "description" | "descr" if s.value != a.description => {
                lines.push(changed_line(
                    " Changed description",
                    "Account",
                    name,
                    &a.description,
                    &s.value,
                ));
                a.description = s.value.clone();
            }
            "organization" | "org" if s.value != a.organization => {
                lines.push(changed_line(
                    " Changed organization",
                    "Account",
                    name,
                    &a.organization,
                    &s.value,
                ));
                a.organization = s.value.clone();
            }
            "parent" if a.name != ROOT && a.parent.as_deref() != Some(s.value.as_str()) => {
                if !t.accounts.contains_key(&s.value) {
                    return Err(format!(
                        " Parent account '{}' doesn't exist on cluster {cluster}",
                        s.value
                    ));
                }
                if t.is_under(&s.value, name) {
                    return Err(format!(
                        " Can't move account {name} below its own sub-account {}",
                        s.value
                    ));
                }
                lines.push(changed_line(
                    " Changed Parent",
                    "Account",
                    name,
                    a.parent.as_deref().unwrap_or(""),
                    &s.value,
                ));
                a.parent = Some(s.value.clone());
            }
            "description" | "descr" | "organization" | "org" | "parent" | "name" | "names"
            | "cluster" | "clusters" => {}
            _ => assoc.push(s),
        }
    }
    let f = AssocFields {
        shares: &mut a.shares,
        default_qos: &mut a.default_qos,
        qos: &mut a.qos,
        limits: &mut a.limits,
    };
    let kind = if name == ROOT { "Cluster" } else { "Account" };
    let shown = if name == ROOT { cluster } else { name };
    lines.extend(assoc_from_file(&is_known, f, &assoc, kind, shown)?);
    t.accounts.insert(name.to_string(), a);
    Ok(lines)
}

/// A file's `User` record for an association the tree has (index `i`): its
/// association settings take the file's values.
fn modify_assoc_from_file(
    t: &mut AssocTree,
    i: usize,
    settings: &[Setting],
) -> Result<Vec<String>, String> {
    let known: Vec<String> = t.qos.keys().cloned().collect();
    let is_known = |n: &str| known.iter().any(|k| k == n);
    let assoc: Vec<&Setting> = settings
        .iter()
        .filter(|s| {
            !matches!(
                s.key.to_ascii_lowercase().as_str(),
                "defaultaccount"
                    | "defaultacct"
                    | "adminlevel"
                    | "admin"
                    | "account"
                    | "partition"
                    | "name"
                    | "names"
                    | "cluster"
                    | "clusters"
            )
        })
        .collect();
    let a = &mut t.user_assocs[i];
    let name = a.user.clone();
    let f = AssocFields {
        shares: &mut a.shares,
        default_qos: &mut a.default_qos,
        qos: &mut a.qos,
        limits: &mut a.limits,
    };
    assoc_from_file(&is_known, f, &assoc, "User", &name)
}

/// Slurm's text for ESLURM_NO_REMOVE_DEFAULT_ACCOUNT (src/common/slurm_errno.c).
const NO_REMOVE_DEFAULT: &str = "You can not remove the default account of a user";

/// The users whose default-account association `hit` would remove while they keep
/// another association (Slurm refuses that: as_mysql_remove_assocs returns
/// ESLURM_NO_REMOVE_DEFAULT_ACCOUNT), one sacctmgr line each.
fn default_conflicts(
    t: &AssocTree,
    hit: &dyn Fn(&UserAssoc) -> bool,
    cluster: &str,
) -> Vec<String> {
    t.users
        .values()
        .filter(|u| {
            let mine = || t.assocs_of_user(&u.name);
            mine().any(|a| a.account == u.default_account && a.partition.is_none() && hit(a))
                && mine().any(|a| !hit(a))
        })
        .map(|u| {
            format!(
                "  C = {cluster:<10.10} A = {:<10.10} U = {:<9.9}",
                u.default_account, u.name
            )
        })
        .collect()
}

/// The users (other than root) every association of whom `hit` removes: they are
/// removed with their last association, and the summary says so.
fn orphaned_users(t: &AssocTree, hit: &dyn Fn(&UserAssoc) -> bool) -> Vec<String> {
    t.users
        .keys()
        .filter(|u| *u != ROOT)
        .filter(|u| {
            let mut mine = t.assocs_of_user(u).peekable();
            mine.peek().is_some() && mine.all(hit)
        })
        .cloned()
        .collect()
}

/// Adds the users removed with their last association to the summary, so that a
/// delete never drops a user record without saying so.
fn push_orphans(out: &mut Outcome, orphans: &[String]) {
    if !orphans.is_empty() {
        out.lines
            .push(" Deleting users left without an association...".into());
        out.lines.extend(orphans.iter().map(|n| format!("  {n}")));
    }
}

/// After associations were removed: users left without any are removed, and a user
/// whose default account went gets their first remaining one.
fn fix_users(t: &mut AssocTree) {
    let assocs = &t.user_assocs;
    t.users
        .retain(|u, _| u == ROOT || assocs.iter().any(|a| &a.user == u));
    for u in t.users.values_mut() {
        if !assocs
            .iter()
            .any(|a| a.user == u.name && a.account == u.default_account)
            && let Some(a) = assocs.iter().find(|a| a.user == u.name)
        {
            u.default_account = a.account.clone();
        }
    }
}

pub mod flat;

#[cfg(test)]
mod tests;
