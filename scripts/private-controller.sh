# Sourced by the benchmark scripts: a private sluice controller in a temp dir.
#
#   start_private_controller BIN [CLUSTER_TOML] [NODE_TOML]
#
# Writes $tmp/sluice.toml (system mode: state, spool and socket in $tmp; one node named
# after this host, one default partition "debug"; CLUSTER_TOML and NODE_TOML are extra
# lines for the top level and for the node), links the Slurm commands in $tmp/bin to
# BIN, exports SLUICE_CONF and PATH, changes to $tmp/work, starts the controller in the
# foreground as pid $ctld, and waits until it answers. On exit the controller is
# stopped by pid, the processes of jobs still running are killed by their recorded
# process group, and $tmp is removed. Nothing outside $tmp is touched.
start_private_controller() {
	local bin=$1 cluster_extra=${2:-} node_extra=${3:-} node
	tmp=$(mktemp -d /tmp/sluice-bench.XXXXXX)
	node=$(hostname -s 2>/dev/null || hostname)
	node=${node%%.*}
	cat >"$tmp/sluice.toml" <<TOML
cluster_name = "bench"
state_dir = "$tmp/state"
spool_dir = "$tmp/spool"
socket = "$tmp/ctld.sock"
$cluster_extra
[[nodes]]
name = "$node"
$node_extra
[[partitions]]
name = "debug"
nodes = "$node"
default = true
TOML
	mkdir -p "$tmp/bin" "$tmp/work"
	for c in sbatch srun squeue scancel sinfo sacct scontrol sdiag; do ln -s "$bin" "$tmp/bin/$c"; done
	export SLUICE_CONF=$tmp/sluice.toml PATH=$tmp/bin:$PATH
	cd "$tmp/work"
	"$bin" controller --foreground >"$tmp/controller.log" 2>&1 &
	ctld=$!
	trap stop_private_controller EXIT
	for _ in $(seq 100); do sinfo -h >/dev/null 2>&1 && break; sleep 0.1; done
}

stop_private_controller() {
	kill "$ctld" 2>/dev/null
	wait "$ctld" 2>/dev/null
	for f in "$tmp"/spool/job_*/job.pid; do [ -f "$f" ] && kill -9 -- "-$(cat "$f")" 2>/dev/null; done
	rm -rf "$tmp"
}
