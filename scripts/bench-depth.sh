#!/usr/bin/env bash
# Queue-depth benchmark (issue 20): sluice beside a real Slurm 22.05, same node, same run.
#
#   scripts/bench-depth.sh [N] [BIG]     (defaults 10000 and 100000; BIG=0 skips the deep part)
#
# Both clusters get one node advertising 32 CPUs, 16000 MB and gpu:4. Slurm is the one
# ../shared/reference-slurm/setup.sh starts (Debian's 22.05 packages; used only when that
# script is beside the checkout and this runs as root, otherwise sluice runs alone).
# sluice is a private controller in a temp dir (scripts/private-controller.sh).
#
# Figures, each printed for both with the ratio Slurm/sluice:
#   1. `sbatch --wrap true` latency on a quiet controller (held jobs, median of 100);
#   2. first submission to 500 trivial jobs COMPLETED;
#   3. fill: N pending jobs behind one job that holds the node, submitted by 8 parallel
#      sbatch loops; the rate is printed per tenth of N, to show whether it stays flat;
#   4. at N pending: `squeue` (default format), `scontrol show job` (all), `squeue -j ONE`,
#      `scontrol show job ONE` (hyperfine, the two clusters one after the other);
#   5. controller RSS at N pending (VmRSS/VmHWM), and per pending job over the idle figure;
#   6. sluice alone: filled on to BIG, the same single-job lookups and the RSS again.
# SLUICE_BIN=path uses that binary instead of building a release one (for a quick check of
# the script itself); NO_SLURM=1 leaves the reference Slurm out.
# Load average is printed at each stage: the machine is shared, read figures with it.
set -euo pipefail
[ -n "${BENCH_TRACE:-}" ] && set -x
n=${1:-10000}
big=${2:-100000}
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${SLUICE_BIN:-}
if [ -z "$bin" ]; then
	(cd "$top" && cargo build --release --locked --quiet)
	bin=$top/target/release/sluice
fi
for t in hyperfine python3; do
	command -v "$t" >/dev/null || { [ "$(id -u)" = 0 ] && apt-get install -y -qq "$t" >/dev/null; } || {
		echo "install $t first"
		exit 1
	}
done
ref=$top/../shared/reference-slurm
slurm=0
if [ -z "${NO_SLURM:-}" ] && [ -x "$ref/setup.sh" ] && [ "$(id -u)" = 0 ]; then
	echo "== starting the reference Slurm ($ref/setup.sh)"
	"$ref/setup.sh" >/dev/null
	slurm=1
	/usr/bin/scancel -u "$(id -un)" 2>/dev/null || true
	slurmctld_pid=$(awk '$1=="slurmctld"{print $2}' /run/slurm-anchor/pids | tail -1)
else
	echo "== no reference Slurm (needs ../shared/reference-slurm and root): sluice alone"
fi
. "$top/scripts/private-controller.sh"
start_private_controller "$bin" "" $'cpus = 32\nmemory = 16000\ngres = "gpu:4"'
S=$tmp/bin # sluice's commands
R=/usr/bin # Slurm's commands
for c in sbatch squeue scontrol scancel; do [ -e "$S/$c" ] || ln -s "$bin" "$S/$c"; done
load() { echo "   load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }
ms() { python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1]))['results']; print(' '.join(f'{statistics.median(x[\"times\"])*1000:.2f}' for x in r))" "$1"; }
# compare NAME CMD... : hyperfine over Slurm's and sluice's form of the same command line.
compare() {
	local name=$1 runs=$2
	shift 2
	local cmds=("$S/$*")
	[ "$slurm" = 1 ] && cmds=("$R/$*" "$S/$*")
	hyperfine -N --style none --warmup 2 --runs "$runs" --export-json "$tmp/h.json" "${cmds[@]}" >/dev/null 2>&1
	read -r -a m <<<"$(ms "$tmp/h.json")"
	if [ "$slurm" = 1 ]; then
		python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'{sys.argv[3]:<34} Slurm {a:9.2f} ms   sluice {b:9.2f} ms   Slurm/sluice {a/b:6.2f}')" "${m[0]}" "${m[1]}" "$name"
	else
		printf '%-34s sluice %9.2f ms\n' "$name" "${m[0]}"
	fi
}
rss_of() { awk '/^(VmRSS|VmHWM)/ {printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$1/status"; }
kib_of() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
drain() { # drain DIR: wait until the cluster's queue is empty
	while [ -n "$("$1/squeue" -h -o %i 2>/dev/null | head -1)" ]; do sleep 0.05; done
}

echo "== 1. sbatch --wrap true, quiet controller (held, median of 100)"
load
compare "sbatch -H --wrap true" 100 sbatch -H -Q -o /dev/null --wrap true
"$S/scancel" -u "$(id -un)"
[ "$slurm" = 1 ] && "$R/scancel" -u "$(id -un)"
drain "$S"
[ "$slurm" = 1 ] && drain "$R"

echo "== 2. 500 trivial jobs, first submission to all COMPLETED"
load
five() {
	local t0 t1
	t0=$(date +%s.%N)
	for _ in $(seq 500); do "$1/sbatch" -Q -n1 -o /dev/null --wrap true; done
	drain "$1"
	t1=$(date +%s.%N)
	python3 -c "print(f'{$t1-$t0:.2f}')"
}
if [ "$slurm" = 1 ]; then
	a=$(five "$R")
	b=$(five "$S")
	python3 -c "print(f'500 jobs to COMPLETED             Slurm {$a:9.2f} s    sluice {$b:9.2f} s    Slurm/sluice {$a/$b:6.2f}')"
else
	echo "500 jobs to COMPLETED              sluice $(five "$S") s"
fi

idle_kib=$(kib_of "$ctld")
echo "== 3. fill: $n pending jobs behind one that holds the node, 8 parallel sbatch loops"
fill() { # fill DIR FROM TO: submit TO-FROM pending jobs, print the rate per tenth
	local d=$1 from=$2 to=$3 step per t0 t1 k
	step=$(((to - from) / 10))
	per=$((step / 8))
	for ((k = 0; k < 10; k++)); do
		t0=$(date +%s.%N)
		local pids=()
		for _ in 1 2 3 4 5 6 7 8; do
			(for _ in $(seq "$per"); do "$d/sbatch" -Q -n1 -o /dev/null --wrap true; done) &
			pids+=($!)
		done
		wait "${pids[@]}"
		t1=$(date +%s.%N)
		python3 -c "print(f'   {$from+($k+1)*$step:>8} jobs: {$step/($t1-$t0):7.0f} submissions/s')"
	done
}
"$S/sbatch" -Q --exclusive -n32 -o /dev/null --wrap 'sleep 100000'
if [ "$slurm" = 1 ]; then
	"$R/sbatch" -Q --exclusive -n32 -o /dev/null --wrap 'sleep 100000'
	echo "-- Slurm"
	fill "$R" 0 "$n"
fi
echo "-- sluice"
fill "$S" 0 "$n"
load

echo "== 4. queries at $n pending"
one_s=$("$S/squeue" -h -t PD -o %i | sed -n "$((n / 2))p")
compare "squeue (default format)" 10 squeue
compare "scontrol show job (all)" 5 scontrol show job
if [ "$slurm" = 1 ]; then
	one_r=$("$R/squeue" -h -t PD -o %i | sed -n "$((n / 2))p")
	# The job ids differ between the clusters: time each on its own job.
	hyperfine -N --style none --runs 30 --export-json "$tmp/h.json" "$R/squeue -j $one_r" "$S/squeue -j $one_s" >/dev/null 2>&1
	read -r -a m <<<"$(ms "$tmp/h.json")"
	python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'squeue -j ONE                      Slurm {a:9.2f} ms   sluice {b:9.2f} ms   Slurm/sluice {a/b:6.2f}')" "${m[@]}"
	hyperfine -N --style none --runs 30 --export-json "$tmp/h.json" "$R/scontrol show job $one_r" "$S/scontrol show job $one_s" >/dev/null 2>&1
	read -r -a m <<<"$(ms "$tmp/h.json")"
	python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'scontrol show job ONE              Slurm {a:9.2f} ms   sluice {b:9.2f} ms   Slurm/sluice {a/b:6.2f}')" "${m[@]}"
else
	compare "squeue -j ONE" 30 squeue -j "$one_s"
	compare "scontrol show job ONE" 30 scontrol show job "$one_s"
fi
load

echo "== 5. controller RSS at $n pending"
[ "$slurm" = 1 ] && echo "   slurmctld: $(rss_of "$slurmctld_pid")"
now_kib=$(kib_of "$ctld")
echo "   sluice:    $(rss_of "$ctld") ($(((now_kib - idle_kib) * 1024 / n)) bytes per pending job over idle)"
if [ "$slurm" = 1 ]; then
	"$R/scancel" -u "$(id -un)"
fi

if [ "$big" -gt "$n" ]; then
	echo "== 6. sluice alone, filled on to $big"
	fill "$S" "$n" "$big"
	load
	compare "squeue -j ONE (at $big)" 30 squeue -j "$one_s"
	compare "scontrol show job ONE (at $big)" 30 scontrol show job "$one_s"
	compare "squeue (default format, at $big)" 3 squeue
	now_kib=$(kib_of "$ctld")
	echo "   sluice:    $(rss_of "$ctld") ($(((now_kib - idle_kib) * 1024 / big)) bytes per pending job over idle)"
fi
