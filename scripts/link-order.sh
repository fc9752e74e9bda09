#!/usr/bin/env bash
# Regenerates link/front-end.order: the functions the everyday front-end calls and a
# job's stepd run (the most frequent calls' first), which build.rs hands to the linker
# (lld's --symbol-ordering-file) so that they sit together at the start of the code.
#
#   scripts/link-order.sh          (builds target/release/sluice first)
#
# A fresh `sbatch`, `squeue` or stepd touches a few hundred functions spread over 14 MB
# of code; each 64 KiB window it touches costs a page fault that maps 16 pages, and the
# exit unmaps them all. Packed together, the same calls take about a quarter fewer
# faults. Run this after changes to the front-ends, the protocol or the dependencies
# (names the file lists that no longer exist are skipped by the linker, so a stale
# file costs speed, never correctness). Needs valgrind (callgrind).
#
# A private controller (system mode, temp dir) serves the calls; nothing outside the
# temp dir is touched, and the controller is stopped by pid.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "install valgrind first"; exit 1; }
(cd "$top" && cargo build --release --locked --quiet)
bin=$top/target/release/sluice
. "$top/scripts/private-controller.sh"
start_private_controller "$bin"
"$tmp/bin/sbatch" -Q --wrap 'sleep 300' >/dev/null
"$tmp/bin/sbatch" -Q -H --wrap true >/dev/null
# The calls, most frequent first: their functions come first in the file.
i=0
while read -r cmd; do
	i=$((i + 1))
	# shellcheck disable=SC2086
	valgrind --tool=callgrind --demangle=no --callgrind-out-file="$tmp/cg.$i" \
		$tmp/bin/$cmd >/dev/null 2>&1 || true
done <<'CALLS'
sbatch -H --wrap true
sbatch -H -J x -p debug -n 2 -t 10 --mem=1G -o /dev/null --wrap true
squeue
squeue -h -o %i
sinfo
scontrol show job 1
scancel 2
sacct
CALLS
# Then a job's stepd: the spool directory of a launched job, copied once the job is
# gone, run again (a fork of stepd writes its own profile, cg.N.PID).
jid=$("$tmp/bin/sbatch" --parsable -o /dev/null --wrap 'sleep 1')
for _ in $(seq 200); do [ -f "$tmp/spool/job_$jid/launch" ] && break; sleep 0.05; done
mkdir "$tmp/stepd"
cp "$tmp/spool/job_$jid/launch" "$tmp/spool/job_$jid/script" "$tmp/stepd/"
"$tmp/bin/scancel" "$jid"
while [ -n "$("$tmp/bin/squeue" -h -j "$jid" -t R,CG -o %i 2>/dev/null)" ]; do sleep 0.1; done
(cd "$tmp/stepd" && valgrind --tool=callgrind --demangle=no \
	--callgrind-out-file="$tmp/cg.$((i + 1)).%p" "$bin" stepd "$tmp/stepd" >/dev/null 2>&1) || true
python3 - "$bin" "$top/link/front-end.order" "$tmp"/cg.* <<'PY'
import re, sys
binary, out_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
files.sort(key=lambda f: [int(n) for n in f.rsplit("/cg.", 1)[1].split(".")])
order, seen = [], set()
for f in files:
    # callgrind names objects and functions once, then by number: ob=(n) name, fn=(n) name.
    objs, fns, cur, new = {}, {}, None, []
    for line in open(f):
        m = re.match(r"^(ob|cob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            if m.group(3):
                objs[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                cur = objs.get(m.group(2))
            continue
        m = re.match(r"^(fn|cfn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if m:
            if m.group(3):
                fns[m.group(2)] = m.group(3)
            name = fns[m.group(2)]
            # Pseudo-names ("(below main)", bare addresses) are not symbols.
            real = " " not in name and not name.startswith(("(", "0x"))
            if m.group(1) == "fn" and cur == binary and real and name not in seen:
                seen.add(name)
                new.append(name)
    # callgrind's listing order varies from run to run; sorted, the file changes only
    # when the code does.
    order.extend(sorted(new))
with open(out_path, "w") as o:
    o.write("# Written by scripts/link-order.sh: the functions the front-ends run.\n")
    o.write("\n".join(order) + "\n")
print(f"{len(order)} functions -> {out_path}")
PY
