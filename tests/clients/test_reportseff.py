"""reportseff (https://github.com/troycomi/reportseff): reads finished jobs from
``sacct --parsable -n --delimiter=^|^ --format=…`` (after checking the fields with
``sacct --helpformat``) and prints time, CPU and memory efficiency, from job ids, from a
directory of ``slurm-%j.out`` files, or from array ids."""

import re
import subprocess
import sys

# At least 3 s of wall time and 2 s of CPU time, however loaded the machine: reportseff
# counts TotalCPU in whole seconds, so a job that got under 1 s of CPU has no CPUEff.
BUSY = (
    "import time\n"
    "x = bytearray(40 * 1024 * 1024)\n"
    "end = time.time() + 3\n"
    "while time.time() < end or time.process_time() < 2:\n"
    "    pass\n"
)


def reportseff(cluster, *args):
    p = subprocess.run(
        ["reportseff", "--no-color", "--parsable", *args],
        env=cluster.env,
        cwd=cluster.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if line.strip()]
    header = lines[0].split("|")
    return [dict(zip(header, line.split("|"))) for line in lines[1:]]


def submit(cluster, *args):
    out = cluster.run("sbatch", "--parsable", *args).stdout.strip()
    return out.split(";")[0]


def percent(s):
    """An efficiency (``--parsable`` prints the bare number; ``---`` means that
    reportseff could not compute it)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)%?", s)
    assert m, f"not an efficiency: {s!r}"
    return float(m.group(1))


def test_efficiency_of_finished_jobs(cluster):
    (cluster.work / "busy.py").write_text(BUSY)
    ok = submit(cluster, "-t", "10", "-c", "1", "--mem=200M", "--wrap", f"{sys.executable} busy.py")
    bad = submit(cluster, "-t", "5", "--mem=100M", "--wrap", "exit 7")
    cluster.wait_done(ok)
    cluster.wait_done(bad)
    rows = reportseff(cluster, "--format", "JobID,State,Elapsed,TimeEff,CPUEff,MemEff,ReqMem,ExitCode", ok, bad)
    by_id = {r["JobID"]: r for r in rows}
    assert set(by_id) == {ok, bad}, rows
    r = by_id[ok]
    assert r["State"] == "COMPLETED"
    assert r["ReqMem"] == "200M"
    h, m, s = (int(x) for x in r["Elapsed"].split(":"))
    elapsed = h * 3600 + m * 60 + s
    assert elapsed >= 3
    # TimeEff is Elapsed over the 10-minute limit.
    assert abs(percent(r["TimeEff"]) - round(elapsed / 600 * 100, 1)) <= 0.1, r
    assert 0 < percent(r["CPUEff"]) <= 100, r
    assert 0 <= percent(r["MemEff"]) <= 100, r
    f = by_id[bad]
    assert f["State"] == "FAILED"
    assert f["ExitCode"] == "7:0"


def test_jobs_from_a_directory_of_output_files_and_arrays(cluster):
    logs = cluster.work / "logs"
    logs.mkdir()
    single = submit(cluster, "-o", f"{logs}/slurm-%j.out", "--wrap", "echo one")
    array = submit(cluster, "-a", "0-2", "-o", f"{logs}/slurm-%A_%a.out", "--wrap", "echo $SLURM_ARRAY_TASK_ID")
    cluster.wait_done(single)
    cluster.wait_done(array)
    # From a directory, jobs are named by their output files.
    rows = reportseff(cluster, "--format", "JobID,State", str(logs))
    got = sorted((r["JobID"], r["State"]) for r in rows)
    want = sorted(
        [(f"slurm-{single}.out", "COMPLETED")]
        + [(f"slurm-{array}_{i}.out", "COMPLETED") for i in range(3)]
    )
    assert got == want, rows
    rows = reportseff(cluster, "--format", "JobID,State", array)
    assert sorted(r["JobID"] for r in rows) == [f"{array}_{i}" for i in range(3)], rows
