"""pottery's Redlock (default settings: 10 s auto-release) over a group of 5 nodes."""

import time

import pytest
import redis
from pottery import Redlock


@pytest.fixture
def clients(redlockd_group):
    cs = [redis.Redis.from_url(u) for u in redlockd_group.urls]
    yield cs
    for c in cs:
        c.close()


def holders(clients, nodes, key):
    return [i for i in nodes if clients[i].exists(key)]


@pytest.mark.redlockd(nodes=5)
def test_quorum_holds_with_one_node_killed_and_one_paused(redlockd_group, clients):
    assert len(redlockd_group.nodes) == 5
    redlockd_group.node(0).kill()
    redlockd_group.node(1).pause()
    lock = Redlock(key="pottery-job", masters=set(clients))
    assert lock.acquire(blocking=False) is True  # 3 of 5
    assert holders(clients, [2, 3, 4], lock.key) == [2, 3, 4]
    redlockd_group.advance(9_000)
    lock.extend()  # back to 10 s on the live nodes
    redlockd_group.advance(9_000)
    assert holders(clients, [2, 3, 4], lock.key) == [2, 3, 4]
    lock.release()
    assert holders(clients, [2, 3, 4], lock.key) == []
    redlockd_group.node(1).resume()
    assert clients[1].ping()


def test_refuses_with_three_nodes_down_until_the_fence_lifts(redlockd_group, clients):
    for i in (0, 1, 2):
        redlockd_group.node(i).kill()
    lock = Redlock(key="pottery-job", masters=set(clients))
    assert lock.acquire(blocking=False) is False  # 2 of 5
    assert holders(clients, [3, 4], lock.key) == []  # the partial lock was undone
    # A crashed node comes back fenced: it still refuses, so still no quorum.
    redlockd_group.node(0).restart()
    assert redlockd_group.node(0).fence_ms > 0
    assert lock.acquire(blocking=False) is False
    redlockd_group.advance(redlockd_group.node(0).fence_ms)
    assert lock.acquire(blocking=False) is True  # 3 of 5: nodes 0, 3, 4
    assert holders(clients, [0, 3, 4], lock.key) == [0, 3, 4]
    lock.release()


def wait_until(pred, timeout=5.0):
    """Bounded poll: pottery returns at quorum; the other nodes' SETs land just after."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.002)
    return False


def test_the_lock_expires_on_every_node_together(redlockd_group, clients):
    lock = Redlock(key="pottery-job", masters=set(clients))
    assert lock.acquire(blocking=False) is True
    assert wait_until(lambda: len(holders(clients, range(5), lock.key)) == 5)
    other = Redlock(key="pottery-job", masters=set(clients))
    redlockd_group.advance(10_000)
    assert other.acquire(blocking=False) is False  # a TTL ends after its last ms
    assert [c.pttl(lock.key) for c in clients] == [0] * 5
    redlockd_group.advance(1)  # one advance moves all five nodes
    assert holders(clients, range(5), lock.key) == []
    assert other.acquire(blocking=False) is True
    other.release()
