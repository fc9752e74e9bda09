//! Accounting: sacct (job records), sacctmgr (the association tree and its changes),
//! sreport (usage) (cf. slurmdbd's `proc_req.c`; in sluice the controller is its own
//! database daemon).

use super::{Ctx, Later, Reply};
use crate::model::acct_ops::AcctOp;
use crate::proto::{AcctQuery, Response, UsageReport};

/// sacct: answered by the store after the writes queued so far.
pub fn query(cx: &mut Ctx, query: AcctQuery) -> Reply {
    Reply::Later(Later::Acct { query, now: cx.now })
}

/// sacctmgr show: the whole association tree, the cluster name and the enforcement.
pub fn tree(cx: &mut Ctx) -> Reply {
    Reply::Now(Response::AcctTree {
        tree: Box::new(cx.cluster.acct.assoc.clone()),
        cluster: cx.cluster.cluster_name.clone(),
        enforce: cx.cluster.enforce(),
    })
}

/// sacctmgr add/modify/delete (`commit: false`: what it would change). A committed
/// change re-evaluates pending jobs against the new limits and is answered after the
/// tree's commit.
pub fn change(cx: &mut Ctx, op: &AcctOp, commit: bool) -> Reply {
    let user = cx.user.clone().unwrap_or_else(|| cx.caller.uid.to_string());
    match cx.cluster.acct_change(op, commit, cx.caller, &user) {
        Err(e) => Reply::Now(Response::Error(e)),
        Ok(out) if commit && out.changed => {
            cx.fx.schedule = true;
            Reply::Later(Later::AssocCommit(Response::AcctChanged(out)))
        }
        Ok(out) => Reply::Now(Response::AcctChanged(out)),
    }
}

/// sreport over `[start, end)`: the controller's part of the report (nodes,
/// reservations, node down intervals); the store adds the job records.
pub fn usage(cx: &mut Ctx, start: i64, end: i64) -> Reply {
    let c = &cx.cluster;
    let report = UsageReport {
        cluster: c.cluster_name.clone(),
        nodes: c.nodes.iter().map(|n| (n.name.clone(), n.cpus)).collect(),
        resvs: c.resv.list.clone(),
        down: cx.downlog.pending(cx.now),
        now: cx.now,
        ..Default::default()
    };
    Reply::Later(Later::Usage {
        start,
        end,
        report: Box::new(report),
    })
}
