"""Clusters for the real-client suite.

Every test takes the ``cluster`` fixture, which runs it twice: once against a
*personal* controller (no config file: the first front-end starts it, with one node made
of this machine) and once against a *system* cluster (a TOML config named by
``SLUICE_CONF``) of three nodes ``cn1``-``cn3``, each reached over real SSH on loopback
with its own sshd, agent and spool, as tests/it/harness/sshd.rs builds them.

The front-ends are a bin directory of symlinks to the built binary, named as install.sh
names them. While a test runs, ``os.environ`` is that of a user of the cluster: the
bin directory and the venv first on PATH, no inherited ``SLURM_*`` variables, and
``SLUICE_CONF`` (system) or a private ``HOME``/``XDG_*`` (personal). The client
libraries inherit it, as they would in a user's shell.

Environment: ``SLUICE_BIN`` (the binary; default ``target/debug/sluice``),
``SLUICE_CLIENTS_MODES`` (``personal,system`` by default), ``SLUICE_CLIENTS_HOSTS_OK=1``
(set by run.sh once ``cn1``-``cn3`` resolve to 127.0.0.1 in its private mount
namespace).
"""

import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODES = ["cn1", "cn2", "cn3"]
FINISHED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "DEADLINE",
    "PREEMPTED",
    "BOOT_FAIL",
}


def sluice_bin():
    b = os.environ.get("SLUICE_BIN") or str(ROOT / "target/debug/sluice")
    b = os.path.abspath(b)
    if not os.access(b, os.X_OK):
        pytest.exit(f"no sluice binary at {b} (cargo build, or set SLUICE_BIN)", 2)
    return b


def linked_commands():
    """The front-end names install.sh links (its COMMANDS=(...) line)."""
    text = (ROOT / "install.sh").read_text()
    m = re.search(r"^COMMANDS=\(([^)]*)\)", text, re.M)
    assert m, "install.sh has no COMMANDS=(...) line"
    return m.group(1).split()


def make_bin(root):
    b = root / "bin"
    b.mkdir()
    target = sluice_bin()
    for name in linked_commands() + ["sluice"]:
        (b / name).symlink_to(target)
    return b


def wait_until(what, timeout, cond, interval=0.1):
    """Polls ``cond`` until it returns a truthy value (returned), failing after
    ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_env(extra, bin_dir):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SRUN_", "SALLOC_", "SINFO_"))
        and k not in ("SLUICE_CONF",)
    }
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = f"{bin_dir}:{venv_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    env["PYTHONUNBUFFERED"] = "1"
    # Functions the tests hand to submitit, dask and Parsl are pickled by reference
    # to their test module; the jobs import it from here.
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parent)
    env.update(extra)
    return env


class Cluster:
    """One running cluster: its mode, the environment of its users, its nodes."""

    def __init__(self, mode, root, bin_dir, env, nodes):
        self.mode = mode
        self.root = root
        self.bin = bin_dir
        self.env = env
        self.nodes = nodes
        self._stop = []

    # --- front-ends -------------------------------------------------------------
    def run(self, *args, check=True, input=None, cwd=None, timeout=120):
        """Runs a front-end (or any command) as the cluster's user; returns the
        CompletedProcess (text)."""
        p = subprocess.run(
            list(args),
            env=self.env,
            cwd=cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and p.returncode != 0:
            raise AssertionError(
                f"{args} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
            )
        return p

    def sacct(self, job, fields="JobID,State,ExitCode", allocations=True):
        """Rows of ``sacct -P -n`` for ``job``, each a dict of the requested fields."""
        args = ["sacct", "-P", "-n", "-j", str(job), "-o", fields]
        if allocations:
            args.append("-X")
        out = self.run(*args).stdout
        names = fields.split(",")
        return [dict(zip(names, line.split("|"))) for line in out.splitlines() if line]

    def state(self, job):
        rows = self.sacct(job, "JobID,State")
        return rows[0]["State"].split()[0] if rows else None

    def wait_done(self, job, timeout=120):
        """Waits until every allocation row of ``job`` (array tasks included) is
        finished; returns {JobID: State}."""

        def done():
            rows = self.sacct(job, "JobID,State")
            states = {r["JobID"]: r["State"].split()[0] for r in rows}
            return states if states and all(s in FINISHED for s in states.values()) else None

        return wait_until(f"job {job} to finish", timeout, done, interval=0.3)

    def cancel_all(self):
        self.run("scancel", "--me", check=False)


# --- personal mode -------------------------------------------------------------
def start_personal(tmp):
    if os.path.exists("/etc/sluice/sluice.toml"):
        pytest.fail("/etc/sluice/sluice.toml exists, so personal mode cannot be tested here")
    root = tmp / "personal"
    root.mkdir()
    bin_dir = make_bin(root)
    home = root / "home"
    home.mkdir()
    env = user_env(
        {
            "HOME": str(home),
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME")
            or os.path.expanduser("~/.cache"),
        },
        bin_dir,
    )
    c = Cluster("personal", root, bin_dir, env, [socket.gethostname().split(".")[0]])
    # The first front-end starts the controller (README's zero-config path).
    c.run("sinfo", timeout=60)
    c._stop.append(lambda: c.run("sluice", "controller", "--stop", check=False, timeout=60))
    return c


# --- system mode: three SSH nodes on loopback ------------------------------------
def start_system(tmp):
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd):
        pytest.fail("system mode needs /usr/sbin/sshd (apt-get install openssh-server)")
    if os.geteuid() != 0:
        pytest.fail("system mode needs root (sshd privilege separation)")
    if os.environ.get("SLUICE_CLIENTS_HOSTS_OK") != "1":
        pytest.fail("cn1-cn3 must resolve (run the suite through tests/clients/run.sh)")
    os.makedirs("/run/sshd", exist_ok=True)
    root = tmp / "system"
    root.mkdir()
    bin_dir = make_bin(root)
    user = pwd.getpwuid(os.geteuid()).pw_name
    tag = re.sub(r"[^A-Za-z0-9]", "", root.parent.name)
    conf_path = root / "sluice.toml"
    conf = f"""cluster_name = "clients"
state_dir = "{root}/state"
spool_dir = "{root}/spool"
socket = "{root}/run/ctld.sock"
kill_wait = 2
slurmd_timeout = 60
reconnect_max = 2
[cgroup]
root = "sluice_clients_{os.getpid()}_{tag}"
"""
    conf_path.write_text(conf)
    env = user_env({"SLUICE_CONF": str(conf_path)}, bin_dir)
    kg = subprocess.run(
        [sluice_bin(), "keygen"], env=env, capture_output=True, text=True, check=True
    )
    controller_pub = kg.stdout.strip()
    assert controller_pub.startswith("ssh-ed25519 "), controller_pub
    known = []
    sshds = []
    for name in NODES:
        nd = root / "nodes" / name
        (nd / "spool").mkdir(parents=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(nd / "host_key")],
            check=True,
        )
        port = free_port()
        pub = (nd / "host_key.pub").read_text().split()
        known.append(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
        (nd / "authorized_keys").write_text(controller_pub + "\n")
        (nd / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {nd}/host_key\n"
            f"PidFile {nd}/sshd.pid\nAuthorizedKeysFile {nd}/authorized_keys\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            f"PermitRootLogin prohibit-password\nAllowUsers {user}\nPrintMotd no\n"
        )
        log = open(nd / "sshd.log", "ab")
        p = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(nd / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        sshds.append(p)

        def greets(port=port):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    return s.recv(8) == b"SSH-2.0-"
            except OSError:
                return False

        wait_until(f"sshd of {name}", 20, greets)
        conf += (
            f'[[nodes]]\nname = "{name}"\ncpus = 2\nmemory = 2000\n'
            f'ssh = "{user}@127.0.0.1:{port}"\nknown_hosts = "{root}/known_hosts"\n'
            f'spool_dir = "{nd}/spool"\nsluice_path = "{sluice_bin()}"\n'
        )
    (root / "known_hosts").write_text("".join(known))
    conf += (
        f'[[partitions]]\nname = "debug"\nnodes = "{",".join(NODES)}"\n'
        'default = true\nmax_time = "1:00:00"\n'
    )
    conf_path.write_text(conf)
    log = open(root / "controller.log", "ab")
    ctld = subprocess.Popen(
        [sluice_bin(), "controller", "--foreground"],
        env=dict(env, SLUICE_LOG="debug"),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    c = Cluster("system", root, bin_dir, env, list(NODES))

    def idle():
        p = c.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split() for line in p.stdout.splitlines() if line.strip())
        return p.returncode == 0 and all(states.get(n) == "idle" for n in NODES)

    try:
        wait_until("the three nodes idle", 60, idle, interval=0.3)
    except AssertionError:
        print((root / "controller.log").read_text()[-4000:], file=sys.stderr)
        raise

    def stop():
        ctld.send_signal(signal.SIGTERM)
        try:
            ctld.wait(10)
        except subprocess.TimeoutExpired:
            ctld.kill()
            ctld.wait()
        for p in sshds:
            # sshd and the sessions it started (the agents) are in its session.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    c._stop.append(stop)
    return c


@pytest.fixture(scope="session")
def _tmp_root():
    d = pathlib.Path(tempfile.mkdtemp(prefix="sluice-clients-"))
    yield d
    if os.environ.get("SLUICE_KEEP_TEST_DIRS"):
        print(f"keeping {d}", file=sys.stderr)
    else:
        shutil.rmtree(d, ignore_errors=True)


_clusters = {}


@pytest.fixture(scope="session")
def _all_clusters(_tmp_root):
    yield _clusters
    for c in _clusters.values():
        c.cancel_all()
        for stop in c._stop:
            stop()


def modes():
    return [m for m in os.environ.get("SLUICE_CLIENTS_MODES", "personal,system").split(",") if m]


@pytest.fixture(params=modes())
def cluster(request, _all_clusters, _tmp_root, monkeypatch, tmp_path):
    mode = request.param
    if mode not in _all_clusters:
        start = {"personal": start_personal, "system": start_system}[mode]
        _all_clusters[mode] = start(_tmp_root)
    c = _all_clusters[mode]
    for k in list(os.environ):
        if k not in c.env:
            monkeypatch.delenv(k)
    for k, v in c.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    c.work = tmp_path
    yield c
    # Nothing a test left behind may hold the nodes of the next one.
    c.cancel_all()
    wait_until(
        "the queue to drain",
        60,
        lambda: c.run("squeue", "-h", "--me", "-t", "PD,R,CG,S", "-o", "%i", check=False).stdout.strip()
        == "",
        interval=0.3,
    )
