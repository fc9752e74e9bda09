//! Operator requests: scontrol update node, reconfigure, setdebug, and stopping the
//! controller (cf. slurmctld's `_slurm_rpc_update_node`, `_slurm_rpc_reconfigure_controller`,
//! `_slurm_rpc_set_debug_level`, `_slurm_rpc_shutdown_controller`).

use super::{Ctx, Reply, done};
use crate::config::Config;
use crate::ctld::state;
use crate::proto::{NodeUpdate, Response, SlurmError};

/// scontrol update node.
pub fn update_node(cx: &mut Ctx, names: &[String], update: &NodeUpdate) -> Reply {
    done(
        cx.cluster
            .update_node(names, update, cx.caller, cx.now, cx.fx),
    )
}

/// `scontrol reconfigure` (operators): reads the config file again and applies it;
/// agents get the new Prolog/Epilog/HealthCheckProgram settings and pending jobs are
/// scheduled against the new configuration. Errors: as `reload`, as text.
pub fn reconfigure(cx: &mut Ctx) -> Reply {
    if !cx.cluster.is_operator(cx.caller) {
        return Reply::Now(Response::Error(SlurmError::AccessDenied));
    }
    match reload(cx) {
        Ok(()) => {
            // Agents run Prolog/Epilog/HealthCheckProgram from what they were last
            // sent: every connected one is sent the new scripts.
            cx.control.configure_agents = true;
            cx.fx.schedule = true;
            Reply::Now(Response::Ok)
        }
        Err(e) => {
            tracing::warn!("reconfigure refused: {e}");
            Reply::Now(Response::Error(SlurmError::Other(e)))
        }
    }
}

/// Reads the config file again and applies it ([`state::Cluster::reconfigure`]); the
/// node declarations agents register against take the new features, weight and
/// tmp_disk.
///
/// Errors: personal mode (no file), a file that does not load, or a change that
/// needs a restart; nothing changes then.
fn reload(cx: &mut Ctx) -> Result<(), String> {
    let Some(path) = cx.cluster.config_source.clone() else {
        return Err("personal mode has no config file to read".into());
    };
    let cfg = Config::from_file(&path).map_err(|e| e.to_string())?;
    for n in &cfg.nodes {
        if let Some(d) = cx.declared.get(&n.name) {
            state::node_identity_unchanged(d, n)?;
        }
    }
    cx.cluster.reconfigure(&cfg)?;
    for n in &cfg.nodes {
        if let Some(d) = cx.declared.get_mut(&n.name) {
            d.features.clone_from(&n.features);
            d.weight = n.weight;
            d.tmp_disk = n.tmp_disk;
        }
    }
    Ok(())
}

/// `scontrol reboot` (operators): see [`state::Cluster::request_reboot`].
pub fn reboot(
    cx: &mut Ctx,
    nodes: &[String],
    asap: bool,
    next_down: bool,
    reason: Option<&str>,
) -> Reply {
    let ask = state::RebootAsk {
        asap,
        next_down,
        reason,
    };
    done(
        cx.cluster
            .request_reboot(nodes, ask, cx.caller, cx.now, cx.fx),
    )
}

/// `scontrol cancel_reboot` (operators): see [`state::Cluster::cancel_reboot`].
pub fn cancel_reboot(cx: &mut Ctx, nodes: &[String]) -> Reply {
    done(cx.cluster.cancel_reboot(nodes, cx.caller))
}

/// scontrol setdebug (operators): the controller's log level from now on.
pub fn set_debug(cx: &mut Ctx, level: &str) -> Reply {
    if !cx.cluster.is_operator(cx.caller) {
        return Reply::Now(Response::Error(SlurmError::AccessDenied));
    }
    done(crate::logsink::set_level(level).map_err(SlurmError::Other))
}

/// `sluice controller --stop` (operators).
pub fn shutdown(cx: &mut Ctx) -> Reply {
    if !cx.cluster.is_operator(cx.caller) {
        return Reply::Now(Response::Error(SlurmError::AccessDenied));
    }
    cx.control.stop = true;
    Reply::Now(Response::Ok)
}
