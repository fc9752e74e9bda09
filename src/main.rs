//! The `sluice` binary: argv[0] dispatch only (see `cli::main`).
//!
//! Every front-end call (`sbatch`, `squeue`, …) and every job's stepd is a fresh process
//! of this binary, so it starts without Rust's runtime set-up (`#![no_main]`): that
//! set-up locates the main thread's stack guard by reading and parsing
//! `/proc/self/maps` (about 100,000 instructions and a kernel walk of every mapping,
//! near 0.1 ms here), which buys only a "stack overflow" message in place of a plain
//! SIGSEGV. The rest of it is done here: closed standard descriptors are re-opened on
//! `/dev/null`, a panic still exits with 101, and `std::process::exit` flushes stdout.
//! SIGPIPE is left as inherited here and set per role by `cli::main`.
// The test harness (`cargo test` builds this file as a test too) brings its own main.
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::ffi::{c_char, c_int};

/// The C entry point. Arguments reach `std::env::args` through glibc's init-array
/// hook, as with Rust's own `main`.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    sluice::cli::open_standard_fds();
    let code = match std::panic::catch_unwind(sluice::cli::main) {
        Ok(code) => sluice::cli::exit_status(code),
        Err(_) => 101,
    };
    std::process::exit(code)
}
