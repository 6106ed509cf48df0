"""redlockd for tests: a Redis-compatible lock server on a manual clock, with node
faults, started from Python (`Server`, `Group`) or from pytest fixtures
(`redlockd_server`, `redlockd_group`, `redlockd_factory`; docs/testing.md). `Cluster` and
`redlockd_cluster` are the old names of `Group` and `redlockd_group`, and still work."""

from ._find import RedlockdNotFound, find_redlockd_bin
from ._harness import (
    AsyncControls,
    AsyncNodeControls,
    ClockReading,
    Cluster,
    Fault,
    Group,
    Node,
    RedlockdError,
    RedlockdStartError,
    Server,
)

try:
    from importlib.metadata import version as _version

    __version__ = _version("redlockd")
except Exception:  # not installed as a distribution (a source checkout)
    __version__ = "0+unknown"

__all__ = [
    "AsyncControls",
    "AsyncNodeControls",
    "ClockReading",
    "Cluster",
    "Fault",
    "Group",
    "Node",
    "RedlockdError",
    "RedlockdNotFound",
    "RedlockdStartError",
    "Server",
    "find_redlockd_bin",
    "__version__",
]
