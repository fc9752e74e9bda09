//! TRES billing: what a job is charged in "billing" units (Slurm's `billable_tres`), the
//! one figure that fair-share usage, `GrpTRES=billing=`/`GrpTRESMins=billing=` limits,
//! sacct's and scontrol's `billing=` and sprio's billing TRES factor all use.
//!
//! Cf. slurm.conf(5) `TRESBillingWeights` (a partition parameter) and `PriorityFlags=
//! MAX_TRES`; src/common/assoc_mgr.c `assoc_mgr_tres_weighted` and slurmctld/job_mgr.c
//! `calc_job_billable_tres`. Without weights a job is billed its CPU count. With
//! weights, each TRES count is multiplied by its weight and the products are summed;
//! with MAX_TRES the node-level TRES (cpu, mem, node, every `gres/…`) contribute only
//! their largest product, to which the global ones (licenses and the rest) are added.
//!
//! Pure data and arithmetic; the controller and the simulator fill the table from the
//! configuration.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// TRES counts keyed by TRES name (`cpu`, `mem` in MiB, `node`, `billing`, `gres/gpu`,
/// `gres/gpu:a100`, `license/matlab`, …).
pub type Tres = HashMap<String, u64>;

/// One partition's `TRESBillingWeights`: a weight per TRES, per unit of the TRES's
/// count (memory: per MiB).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BillingWeights {
    /// The text as configured (`CPU=1.0,Mem=0.25G,GRES/gpu=2.0`), for display.
    pub text: String,
    /// (TRES name in lower case, weight per unit), in configured order.
    pub weights: Vec<(String, f64)>,
}

/// TRES types a weight may name (Slurm's TRES types; `billing` itself is not one).
const TYPES: &[&str] = &[
    "cpu", "mem", "node", "energy", "gres", "license", "bb", "fs", "vmem", "pages", "ic",
];

impl BillingWeights {
    /// Parses Slurm's `TRESBillingWeights` text: comma-separated `TRES=weight`, TRES
    /// names case-insensitive (`CPU`, `Mem`, `Node`, `GRES/gpu`, `GRES/gpu:a100`,
    /// `License/matlab`). A weight may end in a unit, which divides it as Slurm's
    /// `slurm_get_tres_weight_array` does: for memory (counted in MiB) `G`, `T`, `P`
    /// make it per GiB, TiB, PiB (`K`, `M` change nothing); for other TRES `K`, `M`,
    /// `G`, `T`, `P` make it per 1024, 1024², … units.
    ///
    /// Errors: an entry without `=`, a TRES type Slurm does not have, a `gres`/
    /// `license` without a name, or a weight that is not a non-negative number.
    pub fn parse(s: &str) -> Result<BillingWeights, String> {
        let mut weights = Vec::new();
        for kv in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("bad TRESBillingWeights entry '{kv}' (TRES=weight)"))?;
            let name = k.trim().to_ascii_lowercase();
            let (ty, sub) = match name.split_once('/') {
                Some((t, n)) => (t, Some(n)),
                None => (name.as_str(), None),
            };
            if !TYPES.contains(&ty) || sub.is_some_and(str::is_empty) {
                return Err(format!("TRESBillingWeights: '{k}' is not a TRES"));
            }
            if matches!(ty, "gres" | "license" | "bb") && sub.is_none() {
                return Err(format!(
                    "TRESBillingWeights: '{k}' needs a name ({ty}/NAME)"
                ));
            }
            let v = v.trim();
            let split = v
                .find(|c: char| c.is_ascii_alphabetic())
                .filter(|&i| i == v.len() - 1)
                .unwrap_or(v.len());
            let (num, unit) = v.split_at(split);
            let w: f64 = num
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| format!("TRESBillingWeights: bad weight '{kv}'"))?;
            let step = |n: i32| 1024f64.powi(n);
            let scale = match (ty == "mem", unit.to_ascii_uppercase().as_str()) {
                (_, "") => 1.0,
                (true, "K" | "M") => 1.0,
                (true, "G") => step(1),
                (true, "T") => step(2),
                (true, "P") => step(3),
                (false, "K") => step(1),
                (false, "M") => step(2),
                (false, "G") => step(3),
                (false, "T") => step(4),
                (false, "P") => step(5),
                _ => return Err(format!("TRESBillingWeights: bad unit in '{kv}'")),
            };
            weights.push((name, w / scale));
        }
        Ok(BillingWeights {
            text: s.trim().to_string(),
            weights,
        })
    }

    /// The weight of TRES `name` (case-insensitive), 0 when not weighted.
    pub fn weight(&self, name: &str) -> f64 {
        self.weights
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map_or(0.0, |(_, w)| *w)
    }
}

/// Whether TRES `name` is counted per node (cpu, mem, node, GRES), which MAX_TRES
/// takes the largest of, rather than globally (licenses, burst buffers, …).
fn per_node(name: &str) -> bool {
    matches!(name, "cpu" | "mem" | "node") || name.starts_with("gres/")
}

/// The billing rules of a cluster: each partition's weights and `PriorityFlags=
/// MAX_TRES`. An empty table bills CPUs everywhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BillingTable {
    /// `TRESBillingWeights` by partition name (partitions without weights absent).
    pub partitions: BTreeMap<String, BillingWeights>,
    /// `PriorityFlags=MAX_TRES`.
    pub max_tres: bool,
}

impl BillingTable {
    /// The table of `partitions`' `TRESBillingWeights`, with MAX_TRES or not.
    pub fn from_partitions(partitions: &[super::Partition], max_tres: bool) -> BillingTable {
        BillingTable {
            partitions: partitions
                .iter()
                .filter_map(|p| Some((p.name.clone(), p.billing_weights.clone()?)))
                .collect(),
            max_tres,
        }
    }

    /// The billable TRES of `tres` in `partition` (`billing` in `tres` is ignored):
    /// the CPU count without weights there, else the weighted sum (or, with
    /// MAX_TRES, the largest weighted per-node TRES plus the weighted global ones).
    pub fn billable(&self, partition: &str, tres: &Tres) -> f64 {
        let Some(w) = self.partitions.get(partition) else {
            return tres.get("cpu").copied().unwrap_or(0) as f64;
        };
        let (mut node, mut global) = (0.0f64, 0.0f64);
        for (name, count) in tres.iter().filter(|(k, _)| k.as_str() != "billing") {
            let v = *count as f64 * w.weight(name);
            if self.max_tres && per_node(name) {
                node = node.max(v);
            } else {
                global += v;
            }
        }
        node + global
    }

    /// `tres` with its `billing` entry set to the billable TRES in `partition`,
    /// truncated to a whole count as Slurm stores it in a job's TRES counts.
    pub fn with_billing(&self, partition: &str, mut tres: Tres) -> Tres {
        let b = self.billable(partition, &tres) as u64;
        tres.remove("billing");
        if b > 0 {
            tres.insert("billing".into(), b);
        }
        tres
    }
}

/// The TRES a set of nodes holds, with the cluster's licenses: `cpu`, `node`, `mem`
/// (MiB), each GRES by name and by `name:type`, and `license/<name>`. This is the
/// whole a partition's TRES factor is normalised by (Slurm divides a job's TRES by
/// its partition's `TRES=` counts in priority/multifactor).
pub fn nodes_tres<'a>(
    nodes: impl IntoIterator<Item = &'a super::Node>,
    licenses: &[(String, u32)],
) -> Tres {
    let mut t = Tres::new();
    let mut add = |k: String, v: u64| {
        if v > 0 {
            *t.entry(k).or_default() += v;
        }
    };
    for n in nodes {
        add("cpu".into(), u64::from(n.cpus));
        add("node".into(), 1);
        add("mem".into(), n.real_memory);
        for g in &n.gres {
            add(format!("gres/{}", g.name), u64::from(g.count));
            if let Some(k) = &g.kind {
                add(format!("gres/{}:{k}", g.name), u64::from(g.count));
            }
        }
    }
    for (name, count) in licenses {
        add(format!("license/{name}"), u64::from(*count));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tres(v: &[(&str, u64)]) -> Tres {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    fn table(w: &str, max_tres: bool) -> BillingTable {
        BillingTable {
            partitions: [("p".to_string(), BillingWeights::parse(w).unwrap())].into(),
            max_tres,
        }
    }

    #[test]
    fn slurm_conf_example() {
        // slurm.conf(5): 1 CPU and 8 GB with CPU=1.0,Mem=0.25G,GRES/gpu=2.0 bill 3.0;
        // with MAX_TRES, MAX(1*1.0, 8*0.25) = 2.0.
        let t = tres(&[("cpu", 1), ("mem", 8192), ("node", 1)]);
        let w = "CPU=1.0,Mem=0.25G,GRES/gpu=2.0";
        assert_eq!(table(w, false).billable("p", &t), 3.0);
        assert_eq!(table(w, true).billable("p", &t), 2.0);
    }

    #[test]
    fn no_weights_bill_cpus() {
        let t = tres(&[("cpu", 6), ("gres/gpu", 2), ("billing", 99)]);
        assert_eq!(BillingTable::default().billable("p", &t), 6.0);
        assert_eq!(table("CPU=1", false).billable("other", &t), 6.0);
        assert_eq!(
            BillingTable::default().with_billing("p", t)["billing"],
            6,
            "an old billing entry is replaced"
        );
    }

    #[test]
    fn gres_types_licenses_and_max_tres() {
        let t = tres(&[
            ("cpu", 4),
            ("mem", 4096),
            ("gres/gpu", 2),
            ("gres/gpu:a100", 2),
            ("license/matlab", 3),
        ]);
        let w = "cpu=0.5,gres/gpu:a100=10,license/matlab=1";
        assert_eq!(table(w, false).billable("p", &t), 2.0 + 20.0 + 3.0);
        // MAX_TRES: max(cpu 2, gpu:a100 20) + licenses 3.
        assert_eq!(table(w, true).billable("p", &t), 23.0);
        assert_eq!(table("cpu=0.3", false).with_billing("p", t)["billing"], 1);
    }

    #[test]
    fn units_divide_the_weight() {
        let w = BillingWeights::parse("Mem=1G,node=2K,CPU=3").unwrap();
        assert_eq!(w.weight("mem"), 1.0 / 1024.0);
        assert_eq!(w.weight("NODE"), 2.0 / 1024.0);
        assert_eq!(w.weight("cpu"), 3.0);
        assert_eq!(w.weight("gres/gpu"), 0.0);
        assert_eq!(w.text, "Mem=1G,node=2K,CPU=3");
        assert_eq!(BillingWeights::parse("mem=2").unwrap().weight("mem"), 2.0);
    }

    #[test]
    fn bad_weights_are_refused_by_name() {
        for bad in [
            "cpu",
            "widgets=1",
            "gres=1",
            "cpu=-1",
            "cpu=x",
            "cpu=1Q",
            "gres/=2",
        ] {
            let e = BillingWeights::parse(bad).unwrap_err();
            assert!(e.contains("TRESBillingWeights"), "{bad}: {e}");
        }
    }
}
