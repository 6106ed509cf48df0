"""limits (the rate limiter behind Flask-Limiter and SlowAPI) with its defaults, on
RedisStorage: a fixed window (INCRBY + EXPIRE), a moving window (a Lua script over a
list with EXPIRE) and a sliding window counter (a Lua script, counters with a TTL of
twice the window).

A 60 s window stores keys with a 60 s TTL, and the sliding window counter keys with
120 s: the nodes started with redlockd's default flags (run.sh's INTEROP_DEFAULT_NODES)
must accept them. The shared nodes' --max-ttl of 30 s refuses them, which is what
a too-low default would do to every user of this library."""
import importlib.metadata
import os

import pytest
from limits import parse, storage, strategies

from helpers import KIND, advance_clock, parse_nodes, redlockd_only, unique

DEFAULT_NODES = parse_nodes(os.environ.get("INTEROP_DEFAULT_NODES", ""))

STRATEGIES = {
    "fixed": strategies.FixedWindowRateLimiter,
    "moving": strategies.MovingWindowRateLimiter,
    "sliding": strategies.SlidingWindowCounterRateLimiter,
}


def test_version():
    assert importlib.metadata.version("limits") == "5.8.0"


@pytest.fixture
def default_node(make_client):
    assert DEFAULT_NODES, "INTEROP_DEFAULT_NODES must name a node with default flags"
    host, port = DEFAULT_NODES[0]
    return host, port, make_client(host, port)


def _limiter(kind, host, port):
    store = storage.RedisStorage(f"redis://{host}:{port}")
    return STRATEGIES[kind](store)


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_sixty_second_window_on_default_flags(kind, default_node):
    host, port, r = default_node
    limiter = _limiter(kind, host, port)
    per_minute = parse("10/minute")
    who = unique(f"limits-{kind}")
    for i in range(10):
        assert limiter.hit(per_minute, who) is True, f"hit {i + 1} of 10 refused"
    assert limiter.hit(per_minute, who) is False
    assert limiter.test(per_minute, who) is False
    stats = limiter.get_window_stats(per_minute, who)
    assert stats.remaining == 0
    # The window's keys carry the library's TTLs, untouched by the server.
    keys = r.keys(f"LIMITS:*{who}*")
    assert keys, "the limiter stored no key"
    longest = 120_000 if kind == "sliding" else 60_000
    for key in keys:
        ttl = r.pttl(key)
        assert longest - 5_000 < ttl <= longest, f"{key!r} has PTTL {ttl}"
    # Another identity has its own window.
    assert limiter.hit(per_minute, unique(f"limits-{kind}")) is True


@redlockd_only
def test_fixed_window_opens_again_when_the_server_clock_passes_it(nodes, make_client):
    # The fixed window lives as long as its key's TTL on the server: move the node's
    # manual clock past it and the next hit starts a new window.
    host, port = nodes[0]
    r = make_client(host, port)
    limiter = _limiter("fixed", host, port)
    window = parse("3 per 20 seconds")
    who = unique("limits-fixed-clock")
    assert [limiter.hit(window, who) for _ in range(4)] == [True, True, True, False]
    advance_clock([r], 19_000)
    assert limiter.hit(window, who) is False
    advance_clock([r], 1_001)
    assert limiter.hit(window, who) is True
    assert limiter.get_window_stats(window, who).remaining == 2


@pytest.mark.skipif(KIND != "redlockd", reason="redlockd's --max-ttl; Redis has no such bound")
def test_a_window_above_max_ttl_is_refused_with_the_flag_named(nodes):
    # The shared nodes run with --max-ttl 30s: a 60 s window is refused, loudly, with
    # the flag to raise, rather than stored with a shorter TTL.
    host, port = nodes[0]
    limiter = _limiter("fixed", host, port)
    with pytest.raises(Exception) as err:
        limiter.hit(parse("10/minute"), unique("limits-maxttl"))
    assert "above this server's max-ttl of 30000 ms (raise --max-ttl)" in str(err.value)
