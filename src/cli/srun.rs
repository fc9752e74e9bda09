//! `srun`: run a parallel step (cf. src/srun/). Inside an allocation (`SLURM_JOB_ID`,
//! or `--jobid`) it creates a step of that job; outside one it first asks for an
//! allocation-only job (printing Slurm's "queued and waiting" / "has been allocated
//! resources" lines when it had to wait), runs the step in it, and gives it back.
//!
//! The step's I/O goes through the controller on the step stream ([`super::stepio`]).
//! Exit code: the highest task exit code (128+N for a task killed by signal N); 1 when
//! the step or allocation could not be had; 255 for command-line errors.

use super::client::{self, CallError, Client, ClientError, answer};
use super::sbatch;
use super::stepio::{self, StreamOpts};
use crate::jobspec::opts::{self, OptError, SrunArgs};
use crate::model::step::{CpuBind, CpuBindKind, Distribution, StdinMode, StepGpus, StepSpec};
use crate::model::{ExitStatus, JobSpec, JobState, Reason};
use crate::proto::codec::SyncFramed;
use crate::proto::{Request, Response, SlurmError};
use std::ffi::OsString;
use std::process::ExitCode;

const PROG: &str = "srun";

/// A finished srun that did not run a step: stderr text and exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub stderr: String,
    pub code: u8,
}

impl Failure {
    fn error(msg: impl std::fmt::Display) -> Failure {
        Failure {
            stderr: format!("{PROG}: error: {msg}\n"),
            code: 1,
        }
    }
}

impl From<OptError> for Failure {
    fn from(e: OptError) -> Failure {
        Failure {
            stderr: e.render(PROG),
            code: e.exit_code(),
        }
    }
}

/// Everything srun decided before talking to the controller.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The job to run in (`None`: get an allocation first).
    pub job_id: Option<u32>,
    /// The allocation request (used without `job_id`); a heterogeneous one's first
    /// component.
    pub job: JobSpec,
    /// The step; a heterogeneous step's first part.
    pub step: StepSpec,
    /// A heterogeneous step's other parts (srun `A : B`, `--het-group`), in component
    /// order, each with the allocation request of its component (used without
    /// `job_id`).
    pub het: Vec<(JobSpec, StepSpec)>,
    pub stream: StreamOpts,
    pub quiet: bool,
    pub warnings: Vec<String>,
}

/// Turns srun's command line (its `:` groups, [`opts::parse_srun_argv`]) and
/// environment into a [`Plan`].
///
/// Each group runs in the heterogeneous job component its `--het-group` names (one
/// part per component named), else in the component of its position; the parts are
/// put in component order. Outside an allocation the groups are the components of
/// the job srun asks for, so they must name components 0, 1, … without gaps.
///
/// Errors: option errors as Slurm prints them; an unreadable or invalid `--multi-prog`
/// file, or one in a step of several parts; a bad `SLURM_JOB_ID`; components named
/// twice, or past the last one of the job srun would allocate.
pub fn plan(groups: &[SrunArgs], ctx: &opts::SubmitContext) -> Result<Plan, Failure> {
    let Some(first) = groups.first() else {
        return Err(no_command());
    };
    if groups.iter().any(|g| g.command.is_empty()) {
        return Err(no_command());
    }
    // srun's `_opt_verify`: -Z runs on the nodes named, and only there.
    if first.step.no_allocate && first.job.nodelist.is_none() {
        return Err(Failure::error(
            "must specify a node list with -Z, --no-allocate.",
        ));
    }
    if first.step.no_allocate && first.job.exclude.is_some() {
        return Err(Failure::error(
            "can not specify --exclude list with -Z, --no-allocate.",
        ));
    }
    let env_num = |k: &str| ctx.env.get(k).and_then(|v| v.trim().parse::<u32>().ok());
    let job_id = match &first.step.jobid {
        Some(j) => Some(
            j.trim()
                .parse::<u32>()
                .map_err(|_| Failure::error(format!("Invalid job id specified: {j}")))?,
        ),
        None => env_num("SLURM_JOB_ID").or_else(|| env_num("SLURM_JOBID")),
    };
    // The components each group runs in: its --het-group list, else its position.
    let mut comps: Vec<(usize, u32)> = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let offsets = match &g.step.het_group {
            Some(v) => opts::parse_het_group(v)?,
            None => vec![i as u32],
        };
        comps.extend(offsets.into_iter().map(|k| (i, k)));
    }
    comps.sort_by_key(|&(_, k)| k);
    let het_err = |e: SlurmError| Failure::error(e);
    if let Some(w) = comps.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(het_err(SlurmError::het_group_twice(w[0].1)));
    }
    let several = comps.len() > 1;
    if several && groups.iter().any(|g| g.step.multi_prog) {
        return Err(Failure::error(
            "--multi-prog can not span more than one heterogeneous job component",
        ));
    }
    let top = comps.last().map_or(0, |&(_, k)| k);
    if job_id.is_none() && top as usize >= comps.len() {
        // The job srun asks for has exactly the components named.
        return Err(het_err(SlurmError::het_group_too_high(
            top,
            comps.len() as u32 - 1,
            several,
        )));
    }
    let named = several || groups.iter().any(|g| g.step.het_group.is_some());
    let mut parts = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for &(i, k) in &comps {
        let (job, step, w) = plan_part(&groups[i], ctx, job_id, named.then_some(k))?;
        for w in w {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        parts.push((job, step));
    }
    // Options sluice accepts without acting on are said only under -v: at default
    // verbosity Slurm prints nothing for them, and tools parse srun's stderr.
    if groups.iter().all(|g| g.job.verbose == 0) {
        warnings.clear();
    }
    // Without -J, every component of the job is named after the first command.
    let name = parts[0].0.name.clone();
    for ((job, _), &(i, _)) in parts.iter_mut().zip(&comps).skip(1) {
        if groups[i].job.job_name.as_deref().is_none_or(str::is_empty) {
            job.name = name.clone();
        }
    }
    let mut parts = parts.into_iter();
    let (job, step) = parts.next().expect("one group at least");
    let s = &first.step;
    let kill_on_bad_exit = match s.kill_on_bad_exit.as_deref() {
        Some(v) => v.trim() != "0",
        None => ctx
            .env
            .get("SLURM_KILL_BAD_EXIT")
            .is_some_and(|v| v.trim() != "0"),
    };
    let forward_stdin = !matches!(step.stdin, StdinMode::None | StdinMode::File(_));
    Ok(Plan {
        job_id,
        job,
        step,
        het: parts.collect(),
        stream: StreamOpts {
            label: s.label,
            unbuffered: s.unbuffered,
            pty: s.pty,
            kill_on_bad_exit,
            quiet: first.job.quiet,
            disable_status: s.disable_status,
            forward_stdin,
        },
        quiet: first.job.quiet,
        warnings,
    })
}

fn no_command() -> Failure {
    Failure {
        stderr: format!("{PROG}: fatal: No command given to execute.\n"),
        code: 1,
    }
}

/// One part of the step from one group's options: the allocation request of its
/// component and the step request. `job_id`: the allocation srun runs inside (task
/// counts default to its `SLURM_NTASKS`, or `SLURM_NTASKS_HET_GROUP_<k>` for
/// component `k`). `het_group`: the component the part runs in, when named.
fn plan_part(
    args: &SrunArgs,
    ctx: &opts::SubmitContext,
    job_id: Option<u32>,
    het_group: Option<u32>,
) -> Result<(JobSpec, StepSpec, Vec<String>), Failure> {
    let s = &args.step;
    let in_job = job_id.is_some();
    let mut norm = args.job.to_step_spec(ctx)?;
    // srun serves --mpi (sbatch and salloc only accept it).
    norm.warnings.retain(|w| !w.starts_with("--mpi "));
    let mpi = mpi_type(args.job.ignored.mpi.as_deref(), ctx)?;
    let container =
        super::container::resolve(&args.job.containers, &ctx.env).map_err(Failure::error)?;
    let mut spec = norm.spec;
    // srun(1) INPUT ENVIRONMENT VARIABLES: SRUN_CPUS_PER_TASK stands for -c (from 22.05
    // on, srun no longer reads SLURM_CPUS_PER_TASK, which a job's tasks still inherit).
    if spec.cpus_per_task.is_none()
        && let Some(v) = ctx.env.get("SRUN_CPUS_PER_TASK").filter(|v| !v.is_empty())
    {
        spec.cpus_per_task = Some(opts::parse_count("--cpus-per-task", v)?);
    }
    let distribution = match &args.job.later.distribution {
        Some(d) => Distribution::parse(d).ok_or(OptError::InvalidSpec("--distribution"))?,
        None => Distribution::Block,
    };
    let cpu_bind = match &s.cpu_bind {
        Some(b) => CpuBind::parse(b).ok_or(OptError::InvalidSpec("--cpu-bind"))?,
        None => CpuBind::default(),
    };
    // slurm_opt.c refuses a binding beside --hint (other than verbose alone).
    if spec.hint.is_some() && s.cpu_bind.is_some() && cpu_bind.kind != CpuBindKind::None {
        return Err(OptError::Conflict(
            "Following options are mutually exclusive with --hint: --ntasks-per-core, \
             --threads-per-core, -B and --cpu-bind (other than --cpu-bind=verbose)"
                .into(),
        )
        .into());
    }
    let env_num = |k: &str| ctx.env.get(k).and_then(|v| v.trim().parse::<u32>().ok());
    match job_id {
        None => opts::verify_allocation(&spec)?,
        // --gres-flags binds a job allocation's CPUs to its GPUs; a step inside the job
        // runs on what the job holds, so the flag changes nothing there (srun accepts
        // it, as Slurm's does). -B shapes a step's layout in Slurm; sluice chooses a
        // step's CPUs among the job's without regard to sockets (a step's
        // --gpus-per-socket counts every socket of its nodes), so it refuses that.
        Some(_) if spec.sockets_per_node.is_some() => {
            return Err(OptError::Unsupported(
                "--sockets-per-node for a step inside an allocation".into(),
            )
            .into());
        }
        Some(_) => {}
    }
    // Inside a job, a step's GPU binding and tasks per GPU default to the job's
    // (SLURM_GPU_BIND, SLURM_NTASKS_PER_GPU, as srun reads them).
    let inherited = |k: &str| {
        job_id
            .and_then(|_| ctx.env.get(k))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    // A job's --gpus-per-task is its steps' unless srun asks for GPUs itself
    // (SLURM_GPUS_PER_TASK, one of srun's input variables): each task of a plain
    // `srun` gets its own devices, as in Slurm.
    if spec.gpus.is_none()
        && spec.gpus_per_task.is_none()
        && spec.gpus_per_node.is_none()
        && spec.gpus_per_socket.is_none()
        && spec.gres.is_empty()
        && let Some(v) = inherited("SLURM_GPUS_PER_TASK")
    {
        spec.gpus_per_task =
            Some(crate::model::gres::parse_gpus(&v).map_err(|e| Failure::error(e.to_string()))?);
    }
    let gpu_bind = match spec
        .gpu_bind
        .clone()
        .or_else(|| inherited("SLURM_GPU_BIND"))
    {
        Some(b) => Some(
            crate::model::gpu_bind::GpuBind::parse(&b)
                .map_err(|e| Failure::error(e.to_string()))?,
        ),
        None => None,
    };
    let ntasks_per_gpu = match spec.ntasks_per_gpu {
        Some(n) => Some(n),
        None => inherited("SLURM_NTASKS_PER_GPU")
            .map(|v| opts::parse_count("--ntasks-per-gpu", &v))
            .transpose()?,
    };
    // Inside an allocation the job's task count is srun's default (SLURM_NTASKS; a
    // heterogeneous job's component k has its own, as Slurm's srun reads them).
    let ntasks = spec.ntasks.or_else(|| {
        if in_job && spec.nodes_min.is_none() && spec.ntasks_per_node.is_none() {
            let own = |v: &str| het_group.and_then(|k| env_num(&format!("{v}_HET_GROUP_{k}")));
            own("SLURM_NTASKS")
                .or_else(|| own("SLURM_NPROCS"))
                .or_else(|| env_num("SLURM_NTASKS"))
                .or_else(|| env_num("SLURM_NPROCS"))
        } else {
            None
        }
    });
    // SLURM_NTASKS_PER_NODE (the job's, or component k's in a heterogeneous job) is
    // srun's --ntasks-per-node when neither -n nor --ntasks-per-node was given: `srun
    // -N1` in an `--ntasks-per-node=2` job starts two tasks, as Slurm's does. With -n
    // the count given wins (srun(1): -n takes precedence over --ntasks-per-node).
    if in_job && spec.ntasks.is_none() && spec.ntasks_per_node.is_none() {
        spec.ntasks_per_node = match het_group {
            Some(k) => env_num(&format!("SLURM_NTASKS_PER_NODE_HET_GROUP_{k}")),
            None => env_num("SLURM_NTASKS_PER_NODE"),
        }
        .filter(|&n| n > 0);
    }
    // --ntasks-per-gpu turns a task count into GPUs or GPUs into a task count, as the
    // controller does for the allocation (the same function on the same request, so
    // a new allocation and its step agree).
    let mut step_req = JobSpec {
        ntasks,
        ntasks_per_gpu,
        ..spec.clone()
    };
    if step_req.resolve_ntasks_per_gpu().is_err() {
        match job_id {
            // Given to this srun: the step cannot be made.
            Some(id) if spec.ntasks_per_gpu.is_some() => {
                return Err(Failure::error(format!(
                    "Unable to create step for job {id}: {}",
                    crate::model::gres::INVALID_GRES
                )));
            }
            // Inherited from the job: a step too small for a GPU of its own keeps
            // the job's devices and only the binding.
            Some(_) => {
                step_req = JobSpec {
                    ntasks,
                    ..spec.clone()
                }
            }
            // A new allocation: the controller refuses it with Slurm's message.
            None => {}
        }
    }
    let ntasks = step_req.ntasks;
    let exe = args.command[0].clone();
    let base = std::path::Path::new(&exe)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| exe.clone());
    let name = args
        .job
        .job_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| base.clone());
    let (argv, task_argv) = if s.multi_prog {
        let path = opts::absolute(&ctx.cwd, &exe);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Failure::error(format!("Unable to open configuration file {exe}: {e}")))?;
        let n = ntasks.unwrap_or(spec.nodes_min.unwrap_or(1)).max(1);
        let per = super::multiprog::parse(&text, n).map_err(|e| Failure {
            stderr: format!(
                "{PROG}: error: {e}\n{PROG}: error: Configuration file {exe} invalid\n"
            ),
            code: 1,
        })?;
        (vec![exe.clone()], per)
    } else {
        (args.command.clone(), Vec::new())
    };
    let stdin = match spec.stdin.as_deref() {
        None => StdinMode::Task0,
        Some(i) if i.eq_ignore_ascii_case("all") => StdinMode::All,
        Some(i) if i.eq_ignore_ascii_case("none") => StdinMode::None,
        Some(i) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => {
            StdinMode::Task(i.parse().unwrap_or(0))
        }
        Some(f) => StdinMode::File(f.to_string()),
    };
    let overlap = s.overlap || ctx.env.contains_key("SLURM_OVERLAP");
    let exact = s.exact || ctx.env.contains_key("SLURM_EXACT");
    let winsize = if s.pty { stepio::term_size() } else { None };
    let step = StepSpec {
        name,
        argv,
        task_argv,
        environment: spec
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        work_dir: spec.work_dir.clone(),
        ntasks,
        nodes_min: spec.nodes_min,
        nodes_max: spec.nodes_max,
        cpus_per_task: spec.cpus_per_task,
        ntasks_per_node: spec.ntasks_per_node,
        mem: spec.mem,
        nodelist: spec.nodelist.clone(),
        exclude: spec.exclude.clone(),
        exact,
        exclusive: spec.exclusive,
        overlap,
        distribution,
        distribution_set: args.job.later.distribution.is_some(),
        cpu_bind_set: s.cpu_bind.is_some(),
        cpu_bind,
        threads_per_core: spec.threads_per_core,
        label: s.label,
        unbuffered: s.unbuffered,
        pty: s.pty,
        winsize,
        stdin,
        stdout: spec.stdout.clone(),
        stderr: spec.stderr.clone(),
        open_append: spec.open_append,
        time_limit: spec.time_limit,
        srun_host: ctx.host.clone(),
        srun_ip: launch_ip(&ctx.host),
        srun_pid: std::process::id(),
        umask: ctx.umask,
        gpus: StepGpus {
            gres: step_req.gres.clone(),
            total: step_req.gpus.clone(),
            per_node: step_req.gpus_per_node.clone(),
            per_task: step_req.gpus_per_task.clone(),
            per_socket: step_req.gpus_per_socket.clone(),
            bind: gpu_bind,
            ntasks_per_gpu,
        },
        het_group,
        no_alloc: s.no_allocate,
        mpi,
        container,
    };
    let mut job = spec;
    job.name = args
        .job
        .job_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or(base);
    // Task I/O files belong to the step, not to the allocation.
    job.stdout = None;
    job.stderr = None;
    job.stdin = None;
    let mut warnings = norm.warnings;
    for (o, set) in [
        ("--wait", s.wait.is_some()),
        ("--preserve-env", s.preserve_env),
    ] {
        if set {
            warnings.push(format!("{o} is ignored by sluice"));
        }
    }
    Ok((job, step, warnings))
}

/// The step's MPI bootstrap: `--mpi`, else SLURM_MPI_TYPE, else the configuration's
/// MpiDefault (cf. srun's `mpi_g_client_init`). Errors: an unknown type, or one sluice
/// does not serve (PMIx), as srun's `error:` line, exit 1.
fn mpi_type(
    given: Option<&str>,
    ctx: &opts::SubmitContext,
) -> Result<crate::model::mpi::MpiType, Failure> {
    use crate::model::mpi::MpiType;
    let chosen = given
        .map(str::to_string)
        .or_else(|| ctx.env.get("SLURM_MPI_TYPE").cloned())
        .filter(|v| !v.is_empty())
        .or_else(|| {
            crate::config::Config::load()
                .ok()
                .map(|c| c.mpi_default)
                .filter(|v| !v.is_empty())
        });
    match chosen {
        None => Ok(MpiType::None),
        Some(t) => MpiType::parse(&t).map_err(|e| Failure::error(e.to_string())),
    }
}

/// The IPv4 address tasks see as SLURM_LAUNCH_NODE_IPADDR: the submit host's, or
/// loopback when it does not resolve.
pub fn launch_ip(host: &str) -> String {
    use std::net::ToSocketAddrs;
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.find(|x| x.is_ipv4()))
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "127.0.0.1".into())
}

/// The line srun prints before waiting, for a job pending for `reason`.
pub fn pending_lines(prog: &str, job_id: u32, reason: &Reason) -> String {
    let mut s = String::new();
    if matches!(
        reason,
        Reason::PartitionConfig | Reason::PartitionNodeLimit | Reason::PartitionTimeLimit
    ) {
        s.push_str(&format!(
            "{prog}: Requested partition configuration not available now\n"
        ));
    }
    s.push_str(&format!(
        "{prog}: job {job_id} queued and waiting for resources\n"
    ));
    s
}

/// Runs `srun` with its full argv (argv[0] included).
pub fn run(args: Vec<OsString>) -> ExitCode {
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let code = match run_inner(&argv) {
        Ok(c) => c,
        Err(f) => {
            eprint!("{}", f.stderr);
            f.code
        }
    };
    ExitCode::from(code)
}

fn run_inner(argv: &[String]) -> Result<u8, Failure> {
    let a = opts::parse_srun_argv(
        std::iter::once(PROG.to_string()).chain(argv.iter().skip(1).cloned()),
    )
    .map_err(|e| match e {
        OptError::Help(t) => {
            print!("{t}");
            Failure {
                stderr: String::new(),
                code: 0,
            }
        }
        e => e.into(),
    })?;
    if a.iter().any(|g| g.version) {
        println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
        return Ok(0);
    }
    if a.iter()
        .any(|g| g.job.ignored.mpi.as_deref() == Some("list"))
    {
        print!("{}", crate::model::mpi::list_text());
        return Ok(0);
    }
    let ctx = sbatch::submit_context().map_err(|f| Failure {
        stderr: f.stderr.replace("sbatch:", "srun:"),
        code: 1,
    })?;
    let p = plan(&a, &ctx)?;
    if !p.quiet {
        for w in &p.warnings {
            eprintln!("{PROG}: warning: {w}");
        }
    }
    let cfg = crate::config::Config::load().map_err(|e| Failure::error(e.to_string()))?;
    let unreachable = |e: ClientError| {
        let mut s = format!("{PROG}: error: {e}\n");
        if let Some(h) = e.hint() {
            s.push_str(h);
            s.push('\n');
        }
        Failure { stderr: s, code: 1 }
    };
    if p.step.no_alloc {
        // No job: the controller runs the step on the nodes named (Slurm's srun says
        // so first, at its default verbosity).
        if !p.quiet {
            eprintln!("{PROG}: do not allocate resources");
        }
        let c = Client::connect_with(&cfg).map_err(unreachable)?;
        return Ok(launch(c, 0, &p));
    }
    match p.job_id {
        Some(job_id) => {
            let c = Client::connect_with(&cfg).map_err(unreachable)?;
            Ok(launch(c, job_id, &p))
        }
        None => {
            let mut owner = Client::connect_with(&cfg).map_err(unreachable)?;
            let het: Vec<JobSpec> = p.het.iter().map(|(j, _)| j.clone()).collect();
            let job = allocate(&mut owner, PROG, &p.job, &het, p.quiet, false)?;
            let c = Client::connect_with(&cfg).map_err(unreachable)?;
            let code = launch(c, job, &p);
            let _ = owner.request(&Request::ReleaseAllocation {
                job_id: job,
                exit: ExitStatus {
                    code: i32::from(code),
                    signal: 0,
                },
            });
            Ok(code)
        }
    }
}

/// Asks for an allocation-only job and waits until it runs; returns its id. Prints
/// Slurm's lines about waiting (`prog` is `srun` or `salloc`). A `detach`ed allocation
/// is not owned by `owner`'s connection (salloc `--no-shell`): it stays after the
/// connection closes. With `het` components after `spec`, the job is heterogeneous
/// (all components start together) and the id is its leader's.
///
/// Errors: the request is refused, or the job ends before it starts.
pub fn allocate(
    owner: &mut Client,
    prog: &str,
    spec: &JobSpec,
    het: &[JobSpec],
    quiet: bool,
    detach: bool,
) -> Result<u32, Failure> {
    let fail = |m: String| Failure { stderr: m, code: 1 };
    // srun's own allocation ends with its srun (see JobSpec::step_alloc).
    let mark = |s: &JobSpec| JobSpec {
        step_alloc: prog == "srun",
        ..s.clone()
    };
    let resp = owner
        .request(&Request::Allocate {
            spec: Box::new(mark(spec)),
            detach,
            het: het.iter().map(mark).collect(),
        })
        .map_err(|e| fail(format!("{prog}: error: {e}\n")))?;
    let job = match client::expect(Ok(resp), answer!(Response::Allocation(j) => j)) {
        Ok(j) => j,
        Err(CallError::Slurm(e)) => {
            let mut s = String::new();
            if let (SlurmError::InvalidPartition, Some(p)) = (&e, &spec.partition) {
                s.push_str(&format!(
                    "{prog}: error: invalid partition specified: {p}\n"
                ));
            }
            s.push_str(&format!(
                "{prog}: error: Unable to allocate resources: {e}\n"
            ));
            return Err(fail(s));
        }
        Err(e) => return Err(fail(format!("{prog}: error: {e}\n"))),
    };
    let id = job.id;
    if job.state == JobState::Running {
        if prog == "salloc" && !quiet {
            eprintln!("{prog}: Granted job allocation {id}");
        }
        return Ok(id);
    }
    if !quiet {
        if prog == "salloc" {
            eprintln!("{prog}: Pending job allocation {id}");
        }
        eprint!("{}", pending_lines(prog, id, &job.reason));
    }
    // Ctrl-C (or TERM, HUP, ...) while pending revokes the request (Slurm's
    // `_signal_while_allocating` in srun and salloc): the job is cancelled.
    let old_mask = stepio::srun_signals()
        .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
        .ok();
    let sigfd = nix::sys::signalfd::SignalFd::with_flags(
        &stepio::srun_signals(),
        nix::sys::signalfd::SfdFlags::SFD_NONBLOCK | nix::sys::signalfd::SfdFlags::SFD_CLOEXEC,
    )
    .ok();
    let resp = owner
        .request_interruptible(
            &Request::WaitJob {
                job_id: id,
                started: true,
            },
            || take_revoking_signal(sigfd.as_ref()),
        )
        .map_err(|e| fail(format!("{prog}: error: {e}\n")));
    drop(sigfd);
    if let Some(m) = old_mask {
        let _ = m.thread_set_mask();
    }
    let resp = resp?;
    let Some(resp) = resp else {
        let text = revoked_lines(prog, id);
        // A fresh connection: the owner's is waiting for an answer that will not come.
        let cancel = Request::Cancel {
            filter: crate::proto::JobFilter {
                ids: vec![id],
                ..Default::default()
            },
            signal: None,
            batch_only: false,
            full: false,
        };
        if let Ok(cfg) = crate::config::Config::load()
            && let Ok(mut c) = Client::connect_with(&cfg)
        {
            let _ = c.request(&cancel);
        }
        return Err(fail(text));
    };
    match resp {
        Response::Allocation(j) if j.state == JobState::Running => {
            if !quiet {
                eprintln!("{prog}: job {id} has been allocated resources");
                if prog == "salloc" {
                    eprintln!("{prog}: Granted job allocation {id}");
                }
            }
            Ok(id)
        }
        _ => Err(fail(format!(
            "{prog}: Job allocation {id} has been revoked\n"
        ))),
    }
}

/// Takes the pending signals from `fd` (srun's signals, blocked) and says whether one
/// of them revokes a pending allocation: any but SIGCONT and SIGWINCH, which are
/// consumed and ignored (Slurm's `_signal_while_allocating` returns on SIGCONT).
fn take_revoking_signal(fd: Option<&nix::sys::signalfd::SignalFd>) -> bool {
    let Some(fd) = fd else { return false };
    let mut revoke = false;
    while let Ok(Some(info)) = fd.read_signal() {
        let sig = info.ssi_signo as i32;
        if sig != nix::libc::SIGCONT && sig != nix::libc::SIGWINCH {
            revoke = true;
        }
    }
    revoke
}

/// What srun or salloc prints when a signal revokes its pending allocation `id`
/// (srun's `_signal_while_allocating`; salloc's job-complete callback and its
/// "aborted" line).
pub fn revoked_lines(prog: &str, id: u32) -> String {
    if prog == "salloc" {
        format!(
            "{prog}: Job allocation {id} has been revoked.\n{prog}: Job aborted due to signal\n"
        )
    } else {
        format!("{prog}: Job allocation {id} has been revoked\n")
    }
}

/// Sends the step request on `c` and runs the step stream; returns srun's exit code.
fn launch(c: Client, job_id: u32, p: &Plan) -> u8 {
    let stream = match c.into_stream() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{PROG}: error: Unable to create step for job {job_id}: {e}");
            return 1;
        }
    };
    let mut f = SyncFramed::new(stream);
    if let Err(e) = f.send(&Request::StepLaunch {
        job_id,
        spec: Box::new(p.step.clone()),
        het: p.het.iter().map(|(_, s)| s.clone()).collect(),
    }) {
        eprintln!("{PROG}: error: Unable to create step for job {job_id}: {e}");
        return 1;
    }
    // Through a node agent's relay (srun in a job on a remote node): a relay that
    // breaks (the agent restarted, the node's SSH link dropped) is reconnected to.
    let relayed = std::env::var_os(crate::config::RELAY_SOCKET_VAR).is_some_and(|s| !s.is_empty());
    let connect = || {
        let cfg = crate::config::Config::load().ok()?;
        crate::cli::client::Client::connect_with(&cfg)
            .ok()?
            .into_stream()
            .ok()
    };
    stepio::run_reattaching(
        f.into_inner(),
        job_id,
        &p.stream,
        relayed.then_some(&connect as &dyn Fn() -> Option<std::os::unix::net::UnixStream>),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn ctx(env: &[(&str, &str)]) -> opts::SubmitContext {
        opts::SubmitContext {
            cwd: PathBuf::from("/tmp"),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            host: "localhost".into(),
            umask: 0o022,
            now: chrono::DateTime::parse_from_rfc3339("2026-03-10T14:30:00+01:00").unwrap(),
        }
    }

    fn plan_of(args: &[&str], env: &[(&str, &str)]) -> Result<Plan, Failure> {
        let a = opts::parse_srun_argv(std::iter::once("srun").chain(args.iter().copied()))?;
        plan(&a, &ctx(env))
    }

    #[test]
    fn het_groups_become_parts_in_component_order() {
        // Outside an allocation: one component per group.
        let p = plan_of(&["-n2", "-l", "hostname", ":", "-n1", "date"], &[]).unwrap();
        assert_eq!(p.job_id, None);
        assert_eq!((p.step.ntasks, p.step.het_group), (Some(2), Some(0)));
        assert_eq!(p.het.len(), 1);
        let (job1, step1) = &p.het[0];
        assert_eq!((step1.ntasks, step1.het_group), (Some(1), Some(1)));
        assert_eq!(step1.argv, ["date"]);
        assert!(step1.label);
        // Every component is named after the first command.
        assert_eq!(
            (p.job.name.as_str(), job1.name.as_str()),
            ("hostname", "hostname")
        );
        assert_eq!(job1.ntasks, Some(1));
        // Inside a heterogeneous allocation, --het-group picks components; each
        // takes its own task count from the allocation's variables.
        let env = [
            ("SLURM_JOB_ID", "40"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_NTASKS_HET_GROUP_0", "2"),
            ("SLURM_NTASKS_HET_GROUP_1", "3"),
        ];
        let p = plan_of(&["--het-group=0,1", "true"], &env).unwrap();
        assert_eq!(p.job_id, Some(40));
        assert_eq!((p.step.ntasks, p.step.het_group), (Some(2), Some(0)));
        assert_eq!(
            (p.het[0].1.ntasks, p.het[0].1.het_group),
            (Some(3), Some(1))
        );
        let p = plan_of(&["--het-group=1", "true"], &env).unwrap();
        assert_eq!(
            (p.step.ntasks, p.step.het_group, p.het.len()),
            (Some(3), Some(1), 0)
        );
        // Groups are put in component order.
        let p = plan_of(&["--het-group=1", "b", ":", "--het-group=0", "a"], &env).unwrap();
        assert_eq!(
            (p.step.argv[0].as_str(), p.het[0].1.argv[0].as_str()),
            ("a", "b")
        );
        // Without --het-group, a plain step names no component.
        let p = plan_of(&["true"], &env).unwrap();
        assert_eq!(p.step.het_group, None);
    }

    #[test]
    fn bad_het_groups() {
        let e = plan_of(&["--het-group=x", "true"], &[]).unwrap_err();
        assert_eq!(
            (e.stderr.as_str(), e.code),
            ("srun: error: Invalid --het-group value: x\n", 1)
        );
        let e = plan_of(&["--het-group=0", "a", ":", "--het-group=0", "b"], &[]).unwrap_err();
        assert!(e.stderr.contains("component 0 is named twice"), "{e:?}");
        // Outside an allocation the groups are the job's components: 0, 1, ...
        let e = plan_of(&["--het-group=1", "true"], &[]).unwrap_err();
        assert_eq!(
            e.stderr,
            "srun: error: Requested het-group offset exceeds highest hetjob index (1 > 0)\n"
        );
        let e = plan_of(&["-n1", "true", ":", "--het-group=2", "true"], &[]).unwrap_err();
        assert!(
            e.stderr
                .contains("het group value of 2, but the job allocation has maximum value of 1"),
            "{e:?}"
        );
        let e = plan_of(&["-n1", "true", ":"], &[]).unwrap_err();
        assert!(e.stderr.contains("No command given"), "{e:?}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mp.conf");
        std::fs::write(&f, "0 echo zero\n").unwrap();
        let fs = f.to_string_lossy().into_owned();
        let e = plan_of(&["--multi-prog", &fs, ":", "true"], &[]).unwrap_err();
        assert!(e.stderr.contains("--multi-prog can not span"), "{e:?}");
    }

    #[test]
    fn inside_an_allocation_the_job_and_its_task_count_are_inherited() {
        let p = plan_of(
            &["hostname"],
            &[("SLURM_JOB_ID", "42"), ("SLURM_NTASKS", "2")],
        )
        .unwrap();
        assert_eq!(p.job_id, Some(42));
        assert_eq!(p.step.ntasks, Some(2));
        assert_eq!(p.step.name, "hostname");
        let p = plan_of(
            &["-n1", "true"],
            &[("SLURM_JOB_ID", "42"), ("SLURM_NTASKS", "2")],
        )
        .unwrap();
        assert_eq!(p.step.ntasks, Some(1));
        let p = plan_of(&["--jobid=7", "-l", "-K", "true"], &[]).unwrap();
        assert_eq!(p.job_id, Some(7));
        assert!(p.stream.label && p.stream.kill_on_bad_exit && p.step.label);
        let p = plan_of(&["-n3", "-J", "nm", "-m", "cyclic", "true"], &[]).unwrap();
        assert_eq!(p.job_id, None);
        assert_eq!((p.job.name.as_str(), p.job.ntasks), ("nm", Some(3)));
        assert_eq!(p.step.distribution, Distribution::Cyclic);
    }

    #[test]
    fn options_and_errors() {
        let e = plan_of(&[], &[]).unwrap_err();
        assert!(e.stderr.contains("No command given"), "{e:?}");
        let e = plan_of(&["--time=abc", "true"], &[]).unwrap_err();
        assert_eq!(
            (e.stderr.as_str(), e.code),
            ("srun: error: Invalid --time specification\n", 255)
        );
        let e = plan_of(&["--bogus", "true"], &[]).unwrap_err();
        assert_eq!(e.code, 255);
        let p = plan_of(&["-i", "none", "-o", "out-%t", "true"], &[]).unwrap();
        assert_eq!(p.step.stdin, StdinMode::None);
        assert!(!p.stream.forward_stdin);
        assert_eq!(p.step.stdout.as_deref(), Some("out-%t"));
        assert_eq!(p.job.stdout, None);
        let p = plan_of(&["--input=1", "cat"], &[]).unwrap();
        assert_eq!(p.step.stdin, StdinMode::Task(1));
        // The command's own options are not srun's.
        let p = plan_of(&["sh", "-c", "echo -n"], &[]).unwrap();
        assert_eq!(p.step.argv, ["sh", "-c", "echo -n"]);
    }

    #[test]
    fn tasks_per_gpu_and_gpu_binding_for_steps() {
        use crate::model::gpu_bind::GpuBindKind;
        let job = [("SLURM_JOB_ID", "42"), ("SLURM_NTASKS", "4")];
        // Inherited from the job: four tasks, two per GPU, so two GPUs, bound single:2.
        let env = [job[0], job[1], ("SLURM_NTASKS_PER_GPU", "2")];
        let p = plan_of(&["true"], &env).unwrap();
        assert_eq!(p.step.ntasks, Some(4));
        assert_eq!(p.step.gpus.total.as_ref().map(|g| g.count), Some(2));
        assert_eq!(p.step.gpus.effective_bind().kind, GpuBindKind::Single(2));
        // A one-task step of such a job keeps the job's devices and the binding.
        let p = plan_of(&["-n1", "true"], &env).unwrap();
        assert_eq!((p.step.ntasks, &p.step.gpus.total), (Some(1), &None));
        // Given to srun: GPUs named make the task count; too few tasks are refused.
        let p = plan_of(&["--gpus=3", "--ntasks-per-gpu=1", "true"], &job).unwrap();
        assert_eq!(p.step.ntasks, Some(3));
        let e = plan_of(&["-n1", "--ntasks-per-gpu=2", "true"], &job).unwrap_err();
        assert_eq!(
            e.stderr,
            "srun: error: Unable to create step for job 42: Invalid generic resource (gres) specification\n"
        );
        // An explicit --gpu-bind wins over the job's and over single:N.
        let env = [
            job[0],
            ("SLURM_GPU_BIND", "closest"),
            ("SLURM_NTASKS_PER_GPU", "1"),
        ];
        let p = plan_of(&["-n2", "--gpu-bind=map_gpu:1,0", "true"], &env).unwrap();
        assert_eq!(
            p.step.gpus.effective_bind().kind,
            GpuBindKind::MapGpu(vec![1, 0])
        );
        let p = plan_of(&["-n2", "true"], &env).unwrap();
        assert_eq!(p.step.gpus.effective_bind().kind, GpuBindKind::Closest);
        // Outside a job the allocation checks apply; inside, --gres-flags is the job's
        // (accepted, as Slurm's srun does) and --sockets-per-node is refused.
        let e = plan_of(&["--gpus-per-socket=1", "true"], &[]).unwrap_err();
        assert_eq!(
            (e.stderr.as_str(), e.code),
            (
                "srun: error: --gpus-per-socket option requires --sockets-per-node specification\n",
                1
            )
        );
        let p = plan_of(&["--gpus-per-socket=1", "true"], &job).unwrap();
        assert_eq!(p.step.gpus.per_socket.as_ref().map(|g| g.count), Some(1));
        assert!(plan_of(&["--gres-flags=enforce-binding", "true"], &job).is_ok());
        let e = plan_of(&["--sockets-per-node=1", "true"], &job).unwrap_err();
        assert!(e.stderr.contains("not supported yet"), "{e:?}");
        let p = plan_of(&["--gres-flags=enforce-binding", "--gpus=1", "true"], &[]).unwrap();
        assert_eq!(p.job.gres_flags, crate::model::gres::GresBinding::Enforce);
    }

    #[test]
    fn no_allocate_needs_a_node_list_and_no_exclude_list() {
        let e = plan_of(&["-Z", "true"], &[]).unwrap_err();
        assert_eq!(
            (e.stderr.as_str(), e.code),
            (
                "srun: error: must specify a node list with -Z, --no-allocate.\n",
                1
            )
        );
        let e = plan_of(&["--no-allocate", "-w", "n1", "-x", "n2", "true"], &[]).unwrap_err();
        assert_eq!(
            e.stderr,
            "srun: error: can not specify --exclude list with -Z, --no-allocate.\n"
        );
        let p = plan_of(&["-Z", "-w", "n[1-2]", "true"], &[("SLURM_JOB_ID", "4")]).unwrap();
        assert!(p.step.no_alloc);
        assert_eq!(p.step.nodelist.as_deref(), Some("n[1-2]"));
    }

    #[test]
    fn multi_prog_files_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mp.conf");
        std::fs::write(&f, "0 echo zero\n1 echo one %t\n").unwrap();
        let fs = f.to_string_lossy().into_owned();
        let p = plan_of(&["-n2", "--multi-prog", &fs], &[]).unwrap();
        assert_eq!(p.step.argv_of(1), ["echo", "one", "1"]);
        let e = plan_of(&["-n3", "--multi-prog", &fs], &[]).unwrap_err();
        assert!(e.stderr.contains("invalid"), "{e:?}");
    }

    #[test]
    fn waiting_lines() {
        assert_eq!(
            pending_lines("srun", 5, &Reason::Resources),
            "srun: job 5 queued and waiting for resources\n"
        );
        assert!(
            pending_lines("salloc", 5, &Reason::PartitionConfig)
                .starts_with("salloc: Requested partition")
        );
    }
}
