"""redis-py's RedisCluster with its defaults, given one seed address, against a 3-node
redlockd cluster (cluster mode `map`, started by run.sh): keys over every node,
transactions on hash-tagged keys, cross-slot refusals, and its Lock."""
import os

import pytest
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException, ResponseError

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
