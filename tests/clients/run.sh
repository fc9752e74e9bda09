#!/usr/bin/env bash
# tests/clients/run.sh: the real-client suite. Builds (or reuses) a venv of the pinned
# clients in requirements.txt, then runs pytest on tests/clients/ against the built
# binary, each test in personal mode and in system mode with three SSH nodes.
#
# Usage: tests/clients/run.sh [pytest args...]      e.g. -k submitit, -x
#        tests/clients/run.sh --relock               rebuild requirements.txt from .in
# Environment: SLUICE_BIN (default target/debug/sluice), SLUICE_CLIENTS_CACHE (where
# venvs are kept, default ~/.cache/sluice-clients; one per hash of requirements.txt and
# the interpreter), SLUICE_CLIENTS_PYTHON (default /usr/bin/python3), SLUICE_CLIENTS_MODES.
#
# torch comes from PyPI (2.5.1; its Linux wheel is the CUDA build and pulls ~2.8 GB of
# nvidia-* wheels, which run fine on a CPU-only machine): the venv is ~5.5 GB and takes
# about 3-4 minutes to build on 2 cores, once per machine thanks to the cache.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=${SLUICE_CLIENTS_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
CACHE=${SLUICE_CLIENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-clients}

if [ "${1:-}" = --relock ]; then
	T=$(mktemp -d)
	trap 'rm -rf -- "$T"' EXIT
	"$PY" -m venv "$T/v"
	"$T/v/bin/pip" install -q pip==24.3.1
	"$T/v/bin/pip" install -q --no-cache-dir -r "$HERE/requirements.in"
	{
		echo "# Full lock of requirements.in (pip freeze of the venv run.sh builds). Regenerate with"
		echo "# tests/clients/run.sh --relock."
		"$T/v/bin/pip" freeze --all | grep -v '^pip==\|^setuptools=='
	} >"$HERE/requirements.txt"
	exit 0
fi

export SLUICE_BIN=${SLUICE_BIN:-$ROOT/target/debug/sluice}
case $SLUICE_BIN in /*) ;; *) SLUICE_BIN=$(pwd)/$SLUICE_BIN ;; esac
[ -x "$SLUICE_BIN" ] || { echo "clients: no binary at $SLUICE_BIN (cargo build first)" >&2; exit 2; }

# System mode reaches its nodes over SSH on loopback.
if [ ! -x /usr/sbin/sshd ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null) ||
		echo "clients: cannot install openssh-server; system-mode tests will fail" >&2
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null && [ "$(id -u)" = 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

# --- the venv, cached by the hash of the lock and the interpreter
key=$( (cat "$HERE/requirements.txt"; "$PY" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
VENV=$CACHE/venv-$key
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock 9
if [ ! -f "$VENV/.complete" ]; then
	start=$(date +%s)
	rm -rf -- "$VENV"
	# Older venvs of this cache (other locks) are large: keep only the current one.
	for old in "$CACHE"/venv-*; do
		[ -e "$old" ] && [ "$old" != "$VENV" ] && rm -rf -- "$old"
	done
	echo "clients: building $VENV"
	"$PY" -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check pip==24.3.1
	"$VENV/bin/pip" install -q --no-cache-dir --progress-bar off -r "$HERE/requirements.txt"
	touch "$VENV/.complete"
	echo "clients: venv built in $(($(date +%s) - start)) s"
fi
flock -u 9

# --- node names: cn1-cn3 resolve to loopback in a private mount namespace (the nodes'
# names are what SLURM_JOB_NODELIST, MASTER_ADDR recipes and Lightning hand to
# getaddrinfo); the machine's /etc/hosts is not touched.
cd "$HERE"
PYTEST=("$VENV/bin/python" -m pytest -p no:cacheprovider -rfEs "$@")
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	H=$(mktemp "${TMPDIR:-/tmp}/sluice-clients-hosts.XXXXXX")
	trap 'rm -f -- "$H"' EXIT
	{ cat /etc/hosts; echo "127.0.0.1 cn1 cn2 cn3"; } >"$H"
	chmod 644 "$H"
	set +e
	SLUICE_CLIENTS_HOSTS_OK=1 unshare --mount --propagation private -- \
		bash -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' _ "$H" "${PYTEST[@]}"
	rc=$?
	set -e
	exit $rc
fi
exec "${PYTEST[@]}"
