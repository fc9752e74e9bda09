//! `sstat`: live usage of running steps (cf. src/sstat/). The numbers come from each
//! step's stepd, which samples its tasks in /proc every second and reports through the
//! agent; the controller keeps the latest sample in the step's record, and sstat asks
//! for it with one `Request::Jobs`.
//!
//! `-j JOB` shows the job's first running step (`sstat: error: no steps running for job
//! N` when there is none), `-j JOB.STEP` that step, `-a` every running step of the job.
//! Fields, widths and the table/parsable layouts follow sstat's.

use super::client::Client;
use super::getopt::{self, Item, opt};
use super::jobid::{StepSel, parse_job_id};
use crate::cli::usagefmt;
use crate::model::job::StepRecord;
use crate::model::step::StepUsage;
use crate::model::{Job, JobState};
use crate::proto::{JobFilter, Request, Response};
use std::ffi::OsString;
use std::process::ExitCode;

/// sstat's options (getopt table): what [`getopt::parse`] accepts, `--help` lists, and
/// the man page and completions are generated from (`cli::docs`).
pub const SPECS: &[getopt::OptSpec] = &[
    opt("allsteps", Some('a'), false).doc("", "show every step of the given jobs"),
    opt("format", Some('o'), true).doc(
        "field_list",
        "comma separated fields to print (see --helpformat)",
    ),
    opt("fields", None, true),
    opt("helpformat", Some('e'), false).doc("", "list the fields --format accepts"),
    opt("help", Some('h'), false).doc("", "show this help message"),
    opt("jobs", Some('j'), true).doc(
        "job(.step)",
        "comma separated jobs or steps to show (required)",
    ),
    opt("noheader", Some('n'), false).doc("", "print no header line"),
    opt("noconvert", None, false).doc("", "print sizes in their stored unit, unscaled"),
    opt("pidformat", Some('i'), false).doc("", "show the pids of each step (pid format)"),
    opt("parsable", Some('p'), false).doc("", "fields delimited by '|', with a trailing '|'"),
    opt("parsable2", Some('P'), false).doc("", "fields delimited by '|', without a trailing '|'"),
    opt("usage", None, false).doc("", "display a brief usage message"),
    opt("verbose", Some('v'), false).doc("", "more diagnostics"),
    opt("version", Some('V'), false).doc("", "print the Slurm version and exit"),
];

/// Every field sstat knows, with its default width (negative = left-aligned).
pub const FIELDS: &[(&str, i32)] = &[
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 12),
    ("AveDiskWrite", 12),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("JobID", -12),
    ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15),
    ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("Nodelist", 20),
    ("NTasks", 8),
    ("Pids", 20),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqGov", 13),
    // The TRES usage strings, as sacct prints them (with gres/gpumem and gres/gpuutil
    // when the step's GPUs were measured).
    ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14),
    ("TRESUsageInMaxNode", 14),
    ("TRESUsageInMaxTask", 14),
    ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 14),
    ("TRESUsageInMinTask", 14),
    ("TRESUsageInTot", 14),
    ("TRESUsageOutAve", 14),
    ("TRESUsageOutMax", 14),
    ("TRESUsageOutMaxNode", 14),
    ("TRESUsageOutMaxTask", 14),
    ("TRESUsageOutMin", 14),
    ("TRESUsageOutMinNode", 14),
    ("TRESUsageOutMinTask", 14),
    ("TRESUsageOutTot", 14),
];

/// sstat's default `--format`.
pub const DEFAULT_FORMAT: &str = "JobID,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite";

/// One output column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub width: usize,
    pub left: bool,
}

/// How rows are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    #[default]
    Table,
    Parsable,
    Parsable2,
}

/// Parsed options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    /// `(job, step)`; step `None` = the job's first running step (all with `-a`).
    pub jobs: Vec<(u32, Option<StepSel>)>,
    pub fields: Vec<Field>,
    pub all_steps: bool,
    pub noheader: bool,
    pub layout: Layout,
    pub helpformat: bool,
    pub version: bool,
    pub help: bool,
    /// `--usage`: print the brief usage and exit.
    pub usage: bool,
}

/// Parses a `--format` list (names any case, `name%W` widths).
///
/// Errors: `Invalid field requested: "X"`.
pub fn parse_format(list: &str) -> Result<Vec<Field>, String> {
    use super::format::{Lookup, list_items, lookup};
    let mut out = Vec::new();
    for it in list_items(list) {
        let found = lookup(FIELDS.iter().map(|(f, _)| *f), it.name, Lookup::Exact);
        let Some(&(canon, def)) = found.map(|i| &FIELDS[i]) else {
            let name = it.name;
            return Err(format!("sstat: error: Invalid field requested: \"{name}\""));
        };
        let w = it.width.and_then(|w| w.parse::<i32>().ok()).unwrap_or(def);
        out.push(Field {
            name: canon,
            width: w.unsigned_abs() as usize,
            left: w < 0,
        });
    }
    Ok(out)
}

/// Parses argv (without argv[0]).
///
/// Errors: Slurm's texts for bad options, ids and fields.
pub fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts::default();
    let mut format = DEFAULT_FORMAT.to_string();
    for item in getopt::parse("sstat", SPECS, args)? {
        let (name, v) = match item {
            Item::Opt(n, v) => (n, v.unwrap_or_default()),
            Item::Operand(a) => ("jobs", a),
        };
        match name {
            "allsteps" => o.all_steps = true,
            "format" | "fields" => format = v,
            "helpformat" => o.helpformat = true,
            "help" => o.help = true,
            "usage" => o.usage = true,
            "noheader" => o.noheader = true,
            "parsable" => o.layout = Layout::Parsable,
            "parsable2" => o.layout = Layout::Parsable2,
            "version" => o.version = true,
            "jobs" => {
                for part in v.split(',').filter(|p| !p.is_empty()) {
                    match parse_job_id(part) {
                        Some(id) if id.array.is_none() && id.het.is_none() => {
                            o.jobs.push((id.job, id.step))
                        }
                        _ => return Err(format!("sstat: fatal: Bad job/step specified: {part}")),
                    }
                }
            }
            _ => {}
        }
    }
    o.fields = parse_format(&format)?;
    Ok(o)
}

/// The value of `field` for step `rec` of `job`: sstat's own columns here, the usage
/// figures as sacct prints them (`cli::usagefmt`).
pub fn value(field: &str, job: &Job, rec: &StepRecord) -> String {
    let empty = StepUsage::default();
    let u = rec.usage().unwrap_or(&empty);
    match field {
        "JobID" => format!("{}.{}", job.id, rec.id),
        "MaxRSS" => usagefmt::kib(u.max_rss_kib.max(rec.max_rss_kib)),
        "NTasks" => u.ntasks.max(rec.ntasks.min(1)).to_string(),
        "AveCPUFreq" => "0".into(),
        "ReqCPUFreq" | "ReqCPUFreqMin" | "ReqCPUFreqMax" | "ReqCPUFreqGov" => "Unknown".into(),
        "Nodelist" => rec.nodes.clone(),
        "Pids" => u
            .pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        _ => usagefmt::step_field(field, u).unwrap_or_default(),
    }
}

fn line(o: &Opts, values: &[String]) -> String {
    let mut s = String::new();
    match o.layout {
        Layout::Table => {
            for (f, v) in o.fields.iter().zip(values) {
                let n = v.chars().count();
                let text = if n > f.width && f.width > 0 {
                    let mut t: String = v.chars().take(f.width - 1).collect();
                    t.push('+');
                    t
                } else {
                    v.clone()
                };
                let w = f.width;
                if f.left {
                    s.push_str(&format!("{text:<w$} "));
                } else {
                    s.push_str(&format!("{text:>w$} "));
                }
            }
        }
        Layout::Parsable => {
            for v in values {
                s.push_str(v);
                s.push('|');
            }
        }
        Layout::Parsable2 => s.push_str(&values.join("|")),
    }
    s.push('\n');
    s
}

/// Picks the rows for `o` from `jobs`: `(stdout, stderr)`.
pub fn render(o: &Opts, jobs: &[Job]) -> (String, String) {
    let mut out = String::new();
    let mut err = String::new();
    if !o.noheader {
        let names: Vec<String> = o.fields.iter().map(|f| f.name.to_string()).collect();
        out.push_str(&line(o, &names));
        if o.layout == Layout::Table {
            for f in &o.fields {
                out.push_str(&"-".repeat(f.width));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for (id, sel) in &o.jobs {
        let Some(job) = jobs.iter().find(|j| j.id == *id) else {
            err.push_str(&format!("sstat: error: couldn't get steps for job {id}\n"));
            continue;
        };
        // `-a` lists every running step, the batch step too; without it the first
        // numbered one.
        let running: Vec<&StepRecord> = job
            .steps
            .iter()
            .filter(|s| s.state == JobState::Running && (o.all_steps || s.detail.is_some()))
            .collect();
        let rows: Vec<&StepRecord> = match sel {
            Some(s) => {
                let want = s.as_record_id();
                job.steps
                    .iter()
                    .filter(|r| r.id == want && r.state == JobState::Running)
                    .collect()
            }
            None if o.all_steps => running,
            None => running.into_iter().take(1).collect(),
        };
        if rows.is_empty() {
            err.push_str(&format!("sstat: error: no steps running for job {id}\n"));
        }
        for r in rows {
            let vals: Vec<String> = o.fields.iter().map(|f| value(f.name, job, r)).collect();
            out.push_str(&line(o, &vals));
        }
    }
    (out, err)
}

/// Runs `sstat` with its full argv.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let argv: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let o = match parse_args(&argv) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    if o.version {
        println!("slurm {}", crate::config::DEFAULT_SLURM_VERSION);
        return ExitCode::SUCCESS;
    }
    if o.help {
        let entries = super::help::from_getopt(SPECS);
        print!(
            "{}",
            super::help::help("sstat [OPTIONS] -j job[.stepid]", &entries, "")
        );
        return ExitCode::SUCCESS;
    }
    if o.usage {
        print!(
            "{}",
            super::help::usage("sstat", &super::help::from_getopt(SPECS), "")
        );
        return ExitCode::SUCCESS;
    }
    if o.helpformat {
        let names: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
        for chunk in names.chunks(4) {
            let cols: Vec<String> = chunk.iter().map(|f| format!("{f:<19}")).collect();
            println!("{}", cols.join(" ").trim_end());
        }
        return ExitCode::SUCCESS;
    }
    if o.jobs.is_empty() {
        eprintln!("sstat: error: You didn't give me any jobs to stat.");
        return ExitCode::from(1);
    }
    let mut c = match Client::connect() {
        Ok((c, _)) => c,
        Err(e) => {
            eprintln!("sstat: error: {e}");
            return ExitCode::from(1);
        }
    };
    let filter = JobFilter {
        ids: o.jobs.iter().map(|(j, _)| *j).collect(),
        ..JobFilter::default()
    };
    let jobs = match c.request(&Request::Jobs(filter)) {
        Ok(Response::Jobs { jobs, .. }) => jobs,
        Ok(Response::Error(e)) => {
            eprintln!("sstat: error: {e}");
            return ExitCode::from(1);
        }
        Ok(_) | Err(_) => {
            eprintln!("sstat: error: Unable to contact slurm controller (connect failure)");
            return ExitCode::from(1);
        }
    };
    let (out, err) = render(&o, &jobs);
    print!("{out}");
    eprint!("{err}");
    if err.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ExitStatus;
    use crate::model::job::StepDetail;

    fn job_with_step() -> Job {
        let mut j = crate::model::job::sample_running(12, "j", vec![2]);
        let usage = StepUsage::from_tasks(
            "node01",
            &[
                crate::model::step::TaskSample {
                    rank: 0,
                    rss_kib: 1000,
                    vsize_kib: 5000,
                    cpu_secs: 3.0,
                    ..Default::default()
                },
                crate::model::step::TaskSample {
                    rank: 1,
                    rss_kib: 3000,
                    vsize_kib: 7000,
                    cpu_secs: 1.0,
                    ..Default::default()
                },
            ],
        );
        j.steps.push(StepRecord {
            id: "0".into(),
            name: "sleep".into(),
            state: JobState::Running,
            exit: ExitStatus::default(),
            start_time: 1003,
            end_time: None,
            nodes: "node01".into(),
            ncpus: 2,
            ntasks: 2,
            max_rss_kib: 0,
            cpu_secs: 0.0,
            detail: Some(Box::new(StepDetail {
                usage,
                ..StepDetail::default()
            })),
            usage: None,
        });
        j
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parsable_rows_of_a_running_step() {
        let o = parse_args(&args(&[
            "-j",
            "12",
            "-P",
            "-o",
            "jobid,maxrss,maxrsstask,averss,ntasks,avecpu,mincputask",
        ]))
        .unwrap();
        let (out, err) = render(&o, &[job_with_step()]);
        assert_eq!(err, "");
        assert_eq!(
            out,
            "JobID|MaxRSS|MaxRSSTask|AveRSS|NTasks|AveCPU|MinCPUTask\n12.0|3000K|1|2000K|2|00:00:02|1\n"
        );
    }

    #[test]
    fn missing_steps_and_bad_input() {
        let o = parse_args(&args(&["-n", "-j", "12.5"])).unwrap();
        let (out, err) = render(&o, &[job_with_step()]);
        assert_eq!(out, "");
        assert_eq!(err, "sstat: error: no steps running for job 12\n");
        assert!(
            parse_args(&args(&["-j", "abc"]))
                .unwrap_err()
                .contains("Bad job/step")
        );
        assert!(
            parse_args(&args(&["-j", "1", "-o", "bogus"]))
                .unwrap_err()
                .contains("Invalid field")
        );
        let o = parse_args(&args(&["-j", "12"])).unwrap();
        let (out, _) = render(&o, &[job_with_step()]);
        let mut lines = out.lines();
        assert!(lines.next().unwrap().starts_with("JobID         MaxVMSize"));
        let row = lines.nth(1).unwrap();
        assert!(
            row.starts_with(&format!("{:<12} {:>10} ", "12.0", "7000K")),
            "{row}"
        );
    }
}
