//! Output and error files: the default `slurm-%j.out`, patterns (`%j %x %u %N %A %a %%`,
//! zero padding), split stdout/stderr, `--open-mode`, `--input`, and a missing output
//! directory.

use crate::harness::*;

#[test]
fn output_patterns_default_file_and_split_streams() {
    let c = TestCluster::start();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let node = c.node();
    let default = c.submit(&["--wrap", "echo out; echo err >&2"]);
    let named = c.submit(&["-J", "patjob", "-o", "%x-%j.out", "--wrap", "echo hi"]);
    let by_node = c.submit(&["-o", "%N-%j.out", "--wrap", "echo node"]);
    let by_user = c.submit(&["-o", "%u-%j.out", "--wrap", "echo user"]);
    let split = c.submit(&[
        "-o",
        "out-%j.txt",
        "-e",
        "err-%j.txt",
        "--wrap",
        "echo to-out; echo to-err >&2",
    ]);
    let spaced = c.submit(&[
        "-J",
        "with space",
        "-o",
        "%x.%j.%%.out",
        "--wrap",
        "echo spaced",
    ]);
    let padded = c.submit(&["-o", "pad-%4j-%3a-%A.out", "--wrap", "echo padded"]);
    let ids = [default, named, by_node, by_user, split, spaced, padded];
    for id in ids {
        assert_eq!(c.wait_done(id), "COMPLETED", "job {id}");
    }
    let read = |name: String| {
        std::fs::read_to_string(c.path(&name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    // stdout and stderr share the default file.
    assert_eq!(read(format!("slurm-{default}.out")), "out\nerr\n");
    assert_eq!(read(format!("patjob-{named}.out")), "hi\n");
    assert_eq!(read(format!("{node}-{by_node}.out")), "node\n");
    assert_eq!(read(format!("{user}-{by_user}.out")), "user\n");
    assert_eq!(read(format!("out-{split}.txt")), "to-out\n");
    assert_eq!(read(format!("err-{split}.txt")), "to-err\n");
    assert_eq!(read(format!("with space.{spaced}.%.out")), "spaced\n");
    // %a of a job that is not an array task is NO_VAL (4294967294); %A is the job id.
    assert_eq!(
        read(format!("pad-{padded:04}-4294967294-{padded}.out")),
        "padded\n"
    );
    // scontrol shows the expanded paths.
    assert_eq!(
        c.show_field(split, "StdErr"),
        c.path(&format!("err-{split}.txt")).display().to_string()
    );
    assert_eq!(
        c.show_field(default, "StdOut"),
        c.path(&format!("slurm-{default}.out"))
            .display()
            .to_string()
    );
}

#[test]
fn open_mode_truncates_by_default_and_appends_on_request() {
    let c = TestCluster::start();
    for f in ["om_append.out", "om_trunc.out", "om_default.out"] {
        std::fs::write(c.path(f), "previous\n").unwrap();
    }
    let a = c.submit(&[
        "-o",
        "om_append.out",
        "--open-mode=append",
        "--wrap",
        "echo appended",
    ]);
    let t = c.submit(&[
        "-o",
        "om_trunc.out",
        "--open-mode=truncate",
        "--wrap",
        "echo truncated",
    ]);
    let d = c.submit(&["-o", "om_default.out", "--wrap", "echo default"]);
    for id in [a, t, d] {
        assert_eq!(c.wait_done(id), "COMPLETED");
    }
    let read = |f: &str| std::fs::read_to_string(c.path(f)).unwrap();
    assert_eq!(read("om_append.out"), "previous\nappended\n");
    assert_eq!(read("om_trunc.out"), "truncated\n");
    assert_eq!(read("om_default.out"), "default\n");
    // The same from a directive.
    c.script(
        "app.sh",
        "#!/bin/sh\n#SBATCH -o om_append.out\n#SBATCH --open-mode=append\necho again\n",
    );
    let again = c.submit(&["app.sh"]);
    c.wait_done(again);
    assert_eq!(read("om_append.out"), "previous\nappended\nagain\n");
}

#[test]
fn input_file_and_missing_output_directory() {
    let c = TestCluster::start();
    std::fs::write(c.path("in.txt"), "line one\nline two\n").unwrap();
    let id = c.submit(&["-i", "in.txt", "--wrap", "wc -l"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.out")))
            .unwrap()
            .trim(),
        "2"
    );
    // Default stdin is /dev/null: a read ends at once.
    let id = c.submit(&["--wrap", "cat; echo done"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap(),
        "done\n"
    );
    // An output file in a missing directory: FAILED 0:53, JobLaunchFailure, nothing
    // written anywhere.
    let lost = c.submit(&["-o", "nosuchdir/x-%j.out", "--wrap", "echo lost"]);
    assert_eq!(c.wait_done(lost), "FAILED");
    assert_eq!(c.show_field(lost, "ExitCode"), "0:53");
    assert_eq!(c.show_field(lost, "Reason"), "JobLaunchFailure");
    assert!(!c.path("nosuchdir").exists());
    assert!(!c.path(&format!("slurm-{lost}.out")).exists());
}

/// A launch that fails says why as slurmstepd does, in the job's error file when that
/// one can be opened: a file that cannot be opened fails the launch (FAILED,
/// JobLaunchFailure, 0:53); an exec that fails exits with the errno (FAILED,
/// NonZeroExitCode, N:0) after slurmstepd's `execve()` line.
#[test]
fn launch_failures_are_said_in_the_error_file() {
    let c = TestCluster::start();
    let node = c.node();
    let w = c.work.display().to_string();
    // Output into a missing directory, errors into a file that can be opened.
    let id = c.submit(&[
        "-o",
        "nosuchdir/x-%j.out",
        "-e",
        "err-%j.txt",
        "--wrap",
        "echo lost",
    ]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "0:53");
    assert_eq!(c.show_field(id, "Reason"), "JobLaunchFailure");
    let r = c.ok(
        "squeue",
        &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T|%r"],
    );
    assert_eq!(r.trim(), "FAILED|JobLaunchFailure");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("err-{id}.txt"))).unwrap(),
        format!(
            "slurmstepd-{node}: error: Could not open stdout file {w}/nosuchdir/x-{id}.out: \
             No such file or directory\n"
        )
    );
    // An input file that does not exist.
    let id = c.submit(&["-i", "nosuch.in", "--wrap", "cat"]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "0:53");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap(),
        format!(
            "slurmstepd-{node}: error: Could not open stdin file {w}/nosuch.in: \
             No such file or directory\n"
        )
    );
    // A script whose interpreter does not exist.
    c.script("badinterp.sh", "#!/nonexistent/interp -x\necho hi\n");
    let id = c.submit(&["badinterp.sh"]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "2:0");
    assert_eq!(c.show_field(id, "Reason"), "NonZeroExitCode");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap(),
        format!(
            "slurmstepd-{node}: error: execve(): bad interpreter(/nonexistent/interp -x): \
             No such file or directory\n"
        )
    );
    // An interpreter that is not a program (exec format error).
    c.script("notaprogram", "just text\n");
    c.script("wrongformat.sh", &format!("#!{w}/notaprogram\necho hi\n"));
    let id = c.submit(&["wrongformat.sh"]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "8:0");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap();
    assert!(
        out.starts_with(&format!("slurmstepd-{node}: error: execve(): /"))
            && out.ends_with(": Exec format error\n"),
        "{out}"
    );
    let acct = c.ok(
        "sacct",
        &["-n", "-P", "-j", &id.to_string(), "-o", "State,ExitCode"],
    );
    assert_eq!(acct.lines().next(), Some("FAILED|8:0"), "{acct}");
    // The same for a step: srun says which task failed.
    c.script("badstep.sh", "#!/nonexistent/interp\necho hi\n");
    let (code, _, err) = c.fails("srun", &["./badstep.sh"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "slurmstepd-{node}: error: execve(): bad interpreter(/nonexistent/interp): \
             No such file or directory\n"
        )),
        "{err}"
    );
}
