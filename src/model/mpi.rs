//! The MPI bootstrap a step asks for (`srun --mpi`, `SLURM_MPI_TYPE`, slurm.conf's
//! `MpiDefault`), and what its tasks are told about the step's process layout.
//!
//! Pure: parsing and the PMI `PMI_process_mapping` text; the server that speaks the
//! PMI wire protocols lives in `stepd::pmi`.

use serde::{Deserialize, Serialize};

/// How a step's tasks bootstrap MPI (Slurm's mpi plugins).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MpiType {
    /// No bootstrap service (mpi/none): MPI libraries find their own way, or run as
    /// singletons.
    #[default]
    None,
    /// A PMI server per node (mpi/pmi2): each task gets `PMI_FD`, `PMI_RANK`,
    /// `PMI_SIZE` and `PMI_JOBID`; the PMI-1 and PMI-2 wire protocols are both served.
    Pmi2,
}

/// The types `srun --mpi=list` names, in its order.
pub const MPI_TYPES: &[&str] = &["none", "pmi2"];

/// Why an `--mpi` value is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpiError {
    /// A type Slurm has that sluice does not serve (PMIx, Cray's).
    NotSupported(String),
    /// Not an MPI type at all.
    Invalid(String),
}

impl std::fmt::Display for MpiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MpiError::NotSupported(t) => write!(
                f,
                "MPI type '{t}' is not supported by sluice yet (no PMIx server is wired in); \
                 --mpi=list for acceptable types"
            ),
            MpiError::Invalid(t) => {
                write!(f, "Invalid MPI type '{t}', --mpi=list for acceptable types")
            }
        }
    }
}

impl std::error::Error for MpiError {}

impl MpiType {
    /// Parses an `--mpi`/`SLURM_MPI_TYPE`/`MpiDefault` value (case-insensitive;
    /// `openmpi` and `mpichgm`-era names Slurm maps to none are taken as none, as
    /// Slurm 22.05 does for `openmpi`). Errors: [`MpiError`].
    pub fn parse(s: &str) -> Result<MpiType, MpiError> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "none" | "openmpi" => Ok(MpiType::None),
            "pmi2" => Ok(MpiType::Pmi2),
            x if x.starts_with("pmix") || x == "cray_shasta" || x == "pmi1" => {
                Err(MpiError::NotSupported(s.trim().to_string()))
            }
            _ => Err(MpiError::Invalid(s.trim().to_string())),
        }
    }

    /// The name Slurm gives it (SLURM_MPI_TYPE, `scontrol show config`).
    pub fn name(self) -> &'static str {
        match self {
            MpiType::None => "none",
            MpiType::Pmi2 => "pmi2",
        }
    }
}

/// `srun --mpi=list`'s text (cf. Slurm 22.05's `MPI plugin types are...`).
pub fn list_text() -> String {
    let mut s = String::from("MPI plugin types are...\n");
    for t in MPI_TYPES {
        s.push('\t');
        s.push_str(t);
        s.push('\n');
    }
    s
}

/// MPICH's `PMI_process_mapping` for a step: which node each rank runs on, as
/// `(vector,(first_node,node_count,ranks_per_node),...)`. `node_of_rank[r]` is the
/// step-relative node index of rank `r`. Consecutive ranks on one node form a block;
/// blocks of equal size on consecutive nodes share one triple. The vector covers every
/// rank exactly once, so readers that repeat the vector cyclically read it the same.
pub fn process_mapping(node_of_rank: &[u32]) -> String {
    // (node, ranks) blocks of consecutive ranks on one node.
    let mut blocks: Vec<(u32, u32)> = Vec::new();
    for &n in node_of_rank {
        match blocks.last_mut() {
            Some((bn, len)) if *bn == n => *len += 1,
            _ => blocks.push((n, 1)),
        }
    }
    // (first node, node count, ranks per node).
    let mut triples: Vec<(u32, u32, u32)> = Vec::new();
    for (n, len) in blocks {
        match triples.last_mut() {
            Some((first, count, per)) if *per == len && *first + *count == n => *count += 1,
            _ => triples.push((n, 1, len)),
        }
    }
    let parts: Vec<String> = triples
        .iter()
        .map(|(a, b, c)| format!("({a},{b},{c})"))
        .collect();
    format!("(vector,{})", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_types() {
        assert_eq!(MpiType::parse("pmi2"), Ok(MpiType::Pmi2));
        assert_eq!(MpiType::parse("PMI2"), Ok(MpiType::Pmi2));
        assert_eq!(MpiType::parse("none"), Ok(MpiType::None));
        assert_eq!(
            MpiType::parse("pmix_v4"),
            Err(MpiError::NotSupported("pmix_v4".into()))
        );
        assert!(matches!(
            MpiType::parse("pmix"),
            Err(MpiError::NotSupported(_))
        ));
        assert_eq!(MpiType::parse("lam"), Err(MpiError::Invalid("lam".into())));
        assert!(
            MpiError::NotSupported("pmix".into())
                .to_string()
                .contains("not supported")
        );
    }

    #[test]
    fn list_names_every_type() {
        assert_eq!(list_text(), "MPI plugin types are...\n\tnone\n\tpmi2\n");
    }

    #[test]
    fn mapping_block_and_cyclic() {
        // -N2 -n4 block: ranks 0,1 on node 0; 2,3 on node 1.
        assert_eq!(process_mapping(&[0, 0, 1, 1]), "(vector,(0,2,2))");
        // cyclic: one rank per node, twice.
        assert_eq!(process_mapping(&[0, 1, 0, 1]), "(vector,(0,2,1),(0,2,1))");
        // uneven block: 3 on node 0, 1 on node 1.
        assert_eq!(process_mapping(&[0, 0, 0, 1]), "(vector,(0,1,3),(1,1,1))");
        assert_eq!(process_mapping(&[0]), "(vector,(0,1,1))");
        assert_eq!(process_mapping(&[]), "(vector,)");
    }
}
