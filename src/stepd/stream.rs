//! A numbered step stepd's link to the node agent, built to outlive the agent (cf.
//! slurmstepd's own socket in slurmd's spool directory, through which a restarted
//! slurmd finds its running steps again).
//!
//! Every event stepd reports is numbered ([`StepdFrame`]) and appended to an event log
//! in the step's spool directory (`events`) before it is written to the agent. The
//! controller acknowledges what it has ([`StepdInput::Ack`]); acknowledged events are
//! dropped from the log. When the agent or its SSH link goes away the step keeps
//! running and its events only go to the log; stepd listens on `stepd.sock` in the same
//! directory, and the agent that connects there next says from which number to replay
//! ([`StepdInput::Resume`]). So the controller gets every event once and in order,
//! whatever happened to the links in between.
//!
//! Bounds: the log holds at most [`LOG_CAP`] bytes of unacknowledged events; beyond it
//! stepd stops reading its tasks' output (their writes block, as they would if srun
//! did not read), and goes on when acknowledgements free room. A log that cannot be
//! written keeps its frames in memory instead (same bound).
//!
//! Invariants: numbers start at 1 and grow by one per event; a connection gets no event
//! before its `Resume`; the log's index lists exactly the unacknowledged events, in
//! order.

use crate::proto::codec::{decode, frame};
use crate::proto::{MAX_FRAME, StepdEvent, StepdFrame, StepdInput};
use nix::errno::Errno;
use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Most bytes of unacknowledged events kept; see the module docs.
pub const LOG_CAP: u64 = 64 << 20;
/// The event log's name in the step's spool directory.
pub const EVENTS: &str = "events";
pub use crate::proto::spool::STEPD_SOCKET as SOCKET;
/// Acknowledged bytes at the front of the log that make it worth compacting.
const COMPACT_AT: u64 = 8 << 20;

/// Where one unacknowledged frame is.
#[derive(Debug)]
enum Stored {
    /// `len` bytes at `offset` in the log file.
    File { offset: u64, len: u32 },
    /// The file could not take it.
    Mem(Vec<u8>),
}

/// The unacknowledged events of a step, on disk (see the module docs).
#[derive(Debug)]
pub struct EventLog {
    file: Option<std::fs::File>,
    index: VecDeque<(u64, Stored)>,
    next_seq: u64,
    /// End of the written part of the file.
    end: u64,
    /// Bytes held in memory by [`Stored::Mem`] frames.
    mem: u64,
    acked: u64,
}

impl EventLog {
    /// A new, empty log at `path` (created mode 0600, truncated). Without a usable file
    /// the log keeps frames in memory.
    pub fn create(path: &Path) -> EventLog {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| eprintln!("stepd: event log {}: {e}", path.display()))
            .ok();
        EventLog {
            file,
            index: VecDeque::new(),
            next_seq: 1,
            end: 0,
            mem: 0,
            acked: 0,
        }
    }

    /// Numbers `ev`, stores it, and returns its wire frame (length prefix included).
    pub fn push(&mut self, ev: &StepdEvent) -> Option<Vec<u8>> {
        let seq = self.next_seq;
        let bytes = frame(&StepdFrame {
            seq,
            event: ev.clone(),
        })
        .ok()?;
        self.next_seq += 1;
        let stored = match &self.file {
            Some(f) => match f.write_all_at(&bytes, self.end) {
                Ok(()) => {
                    let s = Stored::File {
                        offset: self.end,
                        len: bytes.len() as u32,
                    };
                    self.end += bytes.len() as u64;
                    s
                }
                Err(_) => {
                    self.mem += bytes.len() as u64;
                    Stored::Mem(bytes.clone())
                }
            },
            None => {
                self.mem += bytes.len() as u64;
                Stored::Mem(bytes.clone())
            }
        };
        self.index.push_back((seq, stored));
        Some(bytes)
    }

    /// The number the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether event `seq` was acknowledged.
    pub fn acked(&self, seq: u64) -> bool {
        self.acked >= seq
    }

    /// Bytes of unacknowledged events.
    pub fn backlog(&self) -> u64 {
        let front = self.index.iter().find_map(|(_, s)| match s {
            Stored::File { offset, .. } => Some(*offset),
            Stored::Mem(_) => None,
        });
        self.end.saturating_sub(front.unwrap_or(self.end)) + self.mem
    }

    /// Drops the events up to `seq`; empties or compacts the file when that frees it.
    pub fn ack(&mut self, seq: u64) {
        self.acked = self.acked.max(seq);
        while self.index.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, Stored::Mem(b))) = self.index.pop_front() {
                self.mem -= b.len() as u64;
            }
        }
        let Some(f) = &self.file else { return };
        let front = self.index.iter().find_map(|(_, s)| match s {
            Stored::File { offset, .. } => Some(*offset),
            Stored::Mem(_) => None,
        });
        match front {
            None => {
                if self.end > 0 && f.set_len(0).is_ok() {
                    self.end = 0;
                }
            }
            Some(front) if front >= COMPACT_AT => {
                let mut tail = vec![0u8; (self.end - front) as usize];
                if f.read_exact_at(&mut tail, front).is_ok()
                    && f.write_all_at(&tail, 0).is_ok()
                    && f.set_len(tail.len() as u64).is_ok()
                {
                    for (_, s) in self.index.iter_mut() {
                        if let Stored::File { offset, .. } = s {
                            *offset -= front;
                        }
                    }
                    self.end -= front;
                }
            }
            Some(_) => {}
        }
    }

    /// The frames of the unacknowledged events numbered `from` and later, in order.
    pub fn frames_from(&self, from: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.index
            .iter()
            .filter(move |(s, _)| *s >= from)
            .filter_map(|(_, st)| match st {
                Stored::Mem(b) => Some(b.clone()),
                Stored::File { offset, len } => {
                    let mut b = vec![0u8; *len as usize];
                    self.file.as_ref()?.read_exact_at(&mut b, *offset).ok()?;
                    Some(b)
                }
            })
    }
}

/// The current agent connection.
struct Conn {
    fd: OwnedFd,
    rbuf: Vec<u8>,
    /// Events flow on it (the agent said where to resume, or it is the first link).
    live: bool,
}

/// stepd's side of the agent link; see the module docs.
pub struct Stream {
    listener: Option<std::os::unix::net::UnixListener>,
    conn: Option<Conn>,
    log: EventLog,
    path: PathBuf,
}

impl Stream {
    /// The link for the step in `dir`: `first` is the connection the launching agent
    /// made (live at once); later agents connect to `dir/stepd.sock`.
    pub fn new(dir: &Path, first: OwnedFd) -> Stream {
        let path = dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| eprintln!("stepd: cannot listen on {}: {e}", path.display()))
            .ok();
        Stream {
            listener,
            conn: Some(Conn {
                fd: first,
                rbuf: Vec::new(),
                live: true,
            }),
            log: EventLog::create(&dir.join(EVENTS)),
            path,
        }
    }

    /// Numbers and keeps `ev`, and sends it to the agent when one is attached. Returns
    /// its number.
    pub fn send(&mut self, ev: &StepdEvent) -> u64 {
        let seq = self.log.next_seq();
        if let Some(bytes) = self.log.push(ev)
            && self.conn.as_ref().is_some_and(|c| c.live)
        {
            self.write(&bytes);
        }
        seq
    }

    fn write(&mut self, bytes: &[u8]) {
        let Some(c) = &self.conn else { return };
        let mut rest = bytes;
        while !rest.is_empty() {
            match nix::unistd::write(&c.fd, rest) {
                Ok(n) => rest = &rest[n..],
                Err(Errno::EINTR) => {}
                Err(_) => {
                    // The agent went away: events wait in the log for the next one.
                    self.conn = None;
                    return;
                }
            }
        }
    }

    /// The listening socket and the current connection, for `poll`.
    pub fn fds(&self) -> (Option<BorrowedFd<'_>>, Option<BorrowedFd<'_>>) {
        (
            self.listener.as_ref().map(|l| l.as_fd()),
            self.conn.as_ref().map(|c| c.fd.as_fd()),
        )
    }

    /// Takes the newest waiting connection (it replaces the current one, which belongs
    /// to an agent that is gone or being replaced).
    pub fn accept(&mut self) {
        let Some(l) = &self.listener else { return };
        while let Ok((s, _)) = l.accept() {
            // Accepted sockets are blocking: writes wait for a slow agent.
            let _ = s.set_nonblocking(false);
            self.conn = Some(Conn {
                fd: OwnedFd::from(s),
                rbuf: Vec::new(),
                live: false,
            });
        }
    }

    /// Reads what the agent sent; serves `Resume` and `Ack` here and returns the rest.
    pub fn read(&mut self) -> Vec<StepdInput> {
        let mut out = Vec::new();
        let Some(c) = self.conn.as_mut() else {
            return out;
        };
        let mut tmp = [0u8; 65536];
        let mut gone = false;
        loop {
            match nix::sys::socket::recv(
                c.fd.as_raw_fd(),
                &mut tmp,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(0) => {
                    gone = true;
                    break;
                }
                Ok(n) => c.rbuf.extend_from_slice(&tmp[..n]),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        let mut msgs = Vec::new();
        while c.rbuf.len() >= 4 {
            let len = u32::from_be_bytes([c.rbuf[0], c.rbuf[1], c.rbuf[2], c.rbuf[3]]) as usize;
            if len > MAX_FRAME {
                gone = true;
                break;
            }
            if c.rbuf.len() < 4 + len {
                break;
            }
            if let Ok(m) = decode::<StepdInput>(&c.rbuf[4..4 + len]) {
                msgs.push(m);
            }
            c.rbuf.drain(..4 + len);
        }
        for m in msgs {
            match m {
                StepdInput::Resume { from } => {
                    let frames: Vec<Vec<u8>> = self.log.frames_from(from).collect();
                    if let Some(c) = self.conn.as_mut() {
                        c.live = true;
                    }
                    for f in frames {
                        self.write(&f);
                    }
                }
                StepdInput::Ack(seq) => self.log.ack(seq),
                other => out.push(other),
            }
        }
        if gone {
            self.conn = None;
        }
        out
    }

    /// Whether the controller has event `seq`.
    pub fn acked(&self, seq: u64) -> bool {
        self.log.acked(seq)
    }

    /// Whether the log is full: task output should wait.
    pub fn full(&self) -> bool {
        self.log.backlog() >= LOG_CAP
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::codec::decode;

    fn out(n: u8) -> StepdEvent {
        StepdEvent::Output {
            task: 0,
            stderr: false,
            data: vec![n; 10],
        }
    }

    fn seqs(log: &EventLog, from: u64) -> Vec<u64> {
        log.frames_from(from)
            .map(|f| decode::<StepdFrame>(&f[4..]).unwrap().seq)
            .collect()
    }

    #[test]
    fn events_are_numbered_kept_until_acked_and_replayed_in_order() {
        let d = tempfile::tempdir().unwrap();
        let mut log = EventLog::create(&d.path().join(EVENTS));
        for i in 0..5 {
            let f = log.push(&out(i)).unwrap();
            let fr: StepdFrame = decode(&f[4..]).unwrap();
            assert_eq!(fr.seq, u64::from(i) + 1);
            assert_eq!(fr.event, out(i));
        }
        assert_eq!(seqs(&log, 3), vec![3, 4, 5]);
        log.ack(2);
        assert!(log.acked(2) && !log.acked(3));
        assert_eq!(seqs(&log, 1), vec![3, 4, 5]);
        // Replayed frames are the bytes first sent.
        let third: StepdFrame = decode(&log.frames_from(3).next().unwrap()[4..]).unwrap();
        assert_eq!(third.event, out(2));
        // All acknowledged: the file is emptied, numbering goes on.
        log.ack(5);
        assert_eq!(log.backlog(), 0);
        assert_eq!(std::fs::metadata(d.path().join(EVENTS)).unwrap().len(), 0);
        log.push(&out(9));
        assert_eq!(seqs(&log, 0), vec![6]);
        assert!(log.backlog() > 0);
    }

    #[test]
    fn a_log_whose_front_is_acknowledged_is_compacted() {
        let d = tempfile::tempdir().unwrap();
        let mut log = EventLog::create(&d.path().join(EVENTS));
        let big = StepdEvent::Output {
            task: 1,
            stderr: true,
            data: vec![7; 1 << 20],
        };
        for _ in 0..10 {
            log.push(&big);
        }
        log.push(&out(1));
        log.ack(10);
        // Only the last, small frame is left, at the start of the file.
        let len = std::fs::metadata(d.path().join(EVENTS)).unwrap().len();
        assert!(len < 100, "{len}");
        assert_eq!(seqs(&log, 0), vec![11]);
        let fr: StepdFrame = decode(&log.frames_from(11).next().unwrap()[4..]).unwrap();
        assert_eq!(fr.event, out(1));
    }

    #[test]
    fn without_a_file_frames_stay_in_memory() {
        let mut log = EventLog::create(Path::new("/nonexistent/dir/events"));
        log.push(&out(1));
        log.push(&out(2));
        assert_eq!(seqs(&log, 2), vec![2]);
        assert!(log.backlog() > 0);
        log.ack(2);
        assert_eq!(log.backlog(), 0);
    }
}
