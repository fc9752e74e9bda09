//! Tests against this machine's real cgroup hierarchies. Each skips, saying why, when
//! the hierarchy is not there or not writable (no delegation, not root). Every test
//! uses its own root cgroup (`sluice-unit-<pid>-<name>`) and removes it.

use super::v1::{Ctrl, V1};
use super::v2::V2;
use super::*;
use std::io::Write;
use std::process::{Child, Command, Stdio};

const MIB: u64 = 1 << 20;

fn conf(name: &str) -> CgroupConf {
    CgroupConf {
        root: format!("sluice-unit-{}-{name}", std::process::id()),
        ..CgroupConf::default()
    }
}

fn scope(c: &CgroupConf) -> Scope {
    Scope::batch(&c.root, nix::unistd::geteuid().as_raw(), 1)
}

/// A v1 manager with the controllers `need`, or `None` after printing why not.
fn v1(name: &str, need: &[Ctrl]) -> Option<(V1, Cleanup)> {
    let c = conf(name);
    let m = match V1::detect(&c, scope(&c)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipped: no writable cgroup v1 here: {e}");
            return None;
        }
    };
    let clean = Cleanup(m.root_dirs());
    for n in need {
        if !m.controllers().contains(n) {
            eprintln!("skipped: cgroup v1 {} controller not usable here", n.name());
            return None;
        }
    }
    Some((m, clean))
}

/// Removes test roots, even when an assertion failed.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for d in &self.0 {
            for p in files::procs_below(d) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            let _ = super::remove_retrying(d);
        }
    }
}

/// `sh -c script`, held at its first line until [`release`] so that it can be moved
/// into a cgroup before it does anything.
fn gated(script: &str) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!("read _go; {script}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh")
}

fn release(c: &mut Child) {
    let mut i = c.stdin.take().unwrap();
    i.write_all(b"go\n").unwrap();
}

fn output(c: Child) -> (String, String) {
    let o = c.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Whether `pid` is still a live process (a zombie is not).
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

#[test]
fn v1_cpuset_confines_the_task() {
    let Some((mut m, _c)) = v1("cpuset", &[Ctrl::Cpuset]) else {
        return;
    };
    let online = m.online_cpus().expect("cpuset has CPUs");
    let last = online.ids().last().unwrap();
    let want: CpuList = [last].into_iter().collect();
    m.create(&Constraints {
        cpus: Some(want.clone()),
        tasks: 1,
        ..Constraints::default()
    })
    .unwrap();
    let mut ch = gated("grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup");
    m.add_pid(0, ch.id() as i32).unwrap();
    release(&mut ch);
    let (out, err) = output(ch);
    assert!(
        out.contains(&format!("Cpus_allowed_list:\t{want}\n")),
        "{out}{err}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains(":cpuset:/") && l.ends_with("/job_1/step_batch/task_0")),
        "{out}"
    );
    m.destroy().unwrap();
}

#[test]
fn v1_kill_all_reaches_double_forked_setsid_processes() {
    let Some((mut m, _c)) = v1("kill", &[]) else {
        return;
    };
    m.create(&Constraints::default()).unwrap();
    let mut ch = gated("setsid sh -c 'sleep 300 & sleep 300' & sleep 300");
    m.add_pid(0, ch.id() as i32).unwrap();
    release(&mut ch);
    let pids = wait_some(|| {
        let p = m.pids(Level::Job);
        (p.len() >= 4).then_some(p)
    });
    m.kill_all(Level::Job, Duration::from_secs(5)).unwrap();
    let _ = ch.wait();
    for p in &pids {
        assert!(!alive(*p), "pid {p} survived");
    }
    assert!(m.pids(Level::Job).is_empty());
    m.destroy().unwrap();
    let uid = format!("uid_{}", nix::unistd::geteuid());
    for d in m.root_dirs() {
        assert!(d.is_dir(), "the root stays");
        assert!(!d.join(&uid).exists(), "{} left behind", d.display());
    }
}

fn wait_some<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn v1_memory_limit_oom_kills_and_is_counted() {
    let Some((mut m, _c)) = v1("oom", &[Ctrl::Memory]) else {
        return;
    };
    m.create(&Constraints {
        mem: Some(MemLimits {
            ram: Some(64 * MIB),
            soft: Some(64 * MIB),
            ram_swap: Some(64 * MIB),
        }),
        tasks: 1,
        ..Constraints::default()
    })
    .unwrap();
    // tail keeps a newline-free input whole in memory.
    let mut ch = gated("head -c 400M /dev/zero | tail > /dev/null; echo rc=$?");
    m.add_pid(0, ch.id() as i32).unwrap();
    release(&mut ch);
    let (out, _) = output(ch);
    assert_eq!(out.trim(), "rc=137", "tail was SIGKILLed");
    assert!(m.oom_kills(Level::Step) >= 1);
    assert!(m.oom_kills(Level::Job) >= 1);
    let u = m.usage(Level::Step);
    let peak = u.mem_peak.expect("peak");
    assert!(peak > 32 * MIB && peak <= 64 * MIB, "peak {peak}");
    m.destroy().unwrap();
}

#[test]
fn v1_devices_deny_makes_a_device_file_unopenable() {
    let Some((mut m, _c)) = v1("devices", &[Ctrl::Devices]) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let dev = t.path().join("fakegpu0");
    // A character device with a major number no driver uses: unopenable by nature
    // (ENXIO) unless the cgroup refuses it first (EPERM).
    let made = nix::sys::stat::mknod(
        &dev,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(240, 0),
    );
    if let Err(e) = made {
        eprintln!("skipped: cannot create a device file: {e}");
        return;
    }
    let d = Device::from_path(&dev).unwrap();
    m.create(&Constraints {
        deny: vec![d],
        tasks: 1,
        ..Constraints::default()
    })
    .unwrap();
    let script = format!("exec 3< {}", dev.display());
    let mut ch = gated(&script);
    m.add_pid(0, ch.id() as i32).unwrap();
    release(&mut ch);
    let (_, err) = output(ch);
    assert!(err.contains("Operation not permitted"), "{err}");
    // Outside the cgroup the same open fails differently.
    let (_, err) = output(gated(&script).tap_release());
    assert!(err.contains("No such device"), "{err}");
    m.destroy().unwrap();
}

trait TapRelease {
    fn tap_release(self) -> Self;
}

impl TapRelease for Child {
    fn tap_release(mut self) -> Self {
        release(&mut self);
        self
    }
}

#[test]
fn v1_freezer_suspends_and_resumes() {
    let Some((mut m, _c)) = v1("freezer", &[Ctrl::Freezer, Ctrl::Cpuacct]) else {
        return;
    };
    m.create(&Constraints::default()).unwrap();
    let mut ch = gated("i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done; echo done");
    m.add_pid(0, ch.id() as i32).unwrap();
    release(&mut ch);
    m.freeze(Level::Step).unwrap();
    let frozen_cpu = m.usage(Level::Step).cpu_secs().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        m.usage(Level::Step).cpu_secs().unwrap(),
        frozen_cpu,
        "no CPU time while frozen"
    );
    m.thaw(Level::Step).unwrap();
    m.kill_all(Level::Job, Duration::from_secs(5)).unwrap();
    let _ = ch.wait();
    m.destroy().unwrap();
}

/// The unified hierarchy, when one is mounted and writable (on this hybrid host it has
/// no controllers, which still exercises tracking, freezing and cgroup.kill).
fn v2(name: &str) -> Option<(V2, Cleanup)> {
    let c = conf(name);
    match V2::detect(&c, scope(&c)) {
        Ok(m) => {
            let clean = Cleanup(vec![m.root_dir()]);
            Some((m, clean))
        }
        Err(e) => {
            eprintln!("skipped: no writable cgroup v2 here: {e}");
            None
        }
    }
}

#[test]
fn v2_tracks_freezes_and_kills_double_forked_processes() {
    let Some((mut m, _c)) = v2("track") else {
        return;
    };
    m.create(&Constraints::default()).unwrap();
    let mut ch = gated("setsid sh -c 'sleep 300 & sleep 300' & sleep 300");
    m.add_pid(0, ch.id() as i32).unwrap();
    let cg = std::fs::read_to_string(format!("/proc/{}/cgroup", ch.id())).unwrap();
    assert!(
        cg.lines()
            .any(|l| l.starts_with("0::") && l.ends_with("/job_1/step_batch/task_0")),
        "{cg}"
    );
    release(&mut ch);
    let pids = wait_some(|| {
        let p = m.pids(Level::Job);
        (p.len() >= 4).then_some(p)
    });
    m.freeze(Level::Job).unwrap();
    m.thaw(Level::Job).unwrap();
    m.kill_all(Level::Job, Duration::from_secs(5)).unwrap();
    let _ = ch.wait();
    for p in &pids {
        assert!(!alive(*p), "pid {p} survived");
    }
    m.destroy().unwrap();
    assert!(
        !m.root_dir()
            .join(format!("uid_{}", nix::unistd::geteuid()))
            .join("job_1")
            .exists()
    );
}
