#!/usr/bin/env bash
# Whole-process array benchmarks of sluice on this machine (issue: job structure).
#
#   scripts/bench-arrays.sh [path/to/sluice] [runs]   (default: target/release/sluice, 11)
#
# 1. `sbatch --array=0-99999` (held, so the node stays idle): wall time of the submission
#    (median over `runs`, each array cancelled afterwards) and the controller's RSS
#    before and after;
# 2. a 10,000-task array of `true` on one node: time from submission until no task is
#    left in the queue (polling `squeue -t PD,R,CG` every 50 ms).
# A private controller (system mode, temp dir, one node with the detected CPUs,
# MaxArraySize 100001) serves the run; nothing outside the temp dir is touched.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$top/target/release/sluice}
runs=${2:-11}
if [ ! -x "$bin" ]; then (cd "$top" && cargo build --release --locked); fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
. "$top/scripts/private-controller.sh"
start_private_controller "$bin" "max_array_size = 100001"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$ctld/status"; }
drain() { while [ -n "$(squeue -h -t PD,R,CG -o %i | head -n1)" ]; do sleep 0.05; done; }

echo "== 1. sbatch -H --array=0-99999 --wrap true, $runs runs"
rss0=$(rss)
times=()
for i in $(seq "$runs"); do
	s=$(date +%s.%N)
	id=$(sbatch --parsable -H --array=0-99999 -o /dev/null --wrap true)
	e=$(date +%s.%N)
	times+=("$(python3 -c "print($e-$s)")")
	[ "$i" = 1 ] && rss1=$(rss) && shown=$(squeue -h -j "$id" -o %i)
	scancel "$id"
done
python3 - "$rss0" "$rss1" "$shown" "${times[@]}" <<'PY'
import statistics, sys
rss0, rss1, shown, *t = sys.argv[1:]
t = sorted(float(x) for x in t)
print(f"submit: median {statistics.median(t)*1000:.1f} ms, min {t[0]*1000:.1f} ms, max {t[-1]*1000:.1f} ms")
print(f"controller RSS: {int(rss0)/1024:.1f} MiB before, {int(rss1)/1024:.1f} MiB with the array queued ({shown})")
PY

echo "== 2. 10,000-task array of true on one node ($(sinfo -h -N -o %c) CPUs)"
drain
s=$(date +%s.%N)
id=$(sbatch --parsable --array=0-9999 -o /dev/null --wrap true)
drain
e=$(date +%s.%N)
n=$(sacct -j "$id" -X -n -P -o State | grep -c COMPLETED)
python3 -c "t=$e-$s; print(f'drained in {t:.1f} s ({10000/t:.0f} tasks/s), {$n} COMPLETED; controller RSS now {$(rss)/1024:.1f} MiB')"
