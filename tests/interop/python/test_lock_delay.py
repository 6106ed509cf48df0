"""redlockd's --lock-delay seen through unmodified clients: a holder stopped with
SIGSTOP past its TTL, and resumed within the delay, finds that nobody took its lock
meanwhile (redis-py Lock, pottery Redlock on 5 nodes, `redlockd lock`); with the delay
off the same contender is granted at once, as against Redis. Nodes of their own on the
manual clock: the pause is a SIGSTOP while the clock moves past the TTL."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from pottery import Redlock

from helpers import BIN, advance_clock, redlockd_only, unique

pytestmark = redlockd_only

MANUAL = ["--clock", "manual", "--enable-debug-command", "--restart-delay", "0"]
DELAYS = [("5s", True), ("0", False)]
IDS = ["lock-delay-5s", "lock-delay-off"]

# The holder: takes the lock, says so, then (stopped and resumed by the test) waits for
# "go", reads the key and releases, printing what it saw.
HOLDER = textwrap.dedent(
    """
    import sys, redis
    from pottery import Redlock
    kind, key, ports = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3].split(",")]
    clients = [redis.Redis(port=p) for p in ports]
    if kind == "redis-py":
        lock = clients[0].lock(key, timeout=1)
    else:
        lock = Redlock(key=key, masters=set(clients), auto_release_time=1)
    assert lock.acquire(blocking=False)
    print("acquired", flush=True)
    sys.stdin.readline()
    print("value", clients[0].get(key), flush=True)
    try:
        lock.release()
        print("released", flush=True)
    except Exception as e:
        print("release failed", type(e).__name__, flush=True)
    """
)


def start_holder(kind, key, nodes):
    ports = ",".join(str(n.port) for n in nodes)
    p = subprocess.Popen([sys.executable, "-c", HOLDER, kind, key, ports],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "acquired"
    return p


def finish_holder(p):
    out, _ = p.communicate("go\n", timeout=20)
    assert p.returncode == 0, out
    return out


@pytest.mark.parametrize("delay,delayed", DELAYS, ids=IDS)
@pytest.mark.parametrize("kind", ["redis-py", "pottery"])
def test_a_paused_holder_finds_its_lock_not_taken(kind, delay, delayed, spawn, make_client):
    nodes = spawn(5, MANUAL + ["--lock-delay", delay])
    clients = [make_client("127.0.0.1", n.port) for n in nodes]
    key = unique("lockdelay")
    holder = start_holder(kind, key, nodes)
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        # The holder is stopped past its 1 s TTL.
        advance_clock(clients, 1500)
        if kind == "redis-py":
            contender = clients[0].lock(key, timeout=1)
        else:
            contender = Redlock(key=key, masters=set(clients), auto_release_time=1)
        granted = contender.acquire(blocking=False)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    out = finish_holder(holder)
    if not delayed:
        # As against Redis: the expired lock goes to the next client at once, and the
        # resumed holder overlaps it without knowing.
        assert granted is True
        contender.release()
        return
    assert granted is False, "a client was granted the lock while its holder was paused"
    # The resumed holder sees no value (its lock expired) and its release finds nothing;
    # nobody else holds it either.
    if kind == "redis-py":
        assert "value None" in out, out
    assert "release failed" in out, out
    assert contender.acquire(blocking=False) is False
    assert clients[0].get(key) is None
    # The delay ends 5 s after the deadline (the TTL ran out 500 ms ago).
    advance_clock(clients, 4500)
    assert contender.acquire(blocking=False) is False
    advance_clock(clients, 1)
    assert contender.acquire(blocking=False) is True
    contender.release()


@pytest.mark.parametrize("delay,delayed", DELAYS, ids=IDS)
def test_redlockd_lock_paused_runner(delay, delayed, spawn, make_client):
    nodes = spawn(5, MANUAL + ["--lock-delay", delay])
    clients = [make_client("127.0.0.1", n.port) for n in nodes]
    addrs = ",".join(f"127.0.0.1:{n.port}" for n in nodes)
    key = unique("lockdelay-cli")
    runner = subprocess.Popen([BIN, "lock", "--nodes", addrs, "--ttl", "2s", "-v", key, "--",
                               "sleep", "30"], stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        line = runner.stderr.readline()
        assert "acquired" in line, line
        os.kill(runner.pid, signal.SIGSTOP)
        try:
            advance_clock(clients, 2500)
            contender = subprocess.run([BIN, "lock", "--nodes", addrs, "--ttl", "2s", key, "--",
                                        "true"], capture_output=True, text=True, timeout=20)
        finally:
            os.kill(runner.pid, signal.SIGCONT)
        if delayed:
            # 75: held elsewhere. Nobody was granted the lock of the stopped runner.
            assert contender.returncode == 75, contender.stderr
        else:
            assert contender.returncode == 0, contender.stderr
        # The resumed runner's next extension finds its lock gone: 74 (lock lost).
        assert runner.wait(timeout=30) == 74
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(timeout=10)
