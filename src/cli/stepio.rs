//! srun's side of a step stream (cf. src/srun/launch.c, src/common/io.c client half,
//! srun's signal handling in src/srun/srun_job.c): prints the tasks' output as it
//! arrives (whole lines per task, `--label` prefixes), feeds stdin, forwards signals and
//! terminal size, reports failed tasks as Slurm does, and computes srun's exit code.
//!
//! Threads: the caller's (reads events), one reading stdin, one taking signals
//! (blocked everywhere else, taken with `sigwait`). Frames to the controller are
//! written under one lock.

use crate::model::ExitStatus;
use crate::proto::codec::{SyncFramed, encode};
use crate::proto::{StepEvent, StepInput};
use nix::sys::signal::{SigSet, Signal};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How srun treats the stream.
#[derive(Debug, Clone, Default)]
pub struct StreamOpts {
    pub label: bool,
    pub unbuffered: bool,
    pub pty: bool,
    pub kill_on_bad_exit: bool,
    pub quiet: bool,
    pub disable_status: bool,
    /// Whether srun's stdin is forwarded (not with `--input=none` or a file).
    pub forward_stdin: bool,
}

/// Slurm's text for a task killed by `sig` (as strsignal prints it) in srun's line;
/// signals past SIGTERM print as `Signal N`.
pub fn signal_text(sig: i32) -> String {
    match sig {
        1..=15 => strsignal(sig),
        _ => format!("Signal {sig}"),
    }
}

/// glibc's `strsignal` text for `sig` (`Real-time signal N`, `Unknown signal N`
/// past the named ones), as Slurm prints signals.
pub fn strsignal(sig: i32) -> String {
    let s = match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        5 => "Trace/breakpoint trap",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        16 => "Stack fault",
        17 => "Child exited",
        18 => "Continued",
        19 => "Stopped (signal)",
        20 => "Stopped",
        21 => "Stopped (tty input)",
        22 => "Stopped (tty output)",
        23 => "Urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "File size limit exceeded",
        26 => "Virtual timer expired",
        27 => "Profiling timer expired",
        28 => "Window changed",
        29 => "I/O possible",
        30 => "Power failure",
        31 => "Bad system call",
        34..=64 => return format!("Real-time signal {}", sig - 34),
        _ => return format!("Unknown signal {sig}"),
    };
    s.into()
}

/// The line srun prints for a task that did not end well, or `None` for exit 0.
pub fn task_failure_line(node: &str, task: u32, st: ExitStatus) -> Option<String> {
    if st.signal != 0 {
        Some(format!(
            "srun: error: {node}: task {task}: {}",
            signal_text(st.signal)
        ))
    } else if st.code != 0 {
        Some(format!(
            "srun: error: {node}: task {task}: Exited with exit code {}",
            st.code
        ))
    } else {
        None
    }
}

/// srun's exit code for its tasks' ends: the highest exit code, with a task killed by
/// signal N counting as 128+N.
pub fn exit_code(statuses: &[ExitStatus]) -> u8 {
    statuses
        .iter()
        .map(|s| {
            if s.signal != 0 {
                128 + s.signal
            } else {
                s.code
            }
        })
        .max()
        .unwrap_or(0)
        .clamp(0, 255) as u8
}

/// Assembles each task's output into whole lines (unless unbuffered) and prefixes
/// labels.
#[derive(Debug, Default)]
pub struct Printer {
    pub label: bool,
    pub unbuffered: bool,
    pub width: usize,
    partial: std::collections::HashMap<(u32, bool), Vec<u8>>,
}

impl Printer {
    /// A printer for `ntasks` tasks.
    pub fn new(label: bool, unbuffered: bool, ntasks: u32) -> Printer {
        Printer {
            label,
            unbuffered,
            width: ntasks.saturating_sub(1).to_string().len(),
            partial: Default::default(),
        }
    }

    fn prefix(&self, task: u32) -> String {
        if self.label {
            format!("{task:>w$}: ", w = self.width)
        } else {
            String::new()
        }
    }

    /// What to write for a chunk of task output now.
    pub fn chunk(&mut self, task: u32, stderr: bool, data: &[u8]) -> Vec<u8> {
        if self.unbuffered {
            let mut v = self.prefix(task).into_bytes();
            if !self.label {
                v.clear();
            }
            v.extend_from_slice(data);
            return v;
        }
        let pre = self.prefix(task);
        let buf = self.partial.entry((task, stderr)).or_default();
        buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            out.extend_from_slice(pre.as_bytes());
            out.extend(buf.drain(..=i));
        }
        out
    }

    /// The unterminated lines left at the end, per stream.
    pub fn flush(&mut self) -> Vec<(bool, Vec<u8>)> {
        let mut keys: Vec<(u32, bool)> = self.partial.keys().copied().collect();
        keys.sort();
        let mut out = Vec::new();
        for k in keys {
            let buf = self.partial.remove(&k).unwrap_or_default();
            if !buf.is_empty() {
                let mut v = self.prefix(k.0).into_bytes();
                v.extend(buf);
                out.push((k.1, v));
            }
        }
        out
    }
}

/// Writes one frame under the writer lock.
fn send(w: &Mutex<UnixStream>, m: &StepInput) -> bool {
    let Ok(body) = encode(m) else { return false };
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    match w.lock() {
        Ok(mut s) => s.write_all(&buf).is_ok(),
        Err(_) => false,
    }
}

/// What the signal thread needs to know about the step.
#[derive(Debug, Default)]
struct Shared {
    step: Option<(u32, u32)>,
    /// Per rank: `None` while running.
    tasks: Vec<Option<ExitStatus>>,
    terminating: bool,
}

/// The signals srun takes itself.
pub fn srun_signals() -> SigSet {
    let mut m = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGWINCH,
        Signal::SIGCONT,
    ] {
        m.add(s);
    }
    m
}

/// The terminal size of fd 0, if it is a terminal.
#[allow(unsafe_code)]
pub fn term_size() -> Option<(u16, u16)> {
    let mut ws = nix::pty::Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points to a
    // live value we own; on failure nothing is written and -1 is returned.
    let r = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Puts the terminal on fd 0 into raw mode; the returned value restores it on drop.
pub struct RawMode(Option<nix::sys::termios::Termios>);

impl RawMode {
    /// Raw mode if stdin is a terminal, else a no-op guard.
    pub fn enter() -> RawMode {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let Ok(orig) = tcgetattr(&stdin) else {
            return RawMode(None);
        };
        let mut raw = orig.clone();
        cfmakeraw(&mut raw);
        if tcsetattr(&stdin, SetArg::TCSANOW, &raw).is_err() {
            return RawMode(None);
        }
        RawMode(Some(orig))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                t,
            );
        }
    }
}

/// Blocks the signals srun handles itself; call before any thread is started.
pub fn block_signals() {
    let _ = srun_signals().thread_block();
}

/// How long srun tries to take back a relayed step stream that broke (seconds; the
/// controller holds the step that long too).
const REATTACH_FOR: u64 = 120;

/// Takes back the stream of step `job.step` after it broke: connects with `connect`
/// (a fresh connection whose handshake is done) every second until the controller
/// accepts `Request::StepAttach`, or [`REATTACH_FOR`] passes.
fn reattach(
    connect: &dyn Fn() -> Option<UnixStream>,
    job_id: u32,
    step_id: u32,
    received: u64,
) -> Option<UnixStream> {
    let until = Instant::now() + Duration::from_secs(REATTACH_FOR);
    // A controller that answers that it holds no such stream (it restarted, or the
    // step was ended) is believed after a few tries; the first may come before it
    // noticed the break.
    let mut refusals = 0;
    while Instant::now() < until && refusals < 5 {
        if let Some(s) = connect() {
            let mut f = SyncFramed::new(s);
            let req = crate::proto::Request::StepAttach {
                job_id,
                step_id,
                received,
            };
            if f.send(&req).is_ok() {
                match f.recv::<StepEvent>() {
                    Ok(StepEvent::Reattached) => return Some(f.into_inner()),
                    Ok(StepEvent::Error(_)) => refusals += 1,
                    _ => {}
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    None
}

/// Runs a step stream on `stream` (the `StepLaunch` request already sent) until the
/// step is done; returns srun's exit code. `job_id` is for messages.
pub fn run(stream: UnixStream, job_id: u32, o: &StreamOpts) -> u8 {
    run_reattaching(stream, job_id, o, None)
}

/// [`run`], and when the stream breaks after the step started, reconnects with
/// `connect` and takes the stream back (a relayed stream: the node's agent restarted
/// or its SSH link dropped; events missed meanwhile are replayed once, in order).
pub fn run_reattaching(
    stream: UnixStream,
    job_id: u32,
    o: &StreamOpts,
    connect: Option<&dyn Fn() -> Option<UnixStream>>,
) -> u8 {
    block_signals();
    let writer = match stream.try_clone() {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => {
            eprintln!("srun: error: {e}");
            return 1;
        }
    };
    let shared = Arc::new(Mutex::new(Shared::default()));
    {
        let (w, sh, o2) = (writer.clone(), shared.clone(), o.clone());
        std::thread::spawn(move || signal_thread(&w, &sh, &o2));
    }
    let _raw = if o.pty { Some(RawMode::enter()) } else { None };
    let mut reader = SyncFramed::new(stream);
    let mut printer = Printer::new(o.label && !o.pty, o.unbuffered || o.pty, 1);
    let mut statuses: Vec<ExitStatus> = Vec::new();
    let mut was_pending = false;
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let mut stdin_started = false;
    // A node could not launch its tasks (said once, then srun exits 1).
    let mut launch_failed = false;
    // Events received on the stream (a re-attach resumes after them).
    let mut received: u64 = 0;
    loop {
        let ev: StepEvent = match reader.recv() {
            Ok(ev) => ev,
            Err(e) => {
                let step = shared.lock().ok().and_then(|s| s.step);
                if let (Some(connect), Some((j, s))) = (connect, step)
                    && let Some(ns) = reattach(connect, j, s, received)
                    && let Ok(w) = ns.try_clone()
                {
                    if let Ok(mut g) = writer.lock() {
                        *g = w;
                    }
                    reader = SyncFramed::new(ns);
                    continue;
                }
                drop(_raw);
                eprintln!("srun: error: lost the connection to the controller: {e}");
                return 1;
            }
        };
        received += 1;
        // Confirmed now and then, so that the controller keeps little for a re-attach.
        if connect.is_some() && received.is_multiple_of(64) {
            send(&writer, &StepInput::Received(received));
        }
        match ev {
            StepEvent::Reattached => {}
            StepEvent::Pending { reason } => {
                was_pending = true;
                eprintln!(
                    "srun: Job {job_id} step creation temporarily disabled, retrying ({reason})"
                );
            }
            StepEvent::Launched {
                job_id,
                step_id,
                layout,
            } => {
                if was_pending {
                    eprintln!("srun: Step created for StepId={job_id}.{step_id}");
                }
                let n = layout.ntasks();
                printer = Printer::new(o.label && !o.pty, o.unbuffered || o.pty, n);
                if let Ok(mut s) = shared.lock() {
                    s.step = Some((job_id, step_id));
                    s.tasks = vec![None; n as usize];
                }
                if o.forward_stdin && !stdin_started {
                    stdin_started = true;
                    let w = writer.clone();
                    std::thread::spawn(move || stdin_thread(&w));
                }
                if o.pty
                    && let Some((rows, cols)) = term_size()
                {
                    send(&writer, &StepInput::WinSize { rows, cols });
                }
            }
            StepEvent::Output {
                task,
                stderr: e,
                data,
            } => {
                let bytes = printer.chunk(task, e, &data);
                if !bytes.is_empty() {
                    if e && !o.pty {
                        let _ = stderr.write_all(&bytes);
                        let _ = stderr.flush();
                    } else {
                        let _ = stdout.write_all(&bytes);
                        let _ = stdout.flush();
                    }
                }
            }
            StepEvent::TaskExit { node, task, status } => {
                statuses.push(status);
                let mut terminate = false;
                if let Ok(mut s) = shared.lock() {
                    if let Some(slot) = s.tasks.get_mut(task as usize) {
                        *slot = Some(status);
                    }
                    if o.kill_on_bad_exit && !status.success() && !s.terminating {
                        s.terminating = true;
                        terminate = true;
                    }
                }
                if let Some(line) = task_failure_line(&node, task, status) {
                    let _ = stdout.flush();
                    eprintln!("{line}");
                }
                if terminate {
                    if let Some((j, s)) = shared.lock().ok().and_then(|s| s.step) {
                        eprintln!("srun: launch/slurm: _step_signal: Terminating StepId={j}.{s}");
                    }
                    send(&writer, &StepInput::Terminate);
                }
            }
            StepEvent::LaunchFailed {
                node,
                reason,
                detail,
            } => {
                // srun's lines for a launch that failed on a node (launch/slurm).
                let step = shared.lock().ok().and_then(|s| s.step);
                let _ = stdout.flush();
                if let Some(d) = detail {
                    eprintln!("srun: error: {d}");
                }
                if let Some((j, s)) = step {
                    eprintln!(
                        "srun: error: Task launch for StepId={j}.{s} failed on node {node}: {reason}"
                    );
                }
                if !launch_failed {
                    launch_failed = true;
                    eprintln!("srun: error: Application launch failed: {reason}");
                    eprintln!("srun: Job step aborted");
                }
            }
            StepEvent::Done { state } => {
                for (e, bytes) in printer.flush() {
                    if e && !o.pty {
                        let _ = stderr.write_all(&bytes);
                    } else {
                        let _ = stdout.write_all(&bytes);
                    }
                }
                let _ = stdout.flush();
                drop(_raw);
                let code = exit_code(&statuses);
                if launch_failed || (code == 0 && state != crate::model::JobState::Completed) {
                    return 1;
                }
                return code;
            }
            StepEvent::Error(e) => {
                drop(_raw);
                match e {
                    // srun's own words (it checks the components itself in Slurm).
                    crate::proto::SlurmError::HetGroup(m) => eprintln!("srun: error: {m}"),
                    e => eprintln!("srun: error: Unable to create step for job {job_id}: {e}"),
                }
                return 1;
            }
        }
    }
}

fn stdin_thread(w: &Mutex<UnixStream>) {
    let mut stdin = std::io::stdin();
    let mut buf = [0u8; 16384];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => {
                send(w, &StepInput::StdinEof);
                return;
            }
            Ok(n) => {
                if !send(
                    w,
                    &StepInput::Stdin {
                        data: buf[..n].to_vec(),
                    },
                ) {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                send(w, &StepInput::StdinEof);
                return;
            }
        }
    }
}

fn signal_thread(w: &Mutex<UnixStream>, sh: &Mutex<Shared>, o: &StreamOpts) {
    let set = srun_signals();
    let mut last_int: Option<Instant> = None;
    loop {
        let Ok(sig) = set.wait() else { return };
        match sig {
            Signal::SIGWINCH => {
                if o.pty
                    && let Some((rows, cols)) = term_size()
                {
                    send(w, &StepInput::WinSize { rows, cols });
                }
            }
            Signal::SIGINT if !o.pty => {
                let (step, tasks) = match sh.lock() {
                    Ok(s) => (s.step, s.tasks.clone()),
                    Err(_) => return,
                };
                let Some((j, s)) = step else {
                    eprintln!("srun: Cancelled pending job step with signal 2");
                    send(w, &StepInput::Terminate);
                    continue;
                };
                let again = last_int.is_some_and(|t| t.elapsed() < Duration::from_secs(1));
                if o.disable_status || again {
                    eprintln!("srun: sending Ctrl-C to StepId={j}.{s}");
                    send(w, &StepInput::Signal(Signal::SIGINT as i32));
                    if again {
                        eprintln!(
                            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."
                        );
                        if let Ok(mut x) = sh.lock() {
                            x.terminating = true;
                        }
                        send(w, &StepInput::Terminate);
                    }
                } else {
                    eprintln!("srun: interrupt (one more within 1 sec to abort)");
                    let running: Vec<u32> = (0..tasks.len() as u32)
                        .filter(|&r| tasks[r as usize].is_none())
                        .collect();
                    let done: Vec<u32> = (0..tasks.len() as u32)
                        .filter(|&r| tasks[r as usize].is_some())
                        .collect();
                    for (ranks, what) in [(running, "running"), (done, "exited")] {
                        if !ranks.is_empty() {
                            let word = if ranks.len() == 1 { "task" } else { "tasks" };
                            eprintln!(
                                "srun: StepId={j}.{s} {word} {}: {what}",
                                crate::model::hostlist::id_ranges(&ranks)
                            );
                        }
                    }
                }
                last_int = Some(Instant::now());
            }
            other => {
                send(w, &StepInput::Signal(other as i32));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labelled_lines_are_whole_and_padded() {
        let mut p = Printer::new(true, false, 12);
        assert_eq!(p.chunk(3, false, b"hel"), b"");
        assert_eq!(p.chunk(3, false, b"lo\nwor"), b" 3: hello\n");
        assert_eq!(p.chunk(11, false, b"x\n"), b"11: x\n");
        assert_eq!(p.flush(), vec![(false, b" 3: wor".to_vec())]);
        let mut p = Printer::new(false, false, 1);
        assert_eq!(p.chunk(0, true, b"a\nb\n"), b"a\nb\n");
        let mut p = Printer::new(false, true, 2);
        assert_eq!(p.chunk(1, false, b"raw"), b"raw");
    }

    #[test]
    fn exit_codes_and_failure_lines() {
        let ok = ExitStatus::default();
        let e7 = ExitStatus { code: 7, signal: 0 };
        let segv = ExitStatus {
            code: 0,
            signal: 11,
        };
        assert_eq!(exit_code(&[ok, e7]), 7);
        assert_eq!(exit_code(&[e7, segv]), 139);
        assert_eq!(exit_code(&[]), 0);
        assert_eq!(task_failure_line("n1", 0, ok), None);
        assert_eq!(
            task_failure_line("node01", 0, e7).unwrap(),
            "srun: error: node01: task 0: Exited with exit code 7"
        );
        assert_eq!(
            task_failure_line("n", 2, segv).unwrap(),
            "srun: error: n: task 2: Segmentation fault"
        );
        assert_eq!(
            crate::model::hostlist::id_ranges(&[0, 1, 2, 5, 7, 8]),
            "0-2,5,7-8"
        );
    }
}
