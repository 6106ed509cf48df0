"""Contended Redlock with other clients than the crate's own: separate OS processes
(redis-py, the split-vote loop), node-redlock and redsync with their default retry
policies, each against 5 redis-server nodes and 5 redlockd nodes in the same run, rounds
interleaved. Called by benches/contention.sh, which starts the nodes:

    contention_clients.py REDIS_ADDRS REDLOCKD_ADDRS

Environment: ROUNDS (3), CLIENT_SECONDS (2), CLIENTS (2,8,32,128),
KINDS (procs,node,redsync). A kind whose client is not installed is skipped with a message:
procs needs tests/interop/.venv (redis-py), node needs tests/interop/node_modules
(redlock, ioredis), redsync needs go (modules cached under target/interop-go).

Per client kind and number of contending clients it prints lock cycles/s (median and
min-max over the rounds), the ratio to Redis's (median of the per-round ratios), the
attempts per second, and the split-vote rate: the share of attempts granted by 1-4 of
the 5 nodes (all attempts, won or lost, as each client counts its grants).
"""

import json
import os
import statistics
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTEROP = os.path.join(ROOT, "tests", "interop")
HERE = os.path.join(ROOT, "benches", "contention")
NODE_PER_PROCESS = 32  # node-redlock clients per node process
CELL_SLACK = 120  # seconds a cell may take beyond its measuring time (startup, reports)


def ports(addrs):
    return ",".join(a.rsplit(":", 1)[1] for a in addrs.split(","))


def build_redsync():
    env = dict(os.environ)
    gopath = os.path.join(ROOT, "target", "interop-go")
    env.update(
        GOPATH=gopath,
        GOMODCACHE=os.path.join(gopath, "mod"),
        GOCACHE=os.path.join(gopath, "cache"),
        GOFLAGS="-modcacherw -mod=readonly",
    )
    out = os.path.join(ROOT, "target", "contention-redsync")
    r = subprocess.run(
        ["go", "build", "-o", out, "./contention"],
        cwd=os.path.join(INTEROP, "go"),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        return None, "go build failed: " + r.stderr.strip()[-500:]
    return out, None


def commands(kind, port_list, resource, seconds, n, redsync_bin):
    """The client processes of one cell: a list of (argv, clients in it)."""
    if kind == "procs":
        py = os.path.join(INTEROP, ".venv", "bin", "python")
        client = os.path.join(HERE, "proc_client.py")
        return [[py, client, port_list, resource, str(seconds)] for _ in range(n)]
    if kind == "node":
        script = os.path.join(HERE, "node_redlock.js")
        cmds, left = [], n
        while left:
            k = min(left, NODE_PER_PROCESS)
            cmds.append(["node", script, INTEROP, port_list, resource, str(seconds), str(k)])
            left -= k
        return cmds
    return [[redsync_bin, port_list, resource, str(seconds), str(n)]]


def run_cell(cmds, seconds):
    """Starts the processes, waits until every one is connected, starts them at once,
    and sums their JSON reports. A cell that overruns is killed (its reads then fail)."""
    procs = []

    def kill_all():
        for p in procs:
            if p.poll() is None:
                p.kill()

    watchdog = threading.Timer(seconds + CELL_SLACK, kill_all)
    watchdog.start()
    try:
        for c in cmds:
            procs.append(
                subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            )
        for p in procs:
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError("a client did not start: %r" % line)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        total = {"wins": 0, "attempts": 0, "hist": [0] * 6}
        for p in procs:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("a client did not report (killed after %d s?)" % (seconds + CELL_SLACK))
            r = json.loads(line)
            total["wins"] += r.get("wins", r.get("cycles", 0))
            total["attempts"] += r["attempts"]
            total["hist"] = [a + b for a, b in zip(total["hist"], r["hist"])]
            total["seconds"] = r["seconds"]
        for p in procs:
            p.wait(timeout=30)
            if p.returncode != 0:
                raise RuntimeError("a client exited with %d" % p.returncode)
        return total
    finally:
        watchdog.cancel()
        kill_all()
        for p in procs:
            p.wait()


def split(hist):
    tot = sum(hist)
    return 100.0 * sum(hist[1:5]) / tot if tot else float("nan")


def main():
    redis_ports, redlockd_ports = ports(sys.argv[1]), ports(sys.argv[2])
    rounds = int(os.environ.get("ROUNDS", "3"))
    seconds = float(os.environ.get("CLIENT_SECONDS", "2"))
    counts = [int(c) for c in os.environ.get("CLIENTS", "2,8,32,128").split(",")]
    kinds = []
    for kind in os.environ.get("KINDS", "procs,node,redsync").split(","):
        if kind == "procs" and not os.path.exists(os.path.join(INTEROP, ".venv", "bin", "python")):
            print("skipped: procs: no tests/interop/.venv (tests/interop/run.sh creates it)")
        elif kind == "node" and not os.path.isdir(os.path.join(INTEROP, "node_modules", "redlock")):
            print("skipped: node: no tests/interop/node_modules/redlock (tests/interop/run.sh installs it)")
        elif kind not in ("procs", "node", "redsync"):
            sys.exit("unknown kind %r (procs, node, redsync)" % kind)
        else:
            kinds.append(kind)
    redsync_bin = None
    if "redsync" in kinds:
        redsync_bin, why = build_redsync()
        if redsync_bin is None:
            print("skipped: redsync: " + why)
            kinds.remove("redsync")
    # results[kind][n][server] = list of per-round totals
    results = {k: {n: {"redis": [], "redlockd": []} for n in counts} for k in kinds}
    for rnd in range(rounds):
        for kind in kinds:
            for n in counts:
                order = ["redis", "redlockd"] if rnd % 2 == 0 else ["redlockd", "redis"]
                for server in order:
                    pl = redis_ports if server == "redis" else redlockd_ports
                    resource = "contention-%s-%s-%d-%d" % (server, kind, n, rnd)
                    cmds = commands(kind, pl, resource, seconds, n, redsync_bin)
                    results[kind][n][server].append(run_cell(cmds, seconds))
                r, d = (results[kind][n][s][-1] for s in ("redis", "redlockd"))
                print(
                    "round %d %-7s %3d clients: redis %6.0f/s split %5.1f%% | redlockd %6.0f/s split %5.1f%%"
                    % (rnd + 1, kind, n, r["wins"] / seconds, split(r["hist"]),
                       d["wins"] / seconds, split(d["hist"])),
                    flush=True,
                )
    load = os.getloadavg()
    titles = {
        "procs": "separate processes (redis-py, one client each, SET NX PX 1000 on 5 nodes, 0-2 ms pause)",
        "node": "node-redlock defaults (retryCount 10, retryDelay 200, retryJitter 200, 1000 ms locks)",
        "redsync": "redsync defaults (32 tries, 50-250 ms between tries, 8 s expiry)",
    }
    for kind in kinds:
        print()
        print("%s: %d rounds of %g s, load average %.1f %.1f %.1f" % (titles[kind], rounds, seconds, *load))
        print("| clients | redis cycles/s | redlockd cycles/s | ratio | attempts/s redis / redlockd | split redis / redlockd |")
        print("|---|---|---|---|---|---|")
        for n in counts:
            cell = results[kind][n]
            rate = {s: [t["wins"] / seconds for t in cell[s]] for s in cell}
            ratios = [d / r if r else float("nan") for r, d in zip(rate["redis"], rate["redlockd"])]
            att = {s: statistics.median(t["attempts"] / seconds for t in cell[s]) for s in cell}
            hist = {s: [sum(h) for h in zip(*(t["hist"] for t in cell[s]))] for s in cell}
            print(
                "| %d | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2fx | %.0f / %.0f | %.1f%% / %.1f%% |"
                % (n, statistics.median(rate["redis"]), min(rate["redis"]), max(rate["redis"]),
                   statistics.median(rate["redlockd"]), min(rate["redlockd"]), max(rate["redlockd"]),
                   statistics.median(ratios), att["redis"], att["redlockd"],
                   split(hist["redis"]), split(hist["redlockd"])),
            )
        for n in counts:
            for s in ("redis", "redlockd"):
                h = [sum(x) for x in zip(*(t["hist"] for t in results[kind][n][s]))]
                tot = sum(h) or 1
                print("  %3d clients %-8s grants 0..5: %s" % (n, s, " / ".join("%.1f%%" % (100.0 * x / tot) for x in h)))


if __name__ == "__main__":
    main()
