#!/usr/bin/env python3
"""Start-to-ready time of `redlockd harness` (1 node and 5 nodes) beside redis-server's.

    python3 benches/harness_start.py [REDLOCKD] [--runs 20]

REDLOCKD defaults to target/release/redlockd. For redlockd, "ready" is the moment its
ready line arrives on stdout (every node accepts by then; checked with a PING per
node, not counted); for redis-server (from PATH, skipped if absent), the first PONG on
its port, polled every 0.2 ms, which is how a fixture without a ready line waits. Each
run spawns a fresh process and stops it (redlockd: stdin closed; redis-server:
SIGTERM). Prints min / median / max in ms. Goals: < 30 ms for one node, < 100 ms for
five.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def harness_once(binary: str, nodes: int) -> float:
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "harness", "--nodes", str(nodes)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = p.stdout.readline()
    elapsed = time.perf_counter() - t0
    ready = json.loads(line)
    assert ready["ready"] and len(ready["nodes"]) == nodes, line
    for n in ready["nodes"]:
        assert ping(n["port"]), f"node {n['index']} does not answer PING"
    p.stdin.close()
    p.wait(timeout=10)
    p.stdout.close()
    return elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_once(redis_server: str, workdir: str) -> float:
    port = free_port()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--daemonize", "no", "--loglevel", "warning"],
        stdout=subprocess.DEVNULL,
    )
    deadline = t0 + 10
    while not ping(port):
        if time.perf_counter() > deadline or p.poll() is not None:
            p.kill()
            raise RuntimeError("redis-server did not answer within 10 s")
        time.sleep(0.0002)
    elapsed = time.perf_counter() - t0
    p.terminate()
    p.wait(timeout=10)
    return elapsed


def show(name: str, times: list[float], goal_ms: float | None = None) -> None:
    ms = sorted(t * 1000 for t in times)
    line = f"{name:<28} min {ms[0]:6.1f} ms  median {statistics.median(ms):6.1f} ms  max {ms[-1]:6.1f} ms  ({len(ms)} runs)"
    if goal_ms is not None:
        line += f"  goal < {goal_ms:.0f} ms: {'met' if statistics.median(ms) < goal_ms else 'MISSED'} (median)"
    print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default=str(Path(__file__).resolve().parent.parent / "target/release/redlockd"))
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        print(f"{a.binary} is not executable (cargo build --release first)", file=sys.stderr)
        return 1
    print(f"redlockd: {a.binary}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    harness_once(a.binary, 1)  # warm the page cache
    show("redlockd harness, 1 node", [harness_once(a.binary, 1) for _ in range(a.runs)], 30)
    show("redlockd harness, 5 nodes", [harness_once(a.binary, 5) for _ in range(a.runs)], 100)
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        print("redis-server: skipped: not on PATH")
        return 0
    with tempfile.TemporaryDirectory() as d:
        redis_once(redis_server, d)
        show("redis-server, to first PONG", [redis_once(redis_server, d) for _ in range(a.runs)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
