//! Which of the job's GRES devices a step gets (cf. Slurm's src/slurmctld/gres_ctld.c
//! `gres_ctld_step_alloc` and `_step_test`): a step that asks (`--gres`, `--gpus*`)
//! holds a subset of the job's devices on each of its nodes, disjoint from the other
//! live steps' holdings; a step that asks nothing uses all of the job's devices there
//! and holds none (Slurm: "by default a step is allocated all of the job's GRES").
//! `--overlap` steps pick among all of the job's devices and hold none.
//!
//! Pure: the caller passes what the job has and what other steps hold.

use crate::model::gres::GresReq;
use crate::model::job::GresAlloc;
use crate::model::step::StepGpus;

/// Slurm's error for a step asking more GRES than its job has on the step's nodes.
pub use crate::model::gres::INVALID_GRES;

/// The outcome of placing a step's GRES request on the nodes chosen for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GresPlacement {
    /// Devices per chosen node, and whether the step holds them.
    Now(Vec<Vec<GresAlloc>>, bool),
    /// Fits in the job, not beside the steps running now.
    Busy,
    /// Can never fit in the job.
    Never,
}

/// One chosen node as the placement sees it.
#[derive(Debug, Clone)]
pub struct NodeGres<'a> {
    /// The job's devices on the node.
    pub job: &'a [GresAlloc],
    /// Units of each of the job's devices held by other live steps (by node slot).
    pub held: Vec<(u32, u32)>,
    /// Tasks the step runs there.
    pub tasks: u32,
    /// Sockets of the node (for `--gpus-per-socket`).
    pub sockets: u32,
}

impl NodeGres<'_> {
    fn used(&self, slot: u32) -> u32 {
        self.held
            .iter()
            .filter(|(s, _)| *s == slot)
            .map(|(_, u)| *u)
            .sum()
    }
}

/// What one node must provide: (name, type, units).
fn demands(req: &StepGpus, n: &NodeGres) -> Vec<GresReq> {
    let mut v: Vec<GresReq> = req.gres.clone();
    let gpu = |r: &GresReq, times: u64| GresReq {
        name: "gpu".into(),
        kind: r.kind.clone(),
        count: r.count.saturating_mul(times),
    };
    if let Some(r) = &req.per_node {
        v.push(gpu(r, 1));
    }
    if let Some(r) = &req.per_task {
        v.push(gpu(r, u64::from(n.tasks.max(1))));
    }
    if let Some(r) = &req.per_socket {
        v.push(gpu(r, u64::from(n.sockets.max(1))));
    }
    v
}

/// Takes `want` units of `name[:kind]` from `n`'s devices (free ones only unless
/// `ignore_held`), adding to `out`; returns the units it could not find. `taken` counts
/// what this placement already took per slot.
fn take(
    n: &NodeGres,
    name: &str,
    kind: Option<&str>,
    mut want: u64,
    ignore_held: bool,
    taken: &mut Vec<(u32, u32)>,
    out: &mut Vec<GresAlloc>,
) -> u64 {
    let mut devs: Vec<&GresAlloc> = n
        .job
        .iter()
        .filter(|d| d.name == name && kind.is_none_or(|k| d.kind.as_deref() == Some(k)))
        .collect();
    devs.sort_by_key(|d| d.index);
    for d in devs {
        if want == 0 {
            break;
        }
        let mine: u32 = taken
            .iter()
            .filter(|(s, _)| *s == d.slot)
            .map(|(_, u)| *u)
            .sum();
        let busy = if ignore_held { 0 } else { n.used(d.slot) };
        let free = d.count.saturating_sub(busy + mine);
        let u = (free as u64).min(want) as u32;
        if u == 0 {
            continue;
        }
        want -= u64::from(u);
        taken.push((d.slot, u));
        match out.iter_mut().find(|o| o.slot == d.slot) {
            Some(o) => o.count += u,
            None => out.push(GresAlloc {
                count: u,
                ..d.clone()
            }),
        }
    }
    want
}

/// Units of `name[:kind]` the job has on `n`.
fn job_units(n: &NodeGres, name: &str, kind: Option<&str>) -> u64 {
    n.job
        .iter()
        .filter(|d| d.name == name && kind.is_none_or(|k| d.kind.as_deref() == Some(k)))
        .map(|d| u64::from(d.count))
        .sum()
}

/// Places `req` on `nodes` (the step's nodes, in layout order). `overlap`: choose among
/// all of the job's devices and hold none.
pub fn place(req: &StepGpus, nodes: &[NodeGres], overlap: bool) -> GresPlacement {
    if !req.any() {
        return GresPlacement::Now(nodes.iter().map(|n| n.job.to_vec()).collect(), false);
    }
    // Never: a node's own demand beyond what the job has there, or a step-wide count
    // beyond the job's devices on all of the step's nodes.
    for n in nodes {
        let mut per_kind: Vec<GresReq> = Vec::new();
        for d in demands(req, n) {
            match per_kind
                .iter_mut()
                .find(|p| p.name == d.name && p.kind == d.kind)
            {
                Some(p) => p.count = p.count.saturating_add(d.count),
                None => per_kind.push(d),
            }
        }
        if per_kind
            .iter()
            .any(|d| d.count > job_units(n, &d.name, d.kind.as_deref()))
        {
            return GresPlacement::Never;
        }
    }
    if let Some(t) = &req.total {
        let have: u64 = nodes
            .iter()
            .map(|n| job_units(n, "gpu", t.kind.as_deref()))
            .sum();
        if t.count > have || t.count < nodes.len() as u64 {
            return GresPlacement::Never;
        }
    }
    let mut out: Vec<Vec<GresAlloc>> = vec![Vec::new(); nodes.len()];
    let mut taken: Vec<Vec<(u32, u32)>> = vec![Vec::new(); nodes.len()];
    for (k, n) in nodes.iter().enumerate() {
        for d in demands(req, n) {
            let left = take(
                n,
                &d.name,
                d.kind.as_deref(),
                d.count,
                overlap,
                &mut taken[k],
                &mut out[k],
            );
            if left > 0 {
                return GresPlacement::Busy;
            }
        }
    }
    if let Some(t) = &req.total {
        // Slurm spreads `--gpus` so that every node of the step gets at least one; the
        // rest fill nodes in order.
        let mut left = t.count;
        for (k, n) in nodes.iter().enumerate() {
            let l = take(
                n,
                "gpu",
                t.kind.as_deref(),
                1,
                overlap,
                &mut taken[k],
                &mut out[k],
            );
            if l > 0 {
                return GresPlacement::Busy;
            }
            left -= 1;
        }
        for (k, n) in nodes.iter().enumerate() {
            if left == 0 {
                break;
            }
            left = take(
                n,
                "gpu",
                t.kind.as_deref(),
                left,
                overlap,
                &mut taken[k],
                &mut out[k],
            );
        }
        if left > 0 {
            return GresPlacement::Busy;
        }
    }
    for o in &mut out {
        o.sort_by_key(|d| (d.name.clone(), d.index));
    }
    GresPlacement::Now(out, !overlap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gres::{parse_gpus, parse_gres_list};

    fn gpus(n: u32, kind: Option<&str>) -> Vec<GresAlloc> {
        (0..n)
            .map(|i| GresAlloc {
                slot: i,
                name: "gpu".into(),
                kind: kind.map(str::to_string),
                index: i,
                count: 1,
            })
            .collect()
    }

    fn node(job: &[GresAlloc], held: &[u32], tasks: u32) -> NodeGres<'static> {
        NodeGres {
            job: Box::leak(job.to_vec().into_boxed_slice()),
            held: held.iter().map(|&s| (s, 1)).collect(),
            tasks,
            sockets: 2,
        }
    }

    fn idx(p: &GresPlacement) -> Vec<Vec<u32>> {
        match p {
            GresPlacement::Now(v, _) => v
                .iter()
                .map(|n| n.iter().map(|d| d.index).collect())
                .collect(),
            other => panic!("not placed: {other:?}"),
        }
    }

    fn req_gres(s: &str) -> StepGpus {
        StepGpus {
            gres: parse_gres_list(s).unwrap(),
            ..StepGpus::default()
        }
    }

    #[test]
    fn no_request_uses_all_and_holds_nothing() {
        let j = gpus(2, None);
        let p = place(&StepGpus::default(), &[node(&j, &[0, 1], 1)], false);
        assert_eq!(p, GresPlacement::Now(vec![j.clone()], false));
    }

    #[test]
    fn concurrent_steps_get_disjoint_devices() {
        let j = gpus(4, None);
        let r = req_gres("gpu:2");
        assert_eq!(
            idx(&place(&r, &[node(&j, &[], 1)], false)),
            vec![vec![0, 1]]
        );
        // Devices 0 and 1 held by another step: the next two.
        assert_eq!(
            idx(&place(&r, &[node(&j, &[0, 1], 1)], false)),
            vec![vec![2, 3]]
        );
        // Three held: waits; more than the job has: never.
        assert_eq!(
            place(&r, &[node(&j, &[0, 1, 2], 1)], false),
            GresPlacement::Busy
        );
        assert_eq!(
            place(&req_gres("gpu:5"), &[node(&j, &[], 1)], false),
            GresPlacement::Never
        );
        // --overlap ignores holdings and holds nothing.
        let p = place(&r, &[node(&j, &[0, 1, 2], 1)], true);
        assert_eq!(idx(&p), vec![vec![0, 1]]);
        assert!(matches!(p, GresPlacement::Now(_, false)));
    }

    #[test]
    fn per_task_per_node_total_and_types() {
        let j = gpus(4, None);
        let per_task = StepGpus {
            per_task: Some(parse_gpus("1").unwrap()),
            ..StepGpus::default()
        };
        assert_eq!(
            idx(&place(&per_task, &[node(&j, &[], 3)], false)),
            vec![vec![0, 1, 2]]
        );
        let per_socket = StepGpus {
            per_socket: Some(parse_gpus("1").unwrap()),
            ..StepGpus::default()
        };
        assert_eq!(
            idx(&place(&per_socket, &[node(&j, &[], 1)], false)),
            vec![vec![0, 1]]
        );
        // --gpus=3 over two nodes: one each, then the first fills.
        let total = StepGpus {
            total: Some(parse_gpus("3").unwrap()),
            ..StepGpus::default()
        };
        let two = [node(&j, &[], 1), node(&j, &[], 1)];
        assert_eq!(idx(&place(&total, &two, false)), vec![vec![0, 1], vec![0]]);
        // Typed: only matching devices count.
        let mut mixed = gpus(2, Some("a100"));
        mixed.extend(gpus(2, Some("h100")).into_iter().map(|mut d| {
            d.slot += 2;
            d.index += 2;
            d
        }));
        assert_eq!(
            idx(&place(
                &req_gres("gpu:h100:1"),
                &[node(&mixed, &[2], 1)],
                false
            )),
            vec![vec![3]]
        );
        assert_eq!(
            place(&req_gres("gpu:v100:1"), &[node(&mixed, &[], 1)], false),
            GresPlacement::Never
        );
    }

    #[test]
    fn shared_count_devices_are_split_by_units() {
        let mps = vec![GresAlloc {
            slot: 0,
            name: "mps".into(),
            kind: None,
            index: 0,
            count: 100,
        }];
        let mut n = node(&mps, &[], 1);
        n.held = vec![(0, 60)];
        match place(&req_gres("mps:40"), std::slice::from_ref(&n), false) {
            GresPlacement::Now(v, true) => assert_eq!(v[0][0].count, 40),
            other => panic!("{other:?}"),
        }
        assert_eq!(place(&req_gres("mps:41"), &[n], false), GresPlacement::Busy);
    }
}
