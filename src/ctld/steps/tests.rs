//! Step reactor scenarios: placement (default, --exact, --overlap, waiting, refused),
//! I/O routing by stream token, the step record at the end, scancel of a step, the end
//! of a job with live steps, and allocation-only jobs.

use super::*;
use crate::config::Config;
use crate::ctld::state::SignalScope;
use crate::model::step::StepSpec;
use crate::model::{JobSpec, NodeState};
use crate::proto::FromAgent;
use std::path::Path;

const ALICE: Caller = Caller {
    uid: 2001,
    gid: 2001,
};
const BOB: Caller = Caller {
    uid: 2002,
    gid: 2002,
};

fn cluster() -> Cluster {
    let cfg = Config::from_toml(
        r#"
[[nodes]]
name = "n1"
cpus = 4
memory = 4000
[[partitions]]
name = "debug"
nodes = "n1"
default = true
max_time = "1:00:00"
"#,
        Path::new("/x/sluice.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(&cfg, 999);
    c.nodes[0].state = NodeState::Up;
    c
}

fn names(uid: u32, gid: u32) -> (String, String) {
    (format!("u{uid}"), format!("g{gid}"))
}

/// A running job of alice's with `ntasks` one-CPU tasks.
fn running(c: &mut Cluster, ntasks: u32, alloc_only: bool) -> u32 {
    let spec = JobSpec {
        name: "j".into(),
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        ntasks: Some(ntasks),
        alloc_only,
        ..JobSpec::default()
    };
    let j = c.resolve(spec, ALICE, 10, &names).unwrap();
    let mut fx = Effects::default();
    let id = c.submit(j, &mut fx);
    c.schedule(10, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    id
}

fn step(n: u32) -> StepSpec {
    StepSpec {
        name: "sleep".into(),
        argv: vec!["sleep".into(), "9".into()],
        work_dir: "/tmp".into(),
        ntasks: Some(n),
        ..StepSpec::default()
    }
}

/// The events stream `token` got.
fn events(fx: &Effects, token: u64) -> Vec<&StepEvent> {
    fx.to_client
        .iter()
        .filter(|(t, _)| *t == token)
        .map(|(_, e)| e)
        .collect()
}

fn launched(fx: &Effects, token: u64) -> Option<u32> {
    events(fx, token).iter().find_map(|e| match e {
        StepEvent::Launched { step_id, .. } => Some(*step_id),
        _ => None,
    })
}

/// The step launches sent to `node`.
fn launches_on<'a>(fx: &'a Effects, node: &str) -> Vec<&'a LaunchStep> {
    fx.to_agent
        .iter()
        .filter_map(|(n, m)| match m {
            ToAgent::LaunchStep(l) if n == node => Some(&**l),
            _ => None,
        })
        .collect()
}

fn launch(c: &mut Cluster, job: u32, s: StepSpec, token: u64) -> Effects {
    let mut fx = Effects::default();
    c.step_launch(job, vec![s], ALICE, token, 11, &mut fx);
    fx
}

fn node_event(c: &mut Cluster, job: u32, step: u32, ev: StepdEvent) -> Effects {
    let mut fx = Effects::default();
    c.from_agent(
        "n1",
        FromAgent::Step {
            job_id: job,
            step_id: step,
            event: ev,
            seq: 0,
        },
        12,
        &mut fx,
    );
    fx
}

fn done() -> StepdEvent {
    StepdEvent::Done {
        usage: StepUsage::default(),
    }
}

#[test]
fn a_default_step_takes_the_job_and_the_next_one_waits() {
    let mut c = cluster();
    let id = running(&mut c, 4, false);
    let fx = launch(&mut c, id, step(1), 1);
    assert_eq!(launched(&fx, 1), Some(0));
    let ls = launches_on(&fx, "n1");
    assert_eq!(ls.len(), 1);
    assert_eq!(ls[0].layout.tasks, vec![vec![0]]);
    assert_eq!(
        ls[0].layout.cpus,
        vec![4],
        "a default step holds all the job's CPUs"
    );
    let rec = c.jobs[&id].steps.iter().find(|s| s.id == "0").unwrap();
    assert_eq!(
        (rec.state, rec.ntasks, rec.name.as_str()),
        (JobState::Running, 1, "sleep")
    );
    // A second default step waits, an overlapping one does not.
    let fx = launch(&mut c, id, step(1), 2);
    assert_eq!(
        events(&fx, 2),
        vec![&StepEvent::Pending {
            reason: BUSY.into()
        }]
    );
    let mut ovl = step(2);
    ovl.overlap = true;
    let fx = launch(&mut c, id, ovl, 3);
    assert_eq!(launched(&fx, 3), Some(1));
    // The end of step 0 lets the waiting one start, as step 2.
    let fx = node_event(&mut c, id, 0, done());
    assert!(events(&fx, 1).contains(&&StepEvent::Done {
        state: JobState::Completed
    }));
    assert_eq!(launched(&fx, 2), Some(2));
}

#[test]
fn exact_steps_share_the_job_and_oversized_ones_are_refused() {
    let mut c = cluster();
    let id = running(&mut c, 4, false);
    let mut half = step(2);
    half.exact = true;
    assert_eq!(launched(&launch(&mut c, id, half.clone(), 1), 1), Some(0));
    assert_eq!(launched(&launch(&mut c, id, half.clone(), 2), 2), Some(1));
    let fx = launch(&mut c, id, half, 3);
    assert!(matches!(events(&fx, 3)[..], [StepEvent::Pending { .. }]));
    let fx = launch(&mut c, id, step(8), 4);
    assert_eq!(
        events(&fx, 4),
        vec![&StepEvent::Error(SlurmError::Other(
            "More processors requested than permitted".into()
        ))]
    );
    let mut fx = Effects::default();
    c.step_launch(id, vec![step(1)], BOB, 5, 11, &mut fx);
    assert_eq!(
        events(&fx, 5),
        vec![&StepEvent::Error(SlurmError::AccessDenied)]
    );
    let mut fx = Effects::default();
    c.step_launch(999, vec![step(1)], ALICE, 6, 11, &mut fx);
    assert_eq!(
        events(&fx, 6),
        vec![&StepEvent::Error(SlurmError::InvalidJobId)]
    );
}

#[test]
fn io_is_routed_by_token_and_the_end_is_recorded() {
    let mut c = cluster();
    let id = running(&mut c, 2, false);
    let fx = launch(&mut c, id, step(2), 7);
    assert_eq!(launched(&fx, 7), Some(0));
    let fx = node_event(
        &mut c,
        id,
        0,
        StepdEvent::Output {
            task: 1,
            stderr: false,
            data: b"hi\n".to_vec(),
        },
    );
    assert_eq!(
        events(&fx, 7),
        vec![&StepEvent::Output {
            task: 1,
            stderr: false,
            data: b"hi\n".to_vec()
        }]
    );
    // Input from srun goes to the node as stepd input.
    let mut fx = Effects::default();
    c.step_input(7, StepInput::Signal(10), 12, &mut fx);
    assert!(fx.to_agent.iter().any(|(n, m)| n == "n1"
        && matches!(
            m,
            ToAgent::StepInput {
                input: StepdInput::Signal(10),
                step_id: 0,
                ..
            }
        )));
    for (task, code) in [(0, 0), (1, 7)] {
        node_event(
            &mut c,
            id,
            0,
            StepdEvent::TaskExit {
                task,
                status: ExitStatus { code, signal: 0 },
            },
        );
    }
    let mut usage = StepUsage::from_tasks("n1", &[Default::default(), Default::default()]);
    usage.max_rss_kib = 1234;
    let fx = node_event(&mut c, id, 0, StepdEvent::Done { usage });
    assert_eq!(
        events(&fx, 7),
        vec![&StepEvent::Done {
            state: JobState::Failed
        }]
    );
    let j = &c.jobs[&id];
    let rec = j.steps.iter().find(|s| s.id == "0").unwrap();
    assert_eq!(
        (rec.state, rec.exit),
        (JobState::Failed, ExitStatus { code: 7, signal: 0 })
    );
    assert_eq!((rec.max_rss_kib, rec.end_time), (1234, Some(12)));
    assert_eq!(j.derived_exit, ExitStatus { code: 7, signal: 0 });
    assert!(fx.persist.iter().any(|p| p.id == id));
    // The step is gone: later events for it are ignored.
    assert!(node_event(&mut c, id, 0, done()).to_client.is_empty());
}

#[test]
fn scancel_of_a_step_and_the_end_of_its_job() {
    let mut c = cluster();
    let id = running(&mut c, 2, false);
    let mut a = step(1);
    a.exact = true;
    launch(&mut c, id, a.clone(), 1);
    let mut fx = Effects::default();
    let r = c.cancel_steps(&[(id, 0), (id, 5)], None, ALICE, 20, &mut fx);
    assert_eq!(r[0].error, None);
    assert_eq!(r[1].error, Some(SlurmError::InvalidJobId));
    let msg = fx.to_agent.iter().find_map(|(_, m)| match m {
        ToAgent::StepInput {
            input: StepdInput::Terminate { message, .. },
            ..
        } => message.clone(),
        _ => None,
    });
    assert!(
        msg.unwrap()
            .starts_with(&format!("*** STEP {id}.0 ON n1 CANCELLED AT "))
    );
    node_event(
        &mut c,
        id,
        0,
        StepdEvent::TaskExit {
            task: 0,
            status: ExitStatus {
                code: 0,
                signal: 15,
            },
        },
    );
    node_event(&mut c, id, 0, done());
    let rec = c.jobs[&id].steps.iter().find(|s| s.id == "0").unwrap();
    assert_eq!(rec.state, JobState::Cancelled);
    assert_eq!(rec.detail.as_ref().unwrap().cancelled_by, Some(2001));
    let mut fx = Effects::default();
    assert_eq!(
        c.cancel_steps(&[(id, 0)], None, ALICE, 21, &mut fx)[0].error,
        Some(SlurmError::AlreadyDone)
    );
    // Cancelling the job ends its live steps and fails its waiting ones.
    launch(&mut c, id, a.clone(), 2);
    launch(&mut c, id, a.clone(), 3);
    let fx = launch(&mut c, id, a, 4);
    assert!(matches!(events(&fx, 4)[..], [StepEvent::Pending { .. }]));
    let mut fx = Effects::default();
    c.cancel(
        &crate::proto::JobFilter {
            ids: vec![id],
            ..Default::default()
        },
        None,
        SignalScope::Steps,
        ALICE,
        22,
        &mut fx,
    );
    assert_eq!(
        events(&fx, 4),
        vec![&StepEvent::Error(SlurmError::AlreadyDone)]
    );
    let terminated = fx
        .to_agent
        .iter()
        .filter(|(_, m)| {
            matches!(
                m,
                ToAgent::StepInput {
                    input: StepdInput::Terminate { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(terminated, 2);
}

#[test]
fn allocation_only_jobs_start_without_a_script_and_end_on_release() {
    let mut c = cluster();
    let id = running(&mut c, 2, true);
    assert!(c.jobs[&id].steps.is_empty(), "no batch step");
    assert_eq!(c.nodes[0].alloc_cpus, 2);
    let mut fx = Effects::default();
    assert_eq!(
        c.release_allocation(id, ExitStatus { code: 3, signal: 0 }, BOB, 30, &mut fx),
        Err(SlurmError::AccessDenied)
    );
    c.release_allocation(id, ExitStatus { code: 3, signal: 0 }, ALICE, 30, &mut fx)
        .unwrap();
    let j = &c.jobs[&id];
    assert_eq!(
        (j.state, j.exit.code, j.completing),
        (JobState::Failed, 3, false)
    );
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    c.sanity_check().unwrap();
    // An owner that goes away cancels its allocation, and its steps.
    let id = running(&mut c, 1, true);
    launch(&mut c, id, step(1), 9);
    let mut fx = Effects::default();
    c.owner_gone(&[id], ALICE, 40, &mut fx);
    let j = &c.jobs[&id];
    assert_eq!((j.state, j.cancelled_by), (JobState::Cancelled, Some(2001)));
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(
        m,
        ToAgent::StepInput {
            input: StepdInput::Terminate { .. },
            ..
        }
    )));
    // COMPLETING (holding its CPUs) until the step's end, with its usage, comes.
    assert!(c.jobs[&id].completing);
    assert_eq!(c.nodes[0].alloc_cpus, 1);
    node_event(&mut c, id, 0, done());
    assert!(!c.jobs[&id].completing);
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    c.sanity_check().unwrap();
    // A time limit ends an allocation-only job at once (no batch step to wait for).
    let id = running(&mut c, 1, true);
    let mut fx = Effects::default();
    c.tick(10 + 3601, &mut fx);
    assert_eq!(c.jobs[&id].state, JobState::Timeout);
    assert!(!c.jobs[&id].completing);
}

#[test]
fn a_step_past_its_own_time_limit_is_ended_as_timeout() {
    let mut c = cluster();
    let id = running(&mut c, 1, false);
    let mut s = step(1);
    s.time_limit = Some(crate::model::TimeLimit::Minutes(1));
    launch(&mut c, id, s, 1);
    let mut fx = Effects::default();
    c.tick(11 + 59, &mut fx);
    assert!(
        !fx.to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::StepInput { .. }))
    );
    let mut fx = Effects::default();
    c.tick(11 + 60, &mut fx);
    let msg = fx.to_agent.iter().find_map(|(_, m)| match m {
        ToAgent::StepInput {
            input: StepdInput::Terminate { message, .. },
            ..
        } => message.clone(),
        _ => None,
    });
    assert!(msg.unwrap().ends_with("DUE TO TIME LIMIT ***"));
    let mut fx = Effects::default();
    c.tick(11 + 61, &mut fx);
    assert!(fx.to_agent.is_empty(), "terminated once");
    let fx = node_event(&mut c, id, 0, done());
    assert_eq!(
        events(&fx, 1),
        vec![&StepEvent::Done {
            state: JobState::Timeout
        }]
    );
    assert_eq!(c.jobs[&id].state, JobState::Running, "the job goes on");
}

#[test]
fn signal_without_b_goes_to_the_steps_before_the_limit() {
    let mut c = cluster();
    let spec = JobSpec {
        name: "j".into(),
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        time_limit: Some(crate::model::TimeLimit::Minutes(2)),
        signal: Some(crate::model::SignalSpec {
            signal: 10,
            secs_before: 30,
            batch_only: false,
            reservation: false,
        }),
        ..JobSpec::default()
    };
    let j = c.resolve(spec, ALICE, 10, &names).unwrap();
    let mut fx = Effects::default();
    let id = c.submit(j, &mut fx);
    c.schedule(10, &mut fx);
    launch(&mut c, id, step(1), 1);
    let mut fx = Effects::default();
    c.tick(10 + 90, &mut fx);
    assert!(fx.to_agent.iter().any(|(_, m)| matches!(
        m,
        ToAgent::StepInput {
            input: StepdInput::Signal(10),
            ..
        }
    )));
    assert!(
        !fx.to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Signal { .. }))
    );
}

/// `scancel -s USR1` reaches the steps only; `-b` the batch shell only; `-f` the batch
/// shell's process group and the steps, through every node's agent (scancel(1)).
#[test]
fn scancel_signal_scopes_follow_slurm() {
    let mut c = cluster();
    let id = running(&mut c, 2, false);
    let filter = crate::proto::JobFilter {
        ids: vec![id],
        ..Default::default()
    };
    let signal = |c: &mut Cluster, scope| {
        let mut fx = Effects::default();
        let r = c.cancel(&filter, Some(10), scope, ALICE, 12, &mut fx);
        assert_eq!(r[0].error, None);
        let to_steps = fx
            .to_agent
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m,
                    ToAgent::StepInput {
                        input: StepdInput::Signal(10),
                        ..
                    }
                )
            })
            .count();
        let to_batch: Vec<bool> = fx
            .to_agent
            .iter()
            .filter_map(|(_, m)| match m {
                ToAgent::Signal {
                    job_id,
                    signal: 10,
                    batch_only,
                } if *job_id == id => Some(*batch_only),
                _ => None,
            })
            .collect();
        (to_steps, to_batch)
    };
    // No step yet: the default reaches nothing, not even the batch shell.
    assert_eq!(signal(&mut c, SignalScope::Steps), (0, vec![]));
    launch(&mut c, id, step(1), 1);
    assert_eq!(signal(&mut c, SignalScope::Steps), (1, vec![]));
    assert_eq!(signal(&mut c, SignalScope::Batch), (0, vec![true]));
    // -f: the agent signals the batch shell's group and the steps it runs.
    assert_eq!(signal(&mut c, SignalScope::Full), (0, vec![false]));
    assert_eq!(c.jobs[&id].state, JobState::Running);
}

fn seq_event(c: &mut Cluster, job: u32, step: u32, ev: StepdEvent, seq: u64) -> Effects {
    let mut fx = Effects::default();
    c.from_agent(
        "n1",
        FromAgent::Step {
            job_id: job,
            step_id: step,
            event: ev,
            seq,
        },
        12,
        &mut fx,
    );
    fx
}

fn out(text: &str) -> StepdEvent {
    StepdEvent::Output {
        task: 0,
        stderr: false,
        data: text.as_bytes().to_vec(),
    }
}

fn to_n1(fx: &Effects) -> Vec<&ToAgent> {
    fx.to_agent
        .iter()
        .filter(|(n, _)| n == "n1")
        .map(|(_, m)| m)
        .collect()
}

#[test]
fn a_step_whose_node_link_drops_waits_is_readopted_and_drops_replayed_events() {
    let mut c = cluster();
    let id = running(&mut c, 1, true);
    let fx = launch(&mut c, id, step(1), 7);
    assert_eq!(launched(&fx, 7), Some(0));
    let fx = seq_event(&mut c, id, 0, out("a\n"), 1);
    assert_eq!(
        events(&fx, 7),
        vec![&StepEvent::Output {
            task: 0,
            stderr: false,
            data: b"a\n".to_vec()
        }]
    );
    // The link drops: nothing ends, and input waits for the node.
    c.steps_detached_on("n1");
    let mut fx = Effects::default();
    c.step_input(
        7,
        StepInput::Stdin {
            data: b"x\n".to_vec(),
        },
        13,
        &mut fx,
    );
    assert!(fx.to_agent.is_empty(), "{:?}", fx.to_agent);
    assert_eq!(c.steps.live_count(), 1);
    // The node's new agent still runs the step: re-adopted after event 1, with the
    // acknowledgement and the held input.
    let mut fx = Effects::default();
    c.steps_registered("n1", &[(id, 0)], 14, &mut fx);
    assert_eq!(
        to_n1(&fx),
        vec![
            &ToAgent::AdoptStep {
                job_id: id,
                step_id: 0,
                from: 2
            },
            &ToAgent::StepInput {
                job_id: id,
                step_id: 0,
                input: StepdInput::Ack(1)
            },
            &ToAgent::StepInput {
                job_id: id,
                step_id: 0,
                input: StepdInput::Stdin {
                    data: b"x\n".to_vec()
                }
            },
        ]
    );
    // A replay of event 1 is dropped; 2 and 3 pass once.
    assert!(events(&seq_event(&mut c, id, 0, out("a\n"), 1), 7).is_empty());
    assert_eq!(events(&seq_event(&mut c, id, 0, out("b\n"), 2), 7).len(), 1);
    assert!(events(&seq_event(&mut c, id, 0, out("b\n"), 2), 7).is_empty());
    let fx = seq_event(&mut c, id, 0, done(), 3);
    assert_eq!(
        events(&fx, 7),
        vec![&StepEvent::Done {
            state: JobState::Completed
        }]
    );
    // The end is acknowledged at once, so stepd can exit.
    assert!(to_n1(&fx).contains(&&ToAgent::StepInput {
        job_id: id,
        step_id: 0,
        input: StepdInput::Ack(3)
    }));
    // Reported again by a later agent: the controller does not track it any more.
    let mut fx = Effects::default();
    c.steps_registered("n1", &[(id, 0)], 15, &mut fx);
    assert!(matches!(to_n1(&fx)[..], [ToAgent::EndStep { .. }]));
}

#[test]
fn a_step_is_lost_when_its_node_comes_back_without_it_and_node_fail_past_the_timeout() {
    let mut c = cluster();
    let id = running(&mut c, 1, true);
    launch(&mut c, id, step(1), 1);
    c.steps_detached_on("n1");
    let mut fx = Effects::default();
    c.steps_registered("n1", &[], 14, &mut fx);
    assert_eq!(
        events(&fx, 1),
        vec![&StepEvent::Done {
            state: JobState::Cancelled
        }]
    );
    launch(&mut c, id, step(1), 2);
    c.steps_detached_on("n1");
    let mut fx = Effects::default();
    c.steps_node_failed(&["n1".to_string()], 20, &mut fx);
    assert_eq!(
        events(&fx, 2),
        vec![&StepEvent::Done {
            state: JobState::NodeFail
        }]
    );
    assert_eq!(c.steps.live_count(), 0);
}

/// A running heterogeneous allocation of alice's, one component per task count;
/// returns the components' ids, leader first.
fn running_het(c: &mut Cluster, ntasks: &[u32]) -> Vec<u32> {
    let jobs = ntasks
        .iter()
        .map(|&n| {
            let spec = JobSpec {
                name: "j".into(),
                work_dir: "/tmp".into(),
                ntasks: Some(n),
                alloc_only: true,
                ..JobSpec::default()
            };
            c.resolve(spec, ALICE, 10, &names).unwrap()
        })
        .collect();
    let mut fx = Effects::default();
    let leader = c.submit_het(jobs, &mut fx).unwrap();
    c.schedule(10, &mut fx);
    // An allocation has no batch script to launch.
    assert!(
        !fx.to_agent
            .iter()
            .any(|(_, m)| matches!(m, ToAgent::Launch(_)))
    );
    let ids: Vec<u32> = (leader..leader + ntasks.len() as u32).collect();
    for id in &ids {
        assert_eq!(c.jobs[id].state, JobState::Running);
    }
    ids
}

/// Part `k` of a heterogeneous step with `n` tasks.
fn part(n: u32, k: u32) -> StepSpec {
    StepSpec {
        het_group: Some(k),
        ..step(n)
    }
}

fn launch_parts(c: &mut Cluster, job: u32, parts: Vec<StepSpec>, token: u64) -> Effects {
    let mut fx = Effects::default();
    c.step_launch(job, parts, ALICE, token, 11, &mut fx);
    fx
}

fn launches(fx: &Effects) -> Vec<&LaunchStep> {
    fx.to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::LaunchStep(l) => Some(&**l),
            _ => None,
        })
        .collect()
}

#[test]
fn a_het_step_runs_one_part_per_component_with_ranks_across_them() {
    let mut c = cluster();
    let ids = running_het(&mut c, &[2, 1]);
    let (l, k1) = (ids[0], ids[1]);
    let fx = launch_parts(&mut c, l, vec![part(2, 0), part(1, 1)], 1);
    let whole = events(&fx, 1)
        .into_iter()
        .find_map(|e| match e {
            StepEvent::Launched {
                job_id,
                step_id,
                layout,
            } => Some((*job_id, *step_id, layout.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!((whole.0, whole.1, whole.2.ntasks()), (l, 0, 3));
    let ls = launches(&fx);
    assert_eq!(ls.len(), 2);
    let of = |j: u32| *ls.iter().find(|x| x.job.id == j).unwrap();
    assert_eq!(of(l).layout.tasks, vec![vec![0, 1]]);
    assert_eq!(of(k1).layout.tasks, vec![vec![2]]);
    let h = of(k1).het.as_ref().unwrap();
    assert_eq!(
        (h.node_offset, h.parts.clone(), h.step_tasks.clone()),
        (1, vec![0, 1], vec![2, 1])
    );
    assert_eq!(h.components.len(), 2);
    assert_eq!((of(k1).node_id(), of(l).node_id()), (1, 0));
    // Output and exits of the second part reach srun with their global ranks.
    let fx = node_event(
        &mut c,
        k1,
        0,
        StepdEvent::Output {
            task: 2,
            stderr: false,
            data: b"x\n".to_vec(),
        },
    );
    assert!(matches!(
        events(&fx, 1)[..],
        [StepEvent::Output { task: 2, .. }]
    ));
    // srun hears of the end once, when the last part is over, with the worst state.
    node_event(
        &mut c,
        k1,
        0,
        StepdEvent::TaskExit {
            task: 2,
            status: ExitStatus { code: 3, signal: 0 },
        },
    );
    let fx = node_event(&mut c, k1, 0, done());
    assert!(
        !events(&fx, 1)
            .iter()
            .any(|e| matches!(e, StepEvent::Done { .. }))
    );
    let fx = node_event(&mut c, l, 0, done());
    assert_eq!(
        events(&fx, 1),
        vec![&StepEvent::Done {
            state: JobState::Failed
        }]
    );
    let state = |j: u32| c.jobs[&j].steps.iter().find(|s| s.id == "0").unwrap().state;
    assert_eq!(
        (state(l), state(k1)),
        (JobState::Completed, JobState::Failed)
    );
    // The next step of the job, even in one component, takes the next id of all.
    let fx = launch_parts(&mut c, l, vec![part(1, 1)], 2);
    assert_eq!(launched(&fx, 2), Some(1));
    assert_eq!(launches(&fx)[0].job.id, k1);
    // A plain step (no component named) runs in the component the id names.
    let fx = launch(&mut c, l, step(1), 3);
    assert_eq!(launched(&fx, 3), Some(2));
    assert_eq!(launches(&fx)[0].job.id, l);
    assert!(launches(&fx)[0].het.is_some());
}

#[test]
fn het_step_requests_naming_missing_components_are_refused_as_srun_does() {
    let mut c = cluster();
    let ids = running_het(&mut c, &[1, 1]);
    let l = ids[0];
    let err = |fx: &Effects, t: u64| match events(fx, t)[..] {
        [StepEvent::Error(SlurmError::HetGroup(m))] => m.clone(),
        ref other => panic!("{other:?}"),
    };
    let fx = launch_parts(&mut c, l, vec![part(1, 2)], 1);
    assert_eq!(
        err(&fx, 1),
        "Requested het-group offset exceeds highest hetjob index (2 > 1)"
    );
    let fx = launch_parts(&mut c, l, vec![part(1, 0), part(1, 2)], 2);
    assert_eq!(
        err(&fx, 2),
        "Attempt to run a job step with het group value of 2, but the job allocation has maximum value of 1"
    );
    let fx = launch_parts(&mut c, l, vec![part(1, 1), part(1, 1)], 3);
    assert!(err(&fx, 3).contains("component 1 is named twice"));
    let plain = running(&mut c, 1, true);
    let fx = launch_parts(&mut c, plain, vec![part(1, 1)], 4);
    assert_eq!(
        err(&fx, 4),
        "Requested het-group offset exceeds highest hetjob index (1 > 0)"
    );
    let fx = launch_parts(&mut c, plain, vec![part(1, 0), part(1, 1)], 5);
    assert!(err(&fx, 5).contains("not supported yet"));
    assert!(launches(&fx).is_empty());
    // Another user's job is refused before its components are looked at.
    let mut fx = Effects::default();
    c.step_launch(l, vec![part(1, 5)], BOB, 6, 11, &mut fx);
    assert_eq!(
        events(&fx, 6),
        vec![&StepEvent::Error(SlurmError::AccessDenied)]
    );
}

#[test]
fn a_het_step_waits_for_every_part_and_scancel_of_any_component_ends_it() {
    let mut c = cluster();
    let ids = running_het(&mut c, &[1, 1]);
    let (l, k1) = (ids[0], ids[1]);
    // Component 1 is busy with a default step: the het step waits whole.
    let fx = launch_parts(&mut c, l, vec![part(1, 1)], 1);
    assert_eq!(launched(&fx, 1), Some(0));
    let fx = launch_parts(&mut c, l, vec![part(1, 0), part(1, 1)], 2);
    assert!(matches!(events(&fx, 2)[..], [StepEvent::Pending { .. }]));
    assert!(launches(&fx).is_empty());
    let fx = node_event(&mut c, k1, 0, done());
    assert_eq!(launched(&fx, 2), Some(1));
    assert_eq!(launches(&fx).len(), 2);
    // `scancel L+1.1` (sent as component 1's id) ends the parts in both components.
    let mut fx = Effects::default();
    let r = c.cancel_steps(&[(k1, 1)], None, ALICE, 20, &mut fx);
    assert_eq!(r[0].error, None);
    let ended: Vec<u32> = fx
        .to_agent
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::StepInput {
                job_id,
                input: StepdInput::Terminate { .. },
                ..
            } => Some(*job_id),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![l, k1]);
    node_event(&mut c, l, 1, done());
    let fx = node_event(&mut c, k1, 1, done());
    assert_eq!(
        events(&fx, 2),
        vec![&StepEvent::Done {
            state: JobState::Cancelled
        }]
    );
    // Giving the allocation back ends every component.
    let mut fx = Effects::default();
    c.release_allocation(l, ExitStatus::default(), ALICE, 30, &mut fx)
        .unwrap();
    assert_eq!(
        (c.jobs[&l].state, c.jobs[&k1].state),
        (JobState::Completed, JobState::Completed)
    );
}

/// `srun -Z -w n1`: root's step runs on the node without any job: nothing queued or
/// recorded, no CPUs taken; anyone else's launch is refused as slurmd refuses it.
#[test]
fn no_allocate_steps_run_outside_any_job_for_operators_only() {
    let mut c = cluster();
    let spec = StepSpec {
        nodelist: Some("n1".into()),
        no_alloc: true,
        ..step(2)
    };
    let root = Caller { uid: 0, gid: 0 };
    let mut fx = Effects::default();
    c.step_launch_no_alloc(
        spec.clone(),
        root,
        ("root".into(), "root".into()),
        5,
        20,
        &mut fx,
    );
    let ls = launches_on(&fx, "n1");
    assert_eq!(ls.len(), 1);
    let job_id = ls[0].job.id;
    assert!(job_id >= MIN_NOALLOC_JOBID);
    assert_eq!((ls[0].step_id, ls[0].layout.ntasks()), (0, 2));
    assert_eq!(ls[0].job.user, "root");
    assert!(c.jobs.is_empty());
    assert_eq!(c.nodes[0].alloc_cpus, 0);
    assert_eq!(launched(&fx, 5), Some(0));
    // It ends like any step, and leaves no record.
    let fx = node_event(&mut c, job_id, 0, done());
    assert!(matches!(
        events(&fx, 5)[..],
        [StepEvent::Done {
            state: JobState::Completed
        }]
    ));
    assert!(c.jobs.is_empty());
    // Another user: refused on the node, nothing sent.
    let mut fx = Effects::default();
    c.step_launch_no_alloc(
        spec.clone(),
        ALICE,
        ("u".into(), "g".into()),
        6,
        21,
        &mut fx,
    );
    assert!(fx.to_agent.is_empty());
    let ev = events(&fx, 6);
    assert!(matches!(ev[0], StepEvent::Launched { .. }));
    assert!(matches!(
        ev[1],
        StepEvent::LaunchFailed { node, reason, .. } if node == "n1" && reason == INVALID_CREDENTIAL
    ));
    assert!(matches!(
        ev[2],
        StepEvent::Done {
            state: JobState::Failed
        }
    ));
    // Unknown nodes are refused.
    let mut fx = Effects::default();
    let bad = StepSpec {
        nodelist: Some("n9".into()),
        ..spec
    };
    c.step_launch_no_alloc(bad, root, ("root".into(), "root".into()), 7, 22, &mut fx);
    assert!(matches!(
        events(&fx, 7)[..],
        [StepEvent::Error(SlurmError::InvalidNodeName)]
    ));
}
