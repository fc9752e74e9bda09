#!/usr/bin/env bash
# Runs ../shared/conformance against the built sluice binary with a private
# controller (system mode, config in a temp dir), then compares the results with
# tests/conformance-expected.txt: every check listed there must pass. Checks that
# belong to later work are reported but do not fail the run.
#
# usage: scripts/conformance.sh [path/to/sluice] [check-filter...]
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$top/target/debug/sluice}
shift || true
# ../shared next to the checkout, or two levels up for a git worktree (wt/<name>).
conf_dir=${CONFORMANCE_DIR:-}
if [ -z "$conf_dir" ]; then
	for d in "$top/../shared/conformance" "$top/../../shared/conformance"; do
		if [ -d "$d" ]; then conf_dir=$d; break; fi
	done
	conf_dir=${conf_dir:-$top/../shared/conformance}
fi
if [ ! -d "$conf_dir" ]; then
	echo "conformance: $conf_dir not found; skipping"
	exit 0
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d /tmp/sluice-conf.XXXXXX)
node=$(hostname -s 2>/dev/null || hostname)
node=${node%%.*}
cg_root="sluice-conformance-$(basename "$tmp" | tr -dc 'A-Za-z0-9')"
cat >"$tmp/sluice.toml" <<TOML
cluster_name = "conformance"
state_dir = "$tmp/state"
spool_dir = "$tmp/spool"
socket = "$tmp/run/ctld.sock"
kill_wait = 5
[[nodes]]
name = "$node"
cpus = 8
memory = 8000
# Declared GPUs (no device files): allocation, squeue/sinfo/scontrol text and
# CUDA_VISIBLE_DEVICES are checked; device isolation is not.
gres = "gpu:4"
[[partitions]]
name = "debug"
nodes = "$node"
default = true
max_time = "1:00:00"
[[partitions]]
name = "batch"
nodes = "$node"
[cgroup]
# Its own root, so that another controller's job cgroups (same job ids) are never shared.
root = "$cg_root"
TOML
mkdir -p "$tmp/bin"
for c in sbatch srun salloc squeue scancel sinfo scontrol sacct sluice; do ln -s "$bin" "$tmp/bin/$c"; done
export SLUICE_CONF=$tmp/sluice.toml
export PATH=$tmp/bin:$PATH
"$bin" controller --foreground >"$tmp/controller.log" 2>&1 &
ctld=$!
cleanup() {
	kill "$ctld" 2>/dev/null
	wait "$ctld" 2>/dev/null
	for f in "$tmp"/spool/job_*/job.pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
	# stepd removes its job's cgroups but leaves sluice's root; remove it with whatever
	# a killed stepd left in it.
	find /sys/fs/cgroup -type d -name "$cg_root" 2>/dev/null | while read -r d; do
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
		sleep 0.2
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 100); do sinfo -h >/dev/null 2>&1 && break; sleep 0.1; done
out=$(cd "$conf_dir" && CONF_TMPDIR=$tmp ./run.sh "$@" 2>&1)
# Report without the runner's own closing line, so that CI reads the test runner's.
grep -E '^(PASS|FAIL|SKIP) ' <<<"$out"
pass=$(grep -c '^PASS ' <<<"$out")
fail=$(grep -c '^FAIL ' <<<"$out")
skipped=$(grep -c '^SKIP ' <<<"$out")
echo "conformance summary: pass=$pass fail=$fail skip=$skipped"
missing=()
while read -r want; do
	[[ -z "$want" || "$want" == \#* ]] && continue
	grep -q "^PASS $want " <<<"$out" || missing+=("$want")
done <"$top/tests/conformance-expected.txt"
if [ ${#missing[@]} -gt 0 ] && [ $# -eq 0 ]; then
	echo "conformance: checks expected to pass did not: ${missing[*]}"
	echo "--- controller log (tail) ---"
	tail -n 40 "$tmp/controller.log"
	exit 1
fi
exit 0
