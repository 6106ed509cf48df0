#!/usr/bin/env python3
"""Small helpers for run.sh (standard library only, so they run before the venv exists).

    tools.py free-ports N            print N distinct free TCP ports on 127.0.0.1
    tools.py wait-ping HOST:PORT SEC wait until the server answers PING with +PONG
    tools.py wait-closed HOST:PORT SEC wait until nothing accepts on HOST:PORT
"""
import socket
import sys
import time


def free_ports(n):
    """n free ports below the kernel's ephemeral range (32768+ on Linux): a port from
    that range can be handed to one of our own outgoing connections (a readiness ping)
    before the server that was meant to bind it does."""
    import random
    socks, ports = [], []
    try:
        for _ in range(2000):
            if len(ports) == n:
                break
            port = random.randrange(20000, 32000)
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(port)
    finally:
        for s in socks:
            s.close()
    if len(ports) < n:
        raise SystemExit("no free ports")
    return ports


def ping_once(host, port, timeout=0.5):
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(64)
                if not chunk:
                    break
                data += chunk
            return data.startswith(b"+PONG\r\n")
    except OSError:
        return False


def accepts(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def split(addr):
    host, _, port = addr.rpartition(":")
    return host, int(port)


def main(argv):
    if len(argv) >= 2 and argv[1] == "free-ports":
        print(" ".join(str(p) for p in free_ports(int(argv[2]))))
        return 0
    if len(argv) == 4 and argv[1] in ("wait-ping", "wait-closed"):
        host, port = split(argv[2])
        deadline = time.monotonic() + float(argv[3])
        while time.monotonic() < deadline:
            if argv[1] == "wait-ping" and ping_once(host, port):
                return 0
            if argv[1] == "wait-closed" and not accepts(host, port):
                return 0
            time.sleep(0.02)
        print(f"tools.py: {argv[1]} {argv[2]}: gave up after {argv[3]} s", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
