//! sreport through the real front-end: CPU time of a known set of finished jobs, as
//! sacct recorded them, in each report, and a maintenance reservation's time as
//! PLND Down.

use crate::harness::TestCluster;

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name
}

/// (AllocCPUS × ElapsedRaw) of a finished job, from sacct.
fn cpu_secs(c: &TestCluster, id: u32) -> u64 {
    let out = c.ok(
        "sacct",
        &[
            "-X",
            "-n",
            "-P",
            "-j",
            &id.to_string(),
            "-o",
            "AllocCPUS,ElapsedRaw",
        ],
    );
    let (cpus, secs) = out.trim().split_once('|').unwrap();
    cpus.parse::<u64>().unwrap() * secs.parse::<u64>().unwrap()
}

fn epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn reports_add_up_the_recorded_jobs() {
    let t0 = epoch();
    let c = TestCluster::start();
    let user = me();
    let a = c.submit(&["-A", "acct1", "-n", "2", "--wrap", "sleep 2"]);
    let b = c.submit(&["-A", "acct2", "-n", "1", "--wrap", "sleep 1"]);
    let d = c.submit(&["-A", "acct1", "-n", "1", "--wrap", "sleep 1"]);
    for id in [a, b, d] {
        assert_eq!(c.wait_done(id), "COMPLETED");
    }
    let (sa, sb, sd) = (cpu_secs(&c, a), cpu_secs(&c, b), cpu_secs(&c, d));
    assert!(sa >= 4, "job {a} used {sa} CPU-seconds");

    // A maintenance window of a couple of seconds on the whole node.
    c.ok(
        "scontrol",
        &[
            "create",
            "res",
            "ReservationName=m",
            "StartTime=now",
            "Duration=10",
            "Nodes=ALL",
            &format!("Users={user}"),
            "Flags=MAINT",
        ],
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    c.ok("scontrol", &["delete", "ReservationName=m"]);

    let range = ["start=now-1hour", "end=now+1hour"];
    let q = |args: &[&str]| {
        let mut v = vec!["-n", "-P", "-t", "seconds"];
        v.extend_from_slice(args);
        v.extend_from_slice(&range);
        c.ok("sreport", &v)
    };

    let util = q(&["cluster", "Utilization"]);
    let f: Vec<&str> = util.trim().split('|').collect();
    assert_eq!(f.len(), 7, "{util}");
    assert_eq!(f[0], "testc");
    let n: Vec<u64> = f[1..].iter().map(|x| x.parse().unwrap()).collect();
    let (alloc, down, pdown, idle, plan, reported) = (n[0], n[1], n[2], n[3], n[4], n[5]);
    assert_eq!(alloc, sa + sb + sd, "{util}");
    assert_eq!(down, 0);
    assert!(
        pdown >= 4 && pdown.is_multiple_of(4),
        "maintenance time {pdown}"
    );
    assert_eq!(plan, 0);
    assert_eq!(alloc + pdown + idle, reported);
    // 4 CPUs from when the cluster came to exist (the hour asked for began before
    // it) to now (the end is cut to now).
    assert!(reported <= 4 * (epoch() - t0 + 1), "{util}");

    let by_user = q(&["cluster", "AccountUtilizationByUser"]);
    let lines: Vec<Vec<&str>> = by_user.lines().map(|l| l.split('|').collect()).collect();
    let row = |acct: &str, login: &str| -> u64 {
        lines
            .iter()
            .find(|l| l[1] == acct && l[2] == login)
            .unwrap_or_else(|| panic!("no {acct}/{login} in {by_user}"))[4]
            .parse()
            .unwrap()
    };
    assert_eq!(row("root", ""), sa + sb + sd);
    assert_eq!(row("acct1", ""), sa + sd);
    assert_eq!(row("acct1", &user), sa + sd);
    assert_eq!(row("acct2", &user), sb);
    assert_eq!(lines.len(), 5, "{by_user}");

    let top = q(&["user", "TopUsage"]);
    let t: Vec<&str> = top.trim().split('|').collect();
    assert_eq!(
        (t[0], t[1], t[3], t[4]),
        (
            "testc",
            user.as_str(),
            "acct1,acct2",
            (sa + sb + sd).to_string().as_str()
        ),
        "{top}"
    );

    let sizes = q(&["job", "SizesByAccount", "grouping=2"]);
    let rows: Vec<Vec<&str>> = sizes.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), 2, "{sizes}");
    assert_eq!(
        rows[0][..4],
        ["testc", "acct1", &sd.to_string(), &sa.to_string()]
    );
    assert_eq!(rows[1][..4], ["testc", "acct2", &sb.to_string(), "0"]);

    // A node taken DOWN for a while counts as Down.
    let node = c.node();
    c.ok(
        "scontrol",
        &[
            "update",
            &format!("NodeName={node}"),
            "State=DOWN",
            "Reason=test",
        ],
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    c.ok(
        "scontrol",
        &["update", &format!("NodeName={node}"), "State=RESUME"],
    );
    let util = q(&["cluster", "Utilization"]);
    let f: Vec<u64> = util
        .trim()
        .split('|')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(f[1] >= 8 && f[1].is_multiple_of(4), "down time in {util}");
    assert_eq!(f[0], sa + sb + sd);
    assert_eq!(f[0] + f[1] + f[2] + f[3] + f[4], f[5], "{util}");

    // The human layout has Slurm's banner and header.
    let text = c.ok("sreport", &["cluster", "utilization", "start=now-1hour"]);
    let l: Vec<&str> = text.lines().collect();
    assert!(l[1].starts_with("Cluster Utilization "), "{text}");
    assert_eq!(l[2], "Usage reported in CPU Minutes");
    assert_eq!(
        l[4],
        "  Cluster Allocate     Down PLND Dow     Idle  Planned Reported "
    );
}

#[test]
fn no_time_before_the_cluster_and_jobs_without_an_account_under_root() {
    let t0 = epoch();
    let c = TestCluster::start();
    let user = me();
    // No account exists yet: the job has none.
    let id = c.submit(&["-n", "2", "--wrap", "sleep 1"]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let used = cpu_secs(&c, id);
    // A week asked for, on a cluster a few seconds old.
    let q = |args: &[&str]| {
        let mut v = vec!["-n", "-P", "-t", "seconds"];
        v.extend_from_slice(args);
        v.extend_from_slice(&["start=now-7days", "end=now+1hour"]);
        c.ok("sreport", &v)
    };
    let util = q(&["cluster", "Utilization"]);
    let n: Vec<u64> = util
        .trim()
        .split('|')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(n[0], used, "{util}");
    assert!(
        n[5] <= 4 * (epoch() - t0 + 1),
        "idle time from before the cluster existed: {util}"
    );
    let by_user = q(&["cluster", "AccountUtilizationByUser"]);
    let lines: Vec<Vec<&str>> = by_user.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(
        lines.iter().map(|l| l[..3].to_vec()).collect::<Vec<_>>(),
        [
            vec!["testc", "root", ""],
            vec!["testc", "root", user.as_str()]
        ],
        "{by_user}"
    );
    assert_eq!(lines[1][4], used.to_string());
    let by_acct = q(&["cluster", "UserUtilizationByAccount", "accounts=root"]);
    assert!(by_acct.starts_with(&format!("testc|{user}|")), "{by_acct}");
    assert!(by_acct.contains("|root|"), "{by_acct}");
}
