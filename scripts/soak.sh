#!/usr/bin/env bash
# Soak run (issue 25): mixed load on a private controller for a while, with the
# controller's RSS, open file descriptors and the front-ends' latency p50/p99 recorded
# at intervals, so that a leak or a slowdown shows as a trend.
#
#   scripts/soak.sh [SECONDS] [INTERVAL]     (defaults: 3600 and 60)
#
# Load, each in its own loop until the time is up: sbatch of short jobs, squeue /
# sinfo / scontrol show job / sacct queries, submit-then-scancel, srun steps, and a
# controller restart (SIGTERM and kill -9 in turn) every ten intervals. Prints one
# line per interval and writes them to $SOAK_CSV (default ./soak.csv) as CSV:
#
#   secs,rss_mib,fds,pending,running,sbatch_p50_ms,sbatch_p99_ms,squeue_p50_ms,squeue_p99_ms,restarts
#
# Uses the release build ($SOAK_BIN names another binary); nothing outside its temp
# dir is touched, and every process it started is stopped by pid.
set -euo pipefail
duration=${1:-3600}
interval=${2:-60}
csv=${SOAK_CSV:-$PWD/soak.csv}
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SOAK_BIN:-}" ]; then
	(cd "$top" && cargo build --release --quiet)
fi
bin=${SOAK_BIN:-$top/target/release/sluice}
. "$top/scripts/private-controller.sh"
start_private_controller "$bin" "min_job_age = 60" "cpus = 4"
lat=$tmp/lat
mkdir -p "$lat"
end=$(($(date +%s) + duration))
workers=()

# Runs "$@" and appends its wall time in ms to $lat/$name.
timed() {
	local name=$1 t0 t1
	shift
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || true
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000)) >>"$lat/$name"
}

loop() {
	while [ "$(date +%s)" -lt "$end" ]; do "$@"; done
}

submit() { timed sbatch sbatch -o /dev/null --wrap "sleep 0.$((RANDOM % 5))"; sleep 0.05; }
query() {
	timed squeue squeue
	timed sinfo sinfo
	timed scontrol scontrol show job
	timed sacct sacct -X -S now-5minutes
	sleep 0.2
}
cancel() {
	local id
	id=$(sbatch --parsable -o /dev/null --wrap 'sleep 30' 2>/dev/null) || { sleep 1; return; }
	sleep 0.5
	timed scancel scancel "$id"
}
step() { timed srun srun -n1 -t 1 true; sleep 1; }

for w in submit query cancel step; do
	loop "$w" &
	workers+=($!)
done
stop_workers() {
	for p in "${workers[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	stop_private_controller
}
trap stop_workers EXIT

# p50 and p99 of the numbers in file $1 (then emptied), "-" when there are none.
pct() {
	local f=$1
	if [ ! -s "$f" ]; then
		echo "- -"
		return
	fi
	sort -n "$f" | awk '{a[NR]=$1} END {i50=int(NR*0.5); if (i50<1) i50=1; i99=int(NR*0.99); if (i99<1) i99=1; print a[i50], a[i99]}'
	: >"$f"
}

echo "secs,rss_mib,fds,pending,running,sbatch_p50_ms,sbatch_p99_ms,squeue_p50_ms,squeue_p99_ms,restarts" | tee "$csv"
start=$(date +%s)
restarts=0
n=0
while [ "$(date +%s)" -lt "$end" ]; do
	sleep "$interval"
	n=$((n + 1))
	rss=$(awk '/^VmRSS/ {printf "%.1f", $2/1024}' "/proc/$ctld/status" 2>/dev/null || echo -)
	fds=$(ls "/proc/$ctld/fd" 2>/dev/null | wc -l)
	pending=$(squeue -h -t PD -o %i 2>/dev/null | wc -l)
	running=$(squeue -h -t R -o %i 2>/dev/null | wc -l)
	read -r sb50 sb99 <<<"$(pct "$lat/sbatch")"
	read -r sq50 sq99 <<<"$(pct "$lat/squeue")"
	echo "$(($(date +%s) - start)),$rss,$fds,$pending,$running,$sb50,$sb99,$sq50,$sq99,$restarts" | tee -a "$csv"
	if [ $((n % 10)) -eq 0 ]; then
		# A restart, as an upgrade or a crash would: SIGTERM and kill -9 in turn.
		if [ $((restarts % 2)) -eq 0 ]; then kill "$ctld"; else kill -9 "$ctld"; fi
		wait "$ctld" 2>/dev/null || true
		"$bin" controller --foreground >>"$tmp/controller.log" 2>&1 &
		ctld=$!
		restarts=$((restarts + 1))
		for _ in $(seq 100); do sinfo -h >/dev/null 2>&1 && break; sleep 0.1; done
	fi
done
