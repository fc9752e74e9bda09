//! Crash-injection points for the durability tests (issue #25). In debug builds,
//! `SLUICE_FAILPOINTS=name[,name…]` names points at which the process (the controller
//! and its in-process local agent) kills itself with SIGKILL, as `kill -9` would, the
//! first time it passes them; release builds compile every point to nothing.
//!
//! In the agent:
//! - `launch-unstarted`: a job's launch record is written, its stepd not yet started.
//!
//! In the controller's store thread, around one batch's commit:
//! - `submit-before-commit`, `submit-after-commit`: a batch that answers a submission,
//!   before its transaction, and after it but before the answer is sent;
//! - `launch-before-commit`, `launch-after-commit`: a batch that carries a job launch
//!   to a node, before its transaction, and after it but before the message is sent;
//! - `step-before-commit`, `step-after-commit`: the same for a step launch;
//! - `end-before-commit`, `end-after-commit`: a batch that records a job's end, before
//!   its transaction, and after it but before anything of it is sent.

/// Kills the process here when `name` is one of the armed points (debug builds only).
#[inline]
pub fn hit(name: &str) {
    #[cfg(debug_assertions)]
    {
        use std::sync::OnceLock;
        static ARMED: OnceLock<Vec<String>> = OnceLock::new();
        let armed = ARMED.get_or_init(|| {
            std::env::var("SLUICE_FAILPOINTS")
                .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
                .unwrap_or_default()
        });
        if armed.iter().any(|a| a == name) {
            tracing::warn!("failpoint {name}: killing the process");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}
