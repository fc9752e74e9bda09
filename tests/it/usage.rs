//! Usage accounting (issue 5): a batch job that burns a known amount of CPU and holds a
//! known amount of memory is measured by its stepd, and `seff`, `sacct` and `sstat`
//! report those figures.

use crate::harness::*;
use std::time::Duration;

/// Seconds of CPU the job burns, and MiB it holds.
const BURN_SECS: f64 = 3.0;
const HOLD_MIB: f64 = 200.0;

/// Perl grows one string in place to `mib` MiB (every page written), then spins until
/// its own CPU time (user + system: `times` is a system call) reaches `secs`, then
/// optionally sleeps.
fn burner(mib: f64, secs: f64, sleep: u32) -> String {
    format!(
        "#!/bin/bash\nperl -e '$x = \"a\"; $x x= {} * 1048576; 1 while do {{ my @t = times; $t[0] + $t[1] }} < {secs}; sleep {sleep}'\n",
        mib as u64
    )
}

/// A `K`/`M`/`G` size (sacct's exact units) in MiB.
fn mib_of(v: &str) -> f64 {
    let (num, unit) = v.split_at(v.len() - 1);
    let n: f64 = num.parse().unwrap_or_else(|_| panic!("size {v:?}"));
    match unit {
        "K" => n / 1024.0,
        "M" => n,
        "G" => n * 1024.0,
        _ => panic!("size {v:?}"),
    }
}

/// `MM:SS.mmm` or `HH:MM:SS` in seconds.
fn secs_of(v: &str) -> f64 {
    let parts: Vec<f64> = v
        .split(':')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("time {v:?}")))
        .collect();
    parts.iter().fold(0.0, |acc, p| acc * 60.0 + p)
}

fn within(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= want * 0.10,
        "{what}: {got} is not within 10% of {want}"
    );
}

#[test]
fn seff_and_sacct_report_a_known_cpu_burn_and_allocation() {
    let c = TestCluster::start();
    c.script("burn.sh", &burner(HOLD_MIB, BURN_SECS, 0));
    let id = c.submit(&["--mem=400M", "-n1", "burn.sh"]);
    let st = c.wait_state(id, &["COMPLETED", "FAILED"], Duration::from_secs(120));
    assert_eq!(st, "COMPLETED");

    let rep = c.ok("seff", &[&id.to_string()]);
    let line = |k: &str| -> String {
        rep.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}: ")))
            .unwrap_or_else(|| panic!("no {k} in {rep}"))
            .to_string()
    };
    assert_eq!(line("Job ID"), id.to_string());
    assert_eq!(line("Cluster"), "testc");
    assert_eq!(line("State"), "COMPLETED (exit code 0)");
    assert_eq!(line("Cores"), "1");
    // One task: its peak is the average peak, so seff has no imbalance line.
    assert!(!rep.contains("The task which"), "{rep}");
    within(secs_of(&line("CPU Utilized")), BURN_SECS, "CPU Utilized");
    let mem = line("Memory Utilized");
    let mb: f64 = mem
        .strip_suffix(" MB")
        .unwrap_or_else(|| panic!("{mem}"))
        .parse()
        .unwrap();
    within(mb, HOLD_MIB, "Memory Utilized");
    let eff = line("Memory Efficiency");
    assert!(eff.ends_with("of 400.00 MB (400.00 MB/node)"), "{eff}");
    let pct: f64 = eff.split('%').next().unwrap().parse().unwrap();
    within(pct, HOLD_MIB / 400.0 * 100.0, "Memory Efficiency");
    // CPU efficiency is CPU time over the (load-dependent) wall time.
    let wall = secs_of(&line("Job Wall-clock time"));
    let ce = line("CPU Efficiency");
    let cpct: f64 = ce.split('%').next().unwrap().parse().unwrap();
    let cpu = secs_of(&line("CPU Utilized"));
    if wall > 0.0 {
        assert!(
            (cpct - cpu / wall * 100.0).abs() < 0.01,
            "{ce} vs {cpu}/{wall}"
        );
    }

    // The batch step's accounting row.
    let out = c.ok(
        "sacct",
        &[
            "-j",
            &format!("{id}.batch"),
            "-n",
            "-P",
            "-o",
            "MaxRSS,AveRSS,MaxVMSize,TotalCPU,UserCPU,SystemCPU,TRESUsageInMax,TRESUsageInAve,AllocTRES,MaxRSSNode,NTasks",
        ],
    );
    let f: Vec<&str> = out.trim_end().split('|').collect();
    assert_eq!(f.len(), 11, "{out}");
    within(mib_of(f[0]), HOLD_MIB, "MaxRSS");
    assert!(
        mib_of(f[1]) > 0.0 && mib_of(f[1]) <= mib_of(f[0]),
        "AveRSS {out}"
    );
    assert!(
        mib_of(f[2]) >= mib_of(f[0]),
        "MaxVMSize below MaxRSS: {out}"
    );
    within(secs_of(f[3]), BURN_SECS, "TotalCPU");
    within(
        secs_of(f[4]) + secs_of(f[5]),
        secs_of(f[3]),
        "UserCPU + SystemCPU",
    );
    assert!(
        f[6].starts_with("cpu=00:00:0") && f[6].contains(&format!(",mem={},", f[0])),
        "TRESUsageInMax {out}"
    );
    assert!(f[7].starts_with("cpu=") && f[7].contains(",vmem="), "{out}");
    assert_eq!(f[8], "cpu=1,mem=400M,node=1");
    assert_eq!(f[9], c.node());
    assert_eq!(f[10], "1");
    // The job row sums its steps' CPU.
    let job_cpu = c.ok(
        "sacct",
        &["-X", "-j", &id.to_string(), "-n", "-P", "-o", "TotalCPU"],
    );
    within(secs_of(job_cpu.trim()), BURN_SECS, "job TotalCPU");
}

#[test]
fn sstat_samples_a_running_batch_step() {
    let c = TestCluster::start();
    c.script("hold.sh", &burner(100.0, 0.0, 60));
    let id = c.submit(&["--mem=400M", "hold.sh"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(30));
    let step = format!("{id}.batch");
    // Sampled by stepd every 2 s and forwarded with the agent's heartbeats.
    let row = wait_until("a batch usage sample", Duration::from_secs(60), || {
        let o = c.run(
            "sstat",
            &["-j", &step, "-n", "-P", "-o", "JobID,MaxRSS,NTasks,Pids"],
        );
        let s = stdout(&o);
        let f: Vec<String> = s.trim_end().split('|').map(str::to_string).collect();
        (f.len() == 4 && f[1] != "0" && mib_of(&f[1]) >= 90.0).then_some(f)
    });
    assert_eq!(row[0], step);
    within(mib_of(&row[1]), 100.0, "sstat MaxRSS");
    assert_eq!(row[2], "1");
    assert!(!row[3].is_empty(), "no pids: {row:?}");
    // -a lists the batch step too.
    let all = c.ok(
        "sstat",
        &["-a", "-j", &id.to_string(), "-n", "-P", "-o", "JobID"],
    );
    assert!(all.lines().any(|l| l == step), "{all}");
    c.ok("scancel", &[&id.to_string()]);
    c.wait_done(id);
}

/// The value of `key=` in a `sacct -P` TRES list (`cpu=..,mem=..`), in MiB.
fn tres_mib(list: &str, key: &str) -> f64 {
    let v = list
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {list}"));
    mib_of(v)
}

#[test]
fn maxrss_of_a_step_is_its_largest_task_and_page_cache_is_not_rss() {
    let c = TestCluster::start();
    // Task 0 holds 40 MiB, task 1 holds 120 MiB, both for a few samples.
    c.script(
        "two.sh",
        &format!(
            "#!/bin/bash\nif [ \"$SLURM_PROCID\" = 0 ]; then exec bash {s}/small.sh; else exec bash {s}/big.sh; fi\n",
            s = c.path("").display()
        ),
    );
    c.script("small.sh", &burner(40.0, 0.0, 5));
    c.script("big.sh", &burner(120.0, 0.0, 5));
    // The last task writes a 300 MiB file: page cache, not RSS.
    c.script(
        "writer.sh",
        "#!/bin/bash\ndd if=/dev/zero of=big.file bs=1M count=300 status=none\nsync\nsleep 4\nrm -f big.file\n",
    );
    let id = c.submit(&[
        "-n2",
        "--mem=1000M",
        "-o",
        "/dev/null",
        "--wrap",
        "srun -n2 ./two.sh; srun -n1 ./writer.sh",
    ]);
    assert_eq!(
        c.wait_state(id, &["COMPLETED", "FAILED"], Duration::from_secs(120)),
        "COMPLETED"
    );
    let row = |step: &str| -> Vec<String> {
        let out = c.ok(
            "sacct",
            &[
                "-j",
                &format!("{id}.{step}"),
                "-n",
                "-P",
                "-o",
                "MaxRSS,MaxRSSTask,MaxRSSNode,AveRSS,NTasks,TRESUsageInTot",
            ],
        );
        out.trim_end().split('|').map(str::to_string).collect()
    };
    let r = row("0");
    assert_eq!(r.len(), 6, "{r:?}");
    within(mib_of(&r[0]), 120.0, "MaxRSS of the larger task");
    assert_eq!(r[1], "1", "MaxRSSTask {r:?}");
    assert_eq!(r[2], c.node());
    assert_eq!(r[4], "2");
    // AveRSS: the mean of the two peaks; TRESUsageInTot's mem: their sum.
    let ave = mib_of(&r[3]);
    assert!((70.0..=100.0).contains(&ave), "AveRSS {r:?}");
    let tot = tres_mib(&r[5], "mem");
    assert!(
        tot >= mib_of(&r[0]) && (140.0..=200.0).contains(&tot),
        "TRESUsageInTot {r:?}"
    );
    let w = row("1");
    assert!(mib_of(&w[0]) < 50.0, "page cache counted as RSS: {w:?}");
    // seff's imbalance line is the largest task's peak over the average (a ratio, as
    // Slurm's seff prints it): with two tasks it cannot pass 200%.
    let rep = c.ok("seff", &[&id.to_string()]);
    let lines: Vec<&str> = rep.lines().filter(|l| l.contains("differs by")).collect();
    assert_eq!(lines.len(), 1, "{rep}");
    for l in lines {
        let pct: f64 = l
            .split("differs by ")
            .nth(1)
            .and_then(|x| x.split('%').next())
            .and_then(|x| x.trim().parse().ok())
            .unwrap_or_else(|| panic!("{l}"));
        assert!((100.0..=200.0).contains(&pct), "{rep}");
        let want = mib_of(&r[0]) / ave * 100.0;
        assert!((pct - want).abs() <= 10.0, "{rep} vs sacct {r:?}");
    }
}

/// A step still running when its batch script ends is ended with the job, and its
/// final usage comes with its end report, after the batch step's end. The job stays
/// COMPLETING until that report, and `seff` run meanwhile waits for it: the report
/// has the memory the step used between its samples.
#[test]
fn seff_waits_for_the_final_usage_of_a_step_ended_with_the_job() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let c = TestCluster::start();
    // 120 MiB for a moment right after the first sample, then idle.
    c.script(
        "hold.sh",
        "#!/bin/bash\nperl -e '$x = \"a\" x (120 * 1048576); select(undef, undef, undef, 0.3)'\n\
         touch step.ready\nexec sleep 300\n",
    );
    let id = c.submit(&[
        "--mem=1000M",
        "-o",
        "/dev/null",
        "--wrap",
        "srun ./hold.sh & while [ ! -e go ]; do sleep 0.1; done; exit 0",
    ]);
    c.wait_file("step.ready", |_| true);
    // The step's stepd is held back, so that its end report comes late.
    let pidfile = c.dir.path().join(format!("spool/step_{id}.0/stepd.pid"));
    let stepd: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kill(Pid::from_raw(stepd), Signal::SIGSTOP).unwrap();
    std::fs::write(c.path("go"), "").unwrap();
    c.wait_state(id, &["COMPLETING"], Duration::from_secs(30));
    // The job's end is recorded already (sacct), the step's is not.
    let acct = c.ok(
        "sacct",
        &["-X", "-n", "-P", "-j", &id.to_string(), "-o", "State"],
    );
    assert_eq!(acct.trim(), "COMPLETED");
    let mut seff = c
        .cmd("seff")
        .arg(id.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        seff.try_wait().unwrap().is_none(),
        "seff did not wait for the step"
    );
    kill(Pid::from_raw(stepd), Signal::SIGCONT).unwrap();
    let out = seff.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(c.wait_done(id), "COMPLETED");
    let mem = |rep: &str| -> f64 {
        let v = rep
            .lines()
            .find_map(|l| l.strip_prefix("Memory Utilized: "))
            .unwrap_or_else(|| panic!("{rep}"));
        let (n, unit) = v.split_once(' ').unwrap();
        let n: f64 = n.parse().unwrap();
        match unit {
            "MB" => n,
            "GB" => n * 1024.0,
            _ => 0.0,
        }
    };
    let rep = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(mem(&rep) >= 110.0, "{rep}");
    // Once the job is over, the same at once.
    let rep = c.ok("seff", &[&id.to_string()]);
    assert!(mem(&rep) >= 110.0, "{rep}");
    let step = c.ok(
        "sacct",
        &["-n", "-P", "-j", &format!("{id}.0"), "-o", "State,MaxRSS"],
    );
    let f: Vec<&str> = step.trim().split('|').collect();
    assert_eq!(f[0], "CANCELLED", "{step}");
    assert!(mib_of(f[1]) >= 110.0, "{step}");
}
