//! The controller over its socket, without front-ends: submission, durability and
//! recovery, and refusal of garbage.

use crate::harness::*;
use sluice::model::JobSpec;
use sluice::proto::{JobFilter, Request, Response};
use std::time::Duration;

fn client(c: &TestCluster) -> sluice::cli::client::Client {
    let cfg = sluice::config::Config::from_file(&c.conf).unwrap();
    sluice::cli::client::Client::connect_with(&cfg).unwrap()
}

fn spec(c: &TestCluster, script: &str) -> JobSpec {
    JobSpec {
        name: "t".into(),
        script: script.into(),
        work_dir: c.work.display().to_string(),
        submit_dir: c.work.display().to_string(),
        submit_host: "h".into(),
        environment: [("PATH".to_string(), "/usr/bin:/bin".to_string())].into(),
        umask: 0o022,
        ..JobSpec::default()
    }
}

fn submit(cl: &mut sluice::cli::client::Client, s: JobSpec) -> u32 {
    match cl
        .request(&Request::Submit {
            spec: Box::new(s),
            test_only: false,
            het: vec![],
        })
        .unwrap()
    {
        Response::Submitted { job_id } => job_id,
        other => panic!("{other:?}"),
    }
}

fn job_state(cl: &mut sluice::cli::client::Client, id: u32) -> Option<sluice::model::Job> {
    match cl
        .request(&Request::Jobs(JobFilter {
            ids: vec![id],
            ..JobFilter::default()
        }))
        .unwrap()
    {
        Response::Jobs { mut jobs, .. } => jobs.pop(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_submitted_script_runs_and_writes_its_output() {
    let c = TestCluster::start();
    let mut cl = client(&c);
    let id = submit(
        &mut cl,
        spec(&c, "#!/bin/sh\necho hello from $SLURM_JOB_ID\n"),
    );
    let j = wait_until("job end", Duration::from_secs(30), || {
        job_state(&mut cl, id).filter(|j| !j.is_active())
    });
    assert_eq!(j.state.long(), "COMPLETED");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{id}.out"))).unwrap();
    assert_eq!(out, format!("hello from {id}\n"));
}

#[test]
fn jobs_survive_a_controller_kill9() {
    let mut c = TestCluster::start();
    let mut cl = client(&c);
    // One running job that outlives the controller, and one that was only queued.
    let running = submit(&mut cl, spec(&c, "#!/bin/sh\nsleep 2\necho survived\n"));
    wait_until("running", Duration::from_secs(20), || {
        job_state(&mut cl, running).filter(|j| j.state.long() == "RUNNING")
    });
    let mut held = spec(&c, "#!/bin/sh\necho later\n");
    held.hold = true;
    let queued = submit(&mut cl, held);
    drop(cl);
    c.kill9_controller();
    c.start_controller();
    let mut cl = client(&c);
    let j = wait_until("running job's end", Duration::from_secs(30), || {
        job_state(&mut cl, running).filter(|j| !j.is_active())
    });
    assert_eq!(j.state.long(), "COMPLETED", "{j:?}");
    let out = std::fs::read_to_string(c.path(&format!("slurm-{running}.out"))).unwrap();
    assert_eq!(out, "survived\n");
    assert_eq!(job_state(&mut cl, queued).unwrap().state.long(), "PENDING");
    let r = cl
        .request(&Request::Release {
            ids: vec![queued],
            array_tasks: vec![],
        })
        .unwrap();
    assert!(
        matches!(r, Response::Results(ref v) if v[0].error.is_none()),
        "{r:?}"
    );
    let j = wait_until("released job's end", Duration::from_secs(30), || {
        job_state(&mut cl, queued).filter(|j| !j.is_active())
    });
    assert_eq!(j.state.long(), "COMPLETED");
    // New ids continue after the old ones.
    let next = submit(&mut cl, spec(&c, "#!/bin/sh\ntrue\n"));
    assert!(next > queued);
}

#[test]
fn garbage_on_the_socket_gets_an_error_not_a_crash() {
    use std::io::{Read, Write};
    let c = TestCluster::start();
    let sock = c.dir.path().join("run/ctld.sock");
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.write_all(&[0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef]).unwrap();
    let mut buf = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.read_to_end(&mut buf);
    // The controller still serves others.
    let mut cl = client(&c);
    assert_eq!(cl.request(&Request::Ping).unwrap(), Response::Ok);
}

/// A peer that announces requests larger than a front-end ever sends is cut off before
/// the controller buffers them, and the controller's log names who it was; the
/// controller goes on serving everyone else (issue #25: unbounded buffers).
#[test]
fn oversized_requests_are_refused_before_they_are_buffered() {
    use sluice::proto::{Hello, Role};
    use std::io::{Read, Write};
    let c = TestCluster::start();
    let sock = c.dir.path().join("run/ctld.sock");
    let mut hostile = Vec::new();
    for _ in 0..8 {
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        let hello = sluice::proto::codec::frame(&Hello::new(Role::Client)).unwrap();
        s.write_all(&hello).unwrap();
        // 200 MiB announced, 1 KiB sent: before the bounds this held 200 MiB per
        // connection.
        s.write_all(&(200u32 << 20).to_be_bytes()).unwrap();
        // The controller may hang up before this arrives (a broken pipe here).
        let _ = s.write_all(&[0u8; 1024]);
        hostile.push(s);
    }
    for s in &mut hostile {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        // The controller answers (its hello, an error) and hangs up.
        let _ = s.read_to_end(&mut buf);
        assert!(
            String::from_utf8_lossy(&buf).contains("larger than"),
            "no refusal in {buf:?}"
        );
    }
    let mut cl = client(&c);
    assert_eq!(cl.request(&Request::Ping).unwrap(), Response::Ok);
    let log = c.controller_log();
    assert!(
        log.contains("client connection closed") && log.contains("uid="),
        "{log}"
    );
}
