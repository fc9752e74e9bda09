"""snakemake with snakemake-executor-plugin-slurm
(https://snakemake.github.io/snakemake-plugin-catalog/plugins/executor/slurm.html): each
rule becomes an sbatch job (named after the run's UUID, polled through sacct/squeue by
that name), which runs snakemake again inside the job with the slurm-jobstep executor,
which runs the rule's command under ``srun``."""

import subprocess
import sys

SNAKEFILE = r"""
rule all:
    input: "upper.txt", expand("part{i}.txt", i=[1, 2])

rule part:
    output: "part{i}.txt"
    resources: mem_mb=100, runtime=5
    shell: "echo part {wildcards.i} job $SLURM_JOB_ID > {output}"

rule upper:
    input: "part1.txt", "part2.txt"
    output: "upper.txt"
    threads: 2
    resources: mem_mb=100, runtime=5
    shell: "cat {input} | tr a-z A-Z > {output}; echo cpus=$SLURM_CPUS_PER_TASK >> {output}"
"""

FAILING = r"""
rule all:
    input: "never.txt"

rule bad:
    output: "never.txt"
    resources: mem_mb=100, runtime=5
    shell: "echo about to fail; exit 3"
"""


def snakemake(cluster, *args, timeout=400):
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--executor", "slurm", "--jobs", "3",
         "--latency-wait", "10", "--default-resources", "slurm_partition=debug",
         "--nolock", "--slurm-init-seconds-before-status-checks", "2",
         "--seconds-between-status-checks", "2", *args],
        cwd=cluster.work,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_workflow_runs_each_rule_as_a_job_and_produces_its_outputs(cluster):
    (cluster.work / "Snakefile").write_text(SNAKEFILE)
    p = snakemake(cluster)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log
    parts = {}
    for i in (1, 2):
        text = (cluster.work / f"part{i}.txt").read_text()
        words = text.split()
        assert words[:3] == ["part", str(i), "job"], text
        parts[i] = words[3]
    upper = (cluster.work / "upper.txt").read_text().splitlines()
    assert upper[:2] == [f"PART 1 JOB {parts[1]}", f"PART 2 JOB {parts[2]}"]
    assert upper[2] == "cpus=2"
    assert "4 of 4 steps (100%) done" in log, log
    # Every rule was its own sbatch job, finished COMPLETED.
    for job in parts.values():
        assert cluster.wait_done(job) == {job: "COMPLETED"}


def test_a_failing_rule_fails_the_workflow_with_its_job_reported(cluster):
    (cluster.work / "Snakefile").write_text(FAILING)
    p = snakemake(cluster)
    log = p.stdout + p.stderr
    assert p.returncode != 0, log
    assert "Error in rule bad" in log, log
    assert not (cluster.work / "never.txt").exists()
