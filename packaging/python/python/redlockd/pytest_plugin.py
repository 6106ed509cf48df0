"""The pytest plugin (entry point `redlockd`, or `-p redlockd` with plugin autoload
off): fixtures that start redlockd test nodes on a manual clock."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from ._harness import Group, Server

MARKER = "redlockd"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("redlockd", "redlockd test nodes")
    group.addoption(
        "--redlockd-bin",
        action="store",
        default=None,
        help="redlockd binary for the redlockd fixtures (default: $REDLOCKD_BIN, else the installed one)",
    )
    group.addoption(
        "--redlockd-log",
        action="store",
        default=None,
        help="log filter of the redlockd nodes, on stderr (default: warn)",
    )
    parser.addini("redlockd_bin", "redlockd binary for the redlockd fixtures", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(nodes=5, max_ttl=None, restart_delay=None, require_ttl=False, requirepass=None, "
        "seed=None): options of the redlockd fixtures this test uses",
    )


def _binary(config: pytest.Config) -> str | None:
    return config.getoption("--redlockd-bin") or config.getini("redlockd_bin") or None


def _marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    if marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only (nodes=5, max_ttl='10s', ...)")
    return dict(marker.kwargs)


@pytest.fixture
def redlockd_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., Group]]:
    """Starts harnesses: `redlockd_factory(max_ttl="10s")` -> Server (one node),
    `redlockd_factory(nodes=3, ...)` -> Group. All stop at the end of the test."""
    started: list[Group] = []
    config = request.config

    def start(nodes: int | None = None, **options: Any) -> Group:
        options.setdefault("binary", _binary(config))
        log = config.getoption("--redlockd-log")
        if log:
            options.setdefault("log", log)
        harness: Group = Server(**options) if nodes is None else Group(nodes, **options)
        started.append(harness)
        return harness

    try:
        yield start
    finally:
        for h in started:
            h.close()


@pytest.fixture
def redlockd_server(request: pytest.FixtureRequest, redlockd_factory: Callable[..., Group]) -> Server:
    """One redlockd node on its own manual clock (options: @pytest.mark.redlockd)."""
    options = _marker_options(request)
    options.pop("nodes", None)
    server = redlockd_factory(**options)
    assert isinstance(server, Server)
    return server


@pytest.fixture
def redlockd_group(request: pytest.FixtureRequest, redlockd_factory: Callable[..., Group]) -> Group:
    """N redlockd nodes (default 5) on one manual clock (options: @pytest.mark.redlockd)."""
    options = _marker_options(request)
    return redlockd_factory(options.pop("nodes", 5), **options)


@pytest.fixture
def redlockd_cluster(redlockd_group: Group) -> Group:
    """The old name of `redlockd_group` (before "cluster" was kept for Redis Cluster)."""
    return redlockd_group
