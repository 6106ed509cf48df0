"""python-redis-lock: its auto-renewal thread keeps the lock alive while the server's
clock runs; without it, the same clock steps expire the lock."""

import time

import pytest
import redis
import redis_lock


@pytest.fixture
def r(redlockd_server):
    client = redis.Redis.from_url(redlockd_server.url)
    yield client
    client.close()


def wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return False


def test_auto_renewal_keeps_the_lock_across_clock_steps(redlockd_server, r):
    lock = redis_lock.Lock(r, "renewed", expire=1, auto_renewal=True)
    assert lock.acquire()
    redlockd_server.advance(900)
    assert r.pttl("lock:renewed") == 100
    # The renewal thread extends every 2/3 of expire (real time): the TTL is back to
    # a full second on the server's clock.
    assert wait_until(lambda: r.pttl("lock:renewed") == 1_000), "no renewal within 5 s"
    redlockd_server.advance(900)  # 1.8 s of server time since acquire: held anyway
    assert r.get("lock:renewed") == lock.id.encode()
    lock.release()
    assert r.exists("lock:renewed") == 0


def test_without_renewal_the_same_steps_expire_it(redlockd_server, r):
    lock = redis_lock.Lock(r, "plain", expire=1)
    assert lock.acquire()
    redlockd_server.advance(900)
    assert r.pttl("lock:plain") == 100
    redlockd_server.advance(900)
    assert r.exists("lock:plain") == 0
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()
