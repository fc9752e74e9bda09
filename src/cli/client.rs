//! How a front-end reaches the controller: a Unix socket, identity by SO_PEERCRED.
//! In personal mode a missing controller is started in the background on first use
//! (DESIGN.md §1); the controller's lock on its state directory makes a race of two
//! auto-starts harmless.

use crate::config::{Config, Mode};
use crate::proto::codec::{SyncFramed, frame};
use crate::proto::{Hello, JobFilter, ProtoError, Request, Response, Role, SlurmError};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Why a front-end could not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nobody listens on the socket (and, in personal mode, starting one failed).
    #[error("Unable to contact slurm controller (connect failure)")]
    Unreachable { hint: Option<String> },
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("Socket timed out on send/recv operation ({0})")]
    Proto(#[from] ProtoError),
}

impl ClientError {
    /// A line saying how to fix the problem, when there is one to give.
    pub fn hint(&self) -> Option<&str> {
        match self {
            ClientError::Unreachable { hint } => hint.as_deref(),
            _ => None,
        }
    }
}

/// A connection to the controller.
///
/// Our hello leaves in the same write as the first request, and the controller's hello
/// is read just before the first answer: a one-request front-end (sbatch) pays one
/// round trip, not two.
pub struct Client {
    framed: SyncFramed<UnixStream>,
    /// Our hello, framed, until it leaves with the first request.
    hello_out: Vec<u8>,
    /// The controller's hello has not been read (and checked) yet.
    hello_pending: bool,
}

/// How long a front-end waits for an answer before giving up.
const RECV_TIMEOUT: Duration = Duration::from_secs(60);

impl Client {
    /// Loads the configuration and connects, starting a personal controller if needed.
    pub fn connect() -> Result<(Client, Config), ClientError> {
        let cfg = Config::load()?;
        let c = Client::connect_with(&cfg)?;
        Ok((c, cfg))
    }

    /// Connects using `cfg`; in personal mode starts the controller when none answers.
    ///
    /// With `SLUICE_SOCKET` set (a job on a remote node, whose agent relays to the
    /// controller) that socket is the only one tried, and no controller is started.
    pub fn connect_with(cfg: &Config) -> Result<Client, ClientError> {
        if let Some(relay) =
            std::env::var_os(crate::config::RELAY_SOCKET_VAR).filter(|s| !s.is_empty())
        {
            let mut relayed = cfg.clone();
            relayed.socket = relay.into();
            // The agent's socket, not a personal controller's: no owner checks.
            relayed.mode = Mode::System;
            // The relay's answer is awaited here (not with the first request) so that
            // a node cut off from the controller is reported as such.
            let client =
                Client::try_connect(&relayed).and_then(|mut c| c.finish_handshake().map(|()| c));
            return client.map_err(|e| ClientError::Unreachable {
                hint: Some(format!(
                    "sluice: this node's agent does not answer on {} ({}); is the node still connected to the controller?",
                    relayed.socket.display(),
                    e.hint().map(str::to_string).unwrap_or_else(|| e.to_string())
                )),
            });
        }
        match Client::try_connect(cfg) {
            Ok(c) => return Ok(c),
            Err(e) if cfg.mode == Mode::System => {
                // The OS's reason (no such file, permission denied), not Slurm's
                // "Unable to contact" again: the front-end prints that line already.
                let why = e
                    .hint()
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string());
                let start = match &cfg.source {
                    Some(p) if p != std::path::Path::new(crate::config::SYSTEM_CONF) => {
                        format!("SLUICE_CONF={} sluice controller", p.display())
                    }
                    _ => "sluice controller".to_string(),
                };
                return Err(ClientError::Unreachable {
                    hint: Some(format!(
                        "sluice: no controller answers on {} ({why}); start it as root: {start}",
                        cfg.socket.display(),
                    )),
                });
            }
            Err(_) => {}
        }
        Client::start_controller(cfg)
    }

    /// Connects to the controller of `cfg` if one answers; never starts one.
    ///
    /// Errors: `Unreachable` (with the OS's reason as hint) when none answers.
    pub fn connect_existing(cfg: &Config) -> Result<Client, ClientError> {
        Client::try_connect(cfg)
    }

    /// Connects to the controller of `cfg`, starting it in the background first when
    /// none answers (personal auto-start, and `sluice controller` in either mode).
    ///
    /// Errors: `Unreachable` with a hint when the controller cannot be spawned, exits
    /// (the error it stopped with is quoted from its log), or does not answer within 10 s.
    pub fn start_controller(cfg: &Config) -> Result<Client, ClientError> {
        Client::start_controller_verbose(cfg, 0)
    }

    /// [`Client::start_controller`] with `verbose` times `-v` for the controller
    /// (`sluice controller -v`: its log level that many steps above slurmctld_debug).
    pub fn start_controller_verbose(cfg: &Config, verbose: usize) -> Result<Client, ClientError> {
        if let Ok(c) = Client::try_connect(cfg) {
            return Ok(c);
        }
        let log = cfg.state_dir.join("controller.log");
        // The log is appended to across starts: only what this start wrote counts.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let mut child = spawn_controller(cfg, verbose).map_err(|e| ClientError::Unreachable {
            hint: Some(format!("sluice: could not start a controller: {e}")),
        })?;
        let mut deadline = Instant::now() + Duration::from_secs(10);
        let mut failed = false;
        loop {
            match Client::try_connect(cfg) {
                Ok(c) => return Ok(c),
                Err(e) if Instant::now() >= deadline => {
                    let why = if failed {
                        controller_error(&log, from).unwrap_or_else(|| "it exited".into())
                    } else {
                        e.hint()
                            .map(str::to_string)
                            .unwrap_or_else(|| e.to_string())
                    };
                    return Err(ClientError::Unreachable {
                        hint: Some(format!(
                            "sluice: the controller did not start ({why}); see {}",
                            log.display()
                        )),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
            // A controller that exits at once either lost a start race (another one
            // holds the state lock and is about to answer: keep waiting) or refused to
            // start (a bad database, say): then wait a little, not the full 10 s.
            if !failed && matches!(child.try_wait(), Ok(Some(st)) if !st.success()) {
                failed = true;
                let lost_race = controller_error(&log, from).is_some_and(|l| l.contains(LOCK_HELD));
                if !lost_race {
                    deadline = deadline.min(Instant::now() + Duration::from_secs(2));
                }
            }
        }
    }

    /// Connects to `cfg.socket`; in personal mode, failing that, to the socket the
    /// controller of `cfg.state_dir` recorded (one started meanwhile from another
    /// environment, e.g. by a command that won the start race: `config::personal`).
    /// Never starts a controller (what `sluice doctor` needs). Errors: `Unreachable`
    /// when none answers.
    pub(crate) fn try_connect(cfg: &Config) -> Result<Client, ClientError> {
        let first = Client::try_connect_to(cfg, &cfg.socket);
        if first.is_err()
            && cfg.mode == Mode::Personal
            && let Some(rec) = crate::config::personal::recorded_socket(&cfg.state_dir)
            && rec != cfg.socket
        {
            return Client::try_connect_to(cfg, &rec).or(first);
        }
        first
    }

    fn try_connect_to(cfg: &Config, socket: &std::path::Path) -> Result<Client, ClientError> {
        if cfg.mode == Mode::Personal {
            // Never talk to a socket another user could have planted.
            if let Some(dir) = socket.parent() {
                crate::transport::check_socket_dir(dir).map_err(|e| ClientError::Unreachable {
                    hint: Some(e.to_string()),
                })?;
            }
        }
        let s = UnixStream::connect(socket).map_err(|e| ClientError::Unreachable {
            hint: Some(match e.raw_os_error() {
                Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
                None => e.to_string(),
            }),
        })?;
        if cfg.mode == Mode::Personal {
            let me = nix::unistd::geteuid().as_raw();
            let peer = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
                .map(|c| c.uid())
                .map_err(|e| ClientError::Unreachable {
                    hint: Some(format!("cannot identify the controller: {e}")),
                })?;
            if peer != me && peer != 0 {
                return Err(ClientError::Unreachable {
                    hint: Some(format!(
                        "the process on {} runs as uid {peer}, not as you (uid {me}); refusing to talk to it",
                        socket.display()
                    )),
                });
            }
        }
        s.set_read_timeout(Some(RECV_TIMEOUT)).ok();
        Ok(Client {
            framed: SyncFramed::new(s),
            hello_out: frame(&Hello::new(Role::Client))?,
            hello_pending: true,
        })
    }

    /// Reads and checks the controller's hello if that is still to be done.
    ///
    /// Errors: the connection closed, or the peer is not a controller of a protocol
    /// version this build speaks.
    fn finish_handshake(&mut self) -> Result<(), ClientError> {
        if !self.hello_out.is_empty() {
            self.framed
                .send_framed(&std::mem::take(&mut self.hello_out))?;
        }
        if self.hello_pending {
            let peer: Hello = self.framed.recv()?;
            peer.check(&[Role::Controller])?;
            self.hello_pending = false;
        }
        Ok(())
    }

    /// The connection itself, for a step stream (no read timeout: a step may be quiet
    /// for as long as it likes), once the controller's hello has been checked.
    ///
    /// Errors: as the handshake's (see [`Client::request`]).
    pub fn into_stream(mut self) -> Result<UnixStream, ClientError> {
        self.finish_handshake()?;
        let s = self.framed.into_inner();
        let _ = s.set_read_timeout(None);
        Ok(s)
    }

    /// Like [`Client::request`] for a request whose answer may take arbitrarily long
    /// (waiting for a job to start or end): no read timeout.
    pub fn request_waiting(&mut self, req: &Request) -> Result<Response, ClientError> {
        let _ = self.framed.get_ref().set_read_timeout(None);
        let r = self.request(req);
        let _ = self.framed.get_ref().set_read_timeout(Some(RECV_TIMEOUT));
        r
    }

    /// `Request::Jobs(filter)` fetched in pages of [`JOBS_PAGE`] jobs and answered as
    /// one `Response::Jobs` (the first page's `now`), so that a very long queue never
    /// sits whole, as one reply, in the controller's memory. Any other answer (an
    /// error; an older controller's single `Jobs` reply) is returned as it came.
    pub fn request_jobs(&mut self, filter: &JobFilter) -> Result<Response, ClientError> {
        let mut f = filter.clone();
        f.page = JOBS_PAGE;
        f.after = 0;
        let mut all = Vec::new();
        let mut first_now = None;
        loop {
            match self.request(&Request::Jobs(f.clone()))? {
                Response::JobsPage { jobs, now, more } => {
                    let now = *first_now.get_or_insert(now);
                    let last = jobs.last().map(|j| j.id);
                    all.extend(jobs);
                    match last {
                        Some(id) if more => f.after = id,
                        _ => return Ok(Response::Jobs { jobs: all, now }),
                    }
                }
                other => return Ok(other),
            }
        }
    }

    /// Like [`Client::request_waiting`], but every 100 ms without an answer it calls
    /// `interrupted`; when that returns true the wait is given up and `Ok(None)` is
    /// returned (the connection is then out of step and should be dropped). srun and
    /// salloc use it to act on Ctrl-C while an allocation is pending.
    ///
    /// Errors: as [`Client::request`].
    pub fn request_interruptible(
        &mut self,
        req: &Request,
        mut interrupted: impl FnMut() -> bool,
    ) -> Result<Option<Response>, ClientError> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let mut out = std::mem::take(&mut self.hello_out);
        out.extend_from_slice(&frame(req)?);
        self.framed.send_framed(&out)?;
        self.finish_handshake()?;
        loop {
            let ready = {
                let fd = self.framed.get_ref().as_fd();
                let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::from(100u8)) {
                    Ok(n) => n > 0,
                    Err(nix::errno::Errno::EINTR) => false,
                    Err(e) => {
                        return Err(ClientError::Proto(ProtoError::Io(std::io::Error::from(e))));
                    }
                }
            };
            if ready {
                let _ = self.framed.get_ref().set_read_timeout(None);
                let r = self.framed.recv();
                let _ = self.framed.get_ref().set_read_timeout(Some(RECV_TIMEOUT));
                return Ok(Some(r?));
            }
            if interrupted() {
                return Ok(None);
            }
        }
    }

    /// One request, one response. A controller-side error arrives as `Ok(Response::Error)`.
    /// The first request also reads the controller's hello (sent before the answer);
    /// a peer that is not a compatible controller gives `Err(Proto)`.
    pub fn request(&mut self, req: &Request) -> Result<Response, ClientError> {
        if may_signal_own_job(req) && std::env::var_os("SLURM_JOB_ID").is_some() {
            shield_from_job_signals();
        }
        let mut out = std::mem::take(&mut self.hello_out);
        out.extend_from_slice(&frame(req)?);
        self.framed.send_framed(&out)?;
        self.finish_handshake()?;
        Ok(self.framed.recv()?)
    }
}

/// Whether `req` can make the controller signal a job (cancel, requeue, suspend) or
/// change one that is running (hold, update): a front-end run inside that very job
/// must still get its answer.
fn may_signal_own_job(req: &Request) -> bool {
    matches!(
        req,
        Request::Cancel { .. }
            | Request::CancelSteps { .. }
            | Request::Requeue { .. }
            | Request::Suspend { .. }
            | Request::Hold { .. }
            | Request::Release { .. }
            | Request::UpdateJob { .. }
    )
}

/// Blocks, for the rest of this process's short life, the signals a job's processes
/// receive when it is cancelled, requeued or signalled (SIGTERM, SIGCONT's companions,
/// `scancel --signal`'s), so that `scontrol requeue $SLURM_JOB_ID` or `scancel
/// $SLURM_JOB_ID` run inside the job reads its answer and exits 0 as with slurmctld,
/// whose answer reaches the command before slurmd signals the job. A signal that
/// arrives meanwhile stays pending and is discarded when the command exits; SIGKILL
/// (KillWait later) still ends it. Faults stay deliverable, and so does SIGINT on a
/// terminal (Ctrl-C of an interactive command).
fn shield_from_job_signals() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut set = SigSet::all();
    for s in [
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGFPE,
        Signal::SIGILL,
        Signal::SIGTRAP,
        Signal::SIGABRT,
        Signal::SIGSYS,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGWINCH,
    ] {
        set.remove(s);
    }
    if nix::unistd::isatty(0).unwrap_or(false) {
        set.remove(Signal::SIGINT);
    }
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

/// Jobs per page of [`Client::request_jobs`]: a few MiB of reply each.
pub const JOBS_PAGE: u32 = 2000;

/// Starts `sluice controller --detached` (it leaves this session) with its output going
/// to the controller log in the state directory.
fn spawn_controller(cfg: &Config, verbose: usize) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let named = |what: &str, path: &std::path::Path, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
    };
    std::fs::create_dir_all(&cfg.state_dir)
        .map_err(|e| named("create state directory", &cfg.state_dir, e))?;
    let log = {
        use std::os::unix::fs::OpenOptionsExt;
        // The log names other users' files in system mode: private to the controller.
        let path = cfg.state_dir.join("controller.log");
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| named("open", &path, e))?
    };
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0("sluice")
        .arg("controller")
        .arg("--detached")
        .args(std::iter::repeat_n("-v", verbose))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some(src) = &cfg.source {
        cmd.env("SLUICE_CONF", src);
    }
    if cfg.mode == Mode::Personal {
        // The state directory this command found, whatever else the environment says.
        cmd.env(crate::config::personal::STATE_DIR_VAR, &cfg.state_dir);
    }
    cmd.spawn()
}

/// What a controller that finds the state directory locked says (`ctld::run`).
pub const LOCK_HELD: &str = "another controller already uses";

/// The error a controller stopped with, from its log: the last `sluice controller: …`
/// message (the one `ctld::cli_main` prints on a fatal error; a message of several
/// lines is joined), since other lines (an agent noticing the shutdown) may follow it;
/// else the log's last non-empty line.
/// Only the log from byte `from` on is read (what this start wrote).
fn controller_error(path: &std::path::Path, from: u64) -> Option<String> {
    use std::io::{Read, Seek};
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(std::io::SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    fatal_message(&String::from_utf8_lossy(&bytes))
}

fn fatal_message(text: &str) -> Option<String> {
    const PREFIX: &str = "sluice controller: ";
    let lines: Vec<&str> = text.lines().collect();
    // Tracing lines start with an RFC 3339 time ("2026-12-04T07:07:35…").
    let is_log_line = |l: &str| {
        let b = l.as_bytes();
        b.len() > 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[10] == b'T'
    };
    if let Some(i) = lines.iter().rposition(|l| l.starts_with(PREFIX)) {
        let mut parts = vec![lines[i][PREFIX.len()..].trim()];
        parts.extend(
            lines[i + 1..]
                .iter()
                .take_while(|l| !is_log_line(l) && !l.starts_with(PREFIX))
                .map(|l| l.trim())
                .filter(|l| !l.is_empty()),
        );
        return Some(parts.join(" "));
    }
    lines
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Why a call got no answer of the kind asked for: the controller could not be
/// reached or spoke out of turn ([`ClientError`]), it refused with a Slurm error, or it
/// answered with another kind of reply (a controller of another version).
/// `Display` is the text front-ends print after their prefix
/// (`sdiag: error: {e}`, `slurm_load_jobs error: {e}`).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("{0}")]
    Slurm(SlurmError),
    #[error("unexpected answer from the controller")]
    Unexpected,
}

impl CallError {
    /// A line saying how to fix the problem, when there is one to give.
    pub fn hint(&self) -> Option<&str> {
        match self {
            CallError::Client(c) => c.hint(),
            _ => None,
        }
    }
}

/// Maps one reply to the value a front-end wants: `pick` takes the expected kind of
/// [`Response`] apart (see [`answer!`](crate::cli::client::answer)); `Response::Error`
/// becomes [`CallError::Slurm`] and any other reply [`CallError::Unexpected`].
pub fn expect<T>(
    reply: Result<Response, ClientError>,
    pick: impl FnOnce(Response) -> Option<T>,
) -> Result<T, CallError> {
    match reply? {
        Response::Error(e) => Err(CallError::Slurm(e)),
        r => pick(r).ok_or(CallError::Unexpected),
    }
}

impl Client {
    /// One request whose answer must be of one kind: [`Client::request`] then
    /// [`expect`]. `client.call(&Request::Stats, answer!(Response::Stats(s) => s))`.
    pub fn call<T>(
        &mut self,
        req: &Request,
        pick: impl FnOnce(Response) -> Option<T>,
    ) -> Result<T, CallError> {
        expect(self.request(req), pick)
    }
}

/// A `pick` for [`expect`]/[`Client::call`]: `answer!(Response::Acct { jobs, now } =>
/// (jobs, now))` is a closure giving `Some((jobs, now))` for that kind of reply and
/// `None` for any other.
macro_rules! answer {
    ($($p:pat => $e:expr),+ $(,)?) => {
        |r: $crate::proto::Response| match r {
            $($p => Some($e),)+
            _ => None,
        }
    };
}
pub(crate) use answer;

/// Turns a controller error into Slurm's text, or a transport problem into the text
/// Slurm front-ends print for it.
pub fn error_text(e: &SlurmError) -> String {
    e.to_string()
}

#[cfg(test)]
mod fatal_tests {
    use super::fatal_message;

    #[test]
    fn the_fatal_error_is_quoted_not_the_last_line() {
        let log = "2026-12-04T07:07:35.1Z  INFO sluice::ctld: controller starting\n\
                   sluice controller: cannot listen on /tmp/s/sluice.sock: refusing to use it\n\
                   2026-12-04T07:07:35.7Z ERROR sluice::ctld: local agent stopped: broken pipe\n";
        assert_eq!(
            fatal_message(log).as_deref(),
            Some("cannot listen on /tmp/s/sluice.sock: refusing to use it")
        );
        let multi = "sluice controller: /s/sluice.db is corrupt: integrity check failed:\n\
                     Tree 6 page 6: btreeInitPage() returns error code 11\n";
        assert_eq!(
            fatal_message(multi).as_deref(),
            Some(
                "/s/sluice.db is corrupt: integrity check failed: \
                 Tree 6 page 6: btreeInitPage() returns error code 11"
            )
        );
        assert_eq!(
            fatal_message("one\nlast line\n\n").as_deref(),
            Some("last line")
        );
        assert_eq!(fatal_message(""), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A client on one end of a socket pair, as `try_connect` leaves it.
    fn client_on(s: UnixStream) -> Client {
        Client {
            framed: SyncFramed::new(s),
            hello_out: frame(&Hello::new(Role::Client)).unwrap(),
            hello_pending: true,
        }
    }

    #[test]
    fn the_hello_leaves_with_the_first_request_in_one_write() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            // The controller's hello goes out at once, as ctld's does on accept.
            let mut f = SyncFramed::new(b.try_clone().unwrap());
            f.send(&Hello::new(Role::Controller)).unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let n = b.read(&mut buf).unwrap();
            let mut got = SyncFramed::new(std::io::Cursor::new(buf[..n].to_vec()));
            let hello: Hello = got.recv().unwrap();
            let req: Request = got.recv().unwrap();
            f.send(&Response::Ok).unwrap();
            // A second request on the same connection comes alone.
            let again: Request = f.recv().unwrap();
            f.send(&Response::Ok).unwrap();
            (hello.role, req, again)
        });
        let mut c = client_on(a);
        assert_eq!(c.request(&Request::Ping).unwrap(), Response::Ok);
        assert_eq!(c.request(&Request::Ping).unwrap(), Response::Ok);
        let (role, req, again) = server.join().unwrap();
        assert_eq!(role, Role::Client);
        assert_eq!(req, Request::Ping);
        assert_eq!(again, Request::Ping);
    }

    #[test]
    fn a_peer_that_is_not_a_compatible_controller_is_refused() {
        for bad in [
            Hello::new(Role::Agent),
            Hello {
                proto: crate::proto::PROTO + 1,
                ..Hello::new(Role::Controller)
            },
        ] {
            let (a, b) = UnixStream::pair().unwrap();
            let mut f = SyncFramed::new(b);
            f.send(&bad).unwrap();
            f.send(&Response::Ok).unwrap();
            let mut c = client_on(a);
            assert!(
                matches!(c.request(&Request::Ping), Err(ClientError::Proto(_))),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn a_step_stream_is_handed_over_after_the_handshake() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut f = SyncFramed::new(b);
        f.send(&Hello::new(Role::Controller)).unwrap();
        let c = client_on(a);
        let mut s = SyncFramed::new(c.into_stream().unwrap());
        // Our hello reached the controller before anything sent on the stream.
        let hello: Hello = f.recv().unwrap();
        assert_eq!(hello.role, Role::Client);
        s.send(&Request::Ping).unwrap();
        assert_eq!(f.recv::<Request>().unwrap(), Request::Ping);
    }
}

/// Checks a `-M/--clusters` list (or `SLURM_CLUSTERS`, `from_env`) against `ours`, the
/// cluster this controller serves: `Ok` when the list names it or says `all`. Otherwise
/// the text Slurm prints when the database knows no such cluster (print_db_notok in
/// src/common/slurmdb_defs.c), to go after `PROG: error: `; the front-end then exits 1
/// without touching any job.
pub fn check_clusters(list: &str, from_env: bool, ours: &str) -> Result<(), String> {
    if list
        .split(',')
        .map(str::trim)
        .any(|c| c == ours || c.eq_ignore_ascii_case("all"))
    {
        return Ok(());
    }
    Err(format!(
        "'{list}' can't be reached now, or it is an invalid entry for {}.  Use 'sacctmgr list clusters' to see available clusters.",
        if from_env {
            "SLURM_CLUSTERS"
        } else {
            "--cluster"
        }
    ))
}

#[cfg(test)]
mod cluster_tests {
    use super::check_clusters;

    #[test]
    fn clusters_lists() {
        assert!(check_clusters("testc", false, "testc").is_ok());
        assert!(check_clusters("a, testc", false, "testc").is_ok());
        assert!(check_clusters("ALL", true, "testc").is_ok());
        assert_eq!(
            check_clusters("other", false, "testc").unwrap_err(),
            "'other' can't be reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr list clusters' to see available clusters."
        );
        assert!(
            check_clusters("x", true, "testc")
                .unwrap_err()
                .contains("for SLURM_CLUSTERS.")
        );
    }
}
