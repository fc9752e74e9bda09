//! The controller's log lines for events no front-end can bring about quickly (a time
//! limit, a node failing under a job): slurmctld's words, at info.

use super::*;
use crate::ctld::testutil::{ALICE, cluster_with, pass, spec, submit, two_nodes};
use crate::model::TimeLimit;
use std::sync::{Arc, Mutex};

/// A log writer into a shared buffer.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with this thread's info-level log going to a buffer; returns the log.
fn logged(f: impl FnOnce()) -> String {
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    tracing::subscriber::with_default(sub, f);
    String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn a_time_limit_is_logged_as_job_time_limit_does() {
    let mut c = cluster_with(4, "");
    let mut s = spec("t");
    s.time_limit = Some(TimeLimit::Minutes(1));
    let id = submit(&mut c, s, ALICE, 0);
    pass(&mut c, 0);
    let log = logged(|| c.tick(60, &mut Effects::default()));
    assert!(
        log.contains(&format!("Time limit exhausted for JobId={id}\n")),
        "{log}"
    );
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
}

#[test]
fn a_failed_node_logs_the_requeue_or_the_kill_of_its_jobs() {
    let mut c = two_nodes("");
    let mut fx = Effects::default();
    let again = crate::ctld::testutil::start_on(&mut c, 2, &mut fx);
    let log = logged(|| {
        c.nodes_failed(&["n2".to_string()], 20, &mut Effects::default());
    });
    for want in [
        format!("requeue job JobId={again} due to failure of node n2\n"),
        format!("_job_complete: requeue JobId={again} due to node failure\n"),
    ] {
        assert!(log.contains(&want), "no {want:?} in:\n{log}");
    }
    assert!(!log.contains("done"), "a requeued job is not done:\n{log}");
    // A job that may not be requeued is killed, and done.
    let mut c = two_nodes("");
    let mut s = spec("j");
    s.requeue = Some(false);
    s.nodes_min = Some(2);
    s.nodes_max = Some(2);
    let id = submit(&mut c, s, ALICE, 10);
    pass(&mut c, 10);
    let log = logged(|| {
        c.nodes_failed(&["n1".to_string()], 20, &mut Effects::default());
    });
    for want in [
        format!("Killing JobId={id} on failed node n1\n"),
        format!("_job_complete: JobId={id} done\n"),
    ] {
        assert!(log.contains(&want), "no {want:?} in:\n{log}");
    }
}
