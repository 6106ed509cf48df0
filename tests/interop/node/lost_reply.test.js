'use strict';
// The lost reply: what ioredis-based lock libraries (default settings) do when the
// reply to their lock command is lost (the command ran: the lock is taken; the
// connection closes). The faults come from `redlockd harness` (docs/testing.md),
// driven by the redlockd npm package from this repository's sources on the binary
// run.sh tests. Each case asserts what the library really does.
const path = require('node:path');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { default: Redlock, ExecutionError } = require('redlock');
const { Mutex } = require('redis-semaphore');
const { redlockdOnly, within } = require('./common');

const { startServer, startCluster } = require(path.join(__dirname, '..', '..', '..', 'packaging', 'npm', 'redlockd', 'lib', 'index.js'));
const binary = process.env.INTEROP_SERVER_BIN;

async function until(check, what) {
  const deadline = Date.now() + 5000;
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
  assert.ok(await check(), what);
}

test('redis-semaphore Mutex: a lost SET NX reply locks the holder out of its own lock until the TTL', redlockdOnly, async () => {
  const srv = await startServer({ binary });
  const r = new Redis(srv.url);
  try {
    await srv.nodes[0].record();
    const f = await srv.fault({ action: 'drop_reply', command: 'set', key: 'mutex:job', count: 1 });
    const m = new Mutex(r, 'job', { lockTimeout: 10000, acquireTimeout: 300, retryInterval: 10 });
    // ioredis resends the SET NX on a new connection; it finds the key (set by the
    // lost first try, with this Mutex's own identifier) and answers null, as does
    // every retry: SET NX does not look at whose the key is.
    await assert.rejects(within(10000, m.acquire(), 'acquire'), /Acquire mutex mutex:job timeout/);
    assert.equal(await f.fired(), 1);
    assert.equal(m.isAcquired, false);
    assert.equal(await r.get('mutex:job'), m.identifier);
    const sets = (await srv.nodes[0].history()).filter((e) => e.command[0] === 'set');
    assert.deepEqual(sets[0].outcome, 'reply_dropped');
    assert.ok(sets.length > 2 && sets.slice(1).every((e) => e.reply === null && e.outcome === 'answered'));
    // Stuck, for everyone, until the TTL.
    const other = new Mutex(r, 'job', { lockTimeout: 10000, acquireTimeout: 50, retryInterval: 10 });
    await assert.rejects(other.acquire(), /timeout/);
    await srv.advance(10001);
    await within(10000, other.acquire(), 'acquire after the TTL');
    await other.release();
  } finally {
    r.disconnect();
    await srv.close();
  }
});

test('redlock: acquire replies lost on every node: rejected, its release-on-failure frees all three', redlockdOnly, async () => {
  const cluster = await startCluster({ nodes: 3, binary });
  const clients = cluster.urls.map((u) => new Redis(u));
  const redlock = new Redlock(clients, { retryCount: 0 });
  redlock.on('error', () => {});
  try {
    for (const i of [0, 1, 2]) {
      await cluster.node(i).fault({ action: 'drop_reply', command: 'eval', key: 'job', count: 1 });
    }
    // Each node ran the acquire script (the key is set); ioredis resent it and the
    // second run, finding the key, voted against: no quorum.
    await assert.rejects(within(10000, redlock.acquire(['job'], 10000), 'acquire'), ExecutionError);
    for (const f of await cluster.faults()) assert.equal(f.fired, 1);
    await cluster.clearFaults();
    // The release redlock sends on failure lands after the rejection, without a clock move.
    await until(async () => (await Promise.all(clients.map((c) => c.exists('job')))).every((n) => n === 0), 'freed');
    const lock = await redlock.acquire(['job'], 10000);
    await lock.release();
  } finally {
    clients.forEach((c) => c.disconnect());
    await cluster.close();
  }
});
