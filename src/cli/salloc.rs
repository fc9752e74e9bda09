//! `salloc`: obtain an allocation, run a command in it (default: the user's shell) with
//! the job's `SLURM_*` environment, and give the allocation back when the command ends
//! (cf. src/salloc/). `srun` inside the command uses the allocation.
//!
//! The connection that asked for the allocation stays open while the command runs: if
//! salloc dies, the controller sees it close and cancels the job. A second connection
//! waits for the job to end on its own (scancel, time limit); then salloc says the
//! allocation was revoked and ends the command.
//!
//! Exit code: the command's (128+N when a signal killed it); 1 when no allocation was
//! had; 255 for command-line errors.

use super::client::Client;
use super::sbatch;
use super::srun::{self, Failure};
use crate::jobspec::opts::{self, OptError};
use crate::model::ExitStatus;
use crate::proto::{Request, Response};
use std::ffi::OsString;
use std::process::ExitCode;

const PROG: &str = "salloc";

/// The environment of salloc's command for `job` (cf. golden env_salloc): the job's
/// identity and allocation, none of the task or node-local variables. For a
/// heterogeneous job (`others` are its components after the leader `job`, in order)
/// the leader's variables, `SLURM_HET_SIZE`, and each component's allocation
/// variables suffixed `_HET_GROUP_<k>`, as in a heterogeneous batch job.
pub fn command_env(
    job: &crate::model::Job,
    others: &[crate::model::Job],
    cluster: &str,
) -> Vec<(String, String)> {
    const KEEP: &[&str] = &[
        "SLURM_CLUSTER_NAME",
        "SLURM_CONF",
        "SLURM_JOBID",
        "SLURM_JOB_ID",
        "SLURM_JOB_ACCOUNT",
        "SLURM_JOB_CPUS_PER_NODE",
        "SLURM_JOB_NAME",
        "SLURM_JOB_NODELIST",
        "SLURM_JOB_NUM_NODES",
        "SLURM_JOB_PARTITION",
        "SLURM_JOB_QOS",
        "SLURM_NNODES",
        "SLURM_NODELIST",
        "SLURM_NODE_ALIASES",
        "SLURM_NPROCS",
        "SLURM_NTASKS",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_CPUS_PER_TASK",
        "SLURM_MEM_PER_CPU",
        "SLURM_MEM_PER_NODE",
        "SLURM_SUBMIT_DIR",
        "SLURM_SUBMIT_HOST",
        "SLURM_TASKS_PER_NODE",
        "SLURM_JOB_START_TIME",
        "SLURM_JOB_END_TIME",
    ];
    let node = job
        .alloc
        .as_ref()
        .and_then(|a| a.nodes.first().cloned())
        .unwrap_or_default();
    let now = job.start_time.unwrap_or(0);
    let env = if others.is_empty() {
        crate::stepd::env::batch_env(job, cluster, &node, now)
    } else {
        crate::stepd::env::het_batch_env(job, others, cluster, &node, now)
    };
    env.into_iter()
        .filter(|(k, _)| {
            KEEP.contains(&k.as_str())
                || k == "SLURM_HET_SIZE"
                || k.split_once("_HET_GROUP_")
                    .is_some_and(|(base, _)| KEEP.contains(&base))
        })
        .collect()
}

/// Runs `salloc` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = match run_inner(&argv) {
        Ok(c) => c,
        Err(f) => {
            eprint!("{}", f.stderr);
            f.code
        }
    };
    ExitCode::from(code)
}

fn run_inner(argv: &[String]) -> Result<u8, Failure> {
    let a = opts::parse_salloc_argv(
        std::iter::once(PROG.to_string()).chain(argv.iter().skip(1).cloned()),
    )
    .map_err(|e| match e {
        OptError::Help(t) => {
            print!("{t}");
            Failure {
                stderr: String::new(),
                code: 0,
            }
        }
        e => Failure {
            stderr: e.render(PROG),
            code: e.exit_code(),
        },
    })?;
    if a.iter().any(|g| g.version) {
        println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
        return Ok(0);
    }
    let ctx = sbatch::submit_context().map_err(|f| Failure {
        stderr: f.stderr.replace("sbatch:", "salloc:"),
        code: 1,
    })?;
    // One allocation request per `:` component (the first is the leader).
    let mut specs = Vec::new();
    for g in &a {
        let norm = g.job.to_spec(&ctx).map_err(|e| Failure {
            stderr: e.render(PROG),
            code: e.exit_code(),
        })?;
        super::container::resolve(&g.job.containers, &Default::default()).map_err(|e| Failure {
            stderr: format!("{PROG}: error: {e}\n"),
            code: 1,
        })?;
        let mut spec = norm.spec;
        spec.name = g
            .job
            .job_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "interactive".into());
        spec.stdout = None;
        spec.stderr = None;
        spec.stdin = None;
        // Said only under -v: Slurm is silent about options it does not act on.
        if !g.job.quiet && g.job.verbose > 0 {
            let own = [
                ("--bell", g.bell),
                ("--no-bell", g.no_bell),
                ("--kill-command", g.kill_command.is_some()),
            ];
            let own = own
                .iter()
                .filter(|(_, set)| *set)
                .map(|(o, _)| format!("{o} is ignored by sluice"));
            for w in norm.warnings.iter().cloned().chain(own) {
                eprintln!("{PROG}: warning: {w}");
            }
        }
        specs.push(spec);
    }
    let het = specs.split_off(1);
    let spec = specs.pop().expect("one component at least");
    let last = a.last().expect("one component at least");
    let quiet = a[0].job.quiet;
    let no_shell = a.iter().any(|g| g.no_shell);
    let command = if last.command.is_empty() {
        vec![user_shell()]
    } else {
        last.command.clone()
    };
    let cfg = crate::config::Config::load().map_err(|e| Failure {
        stderr: format!("{PROG}: error: {e}\n"),
        code: 1,
    })?;
    let connect = || {
        Client::connect_with(&cfg).map_err(|e| Failure {
            stderr: format!("{PROG}: error: {e}\n"),
            code: 1,
        })
    };
    let mut owner = connect()?;
    let job_id = srun::allocate(&mut owner, PROG, &spec, &het, quiet, no_shell)?;
    if no_shell {
        // Slurm's --no-shell: the allocation outlives salloc until scancel or its time
        // limit; steps join it with `srun --jobid`.
        return Ok(0);
    }
    // The job, and a heterogeneous job's other components (the leader's id names
    // them all).
    let mut jobs = match owner.request(&Request::Jobs(crate::proto::JobFilter {
        ids: vec![job_id],
        ..Default::default()
    })) {
        Ok(Response::Jobs { jobs, .. }) => jobs,
        _ => Vec::new(),
    };
    jobs.sort_by_key(|j| j.het.map_or(0, |h| h.offset));
    let Some(job) = jobs.iter().find(|j| j.id == job_id).cloned() else {
        return Err(Failure {
            stderr: format!("{PROG}: Job allocation {job_id} has been revoked.\n"),
            code: 1,
        });
    };
    // salloc itself ignores the terminal's Ctrl-C (the command gets it).
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGINT);
    set.add(nix::sys::signal::Signal::SIGQUIT);
    let _ = set.thread_block();
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .envs(command_env(&job, &jobs[1..], &cfg.cluster_name));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{PROG}: error: {}: {e}", command[0]);
            let _ = owner.request(&Request::ReleaseAllocation {
                job_id,
                exit: ExitStatus { code: 1, signal: 0 },
            });
            return Ok(1);
        }
    };
    // Watch for the allocation ending under the command.
    let pid = child.id() as i32;
    // Set once salloc gives the allocation back itself: its end is then no revocation.
    let relinquished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Ok(mut watcher) = connect() {
        let relinquished = relinquished.clone();
        std::thread::spawn(move || {
            let r = watcher.request_waiting(&Request::WaitJob {
                job_id,
                started: false,
            });
            if matches!(r, Ok(Response::Allocation(_)))
                && !relinquished.load(std::sync::atomic::Ordering::SeqCst)
            {
                if !quiet {
                    eprintln!("{PROG}: Job allocation {job_id} has been revoked.");
                }
                let p = nix::unistd::Pid::from_raw(pid);
                let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGHUP);
                let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
                std::thread::sleep(std::time::Duration::from_secs(2));
                let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
            }
        });
    }
    let status = child.wait();
    let code: u8 = match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            match (s.code(), s.signal()) {
                (Some(c), _) => c.clamp(0, 255) as u8,
                (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
                _ => 1,
            }
        }
        Err(_) => 1,
    };
    relinquished.store(true, std::sync::atomic::Ordering::SeqCst);
    if !quiet {
        eprintln!("{PROG}: Relinquishing job allocation {job_id}");
    }
    let _ = owner.request(&Request::ReleaseAllocation {
        job_id,
        exit: ExitStatus {
            code: i32::from(code),
            signal: 0,
        },
    });
    Ok(code)
}

/// `$SHELL`, else the user's login shell, else /bin/sh.
fn user_shell() -> String {
    if let Ok(s) = std::env::var("SHELL")
        && !s.is_empty()
    {
        return s;
    }
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.shell.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_env_has_the_job_but_no_task_variables() {
        let mut j = crate::model::job::sample_running(9, "interactive", vec![2]);
        j.spec.ntasks = Some(2);
        let env: std::collections::BTreeMap<_, _> = command_env(&j, &[], "c").into_iter().collect();
        assert_eq!(env.get("SLURM_JOB_ID").map(String::as_str), Some("9"));
        assert_eq!(env.get("SLURM_NTASKS").map(String::as_str), Some("2"));
        assert_eq!(
            env.get("SLURM_JOB_NAME").map(String::as_str),
            Some("interactive")
        );
        assert!(!env.contains_key("SLURM_PROCID"));
        assert!(!env.contains_key("SLURMD_NODENAME"));
        assert!(!env.contains_key("HOME") || env["HOME"].is_empty());
        assert!(!env.contains_key("SLURM_HET_SIZE"));
    }

    #[test]
    fn command_env_of_a_het_job_names_every_component() {
        use crate::model::job::HetInfo;
        let mut l = crate::model::job::sample_running(9, "interactive", vec![2]);
        l.spec.ntasks = Some(2);
        l.het = Some(HetInfo {
            job_id: 9,
            offset: 0,
            size: 2,
        });
        let mut c = crate::model::job::sample_running(10, "interactive", vec![1]);
        c.spec.ntasks = Some(1);
        c.het = Some(HetInfo {
            job_id: 9,
            offset: 1,
            size: 2,
        });
        let env: std::collections::BTreeMap<_, _> =
            command_env(&l, &[c], "c").into_iter().collect();
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!(get("SLURM_JOB_ID"), Some("9"));
        assert_eq!(get("SLURM_HET_SIZE"), Some("2"));
        assert_eq!(get("SLURM_JOB_ID_HET_GROUP_0"), Some("9"));
        assert_eq!(get("SLURM_JOB_ID_HET_GROUP_1"), Some("10"));
        // The plain variables are component 0's.
        assert_eq!(get("SLURM_NTASKS"), Some("2"));
        assert_eq!(get("SLURM_NTASKS_HET_GROUP_1"), Some("1"));
        assert!(!env.contains_key("SLURM_PROCID"));
        assert!(!env.keys().any(|k| k.starts_with("SLURM_PROCID_")));
    }
}
