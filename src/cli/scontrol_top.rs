//! `scontrol top JOBID[,JOBID…]`: moves pending jobs to the top of their user's queue
//! (cf. scontrol(1) `top` and slurmctld's `job_set_top`): among the pending jobs of
//! the same user, partition, account and QOS, the listed ones, in the order given,
//! take the highest priorities the group has (lifted one above the next where
//! priorities tie), the others keep their order below them. As in Slurm it works by
//! changing nice values (`scontrol update JobId=… Nice=…`); a non-operator may only
//! raise nice values, and is refused (Access/permission denied) before anything
//! changes when a listed job would need a lower one.

use super::client::{self, CallError, answer};
use super::scontrol::{Output, Requester};
use crate::model::{Job, JobState};
use crate::proto::{JobFilter, JobUpdate, Request, Response};

/// The nice changes that put `listed` first among `group`: (job id, new nice), listed
/// jobs first. `group` holds (job id, priority, nice) of the pending jobs sharing the
/// first listed job's user, partition, account and QOS (the listed ones included).
pub fn plan(listed: &[u32], group: &[(u32, u32, i32)]) -> Vec<(u32, i32)> {
    let mut by_prio: Vec<&(u32, u32, i32)> = group.iter().collect();
    by_prio.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let prios: Vec<u32> = by_prio.iter().map(|g| g.1).collect();
    let mut order: Vec<u32> = listed
        .iter()
        .copied()
        .filter(|id| group.iter().any(|g| g.0 == *id))
        .collect();
    order.dedup();
    for g in &by_prio {
        if !order.contains(&g.0) {
            order.push(g.0);
        }
    }
    // The listed jobs end strictly above the rest and in the order given: where
    // priorities tie, each is lifted one above the job after it.
    let k = order.iter().filter(|id| listed.contains(id)).count();
    let mut targets = prios.clone();
    for i in (0..k.min(targets.len().saturating_sub(1))).rev() {
        targets[i] = targets[i].max(targets[i + 1].saturating_add(1));
    }
    let mut out: Vec<(u32, i32)> = Vec::new();
    for (id, target) in order.iter().zip(targets) {
        let Some(&(_, prio, nice)) = group.iter().find(|g| g.0 == *id) else {
            continue;
        };
        if prio != target {
            let nice = i64::from(nice) + i64::from(prio) - i64::from(target);
            out.push((*id, nice.clamp(-2_147_483_645, 2_147_483_645) as i32));
        }
    }
    // Boosts first: a refused one leaves every job as it was.
    out.sort_by_key(|(id, n)| {
        let before = group.iter().find(|g| g.0 == *id).map_or(0, |g| g.2);
        (
            *n >= before,
            listed.iter().position(|l| l == id).unwrap_or(usize::MAX),
        )
    });
    out
}

/// Runs `top` for `ids` through the controller.
pub fn execute(ids: &[u32], req: &mut Requester<'_>) -> Output {
    let err = |e: &str| Output {
        stderr: format!("slurm_top_job error: {e}\n"),
        code: 1,
        ..Output::default()
    };
    let fail = |e: CallError| err(&e.to_string());
    let jobs = |req: &mut Requester<'_>, filter: JobFilter| -> Result<Vec<Job>, Output> {
        client::expect(
            req(&Request::Jobs(filter)),
            answer!(Response::Jobs { jobs, .. } => jobs),
        )
        .map_err(fail)
    };
    let listed = match jobs(
        req,
        JobFilter {
            ids: ids.to_vec(),
            ..JobFilter::default()
        },
    ) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let Some(first) = ids
        .first()
        .and_then(|id| listed.iter().find(|j| j.id == *id))
    else {
        return err("Invalid job id specified");
    };
    if first.state != JobState::Pending {
        return err(&crate::proto::SlurmError::NotPending.to_string());
    }
    let all = match jobs(
        req,
        JobFilter {
            users: vec![first.uid],
            states: vec![JobState::Pending],
            ..JobFilter::default()
        },
    ) {
        Ok(j) => j,
        Err(o) => return o,
    };
    let group: Vec<&Job> = all
        .iter()
        .filter(|j| {
            j.state == JobState::Pending
                && j.uid == first.uid
                && j.partition == first.partition
                && j.account == first.account
                && j.qos == first.qos
        })
        .collect();
    let prio_req = Request::Priority {
        ids: group.iter().map(|j| j.id).collect(),
        users: Vec::new(),
    };
    let prios = match client::expect(
        req(&prio_req),
        answer!(Response::Priority { rows, .. } => rows),
    ) {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    let g: Vec<(u32, u32, i32)> = group
        .iter()
        .filter_map(|j| {
            let p = prios
                .iter()
                .find(|r| r.job_id == j.id && r.partition == j.partition)?;
            Some((j.id, p.priority, j.spec.nice))
        })
        .collect();
    for (id, nice) in plan(ids, &g) {
        let update = Request::UpdateJob {
            id,
            updates: vec![JobUpdate::Nice(nice)],
            tasks: None,
        };
        if let Err(e) = client::expect(req(&update), answer!(Response::Ok => ())) {
            return fail(e);
        }
    }
    Output::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_jobs_take_the_groups_top_priorities_in_order() {
        // Jobs 1..4 with priorities 400, 300, 200, 100, all nice 0.
        let g = [(1, 400, 0), (2, 300, 0), (3, 200, 0), (4, 100, 0)];
        // 4 to the top: 4 gets 400 (nice -300), 1 → 300, 2 → 200, 3 → 100.
        assert_eq!(plan(&[4], &g), [(4, -300), (1, 100), (2, 100), (3, 100)]);
        // 3 then 4: 3 → 400, 4 → 300, 1 → 200, 2 → 100.
        assert_eq!(
            plan(&[3, 4], &g),
            [(3, -200), (4, -200), (1, 200), (2, 200)]
        );
        // Already on top: nothing to change.
        assert_eq!(plan(&[1], &g), []);
        // Tied priorities: the listed job is lifted above the others.
        let tied = [(1, 100, 0), (2, 100, 0), (3, 100, 5)];
        assert_eq!(plan(&[3], &tied), [(3, 4)]);
        assert_eq!(plan(&[3, 2], &tied), [(3, 3), (2, -1)]);
        // A job outside the group is ignored.
        assert_eq!(plan(&[9], &g), []);
    }
}
