"""redis-py's own Lock (redis.lock.Lock), default settings, RESP3 and RESP2."""
import threading
import time

import pytest
import redis
from redis.exceptions import LockNotOwnedError, LockError

from helpers import advance_clock, expiry, pass_lock_delay, redlockd_only, unique


def test_default_client_negotiates_resp3_with_hello(r):
    assert redis.__version__.startswith("8."), redis.__version__
    conn = r.connection_pool.get_connection()
    try:
        assert conn.protocol == 3
        hello = conn.handshake_metadata
        assert hello is not None, "redis-py 8 should have sent HELLO 3"
        proto = hello.get(b"proto", hello.get("proto"))
        assert proto == 3, hello
    finally:
        r.connection_pool.release(conn)
    assert r.ping() is True


def test_protocol2_client_does_not_send_hello(nodes, make_client):
    host, port = nodes[0]
    c = make_client(host, port, protocol=2)
    assert c.ping() is True
    conn = c.connection_pool.get_connection()
    try:
        assert conn.handshake_metadata is None
    finally:
        c.connection_pool.release(conn)


def test_acquire_and_release_with_defaults(client):
    name = unique("rpy")
    lock = client.lock(name)  # timeout=None: no expiry, as the default
    assert lock.acquire() is True
    assert lock.locked() is True
    assert lock.owned() is True
    token = client.get(name)
    assert token == lock.local.token
    assert client.pttl(name) == -1
    lock.release()
    assert lock.locked() is False
    assert client.exists(name) == 0
    with pytest.raises(LockError):
        lock.release()


def test_acquire_with_timeout_sets_px(client):
    name = unique("rpy")
    lock = client.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    pttl = client.pttl(name)
    assert 9000 < pttl <= 10000, pttl
    lock.release()
    assert client.exists(name) == 0


def test_extend_adds_to_ttl_and_reacquire_resets_it(client):
    name = unique("rpy")
    lock = client.lock(name, timeout=10)
    assert lock.acquire() is True
    assert lock.extend(5) is True
    pttl = client.pttl(name)
    assert 14000 < pttl <= 15000, pttl
    assert lock.extend(3, replace_ttl=True) is True
    pttl = client.pttl(name)
    assert 2000 < pttl <= 3000, pttl
    assert lock.reacquire() is True
    pttl = client.pttl(name)
    assert 9000 < pttl <= 10000, pttl
    lock.release()
    assert client.exists(name) == 0


def test_context_manager(client):
    name = unique("rpy")
    with client.lock(name, timeout=10) as lock:
        assert lock.owned() is True
        assert client.exists(name) == 1
    assert client.exists(name) == 0


def test_contention_nonblocking_second_lock_fails(client):
    name = unique("rpy")
    first = client.lock(name, timeout=10)
    second = client.lock(name, timeout=10)
    assert first.acquire() is True
    assert second.acquire(blocking=False) is False
    assert second.owned() is False
    assert second.locked() is True
    with pytest.raises(LockError):
        second.release()
    # the failed attempt did not disturb the holder
    assert client.get(name) == first.local.token
    first.release()
    assert second.acquire(blocking=False) is True
    second.release()


def test_contention_blocking_timeout_gets_lock_after_release(client):
    name = unique("rpy")
    first = client.lock(name, timeout=10)
    assert first.acquire() is True
    result = {}

    def waiter():
        second = client.lock(name, timeout=10)
        t0 = time.monotonic()
        try:
            result["acquired"] = second.acquire(blocking_timeout=5)
            result["waited"] = time.monotonic() - t0
            result["owned"] = second.owned()
            if result["acquired"]:
                second.release()
        except Exception as e:  # reported by the main thread
            result["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=waiter)
    t.start()
    # A negative check: redis-py's blocking acquire polls on the wall clock, and a
    # wrongful grant needs time to show.
    time.sleep(0.05)
    assert t.is_alive(), "the waiter should still be blocked while the lock is held"
    first.release()
    t.join(timeout=10)
    assert not t.is_alive()
    assert result.get("acquired") is True, result
    assert result["owned"] is True
    assert result["waited"] < 2, result


def test_blocking_timeout_gives_up(client):
    name = unique("rpy")
    first = client.lock(name, timeout=10)
    assert first.acquire() is True
    second = client.lock(name, timeout=10, sleep=0.05)
    t0 = time.monotonic()
    assert second.acquire(blocking_timeout=0.2) is False
    assert time.monotonic() - t0 < 2
    first.release()


def test_release_of_someone_elses_lock_is_refused(client):
    name = unique("rpy")
    lock = client.lock(name, timeout=10)
    assert lock.acquire() is True
    client.set(name, b"someone-else", px=10000)
    with pytest.raises(LockNotOwnedError):
        lock.release()
    assert client.get(name) == b"someone-else"
    client.delete(name)


@redlockd_only
@expiry
def test_expiry_lets_another_client_in(client):
    name = unique("rpy")
    first = client.lock(name, timeout=10)
    second = client.lock(name, timeout=10)
    assert first.acquire() is True
    advance_clock([client], 9999)
    assert client.pttl(name) == 1
    assert second.acquire(blocking=False) is False
    advance_clock([client], 2)
    assert client.exists(name) == 0
    pass_lock_delay([client], lambda: second.acquire(blocking=False) is False)
    assert second.acquire(blocking=False) is True
    # The first holder finds out it lost the lock.
    with pytest.raises(LockNotOwnedError):
        first.extend(5)
    with pytest.raises(LockNotOwnedError):
        first.reacquire()
    with pytest.raises(LockNotOwnedError):
        first.release()
    assert second.owned() is True
    second.release()


def test_noscript_fallback_after_script_flush(client):
    name = unique("rpy")
    lock = client.lock(name, timeout=10)
    assert lock.acquire() is True
    assert lock.extend(1) is True  # loads the extend script
    shas = [type(lock).lua_release.sha, type(lock).lua_extend.sha, type(lock).lua_reacquire.sha]
    assert client.script_flush() is True
    assert client.script_exists(*shas) == [False, False, False]
    # EVALSHA now answers NOSCRIPT; redis-py loads the script and retries.
    assert lock.extend(1) is True
    assert lock.reacquire() is True
    lock.release()
    assert client.exists(name) == 0
    assert client.script_exists(*shas) == [True, True, True]
