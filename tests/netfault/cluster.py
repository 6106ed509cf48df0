"""The cluster run of the network-fault battery (docs/netfault.md, "Operator actions").

Three redlockd nodes in map mode (docs/cluster.md) on the hosts n1..n3, one Redis
Cluster that the clients take as one Redlock vote (`netfault_client --cluster`: the
crate's cluster client loads the slot map and follows MOVED). Every lock key carries
the hash tag {nfc}, so all of them live in one slot, and the operator moves that slot
while the clients contend for the locks: live (`redlockd slots move`, also with the
old owner cut off from the clients or its packets delayed), taken over from a killed
owner (the next map pushed to the nodes still up, the old owner restarted with its
saved map), with a bystander down during the push (restarted with its old map), a
node restarted with another --max-ttl, and the whole cluster switched to one node in
emulated mode and back to a map (a mode change is a move). Network faults on the
slot's owner (partition, kill -9) mix in. The harness's checkers read the histories.

`--cluster-unsafe keys,fence|fence|confirm` starts the nodes with
REDLOCKD_TEST_CLUSTER_UNSAFE (src/cluster/mod.rs): the protection named is off, and the
checkers must then find violations.
"""

import json
import os
import signal
import subprocess
import time

import netns

NODES = ["n1", "n2", "n3"]
TAG = "nfc"
UNSAFE_ENV = "REDLOCKD_TEST_CLUSTER_UNSAFE"  # src/cluster/mod.rs: UNSAFE_TEST_ENV
MAX_TTLS = ["2s", "3s"]  # a max-ttl restart switches a node between these

# Every operator action and fault the cluster run draws from.
ACTIONS = ["move-live", "move-part", "move-delay", "move-dead", "down-push",
           "max-ttl", "mode-switch", "part-owner", "kill9-owner", "takeover-part"]
# Named with --cluster-actions only (not in the default schedule).
EXTRA_ACTIONS = []
# The nodes' --cluster-node-timeout (their default): a takeover's fence adds it.
NODE_TIMEOUT_S = 5
# The actions that show each protection off (the default schedule with it off).
UNSAFE_ACTIONS = {
    "keys,fence": ["move-live", "move-live", "move-part", "move-delay", "move-live"],
    "fence": ["move-dead"] * 5,
    "confirm": ["move-dead"] * 3,
}


def crc16(data):
    """CRC16-XMODEM, Redis Cluster's key hash."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    s = key.find("{")
    if s >= 0:
        e = key.find("}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key.encode()) % 16384


SLOT = key_slot("{" + TAG + "}")


def node_id(node):
    return f"{NODES.index(node) + 1:040x}"


class ClusterRun:
    """One cluster run on the harness `h` (its network, processes and checkers)."""

    def __init__(self, h, port):
        self.h = h
        self.port = port
        self.mode = {n: "map" for n in NODES}   # the mode each node runs in
        self.max_ttl = {n: MAX_TTLS[0] for n in NODES}
        self.up = set()
        self.version = 0
        self.ops = []  # what the operator did, for the log and results.json

    # --- nodes ----------------------------------------------------------------------

    def addr(self, n):
        return f"{self.h.net.ip(n)}:{self.port}"

    def start(self, n, map_file=None):
        self.h.start_node(n, max_ttl=self.max_ttl[n],
                          cluster=(self.mode[n], node_id(n), map_file))
        self.up.add(n)

    def kill(self, n, sig=signal.SIGKILL):
        self.up.discard(n)
        if sig == signal.SIGKILL:
            self.h.expected_dead.add(n)
            os.kill(self.h.procs[n].pid, signal.SIGKILL)
            self.h.procs[n].wait(5)
        else:
            self.h.stop(n, sig, wait=10)

    def call(self, n, *cmd, timeout=2.0):
        return self.h.node_call(n, *cmd, timeout=timeout)

    def info(self, n):
        text = self.call(n, "INFO", "cluster")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def getmap(self, n):
        return json.loads(self.call(n, "CLUSTER", "GETMAP"))

    def owner(self, m):
        for node in m["nodes"]:
            if any(a <= SLOT <= b for a, b in node["slots"]):
                return NODES[int(node["id"], 16) - 1]
        return None

    def current_map(self):
        """The newest map any node that is up serves."""
        best = None
        for n in sorted(self.up):
            if self.mode[n] != "map":
                continue
            try:
                m = self.getmap(n)
            except (OSError, RuntimeError, ConnectionError, ValueError):
                continue
            if best is None or m["version"] > best["version"]:
                best = m
        return best

    def map_v(self, version, owners):
        """A map at `version`; `owners`: node -> its slot ranges [a, b]."""
        return {"version": version,
                "nodes": [{"id": node_id(n), "host": self.h.net.ip(n), "port": self.port,
                           "slots": owners.get(n, [])} for n in NODES]}

    def split_map(self, version, slot_owner):
        """Slots in three even ranges, except `SLOT`, which `slot_owner` serves."""
        base = {"n1": (0, 5460), "n2": (5461, 10922), "n3": (10923, 16383)}
        owners = {n: [] for n in NODES}
        for n, (a, b) in base.items():
            for lo, hi in ((a, SLOT - 1), (SLOT + 1, b)) if a <= SLOT <= b else ((a, b),):
                if lo <= hi:
                    owners[n].append([lo, hi])
        owners[slot_owner].append([SLOT, SLOT])
        for n in owners:
            owners[n].sort()
        return self.map_v(version, owners)

    def setmap(self, n, m):
        return self.call(n, "CLUSTER", "SETMAP", json.dumps(m), "FORCE", timeout=10.0)

    def push(self, m, nodes, first):
        """`m` pushed to those of `nodes` that are up, `first` first; returns the
        refusals (a node that still serves an older map where it owns the slot tries
        to move it, and the new owner, which has `m` already, refuses)."""
        refused = []
        for n in [first] + [n for n in nodes if n != first]:
            if n in self.up:
                try:
                    self.setmap(n, m)
                except (OSError, RuntimeError, ConnectionError) as e:
                    refused.append(f"{n}: {e}")
        return refused

    def ready(self, timeout=20.0):
        """Until every node that is up serves the same map, confirmed (or serves
        emulated), with no fenced slot, and the lock slot's owner takes a write. A node
        left on an older map would serve slots another node serves too: after the
        timeout that is a failure of the run, with each node's version."""
        seen = {}

        def ok():
            try:
                versions = set()
                for n in self.up:
                    i = self.info(n)
                    seen[n] = (i.get("cluster_map_version"), i.get("cluster_map_confirmed"),
                               i.get("cluster_slots_fenced"))
                    if self.mode[n] == "map":
                        versions.add(i.get("cluster_map_version"))
                    if i.get("cluster_map_confirmed", "1") != "1" or i.get("cluster_slots_fenced", "0") != "0":
                        return False
                if len(versions) > 1:
                    return False
                m = self.current_map()
                o = self.owner(m) if m else next(iter(self.up))
                return self.call(o, "SET", "{" + TAG + "}:ready", "1", "PX", "100") == "OK"
            except (OSError, RuntimeError, ConnectionError, ValueError):
                return False
        if not netns.wait_until(ok, timeout, 0.1):
            state = ", ".join(f"{n}: map v{v} confirmed {c} fenced slots {f}"
                              for n, (v, c, f) in sorted(seen.items()))
            raise RuntimeError(f"cluster not ready after {timeout:.0f} s (the same map, confirmed, "
                               f"unfenced, on every node up): {state}")

    def slots_move(self, to, seed):
        """`redlockd slots move` of the lock slot to `to`, run on the storage host.
        Returns (exit status, output)."""
        argv = [self.h.args.redlockd, "slots", "move", "--slots", str(SLOT),
                "--to", self.addr(to), "--seed", self.addr(seed)]
        r = subprocess.run(self.h.net.exec_argv(self.h.STORAGE, argv), capture_output=True,
                           text=True, timeout=60)
        out = (r.stdout + r.stderr).strip().replace("\n", " | ")
        self.ops.append({"t": time.monotonic_ns(), "op": "slots move", "to": to,
                         "status": r.returncode, "out": out})
        return r.returncode, out

    # --- the run ----------------------------------------------------------------------

    def boot(self):
        for n in NODES:
            self.h.set_clock(n, "+0")
            self.start(n)
        self.version = 1
        m = self.split_map(1, self.h.rng.choice(NODES))

        def pushed():
            try:
                for n in NODES:
                    if self.setmap(n, m) != "OK":
                        return False
                return True
            except (OSError, RuntimeError, ConnectionError):
                return False
        if not netns.wait_until(pushed, 20, 0.2):
            raise RuntimeError("could not push the first map")
        served = self.call(NODES[0], "CLUSTER", "KEYSLOT", "{" + TAG + "}:nf:mutex:tok")
        if served != SLOT:
            raise RuntimeError(f"the harness hashes the lock keys to slot {SLOT}, the node to {served}")
        self.ready()

    def action(self, kind, dur, rng):
        """One operator action or fault, `dur` seconds of it; returns its description."""
        m = self.current_map()
        o = self.owner(m)
        others = [n for n in NODES if n != o]
        rng.shuffle(others)
        t = others[0]
        h = self.h
        h.fault_rng = rng  # the delayers' seeds
        if kind == "move-live":
            # the slot moves away and back while the clients contend
            st, out = self.slots_move(t, o)
            time.sleep(dur / 2)
            st2, out2 = self.slots_move(o, t)
            time.sleep(dur / 2)
            return f"slots move {SLOT} {o}->{t} (exit {st}: {out[:160]}) and back (exit {st2})"
        if kind in ("move-part", "move-delay"):
            if kind == "move-part":
                # the owner cut off from the clients (not from the other nodes, the
                # operator or the storage) while its slot moves
                h.partition([[o] + NODES + [h.STORAGE], [n for n in NODES if n != o] + h.CLIENT_HOSTS + [h.STORAGE]])
                how = f"{o} cut off from the clients"
                names = []
            else:
                for c in h.CLIENT_HOSTS:
                    h.queue.setdefault(c, {})[o] = 1
                names = h.start_delayers(h.CLIENT_HOSTS, 1, 20, 60)
                h.apply_net()
                how = f"packets to {o} held 20-80 ms"
            time.sleep(dur / 3)
            st, out = self.slots_move(t, o)
            time.sleep(dur * 2 / 3)
            h.reset_net_state()
            h.apply_net()
            for n in names:
                h.stop(n)
            return f"{how}, slots move {SLOT} {o}->{t} (exit {st}: {out[:160]})"
        if kind == "move-dead":
            # kill -9 of the owner; at once the next map, giving the slot to t, pushed
            # to the nodes still up (a takeover: t fences the slot for o's published
            # max-ttl + 1 s). o restarts with its saved map, which it must confirm
            # before it serves; once its restart fence is over, t is cut off from the
            # clients for a second, so they reload the slot map from whichever node
            # answers first, o among them.
            self.kill(o)
            self.version = m["version"] + 1
            nm = self.split_map(self.version, t)
            refused = self.push(nm, [n for n in NODES if n != o], t)
            self.ops.append({"t": time.monotonic_ns(), "op": "takeover", "from": o, "to": t,
                             "version": self.version, "refused": refused})
            time.sleep(dur / 3)
            self.start(o)
            time.sleep(int(self.max_ttl[o][:-1]) + 1.2)
            h.partition([[t] + NODES + [h.STORAGE], [n for n in NODES if n != t] + h.CLIENT_HOSTS + [h.STORAGE]])
            time.sleep(1.0)
            h.reset_net_state()
            h.apply_net()
            time.sleep(dur / 3)
            return (f"kill -9 {o} (owner), map v{self.version} gives slot {SLOT} to {t} on the nodes up"
                    + (f" (refused: {refused})" if refused else "")
                    + f", {o} restarted with its saved map, {t} cut off from the clients for 1 s")
        if kind == "down-push":
            # a bystander is down while the slot moves live; it restarts with its old map
            b = others[1]
            self.kill(b)
            st, out = self.slots_move(t, o)
            time.sleep(dur)
            self.start(b)
            return f"kill -9 {b}, slots move {SLOT} {o}->{t} (exit {st}: the push to {b} fails), {b} restarted with its old map"
        if kind == "max-ttl":
            n = rng.choice([o, t])
            self.max_ttl[n] = MAX_TTLS[1] if self.max_ttl[n] == MAX_TTLS[0] else MAX_TTLS[0]
            self.kill(n, signal.SIGTERM)
            self.start(n)
            time.sleep(dur)
            return f"{n} restarted (SIGTERM) with --max-ttl {self.max_ttl[n]}"
        if kind == "mode-switch":
            # map -> one node in emulated mode: every slot moved live to `t`, the others
            # stopped, t restarted emulated; then back: t restarted in map mode with a
            # newer map that gives the slot to a node that gained it from t's released
            # slots (fenced for t's max-ttl + 1 s), the others started with it too
            r = subprocess.run(h.net.exec_argv(h.STORAGE, [
                h.args.redlockd, "slots", "move", "--slots", "0-16383",
                "--to", self.addr(t), "--seed", self.addr(t)]),
                capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"mode-switch: move to {t}: {r.stdout} {r.stderr}")
            rest = [n for n in NODES if n != t]
            for n in rest + [t]:
                self.kill(n, signal.SIGTERM)
            self.mode[t] = "emulated"
            self.start(t)
            self.ready()
            time.sleep(dur / 2)
            back = rng.choice(rest)
            self.version = self.getmap_version_of_saved(t) + 1
            nm = self.split_map(self.version, back)
            path = os.path.join(h.run_dir, f"map-v{self.version}.json")
            with open(path, "w") as f:
                json.dump(nm, f)
            self.kill(t, signal.SIGTERM)
            self.mode[t] = "map"
            for n in NODES:
                self.start(n, map_file=path)
            time.sleep(dur / 2)
            return f"every slot moved to {t}, {rest} stopped, {t} emulated; then map v{self.version} (slot {SLOT} on {back}) on all three"
        if kind == "takeover-part":
            # the owner cut off from everything (clients, nodes, the operator); the
            # next map, giving the slot to t, pushed to the others (a takeover: t
            # fences the slot for o's max-ttl + 1 s + the node timeout); past the
            # fence the partition heals: o, never restarted, stopped serving when its
            # lease ran out (no majority), and learns the newer map from the others
            h.partition([[o], [n for n in NODES if n != o] + h.CLIENT_HOSTS + [h.STORAGE]])
            self.version = m["version"] + 1
            nm = self.split_map(self.version, t)
            refused = self.push(nm, [n for n in NODES if n != o], t)
            self.ops.append({"t": time.monotonic_ns(), "op": "takeover", "from": o, "to": t,
                             "version": self.version, "refused": refused})
            time.sleep(int(self.max_ttl[o][:-1]) + 1.5 + NODE_TIMEOUT_S)
            h.reset_net_state()
            h.apply_net()
            # clients reload the map from whichever node answers first, o among them
            h.partition([[t] + NODES + [h.STORAGE], [n for n in NODES if n != t] + h.CLIENT_HOSTS + [h.STORAGE]])
            time.sleep(1.0)
            h.reset_net_state()
            h.apply_net()
            time.sleep(dur / 2)
            try:
                stale = (f"v{self.getmap(o)['version']}, a write to the slot there: "
                         + str(self.call(o, "SET", "{" + TAG + "}:probe", "1", "PX", "100")))
            except (OSError, RuntimeError, ConnectionError, ValueError) as e:
                stale = f"{e}"
            return (f"{o} (owner) cut off from everything, map v{self.version} gives slot {SLOT} to {t} on the others"
                    + (f" (refused: {refused})" if refused else "")
                    + f", healed after the fence; {t} cut off from the clients for 1 s; {o} now serves map {stale}")
        if kind == "part-owner":
            h.partition([[o], [n for n in NODES if n != o] + h.CLIENT_HOSTS + [h.STORAGE]])
            time.sleep(dur)
            return f"{o} (owner) cut off from everything"
        if kind == "kill9-owner":
            self.kill(o)
            time.sleep(dur)
            self.start(o)
            return f"kill -9 {o} (owner), restarted after {dur:.0f} s"
        raise ValueError(kind)

    def getmap_version_of_saved(self, n):
        """The version of the map saved in n's data directory (0: none)."""
        try:
            with open(os.path.join(self.h.run_dir, n, "cluster-map.json")) as f:
                return int(json.load(f)["version"])
        except (OSError, ValueError, KeyError, TypeError):
            return self.version
