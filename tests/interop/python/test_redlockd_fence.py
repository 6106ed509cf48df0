"""redlockd's own promises, seen through unmodified clients: the restart fence
(writes refused with -TRYAGAIN for max-ttl + 1 s after a start with no record) and the
max-TTL rule."""
import pytest
import redis
from pottery import Redlock
from redis.exceptions import TryAgainError

from helpers import advance_clock, redlockd_only, unique

pytestmark = redlockd_only

# --max-ttl 30s, default --restart-delay (max-ttl + 1 s), manual clock.
FENCED = ["--clock", "manual", "--enable-debug-command"]


def fence_text(ms):
    return (
        "restart fence: this node restarted and may have granted locks that are "
        f"still held; it refuses writes for another {ms} ms (its data directory "
        "holds no record of what it granted; a brand-new node is declared with "
        "`redlockd init --dir DIR` before its first start)"
    )


def test_fence_refuses_new_locks_until_max_ttl_passed(spawn, make_client):
    nodes = spawn(5, FENCED)
    clients = [make_client("127.0.0.1", n.port) for n in nodes]
    c = clients[0]
    key = unique("fence")
    assert c.ping() is True
    # redis-py maps a "-TRYAGAIN <text>" reply to TryAgainError("<text>")
    with pytest.raises(TryAgainError) as err:
        c.set(key, b"v", nx=True, px=10000)
    assert str(err.value) == fence_text(31000)
    # reads and releases keep working behind the fence
    assert c.get(key) is None
    assert c.delete(key) == 0
    lock = Redlock(key=key, masters=set(clients))
    assert lock.acquire(blocking=False) is False
    advance_clock(clients, 30000)
    with pytest.raises(TryAgainError) as err:
        c.set(key, b"v", nx=True, px=10000)
    assert str(err.value) == fence_text(1000)
    advance_clock(clients, 1001)
    assert lock.acquire(blocking=False) is True
    assert 9 < lock.locked() < 10
    lock.release()


def test_ttl_above_max_ttl_is_refused(r):
    key = unique("maxttl")
    assert r.set(key, b"v", nx=True, px=30000) is True
    r.delete(key)
    with pytest.raises(redis.ResponseError):
        r.set(key, b"v", nx=True, px=30001)
    assert r.exists(key) == 0
    lock = Redlock(key=key, masters={r}, auto_release_time=31)
    assert lock.acquire(blocking=False) is False
