#!/usr/bin/env python3
"""Faults on a real network, checked the way Jepsen checks locks (docs/netfault.md).

Five redlockd nodes, three client hosts and a storage host, each a network namespace on
one bridge. Clients (examples/netfault_client.rs, the crate's Redlock client) run three
workloads (mutex, lock-protected set, fenced writes), each with and without fencing
tokens, while a seeded schedule injects faults; the cluster is run once with the
restart fence and once without. Then three of the nodes run as a Redis Cluster while
the operator moves the locks' slot (cluster.py). Checkers turn the histories into a
table of operations and violations per workload x fault x mechanisms.

    netfault.py --redlockd target/release/redlockd \\
                --client target/release/examples/netfault_client [--seed N] [--soak MIN]

Exit status: 0 when no violation occurred where one must not (see MUST_BE_SAFE) and
the harness worked; 1 otherwise; 0 with "skipped: why" where namespaces cannot be made
(2 with --require).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import cluster  # noqa: E402
import netns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODES = ["n1", "n2", "n3", "n4", "n5"]
CLIENT_HOSTS = ["c1", "c2", "c3"]
STORAGE = "st"
HOSTS = {**{n: i + 1 for i, n in enumerate(NODES)},
         **{c: 11 + i for i, c in enumerate(CLIENT_HOSTS)}, STORAGE: 20}
NODE_PORT = 6379
STORAGE_PORT = 7000

TTL_MS = 1000          # the clients' lock TTL
MAX_TTL = "2s"         # the nodes' --max-ttl (also what the default fence waits for)
HOLD_MS = (100, 400)   # time spent inside the critical section
WAIT_MS = 2000         # acquire_within's wait
BOUND_SLACK_MS = 1000  # scheduling slack on 2 busy cores before a late return counts
LONG_DELAY_MS = 2500   # "a delay longer than the lock TTL"
CLIENT_PAUSE_MS = 2500  # a client paused past its lock's validity
PROBE_TTL_MS = 1900    # a clock probe's key (below --max-ttl)
WORKLOADS = ["mutex", "set", "fenced"]
FAKETIME_LIBS = ["/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/faketime/libfaketimeMT.so.1"]

# When a violation is allowed. With fencing tokens, the set and fenced workloads must
# never lose an addition or accept a stale write, whatever happened. Otherwise a
# violation is Redlock's known limit when a hold involved acted after the validity it
# was given (a client paused past it, a write delayed past it), or, without the
# restart fence, when it touches a window where nodes were restarted (they forgot
# their keys). Any other violation fails the run.
RESTARTS = {"kill9", "crash-restart", "clock-crash"}


def excuse(workload, tokens, fence, v, touched):
    """Why violation `v` is allowed, or None when it must not happen. `touched`: the
    faults of the windows its span overlaps."""
    if tokens and workload in ("set", "fenced"):
        return None
    if v["overran"]:
        return "a holder ran past its validity"
    if not fence and touched & RESTARTS:
        return "nodes restarted without the fence"
    return None


# --- nodes: every flag a node is started with is here --------------------------------

def node_argv(binary, ip, data_dir, fence, max_ttl=MAX_TTL, cluster_mode=None):
    """The one place node start flags live. fence=False turns the restart fence off;
    `cluster_mode`: (mode, node id, map file or None) for the cluster run."""
    # The hosts reach the nodes over the bridge, not loopback, and the nodes have no
    # password: protected mode (on by default) would refuse them.
    argv = [binary, "--bind", ip, "--port", str(NODE_PORT), "--dir", data_dir,
            "--max-ttl", max_ttl, "--protected-mode", "no"]
    if not fence:
        argv += ["--restart-delay", "0"]
    if cluster_mode:
        mode, node_id, map_file = cluster_mode
        argv += ["--cluster-mode", mode, "--cluster-node-id", node_id]
        if map_file:
            argv += ["--cluster-map", map_file]
    return argv


def node_init_argv(binary, data_dir):
    """A data directory's one-time setup before its first start, when the binary has
    one (`redlockd init`); None otherwise."""
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    if any(line.strip().startswith("init") for line in r.stdout.splitlines()):
        return [binary, "init", "--dir", data_dir]
    return None


class Harness:
    STORAGE = STORAGE
    CLIENT_HOSTS = CLIENT_HOSTS

    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.t_start = time.monotonic()
        self.out = args.out
        self.net = None
        self.procs = {}        # name -> Popen (nodes, storage, clients, delayers)
        self.expected_dead = set()
        self.paused_clients = {}  # client id -> [(t0, t1)]
        self.windows = []      # (run, fault, t0_ns, t1_ns, detail)
        self.failures = []     # harness failures (fail the run)
        self.probe_failures = []  # clock probes: a TTL that followed the wall clock
        self.refused = []      # what fencing tokens refused, per run and workload
        self.faketime = next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)
        self.skips = []
        self.unsafe = None     # the cluster protections a run turns off (cluster.py)
        if not self.faketime:
            self.skips.append("clock faults: libfaketime not found (apt-get install libfaketime)")
        self.log_f = open(os.path.join(self.out, "harness.log"), "a", encoding="utf-8")

    def log(self, msg):
        line = f"[{time.monotonic() - self.t_start:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_f.write(line + "\n")
        self.log_f.flush()

    # --- processes ----------------------------------------------------------------

    def spawn(self, name, host, argv, env=None, stdout=None):
        logf = open(os.path.join(self.out, f"{name}.log"), "ab")
        p = subprocess.Popen(self.net.exec_argv(host, argv), stdout=stdout or logf, stderr=logf,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.procs[name] = p
        return p

    def stop(self, name, sig=signal.SIGTERM, wait=3.0):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        self.expected_dead.add(name)
        try:
            os.kill(p.pid, signal.SIGCONT)
            os.kill(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(5)

    def check_alive(self):
        for name, p in self.procs.items():
            if name not in self.expected_dead and p.poll() is not None:
                tail = ""
                try:
                    with open(os.path.join(self.out, f"{name}.log"), "rb") as f:
                        tail = f.read()[-600:].decode("utf-8", "replace")
                except OSError:
                    pass
                self.failures.append(f"{name} exited on its own (status {p.returncode}): {tail.strip()}")
                self.expected_dead.add(name)

    # --- the cluster --------------------------------------------------------------

    def clock_file(self, node):
        return os.path.join(self.run_dir, f"{node}.faketime")

    def set_clock(self, node, offset):
        """The node's wall clock offset, e.g. "+0", "+86400", "-3600" (seconds)."""
        path = self.clock_file(node)
        with open(path + ".tmp", "w") as f:
            f.write(offset + "\n")
        os.replace(path + ".tmp", path)

    def node_env(self, node):
        env = dict(os.environ)
        env["RUST_LOG"] = env.get("RUST_LOG", "warn")
        if self.faketime:
            env.update(LD_PRELOAD=self.faketime, FAKETIME_TIMESTAMP_FILE=self.clock_file(node),
                       FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1",
                       FAKETIME_DONT_RESET="1")
        if self.unsafe:
            env[cluster.UNSAFE_ENV] = self.unsafe
        return env

    def start_node(self, node, max_ttl=MAX_TTL, cluster=None):
        data = os.path.join(self.run_dir, node)
        if not os.path.isdir(data):
            os.makedirs(data)
            init = node_init_argv(self.args.redlockd, data)
            if init:
                subprocess.run(self.net.exec_argv(node, init), check=True, timeout=30,
                               capture_output=True)
        self.expected_dead.discard(node)
        self.spawn(node, node, node_argv(self.args.redlockd, self.net.ip(node), data, self.fence,
                                         max_ttl, cluster),
                   env=self.node_env(node))

    def node_call(self, node, *cmd, via=STORAGE, timeout=1.0):
        s = self.net.connect(via, (self.net.ip(node), NODE_PORT), timeout)
        try:
            return netns.resp_call(s, *cmd)
        finally:
            s.close()

    def wait_writable(self, nodes, timeout=20.0):
        """Until every node accepts a write (started, past any restart fence)."""
        pending = set(nodes)

        def ok():
            for n in list(pending):
                try:
                    if self.node_call(n, "SET", "nf:ready", "1", "PX", "100") == "OK":
                        pending.discard(n)
                except (OSError, RuntimeError, ConnectionError):
                    pass
            return not pending
        if not netns.wait_until(ok, timeout, 0.1):
            raise RuntimeError(f"nodes not writable after {timeout:.0f} s: {sorted(pending)}")

    def start_clients(self, seconds, cluster_nodes=None):
        """18 clients; with `cluster_nodes`, each takes that cluster as its one vote
        (`--cluster`) and every lock key carries the cluster run's hash tag."""
        nodes = ",".join(f"{self.net.ip(n)}:{NODE_PORT}" for n in cluster_nodes or NODES)
        target = ["--cluster", nodes] if cluster_nodes else ["--nodes", nodes]
        storage = f"{self.net.ip(STORAGE)}:{STORAGE_PORT}"
        self.clients = []  # (id, name, workload, tokens, key, host, history path)
        gid = 0
        for workload in WORKLOADS:
            for tokens in (True, False):
                gid += 1
                key = f"nf:{workload}:{'tok' if tokens else 'plain'}"
                if cluster_nodes:
                    key = "{" + cluster.TAG + "}:" + key
                for i, host in enumerate(CLIENT_HOSTS):
                    cid = gid * 10 + i
                    name = f"client{cid}"
                    hist = os.path.join(self.run_dir, f"{name}.jsonl")
                    argv = [self.args.client, *target, "--workload", workload,
                            "--client", str(cid), "--key", key, "--ttl-ms", str(TTL_MS),
                            "--hold-min-ms", str(HOLD_MS[0]), "--hold-max-ms", str(HOLD_MS[1]),
                            "--wait-ms", str(WAIT_MS), "--seconds", str(seconds)]
                    if workload != "mutex":
                        argv += ["--storage", storage]
                    if tokens:
                        argv.append("--tokens")
                    self.spawn(name, host, argv, stdout=open(hist, "wb"))
                    self.clients.append({"id": cid, "name": name, "workload": workload,
                                         "tokens": tokens, "key": key, "host": host, "hist": hist})

    # --- network state --------------------------------------------------------------

    def apply_net(self):
        """Writes every host's iptables from the current fault state."""
        rules = {}
        for host in HOSTS:
            filt, mangle = [], []
            for peer in sorted(self.cut.get(host, ())):
                filt.append(f"-A INPUT -s {self.net.ip(peer)} -j DROP")
                filt.append(f"-A OUTPUT -d {self.net.ip(peer)} -j DROP")
            for peer, p in sorted(self.loss.get(host, {}).items()):
                filt.append(f"-A OUTPUT -d {self.net.ip(peer)} -m statistic --mode random --probability {p} -j DROP")
                filt.append(f"-A INPUT -s {self.net.ip(peer)} -m statistic --mode random --probability {p} -j DROP")
            for peer, q in sorted(self.queue.get(host, {}).items()):
                filt.append(f"-A OUTPUT -d {self.net.ip(peer)} -j NFQUEUE --queue-num {q}")
            for peer, p in sorted(self.dup.get(host, {}).items()):
                ip = self.net.ip(peer)
                mangle.append(f"-A OUTPUT -d {ip} -m statistic --mode random --probability {p} -j TEE --gateway {ip}")
            rules[host] = (filt, mangle)
        self.net.set_rules(rules)

    def reset_net_state(self):
        self.cut, self.loss, self.queue, self.dup = {}, {}, {}, {}

    def partition(self, groups):
        """Hosts in different groups cannot reach each other; a host in no group
        reaches everyone; a host listed in two groups (a bridge) reaches both."""
        where = {}
        for i, g in enumerate(groups):
            for h in g:
                where.setdefault(h, set()).add(i)
        for a in where:
            for b in where:
                if a != b and not (where[a] & where[b]):
                    self.cut.setdefault(a, set()).add(b)
        self.apply_net()

    def start_delayers(self, hosts, queue, delay_ms, jitter_ms):
        """A delayer bound to `queue` in each of `hosts`, started in parallel; returns
        their names once every one has bound its queue (until then packets sent to
        the queue would be dropped)."""
        names = []
        for host in hosts:
            self.delayers = getattr(self, "delayers", 0) + 1
            name = f"delayer{self.delayers}-{host}-q{queue}"
            self.spawn(name, host, [sys.executable, os.path.join(HERE, "delayer.py"), str(queue),
                                    str(delay_ms), str(jitter_ms), str(self.fault_rng.randrange(1 << 30))])
            names.append(name)

        def bound():
            for name in names:
                with open(os.path.join(self.out, f"{name}.log"), "rb") as f:
                    if b"delayer:" not in f.read():
                        return False
            return True
        if not netns.wait_until(bound, 10):
            self.check_alive()
            raise RuntimeError(f"delayers did not start: {names}")
        return names

    # --- clients --------------------------------------------------------------------

    def holder(self, client):
        """True when the client's history ends inside a hold (acquired, not released)."""
        try:
            with open(client["hist"], "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return False
        for line in reversed(lines):
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e.get("ev") == "acquire":
                return e.get("ph") == "ok"
            if e.get("ev") == "release":
                return False
        return False

    # --- faults ---------------------------------------------------------------------

    def fault_kinds(self):
        """The faults a run draws from: every kind this machine can make, or those of
        --faults."""
        kinds = self.all_fault_kinds()
        if self.args.faults:
            chosen = self.args.faults.split(",")
            unknown = [k for k in chosen if k not in kinds]
            if unknown:
                raise SystemExit(f"netfault: unknown or unavailable faults: {unknown} (known: {kinds})")
            kinds = chosen
        return kinds

    def all_fault_kinds(self):
        kinds = ["part-one", "part-minority", "part-majority", "part-clients", "part-bridge",
                 "delay", "loss", "dup", "delay-long", "kill9", "crash-restart",
                 "pause-node", "pause-client"]
        if self.faketime:
            kinds += ["clock-jump", "clock-strobe", "clock-crash"]
        return kinds

    def run_fault(self, kind, dur, rng):
        """Applies one fault for `dur` seconds and heals it. Returns a short description.
        `rng` is the fault's own (seeded by the run's seed, the run and the fault's
        place in the schedule), so a replay picks the same targets."""
        self.fault_rng = rng
        nodes = NODES[:]
        rng.shuffle(nodes)
        # Partitions cut lock traffic only: the storage stays reachable by every host
        # (a write held back is the delay-long fault's business).
        clients_all = CLIENT_HOSTS + [STORAGE]
        detail = ""
        if kind.startswith("part-"):
            if kind == "part-one":
                groups = [[nodes[0]], nodes[1:] + clients_all]
                detail = f"{nodes[0]} alone"
            elif kind == "part-minority":
                groups = [nodes[:2], nodes[2:] + clients_all]
                detail = f"{nodes[:2]} | rest"
            elif kind == "part-majority":
                groups = [nodes[:3], nodes[3:] + clients_all]
                detail = f"{nodes[:3]} | rest"
            elif kind == "part-clients":
                c = rng.choice(CLIENT_HOSTS)
                groups = [[c] + nodes[:2], nodes[2:] + [h for h in clients_all if h != c]]
                detail = f"{c} with {nodes[:2]} only"
            else:
                c = rng.sample(CLIENT_HOSTS, 2)
                left = nodes[:3] + [c[0]]
                right = nodes[2:] + [c[1]]
                rest = [h for h in clients_all if h not in c]
                groups = [left + rest, right + rest]
                detail = f"bridge {nodes[2]}: {c[0]}+{nodes[:2]} / {c[1]}+{nodes[3:]}"
            for g in groups:
                if STORAGE not in g:
                    g.append(STORAGE)
            self.partition(groups)
            time.sleep(dur)
        elif kind in ("delay", "loss", "dup"):
            victims = nodes[:2]
            if kind == "delay":
                # every client host's packets to two nodes held 20-80 ms (the per-node
                # timeout is 50 ms: some requests miss it, some do not)
                for c in CLIENT_HOSTS:
                    for v in victims:
                        self.queue.setdefault(c, {})[v] = 1
                names = self.start_delayers(CLIENT_HOSTS, 1, 20, 60)
                self.apply_net()
                time.sleep(dur)
                self.reset_net_state()
                self.apply_net()
                for n in names:
                    self.stop(n)
                detail = f"20-80 ms to {victims}"
            elif kind == "loss":
                for v in victims:
                    for h in CLIENT_HOSTS:
                        self.loss.setdefault(v, {})[h] = 0.3
                self.apply_net()
                time.sleep(dur)
                detail = f"30% loss both ways at {victims}"
            else:
                for c in CLIENT_HOSTS:
                    for n in NODES:
                        self.dup.setdefault(c, {})[n] = 0.5
                    self.dup[c][STORAGE] = 0.5
                for n in NODES:
                    for c in CLIENT_HOSTS:
                        self.dup.setdefault(n, {})[c] = 0.5
                self.apply_net()
                time.sleep(dur)
                detail = "50% of packets duplicated, clients <-> nodes and storage"
        elif kind == "delay-long":
            c = rng.choice(CLIENT_HOSTS)
            self.queue.setdefault(c, {})[STORAGE] = 2
            (name,) = self.start_delayers([c], 2, LONG_DELAY_MS, 0)
            self.apply_net()
            time.sleep(dur)
            self.reset_net_state()
            self.apply_net()
            self.stop(name)  # releases what it held: the late writes arrive now
            detail = f"{c} -> storage held {LONG_DELAY_MS} ms (TTL {TTL_MS} ms)"
        elif kind == "kill9":
            victims = nodes[:rng.choice([1, 2])]
            for v in victims:
                self.expected_dead.add(v)
                os.kill(self.procs[v].pid, signal.SIGKILL)
                self.procs[v].wait(5)
            time.sleep(dur)
            for v in victims:
                self.start_node(v)
            detail = f"kill -9 {victims}, restarted after {dur:.0f} s"
        elif kind == "crash-restart":
            # a majority killed and restarted at once, again every second (each crash
            # then finds a fresh holder)
            end = time.monotonic() + dur
            rounds = 0
            while time.monotonic() < end - 0.5:
                victims = rng.sample(NODES, 3)
                for v in victims:
                    self.expected_dead.add(v)
                    os.kill(self.procs[v].pid, signal.SIGKILL)
                for v in victims:
                    self.procs[v].wait(5)
                    self.start_node(v)
                rounds += 1
                time.sleep(1.0)
            time.sleep(max(0.0, end - time.monotonic()))
            detail = f"kill -9 of a majority and immediate restart, {rounds} times"
        elif kind == "clock-crash":
            # A majority crashes and boots with its wall clock an hour ahead: a restart
            # fence that trusted the wall clock across the crash would end too early.
            end = time.monotonic() + dur
            rounds = 0
            while time.monotonic() < end - 0.5:
                victims = rng.sample(NODES, 3)
                for v in victims:
                    self.expected_dead.add(v)
                    os.kill(self.procs[v].pid, signal.SIGKILL)
                for v in victims:
                    self.procs[v].wait(5)
                    self.set_clock(v, "+3600")
                    self.start_node(v)
                rounds += 1
                time.sleep(1.0)
            time.sleep(max(0.0, end - time.monotonic()))
            detail = f"kill -9 of a majority, restarted with the wall clock +1 h, {rounds} times"
        elif kind == "pause-node":
            victims = nodes[:2]
            for v in victims:
                os.kill(self.procs[v].pid, signal.SIGSTOP)
            time.sleep(dur)
            for v in victims:
                os.kill(self.procs[v].pid, signal.SIGCONT)
            detail = f"SIGSTOP {victims} for {dur:.0f} s"
        elif kind == "pause-client":
            # The holder of each lock, paused past its validity, then let go on.
            deadline = time.monotonic() + dur
            paused = []
            while time.monotonic() < deadline - CLIENT_PAUSE_MS / 1000:
                groups = {}
                for c in self.clients:
                    groups.setdefault(c["key"], []).append(c)
                picks = []
                for key, cs in groups.items():
                    if any(c["id"] in [p["id"] for p in paused] for c in cs):
                        continue
                    holding = [c for c in cs if self.holder(c)]
                    if holding:
                        picks.append(holding[0])
                t0 = time.monotonic_ns()
                for c in picks:
                    os.kill(self.procs[c["name"]].pid, signal.SIGSTOP)
                    paused.append(dict(c, t0=t0))
                if len(paused) == len(groups):
                    break
                time.sleep(0.05)
            time.sleep(CLIENT_PAUSE_MS / 1000)
            t1 = time.monotonic_ns()
            for c in paused:
                os.kill(self.procs[c["name"]].pid, signal.SIGCONT)
                self.paused_clients.setdefault(c["id"], []).append((c["t0"], t1))
            time.sleep(max(0.0, deadline - time.monotonic()))
            detail = f"SIGSTOP holders {sorted(c['id'] for c in paused)} for {CLIENT_PAUSE_MS} ms"
        elif kind == "clock-jump":
            victims = nodes[:2]
            jump = rng.choice([86400, -86400, 3600, -3600])
            probes = [self.probe_start(v) for v in victims]
            for v in victims:
                self.set_clock(v, f"{jump:+d}")
            time.sleep(0.3)
            for v, p in zip(victims, probes):
                self.probe_check(v, p, jump)
            time.sleep(dur - 0.3)
            detail = f"wall clock of {victims} {jump:+d} s"
        elif kind == "clock-strobe":
            victims = nodes[:3]
            probes = [self.probe_start(v) for v in victims]
            end = time.monotonic() + dur
            flip = 0
            checked = False
            while time.monotonic() < end:
                flip += 1
                off = [0, 7200, -7200, 30][flip % 4]
                for v in victims:
                    self.set_clock(v, f"{off:+d}")
                if not checked and off == 7200:
                    time.sleep(0.02)
                    for v, p in zip(victims, probes):
                        self.probe_check(v, p, off)
                    checked = True
                time.sleep(0.05)
            detail = f"wall clock of {victims} strobing 0/+2h/-2h/+30s every 50 ms"
        else:
            raise ValueError(kind)
        # heal everything
        self.reset_net_state()
        self.apply_net()
        for v in NODES:
            if self.faketime:
                self.set_clock(v, "+0")
        return detail

    def probe_start(self, node):
        key = f"nf:probe:{node}"
        self.node_call(node, "SET", key, "x", "PX", str(PROBE_TTL_MS))
        return (key, time.monotonic())

    def probe_check(self, node, probe, jump):
        """The wall clock moved (TIME) and the TTL did not (PTTL)."""
        key, t0 = probe
        secs, _ = self.node_call(node, "TIME")
        wall_off = int(secs) - time.time()
        pttl = self.node_call(node, "PTTL", key)
        left = PROBE_TTL_MS - (time.monotonic() - t0) * 1000
        if abs(wall_off - jump) > 5:
            self.failures.append(f"clock fault had no effect on {node}: TIME is {wall_off:+.0f} s off, wanted {jump:+d} (libfaketime not applied?)")
        elif not (left - 400 <= pttl <= left + 50):
            self.probe_failures.append(f"{node}: wall clock {jump:+d} s, PTTL {pttl} ms where {left:.0f} ms were left")
        else:
            self.log(f"  probe {node}: TIME {wall_off:+.0f} s, PTTL {pttl} ms ({left:.0f} left): the TTL ignored the clock")

    # --- one cluster run ------------------------------------------------------------

    def cluster_run(self, fence, kinds, fault_s, settle_s, baseline_s):
        label = "fence" if fence else "nofence"
        self.fence = fence
        self.run_dir = os.path.join(self.out, label)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        os.makedirs(self.run_dir)
        self.reset_net_state()
        self.apply_net()
        for n in NODES:
            self.set_clock(n, "+0")
            self.start_node(n)
        self.wait_writable(NODES)
        self.spawn(f"storage-{label}", STORAGE, [sys.executable, os.path.join(HERE, "storage.py"),
                                                 f"{self.net.ip(STORAGE)}:{STORAGE_PORT}",
                                                 os.path.join(self.run_dir, "storage.jsonl")]
                   + (["--writes-only"] if self.args.storage_writes_only else []))
        storage_up = lambda: b"listening" in open(os.path.join(self.out, f"storage-{label}.log"), "rb").read()
        if not netns.wait_until(storage_up, 10):
            raise RuntimeError("storage did not start")
        planned = baseline_s + len(kinds) * (fault_s + settle_s) + 60
        self.start_clients(int(planned))
        self.log(f"run {label}: 5 nodes, 18 clients (3 workloads x tokens on/off x 3 hosts)")
        t = time.monotonic_ns()
        time.sleep(baseline_s)
        self.windows.append((label, "none", t, time.monotonic_ns(), "no fault"))
        for i, kind in enumerate(kinds):
            t0 = time.monotonic_ns()
            detail = self.run_fault(kind, fault_s, random.Random(f"{self.seed}/{label}/{i}"))
            time.sleep(settle_s)
            self.check_alive()
            # a node a fault restarted must be back before the next fault; the wait is
            # part of this fault's window (what it causes is counted with it)
            t_wait = time.monotonic()
            self.wait_writable(NODES, timeout=15)
            if time.monotonic() - t_wait > 2:
                self.log(f"  (nodes took {time.monotonic() - t_wait:.1f} s to take writes again)")
            self.windows.append((label, kind, t0, time.monotonic_ns(), detail))
            self.log(f"  {kind:14s} {detail}")
        t_end = time.monotonic_ns()
        for c in self.clients:
            self.stop(c["name"], signal.SIGKILL)
        self.stop(f"storage-{label}")
        for n in NODES:
            self.stop(n)
        return label, t_end

    def cluster_scenario(self, kinds, fault_s, settle_s, baseline_s, unsafe=None):
        """The cluster run (cluster.py): three map-mode nodes as one vote, the
        operator's actions and faults on the lock slot's owner in `kinds`. `unsafe`:
        the protections turned off (REDLOCKD_TEST_CLUSTER_UNSAFE), None for none."""
        label = "cluster" + (f"-{unsafe.replace(',', '+')}-off" if unsafe else "")
        self.fence = True
        self.unsafe = unsafe
        self.run_dir = os.path.join(self.out, label)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        os.makedirs(self.run_dir)
        self.reset_net_state()
        self.apply_net()
        cr = cluster.ClusterRun(self, NODE_PORT)
        cr.boot()
        self.spawn(f"storage-{label}", STORAGE, [sys.executable, os.path.join(HERE, "storage.py"),
                                                 f"{self.net.ip(STORAGE)}:{STORAGE_PORT}",
                                                 os.path.join(self.run_dir, "storage.jsonl")])
        storage_up = lambda: b"listening" in open(os.path.join(self.out, f"storage-{label}.log"), "rb").read()
        if not netns.wait_until(storage_up, 10):
            raise RuntimeError("storage did not start")
        planned = baseline_s + len(kinds) * (fault_s + settle_s + 8) + 60
        self.start_clients(int(planned), cluster_nodes=cluster.NODES)
        self.log(f"run {label}: 3 nodes in map mode (one vote, lock slot {cluster.SLOT}), "
                 f"18 clients (3 workloads x tokens on/off x 3 hosts)"
                 + (f"; protections off: {unsafe}" if unsafe else ""))
        t = time.monotonic_ns()
        time.sleep(baseline_s)
        self.windows.append((label, "none", t, time.monotonic_ns(), "no fault"))
        for i, kind in enumerate(kinds):
            t0 = time.monotonic_ns()
            detail = cr.action(kind, fault_s, random.Random(f"{self.seed}/{label}/{i}"))
            self.reset_net_state()
            self.apply_net()
            time.sleep(settle_s)
            self.check_alive()
            t_wait = time.monotonic()
            try:
                cr.ready(timeout=20)
            except RuntimeError as e:
                # a failure of the run; the clients go on, so the checkers show what
                # it cost
                self.failures.append(f"after {kind}: {e}")
                self.log(f"  FAILED: {e}")
            if time.monotonic() - t_wait > 2:
                self.log(f"  (the cluster took {time.monotonic() - t_wait:.1f} s to take writes again)")
            self.windows.append((label, kind, t0, time.monotonic_ns(), detail))
            self.log(f"  {kind:14s} {detail}")
        t_end = time.monotonic_ns()
        for c in self.clients:
            self.stop(c["name"], signal.SIGKILL)
        self.stop(f"storage-{label}")
        for n in cluster.NODES:
            self.stop(n)
        with open(os.path.join(self.run_dir, "operator.json"), "w") as f:
            json.dump(cr.ops, f, indent=1)
        self.unsafe = None
        return label, t_end

    # --- checking -------------------------------------------------------------------

    def check(self, label, t_end, fence=None):
        storage_log = checker.load_history(os.path.join(self.run_dir, "storage.jsonl"))
        wins = [w for w in self.windows if w[0] == label]
        cells = {}
        bounds = {"checked": 0, "over": [], "max": {}}

        def window_of(t):
            for w in wins:
                if w[2] <= t < w[3]:
                    return w[1]
            return wins[-1][1] if t >= wins[-1][3] else "none"

        def place(v, workload, tokens):
            """(window, excuse): a violation goes to the window where the holder at
            fault ran out of validity, or, without the fence, a restart window its span
            touches, else to the window where it showed."""
            touched = {w[1] for w in wins if v["first"] < w[3] and w[2] <= v["shown"]}
            why = excuse(workload, tokens, label == "fence" if fence is None else fence, v, touched)
            if v["overran"]:
                return window_of(v["overran"][0]), why
            if why:
                for w in reversed(wins):
                    if w[1] in RESTARTS and v["first"] < w[3] and w[2] <= v["shown"]:
                        return w[1], why
            return window_of(v["shown"]), why

        by_key = {}
        for c in self.clients:
            by_key.setdefault(c["key"], []).append(c)
        for key, cs in by_key.items():
            workload, tokens = cs[0]["workload"], cs[0]["tokens"]
            events = []
            for c in cs:
                ev = checker.load_history(c["hist"])
                events += ev
                over, n, longest = checker.check_bounds(ev, self.paused_clients.get(c["id"], []), BOUND_SLACK_MS)
                bounds["checked"] += n
                bounds["over"] += over
                for k, v in longest.items():
                    if v[0] > bounds["max"].get(k, (0, 0))[0]:
                        bounds["max"][k] = v
            hmap = checker.holds(events, t_end)
            if workload == "mutex":
                viol = checker.check_mutex(hmap)
            elif workload == "set":
                viol, _ = checker.check_set(events, storage_log, key, hmap)
            else:
                viol = checker.check_fenced(hmap, storage_log, key)
            for w in wins:
                cells[(workload, w[1], tokens, label)] = {"ops": 0, "viol": [], "windows": 0}
            for w in wins:
                cells[(workload, w[1], tokens, label)]["windows"] += 1
            for h in hmap.values():
                cells[(workload, window_of(h["start"]), tokens, label)]["ops"] += 1
            for v in viol:
                win, why = place(v, workload, tokens)
                cells[(workload, win, tokens, label)]["viol"].append((v["desc"], why))
        # what the tokens did: stale reads and writes the storage refused
        for key, cs in by_key.items():
            if not cs[0]["tokens"] or cs[0]["workload"] == "mutex":
                continue
            writes = sum(1 for w in storage_log if w["key"] == key and not w["accepted"])
            reads = 0
            for c in cs:
                reads += sum(1 for e in checker.load_history(c["hist"])
                             if e.get("ev") == "read" and e.get("ph") == "refused")
            self.refused.append(f"{label}: {cs[0]['workload']}: {writes} stale writes and {reads} stale reads refused")
        return cells, bounds


def table(cells, faults):
    mechs = [(True, "fence"), (False, "fence"), (True, "nofence"), (False, "nofence")]
    head = ["tokens+fence", "fence only", "tokens only", "neither"]
    lines = []
    w0 = 22
    lines.append(f"{'workload / fault':{w0}s} " + " ".join(f"{h:>16s}" for h in head))
    lines.append(" " * w0 + " " + " ".join(f"{'ops viol':>16s}" for _ in head))
    for workload in WORKLOADS:
        for fault in faults:
            row = f"{workload + ' / ' + fault:{w0}s} "
            for tokens, label in mechs:
                c = cells.get((workload, fault, tokens, label))
                if c is None:
                    row += f"{'-':>16s} "
                    continue
                mark = "!" if any(why is None for _, why in c["viol"]) else " "
                row += f"{c['ops']:>9d} {len(c['viol']):>5d}{mark}"
            lines.append(row.rstrip())
    return "\n".join(lines)


def cluster_table(cells, label, actions):
    """The cluster run's rows: workload / action, tokens on and off."""
    lines = [f"{'workload / action':22s} {'tokens':>16s} {'no tokens':>16s}",
             " " * 22 + " " + " ".join(f"{'ops viol':>16s}" for _ in range(2))]
    for workload in WORKLOADS:
        for a in actions:
            row = f"{workload + ' / ' + a:22s} "
            for tokens in (True, False):
                c = cells.get((workload, a, tokens, label))
                if c is None:
                    row += f"{'-':>16s} "
                    continue
                mark = "!" if any(why is None for _, why in c["viol"]) else " "
                row += f"{c['ops']:>9d} {len(c['viol']):>5d}{mark}"
            lines.append(row.rstrip())
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redlockd", required=True)
    ap.add_argument("--client", required=True, help="the netfault_client example binary")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--soak", type=float, default=0, help="minutes per fence setting of random faults (0: the bounded run)")
    ap.add_argument("--out", default=None, help="where logs and histories go")
    ap.add_argument("--require", action="store_true", help="a skip is an error (exit 2)")
    ap.add_argument("--faults", default=None,
                    help="comma-separated fault kinds to draw from (default: all); e.g. "
                         "--faults crash-restart --soak 3 repeats one fault")
    ap.add_argument("--fence", choices=["both", "on", "off"], default="both",
                    help="which restart-fence settings to run (default: both)")
    ap.add_argument("--cluster", choices=["on", "off", "only"], default="on",
                    help="the cluster run (3 map-mode nodes, slot moves and the operator's "
                         "actions) after the Redlock runs; only: it alone (default: on)")
    ap.add_argument("--cluster-actions", default=None,
                    help=f"comma-separated actions of the cluster run (default: all, "
                         f"shuffled: {','.join(cluster.ACTIONS)})")
    ap.add_argument("--cluster-unsafe", choices=sorted(cluster.UNSAFE_ACTIONS), default=None,
                    help="the cluster run alone, with these protections off "
                         "(keys,fence: slots move without keys or fence; fence: no takeover "
                         "fence; confirm: saved maps served unconfirmed): a failing run")
    ap.add_argument("--storage-writes-only", action="store_true",
                    help="the storage checks tokens on writes only (shows the set losing "
                         "additions with tokens: a failing run)")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    if args.cluster_unsafe:
        args.cluster = "only"
    for b in (args.redlockd, args.client):
        if not os.access(b, os.X_OK):
            print(f"netfault: not an executable: {b}", file=sys.stderr)
            return 1
    args.redlockd = os.path.abspath(args.redlockd)
    args.client = os.path.abspath(args.client)

    why = netns.can_make_namespaces()
    if why:
        print(f"netfault: skipped: {why}")
        return 2 if args.require else 0
    if args.out is None:
        args.out = os.path.join(os.getcwd(), "target", "netfault", f"seed-{args.seed}-{os.getpid()}")
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)

    h = Harness(args)
    h.log(f"seed {args.seed} (replay: --seed {args.seed}); logs in {args.out}")
    netns.remove_leftovers(h.log)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)

    net = netns.Net(HOSTS, h.log)
    h.net = net
    cells, bounds_all, status = {}, {"checked": 0, "over": [], "max": {}}, 0
    faults_seen = ["none"]
    cluster_runs = []  # (label, actions)
    try:
        net.up()
        fences = {"both": (True, False), "on": (True,), "off": (False,)}[args.fence]
        for fence in fences if args.cluster != "only" else ():
            if args.soak > 0:
                kinds, fault_s, settle_s = [], 6.0, 3.0
                per = fault_s + settle_s + 1.0
                n = max(1, int(args.soak * 60 / per))
                pool = h.fault_kinds()
                kinds = [h.rng.choice(pool) for _ in range(n)]
            else:
                kinds = h.fault_kinds()
                h.rng.shuffle(kinds)
                fault_s, settle_s = 3.0, 2.0
            h.log(f"schedule ({'fence' if fence else 'nofence'}): {' '.join(kinds)}")
            for k in kinds:
                if k not in faults_seen:
                    faults_seen.append(k)
            label, t_end = h.cluster_run(fence, kinds, fault_s, settle_s, baseline_s=3.0)
            c, b = h.check(label, t_end)
            cells.update(c)
            bounds_all["checked"] += b["checked"]
            bounds_all["over"] += b["over"]
            for k, v in b["max"].items():
                if v[0] > bounds_all["max"].get(k, (0, 0))[0]:
                    bounds_all["max"][k] = v
            h.check_alive()
        if args.cluster != "off":
            if args.cluster_unsafe:
                actions = cluster.UNSAFE_ACTIONS[args.cluster_unsafe]
            elif args.cluster_actions:
                actions = args.cluster_actions.split(",")
                known = cluster.ACTIONS + cluster.EXTRA_ACTIONS
                unknown = [a for a in actions if a not in known]
                if unknown:
                    raise SystemExit(f"netfault: unknown cluster actions {unknown} (known: {known})")
            elif args.soak > 0:
                n = max(1, int(args.soak * 60 / 12))
                actions = [h.rng.choice(cluster.ACTIONS) for _ in range(n)]
            else:
                actions = cluster.ACTIONS[:]
                h.rng.shuffle(actions)
            h.log(f"schedule (cluster): {' '.join(actions)}")
            label, t_end = h.cluster_scenario(actions, 3.0, 2.0, 3.0, args.cluster_unsafe)
            c, b = h.check(label, t_end, fence=True)
            cells.update(c)
            bounds_all["checked"] += b["checked"]
            bounds_all["over"] += b["over"]
            for k, v in b["max"].items():
                if v[0] > bounds_all["max"].get(k, (0, 0))[0]:
                    bounds_all["max"][k] = v
            seen = ["none"] + [a for a in cluster.ACTIONS + cluster.EXTRA_ACTIONS if a in actions]
            cluster_runs.append((label, seen))
            h.check_alive()
    except KeyboardInterrupt as e:
        h.failures.append(f"interrupted ({e})")
    except Exception as e:  # a harness failure: reported, cleaned up, non-zero
        import traceback
        traceback.print_exc()
        h.failures.append(f"harness error: {e!r}")
    finally:
        for name in list(h.procs):
            h.stop(name, signal.SIGKILL, wait=2)
        left = net.down()
        if left:
            h.failures.append(f"namespaces left behind: {left}")
        h.log("cleaned up: every process stopped, namespaces and links deleted")

    order = ["none"] + h.fault_kinds()
    faults = [f for f in order if f in faults_seen]
    print()
    if args.cluster != "only":
        print(table(cells, faults))
    for label, seen in cluster_runs:
        print(f"\n{label}: 3 map-mode nodes as one vote, the lock slot moved by the operator")
        print(cluster_table(cells, label, seen))
    print("\nops: locks acquired in the fault's window (fault + heal + settle); viol: "
          "mutex: holds that overlapped another; set: acknowledged additions lost; "
          "fenced: stale writes accepted or tokens out of order. '!' marks a violation "
          "where one must not happen (with tokens in set/fenced; else one where no "
          "holder ran past its validity and, without the fence, no node restarted).")
    bad = [(k, d) for k, v in cells.items() for d, why in v["viol"] if why is None]
    limits = [(k, d, why) for k, v in cells.items() for d, why in v["viol"] if why]
    b = bounds_all
    mx = ", ".join(f"{k} max {v[0]:.0f} ms (bound {v[1]} ms)" for k, v in sorted(b["max"].items()))
    print(f"\nbounds: {b['checked']} acquires/releases checked, {len(b['over'])} over bound + {BOUND_SLACK_MS} ms slack; {mx}")
    for t, d in b["over"][:10]:
        print(f"  OVER BOUND: {d}")
    by_why = {}
    for _, _, why in limits:
        by_why[why] = by_why.get(why, 0) + 1
    print(f"found where Redlock's limits allow them: {len(limits)} violations ("
          + ", ".join(f"{n}: {w}" for w, n in sorted(by_why.items())) + ")")
    print("with tokens, the storage refused: " + "; ".join(h.refused))
    for k, d in bad[:20]:
        print(f"  VIOLATION {k[0]} / {k[1]} / tokens={'on' if k[2] else 'off'} / {k[3]}: {d}")
    for p in h.probe_failures:
        print(f"  CLOCK: a TTL followed the wall clock: {p}")
    for s in h.skips:
        print(f"skipped: {s}")
    for f in h.failures:
        print(f"HARNESS FAILURE: {f}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"seed": args.seed, "windows": h.windows,
                   "cells": [{"workload": k[0], "fault": k[1], "tokens": k[2], "run": k[3],
                              "ops": v["ops"],
                              "violations": [{"what": d, "allowed": why} for d, why in v["viol"]]}
                             for k, v in cells.items()],
                   "bounds_over": b["over"], "failures": h.failures,
                   "probe_failures": h.probe_failures}, f, indent=1)
    elapsed = time.monotonic() - h.t_start
    # A chosen subset of faults may not include one that bites; the full run must.
    if (not h.failures and cells and not limits and not args.faults and args.fence == "both"
            and args.cluster != "only"):
        h.failures.append("the checkers found no violation even where Redlock's limits allow them "
                          "(paused clients, long delays, no fence): the faults did not bite")
    if bad or b["over"] or h.failures or h.probe_failures:
        status = 1
    print(f"\nnetfault: {'FAILED' if status else 'ok'}: seed {args.seed}, {elapsed:.0f} s, logs in {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
