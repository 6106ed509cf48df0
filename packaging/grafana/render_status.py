#!/usr/bin/env python3
"""Draws docs/img/status.svg: what `redlockd status --once` shows for a small deployment.

    packaging/grafana/render_status.py [--bin target/debug/redlockd] [--base-port 17001]
                                       [--out docs/img/status.svg]

Starts a local group of 3 nodes (`redlockd group --nodes 3`, its own temporary data
directory), takes a few locks on every node as lock clients would (a named holder, a
lock others are refused, a holder whose connection closed, a holder that paused past
its 150 ms TTL and released late: an overrun), runs `redlockd status --once` over the
three, and writes its text as an SVG of a terminal (plain <text> lines, monospace).
Python's standard library only; the group is stopped on exit.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from xml.sax.saxutils import escape

RELEASE = ('if redis.call("get",KEYS[1]) == ARGV[1] then '
           'return redis.call("del",KEYS[1]) else return 0 end')


class Conn:
    """One RESP2 connection: send a command, read its reply."""

    def __init__(self, addr):
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValueError(f"unexpected reply {line!r}")

    def call(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._reply()

    def close(self):
        self.sock.close()


def wait_ready(addrs):
    deadline = time.monotonic() + 20
    for addr in addrs:
        while True:
            try:
                c = Conn(addr)
                ok = c.call("SET", "render:probe", "1", "PX", "10")  # no NX: no lock
                c.close()
                if not isinstance(ok, Exception):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit(f"render_status: {addr} did not grant a lock within 20 s")
            time.sleep(0.05)


def take_locks(addrs):
    """The scene: who holds what on each of the nodes."""
    held = []  # connections kept open until the status screen is taken

    def client(addr, name):
        c = Conn(addr)
        c.call("CLIENT", "SETNAME", name)
        held.append(c)
        return c

    for addr in addrs:
        worker = client(addr, "billing-worker-3")
        assert worker.call("SET", "lock:orders:42", "8f9c1c3a0d6e4b21a7c2", "NX", "PX", 30000) == "OK"
        cron = client(addr, "report-cron")
        assert cron.call("SET", "lock:reports:daily", "c7e1d2", "NX", "PX", 20000) == "OK"
        for _ in range(3):  # other workers refused while it is held
            assert cron.call("SET", "lock:orders:42", "a1b2c3", "NX", "PX", 30000) is None
        gone = Conn(addr)  # a holder whose connection closed: an orphan until its TTL
        gone.call("CLIENT", "SETNAME", "import-job-7")
        assert gone.call("SET", "lock:import:batch-9", "5d41402a", "NX", "PX", 25000) == "OK"
        gone.close()
        paused = client(addr, "mailer-1")
        assert paused.call("SET", "lock:mail:outbox", "e99a18c4", "NX", "PX", 150) == "OK"
    time.sleep(0.3)  # mailer-1 "pauses" past its 150 ms TTL, then releases late
    for c in held[2::3]:
        assert c.call("EVAL", RELEASE, 1, "lock:mail:outbox", "e99a18c4") == 0
    return held


def svg(title, lines):
    """A terminal window with `lines` in a monospace font."""
    font, line_h, char_w, pad = 13, 18, 7.8, 16
    cols = max(len(line) for line in [title] + lines)
    width = int(cols * char_w + 2 * pad)
    height = int((len(lines) + 1) * line_h + 2 * pad + 28)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="redlockd status">',
        f'<rect width="{width}" height="{height}" rx="8" fill="#1e1e1e"/>',
        f'<rect width="{width}" height="28" rx="8" fill="#3a3a3a"/>',
        f'<rect y="20" width="{width}" height="8" fill="#3a3a3a"/>',
    ]
    for i, color in enumerate(("#ff5f56", "#ffbd2e", "#27c93f")):
        out.append(f'<circle cx="{18 + 20 * i}" cy="14" r="6" fill="{color}"/>')
    out.append(f'<g font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
               f'font-size="{font}" fill="#d4d4d4" xml:space="preserve">')
    y = 28 + pad + font
    out.append(f'<text x="{pad}" y="{y}" fill="#8ae234">{escape(title)}</text>')
    for line in lines:
        y += line_h
        fill = ' fill="#729fcf"' if line.startswith("NODE") else ""
        out.append(f'<text x="{pad}" y="{y}"{fill}>{escape(line)}</text>')
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(root, "target", "debug", "redlockd"))
    ap.add_argument("--base-port", type=int, default=17001)
    ap.add_argument("--out", default=os.path.join(root, "docs", "img", "status.svg"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        group = subprocess.Popen(
            [args.bin, "group", "--nodes", "3", "--base-port", str(args.base_port),
             "--restart-delay", "0", "--lock-introspection", "yes", "--dir", work],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=dict(os.environ, NO_COLOR="1"), text=True)
        try:
            ready = group.stdout.readline()
            if not ready:
                sys.exit("render_status: the group printed no ready line")
            addrs = [n["addr"] for n in json.loads(ready)["nodes"]]
            wait_ready(addrs)
            held = take_locks(addrs)
            screen = subprocess.run(
                [args.bin, "status", "--once", *addrs], capture_output=True, text=True,
                timeout=30, env=dict(os.environ, NO_COLOR="1"), check=True).stdout
            for c in held:
                c.close()
        finally:
            group.terminate()
            try:
                group.wait(timeout=10)
            except subprocess.TimeoutExpired:
                group.kill()
                group.wait()
    lines = screen.rstrip("\n").split("\n")
    title = "$ redlockd status " + " ".join(addrs) + " --once"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(svg(title, lines))
    print(f"wrote {args.out} ({len(lines)} lines)")


if __name__ == "__main__":
    main()
