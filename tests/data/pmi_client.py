#!/usr/bin/env python3
"""A PMI client for sluice's tests (tests/it/mpi.rs), standard library only.

Usage: pmi_client.py 1|2 -- speaks the PMI-1 wire protocol (lines) or PMI-2's
(length-prefixed, after a PMI-1 `init` asking for version 2) on PMI_FD. Each task puts
k-<rank>=from-<rank>, fences, reads every other task's key and the process mapping,
and prints one line:
    rank R of N jobid ok: got 0:from-0 ... map (vector,...)
"""
import os
import socket
import sys

wire = sys.argv[1]
sock = socket.socket(fileno=int(os.environ["PMI_FD"]))
rank = int(os.environ["PMI_RANK"])
size = int(os.environ["PMI_SIZE"])
buf = b""


def v1(line):
    """Sends a PMI-1 request and returns the reply's attributes."""
    global buf
    sock.sendall((line + "\n").encode())
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("PMI server closed the connection")
        buf += chunk
    reply, buf = buf.split(b"\n", 1)
    return dict(t.split("=", 1) for t in reply.decode().split(" ") if "=" in t)


def v2(cmd, **attrs):
    """Sends a PMI-2 request and returns the reply's attributes."""
    global buf
    body = "cmd=%s;" % cmd + "".join("%s=%s;" % (k.replace("_", "-"), v) for k, v in attrs.items())
    sock.sendall(("%6d" % len(body) + body).encode())
    while len(buf) < 6 or len(buf) < 6 + int(buf[:6]):
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit("PMI server closed the connection")
        buf += chunk
    n = int(buf[:6])
    reply, buf = buf[6 : 6 + n].decode(), buf[6 + n :]
    return dict(p.split("=", 1) for p in reply.split(";") if "=" in p)


got = []
if wire == "1":
    r = v1("cmd=init pmi_version=1 pmi_subversion=1")
    assert r["cmd"] == "response_to_init" and r["rc"] == "0", r
    assert int(v1("cmd=get_maxes")["vallen_max"]) >= 256
    kvs = v1("cmd=get_my_kvsname")["kvsname"]
    assert v1("cmd=get_universe_size")["size"] == str(size)
    v1("cmd=put kvsname=%s key=k-%d value=from-%d" % (kvs, rank, rank))
    assert v1("cmd=barrier_in")["cmd"] == "barrier_out"
    for o in range(size):
        if o != rank:
            r = v1("cmd=get kvsname=%s key=k-%d" % (kvs, o))
            got.append("%d:%s" % (o, r.get("value", "MISSING")))
    assert v1("cmd=get kvsname=%s key=nothing" % kvs)["rc"] != "0"
    mapping = v1("cmd=get kvsname=%s key=PMI_process_mapping" % kvs)["value"]
    assert v1("cmd=finalize")["cmd"] == "finalize_ack"
else:
    r = v1("cmd=init pmi_version=2 pmi_subversion=0")
    assert r["pmi_version"] == "2", r
    r = v2("fullinit", pmirank=rank)
    assert r["cmd"] == "fullinit-response" and r["rank"] == str(rank), r
    assert r["size"] == str(size), r
    kvs = v2("job-getid")["jobid"]
    v2("kvs-put", key="k-%d" % rank, value="from-%d" % rank)
    # A node attribute is visible to this node's tasks at once.
    v2("info-putnodeattr", key="n-%d" % rank, value="x")
    assert v2("info-getnodeattr", key="n-%d" % rank)["found"] == "TRUE"
    assert v2("kvs-fence")["cmd"] == "kvs-fence-response"
    for o in range(size):
        if o != rank:
            r = v2("kvs-get", jobid=kvs, key="k-%d" % o)
            got.append("%d:%s" % (o, r.get("value", "MISSING")))
    assert v2("kvs-get", jobid=kvs, key="nothing")["found"] == "FALSE"
    mapping = v2("info-getjobattr", key="PMI_process_mapping")["value"]
    assert v2("finalize")["cmd"] == "finalize-response"
ok = "ok" if kvs == os.environ["PMI_JOBID"] else "MISMATCH " + kvs
print("rank %d of %d jobid %s: got %s map %s" % (rank, size, ok, " ".join(got), mapping), flush=True)
