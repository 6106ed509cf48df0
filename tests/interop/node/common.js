'use strict';
// Shared plumbing for the Node interop cases. run.sh sets INTEROP_SERVER
// ("redlockd" or "redis") and INTEROP_NODES (comma-separated host:port, 5 nodes).
const assert = require('node:assert/strict');
const crypto = require('node:crypto');

const KIND = process.env.INTEROP_SERVER || 'redlockd';
const NODES = (process.env.INTEROP_NODES || '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((s) => {
    const i = s.lastIndexOf(':');
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
  });

if (NODES.length < 5) {
  throw new Error('INTEROP_NODES must list 5 nodes (run through tests/interop/run.sh)');
}

// Nodes started with redlockd's default flags (run.sh), for clients whose defaults
// store TTLs above the shared nodes' 30 s max-ttl.
const DEFAULT_NODES = (process.env.INTEROP_DEFAULT_NODES || '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((s) => {
    const i = s.lastIndexOf(':');
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
  });

// Cases that need DEBUG CLOCK ADVANCE run only against redlockd.
const redlockdOnly = KIND === 'redlockd'
  ? {}
  : { skip: 'needs redlockd (DEBUG CLOCK); real Redis lacks it' };

// The shared nodes' --lock-delay in ms: 0 in the first pass; run.sh's second pass runs
// the cases whose name starts with "expiry" again on nodes started with --lock-delay 5s
// and sets INTEROP_LOCK_DELAY_MS=5000.
const LOCK_DELAY_MS = Number(process.env.INTEROP_LOCK_DELAY_MS || 0);
if (LOCK_DELAY_MS && KIND !== 'redlockd') {
  throw new Error("INTEROP_LOCK_DELAY_MS is redlockd's --lock-delay; Redis has none");
}

// Moves the manual clock of the given clients' nodes forward by ms.
async function advanceClock(clients, ms) {
  for (const c of clients) assert.equal(await c.call('DEBUG', 'CLOCK', 'ADVANCE', String(ms)), 'OK');
}

// Call when a lock's TTL has just run out (the clocks at its deadline + 1 ms). With the
// shared nodes' lock-delay on, `refused()` (which asserts that a second client is
// refused) runs then and in the delay's last millisecond, and the clocks move past
// the delay; with it off (Redis, and the first pass) does nothing.
async function passLockDelay(clients, refused) {
  if (!LOCK_DELAY_MS) return;
  await refused();
  await advanceClock(clients, LOCK_DELAY_MS - 1);
  await refused();
  await advanceClock(clients, 1);
}

function unique(prefix) {
  return `interop:${prefix}:${crypto.randomBytes(6).toString('hex')}`;
}

// Bound any promise so a server that never answers fails the case.
function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

module.exports = {
  KIND, NODES, DEFAULT_NODES, LOCK_DELAY_MS, redlockdOnly, advanceClock, passLockDelay, unique, within,
};
