#!/usr/bin/env python3
"""Memory per lock, memory per idle connection, memory given back, idle cost and the hot
path: redlockd, redis-server 7 and valkey-server 8 (where benches/valkey.sh finds or
builds one) side by side in one run.

Usage: benches/memory.py [--big N] [--rounds R] [--requests N] [--skip-build] [--binary PATH] [--base PATH]
                         [--conns 1000,10000,100000] [--no-valkey]
                         [--only size,conn,expiry,idle,ping,rps]
  (release build of redlockd; needs redis-server, redis-cli and redis-benchmark; run as
  root, or with a hard fd limit above the largest --conns, for the connection section)

`benches/memory.py --only conn,size` is the footprint table: RSS per idle connection and
bytes per lock. The contended Redlock table is benches/contention.sh's.

Prints, for every server (ratios: redlockd / each other server):
- RSS per idle connection at 1k, 10k and 100k clients (--conns), each having sent one
  PING and read its PONG: (RSS with them - RSS before) / clients; the 100k clients come
  from several 127.0.0.x source addresses (28k ports each)
- PING p50 / p99 of one active client with no other client and with 10k idle clients
  connected (a ping every 200 us, 20k pings, median of 3 runs), and the server's CPU per
  PING then (utime + stime from /proc: whether idle clients add work to a request)
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


def gen_file(path, start, end, px, digits=0):
    """The RESP for SET lock:<n> VALUE PX px, n in [start, end), written once; n padded
    with zeros to `digits` (redis-benchmark's __rand_int__ is 12 digits)."""
    pxb = str(px).encode()
    head = b"*5\r\n$3\r\nSET\r\n"
    tail = b"$22\r\n" + VALUE + b"\r\n$2\r\nPX\r\n$%d\r\n%s\r\n" % (len(pxb), pxb)
    with open(path, "wb") as f:
        batch = []
        for n in range(start, end):
            k = b"lock:%0*d" % (digits, n)
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


NAMES = []  # the servers' names, redlockd first (set by main)


def header():
    cols = "".join(f" {n:>13}" for n in NAMES)
    ratios = "".join(f" {'vs ' + n:>11}" for n in NAMES[1:])
    print(f"{'':<52}{cols}{ratios}")


def row(label, *values, fmt="%.1f", ratio=True):
    """One line: each server's value, then redlockd's ratio to each other server."""
    cells = "".join(f" {fmt % v:>13}" for v in values)
    ratios = "".join(f" {('%.2fx' % (values[0] / v)) if ratio and v else '':>11}"
                     for v in values[1:])
    print(f"{label:<52}{cells}{ratios}   [{load()}]", flush=True)


def raise_fd_limit(n):
    """Lifts this process's fd limit (the servers it starts inherit it) towards n; returns
    the soft limit now in force. Past the hard limit takes CAP_SYS_RESOURCE."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (max(n, soft), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            return want
        except (ValueError, OSError):
            pass
    return soft


def open_idle(port, count, first=0):
    """`count` connections that each send PING and read +PONG, then stay idle. Source
    addresses 127.0.0.2, .3, ... take 20k connections each (the ephemeral port range is
    28k per address); the servers run with protected mode off to serve them (as Redis,
    protected mode takes only 127.0.0.1 for the loopback)."""
    socks = []
    for i in range(first, first + count):
        s = socket.socket()
        s.bind((f"127.0.{2 + i // 20000 // 250}.{2 + (i // 20000) % 250}", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"PING\r\n")
        socks.append(s)
    for s in socks:
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                raise SystemExit(f"port {port}: an idle client was disconnected")
            got += chunk
        if got != b"+PONG\r\n":
            raise SystemExit(f"port {port}: PING answered {got!r}")
    return socks


def ping_percentiles(server, n=20000, gap=0.0002):
    """p50 and p99 (us) of PING round trips on one connection, one at a time, and the
    server's CPU per PING (us): on a busy machine the tail is mostly the scheduler's,
    while CPU per request shows whether idle clients add work to each request."""
    c0 = server.cpu()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        s.sendall(b"PING\r\n")
        got = b""
        while not got.endswith(b"\n"):
            got += s.recv(64)
        lat.append(time.perf_counter() - t)
        end = time.perf_counter() + gap
        while time.perf_counter() < end:
            pass
    s.close()
    cpu = (server.cpu() - c0) / n * 1e6
    lat.sort()
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6, cpu


def settle_idle_rss(server):
    """RSS once idle clients cost what they will: Redis and Valkey free an idle
    client's query buffer in their cron, once it has been idle 2 s (a slice of the
    clients per tick). Read every second until it moves less than 0.5%, 15 s at most."""
    time.sleep(2)
    last = server.rss()
    for _ in range(13):
        time.sleep(1)
        now = server.rss()
        if abs(now - last) < 0.005 * last:
            return now
        last = now
    return last


def conn_section(servers, counts):
    """RSS per idle connection at each count, and an active client's PING latency with
    none and with 10k idle clients connected."""
    # The clients live in this process and the servers each hold one fd per client.
    limit = raise_fd_limit(max(counts) + 1000)
    for c in [c for c in counts if c + 200 > limit]:
        print(f"skipped: {c:,} idle clients: the fd limit is {limit} and cannot be raised "
              "(the hard limit needs CAP_SYS_RESOURCE)")
    counts = [c for c in counts if c + 200 <= limit]
    for s in servers:
        s.c.cmd("FLUSHALL")
    quiet = [[] for _ in servers]
    for _ in range(3):  # interleaved rounds: the machine's noise is the larger term
        for i, s in enumerate(servers):
            quiet[i].append(ping_percentiles(s))
    per = {c: [] for c in counts}
    busy = []
    for s in servers:
        base = settle_rss(s, 0.5)
        socks = []
        for count in sorted(counts):
            socks += open_idle(s.port, count - len(socks), len(socks))
            per[count].append((settle_idle_rss(s) - base) / count)
            if count == 10000:
                busy.append([ping_percentiles(s) for _ in range(3)])
        assert s.c.cmd("PING") == "PONG", s.name
        for k in socks:
            k.close()
        time.sleep(1)
    for count in sorted(counts):
        row(f"RSS per idle connection, {count:,} clients (bytes)", *per[count], fmt="%.0f")
    if busy:
        med = lambda runs, i: statistics.median(r[i] for r in runs)
        row("PING p50, one client, no other (us)", *[med(q, 0) for q in quiet])
        row("PING p99, one client, no other (us)", *[med(q, 1) for q in quiet])
        row("PING p50, one client, 10k idle connected (us)", *[med(b, 0) for b in busy])
        row("PING p99, one client, 10k idle connected (us)", *[med(b, 1) for b in busy])
        row("server CPU per PING, no other client (us)", *[med(q, 2) for q in quiet], fmt="%.2f")
        row("server CPU per PING, 10k idle connected (us)", *[med(b, 2) for b in busy],
            fmt="%.2f")


def valkey_binary():
    """valkey-server from benches/valkey.sh (found or built), or None with its reason."""
    r = subprocess.run([os.path.join(ROOT, "benches/valkey.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print((r.stderr.strip().splitlines() or ["skipped: valkey-server"])[-1])
        return None
    return r.stdout.strip().splitlines()[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--conns", default="1000,10000,100000")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--no-valkey", action="store_true")
    ap.add_argument("--binary", help="a redlockd binary to measure instead of the release build")
    ap.add_argument("--base", help="a second redlockd binary, measured beside the first")
    ap.add_argument("--only", default="", help="comma list: size,conn,expiry,idle,ping,rps")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    want = lambda s: not only or s in only
    counts = [int(c) for c in a.conns.split(",") if c]
    if want("conn"):
        # Before any server starts: they inherit the limit.
        raise_fd_limit(max(counts) + 1000)
    if not a.skip_build and not a.binary:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "redlockd"], cwd=ROOT,
                       check=True)
    binary = a.binary or os.path.join(ROOT, "target/release/redlockd")
    maxclients = str(max(counts) + 1000)
    valkey = None if a.no_valkey else valkey_binary()
    servers = [
        Server("redlockd", lambda p, d: [binary, "--port", str(p), "--restart-delay", "0",
                                         "--dir", d, "--log", "warn", "--max-ttl", "700s",
                                         "--maxclients", maxclients, "--protected-mode", "no"]),
        Server("redis", lambda p, d: ["redis-server", "--port", str(p), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", d,
                                      "--logfile", "/dev/null", "--maxclients", maxclients,
                                      "--protected-mode", "no"]),
    ]
    if a.base:
        servers.insert(1, Server("base", lambda p, d: [a.base, "--port", str(p), "--restart-delay", "0",
                                         "--dir", d, "--log", "warn", "--max-ttl", "700s",
                                         "--maxclients", maxclients, "--protected-mode", "no"]))
    if valkey:
        servers.append(Server("valkey", lambda p, d: [
            valkey, "--port", str(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", d, "--logfile", "/dev/null", "--maxclients", maxclients,
            "--protected-mode", "no"]))
    NAMES[:] = [s.name for s in servers]
    tmp = tempfile.mkdtemp(prefix="membench-load-")
    try:
        rl = servers[0]
        header()
        if want("conn"):
            conn_section(servers, counts)
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
                row(f"RSS per lock at {count:,} locks (bytes)", *per)
            for s in servers:
                s.c.cmd("FLUSHALL")
            time.sleep(2)
            row("RSS 2 s after FLUSHALL (MB)", *[s.rss() / 1e6 for s in servers])
            time.sleep(8)
            row("RSS 10 s after FLUSHALL (MB)", *[s.rss() / 1e6 for s in servers])
        if want("expiry") or want("idle") or want("ping"):
            for s in servers:
                s.c.cmd("FLUSHALL")
            live = os.path.join(tmp, "live")
            gen_file(live, 0, 500_000, 600000)
            if want("expiry"):
                short = os.path.join(tmp, "short")
                gen_file(short, 500_000, 1_000_000, 3000)
                gone90, gone_all, loaded, after = [], [], [], []
                # One server at a time: loading another must not delay the polling.
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
                row("500k of 1M locks expire: 90% gone after deadline (s)", *gone90, fmt="%.2f")
                row("500k of 1M locks expire: all gone after deadline (s)", *gone_all,
                    fmt="%.2f")
                row("RSS with 1M locks loaded (MB)", *[v / 1e6 for v in loaded])
                row("RSS 3 s after 500k expired (MB)", *[v / 1e6 for v in after])
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
                row("idle CPU over 10 s with 1M locks (% of a core)", *cpu, fmt="%.2f")
            if want("ping"):
                lat = [ping_latency(s) for s in servers]
                row("PING max latency with 1M locks (ms)", *[l[0] for l in lat], fmt="%.2f")
                row("PING p99 latency with 1M locks (ms)", *[l[1] for l in lat], fmt="%.2f")
        if want("rps"):
            for s in servers:
                s.c.cmd("FLUSHALL")
            gen = os.path.join(tmp, "get")
            # The keys GET asks for: every GET finds its key.
            gen_file(gen, 0, 100_000, 600000, digits=12)
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
                for r in range(a.rounds):
                    # Interleaved, the order turning every round.
                    for s in servers[r % len(servers):] + servers[:r % len(servers)]:
                        res[s.name].append(bench(s, argv, a.requests))
                med = lambda name, i: statistics.median(r[i] for r in res[name])
                row(f"{label}: rps", *[med(s.name, 0) for s in servers], fmt="%.0f")
                if "P=16" not in label:
                    row(f"{label}: server CPU us/request", *[med(s.name, 1) for s in servers],
                        fmt="%.2f")
        if not only:
            print("contended Redlock (2/8/32/128 clients, split votes): benches/contention.sh")
    finally:
        for s in servers:
            s.stop()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    sys.exit(main())
