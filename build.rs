//! Build script: links the `sluice` executable position-dependent (non-PIE) on Linux.
//!
//! Every front-end call (`sbatch`, `squeue`, …) and every job's stepd is a fresh process
//! of this one large binary. As a PIE, the dynamic loader first patches every absolute
//! address in it (about 15,000 relative relocations here) and each page it patches is
//! copied on write; non-PIE, those addresses are fixed at link time and the pages stay
//! shared with the page cache. Measured on `sbatch -H --wrap true` (scripts/bench.sh
//! setup): 1.28 M → 1.09 M instructions, 253 → 198 page faults, 1.48 → 1.20 ms CPU.
//! The cost is that the executable's own code and data sit at a fixed address (ASLR
//! still randomises the stack, heap and shared libraries). Only the binary is affected;
//! test executables keep the toolchain's default.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        // After rustc's own `-pie`; the C compiler driver takes the last of the two.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
