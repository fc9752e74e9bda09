//! Job dependencies (`--dependency`, `scontrol update Dependency=`): the parsed list, each
//! item's state as the controller last evaluated it, and the text Slurm prints
//! (`afterok:208(failed)`, `singleton(unfulfilled)`). Cf. Slurm's
//! src/slurmctld/job_scheduler.c (`update_job_dependency`, `test_job_dependency`) and
//! src/common/slurm_protocol_defs.c for the printed form.
//!
//! Grammar: items separated by `,` (all must be satisfied) or `?` (any one suffices),
//! never both; an item is `singleton` or `TYPE:JOB[+MIN][:JOB[+MIN]…]` where TYPE is
//! after, afterany, afterburstbuffer, aftercorr, afternotok or afterok (any case) and JOB
//! is `N`, `N_i` (one array task) or `N_*` (a whole array).
//!
//! Pure: evaluation against other jobs is the controller's (`ctld::depend`); this module
//! only folds item states into the job's [`DepStatus`].

use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of one dependency item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepKind {
    /// `after`: the other job has started (or was cancelled), plus `+MIN` minutes.
    After,
    /// `afterany`: the other job has ended, however.
    AfterAny,
    /// `afterburstbuffer`: treated as `afterany` (no burst buffers here).
    AfterBurstBuffer,
    /// `aftercorr`: each task of this array after the same task of the other array ends OK.
    AfterCorr,
    /// `afternotok`: the other job has ended in a failed state.
    AfterNotOk,
    /// `afterok`: the other job has completed with exit code 0.
    AfterOk,
    /// `singleton`: no other job of the same name and user is running or queued earlier.
    Singleton,
}

impl DepKind {
    /// Slurm's name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::After => "after",
            DepKind::AfterAny => "afterany",
            DepKind::AfterBurstBuffer => "afterburstbuffer",
            DepKind::AfterCorr => "aftercorr",
            DepKind::AfterNotOk => "afternotok",
            DepKind::AfterOk => "afterok",
            DepKind::Singleton => "singleton",
        }
    }

    fn parse(s: &str) -> Option<DepKind> {
        Some(match s.to_ascii_lowercase().as_str() {
            "after" => DepKind::After,
            "afterany" => DepKind::AfterAny,
            "afterburstbuffer" => DepKind::AfterBurstBuffer,
            "aftercorr" => DepKind::AfterCorr,
            "afternotok" => DepKind::AfterNotOk,
            "afterok" => DepKind::AfterOk,
            _ => return None,
        })
    }
}

/// Which part of the other job an item waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepTarget {
    /// The job `N` as given (a plain job, or one array task by its own id).
    Job,
    /// `N_i`: task `i` of array `N`.
    Task(u32),
    /// `N_*`: every task of array `N` (what `N` means when `N` is an array).
    AllTasks,
}

/// How far an item is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepState {
    #[default]
    Unfulfilled,
    Fulfilled,
    /// Can never be satisfied.
    Failed,
}

impl DepState {
    fn as_str(self) -> &'static str {
        match self {
            DepState::Unfulfilled => "unfulfilled",
            DepState::Fulfilled => "fulfilled",
            DepState::Failed => "failed",
        }
    }
}

/// One item of a dependency list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepItem {
    pub kind: DepKind,
    /// The other job's id (0 for `singleton`).
    pub job: u32,
    pub target: DepTarget,
    /// `+MIN`: minutes to wait after the event.
    pub minutes: u32,
    pub state: DepState,
}

impl fmt::Display for DepItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == DepKind::Singleton {
            return write!(f, "singleton({})", self.state.as_str());
        }
        write!(f, "{}:{}", self.kind.as_str(), self.job)?;
        match self.target {
            DepTarget::Job => {}
            DepTarget::Task(i) => write!(f, "_{i}")?,
            DepTarget::AllTasks => f.write_str("_*")?,
        }
        if self.minutes > 0 {
            write!(f, "+{}", self.minutes)?;
        }
        write!(f, "({})", self.state.as_str())
    }
}

/// What a job's dependency list amounts to for scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepStatus {
    /// Some item is still open (reason `Dependency`).
    Waiting,
    /// Nothing left to wait for.
    Satisfied,
    /// It can never be satisfied (reason `DependencyNeverSatisfied`).
    Never,
}

/// A job's parsed `--dependency`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub items: Vec<DepItem>,
    /// `?`-separated: any one item suffices (else all must).
    pub any: bool,
}

/// Why a dependency expression was refused (Slurm: "Job dependency problem").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad dependency {0:?}")]
pub struct DepError(pub String);

impl Dependency {
    /// Parses a `--dependency` value. An empty string parses to `None` (no dependency,
    /// as `scontrol update Dependency=` clears it).
    ///
    /// Errors: [`DepError`] for an unknown type, a missing or non-numeric job id, a bad
    /// `+MIN`, or a mix of `,` and `?`.
    pub fn parse(s: &str) -> Result<Option<Dependency>, DepError> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        let bad = || DepError(s.to_string());
        let has_and = s.contains(',');
        let any = s.contains('?');
        if has_and && any {
            return Err(bad());
        }
        let mut items = Vec::new();
        for part in s.split([',', '?']) {
            let part = part.trim();
            if part.eq_ignore_ascii_case("singleton") {
                items.push(DepItem {
                    kind: DepKind::Singleton,
                    job: 0,
                    target: DepTarget::Job,
                    minutes: 0,
                    state: DepState::Unfulfilled,
                });
                continue;
            }
            let mut fields = part.split(':');
            let kind = fields.next().and_then(DepKind::parse).ok_or_else(bad)?;
            let mut any_job = false;
            for jf in fields {
                any_job = true;
                let (idpart, minutes) = match jf.split_once('+') {
                    Some((j, m)) => (j, number(m).ok_or_else(bad)?),
                    None => (jf, 0),
                };
                let (job, target) = match idpart.split_once('_') {
                    Some((j, "*")) => (j, DepTarget::AllTasks),
                    Some((j, t)) => (j, DepTarget::Task(number(t).ok_or_else(bad)?)),
                    None => (idpart, DepTarget::Job),
                };
                let job = number(job).filter(|j| *j > 0).ok_or_else(bad)?;
                items.push(DepItem {
                    kind,
                    job,
                    target,
                    minutes,
                    state: DepState::Unfulfilled,
                });
            }
            if !any_job {
                return Err(bad());
            }
        }
        Ok(Some(Dependency { items, any }))
    }

    /// Folds the item states: with `,` any failed item fails the whole, all fulfilled
    /// satisfies it; with `?` any fulfilled item satisfies it, all failed fails it.
    pub fn status(&self) -> DepStatus {
        let st = |s: DepState| self.items.iter().any(|i| i.state == s);
        let all = |s: DepState| self.items.iter().all(|i| i.state == s);
        if self.any {
            if st(DepState::Fulfilled) {
                DepStatus::Satisfied
            } else if all(DepState::Failed) {
                DepStatus::Never
            } else {
                DepStatus::Waiting
            }
        } else if st(DepState::Failed) {
            DepStatus::Never
        } else if all(DepState::Fulfilled) {
            DepStatus::Satisfied
        } else {
            DepStatus::Waiting
        }
    }

    /// Whether any item names another job (as opposed to only `singleton`).
    pub fn names_jobs(&self) -> bool {
        self.items.iter().any(|i| i.kind != DepKind::Singleton)
    }
}

impl fmt::Display for Dependency {
    /// Slurm's text: `afterok:208(unfulfilled),afterany:209(failed)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.any { "?" } else { "," };
        for (k, item) in self.items.iter().enumerate() {
            if k > 0 {
                f.write_str(sep)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

fn number(s: &str) -> Option<u32> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Dependency {
        Dependency::parse(s).unwrap().unwrap()
    }

    #[test]
    fn parses_kinds_lists_and_times() {
        let d = p("afterok:208");
        assert_eq!(d.to_string(), "afterok:208(unfulfilled)");
        let d = p("afterok:1:2,afternotok:3");
        assert_eq!(d.items.len(), 3);
        assert!(!d.any);
        assert_eq!(
            d.to_string(),
            "afterok:1(unfulfilled),afterok:2(unfulfilled),afternotok:3(unfulfilled)"
        );
        let d = p("after:5+10?afterany:6");
        assert!(d.any);
        assert_eq!(d.items[0].minutes, 10);
        assert_eq!(
            d.to_string(),
            "after:5+10(unfulfilled)?afterany:6(unfulfilled)"
        );
        assert_eq!(p("singleton").to_string(), "singleton(unfulfilled)");
        assert_eq!(p("SINGLETON").items[0].kind, DepKind::Singleton);
        assert_eq!(p("AfterOK:7").items[0].kind, DepKind::AfterOk);
        let d = p("afterok:179_3:179_*,aftercorr:12");
        assert_eq!(d.items[0].target, DepTarget::Task(3));
        assert_eq!(d.items[1].target, DepTarget::AllTasks);
        assert_eq!(d.items[1].to_string(), "afterok:179_*(unfulfilled)");
        assert_eq!(Dependency::parse("").unwrap(), None);
    }

    #[test]
    fn refuses_bad_expressions() {
        for bad in [
            "bogus:1",
            "notatype:1",
            "afterok:notanumber",
            "afterok",
            "afterok:",
            "afterok:0",
            "afterok:1,afterok:2?afterok:3",
            "after:1+x",
            "afterok:1_x",
            "singleton:1",
        ] {
            assert!(Dependency::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn status_folds_and_or() {
        let mut d = p("afterok:1,afterok:2");
        assert_eq!(d.status(), DepStatus::Waiting);
        d.items[0].state = DepState::Fulfilled;
        assert_eq!(d.status(), DepStatus::Waiting);
        d.items[1].state = DepState::Fulfilled;
        assert_eq!(d.status(), DepStatus::Satisfied);
        d.items[1].state = DepState::Failed;
        assert_eq!(d.status(), DepStatus::Never);

        let mut o = p("afterok:1?afterok:2");
        o.items[0].state = DepState::Failed;
        assert_eq!(o.status(), DepStatus::Waiting);
        o.items[1].state = DepState::Fulfilled;
        assert_eq!(o.status(), DepStatus::Satisfied);
        o.items[1].state = DepState::Failed;
        assert_eq!(o.status(), DepStatus::Never);
        assert_eq!(o.to_string(), "afterok:1(failed)?afterok:2(failed)");
    }
}
