#!/usr/bin/env python3
"""Sequential connects (connect, hang up) against redlockd and redis-server, side by side.

    benches/connect_storm.py 10000 6401:redlockd 6402:redis

Prints the total time, the slowest connect and how many took over 0.5 s (a SYN the
kernel dropped because the accept queue was full costs the client a 1 s retransmit).
"""
import socket
import sys
import time

n = int(sys.argv[1])
for target in sys.argv[2:]:
    port, name = target.split(":")
    started, worst, stalls = time.time(), 0.0, 0
    for _ in range(n):
        t = time.time()
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
        s.close()
        took = time.time() - t
        worst = max(worst, took)
        stalls += took > 0.5
    total = time.time() - started
    print(f"{name:10} {n} connects: {total:.2f} s, slowest {worst * 1000:.1f} ms, {stalls} over 0.5 s")
