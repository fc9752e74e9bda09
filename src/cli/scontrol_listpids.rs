//! `scontrol listpids [JOBID[.STEPID]|*] [NODENAME]`: the processes of the job steps
//! running on this node (cf. Slurm's src/scontrol/info_job.c `scontrol_list_pids`,
//! which asks each local slurmstepd).
//!
//! sluice's stepd keeps every task in its own cgroup,
//! `<root>/uid_<U>/job_<J>/step_<S>/task_<T>` (see `stepd::isolate`), below the
//! `[cgroup] root` of the controller the front-end's configuration names, so the
//! processes of this controller's steps are found in `/proc/<pid>/cgroup`: a task's
//! first process (whose parent is outside the task's cgroup) gets its local id and
//! its global rank (`SLURM_PROCID`, when its environment is readable), the others `-`.
//! Where stepd runs without cgroups (degraded isolation) no step is found.

use std::collections::BTreeMap;
use std::path::Path;

/// Where a process sits: job, step name (`batch`, `extern` or a number) and task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub job: u32,
    pub step: String,
    pub task: Option<u32>,
}

/// The place of a process from the text of its `/proc/<pid>/cgroup`, for the cgroup
/// tree `root`; `None` when it is in no step of that tree.
pub fn place(cgroup_text: &str, root: &str) -> Option<Place> {
    for line in cgroup_text.lines() {
        let path = line.splitn(3, ':').nth(2)?;
        let parts: Vec<&str> = path.split('/').collect();
        let Some(i) = parts.iter().position(|p| *p == root) else {
            continue;
        };
        let rest = &parts[i + 1..];
        if rest.len() < 3 || !rest[0].starts_with("uid_") {
            continue;
        }
        let Some(job) = rest[1].strip_prefix("job_").and_then(|j| j.parse().ok()) else {
            continue;
        };
        let Some(step) = rest[2].strip_prefix("step_") else {
            continue;
        };
        let task = rest
            .get(3)
            .and_then(|t| t.strip_prefix("task_"))
            .and_then(|t| t.parse().ok());
        return Some(Place {
            job,
            step: step.to_string(),
            task,
        });
    }
    None
}

/// One process of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub place: Place,
    /// (local id, global rank) of a task's first process.
    pub task: Option<(u32, Option<u32>)>,
}

/// What to list: every step, one job's, or one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    All,
    Job(u32),
    Step(u32, String),
}

/// Parses the optional job argument: `*` or absent = all, `J`, `J.S`.
///
/// Errors: Slurm's `"X" does not look like a jobid` / `stepid`.
pub fn parse_which(arg: Option<&str>) -> Result<Which, String> {
    let Some(a) = arg.filter(|a| !a.starts_with('*')) else {
        return Ok(Which::All);
    };
    let (j, s) = match a.split_once('.') {
        Some((j, s)) => (j, Some(s)),
        None => (a, None),
    };
    let job: u32 = j
        .parse()
        .map_err(|_| format!("\"{j}\" does not look like a jobid"))?;
    match s {
        None => Ok(Which::Job(job)),
        Some(s) if s == "batch" || s == "extern" || s.parse::<u32>().is_ok() => {
            Ok(Which::Step(job, s.to_string()))
        }
        Some(s) => Err(format!("\"{s}\" does not look like a stepid")),
    }
}

/// The processes of this controller's steps on this node (`proc` is `/proc`).
pub fn scan(proc: &Path, root: &str) -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut found: BTreeMap<u32, (Place, u32)> = BTreeMap::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cg) = std::fs::read_to_string(e.path().join("cgroup")) else {
            continue;
        };
        let Some(p) = place(&cg, root) else { continue };
        let ppid = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| {
                // pid (comm) state ppid …; comm may hold spaces and parentheses.
                let after = s.rsplit_once(')')?.1.to_string();
                after.split_whitespace().nth(1)?.parse().ok()
            })
            .unwrap_or(0);
        found.insert(pid, (p, ppid));
    }
    let mut out: Vec<Proc> = found
        .iter()
        .map(|(&pid, (p, ppid))| {
            let parent_same = found.get(ppid).is_some_and(|(pp, _)| pp == p);
            let task = match p.task {
                Some(t) if !parent_same => {
                    let rank = std::fs::read(proc.join(pid.to_string()).join("environ"))
                        .ok()
                        .and_then(|env| {
                            env.split(|b| *b == 0)
                                .find_map(|kv| kv.strip_prefix(b"SLURM_PROCID"))
                                .and_then(|v| v.strip_prefix(b"="))
                                .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
                        });
                    Some((t, rank))
                }
                _ => None,
            };
            Proc {
                pid,
                place: p.clone(),
                task,
            }
        })
        .collect();
    out.sort_by_key(|x| {
        (
            x.place.job,
            step_order(&x.place.step),
            x.task.is_none(),
            x.task.map(|t| t.0),
            x.pid,
        )
    });
    out
}

fn step_order(s: &str) -> (u32, u32) {
    match s {
        "extern" => (1, 0),
        "batch" => (2, 0),
        n => (0, n.parse().unwrap_or(0)),
    }
}

/// Renders Slurm's listing (header on stdout; a missing job or step on stderr, with
/// exit status 1): `(stdout, stderr, code)`.
pub fn render(procs: &[Proc], which: &Which) -> (String, String, u8) {
    let mut out = format!(
        "{:<8} {:<8} {:<6} {:<7} {:<8}\n",
        "PID", "JOBID", "STEPID", "LOCALID", "GLOBALID"
    );
    let chosen: Vec<&Proc> = procs
        .iter()
        .filter(|p| match which {
            Which::All => true,
            Which::Job(j) => p.place.job == *j,
            Which::Step(j, s) => p.place.job == *j && &p.place.step == s,
        })
        .collect();
    if chosen.is_empty() {
        let err = match which {
            Which::All => "No job steps exist on this node.\n".to_string(),
            Which::Job(j) => format!("Job {j} does not exist on this node.\n"),
            Which::Step(j, s) => format!("Job step {j}.{s} does not exist on this node.\n"),
        };
        return (out, err, 1);
    }
    for p in chosen {
        let (local, global) = match p.task {
            Some((l, g)) => (l.to_string(), g.map_or("-".into(), |g| g.to_string())),
            None => ("-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<8} {:<8} {:<6} {:<7} {:<8}\n",
            p.pid, p.place.job, p.place.step, local, global
        ));
    }
    (out, String::new(), 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_step_and_task_in_a_cgroup_file() {
        let v1 = "12:pids:/sluice-x/uid_0/job_7/step_batch/task_0\n1:name=systemd:/\n";
        assert_eq!(
            place(v1, "sluice-x"),
            Some(Place {
                job: 7,
                step: "batch".into(),
                task: Some(0)
            })
        );
        let v2 = "0::/system.slice/sluice/uid_1000/job_12/step_3/task_2\n";
        assert_eq!(
            place(v2, "sluice").map(|p| (p.job, p.step, p.task)),
            Some((12, "3".to_string(), Some(2)))
        );
        assert_eq!(place(v1, "sluice"), None, "another controller's tree");
        assert_eq!(place("0::/user.slice\n", "sluice"), None);
    }

    #[test]
    fn job_and_step_arguments() {
        assert_eq!(parse_which(None), Ok(Which::All));
        assert_eq!(parse_which(Some("*")), Ok(Which::All));
        assert_eq!(parse_which(Some("12")), Ok(Which::Job(12)));
        assert_eq!(
            parse_which(Some("12.batch")),
            Ok(Which::Step(12, "batch".into()))
        );
        assert_eq!(
            parse_which(Some("x1")),
            Err("\"x1\" does not look like a jobid".into())
        );
        assert_eq!(
            parse_which(Some("1.x")),
            Err("\"x\" does not look like a stepid".into())
        );
    }

    #[test]
    fn renders_slurms_columns() {
        let p = |pid, task| Proc {
            pid,
            place: Place {
                job: 5,
                step: "0".into(),
                task: Some(0),
            },
            task,
        };
        let (out, err, code) = render(&[p(100, Some((0, Some(3)))), p(101, None)], &Which::All);
        assert_eq!(
            out,
            "PID      JOBID    STEPID LOCALID GLOBALID\n\
             100      5        0      0       3       \n\
             101      5        0      -       -       \n"
        );
        assert_eq!((err.as_str(), code), ("", 0));
        let (_, err, code) = render(&[], &Which::Job(9));
        assert_eq!(
            (err.as_str(), code),
            ("Job 9 does not exist on this node.\n", 1)
        );
    }
}
