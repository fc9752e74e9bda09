//! The front-ends' side of pyxis's container options: the runtime is chosen from the
//! configuration and checked at submit, so that a cluster without one refuses the
//! job instead of failing it (`model::container`).

use crate::jobspec::container_opts::ContainerOpts;
use crate::model::container::{ContainerSpec, check, select_runtime};
use std::collections::BTreeMap;

/// Whether `program` is an executable file on PATH.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The container request of `opts` (with the job's, `env`, filling what it lacks:
/// srun inside an sbatch/salloc job), its runtime chosen from the configuration.
/// `Ok(None)`: no container. Errors: Slurm-style text for the front-end's `error:`
/// line (bad option, no runtime installed, a request the runtime cannot serve).
pub fn resolve(
    opts: &ContainerOpts,
    env: &BTreeMap<String, String>,
) -> Result<Option<ContainerSpec>, String> {
    let o = opts.with_inherited(env);
    let Some(mut spec) = o.to_spec().map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let conf = crate::config::Config::load()
        .map(|c| c.container)
        .unwrap_or_default();
    let rt = select_runtime(&conf.runtime, on_path).map_err(|e| e.to_string())?;
    check(rt, &spec).map_err(|e| e.to_string())?;
    spec.runtime = Some(rt);
    spec.runtime_args = conf.runtime_args;
    spec.run_args = conf.run_args;
    spec.podman_own_cgroup = conf.podman_own_cgroup;
    Ok(Some(spec))
}
