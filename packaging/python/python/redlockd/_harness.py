"""A client of `redlockd harness` (docs/testing.md): start it, read its ready line, send
it requests, stop it. One harness is one process running all of its nodes."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import selectors
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Literal, Sequence, Union

from ._find import find_redlockd_bin

Millis = Union[int, _dt.timedelta]
Duration = Union[int, str, _dt.timedelta]
RestartMode = Literal["crash", "lose_dir", "clean"]
FaultAction = Literal[
    "delay",
    "error",
    "noscript",
    "tryagain",
    "busy",
    "loading",
    "drop_reply",
    "drop_request",
    "close_before",
    "close_after",
]

#: How long a request may take before the harness is taken for hung.
REQUEST_TIMEOUT = 30.0


class RedlockdError(Exception):
    """The harness answered a request with an error (the message is its text)."""


class RedlockdStartError(RuntimeError):
    """The harness did not become ready."""


def _ms(value: Millis, what: str) -> int:
    if isinstance(value, _dt.timedelta):
        return value // _dt.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: milliseconds as an int, or a timedelta, not {value!r}")
    return value


def _duration_flag(value: Duration) -> str:
    if isinstance(value, str):
        return value
    return f"{_ms(value, 'duration')}ms"


def _unix_ms(value: int | _dt.datetime) -> int:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return round(value.timestamp() * 1000)
    return _ms(value, "set_wall")


@dataclass(frozen=True)
class ClockReading:
    """The shared monotonic reading and each node's wall time (Unix ms)."""

    mono_ms: int
    wall_ms: tuple[int, ...]


class _Pipe:
    """The harness's stdout, read line by line with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buf = b""
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)

    def readline(self, timeout: float) -> bytes | None:
        """One line without its newline; None at the end of output."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                raise TimeoutError(f"no line from redlockd harness within {timeout} s")
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def close(self) -> None:
        self._sel.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Closes stdin (the harness stops at its end) and waits, bounded; then kills."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()


class Fault:
    """A fault scoped to a command, key or client of one node (`Node.fault`). It was
    in force on the node when `Node.fault` returned. Its counters are read from the
    harness each time: `fired`, `matched`, `firings`. A `with` block clears it at the
    end."""

    def __init__(self, node: "Node", info: dict[str, Any]) -> None:
        self.node = node
        #: The fault's id on its node.
        self.id: int = info["fault"]
        #: The fault as the harness took it (action, scope, count...).
        self.spec: dict[str, Any] = info

    def status(self) -> dict[str, Any]:
        """The fault now: its spec, `matched`, `fired` and `firings` (each with the
        `command` as sent, the `client` `{"id", "name", "addr"}`, and `mono_ms`,
        `wall_ms` on the test clock). Raises RedlockdError once cleared."""
        for f in self.node.faults():
            if f["fault"] == self.id:
                return f
        raise RedlockdError(f"node {self.node.index} has no fault {self.id} (cleared)")

    @property
    def fired(self) -> int:
        """How many times it fired."""
        return int(self.status()["fired"])

    @property
    def matched(self) -> int:
        """How many requests were in its scope (the skipped ones included)."""
        return int(self.status()["matched"])

    @property
    def firings(self) -> list[dict[str, Any]]:
        """Its firings, oldest first (the last 1000)."""
        return list(self.status()["firings"])

    def clear(self) -> dict[str, Any]:
        """Removes it (no request sees it once this returns); returns its last status."""
        return self.node._op("clear_fault", fault=self.id)

    def __enter__(self) -> "Fault":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.node._harness.running:
            try:
                self.clear()
            except RedlockdError:
                pass  # already cleared

    def __repr__(self) -> str:
        return f"<redlockd fault {self.id} on node {self.node.index}: {self.spec['action']}>"


def _fault_fields(
    action: FaultAction,
    command: str | None,
    key: str | None,
    client_name: str | None,
    client_id: int | None,
    client_addr: str | None,
    count: int | None,
    skip: int | None,
    probability: float | None,
    seed: int | None,
    ms: Millis | None,
    clock: Literal["manual", "real"] | None,
    error: str | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {"action": action}
    for name, value in (
        ("command", command),
        ("key", key),
        ("client_name", client_name),
        ("client_id", client_id),
        ("client_addr", client_addr),
        ("count", count),
        ("skip", skip),
        ("probability", probability),
        ("seed", seed),
        ("clock", clock),
        ("error", error),
    ):
        if value is not None:
            fields[name] = value
    if ms is not None:
        fields["ms"] = _ms(ms, "fault")
    return fields


class Node:
    """One node of a harness: its address and its faults."""

    def __init__(self, harness: "Group", info: dict[str, Any]) -> None:
        self._harness = harness
        self.index: int = info["index"]
        self.host: str = info["host"]
        self.port: int = info["port"]
        #: `redis://host:port`, for any Redis client.
        self.url: str = info["url"]
        #: The data directory (a temporary one unless `dir` was given).
        self.dir: str | None = info.get("dir")

    @property
    def address(self) -> tuple[str, int]:
        """`(host, port)`."""
        return (self.host, self.port)

    @property
    def addr(self) -> str:
        """`host:port`."""
        return f"{self.host}:{self.port}"

    def _op(self, op: str, **fields: Any) -> dict[str, Any]:
        return self._harness.request(op, node=self.index, **fields)

    def kill(self) -> None:
        """The process dies: connections dropped, the port refuses connections."""
        self._op("kill")

    def restart(self, mode: RestartMode = "crash") -> str:
        """Restarts the node: "crash" (keys lost, restart fence up), "lose_dir" (its
        data directory lost too) or "clean" (SIGTERM and back: keys and TTLs kept).
        A killed node comes back ("crash" or "lose_dir"). Returns how it booted:
        "fence", "snapshot" or "fresh"."""
        return str(self._op("restart", mode=mode)["boot"])

    def pause(self) -> None:
        """Like SIGSTOP: connections stay open, nothing is answered."""
        self._op("pause")

    def resume(self) -> None:
        """Ends a pause, once the node has run what arrived meanwhile."""
        self._op("resume")

    def isolate(self) -> None:
        """A partition: connections dropped and refused; the node keeps its keys."""
        self._op("isolate")

    def heal(self) -> None:
        """Ends a partition."""
        self._op("heal")

    def jump_wall(self, ms: Millis) -> None:
        """Steps this node's wall time only (TIME, EXPIRETIME); TTLs do not move."""
        self._op("jump_wall", ms=_ms(ms, "jump_wall"))

    def set_wall(self, when: int | _dt.datetime) -> None:
        """Sets this node's wall time only (Unix ms or a datetime)."""
        self._op("set_wall", unix_ms=_unix_ms(when))

    def fault(
        self,
        action: FaultAction,
        *,
        command: str | None = None,
        key: str | None = None,
        client_name: str | None = None,
        client_id: int | None = None,
        client_addr: str | None = None,
        count: int | None = None,
        skip: int | None = None,
        probability: float | None = None,
        seed: int | None = None,
        ms: Millis | None = None,
        clock: Literal["manual", "real"] | None = None,
        error: str | None = None,
    ) -> Fault:
        """Adds a fault scoped to requests of this node; in force when this returns.

        Scope (every one given must hold): `command` ("set", "evalsha",
        "script|load"), `key` (a glob one of the request's keys matches),
        `client_name`, `client_id`, `client_addr` ("127.0.0.1:51234"). It fires on a
        request in scope after the first `skip`, at most `count` times, with
        `probability` (drawn from a generator seeded with `seed`: a run repeats).

        Actions: "drop_reply" (the command runs; its reply is lost and the connection
        closed), "drop_request" or "close_before" (closed; the command does not run),
        "close_after" (runs, answered, then closed), "delay" (`ms` on the test clock,
        or real time with clock="real"), "error" (answers `error`, e.g. "ERR boom",
        without running), "noscript", "tryagain", "busy", "loading" (Redis's words).
        """
        fields = _fault_fields(
            action, command, key, client_name, client_id, client_addr,
            count, skip, probability, seed, ms, clock, error,
        )
        return Fault(self, self._op("fault", **fields))

    def faults(self) -> list[dict[str, Any]]:
        """The faults set on this node, oldest first, with their firings."""
        return list(self._op("faults"))

    def clear_faults(self) -> list[dict[str, Any]]:
        """Removes every fault of this node; returns them as they were."""
        return list(self._op("clear_faults"))

    def record(self, capacity: int = 10_000) -> None:
        """Records every request and reply on this node from now on (the last
        `capacity`; 0 stops and forgets)."""
        self._op("record", capacity=capacity)

    def history(self, take: bool = False) -> list[dict[str, Any]]:
        """What was recorded, oldest first: `{"seq", "client", "command", "reply",
        "outcome", "fault", "mono_ms"}`. A reply is a string, a number, null, a list,
        or `{"error": text}`; outcome is "answered", "refused" (a fault's error),
        "reply_dropped" or "not_run". `take` empties the record."""
        return list(self._op("history", take=take))

    def status(self) -> dict[str, Any]:
        """`{"index", "port", "state", "fence_ms", "wall_ms"}` as the harness sees it."""
        return self._harness.request("nodes")[self.index]

    @property
    def state(self) -> str:
        """"up", "paused", "isolated" or "killed"."""
        return str(self.status()["state"])

    @property
    def fence_ms(self) -> int:
        """How long the restart fence still refuses writes, in ms."""
        return int(self.status()["fence_ms"])

    def __repr__(self) -> str:
        return f"<redlockd node {self.index} {self.url}>"


class Group:
    """N nodes on one manual clock, in one `redlockd harness` process.

    Started when made; `close()` (or leaving a `with` block) stops it, and so does the
    end of this Python process, whatever way it ends (the harness stops when its stdin
    closes).
    """

    def __init__(
        self,
        nodes: int = 5,
        *,
        binary: str | os.PathLike[str] | None = None,
        max_ttl: Duration | None = None,
        restart_delay: Duration | None = None,
        require_ttl: bool = False,
        requirepass: str | None = None,
        seed: int | None = None,
        dir: str | os.PathLike[str] | None = None,
        log: str | None = None,
        extra_args: Sequence[str] = (),
        start_timeout: float = 10.0,
    ) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ValueError(f"nodes must be a whole number, 1 or more, not {nodes!r}")
        self.binary = find_redlockd_bin(binary)
        args = [self.binary, "harness", "--nodes", str(nodes)]
        if max_ttl is not None:
            args += ["--max-ttl", _duration_flag(max_ttl)]
        if restart_delay is not None:
            args += ["--restart-delay", _duration_flag(restart_delay)]
        if require_ttl:
            args.append("--require-ttl")
        if requirepass is not None:
            args += ["--requirepass", requirepass]
        if seed is not None:
            args += ["--seed", str(seed)]
        if dir is not None:
            args += ["--dir", os.fspath(dir)]
        if log is not None:
            args += ["--log", log]
        args += list(extra_args)
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        t0 = time.perf_counter()
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        # Stops the harness if this object is dropped without close(), and at exit.
        self._finalizer = weakref.finalize(self, _stop, self._proc)
        self._out = _Pipe(self._proc)
        try:
            line = self._out.readline(start_timeout)
        except TimeoutError:
            self.close()
            raise RedlockdStartError(f"redlockd harness was not ready within {start_timeout} s") from None
        if line is None:
            code = self._proc.wait(timeout=10)
            self.close()
            raise RedlockdStartError(
                f"redlockd harness exited with status {code} before it was ready (its stderr says why)"
            )
        ready = json.loads(line)
        if not ready.get("ready"):
            self.close()
            raise RedlockdStartError(f"redlockd harness could not start: {ready.get('error')}")
        #: Seconds from spawning the process to its ready line.
        self.start_seconds = time.perf_counter() - t0
        self.ready: dict[str, Any] = ready
        self.pid: int = ready["pid"]
        self.version: str = ready["version"]
        self.nodes: list[Node] = [Node(self, n) for n in ready["nodes"]]

    # -- the protocol -------------------------------------------------------------

    def request(self, op: str, **fields: Any) -> Any:
        """Sends one request and returns its `ok` value; raises RedlockdError with the
        harness's text on an error reply. Safe from several threads."""
        with self._lock:
            if self._closed:
                raise RedlockdError(f"{op}: this redlockd harness is closed")
            self._next_id += 1
            rid = self._next_id
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write(json.dumps({"id": rid, "op": op, **fields}).encode() + b"\n")
                self._proc.stdin.flush()
                line = self._out.readline(REQUEST_TIMEOUT)
            except (BrokenPipeError, TimeoutError) as e:
                raise RedlockdError(f"{op}: the redlockd harness is gone or hung ({e})") from e
            if line is None:
                raise RedlockdError(f"{op}: the redlockd harness exited (status {self._proc.poll()})")
        reply = json.loads(line)
        if reply.get("id") != rid:
            raise RedlockdError(f"{op}: reply out of order: {line!r}")
        if "error" in reply:
            raise RedlockdError(reply["error"])
        return reply["ok"]

    # -- the group ----------------------------------------------------------------

    def node(self, i: int) -> Node:
        return self.nodes[i]

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [n.address for n in self.nodes]

    def clock(self) -> ClockReading:
        return self._reading(self.request("clock"))

    def advance(self, ms: Millis) -> ClockReading:
        """Moves the shared clock forward on every node: TTLs, the restart fence,
        blocking timeouts and TIME. Expired keys are gone when this returns."""
        return self._reading(self.request("advance", ms=_ms(ms, "advance")))

    def jump_wall(self, ms: Millis) -> ClockReading:
        """Steps every node's wall time only; TTLs do not move."""
        return self._reading(self.request("jump_wall", ms=_ms(ms, "jump_wall")))

    def set_wall(self, when: int | _dt.datetime) -> ClockReading:
        """Sets every node's wall time only (Unix ms or a datetime)."""
        return self._reading(self.request("set_wall", unix_ms=_unix_ms(when)))

    def faults(self) -> list[dict[str, Any]]:
        """Every node's faults (each with its `node`)."""
        return list(self.request("faults"))

    def clear_faults(self) -> list[dict[str, Any]]:
        """Removes every fault of every node; returns them as they were."""
        return list(self.request("clear_faults"))

    def record(self, capacity: int = 10_000) -> None:
        """Records every request and reply on every node (see `Node.record`)."""
        self.request("record", capacity=capacity)

    def history(self, take: bool = False) -> list[dict[str, Any]]:
        """Every node's history (each entry with its `node`), node by node."""
        return list(self.request("history", take=take))

    @staticmethod
    def _reading(v: dict[str, Any]) -> ClockReading:
        return ClockReading(int(v["mono_ms"]), tuple(int(w) for w in v["wall_ms"]))

    @property
    def aio(self) -> "AsyncControls":
        """The controls as coroutines (each runs in a worker thread)."""
        return AsyncControls(self)

    # -- lifetime -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        """Stops the harness and its nodes (bounded) and removes their temporary
        directories. Safe to call more than once."""
        with self._lock:
            self._closed = True
        self._finalizer()
        self._out.close()

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<redlockd harness pid {self.pid}: {', '.join(self.urls)}>"


#: The old name of `Group` (before "cluster" was kept for Redis Cluster); still works.
Cluster = Group


class Server(Group):
    """One node on a manual clock; its address and faults are on the object itself."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("nodes", None)
        super().__init__(1, **kwargs)

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def host(self) -> str:
        return self.nodes[0].host

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def address(self) -> tuple[str, int]:
        return self.nodes[0].address

    @property
    def addr(self) -> str:
        return self.nodes[0].addr

    def kill(self) -> None:
        self.nodes[0].kill()

    def restart(self, mode: RestartMode = "crash") -> str:
        return self.nodes[0].restart(mode)

    def pause(self) -> None:
        self.nodes[0].pause()

    def resume(self) -> None:
        self.nodes[0].resume()

    def isolate(self) -> None:
        self.nodes[0].isolate()

    def heal(self) -> None:
        self.nodes[0].heal()

    @property
    def fence_ms(self) -> int:
        return self.nodes[0].fence_ms

    def fault(self, action: FaultAction, **scope: Any) -> Fault:
        """`Node.fault` on this server's node."""
        return self.nodes[0].fault(action, **scope)


class AsyncNodeControls:
    """A node's controls as coroutines."""

    def __init__(self, node: Node) -> None:
        self._node = node

    async def kill(self) -> None:
        await asyncio.to_thread(self._node.kill)

    async def restart(self, mode: RestartMode = "crash") -> str:
        return await asyncio.to_thread(self._node.restart, mode)

    async def pause(self) -> None:
        await asyncio.to_thread(self._node.pause)

    async def resume(self) -> None:
        await asyncio.to_thread(self._node.resume)

    async def isolate(self) -> None:
        await asyncio.to_thread(self._node.isolate)

    async def heal(self) -> None:
        await asyncio.to_thread(self._node.heal)

    async def jump_wall(self, ms: Millis) -> None:
        await asyncio.to_thread(self._node.jump_wall, ms)


class AsyncControls:
    """A harness's controls as coroutines."""

    def __init__(self, group: Group) -> None:
        self._group = group

    def node(self, i: int) -> AsyncNodeControls:
        return AsyncNodeControls(self._group.node(i))

    async def advance(self, ms: Millis) -> ClockReading:
        return await asyncio.to_thread(self._group.advance, ms)

    async def jump_wall(self, ms: Millis) -> ClockReading:
        return await asyncio.to_thread(self._group.jump_wall, ms)

    async def set_wall(self, when: int | _dt.datetime) -> ClockReading:
        return await asyncio.to_thread(self._group.set_wall, when)

    async def request(self, op: str, **fields: Any) -> Any:
        return await asyncio.to_thread(self._group.request, op, **fields)
