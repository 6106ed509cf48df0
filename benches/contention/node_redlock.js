// K contending clients of node-redlock (npm `redlock`) in one node process, each its own
// Redlock over its own 5 ioredis connections, with the library's default settings
// (retryCount 10, retryDelay 200 ms, retryJitter 200 ms, driftFactor 0.01).
//
//   node node_redlock.js INTEROP_DIR PORTS RESOURCE SECONDS K
//
// Prints "ready" once every connection is up, waits for a line on stdin, then each
// client loops for SECONDS: acquire([RESOURCE], 1000 ms), release on success; an
// acquire that gives up after its retries is counted as failed and the client tries
// again. Every attempt's ExecutionStats (votesFor of the 5 nodes) feeds a histogram of
// grants per attempt. Prints one JSON line: cycles (acquires won), attempts, failed
// acquires, hist.
"use strict";
const path = require("path");
const [interopDir, portsArg, resource, secondsArg, kArg] = process.argv.slice(2);
const req = (m) => require(path.join(interopDir, "node_modules", m));
const Redis = req("ioredis");
const Redlock = req("redlock").default;

const ports = portsArg.split(",").map(Number);
const seconds = Number(secondsArg);
const k = Number(kArg);
const hist = new Array(ports.length + 1).fill(0);
let cycles = 0;
let failed = 0;
let counting = false;

function count(attempts) {
  for (const a of attempts) {
    a.then((stats) => {
      if (counting) hist[stats.votesFor.size] += 1;
    });
  }
}

async function client(redlock, deadline) {
  while (Date.now() < deadline) {
    let lock;
    try {
      lock = await redlock.acquire([resource], 1000);
    } catch (e) {
      if (e.attempts) count(e.attempts);
      if (Date.now() < deadline) failed += 1;
      continue;
    }
    count(lock.attempts);
    if (Date.now() < deadline) cycles += 1;
    try {
      await lock.release();
    } catch (e) {
      // a release that missed a quorum (the lock expired) is not a failed cycle
    }
  }
}

async function main() {
  const clients = [];
  for (let i = 0; i < k; i++) {
    const conns = ports.map((p) => new Redis({ host: "127.0.0.1", port: p }));
    await Promise.all(conns.map((c) => new Promise((ok) => c.once("ready", ok))));
    clients.push({ conns, redlock: new Redlock(conns) });
  }
  process.stdout.write("ready\n");
  await new Promise((ok) => process.stdin.once("data", ok));
  counting = true;
  const deadline = Date.now() + seconds * 1000;
  const loops = clients.map((c) => client(c.redlock, deadline));
  // a client still inside acquire's retries at the deadline is not waited for
  await new Promise((ok) => setTimeout(ok, seconds * 1000));
  counting = false;
  const attempts = hist.reduce((a, b) => a + b, 0);
  process.stdout.write(JSON.stringify({ cycles, attempts, failed, hist, seconds }) + "\n");
  void loops;
  for (const c of clients) for (const r of c.conns) r.disconnect();
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
