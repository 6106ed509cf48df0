"""Lock cycles/s of one contended lock in a redlockd cluster, with or without a live
move of its slot half-way (`redlockd slots move`). Called by benches/cluster_move.sh
(CONTENDED=1), which starts the nodes:

    cluster_move_contended.py REDLOCKD SEED_ADDR TO_ADDR CLIENTS SECONDS move|still

Each of CLIENTS processes runs redis-py's RedisCluster (defaults) in a loop: SET job
TOKEN NX PX 5000, and on a grant DELIFEQ job TOKEN (one cycle when it deleted). Prints
cycles/s over the run, the attempts refused, the errors (the client's, e.g. a refused
write), the releases that found no lock (a lock lost in the move would show here), the
longest time no client completed a cycle, and the move's own output.
"""
import multiprocessing
import subprocess
import sys
import time

from redis.cluster import RedisCluster


def client(seed, seconds, start, out):
    host, port = seed.rsplit(":", 1)
    rc = RedisCluster(host=host, port=int(port))
    cycles = refused = errors = lost = 0
    stamps = []
    token = f"t{multiprocessing.current_process().pid}"
    while time.monotonic() < start:
        time.sleep(0.001)
    end = start + seconds
    while time.monotonic() < end:
        try:
            if rc.set("job", token, nx=True, px=5000):
                if rc.execute_command("DELIFEQ", "job", token) == 1:
                    cycles += 1
                else:
                    lost += 1
                stamps.append(time.monotonic())
            else:
                refused += 1
        except Exception:  # the run counts them; a cluster client retries on its own
            errors += 1
    rc.close()
    out.put((cycles, refused, errors, stamps, lost))


def main():
    redlockd, seed, to, clients, seconds, mode = sys.argv[1:7]
    clients, seconds = int(clients), float(seconds)
    out = multiprocessing.Queue()
    start = time.monotonic() + 1.0
    procs = [
        multiprocessing.Process(target=client, args=(seed, seconds, start, out))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    moved = ""
    if mode == "move":
        time.sleep(max(0.0, start + seconds / 2 - time.monotonic()))
        slot = RedisCluster(host=seed.rsplit(":", 1)[0], port=int(seed.rsplit(":", 1)[1])).keyslot("job")
        r = subprocess.run(
            [redlockd, "slots", "move", "--slots", str(slot), "--to", to, "--seed", seed],
            capture_output=True, text=True, timeout=60,
        )
        moved = (r.stdout + r.stderr).strip()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    cycles = sum(r[0] for r in results)
    stamps = sorted([start] + [s for r in results for s in r[3]] + [start + seconds])
    gap = max(b - a for a, b in zip(stamps, stamps[1:]))
    print(
        f"{mode}: {clients} clients, {seconds:.0f} s: {cycles / seconds:.0f} cycles/s, "
        f"{sum(r[1] for r in results)} refused, {sum(r[2] for r in results)} errors, "
        f"{sum(r[4] for r in results)} releases that found no lock, "
        f"longest gap without a cycle {gap * 1000:.0f} ms"
    )
    if moved:
        print("  " + moved.replace("\n", "\n  "))


if __name__ == "__main__":
    main()
