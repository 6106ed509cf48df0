'use strict';
// Seeing the locks (issue 42) with node-redlock 5 over ioredis 6, default settings,
// across 5 nodes: each node's LOCKS INFO names the holder (its ioredis connection) and
// the lock's value, and a holder paused past its TTL shows up as an overrun on every
// node after its late release, in INFO locks and on `redlockd status --json`.
// redlockd only (LOCKS, DEBUG CLOCK).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const Redis = require('ioredis');
const { default: Redlock, ExecutionError } = require('redlock');
const { KIND, NODES, redlockdOnly, advanceClock, unique, within } = require('./common');

let clients;
let redlock;

before(async () => {
  if (KIND !== 'redlockd') return;
  clients = NODES.slice(0, 5).map(({ host, port }) => new Redis({ host, port }));
  await within(10000, Promise.all(clients.map((c) => c.ping())), 'PING on every node');
  redlock = new Redlock(clients);
});

after(async () => {
  if (!clients) return;
  await within(10000, Promise.all(clients.map((c) => c.quit())), 'QUIT on every node');
});

// LOCKS INFO's reply (a RESP3 map, or a flat array) as a plain object.
function asObject(reply) {
  if (reply instanceof Map) return Object.fromEntries(reply);
  if (Array.isArray(reply)) {
    const o = {};
    for (let i = 0; i < reply.length; i += 2) o[reply[i]] = reply[i + 1];
    return o;
  }
  return reply;
}

async function overruns(c) {
  const m = /^lock_overruns:(\d+)\r?$/m.exec(await c.info('locks'));
  assert.ok(m, 'INFO locks has lock_overruns');
  return Number(m[1]);
}

function statusJson() {
  const bin = process.env.INTEROP_SERVER_BIN;
  const addrs = NODES.slice(0, 5).map(({ host, port }) => `${host}:${port}`);
  const out = execFileSync(bin, ['status', '--json', ...addrs], { timeout: 20000, encoding: 'utf8' });
  return new Map(JSON.parse(out).nodes.map((n) => [n.node, n]));
}

function addr(c) {
  return `${c.stream.localAddress}:${c.stream.localPort}`;
}

test('LOCKS INFO on every node names node-redlock\'s holder and token', redlockdOnly, async () => {
  const key = unique('seen');
  const lock = await within(15000, redlock.acquire([key], 10000), 'acquire');
  await within(10000, Promise.all(lock.attempts), 'every node to vote');
  for (const c of clients) {
    const info = asObject(await c.call('LOCKS', 'INFO', key));
    assert.equal(info.value, lock.value);
    assert.ok(info['ttl-ms'] > 9000 && info['ttl-ms'] <= 10000, JSON.stringify(info));
    assert.equal(info['client-addr'], addr(c), 'the holder is redlock\'s ioredis connection');
    assert.equal(info['client-id'], await c.client('ID'));
    assert.equal(info['client-name'], null, 'ioredis sets no name by default');
    assert.equal(info.user, 'default');
    assert.equal(info['client-connected'], 1);
  }
  await within(15000, redlock.release(lock), 'release');
  for (const c of clients) assert.equal(await c.call('LOCKS', 'INFO', key), null);
});

test('a holder paused past its TTL is an overrun on every node after its late release', redlockdOnly, async () => {
  const before = await Promise.all(clients.map(overruns));
  const beforeStatus = statusJson();
  const key = unique('overrun');
  const lock = await within(15000, redlock.acquire([key], 1000), 'acquire');
  await within(10000, Promise.all(lock.attempts), 'every node to vote');
  // The holder "pauses" while every node's clock runs past the TTL.
  await advanceClock(clients, 1001);
  for (const c of clients) assert.equal(await c.call('LOCKS', 'INFO', key), null);
  assert.deepEqual(await Promise.all(clients.map(overruns)), before);
  // node-redlock's release script (the token among its arguments) finds nothing.
  await assert.rejects(within(15000, redlock.release(lock, { retryCount: 0 }), 'release'), ExecutionError);
  assert.deepEqual(await Promise.all(clients.map(overruns)), before.map((n) => n + 1));
  const after = statusJson();
  for (const [node, n] of after) {
    assert.equal(n.up, true, node);
    assert.equal(n.lock_overruns, beforeStatus.get(node).lock_overruns + 1, node);
  }
  // Counted once: the same late release again is no second overrun.
  await assert.rejects(within(15000, redlock.release(lock, { retryCount: 0 }), 'release'), ExecutionError);
  assert.deepEqual(await Promise.all(clients.map(overruns)), before.map((n) => n + 1));
});
