//! stepd's hook for pyxis-style containers: the command a task runs becomes the
//! runtime's command that runs it in the step's container (`model::container`). The
//! task is spawned as usual (the user, its cgroup, CPU binding, environment), so the
//! runtime starts inside the job's cgroup with the task's SLURM_*, GPU and NCCL
//! variables, which it passes into the container.

use crate::model::container::{ContainerSpec, Runtime, TaskCtx, task_command};
use crate::proto::LaunchStep;

/// Variables an image usually sets for itself: taken from the task only when
/// `--container-env` names them (as pyxis lets the image's win).
const IMAGE_OWNED: &[&str] = &["PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "MANPATH"];

/// The command that runs task `rank`'s `argv` in the container `spec` describes, with
/// `env` the task's environment.
pub fn task_argv(
    spec: &ContainerSpec,
    ls: &LaunchStep,
    argv: &[String],
    env: &[(String, String)],
) -> Vec<String> {
    let rt = spec.runtime.unwrap_or(Runtime::Podman);
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let pass: Vec<(&str, &str)> = env
        .iter()
        .filter(|(k, _)| !IMAGE_OWNED.contains(&k.as_str()) || spec.env.iter().any(|e| e == k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // The device files of the step's GPUs on this node.
    let node = ls.node_index as usize;
    let devices: Vec<String> = ls
        .layout
        .gres
        .get(node)
        .into_iter()
        .flatten()
        .flat_map(|g| {
            ls.node_gres
                .iter()
                .filter(move |d| d.name == g.name && d.index == g.index)
                .filter_map(|d| d.file.clone())
        })
        .collect();
    let limit = |r| {
        nix::sys::resource::getrlimit(r).unwrap_or((
            nix::sys::resource::RLIM_INFINITY,
            nix::sys::resource::RLIM_INFINITY,
        ))
    };
    let state_dir = format!("/tmp/sluice-{}-{}/containers", ls.cluster, ls.job.uid);
    let ctx = TaskCtx {
        job_id: ls.job.id,
        uid: ls.job.uid,
        home,
        env: pass,
        argv,
        devices,
        nofile: limit(nix::sys::resource::Resource::RLIMIT_NOFILE),
        nproc: limit(nix::sys::resource::Resource::RLIMIT_NPROC),
        runtime_args: &spec.runtime_args,
        run_args: &spec.run_args,
        podman_own_cgroup: spec.podman_own_cgroup,
        state_dir: &state_dir,
    };
    task_command(rt, spec, &ctx)
}
