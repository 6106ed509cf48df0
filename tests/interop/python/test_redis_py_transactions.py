"""redis-py transactions with default settings (issue 9): pipeline() sends MULTI ...
EXEC (transaction=True is its default), transaction() retries a WATCHed function until
EXEC succeeds. RESP3 (redis-py 8's default) and RESP2; the same cases run against
redis-server, so every expected value here is what Redis 7 gives."""
import threading

import pytest
from redis.exceptions import ResponseError, WatchError

from helpers import unique


@pytest.fixture
def other(nodes, make_client):
    """A second client on the same node, to interfere."""
    host, port = nodes[0]
    return make_client(host, port)


def test_pipeline_is_a_transaction_by_default(client):
    key, counter = unique("tx"), unique("tx")
    with client.pipeline() as pipe:
        pipe.set(key, "a", nx=True, px=30000)
        pipe.incr(counter)
        pipe.incr(counter)
        pipe.get(key)
        pipe.pexpire(counter, 30000)
        assert pipe.execute() == [True, 1, 2, b"a", True]
    assert client.get(counter) == b"2"
    assert 0 < client.pttl(counter) <= 30000
    client.delete(key, counter)


def test_pipeline_runtime_error_is_that_commands_reply_and_the_rest_run(client):
    key, after = unique("tx"), unique("tx")
    with client.pipeline() as pipe:
        pipe.set(key, "x")
        pipe.lpush(key, "y")  # WRONGTYPE at EXEC time, not at queue time
        pipe.set(after, "ran")
        results = pipe.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], ResponseError)
    assert str(results[1]) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert results[2] is True
    assert client.get(after) == b"ran"
    with client.pipeline() as pipe:
        pipe.lpush(key, "y")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            pipe.execute()  # raise_on_error=True, the default
    client.delete(key, after)


def test_pipeline_queue_error_aborts_everything(client):
    key = unique("tx")
    with client.pipeline() as pipe:
        pipe.set(key, "must-not-be-written")
        pipe.execute_command("NOSUCHCOMMAND", "x")
        pipe.set(key, "nor-this")
        with pytest.raises(ResponseError) as err:
            pipe.execute()
    # redis-py raises the queue-time error it collected (EXEC answered EXECABORT)
    assert "unknown command 'NOSUCHCOMMAND'" in str(err.value)
    assert client.exists(key) == 0
    with client.pipeline() as pipe:
        pipe.set(key, "v")
        pipe.execute_command("GET")  # wrong arity: refused when queued
        with pytest.raises(ResponseError, match="wrong number of arguments for 'get' command"):
            pipe.execute()
    assert client.exists(key) == 0


def test_pipeline_eval_runs_at_exec(client):
    key = unique("tx")
    release = "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end"
    with client.pipeline() as pipe:
        pipe.set(key, "token", px=30000)
        pipe.eval(release, 1, key, "other")
        pipe.eval(release, 1, key, "token")
        pipe.exists(key)
        assert pipe.execute() == [True, 0, 1, 0]


def test_watch_conflict_raises_watch_error(client, other):
    key = unique("tx")
    client.set(key, "1")
    with client.pipeline() as pipe:
        pipe.watch(key)
        assert pipe.get(key) == b"1"  # immediate mode after WATCH
        pipe.multi()
        pipe.set(key, "from-transaction")
        other.set(key, "from-other")  # touches the watched key before EXEC
        with pytest.raises(WatchError):
            pipe.execute()
    assert client.get(key) == b"from-other"
    # an untouched watch commits; UNWATCH (reset) forgets it
    with client.pipeline() as pipe:
        pipe.watch(key)
        pipe.multi()
        pipe.set(key, "committed")
        assert pipe.execute() == [True]
    assert client.get(key) == b"committed"
    client.delete(key)


def test_transaction_retries_after_a_conflict(client, other):
    key = unique("tx")
    client.set(key, "10")
    calls = []

    def increment(pipe):
        value = int(pipe.get(key))
        calls.append(value)
        if len(calls) == 1:
            other.incr(key)  # the first attempt loses: EXEC answers null, redis-py retries
        pipe.multi()
        pipe.set(key, value + 1)

    assert client.transaction(increment, key) == [True]
    assert calls == [10, 11]
    assert client.get(key) == b"12"
    client.delete(key)


def test_transaction_increments_under_contention_never_lose_one(nodes, make_client):
    key = unique("tx")
    host, port = nodes[0]
    threads, each = 4, 40
    clients = [make_client(host, port) for _ in range(threads)]
    clients[0].set(key, "0")
    attempts = [0] * threads
    errors = []

    def work(i):
        def increment(pipe):
            attempts[i] += 1
            value = int(pipe.get(key))
            pipe.multi()
            pipe.set(key, value + 1)

        try:
            for _ in range(each):
                clients[i].transaction(increment, key)
        except Exception as e:  # reported below; a thread's exception is otherwise lost
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=50)
    assert not any(t.is_alive() for t in ts), "a transaction() loop did not finish"
    assert errors == []
    assert clients[0].get(key) == str(threads * each).encode()
    assert sum(attempts) >= threads * each
    clients[0].delete(key)
