"""python-redis-lock (redis_lock.Lock) with its defaults: SET NX [EX], release and
reset scripts that LPUSH a signal list, waiters parked in BLPOP on that list."""
import importlib.metadata
import os
import sys
import threading
import time

import pytest
import redis_lock

from helpers import LOG_DIR, advance_clock, expiry, pass_lock_delay, redlockd_only, unique


def test_version():
    assert importlib.metadata.version("python-redis-lock") == "4.0.1"


def test_acquire_release_defaults(r):
    name = unique("prl")
    lock = redis_lock.Lock(r, name)  # expire=None: no TTL
    assert lock.acquire() is True
    assert r.get("lock:" + name) == lock.id.encode()
    assert r.ttl("lock:" + name) == -1
    assert lock.locked() is True
    other = redis_lock.Lock(r, name)
    assert other.acquire(blocking=False) is False
    lock.release()
    assert r.exists("lock:" + name) == 0
    # release leaves exactly one wake-up token on the signal list, with a TTL
    assert r.lrange("lock-signal:" + name, 0, -1) == [b"1"]
    assert 0 < r.pttl("lock-signal:" + name) <= 1000
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()
    assert other.acquire(blocking=False) is True
    other.release()


def test_expire_and_extend(r):
    name = unique("prl")
    lock = redis_lock.Lock(r, name, expire=10)
    assert lock.acquire() is True
    assert 9 <= r.ttl("lock:" + name) <= 10
    lock.extend(20)
    assert 19 <= r.ttl("lock:" + name) <= 20
    lock.extend()
    assert 9 <= r.ttl("lock:" + name) <= 10
    lock.release()
    with pytest.raises(redis_lock.NotAcquired):
        lock.extend()


def test_extend_without_ttl_is_refused(r):
    name = unique("prl")
    lock = redis_lock.Lock(r, name)
    assert lock.acquire() is True
    with pytest.raises(redis_lock.NotExpirable):
        lock.extend(5)  # the script sees TTL -1 and answers 2
    lock.release()


def test_context_manager(r):
    name = unique("prl")
    with redis_lock.Lock(r, name, expire=10):
        assert r.exists("lock:" + name) == 1
    assert r.exists("lock:" + name) == 0


def _wait_blocked(r, thread, result, timeout=3.0):
    """Wait until the server reports a client blocked (in BLPOP)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not thread.is_alive():
            raise AssertionError(f"the waiter stopped before the release: {result}")
        if int(r.info("clients")["blocked_clients"]) >= 1:
            return
        time.sleep(0.005)
    raise AssertionError("the waiter never blocked in BLPOP")


@pytest.mark.parametrize("with_timeout", [False, True], ids=["blocking", "timeout5"])
def test_blocked_waiter_wakes_on_release(r, make_client, nodes, with_timeout):
    name = unique("prl")
    holder = redis_lock.Lock(r, name, expire=10)
    assert holder.acquire() is True
    waiter_client = make_client(*nodes[0])
    waiter = redis_lock.Lock(waiter_client, name, expire=10)
    result = {}

    def wait():
        try:
            if with_timeout:
                result["acquired"] = waiter.acquire(timeout=5)
            else:
                result["acquired"] = waiter.acquire(blocking=True)
            result["at"] = time.monotonic()
        except Exception as e:  # reported by the main thread
            result["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    _wait_blocked(r, t, result)
    assert t.is_alive(), "the waiter got the lock while it was held"
    released_at = time.monotonic()
    holder.release()
    t.join(timeout=5)
    assert not t.is_alive(), "the waiter was not woken by the release within 5 s"
    assert result.get("acquired") is True, result
    latency_ms = (result["at"] - released_at) * 1000
    line = (f"python-redis-lock wake-up latency ({'timeout=5' if with_timeout else 'blocking'}): "
            f"{latency_ms:.1f} ms (release -> waiter acquired)")
    sys.stderr.write("\n" + line + "\n")
    with open(os.path.join(LOG_DIR, "latency.txt"), "a") as f:
        f.write(line + "\n")
    assert latency_ms < 1000, line
    assert r.get("lock:" + name) == waiter.id.encode()
    waiter.release()


def _waiter_gives_up(r, waiter_client, name, on_blocked=None):
    holder = redis_lock.Lock(r, name, expire=10)
    assert holder.acquire() is True
    waiter = redis_lock.Lock(waiter_client, name, expire=10)
    result = {}

    def wait():
        t0 = time.monotonic()
        try:
            result["acquired"] = waiter.acquire(timeout=1)  # BLPOP signal 1
        except Exception as e:  # reported by the main thread
            result["error"] = f"{type(e).__name__}: {e}"
        result["waited"] = time.monotonic() - t0

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    if on_blocked is not None:
        _wait_blocked(r, t, result)
        on_blocked()
    t.join(timeout=5)
    assert not t.is_alive(), "BLPOP with a 1 s timeout did not return within 5 s"
    assert result.get("acquired") is False, result
    holder.release()
    return result["waited"]


def test_waiter_with_timeout_gives_up_real_clock(spawn, make_client):
    # What users run: a node on the real clock (redlockd: --restart-delay 0 only).
    node = spawn(1, ["--restart-delay", "0"])[0]
    r = make_client("127.0.0.1", node.port)
    waited = _waiter_gives_up(r, make_client("127.0.0.1", node.port), unique("prl"))
    assert 0.9 <= waited < 3, waited


@redlockd_only
def test_waiter_timeout_follows_the_manual_clock(r, make_client, nodes):
    # With --clock manual, BLPOP's timeout runs on the server clock: it fires when
    # DEBUG CLOCK ADVANCE passes it, not by wall time.
    def advance():
        advance_clock([r], 1001)

    waited = _waiter_gives_up(r, make_client(*nodes[0]), unique("prl"), on_blocked=advance)
    assert waited < 1, waited


@redlockd_only
@expiry
def test_expiry_lets_another_in(r):
    name = unique("prl")
    holder = redis_lock.Lock(r, name, expire=10)
    assert holder.acquire() is True
    other = redis_lock.Lock(r, name, expire=10)
    assert other.acquire(blocking=False) is False
    advance_clock([r], 10001)
    assert r.exists("lock:" + name) == 0
    pass_lock_delay([r], lambda: other.acquire(blocking=False) is False)
    assert other.acquire(blocking=False) is True
    with pytest.raises(redis_lock.NotAcquired):
        holder.release()
    other.release()


def test_reset_all_uses_keys(r):
    names = [unique("prl") for _ in range(3)]
    locks = [redis_lock.Lock(r, n) for n in names]
    for lock in locks:
        assert lock.acquire() is True
    bystander = unique("bystander")
    r.set(bystander, b"x")
    redis_lock.reset_all(r)
    for n in names:
        assert r.exists("lock:" + n) == 0
        assert r.lrange("lock-signal:" + n, 0, -1) == [b"1"]
        assert 0 < r.ttl("lock-signal:" + n) <= 1
    assert r.get(bystander) == b"x"
    assert r.keys("lock:interop:prl:*") == []
    r.delete(bystander)


def test_reset_one(r):
    name = unique("prl")
    lock = redis_lock.Lock(r, name)
    assert lock.acquire() is True
    redis_lock.Lock(r, name).reset()
    assert r.exists("lock:" + name) == 0
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()
