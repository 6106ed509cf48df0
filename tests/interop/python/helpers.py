"""Shared plumbing for the Python interop cases: where the nodes are, what kind of
server they are, and how to start (and always stop) extra nodes a case needs.

run.sh sets:
  INTEROP_SERVER      "redlockd" or "redis"
  INTEROP_SERVER_BIN  the server binary (redlockd, or redis-server)
  INTEROP_NODES       comma-separated host:port of the 5 shared nodes
  INTEROP_LOG_DIR     where extra nodes write their logs
  INTEROP_LOCK_DELAY_MS  the shared nodes' --lock-delay in ms: unset (0) in the first
                      pass; run.sh's second pass runs the `expiry` cases again on nodes
                      started with --lock-delay 5s and sets it to 5000
"""
import os
import socket
import subprocess
import time
import uuid

import pytest

KIND = os.environ.get("INTEROP_SERVER", "redlockd")
BIN = os.environ.get("INTEROP_SERVER_BIN", "")
LOG_DIR = os.environ.get("INTEROP_LOG_DIR", "/tmp")


def parse_nodes(text):
    nodes = []
    for item in text.split(","):
        item = item.strip()
        if item:
            host, _, port = item.rpartition(":")
            nodes.append((host, int(port)))
    return nodes


NODES = parse_nodes(os.environ.get("INTEROP_NODES", ""))
LOCK_DELAY_MS = int(os.environ.get("INTEROP_LOCK_DELAY_MS", "0"))
if LOCK_DELAY_MS and KIND != "redlockd":
    raise RuntimeError("INTEROP_LOCK_DELAY_MS is redlockd's --lock-delay; Redis has none")

# Cases that move the server's clock with DEBUG CLOCK ADVANCE (or need other
# redlockd-only behaviour) run only against redlockd; real Redis has no such thing.
redlockd_only = pytest.mark.skipif(
    KIND != "redlockd", reason="needs redlockd (DEBUG CLOCK / restart fence); real Redis lacks it"
)


# The cases where a lock expires and a second client then acquires it. run.sh runs them
# twice: on the shared nodes, and on nodes started with --lock-delay 5s (`-m expiry`).
expiry = pytest.mark.expiry


def pass_lock_delay(clients, refused):
    """Call when a lock's TTL has just run out (the clocks at its deadline + 1 ms).
    With the shared nodes' lock-delay on (INTEROP_LOCK_DELAY_MS), checks that
    `refused()` holds from then through the delay's last millisecond, then moves the
    clocks past it; with it off (Redis, and the first pass) does nothing."""
    if not LOCK_DELAY_MS:
        return
    assert refused(), "the expired lock was granted at once, during the lock-delay"
    advance_clock(clients, LOCK_DELAY_MS - 1)
    assert refused(), "the expired lock was granted in the lock-delay's last millisecond"
    advance_clock(clients, 1)


def unique(prefix):
    """A fresh key name per case, so cases never see each other's keys."""
    return f"interop:{prefix}:{uuid.uuid4().hex[:12]}"


def advance_clock(clients, ms):
    """Move the manual clock of every given node forward by `ms` milliseconds."""
    for c in clients:
        reply = c.execute_command("DEBUG", "CLOCK", "ADVANCE", str(ms))
        assert reply in (b"OK", "OK", True), f"DEBUG CLOCK ADVANCE replied {reply!r}"


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ping(port, timeout=0.5):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def server_command(port, extra=()):
    if KIND == "redlockd":
        # Each node its own data directory: two nodes cannot share one (--dir's lock).
        cmd = [BIN, "--bind", "127.0.0.1", "--port", str(port), "--max-ttl", "30s",
               "--dir", os.path.join(LOG_DIR, f"dir-{port}")]
        cmd += list(extra) if extra else [
            "--restart-delay", "0", "--clock", "manual", "--enable-debug-command"]
        return cmd
    return [BIN, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
            "--appendonly", "no", "--daemonize", "no"]


class Node:
    """One extra server process owned by a test; stop() is idempotent and bounded."""

    def __init__(self, port, extra=()):
        if not BIN:
            raise RuntimeError("INTEROP_SERVER_BIN is not set (run through run.sh)")
        self.port = port
        self.log_path = os.path.join(LOG_DIR, f"extra-node-{port}.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, NO_COLOR="1")  # plain logs
        self.proc = subprocess.Popen(server_command(port, extra), stdout=self.log, env=env,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # run.sh stops anything listed here that is still running when it exits
        # (a runner killed by its timeout skips fixture teardown).
        with open(os.path.join(LOG_DIR, "extra-pids"), "a") as f:
            f.write(f"{self.proc.pid}\n")

    def wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server on {self.port} exited with {self.proc.returncode}; "
                                   f"see {self.log_path}")
            if _ping(self.port):
                return
            time.sleep(0.005)
        raise RuntimeError(f"server on {self.port} did not answer PING within {timeout} s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


def start_nodes(n, extra=()):
    nodes = [Node(p, extra) for p in free_ports(n)]
    try:
        for node in nodes:
            node.wait_ready()
    except Exception:
        for node in nodes:
            node.stop()
        raise
    return nodes
