#!/usr/bin/env bash
# Whole-process benchmarks of sluice on this machine (issue: workstation queue).
#
#   scripts/bench.sh [path/to/sluice]     (default: target/release/sluice, built if missing)
#
# 1. median latency of `sbatch --wrap true` over 200 runs (hyperfine, no shell);
# 2. wall time of 1,000 sequential submissions (held jobs, so that running jobs do not
#    compete with the submitting loop; they are cancelled afterwards);
# 3. time for 500 one-CPU `true` jobs to go from the first submission to all COMPLETED.
# A private controller (system mode, temp dir, one node with the detected CPUs) serves
# the run; nothing outside the temp dir is touched.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$top/target/release/sluice}
if [ ! -x "$bin" ]; then (cd "$top" && cargo build --release --locked); fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
if ! command -v hyperfine >/dev/null; then
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq hyperfine >/dev/null; else echo "install hyperfine first"; exit 1; fi
fi
. "$top/scripts/private-controller.sh"
start_private_controller "$bin"

echo "== 1. sbatch --wrap true, 200 runs (held, so the node stays idle)"
hyperfine -N --warmup 10 --runs 200 --export-json "$tmp/h.json" "$tmp/bin/sbatch -H --wrap true" | sed -n '1,4p'
python3 - "$tmp/h.json" <<'PY'
import json, sys, statistics
r = json.load(open(sys.argv[1]))["results"][0]
print(f"median {statistics.median(r['times'])*1000:.2f} ms, mean {r['mean']*1000:.2f} ms, min {r['min']*1000:.2f} ms")
PY
scancel -u "$(id -un)" >/dev/null

echo "== 2. 1,000 sequential submissions"
start=$(date +%s.%N)
for _ in $(seq 1000); do sbatch -H -Q --wrap true; done
end=$(date +%s.%N)
python3 -c "import sys; t=$end-$start; print(f'1000 submissions in {t:.2f} s, {t:.3f} ms per job')"
scancel -u "$(id -un)" >/dev/null
while [ -n "$(squeue -h -t PD,R,CG -o %i)" ]; do sleep 0.1; done

echo "== 3. 500 one-CPU 'true' jobs, first submit to all COMPLETED"
start=$(date +%s.%N)
for _ in $(seq 500); do sbatch -Q -n1 -o /dev/null --wrap true; done
while [ -n "$(squeue -h -t PD,R,CG -o %i)" ]; do sleep 0.02; done
end=$(date +%s.%N)
done_n=$(squeue -h -t CD -o %i | wc -l)
python3 -c "t=$end-$start; print(f'500 jobs: all done in {t:.2f} s ({$done_n} COMPLETED)')"
