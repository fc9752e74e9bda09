//! The PMI server of a `--mpi=pmi2` step on one node (cf. Slurm's mpi/pmi2 plugin,
//! which serves the same two wire protocols from slurmstepd).
//!
//! Each local task gets one end of a socket pair as `PMI_FD` (with `PMI_RANK`,
//! `PMI_SIZE`, `PMI_JOBID`); stepd keeps the other end in its poll loop. A connection
//! speaks the PMI-1 wire protocol (newline-terminated `cmd=NAME key=value …` lines,
//! what MPICH's built-in client speaks by default) or PMI-2's (a six-character decimal
//! length, then `cmd=NAME;key=value;…;`), told apart by its first bytes; a PMI-1
//! `init` asking for version 2 switches the connection to PMI-2 framing.
//!
//! Key-value pairs a task puts become visible to every task of the step at the next
//! fence (PMI-1 `barrier_in`, PMI-2 `kvs-fence`): once every live local task entered
//! it, this node's new pairs go up as [`StepdEvent::PmiFence`]; the controller answers
//! every node with the union ([`Server::fence_done`]), and the waiting tasks are
//! released. Node attributes (PMI-2 `info-putnodeattr`) are local and immediate.
//! `PMI_process_mapping` (MPICH's node layout) is served as a job attribute.
//!
//! Bounds: a request line longer than [`MAX_REQUEST`] closes its connection; replies
//! wait in a per-connection buffer (written when the socket takes them), so a task
//! that does not read cannot block stepd. Spawn, publish and lookup are answered with
//! an error (`rc=-1`).

use crate::model::mpi::process_mapping;
use crate::proto::{LaunchStep, StepdEvent};
use nix::errno::Errno;
use nix::poll::PollFlags;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

/// Longest request accepted, in bytes (a PMI-2 length field allows 999,999).
pub const MAX_REQUEST: usize = 1 << 20;
/// Longest key and value advertised to PMI-1 clients (`get_maxes`); MPICH splits
/// longer values into several keys itself.
const KEYLEN_MAX: usize = 256;
const VALLEN_MAX: usize = 1024;

/// Framing of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    V1,
    V2,
}

/// One parsed request: its command and attributes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub cmd: String,
    pub attrs: Vec<(String, String)>,
}

impl Request {
    fn get(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses a PMI-1 line (without its newline): space-separated `key=value` tokens, the
/// first `cmd=` (or `mcmd=`). A backslash keeps the next character in the value (and
/// stays in it: values are stored and returned as sent). `None` if it is not a PMI-1
/// request.
pub fn parse_v1(line: &str) -> Option<Request> {
    let line = line.trim_end_matches(['\n', '\r']);
    if !(line.starts_with("cmd=") || line.starts_with("mcmd=")) {
        return None;
    }
    let mut tokens = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ' ' => {
                if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    let mut it = tokens.into_iter();
    let first = it.next()?;
    let (_, cmd) = first.split_once('=')?;
    let attrs = it
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (t, String::new()),
        })
        .collect();
    Some(Request {
        cmd: cmd.to_string(),
        attrs,
    })
}

/// Parses a PMI-2 message body (after its six-character length): `cmd=NAME;k=v;…;`.
/// `None` if it does not start with `cmd=`.
pub fn parse_v2(body: &str) -> Option<Request> {
    let mut parts = body.split(';').filter(|p| !p.is_empty());
    let cmd = parts.next()?.strip_prefix("cmd=")?.to_string();
    let attrs = parts
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect();
    Some(Request { cmd, attrs })
}

/// Formats a reply in `wire`'s framing.
fn format(wire: Wire, cmd: &str, attrs: &[(&str, String)]) -> Vec<u8> {
    match wire {
        Wire::V1 => {
            let mut s = format!("cmd={cmd}");
            for (k, v) in attrs {
                s.push(' ');
                s.push_str(k);
                s.push('=');
                s.push_str(v);
            }
            s.push('\n');
            s.into_bytes()
        }
        Wire::V2 => {
            let mut s = format!("cmd={cmd};");
            for (k, v) in attrs {
                s.push_str(k);
                s.push('=');
                s.push_str(v);
                s.push(';');
            }
            format!("{:>6}{s}", s.len()).into_bytes()
        }
    }
}

/// Splits one complete request off the front of `buf`: its framing and text.
/// `Ok(None)`: not complete yet. `Err`: not PMI, or too long.
fn take_request(buf: &mut Vec<u8>, wire: Option<Wire>) -> Result<Option<(Wire, String)>, ()> {
    let v1 = match wire {
        Some(w) => w == Wire::V1,
        None => {
            if buf.len() < 4 {
                return Ok(None);
            }
            buf.starts_with(b"cmd=") || buf.starts_with(b"mcmd")
        }
    };
    if v1 {
        // A multi-line `mcmd=` (PMI-1 spawn) ends with `endcmd`; taken line by line
        // here, it is answered with an error.
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let line: Vec<u8> = buf.drain(..=i).collect();
                Ok(Some((
                    Wire::V1,
                    String::from_utf8_lossy(&line).into_owned(),
                )))
            }
            None if buf.len() > MAX_REQUEST => Err(()),
            None => Ok(None),
        }
    } else {
        if buf.len() < 6 {
            return Ok(None);
        }
        let len: usize = std::str::from_utf8(&buf[..6])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or(())?;
        if len > MAX_REQUEST {
            return Err(());
        }
        if buf.len() < 6 + len {
            return Ok(None);
        }
        let msg: Vec<u8> = buf.drain(..6 + len).collect();
        Ok(Some((
            Wire::V2,
            String::from_utf8_lossy(&msg[6..]).into_owned(),
        )))
    }
}

/// One task's connection.
struct Conn {
    rank: u32,
    fd: OwnedFd,
    wire: Option<Wire>,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// Waiting in the fence; the reply command and the `thrid` to echo.
    fence: Option<(String, Option<String>)>,
    /// `info-getnodeattr` with `wait=TRUE` for a key not yet put: key, `thrid`.
    node_wait: Vec<(String, Option<String>)>,
    /// Finalized, closed, or broken: no longer counted in fences.
    gone: bool,
}

/// A step's PMI server on this node; see the module docs.
pub struct Server {
    kvsname: String,
    size: u32,
    mapping: String,
    conns: Vec<Conn>,
    /// Every pair made visible by a completed fence.
    kvs: HashMap<String, String>,
    /// Pairs put here since the last fence.
    pending: BTreeMap<String, String>,
    node_attrs: HashMap<String, String>,
    /// The last fence completed (0: none).
    seq: u32,
    /// This node reported fence `seq + 1` and waits for the controller.
    reported: bool,
}

/// What a task needs to reach the server: its environment and its end of the socket
/// pair (close-on-exec; the child clears the flag on its copy before exec).
pub struct TaskEnd {
    pub env: Vec<(String, String)>,
    pub fd: OwnedFd,
}

impl Server {
    /// The server for `ls`'s tasks on this node: the step's rank count and layout.
    pub fn new(ls: &LaunchStep) -> Server {
        let size: u32 = ls.layout.tasks.iter().map(|t| t.len() as u32).sum();
        let mut node_of = vec![0u32; size as usize];
        for (n, ranks) in ls.layout.tasks.iter().enumerate() {
            for &r in ranks {
                if let Some(x) = node_of.get_mut(r as usize) {
                    *x = n as u32;
                }
            }
        }
        Server {
            kvsname: format!("{}.{}", ls.job.id, ls.step_id),
            size,
            mapping: process_mapping(&node_of),
            conns: Vec::new(),
            kvs: HashMap::new(),
            pending: BTreeMap::new(),
            node_attrs: HashMap::new(),
            seq: 0,
            reported: false,
        }
    }

    /// A connection for task `rank`. Errors: the socket pair could not be made.
    pub fn add_task(&mut self, rank: u32) -> std::io::Result<TaskEnd> {
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (mine, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        )
        .map_err(std::io::Error::from)?;
        // The task's end blocks, as PMI clients expect.
        nix::fcntl::fcntl(
            theirs.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )
        .map_err(std::io::Error::from)?;
        let env = vec![
            ("PMI_FD".to_string(), theirs.as_raw_fd().to_string()),
            ("PMI_RANK".to_string(), rank.to_string()),
            ("PMI_SIZE".to_string(), self.size.to_string()),
            ("PMI_JOBID".to_string(), self.kvsname.clone()),
            ("SLURM_MPI_TYPE".to_string(), "pmi2".to_string()),
        ];
        self.conns.push(Conn {
            rank,
            fd: mine,
            wire: None,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            fence: None,
            node_wait: Vec::new(),
            gone: false,
        });
        Ok(TaskEnd { env, fd: theirs })
    }

    /// Task `rank` did not start: it takes no part in fences.
    pub fn task_failed(&mut self, rank: u32) {
        for c in self.conns.iter_mut().filter(|c| c.rank == rank) {
            c.gone = true;
        }
    }

    /// The fds to poll and for what, in the order [`Server::service`] expects.
    pub fn poll_fds(&self) -> Vec<(BorrowedFd<'_>, PollFlags)> {
        self.conns
            .iter()
            .filter(|c| !c.gone || !c.outbuf.is_empty())
            .map(|c| {
                let mut f = PollFlags::empty();
                if !c.gone {
                    f |= PollFlags::POLLIN;
                }
                if !c.outbuf.is_empty() {
                    f |= PollFlags::POLLOUT;
                }
                (c.fd.as_fd(), f)
            })
            .collect()
    }

    /// Serves the connections `ready` marks (same order as [`Server::poll_fds`]);
    /// returns what to send to the controller.
    pub fn service(&mut self, ready: &[bool]) -> Vec<StepdEvent> {
        let idx: Vec<usize> = (0..self.conns.len())
            .filter(|&i| !self.conns[i].gone || !self.conns[i].outbuf.is_empty())
            .collect();
        let mut events = Vec::new();
        for (slot, &i) in idx.iter().enumerate() {
            if !ready.get(slot).copied().unwrap_or(false) {
                continue;
            }
            self.read_conn(i, &mut events);
            flush(&mut self.conns[i]);
        }
        if let Some(e) = self.maybe_report() {
            events.push(e);
        }
        events
    }

    /// The controller says every node reached fence `seq`: `kvs` becomes visible and
    /// the waiting tasks are released.
    pub fn fence_done(&mut self, seq: u32, kvs: Vec<(String, String)>) {
        if seq != self.seq + 1 || !self.reported {
            return;
        }
        self.seq = seq;
        self.reported = false;
        self.kvs.extend(kvs);
        for c in &mut self.conns {
            if let Some((cmd, thrid)) = c.fence.take() {
                let wire = c.wire.unwrap_or(Wire::V1);
                let mut a = vec![("rc", "0".to_string())];
                if let Some(t) = thrid {
                    a.push(("thrid", t));
                }
                c.outbuf.extend(format(wire, &cmd, &a));
                flush(c);
            }
        }
    }

    /// The fence report, once every live local task is in the fence.
    fn maybe_report(&mut self) -> Option<StepdEvent> {
        if self.reported {
            return None;
        }
        let live: Vec<&Conn> = self.conns.iter().filter(|c| !c.gone).collect();
        let waiting = self.conns.iter().filter(|c| c.fence.is_some()).count();
        if waiting == 0 || live.iter().any(|c| c.fence.is_none()) {
            return None;
        }
        self.reported = true;
        Some(StepdEvent::PmiFence {
            seq: self.seq + 1,
            kvs: std::mem::take(&mut self.pending).into_iter().collect(),
        })
    }

    fn read_conn(&mut self, i: usize, events: &mut Vec<StepdEvent>) {
        let mut buf = [0u8; 16384];
        loop {
            let c = &mut self.conns[i];
            if c.gone {
                return;
            }
            match nix::unistd::read(c.fd.as_raw_fd(), &mut buf) {
                Ok(0) => {
                    c.gone = true;
                    c.fence = None;
                    return;
                }
                Ok(n) => c.inbuf.extend_from_slice(&buf[..n]),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(_) => {
                    c.gone = true;
                    c.fence = None;
                    return;
                }
            }
        }
        loop {
            let c = &mut self.conns[i];
            let wire = c.wire;
            match take_request(&mut c.inbuf, wire) {
                Ok(Some((w, text))) => {
                    if c.wire.is_none() {
                        c.wire = Some(w);
                    }
                    let req = match w {
                        Wire::V1 => parse_v1(&text),
                        Wire::V2 => parse_v2(&text),
                    };
                    match req {
                        Some(r) => self.handle(i, w, r, events),
                        None => {
                            self.conns[i].gone = true;
                            return;
                        }
                    }
                }
                Ok(None) => return,
                Err(()) => {
                    c.gone = true;
                    c.fence = None;
                    return;
                }
            }
        }
    }

    fn handle(&mut self, i: usize, wire: Wire, r: Request, events: &mut Vec<StepdEvent>) {
        let rank = self.conns[i].rank;
        let thrid = r.get("thrid").map(str::to_string);
        let reply = |c: &mut Conn, cmd: &str, mut a: Vec<(&str, String)>| {
            if let Some(t) = &thrid {
                a.push(("thrid", t.clone()));
            }
            c.outbuf.extend(format(wire, cmd, &a));
        };
        let ok = || ("rc", "0".to_string());
        let size = self.size.to_string();
        match (wire, r.cmd.as_str()) {
            (Wire::V1, "init") => {
                let c = &mut self.conns[i];
                if r.get("pmi_version") == Some("2") {
                    reply(
                        c,
                        "response_to_init",
                        vec![
                            ("pmi_version", "2".into()),
                            ("pmi_subversion", "0".into()),
                            ok(),
                        ],
                    );
                    c.wire = Some(Wire::V2);
                } else {
                    reply(
                        c,
                        "response_to_init",
                        vec![
                            ("pmi_version", "1".into()),
                            ("pmi_subversion", "1".into()),
                            ok(),
                        ],
                    );
                }
            }
            (Wire::V1, "get_maxes") => reply(
                &mut self.conns[i],
                "maxes",
                vec![
                    ("kvsname_max", "256".into()),
                    ("keylen_max", KEYLEN_MAX.to_string()),
                    ("vallen_max", VALLEN_MAX.to_string()),
                    ok(),
                ],
            ),
            (Wire::V1, "get_appnum") => reply(
                &mut self.conns[i],
                "appnum",
                vec![("appnum", "0".into()), ok()],
            ),
            (Wire::V1, "get_universe_size") => reply(
                &mut self.conns[i],
                "universe_size",
                vec![("size", size), ok()],
            ),
            (Wire::V1, "get_my_kvsname") => reply(
                &mut self.conns[i],
                "my_kvsname",
                vec![("kvsname", self.kvsname.clone()), ok()],
            ),
            (Wire::V1, "put") | (Wire::V2, "kvs-put") => {
                if let (Some(k), Some(v)) = (r.get("key"), r.get("value")) {
                    self.pending.insert(k.to_string(), v.to_string());
                }
                let cmd = if wire == Wire::V1 {
                    "put_result"
                } else {
                    "kvs-put-response"
                };
                reply(&mut self.conns[i], cmd, vec![ok()]);
            }
            (Wire::V1, "get") | (Wire::V2, "kvs-get") | (Wire::V2, "info-getjobattr") => {
                let key = r.get("key").unwrap_or("");
                let value = if key == "PMI_process_mapping" {
                    Some(self.mapping.clone())
                } else {
                    self.kvs.get(key).cloned()
                };
                let c = &mut self.conns[i];
                match (wire, value) {
                    (Wire::V1, Some(v)) => {
                        reply(c, "get_result", vec![ok(), ("value", v)]);
                    }
                    (Wire::V1, None) => reply(
                        c,
                        "get_result",
                        vec![("rc", "-1".into()), ("msg", format!("key_{key}_not_found"))],
                    ),
                    (_, v) => {
                        let cmd = format!("{}-response", r.cmd);
                        let found = if v.is_some() { "TRUE" } else { "FALSE" };
                        let mut a = vec![ok(), ("found", found.to_string())];
                        if let Some(v) = v {
                            a.push(("value", v));
                        }
                        reply(c, &cmd, a);
                    }
                }
            }
            (Wire::V1, "barrier_in") | (Wire::V2, "kvs-fence") => {
                let cmd = if wire == Wire::V1 {
                    "barrier_out"
                } else {
                    "kvs-fence-response"
                };
                self.conns[i].fence = Some((cmd.to_string(), thrid.clone()));
            }
            (Wire::V1, "finalize") | (Wire::V2, "finalize") => {
                let cmd = if wire == Wire::V1 {
                    "finalize_ack"
                } else {
                    "finalize-response"
                };
                let c = &mut self.conns[i];
                reply(c, cmd, vec![ok()]);
                c.gone = true;
            }
            (_, "abort") => {
                let msg = r.get("message").unwrap_or("").replace("\\ ", " ");
                let code = r.get("exitcode").unwrap_or("1");
                events.push(StepdEvent::Output {
                    task: rank,
                    stderr: true,
                    data: format!("PMI: task {rank} aborted (exit code {code}): {msg}\n")
                        .into_bytes(),
                });
            }
            (Wire::V2, "fullinit") => reply(
                &mut self.conns[i],
                "fullinit-response",
                vec![
                    ok(),
                    ("pmi-version", "2".into()),
                    ("pmi-subversion", "0".into()),
                    ("rank", rank.to_string()),
                    ("size", size),
                    ("appnum", "0".into()),
                    ("debugged", "FALSE".into()),
                    ("pmiverbose", "FALSE".into()),
                ],
            ),
            (Wire::V2, "job-getid") => reply(
                &mut self.conns[i],
                "job-getid-response",
                vec![ok(), ("jobid", self.kvsname.clone())],
            ),
            (Wire::V2, "info-putnodeattr") => {
                if let (Some(k), Some(v)) = (r.get("key"), r.get("value")) {
                    self.node_attrs.insert(k.to_string(), v.to_string());
                    // Release the tasks waiting for it.
                    for c in &mut self.conns {
                        let w = c.wire.unwrap_or(Wire::V2);
                        let (now, keep): (Vec<_>, Vec<_>) =
                            c.node_wait.drain(..).partition(|(key, _)| key == k);
                        c.node_wait = keep;
                        for (_, t) in now {
                            let mut a = vec![ok(), ("found", "TRUE".into()), ("value", v.into())];
                            if let Some(t) = t {
                                a.push(("thrid", t));
                            }
                            c.outbuf.extend(format(w, "info-getnodeattr-response", &a));
                            flush(c);
                        }
                    }
                }
                reply(&mut self.conns[i], "info-putnodeattr-response", vec![ok()]);
            }
            (Wire::V2, "info-getnodeattr") => {
                let key = r.get("key").unwrap_or("").to_string();
                let wait = r
                    .get("wait")
                    .is_some_and(|w| w.eq_ignore_ascii_case("TRUE"));
                match self.node_attrs.get(&key).cloned() {
                    Some(v) => reply(
                        &mut self.conns[i],
                        "info-getnodeattr-response",
                        vec![ok(), ("found", "TRUE".into()), ("value", v)],
                    ),
                    None if wait => self.conns[i].node_wait.push((key, thrid.clone())),
                    None => reply(
                        &mut self.conns[i],
                        "info-getnodeattr-response",
                        vec![ok(), ("found", "FALSE".into())],
                    ),
                }
            }
            (_, cmd) => {
                // Spawn, name service and anything unknown: an error the client can
                // report, rather than silence it would wait on forever.
                let name = match (wire, cmd) {
                    (Wire::V1, "spawn") => "spawn_result".to_string(),
                    (Wire::V1, "publish_name") => "publish_result".to_string(),
                    (Wire::V1, "unpublish_name") => "unpublish_result".to_string(),
                    (Wire::V1, "lookup_name") => "lookup_result".to_string(),
                    (Wire::V1, c) => c.to_string(),
                    (Wire::V2, c) => format!("{c}-response"),
                };
                reply(
                    &mut self.conns[i],
                    &name,
                    vec![
                        ("rc", "-1".into()),
                        ("msg", format!("{cmd}_not_supported_by_sluice")),
                    ],
                );
            }
        }
    }
}

/// Writes what the socket takes of `c`'s replies.
fn flush(c: &mut Conn) {
    while !c.outbuf.is_empty() {
        match nix::unistd::write(c.fd.as_fd(), &c.outbuf) {
            Ok(n) => {
                c.outbuf.drain(..n);
            }
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return,
            Err(_) => {
                c.outbuf.clear();
                c.gone = true;
                c.fence = None;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_lines_parse() {
        let r = parse_v1("cmd=put kvsname=7.0 key=k value=a\\ b\n").unwrap();
        assert_eq!(r.cmd, "put");
        assert_eq!(r.get("key"), Some("k"));
        assert_eq!(r.get("value"), Some("a\\ b"));
        assert_eq!(parse_v1("cmd=barrier_in").unwrap().cmd, "barrier_in");
        assert_eq!(parse_v1("hello"), None);
    }

    #[test]
    fn v2_messages_parse_and_format() {
        let r = parse_v2("cmd=kvs-put;key=a;value=b=c;thrid=0x1;").unwrap();
        assert_eq!(r.cmd, "kvs-put");
        assert_eq!(r.get("value"), Some("b=c"));
        assert_eq!(r.get("thrid"), Some("0x1"));
        let out = format(Wire::V2, "kvs-put-response", &[("rc", "0".into())]);
        assert_eq!(out, b"    26cmd=kvs-put-response;rc=0;".to_vec());
        let out = format(Wire::V1, "barrier_out", &[("rc", "0".into())]);
        assert_eq!(out, b"cmd=barrier_out rc=0\n".to_vec());
    }

    #[test]
    fn requests_split_by_framing() {
        let mut b = b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_ma".to_vec();
        let (w, t) = take_request(&mut b, None).unwrap().unwrap();
        assert_eq!(w, Wire::V1);
        assert_eq!(t, "cmd=init pmi_version=1 pmi_subversion=1\n");
        assert_eq!(take_request(&mut b, Some(Wire::V1)), Ok(None));
        let mut b = b"    14cmd=kvs-fence;extra".to_vec();
        let (w, t) = take_request(&mut b, None).unwrap().unwrap();
        assert_eq!((w, t.as_str()), (Wire::V2, "cmd=kvs-fence;"));
        assert_eq!(b, b"extra".to_vec());
        let mut bad = b"zzzzzzzz".to_vec();
        assert_eq!(take_request(&mut bad, None), Err(()));
    }
}
