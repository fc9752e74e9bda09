//! `squeue -s`: running job steps instead of jobs (cf. src/squeue/print.c, the
//! `_print_step_*` functions). Rows are the steps (`JOB.STEP`, and `JOB.batch` for the
//! batch script) of active jobs, filtered by `-j`, `-u`/`--me`, `-p` and the optional
//! `-s` list; the default format is Slurm's `%.15i %.8j %.9P %.8u %.9M %N`.

use super::format::{self, Field};
use super::squeue::Args;
use crate::model::time::fmt_squeue_duration;
use crate::model::{Job, JobState, StepRecord};

/// squeue's default step format.
pub const DEFAULT_STEP_FORMAT: &str = "%.15i %.8j %.9P %.8u %.9M %N";

/// One step row.
pub struct StepRow<'a> {
    pub job: &'a Job,
    pub step: &'a StepRecord,
    pub now: i64,
}

/// The step fields.
pub fn step_fields<'a>() -> Vec<Field<StepRow<'a>>> {
    type R<'b, 'c> = &'b StepRow<'c>;
    vec![
        Field::new(Some('i'), &["stepid"], "STEPID", |r: R| {
            format!("{}.{}", r.job.id, r.step.id)
        }),
        Field::new(Some('j'), &["stepname", "name"], "NAME", |r: R| {
            r.step.name.clone()
        }),
        Field::new(Some('P'), &["partition"], "PARTITION", |r: R| {
            r.job.partition.clone()
        }),
        Field::new(Some('u'), &["username", "user"], "USER", |r: R| {
            r.job.user.clone()
        }),
        Field::new(Some('U'), &["userid"], "UID", |r: R| r.job.uid.to_string()),
        Field::new(Some('M'), &["timeused"], "TIME", |r: R| {
            fmt_squeue_duration((r.now - r.step.start_time).max(0) as u64)
        }),
        Field::new(Some('N'), &["nodelist", "nodes"], "NODELIST", |r: R| {
            r.step.nodes.clone()
        }),
        Field::new(Some('l'), &["timelimit"], "TIME_LIMIT", |r: R| {
            r.step
                .detail
                .as_ref()
                .and_then(|d| d.time_limit)
                .unwrap_or(r.job.time_limit)
                .to_squeue()
        }),
        Field::new(Some('S'), &["starttime"], "START_TIME", |r: R| {
            super::timefmt::fmt_ts(r.step.start_time)
        }),
        Field::new(Some('A'), &["numtasks"], "TASKS", |r: R| {
            r.step.ntasks.to_string()
        }),
        Field::new(Some('C'), &["numcpus"], "CPUS", |r: R| {
            r.step.ncpus.to_string()
        }),
        Field::new(Some('b'), &["tres-per-node"], "TRES_PER_NODE", |_: R| {
            "N/A".into()
        }),
    ]
}

/// Which steps to show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepQuery {
    /// `-s` list as `(job, step id text)`; empty = all.
    pub steps: Vec<(u32, String)>,
    pub jobs: Vec<u32>,
    pub users: Option<Vec<u32>>,
    pub partitions: Vec<String>,
    pub noheader: bool,
    pub format: String,
}

/// Builds the query from squeue's arguments and the `-s` value.
///
/// Errors: Slurm's messages for bad step or job ids.
pub fn build(
    a: &Args,
    steps_arg: &str,
    user_of: &dyn Fn(&str) -> Option<u32>,
    my_uid: u32,
) -> Result<StepQuery, String> {
    let mut q = StepQuery {
        noheader: a.noheader,
        format: a
            .format
            .clone()
            .unwrap_or_else(|| DEFAULT_STEP_FORMAT.to_string()),
        ..StepQuery::default()
    };
    for s in steps_arg.split(',').filter(|s| !s.is_empty()) {
        let (j, st) = s
            .split_once('.')
            .ok_or_else(|| format!("squeue: error: Invalid job step id: {s}"))?;
        let j = j
            .parse::<u32>()
            .map_err(|_| format!("squeue: error: Invalid job step id: {s}"))?;
        q.steps.push((j, st.to_string()));
    }
    for list in &a.jobs {
        for j in list.split(',').filter(|s| !s.is_empty()) {
            q.jobs.push(
                j.parse::<u32>()
                    .map_err(|_| format!("squeue: error: Invalid job id: {j}"))?,
            );
        }
    }
    let mut users = Vec::new();
    if a.me {
        users.push(my_uid);
    }
    for list in &a.user {
        for u in list.split(',').filter(|s| !s.is_empty()) {
            match u.parse::<u32>().ok().or_else(|| user_of(u)) {
                Some(id) => users.push(id),
                None => return Err(format!("squeue: error: Invalid user: {u}\n")),
            }
        }
    }
    if !users.is_empty() {
        q.users = Some(users);
    }
    if let Some(p) = &a.partition {
        q.partitions = p
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
    }
    Ok(q)
}

/// The output for `jobs` at `now`.
pub fn render(q: &StepQuery, jobs: &[Job], now: i64) -> String {
    let table = step_fields();
    let parsed = format::parse_short(&q.format, &table);
    let mut out = String::new();
    if !q.noheader {
        out.push_str(parsed.format.header(&table).trim_end());
        out.push('\n');
    }
    let mut rows: Vec<StepRow> = Vec::new();
    for job in jobs.iter().filter(|j| j.is_active()) {
        if !q.jobs.is_empty() && !q.jobs.contains(&job.id) {
            continue;
        }
        if q.users.as_ref().is_some_and(|u| !u.contains(&job.uid)) {
            continue;
        }
        if !q.partitions.is_empty() && !q.partitions.contains(&job.partition) {
            continue;
        }
        for step in job.steps.iter().filter(|s| s.state == JobState::Running) {
            if !q.steps.is_empty() && !q.steps.iter().any(|(j, s)| *j == job.id && *s == step.id) {
                continue;
            }
            rows.push(StepRow { job, step, now });
        }
    }
    for r in &rows {
        out.push_str(parsed.format.row(&table, r).trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ExitStatus;

    fn job() -> Job {
        let mut j = crate::model::job::sample_running(17, "wrap", vec![2]);
        for (id, name) in [("batch", "batch"), ("0", "sleep")] {
            j.steps.push(StepRecord {
                id: id.into(),
                name: name.into(),
                state: JobState::Running,
                exit: ExitStatus::default(),
                start_time: 1003,
                end_time: None,
                nodes: "node01".into(),
                ncpus: 1,
                ntasks: 1,
                max_rss_kib: 0,
                cpu_secs: 0.0,
                detail: None,
                usage: None,
            });
        }
        j
    }

    #[test]
    fn default_step_listing() {
        let q = StepQuery {
            format: DEFAULT_STEP_FORMAT.into(),
            ..StepQuery::default()
        };
        let out = render(&q, &[job()], 1003 + 65);
        assert_eq!(
            out,
            "         STEPID     NAME PARTITION     USER      TIME NODELIST\n\
             \x20      17.batch    batch     debug    alice      1:05 node01\n\
             \x20          17.0    sleep     debug    alice      1:05 node01\n"
        );
        let q = StepQuery {
            format: "%i".into(),
            noheader: true,
            steps: vec![(17, "0".into())],
            ..StepQuery::default()
        };
        assert_eq!(render(&q, &[job()], 2000), "17.0\n");
    }
}
