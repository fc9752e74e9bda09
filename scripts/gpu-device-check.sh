#!/usr/bin/env bash
# GPU check on a machine with a real NVIDIA GPU (issue 8). Starts a private controller
# whose node declares no GRES, so the agent's NVML discovery supplies the GPUs, and
# checks, printing one PASS/FAIL/SKIP line per check and what it saw:
#
#   discovery      sinfo %G / scontrol show node list the GPUs nvidia-smi -L lists
#                  (MIG instances as gpu:<type>_<profile> when MIG is on)
#   doctor         `sluice doctor --gpus` prints a matrix with one row per GPU
#                  (shown next to `nvidia-smi topo -m` for comparison)
#   job-env        a --gres=gpu:1 job gets CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS
#   job-devices    inside it nvidia-smi sees exactly one GPU (the devices cgroup agrees
#                  with CUDA_VISIBLE_DEVICES), and another GPU's /dev file is refused
#                  (only with 2+ GPUs and cgroup v1 devices)
#   step-env       an srun step inside the job gets its GPU and the NCCL variables
#   usage          sacct shows gres/gpumem and gres/gpuutil for the job's batch step
#                  and its step (a torch matmul loop loads the GPU when torch exists)
#   enforce-binding  a --gres-flags=enforce-binding job's CPUs (scontrol -d CPU_IDs)
#                  are among its GPU's local CPUs (sysfs local_cpulist of its PCI bus)
#   gpus-per-socket  --gpus-per-socket=1 --sockets-per-node=1 gets one GPU
#   ntasks-per-gpu   --gres=gpu:1 --ntasks-per-gpu=2 runs 2 tasks, both on that GPU
#
# Time: under two minutes once sluice is built. Build first where possible
# (`cargo build --release`, several minutes from cold); the script uses, in order,
# $SLUICE_BIN, target/release/sluice, target/debug/sluice, else builds --release.
# Run it as root for the devices cgroup check (cgroup v1 devices, or v2 with eBPF).
# Exit status: 0 when no check failed, 1 otherwise.
#
# usage: scripts/gpu-device-check.sh        (from anywhere in the repository)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

failed=0
pass() { echo "PASS  $1: $2"; }
fail() { echo "FAIL  $1: $2"; failed=1; }
skip() { echo "SKIP  $1: $2"; }
section() { echo; echo "== $* =="; }

if [ -z "${SLUICE_BIN:-}" ]; then
	if [ -x target/release/sluice ]; then
		SLUICE_BIN=$top/target/release/sluice
	elif [ -x target/debug/sluice ]; then
		SLUICE_BIN=$top/target/debug/sluice
	else
		section "building (cargo build --release)"
		cargo build --release --quiet || { fail build "cargo build failed"; exit 1; }
		SLUICE_BIN=$top/target/release/sluice
	fi
fi
echo "sluice: $SLUICE_BIN"

section "host: nvidia-smi -L"
if ! host_list=$(nvidia-smi -L 2>&1); then
	echo "$host_list"
	fail host "nvidia-smi -L failed: no usable NVIDIA GPU here"
	exit 1
fi
echo "$host_list"
host_gpus=$(grep -c '^GPU ' <<<"$host_list")
host_migs=$(grep -c '^ *MIG ' <<<"$host_list")
echo "($host_gpus GPU(s), $host_migs MIG instance(s))"

tmp=$(mktemp -d /tmp/sluice-gpucheck.XXXXXX)
chmod 755 "$tmp"
node=$(hostname -s 2>/dev/null || hostname)
node=${node%%.*}
cat >"$tmp/sluice.toml" <<TOML
cluster_name = "gpucheck"
state_dir = "$tmp/state"
spool_dir = "$tmp/spool"
socket = "$tmp/run/ctld.sock"
kill_wait = 2
[[nodes]]
name = "$node"
[[partitions]]
name = "gpu"
nodes = "$node"
default = true
max_time = "0:10:00"
[cgroup]
root = "sluice-gpucheck-$(basename "$tmp" | tr -dc 'A-Za-z0-9')"
ConstrainDevices = true
TOML
mkdir -p "$tmp/bin"
for c in sbatch srun squeue sinfo scontrol sacct sstat sluice; do
	ln -s "$SLUICE_BIN" "$tmp/bin/$c"
done
export SLUICE_CONF=$tmp/sluice.toml PATH=$tmp/bin:$PATH
unset SLUICE_GPU_PROBE_FILE
"$SLUICE_BIN" controller --foreground >"$tmp/controller.log" 2>&1 &
ctld=$!
trap 'kill $ctld 2>/dev/null; wait $ctld 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do sinfo -h >/dev/null 2>&1 && break; sleep 0.1; done
# The agent registers (with its discovered GPUs) shortly after the controller answers.
for _ in $(seq 75); do [ "$(sinfo -h -o %G)" != "(null)" ] && break; sleep 0.2; done

section "discovery: sinfo %G, scontrol show node"
gres=$(sinfo -h -o %G)
sinfo -h -o '%N %G'
scontrol show node "$node" | grep -E 'Gres=|CfgTRES='
grep -i 'GPU discovery' "$tmp/controller.log"
ngres=$(tr ',' '\n' <<<"$gres" | awk -F: '$1=="gpu"{n+=$NF} END{print n+0}')
want=$host_gpus
[ "$host_migs" -gt 0 ] && want=$host_migs
if [ "$gres" = "(null)" ]; then
	fail discovery "no GPU discovered (see the log lines above)"
elif [ "$ngres" = "$want" ]; then
	pass discovery "$gres ($ngres device(s), nvidia-smi: $want)"
else
	fail discovery "$gres has $ngres device(s), nvidia-smi lists $want"
fi

section "doctor --gpus (then nvidia-smi topo -m)"
doctor=$(sluice doctor --gpus 2>&1)
echo "$doctor"
echo "--"
nvidia-smi topo -m 2>&1 || true
rows=$(grep -c '^GPU[0-9]' <<<"$doctor")
if [ "$rows" = "$host_gpus" ] && grep -q '^Legend:' <<<"$doctor"; then
	pass doctor "$rows GPU row(s) and the legend"
else
	fail doctor "$rows GPU row(s) for $host_gpus GPU(s)"
fi

section "a job with --gres=gpu:1 and a step in it"
cd "$tmp" || exit 1
cat >"$tmp/load.py" <<'PY'
import time, torch
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + 8
while time.time() < end:
    y = x @ x
torch.cuda.synchronize()
print("load: ran matmuls on", torch.cuda.get_device_name(0))
PY
other=""
if [ "$host_gpus" -ge 2 ] && [ "$host_migs" = 0 ]; then
	# The job gets one GPU; some other GPU's file must be refused inside it.
	other=$(ls /dev/nvidia[0-9]* | tail -1)
fi
cat >"$tmp/job.sh" <<SH
#!/bin/bash
echo "job CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=\$SLURM_JOB_GPUS"
echo "job-smi \$(nvidia-smi -L 2>&1 | grep -c '^GPU ')"
nvidia-smi -L 2>&1 | sed 's/^/  /'
if [ -n "$other" ]; then
	for f in /dev/nvidia[0-9]*; do
		(exec 3<"\$f") 2>/dev/null && r=open || r=refused
		echo "job-dev \$f \$r"
	done
fi
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	python3 $tmp/load.py
else
	echo "load: no torch with CUDA here; the GPU stays idle (usage reads near 0)"
	sleep 6
fi
srun --gpus=1 bash -c 'echo "step CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS=\$SLURM_STEP_GPUS MASTER_ADDR=\$MASTER_ADDR MASTER_PORT=\$MASTER_PORT NCCL_SOCKET_IFNAME=\${NCCL_SOCKET_IFNAME:-} NCCL_IB_HCA=\${NCCL_IB_HCA:-}"; sleep 4'
SH
chmod 755 "$tmp/job.sh"
jobid=$(timeout 20 sbatch --parsable -o "$tmp/job.out" --gres=gpu:1 "$tmp/job.sh")
if [ -z "$jobid" ]; then
	fail job-env "sbatch refused the job"
else
	for _ in $(seq 120); do
		st=$(squeue -h -j "$jobid" -o %T 2>/dev/null)
		[ -z "$st" ] && break
		sleep 0.5
	done
	cat "$tmp/job.out"
	state=$(sacct -n -X -j "$jobid" -o State%20 | tr -d ' ')
	echo "job $jobid: $state"
	cvd=$(sed -n 's/^job CUDA_VISIBLE_DEVICES=\([^ ]*\) .*/\1/p' "$tmp/job.out")
	if [ -n "$cvd" ]; then
		pass job-env "CUDA_VISIBLE_DEVICES=$cvd"
	else
		fail job-env "no CUDA_VISIBLE_DEVICES in the job"
	fi
	seen=$(sed -n 's/^job-smi //p' "$tmp/job.out")
	if [ "$seen" = 1 ]; then
		pass job-devices "nvidia-smi inside the job sees 1 GPU"
	else
		fail job-devices "nvidia-smi inside the job sees '$seen' GPU(s), not 1 (devices cgroup?)"
	fi
	if [ -n "$other" ]; then
		refused=$(grep -c '^job-dev .* refused$' "$tmp/job.out")
		opened=$(grep -c '^job-dev .* open$' "$tmp/job.out")
		if [ "$opened" = 1 ] && [ "$refused" -ge 1 ]; then
			pass job-devices "1 GPU file opens, $refused refused"
		else
			fail job-devices "$opened GPU file(s) open, $refused refused"
		fi
	else
		skip job-devices "one GPU (or MIG): no other GPU file to refuse"
	fi
	step=$(grep '^step ' "$tmp/job.out")
	if grep -q 'CUDA_VISIBLE_DEVICES=[^ ]' <<<"$step" && grep -q 'MASTER_PORT=[0-9]' <<<"$step"; then
		pass step-env "$step"
	else
		fail step-env "step line: '${step:-none}'"
	fi

	section "usage: sacct TRESUsageInMax / TRESUsageInAve"
	sacct -j "$jobid" -P -o JobID,TRESUsageInMax,TRESUsageInAve
	for s in batch 0; do
		row=$(sacct -n -P -j "$jobid.$s" -o TRESUsageInMax)
		if grep -q 'gres/gpumem=[^,]*,gres/gpuutil=[0-9]' <<<"$row"; then
			pass usage "$jobid.$s $(grep -o 'gres/gpumem=[^,]*,gres/gpuutil=[0-9]*' <<<"$row")"
		elif [ "$host_migs" -gt 0 ]; then
			skip usage "$jobid.$s: NVML has no utilization counter for MIG instances"
		else
			fail usage "$jobid.$s has no GPU TRES: '$row'"
		fi
	done
fi

# Waits for job $1 to leave the queue.
wait_gone() {
	for _ in $(seq 120); do
		[ -z "$(squeue -h -j "$1" -o %T 2>/dev/null)" ] && return 0
		sleep 0.5
	done
	return 1
}

# The CPU ids of a list such as 0-3,8,10-11, one per line.
expand_ids() {
	tr ',' '\n' <<<"$1" | while IFS=- read -r a b; do
		[ -n "$a" ] && seq "$a" "${b:-$a}"
	done
}

section "enforce-binding: the job's CPUs are its GPU's local CPUs"
eb=$(timeout 20 sbatch --parsable -o "$tmp/eb.out" -c1 --gres=gpu:1 --gres-flags=enforce-binding \
	--wrap 'echo "eb SLURM_JOB_GPUS=$SLURM_JOB_GPUS"; sleep 5')
if [ -z "$eb" ]; then
	fail enforce-binding "sbatch refused the job"
else
	for _ in $(seq 60); do
		[ "$(squeue -h -j "$eb" -o %T 2>/dev/null)" = RUNNING ] && break
		sleep 0.5
	done
	detail=$(scontrol show job -d "$eb" | grep 'CPU_IDs=')
	echo "$detail"
	ids=$(sed -n 's/.*CPU_IDs=\([^ ]*\).*/\1/p' <<<"$detail")
	idx=$(sed -n 's/.*IDX:\([0-9]*\).*/\1/p' <<<"$detail")
	wait_gone "$eb"
	cat "$tmp/eb.out"
	bus=$(nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader 2>/dev/null |
		awk -F', ' -v i="$idx" '$1==i{print tolower($2)}')
	# NVML's 8-digit domain; sysfs has 4.
	sysbus=$(sed 's/^0000\(....:\)/\1/' <<<"$bus")
	local_cpus=$(cat "/sys/bus/pci/devices/$sysbus/local_cpulist" 2>/dev/null)
	echo "GPU $idx bus $bus local_cpulist ${local_cpus:-?}"
	if [ -z "$ids" ] || [ -z "$local_cpus" ]; then
		fail enforce-binding "job CPUs '${ids}', GPU local CPUs '${local_cpus}'"
	elif comm -23 <(expand_ids "$ids" | sort) <(expand_ids "$local_cpus" | sort) | grep -q .; then
		fail enforce-binding "CPUs $ids are not all among $local_cpus"
	else
		pass enforce-binding "CPUs $ids within GPU $idx's $local_cpus"
	fi
fi

section "gpus-per-socket and ntasks-per-gpu"
ps=$(timeout 20 sbatch --parsable -o "$tmp/ps.out" --gpus-per-socket=1 --sockets-per-node=1 \
	--wrap 'echo "ps SLURM_JOB_GPUS=$SLURM_JOB_GPUS SLURM_GPUS_PER_SOCKET=$SLURM_GPUS_PER_SOCKET"')
[ -n "$ps" ] && wait_gone "$ps"
cat "$tmp/ps.out" 2>/dev/null
if grep -q '^ps SLURM_JOB_GPUS=[0-9][0-9]* SLURM_GPUS_PER_SOCKET=1$' "$tmp/ps.out" 2>/dev/null; then
	pass gpus-per-socket "$(cat "$tmp/ps.out")"
else
	fail gpus-per-socket "job ${ps:-refused}: $(cat "$tmp/ps.out" 2>/dev/null)"
fi
np=$(timeout 20 sbatch --parsable -o "$tmp/np.out" --gres=gpu:1 --ntasks-per-gpu=2 \
	--wrap 'echo "np SLURM_NTASKS=$SLURM_NTASKS"; srun -l bash -c "echo dev=\$CUDA_VISIBLE_DEVICES" | sort')
[ -n "$np" ] && wait_gone "$np"
cat "$tmp/np.out" 2>/dev/null
devs=$(grep -c ': dev=[0-9]' "$tmp/np.out" 2>/dev/null)
distinct=$(sed -n 's/.*: dev=//p' "$tmp/np.out" 2>/dev/null | sort -u | wc -l)
if grep -q '^np SLURM_NTASKS=2$' "$tmp/np.out" 2>/dev/null && [ "$devs" = 2 ] && [ "$distinct" = 1 ]; then
	pass ntasks-per-gpu "2 tasks on one GPU"
else
	fail ntasks-per-gpu "job ${np:-refused}: $devs task line(s), $distinct distinct GPU(s)"
fi

echo
if [ "$failed" = 0 ]; then echo "== result: PASS =="; else echo "== result: FAIL =="; fi
exit $failed
