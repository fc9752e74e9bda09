//! Memory limits from the `[cgroup]` settings (cf. Slurm's task/cgroup memory
//! handling): pure arithmetic, shared by every backend.

use crate::config::CgroupConf;

const MIB: u64 = 1024 * 1024;

/// Memory limits of one job or step, in bytes. `None` leaves the kernel's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemLimits {
    /// Hard RAM limit (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    pub ram: Option<u64>,
    /// Soft limit (v1 `memory.soft_limit_in_bytes`; v2 has no equivalent that would not
    /// throttle, so it is not used there).
    pub soft: Option<u64>,
    /// RAM plus swap (v1 `memory.memsw.limit_in_bytes`; v2 `memory.swap.max` is this
    /// minus `ram`).
    pub ram_swap: Option<u64>,
}

/// The limits for an allocation of `alloc_mib` MiB (0: the whole node) on a node with
/// `node_ram` bytes of RAM; `None` when neither RAM nor swap is constrained.
pub fn memory_limits(conf: &CgroupConf, alloc_mib: u64, node_ram: u64) -> Option<MemLimits> {
    if !conf.constrain_ram_space && !conf.constrain_swap_space {
        return None;
    }
    let alloc = if alloc_mib == 0 {
        node_ram
    } else {
        alloc_mib.saturating_mul(MIB)
    };
    let pct = |base: u64, p: f64| (base as f64 * p / 100.0) as u64;
    let ram = pct(alloc, conf.allowed_ram_space)
        .min(pct(node_ram, conf.max_ram_percent))
        .max(conf.min_ram_space.saturating_mul(MIB));
    let swap = pct(alloc, conf.allowed_swap_space).min(pct(node_ram, conf.max_swap_percent));
    Some(MemLimits {
        ram: conf.constrain_ram_space.then_some(ram),
        soft: conf.constrain_ram_space.then_some(ram),
        ram_swap: conf
            .constrain_swap_space
            .then_some(ram.saturating_add(swap)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: u64 = 16 * 1024 * MIB;

    fn conf(ram: bool, swap: bool) -> CgroupConf {
        CgroupConf {
            constrain_ram_space: ram,
            constrain_swap_space: swap,
            ..CgroupConf::default()
        }
    }

    #[test]
    fn slurm_defaults_constrain_nothing() {
        assert_eq!(memory_limits(&CgroupConf::default(), 1000, NODE), None);
    }

    #[test]
    fn ram_limit_is_the_allocation_within_bounds() {
        let m = memory_limits(&conf(true, false), 1000, NODE).unwrap();
        assert_eq!(m.ram, Some(1000 * MIB));
        assert_eq!(m.soft, Some(1000 * MIB));
        assert_eq!(m.ram_swap, None);
        // AllowedRAMSpace scales it; MaxRAMPercent caps it; MinRAMSpace floors it.
        let mut c = conf(true, false);
        c.allowed_ram_space = 150.0;
        assert_eq!(memory_limits(&c, 1000, NODE).unwrap().ram, Some(1500 * MIB));
        c.max_ram_percent = 5.0;
        let cap = (NODE as f64 * 0.05) as u64;
        assert_eq!(memory_limits(&c, 4000, NODE).unwrap().ram, Some(cap));
        assert_eq!(
            memory_limits(&conf(true, false), 10, NODE).unwrap().ram,
            Some(30 * MIB)
        );
        // No memory in the allocation means the whole node.
        assert_eq!(
            memory_limits(&conf(true, false), 0, NODE).unwrap().ram,
            Some(NODE)
        );
    }

    #[test]
    fn swap_adds_allowed_swap_space_capped_by_max_swap_percent() {
        let m = memory_limits(&conf(true, true), 1000, NODE).unwrap();
        assert_eq!(
            m.ram_swap,
            Some(1000 * MIB),
            "AllowedSwapSpace defaults to 0"
        );
        let mut c = conf(false, true);
        c.allowed_swap_space = 50.0;
        let m = memory_limits(&c, 1000, NODE).unwrap();
        assert_eq!(m.ram, None);
        assert_eq!(m.ram_swap, Some(1500 * MIB));
        c.max_swap_percent = 1.0;
        let m = memory_limits(&c, 1000, NODE).unwrap();
        assert_eq!(m.ram_swap, Some(1000 * MIB + (NODE as f64 * 0.01) as u64));
    }
}
