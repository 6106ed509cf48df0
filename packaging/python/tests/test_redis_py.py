"""redis-py against the redlockd_server fixture: TTLs follow the manual clock."""

import asyncio
import datetime as dt
import time

import pytest
import redis
import redis.asyncio

import redlockd


@pytest.fixture
def r(redlockd_server):
    client = redis.Redis.from_url(redlockd_server.url)
    yield client
    client.close()


def test_lock_with_10s_ttl_expires_after_advance_without_sleeping(redlockd_server, r):
    t0 = time.monotonic()
    lock = r.lock("job", timeout=10)
    assert lock.acquire(blocking=False)
    other = r.lock("job", timeout=10)
    assert not other.acquire(blocking=False)
    redlockd_server.advance(10_001)
    assert r.exists("job") == 0
    assert other.acquire(blocking=False)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()
    other.release()
    # Ten seconds of lock time took no ten seconds of test time.
    assert time.monotonic() - t0 < 5


def test_lock_still_held_a_millisecond_before_its_ttl(redlockd_server, r):
    lock = r.lock("job", timeout=10)
    assert lock.acquire(blocking=False)
    redlockd_server.advance(9_999)
    assert r.pttl("job") == 1
    assert not r.lock("job", timeout=10).acquire(blocking=False)
    redlockd_server.advance(dt.timedelta(milliseconds=1))
    assert r.pttl("job") == 0  # as in Redis, a key outlives its last millisecond
    redlockd_server.advance(1)
    assert r.exists("job") == 0


def test_the_clock_stands_still_until_moved(redlockd_server, r):
    r.set("k", "v", px=500)
    before = r.time()
    assert r.pttl("k") == 500
    assert r.time() == before
    reading = redlockd_server.advance(250)
    assert r.pttl("k") == 250
    assert reading.wall_ms[0] == before[0] * 1000 + before[1] // 1000 + 250


def test_wall_jumps_move_time_not_ttls(redlockd_server, r):
    r.set("k", "v", px=10_000)
    start = r.time()[0]
    redlockd_server.jump_wall(-3_600_000)
    assert r.time()[0] == start - 3600
    assert r.pttl("k") == 10_000
    redlockd_server.set_wall(dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc))
    assert r.time()[0] == int(dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc).timestamp())
    assert r.pttl("k") == 10_000


def test_kill_then_restart_raises_the_fence_until_the_clock_passes_it(redlockd_server, r):
    r.set("k", "v")
    redlockd_server.kill()
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(redlockd_server.url).ping()
    assert redlockd_server.restart() == "fence"
    client = redis.Redis.from_url(redlockd_server.url)
    assert client.get("k") is None  # a crash forgets the keys
    # TRYAGAIN (redis-py takes the code off the message)
    with pytest.raises(redis.exceptions.ResponseError, match="restart fence"):
        client.set("k", "v2")
    redlockd_server.advance(redlockd_server.fence_ms)
    assert client.set("k", "v2")
    client.close()


def test_clean_restart_keeps_locks_and_their_ttls(redlockd_server, r):
    r.set("k", "v", px=5_000)
    redlockd_server.advance(1_000)
    assert redlockd_server.restart("clean") == "snapshot"
    client = redis.Redis.from_url(redlockd_server.url)
    assert client.get("k") == b"v"
    assert client.pttl("k") == 4_000
    assert client.set("k2", "v")  # no fence after a clean restart
    client.close()


def test_isolate_and_heal(redlockd_server, r):
    r.set("k", "v")
    redlockd_server.isolate()
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(redlockd_server.url, socket_connect_timeout=5).ping()
    redlockd_server.heal()
    client = redis.Redis.from_url(redlockd_server.url)
    assert client.get("k") == b"v"  # a partition keeps the node's memory
    client.close()


@pytest.mark.redlockd(max_ttl="5s", require_ttl=True)
def test_marker_options_reach_the_server(redlockd_server, r):
    with pytest.raises(redis.exceptions.ResponseError):
        r.set("k", "v")  # no TTL: refused with --require-ttl
    with pytest.raises(redis.exceptions.ResponseError):
        r.set("k", "v", px=5_001)  # past --max-ttl
    assert r.set("k", "v", px=5_000)


def test_async_client_with_awaitable_controls(redlockd_server):
    async def main():
        client = redis.asyncio.Redis.from_url(redlockd_server.url)
        assert await client.set("k", "v", px=1_000, nx=True)
        # A waiter blocked on the server wakes when the server's clock passes its
        # timeout, not by wall time.
        waiter = asyncio.ensure_future(client.blpop(["queue"], timeout=2))
        await asyncio.sleep(0.01)
        await redlockd_server.aio.advance(1_001)
        assert await client.exists("k") == 0
        await redlockd_server.aio.advance(1_000)
        assert await asyncio.wait_for(waiter, 5) is None
        await client.aclose()

    asyncio.run(main())


def test_bad_requests_get_errors_and_the_harness_keeps_running(redlockd_server, r):
    with pytest.raises(redlockd.RedlockdError, match="unknown op"):
        redlockd_server.request("frobnicate")
    with pytest.raises(redlockd.RedlockdError, match="out of range"):
        redlockd_server.request("kill", node=1)
    with pytest.raises(redlockd.RedlockdError, match="never goes back"):
        redlockd_server.request("advance", ms=-1)
    redlockd_server.kill()
    with pytest.raises(redlockd.RedlockdError, match="node 0 is killed"):
        redlockd_server.pause()
    redlockd_server.restart()
    redlockd_server.advance(redlockd_server.fence_ms)
    assert redis.Redis.from_url(redlockd_server.url).set("k", "v")
