//! `--export`: which of the submitting shell's variables a job starts with
//! (cf. Slurm's sbatch/opt.c `--export` handling and env.c `env_array_merge_slurm`).
//!
//! The client resolves the whole environment at submit time, so the controller and the
//! node only ever see the final map in `JobSpec::environment`:
//!
//! | `--export=`          | job environment                                            |
//! |----------------------|------------------------------------------------------------|
//! | (absent), `ALL`      | every variable of the submit environment                   |
//! | `NONE`               | only the submit environment's `SLURM_*` variables          |
//! | `A,B`                | `SLURM_*` plus `A` and `B` with their submit-time values   |
//! | `A,B=v`              | `SLURM_*` plus `A` (from the environment) and `B=v`        |
//! | `ALL,A=v`            | everything, with `A` set (or overridden) to `v`            |
//!
//! A bare name that is not set in the submit environment is skipped, as Slurm does.
//! Variables the job always gets (`SLURM_JOB_ID`, …) are added at launch, not here.
//!
//! Limitation: items are split on every comma, so a value cannot contain one
//! (`--export=P=a,b` sets `P=a` and exports a variable named `b`).

use std::collections::BTreeMap;

/// An `--export` value that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// Empty value, or an item like `=v` with no name.
    #[error("Invalid --export specification")]
    Invalid,
    /// Both `ALL` and `NONE` in one list.
    #[error("--export can not contain both ALL and NONE")]
    AllAndNone,
}

/// Builds the job's starting environment from the `--export` value (`None` = `ALL`) and
/// the environment sbatch itself runs in.
///
/// Errors: [`ExportError`] for an empty value, an item without a name, or `ALL` with `NONE`.
pub fn job_environment(
    export: Option<&str>,
    submit_env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ExportError> {
    let Some(spec) = export else {
        return Ok(submit_env.clone());
    };
    if spec.trim().is_empty() {
        return Err(ExportError::Invalid);
    }
    let items: Vec<&str> = spec.split(',').filter(|i| !i.is_empty()).collect();
    let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
    let none = items.iter().any(|i| i.eq_ignore_ascii_case("NONE"));
    if all && none {
        return Err(ExportError::AllAndNone);
    }
    let mut env: BTreeMap<String, String> = if all {
        submit_env.clone()
    } else {
        submit_env
            .iter()
            .filter(|(k, _)| k.starts_with("SLURM_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    for item in items {
        if item.eq_ignore_ascii_case("ALL") || item.eq_ignore_ascii_case("NONE") {
            continue;
        }
        match item.split_once('=') {
            Some(("", _)) => return Err(ExportError::Invalid),
            Some((k, v)) => {
                env.insert(k.to_string(), v.to_string());
            }
            None => {
                if let Some(v) = submit_env.get(item) {
                    env.insert(item.to_string(), v.clone());
                }
            }
        }
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [
            ("HOME", "/home/alice"),
            ("CONF_A", "from_env_a"),
            ("CONF_C", "should_not_pass"),
            ("SLURM_CONF", "/etc/slurm/slurm.conf"),
            ("PATH", "/usr/bin:/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn keys(m: &BTreeMap<String, String>) -> Vec<&str> {
        m.keys().map(String::as_str).collect()
    }

    #[test]
    fn default_and_all_export_everything() {
        assert_eq!(job_environment(None, &env()).unwrap(), env());
        assert_eq!(job_environment(Some("ALL"), &env()).unwrap(), env());
        assert_eq!(job_environment(Some("all"), &env()).unwrap(), env());
    }

    #[test]
    fn none_keeps_only_slurm_variables() {
        let e = job_environment(Some("NONE"), &env()).unwrap();
        assert_eq!(keys(&e), ["SLURM_CONF"]);
    }

    #[test]
    fn names_take_values_from_the_submit_environment() {
        // conformance 023: CONF_A from env, CONF_B given, CONF_C not listed.
        let e = job_environment(Some("CONF_A,CONF_B=explicit_b"), &env()).unwrap();
        assert_eq!(keys(&e), ["CONF_A", "CONF_B", "SLURM_CONF"]);
        assert_eq!(e["CONF_A"], "from_env_a");
        assert_eq!(e["CONF_B"], "explicit_b");
    }

    #[test]
    fn unset_bare_names_are_skipped() {
        let e = job_environment(Some("NOT_SET_ANYWHERE"), &env()).unwrap();
        assert_eq!(keys(&e), ["SLURM_CONF"]);
    }

    #[test]
    fn all_plus_assignments_override() {
        // conformance 021 part 2.
        let e = job_environment(Some("ALL,CONF_B=added,HOME=/x"), &env()).unwrap();
        assert_eq!(e["CONF_B"], "added");
        assert_eq!(e["HOME"], "/x");
        assert_eq!(e["CONF_C"], "should_not_pass");
    }

    #[test]
    fn values_may_contain_equals_and_be_empty() {
        let e = job_environment(Some("A=x=y,B="), &env()).unwrap();
        assert_eq!(e["A"], "x=y");
        assert_eq!(e["B"], "");
    }

    #[test]
    fn bad_values_are_errors() {
        assert_eq!(job_environment(Some(""), &env()), Err(ExportError::Invalid));
        assert_eq!(
            job_environment(Some("=v"), &env()),
            Err(ExportError::Invalid)
        );
        assert_eq!(
            job_environment(Some("ALL,NONE"), &env()),
            Err(ExportError::AllAndNone)
        );
    }
}
