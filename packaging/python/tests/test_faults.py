"""Scoped faults over the wire (Node.fault): each action fires on the requests in its
scope only, is in force when fault() returns, and is recorded; the history."""

import socket
import threading
import time

import pytest
import redis

import redlockd


def raw(server) -> socket.socket:
    s = socket.create_connection(server.address, timeout=5)
    return s


def send(s: socket.socket, *args: str) -> None:
    out = f"*{len(args)}\r\n".encode()
    for a in args:
        b = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    s.sendall(out)


def until_closed(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += chunk


def plain(server, name=None) -> redis.Redis:
    # No retries: a closed connection is an error the test sees, not a second try.
    return redis.Redis.from_url(server.url, client_name=name, retry=None, retry_on_error=[])


def test_drop_reply_runs_the_command_and_closes_for_its_scope_only(redlockd_server):
    f = redlockd_server.fault("drop_reply", command="set", key="lock:*", client_name="w1", count=1)
    assert f.fired == 0 and f.spec["action"] == "drop_reply"
    w1, w2 = plain(redlockd_server, "w1"), plain(redlockd_server, "w2")
    assert w1.set("other", "1", nx=True)  # another key
    assert w1.get("lock:a") is None  # another command
    assert w2.set("lock:b", "w2", nx=True)  # another client
    with pytest.raises(redis.exceptions.ConnectionError):
        w1.set("lock:a", "w1", nx=True, px=1000)
    assert w2.get("lock:a") == b"w1"  # it ran
    assert w1.set("lock:c", "w1", nx=True)  # count=1: spent
    firing = f.firings[0]
    assert firing["command"] == ["SET", "lock:a", "w1", "NX", "PX", "1000"]
    assert firing["client"]["name"] == "w1"
    assert firing["mono_ms"] == redlockd_server.clock().mono_ms
    assert (f.fired, f.matched) == (1, 2)


@pytest.mark.parametrize("action", ["drop_request", "close_before"])
def test_drop_request_closes_without_running(redlockd_server, action):
    redlockd_server.fault(action, command="set", key="lock:*")
    s = raw(redlockd_server)
    send(s, "INCR", "n")
    send(s, "SET", "lock:a", "x")
    assert until_closed(s) == b":1\r\n"
    r = plain(redlockd_server)
    assert r.exists("lock:a") == 0
    assert r.set("free", "1") is True


def test_close_after_answers_then_closes(redlockd_server):
    redlockd_server.fault("close_after", command="set", key="lock:*")
    s = raw(redlockd_server)
    send(s, "SET", "lock:a", "x")
    assert until_closed(s) == b"+OK\r\n"
    assert plain(redlockd_server).get("lock:a") == b"x"


@pytest.mark.parametrize(
    "action,words",
    [
        ("noscript", "NOSCRIPT No matching script. Please use EVAL."),
        ("tryagain", "TRYAGAIN Multiple keys request during rehashing of slot"),
        ("busy", "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
        ("loading", "LOADING Redis is loading the dataset in memory"),
    ],
)
def test_redis_errors_in_redis_words(redlockd_server, action, words):
    redlockd_server.fault(action, command="get", key="hit", count=1)
    s = raw(redlockd_server)
    send(s, "GET", "miss")
    send(s, "GET", "hit")
    send(s, "GET", "hit")
    want = b"$-1\r\n-" + words.encode() + b"\r\n$-1\r\n"
    got = b""
    while len(got) < len(want):
        got += s.recv(4096)
    assert got == want
    s.close()


def test_an_error_of_the_tests_choosing_is_answered_not_run(redlockd_server):
    r = plain(redlockd_server)
    f = redlockd_server.fault("error", error="ERR injected", command="incrby")  # redis-py sends INCR as INCRBY
    with pytest.raises(redis.exceptions.ResponseError, match="injected"):
        r.incr("n")
    assert r.get("n") is None
    assert r.decr("n") == -1
    f.clear()
    assert r.incr("n") == 0
    with pytest.raises(redlockd.RedlockdError, match="starts with its code"):
        redlockd_server.fault("error", error="no code")


def test_a_delay_on_the_test_clock_holds_one_reply_until_advanced(redlockd_server):
    redlockd_server.fault("delay", ms=5_000, command="set", key="slow:*")
    slow, fast = plain(redlockd_server), plain(redlockd_server)
    done = []
    t = threading.Thread(target=lambda: done.append(slow.set("slow:1", "x")))
    t.start()
    deadline = time.monotonic() + 5
    while fast.get("slow:1") is None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert fast.get("slow:1") == b"x"  # it ran; its reply waits
    assert fast.set("quick", "y")
    time.sleep(0.05)
    assert done == []
    redlockd_server.advance(5_000)
    t.join(5)
    assert done == [True]


def test_a_real_time_delay(redlockd_server):
    redlockd_server.fault("delay", ms=50, clock="real", command="ping")
    r = plain(redlockd_server)
    t0 = time.monotonic()
    assert r.ping()
    assert time.monotonic() - t0 >= 0.05
    assert r.echo("a") == b"a"


def test_client_id_and_addr_scopes(redlockd_server):
    a, b = plain(redlockd_server), plain(redlockd_server)
    redlockd_server.fault("error", error="ERR by id", client_id=a.client_id())
    b_addr = b.client_info()["addr"]
    redlockd_server.fault("error", error="ERR by addr", client_addr=b_addr)
    with pytest.raises(redis.exceptions.ResponseError, match="by id"):
        a.ping()
    with pytest.raises(redis.exceptions.ResponseError, match="by addr"):
        b.ping()
    assert plain(redlockd_server).ping()
    assert len(redlockd_server.faults()) == 2
    assert len(redlockd_server.clear_faults()) == 2
    assert a.ping() and b.ping()


def test_a_fault_acts_on_the_next_command_once_added(redlockd_server):
    r = plain(redlockd_server)
    for i in range(50):
        with redlockd_server.fault("error", error="ERR now", key=f"k{i}", count=1) as f:
            with pytest.raises(redis.exceptions.ResponseError, match="now"):
                r.get(f"k{i}")
            assert f.fired == 1
        assert r.get(f"k{i}") is None  # cleared


def test_seeded_probability_repeats(redlockd_server):
    r = plain(redlockd_server)
    runs = []
    for seed in (5, 5):
        f = redlockd_server.fault("error", error="ERR p", command="incrby", probability=0.5, seed=seed)
        pattern = ""
        for _ in range(30):
            try:
                r.incr("n")
                pattern += "."
            except redis.exceptions.ResponseError:
                pattern += "x"
        assert f.clear()["fired"] == pattern.count("x")
        runs.append(pattern)
    assert runs[0] == runs[1]
    assert 5 <= runs[0].count("x") <= 25


def test_history_records_requests_replies_and_faults(redlockd_group):
    node = redlockd_group.node(1)
    node.record(capacity=100)
    f = node.fault("drop_reply", command="set", key="lock")
    r = plain(node, "me")
    assert r.get("x") is None
    redlockd_group.advance(100)
    with pytest.raises(redis.exceptions.ConnectionError):
        r.set("lock", "me", nx=True)
    h = [e for e in node.history() if e["client"]["name"] == "me"]
    got = [(e["command"], e["reply"], e["outcome"], e["fault"]) for e in h]
    assert got[-2:] == [
        (["GET", "x"], None, "answered", None),
        (["SET", "lock", "me", "NX"], "OK", "reply_dropped", f.id),
    ]
    assert h[-1]["mono_ms"] == h[-2]["mono_ms"] + 100
    assert all(e["node"] == 1 for e in redlockd_group.history())
    assert node.history(take=True) and node.history() == []
