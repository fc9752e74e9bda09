//! MPI bootstrap (issue 26): `srun --mpi=pmi2` serves PMI to every task, with the
//! key-value exchange fenced across nodes through the controller.
//!
//! Two kinds of client: a PMI client written here in Python's standard library
//! (`tests/data/pmi_client.py`, both wire protocols, so the server is checked without
//! any MPI installed), and mpi4py on MPICH (the real thing). The latter needs a Python
//! that imports mpi4py built on MPICH: `SLUICE_MPI_PYTHON`, else `python3` on PATH
//! (.ci/run installs one from PyPI's `mpich` and `mpi4py` wheels); without one those
//! tests say so and skip, unless `SLUICE_REQUIRE_MPI=1` (CI), where that fails.
//! Several nodes are several agents on this machine reached over SSH (`harness::sshd`).

use crate::harness::sshd::{NodeSetup, SshCluster};
use crate::harness::{Setup, TestCluster, sorted_lines, stderr, stdout};
use std::path::PathBuf;
use std::process::Command;

/// The PMI client of these tests, committed beside them.
fn pmi_client() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/pmi_client.py")
}

/// A Python interpreter with the standard library (absolute: front-ends get a bare
/// PATH).
fn python() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("python3"))
        .find(|p| p.exists())
        .or_else(|| Some(PathBuf::from("/usr/bin/python3")).filter(|p| p.exists()))
}

/// A Python whose mpi4py runs on MPICH, or `None` after saying why (a panic when
/// `SLUICE_REQUIRE_MPI=1`).
fn mpi_python() -> Option<PathBuf> {
    let cands: Vec<PathBuf> = std::env::var_os("SLUICE_MPI_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain(python())
        .collect();
    for p in &cands {
        let ok = Command::new(p)
            .args([
                "-c",
                "import sys; from mpi4py import MPI; \
                 sys.exit(0 if 'MPICH' in MPI.Get_library_version() else 3)",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(p.clone());
        }
    }
    let why = format!(
        "no Python with mpi4py on MPICH (tried {cands:?}; set SLUICE_MPI_PYTHON, or \
         pip install mpich mpi4py)"
    );
    if std::env::var("SLUICE_REQUIRE_MPI").is_ok_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("skipping: {why}");
    None
}

/// The mpi4py program: every rank prints its rank, the world size, its node and the
/// sum of all ranks (an allreduce across the step).
const ALLREDUCE: &str = "from mpi4py import MPI; import os; c = MPI.COMM_WORLD; \
     s = c.allreduce(c.Get_rank(), op=MPI.SUM); \
     print('rank %d of %d on %s sum %d' % (c.Get_rank(), c.Get_size(), \
     os.environ['SLURMD_NODENAME'], s), flush=True)";

fn expected(n: u32, nodes: &[&str]) -> Vec<String> {
    let sum: u32 = (0..n).sum();
    let per = n as usize / nodes.len();
    let mut v: Vec<String> = (0..n)
        .map(|r| format!("rank {r} of {n} on {} sum {sum}", nodes[r as usize / per]))
        .collect();
    v.sort();
    v
}

#[test]
fn mpi_list_and_unsupported_types_are_refused_at_submit() {
    let c = TestCluster::start();
    let list = c.ok("srun", &["--mpi=list"]);
    assert_eq!(list, "MPI plugin types are...\n\tnone\n\tpmi2\n");
    let (code, err) = c.fails_err("srun", &["--mpi=pmix", "true"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("srun: error: MPI type 'pmix' is not supported by sluice yet"),
        "{err}"
    );
    let (code, err) = c.fails_err("srun", &["--mpi=bogus", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("Invalid MPI type 'bogus'"), "{err}");
    // Nothing was submitted.
    assert!(c.job_ids().is_empty());
    // --mpi=none and no --mpi: no PMI variables.
    let out = c.ok("srun", &["--mpi=none", "sh", "-c", "echo ${PMI_FD:-none}"]);
    assert_eq!(out, "none\n");
}

#[test]
fn pmi_wire_protocols_exchange_keys_on_one_node() {
    let Some(py) = python() else {
        eprintln!("skipping: no python3");
        return;
    };
    // MpiDefault from the configuration, and SLURM_MPI_TYPE from the environment.
    let c = TestCluster::start_with(Setup {
        top: "mpi_default = \"pmi2\"",
        ..Setup::default()
    });
    let client = pmi_client();
    let (py, client) = (py.to_str().unwrap(), client.to_str().unwrap());
    for wire in ["1", "2"] {
        let out = c.ok("srun", &["-n3", py, client, wire]);
        assert_eq!(
            sorted_lines(&out),
            [
                "rank 0 of 3 jobid ok: got 1:from-1 2:from-2 map (vector,(0,1,3))",
                "rank 1 of 3 jobid ok: got 0:from-0 2:from-2 map (vector,(0,1,3))",
                "rank 2 of 3 jobid ok: got 0:from-0 1:from-1 map (vector,(0,1,3))",
            ],
            "wire {wire}: {out}"
        );
    }
    // --mpi=none overrides the default; SLURM_MPI_TYPE=pmi2 overrides that.
    let out = c.ok(
        "srun",
        &["--mpi=none", "sh", "-c", "echo ${PMI_RANK:-none}"],
    );
    assert_eq!(out, "none\n");
    let o = c
        .cmd("srun")
        .env("SLURM_MPI_TYPE", "none")
        .args(["sh", "-c", "echo ${PMI_RANK:-none}"])
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "none\n", "{}", stderr(&o));
}

#[test]
fn pmi_fence_spans_nodes() {
    let Some(py) = python() else {
        eprintln!("skipping: no python3");
        return;
    };
    let Some(c) = SshCluster::start(&[NodeSetup::new("pm1"), NodeSetup::new("pm2")], 60) else {
        return;
    };
    c.wait_all_idle();
    let client = pmi_client();
    let (py, client) = (py.to_str().unwrap(), client.to_str().unwrap());
    for wire in ["1", "2"] {
        let out = c.ok("srun", &["--mpi=pmi2", "-N2", "-n4", py, client, wire]);
        let lines = sorted_lines(&out);
        assert_eq!(lines.len(), 4, "{out}");
        for (r, l) in lines.iter().enumerate() {
            let others: Vec<String> = (0..4)
                .filter(|&o| o != r)
                .map(|o| format!("{o}:from-{o}"))
                .collect();
            assert_eq!(
                *l,
                format!(
                    "rank {r} of 4 jobid ok: got {} map (vector,(0,2,2))",
                    others.join(" ")
                ),
                "wire {wire}: {out}"
            );
        }
    }
}

#[test]
fn mpi4py_allreduce_under_srun_and_sbatch_on_two_nodes() {
    let Some(py) = mpi_python() else {
        return;
    };
    let Some(c) = SshCluster::start(&[NodeSetup::new("mp1"), NodeSetup::new("mp2")], 60) else {
        return;
    };
    c.wait_all_idle();
    let py = py.to_str().unwrap();
    let out = c.ok("srun", &["--mpi=pmi2", "-N2", "-n4", py, "-c", ALLREDUCE]);
    assert_eq!(sorted_lines(&out), expected(4, &["mp1", "mp2"]), "{out}");
    // The same program as a step of a batch job.
    let id = c.submit(&[
        "-N2",
        "-n4",
        "-o",
        "mpi.out",
        "--wrap",
        &format!("srun --mpi=pmi2 {py} -c \"{ALLREDUCE}\""),
    ]);
    assert_eq!(c.wait_done(id), "COMPLETED");
    let text = c.wait_file("mpi.out", |s| s.lines().count() >= 4);
    assert_eq!(sorted_lines(&text), expected(4, &["mp1", "mp2"]), "{text}");
}

#[test]
fn mpi4py_allreduce_on_one_node() {
    let Some(py) = mpi_python() else {
        return;
    };
    let c = TestCluster::start();
    let node = c.node();
    let out = c.ok(
        "srun",
        &["--mpi=pmi2", "-n4", py.to_str().unwrap(), "-c", ALLREDUCE],
    );
    assert_eq!(sorted_lines(&out), expected(4, &[&node]), "{out}");
}
