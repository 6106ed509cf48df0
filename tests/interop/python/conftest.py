import redis
import pytest

from helpers import NODES, start_nodes


def pytest_report_header(config):
    from helpers import KIND
    return f"interop target: {KIND} nodes={NODES}"


@pytest.fixture(scope="session")
def nodes():
    assert len(NODES) >= 5, "INTEROP_NODES must list 5 nodes (run through run.sh)"
    return NODES


def _client(host, port, **kw):
    # Defaults on purpose (users do not tune their client for us); hangs are
    # bounded by pytest-timeout (pytest.ini) and by run.sh's outer timeout.
    return redis.Redis(host=host, port=port, **kw)


@pytest.fixture
def make_client():
    made = []

    def make(host, port, **kw):
        c = _client(host, port, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture(params=[None, 2], ids=["default-resp3", "protocol2"])
def client(request, nodes, make_client):
    """redis-py on the first node, once with its defaults (RESP3) and once with RESP2."""
    host, port = nodes[0]
    if request.param is None:
        return make_client(host, port)
    return make_client(host, port, protocol=request.param)


@pytest.fixture
def r(nodes, make_client):
    """redis-py with its defaults (RESP3 via HELLO 3 in redis-py 8) on the first node."""
    host, port = nodes[0]
    return make_client(host, port)


@pytest.fixture
def masters(nodes, make_client):
    """One default redis-py client per shared node."""
    return [make_client(h, p) for h, p in nodes[:5]]


@pytest.fixture
def spawn():
    """Start extra nodes for one case; every one is stopped at teardown."""
    started = []

    def spawn_nodes(n, extra=()):
        ns = start_nodes(n, extra)
        started.extend(ns)
        return ns

    yield spawn_nodes
    for node in started:
        node.stop()
