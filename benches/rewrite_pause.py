#!/usr/bin/env python3
"""The append-only log's rewrite under load: the longest stall a client sees while
BGREWRITEAOF runs on a big keyspace, and the rewrite's total time.

Usage: benches/rewrite_pause.py [--keys N] [--binary PATH] [--rounds R]
  (default 1,000,000 keys, target/release/redlockd, 1 round; needs redis-benchmark)

Fills a node (appendonly on, automatic rewrites off) with N durable keys as
benches/durable.sh's SET does (`SET key:<random 12 digits> <33 bytes>`, redis-benchmark
-P 16, 50 clients), then runs two probe clients, each timing every reply: one sends
GET (a read: waits for nothing but the keyspace), one sends SET of a durable key (waits
for its fsync too). After 2 s it sends BGREWRITEAOF from a third connection and polls
INFO persistence every 20 ms until `aof_rewrite_in_progress:0`. Prints, per probe, the
longest reply and the p99 before the rewrite and while it ran; how long BGREWRITEAOF
itself took to answer; and the rewrite's total time (BGREWRITEAOF sent to finished).
"""
import argparse, os, socket, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest


def info(conn):
    text = conn.cmd("INFO", "persistence").decode()
    return dict(l.split(":", 1) for l in text.split("\r\n") if ":" in l)


def probe(port, write, stop, samples):
    c = Conn(port)
    n = 0
    while not stop.is_set():
        t = time.perf_counter()
        if write:
            c.cmd("SET", "probe:%d" % (n % 1000), "v")
        else:
            c.cmd("GET", "key:000000000001")
        samples.append((t, time.perf_counter() - t))
        n += 1


def summary(samples, lo, hi):
    """Replies whose wait overlapped [lo, hi)."""
    lat = sorted(l for t, l in samples if t < hi and t + l >= lo)
    if not lat:
        return "no samples"
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return "max %7.1f ms  p99 %6.2f ms  (%d replies)" % (lat[-1] * 1e3, p99 * 1e3, len(lat))


def run(binary, keys, tmp):
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--dir", tmp, "--restart-delay", "0", "--log", "warn",
         "--auto-aof-rewrite-percentage", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                Conn(port).cmd("PING")
                break
            except OSError:
                time.sleep(0.05)
        subprocess.run(
            ["redis-benchmark", "-p", str(port), "-c", "50", "-P", "16", "-n", str(keys),
             "-r", "1000000000", "-q", "SET", "key:__rand_int__", "x" * 33],
            check=True, stdout=subprocess.DEVNULL)
        ctl = Conn(port)
        dbsize = int(ctl.cmd("DBSIZE"))
        size = int(info(ctl)["aof_current_size"])
        stop = threading.Event()
        reads, writes = [], []
        threads = [threading.Thread(target=probe, args=(port, w, stop, s))
                   for w, s in ((False, reads), (True, writes))]
        for t in threads:
            t.start()
        time.sleep(2)
        base_start = time.perf_counter() - 1.9
        base_end = time.perf_counter()
        sent = time.perf_counter()
        ctl.cmd("BGREWRITEAOF")
        answered = time.perf_counter()
        while info(ctl).get("aof_rewrite_in_progress") != "0":
            time.sleep(0.02)
        done = time.perf_counter()
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        after = info(ctl)
        print("keys %d, log %.1f MB -> base %.1f MB, load average %s" % (
            dbsize, size / 1e6, int(after["aof_base_size"]) / 1e6,
            open("/proc/loadavg").read().split()[0]))
        print("  BGREWRITEAOF answered in %.1f ms; rewrite total %.0f ms" % (
            (answered - sent) * 1e3, (done - sent) * 1e3))
        for name, s in (("GET", reads), ("SET (durable)", writes)):
            print("  %-14s before: %s" % (name, summary(s, base_start, base_end - 0.05)))
            print("  %-14s during: %s" % (name, summary(s, sent, done)))
    finally:
        server.terminate()
        server.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/redlockd"))
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    for _ in range(a.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            run(a.binary, a.keys, tmp)


if __name__ == "__main__":
    sys.exit(main())
