//! The actor: the one task that owns [`Cluster`], takes [`Msg`]s from the connection
//! and agent-link tasks, answers requests and carries out the reactors' [`Effects`].

use super::handlers::{self, Later, Reply};
use super::state::{Caller, Cluster, Effects};
use super::store::{self, StoreOp};
use super::{agents, downtime, names};
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
    pub(super) submissions: handlers::submit::Submissions,
}

impl Actor {
    pub(super) fn handle(&mut self, msg: Msg, fx: &mut Effects) {
        let now = crate::common::timefmt::now();
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
                    tracing::info!("Node {node} now responding");
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

    /// A front-end's request: its handler ([`handlers::dispatch`]) runs on the state,
    /// then its reply is routed.
    fn on_request(
        &mut self,
        cred: PeerCred,
        user: Option<String>,
        req: Request,
        reply: oneshot::Sender<Response>,
        now: i64,
        fx: &mut Effects,
    ) {
        let mut cx = handlers::Ctx {
            cluster: &mut self.cluster,
            fx,
            caller: Caller {
                uid: cred.uid,
                gid: cred.gid,
            },
            user,
            now,
            submissions: &mut self.submissions,
            declared: &mut self.declared,
            downlog: &self.downlog,
            names: &user_group_names,
            refresh_groups: &refresh_groups,
            control: handlers::Control::default(),
        };
        let out = handlers::dispatch(&mut cx, req);
        let control = cx.control;
        if control.configure_agents {
            for node in self.agents.keys() {
                fx.to_agent.push((
                    node.clone(),
                    ToAgent::Configure {
                        cgroup: self.cluster.cgroup.clone(),
                        scripts: self.cluster.scripts.clone(),
                    },
                ));
            }
        }
        if control.stop {
            let _ = self.stop.try_send(());
        }
        self.route(out, reply, fx);
    }

    /// Sends a handler's reply when it says: the one place replies are routed.
    pub(super) fn route(&mut self, out: Reply, reply: oneshot::Sender<Response>, fx: &mut Effects) {
        match out {
            // Replies to requests that changed state also wait for their records' commit.
            Reply::Now(resp) => {
                if self.persist_resvs() || !fx.persist.is_empty() {
                    self.apply_persist(fx);
                    self.store.send(StoreOp::Reply(reply, resp));
                } else {
                    let _ = reply.send(resp);
                }
            }
            Reply::AfterCommit(resp) => {
                self.apply_persist(fx);
                self.store.send(StoreOp::Reply(reply, resp));
            }
            Reply::Later(Later::Allocation(id)) => self.alloc_replies.push((id, reply)),
            Reply::Later(Later::Wait { job_id, started }) => {
                self.waiters.push((job_id, started, reply))
            }
            Reply::Later(Later::Acct { query, now: at }) => {
                self.apply_persist(fx);
                self.store.send(StoreOp::Query(query, reply, at));
            }
            Reply::Later(Later::Usage { start, end, report }) => {
                self.apply_persist(fx);
                self.persist_resvs();
                self.store.send(StoreOp::Usage(start, end, report, reply));
            }
            Reply::Later(Later::AssocCommit(resp)) => {
                self.apply_persist(fx);
                let tree = Box::new(self.cluster.acct.assoc.clone());
                self.store.send(StoreOp::PutAssoc(tree));
                self.store.send(StoreOp::Reply(reply, resp));
            }
        }
    }

    /// Marks nodes silent past SlurmdTimeout DOWN, and drops remote ones' links so that
    /// they reconnect.
    ///
    /// Their jobs end NODE_FAIL or are requeued (`Cluster::nodes_failed`), as Slurm does
    /// with the jobs of a node that misses SlurmdTimeout.
    pub(super) fn check_health(&mut self, now: i64, fx: &mut Effects) {
        let silent = self.health.check(&mut self.cluster.nodes, now);
        if !silent.is_empty() {
            // slurmctld's ping_nodes.
            let list = crate::model::hostlist::compress(&silent);
            tracing::error!("Nodes {list} not responding, setting DOWN");
        }
        for node in &silent {
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
