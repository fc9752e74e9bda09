#!/usr/bin/env bash
# GPU check on a machine with a real NVIDIA GPU (issue 8): builds sluice (or uses
# $SLUICE_BIN), starts a private controller whose node declares no GRES, so the agent's
# NVML discovery supplies the GPUs, then prints what was discovered and what a GPU job
# and a GPU step see (CUDA_VISIBLE_DEVICES, nvidia-smi -L). Meant to finish in under
# three minutes on a warm build; exits non-zero when a stage fails.
#
# usage: scripts/gpu-device-check.sh        (from the repository root)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
if [ -z "${SLUICE_BIN:-}" ]; then
	echo "== building (cargo build) =="
	cargo build --quiet || exit 1
	SLUICE_BIN=$top/target/debug/sluice
fi
echo "== nvidia-smi -L on the host =="
nvidia-smi -L || echo "(nvidia-smi not available)"
tmp=$(mktemp -d /tmp/sluice-gpucheck.XXXXXX)
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
for c in sbatch srun squeue sinfo scontrol sluice; do ln -s "$SLUICE_BIN" "$tmp/bin/$c"; done
export SLUICE_CONF=$tmp/sluice.toml PATH=$tmp/bin:$PATH
"$SLUICE_BIN" controller --foreground >"$tmp/controller.log" 2>&1 &
ctld=$!
trap 'kill $ctld 2>/dev/null; wait $ctld 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do sinfo -h >/dev/null 2>&1 && break; sleep 0.1; done
# The agent registers shortly after the controller answers.
for _ in $(seq 50); do [ "$(sinfo -h -o %G)" != "(null)" ] && break; sleep 0.2; done
rc=0
echo "== discovery: sinfo %G, scontrol show node =="
sinfo -h -o '%N %G'
scontrol show node "$node" | grep -E 'Gres=|CfgTRES=' || rc=1
grep -i 'GPU discovery' "$tmp/controller.log"
[ "$(sinfo -h -o %G)" = "(null)" ] && { echo "FAIL: no GPU discovered"; rc=1; }
cd "$tmp" || exit 1
echo "== batch job --gres=gpu:1 =="
timeout 120 sbatch --wait -o "$tmp/job.out" --gres=gpu:1 --wrap '
	echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=$SLURM_JOB_GPUS"
	nvidia-smi -L
	echo "-- step srun --gpus=1:"
	srun --gpus=1 sh -c "echo step CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS=\$SLURM_STEP_GPUS MASTER_ADDR=\$MASTER_ADDR MASTER_PORT=\$MASTER_PORT NCCL_SOCKET_IFNAME=\${NCCL_SOCKET_IFNAME:-} NCCL_IB_HCA=\${NCCL_IB_HCA:-}; nvidia-smi -L"
' || rc=1
cat "$tmp/job.out"
grep -q '^GPU ' "$tmp/job.out" || { echo "FAIL: nvidia-smi saw no GPU inside the job"; rc=1; }
echo "== result: $([ $rc = 0 ] && echo PASS || echo FAIL) =="
exit $rc
