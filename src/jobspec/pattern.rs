//! Filename patterns of `--output`, `--error` and `--input` (`%j`, `%x`, `%A_%a`, …) and
//! the default output names. Cf. Slurm's src/slurmd/common/fname.c (`fname_create`),
//! used by slurmstepd's io.c when it opens a step's files.
//!
//! Rules, as Slurm 22.05 applies them (golden `output_patterns.txt`):
//! - `%%` is a literal `%`; an unknown `%c` and a trailing `%` are kept as written.
//! - Digits after `%` are a zero-padding width for numeric fields (`%4j` → `0230`),
//!   capped at 10 like Slurm; text fields (`%x`, `%u`, `%N`) ignore the width.
//! - `%a` of a job that is not an array task is `4294967294` (Slurm's NO_VAL);
//!   `%A` of such a job is its job id.
//! - A pattern containing a backslash is not expanded at all: the backslashes are
//!   removed and the rest is taken literally (`\%j` stays `%j`).
//!
//! Expansion never fails: any input string yields a file name.

/// Slurm's NO_VAL, which `%a` prints for a job that is not an array task.
pub const NO_ARRAY_TASK: u32 = 0xffff_fffe;

/// Largest zero-padding width Slurm honours.
const MAX_WIDTH: usize = 10;

/// Which step a file belongs to, for `%s` and `%J`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// The batch script (`%s` = `batch`, `%J` = the bare job id).
    Batch,
    /// The extern step (`%s` = `extern`).
    Extern,
    /// A numbered step (`srun` inside a job).
    Id(u32),
}

/// Everything a pattern can refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternCtx<'a> {
    /// `%j`: the job id (an array task's own id).
    pub job_id: u32,
    /// `%A` and `%a`: the array master's id and this task's index; `None` for a job that
    /// is not an array task.
    pub array: Option<(u32, u32)>,
    /// `%x`: the job name.
    pub job_name: &'a str,
    /// `%u`: the user name.
    pub user: &'a str,
    /// `%N`: the short name of the node the file is opened on.
    pub node: &'a str,
    /// `%n`: the node's index within the job (0 for the batch shell).
    pub node_id: u32,
    /// `%t`: the task's rank (0 for the batch shell).
    pub task_id: u32,
    /// `%s`, `%J`: the step.
    pub step: StepKind,
}

impl<'a> PatternCtx<'a> {
    /// The context of a batch script's files: task 0 on node 0 of the batch step.
    pub fn batch(
        job_id: u32,
        array: Option<(u32, u32)>,
        job_name: &'a str,
        user: &'a str,
        node: &'a str,
    ) -> PatternCtx<'a> {
        PatternCtx {
            job_id,
            array,
            job_name,
            user,
            node,
            node_id: 0,
            task_id: 0,
            step: StepKind::Batch,
        }
    }
}

/// Slurm's default `--output` pattern: `slurm-%j.out`, or `slurm-%A_%a.out` for arrays.
pub fn default_stdout(is_array: bool) -> &'static str {
    if is_array {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

/// Expands `pattern` with the values of `ctx` (rules in the module docs).
pub fn expand_pattern(pattern: &str, ctx: &PatternCtx<'_>) -> String {
    if pattern.contains('\\') {
        return pattern.chars().filter(|&c| c != '\\').collect();
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        // `%` [digits] conversion
        let mut j = i + 1;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let digits: String = chars[i + 1..j].iter().collect();
        // An absurdly long number saturates, as strtoul does, and is then capped.
        let width = match digits.parse::<usize>() {
            Ok(w) => w.min(MAX_WIDTH),
            Err(_) if digits.is_empty() => 0,
            Err(_) => MAX_WIDTH,
        };
        let Some(&conv) = chars.get(j) else {
            // Trailing `%` or `%<digits>`: nothing to convert, keep the text.
            out.extend(&chars[i..]);
            break;
        };
        let num = |n: u32| format!("{n:0width$}");
        match conv {
            '%' => out.push('%'),
            'j' => out.push_str(&num(ctx.job_id)),
            'J' => {
                out.push_str(&num(ctx.job_id));
                match ctx.step {
                    StepKind::Batch => {}
                    StepKind::Extern => out.push_str(".extern"),
                    StepKind::Id(s) => out.push_str(&format!(".{s}")),
                }
            }
            'A' => out.push_str(&num(ctx.array.map_or(ctx.job_id, |a| a.0))),
            'a' => out.push_str(&num(ctx.array.map_or(NO_ARRAY_TASK, |a| a.1))),
            'b' => out.push_str(&num(ctx.array.map_or(NO_ARRAY_TASK, |a| a.1) % 10)),
            's' => match ctx.step {
                StepKind::Batch => out.push_str("batch"),
                StepKind::Extern => out.push_str("extern"),
                StepKind::Id(s) => out.push_str(&num(s)),
            },
            't' => out.push_str(&num(ctx.task_id)),
            'n' => out.push_str(&num(ctx.node_id)),
            'N' => out.push_str(ctx.node),
            'u' => out.push_str(ctx.user),
            'x' => out.push_str(ctx.job_name),
            _ => out.extend(&chars[i..=j]),
        }
        i = j + 1;
    }
    out
}

/// An expanded file name made absolute: relative names are resolved in the job's
/// working directory (not the submit directory), as slurmstepd does.
pub fn in_work_dir(work_dir: &str, name: &str) -> String {
    if name.starts_with('/') || work_dir.is_empty() {
        name.to_string()
    } else {
        format!("{}/{}", work_dir.trim_end_matches('/'), name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(job_id: u32, name: &'static str) -> PatternCtx<'static> {
        PatternCtx::batch(job_id, None, name, "alice", "node01")
    }

    // Each case is a command of golden output_patterns.txt and the file it produced.
    #[test]
    fn golden_output_patterns() {
        let cases: [(&str, PatternCtx, &str); 8] = [
            ("%x-%j.out", ctx(224, "patjob"), "patjob-224.out"),
            (
                "%A_%a.out",
                PatternCtx::batch(226, Some((225, 0)), "patarr", "alice", "node01"),
                "225_0.out",
            ),
            (
                "%A_%a.out",
                PatternCtx::batch(225, Some((225, 1)), "patarr", "alice", "node01"),
                "225_1.out",
            ),
            (
                "%N-%j.out",
                PatternCtx::batch(226, None, "wrap", "alice", "vm"),
                "vm-226.out",
            ),
            ("%u-%j.out", ctx(227, "wrap"), "alice-227.out"),
            (
                "%x.%j.%%.out",
                ctx(229, "with space"),
                "with space.229.%.out",
            ),
            (
                "pad-%4j-%3a.out",
                ctx(230, "wrap"),
                "pad-0230-4294967294.out",
            ),
            (
                "arr-%A-%a-%j.out",
                PatternCtx::batch(231, Some((231, 3)), "wrap", "alice", "node01"),
                "arr-231-3-231.out",
            ),
        ];
        for (pat, c, want) in cases {
            assert_eq!(expand_pattern(pat, &c), want, "{pat}");
        }
    }

    #[test]
    fn default_names() {
        assert_eq!(default_stdout(false), "slurm-%j.out");
        assert_eq!(default_stdout(true), "slurm-%A_%a.out");
        let arr = PatternCtx::batch(152, Some((151, 0)), "env.sh", "alice", "node01");
        assert_eq!(
            expand_pattern(default_stdout(true), &arr),
            "slurm-151_0.out"
        );
        assert_eq!(
            expand_pattern(default_stdout(false), &ctx(125, "env.sh")),
            "slurm-125.out"
        );
    }

    #[test]
    fn steps_tasks_and_nodes() {
        // Conformance check 017: p%%-%6j-J%J-s%s.txt of a batch script.
        assert_eq!(
            expand_pattern("p%%-%6j-J%J-s%s.txt", &ctx(42, "x")),
            "p%-000042-J42-sbatch.txt"
        );
        let mut c = ctx(42, "x");
        c.step = StepKind::Id(3);
        c.task_id = 5;
        c.node_id = 1;
        assert_eq!(expand_pattern("%J-%s-%t-%n-%2t", &c), "42.3-3-5-1-05");
        c.step = StepKind::Extern;
        assert_eq!(expand_pattern("%J %s", &c), "42.extern extern");
    }

    #[test]
    fn array_modulo_and_master() {
        let c = PatternCtx::batch(160, Some((151, 17)), "a", "alice", "n");
        assert_eq!(expand_pattern("%b %A %a %j", &c), "7 151 17 160");
        // A job that is not an array task: %A is the job id itself.
        assert_eq!(expand_pattern("%A", &ctx(99, "a")), "99");
    }

    #[test]
    fn odd_input_is_kept() {
        let c = ctx(7, "nm");
        assert_eq!(expand_pattern("", &c), "");
        assert_eq!(expand_pattern("plain.txt", &c), "plain.txt");
        assert_eq!(expand_pattern("end%", &c), "end%");
        assert_eq!(expand_pattern("end%12", &c), "end%12");
        assert_eq!(expand_pattern("%q-%3Z-%j", &c), "%q-%3Z-7");
        assert_eq!(expand_pattern("%5x|%5u", &c), "nm|alice");
        assert_eq!(expand_pattern("%99j", &c), "0000000007");
        assert_eq!(expand_pattern("%99999999999999999999j", &c), "0000000007");
        assert_eq!(expand_pattern("ü%jé", &c), "ü7é");
    }

    #[test]
    fn backslash_disables_expansion() {
        assert_eq!(expand_pattern("\\%j-%x.out", &ctx(7, "nm")), "%j-%x.out");
    }

    #[test]
    fn relative_names_resolve_in_work_dir() {
        assert_eq!(
            in_work_dir("/tmp/anchor-chdir", "rel-246.out"),
            "/tmp/anchor-chdir/rel-246.out"
        );
        assert_eq!(in_work_dir("/w/", "a/b"), "/w/a/b");
        assert_eq!(in_work_dir("/w", "/abs/x"), "/abs/x");
    }
}
