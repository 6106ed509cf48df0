'use strict';
// node-redis (npm "redis") with default settings: RESP3 via HELLO 3, no fallback.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { createClient } = require('redis');
const { NODES, unique, within } = require('./common');

const COMPARE_AND_DELETE = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end`;

let client;

before(async () => {
  const { host, port } = NODES[0];
  client = createClient({ url: `redis://${host}:${port}` });
  client.on('error', () => {});
  await within(10000, client.connect(), 'connect (HELLO 3 handshake)');
});

after(async () => {
  await within(10000, client.close(), 'close');
});

test('node-redis 6 connects with its defaults', async () => {
  assert.equal(require('redis/package.json').version, '6.3.1');
  assert.equal(client.isReady, true);
  assert.equal(await client.ping(), 'PONG');
});

test('RESP3 replies: HGETALL arrives as a map', async () => {
  const key = unique('noderedis');
  assert.equal(await client.hSet(key, { f1: 'a', f2: 'b' }), 2);
  const raw = await client.sendCommand(['HGETALL', key]);
  assert.ok(!Array.isArray(raw), `expected a RESP3 map, got ${JSON.stringify(raw)}`);
  assert.deepEqual({ ...raw }, { f1: 'a', f2: 'b' });
  assert.equal(await client.del(key), 1);
});

test('SET NX PX, GET, DEL', async () => {
  const key = unique('noderedis');
  assert.equal(await client.set(key, 'token-1', { condition: 'NX', expiration: { type: 'PX', value: 10000 } }), 'OK');
  assert.equal(await client.set(key, 'token-2', { condition: 'NX', expiration: { type: 'PX', value: 10000 } }), null);
  // the older option style still used by many callers
  assert.equal(await client.set(key, 'token-3', { NX: true, PX: 10000 }), null);
  assert.equal(await client.get(key), 'token-1');
  const pttl = await client.pTTL(key);
  assert.ok(pttl > 9000 && pttl <= 10000, `pttl ${pttl}`);
  assert.equal(await client.exists(key), 1);
  assert.equal(await client.del(key), 1);
  assert.equal(await client.get(key), null);
  assert.equal(await client.del(key), 0);
});

test('EVAL compare-and-delete', async () => {
  const key = unique('noderedis');
  assert.equal(await client.set(key, 'mine', { NX: true, PX: 10000 }), 'OK');
  assert.equal(await client.eval(COMPARE_AND_DELETE, { keys: [key], arguments: ['not-mine'] }), 0);
  assert.equal(await client.get(key), 'mine');
  assert.equal(await client.eval(COMPARE_AND_DELETE, { keys: [key], arguments: ['mine'] }), 1);
  assert.equal(await client.get(key), null);
  assert.equal(await client.eval(COMPARE_AND_DELETE, { keys: [key], arguments: ['mine'] }), 0);
});

test('EVALSHA after SCRIPT LOAD, NOSCRIPT after SCRIPT FLUSH', async () => {
  const key = unique('noderedis');
  const sha = await client.scriptLoad(COMPARE_AND_DELETE);
  assert.match(sha, /^[0-9a-f]{40}$/);
  assert.equal(sha, require('node:crypto').createHash('sha1').update(COMPARE_AND_DELETE).digest('hex'));
  await client.set(key, 'mine', { NX: true, PX: 10000 });
  assert.equal(await client.evalSha(sha, { keys: [key], arguments: ['mine'] }), 1);
  assert.equal(await client.scriptFlush(), 'OK');
  await assert.rejects(client.evalSha(sha, { keys: [key], arguments: ['mine'] }), (err) => {
    assert.equal(err.message, 'NOSCRIPT No matching script. Please use EVAL.');
    return true;
  });
});
