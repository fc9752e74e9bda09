//! The actor: the one task that owns [`Cluster`], takes [`Msg`]s from the connection
//! and agent-link tasks, answers requests and carries out the reactors' [`Effects`].

use super::state::{self, Caller, Cluster, Effects};
use super::store::{self, StoreOp};
use super::{agents, downtime, names};
use crate::config::Config;
use crate::model::Job;
use crate::model::step::StepSpec;
use crate::proto::{FromAgent, Request, Response, SlurmError, StepEvent, StepInput, ToAgent};
use crate::transport::PeerCred;
use std::collections::HashMap;
use tokio::sync::{mpsc, oneshot};

/// Messages to the actor.
pub(super) enum Msg {
    Client {
        cred: PeerCred,
        /// The caller's user name as the OS gave it for this request (`None`: the uid
        /// has no name), looked up at the edge ([`caller_name`]).
        user: Option<String>,
        req: Request,
        reply: oneshot::Sender<Response>,
    },
    AgentUp {
        node: String,
        reg: FromAgent,
        tx: mpsc::UnboundedSender<ToAgent>,
    },
    Agent {
        node: String,
        msg: FromAgent,
    },
    AgentDown {
        node: String,
    },
    /// A connection asked for a step and became its stream; `relayed` when it came
    /// through a node agent (see [`ClientLog`]).
    StepLaunch {
        cred: PeerCred,
        job_id: u32,
        /// The step's parts (one unless it spans a heterogeneous job's components).
        specs: Vec<StepSpec>,
        token: u64,
        tx: mpsc::UnboundedSender<StepEvent>,
        relayed: bool,
    },
    /// A connection takes back the broken relayed stream of a step; `reply` gets the
    /// stream's token (`None`: there is none to take).
    StepAttach {
        cred: PeerCred,
        job_id: u32,
        step_id: u32,
        received: u64,
        tx: mpsc::UnboundedSender<StepEvent>,
        reply: oneshot::Sender<Option<u64>>,
    },
    StepInput {
        token: u64,
        input: StepInput,
    },
    StepClosed {
        token: u64,
    },
    /// A connection that owned allocation-only jobs closed without releasing them.
    OwnerGone {
        cred: PeerCred,
        jobs: Vec<u32>,
    },
    /// A remote node's link could not be brought up; `reason` says why.
    LinkFailed {
        node: String,
        reason: String,
    },
}

/// Most bytes of step events kept for one relayed srun that has not confirmed them.
const CLIENT_LOG_CAP: usize = 8 << 20;
/// How long a broken relayed step stream waits for its srun to come back before the
/// step is ended as if srun had gone (seconds).
const CLIENT_GRACE: i64 = 120;

/// The events sent on a relayed step stream (an srun on a remote node, whose
/// connection runs through that node's agent and its SSH link) that its srun has not
/// confirmed (`StepInput::Received`). When the relay breaks, the step is not ended:
/// for [`CLIENT_GRACE`] seconds srun may reconnect (`Request::StepAttach`) and get
/// the events it missed, in order, once.
#[derive(Debug)]
pub(super) struct ClientLog {
    uid: u32,
    /// From the stream's `Launched` event.
    step: Option<(u32, u32)>,
    /// Events numbered `start`, `start + 1`, … (counting from the stream's first).
    events: std::collections::VecDeque<StepEvent>,
    start: u64,
    bytes: usize,
    /// The stream ended (`Done` or `Error` was sent).
    ended: bool,
    /// When the connection closed (the relay broke, or srun went away).
    away_since: Option<i64>,
}

impl ClientLog {
    fn event_bytes(ev: &StepEvent) -> usize {
        match ev {
            StepEvent::Output { data, .. } => data.len() + 16,
            _ => 64,
        }
    }

    fn record(&mut self, ev: &StepEvent) {
        if let StepEvent::Launched {
            job_id, step_id, ..
        } = ev
        {
            self.step = Some((*job_id, *step_id));
        }
        self.ended |= matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
        self.bytes += Self::event_bytes(ev);
        self.events.push_back(ev.clone());
        while self.bytes > CLIENT_LOG_CAP && self.events.len() > 1 {
            self.confirm(self.start + 1);
        }
    }

    /// srun has the first `n` events.
    fn confirm(&mut self, n: u64) {
        while self.start < n {
            let Some(ev) = self.events.pop_front() else {
                break;
            };
            self.bytes -= Self::event_bytes(&ev);
            self.start += 1;
        }
    }
}

/// One page of a paged `Request::Jobs` (`filter.page > 0`): the first `filter.page`
/// matching jobs with ids above `filter.after`, in id order, as the query sees them
/// (`Job::for_query`), and whether more may follow.
fn jobs_page(
    jobs: &std::collections::BTreeMap<u32, Box<Job>>,
    filter: &crate::proto::JobFilter,
    now: i64,
) -> Response {
    let page = filter.page as usize;
    let mut out: Vec<Job> = match filter.after.checked_add(1) {
        Some(from) => jobs
            .range(from..)
            .map(|(_, j)| j)
            .filter(|j| filter.matches(j))
            .take(page + 1)
            .map(|j| j.for_query())
            .collect(),
        None => Vec::new(),
    };
    let more = out.len() > page;
    out.truncate(page);
    Response::JobsPage {
        jobs: out,
        now,
        more,
    }
}

pub(super) struct Actor {
    pub(super) cluster: Cluster,
    /// Store ops of this iteration, sent to the store thread in one batch.
    pub(super) store: store::Outbox,
    pub(super) agents: HashMap<String, mpsc::UnboundedSender<ToAgent>>,
    pub(super) declared: HashMap<String, crate::config::NodeConf>,
    pub(super) stop: mpsc::Sender<()>,
    /// srun step streams by token.
    pub(super) streams: HashMap<u64, mpsc::UnboundedSender<StepEvent>>,
    /// Allocate requests answered after this iteration's scheduling pass.
    pub(super) alloc_replies: Vec<(u32, oneshot::Sender<Response>)>,
    /// WaitJob requests: job, wait for start (else end), reply.
    pub(super) waiters: Vec<(u32, bool, oneshot::Sender<Response>)>,
    /// Replies released after this iteration's records are committed.
    pub(super) deferred: Vec<(oneshot::Sender<Response>, Response)>,
    /// Node liveness (SlurmdTimeout, link failures, return to service).
    pub(super) health: agents::Health,
    /// Nodes reached over SSH.
    pub(super) remote: std::collections::HashSet<String>,
    /// Node down intervals for sreport.
    pub(super) downlog: downtime::DownLog,
    /// Relayed step streams by token.
    pub(super) client_logs: HashMap<u64, ClientLog>,
    /// The job each (uid, `JobSpec::submit_token`) submission made, so that a
    /// submission sbatch retries after losing the answer is answered with the same job
    /// (rebuilt from the job records at start; pruned as jobs are purged).
    pub(super) submissions: HashMap<(u32, u64), u32>,
}

/// The id a submission of `j` was answered with: its array's or heterogeneous
/// job's id for a task or component, else its own.
fn submitted_id(j: &Job) -> u32 {
    if j.array_job_id != 0 {
        j.array_job_id
    } else {
        j.het.map_or(j.id, |h| h.job_id)
    }
}

impl Actor {
    /// Fills [`Actor::submissions`] from the jobs the controller holds.
    pub(super) fn remember_submissions(&mut self) {
        self.submissions = self
            .cluster
            .jobs
            .values()
            .filter(|j| j.spec.submit_token != 0)
            .map(|j| ((j.uid, j.spec.submit_token), submitted_id(j)))
            .collect();
    }

    /// Notes the job a submission made; forgets those of purged jobs now and then, so
    /// the map stays within twice the job count.
    fn note_submission(&mut self, uid: u32, token: u64, id: u32) {
        if token == 0 {
            return;
        }
        self.submissions.insert((uid, token), id);
        if self.submissions.len() > 2 * self.cluster.jobs.len() + 1024 {
            let jobs = &self.cluster.jobs;
            self.submissions.retain(|_, id| jobs.contains_key(id));
        }
    }

    /// The job an earlier copy of this submission already made, if it is still known.
    fn resubmitted(&self, uid: u32, token: u64) -> Option<u32> {
        if token == 0 {
            return None;
        }
        let id = *self.submissions.get(&(uid, token))?;
        self.cluster.jobs.contains_key(&id).then_some(id)
    }

    /// `scontrol reconfigure`: reads the config file again and applies it
    /// ([`Cluster::reconfigure`]); the node declarations agents register against
    /// take the new features, weight and tmp_disk.
    ///
    /// Errors: personal mode (no file), a file that does not load, or a change that
    /// needs a restart; nothing changes then.
    fn reconfigure(&mut self) -> Result<(), String> {
        let Some(path) = self.cluster.config_source.clone() else {
            return Err("personal mode has no config file to read".into());
        };
        let cfg = Config::from_file(&path).map_err(|e| e.to_string())?;
        for n in &cfg.nodes {
            if let Some(d) = self.declared.get(&n.name) {
                state::node_identity_unchanged(d, n)?;
            }
        }
        self.cluster.reconfigure(&cfg)?;
        for n in &cfg.nodes {
            if let Some(d) = self.declared.get_mut(&n.name) {
                d.features.clone_from(&n.features);
                d.weight = n.weight;
                d.tmp_disk = n.tmp_disk;
            }
        }
        Ok(())
    }

    pub(super) fn handle(&mut self, msg: Msg, fx: &mut Effects) {
        let now = crate::cli::timefmt::now();
        match msg {
            Msg::Client {
                cred,
                user,
                req,
                reply,
            } => self.on_request(cred, user, req, reply, now, fx),
            Msg::AgentUp { node, reg, tx } => {
                tracing::info!(node, "agent registered");
                self.agents.insert(node.clone(), tx);
                let steps = match &reg {
                    FromAgent::Register { steps, .. } => steps.clone(),
                    _ => Vec::new(),
                };
                let declared = self
                    .declared
                    .get(&node)
                    .cloned()
                    .unwrap_or_else(|| crate::config::NodeConf::named(&node));
                self.cluster.agent_registered(reg, &declared, now, fx);
                self.cluster.steps_registered(&node, &steps, now, fx);
                self.health.registered(&mut self.cluster.nodes, &node, now);
                fx.to_agent.push((
                    node.clone(),
                    ToAgent::Configure {
                        cgroup: self.cluster.cgroup.clone(),
                        scripts: self.cluster.scripts.clone(),
                    },
                ));
            }
            Msg::Agent { node, msg } => {
                if self.agents.contains_key(&node)
                    && self.health.heard(&mut self.cluster.nodes, &node, now)
                {
                    tracing::info!(node, "node responds again");
                    fx.schedule = true;
                }
                self.cluster.from_agent(&node, msg, now, fx)
            }
            Msg::AgentDown { node } => {
                tracing::warn!(node, "agent link lost");
                self.agents.remove(&node);
                self.cluster.agent_lost(&node);
                self.cluster.steps_detached_on(&node);
            }
            Msg::StepLaunch {
                cred,
                job_id,
                specs,
                token,
                tx,
                relayed,
            } => {
                self.streams.insert(token, tx);
                if relayed {
                    self.client_logs.insert(
                        token,
                        ClientLog {
                            uid: cred.uid,
                            step: None,
                            events: Default::default(),
                            start: 0,
                            bytes: 0,
                            ended: false,
                            away_since: None,
                        },
                    );
                }
                let c = Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                };
                if specs.first().is_some_and(|s| s.no_alloc) {
                    // `srun -Z`: one part, run outside any job.
                    let names = user_group_names(cred.uid, cred.gid);
                    let spec = specs.into_iter().next().expect("one part at least");
                    self.cluster
                        .step_launch_no_alloc(spec, c, names, token, now, fx);
                } else {
                    self.cluster.step_launch(job_id, specs, c, token, now, fx);
                }
            }
            Msg::StepAttach {
                cred,
                job_id,
                step_id,
                received,
                tx,
                reply,
            } => {
                let operator = self.cluster.is_operator(Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                });
                let found = self.client_logs.iter_mut().find(|(_, l)| {
                    l.step == Some((job_id, step_id))
                        && l.away_since.is_some()
                        && (l.uid == cred.uid || operator)
                });
                let Some((&token, log)) = found else {
                    let _ = reply.send(None);
                    return;
                };
                tracing::info!(
                    job_id,
                    step_id,
                    received,
                    "srun re-attached its step stream"
                );
                log.away_since = None;
                log.confirm(received);
                let _ = tx.send(StepEvent::Reattached);
                for ev in &log.events {
                    let _ = tx.send(ev.clone());
                }
                if !log.ended {
                    self.streams.insert(token, tx);
                }
                let _ = reply.send(Some(token));
            }
            Msg::StepInput {
                token,
                input: StepInput::Received(n),
            } => {
                if let Some(l) = self.client_logs.get_mut(&token) {
                    l.confirm(n);
                }
            }
            Msg::StepInput { token, input } => self.cluster.step_input(token, input, now, fx),
            Msg::StepClosed { token } => {
                self.streams.remove(&token);
                if let Some(l) = self.client_logs.get_mut(&token) {
                    // Held for a re-attach (a relay that broke), or for a while after
                    // the end in case the last events were lost with the relay.
                    l.away_since.get_or_insert(now);
                    return;
                }
                self.cluster.step_stream_closed(token, now, fx);
            }
            Msg::OwnerGone { cred, jobs } => {
                let c = Caller {
                    uid: cred.uid,
                    gid: cred.gid,
                };
                self.cluster.owner_gone(&jobs, c, now, fx);
            }
            Msg::LinkFailed { node, reason } => {
                self.agents.remove(&node);
                self.health
                    .link_failed(&mut self.cluster.nodes, &node, &reason, now);
            }
        }
    }

    /// Answers Allocate requests (after the scheduling pass that may have started
    /// their jobs) and WaitJob requests whose condition now holds.
    pub(super) fn resolve_waiters(&mut self) {
        for (id, reply) in std::mem::take(&mut self.alloc_replies) {
            let resp = match self.cluster.jobs.get(&id) {
                Some(j) => Response::Allocation(Box::new(Job::clone(j))),
                None => Response::Error(SlurmError::InvalidJobId),
            };
            self.deferred.push((reply, resp));
        }
        let jobs = &self.cluster.jobs;
        let mut keep = Vec::new();
        for (id, started, reply) in std::mem::take(&mut self.waiters) {
            if reply.is_closed() {
                continue;
            }
            match jobs.get(&id) {
                None => self
                    .deferred
                    .push((reply, Response::Error(SlurmError::InvalidJobId))),
                Some(j)
                    if (started && j.state != crate::model::JobState::Pending)
                        || (!started && !j.is_active()) =>
                {
                    self.deferred
                        .push((reply, Response::Allocation(Box::new(Job::clone(j)))))
                }
                Some(_) => keep.push((id, started, reply)),
            }
        }
        self.waiters = keep;
    }

    fn on_request(
        &mut self,
        cred: PeerCred,
        user: Option<String>,
        req: Request,
        reply: oneshot::Sender<Response>,
        now: i64,
        fx: &mut Effects,
    ) {
        let c = Caller {
            uid: cred.uid,
            gid: cred.gid,
        };
        // Coordinators and accounting admins are known by name: the caller's, as the
        // OS names the uid for this very request (a renamed or removed user is seen
        // at once; nothing is kept from an earlier request).
        self.cluster.groups.note_name(c.uid, user.clone());
        // A retry of a submission whose answer was lost: the same job again.
        if let Request::Submit {
            spec,
            test_only: false,
            ..
        } = &req
            && let Some(id) = self.resubmitted(c.uid, spec.submit_token)
        {
            tracing::info!(
                job_id = id,
                uid = c.uid,
                "submission retried; answered with the job it made"
            );
            self.store
                .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
            return;
        }
        let resp = match req {
            Request::Ping => Response::Ok,
            Request::Submit {
                spec,
                test_only,
                het,
            } if !het.is_empty() => {
                let mut jobs = Vec::new();
                let mut err = None;
                let token = spec.submit_token;
                refresh_groups(&mut self.cluster, c);
                for s in std::iter::once(*spec).chain(het) {
                    match self.cluster.resolve(s, c, now, &user_group_names) {
                        Ok(j) => jobs.push(j),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                match err {
                    Some(e) => Response::Error(e),
                    None if test_only => {
                        Response::TestOnly(self.cluster.test_only(jobs.swap_remove(0), now))
                    }
                    None => match self.cluster.submit_het(jobs, fx) {
                        Err(e) => Response::Error(e),
                        Ok(id) => {
                            self.note_submission(c.uid, token, id);
                            self.apply_persist(fx);
                            self.store
                                .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
                            return;
                        }
                    },
                }
            }
            Request::Submit {
                spec, test_only, ..
            } => {
                refresh_groups(&mut self.cluster, c);
                match self.cluster.resolve(*spec, c, now, &user_group_names) {
                    Err(e) => Response::Error(e),
                    Ok(job) if test_only => Response::TestOnly(self.cluster.test_only(job, now)),
                    Ok(job) if job.spec.immediate && !self.cluster.can_start_now(&job, now) => {
                        Response::Error(SlurmError::CannotStartImmediately)
                    }
                    Ok(job) => {
                        let token = job.spec.submit_token;
                        let id = self.cluster.submit(job, fx);
                        self.note_submission(c.uid, token, id);
                        // The reply waits for the commit of this job's record.
                        self.apply_persist(fx);
                        self.store
                            .send(StoreOp::Reply(reply, Response::Submitted { job_id: id }));
                        return;
                    }
                }
            }
            Request::Jobs(filter) if filter.page > 0 => jobs_page(&self.cluster.jobs, &filter, now),
            Request::Jobs(filter) => Response::Jobs {
                jobs: self
                    .cluster
                    .jobs
                    .values()
                    .filter(|j| filter.matches(j))
                    .map(|j| j.for_query())
                    .collect(),
                now,
            },
            Request::Nodes => Response::Nodes {
                nodes: self.cluster.nodes_for_query(now),
                partitions: self.cluster.partitions_shown(),
                now,
            },
            Request::Cancel {
                filter,
                signal,
                batch_only,
                full,
            } => {
                let scope = state::SignalScope::of(batch_only, full);
                Response::Results(self.cluster.cancel(&filter, signal, scope, c, now, fx))
            }
            Request::Hold {
                ids,
                user_hold,
                array_tasks,
            } => Response::Results(self.cluster.hold(&ids, &array_tasks, user_hold, c, fx)),
            Request::Release { ids, array_tasks } => {
                Response::Results(self.cluster.release(&ids, &array_tasks, c, now, fx))
            }
            Request::Requeue {
                ids,
                hold,
                array_tasks,
            } => Response::Results(self.cluster.requeue(&ids, &array_tasks, hold, c, now, fx)),
            Request::Suspend {
                ids,
                array_tasks,
                resume,
            } => Response::Results(self.cluster.suspend(&ids, &array_tasks, resume, c, now, fx)),
            Request::UpdateJob { id, updates, tasks } => {
                match self
                    .cluster
                    .update_job_at(id, tasks.as_ref(), &updates, c, now, fx)
                {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::UpdateNode { names, update } => {
                match self.cluster.update_node(&names, &update, c, now, fx) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::Acct(q) => {
                // Answered by the store after the writes queued so far.
                self.apply_persist(fx);
                self.store.send(StoreOp::Query(q, reply, now));
                return;
            }
            Request::Config => Response::Config(self.config_pairs()),
            Request::Topology => {
                Response::Topology(Box::new(self.cluster.sched_cfg.topology.clone()))
            }
            Request::Priority { ids, users } => {
                let (rows, weights) = self.cluster.priority_rows(&ids, &users, now);
                Response::Priority { rows, weights }
            }
            Request::Stats => Response::Stats(Box::new(self.cluster.stats_at(now))),
            Request::Shares => Response::Shares {
                rows: self.cluster.share_rows(now),
                cluster: self.cluster.cluster_name.clone(),
            },
            Request::Allocate { spec, het, .. } => {
                refresh_groups(&mut self.cluster, c);
                let mut jobs = Vec::new();
                let mut err = None;
                for mut s in std::iter::once(*spec).chain(het) {
                    s.alloc_only = true;
                    match self.cluster.resolve(s, c, now, &user_group_names) {
                        Ok(j) => jobs.push(j),
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                // A heterogeneous allocation is scheduled as sbatch's het jobs are.
                let id = match err {
                    Some(e) => Err(e),
                    None if jobs.len() == 1 => Ok(self.cluster.submit(jobs.swap_remove(0), fx)),
                    None => self.cluster.submit_het(jobs, fx),
                };
                match id {
                    Err(e) => Response::Error(e),
                    Ok(id) => {
                        self.alloc_replies.push((id, reply));
                        return;
                    }
                }
            }
            Request::WaitJob { job_id, started } => {
                if !self.cluster.jobs.contains_key(&job_id) {
                    Response::Error(SlurmError::InvalidJobId)
                } else {
                    self.waiters.push((job_id, started, reply));
                    return;
                }
            }
            Request::ReleaseAllocation { job_id, exit } => {
                match self.cluster.release_allocation(job_id, exit, c, now, fx) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::Error(e),
                }
            }
            Request::StepLaunch { .. } | Request::StepAttach { .. } => {
                Response::Error(SlurmError::Other("step launch out of place".into()))
            }
            Request::CancelSteps {
                steps,
                signal,
                het_steps,
            } => {
                let mut out = self.cluster.cancel_steps(&steps, signal, c, now, fx);
                out.extend(
                    self.cluster
                        .cancel_het_steps(&het_steps, signal, c, now, fx),
                );
                Response::Results(out)
            }
            Request::AcctTree => Response::AcctTree {
                tree: Box::new(self.cluster.assoc.clone()),
                cluster: self.cluster.cluster_name.clone(),
                enforce: self.cluster.enforce(),
            },
            Request::AcctChange { op, commit } => {
                let user = user.unwrap_or_else(|| c.uid.to_string());
                match self.cluster.acct_change(&op, commit, c, &user) {
                    Err(e) => Response::Error(e),
                    Ok(out) if commit && out.changed => {
                        // Pending jobs are re-evaluated against the new limits; the
                        // reply waits for the tree's commit.
                        fx.schedule = true;
                        self.apply_persist(fx);
                        let tree = Box::new(self.cluster.assoc.clone());
                        self.store.send(StoreOp::PutAssoc(tree));
                        self.store
                            .send(StoreOp::Reply(reply, Response::AcctChanged(out)));
                        return;
                    }
                    Ok(out) => Response::AcctChanged(out),
                }
            }
            Request::CreateResv(spec) => match self.cluster.create_resv(&spec, c, now, fx) {
                Ok(name) => Response::ResvCreated { name },
                Err(e) => Response::Error(e),
            },
            Request::UpdateResv(spec) => match self.cluster.update_resv(&spec, c, now, fx) {
                Ok(()) => Response::Ok,
                Err(e) => Response::Error(e),
            },
            Request::DeleteResv { name } => match self.cluster.delete_resv(&name, c, now, fx) {
                Ok(()) => Response::Ok,
                Err(e) => Response::Error(e),
            },
            Request::Reservations => Response::Reservations {
                resvs: self.cluster.resv.list.clone(),
                now,
            },
            Request::Usage { start, end } => {
                // The store adds job records and past reservation windows after the
                // writes queued so far.
                self.apply_persist(fx);
                self.persist_resvs();
                let rep = crate::proto::UsageReport {
                    cluster: self.cluster.cluster_name.clone(),
                    nodes: self
                        .cluster
                        .nodes
                        .iter()
                        .map(|n| (n.name.clone(), n.cpus))
                        .collect(),
                    resvs: self.cluster.resv.list.clone(),
                    down: self.downlog.pending(now),
                    now,
                    ..Default::default()
                };
                self.store
                    .send(StoreOp::Usage(start, end, Box::new(rep), reply));
                return;
            }
            Request::Reconfigure => {
                if self.cluster.is_operator(c) {
                    match self.reconfigure() {
                        Ok(()) => {
                            // Agents run Prolog/Epilog/HealthCheckProgram from what they
                            // were last sent: send every connected one the new scripts.
                            for node in self.agents.keys() {
                                fx.to_agent.push((
                                    node.clone(),
                                    ToAgent::Configure {
                                        cgroup: self.cluster.cgroup.clone(),
                                        scripts: self.cluster.scripts.clone(),
                                    },
                                ));
                            }
                            fx.schedule = true;
                            Response::Ok
                        }
                        Err(e) => {
                            tracing::warn!("reconfigure refused: {e}");
                            Response::Error(SlurmError::Other(e))
                        }
                    }
                } else {
                    Response::Error(SlurmError::AccessDenied)
                }
            }
            Request::BatchScript { job_id } => match self.cluster.jobs.get(&job_id) {
                None => Response::Error(SlurmError::InvalidJobId),
                Some(j) if j.uid != c.uid && !self.cluster.is_operator(c) => {
                    Response::Error(SlurmError::AccessDenied)
                }
                Some(j) if j.spec.alloc_only => Response::Error(SlurmError::NotBatch),
                Some(j) => Response::BatchScript(j.spec.script.clone()),
            },
            Request::SetDebug { level } => {
                if !self.cluster.is_operator(c) {
                    Response::Error(SlurmError::AccessDenied)
                } else {
                    match crate::logsink::set_level(&level) {
                        Ok(()) => Response::Ok,
                        Err(e) => Response::Error(SlurmError::Other(e)),
                    }
                }
            }
            Request::Shutdown => {
                if self.cluster.is_operator(c) {
                    let _ = self.stop.try_send(());
                    Response::Ok
                } else {
                    Response::Error(SlurmError::AccessDenied)
                }
            }
        };
        // Replies to requests that changed state also wait for their records' commit.
        if self.persist_resvs() {
            self.apply_persist(fx);
            self.store.send(StoreOp::Reply(reply, resp));
        } else if fx.persist.is_empty() {
            let _ = reply.send(resp);
        } else {
            self.apply_persist(fx);
            self.store.send(StoreOp::Reply(reply, resp));
        }
    }

    fn config_pairs(&self) -> Vec<(String, String)> {
        let c = &self.cluster;
        let mut v = c.config_entries.clone();
        v.push(("KillWait".into(), format!("{} sec", c.kill_wait)));
        v.push(("MinJobAge".into(), format!("{} sec", c.min_job_age)));
        v.push(("SLURM_VERSION".into(), c.slurm_version.clone()));
        v.push(("AccountingStorageEnforce".into(), c.enforce().as_text()));
        v.sort();
        v
    }

    /// Marks nodes silent past SlurmdTimeout DOWN, and drops remote ones' links so that
    /// they reconnect.
    ///
    /// Their jobs end NODE_FAIL or are requeued (`Cluster::nodes_failed`), as Slurm does
    /// with the jobs of a node that misses SlurmdTimeout.
    pub(super) fn check_health(&mut self, now: i64, fx: &mut Effects) {
        let silent = self.health.check(&mut self.cluster.nodes, now);
        for node in &silent {
            tracing::warn!(node, "node not responding; set DOWN");
            if self.remote.contains(node) {
                self.agents.remove(node);
            }
        }
        if !silent.is_empty() {
            self.cluster.steps_node_failed(&silent, now, fx);
            self.cluster.nodes_failed(&silent, now, fx);
        }
    }

    /// Relayed step streams whose srun stayed away past [`CLIENT_GRACE`]: forgotten,
    /// and a step still running ends as if its srun had gone.
    pub(super) fn expire_client_logs(&mut self, now: i64, fx: &mut Effects) {
        let expired: Vec<(u64, bool)> = self
            .client_logs
            .iter()
            .filter(|(_, l)| l.away_since.is_some_and(|t| now - t >= CLIENT_GRACE))
            .map(|(t, l)| (*t, l.ended))
            .collect();
        for (token, ended) in expired {
            self.client_logs.remove(&token);
            if !ended {
                tracing::warn!(
                    token,
                    "srun of a relayed step did not come back; ending the step"
                );
                self.cluster.step_stream_closed(token, now, fx);
            }
        }
    }

    fn apply_persist(&mut self, fx: &mut Effects) {
        for j in fx.persist.drain(..) {
            self.store.send(StoreOp::Put(Box::new(j)));
        }
        if let Some(l) = fx.usage.take() {
            self.store.send(StoreOp::PutFsUsage(l));
        }
    }

    /// Sends changed reservations and used windows to the store; whether there were any.
    fn persist_resvs(&mut self) -> bool {
        let mut any = false;
        if let Some(list) = self.cluster.resv.take_dirty() {
            self.store.send(StoreOp::Resvs(list));
            any = true;
        }
        for r in self.cluster.resv.take_history() {
            self.store.send(StoreOp::ResvHistory(r));
            any = true;
        }
        any
    }

    pub(super) fn apply(&mut self, mut fx: Effects) {
        self.apply_persist(&mut fx);
        self.persist_resvs();
        for (reply, resp) in self.deferred.drain(..) {
            self.store.send(StoreOp::Reply(reply, resp));
        }
        // Agents hear of this iteration's launches and signals only after its records
        // (and everything before them) are committed: see `StoreOp::Forward`.
        let mut forward = Vec::with_capacity(fx.to_agent.len());
        for (node, msg) in fx.to_agent.drain(..) {
            match self.agents.get(&node) {
                Some(tx) => forward.push((tx.clone(), msg)),
                None => tracing::warn!(node, ?msg, "no agent link for node; message dropped"),
            }
        }
        if !forward.is_empty() {
            self.store.send(StoreOp::Forward(forward));
        }
        self.store.flush();
        for (token, ev) in fx.to_client.drain(..) {
            let last = matches!(ev, StepEvent::Done { .. } | StepEvent::Error(_));
            if let Some(l) = self.client_logs.get_mut(&token) {
                l.record(&ev);
            }
            if let Some(tx) = self.streams.get(&token) {
                let _ = tx.send(ev);
            }
            if last {
                self.streams.remove(&token);
            }
        }
        if cfg!(debug_assertions)
            && let Err(e) = self.cluster.sanity_check()
        {
            tracing::error!("state invariant broken: {e}");
        }
    }
}

/// Looks up, for partitions' AllowGroups, the gid of each group name they list and
/// the caller's groups (`getgrouplist`), into `cluster.groups`: the I/O half of the
/// check `state::GroupView::admits` makes. Nothing is looked up when no partition
/// has AllowGroups.
fn refresh_groups(cluster: &mut Cluster, c: Caller) {
    use nix::unistd::{Gid, Group, Uid, User};
    let names: Vec<String> = cluster
        .partitions
        .iter()
        .filter_map(|p| p.allow_groups.as_ref())
        .flatten()
        .cloned()
        .collect();
    if names.is_empty() {
        return;
    }
    for n in names {
        match Group::from_name(&n) {
            Ok(Some(g)) => {
                cluster.groups.gid_of.insert(n, g.gid.as_raw());
            }
            _ => {
                cluster.groups.gid_of.remove(&n);
            }
        }
    }
    let mut gids = vec![c.gid];
    if let Ok(Some(u)) = User::from_uid(Uid::from_raw(c.uid))
        && let Ok(name) = std::ffi::CString::new(u.name)
        && let Ok(list) = nix::unistd::getgrouplist(&name, Gid::from_raw(c.gid))
    {
        gids.extend(list.into_iter().map(|g| g.as_raw()));
    }
    cluster.groups.member_gids.insert(c.uid, gids);
}

/// Looks up user and group names for a uid/gid (numbers when unknown).
fn user_group_names(uid: u32, gid: u32) -> (String, String) {
    let user = names::user_name(uid).unwrap_or_else(|| uid.to_string());
    let group = names::group_name(gid).unwrap_or_else(|| gid.to_string());
    (user, group)
}

#[cfg(test)]
mod page_tests {
    use super::*;
    use crate::model::JobState;
    use crate::proto::JobFilter;

    #[test]
    fn job_pages_cover_each_matching_job_once_in_id_order() {
        let mut jobs = std::collections::BTreeMap::new();
        for id in 1..=7u32 {
            let j = Job {
                id,
                state: if id % 3 == 0 {
                    JobState::Completed
                } else {
                    JobState::Pending
                },
                spec: crate::model::JobSpec {
                    script: "#!/bin/sh\ntrue\n".into(),
                    ..Default::default()
                },
                ..Job::default()
            };
            jobs.insert(id, Box::new(j));
        }
        let mut f = JobFilter {
            active_only: true,
            page: 2,
            ..JobFilter::default()
        };
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            pages += 1;
            let Response::JobsPage { jobs: p, now, more } = jobs_page(&jobs, &f, 9) else {
                panic!("not a page")
            };
            assert_eq!(now, 9);
            assert!(p.len() <= 2);
            assert!(p.iter().all(|j| j.spec.script.is_empty()));
            seen.extend(p.iter().map(|j| j.id));
            match p.last() {
                Some(l) if more => f.after = l.id,
                _ => break,
            }
        }
        // 1 2 | 4 5 | 7: the finished ones (3, 6) are filtered out.
        assert_eq!(seen, vec![1, 2, 4, 5, 7]);
        assert_eq!(pages, 3);
        // The cursor at the end of the id space gives an empty last page.
        f.after = u32::MAX;
        assert_eq!(
            jobs_page(&jobs, &f, 9),
            Response::JobsPage {
                jobs: vec![],
                now: 9,
                more: false
            }
        );
    }
}
