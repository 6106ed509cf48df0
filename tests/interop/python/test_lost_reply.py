"""The lost reply: what Python lock libraries (default settings) do when the reply to
their SET NX is lost (the command ran: the lock is taken; the client sees a closed
connection). The faults come from `redlockd harness` (docs/testing.md), driven by the
redlockd Python package from this repository's sources on the binary run.sh tests.
Each case asserts what the library really does."""

import os
import sys
import time

import pytest
import redis
import redis_lock
from pottery import Redlock

from helpers import BIN, KIND

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "packaging", "python", "python"))
import redlockd  # noqa: E402  (the package's sources, not an installed wheel)

pytestmark = pytest.mark.skipif(KIND != "redlockd", reason="needs redlockd harness's scoped faults")


@pytest.fixture
def redlockd_server():
    with redlockd.Server(binary=BIN) as server:
        yield server


@pytest.fixture
def redlockd_cluster():
    with redlockd.Cluster(3, binary=BIN) as cluster:
        yield cluster


def eventually(check, within=5.0):
    """Polls `check` until true (bounded): for what a library does on its threads after
    its call returned."""
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        time.sleep(0.002)
    return check()


def test_redis_py_lock_a_lost_set_nx_reply_leaves_the_lock_stuck_until_its_ttl(redlockd_server):
    """redis-py Lock: the SET NX ran, the caller gets ConnectionError, and the Lock
    object never learns its token: it cannot release what it holds. Nobody can take
    the lock until the TTL runs out (stuck, not double-held)."""
    r = redis.Redis.from_url(redlockd_server.url)
    f = redlockd_server.fault("drop_reply", command="set", key="job", count=1)
    lock = r.lock("job", timeout=10)
    with pytest.raises(redis.exceptions.ConnectionError):
        lock.acquire(blocking=False)
    assert f.fired == 1
    assert lock.local.token is None
    orphan = r.get("job")
    assert orphan is not None and r.pttl("job") == 10_000
    with pytest.raises(redis.exceptions.LockError):
        lock.release()  # "Cannot release an unlocked lock"
    assert not r.lock("job", timeout=10).acquire(blocking=False)
    assert not lock.acquire(blocking=False)  # not even by the same Lock object
    redlockd_server.advance(10_001)
    assert lock.acquire(blocking=False)
    lock.release()
    r.close()


def test_python_redis_lock_recovers_a_lost_set_nx_reply_by_releasing(redlockd_server):
    """python-redis-lock: the lock's id is fixed when the Lock is made, so after the
    ConnectionError the key holds this Lock's id: locked() says so, and release()
    frees it at once (correct recovery, if the caller releases on error)."""
    r = redis.Redis.from_url(redlockd_server.url)
    f = redlockd_server.fault("drop_reply", command="set", key="lock:job", count=1)
    lock = redis_lock.Lock(r, "job", expire=10)
    with pytest.raises(redis.exceptions.ConnectionError):
        lock.acquire(blocking=False)
    assert f.fired == 1
    assert r.get("lock:job") == lock.id.encode()
    assert lock.locked()
    lock.release()
    assert r.exists("lock:job") == 0
    other = redis_lock.Lock(r, "job", expire=10)
    assert other.acquire(blocking=False)
    other.release()
    r.close()


def test_pottery_redlock_one_lost_reply_keeps_quorum_and_releases_every_node(redlockd_cluster):
    """pottery Redlock, 3 nodes, one node's SET NX reply lost: 2 of 3 is a quorum, so
    it holds the lock; release() clears all three, the silent one included. (acquire()
    returns at the quorum: node 0's SET may land just after.)"""
    clients = [redis.Redis.from_url(u) for u in redlockd_cluster.urls]
    f = redlockd_cluster.node(0).fault("drop_reply", command="set", key="redlock:job", count=1)
    lock = Redlock(key="job", masters=set(clients), auto_release_time=10)
    assert lock.acquire(blocking=False) is True
    assert eventually(lambda: f.fired == 1)
    assert [c.pttl("redlock:job") for c in clients] == [10_000] * 3
    lock.release()
    assert [c.exists("redlock:job") for c in clients] == [0, 0, 0]
    for c in clients:
        c.close()


def test_pottery_redlock_two_lost_replies_fail_and_clean_up(redlockd_cluster):
    """Two of three replies lost: no quorum, acquire() returns False, and pottery
    releases on every node, so the keys its lost SETs left are gone at once."""
    clients = [redis.Redis.from_url(u) for u in redlockd_cluster.urls]
    for i in (0, 1):
        redlockd_cluster.node(i).fault("drop_reply", command="set", key="redlock:job", count=1)
    lock = Redlock(key="job", masters=set(clients), auto_release_time=10)
    assert lock.acquire(blocking=False) is False
    assert [f["fired"] for f in redlockd_cluster.faults()] == [1, 1]
    assert [c.exists("redlock:job") for c in clients] == [0, 0, 0]
    assert Redlock(key="job", masters=set(clients), auto_release_time=10).acquire(blocking=False)
    for c in clients:
        c.close()
