'use strict';
// node-redlock 5 (beta) over ioredis 6, both with default settings, across 5 nodes.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { default: Redlock, ExecutionError } = require('redlock');
const { NODES, redlockdOnly, passLockDelay, unique, within } = require('./common');

let clients;
let redlock;

before(async () => {
  clients = NODES.slice(0, 5).map(({ host, port }) => new Redis({ host, port }));
  await within(10000, Promise.all(clients.map((c) => c.ping())), 'PING on every node');
  redlock = new Redlock(clients);
});

after(async () => {
  await within(10000, Promise.all(clients.map((c) => c.quit())), 'QUIT on every node');
});

// When an operation that should succeed fails, say why each node voted against
// (redlock's ExecutionError alone only says "unable to achieve a quorum").
async function ok(promise, what = 'redlock operation') {
  try {
    return await within(15000, promise, what);
  } catch (err) {
    if (err instanceof ExecutionError && err.attempts.length) {
      const stats = await within(5000, err.attempts[err.attempts.length - 1], 'vote stats');
      const reasons = [...new Set([...stats.votesAgainst.values()].map((e) => e.message))];
      err.message += ` [node errors: ${reasons.join(' | ')}]`;
    }
    throw err;
  }
}

async function values(key) {
  return Promise.all(clients.map((c) => c.get(key)));
}

async function allVotes(lock) {
  // acquire() resolves at quorum; the stats promise resolves once every node answered.
  await within(10000, Promise.all(lock.attempts), 'every node to vote');
}

test('ioredis 6 negotiates RESP3 with HELLO 3 by default', async () => {
  assert.equal(require('ioredis/package.json').version, '6.0.0');
  for (const c of clients) {
    assert.equal(c.status, 'ready');
    assert.equal(c.condition.protocol, 3);
    assert.equal(await c.ping(), 'PONG');
  }
});

test('acquire sets the value with PX on every node, release removes it', async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 10000), 'acquire');
  await allVotes(lock);
  assert.match(lock.value, /^[0-9a-f]{32}$/);
  assert.deepEqual(await values(key), Array(5).fill(lock.value));
  for (const c of clients) {
    const pttl = await c.pttl(key);
    assert.ok(pttl > 9000 && pttl <= 10000, `pttl ${pttl}`);
  }
  const released = await ok(lock.release(), 'release');
  await within(10000, Promise.all(released.attempts), 'release votes');
  assert.deepEqual(await values(key), Array(5).fill(null));
});

test('acquire of several resources at once (multi-key scripts)', async () => {
  const keys = [unique('redlock'), unique('redlock'), unique('redlock')];
  const lock = await ok(redlock.acquire(keys, 10000), 'acquire');
  await allVotes(lock);
  for (const key of keys) {
    assert.deepEqual(await values(key), Array(5).fill(lock.value));
  }
  // one of the keys is taken: the whole set is refused
  await assert.rejects(redlock.acquire([unique('redlock'), keys[1]], 10000, { retryCount: 0 }), ExecutionError);
  const released = await ok(lock.release());
  await within(10000, Promise.all(released.attempts), 'release votes');
  for (const key of keys) {
    assert.deepEqual(await values(key), Array(5).fill(null));
  }
});

test('extend replaces the TTL and keeps the value', async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 5000));
  await allVotes(lock);
  const extended = await ok(lock.extend(20000), 'extend');
  await allVotes(extended);
  assert.equal(extended.value, lock.value);
  assert.ok(extended.expiration > lock.expiration);
  for (const c of clients) {
    const pttl = await c.pttl(key);
    assert.ok(pttl > 19000 && pttl <= 20000, `pttl ${pttl}`);
  }
  await ok(extended.release());
});

test('contention: a second acquire with retryCount 0 fails and leaves the holder alone', async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 10000));
  await allVotes(lock);
  await assert.rejects(
    within(10000, redlock.acquire([key], 10000, { retryCount: 0 }), 'second acquire'),
    (err) => {
      assert.ok(err instanceof ExecutionError, String(err));
      assert.equal(err.message, 'The operation was unable to achieve a quorum during its retry window.');
      assert.equal(err.attempts.length, 1);
      return true;
    },
  );
  assert.deepEqual(await values(key), Array(5).fill(lock.value));
  await ok(lock.release());
  const again = await ok(redlock.acquire([key], 10000, { retryCount: 0 }), 'acquire after release');
  await ok(again.release());
});

test('contention: a retrying acquire gets the lock once it is released', async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 10000));
  const waiting = redlock.acquire([key], 10000, { retryCount: 20, retryDelay: 20, retryJitter: 5 });
  // node-redlock retries on the wall clock: give it time to meet the held lock (the
  // attempt count below proves it did).
  await new Promise((r) => setTimeout(r, 50));
  await ok(lock.release());
  const second = await ok(waiting, 'retrying acquire');
  assert.ok(second.attempts.length >= 2, `won at attempt ${second.attempts.length}: never refused while held`);
  assert.notEqual(second.value, lock.value);
  await ok(second.release());
});

test('release of a lock someone else now holds is refused', async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 10000));
  await allVotes(lock);
  await Promise.all(clients.map((c) => c.set(key, 'someone-else', 'PX', 10000)));
  await assert.rejects(redlock.release(lock, { retryCount: 0 }), ExecutionError);
  assert.deepEqual(await values(key), Array(5).fill('someone-else'));
  await Promise.all(clients.map((c) => c.del(key)));
});

test('NOSCRIPT: after SCRIPT FLUSH redlock falls back to EVAL', async () => {
  const key = unique('redlock');
  for (const c of clients) assert.equal(await c.script('FLUSH'), 'OK');
  const lock = await ok(redlock.acquire([key], 10000), 'acquire after flush');
  await allVotes(lock);
  assert.deepEqual(await values(key), Array(5).fill(lock.value));
  for (const c of clients) assert.equal(await c.script('FLUSH'), 'OK');
  const extended = await ok(lock.extend(10000));
  for (const c of clients) assert.equal(await c.script('FLUSH'), 'OK');
  await allVotes(await ok(extended.release()));
  assert.deepEqual(await values(key), Array(5).fill(null));
});

test('expiry: after the TTL passes on every node, another client acquires', redlockdOnly, async () => {
  const key = unique('redlock');
  const lock = await ok(redlock.acquire([key], 10000));
  await allVotes(lock);
  for (const c of clients) assert.equal(await c.call('DEBUG', 'CLOCK', 'ADVANCE', '9999'), 'OK');
  await assert.rejects(redlock.acquire([key], 10000, { retryCount: 0 }), ExecutionError);
  for (const c of clients) assert.equal(await c.pttl(key), 1);
  for (const c of clients) assert.equal(await c.call('DEBUG', 'CLOCK', 'ADVANCE', '2'), 'OK');
  await passLockDelay(clients, () => assert.rejects(
    redlock.acquire([key], 10000, { retryCount: 0 }), ExecutionError,
    'the expired lock was granted during the lock-delay'));
  const second = await ok(redlock.acquire([key], 10000, { retryCount: 0 }), 'acquire after expiry');
  await allVotes(second);
  assert.deepEqual(await values(key), Array(5).fill(second.value));
  // the old holder's release must not remove the new holder's lock
  await assert.rejects(redlock.release(lock, { retryCount: 0 }), ExecutionError);
  assert.deepEqual(await values(key), Array(5).fill(second.value));
  await ok(second.release());
});
