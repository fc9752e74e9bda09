#!/usr/bin/env bash
# Whole-process latency of srun inside an allocation (issue: steps and interactive work).
#
#   scripts/bench-srun.sh [path/to/sluice] [runs]   (default: target/release/sluice, 200)
#
# A private controller (system mode, temp dir, one node declared with 8 CPUs) serves
# the run. A job holding 8 CPUs (`sbatch -n8 --wrap 'sleep 3600'`) is the allocation;
# with SLURM_JOB_ID set to it, hyperfine times `srun -n1 true` and `srun -n8 true`
# (each a step: create, launch one stepd, run the tasks, stream their end back).
# Prints the median of each. Nothing outside the temp dir is touched.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$top/target/release/sluice}
runs=${2:-200}
if [ ! -x "$bin" ]; then (cd "$top" && cargo build --release --locked); fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
if ! command -v hyperfine >/dev/null; then
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq hyperfine >/dev/null; else echo "install hyperfine first"; exit 1; fi
fi
. "$top/scripts/private-controller.sh"
start_private_controller "$bin" "" "cpus = 8"
job=$(sbatch --parsable -n8 -o /dev/null --wrap 'sleep 3600')
for _ in $(seq 100); do [ "$(squeue -h -j "$job" -o %T)" = RUNNING ] && break; sleep 0.1; done
export SLURM_JOB_ID=$job
median() {
	python3 - "$1" <<'PY'
import json, sys, statistics
r = json.load(open(sys.argv[1]))["results"][0]
t = sorted(r["times"])
print(f"median {statistics.median(t)*1000:.2f} ms (min {t[0]*1000:.2f}, p90 {t[int(len(t)*0.9)]*1000:.2f}, n={len(t)})")
PY
}
for n in 1 8; do
	echo "== srun -n$n true inside job $job, $runs runs"
	hyperfine -N --warmup 10 --runs "$runs" --export-json "$tmp/h$n.json" "$tmp/bin/srun -n$n true" >/dev/null
	median "$tmp/h$n.json"
done
