//! Every front-end's definition as one clap [`Command`], the source of the generated
//! man pages (`man/*.1`) and shell completions (`completions/{bash,zsh,fish}`).
//!
//! The options come from the definitions the parsers use: clap derive for sbatch,
//! srun, salloc, squeue and sinfo; the getopt tables, through [`getopt::command`],
//! for the others. What a page says beyond the options (what the command does, its
//! operands, sluice's differences) is written here, once per command.
//!
//! The generated files are committed; a test (`cli::docs::tests`) fails when they
//! drift from the definitions. Regenerate them with
//! `SLUICE_REGEN=1 cargo test --lib cli::docs`.

use super::getopt::{self, OptSpec};
use clap::{Arg, ArgAction, Command, CommandFactory};

/// One command's page: its name, a one-line summary (the man page's NAME line), what
/// it does (DESCRIPTION, paragraphs separated by blank lines), and its operands.
struct Page {
    name: &'static str,
    description: &'static str,
    /// The operands' name for the SYNOPSIS (`JOBID`), `None` when the definition
    /// already has its positional arguments (the clap-derived commands) or there are
    /// none.
    operands: Option<&'static str>,
    /// Text after the options (an EXTRA section), e.g. the list of subcommands.
    after: Option<String>,
}

/// What each command page says beyond its options, in [`super::LINKED_COMMANDS`] order.
fn pages() -> Vec<Page> {
    let page = |name, description, operands| Page {
        name,
        description,
        operands,
        after: None,
    };
    vec![
        page(
            "sbatch",
            "sbatch submits a batch script to the sluice controller, which queues it and \
             runs it as a job once the resources it asks for are free. The script is read \
             from the file named, from standard input when none is named, or made from \
             --wrap. Lines starting with #SBATCH before the first command give options \
             too. Where an option is given more than once, the command line wins, then \
             the SBATCH_* environment variables Slurm reads, then the #SBATCH lines.\n\n\
             On success sbatch prints \"Submitted batch job ID\" (only the id with \
             --parsable) and exits 0; a refused submission prints Slurm's message and \
             exits non-zero. The job's output goes to slurm-%j.out in the submission \
             directory unless --output says otherwise.\n\n\
             Options that sluice does not implement yet are refused with \"is not \
             supported yet by sluice\" rather than ignored, so that a job never loses a \
             request silently.",
            None,
        ),
        page(
            "srun",
            "srun runs a parallel job step: the command given, once per task, on the \
             nodes of an allocation. Inside an allocation (an sbatch script or salloc \
             shell, where SLURM_JOB_ID is set) the step uses that job's resources; \
             elsewhere srun first asks for a new allocation with the options given and \
             releases it when the step ends.\n\n\
             Standard output and error of every task come back to srun (labelled with \
             --label); standard input goes to task 0. srun exits with the highest exit \
             status of the tasks, or reports the signal that ended one.",
            None,
        ),
        page(
            "salloc",
            "salloc obtains a job allocation, runs a command in it (by default the \
             user's shell), and releases the allocation when that command exits. The \
             command runs on the submitting host with SLURM_JOB_ID and the other \
             SLURM_* variables set, so that srun inside it launches steps on the \
             allocated nodes.",
            None,
        ),
        page(
            "squeue",
            "squeue lists the jobs in the sluice queue (pending, running, and those \
             finished within MinJobAge), or with --steps their running steps. The \
             columns are chosen with --format (%-fields: %i, %.18i, %-8u) or \
             --Format (names with optional width), and rows are selected by user, \
             account, partition, state, job id or name. --json prints Slurm's JSON \
             shape.",
            None,
        ),
        page(
            "scancel",
            "scancel cancels or signals jobs and job steps: those named by id \
             (JOBID, JOBID_TASK for an array task, JOBID.STEP for a step), or those \
             matched by the filter options (--user, --state, --partition, --name, …). \
             With --signal the processes are sent that signal instead of the job \
             being cancelled.",
            Some("job_id[_array_id][.step_id]"),
        ),
        page(
            "sinfo",
            "sinfo shows the partitions and nodes of the cluster: by default one line \
             per partition and node state with the node count and names, or one line \
             per node with --Node. The columns follow --format (%-fields) or --Format \
             (names), and rows are selected by partition, node and state. \
             --reservation lists the reservations instead.",
            None,
        ),
        Page {
            name: "scontrol",
            description: "scontrol views and changes the state of the cluster: jobs, steps, \
                 nodes, partitions, reservations, licenses and the controller's \
                 configuration. A command is given as words after the options; \
                 without one, scontrol reads commands from standard input, one per \
                 line.",
            operands: Some("COMMAND"),
            after: Some(command_list("Commands", super::scontrol::COMMANDS)),
        },
        page(
            "sacct",
            "sacct shows accounting records of jobs and their steps from the sluice \
             database: by default the user's jobs since midnight today. The window is \
             set with --starttime and --endtime (Slurm's time forms: now-1hour, \
             today, 2026-12-24T18:00, MM/DD, …), the columns with --format, and the \
             output is made machine-readable with --parsable2 or --json.",
            None,
        ),
        page(
            "sstat",
            "sstat shows the live resource usage (CPU time, memory, I/O) of running \
             job steps, as sampled by their step daemons. Steps are named with --jobs \
             (JOBID for the job's steps, JOBID.STEP for one).",
            None,
        ),
        page(
            "sprio",
            "sprio shows the priority of pending jobs and the weighted factors it is \
             made of (age, fair-share, job size, partition, QOS, nice), as the \
             multifactor priority plugin computes them. --weights shows the \
             configured weights.",
            None,
        ),
        page(
            "sdiag",
            "sdiag shows the controller's statistics: server threads and queue \
             lengths, jobs submitted, started, completed and failed, and the main and \
             backfill schedulers' cycle counts and times.",
            None,
        ),
        page(
            "sshare",
            "sshare shows the fair-share tree: for each account and user association \
             its shares, normalised shares, raw and effective usage, and the \
             resulting fair-share factor.",
            None,
        ),
        Page {
            name: "sacctmgr",
            description: "sacctmgr views and changes the accounting database: clusters, \
                 accounts, users, their associations (limits and shares), and QOS. A \
                 command (add, modify, delete, show, dump, load) is given as words \
                 after the options; changes are committed after a confirmation, \
                 unless --immediate is given.",
            operands: Some("COMMAND"),
            after: None,
        },
        page(
            "sreport",
            "sreport prints usage reports from the accounting records: cluster \
             utilization, usage by account and user, and top users, for a period set \
             with start= and end=.",
            Some("REPORT"),
        ),
        page(
            "seff",
            "seff reports how efficiently a finished job used what it was given: CPU \
             efficiency (CPU time over core-wall time) and memory efficiency (peak \
             memory over the memory requested), from the job's accounting record.",
            Some("JOBID"),
        ),
    ]
}

/// A section listing `items` (`name: what it does`) under `title`, as text for the
/// man page (one paragraph per item).
fn command_list(title: &str, items: &[(&str, &str)]) -> String {
    let mut s = format!("{title}:");
    for (c, what) in items {
        s.push_str(&format!("\n\n{c}: {what}"));
    }
    s
}

/// The getopt table of a command that is parsed by [`getopt::parse`].
fn table(name: &str) -> Option<&'static [OptSpec]> {
    Some(match name {
        "scancel" => super::scancel::SPECS,
        "scontrol" => super::scontrol::SPECS,
        "sacct" => super::sacct::SPECS,
        "sstat" => super::sstat::SPECS,
        "sprio" => super::sprio::SPECS,
        "sdiag" => super::sdiag::SPECS,
        "sshare" => super::sshare::SPECS,
        "sacctmgr" => super::sacctmgr::SPECS,
        "sreport" => super::sreport::SPECS,
        "seff" => super::seff::SPECS,
        _ => return None,
    })
}

/// The full definition of Slurm command `name` (one of [`super::LINKED_COMMANDS`]),
/// with its summary and description; `None` for another name.
pub fn command(name: &str) -> Option<Command> {
    let p = pages().into_iter().find(|p| p.name == name)?;
    let about = super::COMMAND_HELP
        .iter()
        .find(|(c, _)| *c == name)
        .map(|(_, a)| *a)?;
    let cmd = match name {
        "sbatch" => crate::jobspec::opts::SbatchArgs::command(),
        "srun" => crate::jobspec::opts::SrunArgs::command(),
        "salloc" => crate::jobspec::opts::SallocArgs::command(),
        "squeue" => super::squeue::Args::command(),
        "sinfo" => super::sinfo::Args::command(),
        _ => getopt::command(p.name, table(name)?),
    };
    // Help texts mark names with backquotes, which a man page would show as such;
    // `--help` drops them too (`help::from_clap`).
    let mut cmd = cmd
        .mut_args(|a| match a.get_help().map(ToString::to_string) {
            Some(h) if h.contains('`') => a.help(h.replace('`', "")),
            _ => a,
        })
        .name(p.name)
        .bin_name(p.name)
        .about(about)
        .long_about(p.description);
    if let Some(ops) = p.operands {
        cmd = cmd.arg(
            Arg::new("operands")
                .value_name(ops)
                .num_args(0..)
                .action(ArgAction::Append),
        );
    }
    if let Some(after) = p.after {
        cmd = cmd.after_long_help(after);
    }
    Some(cmd)
}

/// `sluice` itself: its summary, the Slurm commands and roles as text (for its man
/// page), and, when `with_subcommands`, every Slurm command as a subcommand (for
/// completing `sluice sbatch --…`).
pub fn sluice_command(with_subcommands: bool) -> Command {
    let mut cmd = Command::new("sluice")
        .bin_name("sluice")
        .about("A Slurm-compatible workload manager in one binary")
        .long_about(
            "sluice is a workload manager that speaks Slurm: its commands (sbatch, srun, \
             squeue, …) take Slurm's options and print Slurm's output, so scripts and \
             tools written for Slurm run unchanged. One binary holds every role: the \
             Slurm commands (through symbolic links named after them, which install.sh \
             makes, or as sluice COMMAND), the controller that schedules and keeps \
             state, the node agents and the step supervisors.\n\n\
             Without a configuration, sluice runs in personal mode: the first command a \
             user runs starts a private controller for that user on this machine.",
        )
        .disable_help_subcommand(true)
        .after_long_help(format!(
            "{}\n\n{}",
            command_list(
                "Slurm commands (each has its own page)",
                super::COMMAND_HELP
            ),
            command_list("Roles and tools", super::ROLE_HELP)
        ));
    if with_subcommands {
        for c in super::LINKED_COMMANDS {
            cmd = cmd.subcommand(command(c).expect("every linked command has a page"));
        }
        for (c, what) in super::ROLE_HELP {
            cmd = cmd.subcommand(Command::new(*c).about(*what));
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// Every generated file, by its path in the repository.
    fn generated() -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let man = |cmd: Command| {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut buf)
                .expect("rendering into memory");
            buf
        };
        let mut completed: Vec<Command> = Vec::new();
        for c in super::super::LINKED_COMMANDS {
            let cmd = command(c).expect("every linked command has a page");
            out.insert(PathBuf::from(format!("man/{c}.1")), man(cmd.clone()));
            completed.push(cmd);
        }
        out.insert(PathBuf::from("man/sluice.1"), man(sluice_command(false)));
        completed.push(sluice_command(true));
        for mut cmd in completed {
            let name = cmd.get_name().to_string();
            for (shell, path) in [
                (Shell::Bash, format!("completions/bash/{name}")),
                (Shell::Zsh, format!("completions/zsh/_{name}")),
                (Shell::Fish, format!("completions/fish/{name}.fish")),
            ] {
                let mut buf = Vec::new();
                clap_complete::generate(shell, &mut cmd, name.clone(), &mut buf);
                out.insert(PathBuf::from(path), buf);
            }
        }
        out
    }

    /// The files now under `man/` and `completions/`.
    fn committed(root: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut dirs = vec![root.join("man"), root.join("completions")];
        while let Some(d) = dirs.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if let Ok(rel) = p.strip_prefix(root) {
                    found.push(rel.to_path_buf());
                }
            }
        }
        found
    }

    #[test]
    fn man_pages_and_completions_match_the_definitions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let want = generated();
        if std::env::var_os("SLUICE_REGEN").is_some() {
            for p in committed(root) {
                if !want.contains_key(&p) {
                    std::fs::remove_file(root.join(&p)).expect("removing a stale file");
                }
            }
            for (p, bytes) in &want {
                let path = root.join(p);
                std::fs::create_dir_all(path.parent().expect("a file in a directory"))
                    .expect("creating man/ or completions/");
                std::fs::write(&path, bytes).expect("writing a generated file");
            }
            return;
        }
        let mut drift: Vec<String> = want
            .iter()
            .filter(|(p, bytes)| std::fs::read(root.join(p)).ok().as_ref() != Some(*bytes))
            .map(|(p, _)| format!("{} differs or is missing", p.display()))
            .collect();
        drift.extend(
            committed(root)
                .into_iter()
                .filter(|p| !want.contains_key(p))
                .map(|p| format!("{} is not generated any more", p.display())),
        );
        drift.sort();
        assert!(
            drift.is_empty(),
            "man/ and completions/ do not match the command definitions:\n  {}\n\
             regenerate them with: SLUICE_REGEN=1 cargo test --lib cli::docs",
            drift.join("\n  ")
        );
    }

    #[test]
    fn every_command_has_a_page_with_its_options() {
        for c in super::super::LINKED_COMMANDS {
            let cmd = command(c).unwrap_or_else(|| panic!("{c} has no definition"));
            assert!(cmd.get_long_about().is_some(), "{c} has no description");
            let visible = cmd
                .get_arguments()
                .filter(|a| !a.is_positional() && !a.is_hide_set())
                .count();
            assert!(visible > 0, "{c} lists no options");
        }
        assert!(command("sluice-not-a-command").is_none());
        // The getopt adapter keeps the table's letters, value names and help.
        let scancel = command("scancel").unwrap();
        let signal = scancel
            .get_arguments()
            .find(|a| a.get_long() == Some("signal"))
            .expect("scancel --signal");
        assert_eq!(signal.get_short(), Some('s'));
        assert!(signal.get_action().takes_values());
    }

    #[test]
    fn the_sbatch_page_reads_as_a_man_page() {
        let mut buf = Vec::new();
        clap_mangen::Man::new(command("sbatch").unwrap())
            .render(&mut buf)
            .unwrap();
        let page = String::from_utf8(buf).unwrap();
        assert!(page.contains(".TH sbatch 1"), "no title");
        assert!(
            page.contains("sbatch \\- submit a batch script"),
            "no NAME line"
        );
        assert!(page.contains("Submitted batch job"), "no description");
        assert!(page.contains("\\-\\-time"), "--time is not listed");
    }
}
