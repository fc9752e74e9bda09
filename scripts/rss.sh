#!/usr/bin/env bash
# Controller memory with a full queue (issue: scheduling core; target <= 300 MiB RSS
# with 100,000 pending jobs).
#
#   scripts/rss.sh [N]      (default 100000)
#
# A private controller (temp dir, one node of 1 CPU that one long job keeps busy, so
# every other job stays PENDING with reason Resources) receives N submissions made as
# sbatch makes them (this shell's environment exported); the script then prints the
# controller's VmRSS/VmHWM after a scheduling pass over the full queue. Nothing
# outside the temp dir is touched; the controller is stopped by pid.
set -euo pipefail
n=${1:-100000}
top=$(cd "$(dirname "$0")/.." && pwd)
(cd "$top" && cargo build --release --quiet && cargo bench --no-run --quiet --bench queue_rss 2>/dev/null)
bin=$top/target/release/sluice
fill=$(ls -t "$top"/target/release/deps/queue_rss-* | grep -v '\.d$' | head -1)
. "$top/scripts/private-controller.sh"
start_private_controller "$bin" "" "cpus = 1"
"$bin" sbatch -Q -o /dev/null --wrap 'sleep 3600'
rss() { awk '/^(VmRSS|VmHWM)/ {printf "%s %.1f MiB  ", $1, $2/1024}' /proc/$ctld/status; echo; }
echo "idle controller:          $(rss)"
"$fill" "$n"
sleep 3
"$bin" squeue -h -t PD -o %i | wc -l | xargs echo "pending jobs:"
echo "with $n pending jobs: $(rss)"
"$bin" sdiag | grep -E 'Last cycle:|Mean cycle:|Last queue length' | head -4
