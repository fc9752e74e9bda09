//! Isolation of batch jobs on this machine's cgroups (issue 5): cores, memory with OOM
//! reporting, and killing every descendant. The cgroup tests skip, saying why, where no
//! cgroup hierarchy is writable; the no-cgroup fallback is tested everywhere.

use crate::harness::{Setup, TestCluster, wait_until};
use sluice::config::CgroupConf;
use sluice::stepd::isolate::{self, Backend, Scope};
use std::time::Duration;

/// Whether stepd will find a writable cgroup hierarchy for `conf`; prints why not.
fn cgroups_usable(conf: &CgroupConf) -> bool {
    let m = isolate::detect(conf, Scope::batch(&conf.root, 0, 0));
    if m.backend() == Backend::None {
        eprintln!("skipped: no writable cgroup hierarchy: {:?}", m.degraded());
        return false;
    }
    true
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let st = s[s.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_string();
            Some(st != "Z" && st != "X")
        })
        .unwrap_or(false)
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn cpuset_is_read_back_from_proc_self_status_inside_a_job() {
    let c = TestCluster::start_with(Setup {
        cgroup: "ConstrainCores = true",
        ..Setup::default()
    });
    if !cgroups_usable(&c.cgroup) {
        return;
    }
    if online_cpus() < 2 {
        eprintln!("skipped: one CPU cannot show confinement");
        return;
    }
    let script = "#!/bin/sh\n\
        grep Cpus_allowed_list /proc/self/status > cpus.$SLURM_JOB_ID\n\
        cat /proc/self/cgroup > cgroup.$SLURM_JOB_ID\n\
        sleep 60\n";
    c.script("cpus.sh", script);
    let a = c.submit(&["-c", "1", "cpus.sh"]);
    let b = c.submit(&["-c", "1", "cpus.sh"]);
    let read = |id: u32| {
        c.wait_file(&format!("cpus.{id}"), |s| s.ends_with('\n'))
            .trim()
            .strip_prefix("Cpus_allowed_list:")
            .expect("a Cpus_allowed_list line")
            .trim()
            .to_string()
    };
    let (ca, cb) = (read(a), read(b));
    // One CPU each, and not the same one: the second job avoids the first's cpuset.
    for cpus in [&ca, &cb] {
        assert!(cpus.parse::<u32>().is_ok(), "one CPU id, got {cpus:?}");
    }
    assert_ne!(ca, cb);
    let cg = c.wait_file(&format!("cgroup.{a}"), |s| s.ends_with('\n'));
    let want = format!(
        "/{}/uid_{}/job_{a}/step_batch/task_0",
        c.cgroup.root,
        nix::unistd::geteuid()
    );
    assert!(cg.lines().any(|l| l.ends_with(&want)), "{cg}");
    c.ok("scancel", &[&a.to_string(), &b.to_string()]);
    c.wait_done(a);
    c.wait_done(b);
}

#[test]
fn a_job_allocating_past_its_mem_ends_out_of_memory() {
    let c = TestCluster::start_with(Setup {
        cgroup: "ConstrainRAMSpace = true\nConstrainSwapSpace = true",
        ..Setup::default()
    });
    if !cgroups_usable(&c.cgroup) {
        return;
    }
    // tail keeps newline-free input whole in memory: 300 MiB against a 50 MiB limit.
    c.script(
        "hog.sh",
        "#!/bin/sh\nhead -c 300M /dev/zero | tail > /dev/null\necho after=$?\n",
    );
    let id = c.submit(&["--mem=50M", "hog.sh"]);
    assert_eq!(c.wait_done(id), "OUT_OF_MEMORY");
    let out = c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("oom-kill"));
    assert!(out.contains("after=137"), "{out}");
    let line = format!(
        "slurmstepd-{}: error: Detected 1 oom-kill event(s) in StepId={id}.batch. \
         Some of your processes may have been killed by the cgroup out-of-memory handler.\n",
        c.node()
    );
    assert!(out.ends_with(&line), "{out}");
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("JobState=OUT_OF_MEMORY"), "{show}");
    assert!(show.contains(" ExitCode=0:125"), "{show}");
    // sacct: the job and its .batch step both end 0:125 (golden exit_codes.txt).
    let rows = c.sacct_rows(id, 2);
    assert_eq!(
        rows,
        [
            format!("{id}|OUT_OF_MEMORY|0:125"),
            format!("{id}.batch|OUT_OF_MEMORY|0:125")
        ],
        "{rows:?}"
    );
}

#[test]
fn a_job_within_its_mem_completes() {
    let c = TestCluster::start_with(Setup {
        cgroup: "ConstrainRAMSpace = true\nConstrainSwapSpace = true",
        ..Setup::default()
    });
    if !cgroups_usable(&c.cgroup) {
        return;
    }
    c.script(
        "small.sh",
        "#!/bin/sh\nhead -c 10M /dev/zero | tail > /dev/null\necho after=$?\n",
    );
    let id = c.submit(&["--mem=100M", "small.sh"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = c.wait_file(&format!("slurm-{id}.out"), |s| s.contains("after="));
    assert_eq!(out, "after=0\n");
}

/// A batch script whose grandchild leaves its session: `setsid sh` starts `sleep` in
/// the background and exits, so the sleep is re-parented and in no group of the job.
const ESCAPE: &str = "#!/bin/sh\n\
    setsid sh -c 'sleep 1000 & echo $! > escaped.pid' &\n\
    wait\n";

fn escaped_pid(c: &TestCluster) -> i32 {
    let pid: i32 = c
        .wait_file("escaped.pid", |s| s.ends_with('\n'))
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "the escaped sleep runs");
    pid
}

fn scancel_kills_the_escaped_process(c: &TestCluster) {
    let _ = std::fs::remove_file(c.path("escaped.pid"));
    c.script("escape.sh", &format!("{ESCAPE}sleep 1000\n"));
    let id = c.submit(&["escape.sh"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    let pid = escaped_pid(c);
    c.ok("scancel", &[&id.to_string()]);
    assert_eq!(c.wait_done(id), "CANCELLED");
    wait_until("the escaped sleep to die", Duration::from_secs(20), || {
        (!alive(pid)).then_some(())
    });
}

fn job_end_kills_the_escaped_process(c: &TestCluster) {
    let _ = std::fs::remove_file(c.path("escaped.pid"));
    let _ = std::fs::remove_file(c.path("release"));
    c.script(
        "escape.sh",
        &format!("{ESCAPE}while [ ! -e release ]; do sleep 0.1; done\n"),
    );
    let id = c.submit(&["escape.sh"]);
    let pid = escaped_pid(c);
    std::fs::write(c.path("release"), "").unwrap();
    assert_eq!(c.wait_done(id), "COMPLETED");
    wait_until("the escaped sleep to die", Duration::from_secs(20), || {
        (!alive(pid)).then_some(())
    });
}

#[test]
fn a_double_forked_setsid_sleep_is_gone_after_scancel() {
    let c = TestCluster::start();
    if !cgroups_usable(&c.cgroup) {
        return;
    }
    scancel_kills_the_escaped_process(&c);
}

#[test]
fn a_double_forked_setsid_sleep_is_gone_when_the_script_ends() {
    let c = TestCluster::start();
    if !cgroups_usable(&c.cgroup) {
        return;
    }
    job_end_kills_the_escaped_process(&c);
}

#[test]
fn without_cgroups_escaped_processes_are_still_killed_and_isolation_is_degraded() {
    let c = TestCluster::start_with(Setup {
        cgroup: "CgroupPlugin = \"disabled\"\nConstrainRAMSpace = true",
        ..Setup::default()
    });
    scancel_kills_the_escaped_process(&c);
    // stepd says what it cannot enforce, in its log in the job's spool directory.
    c.script("log.sh", "#!/bin/sh\nsleep 1000\n");
    let id = c.submit(&["log.sh"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    let log = c.dir.path().join(format!("spool/job_{id}/stepd.log"));
    let text = wait_until("stepd's log", Duration::from_secs(20), || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("RLIMIT_DATA"))
    });
    assert!(
        text.contains("degraded isolation (none): no cgroups: cgroups disabled by configuration"),
        "{text}"
    );
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
    job_end_kills_the_escaped_process(&c);
    // The node says so too: a reason on `scontrol show node` and in `sinfo -R`, with
    // who set it and when; the node stays usable.
    let want = "Isolation degraded: no cgroups: cgroups disabled by configuration";
    let show = wait_until(
        "degraded reason on the node",
        Duration::from_secs(20),
        || {
            let s = c.ok("scontrol", &["show", "node", &c.node()]);
            s.contains(want).then_some(s)
        },
    );
    let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .unwrap()
        .name;
    assert!(show.contains(&format!("   Reason={want} [{me}@")), "{show}");
    assert!(show.contains("State=IDLE"), "{show}");
    let reasons = c.ok("sinfo", &["-R", "-h", "-o", "%E|%u|%N"]);
    assert_eq!(
        reasons.trim(),
        format!("{want}|{me}|{}", c.node()),
        "{reasons}"
    );
    let ok = c.submit(&["--wrap", "true"]);
    assert_eq!(c.wait_done(ok), "COMPLETED");
}

/// cgroup v2 devices: stepd attaches an eBPF device program to the job's and the step's
/// cgroups, so the file of a GPU the job was not given is refused (EPERM) while its own
/// opens as far as the (absent) driver. Runs where a cgroup v2 hierarchy is writable
/// (here the hybrid layout's `/sys/fs/cgroup/unified`) and mknod is allowed.
#[test]
fn v2_device_program_refuses_a_gpu_not_allocated() {
    let devdir = tempfile::tempdir().unwrap();
    for i in 0..2u64 {
        let made = nix::sys::stat::mknod(
            &devdir.path().join(format!("gpu{i}")),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(240, i),
        );
        if let Err(e) = made {
            eprintln!("skipped: cannot create device files: {e}");
            return;
        }
    }
    let top: &'static str = Box::leak(
        format!(
            "[[gres]]\nname = \"gpu\"\nfile = \"{}/gpu[0-1]\"\n",
            devdir.path().display()
        )
        .into_boxed_str(),
    );
    let c = TestCluster::start_with(Setup {
        top,
        cgroup: "CgroupPlugin = \"cgroup/v2\"\nConstrainDevices = true",
        ..Setup::default()
    });
    let m = isolate::detect(&c.cgroup, Scope::batch(&c.cgroup.root, 0, 0));
    if m.backend() != Backend::V2 {
        eprintln!(
            "skipped: no writable cgroup v2 hierarchy ({:?})",
            m.degraded()
        );
        return;
    }
    let d = devdir.path().display();
    c.script(
        "probe.sh",
        "#!/bin/sh\n(exec 3< \"$1\") 2>&1 | sed 's/.*: //'\n",
    );
    let script = format!(
        "#!/bin/sh\necho own=$(./probe.sh {d}/gpu0)\necho other=$(./probe.sh {d}/gpu1)\n\
         srun sh -c 'echo step=$(./probe.sh {d}/gpu1)'\n"
    );
    c.script("devs.sh", &script);
    let id = c.submit(&["--gres=gpu:1", "-o", "devs.out", "devs.sh"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let out = std::fs::read_to_string(c.path("devs.out")).unwrap();
    let log = std::fs::read_to_string(c.dir.path().join(format!("spool/job_{id}/stepd.log")))
        .unwrap_or_default();
    assert!(
        out.contains("own=No such device"),
        "{out}\nstepd log: {log}"
    );
    assert!(
        out.contains("other=Operation not permitted"),
        "{out}\nstepd log: {log}"
    );
    assert!(out.contains("step=Operation not permitted"), "{out}");
}
