//! System mode: the controller runs as root and a job submitted by another user runs as
//! that user (uid, gid, supplementary groups), with output files created by that user
//! under the user's umask; the user may act only on their own jobs.
//!
//! Needs root (to create a throw-away user with `useradd`) and `setpriv`; skipped with
//! a printed reason otherwise.

use crate::harness::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output};

/// A user and an extra group made for one test, removed on drop.
struct TempUser {
    name: String,
    group: String,
    uid: u32,
    gid: u32,
    extra_gid: u32,
}

impl TempUser {
    fn create() -> Result<TempUser, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("{}x{n}", std::process::id());
        let name = format!("sluit{tag}");
        let group = format!("sluig{tag}");
        let run = passwd_tool;
        run(Command::new("groupadd").arg(&group))?;
        let made =
            run(Command::new("useradd").args(["-M", "-U", "-G", &group, "-s", "/bin/sh", &name]));
        if let Err(e) = made {
            let _ = Command::new("groupdel").arg(&group).output();
            return Err(e);
        }
        let user = nix::unistd::User::from_name(&name)
            .ok()
            .flatten()
            .ok_or("new user not found")?;
        let extra = nix::unistd::Group::from_name(&group)
            .ok()
            .flatten()
            .ok_or("new group not found")?;
        Ok(TempUser {
            name,
            group,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            extra_gid: extra.gid.as_raw(),
        })
    }

    /// A front-end run as this user (real and effective ids, groups from
    /// /etc/group), with `umask`, in `dir`.
    fn run(&self, c: &TestCluster, dir: &std::path::Path, umask: &str, args: &[&str]) -> Output {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={}", self.uid),
            &format!("--regid={}", self.gid),
            "--init-groups",
            "--",
            "/bin/sh",
            "-c",
            &format!("umask {umask}; exec \"$@\""),
            "sh",
        ])
        .args(args)
        .env_clear()
        .env("SLUICE_CONF", &c.conf)
        .env("PATH", format!("{}:/usr/bin:/bin", c.bin.display()))
        .env("HOME", dir)
        .env("USER", &self.name)
        .current_dir(dir);
        cmd.output().expect("setpriv")
    }
}

impl TempUser {
    /// `sbatch --parsable -o /dev/null ARGS --wrap true` as this user; the job id.
    fn submit(&self, c: &TestCluster, dir: &std::path::Path, args: &[&str]) -> String {
        let mut all = vec!["sbatch", "--parsable", "-o", "/dev/null"];
        all.extend_from_slice(args);
        all.extend(["--wrap", "true"]);
        let o = self.run(c, dir, "022", &all);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).trim().to_string()
    }
}

/// Runs a shadow-utils command (useradd, usermod…); these take a lock on /etc/passwd
/// that another test process may hold for a moment, so a locked attempt is retried.
fn passwd_tool(cmd: &mut Command) -> Result<(), String> {
    for _ in 0..50 {
        let o = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if o.status.success() {
            return Ok(());
        }
        if o.status.code() != Some(10) && !stderr(&o).contains("lock") {
            return Err(format!("{cmd:?}: {}", stderr(&o)));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(format!("{cmd:?}: /etc/passwd stays locked"))
}

impl Drop for TempUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        let _ = Command::new("groupdel").arg(&self.group).output();
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root (useradd and the setuid path need it)".into());
    }
    for tool in ["useradd", "groupadd", "setpriv"] {
        let found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(tool).exists());
        if !found {
            return Some(format!("{tool} not found"));
        }
    }
    None
}

/// A cluster and `n` throw-away users who can run its front-ends, or `None` (the
/// reason printed, prefixed by `what`) where that cannot be had. The test dir is
/// private (0700) by default; the users must reach the front-ends, the config and
/// the socket, as on a real system.
fn cluster_and_users(what: &str, n: usize) -> Option<(TestCluster, Vec<TempUser>)> {
    if let Some(why) = skip_reason() {
        eprintln!("skipping {what}: {why}");
        return None;
    }
    let c = TestCluster::start();
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut users = Vec::new();
    for _ in 0..n {
        match TempUser::create() {
            Ok(u) => users.push(u),
            Err(e) => {
                eprintln!("skipping {what}: cannot create a user: {e}");
                return None;
            }
        }
    }
    let probe = users[0].run(
        &c,
        std::path::Path::new("/"),
        "022",
        &["sluice", "--version"],
    );
    if !probe.status.success() {
        eprintln!(
            "skipping {what}: the test binary is not executable by another user ({})",
            stderr(&probe)
        );
        return None;
    }
    Some((c, users))
}

#[test]
fn a_job_runs_as_the_submitting_user_with_their_groups_and_umask() {
    let Some((c, users)) = cluster_and_users("system-mode user test", 1) else {
        return;
    };
    let u = &users[0];
    let home = c.dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    nix::unistd::chown(
        &home,
        Some(nix::unistd::Uid::from_raw(u.uid)),
        Some(nix::unistd::Gid::from_raw(u.gid)),
    )
    .unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();

    let o = u.run(
        &c,
        &home,
        "027",
        &[
            "sbatch",
            "--parsable",
            "-o",
            "ids-%u-%j.out",
            "--wrap",
            "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); echo user=$SLURM_JOB_USER/$SLURM_JOB_UID/$SLURM_JOB_GID; umask; touch made-by-job",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let id: u32 = stdout(&o).trim().parse().unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out_path = home.join(format!("ids-{}-{id}.out", u.name));
    let out = std::fs::read_to_string(&out_path).unwrap();
    let mut lines = out.lines();
    let ids = lines.next().unwrap();
    assert!(
        ids.starts_with(&format!("uid={} gid={} groups=", u.uid, u.gid)),
        "{out}"
    );
    let groups: Vec<u32> = ids
        .split("groups=")
        .nth(1)
        .unwrap()
        .split(' ')
        .map(|g| g.parse().unwrap())
        .collect();
    assert!(
        groups.contains(&u.gid) && groups.contains(&u.extra_gid),
        "{ids}"
    );
    assert!(!groups.contains(&0), "root's group leaked: {ids}");
    assert_eq!(
        lines.next(),
        Some(format!("user={}/{}/{}", u.name, u.uid, u.gid).as_str())
    );
    assert_eq!(lines.next(), Some("0027"));
    // The output file and what the job made belong to the user, made under its umask.
    for p in [out_path.clone(), home.join("made-by-job")] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (u.uid, u.gid), "{}", p.display());
        assert_eq!(m.mode() & 0o777, 0o640, "{}", p.display());
    }
    // squeue and scontrol name the user.
    assert_eq!(
        c.ok(
            "squeue",
            &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%u"]
        ),
        format!("{}\n", u.name)
    );
    assert!(
        c.show_field(id, "UserId")
            .starts_with(&format!("{}({})", u.name, u.uid))
    );

    // Output is opened as the user: a root-only directory is refused (launch failure,
    // nothing created), as Slurm does.
    let locked = c.dir.path().join("rootonly");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = locked.join("x.out");
    let o = u.run(
        &c,
        &home,
        "022",
        &[
            "sbatch",
            "--parsable",
            "-o",
            target.to_str().unwrap(),
            "--wrap",
            "echo hi",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let denied: u32 = stdout(&o).trim().parse().unwrap();
    assert_eq!(c.wait_done(denied), "FAILED");
    assert_eq!(c.show_field(denied, "ExitCode"), "0:53");
    assert!(!target.exists());
}

#[test]
fn users_act_only_on_their_own_jobs() {
    let Some((c, users)) = cluster_and_users("system-mode permission test", 1) else {
        return;
    };
    let u = &users[0];
    let dir = std::path::Path::new("/tmp");
    let roots = c.submit(&["-H", "--wrap", "true"]);
    let mine: u32 = u
        .submit(&c, dir, &["-H", "--begin=now+1hour"])
        .parse()
        .unwrap();
    let as_user = |args: &[&str]| u.run(&c, dir, "022", args);

    // Not someone else's job.
    let o = as_user(&["scancel", &roots.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("scancel: error: Kill job error on job id {roots}: Access/permission denied\n")
    );
    let o = as_user(&["scontrol", "release", &roots.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "Access/permission denied for job {roots}\nslurm_suspend error: Access/permission denied\n"
        )
    );
    let o = as_user(&["scontrol", "update", &format!("JobId={roots}"), "JobName=x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Access/permission denied"),
        "{}",
        stderr(&o)
    );
    let o = as_user(&[
        "scontrol",
        "update",
        &format!("NodeName={}", c.node()),
        "State=DRAIN",
        "Reason=x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Access/permission denied"),
        "{}",
        stderr(&o)
    );
    assert_eq!(c.state(roots).as_deref(), Some("PENDING"));

    // An admin hold by root cannot be released by the owner; a user hold can.
    c.ok("scontrol", &["hold", &mine.to_string()]);
    let o = as_user(&["scontrol", "release", &mine.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "Access/permission denied for job {mine}\nslurm_suspend error: Access/permission denied\n"
        )
    );
    c.ok("scontrol", &["release", &mine.to_string()]);
    c.ok("scontrol", &["uhold", &mine.to_string()]);
    let o = as_user(&["scontrol", "release", &mine.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &mine.to_string(), "-o", "%r"]),
        "BeginTime\n"
    );
    // A pending job's own time limit may be raised up to the partition's MaxTime
    // (1 hour), as Slurm's _update_job allows; past it, and a negative nice, are for
    // operators.
    let limited: u32 = u.submit(&c, dir, &["-H", "-t", "5"]).parse().unwrap();
    let update = |limit: &str| {
        as_user(&[
            "scontrol",
            "update",
            &format!("JobId={limited}"),
            &format!("TimeLimit={limit}"),
        ])
    };
    let o = update("10");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        c.field(&limited.to_string(), "TimeLimit").as_deref(),
        Some("00:10:00")
    );
    let o = update("2:00:00");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = as_user(&["sbatch", "--nice=-5", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // scancel -u of everyone's jobs touches only the caller's own.
    let o = as_user(&["scancel", "--me"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(c.state(limited).as_deref(), Some("CANCELLED"));
    assert_eq!(c.state(mine).as_deref(), Some("CANCELLED"));
    assert_eq!(c.state(roots).as_deref(), Some("PENDING"));
    // sacct shows a user their own jobs.
    let o = as_user(&["sacct", "-n", "-X", "-P", "-o", "JobID,User"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = stdout(&o);
    assert!(rows.contains(&format!("{mine}|{}\n", u.name)), "{rows}");
    assert!(!rows.contains(&format!("{roots}|")), "{rows}");
}

#[test]
fn coordinators_manage_the_users_and_jobs_of_their_accounts() {
    let Some((c, users)) = cluster_and_users("coordinator test", 2) else {
        return;
    };
    let (coord, member) = (&users[0], &users[1]);
    let dir = std::path::Path::new("/tmp");
    for args in [
        vec!["-i", "add", "account", "lab"],
        vec!["-i", "add", "account", "sub", "parent=lab"],
        vec!["-i", "add", "account", "other"],
        vec!["-i", "add", "user", &member.name, "account=sub"],
        vec!["-i", "add", "user", &coord.name, "account=other"],
    ] {
        c.ok("sacctmgr", &args);
    }
    let names = format!("names={}", coord.name);
    let out = c.ok(
        "sacctmgr",
        &["-i", "add", "coordinator", "account=lab", &names],
    );
    assert_eq!(
        out,
        format!(
            " Adding Coordinator User(s)\n  {}\n To Account(s) and all sub-accounts\n  lab\n",
            coord.name
        )
    );
    assert_eq!(
        c.ok(
            "sacctmgr",
            &["-n", "-P", "show", "user", &coord.name, "withcoord"]
        ),
        format!("{}|other|None|lab,sub\n", coord.name)
    );
    assert_eq!(
        c.ok(
            "sacctmgr",
            &["-n", "-P", "show", "account", "sub", "withcoord"]
        ),
        format!("sub|sub|lab|{}\n", coord.name)
    );

    // The member's job is the coordinator's to hold, release, update and cancel.
    let job = member.submit(&c, dir, &["--begin=now+1hour"]);
    let as_coord = |args: &[&str]| coord.run(&c, dir, "022", args);
    for args in [
        vec!["scontrol", "hold", &job],
        vec!["scontrol", "release", &job],
    ] {
        let o = as_coord(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = as_coord(&["scontrol", "update", &format!("JobId={job}"), "JobName=x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(c.field(&job, "JobName").as_deref(), Some("x"));
    // sacctmgr: users of lab's accounts yes, of `other` (not coordinated) no.
    let o = as_coord(&["sacctmgr", "add", "user", "helper", "account=sub"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = as_coord(&["sacctmgr", "add", "user", "helper", "account=other"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("privilege"), "{}", stderr(&o));
    // The member coordinates nothing: no changes, and not the coordinator's jobs.
    let o = member.run(
        &c,
        dir,
        "022",
        &["sacctmgr", "add", "user", "x", "account=sub"],
    );
    assert_eq!(o.status.code(), Some(1));
    let o = as_coord(&["scancel", &job]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(c.state(job.parse().unwrap()).as_deref(), Some("CANCELLED"));

    // Rights go by the name the OS gives the uid at each request: renamed, the
    // coordinator is an ordinary user at once (the controller kept the old name
    // before); renamed back, a coordinator again.
    let held = member.submit(&c, dir, &["-H"]);
    let renamed = format!("{}r", coord.name);
    passwd_tool(Command::new("usermod").args(["-l", &renamed, &coord.name])).unwrap();
    let while_renamed = as_coord(&["scontrol", "release", &held]);
    passwd_tool(Command::new("usermod").args(["-l", &coord.name, &renamed])).unwrap();
    assert_eq!(
        while_renamed.status.code(),
        Some(1),
        "{}",
        stderr(&while_renamed)
    );
    assert!(
        stderr(&while_renamed).contains("Access/permission denied"),
        "{}",
        stderr(&while_renamed)
    );
    let o = as_coord(&["scontrol", "release", &held]);
    assert!(o.status.success(), "{}", stderr(&o));
    c.ok("scancel", &[&held]);

    // Once removed, the coordinator is an ordinary user again.
    let out = c.ok(
        "sacctmgr",
        &["-i", "delete", "coordinator", &names, "account=lab"],
    );
    assert!(
        out.contains(" Removed Coordinators (sub accounts not listed)...\n"),
        "{out}"
    );
    let job2 = member.submit(&c, dir, &["-H"]);
    let o = as_coord(&["scancel", &job2]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// A test cluster, a throw-away user, and a directory everyone may write (`home`), or
/// `None` (with a printed reason naming the `test`) where the test cannot run.
fn cluster_with_user(test: &str) -> Option<(TestCluster, TempUser, std::path::PathBuf)> {
    if let Some(why) = skip_reason() {
        eprintln!("skipping system-mode {test} test: {why}");
        return None;
    }
    let c = TestCluster::start();
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let u = match TempUser::create() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("skipping system-mode {test} test: cannot create a user: {e}");
            return None;
        }
    };
    let home = c.dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
    let probe = u.run(&c, &home, "022", &["sluice", "--version"]);
    if !probe.status.success() {
        eprintln!(
            "skipping system-mode {test} test: the test binary is not executable by another user ({})",
            stderr(&probe)
        );
        return None;
    }
    Some((c, u, home))
}

/// A job whose user no longer exists on the node by the time it starts fails at launch
/// (FAILED, JobLaunchFailure, 0:53) with slurmstepd's reason in its error file, rather
/// than running as a uid without a user.
#[test]
fn a_job_of_a_user_unknown_on_the_node_fails_at_launch() {
    let Some((c, u, home)) = cluster_with_user("unknown-user") else {
        return;
    };
    // The user's output file exists already (the note goes only into a file of theirs).
    let out = home.join("gone.out");
    std::fs::write(&out, "").unwrap();
    nix::unistd::chown(
        &out,
        Some(nix::unistd::Uid::from_raw(u.uid)),
        Some(nix::unistd::Gid::from_raw(u.gid)),
    )
    .unwrap();
    let o = u.run(
        &c,
        &home,
        "022",
        &[
            "sbatch",
            "--parsable",
            "-H",
            "-o",
            "gone.out",
            "--open-mode=append",
            "--wrap",
            "touch ran",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let id: u32 = stdout(&o).trim().parse().unwrap();
    let gone = Command::new("userdel").arg(&u.name).output().unwrap();
    assert!(gone.status.success(), "{}", stderr(&gone));
    c.ok("scontrol", &["release", &id.to_string()]);
    assert_eq!(c.wait_done(id), "FAILED");
    assert_eq!(c.show_field(id, "ExitCode"), "0:53");
    assert_eq!(c.show_field(id, "Reason"), "JobLaunchFailure");
    assert!(!home.join("ran").exists());
    let node = c.node();
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        format!(
            "slurmstepd-{node}: error: Launch failed for uid {}: User not found on host\n",
            u.uid
        )
    );
}

/// `srun -Z` is for root and the controller's user only: another user's launch is
/// refused on the node as slurmd refuses it, and nothing runs.
#[test]
fn no_allocate_is_refused_to_other_users() {
    let Some((c, u, home)) = cluster_with_user("-Z") else {
        return;
    };
    let node = c.node();
    let o = u.run(
        &c,
        &home,
        "022",
        &["srun", "-Z", "-w", &node, "touch", "ran"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(
        stderr(&o),
        format!(
            "srun: do not allocate resources\n\
             srun: error: Task launch for StepId={}.0 failed on node {node}: Invalid job credential\n\
             srun: error: Application launch failed: Invalid job credential\n\
             srun: Job step aborted\n",
            0xffff_0000u32
        )
    );
    assert!(!home.join("ran").exists());
    assert!(c.job_ids().is_empty());
}
