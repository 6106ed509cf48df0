"""redis-py's RedisCluster with its defaults, given one seed address, against a 3-node
redlockd cluster (cluster mode `map`, started by run.sh): keys over every node,
transactions on hash-tagged keys, cross-slot refusals, and its Lock, also held across a
live slot move (`redlockd slots move`, the binary named by INTEROP_REDLOCKD)."""
import os
import subprocess

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import MovedError, RedisClusterException, ResponseError

SEEDS = [s for s in os.environ.get("INTEROP_CLUSTER_SEEDS", "").split(",") if s]


@pytest.fixture
def rc():
    assert len(SEEDS) == 3, "INTEROP_CLUSTER_SEEDS must list the 3 nodes (run through run.sh)"
    host, port = SEEDS[1].rsplit(":", 1)
    c = RedisCluster(host=host, port=int(port))
    yield c
    c.close()


def test_topology_has_every_node(rc):
    assert sorted(n.name for n in rc.get_primaries()) == sorted(SEEDS)


def test_keys_spread_over_every_node(rc):
    owners = {}
    for i in range(300):
        assert rc.set(f"py:k{i}", i, px=20000)
        owners[rc.get_node_from_key(f"py:k{i}").name] = 1 + owners.get(rc.get_node_from_key(f"py:k{i}").name, 0)
    for i in range(300):
        assert rc.get(f"py:k{i}") == str(i).encode()
    assert sorted(owners) == sorted(SEEDS)
    assert min(owners.values()) > 70


def test_transaction_on_hash_tagged_keys(rc):
    p = rc.pipeline(transaction=True)
    p.set("{py}a", 1, px=10000)
    p.set("{py}b", 2, px=10000)
    p.get("{py}a")
    # What redis-py gives against Redis Cluster 7.0 too.
    assert p.execute() == [b"OK", b"OK", b"1"]


def test_cross_slot_is_refused(rc):
    with pytest.raises(RedisClusterException):
        rc.mget("a", "b")
    node = rc.get_node_from_key("a")
    with pytest.raises(ResponseError, match="Keys in request don't hash to the same slot"):
        rc.execute_command("MSET", "a", "1", "b", "2", target_nodes=node)


def test_lock(rc):
    lock = rc.lock("py:resource", timeout=10, blocking_timeout=1)
    assert lock.acquire()
    other = rc.lock("py:resource", timeout=10, blocking_timeout=0.2)
    assert not other.acquire()
    assert lock.extend(5)
    lock.release()
    assert other.acquire()
    other.release()


def test_lock_held_across_a_live_slot_move(rc):
    """A lock taken with RedisCluster.lock(), its slot moved with `redlockd slots move`
    while held: the holder extends and releases on the new owner, a second client's
    acquire fails throughout, and a stream and a list of the slot move with it."""
    redlockd = os.environ.get("INTEROP_REDLOCKD")
    assert redlockd, "INTEROP_REDLOCKD must name the redlockd binary (run through run.sh)"
    name = "py:moving"
    lock = rc.lock(name, timeout=20, blocking_timeout=1)
    assert lock.acquire()
    events, items = "{py:moving}:events", "{py:moving}:items"
    rc.xadd(events, {"e": "started"}, id="1-1")
    rc.rpush(items, "a", "b")
    slot = rc.keyslot(name)
    old = rc.get_node_from_key(name).name
    new = next(s for s in SEEDS if s != old)
    out = subprocess.run(
        [redlockd, "slots", "move", "--slots", str(slot), "--to", new, "--seed", old],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"moved slots {slot} from {old}" in out.stdout, out.stdout
    assert ": 3 keys" in out.stdout, out.stdout
    # The old owner sends clients on; the new one has the lock with its value.
    host, port = old.rsplit(":", 1)
    with pytest.raises(MovedError, match=f"^{slot} {new}$"):
        redis.Redis(host=host, port=int(port)).get(name)
    host, port = new.rsplit(":", 1)
    direct = redis.Redis(host=host, port=int(port))
    assert direct.get(name) == lock.local.token
    # The holder extends through the client (which follows MOVED to the new owner).
    assert lock.extend(10)
    assert 20000 < direct.pttl(name) <= 30000
    other = rc.lock(name, timeout=20, blocking_timeout=0.2)
    assert not other.acquire()
    assert rc.get_node_from_key(name).name == new
    lock.release()
    assert direct.exists(name) == 0
    assert rc.xrange(events) == [(b"1-1", {b"e": b"started"})]
    assert rc.lrange(items, 0, -1) == [b"a", b"b"]
    assert other.acquire()
    other.release()
    rc.delete(events, items)
