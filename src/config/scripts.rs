//! Node scripts (Slurm's slurm.conf `Prolog`, `Epilog`, `TaskProlog`, `TaskEpilog`,
//! `PrologFlags`, `PrologEpilogTimeout`, `HealthCheckProgram`, `HealthCheckInterval`,
//! `HealthCheckNodeState`), resolved from the top-level keys of the TOML file. The
//! controller sends them to every agent (`ToAgent::Configure`) and with every launch, so
//! that remote nodes need no configuration of their own; the paths name files on the
//! nodes, as in Slurm.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which nodes run the health check (Slurm's `HealthCheckNodeState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HealthNodeState {
    /// Every node, whatever it runs (Slurm's default, `ANY`).
    #[default]
    Any,
    /// Nodes running no job (`IDLE`).
    Idle,
    /// Nodes running at least one job (`ALLOC`).
    Alloc,
}

/// The node-script settings every agent and stepd needs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeScripts {
    /// Run as root on a node before the job's first step there (or at allocation with
    /// `PrologFlags=Alloc`), with the job's SLURM_* environment. A failure drains the
    /// node ("Prolog error") and requeues the job held.
    pub prolog: Option<PathBuf>,
    /// Run as root on each node of the job when it ends; a failure drains the node
    /// ("Epilog error").
    pub epilog: Option<PathBuf>,
    /// Run by stepd as the user before each task; its `export`/`unset`/`print` lines
    /// change the task's environment and output.
    pub task_prolog: Option<PathBuf>,
    /// Run by stepd as the user after each task.
    pub task_epilog: Option<PathBuf>,
    /// `PrologFlags=Alloc` (or `Contain`, which implies it): the prolog runs on every
    /// node of the job when it is allocated, not at its first step there.
    pub prolog_alloc: bool,
    /// `PrologFlags=ForceRequeueOnFail`: a job whose prolog fails is requeued even when
    /// it asked `--no-requeue`.
    pub force_requeue_on_fail: bool,
    /// Seconds a prolog or epilog (and a task prolog/epilog) may run before it is
    /// killed and counted as failed (`PrologEpilogTimeout`); `None`: no limit, Slurm's
    /// default.
    pub prolog_epilog_timeout: Option<u32>,
    /// Run as root on every node every `health_check_interval` seconds (and when the
    /// agent starts); a non-zero exit drains the node with its output as the reason.
    pub health_check_program: Option<PathBuf>,
    /// Seconds between health checks; 0 (Slurm's default) runs it only at agent start.
    pub health_check_interval: u32,
    /// Which nodes run the periodic health check.
    pub health_check_node_state: HealthNodeState,
    /// Seconds stepd waits, at launch, for the directory of a job's or step's output,
    /// error or input file (and the input file itself) to appear before failing the
    /// launch (config `launch_io_wait`; `None`: [`DEFAULT_LAUNCH_IO_WAIT`]). Tools such
    /// as submitit create `%j/` folders only after sbatch returns; Slurm's slower launch
    /// lets them win that race, sluice's fast one would not. A sluice key, no Slurm twin.
    pub launch_io_wait: Option<u32>,
}

/// Seconds stepd waits for a missing output directory when `launch_io_wait` is unset.
pub const DEFAULT_LAUNCH_IO_WAIT: u32 = 5;

impl NodeScripts {
    /// How long stepd waits for a missing output/error/input directory at launch.
    pub fn launch_io_wait(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.launch_io_wait.unwrap_or(DEFAULT_LAUNCH_IO_WAIT),
        ))
    }
}

/// The raw top-level keys, with Slurm's names accepted beside snake_case.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct RawScripts {
    pub prolog: Option<PathBuf>,
    pub epilog: Option<PathBuf>,
    pub task_prolog: Option<PathBuf>,
    pub task_epilog: Option<PathBuf>,
    pub prolog_flags: Option<String>,
    pub prolog_epilog_timeout: Option<u32>,
    pub health_check_program: Option<PathBuf>,
    pub health_check_interval: Option<u32>,
    pub health_check_node_state: Option<String>,
    pub launch_io_wait: Option<u32>,
}

impl RawScripts {
    /// Resolves the keys; relative paths are made absolute by `abs`. Errors: an unknown
    /// or unsupported PrologFlags or HealthCheckNodeState value, named.
    pub(super) fn resolve(self, abs: impl Fn(PathBuf) -> PathBuf) -> Result<NodeScripts, String> {
        let mut s = NodeScripts {
            prolog: self.prolog.map(&abs),
            epilog: self.epilog.map(&abs),
            task_prolog: self.task_prolog.map(&abs),
            task_epilog: self.task_epilog.map(&abs),
            prolog_epilog_timeout: self.prolog_epilog_timeout.filter(|&t| t != 65534),
            health_check_program: self.health_check_program.map(&abs),
            health_check_interval: self.health_check_interval.unwrap_or(0),
            launch_io_wait: self.launch_io_wait,
            ..NodeScripts::default()
        };
        for flag in self
            .prolog_flags
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            match flag.to_ascii_lowercase().as_str() {
                "alloc" => s.prolog_alloc = true,
                "forcerequeueonfail" => s.force_requeue_on_fail = true,
                // salloc does not wait for the prolog here anyway.
                "nohold" => {}
                "contain" | "deferbatch" | "runinjob" | "serial" | "x11" => {
                    return Err(format!(
                        "prolog_flags: {flag} is not supported yet by sluice (Alloc, NoHold and ForceRequeueOnFail are)"
                    ));
                }
                _ => return Err(format!("prolog_flags: unknown flag '{flag}'")),
            }
        }
        if let Some(v) = &self.health_check_node_state {
            for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                s.health_check_node_state = match part.to_ascii_uppercase().as_str() {
                    "ANY" => HealthNodeState::Any,
                    "IDLE" => HealthNodeState::Idle,
                    "ALLOC" => HealthNodeState::Alloc,
                    "MIXED" | "CYCLE" | "NONDRAINED_IDLE" => {
                        return Err(format!(
                            "health_check_node_state: {part} is not supported yet by sluice (ANY, IDLE, ALLOC are)"
                        ));
                    }
                    _ => return Err(format!("health_check_node_state: unknown value '{part}'")),
                };
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(flags: &str) -> RawScripts {
        RawScripts {
            prolog_flags: Some(flags.into()),
            ..RawScripts::default()
        }
    }

    #[test]
    fn prolog_flags_parse_and_refuse() {
        let s = raw("Alloc,ForceRequeueOnFail").resolve(|p| p).unwrap();
        assert!(s.prolog_alloc && s.force_requeue_on_fail);
        assert!(!raw("NoHold").resolve(|p| p).unwrap().prolog_alloc);
        let e = raw("Alloc,Contain").resolve(|p| p).unwrap_err();
        assert!(e.contains("Contain is not supported yet"), "{e}");
        let e = raw("Bogus").resolve(|p| p).unwrap_err();
        assert!(e.contains("unknown flag 'Bogus'"), "{e}");
    }

    #[test]
    fn health_state_and_paths() {
        let r = RawScripts {
            prolog: Some("p.sh".into()),
            health_check_node_state: Some("idle".into()),
            prolog_epilog_timeout: Some(65534),
            ..RawScripts::default()
        };
        let s = r.resolve(|p| PathBuf::from("/etc/x").join(p)).unwrap();
        assert_eq!(
            s.prolog.as_deref(),
            Some(std::path::Path::new("/etc/x/p.sh"))
        );
        assert_eq!(s.health_check_node_state, HealthNodeState::Idle);
        // Slurm's INFINITE16 means no limit.
        assert_eq!(s.prolog_epilog_timeout, None);
        let bad = RawScripts {
            health_check_node_state: Some("CYCLE".into()),
            ..RawScripts::default()
        };
        assert!(bad.resolve(|p| p).unwrap_err().contains("CYCLE"));
    }
}
