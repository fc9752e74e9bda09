//! The job option model shared by `sbatch` (and later `srun`/`salloc`): the clap
//! definitions of every option (cf. src/common/slurm_opt.c, the one option table of
//! Slurm, and src/sbatch/opt.c for the sbatch-only ones), and the normalisation that
//! turns raw option text into the `JobSpec` that goes on the wire.
//!
//! Two layers, as in ripgrep's low-args/high-args split:
//! - [`JobOpts`]/[`BatchOpts`]/[`SbatchArgs`] hold option values exactly as typed
//!   (strings). clap only tokenises: it knows names, short letters, which options take
//!   values, `--opt=v` vs `--opt v`, and unambiguous long prefixes (`--part=debug`,
//!   `infer_long_args`), like Slurm's getopt_long.
//! - [`JobOpts::to_spec`] validates every value and prints Slurm's messages
//!   (`Invalid --time specification`, exit 255), so clap never formats a user error.
//!
//! Options that sluice does not implement yet are parsed and then refused with
//! `--X is not supported yet by sluice` (exit 1): a job never silently loses a request.
//! A few harmless ones are accepted with a warning that they are ignored.
//!
//! Invariants: every option has a `long` name that is also its clap id with `_` for
//! `-`, so `directives.rs` can name options from the `SBATCH_*` table; options that
//! may legitimately be given twice (directive then command line) override themselves
//! (`args_override_self`), and `--mem`/`--mem-per-cpu`, `--requeue`/`--no-requeue`
//! override each other, so the last source wins.

use crate::jobspec::export;
use crate::jobspec::units::{parse_mem_mb, parse_time_limit};
use crate::model::constraint::Constraint;
use crate::model::gres::{GresReq, parse_gpus, parse_gres_list, parse_licenses};
use crate::model::{JobSpec, MemReq, SignalSpec, TimeLimit};
use chrono::{DateTime, FixedOffset};
use clap::{ArgAction, Args, Parser};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// Options every job-creating command understands (sbatch, srun, salloc).
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Parallel run options")]
pub struct JobOpts {
    /// Job name (default: the script's base name; `sbatch` for stdin, `wrap` for --wrap)
    #[arg(short = 'J', long = "job-name", value_name = "NAME")]
    pub job_name: Option<String>,
    /// File for the batch script's stdout (pattern: %j %x %u %A %a %N %%)
    #[arg(short = 'o', long = "output", value_name = "PATTERN")]
    pub output: Option<String>,
    /// File for the batch script's stderr (default: same as --output)
    #[arg(short = 'e', long = "error", value_name = "PATTERN")]
    pub error: Option<String>,
    /// File connected to the batch script's stdin (default /dev/null)
    #[arg(short = 'i', long = "input", value_name = "PATTERN")]
    pub input: Option<String>,
    /// Working directory of the job (relative to the submit directory)
    #[arg(short = 'D', long = "chdir", value_name = "DIR")]
    pub chdir: Option<String>,
    /// Partition(s), comma-separated
    #[arg(short = 'p', long = "partition", value_name = "PARTITIONS")]
    pub partition: Option<String>,
    /// Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED
    #[arg(short = 't', long = "time", value_name = "TIME")]
    pub time: Option<String>,
    /// Number of tasks
    #[arg(short = 'n', long = "ntasks", value_name = "N")]
    pub ntasks: Option<String>,
    /// Number of nodes: N or MIN-MAX
    #[arg(short = 'N', long = "nodes", value_name = "MIN[-MAX]")]
    pub nodes: Option<String>,
    /// CPUs per task
    #[arg(short = 'c', long = "cpus-per-task", value_name = "N")]
    pub cpus_per_task: Option<String>,
    /// Tasks per node
    #[arg(
        long = "ntasks-per-node",
        visible_alias = "tasks-per-node",
        value_name = "N"
    )]
    pub ntasks_per_node: Option<String>,
    /// Memory per node (units K, M, G, T; default M); 0 = all of the node's memory
    #[arg(long = "mem", value_name = "SIZE", overrides_with = "mem_per_cpu")]
    pub mem: Option<String>,
    /// Memory per allocated CPU (units K, M, G, T; default M)
    #[arg(long = "mem-per-cpu", value_name = "SIZE", overrides_with = "mem")]
    pub mem_per_cpu: Option<String>,
    /// Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...
    #[arg(long = "export", value_name = "ALL|NONE|VARS")]
    pub export: Option<String>,
    /// Submit the job held (release with `scontrol release`)
    #[arg(short = 'H', long = "hold")]
    pub hold: bool,
    /// Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon
    #[arg(short = 'b', long = "begin", value_name = "TIME")]
    pub begin: Option<String>,
    /// Scheduling priority adjustment (default 100 when given without a value)
    #[arg(long = "nice", value_name = "ADJ", num_args = 0..=1, require_equals = true,
          default_missing_value = "100", allow_hyphen_values = true)]
    pub nice: Option<String>,
    /// The job may be requeued
    #[arg(long = "requeue", overrides_with = "no_requeue")]
    pub requeue: bool,
    /// The job must never be requeued
    #[arg(long = "no-requeue", overrides_with = "requeue")]
    pub no_requeue: bool,
    /// Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)
    #[arg(long = "signal", value_name = "[R|B:]SIG[@SECS]")]
    pub signal: Option<String>,
    /// Output files: append or truncate
    #[arg(long = "open-mode", value_name = "append|truncate")]
    pub open_mode: Option<String>,
    /// Quiet: no informational messages
    #[arg(short = 'Q', long = "quiet")]
    pub quiet: bool,
    /// More diagnostics on stderr (repeatable)
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// Account to charge
    #[arg(short = 'A', long = "account", value_name = "NAME")]
    pub account: Option<String>,
    /// Quality of service
    #[arg(short = 'q', long = "qos", value_name = "QOS")]
    pub qos: Option<String>,
    /// Arbitrary comment
    #[arg(long = "comment", value_name = "TEXT")]
    pub comment: Option<String>,
    /// Nodes the job must include (hostlist)
    #[arg(short = 'w', long = "nodelist", value_name = "HOSTLIST")]
    pub nodelist: Option<String>,
    /// Nodes the job must not use (hostlist)
    #[arg(short = 'x', long = "exclude", value_name = "HOSTLIST")]
    pub exclude: Option<String>,
    /// Do not share nodes with other jobs
    #[arg(long = "exclusive", value_name = "user|mcs", num_args = 0..=1,
          require_equals = true, default_missing_value = EXCLUSIVE_BARE)]
    pub exclusive: Option<String>,
    /// Nodes with consecutive names
    #[arg(long = "contiguous")]
    pub contiguous: bool,
    /// Cluster(s) to submit to (only this cluster exists)
    #[arg(short = 'M', long = "clusters", value_name = "NAMES")]
    pub clusters: Option<String>,
    /// Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING
    #[arg(short = 'a', long = "array", value_name = "INDICES")]
    pub array: Option<String>,
    /// Start after other jobs: TYPE:JOB[:JOB...] joined by `,` (all) or `?` (any);
    /// TYPE is after, afterany, afterok, afternotok, aftercorr; or `singleton`
    #[arg(short = 'd', long = "dependency", value_name = "LIST")]
    pub dependency: Option<String>,
    /// Cancel the job if a dependency can never be satisfied
    #[arg(long = "kill-on-invalid-dep", value_name = "yes|no")]
    pub kill_on_invalid_dep: Option<String>,
    /// Remove the job if it cannot end before TIME (same forms as --begin)
    #[arg(long = "deadline", value_name = "TIME")]
    pub deadline: Option<String>,
    /// Submit only if the job can start at once
    #[arg(short = 'I', long = "immediate", value_name = "SECS", num_args = 0..=1,
          require_equals = true, default_missing_value = "")]
    pub immediate: Option<String>,

    #[command(flatten)]
    pub later: LaterOpts,
    #[command(flatten)]
    pub ignored: IgnoredOpts,
    #[command(flatten)]
    pub containers: super::container_opts::ContainerOpts,
}

/// Slurm options sluice will implement later. They are parsed (so that scripts get a
/// precise message instead of `unrecognized option`) and refused at normalisation.
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Resource, constraint and placement options")]
pub struct LaterOpts {
    /// Generic resources per node: NAME[:TYPE][:COUNT],...
    #[arg(long = "gres", value_name = "LIST")]
    pub gres: Option<String>,
    /// GPUs for the whole job: [TYPE:]N
    #[arg(short = 'G', long = "gpus", value_name = "[TYPE:]N")]
    pub gpus: Option<String>,
    /// GPUs per node: [TYPE:]N
    #[arg(long = "gpus-per-node", value_name = "[TYPE:]N")]
    pub gpus_per_node: Option<String>,
    /// GPUs per task: [TYPE:]N
    #[arg(long = "gpus-per-task", value_name = "[TYPE:]N")]
    pub gpus_per_task: Option<String>,
    /// GPUs on each socket the job uses (allocations also need --sockets-per-node)
    #[arg(long = "gpus-per-socket", value_name = "[TYPE:]N")]
    pub gpus_per_socket: Option<String>,
    /// Sockets the job needs on each node
    #[arg(long = "sockets-per-node", value_name = "N")]
    pub sockets_per_node: Option<String>,
    /// CPUs per allocated GPU
    #[arg(long = "cpus-per-gpu", value_name = "N")]
    pub cpus_per_gpu: Option<String>,
    /// Memory per allocated GPU (units K, M, G, T; default M)
    #[arg(long = "mem-per-gpu", value_name = "SIZE")]
    pub mem_per_gpu: Option<String>,
    /// Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count
    #[arg(long = "ntasks-per-gpu", value_name = "N")]
    pub ntasks_per_gpu: Option<String>,
    /// GPU binding of tasks (sbatch/salloc: the default of the job's steps):
    /// [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none
    #[arg(long = "gpu-bind", value_name = "TYPE")]
    pub gpu_bind: Option<String>,
    /// CPUs and GPU affinity: enforce-binding (only CPUs near the job's GPUs) or
    /// disable-binding (affinity ignored)
    #[arg(long = "gres-flags", value_name = "FLAGS")]
    pub gres_flags: Option<String>,
    /// Node features required: a&b, a|b, a*N, [a|b]
    #[arg(short = 'C', long = "constraint", value_name = "LIST")]
    pub constraint: Option<String>,
    /// Reservation to run in
    #[arg(long = "reservation", value_name = "NAME")]
    pub reservation: Option<String>,
    /// Most leaf switches wanted, and how long to wait for them: N[@TIME]
    #[arg(long = "switches", value_name = "N[@WAIT]")]
    pub switches: Option<String>,
    /// Licenses: NAME[:COUNT],...
    #[arg(short = 'L', long = "licenses", value_name = "LIST")]
    pub licenses: Option<String>,
    /// Fixed priority (operators only)
    #[arg(long = "priority", value_name = "N")]
    pub priority: Option<String>,
    /// Minimum time limit: backfill may shorten the limit down to it
    #[arg(long = "time-min", value_name = "TIME")]
    pub time_min: Option<String>,
    /// Task distribution: block, cyclic, plane=N
    #[arg(short = 'm', long = "distribution", value_name = "TYPE")]
    pub distribution: Option<String>,
    /// Share CPUs with other jobs where the partition allows it
    #[arg(short = 's', long = "oversubscribe")]
    pub oversubscribe: bool,
    /// Overcommit CPUs: allocate as if one task per node
    #[arg(short = 'O', long = "overcommit")]
    pub overcommit: bool,
    /// Minimum CPUs per node
    #[arg(long = "mincpus", value_name = "N")]
    pub mincpus: Option<String>,
    /// Minimum temporary disk per node (units K, M, G, T; default M)
    #[arg(long = "tmp", value_name = "SIZE")]
    pub tmp: Option<String>,
    /// Nodes with at least N threads per core; tasks use N threads of each core
    #[arg(long = "threads-per-core", value_name = "N")]
    pub threads_per_core: Option<String>,
    /// At most N tasks on each core
    #[arg(long = "ntasks-per-core", value_name = "N")]
    pub ntasks_per_core: Option<String>,
    /// Task layout hint: nomultithread, multithread, compute_bound, memory_bound
    #[arg(long = "hint", value_name = "TYPE")]
    pub hint: Option<String>,
    /// Do not kill the job when a node fails (`=off`: the default behaviour)
    #[arg(short = 'k', long = "no-kill", value_name = "off", num_args = 0..=1,
          require_equals = true, default_missing_value = "")]
    pub no_kill: Option<String>,
    /// (not supported yet) Container bundle
    #[arg(long = "container", value_name = "PATH")]
    pub container: Option<String>,
}

/// Harmless Slurm options that sluice accepts and ignores, with a warning.
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Options accepted and ignored")]
pub struct IgnoredOpts {
    /// (ignored) Mail recipient
    #[arg(long = "mail-user", value_name = "USER")]
    pub mail_user: Option<String>,
    /// (ignored) Mail events
    #[arg(long = "mail-type", value_name = "TYPES")]
    pub mail_type: Option<String>,
    /// (ignored) Workload characterisation key
    #[arg(long = "wckey", value_name = "KEY")]
    pub wckey: Option<String>,
    /// (ignored) Load the user's login environment
    #[arg(long = "get-user-env", value_name = "[TIMEOUT][L|S]", num_args = 0..=1,
          require_equals = true, default_missing_value = "")]
    pub get_user_env: Option<String>,
    /// (ignored) MPI type for steps
    #[arg(long = "mpi", value_name = "TYPE")]
    pub mpi: Option<String>,
    /// (ignored) Ignore #PBS directives
    #[arg(long = "ignore-pbs")]
    pub ignore_pbs: bool,
    /// (ignored) Accounting sampling interval
    #[arg(long = "acctg-freq", value_name = "SPEC")]
    pub acctg_freq: Option<String>,
}

/// Options only `sbatch` has.
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Batch options")]
pub struct BatchOpts {
    /// Run this command line under /bin/sh instead of a script
    #[arg(long = "wrap", value_name = "COMMAND")]
    pub wrap: Option<String>,
    /// Print only the job id (and ;cluster with -M)
    #[arg(long = "parsable")]
    pub parsable: bool,
    /// Return when the job ends, with its exit code
    #[arg(short = 'W', long = "wait")]
    pub wait: bool,
    /// Only estimate when the job would start; create nothing
    #[arg(long = "test-only")]
    pub test_only: bool,
}

/// `--help` and `--usage`, which every job command takes (Slurm's "Help options"):
/// the parse functions answer them with [`OptError::Help`] (see [`help_request`]).
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Help options")]
pub struct HelpOpts {
    /// Show this help message
    #[arg(short = 'h', long = "help")]
    pub help: bool,
    /// Display a brief usage message
    #[arg(long = "usage")]
    pub usage: bool,
}

/// The whole `sbatch` command line: options, then the script path and its arguments.
/// Directives (`#SBATCH`) are parsed with this same command.
#[derive(Parser, Debug, Clone, Default, PartialEq)]
#[command(
    name = "sbatch",
    about = "Submit a batch script to sluice (Slurm-compatible)",
    infer_long_args = true,
    args_override_self = true,
    allow_negative_numbers = true,
    disable_version_flag = true,
    disable_help_flag = true,
    override_usage = "sbatch [OPTIONS...] [executable [args...]]"
)]
pub struct SbatchArgs {
    #[command(flatten)]
    pub job: JobOpts,
    #[command(flatten)]
    pub batch: BatchOpts,
    /// Print the version (as `slurm <version>`)
    #[arg(short = 'V', long = "version", help_heading = "Other options")]
    pub version: bool,
    #[command(flatten)]
    pub help: HelpOpts,
    /// Script path (none or `/dev/stdin`: read from stdin) and its arguments
    #[arg(value_name = "SCRIPT [ARGS]", trailing_var_arg = true)]
    pub script: Vec<String>,
}

/// Options only steps have (`srun`; cf. src/srun/opt.c).
#[derive(Args, Debug, Clone, Default, PartialEq)]
#[command(next_help_heading = "Step options")]
pub struct StepOpts {
    /// Prefix each output line with the task's rank
    #[arg(short = 'l', long = "label")]
    pub label: bool,
    /// The command is a configuration file of per-rank programs
    #[arg(long = "multi-prog")]
    pub multi_prog: bool,
    /// Run task 0 on a pseudo-terminal
    #[arg(long = "pty")]
    pub pty: bool,
    /// Do not line-buffer the tasks' output
    #[arg(short = 'u', long = "unbuffered")]
    pub unbuffered: bool,
    /// End the step when a task exits non-zero (0 disables)
    #[arg(short = 'K', long = "kill-on-bad-exit", value_name = "0|1", num_args = 0..=1,
          require_equals = true, default_missing_value = "1")]
    pub kill_on_bad_exit: Option<String>,
    /// Share CPUs with the job's other steps
    #[arg(long = "overlap")]
    pub overlap: bool,
    /// Use only the CPUs asked for (not all of the job's on each node)
    #[arg(long = "exact")]
    pub exact: bool,
    /// Run in this existing job
    #[arg(long = "jobid", value_name = "ID")]
    pub jobid: Option<String>,
    /// Bind tasks to CPUs: none, cores, threads[,verbose]
    #[arg(long = "cpu-bind", visible_alias = "cpu_bind", value_name = "TYPE")]
    pub cpu_bind: Option<String>,
    /// Seconds to wait after the first task ends before ending the step (accepted)
    #[arg(short = 'W', long = "wait", value_name = "SECONDS")]
    pub wait: Option<String>,
    /// Ctrl-C is forwarded at once instead of printing the step's status
    #[arg(short = 'X', long = "disable-status")]
    pub disable_status: bool,
    /// Take -n/-N from the environment only (accepted)
    #[arg(short = 'E', long = "preserve-env")]
    pub preserve_env: bool,
    /// Run on the -w nodes without an allocation (root and SlurmUser only)
    #[arg(short = 'Z', long = "no-allocate")]
    pub no_allocate: bool,
    /// Heterogeneous job components the step runs on: 0,1 | 0-2 | 1 (default: 0)
    #[arg(long = "het-group", value_name = "EXPR")]
    pub het_group: Option<String>,
}

/// The whole `srun` command line: options, then the program and its arguments.
#[derive(Parser, Debug, Clone, Default, PartialEq)]
#[command(
    name = "srun",
    about = "Run parallel tasks under sluice (Slurm-compatible)",
    infer_long_args = true,
    args_override_self = true,
    allow_negative_numbers = true,
    disable_version_flag = true,
    disable_help_flag = true,
    override_usage = "srun [OPTIONS...] executable [args...]"
)]
pub struct SrunArgs {
    #[command(flatten)]
    pub job: JobOpts,
    #[command(flatten)]
    pub step: StepOpts,
    /// Print the version (as `slurm <version>`)
    #[arg(short = 'V', long = "version", help_heading = "Other options")]
    pub version: bool,
    #[command(flatten)]
    pub help: HelpOpts,
    /// The program (or, with --multi-prog, the configuration file) and its arguments
    #[arg(value_name = "EXECUTABLE [ARGS]", trailing_var_arg = true)]
    pub command: Vec<String>,
}

/// The whole `salloc` command line.
#[derive(Parser, Debug, Clone, Default, PartialEq)]
#[command(
    name = "salloc",
    about = "Obtain a job allocation under sluice (Slurm-compatible)",
    infer_long_args = true,
    args_override_self = true,
    allow_negative_numbers = true,
    disable_version_flag = true,
    disable_help_flag = true,
    override_usage = "salloc [OPTIONS...] [command [args...]]"
)]
pub struct SallocArgs {
    #[command(flatten)]
    pub job: JobOpts,
    /// (not supported) Grant the allocation without running a command
    #[arg(long = "no-shell", help_heading = "Allocation options")]
    pub no_shell: bool,
    /// Ring the terminal bell when the allocation is granted (accepted)
    #[arg(long = "bell", help_heading = "Allocation options")]
    pub bell: bool,
    /// Do not ring the bell (accepted)
    #[arg(long = "no-bell", help_heading = "Allocation options")]
    pub no_bell: bool,
    /// Signal to send the command when the allocation ends (accepted)
    #[arg(short = 'K', long = "kill-command", value_name = "SIGNAL", num_args = 0..=1,
          help_heading = "Allocation options",
          require_equals = true, default_missing_value = "TERM")]
    pub kill_command: Option<String>,
    /// Print the version (as `slurm <version>`)
    #[arg(short = 'V', long = "version", help_heading = "Other options")]
    pub version: bool,
    #[command(flatten)]
    pub help: HelpOpts,
    /// The command to run (default: the user's shell)
    #[arg(value_name = "COMMAND [ARGS]", trailing_var_arg = true)]
    pub command: Vec<String>,
}

/// Parses an srun command line (argv[0] included) into its components: the groups
/// between standalone `:` words (cf. srun(1) "HETEROGENEOUS JOB SUPPORT"), one for an
/// ordinary step. Each group has its own options and command; a group without a
/// command runs the next group's (srun's rule), and the options Slurm propagates
/// (see [`propagate`]) carry over from one group to the next.
///
/// Errors: [`OptError::Usage`] for unknown options, [`OptError::Help`] for `--help`.
pub fn parse_srun_argv<I, T>(argv: I) -> Result<Vec<SrunArgs>, OptError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut out: Vec<SrunArgs> = Vec::new();
    for words in het_groups(argv) {
        let mut a: SrunArgs = parse_getopt(words).map_err(|e| OptError::from_clap(&e))?;
        help_request::<SrunArgs>(
            &a.help,
            "srun [OPTIONS...] [ : [OPTIONS...]] executable [args...]",
            "executable [args...]",
        )?;
        if let Some(prev) = out.last() {
            propagate(&prev.job, &mut a.job);
            a.step.label |= prev.step.label;
            a.step.unbuffered |= prev.step.unbuffered;
            if a.step.kill_on_bad_exit.is_none() {
                a.step.kill_on_bad_exit = prev.step.kill_on_bad_exit.clone();
            }
        }
        out.push(a);
    }
    // A component without a command runs the next one's.
    for k in (0..out.len().saturating_sub(1)).rev() {
        if out[k].command.is_empty() {
            out[k].command = out[k + 1].command.clone();
        }
    }
    Ok(out)
}

/// argv (argv[0] included) split at standalone `:` words, each group with argv[0] in
/// front.
fn het_groups<I, T>(argv: I) -> Vec<Vec<String>>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut words = argv
        .into_iter()
        .map(|w| w.into().to_string_lossy().into_owned());
    let prog = words.next().unwrap_or_default();
    let rest: Vec<String> = words.collect();
    crate::jobspec::directives::split_het_groups(&rest)
        .into_iter()
        .map(|g| std::iter::once(prog.clone()).chain(g).collect())
        .collect()
}

/// Options a heterogeneous job's component takes from the one before it when it does
/// not set them itself: the ones of Slurm's propagated list (heterogeneous_jobs.html)
/// that sluice has. Task counts, memory, nodes and GPUs are each component's own.
pub fn propagate(prev: &JobOpts, cur: &mut JobOpts) {
    fn take(cur: &mut Option<String>, prev: &Option<String>) {
        if cur.is_none() {
            cur.clone_from(prev);
        }
    }
    take(&mut cur.job_name, &prev.job_name);
    take(&mut cur.output, &prev.output);
    take(&mut cur.error, &prev.error);
    take(&mut cur.input, &prev.input);
    take(&mut cur.chdir, &prev.chdir);
    take(&mut cur.time, &prev.time);
    take(&mut cur.export, &prev.export);
    take(&mut cur.begin, &prev.begin);
    take(&mut cur.nice, &prev.nice);
    take(&mut cur.signal, &prev.signal);
    take(&mut cur.open_mode, &prev.open_mode);
    take(&mut cur.account, &prev.account);
    take(&mut cur.qos, &prev.qos);
    take(&mut cur.comment, &prev.comment);
    take(&mut cur.exclude, &prev.exclude);
    take(&mut cur.dependency, &prev.dependency);
    take(&mut cur.immediate, &prev.immediate);
    take(&mut cur.later.reservation, &prev.later.reservation);
    cur.hold |= prev.hold;
    cur.quiet |= prev.quiet;
    cur.verbose = cur.verbose.max(prev.verbose);
    if !cur.requeue && !cur.no_requeue {
        cur.requeue = prev.requeue;
        cur.no_requeue = prev.no_requeue;
    }
}

/// The heterogeneous job components a `--het-group` value names, sorted and without
/// repeats: a comma-separated list of offsets and ranges (`0,1`, `0-2`, `1,3-5`),
/// optionally in brackets, each below 128 (Slurm's MAX_HET_JOB_COMPONENTS).
///
/// Errors: [`OptError::Verify`] `Invalid --het-group value: <v>` (srun exits 1).
pub fn parse_het_group(v: &str) -> Result<Vec<u32>, OptError> {
    const MAX_COMPONENTS: u32 = 128;
    let bad = || OptError::Verify(format!("Invalid --het-group value: {v}"));
    let inner = v
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(v);
    let num = |t: &str| -> Result<u32, OptError> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        t.parse::<u32>()
            .ok()
            .filter(|&n| n < MAX_COMPONENTS)
            .ok_or_else(bad)
    };
    let mut out = Vec::new();
    for item in inner.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(num(item)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Parses a salloc command line (argv[0] included) into its components (groups
/// between standalone `:` words, options propagated as for srun). The command, if
/// any, follows the last component's options.
///
/// Errors: as [`parse_srun_argv`]; [`OptError::Verify`] for a command before the last
/// component.
pub fn parse_salloc_argv<I, T>(argv: I) -> Result<Vec<SallocArgs>, OptError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut out: Vec<SallocArgs> = Vec::new();
    let groups = het_groups(argv);
    let n = groups.len();
    for (k, words) in groups.into_iter().enumerate() {
        let mut a: SallocArgs = parse_getopt(words).map_err(|e| OptError::from_clap(&e))?;
        help_request::<SallocArgs>(
            &a.help,
            "salloc [OPTIONS...] [ : [OPTIONS...]] [command [args...]]",
            "[command [args...]]",
        )?;
        if k + 1 < n && !a.command.is_empty() {
            return Err(OptError::Verify(format!(
                "the command ({}) must follow the options of the last heterogeneous job component",
                a.command[0]
            )));
        }
        if let Some(prev) = out.last() {
            propagate(&prev.job, &mut a.job);
        }
        out.push(a);
    }
    Ok(out)
}

/// A user error in options, rendered as Slurm prints it. Exit codes follow Slurm:
/// 255 for command-line errors, 1 for requests refused after parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptError {
    /// A getopt-style problem (`unrecognized option '--x'`), followed by the
    /// `Try "<prog> --help"` line; exit 255.
    Usage(String),
    /// `Invalid <opt> specification`; exit 255.
    InvalidSpec(&'static str),
    /// `Invalid numeric value "<value>" for <opt>.`; exit 255.
    InvalidNumber { opt: &'static str, value: String },
    /// `--begin` text that is not a time; exit 255.
    InvalidBegin { value: String, pos: usize },
    /// Any other fatal option error, printed after `error: `; exit 255.
    Fatal(String),
    /// An option sluice parses but does not implement yet; exit 1.
    Unsupported(String),
    /// A value refused when the options are checked as a whole (sbatch's
    /// `_opt_verify`), printed after `error: ` (each line); exit 1.
    Verify(String),
    /// Options that cannot go together, refused with `fatal: ` as slurm_opt.c's
    /// `validate_options_salloc_sbatch_srun` does; exit 1.
    Conflict(String),
    /// Help text for stdout; exit 0.
    Help(String),
}

/// Whether `--mail-type` names only Slurm's mail types (comma-separated, any case);
/// Slurm's `parse_mail_type` refuses anything else. sluice sends no mail, but a typo is
/// still refused as Slurm refuses it.
fn valid_mail_type(s: &str) -> bool {
    const TYPES: &[&str] = &[
        "NONE",
        "BEGIN",
        "END",
        "FAIL",
        "REQUEUE",
        "ALL",
        "INVALID_DEPEND",
        "STAGE_OUT",
        "TIME_LIMIT",
        "TIME_LIMIT_90",
        "TIME_LIMIT_80",
        "TIME_LIMIT_50",
        "ARRAY_TASKS",
    ];
    s.split(',')
        .all(|t| TYPES.iter().any(|k| k.eq_ignore_ascii_case(t)))
}

impl OptError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            OptError::Unsupported(_) | OptError::Verify(_) | OptError::Conflict(_) => 1,
            OptError::Help(_) => 0,
            _ => 255,
        }
    }

    /// The complete text to print (stderr, or stdout for [`OptError::Help`]), with a
    /// trailing newline, for the program `prog` (`sbatch`).
    pub fn render(&self, prog: &str) -> String {
        match self {
            OptError::Usage(m) => {
                format!("{prog}: {m}\nTry \"{prog} --help\" for more information\n")
            }
            OptError::InvalidSpec(o) => format!("{prog}: error: Invalid {o} specification\n"),
            OptError::InvalidNumber { opt, value } => {
                format!("{prog}: error: Invalid numeric value \"{value}\" for {opt}.\n")
            }
            OptError::InvalidBegin { value, pos } => format!(
                "Invalid time specification (pos={pos}): {value}\n{prog}: error: Invalid --begin specification\n"
            ),
            OptError::Fatal(m) => format!("{prog}: error: {m}\n"),
            OptError::Verify(m) => m.lines().map(|l| format!("{prog}: error: {l}\n")).collect(),
            OptError::Conflict(m) => format!("{prog}: fatal: {m}\n"),
            OptError::Unsupported(o) => {
                format!("{prog}: error: {o} is not supported yet by sluice\n")
            }
            OptError::Help(t) => t.clone(),
        }
    }

    /// Turns a clap parse error into what getopt_long would have printed.
    pub fn from_clap(e: &clap::Error) -> OptError {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        let ctx_str = |k: ContextKind| match e.get(k) {
            Some(ContextValue::String(s)) => Some(s.clone()),
            _ => None,
        };
        match e.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                OptError::Help(e.render().to_string())
            }
            ErrorKind::UnknownArgument => {
                let arg = ctx_str(ContextKind::InvalidArg).unwrap_or_default();
                match arg.strip_prefix("--") {
                    Some(_) => OptError::Usage(format!("unrecognized option '{arg}'")),
                    None => {
                        let c = arg.trim_start_matches('-').chars().next().unwrap_or('?');
                        OptError::Usage(format!("invalid option -- '{c}'"))
                    }
                }
            }
            ErrorKind::InvalidValue | ErrorKind::NoEquals
                if ctx_str(ContextKind::InvalidValue).is_none_or(|v| v.is_empty()) =>
            {
                let arg = ctx_str(ContextKind::InvalidArg).unwrap_or_default();
                let name = arg
                    .split([' ', '='])
                    .find(|w| w.starts_with("--"))
                    .unwrap_or(&arg)
                    .to_string();
                OptError::Usage(format!("option '{name}' requires an argument"))
            }
            _ => {
                // Any other clap complaint: its first line without clap's "error: ".
                let text = e.render().to_string();
                let first = text.lines().next().unwrap_or("invalid arguments");
                OptError::Usage(first.trim_start_matches("error: ").to_string())
            }
        }
    }
}

impl std::fmt::Display for OptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.render("sbatch").trim_end())
    }
}

impl std::error::Error for OptError {}

/// `cmd` with getopt_long's rule for an option's required value: the next word is the
/// value whatever it starts with (`squeue -S -i`, `sbatch -J -x`), where clap would
/// take a leading `-` for the next option. Options with an optional value (which
/// getopt takes only as `--opt=value`) or several values are left as they are.
pub fn getopt_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let one_value = a
            .get_num_args()
            .is_none_or(|r| r.min_values() == 1 && r.max_values() == 1);
        if !a.is_positional() && a.get_action().takes_values() && one_value {
            a.allow_hyphen_values(true)
        } else {
            a
        }
    })
}

/// Parses `words` (argv[0] included) with `T`'s command under [`getopt_values`].
fn parse_getopt<T, I>(words: I) -> Result<T, clap::Error>
where
    T: clap::CommandFactory + clap::FromArgMatches,
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = getopt_values(T::command());
    let mut m = cmd.try_get_matches_from_mut(words)?;
    T::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut cmd))
}

/// Parses `argv` (argv[0] included) with the sbatch command, mapping clap errors to
/// Slurm's text.
///
/// Errors: [`OptError::Usage`] for unknown options or missing values,
/// [`OptError::Help`] for `--help`.
pub fn parse_sbatch_argv<I, T>(argv: I) -> Result<SbatchArgs, OptError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let parsed = parse_sbatch_words(argv)?;
    help_request::<SbatchArgs>(
        &parsed.help,
        "sbatch [OPTIONS...] [ : [OPTIONS...]] script [args...]",
        "script [args...]",
    )?;
    Ok(parsed)
}

/// `--help` (`synopsis` first) or `--usage` (`tail` last) of the job command `C`, as
/// [`OptError::Help`] with the text built from `C`'s clap definition
/// (`cli::help`); `Ok` when neither was asked for.
fn help_request<C: clap::CommandFactory>(
    h: &HelpOpts,
    synopsis: &str,
    tail: &str,
) -> Result<(), OptError> {
    use crate::cli::help;
    if !h.help && !h.usage {
        return Ok(());
    }
    let cmd = C::command();
    let entries = help::from_clap(&cmd);
    Err(OptError::Help(if h.help {
        help::help(synopsis, &entries, "")
    } else {
        help::usage(cmd.get_name(), &entries, tail)
    }))
}

/// [`parse_sbatch_argv`] before `--help` and `--usage` are answered.
fn parse_sbatch_words<I, T>(argv: I) -> Result<SbatchArgs, OptError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    // sbatch parses the same words several times (each component, each directive line,
    // then the merged vector): recent answers are kept. The ~100-option command is
    // built once per process and reused, since building it is most of a parse's cost;
    // a parse that fails (help, usage errors) drops it rather than reuse it. Both live
    // in statics, so that nothing is torn down at exit either.
    if let Some(hit) = lock(&PARSED)
        .iter()
        .find(|(words, _)| *words == argv)
        .map(|(_, a)| a.clone())
    {
        return Ok(hit);
    }
    let mut cmd = lock(&SBATCH_COMMAND).take().unwrap_or_else(|| {
        let mut c = getopt_values(SbatchArgs::command());
        c.build();
        c
    });
    let parsed = cmd
        .try_get_matches_from_mut(argv.iter().cloned())
        .and_then(|mut m| SbatchArgs::from_arg_matches_mut(&mut m))
        .map_err(|e| OptError::from_clap(&e.format(&mut cmd)))?;
    *lock(&SBATCH_COMMAND) = Some(cmd);
    let mut memo = lock(&PARSED);
    if memo.len() >= PARSE_MEMO {
        memo.remove(0);
    }
    memo.push((argv, parsed.clone()));
    Ok(parsed)
}

/// Locks one of [`parse_sbatch_argv`]'s statics (whose data stay valid if a holder
/// panicked).
fn lock<T>(m: &'static Mutex<T>) -> std::sync::MutexGuard<'static, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many recent parses [`parse_sbatch_argv`] remembers.
const PARSE_MEMO: usize = 8;

/// The sbatch command, built (`Command::build`), between parses.
static SBATCH_COMMAND: Mutex<Option<clap::Command>> = Mutex::new(None);

/// Recent successful parses by argument vector.
#[allow(clippy::type_complexity)]
static PARSED: Mutex<Vec<(Vec<std::ffi::OsString>, SbatchArgs)>> = Mutex::new(Vec::new());

/// What the submitting process knows that the options are resolved against.
#[derive(Debug, Clone)]
pub struct SubmitContext {
    /// The directory sbatch runs in (absolute).
    pub cwd: PathBuf,
    /// sbatch's own environment.
    pub env: BTreeMap<String, String>,
    /// Short host name of the submit host.
    pub host: String,
    /// The process umask.
    pub umask: u32,
    /// The current local time (for `--begin`).
    pub now: DateTime<FixedOffset>,
}

/// The result of normalisation: the wire spec (name, script, argv and command still to
/// be filled by the front-end) and warnings to print on stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalised {
    pub spec: JobSpec,
    /// Lines (without the `sbatch: warning: ` prefix) about ignored options.
    pub warnings: Vec<String>,
}

impl JobOpts {
    /// Long names of the options that are set but not implemented yet.
    pub fn unsupported(&self) -> Vec<&'static str> {
        let l = &self.later;
        let opt = [("--container", l.container.is_some())];
        opt.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect()
    }

    /// Long names of the set options that sluice accepts and ignores.
    pub fn ignored(&self) -> Vec<&'static str> {
        let i = &self.ignored;
        [
            ("--mail-user", i.mail_user.is_some()),
            ("--mail-type", i.mail_type.is_some()),
            ("--wckey", i.wckey.is_some()),
            ("--get-user-env", i.get_user_env.is_some()),
            ("--mpi", i.mpi.is_some()),
            ("--ignore-pbs", i.ignore_pbs),
            ("--acctg-freq", i.acctg_freq.is_some()),
        ]
        .iter()
        .filter(|(_, s)| *s)
        .map(|(n, _)| *n)
        .collect()
    }

    /// Validates every option and builds the wire spec. `name`, `script`, `argv` and
    /// `command` are left empty for the front-end to fill.
    ///
    /// Errors: [`OptError::Unsupported`] (exit 1) for options not implemented yet (the
    /// first one found); otherwise Slurm's message for the first invalid value (exit 255).
    pub fn to_spec(&self, ctx: &SubmitContext) -> Result<Normalised, OptError> {
        let n = self.to_step_spec(ctx)?;
        verify_allocation(&n.spec)?;
        Ok(n)
    }

    /// Like [`JobOpts::to_spec`], without the checks that only apply to a request for
    /// an allocation ([`verify_allocation`]): what srun needs before it knows whether
    /// it runs inside a job.
    pub fn to_step_spec(&self, ctx: &SubmitContext) -> Result<Normalised, OptError> {
        if let Some(first) = self.unsupported().first() {
            return Err(OptError::Unsupported((*first).to_string()));
        }
        if let Some(t) = &self.ignored.mail_type
            && !valid_mail_type(t)
        {
            return Err(OptError::Fatal(format!("--mail-type={t} invalid")));
        }
        let warnings = self
            .ignored()
            .into_iter()
            .map(|o| format!("{o} is ignored by sluice"))
            .collect();

        let time_limit = match &self.time {
            Some(t) => Some(parse_time_limit(t).map_err(|_| OptError::InvalidSpec("--time"))?),
            None => None,
        };
        let (nodes_min, nodes_max) = match &self.nodes {
            Some(n) => {
                let (lo, hi) = parse_node_count(n)?;
                (Some(lo), hi)
            }
            None => (None, None),
        };
        let mem = match (&self.mem, &self.mem_per_cpu) {
            (Some(m), _) => Some(MemReq::PerNode(
                parse_mem_mb(m).map_err(|_| OptError::InvalidSpec("--mem"))?,
            )),
            (None, Some(m)) => Some(MemReq::PerCpu(
                parse_mem_mb(m).map_err(|_| OptError::InvalidSpec("--mem-per-cpu"))?,
            )),
            (None, None) => None,
        };
        let signal = match &self.signal {
            Some(s) => Some(parse_signal(s).ok_or(OptError::InvalidSpec("--signal"))?),
            None => None,
        };
        // `R:` lets a job overlap a reservation that has MaxStartDelay (Slurm 22.05's
        // sbatch(1)); sluice's reservations have no MaxStartDelay, so the flag could
        // only be ignored: it is refused.
        if signal.is_some_and(|s| s.reservation) {
            return Err(OptError::Unsupported(
                "--signal=R: (overlapping reservations that have MaxStartDelay)".into(),
            ));
        }
        let begin = match &self.begin {
            Some(b) => Some(parse_begin(b, &ctx.now)?),
            None => None,
        };
        let nice = match &self.nice {
            Some(n) => parse_nice(n)?,
            None => 0,
        };
        let deadline = match &self.deadline {
            Some(d) => {
                Some(parse_begin(d, &ctx.now).map_err(|_| OptError::InvalidSpec("--deadline"))?)
            }
            None => None,
        };
        let kill_on_invalid_dep = match self.kill_on_invalid_dep.as_deref() {
            None => None,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "yes" | "y" | "1" | "true" => Some(true),
                "no" | "n" | "0" | "false" => Some(false),
                _ => return Err(OptError::InvalidSpec("--kill-on-invalid-dep")),
            },
        };
        if let Some(a) = &self.array
            && !valid_array_syntax(a)
        {
            return Err(OptError::Verify("Invalid --array specification".into()));
        }
        let open_append = match self.open_mode.as_deref() {
            None => false,
            Some(m) => match m.chars().next().map(|c| c.to_ascii_lowercase()) {
                Some('a') => true,
                Some('t') => false,
                _ => return Err(OptError::InvalidSpec("--open-mode")),
            },
        };
        let mut environment = export::job_environment(self.export.as_deref(), &ctx.env)
            .map_err(|e| OptError::Fatal(e.to_string()))?;
        // pyxis's options reach the job's steps through the job's environment.
        self.containers
            .to_spec()
            .map_err(|e| OptError::Fatal(e.to_string()))?;
        environment.extend(self.containers.to_env());
        let work_dir = match &self.chdir {
            Some(d) if d.is_empty() => return Err(OptError::InvalidSpec("--chdir")),
            Some(d) => absolute(&ctx.cwd, d),
            None => ctx.cwd.clone(),
        };
        let requeue = match (self.requeue, self.no_requeue) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            _ => None,
        };
        let non_empty = |o: &Option<String>| o.clone().filter(|s| !s.is_empty());
        let l = &self.later;
        let gres = match &l.gres {
            Some(g) => parse_gres_list(g).map_err(|_| {
                OptError::Fatal(format!(
                    "Invalid generic resource (gres) specification: {g}"
                ))
            })?,
            None => Vec::new(),
        };
        let gpus = |opt: &'static str, v: &Option<String>| -> Result<Option<GresReq>, OptError> {
            match v {
                Some(g) => parse_gpus(g)
                    .map(Some)
                    .map_err(|_| OptError::InvalidSpec(opt)),
                None => Ok(None),
            }
        };
        let licenses = match &l.licenses {
            Some(x) => parse_licenses(x)
                .map_err(|_| OptError::Fatal("Invalid license specification".into()))?,
            None => Vec::new(),
        };
        if let Some(c) = l.constraint.as_deref().filter(|c| !c.is_empty()) {
            Constraint::parse(c)
                .map_err(|_| OptError::Fatal("Invalid feature specification".into()))?;
        }
        if let Some(d) = &l.distribution
            && crate::model::job::parse_dist(d).is_none()
        {
            return Err(OptError::InvalidSpec("--distribution"));
        }

        let gpu_opts = gpu_options(self)?;
        let exclusive = match self.exclusive.as_deref().map(str::trim) {
            None => None,
            Some(EXCLUSIVE_BARE) => Some(Exclusive::Nodes),
            Some(m) if m.eq_ignore_ascii_case("user") => Some(Exclusive::User),
            // slurmctld with MCSPlugin=mcs/none: sluice has no MCS labels to share by.
            Some(m) if m.eq_ignore_ascii_case("mcs") => {
                return Err(OptError::Verify(
                    "--exclusive=mcs needs an MCS plugin (MCSPlugin), which sluice does not have"
                        .into(),
                ));
            }
            Some(m) => {
                return Err(OptError::Fatal(format!("invalid exclusive option {m}")));
            }
        };
        let threads = thread_options(l)?;
        let (switches, switch_wait) = match &l.switches {
            Some(v) => {
                let (s, w) = parse_switches(v)?;
                (Some(s), w)
            }
            None => (None, None),
        };
        let spec = JobSpec {
            name: self.job_name.clone().unwrap_or_default(),
            work_dir: work_dir.to_string_lossy().into_owned(),
            submit_dir: ctx.cwd.to_string_lossy().into_owned(),
            submit_host: ctx.host.clone(),
            stdout: non_empty(&self.output),
            stderr: non_empty(&self.error),
            stdin: non_empty(&self.input),
            open_append,
            partition: non_empty(&self.partition),
            account: non_empty(&self.account),
            qos: non_empty(&self.qos),
            comment: self.comment.clone(),
            time_limit,
            ntasks: self
                .ntasks
                .as_deref()
                .map(|v| parse_count("--ntasks", v))
                .transpose()?,
            nodes_min,
            nodes_max,
            cpus_per_task: self
                .cpus_per_task
                .as_deref()
                .map(|v| parse_count("--cpus-per-task", v))
                .transpose()?,
            ntasks_per_node: self
                .ntasks_per_node
                .as_deref()
                .map(|v| parse_count("--ntasks-per-node", v))
                .transpose()?,
            mem,
            nodelist: non_empty(&self.nodelist),
            exclude: non_empty(&self.exclude),
            exclusive: exclusive == Some(Exclusive::Nodes),
            exclusive_user: exclusive == Some(Exclusive::User),
            environment: environment.into(),
            export: self.export.clone(),
            hold: self.hold,
            begin,
            nice,
            requeue,
            signal,
            umask: ctx.umask,
            gres,
            gpus: gpus("--gpus", &l.gpus)?,
            gpus_per_node: gpus("--gpus-per-node", &l.gpus_per_node)?,
            gpus_per_task: gpus("--gpus-per-task", &l.gpus_per_task)?,
            gpus_per_socket: gpus("--gpus-per-socket", &l.gpus_per_socket)?,
            sockets_per_node: gpu_opts.sockets_per_node,
            ntasks_per_gpu: gpu_opts.ntasks_per_gpu,
            gres_flags: gpu_opts.gres_flags,
            gpu_bind: l.gpu_bind.clone(),
            cpus_per_gpu: l
                .cpus_per_gpu
                .as_deref()
                .map(|v| parse_count("--cpus-per-gpu", v))
                .transpose()?,
            mem_per_gpu: match &l.mem_per_gpu {
                Some(m) => {
                    Some(parse_mem_mb(m).map_err(|_| OptError::InvalidSpec("--mem-per-gpu"))?)
                }
                None => None,
            },
            constraint: non_empty(&l.constraint),
            contiguous: self.contiguous,
            distribution: non_empty(&l.distribution),
            overcommit: l.overcommit,
            oversubscribe: l.oversubscribe,
            licenses,
            array: non_empty(&self.array),
            dependency: non_empty(&self.dependency),
            kill_on_invalid_dep,
            deadline,
            immediate: self.immediate.is_some(),
            reservation: non_empty(&l.reservation),
            switches,
            switch_wait,
            threads_per_core: threads.threads_per_core,
            ntasks_per_core: threads.ntasks_per_core,
            hint: threads.hint,
            mincpus: l
                .mincpus
                .as_deref()
                .map(|v| parse_count("--mincpus", v))
                .transpose()?,
            // slurm_opt.c: `--no-kill=off` restores the default; any other value, or
            // none, sets it.
            time_min: match l.time_min.as_deref().map(parse_time_limit) {
                None => None,
                Some(Ok(TimeLimit::Minutes(m)))
                    if time_limit.is_none_or(|t| match t {
                        TimeLimit::Minutes(l) => m <= l,
                        _ => true,
                    }) =>
                {
                    Some(m)
                }
                Some(Ok(TimeLimit::Minutes(_))) => {
                    return Err(OptError::Fatal(
                        "Invalid time-min specification (exceeds job's time or other limits)"
                            .into(),
                    ));
                }
                Some(_) => return Err(OptError::InvalidSpec("--time-min")),
            },
            priority: match l.priority.as_deref().map(str::trim) {
                None => None,
                Some(t) if t.eq_ignore_ascii_case("top") => {
                    return Err(OptError::Unsupported("--priority=TOP".into()));
                }
                // slurm_opt.c: a number below NO_VAL - 1.
                Some(t) => Some(
                    t.parse::<u32>()
                        .ok()
                        .filter(|p| *p < u32::MAX - 1)
                        .ok_or_else(|| OptError::Fatal(format!("Invalid priority: {t}")))?,
                ),
            },
            no_kill: l
                .no_kill
                .as_deref()
                .is_some_and(|v| !v.eq_ignore_ascii_case("off")),
            tmp_disk: match &l.tmp {
                Some(t) => Some(parse_mem_mb(t).map_err(|_| OptError::InvalidSpec("--tmp"))?),
                None => None,
            },
            ..JobSpec::default()
        };
        Ok(Normalised { spec, warnings })
    }
}

/// What `--exclusive[=user|mcs]` asked for (mcs is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exclusive {
    /// Whole nodes.
    Nodes,
    /// Nodes shared only with the same user's jobs.
    User,
}

/// `--hint`, `--threads-per-core` and `--ntasks-per-core`, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ThreadOptions {
    threads_per_core: Option<u32>,
    ntasks_per_core: Option<u32>,
    hint: Option<crate::model::job::Hint>,
}

/// What `--exclusive` without a value stands for (whole nodes); `--exclusive=` with
/// an empty value is not that, and is refused as Slurm refuses it.
const EXCLUSIVE_BARE: &str = "\u{0}nodes";

/// `--hint=help`: the hints sluice knows, on stdout, exit 0 (as Slurm lists them).
const HINT_HELP: &str = "Application hint options:
    --hint=             Bind tasks according to application hints
        compute_bound   use all cores of each socket, one thread per core
        memory_bound    use one thread per core (sluice does not spread over sockets)
        multithread     use every hardware thread of each core
        nomultithread   use one thread per core
        help            show this help message
";

/// Checks and resolves the thread options as Slurm's `verify_hint` (src/common/
/// proc_args.c) does: `nomultithread` is one thread per core and one task per core,
/// `compute_bound` and `memory_bound` one thread per core, `multithread` the
/// default use of every thread. `--hint` cannot go with the other two.
///
/// Errors: a count that is not a positive number, an unknown hint, or `--hint`
/// beside `--ntasks-per-core`/`--threads-per-core` ([`OptError::Conflict`], as
/// slurm_opt.c refuses them).
fn thread_options(l: &LaterOpts) -> Result<ThreadOptions, OptError> {
    use crate::model::job::Hint;
    let count = |opt: &'static str, v: &Option<String>| {
        v.as_deref().map(|v| parse_count(opt, v)).transpose()
    };
    let threads_per_core = count("--threads-per-core", &l.threads_per_core)?;
    let ntasks_per_core = count("--ntasks-per-core", &l.ntasks_per_core)?;
    let Some(h) = l.hint.as_deref() else {
        return Ok(ThreadOptions {
            threads_per_core,
            ntasks_per_core,
            hint: None,
        });
    };
    if h.trim().eq_ignore_ascii_case("help") {
        return Err(OptError::Help(HINT_HELP.into()));
    }
    let hint = Hint::parse(h).ok_or_else(|| {
        OptError::Fatal(format!(
            "unrecognized --hint argument \"{h}\", see --hint=help"
        ))
    })?;
    if threads_per_core.is_some() || ntasks_per_core.is_some() {
        return Err(OptError::Conflict(
            "Following options are mutually exclusive with --hint: --ntasks-per-core, \
             --threads-per-core, -B and --cpu-bind (other than --cpu-bind=verbose)"
                .into(),
        ));
    }
    let (threads_per_core, ntasks_per_core) = match hint {
        Hint::Nomultithread => (Some(1), Some(1)),
        Hint::ComputeBound | Hint::MemoryBound => (Some(1), None),
        Hint::Multithread => (None, None),
    };
    Ok(ThreadOptions {
        threads_per_core,
        ntasks_per_core,
        hint: Some(hint),
    })
}

/// The GPU placement options, checked.
struct GpuOptions {
    sockets_per_node: Option<u32>,
    ntasks_per_gpu: Option<u32>,
    gres_flags: crate::model::gres::GresBinding,
}

/// Checks `--gres-flags`, `--sockets-per-node`, `--ntasks-per-gpu` and `--gpu-bind`,
/// and the options Slurm refuses beside `--ntasks-per-gpu` (slurm_opt.c:
/// `--gpus-per-task`, `--gpus-per-socket` and `--ntasks-per-node` are each
/// "mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU").
///
/// Errors: Slurm's message for the first bad value or conflicting pair.
fn gpu_options(o: &JobOpts) -> Result<GpuOptions, OptError> {
    let l = &o.later;
    let gres_flags = match &l.gres_flags {
        Some(f) => crate::model::gres::parse_gres_flags(f)
            .map_err(|_| OptError::InvalidSpec("--gres-flags"))?,
        None => crate::model::gres::GresBinding::Default,
    };
    if let Some(b) = &l.gpu_bind {
        crate::model::gpu_bind::GpuBind::parse(b).map_err(|e| OptError::Fatal(e.to_string()))?;
    }
    let count = |opt: &'static str, v: &Option<String>| {
        v.as_deref().map(|v| parse_count(opt, v)).transpose()
    };
    let ntasks_per_gpu = count("--ntasks-per-gpu", &l.ntasks_per_gpu)?;
    if ntasks_per_gpu.is_some() {
        for (opt, set) in [
            ("--gpus-per-task", l.gpus_per_task.is_some()),
            ("--gpus-per-socket", l.gpus_per_socket.is_some()),
            ("--ntasks-per-node", o.ntasks_per_node.is_some()),
        ] {
            if set {
                return Err(OptError::Conflict(format!(
                    "{opt} is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
                )));
            }
        }
    }
    Ok(GpuOptions {
        sockets_per_node: count("--sockets-per-node", &l.sockets_per_node)?,
        ntasks_per_gpu,
        gres_flags,
    })
}

/// The checks Slurm makes only when the options ask for an allocation (sbatch,
/// salloc, srun outside a job): `--gpus-per-socket` needs `--sockets-per-node`
/// (srun/opt.c, sbatch/opt.c), and the GPU counts must be settled as the client's
/// gres_job_state_validate settles them (`--ntasks-per-gpu`, `--gpus-per-socket`).
///
/// Errors: [`OptError::Verify`] with Slurm's text.
pub fn verify_allocation(spec: &JobSpec) -> Result<(), OptError> {
    let invalid = crate::model::gres::INVALID_GRES;
    if let Err(crate::model::gres::GresError::Bad(why)) = spec.clone().resolve_ntasks_per_gpu() {
        return Err(OptError::Verify(
            if why == crate::model::job::NTASKS_PER_GPU_ALONE {
                format!("gres_job_state_validate: {why}\n{invalid}")
            } else {
                invalid.to_string()
            },
        ));
    }
    if spec.check_gpu_counts().is_err() {
        return Err(OptError::Verify(invalid.to_string()));
    }
    if spec.gpus_per_socket.is_some() && spec.sockets_per_node.is_none() {
        return Err(OptError::Verify(
            "--gpus-per-socket option requires --sockets-per-node specification".into(),
        ));
    }
    Ok(())
}

/// Parses `--switches=N[@WAIT]`: the most leaf switches, and the longest wait for
/// them in seconds (Slurm's time grammar: `5` is five minutes, `1:30` a minute and a
/// half, `1-0` a day).
///
/// Errors: `Invalid numeric value "…" for --switches.` for a bad count, `Invalid
/// --switches specification` for a bad wait.
pub fn parse_switches(v: &str) -> Result<(u32, Option<u32>), OptError> {
    let (n, wait) = match v.split_once('@') {
        Some((n, w)) => (n, Some(w)),
        None => (v, None),
    };
    let count = n
        .trim()
        .parse::<u32>()
        .map_err(|_| OptError::InvalidNumber {
            opt: "--switches",
            value: n.to_string(),
        })?;
    let wait = match wait {
        None => None,
        Some(w) => Some(
            crate::model::time::parse_duration_secs(w)
                .and_then(|s| u32::try_from(s).ok())
                .ok_or(OptError::InvalidSpec("--switches"))?,
        ),
    };
    Ok((count, wait))
}

/// Whether an `--array` value uses only the characters Slurm's index lists are made of
/// (digits, `-`, `,`, `:` and one `%`); ranges, steps and MaxArraySize are the
/// controller's to check ("Invalid job array specification").
pub fn valid_array_syntax(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b',' | b':' | b'%'))
        && v.matches('%').count() <= 1
}

/// `dir` made absolute against `cwd`, with `.` components removed (`..` is kept, as
/// the directory need not exist yet).
pub fn absolute(cwd: &Path, dir: &str) -> PathBuf {
    let joined = cwd.join(dir);
    joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A positive count (`-n`, `-c`, `--ntasks-per-node`).
///
/// Errors: [`OptError::InvalidNumber`] for anything but a whole number 1..=2^31-1.
pub fn parse_count(opt: &'static str, v: &str) -> Result<u32, OptError> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n >= 1 && *n <= i32::MAX as u32)
        .ok_or_else(|| OptError::InvalidNumber {
            opt,
            value: v.to_string(),
        })
}

/// `-N`: `N` or `MIN-MAX` node counts (`None` max when a single number is given).
///
/// Errors: `Invalid node count specification` for zero, non-numbers or MAX < MIN.
pub fn parse_node_count(v: &str) -> Result<(u32, Option<u32>), OptError> {
    let bad = || OptError::Fatal("Invalid node count specification".into());
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n >= 1 && *n <= i32::MAX as u32)
            .ok_or_else(bad)
    };
    match v.split_once('-') {
        None => Ok((num(v)?, None)),
        Some((lo, hi)) => {
            let (lo, hi) = (num(lo)?, num(hi)?);
            if hi < lo {
                return Err(bad());
            }
            Ok((lo, Some(hi)))
        }
    }
}

/// `--nice[=ADJ]`: an adjustment within ±2147483645 (Slurm's NICE_OFFSET − 3).
///
/// Errors: `Invalid --nice specification` otherwise.
pub fn parse_nice(v: &str) -> Result<i32, OptError> {
    const LIMIT: i64 = 2_147_483_645;
    v.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| n.abs() <= LIMIT)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or(OptError::InvalidSpec("--nice"))
}

/// Parses a signal name (`USR1`, `SIGUSR1`, any case) or number (1..=64).
pub fn parse_signal_name(s: &str) -> Option<i32> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<i32>().ok().filter(|n| (1..=64).contains(n));
    }
    let up = s.to_ascii_uppercase();
    let full = if up.starts_with("SIG") {
        up
    } else {
        format!("SIG{up}")
    };
    full.parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|sig| sig as i32)
}

/// `--signal=[{R|B}:]SIG[@SECS]`: flags `R` and/or `B` before a colon, a signal name or
/// number, and seconds before the time limit (0..=65535, default 60).
///
/// Returns `None` for anything else.
pub fn parse_signal(s: &str) -> Option<SignalSpec> {
    let (flags, rest) = match s.split_once(':') {
        Some((f, r)) => (f, r),
        None => ("", s),
    };
    let mut batch_only = false;
    let mut reservation = false;
    for c in flags.chars() {
        match c.to_ascii_uppercase() {
            'B' => batch_only = true,
            'R' => reservation = true,
            _ => return None,
        }
    }
    if s.contains(':') && flags.is_empty() {
        return None;
    }
    let (sig, secs) = match rest.split_once('@') {
        Some((sig, t)) => {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (sig, t.parse::<u32>().ok().filter(|n| *n <= 0xffff)?)
        }
        None => (rest, 60),
    };
    Some(SignalSpec {
        signal: parse_signal_name(sig)?,
        secs_before: secs,
        batch_only,
        reservation,
    })
}

/// Parses `--begin` (and `--deadline`) into epoch seconds, relative to `now` (whose
/// offset is the local time zone), with Slurm's one time parser
/// ([`crate::jobspec::timeparse::parse_time`], looking forward: a passed time of day is
/// tomorrow, a passed date without a year is next year), as src/sbatch/opt.c does.
///
/// Before parsing, blanks are dropped (`now + 2 days`). Errors:
/// [`OptError::InvalidBegin`] with the position where the text stopped making sense,
/// for an empty value (Slurm's `parse_time` answers 0 there, which sbatch refuses) and
/// for a `T` with no time of day after it.
pub fn parse_begin(s: &str, now: &DateTime<FixedOffset>) -> Result<i64, OptError> {
    let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = |pos: usize| OptError::InvalidBegin {
        value: s.to_string(),
        pos,
    };
    if text.is_empty() || dangling_t(&text) {
        return Err(bad(text.len().saturating_sub(1)));
    }
    crate::jobspec::timeparse::parse_time(&text, now.timestamp(), &now.timezone(), false)
        .map_err(|e| bad(e.pos))
}

/// Whether `text` ends in the `T` that introduces a time of day after a date
/// (`2026-01-01T`, `todayT`) with none following.
fn dangling_t(text: &str) -> bool {
    let Some(head) = text.strip_suffix(['t', 'T']) else {
        return false;
    };
    let lower = head.to_ascii_lowercase();
    lower.ends_with(|c: char| c.is_ascii_digit())
        || lower.ends_with("today")
        || lower.ends_with("tomorrow")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_colon_in_srun_or_salloc_separates_het_components() {
        let g = parse_srun_argv(["srun", "-n2", "-l", ":", "-n1", "echo", "b"]).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].job.ntasks.as_deref(), Some("2"));
        // The first component has no command: it runs the next one's.
        assert_eq!(g[0].command, ["echo", "b"]);
        assert_eq!(g[1].job.ntasks.as_deref(), Some("1"));
        // --label is propagated; --ntasks is not.
        assert!(g[1].step.label);
        let g = parse_srun_argv(["srun", "-J", "x", "-t", "5", "a", ":", "-n3", "b", "c"]).unwrap();
        assert_eq!(g[0].command, ["a"]);
        assert_eq!(g[1].command, ["b", "c"]);
        assert_eq!(g[1].job.job_name.as_deref(), Some("x"));
        assert_eq!(g[1].job.time.as_deref(), Some("5"));
        // A colon inside a word is an ordinary argument.
        let g = parse_srun_argv(["srun", "echo", "a:b"]).unwrap();
        assert_eq!(
            (g.len(), g[0].command.clone()),
            (1, vec!["echo".into(), "a:b".into()])
        );
        let g = parse_salloc_argv(["salloc", "-n2", ":", "-n1", "env"]).unwrap();
        assert_eq!(g.len(), 2);
        assert!(g[0].command.is_empty());
        assert_eq!(g[1].command, ["env"]);
        let e = parse_salloc_argv(["salloc", "-n2", "env", ":", "-n1"]).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.render("salloc").contains("must follow"), "{e:?}");
    }

    #[test]
    fn het_group_values() {
        assert_eq!(parse_het_group("1").unwrap(), [1]);
        assert_eq!(parse_het_group("0,1").unwrap(), [0, 1]);
        assert_eq!(parse_het_group("0-2").unwrap(), [0, 1, 2]);
        assert_eq!(parse_het_group("[3,1-2,1]").unwrap(), [1, 2, 3]);
        for bad in ["", "a", "1-", "2-1", "-1", "128", "0,,1"] {
            let e = parse_het_group(bad).unwrap_err();
            assert_eq!(
                e.render("srun"),
                format!("srun: error: Invalid --het-group value: {bad}\n")
            );
            assert_eq!(e.exit_code(), 1);
        }
    }
    use crate::model::TimeLimit;

    fn parse(args: &[&str]) -> Result<SbatchArgs, OptError> {
        parse_sbatch_argv(std::iter::once("sbatch").chain(args.iter().copied()))
    }

    fn ctx() -> SubmitContext {
        SubmitContext {
            cwd: PathBuf::from("/home/alice/work"),
            env: [("HOME", "/home/alice"), ("SLURM_CONF", "/etc/slurm.conf")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            host: "vm".into(),
            umask: 0o022,
            now: fixed("2026-03-10T14:30:00+01:00"),
        }
    }

    fn fixed(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).unwrap()
    }

    fn spec(args: &[&str]) -> Result<JobSpec, OptError> {
        parse(args)?.job.to_spec(&ctx()).map(|n| n.spec)
    }

    #[test]
    fn repeated_parses_answer_each_argument_vector_for_itself() {
        // More distinct vectors than the memo keeps, each parsed twice, interleaved
        // with failures: every answer is the one a fresh parse gives.
        let names: Vec<String> = (0..PARSE_MEMO * 2 + 1).map(|i| format!("j{i}")).collect();
        for round in 0..2 {
            for n in &names {
                let a = parse(&["-J", n, "--wrap", "true"]).unwrap();
                assert_eq!(a.job.job_name.as_deref(), Some(n.as_str()), "round {round}");
                assert_eq!(a.batch.wrap.as_deref(), Some("true"));
                assert!(matches!(
                    parse(&["-J", n, "--no-such-option"]),
                    Err(OptError::Usage(_))
                ));
            }
        }
        assert!(parse(&["-H"]).unwrap().job.hold);
        assert!(!parse(&[]).unwrap().job.hold);
        assert!(matches!(parse(&["--help"]), Err(OptError::Help(t)) if t.contains("--job-name")));
    }

    #[test]
    fn long_short_equals_and_space_forms() {
        for args in [
            &["-J", "x", "-t", "5", "-p", "debug"][..],
            &["--job-name=x", "--time=5", "--partition=debug"],
            &["--job-name", "x", "--time", "5", "--partition", "debug"],
            &["-Jx", "-t5", "-pdebug"],
        ] {
            let a = parse(args).unwrap();
            assert_eq!(a.job.job_name.as_deref(), Some("x"), "{args:?}");
            assert_eq!(a.job.time.as_deref(), Some("5"));
            assert_eq!(a.job.partition.as_deref(), Some("debug"));
        }
    }

    #[test]
    fn unambiguous_prefixes_are_accepted() {
        let a = parse(&["--part=debug", "--job=n", "--cpus-per-t=2", "--pars"]).unwrap();
        assert_eq!(a.job.partition.as_deref(), Some("debug"));
        assert_eq!(a.job.job_name.as_deref(), Some("n"));
        assert_eq!(a.job.cpus_per_task.as_deref(), Some("2"));
        assert!(a.batch.parsable);
        // `--no` could be --nodes, --nodelist, --no-requeue, --no-kill.
        assert!(parse(&["--no=1"]).is_err());
    }

    #[test]
    fn tasks_per_node_alias() {
        let a = parse(&["--tasks-per-node=2"]).unwrap();
        assert_eq!(a.job.ntasks_per_node.as_deref(), Some("2"));
    }

    #[test]
    fn script_and_its_arguments_stop_option_parsing() {
        let a = parse(&["-t", "2", "job.sh", "first", "--time=9", "-J"]).unwrap();
        assert_eq!(a.script, ["job.sh", "first", "--time=9", "-J"]);
        assert_eq!(a.job.time.as_deref(), Some("2"));
        assert!(parse(&[]).unwrap().script.is_empty());
    }

    #[test]
    fn unknown_options_read_like_getopt() {
        let e = parse(&["--bogus-option", "--wrap", "true"]).unwrap_err();
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            e.render("sbatch"),
            "sbatch: unrecognized option '--bogus-option'\nTry \"sbatch --help\" for more information\n"
        );
        let e = parse(&["-y"]).unwrap_err();
        assert_eq!(
            e.render("sbatch").lines().next(),
            Some("sbatch: invalid option -- 'y'")
        );
        let e = parse(&["--job-name"]).unwrap_err();
        assert_eq!(
            e.render("sbatch").lines().next(),
            Some("sbatch: option '--job-name' requires an argument")
        );
    }

    #[test]
    fn help_is_not_an_error() {
        let e = parse(&["--help"]).unwrap_err();
        assert_eq!(e.exit_code(), 0);
        assert!(e.render("sbatch").contains("--job-name"));
    }

    #[test]
    fn repeated_options_last_wins_and_verbose_counts() {
        let a = parse(&["-J", "a", "-J", "b", "-vvv", "-v"]).unwrap();
        assert_eq!(a.job.job_name.as_deref(), Some("b"));
        assert_eq!(a.job.verbose, 4);
        let a = parse(&["--mem=1G", "--mem-per-cpu=100"]).unwrap();
        assert_eq!(
            (a.job.mem, a.job.mem_per_cpu.as_deref()),
            (None, Some("100"))
        );
        let a = parse(&["--no-requeue", "--requeue"]).unwrap();
        assert!(a.job.requeue && !a.job.no_requeue);
    }

    #[test]
    fn full_spec_from_options() {
        let s = spec(&[
            "-J",
            "n",
            "-o",
            "o-%j",
            "-e",
            "e-%j",
            "-i",
            "in.txt",
            "-D",
            "sub/./dir",
            "-p",
            "debug,batch",
            "-t",
            "1:30",
            "-n",
            "4",
            "-N",
            "1-2",
            "-c",
            "2",
            "--ntasks-per-node=2",
            "--mem=1G",
            "--export=NONE",
            "-H",
            "--nice=5",
            "--requeue",
            "--signal=B:USR1@30",
            "--open-mode=append",
            "-A",
            "acct",
            "-q",
            "high",
            "--comment=hi there",
            "-w",
            "node[1-2]",
            "-x",
            "node3",
            "--exclusive",
        ])
        .unwrap();
        assert_eq!(s.name, "n");
        assert_eq!(s.stdout.as_deref(), Some("o-%j"));
        assert_eq!(s.stderr.as_deref(), Some("e-%j"));
        assert_eq!(s.stdin.as_deref(), Some("in.txt"));
        assert_eq!(s.work_dir, "/home/alice/work/sub/dir");
        assert_eq!(s.submit_dir, "/home/alice/work");
        assert_eq!(s.submit_host, "vm");
        assert_eq!(s.partition.as_deref(), Some("debug,batch"));
        assert_eq!(s.time_limit, Some(TimeLimit::Minutes(2)));
        assert_eq!(
            (s.ntasks, s.nodes_min, s.nodes_max),
            (Some(4), Some(1), Some(2))
        );
        assert_eq!((s.cpus_per_task, s.ntasks_per_node), (Some(2), Some(2)));
        assert_eq!(s.mem, Some(MemReq::PerNode(1024)));
        assert_eq!(s.export.as_deref(), Some("NONE"));
        assert_eq!(s.environment.keys().collect::<Vec<_>>(), ["SLURM_CONF"]);
        assert!(s.hold && s.exclusive && s.open_append);
        assert_eq!((s.nice, s.requeue), (5, Some(true)));
        assert_eq!(
            s.signal,
            Some(SignalSpec {
                signal: 10,
                secs_before: 30,
                batch_only: true,
                reservation: false
            })
        );
        assert_eq!(s.account.as_deref(), Some("acct"));
        assert_eq!(s.qos.as_deref(), Some("high"));
        assert_eq!(s.comment.as_deref(), Some("hi there"));
        assert_eq!(s.nodelist.as_deref(), Some("node[1-2]"));
        assert_eq!(s.exclude.as_deref(), Some("node3"));
        assert_eq!(s.umask, 0o022);
    }

    #[test]
    fn defaults() {
        let s = spec(&[]).unwrap();
        assert_eq!(s.work_dir, "/home/alice/work");
        assert_eq!(s.environment, ctx().env);
        assert_eq!(s.export, None);
        assert_eq!(
            (s.time_limit, s.mem, s.requeue, s.begin),
            (None, None, None, None)
        );
        assert!(!s.hold && !s.exclusive && !s.open_append);
        assert_eq!(s.nice, 0);
        let s = spec(&["-D", "/abs", "--mem-per-cpu=300", "--no-requeue", "--nice"]).unwrap();
        assert_eq!(s.work_dir, "/abs");
        assert_eq!(s.mem, Some(MemReq::PerCpu(300)));
        assert_eq!((s.requeue, s.nice), (Some(false), 100));
        assert_eq!(spec(&["--nice=-7"]).unwrap().nice, -7);
    }

    #[test]
    fn invalid_values_use_slurm_messages_and_exit_255() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--time=abc"],
                "sbatch: error: Invalid --time specification\n",
            ),
            (
                &["--time=1:2:3:4"],
                "sbatch: error: Invalid --time specification\n",
            ),
            (
                &["--mem=12XB"],
                "sbatch: error: Invalid --mem specification\n",
            ),
            (
                &["--mem-per-cpu=x"],
                "sbatch: error: Invalid --mem-per-cpu specification\n",
            ),
            (
                &["--signal=NOTASIGNAL@10"],
                "sbatch: error: Invalid --signal specification\n",
            ),
            (
                &["--signal=USR1@notanumber"],
                "sbatch: error: Invalid --signal specification\n",
            ),
            (
                &["--open-mode=sideways"],
                "sbatch: error: Invalid --open-mode specification\n",
            ),
            (
                &["--nice=99999999999"],
                "sbatch: error: Invalid --nice specification\n",
            ),
            (
                &["-n", "0"],
                "sbatch: error: Invalid numeric value \"0\" for --ntasks.\n",
            ),
            (
                &["-c", "x"],
                "sbatch: error: Invalid numeric value \"x\" for --cpus-per-task.\n",
            ),
            (
                &["-N", "3-1"],
                "sbatch: error: Invalid node count specification\n",
            ),
            (
                &["--begin=garbage"],
                "Invalid time specification (pos=0): garbage\nsbatch: error: Invalid --begin specification\n",
            ),
        ];
        for (args, want) in cases {
            let e = spec(args).unwrap_err();
            assert_eq!(e.render("sbatch"), *want, "{args:?}");
            assert_eq!(e.exit_code(), 255, "{args:?}");
        }
    }

    #[test]
    fn thread_options_resolve_as_slurms_verify_hint() {
        use crate::model::job::Hint;
        for (args, tpc, npc, hint) in [
            (
                &["--hint=nomultithread"][..],
                Some(1),
                Some(1),
                Some(Hint::Nomultithread),
            ),
            (
                &["--hint=compute_bound"],
                Some(1),
                None,
                Some(Hint::ComputeBound),
            ),
            (
                &["--hint=memory_bound"],
                Some(1),
                None,
                Some(Hint::MemoryBound),
            ),
            (&["--hint=multithread"], None, None, Some(Hint::Multithread)),
            (&["--threads-per-core=2"], Some(2), None, None),
            (
                &["--ntasks-per-core=1", "--threads-per-core=1"],
                Some(1),
                Some(1),
                None,
            ),
            (&[], None, None, None),
        ] {
            let s = spec(args).unwrap();
            assert_eq!(
                (s.threads_per_core, s.ntasks_per_core, s.hint),
                (tpc, npc, hint),
                "{args:?}"
            );
        }
        let e = spec(&["--hint=fast"]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: unrecognized --hint argument \"fast\", see --hint=help\n"
        );
        let e = spec(&["--hint=nomultithread", "--threads-per-core=1"]).unwrap_err();
        assert!(
            matches!(&e, OptError::Conflict(m) if m.contains("mutually exclusive with --hint"))
        );
        assert_eq!(e.exit_code(), 1);
        assert!(spec(&["--threads-per-core=0"]).is_err());
        assert!(spec(&["--ntasks-per-core=x"]).is_err());
    }

    #[test]
    fn tmp_takes_memory_units_in_mib() {
        assert_eq!(spec(&["--tmp=100"]).unwrap().tmp_disk, Some(100));
        assert_eq!(spec(&["--tmp=2G"]).unwrap().tmp_disk, Some(2048));
        let e = spec(&["--tmp=lots"]).unwrap_err();
        assert_eq!(e, OptError::InvalidSpec("--tmp"));
        assert_eq!(e.exit_code(), 255);
    }

    #[test]
    fn no_kill_is_recorded_and_off_restores_the_default() {
        for (args, want) in [
            (&["-k"][..], true),
            (&["--no-kill"], true),
            (&["--no-kill=yes"], true),
            (&["--no-kill=off"], false),
            (&["--no-kill=OFF"], false),
            (&[], false),
        ] {
            assert_eq!(spec(args).unwrap().no_kill, want, "{args:?}");
        }
    }

    #[test]
    fn time_min_is_minutes_within_the_limit() {
        assert_eq!(spec(&["--time-min=5"]).unwrap().time_min, Some(5));
        assert_eq!(
            spec(&["--time-min=1:00:00", "-t", "2:00:00"])
                .unwrap()
                .time_min,
            Some(60)
        );
        let e = spec(&["--time-min=30", "-t", "10"]).unwrap_err();
        assert!(
            e.render("sbatch")
                .contains("Invalid time-min specification"),
            "{e:?}"
        );
        assert_eq!(
            spec(&["--time-min=soon"]).unwrap_err(),
            OptError::InvalidSpec("--time-min")
        );
        assert_eq!(
            spec(&["--time-min=0"]).unwrap_err(),
            OptError::InvalidSpec("--time-min")
        );
    }

    #[test]
    fn priority_is_a_number() {
        assert_eq!(spec(&["--priority=4242"]).unwrap().priority, Some(4242));
        assert_eq!(spec(&["--priority=0"]).unwrap().priority, Some(0));
        assert_eq!(spec(&[]).unwrap().priority, None);
        let e = spec(&["--priority=high"]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: Invalid priority: high\n"
        );
        assert_eq!(e.exit_code(), 255);
        assert!(spec(&["--priority=-1"]).is_err());
    }

    #[test]
    fn exclusive_modes() {
        let s = spec(&["--exclusive"]).unwrap();
        assert_eq!((s.exclusive, s.exclusive_user), (true, false));
        let s = spec(&["--exclusive=user"]).unwrap();
        assert_eq!((s.exclusive, s.exclusive_user), (false, true));
        let e = spec(&["--exclusive=mcs"]).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.render("sbatch").contains("MCS plugin"), "{e:?}");
        let e = spec(&["--exclusive=team"]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: invalid exclusive option team\n"
        );
        // An empty value is not the bare option.
        let e = spec(&["--exclusive="]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: invalid exclusive option \n"
        );
    }

    #[test]
    fn hint_help_lists_the_hints_and_exits_zero() {
        let e = spec(&["--hint=help"]).unwrap_err();
        assert_eq!(e.exit_code(), 0);
        let t = e.render("sbatch");
        assert!(t.starts_with("Application hint options:"), "{t}");
        for h in ["compute_bound", "memory_bound", "nomultithread"] {
            assert!(t.contains(h), "{t}");
        }
    }

    #[test]
    fn mincpus_is_a_positive_count() {
        assert_eq!(spec(&["--mincpus=4"]).unwrap().mincpus, Some(4));
        assert_eq!(spec(&[]).unwrap().mincpus, None);
        let e = spec(&["--mincpus=0"]).unwrap_err();
        assert_eq!(e.exit_code(), 255);
        assert!(spec(&["--mincpus=x"]).is_err());
    }

    #[test]
    fn later_options_are_refused_not_ignored() {
        for (args, name) in [
            (&["--priority=top"][..], "--priority=TOP"),
            (&["--container=/b"], "--container"),
        ] {
            let e = spec(args).unwrap_err();
            assert_eq!(e, OptError::Unsupported(name.into()), "{args:?}");
            assert_eq!(e.exit_code(), 1);
            assert_eq!(
                e.render("sbatch"),
                format!("sbatch: error: {name} is not supported yet by sluice\n")
            );
        }
    }

    #[test]
    fn gpu_placement_options_reach_the_spec() {
        use crate::model::gres::GresBinding;
        let s = spec(&[
            "--gres-flags=Enforce-Binding",
            "--gpus-per-socket=a100:2",
            "--sockets-per-node=2",
            "--gpu-bind=closest",
        ])
        .unwrap();
        assert_eq!(s.gres_flags, GresBinding::Enforce);
        let g = s.gpus_per_socket.unwrap();
        assert_eq!((g.kind.as_deref(), g.count), (Some("a100"), 2));
        assert_eq!(s.sockets_per_node, Some(2));
        assert_eq!(s.gpu_bind.as_deref(), Some("closest"));
        let s = spec(&["--gres-flags=disable-binding", "-n8", "--ntasks-per-gpu=2"]).unwrap();
        assert_eq!(s.gres_flags, GresBinding::Disable);
        assert_eq!((s.ntasks, s.ntasks_per_gpu), (Some(8), Some(2)));
    }

    #[test]
    fn gpu_placement_options_are_refused_as_slurm_refuses_them() {
        let cases: &[(&[&str], &str, u8)] = &[
            (
                &["--gres-flags=bind-tightly"],
                "sbatch: error: Invalid --gres-flags specification\n",
                255,
            ),
            (
                &["--gpus-per-socket=1"],
                "sbatch: error: --gpus-per-socket option requires --sockets-per-node specification\n",
                1,
            ),
            (
                &["--gpus-per-socket=x:", "--sockets-per-node=1"],
                "sbatch: error: Invalid --gpus-per-socket specification\n",
                255,
            ),
            (
                &["--sockets-per-node=0"],
                "sbatch: error: Invalid numeric value \"0\" for --sockets-per-node.\n",
                255,
            ),
            // A negative number is the option's value, as getopt takes it, not an option.
            (
                &["-n", "-3"],
                "sbatch: error: Invalid numeric value \"-3\" for --ntasks.\n",
                255,
            ),
            (
                &["--ntasks-per-gpu=1", "--gpus-per-task=1"],
                "sbatch: fatal: --gpus-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n",
                1,
            ),
            (
                &[
                    "--ntasks-per-gpu=1",
                    "--gpus-per-socket=1",
                    "--sockets-per-node=1",
                ],
                "sbatch: fatal: --gpus-per-socket is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n",
                1,
            ),
            (
                &["--ntasks-per-gpu=2", "--ntasks-per-node=2"],
                "sbatch: fatal: --ntasks-per-node is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n",
                1,
            ),
            (
                &["--gpu-bind=nearest"],
                "sbatch: error: Invalid --gpu-bind argument: nearest\n",
                255,
            ),
        ];
        for (args, want, code) in cases {
            let e = spec(args).unwrap_err();
            assert_eq!(e.render("sbatch"), *want, "{args:?}");
            assert_eq!(e.exit_code(), *code, "{args:?}");
        }
    }

    #[test]
    fn switches_take_a_count_and_an_optional_wait() {
        let s = spec(&["--switches=2"]).unwrap();
        assert_eq!((s.switches, s.switch_wait), (Some(2), None));
        let s = spec(&["--switches=1@0:05"]).unwrap();
        assert_eq!((s.switches, s.switch_wait), (Some(1), Some(5)));
        let s = spec(&["--switches=3@2"]).unwrap();
        assert_eq!((s.switches, s.switch_wait), (Some(3), Some(120)));
        let e = spec(&["--switches=x"]).unwrap_err();
        assert_eq!(
            e.render("sbatch"),
            "sbatch: error: Invalid numeric value \"x\" for --switches.\n"
        );
        let e = spec(&["--switches=1@soon"]).unwrap_err();
        assert_eq!(e, OptError::InvalidSpec("--switches"));
    }

    #[test]
    fn resource_options_reach_the_spec() {
        let s = spec(&[
            "--gres=gpu:h100:2,mps:10",
            "-G",
            "a100:3",
            "--gpus-per-node=2",
            "--gpus-per-task=1",
            "--cpus-per-gpu=4",
            "--mem-per-gpu=2G",
            "-C",
            "[rack1|rack2]&nvlink",
            "--contiguous",
            "-m",
            "cyclic:block",
            "-O",
            "-s",
            "-L",
            "matlab:2,fluent",
        ])
        .unwrap();
        assert_eq!(s.gres.len(), 2);
        assert_eq!(s.gres[0].to_string(), "gpu:h100:2");
        assert_eq!(s.gpus.as_ref().unwrap().to_string(), "gpu:a100:3");
        assert_eq!(s.gpus_per_node.as_ref().unwrap().count, 2);
        assert_eq!(s.gpus_per_task.as_ref().unwrap().count, 1);
        assert_eq!((s.cpus_per_gpu, s.mem_per_gpu), (Some(4), Some(2048)));
        assert_eq!(s.constraint.as_deref(), Some("[rack1|rack2]&nvlink"));
        assert!(s.contiguous && s.overcommit && s.oversubscribe);
        assert_eq!(s.distribution.as_deref(), Some("cyclic:block"));
        assert_eq!(s.licenses.len(), 2);
        assert_eq!(s.tres_per_node(), "gres:gpu:h100:2,gres:mps:10,gres:gpu:2");
        for (args, want) in [
            (
                &["--gres=gpu:0"][..],
                "sbatch: error: Invalid generic resource (gres) specification: gpu:0\n",
            ),
            (
                &["-G", "x:y:z"],
                "sbatch: error: Invalid --gpus specification\n",
            ),
            (
                &["--gpus=-1"],
                "sbatch: error: Invalid --gpus specification\n",
            ),
            (
                &["--gpus=abc"],
                "sbatch: error: Invalid --gpus specification\n",
            ),
            (
                &["--mail-type=BOGUS"],
                "sbatch: error: --mail-type=BOGUS invalid\n",
            ),
            (
                &["--gres=gpu:-1"],
                "sbatch: error: Invalid generic resource (gres) specification: gpu:-1\n",
            ),
            (
                &["-C", "a&"],
                "sbatch: error: Invalid feature specification\n",
            ),
            (
                &["-L", "m:0"],
                "sbatch: error: Invalid license specification\n",
            ),
            (
                &["-m", "sideways"],
                "sbatch: error: Invalid --distribution specification\n",
            ),
            (
                &["--mem-per-gpu=lots"],
                "sbatch: error: Invalid --mem-per-gpu specification\n",
            ),
        ] {
            assert_eq!(spec(args).unwrap_err().render("sbatch"), want, "{args:?}");
        }
    }

    #[test]
    fn arrays_dependencies_deadline_immediate() {
        let n = spec(&[
            "-a",
            "0-9%2",
            "-d",
            "afterok:5",
            "--kill-on-invalid-dep=yes",
        ])
        .unwrap();
        assert_eq!(n.array.as_deref(), Some("0-9%2"));
        assert_eq!(n.dependency.as_deref(), Some("afterok:5"));
        assert_eq!(n.kill_on_invalid_dep, Some(true));
        assert!(!n.immediate);
        let n = spec(&["--kill-on-invalid-dep=no", "-I", "--deadline=now+1hour"]).unwrap();
        assert_eq!(n.kill_on_invalid_dep, Some(false));
        assert!(n.immediate);
        assert_eq!(n.deadline, Some(ctx().now.timestamp() + 3600));
        assert!(spec(&["--immediate=5"]).unwrap().immediate);
        assert!(
            spec(&["--deadline=2020-01-01T00:00"])
                .unwrap()
                .deadline
                .is_some()
        );
        for bad in ["--array=abc", "--array=1%2%3"] {
            let e = spec(&[bad]).unwrap_err();
            assert_eq!(
                e.render("sbatch"),
                "sbatch: error: Invalid --array specification\n"
            );
            assert_eq!(e.exit_code(), 1);
        }
        for (args, opt) in [
            (&["--deadline=garbage"][..], "--deadline"),
            (&["--kill-on-invalid-dep=maybe"], "--kill-on-invalid-dep"),
        ] {
            assert_eq!(
                spec(args).unwrap_err(),
                OptError::InvalidSpec(opt),
                "{args:?}"
            );
        }
        // Ranges and sizes are the controller's to judge.
        assert!(spec(&["--array=5-2"]).is_ok());
    }

    #[test]
    fn harmless_options_warn() {
        let n = parse(&[
            "--mail-user=a@b",
            "--mail-type=END",
            "--get-user-env",
            "--mpi=pmix",
        ])
        .unwrap()
        .job
        .to_spec(&ctx())
        .unwrap();
        assert_eq!(
            n.warnings,
            [
                "--mail-user is ignored by sluice",
                "--mail-type is ignored by sluice",
                "--get-user-env is ignored by sluice",
                "--mpi is ignored by sluice"
            ]
        );
    }

    #[test]
    fn signals() {
        let s = |x| parse_signal(x).map(|s| (s.signal, s.secs_before, s.batch_only, s.reservation));
        assert_eq!(s("USR1"), Some((10, 60, false, false)));
        assert_eq!(s("SIGUSR2@90"), Some((12, 90, false, false)));
        assert_eq!(s("B:USR2@30"), Some((12, 30, true, false)));
        assert_eq!(s("RB:term@0"), Some((15, 0, true, true)));
        assert_eq!(s("10"), Some((10, 60, false, false)));
        assert_eq!(s("kill@5"), Some((9, 5, false, false)));
        for bad in [
            "",
            "NOTASIGNAL@10",
            "USR1@",
            "USR1@x",
            "X:USR1",
            ":USR1",
            "0",
            "65",
            "USR1@70000",
        ] {
            assert_eq!(s(bad), None, "{bad}");
        }
    }

    #[test]
    fn begin_relative_and_named_times() {
        let now = fixed("2026-03-10T14:30:00+01:00");
        let t = |s| parse_begin(s, &now).unwrap();
        let at = |s| fixed(s).timestamp();
        assert_eq!(t("now"), now.timestamp());
        assert_eq!(t("now+60"), now.timestamp() + 60);
        assert_eq!(t("now+1hour"), now.timestamp() + 3600);
        assert_eq!(t("now + 2 days"), now.timestamp() + 2 * 86400);
        assert_eq!(t("now+3min"), now.timestamp() + 180);
        assert_eq!(t("now+1w"), now.timestamp() + 7 * 86400);
        assert_eq!(t("now-1hour"), now.timestamp() - 3600);
        assert_eq!(t("16:00"), at("2026-03-10T16:00:00+01:00"));
        assert_eq!(t("14:30"), at("2026-03-11T14:30:00+01:00"));
        assert_eq!(t("09:15:30"), at("2026-03-11T09:15:30+01:00"));
        assert_eq!(t("4:00PM"), at("2026-03-10T16:00:00+01:00"));
        assert_eq!(t("noon"), at("2026-03-11T12:00:00+01:00"));
        assert_eq!(t("teatime"), at("2026-03-10T16:00:00+01:00"));
        assert_eq!(t("midnight"), at("2026-03-11T00:00:00+01:00"));
        assert_eq!(t("today"), at("2026-03-10T00:00:00+01:00"));
        assert_eq!(t("tomorrow"), at("2026-03-11T00:00:00+01:00"));
        assert_eq!(t("tomorrowT10:00"), at("2026-03-11T10:00:00+01:00"));
        assert_eq!(t("2026-12-24"), at("2026-12-24T00:00:00+01:00"));
        assert_eq!(t("2026-12-24T18:05"), at("2026-12-24T18:05:00+01:00"));
        assert_eq!(t("2026-12-24T18:05:09"), at("2026-12-24T18:05:09+01:00"));
        assert_eq!(t("12/24"), at("2026-12-24T00:00:00+01:00"));
        assert_eq!(t("12/24/27"), at("2027-12-24T00:00:00+01:00"));
    }

    #[test]
    fn begin_rejects_garbage() {
        let now = fixed("2026-03-10T14:30:00+01:00");
        for bad in [
            "garbage",
            "",
            "now+",
            "now+5parsecs",
            "25:00",
            "2026-13-01",
            "2026-02-30",
            "2026-01-01T",
            "13:00PM",
            "1:2:3:4",
        ] {
            assert!(
                matches!(parse_begin(bad, &now), Err(OptError::InvalidBegin { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn absolute_paths() {
        let cwd = Path::new("/a/b");
        assert_eq!(absolute(cwd, "c"), PathBuf::from("/a/b/c"));
        assert_eq!(absolute(cwd, "./c/."), PathBuf::from("/a/b/c"));
        assert_eq!(absolute(cwd, "/x"), PathBuf::from("/x"));
        assert_eq!(absolute(cwd, "../x"), PathBuf::from("/a/b/../x"));
    }
}
