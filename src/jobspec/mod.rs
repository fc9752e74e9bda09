//! The sbatch/srun/salloc option model (cf. src/common/slurm_opt.c): units, the option
//! grammar, `#SBATCH` directives, `--export`, and output-file patterns.

pub mod container_opts;
pub mod directives;
pub mod export;
pub mod opts;
pub mod pattern;
pub mod timeparse;
pub mod units;
