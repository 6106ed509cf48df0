'use strict';
// redis-semaphore 5 (Semaphore and RedlockSemaphore) over ioredis 6, default settings:
// holders live in a sorted set scored by the client's clock, inside Lua
// (zremrangebyscore, zcard, zadd, zscore, zrem, pexpire).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Semaphore, RedlockSemaphore } = require('redis-semaphore');
const { NODES, unique, within } = require('./common');

let clients;

before(async () => {
  clients = NODES.slice(0, 3).map(({ host, port }) => new Redis({ host, port }));
  await within(10000, Promise.all(clients.map((c) => c.ping())), 'PING on 3 nodes');
});

after(async () => {
  await within(10000, Promise.all(clients.map((c) => c.quit())), 'QUIT on 3 nodes');
});

// The library keys its sets as "semaphore:<name>".
const setKey = (name) => `semaphore:${name}`;

test('Semaphore: acquire up to the limit, contend, refresh, release', async () => {
  const name = unique('sem');
  const [a, b, c] = [1, 2, 3].map(() => new Semaphore(clients[0], name, 2));
  await within(15000, a.acquire(), 'a acquires');
  await within(15000, b.acquire(), 'b acquires');
  assert.equal(a.isAcquired && b.isAcquired, true);
  // No third permit: c keeps retrying (default acquireTimeout 10 s) until aborted.
  await assert.rejects(within(5000, c.tryAcquire(AbortSignal.timeout(300)), 'c tries'), /abort|timeout/i);
  assert.equal(c.isAcquired, false);
  assert.equal(await clients[0].zcard(setKey(name)), 2);
  const before = Number(await clients[0].zscore(setKey(name), a.identifier));
  await new Promise((r) => setTimeout(r, 5));
  // What the refresh interval runs: the holder's score moves to now.
  assert.equal(await within(5000, a._refresh(), 'a refreshes'), true);
  const after = Number(await clients[0].zscore(setKey(name), a.identifier));
  assert.ok(after > before, `refreshed score ${after} > ${before}`);
  await within(5000, a.release(), 'a releases');
  assert.equal(await within(5000, c.tryAcquire(), 'c tries again'), true, 'freed permit taken');
  await within(5000, b.release(), 'b releases');
  await within(5000, c.release(), 'c releases');
  assert.equal(await clients[0].exists(setKey(name)), 0, 'empty set removed');
});

test('RedlockSemaphore on 3 nodes: acquire, contend, refresh, release', async () => {
  const name = unique('redlocksem');
  const a = new RedlockSemaphore(clients, name, 1);
  const b = new RedlockSemaphore(clients, name, 1);
  await within(15000, a.acquire(), 'a acquires on a quorum');
  for (const client of clients) {
    assert.notEqual(await client.zscore(setKey(name), a.identifier), null, 'held on every node');
  }
  // Limit 1 is held: b keeps retrying until aborted.
  await assert.rejects(within(5000, b.tryAcquire(AbortSignal.timeout(300)), 'b tries'), /abort|timeout/i);
  assert.equal(b.isAcquired, false);
  assert.equal(await within(5000, a._refresh(), 'a refreshes'), true);
  await within(5000, a.release(), 'a releases');
  assert.equal(await within(5000, b.tryAcquire(), 'b tries again'), true);
  await within(5000, b.release(), 'b releases');
  for (const client of clients) {
    assert.equal(await client.exists(setKey(name)), 0);
  }
});
