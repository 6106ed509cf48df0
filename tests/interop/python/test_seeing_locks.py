"""Seeing the locks (issue 42) with redis-py's own Lock: LOCKS INFO names the holder,
and a holder paused past its TTL shows up as an overrun after its late release, in
INFO locks and on `redlockd status --json`. redlockd only (LOCKS, DEBUG CLOCK)."""
import json
import subprocess

import pytest
from redis.exceptions import LockNotOwnedError

from helpers import BIN, advance_clock, redlockd_only, unique

pytestmark = redlockd_only


def as_dict(reply):
    """LOCKS INFO's map (RESP3) or flat array (RESP2), as a dict of str keys."""
    if isinstance(reply, list):
        reply = dict(zip(reply[::2], reply[1::2]))
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in reply.items()}


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def overruns(c):
    return int(c.info("locks")["lock_overruns"])


def status_json(nodes):
    out = subprocess.run(
        [BIN, "status", "--json", *[f"{h}:{p}" for h, p in nodes]],
        capture_output=True, timeout=20, check=True, text=True).stdout
    return {n["node"]: n for n in json.loads(out)["nodes"]}


@pytest.mark.parametrize("name", [None, "billing-worker-3"], ids=["no-name", "client-name"])
def test_lock_info_names_the_holder(client, nodes, make_client, name):
    host, port = nodes[0]
    holder = make_client(host, port, client_name=name) if name else client
    key = unique("seen")
    lock = holder.lock(key, timeout=10)
    assert lock.acquire(blocking=False) is True
    # The pool hands the same connection back: its CLIENT INFO is the holder's.
    me = holder.client_info()
    info = as_dict(client.execute_command("LOCKS", "INFO", key))
    assert info["value"] == lock.local.token
    assert 9000 < info["ttl-ms"] <= 10000, info
    assert info["client-id"] == int(me["id"]), (info, me)
    assert text(info["client-addr"]) == me["addr"], (info, me)
    assert text(info["client-name"]) == name
    assert text(info["user"]) == "default"
    assert info["client-connected"] == 1
    assert info["extensions"] == 0
    # A second redis-py Lock refused while it is held is counted on it.
    assert client.lock(key, timeout=10).acquire(blocking=False) is False
    assert as_dict(client.execute_command("LOCKS", "INFO", key))["refused"] == 1
    listed = [as_dict(e) for e in client.execute_command("LOCKS", "LIST", "MATCH", key)]
    assert [text(e["key"]) for e in listed] == [key]
    assert listed[0]["client-id"] == int(me["id"])
    lock.release()
    assert client.execute_command("LOCKS", "INFO", key) is None


def test_paused_holder_is_an_overrun_after_its_late_release(nodes, make_client):
    host, port = nodes[0]
    c = make_client(host, port)
    before = overruns(c)
    before_status = status_json(nodes[:1])[f"{host}:{port}"]["lock_overruns"]
    key = unique("overrun")
    lock = c.lock(key, timeout=1)  # 1 s, PX 1000
    assert lock.acquire(blocking=False) is True
    # The holder "pauses" while the node's clock runs past the TTL.
    advance_clock([c], 1001)
    assert c.execute_command("LOCKS", "INFO", key) is None
    assert overruns(c) == before
    token = lock.local.token
    with pytest.raises(LockNotOwnedError):
        lock.release()  # redis-py's release script, with the token among its arguments
    assert overruns(c) == before + 1
    assert int(c.info("locks")["lock_expired_held"]) >= 1
    node = status_json(nodes[:1])[f"{host}:{port}"]
    assert node["up"] is True
    assert node["lock_overruns"] == before_status + 1, node
    # Counted once: the same late release again is no second overrun.
    with pytest.raises(LockNotOwnedError):
        lock.do_release(token)
    assert overruns(c) == before + 1
