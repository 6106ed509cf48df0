#!/usr/bin/env python3
"""Memory per lock, memory given back, idle cost and the hot path,
redlockd and redis-server 7 side by side in one run.

Usage: benches/memory.py [--big N] [--rounds R] [--requests N] [--skip-build] [--binary PATH]
                         [--only size,flush,expiry,idle,ping,rps]
  (release build of redlockd; needs redis-server, redis-cli and redis-benchmark)

Prints, for both servers:
- RSS per lock at 100k, 1M and --big (default 10M) locks: `SET lock:<n> <22-byte value>
  PX 600000`, loaded pipelined (redis-cli --pipe); (RSS loaded - RSS empty) / locks
- RSS after FLUSHALL
- mass expiry: 1M locks of which 500k expire together; when the last of them is gone
  (DBSIZE polled every 20 ms) after their deadline, and RSS a few seconds later
- idle CPU over 10 s with 1M live locks (utime+stime from /proc)
- PING max / p99 latency over 3 s with 1M live locks (one client, a ping every ms)
- redis-benchmark (50 clients, median of --rounds, interleaved): GET at P=1, contended
  SET NX PX on 100 keys at P=1, each with the server's CPU per request; SET NX PX at P=16
Every section prints the load average (the machine is shared) next to its numbers.
"""
import argparse, os, socket, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VALUE = b"0123456789abcdefghijkl"  # 22 bytes, a Redlock token's size
assert len(VALUE) == 22
HZ = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def load():
    return "load %.2f" % os.getloadavg()[0]


class Client:
    """A tiny blocking RESP2 client (enough for PING, DBSIZE, FLUSHALL, INFO)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if t == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise ValueError(line)

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self._reply()


class Server:
    def __init__(self, name, argv_fn):
        self.name = name
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="membench-")
        self.proc = subprocess.Popen(argv_fn(self.port, self.dir), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.c = Client(self.port)
                if self.c.cmd("PING") == "PONG":
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise SystemExit(f"{name} did not start")

    def rss(self):
        with open(f"/proc/{self.proc.pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE

    def cpu(self):
        """utime + stime of the whole process, in seconds."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / HZ

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["rm", "-rf", self.dir])


def gen_file(path, start, end, px):
    """The RESP for SET lock:<n> VALUE PX px, n in [start, end), written once."""
    pxb = str(px).encode()
    head = b"*5\r\n$3\r\nSET\r\n"
    tail = b"$22\r\n" + VALUE + b"\r\n$2\r\nPX\r\n$%d\r\n%s\r\n" % (len(pxb), pxb)
    with open(path, "wb") as f:
        batch = []
        for n in range(start, end):
            k = b"lock:%d" % n
            batch.append(head + b"$%d\r\n%s\r\n" % (len(k), k) + tail)
            if len(batch) == 100000:
                f.write(b"".join(batch))
                batch = []
        f.write(b"".join(batch))


def pipe(server, path):
    with open(path, "rb") as f:
        r = subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], stdin=f,
                           capture_output=True, text=True)
    if "errors: 0" not in r.stdout:
        raise SystemExit(f"{server.name}: load failed: {r.stdout[-300:]} {r.stderr[-300:]}")


def settle_rss(server, secs=1.0):
    time.sleep(secs)
    return server.rss()


def bench(server, args, n):
    """redis-benchmark rps and the server's CPU seconds per request."""
    c0 = server.cpu()
    r = subprocess.run(["redis-benchmark", "-q", "-p", str(server.port), "-c", "50", "-n", str(n)]
                       + args, capture_output=True, text=True)
    c1 = server.cpu()
    out = r.stdout.replace("\r", "\n")
    rps = [l for l in out.split("\n") if "requests per second" in l]
    if not rps:
        raise SystemExit(f"{server.name}: redis-benchmark said {r.stdout} {r.stderr}")
    value = float(rps[-1].split("requests per second")[0].split()[-1])
    return value, (c1 - c0) / n * 1e6


def ping_latency(server, secs=3.0):
    c = Client(server.port)
    lat = []
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.perf_counter()
        c.cmd("PING")
        lat.append(time.perf_counter() - t)
        time.sleep(0.001)
    lat.sort()
    return lat[-1] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def row(label, a, b, unit="", fmt="%.1f", ratio=True):
    ra = fmt % a + unit
    rb = fmt % b + unit
    rt = ("%.2fx" % (a / b)) if ratio and b else ""
    print(f"{label:<52} {ra:>14} {rb:>14} {rt:>8}   [{load()}]", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--binary", help="a redlockd binary to measure instead of the release build")
    ap.add_argument("--only", default="", help="comma list: size,flush,expiry,idle,ping,rps")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    want = lambda s: not only or s in only
    if not a.skip_build and not a.binary:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "redlockd"], cwd=ROOT,
                       check=True)
    binary = a.binary or os.path.join(ROOT, "target/release/redlockd")
    servers = [
        Server("redlockd", lambda p, d: [binary, "--port", str(p), "--restart-delay", "0",
                                         "--dir", d, "--log", "warn", "--max-ttl", "700s"]),
        Server("redis", lambda p, d: ["redis-server", "--port", str(p), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", d,
                                      "--logfile", "/dev/null"]),
    ]
    tmp = tempfile.mkdtemp(prefix="membench-load-")
    try:
        rl, rs = servers
        print(f"{'':<52} {'redlockd':>14} {'redis-server':>14} {'ratio':>8}")
        if want("size"):
            empty = [s.rss() for s in servers]
            done = 0
            for count in sorted({100_000, 1_000_000, a.big}):
                path = os.path.join(tmp, f"{done}-{count}")
                gen_file(path, done, count, 600000)
                for s in servers:
                    pipe(s, path)
                os.unlink(path)
                done = count
                per = [(settle_rss(s, 0.5) - e) / count for s, e in zip(servers, empty)]
                row(f"RSS per lock at {count:,} locks (bytes)", per[0], per[1])
            for s in servers:
                s.c.cmd("FLUSHALL")
            time.sleep(2)
            row("RSS 2 s after FLUSHALL (MB)", rl.rss() / 1e6, rs.rss() / 1e6, fmt="%.1f")
            time.sleep(8)
            row("RSS 10 s after FLUSHALL (MB)", rl.rss() / 1e6, rs.rss() / 1e6, fmt="%.1f")
        if want("expiry") or want("idle") or want("ping"):
            for s in servers:
                s.c.cmd("FLUSHALL")
            live = os.path.join(tmp, "live")
            gen_file(live, 0, 500_000, 600000)
            if want("expiry"):
                short = os.path.join(tmp, "short")
                gen_file(short, 500_000, 1_000_000, 3000)
                gone90, gone_all, loaded, after = [], [], [], []
                # One server at a time: loading the other must not delay the polling.
                for s in servers:
                    pipe(s, live)
                    pipe(s, short)
                    # The last lock's deadline: its SET arrived by now, plus 3 s.
                    last_deadline = time.monotonic() + 3.0
                    loaded.append(s.rss())
                    seen90 = None
                    while True:
                        n = s.c.cmd("DBSIZE")
                        now = time.monotonic()
                        if seen90 is None and n <= 550_000:
                            seen90 = now - last_deadline
                        if n <= 500_000:
                            gone_all.append(now - last_deadline)
                            break
                        if now > last_deadline + 20:
                            gone_all.append(float("inf"))
                            break
                        time.sleep(0.02)
                    gone90.append(seen90 if seen90 is not None else float("inf"))
                    time.sleep(3)
                    after.append(s.rss())
                row("500k of 1M locks expire: 90% gone after deadline (s)", gone90[0], gone90[1],
                    fmt="%.2f")
                row("500k of 1M locks expire: all gone after deadline (s)", gone_all[0],
                    gone_all[1], fmt="%.2f")
                row("RSS with 1M locks loaded (MB)", loaded[0] / 1e6, loaded[1] / 1e6)
                row("RSS 3 s after 500k expired (MB)", after[0] / 1e6, after[1] / 1e6)
                os.unlink(short)
            else:
                for s in servers:
                    pipe(s, live)
            more = os.path.join(tmp, "more")
            gen_file(more, 1_000_000, 1_500_000, 600000)
            for s in servers:
                pipe(s, more)
            for s in servers:
                # Redis may still count expired keys it has not sampled yet.
                assert s.c.cmd("DBSIZE") >= 1_000_000, s.name
            if want("idle"):
                time.sleep(1)
                c0 = [s.cpu() for s in servers]
                time.sleep(10)
                cpu = [(s.cpu() - c) / 10 * 100 for s, c in zip(servers, c0)]
                row("idle CPU over 10 s with 1M locks (% of a core)", cpu[0], cpu[1], fmt="%.2f")
            if want("ping"):
                lat = [ping_latency(s) for s in servers]
                row("PING max latency with 1M locks (ms)", lat[0][0], lat[1][0], fmt="%.2f")
                row("PING p99 latency with 1M locks (ms)", lat[0][1], lat[1][1], fmt="%.2f")
        if want("rps"):
            for s in servers:
                s.c.cmd("FLUSHALL")
            gen = os.path.join(tmp, "get")
            gen_file(gen, 0, 100_000, 600000)
            for s in servers:
                pipe(s, gen)
            cases = [
                ("GET lock:<rand 100k>, P=1", ["-r", "100000", "GET", "lock:__rand_int__"]),
                ("SET NX PX contended (100 keys), P=1",
                 ["-r", "100", "SET", "held:__rand_int__", "v", "NX", "PX", "600000"]),
                ("SET NX PX (rand 100k), P=16",
                 ["-r", "100000", "-P", "16", "SET", "fresh:__rand_int__", "v", "NX", "PX",
                  "30000"]),
            ]
            for label, argv in cases:
                res = {s.name: [] for s in servers}
                for _ in range(a.rounds):
                    for s in servers:
                        res[s.name].append(bench(s, argv, a.requests))
                med = lambda name, i: statistics.median(r[i] for r in res[name])
                row(f"{label}: rps", med("redlockd", 0), med("redis", 0), fmt="%.0f")
                if "P=16" not in label:
                    row(f"{label}: server CPU us/request", med("redlockd", 1), med("redis", 1),
                        fmt="%.2f")
    finally:
        for s in servers:
            s.stop()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
