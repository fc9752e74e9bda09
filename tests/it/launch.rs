//! Launch-time tolerance and step files of array tasks: an output directory created
//! just after sbatch returns (as submitit does) is waited for; `srun -o` patterns in an
//! array task expand from the task's array ids; a step file that cannot be opened is
//! said as slurmstepd says it, not as an exec failure.

use crate::harness::*;

#[test]
fn output_directory_created_after_submit_is_waited_for() {
    let c = TestCluster::start();
    // The directory is named by the job id, so it can only be made after sbatch returns.
    let id = c.submit(&[
        "-o",
        "sub-%j/out.txt",
        "-e",
        "sub-%j/err.txt",
        "--wrap",
        "echo made; echo e >&2",
    ]);
    std::fs::create_dir(c.path(&format!("sub-{id}"))).unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("sub-{id}/out.txt"))).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("sub-{id}/err.txt"))).unwrap(),
        "e\n"
    );
    // The same for a step's file: the step waits for the directory the job makes later.
    c.script(
        "late.sh",
        "#!/bin/sh\n(sleep 1; mkdir stepdir) &\nsrun -o stepdir/s-%j.out echo stepped\nwait\n",
    );
    let id = c.submit(&["-o", "late.out", "late.sh"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    assert_eq!(
        std::fs::read_to_string(c.path(&format!("stepdir/s-{id}.out"))).unwrap(),
        "stepped\n"
    );
}

#[test]
fn srun_patterns_in_array_tasks_and_unopenable_step_files() {
    let c = TestCluster::start();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let node = c.node();
    c.script(
        "arr.sh",
        "#!/bin/sh\necho $SLURM_JOB_ID > own-$SLURM_ARRAY_TASK_ID.id\n\
         srun -o 'x-%A_%a-%j-%s-%t-%n-%N-%u-%x-%J.out' echo hi\n",
    );
    let master = c.submit(&["--array=2-3", "-J", "arrjob", "-o", "arr-%a.out", "arr.sh"]);
    // Each task's step 0: %A_%a from the array, %j the task's own id (the task that
    // carries the master's id shows it twice).
    for task in [2, 3] {
        let own: u32 = c
            .wait_file(&format!("own-{task}.id"), |t| t.ends_with('\n'))
            .trim()
            .parse()
            .unwrap();
        let name = format!("x-{master}_{task}-{own}-0-0-0-{node}-{user}-arrjob-{own}.0.out");
        assert_eq!(c.wait_file(&name, |t| t.ends_with('\n')), "hi\n");
    }
    // A step file whose directory never appears: slurmstepd's io-setup line.
    let (_, _, err) = c.fails("srun", &["-o", "/nonexistent-dir/x.out", "true"]);
    assert!(
        err.contains(&format!(
            "slurmstepd-{node}: error: Could not open stdout file /nonexistent-dir/x.out: \
             No such file or directory"
        )) && !err.contains("execve()"),
        "{err}"
    );
}

/// Options sluice accepts without acting on print nothing at default verbosity (as
/// Slurm, whose tools merge stderr into stdout and parse it); -v says so.
#[test]
fn ignored_options_are_silent_unless_verbose() {
    let c = TestCluster::start();
    let quiet = [
        "--mail-type=END",
        "--mail-user=someone",
        "--wckey=w",
        "--get-user-env",
        "--acctg-freq=30",
    ];
    let mut a: Vec<&str> = quiet.to_vec();
    a.extend(["--wrap", "true"]);
    let o = c.run("sbatch", &a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    a.insert(0, "-v");
    let o = c.run("sbatch", &a);
    assert!(
        stderr(&o).contains("--mail-type is ignored by sluice"),
        "{}",
        stderr(&o)
    );
    let mut s: Vec<&str> = quiet.to_vec();
    s.push("true");
    let o = c.run("srun", &s);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    s.insert(0, "-v");
    let o = c.run("srun", &s);
    assert!(
        stderr(&o).contains("--wckey is ignored by sluice"),
        "{}",
        stderr(&o)
    );
    // srun's own: --wait (-W) and --preserve-env (-E).
    let o = c.run("srun", &["--wait=5", "-E", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let o = c.run("srun", &["-v", "--wait=5", "-E", "true"]);
    for w in ["--wait is ignored", "--preserve-env is ignored"] {
        assert!(stderr(&o).contains(w), "{w}: {}", stderr(&o));
    }
    // salloc's: --bell, --no-bell, --kill-command; salloc's own lines stay.
    let o = c.run("salloc", &["--bell", "-K", "--mail-type=END", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Granted job allocation"),
        "{}",
        stderr(&o)
    );
    let o = c.run(
        "salloc",
        &["-v", "--no-bell", "-K", "--mail-type=END", "true"],
    );
    for w in [
        "--no-bell is ignored",
        "--kill-command is ignored",
        "--mail-type is ignored",
    ] {
        assert!(stderr(&o).contains(w), "{w}: {}", stderr(&o));
    }
}
