#!/usr/bin/env python3
"""Hand-over under contention with and without the lock-delay: three groups of 5
redlockd nodes in one run, interleaved rounds, compared as ratios to the first.

    benches/lock_delay_handover.py BASE_REDLOCKD [NEW_REDLOCKD]
        (ROUNDS=5 CLIENTS=2,8,32 SECONDS=2; NEW_REDLOCKD: target/release/redlockd)

The groups: `base` (BASE_REDLOCKD, e.g. main before the lock-delay), `off`
(NEW_REDLOCKD, its defaults: no lock-delay) and `5s` (NEW_REDLOCKD --lock-delay 5s).
Each round runs target/release/examples/redlock_contention (ROUNDS=1, FENCING=off) on
the pairs (base, off) and (base, 5s), each cell SECONDS long; the order of the pairs and
of the two groups inside a pair alternates from round to round, so every group sees
the same machine load. A cycle is a hand-over: a client's `try_acquire` (SET NX PX on
5 nodes) won, then its release (EVAL compare-and-delete), while the other clients keep
trying. The lock is always released, never expires: what is measured is the cost of the
lock-delay's check on the hot path, not a delay.

Printed per number of clients and group: cycles/s (median and min-max over rounds),
the median (and min-max) of the per-round ratios to the base cell run beside it, and
the median of the per-round p50 / p99 attempt latencies, the node errors summed over
the rounds (the client's 50 ms per-node timeout on a loaded machine); then the server
CPU time per cycle (user + system of the group's 5 processes over a run, divided by
the cycles of all its cells), less sensitive than cycles/s to which client wins on a
loaded machine. Needs the release example:
cargo build --release --bin redlockd --example redlock_contention.
"""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "redlock_contention")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def cpu_seconds(pids):
    """User + system CPU time the processes used so far (/proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def start_group(binary, extra, workdir, procs):
    """5 nodes; returns ("host:port,...", their pids)."""
    addrs = []
    pids = []
    for _ in range(5):
        port = free_port()
        d = tempfile.mkdtemp(dir=workdir)
        procs.append(subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--restart-delay", "0",
             "--dir", d, "--log", "warn", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        pids.append(procs[-1].pid)
        addrs.append(port)
    for port in addrs:
        deadline = time.monotonic() + 20
        while not ping(port):
            if time.monotonic() > deadline:
                sys.exit(f"node on {port} did not answer PING")
            time.sleep(0.02)
    return ",".join(f"127.0.0.1:{p}" for p in addrs), pids


def run_pair(first, second, clients, seconds):
    """One redlock_contention run (one round) of two groups (each (nodes, pids)):
    ({clients: (first's row, second's row)}, (first's, second's) server CPU seconds), a
    row being (cycles/s, p50 us, p99 us, errors): errors are node requests that failed,
    mostly the client's 50 ms per-node timeout on a loaded machine."""
    env = dict(os.environ, ROUNDS="1", FENCING="off", CLIENTS=clients, SECONDS=str(seconds))
    cpu0 = (cpu_seconds(first[1]), cpu_seconds(second[1]))
    out = subprocess.run([EXAMPLE, first[0], second[0]], env=env, capture_output=True,
                         text=True, check=True, timeout=600).stdout
    cpu = (cpu_seconds(first[1]) - cpu0[0], cpu_seconds(second[1]) - cpu0[1])
    rows = {}
    for line in out.splitlines():
        f = line.split()
        # clients group cycles/s min-max ratio won split p50 p99 p99.9 errors
        if len(f) == 11 and f[0].isdigit() and f[1] in ("redis", "redlockd"):
            rows.setdefault(int(f[0]), {})[f[1]] = (float(f[2]), float(f[7]), float(f[8]), int(f[10]))
    return {n: (r["redis"], r["redlockd"]) for n, r in rows.items()}, cpu


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    base_bin = os.path.abspath(sys.argv[1])
    new_bin = os.path.abspath(sys.argv[2] if len(sys.argv) == 3
                              else os.path.join(ROOT, "target", "release", "redlockd"))
    rounds = int(os.environ.get("ROUNDS", "5"))
    clients = os.environ.get("CLIENTS", "2,8,32")
    seconds = int(os.environ.get("SECONDS", "2"))
    for b in (base_bin, new_bin, EXAMPLE):
        if not os.access(b, os.X_OK):
            sys.exit(f"not executable: {b}")
    procs = []
    with tempfile.TemporaryDirectory() as work:
        try:
            nodes = {  # name -> (addresses, pids)
                "base": start_group(base_bin, [], work, procs),
                "off": start_group(new_bin, [], work, procs),
                "5s": start_group(new_bin, ["--lock-delay", "5s"], work, procs),
            }
            # (clients, group) -> per-round (cycles/s, ratio to base, p50, p99, errors)
            res = {}
            # group -> per-run (server CPU us per cycle, its ratio to base's in that run)
            cpu = {}
            for r in range(rounds):
                pairs = ["off", "5s"] if r % 2 == 0 else ["5s", "off"]
                for i, name in enumerate(pairs):
                    flip = (r + i) % 2 == 1  # which of the two runs first in the pair
                    a, b = (nodes[name], nodes["base"]) if flip else (nodes["base"], nodes[name])
                    rows, (ca, cb) = run_pair(a, b, clients, seconds)
                    cycles = {"a": 0.0, "b": 0.0}
                    for n, (ra, rb) in rows.items():
                        cycles["a"] += ra[0] * seconds
                        cycles["b"] += rb[0] * seconds
                        base_row, row = (rb, ra) if flip else (ra, rb)
                        res.setdefault((n, "base"), []).append((base_row[0], 1.0, *base_row[1:]))
                        res.setdefault((n, name), []).append(
                            (row[0], row[0] / max(base_row[0], 1e-9), *row[1:]))
                    per_a = ca * 1e6 / max(cycles["a"], 1)
                    per_b = cb * 1e6 / max(cycles["b"], 1)
                    base_us, us = (per_b, per_a) if flip else (per_a, per_b)
                    cpu.setdefault("base", []).append((base_us, 1.0))
                    cpu.setdefault(name, []).append((us, us / base_us))
                print(f"round {r + 1} of {rounds} done", file=sys.stderr, flush=True)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
    print(f"{rounds} rounds x 2 pairs, {seconds} s per cell, clients {clients}; "
          f"base={base_bin} new={new_bin}")
    print(f"{'clients':>7} {'group':<8} {'cycles/s':>9} {'min-max':>13} {'ratio':>7} "
          f"{'ratio min-max':>14} {'p50 us':>7} {'p99 us':>7} {'errors':>6}")
    for n in sorted({k[0] for k in res}):
        for name in ("base", "off", "5s"):
            v = res[(n, name)]
            rate = [x[0] for x in v]
            ratio = [x[1] for x in v]
            print(f"{n:>7} {name:<8} {statistics.median(rate):>9.0f} "
                  f"{min(rate):>6.0f}-{max(rate):<6.0f} {statistics.median(ratio):>6.3f}x "
                  f"{min(ratio):>6.3f}-{max(ratio):<7.3f} "
                  f"{statistics.median(x[2] for x in v):>7.0f} "
                  f"{statistics.median(x[3] for x in v):>7.0f} {sum(x[4] for x in v):>6}")
    print("server CPU (user + system, 5 nodes) per cycle, all client counts pooled per run:")
    print(f"{'group':<8} {'us/cycle':>8} {'min-max':>13} {'ratio':>7} {'ratio min-max':>14}")
    for name in ("base", "off", "5s"):
        v = cpu[name]
        us = [x[0] for x in v]
        ratio = [x[1] for x in v]
        print(f"{name:<8} {statistics.median(us):>8.1f} {min(us):>6.1f}-{max(us):<6.1f} "
              f"{statistics.median(ratio):>6.3f}x {min(ratio):>6.3f}-{max(ratio):<7.3f}")


if __name__ == "__main__":
    main()
