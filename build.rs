//! Link options for the `sluice` binary. Every front-end call (`sbatch`, `squeue`…) and
//! every job's stepd is a fresh process, so the dynamic loader's start-up work is paid
//! each time (issue #2's sbatch latency target). As a position-independent executable
//! the binary carries ~12,000 relative relocations (vtables, static tables), which the
//! loader applies at every start, writing (and so copying) ~45 pages. Linked as a
//! fixed-address executable it has none: an `sbatch --wrap true` runs ~12% fewer
//! instructions and takes ~17% fewer page faults. The cost is that the binary's own
//! code and data are not address-randomised (its libraries still are).
//!
//! The option is used only where the C compiler driver (the linker rustc uses on
//! Linux) accepts it, probed by linking and running a tiny C program.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let flag = "-no-pie";
    if links_with(flag) {
        println!("cargo:rustc-link-arg-bins={flag}");
    }
}

/// Whether the C compiler driver links a trivial program with `flag` into something
/// that runs (only when building for the machine that builds).
fn links_with(flag: &str) -> bool {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || std::env::var("HOST") != std::env::var("TARGET")
    {
        return false;
    }
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let src = out.join("probe.c");
    let exe = out.join("probe");
    if std::fs::write(&src, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let linked = Command::new(cc)
        .arg(flag)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    linked && Command::new(&exe).status().is_ok_and(|s| s.success())
}
