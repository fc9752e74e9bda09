//! Output-file patterns (provisional; replaced by the full Slurm set).

use crate::model::Job;

/// Expands `%j`, `%x`, `%N` and `%%` for the batch step of `job` on `node`.
pub fn expand_for_job(pattern: &str, job: &Job, node: &str) -> String {
    pattern
        .replace("%%", "\u{0}")
        .replace("%j", &job.id.to_string())
        .replace("%x", &job.spec.name)
        .replace("%N", node)
        .replace('\u{0}', "%")
}
