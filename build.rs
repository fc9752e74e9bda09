//! Build script: how the `sluice` executable is linked on Linux.
//!
//! Every front-end call (`sbatch`, `squeue`, …) and every job's stepd is a fresh process
//! of this one large binary, so its start-up cost is paid per call:
//!
//! - It is position-dependent (non-PIE). As a PIE, the dynamic loader first patches
//!   every absolute address in it (about 15,000 relative relocations here) and each page
//!   it patches is copied on write; non-PIE, those addresses are fixed at link time and
//!   the pages stay shared with the page cache. Measured on `sbatch -H --wrap true`
//!   (scripts/bench.sh setup): 1.28 M → 1.09 M instructions, 253 → 198 page faults,
//!   1.48 → 1.20 ms CPU. The cost is that the executable's own code and data sit at a
//!   fixed address (ASLR still randomises the stack, heap and shared libraries).
//! - The functions the front-ends run are laid out together first
//!   (`link/front-end.order`, written by `scripts/link-order.sh`, given to lld as
//!   `--symbol-ordering-file`): a call then faults in a few dense windows of code
//!   instead of a hundred spread over the binary. Measured: `squeue` 198 → 142 page
//!   faults, `sbatch -H --wrap true` 3.13 → 2.89 ms median. Only with lld, which Rust
//!   uses by default for x86_64 Linux since 1.90; `SLUICE_LINK_ORDER=0` turns it off.
//!   Names the file lists that a build does not have are skipped.
//!
//! Only the binary is affected; test executables keep the toolchain's default.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/front-end.order");
    println!("cargo:rerun-if-env-changed=SLUICE_LINK_ORDER");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    // After rustc's own `-pie`; the C compiler driver takes the last of the two.
    println!("cargo:rustc-link-arg-bins=-no-pie");
    let wanted = std::env::var("SLUICE_LINK_ORDER").map_or(true, |v| v != "0");
    let order = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("link/front-end.order");
    // Linked from a copy in OUT_DIR, not from the source tree: a build that reuses this
    // script's output from another checkout sharing the target directory (as `.ci/run`'s
    // fresh clone does, then deletes) must still find the file.
    let copy = std::env::var_os("OUT_DIR")
        .map(|d| std::path::Path::new(&d).join("front-end.order"))
        .filter(|c| std::fs::copy(&order, c).is_ok());
    if let (true, true, Some(copy)) = (wanted, links_with_lld(), copy) {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            copy.display()
        );
        // A function renamed or gone since the file was written is not an error.
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links this target with its own lld by default: x86_64 GNU/Linux from
/// Rust 1.90 on (read from `rustc -V`).
fn links_with_lld() -> bool {
    if std::env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("-V").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "rustc 1.95.0 (…)"
    let mut parts = text
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}
