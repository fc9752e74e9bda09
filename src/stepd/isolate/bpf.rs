//! The cgroup v2 device controller: a `BPF_PROG_TYPE_CGROUP_DEVICE` program attached
//! to a cgroup decides every open/mknod of a device file by its processes (cf. Slurm's
//! cgroup/v2 `ebpf.c`, runc's and youki's device filters). v1's `devices.deny` rules
//! have the same meaning here: the listed devices are refused for every access (`rwm`)
//! and every other device is left as it was (allowed by this program; programs of
//! parent cgroups still apply, as attachments use `BPF_F_ALLOW_MULTI`).
//!
//! The program (see [`program`]) reads the context `{access_type, major, minor}`,
//! where `access_type` is `access << 16 | type` (type 1 block, 2 char), compares the
//! type, major and minor with each rule, and returns 0 (deny) on a match, 1 (allow)
//! otherwise. Loading and attaching (`bpf(2)` `BPF_PROG_LOAD`, `BPF_PROG_ATTACH`) need
//! CAP_BPF/CAP_SYS_ADMIN and a real cgroup v2 directory; a failure is returned, and
//! the caller reports isolation as degraded rather than pretending.

use super::Device;
use std::path::Path;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode (class, operation, source).
    pub code: u8,
    /// Destination register (0–10).
    pub dst: u8,
    /// Source register (0–10).
    pub src: u8,
    /// Memory offset in bytes, or jump offset in instructions.
    pub off: i16,
    /// Immediate operand.
    pub imm: i32,
}

impl Insn {
    /// The kernel's 8-byte encoding (registers in one byte: dst low nibble, src high).
    pub fn encode(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = (self.dst & 0x0f) | (self.src << 4);
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

// Opcodes used (linux/bpf_common.h, linux/bpf.h).
/// `rD = *(u32 *)(rS + off)`.
pub const LDX_MEM_W: u8 = 0x61;
/// `rD &= imm` (64-bit).
pub const ALU64_AND_K: u8 = 0x57;
/// `rD = imm` (64-bit).
pub const ALU64_MOV_K: u8 = 0xb7;
/// `if rD != imm goto pc + off`.
pub const JMP_JNE_K: u8 = 0x55;
/// `goto pc + off`.
pub const JMP_JA: u8 = 0x05;
/// `return r0`.
pub const JMP_EXIT: u8 = 0x95;

/// `BPF_DEVCG_DEV_BLOCK`: the context's type of a block device.
pub const DEV_BLOCK: i32 = 1;
/// `BPF_DEVCG_DEV_CHAR`: the context's type of a character device.
pub const DEV_CHAR: i32 = 2;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// The device program refusing every access to each of `deny` and allowing all else.
/// Errors: a device number that does not fit the instruction's 32-bit immediate.
pub fn program(deny: &[Device]) -> Result<Vec<Insn>, String> {
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),        // r2 = ctx->access_type
        insn(ALU64_AND_K, 2, 0, 0, 0xffff), // r2 = type
        insn(LDX_MEM_W, 3, 1, 4, 0),        // r3 = ctx->major
        insn(LDX_MEM_W, 4, 1, 8, 0),        // r4 = ctx->minor
    ];
    let n = deny.len();
    for (i, d) in deny.iter().enumerate() {
        let num = |v: u32| i32::try_from(v).map_err(|_| format!("device number {v} too large"));
        let ty = if d.block { DEV_BLOCK } else { DEV_CHAR };
        // A mismatch jumps past this rule's remaining instructions to the next rule;
        // the rule's last instruction jumps to the deny exit, after the allow exit.
        p.push(insn(JMP_JNE_K, 2, 0, 3, ty));
        p.push(insn(JMP_JNE_K, 3, 0, 2, num(d.major)?));
        p.push(insn(JMP_JNE_K, 4, 0, 1, num(d.minor)?));
        // Instructions left after this one: the other rules' (4 each), then the
        // allow exit (2).
        let to_deny = ((n - 1 - i) * 4 + 2) as i16;
        p.push(insn(JMP_JA, 0, 0, to_deny, 0));
    }
    p.push(insn(ALU64_MOV_K, 0, 0, 0, 1)); // allow
    p.push(insn(JMP_EXIT, 0, 0, 0, 0));
    p.push(insn(ALU64_MOV_K, 0, 0, 0, 0)); // deny
    p.push(insn(JMP_EXIT, 0, 0, 0, 0));
    Ok(p)
}

/// Loads `prog` and attaches it to the cgroup directory `dir` (BPF_CGROUP_DEVICE,
/// BPF_F_ALLOW_MULTI). The program lives as long as the cgroup.
///
/// Errors: the directory cannot be opened, or the kernel refuses the load (the
/// verifier's log is included) or the attachment.
pub fn attach(dir: &Path, prog: &[Insn]) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let cg = std::fs::File::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let bytes: Vec<u8> = prog.iter().flat_map(|i| i.encode()).collect();
    let prog_fd = sys::prog_load(&bytes, prog.len() as u32)?;
    let r = sys::prog_attach(cg.as_raw_fd(), prog_fd.as_raw_fd());
    drop(prog_fd);
    r
}

#[allow(unsafe_code)]
mod sys {
    //! The two `bpf(2)` commands, through libc's raw syscall (no safe wrapper exists in
    //! the crates sluice uses).
    use std::os::fd::{FromRawFd, OwnedFd};

    const BPF_PROG_LOAD: libc::c_long = 5;
    const BPF_PROG_ATTACH: libc::c_long = 8;
    const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
    const BPF_CGROUP_DEVICE: u32 = 6;
    const BPF_F_ALLOW_MULTI: u32 = 2;

    /// The leading fields of `union bpf_attr` for BPF_PROG_LOAD; the rest of the
    /// 128-byte union stays zero.
    #[repr(C)]
    struct LoadAttr {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        pad: [u8; 88],
    }

    /// The fields of `union bpf_attr` for BPF_PROG_ATTACH, padded likewise.
    #[repr(C)]
    struct AttachAttr {
        target_fd: u32,
        attach_bpf_fd: u32,
        attach_type: u32,
        attach_flags: u32,
        pad: [u8; 112],
    }

    pub fn prog_load(insns: &[u8], count: u32) -> Result<OwnedFd, String> {
        let license = c"GPL";
        let mut log = vec![0u8; 64 * 1024];
        let attr = LoadAttr {
            prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
            insn_cnt: count,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            kern_version: 0,
            prog_flags: 0,
            pad: [0; 88],
        };
        // SAFETY: `attr` is a valid, fully initialised bpf_attr prefix of the size
        // passed; the pointers in it (instructions, license, log) outlive the call, and
        // the log buffer's length is the size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_LOAD,
                &attr as *const LoadAttr,
                std::mem::size_of::<LoadAttr>(),
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            let text = String::from_utf8_lossy(&log);
            let text = text.trim_end_matches('\0').trim();
            return Err(if text.is_empty() {
                format!("BPF_PROG_LOAD: {err}")
            } else {
                format!("BPF_PROG_LOAD: {err}: {text}")
            });
        }
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }

    pub fn prog_attach(cgroup_fd: i32, prog_fd: i32) -> Result<(), String> {
        let attr = AttachAttr {
            target_fd: cgroup_fd as u32,
            attach_bpf_fd: prog_fd as u32,
            attach_type: BPF_CGROUP_DEVICE,
            attach_flags: BPF_F_ALLOW_MULTI,
            pad: [0; 112],
        };
        // SAFETY: `attr` is a valid bpf_attr prefix of the size passed, and both
        // descriptors are open for the duration of the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_ATTACH,
                &attr as *const AttachAttr,
                std::mem::size_of::<AttachAttr>(),
            )
        };
        if r < 0 {
            return Err(format!(
                "BPF_PROG_ATTACH: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Runs `prog` on the context (`access_type`, `major`, `minor`) the way the kernel
    /// would, for the instructions [`program`] emits; `None` for anything else (an
    /// unknown opcode, a jump out of the program, no exit).
    fn eval(prog: &[Insn], access_type: u32, major: u32, minor: u32) -> Option<u64> {
        let ctx = [access_type, major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        for _ in 0..10_000 {
            let i = prog.get(pc)?;
            let mut next = pc + 1;
            match i.code {
                LDX_MEM_W => {
                    if i.src != 1 || i.off % 4 != 0 {
                        return None;
                    }
                    r[i.dst as usize] = u64::from(*ctx.get(i.off as usize / 4)?);
                }
                ALU64_AND_K => r[i.dst as usize] &= i.imm as i64 as u64,
                ALU64_MOV_K => r[i.dst as usize] = i.imm as i64 as u64,
                JMP_JNE_K => {
                    if r[i.dst as usize] != i.imm as i64 as u64 {
                        next = (pc as i64 + 1 + i64::from(i.off)) as usize;
                    }
                }
                JMP_JA => next = (pc as i64 + 1 + i64::from(i.off)) as usize,
                JMP_EXIT => return Some(r[0]),
                _ => return None,
            }
            pc = next;
        }
        None
    }

    fn dev(block: bool, major: u32, minor: u32) -> Device {
        Device {
            path: PathBuf::from("/dev/x"),
            block,
            major,
            minor,
        }
    }

    const READ: u32 = 2 << 16;
    const WRITE: u32 = 4 << 16;
    const MKNOD: u32 = 1 << 16;

    #[test]
    fn the_program_denies_exactly_the_listed_devices_for_every_access() {
        let deny = [dev(false, 195, 1), dev(false, 195, 3), dev(true, 8, 0)];
        let p = program(&deny).unwrap();
        for access in [READ, WRITE, MKNOD, READ | WRITE | MKNOD] {
            let c = |maj, min| eval(&p, access | DEV_CHAR as u32, maj, min);
            let b = |maj, min| eval(&p, access | DEV_BLOCK as u32, maj, min);
            assert_eq!(c(195, 1), Some(0));
            assert_eq!(c(195, 3), Some(0));
            assert_eq!(b(8, 0), Some(0));
            // Unlisted GPUs, other devices, and the same numbers of the other type
            // are left alone.
            assert_eq!(c(195, 0), Some(1));
            assert_eq!(c(195, 255), Some(1));
            assert_eq!(c(1, 3), Some(1));
            assert_eq!(b(195, 1), Some(1));
            assert_eq!(c(8, 0), Some(1));
            assert_eq!(b(8, 1), Some(1));
        }
    }

    #[test]
    fn an_empty_list_allows_everything_and_the_shape_is_fixed() {
        let p = program(&[]).unwrap();
        assert_eq!(p.len(), 8);
        assert_eq!(eval(&p, READ | DEV_CHAR as u32, 195, 0), Some(1));
        // 4 loads, 4 instructions per rule, 2 exits of 2 instructions.
        assert_eq!(program(&[dev(false, 1, 1)]).unwrap().len(), 12);
        let p = program(&[dev(false, 1, 1), dev(false, 1, 2)]).unwrap();
        assert_eq!(p.len(), 16);
        assert!(p.iter().all(|i| i.code != 0));
        assert_eq!(p.last().unwrap().code, JMP_EXIT);
    }

    #[test]
    fn too_large_device_numbers_are_refused() {
        let e = program(&[dev(false, u32::MAX, 0)]).unwrap_err();
        assert!(e.contains("too large"), "{e}");
    }

    #[test]
    fn encoding_matches_the_kernels_layout() {
        let i = insn(LDX_MEM_W, 2, 1, 4, 0);
        let b = i.encode();
        assert_eq!(b[0], 0x61);
        assert_eq!(b[1], 0x12);
        assert_eq!(i16::from_ne_bytes([b[2], b[3]]), 4);
        let j = insn(JMP_JNE_K, 3, 0, -2, 195).encode();
        assert_eq!(i16::from_ne_bytes([j[2], j[3]]), -2);
        assert_eq!(i32::from_ne_bytes([j[4], j[5], j[6], j[7]]), 195);
    }

    #[test]
    fn the_kernel_verifier_accepts_the_program_where_bpf_is_allowed() {
        let p = program(&[dev(false, 195, 1), dev(true, 8, 0)]).unwrap();
        let bytes: Vec<u8> = p.iter().flat_map(|i| i.encode()).collect();
        match sys::prog_load(&bytes, p.len() as u32) {
            Ok(_fd) => {}
            Err(e) if e.contains("Operation not permitted") || e.contains("not implemented") => {
                eprintln!("skipped: this process may not load eBPF programs: {e}");
            }
            Err(e) => panic!("the verifier refused the program: {e}"),
        }
    }

    #[test]
    fn attaching_to_something_that_is_not_a_cgroup_fails_with_a_reason() {
        let d = tempfile::tempdir().unwrap();
        let p = program(&[dev(false, 1, 3)]).unwrap();
        let e = attach(d.path(), &p).unwrap_err();
        assert!(e.starts_with("BPF_PROG_"), "{e}");
        let e = attach(&d.path().join("missing"), &p).unwrap_err();
        assert!(e.starts_with("cannot open"), "{e}");
    }
}
