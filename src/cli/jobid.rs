//! Job-id arguments as every Slurm front-end accepts them (COMPAT.md §2.9; cf.
//! src/common/slurm_protocol_defs.c `unfmt_jobid_string` and scancel's id parser):
//! `N`, `N_i` (array element), `N_[a-b,c]` (array remainder), `N+k` (het component),
//! each optionally followed by a step: `.batch`, `.extern` or `.S`.
//!
//! Invariant: a parsed id has a non-zero job number.

use crate::model::array::IndexSet;
use crate::proto::ArrayTasks;
use std::fmt;

/// Which step of a job an id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepSel {
    /// `N.batch`.
    Batch,
    /// `N.extern`.
    Extern,
    /// `N.S`.
    Num(u32),
}

impl StepSel {
    /// The step id as sacct and `StepRecord::id` spell it.
    pub fn as_record_id(&self) -> String {
        match self {
            StepSel::Batch => "batch".into(),
            StepSel::Extern => "extern".into(),
            StepSel::Num(n) => n.to_string(),
        }
    }
}

/// Which array element(s) an id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArraySel {
    /// `N_i`.
    Task(u32),
    /// `N_[...]`, kept as written inside the brackets.
    Expr(String),
}

/// One parsed job-id argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdSpec {
    /// The job number before any `_`, `+` or `.`.
    pub job: u32,
    /// `_i` or `_[...]`.
    pub array: Option<ArraySel>,
    /// `+k`.
    pub het: Option<u32>,
    /// `.batch`, `.extern`, `.S`.
    pub step: Option<StepSel>,
}

impl JobIdSpec {
    /// A bare `N`.
    pub fn plain(job: u32) -> JobIdSpec {
        JobIdSpec {
            job,
            array: None,
            het: None,
            step: None,
        }
    }

    /// True when the id is just a job number.
    pub fn is_plain(&self) -> bool {
        self.array.is_none() && self.het.is_none() && self.step.is_none()
    }
}

impl JobIdSpec {
    /// The array tasks the id names (`N_i`, `N_[expr]`, a `%N` suffix ignored), as the
    /// wire carries them; `None` for an id without an array part or with a malformed
    /// bracket expression.
    pub fn array_tasks(&self) -> Option<ArrayTasks> {
        let tasks = match self.array.as_ref()? {
            ArraySel::Task(t) => IndexSet::of(*t),
            ArraySel::Expr(e) => {
                let list = e.split('%').next().unwrap_or("");
                IndexSet::parse(list, u32::MAX).ok()?
            }
        };
        Some(ArrayTasks {
            job: self.job,
            tasks,
        })
    }
}

/// Splits parsed ids into plain job ids and array-task selections, as `JobFilter` and
/// the hold/release/requeue requests take them. Ids with a step part are left out
/// (callers refuse or handle those first).
pub fn split_ids(specs: &[JobIdSpec]) -> (Vec<u32>, Vec<ArrayTasks>) {
    let mut ids = Vec::new();
    let mut tasks = Vec::new();
    for s in specs {
        match s.array_tasks() {
            Some(t) => tasks.push(t),
            None if s.array.is_none() => ids.push(s.job),
            None => {}
        }
    }
    (ids, tasks)
}

impl fmt::Display for JobIdSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.job)?;
        match &self.array {
            Some(ArraySel::Task(t)) => write!(f, "_{t}")?,
            Some(ArraySel::Expr(e)) => write!(f, "_[{e}]")?,
            None => {}
        }
        if let Some(h) = self.het {
            write!(f, "+{h}")?;
        }
        if let Some(s) = &self.step {
            write!(f, ".{}", s.as_record_id())?;
        }
        Ok(())
    }
}

fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses one job-id argument; `None` when it is not a valid id (callers print their
/// command's own error text).
pub fn parse_job_id(s: &str) -> Option<JobIdSpec> {
    let s = s.trim();
    let (head, step) = match s.split_once('.') {
        Some((h, st)) => {
            let sel = match st.to_ascii_lowercase().as_str() {
                "batch" => StepSel::Batch,
                "extern" => StepSel::Extern,
                other => StepSel::Num(number(other)?),
            };
            (h, Some(sel))
        }
        None => (s, None),
    };
    let (head, het) = match head.split_once('+') {
        Some((h, k)) => (h, Some(number(k)?)),
        None => (head, None),
    };
    let (job, array) = match head.split_once('_') {
        Some((j, a)) => {
            let sel = if let Some(inner) = a.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                let ok = !inner.is_empty()
                    && inner
                        .bytes()
                        .all(|b| b.is_ascii_digit() || matches!(b, b',' | b'-' | b'%' | b':'));
                if !ok {
                    return None;
                }
                ArraySel::Expr(inner.to_string())
            } else {
                ArraySel::Task(number(a)?)
            };
            (j, Some(sel))
        }
        None => (head, None),
    };
    let job = number(job).filter(|j| *j > 0)?;
    Some(JobIdSpec {
        job,
        array,
        het,
        step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse_job_id("168"), Some(JobIdSpec::plain(168)));
        let a = parse_job_id("179_7").unwrap();
        assert_eq!(a.array, Some(ArraySel::Task(7)));
        assert_eq!(a.to_string(), "179_7");
        let b = parse_job_id("125.batch").unwrap();
        assert_eq!(b.step, Some(StepSel::Batch));
        assert_eq!(b.to_string(), "125.batch");
        assert_eq!(parse_job_id("125.0").unwrap().step, Some(StepSel::Num(0)));
        assert_eq!(
            parse_job_id("125.extern").unwrap().step,
            Some(StepSel::Extern)
        );
        assert_eq!(parse_job_id("7+1").unwrap().het, Some(1));
        let r = parse_job_id("28_[0-6,8-9%2]").unwrap();
        assert_eq!(r.array, Some(ArraySel::Expr("0-6,8-9%2".into())));
        assert_eq!(r.to_string(), "28_[0-6,8-9%2]");
        assert_eq!(parse_job_id("8_1.batch").unwrap().to_string(), "8_1.batch");
        assert!(parse_job_id("168").unwrap().is_plain());
    }

    #[test]
    fn array_selections() {
        let t = parse_job_id("179_7").unwrap().array_tasks().unwrap();
        assert_eq!((t.job, t.tasks.to_string()), (179, "7".to_string()));
        let r = parse_job_id("28_[0-6,8-9%2]")
            .unwrap()
            .array_tasks()
            .unwrap();
        assert_eq!(r.tasks.to_string(), "0-6,8-9");
        assert_eq!(parse_job_id("28").unwrap().array_tasks(), None);
        let specs: Vec<JobIdSpec> = ["5", "6_1", "7_[1-3]"]
            .iter()
            .map(|s| parse_job_id(s).unwrap())
            .collect();
        let (ids, tasks) = split_ids(&specs);
        assert_eq!(ids, vec![5]);
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[1].label(), "7_[1-3]");
        assert_eq!(tasks[0].label(), "6_1");
    }

    #[test]
    fn rejected_forms() {
        for bad in [
            "abc", "", "0", "12a", "12_", "12.", "12.x", "_3", "12_[a]", "-5", "12+",
        ] {
            assert_eq!(parse_job_id(bad), None, "{bad}");
        }
    }
}
