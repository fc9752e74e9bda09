//! Advanced reservations through the real front-ends: scontrol create/update/delete/
//! show, sinfo -T and node states, `--reservation` at submit, the scheduler keeping
//! other jobs off reserved nodes, and reservations surviving a controller restart.

use crate::harness::{TestCluster, field, wait_until};
use std::time::Duration;

fn me() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name
}

fn reason(c: &TestCluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%r"])
        .trim()
        .to_string()
}

fn wait_reason(c: &TestCluster, id: u32, want: &str) {
    wait_until(
        &format!("job {id} reason {want}"),
        Duration::from_secs(20),
        || (reason(c, id) == want).then_some(()),
    );
}

#[test]
fn maint_reservation_blocks_others_admits_its_jobs_and_survives_restart() {
    let mut c = TestCluster::start();
    let user = me();
    let users = format!("Users={user}");
    let out = c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=maint",
            "StartTime=now",
            "Duration=60",
            "Nodes=ALL",
            &users,
            "Flags=MAINT",
        ],
    );
    assert_eq!(out, "Reservation created: maint\n");

    // The node shows MAINT while the window is open.
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%T"]).trim(), "maint");
    let node = c.ok("scontrol", &["-o", "show", "node"]);
    assert_eq!(field(&node, "State").as_deref(), Some("IDLE+MAINT"));

    // A job outside the reservation does not start, with Slurm's reason.
    let outside = c.submit(&["-t", "5", "--wrap", "true"]);
    wait_reason(&c, outside, "ReqNodeNotAvail, Reserved for maintenance");
    assert_eq!(c.state(outside).as_deref(), Some("PENDING"));

    // One that names it runs there.
    let inside = c.submit(&["-t", "5", "--reservation=maint", "--wrap", "true"]);
    assert_eq!(c.wait_done(inside), "COMPLETED");
    assert_eq!(c.show_field(inside, "Reservation"), "maint");
    assert_eq!(
        c.ok(
            "squeue",
            &["-h", "-t", "all", "-j", &inside.to_string(), "-o", "%v"]
        )
        .trim(),
        "maint"
    );
    assert_eq!(c.state(outside).as_deref(), Some("PENDING"));

    // Unknown reservations are refused at submit.
    let (code, err) = c.fails_err("sbatch", &["--reservation=nope", "--wrap", "true"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "sbatch: error: Batch job submission failed: Requested reservation is invalid\n"
    );

    // scontrol show reservation and sinfo -T in Slurm's layouts.
    let show = c.ok("scontrol", &["show", "reservation"]);
    let lines: Vec<&str> = show.lines().collect();
    assert!(
        lines[0].starts_with("ReservationName=maint StartTime="),
        "{show}"
    );
    assert!(lines[0].ends_with("Duration=01:00:00"), "{show}");
    assert_eq!(
        lines[1],
        format!(
            "   Nodes={} NodeCnt=1 CoreCnt=4 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES",
            c.node()
        )
    );
    assert_eq!(lines[2], "   TRES=cpu=4");
    assert_eq!(
        lines[3],
        format!(
            "   Users={user} Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a"
        )
    );
    let t = c.ok("sinfo", &["-T"]);
    let t: Vec<&str> = t.lines().collect();
    assert_eq!(
        t[0],
        "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST"
    );
    assert!(t[1].starts_with("maint        ACTIVE  "), "{t:?}");
    assert!(
        t[1].ends_with(&format!("     01:00:00  {}", c.node())),
        "{t:?}"
    );

    // Overlapping another reservation, or naming an unknown user, is refused.
    let (code, _, err) = c.fails(
        "scontrol",
        &[
            "create",
            "res",
            "StartTime=now",
            "Duration=10",
            "Nodes=ALL",
            &users,
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error creating the reservation: Requested reservation overlaps with another reservation\n"
    );
    let (_, _, err) = c.fails(
        "scontrol",
        &[
            "create",
            "res",
            "StartTime=now",
            "Duration=10",
            "Nodes=ALL",
            "Users=no_such_user_sluice",
            "Flags=OVERLAP",
        ],
    );
    assert_eq!(err, "Error creating the reservation: Invalid user id\n");
    let (_, _, err) = c.fails(
        "scontrol",
        &["create", "res", "Duration=10", "Nodes=ALL", &users],
    );
    assert_eq!(
        err,
        "scontrol: error: A start time must be given.  No reservation created.\n"
    );

    // The reservation is in the database: a restart keeps it, and it still blocks.
    c.kill9_controller();
    c.start_controller();
    let show2 = c.ok("scontrol", &["show", "reservation", "maint"]);
    assert_eq!(show2, show);
    assert_eq!(c.state(outside).as_deref(), Some("PENDING"));

    // Updating it and deleting it; then the waiting job runs.
    assert_eq!(
        c.ok(
            "scontrol",
            &["update", "ReservationName=maint", "Duration=30"]
        ),
        "Reservation updated.\n"
    );
    let show3 = c.ok("scontrol", &["-o", "show", "reservation"]);
    assert_eq!(field(&show3, "Duration").as_deref(), Some("00:30:00"));
    assert_eq!(c.ok("scontrol", &["delete", "ReservationName=maint"]), "");
    assert_eq!(
        c.ok("scontrol", &["show", "res"]),
        "No reservations in the system\n"
    );
    assert_eq!(c.wait_done(outside), "COMPLETED");
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%T"]).trim(), "idle");
}

#[test]
fn upcoming_window_keeps_long_jobs_off_and_lets_short_ones_finish_first() {
    let c = TestCluster::start();
    let users = format!("Users={}", me());
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=later",
            "StartTime=now+10minutes",
            "Duration=60",
            "NodeCnt=1",
            &users,
        ],
    );
    // Not active yet: the node is idle, sinfo -T says INACTIVE.
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%T"]).trim(), "idle");
    assert!(
        c.ok("sinfo", &["-h", "-T"])
            .starts_with("later      INACTIVE  ")
    );
    // 30 minutes would run into the window; 5 minutes end before it.
    let long = c.submit(&["-t", "30", "--wrap", "true"]);
    let short = c.submit(&["-t", "5", "--wrap", "true"]);
    assert_eq!(c.wait_done(short), "COMPLETED");
    wait_reason(&c, long, "Resources");
    assert_eq!(c.state(long).as_deref(), Some("PENDING"));
    // A job inside waits for the window with reason Reservation.
    let inside = c.submit(&["--reservation=later", "--wrap", "true"]);
    wait_reason(&c, inside, "Reservation");
    // Deleting the reservation holds its jobs (Slurm's ReservationDeleted) and frees
    // the node for the others.
    c.ok("scontrol", &["delete", "ReservationName=later"]);
    wait_reason(&c, inside, "ReservationDeleted");
    assert_eq!(c.wait_done(long), "COMPLETED");
    assert_eq!(c.state(inside).as_deref(), Some("PENDING"));
    c.ok("scontrol", &["release", &inside.to_string()]);
    assert_eq!(c.wait_done(inside), "COMPLETED");
}

#[test]
fn busy_nodes_need_ignore_jobs_and_purge_comp_removes_an_idle_reservation() {
    let c = TestCluster::start();
    let users = format!("Users={}", me());
    let busy = c.submit(&["-t", "5", "--wrap", "sleep 60"]);
    c.wait_state(busy, &["RUNNING"], Duration::from_secs(20));
    let (code, _, err) = c.fails(
        "scontrol",
        &[
            "create",
            "res",
            "ReservationName=r1",
            "StartTime=now",
            "Duration=10",
            "Nodes=ALL",
            &users,
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error creating the reservation: Requested nodes are busy\n"
    );
    c.ok("scancel", &[&busy.to_string()]);
    c.wait_done(busy);
    // PURGE_COMP: once its job is done and it has been idle for 2 s, it goes away.
    c.ok(
        "scontrol",
        &[
            "create",
            "res",
            "ReservationName=r2",
            "StartTime=now",
            "Duration=10",
            "Nodes=ALL",
            &users,
            "Flags=IGNORE_JOBS,PURGE_COMP=00:02",
        ],
    );
    let show = c.ok("scontrol", &["-o", "show", "res", "r2"]);
    assert_eq!(
        field(&show, "Flags").as_deref(),
        Some("IGNORE_JOBS,SPEC_NODES,PURGE_COMP=00:00:02")
    );
    let j = c.submit(&["--reservation=r2", "--wrap", "sleep 3"]);
    c.wait_state(j, &["RUNNING"], Duration::from_secs(20));
    // In use: it cannot be deleted, and PURGE_COMP does not remove it.
    let (_, _, err) = c.fails("scontrol", &["delete", "ReservationName=r2"]);
    assert_eq!(
        err,
        "delete_reservation r2: Requested reservation is in use\n"
    );
    assert_eq!(c.wait_done(j), "COMPLETED");
    wait_until("purged reservation", Duration::from_secs(20), || {
        (c.ok("scontrol", &["show", "res"]) == "No reservations in the system\n").then_some(())
    });
}

#[test]
fn core_and_license_reservations_leave_the_rest_to_other_jobs() {
    let c = TestCluster::start_with(crate::harness::Setup {
        top: "[licenses]\nmatlab = 4\n",
        ..Default::default()
    });
    let users = format!("Users={}", me());
    let out = c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=cores",
            "StartTime=now",
            "Duration=60",
            "Nodes=ALL",
            "CoreCnt=2",
            &users,
        ],
    );
    assert_eq!(out, "Reservation created: cores\n");
    let show = c.ok("scontrol", &["-o", "show", "reservation", "cores"]);
    for want in [" NodeCnt=1 CoreCnt=2 ", " TRES=cpu=2 ", " Licenses=(null) "] {
        assert!(show.contains(want), "{want}: {show}");
    }
    // The node stays in service for the CPUs the reservation leaves.
    assert_eq!(c.ok("sinfo", &["-h", "-o", "%T"]).trim(), "idle");
    let three = c.submit(&["-t", "5", "-n", "3", "--wrap", "sleep 60"]);
    wait_reason(&c, three, "Resources");
    let two = c.submit(&["-t", "5", "-n", "2", "--wrap", "sleep 60"]);
    c.wait_state(two, &["RUNNING"], Duration::from_secs(20));
    // The reservation's own job gets its two CPUs beside it.
    let inside = c.submit(&[
        "-t",
        "5",
        "-n",
        "2",
        "--reservation=cores",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(inside), "COMPLETED");
    assert_eq!(c.state(three).as_deref(), Some("PENDING"));
    c.ok("scancel", &[&two.to_string(), &three.to_string()]);
    c.wait_done(two);
    c.ok("scontrol", &["delete", "ReservationName=cores"]);

    // Licenses: 3 of the 4 are the reservation's.
    c.ok(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=lic",
            "StartTime=now",
            "Duration=60",
            "Licenses=matlab:3",
            &users,
        ],
    );
    let show = c.ok("scontrol", &["-o", "show", "reservation", "lic"]);
    for want in [
        " Nodes=(null) NodeCnt=0 CoreCnt=0 ",
        " TRES=license/matlab=3 ",
        " Licenses=matlab:3 ",
    ] {
        assert!(show.contains(want), "{want}: {show}");
    }
    let outside = c.submit(&["-t", "5", "-L", "matlab:2", "--wrap", "true"]);
    wait_reason(&c, outside, "Licenses");
    let inside = c.submit(&[
        "-t",
        "5",
        "-L",
        "matlab:3",
        "--reservation=lic",
        "--wrap",
        "true",
    ]);
    assert_eq!(c.wait_done(inside), "COMPLETED");
    assert_eq!(c.state(outside).as_deref(), Some("PENDING"));
    c.ok("scontrol", &["delete", "ReservationName=lic"]);
    assert_eq!(c.wait_done(outside), "COMPLETED");
}
