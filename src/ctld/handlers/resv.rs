//! Advanced reservations: scontrol create/update/delete reservation (cf. slurmctld's
//! `_slurm_rpc_resv_create`, `_update`, `_delete`). Listing them is a query
//! ([`super::query::reservations`]). Answers wait for the reservations' commit.

use super::{Ctx, Reply, done};
use crate::model::reservation::ResvSpec;
use crate::proto::Response;

/// scontrol create reservation: answered with the reservation's name.
pub fn create(cx: &mut Ctx, spec: &ResvSpec) -> Reply {
    Reply::Now(
        match cx.cluster.create_resv(spec, cx.caller, cx.now, cx.fx) {
            Ok(name) => Response::ResvCreated { name },
            Err(e) => Response::Error(e),
        },
    )
}

/// scontrol update reservation.
pub fn update(cx: &mut Ctx, spec: &ResvSpec) -> Reply {
    done(cx.cluster.update_resv(spec, cx.caller, cx.now, cx.fx))
}

/// scontrol delete reservation.
pub fn delete(cx: &mut Ctx, name: &str) -> Reply {
    done(cx.cluster.delete_resv(name, cx.caller, cx.now, cx.fx))
}
