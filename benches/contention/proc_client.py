"""One contending Redlock client in its own OS process (benches/contention_clients.py
starts N of them).

    proc_client.py PORTS RESOURCE SECONDS

Connects to the 5 nodes (redis-py asyncio, one connection each), prints "ready", waits
for a line on stdin, then for SECONDS: sends SET RESOURCE <random> NX PX 1000 to all 5
nodes at once, counts the grants, releases with the compare-and-delete script on all 5,
sleeps 0-2 ms, and again. Prints one JSON line: attempts, wins (>= 3 grants), and the
histogram of grants per attempt (index = number of nodes that granted).
"""

import asyncio
import json
import os
import random
import sys
import time

import redis.asyncio as aredis

RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end"
)


async def run(ports, resource, seconds):
    nodes = [aredis.Redis(host="127.0.0.1", port=p) for p in ports]
    shas = [await n.script_load(RELEASE) for n in nodes]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    hist = [0] * (len(nodes) + 1)
    wins = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        token = os.urandom(10).hex()
        replies = await asyncio.gather(
            *[n.set(resource, token, nx=True, px=1000) for n in nodes],
            return_exceptions=True,
        )
        granted = sum(1 for r in replies if r is True)
        hist[granted] += 1
        if granted > len(nodes) // 2:
            wins += 1
        await asyncio.gather(
            *[n.evalsha(s, 1, resource, token) for n, s in zip(nodes, shas)],
            return_exceptions=True,
        )
        await asyncio.sleep(random.uniform(0, 0.002))
    for n in nodes:
        await n.aclose()
    print(json.dumps({"attempts": sum(hist), "wins": wins, "hist": hist, "seconds": seconds}))


if __name__ == "__main__":
    ports = [int(p) for p in sys.argv[1].split(",")]
    asyncio.run(run(ports, sys.argv[2], float(sys.argv[3])))
