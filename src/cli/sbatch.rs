//! `sbatch`: submit a batch script (cf. src/sbatch/sbatch.c and src/sbatch/opt.c).
//!
//! Everything up to the request is pure and tested here: the command line is parsed
//! once to learn where the script comes from (path, stdin, `/dev/stdin`, `--wrap`);
//! the script is read (the only I/O before connecting) and checked as Slurm checks it;
//! its `#SBATCH` directives, the `SBATCH_*` variables and the command line are merged
//! (`jobspec::directives`) and normalised into a `JobSpec` (`jobspec::opts`).
//! [`run`] then submits, prints Slurm's exact lines, and with `--wait` polls the job.
//!
//! Output contract (COMPAT.md §2.1): stdout is exactly `Submitted batch job N\n`
//! (` on cluster C` with `-M`), or `N\n` / `N;C\n` with `--parsable`, or nothing with
//! `-Q`; everything else goes to stderr. Exit codes: 0 submitted, 1 refused (script
//! problems, controller errors, options sluice does not support yet), 255 command-line
//! errors.

use crate::cli::client::{self, CallError, Client, ClientError, answer};
use crate::config::Config;
use crate::jobspec::directives::{self, Merged};
use crate::jobspec::opts::{self, OptError, SbatchArgs, SubmitContext};
use crate::model::{ExitStatus, JobSpec};
use crate::proto::{JobFilter, Request, Response, SlurmError, TestOnly};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PROG: &str = "sbatch";

/// How often `--wait` asks the controller about the job.
const WAIT_POLL: Duration = Duration::from_millis(150);
/// How long `--wait` keeps retrying when the controller cannot be reached.
const WAIT_RECONNECT_FOR: Duration = Duration::from_secs(120);

/// A finished sbatch run that did not submit: what to print and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

impl Failure {
    /// `sbatch: error: <msg>` with exit 1.
    fn error(msg: impl std::fmt::Display) -> Failure {
        Failure {
            stdout: String::new(),
            stderr: format!("{PROG}: error: {msg}\n"),
            code: 1,
        }
    }
}

impl From<OptError> for Failure {
    fn from(e: OptError) -> Failure {
        let text = e.render(PROG);
        match e {
            OptError::Help(_) => Failure {
                stdout: text,
                stderr: String::new(),
                code: 0,
            },
            _ => Failure {
                stdout: String::new(),
                stderr: text,
                code: e.exit_code(),
            },
        }
    }
}

/// Where the batch script comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptSource {
    /// A file path as given on the command line.
    File(String),
    /// Standard input: no path given (`literal == false`) or the path `/dev/stdin`.
    Stdin { literal: bool },
    /// `--wrap=<command>`.
    Wrap(String),
}

impl ScriptSource {
    /// Slurm's default job name: the script's base name, `sbatch` for a script read
    /// from stdin without a path, `stdin` for `/dev/stdin` (its base name), `wrap`.
    pub fn default_name(&self) -> String {
        match self {
            ScriptSource::File(p) => Path::new(p)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.clone()),
            ScriptSource::Stdin { literal: false } => "sbatch".into(),
            ScriptSource::Stdin { literal: true } => "stdin".into(),
            ScriptSource::Wrap(_) => "wrap".into(),
        }
    }
}

/// Decides where the script comes from, from the command-line options alone.
///
/// Errors: script arguments together with `--wrap` (exit 1, as Slurm).
pub fn script_source(args: &SbatchArgs) -> Result<ScriptSource, Failure> {
    match (&args.batch.wrap, args.script.first()) {
        (Some(_), Some(_)) => Err(Failure::error(
            "Script arguments not permitted with --wrap option",
        )),
        (Some(cmd), None) => Ok(ScriptSource::Wrap(cmd.clone())),
        (None, None) => Ok(ScriptSource::Stdin { literal: false }),
        (None, Some(p)) if p == "/dev/stdin" => Ok(ScriptSource::Stdin { literal: true }),
        (None, Some(p)) => Ok(ScriptSource::File(p.clone())),
    }
}

/// The script `--wrap` generates (byte-identical to Slurm's).
pub fn wrap_script(cmd: &str) -> String {
    format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{cmd}\n")
}

/// Checks a script's bytes as Slurm does and returns its text.
///
/// Errors (exit 1): empty (`Batch script is empty!`), no `#!` first line (Slurm's
/// three-line message), DOS line breaks, NUL bytes, and (sluice only) text that is not
/// UTF-8.
pub fn check_script(bytes: Vec<u8>) -> Result<String, Failure> {
    if bytes.is_empty() {
        return Err(Failure::error("Batch script is empty!"));
    }
    if !bytes.starts_with(b"#!") {
        return Err(Failure {
            stdout: String::new(),
            stderr: format!(
                "{PROG}: error: This does not look like a batch script.  The first\n\
                 {PROG}: error: line must start with #! followed by the path to an interpreter.\n\
                 {PROG}: error: For instance: #!/bin/sh\n"
            ),
            code: 1,
        });
    }
    if bytes.windows(2).any(|w| w == b"\r\n") {
        return Err(Failure {
            stdout: String::new(),
            stderr: format!(
                "{PROG}: error: Batch script contains DOS line breaks (\\r\\n)\n\
                 {PROG}: error: instead of expected UNIX line breaks (\\n).\n"
            ),
            code: 1,
        });
    }
    if bytes.contains(&0) {
        return Err(Failure::error("The batch script contains a NULL character"));
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::error("Batch script is not UTF-8 text (sluice requires it)"))
}

/// Everything sbatch has decided before talking to the controller.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub spec: JobSpec,
    pub parsable: bool,
    pub quiet: bool,
    pub wait: bool,
    pub test_only: bool,
    pub verbose: u8,
    /// `-M` as given.
    pub clusters: Option<String>,
    /// Warnings for stderr (without the `sbatch: warning: ` prefix).
    pub warnings: Vec<String>,
    /// The merged argument vector (directives, SBATCH_* and command line), for `-v`.
    pub argv: Vec<String>,
    /// The other components of a heterogeneous job (`:` groups, `#SBATCH hetjob`).
    pub het: Vec<JobSpec>,
}

/// The option groups of a command line: split at `:` words (heterogeneous job
/// components) up to the script path, after which every word is the script's.
///
/// Errors: an option error in a group, as [`OptError`] renders it.
pub fn cli_groups(cli: &[String]) -> Result<Vec<Vec<String>>, Failure> {
    let raw = directives::split_het_groups(cli);
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut iter = raw.into_iter();
    while let Some(g) = iter.next() {
        let parsed = opts::parse_sbatch_argv(std::iter::once(PROG.to_string()).chain(g.clone()))?;
        let has_script = !parsed.script.is_empty();
        out.push(g);
        if has_script {
            // `job.sh a : b` passes `:` and `b` to the script.
            let last = out.last_mut().expect("pushed");
            for rest in iter.by_ref() {
                last.push(":".into());
                last.extend(rest);
            }
        }
    }
    Ok(out)
}

/// Merges the options of `cli` (command line without argv[0]) with the script's
/// directives and the `SBATCH_*` variables of `ctx.env`, and builds the job request.
/// `script` is the checked script text (the generated one for `--wrap`).
///
/// Errors: option errors as [`OptError`] renders them (255, or 1 for unsupported).
pub fn prepare(
    cli: &[String],
    source: &ScriptSource,
    script: String,
    ctx: &SubmitContext,
) -> Result<Prepared, Failure> {
    let found = match source {
        ScriptSource::Wrap(_) => vec![Vec::new()],
        _ => directives::extract_groups(&script)?,
    };
    let groups = cli_groups(cli)?;
    let n = groups.len().max(found.len());
    let mut specs = Vec::new();
    let mut merged = Vec::new();
    for k in 0..n {
        let dirs = found.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let words = groups.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let Merged { args, argv } = directives::merge(dirs, &ctx.env, words)?;
        let norm = args.job.to_spec(ctx)?;
        super::container::resolve(&args.job.containers, &Default::default())
            .map_err(Failure::error)?;
        let mut spec = norm.spec;
        spec.name = args
            .job
            .job_name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| source.default_name());
        spec.command = match source {
            ScriptSource::File(p) => opts::absolute(&ctx.cwd, p).to_string_lossy().into_owned(),
            _ => String::new(),
        };
        specs.push((spec, norm.warnings));
        merged.push((args, argv));
    }
    // Batch options may sit in any group; the script's arguments follow its path.
    let any = |f: &dyn Fn(&SbatchArgs) -> bool| merged.iter().any(|(a, _)| f(a));
    let script_args: Vec<String> = merged
        .iter()
        .find(|(a, _)| !a.script.is_empty())
        .map(|(a, _)| a.script.iter().skip(1).cloned().collect())
        .unwrap_or_default();
    let (parsable, wait, test_only) = (
        any(&|a| a.batch.parsable),
        any(&|a| a.batch.wait),
        any(&|a| a.batch.test_only),
    );
    let quiet = any(&|a| a.job.quiet);
    let verbose = merged.iter().map(|(a, _)| a.job.verbose).max().unwrap_or(0);
    let clusters = merged.iter().find_map(|(a, _)| a.job.clusters.clone());
    let argv = merged.swap_remove(0).1;
    let mut specs = specs.into_iter();
    let (mut spec, warnings) = specs.next().expect("one component at least");
    spec.argv = script_args;
    spec.script = script;
    Ok(Prepared {
        spec,
        parsable,
        quiet,
        wait,
        test_only,
        verbose,
        clusters,
        warnings,
        argv,
        het: specs.map(|(s, _)| s).collect(),
    })
}

/// `-v` lines: the options that were set, one per line, as Slurm's "defined options"
/// block (values as given).
pub fn verbose_lines(argv: &[String]) -> Vec<String> {
    use clap::CommandFactory;
    use clap::parser::ValueSource;
    let cmd = crate::jobspec::opts::getopt_values(SbatchArgs::command());
    let Ok(m) = cmd.clone().try_get_matches_from(argv) else {
        return Vec::new();
    };
    let mut out = vec![
        "defined options".to_string(),
        "-------------------- --------------------".to_string(),
    ];
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "script" || m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let name = arg.get_long().unwrap_or(id);
        let value = match m.try_get_raw(id) {
            Ok(Some(vals)) => vals
                .map(|v| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(","),
            _ => "set".to_string(),
        };
        out.push(format!("{name:<20}: {value}"));
    }
    out.push("-------------------- --------------------".to_string());
    out.push("end of defined options".to_string());
    out
}

/// The stdout line for a submitted job (empty with `-Q`).
pub fn submitted_text(job_id: u32, parsable: bool, quiet: bool, cluster: Option<&str>) -> String {
    match (quiet, parsable, cluster) {
        (true, _, _) => String::new(),
        (false, true, None) => format!("{job_id}\n"),
        (false, true, Some(c)) => format!("{job_id};{c}\n"),
        (false, false, None) => format!("Submitted batch job {job_id}\n"),
        (false, false, Some(c)) => format!("Submitted batch job {job_id} on cluster {c}\n"),
    }
}

/// The stderr line for `--test-only`.
pub fn test_only_text(t: &TestOnly) -> String {
    format!(
        "{PROG}: Job {} to start at {} using {} processors on nodes {} in partition {}\n",
        t.job_id,
        crate::cli::timefmt::fmt_ts(t.start),
        t.cpus,
        t.nodes,
        t.partition
    )
}

/// The stderr text for a refused submission.
pub fn submit_failure_text(e: &SlurmError, spec: &JobSpec) -> String {
    // Slurm's sbatch finds a bad GRES itself, before it submits.
    if *e == SlurmError::InvalidGres {
        return format!("{PROG}: error: {e}\n");
    }
    let mut s = String::new();
    if let (SlurmError::InvalidPartition, Some(p)) = (e, &spec.partition) {
        s.push_str(&format!(
            "{PROG}: error: invalid partition specified: {p}\n"
        ));
    }
    s.push_str(&format!(
        "{PROG}: error: Batch job submission failed: {e}\n"
    ));
    s
}

/// The stderr text when the controller cannot be reached or does not answer.
pub fn client_failure_text(e: &ClientError) -> String {
    let mut s = format!("{PROG}: error: Batch job submission failed: {e}\n");
    if let Some(h) = e.hint() {
        s.push_str(h);
        s.push('\n');
    }
    s
}

/// `sbatch --wait`'s exit code for a finished job, as Slurm's sbatch computes it:
/// the exit status when the script exited, 1 when it was killed by a signal (so a
/// cancelled or timed-out-by-SIGKILL job gives 1; a TIMEOUT recorded as `0:0` gives 0).
pub fn wait_exit_code(exit: ExitStatus) -> u8 {
    if exit.signal != 0 {
        1
    } else {
        u8::try_from(exit.code & 0xff).unwrap_or(1)
    }
}

/// Whether `-M <list>` names this cluster (`all` always does).
pub fn cluster_requested(list: &str, ours: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|c| c == ours || c.eq_ignore_ascii_case("all"))
}

/// Runs `sbatch` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match run_inner(&argv) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            print!("{}", f.stdout);
            eprint!("{}", f.stderr);
            let _ = std::io::stdout().flush();
            ExitCode::from(f.code)
        }
    }
}

fn run_inner(argv: &[String]) -> Result<u8, Failure> {
    let cli: Vec<String> = argv.iter().skip(1).cloned().collect();
    let mut parsed = Vec::new();
    for g in cli_groups(&cli)? {
        parsed.push(opts::parse_sbatch_argv(
            std::iter::once(PROG.to_string()).chain(g),
        )?);
    }
    if parsed.iter().any(|p| p.version) {
        println!("slurm {}", crate::config::advertised_slurm_version());
        return Ok(0);
    }
    // The script (or --wrap) comes with the last group of a heterogeneous job.
    let first = parsed
        .iter()
        .find(|p| p.batch.wrap.is_some() || !p.script.is_empty())
        .unwrap_or(&parsed[parsed.len() - 1]);
    let source = script_source(first)?;
    let ctx = submit_context()?;
    // Slurm rejects bad option values before it reads the script (and a script on
    // stdin would otherwise be waited for first).
    // (Value checks only: what needs the script's directives too waits for them.)
    for p in &parsed {
        p.job.to_step_spec(&ctx)?;
    }
    let script = read_script(&source)?;
    let p = prepare(&cli, &source, script, &ctx)?;
    if p.verbose > 0 {
        for l in verbose_lines(&p.argv) {
            eprintln!("{PROG}: {l}");
        }
    }
    // Options sluice accepts without acting on are said only under -v (Slurm is
    // silent about them, and tools parse sbatch's stderr).
    if !p.quiet && p.verbose > 0 {
        for w in &p.warnings {
            eprintln!("{PROG}: warning: {w}");
        }
    }
    let cfg = crate::config::Config::load().map_err(|e| Failure {
        stdout: String::new(),
        stderr: client_failure_text(&ClientError::Config(e)),
        code: 1,
    })?;
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    submit(p, &cfg, &mut out, &mut err)
}

/// The largest batch script accepted, bytes (Slurm's default `max_script_size`, 4 MiB).
pub const MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

/// Reads at most one byte more than the limit, so that an endless input (`/dev/zero`)
/// is refused instead of filling memory.
fn read_limited(r: impl Read) -> std::io::Result<Vec<u8>> {
    let mut b = Vec::new();
    r.take(MAX_SCRIPT_BYTES as u64 + 1).read_to_end(&mut b)?;
    Ok(b)
}

/// Reads the script (the only input I/O before connecting) and checks it.
fn read_script(source: &ScriptSource) -> Result<String, Failure> {
    let bytes = match source {
        ScriptSource::Wrap(cmd) => return Ok(wrap_script(cmd)),
        ScriptSource::File(p) => {
            let f = std::fs::File::open(p)
                .map_err(|_| Failure::error(format!("Unable to open file {p}")))?;
            read_limited(f).map_err(|e| Failure::error(format!("Unable to read file {p}: {e}")))?
        }
        ScriptSource::Stdin { .. } => read_limited(std::io::stdin())
            .map_err(|e| Failure::error(format!("Unable to read the script from stdin: {e}")))?,
    };
    if bytes.len() > MAX_SCRIPT_BYTES {
        return Err(Failure::error(format!(
            "Batch script is too large (more than {MAX_SCRIPT_BYTES} bytes, Slurm's default max_script_size)"
        )));
    }
    check_script(bytes)
}

/// What this process knows about where it runs.
pub(crate) fn submit_context() -> Result<SubmitContext, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::error(format!("Unable to get the current directory: {e}")))?;
    let env = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    Ok(SubmitContext {
        cwd,
        env,
        host: crate::config::short_hostname(),
        umask: current_umask(),
        now: chrono::Local::now().fixed_offset(),
    })
}

/// The process umask (read by setting and restoring it; sbatch is single-threaded here).
pub(crate) fn current_umask() -> u32 {
    use nix::sys::stat::{Mode, umask};
    let old = umask(Mode::from_bits_truncate(0o077));
    umask(old);
    old.bits()
}

/// How long sbatch keeps trying to hand over a submission whose answer it lost (the
/// controller went away after the request was sent), reconnecting to the restarted
/// controller; Slurm's sbatch likewise waits out a slurmctld restart.
const SUBMIT_RETRY: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest sbatch keeps resending one submission to a controller that answers but
/// keeps going away before it replies.
const SUBMIT_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(600);

/// A non-zero random number naming one submission (see `JobSpec::submit_token`).
fn submit_token() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    let t = if random {
        u64::from_ne_bytes(b)
    } else {
        // Without /dev/urandom: the time and pid, unique enough for one user's retries.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        now ^ (u64::from(std::process::id()) << 32)
    };
    t.max(1)
}

/// Sends a submission; when the connection is lost before the answer arrives, the
/// controller may or may not have made the job, so the same request (same
/// `submit_token`) is sent again to the controller once it answers: it answers with the
/// job it already made, or makes it. sbatch gives up when the controller has not
/// answered for [`SUBMIT_RETRY`], or after [`SUBMIT_RETRY_MAX`] in all.
///
/// Errors: the first connection error that is not a lost connection, or the last one
/// when the controller does not come back in time.
fn submit_retrying(
    client: &mut Client,
    cfg: &Config,
    req: &Request,
) -> Result<Response, ClientError> {
    let start = std::time::Instant::now();
    // Unreachable for SUBMIT_RETRY in a row, or retrying for SUBMIT_RETRY_MAX in all.
    let mut deadline = start + SUBMIT_RETRY;
    let mut err = match client.request(req) {
        Ok(r) => return Ok(r),
        Err(e) => e,
    };
    let mut pause = std::time::Duration::from_millis(50);
    while connection_lost(&err)
        && std::time::Instant::now() < deadline
        && start.elapsed() < SUBMIT_RETRY_MAX
    {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
        let mut reached = false;
        match Client::connect_with(cfg).and_then(|mut c| {
            reached = true;
            let r = c.request(req);
            *client = c;
            r
        }) {
            Ok(r) => return Ok(r),
            // Not answering yet (restarting): keep trying until the deadline.
            Err(ClientError::Unreachable { .. }) => {}
            Err(e) => err = e,
        }
        if reached {
            // A controller that answers and goes away again (restarting more than
            // once) may have saved this submission: keep trying while it answers.
            deadline = std::time::Instant::now() + SUBMIT_RETRY;
        }
    }
    Err(err)
}

/// Whether `e` means the connection broke after the request may have been received.
fn connection_lost(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Proto(crate::proto::ProtoError::Closed | crate::proto::ProtoError::Io(_))
    )
}

/// Sends the request to the controller of `cfg` and prints the outcome on `out`
/// (stdout) and `err` (stderr); with `--wait`, returns the job's exit code.
fn submit(
    p: Prepared,
    cfg: &Config,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, Failure> {
    let fail = |stderr: String| Failure {
        stdout: String::new(),
        stderr,
        code: 1,
    };
    let mut client = Client::connect_with(cfg).map_err(|e| fail(client_failure_text(&e)))?;
    if p.verbose > 0 {
        let _ = writeln!(
            err,
            "{PROG}: submitting to the controller at {}",
            cfg.socket.display()
        );
    }
    let cluster = match &p.clusters {
        Some(list) if !cluster_requested(list, &cfg.cluster_name) => {
            return Err(Failure::error(
                super::client::check_clusters(list, false, &cfg.cluster_name)
                    .err()
                    .unwrap_or_default(),
            ));
        }
        Some(_) => Some(cfg.cluster_name.clone()),
        None => None,
    };
    let mut spec = p.spec.clone();
    spec.submit_token = submit_token();
    let req = Request::Submit {
        spec: Box::new(spec),
        test_only: p.test_only,
        het: p.het.clone(),
    };
    /// The two answers a submission may get.
    enum Answer {
        TestOnly(TestOnly),
        Submitted(u32),
    }
    let reply = client::expect(
        submit_retrying(&mut client, cfg, &req),
        answer!(
            Response::TestOnly(t) => Answer::TestOnly(t),
            Response::Submitted { job_id } => Answer::Submitted(job_id),
        ),
    );
    match reply {
        Err(CallError::Client(e)) => Err(fail(client_failure_text(&e))),
        Err(CallError::Slurm(e)) => Err(fail(submit_failure_text(&e, &p.spec))),
        Err(e @ CallError::Unexpected) => {
            Err(Failure::error(format!("Batch job submission failed: {e}")))
        }
        Ok(Answer::TestOnly(t)) => {
            let _ = write!(err, "{}", test_only_text(&t));
            Ok(0)
        }
        Ok(Answer::Submitted(job_id)) => {
            let _ = write!(
                out,
                "{}",
                submitted_text(job_id, p.parsable, p.quiet, cluster.as_deref())
            );
            let _ = out.flush();
            if p.wait {
                wait_for(client, cfg, job_id, p.verbose, err)
            } else {
                Ok(0)
            }
        }
    }
}

/// `--wait`: polls the job until it leaves the active states and returns its exit
/// code ([`wait_exit_code`]). Slurm 22.05 polls after 2, 10, 42 s…; sluice polls every
/// 150 ms so short jobs return promptly. A lost connection is retried for a while.
fn wait_for(
    mut client: Client,
    cfg: &Config,
    job_id: u32,
    verbose: u8,
    err: &mut dyn Write,
) -> Result<u8, Failure> {
    let filter = JobFilter {
        ids: vec![job_id],
        ..JobFilter::default()
    };
    let mut lost_since: Option<Instant> = None;
    loop {
        match client.request(&Request::Jobs(filter.clone())) {
            Ok(Response::Jobs { jobs, .. }) => {
                lost_since = None;
                match jobs.iter().find(|j| j.id == job_id) {
                    None => {
                        return Err(Failure::error(format!(
                            "Job {job_id} is no longer known to the controller"
                        )));
                    }
                    Some(j) if !j.is_active() => {
                        if verbose > 0 {
                            let _ = writeln!(
                                err,
                                "{PROG}: Job {job_id} ended: {} ExitCode={}",
                                j.state_long(),
                                j.exit
                            );
                        }
                        return Ok(wait_exit_code(j.exit));
                    }
                    Some(_) => {}
                }
            }
            Ok(Response::Error(e)) => {
                return Err(Failure::error(format!("Job {job_id}: {e}")));
            }
            Ok(_) => {}
            Err(e) => {
                let since = *lost_since.get_or_insert_with(Instant::now);
                if since.elapsed() > WAIT_RECONNECT_FOR {
                    return Err(Failure::error(format!(
                        "Lost contact with the controller while waiting for job {job_id}: {e}"
                    )));
                }
                std::thread::sleep(Duration::from_secs(1));
                if let Ok(c) = Client::connect_with(cfg) {
                    client = c;
                }
                continue;
            }
        }
        std::thread::sleep(WAIT_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TimeLimit;
    use chrono::DateTime;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn ctx(env: &[(&str, &str)]) -> SubmitContext {
        SubmitContext {
            cwd: PathBuf::from("/home/alice/golden-work"),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            host: "vm".into(),
            umask: 0o022,
            now: DateTime::parse_from_rfc3339("2026-03-10T14:30:00+00:00").unwrap(),
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The pure part of `run` for a command line and a script text.
    fn prep(cli: &[&str], script: Option<&str>, env: &[(&str, &str)]) -> Result<Prepared, Failure> {
        let cli = strings(cli);
        let groups = cli_groups(&cli)?;
        let first = opts::parse_sbatch_argv(
            std::iter::once("sbatch".to_string()).chain(groups[groups.len() - 1].clone()),
        )?;
        let source = script_source(&first)?;
        let text = match &source {
            ScriptSource::Wrap(c) => wrap_script(c),
            _ => check_script(script.unwrap_or("").as_bytes().to_vec())?,
        };
        prepare(&cli, &source, text, &ctx(env))
    }

    #[test]
    fn heterogeneous_components_from_colons_and_hetjob_lines() {
        let p = prep(
            &["-n1", "-J", "a", ":", "-n2", "--parsable", "--wrap", "true"],
            None,
            &[],
        )
        .unwrap();
        assert_eq!((p.spec.ntasks, p.spec.name.as_str()), (Some(1), "a"));
        assert_eq!(p.het.len(), 1);
        assert_eq!((p.het[0].ntasks, p.het[0].name.as_str()), (Some(2), "wrap"));
        assert!(p.parsable);
        let script = "#!/bin/sh\n#SBATCH -n1\n#SBATCH hetjob\n#SBATCH -n3 -J b\necho\n";
        let p = prep(&["job.sh", "x", ":", "y"], Some(script), &[]).unwrap();
        assert_eq!(p.spec.ntasks, Some(1));
        assert_eq!((p.het[0].ntasks, p.het[0].name.as_str()), (Some(3), "b"));
        // After the script path a `:` is the script's.
        assert_eq!(p.spec.argv, ["x", ":", "y"]);
        // The command line's groups override the script's, component by component.
        let p = prep(&["-n4", ":", "-n5", "job.sh"], Some(script), &[]).unwrap();
        assert_eq!((p.spec.ntasks, p.het[0].ntasks), (Some(4), Some(5)));
        assert_eq!(p.het[0].name, "b");
    }

    #[test]
    fn wrap_generates_slurms_script_and_name() {
        let p = prep(&["--wrap", "env | sort"], None, &[]).unwrap();
        assert_eq!(
            p.spec.script,
            "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nenv | sort\n"
        );
        assert_eq!(p.spec.name, "wrap");
        assert_eq!(p.spec.command, "");
        assert!(p.spec.argv.is_empty());
        assert_eq!(p.spec.work_dir, "/home/alice/golden-work");
        assert_eq!(p.spec.submit_dir, "/home/alice/golden-work");
        assert_eq!(p.spec.submit_host, "vm");
        assert_eq!(p.spec.umask, 0o022);
    }

    #[test]
    fn wrap_with_script_arguments_is_refused() {
        let f = prep(&["--wrap", "true", "extra_arg.sh"], None, &[]).unwrap_err();
        assert_eq!(
            f.stderr,
            "sbatch: error: Script arguments not permitted with --wrap option\n"
        );
        assert_eq!(f.code, 1);
    }

    #[test]
    fn script_file_name_command_and_arguments() {
        let p = prep(
            &["-t", "2", "sub/my_job-script.sh", "first", "second arg"],
            Some("#!/bin/bash\necho hi\n"),
            &[],
        )
        .unwrap();
        assert_eq!(p.spec.name, "my_job-script.sh");
        assert_eq!(
            p.spec.command,
            "/home/alice/golden-work/sub/my_job-script.sh"
        );
        assert_eq!(p.spec.argv, ["first", "second arg"]);
        assert_eq!(p.spec.script, "#!/bin/bash\necho hi\n");
        assert_eq!(p.spec.time_limit, Some(TimeLimit::Minutes(2)));
    }

    #[test]
    fn stdin_names() {
        let s = "#!/bin/bash\necho from stdin unnamed\n";
        assert_eq!(prep(&[], Some(s), &[]).unwrap().spec.name, "sbatch");
        let p = prep(&["/dev/stdin"], Some(s), &[]).unwrap();
        assert_eq!(
            (p.spec.name.as_str(), p.spec.command.as_str()),
            ("stdin", "")
        );
        let named = "#!/bin/bash\n#SBATCH -J stdin_named\necho from stdin\n";
        assert_eq!(
            prep(&[], Some(named), &[]).unwrap().spec.name,
            "stdin_named"
        );
    }

    #[test]
    fn directives_env_and_command_line_merge() {
        // golden script_parsing: late directives ignored, CLI overrides script.
        let late = "#!/bin/bash\n#SBATCH -J early_name\n#SBATCH -t 5\necho x\n#SBATCH -J late\n";
        let p = prep(&["late_directive.sh"], Some(late), &[]).unwrap();
        assert_eq!(p.spec.name, "early_name");
        assert_eq!(p.spec.time_limit, Some(TimeLimit::Minutes(5)));
        let s = "#!/bin/bash\n#SBATCH -J from_script\n#SBATCH -o from_script-%j.out\ntrue\n";
        let p = prep(&["-J", "from_cli", "d.sh"], Some(s), &[]).unwrap();
        assert_eq!(p.spec.name, "from_cli");
        assert_eq!(p.spec.stdout.as_deref(), Some("from_script-%j.out"));
        // conformance 009.
        let env = [("SBATCH_JOB_NAME", "from_env")];
        let p = prep(
            &["--parsable", "--hold", "-t", "2", "job.sh"],
            Some(s),
            &env,
        )
        .unwrap();
        assert_eq!(p.spec.name, "from_env");
        assert!(p.spec.hold && p.parsable);
        let p = prep(&["-J", "from_cli", "job.sh"], Some(s), &env).unwrap();
        assert_eq!(p.spec.name, "from_cli");
    }

    #[test]
    fn script_checks_match_golden_messages() {
        let f = check_script(Vec::new()).unwrap_err();
        assert_eq!(
            (f.stderr.as_str(), f.code),
            ("sbatch: error: Batch script is empty!\n", 1)
        );
        let f = check_script(b"echo no interpreter line\n".to_vec()).unwrap_err();
        assert_eq!(
            f.stderr,
            "sbatch: error: This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh\n"
        );
        assert_eq!(f.code, 1);
        let f = check_script(b"#!/bin/sh\r\necho\r\n".to_vec()).unwrap_err();
        assert!(f.stderr.contains("DOS line breaks"));
        assert!(check_script(b"#!/bin/sh\n\0".to_vec()).is_err());
        assert!(check_script(b"#!/bin/sh\n\xff\n".to_vec()).is_err());
        assert_eq!(
            check_script(b"#!/bin/sh\n".to_vec()).unwrap(),
            "#!/bin/sh\n"
        );
    }

    #[test]
    fn option_errors_keep_their_exit_codes() {
        let f = prep(&["--time=abc", "--wrap", "true"], None, &[]).unwrap_err();
        assert_eq!(
            (f.stderr.as_str(), f.code),
            ("sbatch: error: Invalid --time specification\n", 255)
        );
        let f = prep(&["--bogus-option", "--wrap", "true"], None, &[]).unwrap_err();
        assert_eq!(f.code, 255);
        assert_eq!(
            f.stderr,
            "sbatch: unrecognized option '--bogus-option'\nTry \"sbatch --help\" for more information\n"
        );
        let f = prep(&["--help"], None, &[]).unwrap_err();
        assert_eq!(f.code, 0);
        assert!(f.stdout.contains("--wrap") && f.stderr.is_empty());
    }

    #[test]
    fn output_lines() {
        assert_eq!(
            submitted_text(194, false, false, None),
            "Submitted batch job 194\n"
        );
        assert_eq!(submitted_text(192, true, false, None), "192\n");
        assert_eq!(
            submitted_text(193, true, false, Some("anchor")),
            "193;anchor\n"
        );
        assert_eq!(
            submitted_text(5, false, false, Some("anchor")),
            "Submitted batch job 5 on cluster anchor\n"
        );
        assert_eq!(submitted_text(5, true, true, None), "");
        assert_eq!(submitted_text(5, false, true, None), "");
    }

    #[test]
    fn flags_reach_prepared() {
        let p = prep(
            &[
                "-Q",
                "-W",
                "--test-only",
                "-M",
                "anchor",
                "-vv",
                "--wrap",
                "x",
            ],
            None,
            &[],
        )
        .unwrap();
        assert!(p.quiet && p.wait && p.test_only);
        assert_eq!((p.verbose, p.clusters.as_deref()), (2, Some("anchor")));
        let p = prep(&["--mail-type=END", "--wrap", "x"], None, &[]).unwrap();
        assert_eq!(p.warnings, ["--mail-type is ignored by sluice"]);
    }

    #[test]
    fn verbose_lists_set_options() {
        let p = prep(
            &["-v", "-t", "2", "-J", "n", "--hold", "--wrap", "true"],
            None,
            &[],
        )
        .unwrap();
        let lines = verbose_lines(&p.argv);
        assert_eq!(lines.first().map(String::as_str), Some("defined options"));
        assert!(lines.contains(&format!("{:<20}: 2", "time")), "{lines:?}");
        assert!(
            lines.contains(&format!("{:<20}: n", "job-name")),
            "{lines:?}"
        );
        assert!(
            lines.contains(&format!("{:<20}: true", "wrap")),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l.starts_with("hold")), "{lines:?}");
        assert!(
            !lines.iter().any(|l| l.starts_with("partition")),
            "{lines:?}"
        );
    }

    #[test]
    fn failures_from_the_controller() {
        let spec = JobSpec {
            partition: Some("nosuch".into()),
            ..JobSpec::default()
        };
        assert_eq!(
            submit_failure_text(&SlurmError::InvalidPartition, &spec),
            "sbatch: error: invalid partition specified: nosuch\n\
             sbatch: error: Batch job submission failed: Invalid partition name specified\n"
        );
        assert_eq!(
            submit_failure_text(&SlurmError::NodeConfigUnavailable, &JobSpec::default()),
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
        );
        assert_eq!(
            submit_failure_text(&SlurmError::InvalidGres, &JobSpec::default()),
            "sbatch: error: Invalid generic resource (gres) specification\n"
        );
        let e = ClientError::Unreachable {
            hint: Some("sluice: start it with `sluice controller`".into()),
        };
        assert_eq!(
            client_failure_text(&e),
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n\
             sluice: start it with `sluice controller`\n"
        );
        let e = ClientError::Unreachable { hint: None };
        assert_eq!(client_failure_text(&e).lines().count(), 1);
    }

    #[test]
    fn test_only_line() {
        let t = TestOnly {
            job_id: 42,
            start: 0,
            nodes: "node01".into(),
            cpus: 1,
            partition: "debug".into(),
        };
        let s = test_only_text(&t);
        assert!(s.starts_with("sbatch: Job 42 to start at "), "{s}");
        assert!(
            s.ends_with(" using 1 processors on nodes node01 in partition debug\n"),
            "{s}"
        );
    }

    #[test]
    fn wait_exit_codes_follow_slurm() {
        let e = |code, signal| wait_exit_code(ExitStatus { code, signal });
        assert_eq!(e(0, 0), 0);
        assert_eq!(e(3, 0), 3);
        assert_eq!(e(0, 9), 1);
        assert_eq!(e(0, 15), 1);
        assert_eq!(e(0, 125), 1);
    }

    #[test]
    fn clusters() {
        assert!(cluster_requested("anchor", "anchor"));
        assert!(cluster_requested("other,anchor", "anchor"));
        assert!(cluster_requested("all", "anchor"));
        assert!(!cluster_requested("other", "anchor"));
    }

    fn job(id: u32, state: crate::model::JobState, exit: ExitStatus) -> crate::model::Job {
        use crate::model::{Job, JobState, MemReq};
        Job {
            id,
            spec: JobSpec::default(),
            uid: 1000,
            gid: 1000,
            user: "alice".into(),
            group: "alice".into(),
            partition: "debug".into(),
            account: "research".into(),
            qos: "normal".into(),
            time_limit: TimeLimit::Minutes(2),
            req_cpus: 1,
            req_tasks: 1,
            req_nodes: 1,
            req_mem: MemReq::PerCpu(400),
            state,
            priority: 1,
            submit_time: 0,
            end_time: (state != JobState::Running).then_some(1),
            exit,
            ..Job::default()
        }
    }

    /// A one-connection fake controller: answers a Submit with job 7, then Jobs
    /// queries with a running job twice and a FAILED 3:0 job after that.
    fn fake_controller(sock: PathBuf) -> std::thread::JoinHandle<Option<Box<JobSpec>>> {
        use crate::model::JobState;
        use crate::proto::Role;
        use crate::proto::codec::SyncFramed;
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().ok()?;
            let mut f = SyncFramed::new(stream);
            f.handshake(Role::Controller, &[Role::Client]).ok()?;
            let mut spec = None;
            let mut polls = 0;
            loop {
                let req: Request = match f.recv() {
                    Ok(r) => r,
                    Err(_) => return spec,
                };
                let resp = match req {
                    Request::Submit { spec: s, .. } => {
                        spec = Some(s);
                        Response::Submitted { job_id: 7 }
                    }
                    Request::Jobs(filter) => {
                        assert_eq!(filter.ids, [7]);
                        polls += 1;
                        let j = if polls < 3 {
                            job(7, JobState::Running, ExitStatus::default())
                        } else {
                            job(7, JobState::Failed, ExitStatus { code: 3, signal: 0 })
                        };
                        Response::Jobs {
                            jobs: vec![j],
                            now: 0,
                        }
                    }
                    _ => Response::Error(SlurmError::Other("unexpected".into())),
                };
                f.send(&resp).ok()?;
            }
        })
    }

    #[test]
    fn submit_and_wait_against_a_fake_controller() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config::personal();
        cfg.mode = crate::config::Mode::System;
        cfg.socket = dir.path().join("ctl.sock");
        cfg.cluster_name = "anchor".into();
        let server = fake_controller(cfg.socket.clone());
        let p = prep(
            &[
                "--parsable",
                "-W",
                "-M",
                "anchor",
                "-J",
                "w",
                "job.sh",
                "a1",
            ],
            Some("#!/bin/sh\nexit 3\n"),
            &[],
        )
        .unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = submit(p, &cfg, &mut out, &mut err).unwrap();
        assert_eq!(code, 3);
        assert_eq!(String::from_utf8(out).unwrap(), "7;anchor\n");
        assert_eq!(String::from_utf8(err).unwrap(), "");
        let spec = server.join().unwrap().unwrap();
        assert_eq!(
            (spec.name.as_str(), spec.argv.as_slice()),
            ("w", &["a1".to_string()][..])
        );
        assert_eq!(spec.script, "#!/bin/sh\nexit 3\n");
    }

    #[test]
    fn unreachable_controller_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config::personal();
        cfg.mode = crate::config::Mode::System;
        cfg.socket = dir.path().join("nobody.sock");
        let p = prep(&["--wrap", "true"], None, &[]).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let f = submit(p, &cfg, &mut out, &mut err).unwrap_err();
        assert_eq!(f.code, 1);
        let mut lines = f.stderr.lines();
        assert_eq!(
            lines.next(),
            Some(
                "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
            )
        );
        assert!(
            lines
                .next()
                .is_some_and(|h| h.contains("no controller answers"))
        );
        assert!(out.is_empty());
    }
}
