//! The pure limit checks, one scenario per limit: the reason is Slurm's, and the job
//! under the limit is not held.

use super::*;
use crate::model::assoc::{Account, ROOT, User, UserAssoc};
use crate::model::gres::GresReq;
use crate::model::{JobSpec, TimeLimit};

fn tree() -> AssocTree {
    let mut t = AssocTree::default();
    t.accounts
        .insert("phys".into(), Account::new("phys", Some(ROOT)));
    t.accounts
        .insert("theory".into(), Account::new("theory", Some("phys")));
    for u in ["alice", "bob"] {
        t.users.insert(
            u.into(),
            User {
                name: u.into(),
                default_account: "theory".into(),
                admin_level: Default::default(),
                coord_accounts: Vec::new(),
            },
        );
        t.user_assocs.push(UserAssoc::new(u, "theory", None));
    }
    t
}

fn enforce() -> Enforce {
    Enforce::parse("associations,limits,qos").unwrap()
}

fn job(id: u32, user: &str, state: JobState, cpus: u32) -> Job {
    Job {
        id,
        user: user.into(),
        account: "theory".into(),
        qos: "normal".into(),
        partition: "p".into(),
        req_cpus: cpus,
        req_tasks: cpus,
        time_limit: TimeLimit::Minutes(60),
        state,
        start_time: (state == JobState::Running).then_some(0),
        ..Job::default()
    }
}

fn reason(t: &AssocTree, e: Enforce, jobs: &[Job], j: &Job) -> Option<&'static str> {
    let used = UsedMins::default();
    reason_used(t, e, &used, jobs, j)
}

fn reason_used(
    t: &AssocTree,
    e: Enforce,
    used: &UsedMins,
    jobs: &[Job],
    j: &Job,
) -> Option<&'static str> {
    let refs: Vec<&Job> = jobs.iter().collect();
    let st = LimitState::new(
        Policy {
            fairshare: None,
            partition_qos: None,
            billing: None,
            tree: t,
            enforce: e,
            used,
        },
        &refs,
        0,
    );
    st.check(j).map(|r| r.as_str())
}

fn user_limits<'a>(t: &'a mut AssocTree, user: &str) -> &'a mut Limits {
    &mut t
        .user_assocs
        .iter_mut()
        .find(|a| a.user == user)
        .unwrap()
        .limits
}

#[test]
fn nothing_enforced_without_limits_flag() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_jobs = Some(0);
    let j = job(1, "alice", JobState::Pending, 1);
    assert_eq!(
        reason(&t, Enforce::parse("associations").unwrap(), &[], &j),
        None
    );
    assert_eq!(reason(&t, enforce(), &[], &j), Some("AssocMaxJobsLimit"));
}

#[test]
fn max_jobs_counts_running_jobs_of_the_association() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_jobs = Some(1);
    let running = job(1, "alice", JobState::Running, 1);
    let waiting = job(2, "alice", JobState::Pending, 1);
    assert_eq!(
        reason(&t, enforce(), std::slice::from_ref(&running), &waiting),
        Some("AssocMaxJobsLimit")
    );
    // bob's association is another one.
    let bobs = job(3, "bob", JobState::Pending, 1);
    assert_eq!(
        reason(&t, enforce(), std::slice::from_ref(&running), &bobs),
        None
    );
    // Nothing running: free to start.
    assert_eq!(reason(&t, enforce(), &[], &waiting), None);
}

#[test]
fn max_jobs_is_inherited_from_the_account() {
    let mut t = tree();
    t.accounts.get_mut("phys").unwrap().limits.max_jobs = Some(1);
    let jobs = [job(1, "alice", JobState::Running, 1)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 1)),
        Some("AssocMaxJobsLimit")
    );
    // Inherited per association: bob has his own allowance.
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(3, "bob", JobState::Pending, 1)),
        None
    );
}

#[test]
fn grp_limits_of_an_ancestor_count_the_whole_subtree() {
    let mut t = tree();
    let l = &mut t.accounts.get_mut("phys").unwrap().limits;
    l.grp_jobs = Some(2);
    let jobs = [
        job(1, "alice", JobState::Running, 1),
        job(2, "bob", JobState::Running, 1),
    ];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(3, "alice", JobState::Pending, 1)),
        Some("AssocGrpJobsLimit")
    );
    let mut t = tree();
    t.accounts.get_mut("phys").unwrap().limits.grp_tres = TresMap::parse("cpu=8").unwrap();
    let jobs = [job(1, "bob", JobState::Running, 6)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 4)),
        Some("AssocGrpCpuLimit")
    );
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 2)),
        None
    );
}

#[test]
fn grp_gres_and_gres_minutes() {
    let mut t = tree();
    user_limits(&mut t, "alice").grp_tres = TresMap::parse("gres/gpu=2").unwrap();
    let gpu_job = |id, state| Job {
        spec: JobSpec {
            gres: vec![GresReq {
                name: "gpu".into(),
                kind: None,
                count: 2,
            }],
            ..JobSpec::default()
        },
        ..job(id, "alice", state, 1)
    };
    let jobs = [gpu_job(1, JobState::Running)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &gpu_job(2, JobState::Pending)),
        Some("AssocGrpGRES")
    );
    // A CPU-only job is not held by a GPU limit.
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(3, "alice", JobState::Pending, 1)),
        None
    );

    let mut t = tree();
    user_limits(&mut t, "alice").grp_tres_mins = TresMap::parse("gres/gpu=600").unwrap();
    let mut used = UsedMins::default();
    used.users.insert(
        ("alice".into(), "theory".into()),
        HashMap::from([("gres/gpu".to_string(), 600.0)]),
    );
    assert_eq!(
        reason_used(&t, enforce(), &used, &[], &gpu_job(2, JobState::Pending)),
        Some("AssocGrpGRESMinutes")
    );
    // acct_policy.c checks the usage of a TRES only for a job that asks it.
    let cpu_only = job(3, "alice", JobState::Pending, 1);
    assert_eq!(reason_used(&t, enforce(), &used, &[], &cpu_only), None);
    used.users.clear();
    assert_eq!(
        reason_used(&t, enforce(), &used, &[], &gpu_job(2, JobState::Pending)),
        None
    );
}

#[test]
fn safe_holds_a_job_that_could_not_finish_within_grp_tres_mins() {
    let mut t = tree();
    user_limits(&mut t, "alice").grp_tres_mins = TresMap::parse("cpu=100").unwrap();
    // 2 CPUs × 60 minutes = 120 CPU-minutes > 100.
    let j = job(1, "alice", JobState::Pending, 2);
    assert_eq!(reason(&t, enforce(), &[], &j), None);
    assert_eq!(
        reason(&t, Enforce::parse("safe").unwrap(), &[], &j),
        Some("AssocGrpCPUMinutesLimit")
    );
}

#[test]
fn grp_cpu_run_minutes() {
    let mut t = tree();
    user_limits(&mut t, "alice").grp_tres_run_mins = TresMap::parse("cpu=100").unwrap();
    let jobs = [job(1, "alice", JobState::Running, 1)]; // 60 CPU-minutes left
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 1)),
        Some("AssocGrpCPURunMinutesLimit")
    );
    assert_eq!(
        reason(&t, enforce(), &[], &job(2, "alice", JobState::Pending, 1)),
        None
    );
}

#[test]
fn max_wall_and_per_job_tres() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_wall_mins = Some(30);
    let j = job(1, "alice", JobState::Pending, 1);
    assert_eq!(
        reason(&t, enforce(), &[], &j),
        Some("AssocMaxWallDurationPerJobLimit")
    );
    let mut t = tree();
    user_limits(&mut t, "alice").max_tres_per_job = TresMap::parse("cpu=2").unwrap();
    assert_eq!(
        reason(&t, enforce(), &[], &job(1, "alice", JobState::Pending, 4)),
        Some("AssocMaxCpuPerJobLimit")
    );
    let mut t = tree();
    user_limits(&mut t, "alice").max_tres_mins_per_job = TresMap::parse("cpu=100").unwrap();
    assert_eq!(
        reason(&t, enforce(), &[], &job(1, "alice", JobState::Pending, 2)),
        Some("AssocMaxCpuMinutesPerJobLimit")
    );
}

#[test]
fn qos_limits_per_user_and_group() {
    let mut t = tree();
    let q = t.qos.get_mut("normal").unwrap();
    q.limits.max_jobs_per_user = Some(1);
    let jobs = [job(1, "alice", JobState::Running, 1)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 1)),
        Some("QOSMaxJobsPerUserLimit")
    );
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(3, "bob", JobState::Pending, 1)),
        None
    );
    let mut t = tree();
    let q = t.qos.get_mut("normal").unwrap();
    q.limits.max_tres_per_user = TresMap::parse("gres/gpu=1").unwrap();
    q.limits.grp_tres = TresMap::parse("cpu=3").unwrap();
    let gpu = Job {
        spec: JobSpec {
            gpus: Some(GresReq {
                name: "gpu".into(),
                kind: None,
                count: 2,
            }),
            ..JobSpec::default()
        },
        ..job(1, "alice", JobState::Pending, 1)
    };
    assert_eq!(reason(&t, enforce(), &[], &gpu), Some("QOSMaxGRESPerUser"));
    let jobs = [job(1, "bob", JobState::Running, 2)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 2)),
        Some("QOSGrpCpuLimit")
    );
}

#[test]
fn qos_is_checked_before_the_association() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_jobs = Some(1);
    t.qos.get_mut("normal").unwrap().limits.grp_jobs = Some(1);
    let jobs = [job(1, "alice", JobState::Running, 1)];
    assert_eq!(
        reason(&t, enforce(), &jobs, &job(2, "alice", JobState::Pending, 1)),
        Some("QOSGrpJobsLimit")
    );
}

#[test]
fn charge_counts_jobs_started_in_the_same_pass() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_jobs = Some(1);
    let used = UsedMins::default();
    let a = job(1, "alice", JobState::Pending, 1);
    let b = job(2, "alice", JobState::Pending, 1);
    let jobs = [&a, &b];
    let mut st = LimitState::new(
        Policy {
            fairshare: None,
            partition_qos: None,
            billing: None,
            tree: &t,
            enforce: enforce(),
            used: &used,
        },
        &jobs,
        0,
    );
    assert_eq!(st.check(&a), None);
    st.charge(&a);
    assert_eq!(st.check(&b).map(|r| r.as_str()), Some("AssocMaxJobsLimit"));
}

#[test]
fn submit_limits_refuse_and_deny_on_limit_refuses_what_pends_otherwise() {
    let mut t = tree();
    user_limits(&mut t, "alice").max_submit_jobs = Some(2);
    let used = UsedMins::default();
    let queued = [
        job(1, "alice", JobState::Running, 1),
        job(2, "alice", JobState::Pending, 1),
    ];
    let refs: Vec<&Job> = queued.iter().collect();
    let p = Policy {
        fairshare: None,
        partition_qos: None,
        billing: None,
        tree: &t,
        enforce: enforce(),
        used: &used,
    };
    let st = LimitState::new(p, &refs, 0);
    let new = job(3, "alice", JobState::Pending, 1);
    assert_eq!(
        st.submit_check(&new).unwrap_err().as_str(),
        "AssocMaxSubmitJobLimit"
    );
    assert!(
        st.submit_check(&job(3, "bob", JobState::Pending, 1))
            .is_ok()
    );

    let mut t = tree();
    t.qos
        .get_mut("normal")
        .unwrap()
        .limits
        .max_submit_jobs_per_user = Some(1);
    t.qos.get_mut("normal").unwrap().limits.max_tres_per_job = TresMap::parse("cpu=2").unwrap();
    let p = Policy {
        fairshare: None,
        partition_qos: None,
        billing: None,
        tree: &t,
        enforce: enforce(),
        used: &used,
    };
    let st = LimitState::new(p, &refs, 0);
    assert_eq!(
        st.submit_check(&new).unwrap_err().as_str(),
        "QOSMaxSubmitJobPerUserLimit"
    );
    let st = LimitState::new(p, &[], 0);
    let big = job(3, "alice", JobState::Pending, 4);
    assert!(st.submit_check(&big).is_ok(), "pends without DenyOnLimit");
    t.qos
        .get_mut("normal")
        .unwrap()
        .flags
        .push(QosFlag::DenyOnLimit);
    let p = Policy {
        fairshare: None,
        partition_qos: None,
        billing: None,
        tree: &t,
        enforce: enforce(),
        used: &used,
    };
    let st = LimitState::new(p, &[], 0);
    assert_eq!(
        st.submit_check(&big).unwrap_err().as_str(),
        "QOSMaxCpuPerJobLimit"
    );
}

#[test]
fn partition_association_is_used_for_its_partition() {
    let mut t = tree();
    let mut pa = UserAssoc::new("alice", "theory", Some("gpu"));
    pa.limits.max_jobs = Some(0);
    t.user_assocs.push(pa);
    let j = job(1, "alice", JobState::Pending, 1);
    assert_eq!(reason(&t, enforce(), &[], &j), None);
    let in_gpu = Job {
        partition: "gpu".into(),
        ..j
    };
    assert_eq!(
        reason(&t, enforce(), &[], &in_gpu),
        Some("AssocMaxJobsLimit")
    );
}

#[test]
fn grp_wall_holds_once_the_groups_wall_minutes_are_used() {
    let mut t = tree();
    t.accounts.get_mut("phys").unwrap().limits.grp_wall_mins = Some(100);
    let j = job(1, "alice", JobState::Pending, 1);
    let mut used = UsedMins::default();
    used.record_wall(&t, ("bob", "theory", "normal"), 99.0);
    assert_eq!(reason_used(&t, enforce(), &used, &[], &j), None);
    // bob's minutes count for phys (an ancestor), so alice waits too.
    used.record_wall(&t, ("bob", "theory", "normal"), 1.0);
    assert_eq!(
        reason_used(&t, enforce(), &used, &[], &j),
        Some("AssocGrpWallLimit")
    );
    // Decay brings it back under.
    used.scale(0.5);
    assert_eq!(reason_used(&t, enforce(), &used, &[], &j), None);
    // A user association's own GrpWall and a QOS's.
    let mut t = tree();
    user_limits(&mut t, "alice").grp_wall_mins = Some(10);
    let mut used = UsedMins::default();
    used.record_wall(&t, ("alice", "theory", "normal"), 10.0);
    assert_eq!(
        reason_used(&t, enforce(), &used, &[], &j),
        Some("AssocGrpWallLimit")
    );
    let bobs = job(2, "bob", JobState::Pending, 1);
    assert_eq!(reason_used(&t, enforce(), &used, &[], &bobs), None);
    t.qos.get_mut("normal").unwrap().limits.grp_wall_mins = Some(5);
    assert_eq!(
        reason_used(&t, enforce(), &used, &[], &bobs),
        Some("QOSGrpWallLimit")
    );
}

#[test]
fn qos_min_tres_holds_jobs_asking_too_little() {
    let mut t = tree();
    t.qos.get_mut("normal").unwrap().limits.min_tres_per_job = TresMap::parse("cpu=4").unwrap();
    assert_eq!(
        reason(&t, enforce(), &[], &job(1, "alice", JobState::Pending, 2)),
        Some("QOSMinCpuNotSatisfied")
    );
    assert_eq!(
        reason(&t, enforce(), &[], &job(1, "alice", JobState::Pending, 4)),
        None
    );
    t.qos.get_mut("normal").unwrap().limits.min_tres_per_job =
        TresMap::parse("gres/gpu=1").unwrap();
    assert_eq!(
        reason(&t, enforce(), &[], &job(1, "alice", JobState::Pending, 4)),
        Some("QOSMinGRES")
    );
    // DenyOnLimit refuses it at submit.
    t.qos.get_mut("normal").unwrap().flags = vec![QosFlag::DenyOnLimit];
    let used = UsedMins::default();
    let st = LimitState::new(
        Policy {
            fairshare: None,
            partition_qos: None,
            billing: None,
            tree: &t,
            enforce: enforce(),
            used: &used,
        },
        &[],
        0,
    );
    assert_eq!(
        st.submit_check(&job(1, "alice", JobState::Pending, 4))
            .map_err(|r| r.as_str()),
        Err("QOSMinGRES")
    );
}

#[test]
fn usage_threshold_holds_associations_below_it() {
    let mut t = tree();
    {
        let q = t.qos.get_mut("normal").unwrap();
        q.usage_threshold = Some(0.5);
        q.flags = vec![QosFlag::EnforceUsageThreshold];
    }
    let fs = HashMap::from([
        (("theory".to_string(), "alice".to_string()), 0.2),
        (("theory".to_string(), "bob".to_string()), 0.7),
    ]);
    let used = UsedMins::default();
    let check = |t: &AssocTree, j: &Job| {
        LimitState::new(
            Policy {
                fairshare: Some(&fs),
                partition_qos: None,
                billing: None,
                tree: t,
                enforce: enforce(),
                used: &used,
            },
            &[],
            0,
        )
        .check(j)
        .map(|r| r.as_str())
    };
    assert_eq!(
        check(&t, &job(1, "alice", JobState::Pending, 1)),
        Some("QOSUsageThreshold")
    );
    assert_eq!(check(&t, &job(2, "bob", JobState::Pending, 1)), None);
    // Without the flag the threshold is not enforced.
    t.qos.get_mut("normal").unwrap().flags.clear();
    assert_eq!(check(&t, &job(1, "alice", JobState::Pending, 1)), None);
}

/// A policy over `t` whose partition `p` has the QOS `part`.
fn part_policy<'a>(
    t: &'a AssocTree,
    used: &'a UsedMins,
    parts: &'a HashMap<String, String>,
) -> Policy<'a> {
    Policy {
        fairshare: None,
        partition_qos: Some(parts),
        billing: None,
        tree: t,
        enforce: enforce(),
        used,
    }
}

/// A tree with the job QOS `normal` and the partition QOS `pq`.
fn tree_with_part_qos() -> AssocTree {
    let mut t = tree();
    t.qos.insert("pq".into(), Qos::new("pq"));
    t
}

fn qos_limits<'a>(t: &'a mut AssocTree, q: &str) -> &'a mut Limits {
    &mut t.qos.get_mut(q).unwrap().limits
}

#[test]
fn partition_qos_order_follows_over_part_qos() {
    let mut t = tree_with_part_qos();
    let used = UsedMins::default();
    let parts: HashMap<String, String> = [("p".to_string(), "pq".to_string())].into();
    let names = |t: &AssocTree, part: &str| -> Vec<String> {
        part_policy(t, &used, &parts)
            .qos_order("normal", part)
            .iter()
            .map(|q| q.name.clone())
            .collect()
    };
    assert_eq!(names(&t, "p"), ["pq", "normal"]);
    assert_eq!(names(&t, "other"), ["normal"]);
    t.qos
        .get_mut("normal")
        .unwrap()
        .flags
        .push(QosFlag::OverPartQos);
    assert_eq!(names(&t, "p"), ["normal", "pq"]);
    // The same QOS on both sides counts once; an unknown partition QOS is ignored.
    let same: HashMap<String, String> = [("p".to_string(), "normal".to_string())].into();
    let p = part_policy(&t, &used, &same);
    assert_eq!(p.qos_order("normal", "p").len(), 1);
    let unknown: HashMap<String, String> = [("p".to_string(), "nope".to_string())].into();
    let p = part_policy(&t, &used, &unknown);
    assert_eq!(p.qos_order("normal", "p").len(), 1);
}

#[test]
fn partition_qos_limits_apply_to_jobs_of_its_partition() {
    let mut t = tree_with_part_qos();
    qos_limits(&mut t, "pq").max_jobs_per_user = Some(1);
    qos_limits(&mut t, "pq").max_tres_per_job = TresMap::parse("cpu=4").unwrap();
    let used = UsedMins::default();
    let parts: HashMap<String, String> = [("p".to_string(), "pq".to_string())].into();
    let check = |jobs: &[Job], j: &Job| {
        let refs: Vec<&Job> = jobs.iter().collect();
        LimitState::new(part_policy(&t, &used, &parts), &refs, 0)
            .check(j)
            .map(|r| r.as_str())
    };
    let running = job(1, "alice", JobState::Running, 1);
    let waiting = job(2, "alice", JobState::Pending, 1);
    assert_eq!(
        check(std::slice::from_ref(&running), &waiting),
        Some("QOSMaxJobsPerUserLimit")
    );
    assert_eq!(check(&[], &waiting), None);
    assert_eq!(
        check(&[], &job(3, "alice", JobState::Pending, 8)),
        Some("QOSMaxCpuPerJobLimit")
    );
    // In another partition the partition QOS does not apply.
    let mut elsewhere = waiting.clone();
    elsewhere.partition = "q".into();
    assert_eq!(check(std::slice::from_ref(&running), &elsewhere), None);
    // Jobs running elsewhere are not counted in the partition QOS.
    let mut ran_elsewhere = running.clone();
    ran_elsewhere.partition = "q".into();
    assert_eq!(check(std::slice::from_ref(&ran_elsewhere), &waiting), None);
}

#[test]
fn partition_qos_limit_wins_unless_job_qos_overrides() {
    let mut t = tree_with_part_qos();
    // The partition QOS allows 8 CPUs a job, the job's QOS 2.
    qos_limits(&mut t, "pq").max_tres_per_job = TresMap::parse("cpu=8").unwrap();
    qos_limits(&mut t, "normal").max_tres_per_job = TresMap::parse("cpu=2,node=1").unwrap();
    qos_limits(&mut t, "normal").grp_jobs = Some(1);
    let used = UsedMins::default();
    let parts: HashMap<String, String> = [("p".to_string(), "pq".to_string())].into();
    let check = |t: &AssocTree, jobs: &[Job], j: &Job| {
        let refs: Vec<&Job> = jobs.iter().collect();
        LimitState::new(part_policy(t, &used, &parts), &refs, 0)
            .check(j)
            .map(|r| r.as_str())
    };
    let four = job(1, "alice", JobState::Pending, 4);
    assert_eq!(
        check(&t, &[], &four),
        None,
        "the partition QOS's cpu=8 wins"
    );
    // A limit the partition QOS leaves unset still comes from the job's QOS.
    let mut two_nodes = four.clone();
    two_nodes.req_nodes = 2;
    assert_eq!(check(&t, &[], &two_nodes), Some("QOSMaxNodePerJobLimit"));
    let running = job(2, "bob", JobState::Running, 1);
    assert_eq!(
        check(&t, std::slice::from_ref(&running), &four),
        Some("QOSGrpJobsLimit")
    );
    t.qos
        .get_mut("normal")
        .unwrap()
        .flags
        .push(QosFlag::OverPartQos);
    assert_eq!(
        check(&t, &[], &four),
        Some("QOSMaxCpuPerJobLimit"),
        "OverPartQOS: the job QOS's cpu=2 wins"
    );
    // Without a job-QOS limit, the partition QOS's still applies under OverPartQOS.
    assert_eq!(
        check(&t, &[], &job(3, "alice", JobState::Pending, 16)),
        Some("QOSMaxCpuPerJobLimit")
    );
}

#[test]
fn partition_qos_grp_limits_count_every_job_of_the_partition() {
    let mut t = tree_with_part_qos();
    qos_limits(&mut t, "pq").grp_tres = TresMap::parse("cpu=4").unwrap();
    t.qos.insert("high".into(), Qos::new("high"));
    let used = UsedMins::default();
    let parts: HashMap<String, String> = [("p".to_string(), "pq".to_string())].into();
    let st_check = |jobs: &[Job], j: &Job| {
        let refs: Vec<&Job> = jobs.iter().collect();
        LimitState::new(part_policy(&t, &used, &parts), &refs, 0)
            .check(j)
            .map(|r| r.as_str())
    };
    // Jobs of two different job QOS share the partition QOS's GrpTRES.
    let mut a = job(1, "alice", JobState::Running, 3);
    a.qos = "high".into();
    let b = job(2, "bob", JobState::Pending, 2);
    assert_eq!(
        st_check(std::slice::from_ref(&a), &b),
        Some("QOSGrpCpuLimit")
    );
    assert_eq!(st_check(&[], &b), None);

    // GrpTRESMins against the partition QOS's recorded usage.
    let mut t = tree_with_part_qos();
    qos_limits(&mut t, "pq").grp_tres_mins = TresMap::parse("cpu=100").unwrap();
    let mut used = UsedMins::default();
    used.record_qos("pq", &[("cpu".to_string(), 2)].into(), 49.0, 49.0);
    let refs: Vec<&Job> = Vec::new();
    let st = LimitState::new(part_policy(&t, &used, &parts), &refs, 0);
    assert_eq!(st.check(&b), None);
    used.record_qos("pq", &[("cpu".to_string(), 2)].into(), 1.0, 1.0);
    let st = LimitState::new(part_policy(&t, &used, &parts), &refs, 0);
    assert_eq!(
        st.check(&b).map(|r| r.as_str()),
        Some("QOSGrpCPUMinutesLimit")
    );
    assert_eq!(used.wall_qos.get("pq"), Some(&50.0));
}

#[test]
fn partition_qos_submit_limits_and_deny_on_limit() {
    let mut t = tree_with_part_qos();
    qos_limits(&mut t, "pq").max_submit_jobs_per_user = Some(1);
    let used = UsedMins::default();
    let parts: HashMap<String, String> = [("p".to_string(), "pq".to_string())].into();
    let queued = [job(1, "alice", JobState::Pending, 1)];
    let refs: Vec<&Job> = queued.iter().collect();
    let st = LimitState::new(part_policy(&t, &used, &parts), &refs, 0);
    let new = job(2, "alice", JobState::Pending, 1);
    assert_eq!(
        st.submit_check(&new).unwrap_err().as_str(),
        "QOSMaxSubmitJobPerUserLimit"
    );
    let mut other = new.clone();
    other.partition = "q".into();
    assert!(st.submit_check(&other).is_ok());

    let mut t = tree_with_part_qos();
    qos_limits(&mut t, "pq").max_tres_per_job = TresMap::parse("cpu=2").unwrap();
    let st = LimitState::new(part_policy(&t, &used, &parts), &[], 0);
    let big = job(3, "alice", JobState::Pending, 4);
    assert!(st.submit_check(&big).is_ok(), "pends without DenyOnLimit");
    t.qos
        .get_mut("pq")
        .unwrap()
        .flags
        .push(QosFlag::DenyOnLimit);
    let st = LimitState::new(part_policy(&t, &used, &parts), &[], 0);
    assert_eq!(
        st.submit_check(&big).unwrap_err().as_str(),
        "QOSMaxCpuPerJobLimit"
    );
}

#[test]
fn used_mins_view_sums_the_ledger_up_the_tree() {
    use crate::sched::fairshare::{QosUsage, UsageLedger};
    let t = tree();
    let mut l = UsageLedger::default();
    let alice = ("theory".to_string(), "alice".to_string());
    let bob = ("theory".to_string(), "bob".to_string());
    l.usage.insert(alice.clone(), 600.0);
    l.tres
        .insert(alice.clone(), [("cpu".to_string(), 600.0)].into());
    l.tres
        .insert(bob.clone(), [("cpu".to_string(), 1200.0)].into());
    l.wall.insert(bob, 300.0);
    l.qos.insert(
        "normal".into(),
        QosUsage {
            billing: 60.0,
            tres: [("cpu".to_string(), 1800.0)].into(),
            wall: 120.0,
        },
    );
    let u = UsedMins::from_ledger(&l, &t);
    assert_eq!(u.users[&("alice".into(), "theory".into())]["cpu"], 10.0);
    assert_eq!(u.users[&("alice".into(), "theory".into())]["billing"], 10.0);
    for a in ["theory", "phys", "root"] {
        assert_eq!(u.accounts[a]["cpu"], 30.0, "{a}");
        assert_eq!(u.wall_accounts[a], 5.0, "{a}");
    }
    assert_eq!(u.qos["normal"]["cpu"], 30.0);
    assert_eq!(u.qos["normal"]["billing"], 1.0);
    assert_eq!(u.wall_qos["normal"], 2.0);
}

#[test]
fn time_out_ends_a_running_job_at_its_group_usage_limit() {
    let mut t = tree();
    t.accounts.get_mut("phys").unwrap().limits.grp_tres_mins = TresMap::parse("cpu=100").unwrap();
    let running = job(1, "alice", JobState::Running, 2);
    let mut used = UsedMins::default();
    used.accounts
        .insert("phys".into(), HashMap::from([("cpu".to_string(), 99.0)]));
    let refs = [&running];
    let policy = |e: Enforce, used: &UsedMins| -> Option<String> {
        let p = Policy {
            fairshare: None,
            partition_qos: None,
            billing: None,
            tree: &t,
            enforce: e,
            used,
        };
        LimitState::new(p, &refs, 600).time_out(&running, 600)
    };
    assert_eq!(policy(enforce(), &used), None);
    used.accounts
        .insert("phys".into(), HashMap::from([("cpu".to_string(), 100.0)]));
    assert_eq!(
        policy(enforce(), &used).as_deref(),
        Some(
            "Job is at or exceeds association (acc=phys/user=/part=) group max TRES(cpu) minutes of 100"
        )
    );
    // Safe enforcement never ends a job that was started safe.
    assert_eq!(policy(Enforce::parse("safe").unwrap(), &used), None);
    // Root's limits are not applied (as in Slurm).
    let mut t2 = tree();
    t2.accounts.get_mut(ROOT).unwrap().limits.grp_tres_mins = TresMap::parse("cpu=100").unwrap();
    let p = Policy {
        fairshare: None,
        partition_qos: None,
        billing: None,
        tree: &t2,
        enforce: enforce(),
        used: &UsedMins {
            accounts: HashMap::from([(
                ROOT.to_string(),
                HashMap::from([("cpu".to_string(), 500.0)]),
            )]),
            ..Default::default()
        },
    };
    assert_eq!(LimitState::new(p, &refs, 600).time_out(&running, 600), None);
}
