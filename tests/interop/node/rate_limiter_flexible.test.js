'use strict';
// rate-limiter-flexible 11 (RateLimiterRedis) with its defaults except the limit
// itself: 10 points per 60 s window. Its Lua script runs SET NX EX 60, INCRBY and PTTL.
// A 60 s window needs a max-ttl of at least 60 s: the nodes with redlockd's default
// flags take it; the shared nodes (--max-ttl 30s) refuse it with the flag named.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient } = require('redis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const { KIND, NODES, DEFAULT_NODES, unique, within } = require('./common');

let ioredis;
let nodeRedis;

before(async () => {
  assert.ok(DEFAULT_NODES.length > 0, 'INTEROP_DEFAULT_NODES must name a node with default flags');
  const { host, port } = DEFAULT_NODES[0];
  ioredis = new Redis({ host, port });
  nodeRedis = createClient({ socket: { host, port } });
  await within(10000, nodeRedis.connect(), 'node-redis connects');
  await within(10000, ioredis.ping(), 'ioredis PING');
});

after(async () => {
  await within(10000, ioredis.quit(), 'ioredis QUIT');
  await within(10000, nodeRedis.quit(), 'node-redis QUIT');
});

async function spendWindow(storeClient, label, extra = {}) {
  const limiter = new RateLimiterRedis({ storeClient, points: 10, duration: 60, ...extra });
  const who = unique(`rlflx-${label}`);
  for (let i = 1; i <= 10; i++) {
    const res = await within(5000, limiter.consume(who), `consume ${i}`);
    assert.equal(res.remainingPoints, 10 - i);
    assert.ok(res.msBeforeNext > 55000 && res.msBeforeNext <= 60000, `msBeforeNext ${res.msBeforeNext}`);
  }
  // The 11th point is refused: the library rejects with a RateLimiterRes, not an Error.
  await assert.rejects(within(5000, limiter.consume(who), 'consume 11'), (res) => {
    assert.ok(!(res instanceof Error), `refused by an error, not the limit: ${res}`);
    assert.equal(res.remainingPoints, 0);
    assert.equal(res.consumedPoints, 11);
    return true;
  });
  return `rlflx:${who}`;
}

test('ioredis: 10 points per 60 s window on a default-flags node', async () => {
  const key = await spendWindow(ioredis, 'ioredis');
  const pttl = await ioredis.pttl(key);
  assert.ok(pttl > 55000 && pttl <= 60000, `PTTL ${pttl}`);
  assert.equal(await ioredis.get(key), '11');
});

test('node-redis: 10 points per 60 s window on a default-flags node', async () => {
  // The library's documented option for node-redis v4 and later clients.
  const key = await spendWindow(nodeRedis, 'noderedis', { useRedisPackage: true });
  const pttl = await nodeRedis.pTTL(key);
  assert.ok(pttl > 55000 && pttl <= 60000, `PTTL ${pttl}`);
});

test('a 60 s window above a node\'s --max-ttl is refused with the flag named',
  KIND === 'redlockd' ? {} : { skip: "redlockd's --max-ttl; Redis has no such bound" },
  async () => {
    const { host, port } = NODES[0];
    const client = new Redis({ host, port });
    try {
      const limiter = new RateLimiterRedis({ storeClient: client, points: 10, duration: 60 });
      await assert.rejects(within(5000, limiter.consume(unique('rlflx-maxttl')), 'consume'),
        /above this server's max-ttl of 30000 ms \(raise --max-ttl\)/);
    } finally {
      await client.quit();
    }
  });
